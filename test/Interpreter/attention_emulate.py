# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The GPU kernels, run under the SIMT interpreter (fa-emulate), against an
independent float64 reference.

Each case writes a kernel function in the form fa-run and fa-compile build
(memref arguments -> bufferization.to_tensor -> fa.attention ->
materialize_in_destination), seeded random .npy inputs, and runs
`fa-emulate --check-races`, which maps the function with fa-promote-shared
and fa-map-to-gpu and interprets the resulting gpu.func kernel (and the host
function's launch) block by block, lock-step over the block's threads. The
outputs are compared with a float64 implementation of the semantic contract
in docs/FA/FADialect.md that shares no code with the lowering (test/lib/fa_reference.py,
shared with the CPU numerics tests):

  * float32: relative Frobenius error of O below max(1e-5, 2x the error of a
    naive float32 kernel), and never above 1e-4; ex2.approx/lg2.approx are
    emulated with exp2f/log2f;
  * float16 and bfloat16: max abs error of O at most 2x that of a naive
    kernel (float32 math on the 16-bit inputs, rounded to the 16-bit type)
    plus 1e-4, and never above 2e-3 (float16) / 1.6e-2 (bfloat16);
  * LSE: max abs error on rows with keys below max(1e-4, 2x naive), and
    never above 1e-3;
  * fully masked rows: O exactly 0 and LSE exactly -inf; no NaN anywhere
    (fa-emulate poisons the outputs and fails if any element is left
    unwritten), no race, no out-of-bounds access, no read of uninitialized
    workgroup memory.

The matrix: f32, f16 and bf16 at head dims 64, 96 and 128; causal none,
top-left and bottom-right with Nq < Nk and Nq > Nk; key lengths including 0,
negative and beyond Nk; no keys, no queries; GQA and MQA, Dv != D, an
explicit scale, no LSE; boolean and additive masks with fully masked rows and
broadcasts; the score/mask modifiers (window, softcap, ALiBi, chunk,
segment ids, alone and together); every block-size pair (block-q 16/32/64
x block-kv 16/32/64/128) on shapes no block divides; 2, 4 and 8 warps;
double-buffered K/V; memory ops in a shuffled thread order.

The kernel text, the cases, the reference checks and the runners (run_case,
run_mutations, run_suite, mma_cases) serve attention_emulate_tc.py and
attention_emulate_wg.py too.

Usage: attention_emulate.py FA_EMULATE [SUBSTRING...]
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fa_reference import (modifier_inputs, reference,  # noqa: E402
                          save_attention_inputs, seed_of)
from mlir_exec import MLIR_TYPES, tensor_type  # noqa: E402
from modifier_regions import REGIONS, region_text  # noqa: E402

#===------------------------------------------------------------------------===#
# Rounding helpers
#===------------------------------------------------------------------------===#


def round_bf16(x):
    """float32 -> the nearest bfloat16 value (ties to even), as float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    out = b.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)

#===------------------------------------------------------------------------===#
# Kernels
#===------------------------------------------------------------------------===#

DOUBLE_BUFFER = ("builtin.module(func.func(fa-promote-shared{double-buffer%s}),"
                 "fa-map-to-gpu,canonicalize,cse)")

PACKED_DOUBLE_BUFFER = ("builtin.module(func.func(fa-promote-shared{"
                        "double-buffer pack-gqa=always}),fa-map-to-gpu,"
                        "canonicalize,cse)")

CAUSAL = {"none": "none", "top-left": "top_left",
          "bottom-right": "bottom_right"}


def kernel_text(c, mods=None):
    """A kernel function `@fa_attention` for case `c` (B, Nq, Nk dynamic);
    `mods` (make_modifiers') gives the mod_operands of a case with
    score_mod / mask_mod regions (static shapes)."""
    t = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[c["dtype"]]
    Hq, Hkv, D, Dv = c["Hq"], c["Hkv"], c["D"], c["Dv"]
    ty = {"q": f"?x{Hq}x?x{D}x{t}", "k": f"?x{Hkv}x?x{D}x{t}",
          "v": f"?x{Hkv}x?x{Dv}x{t}", "lens": "?xi32",
          "o": f"?x{Hq}x?x{Dv}x{t}", "lse": f"?x{Hq}x?xf32",
          "alibi": f"{Hq}xf32" if c.get("alibi") == "h" else f"?x{Hq}xf32",
          "qs": "?x?xi32", "ks": "?x?xi32", "bm": f"?x{Hq}x?x?xi8"}
    names = ["q", "k", "v"]
    if c["lens"] is not None:
        names.append("lens")
    if c["mask"] is not None:
        form = c["mask_shape"]
        dims = ("?" if form[0] == "B" else "1") + "x" + \
               (str(Hq) if form[1] == "H" else "1") + "x?x?"
        # bool: i8 bytes turned into i1 inside; i1: an i1 memref taken
        # as it is; float: additive.
        ty["mask"] = dims + {"bool": "xi8", "i1": "xi1",
                             "float": "xf32"}[c["mask"]]
        names.append("mask")
    if c.get("alibi") is not None:
        names.append("alibi")
    if c.get("segments") is not None:
        names += ["qs", "ks"]
    if c.get("block_mask") is not None:
        names.append("bm")
    mod_arrays = (mods or {}).get("mods", [])
    for i, a in enumerate(mod_arrays):
        t = tensor_type(a.shape, MLIR_TYPES[a.dtype])
        ty[f"mod{i}"] = t[len("tensor<"):-1]
        names.append(f"mod{i}")
    names.append("o")
    if c["lse"]:
        names.append("lse")
    args = ", ".join(f"%{n}: memref<{ty[n]}>" for n in names)
    lines = [f"func.func @fa_attention({args}) {{"]
    for n in names:
        w = " writable" if n in ("o", "lse") else ""
        lines.append(f"  %{n}_t = bufferization.to_tensor %{n} restrict{w} : "
                     f"memref<{ty[n]}> to tensor<{ty[n]}>")
    mask_operand = ""
    if c["mask"] == "bool":
        i1 = ty["mask"].replace("xi8", "xi1")
        lines += [
            "  %c0 = arith.constant 0 : index",
            "  %c2 = arith.constant 2 : index",
            "  %c3 = arith.constant 3 : index",
            f"  %d0 = tensor.dim %mask_t, %c0 : tensor<{ty['mask']}>",
            f"  %d2 = tensor.dim %mask_t, %c2 : tensor<{ty['mask']}>",
            f"  %d3 = tensor.dim %mask_t, %c3 : tensor<{ty['mask']}>"]
        dyn = "%d0, %d2, %d3" if ty["mask"].startswith("?") else "%d2, %d3"
        lines += [
            f"  %e = tensor.empty({dyn}) : tensor<{i1}>",
            "  %mask_i1 = linalg.generic {indexing_maps = ["
            "affine_map<(a, b, c, d) -> (a, b, c, d)>, "
            "affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = "
            "[\"parallel\", \"parallel\", \"parallel\", \"parallel\"]} "
            f"ins(%mask_t : tensor<{ty['mask']}>) outs(%e : tensor<{i1}>) {{",
            "  ^bb0(%x: i8, %y: i1):",
            "    %z = arith.constant 0 : i8",
            "    %ne = arith.cmpi ne, %x, %z : i8",
            "    linalg.yield %ne : i1",
            f"  }} -> tensor<{i1}>"]
        mask_operand = f" mask(%mask_i1 : tensor<{i1}>)"
    elif c["mask"] in ("float", "i1"):
        mask_operand = f" mask(%mask_t : tensor<{ty['mask']}>)"
    lens_operand = " kv_lens(%lens_t : tensor<?xi32>)" \
        if c["lens"] is not None else ""
    # The score/mask modifiers (operands after the mask, attributes after
    # the causal clause).
    mod_operands = ""
    if c.get("alibi") is not None:
        mod_operands += f" alibi(%alibi_t : tensor<{ty['alibi']}>)"
    if c.get("segments") is not None:
        mod_operands += (" segments(%qs_t, %ks_t : tensor<?x?xi32>, "
                         "tensor<?x?xi32>)")
    if c.get("q_offset"):
        # A constant in the kernel function (the kernels clone it).
        lines.append(f"  %qoff = arith.constant {c['q_offset']} : index")
        mod_operands += " q_offset(%qoff)"
    if c.get("block_mask") is not None:
        mod_operands += f" block_mask(%bm_t : tensor<{ty['bm']}>)"
    if mod_arrays:
        mod_operands += (" mod_operands(" +
                         ", ".join(f"%mod{i}_t" for i in range(len(mod_arrays)))
                         + " : " + ", ".join(f"tensor<{ty[f'mod{i}']}>"
                                             for i in range(len(mod_arrays)))
                         + ")")
    mod_attrs = ""
    if c.get("window") is not None:
        mod_attrs += f" window({c.get('window')[0]}, {c.get('window')[1]})"
    if c.get("softcap") is not None:
        mod_attrs += f" softcap({c.get('softcap')!r})"
    if c.get("chunk") is not None:
        mod_attrs += f" chunk({c.get('chunk')})"
    if c.get("block_mask") is not None:
        mod_attrs += " block_tiles(%d, %d)" % tuple(c["block_mask"])
    outs = f"%o_t : tensor<{ty['o']}>"
    results = f"tensor<{ty['o']}>"
    if c["lse"]:
        outs += f", %lse_t : tensor<{ty['lse']}>"
        results += f", tensor<{ty['lse']}>"
    scale = f" scale({c['scale']!r})" if c["scale"] is not None else ""
    if c.get("regions"):
        scale += region_text(c["regions"], mod_arrays, c["Nq"], c["Nk"])
    res = "%r:2" if c["lse"] else "%r"
    lines.append(
        f"  {res} = fa.attention ins(%q_t, %k_t, %v_t : tensor<{ty['q']}>, "
        f"tensor<{ty['k']}>, tensor<{ty['v']}>){lens_operand}{mask_operand}"
        f"{mod_operands} outs({outs}) causal({CAUSAL[c['causal']]})"
        f"{mod_attrs}{scale} -> {results}")
    o_res = "%r#0" if c["lse"] else "%r"
    lines.append(f"  bufferization.materialize_in_destination {o_res} in "
                 f"writable %o : (tensor<{ty['o']}>, memref<{ty['o']}>) -> ()")
    if c["lse"]:
        lines.append("  bufferization.materialize_in_destination %r#1 in "
                     f"writable %lse : (tensor<{ty['lse']}>, "
                     f"memref<{ty['lse']}>) -> ()")
    lines += ["  return", "}", ""]
    return "\n".join(lines)

#===------------------------------------------------------------------------===#
# Cases
#===------------------------------------------------------------------------===#


def case(name, **kw):
    c = dict(name=name, B=1, Hq=2, Hkv=2, Nq=37, Nk=50, D=64, Dv=None,
             dtype="float32", causal="none", lens=None, mask=None,
             mask_shape="BHQK", scale=None, lse=True, block_q=None,
             block_kv=None, flags=[], window=None, softcap=None, chunk=None,
             alibi=None, segments=None, q_offset=0, regions=None,
             block_mask=None, block_mask_mutation=None)
    c.update(kw)
    if c["Dv"] is None:
        c["Dv"] = c["D"]
    return c


def mapped_case(name, opts="", **kw):
    """A case of a suite that maps the kernel with its own pass, whose
    options are `opts` (attention_emulate_tc.py, attention_emulate_wg.py)."""
    c = case(name, **kw)
    c["opts"] = opts
    return c


# (Nq, Nk) of the f16 and the bf16 case at each head dim of mma_cases.
MMA_HEAD_DIM_SHAPES = {64: ((37, 50), (20, 45)), 96: ((20, 33), (65, 70)),
                       128: ((17, 140), (70, 64))}


def mma_cases(p, head_dims, mqa_dv, **d256):
    """The f16/bf16 matrix of the tensor-core and wgmma suites, each name
    prefixed by `p`: head dims `head_dims` (of MMA_HEAD_DIM_SHAPES, Nq / Nk
    not multiples of the tiles); causal, both alignments, Nq < Nk and
    Nq > Nk, several KV tiles; key lengths 0, inside, exactly Nk, beyond,
    negative, and no keys at all; MQA with Dv `mqa_dv` and an explicit
    scale; no LSE; boolean masks with fully masked rows (broadcast) and an
    additive one with -inf; head dim 256 with Dv 128 (and the keywords
    `d256`); the threads of every memory op in a random order."""
    cases = []
    for d in head_dims:
        (fq, fk), (bq, bk) = MMA_HEAD_DIM_SHAPES[d]
        cases += [
            mapped_case(f"{p}_f16_d{d}", dtype="float16", D=d, Nq=fq, Nk=fk),
            mapped_case(f"{p}_bf16_d{d}", dtype="bfloat16", D=d, Nq=bq,
                        Nk=bk)]
    return cases + [
        mapped_case(f"{p}_f16_causal_br", dtype="float16", Nq=37, Nk=150,
                    causal="bottom-right"),
        mapped_case(f"{p}_bf16_causal_tl", dtype="bfloat16", Nq=100, Nk=130,
                    causal="top-left"),
        mapped_case(f"{p}_f16_causal_tl_nq_gt_nk", dtype="float16", Nq=90,
                    Nk=20, causal="top-left"),
        mapped_case(f"{p}_f16_causal_br_nq_gt_nk", dtype="float16", Nq=90,
                    Nk=20, causal="bottom-right"),
        mapped_case(f"{p}_bf16_causal_br_gqa_d128", dtype="bfloat16", D=128,
                    B=2, Hq=4, Hkv=2, Nq=70, Nk=133, causal="bottom-right"),
        mapped_case(f"{p}_f16_kv_lens", dtype="float16", B=5, Hq=2, Hkv=1,
                    Nq=9, Nk=77, lens=[0, 5, 77, 200, -3]),
        mapped_case(f"{p}_bf16_kv_lens_causal_gqa", dtype="bfloat16", B=2,
                    Hq=4, Hkv=2, Nq=40, Nk=70, lens=[0, 61],
                    causal="bottom-right"),
        mapped_case(f"{p}_f16_no_keys", dtype="float16", Nq=5, Nk=0),
        mapped_case(f"{p}_f16_mqa_dv", dtype="float16", Hq=4, Hkv=1, Nq=25,
                    Nk=40, D=64, Dv=mqa_dv, scale=0.3),
        mapped_case(f"{p}_bf16_no_lse", dtype="bfloat16", Nq=16, Nk=16,
                    lse=False),
        mapped_case(f"{p}_f16_bool_mask", dtype="float16", B=2, Nq=24, Nk=45,
                    mask="bool"),
        mapped_case(f"{p}_bf16_bool_mask_11_lens", dtype="bfloat16", B=2,
                    Nq=24, Nk=45, mask="bool", mask_shape="11QK",
                    lens=[45, 0], causal="bottom-right"),
        mapped_case(f"{p}_bf16_i1_mask", dtype="bfloat16", B=2, Nq=24,
                    Nk=45, mask="i1", mask_shape="1HQK"),
        mapped_case(f"{p}_f16_float_mask", dtype="float16", Nq=24, Nk=45,
                    mask="float", mask_shape="1HQK"),
        mapped_case(f"{p}_bf16_d256_dv128", dtype="bfloat16", D=256, Dv=128,
                    Nq=20, Nk=70, causal="bottom-right", **d256),
        mapped_case(f"{p}_f16_shuffled_order", dtype="float16", Hq=4, Hkv=2,
                    Nq=37, Nk=70, causal="bottom-right",
                    flags=["--shuffle-order", "--seed", "5"]),
    ]


CASES = [
    # f32 and f16, head dims 64 and 96, Nq not a multiple of block_q.
    case("f32_d64"),
    case("f16_d64", dtype="float16"),
    case("f32_d96", D=96, Nq=20, Nk=33),
    case("f16_d96", D=96, dtype="float16", Nq=20, Nk=33),
    case("bf16_d64", dtype="bfloat16", Nq=20, Nk=45),
    case("f16_d128", D=128, dtype="float16", Nq=17, Nk=40),
    # Causal, both alignments, Nq < Nk and Nq > Nk; several KV tiles.
    case("f32_causal_br", Nq=37, Nk=100, causal="bottom-right"),
    case("f16_causal_br_gqa", dtype="float16", B=2, Hq=4, Hkv=2, Nq=33,
         Nk=90, causal="bottom-right"),
    case("f32_causal_tl_nq_gt_nk", Nq=70, Nk=20, causal="top-left"),
    case("f32_causal_br_nq_gt_nk", Nq=70, Nk=20, causal="bottom-right"),
    # Key lengths: 0, inside, exactly Nk, beyond, negative.
    case("f32_kv_lens", B=5, Hq=2, Hkv=1, Nq=9, Nk=77,
         lens=[0, 5, 77, 200, -3]),
    case("f16_kv_lens_causal_gqa", dtype="float16", B=2, Hq=4, Hkv=2, Nq=40,
         Nk=70, lens=[0, 61], causal="bottom-right"),
    # No keys at all; no queries at all (an empty grid).
    case("f32_no_keys", Nq=5, Nk=0),
    case("f32_no_queries", Nq=0, Nk=10),
    # GQA / MQA, D != Dv, explicit scale, no LSE.
    case("f32_mqa_dv", Hq=4, Hkv=1, Nq=25, Nk=40, D=64, Dv=32, scale=0.3),
    case("f16_no_lse", dtype="float16", Nq=16, Nk=16, lse=False),
    # Masks: boolean with fully masked rows, broadcast; additive with -inf.
    case("f32_bool_mask", B=2, Nq=24, Nk=45, mask="bool"),
    # An i1 memref mask (fa-promote-shared once emitted invalid IR for it).
    case("f32_i1_mask", B=2, Nq=24, Nk=45, mask="i1"),
    case("f16_bool_mask_11_lens", dtype="float16", B=2, Nq=24, Nk=45,
         mask="bool", mask_shape="11QK", lens=[45, 0],
         causal="bottom-right"),
    case("f32_float_mask", Nq=24, Nk=45, mask="float", mask_shape="1HQK"),
    # Block sizes.
    case("f32_blocks_32_32", Nq=45, Nk=70, causal="top-left", block_q=32,
         block_kv=32),
    case("f16_blocks_64_16", dtype="float16", Nq=70, Nk=40, block_q=64,
         block_kv=16, lens=[33]),
    # Double-buffered K/V (tile j+1 copied while tile j is computed).
    case("f16_double_buffer", dtype="float16", B=2, Hq=4, Hkv=2, Nq=37,
         Nk=100, lens=[0, 77], causal="bottom-right",
         flags=["--pipeline", DOUBLE_BUFFER % ""]),
    case("f32_double_buffer_mask", Nq=40, Nk=90, mask="bool",
         flags=["--pipeline", DOUBLE_BUFFER % " block-kv=32"]),
    # Other warp counts per block (64 and 256 threads).
    case("f16_warps_2", dtype="float16", Hq=4, Hkv=2, Nq=37, Nk=70,
         lens=[50], flags=["--warps", "2"]),
    case("f32_warps_8", Nq=37, Nk=70, causal="top-left",
         flags=["--warps", "8"]),
    # The threads of every memory op in a random order.
    case("f32_shuffled_order", Hq=4, Hkv=2, Nq=37, Nk=70,
         causal="bottom-right", flags=["--shuffle-order", "--seed", "5"]),
    # The score/mask modifiers (issue 15): a sliding window skipping leading
    # key tiles (block-kv 16), softcap + ALiBi [B, Hq], a chunk with sorted
    # segment ids, a window emptying rows with key lengths, and everything
    # with GQA, a boolean mask and causality.
    case("f32_window_br", Nq=37, Nk=150, causal="bottom-right",
         window=(40, 0), lens=[130], block_kv=16),
    case("f16_softcap_alibi", dtype="float16", B=2, Nq=45, Nk=70,
         softcap=2.0, alibi="bh"),
    case("f32_chunk_segments", Nq=50, Nk=60, chunk=24, segments="sorted",
         lens=[55], block_kv=16),
    case("f32_window_zero_empty_rows", B=2, Nq=30, Nk=30, window=(0, 0),
         lens=[10, 0]),
    case("f32_q_offset_window_alibi", Nq=40, Nk=90, causal="top-left",
         window=(30, -1), alibi="h", q_offset=25, block_kv=16),
    case("bf16_combined_tl", dtype="bfloat16", B=2, Hq=4, Hkv=2, Nq=40,
         Nk=90, causal="top-left", window=(20, 5), softcap=3.0, alibi="h",
         lens=[90, 33], mask="bool", mask_shape="B1QK", segments="random",
         block_kv=16),
    # General score_mod / mask_mod regions (test/lib/modifier_regions.py):
    # a relative-bias table read at per-lane keys, both regions with a
    # window and softcap, a mask_mod with an additive mask and rows emptied
    # by key lengths, a score_mod after an additive mask.
    case("f32_regions_rel_bias_br", Hq=4, Hkv=2, Nq=37, Nk=70,
         causal="bottom-right", lens=[60], regions="rel_bias", block_kv=16),
    case("f16_regions_both_window", dtype="float16", B=2, Hq=4, Nq=40,
         Nk=90, causal="top-left", window=(20, 5), softcap=3.0,
         regions="both", block_kv=16),
    case("f32_regions_prefix_lm_float_mask", B=2, Nq=30, Nk=45,
         mask="float", lens=[45, 0], regions="prefix_lm"),
    case("bf16_regions_alibi_like_mask", dtype="bfloat16", Nq=33, Nk=40,
         mask="float", regions="alibi_like"),
    # Block sparsity: a prefix-LM mask_mod with its block mask (written
    # from the contract by block_mask_of) on the kernel's tiles and on
    # tiles twice as large; causality and key lengths on top.
    case("f32_block_mask_prefix_lm", B=2, Nq=70, Nk=90, regions="prefix_lm",
         block_mask=(32, 16), block_q=32, block_kv=16),
    case("f16_block_mask_prefix_lm_2x", dtype="float16", B=2, Nq=70, Nk=90,
         causal="bottom-right", lens=[90, 61], regions="prefix_lm",
         block_mask=(64, 32), block_q=32, block_kv=16),
    # Packed query heads (pack-gqa, the decode kernel): the G query heads
    # of a kv head in one tile, query-major. Decode (Nq = 1) with GQA and
    # MQA, key lengths 0 / inside / beyond, bottom-right causal; a few
    # queries (speculative decoding) with a window, softcap and per-head
    # ALiBi; a per-head boolean mask; prefill shapes whose tiles straddle
    # heads; regions reading the head; segments and a chunk; a block mask
    # (not read when packed); double-buffered K/V; no LSE with Dv != D.
    case("pack_f32_decode_gqa", B=3, Hq=8, Hkv=2, Nq=1, Nk=100,
         lens=[100, 37, 0], causal="bottom-right",
         flags=["--pack-gqa", "always"]),
    case("pack_f16_decode_mqa_window", dtype="float16", B=2, Hq=8, Hkv=1,
         Nq=1, Nk=150, lens=[150, 61], causal="bottom-right",
         window=(40, 0), block_kv=16, flags=["--pack-gqa", "always"]),
    case("pack_f32_speculative_softcap_alibi", B=2, Hq=4, Hkv=2, Nq=5,
         Nk=70, causal="bottom-right", softcap=2.0, alibi="bh",
         flags=["--pack-gqa", "always"]),
    case("pack_bf16_nq16_g8", dtype="bfloat16", Hq=8, Hkv=1, Nq=16, Nk=45,
         causal="bottom-right", lens=[40], flags=["--pack-gqa", "always"]),
    case("pack_f32_head_mask", B=2, Hq=4, Hkv=2, Nq=3, Nk=45, mask="bool",
         flags=["--pack-gqa", "always"]),
    case("pack_f16_prefill_straddle_float_mask", dtype="float16", Hq=4,
         Hkv=2, Nq=37, Nk=90, causal="top-left", mask="float",
         mask_shape="1HQK", flags=["--pack-gqa", "always"]),
    case("pack_f32_prefill_q_offset_alibi_h", Hq=6, Hkv=2, Nq=23, Nk=90,
         causal="top-left", window=(30, -1), alibi="h", q_offset=25,
         block_kv=16, flags=["--pack-gqa", "always"]),
    case("pack_f32_regions_rel_bias", Hq=4, Hkv=2, Nq=3, Nk=70,
         causal="bottom-right", lens=[60], regions="rel_bias", block_kv=16,
         flags=["--pack-gqa", "always"]),
    case("pack_f32_chunk_segments", Hq=4, Hkv=2, Nq=9, Nk=60, chunk=24,
         segments="sorted", lens=[55], block_kv=16,
         flags=["--pack-gqa", "always"]),
    case("pack_f32_block_mask_prefix_lm", B=2, Hq=4, Hkv=2, Nq=20, Nk=90,
         regions="prefix_lm", block_mask=(32, 16), block_q=32, block_kv=16,
         flags=["--pack-gqa", "always"]),
    case("pack_f16_double_buffer", dtype="float16", B=2, Hq=4, Hkv=2, Nq=2,
         Nk=100, lens=[0, 77], causal="bottom-right",
         flags=["--pipeline", PACKED_DOUBLE_BUFFER]),
    case("pack_f32_mqa_dv_no_lse", Hq=4, Hkv=1, Nq=1, Nk=40, D=64, Dv=32,
         scale=0.3, lse=False, flags=["--pack-gqa", "always"]),
] + [
    # Every element type and head dim, alternating the causal alignment and
    # key lengths.
    case("sweep_%s_d%d" % (dt, d), dtype=dt, D=d, Hq=4, Hkv=2, Nq=19, Nk=45,
         causal=("none", "top-left", "bottom-right")[i % 3],
         lens=[40] if i % 2 else None)
    for i, (dt, d) in enumerate((dt, d)
                                for dt in ("float32", "float16", "bfloat16")
                                for d in (64, 96, 128))
] + [
    # Every block-size pair on a shape no block divides, alternating the
    # masking features.
    case("sweep_q%d_kv%d" % (bq, bkv), B=2, Hq=4, Hkv=2, Nq=45, Nk=83, D=24,
         Dv=16, block_q=bq, block_kv=bkv,
         causal=("top-left", "bottom-right", "none")[i % 3],
         lens=[83, 50] if i % 2 else None,
         mask=(None, "bool", "float")[i % 3])
    for i, (bq, bkv) in enumerate((bq, bkv) for bq in (16, 32, 64)
                                  for bkv in (16, 32, 64, 128))
]

#===------------------------------------------------------------------------===#
# Running
#===------------------------------------------------------------------------===#


def make_inputs(c, rng):
    B, Hq, Hkv, Nq, Nk, D, Dv = (c[x] for x in
                                 ("B", "Hq", "Hkv", "Nq", "Nk", "D", "Dv"))
    dt = np.float32 if c["dtype"] == "bfloat16" else np.dtype(c["dtype"])
    q = rng.standard_normal((B, Hq, Nq, D)).astype(dt)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(dt)
    v = rng.standard_normal((B, Hkv, Nk, Dv)).astype(dt)
    if c["dtype"] == "bfloat16":
        q, k, v = round_bf16(q), round_bf16(k), round_bf16(v)
    lens = None if c["lens"] is None else np.array(c["lens"], np.int32)
    mask = None
    if c["mask"] is not None:
        form = c["mask_shape"]
        shape = (B if form[0] == "B" else 1, Hq if form[1] == "H" else 1,
                 Nq, Nk)
        rows = rng.choice(Nq, size=max(1, Nq // 8), replace=False)
        if c["mask"] in ("bool", "i1"):
            mask = rng.random(shape) < 0.7
            mask[..., rows, :] = False
        else:
            mask = rng.standard_normal(shape).astype(np.float32)
            mask[rng.random(shape) < 0.2] = -np.inf
            mask[..., rows, :] = -np.inf
    return q, k, v, lens, mask


def check(c, q, k, v, lens, mask, o, lse, mods=None):
    """Compares fa-emulate's outputs with the reference; returns (ok,
    summary). `mods`: the modifier inputs of make_modifiers."""
    scale = c["scale"] if c["scale"] is not None else 1.0 / np.sqrt(c["D"])
    mods = mods or {}
    kw = dict(window=c["window"], softcap=c["softcap"], chunk=c["chunk"],
              alibi=mods.get("alibi"),
              segments=(mods["qs"], mods["ks"]) if "qs" in mods else None,
              q_offset=c["q_offset"], score_mod=mods.get("score_mod"),
              mask_mod=mods.get("mask_mod"))
    o_ref, lse_ref, empty = reference(q, k, v, scale, c["causal"], lens, mask,
                                      np.float64, **kw)
    o_naive, lse_naive, _ = reference(q, k, v, scale, c["causal"], lens, mask,
                                      np.float32, **kw)
    problems = []
    o64 = o.astype(np.float64)
    if np.isnan(o64).any():
        problems.append("%d NaN in O" % np.isnan(o64).sum())
    if empty.any() and not (o64[empty] == 0).all():
        problems.append("fully masked rows of O are not exactly 0")
    if c["dtype"] in ("float16", "bfloat16"):
        naive16 = o_naive.astype(np.float16) if c["dtype"] == "float16" \
            else round_bf16(o_naive)
        err = np.nanmax(np.abs(o64 - o_ref)) if o.size else 0.0
        naive_err = np.max(np.abs(naive16.astype(np.float64) - o_ref)) \
            if o.size else 0.0
        # The tolerance follows the naive kernel's error, but is capped so
        # that a reference that is wrong as a whole (which widens the naive
        # error too) cannot pass: about 4 and 2 units in the last place of
        # O ~ 1 for float16 and bfloat16.
        tol = min(2 * naive_err + 1e-4,
                  2e-3 if c["dtype"] == "float16" else 1.6e-2)
        summary = "O max abs err %.2e (naive %.2e, tol %.2e)" % (
            err, naive_err, tol)
    else:
        ref_norm = np.linalg.norm(o_ref)
        err = np.linalg.norm(o64 - o_ref) / ref_norm if ref_norm > 0 else \
            np.linalg.norm(o64)
        naive_err = np.linalg.norm(o_naive - o_ref) / ref_norm \
            if ref_norm > 0 else 0.0
        tol = min(max(1e-5, 2 * naive_err), 1e-4)
        summary = "O rel err %.2e (tol %.2e)" % (err, tol)
    if not err <= tol:
        problems.append("O error %.3e exceeds %.3e" % (err, tol))
    if lse is not None:
        lse64 = lse.astype(np.float64)
        if np.isnan(lse64).any():
            problems.append("%d NaN in LSE" % np.isnan(lse64).sum())
        if empty.any() and not (lse64[empty] == -np.inf).all():
            problems.append("fully masked rows of LSE are not exactly -inf")
        finite = ~empty
        if finite.any():
            lerr = np.nanmax(np.abs(lse64[finite] - lse_ref[finite]))
            lnaive = np.max(np.abs(lse_naive[finite] - lse_ref[finite]))
        else:
            lerr = lnaive = 0.0
        ltol = min(max(1e-4, 2 * lnaive), 1e-3)
        if not lerr <= ltol:
            problems.append("LSE error %.3e exceeds %.3e" % (lerr, ltol))
        summary += ", LSE err %.2e" % lerr
    summary += ", %d empty rows" % int(empty.sum())
    return not problems, summary + ("" if not problems else
                                    ": " + "; ".join(problems))


def make_modifiers(c, rng):
    """The modifier operands of case `c`: ALiBi slopes ([Hq] or [B, Hq]) and
    segment ids ([B, Nq], [B, Nk]: sorted with some empty documents, or
    random)."""
    mods = modifier_inputs(rng, c["B"], c["Hq"], c["Nq"], c["Nk"],
                           c["alibi"], c["segments"])
    if c.get("regions"):
        make, _, _, ref_score, ref_mask = REGIONS[c["regions"]]
        arrays = make(rng, c["B"], c["Hq"], c["Nq"], c["Nk"])
        mods["mods"] = arrays
        Nq = c["Nq"]
        if ref_score:
            mods["score_mod"] = lambda s, b, h, q, k: ref_score(
                s, b, h, q, k, arrays, Nq)
        if ref_mask:
            mods["mask_mod"] = lambda b, h, q, k: ref_mask(b, h, q, k, arrays)
    if c.get("block_mask") is not None:
        mods["bm"] = block_mask_of(c, mods["mask_mod"])
    return mods


def block_mask_of(c, mask_mod):
    """The block mask of `mask_mod` for case `c`'s block_mask = (TQ, TK),
    written from the op's contract (0: no key of the tile kept, 1: some,
    2: all, counting rows below Nq and keys below Nk), independently of
    fa.create_block_mask; `block_mask_mutation` corrupts it on purpose:
    "partial_full" marks a partial tile full, "visited_empty" a tile with
    kept keys empty (the suite must then fail)."""
    B, Hq, Nq, Nk = c["B"], c["Hq"], c["Nq"], c["Nk"]
    tq, tk = c["block_mask"]
    b, h, q, k = np.meshgrid(np.arange(B), np.arange(Hq), np.arange(Nq),
                             np.arange(Nk), indexing="ij")
    keep = np.broadcast_to(mask_mod(b, h, q, k), (B, Hq, Nq, Nk))
    nqt, nkt = -(-Nq // tq), -(-Nk // tk)
    bm = np.zeros((B, Hq, nqt, nkt), dtype=np.int8)
    for i in range(nqt):
        for j in range(nkt):
            tile = keep[:, :, i * tq:(i + 1) * tq, j * tk:(j + 1) * tk]
            bm[:, :, i, j] = np.where(tile.all(axis=(2, 3)), 2,
                                      np.where(tile.any(axis=(2, 3)), 1, 0))
    how = c.get("block_mask_mutation")
    if how is not None:
        want = 1 if how == "partial_full" else None
        at = np.argwhere(bm == 1) if want else np.argwhere(bm != 0)
        assert len(at), "no tile to corrupt"
        bm[tuple(at[len(at) // 2])] = 2 if want else 0
    return bm


def modifier_flags(paths, mods):
    """Writes the modifier inputs and returns fa-emulate's flags for them."""
    flags = []
    for name, flag in (("alibi", "--alibi"), ("qs", "--q-segments"),
                       ("ks", "--k-segments"), ("bm", "--block-mask")):
        if name in mods:
            np.save(paths[name], mods[name])
            flags += [flag, paths[name]]
    for i, a in enumerate(mods.get("mods", [])):
        path = paths["o"][:-len(".o.npy")] + f".mod{i}.npy"
        np.save(path, a)
        flags += ["--mod-operand", path]
    return flags


