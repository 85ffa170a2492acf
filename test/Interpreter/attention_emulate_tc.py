# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The tensor-core GPU kernels (fa-map-to-tensor-cores: ldmatrix, mma.sync
m16n8k16, cp.async pipeline) run under the SIMT interpreter (fa-emulate)
against an independent float64 reference.

Same structure, kernels, inputs and reference as attention_emulate.py (whose
helpers this reuses); the kernel function is mapped with
`--pipeline builtin.module(fa-map-to-tensor-cores{...},canonicalize,cse)`
and interpreted with race and bounds checks.

Criteria: those of attention_emulate.py for f16/bf16 (the tensor-core
inputs), unchanged although P is rounded to the 16-bit type before P V: max
abs error of O at most 2x that of a naive kernel (float32 math on the 16-bit
inputs, O rounded to the 16-bit type) plus 1e-4; LSE within max(1e-4, 2x
naive); fully masked rows give O = 0 and LSE = -inf exactly; no NaN, no race,
no out-of-bounds access, no read of uninitialized workgroup memory. Each case
also checks that the mapped module really holds the tensor-core kernel
(nvgpu.mma.sync, no SIMT fallback).

The matrix: f16 and bf16 at head dims 64, 96, 128 and 256; causal none, top-left
and bottom-right with Nq < Nk and Nq > Nk; key lengths 0, inside, beyond Nk
and negative; no keys; GQA and MQA; Dv != D; an explicit scale; no LSE;
boolean and additive masks (broadcast, fully masked rows); Nq and Nk not
multiples of the tiles; 3 stages, block-q 32 and block-kv 32; the score/mask
modifiers (window, softcap, ALiBi, chunk, segment ids, alone and together,
rows emptied by a window). Then four mutations of a mapped kernel (V without
.trans, a missing barrier, a cp.async wait one group short, a wrong shuffle
offset) and two of a modifier kernel (the window's first key too late, the
wrong softcap) must each be caught.

Usage: attention_emulate_tc.py FA_EMULATE [SUBSTRING...]
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from attention_emulate import (mapped_case, mma_cases,  # noqa: E402
                               run_block_mask_mutations, run_case,
                               run_mutations, run_suite)

PIPELINE = "builtin.module(fa-map-to-tensor-cores{%s},canonicalize,cse)"

# The score/mask modifiers (issue 15) on the mma.sync kernel: a sliding
# window that skips leading key tiles (block-kv 16 so that several are) and
# cuts others, softcap + ALiBi [B, Hq] on every tile, a chunk with sorted
# segment ids (every tile masked), a window that empties rows with key
# lengths, and everything at once with GQA, a boolean mask and causality.
MODIFIER_CASES = [
    mapped_case("tc_f16_window_br", "block-kv=16", dtype="float16", Nq=37,
                Nk=150, causal="bottom-right", window=(40, 0), lens=[130]),
    mapped_case("tc_bf16_softcap_alibi", "", dtype="bfloat16", B=2, Nq=45,
                Nk=70, softcap=2.0, alibi="bh"),
    mapped_case("tc_f16_chunk_segments", "block-kv=16", dtype="float16",
                Nq=50, Nk=60, chunk=24, segments="sorted", lens=[55]),
    mapped_case("tc_f16_window_zero_empty_rows", "", dtype="float16", B=2,
                Nq=30, Nk=30, window=(0, 0), lens=[10, 0]),
    mapped_case("tc_f16_q_offset_window", "block-kv=16", dtype="float16",
                Nq=40, Nk=90, causal="bottom-right", window=(30, 0),
                q_offset=-20, alibi="h"),
    mapped_case("tc_bf16_combined_tl", "block-kv=16", dtype="bfloat16", B=2,
                Hq=4, Hkv=2, Nq=40, Nk=90, causal="top-left", window=(20, 5),
                softcap=3.0, alibi="h", lens=[90, 33], mask="bool",
                mask_shape="B1QK"),
    # General regions (test/lib/modifier_regions.py) on the fragment layout:
    # a relative-bias table, both regions with a window and softcap, a
    # mask_mod and a score_mod after an additive mask (applied in
    # maskScore), rows emptied by key lengths.
    mapped_case("tc_f16_regions_rel_bias", "block-kv=16", dtype="float16",
                Hq=4, Hkv=2, Nq=37, Nk=70, causal="bottom-right", lens=[60],
                regions="rel_bias"),
    mapped_case("tc_bf16_regions_both", "block-kv=16", dtype="bfloat16", B=2,
                Hq=4, Nq=40, Nk=90, causal="top-left", window=(20, 5),
                softcap=3.0, regions="both"),
    mapped_case("tc_f16_regions_prefix_lm_mask", "", dtype="float16", B=2,
                Nq=30, Nk=45, mask="float", lens=[45, 0],
                regions="prefix_lm"),
    mapped_case("tc_f16_regions_alibi_like_mask", "", dtype="float16",
                Nq=33, Nk=40, mask="float", regions="alibi_like"),
    # Block sparsity: the prefix-LM mask_mod's block mask on the kernel's
    # key tiles (empty tiles skipped, full ones without the mask_mod), and
    # one whose query tiles are smaller than the kernel's (not usable:
    # every tile is visited and masked, the same result).
    mapped_case("tc_f16_block_mask_prefix_lm", "block-kv=16",
                dtype="float16", B=2, Nq=70, Nk=90, regions="prefix_lm",
                block_mask=(64, 16)),
    # Document masking over many key tiles: tiles of other documents are
    # skipped, those inside one document skip the element mask.
    mapped_case("tc_f16_documents_sorted", "block-kv=16", dtype="float16",
                B=2, Nq=150, Nk=150, segments="sorted", lens=[150, 120]),
    mapped_case("tc_bf16_documents_random_causal", "block-kv=16",
                dtype="bfloat16", Nq=70, Nk=90, causal="bottom-right",
                segments="random"),
    mapped_case("tc_bf16_block_mask_unusable", "block-kv=16",
                dtype="bfloat16", B=2, Nq=70, Nk=90, causal="top-left",
                regions="prefix_lm", block_mask=(16, 16)),
]

