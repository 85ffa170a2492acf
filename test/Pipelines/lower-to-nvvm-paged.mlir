// A paged K/V cache runs on every kernel family: kernel=auto takes the
// tensor-core kernel the chip has (wgmma on sm_90a, mma.sync on sm_80) for
// an f16 paged attention, pack-gqa=always the packed SIMT decode kernel,
// and kernel=simt the SIMT one; the tensor-core kernels copy each K/V row
// from its page (block_table[b, key / 16], row key % 16).
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefix=WGMMA
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80" | FileCheck %s --check-prefix=MMA --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 kernel=mma" | FileCheck %s --check-prefix=MMA --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80 pack-gqa=always" | FileCheck %s --implicit-check-not=mma.sync
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a kernel=simt" | FileCheck %s --implicit-check-not=mma.sync --implicit-check-not=wgmma.mma_async
// RUN: fa-opt %s -fa-map-to-tensor-cores | FileCheck %s --check-prefix=COPY

// CHECK: gpu.binary @paged_kernels
// CHECK-SAME: .entry paged(
// CHECK-SAME: shfl.sync.bfly
// WGMMA: gpu.binary @paged_kernels
// WGMMA-SAME: wgmma.mma_async
// MMA: gpu.binary @paged_kernels
// MMA-SAME: mma.sync.aligned.m16n8k16
// MMA-SAME: cp.async
// The K and V copies read the block table, clamp the entry into the cache
// and copy row key % 16 of that page.
// COPY-LABEL: gpu.func @paged(
// COPY-SAME: %[[KC:[a-z0-9]+]]: memref<?x16x2x64xf16>, %[[VC:[a-z0-9]+]]: memref<?x16x2x64xf16>, %{{.*}}: memref<?xi32>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>
// COPY: memref.dim %[[BT]], %c1
// COPY: %[[E:.*]] = memref.load %[[BT]][%{{.*}}, %{{.*}}] : memref<?x?xi32>
// COPY: %[[P:.*]] = arith.index_cast %[[E]]
// COPY: %[[LO:.*]] = arith.maxsi %[[P]], %c0
// COPY: %[[PC:.*]] = arith.minsi %[[LO]], %{{.*}}
// COPY: %[[R:.*]] = arith.remui %{{.*}}, %c16
// COPY: nvgpu.device_async_copy %[[KC]][%[[PC]], %[[R]], %{{.*}}, %{{.*}}]
// COPY: nvgpu.device_async_copy %[[VC]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
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
