// A paged K/V cache runs on every kernel family: kernel=auto takes the
// tensor-core kernel the chip has (wgmma on sm_90a, mma.sync on sm_80) for
// an f16 paged attention, pack-gqa=always the packed mma.sync decode kernel
// (with kernel=simt the packed SIMT one), and kernel=simt the SIMT one (test/Codegen/GPU/NVIDIA/tensor-cores.mlir
// checks the tensor-core kernel's page reads).
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefix=WGMMA
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80" | FileCheck %s --check-prefix=MMA --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" | FileCheck %s --check-prefix=MMA --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 pack-gqa=always" | FileCheck %s --check-prefix=MMA --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=simt pack-gqa=always" | FileCheck %s --implicit-check-not=mma.sync
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=simt" | FileCheck %s --implicit-check-not=mma.sync --implicit-check-not=wgmma.mma_async

// CHECK: gpu.binary @paged_kernels
// CHECK-SAME: .entry paged(
// CHECK-SAME: shfl.sync.bfly
// WGMMA: gpu.binary @paged_kernels
// WGMMA-SAME: wgmma.mma_async
// MMA: gpu.binary @paged_kernels
// MMA-SAME: mma.sync.aligned.m16n8k16
// MMA-SAME: cp.async
func.func @paged(%q: memref<?x8x?x64xf16>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>,
                 %lens: memref<?xi32>, %bt: memref<?x?xi32>, %o: memref<?x8x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x64xf16> to tensor<?x8x?x64xf16>
  %kt = bufferization.to_tensor %kc restrict : memref<?x16x2x64xf16> to tensor<?x16x2x64xf16>
  %vt = bufferization.to_tensor %vc restrict : memref<?x16x2x64xf16> to tensor<?x16x2x64xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %btt = bufferization.to_tensor %bt restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x64xf16> to tensor<?x8x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x64xf16>, tensor<?x16x2x64xf16>, tensor<?x16x2x64xf16>)
         kv_lens(%lt : tensor<?xi32>) block_table(%btt : tensor<?x?xi32>)
         outs(%ot : tensor<?x8x?x64xf16>) causal(bottom_right) -> tensor<?x8x?x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x?x64xf16>, memref<?x8x?x64xf16>) -> ()
  return
}
