// RUN: fa-opt %s -split-input-file -fa-map-to-tensor-cores | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-q=32 block-kv=32 stages=3" | FileCheck %s --check-prefix=OPTS
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-q=24" 2>&1 | FileCheck %s --check-prefix=BADQ
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-kv=40" 2>&1 | FileCheck %s --check-prefix=BADKV
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="stages=1" 2>&1 | FileCheck %s --check-prefix=BADSTAGES
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-q=128 block-kv=16" 2>&1 | FileCheck %s --check-prefix=UNEVEN

// BADQ: error: fa-map-to-tensor-cores: block-q must be 16, 32, 48, ... or 128 (16 rows per warp), got 24
// BADKV: error: fa-map-to-tensor-cores: block-kv must be a positive multiple of 16 up to 256, got 40
// BADSTAGES: error: fa-map-to-tensor-cores: stages must be 2, 3 or 4, got 1
// The workgroup memory must fit one block of the chip (the chip table):
// block-q = 128 at D = 128 needs 104448 bytes, over the 99 KiB of sm_86 but
// within the 163 KiB of sm_80; 128 x 128 tiles in 4 stages fit no chip.
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-q=128 chip=sm_86" 2>&1 | FileCheck %s --check-prefix=SM86
// RUN: fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-q=128 chip=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="block-q=128 block-kv=128 stages=4 chip=sm_90" 2>&1 | FileCheck %s --check-prefix=NOCHIP
// RUN: not fa-opt %s -split-input-file -fa-map-to-tensor-cores="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=BADCHIP
// SM86: error: fa-map-to-tensor-cores: the tiles need 104448 bytes of workgroup memory, more than the 101376 one block may use on sm_86 (D = 128, Dv = 128, block-q = 128, block-kv = 64, stages = 2)
// SM80: dynamic_shared_bytes = 104448
// NOCHIP: error: fa-map-to-tensor-cores: the tiles need 313344 bytes of workgroup memory, more than the 232448 one block may use on sm_90 (D = 128, Dv = 128, block-q = 128, block-kv = 128, stages = 4)
// BADCHIP: error: fa-map-to-tensor-cores: chip 'sm_75' is not supported; expected sm_80, sm_86, sm_89, sm_90 or sm_90a
// UNEVEN: error: fa-map-to-tensor-cores: the 16-byte chunks of a tile must split evenly over the 256 threads (block-q = 128, block-kv = 16, D = 64, Dv = 64)

// An f16 GQA kernel with key lengths, bottom-right causality and LSE, D = 128:
// the host launches the kernel over (ceil(Nq/64), Hq, B) with 128 threads and
// the dynamic workgroup memory of Q (64 x 136), two K and two V slots
// (2 x 64 x 136 each): 87040 bytes.

// CHECK-LABEL: func.func @gqa_causal(
//  CHECK-SAME:     fa.gpu_config = {block_kv = 64 : index, block_q = 64 : index, dynamic_shared_bytes = 87040 : index, stages = 2 : index, tensor_cores, threads = 128 : index}
//   CHECK-NOT:   fa.attention
//       CHECK:   %[[NQ:.*]] = memref.dim %{{.*}}, %c2
//       CHECK:   %[[B:.*]] = memref.dim %{{.*}}, %c0
//       CHECK:   %[[TILES:.*]] = arith.ceildivui %[[NQ]], %c64
//       CHECK:   %[[SMEM:.*]] = arith.constant 87040 : i32
//       CHECK:   gpu.launch_func @gqa_causal_kernels::@gqa_causal blocks in (%[[TILES]], %c8, %[[B]]) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %[[SMEM]] args(
//       CHECK:   return

