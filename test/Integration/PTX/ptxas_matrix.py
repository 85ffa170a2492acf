# REQUIRES: ptxas
# RUN: %python %s %fa_opt %ptxas
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Every attention kernel of the GPU matrix assembles with ptxas with no
spills and no stack frame.

For head dims 64, 96 and 128, f16/bf16/f32, causal none and bottom-right,
sm_80 and sm_90 (36 kernels), and for every head dim 8, 16, ..., 256 with a
different value head dim, f16 and f32, on sm_80 (64 kernels), and double-buffered K/V for D 64 and 128 (4 kernels);
the decode kernel with packed query heads (pack-gqa=always) on sm_80 and
sm_90a, with the modifiers and regions (5 kernels); the SIMT kernel on a
paged K/V cache, plain and packed, and on the token-major varlen form
(4 kernels); fa.merge's kernel
(fa-gpu-merge) on sm_80 and sm_90a at Dv 40, 128 and 256 (4 kernels);
and the tensor-core kernels (kernel=mma): D 64/96/128 x f16/bf16 x
causal none/bottom-right x sm_80/sm_90 with GQA, key lengths and LSE (24),
boolean and additive masks (4), 3 stages (2), other head dims (6), a
paged cache and the varlen form (2), whose
PTX must also hold mma.sync m16n8k16, ldmatrix (plain and .trans) and
cp.async with its commit/wait; and the Hopper wgmma kernels (kernel=wgmma,
sm_90a only): D 64/128 x f16/bf16 x causal none/bottom-right (8), masks (2),
two warpgroups, 128-key tiles, 3 stages (4), wide head dims (5), a paged
cache and the varlen form (2), whose PTX
must hold wgmma.mma_async m64nNk16 for S (N = block_kv) and P V (N = Dv, V
MN-major), the wgmma fence/commit/wait, fence.proxy.async and cp.async;
every family also with the score/mask modifiers (window + softcap, and
with ALiBi and segment ids: 2 SIMT, 2 mma.sync, 2 wgmma) and with general
score_mod / mask_mod regions reading a bias table (one per family), and
with a mask_mod and its block mask (one per family):
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


# A kernel with a mask (bool: i8 in memory, converted to i1; additive: the
# element type) and no key lengths / LSE, for the tensor-core matrix.
KERNEL_MASK = """
func.func @fa_attention(%q: memref<?x8x?x{d}x{t}>, %k: memref<?x8x?x{d}x{t}>, %v: memref<?x8x?x{dv}x{t}>,
                        %mask: memref<?x1x?x?x{mt}>, %o: memref<?x8x?x{dv}x{t}>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %mb = bufferization.to_tensor %mask restrict : memref<?x1x?x?x{mt}> to tensor<?x1x?x?x{mt}>
{convert}  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x{d}x{t}>, tensor<?x8x?x{d}x{t}>, tensor<?x8x?x{dv}x{t}>)
         mask({mname} : tensor<?x1x?x?x{mtt}>) outs(%ot : tensor<?x8x?x{dv}x{t}>) causal({causal}) -> tensor<?x8x?x{dv}x{t}>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  return
}}
"""

# The score/mask modifiers (issue 15): a sliding window with a softcap,
# ALiBi slopes [Hq] and segment ids, causal, with key lengths and LSE.
KERNEL_MODS = """
func.func @fa_attention(%q: memref<?x8x?x{d}x{t}>, %k: memref<?x2x?x{d}x{t}>, %v: memref<?x2x?x{dv}x{t}>,
                        %lens: memref<?xi32>, %al: memref<8xf32>, %qs: memref<?x?xi32>, %ks: memref<?x?xi32>,
                        %o: memref<?x8x?x{dv}x{t}>, %lse: memref<?x8x?xf32>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x{d}x{t}> to tensor<?x2x?x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x{dv}x{t}> to tensor<?x2x?x{dv}x{t}>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %alt = bufferization.to_tensor %al restrict : memref<8xf32> to tensor<8xf32>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x{d}x{t}>, tensor<?x2x?x{d}x{t}>, tensor<?x2x?x{dv}x{t}>)
           kv_lens(%lt : tensor<?xi32>) {alibi}{segments}
           outs(%ot : tensor<?x8x?x{dv}x{t}>, %st : tensor<?x8x?xf32>)
           causal({causal}) window(256, 0) softcap(3.0e+01) -> tensor<?x8x?x{dv}x{t}>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}}
"""

