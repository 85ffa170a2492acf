// RUN: fa-opt %s -split-input-file -fa-map-to-wgmma | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-map-to-wgmma="warpgroups=2 stages=3" | FileCheck %s --check-prefix=OPTS
// RUN: fa-opt %s -split-input-file -fa-map-to-wgmma="block-kv=128" | FileCheck %s --check-prefix=KV128
// RUN: fa-opt %s -split-input-file -fa-map-to-wgmma="split-kv=true" | FileCheck %s --check-prefix=SPLIT
// RUN: not fa-opt %s -split-input-file -fa-map-to-wgmma="warpgroups=3" 2>&1 | FileCheck %s --check-prefix=BADWG
// RUN: not fa-opt %s -split-input-file -fa-map-to-wgmma="block-kv=32" 2>&1 | FileCheck %s --check-prefix=BADKV
// RUN: not fa-opt %s -split-input-file -fa-map-to-wgmma="stages=1" 2>&1 | FileCheck %s --check-prefix=BADSTAGES

// BADWG: error: fa-map-to-wgmma: warpgroups must be 1 or 2, got 3
// BADKV: error: fa-map-to-wgmma: block-kv must be 64 or 128, got 32
// BADSTAGES: error: fa-map-to-wgmma: stages must be 2, 3 or 4, got 1

// An f16 GQA kernel with key lengths, bottom-right causality and LSE, D = 128:
// one warpgroup (128 threads, 64 query rows) per block; the dynamic
// workgroup memory holds Q (64 x 128), two K and two V slots (64 x 128 each),
// the P tile (64 x 64), the 8 non-finite flags of the warps (32 bytes; the
// causal mask needs them) and 1024 bytes of alignment slack: 91168 bytes.

// CHECK-LABEL: func.func @gqa_causal(
//  CHECK-SAME:     fa.gpu_config = {block_kv = 64 : index, block_q = 64 : index, dynamic_shared_bytes = 91168 : index, stages = 2 : index, threads = 128 : index, warpgroups = 1 : index, wgmma}
//   CHECK-NOT:   fa.attention
//       CHECK:   %[[NQ:.*]] = memref.dim %{{.*}}, %c2
//       CHECK:   %[[B:.*]] = memref.dim %{{.*}}, %c0
//       CHECK:   %[[TILES:.*]] = arith.ceildivui %[[NQ]], %c64
//       CHECK:   %[[SMEM:.*]] = arith.constant 91168 : i32
//       CHECK:   gpu.launch_func @gqa_causal_kernels::@gqa_causal blocks in (%[[TILES]], %c8, %[[B]]) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %[[SMEM]] args(
//       CHECK:   return