// CHECK: gpu.module @gqa_causal_kernels
// CHECK: gpu.func @gqa_causal({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// The key lengths are clamped to [0, Nk] and the causal bound to
// q0 + rows + (Nk - Nq): tiles past kv_end are never visited.
// CHECK:   %[[LEN:.*]] = memref.load %arg3[%block_id_z]
// CHECK:   %[[LENI:.*]] = arith.index_cast %[[LEN]]
// CHECK:   %[[LENP:.*]] = arith.maxsi %[[LENI]], %c0
// CHECK:   %[[END0:.*]] = arith.minsi %[[LENP]], %[[NK:.*]] : index
// CHECK:   %[[ROWSEND:.*]] = arith.addi %[[Q0:.*]], %[[ROWS:.*]] : index
// CHECK:   %[[CEND:.*]] = arith.addi %[[ROWSEND]], %[[DIAG:.*]] : index
// CHECK:   %[[CENDP:.*]] = arith.maxsi %[[CEND]], %c0
// CHECK:   %[[KVEND:.*]] = arith.minsi %[[CENDP]], %[[END0]]
// CHECK:   %[[NUMKV:.*]] = arith.ceildivui %[[KVEND]], %c64
// CHECK:   %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK:   memref.view %[[DYN]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x136xf16, #gpu.address_space<workgroup>>
// CHECK:   memref.view %[[DYN]][%c17408][] : {{.*}} to memref<2x64x136xf16, #gpu.address_space<workgroup>>
// CHECK:   memref.view %[[DYN]][%c52224][] : {{.*}} to memref<2x64x136xf16, #gpu.address_space<workgroup>>
// Prologue: Q and K/V tile 0 in one cp.async group, rows past the end
// zero-filled (srcElements 0).
// CHECK:   scf.if
// CHECK:     %[[NSRC:.*]] = arith.select %{{.*}}, %c8{{[_0-9]*}}, %c0{{[_0-9]*}} : index
// CHECK:     nvgpu.device_async_copy %arg0[%block_id_z, %block_id_y, %{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 8, %[[NSRC]] {bypassL1}
// CHECK:     nvgpu.device_async_copy %arg1[%block_id_z, %[[KVH:.*]], %{{.*}}, %{{.*}}], %{{.*}}[%c0{{.*}}, %{{.*}}, %{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK:     nvgpu.device_async_copy %arg2[%block_id_z, %[[KVH]],
// CHECK:     %[[G0:.*]] = nvgpu.device_async_create_group
// CHECK:     scf.for %{{.*}} = %c0{{.*}} to %[[NUMKV]]
// CHECK:       nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
// CHECK-NEXT:  gpu.barrier
// CHECK:       nvgpu.device_async_copy %arg1
// CHECK:       nvgpu.device_async_create_group
// NaN/inf in V must not leak through 0 * NaN into rows that mask the key: a
// tile crossing the diagonal of the block's first row tests its V tile in
// workgroup memory (16-byte reads, exponent bits all set), ORs over the
// lanes, writes per-warp flags into the row padding of Q (column D = 128),
// and after a barrier every thread reads them back: one block-uniform i1.
// CHECK:       %[[BCROSS:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : index
// CHECK:       %[[VBAD:.*]] = scf.if %[[BCROSS]] -> (i1) {
// CHECK:         arith.constant dense<1024> : vector<8xi16>
// CHECK:         %[[CHUNK:.*]] = vector.load %[[VS:.*]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x64x136xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK:         arith.bitcast %[[CHUNK]] : vector<8xf16> to vector<8xi16>
// CHECK:         vector.reduction <or>, %{{.*}} : vector<8xi16> into i16
// CHECK:         gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c8_i32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK:         scf.if
// CHECK:           memref.store %{{.*}}, %[[QS:.*]][%{{.*}}, %{{.*}}] : memref<64x136xf16, #gpu.address_space<workgroup>>
// CHECK:         gpu.barrier
// CHECK:         vector.load %[[QS]][%{{.*}}, %c128{{.*}}] : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<4xf16>
// CHECK:         vector.load %[[QS]][%{{.*}}, %c128{{.*}}] : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<4xf16>
// CHECK:         vector.load %[[QS]][%{{.*}}, %c128{{.*}}] : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<4xf16>
// CHECK:         vector.load %[[QS]][%{{.*}}, %c128{{.*}}] : memref<64x136xf16, #gpu.address_space<workgroup>>, vector<4xf16>
//  CHECK-NOT:    vector.load %[[QS]][%{{.*}}, %c128{{.*}}]
// CHECK:         scf.yield %{{.*}} : i1
// CHECK:       } else {
// CHECK:         scf.yield %false : i1
// S = Q K^T: Q and K fragments by ldmatrix, m16n8k16.
// CHECK:       nvgpu.ldmatrix %{{.*}}[%{{.*}}, %{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<64x136xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:       nvgpu.ldmatrix %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<2x64x136xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK:       vector.shuffle %{{.*}}, %{{.*}} [0, 1] : vector<4x2xf16>, vector<4x2xf16>
// CHECK:       nvgpu.mma.sync(%{{.*}}, %{{.*}}, %{{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// Only tiles holding kv_end or crossing the diagonal are masked.
// CHECK:       %[[PARTIAL:.*]] = arith.cmpi sgt, %{{.*}}, %[[KVEND]]
// CHECK:       %[[CROSS:.*]] = arith.cmpi sgt
// CHECK:       %[[NEED:.*]] = arith.ori %[[PARTIAL]], %[[CROSS]]
// CHECK:       scf.if %[[NEED]] -> (vector<2x2xf32>
// CHECK:         arith.cmpi slt, %{{.*}}, %[[KVEND]]
// CHECK:         arith.cmpi sle
// CHECK:         arith.select %{{.*}}, %{{.*}}, %cst
// CHECK:       } else {
// Online softmax: quad row max, -inf guard, exp2.
// CHECK:       vector.reduction <maximumf>
// CHECK:       gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK:       gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK:       arith.cmpf oeq, %{{.*}}, %cst
// CHECK:       llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// Only with NaN/inf in V: the keys each row attends (masked score above
// -inf), as bits of two 32-key words per row, ORed over the quad.
// CHECK:       %[[WORDS:.*]]:4 = scf.if %[[VBAD]] -> (i32, i32, i32, i32) {
// CHECK:         arith.cmpf une, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.shli
// CHECK:         gpu.shuffle  xor
// CHECK:       } else {
// P V with P from registers and V through ldmatrix.trans.
// CHECK:       arith.truncf %{{.*}} : vector<2x2xf32> to vector<2x2xf16>
// CHECK:       vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3] : vector<2x2xf16>, vector<2x2xf16>
// Only with NaN/inf in V: key by key, each lane adds the NaN/inf elements
// of its O columns to the rows attending the key; then, after a barrier, the
// block zeroes them in workgroup memory for the mma.
// CHECK:       scf.if %[[VBAD]] -> (vector<2x2xf32>
// CHECK:         scf.for %[[KEY:.*]] = %{{.*}} to %c32{{.*}} step
// CHECK:           arith.shrui %[[WORDS]]#0
// CHECK:           arith.shrui %[[WORDS]]#2
// CHECK:           vector.load %[[VS]][%{{.*}}, %[[KEY]], %{{.*}}] : memref<2x64x136xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK:           arith.bitcast %{{.*}} : vector<2xf16> to vector<2xi16>
// CHECK:           arith.cmpi ult, %{{.*}}, %{{.*}} : vector<2xi16>
// CHECK:         scf.for
// CHECK:           arith.shrui %[[WORDS]]#1
// CHECK:         gpu.barrier
// CHECK:         arith.cmpi ult, %{{.*}}, %{{.*}} : vector<8xi16>
// CHECK:         vector.store %{{.*}}, %[[VS]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x64x136xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK:         gpu.barrier
// CHECK:       } else {
// CHECK:       nvgpu.ldmatrix %[[VS]]{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK:       nvgpu.mma.sync
// CHECK:       scf.yield
// CHECK:     nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
// Epilogue: l reduced over the quad, O = 0 for empty rows, LSE = -inf.
// CHECK:   gpu.shuffle xor
// CHECK:   arith.cmpf oeq
// CHECK:   llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK:   scf.if
// CHECK:     vector.store %{{.*}}, %arg4[%block_id_z, %block_id_y, %{{.*}}, %{{.*}}] : memref<?x8x?x128xf16>, vector<2xf16>
// CHECK:     memref.store %{{.*}}, %arg5[%block_id_z, %block_id_y, %{{.*}}] : memref<?x8x?xf32>
// CHECK:   gpu.return

