// RUN: fa-opt %s -split-input-file -fa-map-to-tensor-cores-backward | FileCheck %s
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 kernel=mma" 2>&1 | FileCheck %s --check-prefix=MMA

// WGMMA: error: fa-lower-to-nvvm: kernel=wgmma: the attention_backward of @f16_gqa_causal has no wgmma kernels; use kernel=auto, mma or simt
// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention_backward of @f32_left is not eligible for the mma.sync kernels: Q, K and V must be f16 or bf16; use kernel=auto or kernel=simt
// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention_backward of @f16_d144_left is not eligible for the mma.sync kernels: head dims must be multiples of 16 up to 128, got D = 144 and Dv = 144; use kernel=auto or kernel=simt

// f16, GQA (Hq = 4, Hkv = 2), bottom-right causal, D = 64: two kernels,
// 64 query rows (dQ) and 64 keys (dK/dV) per block, inner tiles of 32.
// CHECK-LABEL: func.func @f16_gqa_causal
//  CHECK-SAME:   fa.gpu_config = {backward, block_kv = 64 : index, block_q = 64 : index, tensor_cores, threads = 128 : index}
//   CHECK-NOT:   fa.attention_backward
//       CHECK:   %[[QT:.*]] = arith.ceildivui %{{.*}}, %c64
//       CHECK:   %[[KT:.*]] = arith.ceildivui %{{.*}}, %c64
//       CHECK:   gpu.launch_func @f16_gqa_causal_kernels::@f16_gqa_causal blocks in (%[[QT]], %c4, %[[B:.*]]) threads in (%c128, %c1, %c1) args(%arg0 : {{.*}}, %arg8 : memref<?x2x?x64xf16>)
//       CHECK:   gpu.launch_func @f16_gqa_causal_kernels::@f16_gqa_causal_dkdv blocks in (%[[KT]], %c2{{.*}}, %[[B]]) threads in (%c128, %c1, %c1)
//       CHECK: gpu.module @f16_gqa_causal_kernels
//   CHECK-DAG:   memref.global "private" @__fa_f16_gqa_causal_dkdv_delta : memref<32xf32, 3> {alignment = 16 : i64}
//   CHECK-DAG:   memref.global "private" @__fa_f16_gqa_causal_dkdv_lse : memref<32xf32, 3>
//   CHECK-DAG:   memref.global "private" @__fa_f16_gqa_causal_dkdv_q : memref<32x72xf16, 3>
//   CHECK-DAG:   memref.global "private" @__fa_f16_gqa_causal_dkdv_k : memref<64x72xf16, 3>
//   CHECK-DAG:   memref.global "private" @__fa_f16_gqa_causal_q : memref<64x72xf16, 3>
//   CHECK-DAG:   memref.global "private" @__fa_f16_gqa_causal_k : memref<32x72xf16, 3>
// dQ: Q and dO copied once (the barrier opening each K/V tile orders them
// before the reads), then per K/V tile: copies, S = Q K^T and
// dP = dO V^T from ldmatrix fragments, the K tile cleared of NaN/inf
// (causal removes keys), dQ += dS K through a transposed ldmatrix.
//       CHECK:   gpu.func @f16_gqa_causal(
//       CHECK:     nvgpu.device_async_copy
//       CHECK:     nvgpu.device_async_wait
//   CHECK-NOT:     gpu.barrier
//       CHECK:     scf.for {{.*}} -> (vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>)
//       CHECK:       gpu.barrier
//       CHECK:       nvgpu.device_async_wait
//  CHECK-NEXT:       gpu.barrier
//       CHECK:       nvgpu.ldmatrix {{.*}}transpose = false{{.*}} : memref<64x72xf16, 3> -> vector<4x2xf16>
//       CHECK:       nvgpu.ldmatrix {{.*}}transpose = false{{.*}} : memref<32x72xf16, 3> -> vector<4x2xf16>
//       CHECK:       nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
//       CHECK:       llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
//       CHECK:       gpu.barrier
//       CHECK:       arith.bitcast {{.*}} : vector<8xf16> to vector<8xi16>
//       CHECK:       gpu.barrier
//       CHECK:       arith.truncf {{.*}} : vector<2x2xf32> to vector<2x2xf16>
//       CHECK:       nvgpu.ldmatrix {{.*}}transpose = true{{.*}} : memref<32x72xf16, 3> -> vector<4x2xf16>
//       CHECK:       scf.yield
//       CHECK:     memref.store {{.*}} : memref<?x4x?x64xf16>
//       CHECK:     gpu.return
// dK/dV: the K and V tiles copied for a key tile below the key length;
// every query head of the group, every visited query tile; the rows' LSE
// and Delta through workgroup memory; dV += P^T dO and dK += dS^T Q.
//       CHECK:   gpu.func @f16_gqa_causal_dkdv(
//       CHECK:     scf.if {{.*}} -> (vector<2x2xf32>
//       CHECK:       scf.for {{.*}} to %c2
//       CHECK:         scf.for
//       CHECK:           scf.if {{.*}} -> (vector<2x2xf32>
//       CHECK:             gpu.barrier
//       CHECK:             memref.store {{.*}} : memref<32xf32, 3>
//       CHECK:             nvgpu.device_async_wait
//       CHECK:             nvgpu.mma.sync
//       CHECK:             memref.load {{.*}} : memref<32xf32, 3>
//       CHECK:             nvgpu.ldmatrix {{.*}}transpose = true
//   CHECK-NOT:             arith.bitcast {{.*}} : vector<8xf16> to vector<8xi16>
//       CHECK:     gpu.return

