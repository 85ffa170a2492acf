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
multiples of the tiles; 3 stages, block-q 32 and block-kv 32. Then four
mutations of a mapped kernel (V without .trans, a missing barrier, a cp.async
wait one group short, a wrong shuffle offset) must each be caught.

Usage: attention_emulate_tc.py FA_EMULATE [SUBSTRING...]
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from attention_emulate import (case, check, check_outputs,  # noqa: E402
                               prepare_case)
from fa_reference import save_attention_inputs  # noqa: E402

PIPELINE = "builtin.module(fa-map-to-tensor-cores{%s},canonicalize,cse)"


def tc(name, opts="", **kw):
    c = case(name, **kw)
    c["tc_opts"] = opts
    return c


CASES = [
    # Head dims and element types, Nq / Nk not multiples of the tiles.
    tc("tc_f16_d64", dtype="float16", Nq=37, Nk=50),
    tc("tc_bf16_d64", dtype="bfloat16", Nq=20, Nk=45),
    tc("tc_f16_d96", dtype="float16", D=96, Nq=20, Nk=33),
    tc("tc_bf16_d96", dtype="bfloat16", D=96, Nq=65, Nk=70),
    tc("tc_f16_d128", dtype="float16", D=128, Nq=17, Nk=140),
    tc("tc_bf16_d128", dtype="bfloat16", D=128, Nq=70, Nk=64),
    # Causal, both alignments, Nq < Nk and Nq > Nk; several KV tiles.
    tc("tc_f16_causal_br", dtype="float16", Nq=37, Nk=150,
       causal="bottom-right"),
    tc("tc_bf16_causal_tl", dtype="bfloat16", Nq=100, Nk=130,
       causal="top-left"),
    tc("tc_f16_causal_tl_nq_gt_nk", dtype="float16", Nq=90, Nk=20,
       causal="top-left"),
    tc("tc_f16_causal_br_nq_gt_nk", dtype="float16", Nq=90, Nk=20,
       causal="bottom-right"),
    tc("tc_bf16_causal_br_gqa_d128", dtype="bfloat16", D=128, B=2, Hq=4,
       Hkv=2, Nq=70, Nk=133, causal="bottom-right"),
    # Key lengths: 0, inside, exactly Nk, beyond, negative; no keys at all.
    tc("tc_f16_kv_lens", dtype="float16", B=5, Hq=2, Hkv=1, Nq=9, Nk=77,
       lens=[0, 5, 77, 200, -3]),
    tc("tc_bf16_kv_lens_causal_gqa", dtype="bfloat16", B=2, Hq=4, Hkv=2,
       Nq=40, Nk=70, lens=[0, 61], causal="bottom-right"),
    tc("tc_f16_no_keys", dtype="float16", Nq=5, Nk=0),
    # MQA, Dv != D, explicit scale, no LSE.
    tc("tc_f16_mqa_dv", dtype="float16", Hq=4, Hkv=1, Nq=25, Nk=40, D=64,
       Dv=32, scale=0.3),
    tc("tc_bf16_no_lse", dtype="bfloat16", Nq=16, Nk=16, lse=False),
    # Masks: boolean with fully masked rows, broadcast; additive with -inf.
    tc("tc_f16_bool_mask", dtype="float16", B=2, Nq=24, Nk=45, mask="bool"),
    tc("tc_bf16_bool_mask_11_lens", dtype="bfloat16", B=2, Nq=24, Nk=45,
       mask="bool", mask_shape="11QK", lens=[45, 0], causal="bottom-right"),
    tc("tc_f16_float_mask", dtype="float16", Nq=24, Nk=45, mask="float",
       mask_shape="1HQK"),
    # The largest head dim (block-kv 32 chosen automatically), Dv != D.
    tc("tc_bf16_d256_dv128", dtype="bfloat16", D=256, Dv=128, Nq=20,
       Nk=70, causal="bottom-right"),
    # Pipeline depth and tile sizes.
    tc("tc_f16_stages3", "stages=3", dtype="float16", Nq=40, Nk=200,
       causal="bottom-right", lens=[170]),
    tc("tc_bf16_q32_kv32", "block-q=32 block-kv=32", dtype="bfloat16",
       Nq=45, Nk=83, causal="top-left"),
    # The threads of every memory op in a random order.
    tc("tc_f16_shuffled_order", dtype="float16", Hq=4, Hkv=2, Nq=37, Nk=70,
       causal="bottom-right", flags=["--shuffle-order", "--seed", "5"]),
]


