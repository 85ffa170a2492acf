// fa-lower-to-nvvm with kernel=auto (the default) on sm_80 and sm_90, or
// kernel=mma: f16 and bf16 kernels become
// FA2-style PTX on the tensor cores for sm_80 and sm_90: mma.sync m16n8k16
// with f32 accumulators (bf16 through fa-legalize-mma-bf16), ldmatrix (plain
// for Q and K, .trans for V), the cp.async pipeline with commit/wait groups,
// quad shuffles, dynamic shared memory, no libdevice and no local memory.
// An f32 kernel in the same module keeps the SIMT path under kernel=auto.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80" | FileCheck %s --check-prefixes=CHECK,SM80
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90 kernel=auto" | FileCheck %s --check-prefixes=CHECK,SM90
// No libdevice calls (exp2 is the ex2.approx.f32 intrinsic), no local memory.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90" | FileCheck %s --check-prefix=NOLIB --implicit-check-not=__nv_ --implicit-check-not=.local
// NOLIB: gpu.binary @attn_f16_kernels
// NOLIB: gpu.binary @attn_bf16_kernels
// kernel=simt: every kernel stays on the SIMT path.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 kernel=simt" | FileCheck %s --check-prefix=SIMT --implicit-check-not=mma.sync --implicit-check-not=ldmatrix --implicit-check-not=cp.async
// SIMT: gpu.binary @attn_f16_kernels
// SIMT: gpu.binary @attn_bf16_kernels
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 kernel=mma tc-stages=5" 2>&1 | FileCheck %s --check-prefix=STAGES

// STAGES: error: fa-map-to-tensor-cores: stages must be 2, 3 or 4, got 5
// The pipeline's chip bounds the tiles' workgroup memory.
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_86 kernel=mma tc-block-q=128" 2>&1 | FileCheck %s --check-prefix=SM86
// SM86: error: fa-map-to-tensor-cores: the tiles need 104448 bytes of workgroup memory, more than the 101376 one block may use on sm_86

// CHECK-LABEL: llvm.func @attn_f16(
// CHECK:     gpu.launch_func  @attn_f16_kernels::@attn_f16 blocks in
// CHECK-SAME: dynamic_shared_memory_size
// SM80:      gpu.binary @attn_f16_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">
// SM90:      gpu.binary @attn_f16_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// (LLVM schedules the loop freely: no order among these.)
// CHECK-DAG: .maxntid 128, 1, 1
// CHECK-DAG: .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// CHECK-DAG: cp.async.cg.shared.global [{{[^]]*}}], [{{[^]]*}}], 16, %r
// CHECK-DAG: cp.async.commit_group;
// CHECK-DAG: cp.async.wait_group \090;
// CHECK-DAG: bar.sync \090;
// CHECK-DAG: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK-DAG: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: ex2.approx.f32

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

// CHECK-LABEL: llvm.func @attn_bf16(
// CHECK:      gpu.binary @attn_bf16_kernels
// CHECK-DAG:  cp.async.cg.shared.global
// CHECK-DAG:  ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-DAG:  ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// CHECK-DAG:  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

func.func @attn_bf16(%q: memref<?x4x?x64xbf16>, %k: memref<?x4x?x64xbf16>, %v: memref<?x4x?x64xbf16>,
                     %o: memref<?x4x?x64xbf16>, %lse: memref<?x4x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>)
           outs(%ot : tensor<?x4x?x64xbf16>, %st : tensor<?x4x?xf32>) -> tensor<?x4x?x64xbf16>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x4x?x64xbf16>, memref<?x4x?x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}

// -----

// CHECK-LABEL: llvm.func @attn_f32(
// CHECK:      gpu.binary @attn_f32_kernels
// CHECK-SAME: shfl.sync.idx.b32

func.func @attn_f32(%q: memref<?x4x?x64xf32>, %o: memref<?x4x?x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf32> to tensor<?x4x?x64xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf32> to tensor<?x4x?x64xf32>
  %r = fa.attention ins(%qt, %qt, %qt : tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>, tensor<?x4x?x64xf32>)
         outs(%ot : tensor<?x4x?x64xf32>) -> tensor<?x4x?x64xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x?x64xf32>, memref<?x4x?x64xf32>) -> ()
  return
}