def prepare_case(c, tmp):
    """Writes the kernel text of case `c` and returns its seeded inputs
    (q, k, v, lens, mask, modifiers), the file name prefix and the .npy
    paths."""
    rng = np.random.default_rng(seed_of(c["name"]))
    q, k, v, lens, mask = make_inputs(c, rng)
    mods = make_modifiers(c, rng)
    base = os.path.join(tmp, c["name"])
    paths = {n: base + "." + n + ".npy"
             for n in ("q", "k", "v", "lens", "mask", "o", "lse", "alibi",
                       "qs", "ks", "bm")}
    with open(base + ".mlir", "w") as f:
        f.write(kernel_text(c, mods))
    return (q, k, v, lens, mask, mods), base, paths


def input_flags(c, inputs, paths, block_sizes=True):
    """Writes the inputs of case `c` and returns fa-emulate's flags."""
    q, k, v, lens, mask, mods = inputs
    flags = save_attention_inputs(
        paths, q, k, v, lens, mask, c["lse"],
        c["block_q"] if block_sizes else None,
        c["block_kv"] if block_sizes else None)
    return flags + modifier_flags(paths, mods)


def check_outputs(c, inputs, paths):
    """Reads the outputs of a run of case `c` back and checks their dtype,
    shape and values against the reference; returns (ok, summary)."""
    q, k, v, lens, mask, mods = inputs
    o = np.load(paths["o"])
    lse = np.load(paths["lse"]) if c["lse"] else None
    expected_dtype = np.float16 if c["dtype"] == "float16" else np.float32
    if o.dtype != expected_dtype or o.shape != (c["B"], c["Hq"], c["Nq"],
                                                c["Dv"]):
        return False, "O is %s %s" % (o.dtype, o.shape)
    if c["dtype"] == "bfloat16" and not np.array_equal(
            round_bf16(o), o, equal_nan=True):
        return False, "bf16 O holds values that are not bfloat16"
    return check(c, q, k, v, lens, mask, o, lse, mods)


