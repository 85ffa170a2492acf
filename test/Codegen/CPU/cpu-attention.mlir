// RUN: fa-opt %s -split-input-file -fa-cpu-attention="decode-tiles=false block-q=64 block-kv=64" -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="decode-tiles=false parallel=true block-q=64 block-kv=64" -verify-diagnostics | FileCheck %s --check-prefix=PAR
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="decode-tiles=false vector-width=8 block-q=32 block-kv=64 key-rows=3 pv-rows=4 pv-vectors=2" -verify-diagnostics | FileCheck %s --check-prefix=AVX2
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="block-q=64 block-kv=64" -verify-diagnostics | FileCheck %s --check-prefix=DECODE
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="block-q=64 block-kv=64 kv-splits=3" -verify-diagnostics | FileCheck %s --check-prefix=SPLIT
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="decode-tiles=false block-q=64 block-kv=64 bf16-dot=true" -verify-diagnostics | FileCheck %s --check-prefix=BF16

// A kernel function with f16 inputs, GQA (Hq = 4, Hkv = 2), key lengths, a
// boolean mask (i8 bytes, as fa-run passes it), bottom-right causality,
// Dv = 24 != D = 40 and LSE. The tensor-level body disappears; f32 scratch
// buffers (64-byte aligned) are allocated once before the loop: Q^T
// (D x block-q), the K tile (key rows rounded up to key-rows = 6, D padded
// to 48), the V tile (Dv padded to 32), S^T (keys x queries), the mask
// tile, the O accumulator and m, l, alpha per query.
// CHECK-LABEL: func.func @kernel
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: memref<?x4x?x40xf16>, %[[K:[a-z0-9]+]]: memref<?x2x?x40xf16>, %[[V:[a-z0-9]+]]: memref<?x2x?x24xf16>, %[[LENS:[a-z0-9]+]]: memref<?xi32>, %[[MASK:[a-z0-9]+]]: memref<1x1x?x?xi8>, %[[O:[a-z0-9]+]]: memref<?x4x?x24xf16>, %[[LSE:[a-z0-9]+]]: memref<?x4x?xf32>)
//   CHECK-NOT:   fa.attention
//   CHECK-NOT:   bufferization.
//       CHECK:   %[[QT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<40x64xf32>
//       CHECK:   %[[KP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<66x48xf32>
//       CHECK:   %[[VP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//       CHECK:   %[[ST:.*]] = memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
//       CHECK:   %[[MT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//       CHECK:   %[[ACC:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//       CHECK:   %[[M:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//       CHECK:   %[[L:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//       CHECK:   %[[A:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//       CHECK:   scf.forall (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) in (%{{.*}}, 4, %{{.*}}) {
//   CHECK-NOT:     memref.alloca
//       CHECK:     %[[HKV:.*]] = arith.divui %[[H]], %c2
// Key lengths and causality bound the key loop (kv_end).
//       CHECK:     memref.load %[[LENS]][%[[B]]]
//       CHECK:     arith.minsi
//       CHECK:     %[[KVEND:.*]] = arith.minsi
// Q^T, scaled, converted to f32.
//       CHECK:     memref.load %[[Q]][%[[B]], %[[H]],
//       CHECK:     arith.extf %{{.*}} : f16 to f32
//       CHECK:     memref.store %{{.*}}, %[[QT]][
//       CHECK:     %[[NKV:.*]] = arith.ceildivui %[[KVEND]], %c64
//       CHECK:     scf.for %{{.*}} = %{{.*}} to %[[NKV]]
// The K and V tiles: vector reads (masked past D), converted to f32.
//       CHECK:       vector.transfer_read %[[K]][%[[B]], %[[HKV]], %{{.*}}, %c0{{.*}}]{{.*}}in_bounds = [true]{{.*}} : memref<?x2x?x40xf16>, vector<16xf16>
//       CHECK:       arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
//       CHECK:       vector.store %{{.*}}, %[[KP]]
//       CHECK:       vector.transfer_read %[[K]][%[[B]], %[[HKV]], %{{.*}}, %c32{{[_0-9]*}}], %{{[a-z0-9_]+}} : memref<?x2x?x40xf16>, vector<16xf16>
//       CHECK:       vector.transfer_read %[[V]][%[[B]], %[[HKV]], %{{.*}}, %c16{{[_0-9]*}}], %{{[a-z0-9_]+}} : memref<?x2x?x24xf16>, vector<16xf16>
//       CHECK:       vector.store %{{.*}}, %[[VP]]
// The mask tile, transposed: false -> -inf.
//       CHECK:       memref.load %[[MASK]][%c0{{.*}}, %c0{{.*}}, %{{.*}}, %{{.*}}] : memref<1x1x?x?xi8>
//       CHECK:       arith.cmpi ne
//       CHECK:       memref.store %{{.*}}, %[[MT]]
// S^T micro-kernel: 6 keys x 4 query vectors in iter_args over d.
//       CHECK:       scf.for %[[D:.*]] = %{{.*}} to %c40{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK:         %[[QV:.*]] = vector.load %[[QT]][%[[D]], %c0{{.*}}] : memref<40x64xf32>, vector<16xf32>
//       CHECK:         %[[KX:.*]] = memref.load %[[KP]][%{{.*}}, %[[D]]]
//       CHECK:         %[[KB:.*]] = vector.broadcast %[[KX]] : f32 to vector<16xf32>
//       CHECK:         vector.fma %[[KB]], %[[QV]], %{{.*}} : vector<16xf32>
// 24 FMAs per step.
// CHECK-COUNT-23:      vector.fma
//       CHECK:         scf.yield
//       CHECK:       vector.store %{{.*}}, %[[ST]]
// Softmax sweep 1: mask, causal per lane (vector.step), running max.
//       CHECK:       scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK:         vector.load %[[MT]]
//       CHECK:         arith.cmpf oeq
//       CHECK:         arith.select
//       CHECK:         vector.step : vector<16xindex>
//       CHECK:         arith.cmpi sge
//       CHECK:         arith.select
//       CHECK:         vector.store %{{.*}}, %[[ST]]
// The running max as s > max ? s : max (one vmaxps; a NaN score reaches
// the row through exp, not through the max).
//   CHECK-NOT:         arith.maximumf
//       CHECK:         %[[GT:.*]] = arith.cmpf ogt, %[[S:.*]], %[[MX:.*]] : vector<16xf32>
//       CHECK:         arith.select %[[GT]], %[[S]], %[[MX]]
// m_new, the -inf guard, alpha = exp(m_old - m_use) as a polynomial.
//       CHECK:       vector.load %[[M]]
//       CHECK:       arith.maximumf
//       CHECK:       arith.cmpf oeq
//       CHECK:       arith.select
//       CHECK:       arith.subf
//       CHECK:       arith.mulf {{.*}} fastmath<contract>
//       CHECK:       arith.bitcast %{{.*}} : vector<16xf32> to vector<16xi32>
//       CHECK:       arith.shli
//       CHECK:       arith.bitcast %{{.*}} : vector<16xi32> to vector<16xf32>
//       CHECK:       vector.store %{{.*}}, %[[A]]
// Sweep 2: P = exp(S - m) in place and its sum.
//       CHECK:       scf.for
//       CHECK:         arith.shli
//       CHECK:         vector.store %{{.*}}, %[[ST]]
//       CHECK:         arith.addf
// l = alpha * l + sum.
//       CHECK:       vector.load %[[L]]
//       CHECK:       vector.fma
//       CHECK:       vector.store %{{.*}}, %[[L]]
// P V micro-kernel: accumulators rescaled by alpha, then per key a
// broadcast of P and FMAs with the V row; masked keys (p == 0) skipped.
//       CHECK:       memref.load %[[A]]
//       CHECK:       vector.load %[[ACC]]
//       CHECK:       arith.mulf
//       CHECK:       scf.for {{.*}} iter_args(
//       CHECK:         vector.load %[[VP]]
//       CHECK:         memref.load %[[ST]]
//       CHECK:         arith.cmpf oeq
//       CHECK:         vector.fma
//       CHECK:         arith.select
//       CHECK:       vector.store %{{.*}}, %[[ACC]]
// Epilogue: O = acc / l (0 when l == 0) as f16, LSE = m + log(l) (-inf).
//       CHECK:     scf.for
//       CHECK:       memref.load %[[L]]
//       CHECK:       arith.cmpf oeq
//       CHECK:       arith.divf
//       CHECK:       vector.load %[[ACC]]
//       CHECK:       arith.select
//       CHECK:       arith.truncf %{{.*}} : vector<16xf32> to vector<16xf16>
//       CHECK:       vector.transfer_write %{{.*}}, %[[O]][%[[B]], %[[H]], %{{.*}}, %c0{{[_0-9]*}}] {in_bounds = [true]} : vector<16xf16>, memref<?x4x?x24xf16>
//       CHECK:       vector.transfer_write %{{.*}}, %[[O]][%[[B]], %[[H]], %{{.*}}, %c16{{[_0-9]*}}] : vector<16xf16>, memref<?x4x?x24xf16>
//       CHECK:       math.log
//       CHECK:       memref.store %{{.*}}, %[[LSE]][%[[B]], %[[H]], %{{.*}}]

