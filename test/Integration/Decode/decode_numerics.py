# RUN: %python %s %fa_run
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
# RUN: %python %s %fa_run --device emulate --kernel simt --split-cases
# RUN: %python %s %fa_run --device emulate --kernel simt --pack-gqa --split-cases
# RUN: %python %s %fa_run --device emulate --kernel mma --split-cases
# RUN: %python %s %fa_run --device emulate --kernel mma --pack-gqa
# RUN: %python %s %fa_run --device emulate --kernel wgmma --split-cases
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of the CPU decode kernels (fa-cpu-attention's decode tiles:
the query heads that share a kv head packed into one tile) against the
float64 reference of test/lib/fa_reference.py.

fa-run builds kernels with a dynamic Nq, so each carries both kernels and
picks one at run time: Nq x Hq/Hkv rows within one decode tile (8 rows with
AVX2, 16 with AVX-512) take the decode kernel, more take the general one.
The cases sweep Nq = 1..16 with MHA, GQA and MQA groups, so both kernels
and the boundary between them run on every host, with bottom-right
causality (the serving alignment), ragged key lengths (Nk not a multiple
of a tile, key lengths of 0: empty rows), and every modifier whose value
differs per lane in a packed tile: windows, softcap, ALiBi slopes per head
(gathered), masks per head and broadcast, segment ids (gathered per
query), chunks, and score_mod / mask_mod regions that read the head index.
With --split-cases (under --device emulate --kernel simt, also with
--pack-gqa, and --kernel mma / wgmma) only the split-KV cases run, on the
GPU kernels' split-KV form (split-kv of fa-promote-shared,
fa-map-to-tensor-cores and fa-map-to-wgmma: a kernel writing f32 partials
per part of the key tiles, then the merge kernel), 64 parts leaving most
without keys; the tensor-core families take the cases in float16 (at
D = 64 for wgmma), judged against the float64 reference of the float16
inputs.
With --device emulate --kernel mma --pack-gqa every case whose head dim
is a multiple of 16 runs in float16 on the mma.sync kernel with packed
query heads (fa-map-to-tensor-cores pack-gqa: a block's rows are those of
the query heads of one kv head, each with its own head's Q, masks,
slopes, regions and outputs), the split cases composing both.
Pass criteria: relative Frobenius error of O and LSE below 2e-5 (2e-3
for float16 inputs, whose P is rounded to float16 for P V); empty rows
exactly O = 0 and LSE = -inf; no NaN.

The comparison can fail: two cases are compared again against a reference
whose query heads of group 0 read kv head 1, and must fail (a packed
kernel reading the wrong kv head for some lanes is caught). Mutations of
the decode kernel itself are in test/Integration/Modifiers.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import compare_outputs, reference, seed_of  # noqa: E402
from modifier_regions import mods_file, region_case  # noqa: E402

FA_RUN = sys.argv[1]
# --split-cases: only the split-KV cases (the SIMT kernel's split-KV and
# merge kernels under the interpreter: --device emulate --kernel simt).
SPLIT_ONLY = "--split-cases" in sys.argv[2:]
EXTRA = [a for a in sys.argv[2:] if a != "--split-cases"]
# The tensor-core families take float16 inputs (wgmma at D = 64).
FAMILY = EXTRA[EXTRA.index("--kernel") + 1] if "--kernel" in EXTRA else None
TENSOR_CORES = FAMILY in ("mma", "wgmma")


def case(name, **kw):
    c = dict(name=name, B=2, Hq=8, Hkv=2, Nq=1, Nk=203, D=32,
             causal="bottom-right", lens=None, mask=None, window=None,
             softcap=None, alibi=None, chunk=None, segments=False,
             regions=None, mag=1.0, paged=0, splits=0)
    c.update(kw)
    return c


CASES = []
# Every Nq 1..16 against groups 1 (MHA), 4 and 8 (GQA) and 8 with one kv
# head (MQA): Nq x G crosses the decode tile (8 or 16 rows) in each.
for g, hkv in ((1, 4), (4, 2), (8, 1)):
    for nq in (1, 2, 3, 5, 8, 16):
        CASES.append(case(f"nq{nq}_g{g}", Hq=g * hkv, Hkv=hkv, Nq=nq,
                          Nk=77 + 31 * nq, lens=[77 + 31 * nq, 40 + nq]))