// CHECK: gpu.module @gqa_causal_kernels
// CHECK: gpu.func @gqa_causal({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// Key lengths and the causal bound limit the KV loop as in the sm_80 kernel.
// CHECK:   memref.load %arg3[%block_id_z]
// CHECK:   arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:   %[[NUMKV:.*]] = arith.ceildivui %[[KVEND:.*]], %c64
// The tiles start at the first 1024-byte boundary of the dynamic buffer:
// pad = (-base) & 1023; Q, K and V in 64-column swizzle regions.
// CHECK:   %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK:   %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[DYN]]
// CHECK:   %[[NEG:.*]] = arith.subi %c0{{.*}}, %[[BASE]]
// CHECK:   %[[PAD:.*]] = arith.andi %[[NEG]], %c1023
// CHECK:   arith.addi %[[BASE]], %[[PAD]]
// CHECK:   %[[QS:.*]] = memref.view %[[DYN]][%[[PAD]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x64x64xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[KOFF:.*]] = arith.addi %[[PAD]], %c16384
// CHECK:   %[[KS:.*]] = memref.view %[[DYN]][%[[KOFF]]][] : {{.*}} to memref<2x2x64x64xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[VOFF:.*]] = arith.addi %[[PAD]], %c49152
// CHECK:   %[[VS:.*]] = memref.view %[[DYN]][%[[VOFF]]][] : {{.*}} to memref<2x2x64x64xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[POFF:.*]] = arith.addi %[[PAD]], %c81920
// CHECK:   %[[PS:.*]] = memref.view %[[DYN]][%[[POFF]]][] : {{.*}} to memref<1x1x64x64xf16, #gpu.address_space<workgroup>>
// CHECK:   %[[FOFF:.*]] = arith.addi %[[PAD]], %c90112
// CHECK:   %[[FLAGS:.*]] = memref.view %[[DYN]][%[[FOFF]]][] : {{.*}} to memref<8xi32, #gpu.address_space<workgroup>>
// CHECK:   %[[OINIT:.*]] = llvm.mlir.zero : !llvm.struct<(f32, f32, f32, f32
// Prologue: Q with K/V tile 0 in one cp.async group; the 16-byte chunk c of
// row r goes to chunk c ^ (r % 8); rows past the end zero-filled.
// CHECK:   scf.if
// CHECK:     %[[R:.*]] = arith.shrui %{{.*}}, %c3
// CHECK:     %[[C:.*]] = arith.andi %{{.*}}, %c7
// CHECK:     %[[R8:.*]] = arith.andi %[[R]], %c7
// CHECK:     %[[SWZ:.*]] = arith.xori %[[C]], %[[R8]] : index
// CHECK:     %[[NSRC:.*]] = arith.select %{{.*}}, %c8{{[_0-9]*}}, %c0{{[_0-9]*}} : index
// CHECK:     %[[DC:.*]] = arith.muli %[[SWZ]], %c8
// CHECK:     nvgpu.device_async_copy %arg0[%block_id_z, %block_id_y, %{{.*}}, %{{.*}}], %[[QS]][%c0{{.*}}, %[[R]], %[[DC]]], 8, %[[NSRC]] {bypassL1}
// CHECK:     nvgpu.device_async_copy %arg1[%block_id_z, %[[KVH:.*]], %{{.*}}, %{{.*}}], %[[KS]][%c0{{.*}}, %c0{{.*}}, %{{.*}}, %{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK:     nvgpu.device_async_copy %arg2[%block_id_z, %[[KVH]],
// CHECK:     %[[G0:.*]] = nvgpu.device_async_create_group
// CHECK:     scf.for %{{.*}} = %c0{{.*}} to %[[NUMKV]] {{.*}} iter_args(%[[O:.*]] = %[[OINIT]], %{{.*}} -> (!llvm.struct<(f32
// A tile crossing the diagonal of the block's first row tests the V chunks
// each thread copied for NaN/inf (exponent bits all set) and lane 0 of each
// warp publishes the warp's OR; the landed copies are made visible to the
// async proxy before the barrier.
// CHECK:       nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
// CHECK:       %[[CHECK:.*]] = arith.cmpi sgt
// CHECK-NEXT:  scf.if %[[CHECK]] {
// CHECK:         vector.load %[[VS]]{{.*}} : memref<2x2x64x64xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK:         arith.bitcast %{{.*}} : vector<8xf16> to vector<8xi16>
// CHECK:         vector.reduction <or>
// CHECK:         gpu.shuffle  xor
// CHECK:         memref.store %{{.*}}, %[[FLAGS]][%{{.*}}] : memref<8xi32, #gpu.address_space<workgroup>>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NEXT:  nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:  gpu.barrier
// CHECK:       nvgpu.device_async_copy %arg1
// CHECK:       nvgpu.device_async_create_group
// The flags are read back after the barrier (block-uniform).
// CHECK:       %[[NONFINITE:.*]] = scf.if %[[CHECK]] -> (i1) {
// CHECK:         memref.load %[[FLAGS]][%c0{{.*}}]
// CHECK:         memref.load %[[FLAGS]][%c3{{.*}}]
// CHECK-NOT:     memref.load %[[FLAGS]]
// CHECK:       } else {
// S = Q K^T: 8 wgmma m64n64k16 (D = 128), K-major A and B (layout col),
// descriptors with LBO = 16, SBO = 1024 and 128-byte swizzle (bit 62); the
// first one ignores the accumulator.
// CHECK:       %[[QD:.*]] = arith.ori %{{.*}}, %c4611686293305360384_i64{{[_0-9]*}} : i64
// CHECK:       %[[KD:.*]] = arith.ori %{{.*}}, %c4611686293305360384_i64{{[_0-9]*}} : i64
// CHECK:       nvvm.wgmma.fence.aligned
// CHECK-NEXT:  %[[S0:.*]] = llvm.mlir.undef : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NEXT:  %[[S1:.*]] = nvvm.wgmma.mma_async %[[QD]], %[[KD]], %[[S0]], <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// The next K step: both starts 32 bytes (2 in the descriptor) further.
// CHECK-DAG:   %[[QD1:.*]] = arith.addi %[[QD]], %c2_i64{{[_0-9]*}}
// CHECK-DAG:   %[[KD1:.*]] = arith.addi %[[KD]], %c2_i64{{[_0-9]*}}
// CHECK:       %{{.*}} = nvvm.wgmma.mma_async %[[QD1]], %[[KD1]], %[[S1]], <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// The fifth step is the second 64-column region of Q and K (+8192 bytes:
// 512 in the descriptor).
// CHECK-DAG:   arith.addi %[[QD]], %c512_i64{{[_0-9]*}}
// CHECK-DAG:   arith.addi %[[KD]], %c512_i64{{[_0-9]*}}
// CHECK:       nvvm.wgmma.mma_async
// CHECK:       nvvm.wgmma.mma_async
// CHECK:       nvvm.wgmma.mma_async
// CHECK:       %[[SL:.*]] = nvvm.wgmma.mma_async
// CHECK-NOT:   nvvm.wgmma.mma_async
// CHECK:       nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:  nvvm.wgmma.wait.group.sync.aligned 0
// Softmax on the struct elements.
// CHECK:       llvm.extractvalue %[[SL]][0]
// CHECK:       llvm.extractvalue %[[SL]][31]
// Only tiles holding kv_end or crossing the diagonal are masked.
// CHECK:       %[[PARTIAL:.*]] = arith.cmpi sgt, %{{.*}}, %[[KVEND]]
// CHECK:       %[[CROSS:.*]] = arith.cmpi sgt
// CHECK:       %[[NEED:.*]] = arith.ori %[[PARTIAL]], %[[CROSS]]
// CHECK:       scf.if %[[NEED]] -> (f32
// CHECK:         arith.cmpi slt, %{{.*}}, %[[KVEND]]
// CHECK:         arith.cmpi sle
// CHECK:         arith.select %{{.*}}, %{{.*}}, %cst
// CHECK:       } else {
// Online softmax: quad row max, -inf guard, exp2.
// CHECK:       arith.maximumf
// CHECK:       gpu.shuffle  xor %{{.*}}, %c1_i32
// CHECK:       gpu.shuffle  xor %{{.*}}, %c2_i32
// CHECK:       arith.cmpf oeq, %{{.*}}, %cst
// CHECK:       llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// P to the swizzled tile: chunk i ^ (lane / 4), then fence and barrier.
// CHECK:       arith.xori %c0{{.*}}, %{{.*}} : index
// CHECK:       arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK:       vector.store %{{.*}}, %[[PS]][%{{.*}}, %c0{{.*}}, %{{.*}}, %{{.*}}] : memref<1x1x64x64xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK:       nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:  gpu.barrier
// O rescaled in the struct; when the V tile holds NaN/inf, every key's
// non-finite V elements are added to the rows attending the key, then zeroed
// in the tile (fence, barrier); then O += P V: 4 wgmma m64n128k16, V
// MN-major (layout row) with LBO = 8192 (the next 64 columns of Dv) and
// SBO = 1024; each K step of 16 keys is 2048 bytes (128 in the descriptor).
// CHECK:       llvm.extractvalue %[[O]][0]
// CHECK:       arith.mulf
// CHECK:       %[[OR:.*]] = llvm.insertvalue %{{.*}}, %[[O]][0]
// CHECK:       %[[OG:.*]] = scf.if %[[NONFINITE]] -> (!llvm.struct<(f32
// CHECK:         scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c1{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (!llvm.struct<(f32
// CHECK:           vector.load %[[VS]]{{.*}} vector<2xf16>
// CHECK:           arith.cmpf une
// CHECK:         gpu.barrier
// CHECK:         arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<8xi1>, vector<8xf16>
// CHECK:         vector.store %{{.*}}, %[[VS]]
// CHECK:         nvvm.fence.proxy
// CHECK-NEXT:    gpu.barrier
// CHECK:       } else {
// CHECK:       %[[PD:.*]] = arith.ori %{{.*}}, %c4611686293305360384_i64{{[_0-9]*}} : i64
// CHECK:       %[[VD:.*]] = arith.ori %{{.*}}, %c4611686293338849280_i64{{[_0-9]*}} : i64
// CHECK:       nvvm.wgmma.fence.aligned
// CHECK-NEXT:  %[[O1:.*]] = nvvm.wgmma.mma_async %[[PD]], %[[VD]], %{{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// CHECK-DAG:   %[[PD1:.*]] = arith.addi %[[PD]], %c2_i64{{[_0-9]*}}
// CHECK-DAG:   %[[VD1:.*]] = arith.addi %[[VD]], %c128_i64{{[_0-9]*}}
// CHECK:       nvvm.wgmma.mma_async %[[PD1]], %[[VD1]], %[[O1]], <m = 64, n = 128, k = 16>
// CHECK:       nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:  nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:       scf.yield
// CHECK:     nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
// Epilogue: l reduced over the quad, O = 0 for empty rows, LSE = -inf.
// CHECK:   gpu.shuffle  xor
// CHECK:   arith.cmpf oeq
// CHECK:   llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK:   scf.if
// CHECK:     vector.store %{{.*}}, %arg4[%block_id_z, %block_id_y, %{{.*}}, %{{.*}}] : memref<?x8x?x128xf16>, vector<2xf16>
// CHECK:     memref.store %{{.*}}, %arg5[%block_id_z, %block_id_y, %{{.*}}] : memref<?x8x?xf32>
// CHECK:   gpu.return

