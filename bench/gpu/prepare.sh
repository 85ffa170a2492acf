#!/usr/bin/env bash
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# Runs on the build machine (LLVM/MLIR, build/bin/fa-compile): compiles the
# kernels bench/gpu/run.sh checks and times on a GPU machine, ahead of time,
# into bench/gpu/artifacts/ (git-ignored; carried to the GPU machine).
#
#   bench/gpu/prepare.sh            # CUDA artifacts for sm_90 and sm_90a
#   bench/gpu/prepare.sh --cpu      # also CPU artifacts of the check matrix,
#                                   # in bench/gpu/artifacts-cpu/ (dry run here)
#
# Matrix:
#   check_<dtype>_d<D>_<causal>_<chip>: dtype bf16/f16/f32, D 64/128, causal
#     none/bottom_right, Hq 8, Hkv 2 (GQA), key lengths and LSE; checked
#     against a reference (fully masked rows included).
#   bench_<dtype>_d128_h16_<causal>_<chip>: dtype bf16/f16, D 128, Hq = Hkv =
#     16, causal none/bottom_right, no key lengths or LSE; timed against
#     torch's scaled_dot_product_attention.
#   check_tc_* and bench_tc_*: the same bf16/f16 kernels compiled with
#     --kernel mma (mma.sync, ldmatrix, cp.async pipeline).
#   check_dec_*: bf16/f16 decode kernels with packed query heads
#     (--pack-gqa), Hq 32, Hkv 8, D 128, key lengths and LSE, checked.
#   decode_pack_* and decode_auto_*: the same shape without causality,
#     packed (SIMT) and with the default family; timed as one decode step
#     (B 4, Nq 1, Nk 1k/8k/32k) against SDPA with enable_gqa.
#   check_paged_* (page sizes 1, 16 with packed heads, 256) and
#     check_varlen_*: the serving kernels (SIMT), checked on their own cases;
#     decode_paged_*: the decode step above from a paged cache (S 16),
#     packed (SIMT) and with the default family (decode_paged_auto_*:
#     mma.sync / wgmma); check_paged_tc_*: 16-row pages on the default
#     family.
#   check_split_* (dense with packed heads, paged S 16) and decode_split_*:
#     split-KV kernels (--split-kv), checked over several part counts and
#     timed with the heuristic's parts.
#   check_bwd_* and bwd_*: attention_backward (the mma.sync dQ and dK/dV
#     kernels, the default family for f16/bf16; *_simt_* the SIMT ones,
#     --kernel simt): bf16/f16 D 64/128 GQA 8/2 with key lengths (f16 D 64
#     also with a window and softcap), checked against float64 gradients;
#     bwd_* (B 1, H 16, D 64/128, bf16, causal none/bottom_right) timed
#     against torch's SDPA backward.
#   check_wg_* and bench_wg_* (sm_90a only): the same bf16/f16 kernels
#     compiled with --kernel wgmma (Hopper wgmma.mma_async from 128-byte-swizzled
#     shared memory, FlashAttention-3 style).
# Each artifact is <name>.json (fa-kernel/3), <name>.ptx, <name>.cubin
# (where ptxas exists) and <name>.h; manifest.json records the commit.
#
# Environment: FA_COMPILE (default build/bin/fa-compile), FA_CHIPS (default
# "sm_90 sm_90a").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FA_COMPILE="${FA_COMPILE:-$ROOT/build/bin/fa-compile}"
CHIPS="${FA_CHIPS:-sm_90 sm_90a}"
OUT="$ROOT/bench/gpu/artifacts"
CPU_OUT="$ROOT/bench/gpu/artifacts-cpu"
WITH_CPU=0
for arg in "$@"; do
  case "$arg" in
    --cpu) WITH_CPU=1 ;;
    *) echo "prepare.sh: unknown argument '$arg' (expected --cpu)" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$FA_COMPILE" ]]; then
  echo "prepare.sh: $FA_COMPILE not found: build it first (ninja -C build fa-compile)" >&2
  exit 1
fi

