# REQUIRES: avx512bf16
# RUN: %python %s %fa_run %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of the CPU vector kernel's bf16 dot-product path (fa-cpu-attention
bf16-dot: S and P V through vdpbf16ps, P rounded to bf16), which fa-run takes
for bf16 inputs on a host with AVX512_BF16, against the float64 reference of
test/lib/fa_reference.py, and the mutations it must catch.

Inputs are random bfloat16 values. For each case fa-run runs twice, with
`--cpu-bf16 dot` (the default) and `--cpu-bf16 f32` (the f32 FMA kernel,
P in f32), and both are compared with the reference computed in float64
from the bf16 values. Pass criteria:
  * dot: max abs error of O at most 2x that of a naive model of the kernel
    (float64 scores, P = exp(S - m) rounded to bf16 in the numerator, l
    summed unrounded, O rounded to bf16) plus 2^-12;
  * f32: the same against a naive model without the P rounding;
  * LSE (f32) within 1e-4 on finite entries; fully masked rows O = 0 and
    LSE = -inf exactly; no NaN where the reference is finite.
Cases cover odd lengths, an odd key tile (--block-kv 25, so a key pair
straddles the tile end), D = 40 / Dv = 24 (Dv not a multiple of 16), GQA,
bottom-right and top-left causality, key lengths with an empty sequence, a
boolean mask with fully masked rows, a window with softcap, an odd D (the
f32 kernel), two threads, and NaN in the K and V rows of keys some rows
remove (those rows must stay exact; the rows that attend a NaN key are
not compared). The token-major varlen form (three sequences, one
without queries, bottom-right causal per sequence) and a paged cache
(shuffled block tables of 16-key pages, ragged lengths, a query tile of
40 rows so that the prefill kernel runs) go through the dot products too:
O within 4 bf16 ulps (2^-6 max(1, |O|)) of the float64 reference in both
modes.