// parallel=true: the scratch buffers are allocated in the loop body (one
// set per OpenMP iteration).
// PAR-LABEL: func.func @kernel
//   PAR-NOT:   memref.alloca
//       PAR:   scf.forall
//       PAR:     memref.alloca() {alignment = 64 : i64} : memref<40x64xf32>

// bf16-dot leaves f16 (and f32) inputs on the f32 kernel.
// BF16-LABEL: func.func @kernel
//   BF16-NOT:   x86vector
//       BF16:   vector.fma
//   BF16-NOT:   x86vector
// BF16-LABEL: func.func @plain

// AVX2 configuration: 8 lanes, 3 keys x 4 query vectors, P V with 4 rows x
// 2 vectors (Dv = 24 is 3 vectors: a group of 2 and a group of 1).
// AVX2-LABEL: func.func @kernel
//       AVX2:   memref.alloca() {alignment = 64 : i64} : memref<40x32xf32>
//       AVX2:   memref.alloca() {alignment = 64 : i64} : memref<66x40xf32>
//       AVX2:   scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
//       AVX2:   scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
//       AVX2:   scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
func.func @kernel(%q: memref<?x4x?x40xf16>, %k: memref<?x2x?x40xf16>, %v: memref<?x2x?x24xf16>,
                  %lens: memref<?xi32>, %mask: memref<1x1x?x?xi8>,
                  %o: memref<?x4x?x24xf16>, %lse: memref<?x4x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x40xf16> to tensor<?x4x?x40xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x40xf16> to tensor<?x2x?x40xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x24xf16> to tensor<?x2x?x24xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %mt = bufferization.to_tensor %mask restrict : memref<1x1x?x?xi8> to tensor<1x1x?x?xi8>
  %c0 = arith.constant 0 : i8
  %i2 = arith.constant 2 : index
  %i3 = arith.constant 3 : index
  %n2 = tensor.dim %mt, %i2 : tensor<1x1x?x?xi8>
  %n3 = tensor.dim %mt, %i3 : tensor<1x1x?x?xi8>
  %e = tensor.empty(%n2, %n3) : tensor<1x1x?x?xi1>
  %mb = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%mt : tensor<1x1x?x?xi8>) outs(%e : tensor<1x1x?x?xi1>) {
  ^bb0(%x: i8, %y: i1):
    %t = arith.cmpi ne, %x, %c0 : i8
    linalg.yield %t : i1
  } -> tensor<1x1x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x24xf16> to tensor<?x4x?x24xf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x40xf16>, tensor<?x2x?x40xf16>, tensor<?x2x?x24xf16>)
           kv_lens(%lt : tensor<?xi32>) mask(%mb : tensor<1x1x?x?xi1>)
           outs(%ot : tensor<?x4x?x24xf16>, %st : tensor<?x4x?xf32>) causal(bottom_right)
           -> tensor<?x4x?x24xf16>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<?x4x?x24xf16>, memref<?x4x?x24xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}

// -----

