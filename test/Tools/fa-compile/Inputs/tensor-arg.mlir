func.func @tensor_arg(%x: tensor<?x?xf32>, %y: memref<?x?xf32>) {
  %yt = bufferization.to_tensor %y restrict writable : memref<?x?xf32> to tensor<?x?xf32>
  %r = fa.softmax ins(%x : tensor<?x?xf32>) outs(%yt : tensor<?x?xf32>) dimension(0) -> tensor<?x?xf32>
  bufferization.materialize_in_destination %r in writable %y : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}
