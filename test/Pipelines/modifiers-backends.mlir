// Score/mask modifiers through the pipelines: the CPU vector kernel
// implements them (test/Codegen/CPU/cpu-attention.mlir checks its form);
// every GPU kernel family refuses them with an error naming the modifiers.
//
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=simt" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=WGMMA

// The CPU vector kernel ran: 16-lane FMAs, the softcap's tanh as a
// rational approximation (no libm call), no fa op left.
// CPU-LABEL: llvm.func @window_softcap
//   CPU-NOT: llvm.intr.tanh
//   CPU-NOT: @tanhf
//       CPU: llvm.intr.fma({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
//   CPU-NOT: fa.attention
//   CPU-NOT: llvm.intr.tanh

// AUTO: error: fa-promote-shared: score/mask modifiers (window, softcap, alibi, chunk, segments, q_offset) are not supported by the simt kernels yet; fa-lower-to-cpu runs them
// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention of @window_softcap is not eligible: score/mask modifiers (window, softcap, alibi, chunk, segments, q_offset) are not supported by the mma kernels yet; fa-lower-to-cpu runs them
// WGMMA: error: fa-lower-to-nvvm: kernel=wgmma: the attention of @window_softcap is not eligible: score/mask modifiers (window, softcap, alibi, chunk, segments, q_offset) are not supported by the wgmma kernels yet; fa-lower-to-cpu runs them
func.func @window_softcap(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) outs(%e : tensor<1x2x64x64xf16>) causal(bottom_right) window(16, 0) softcap(3.0e+01) -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}
