// fa-map-to-wgmma at the workgroup-memory limit of sm_90 (227 KiB): D = Dv
// = 256 fits with one warpgroup and two stages, not with four stages or two
// warpgroups and three stages.
// RUN: fa-opt %s -fa-map-to-wgmma | FileCheck %s
// RUN: not fa-opt %s -fa-map-to-wgmma="stages=4" 2>&1 | FileCheck %s --check-prefix=TOOBIG4
// RUN: not fa-opt %s -fa-map-to-wgmma="warpgroups=2 stages=3" 2>&1 | FileCheck %s --check-prefix=TOOBIG2

// TOOBIG4: error: fa-map-to-wgmma: the tiles need 304128 bytes of workgroup memory, more than the 232448 one block may use on sm_90a (D = 256, Dv = 256, block-kv = 64, stages = 4, warpgroups = 1)
// TOOBIG2: error: fa-map-to-wgmma: the tiles need 279552 bytes of workgroup memory, more than the 232448 one block may use on sm_90a (D = 256, Dv = 256, block-kv = 64, stages = 3, warpgroups = 2)

// Q 64 x 256, 2 x (K, V) 64 x 256, P 64 x 64, bf16, plus 1024 bytes of
// alignment slack: 173056 bytes; S = Q K^T in 16 steps of m64n64k16, P V in
// 4 steps of m64n256k16.
// CHECK-LABEL: func.func @d256(
//  CHECK-SAME:     dynamic_shared_bytes = 173056 : index
// CHECK: gpu.func @d256(
// CHECK-COUNT-16: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-4:  nvvm.wgmma.mma_async {{.*}} <m = 64, n = 256, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-NOT:      nvvm.wgmma.mma_async
func.func @d256(%q: memref<?x2x?x256xbf16>, %o: memref<?x2x?x256xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x256xbf16> to tensor<?x2x?x256xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x256xbf16> to tensor<?x2x?x256xbf16>
  %r = fa.attention ins(%qt, %qt, %qt : tensor<?x2x?x256xbf16>, tensor<?x2x?x256xbf16>, tensor<?x2x?x256xbf16>)
         outs(%ot : tensor<?x2x?x256xbf16>) -> tensor<?x2x?x256xbf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x256xbf16>, memref<?x2x?x256xbf16>) -> ()
  return
}
