// An f16 kernel function (Hq 4, Hkv 2, D 64, key lengths, LSE, causal
// bottom-right) in the form fa-run and fa-compile build.
func.func @fa_attention(%q: memref<?x4x?x64xf16>, %k: memref<?x2x?x64xf16>, %v: memref<?x2x?x64xf16>, %lens: memref<?xi32>, %o: memref<?x4x?x64xf16>, %lse: memref<?x4x?xf32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %k_t = bufferization.to_tensor %k restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %v_t = bufferization.to_tensor %v restrict : memref<?x2x?x64xf16> to tensor<?x2x?x64xf16>
  %lens_t = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %o_t = bufferization.to_tensor %o restrict writable : memref<?x4x?x64xf16> to tensor<?x4x?x64xf16>
  %lse_t = bufferization.to_tensor %lse restrict writable : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%q_t, %k_t, %v_t : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>) kv_lens(%lens_t : tensor<?xi32>) outs(%o_t : tensor<?x4x?x64xf16>, %lse_t : tensor<?x4x?xf32>) causal(bottom_right) -> tensor<?x4x?x64xf16>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in writable %o : (tensor<?x4x?x64xf16>, memref<?x4x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in writable %lse : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}
