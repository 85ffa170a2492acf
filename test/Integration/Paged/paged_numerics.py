# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of fa.attention on a paged K/V cache (a block_table) through
the CPU vector kernel, against a float64 reference that gathers each
sequence's keys from its pages (sharing no code with the kernel) and
applies test/lib/fa_reference.py's contract per sequence (bottom-right
causality aligned to the sequence's own length).

Each case embeds seeded random inputs in a module whose @attn is in the
kernel form with a dynamic Nq (as fa-compile builds kernels, so the decode
and the general kernels are both compiled and one is chosen at run time),
lowered by fa-cpu-attention three ways: 16 lanes with key tiles of 8, 8
lanes with key tiles of 16 (tiles smaller than, equal to and larger than
the pages), and split-KV in 3 runs (kv-splits=3: partial results merged
by fa.merge), then run with mlir-runner. Block tables are shuffled, last pages
partly filled, entries past a sequence's pages point at other valid pages
(a kernel reading them would give other values), some sequences share
their first pages, one is empty.

Pass criteria: relative Frobenius error of O and LSE below 2e-5; empty
rows exactly O = 0 and LSE = -inf; no NaN.

Mutations (the comparison can fail), which must fail:
  page_past   the kernel reads each key's page from the block table one
              entry further on (block_table[b, k / S + 1]);
  split_short the split-KV runs are a third of the key tiles rounded up
              with 4 instead of 3 parts: the last keys of long sequences
              are in no run.
