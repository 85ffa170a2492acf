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

The same module tiled over (B, Hkv) with transform.structured.
tile_using_forall (the op's TilingInterface model) must match the
reference too: tiling is exact.

The CPU vector kernel (fa-cpu-attention-backward, 8 lanes, query tiles of
16 rows, key tiles of 8) is mutated the same way in its vector IR, on two
kernel-form cases: bottom-right causal with Nq > Nk (rows with no key in
a visited tile) and softcap; a window whose visited key tile holds keys no
query attends, with NaN in their K rows:
  vec_no_delta         the -Delta start of (dP - Delta)^T becomes 0;
  vec_no_softcap_grad  the stored softcap derivative becomes 1;
  vec_unguarded_exp    the LSE = -inf test of P never holds;
  vec_unguarded_dq     dQ reads K without zeroing non-finite values.
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

VW, BQ, BK = 8, 16, 8
TILE = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention_backward"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
"""

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


def memref_type(shape):
    return "memref<" + "".join(f"{d}x" for d in shape) + "f32>"


def build_kernel_form(a, clauses):
    """@bwd in the kernel form (memref arguments) and @main passing the
    constants and printing dQ, dK, dV."""
    names = ("q", "k", "v", "o", "lse", "do")
    outs = (("dq", a["q"].shape), ("dk", a["k"].shape), ("dv", a["v"].shape))
    params, body, consts, call, ctypes = [], "", "", [], []
    for n in names:
        mt, tt = memref_type(a[n].shape), tensor_type(a[n].shape, "f32")
        params.append(f"%{n}_m: {mt}")
        consts += constant("c_" + n, a[n])
        consts += (f"    %a_{n} = bufferization.to_buffer %c_{n} : {tt} to "
                   f"{mt}\n")
        call.append(f"%a_{n}")
        ctypes.append(mt)
        body += (f"    %{n} = bufferization.to_tensor %{n}_m restrict : {mt} "
                 f"to {tt}\n")
    main_allocs, prints = "", ""
    for n, shape in outs:
        mt, tt = memref_type(shape), tensor_type(shape, "f32")
        params.append(f"%{n}_m: {mt}")
        body += (f"    %{n}0 = bufferization.to_tensor %{n}_m restrict "
                 f"writable : {mt} to {tt}\n")
        main_allocs += f"    %out_{n} = memref.alloc() : {mt}\n"
        call.append(f"%out_{n}")
        ctypes.append(mt)
        prints += (f"    %{n}_u = memref.cast %out_{n} : {mt} to "
                   f"memref<*xf32>\n    func.call @printMemrefF32(%{n}_u) : "
                   f"(memref<*xf32>) -> ()\n")
    t = {n: tensor_type(a[n].shape, "f32") for n in names}
    op = (f"    %g:3 = fa.attention_backward ins(%q, %k, %v : {t['q']}, "
          f"{t['k']}, {t['v']}) forward(%o, %lse : {t['o']}, {t['lse']}) "
          f"grad_output(%do : {t['do']}) outs(%dq0, %dk0, %dv0 : {t['q']}, "
          f"{t['k']}, {t['v']}) {clauses} -> {t['q']}, {t['k']}, {t['v']}\n")
    for i, (n, shape) in enumerate(outs):
        op += (f"    bufferization.materialize_in_destination %g#{i} in "
               f"restrict writable %{n}_m : ({tensor_type(shape, 'f32')}, "
               f"{memref_type(shape)}) -> ()\n")
    kernel = (f"  func.func @bwd({', '.join(params)}) {{\n" + body + op +
              "    return\n  }\n")
    main = ("  func.func @main() {\n" + consts + main_allocs +
            f"    func.call @bwd({', '.join(call)}) : ({', '.join(ctypes)}) "
            "-> ()\n" + prints + "    return\n  }\n")
    return "module {\n" + PRINT_DECL + kernel + main + "}\n"


def vector_case(rng, Nq, Nk, causal, window=None, softcap=None,
                nan_keys=()):
    B, Hq, Hkv, D = 1, 2, 1, 16
    a = {"q": rng.standard_normal((B, Hq, Nq, D)).astype(np.float32),
         "k": rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32),
         "v": rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32),
         "do": rng.standard_normal((B, Hq, Nq, D)).astype(np.float32)}
    kw = dict(window=window, softcap=softcap)
    o, lse, _ = reference(a["q"], a["k"], a["v"], SCALE, causal, None, None,
                          np.float64, **kw)
    a["o"], a["lse"] = o.astype(np.float32), lse.astype(np.float32)
    ref = reference_backward(a["q"], a["k"], a["v"], a["do"], SCALE, causal,
                             None, None, **kw)
    for key in nan_keys:
        a["k"][:, :, key, :] = np.nan
    clauses = {"bottom-right": "causal(bottom_right)", "none": ""}[causal]
    if window:
        clauses += f" window({window[0]}, {window[1]})"
    if softcap:
        clauses += f" softcap({softcap})"
    clauses += f" scale({SCALE})"
    return build_kernel_form(a, clauses), ref


def all_sub(pattern, repl, text):
    """`text` with every match of `pattern` replaced (the kernel repeats
    each micro-kernel per block shape), or None without a match."""
    out, n = re.subn(pattern, repl, text)
    return out if n else None


def mutate_vector(kernel, derivative_scratch):
    mutants = {}
    vec = f"vector<{VW}xf32>"
    mutants["vec_no_delta"] = all_sub(rf"arith\.negf (%\w+) : {vec}",
                                      rf"arith.subf \1, \1 : {vec}", kernel)
    # The P guard compares the LSE with a -inf constant.
    ninf = "|".join(re.findall(
        rf"(%\w+) = arith\.constant dense<0xFF800000> : {vec}", kernel))
    mutants["vec_unguarded_exp"] = all_sub(
        rf"arith\.cmpf oeq, (%\w+), ({ninf}) : {vec}",
        rf"arith.cmpf une, \1, \1 : {vec}", kernel) if ninf else None
    # The guarded copy of K: select(ord(k - k), k, 0) keeps everything.
    mutants["vec_unguarded_dq"] = all_sub(
        rf"arith\.cmpf ord, (%\w+), (%\w+) : {vec}",
        rf"arith.cmpf true, \1, \2 : {vec}", kernel)
    if derivative_scratch:
        # The derivative scratch is the third [BK][BQ] buffer (S^T, dS^T,
        # then it); the values stored there become 1.
        allocas = re.findall(rf"(%\w+) = memref\.alloca\(\) "
                             rf"{{alignment = 64 : i64}} : "
                             rf"memref<{BK}x{BQ}xf32>", kernel)
        text = (all_sub(rf"vector\.store %\w+, {allocas[2]}\[",
                        f"vector.store %mut_one, {allocas[2]}[", kernel)
                if len(allocas) >= 3 else None)
        if text is not None:
            at = text.index("{", text.index("func.func @bwd(")) + 1
            text = (text[:at] + f"\n    %mut_one = arith.constant "
                    f"dense<1.000000e+00> : {vec}" + text[at:])
        mutants["vec_no_softcap_grad"] = text
    return mutants


def run_vector(workdir):
    failures = []
    rng = np.random.default_rng(seed_of("backward.mutations.vector"))
    cases = [
        ("causal_rows_without_keys", vector_case(
            rng, 21, 13, "bottom-right", softcap=SOFTCAP),
         ("vec_no_delta", "vec_no_softcap_grad", "vec_unguarded_exp")),
        ("window_unattended_nan_keys", vector_case(
            rng, 4, 20, "bottom-right", window=(4, 0), nan_keys=(8, 9, 10, 11)),
         ("vec_unguarded_dq",)),
    ]
    opts = (f"--fa-cpu-attention-backward=vector-width={VW} block-q={BQ} "
            f"block-kv={BK}")
    for case_name, (text, ref), names in cases:
        kernel = fa_opt(FA_OPT, text, [opts], workdir, case_name)
        if "fa.attention_backward" in kernel:
            failures.append(f"{case_name}: the vector kernel left the op")
            continue
        mutants = mutate_vector(kernel, "softcap" in text)
        runs = {"unmutated": kernel}
        for name in names:
            if mutants.get(name) is None:
                failures.append(f"mutation {name}: the pattern to edit is "
                                "gone (or not unique)")
                continue
            runs[name] = mutants[name]
        for name, body in runs.items():
            got = execute(FA_OPT, body, workdir, f"{case_name}.{name}",
                          ["--fa-lower-to-cpu"])
            errs = [rel_err(g, r) if not np.isnan(g).any() else np.inf
                    for g, r in zip(got, ref)]
            worst = max(errs)
            print(f"vector {case_name} {name}: max rel err {worst:.2e}")
            if name in ("unmutated", "tiling") and not worst < 2e-5:
                failures.append(f"vector {case_name}: the unmutated kernel "
                                f"misses the reference: {worst:.2e}")
            if name != "unmutated" and worst < 2e-5:
                failures.append(f"mutation {name} was not caught")
    return failures


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
        # Tiling over (batch, kv head) through the TilingInterface model.
        lib = os.path.join(workdir, "tile.mlir")
        with open(lib, "w") as f:
            f.write(TILE)
        tiled_op = fa_opt(FA_OPT, build(a), [
            "--transform-preload-library=transform-library-paths=" + lib,
            "--transform-interpreter", "--canonicalize", "--cse"], workdir,
            "tiling")
        if "scf.forall" not in tiled_op:
            failures.append("tiling: no scf.forall after tile_using_forall")
        runs["tiling"] = tiled_op
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
            if name in ("unmutated", "tiling") and not worst < 2e-5:
                failures.append(f"the unmutated lowering misses the "
                                f"reference: {worst:.2e}")
            if name not in ("unmutated", "tiling") and worst < 2e-5:
                failures.append(f"mutation {name} was not caught")
        failures += run_vector(workdir)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
