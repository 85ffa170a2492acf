# RUN: %python %s %fa_run
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of `fa-run softmax` against an independent float64 reference.

Each case writes seeded random input (the seed comes from the case name), runs
fa-run, and compares the result with a float64 softmax along the chosen
dimension, where a row that is entirely -inf gives zeros (docs/FA/FADialect.md).

Pass criteria:
  * float32: relative Frobenius error below max(1e-5, 2x the error of a naive
    float32 softmax) and max abs error below 1e-5 (softmax values are in
    [0, 1]).
  * float16: max abs error at most 2x that of a naive softmax (float32 math
    on the float16 input, rounded to float16) plus 1e-4.
  * All -inf rows exactly 0; no NaN anywhere (the output is poisoned with NaN
    before the kernel runs).

Usage: softmax_numerics.py FA_RUN [SUBSTRING...] runs the cases whose name
contains one of the substrings (all by default).
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from fa_reference import seed_of  # noqa: E402


def reference(x, dim, dt):
    """Softmax of `x` along `dim` in floating type `dt`; all -inf rows give
    zeros. Returns (y, empty) with `empty` marking those rows (keepdims)."""
    x = x.astype(dt)
    m = np.max(x, axis=dim, keepdims=True)
    empty = m == -np.inf
    m_safe = np.where(empty, dt(0), m)
    e = np.exp(x - m_safe)
    s = np.sum(e, axis=dim, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(empty, dt(0), e / s)
    return y.astype(dt), empty


def case(name, shape, dim=-1, dtype="float32", tile=None, mag=1.0,
         neg_inf=0.0, inf_rows=0, reference=False):
    return dict(name=name, shape=shape, dim=dim, dtype=dtype, tile=tile,
                mag=mag, neg_inf=neg_inf, inf_rows=inf_rows,
                reference=reference)


CASES = [
    case("1d_1000", (1000,)),
    case("1d_1", (1,)),
    case("2d_last", (7, 300)),
    case("2d_first", (300, 7), dim=0),
    case("3d_dim0", (30, 5, 7), dim=0),
    case("3d_dim1", (3, 50, 7), dim=1, tile=16),
    case("3d_dim2", (3, 5, 70), dim=-1, tile=32),
    case("neg_inf_entries", (16, 257), neg_inf=0.3),
    case("all_neg_inf_rows", (16, 100), neg_inf=0.1, inf_rows=5),
    case("tile_96_row_1000", (4, 1000), tile=96),
    case("tile_1", (3, 37), tile=1),
    case("tile_beyond_row", (5, 20), tile=512),
    case("large_values", (8, 513), mag=100.0),
    case("reference_path", (6, 333), neg_inf=0.2, inf_rows=2,
         reference=True),
    case("f16_rows", (4, 513), dtype="float16"),
    case("f16_dim0_inf", (65, 9), dim=0, dtype="float16", neg_inf=0.2,
         inf_rows=2, tile=16),
]


def make_input(c, rng):
    x = c["mag"] * rng.standard_normal(c["shape"])
    if c["neg_inf"]:
        x[rng.random(c["shape"]) < c["neg_inf"]] = -np.inf
    if c["inf_rows"]:
        # Make whole rows (along dim) -inf.
        moved = np.moveaxis(x, c["dim"], -1)
        flat = moved.reshape(-1, moved.shape[-1])
        rows = rng.choice(flat.shape[0], size=c["inf_rows"], replace=False)
        flat[rows] = -np.inf
        x = np.moveaxis(flat.reshape(moved.shape), -1, c["dim"])
    return np.ascontiguousarray(x.astype(c["dtype"]))


def run_case(fa_run, c, tmp, extra_flags=()):
    rng = np.random.default_rng(seed_of(c["name"]))
    x = make_input(c, rng)
    xp = os.path.join(tmp, c["name"] + ".x.npy")
    yp = os.path.join(tmp, c["name"] + ".y.npy")
    np.save(xp, x)
    cmd = [fa_run, "softmax", "--quiet", "--x", xp, "-o", yp,
           "--dim=%d" % c["dim"]]
    if c["tile"] is not None:
        cmd += ["--tile", str(c["tile"])]
    if c["reference"]:
        cmd += ["--reference"]
    cmd += list(extra_flags)
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.time() - start
    if proc.returncode != 0:
        return False, "fa-run failed (exit %d): %s" % (
            proc.returncode, proc.stderr.strip()), elapsed

    y_ref, empty = reference(x, c["dim"], np.float64)
    y_naive, _ = reference(x, c["dim"], np.float32)
    y = np.load(yp)
    if y.dtype != x.dtype or y.shape != x.shape:
        return False, "Y is %s %s, expected %s %s" % (
            y.dtype, y.shape, x.dtype, x.shape), elapsed
    y64 = y.astype(np.float64)
    problems = []
    if np.isnan(y64).any():
        problems.append("%d NaN in Y" % np.isnan(y64).sum())
    empty_full = np.broadcast_to(empty, x.shape)
    if empty.any() and not (y64[empty_full] == 0).all():
        problems.append("all -inf rows are not exactly 0")
    max_err = np.nanmax(np.abs(y64 - y_ref))
    if c["dtype"] == "float16":
        naive = np.max(np.abs(y_naive.astype(np.float16).astype(np.float64)
                              - y_ref))
        tol = 2 * naive + 1e-4
        if not max_err <= tol:
            problems.append("max abs error %.3e exceeds %.3e" % (max_err, tol))
        summary = "max abs err %.2e (naive f16 %.2e, tol %.2e)" % (
            max_err, naive, tol)
    else:
        norm = np.linalg.norm(y_ref)
        rel = np.linalg.norm(y64 - y_ref) / norm if norm > 0 else \
            np.linalg.norm(y64)
        naive = np.linalg.norm(y_naive - y_ref) / norm if norm > 0 else 0.0
        tol = max(1e-5, 2 * naive)
        if not rel <= tol:
            problems.append("relative error %.3e exceeds %.3e" % (rel, tol))
        if not max_err <= 1e-5:
            problems.append("max abs error %.3e exceeds 1e-5" % max_err)
        summary = "rel err %.2e (naive f32 %.2e, tol %.2e), max abs %.2e" % (
            rel, naive, tol, max_err)
    summary += ", %d all -inf rows" % int(empty.sum())
    if problems:
        return False, summary + ": " + "; ".join(problems), elapsed
    return True, summary, elapsed


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    fa_run = argv[1]
    # --parallel: the row loop on OpenMP threads.
    extra_flags = [a for a in argv[2:] if a == "--parallel"]
    filters = [a for a in argv[2:] if a != "--parallel"]
    cases = [c for c in CASES
             if not filters or any(f in c["name"] for f in filters)]
    failures = 0
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="fa-softmax-") as tmp:
        for c in cases:
            ok, summary, elapsed = run_case(fa_run, c, tmp, extra_flags)
            failures += not ok
            print("%s %-20s %5.2fs  %s" % ("PASS" if ok else "FAIL", c["name"],
                                          elapsed, summary), flush=True)
    print("%d/%d softmax cases passed in %.1fs" % (
        len(cases) - failures, len(cases), time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