"""

import os
import re
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import compare_outputs, reference, seed_of  # noqa: E402
from mlir_exec import (PRINT_DECL, constant, execute, fa_opt,  # noqa: E402
                       finish)

FA_OPT = sys.argv[1]
WAYS = {
    "vector": "vector-width=16 block-q=16 block-kv=8",
    "vector8": "vector-width=8 block-q=8 block-kv=16 key-rows=3 pv-rows=4 "
               "pv-vectors=1",
    # Split-KV: each sequence's key tiles in 3 runs merged by fa.merge.
    "split3": "vector-width=16 block-q=16 block-kv=8 kv-splits=3",
}


def case(name, **kw):
    c = dict(name=name, B=3, Hq=4, Hkv=2, Nq=1, D=8, S=16, lens=[37, 16, 5],
             extra_pages=3, causal="bottom-right", share=0, window=None,
             softcap=None, alibi=False, mask=False, mag=1.0)
    c.update(kw)
    return c


CASES = [case(f"page{s}_decode", S=s, lens=[3 * s + s // 2 + 1, s, 1])
         for s in (1, 16, 32, 64, 128, 256)]
CASES += [
    # Several queries per sequence: bottom-right per sequence; Nq x G
    # beyond a decode tile takes the general kernel.
    case("nq5_gqa4_general", Hq=8, Hkv=2, Nq=5, lens=[40, 9, 64]),
    case("nq3_top_left", Nq=3, causal="top-left", lens=[20, 48, 3]),
    # Prefix sharing: all sequences start with the same two pages; one
    # sequence is empty.
    case("shared_prefix", B=4, share=2, lens=[50, 33, 0, 40]),
    # Modifiers on the logical positions.
    case("window_alibi_softcap", S=32, Nq=2, lens=[100, 70, 33],
         window=(24, 0), alibi=True, softcap=3.0, mag=3.0),
    # A boolean mask per head over Nk = M x S.
    case("bool_mask", Nq=2, mask=True, lens=[45, 31, 17]),
    # D a multiple of the vector width: the decode tile holds every kv
    # head's rows (each head its own running max, sum and accumulator) and
    # visits each key tile for all heads; one head's state mixed into
    # another's fails here.
    case("all_kv_heads", Hq=8, Hkv=4, D=32, lens=[70, 16, 0], mag=2.0),
    case("all_kv_heads_mods", Hq=12, Hkv=3, Nq=2, D=16, S=32,
         lens=[90, 1, 47], window=(30, 0), alibi=True, softcap=4.0,
         mag=3.0),
    case("all_kv_heads_mask", Hq=4, Hkv=4, D=16, mask=True,
         lens=[33, 64, 2]),
]


def build(c, rng):
    """The arrays (dict) of case c: Q, the paged caches, the block table,
    the lengths and optional mask / slopes."""
    B, Hq, Hkv, Nq, D, S = c["B"], c["Hq"], c["Hkv"], c["Nq"], c["D"], c["S"]
    lens = np.array(c["lens"], dtype=np.int32)
    need = [max(1, -(-int(n) // S)) for n in lens]
    M = max(need)
    shared = c["share"]
    P = shared + sum(n - shared if n > shared else 0 for n in need) + \
        c["extra_pages"]
    order = rng.permutation(P)  # physical page of each logical allocation
    table = np.zeros((B, M), dtype=np.int32)
    nxt = shared
    for b in range(B):
        for j in range(M):
            if j < shared:
                table[b, j] = order[j]
            elif j < need[b]:
                table[b, j] = order[nxt]
                nxt += 1
            else:
                # Past the sequence: another valid page, never to be read.
                table[b, j] = rng.integers(0, P)
    a = {"q": rng.standard_normal((B, Hq, Nq, D), dtype=np.float32) * c["mag"],
         "kc": rng.standard_normal((P, S, Hkv, D), dtype=np.float32),
         "vc": rng.standard_normal((P, S, Hkv, D), dtype=np.float32),
         "bt": table, "lens": lens}
    if c["mask"]:
        a["mask"] = rng.random((B, Hq, Nq, M * S)) < 0.7
    if c["alibi"]:
        a["alibi"] = (rng.random(Hq, dtype=np.float32) * 0.3).astype(np.float32)
    return a


def gather(cache, table, b, n):
    """The first n keys of sequence b, [Hkv, n, D], from its pages."""
    S = cache.shape[1]
    rows = [cache[table[b, k // S], k % S] for k in range(n)]
    if not rows:
        return np.zeros((cache.shape[2], 0, cache.shape[3]), cache.dtype)
    return np.stack(rows, axis=1)


def reference_paged(c, a, dt=np.float64):
    """The reference of case c on its arrays a, computed in floating type
    `dt` per sequence on its gathered keys: (O, LSE, empty)."""
    outs, lses, empties = [], [], []
    for b in range(c["B"]):
        n = int(a["lens"][b])
        kw = dict(window=c["window"], softcap=c["softcap"],
                  alibi=a.get("alibi"))
        mask = a["mask"][b:b + 1, :, :, :n] if "mask" in a else None
        o, lse, empty = reference(
            a["q"][b:b + 1], gather(a["kc"], a["bt"], b, n)[None],
            gather(a["vc"], a["bt"], b, n)[None], 1.0 / np.sqrt(c["D"]),
            c["causal"], None, mask, dt, **kw)
        outs.append(o)
        lses.append(lse)
        empties.append(empty)
    return (np.concatenate(outs), np.concatenate(lses),
            np.concatenate(empties))


def mtype(shape, elt, dyn=None):
    dims = "".join(("?" if i == dyn else str(d)) + "x"
                   for i, d in enumerate(shape))
    return f"memref<{dims}{elt}>"


def ttype(shape, elt, dyn=None):
    return "tensor<" + mtype(shape, elt, dyn)[len("memref<"):]


PAR4 = ", ".join(['"parallel"'] * 4)
ELT = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32",
       np.dtype(np.bool_): "i8"}


def kernel_module(c, a):
    """@attn in the kernel form (Nq dynamic in Q, O and LSE) and @main
    calling it on the constants and printing O and LSE."""
    B, Hq, Nq, D = c["B"], c["Hq"], c["Nq"], c["D"]
    dyn = {"q": 2, "o": 2, "l": 2}
    params, body, consts, call, ctypes = [], "", "", [], []
    for n, x in a.items():
        store = x.astype(np.int8) if x.dtype == np.bool_ else x
        elt = ELT[x.dtype]
        st, smt = ttype(x.shape, elt), mtype(x.shape, elt)
        kt = ttype(x.shape, elt, dyn.get(n))
        km = mtype(x.shape, elt, dyn.get(n))
        params.append(f"%{n}_m: {km}")
        consts += constant("c_" + n, store)
        consts += f"    %s_{n} = bufferization.to_buffer %c_{n} : {st} to {smt}\n"
        consts += f"    %a_{n} = memref.cast %s_{n} : {smt} to {km}\n"
        call.append(f"%a_{n}")
        ctypes.append(km)
        if x.dtype != np.bool_:
            body += (f"    %{n} = bufferization.to_tensor %{n}_m restrict : "
                     f"{km} to {kt}\n")
            continue
        bt = ttype(x.shape, "i1")
        ids = ", ".join(f"d{i}" for i in range(x.ndim))
        idm = f"affine_map<({ids}) -> ({ids})>"
        body += (f"    %{n}_b = bufferization.to_tensor %{n}_m restrict : "
                 f"{km} to {kt}\n    %{n}_e = tensor.empty() : {bt}\n"
                 f"    %{n} = linalg.generic {{indexing_maps = [{idm}, "
                 f"{idm}], iterator_types = [{PAR4}]}}"
                 f" ins(%{n}_b : {kt}) outs(%{n}_e : {bt}) {{\n"
                 "    ^bb0(%x: i8, %y: i1):\n      %z = arith.constant 0 : i8\n"
                 "      %t = arith.cmpi ne, %x, %z : i8\n"
                 "      linalg.yield %t : i1\n"
                 f"    }} -> {bt}\n")
    o_m, l_m = mtype((B, Hq, Nq, D), "f32", 2), mtype((B, Hq, Nq), "f32", 2)
    o_t, l_t = ttype((B, Hq, Nq, D), "f32", 2), ttype((B, Hq, Nq), "f32", 2)
    o_s, l_s = mtype((B, Hq, Nq, D), "f32"), mtype((B, Hq, Nq), "f32")
    params += [f"%o_m: {o_m}", f"%l_m: {l_m}"]
    clauses = (f" kv_lens(%lens : {ttype(a['lens'].shape, 'i32')})"
               f" block_table(%bt : {ttype(a['bt'].shape, 'i32')})")
    if "mask" in a:
        clauses += f" mask(%mask : {ttype(a['mask'].shape, 'i1')})"
    if "alibi" in a:
        clauses += f" alibi(%alibi : {ttype(a['alibi'].shape, 'f32')})"
    attrs = {"none": "", "top-left": " causal(top_left)",
             "bottom-right": " causal(bottom_right)"}[c["causal"]]
    if c["window"]:
        attrs += " window({}, {})".format(*c["window"])
    if c["softcap"]:
        attrs += f" softcap({c['softcap']!r})"
    qkv = (f"{ttype(a['q'].shape, 'f32', 2)}, {ttype(a['kc'].shape, 'f32')}, "
           f"{ttype(a['vc'].shape, 'f32')}")
    nq = "    %c2 = arith.constant 2 : index\n" \
         "    %nq = memref.dim %q_m, %c2 : " + mtype(a["q"].shape, "f32", 2) + "\n"
    kernel = (
        f"  func.func @attn({', '.join(params)}) {{\n" + body + nq +
        f"    %o0 = tensor.empty(%nq) : {o_t}\n"
        f"    %l0 = tensor.empty(%nq) : {l_t}\n"
        f"    %o, %l = fa.attention ins(%q, %kc, %vc : {qkv}){clauses}\n"
        f"        outs(%o0 : {o_t}, %l0 : {l_t}){attrs} -> {o_t}, {l_t}\n"
        f"    bufferization.materialize_in_destination %o in restrict "
        f"writable %o_m : ({o_t}, {o_m}) -> ()\n"
        f"    bufferization.materialize_in_destination %l in restrict "
        f"writable %l_m : ({l_t}, {l_m}) -> ()\n    return\n  }}\n")
    main = ("  func.func @main() {\n" + consts +
            f"    %out_o = memref.alloc() : {o_s}\n"
            f"    %out_l = memref.alloc() : {l_s}\n"
            f"    %co = memref.cast %out_o : {o_s} to {o_m}\n"
            f"    %cl = memref.cast %out_l : {l_s} to {l_m}\n"
            f"    func.call @attn({', '.join(call + ['%co', '%cl'])}) : "
            f"({', '.join(ctypes + [o_m, l_m])}) -> ()\n")
    for n, m in (("out_o", o_s), ("out_l", l_s)):
        main += (f"    %{n}_u = memref.cast %{n} : {m} to memref<*xf32>\n"
                 f"    func.call @printMemrefF32(%{n}_u) : "
                 "(memref<*xf32>) -> ()\n")
    return "module {\n" + PRINT_DECL + kernel + main + "    return\n  }\n}\n"


def lower(text, way, workdir, name):
    kernel = fa_opt(FA_OPT, text,
                    ["--fa-cpu-attention=require-kernel-form=true " +
                     WAYS[way]], workdir, name)
    if "fa.attention" in kernel:
        raise RuntimeError(f"{name}: fa-cpu-attention left the op")
    return kernel


def mutate_page_past(kernel):
    """block_table[b, k / S] -> block_table[b, k / S + 1] in the kernel's
    page reads (every `memref.load` of the table right after its index)."""
    pat = re.compile(r"(?P<q>%[\w]+) = arith\.divui (?P<k>%[\w]+), "
                     r"(?P<s>%[\w]+) : index\n(?P<ind>\s*)(?P<e>%[\w]+) = "
                     r"memref\.load (?P<t>%[\w]+)\[(?P<b>%[\w]+), (?P=q)\]")
    count = 0

    def sub(m):
        nonlocal count
        count += 1
        nxt = f"%mutant_next{count}"
        one = f"%mutant_one{count}"
        return (f"{m['q']} = arith.divui {m['k']}, {m['s']} : index\n"
                f"{m['ind']}{one} = arith.constant 1 : index\n"
                f"{m['ind']}{nxt} = arith.addi {m['q']}, {one} : index\n"
                f"{m['ind']}{m['e']} = memref.load {m['t']}[{m['b']}, {nxt}]")
    out = pat.sub(sub, kernel)
    return out if count else None


def mutate_split_short(kernel):
    """The split-KV run length ceil(tiles / N) -> ceil(tiles / 4), N the
    split count min(3, key tiles of Nk)."""
    count = re.search(r"(?P<n>%[\w]+) = arith\.minui %c3(?:_\d+)?, "
                      r"%[\w]+ : index", kernel)
    if not count:
        return None
    m = re.search(r"(?P<r>%[\w]+) = arith\.ceildivui (?P<t>%[\w]+), " +
                  re.escape(count["n"]) + r" : index", kernel)
    if not m:
        return None
    return (kernel[:m.start()] + "%mutant_four = arith.constant 4 : index\n"
            f"    {m['r']} = arith.ceildivui {m['t']}, %mutant_four : index" +
            kernel[m.end():])


def main():
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        for c in CASES:
            rng = np.random.default_rng(seed_of("paged." + c["name"]))
            a = build(c, rng)
            ref_o, ref_l, empty = reference_paged(c, a)
            text = kernel_module(c, a)
            for way in WAYS:
                name = f"{c['name']}.{way}"
                o, lse = execute(FA_OPT, lower(text, way, workdir, name),
                                 workdir, name + ".run", ["--fa-lower-to-cpu"])
                failures += compare_outputs(
                    f"{c['name']} [{way}] S={c['S']} Nq={c['Nq']} "
                    f"lens={c['lens']}", o, lse, ref_o, ref_l, empty)
        # The mutation: reading the next entry's page must fail.
        c = next(x for x in CASES if x["name"] == "shared_prefix")
        rng = np.random.default_rng(seed_of("paged." + c["name"]))
        a = build(c, rng)
        ref_o, ref_l, empty = reference_paged(c, a)
        kernel = lower(kernel_module(c, a), "vector", workdir, "mutant")
        mutant = mutate_page_past(kernel)
        if mutant is None:
            failures.append("mutation page_past: the pattern to edit is gone")
        else:
            o, lse = execute(FA_OPT, mutant, workdir, "mutant.run",
                             ["--fa-lower-to-cpu"])
            if not compare_outputs("mutation page_past (must fail)", o, lse,
                                   ref_o, ref_l, empty):
                failures.append("mutation page_past was not caught")
        mutant = mutate_split_short(lower(kernel_module(c, a), "split3",
                                          workdir, "mutant.split"))
        if mutant is None:
            failures.append("mutation split_short: the pattern to edit is "
                            "gone")
        else:
            o, lse = execute(FA_OPT, mutant, workdir, "mutant.split.run",
                             ["--fa-lower-to-cpu"])
            if not compare_outputs("mutation split_short (must fail)", o,
                                   lse, ref_o, ref_l, empty):
                failures.append("mutation split_short was not caught")
    finish(failures)


if __name__ == "__main__":
    main()
