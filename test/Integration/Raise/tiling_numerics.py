# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of fa.attention and fa.softmax tiled through their
TilingInterface models with transform.structured.tile_using_forall.

Each case embeds seeded random inputs as constants, tiles the op with a
transform script (fa-opt --transform-interpreter), checks that the result
holds an scf.forall around the tiled op, lowers it with --fa-lower-to-cpu,
runs it with mlir-runner and compares O and LSE (or the softmax) with the
float64 reference of test/lib/fa_reference.py: relative Frobenius error
below 2e-5 (printMemrefF32 prints 6 digits), fully masked rows exactly
O = 0 and LSE = -inf, no NaN. The cases cover tail tiles, GQA head tiles,
causal bottom_right with Nq > Nk (a tile whose rows are all masked, so the
tiled op has no keys) and Nq < Nk, causal top_left with Nq > Nk (the padded
keys) and Nq < Nk, key lengths, boolean and additive masks.
"""

import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import reference, seed_of  # noqa: E402
from mlir_exec import (PRINT_DECL, constant, execute, fa_opt,  # noqa: E402
                       finish, print_call,
                       rel_err, tensor_type)

FA_OPT = sys.argv[1]
CAUSAL = {"none": "", "top-left": " causal(top_left)",
          "bottom-right": " causal(bottom_right)"}


def ttype(a):
    return tensor_type(a.shape, {np.dtype(np.float32): "f32",
                                 np.dtype(np.bool_): "i1",
                                 np.dtype(np.int32): "i32"}[a.dtype])


def transform_library(op, tiles, path):
    with open(path, "w") as f:
        f.write(f"""module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: !transform.any_op {{transform.readonly}}) {{
    %op = transform.structured.match ops{{["{op}"]}} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes {tiles} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }}
}}
""")


def tile_and_run(name, text, op, tiles, workdir):
    lib = os.path.join(workdir, name + ".transform.mlir")
    transform_library(op, tiles, lib)
    tiled = fa_opt(FA_OPT, text,
                   ["--transform-preload-library=transform-library-paths=" + lib,
                    "--transform-interpreter", "--canonicalize", "--cse"],
                   workdir, name + ".tile")
    if "scf.forall" not in tiled:
        raise RuntimeError(f"{name}: no scf.forall after tiling")
    return execute(FA_OPT, tiled, workdir, name + ".tiled")


def attention_case(name, B, Hq, Hkv, Nq, Nk, D, Dv, tiles, causal="none",
                   lens=None, mask=None, scale=None, workdir=None):
    rng = np.random.default_rng(seed_of("tiling." + name))
    q = rng.standard_normal((B, Hq, Nq, D), dtype=np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, Nk, Dv), dtype=np.float32)
    lens_a = None if lens is None else np.array(lens, dtype=np.int32)
    mask_a = None
    if mask == "bool":
        mask_a = rng.random((B, 1, Nq, Nk)) < 0.7
        mask_a[:, :, 2, :] = False
    elif mask == "float":
        mask_a = rng.standard_normal((1, Hq, Nq, Nk), dtype=np.float32)
        mask_a[rng.random(mask_a.shape) < 0.2] = -np.inf
    args = [("q", q), ("k", k), ("v", v)]
    clauses = ""
    if lens_a is not None:
        args.append(("lens", lens_a))
        clauses += f" kv_lens(%lens : {ttype(lens_a)})"
    if mask_a is not None:
        args.append(("mask", mask_a))
        clauses += f" mask(%mask : {ttype(mask_a)})"
    o_t = tensor_type((B, Hq, Nq, Dv), "f32")
    l_t = tensor_type((B, Hq, Nq), "f32")
    scale_clause = "" if scale is None else f" scale({scale!r})"
    params = ", ".join(f"%{n}: {ttype(a)}" for n, a in args)
    body = f"""
  func.func @attn({params}) -> ({o_t}, {l_t}) {{
    %o0 = tensor.empty() : {o_t}
    %l0 = tensor.empty() : {l_t}
    %o, %l = fa.attention ins(%q, %k, %v : {ttype(q)}, {ttype(k)}, {ttype(v)}){clauses}
        outs(%o0 : {o_t}, %l0 : {l_t}){CAUSAL[causal]}{scale_clause} -> {o_t}, {l_t}
    return %o, %l : {o_t}, {l_t}
  }}
