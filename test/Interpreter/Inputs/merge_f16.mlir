// A kernel function holding one fa.merge (fa-emulate.test): five rows,
// Dv = 40, f16 output, no LSE.
func.func @merge(%po: memref<?x?x40xf32>, %pl: memref<?x?xf32>, %o: memref<?x40xf16>) {
  %pot = bufferization.to_tensor %po restrict : memref<?x?x40xf32> to tensor<?x?x40xf32>
  %plt = bufferization.to_tensor %pl restrict : memref<?x?xf32> to tensor<?x?xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x40xf16> to tensor<?x40xf16>
  %r = fa.merge ins(%pot, %plt : tensor<?x?x40xf32>, tensor<?x?xf32>) outs(%ot : tensor<?x40xf16>) -> tensor<?x40xf16>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x40xf16>, memref<?x40xf16>) -> ()
  return
}
