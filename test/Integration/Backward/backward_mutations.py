# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Mutation tests of fa-tile-attention-backward: the comparison of
backward_numerics.py must catch the bugs the issue names.

One case (GQA, bottom-right causal, softcap, a boolean mask with fully
masked rows, ragged tiles) is embedded as constants in a module whose @main
runs fa.attention_backward and prints dQ, dK and dV. It is lowered with
fa-tile-attention-backward, run as is (it must match the float64 reference
of test/lib/fa_reference.py to 2e-5), and run again after each edit of the
lowered IR, which must then miss the reference (or give NaN):
  no_delta          dP - Delta starts from 0 instead of -Delta (the Delta
                    term left out);
  no_softcap_grad   the softcap's derivative 1 - tanh^2 becomes 1 (tanh^2
                    replaced by 0);
  unguarded_exp     P = exp(S - LSE) without the LSE = -inf guard, so a
                    fully masked row computes exp(-inf - -inf) = NaN;
  unguarded_dq      dQ's product dS K without the removed-key guard, with
                    NaN in a K row every query masks.
"""

import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import reference, reference_backward, seed_of  # noqa: E402
from mlir_exec import (PRINT_DECL, constant, execute, fa_opt,  # noqa: E402
                       print_call, rel_err, tensor_type)

FA_OPT = sys.argv[1]
B, Hq, Hkv, Nq, Nk, D = 1, 4, 2, 21, 27, 16
SCALE = 0.25
SOFTCAP = 2.0


def build(a):
    f32 = lambda x: tensor_type(x.shape, "f32")  # noqa: E731
    consts = "".join(constant(n, a[n]) for n in ("q", "k", "v", "o", "lse",
                                                 "do"))
    consts += constant("mask", a["mask"])
    outs = ""
    for n, src in (("dq0", "q"), ("dk0", "k"), ("dv0", "v")):
        outs += f"    %{n} = tensor.empty() : {f32(a[src])}\n"
    qt, kt, vt = f32(a["q"]), f32(a["k"]), f32(a["v"])
    op = (f"    %g:3 = fa.attention_backward ins(%q, %k, %v : {qt}, {kt}, "
          f"{vt}) forward(%o, %lse : {f32(a['o'])}, {f32(a['lse'])}) "
          f"grad_output(%do : {f32(a['do'])}) mask(%mask : "
          f"{tensor_type(a['mask'].shape, 'i1')}) outs(%dq0, %dk0, %dv0 : "
          f"{qt}, {kt}, {vt}) causal(bottom_right) softcap({SOFTCAP}) "
          f"scale({SCALE}) -> {qt}, {kt}, {vt}\n")
    prints = (print_call("%g#0", a["q"].shape, "pdq") +
              print_call("%g#1", a["k"].shape, "pdk") +
              print_call("%g#2", a["v"].shape, "pdv"))
    return ("module {\n" + PRINT_DECL + "  func.func @main() {\n" + consts +
            outs + op + prints + "    return\n  }\n}\n")


def one_sub(pattern, repl, text):
    """`text` with the single match of `pattern` replaced, or None when the
    pattern does not match exactly once."""
    matches = list(re.finditer(pattern, text))
    if len(matches) != 1:
        return None
    m = matches[0]
    return text[:m.start()] + m.expand(repl) + text[m.end():]


def mutate(tiled):
    mutants = {}
    # The -Delta initializer of dP - Delta.
    mutants["no_delta"] = one_sub(r"arith\.negf (%\w+) : f32",
                                  r"arith.subf \1, \1 : f32", tiled)
    # tanh(s / c)^2 in the derivative 1 - tanh^2.
    mutants["no_softcap_grad"] = one_sub(r"arith\.mulf (%\w+), \1 : f32",
                                         r"arith.subf \1, \1 : f32", tiled)
    # The guard of P: cmpf oeq LSE, -inf right before the exp's subtraction.
    mutants["unguarded_exp"] = one_sub(
        r"arith\.cmpf oeq, (%\w+), (%\w+) : f32(\s+%\w+ = arith\.subf)",
        r"arith.cmpf une, \1, \1 : f32\3", tiled)
    # The dQ contraction's guard: select(dS == 0, 0, dS * K) then add.
    mutants["unguarded_dq"] = one_sub(
        r"(%\w+) = arith\.mulf (%\w+), (%\w+) : f32"
        r"(\s+%\w+ = arith\.constant [^\n]*)?"
        r"\s+(%\w+) = arith\.cmpf oeq, \2, (%\w+) : f32"
        r"\s+(%\w+) = arith\.select \5, \6, \1 : f32"
        r"(\s+%\w+ = arith\.addf %\w+, )\7 : f32",
        r"\1 = arith.mulf \2, \3 : f32\8\1 : f32", tiled)
    return mutants


def main():
    rng = np.random.default_rng(seed_of("backward.mutations"))
    a = {"q": rng.standard_normal((B, Hq, Nq, D)).astype(np.float32),
         "k": rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32),
         "v": rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32),
         "do": rng.standard_normal((B, Hq, Nq, D)).astype(np.float32)}
    mask = rng.random((B, Hq, Nq, Nk)) < 0.8
    mask[:, :, 10, :] = False  # a fully masked row
    mask[:, :, :, 20] = False  # a key every row masks
    a["mask"] = mask
    kw = dict(softcap=SOFTCAP)
    o, lse, empty = reference(a["q"], a["k"], a["v"], SCALE, "bottom-right",
                              None, mask, np.float64, **kw)
    a["o"] = o.astype(np.float32)
    a["lse"] = lse.astype(np.float32)
    ref = reference_backward(a["q"], a["k"], a["v"], a["do"], SCALE,
                             "bottom-right", None, mask, **kw)
    # A K row that every query masks holds NaN: only an unguarded product
    # lets it reach dQ.
    a["k"][:, :, 20, :] = np.nan
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        tiled = fa_opt(FA_OPT, build(a), [
            "--fa-tile-attention-backward=block-q=8 block-kv=8"], workdir,
            "tiled")
        runs = {"unmutated": tiled}
        for name, text in mutate(tiled).items():
            if text is None:
                failures.append(f"mutation {name}: the pattern to edit is "
                                "gone (or not unique)")
                continue
            runs[name] = text
        for name, text in runs.items():
            got = execute(FA_OPT, text, workdir, name, ["--fa-lower-to-cpu"])
            errs = [rel_err(g, r) if not np.isnan(g).any() else np.inf
                    for g, r in zip(got, ref)]
            worst = max(errs)
            print(f"{name}: max rel err of dQ, dK, dV {worst:.2e}")
            if name == "unmutated" and not worst < 2e-5:
                failures.append(f"the unmutated lowering misses the "
                                f"reference: {worst:.2e}")
            if name != "unmutated" and worst < 2e-5:
                failures.append(f"mutation {name} was not caught")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
