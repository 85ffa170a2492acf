// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=64}))' -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=64 double-buffer=true}))' -verify-diagnostics | FileCheck %s --check-prefix=DB
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=64 pack-gqa=always}))' -verify-diagnostics | FileCheck %s --check-prefix=PACK
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=64 pack-gqa=never}))' -verify-diagnostics | FileCheck %s --check-prefix=NOPACK
// RUN: not fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{pack-gqa=sometimes}))' 2>&1 | FileCheck %s --check-prefix=BADPACK
// BADPACK: fa-promote-shared: pack-gqa must be auto, always or never, got 'sometimes'

// Packed query heads (pack-gqa=always; Hq = 4, Hkv = 2, G = 2): the grid
// runs over the kv heads; packed row r of a kv head is query r / 2 of head
// kvHead * 2 + r % 2, for the Q copy and for O and LSE.
// PACK-LABEL: func.func @kernel
//  PACK-SAME:   fa.gpu_config = {block_kv = 64 : index, block_q = 16 : index, pack_gqa, threads = 128 : index}
//       PACK:   scf.forall (%{{.*}}, %[[KVH:.*]], %[[PB:.*]]) in (%{{.*}}, 2, %{{.*}}) {
//       PACK:     scf.forall (%{{.*}}) in (128) {
//       PACK:       %[[PQ:.*]] = arith.divui %{{.*}}, %c2
//       PACK:       %[[PR:.*]] = arith.remui %{{.*}}, %c2
//       PACK:       %[[PH:.*]] = arith.addi %[[PR]], %{{.*}}
//       PACK:       memref.load %{{.*}}[%[[PB]], %[[PH]], %[[PQ]],
//       PACK:     scf.for
//       PACK:         memref.load %{{.*}}[%[[PB]], %[[KVH]],
//       PACK:     scf.forall (%{{.*}}) in (4) {
//       PACK:       arith.remui %{{.*}}, %c2
//       PACK:       vector.scatter
// NOPACK-LABEL: func.func @decode
//  NOPACK-SAME:   fa.gpu_config = {block_kv = 64 : index, block_q = 16 : index, threads = 128 : index}
//       NOPACK:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 8, %{{.*}}) {

// Double buffering: two K and V slots; a prologue copies tile 0 when there
// is one; iteration j copies tile j+1 into slot (j+1) % 2, marked so that no
// barrier separates it from the compute of tile j, which reads slot j % 2.
// DB-LABEL: func.func @kernel
//       DB:   memref.alloca() {alignment = 16 : i64} : memref<5248xf32, 3>
//       DB:   memref.alloca() {alignment = 16 : i64} : memref<5120xf32, 3>
//       DB:   scf.forall
//       DB:     %[[N:.*]] = arith.ceildivui
//       DB:     %[[ANY:.*]] = arith.cmpi sgt, %[[N]], %c0
//       DB:     scf.if %[[ANY]] {
//       DB:       scf.forall (%{{.*}}) in (128)
//       DB:     scf.for %[[J:.*]] = %c0{{.*}} to %[[N]]
//       DB:       %[[NEXT:.*]] = arith.addi %[[J]], %c1
//       DB:       %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[N]]
//       DB:       scf.if %[[MORE]] {
//       DB:         arith.remui %[[NEXT]], %c2
//       DB:       } {fa.no_barrier_after, mapping = [#gpu.thread<x>]}
//       DB:       scf.forall (%{{.*}}) in (4)
//       DB:         arith.remui %[[J]], %c2
//       DB:       } {mapping = [#gpu.warp<x>]}