// f32 without masks or causality: K and V are read in place (no K/V
// tiles; K rows of the last register block clamped to the last key), no
// mask tile, no guard on the P V products, no lane comparisons; outputs
// written without conversion.
// CHECK-LABEL: func.func @plain
//  CHECK-SAME:   (%{{[a-z0-9]+}}: memref<1x2x?x32xf32>, %[[K:[a-z0-9]+]]: memref<1x2x?x32xf32>, %[[V:[a-z0-9]+]]: memref<1x2x?x32xf32>,
//       CHECK:   memref.alloca() {alignment = 64 : i64} : memref<32x64xf32>
//       CHECK:   memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
//       CHECK:   memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//       CHECK:   memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//       CHECK:   scf.forall
//   CHECK-NOT:   vector.step
//   CHECK-NOT:   arith.truncf
// Each register block of keys first prefetches into L2 every 64-byte line
// of the K rows 64 keys ahead (clamped to the last key); V is not
// prefetched.
//       CHECK:       %[[AHEAD:.*]] = arith.addi %{{.*}}, %c64{{.*}} : index
//  CHECK-NEXT:       %[[ROW:.*]] = arith.minsi %[[AHEAD]], %{{.*}} : index
//  CHECK-NEXT:       arith.constant 0 : index
//  CHECK-NEXT:       memref.prefetch %[[K]][%{{.*}}, %{{.*}}, %[[ROW]], %c0{{.*}}], read, locality<2>, data
//  CHECK-NEXT:       arith.constant 16 : index
//  CHECK-NEXT:       memref.prefetch %[[K]][%{{.*}}, %{{.*}}, %[[ROW]], %c16{{.*}}], read, locality<2>, data
//   CHECK-NOT:       memref.prefetch %[[V]]
//       CHECK:     arith.minsi
//       CHECK:     scf.for {{.*}} -> (vector<16xf32>
//       CHECK:       memref.load %[[K]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x2x?x32xf32>
//       CHECK:     scf.for {{.*}} -> (vector<16xf32>
//       CHECK:       vector.load %[[V]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x2x?x32xf32>, vector<16xf32>
//   CHECK-NOT:       arith.select
//       CHECK:       scf.yield
//       CHECK:   vector.transfer_write %{{.*}} {in_bounds = [true]} : vector<16xf32>, memref<1x2x?x32xf32>
// Without causality the query tiles keep their order under parallel=true.
// PAR-LABEL: func.func @plain
//   PAR-NOT:   arith.remui
func.func @plain(%q: memref<1x2x?x32xf32>, %k: memref<1x2x?x32xf32>, %v: memref<1x2x?x32xf32>, %o: memref<1x2x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
           outs(%ot : tensor<1x2x?x32xf32>) -> tensor<1x2x?x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x?x32xf32>, memref<1x2x?x32xf32>) -> ()
  return
}

// -----

// Not in kernel form (tensor arguments): left for fa-tile-attention.
// CHECK-LABEL: func.func @tensors
//       CHECK:   fa.attention
// PAR-LABEL: func.func @tensors
// AVX2-LABEL: func.func @tensors
func.func @tensors(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
           outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

// Causality without a mask: only the key tiles that cross the diagonal
// (last key of the tile past the first query row's last key, i.e.
// k0 + cols - 1 - q0 - (Nk - Nq) > 0) run the P V micro-kernel that skips
// p == 0 keys (so NaN/inf in excluded V rows cannot leak); full tiles run
// the unguarded one.
// CHECK-LABEL: func.func @causal
//       CHECK:   scf.forall
//       CHECK:     arith.cmpi sgt
//       CHECK:     scf.if
//       CHECK:       scf.for {{.*}} -> (vector<16xf32>
//       CHECK:         arith.cmpf oeq
//       CHECK:         vector.fma
//       CHECK:         arith.select
//       CHECK:     } else {
//       CHECK:       scf.for {{.*}} -> (vector<16xf32>
//   CHECK-NOT:         arith.select
//       CHECK:         scf.yield
// With parallel=true, iteration t of the forall takes query tile t / 2
// when t is even and T - 1 - t / 2 when odd, so that the contiguous chunks
// of a static OpenMP schedule pair light and heavy causal tiles.
// PAR-LABEL: func.func @causal
//       PAR:   %[[T:.*]] = arith.ceildivui %{{.*}}, %c64
//       PAR:   scf.forall (%{{.*}}, %{{.*}}, %[[IT:.*]]) in (%{{.*}}, 2, %[[T]]) {
//       PAR:     %[[HALF:.*]] = arith.divui %[[IT]], %c2
//       PAR:     %[[REM:.*]] = arith.remui %[[IT]], %c2
//       PAR:     %[[REMI:.*]] = arith.index_castui %[[REM]] : index to i64
//       PAR:     %[[ODD:.*]] = arith.trunci %[[REMI]] : i64 to i1
//       PAR:     %[[LAST:.*]] = arith.subi %[[T]], %c1
//       PAR:     %[[MIRROR:.*]] = arith.subi %[[LAST]], %[[HALF]]
//       PAR:     %[[TILE:.*]] = arith.select %[[ODD]], %[[MIRROR]], %[[HALF]]
//       PAR:     arith.muli %[[TILE]], %c64
func.func @causal(%q: memref<1x2x?x32xf32>, %k: memref<1x2x?x32xf32>, %v: memref<1x2x?x32xf32>, %o: memref<1x2x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
           outs(%ot : tensor<1x2x?x32xf32>) causal(bottom_right) -> tensor<1x2x?x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x?x32xf32>, memref<1x2x?x32xf32>) -> ()
  return
}

// -----

