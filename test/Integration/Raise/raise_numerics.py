# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""End-to-end test of fa-raise-attention.

Each case writes attention as front ends emit it in linalg (seeded random
inputs embedded as constants, an @main that calls it and prints the result),
then
  * raised: fa-opt --fa-raise-attention must leave exactly one fa.attention
    and none of the chain; the module is lowered with --fa-lower-to-cpu and
    run by mlir-runner;
  * un-raised: the same module (linalg.softmax decomposed) is lowered the
    same way and run;
and both are compared with the float64 reference of test/lib/fa_reference.py
(relative Frobenius error below 2e-5; printMemrefF32 prints 6 digits). Rows
whose keys are all masked must be exactly 0 in the raised result and are NaN
in the un-raised one: the documented difference.
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
DECOMPOSE = ["--transform-preload-library=transform-library-paths=" +
             os.path.join(HERE, "Inputs", "decompose_softmax.mlir"),
             "--transform-interpreter"]


def tt(shape):
    return tensor_type(shape, "f32")


def bmm3d(bh, nq, nk, d, dv, scale):
    """[B*H, N, D]: batch_matmul with linalg.transpose of K, a scalar
    multiply in a generic, linalg.softmax, batch_matmul."""
    q, k, v = (bh, nq, d), (bh, nk, d), (bh, nk, dv)
    s, kt, o = (bh, nq, nk), (bh, d, nk), (bh, nq, dv)
    body = f"""
  func.func @attn(%q: {tt(q)}, %k: {tt(k)}, %v: {tt(v)}) -> {tt(o)} {{
    %zero = arith.constant 0.0 : f32
    %c = arith.constant {scale!r} : f32
    %kt0 = tensor.empty() : {tt(kt)}
    %kt = linalg.transpose ins(%k : {tt(k)}) outs(%kt0 : {tt(kt)}) permutation = [0, 2, 1]
    %s0 = tensor.empty() : {tt(s)}
    %sf = linalg.fill ins(%zero : f32) outs(%s0 : {tt(s)}) -> {tt(s)}
    %s = linalg.batch_matmul ins(%q, %kt : {tt(q)}, {tt(kt)}) outs(%sf : {tt(s)}) -> {tt(s)}
    %ss = linalg.generic {{indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>],
                          iterator_types = ["parallel", "parallel", "parallel"]}}
        ins(%s : {tt(s)}) outs(%s0 : {tt(s)}) {{
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %c : f32
      linalg.yield %m : f32
    }} -> {tt(s)}
    %p = linalg.softmax dimension(2) ins(%ss : {tt(s)}) outs(%s0 : {tt(s)}) -> {tt(s)}
    %o0 = tensor.empty() : {tt(o)}
    %of = linalg.fill ins(%zero : f32) outs(%o0 : {tt(o)}) -> {tt(o)}
    %o = linalg.batch_matmul ins(%p, %v : {tt(s)}, {tt(v)}) outs(%of : {tt(o)}) -> {tt(o)}
    return %o : {tt(o)}
  }}
"""
    return body, [q, k, v], o


MAPS_QK = ("affine_map<(b, h, m, n, k) -> (b, h, m, k)>, "
           "affine_map<(b, h, m, n, k) -> (b, h, n, k)>, "
           "affine_map<(b, h, m, n, k) -> (b, h, m, n)>")
MAPS_PV = ("affine_map<(b, h, m, n, k) -> (b, h, m, k)>, "
           "affine_map<(b, h, m, n, k) -> (b, h, k, n)>, "
           "affine_map<(b, h, m, n, k) -> (b, h, m, n)>")


def contraction4d(result, maps, lhs, rhs, lhs_t, rhs_t, init, out_t):
    """`%result = ` a [B, H, M, N] contraction generic (mulf, addf)."""
    iters = '["parallel", "parallel", "parallel", "parallel", "reduction"]'
    return f"""%{result} = linalg.generic {{indexing_maps = [{maps}], iterator_types = {iters}}}
        ins(%{lhs}, %{rhs} : {lhs_t}, {rhs_t}) outs(%{init} : {out_t}) {{
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %m = arith.mulf %x, %y : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    }} -> {out_t}"""


