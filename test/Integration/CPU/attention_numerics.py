# RUN: %python %s %fa_run
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
# RUN: %python %s %fa_run --promoted
# RUN: %python %s %fa_run --promoted --double-buffer
# RUN: %python %s %fa_run --tiled
# RUN: %python %s %fa_run --cpu-register-blocks=5,6,2
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of `fa-run attention` against an independent float64 reference.

Each case writes seeded random inputs (the seed comes from the case name, so a
failure reproduces and every case differs), runs fa-run on them, and compares
O and LSE with a float64 implementation of the semantic contract in
docs/FA/FADialect.md that shares no code with the lowering:

    S = scale * Q K^T per (b, h), query head h reading kv head h // (Hq/Hkv)
    S += additive mask;  S = -inf where the boolean mask, causality
    (top-left keeps k <= q, bottom-right keeps k <= q + Nk - Nq) or the key
    lengths (k < clamp(len, 0, Nk)) remove a key
    O = softmax(S) V, LSE = m + log(l); a row with no key left gives O = 0
    and LSE = -inf.

Pass criteria:
  * float32: relative Frobenius error of O below max(1e-5, 2x the error of a
    naive float32 kernel), LSE max abs error on finite entries below
    max(1e-4, 2x naive). The naive kernel sums each dot product sequentially
    in float32; its bound only matters for huge scores (|S| ~ 1000), where
    float32 rounding of the scores alone exceeds the fixed thresholds.
  * float16: max abs error of O at most 2x that of a naive kernel (float32
    math on the float16 inputs, rounded to float16) plus 1e-4 (the
    FlashAttention test criterion); LSE as for float32.
  * Fully masked rows: O exactly 0 and LSE exactly -inf. No NaN anywhere (the
    outputs are poisoned with NaN before the kernel runs).

Usage: attention_numerics.py FA_RUN [SUBSTRING...] runs the cases whose name
contains one of the substrings (all by default).
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from fa_reference import reference, save_attention_inputs, seed_of  # noqa: E402

#===------------------------------------------------------------------------===#
# Cases
#===------------------------------------------------------------------------===#


def case(name, **kw):
    c = dict(name=name, B=2, Hq=4, Hkv=4, Nq=64, Nk=64, D=64, Dv=None,
             dtype="float32", causal="none", lens=None, mask=None,
             mask_shape="BHQK", scale=None, mag=1.0, block_q=None,
             block_kv=None, reference=False, lse=True)
    c.update(kw)
    if c["Dv"] is None:
        c["Dv"] = c["D"]
    return c


