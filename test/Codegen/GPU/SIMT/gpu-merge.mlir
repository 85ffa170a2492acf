// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-gpu-merge))' -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-gpu-merge{warps=2}),fa-map-to-gpu)' -verify-diagnostics | FileCheck %s --check-prefix=MAP
// RUN: not fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-gpu-merge{warps=0}))' 2>&1 | FileCheck %s --check-prefix=WARPS
// WARPS: fa-gpu-merge: warps must be in [1, 32], got 0

// fa.merge in the kernel form: the body becomes a block forall over
// ceil(rows / warps) row blocks and a warp forall; warp w merges row
// block * 4 + w (clamped; the stores guarded), its lanes over Dv = 40
// (two column slots). A first loop over the S partials takes the max LSE,
// a second sums the weights and the weighted O rows, skipping empty
// partials (select on LSE == -inf); O = acc / l (0 without keys) is stored
// in f16, LSE = m + log l (-inf without keys) by lane 0.
// CHECK-LABEL: func.func @merge
//  CHECK-SAME:   (%[[PO:[a-z0-9]+]]: memref<?x?x4x40xf32>, %[[PL:[a-z0-9]+]]: memref<?x?x4xf32>, %[[O:[a-z0-9]+]]: memref<?x4x40xf16>, %[[L:[a-z0-9]+]]: memref<?x4xf32>)
//  CHECK-SAME:   fa.gpu_config = {merge, threads = 128 : index}
//   CHECK-NOT:   fa.merge
//   CHECK-NOT:   bufferization
//   CHECK-NOT:   math.exp {{.*}} : f32
//   CHECK-NOT:   math.log {{.*}} : f32
//       CHECK:   scf.forall (%[[BLK:.*]], %{{.*}}, %{{.*}}) in (%{{.*}}, 1, 1) {
//       CHECK:     scf.forall (%[[W:.*]]) in (4) {
//       CHECK:       %[[ROW:.*]] = arith.addi %{{.*}}, %[[W]]
//       CHECK:       %[[IN:.*]] = arith.cmpi slt, %[[ROW]]
//       CHECK:       %[[M:.*]] = scf.for {{.*}} -> (f32) {
//       CHECK:         memref.load %[[PL]]
//       CHECK:         arith.maximumf
//       CHECK:       %[[SUM:.*]]:3 = scf.for {{.*}} -> (f32, vector<32xf32>, vector<32xf32>) {
//       CHECK:         %[[E:.*]] = arith.cmpf oeq
//       CHECK:         math.exp2
//       CHECK:         arith.select %[[E]]
//       CHECK:         vector.gather %[[PO]]
//       CHECK:       arith.divf %[[SUM]]#1
//       CHECK:       arith.truncf {{.*}} : vector<32xf32> to vector<32xf16>
//       CHECK:       vector.scatter %[[O]]
//       CHECK:       vector.scatter %[[O]]
//       CHECK:       math.log2
//       CHECK:       vector.scatter %[[L]]
//       CHECK:     } {mapping = [#gpu.warp<x>]}
//       CHECK:   } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
// MAP-LABEL: gpu.module @merge_kernels
//       MAP:   gpu.func @merge
//  MAP-SAME:     known_block_size = array<i32: 64, 1, 1>
//       MAP:     gpu.block_id x
func.func @merge(%po: memref<?x?x4x40xf32>, %pl: memref<?x?x4xf32>, %o: memref<?x4x40xf16>, %l: memref<?x4xf32>) {
  %pot = bufferization.to_tensor %po restrict : memref<?x?x4x40xf32> to tensor<?x?x4x40xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<?x?x4xf32> to tensor<?x?x4xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x40xf16> to tensor<?x4x40xf16>
  %lt = bufferization.to_tensor %l restrict writable : memref<?x4xf32> to tensor<?x4xf32>
  %r:2 = fa.merge ins(%pot, %plt : tensor<?x?x4x40xf32>, tensor<?x?x4xf32>) outs(%ot : tensor<?x4x40xf16>, %lt : tensor<?x4xf32>) -> tensor<?x4x40xf16>, tensor<?x4xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x4x40xf16>, memref<?x4x40xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %l : (tensor<?x4xf32>, memref<?x4xf32>) -> ()
  return
}

// -----

