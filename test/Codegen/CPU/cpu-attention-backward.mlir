// RUN: fa-opt %s -split-input-file -fa-cpu-attention-backward="vector-width=8 block-q=16 block-kv=8" | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-cpu-attention-backward="vector-width=8 block-q=16 block-kv=8 parallel=true" | FileCheck %s --check-prefix=PAR
// RUN: fa-opt %s -split-input-file -fa-cpu-attention-backward="vector-width=16 block-q=64 block-kv=64" | FileCheck %s --check-prefix=W16
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention-backward="vector-width=4" 2>&1 | FileCheck %s --check-prefix=VW
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention-backward="vector-width=8 block-q=12" 2>&1 | FileCheck %s --check-prefix=BQ

// VW: error: fa-cpu-attention-backward: vector-width must be 8 or 16, got 4
// BQ: error: fa-cpu-attention-backward: block-q must be a positive multiple of vector-width and block-kv positive, got block-q=12 block-kv=64

// f32, GQA (Hq = 4, Hkv = 2), bottom-right causal, softcap: the task loop,
// the scratch, the packing, the micro-kernels and the per-lane rules.
// CHECK-LABEL: func.func @f32_gqa_causal_softcap
//   CHECK-NOT:   fa.attention_backward
// Scratch before the task loop: Q^T [D][BQ], dO^T [Dv][BQ], S^T, dS^T and
// the softcap derivative [BK][BQ], LSE and Delta [BQ], dQ [BQ][D], the
// guarded K tile [BK][D].
//   CHECK-DAG:   memref.alloca() {alignment = 64 : i64} : memref<16x16xf32>
//   CHECK-DAG:   memref.alloca() {alignment = 64 : i64} : memref<8x16xf32>
//   CHECK-DAG:   memref.alloca() {alignment = 64 : i64} : memref<16xf32>
// One task per (batch, kv head).
//       CHECK:   scf.forall (%{{.*}}, %{{.*}}) in (%{{.*}}, 2) {
// f32 gradients: dK / dV accumulate in the outputs (no heap accumulator).
//   CHECK-NOT:     memref.alloc(
// S^T by the broadcast micro-kernel: 3 keys x 2 query vectors.
//       CHECK:     vector.step : vector<8xindex>
//       CHECK:     scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
//       CHECK:       vector.fma
// The tile's last keys (8 = 2 x 3 + 2): one block of 2 keys (4
// accumulators) if 2 are left, then one of 1 if 1 is left.
//       CHECK:     arith.cmpi uge, %{{.*}}, %c2{{.*}} : index
//  CHECK-NEXT:     scf.if %{{.*}} -> (index)
//       CHECK:       scf.for {{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
//       CHECK:     arith.cmpi uge, %{{.*}}, %c1{{.*}} : index
//  CHECK-NEXT:     scf.if %{{.*}} -> (index)
// P = exp(S - LSE) guarded for LSE = -inf (the exp as a polynomial), the
// causal rule per lane.
//       CHECK:     arith.cmpi sle, %{{.*}} : vector<8xindex>
//       CHECK:     arith.cmpf oeq, %{{.*}} : vector<8xf32>
//   CHECK-NOT:     math.exp
// (dP - Delta)^T starts from -Delta.
//       CHECK:     arith.negf %{{.*}} : vector<8xf32>
// dS = P (dP - Delta) scale, 0 where P = 0.
//       CHECK:     arith.cmpf oeq, %{{.*}} : vector<8xf32>
//       CHECK:     arith.select
// The guarded copy of K for dQ (non-finite -> 0).
//       CHECK:     arith.cmpf ord, %{{.*}} : vector<8xf32>
//   CHECK-NOT:   math.tanh
//       CHECK:   return
// PAR-LABEL: func.func @f32_gqa_causal_softcap
// PAR:         scf.forall
// PAR-NEXT:      memref.alloca()
func.func @f32_gqa_causal_softcap(%q: memref<1x4x?x16xf32>, %k: memref<1x2x?x16xf32>, %v: memref<1x2x?x16xf32>, %o: memref<1x4x?x16xf32>, %lse: memref<1x4x?xf32>, %do: memref<1x4x?x16xf32>, %dq: memref<1x4x?x16xf32>, %dk: memref<1x2x?x16xf32>, %dv: memref<1x2x?x16xf32>) {
  %tq = bufferization.to_tensor %q restrict : memref<1x4x?x16xf32> to tensor<1x4x?x16xf32>
  %tk = bufferization.to_tensor %k restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %tv = bufferization.to_tensor %v restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %to = bufferization.to_tensor %o restrict : memref<1x4x?x16xf32> to tensor<1x4x?x16xf32>
  %tl = bufferization.to_tensor %lse restrict : memref<1x4x?xf32> to tensor<1x4x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<1x4x?x16xf32> to tensor<1x4x?x16xf32>
  %gq = bufferization.to_tensor %dq restrict writable : memref<1x4x?x16xf32> to tensor<1x4x?x16xf32>
  %gk = bufferization.to_tensor %dk restrict writable : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %gv = bufferization.to_tensor %dv restrict writable : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) forward(%to, %tl : tensor<1x4x?x16xf32>, tensor<1x4x?xf32>) grad_output(%td : tensor<1x4x?x16xf32>) outs(%gq, %gk, %gv : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) causal(bottom_right) softcap(20.0) -> tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<1x4x?x16xf32>, memref<1x4x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<1x2x?x16xf32>, memref<1x2x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<1x2x?x16xf32>, memref<1x2x?x16xf32>) -> ()
  return
}