# Writes one kernel; the name says what it is.
compile() { # NAME DIR ARGS... (the op is attention unless ARGS give --op)
  local name="$1" dir="$2" op=(--op attention)
  shift 2
  [[ " $* " == *" --op "* ]] && op=()
  if ! "$FA_COMPILE" "${op[@]}" "$@" --name "$name" -o "$dir" --quiet; then
    echo "prepare.sh: fa-compile failed for $name" >&2
    exit 1
  fi
  echo "  $name"
}

check_matrix() { # TARGET SUFFIX DIR [EXTRA...]
  local target="$1" suffix="$2" dir="$3" family=(--kernel simt)
  shift 3
  [[ "$target" == cpu ]] && family=()
  for dtype in bf16 f16 f32; do
    for d in 64 128; do
      for causal in none bottom-right; do
        compile "check_${dtype}_d${d}_${causal//-/_}_${suffix}" "$dir" \
          --head-dim "$d" --heads 8 --kv-heads 2 --dtype "$dtype" \
          --causal "$causal" --kv-lens --lse --target "$target" "${family[@]}" "$@"
      done
    done
  done
}

STAGE="$OUT.tmp.$$"
rm -rf "$STAGE"
mkdir -p "$STAGE"
trap 'rm -rf "$STAGE" "$CPU_OUT.tmp.$$"' EXIT

