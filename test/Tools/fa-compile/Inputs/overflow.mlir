// A static batch of 2^60: Q has 2^60 * 2 * 32 * 4 bytes, more than int64 counts.
func.func @huge(%q: memref<1152921504606846976x2x?x32xf32>, %k: memref<1152921504606846976x2x?x32xf32>, %v: memref<1152921504606846976x2x?x32xf32>, %o: memref<1152921504606846976x2x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1152921504606846976x2x?x32xf32> to tensor<1152921504606846976x2x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1152921504606846976x2x?x32xf32> to tensor<1152921504606846976x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1152921504606846976x2x?x32xf32> to tensor<1152921504606846976x2x?x32xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1152921504606846976x2x?x32xf32> to tensor<1152921504606846976x2x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1152921504606846976x2x?x32xf32>, tensor<1152921504606846976x2x?x32xf32>, tensor<1152921504606846976x2x?x32xf32>) outs(%ot : tensor<1152921504606846976x2x?x32xf32>) -> tensor<1152921504606846976x2x?x32xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<1152921504606846976x2x?x32xf32>, memref<1152921504606846976x2x?x32xf32>) -> ()
  return
}
