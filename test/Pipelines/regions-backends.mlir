// General score_mod / mask_mod regions through the pipelines: the CPU
// lowerings and every GPU kernel family inline them where they compute a
// score (AttentionSemantics::applyScoreMod / applyMaskMod); the table read
// becomes a load from the kernel's extra memref argument.
//
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: fa-opt %s -fa-lower-to-cpu=reference=1 | FileCheck %s --check-prefix=CPU
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefixes=GPU,WG
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" | FileCheck %s --check-prefixes=GPU,MMA
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=simt" | FileCheck %s --check-prefixes=GPU,SIMT

// CPU-LABEL: llvm.func @regions
//   CPU-NOT: fa.attention

// The kernels take the table as a fifth memref; no libdevice call.
//     GPU: gpu.binary @regions_kernels
//     MMA-SAME: mma.sync.aligned.m16n8k16
//     WG-SAME: wgmma.mma_async.sync.aligned
//     SIMT-SAME: shfl.sync.bfly
// GPU-NOT: {{__nv_}}

// A constant the region captures from the function is cloned into the
// kernel.
// CPU-LABEL: llvm.func @captured
//     GPU: gpu.binary @captured_kernels

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

func.func @captured(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %cap = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) outs(%e : tensor<1x2x64x64xf16>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    %y = arith.mulf %s, %cap : f32
    fa.yield %y : f32
  } -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}