# General score_mod / mask_mod regions: a relative-bias table [8, 4095]
# read at (h, k - q + 2047) with key lengths and LSE.
KERNEL_REGIONS = """
func.func @fa_attention(%q: memref<?x8x?x{d}x{t}>, %k: memref<?x2x?x{d}x{t}>, %v: memref<?x2x?x{dv}x{t}>,
                        %lens: memref<?xi32>, %tab: memref<8x4095xf32>,
                        %o: memref<?x8x?x{dv}x{t}>, %lse: memref<?x8x?xf32>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x{d}x{t}> to tensor<?x2x?x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x{dv}x{t}> to tensor<?x2x?x{dv}x{t}>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %tt = bufferization.to_tensor %tab restrict : memref<8x4095xf32> to tensor<8x4095xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x{d}x{t}>, tensor<?x2x?x{d}x{t}>, tensor<?x2x?x{dv}x{t}>)
           kv_lens(%lt : tensor<?xi32>) mod_operands(%tt : tensor<8x4095xf32>)
           outs(%ot : tensor<?x8x?x{dv}x{t}>, %st : tensor<?x8x?xf32>)
           causal({causal}) score_mod {{
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %tb: tensor<8x4095xf32>):
    %c = arith.constant 2047 : index
    %d = arith.subi %ki, %qi : index
    %i = arith.addi %d, %c : index
    %x = tensor.extract %tb[%h, %i] : tensor<8x4095xf32>
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  }} mask_mod {{
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %tb: tensor<8x4095xf32>):
    %c3 = arith.constant 3 : index
    %z = arith.constant 0 : index
    %m = arith.remui %ki, %c3 : index
    %keep = arith.cmpi ne, %m, %z : index
    fa.yield %keep : i1
  }} -> tensor<?x8x?x{dv}x{t}>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}}
"""

# A mask_mod (every third key removed) with its block mask [B, 1, Nq/128,
# Nk/64] (tiles that are whole multiples of every kernel's).
KERNEL_BLOCK_MASK = """
func.func @fa_attention(%q: memref<?x8x?x{d}x{t}>, %k: memref<?x2x?x{d}x{t}>, %v: memref<?x2x?x{dv}x{t}>,
                        %lens: memref<?xi32>, %bm: memref<?x1x?x?xi8>,
                        %o: memref<?x8x?x{dv}x{t}>, %lse: memref<?x8x?xf32>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x{d}x{t}> to tensor<?x2x?x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x{dv}x{t}> to tensor<?x2x?x{dv}x{t}>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %bt = bufferization.to_tensor %bm restrict : memref<?x1x?x?xi8> to tensor<?x1x?x?xi8>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x{d}x{t}>, tensor<?x2x?x{d}x{t}>, tensor<?x2x?x{dv}x{t}>)
           kv_lens(%lt : tensor<?xi32>) block_mask(%bt : tensor<?x1x?x?xi8>)
           outs(%ot : tensor<?x8x?x{dv}x{t}>, %st : tensor<?x8x?xf32>)
           causal({causal}) block_tiles(128, 64) mask_mod {{
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %c3 = arith.constant 3 : index
    %z = arith.constant 0 : index
    %m = arith.remui %ki, %c3 : index
    %keep = arith.cmpi ne, %m, %z : index
    fa.yield %keep : i1
  }} -> tensor<?x8x?x{dv}x{t}>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}}
"""

BOOL_CONVERT = """  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %d0 = tensor.dim %mb, %c0 : tensor<?x1x?x?xi8>
  %d2 = tensor.dim %mb, %c2 : tensor<?x1x?x?xi8>
  %d3 = tensor.dim %mb, %c3 : tensor<?x1x?x?xi8>
  %e = tensor.empty(%d0, %d2, %d3) : tensor<?x1x?x?xi1>
  %mt = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%mb : tensor<?x1x?x?xi8>) outs(%e : tensor<?x1x?x?xi1>) {
  ^bb0(%x: i8, %y: i1):
    %z = arith.constant 0 : i8
    %ne = arith.cmpi ne, %x, %z : i8
    linalg.yield %ne : i1
  } -> tensor<?x1x?x?xi1>
"""