// Two warpgroups (256 threads, 128 query rows), three stages: 128 x 128 Q,
// 3 x 2 K/V slots of 64 x 128, two P tiles of 64 x 64, the flags, 1024
// bytes slack.
// Warpgroup g's Q rows and P tile are 8192 bytes further.
// OPTS-LABEL: func.func @gqa_causal(
//  OPTS-SAME:     fa.gpu_config = {block_kv = 64 : index, block_q = 128 : index, dynamic_shared_bytes = 148512 : index, stages = 3 : index, threads = 256 : index, warpgroups = 2 : index, wgmma}
// OPTS: gpu.launch_func {{.*}} threads in (%c256, %c1, %c1)
// OPTS: gpu.func @gqa_causal({{.*}}) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// OPTS: %[[WG:.*]] = arith.divui %{{.*}}, %c128 : index
// OPTS: memref.view {{.*}} to memref<2x1x64x64xf16, #gpu.address_space<workgroup>>
// OPTS: arith.muli %[[WG]], %c8192
// OPTS: nvgpu.device_async_create_group
// OPTS: nvgpu.device_async_create_group
// OPTS: scf.for
// OPTS:   nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// OPTS:   arith.muli %[[WG]], %c8192
// OPTS:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// OPTS:   vector.store %{{.*}}, %{{.*}}[%[[WG]], %c0{{.*}}, %{{.*}}, %{{.*}}] : memref<2x1x64x64xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// OPTS:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]