// Score and mask modifiers: a window with bottom-right causality, a
// softcap and ALiBi slopes per head. Per tile: the head's slope, the
// query positions of each vector of lanes, and the key range [begin, end)
// from the window (begin = max(q0 + off - 32, 0)); the key tiles start at
// begin. A tile that needs no element mask (every key kept for every row)
// takes the else branch: the score modifiers, no key masks, and the
// unguarded P V. The softcap's tanh is a rational approximation.
// With decode tiles (the default), a dynamic Nq gets the decode kernel
// behind Nq x G <= 16 (G = 2 query heads per kv head): its forall runs over
// the kv heads, each lane's query is row / G and its head
// kv_head x G + row % G, the slopes are gathered per lane; the general
// kernel (over the query heads) is the else branch.
// DECODE-LABEL: func.func @modifiers
//  DECODE-SAME:   %[[Q:[a-z0-9]+]]: memref<1x4x?x32xf32>
//  DECODE-SAME:   %[[AL:[a-z0-9]+]]: memref<4xf32>
//       DECODE:   %[[NQ:.*]] = memref.dim %[[Q]], %{{.*}} : memref<1x4x?x32xf32>
//       DECODE:   %[[ROWS:.*]] = arith.muli %[[NQ]], %c2
//       DECODE:   %[[FITS:.*]] = arith.cmpi ule, %[[ROWS]], %c16
//       DECODE:   scf.if %[[FITS]] {
//       DECODE:     scf.forall (%{{.*}}, %[[KVH:.*]], %{{.*}}) in (%{{.*}}, 2, %{{.*}})
//       DECODE:       %[[LANES:.*]] = arith.addi %{{.*}} : vector<16xindex>
//       DECODE:       arith.divui %[[LANES]], %{{.*}} : vector<16xindex>
//       DECODE:       %[[INGROUP:.*]] = arith.remui %[[LANES]], %{{.*}} : vector<16xindex>
//       DECODE:       %[[HEADS:.*]] = arith.addi %[[INGROUP]], %{{.*}} : vector<16xindex>
//       DECODE:       vector.gather %[[AL]][%{{.*}}] [%[[HEADS]]]
//       DECODE:   } else {
//       DECODE:     scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 4, %{{.*}})
//       DECODE:   return
// CHECK-LABEL: func.func @modifiers
//  CHECK-SAME:   %[[AL:[a-z0-9]+]]: memref<4xf32>
//   CHECK-NOT:   math.tanh
//       CHECK:   scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
//       CHECK:     %[[BEGIN:.*]] = arith.maxsi
//       CHECK:     memref.load %[[AL]][%[[H]]] : memref<4xf32>
//       CHECK:     vector.step
//       CHECK:     scf.for %[[J:.*]] =
//       CHECK:       %[[K0:.*]] = arith.addi %[[BEGIN]],
//       CHECK:       %{{.*}}:4 = scf.if %[[NEED:[a-z0-9_]+]] -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       CHECK:         arith.cmpi sge, %{{.*}} : vector<16xindex>
//       CHECK:         arith.select
//       CHECK:       } else {
//   CHECK-NOT:         arith.cmpi sge
//       CHECK:         arith.cmpf ogt
//       CHECK:       scf.if %[[NEED]] {
//   CHECK-NOT:   math.tanh
//       CHECK:   return
func.func @modifiers(%q: memref<1x4x?x32xf32>, %k: memref<1x2x?x32xf32>, %v: memref<1x2x?x32xf32>, %al: memref<4xf32>, %o: memref<1x4x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x4x?x32xf32> to tensor<1x4x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %alt = bufferization.to_tensor %al restrict : memref<4xf32> to tensor<4xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x4x?x32xf32> to tensor<1x4x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x4x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
           alibi(%alt : tensor<4xf32>)
           outs(%ot : tensor<1x4x?x32xf32>) causal(bottom_right) window(32, 0) softcap(3.0e+01) -> tensor<1x4x?x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x4x?x32xf32>, memref<1x4x?x32xf32>) -> ()
  return
}

// -----

// Segment ids: the query ids of each vector of lanes are read once per
// tile, and their range [min, max] (masked past the rows); per key tile the
// range of its ids decides whether the tile is visited at all (the ranges
// overlap) and whether it needs element masks (not all four bounds one
// id). Masked tiles read the key id once per key and guard P V.
// CHECK-LABEL: func.func @segments
//  CHECK-SAME:   %[[QS:[a-z0-9]+]]: memref<2x?xi32>, %[[KS:[a-z0-9]+]]: memref<2x?xi32>
//       CHECK:   scf.forall (%[[B:.*]], %{{.*}}, %{{.*}}) in
//       CHECK:     vector.transfer_read %[[QS]][%[[B]], %{{.*}}], %{{.*}} : memref<2x?xi32>, vector<16xi32>
//       CHECK:     %[[QMIN:.*]] = vector.reduction <minsi>
//       CHECK:     %[[QMAX:.*]] = vector.reduction <maxsi>
//       CHECK:     scf.for
//       CHECK:       vector.transfer_read %[[KS]][%[[B]], %{{.*}}], %{{.*}} : memref<2x?xi32>, vector<16xi32>
//       CHECK:       %[[KMIN:.*]] = vector.reduction <minsi>
//       CHECK:       %[[KMAX:.*]] = vector.reduction <maxsi>
//   CHECK-DAG:       %[[BELOW:.*]] = arith.cmpi slt, %[[KMAX]], %[[QMIN]] : i32
//   CHECK-DAG:       %[[ABOVE:.*]] = arith.cmpi sgt, %[[KMIN]], %[[QMAX]] : i32
//       CHECK:       %[[DISJOINT:.*]] = arith.ori %[[BELOW]], %[[ABOVE]]
//       CHECK:       %[[VISIT:.*]] = arith.xori %[[DISJOINT]]
//       CHECK:       scf.if %[[VISIT]] {
//   CHECK-DAG:         arith.cmpi ne, %[[QMIN]], %[[QMAX]] : i32
//   CHECK-DAG:         arith.cmpi ne, %[[KMIN]], %[[KMAX]] : i32
//   CHECK-DAG:         arith.cmpi ne, %[[QMIN]], %[[KMIN]] : i32
//       CHECK:         vector.fma
//       CHECK:         scf.if %{{.*}} -> (vector<16xf32>
//       CHECK:           memref.load %[[KS]][%[[B]],
//       CHECK:           arith.cmpi eq, %{{.*}} : vector<16xi32>
//       CHECK:         } else {
func.func @segments(%q: memref<2x2x?x32xf32>, %k: memref<2x2x?x32xf32>, %v: memref<2x2x?x32xf32>, %qs: memref<2x?xi32>, %ks: memref<2x?xi32>, %o: memref<2x2x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x2x?x32xf32> to tensor<2x2x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x?x32xf32> to tensor<2x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x?x32xf32> to tensor<2x2x?x32xf32>
  %qst = bufferization.to_tensor %qs restrict : memref<2x?xi32> to tensor<2x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<2x?xi32> to tensor<2x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x2x?x32xf32> to tensor<2x2x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<2x2x?x32xf32>, tensor<2x2x?x32xf32>, tensor<2x2x?x32xf32>)
           segments(%qst, %kst : tensor<2x?xi32>, tensor<2x?xi32>)
           outs(%ot : tensor<2x2x?x32xf32>) -> tensor<2x2x?x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x2x?x32xf32>, memref<2x2x?x32xf32>) -> ()
  return
}

// -----

