// General score_mod / mask_mod regions through the pipelines: the CPU
// lowerings run them; the GPU kernel families do not lower them yet and say
// so, whichever family is asked for (never a kernel that drops them).
//
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: fa-opt %s -fa-lower-to-cpu=reference=1 | FileCheck %s --check-prefix=CPU
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=simt" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=WG

// CPU-LABEL: llvm.func @regions
//   CPU-NOT: fa.attention
// AUTO: error: fa-promote-shared: its score_mod / mask_mod regions are not lowered by the GPU kernels yet (the CPU backends run them)
// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention of @regions is not eligible: its score_mod / mask_mod regions are not lowered by the GPU kernels yet
// WG: error: fa-lower-to-nvvm: kernel=wgmma: the attention of @regions is not eligible: its score_mod / mask_mod regions are not lowered by the GPU kernels yet

func.func @regions(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %t: memref<2x127xf32>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %tt = bufferization.to_tensor %t restrict : memref<2x127xf32> to tensor<2x127xf32>
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) mod_operands(%tt : tensor<2x127xf32>) outs(%e : tensor<1x2x64x64xf16>) causal(bottom_right) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %tb: tensor<2x127xf32>):
    %c63 = arith.constant 63 : index
    %d = arith.subi %ki, %qi : index
    %i = arith.addi %d, %c63 : index
    %x = tensor.extract %tb[%h, %i] : tensor<2x127xf32>
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %tb: tensor<2x127xf32>):
    %c3 = arith.constant 3 : index
    %m = arith.remui %ki, %c3 : index
    %c0 = arith.constant 0 : index
    %keep = arith.cmpi ne, %m, %c0 : index
    fa.yield %keep : i1
  } -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}
