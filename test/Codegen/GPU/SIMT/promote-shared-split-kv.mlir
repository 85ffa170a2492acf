// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=64 split-kv=true}))' -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=64 split-kv=true double-buffer=true}))' -verify-diagnostics | FileCheck %s --check-prefix=DB
// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(fa-promote-shared{block-q=16 block-kv=32 split-kv=true}),fa-map-to-gpu,canonicalize,cse)' -verify-diagnostics | FileCheck %s --check-prefix=MAP

// fa-promote-shared's split-KV form (split-kv=true). The workspace is
// appended to the function: partial O [S, B, Hq, Nq, Dv] and LSE [S, B,
// Hq, Nq], f32, S its first dim at run time. The grid's x is (query tiles
// x S), the part x % S fastest; a block runs the key tiles [min(s c, n),
// min(s c + c, n)) of its n visited tiles, c = ceil(n / S), and scatters
// its f32 partial O and LSE at [s, ...]; then the merge kernel's forall
// (fa.merge's rule) writes O and LSE.
// CHECK-LABEL: func.func @decode
//  CHECK-SAME:   %[[O:[a-z0-9]+]]: memref<?x8x1x64xf16>, %[[L:[a-z0-9]+]]: memref<?x8x1xf32>, %[[PO:[a-z0-9]+]]: memref<?x?x8x1x64xf32> {fa.workspace = "partial_o"}, %[[PL:[a-z0-9]+]]: memref<?x?x8x1xf32> {fa.workspace = "partial_lse"})
//  CHECK-SAME:   split_kv
//       CHECK:   %[[TILES:.*]] = arith.ceildivui
//       CHECK:   %[[S:.*]] = memref.dim %[[PL]], %c0
//       CHECK:   %[[X:.*]] = arith.muli %[[TILES]], %[[S]]
//       CHECK:   scf.forall (%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[X]], 2, %{{.*}}) {
//       CHECK:     %[[S2:.*]] = memref.dim %[[PL]], %c0
//       CHECK:     %[[PART:.*]] = arith.remui %[[BX]], %[[S2]]
//       CHECK:     arith.divui %[[BX]], %[[S2]]
//       CHECK:     %[[N:.*]] = arith.ceildivui %{{.*}}, %c64
//       CHECK:     %[[C:.*]] = arith.ceildivui %[[N]], %{{.*}}
//       CHECK:     %[[B0:.*]] = arith.muli %[[PART]], %[[C]]
//       CHECK:     %[[JB:.*]] = arith.minui %[[B0]], %[[N]]
//       CHECK:     %[[E0:.*]] = arith.addi %[[JB]], %[[C]]
//       CHECK:     %[[JE:.*]] = arith.minui %[[E0]], %[[N]]
//       CHECK:     scf.for %{{.*}} = %[[JB]] to %[[JE]] step %c1
//   CHECK-NOT:     arith.truncf
//       CHECK:     vector.scatter %[[PO]][%[[PART]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {{.*}} : memref<?x?x8x1x64xf32>
//       CHECK:     vector.scatter %[[PL]][%[[PART]], %{{.*}}, %{{.*}}, %{{.*}}] {{.*}} : memref<?x?x8x1xf32>
//       CHECK:   } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
//       CHECK:   scf.forall
//       CHECK:     memref.dim %[[PL]], %c0
//       CHECK:     math.exp2
//       CHECK:     vector.scatter %[[O]]
//       CHECK:     vector.scatter %[[L]]
//       CHECK:   } {fa.kernel_suffix = "_merge", fa.threads = 128 : index, mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
// With double buffering the prologue copies the part's first tile, into
// its slot, when the part has one.
// DB-LABEL: func.func @decode
//       DB:   %[[JB:.*]] = arith.minui
//       DB:   %[[JE:.*]] = arith.minui
//       DB:   %[[ANY:.*]] = arith.cmpi ult, %[[JB]], %[[JE]]
//       DB:   scf.if %[[ANY]]
//       DB:     arith.remui %[[JB]], %c2
//       DB:   scf.for %{{.*}} = %[[JB]] to %[[JE]]
// fa-map-to-gpu makes two kernels in one gpu.module (one PTX file), both
// over all the arguments: @decode (the workgroup tiles as globals) and
// @decode_merge (none), launched in that order.
// MAP-LABEL: func.func @decode
//       MAP:   gpu.launch_func @decode_kernels::@decode blocks in
//       MAP:   gpu.launch_func @decode_kernels::@decode_merge blocks in
//       MAP: gpu.module @decode_kernels
//       MAP:   memref.global "private" @__fa_smem0
//       MAP:   gpu.func @decode(
//   MAP-NOT:   memref.global
//   MAP-NOT:   gpu.module
//       MAP:   gpu.func @decode_merge(%{{.*}}: memref<?x8x1x64xf16>, {{.*}}, %{{.*}}: memref<?x?x8x1x64xf32>, %{{.*}}: memref<?x?x8x1xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
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

// The varlen form's LSE is [Hq, Tq], not the merge's row order: refused.
func.func @varlen(%q: memref<?x8x32xf32>, %k: memref<?x2x32xf32>, %v: memref<?x2x32xf32>,
                  %o: memref<?x8x32xf32>, %cq: memref<?xi32>, %ck: memref<?xi32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x32xf32> to tensor<?x8x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x32xf32> to tensor<?x2x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x32xf32> to tensor<?x2x32xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x8x32xf32> to tensor<?x8x32xf32>
  %cqt = bufferization.to_tensor %cq restrict : memref<?xi32> to tensor<?xi32>
  %ckt = bufferization.to_tensor %ck restrict : memref<?xi32> to tensor<?xi32>
  // expected-error @+1 {{fa-promote-shared: split-kv does not apply to variable-length batches (cu_seqlens) yet}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x8x32xf32>, tensor<?x2x32xf32>, tensor<?x2x32xf32>)
           cu_seqlens(%cqt, %ckt : tensor<?xi32>, tensor<?xi32>)
           outs(%ot : tensor<?x8x32xf32>) causal(bottom_right) -> tensor<?x8x32xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x8x32xf32>, memref<?x8x32xf32>) -> ()
  return
}
