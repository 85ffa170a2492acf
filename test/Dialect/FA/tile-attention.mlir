// RUN: fa-opt %s -split-input-file -fa-tile-attention="block-q=32 block-kv=16" | FileCheck %s

// Bottom-right causal attention with LSE: the loop nest, the (m, l, acc)
// state, the mask as -inf before the max, the rescale by exp(m_old - m_new),
// the skipped causal tiles and the fully-masked guard.
// CHECK-LABEL: func.func @causal_bottom_right
//  CHECK-SAME:   (%[[Q:[a-z0-9]+]]: tensor<?x4x?x40xf32>, %[[K:[a-z0-9]+]]: tensor<?x2x?x40xf32>, %[[V:[a-z0-9]+]]: tensor<?x2x?x40xf32>, %[[O:[a-z0-9]+]]: tensor<?x4x?x40xf32>, %[[L:[a-z0-9]+]]: tensor<?x4x?xf32>)
//   CHECK-DAG:   %[[B:.*]] = tensor.dim %[[Q]], %{{.*}} : tensor<?x4x?x40xf32>
//   CHECK-DAG:   %[[NQ:.*]] = tensor.dim %[[Q]], %{{.*}} : tensor<?x4x?x40xf32>
//   CHECK-DAG:   %[[NK:.*]] = tensor.dim %[[K]], %{{.*}} : tensor<?x2x?x40xf32>
//       CHECK:   %[[NQT:.*]] = arith.ceildivui %[[NQ]], %c32
// Bottom-right alignment: diagonal offset Nk - Nq.
//       CHECK:   %[[OFF:.*]] = arith.subi %[[NK]], %[[NQ]]
// One parallel iteration per (batch, query head, query tile).
//       CHECK:   scf.forall (%[[BI:.*]], %[[HI:.*]], %[[QT:.*]]) in (%[[B]], 4, %[[NQT]]) shared_outs(%[[OS:.*]] = %[[O]], %[[LS:.*]] = %[[L]])
// GQA: query head h reads key/value head h / 2.
//       CHECK:     %[[HKV:.*]] = arith.divui %[[HI]], %c2
//       CHECK:     %[[Q0:.*]] = arith.muli %[[QT]], %c32
//       CHECK:     %[[ROWS:.*]] = arith.minsi %c32, %{{.*}}
//       CHECK:     %[[QTILE:.*]] = tensor.extract_slice %[[Q]][%[[BI]], %[[HI]], %[[Q0]], 0] [1, 1, %[[ROWS]], 40]
// m = -inf, l = 0, acc = 0.
//       CHECK:     %[[M0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?xf32>)
//       CHECK:     %[[L0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?xf32>)
//       CHECK:     %[[A0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x40xf32>)
// Causally excluded key tiles are skipped by the bound: keys end at
// min(max(q0 + rows + Nk - Nq, 0), Nk).
//       CHECK:     %[[E0:.*]] = arith.addi %[[Q0]], %[[ROWS]]
//       CHECK:     %[[E1:.*]] = arith.addi %[[E0]], %[[OFF]]
//       CHECK:     %[[E2:.*]] = arith.maxsi %[[E1]], %{{.*}}
//       CHECK:     %[[KEND:.*]] = arith.minsi %[[E2]], %[[NK]]
//       CHECK:     %[[NKT:.*]] = arith.ceildivui %[[KEND]], %c16
//       CHECK:     %[[LOOP:.*]]:3 = scf.for %[[J:.*]] = %{{.*}} to %[[NKT]] step %{{.*}} iter_args(%[[M:.*]] = %[[M0]], %[[LL:.*]] = %[[L0]], %[[ACC:.*]] = %[[A0]]) -> (tensor<?xf32>, tensor<?xf32>, tensor<?x40xf32>)
//       CHECK:       %[[K0:.*]] = arith.muli %[[J]], %c16
//       CHECK:       %[[KTILE:.*]] = tensor.extract_slice %[[K]][%[[BI]], %[[HKV]], %[[K0]], 0]
//       CHECK:       %[[VTILE:.*]] = tensor.extract_slice %[[V]][%[[BI]], %[[HKV]], %[[K0]], 0]
// S = Q K^T.
//       CHECK:       %[[S:.*]] = linalg.generic {{.*}} ins(%[[QTILE]], %[[KTILE]] : {{.*}}) outs(%{{.*}} : tensor<?x?xf32>)
//       CHECK:         arith.mulf
//       CHECK:         arith.addf
// Scale (1/sqrt(40)), then the causal mask as -inf, before the max.
//       CHECK:       %[[SM:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<?x?xf32>)
//       CHECK:         arith.mulf %{{.*}}, %{{.*}} : f32
//       CHECK:         arith.cmpi sle
//       CHECK:         arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
//       CHECK:       %[[TMAX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[SM]] : tensor<?x?xf32>)
//       CHECK:         arith.maximumf
// m_new = max(m, rowmax); alpha = exp(m_old - m_new) with m_new = -inf
// replaced by 0.
//       CHECK:       %[[MA:.*]]:2 = linalg.generic {{.*}} ins(%[[M]], %[[TMAX]] : {{.*}}) outs(%[[M]], %{{.*}} : {{.*}})
//       CHECK:       ^bb0(%[[MOLD:.*]]: f32, %[[ROWMAX:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32):
//       CHECK:         %[[MNEW:.*]] = arith.maximumf %[[MOLD]], %[[ROWMAX]]
//       CHECK:         %[[ISINF:.*]] = arith.cmpf oeq, %[[MNEW]], %{{.*}}
//       CHECK:         %[[MUSE:.*]] = arith.select %[[ISINF]], %{{.*}}, %[[MNEW]]
//       CHECK:         %[[D:.*]] = arith.subf %[[MOLD]], %[[MUSE]]
//       CHECK:         %[[ALPHA:.*]] = math.exp %[[D]]
//       CHECK:         linalg.yield %[[MNEW]], %[[ALPHA]]
// P = exp(S - m_new).
//       CHECK:       %[[P:.*]] = linalg.generic {{.*}} ins(%[[SM]], %[[MA]]#0 : {{.*}})
//       CHECK:         math.exp
// l = alpha * l + rowsum(P).
//       CHECK:       %[[LS1:.*]] = linalg.generic {{.*}} ins(%[[MA]]#1 : tensor<?xf32>) outs(%[[LL]] : tensor<?xf32>)
//       CHECK:         arith.mulf
//       CHECK:       %[[LNEW:.*]] = linalg.generic {{.*}} ins(%[[P]] : tensor<?x?xf32>) outs(%[[LS1]] : tensor<?xf32>)
//       CHECK:         arith.addf
// acc = alpha * acc + P V; masked keys (p == 0) cannot leak NaN from V.
//       CHECK:       %[[AS:.*]] = linalg.generic {{.*}} ins(%[[MA]]#1 : tensor<?xf32>) outs(%[[ACC]] : tensor<?x40xf32>)
//       CHECK:         arith.mulf
//       CHECK:       %[[ANEW:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[VTILE]] : {{.*}}) outs(%[[AS]] : tensor<?x40xf32>)
//       CHECK:         arith.cmpf oeq
//       CHECK:         arith.select
//       CHECK:       scf.yield %[[MA]]#0, %[[LNEW]], %[[ANEW]]
// O = acc / l, or 0 where l == 0; LSE = m + log(l), or -inf where l == 0.
//       CHECK:     %[[OT:.*]] = linalg.generic {{.*}} ins(%[[LOOP]]#2, %[[LOOP]]#1 : {{.*}})
//       CHECK:       %[[EMPTY:.*]] = arith.cmpf oeq
//       CHECK:       %[[DIV:.*]] = arith.divf
//       CHECK:       arith.select %[[EMPTY]], %{{.*}}, %[[DIV]]
//       CHECK:     %[[LT:.*]] = linalg.generic {{.*}} ins(%[[LOOP]]#0, %[[LOOP]]#1 : {{.*}})
//       CHECK:       math.log
//       CHECK:       arith.select %{{.*}}, %cst{{.*}}, %{{.*}} : f32
//       CHECK:     scf.forall.in_parallel
//       CHECK:       tensor.parallel_insert_slice %[[OT]] into %[[OS]][%[[BI]], %[[HI]], %[[Q0]], 0] [1, 1, %[[ROWS]], 40]
//       CHECK:       tensor.parallel_insert_slice %[[LT]] into %[[LS]][%[[BI]], %[[HI]], %[[Q0]]] [1, 1, %[[ROWS]]]
func.func @causal_bottom_right(%q: tensor<?x4x?x40xf32>, %k: tensor<?x2x?x40xf32>, %v: tensor<?x2x?x40xf32>,
                               %o: tensor<?x4x?x40xf32>, %l: tensor<?x4x?xf32>) -> (tensor<?x4x?x40xf32>, tensor<?x4x?xf32>) {
  %r:2 = fa.attention ins(%q, %k, %v : tensor<?x4x?x40xf32>, tensor<?x2x?x40xf32>, tensor<?x2x?x40xf32>)
           outs(%o : tensor<?x4x?x40xf32>, %l : tensor<?x4x?xf32>) causal(bottom_right)
           -> tensor<?x4x?x40xf32>, tensor<?x4x?xf32>
  return %r#0, %r#1 : tensor<?x4x?x40xf32>, tensor<?x4x?xf32>
}