def run_fa_emulate(cmd):
    """Runs an fa-emulate command line; returns (process, seconds)."""
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc, time.time() - start


def run_case(fa_emulate, c, tmp, pipeline=None, needles=()):
    """Runs case `c` through `fa-emulate --check-races` (the kernel mapped
    with `pipeline` where given) and checks its outputs; the mapped module
    must hold each of `needles`. Returns (ok, summary, seconds)."""
    inputs, base, paths = prepare_case(c, tmp)
    mapped = base + ".mapped.mlir"
    cmd = [fa_emulate, base + ".mlir", "--check-races"]
    if pipeline is not None:
        cmd += ["--pipeline", pipeline]
    elif "--kernel" not in c["flags"]:
        # The SIMT kernels: fa-emulate's default, --kernel auto, maps f16
        # kernels to mma.sync.
        cmd += ["--kernel", "simt"]
    if needles:
        cmd += ["--dump-mapped", mapped]
    cmd += input_flags(c, inputs, paths)
    cmd += c["flags"]
    proc, elapsed = run_fa_emulate(cmd)
    if proc.returncode != 0:
        return False, "fa-emulate failed (exit %d): %s" % (
            proc.returncode, proc.stderr.strip()[:2000]), elapsed
    if needles:
        with open(mapped) as f:
            text = f.read()
        for needle in needles:
            if needle not in text:
                return False, "the mapped kernel lacks '%s'" % needle, elapsed
    ok, summary = check_outputs(c, inputs, paths)
    return ok, summary, elapsed


