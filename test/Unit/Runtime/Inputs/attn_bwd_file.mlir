// fa.attention_backward in the kernel form, compiled from this file by
// fa-compile (CpuBackendTest.BackwardFromFile): GQA 4/2, D = 16, Dv = 8,
// top-left causal, key lengths, a softcap; the arguments in an order of
// their own (the runtime binds them by role).
func.func @attn_bwd_file(%do: memref<?x4x?x8xf32>, %q: memref<?x4x?x16xf32>,
                         %k: memref<?x2x?x16xf32>, %v: memref<?x2x?x8xf32>,
                         %dk: memref<?x2x?x16xf32>, %lens: memref<?xi32>,
                         %o: memref<?x4x?x8xf32>, %lse: memref<?x4x?xf32>,
                         %dv: memref<?x2x?x8xf32>, %dq: memref<?x4x?x16xf32>) {
  %tq = bufferization.to_tensor %q restrict : memref<?x4x?x16xf32> to tensor<?x4x?x16xf32>
  %tk = bufferization.to_tensor %k restrict : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %tv = bufferization.to_tensor %v restrict : memref<?x2x?x8xf32> to tensor<?x2x?x8xf32>
  %to = bufferization.to_tensor %o restrict : memref<?x4x?x8xf32> to tensor<?x4x?x8xf32>
  %tl = bufferization.to_tensor %lse restrict : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %td = bufferization.to_tensor %do restrict : memref<?x4x?x8xf32> to tensor<?x4x?x8xf32>
  %tn = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %gq = bufferization.to_tensor %dq restrict writable : memref<?x4x?x16xf32> to tensor<?x4x?x16xf32>
  %gk = bufferization.to_tensor %dk restrict writable : memref<?x2x?x16xf32> to tensor<?x2x?x16xf32>
  %gv = bufferization.to_tensor %dv restrict writable : memref<?x2x?x8xf32> to tensor<?x2x?x8xf32>
  %r:3 = fa.attention_backward
      ins(%tq, %tk, %tv : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>)
      forward(%to, %tl : tensor<?x4x?x8xf32>, tensor<?x4x?xf32>)
      grad_output(%td : tensor<?x4x?x8xf32>)
      kv_lens(%tn : tensor<?xi32>)
      outs(%gq, %gk, %gv : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>)
      causal(top_left) softcap(2.0)
      -> tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<?x4x?x16xf32>, memref<?x4x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<?x2x?x16xf32>, memref<?x2x?x16xf32>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<?x2x?x8xf32>, memref<?x2x?x8xf32>) -> ()
  return
}
