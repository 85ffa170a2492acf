// RUN: fa-opt %s -split-input-file -fa-decompose-reference | FileCheck %s

// The naive lowering materializes S for the whole problem: QK^T with the
// GQA head map h / 2, scale and masks, three softmax sweeps over full rows,
// then P V. No loops, no fa ops.
// CHECK-DAG: #[[$QMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG: #[[$KMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-DAG: #[[$LENMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0)>
// CHECK-DAG: #[[$MASKMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>
// CHECK-LABEL: func.func @gqa_masked
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: {{.*}}, %[[K:[a-z0-9]+]]: {{.*}}, %[[V:[a-z0-9]+]]: {{.*}}, %[[LENS:[a-z0-9]+]]: {{.*}}, %[[MASK:[a-z0-9]+]]: {{.*}}, %[[O:[a-z0-9]+]]: {{.*}}, %[[L:[a-z0-9]+]]: {{.*}})
//   CHECK-NOT:   scf.for
//   CHECK-NOT:   fa.attention
//       CHECK:   %[[S:.*]] = linalg.generic {indexing_maps = [#[[$QMAP]], #[[$KMAP]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] : {{.*}}) outs(%{{.*}} : tensor<?x4x?x?xf32>)
//       CHECK:   %[[SM:.*]] = linalg.generic {indexing_maps = [{{.*}}, #[[$LENMAP]], #[[$MASKMAP]], {{.*}}]{{.*}} ins(%[[S]], %[[LENS]], %[[MASK]] : {{.*}})
//       CHECK:     arith.cmpi slt
//       CHECK:     arith.cmpi sle
//       CHECK:     arith.andi
//       CHECK:     arith.andi
//       CHECK:     arith.select
//       CHECK:   %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[SM]] : tensor<?x4x?x?xf32>)
//       CHECK:     arith.maximumf
//       CHECK:   %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[SM]], %[[MAX]] : {{.*}})
//       CHECK:     math.exp
//       CHECK:   %[[P:.*]] = linalg.generic {{.*}} ins(%[[SM]], %[[MAX]], %[[SUM]] : {{.*}})
//       CHECK:     arith.divf
//       CHECK:   %[[OACC:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[V]] : {{.*}})
//       CHECK:   %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[OACC]] : {{.*}}) outs(%[[O]] : {{.*}})
//       CHECK:   %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[MAX]], %[[SUM]] : {{.*}}) outs(%[[L]] : {{.*}})
//       CHECK:     math.log
//       CHECK:   return %[[OUT]], %[[LSE]]
func.func @gqa_masked(%q: tensor<?x4x?x8xf32>, %k: tensor<?x2x?x8xf32>, %v: tensor<?x2x?x8xf32>, %lens: tensor<?xi32>,
                      %m: tensor<1x4x?x?xi1>, %o: tensor<?x4x?x8xf32>, %l: tensor<?x4x?xf32>) -> (tensor<?x4x?x8xf32>, tensor<?x4x?xf32>) {
  %r:2 = fa.attention ins(%q, %k, %v : tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>)
           kv_lens(%lens : tensor<?xi32>) mask(%m : tensor<1x4x?x?xi1>)
           outs(%o : tensor<?x4x?x8xf32>, %l : tensor<?x4x?xf32>) causal(top_left) -> tensor<?x4x?x8xf32>, tensor<?x4x?xf32>
  return %r#0, %r#1 : tensor<?x4x?x8xf32>, tensor<?x4x?xf32>
}

// -----

// Softmax: three sweeps (max, sum of exp, normalize) over the full tensor.
// CHECK-LABEL: func.func @softmax
//   CHECK-NOT:   scf.
//       CHECK:   %[[MAX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
//       CHECK:     arith.maximumf
//       CHECK:   %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%{{.*}}, %[[MAX]]
//       CHECK:     math.exp
//       CHECK:   linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%{{.*}}, %[[MAX]], %[[SUM]]
//       CHECK:     arith.divf
func.func @softmax(%x: tensor<3x?xf32>) -> tensor<3x?xf32> {
  %r = fa.softmax ins(%x : tensor<3x?xf32>) outs(%x : tensor<3x?xf32>) dimension(1) -> tensor<3x?xf32>
  return %r : tensor<3x?xf32>
}

// -----

