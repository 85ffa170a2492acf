// fa-lower-to-nvvm's kernel option picks the kernel family of each
// attention kernel. kernel=auto (the default) takes wgmma where the chip has
// it (sm_90a) and the op is eligible (f16/bf16, head dims multiples of 64),
// else mma.sync where eligible (f16/bf16, head dims multiples of 16), else
// the SIMT kernel. An explicit family the op is not eligible for, an unknown
// family and the removed tensor-cores/wgmma options are one-line errors.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a" | FileCheck %s --check-prefix=SM90A
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=simt" | FileCheck %s --check-prefix=SIMT --implicit-check-not=mma.sync --implicit-check-not=wgmma.mma_async

// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 kernel=mma" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 kernel=fast" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 tensor-cores=true" 2>&1 | FileCheck %s --check-prefix=OLDTC
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a wgmma=true" 2>&1 | FileCheck %s --check-prefix=OLDWG
// pack-gqa=always (packed query heads: the SIMT and mma.sync kernels pack)
// keeps the f16 kernels off wgmma, on mma.sync where eligible; it cannot
// be combined with kernel=wgmma; an unknown mode is an error.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a pack-gqa=always" | FileCheck %s --check-prefix=PACK --implicit-check-not=wgmma.mma_async
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a kernel=wgmma pack-gqa=always" 2>&1 | FileCheck %s --check-prefix=PACKWG
// RUN: not fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 pack-gqa=yes" 2>&1 | FileCheck %s --check-prefix=PACKBAD
// PACK-LABEL: gpu.binary @attn_f32_kernels
// PACK-NOT: mma.sync
// PACKWG: error: fa-lower-to-nvvm: pack-gqa=always needs the SIMT or mma.sync kernels (kernel=auto, simt or mma); the wgmma kernels do not pack query heads
// PACKBAD: error: fa-lower-to-nvvm: pack-gqa must be auto, always or never, got 'yes'

// split-kv: every attention takes the family kernel=auto gives (SIMT for
// f32, wgmma or mma.sync for f16), in its split-KV form, and a merge kernel
// beside it in the same gpu.module, launched after it.
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_90a split-kv=true" | FileCheck %s --check-prefix=SPLIT
// RUN: fa-opt %s -split-input-file -fa-lower-to-nvvm="chip=sm_80 split-kv=true" | FileCheck %s --check-prefix=SPLIT80
// SPLIT: gpu.launch_func @attn_f32_kernels::@attn_f32
// SPLIT: gpu.launch_func @attn_f32_kernels::@attn_f32_merge
// SPLIT: gpu.binary @attn_f32_kernels
// SPLIT-SAME: .entry attn_f32(
// SPLIT-SAME: .entry attn_f32_merge(
// SPLIT-NOT: gpu.binary @attn_f32_merge_kernels
// SPLIT-NOT: mma.sync
// SPLIT-NOT: wgmma.mma_async
// SPLIT80: gpu.launch_func @attn_f32_kernels::@attn_f32
// SPLIT80: gpu.launch_func @attn_f32_kernels::@attn_f32_merge

// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention of @attn_f32 is not eligible for the mma.sync kernels (f16/bf16 Q, K, V in kernel form, head dims multiples of 16 up to 256); use kernel=auto or kernel=simt
// MMA: error: fa-lower-to-nvvm: kernel=mma: the attention of @attn_f16_d8 is not eligible for the mma.sync kernels
// WGMMA: error: fa-lower-to-nvvm: kernel=wgmma: the attention of @attn_f32 is not eligible for the wgmma kernels (f16/bf16 Q, K, V in kernel form, head dims multiples of 64 up to 256, Dv <= 192 with a mask); use kernel=auto or kernel=simt
// WGMMA: error: fa-lower-to-nvvm: kernel=wgmma: the attention of @attn_f16_d32 is not eligible for the wgmma kernels
// WGMMA: error: fa-lower-to-nvvm: kernel=wgmma: the attention of @attn_f16_d8 is not eligible for the wgmma kernels
// UNKNOWN: error: fa-lower-to-nvvm: kernel must be auto, simt, mma or wgmma, got 'fast'
// OLDTC: error: fa-lower-to-nvvm: the tensor-cores option was replaced by kernel=mma (or kernel=auto)
// OLDWG: error: fa-lower-to-nvvm: the wgmma option was replaced by kernel=wgmma (or kernel=auto)

