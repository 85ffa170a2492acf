// fa-lower-to-nvvm ends in a gpu.binary holding PTX for the chip, with the
// workgroup buffers as .shared, barriers, warp shuffles and the kernel entry
// taking expanded memref descriptors (pointer, pointer, offset, sizes,
// strides per argument); the host code is in the LLVM dialect.
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=simt" | FileCheck %s --check-prefixes=CHECK,SM80
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=simt" | FileCheck %s --check-prefixes=CHECK,SM90A
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90 features=+ptx60" 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90 features=sm90" 2>&1 | FileCheck %s --check-prefix=FEAT
// An unknown format fails before anything is written (it used to exit 0 and
// write an unparsable file).
// RUN: rm -f %t.mlir
// RUN: not fa-opt %s -fa-lower-to-nvvm="format=xyz" -o %t.mlir 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not test -s %t.mlir

// CHECK-NOT: fa.attention
// CHECK:     llvm.func @fa_kernel(
// CHECK:     gpu.launch_func  @fa_kernel_kernels::@fa_kernel blocks in
// SM80:      gpu.binary @fa_kernel_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">
// SM90A:     gpu.binary @fa_kernel_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">
// CHECK-SAME: assembly = "
// CHECK-SAME: .version 8.0
// SM80-SAME: .target sm_80
// SM90A-SAME: .target sm_90a
// CHECK-SAME: .visible .entry fa_kernel(
// CHECK-SAME: .maxntid 128, 1, 1
// CHECK-SAME: .shared .align 16 .b8 __fa_smem
// CHECK-SAME: bar.sync
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: shfl.sync.idx.b32
// CHECK-NOT: __nv_

// CHIP: error: fa-lower-to-nvvm: unsupported chip 'sm_75'; expected sm_80, sm_86, sm_89, sm_90 or sm_90a
// PTX: error: fa-lower-to-nvvm: PTX ISA 6.0 does not support sm_90; it needs at least 7.8
// FORMAT: error: fa-lower-to-nvvm: format must be isa, bin or fatbin, got 'xyz'
// FEAT: error: fa-lower-to-nvvm: features must be '+ptxNN' (the PTX ISA version, e.g. +ptx80), got 'sm90'

func.func @fa_kernel(%q: memref<?x4x?x64xbf16>, %k: memref<?x4x?x64xbf16>, %v: memref<?x4x?x64xbf16>,
                     %mask: memref<?x1x?x?xi8>, %o: memref<?x4x?x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %mb = bufferization.to_tensor %mask restrict : memref<?x1x?x?xi8> to tensor<?x1x?x?xi8>
  %c0 = arith.constant 0 : index
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
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>)
         mask(%mt : tensor<?x1x?x?xi1>) outs(%ot : tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x?x64xbf16>, memref<?x4x?x64xbf16>) -> ()
  return
}
