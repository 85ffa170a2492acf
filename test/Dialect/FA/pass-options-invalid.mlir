// Non-positive tile sizes are rejected with a clear error, not a crash.
// RUN: not fa-opt %s -fa-tile-attention="block-q=0" 2>&1 | FileCheck %s --check-prefix=BQ
// RUN: not fa-opt %s -fa-tile-attention="block-kv=-4" 2>&1 | FileCheck %s --check-prefix=BKV
// RUN: not fa-opt %s -fa-online-softmax="tile-size=0" 2>&1 | FileCheck %s --check-prefix=TS
// RUN: not fa-opt %s -fa-lower-to-cpu="block-q=0" 2>&1 | FileCheck %s --check-prefix=BQ
// BQ: error: fa-tile-attention: block-q and block-kv must be positive, got block-q=0 block-kv=64
// BKV: error: fa-tile-attention: block-q and block-kv must be positive, got block-q=64 block-kv=-4
// TS: error: fa-online-softmax: tile-size must be positive, got 0
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %r = fa.attention ins(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
         outs(%o : tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}
