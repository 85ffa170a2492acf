// RUN: fa-opt %s -split-input-file -fa-tile-attention-backward="block-q=32 block-kv=16" | FileCheck %s
// RUN: not fa-opt %s -split-input-file -fa-tile-attention-backward="block-q=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: fa-tile-attention-backward: block-q and block-kv must be positive, got block-q=0 block-kv=64

// GQA (Hq = 4, Hkv = 2), bottom-right causal, softcap: Delta, the task per
// (batch, kv head), the key-tile loop, the group's heads, the skipped
// query tiles, the forward's scores with the softcap derivative, the
// guarded P and the five contractions.
// CHECK-LABEL: func.func @gqa_causal_softcap
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: tensor<?x4x?x16xf32>, %[[K:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[V:[a-z0-9]+]]: tensor<?x2x?x8xf32>, %[[O:[a-z0-9]+]]: tensor<?x4x?x8xf32>, %[[LSE:[a-z0-9]+]]: tensor<?x4x?xf32>, %[[DO:[a-z0-9]+]]: tensor<?x4x?x8xf32>, %[[DQ:[a-z0-9]+]]: tensor<?x4x?x16xf32>, %[[DK:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[DV:[a-z0-9]+]]: tensor<?x2x?x8xf32>)
// Delta = rowsum(dO * O) over Dv.
//       CHECK:   %[[DELTA:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[DO]], %[[O]] : {{.*}}) outs(%{{.*}} : tensor<?x4x?xf32>)
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
// f32 gradients accumulate in their destinations; dK and dV start at 0
// (keys nobody attends).
//       CHECK:   %[[DQ0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[DQ]] : tensor<?x4x?x16xf32>)
//       CHECK:   %[[DK0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[DK]] : tensor<?x2x?x16xf32>)
//       CHECK:   %[[DV0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[DV]] : tensor<?x2x?x8xf32>)
// One task per (batch, kv head), owning dQ of the group's two heads.
//       CHECK:   %[[TASKS:.*]]:3 = scf.forall (%[[BI:.*]], %[[HKV:.*]]) in (%{{.*}}, 2) shared_outs(%[[DQS:.*]] = %[[DQ0]], %[[DKS:.*]] = %[[DK0]], %[[DVS:.*]] = %[[DV0]])
//       CHECK:     %[[H0:.*]] = arith.muli %[[HKV]], %c2
//       CHECK:     tensor.extract_slice %[[DQS]][%[[BI]], %[[H0]], 0, 0] [1, 2, %{{.*}}, 16] {{.*}} to tensor<2x?x16xf32>
//       CHECK:     scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
//       CHECK:       %[[K0:.*]] = arith.muli %[[J]], %c16
//       CHECK:       %[[KT:.*]] = tensor.extract_slice %[[K]][%[[BI]], %[[HKV]], %[[K0]], 0]
//       CHECK:       %[[VT:.*]] = tensor.extract_slice %[[V]][%[[BI]], %[[HKV]], %[[K0]], 0]
// The group's query heads, then the query tiles.
//       CHECK:       scf.for %[[G:.*]] = %{{.*}} to %{{c2[_0-9]*}} step
//       CHECK:         %[[H:.*]] = arith.addi %[[H0]], %[[G]]
//       CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
//       CHECK:           %[[Q0:.*]] = arith.muli %[[I]], %c32
// A pair is visited when the key tile starts before the query tile's key end.
//       CHECK:           %[[VIS:.*]] = arith.andi
//       CHECK:           scf.if %[[VIS]]
//       CHECK:             %[[QT:.*]] = tensor.extract_slice %[[Q]][%[[BI]], %[[H]], %[[Q0]], 0]
//       CHECK:             %[[DOT:.*]] = tensor.extract_slice %[[DO]][%[[BI]], %[[H]], %[[Q0]], 0]
//       CHECK:             %[[LT:.*]] = tensor.extract_slice %[[LSE]][%[[BI]], %[[H]], %[[Q0]]]
//       CHECK:             %[[DT:.*]] = tensor.extract_slice %[[DELTA]][%[[BI]], %[[H]], %[[Q0]]]
// S = Q K^T, then the scores and 1 - tanh^2.
//       CHECK:             %[[S:.*]] = linalg.generic {{.*}} ins(%[[QT]], %[[KT]] :
//       CHECK:             %[[SC:.*]]:2 = linalg.generic {{.*}} ins(%[[S]] :
//       CHECK:               math.tanh
//       CHECK:               arith.select
//       CHECK:               %[[T:.*]] = math.tanh
//       CHECK:               %[[T2:.*]] = arith.mulf %[[T]], %[[T]]
//       CHECK:               %[[DER:.*]] = arith.subf %{{.*}}, %[[T2]]
//       CHECK:               linalg.yield %{{.*}}, %[[DER]]
// P = exp(S - LSE), 0 where LSE = -inf.
//       CHECK:             %[[P:.*]] = linalg.generic {{.*}} ins(%[[SC]]#0, %[[LT]] :
//       CHECK:               %[[EMPTY:.*]] = arith.cmpf oeq, %{{.*}}, %cst
//       CHECK:               %[[E:.*]] = math.exp
//       CHECK:               arith.select %[[EMPTY]], %{{.*}}, %[[E]]
// dV += P^T dO.
//       CHECK:             %[[NDV:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DOT]] :
// dP - Delta = dO V^T - Delta, accumulated from -Delta.
//       CHECK:             %[[ND:.*]] = linalg.generic {{.*}} ins(%[[DT]] :
//       CHECK:               arith.negf
//       CHECK:             %[[DP:.*]] = linalg.generic {{.*}} ins(%[[DOT]], %[[VT]] : {{.*}}) outs(%[[ND]] :
// dS = P * (dP - Delta) * derivative * scale, 0 where P = 0.
//       CHECK:             %[[DS:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DP]], %[[SC]]#1 :
//       CHECK:               arith.mulf
//       CHECK:               arith.mulf
//       CHECK:               arith.mulf
//       CHECK:               arith.cmpf oeq
//       CHECK:               arith.select
// dK += dS^T Q; dQ += dS K (guarded: causal keys inside the range).
//       CHECK:             %[[NDK:.*]] = linalg.generic {{.*}} ins(%[[DS]], %[[QT]] :
//       CHECK:             %[[DQT:.*]] = tensor.extract_slice %{{.*}}[%[[G]], %[[Q0]], 0]
//       CHECK:             %[[NDQ:.*]] = linalg.generic {{.*}} ins(%[[DS]], %[[KT]] : {{.*}}) outs(%[[DQT]] :
//       CHECK:               arith.cmpf oeq
//       CHECK:               arith.select
//       CHECK:             tensor.insert_slice %[[NDQ]]
//       CHECK:             scf.yield %[[NDK]], %[[NDV]]
// dK and dV of the key tile rounded into the task's rows.
//       CHECK:       tensor.insert_slice %{{.*}}[%[[K0]], 0]
//       CHECK:       tensor.insert_slice %{{.*}}[%[[K0]], 0]
//       CHECK:     scf.forall.in_parallel
//       CHECK:       tensor.parallel_insert_slice
//       CHECK:       tensor.parallel_insert_slice
//       CHECK:       tensor.parallel_insert_slice
//       CHECK:   return %[[TASKS]]#0, %[[TASKS]]#1, %[[TASKS]]#2
func.func @gqa_causal_softcap(%q: tensor<?x4x?x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x8xf32>, %o: tensor<?x4x?x8xf32>, %lse: tensor<?x4x?xf32>, %do: tensor<?x4x?x8xf32>, %dq: tensor<?x4x?x16xf32>, %dk: tensor<?x2x?x16xf32>, %dv: tensor<?x2x?x8xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>) {
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>) forward(%o, %lse : tensor<?x4x?x8xf32>, tensor<?x4x?xf32>) grad_output(%do : tensor<?x4x?x8xf32>) outs(%dq, %dk, %dv : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>) causal(bottom_right) softcap(20.0) -> tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>
  return %r#0, %r#1, %r#2 : tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x8xf32>
}

