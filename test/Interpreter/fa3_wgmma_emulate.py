# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A hand-written Hopper wgmma kernel runs under the interpreter (fa-emulate
--func, --check-races) against a float64 numpy reference, and three
mutations of it are caught.

The kernel (one warpgroup, 128 threads) computes
    O = Q K^T + Q V        (Q, K, V: 64 x 64, O: 64 x 64 f32)
with nvvm.wgmma.mma_async m64n64k16: Q is the K-major A operand, K the
K-major B operand (layoutB = col: N rows of K, as for S = Q K^T) and V the
MN-major B operand (layoutB = row: K rows of N, as for O = P V). The three
tiles are stored by the threads into dynamic shared memory in the 128-byte
swizzled canonical layout (row r of 64 elements in 128 bytes, 8-row atoms of
1024 bytes, the 16-byte chunk index XORed with the row index within the
atom, on the absolute shared address), each aligned at run time to 1024
bytes from memref.extract_aligned_pointer_as_index (the interpreter's
dynamic shared memory base is only 16-aligned). Then fence.proxy.async,
a barrier, and four k16 steps in an scf.for carrying the accumulator
struct: wgmma.fence, two mma_async (descriptor start + 32 bytes per step for
Q and K, + 2 SBO for V), commit, wait 0. The accumulator is stored through
the fragment table.

Mutations that must be caught (the run fails, or O differs from the
reference): the swizzle XOR left out of the stores, the fence.proxy left
out, and SBO 512 instead of 1024 in the descriptors.

Usage: fa3_wgmma_emulate.py FA_EMULATE
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

WG = "#gpu.address_space<workgroup>"
N = 64
TILE_BYTES = 64 * 128
DYN_BYTES = 1024 + 3 * TILE_BYTES


