// A paged K/V cache runs on the SIMT kernel: kernel=auto leaves an f16
// paged attention to it (the tensor-core kernels do not read pages), on
// sm_80 and sm_90a alike, and an explicit tensor-core family says why it
// cannot take the op.
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s --implicit-check-not=mma.sync --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 pack-gqa=always" | FileCheck %s --implicit-check-not=mma.sync
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=WGMMA

// CHECK: gpu.binary @paged_kernels
// CHECK-SAME: .entry paged(
// CHECK-SAME: shfl.sync.bfly
// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention of @paged is not eligible: paged K/V (a block_table) runs on the SIMT GPU kernel; the tensor-core kernels do not read paged caches yet
// WGMMA: error: fa-lower-to-nvvm: kernel=wgmma: the attention of @paged is not eligible: paged K/V (a block_table) runs on the SIMT GPU kernel; the tensor-core kernels do not read paged caches yet
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
