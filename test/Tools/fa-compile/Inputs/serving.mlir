// Kernels of the serving forms in the kernel form: a paged K/V cache
// (pages of 16 rows) and a token-major variable-length batch.
func.func @paged(%q: memref<?x4x?x16xf32>, %k: memref<?x16x2x16xf32>,
                 %v: memref<?x16x2x16xf32>, %lens: memref<?xi32>,
                 %table: memref<?x?xi32>, %o: memref<?x4x?x16xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x16xf32> to tensor<?x4x?x16xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x16x2x16xf32> to tensor<?x16x2x16xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x16x2x16xf32> to tensor<?x16x2x16xf32>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %tt = bufferization.to_tensor %table restrict : memref<?x?xi32> to tensor<?x?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x16xf32> to tensor<?x4x?x16xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x16xf32>, tensor<?x16x2x16xf32>, tensor<?x16x2x16xf32>)
         kv_lens(%lt : tensor<?xi32>) block_table(%tt : tensor<?x?xi32>)
         outs(%ot : tensor<?x4x?x16xf32>) causal(bottom_right) -> tensor<?x4x?x16xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x?x16xf32>, memref<?x4x?x16xf32>) -> ()
  return
}

func.func @varlen(%q: memref<?x4x16xf32>, %k: memref<?x2x16xf32>,
                  %v: memref<?x2x8xf32>, %cu_q: memref<?xi32>,
                  %cu_k: memref<?xi32>, %o: memref<?x4x8xf32>,
                  %lse: memref<4x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x16xf32> to tensor<?x4x16xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x16xf32> to tensor<?x2x16xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x8xf32> to tensor<?x2x8xf32>
  %cq = bufferization.to_tensor %cu_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_k restrict : memref<?xi32> to tensor<?xi32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x8xf32> to tensor<?x4x8xf32>
  %lt = bufferization.to_tensor %lse restrict writable : memref<4x?xf32> to tensor<4x?xf32>
  %r, %l = fa.attention ins(%qt, %kt, %vt : tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x8xf32>)
         cu_seqlens(%cq, %ck : tensor<?xi32>, tensor<?xi32>)
         outs(%ot : tensor<?x4x8xf32>, %lt : tensor<4x?xf32>) causal(top_left)
         -> tensor<?x4x8xf32>, tensor<4x?xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x4x8xf32>, memref<?x4x8xf32>) -> ()
  bufferization.materialize_in_destination %l in writable %lse : (tensor<4x?xf32>, memref<4x?xf32>) -> ()
  return
}
