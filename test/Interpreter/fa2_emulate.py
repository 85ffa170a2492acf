# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The hand-written FA2-style tensor-core kernel (fa2_kernel_gen.py: ldmatrix,
mma.sync m16n8k16, quad shuffles, cp.async groups, dynamic shared memory)
runs under the interpreter (fa-emulate --check-races) against the float64
reference of test/lib/fa_reference.py, with the f16/bf16 thresholds of
attention_emulate.py: max abs error of O at most 2x that of a naive kernel
(float32 math on the 16-bit inputs, rounded to the 16-bit type) plus 1e-4.

Every variant (plain loads, cp.async, the double-buffered cp.async pipeline
in dynamic shared memory) in f16 and bf16, with several K/V tiles and
several heads and batches; the pipeline variant once more as a bare kernel
(fa-emulate --func/--grid/--block/--dynamic-shared instead of the host
function's launch) and once with the threads of every memory op in a random
order.

Usage: fa2_emulate.py FA_EMULATE [SUBSTRING...]
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fa2_kernel_gen  # noqa: E402


def load_helpers():
    spec = importlib.util.spec_from_file_location(
        "attention_emulate", os.path.join(HERE, "attention_emulate.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


h = load_helpers()

DTYPES = {"f16": "float16", "bf16": "bfloat16"}


def fa2_case(name, dtype, variant, B=1, H=2, Nq=128, Nk=192, flags=()):
    c = h.case(name, dtype=DTYPES[dtype], B=B, Hq=H, Hkv=H, Nq=Nq, Nk=Nk,
               D=64, lse=False)
    c.update(fa2_dtype=dtype, variant=variant, fa2_flags=list(flags))
    return c


CASES = [
    fa2_case("fa2_%s_%s" % (dt, var), dt, var, B=2 if var == "async" else 1,
             H=1 if var == "async" else 2)
    for dt in ("f16", "bf16") for var in ("plain", "async", "pipe")
] + [
    # One K/V tile only: the pipeline's first prefetch is the zero-fill.
    fa2_case("fa2_f16_pipe_one_tile", "f16", "pipe", Nq=64, Nk=64),
    # The bare kernel over an explicit grid (Nq / 64, H, B).
    fa2_case("fa2_bf16_pipe_bare", "bf16", "pipe", B=1, H=2, Nq=64, Nk=128,
             flags=["--func", "fa2", "--grid", "1,2,1", "--block",
                    "128,1,1", "--dynamic-shared",
                    str(fa2_kernel_gen.dynamic_shared_bytes("pipe"))]),
    fa2_case("fa2_f16_async_shuffled", "f16", "async", Nq=64, Nk=128,
             flags=["--shuffle-order", "--seed", "3"]),
]


def inputs(c):
    rng = np.random.default_rng(h.seed_of(c["name"]))
    q, k, v, _, _ = h.make_inputs(c, rng)
    return q, k, v


def run_fa2(fa_emulate, c, tmp, text=None, extra=()):
    """Runs case `c` (or the kernel `text`); returns (proc, paths)."""
    base = os.path.join(tmp, c["name"])
    paths = {n: base + "." + n + ".npy" for n in ("q", "k", "v", "o")}
    q, k, v = inputs(c)
    for n, a in (("q", q), ("k", k), ("v", v)):
        np.save(paths[n], a)
    if os.path.exists(paths["o"]):
        os.remove(paths["o"])
    mlir = base + ".mlir"
    with open(mlir, "w") as f:
        f.write(text if text is not None else
                fa2_kernel_gen.generate(c["fa2_dtype"], c["variant"]))
    cmd = [fa_emulate, mlir, "--arg-roles", "q,k,v,o", "--check-races",
           "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
           "-o", paths["o"]] + c["fa2_flags"] + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True), paths


def check_output(c, paths):
    q, k, v = inputs(c)
    o = np.load(paths["o"])
    expected = np.float16 if c["dtype"] == "float16" else np.float32
    if o.dtype != expected or o.shape != (c["B"], c["Hq"], c["Nq"], c["Dv"]):
        return False, "O is %s %s" % (o.dtype, o.shape)
    if c["dtype"] == "bfloat16" and not np.array_equal(h.round_bf16(o), o,
                                                       equal_nan=True):
        return False, "bf16 O holds values that are not bfloat16"
    return h.check(c, q, k, v, None, None, o, None)


def main(argv):
    fa_emulate = argv[1]
    filters = argv[2:]
    cases = [c for c in CASES
             if not filters or any(f in c["name"] for f in filters)]
    failures = 0
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="fa2-emulate-") as tmp:
        for c in cases:
            t0 = time.time()
            proc, paths = run_fa2(fa_emulate, c, tmp)
            if proc.returncode != 0:
                ok, summary = False, "fa-emulate failed (exit %d): %s" % (
                    proc.returncode, proc.stderr.strip()[:2000])
            else:
                ok, summary = check_output(c, paths)
            failures += not ok
            print("%s %-24s %5.2fs  %s" % ("PASS" if ok else "FAIL",
                                          c["name"], time.time() - t0,
                                          summary), flush=True)
    print("%d/%d FA2 kernels passed under the interpreter in %.1fs" % (
        len(cases) - failures, len(cases), time.time() - start))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
