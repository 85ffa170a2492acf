// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared-backward))' -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared-backward{block-q=8 block-kv=16}))' -verify-diagnostics | FileCheck %s --check-prefix=SIZES
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared-backward),fa-map-to-gpu)' -verify-diagnostics | FileCheck %s --check-prefix=GPU
// RUN: not fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared-backward{shared-budget=1024}))' 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared-backward{block-kv=64}))' 2>&1 | FileCheck %s --check-prefix=BIGKV
// RUN: not fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared-backward{warps=0}))' 2>&1 | FileCheck %s --check-prefix=WARPS

// BUDGET: error: fa-promote-shared-backward: no tile sizes fit: block-q must be a positive multiple of the 4 warps, block-kv a multiple of them up to 32, and the tiles and accumulators of each kernel at most 1024 bytes of workgroup memory (D = 16, Dv = 16)
// BIGKV: error: fa-promote-shared-backward: no tile sizes fit
// WARPS: error: fa-promote-shared-backward: warps must be in [1, 32], got 0

// f32, GQA (Hq = 4, Hkv = 2), bottom-right causal, softcap.
// CHECK-LABEL: func.func @f32_gqa_causal_softcap
//  CHECK-SAME:   fa.gpu_config = {backward, block_kv = 32 : index, block_q = 8 : index, threads = 128 : index}
//   CHECK-NOT:   fa.attention_backward
// Workgroup buffers: Q and dO tiles, K and V tiles (rows padded by one
// word), LSE and Delta, the dK / dV accumulators, P and dS of a tile pair,
// the dQ accumulator.
// (f32: 8 query rows per tile, 2 per warp).
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<128xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<128xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<544xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<544xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<8xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<8xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<512xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<512xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<256xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<256xf32, 3>
//       CHECK:   memref.alloca() {alignment = 16 : i64} : memref<128xf32, 3>
// The dQ kernel: a block per (query tile, query head, batch).
//       CHECK:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 4, %{{.*}}) {
// The Q and dO tiles copied by the block's threads.
//       CHECK:     scf.forall (%{{.*}}) in (128) {
//       CHECK:     } {mapping = [#gpu.thread<x>]}
// Delta = rowsum(dO * O) and the LSE per row, by warps.
//       CHECK:     scf.forall (%{{.*}}) in (4) {
//       CHECK:       vector.reduction <add>, %{{.*}} : vector<32xf32> into f32
//       CHECK:     } {mapping = [#gpu.warp<x>]}
// The key tiles the forward visited: K and V copied in, then S and dP,
// P = exp2(S - LSE) guarded, dS, and dQ += dS K by broadcasting each key's
// dS from its lane.
//       CHECK:     scf.for
//       CHECK:       scf.forall (%{{.*}}) in (128) {
//       CHECK:       scf.forall (%{{.*}}) in (4) {
//       CHECK:         scf.for {{.*}} -> (vector<32xf32>, vector<32xf32>)
//       CHECK:         arith.subf %{{.*}}, %{{.*}} : vector<32xf32>
//       CHECK:         math.exp2 %{{.*}} : vector<32xf32>
//       CHECK:         vector.extract %{{.*}}[%{{.*}}] : f32 from vector<32xf32>
// The dQ rows written by warps.
//       CHECK:     scf.forall (%{{.*}}) in (4) {
//       CHECK:       vector.scatter %arg6
//       CHECK:   } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
// The dK / dV kernel: a block per (key tile, kv head, batch), named with a
// suffix; the query heads of the group, the query tiles whose key range
// meets the tile.
//       CHECK:   scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, 2, %{{.*}}) {
//       CHECK:     scf.if
//       CHECK:       scf.for %{{.*}} = %{{.*}} to %c2{{.*}} step
//       CHECK:         scf.for
//       CHECK:           scf.if
//       CHECK:             vector.scatter
//       CHECK:             scf.for {{.*}} iter_args
//       CHECK:     vector.scatter %arg7
//       CHECK:     vector.scatter %arg8
//       CHECK:   } {fa.kernel_suffix = "_dkdv", mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
//   CHECK-NOT:   math.tanh
//       CHECK:   return
// SIZES-LABEL: func.func @f32_gqa_causal_softcap
//  SIZES-SAME:   fa.gpu_config = {backward, block_kv = 16 : index, block_q = 8 : index, threads = 128 : index}
// Two kernels of one gpu.module, launched in order: dQ, then dK / dV.
// GPU-LABEL: func.func @f32_gqa_causal_softcap
//       GPU:   gpu.launch_func @f32_gqa_causal_softcap_kernels::@f32_gqa_causal_softcap blocks in (%{{.*}}, %c4, %{{.*}}) threads in (%c128, %c1, %c1)
//       GPU:   gpu.launch_func @f32_gqa_causal_softcap_kernels::@f32_gqa_causal_softcap_dkdv blocks in (%{{.*}}, %c2{{.*}}, %{{.*}}) threads in (%c128{{.*}}, %c1{{.*}}, %c1{{.*}})
//       GPU:   gpu.module @f32_gqa_causal_softcap_kernels
//       GPU:     gpu.func @f32_gqa_causal_softcap(
//       GPU:     gpu.func @f32_gqa_causal_softcap_dkdv(
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