// score_mod / mask_mod regions in the kernel form: inlined per key row on
// the query lanes (q a vector of positions, k a scalar), the mod_operands
// read from their memrefs; the table read at a per-lane index (its last)
// is a vector.gather. Every key tile takes the element-mask path.
// CHECK-LABEL: func.func @regions
//  CHECK-SAME:   %[[T:[a-z0-9]+]]: memref<2x127xf32>
//       CHECK:   vector.gather %[[T]][%{{.*}}, %{{.*}}] [%{{.*}}], %{{.*}}, %{{.*}} : memref<2x127xf32>, vector<16xindex>, vector<16xi1>, vector<16xf32> into vector<16xf32>
//       CHECK:   arith.remui %{{.*}} : index
//   CHECK-NOT:   fa.attention
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

// -----

// A static Nq whose Nq x G rows fit one decode tile (1 x 4 <= 16) gets the
// decode kernel alone: the forall over (batch, kv head, tile); the scores
// as dot products, two keys at a time: their K rows read in place (two
// vectors of D = 32 each), then per query row two FMA chains per key
// added and summed across lanes; Q and O rows at (row % G + kv_head x G,
// row / G).
// DECODE-LABEL: func.func @decode_static
//   DECODE-NOT:   scf.if
//       DECODE:   scf.forall (%[[B:.*]], %[[KVH:.*]], %{{.*}}) in (%{{.*}}, 2, %{{.*}})
//       DECODE:     %[[PAIRS:.*]] = arith.ceildivui %{{.*}}, %c2
//       DECODE:     scf.for %{{.*}} = %{{.*}} to %[[PAIRS]]
//       DECODE:       vector.transfer_read %{{.*}}[%[[B]], %[[KVH]], %[[K0:.*]], %c0{{.*}}]{{.*}} : memref<1x2x?x32xf32>, vector<16xf32>
//       DECODE:       vector.transfer_read %{{.*}}[%[[B]], %[[KVH]], %[[K0]], %c16{{.*}}]{{.*}} : memref<1x2x?x32xf32>, vector<16xf32>
//       DECODE:       vector.transfer_read %{{.*}}[%[[B]], %[[KVH]], %[[K1:.*]], %c0{{.*}}]
//   DECODE-NOT:   memref.prefetch
//       DECODE:       scf.for
//       DECODE:         vector.fma
//       DECODE:         arith.addf %{{.*}} : vector<16xf32>
//       DECODE:         vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
//       DECODE:         vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
//       DECODE:     %[[QROW:.*]] = arith.divui %{{.*}}, %c4{{.*}}
//       DECODE:     %[[HG:.*]] = arith.remui %{{.*}}, %c4{{.*}}
//       DECODE:     %[[H:.*]] = arith.addi %[[HG]], %{{.*}}
//       DECODE:     vector.transfer_write %{{.*}}, %{{.*}}[%[[B]], %[[H]], %[[QROW]], %{{.*}}]
// Contiguous caches are not prefetched (the hardware prefetcher follows
// them; software prefetches only cost issue slots).
//   DECODE-NOT:   memref.prefetch
//       DECODE:   return
// Split-KV (kv-splits=3): min(3, key tiles of Nk) splits, the workspace
// of partial results, the forall's fourth dim over the splits, the
// partials written at [split, ...], and fa.merge lowered to linalg into
// the output.
// SPLIT-LABEL: func.func @decode_static
//       SPLIT:   %[[N:.*]] = arith.minui %c3, %{{.*}} : index
//       SPLIT:   %[[WO:.*]] = memref.alloc(%[[N]], {{.*}}) {alignment = 64 : i64} : memref<?x?x8x?x32xf32>
//       SPLIT:   %[[WL:.*]] = memref.alloc(%[[N]], {{.*}}) {alignment = 64 : i64} : memref<?x?x8x?xf32>
//       SPLIT:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}, %[[S:.*]]) in (%{{.*}}, 2, %{{.*}}, %[[N]])
//       SPLIT:     vector.transfer_write %{{.*}}, %[[WO]][%[[S]],
//       SPLIT:     memref.store %{{.*}}, %[[WL]][%[[S]],
//       SPLIT:   bufferization.to_tensor %[[WO]]
//       SPLIT:   linalg.generic
//       SPLIT:   bufferization.materialize_in_destination
// CHECK-LABEL: func.func @decode_static
//       CHECK:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 8, %{{.*}})
func.func @decode_static(%q: memref<1x8x1x32xf32>, %k: memref<1x2x?x32xf32>, %v: memref<1x2x?x32xf32>, %o: memref<1x8x1x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x8x1x32xf32> to tensor<1x8x1x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x32xf32> to tensor<1x2x?x32xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x8x1x32xf32> to tensor<1x8x1x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x8x1x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
           outs(%ot : tensor<1x8x1x32xf32>) causal(bottom_right) -> tensor<1x8x1x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x8x1x32xf32>, memref<1x8x1x32xf32>) -> ()
  return
}

// -----

