// RUN: fa-opt %s -split-input-file --verify-roundtrip | FileCheck %s
// RUN: fa-opt %s -split-input-file | fa-opt -split-input-file | FileCheck %s
// RUN: fa-opt %s -split-input-file --mlir-print-op-generic | fa-opt -split-input-file | FileCheck %s

// Softmax along the last dimension with a dynamic extent.
// CHECK-LABEL: func.func @softmax_last_dim
//  CHECK-SAME:   (%[[X:.*]]: tensor<4x?xf32>, %[[Y:.*]]: tensor<4x?xf32>)
//       CHECK:   %[[R:.*]] = fa.softmax ins(%[[X]] : tensor<4x?xf32>) outs(%[[Y]] : tensor<4x?xf32>) dimension(1) -> tensor<4x?xf32>
//       CHECK:   return %[[R]]
func.func @softmax_last_dim(%x: tensor<4x?xf32>, %y: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %r = fa.softmax ins(%x : tensor<4x?xf32>) outs(%y : tensor<4x?xf32>) dimension(1) -> tensor<4x?xf32>
  return %r : tensor<4x?xf32>
}

// -----

// Softmax along a leading dimension of a 3-d bf16 tensor.
// CHECK-LABEL: func.func @softmax_bf16_dim0
//       CHECK:   fa.softmax ins(%{{.*}} : tensor<8x3x5xbf16>) outs(%{{.*}} : tensor<8x3x5xbf16>) dimension(0) -> tensor<8x3x5xbf16>
func.func @softmax_bf16_dim0(%x: tensor<8x3x5xbf16>) -> tensor<8x3x5xbf16> {
  %r = fa.softmax ins(%x : tensor<8x3x5xbf16>) outs(%x : tensor<8x3x5xbf16>) dimension(0) -> tensor<8x3x5xbf16>
  return %r : tensor<8x3x5xbf16>
}

// -----

// Plain attention: no mask, no causality, default scale; nothing optional is printed.
// CHECK-LABEL: func.func @attention_minimal
//  CHECK-SAME:   (%[[Q:.*]]: tensor<2x4x128x64xf32>, %[[K:.*]]: tensor<2x4x256x64xf32>, %[[V:.*]]: tensor<2x4x256x32xf32>, %[[O:.*]]: tensor<2x4x128x32xf32>)
//       CHECK:   %[[R:.*]] = fa.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x128x64xf32>, tensor<2x4x256x64xf32>, tensor<2x4x256x32xf32>) outs(%[[O]] : tensor<2x4x128x32xf32>) -> tensor<2x4x128x32xf32>
//   CHECK-NOT:   causal
//   CHECK-NOT:   scale
//       CHECK:   return %[[R]]
func.func @attention_minimal(%q: tensor<2x4x128x64xf32>, %k: tensor<2x4x256x64xf32>,
                             %v: tensor<2x4x256x32xf32>, %o: tensor<2x4x128x32xf32>) -> tensor<2x4x128x32xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x128x64xf32>, tensor<2x4x256x64xf32>, tensor<2x4x256x32xf32>)
         outs(%o : tensor<2x4x128x32xf32>) -> tensor<2x4x128x32xf32>
  return %r : tensor<2x4x128x32xf32>
}

// -----

// Everything at once: dynamic B/Nq/Nk, GQA (8 query heads over 2 kv heads),
// key lengths, a broadcast boolean mask, LSE, bottom-right causality, a scale.
// CHECK-LABEL: func.func @attention_full
//       CHECK:   %[[R:.*]], %[[L:.*]] = fa.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
//  CHECK-SAME:     kv_lens(%{{.*}} : tensor<?xi32>) mask(%{{.*}} : tensor<1x8x?x?xi1>)
//  CHECK-SAME:     outs(%{{.*}} : tensor<?x8x?x64xf16>, %{{.*}} : tensor<?x8x?xf32>)
//  CHECK-SAME:     causal(bottom_right) scale(1.250000e-01) -> tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
//       CHECK:   return %[[R]], %[[L]]
func.func @attention_full(%q: tensor<?x8x?x64xf16>, %k: tensor<?x2x?x64xf16>, %v: tensor<?x2x?x64xf16>,
                          %lens: tensor<?xi32>, %m: tensor<1x8x?x?xi1>,
                          %o: tensor<?x8x?x64xf16>, %l: tensor<?x8x?xf32>) -> (tensor<?x8x?x64xf16>, tensor<?x8x?xf32>) {
  %r:2 = fa.attention ins(%q, %k, %v : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>)
           kv_lens(%lens : tensor<?xi32>) mask(%m : tensor<1x8x?x?xi1>)
           outs(%o : tensor<?x8x?x64xf16>, %l : tensor<?x8x?xf32>)
           causal(bottom_right) scale(0.125) -> tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
  return %r#0, %r#1 : tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
}