MERGE_KERNEL = """
func.func @merge(%po: memref<?x?x8x?x{dv}xf32>, %pl: memref<?x?x8x?xf32>,
                 %o: memref<?x8x?x{dv}x{t}>, %l: memref<?x8x?xf32>) {{
  %pot = bufferization.to_tensor %po restrict : memref<?x?x8x?x{dv}xf32> to tensor<?x?x8x?x{dv}xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<?x?x8x?xf32> to tensor<?x?x8x?xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %lt = bufferization.to_tensor %l restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.merge ins(%pot, %plt : tensor<?x?x8x?x{dv}xf32>, tensor<?x?x8x?xf32>)
           outs(%ot : tensor<?x8x?x{dv}x{t}>, %lt : tensor<?x8x?xf32>) -> tensor<?x8x?x{dv}x{t}>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %l : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}}
"""


# A paged K/V cache: [P, 16, 2, D] pages read through a block table.
KERNEL_PAGED = """
func.func @fa_attention(%q: memref<?x8x?x{d}x{t}>, %k: memref<?x16x2x{d}x{t}>, %v: memref<?x16x2x{dv}x{t}>,
                        %lens: memref<?xi32>, %bt: memref<?x?xi32>, %o: memref<?x8x?x{dv}x{t}>, %lse: memref<?x8x?xf32>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x{d}x{t}> to tensor<?x8x?x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x16x2x{d}x{t}> to tensor<?x16x2x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x16x2x{dv}x{t}> to tensor<?x16x2x{dv}x{t}>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %btt = bufferization.to_tensor %bt restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x{dv}x{t}> to tensor<?x8x?x{dv}x{t}>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x{d}x{t}>, tensor<?x16x2x{d}x{t}>, tensor<?x16x2x{dv}x{t}>)
           kv_lens(%lt : tensor<?xi32>) block_table(%btt : tensor<?x?xi32>)
           outs(%ot : tensor<?x8x?x{dv}x{t}>, %st : tensor<?x8x?xf32>)
           causal({causal}) -> tensor<?x8x?x{dv}x{t}>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x{dv}x{t}>, memref<?x8x?x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}}
"""


# The token-major varlen form: [T, H, D] tensors and [B + 1] offsets.
KERNEL_VARLEN = """
func.func @fa_attention(%q: memref<?x8x{d}x{t}>, %k: memref<?x2x{d}x{t}>, %v: memref<?x2x{dv}x{t}>,
                        %o: memref<?x8x{dv}x{t}>, %lse: memref<8x?xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {{
  %qt = bufferization.to_tensor %q restrict : memref<?x8x{d}x{t}> to tensor<?x8x{d}x{t}>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x{d}x{t}> to tensor<?x2x{d}x{t}>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x{dv}x{t}> to tensor<?x2x{dv}x{t}>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x{dv}x{t}> to tensor<?x8x{dv}x{t}>
  %lt = bufferization.to_tensor %lse restrict writable : memref<8x?xf32> to tensor<8x?xf32>
  %cqt = bufferization.to_tensor %cq restrict : memref<?xi32> to tensor<?xi32>
  %ckt = bufferization.to_tensor %ck restrict : memref<?xi32> to tensor<?xi32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x{d}x{t}>, tensor<?x2x{d}x{t}>, tensor<?x2x{dv}x{t}>)
           cu_seqlens(%cqt, %ckt : tensor<?xi32>, tensor<?xi32>)
           outs(%ot : tensor<?x8x{dv}x{t}>, %lt : tensor<8x?xf32>)
           causal({causal}) -> tensor<?x8x{dv}x{t}>, tensor<8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x{dv}x{t}>, memref<?x8x{dv}x{t}>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<8x?xf32>, memref<8x?xf32>) -> ()
  return
}}
"""