// OPTS-LABEL: func.func @gqa_causal(
//  OPTS-SAME:     fa.gpu_config = {block_kv = 32 : index, block_q = 32 : index, dynamic_shared_bytes = 60928 : index, stages = 3 : index, tensor_cores, threads = 64 : index}
// OPTS: gpu.func @gqa_causal({{.*}}) kernel attributes {known_block_size = array<i32: 64, 1, 1>}
// Three stages: tiles 0 and 1 in flight before the loop, wait for one.
// OPTS: nvgpu.device_async_create_group
// OPTS: nvgpu.device_async_create_group
// OPTS: scf.for
// OPTS:   nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}

func.func @gqa_causal(%q: memref<?x8x?x128xf16>, %k: memref<?x2x?x128xf16>, %v: memref<?x2x?x128xf16>,
                      %lens: memref<?xi32>, %o: memref<?x8x?x128xf16>, %lse: memref<?x8x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x128xf16> to tensor<?x8x?x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x128xf16> to tensor<?x2x?x128xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x128xf16> to tensor<?x8x?x128xf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x?xf32> to tensor<?x8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x128xf16>, tensor<?x2x?x128xf16>, tensor<?x2x?x128xf16>)
           kv_lens(%lt : tensor<?xi32>) outs(%ot : tensor<?x8x?x128xf16>, %st : tensor<?x8x?xf32>)
           causal(bottom_right) -> tensor<?x8x?x128xf16>, tensor<?x8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x?x128xf16>, memref<?x8x?x128xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x?xf32>, memref<?x8x?xf32>) -> ()
  return
}

