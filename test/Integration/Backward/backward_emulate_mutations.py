# RUN: %python %s %fa_run
# RUN: %python %s %fa_run --mma
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Mutation tests of the SIMT backward kernels (fa-promote-shared-backward
+ fa-map-to-gpu) and, with --mma, of the mma.sync ones
(fa-map-to-tensor-cores-backward) under fa's interpreter: the comparison
with the float64 gradients must catch the bugs the issue names, in each of
the two kernels.

One case (f32, GQA 4/2, bottom-right causal with Nq != Nk, softcap, a
boolean mask with a fully masked query row and a key every row masks,
ragged 8x16 tiles) is mapped once by `fa-run attention-backward --device
emulate --dump-mapped`; the clean IR must match test/lib/fa_reference.py's
gradients to 2e-5 with the race checker on. The K row of the key every row
masks holds NaN: only a missing guard lets it reach a gradient (its score,
and so the softcap derivative, is NaN). Each mutation edits one kernel of the
mapped text (`dq`: the dQ kernel; `dkdv`: the dK/dV kernel) and runs it
again with --mapped; it must then miss the reference, give NaN or fail:

  {dq,dkdv}_no_delta        dP - Delta becomes dP (max(dP, dP));
  {dq,dkdv}_no_softcap_grad the softcap derivative 1 - tanh^2 becomes 1;
  {dq,dkdv}_unguarded_exp   the LSE = -inf test of P = exp2(S - LSE) never
                            holds, so a fully masked row computes
                            exp2(-inf - -inf) = NaN;
  {dq,dkdv}_unguarded_ds    dS = P (dP - Delta) (1 - tanh^2) not zeroed
                            where P = 0 (the NaN key's derivative leaks);
  dq_unguarded_product      dQ += dS K without zeroing the product where
                            dS = 0 (the NaN K row leaks; SIMT);
  dq_nan_k_kept             the K tile's NaN/inf elements not cleared before
                            the dS K mma (the NaN K row leaks; mma.sync);
  {dq,dkdv}_no_barrier      the barrier after the Q/dO tile copy removed
                            (dQ: the block's tile, with --mma the K/V tile
                            of each step; dK/dV: each query tile of its
                            loop): the race checker must report it.

With --mma the case is f16 with the mma.sync kernels' own tiles: the clean
kernels must be within 4x the error of a naive f16 backward (float64 math
on the rounded inputs, P and dS rounded to f16 before their products, the
gradients rounded once), and a mutant must exceed 4x the clean kernels'
own error (or give NaN, or fail).

Usage: backward_emulate_mutations.py FA_RUN [--mma]
"""

import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import reference, reference_backward, seed_of  # noqa: E402

FA_RUN = sys.argv[1]
MMA = "--mma" in sys.argv[2:]
B, Hq, Hkv, Nq, Nk, D = 1, 4, 2, 21, 27, 16
SCALE, SOFTCAP = 0.25, 2.0
EMPTY_ROW, DEAD_KEY = 10, 20


def split_kernels(text):
    """(prefix, dQ kernel, dK/dV kernel and the rest): the two gpu.func
    bodies, so that a mutation edits one."""
    a = text.index("gpu.func @")
    b = text.index("gpu.func @", a + 1)
    if "_dkdv(" not in text[b:text.index("\n", b)]:
        raise RuntimeError("the second gpu.func is not the dK/dV kernel")
    return text[:a], text[a:b], text[b:]


def sub_all(pattern, repl, text):
    out, n = re.subn(pattern, repl, text)
    return out if n else None


def remove_barrier(text, n):
    """`text` without its `n`-th gpu.barrier (0-based), or None."""
    matches = list(re.finditer(r"\n\s*gpu\.barrier\n", text))
    if n >= len(matches):
        return None
    m = matches[n]
    return text[:m.start()] + "\n" + text[m.end():]


def mutations(kernel, barrier):
    """The mutants of one kernel's text; None where the pattern is gone.
    `barrier` is the index of the barrier after the tile copy."""
    m = {}
    # dP - Delta: dP is a result of the S / dP loop (%N#i), Delta a load.
    m["no_delta"] = sub_all(
        r"arith\.subf (%\d+#\d+), (%\w+) : f32",
        r"arith.maximumf \1, \1 : f32", kernel)
    # 1 - tanh^2: t * t feeding the subtraction from one.
    m["no_softcap_grad"] = sub_all(
        r"(%\w+) = arith\.mulf (%\w+), \2 : f32"
        r"(\s+%\w+ = arith\.subf %\w+, )\1 : f32",
        r"\1 = arith.subf \2, \2 : f32\3\1 : f32", kernel)
    # The P guard: cmpf oeq LSE, -inf right before S - LSE.
    m["unguarded_exp"] = sub_all(
        r"arith\.cmpf oeq, (%\w+), (%\w+) : f32(\s+%\w+ = arith\.subf)",
        r"arith.cmpf une, \1, \1 : f32\3", kernel)
    # dS zeroed where P = 0: select(P == 0, 0, dS).
    m["unguarded_ds"] = sub_all(
        r"(%\w+) = arith\.cmpf oeq, (%\w+), (%\w+) : f32"
        r"(\s+%\w+ = arith\.select )\1, \3, (%\w+) : f32",
        r"\1 = arith.cmpf uno, \2, \2 : f32\4\1, \3, \5 : f32", kernel)
    # The guarded products: select(dS == 0, 0, dS * x) accumulated.
    m["unguarded_product"] = sub_all(
        r"(%\w+) = arith\.select (%\w+), (%\w+), (%\w+) : f32"
        r"(\s+%\w+ = arith\.addf %\w+, )\1 : f32",
        r"\1 = arith.select \2, \3, \4 : f32\5\4 : f32", kernel)
    # The barrier after the Q/dO copy (the dK/dV kernel has two before
    # it: after zeroing its accumulators, after its K/V copy).
    m["no_barrier"] = remove_barrier(kernel, barrier)
    if MMA:
        # dP - Delta feeding P (dP - Delta): dP itself is a fragment element.
        m["no_delta"] = sub_all(
            r"(%\w+) = arith\.subf (%\w+), (%\w+) : f32"
            r"(\s+%\w+ = arith\.mulf %\w+, )\1 : f32",
            r"\1 = arith.maximumf \2, \2 : f32\4\1 : f32", kernel)
        # The K tile's non-finite elements kept: select(bad, 0, x) -> x.
        m["nan_k_kept"] = sub_all(
            r"(%\w+) = arith\.select (%\w+), (%\w+), (%\w+) : "
            r"vector<8xi1>, vector<8xf16>",
            r"\1 = arith.select \2, \4, \4 : vector<8xi1>, vector<8xf16>",
            kernel)
    return m


def main():
    rng = np.random.default_rng(seed_of("backward.emulate.mutations"))
    dt = np.float16 if MMA else np.float32
    q = rng.standard_normal((B, Hq, Nq, D)).astype(dt)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(dt)
    v = rng.standard_normal((B, Hkv, Nk, D)).astype(dt)
    do = rng.standard_normal((B, Hq, Nq, D)).astype(dt)
    mask = rng.random((B, Hq, Nq, Nk)) < 0.8
    mask[:, :, EMPTY_ROW, :] = False
    mask[:, :, :, DEAD_KEY] = False
    kw = dict(softcap=SOFTCAP)
    o, lse, _ = reference(q, k, v, SCALE, "bottom-right", None, mask,
                          np.float64, **kw)
    ref = reference_backward(q, k, v, do, SCALE, "bottom-right", None, mask,
                             **kw)
    tol = 2e-5
    if MMA:
        # A naive f16 backward: P and dS rounded before their products.
        def f16(x):
            return x.astype(np.float16).astype(np.float64)
        naive = [f16(g) for g in reference_backward(
            q, k, v, do, SCALE, "bottom-right", None, mask, **kw,
            round_operands=f16)]
        naive_err = max(np.linalg.norm(g - w) / np.linalg.norm(w)
                        for g, w in zip(naive, ref))
    if not np.all(np.isneginf(lse[:, :, EMPTY_ROW])):
        sys.exit("FAILED: the fully masked row has a finite LSE")
    k[:, :, DEAD_KEY, :] = np.nan

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        p = {n: os.path.join(tmp, n + ".npy")
             for n in ("q", "k", "v", "o", "lse", "do", "mask", "dq", "dk",
                       "dv")}
        for n, x in (("q", q), ("k", k), ("v", v), ("do", do),
                     ("o", o.astype(dt)),
                     ("lse", lse.astype(np.float32))):
            np.save(p[n], x)
        np.save(p["mask"], mask)
        base = [FA_RUN, "attention-backward", "--q", p["q"], "--k", p["k"],
                "--v", p["v"], "--out", p["o"], "--lse", p["lse"], "--do",
                p["do"], "--mask", p["mask"], "--dq", p["dq"], "--dk",
                p["dk"], "--dv", p["dv"], "--causal", "bottom-right",
                "--softcap", repr(SOFTCAP), "--scale", repr(SCALE),
                "--device", "emulate", "--quiet"]
        base += (["--kernel", "mma"] if MMA else
                 ["--kernel", "simt", "--block-q", "8", "--block-kv", "16"])

        def run(extra):
            for n in ("dq", "dk", "dv"):
                if os.path.exists(p[n]):
                    os.remove(p[n])
            r = subprocess.run(base + extra, capture_output=True, text=True)
            if r.returncode != 0:
                return None, [line for line in r.stderr.splitlines()
                              if "race" in line][:1] or r.stderr.strip(
                                  ).splitlines()[-1:]
            got = [np.load(p[n]).astype(np.float64) for n in ("dq", "dk",
                                                              "dv")]
            errs = [np.linalg.norm(g - w) / np.linalg.norm(w)
                    if not np.isnan(g).any() else np.inf
                    for g, w in zip(got, ref)]
            return errs, None

        mapped = os.path.join(tmp, "mapped.mlir")
        errs, why = run(["--dump-mapped", mapped])
        if MMA and errs is not None:
            print(f"naive f16 backward: rel err {naive_err:.1e}")
            if max(errs) <= 4 * naive_err:
                tol = 4 * max(errs)
        if errs is None or not max(errs) < tol:
            print(f"FAILED: the clean kernels: {errs or why}")
            sys.exit(1)
        print("clean: rel err of dQ, dK, dV " +
              ", ".join(f"{e:.1e}" for e in errs))
        with open(mapped) as f:
            text = f.read()
        prefix, dq_kernel, dkdv_kernel = split_kernels(text)

        expected = {
            "dq": ("no_delta", "no_softcap_grad", "unguarded_exp",
                   "unguarded_ds",
                   "nan_k_kept" if MMA else "unguarded_product",
                   "no_barrier"),
            "dkdv": ("no_delta", "no_softcap_grad", "unguarded_exp",
                     "unguarded_ds", "no_barrier"),
        }
        # The barrier after a tile copy: in the mma.sync kernels the one
        # after the K/V copy of the dQ kernel (the second: the first opens
        # the tile) and the one after the Q/dO copy of the dK/dV kernel (the
        # second: the first comes before the copy).
        for which, kernel, barrier in (("dq", dq_kernel, 1 if MMA else 0),
                                       ("dkdv", dkdv_kernel, 1 if MMA else 2)):
            mutants = mutations(kernel, barrier)
            for name in expected[which]:
                label = f"{which}_{name}"
                body = mutants.get(name)
                if body is None:
                    failures.append(f"{label}: the pattern to edit is gone")
                    continue
                mutant = (prefix + body + dkdv_kernel if which == "dq" else
                          prefix + dq_kernel + body)
                path = os.path.join(tmp, label + ".mlir")
                with open(path, "w") as f:
                    f.write(mutant)
                errs, why = run(["--mapped", path])
                if errs is None:
                    print(f"{label}: caught: {' '.join(why)[:200]}")
                    if name != "no_barrier" or "race" not in " ".join(why):
                        failures.append(f"{label}: fa-run failed for "
                                        f"another reason: {why}")
                    continue
                if name == "no_barrier":
                    failures.append(f"{label}: the race was not reported")
                worst = max(errs)
                print(f"{label}: max rel err {worst:.1e}")
                if worst < tol:
                    failures.append(f"mutation {label} was not caught")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