def generic4d_mask(b, h, nq, nk, d, dv, scale, broadcast=False):
    """[B, H, N, D] contraction generics (K^T in the maps), linalg.mul by a
    splat constant, linalg.add of a float mask (with `broadcast`, a generic
    add of an [Nq, Nk] mask broadcast over B and H), linalg.softmax(3)."""
    q, k, v, s = (b, h, nq, d), (b, h, nk, d), (b, h, nk, dv), (b, h, nq, nk)
    m = (nq, nk) if broadcast else s
    o = (b, h, nq, dv)
    if broadcast:
        e4 = "affine_map<(b, h, m, n) -> (b, h, m, n)>"
        add = f"""%sm = linalg.generic {{indexing_maps = [{e4}, affine_map<(b, h, m, n) -> (m, n)>, {e4}],
                           iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
        ins(%ss, %mask : {tt(s)}, {tt(m)}) outs(%s0 : {tt(s)}) {{
    ^bb0(%x: f32, %y: f32, %z: f32):
      %r = arith.addf %x, %y : f32
      linalg.yield %r : f32
    }} -> {tt(s)}"""
    else:
        add = (f"%sm = linalg.add ins(%ss, %mask : {tt(s)}, {tt(m)}) "
               f"outs(%s0 : {tt(s)}) -> {tt(s)}")
    body = f"""
  func.func @attn(%q: {tt(q)}, %k: {tt(k)}, %v: {tt(v)}, %mask: {tt(m)}) -> {tt(o)} {{
    %zero = arith.constant 0.0 : f32
    %c = arith.constant dense<{scale!r}> : {tt(s)}
    %s0 = tensor.empty() : {tt(s)}
    %sf = linalg.fill ins(%zero : f32) outs(%s0 : {tt(s)}) -> {tt(s)}
    {contraction4d("s", MAPS_QK, "q", "k", tt(q), tt(k), "sf", tt(s))}
    %ss = linalg.mul ins(%s, %c : {tt(s)}, {tt(s)}) outs(%s0 : {tt(s)}) -> {tt(s)}
    {add}
    %p = linalg.softmax dimension(3) ins(%sm : {tt(s)}) outs(%s0 : {tt(s)}) -> {tt(s)}
    %o0 = tensor.empty() : {tt(o)}
    %of = linalg.fill ins(%zero : f32) outs(%o0 : {tt(o)}) -> {tt(o)}
    {contraction4d("o", MAPS_PV, "p", "v", tt(s), tt(v), "of", tt(o))}
    return %o : {tt(o)}
  }}
"""
    return body, [q, k, v, m], o


def generic4d_score(b, h, nq, nk, d, dv, score_body, mask_shape=None,
                    mask_map="(b, h, m, n)"):
    """[B, H, N, D] contraction generics around one elementwise generic on S
    whose body is `score_body` (block args %x = S, %y = the mask when
    `mask_shape` is given, read at `mask_map` of the loops (b, h, m, n);
    it may use linalg.index 2 / 3 as the query and key), then
    linalg.softmax(3)."""
    q, k, v, s = (b, h, nq, d), (b, h, nk, d), (b, h, nk, dv), (b, h, nq, nk)
    o = (b, h, nq, dv)
    e4 = "affine_map<(b, h, m, n) -> (b, h, m, n)>"
    margs = f", %mask: {tt(mask_shape)}" if mask_shape else ""
    mins = ", %mask" if mask_shape else ""
    mtypes = f", {tt(mask_shape)}" if mask_shape else ""
    mmaps = f"affine_map<(b, h, m, n) -> {mask_map}>, " if mask_shape else ""
    margb = ", %y: f32" if mask_shape else ""
    body = f"""
  func.func @attn(%q: {tt(q)}, %k: {tt(k)}, %v: {tt(v)}{margs}) -> {tt(o)} {{
    %zero = arith.constant 0.0 : f32
    %s0 = tensor.empty() : {tt(s)}
    %sf = linalg.fill ins(%zero : f32) outs(%s0 : {tt(s)}) -> {tt(s)}
    {contraction4d("s", MAPS_QK, "q", "k", tt(q), tt(k), "sf", tt(s))}
    %sm = linalg.generic {{indexing_maps = [{e4}, {mmaps}{e4}],
                           iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
        ins(%s{mins} : {tt(s)}{mtypes}) outs(%s0 : {tt(s)}) {{
    ^bb0(%x: f32{margb}, %out: f32):
{score_body}
    }} -> {tt(s)}
    %p = linalg.softmax dimension(3) ins(%sm : {tt(s)}) outs(%s0 : {tt(s)}) -> {tt(s)}
    %o0 = tensor.empty() : {tt(o)}
    %of = linalg.fill ins(%zero : f32) outs(%o0 : {tt(o)}) -> {tt(o)}
    {contraction4d("o", MAPS_PV, "p", "v", tt(s), tt(v), "of", tt(o))}
    return %o : {tt(o)}
  }}
"""
    arrays = [q, k, v] + ([mask_shape] if mask_shape else [])
    return body, arrays, o


