# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""fa.merge, lowered by fa-lower-merge inside fa-lower-to-cpu and run by
mlir-runner, against a float64 log-sum-exp merge written from the op's
contract (docs/FA/FADialect.md), on fresh random data:

  * random partials: S = 4 over rows [2, 3, 5] with Dv = 16, LSE ~ 3 N(0,1),
    about a third of the partials empty (LSE = -inf, their O NaN: an empty
    partial contributes nothing, whatever its O holds) and some rows with
    every partial empty (O = 0, LSE = -inf exactly); f32 output with LSE;
  * f16 and bf16 outputs without LSE, S = 1 and S = 7, one row dim;
  * split-KV (flash-decoding) end to end: attention over Nk = 100 keys (B =
    2, Hq = 4 over Hkv = 2, Nq = 5, D = 32, bottom-right causal) computed as
    three fa.attention partials over the key chunks [0, 33), [33, 66),
    [66, 100) -- each chunk's causality through top_left with q_offset(Nk -
    Nq - k0) -- inserted into [3, B, Hq, Nq, Dv] and merged, against the
    float64 attention over all keys; again with a window(20, 0) that leaves
    the first two chunks empty for every row (partials with LSE = -inf
    from fa.attention itself).

O is compared with a relative Frobenius bound (f32 1e-5: printMemrefF32's
six digits and the exp/log of the merge; f16 2e-3, bf16 1.6e-2: the
output rounding); LSE to 1e-5 absolute; empty rows exactly.

Mutation: the lowered merge with the empty-partial guard of the O sum
removed (w * O added for every partial) must fail the random case (0 * NaN
is NaN).
"""

import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import seed_of  # noqa: E402
from mlir_exec import (PRINT_DECL, bf16_round, constant, execute,  # noqa: E402
                       extf_call, fa_opt, finish, print_call, rel_err,
                       tensor_type)

FA_OPT = sys.argv[1]
NINF = -np.inf
TOL = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}


def ref_merge(po, pl):
    """float64 merge of partials po [S, ..., Dv], pl [S, ...]."""
    po, pl = po.astype(np.float64), pl.astype(np.float64)
    m = pl.max(axis=0)
    empty = m == NINF
    mu = np.where(empty, 0.0, m)
    w = np.where(pl == NINF, 0.0, np.exp(pl - mu[None]))
    total = w.sum(axis=0)
    safe = np.where(pl[..., None] == NINF, 0.0, po)
    acc = (w[..., None] * safe).sum(axis=0)
    o = np.where(empty[..., None], 0.0,
                 acc / np.where(empty, 1.0, total)[..., None])
    lse = np.where(empty, NINF, mu + np.log(np.where(empty, 1.0, total)))
    return o, lse


def ref_attention(q, k, v, window_left=None):
    """float64 attention, bottom-right causal, GQA (query head h reads kv
    head h // (Hq / Hkv)), optional window: keys q + off - L <= k."""
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    kh = np.repeat(k, hq // hkv, axis=1).astype(np.float64)
    vh = np.repeat(v, hq // hkv, axis=1).astype(np.float64)
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), kh) / np.sqrt(d)
    qi, ki = np.arange(nq)[:, None], np.arange(nk)[None, :]
    keep = ki <= qi + (nk - nq)
    if window_left is not None:
        keep &= ki >= qi + (nk - nq) - window_left
    s = np.where(keep, s, NINF)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    lse = (m + np.log(p.sum(axis=-1, keepdims=True)))[..., 0]
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), vh), lse


def module(body_lines):
    return ("module {\n" + PRINT_DECL + "  func.func @main() {\n" +
            "".join(body_lines) + "    return\n  }\n}\n")