// Every modifier in the scores generic, in the documented order: the keep
// predicates of causality, the window's left bound and the chunk; the
// scaled score capped by c * tanh(s / c), minus slope[b, h] * |q + off - k|;
// unequal segment ids and removed keys become -inf.
// CHECK-DAG: #[[$BH:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-DAG: #[[$BQ:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2)>
// CHECK-DAG: #[[$BK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-LABEL: func.func @reference_modifiers
//  CHECK-SAME:   %[[A:[^:]*]]: tensor<2x4xf32>, %[[QS:[^:]*]]: tensor<2x8xi32>, %[[KS:[^:]*]]: tensor<2x12xi32>
//       CHECK:   %[[OFF:.*]] = arith.subi %c12, %c8 : index
//       CHECK:   linalg.generic {indexing_maps = [#{{.*}}, #[[$BH]], #[[$BQ]], #[[$BK]], #{{.*}}]
//  CHECK-SAME:     ins(%{{.*}}, %[[A]], %[[QS]], %[[KS]] :
//       CHECK:   ^bb0(%[[S:.*]]: f32, %[[SLOPE:.*]]: f32, %[[QSEG:.*]]: i32, %[[KSEG:.*]]: i32, %{{.*}}: f32):
//       CHECK:     %[[X:.*]] = arith.mulf %[[S]], %{{.*}} : f32
//       CHECK:     %[[Q:.*]] = linalg.index 2 : index
//       CHECK:     %[[K:.*]] = linalg.index 3 : index
//       CHECK:     %[[POS:.*]] = arith.addi %[[Q]], %[[OFF]] : index
//       CHECK:     arith.cmpi sle, %[[K]], %[[POS]] : index
//       CHECK:     arith.subi %{{.*}}, %c3 : index
//       CHECK:     arith.cmpi sge, %[[K]]
//       CHECK:     arith.floordivsi %[[K]], %c4
//       CHECK:     arith.floordivsi
//       CHECK:     arith.cmpi eq
//       CHECK:     %[[CAP:.*]] = arith.constant 2.000000e+01 : f32
//       CHECK:     %[[D:.*]] = arith.divf %[[X]], %[[CAP]] : f32
//       CHECK:     %[[T:.*]] = math.tanh %[[D]] : f32
//       CHECK:     %[[CAPPED:.*]] = arith.mulf %[[CAP]], %[[T]] : f32
//       CHECK:     %[[DIST:.*]] = arith.sitofp %{{.*}} : i64 to f32
//       CHECK:     %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %[[DIST]] : f32
//       CHECK:     %[[Y:.*]] = arith.subf %[[CAPPED]], %[[BIAS]] : f32
//       CHECK:     %[[SAME:.*]] = arith.cmpi eq, %[[QSEG]], %[[KSEG]] : i32
//       CHECK:     %[[KEEP:.*]] = arith.andi %{{.*}}, %[[SAME]] : i1
//       CHECK:     arith.select %[[KEEP]], %[[Y]], %{{.*}} : f32
func.func @reference_modifiers(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x16xf32>, %a: tensor<2x4xf32>, %qs: tensor<2x8xi32>, %ks: tensor<2x12xi32>, %o: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x8x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x16xf32>) alibi(%a : tensor<2x4xf32>) segments(%qs, %ks : tensor<2x8xi32>, tensor<2x12xi32>) outs(%o : tensor<2x4x8x16xf32>) causal(bottom_right) window(3, -1) softcap(2.0e+01) chunk(4) -> tensor<2x4x8x16xf32>
  return %r : tensor<2x4x8x16xf32>
}

// -----

// score_mod and mask_mod are inlined in the scores' generic, after the
// scale, with (b, h, q, k) from linalg.index and q, k clamped to Nq - 1 and
// Nk - 1; the mask_mod's predicate removes keys (-inf) after the score_mod.
// CHECK-LABEL: func.func @regions
//  CHECK-SAME:   %[[T:[a-z0-9]+]]: tensor<2x19xf32>, %[[P:[a-z0-9]+]]: tensor<1xi32>
//       CHECK:   linalg.generic
//       CHECK:     %[[S:.*]] = arith.mulf
//   CHECK-DAG:     %[[QI:.*]] = linalg.index 2
//   CHECK-DAG:     %[[KI:.*]] = linalg.index 3
//   CHECK-DAG:     %[[BI:.*]] = linalg.index 0
//   CHECK-DAG:     %[[HI:.*]] = linalg.index 1
//       CHECK:     %[[QC:.*]] = arith.minsi %[[QI]]
//       CHECK:     %[[KC:.*]] = arith.minsi %[[KI]]
//       CHECK:     %[[D:.*]] = arith.subi %[[KC]], %[[QC]]
//       CHECK:     %[[I:.*]] = arith.addi %[[D]]
//       CHECK:     %[[X:.*]] = tensor.extract %[[T]][%[[HI]], %[[I]]]
//       CHECK:     %[[Y:.*]] = arith.addf %[[S]], %[[X]]
//       CHECK:     %[[PRE:.*]] = tensor.extract %[[P]][%[[BI]]]
//       CHECK:     %[[KEEP:.*]] = arith.cmpi slt, %{{.*}}, %[[PRE]] : i32
//       CHECK:     %[[R:.*]] = arith.select %[[KEEP]], %[[Y]], %{{.*}} : f32
//       CHECK:     linalg.yield %[[R]]
func.func @regions(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x12x16xf32>, %v: tensor<1x2x12x16xf32>, %o: tensor<1x2x8x16xf32>, %t: tensor<2x19xf32>, %p: tensor<1xi32>) -> tensor<1x2x8x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x12x16xf32>, tensor<1x2x12x16xf32>) mod_operands(%t, %p : tensor<2x19xf32>, tensor<1xi32>) outs(%o : tensor<1x2x8x16xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %tb: tensor<2x19xf32>, %pb: tensor<1xi32>):
    %c7 = arith.constant 7 : index
    %d = arith.subi %ki, %qi : index
    %i = arith.addi %d, %c7 : index
    %x = tensor.extract %tb[%h, %i] : tensor<2x19xf32>
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %tb: tensor<2x19xf32>, %pb: tensor<1xi32>):
    %pre = tensor.extract %pb[%b] : tensor<1xi32>
    %kk = arith.index_cast %ki : index to i32
    %keep = arith.cmpi slt, %kk, %pre : i32
    fa.yield %keep : i1
  } -> tensor<1x2x8x16xf32>
  return %r : tensor<1x2x8x16xf32>
}