// A kernel function: memref arguments in, fa.attention, memrefs out. The
// body becomes a block-level forall with the tiles and the running state in
// workgroup memory (address space 3), thread-level copy foralls and
// warp-level foralls computing on 32-lane vectors.
// CHECK-LABEL: func.func @kernel
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: memref<?x4x?x40xf32>, %[[K:[a-z0-9]+]]: memref<?x2x?x40xf32>, %[[V:[a-z0-9]+]]: memref<?x2x?x40xf32>, %[[O:[a-z0-9]+]]: memref<?x4x?x40xf32>, %[[L:[a-z0-9]+]]: memref<?x4x?xf32>)
//  CHECK-SAME:   fa.gpu_config = {block_kv = 64 : index, block_q = 16 : index, threads = 128 : index}
//   CHECK-NOT:   bufferization
//   CHECK-NOT:   fa.attention
// Q tile 16x40, K tile 64 keys with rows padded to 41 floats (bank
// conflicts), V tile 64x40, m and l per row, acc 16x40.
//       CHECK:   %[[QS:.*]] = memref.alloca() {alignment = 16 : i64} : memref<640xf32, 3>
//       CHECK:   %[[KS:.*]] = memref.alloca() {alignment = 16 : i64} : memref<2624xf32, 3>
//       CHECK:   %[[VS:.*]] = memref.alloca() {alignment = 16 : i64} : memref<2560xf32, 3>
//       CHECK:   %[[MS:.*]] = memref.alloca() {alignment = 16 : i64} : memref<16xf32, 3>
//       CHECK:   %[[LS:.*]] = memref.alloca() {alignment = 16 : i64} : memref<16xf32, 3>
//       CHECK:   %[[ACC:.*]] = memref.alloca() {alignment = 16 : i64} : memref<640xf32, 3>
//       CHECK:   scf.forall (%[[QT:.*]], %[[H:.*]], %[[B:.*]]) in (%{{.*}}, 4, %{{.*}}) {
//       CHECK:     %[[HKV:.*]] = arith.divui %[[H]], %c2{{(_[0-9]+)?}}
// Cooperative Q copy over the 128 threads, zero past Nq.
//       CHECK:     scf.forall (%[[T:.*]]) in (128) {
//       CHECK:       scf.for %{{.*}} = %[[T]] to %c640{{(_[0-9]+)?}} step %c128{{(_[0-9]+)?}}
//       CHECK:         memref.load %[[Q]][%[[B]], %[[H]],
//       CHECK:         arith.select
//       CHECK:         memref.store %{{.*}}, %[[QS]]
//       CHECK:     } {mapping = [#gpu.thread<x>]}
// The KV loop: copy K and V (GQA head), then one warp forall.
//       CHECK:     scf.for %[[J:.*]] = %c0{{(_[0-9]+)?}} to %{{.*}} step %c1{{(_[0-9]+)?}} {
//       CHECK:       scf.forall (%{{.*}}) in (128) {
//       CHECK:         memref.load %[[K]][%[[B]], %[[HKV]],
//       CHECK:         memref.store %{{.*}}, %[[KS]]
//       CHECK:         memref.load %[[V]][%[[B]], %[[HKV]],
//       CHECK:         memref.store %{{.*}}, %[[VS]]
//       CHECK:       } {mapping = [#gpu.thread<x>]}
//       CHECK:       scf.forall (%[[W:.*]]) in (4) {
//       CHECK:         %[[LANE:.*]] = vector.step : vector<32xindex>
// Lane-parallel dot products over d, reading K at key * 41 + d.
//       CHECK:         scf.for %{{.*}} iter_args({{.*}}) -> (vector<32xf32>, vector<32xf32>
//       CHECK:           vector.gather %[[KS]]
//       CHECK:           memref.load %[[QS]]
// Row max across the lanes, running max, rescale and row sum in exp2.
//       CHECK:         vector.reduction <maximumf>
//       CHECK:         memref.load %[[MS]]
//       CHECK:         arith.maximumf
//       CHECK:         math.exp2
//       CHECK:         vector.reduction <add>
//       CHECK:         vector.scatter %[[MS]]
//       CHECK:         vector.scatter %[[LS]]
// P V: each lane's p is broadcast by extracting it.
//       CHECK:         vector.gather %[[ACC]]
//       CHECK:         scf.for
//       CHECK:           vector.extract %{{.*}}[%{{.*}}] : f32 from vector<32xf32>
//       CHECK:           vector.gather %[[VS]]
//       CHECK:         vector.scatter %[[ACC]]
//       CHECK:       } {mapping = [#gpu.warp<x>]}
// Epilogue: O = acc / l (0 for an empty row), LSE = ln2 (m + log2 l).
//       CHECK:     scf.forall (%{{.*}}) in (4) {
//       CHECK:       arith.divf
//       CHECK:       vector.scatter %[[O]]
//       CHECK:       math.log2
//       CHECK:       vector.scatter %[[L]]
//       CHECK:     } {mapping = [#gpu.warp<x>]}
//       CHECK:   } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
func.func @kernel(%q: memref<?x4x?x40xf32>, %k: memref<?x2x?x40xf32>, %v: memref<?x2x?x40xf32>,
                  %o: memref<?x4x?x40xf32>, %lse: memref<?x4x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x40xf32> to tensor<?x4x?x40xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x40xf32> to tensor<?x2x?x40xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x40xf32> to tensor<?x2x?x40xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x40xf32> to tensor<?x4x?x40xf32>
  %lt = bufferization.to_tensor %lse restrict writable : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x40xf32>, tensor<?x2x?x40xf32>, tensor<?x2x?x40xf32>)
           outs(%ot : tensor<?x4x?x40xf32>, %lt : tensor<?x4x?xf32>) causal(top_left) -> tensor<?x4x?x40xf32>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x4x?x40xf32>, memref<?x4x?x40xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}

