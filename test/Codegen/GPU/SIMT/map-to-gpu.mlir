// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=32}),fa-map-to-gpu,canonicalize,cse)' | FileCheck %s

// The block forall becomes a kernel launched over (query tiles, Hq, B) with
// 128 threads; the workgroup buffers become aligned shared globals; the
// thread and warp foralls run per thread / per warp with a barrier after
// each; lane vectors are distributed (warp reductions by shuffle xor, the
// P broadcast by shuffle idx).
// CHECK-LABEL: module attributes {gpu.container_module}
//       CHECK: func.func @kernel(%[[Q:[a-z0-9]+]]: memref<?x4x?x64xf16>, %[[K:[a-z0-9]+]]: memref<?x2x?x64xf16>, %[[V:[a-z0-9]+]]: memref<?x2x?x64xf16>, %[[O:[a-z0-9]+]]: memref<?x4x?x64xf16>)
//       CHECK:   %[[B:.*]] = memref.dim %[[Q]], %c0
//       CHECK:   %[[NQ:.*]] = memref.dim %[[Q]], %c2
//       CHECK:   %[[GX:.*]] = arith.ceildivui %[[NQ]], %c16
//       CHECK:   gpu.launch_func @kernel_kernels::@kernel blocks in (%[[GX]], %c4, %[[B]]) threads in (%c128, %c1, %c1) args(%[[Q]] : memref<?x4x?x64xf16>, %[[K]] : memref<?x2x?x64xf16>, %[[V]] : memref<?x2x?x64xf16>, %[[O]] : memref<?x4x?x64xf16>)
//   CHECK-NOT:   scf.forall
//       CHECK: gpu.module @kernel_kernels
//   CHECK-DAG:   memref.global "private" @__fa_smem0 : memref<1024xf16, 3> {alignment = 16 : i64}
//   CHECK-DAG:   memref.global "private" @__fa_smem1 : memref<2112xf16, 3> {alignment = 16 : i64}
//       CHECK:   gpu.func @kernel(%{{.*}}: memref<?x4x?x64xf16>, %{{.*}}: memref<?x2x?x64xf16>, %{{.*}}: memref<?x2x?x64xf16>, %{{.*}}: memref<?x4x?x64xf16>) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
//   CHECK-DAG:     memref.get_global @__fa_smem0
//   CHECK-DAG:     gpu.block_id  x
//   CHECK-DAG:     gpu.block_id  y
//   CHECK-DAG:     gpu.block_id  z
//   CHECK-DAG:     %[[TID:.*]] = gpu.thread_id  x
//       CHECK:     arith.remui %[[TID]], %c32
// Q copy, then a barrier.
//       CHECK:     scf.for %{{.*}} = %[[TID]] to %c1024 step %c128
//       CHECK:     gpu.barrier
//       CHECK:     scf.for
// K/V copies, barrier, the warp's rows, barrier.
//       CHECK:       gpu.barrier
//       CHECK:       arith.divui %[[TID]], %c32
//       CHECK:       gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
//       CHECK:       gpu.shuffle  xor %{{.*}}, %c8_i32, %c32_i32 : f32
//       CHECK:       gpu.shuffle  xor %{{.*}}, %c4_i32, %c32_i32 : f32
//       CHECK:       gpu.shuffle  xor %{{.*}}, %c2_i32, %c32_i32 : f32
//       CHECK:       gpu.shuffle  xor %{{.*}}, %c1_i32, %c32_i32 : f32
//       CHECK:       llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
//       CHECK:       gpu.shuffle  idx
//       CHECK:       gpu.barrier
//   CHECK-NOT:     vector.
//       CHECK:     gpu.barrier
//       CHECK:     gpu.return
func.func @kernel(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %o: memref<?x4x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         outs(%ot : tensor<?x4x?x64xf16>) causal(bottom_right) -> tensor<?x4x?x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  return
}