Mutations: one kernel-form case (f32 outputs printed through mlir-runner,
fa-cpu-attention bf16-dot=true, block-q 16, block-kv 25, bottom-right
causal with Nq = 16 < Nk = 40, NaN in the K and V rows of key 25, which
row 0 removes) is lowered, run as is (it must match), then edited in its
vector IR:
  p_pair_unzeroed    the P pair's second key past the tile is not zeroed
                     (a key the tile does not hold enters P V and the sum)
  v_pair_unzeroed    the V pair's second key past the tile is not zeroed
                     (P = 0 times the next tile's NaN V row)
  no_nonfinite_path  a guarded tile with a NaN V row keeps the dot
                     products (0 * NaN in the rows that removed the key)
  no_scale           S is not multiplied by the scale

Usage: bf16_dot_numerics.py FA_RUN FA_OPT
"""

import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import reference, scores, seed_of  # noqa: E402
from mlir_exec import (PRINT_DECL, bf16_bits, bf16_round,  # noqa: E402
                       constant, execute, extf_call, fa_opt, print_call,
                       tensor_type)


def case(name, **kw):
    c = dict(name=name, B=1, Hq=2, Hkv=2, Nq=77, Nk=77, D=64, Dv=None,
             causal="none", lens=None, mask=False, window=None, softcap=None,
             block_q=None, block_kv=None, nan_keys=(), parallel=False)
    c.update(kw)
    if c["Dv"] is None:
        c["Dv"] = c["D"]
    return c


CASES = [
    case("basic_odd_77"),
    case("gqa_causal_d128", B=2, Hq=4, Hkv=2, Nq=100, Nk=150, D=128,
         causal="bottom-right"),
    case("odd_key_tile_top_left", Nq=40, Nk=61, D=32, causal="top-left",
         block_kv=25),
    case("dv24_lens_mask", B=2, Nq=50, Nk=70, D=40, Dv=24, lens=[0, 50],
         mask=True),
    case("window_softcap", Nq=90, Nk=120, D=64, causal="bottom-right",
         window=(16, 0), softcap=20.0),
    case("odd_d33_f32_kernel", Nq=40, Nk=50, D=33),
    case("nk1", Nq=20, Nk=1, D=32),
    case("parallel_gqa_causal", B=2, Hq=4, Hkv=2, Nq=130, Nk=130, D=64,
         causal="bottom-right", parallel=True),
    case("nan_removed_keys_mask", Nq=33, Nk=47, D=32, mask=True,
         nan_keys=(3, 20)),
    case("nan_removed_keys_causal", Hq=1, Hkv=1, Nq=16, Nk=40, D=32,
         causal="bottom-right", block_q=16, block_kv=25, nan_keys=(25,)),
]

P_FLOOR = 2.0 ** -12


def from_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def naive(q, k, v, scale, c, mask, lens, round_p):
    """O of a naive kernel in float64: P rounded to bf16 in the numerator
    (round_p), l unrounded, O rounded to bf16."""
    kw = dict(window=c["window"], softcap=c["softcap"])
    s, _ = scores(q, k, scale, c["causal"], lens, mask, np.float64, **kw)
    vv = np.repeat(v, c["Hq"] // c["Hkv"], axis=1)
    if s.shape[-1] == 0:
        return np.zeros(q.shape[:3] + (v.shape[3],))
    m = s.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(-1)
    pn = bf16_round(p).astype(np.float64) if round_p else p
    o = np.einsum("bhqk,bhkd->bhqd", pn, vv)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(l[..., None] > 0, o / l[..., None], 0.0)
    return bf16_round(o).astype(np.float64)


def run_case(fa_run, tmp, c):
    rng = np.random.default_rng(seed_of("bf16_dot." + c["name"]))
    B, Hq, Hkv, Nq, Nk, D, Dv = (c[x] for x in
                                 ("B", "Hq", "Hkv", "Nq", "Nk", "D", "Dv"))
    bits = {"q": bf16_bits(rng.standard_normal((B, Hq, Nq, D))),
            "k": bf16_bits(rng.standard_normal((B, Hkv, Nk, D))),
            "v": bf16_bits(rng.standard_normal((B, Hkv, Nk, Dv)))}
    q, k, v = (from_bits(bits[n]) for n in "qkv")
    lens = np.array(c["lens"], np.int32) if c["lens"] is not None else None
    mask = None
    if c["mask"]:
        mask = rng.random((B, Hq, Nq, Nk)) < 0.7
        mask[:, :, rng.choice(Nq, 3, replace=False), :] = False
    if c["nan_keys"]:
        keys = list(c["nan_keys"])
        if mask is not None:
            # Every row of the first query head removes the NaN keys.
            mask[:, 0, :, keys] = False
        nan = np.uint16(0x7FC0)
        bits["k"][:, :, keys, :] = nan
        bits["v"][:, :, keys, :] = nan
    flags = []
    for n in "qkv":
        path = os.path.join(tmp, f"{c['name']}_{n}.npy")
        np.save(path, bits[n])
        flags += [f"--{n}", path]
    if lens is not None:
        np.save(os.path.join(tmp, c["name"] + "_lens.npy"), lens)
        flags += ["--kv-lens", os.path.join(tmp, c["name"] + "_lens.npy")]
    if mask is not None:
        np.save(os.path.join(tmp, c["name"] + "_mask.npy"), mask)
        flags += ["--mask", os.path.join(tmp, c["name"] + "_mask.npy")]
    if c["window"]:
        flags += ["--window", "%d,%d" % c["window"]]
    if c["softcap"]:
        flags += ["--softcap", str(c["softcap"])]
    if c["block_q"]:
        flags += ["--block-q", str(c["block_q"])]
    if c["block_kv"]:
        flags += ["--block-kv", str(c["block_kv"])]
    if c["parallel"]:
        flags += ["--parallel"]
    scale = 1.0 / np.sqrt(D)
    kw = dict(window=c["window"], softcap=c["softcap"])
    # The reference on finite data: the NaN rows' keys at 0; rows that
    # attend a NaN key are not compared.
    k_ref, v_ref = np.nan_to_num(k), np.nan_to_num(v)
    o_ref, lse_ref, empty = reference(q, k_ref, v_ref, scale, c["causal"],
                                      lens, mask, np.float64, **kw)
    compared = np.ones((B, Hq, Nq), bool)
    if c["nan_keys"]:
        s, _ = scores(q, k_ref, scale, c["causal"], lens, mask, np.float64,
                      **kw)
        compared = ~np.isfinite(s[..., list(c["nan_keys"])]).any(-1)
        if compared.all() or not compared.any():
            return ["the NaN keys are removed by every row or by none: the "
                    "case tests nothing"], ""
    problems, summary = [], []
    for mode in ("dot", "f32"):
        o_path = os.path.join(tmp, f"{c['name']}_{mode}_o.npy")
        l_path = os.path.join(tmp, f"{c['name']}_{mode}_lse.npy")
        ir_path = os.path.join(tmp, f"{c['name']}_{mode}.llvm.mlir")
        cmd = [fa_run, "attention", *flags, "-o", o_path, "--lse", l_path,
               "--dtype", "bf16", "--causal", c["causal"], "--cpu-bf16",
               mode, "--dump-llvm-dialect", ir_path, "--quiet"]
        env = dict(os.environ, OMP_NUM_THREADS="2")
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            problems.append(f"{mode}: fa-run failed: {p.stderr.strip()}")
            continue
        # The kernel that ran: vdpbf16ps exactly with --cpu-bf16 dot and an
        # even D.
        with open(ir_path) as f:
            dots = "llvm.x86.avx512bf16.dpbf16ps.512" in f.read()
        if dots != (mode == "dot" and D % 2 == 0):
            problems.append(f"{mode}: the kernel {'has' if dots else 'lacks'}"
                            " bf16 dot products")
        o = from_bits(np.load(o_path).view(np.uint16))
        lse = np.load(l_path).astype(np.float64)
        model = naive(q, k_ref, v_ref, scale, c, mask, lens,
                      round_p=(mode == "dot"))
        sel = compared & ~empty
        err = np.abs(o - o_ref)[sel].max() if sel.any() else 0.0
        nerr = np.abs(model - o_ref)[sel].max() if sel.any() else 0.0
        tol = 2 * nerr + P_FLOOR
        if not err <= tol:
            problems.append(f"{mode}: O max abs err {err:.3e} > {tol:.3e}")
        if np.isnan(o[compared]).any() or np.isnan(lse[compared]).any():
            problems.append(f"{mode}: NaN in rows that attend no NaN key")
        lsel = sel & np.isfinite(lse_ref)
        lerr = (np.abs(lse[lsel] - lse_ref[lsel]).max() if lsel.any()
                else 0.0)
        if not lerr <= 1e-4:
            problems.append(f"{mode}: LSE max abs err {lerr:.3e} > 1e-4")
        e = empty & compared
        if not ((o[e] == 0).all() and np.isneginf(lse[e]).all()):
            problems.append(f"{mode}: a fully masked row is not 0 / -inf")
        summary.append(f"{mode} O err {err:.2e} (model {nerr:.2e})")
    return problems, ", ".join(summary) + f", {int(empty.sum())} empty rows"


#===------------------------------------------------------------------------===#
# Mutations
#===------------------------------------------------------------------------===#

MB, MH, MNQ, MNK, MD = 1, 1, 16, 40, 32
MUT_OPTS = ("--fa-cpu-attention=decode-tiles=false bf16-dot=true block-q=16 "
            "block-kv=25")


def mutation_module(q, k, v):
    """@attn in kernel form on bf16 memrefs and @main passing the constants
    and printing O (extended to f32)."""
    shapes = {"q": q.shape, "k": k.shape, "v": v.shape, "o": q.shape}
    def mt(n):
        return "memref<" + "".join(f"{d}x" for d in shapes[n]) + "bf16>"
    def tt(n):
        return tensor_type(shapes[n], "bf16")
    body = "".join(f"    %{n}t = bufferization.to_tensor %{n} restrict : "
                   f"{mt(n)} to {tt(n)}\n" for n in "qkv")
    body += (f"    %ot = bufferization.to_tensor %o restrict writable : "
             f"{mt('o')} to {tt('o')}\n"
             f"    %r = fa.attention ins(%qt, %kt, %vt : {tt('q')}, {tt('k')}, "
             f"{tt('v')}) outs(%ot : {tt('o')}) causal(bottom_right) -> "
             f"{tt('o')}\n"
             f"    bufferization.materialize_in_destination %r in restrict "
             f"writable %o : ({tt('o')}, {mt('o')}) -> ()\n")
    sig = ", ".join(f"%{n}: {mt(n)}" for n in "qkvo")
    kernel = f"  func.func @attn({sig}) {{\n{body}    return\n  }}\n"
    main = "  func.func @main() {\n"
    for n, x in (("q", q), ("k", k), ("v", v)):
        main += constant("c_" + n, x, elt="bf16")
        main += (f"    %a_{n} = bufferization.to_buffer %c_{n} : {tt(n)} to "
                 f"{mt(n)}\n")
    main += f"    %a_o = memref.alloc() : {mt('o')}\n"
    main += (f"    func.call @attn(%a_q, %a_k, %a_v, %a_o) : "
             f"({', '.join(mt(n) for n in 'qkvo')}) -> ()\n")
    main += (f"    %o_t = bufferization.to_tensor %a_o restrict : {mt('o')} to "
             f"{tt('o')}\n")
    main += extf_call("%o_t", shapes["o"], "bf16", "o_f")
    main += print_call("%o_f", shapes["o"])
    main += "    return\n  }\n"
    return "module {\n" + PRINT_DECL + kernel + main + "}\n"


def one_sub(pattern, repl, text):
    out, n = re.subn(pattern, repl, text)
    return out if n else None


def mutants_of(kernel):
    m = {}
    # The P pair's second row: select(has1, exp(...), 0), converted to
    # bf16 (and added to the row sum).
    sel = next((c for c in re.finditer(
        r"(%\w+) = arith\.select (%\w+), (%\w+), (%\w+) : vector<16xf32>",
        kernel) if re.search(r"x86vector\.avx512\.cvt\.packed\.f32_to_bf16 "
                             + re.escape(c.group(1)) + r"\b", kernel)), None)
    m["p_pair_unzeroed"] = (kernel.replace(
        sel.group(0), sel.group(0).replace(
            f"select {sel.group(2)}, {sel.group(3)}, {sel.group(4)}",
            f"select {sel.group(2)}, {sel.group(3)}, {sel.group(3)}"))
        if sel else None)
    # The V pair's second row: select(has1, row, 0) on vector<16xbf16>.
    m["v_pair_unzeroed"] = one_sub(
        r"arith\.select (%\w+), (%\w+), (%\w+) : vector<16xbf16>",
        r"arith.select \1, \2, \2 : vector<16xbf16>", kernel)
    m["no_nonfinite_path"] = one_sub(
        r"vector\.reduction <or>, %\w+ : vector<16xi1> into i1",
        "arith.constant false", kernel)
    # S = scale * (Q K^T): the product of each accumulator with the scale.
    m["no_scale"] = one_sub(
        r"arith\.mulf (%\w+#\d+), %\w+ : vector<16xf32>",
        r"arith.addf \1, \1 : vector<16xf32>", kernel)
    return m


def run_mutations(fa_opt_path, workdir):
    rng = np.random.default_rng(seed_of("bf16_dot.mutations"))
    q = bf16_round(rng.standard_normal((MB, MH, MNQ, MD)))
    k = bf16_round(rng.standard_normal((MB, MH, MNK, MD)))
    v = bf16_round(rng.standard_normal((MB, MH, MNK, MD)))
    scale = 1.0 / np.sqrt(MD)
    o_ref, _, _ = reference(q.astype(np.float64), k.astype(np.float64),
                            v.astype(np.float64), scale, "bottom-right",
                            None, None, np.float64)
    # Key 25 is NaN: row 0 (which keeps keys <= 24) removes it; the other
    # rows attend it and are not compared.
    k[:, :, 25, :] = np.nan
    v[:, :, 25, :] = np.nan
    row0 = o_ref[0, 0, 0]
    kernel = fa_opt(fa_opt_path, mutation_module(q, k, v), [MUT_OPTS],
                    workdir, "mutations")
    if "x86vector.avx512.dot" not in kernel:
        return ["mutations: the kernel has no bf16 dot products"]
    failures = []
    runs = {"unmutated": kernel}
    for name, text in mutants_of(kernel).items():
        if text is None:
            failures.append(f"mutation {name}: the pattern to edit is gone")
            continue
        runs[name] = text
    for name, text in runs.items():
        (o,) = execute(fa_opt_path, text, workdir, "mutation_" + name)
        got = o[0, 0, 0]
        err = (np.inf if np.isnan(got).any()
               else float(np.abs(got - row0).max()))
        print(f"mutation {name}: row 0 max abs err {err:.2e}")
        caught = not err <= 2.0 ** -6
        if name == "unmutated" and caught:
            failures.append(f"the unmutated kernel misses: {err:.2e}")
        if name != "unmutated" and not caught:
            failures.append(f"mutation {name} was not caught")
    return failures


def attend(q, k, v, scale):
    """One head's bottom-right causal attention in float64 (q [Nq, D],
    k, v [Nk, D]); rows with no key are 0."""
    nq, nk = len(q), len(k)
    s = q @ k.T * scale
    s = np.where(np.arange(nk)[None, :] <= np.arange(nq)[:, None] + nk - nq,
                 s, -np.inf)
    m = s.max(1, keepdims=True) if nk else np.zeros((nq, 1))
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(1, keepdims=True)
    return np.where(l > 0, (p @ v) / np.where(l > 0, l, 1.0), 0.0)


def run_forms(fa_run, tmp):
    """Varlen and paged prefill through both modes; returns problems."""
    rng = np.random.default_rng(seed_of("bf16_dot.forms"))
    Hq, Hkv, D, G = 4, 2, 64, 2
    scale = 1.0 / np.sqrt(D)
    forms = []
    # Varlen: Q [Tq, Hq, D], K, V [Tk, Hkv, D], cu_seqlens.
    lq, lk = [0, 37, 70], [5, 60, 90]
    cq = np.cumsum([0] + lq).astype(np.int32)
    ck = np.cumsum([0] + lk).astype(np.int32)
    bits = {"q": bf16_bits(rng.standard_normal((cq[-1], Hq, D))),
            "k": bf16_bits(rng.standard_normal((ck[-1], Hkv, D))),
            "v": bf16_bits(rng.standard_normal((ck[-1], Hkv, D)))}
    q, k, v = (from_bits(bits[n]) for n in "qkv")
    ref = np.zeros_like(q)
    for b in range(len(lq)):
        for h in range(Hq):
            ref[cq[b]:cq[b + 1], h] = attend(
                q[cq[b]:cq[b + 1], h], k[ck[b]:ck[b + 1], h // G],
                v[ck[b]:ck[b + 1], h // G], scale)
    forms.append(("varlen", bits, {"cu-seqlens-q": cq, "cu-seqlens-k": ck},
                  ref))
    # Paged: K, V [P, S, Hkv, D], block table [B, M], lengths [B].
    B, S, P, M, Nq = 2, 16, 12, 5, 40
    bits = {"q": bf16_bits(rng.standard_normal((B, Hq, Nq, D))),
            "k": bf16_bits(rng.standard_normal((P, S, Hkv, D))),
            "v": bf16_bits(rng.standard_normal((P, S, Hkv, D)))}
    table = np.array([rng.permutation(P)[:M] for _ in range(B)], np.int32)
    lens = np.array([70, 33], np.int32)
    q, k, v = (from_bits(bits[n]) for n in "qkv")
    ref = np.zeros_like(q)
    for b in range(B):
        kk = np.concatenate([k[t] for t in table[b]])[:lens[b]]
        vv = np.concatenate([v[t] for t in table[b]])[:lens[b]]
        for h in range(Hq):
            ref[b, h] = attend(q[b, h], kk[:, h // G], vv[:, h // G], scale)
    forms.append(("paged", bits, {"block-table": table, "kv-lens": lens},
                  ref))
    problems = []
    for name, bits, extra, ref in forms:
        flags = []
        for n, a in list(bits.items()) + list(extra.items()):
            path = os.path.join(tmp, f"form_{name}_{n}.npy")
            np.save(path, a)
            flags += [f"--{n}", path]
        for mode in ("dot", "f32"):
            o_path = os.path.join(tmp, f"form_{name}_{mode}_o.npy")
            ir_path = os.path.join(tmp, f"form_{name}_{mode}.llvm.mlir")
            p = subprocess.run(
                [fa_run, "attention", *flags, "-o", o_path, "--dtype", "bf16",
                 "--causal", "bottom-right", "--cpu-bf16", mode,
                 "--dump-llvm-dialect", ir_path, "--quiet"],
                capture_output=True, text=True)
            if p.returncode != 0:
                problems.append(f"{name} {mode}: fa-run failed: "
                                f"{p.stderr.strip()}")
                continue
            with open(ir_path) as f:
                dots = "llvm.x86.avx512bf16.dpbf16ps.512" in f.read()
            if dots != (mode == "dot"):
                problems.append(f"{name} {mode}: the kernel "
                                f"{'has' if dots else 'lacks'} bf16 dot "
                                "products")
            o = from_bits(np.load(o_path).view(np.uint16))
            err = np.abs(o - ref)
            ok = (err <= 2.0 ** -6 * np.maximum(1.0, np.abs(ref))).all()
            print(f"{'PASS' if ok else 'FAIL'} {name + ' ' + mode:26s} "
                  f"O max abs err {err.max():.2e}")
            if not ok:
                problems.append(f"{name} {mode}: O max abs err "
                                f"{err.max():.3e}")
    return problems


def main(argv):
    fa_run, fa_opt_path = argv[1], argv[2]
    failures = []
    with tempfile.TemporaryDirectory(prefix="fa-bf16-dot-") as tmp:
        for c in CASES:
            problems, summary = run_case(fa_run, tmp, c)
            status = "FAIL" if problems else "PASS"
            print(f"{status} {c['name']:26s} {summary}")
            failures += [f"{c['name']}: {p}" for p in problems]
        failures += run_forms(fa_run, tmp)
        failures += run_mutations(fa_opt_path, tmp)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("all bf16 dot cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
