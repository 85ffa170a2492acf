# REQUIRES: ptxas
# RUN: %python %s %fa_opt %ptxas
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Every attention kernel of the GPU matrix assembles with ptxas with no
spills and no stack frame.

For head dims 64, 96 and 128, f16/bf16/f32, causal none and bottom-right,
sm_80 and sm_90 (36 kernels), and for every head dim 8, 16, ..., 256 with a
different value head dim, f16 and f32, on sm_80 (64 kernels), and double-buffered K/V for D 64 and 128 (4 kernels):
lower a kernel function with `fa-lower-to-nvvm`, take the
PTX out of the gpu.binary, check it has the expected instructions (shared
buffers, bar.sync, warp shuffles, the kernel entry) and run
`ptxas -arch=<chip> -v`, which must succeed and report 0 bytes of stack
frame, spill stores and spill loads.

Usage: ptxas_matrix.py FA_OPT PTXAS
"""

import os
import re
import subprocess
import sys
import tempfile

KERNEL = """
func.func @fa_attention(%q: memref<?x8x?x{d}x{t}>, %k: memref<?x2x?x{d}x{t}>, %v: memref<?x2x?x{dv}x{t}>,
                        %lens: memref<?xi32>, %o: memref<?x8x?x{dv}x{t}>, %lse: memref<?x8x?xf32>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x{d}x{t}> to tensor<?x2x?x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x{dv}x{t}> to tensor<?x2x?x{dv}x{t}>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x{d}x{t}>, tensor<?x2x?x{d}x{t}>, tensor<?x2x?x{dv}x{t}>)
           kv_lens(%lt : tensor<?xi32>) outs(%ot : tensor<?x8x?x{dv}x{t}>, %st : tensor<?x8x?xf32>)
           causal({causal}) -> tensor<?x8x?x{dv}x{t}>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}}
"""


def extract_ptx(mlir_text):
    m = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', mlir_text)
    if not m:
        return None
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda x: chr(int(x.group(1), 16)),
                  m.group(1)).replace("\\\\", "\\")


def main(argv):
    fa_opt, ptxas = argv[1], argv[2]
    failures = 0
    configs = []
    with tempfile.TemporaryDirectory(prefix="fa-ptxas-") as tmp:
        configs = [(chip, d, d, t, causal, "")
                   for chip in ("sm_80", "sm_90") for d in (64, 96, 128)
                   for t in ("f16", "bf16", "f32")
                   for causal in ("none", "bottom_right")]
        # Every head dim the GPU path accepts, V's differing from Q/K's.
        configs += [("sm_80", d, 264 - d if d != 128 else 128, t, "none", "")
                    for d in range(8, 257, 8) for t in ("f16", "f32")]
        # Double-buffered K/V.
        configs += [(chip, d, d, "bf16", "bottom_right", " double-buffer=true")
                    for chip in ("sm_80", "sm_90") for d in (64, 128)]
        for chip, d, dv, t, causal, extra in configs:
            if True:
                if True:
                    if True:
                        name = f"{chip}_d{d}_dv{dv}_{t}_{causal}" + ("_db" if extra else "")
                        src = os.path.join(tmp, name + ".mlir")
                        with open(src, "w") as f:
                            f.write(KERNEL.format(d=d, dv=dv, t=t, causal=causal))
                        lowered = subprocess.run(
                            [fa_opt, src, f"-fa-lower-to-nvvm=chip={chip}{extra}"],
                            capture_output=True, text=True)
                        if lowered.returncode != 0:
                            print(f"FAIL {name}: fa-opt: {lowered.stderr.strip()[:400]}")
                            failures += 1
                            continue
                        ptx = extract_ptx(lowered.stdout)
                        problems = []
                        if ptx is None:
                            problems.append("no PTX in the gpu.binary")
                        else:
                            for needle in (f".target {chip}", ".entry fa_attention",
                                           ".shared .align 16", "bar.sync",
                                           "shfl.sync.bfly", "shfl.sync.idx"):
                                if needle not in ptx:
                                    problems.append(f"PTX lacks '{needle}'")
                        if problems:
                            print(f"FAIL {name}: " + "; ".join(problems))
                            failures += 1
                            continue
                        ptx_path = os.path.join(tmp, name + ".ptx")
                        with open(ptx_path, "w") as f:
                            f.write(ptx)
                        asm = subprocess.run(
                            [ptxas, f"-arch={chip}", "-v", ptx_path, "-o",
                             os.path.join(tmp, name + ".cubin")],
                            capture_output=True, text=True)
                        info = asm.stdout + asm.stderr
                        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", info)
                        regs = re.search(r"Used (\d+) registers", info)
                        smem = re.search(r"(\d+) bytes smem", info)
                        ok = (asm.returncode == 0 and frame is not None
                              and frame.groups() == ("0", "0", "0"))
                        print(f"{'PASS' if ok else 'FAIL'} {name}: "
                              f"{regs.group(1) if regs else '?'} registers, "
                              f"{smem.group(1) if smem else '?'} bytes smem, "
                              f"{frame.group(0) if frame else info.strip()[:300]}")
                        failures += not ok
    print(f"{len(configs) - failures}/{len(configs)} configurations assemble with no spills")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
