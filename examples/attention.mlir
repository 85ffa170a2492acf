// Grouped-query attention with bottom-right causality, per-batch key lengths
// and the log-sum-exp: 8 query heads share 2 key/value heads, head dim 64.
// B, Nq and Nk are dynamic.
func.func @attention(%q: tensor<?x8x?x64xf16>, %k: tensor<?x2x?x64xf16>,
                     %v: tensor<?x2x?x64xf16>, %lens: tensor<?xi32>,
                     %o: tensor<?x8x?x64xf16>, %lse: tensor<?x8x?xf32>)
    -> (tensor<?x8x?x64xf16>, tensor<?x8x?xf32>) {
  %r:2 = fa.attention ins(%q, %k, %v : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
           kv_lens(%lens : tensor<?xi32>)
           outs(%o : tensor<?x8x?x64xf16>, %lse : tensor<?x8x?xf32>)
           causal(bottom_right)
           -> tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
  return %r#0, %r#1 : tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
}

// Softmax over the last dimension.
func.func @softmax(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = fa.softmax ins(%x : tensor<?x?xf32>) outs(%y : tensor<?x?xf32>) dimension(1) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
