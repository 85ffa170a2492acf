// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(fa-map-to-tensor-cores{block-q=16 split-kv=true pack-gqa=never})' -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(fa-map-to-tensor-cores{block-q=16 split-kv=true pack-gqa=never},fa-map-to-gpu,canonicalize,cse)' -verify-diagnostics | FileCheck %s --check-prefix=MAP
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(fa-map-to-tensor-cores{block-q=16})' | FileCheck %s --check-prefix=PACK
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(fa-map-to-tensor-cores{block-q=16 split-kv=true})' -verify-diagnostics | FileCheck %s --check-prefix=PACKSPLIT

// The decode forms of fa-map-to-tensor-cores: split-KV and packed query
// heads (pack-gqa, auto by default: Nq = 1 is static and G = 4 rows of a
// kv head fit one 16-row tile, so they are packed).
//
// fa-map-to-tensor-cores' split-KV form (split-kv=true), as
// fa-promote-shared's: the workspace is appended to the function (partial
// O [S, B, Hq, Nq, Dv] and LSE [S, B, Hq, Nq], f32, S its first dim at run
// time); the launch's x is (query tiles x S), the part x % S fastest; a
// block runs the key tiles [min(s c, n), min(s c + c, n)) of its n visited
// tiles, c = ceil(n / S), its copies reading nothing past the part's last
// tile, and stores O / l in f32 (not into O) and the part's LSE
// at [s, ...]; the merge's block forall follows the launch.
// CHECK-LABEL: func.func @decode
//  CHECK-SAME:   %[[O:[a-z0-9]+]]: memref<?x8x1x64xf16>, %[[L:[a-z0-9]+]]: memref<?x8x1xf32>, %[[PO:[a-z0-9]+]]: memref<?x?x8x1x64xf32> {fa.workspace = "partial_o"}, %[[PL:[a-z0-9]+]]: memref<?x?x8x1xf32> {fa.workspace = "partial_lse"})
//  CHECK-SAME:   split_kv
//  CHECK-SAME:   tensor_cores
//       CHECK:   %[[TILES:.*]] = arith.ceildivui
//       CHECK:   %[[S:.*]] = memref.dim %[[PL]], %c0
//       CHECK:   %[[X:.*]] = arith.muli %[[TILES]], %[[S]]
//       CHECK:   gpu.launch_func @decode_kernels::@decode blocks in (%[[X]], %c8, %{{.*}})
//       CHECK:   scf.forall
//       CHECK:     memref.dim %[[PL]], %c0
//       CHECK:     math.exp2
//       CHECK:     vector.scatter %[[O]]
//       CHECK:     vector.scatter %[[L]]
//       CHECK:   } {fa.kernel_suffix = "_merge", fa.threads = 128 : index, mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
//       CHECK: gpu.module @decode_kernels
//       CHECK:   gpu.func @decode(%{{.*}}: memref<?x8x1x64xf16>, {{.*}}, %[[KPO:.*]]: memref<?x?x8x1x64xf32>, %[[KPL:.*]]: memref<?x?x8x1xf32>) kernel
//       CHECK:     %[[BX:.*]] = gpu.block_id  x
//       CHECK:     %[[KS:.*]] = memref.dim %[[KPL]], %c0
//       CHECK:     %[[PART:.*]] = arith.remui %[[BX]], %[[KS]]
//       CHECK:     arith.divui %[[BX]], %[[KS]]
//       CHECK:     %[[N:.*]] = arith.ceildivui %{{.*}}, %c64
//       CHECK:     %[[C:.*]] = arith.ceildivui %[[N]], %[[KS]]
//       CHECK:     %[[B0:.*]] = arith.muli %[[PART]], %[[C]]
//       CHECK:     %[[JB:.*]] = arith.minui %[[B0]], %[[N]]
//       CHECK:     %[[E0:.*]] = arith.addi %[[JB]], %[[C]]
//       CHECK:     %[[JE:.*]] = arith.minui %[[E0]], %[[N]]
//       CHECK:     %[[K0:.*]] = arith.muli %[[JB]], %c64
//       CHECK:     %[[NUM:.*]] = arith.subi %[[JE]], %[[JB]]
//       CHECK:     %[[SPAN:.*]] = arith.muli %[[NUM]], %c64
//       CHECK:     %[[PEND:.*]] = arith.addi %{{.*}}, %[[SPAN]]
//       CHECK:     arith.minui %{{.*}}, %[[PEND]]
//       CHECK:     nvgpu.mma.sync
//   CHECK-NOT:     vector.store {{.*}} : memref<?x8x1x64xf16>
//       CHECK:     vector.store %{{.*}}, %[[KPO]][%[[PART]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x8x1x64xf32>, vector<2xf32>
//       CHECK:     memref.store %{{.*}}, %[[KPL]][%[[PART]], %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x8x1xf32>
// fa-map-to-gpu outlines the merge into the same gpu.module: one PTX file
// holds both entries, launched in order.
// MAP-LABEL: func.func @decode
//       MAP:   gpu.launch_func @decode_kernels::@decode blocks in
//       MAP:   gpu.launch_func @decode_kernels::@decode_merge blocks in
//       MAP: gpu.module @decode_kernels
//       MAP:   gpu.func @decode(
//       MAP:     nvgpu.mma.sync
//   MAP-NOT:   gpu.module
//       MAP:   gpu.func @decode_merge(%{{.*}}: memref<?x8x1x64xf16>, {{.*}}, %{{.*}}: memref<?x?x8x1x64xf32>, %{{.*}}: memref<?x?x8x1xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// Packed heads: the grid is (ceil(Nq G / 16), Hkv, B); y is the kv head;
// packed row p is query p / 4 of head 4 kvHead + p % 4: the Q copy reads
// each row from its head, O and LSE are stored at the row's head and
// query.
// PACK-LABEL: func.func @decode
//  PACK-SAME:   pack_gqa
//       PACK:   %[[ROWS:.*]] = arith.muli %{{.*}}, %c4
//       PACK:   %[[T:.*]] = arith.ceildivui %[[ROWS]], %c16
//       PACK:   gpu.launch_func @decode_kernels::@decode blocks in (%[[T]], %c2{{.*}}, %{{.*}})
//       PACK:   gpu.func @decode(
//       PACK:     %[[KVH:.*]] = gpu.block_id  y
//   PACK-NOT:     nvgpu.device_async_copy %arg0[%block_id_z, %block_id_y
//       PACK:     nvgpu.device_async_copy %arg0[%block_id_z, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}]
//       PACK:     nvgpu.mma.sync
//       PACK:     vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<?x8x1x64xf16>, vector<2xf16>
//       PACK:     memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x8x1xf32>
// Both: packed heads writing split-KV partials.
// PACKSPLIT-LABEL: func.func @decode
//  PACKSPLIT-SAME:   pack_gqa
//  PACKSPLIT-SAME:   split_kv
//       PACKSPLIT:   gpu.launch_func @decode_kernels::@decode blocks in (%{{.*}}, %c2{{.*}}, %{{.*}})
//       PACKSPLIT:   fa.kernel_suffix = "_merge"
func.func @decode(%q: memref<?x8x1x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>,
                  %lens: memref<?xi32>, %o: memref<?x8x1x64xf16>, %lse: memref<?x8x1xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x1x64xf16> to tensor<?x8x1x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x1x64xf16> to tensor<?x8x1x64xf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x8x1xf32> to tensor<?x8x1xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x8x1x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         kv_lens(%lt : tensor<?xi32>)
         outs(%ot : tensor<?x8x1x64xf16>, %st : tensor<?x8x1xf32>) causal(bottom_right) -> tensor<?x8x1x64xf16>, tensor<?x8x1xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x8x1x64xf16>, memref<?x8x1x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x8x1xf32>, memref<?x8x1xf32>) -> ()
  return
}

// -----

// The varlen form: refused (its LSE is [Hq, Tq], not the merge's row
// order).
func.func @varlen(%q: memref<?x8x32xf16>, %k: memref<?x2x32xf16>, %v: memref<?x2x32xf16>,
                  %o: memref<?x8x32xf16>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x32xf16> to tensor<?x8x32xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x32xf16> to tensor<?x2x32xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x32xf16> to tensor<?x2x32xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x32xf16> to tensor<?x8x32xf16>
  %cqt = bufferization.to_tensor %cq restrict : memref<?xi32> to tensor<?xi32>
  %ckt = bufferization.to_tensor %ck restrict : memref<?xi32> to tensor<?xi32>
  // expected-error @+1 {{fa-map-to-tensor-cores: split-kv does not apply to variable-length batches (cu_seqlens) yet}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x32xf16>, tensor<?x2x32xf16>, tensor<?x2x32xf16>)
           cu_seqlens(%cqt, %ckt : tensor<?xi32>, tensor<?xi32>)
           outs(%ot : tensor<?x8x32xf16>) causal(bottom_right) -> tensor<?x8x32xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x32xf16>, memref<?x8x32xf16>) -> ()
  return
}
