func.func @i1mask(%q: memref<?x2x?x16xf32>, %k: memref<?x2x?x16xf32>, %v: memref<?x2x?x16xf32>, %m: memref<?x2x?x?xi1>, %o: memref<?x2x?x16xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %mt = bufferization.to_tensor %m restrict : memref<?x2x?x?xi1> to tensor<?x2x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) mask(%mt : tensor<?x2x?x?xi1>) outs(%ot : tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x16xf32>, memref<?x2x?x16xf32>) -> ()
  return
}