// f32: SIMT everywhere.
// SM80-LABEL: gpu.binary @attn_f32_kernels
// SM80-NOT:   mma.sync
// SM90A-LABEL: gpu.binary @attn_f32_kernels
// SM90A-NOT:   mma.sync
// SM90A-NOT:   wgmma.mma_async
// SIMT-LABEL: gpu.binary @attn_f32_kernels
func.func @attn_f32(%q: memref<?x2x?x64xf32>, %k: memref<?x2x?x64xf32>, %v: memref<?x2x?x64xf32>, %o: memref<?x2x?x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
         outs(%ot : tensor<?x2x?x64xf32>) -> tensor<?x2x?x64xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x64xf32>, memref<?x2x?x64xf32>) -> ()
  return
}

// -----

// f16, D = 128: mma.sync on sm_80, wgmma on sm_90a.
// SM80-LABEL: gpu.binary @attn_f16_d128_kernels
// SM80:       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SM90A-LABEL: gpu.binary @attn_f16_d128_kernels
// SM90A:       wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// SIMT-LABEL: gpu.binary @attn_f16_d128_kernels
// SPLIT: gpu.launch_func @attn_f16_d128_kernels::@attn_f16_d128
// SPLIT: gpu.launch_func @attn_f16_d128_kernels::@attn_f16_d128_merge
// SPLIT: gpu.binary @attn_f16_d128_kernels
// SPLIT-SAME: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// SPLIT-SAME: .entry attn_f16_d128_merge(
// SPLIT80: gpu.launch_func @attn_f16_d128_kernels::@attn_f16_d128
// SPLIT80: gpu.launch_func @attn_f16_d128_kernels::@attn_f16_d128_merge
// SPLIT80: gpu.binary @attn_f16_d128_kernels
// SPLIT80-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SPLIT80-SAME: .entry attn_f16_d128_merge(
// PACK-LABEL: gpu.binary @attn_f16_d128_kernels
// PACK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
func.func @attn_f16_d128(%q: memref<?x2x?x128xf16>, %k: memref<?x2x?x128xf16>, %v: memref<?x2x?x128xf16>, %o: memref<?x2x?x128xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>)
         outs(%ot : tensor<?x2x?x128xf16>) -> tensor<?x2x?x128xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x128xf16>, memref<?x2x?x128xf16>) -> ()
  return
}

// -----

// f16, D = 32: not a multiple of 64, so auto falls back to mma.sync on
// sm_90a.
// SM80-LABEL: gpu.binary @attn_f16_d32_kernels
// SM80:       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SM90A-LABEL: gpu.binary @attn_f16_d32_kernels
// SM90A-NOT:   wgmma.mma_async
// SM90A:       mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SIMT-LABEL: gpu.binary @attn_f16_d32_kernels
// SPLIT: gpu.launch_func @attn_f16_d32_kernels::@attn_f16_d32
// SPLIT: gpu.launch_func @attn_f16_d32_kernels::@attn_f16_d32_merge
// SPLIT: gpu.binary @attn_f16_d32_kernels
// SPLIT-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SPLIT-SAME: .entry attn_f16_d32_merge(
func.func @attn_f16_d32(%q: memref<?x2x?x32xf16>, %k: memref<?x2x?x32xf16>, %v: memref<?x2x?x32xf16>, %o: memref<?x2x?x32xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x32xf16> to tensor<?x2x?x32xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x32xf16> to tensor<?x2x?x32xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x32xf16> to tensor<?x2x?x32xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x32xf16> to tensor<?x2x?x32xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x32xf16>, tensor<?x2x?x32xf16>, tensor<?x2x?x32xf16>)
         outs(%ot : tensor<?x2x?x32xf16>) -> tensor<?x2x?x32xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x32xf16>, memref<?x2x?x32xf16>) -> ()
  return
}

// -----

// f16, D = 8: not a multiple of 16, so auto falls back to SIMT.
// SM80-LABEL: gpu.binary @attn_f16_d8_kernels
// SM80-NOT:   mma.sync
// SM90A-LABEL: gpu.binary @attn_f16_d8_kernels
// SM90A-NOT:   mma.sync
// SM90A-NOT:   wgmma.mma_async
// SIMT-LABEL: gpu.binary @attn_f16_d8_kernels
func.func @attn_f16_d8(%q: memref<?x2x?x8xf16>, %k: memref<?x2x?x8xf16>, %v: memref<?x2x?x8xf16>, %o: memref<?x2x?x8xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x8xf16> to tensor<?x2x?x8xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x8xf16> to tensor<?x2x?x8xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x8xf16> to tensor<?x2x?x8xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x8xf16> to tensor<?x2x?x8xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x8xf16>, tensor<?x2x?x8xf16>, tensor<?x2x?x8xf16>)
         outs(%ot : tensor<?x2x?x8xf16>) -> tensor<?x2x?x8xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x8xf16>, memref<?x2x?x8xf16>) -> ()
  return
}