// -----

// f16: f32 accumulators for dK / dV on the heap, rounded at the end; K rows
// read in place (no removed keys inside the range: no guarded copy).
// CHECK-LABEL: func.func @f16_dense
//       CHECK:   scf.forall
//       CHECK:     memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x16xf32>
//       CHECK:     memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x16xf32>
//   CHECK-NOT:     arith.cmpf ord
//       CHECK:     arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
func.func @f16_dense(%q: memref<1x2x?x16xf16>, %k: memref<1x2x?x16xf16>, %v: memref<1x2x?x16xf16>, %o: memref<1x2x?x16xf16>, %lse: memref<1x2x?xf32>, %do: memref<1x2x?x16xf16>, %dq: memref<1x2x?x16xf16>, %dk: memref<1x2x?x16xf16>, %dv: memref<1x2x?x16xf16>) {
  %tq = bufferization.to_tensor %q restrict : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %tk = bufferization.to_tensor %k restrict : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %tv = bufferization.to_tensor %v restrict : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %to = bufferization.to_tensor %o restrict : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %tl = bufferization.to_tensor %lse restrict : memref<1x2x?xf32> to tensor<1x2x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %gq = bufferization.to_tensor %dq restrict writable : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %gk = bufferization.to_tensor %dk restrict writable : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %gv = bufferization.to_tensor %dv restrict writable : memref<1x2x?x16xf16> to tensor<1x2x?x16xf16>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>) forward(%to, %tl : tensor<1x2x?x16xf16>, tensor<1x2x?xf32>) grad_output(%td : tensor<1x2x?x16xf16>) outs(%gq, %gk, %gv : tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>) -> tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<1x2x?x16xf16>, memref<1x2x?x16xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<1x2x?x16xf16>, memref<1x2x?x16xf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<1x2x?x16xf16>, memref<1x2x?x16xf16>) -> ()
  return
}

// -----

// A boolean mask (i8 bytes in the kernel form, a broadcast batch dim) is
// packed per tile pair transposed; segment ids per lane (queries) against
// a scalar (the key).
// CHECK-LABEL: func.func @mask_segments
//   CHECK-DAG:   memref.alloca() {alignment = 64 : i64} : memref<8x16xi8>
//   CHECK-DAG:   memref.alloca() {alignment = 64 : i64} : memref<16xi32>
//       CHECK:   scf.forall
//       CHECK:     memref.load %{{.*}}[%c0{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x2x?x?xi8>
//       CHECK:     vector.load %{{.*}} : memref<8x16xi8>, vector<8xi8>
//       CHECK:     arith.cmpi ne, %{{.*}} : vector<8xi8>
//       CHECK:     arith.cmpi eq, %{{.*}} : vector<8xi32>
//   CHECK-NOT:   fa.attention_backward
func.func @mask_segments(%q: memref<2x2x?x16xf32>, %k: memref<2x2x?x16xf32>, %v: memref<2x2x?x16xf32>, %o: memref<2x2x?x16xf32>, %lse: memref<2x2x?xf32>, %do: memref<2x2x?x16xf32>, %m: memref<1x2x?x?xi8>, %qs: memref<2x?xi32>, %ks: memref<2x?xi32>, %dq: memref<2x2x?x16xf32>, %dk: memref<2x2x?x16xf32>, %dv: memref<2x2x?x16xf32>) {
  %tq = bufferization.to_tensor %q restrict : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %tk = bufferization.to_tensor %k restrict : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %tv = bufferization.to_tensor %v restrict : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %to = bufferization.to_tensor %o restrict : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %tl = bufferization.to_tensor %lse restrict : memref<2x2x?xf32> to tensor<2x2x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %tm8 = bufferization.to_tensor %m restrict : memref<1x2x?x?xi8> to tensor<1x2x?x?xi8>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %n2 = tensor.dim %tm8, %c2 : tensor<1x2x?x?xi8>
  %n3 = tensor.dim %tm8, %c3 : tensor<1x2x?x?xi8>
  %e = tensor.empty(%n2, %n3) : tensor<1x2x?x?xi1>
  %tm = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%tm8 : tensor<1x2x?x?xi8>) outs(%e : tensor<1x2x?x?xi1>) {
  ^bb0(%x: i8, %y: i1):
    %z = arith.constant 0 : i8
    %t = arith.cmpi ne, %x, %z : i8
    linalg.yield %t : i1
  } -> tensor<1x2x?x?xi1>
  %tqs = bufferization.to_tensor %qs restrict : memref<2x?xi32> to tensor<2x?xi32>
  %tks = bufferization.to_tensor %ks restrict : memref<2x?xi32> to tensor<2x?xi32>
  %gq = bufferization.to_tensor %dq restrict writable : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %gk = bufferization.to_tensor %dk restrict writable : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %gv = bufferization.to_tensor %dv restrict writable : memref<2x2x?x16xf32> to tensor<2x2x?x16xf32>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>) forward(%to, %tl : tensor<2x2x?x16xf32>, tensor<2x2x?xf32>) grad_output(%td : tensor<2x2x?x16xf32>) mask(%tm : tensor<1x2x?x?xi1>) segments(%tqs, %tks : tensor<2x?xi32>, tensor<2x?xi32>) outs(%gq, %gk, %gv : tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>) -> tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x2x?x16xf32>, memref<2x2x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x?x16xf32>, memref<2x2x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x?x16xf32>, memref<2x2x?x16xf32>) -> ()
  return
}

