// A kernel with a q_offset operand: kernels do not take it yet (error).
func.func @qoff(%q: memref<1x2x64x64xf16>, %k: memref<1x2x64x64xf16>, %v: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x64x64xf16> to tensor<1x2x64x64xf16>
  %p = arith.constant 5 : index
  %e = tensor.empty() : tensor<1x2x64x64xf16>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) q_offset(%p) outs(%e : tensor<1x2x64x64xf16>) -> tensor<1x2x64x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x64x64xf16>, memref<1x2x64x64xf16>) -> ()
  return
}