start=$(date +%s)
for chip in $CHIPS; do
  echo "== $chip: check matrix"
  check_matrix "$chip" "$chip" "$STAGE"
  echo "== $chip: check matrix, tensor cores"
  for dtype in bf16 f16; do
    for d in 64 128; do
      for causal in none bottom-right; do
        compile "check_tc_${dtype}_d${d}_${causal//-/_}_${chip}" "$STAGE" \
          --head-dim "$d" --heads 8 --kv-heads 2 --dtype "$dtype" \
          --causal "$causal" --kv-lens --lse --target "$chip" --kernel mma
      done
    done
  done
  if [[ "$chip" == sm_90a ]]; then
    echo "== $chip: check matrix, wgmma"
    for dtype in bf16 f16; do
      for d in 64 128; do
        for causal in none bottom-right; do
          compile "check_wg_${dtype}_d${d}_${causal//-/_}_${chip}" "$STAGE" \
            --head-dim "$d" --heads 8 --kv-heads 2 --dtype "$dtype" \
            --causal "$causal" --kv-lens --lse --target "$chip" --kernel wgmma
        done
      done
    done
  fi
  echo "== $chip: check matrix, score/mask modifiers"
  # Window + softcap + ALiBi + segment ids on every family, and a chunk.
  mods=(--window 40,0 --softcap 30 --alibi heads --segments)
  compile "check_mod_f32_d64_bottom_right_${chip}" "$STAGE" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f32 --causal bottom-right \
    --kv-lens --lse --target "$chip" --kernel simt "${mods[@]}"
  compile "check_mod_tc_bf16_d128_bottom_right_${chip}" "$STAGE" \
    --head-dim 128 --heads 8 --kv-heads 2 --dtype bf16 --causal bottom-right \
    --kv-lens --lse --target "$chip" --kernel mma "${mods[@]}"
  compile "check_mod_tc_f16_d64_chunk_${chip}" "$STAGE" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f16 --causal bottom-right \
    --kv-lens --lse --target "$chip" --kernel mma --chunk 48 --alibi batch-heads
  if [[ "$chip" == sm_90a ]]; then
    compile "check_mod_wg_f16_d128_bottom_right_${chip}" "$STAGE" \
      --head-dim 128 --heads 8 --kv-heads 2 --dtype f16 --causal bottom-right \
      --kv-lens --lse --target "$chip" --kernel wgmma "${mods[@]}"
  fi
  echo "== $chip: decode kernels (packed query heads)"
  # Checked like the matrix (GQA 32/8, key lengths, LSE), and timed as one
  # decode step against SDPA: packed heads (--pack-gqa, SIMT) and the
  # default family (mma.sync / wgmma, one query head per block).
  for dtype in bf16 f16; do
    compile "check_dec_${dtype}_d128_bottom_right_${chip}" "$STAGE" \
      --head-dim 128 --heads 32 --kv-heads 8 --dtype "$dtype" \
      --causal bottom-right --kv-lens --lse --target "$chip" --pack-gqa
    compile "decode_pack_${dtype}_d128_h32_kv8_${chip}" "$STAGE" \
      --head-dim 128 --heads 32 --kv-heads 8 --dtype "$dtype" \
      --target "$chip" --pack-gqa
    compile "decode_auto_${dtype}_d128_h32_kv8_${chip}" "$STAGE" \
      --head-dim 128 --heads 32 --kv-heads 8 --dtype "$dtype" \
      --target "$chip"
  done
  echo "== $chip: serving kernels (paged caches, varlen; SIMT)"
  # Checked on their own cases (shuffled block tables, a shared page, empty
  # sequences; ragged token-major batches); the paged decode kernels are
  # timed as one decode step beside SDPA on the same keys gathered.
  compile "check_paged_bf16_d128_s16_${chip}" "$STAGE" \
    --head-dim 128 --heads 32 --kv-heads 8 --dtype bf16 --causal bottom-right \
    --kv-lens --lse --page-size 16 --target "$chip" --pack-gqa
  compile "check_paged_f16_d64_s256_${chip}" "$STAGE" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f16 --causal bottom-right \
    --kv-lens --lse --page-size 256 --target "$chip"
  compile "check_paged_tc_bf16_d128_s16_${chip}" "$STAGE" \
    --head-dim 128 --heads 32 --kv-heads 8 --dtype bf16 --causal bottom-right \
    --kv-lens --lse --page-size 16 --target "$chip"
  compile "check_paged_f32_d64_s1_${chip}" "$STAGE" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f32 --kv-lens --lse \
    --page-size 1 --target "$chip"
  compile "check_varlen_bf16_d128_${chip}" "$STAGE" \
    --head-dim 128 --heads 8 --kv-heads 2 --dtype bf16 --causal bottom-right \
    --lse --varlen --target "$chip"
  compile "check_varlen_f16_d64_${chip}" "$STAGE" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f16 --lse --varlen \
    --target "$chip" --kernel simt
  for dtype in bf16 f16; do
    compile "decode_paged_${dtype}_d128_h32_kv8_s16_${chip}" "$STAGE" \
      --head-dim 128 --heads 32 --kv-heads 8 --dtype "$dtype" --kv-lens \
      --page-size 16 --target "$chip" --pack-gqa
    compile "decode_paged_auto_${dtype}_d128_h32_kv8_s16_${chip}" "$STAGE" \
      --head-dim 128 --heads 32 --kv-heads 8 --dtype "$dtype" --kv-lens \
      --page-size 16 --target "$chip"
  done
  echo "== $chip: split-KV kernels (SIMT + merge)"
  # Checked with the heuristic's parts, 3 and more parts than key tiles;
  # timed as the decode step above with the heuristic's parts.
  compile "check_split_bf16_d128_${chip}" "$STAGE" \
    --head-dim 128 --heads 32 --kv-heads 8 --dtype bf16 \
    --causal bottom-right --kv-lens --lse --target "$chip" --pack-gqa \
    --split-kv
  compile "check_split_paged_f16_d64_s16_${chip}" "$STAGE" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f16 --causal bottom-right \
    --kv-lens --lse --page-size 16 --target "$chip" --split-kv
  for dtype in bf16 f16; do
    compile "decode_split_${dtype}_d128_h32_kv8_${chip}" "$STAGE" \
      --head-dim 128 --heads 32 --kv-heads 8 --dtype "$dtype" \
      --target "$chip" --pack-gqa --split-kv
  done
  echo "== $chip: backward kernels (dQ + dK/dV: mma.sync, SIMT)"
  for dtype in bf16 f16; do
    for d in 64 128; do
      compile "check_bwd_${dtype}_d${d}_bottom_right_${chip}" "$STAGE" \
        --op attention-backward --head-dim "$d" --heads 8 --kv-heads 2 \
        --dtype "$dtype" --causal bottom-right --kv-lens --target "$chip"
    done
  done
  compile "check_bwd_mod_f16_d64_bottom_right_${chip}" "$STAGE" \
    --op attention-backward --head-dim 64 --heads 8 --kv-heads 2 --dtype f16 \
    --causal bottom-right --kv-lens --window 40,0 --softcap 30 --target "$chip"
  for d in 64 128; do
    compile "check_bwd_simt_f16_d${d}_bottom_right_${chip}" "$STAGE" \
      --op attention-backward --head-dim "$d" --heads 8 --kv-heads 2 \
      --dtype f16 --causal bottom-right --kv-lens --target "$chip" \
      --kernel simt
    compile "bwd_simt_bf16_d${d}_h16_none_${chip}" "$STAGE" \
      --op attention-backward --head-dim "$d" --heads 16 --kv-heads 16 \
      --dtype bf16 --causal none --target "$chip" --kernel simt
  done
  for d in 64 128; do
    for causal in none bottom-right; do
      compile "bwd_bf16_d${d}_h16_${causal//-/_}_${chip}" "$STAGE" \
        --op attention-backward --head-dim "$d" --heads 16 --kv-heads 16 \
        --dtype bf16 --causal "$causal" --target "$chip"
    done
  done
  echo "== $chip: bench kernels"
  for dtype in bf16 f16; do
    for causal in none bottom-right; do
      compile "bench_${dtype}_d128_h16_${causal//-/_}_${chip}" "$STAGE" \
        --head-dim 128 --heads 16 --kv-heads 16 --dtype "$dtype" \
        --causal "$causal" --target "$chip" --kernel simt
      compile "bench_tc_${dtype}_d128_h16_${causal//-/_}_${chip}" "$STAGE" \
        --head-dim 128 --heads 16 --kv-heads 16 --dtype "$dtype" \
        --causal "$causal" --target "$chip" --kernel mma
      if [[ "$chip" == sm_90a ]]; then
        compile "bench_wg_${dtype}_d128_h16_${causal//-/_}_${chip}" "$STAGE" \
          --head-dim 128 --heads 16 --kv-heads 16 --dtype "$dtype" \
          --causal "$causal" --target "$chip" --kernel wgmma
      fi
    done
  done
