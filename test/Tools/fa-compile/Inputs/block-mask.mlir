// A kernel reading a block mask: a block_mask param of the artifact.
func.func @bm(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %b: memref<1x1x?x?xi8>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %bt = bufferization.to_tensor %b restrict : memref<1x1x?x?xi8> to tensor<1x1x?x?xi8>
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) block_mask(%bt : tensor<1x1x?x?xi8>) outs(%e : tensor<1x2x64x64xf16>) block_tiles(64, 64) mask_mod {
  ^bb0(%bb: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}
