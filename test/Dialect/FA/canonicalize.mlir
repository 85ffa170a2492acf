// RUN: fa-opt %s -split-input-file -canonicalize | FileCheck %s

// tensor.casts that erase static shapes fold into fa.attention (its own
// pattern: the upstream one for destination-style ops crashed on the op's
// empty modifier regions); the results take the static types, cast back
// for the old users.
// CHECK-LABEL: func.func @fold_casts
//  CHECK-SAME:   %[[Q:[a-z0-9]+]]: tensor<1x2x3x8xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x5x8xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x5x8xf32>, %[[O:[a-z0-9]+]]: tensor<1x2x3x8xf32>
//   CHECK-NOT:   tensor.cast
//       CHECK:   %[[R:.*]] = fa.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) outs(%[[O]] : tensor<1x2x3x8xf32>) causal(bottom_right) -> tensor<1x2x3x8xf32>
//       CHECK:   %[[C:.*]] = tensor.cast %[[R]] : tensor<1x2x3x8xf32> to tensor<1x2x?x8xf32>
//       CHECK:   return %[[C]]
func.func @fold_casts(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>, %o: tensor<1x2x3x8xf32>) -> tensor<1x2x?x8xf32> {
  %qc = tensor.cast %q : tensor<1x2x3x8xf32> to tensor<1x2x?x8xf32>
  %kc = tensor.cast %k : tensor<1x2x5x8xf32> to tensor<1x2x?x8xf32>
  %vc = tensor.cast %v : tensor<1x2x5x8xf32> to tensor<1x2x?x8xf32>
  %oc = tensor.cast %o : tensor<1x2x3x8xf32> to tensor<1x2x?x8xf32>
  %r = fa.attention ins(%qc, %kc, %vc : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>)
         outs(%oc : tensor<1x2x?x8xf32>) causal(bottom_right) -> tensor<1x2x?x8xf32>
  return %r : tensor<1x2x?x8xf32>
}

// -----

// With a score_mod region: the region is kept.
// CHECK-LABEL: func.func @fold_casts_region
//       CHECK:   fa.attention ins(%{{.*}} : tensor<1x1x4x8xf32>, tensor<1x1x6x8xf32>, tensor<1x1x6x8xf32>) outs(%{{.*}} : tensor<1x1x4x8xf32>, %{{.*}} : tensor<1x1x4xf32>) score_mod {
//       CHECK:     arith.mulf
//       CHECK:     fa.yield
//       CHECK:   } -> tensor<1x1x4x8xf32>, tensor<1x1x4xf32>
func.func @fold_casts_region(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x6x8xf32>, %v: tensor<1x1x6x8xf32>, %o: tensor<1x1x4x8xf32>, %l: tensor<1x1x4xf32>) -> (tensor<1x1x?x8xf32>, tensor<1x1x?xf32>) {
  %qc = tensor.cast %q : tensor<1x1x4x8xf32> to tensor<1x1x?x8xf32>
  %oc = tensor.cast %o : tensor<1x1x4x8xf32> to tensor<1x1x?x8xf32>
  %lc = tensor.cast %l : tensor<1x1x4xf32> to tensor<1x1x?xf32>
  %r, %lse = fa.attention ins(%qc, %k, %v : tensor<1x1x?x8xf32>, tensor<1x1x6x8xf32>, tensor<1x1x6x8xf32>)
         outs(%oc : tensor<1x1x?x8xf32>, %lc : tensor<1x1x?xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %s, %two : f32
    fa.yield %m : f32
  } -> tensor<1x1x?x8xf32>, tensor<1x1x?xf32>
  return %r, %lse : tensor<1x1x?x8xf32>, tensor<1x1x?xf32>
}