def run_mutations(fa_emulate, c, tmp, pipeline, mutations):
    """Maps case `c` with `pipeline` and checks it, then applies each of
    `mutations`, (name, old text, new text[, anchor]): the first `old` (after
    the first `anchor`, when given) of the mapped module replaced by `new`;
    each must make fa-emulate fail or the comparison fail. Returns the
    number of failures."""
    inputs, base, paths = prepare_case(c, tmp)
    q, k, v, lens, mask, mods = inputs
    flags = input_flags(c, inputs, paths, block_sizes=False)
    mapped = base + ".mapped.mlir"
    proc, _ = run_fa_emulate([fa_emulate, base + ".mlir", "--pipeline",
                              pipeline, "--dump-mapped", mapped] + flags)
    if proc.returncode != 0:
        print("FAIL mutations: the unmutated kernel failed: " +
              proc.stderr.strip()[:500])
        return 1
    ok, summary = check_outputs(c, inputs, paths)
    if not ok:
        print("FAIL mutations: the unmutated kernel is wrong: " + summary)
        return 1
    with open(mapped) as f:
        text = f.read()
    roles = "q,k,v" + (",kv_lens" if lens is not None else "") + \
        (",mask" if mask is not None else "") + \
        (",alibi" if "alibi" in mods else "") + \
        (",q_segments,k_segments" if "qs" in mods else "") + \
        (",block_mask" if "bm" in mods else "") + \
        ",mod" * len(mods.get("mods", [])) + ",o" + \
        (",lse" if c["lse"] else "")
    failures = 0
    for name, old, new, *anchor in mutations:
        start = text.find(anchor[0]) if anchor else 0
        at = text.find(old, start) if start >= 0 else -1
        if at < 0:
            print("FAIL mutation %-24s: '%s' not in the kernel" % (name, old))
            failures += 1
            continue
        path = base + "." + name + ".mlir"
        with open(path, "w") as f:
            f.write(text[:at] + new + text[at + len(old):])
        if os.path.exists(paths["o"]):
            os.remove(paths["o"])
        proc, _ = run_fa_emulate([fa_emulate, path, "--check-races",
                                  "--arg-roles", roles] + flags)
        if proc.returncode != 0:
            how = "fa-emulate: " + proc.stderr.strip().splitlines()[0][:160]
            caught = True
        else:
            ok, summary = check(c, q, k, v, lens, mask, np.load(paths["o"]),
                                np.load(paths["lse"]) if c["lse"] else None,
                                mods)
            caught, how = not ok, summary[:160]
        failures += not caught
        print("%s mutation %-24s caught: %s" % (
            "PASS" if caught else "FAIL", name, how if caught else "NO"),
            flush=True)
    return failures


