# REQUIRES: ptxas
# RUN: %python %s %fa_opt %ptxas
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The backward kernels (dQ, and dK/dV as `<function>_dkdv`) assemble with
ptxas with no spills and no stack frame: the mma.sync kernels
(fa-map-to-tensor-cores-backward, what kernel=auto picks for f16 and bf16)
and the SIMT ones (fa-promote-shared-backward: f32, and f16 with
kernel=simt).

The matrix: sm_80 and sm_90, f16 / bf16 / f32, head dims 64 and 128,
causal none and bottom-right, GQA 8/2 (24 kernels); the SIMT kernels in
f16 at both head dims; Dv != D; and the modifiers together (key lengths,
an additive mask, ALiBi, window, softcap) in f16 and bf16 at D = 128. Each
function is lowered with `fa-lower-to-nvvm`, the PTX is taken out of the
gpu.binary, must hold both entries, shared buffers, bar.sync, the warp
shuffles and ex2.approx (mma.sync, ldmatrix and cp.async for the tensor-core
kernels), and `ptxas -arch=<chip> -v` must succeed and report 0 bytes of
stack frame, spill stores and spill loads for both entries.

Usage: backward_ptxas.py FA_OPT PTXAS
"""

import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "PTX"))
from ptxas_matrix import extract_ptxs  # noqa: E402


def kernel_text(d, dv, t, causal, mods):
    """A kernel-form function @fa_kernel holding one fa.attention_backward
    (Hq = 8, Hkv = 2), with the modifiers when `mods`."""
    q, kv, vv = f"?x8x?x{d}x{t}", f"?x2x?x{d}x{t}", f"?x2x?x{dv}x{t}"
    o = f"?x8x?x{dv}x{t}"
    args = [("q", q), ("k", kv), ("v", vv)]
    if mods:
        args += [("lens", "?xi32"), ("mask", f"?x8x?x?x{t}"),
                 ("alibi", "8xf32")]
    args += [("o", o), ("lse", "?x8x?xf32"), ("do", o)]
    outs = [("dq", q), ("dk", kv), ("dv", vv)]
    params = ", ".join(f"%{n}: memref<{s}>" for n, s in args + outs)
    body = ""
    for n, s in args:
        body += (f"  %t_{n} = bufferization.to_tensor %{n} restrict : "
                 f"memref<{s}> to tensor<{s}>\n")
    for n, s in outs:
        body += (f"  %t_{n} = bufferization.to_tensor %{n} restrict writable "
                 f": memref<{s}> to tensor<{s}>\n")
    clauses = f"causal({causal})"
    extra = ""
    if mods:
        extra = (f" kv_lens(%t_lens : tensor<?xi32>) mask(%t_mask : "
                 f"tensor<?x8x?x?x{t}>) alibi(%t_alibi : tensor<8xf32>)")
        clauses += " window(64, 0) softcap(20.0)"
    tys = f"tensor<{q}>, tensor<{kv}>, tensor<{vv}>"
    body += (f"  %r:3 = fa.attention_backward ins(%t_q, %t_k, %t_v : {tys}) "
             f"forward(%t_o, %t_lse : tensor<{o}>, tensor<?x8x?xf32>) "
             f"grad_output(%t_do : tensor<{o}>){extra} outs(%t_dq, %t_dk, "
             f"%t_dv : {tys}) {clauses} -> {tys}\n")
    for i, (n, s) in enumerate(outs):
        body += (f"  bufferization.materialize_in_destination %r#{i} in "
                 f"restrict writable %{n} : (tensor<{s}>, memref<{s}>) -> ()\n")
    return f"func.func @fa_kernel({params}) {{\n{body}  return\n}}\n"


def main(argv):
    fa_opt, ptxas = argv[1], argv[2]
    configs = [(chip, d, d, t, causal, False, "auto")
               for chip in ("sm_80", "sm_90") for t in ("f16", "bf16", "f32")
               for d in (64, 128) for causal in ("none", "bottom_right")]
    configs += [("sm_80", d, d, "f16", "bottom_right", False, "simt")
                for d in (64, 128)]
    configs += [("sm_80", 128, 64, "f16", "none", False, "auto"),
                ("sm_80", 64, 128, "bf16", "top_left", False, "auto"),
                ("sm_80", 128, 128, "f16", "bottom_right", True, "auto"),
                ("sm_90", 128, 128, "bf16", "bottom_right", True, "auto"),
                ("sm_80", 128, 128, "f16", "bottom_right", True, "simt")]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa-bwd-ptxas-") as tmp:
        for chip, d, dv, t, causal, mods, kernel in configs:
            name = (f"{chip}_d{d}_dv{dv}_{t}_{causal}"
                    + ("_mods" if mods else "") + f"_{kernel}")
            mma = t != "f32" and kernel == "auto"
            src = os.path.join(tmp, name + ".mlir")
            with open(src, "w") as f:
                f.write(kernel_text(d, dv, t, causal, mods))
            lowered = subprocess.run(
                [fa_opt, src,
                 f"-fa-lower-to-nvvm=chip={chip} kernel={kernel}"],
                capture_output=True, text=True)
            if lowered.returncode != 0:
                print(f"FAIL {name}: fa-opt: {lowered.stderr.strip()[:400]}")
                failures += 1
                continue
            ptxs = extract_ptxs(lowered.stdout)
            problems = []
            if len(ptxs) != 1:
                problems.append(f"{len(ptxs)} PTX modules (expected 1)")
            else:
                ptx = ptxs[0]
                needles = [f".target {chip}", ".entry fa_kernel(",
                           ".entry fa_kernel_dkdv(", ".shared .align 16",
                           "bar.sync", "shfl.sync.bfly", "ex2.approx.f32"]
                needles += (["mma.sync.aligned.m16n8k16", "ldmatrix.sync",
                             "cp.async.cg.shared.global"] if mma
                            else ["shfl.sync.idx"])
                if mma and not re.search(
                        rf"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\."
                        rf"{t}\.{t}\.f32", ptx):
                    problems.append(f"no {t} mma.sync with f32 accumulators")
                for needle in needles:
                    if needle not in ptx:
                        problems.append(f"no '{needle}' in the PTX")
                path = os.path.join(tmp, name + ".ptx")
                with open(path, "w") as f:
                    f.write(ptx)
                asm = subprocess.run(
                    [ptxas, f"-arch={chip}", "-v", path, "-o",
                     os.path.join(tmp, name + ".cubin")],
                    capture_output=True, text=True)
                info = asm.stdout + asm.stderr
                frames = re.findall(r"Function properties for (\w+)\n\s*(\d+) "
                                    r"bytes stack frame, (\d+) bytes spill "
                                    r"stores, (\d+) bytes spill loads", info)
                regs = re.findall(r"Used (\d+) registers.*?(\d+) bytes smem",
                                  info)
                if asm.returncode != 0:
                    problems.append("ptxas failed: " + info.strip()[-400:])
                elif sorted(f[0] for f in frames) != ["fa_kernel",
                                                      "fa_kernel_dkdv"]:
                    problems.append("ptxas did not report both entries: "
                                    + info.strip()[-400:])
                else:
                    for fn, *sizes in frames:
                        if sizes != ["0", "0", "0"]:
                            problems.append(f"{fn}: {sizes[0]} bytes stack "
                                            f"frame, {sizes[1]} spill stores, "
                                            f"{sizes[2]} spill loads")
            if problems:
                failures += 1
                print(f"FAIL {name}: " + "; ".join(problems))
            else:
                print(f"ok {name}: " + ", ".join(
                    f"{r} registers / {s} B smem" for r, s in regs))
    if failures:
        print(f"FAILED: {failures} of {len(configs)} kernels")
        sys.exit(1)
    print(f"PASS: {len(configs)} backward kernels, 0 spills")


if __name__ == "__main__":
    main(sys.argv)