// -----

// Additive bf16 mask broadcast over batch, top-left causality, MQA (one kv head).
// CHECK-LABEL: func.func @attention_additive_mask
//       CHECK:   fa.attention ins({{.*}}) mask(%{{.*}} : tensor<1x1x16x24xbf16>) outs(%{{.*}} : tensor<3x4x16x40xbf16>) causal(top_left) -> tensor<3x4x16x40xbf16>
func.func @attention_additive_mask(%q: tensor<3x4x16x40xbf16>, %k: tensor<3x1x24x40xbf16>, %v: tensor<3x1x24x40xbf16>,
                                   %m: tensor<1x1x16x24xbf16>, %o: tensor<3x4x16x40xbf16>) -> tensor<3x4x16x40xbf16> {
  %r = fa.attention ins(%q, %k, %v : tensor<3x4x16x40xbf16>, tensor<3x1x24x40xbf16>, tensor<3x1x24x40xbf16>)
         mask(%m : tensor<1x1x16x24xbf16>) outs(%o : tensor<3x4x16x40xbf16>) causal(top_left) -> tensor<3x4x16x40xbf16>
  return %r : tensor<3x4x16x40xbf16>
}

// -----

// An explicit `causal(none)` is the default and is not printed back.
// CHECK-LABEL: func.func @attention_causal_none
//       CHECK:   fa.attention
//   CHECK-NOT:   causal
//       CHECK:   return
func.func @attention_causal_none(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %r = fa.attention ins(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
         outs(%o : tensor<1x1x4x8xf32>) causal(none) -> tensor<1x1x4x8xf32>
  return %r : tensor<1x1x4x8xf32>
}

// -----

// Every score and mask modifier at once: ALiBi slopes [Hq], segment ids,
// q_offset, a window, softcap and chunk, with bottom-right causality.
// CHECK-LABEL: func.func @attention_modifiers
//       CHECK:   fa.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>) alibi(%{{.*}} : tensor<4xf32>) segments(%{{.*}}, %{{.*}} : tensor<2x?xi32>, tensor<2x?xi32>) q_offset(%{{.*}}) outs(%{{.*}} : tensor<2x4x?x16xf32>) causal(bottom_right) window(512, 0) softcap(5.000000e+01) chunk(64) -> tensor<2x4x?x16xf32>
func.func @attention_modifiers(%q: tensor<2x4x?x16xf32>, %k: tensor<2x2x?x16xf32>, %v: tensor<2x2x?x16xf32>, %a: tensor<4xf32>, %qs: tensor<2x?xi32>, %ks: tensor<2x?xi32>, %p: index, %o: tensor<2x4x?x16xf32>) -> tensor<2x4x?x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>) alibi(%a : tensor<4xf32>) segments(%qs, %ks : tensor<2x?xi32>, tensor<2x?xi32>) q_offset(%p) outs(%o : tensor<2x4x?x16xf32>) causal(bottom_right) window(512, 0) softcap(5.0e+01) chunk(64) -> tensor<2x4x?x16xf32>
  return %r : tensor<2x4x?x16xf32>
}

// -----

// A one-sided window (-1 = unbounded) and [B, Hq] slopes with a mask and
// key lengths.
// CHECK-LABEL: func.func @attention_window_alibi_bh
//       CHECK:   fa.attention ins({{.*}}) kv_lens(%{{.*}} : tensor<?xi32>) mask(%{{.*}} : tensor<?x1x8x8xi1>) alibi(%{{.*}} : tensor<?x2xf32>) outs({{.*}}) window(-1, 3) -> tensor<?x2x8x16xbf16>
func.func @attention_window_alibi_bh(%q: tensor<?x2x8x16xbf16>, %k: tensor<?x1x8x16xbf16>, %v: tensor<?x1x8x16xbf16>, %l: tensor<?xi32>, %m: tensor<?x1x8x8xi1>, %a: tensor<?x2xf32>, %o: tensor<?x2x8x16xbf16>) -> tensor<?x2x8x16xbf16> {
  %r = fa.attention ins(%q, %k, %v : tensor<?x2x8x16xbf16>, tensor<?x1x8x16xbf16>, tensor<?x1x8x16xbf16>) kv_lens(%l : tensor<?xi32>) mask(%m : tensor<?x1x8x8xi1>) alibi(%a : tensor<?x2xf32>) outs(%o : tensor<?x2x8x16xbf16>) window(-1, 3) -> tensor<?x2x8x16xbf16>
  return %r : tensor<?x2x8x16xbf16>
}