def kernel_text(d, dv, t, causal, variant):
    if variant == "varlen":
        return KERNEL_VARLEN.format(d=d, dv=dv, t=t, causal=causal)
    if variant == "paged":
        return KERNEL_PAGED.format(d=d, dv=dv, t=t, causal=causal)
    if variant == "bool_mask":
        return KERNEL_MASK.format(d=d, dv=dv, t=t, causal=causal, mt="i8",
                                  mtt="i1", mname="%mt", convert=BOOL_CONVERT)
    if variant in ("window_softcap", "all_mods"):
        mods = variant == "all_mods"
        return KERNEL_MODS.format(
            d=d, dv=dv, t=t, causal=causal,
            alibi="alibi(%alt : tensor<8xf32>)" if mods else "",
            segments=(" segments(%qst, %kst : tensor<?x?xi32>, "
                      "tensor<?x?xi32>)") if mods else "")
    if variant == "regions":
        return KERNEL_REGIONS.format(d=d, dv=dv, t=t, causal=causal)
    if variant == "block_mask":
        return KERNEL_BLOCK_MASK.format(d=d, dv=dv, t=t, causal=causal)
    if variant == "add_mask":
        return KERNEL_MASK.format(d=d, dv=dv, t=t, causal=causal, mt=t,
                                  mtt=t, mname="%mb", convert="")
    return KERNEL.format(d=d, dv=dv, t=t, causal=causal)


def extract_ptxs(mlir_text):
    """The PTX of every gpu.binary in `mlir_text`, in order."""
    return [re.sub(r"\\([0-9A-Fa-f]{2})", lambda x: chr(int(x.group(1), 16)),
                   m.group(1)).replace("\\\\", "\\")
            for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"',
                                 mlir_text)]


def extract_ptx(mlir_text):
    ptxs = extract_ptxs(mlir_text)
    return ptxs[0] if ptxs else None


def assemble(ptxas, chip, ptx, tmp, name):
    """ptxas -arch=<chip> -v on `ptx`: (ok, ptxas's report, the frame/spill
    match); ok means it assembled with no stack frame and no spills."""
    ptx_path = os.path.join(tmp, name + ".ptx")
    with open(ptx_path, "w") as f:
        f.write(ptx)
    asm = subprocess.run([ptxas, f"-arch={chip}", "-v", ptx_path, "-o",
                          os.path.join(tmp, name + ".cubin")],
                         capture_output=True, text=True)
    info = asm.stdout + asm.stderr
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", info)
    ok = (asm.returncode == 0 and frame is not None
          and frame.groups() == ("0", "0", "0"))
    return ok, info, frame


