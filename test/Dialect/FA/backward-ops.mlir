// RUN: fa-opt %s -split-input-file --verify-roundtrip | FileCheck %s
// RUN: fa-opt %s -split-input-file --mlir-print-op-generic | fa-opt -split-input-file | FileCheck %s

// The dense backward: GQA, dynamic lengths, causal.
// CHECK-LABEL: func.func @dense
//       CHECK:   = fa.attention_backward ins(%{{[^)]*}} : tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>) forward(%{{[^)]*}} : tensor<2x8x?x32xf16>, tensor<2x8x?xf32>) grad_output(%{{[^)]*}} : tensor<2x8x?x32xf16>) outs(%{{[^)]*}} : tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>) causal(bottom_right) -> tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>
func.func @dense(%q: tensor<2x8x?x64xf16>, %k: tensor<2x2x?x64xf16>,
                 %v: tensor<2x2x?x32xf16>, %o: tensor<2x8x?x32xf16>,
                 %lse: tensor<2x8x?xf32>, %do: tensor<2x8x?x32xf16>,
                 %dq: tensor<2x8x?x64xf16>, %dk: tensor<2x2x?x64xf16>,
                 %dv: tensor<2x2x?x32xf16>)
    -> (tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>) {
  %r:3 = fa.attention_backward
      ins(%q, %k, %v : tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>)
      forward(%o, %lse : tensor<2x8x?x32xf16>, tensor<2x8x?xf32>)
      grad_output(%do : tensor<2x8x?x32xf16>)
      outs(%dq, %dk, %dv : tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>)
      causal(bottom_right)
      -> tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>
  return %r#0, %r#1, %r#2 : tensor<2x8x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x32xf16>
}

// -----

// Every optional operand and modifier.
// CHECK-LABEL: func.func @everything
//       CHECK:   fa.attention_backward
//  CHECK-SAME:     kv_lens(%{{.*}} : tensor<1xi32>)
//  CHECK-SAME:     mask(%{{.*}} : tensor<1x1x16x32xf32>)
//  CHECK-SAME:     alibi(%{{.*}} : tensor<4xf32>)
//  CHECK-SAME:     segments(%{{.*}}, %{{.*}} : tensor<1x16xi32>, tensor<1x32xi32>)
//  CHECK-SAME:     q_offset(%{{[^)]*}})
//  CHECK-SAME:     causal(top_left) window(8, -1) softcap(3.000000e+01) chunk(16) scale(1.250000e-01)
func.func @everything(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x32x64xf32>,
                      %v: tensor<1x4x32x64xf32>, %o: tensor<1x4x16x64xf32>,
                      %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf32>,
                      %lens: tensor<1xi32>, %mask: tensor<1x1x16x32xf32>,
                      %slopes: tensor<4xf32>, %qs: tensor<1x16xi32>,
                      %ks: tensor<1x32xi32>, %p: index,
                      %dq: tensor<1x4x16x64xf32>, %dk: tensor<1x4x32x64xf32>,
                      %dv: tensor<1x4x32x64xf32>) {
  %r:3 = fa.attention_backward
      ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x4x32x64xf32>, tensor<1x4x32x64xf32>)
      forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
      grad_output(%do : tensor<1x4x16x64xf32>)
      kv_lens(%lens : tensor<1xi32>) mask(%mask : tensor<1x1x16x32xf32>)
      alibi(%slopes : tensor<4xf32>)
      segments(%qs, %ks : tensor<1x16xi32>, tensor<1x32xi32>) q_offset(%p)
      outs(%dq, %dk, %dv : tensor<1x4x16x64xf32>, tensor<1x4x32x64xf32>, tensor<1x4x32x64xf32>)
      causal(top_left) window(8, -1) softcap(30.0) chunk(16) scale(0.125)
      -> tensor<1x4x16x64xf32>, tensor<1x4x32x64xf32>, tensor<1x4x32x64xf32>
  return
}
