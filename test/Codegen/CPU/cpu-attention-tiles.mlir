// RUN: fa-opt %s -split-input-file -fa-cpu-attention="l2-cache-size=1048576" | FileCheck %s --check-prefix=L2M
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="l2-cache-size=262144" | FileCheck %s --check-prefix=L2S
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="l2-cache-size=4096" | FileCheck %s --check-prefix=TINY
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="vector-width=8 key-rows=2 pv-rows=2 l2-cache-size=1048576" | FileCheck %s --check-prefix=AVX2
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="block-q=32 l2-cache-size=262144" | FileCheck %s --check-prefix=EXPQ
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="block-kv=48 l2-cache-size=4096" | FileCheck %s --check-prefix=EXPKV
// RUN: fa-opt %s -split-input-file -fa-cpu-attention | FileCheck %s --check-prefix=HOST
// RUN: fa-opt %s -split-input-file -fa-cpu-attention="l2-cache-size=1048576 l1-cache-size=49152" | FileCheck %s --check-prefix=L1
// RUN: fa-opt %s -split-input-file -fa-lower-to-cpu="cpu-l2-cache-size=1048576 cpu-l1-cache-size=49152" -mlir-print-ir-after=fa-cpu-attention -o /dev/null 2>&1 | FileCheck %s --check-prefix=L1
// RUN: fa-opt %s -split-input-file -fa-lower-to-cpu="cpu-l2-cache-size=262144" -mlir-print-ir-after=fa-cpu-attention -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: fa-opt %s -split-input-file -fa-lower-to-cpu="cpu-block-q=32 cpu-block-kv=48" -mlir-print-ir-after=fa-cpu-attention -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPEX
// RUN: fa-opt %s -split-input-file -fa-lower-to-cpu="cpu-l2-cache-size=262144 cpu-key-rows=5 cpu-pv-rows=6 cpu-pv-vectors=2" -mlir-print-ir-after=fa-cpu-attention -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPER

// Automatic tile sizes (block-q = block-kv = 0, the default), from the L2
// size per core (f32 scratch, 4 bytes an element; D and Dv rounded up to
// the vector width W):
//   block-q  = 4 W, unless Q^T + O acc (block-q (D + Dv)) > L2 / 4; then
//              the largest multiple of lcm(W, pv-rows) that fits (>= 1);
//   block-kv = the largest multiple of 16 in [16, 512] with
//              block-q (D + Dv) + block-kv (D + Dv) + block-kv block-q
//              (+ block-kv block-q for the mask tile) <= L2 / 2.
// With the L1 data size given, block-kv is at most the largest multiple
// of 16 with block-kv (Dv + block-q (+ block-q for a mask)) <= L1, where
// that is at least 64 keys (48 KiB: D = 64 96 keys, Dv = 96 and the mask
// tile 64, D = 256 the L2 rule's 160).
// The sizes show in the scratch buffers: Q^T is D x block-q, the K tile
// (key rows rounded up to key-rows = 6) x D, the V tile block-kv x Dv, S^T
// (key rows rounded up) x block-q, and the key loop runs
// ceil(kv_end / block-kv) tiles.

