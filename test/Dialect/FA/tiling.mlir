// RUN: fa-opt %s -split-input-file -transform-interpreter -canonicalize -cse | FileCheck %s

// Tiling (B, Hq, Nq) of a non-causal fa.attention: Q, O, LSE, the mask and
// the key lengths are sliced; K/V keep every key. Nq = 40 with tiles of 16
// leaves a tail tile of 8.

// CHECK-DAG: #[[$H2:.*]] = affine_map<(d0) -> (d0 * 2)>
// CHECK-DAG: #[[$Q16:.*]] = affine_map<(d0) -> (d0 * 16)>
// CHECK-DAG: #[[$TAIL:.*]] = affine_map<(d0) -> (d0 * -16 + 40, 16)>
// CHECK-LABEL: func.func @tile_attention
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x4x40x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x4x24x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x4x24x8xf32>, %[[L:[a-z0-9]+]]: tensor<2xi32>, %[[M:[a-z0-9]+]]: tensor<1x4x40x24xi1>
// CHECK: scf.forall (%[[B:.*]], %[[IH:.*]], %[[IQ:.*]]) in (2, 2, 3) shared_outs(%[[OO:.*]] = %{{.*}}, %[[LO:.*]] = %{{.*}})
// CHECK-DAG: %[[H:.*]] = affine.apply #[[$H2]](%[[IH]])
// CHECK-DAG: %[[Q0:.*]] = affine.apply #[[$Q16]](%[[IQ]])
// CHECK-DAG: %[[TQ:.*]] = affine.min #[[$TAIL]](%[[IQ]])
// CHECK-DAG: %[[QS:.*]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[Q0]], 0] [1, 2, %[[TQ]], 16] [1, 1, 1, 1]
// CHECK-DAG: %[[KS:.*]] = tensor.extract_slice %[[K]][%[[B]], %[[H]], 0, 0] [1, 2, 24, 16] [1, 1, 1, 1]
// CHECK-DAG: %[[VS:.*]] = tensor.extract_slice %[[V]][%[[B]], %[[H]], 0, 0] [1, 2, 24, 8] [1, 1, 1, 1]
// CHECK-DAG: %[[MS:.*]] = tensor.extract_slice %[[M]][0, %[[H]], %[[Q0]], 0] [1, 2, %[[TQ]], 24] [1, 1, 1, 1]
// CHECK-DAG: %[[LS:.*]] = tensor.extract_slice %[[L]][%[[B]]] [1] [1]
// CHECK-DAG: %[[OS:.*]] = tensor.extract_slice %[[OO]][%[[B]], %[[H]], %[[Q0]], 0] [1, 2, %[[TQ]], 8] [1, 1, 1, 1]
// CHECK-DAG: %[[LSES:.*]] = tensor.extract_slice %[[LO]][%[[B]], %[[H]], %[[Q0]]] [1, 2, %[[TQ]]] [1, 1, 1]
// CHECK: %[[R:.*]], %[[RL:.*]] = fa.attention ins(%[[QS]], %[[KS]], %[[VS]] : tensor<1x2x?x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x8xf32>) kv_lens(%[[LS]] : tensor<1xi32>) mask(%[[MS]] : tensor<1x2x?x24xi1>) outs(%[[OS]] : tensor<1x2x?x8xf32>, %[[LSES]] : tensor<1x2x?xf32>) scale(5.000000e-01)
// CHECK: scf.forall.in_parallel
// CHECK-DAG: tensor.parallel_insert_slice %[[R]] into %[[OO]][%[[B]], %[[H]], %[[Q0]], 0] [1, 2, %[[TQ]], 8]
// CHECK-DAG: tensor.parallel_insert_slice %[[RL]] into %[[LO]][%[[B]], %[[H]], %[[Q0]]] [1, 2, %[[TQ]]]
func.func @tile_attention(%q: tensor<2x4x40x16xf32>, %k: tensor<2x4x24x16xf32>,
                          %v: tensor<2x4x24x8xf32>, %lens: tensor<2xi32>,
                          %mask: tensor<1x4x40x24xi1>)
    -> (tensor<2x4x40x8xf32>, tensor<2x4x40xf32>) {
  %o0 = tensor.empty() : tensor<2x4x40x8xf32>
  %l0 = tensor.empty() : tensor<2x4x40xf32>
  %o, %l = fa.attention ins(%q, %k, %v : tensor<2x4x40x16xf32>, tensor<2x4x24x16xf32>, tensor<2x4x24x8xf32>)
      kv_lens(%lens : tensor<2xi32>) mask(%mask : tensor<1x4x40x24xi1>)
      outs(%o0 : tensor<2x4x40x8xf32>, %l0 : tensor<2x4x40xf32>) scale(0.5)
      -> tensor<2x4x40x8xf32>, tensor<2x4x40xf32>
  return %o, %l : tensor<2x4x40x8xf32>, tensor<2x4x40xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 2, 16] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// GQA (Hq = 8, Hkv = 2, group 4): a tile of 4 query heads reads one K/V