// f16 at D = 128: smaller key tiles fit the default budget; an additive
// mask, the
// key lengths and ALiBi, the mask gathered per key lane.
// CHECK-LABEL: func.func @f16_d128_mask_lens_alibi
//  CHECK-SAME:   fa.gpu_config = {backward, block_kv = 16 : index, block_q = 16 : index, threads = 128 : index}
//       CHECK:   vector.gather %arg4
//       CHECK:   arith.truncf %{{.*}} : vector<32xf32> to vector<32xf16>
func.func @f16_d128_mask_lens_alibi(%q: memref<?x2x?x128xf16>, %k: memref<?x2x?x128xf16>, %v: memref<?x2x?x128xf16>, %lens: memref<?xi32>, %mask: memref<?x2x?x?xf16>, %alibi: memref<2xf32>, %o: memref<?x2x?x128xf16>, %lse: memref<?x2x?xf32>, %do: memref<?x2x?x128xf16>, %dq: memref<?x2x?x128xf16>, %dk: memref<?x2x?x128xf16>, %dv: memref<?x2x?x128xf16>) {
  %tq = bufferization.to_tensor %q restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %tlens = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %tm = bufferization.to_tensor %mask restrict : memref<?x2x?x?xf16> to tensor<?x2x?x?xf16>
  %tal = bufferization.to_tensor %alibi restrict : memref<2xf32> to tensor<2xf32>
  %to = bufferization.to_tensor %o restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %tl = bufferization.to_tensor %lse restrict : memref<?x2x?xf32> to tensor<?x2x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %gq = bufferization.to_tensor %dq restrict writable : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %gk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %gv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>) forward(%to, %tl : tensor<?x2x?x128xf16>, tensor<?x2x?xf32>) grad_output(%td : tensor<?x2x?x128xf16>) kv_lens(%tlens : tensor<?xi32>) mask(%tm : tensor<?x2x?x?xf16>) alibi(%tal : tensor<2xf32>) outs(%gq, %gk, %gv : tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>) causal(top_left) -> tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x2x?x128xf16>, memref<?x2x?x128xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x128xf16>, memref<?x2x?x128xf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x128xf16>, memref<?x2x?x128xf16>) -> ()
  return
}

// -----

// Not in the kernel form (tensor arguments): a clear error, the op kept.
func.func @tensors(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>, %lse: tensor<1x1x8xf32>, %do: tensor<1x1x8x16xf32>) -> (tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{fa-promote-shared-backward}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) forward(%o, %lse : tensor<1x1x8x16xf32>, tensor<1x1x8xf32>) grad_output(%do : tensor<1x1x8x16xf32>) outs(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
}

// -----

// A kernel function holds one fa.attention_backward: two are a clear error
// on the function, both ops kept.
// expected-error @+1 {{fa-promote-shared-backward: expected one fa.attention_backward per kernel function, found 2}}
func.func @two_ops(%q: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>, %lse: tensor<1x1x8xf32>) -> (tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) {
  %r:3 = fa.attention_backward ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) forward(%o, %lse : tensor<1x1x8x16xf32>, tensor<1x1x8xf32>) grad_output(%o : tensor<1x1x8x16xf32>) outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  %s:3 = fa.attention_backward ins(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) forward(%o, %lse : tensor<1x1x8x16xf32>, tensor<1x1x8xf32>) grad_output(%o : tensor<1x1x8x16xf32>) outs(%q, %q, %q : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
  return %r#0, %s#0 : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>
}
