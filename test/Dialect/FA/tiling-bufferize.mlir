// RUN: fa-opt %s -transform-interpreter -fa-tile-attention -fa-online-softmax \
// RUN:   -one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s
// RUN: not fa-opt %s -transform-interpreter \
// RUN:   -one-shot-bufferize="bufferize-function-boundaries" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNLOWERED

// fa ops exist on tensors only (there is no memref form to bufferize them
// into), so they implement no BufferizableOpInterface: one-shot
// bufferization runs after the fa lowerings, also on tiled IR. The tiled
// loops and the slices around the tiled ops bufferize like any upstream IR.

// CHECK-LABEL: func.func @tile_lower_bufferize
// CHECK-SAME: memref<2x4x40x16xf32
// CHECK-NOT: tensor<
// CHECK-NOT: fa.
// CHECK: scf.forall
// CHECK: memref.subview
// CHECK: return

// UNLOWERED: error: op was not bufferized
func.func @tile_lower_bufferize(%q: tensor<2x4x40x16xf32>, %k: tensor<2x4x24x16xf32>,
                                %v: tensor<2x4x24x16xf32>, %x: tensor<8x100xf32>)
    -> (tensor<2x4x40x16xf32>, tensor<8x100xf32>) {
  %o0 = tensor.empty() : tensor<2x4x40x16xf32>
  %o = fa.attention ins(%q, %k, %v : tensor<2x4x40x16xf32>, tensor<2x4x24x16xf32>, tensor<2x4x24x16xf32>)
      outs(%o0 : tensor<2x4x40x16xf32>) causal(bottom_right) -> tensor<2x4x40x16xf32>
  %e = tensor.empty() : tensor<8x100xf32>
  %y = fa.softmax ins(%x : tensor<8x100xf32>) outs(%e : tensor<8x100xf32>) dimension(1) -> tensor<8x100xf32>
  return %o, %y : tensor<2x4x40x16xf32>, tensor<8x100xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [1, 2, 16] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %s = transform.structured.match ops{["fa.softmax"]} in %root : (!transform.any_op) -> !transform.any_op
    %t2, %f2 = transform.structured.tile_using_forall %s tile_sizes [4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