// -----

// General modifiers: a score_mod reading a relative-bias table and a
// mask_mod, both over the mod_operands.
// CHECK-LABEL: func.func @attention_score_mod_mask_mod
//       CHECK:   fa.attention ins({{.*}}) mod_operands(%{{.*}}, %{{.*}} : tensor<4x63xf32>, tensor<2xindex>) outs({{.*}}) causal(top_left) score_mod {
//  CHECK-NEXT:   ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %[[Q:.*]]: index, %[[K:.*]]: index, %[[T:.*]]: tensor<4x63xf32>, %{{.*}}: tensor<2xindex>):
//       CHECK:     %[[X:.*]] = tensor.extract %[[T]][%[[H]], %{{.*}}] : tensor<4x63xf32>
//       CHECK:     %[[R:.*]] = arith.addf %[[S]], %[[X]] : f32
//       CHECK:     fa.yield %[[R]] : f32
//       CHECK:   } mask_mod {
//  CHECK-NEXT:   ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<4x63xf32>, %{{.*}}: tensor<2xindex>):
//       CHECK:     fa.yield %{{.*}} : i1
//       CHECK:   } -> tensor<1x4x32x16xf32>
func.func @attention_score_mod_mask_mod(%q: tensor<1x4x32x16xf32>, %k: tensor<1x2x32x16xf32>, %v: tensor<1x2x32x16xf32>, %o: tensor<1x4x32x16xf32>, %bias: tensor<4x63xf32>, %lim: tensor<2xindex>) -> tensor<1x4x32x16xf32> {
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x32x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>) mod_operands(%bias, %lim : tensor<4x63xf32>, tensor<2xindex>) outs(%o : tensor<1x4x32x16xf32>) causal(top_left) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %t: tensor<4x63xf32>, %l: tensor<2xindex>):
    %c31 = arith.constant 31 : index
    %d = arith.subi %ki, %qi : index
    %i = arith.addi %d, %c31 : index
    %x = tensor.extract %t[%h, %i] : tensor<4x63xf32>
    %r = arith.addf %s, %x : f32
    fa.yield %r : f32
  } mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %t: tensor<4x63xf32>, %l: tensor<2xindex>):
    %lo = tensor.extract %l[%b] : tensor<2xindex>
    %keep = arith.cmpi sge, %ki, %lo : index
    fa.yield %keep : i1
  } -> tensor<1x4x32x16xf32>
  return %r : tensor<1x4x32x16xf32>
}

// -----

// A block mask built from a mask_mod, and the attention that reads it.
// CHECK-LABEL: func.func @attention_block_mask
//       CHECK:   %[[BM:.*]] = fa.create_block_mask sizes(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) tiles(16, 32) mask_mod {
//       CHECK:     fa.yield %{{.*}} : i1
//       CHECK:   } -> tensor<1x1x?x?xi8>
//       CHECK:   fa.attention ins({{.*}}) block_mask(%[[BM]] : tensor<1x1x?x?xi8>) outs({{.*}}) block_tiles(16, 32) mask_mod {
func.func @attention_block_mask(%q: tensor<2x4x?x16xf32>, %k: tensor<2x2x?x16xf32>, %v: tensor<2x2x?x16xf32>, %o: tensor<2x4x?x16xf32>) -> tensor<2x4x?x16xf32> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %nq = tensor.dim %q, %c2 : tensor<2x4x?x16xf32>
  %nk = tensor.dim %k, %c2 : tensor<2x2x?x16xf32>
  %bm = fa.create_block_mask sizes(%c1, %c1, %nq, %nk) tiles(16, 32) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x1x?x?xi8>
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>) block_mask(%bm : tensor<1x1x?x?xi8>) outs(%o : tensor<2x4x?x16xf32>) block_tiles(16, 32) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<2x4x?x16xf32>
  return %r : tensor<2x4x?x16xf32>
}

// -----