// -----

// Top-left alignment: no Nk - Nq offset; the key bound is q0 + rows.
// CHECK-LABEL: func.func @causal_top_left
//   CHECK-NOT:   arith.subi %{{.*}}dim
//       CHECK:   scf.forall
//       CHECK:     %[[Q0:.*]] = arith.muli
//       CHECK:     %[[ROWS:.*]] = arith.minsi %c32
//       CHECK:     %[[E0:.*]] = arith.addi %[[Q0]], %[[ROWS]]
//       CHECK:     %[[E1:.*]] = arith.addi %[[E0]], %c0
//       CHECK:     arith.maxsi %[[E1]]
//       CHECK:     scf.for
func.func @causal_top_left(%q: tensor<2x1x64x16xf32>, %o: tensor<2x1x64x16xf32>) -> tensor<2x1x64x16xf32> {
  %r = fa.attention ins(%q, %q, %q : tensor<2x1x64x16xf32>, tensor<2x1x64x16xf32>, tensor<2x1x64x16xf32>)
         outs(%o : tensor<2x1x64x16xf32>) causal(top_left) -> tensor<2x1x64x16xf32>
  return %r : tensor<2x1x64x16xf32>
}

// -----

// Key lengths bound the KV loop (clamped to [0, Nk]); a boolean mask is
// applied as -inf before the max; a broadcast mask reads batch/head 0.
// CHECK-LABEL: func.func @kv_lens_and_bool_mask
//  CHECK-SAME:   %[[LENS:[a-z0-9]+]]: tensor<?xi32>, %[[MASK:[a-z0-9]+]]: tensor<1x1x?x?xi1>
//       CHECK:   scf.forall (%[[BI:.*]], %[[HI:.*]], %{{.*}}) in
//       CHECK:     %[[LEN:.*]] = tensor.extract %[[LENS]][%[[BI]]] : tensor<?xi32>
//       CHECK:     %[[LENI:.*]] = arith.index_cast %[[LEN]] : i32 to index
//       CHECK:     %[[LPOS:.*]] = arith.maxsi %[[LENI]], %{{.*}}
//       CHECK:     %[[KEND:.*]] = arith.minsi %[[LPOS]], %{{.*}}
//       CHECK:     %[[NKT:.*]] = arith.ceildivui %[[KEND]], %c16
//       CHECK:     scf.for %{{.*}} = %{{.*}} to %[[NKT]]
//       CHECK:       %[[MT:.*]] = tensor.extract_slice %[[MASK]][0, 0, %{{.*}}, %{{.*}}] [1, 1, %{{.*}}, %{{.*}}] [1, 1, 1, 1] : tensor<1x1x?x?xi1> to tensor<?x?xi1>
//       CHECK:       linalg.generic {{.*}} ins(%{{.*}}, %[[MT]] : tensor<?x?xf32>, tensor<?x?xi1>)
//       CHECK:       ^bb0(%{{.*}}: f32, %[[KEEP:.*]]: i1, %{{.*}}: f32):
//       CHECK:         %[[X:.*]] = arith.mulf
//       CHECK:         arith.select %[[KEEP]], %[[X]], %{{.*}} : f32
//       CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
//       CHECK:         arith.maximumf
func.func @kv_lens_and_bool_mask(%q: tensor<?x2x?x8xf32>, %lens: tensor<?xi32>, %m: tensor<1x1x?x?xi1>,
                                 %o: tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32> {
  %r = fa.attention ins(%q, %q, %q : tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>)
         kv_lens(%lens : tensor<?xi32>) mask(%m : tensor<1x1x?x?xi1>) outs(%o : tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32>
  return %r : tensor<?x2x?x8xf32>
}

// -----

// An additive f16 mask is extended to f32 and added to the scaled score; f16
// inputs are extended in the contractions and the output is truncated. The
// explicit scale replaces 1/sqrt(D). Without masks or causality the whole
// key range is visited.
// CHECK-LABEL: func.func @additive_mask_f16
//  CHECK-SAME:   %[[MASK:[a-z0-9]+]]: tensor<?x3x?x?xf16>
//       CHECK:   scf.forall (%[[BI:.*]], %[[HI:.*]], %{{.*}}) in
//   CHECK-NOT:     arith.divui
//       CHECK:     %[[NKT:.*]] = arith.ceildivui %{{.*}}dim{{.*}}, %c16
//       CHECK:     scf.for
//       CHECK:       linalg.generic
//       CHECK:         arith.extf %{{.*}} : f16 to f32
//       CHECK:         arith.extf %{{.*}} : f16 to f32
//       CHECK:       tensor.extract_slice %[[MASK]][%[[BI]], %[[HI]], %{{.*}}, %{{.*}}]
//       CHECK:       linalg.generic
//       CHECK:         arith.constant 5.000000e-01 : f32
//       CHECK:         %[[X:.*]] = arith.mulf
//       CHECK:         %[[MV:.*]] = arith.extf %{{.*}} : f16 to f32
//       CHECK:         arith.addf %[[X]], %[[MV]]
//       CHECK:     linalg.generic
//       CHECK:       arith.truncf %{{.*}} : f32 to f16
func.func @additive_mask_f16(%q: tensor<?x3x?x16xf16>, %m: tensor<?x3x?x?xf16>, %o: tensor<?x3x?x16xf16>) -> tensor<?x3x?x16xf16> {
  %r = fa.attention ins(%q, %q, %q : tensor<?x3x?x16xf16>, tensor<?x3x?x16xf16>, tensor<?x3x?x16xf16>)
         mask(%m : tensor<?x3x?x?xf16>) outs(%o : tensor<?x3x?x16xf16>) scale(0.5) -> tensor<?x3x?x16xf16>
  return %r : tensor<?x3x?x16xf16>
}

// -----

// A sliding window (left = 128) with bottom-right causality: the key loop
// starts at the tile of key max(0, q0 + off - 128) and ends past the last
// row's diagonal; inside a tile the window's lower bound and causality
// remove keys as -inf before the max.
// CHECK-LABEL: func.func @window_left_causal
//       CHECK:   %[[OFF:.*]] = arith.subi %[[NK:.*]], %[[NQ:.*]] : index
//       CHECK:   scf.forall
//       CHECK:     %[[Q0:.*]] = arith.muli %{{.*}}, %c32
//       CHECK:     %[[POS:.*]] = arith.addi %[[Q0]], %[[OFF]] : index
//       CHECK:     %[[LO:.*]] = arith.subi %[[POS]], %c128 : index
//       CHECK:     %[[BEGIN:.*]] = arith.maxsi %{{.*}}, %[[LO]] : index
//       CHECK:     %[[FIRST:.*]] = arith.divui %[[BEGIN]], %c16 : index
//       CHECK:     scf.for %{{.*}} = %[[FIRST]] to %{{.*}} step
//       CHECK:       linalg.generic
//       CHECK:       linalg.generic
//       CHECK:         arith.cmpi sle
//       CHECK:         arith.subi %{{.*}}, %c128
//       CHECK:         arith.cmpi sge
//       CHECK:         arith.andi
//       CHECK:         arith.select
func.func @window_left_causal(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>, %o: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) outs(%o : tensor<1x2x?x16xf32>) causal(bottom_right) window(128, 0) -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----

// Softcap, ALiBi and segment ids: the slope of (b, h) is read once per
// query tile, the query segment ids are sliced with the rows and the key
// ids with each key tile; the score is capped (tanh), then the slope times
// |q + off - k| is subtracted, then unequal segments become -inf.
// CHECK-LABEL: func.func @softcap_alibi_segments
//       CHECK:   scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
//       CHECK:     %[[SLOPE:.*]] = tensor.extract %{{.*}}[%[[H]]] : tensor<2xf32>
//       CHECK:     tensor.extract_slice %{{.*}}[%[[B]], %{{.*}}] [1, %{{.*}}] [1, 1] : tensor<1x?xi32> to tensor<?xi32>
//       CHECK:     scf.for
//       CHECK:       tensor.extract_slice %{{.*}}[%[[B]], %{{.*}}] [1, %{{.*}}] [1, 1] : tensor<1x?xi32> to tensor<?xi32>
//       CHECK:       linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xf32>, tensor<?xi32>, tensor<?xi32>)
//       CHECK:         ^bb0(%[[S:.*]]: f32, %[[QS:.*]]: i32, %[[KS:.*]]: i32, %{{.*}}: f32):
//       CHECK:         %[[CAP:.*]] = arith.constant 3.000000e+01 : f32
//       CHECK:         %[[DIV:.*]] = arith.divf %{{.*}}, %[[CAP]] : f32
//       CHECK:         %[[TANH:.*]] = math.tanh %[[DIV]] : f32
//       CHECK:         %[[CAPPED:.*]] = arith.mulf %[[CAP]], %[[TANH]] : f32
//       CHECK:         arith.sitofp
//       CHECK:         %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %{{.*}} : f32
//       CHECK:         %[[X:.*]] = arith.subf %[[CAPPED]], %[[BIAS]] : f32
//       CHECK:         %[[SAME:.*]] = arith.cmpi eq, %[[QS]], %[[KS]] : i32
//       CHECK:         arith.select %[[SAME]], %[[X]], %{{.*}} : f32
func.func @softcap_alibi_segments(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>, %a: tensor<2xf32>, %qs: tensor<1x?xi32>, %ks: tensor<1x?xi32>, %o: tensor<1x2x?x16xf32>) -> tensor<1x2x?x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) alibi(%a : tensor<2xf32>) segments(%qs, %ks : tensor<1x?xi32>, tensor<1x?xi32>) outs(%o : tensor<1x2x?x16xf32>) softcap(3.0e+01) -> tensor<1x2x?x16xf32>
  return %r : tensor<1x2x?x16xf32>
}

// -----

// The regions are inlined in each key tile's scores, with the tile's
// global query and key indices (q0 + i, k0 + j), the batch and head of the
// forall, and the whole mod_operands.
// CHECK-LABEL: func.func @regions
//  CHECK-SAME:   %[[T:[a-z0-9]+]]: tensor<2x19xf32>, %[[P:[a-z0-9]+]]: tensor<1xi32>
//       CHECK:   scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
//       CHECK:     scf.for
//       CHECK:       linalg.generic
//       CHECK:         tensor.extract %[[T]][%[[H]], %{{.*}}] : tensor<2x19xf32>
//       CHECK:         tensor.extract %[[P]][%[[B]]] : tensor<1xi32>
//       CHECK:         arith.select
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