// head, h / 4; a tile of 2 query heads (a divisor of the group) also reads
// one, h floordiv 4.

// (After canonicalization (4h) floordiv 4 = h and (2h) floordiv 4 = h floordiv 2
// on the normalized loop index h.)
// CHECK-DAG: #[[$DIV2:.*]] = affine_map<(d0) -> (d0 floordiv 2)>
// CHECK-LABEL: func.func @tile_gqa_heads
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x8x16x16xf16>, %[[K:[a-z0-9]+]]: tensor<1x2x16x16xf16>
// CHECK: scf.forall (%[[H:.*]]) in (2)
// CHECK: tensor.extract_slice %[[Q]][0, %{{.*}}, 0, 0] [1, 4, 16, 16]
// CHECK: tensor.extract_slice %[[K]][0, %[[H]], 0, 0] [1, 1, 16, 16] [1, 1, 1, 1]
// CHECK: fa.attention ins({{.*}} : tensor<1x4x16x16xf16>, tensor<1x1x16x16xf16>, tensor<1x1x16x16xf16>)
// CHECK: scf.forall (%[[H2:.*]]) in (4)
// CHECK: %[[KH2:.*]] = affine.apply #[[$DIV2]](%[[H2]])
// CHECK: tensor.extract_slice %[[K]][0, %[[KH2]], 0, 0] [1, 1, 16, 16] [1, 1, 1, 1]
// CHECK: fa.attention ins({{.*}} : tensor<1x2x16x16xf16>, tensor<1x1x16x16xf16>, tensor<1x1x16x16xf16>)
func.func @tile_gqa_heads(%q: tensor<1x8x16x16xf16>, %k: tensor<1x2x16x16xf16>,
                          %v: tensor<1x2x16x16xf16>) -> (tensor<1x8x16x16xf16>, tensor<1x8x16x16xf16>) {
  %o0 = tensor.empty() : tensor<1x8x16x16xf16>
  %o = fa.attention ins(%q, %k, %v : tensor<1x8x16x16xf16>, tensor<1x2x16x16xf16>, tensor<1x2x16x16xf16>)
      outs(%o0 : tensor<1x8x16x16xf16>) {tile4} -> tensor<1x8x16x16xf16>
  %o2 = fa.attention ins(%q, %k, %v : tensor<1x8x16x16xf16>, tensor<1x2x16x16xf16>, tensor<1x2x16x16xf16>)
      outs(%o0 : tensor<1x8x16x16xf16>) {tile2} -> tensor<1x8x16x16xf16>
  return %o, %o2 : tensor<1x8x16x16xf16>, tensor<1x8x16x16xf16>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["fa.attention"]} attributes {tile4} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [0, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %b = transform.structured.match ops{["fa.attention"]} attributes {tile2} in %root : (!transform.any_op) -> !transform.any_op
    %t2, %f2 = transform.structured.tile_using_forall %b tile_sizes [0, 2] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Causal bottom_right, Nq = 40 > Nk = 24, query tiles of 16: the tiled op
// stays bottom_right over the first max(0, q0 + tq + Nk - Nq) keys of K, V
// and the mask.

// Nk' = max(0, q0 + tq + 24 - 40) with q0 = 16 i and tq = min(40 - 16 i, 16).
// CHECK-DAG: #[[$KEYS:.*]] = affine_map<(d0, d1) -> (0, d0 + d1 * 16 - 16)>
// CHECK-LABEL: func.func @tile_bottom_right
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x2x40x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x24x16xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x24x16xf32>, %[[M:[a-z0-9]+]]: tensor<1x2x40x24xf32>
// CHECK: scf.forall (%[[I:.*]]) in (3)
// CHECK-DAG: %[[Q0:.*]] = affine.apply #{{.*}}(%[[I]])
// CHECK-DAG: %[[TQ:.*]] = affine.min #{{.*}}(%[[I]])
// CHECK: %[[NK:.*]] = affine.max #[[$KEYS]](%[[TQ]], %[[I]])
// CHECK-DAG: tensor.extract_slice %[[K]][0, 0, 0, 0] [1, 2, %[[NK]], 16]
// CHECK-DAG: tensor.extract_slice %[[V]][0, 0, 0, 0] [1, 2, %[[NK]], 16]
// CHECK-DAG: tensor.extract_slice %[[M]][0, 0, %[[Q0]], 0] [1, 2, %[[TQ]], %[[NK]]]
// CHECK: fa.attention ins({{.*}} : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) mask({{.*}} : tensor<1x2x?x?xf32>) outs({{.*}}) causal(bottom_right) ->
func.func @tile_bottom_right(%q: tensor<1x2x40x16xf32>, %k: tensor<1x2x24x16xf32>,
                             %v: tensor<1x2x24x16xf32>, %mask: tensor<1x2x40x24xf32>) -> tensor<1x2x40x16xf32> {
  %o0 = tensor.empty() : tensor<1x2x40x16xf32>
  %o = fa.attention ins(%q, %k, %v : tensor<1x2x40x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>)
      mask(%mask : tensor<1x2x40x24xf32>) outs(%o0 : tensor<1x2x40x16xf32>) causal(bottom_right)
      -> tensor<1x2x40x16xf32>
  return %o : tensor<1x2x40x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [0, 0, 16] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Causal top_left with Nq <= Nk known: bottom_right over the first q0 + tq
// keys, no padding.

// CHECK-DAG: #[[$END:.*]] = affine_map<(d0) -> (d0 * 8 + 8)>
// CHECK-LABEL: func.func @tile_top_left_short_queries
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x1x32x16xf32>, %[[K:[a-z0-9]+]]: tensor<1x1x48x16xf32>
// CHECK: scf.forall (%[[I:.*]]) in (4)
// CHECK: %[[NK:.*]] = affine.apply #[[$END]](%[[I]])
// CHECK: tensor.extract_slice %[[K]][0, 0, 0, 0] [1, 1, %[[NK]], 16]
// CHECK-NOT: tensor.pad
// CHECK: fa.attention {{.*}} causal(bottom_right)
func.func @tile_top_left_short_queries(%q: tensor<1x1x32x16xf32>, %k: tensor<1x1x48x16xf32>,
                                       %v: tensor<1x1x48x16xf32>) -> tensor<1x1x32x16xf32> {
  %o0 = tensor.empty() : tensor<1x1x32x16xf32>
  %o = fa.attention ins(%q, %k, %v : tensor<1x1x32x16xf32>, tensor<1x1x48x16xf32>, tensor<1x1x48x16xf32>)
      outs(%o0 : tensor<1x1x32x16xf32>) causal(top_left) -> tensor<1x1x32x16xf32>
  return %o : tensor<1x1x32x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [0, 0, 8] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Causal top_left with dynamic lengths: K and V are sliced to
// min(Nk, q0 + tq) keys and zero-padded to q0 + tq; kv_lens' = min(kv_lens,
// Nk) removes the padding.

// CHECK-DAG: #[[$KEPT:.*]] = affine_map<(d0, d1)[s0] -> (s0, d0 + d1 * 32)>
// CHECK-DAG: #[[$HIGH:.*]] = affine_map<(d0, d1, d2) -> (-d0 + d1 + d2 * 32)>
// CHECK-LABEL: func.func @tile_top_left_dynamic
// CHECK-SAME: %[[K:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[V:[a-z0-9]+]]: tensor<?x2x?x16xf32>, %[[L:[a-z0-9]+]]: tensor<?xi32>
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]], %[[I:.*]]) in
// CHECK: %[[TQ:.*]] = affine.min
// CHECK: %[[NK:.*]] = tensor.dim %[[K]]
// CHECK: %[[KEEP:.*]] = affine.min #[[$KEPT]](%[[TQ]], %[[I]])[%[[NK]]]
// CHECK-DAG: %[[KS:.*]] = tensor.extract_slice %[[K]][%[[B]], %[[H]], 0, 0] [1, 1, %[[KEEP]], 16]
// CHECK-DAG: %[[VS:.*]] = tensor.extract_slice %[[V]][%[[B]], %[[H]], 0, 0] [1, 1, %[[KEEP]], 16]
// CHECK-DAG: %[[LS:.*]] = tensor.extract_slice %[[L]][%[[B]]] [1] [1]
// CHECK: %[[PAD:.*]] = affine.apply #[[$HIGH]](%[[KEEP]], %[[TQ]], %[[I]])
// CHECK: %[[KP:.*]] = tensor.pad %[[KS]] low[0, 0, 0, 0] high[0, 0, %[[PAD]], 0]
// CHECK: %[[VP:.*]] = tensor.pad %[[VS]] low[0, 0, 0, 0] high[0, 0, %[[PAD]], 0]
// CHECK: %[[NK32:.*]] = arith.index_cast %[[NK]] : index to i32
// CHECK: %[[LENS:.*]] = linalg.generic {{.*}} ins(%[[LS]] : tensor<1xi32>)
// CHECK: arith.minsi %{{.*}}, %[[NK32]] : i32
// CHECK: fa.attention ins(%{{.*}}, %[[KP]], %[[VP]] : {{.*}}) kv_lens(%[[LENS]] : tensor<1xi32>) outs({{.*}}) causal(bottom_right)
func.func @tile_top_left_dynamic(%q: tensor<?x2x?x16xf32>, %k: tensor<?x2x?x16xf32>,
                                 %v: tensor<?x2x?x16xf32>, %lens: tensor<?xi32>,
                                 %o0: tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32> {
  %o = fa.attention ins(%q, %k, %v : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>)
      kv_lens(%lens : tensor<?xi32>) outs(%o0 : tensor<?x2x?x16xf32>) causal(top_left) -> tensor<?x2x?x16xf32>
  return %o : tensor<?x2x?x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1, 32] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Causal attention tiled over B and H only keeps its causality and keys.

// CHECK-LABEL: func.func @tile_causal_heads_only
// CHECK: scf.forall
// CHECK-NOT: affine.max
// CHECK: fa.attention ins({{.*}} : tensor<1x1x40x16xf32>, tensor<1x1x24x16xf32>, tensor<1x1x24x16xf32>) {{.*}} causal(top_left)
func.func @tile_causal_heads_only(%q: tensor<2x2x40x16xf32>, %k: tensor<2x2x24x16xf32>,
                                  %v: tensor<2x2x24x16xf32>) -> tensor<2x2x40x16xf32> {
  %o0 = tensor.empty() : tensor<2x2x40x16xf32>
  %o = fa.attention ins(%q, %k, %v : tensor<2x2x40x16xf32>, tensor<2x2x24x16xf32>, tensor<2x2x24x16xf32>)
      outs(%o0 : tensor<2x2x40x16xf32>) causal(top_left) -> tensor<2x2x40x16xf32>
  return %o : tensor<2x2x40x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// fa.softmax tiled along its parallel dims (rows of 3 out of 10, with a tail
// of 1); the normalized dim 2 stays whole.

// CHECK-LABEL: func.func @tile_softmax
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x10x100xf32>
// CHECK: scf.forall (%[[II:.*]], %[[JJ:.*]]) in (2, 4) shared_outs(%[[OUT:.*]] = %{{.*}})
// CHECK-DAG: %[[I:.*]] = affine.apply #{{.*}}(%[[II]])
// CHECK-DAG: %[[J:.*]] = affine.apply #{{.*}}(%[[JJ]])
// CHECK-DAG: %[[TJ:.*]] = affine.min #{{.*}}(%[[JJ]])
// CHECK: %[[XS:.*]] = tensor.extract_slice %[[X]][%[[I]], %[[J]], 0] [2, %[[TJ]], 100] [1, 1, 1]
// CHECK: %[[OS:.*]] = tensor.extract_slice %[[OUT]][%[[I]], %[[J]], 0] [2, %[[TJ]], 100] [1, 1, 1]
// CHECK: %[[R:.*]] = fa.softmax ins(%[[XS]] : tensor<2x?x100xf32>) outs(%[[OS]] : tensor<2x?x100xf32>) dimension(2)
// CHECK: tensor.parallel_insert_slice %[[R]] into %[[OUT]][%[[I]], %[[J]], 0] [2, %[[TJ]], 100]
func.func @tile_softmax(%x: tensor<4x10x100xf32>) -> tensor<4x10x100xf32> {
  %e = tensor.empty() : tensor<4x10x100xf32>
  %y = fa.softmax ins(%x : tensor<4x10x100xf32>) outs(%e : tensor<4x10x100xf32>) dimension(2) -> tensor<4x10x100xf32>
  return %y : tensor<4x10x100xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.softmax"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [2, 3] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Tiling query rows of a non-causal op with position-dependent modifiers
// (a window, ALiBi): the tiled op keeps every key and re-bases its rows'
// positions with q_offset(q0); the slopes are sliced with the heads, the
// query segment ids with the rows, the key segment ids stay whole.
// CHECK-LABEL: func.func @tile_window_none
//  CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2xf32>, %[[QI:[a-z0-9]+]]: tensor<1x40xi32>, %[[KI:[a-z0-9]+]]: tensor<1x24xi32>
//       CHECK: scf.forall (%[[H:.*]], %[[IQ:.*]]) in (2, 3)
//       CHECK:   %[[Q0:.*]] = affine.apply #{{.*}}(%[[IQ]])
//       CHECK:   %[[TQ:.*]] = affine.min #{{.*}}(%[[IQ]])
//   CHECK-DAG:   %[[AS:.*]] = tensor.extract_slice %[[A]][%[[H]]] [1] [1]
//   CHECK-DAG:   %[[QIS:.*]] = tensor.extract_slice %[[QI]][0, %[[Q0]]] [1, %[[TQ]]] [1, 1]
//       CHECK:   fa.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x1x?x16xf32>, tensor<1x1x24x16xf32>, tensor<1x1x24x8xf32>) alibi(%[[AS]] : tensor<1xf32>) segments(%[[QIS]], %[[KI]] : tensor<1x?xi32>, tensor<1x24xi32>) q_offset(%[[Q0]]) outs({{.*}}) window(4, 2) softcap(3.000000e+01)
func.func @tile_window_none(%q: tensor<1x2x40x16xf32>, %k: tensor<1x2x24x16xf32>,
                            %v: tensor<1x2x24x8xf32>, %a: tensor<2xf32>,
                            %qs: tensor<1x40xi32>, %ks: tensor<1x24xi32>)
    -> tensor<1x2x40x8xf32> {
  %o0 = tensor.empty() : tensor<1x2x40x8xf32>
  %o = fa.attention ins(%q, %k, %v : tensor<1x2x40x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x8xf32>)
      alibi(%a : tensor<2xf32>) segments(%qs, %ks : tensor<1x40xi32>, tensor<1x24xi32>)
      outs(%o0 : tensor<1x2x40x8xf32>) window(4, 2) softcap(3.0e+01)
      -> tensor<1x2x40x8xf32>
  return %o : tensor<1x2x40x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1, 16] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Tiling an op with score_mod / mask_mod: mod_operands stay whole; the
// tiled op's regions add the tile origin to their b, h and q indices (the
// batch tile covers B = 1, so b needs none), so they read what the untiled
// op reads. Keys are not tiled.
// CHECK-LABEL: func.func @tile_regions
//  CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<2x19xf32>
//       CHECK: scf.forall (%[[H:.*]], %[[IQ:.*]]) in (2, 2)
//       CHECK:   %[[Q0:.*]] = affine.apply #{{.*}}(%[[IQ]])
//       CHECK:   fa.attention ins({{.*}}) mod_operands(%[[T]] : tensor<2x19xf32>) outs({{.*}}) score_mod {
//  CHECK-NEXT:   ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %[[RH:.*]]: index, %[[RQ:.*]]: index, %[[RK:.*]]: index, %[[RT:.*]]: tensor<2x19xf32>):
//   CHECK-DAG:     %[[GH:.*]] = arith.addi %[[RH]], %[[H]] : index
//   CHECK-DAG:     %[[GQ:.*]] = arith.addi %[[RQ]], %[[Q0]] : index
//       CHECK:     %[[D:.*]] = arith.subi %[[RK]], %[[GQ]] : index
//       CHECK:     tensor.extract %[[RT]][%[[GH]], %{{.*}}] : tensor<2x19xf32>
//       CHECK:   } mask_mod {
//       CHECK:     arith.addi %{{.*}}, %[[Q0]] : index
//       CHECK:     fa.yield %{{.*}} : i1
func.func @tile_regions(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x12x16xf32>, %v: tensor<1x2x12x16xf32>, %t: tensor<2x19xf32>) -> tensor<1x2x8x16xf32> {
  %o = tensor.empty() : tensor<1x2x8x16xf32>
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x12x16xf32>, tensor<1x2x12x16xf32>) mod_operands(%t : tensor<2x19xf32>) outs(%o : tensor<1x2x8x16xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %tb: tensor<2x19xf32>):
    %c7 = arith.constant 7 : index
    %d = arith.subi %ki, %qi : index
    %i = arith.addi %d, %c7 : index
    %x = tensor.extract %tb[%h, %i] : tensor<2x19xf32>
    %y = arith.addf %s, %x : f32
    fa.yield %y : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %tb: tensor<2x19xf32>):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x2x8x16xf32>
  return %r : tensor<1x2x8x16xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %op tile_sizes [1, 1, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
