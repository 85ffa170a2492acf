#!/usr/bin/env bash
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# Runs ON THE GPU MACHINE (CUDA driver, CMake, a C++ compiler, Python with
# torch; no LLVM/MLIR, no network), from the repository root:
#
#   bash bench/gpu/run.sh [extra check_and_time.py options]
#
# 1. builds FARuntime standalone from lib/Runtime (CMake; no LLVM needed),
# 2. runs bench/gpu/check_and_time.py on the artifacts bench/gpu/prepare.sh
#    wrote on the build machine (bench/gpu/artifacts, carried along):
#    correctness checks of every check_* kernel, then timing of every
#    bench_* kernel against torch's scaled_dot_product_attention,
# 3. leaves results.md, results.json, run.log (and build.log) in $OUT (the
#    device tool's output folder; bench/gpu/out when unset).
#
# Exits non-zero on a failed build, a missing artifact folder, or any
# mismatch. See bench/gpu/README.md.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ARTIFACTS="${FA_BENCH_ARTIFACTS:-$ROOT/bench/gpu/artifacts}"
OUT_DIR="${OUT:-$ROOT/bench/gpu/out}"
BUILD="${FA_RUNTIME_BUILD:-/tmp/fa-runtime-build}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/run.log"
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }
start=$(date +%s)

say "== fa bench/gpu run.sh ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
if [[ ! -f "$ARTIFACTS/manifest.json" ]]; then
  say "error: no artifacts in $ARTIFACTS: run bench/gpu/prepare.sh on the build"
  say "machine and carry bench/gpu/artifacts to this one"
  exit 1
fi
say "artifacts: $(tr -d '\n' < "$ARTIFACTS/manifest.json")"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
    --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$LOG"
fi

say "== building FARuntime standalone (lib/Runtime) in $BUILD"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! cmake -S "$ROOT/lib/Runtime" -B "$BUILD" "${generator[@]}" \
     -DCMAKE_BUILD_TYPE=Release > "$OUT_DIR/build.log" 2>&1 ||
   ! cmake --build "$BUILD" --parallel "$(nproc 2> /dev/null || echo 8)" \
     >> "$OUT_DIR/build.log" 2>&1; then
  tail -40 "$OUT_DIR/build.log" | tee -a "$LOG"
  say "error: building FARuntime failed (full log: build.log)"
  exit 1
fi
if [[ ! -f "$BUILD/libFARuntime.so" ]]; then
  say "error: $BUILD/libFARuntime.so was not built"
  exit 1
fi
say "built $BUILD/libFARuntime.so in $(( $(date +%s) - start )) s"

say "== checking and timing"
PYTHONUNBUFFERED=1 "$PYTHON" "$ROOT/bench/gpu/check_and_time.py" \
  --lib "$BUILD/libFARuntime.so" --artifacts "$ARTIFACTS" --device cuda \
  --out "$OUT_DIR" "$@" 2>&1 | tee -a "$LOG"
status=${PIPESTATUS[0]}
say "== done in $(( $(date +%s) - start )) s, exit status $status"
exit "$status"