// A paged cache (block_table): Nk = M x 16; the causal alignment uses the
// sequence's own length (0 when there are no pages). The decode tile holds
// the rows of both kv heads (a row state per head: Q, accumulator, max,
// sum); each key tile's K and V rows of all kv heads are first copied, in
// the pages' order, from (page, row of the page, kv head) with the page
// block_table[b, key / 16] clamped to [0, P - 1] into a [64, 2, 32] stage,
// then visited head by head from the stage.
// DECODE-LABEL: func.func @paged
//  DECODE-SAME:   %[[KC:[a-z0-9]+]]: memref<?x16x2x32xf32>, %[[VC:[a-z0-9]+]]: memref<?x16x2x32xf32>, %[[LENS:[a-z0-9]+]]: memref<?xi32>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>
//       DECODE:   %[[QR:.*]] = memref.alloca() {{.*}} : memref<2x16x32xf32>
//       DECODE:   %[[ACC:.*]] = memref.alloca() {{.*}} : memref<2x16x32xf32>
//       DECODE:   %[[KS:.*]] = memref.alloca() {{.*}} : memref<64x2x32xf32>
//       DECODE:   %[[VS:.*]] = memref.alloca() {{.*}} : memref<64x2x32xf32>
//       DECODE:   scf.forall (%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}}, 1, %{{.*}})
//       DECODE:     %[[M:.*]] = memref.dim %[[BT]], %c1
//       DECODE:     %[[NK:.*]] = arith.muli %[[M]], %c16
//       DECODE:     memref.load %[[LENS]][%[[B]]]
//       DECODE:     %[[P:.*]] = memref.dim %[[KC]], %c0
//       DECODE:     %[[NOPAGES:.*]] = arith.cmpi eq, %[[P]], %c0
//       DECODE:     arith.select %[[NOPAGES]], %c0
//       DECODE:     scf.for %[[H0:.*]] = %{{.*}} to %c2
//       DECODE:       memref.subview %[[QR]][%[[H0]], 0, 0] [1, 16, 32] [1, 1, 1]
//       DECODE:     scf.for
//       DECODE:       scf.for
//       DECODE:         %[[E:.*]] = memref.load %[[BT]][%[[B]], %{{.*}}] : memref<?x?xi32>
//       DECODE:         %[[PG:.*]] = arith.index_cast %[[E]] : i32 to index
//       DECODE:         %[[LAST:.*]] = arith.maxsi %{{.*}}, %c0
//       DECODE:         %[[LOW:.*]] = arith.maxsi %[[PG]], %c0
//       DECODE:         %[[PAGE:.*]] = arith.minsi %[[LOW]], %[[LAST]]
//       DECODE:         %[[ROW:.*]] = arith.remui %{{.*}}, %c16
//       DECODE:         scf.for %[[HK:.*]] = %{{.*}} to %c2
//       DECODE:           vector.transfer_read %[[KC]][%[[PAGE]], %[[ROW]], %[[HK]], %c0{{.*}}]
//       DECODE:           vector.store %{{.*}}, %[[KS]]
//       DECODE:         scf.for %[[HV:.*]] = %{{.*}} to %c2
//       DECODE:           vector.transfer_read %[[VC]][%[[PAGE]], %[[ROW]], %[[HV]], %c0{{.*}}]
//       DECODE:           vector.store %{{.*}}, %[[VS]]
//       DECODE:       scf.for %[[H:.*]] = %{{.*}} to %c2
//       DECODE:         memref.subview %[[ACC]][%[[H]], 0, 0] [1, 16, 32] [1, 1, 1]
//       DECODE:         vector.transfer_read %[[KS]][%{{.*}}, %[[H]], %c0{{.*}}]
//   DECODE-NOT:         memref.prefetch
//       DECODE:         vector.load %[[VS]][%{{.*}}, %[[H]], %c0{{.*}}]
func.func @paged(%q: memref<?x8x?x32xf32>, %kc: memref<?x16x2x32xf32>, %vc: memref<?x16x2x32xf32>, %lens: memref<?xi32>, %bt: memref<?x?xi32>, %o: memref<?x8x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x32xf32> to tensor<?x8x?x32xf32>
  %kt = bufferization.to_tensor %kc restrict : memref<?x16x2x32xf32> to tensor<?x16x2x32xf32>
  %vt = bufferization.to_tensor %vc restrict : memref<?x16x2x32xf32> to tensor<?x16x2x32xf32>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %btt = bufferization.to_tensor %bt restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x32xf32> to tensor<?x8x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x32xf32>, tensor<?x16x2x32xf32>, tensor<?x16x2x32xf32>)
           kv_lens(%lt : tensor<?xi32>) block_table(%btt : tensor<?x?xi32>)
           outs(%ot : tensor<?x8x?x32xf32>) causal(bottom_right) -> tensor<?x8x?x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x8x?x32xf32>, memref<?x8x?x32xf32>) -> ()
  return
}

// -----

// The token-major variable-length form (cu_seqlens): the forall runs over
// (query head, sequence, query tile of the longest sequence), heads
// outermost; each sequence's start and length come from its offsets,
// clamped to the packed rows (start to [0, T], end to [start, T]); tiles
// past a sequence's rows do nothing; Q rows are read at (start + q, head),
// K rows at (key start + k, kv head), LSE written at (head, start + q).
// V rows, Hkv x Dv elements apart, are copied into a contiguous tile
// before P V reads them once per block of query rows; K rows are read in
// place. With decode tiles on (DECODE), the same general kernel.
// CHECK-LABEL: func.func @varlen
//  CHECK-SAME:   %[[Q:[a-z0-9]+]]: memref<?x8x32xf32>, %[[K:[a-z0-9]+]]: memref<?x2x32xf32>, %[[V:[a-z0-9]+]]: memref<?x2x32xf32>, %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CK:[a-z0-9]+]]: memref<?xi32>, %{{[a-z0-9]+}}: memref<?x8x32xf32>, %[[L:[a-z0-9]+]]: memref<8x?xf32>
//       CHECK:   %[[NCU:.*]] = memref.dim %[[CQ]], %c0
//       CHECK:   %[[B1:.*]] = arith.subi %[[NCU]], %c1
//       CHECK:   %[[B:.*]] = arith.maxsi %[[B1]], %c0
//       CHECK:   %[[LONGEST:.*]] = scf.for %{{.*}} = %{{.*}} to %[[B]]
//       CHECK:   %[[TILES:.*]] = arith.ceildivui %[[LONGEST]], %c64
//       CHECK:   scf.forall (%[[H:.*]], %[[S:.*]], %[[T:.*]]) in (8, %[[B]], %[[TILES]])
//       CHECK:     %[[TQ:.*]] = memref.dim %[[Q]], %c0
//       CHECK:     %[[C0:.*]] = memref.load %[[CQ]][%[[S]]] : memref<?xi32>
//       CHECK:     %[[C0I:.*]] = arith.index_cast %[[C0]] : i32 to index
//       CHECK:     %[[LO:.*]] = arith.maxsi %[[C0I]], %c0
//       CHECK:     %[[START:.*]] = arith.minsi %[[LO]], %[[TQ]]
//       CHECK:     %[[NEXT:.*]] = arith.addi %[[S]], %c1
//       CHECK:     %[[C1:.*]] = memref.load %[[CQ]][%[[NEXT]]] : memref<?xi32>
//       CHECK:     %[[C1I:.*]] = arith.index_cast %[[C1]] : i32 to index
//       CHECK:     %[[HI:.*]] = arith.maxsi %[[C1I]], %[[START]]
//       CHECK:     %[[END:.*]] = arith.minsi %[[HI]], %[[TQ]]
//       CHECK:     %[[LQ:.*]] = arith.subi %[[END]], %[[START]]
//       CHECK:     memref.load %[[CK]][%[[S]]] : memref<?xi32>
//       CHECK:     %[[MY:.*]] = arith.ceildivui %[[LQ]], %c64
//       CHECK:     %[[IN:.*]] = arith.cmpi ult, %[[T]], %[[MY]]
//       CHECK:     scf.if %[[IN]] {
//       CHECK:       %[[ROW:.*]] = arith.addi %[[START]], %{{.*}}
//       CHECK:       memref.load %[[Q]][%[[ROW]], %[[H]], %{{.*}}] : memref<?x8x32xf32>
//       CHECK:       %[[VROW:.*]] = vector.transfer_read %[[V]][%{{.*}}, %{{.*}}, %c0{{.*}}]
//       CHECK:       vector.store %[[VROW]], %{{.*}}[%{{.*}}, %c0{{.*}}] : memref<64x32xf32>, vector<16xf32>
//       CHECK:       memref.load %[[K]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x2x32xf32>
//       CHECK:       memref.store %{{.*}}, %[[L]][%[[H]], %{{.*}}] : memref<8x?xf32>
// DECODE-LABEL: func.func @varlen
//       DECODE:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (8, %{{.*}}, %{{.*}})
//   DECODE-NOT:   scf.forall
func.func @varlen(%q: memref<?x8x32xf32>, %k: memref<?x2x32xf32>, %v: memref<?x2x32xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>, %o: memref<?x8x32xf32>, %l: memref<8x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x32xf32> to tensor<?x8x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x32xf32> to tensor<?x2x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x32xf32> to tensor<?x2x32xf32>
  %cqt = bufferization.to_tensor %cq restrict : memref<?xi32> to tensor<?xi32>
  %ckt = bufferization.to_tensor %ck restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x32xf32> to tensor<?x8x32xf32>
  %lt = bufferization.to_tensor %l restrict writable : memref<8x?xf32> to tensor<8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>)
           cu_seqlens(%cqt, %ckt : tensor<?xi32>, tensor<?xi32>)
           outs(%ot : tensor<?x8x32xf32>, %lt : tensor<8x?xf32>) causal(bottom_right) -> tensor<?x8x32xf32>, tensor<8x?xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<?x8x32xf32>, memref<?x8x32xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %l : (tensor<8x?xf32>, memref<8x?xf32>) -> ()
  return
}