def matmul2d_select(nq, nk, d, dv, divisor, split_exp=False):
    """[N, D]: matmul with linalg.transpose of K, linalg.div by a filled
    constant, select(mask, S, -inf) in a generic, and the decomposed softmax
    (max with maximumf from -inf, sub+exp (or, with `split_exp`, a sub
    generic then an exp generic), sum, div)."""
    q, k, v, s, kt, o = (nq, d), (nk, d), (nk, dv), (nq, nk), (d, nk), (nq, dv)
    mt = tensor_type(s, "i1")
    id2_ = "affine_map<(a, b) -> (a, b)>"
    row_ = "affine_map<(a, b) -> (a)>"
    if split_exp:
        exp_ops = f"""    %sub = linalg.generic {{indexing_maps = [{id2_}, {row_}, {id2_}], iterator_types = ["parallel", "parallel"]}}
        ins(%x, %max : {tt(s)}, {tt((nq,))}) outs(%s0 : {tt(s)}) {{
    ^bb0(%in: f32, %in1: f32, %out: f32):
      %t = arith.subf %in, %in1 : f32
      linalg.yield %t : f32
    }} -> {tt(s)}
    %e = linalg.generic {{indexing_maps = [{id2_}, {id2_}], iterator_types = ["parallel", "parallel"]}}
        ins(%sub : {tt(s)}) outs(%s0 : {tt(s)}) {{
    ^bb0(%in: f32, %out: f32):
      %ex = math.exp %in : f32
      linalg.yield %ex : f32
    }} -> {tt(s)}
"""
    else:
        exp_ops = f"""    %e = linalg.generic {{indexing_maps = [{id2_}, {row_}, {id2_}], iterator_types = ["parallel", "parallel"]}}
        ins(%x, %max : {tt(s)}, {tt((nq,))}) outs(%s0 : {tt(s)}) {{
    ^bb0(%in: f32, %in1: f32, %out: f32):
      %t = arith.subf %in, %in1 : f32
      %ex = math.exp %t : f32
      linalg.yield %ex : f32
    }} -> {tt(s)}
"""
    id2 = "affine_map<(a, b) -> (a, b)>"
    row = "affine_map<(a, b) -> (a)>"
    body = f"""
  func.func @attn(%q: {tt(q)}, %k: {tt(k)}, %v: {tt(v)}, %mask: {mt}) -> {tt(o)} {{
    %zero = arith.constant 0.0 : f32
    %dv = arith.constant {divisor!r} : f32
    %ninf = arith.constant 0xFF800000 : f32
    %kt0 = tensor.empty() : {tt(kt)}
    %kt = linalg.transpose ins(%k : {tt(k)}) outs(%kt0 : {tt(kt)}) permutation = [1, 0]
    %s0 = tensor.empty() : {tt(s)}
    %sf = linalg.fill ins(%zero : f32) outs(%s0 : {tt(s)}) -> {tt(s)}
    %s = linalg.matmul ins(%q, %kt : {tt(q)}, {tt(kt)}) outs(%sf : {tt(s)}) -> {tt(s)}
    %cf = linalg.fill ins(%dv : f32) outs(%s0 : {tt(s)}) -> {tt(s)}
    %ss = linalg.div ins(%s, %cf : {tt(s)}, {tt(s)}) outs(%s0 : {tt(s)}) -> {tt(s)}
    %x = linalg.generic {{indexing_maps = [{id2}, {id2}, {id2}], iterator_types = ["parallel", "parallel"]}}
        ins(%mask, %ss : {mt}, {tt(s)}) outs(%s0 : {tt(s)}) {{
    ^bb0(%keep: i1, %in: f32, %out: f32):
      %r = arith.select %keep, %in, %ninf : f32
      linalg.yield %r : f32
    }} -> {tt(s)}
    %r0 = tensor.empty() : {tt((nq,))}
    %mi = linalg.fill ins(%ninf : f32) outs(%r0 : {tt((nq,))}) -> {tt((nq,))}
    %max = linalg.generic {{indexing_maps = [{id2}, {row}], iterator_types = ["parallel", "reduction"]}}
        ins(%x : {tt(s)}) outs(%mi : {tt((nq,))}) {{
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    }} -> {tt((nq,))}
{exp_ops}    %si = linalg.fill ins(%zero : f32) outs(%r0 : {tt((nq,))}) -> {tt((nq,))}
    %sum = linalg.generic {{indexing_maps = [{id2}, {row}], iterator_types = ["parallel", "reduction"]}}
        ins(%e : {tt(s)}) outs(%si : {tt((nq,))}) {{
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    }} -> {tt((nq,))}
    %p = linalg.generic {{indexing_maps = [{id2}, {row}, {id2}], iterator_types = ["parallel", "parallel"]}}
        ins(%e, %sum : {tt(s)}, {tt((nq,))}) outs(%s0 : {tt(s)}) {{
    ^bb0(%in: f32, %in1: f32, %out: f32):
      %t = arith.divf %in, %in1 : f32
      linalg.yield %t : f32
    }} -> {tt(s)}
    %o0 = tensor.empty() : {tt(o)}
    %of = linalg.fill ins(%zero : f32) outs(%o0 : {tt(o)}) -> {tt(o)}
    %o = linalg.matmul ins(%p, %v : {tt(s)}, {tt(v)}) outs(%of : {tt(o)}) -> {tt(o)}
    return %o : {tt(o)}
  }}
"""
    return body, [q, k, v, s], o