def merge_case(name, S, rows, dv, elt, with_lse, p_empty=0.33, all_empty=0.1):
    """A merge of random partials: (module text, reference O, reference
    LSE or None, output element type)."""
    rng = np.random.default_rng(seed_of("merge." + name))
    po = rng.standard_normal((S,) + rows + (dv,)).astype(np.float32)
    pl = (3 * rng.standard_normal((S,) + rows)).astype(np.float32)
    empty = rng.random((S,) + rows) < p_empty
    empty |= (rng.random(rows) < all_empty)[None]
    pl[empty] = NINF
    po[empty] = np.nan
    o_ref, lse_ref = ref_merge(po, pl)
    out_t = tensor_type(rows + (dv,), elt)
    lse_t = tensor_type(rows, "f32")
    lines = [constant("po", po), constant("pl", pl),
             f"    %o0 = tensor.empty() : {out_t}\n"]
    outs = f"%o0 : {out_t}"
    res = out_t
    if with_lse:
        lines.append(f"    %l0 = tensor.empty() : {lse_t}\n")
        outs += f", %l0 : {lse_t}"
        res += f", {lse_t}"
    r = "%r:2" if with_lse else "%r"
    lines.append(f"    {r} = fa.merge ins(%po, %pl : "
                 f"{tensor_type(po.shape, 'f32')}, "
                 f"{tensor_type(pl.shape, 'f32')}) outs({outs}) -> {res}\n")
    o_val = "%r#0" if with_lse else "%r"
    if elt != "f32":
        lines.append(extf_call(o_val, rows + (dv,), elt, "of"))
        o_val = "%of"
    lines.append(print_call(o_val, rows + (dv,), "po_"))
    if with_lse:
        lines.append(print_call("%r#1", rows, "pl_"))
    return module(lines), o_ref, (lse_ref if with_lse else None), elt