// Not in the kernel form: a clear error.
func.func @not_kernel_form(%po: tensor<2x3x8xf32>, %pl: tensor<2x3xf32>, %o: tensor<3x8xf32>) -> tensor<3x8xf32> {
  // expected-error @+1 {{fa-gpu-merge: operands must come from memref arguments through bufferization.to_tensor}}
  %r = fa.merge ins(%po, %pl : tensor<2x3x8xf32>, tensor<2x3xf32>) outs(%o : tensor<3x8xf32>) -> tensor<3x8xf32>
  return %r : tensor<3x8xf32>
}

// -----

// A dynamic Dv: the lanes' column slots need it static.
func.func @dynamic_dv(%po: memref<?x3x?xf32>, %pl: memref<?x3xf32>, %o: memref<3x?xf32>) {
  %pot = bufferization.to_tensor %po restrict : memref<?x3x?xf32> to tensor<?x3x?xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<?x3xf32> to tensor<?x3xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x?xf32> to tensor<3x?xf32>
  // expected-error @+1 {{fa-gpu-merge: the partial outputs must be [S, d..., Dv] with at least one row dim and a static Dv, got 'memref<?x3x?xf32>'}}
  %r = fa.merge ins(%pot, %plt : tensor<?x3x?xf32>, tensor<?x3xf32>) outs(%ot : tensor<3x?xf32>) -> tensor<3x?xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<3x?xf32>, memref<3x?xf32>) -> ()
  return
}

// -----

// Two merges in one kernel function.
// expected-error @+1 {{fa-gpu-merge: expected one fa.merge per kernel function and nothing else to lower, found 2 fa.merge}}
func.func @two(%po: memref<2x3x8xf32>, %pl: memref<2x3xf32>, %o: memref<3x8xf32>, %o2: memref<3x8xf32>) {
  %pot = bufferization.to_tensor %po restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<2x3xf32> to tensor<2x3xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x8xf32> to tensor<3x8xf32>
  %ot2 = bufferization.to_tensor %o2 restrict writable : memref<3x8xf32> to tensor<3x8xf32>
  %r = fa.merge ins(%pot, %plt : tensor<2x3x8xf32>, tensor<2x3xf32>) outs(%ot : tensor<3x8xf32>) -> tensor<3x8xf32>
  %r2 = fa.merge ins(%pot, %plt : tensor<2x3x8xf32>, tensor<2x3xf32>) outs(%ot2 : tensor<3x8xf32>) -> tensor<3x8xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<3x8xf32>, memref<3x8xf32>) -> ()
  bufferization.materialize_in_destination %r2 in writable %o2 : (tensor<3x8xf32>, memref<3x8xf32>) -> ()
  return
}

// -----

// A result used by something else than its materialization.
func.func @other_use(%po: memref<2x3x8xf32>, %pl: memref<2x3xf32>, %o: memref<3x8xf32>) -> tensor<3x8xf32> {
  %pot = bufferization.to_tensor %po restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<2x3xf32> to tensor<2x3xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x8xf32> to tensor<3x8xf32>
  // expected-error @+1 {{fa-gpu-merge: a result is used by 'func.return'; expected only materialize_in_destination}}
  %r = fa.merge ins(%pot, %plt : tensor<2x3x8xf32>, tensor<2x3xf32>) outs(%ot : tensor<3x8xf32>) -> tensor<3x8xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<3x8xf32>, memref<3x8xf32>) -> ()
  return %r : tensor<3x8xf32>
}

// -----

// A partial read from a memref the function allocates (not an argument):
// the kernel replaces the body, so this is not the kernel form (it used to
// crash, the buffer erased under the kernel).
func.func @allocated(%pl: memref<2x3xf32>, %o: memref<3x8xf32>) {
  %po = memref.alloc() : memref<2x3x8xf32>
  %pot = bufferization.to_tensor %po restrict : memref<2x3x8xf32> to tensor<2x3x8xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<2x3xf32> to tensor<2x3xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x8xf32> to tensor<3x8xf32>
  // expected-error @+1 {{fa-gpu-merge: operands must come from memref arguments through bufferization.to_tensor}}
  %r = fa.merge ins(%pot, %plt : tensor<2x3x8xf32>, tensor<2x3xf32>) outs(%ot : tensor<3x8xf32>) -> tensor<3x8xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<3x8xf32>, memref<3x8xf32>) -> ()
  return
}
