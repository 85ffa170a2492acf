// Kernels for input-file.test: an attention whose arguments are not in the
// canonical order (output first) with a static batch of 2, a boolean mask
// passed as bytes and broadcast over the batch, and a softmax. @helper holds
// no fa op and @external is a declaration; both are skipped.

func.func @attn_kernel(%o: memref<2x4x?x32xf32>, %q: memref<2x4x?x32xf32>,
                       %k: memref<2x2x?x32xf32>, %v: memref<2x2x?x32xf32>,
                       %m: memref<1x4x?x?xi8>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x?x32xf32> to tensor<2x4x?x32xf32>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x?x32xf32> to tensor<2x2x?x32xf32>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x?x32xf32> to tensor<2x2x?x32xf32>
  %mt = bufferization.to_tensor %m restrict : memref<1x4x?x?xi8> to tensor<1x4x?x?xi8>
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %d2 = tensor.dim %mt, %c2 : tensor<1x4x?x?xi8>
  %d3 = tensor.dim %mt, %c3 : tensor<1x4x?x?xi8>
  %e = tensor.empty(%d2, %d3) : tensor<1x4x?x?xi1>
  %mb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%mt : tensor<1x4x?x?xi8>) outs(%e : tensor<1x4x?x?xi1>) {
  ^bb0(%in: i8, %out: i1):
    %zero = arith.constant 0 : i8
    %ne = arith.cmpi ne, %in, %zero : i8
    linalg.yield %ne : i1
  } -> tensor<1x4x?x?xi1>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x?x32xf32> to tensor<2x4x?x32xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<2x4x?x32xf32>, tensor<2x2x?x32xf32>, tensor<2x2x?x32xf32>)
         mask(%mb : tensor<1x4x?x?xi1>) outs(%ot : tensor<2x4x?x32xf32>)
         causal(bottom_right) scale(5.000000e-01) -> tensor<2x4x?x32xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<2x4x?x32xf32>, memref<2x4x?x32xf32>) -> ()
  return
}

func.func @softmax_kernel(%x: memref<?x?xf16>, %y: memref<?x?xf16>) {
  %xt = bufferization.to_tensor %x restrict : memref<?x?xf16> to tensor<?x?xf16>
  %yt = bufferization.to_tensor %y restrict writable : memref<?x?xf16> to tensor<?x?xf16>
  %r = fa.softmax ins(%xt : tensor<?x?xf16>) outs(%yt : tensor<?x?xf16>) dimension(0) -> tensor<?x?xf16>
  bufferization.materialize_in_destination %r in writable %y : (tensor<?x?xf16>, memref<?x?xf16>) -> ()
  return
}

func.func @helper(%a: i32) -> i32 {
  return %a : i32
}

func.func private @external(memref<?xf32>)
