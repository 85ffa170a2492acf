// RUN: fa-opt %s -split-input-file -transform-interpreter -verify-diagnostics=only-expected

// (only-expected: upstream's own notes and warnings around a failed tiling
// are not part of this test.)

// A softmax tile must cover whole rows.

func.func @softmax_tile_normalized_dim(%x: tensor<4x100xf32>) -> tensor<4x100xf32> {
  %e = tensor.empty() : tensor<4x100xf32>
  // expected-error @+1 {{'fa.softmax' op cannot tile the normalized dimension 1: a tile must cover whole rows}}
  %y = fa.softmax ins(%x : tensor<4x100xf32>) outs(%e : tensor<4x100xf32>) dimension(1) -> tensor<4x100xf32>
  return %y : tensor<4x100xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.softmax"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{failed to apply}}
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [0, 32] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Under GQA (group 4) a tile of 3 query heads would straddle K/V heads.

func.func @gqa_bad_head_tile(%q: tensor<1x8x16x16xf32>, %k: tensor<1x2x16x16xf32>,
                             %v: tensor<1x2x16x16xf32>) -> tensor<1x8x16x16xf32> {
  %o0 = tensor.empty() : tensor<1x8x16x16xf32>
  // expected-error @+1 {{'fa.attention' op cannot tile query heads (Hq = 8, Hkv = 2): under grouped-query attention the tile size along Hq must be static and a multiple or a divisor of Hq / Hkv = 4, and divide Hq}}
  %o = fa.attention ins(%q, %k, %v : tensor<1x8x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>)
      outs(%o0 : tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
  return %o : tensor<1x8x16x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{failed to apply}}
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [0, 3] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Paged K/V (a block_table) cannot be tiled yet.

func.func @paged(%q: tensor<2x4x1x8xf32>, %kc: tensor<5x16x2x8xf32>, %vc: tensor<5x16x2x8xf32>, %lens: tensor<2xi32>, %bt: tensor<2x3xi32>) -> tensor<2x4x1x8xf32> {
  %o0 = tensor.empty() : tensor<2x4x1x8xf32>
  // expected-error @+1 {{'fa.attention' op with a block_table (paged K/V) cannot be tiled yet}}
  %r = fa.attention ins(%q, %kc, %vc : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) kv_lens(%lens : tensor<2xi32>) block_table(%bt : tensor<2x3xi32>) outs(%o0 : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return %r : tensor<2x4x1x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{failed to apply}}
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 2] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// The token-major variable-length form cannot be tiled (yet).

func.func @varlen(%q: tensor<9x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>) -> tensor<9x4x8xf32> {
  %o0 = tensor.empty() : tensor<9x4x8xf32>
  // expected-error @+1 {{'fa.attention' op with cu_seqlens (token-major variable-length batches) cannot be tiled yet}}
  %r = fa.attention ins(%q, %k, %v : tensor<9x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o0 : tensor<9x4x8xf32>) -> tensor<9x4x8xf32>
  return %r : tensor<9x4x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{failed to apply}}
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 2] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
