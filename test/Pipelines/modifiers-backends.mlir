// Score/mask modifiers through the pipelines: the CPU vector kernel and
// every GPU kernel family (SIMT, mma.sync, wgmma) implement them
// (test/Codegen/CPU/cpu-attention.mlir and test/Codegen/GPU/ check their
// forms).
//
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefixes=GPU,WG
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma" | FileCheck %s --check-prefixes=GPU,WG
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80" | FileCheck %s --check-prefixes=GPU,MMA
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" | FileCheck %s --check-prefixes=GPU,MMA
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=simt" | FileCheck %s --check-prefixes=GPU,SIMT

// The CPU vector kernel ran: 16-lane FMAs, the softcap's tanh as a
// rational approximation (no libm call), no fa op left.
// CPU-LABEL: llvm.func @window_softcap
//   CPU-NOT: llvm.intr.tanh
//   CPU-NOT: @tanhf
//       CPU: llvm.intr.fma({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
//   CPU-NOT: fa.attention
//   CPU-NOT: llvm.intr.tanh

// The GPU kernels: PTX with the mma.sync, wgmma or warp-shuffle instructions and
// no tanh or libdevice call (the softcap's tanh is a rational approximation in plain
// arithmetic; there is no libdevice).
//     GPU: gpu.binary @window_softcap_kernels
//     MMA-SAME: mma.sync.aligned.m16n8k16
//     WG-SAME: wgmma.mma_async.sync.aligned
//     SIMT-SAME: shfl.sync.bfly
// GPU-NOT: {{tanh|__nv_}}

func.func @window_softcap(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) outs(%e : tensor<1x2x64x64xf16>) causal(bottom_right) window(16, 0) softcap(3.0e+01) -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}