// -----

// Decode (static Nq = 1, Hq = 8, Hkv = 2): pack-gqa=auto packs the four
// query heads of a kv head (one tile per kv head instead of one per query
// head), pack-gqa=never does not.
// CHECK-LABEL: func.func @decode
//  CHECK-SAME:   pack_gqa
//       CHECK:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 2, %{{.*}}) {
func.func @decode(%q: memref<?x8x1x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                  %lens: memref<?xi32>, %o: memref<?x8x1x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x1x64xf16> to tensor<?x8x1x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x1x64xf16> to tensor<?x8x1x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x1x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         kv_lens(%lt : tensor<?xi32>)
         outs(%ot : tensor<?x8x1x64xf16>) causal(bottom_right) -> tensor<?x8x1x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x1x64xf16>, memref<?x8x1x64xf16>) -> ()
  return
}

// -----

// A paged K/V cache ([P, 16, Hkv, D] pages, block table [B, M]): Nk = M x
// 16; causality aligns to the sequence's length (0 without pages); each
// K and V row of a tile is read from page block_table[b, key / 16]
// (clamped to [0, P - 1]) at row key % 16.
// CHECK-LABEL: func.func @paged
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: memref<?x8x?x32xf32>, %[[KC:[a-z0-9]+]]: memref<?x16x2x32xf32>, %[[VC:[a-z0-9]+]]: memref<?x16x2x32xf32>, %[[LENS:[a-z0-9]+]]: memref<?xi32>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>
//       CHECK:   scf.forall (%{{.*}}, %{{.*}}, %[[B:.*]]) in
//       CHECK:     %[[M:.*]] = memref.dim %[[BT]], %c1
//       CHECK:     arith.muli %[[M]], %c16
//       CHECK:     memref.load %[[LENS]][%[[B]]]
//       CHECK:     memref.dim %[[KC]], %c0
//       CHECK:     scf.for
//       CHECK:       scf.forall (%{{.*}}) in (128) {
//       CHECK:         %[[J:.*]] = arith.divui %{{.*}}, %c16
//       CHECK:         %[[E:.*]] = memref.load %[[BT]][%[[B]], %[[J]]]
//       CHECK:         %[[P:.*]] = arith.index_cast %[[E]]
//       CHECK:         arith.maxsi %[[P]]
//       CHECK:         %[[PC:.*]] = arith.minsi
//       CHECK:         %[[R:.*]] = arith.remui %{{.*}}, %c16
//       CHECK:         memref.load %[[KC]][%[[PC]], %[[R]], %{{.*}}, %{{.*}}]
//       CHECK:         memref.load %[[VC]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
func.func @paged(%q: memref<?x8x?x32xf32>, %kc: memref<?x16x2x32xf32>, %vc: memref<?x16x2x32xf32>,
                 %lens: memref<?xi32>, %bt: memref<?x?xi32>, %o: memref<?x8x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x32xf32> to tensor<?x8x?x32xf32>
  %kt = bufferization.to_tensor %kc restrict : memref<?x16x2x32xf32> to tensor<?x16x2x32xf32>
  %vt = bufferization.to_tensor %vc restrict : memref<?x16x2x32xf32> to tensor<?x16x2x32xf32>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %btt = bufferization.to_tensor %bt restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x32xf32> to tensor<?x8x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>)
         kv_lens(%lt : tensor<?xi32>) block_table(%btt : tensor<?x?xi32>)
         outs(%ot : tensor<?x8x?x32xf32>) causal(bottom_right) -> tensor<?x8x?x32xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x?x32xf32>, memref<?x8x?x32xf32>) -> ()
  return
}

// -----

