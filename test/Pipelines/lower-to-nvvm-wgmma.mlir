// fa-lower-to-nvvm on chip sm_90a (kernel=auto, the default, or kernel=wgmma):
// f16 and bf16 kernels with
// head dims multiples of 64 become FA3-style PTX on the Hopper warpgroup
// tensor cores: wgmma.mma_async m64nNk16 with f32 accumulators (S = Q K^T
// with K-major B: imm-trans-b 0; O += P V with MN-major V: imm-trans-b 1),
// wgmma fence/commit/wait, fence.proxy.async before the barriers, the
// cp.async pipeline, quad shuffles, dynamic shared memory, no libdevice and
// no local memory. A D = 96 kernel in the same module (not a multiple of 64)
// takes fa-map-to-tensor-cores under kernel=auto.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=auto" | FileCheck %s --check-prefix=NOLIB --implicit-check-not=__nv_ --implicit-check-not=.local
// NOLIB: gpu.binary @attn_f16_kernels
// NOLIB: gpu.binary @attn_bf16_kernels
// NOLIB: gpu.binary @attn_d96_kernels
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=auto" | FileCheck %s --check-prefix=BOTH
// Two warpgroups and 128-key tiles.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a wg-warpgroups=2 wg-block-kv=128" | FileCheck %s --check-prefix=WG2
// kernel=simt: no kernel uses wgmma.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=simt" | FileCheck %s --check-prefix=PLAIN --implicit-check-not=wgmma
// PLAIN: gpu.binary @attn_f16_kernels
// wgmma exists only on sm_90a: any other chip is a clear error.
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90 kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=CHIP90
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=CHIP80
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a wg-stages=5" 2>&1 | FileCheck %s --check-prefix=STAGES

// CHIP90: error: fa-lower-to-nvvm: kernel=wgmma needs chip=sm_90a (wgmma.mma_async exists only on the sm_90a target), got 'sm_90'
// CHIP80: error: fa-lower-to-nvvm: kernel=wgmma needs chip=sm_90a (wgmma.mma_async exists only on the sm_90a target), got 'sm_80'
// STAGES: error: fa-map-to-wgmma: stages must be 2, 3 or 4, got 5

// CHECK-LABEL: llvm.func @attn_f16(
// CHECK:     gpu.launch_func  @attn_f16_kernels::@attn_f16 blocks in
// CHECK-SAME: dynamic_shared_memory_size
// CHECK:      gpu.binary @attn_f16_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">
// CHECK-DAG: .target sm_90a
// CHECK-DAG: .maxntid 128, 1, 1
// CHECK-DAG: .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// CHECK-DAG: cp.async.cg.shared.global [{{[^]]*}}], [{{[^]]*}}], 16, %r
// CHECK-DAG: cp.async.commit_group;
// CHECK-DAG: cp.async.wait_group \090;
// CHECK-DAG: fence.proxy.async.shared::cta;
// CHECK-DAG: bar.sync \090;
// CHECK-DAG: wgmma.fence.sync.aligned;
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{[^;]*}}, p, 1,  1, 0,  0;
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{[^;]*}}, p, 1,  1, 0,  1;
// CHECK-DAG: wgmma.commit_group.sync.aligned;
// CHECK-DAG: wgmma.wait_group.sync.aligned \090;
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: ex2.approx.f32

// BOTH-LABEL: gpu.binary @attn_f16_kernels
// BOTH: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// WG2-LABEL: gpu.binary @attn_f16_kernels
// WG2-DAG: .maxntid 256, 1, 1
// WG2-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{[^;]*}}, p, 1,  1, 0,  0;

func.func @attn_f16(%q: memref<?x8x?x128xf16>, %k: memref<?x2x?x128xf16>, %v: memref<?x2x?x128xf16>,
                    %o: memref<?x8x?x128xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x128xf16> to tensor<?x8x?x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x128xf16> to tensor<?x8x?x128xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>)
         outs(%ot : tensor<?x8x?x128xf16>) causal(bottom_right) -> tensor<?x8x?x128xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x?x128xf16>, memref<?x8x?x128xf16>) -> ()
  return
}

// -----

// bf16, D = 64, key lengths and LSE.

// CHECK-LABEL: llvm.func @attn_bf16(
// CHECK:      gpu.binary @attn_bf16_kernels
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1,  1, 0,  0;
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{[^;]*}}, p, 1,  1, 0,  1;
// CHECK-DAG: fence.proxy.async.shared::cta;

func.func @attn_bf16(%q: memref<?x4x?x64xbf16>, %k: memref<?x4x?x64xbf16>, %v: memref<?x4x?x64xbf16>,
                     %lens: memref<?xi32>, %o: memref<?x4x?x64xbf16>, %lse: memref<?x4x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>)
           kv_lens(%lt : tensor<?xi32>) outs(%ot : tensor<?x4x?x64xbf16>, %st : tensor<?x4x?xf32>)
           -> tensor<?x4x?x64xbf16>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x4x?x64xbf16>, memref<?x4x?x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}

// -----

// D = 96 is not a multiple of 64: no wgmma; mma.sync under kernel=auto.

// CHECK-LABEL: llvm.func @attn_d96(
// CHECK:      gpu.binary @attn_d96_kernels
// CHECK-NOT:  wgmma
// BOTH-LABEL: gpu.binary @attn_d96_kernels
// BOTH-NOT:   wgmma
// BOTH:       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

func.func @attn_d96(%q: memref<?x2x?x96xf16>, %o: memref<?x2x?x96xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x96xf16> to tensor<?x2x?x96xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x96xf16> to tensor<?x2x?x96xf16>
  %r = fa.attention ins(%qt, %qt, %qt : tensor<?x2x?x96xf16>, tensor<?x2x?x96xf16>, tensor<?x2x?x96xf16>)
         outs(%ot : tensor<?x2x?x96xf16>) -> tensor<?x2x?x96xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x96xf16>, memref<?x2x?x96xf16>) -> ()
  return
}