// -----

// A bf16 kernel with a broadcast boolean mask (i8 in memory): every tile is
// masked, the mask read per fragment element at clamped indices; no causal
// bound; bf16 fragments.

// CHECK-LABEL: func.func @bool_mask(
// CHECK: gpu.func @bool_mask(
// CHECK:   scf.for
// With a mask every tile tests its V tile for NaN/inf, with no scf.if around
// the test; the bf16 lowest exponent bit is 0x80.
//  CHECK-NOT:   -> (i1)
// CHECK:     arith.constant dense<128> : vector<8xi16>
// CHECK:     vector.load %{{.*}} : memref<2x64x72xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// CHECK:     gpu.barrier
// CHECK:     vector.load %{{.*}}[%{{.*}}, %c64{{.*}}] : memref<64x72xbf16, #gpu.address_space<workgroup>>, vector<4xbf16>
// CHECK:     nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK-NOT: scf.if
// CHECK:     %[[M:.*]] = memref.load %arg3[%c0{{.*}}, %c0{{.*}}, %{{.*}}, %{{.*}}] : memref<1x1x?x?xi8>
// CHECK:     arith.cmpi ne, %[[M]], %c0_i8
// CHECK:     vector.reduction <maximumf>
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<2x64x72xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK:   vector.store %{{.*}}, %arg4[{{.*}}] : memref<?x4x?x64xbf16>, vector<2xbf16>
// CHECK-NOT: memref.store