// -----

// The P V register block by default (pv-vectors = 0): Dv = 96 is 6 vectors,
// one group of 4 rows x 6 vectors (24 accumulators), not 4 + 2.
// CHECK-LABEL: func.func @pv_groups
//   CHECK-NOT:   -> ({{(vector<16xf32>, ){7}(vector)}}<16xf32>)
//       CHECK:     scf.for {{.*}} -> ({{(vector<16xf32>, ){23}(vector)}}<16xf32>)
//       CHECK:       vector.load %{{.*}} : memref<1x1x?x96xf32>, vector<16xf32>
//   CHECK-NOT:   -> ({{(vector<16xf32>, ){7}(vector)}}<16xf32>)
//       CHECK:   return
// DECODE-LABEL: func.func @pv_groups
func.func @pv_groups(%q: memref<1x1x?x32xf32>, %k: memref<1x1x?x32xf32>, %v: memref<1x1x?x96xf32>, %o: memref<1x1x?x96xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x?x32xf32> to tensor<1x1x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x?x32xf32> to tensor<1x1x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x?x96xf32> to tensor<1x1x?x96xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x?x96xf32> to tensor<1x1x?x96xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x1x?x32xf32>, tensor<1x1x?x32xf32>, tensor<1x1x?x96xf32>)
           outs(%ot : tensor<1x1x?x96xf32>) -> tensor<1x1x?x96xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x1x?x96xf32>, memref<1x1x?x96xf32>) -> ()
  return
}

// -----