// 128-key tiles: S is m64n128k16 (64 f32 per thread), P two regions.
// KV128-LABEL: func.func @gqa_causal(
//  KV128-SAME:     fa.gpu_config = {block_kv = 128 : index, block_q = 64 : index, dynamic_shared_bytes = 164896 : index, stages = 2 : index, threads = 128 : index, warpgroups = 1 : index, wgmma}
// KV128: memref.view {{.*}} to memref<1x2x64x64xf16, #gpu.address_space<workgroup>>
// KV128: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// KV128: llvm.extractvalue %{{.*}}[63]
// split-kv=true: fa-map-to-tensor-cores' split-KV form (its test,
// tensor-cores-split-kv.mlir, has the details): the workspace arguments,
// the launch over (query tiles x S) and the merge forall after it; the
// kernel's part from block x, f32 partial O / LSE stores at [part, ...].
// SPLIT-LABEL: func.func @gqa_causal(
//  SPLIT-SAME:   %{{.*}}: memref<?x?x8x?x128xf32> {fa.workspace = "partial_o"}, %[[PL:.*]]: memref<?x?x8x?xf32> {fa.workspace = "partial_lse"})
//  SPLIT-SAME:   split_kv
//       SPLIT:   %[[S:.*]] = memref.dim %[[PL]], %c0
//       SPLIT:   %[[X:.*]] = arith.muli %{{.*}}, %[[S]]
//       SPLIT:   gpu.launch_func @gqa_causal_kernels::@gqa_causal blocks in (%[[X]],
//       SPLIT:   } {fa.kernel_suffix = "_merge", fa.threads = 128 : index
//       SPLIT:   gpu.func @gqa_causal(
//       SPLIT:     %[[BX:.*]] = gpu.block_id  x
//       SPLIT:     %[[PART:.*]] = arith.remui %[[BX]]
//       SPLIT:     nvvm.wgmma.mma_async
//       SPLIT:     vector.store %{{.*}}, %{{.*}}[%[[PART]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x8x?x128xf32>, vector<2xf32>
//       SPLIT:     memref.store %{{.*}}, %{{.*}}[%[[PART]], %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x8x?xf32>

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

