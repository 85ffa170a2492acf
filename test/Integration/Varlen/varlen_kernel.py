# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The CPU vector kernel of fa.attention's token-major variable-length
form (cu_seqlens), lowered by fa-cpu-attention straight from the kernel
form (no fa-run), in the ways fa-run does not exercise: 8-lane vectors with
key tiles larger than the query tiles and a parallel (OpenMP) forall, each
against a float64 reference that cuts every sequence out of the packed
tensors and applies test/lib/fa_reference.py's contract to it alone.
The module embeds seeded random inputs; @main runs @attn and prints O and
LSE (poisoned with NaN first, so rows the kernel must not write are seen).

Pass criteria: relative Frobenius error of O and LSE below 2e-5; empty
rows exactly O = 0 and LSE = -inf; rows in no sequence still NaN.

Mutation (the comparison can fail), which must fail:
  key_offsets  the kernel reads each sequence's key offsets from the query
               offsets (every load of cu_seqlens_k reads cu_seqlens_q):
               keys of the wrong rows, and wrong key lengths.
"""

import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import compare_outputs, reference, seed_of  # noqa: E402
from mlir_exec import PRINT_DECL, constant, execute, fa_opt, finish  # noqa: E402

FA_OPT = sys.argv[1]
WAYS = {
    "vector8": "vector-width=8 block-q=8 block-kv=16 key-rows=3 pv-rows=4 "
               "pv-vectors=1",
    "parallel16": "vector-width=16 block-q=16 block-kv=8 parallel=true",
}
HQ, HKV, D, DV = 4, 2, 16, 8
LQ, LK = [9, 0, 1, 20, 17], [9, 4, 30, 5, 0]
LEAD, TAIL = 2, 3


def arrays(rng):
    cu_q = (np.concatenate([[0], np.cumsum(LQ)]) + LEAD).astype(np.int32)
    cu_k = (np.concatenate([[0], np.cumsum(LK)]) + LEAD).astype(np.int32)
    tq, tk = int(cu_q[-1]) + TAIL, int(cu_k[-1]) + TAIL
    return {"q": rng.standard_normal((tq, HQ, D), dtype=np.float32),
            "k": rng.standard_normal((tk, HKV, D), dtype=np.float32),
            "v": rng.standard_normal((tk, HKV, DV), dtype=np.float32),
            "cq": cu_q, "ck": cu_k}


def reference_varlen(a):
    tq = a["q"].shape[0]
    ref_o, ref_l = np.zeros((tq, HQ, DV)), np.zeros((tq, HQ))
    empty, inside = np.zeros((tq, HQ), bool), np.zeros(tq, bool)
    for b in range(len(LQ)):
        qs = slice(a["cq"][b], a["cq"][b + 1])
        ks = slice(a["ck"][b], a["ck"][b + 1])
        o, lse, e = reference(a["q"][qs].transpose(1, 0, 2)[None],
                              a["k"][ks].transpose(1, 0, 2)[None],
                              a["v"][ks].transpose(1, 0, 2)[None],
                              1.0 / np.sqrt(D), "bottom-right", None, None,
                              np.float64)
        ref_o[qs], ref_l[qs] = o[0].transpose(1, 0, 2), lse[0].T
        empty[qs], inside[qs] = e[0].T, True
    return ref_o, ref_l, empty, inside


def module(a):
    tq = a["q"].shape[0]
    mt = {"q": f"memref<?x{HQ}x{D}xf32>", "k": f"memref<?x{HKV}x{D}xf32>",
          "v": f"memref<?x{HKV}x{DV}xf32>", "cq": "memref<?xi32>",
          "ck": "memref<?xi32>"}
    tt = {n: "tensor<" + m[len("memref<"):] for n, m in mt.items()}
    om, lm = f"memref<?x{HQ}x{DV}xf32>", f"memref<{HQ}x?xf32>"
    ot, lt = "tensor<" + om[7:], "tensor<" + lm[7:]
    params = [f"%{n}_m: {m}" for n, m in mt.items()] + [f"%o_m: {om}",
                                                        f"%l_m: {lm}"]
    body = "".join(f"    %{n} = bufferization.to_tensor %{n}_m restrict : "
                   f"{mt[n]} to {tt[n]}\n" for n in mt)
    body += (f"    %o0 = bufferization.to_tensor %o_m restrict writable : "
             f"{om} to {ot}\n"
             f"    %l0 = bufferization.to_tensor %l_m restrict writable : "
             f"{lm} to {lt}\n"
             f"    %o, %l = fa.attention ins(%q, %k, %v : {tt['q']}, "
             f"{tt['k']}, {tt['v']}) cu_seqlens(%cq, %ck : {tt['cq']}, "
             f"{tt['ck']}) outs(%o0 : {ot}, %l0 : {lt}) causal(bottom_right)"
             f" -> {ot}, {lt}\n"
             f"    bufferization.materialize_in_destination %o in restrict "
             f"writable %o_m : ({ot}, {om}) -> ()\n"
             f"    bufferization.materialize_in_destination %l in restrict "
             f"writable %l_m : ({lt}, {lm}) -> ()\n    return\n")
    kernel = f"  func.func @attn({', '.join(params)}) {{\n" + body + "  }\n"
    main = "  func.func @main() {\n"
    call, types = [], []
    for n, x in a.items():
        st = "memref<" + "".join(f"{d}x" for d in x.shape) + \
            ("i32" if x.dtype == np.int32 else "f32") + ">"
        sh = "tensor<" + st[7:]
        main += constant("c_" + n, x)
        main += f"    %s_{n} = bufferization.to_buffer %c_{n} : {sh} to {st}\n"
        main += f"    %a_{n} = memref.cast %s_{n} : {st} to {mt[n]}\n"
        call.append(f"%a_{n}")
        types.append(mt[n])
    os_, ls_ = f"memref<{tq}x{HQ}x{DV}xf32>", f"memref<{HQ}x{tq}xf32>"
    main += (f"    %nan = arith.constant 0x7FC00000 : f32\n"
             f"    %out_o = memref.alloc() : {os_}\n"
             f"    %out_l = memref.alloc() : {ls_}\n"
             f"    linalg.fill ins(%nan : f32) outs(%out_o : {os_})\n"
             f"    linalg.fill ins(%nan : f32) outs(%out_l : {ls_})\n"
             f"    %co = memref.cast %out_o : {os_} to {om}\n"
             f"    %cl = memref.cast %out_l : {ls_} to {lm}\n"
             f"    func.call @attn({', '.join(call + ['%co', '%cl'])}) : "
             f"({', '.join(types + [om, lm])}) -> ()\n")
    for n, m in (("out_o", os_), ("out_l", ls_)):
        main += (f"    %{n}_u = memref.cast %{n} : {m} to memref<*xf32>\n"
                 f"    func.call @printMemrefF32(%{n}_u) : "
                 "(memref<*xf32>) -> ()\n")
    return "module {\n" + PRINT_DECL + kernel + main + "    return\n  }\n}\n"


def judge(tag, o, lse, ref):
    ref_o, ref_l, empty, inside = ref
    lse_t = np.asarray(lse).T
    o = np.asarray(o)
    failures = compare_outputs(tag, o[inside], lse_t[inside], ref_o[inside],
                               ref_l[inside], empty[inside])
    if not (np.isnan(o[~inside]).all() and np.isnan(lse_t[~inside]).all()):
        failures.append(f"{tag}: rows outside every sequence were written")
    return failures


def main():
    failures = []
    rng = np.random.default_rng(seed_of("varlen.kernel"))
    a = arrays(rng)
    ref = reference_varlen(a)
    text = module(a)
    with tempfile.TemporaryDirectory() as workdir:
        for way, opts in WAYS.items():
            kernel = fa_opt(FA_OPT, text, ["--fa-cpu-attention="
                                           "require-kernel-form=true " + opts],
                            workdir, way)
            if "fa.attention" in kernel:
                failures.append(f"{way}: fa-cpu-attention left the op")
                continue
            o, lse = execute(FA_OPT, kernel, workdir, way + ".run",
                             ["--fa-lower-to-cpu"])
            failures += judge(f"varlen [{way}] lq={LQ} lk={LK}", o, lse, ref)
            if way != "vector8":
                continue
            # @attn's arguments print as %arg0.. in order: q, k, v, cq, ck.
            loads = kernel.count("memref.load %arg4[")
            mutant = kernel.replace("memref.load %arg4[", "memref.load %arg3[")
            if loads == 0:
                failures.append("mutation key_offsets: no load of the key "
                                "offsets to edit")
                continue
            o, lse = execute(FA_OPT, mutant, workdir, "mutant.run",
                             ["--fa-lower-to-cpu"])
            if not judge("mutation key_offsets (must fail)", o, lse, ref):
                failures.append("mutation key_offsets was not caught")
    finish(failures)


main()
