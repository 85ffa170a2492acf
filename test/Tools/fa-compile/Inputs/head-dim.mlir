func.func @hd100(%q: memref<?x2x?x100xf32>, %k: memref<?x2x?x100xf32>, %v: memref<?x2x?x100xf32>, %o: memref<?x2x?x100xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x100xf32> to tensor<?x2x?x100xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x100xf32> to tensor<?x2x?x100xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x100xf32> to tensor<?x2x?x100xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x100xf32> to tensor<?x2x?x100xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x100xf32>, tensor<?x2x?x100xf32>, tensor<?x2x?x100xf32>) outs(%ot : tensor<?x2x?x100xf32>) -> tensor<?x2x?x100xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x100xf32>, memref<?x2x?x100xf32>) -> ()
  return
}
