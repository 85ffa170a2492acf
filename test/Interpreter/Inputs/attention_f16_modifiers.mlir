// An f16 kernel function with ALiBi slopes [Hq], segment ids and a window
// (fa-emulate.test).
func.func @fa_attention(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %al: memref<4xf32>, %qs: memref<?x?xi32>, %ks: memref<?x?xi32>, %o: memref<?x4x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %alt = bufferization.to_tensor %al restrict : memref<4xf32> to tensor<4xf32>
  %qst = bufferization.to_tensor %qs restrict : memref<?x?xi32> to tensor<?x?xi32>
  %kst = bufferization.to_tensor %ks restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         alibi(%alt : tensor<4xf32>) segments(%qst, %kst : tensor<?x?xi32>, tensor<?x?xi32>)
         outs(%ot : tensor<?x4x?x64xf16>) causal(bottom_right) window(8, 0) -> tensor<?x4x?x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  return
}