// f16, D = Dv = 64. 1 MiB: 64 x 512 (capped); 256 KiB: 64 x 128; 4 KiB:
// the minimum, 16 x 16. AVX2 (W = 8, pv-rows = 2): four vectors are 32
// rows; 32 x 512. Explicit block-q = 32 with 256 KiB: block-kv = 176;
// explicit block-kv = 48 with 4 KiB: block-q = 16.
// L1-LABEL: func.func @d64
//       L1:   arith.ceildivui %{{.*}}, %c96
// L2M-LABEL: func.func @d64
//       L2M:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<516x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<512x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<516x64xf32>
//       L2M:   arith.ceildivui %{{.*}}, %c512
// L2S-LABEL: func.func @d64
//       L2S:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<132x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<128x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<132x64xf32>
//       L2S:   arith.ceildivui %{{.*}}, %c128
// TINY-LABEL: func.func @d64
//       TINY:   memref.alloca() {alignment = 64 : i64} : memref<64x16xf32>
//  TINY-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<18x64xf32>
//  TINY-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
//  TINY-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<18x16xf32>
//       TINY:   arith.ceildivui %{{.*}}, %c16
// AVX2-LABEL: func.func @d64
//       AVX2:   memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//  AVX2-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<512x64xf32>
//  AVX2-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<512x64xf32>
//  AVX2-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<512x32xf32>
// EXPQ-LABEL: func.func @d64
//       EXPQ:   memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//  EXPQ-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<180x64xf32>
//  EXPQ-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<176x64xf32>
// EXPKV-LABEL: func.func @d64
//       EXPKV:   memref.alloca() {alignment = 64 : i64} : memref<64x16xf32>
//  EXPKV-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<48x64xf32>
//  EXPKV-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<48x64xf32>
// The host's L2 (sysconf or sysfs, else 512 KiB): some valid kernel.
// HOST-LABEL: func.func @d64
//       HOST:   memref.alloca() {alignment = 64 : i64} : memref<64x{{16|32|48|64}}xf32>
//       HOST:   scf.forall
// fa-lower-to-cpu passes cpu-l2-cache-size, cpu-block-q and cpu-block-kv
// through.
//       PIPE: IR Dump After FACpuAttentionPass (fa-cpu-attention)
//       PIPE:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//  PIPE-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<132x64xf32>
//  PIPE-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<128x64xf32>
//       PIPEX: IR Dump After FACpuAttentionPass (fa-cpu-attention)
//       PIPEX:   memref.alloca() {alignment = 64 : i64} : memref<64x32xf32>
//  PIPEX-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<48x64xf32>
//  PIPEX-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<48x64xf32>
// The pipeline's register blocks reach the pass: key-rows = 5 rounds the K
// tile's rows to 130... 145, pv-rows = 6 makes block-q a multiple of
// lcm(16, 6) = 48 (and the decode tile 48 rows).
//       PIPER: IR Dump After FACpuAttentionPass (fa-cpu-attention)
//       PIPER:   memref.alloca() {alignment = 64 : i64} : memref<48x64xf32>
//       PIPER:   memref.alloca() {alignment = 64 : i64} : memref<64x48xf32>
//  PIPER-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<145x64xf32>
func.func @d64(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %o: memref<?x2x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
           outs(%ot : tensor<?x2x?x64xf16>) -> tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// bf16, D = 128, Dv = 96 (Q^T + O acc: 56 KiB). 1 MiB: 64 x 400; 256 KiB:
// 64 x 64.
// L1-LABEL: func.func @d128_dv96
//       L1:   memref.alloca() {alignment = 64 : i64} : memref<64x96xf32>
//       L1:   arith.ceildivui %{{.*}}, %c64
// L2M-LABEL: func.func @d128_dv96
//       L2M:   memref.alloca() {alignment = 64 : i64} : memref<128x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<402x128xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<400x96xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<402x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<64x96xf32>
//       L2M:   arith.ceildivui %{{.*}}, %c400
// L2S-LABEL: func.func @d128_dv96
//       L2S:   memref.alloca() {alignment = 64 : i64} : memref<128x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<66x128xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<64x96xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
//       L2S:   arith.ceildivui %{{.*}}, %c64
func.func @d128_dv96(%q: memref<?x2x?x128xbf16>, %k: memref<?x2x?x128xbf16>, %v: memref<?x2x?x96xbf16>, %o: memref<?x2x?x96xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x128xbf16> to tensor<?x2x?x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x128xbf16> to tensor<?x2x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x96xbf16> to tensor<?x2x?x96xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x96xbf16> to tensor<?x2x?x96xbf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x128xbf16>, tensor<?x2x?x128xbf16>, tensor<?x2x?x96xbf16>)
           outs(%ot : tensor<?x2x?x96xbf16>) -> tensor<?x2x?x96xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x2x?x96xbf16>, memref<?x2x?x96xbf16>) -> ()
  return
}

// -----

// An additive mask adds its tile (block-kv x block-q) to every key: f16, D = 64.
// 1 MiB: 64 x 480; 256 KiB: 64 x 96.
// L1-LABEL: func.func @mask
//       L1:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//  L1-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
//  L1-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
// L2M-LABEL: func.func @mask
//       L2M:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<480x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<480x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<480x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<480x64xf32>
// L2S-LABEL: func.func @mask
//       L2S:   memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<96x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<96x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<96x64xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<96x64xf32>
func.func @mask(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %mask: memref<1x1x?x?xf32>, %o: memref<?x2x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %mt = bufferization.to_tensor %mask restrict : memref<1x1x?x?xf32> to tensor<1x1x?x?xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
           mask(%mt : tensor<1x1x?x?xf32>)
           outs(%ot : tensor<?x2x?x64xf16>) -> tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// f16, D = Dv = 256 (Q^T + O acc of 64 rows: 128 KiB). 1 MiB: 64 x 160;
// 256 KiB: Q^T + O acc must shrink to 32 rows, then the minimum 16 keys.
// L1-LABEL: func.func @d256
//       L1:   memref.alloca() {alignment = 64 : i64} : memref<162x256xf32>
//  L1-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<160x256xf32>
// L2M-LABEL: func.func @d256
//       L2M:   memref.alloca() {alignment = 64 : i64} : memref<256x64xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<162x256xf32>
//  L2M-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<160x256xf32>
// L2S-LABEL: func.func @d256
//       L2S:   memref.alloca() {alignment = 64 : i64} : memref<256x32xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<18x256xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<16x256xf32>
//  L2S-NEXT:   memref.alloca() {alignment = 64 : i64} : memref<18x32xf32>
func.func @d256(%q: memref<?x2x?x256xf16>, %k: memref<?x2x?x256xf16>, %v: memref<?x2x?x256xf16>, %o: memref<?x2x?x256xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x256xf16>, tensor<?x2x?x256xf16>, tensor<?x2x?x256xf16>)
           outs(%ot : tensor<?x2x?x256xf16>) -> tensor<?x2x?x256xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x2x?x256xf16>, memref<?x2x?x256xf16>) -> ()
  return
}