def split_kv_case(name, window_left=None):
    """Attention as three key-chunk partials merged: (module, O, LSE)."""
    rng = np.random.default_rng(seed_of("merge." + name))
    B, Hq, Hkv, Nq, Nk, D = 2, 4, 2, 5, 100, 32
    q = rng.standard_normal((B, Hq, Nq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    o_ref, lse_ref = ref_attention(q, k, v, window_left)
    chunks = [(0, 33), (33, 66), (66, 100)]
    S = len(chunks)
    ot, lt = tensor_type((B, Hq, Nq, D), "f32"), tensor_type((B, Hq, Nq), "f32")
    pot = tensor_type((S, B, Hq, Nq, D), "f32")
    plt = tensor_type((S, B, Hq, Nq), "f32")
    lines = [constant("q", q), f"    %po0 = tensor.empty() : {pot}\n",
             f"    %pl0 = tensor.empty() : {plt}\n"]
    window = f" window({window_left}, 0)" if window_left is not None else ""
    for c, (k0, k1) in enumerate(chunks):
        n = k1 - k0
        kt = tensor_type((B, Hkv, n, D), "f32")
        lines += [
            constant(f"k{c}", np.ascontiguousarray(k[:, :, k0:k1])),
            constant(f"v{c}", np.ascontiguousarray(v[:, :, k0:k1])),
            f"    %off{c} = arith.constant {Nk - Nq - k0} : index\n",
            f"    %oe{c} = tensor.empty() : {ot}\n",
            f"    %le{c} = tensor.empty() : {lt}\n",
            f"    %a{c}:2 = fa.attention ins(%q, %k{c}, %v{c} : "
            f"{tensor_type(q.shape, 'f32')}, {kt}, {kt}) q_offset(%off{c}) "
            f"outs(%oe{c} : {ot}, %le{c} : {lt}) causal(top_left){window} "
            f"-> {ot}, {lt}\n",
            f"    %po{c + 1} = tensor.insert_slice %a{c}#0 into %po{c}"
            f"[{c}, 0, 0, 0, 0] [1, {B}, {Hq}, {Nq}, {D}] [1, 1, 1, 1, 1] : "
            f"{ot} into {pot}\n",
            f"    %pl{c + 1} = tensor.insert_slice %a{c}#1 into %pl{c}"
            f"[{c}, 0, 0, 0] [1, {B}, {Hq}, {Nq}] [1, 1, 1, 1] : "
            f"{lt} into {plt}\n"]
    lines += [f"    %o0 = tensor.empty() : {ot}\n",
              f"    %l0 = tensor.empty() : {lt}\n",
              f"    %r:2 = fa.merge ins(%po{S}, %pl{S} : {pot}, {plt}) "
              f"outs(%o0 : {ot}, %l0 : {lt}) -> {ot}, {lt}\n",
              print_call("%r#0", (B, Hq, Nq, D), "mo"),
              print_call("%r#1", (B, Hq, Nq), "ml")]
    return module(lines), o_ref, lse_ref, "f32"


def check(name, outs, o_ref, lse_ref, elt):
    problems = []
    o = outs[0].reshape(o_ref.shape)
    empty_o = np.all(o_ref == 0.0, axis=-1)
    if np.isnan(o).any():
        problems.append("NaN in O")
    if not np.all(o[empty_o] == 0.0):
        problems.append("rows with every partial empty are not 0")
    err = rel_err(np.nan_to_num(o[~empty_o]), o_ref[~empty_o])
    if not err < TOL[elt]:
        problems.append(f"O rel err {err:.2e} >= {TOL[elt]:.1e}")
    summary = f"O rel err {err:.2e}, {int(empty_o.sum())} empty rows"
    if lse_ref is not None:
        lse = outs[1].reshape(lse_ref.shape)
        inf = lse_ref == NINF
        if not np.all(lse[inf] == NINF):
            problems.append("LSE of empty rows is not -inf")
        lerr = np.max(np.abs(lse[~inf] - lse_ref[~inf])) if (~inf).any() \
            else 0.0
        if not lerr <= 1e-5:
            problems.append(f"LSE err {lerr:.2e} > 1e-5")
        summary += f", LSE err {lerr:.2e}"
    print(f"{name}: {summary}" + (": " + "; ".join(problems) if problems
                                  else ""))
    return [f"{name}: {p}" for p in problems]


def mutated(text, workdir):
    """`text` with fa.merge lowered and the guard of the O sum removed: the
    select that keeps the accumulator (%out) for an empty partial takes the
    sum either way."""
    lowered = fa_opt(FA_OPT, text, ["--fa-lower-merge"], workdir, "mutant")
    pattern = re.compile(r"(%\w+) = arith\.select (%\w+), (%out\w*), (%\w+)"
                         r" : f32(\s+linalg\.yield \1)")
    new, n = pattern.subn(r"\1 = arith.select \2, \4, \4 : f32\5", lowered)
    return new if n == 1 else None


def main():
    failures = []
    cases = [
        ("random_f32_lse", *merge_case("random_f32_lse", 4, (2, 3, 5), 16,
                                       "f32", True)),
        ("f16_s7", *merge_case("f16_s7", 7, (9,), 8, "f16", False)),
        ("bf16_s1", *merge_case("bf16_s1", 1, (6,), 8, "bf16", False)),
        ("split_kv_causal", *split_kv_case("split_kv_causal")),
        ("split_kv_window_empty_chunks",
         *split_kv_case("split_kv_window_empty_chunks", window_left=20)),
    ]
    with tempfile.TemporaryDirectory() as workdir:
        for name, text, o_ref, lse_ref, elt in cases:
            try:
                outs = execute(FA_OPT, text, workdir, name)
            except (RuntimeError, ValueError) as e:
                failures.append(f"{name}: did not run: {str(e)[:400]}")
                continue
            failures += check(name, outs, o_ref, lse_ref, elt)
        # Mutation: without the empty-partial guard, NaN O of empty
        # partials reaches the result.
        name, text, o_ref, lse_ref, elt = cases[0]
        bad = mutated(text, workdir)
        if bad is None:
            failures.append("mutation: the guard select was not found")
        else:
            outs = execute(FA_OPT, bad, workdir, "mutant.run")
            caught = check("mutation no_empty_guard", outs, o_ref, lse_ref,
                           elt)
            if not caught:
                failures.append("mutation no_empty_guard: not caught")
            else:
                print("mutation no_empty_guard caught")
    finish(failures)


if __name__ == "__main__":
    main()