// The token-major varlen form (Q [Tq, Hq, D], K/V [Tk, Hkv, D], offsets
// [B + 1]): the grid is (tiles of Tq, Hq, B = offsets - 1); a block loads
// its sequence's start and length from the offsets and does nothing past
// its rows; Q rows are token start + row, O [Tq, Hq, Dv] likewise, LSE
// [Hq, Tq] at column start + row.
// CHECK-LABEL: func.func @varlen
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: memref<?x8x32xf32>, %[[K:[a-z0-9]+]]: memref<?x2x32xf32>, %[[V:[a-z0-9]+]]: memref<?x2x32xf32>, %[[O:[a-z0-9]+]]: memref<?x8x32xf32>, %[[L:[a-z0-9]+]]: memref<8x?xf32>, %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CK:[a-z0-9]+]]: memref<?xi32>)
//       CHECK:   %[[NB:.*]] = memref.dim %[[CQ]], %c0
//       CHECK:   scf.forall (%[[T:.*]], %[[H:.*]], %[[B:.*]]) in
//       CHECK:     memref.load %[[CQ]][%[[B]]]
//       CHECK:     memref.load %[[CK]][%[[B]]]
//       CHECK:     %[[IN:.*]] = arith.cmpi ult
//       CHECK:     scf.if %[[IN]] {
//       CHECK:       scf.forall (%{{.*}}) in (128) {
//       CHECK:         memref.load %[[Q]][%{{.*}}, %[[H]], %{{.*}}]
//       CHECK:       vector.scatter %[[O]][%{{.*}}, %{{.*}}, %{{.*}}]
//       CHECK:       vector.scatter %[[L]][%{{.*}}, %{{.*}}]
func.func @varlen(%q: memref<?x8x32xf32>, %k: memref<?x2x32xf32>, %v: memref<?x2x32xf32>,
                  %o: memref<?x8x32xf32>, %lse: memref<8x?xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x32xf32> to tensor<?x8x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x32xf32> to tensor<?x2x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x32xf32> to tensor<?x2x32xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x32xf32> to tensor<?x8x32xf32>
  %lt = bufferization.to_tensor %lse restrict writable : memref<8x?xf32> to tensor<8x?xf32>
  %cqt = bufferization.to_tensor %cq restrict : memref<?xi32> to tensor<?xi32>
  %ckt = bufferization.to_tensor %ck restrict : memref<?xi32> to tensor<?xi32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>)
           cu_seqlens(%cqt, %ckt : tensor<?xi32>, tensor<?xi32>)
           outs(%ot : tensor<?x8x32xf32>, %lt : tensor<8x?xf32>) causal(bottom_right) -> tensor<?x8x32xf32>, tensor<8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x32xf32>, memref<?x8x32xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<8x?xf32>, memref<8x?xf32>) -> ()
  return
}

// -----

// Q read from a memref the function allocates, O materialized into one:
// not the kernel form (the kernel replaces the body; this used to crash).
func.func @allocated(%k: memref<1x1x8x8xf32>, %v: memref<1x1x8x8xf32>, %o: memref<1x1x8x8xf32>) {
  %q = memref.alloc() : memref<1x1x8x8xf32>
  %qt = bufferization.to_tensor %q restrict : memref<1x1x8x8xf32> to tensor<1x1x8x8xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x8x8xf32> to tensor<1x1x8x8xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x8x8xf32> to tensor<1x1x8x8xf32>
  %o2 = memref.alloc() : memref<1x1x8x8xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x8x8xf32> to tensor<1x1x8x8xf32>
  // expected-error @+1 {{fa-promote-shared: operands must come from memref arguments through bufferization.to_tensor}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) outs(%ot : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  bufferization.materialize_in_destination %r in writable %o2 : (tensor<1x1x8x8xf32>, memref<1x1x8x8xf32>) -> ()
  return
}

// -----

// Head dims that are not multiples of 8 are a clear error on the GPU path.
func.func @bad_head_dim(%q: memref<1x1x8x20xf32>, %o: memref<1x1x8x20xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x8x20xf32> to tensor<1x1x8x20xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x8x20xf32> to tensor<1x1x8x20xf32>
  // expected-error @+1 {{fa-promote-shared: head dims must be multiples of 8 up to 256 on the GPU path, got D = 20 and Dv = 20}}
  %r = fa.attention ins(%qt, %qt, %qt : tensor<1x1x8x20xf32>, tensor<1x1x8x20xf32>, tensor<1x1x8x20xf32>)
         outs(%ot : tensor<1x1x8x20xf32>) -> tensor<1x1x8x20xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<1x1x8x20xf32>, memref<1x1x8x20xf32>) -> ()
  return
}