func.func @f16_gqa_causal(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %o: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>, %do: memref<?x4x?x64xf16>, %dq: memref<?x4x?x64xf16>, %dk: memref<?x2x?x64xf16>, %dv: memref<?x2x?x64xf16>) {
  %tq = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %to = bufferization.to_tensor %o restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tl = bufferization.to_tensor %lse restrict : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %tdo = bufferization.to_tensor %do restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tdq = bufferization.to_tensor %dq restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tdk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %tdv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>) forward(%to, %tl : tensor<?x4x?x64xf16>, tensor<?x4x?xf32>) grad_output(%tdo : tensor<?x4x?x64xf16>) outs(%tdq, %tdk, %tdv : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>) causal(bottom_right) -> tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// Not causal, no mask: every key below the key length is attended by every
// row, so the dQ kernel does not clear the K tile. bf16, D = 128: inner
// tiles of 16.
// CHECK-LABEL: func.func @bf16_d128_dense
//       CHECK:   memref.global "private" @__fa_bf16_d128_dense_k : memref<16x136xbf16, 3>
//       CHECK:   gpu.func @bf16_d128_dense(
//   CHECK-NOT:     arith.bitcast
//       CHECK:     gpu.return
func.func @bf16_d128_dense(%q: memref<?x4x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x128xbf16>, %o: memref<?x4x?x128xbf16>, %lse: memref<?x4x?xf32>, %do: memref<?x4x?x128xbf16>, %dq: memref<?x4x?x128xbf16>, %dk: memref<?x2x?x128xbf16>, %dv: memref<?x2x?x128xbf16>) {
  %tq = bufferization.to_tensor %q restrict : memref<?x4x?x128xbf16> to tensor<?x4x?x128xbf16>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x128xbf16> to tensor<?x2x?x128xbf16>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x128xbf16> to tensor<?x2x?x128xbf16>
  %to = bufferization.to_tensor %o restrict : memref<?x4x?x128xbf16> to tensor<?x4x?x128xbf16>
  %tl = bufferization.to_tensor %lse restrict : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %tdo = bufferization.to_tensor %do restrict : memref<?x4x?x128xbf16> to tensor<?x4x?x128xbf16>
  %tdq = bufferization.to_tensor %dq restrict writable : memref<?x4x?x128xbf16> to tensor<?x4x?x128xbf16>
  %tdk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x128xbf16> to tensor<?x2x?x128xbf16>
  %tdv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x128xbf16> to tensor<?x2x?x128xbf16>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<?x4x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>) forward(%to, %tl : tensor<?x4x?x128xbf16>, tensor<?x4x?xf32>) grad_output(%tdo : tensor<?x4x?x128xbf16>) outs(%tdq, %tdk, %tdv : tensor<?x4x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>) -> tensor<?x4x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x4x?x128xbf16>, memref<?x4x?x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x128xbf16>, memref<?x2x?x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x128xbf16>, memref<?x2x?x128xbf16>) -> ()
  return
}

// -----