def run_case(fa_emulate, c, tmp):
    inputs, base, paths = prepare_case(c, tmp)
    mapped = base + ".mapped.mlir"
    cmd = [fa_emulate, base + ".mlir", "--check-races",
           "--pipeline", PIPELINE % c["tc_opts"], "--dump-mapped", mapped]
    cmd += save_attention_inputs(paths, *inputs, c["lse"])
    cmd += c["flags"]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.time() - start
    if proc.returncode != 0:
        return False, "fa-emulate failed (exit %d): %s" % (
            proc.returncode, proc.stderr.strip()[:2000]), elapsed
    with open(mapped) as f:
        text = f.read()
    for needle in ("nvgpu.mma.sync", "nvgpu.ldmatrix", "transpose = true",
                   "nvgpu.device_async_copy", "tensor_cores"):
        if needle not in text:
            return False, "the mapped kernel lacks '%s'" % needle, elapsed
    ok, summary = check_outputs(c, inputs, paths)
    return ok, summary, elapsed


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

MUTANT = tc("mutant", dtype="float16", Hq=2, Hkv=1, Nq=70, Nk=150,
            causal="bottom-right", lens=[140])


def run_mutations(fa_emulate, tmp):
    """Each mutation must make fa-emulate fail or the comparison fail."""
    c = MUTANT
    inputs, base, paths = prepare_case(c, tmp)
    q, k, v, lens, mask = inputs
    flags = save_attention_inputs(paths, *inputs, c["lse"])
    mapped = base + ".mapped.mlir"
    proc = subprocess.run([fa_emulate, base + ".mlir", "--pipeline",
                           PIPELINE % "", "--dump-mapped", mapped] + flags,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print("FAIL mutations: the unmutated kernel failed: " +
              proc.stderr.strip()[:500])
        return 1
    with open(mapped) as f:
        text = f.read()
    failures = 0
    for name, old, new in MUTATIONS:
        if old not in text:
            print("FAIL mutation %-24s: '%s' not in the kernel" % (name, old))
            failures += 1
            continue
        path = base + "." + name + ".mlir"
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1))
        if os.path.exists(paths["o"]):
            os.remove(paths["o"])
        proc = subprocess.run([fa_emulate, path, "--check-races",
                               "--arg-roles", "q,k,v,kv_lens,o,lse"] + flags,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            how = "fa-emulate: " + proc.stderr.strip().splitlines()[0][:160]
            caught = True
        else:
            ok, summary = check(c, q, k, v, lens, mask, np.load(paths["o"]),
                                np.load(paths["lse"]))
            caught, how = not ok, summary[:160]
        failures += not caught
        print("%s mutation %-24s caught: %s" % (
            "PASS" if caught else "FAIL", name, how if caught else "NO"),
            flush=True)
    return failures


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    fa_emulate = argv[1]
    filters = argv[2:]
    cases = [c for c in CASES
             if not filters or any(f in c["name"] for f in filters)]
    failures = 0
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="fa-emulate-tc-") as tmp:
        for c in cases:
            ok, summary, elapsed = run_case(fa_emulate, c, tmp)
            failures += not ok
            print("%s %-30s %6.2fs  %s" % ("PASS" if ok else "FAIL",
                                           c["name"], elapsed, summary),
                  flush=True)
        if not filters:
            failures += run_mutations(fa_emulate, tmp)
    print("%d/%d tensor-core cases passed under the interpreter in %.1fs" % (
        len(cases) - min(failures, len(cases)), len(cases),
        time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