func.func @bool_mask(%q: memref<?x4x?x64xbf16>, %k: memref<?x4x?x64xbf16>, %v: memref<?x4x?x64xbf16>,
                     %mask: memref<1x1x?x?xi8>, %o: memref<?x4x?x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %mb = bufferization.to_tensor %mask restrict : memref<1x1x?x?xi8> to tensor<1x1x?x?xi8>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %d2 = tensor.dim %mb, %c2 : tensor<1x1x?x?xi8>
  %d3 = tensor.dim %mb, %c3 : tensor<1x1x?x?xi8>
  %e = tensor.empty(%d2, %d3) : tensor<1x1x?x?xi1>
  %mt = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%mb : tensor<1x1x?x?xi8>) outs(%e : tensor<1x1x?x?xi1>) {
  ^bb0(%x: i8, %y: i1):
    %z = arith.constant 0 : i8
    %ne = arith.cmpi ne, %x, %z : i8
    linalg.yield %ne : i1
  } -> tensor<1x1x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xbf16> to tensor<?x4x?x64xbf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>)
         mask(%mt : tensor<1x1x?x?xi1>) outs(%ot : tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x?x64xbf16>, memref<?x4x?x64xbf16>) -> ()
  return
}

// -----

// f32 inputs are left to the SIMT path (fa-promote-shared / fa-map-to-gpu).

// CHECK-LABEL: func.func @f32_untouched(
//   CHECK-NOT:   fa.gpu_config
//       CHECK:   fa.attention
//   CHECK-NOT: gpu.module
func.func @f32_untouched(%q: memref<?x2x?x64xf32>, %o: memref<?x2x?x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %r = fa.attention ins(%qt, %qt, %qt : tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
         outs(%ot : tensor<?x2x?x64xf32>) -> tensor<?x2x?x64xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x64xf32>, memref<?x2x?x64xf32>) -> ()
  return
}

// -----

// A head dim that is not a multiple of 16 (D = 40) is left alone too.

// CHECK-LABEL: func.func @d40_untouched(
//   CHECK-NOT:   fa.gpu_config
//       CHECK:   fa.attention
//   CHECK-NOT: gpu.module
func.func @d40_untouched(%q: memref<?x2x?x40xf16>, %o: memref<?x2x?x40xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x40xf16> to tensor<?x2x?x40xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x40xf16> to tensor<?x2x?x40xf16>
  %r = fa.attention ins(%qt, %qt, %qt : tensor<?x2x?x40xf16>, tensor<?x2x?x40xf16>, tensor<?x2x?x40xf16>)
         outs(%ot : tensor<?x2x?x40xf16>) -> tensor<?x2x?x40xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x40xf16>, memref<?x2x?x40xf16>) -> ()
  return
}

// -----

// An f16 op on tensors (not the kernel form) is left alone.

// CHECK-LABEL: func.func @tensor_form(
//       CHECK:   fa.attention
//   CHECK-NOT: gpu.module
func.func @tensor_form(%q: tensor<1x2x16x64xf16>, %o: tensor<1x2x16x64xf16>) -> tensor<1x2x16x64xf16> {
  %r = fa.attention ins(%q, %q, %q : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>)
         outs(%o : tensor<1x2x16x64xf16>) -> tensor<1x2x16x64xf16>
  return %r : tensor<1x2x16x64xf16>
}

// -----

// A boolean mask held as i1 in memory is and-ed in directly; an f16 additive
// mask is scaled by log2(e) and added to the scores.