CASES += [
    # Key lengths of 0 empty every row of batch 1; top-left and none too.
    case("empty_rows", Nq=3, lens=[150, 0]),
    case("top_left", Nq=4, causal="top-left", Nk=30),
    case("not_causal", Nq=2, causal="none", Nk=50),
    # The window and chunk bounds per query of the packed rows.
    case("window", Nq=4, window=(37, 0), Nk=300),
    case("window_right", Nq=2, causal="none", window=(20, 3), Nk=120),
    case("chunk", Nq=3, chunk=64, Nk=250),
    # Softcap on large scores; ALiBi slopes [Hq] and [B, Hq].
    case("softcap", Nq=2, softcap=2.0, mag=4.0),
    case("alibi_h", Nq=2, alibi="h"),
    case("alibi_bh", Hq=16, Hkv=2, Nq=1, alibi="bh", softcap=5.0),
    # Boolean masks per (batch, head) and broadcast; an additive one.
    case("bool_mask_per_head", Nq=2, mask="bool_bh"),
    case("bool_mask_broadcast", Nq=1, mask="bool_b1"),
    case("float_mask_per_head", Nq=3, mask="float_1h", Hq=4, Hkv=1),
    # Segment ids: the query ids of the packed rows are gathered.
    case("segments", Nq=4, segments=True, Nk=160),
    # Regions that read the head: a per-head offset and a mask for odd
    # heads; a [Nq, Hq] table read at (q, h).
    case("regions_both", Nq=2, regions="both"),
    case("regions_row_bias", Nq=3, regions="row_bias", Hq=4, Hkv=1),
    # Paged caches through fa-run --block-table (shuffled pages, partly
    # filled last pages, a shared first page, per-sequence bottom-right
    # alignment with Nq > 1, an empty sequence).
    case("paged_s16", Nq=1, paged=16, lens=[203, 150]),
    case("paged_s1_nq3", Nq=3, paged=1, Nk=40, lens=[40, 7]),
    case("paged_s256_window", Nq=2, paged=256, Nk=600, lens=[600, 0],
         window=(300, 0), softcap=4.0),
    case("paged_s32_general", Nq=5, Hq=8, Hkv=2, paged=32, Nk=100,
         lens=[100, 33]),
    # Split-KV (--kv-splits): the key tiles of each (batch, kv head) in
    # parts combined by fa.merge; 64 parts leave most of them without keys,
    # 3 split a window's range; with a paged cache; an empty sequence.
    case("split2", Nq=1, splits=2, Nk=300, lens=[300, 0]),
    case("split3_window", Nq=2, splits=3, Nk=500, window=(200, 0),
         softcap=5.0),
    case("split64_more_than_tiles", Nq=1, splits=64, Nk=100),
    case("split5_paged", Nq=3, splits=5, paged=16, Nk=250, lens=[250, 97]),
    # D = 40: a multiple of 8 but not of 16, so the decode scores are dot
    # products with 8-lane vectors and the broadcast form with 16 (AVX-512).
    case("d40", Nq=2, D=40, Nk=150),
    case("d40_paged", Nq=1, D=40, paged=16, lens=[203, 150]),
]


