// Every backend kernel builder replaces the op of a kernel function and
// erases its materialize_in_destination users; a result with any other use
// (here also returned) is rejected with one diagnostic instead of being left
// pointing at erased IR.
// RUN: not fa-opt %s -fa-cpu-attention 2>&1 | FileCheck %s -DPASS=fa-cpu-attention
// RUN: not fa-opt %s -pass-pipeline='builtin.module(func.func(fa-promote-shared))' 2>&1 | FileCheck %s -DPASS=fa-promote-shared
// RUN: not fa-opt %s -fa-map-to-tensor-cores 2>&1 | FileCheck %s -DPASS=fa-map-to-tensor-cores
// RUN: not fa-opt %s -fa-map-to-wgmma 2>&1 | FileCheck %s -DPASS=fa-map-to-wgmma
// RUN: not fa-opt %s -fa-lower-to-nvvm='chip=sm_80 kernel=simt' 2>&1 | FileCheck %s -DPASS=fa-promote-shared
// RUN: not fa-opt %s -fa-lower-to-nvvm='chip=sm_80' 2>&1 | FileCheck %s -DPASS=fa-map-to-tensor-cores
// RUN: not fa-opt %s -fa-lower-to-nvvm='chip=sm_90a' 2>&1 | FileCheck %s -DPASS=fa-map-to-wgmma

// CHECK: error: [[PASS]]: a result is used by 'func.return'; expected only materialize_in_destination
// CHECK-NOT: error
func.func @extra_use(%q: memref<1x1x64x64xf16>, %k: memref<1x1x64x64xf16>, %v: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>) -> tensor<1x1x64x64xf16> {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16>)
           outs(%ot : tensor<1x1x64x64xf16>) -> tensor<1x1x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x1x64x64xf16>, memref<1x1x64x64xf16>) -> ()
  return %r : tensor<1x1x64x64xf16>
}