def module(body, arrays, out_shape):
    names = [f"a{i}" for i in range(len(arrays))]
    consts = "".join(constant(n, a) for n, a in zip(names, arrays))
    types = ", ".join(tensor_type(a.shape, "i1" if a.dtype == np.bool_ else "f32")
                      for a in arrays)
    args = ", ".join("%" + n for n in names)
    return ("module {\n" + PRINT_DECL + body +
            "  func.func @main() {\n" + consts +
            f"    %out = func.call @attn({args}) : ({types}) -> {tt(out_shape)}\n" +
            print_call("%out", out_shape) + "    return\n  }\n}\n")


def check(name, body, arrays, out_shape, ref_o, empty, workdir,
          mask_generics=0, expect=None, forbid=()):
    """`mask_generics`: linalg.generic ops the raising may build (a mask it
    materializes); `expect`: a string the raised fa.attention must hold,
    `forbid`: strings it must not."""
    text = module(body, arrays, out_shape)
    raised = fa_opt(FA_OPT, text, ["--fa-raise-attention"], workdir, name + ".raise")
    attn = raised.split("func.func @main")[0]
    failures = []
    if attn.count("fa.attention") != 1:
        failures.append(f"{name}: expected one fa.attention after raising, got "
                        f"{attn.count('fa.attention')}")
    for op in ("linalg.softmax", "linalg.batch_matmul", "linalg.matmul",
               "linalg.transpose", "math.exp"):
        if op in attn:
            failures.append(f"{name}: {op} left after raising")
    if attn.count("linalg.generic") > mask_generics:
        failures.append(f"{name}: {attn.count('linalg.generic')} "
                        f"linalg.generic after raising, expected at most "
                        f"{mask_generics} (a materialized mask)")
    for want in ([expect] if isinstance(expect, str) else expect or []):
        if want not in attn:
            failures.append(f"{name}: the raised module lacks {want!r}")
    for bad in forbid:
        if bad in attn:
            failures.append(f"{name}: the raised module holds {bad!r}")
    [o_raised] = execute(FA_OPT, raised, workdir, name + ".raised")
    unraised_text = fa_opt(FA_OPT, text, DECOMPOSE, workdir, name + ".decompose")
    [o_naive] = execute(FA_OPT, unraised_text, workdir, name + ".naive")
    ref = ref_o.reshape(out_shape).astype(np.float64)
    empty = empty.reshape(out_shape[:-1])
    full = ~empty
    for label, o in (("raised", o_raised), ("un-raised", o_naive)):
        err = rel_err(o[full], ref[full])
        print(f"{name} {label}: rel err {err:.2e}")
        if not err < 2e-5:
            failures.append(f"{name}: {label} rel err {err:.2e} >= 2e-5")
    if empty.any():
        if not np.all(o_raised[empty] == 0):
            failures.append(f"{name}: raised fully masked rows are not 0")
        if not np.all(np.isnan(o_naive[empty])):
            failures.append(f"{name}: un-raised fully masked rows are not NaN "
                            "(the documented difference disappeared?)")
        print(f"{name}: {int(empty.sum())} fully masked rows: raised 0, "
              "un-raised NaN")
    if np.isnan(o_raised[full]).any():
        failures.append(f"{name}: NaN in raised output")
    return failures