// CHECK-LABEL: func.func @i1_mask(
// CHECK: gpu.func @i1_mask(
// CHECK:   %[[M:.*]] = memref.load %arg3[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x2x?x?xi1>
// CHECK:   arith.andi %{{.*}}, %[[M]] : i1
func.func @i1_mask(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                   %mask: memref<?x2x?x?xi1>, %o: memref<?x2x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %mt = bufferization.to_tensor %mask restrict : memref<?x2x?x?xi1> to tensor<?x2x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         mask(%mt : tensor<?x2x?x?xi1>) outs(%ot : tensor<?x2x?x64xf16>) -> tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @additive_mask(
// CHECK: gpu.func @additive_mask(
// CHECK:   %[[M:.*]] = memref.load %arg3[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<1x1x?x?xf16>
// CHECK:   %[[MF:.*]] = arith.extf %[[M]] : f16 to f32
// CHECK:   %[[ML:.*]] = arith.mulf %[[MF]], %{{.*}} : f32
// CHECK:   arith.addf %{{.*}}, %[[ML]] : f32
func.func @additive_mask(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                         %mask: memref<1x1x?x?xf16>, %o: memref<?x2x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %mt = bufferization.to_tensor %mask restrict : memref<1x1x?x?xf16> to tensor<1x1x?x?xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         mask(%mt : tensor<1x1x?x?xf16>) outs(%ot : tensor<?x2x?x64xf16>) -> tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// No causality and no mask: the only removed keys are those at or past
// kv_end, whose K/V rows the copies zero-fill, so no tile tests V for NaN/inf
// (one barrier per tile, no slow path).

// CHECK-LABEL: func.func @lens_only(
// CHECK: gpu.func @lens_only(
// CHECK:   scf.for
// CHECK:     gpu.barrier
//  CHECK-NOT:     gpu.barrier
//  CHECK-NOT:     vector<8xi16>
//  CHECK-NOT:     scf.if %{{.*}} -> (i1)
// CHECK:     nvgpu.mma.sync
// CHECK:   gpu.return
func.func @lens_only(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                     %lens: memref<?xi32>, %o: memref<?x2x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         kv_lens(%lt : tensor<?xi32>) outs(%ot : tensor<?x2x?x64xf16>) -> tensor<?x2x?x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x64xf16>, memref<?x2x?x64xf16>) -> ()
  return
}

// -----

// The score/mask modifiers: the slopes, the segment ids and the q_offset
// (an index argument) are kernel arguments; the diagonal offset takes the
// q_offset; the key loop starts at the tile holding the window's left
// bound of the block's first row (q0 + off - 100, clamped at 0, rounded
// down to block-kv) and runs to kv_end; the head's slope is loaded once
// per block; the softcap's tanh is a rational approximation (no math.tanh
// is left); masked tiles read the key segment ids.
// CHECK-LABEL: func.func @modifiers(
//  CHECK-SAME:     tensor_cores
//       CHECK:   gpu.launch_func @modifiers_kernels::@modifiers {{.*}} args(%arg0 : memref<?x4x?x64xf16>, %arg1 : memref<?x2x?x64xf16>, %arg2 : memref<?x2x?x64xf16>, %arg3 : memref<?x4xf32>, %arg4 : memref<?x?xi32>, %arg5 : memref<?x?xi32>, %arg6 : index, %arg7 : memref<?x4x?x64xf16>)
//       CHECK: gpu.func @modifiers(%[[Q:.*]]: memref<?x4x?x64xf16>, %{{.*}}: memref<?x2x?x64xf16>, %{{.*}}: memref<?x2x?x64xf16>, %[[AL:.*]]: memref<?x4xf32>, %[[QS:.*]]: memref<?x?xi32>, %[[KS:.*]]: memref<?x?xi32>, %[[P:.*]]: index, %{{.*}}: memref<?x4x?x64xf16>)
//       CHECK:   %[[OFF:.*]] = arith.addi %{{.*}}, %[[P]] : index
//       CHECK:   %[[LEFT:.*]] = arith.subi %{{.*}}, %c100 : index
//       CHECK:   %[[FIRST:.*]] = arith.maxsi %{{.*}}, %[[LEFT]] : index
//       CHECK:   %[[T:.*]] = arith.divui %[[FIRST]], %{{.*}} : index
//       CHECK:   %[[BEGIN:.*]] = arith.muli %[[T]], %{{.*}} : index
//       CHECK:   %[[SPAN:.*]] = arith.subi %{{.*}}, %[[BEGIN]] : index
//       CHECK:   arith.maxsi %[[SPAN]]
//       CHECK:   memref.load %[[AL]][%{{.*}}, %{{.*}}] : memref<?x4xf32>
//   CHECK-NOT:   math.tanh
//       CHECK:   memref.load %[[QS]]
//       CHECK:   memref.load %[[KS]]
//   CHECK-NOT:   math.tanh
//       CHECK: gpu.return
func.func @modifiers(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %al: memref<?x4xf32>, %qs: memref<?x?xi32>, %ks: memref<?x?xi32>, %p: index, %o: memref<?x4x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %alt = bufferization.to_tensor %al restrict : memref<?x4xf32> to tensor<?x4xf32>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         alibi(%alt : tensor<?x4xf32>) segments(%qst, %kst : tensor<?x?xi32>, tensor<?x?xi32>) q_offset(%p)
         outs(%ot : tensor<?x4x?x64xf16>) causal(top_left) window(100, 0) softcap(3.0e+01) -> tensor<?x4x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  return
}

// -----

// Document masking and a mask_mod's block mask: the block's query id range
// (a warp reduction of the ids), then per key tile the block-mask entry and
// the key id range decide whether the tile is copied (zero-filled without a
// read otherwise) and computed.
//       CHECK-LABEL: gpu.func @doc_block_mask
//       CHECK:   memref.load %arg3
//       CHECK:   gpu.shuffle  xor {{.*}} : i32
//       CHECK:   scf.for
//       CHECK:     memref.load %arg5[{{.*}}] : memref<?x1x?x?xi8>
//       CHECK:     memref.load %arg4
//       CHECK:     gpu.shuffle  xor {{.*}} : i32
//       CHECK:     nvgpu.device_async_copy %arg1
//       CHECK:     memref.load %arg5[{{.*}}] : memref<?x1x?x?xi8>
//       CHECK:     memref.load %arg4
//       CHECK:     scf.if %{{.*}} -> (vector<2x2xf32>
//       CHECK:       nvgpu.mma.sync
func.func @doc_block_mask(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %qs: memref<?x?xi32>, %ks: memref<?x?xi32>, %bm: memref<?x1x?x?xi8>, %o: memref<?x4x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %bmt = bufferization.to_tensor %bm restrict : memref<?x1x?x?xi8> to tensor<?x1x?x?xi8>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         segments(%qst, %kst : tensor<?x?xi32>, tensor<?x?xi32>) block_mask(%bmt : tensor<?x1x?x?xi8>)
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

// A paged K/V cache: each K and V row's cp.async reads the block table,
// clamps the entry into the cache and copies row key % 16 of that page;
// Nk = M x 16.
// CHECK-LABEL: gpu.func @paged(
// CHECK-SAME: %[[KC:[a-z0-9]+]]: memref<?x16x2x64xf16>, %[[VC:[a-z0-9]+]]: memref<?x16x2x64xf16>, %{{.*}}: memref<?xi32>, %[[BT:[a-z0-9]+]]: memref<?x?xi32>
// CHECK: memref.dim %[[BT]], %c1
// CHECK: %[[E:.*]] = memref.load %[[BT]][%{{.*}}, %{{.*}}] : memref<?x?xi32>
// CHECK: %[[P:.*]] = arith.index_cast %[[E]]
// CHECK: %[[LO:.*]] = arith.maxsi %[[P]], %c0
// CHECK: %[[PC:.*]] = arith.minsi %[[LO]], %{{.*}}
// CHECK: %[[R:.*]] = arith.remui %{{.*}}, %c16
// CHECK: nvgpu.device_async_copy %[[KC]][%[[PC]], %[[R]], %{{.*}}, %{{.*}}]
// CHECK: nvgpu.device_async_copy %[[VC]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
func.func @paged(%q: memref<?x8x?x64xf16>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>,
                 %lens: memref<?xi32>, %bt: memref<?x?xi32>, %o: memref<?x8x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x?x64xf16> to tensor<?x8x?x64xf16>
  %kt = bufferization.to_tensor %kc restrict : memref<?x16x2x64xf16> to tensor<?x16x2x64xf16>
  %vt = bufferization.to_tensor %vc restrict : memref<?x16x2x64xf16> to tensor<?x16x2x64xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %btt = bufferization.to_tensor %bt restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x?x64xf16> to tensor<?x8x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x?x64xf16>, tensor<?x16x2x64xf16>, tensor<?x16x2x64xf16>)
         kv_lens(%lt : tensor<?xi32>) block_table(%btt : tensor<?x?xi32>)
         outs(%ot : tensor<?x8x?x64xf16>) causal(bottom_right) -> tensor<?x8x?x64xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x?x64xf16>, memref<?x8x?x64xf16>) -> ()
  return
}

// -----

// The token-major varlen form: the grid covers ceil(Tq / 64) query tiles of
// B = offsets - 1 sequences; a block loads its sequence's offsets (the
// query and key starts and lengths), visits no key tile past its rows,
// copies Q, K and V rows from the sequence's first token, and stores O
// [Tq, Hq, Dv] and LSE [Hq, Tq] at qStart + row.
// CHECK-LABEL: func.func @varlen(
// CHECK: %[[T:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?x8x64xf16>
// CHECK: %[[NB:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?xi32>
// CHECK: %[[B1:.*]] = arith.subi %[[NB]], %{{.*}}
// CHECK: %[[B:.*]] = arith.maxsi %[[B1]], %{{.*}}
// CHECK: %[[X:.*]] = arith.ceildivui %[[T]], %c64
// CHECK: gpu.launch_func @varlen_kernels::@varlen blocks in (%[[X]], %{{.*}}, %[[B]])
// CHECK-LABEL: gpu.func @varlen(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: memref<?x8x64xf16>, %[[K:[a-z0-9]+]]: memref<?x2x64xf16>, %{{.*}}: memref<?x2x64xf16>, %[[CQ:[a-z0-9]+]]: memref<?xi32>, %[[CK:[a-z0-9]+]]: memref<?xi32>, %[[O:[a-z0-9]+]]: memref<?x8x64xf16>, %[[L:[a-z0-9]+]]: memref<8x?xf32>
// CHECK: memref.load %[[CQ]]
// CHECK: memref.load %[[CK]]
// CHECK: %[[ANY:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK: arith.select %[[ANY]], %{{.*}}, %c0{{.*}} : index
// CHECK: nvgpu.device_async_copy %[[Q]][%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: nvgpu.device_async_copy %[[K]][%{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: vector.store %{{.*}}, %[[O]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x8x64xf16>
// CHECK: memref.store %{{.*}}, %[[L]][%{{.*}}, %{{.*}}] : memref<8x?xf32>
func.func @varlen(%q: memref<?x8x64xf16>, %k: memref<?x2x64xf16>, %v: memref<?x2x64xf16>,
                  %cq: memref<?xi32>, %ck: memref<?xi32>, %o: memref<?x8x64xf16>, %lse: memref<8x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x64xf16> to tensor<?x8x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x64xf16> to tensor<?x2x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x64xf16> to tensor<?x2x64xf16>
  %cqt = bufferization.to_tensor %cq restrict : memref<?xi32> to tensor<?xi32>
  %ckt = bufferization.to_tensor %ck restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x64xf16> to tensor<?x8x64xf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<8x?xf32> to tensor<8x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>)
         cu_seqlens(%cqt, %ckt : tensor<?xi32>, tensor<?xi32>)
         outs(%ot : tensor<?x8x64xf16>, %lt : tensor<8x?xf32>) causal(bottom_right) -> tensor<?x8x64xf16>, tensor<8x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x64xf16>, memref<?x8x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<8x?xf32>, memref<8x?xf32>) -> ()
  return
}
