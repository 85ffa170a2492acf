// Paged K/V (a block_table) is lowered by the CPU vector kernel and the SIMT
// GPU kernel (both in the kernel form) only; the other lowerings of
// fa.attention say so instead of misreading the cache.
// RUN: not fa-opt %s -fa-decompose-reference 2>&1 | FileCheck %s --check-prefix=REF
// RUN: not fa-opt %s -fa-tile-attention 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not fa-opt %s -fa-lower-to-cpu 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not fa-opt %s -pass-pipeline='builtin.module(func.func(fa-promote-shared))' 2>&1 | FileCheck %s --check-prefix=GPU

// REF: error: 'fa.attention' op with a block_table (paged K/V): fa-decompose-reference does not read paged caches; only the CPU vector kernel (fa-cpu-attention, kernel form) does
// TILE: error: 'fa.attention' op with a block_table (paged K/V): fa-tile-attention does not read paged caches; only the CPU vector kernel (fa-cpu-attention, kernel form) does
// GPU: error: fa-promote-shared: operands must come from memref arguments through bufferization.to_tensor
func.func @paged(%q: tensor<2x4x1x8xf32>, %kc: tensor<5x16x2x8xf32>, %vc: tensor<5x16x2x8xf32>, %lens: tensor<2xi32>, %bt: tensor<2x3xi32>, %o: tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32> {
  %r = fa.attention ins(%q, %kc, %vc : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) kv_lens(%lens : tensor<2xi32>) block_table(%bt : tensor<2x3xi32>) outs(%o : tensor<2x4x1x8xf32>) causal(bottom_right) -> tensor<2x4x1x8xf32>
  return %r : tensor<2x4x1x8xf32>
}