// bf16-dot: bf16 inputs through AVX512_BF16 dot products. Scratch in bf16
// pairs: Q pairs along d ([D / 2, 2 x block-q], unscaled), V rows paired
// by key ([block-kv / 2, 2 x Dv padded]) and P paired by key ([block-kv /
// 2, 2 x block-q]); no f32 K or V tile. S^T keeps the 6 x 4 register
// block, one vdpbf16ps per key pair broadcast (a 32-bit word) and Q pair
// vector, over D / 2 steps, then times the scale in f32. P is rounded to
// bf16 (vcvtneps2bf16) and paired after the softmax; P V broadcasts a P
// pair per row and dots it with the V pair vectors. On tiles that need the
// removed-key guard, a V tile with an inf or NaN (exponent all ones) takes
// the f32 P V with its select instead.
// BF16-LABEL: func.func @bf16_dot
//       BF16:   %[[QP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<20x128xbf16>
//       BF16:   %[[VP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32x64xbf16>
//       BF16:   %[[PP:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
//       BF16:   %[[ST:.*]] = memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
//       BF16:   memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//       BF16:   memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//       BF16:   memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//       BF16:   memref.alloca() {alignment = 64 : i64} : memref<64xf32>
//   BF16-NOT:   memref.alloca
//       BF16:   scf.forall
// Q pairs: Q[r][d] at [d / 2][2 r + d % 2], rows past the tile 0.
//       BF16:     arith.select %{{.*}}, %{{.*}}, %{{.*}} : bf16
//       BF16:     arith.divui
//       BF16:     arith.remui
//       BF16:     memref.store %{{.*}}, %[[QP]][
// V pairs: a key past the tile is 0; the exponent test; interleaved rows.
//       BF16:     %[[FLAGS:.*]] = scf.for {{.*}} iter_args({{.*}}) -> (vector<16xi1>) {
//       BF16:       %[[HAS1:.*]] = arith.cmpi ult
//       BF16:       %[[V0:.*]] = vector.transfer_read %{{.*}} : memref<1x2x?x24xbf16>, vector<16xbf16>
//       BF16:       %[[V1:.*]] = vector.transfer_read %{{.*}} : memref<1x2x?x24xbf16>, vector<16xbf16>
//       BF16:       %[[V1Z:.*]] = arith.select %[[HAS1]], %[[V1]], %{{.*}} : vector<16xbf16>
//       BF16:       arith.andi %{{.*}}, %[[EXP:.*]] : vector<16xi16>
//       BF16:       arith.cmpi eq, %{{.*}}, %[[EXP]] : vector<16xi16>
//       BF16:       vector.interleave %[[V0]], %[[V1Z]] : vector<16xbf16> -> vector<32xbf16>
//       BF16:       vector.store %{{.*}}, %[[VP]][%{{.*}}, %c0{{.*}}] : memref<32x64xbf16>, vector<32xbf16>
//       BF16:       vector.store %{{.*}}, %[[VP]][%{{.*}}, %c32{{.*}}] : memref<32x64xbf16>, vector<32xbf16>
//       BF16:     %[[NONFINITE:.*]] = vector.reduction <or>, %[[FLAGS]] : vector<16xi1> into i1
// S^T: the K rows 64 keys ahead prefetched (lines of 32 bf16), then 24
// accumulators over D / 2 = 20 pair steps.
//       BF16:     memref.prefetch %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c0{{.*}}], read, locality<2>, data : memref<1x2x?x40xbf16>
//  BF16-NEXT:     arith.constant 32 : index
//  BF16-NEXT:     memref.prefetch %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c32{{.*}}], read, locality<2>, data : memref<1x2x?x40xbf16>
//       BF16:     scf.for %[[P:.*]] = %{{.*}} to %c20{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       BF16:       %[[QV:.*]] = vector.load %[[QP]][%[[P]], %c0{{.*}}] : memref<20x128xbf16>, vector<32xbf16>
//       BF16:       vector.load %{{.*}} : memref<1x2x?x40xbf16>, vector<2xbf16>
//       BF16:       vector.bitcast %{{.*}} : vector<2xbf16> to vector<1xi32>
//       BF16:       vector.broadcast %{{.*}} : i32 to vector<16xi32>
//       BF16:       %[[KB:.*]] = vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
//       BF16:       x86vector.avx512.dot %{{.*}}, %[[KB]], %[[QV]] : vector<32xbf16> -> vector<16xf32>
//  BF16-COUNT-23:   x86vector.avx512.dot
//   BF16-NOT:       vector.fma
//       BF16:       scf.yield
//       BF16:     arith.mulf %{{.*}}, %[[SCALE:.*]] : vector<16xf32>
//       BF16:     vector.store %{{.*}}, %[[ST]]
// Causality alone: only a tile across the diagonal compares each lane's
// query with the key (the else branch, a full tile, takes the max alone).
//       BF16:     %{{.*}}:4 = scf.if %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       BF16:       vector.step : vector<16xindex>
//       BF16:       arith.cmpi sge
//       BF16:     } else {
//   BF16-NOT:       vector.step
//       BF16:       arith.cmpf ogt
//       BF16:     }
// P = exp(S - m) over pairs of keys, in the pass that rounds it to bf16
// pairs: the second key past the tile is 0; with causality the f32 P
// goes back to S^T for the guarded P V; both keys enter the row sum.
//       BF16:     scf.for %[[PI:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
//       BF16:       %[[HASP1:.*]] = arith.cmpi ult
//       BF16:       %[[P0:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xf32>
//       BF16:       %[[P1Z:.*]] = arith.select %[[HASP1]], %{{[a-z0-9_]+}}, %cst{{[_0-9]*}} : vector<16xf32>
//  BF16-NEXT:       vector.store %[[P0]], %[[ST]]
//  BF16-NEXT:       vector.store %[[P1Z]], %[[ST]]
//  BF16-NEXT:       %[[PS:.*]] = arith.addf %[[P0]], %[[P1Z]] : vector<16xf32>
//  BF16-NEXT:       arith.addf %{{.*}}, %[[PS]] : vector<16xf32>
//  BF16-NEXT:       %[[R0:.*]] = x86vector.avx512.cvt.packed.f32_to_bf16 %[[P0]] : vector<16xf32> -> vector<16xbf16>
//  BF16-NEXT:       %[[R1:.*]] = x86vector.avx512.cvt.packed.f32_to_bf16 %[[P1Z]] : vector<16xf32> -> vector<16xbf16>
//  BF16-NEXT:       vector.interleave %[[R0]], %[[R1]] : vector<16xbf16> -> vector<32xbf16>
//       BF16:       vector.store %{{.*}}, %[[PP]][%[[PI]], %c0{{.*}}]
// Tiles across the diagonal: the f32 guarded P V when V is not finite.
//       BF16:     scf.if %{{.*}} {
//       BF16:       scf.if %[[NONFINITE]] {
//       BF16:         vector.fma
//       BF16:         arith.select
//       BF16:       } else {
//       BF16:         vector.load %[[VP]]
//       BF16:         vector.load %[[PP]]{{.*}} : memref<32x128xbf16>, vector<2xbf16>
//       BF16:         x86vector.avx512.dot
//       BF16:     } else {
//       BF16:       x86vector.avx512.dot
func.func @bf16_dot(%q: memref<1x4x?x40xbf16>, %k: memref<1x2x?x40xbf16>, %v: memref<1x2x?x24xbf16>, %o: memref<1x4x?x24xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x4x?x40xbf16> to tensor<1x4x?x40xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x40xbf16> to tensor<1x2x?x40xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x24xbf16> to tensor<1x2x?x24xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x4x?x24xbf16> to tensor<1x4x?x24xbf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x4x?x40xbf16>, tensor<1x2x?x40xbf16>, tensor<1x2x?x24xbf16>)
           outs(%ot : tensor<1x4x?x24xbf16>) causal(bottom_right) -> tensor<1x4x?x24xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x4x?x24xbf16>, memref<1x4x?x24xbf16>) -> ()
  return
}

// -----

// bf16-dot applies to bf16 with an even D only: an odd D (and f16, f32,
// @kernel above) keep the f32 kernel.
// BF16-LABEL: func.func @bf16_odd_d
//   BF16-NOT:   x86vector
//       BF16:   vector.fma
//   BF16-NOT:   x86vector
//       BF16:   return
func.func @bf16_odd_d(%q: memref<1x2x?x33xbf16>, %k: memref<1x2x?x33xbf16>, %v: memref<1x2x?x33xbf16>, %o: memref<1x2x?x33xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x?x33xbf16> to tensor<1x2x?x33xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x33xbf16> to tensor<1x2x?x33xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x33xbf16> to tensor<1x2x?x33xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x2x?x33xbf16> to tensor<1x2x?x33xbf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x?x33xbf16>, tensor<1x2x?x33xbf16>, tensor<1x2x?x33xbf16>)
           outs(%ot : tensor<1x2x?x33xbf16>) -> tensor<1x2x?x33xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x?x33xbf16>, memref<1x2x?x33xbf16>) -> ()
  return
}
