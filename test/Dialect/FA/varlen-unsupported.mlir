// The token-major variable-length form (cu_seqlens) is lowered by the CPU
// vector kernel and the SIMT GPU kernel (both in the kernel form) only; the
// other lowerings of fa.attention say so instead of misreading the packed
// tensors, and the op cannot be tiled.
// RUN: not fa-opt %s -fa-decompose-reference 2>&1 | FileCheck %s --check-prefix=REF
// RUN: not fa-opt %s -fa-tile-attention 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not fa-opt %s -fa-lower-to-cpu 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not fa-opt %s -pass-pipeline='builtin.module(func.func(fa-promote-shared))' 2>&1 | FileCheck %s --check-prefix=GPU

// REF: error: 'fa.attention' op with cu_seqlens (token-major variable-length batches): fa-decompose-reference does not read this form; only the CPU vector kernel (fa-cpu-attention, kernel form) does
// TILE: error: 'fa.attention' op with cu_seqlens (token-major variable-length batches): fa-tile-attention does not read this form; only the CPU vector kernel (fa-cpu-attention, kernel form) does
// GPU: error: fa-promote-shared: operands must come from memref arguments through bufferization.to_tensor
func.func @varlen(%q: tensor<9x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<9x4x8xf32>) -> tensor<9x4x8xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<9x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<9x4x8xf32>) causal(bottom_right) -> tensor<9x4x8xf32>
  return %r : tensor<9x4x8xf32>
}