// fa.merge: S partials (O [S, d..., Dv], LSE [S, d...]) into one result,
// with or without its LSE, static or dynamic, any number of row dims.
// CHECK-LABEL: func.func @merge
// CHECK: fa.merge ins(%{{.*}}, %{{.*}} : tensor<3x2x4x1x64xf32>, tensor<3x2x4x1xf32>) outs(%{{.*}} : tensor<2x4x1x64xf16>, %{{.*}} : tensor<2x4x1xf32>) -> tensor<2x4x1x64xf16>, tensor<2x4x1xf32>
// CHECK: fa.merge ins(%{{.*}}, %{{.*}} : tensor<?x?x8xf32>, tensor<?x?xf32>) outs(%{{.*}} : tensor<?x8xbf16>) -> tensor<?x8xbf16>
func.func @merge(%po: tensor<3x2x4x1x64xf32>, %pl: tensor<3x2x4x1xf32>, %o: tensor<2x4x1x64xf16>, %l: tensor<2x4x1xf32>,
                 %po2: tensor<?x?x8xf32>, %pl2: tensor<?x?xf32>, %o2: tensor<?x8xbf16>) -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>, tensor<?x8xbf16>) {
  %r:2 = fa.merge ins(%po, %pl : tensor<3x2x4x1x64xf32>, tensor<3x2x4x1xf32>) outs(%o : tensor<2x4x1x64xf16>, %l : tensor<2x4x1xf32>) -> tensor<2x4x1x64xf16>, tensor<2x4x1xf32>
  %r2 = fa.merge ins(%po2, %pl2 : tensor<?x?x8xf32>, tensor<?x?xf32>) outs(%o2 : tensor<?x8xbf16>) -> tensor<?x8xbf16>
  return %r#0, %r#1, %r2 : tensor<2x4x1x64xf16>, tensor<2x4x1xf32>, tensor<?x8xbf16>
}

// -----

// A token-major variable-length batch: Q [Tq, Hq, D], K/V [Tk, Hkv, D],
// O [Tq, Hq, Dv], LSE [Hq, Tq] and the offsets cu_seqlens [B + 1].
// CHECK-LABEL: func.func @varlen
// CHECK: fa.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>) cu_seqlens(%{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?xi32>) alibi(%{{.*}} : tensor<8xf32>) outs(%{{.*}} : tensor<?x8x64xf16>, %{{.*}} : tensor<8x?xf32>) causal(bottom_right) window(128, 0) -> tensor<?x8x64xf16>, tensor<8x?xf32>
func.func @varlen(%q: tensor<?x8x64xf16>, %k: tensor<?x2x64xf16>, %v: tensor<?x2x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %s: tensor<8xf32>, %o: tensor<?x8x64xf16>, %l: tensor<8x?xf32>) -> tensor<?x8x64xf16> {
  %r, %lse = fa.attention ins(%q, %k, %v : tensor<?x8x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>) cu_seqlens(%cq, %ck : tensor<?xi32>, tensor<?xi32>) alibi(%s : tensor<8xf32>) outs(%o : tensor<?x8x64xf16>, %l : tensor<8x?xf32>) causal(bottom_right) window(128, 0) -> tensor<?x8x64xf16>, tensor<8x?xf32>
  return %r : tensor<?x8x64xf16>
}

// A paged K/V cache [P, S, Hkv, D] read through a block table [B, M]
// with the sequences' lengths.
// CHECK-LABEL: func.func @paged
// CHECK: fa.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8x1x64xf16>, tensor<?x16x2x64xf16>, tensor<?x16x2x64xf16>) kv_lens(%{{.*}} : tensor<?xi32>) block_table(%{{.*}} : tensor<?x?xi32>) outs(%{{.*}} : tensor<?x8x1x64xf16>) causal(bottom_right) window(128, 0) -> tensor<?x8x1x64xf16>
func.func @paged(%q: tensor<?x8x1x64xf16>, %kc: tensor<?x16x2x64xf16>, %vc: tensor<?x16x2x64xf16>, %lens: tensor<?xi32>, %bt: tensor<?x?xi32>, %o: tensor<?x8x1x64xf16>) -> tensor<?x8x1x64xf16> {
  %r = fa.attention ins(%q, %kc, %vc : tensor<?x8x1x64xf16>, tensor<?x16x2x64xf16>, tensor<?x16x2x64xf16>) kv_lens(%lens : tensor<?xi32>) block_table(%bt : tensor<?x?xi32>) outs(%o : tensor<?x8x1x64xf16>) causal(bottom_right) window(128, 0) -> tensor<?x8x1x64xf16>
  return %r : tensor<?x8x1x64xf16>
}