def main(argv):
    fa_opt, ptxas = argv[1], argv[2]
    failures = 0
    configs = []
    with tempfile.TemporaryDirectory(prefix="fa-ptxas-") as tmp:
        simt = " kernel=simt"
        configs = [(chip, d, d, t, causal, simt, "")
                   for chip in ("sm_80", "sm_90") for d in (64, 96, 128)
                   for t in ("f16", "bf16", "f32")
                   for causal in ("none", "bottom_right")]
        # Every head dim the GPU path accepts, V's differing from Q/K's.
        configs += [("sm_80", d, 264 - d if d != 128 else 128, t, "none", simt, "")
                    for d in range(8, 257, 8) for t in ("f16", "f32")]
        # The score/mask modifiers on the SIMT kernels.
        configs += [(chip, 64, 64, t, "bottom_right", simt, variant)
                    for chip, t, variant in (("sm_80", "f32", "window_softcap"),
                                             ("sm_90", "f16", "all_mods"),
                                             ("sm_80", "f32", "regions"),
                                             ("sm_80", "f16", "block_mask"))]
        # Double-buffered K/V.
        configs += [(chip, d, d, "bf16", "bottom_right", simt + " double-buffer=true", "")
                    for chip in ("sm_80", "sm_90") for d in (64, 128)]
        # The decode kernel with packed query heads (pack-gqa=always; the
        # kernel text's Hq = 8, Hkv = 2): sm_80 and sm_90a, with and
        # without the modifiers and regions.
        pack = simt + " pack-gqa=always"
        configs += [(chip, d, d, t, causal, pack, variant)
                    for chip, d, t, causal, variant in (
                        ("sm_80", 128, "f16", "bottom_right", ""),
                        ("sm_80", 64, "f32", "none", ""),
                        ("sm_90a", 128, "bf16", "bottom_right", ""),
                        ("sm_90a", 64, "f16", "bottom_right", "all_mods"),
                        ("sm_80", 128, "f16", "bottom_right", "regions"))]
        # A paged K/V cache (16-row pages, the SIMT kernel), plain and
        # with packed query heads.
        configs += [(chip, 128, 128, t, "bottom_right", simt + extra, "paged")
                    for chip, t, extra in (("sm_80", "f16", ""),
                                           ("sm_90a", "bf16",
                                            " pack-gqa=always"))]
        # The token-major varlen form on the SIMT kernel.
        configs += [(chip, 128, 128, t, "bottom_right", simt, "varlen")
                    for chip, t in (("sm_80", "f16"), ("sm_90a", "bf16"))]
        # Tensor cores (fa-map-to-tensor-cores): GQA with key lengths and
        # LSE at D 64/96/128, f16/bf16, causal none/bottom-right, then the
        # mask variants, 3 stages and the other head dims.
        tc = " kernel=mma"
        configs += [(chip, d, d, t, causal, tc, "")
                    for chip in ("sm_80", "sm_90") for d in (64, 96, 128)
                    for t in ("f16", "bf16")
                    for causal in ("none", "bottom_right")]
        configs += [(chip, 128, 128, t, causal, tc, variant)
                    for chip in ("sm_80", "sm_90")
                    for t, causal, variant in (("f16", "none", "bool_mask"),
                                               ("bf16", "top_left", "add_mask"))]
        configs += [(chip, 128, 128, "f16", "bottom_right",
                     tc + " tc-stages=3", "")
                    for chip in ("sm_80", "sm_90")]
        configs += [("sm_80", d, dv, "bf16", "none", tc, "")
                    for d, dv in ((16, 16), (32, 48), (80, 80), (160, 160),
                                  (256, 256), (64, 128))]
        # The score/mask modifiers: window + softcap, and with ALiBi and
        # segment ids too.
        configs += [(chip, 128, 128, t, "bottom_right", tc, variant)
                    for chip, t, variant in (("sm_80", "f16", "window_softcap"),
                                             ("sm_90", "bf16", "all_mods"),
                                             ("sm_80", "f16", "regions"),
                                             ("sm_90", "bf16", "block_mask"))]
        # A paged K/V cache (16-row pages) and the token-major varlen form
        # on the tensor-core kernels.
        configs += [("sm_80", 128, 128, "f16", "bottom_right", tc, variant)
                    for variant in ("paged", "varlen")]
        configs += [("sm_90a", 128, 128, "bf16", "bottom_right",
                     " kernel=wgmma", variant)
                    for variant in ("paged", "varlen")]
        # Hopper wgmma kernels (fa-map-to-wgmma, sm_90a only): GQA with key
        # lengths and LSE at D 64/128, f16/bf16, causal none/bottom-right,
        # then the masks, two warpgroups, 128-key tiles, 3 stages and the
        # wide head dims.
        wg = " kernel=wgmma"
        configs += [("sm_90a", d, d, t, causal, wg, "")
                    for d in (64, 128) for t in ("f16", "bf16")
                    for causal in ("none", "bottom_right")]
        configs += [("sm_90a", 128, 128, t, causal, wg, variant)
                    for t, causal, variant in (("f16", "none", "bool_mask"),
                                               ("bf16", "top_left", "add_mask"))]
        configs += [("sm_90a", d, d, "f16", "bottom_right", wg + opts, "")
                    for d, opts in ((128, " wg-warpgroups=2"),
                                    (64, " wg-warpgroups=2 wg-block-kv=128"),
                                    (128, " wg-block-kv=128"),
                                    (128, " wg-stages=3"))]
        configs += [("sm_90a", d, dv, "bf16", causal, wg, variant)
                    for d, dv, causal, variant in (
                        (64, 256, "none", ""), (192, 192, "none", ""),
                        (256, 256, "none", ""), (256, 256, "bottom_right", ""),
                        (192, 192, "top_left", "add_mask"),
                        (128, 128, "bottom_right", "window_softcap"),
                        (64, 64, "top_left", "all_mods"),
                        (128, 128, "bottom_right", "regions"),
                        (128, 128, "bottom_right", "block_mask"))]
        for chip, d, dv, t, causal, extra, variant in configs:
            if True:
                if True:
                    if True:
                        tensor_cores = "kernel=mma" in extra
                        wgmma = "kernel=wgmma" in extra
                        name = (f"{chip}_d{d}_dv{dv}_{t}_{causal}"
                                + ("_db" if "double" in extra else "")
                                + ("_pack" if "pack-gqa" in extra else "")
                                + ("_tc" if tensor_cores else "")
                                + ("_wg" if wgmma else "")
                                + ("_2wg" if "warpgroups=2" in extra else "")
                                + ("_kv128" if "block-kv=128" in extra else "")
                                + ("_s3" if "stages=3" in extra else "")
                                + (f"_{variant}" if variant else ""))
                        src = os.path.join(tmp, name + ".mlir")
                        with open(src, "w") as f:
                            f.write(kernel_text(d, dv, t, causal, variant))
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
                            needles = (f".target {chip}", ".entry fa_attention",
                                       ".shared .align 16", "bar.sync",
                                       "shfl.sync.bfly", "shfl.sync.idx")
                            if tensor_cores:
                                mma = ("mma.sync.aligned.m16n8k16.row.col.f32."
                                       f"{t}.{t}.f32")
                                needles = (f".target {chip}", ".entry fa_attention",
                                           ".extern .shared .align 16 .b8 __dynamic_shmem__0[];",
                                           "bar.sync", "ex2.approx.f32",
                                           "shfl.sync.bfly", mma,
                                           "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                                           "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                                           "cp.async.cg.shared.global",
                                           "cp.async.commit_group",
                                           "cp.async.wait_group")
                            if wgmma:
                                bkv = 128 if "block-kv=128" in extra else 64
                                threads = 256 if "warpgroups=2" in extra else 128
                                needles = (".target sm_90a", ".entry fa_attention",
                                           f".maxntid {threads}, 1, 1",
                                           ".extern .shared .align 16 .b8 __dynamic_shmem__0[];",
                                           "bar.sync", "ex2.approx.f32",
                                           "shfl.sync.bfly",
                                           "fence.proxy.async.shared::cta",
                                           "wgmma.fence.sync.aligned",
                                           "wgmma.commit_group.sync.aligned",
                                           "wgmma.wait_group.sync.aligned",
                                           # S = Q K^T: K-major B
                                           f"wgmma.mma_async.sync.aligned.m64n{bkv}k16.f32.{t}.{t}",
                                           # O += P V: MN-major V
                                           f"wgmma.mma_async.sync.aligned.m64n{dv}k16.f32.{t}.{t}",
                                           "cp.async.cg.shared.global",
                                           "cp.async.commit_group",
                                           "cp.async.wait_group")
                                if ptx is not None and not re.search(
                                        rf"m64n{dv}k16\.f32\.{t}\.{t}[^;]*, 0,\s*1;", ptx):
                                    problems.append("the P V wgmma does not read V MN-major (imm-trans-b 1)")
                            for needle in needles:
                                if needle not in ptx:
                                    problems.append(f"PTX lacks '{needle}'")
                        if problems:
                            print(f"FAIL {name}: " + "; ".join(problems))
                            failures += 1
                            continue
                        ok, info, frame = assemble(ptxas, chip, ptx, tmp,
                                                   name)
                        regs = re.search(r"Used (\d+) registers", info)
                        smem = re.search(r"(\d+) bytes smem", info)
                        # The tensor-core kernels take all their shared memory
                        # dynamically (.extern): no static bytes (ptxas -v
                        # then prints no "bytes smem"), or a launch at the
                        # chip's opt-in maximum fails.
                        if (tensor_cores or wgmma) and smem is not None and smem.group(1) != "0":
                            ok = False
                        print(f"{'PASS' if ok else 'FAIL'} {name}: "
                              f"{regs.group(1) if regs else '?'} registers, "
                              f"{smem.group(1) if smem else '0'} bytes static smem, "
                              f"{frame.group(0) if frame else info.strip()[:300]}")
                        failures += not ok
        # fa.merge's kernel (fa-gpu-merge): one warp per row, sm_80 and
        # sm_90a, f32/f16/bf16 outputs, Dv 40, 128 and 256.
        merges = [("sm_80", 40, "f16"), ("sm_80", 128, "f32"),
                  ("sm_90a", 128, "bf16"), ("sm_90a", 256, "f16")]
        for chip, dv, t in merges:
            name = f"merge_{chip}_dv{dv}_{t}"
            src = os.path.join(tmp, name + ".mlir")
            with open(src, "w") as f:
                f.write(MERGE_KERNEL.format(dv=dv, t=t))
            lowered = subprocess.run(
                [fa_opt, src, f"-fa-lower-to-nvvm=chip={chip}"],
                capture_output=True, text=True)
            ptx = extract_ptx(lowered.stdout) if lowered.returncode == 0 \
                else None
            problems = []
            if ptx is None:
                problems.append("no PTX: " + lowered.stderr.strip()[:300])
            else:
                for needle in (f".target {chip}", ".entry merge",
                               "ld.global", "ex2.approx", "st.global"):
                    if needle not in ptx:
                        problems.append(f"PTX lacks '{needle}'")
            info = ""
            if not problems:
                ok, info, frame = assemble(ptxas, chip, ptx, tmp, name)
                if not ok:
                    problems.append("ptxas: " + info.strip()[:300])
                else:
                    info = frame.group(0)
            print(f"{'FAIL' if problems else 'PASS'} {name}: "
                  + ("; ".join(problems) if problems else info))
            failures += bool(problems)
        configs += merges
        # Split-KV (split-kv=true): one binary with two entries, the
        # attention kernel writing partials and fa_attention_merge; both
        # must assemble with no spills (decode shapes, D 128: the SIMT
        # kernel with packed heads in f16 and bf16, the mma.sync kernel in
        # f16 with and without packed heads, wgmma in f16).
        splits = [("sm_80", "f16", "simt"), ("sm_90a", "bf16", "simt"),
                  ("sm_80", "f16", "mma"), ("sm_80", "bf16", "mma_packed"),
                  ("sm_90a", "f16", "wgmma")]
        needles = {"simt": None, "mma": "mma.sync.aligned",
                   "mma_packed": "mma.sync.aligned",
                   "wgmma": "wgmma.mma_async"}
        for chip, t, family in splits:
            name = f"split_{family}_{chip}_d128_{t}"
            src = os.path.join(tmp, name + ".mlir")
            with open(src, "w") as f:
                f.write(kernel_text(128, 128, t, "bottom_right", ""))
            packed = (" pack-gqa=always" if family in ("simt", "mma_packed")
                      else " pack-gqa=never")
            kernel = family.split("_")[0]
            lowered = subprocess.run(
                [fa_opt, src, f"-fa-lower-to-nvvm=chip={chip} "
                 f"kernel={kernel}{packed} split-kv=true"],
                capture_output=True, text=True)
            ptxs = extract_ptxs(lowered.stdout)
            problems = []
            if lowered.returncode != 0 or len(ptxs) != 1:
                problems.append(f"expected one binary, got {len(ptxs)}: "
                                + lowered.stderr.strip()[:300])
            infos = []
            for ptx in ptxs[:1]:
                for entry in (".entry fa_attention(",
                              ".entry fa_attention_merge(",
                              needles[family]):
                    if entry and entry not in ptx:
                        problems.append(f"the binary lacks '{entry}'")
                ok, info, _ = assemble(ptxas, chip, ptx, tmp, name)
                # ptxas -v reports each entry's frame and spills.
                frames = re.findall(
                    r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                    r"(\d+) bytes spill loads", info)
                if not ok or len(frames) != 2 or any(
                        f != ("0", "0", "0") for f in frames):
                    problems.append("ptxas: " + info.strip()[:300])
                else:
                    infos.append(f"2 entries, {frames[0][0]} bytes stack "
                                 f"frame, 0 bytes spill stores and loads")
            print(f"{'FAIL' if problems else 'PASS'} {name}: "
                  + ("; ".join(problems) if problems else " / ".join(infos)))
            failures += bool(problems)
        configs += splits
    print(f"{len(configs) - failures}/{len(configs)} configurations assemble with no spills")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
