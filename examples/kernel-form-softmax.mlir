// The kernel form of a softmax (see examples/kernel-form.mlir): for
// fa-compile --target cpu and fa-lower-to-cpu; softmax has no GPU kernel yet.
func.func @softmax(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %xt = bufferization.to_tensor %x restrict : memref<?x?xf32> to tensor<?x?xf32>
  %yt = bufferization.to_tensor %y restrict writable : memref<?x?xf32> to tensor<?x?xf32>
  %r = fa.softmax ins(%xt : tensor<?x?xf32>) outs(%yt : tensor<?x?xf32>) dimension(1) -> tensor<?x?xf32>
  bufferization.materialize_in_destination %r in writable %y : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}