// -----

// Tensor operands (not the kernel form) are left for
// fa-tile-attention-backward.
// CHECK-LABEL: func.func @left_alone
//       CHECK:   fa.attention_backward
func.func @left_alone(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %lse: tensor<1x2x8xf32>, %do: tensor<1x2x8x16xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) forward(%o, %lse : tensor<1x2x8x16xf32>, tensor<1x2x8xf32>) grad_output(%do : tensor<1x2x8x16xf32>) outs(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>
}

// -----

// 16 lanes, D = Dv = 96 (6 vectors): the rows of dV, dK and dQ accumulate
// 4 rows x 6 vectors (24 accumulators) rather than 4 + 2 vectors.
// W16-LABEL: func.func @d96
//       W16:   scf.for {{.*}} -> ({{(vector<16xf32>, ){23}(vector)}}<16xf32>)
//       W16:   scf.for {{.*}} -> ({{(vector<16xf32>, ){23}(vector)}}<16xf32>)
//       W16:   scf.for {{.*}} -> ({{(vector<16xf32>, ){23}(vector)}}<16xf32>)
func.func @d96(%q: memref<1x2x?x96xf32>, %k: memref<1x2x?x96xf32>, %v: memref<1x2x?x96xf32>, %o: memref<1x2x?x96xf32>, %lse: memref<1x2x?xf32>, %do: memref<1x2x?x96xf32>, %dq: memref<1x2x?x96xf32>, %dk: memref<1x2x?x96xf32>, %dv: memref<1x2x?x96xf32>) {
  %tq = bufferization.to_tensor %q restrict : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %tk = bufferization.to_tensor %k restrict : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %tv = bufferization.to_tensor %v restrict : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %to = bufferization.to_tensor %o restrict : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %tl = bufferization.to_tensor %lse restrict : memref<1x2x?xf32> to tensor<1x2x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %gq = bufferization.to_tensor %dq restrict writable : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %gk = bufferization.to_tensor %dk restrict writable : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %gv = bufferization.to_tensor %dv restrict writable : memref<1x2x?x96xf32> to tensor<1x2x?x96xf32>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<1x2x?x96xf32>, tensor<1x2x?x96xf32>, tensor<1x2x?x96xf32>) forward(%to, %tl : tensor<1x2x?x96xf32>, tensor<1x2x?xf32>) grad_output(%td : tensor<1x2x?x96xf32>) outs(%gq, %gk, %gv : tensor<1x2x?x96xf32>, tensor<1x2x?x96xf32>, tensor<1x2x?x96xf32>) -> tensor<1x2x?x96xf32>, tensor<1x2x?x96xf32>, tensor<1x2x?x96xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<1x2x?x96xf32>, memref<1x2x?x96xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<1x2x?x96xf32>, memref<1x2x?x96xf32>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<1x2x?x96xf32>, memref<1x2x?x96xf32>) -> ()
  return
}
