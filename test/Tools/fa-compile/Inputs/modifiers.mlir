// A kernel with score/mask modifiers: fa-compile records them in the
// metadata and takes the slopes and segment ids as params.
func.func @mods_kernel(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                       %v: memref<?x2x?x32xf32>, %al: memref<?x4xf32>,
                       %qs: memref<?x?xi32>, %ks: memref<?x?xi32>,
                       %o: memref<?x4x?x32xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x32xf32> to tensor<?x4x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x32xf32> to tensor<?x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x32xf32> to tensor<?x2x?x32xf32>
  %alt = bufferization.to_tensor %al restrict : memref<?x4xf32> to tensor<?x4xf32>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x32xf32> to tensor<?x4x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>)
           alibi(%alt : tensor<?x4xf32>) segments(%qst, %kst : tensor<?x?xi32>, tensor<?x?xi32>)
           outs(%ot : tensor<?x4x?x32xf32>) causal(bottom_right) window(16, 0) softcap(3.0e+01) chunk(64) -> tensor<?x4x?x32xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x4x?x32xf32>, memref<?x4x?x32xf32>) -> ()
  return
}
