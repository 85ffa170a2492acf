// attn_regions.mlir with the mask_mod's block mask [B, 1, ceil(Nq / 16),
// ceil(Nk / 8)] (the prefix depends on the batch, not on the head) for
// CpuBackendTest.BlockMask; compiled by fa-compile at build time. Query
// tiles of 16 rows: a multiple of the vector width on every x86 host (8
// lanes with AVX2, 16 with AVX-512), as the CPU kernel requires.
func.func @attn_block_mask(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>, %v: memref<?x2x?x16xf32>, %t: memref<4x63xf32>, %p: memref<2xi32>, %bm: memref<?x1x?x?xi8>, %o: memref<?x4x?x16xf32>, %l: memref<?x4x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x16xf32> to tensor<?x4x?x16xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %tt = bufferization.to_tensor %t restrict : memref<4x63xf32> to tensor<4x63xf32>
  %pt = bufferization.to_tensor %p restrict : memref<2xi32> to tensor<2xi32>
  %bmt = bufferization.to_tensor %bm restrict : memref<?x1x?x?xi8> to tensor<?x1x?x?xi8>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf32>
  %nq = memref.dim %q, %c2 : memref<?x4x?x16xf32>
  %e = tensor.empty(%b, %nq) : tensor<?x4x?x16xf32>
  %el = tensor.empty(%b, %nq) : tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) block_mask(%bmt : tensor<?x1x?x?xi8>) mod_operands(%tt, %pt : tensor<4x63xf32>, tensor<2xi32>) outs(%e : tensor<?x4x?x16xf32>, %el : tensor<?x4x?xf32>) block_tiles(16, 8) score_mod {
  ^bb0(%s: f32, %bb: index, %h: index, %qi: index, %ki: index, %tb: tensor<4x63xf32>, %pb: tensor<2xi32>):
    %c31 = arith.constant 31 : index
    %d = arith.subi %ki, %qi : index
    %i = arith.addi %d, %c31 : index
    %x = tensor.extract %tb[%h, %i] : tensor<4x63xf32>
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  } mask_mod {
  ^bb0(%bb: index, %h: index, %qi: index, %ki: index, %tb: tensor<4x63xf32>, %pb: tensor<2xi32>):
    %pre = tensor.extract %pb[%bb] : tensor<2xi32>
    %kk = arith.index_cast %ki : index to i32
    %in = arith.cmpi slt, %kk, %pre : i32
    %c = arith.cmpi sle, %ki, %qi : index
    %keep = arith.ori %in, %c : i1
    fa.yield %keep : i1
  } -> tensor<?x4x?x16xf32>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<?x4x?x16xf32>, memref<?x4x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %l : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}