// -----

// Head dims above 256 too.
func.func @big_head_dim(%q: memref<1x1x8x264xf16>, %o: memref<1x1x8x264xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x8x264xf16> to tensor<1x1x8x264xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x8x264xf16> to tensor<1x1x8x264xf16>
  // expected-error @+1 {{fa-promote-shared: head dims must be multiples of 8 up to 256 on the GPU path, got D = 264 and Dv = 264}}
  %r = fa.attention ins(%qt, %qt, %qt : tensor<1x1x8x264xf16>, tensor<1x1x8x264xf16>, tensor<1x1x8x264xf16>)
         outs(%ot : tensor<1x1x8x264xf16>) -> tensor<1x1x8x264xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<1x1x8x264xf16>, memref<1x1x8x264xf16>) -> ()
  return
}

// -----

// Tiles that do not fit in workgroup memory are a clear error.
func.func @too_big(%q: memref<1x1x8x256xf32>, %o: memref<1x1x8x256xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x8x256xf32> to tensor<1x1x8x256xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x8x256xf32> to tensor<1x1x8x256xf32>
  // expected-error @+1 {{fa-promote-shared: no tile sizes fit}}
  %r = fa.attention ins(%qt, %qt, %qt : tensor<1x1x8x256xf32>, tensor<1x1x8x256xf32>, tensor<1x1x8x256xf32>)
         outs(%ot : tensor<1x1x8x256xf32>) -> tensor<1x1x8x256xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<1x1x8x256xf32>, memref<1x1x8x256xf32>) -> ()
  return
}

// -----

// fa.attention on tensors that do not come from memref arguments is not a
// kernel function.
func.func @not_a_kernel(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{fa-promote-shared: operands must come from memref arguments through bufferization.to_tensor}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
         outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

// An i1 memref mask is a keep mask: each lane gathers its i1 element and
// ands it into the keep predicate (it was once treated as additive and
// extended to float, which does not verify).
// CHECK-LABEL: func.func @i1_memref_mask
//       CHECK:   %[[KEEP:.*]] = vector.gather %{{.*}} : memref<?x2x?x?xi1>, vector<32xindex>, vector<32xi1>, vector<32xi1> into vector<32xi1>
//       CHECK:   arith.andi %{{.*}}, %[[KEEP]] : vector<32xi1>
//   CHECK-NOT:   arith.extf %{{.*}} : vector<32xi1>
func.func @i1_memref_mask(%q: memref<?x2x?x16xf32>, %k: memref<?x2x?x16xf32>, %v: memref<?x2x?x16xf32>, %m: memref<?x2x?x?xi1>, %o: memref<?x2x?x16xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %mt = bufferization.to_tensor %m restrict : memref<?x2x?x?xi1> to tensor<?x2x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) mask(%mt : tensor<?x2x?x?xi1>) outs(%ot : tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x16xf32>, memref<?x2x?x16xf32>) -> ()
  return
}

// -----

