// The embedding example's input: grouped-query attention (8 query heads,
// 2 key/value heads, head dim 64, dynamic batch and lengths) with
// bottom-right causality and per-batch key lengths, and a softmax.
func.func @attention(%q: tensor<?x8x?x64xf16>, %k: tensor<?x2x?x64xf16>,
                     %v: tensor<?x2x?x64xf16>, %lens: tensor<?xi32>,
                     %o: tensor<?x8x?x64xf16>) -> tensor<?x8x?x64xf16> {
  %r = fa.attention ins(%q, %k, %v : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
         kv_lens(%lens : tensor<?xi32>)
         outs(%o : tensor<?x8x?x64xf16>)
         causal(bottom_right)
         -> tensor<?x8x?x64xf16>
  return %r : tensor<?x8x?x64xf16>
}

func.func @softmax(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = fa.softmax ins(%x : tensor<?x?xf32>) outs(%y : tensor<?x?xf32>) dimension(1) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