// A bf16 kernel with a boolean (i8) mask, D = 64: no partial-tile branch,
// every tile reads the mask; bf16 wgmma.

// CHECK-LABEL: func.func @bool_mask(
// CHECK: gpu.func @bool_mask(
// CHECK:   scf.for
// CHECK:     nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK:     nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: scf.if
// CHECK:     %[[M:.*]] = memref.load %arg3[%c0{{.*}}, %c0{{.*}}, %{{.*}}, %{{.*}}] : memref<1x1x?x?xi8>
// CHECK:     arith.cmpi ne, %[[M]], %c0_i8
// CHECK:     arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:     nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
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

// An f16 additive mask is scaled by log2(e) and added to the scores.

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

// Different head dims for Q/K (64) and V (256, the widest wgmma N): S is
// m64n64k16, P V m64n256k16.

// CHECK-LABEL: func.func @d64_dv256(
// CHECK: gpu.func @d64_dv256(
// CHECK:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// CHECK:   nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>
// CHECK:   vector.store %{{.*}}, %arg3[{{.*}}] : memref<?x2x?x256xf16>, vector<2xf16>
func.func @d64_dv256(%q: memref<?x2x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x256xf16>,
                     %o: memref<?x2x?x256xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x256xf16>)
         outs(%ot : tensor<?x2x?x256xf16>) -> tensor<?x2x?x256xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x256xf16>, memref<?x2x?x256xf16>) -> ()
  return
}

// -----

// With a user mask, Dv = 256 is left to fa-map-to-tensor-cores (the mask
// code next to 128 accumulator registers would spill).

// CHECK-LABEL: func.func @masked_dv256_untouched(
//   CHECK-NOT:   fa.gpu_config
//       CHECK:   fa.attention
//   CHECK-NOT: gpu.module
func.func @masked_dv256_untouched(%q: memref<?x2x?x64xf16>, %v: memref<?x2x?x256xf16>,
                                  %mask: memref<?x2x?x?xi1>, %o: memref<?x2x?x256xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %mt = bufferization.to_tensor %mask restrict : memref<?x2x?x?xi1> to tensor<?x2x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x256xf16> to tensor<?x2x?x256xf16>
  %r = fa.attention ins(%qt, %qt, %vt : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x256xf16>)
         mask(%mt : tensor<?x2x?x?xi1>) outs(%ot : tensor<?x2x?x256xf16>) -> tensor<?x2x?x256xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x256xf16>, memref<?x2x?x256xf16>) -> ()
  return
}

// -----

// f32 inputs are left to the SIMT path.

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

// A head dim that is a multiple of 16 but not of 64 (D = 96) is left alone
// (fa-map-to-tensor-cores takes it).

// CHECK-LABEL: func.func @d96_untouched(
//   CHECK-NOT:   fa.gpu_config
//       CHECK:   fa.attention
//   CHECK-NOT: gpu.module
func.func @d96_untouched(%q: memref<?x2x?x96xf16>, %o: memref<?x2x?x96xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x96xf16> to tensor<?x2x?x96xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x96xf16> to tensor<?x2x?x96xf16>
  %r = fa.attention ins(%qt, %qt, %qt : tensor<?x2x?x96xf16>, tensor<?x2x?x96xf16>, tensor<?x2x?x96xf16>)
         outs(%ot : tensor<?x2x?x96xf16>) -> tensor<?x2x?x96xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x96xf16>, memref<?x2x?x96xf16>) -> ()
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

// The score/mask modifiers: the slopes, the segment ids and the q_offset
// (an index argument) are kernel arguments; the diagonal offset takes the
// q_offset; the key loop starts at the tile holding the window's left
// bound of the block's first row (q0 + off - 100, clamped at 0, rounded
// down to block-kv) and runs to kv_end; the head's slope is loaded once
// per block; the softcap's tanh is a rational approximation (no math.tanh
// is left); masked tiles read the key segment ids.
// CHECK-LABEL: func.func @modifiers(
//  CHECK-SAME:     wgmma
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
//       CHECK:     scf.if %{{.*}} -> (!llvm.struct
//       CHECK:       nvvm.wgmma.mma_async
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