# The shared 16-bit matrix (head dims 64, 96 and 128; the largest head dim
# has block-kv 32 chosen automatically), then pipeline depth and tile sizes.
CASES = mma_cases("tc", (64, 96, 128), mqa_dv=32) + [
    mapped_case("tc_f16_stages3", "stages=3", dtype="float16", Nq=40, Nk=200,
                causal="bottom-right", lens=[170]),
    mapped_case("tc_bf16_q32_kv32", "block-q=32 block-kv=32",
                dtype="bfloat16", Nq=45, Nk=83, causal="top-left"),
] + MODIFIER_CASES

# What the mapped module must hold: the tensor-core kernel, no SIMT fallback.
NEEDLES = ("nvgpu.mma.sync", "nvgpu.ldmatrix", "transpose = true",
           "nvgpu.device_async_copy", "tensor_cores")


def run_tc_case(fa_emulate, c, tmp):
    return run_case(fa_emulate, c, tmp, PIPELINE % c["opts"], NEEDLES)


#===------------------------------------------------------------------------===#
# Mutations: the checks above must catch a broken tensor-core kernel
#===------------------------------------------------------------------------===#

# (name, old text, new text) applied once to the mapped module of MUTANT.
MUTATIONS = [
    # V read without .trans: the wrong B fragments for P V.
    ("v_without_trans", "transpose = true", "transpose = false"),
    # No barrier between the cp.async wait and the reads of the tile.
    ("no_barrier", "gpu.barrier\n", ""),
    # Waiting for all but one group: tile j may still be in flight.
    ("wait_one_group_too_few", "{numGroups = 0 : i32}",
     "{numGroups = 1 : i32}"),
    # The quad row max skips offset 2 (shuffles xor 1 twice).
    ("row_max_offset", "%c2_i32, %c32_i32", "%c1_i32, %c32_i32"),
]

MUTANT = mapped_case("mutant", dtype="float16", Hq=2, Hkv=1, Nq=70, Nk=150,
                     causal="bottom-right", lens=[140])


# The modifiers: the first visited key of a window(40, 0) block taken 24
# keys too late (whole key tiles skipped that hold attended keys), and a
# softcap of 6 instead of 3 (the cap in the log2 domain, 3 log2(e)).
MODIFIER_MUTATIONS = [
    ("window_begin_late", ", %c40 : index", ", %c16 : index"),
    ("softcap_cap", "4.32808495 : f32", "8.65616989 : f32"),
]

MODIFIER_MUTANT = mapped_case("modifier_mutant", "block-kv=16",
                              dtype="float16", Hq=2, Hkv=1, Nq=70, Nk=150,
                              causal="bottom-right", window=(40, 0),
                              softcap=3.0, lens=[140])


def run_all_mutations(fa_emulate, filters, cases, tmp):
    if filters and "mutations" not in filters:
        return 0
    bm = next(c for c in CASES if c["name"] == "tc_f16_block_mask_prefix_lm")
    return (run_mutations(fa_emulate, MUTANT, tmp, PIPELINE % "", MUTATIONS) +
            run_mutations(fa_emulate, MODIFIER_MUTANT, tmp,
                          PIPELINE % MODIFIER_MUTANT["opts"],
                          MODIFIER_MUTATIONS) +
            run_block_mask_mutations(fa_emulate, bm, tmp,
                                     PIPELINE % bm["opts"],
                                     ("partial_full", "visited_empty")))


if __name__ == "__main__":
    sys.exit(run_suite(sys.argv, __doc__, CASES, "tensor-core cases",
                       run_tc_case, run_all_mutations))