CASES = [
    # Shapes: tile multiples, odd lengths, odd head dims, single rows.
    case("tile_multiple"),
    case("odd_77_d40", Nq=77, Nk=77, D=40),
    case("odd_131_d40", B=1, Hq=2, Hkv=2, Nq=131, Nk=131, D=40),
    case("nq1", Nq=1, Nk=77),
    case("single_element", B=1, Hq=1, Hkv=1, Nq=1, Nk=1, D=8),
    case("dv_ne_d", Nq=50, Nk=70, D=64, Dv=40),
    case("dv_gt_d", B=1, Nq=33, Nk=45, D=16, Dv=72, causal="bottom-right"),
    case("no_lse", Nq=77, Nk=77, D=40, lse=False),
    case("no_keys", Nq=5, Nk=0, D=8),
    case("long_d128", B=1, Hq=2, Hkv=1, Nq=300, Nk=517, D=128,
         causal="bottom-right"),
    # Causal alignments with Nq = Nk, Nq < Nk and Nq > Nk.
    case("causal_tl_square", Nq=77, Nk=77, causal="top-left"),
    case("causal_br_square", Nq=77, Nk=77, causal="bottom-right",
         block_q=32, block_kv=16),
    case("causal_tl_nq_lt_nk", Nq=33, Nk=100, causal="top-left"),
    case("causal_br_nq_lt_nk", Nq=33, Nk=100, causal="bottom-right"),
    case("causal_tl_nq_gt_nk", Nq=100, Nk=33, causal="top-left"),
    case("causal_br_nq_gt_nk", Nq=100, Nk=33, causal="bottom-right"),
    case("causal_tl_nq1", Nq=1, Nk=77, causal="top-left"),
    case("causal_br_nq1", Nq=1, Nk=77, causal="bottom-right"),
    # Key lengths: 0, inside, exactly Nk, beyond Nk, negative.
    case("kv_lens", B=5, Hq=2, Hkv=2, Nq=40, Nk=77, lens=[0, 5, 77, 200, -3]),
    case("kv_lens_causal_br", B=3, Hq=2, Hkv=1, Nq=50, Nk=77,
         lens=[60, 0, 13], causal="bottom-right"),
    case("kv_lens_causal_tl", B=3, Hq=2, Hkv=2, Nq=77, Nk=77,
         lens=[77, 1, 40], causal="top-left", block_kv=32),
    # Grouped and multi-query attention.
    case("gqa_8_2", Hq=8, Hkv=2, Nq=45, Nk=77),
    case("mqa_8_1", Hq=8, Hkv=1, Nq=77, Nk=45, causal="bottom-right"),
    # Boolean masks (with fully masked rows) and their broadcasts.
    case("bool_mask", Nq=45, Nk=77, mask="bool"),
    case("bool_mask_b1", Hq=8, Hkv=2, Nq=45, Nk=77, mask="bool",
         mask_shape="1HQK"),
    case("bool_mask_h1", Nq=45, Nk=77, mask="bool", mask_shape="B1QK",
         causal="top-left"),
    case("bool_mask_11_lens", B=3, Nq=77, Nk=77, mask="bool",
         mask_shape="11QK", lens=[77, 20, 0], causal="bottom-right"),
    # Additive masks, with -inf entries and fully -inf rows.
    case("float_mask", Nq=45, Nk=77, mask="float"),
    case("float_mask_11_causal", Nq=77, Nk=50, mask="float",
         mask_shape="11QK", causal="bottom-right"),
    # Scores of large magnitude, an explicit scale.
    case("large_scores", Nq=77, Nk=77, mag=30.0),
    case("large_scores_causal", Hq=4, Hkv=2, Nq=77, Nk=100, mag=30.0,
         causal="top-left", block_kv=16),
    case("explicit_scale", Nq=45, Nk=77, scale=0.5),
    # Block sizes.
    case("blocks_16_16", Nq=77, Nk=77, D=40, causal="top-left",
         block_q=16, block_kv=16),
    case("blocks_16_128", Nq=77, Nk=131, block_q=16, block_kv=128),
    case("blocks_32_64", Nq=100, Nk=77, causal="bottom-right", lens=[70, 9],
         block_q=32, block_kv=64),
    case("blocks_64_32", Nq=77, Nk=77, mask="bool", block_q=64, block_kv=32),
    case("blocks_64_128_short", Nq=20, Nk=30, block_q=64, block_kv=128),
    # Query tiles wider than the S^T register block (4 vectors of 16): its
    # groups of query vectors in turn, 4 + 4 and 4 + 2.
    case("blocks_128_48_wide", Nq=300, Nk=211, causal="bottom-right",
         lens=[211, 100], block_q=128, block_kv=48),
    case("blocks_96_64_wide", Nq=150, Nk=170, mask="bool", block_q=96,
         block_kv=64),
] + [
    # Every block-size pair on a shape no block divides, alternating the
    # masking features so each pair meets causality, key lengths and masks.
    case("sweep_q%d_kv%d" % (bq, bkv), B=2, Hq=4, Hkv=2, Nq=45, Nk=83, D=24,
         Dv=20, block_q=bq, block_kv=bkv,
         causal=("top-left", "bottom-right", "none")[i % 3],
         lens=[83, 50] if i % 2 else None,
         mask=(None, "bool", "float")[i % 3])
    for i, (bq, bkv) in enumerate((bq, bkv) for bq in (16, 32, 64)
                                  for bkv in (16, 32, 64, 128))
] + [
    # Every head dim the GPU path accepts (multiples of 8 up to 256), with a
    # value head dim that differs, on a short odd-length sequence.
    case("head_dim_%d" % d, B=1, Hq=2, Hkv=1, Nq=19, Nk=37, D=d,
         Dv=(264 - d) if d != 128 else 128,
         causal=("none", "bottom-right")[(d // 8) % 2],
         lens=[30] if (d // 8) % 3 == 0 else None)
    for d in range(8, 257, 8)
] + [
    # The untiled reference lowering.
    case("reference_path", Hq=8, Hkv=2, Nq=45, Nk=77, lens=[50, 0],
         mask="bool", causal="bottom-right", reference=True),
    case("reference_path_f16", Nq=77, Nk=77, dtype="float16",
         reference=True),
    # float16 inputs.
    case("f16_basic", Nq=77, Nk=77, dtype="float16"),
    case("f16_gqa_causal_lens", Hq=8, Hkv=2, Nq=77, Nk=100, dtype="float16",
         causal="bottom-right", lens=[100, 31]),
    case("f16_float_mask_large", Nq=45, Nk=77, dtype="float16", mag=8.0,
         mask="float", block_q=16, block_kv=32),
    # Several query and key tiles of the vector kernel with tails, a value
    # dim that is not a multiple of the vector width, GQA and both
    # alignments, key lengths cutting a tile.
    case("vec_tiles_tl", B=2, Hq=4, Hkv=2, Nq=200, Nk=333, D=128, Dv=72,
         causal="top-left", lens=[333, 150]),
    case("vec_tiles_br", B=1, Hq=2, Hkv=1, Nq=150, Nk=290, D=24, Dv=40,
         causal="bottom-right", lens=[201]),
    case("vec_bool_mask_tiles", B=1, Hq=2, Hkv=2, Nq=130, Nk=270, D=32,
         mask="bool", mask_shape="1HQK"),
    case("vec_f16_d256", B=1, Hq=2, Hkv=1, Nq=70, Nk=140, D=256,
         dtype="float16", causal="bottom-right"),
]

#===------------------------------------------------------------------------===#
# Running
#===------------------------------------------------------------------------===#


def make_inputs(c, rng):
    dt = np.dtype(c["dtype"])
    B, Hq, Hkv, Nq, Nk, D, Dv = (c[x] for x in
                                 ("B", "Hq", "Hkv", "Nq", "Nk", "D", "Dv"))
    mag = c["mag"]
    q = (mag * rng.standard_normal((B, Hq, Nq, D))).astype(dt)
    k = (mag * rng.standard_normal((B, Hkv, Nk, D))).astype(dt)
    v = rng.standard_normal((B, Hkv, Nk, Dv)).astype(dt)
    lens = None if c["lens"] is None else np.array(c["lens"], np.int32)
    mask = None
    if c["mask"] is not None:
        form = c["mask_shape"]
        shape = (B if form[0] == "B" else 1, Hq if form[1] == "H" else 1,
                 Nq, Nk)
        if c["mask"] == "bool":
            mask = rng.random(shape) < 0.7
            # Some fully masked rows.
            rows = rng.choice(Nq, size=max(1, Nq // 8), replace=False)
            mask[..., rows, :] = False
        else:
            mask = rng.standard_normal(shape).astype(np.float32)
            mask[rng.random(shape) < 0.2] = -np.inf
            rows = rng.choice(Nq, size=max(1, Nq // 8), replace=False)
            mask[..., rows, :] = -np.inf
    return q, k, v, lens, mask


def run_case(fa_run, c, tmp, extra_flags=()):
    rng = np.random.default_rng(seed_of(c["name"]))
    q, k, v, lens, mask = make_inputs(c, rng)
    paths = {n: os.path.join(tmp, c["name"] + "." + n + ".npy")
             for n in ("q", "k", "v", "lens", "mask", "o", "lse")}
    cmd = [fa_run, "attention", "--quiet", "--causal", c["causal"]]
    cmd += save_attention_inputs(paths, q, k, v, lens, mask, c["lse"],
                                 c["block_q"], c["block_kv"])
    if c["scale"] is not None:
        cmd += ["--scale", repr(c["scale"])]
    if c["reference"]:
        cmd += ["--reference"]
    cmd += list(extra_flags)

    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.time() - start
    if proc.returncode != 0:
        return False, "fa-run failed (exit %d): %s" % (
            proc.returncode, proc.stderr.strip()), elapsed

    scale = c["scale"] if c["scale"] is not None else 1.0 / np.sqrt(c["D"])
    o_ref, lse_ref, empty = reference(q, k, v, scale, c["causal"], lens, mask,
                                      np.float64)
    o_naive, lse_naive, _ = reference(q, k, v, scale, c["causal"], lens, mask,
                                      np.float32)
    o = np.load(paths["o"])
    problems = []
    if o.dtype != q.dtype or o.shape != o_ref.shape:
        return False, "O is %s %s, expected %s %s" % (
            o.dtype, o.shape, q.dtype, o_ref.shape), elapsed
    o64 = o.astype(np.float64)
    if np.isnan(o64).any():
        problems.append("%d NaN in O" % np.isnan(o64).sum())
    # Fully masked rows: exactly zero.
    if empty.any() and not (o64[empty] == 0).all():
        problems.append("fully masked rows of O are not exactly 0")

    ref_norm = np.linalg.norm(o_ref)
    if c["dtype"] == "float16":
        naive16 = o_naive.astype(np.float16).astype(np.float64)
        err = np.nanmax(np.abs(o64 - o_ref)) if o.size else 0.0
        naive_err = np.max(np.abs(naive16 - o_ref)) if o.size else 0.0
        tol = 2 * naive_err + 1e-4
        summary = "O max abs err %.2e (naive f16 %.2e, tol %.2e)" % (
            err, naive_err, tol)
    else:
        err = np.linalg.norm(o64 - o_ref) / ref_norm if ref_norm > 0 else \
            np.linalg.norm(o64)
        naive_err = np.linalg.norm(o_naive - o_ref) / ref_norm \
            if ref_norm > 0 else 0.0
        tol = max(1e-5, 2 * naive_err)
        summary = "O rel err %.2e (naive f32 %.2e, tol %.2e)" % (
            err, naive_err, tol)
    if not err <= tol:
        problems.append("O error %.3e exceeds %.3e" % (err, tol))

    if c["lse"]:
        lse = np.load(paths["lse"])
        if lse.dtype != np.float32 or lse.shape != lse_ref.shape:
            return False, "LSE is %s %s, expected float32 %s" % (
                lse.dtype, lse.shape, lse_ref.shape), elapsed
        lse64 = lse.astype(np.float64)
        if np.isnan(lse64).any():
            problems.append("%d NaN in LSE" % np.isnan(lse64).sum())
        if empty.any() and not (lse64[empty] == -np.inf).all():
            problems.append("fully masked rows of LSE are not exactly -inf")
        finite = ~empty
        if not np.isfinite(lse64[finite]).all():
            problems.append("LSE is not finite on rows with attended keys")
        if finite.any():
            lerr = np.nanmax(np.abs(lse64[finite] - lse_ref[finite]))
            lnaive = np.max(np.abs(lse_naive[finite] - lse_ref[finite]))
        else:
            lerr = lnaive = 0.0
        ltol = max(1e-4, 2 * lnaive)
        if not lerr <= ltol:
            problems.append("LSE error %.3e exceeds %.3e" % (lerr, ltol))
        summary += ", LSE max abs err %.2e (tol %.2e)" % (lerr, ltol)
    summary += ", %d empty rows" % int(empty.sum())
    if problems:
        return False, summary + ": " + "; ".join(problems), elapsed
    return True, summary, elapsed


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    fa_run = argv[1]
    # --promoted: run every tiled case through the GPU path's promoted form
    # (fa-promote-shared) executed on the CPU.
    # --cuda: run every tiled case on the GPU (fa-run --device cuda), where
    # one is present.
    gpu_flags = ("--promoted", "--double-buffer", "--cuda")
    # --parallel: the CPU path with OpenMP threads (same cases).
    parallel = ["--parallel"] if "--parallel" in argv[2:] else []
    # --tiled: the linalg-per-tile lowering (fa-tile-attention) instead of
    # the default vector kernel (fa-cpu-attention).
    tiled = ["--cpu-kernel", "tiled"] if "--tiled" in argv[2:] else []
    extra_flags = [a for a in argv[2:] if a in gpu_flags]
    # --cpu-register-blocks=KR,PR,PV: the vector kernel with other register
    # blocks (odd key blocks, P V blocks that do not divide block-q).
    blocks = [a for a in argv[2:] if a.startswith("--cpu-register-blocks=")]
    filters = [a for a in argv[2:]
               if a not in gpu_flags + ("--parallel", "--tiled")
               and a not in blocks]
    cases = [c for c in CASES
             if (not filters or any(f in c["name"] for f in filters))
             and not ((extra_flags or tiled or blocks) and c["reference"])]
    if blocks:
        # The pass chooses the tiles (a multiple of lcm(16, pv-rows) rows):
        # explicit ones would have to suit the register blocks.
        cases = [dict(c, block_q=None, block_kv=None) for c in cases]
    if extra_flags:
        # The GPU path takes head dims that are multiples of 8: round the
        # others up so that every masking and tiling case still runs.
        # Explicit block sizes are kept for the sweep (small head dims);
        # elsewhere they would not fit in 48 KiB of workgroup memory, which
        # is a clear compile error, so the pass chooses them.
        cases = [dict(c, name=c["name"] + "_promoted",
                      D=-(-c["D"] // 8) * 8, Dv=-(-c["Dv"] // 8) * 8,
                      block_q=c["block_q"] if c["name"].startswith("sweep") else None,
                      block_kv=c["block_kv"] if c["name"].startswith("sweep") else None)
                 for c in cases]
        if "--double-buffer" in extra_flags:
            # Two K/V slots: 128-key tiles of the sweep no longer fit in
            # 48 KiB (a clear compile error); use 64.
            cases = [dict(c, block_kv=min(c["block_kv"], 64))
                     if c["block_kv"] else c for c in cases]
        if "--cuda" in extra_flags:
            # fa-run chooses the GPU tiles itself.
            cases = [dict(c, name=c["name"].replace("_promoted", "_cuda"),
                          block_q=None, block_kv=None) for c in cases]
            extra_flags = ["--device", "cuda"]
    failures = 0
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="fa-attention-") as tmp:
        for c in cases:
            ok, summary, elapsed = run_case(fa_run, c, tmp,
                                            extra_flags + parallel + tiled + blocks)
            failures += not ok
            print("%s %-24s %5.2fs  %s" % ("PASS" if ok else "FAIL", c["name"],
                                          elapsed, summary), flush=True)
    print("%d/%d attention cases passed in %.1fs" % (
        len(cases) - failures, len(cases), time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