"""
    consts = "".join(constant("c_" + n, a) for n, a in args)
    call_args = ", ".join("%c_" + n for n, _ in args)
    call_types = ", ".join(ttype(a) for _, a in args)
    text = ("module {\n" + PRINT_DECL + body + "  func.func @main() {\n" + consts +
            f"    %r:2 = func.call @attn({call_args}) : ({call_types}) -> ({o_t}, {l_t})\n" +
            print_call("%r#0", (B, Hq, Nq, Dv), "o") +
            print_call("%r#1", (B, Hq, Nq), "l") +
            "    return\n  }\n}\n")
    o, lse = tile_and_run(name, text, "fa.attention", tiles, workdir)
    eff_scale = scale if scale is not None else 1.0 / np.sqrt(D)
    ref_o, ref_lse, empty = reference(q, k, v, eff_scale, causal, lens_a,
                                      mask_a, np.float64)
    failures = []
    full = ~empty
    err_o = rel_err(o[full], ref_o[full])
    err_l = rel_err(lse[full], ref_lse[full])
    print(f"{name}: O rel err {err_o:.2e}, LSE rel err {err_l:.2e}, "
          f"{int(empty.sum())} empty rows")
    if not err_o < 2e-5:
        failures.append(f"{name}: O rel err {err_o:.2e}")
    if not err_l < 2e-5:
        failures.append(f"{name}: LSE rel err {err_l:.2e}")
    if not (np.all(o[empty] == 0) and np.all(lse[empty] == -np.inf)):
        failures.append(f"{name}: empty rows are not O = 0, LSE = -inf")
    if np.isnan(o).any() or np.isnan(lse).any():
        failures.append(f"{name}: NaN in the output")
    return failures


def softmax_case(name, shape, dim, tiles, workdir):
    rng = np.random.default_rng(seed_of("tiling." + name))
    x = rng.standard_normal(shape, dtype=np.float32) * 3
    x[(0,) * (len(shape) - 1)] = -np.inf  # one all -inf row (dim = last)
    t = ttype(x)
    body = f"""
  func.func @sm(%x: {t}) -> {t} {{
    %e = tensor.empty() : {t}
    %y = fa.softmax ins(%x : {t}) outs(%e : {t}) dimension({dim}) -> {t}
    return %y : {t}
  }}
"""
    text = ("module {\n" + PRINT_DECL + body + "  func.func @main() {\n" +
            constant("x", x) + f"    %y = func.call @sm(%x) : ({t}) -> {t}\n" +
            print_call("%y", shape) + "    return\n  }\n}\n")
    [y] = tile_and_run(name, text, "fa.softmax", tiles, workdir)
    xd = x.astype(np.float64)
    m = xd.max(axis=dim, keepdims=True)
    empty = m == -np.inf
    e = np.exp(xd - np.where(empty, 0, m))
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = np.where(empty, 0, e / e.sum(axis=dim, keepdims=True))
    err = rel_err(y, ref)
    print(f"{name}: rel err {err:.2e}")
    failures = []
    if not err < 2e-5 or np.isnan(y).any():
        failures.append(f"{name}: rel err {err:.2e} (or NaN)")
    return failures


def main():
    failures = []
    with tempfile.TemporaryDirectory() as w:
        failures += attention_case(
            "gqa_mask_lens_tail", B=2, Hq=4, Hkv=2, Nq=37, Nk=29, D=16, Dv=8,
            tiles="[1, 2, 16]", lens=[21, 40], mask="bool", scale=0.3,
            workdir=w)
        failures += attention_case(
            "bottom_right_nq_gt_nk", B=1, Hq=2, Hkv=2, Nq=40, Nk=24, D=16,
            Dv=16, tiles="[1, 1, 16]", causal="bottom-right", workdir=w)
        failures += attention_case(
            "bottom_right_nq_lt_nk_tail", B=2, Hq=2, Hkv=1, Nq=37, Nk=53, D=8,
            Dv=8, tiles="[1, 1, 16]", causal="bottom-right", lens=[45, 53],
            mask="float", workdir=w)
        failures += attention_case(
            "top_left_nq_gt_nk_padded", B=2, Hq=2, Hkv=2, Nq=40, Nk=24, D=16,
            Dv=8, tiles="[1, 2, 16]", causal="top-left", lens=[17, 100],
            mask="float", workdir=w)
        failures += attention_case(
            "top_left_nq_gt_nk_no_lens", B=1, Hq=1, Hkv=1, Nq=30, Nk=12, D=8,
            Dv=8, tiles="[0, 0, 7]", causal="top-left", workdir=w)
        failures += attention_case(
            "top_left_nq_lt_nk_tail", B=1, Hq=2, Hkv=2, Nq=24, Nk=40, D=8,
            Dv=16, tiles="[0, 1, 7]", causal="top-left", mask="bool",
            workdir=w)
        failures += attention_case(
            "gqa_head_divisor_bottom_right", B=1, Hq=8, Hkv=2, Nq=19, Nk=33,
            D=8, Dv=8, tiles="[0, 1, 8]", causal="bottom-right", workdir=w)
        failures += softmax_case("softmax_rows_tail", (10, 77), 1, "[3]", w)
        failures += softmax_case("softmax_3d", (3, 5, 40), 2, "[2, 2]", w)
    finish(failures)


if __name__ == "__main__":
    main()