// f32 and head dims past 128: left to fa-promote-shared-backward.
// CHECK-LABEL: func.func @f32_left
//   CHECK-NOT:   fa.gpu_config
//       CHECK:   fa.attention_backward
func.func @f32_left(%q: memref<?x4x?x64xf32>, %k: memref<?x2x?x64xf32>, %v: memref<?x2x?x64xf32>, %o: memref<?x4x?x64xf32>, %lse: memref<?x4x?xf32>, %do: memref<?x4x?x64xf32>, %dq: memref<?x4x?x64xf32>, %dk: memref<?x2x?x64xf32>, %dv: memref<?x2x?x64xf32>) {
  %tq = bufferization.to_tensor %q restrict : memref<?x4x?x64xf32> to tensor<?x4x?x64xf32>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %to = bufferization.to_tensor %o restrict : memref<?x4x?x64xf32> to tensor<?x4x?x64xf32>
  %tl = bufferization.to_tensor %lse restrict : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %tdo = bufferization.to_tensor %do restrict : memref<?x4x?x64xf32> to tensor<?x4x?x64xf32>
  %tdq = bufferization.to_tensor %dq restrict writable : memref<?x4x?x64xf32> to tensor<?x4x?x64xf32>
  %tdk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %tdv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<?x4x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>) forward(%to, %tl : tensor<?x4x?x64xf32>, tensor<?x4x?xf32>) grad_output(%tdo : tensor<?x4x?x64xf32>) outs(%tdq, %tdk, %tdv : tensor<?x4x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>) causal(bottom_right) -> tensor<?x4x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x4x?x64xf32>, memref<?x4x?x64xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x64xf32>, memref<?x2x?x64xf32>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x64xf32>, memref<?x2x?x64xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @f16_d144_left
//       CHECK:   fa.attention_backward
func.func @f16_d144_left(%q: memref<?x4x?x144xf16>, %k: memref<?x2x?x144xf16>, %v: memref<?x2x?x144xf16>, %o: memref<?x4x?x144xf16>, %lse: memref<?x4x?xf32>, %do: memref<?x4x?x144xf16>, %dq: memref<?x4x?x144xf16>, %dk: memref<?x2x?x144xf16>, %dv: memref<?x2x?x144xf16>) {
  %tq = bufferization.to_tensor %q restrict : memref<?x4x?x144xf16> to tensor<?x4x?x144xf16>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x144xf16> to tensor<?x2x?x144xf16>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x144xf16> to tensor<?x2x?x144xf16>
  %to = bufferization.to_tensor %o restrict : memref<?x4x?x144xf16> to tensor<?x4x?x144xf16>
  %tl = bufferization.to_tensor %lse restrict : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %tdo = bufferization.to_tensor %do restrict : memref<?x4x?x144xf16> to tensor<?x4x?x144xf16>
  %tdq = bufferization.to_tensor %dq restrict writable : memref<?x4x?x144xf16> to tensor<?x4x?x144xf16>
  %tdk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x144xf16> to tensor<?x2x?x144xf16>
  %tdv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x144xf16> to tensor<?x2x?x144xf16>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<?x4x?x144xf16>, tensor<?x2x?x144xf16>, tensor<?x2x?x144xf16>) forward(%to, %tl : tensor<?x4x?x144xf16>, tensor<?x4x?xf32>) grad_output(%tdo : tensor<?x4x?x144xf16>) outs(%tdq, %tdk, %tdv : tensor<?x4x?x144xf16>, tensor<?x2x?x144xf16>, tensor<?x2x?x144xf16>) causal(bottom_right) -> tensor<?x4x?x144xf16>, tensor<?x2x?x144xf16>, tensor<?x2x?x144xf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x4x?x144xf16>, memref<?x4x?x144xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x144xf16>, memref<?x2x?x144xf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x144xf16>, memref<?x2x?x144xf16>) -> ()
  return
}

// -----

// A constant q_offset is cloned into both kernels before their code (the
// diagonal offset adds it).
// CHECK-LABEL: func.func @f16_q_offset
//  CHECK-SAME:   tensor_cores
//       CHECK:   gpu.func @f16_q_offset(
//  CHECK-NEXT:     %[[OFF:.*]] = arith.constant 3 : index
//       CHECK:     arith.addi %{{.*}}, %[[OFF]] : index
//       CHECK:     gpu.return
//       CHECK:   gpu.func @f16_q_offset_dkdv(
//  CHECK-NEXT:     %[[OFF2:.*]] = arith.constant 3 : index
//       CHECK:     arith.addi %{{.*}}, %[[OFF2]] : index
//       CHECK:     gpu.return
func.func @f16_q_offset(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %o: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>, %do: memref<?x4x?x64xf16>, %dq: memref<?x4x?x64xf16>, %dk: memref<?x2x?x64xf16>, %dv: memref<?x2x?x64xf16>) {
  %off = arith.constant 3 : index
  %tq = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %to = bufferization.to_tensor %o restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tl = bufferization.to_tensor %lse restrict : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %tdo = bufferization.to_tensor %do restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tdq = bufferization.to_tensor %dq restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %tdk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %tdv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>) forward(%to, %tl : tensor<?x4x?x64xf16>, tensor<?x4x?xf32>) grad_output(%tdo : tensor<?x4x?x64xf16>) q_offset(%off) outs(%tdq, %tdk, %tdv : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>) causal(bottom_right) -> tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}