// The score/mask modifiers: the key loop starts at the tile holding the
// window's left bound of the block's first row (rounded down to block-kv)
// and runs over the tiles up to kv_end; the head's ALiBi slope is loaded
// once per block; per row, the key lanes' segment ids are gathered against
// the row's; the softcap's tanh on the lane vectors is a rational
// approximation (math.fma, no math.tanh).
// CHECK-LABEL: func.func @modifiers
//  CHECK-SAME:   %[[AL:[a-z0-9]+]]: memref<4xf32>, %[[QS:[a-z0-9]+]]: memref<?x?xi32>, %[[KS:[a-z0-9]+]]: memref<?x?xi32>
//       CHECK:   scf.forall (%{{.*}}, %[[H:.*]], %{{.*}}) in
//       CHECK:     %[[LEFT:.*]] = arith.subi %{{.*}}, %c100 : index
//       CHECK:     %[[FIRST:.*]] = arith.maxsi %{{.*}}, %[[LEFT]]
//       CHECK:     %[[T:.*]] = arith.divui %[[FIRST]], %{{.*}} : index
//       CHECK:     %[[BEGIN:.*]] = arith.muli %[[T]], %{{.*}} : index
//       CHECK:     memref.load %[[AL]][%[[H]]] : memref<4xf32>
//       CHECK:     scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %c1 {
//  CHECK-NEXT:       %[[BKV:.*]] = arith.constant 64 : index
//  CHECK-NEXT:       %[[J0:.*]] = arith.muli %[[J]], %[[BKV]] : index
//  CHECK-NEXT:       arith.addi %[[BEGIN]], %[[J0]] : index
//   CHECK-NOT:       math.tanh
//       CHECK:       math.fma {{.*}} : vector<32xf32>
//       CHECK:       memref.load %[[QS]]
//       CHECK:       vector.gather %[[KS]]
//   CHECK-NOT:   math.tanh
func.func @modifiers(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %al: memref<4xf32>, %qs: memref<?x?xi32>, %ks: memref<?x?xi32>, %o: memref<?x4x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %alt = bufferization.to_tensor %al restrict : memref<4xf32> to tensor<4xf32>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         alibi(%alt : tensor<4xf32>) segments(%qst, %kst : tensor<?x?xi32>, tensor<?x?xi32>)
         outs(%ot : tensor<?x4x?x64xf16>) causal(bottom_right) window(100, 0) softcap(3.0e+01) -> tensor<?x4x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  return
}

// -----

// A q_offset computed in the function cannot reach the kernel.
func.func @q_offset_computed(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %o: memref<?x2x?x64xf16>) {
  %c2 = arith.constant 2 : index
  %p = memref.dim %q, %c2 : memref<?x2x?x64xf16>
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  // expected-error @+1 {{fa-promote-shared: the q_offset must be a function argument or a constant in the kernel form}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         q_offset(%p) outs(%ot : tensor<?x2x?x64xf16>) causal(top_left) -> tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// The regions' operands must reach the kernel as function arguments.
func.func @regions(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %m = memref.alloc() : memref<4xf32>
  %mt = bufferization.to_tensor %m restrict : memref<4xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  // expected-error @+1 {{fa-promote-shared: the mod_operands must be read from function arguments in the kernel form}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) mod_operands(%mt : tensor<4xf32>) outs(%e : tensor<1x2x64x64xf16>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %t: tensor<4xf32>):
    %x = tensor.extract %t[%h] : tensor<4xf32>
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  } -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}

// -----

// The regions may capture constants (cloned into the kernel), nothing else.
func.func @captures(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>, %x: f32) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  // expected-error @+1 {{fa-promote-shared: its score_mod / mask_mod reads a value from outside the region that is not a constant; pass it as a mod_operands tensor}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) outs(%e : tensor<1x2x64x64xf16>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  } -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}

// -----

// A mask_mod's block mask: per key tile, its entry decides whether the tile
// is copied and computed.
// CHECK-LABEL: func.func @doc_block_mask
//       CHECK:   scf.for
//       CHECK:     %[[E:.*]] = memref.load %arg5[{{.*}}] : memref<?x1x?x?xi8>
//       CHECK:     %[[V:.*]] = arith.cmpi ne, %[[E]]
//       CHECK:     scf.if %[[V]] {
//       CHECK:       scf.forall
func.func @doc_block_mask(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %qs: memref<?x?xi32>, %ks: memref<?x?xi32>, %bm: memref<?x1x?x?xi8>, %o: memref<?x4x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %bmt = bufferization.to_tensor %bm restrict : memref<?x1x?x?xi8> to tensor<?x1x?x?xi8>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         block_mask(%bmt : tensor<?x1x?x?xi8>)
         outs(%ot : tensor<?x4x?x64xf16>) block_tiles(128, 64) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %c3 = arith.constant 3 : index
    %z = arith.constant 0 : index
    %m = arith.remui %ki, %c3 : index
    %keep = arith.cmpi ne, %m, %z : index
    fa.yield %keep : i1
  } -> tensor<?x4x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  return
}

// -----

// A kernel function holds one fa.attention: two are a clear error on the
// function, both ops kept.
// expected-error @+1 {{fa-promote-shared: expected one fa.attention per kernel function, found 2}}
func.func @two_ops(%q: tensor<1x1x8x8xf32>, %o: tensor<1x1x8x8xf32>) -> (tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) {
  %a = fa.attention ins(%q, %q, %q : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) outs(%o : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %b = fa.attention ins(%a, %q, %q : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) outs(%o : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return %a, %b : tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>
}