def struct_type(n=N):
    return "!llvm.struct<(" + ", ".join(["f32"] * (n // 2)) + ")>"


def kernel(dtype="f16", swizzle=True, proxy_fence=True, sbo=1024):
    """The kernel's MLIR text; the keyword arguments are the mutations."""
    st = struct_type()
    T = dtype
    elems = DYN_BYTES // 2
    # Descriptor constants: LBO (16 bytes, unused for K-major; 8192 for the
    # MN-major V: one 64-wide chunk only), SBO, 128B swizzle (1 << 62).
    const_k = (1 << 16) | ((sbo >> 4) << 32) | (1 << 62)
    const_mn = ((8192 >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 62)
    L = []
    a = L.append
    a("module attributes {gpu.container_module} {")
    a("gpu.module @fa3_kernels {")
    a("  gpu.func @fa3(%q: memref<1x1x64x64x{T}>, %k: memref<1x1x64x64x{T}>, "
      "%v: memref<1x1x64x64x{T}>, %o: memref<1x1x64x64xf32>) kernel "
      "attributes {{known_block_size = array<i32: 128, 1, 1>}} {{"
      .replace("{T}", T).replace("{{", "{").replace("}}", "}"))
    for c in (0, 1, 2, 4, 8, 16, 32, 64, 128, 4096):
        a("    %%c%d = arith.constant %d : index" % (c, c))
    a("    %t = gpu.thread_id x")
    a("    %%dyn = gpu.dynamic_shared_memory : memref<?xi8, %s>" % WG)
    a("    %%sm = memref.view %%dyn[%%c0][] : memref<?xi8, %s> to "
      "memref<%dx%s, %s>" % (WG, elems, T, WG))
    a("    %%p = memref.extract_aligned_pointer_as_index %%sm : "
      "memref<%dx%s, %s> -> index" % (elems, T, WG))
    # The first 1024-aligned shared address at or past the view.
    a("    %c1023 = arith.constant 1023 : index")
    a("    %cm1024 = arith.constant -1024 : index")
    a("    %pa = arith.addi %p, %c1023 : index")
    a("    %tile0 = arith.andi %pa, %cm1024 : index")
    a("    %c7 = arith.constant 7 : index")
    # Each thread stores elements t, t + 128, ... of each tile.
    for name, off in (("q", 0), ("k", TILE_BYTES), ("v", 2 * TILE_BYTES)):
        a("    %%off_%s = arith.constant %d : index" % (name, off))
        a("    %%tile_%s = arith.addi %%tile0, %%off_%s : index" % (name, name))
        a("    scf.for %i = %t to %c4096 step %c128 {")
        a("      %r = arith.divui %i, %c64 : index")
        a("      %col = arith.remui %i, %c64 : index")
        a("      %%x = memref.load %%%s[%%c0, %%c0, %%r, %%col] : "
          "memref<1x1x64x64x%s>" % (name, T))
        # Unswizzled: tile + (r / 8) 1024 + (r % 8) 128 + 2 col.
        a("      %r8 = arith.divui %r, %c8 : index")
        a("      %c1024 = arith.constant 1024 : index")
        a("      %ra = arith.muli %r8, %c1024 : index")
        a("      %rm = arith.remui %r, %c8 : index")
        a("      %rb = arith.muli %rm, %c128 : index")
        a("      %cb = arith.muli %col, %c2 : index")
        a("      %%u0 = arith.addi %%tile_%s, %%ra : index" % name)
        a("      %u1 = arith.addi %u0, %rb : index")
        a("      %un = arith.addi %u1, %cb : index")
        if swizzle:
            a("      %s7 = arith.shrui %un, %c7 : index")
            a("      %s7m = arith.andi %s7, %c7 : index")
            a("      %sx = arith.shli %s7m, %c4 : index")
            a("      %phys = arith.xori %un, %sx : index")
        else:
            a("      %phys = arith.addi %un, %c0 : index")
        a("      %rel = arith.subi %phys, %p : index")
        a("      %e = arith.divui %rel, %c2 : index")
        a("      memref.store %%x, %%sm[%%e] : memref<%dx%s, %s>"
          % (elems, T, WG))
        a("    }")
    if proxy_fence:
        a("    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, "
          "space = #nvvm.shared_space<cta>}")
    a("    gpu.barrier")
    # Descriptors.
    a("    %c4i = arith.constant 4 : i64")
    a("    %cmask = arith.constant 16383 : i64")
    a("    %%constk = arith.constant %d : i64" % const_k)
    a("    %%constmn = arith.constant %d : i64" % const_mn)
    for name in ("q", "k", "v"):
        a("    %%ti_%s = arith.index_cast %%tile_%s : index to i64"
          % (name, name))
    a("    %c32i = arith.constant 32 : i64")
    a("    %%c2sbo = arith.constant %d : i64" % (2 * sbo))
    a("    %%zero = llvm.mlir.zero : %s" % st)
    a("    %%acc = scf.for %%s = %%c0 to %%c4 step %%c1 iter_args(%%a = %%zero)"
      " -> (%s) {" % st)
    a("      %si = arith.index_cast %s : index to i64")
    a("      %kb = arith.muli %si, %c32i : i64")
    a("      %vb = arith.muli %si, %c2sbo : i64")
    for name, step, const in (("q", "%kb", "%constk"), ("k", "%kb", "%constk"),
                              ("v", "%vb", "%constmn")):
        a("      %%st_%s = arith.addi %%ti_%s, %s : i64" % (name, name, step))
        a("      %%en_%s = arith.shrui %%st_%s, %%c4i : i64" % (name, name))
        a("      %%ma_%s = arith.andi %%en_%s, %%cmask : i64" % (name, name))
        a("      %%d_%s = arith.ori %%ma_%s, %s : i64" % (name, name, const))
    a("      nvvm.wgmma.fence.aligned")

    def mma(res, acc, b, layout):
        return ("      %s = nvvm.wgmma.mma_async %%d_q, %s, %s, "
                "#nvvm.shape<m = 64, n = %d, k = 16>, D [<f32>, "
                "#nvvm.wgmma_scale_out<one>], A [<%s>, "
                "#nvvm.wgmma_scale_in<one>, #nvvm.mma_layout<row>], B [<%s>, "
                "#nvvm.wgmma_scale_in<one>, #nvvm.mma_layout<%s>] : %s -> %s"
                % (res, b, acc, N, T, T, layout, st, st))
    a(mma("%d1", "%a", "%d_k", "col"))
    a(mma("%d2", "%d1", "%d_v", "row"))
    a("      nvvm.wgmma.commit.group.sync.aligned")
    a("      nvvm.wgmma.wait.group.sync.aligned 0")
    a("      scf.yield %%d2 : %s" % st)
    a("    }")
    # Fragment: element 4i + j of thread 32w + l is
    # O[16w + l/4 + 8(j/2)][8i + 2(l%4) + j%2].
    a("    %w = arith.divui %t, %c32 : index")
    a("    %l = arith.remui %t, %c32 : index")
    a("    %w16 = arith.muli %w, %c16 : index")
    a("    %g = arith.divui %l, %c4 : index")
    a("    %rbase = arith.addi %w16, %g : index")
    a("    %qq = arith.remui %l, %c4 : index")
    a("    %cbase = arith.muli %qq, %c2 : index")
    for e in range(N // 2):
        i, j = e // 4, e % 4
        a("    %%val%d = llvm.extractvalue %%acc[%d] : %s" % (e, e, st))
        a("    %%dr%d = arith.constant %d : index" % (e, 8 * (j // 2)))
        a("    %%dc%d = arith.constant %d : index" % (e, 8 * i + j % 2))
        a("    %%row%d = arith.addi %%rbase, %%dr%d : index" % (e, e))
        a("    %%colx%d = arith.addi %%cbase, %%dc%d : index" % (e, e))
        a("    memref.store %%val%d, %%o[%%c0, %%c0, %%row%d, %%colx%d] : "
          "memref<1x1x64x64xf32>" % (e, e, e))
    a("    gpu.return")
    a("  }")
    a("}")
    a("}")
    return "\n".join(L) + "\n"


def round_bf16(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def run(fa_emulate, tmp, name, text, dtype, seed):
    rng = np.random.default_rng(seed)
    arrays = {}
    for n in ("q", "k", "v"):
        x = rng.standard_normal((1, 1, 64, 64)).astype(np.float32)
        x = x.astype(np.float16) if dtype == "f16" else round_bf16(x)
        arrays[n] = x
        np.save(os.path.join(tmp, "%s.%s.npy" % (name, n)), x)
    mlir = os.path.join(tmp, name + ".mlir")
    with open(mlir, "w") as f:
        f.write(text)
    out = os.path.join(tmp, name + ".o.npy")
    if os.path.exists(out):
        os.remove(out)
    cmd = [fa_emulate, mlir, "--func", "fa3", "--grid", "1", "--block",
           "128", "--dynamic-shared", str(DYN_BYTES), "--arg-roles",
           "q,k,v,o", "--check-races"]
    for n in ("q", "k", "v"):
        cmd += ["--" + n, os.path.join(tmp, "%s.%s.npy" % (name, n))]
    cmd += ["-o", out]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    q, k, v = (arrays[n][0, 0].astype(np.float64) for n in ("q", "k", "v"))
    ref = q @ k.T + q @ v
    o = np.load(out)
    if o.dtype != np.float32 or o.shape != (1, 1, 64, 64):
        return None, "O is %s %s" % (o.dtype, o.shape)
    err = np.abs(o[0, 0].astype(np.float64) - ref).max()
    return err, ""


def main(argv):
    fa_emulate = argv[1]
    failures = 0
    # f32 accumulation of 128 products of magnitude ~1: a few ulp of ~10.
    tol = 1e-4
    with tempfile.TemporaryDirectory(prefix="fa3-wgmma-") as tmp:
        for dtype, seed in (("f16", 1), ("bf16", 2), ("f16", 3)):
            name = "wgmma_%s_%d" % (dtype, seed)
            err, msg = run(fa_emulate, tmp, name, kernel(dtype), dtype, seed)
            ok = err is not None and err <= tol
            failures += not ok
            print("%s %-20s max abs error %s %s" % (
                "PASS" if ok else "FAIL", name, err, msg[:2000]), flush=True)
        mutations = [
            ("no_swizzle_xor", dict(swizzle=False), None),
            ("no_fence_proxy", dict(proxy_fence=False),
             "through the async proxy, but thread"),
            ("sbo_512", dict(sbo=512), None),
        ]
        for name, kw, needle in mutations:
            err, msg = run(fa_emulate, tmp, name, kernel("f16", **kw), "f16",
                           4)
            if err is None:
                caught = "cannot parse" not in msg and (needle is None or
                                                        needle in msg)
                how = "run failed: " + msg.splitlines()[0][:300] if msg else ""
            else:
                caught = err > tol and needle is None
                how = "max abs error %g" % err
            failures += not caught
            print("%s mutation %-16s %s" % ("CAUGHT" if caught else "MISSED",
                                             name, how), flush=True)
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
