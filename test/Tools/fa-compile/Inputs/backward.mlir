// A kernel-form fa.attention_backward (backward-input-file.test).
func.func @bwd(%q: memref<1x2x?x16xf32>, %k: memref<1x2x?x16xf32>,
               %v: memref<1x2x?x16xf32>, %o: memref<1x2x?x16xf32>,
               %lse: memref<1x2x?xf32>, %do: memref<1x2x?x16xf32>,
               %dq: memref<1x2x?x16xf32>, %dk: memref<1x2x?x16xf32>,
               %dv: memref<1x2x?x16xf32>) {
  %tq = bufferization.to_tensor %q restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %tk = bufferization.to_tensor %k restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %tv = bufferization.to_tensor %v restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %to = bufferization.to_tensor %o restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %tl = bufferization.to_tensor %lse restrict : memref<1x2x?xf32> to tensor<1x2x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %gq = bufferization.to_tensor %dq restrict writable : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %gk = bufferization.to_tensor %dk restrict writable : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %gv = bufferization.to_tensor %dv restrict writable : memref<1x2x?x16xf32> to tensor<1x2x?x16xf32>
  %r:3 = fa.attention_backward ins(%tq, %tk, %tv : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) forward(%to, %tl : tensor<1x2x?x16xf32>, tensor<1x2x?xf32>) grad_output(%td : tensor<1x2x?x16xf32>) outs(%gq, %gk, %gv : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<1x2x?x16xf32>, memref<1x2x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<1x2x?x16xf32>, memref<1x2x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<1x2x?x16xf32>, memref<1x2x?x16xf32>) -> ()
  return
}
