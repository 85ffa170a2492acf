func.func @tensors(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = fa.softmax ins(%x : tensor<?x?xf32>) outs(%y : tensor<?x?xf32>) dimension(0) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