// -----

// Without modifiers or masks: no derivative result, and dQ's product is
// not guarded (every key of a visited tile is kept); f16 gradients
// accumulate in f32 tiles and buffers, each rounded once.
// CHECK-LABEL: func.func @dense_f16
//  CHECK-SAME:   %{{[a-z0-9]+}}: tensor<1x2x?xf32>, %{{[a-z0-9]+}}: tensor<1x2x?x16xf16>, %[[DQ:[a-z0-9]+]]: tensor<1x2x?x16xf16>
//       CHECK:   %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x2x?x16xf32>)
//       CHECK:   %[[TASKS:.*]]:3 = scf.forall {{.*}} shared_outs(%{{.*}} = %[[ACC]],
//       CHECK:             %[[SC:.*]] = linalg.generic
//   CHECK-NOT:               math.tanh
//       CHECK:               linalg.yield %{{.*}} : f32
//       CHECK:             %[[NDQ:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<?x16xf32>)
//  CHECK-NEXT:             ^bb0
//  CHECK-NEXT:               arith.extf
//  CHECK-NEXT:               arith.mulf
//  CHECK-NEXT:               arith.addf
//       CHECK:       arith.truncf %{{.*}} : f32 to f16
//       CHECK:   %[[RDQ:.*]] = linalg.generic {{.*}} ins(%[[TASKS]]#0 : {{.*}}) outs(%[[DQ]] :
//       CHECK:     arith.truncf %{{.*}} : f32 to f16
//       CHECK:   return %[[RDQ]], %[[TASKS]]#1, %[[TASKS]]#2
func.func @dense_f16(%q: tensor<1x2x?x16xf16>, %k: tensor<1x2x?x16xf16>, %v: tensor<1x2x?x16xf16>, %o: tensor<1x2x?x16xf16>, %lse: tensor<1x2x?xf32>, %do: tensor<1x2x?x16xf16>, %dq: tensor<1x2x?x16xf16>, %dk: tensor<1x2x?x16xf16>, %dv: tensor<1x2x?x16xf16>) -> (tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>) {
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>) forward(%o, %lse : tensor<1x2x?x16xf16>, tensor<1x2x?xf32>) grad_output(%do : tensor<1x2x?x16xf16>) outs(%dq, %dk, %dv : tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>) -> tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>
  return %r#0, %r#1, %r#2 : tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>, tensor<1x2x?x16xf16>
}
