# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""General score_mod / mask_mod regions for the numerics tests: for each,
its mod_operands (drawn from a seeded generator), the MLIR text of its
regions and a numpy version written from its meaning (not from the
kernels), in the form fa_reference.reference takes.

The region block arguments are named %rs (score), %rb, %rh, %rq, %rk
(indices) and %rt0, %rt1, ... (the mod_operands), so as not to clash with
the names of the enclosing function."""

import numpy as np

from mlir_exec import MLIR_TYPES, tensor_type


def _ttype(a):
    return tensor_type(a.shape, MLIR_TYPES[a.dtype])


# name -> (operands(rng, B, Hq, Nq, Nk) -> [arrays], score_mod body,
#          mask_mod body, numpy score_mod, numpy mask_mod). A body is the
# region's ops before its fa.yield of %r; numpy functions take the index
# grids and the operand arrays.
REGIONS = {
    # T5-style relative position bias: s + table[h, k - q + Nq - 1], a
    # table [Hq, Nq + Nk - 1] read at a per-lane index.
    "rel_bias": (
        lambda rng, B, Hq, Nq, Nk: [
            rng.standard_normal((Hq, Nq + Nk - 1), dtype=np.float32)],
        lambda Nq, Nk: f"""
    %nq1 = arith.constant {Nq - 1} : index
    %d = arith.subi %rk, %rq : index
    %i = arith.addi %d, %nq1 : index
    %x = tensor.extract %rt0[%rh, %i] : {{t0}}
    %r = arith.addf %rs, %x : f32""",
        None,
        lambda s, b, h, q, k, ops, Nq: s + ops[0][h, k - q + Nq - 1],
        None),
    # A per-row, per-head bias table [Nq, Hq] read at [q, h]: on the CPU
    # kernel's query lanes the varying index is not the last one, so the
    # read goes lane by lane.
    "row_bias": (
        lambda rng, B, Hq, Nq, Nk: [
            rng.standard_normal((Nq, Hq), dtype=np.float32)],
        lambda Nq, Nk: """
    %x = tensor.extract %rt0[%rq, %rh] : {t0}
    %r = arith.addf %rs, %x : f32""",
        None,
        lambda s, b, h, q, k, ops, Nq: s + ops[0][q, h],
        None),
    # ALiBi written by hand: s - slopes[h] * |q - k| (slopes [Hq]).
    "alibi_like": (
        lambda rng, B, Hq, Nq, Nk: [rng.random(Hq, dtype=np.float32) * 0.5],
        lambda Nq, Nk: """
    %slope = tensor.extract %rt0[%rh] : {t0}
    %d = arith.subi %rq, %rk : index
    %a = math.absi %d : index
    %ai = arith.index_cast %a : index to i32
    %af = arith.sitofp %ai : i32 to f32
    %p = arith.mulf %slope, %af : f32
    %r = arith.subf %rs, %p : f32""",
        None,
        lambda s, b, h, q, k, ops, Nq: s - ops[0][h] * np.abs(q - k),
        None),
    # Prefix LM: key k of row q is kept when k < prefix[b] or k <= q
    # (prefix [B] i32; a prefix of 0 is plain top-left causality).
    "prefix_lm": (
        lambda rng, B, Hq, Nq, Nk: [
            rng.integers(0, max(Nk // 2, 1), size=B, dtype=np.int32)],
        None,
        lambda Nq, Nk: """
    %p = tensor.extract %rt0[%rb] : {t0}
    %ki = arith.index_cast %rk : index to i32
    %in = arith.cmpi slt, %ki, %p : i32
    %c = arith.cmpi sle, %rk, %rq : index
    %r = arith.ori %in, %c : i1""",
        None,
        lambda b, h, q, k, ops: (k < ops[0][b]) | (k <= q)),
    # Both regions: a per-head score offset from a [Hq] table and a mask
    # removing the keys whose index is a multiple of 3 for odd heads.
    "both": (
        lambda rng, B, Hq, Nq, Nk: [
            rng.standard_normal(Hq, dtype=np.float32)],
        lambda Nq, Nk: """
    %x = tensor.extract %rt0[%rh] : {t0}
    %r = arith.addf %rs, %x : f32""",
        lambda Nq, Nk: """
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c0 = arith.constant 0 : index
    %hm = arith.remui %rh, %c2 : index
    %even = arith.cmpi eq, %hm, %c0 : index
    %km = arith.remui %rk, %c3 : index
    %not3 = arith.cmpi ne, %km, %c0 : index
    %r = arith.ori %even, %not3 : i1""",
        lambda s, b, h, q, k, ops, Nq: s + ops[0][h],
        lambda b, h, q, k, ops: (h % 2 == 0) | (k % 3 != 0)),
}


def _bodies(name, arrays, Nq, Nk):
    """(score_mod args, body) and (mask_mod args, body) of region set
    `name` over `arrays` (None for an absent one)."""
    _, score_body, mask_body, _, _ = REGIONS[name]
    types = [_ttype(a) for a in arrays]
    extra = "".join(f", %rt{i}: {t}" for i, t in enumerate(types))
    subst = {f"t{i}": t for i, t in enumerate(types)}
    score = mask = None
    if score_body:
        score = ("%rs: f32, %rb: index, %rh: index, %rq: index, "
                 f"%rk: index{extra}", score_body(Nq, Nk).format(**subst))
    if mask_body:
        mask = (f"%rb: index, %rh: index, %rq: index, %rk: index{extra}",
                mask_body(Nq, Nk).format(**subst))
    return score, mask


def region_text(name, arrays, Nq, Nk, score=True):
    """The `score_mod { ... } mask_mod { ... }` text of region set `name`
    over the mod_operands `arrays` (without the score_mod when `score` is
    false: what fa.create_block_mask takes)."""
    score_mod, mask_mod = _bodies(name, arrays, Nq, Nk)
    text = ""
    if score_mod and score:
        text += (f" score_mod {{\n  ^bb0({score_mod[0]}):" + score_mod[1] +
                 "\n    fa.yield %r : f32\n  }")
    if mask_mod:
        text += (f" mask_mod {{\n  ^bb0({mask_mod[0]}):" + mask_mod[1] +
                 "\n    fa.yield %r : i1\n  }")
    return text


def mods_file(name, arrays, Nq, Nk):
    """Region set `name` as the functions `fa-run --mods` reads
    (func.func @score_mod / @mask_mod)."""
    score_mod, mask_mod = _bodies(name, arrays, Nq, Nk)
    text = "module {\n"
    if score_mod:
        text += (f"  func.func @score_mod({score_mod[0]}) -> f32 {{" +
                 score_mod[1] + "\n    return %r : f32\n  }\n")
    if mask_mod:
        text += (f"  func.func @mask_mod({mask_mod[0]}) -> i1 {{" +
                 mask_mod[1] + "\n    return %r : i1\n  }\n")
    return text + "}\n"


def region_case(name, rng, B, Hq, Nq, Nk):
    """The operands (dict "mod0", "mod1", ... -> array), the
    `mod_operands(...)` clause, the region text after the op's attributes,
    and the numpy score_mod / mask_mod of region set `name`."""
    make, _, _, ref_score, ref_mask = REGIONS[name]
    arrays = make(rng, B, Hq, Nq, Nk)
    ops = {f"mod{i}": a for i, a in enumerate(arrays)}
    types = [_ttype(a) for a in arrays]
    clause = (" mod_operands(" + ", ".join("%" + n for n in ops) + " : " +
              ", ".join(types) + ")")
    text = region_text(name, arrays, Nq, Nk)
    score = mask = None
    if ref_score:
        score = lambda s, b, h, q, k: ref_score(s, b, h, q, k, arrays, Nq)
    if ref_mask:
        mask = lambda b, h, q, k: ref_mask(b, h, q, k, arrays)
    return ops, clause, text, score, mask


def block_mask_text(name, arrays, B, Hq, Nq, Nk, tiles, operand_names,
                    result="%bm"):
    """`result = fa.create_block_mask ...` for region set `name` (its
    mask_mod) over [B, Hq, Nq, Nk] with `tiles`, reading the mod_operands
    named `operand_names`; returns (text, result type)."""
    tq, tk = tiles
    t = (f"tensor<{B}x{Hq}x{(Nq + tq - 1) // tq}x{(Nk + tk - 1) // tk}xi8>")
    types = [_ttype(a) for a in arrays]
    p = result[1:]
    text = "".join(f"    %{p}_s{i} = arith.constant {v} : index\n"
                   for i, v in enumerate((B, Hq, Nq, Nk)))
    ops = ""
    if arrays:
        ops = (" mod_operands(" + ", ".join(operand_names) + " : " +
               ", ".join(types) + ")")
    text += (f"    {result} = fa.create_block_mask sizes(%{p}_s0, %{p}_s1, "
             f"%{p}_s2, %{p}_s3){ops} tiles({tq}, {tk})" +
             region_text(name, arrays, Nq, Nk, score=False)
             .replace(" mask_mod {", " mask_mod {", 1) + f" -> {t}\n")
    return text, t
