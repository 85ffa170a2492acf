// RUN: fa-opt %s -split-input-file -transform-interpreter -canonicalize -cse | FileCheck %s

// Tiling fa.attention_backward over (B, Hkv): a tile of one batch entry and
// one kv head (GQA, group 2) slices Q, O, LSE, dO, dQ, the mask and the
// ALiBi slopes to the head's two query heads, K, V, dK, dV to the kv head,
// the key lengths to the batch entry; Nq, Nk and the head dims stay whole.

// CHECK-DAG: #[[$H2:.*]] = affine_map<(d0) -> (d0 * 2)>
// CHECK-LABEL: func.func @tile_backward
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x4x40x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x2x24x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x2x24x8xf32>, %[[O:[a-z0-9]+]]: tensor<2x4x40x8xf32>, %[[L:[a-z0-9]+]]: tensor<2x4x40xf32>, %[[DO:[a-z0-9]+]]: tensor<2x4x40x8xf32>, %[[N:[a-z0-9]+]]: tensor<2xi32>, %[[M:[a-z0-9]+]]: tensor<1x4x40x24xi1>, %[[A:[a-z0-9]+]]: tensor<4xf32>
// CHECK: scf.forall (%[[B:.*]], %[[KH:.*]]) in (2, 2) shared_outs(%[[DQO:.*]] = %{{.*}}, %[[DKO:.*]] = %{{.*}}, %[[DVO:.*]] = %{{.*}})
// CHECK-DAG: %[[H:.*]] = affine.apply #[[$H2]](%[[KH]])
// CHECK-DAG: %[[QS:.*]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], 0, 0] [1, 2, 40, 16] [1, 1, 1, 1]
// CHECK-DAG: %[[KS:.*]] = tensor.extract_slice %[[K]][%[[B]], %[[KH]], 0, 0] [1, 1, 24, 16] [1, 1, 1, 1]
// CHECK-DAG: %[[VS:.*]] = tensor.extract_slice %[[V]][%[[B]], %[[KH]], 0, 0] [1, 1, 24, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[OS:.*]] = tensor.extract_slice %[[O]][%[[B]], %[[H]], 0, 0] [1, 2, 40, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[LS:.*]] = tensor.extract_slice %[[L]][%[[B]], %[[H]], 0] [1, 2, 40] [1, 1, 1]
// CHECK-DAG: %[[DOS:.*]] = tensor.extract_slice %[[DO]][%[[B]], %[[H]], 0, 0] [1, 2, 40, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[NS:.*]] = tensor.extract_slice %[[N]][%[[B]]] [1] [1]
// CHECK-DAG: %[[MS:.*]] = tensor.extract_slice %[[M]][0, %[[H]], 0, 0] [1, 2, 40, 24] [1, 1, 1, 1]
// CHECK-DAG: %[[AS:.*]] = tensor.extract_slice %[[A]][%[[H]]] [2] [1]
// CHECK-DAG: %[[DQS:.*]] = tensor.extract_slice %[[DQO]][%[[B]], %[[H]], 0, 0] [1, 2, 40, 16] [1, 1, 1, 1]
// CHECK-DAG: %[[DKS:.*]] = tensor.extract_slice %[[DKO]][%[[B]], %[[KH]], 0, 0] [1, 1, 24, 16] [1, 1, 1, 1]
// CHECK-DAG: %[[DVS:.*]] = tensor.extract_slice %[[DVO]][%[[B]], %[[KH]], 0, 0] [1, 1, 24, 8] [1, 1, 1, 1]
// CHECK: %[[R0:[a-z_0-9]+]], %[[R1:[a-z_0-9]+]], %[[R2:[a-z_0-9]+]] = fa.attention_backward ins(%[[QS]], %[[KS]], %[[VS]] : tensor<1x2x40x16xf32>, tensor<1x1x24x16xf32>, tensor<1x1x24x8xf32>) forward(%[[OS]], %[[LS]] : tensor<1x2x40x8xf32>, tensor<1x2x40xf32>) grad_output(%[[DOS]] : tensor<1x2x40x8xf32>) kv_lens(%[[NS]] : tensor<1xi32>) mask(%[[MS]] : tensor<1x2x40x24xi1>) alibi(%[[AS]] : tensor<2xf32>) outs(%[[DQS]], %[[DKS]], %[[DVS]] : tensor<1x2x40x16xf32>, tensor<1x1x24x16xf32>, tensor<1x1x24x8xf32>) causal(bottom_right) softcap(3.000000e+01)
// CHECK: scf.forall.in_parallel
// CHECK-DAG: tensor.parallel_insert_slice %[[R0]] into %[[DQO]][%[[B]], %[[H]], 0, 0] [1, 2, 40, 16]
// CHECK-DAG: tensor.parallel_insert_slice %[[R1]] into %[[DKO]][%[[B]], %[[KH]], 0, 0] [1, 1, 24, 16]
// CHECK-DAG: tensor.parallel_insert_slice %[[R2]] into %[[DVO]][%[[B]], %[[KH]], 0, 0] [1, 1, 24, 8]
func.func @tile_backward(%q: tensor<2x4x40x16xf32>, %k: tensor<2x2x24x16xf32>,
                         %v: tensor<2x2x24x8xf32>, %o: tensor<2x4x40x8xf32>,
                         %lse: tensor<2x4x40xf32>, %do: tensor<2x4x40x8xf32>,
                         %lens: tensor<2xi32>, %mask: tensor<1x4x40x24xi1>,
                         %slopes: tensor<4xf32>)
    -> (tensor<2x4x40x16xf32>, tensor<2x2x24x16xf32>, tensor<2x2x24x8xf32>) {
  %dq0 = tensor.empty() : tensor<2x4x40x16xf32>
  %dk0 = tensor.empty() : tensor<2x2x24x16xf32>
  %dv0 = tensor.empty() : tensor<2x2x24x8xf32>
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<2x4x40x16xf32>, tensor<2x2x24x16xf32>, tensor<2x2x24x8xf32>)
      forward(%o, %lse : tensor<2x4x40x8xf32>, tensor<2x4x40xf32>)
      grad_output(%do : tensor<2x4x40x8xf32>)
      kv_lens(%lens : tensor<2xi32>) mask(%mask : tensor<1x4x40x24xi1>) alibi(%slopes : tensor<4xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<2x4x40x16xf32>, tensor<2x2x24x16xf32>, tensor<2x2x24x8xf32>)
      causal(bottom_right) softcap(30.0)
      -> tensor<2x4x40x16xf32>, tensor<2x2x24x16xf32>, tensor<2x2x24x8xf32>
  return %r#0, %r#1, %r#2 : tensor<2x4x40x16xf32>, tensor<2x2x24x16xf32>, tensor<2x2x24x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention_backward"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
