# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The tensor-core GPU kernels (mma.sync, and wgmma) on a paged K/V cache
(fa.attention ... block_table), run under the SIMT interpreter (fa-emulate
--check-races) against the float64 reference of
test/Integration/Paged/paged_numerics.py: each sequence's keys gathered from
its pages (sharing no code with the kernels) and test/lib/fa_reference.py's
contract applied per sequence (bottom-right causality aligned to the
sequence's own length).

The cases are paged_numerics.py's, at D = 64 in float16 (the tensor-core
inputs): page sizes 1, 16, 64 and 256 with partly filled last pages and
shuffled tables whose entries past a sequence point at other valid pages;
several queries per sequence with GQA 8/2; prefix sharing with an empty
sequence; a window, ALiBi and softcap on the logical positions; a boolean
mask over Nk = M S. Each runs on mma.sync (block-kv 64, so tiles span
several small pages and lie inside large ones), mma.sync with block-kv 16
(fa-map-to-tensor-cores{block-kv=16}), and, for two of them, wgmma; the
mapped module must hold the tensor-core kernel (no SIMT fallback).

Criteria, those of attention_emulate.py for float16: max abs error of O at
most 2x that of a naive kernel (float32 math on the float16 inputs, O
rounded to float16) plus 1e-4, capped at 2e-3; LSE within max(1e-4, 2x
naive), capped at 1e-3; empty rows exactly O = 0 and LSE = -inf; no NaN; no
race and no out-of-bounds access (the interpreter checks every load against
the cache's shape).

Mutation: the kernel reading each key's page one block-table entry further
on (paged_numerics.py's page_past edit of the mapped IR) must fail.

Usage: paged_emulate_tc.py FA_EMULATE
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import paged_emulate as pe  # noqa: E402
from fa_reference import seed_of  # noqa: E402

pn = pe.load_paged_numerics()

CASES = [pn.case(f"tc_page{s}_decode", S=s, D=64, Hq=8, Hkv=2,
                 lens=[3 * s + s // 2 + 1, s, 1]) for s in (1, 16, 64, 256)]
CASES += [
    pn.case("tc_nq5_gqa4", Hq=8, Hkv=2, Nq=5, D=64, lens=[40, 9, 64]),
    pn.case("tc_shared_prefix", B=4, share=2, D=64, Nq=3, lens=[50, 33, 0, 40]),
    pn.case("tc_window_alibi_softcap", S=32, Nq=2, D=64, lens=[100, 70, 33],
            window=(24, 0), alibi=True, softcap=3.0, mag=3.0),
    pn.case("tc_bool_mask", Nq=2, D=64, mask=True, lens=[45, 31, 17]),
]

WAYS = {"mma": ["--kernel", "mma"],
        "mma_kv16": ["--pipeline", "builtin.module(fa-map-to-tensor-cores"
                     "{block-kv=16},canonicalize,cse)"],
        "wgmma": ["--kernel", "wgmma"]}
# What the mapped module of each way must hold: the tensor-core kernel, not
# the SIMT fallback.
NEEDLES = {"mma": "nvgpu.mma.sync", "mma_kv16": "nvgpu.mma.sync",
           "wgmma": "nvvm.wgmma.mma_async"}
# wgmma is slow to interpret: two cases.
WGMMA_CASES = ("tc_page16_decode", "tc_shared_prefix")


def to_f16(a):
    """The case's Q and caches as float16 (what the kernel reads)."""
    b = dict(a)
    for n in ("q", "kc", "vc"):
        b[n] = a[n].astype(np.float16)
    return b


def judge(tag, o, lse, c, a):
    """Checks (o, lse) against the float64 reference of the float16 inputs,
    with the naive float32 kernel's error as the yardstick. Returns the
    failures."""
    exact = {n: (x.astype(np.float64) if x.dtype == np.float16 else x)
             for n, x in a.items()}
    ref_o, ref_l, empty = pn.reference_paged(c, exact)
    naive32 = {n: (x.astype(np.float32) if x.dtype == np.float16 else x)
               for n, x in a.items()}
    naive_o, naive_l, _ = pn.reference_paged(c, naive32, np.float32)
    full = ~empty
    o64, l64 = o.astype(np.float64), lse.astype(np.float64)
    problems = []
    if np.isnan(o64).any() or np.isnan(l64).any():
        problems.append("NaN in O or LSE")
    if empty.any() and not ((o64[empty] == 0).all() and
                            (l64[empty] == -np.inf).all()):
        problems.append("empty rows are not exactly O = 0, LSE = -inf")
    err = np.nanmax(np.abs(o64[full] - ref_o[full])) if full.any() else 0.0
    naive = np.max(np.abs(naive_o.astype(np.float16).astype(np.float64)[full]
                          - ref_o[full])) if full.any() else 0.0
    tol = min(2 * naive + 1e-4, 2e-3)
    if not err <= tol:
        problems.append(f"O error {err:.3e} exceeds {tol:.3e}")
    lerr = np.nanmax(np.abs(l64[full] - ref_l[full])) if full.any() else 0.0
    lnaive = np.max(np.abs(naive_l[full] - ref_l[full])) if full.any() else 0.0
    ltol = min(max(1e-4, 2 * lnaive), 1e-3)
    if not lerr <= ltol:
        problems.append(f"LSE error {lerr:.3e} exceeds {ltol:.3e}")
    print(f"{'FAIL' if problems else 'PASS'} {tag}: O max abs err {err:.2e} "
          f"(naive {naive:.2e}, tol {tol:.2e}), LSE err {lerr:.2e}, "
          f"{int(empty.sum())} empty rows" +
          ("" if not problems else ": " + "; ".join(problems)))
    return [f"{tag}: {p}" for p in problems]


def main(argv):
    fa_emulate = argv[1]
    failures = []
    import tempfile
    with tempfile.TemporaryDirectory(prefix="fa-paged-emulate-tc-") as tmp:
        for c in CASES:
            rng = np.random.default_rng(seed_of("paged_tc." + c["name"]))
            a = to_f16(pn.build(c, rng))
            for way, flags in WAYS.items():
                if way == "wgmma" and c["name"] not in WGMMA_CASES:
                    continue
                tag = f"{c['name']} [{way}] S={c['S']} Nq={c['Nq']}"
                mapped = os.path.join(tmp, f"{c['name']}.{way}.mapped.mlir")
                try:
                    o, lse = pe.run(fa_emulate, c, a, tmp, way, elt="f16",
                                    flags=flags + ["--dump-mapped", mapped])
                except RuntimeError as e:
                    failures.append(f"{tag}: {e}")
                    print(f"FAIL {tag}: {e}")
                    continue
                with open(mapped) as f:
                    if NEEDLES[way] not in f.read():
                        failures.append(f"{tag}: no {NEEDLES[way]} in the "
                                        f"mapped kernel")
                        print(f"FAIL {tag}: not the tensor-core kernel")
                failures += judge(tag, o, lse, c, a)
        # The mutation: reading the next entry's page must fail.
        c = next(x for x in CASES if x["name"] == "tc_shared_prefix")
        rng = np.random.default_rng(seed_of("paged_tc." + c["name"]))
        a = to_f16(pn.build(c, rng))
        failures += pe.check_page_past(
            lambda: pe.run(fa_emulate, c, a, tmp, "mma",
                           mutate=pn.mutate_page_past, elt="f16",
                           flags=WAYS["mma"]),
            lambda o, lse: judge("mutation page_past", o, lse, c, a))
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