done

commit="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
dirty=false
if ! git -C "$ROOT" diff --quiet HEAD -- lib include tools 2>/dev/null; then
  dirty=true
fi
cat > "$STAGE/manifest.json" <<JSON
{
  "format": "fa-bench-gpu/1",
  "commit": "$commit",
  "dirty": $dirty,
  "created": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "chips": "$CHIPS",
  "ptxas": "$(command -v ptxas || echo none)"
}
JSON
rm -rf "$OUT"
mv "$STAGE" "$OUT"
echo "wrote $(ls "$OUT"/*.json | grep -vc manifest) kernels to $OUT ($(du -sh "$OUT" | cut -f1)) in $(( $(date +%s) - start )) s"

if [[ "$WITH_CPU" == 1 ]]; then
  echo "== cpu: check matrix (dry run of check_and_time.py --device cpu)"
  rm -rf "$CPU_OUT.tmp.$$"
  mkdir -p "$CPU_OUT.tmp.$$"
  check_matrix cpu cpu "$CPU_OUT.tmp.$$" --cpu host
  compile "check_mod_f32_d64_bottom_right_cpu" "$CPU_OUT.tmp.$$" \
    --head-dim 64 --heads 8 --kv-heads 2 --dtype f32 --causal bottom-right \
    --kv-lens --lse --target cpu --cpu host --window 40,0 --softcap 30 \
    --alibi heads --segments
  compile "check_bwd_f32_d64_bottom_right_cpu" "$CPU_OUT.tmp.$$" \
    --op attention-backward --head-dim 64 --heads 8 --kv-heads 2 --dtype f32 \
    --causal bottom-right --kv-lens --target cpu --cpu host
  rm -rf "$CPU_OUT"
  mv "$CPU_OUT.tmp.$$" "$CPU_OUT"
  echo "wrote CPU artifacts to $CPU_OUT"
fi
