func.func @twice(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %xt = bufferization.to_tensor %x restrict : memref<?x?xf32> to tensor<?x?xf32>
  %yt = bufferization.to_tensor %y restrict writable : memref<?x?xf32> to tensor<?x?xf32>
  %a = fa.softmax ins(%xt : tensor<?x?xf32>) outs(%yt : tensor<?x?xf32>) dimension(0) -> tensor<?x?xf32>
  %b = fa.softmax ins(%a : tensor<?x?xf32>) outs(%yt : tensor<?x?xf32>) dimension(1) -> tensor<?x?xf32>
  bufferization.materialize_in_destination %b in writable %y : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}