def run_block_mask_mutations(fa_emulate, c, tmp, pipeline, kinds):
    """Runs case `c` (with a block mask) with its block mask corrupted in
    each of `kinds` (block_mask_of's mutations): a kernel that skips the
    tiles marked empty and the mask_mod on tiles marked full must then give
    wrong results. Returns the number of corruptions not caught."""
    failures = 0
    for kind in kinds:
        bad = dict(c, name=c["name"] + "_" + kind, block_mask_mutation=kind)
        ok, summary, _ = run_case(fa_emulate, bad, tmp, pipeline)
        failures += ok
        print("%s mutation %-24s caught: %s" % (
            "FAIL" if ok else "PASS", "block_mask_" + kind,
            "NO" if ok else summary[:160]), flush=True)
    return failures


def run_simt_mutations(fa_emulate, filters, cases, tmp):
    if filters and "mutations" not in filters:
        return 0
    # The SIMT kernel applies the mask_mod on every visited tile, so only
    # skipping is observable.
    return run_block_mask_mutations(
        fa_emulate, next(c for c in CASES
                         if c["name"] == "f32_block_mask_prefix_lm"),
        tmp, None, ("visited_empty",))


def run_suite(argv, doc, cases, what, run=run_case, extra=None):
    """The main of a suite: argv is [script, FA_EMULATE, SUBSTRING...]. Runs
    `run(fa_emulate, c, tmp)` -> (ok, summary, seconds) for each of `cases`
    whose name holds a SUBSTRING (all without one), then, where given,
    `extra(fa_emulate, filters, cases, tmp)` -> failures."""
    if len(argv) < 2:
        print(doc)
        return 2
    fa_emulate = argv[1]
    filters = argv[2:]
    cases = [c for c in cases
             if not filters or any(f in c["name"] for f in filters)]
    failures = 0
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="fa-emulate-") as tmp:
        for c in cases:
            ok, summary, elapsed = run(fa_emulate, c, tmp)
            failures += not ok
            print("%s %-30s %6.2fs  %s" % ("PASS" if ok else "FAIL",
                                           c["name"], elapsed, summary),
                  flush=True)
        if extra:
            failures += extra(fa_emulate, filters, cases, tmp)
    print("%d/%d %s passed under the interpreter in %.1fs" % (
        len(cases) - min(failures, len(cases)), len(cases), what,
        time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run_suite(sys.argv, __doc__, CASES, "cases",
                       extra=run_simt_mutations))