def run_case(c, tmp, mutate=False):
    rng = np.random.default_rng(seed_of("decode." + c["name"]))
    if FAMILY == "wgmma":
        c = dict(c, D=64)
    if TENSOR_CORES and c["D"] % 16:
        print(f"{c['name']}: skipped (D = {c['D']} is not a multiple of 16 "
              f"for {FAMILY})")
        return []
    B, Hq, Hkv, Nq, Nk, D = c["B"], c["Hq"], c["Hkv"], c["Nq"], c["Nk"], c["D"]
    dt = np.float16 if TENSOR_CORES else np.float32
    # The reference reads the inputs the kernel reads (float16 rounded).
    q = (rng.standard_normal((B, Hq, Nq, D), dtype=np.float32)
         * c["mag"]).astype(dt).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32).astype(
        dt).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32).astype(
        dt).astype(np.float32)
    p = {n: os.path.join(tmp, f"{c['name']}.{n}.npy")
         for n in ("q", "k", "v", "o", "lse", "lens", "mask", "alibi",
                   "qs", "ks", "mods", "m0")}
    np.save(p["q"], q.astype(dt))
    np.save(p["k"], k.astype(dt))
    np.save(p["v"], v.astype(dt))
    cmd = [FA_RUN, "attention", "--q", p["q"], "--k", p["k"], "--v", p["v"],
           "-o", p["o"], "--lse", p["lse"], "--causal", c["causal"],
           "--quiet"] + EXTRA
    if c["splits"]:
        cmd += ["--kv-splits", str(c["splits"])]
    if c["paged"]:
        # The same keys as pages in shuffled order (sequence 1 shares
        # sequence 0's first page; entries past a sequence's pages point
        # at other pages).
        S = c["paged"]
        M = -(-Nk // S)
        order = rng.permutation(B * M)
        table = order.reshape(B, M).astype(np.int32)
        kc = np.zeros((B * M, S, Hkv, D), dtype=np.float32)
        vc = np.zeros_like(kc)
        for b in range(B):
            for j in range(M):
                blk = slice(j * S, min((j + 1) * S, Nk))
                n = blk.stop - blk.start
                kc[table[b, j], :n] = k[b, :, blk].transpose(1, 0, 2)
                vc[table[b, j], :n] = v[b, :, blk].transpose(1, 0, 2)
        table[1, 0] = table[0, 0]
        k[1, :, :S] = k[0, :, :S]
        v[1, :, :S] = v[0, :, :S]
        np.save(p["k"], kc.astype(dt))
        np.save(p["v"], vc.astype(dt))
        p["bt"] = os.path.join(tmp, c["name"] + ".bt.npy")
        np.save(p["bt"], table)
        cmd += ["--block-table", p["bt"]]
    kw = {}
    lens = mask = None
    if c["lens"] is not None:
        lens = np.array(c["lens"], dtype=np.int32)
        np.save(p["lens"], lens)
        cmd += ["--kv-lens", p["lens"]]
    if c["mask"]:
        kind, shape = c["mask"].split("_")
        mb = B if "b" in shape else 1
        mh = Hq if "h" in shape else 1
        if kind == "bool":
            mask = rng.random((mb, mh, Nq, Nk)) < 0.7
        else:
            mask = rng.standard_normal((mb, mh, Nq, Nk), dtype=np.float32)
        np.save(p["mask"], mask)
        cmd += ["--mask", p["mask"]]
    if c["window"]:
        kw["window"] = c["window"]
        cmd += ["--window", "{},{}".format(*c["window"])]
    if c["softcap"]:
        kw["softcap"] = c["softcap"]
        cmd += ["--softcap", repr(c["softcap"])]
    if c["chunk"]:
        kw["chunk"] = c["chunk"]
        cmd += ["--chunk", str(c["chunk"])]
    if c["alibi"]:
        shape = (Hq,) if c["alibi"] == "h" else (B, Hq)
        slopes = (rng.random(shape, dtype=np.float32) * 0.3).astype(np.float32)
        np.save(p["alibi"], slopes)
        kw["alibi"] = slopes
        cmd += ["--alibi", p["alibi"]]
    if c["segments"]:
        qs = np.sort(rng.integers(0, 3, size=(B, Nq))).astype(np.int32)
        ks = np.sort(rng.integers(0, 3, size=(B, Nk))).astype(np.int32)
        np.save(p["qs"], qs)
        np.save(p["ks"], ks)
        kw["segments"] = (qs, ks)
        cmd += ["--q-segments", p["qs"], "--k-segments", p["ks"]]
    if c["regions"]:
        ops, _, _, score, maskfn = region_case(c["regions"], rng, B, Hq, Nq,
                                               Nk)
        arrays = list(ops.values())
        with open(p["mods"] + ".mlir", "w") as f:
            f.write(mods_file(c["regions"], arrays, Nq, Nk))
        cmd += ["--mods", p["mods"] + ".mlir"]
        for i, a in enumerate(arrays):
            path = os.path.join(tmp, f"{c['name']}.mod{i}.npy")
            np.save(path, a)
            cmd += ["--mod-operand", path]
        kw["score_mod"], kw["mask_mod"] = score, maskfn
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"{c['name']}: fa-run failed: {proc.stderr.strip()}"]
    o, lse = np.load(p["o"]), np.load(p["lse"])
    kref, vref = k, v
    if mutate:
        # The reference reads kv head 1 for the query heads of group 0.
        g = Hq // Hkv
        kref, vref = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
        kref[:, :g] = k[:, 1:2]
        vref[:, :g] = v[:, 1:2]
    if c["paged"]:
        # Per sequence: its keys alone (bottom-right aligned to them).
        parts = [reference(q[b:b + 1], k[b:b + 1, :, :lens[b]],
                           v[b:b + 1, :, :lens[b]], 1.0 / np.sqrt(D),
                           c["causal"], None, None, np.float64, **kw)
                 for b in range(B)]
        ref_o, ref_l, empty = (np.concatenate([x[i] for x in parts])
                               for i in range(3))
    else:
        ref_o, ref_l, empty = reference(q, kref, vref, 1.0 / np.sqrt(D),
                                        c["causal"], lens, mask, np.float64,
                                        **kw)
    tag = (f"{c['name']}{' (mutant)' if mutate else ''}: B={B} Hq={Hq} "
           f"Hkv={Hkv} Nq={Nq} Nk={Nk} D={D} {np.dtype(dt).name}")
    return compare_outputs(tag, o.astype(np.float64), lse, ref_o, ref_l,
                           empty, tol=2e-3 if TENSOR_CORES else 2e-5)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [c for c in CASES if c["splits"] or not SPLIT_ONLY]
        for c in cases:
            failures += run_case(c, tmp)
        if SPLIT_ONLY:
            if failures:
                print("FAILED:\n  " + "\n  ".join(failures))
                sys.exit(1)
            print(f"all {len(cases)} split-KV cases passed")
            return
        # The mutation: a wrong kv head for one group must fail.
        for name in ("nq1_g4", "nq3_g1"):
            c = next(x for x in CASES if x["name"] == name)
            if not run_case(c, tmp, mutate=True):
                failures.append(f"mutation not caught: {name} with the "
                                "reference's kv head of group 0 changed")
            else:
                print(f"{name}: mutation (wrong kv head for group 0) caught")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"all {len(CASES)} decode cases passed")


main()