def main():
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        # bmm3d: B*H = 3, Nq = 37, Nk = 53, D = 16, Dv = 8.
        rng = np.random.default_rng(seed_of("raise.bmm3d"))
        bh, nq, nk, d, dv = 3, 37, 53, 16, 8
        q = rng.standard_normal((bh, nq, d), dtype=np.float32)
        k = rng.standard_normal((bh, nk, d), dtype=np.float32)
        v = rng.standard_normal((bh, nk, dv), dtype=np.float32)
        scale = 0.3
        body, _, o_shape = bmm3d(bh, nq, nk, d, dv, scale)
        ref, _, empty = reference(q[:, None], k[:, None], v[:, None], scale,
                                  "none", None, None, np.float64)
        failures += check("bmm3d", body, [q, k, v], o_shape, ref, empty, workdir)

        # generic4d_mask: B = 2, H = 2, Nq = 19, Nk = 29, an additive mask
        # with -inf entries and one fully masked row per (b, h).
        rng = np.random.default_rng(seed_of("raise.generic4d"))
        b, h, nq, nk, d, dv = 2, 2, 19, 29, 8, 12
        q = rng.standard_normal((b, h, nq, d), dtype=np.float32)
        k = rng.standard_normal((b, h, nk, d), dtype=np.float32)
        v = rng.standard_normal((b, h, nk, dv), dtype=np.float32)
        mask = rng.standard_normal((b, h, nq, nk), dtype=np.float32)
        mask[rng.random((b, h, nq, nk)) < 0.3] = -np.inf
        mask[:, :, 5, :] = -np.inf
        scale = 0.4
        body, _, o_shape = generic4d_mask(b, h, nq, nk, d, dv, scale)
        ref, _, empty = reference(q, k, v, scale, "none", None, mask,
                                  np.float64)
        failures += check("generic4d_mask", body, [q, k, v, mask], o_shape,
                          ref, empty, workdir)
        # The same with an [Nq, Nk] mask broadcast over B and H.
        mask2 = np.ascontiguousarray(mask[0, 0])
        body, _, o_shape = generic4d_mask(b, h, nq, nk, d, dv, scale,
                                          broadcast=True)
        ref, _, empty = reference(q, k, v, scale, "none", None,
                                  mask2[None, None], np.float64)
        failures += check("generic4d_broadcast_mask", body, [q, k, v, mask2],
                          o_shape, ref, empty, workdir)

        # matmul2d_select: Nq = 33, Nk = 41, a boolean mask with two fully
        # masked rows; S / 5.
        rng = np.random.default_rng(seed_of("raise.matmul2d"))
        nq, nk, d, dv = 33, 41, 16, 16
        q = rng.standard_normal((nq, d), dtype=np.float32)
        k = rng.standard_normal((nk, d), dtype=np.float32)
        v = rng.standard_normal((nk, dv), dtype=np.float32)
        keep = rng.random((nq, nk)) < 0.6
        keep[3, :] = False
        keep[30, :] = False
        body, _, o_shape = matmul2d_select(nq, nk, d, dv, 5.0)
        ref, _, empty = reference(q[None, None], k[None, None], v[None, None],
                                  1.0 / 5.0, "none", None,
                                  keep[None, None], np.float64)
        failures += check("matmul2d_select", body, [q, k, v, keep], o_shape,
                          ref, empty, workdir)
        body, _, o_shape = matmul2d_select(nq, nk, d, dv, 5.0, split_exp=True)
        failures += check("matmul2d_select_split_exp", body, [q, k, v, keep],
                          o_shape, ref, empty, workdir)

        # Scores from index comparisons and a bias the raising must rebuild:
        # B = 2, H = 2, Nq = 21, Nk = 30.
        rng = np.random.default_rng(seed_of("raise.score_body"))
        b, h, nq, nk, d, dv = 2, 2, 21, 30, 8, 8
        q = rng.standard_normal((b, h, nq, d), dtype=np.float32)
        k = rng.standard_normal((b, h, nk, d), dtype=np.float32)
        v = rng.standard_normal((b, h, nk, dv), dtype=np.float32)
        qi = np.arange(nq)[:, None]
        ki = np.arange(nk)[None, :]
        # keep k <= q + 3, neither causal alignment: top_left causality
        # with q_offset 3; scale 0.5 after the select.
        offset = """      %ninf = arith.constant 0xFF800000 : f32
      %c3 = arith.constant 3 : index
      %half = arith.constant 0.5 : f32
      %iq = linalg.index 2 : index
      %ik = linalg.index 3 : index
      %lim = arith.addi %iq, %c3 : index
      %keep = arith.cmpi sle, %ik, %lim : index
      %sel = arith.select %keep, %x, %ninf : f32
      %r = arith.mulf %sel, %half : f32
      linalg.yield %r : f32"""
        body, _, o_shape = generic4d_score(b, h, nq, nk, d, dv, offset)
        keep = np.broadcast_to(ki <= qi + 3, (b, h, nq, nk))
        ref, _, empty = reference(q, k, v, 0.5, "none", None, keep,
                                  np.float64)
        failures += check("index_mask_offset", body, [q, k, v], o_shape, ref,
                          empty, workdir,
                          expect=["causal(top_left)", "q_offset("],
                          forbid=["mask("])
        # q - 2 <= k <= q + 3 (two comparisons): window(2, 3) on the
        # diagonal, no causality.
        window = """      %ninf = arith.constant 0xFF800000 : f32
      %c3 = arith.constant 3 : index
      %c2 = arith.constant 2 : index
      %half = arith.constant 0.5 : f32
      %iq = linalg.index 2 : index
      %ik = linalg.index 3 : index
      %hi = arith.addi %iq, %c3 : index
      %lo = arith.addi %ik, %c2 : index
      %k1 = arith.cmpi sle, %ik, %hi : index
      %k2 = arith.cmpi sge, %lo, %iq : index
      %keep = arith.andi %k1, %k2 : i1
      %xs = arith.mulf %x, %half : f32
      %r = arith.select %keep, %xs, %ninf : f32
      linalg.yield %r : f32"""
        body, _, o_shape = generic4d_score(b, h, nq, nk, d, dv, window)
        keep = np.broadcast_to((ki <= qi + 3) & (ki >= qi - 2),
                               (b, h, nq, nk))
        ref, _, empty = reference(q, k, v, 0.5, "none", None, keep,
                                  np.float64)
        failures += check("index_window", body, [q, k, v], o_shape, ref,
                          empty, workdir, expect="window(2, 3)",
                          forbid=["mask(", "causal("])
        # -4 * tanh(-0.125 * S): the softcap 4 of S * 0.5 (tanh is odd).
        softcap = """      %a = arith.constant -1.250000e-01 : f32
      %c = arith.constant -4.000000e+00 : f32
      %xs = arith.mulf %x, %a : f32
      %t = math.tanh %xs : f32
      %r = arith.mulf %t, %c : f32
      linalg.yield %r : f32"""
        body, _, o_shape = generic4d_score(b, h, nq, nk, d, dv, softcap)
        ref, _, empty = reference(q, k, v, 0.5, "none", None, None,
                                  np.float64, softcap=4.0)
        failures += check("softcap_negative_factors", body, [q, k, v],
                          o_shape, ref, empty, workdir,
                          expect=["softcap(4.0", "scale(5.000000e-01)"])
        # S * 0.5 + 0.5 * slope[h] * (k - q), keys k <= q: ALiBi with
        # slopes 0.5 * slope (a generic builds them) and top_left causality.
        alibi = """      %ninf = arith.constant 0xFF800000 : f32
      %half = arith.constant 0.5 : f32
      %iq = linalg.index 2 : index
      %ik = linalg.index 3 : index
      %rel = arith.subi %ik, %iq : index
      %reli = arith.index_cast %rel : index to i64
      %relf = arith.sitofp %reli : i64 to f32
      %sl = arith.mulf %y, %half : f32
      %bias = arith.mulf %relf, %sl : f32
      %xs = arith.mulf %x, %half : f32
      %sb = arith.addf %xs, %bias : f32
      %keep = arith.cmpi sle, %ik, %iq : index
      %r = arith.select %keep, %sb, %ninf : f32
      linalg.yield %r : f32"""
        slopes = rng.uniform(0.1, 1.0, size=h).astype(np.float32)
        body, _, o_shape = generic4d_score(b, h, nq, nk, d, dv, alibi,
                                           mask_shape=(h,), mask_map="(h)")
        rel = (ki - qi).astype(np.float64)
        bias = 0.5 * slopes.astype(np.float64)[None, :, None, None] * rel
        keep_c = np.broadcast_to(ki <= qi, (b, h, nq, nk))
        ref, _, empty = reference(q, k, v, 0.5, "none", None,
                                  np.where(keep_c, bias, -np.inf),
                                  np.float64)
        failures += check("alibi_signed", body, [q, k, v, slopes], o_shape,
                          ref, empty, workdir, mask_generics=1,
                          expect=["alibi(", "causal(top_left)"],
                          forbid=["mask("])
        # The same bias without causality is not ALiBi (its sign changes
        # across the diagonal): an additive mask.
        nocausal = alibi.replace("%r = arith.select %keep, %sb, %ninf : f32",
                                 "%r = arith.addf %sb, %ninf : f32"
                                 ).replace("%ninf = arith.constant "
                                           "0xFF800000", "%ninf = arith."
                                           "constant 0.0")
        body, _, o_shape = generic4d_score(b, h, nq, nk, d, dv, nocausal,
                                           mask_shape=(h,), mask_map="(h)")
        ref, _, empty = reference(q, k, v, 0.5, "none", None,
                                  np.broadcast_to(bias, (b, h, nq, nk)),
                                  np.float64)
        failures += check("alibi_signed_no_causal", body,
                          [q, k, v, slopes], o_shape, ref, empty, workdir,
                          mask_generics=1, expect="mask(",
                          forbid=["alibi(", "causal("])
        # (S + M) * 0.25: the mask fa.attention gets is M * 0.25.
        mask = rng.standard_normal((b, h, nq, nk), dtype=np.float32)
        before = """      %c = arith.constant 0.25 : f32
      %a = arith.addf %x, %y : f32
      %r = arith.mulf %a, %c : f32
      linalg.yield %r : f32"""
        body, _, o_shape = generic4d_score(b, h, nq, nk, d, dv, before,
                                           mask_shape=(b, h, nq, nk))
        ref, _, empty = reference(q, k, v, 0.25, "none", None, 0.25 * mask,
                                  np.float64)
        failures += check("bias_before_scale", body, [q, k, v, mask],
                          o_shape, ref, empty, workdir, mask_generics=1,
                          expect="scale(2.500000e-01)")
        # One query (decode), keep k <= q + Nk - 1: bottom-right causal,
        # i.e. every key.
        nq1 = 1
        q1 = rng.standard_normal((b, h, nq1, d), dtype=np.float32)
        decode = f"""      %ninf = arith.constant 0xFF800000 : f32
      %c = arith.constant {nk - 1} : index
      %iq = linalg.index 2 : index
      %ik = linalg.index 3 : index
      %lim = arith.addi %iq, %c : index
      %keep = arith.cmpi sle, %ik, %lim : index
      %r = arith.select %keep, %x, %ninf : f32
      linalg.yield %r : f32"""
        body, _, o_shape = generic4d_score(b, h, nq1, nk, d, dv, decode)
        ref, _, empty = reference(q1, k, v, 1.0, "bottom-right", None, None,
                                  np.float64)
        failures += check("decode_bottom_right", body, [q1, k, v], o_shape,
                          ref, empty, workdir, expect="causal(bottom_right)")

    finish(failures)


if __name__ == "__main__":
    main()
