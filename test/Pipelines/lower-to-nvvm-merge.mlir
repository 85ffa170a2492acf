// fa-lower-to-nvvm takes a kernel function holding one fa.merge too: its
// GPU kernel (fa-gpu-merge: one warp per row of the [d...] rows, lanes over
// Dv) ends in a gpu.binary whose PTX reads the partials from global memory,
// computes the weights with ex2.approx and stores O (f16) and LSE (with
// lg2.approx; no libdevice call, whatever CUDA_HOME says); the host
// launches ceil(rows / 4) blocks of 128 threads. The attention kernels of
// the same module are unaffected.
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_80" | FileCheck %s
// RUN: fa-opt %s -fa-lower-to-nvvm="chip=sm_90a warps=2" | FileCheck %s --check-prefix=WARPS2

// CHECK-LABEL: llvm.func @merge
//       CHECK:   gpu.launch_func @merge_kernels::@merge
//  CHECK-SAME:     threads in ({{.*}})
//       CHECK: gpu.binary @merge_kernels
//  CHECK-SAME:   .entry merge(
//  CHECK-SAME:   ld.global
//  CHECK-SAME:   ex2.approx.f32
//  CHECK-SAME:   st.global.b16
//  CHECK-SAME:   lg2.approx.f32
//   CHECK-NOT: __nv_
// WARPS2: gpu.binary @merge_kernels
// WARPS2-SAME: .target sm_90a
// WARPS2-SAME: .maxntid 64, 1, 1
func.func @merge(%po: memref<?x?x8x?x128xf32>, %pl: memref<?x?x8x?xf32>,
                 %o: memref<?x8x?x128xf16>, %l: memref<?x8x?xf32>) {
  %pot = bufferization.to_tensor %po restrict : memref<?x?x8x?x128xf32> to tensor<?x?x8x?x128xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<?x?x8x?xf32> to tensor<?x?x8x?xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x128xf16> to tensor<?x8x?x128xf16>
  %lt = bufferization.to_tensor %l restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.merge ins(%pot, %plt : tensor<?x?x8x?x128xf32>, tensor<?x?x8x?xf32>)
           outs(%ot : tensor<?x8x?x128xf16>, %lt : tensor<?x8x?xf32>) -> tensor<?x8x?x128xf16>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x128xf16>, memref<?x8x?x128xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %l : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}
