// RUN: fa-opt %s -split-input-file -fa-lower-merge | FileCheck %s

// Three partials of [2, 4] rows of 8: the max LSE (a reduction over the
// split dim, from -inf), the sum of the weights exp(LSE_s - Mu) (Mu the max,
// 0 when it is -inf; empty partials weigh 0), the weighted O sum (an empty
// partial leaves the accumulator as it is: its O, NaN included, is never
// added), then O = A / L (0 where L = 0) rounded to f16 and LSE = Mu + log L
// (-inf where L = 0).

// CHECK-DAG: #[[$SROWS:.*]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-DAG: #[[$ROWS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$SO:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d0, d1, d2)>
// CHECK-LABEL: func.func @merge
// CHECK-SAME: %[[PO:.*]]: tensor<3x2x4x8xf32>, %[[PL:.*]]: tensor<3x2x4xf32>, %[[O:.*]]: tensor<2x4x8xf16>, %[[L:.*]]: tensor<2x4xf32>
// CHECK: %[[M:.*]] = linalg.generic {indexing_maps = [#[[$SROWS]], #[[$ROWS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[PL]] : tensor<3x2x4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[PL]], %[[M]] : tensor<3x2x4xf32>, tensor<2x4xf32>)
// CHECK:   %[[EMPTY:.*]] = arith.cmpf oeq, %{{.*}}, %{{.*}} : f32
// CHECK:   math.exp
// CHECK:   %[[W:.*]] = arith.select %[[EMPTY]], %{{.*}}, %{{.*}} : f32
// CHECK:   arith.addf %{{.*}}, %[[W]] : f32
// CHECK: %[[ACC:.*]] = linalg.generic {indexing_maps = [#[[$SO]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[PO]], %[[PL]], %[[M]] :
// CHECK:   ^bb0(%[[X:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32, %[[OUT:.*]]: f32):
// CHECK:   %[[E2:.*]] = arith.cmpf oeq
// CHECK:   %[[T:.*]] = arith.mulf %{{.*}}, %[[X]] : f32
// CHECK:   %[[S:.*]] = arith.addf %[[OUT]], %[[T]] : f32
// CHECK:   arith.select %[[E2]], %[[OUT]], %[[S]] : f32
// CHECK: %[[RO:.*]] = linalg.generic {{.*}} ins(%[[ACC]], %[[SUM]] : tensor<2x4x8xf32>, tensor<2x4xf32>) outs(%[[O]] : tensor<2x4x8xf16>)
// CHECK:   arith.divf
// CHECK:   arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[RL:.*]] = linalg.generic {{.*}} ins(%[[M]], %[[SUM]] : tensor<2x4xf32>, tensor<2x4xf32>) outs(%[[L]] : tensor<2x4xf32>)
// CHECK:   math.log
// CHECK: return %[[RO]], %[[RL]]
func.func @merge(%po: tensor<3x2x4x8xf32>, %pl: tensor<3x2x4xf32>, %o: tensor<2x4x8xf16>, %l: tensor<2x4xf32>) -> (tensor<2x4x8xf16>, tensor<2x4xf32>) {
  %r:2 = fa.merge ins(%po, %pl : tensor<3x2x4x8xf32>, tensor<3x2x4xf32>) outs(%o : tensor<2x4x8xf16>, %l : tensor<2x4xf32>) -> tensor<2x4x8xf16>, tensor<2x4xf32>
  return %r#0, %r#1 : tensor<2x4x8xf16>, tensor<2x4xf32>
}

// -----

// Dynamic sizes come from the partials; without an lse destination no LSE
// is computed.
// CHECK-LABEL: func.func @merge_dynamic
// CHECK: %[[N:.*]] = tensor.dim %arg1, %c1 : tensor<?x?xf32>
// CHECK: tensor.empty(%[[N]]) : tensor<?xf32>
// CHECK-NOT: math.log
// CHECK: return
func.func @merge_dynamic(%po: tensor<?x?x16xf32>, %pl: tensor<?x?xf32>, %o: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %r = fa.merge ins(%po, %pl : tensor<?x?x16xf32>, tensor<?x?xf32>) outs(%o : tensor<?x16xf32>) -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
