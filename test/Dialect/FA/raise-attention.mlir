// RUN: fa-opt %s -split-input-file -fa-raise-attention | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-raise-attention=allow-masked-rows=false | FileCheck %s --check-prefix=NOMASK

// The torch-mlir style chain: batch_matmul with a linalg.transpose of K, a
// scalar multiply in a generic, linalg.softmax, batch_matmul with V. The
// [B*H, N, D] operands become [B*H, 1, N, D].

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @bmm_transpose_mul_softmax
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x12x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x12x4xf32>
// CHECK-DAG: %[[Q4:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 1, 8, 16]
// CHECK-DAG: %[[K4:.*]] = tensor.expand_shape %[[K]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 1, 12, 16]
// CHECK-DAG: %[[V4:.*]] = tensor.expand_shape %[[V]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 1, 12, 4]
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x1x8x4xf32>
// CHECK: %[[A:.*]] = fa.attention ins(%[[Q4]], %[[K4]], %[[V4]] : tensor<2x1x8x16xf32>, tensor<2x1x12x16xf32>, tensor<2x1x12x4xf32>) outs(%[[E]] : tensor<2x1x8x4xf32>) scale(2.500000e-01) -> tensor<2x1x8x4xf32>
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[A]] {{\[\[}}0, 1], [2], [3]] : tensor<2x1x8x4xf32> into tensor<2x8x4xf32>
// CHECK: return %[[R]]
// CHECK-NOT: linalg.
func.func @bmm_transpose_mul_softmax(%q: tensor<2x8x16xf32>, %k: tensor<2x12x16xf32>,
                                     %v: tensor<2x12x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %c = arith.constant 0.25 : f32
  %kt0 = tensor.empty() : tensor<2x16x12xf32>
  %kt = linalg.transpose ins(%k : tensor<2x12x16xf32>) outs(%kt0 : tensor<2x16x12xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x12xf32>) outs(%sf : tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %ss = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x8x12xf32>) outs(%s0 : tensor<2x8x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x8x12xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x8x12xf32>) outs(%s0 : tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x12xf32>, tensor<2x12x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}
// NOMASK-LABEL: func.func @bmm_transpose_mul_softmax
// NOMASK: fa.attention

// -----

// 2-D linalg.matmul, K^T through a transpose, a division by a constant
// through linalg.div with a linalg.fill, and the decomposed softmax exactly
// as linalg.softmax's decomposition emits it (max from NaN with maxnumf).

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @matmul_div_decomposed
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<8x16xf16>, %[[K:[a-z0-9]+]]: tensor<12x16xf16>, %[[V:[a-z0-9]+]]: tensor<12x16xf16>
// CHECK-DAG: tensor.expand_shape %[[Q]] {{\[\[}}0, 1, 2], [3]] output_shape [1, 1, 8, 16] : tensor<8x16xf16> into tensor<1x1x8x16xf16>
// CHECK: %[[A:.*]] = fa.attention ins({{.*}} : tensor<1x1x8x16xf16>, tensor<1x1x12x16xf16>, tensor<1x1x12x16xf16>) outs({{.*}} : tensor<1x1x8x16xf16>) scale(1.250000e-01) -> tensor<1x1x8x16xf16>
// CHECK: tensor.collapse_shape %[[A]] {{\[\[}}0, 1, 2], [3]] : tensor<1x1x8x16xf16> into tensor<8x16xf16>
// CHECK-NOT: linalg.
func.func @matmul_div_decomposed(%q: tensor<8x16xf16>, %k: tensor<12x16xf16>,
                                 %v: tensor<12x16xf16>) -> tensor<8x16xf16> {
  %zero = arith.constant 0.0 : f16
  %eight = arith.constant 8.0 : f16
  %nan = arith.constant 0xFE00 : f16
  %kt0 = tensor.empty() : tensor<16x12xf16>
  %kt = linalg.transpose ins(%k : tensor<12x16xf16>) outs(%kt0 : tensor<16x12xf16>) permutation = [1, 0]
  %s0 = tensor.empty() : tensor<8x12xf16>
  %sf = linalg.fill ins(%zero : f16) outs(%s0 : tensor<8x12xf16>) -> tensor<8x12xf16>
  %s = linalg.matmul ins(%q, %kt : tensor<8x16xf16>, tensor<16x12xf16>) outs(%sf : tensor<8x12xf16>) -> tensor<8x12xf16>
  %cf = linalg.fill ins(%eight : f16) outs(%s0 : tensor<8x12xf16>) -> tensor<8x12xf16>
  %x = linalg.div ins(%s, %cf : tensor<8x12xf16>, tensor<8x12xf16>) outs(%s0 : tensor<8x12xf16>) -> tensor<8x12xf16>
  %r0 = tensor.empty() : tensor<8xf16>
  %mi = linalg.fill ins(%nan : f16) outs(%r0 : tensor<8xf16>) -> tensor<8xf16>
  %max = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x12xf16>) outs(%mi : tensor<8xf16>) {
  ^bb0(%in: f16, %out: f16):
    %m = arith.maxnumf %in, %out : f16
    linalg.yield %m : f16
  } -> tensor<8xf16>
  %e = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<8x12xf16>, tensor<8xf16>) outs(%s0 : tensor<8x12xf16>) {
  ^bb0(%in: f16, %in1: f16, %out: f16):
    %d = arith.subf %in, %in1 : f16
    %ex = math.exp %d : f16
    linalg.yield %ex : f16
  } -> tensor<8x12xf16>
  %si = linalg.fill ins(%zero : f16) outs(%r0 : tensor<8xf16>) -> tensor<8xf16>
  %sum = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%e : tensor<8x12xf16>) outs(%si : tensor<8xf16>) {
  ^bb0(%in: f16, %out: f16):
    %a = arith.addf %in, %out : f16
    linalg.yield %a : f16
  } -> tensor<8xf16>
  %p = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%e, %sum : tensor<8x12xf16>, tensor<8xf16>) outs(%s0 : tensor<8x12xf16>) {
  ^bb0(%in: f16, %in1: f16, %out: f16):
    %d = arith.divf %in, %in1 : f16
    linalg.yield %d : f16
  } -> tensor<8x12xf16>
  %o0 = tensor.empty() : tensor<8x16xf16>
  %of = linalg.fill ins(%zero : f16) outs(%o0 : tensor<8x16xf16>) -> tensor<8x16xf16>
  %o = linalg.matmul ins(%p, %v : tensor<8x12xf16>, tensor<12x16xf16>) outs(%of : tensor<8x16xf16>) -> tensor<8x16xf16>
  return %o : tensor<8x16xf16>
}

// -----

// 4-D [B, H, N, D] contraction generics with K^T in the indexing maps, a
// splat-constant multiply through linalg.mul, an additive mask through
// linalg.add: no reshapes, the mask becomes the op's mask.

#q4 = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#k4 = affine_map<(b, h, m, n, k) -> (b, h, n, k)>
#s4 = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
#p4 = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#v4 = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
// CHECK-LABEL: func.func @generic4d_mul_add_mask
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x3x8x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x3x12x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x3x12x8xf32>, %[[M:[a-z0-9]+]]: tensor<2x3x8x12xf32>
// CHECK-NOT: tensor.expand_shape
// CHECK: %[[A:.*]] = fa.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>) mask(%[[M]] : tensor<2x3x8x12xf32>) outs(%{{.*}} : tensor<2x3x8x8xf32>) scale(3.000000e+00) -> tensor<2x3x8x8xf32>
// CHECK-NEXT: return %[[A]]
// NOMASK-LABEL: func.func @generic4d_mul_add_mask
// NOMASK-NOT: fa.attention
// NOMASK: fa.softmax
func.func @generic4d_mul_add_mask(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>,
                                  %v: tensor<2x3x12x8xf32>, %mask: tensor<2x3x8x12xf32>) -> tensor<2x3x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %three = arith.constant dense<3.0> : tensor<2x3x8x12xf32>
  %s0 = tensor.empty() : tensor<2x3x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %s = linalg.generic {indexing_maps = [#q4, #k4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>) outs(%sf : tensor<2x3x8x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x12xf32>
  %ss = linalg.mul ins(%s, %three : tensor<2x3x8x12xf32>, tensor<2x3x8x12xf32>) outs(%s0 : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %sm = linalg.add ins(%ss, %mask : tensor<2x3x8x12xf32>, tensor<2x3x8x12xf32>) outs(%s0 : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%sm : tensor<2x3x8x12xf32>) outs(%s0 : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %o0 = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = linalg.generic {indexing_maps = [#p4, #v4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<2x3x8x12xf32>, tensor<2x3x12x8xf32>) outs(%of : tensor<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}

// -----

// Dynamic batch and sequence lengths; K^T in batch_matmul's indexing maps;
// a boolean mask applied with select(-inf) inside a generic; no scale
// (scale(1.0)).

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @dynamic_bmm_maps_select
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<?x?x32xbf16>, %[[K:[a-z0-9]+]]: tensor<?x?x32xbf16>, %[[V:[a-z0-9]+]]: tensor<?x?x32xbf16>, %[[M:[a-z0-9]+]]: tensor<?x?x?xi1>
// CHECK-DAG: %[[M4:.*]] = tensor.expand_shape %[[M]] {{\[\[}}0, 1], [2], [3]] output_shape [%{{.*}}, 1, %{{.*}}, %{{.*}}] : tensor<?x?x?xi1> into tensor<?x1x?x?xi1>
// CHECK: %[[A:.*]] = fa.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?x1x?x32xbf16>, tensor<?x1x?x32xbf16>, tensor<?x1x?x32xbf16>) mask(%[[M4]] : tensor<?x1x?x?xi1>) outs(%{{.*}} : tensor<?x1x?x32xbf16>) scale(1.000000e+00) -> tensor<?x1x?x32xbf16>
// CHECK: tensor.collapse_shape %[[A]]
// CHECK-NOT: linalg.
// NOMASK-LABEL: func.func @dynamic_bmm_maps_select
// NOMASK-NOT: fa.attention
func.func @dynamic_bmm_maps_select(%q: tensor<?x?x32xbf16>, %k: tensor<?x?x32xbf16>,
                                   %v: tensor<?x?x32xbf16>, %mask: tensor<?x?x?xi1>) -> tensor<?x?x32xbf16> {
  %zero = arith.constant 0.0 : bf16
  %ninf = arith.constant 0xFF80 : bf16
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %bh = tensor.dim %q, %c0 : tensor<?x?x32xbf16>
  %nq = tensor.dim %q, %c1 : tensor<?x?x32xbf16>
  %nk = tensor.dim %k, %c1 : tensor<?x?x32xbf16>
  %s0 = tensor.empty(%bh, %nq, %nk) : tensor<?x?x?xbf16>
  %sf = linalg.fill ins(%zero : bf16) outs(%s0 : tensor<?x?x?xbf16>) -> tensor<?x?x?xbf16>
  %s = linalg.batch_matmul indexing_maps = [
         affine_map<(b, m, n, k) -> (b, m, k)>,
         affine_map<(b, m, n, k) -> (b, n, k)>,
         affine_map<(b, m, n, k) -> (b, m, n)>]
       ins(%q, %k : tensor<?x?x32xbf16>, tensor<?x?x32xbf16>) outs(%sf : tensor<?x?x?xbf16>) -> tensor<?x?x?xbf16>
  %sm = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mask, %s : tensor<?x?x?xi1>, tensor<?x?x?xbf16>) outs(%s0 : tensor<?x?x?xbf16>) {
  ^bb0(%keep: i1, %in: bf16, %out: bf16):
    %r = arith.select %keep, %in, %ninf : bf16
    linalg.yield %r : bf16
  } -> tensor<?x?x?xbf16>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<?x?x?xbf16>) outs(%s0 : tensor<?x?x?xbf16>) -> tensor<?x?x?xbf16>
  %o0 = tensor.empty(%bh, %nq) : tensor<?x?x32xbf16>
  %of = linalg.fill ins(%zero : bf16) outs(%o0 : tensor<?x?x32xbf16>) -> tensor<?x?x32xbf16>
  %o = linalg.batch_matmul ins(%p, %v : tensor<?x?x?xbf16>, tensor<?x?x32xbf16>) outs(%of : tensor<?x?x32xbf16>) -> tensor<?x?x32xbf16>
  return %o : tensor<?x?x32xbf16>
}

// -----

// arith.select on tensors with a splat -inf, and a scale as c * S with a
// captured constant on the left.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @tensor_select
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<4x8x8xi1>
// CHECK: %[[M4:.*]] = tensor.expand_shape %[[M]]
// CHECK: fa.attention {{.*}} mask(%[[M4]] : tensor<4x1x8x8xi1>) {{.*}} scale(5.000000e-01)
// CHECK-NOT: linalg.
// NOMASK-LABEL: func.func @tensor_select
// NOMASK-NOT: fa.attention
func.func @tensor_select(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>,
                         %mask: tensor<4x8x8xi1>) -> tensor<4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %ninf = arith.constant dense<0xFF800000> : tensor<4x8x8xf32>
  %kt0 = tensor.empty() : tensor<4x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<4x8x16xf32>) outs(%kt0 : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<4x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%sf : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %ss = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<4x8x8xf32>) outs(%s0 : tensor<4x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %half, %in : f32
    linalg.yield %m : f32
  } -> tensor<4x8x8xf32>
  %sm = arith.select %mask, %ss, %ninf : tensor<4x8x8xi1>, tensor<4x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<4x8x8xf32>) outs(%s0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %o0 = tensor.empty() : tensor<4x8x16xf32>
  %of2 = linalg.fill ins(%zero : f32) outs(%o0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%of2 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}

// -----

// Negative: softmax over the query dim (dimension 1), not the keys.

// CHECK-LABEL: func.func @softmax_wrong_dim
// NOMASK-LABEL: func.func @softmax_wrong_dim
// CHECK-NOT: fa.attention
// CHECK: fa.softmax {{.*}} dimension(1)
func.func @softmax_wrong_dim(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>,
                             %v: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%kt0 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(1) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// Negative: S has a second use (it is returned).

// CHECK-LABEL: func.func @extra_use_of_s
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @extra_use_of_s(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>,
                          %v: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%kt0 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o, %s : tensor<2x8x4xf32>, tensor<2x8x8xf32>
}

// -----

// Negative: P has a second use.

// CHECK-LABEL: func.func @extra_use_of_p
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @extra_use_of_p(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>,
                          %v: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%kt0 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o, %p : tensor<2x8x4xf32>, tensor<2x8x8xf32>
}

// -----

// Negative: the scale is a function argument, not a constant.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @non_constant_scale
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @non_constant_scale(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>,
                              %v: tensor<2x8x4xf32>, %c: f32) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%kt0 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %ss = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// Negative: the decomposed softmax reduces over dim 0 (the max and the sum
// run over the queries).

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#colr = affine_map<(d0, d1) -> (d1, d0)>
#t = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @decomposed_wrong_reduction_dim
// CHECK-NOT: fa.attention
// CHECK: linalg.matmul
func.func @decomposed_wrong_reduction_dim(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>,
                                          %v: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt0 = tensor.empty() : tensor<16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<8x16xf32>) outs(%kt0 : tensor<16x8xf32>) permutation = [1, 0]
  %s0 = tensor.empty() : tensor<8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %x = linalg.matmul ins(%q, %kt : tensor<8x16xf32>, tensor<16x8xf32>) outs(%sf : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r0 = tensor.empty() : tensor<8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%r0 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [#colr, #t], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x8xf32>) outs(%mi : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %e = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<8x8xf32>, tensor<8xf32>) outs(%s0 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %d = arith.subf %in, %in1 : f32
    %ex = math.exp %d : f32
    linalg.yield %ex : f32
  } -> tensor<8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%r0 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#colr, #t], iterator_types = ["parallel", "reduction"]}
      ins(%e : tensor<8x8xf32>) outs(%si : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<8xf32>
  %p = linalg.generic {indexing_maps = [#id2, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%e, %sum : tensor<8x8xf32>, tensor<8xf32>) outs(%s0 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %d = arith.divf %in, %in1 : f32
    linalg.yield %d : f32
  } -> tensor<8x8xf32>
  %o0 = tensor.empty() : tensor<8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %o = linalg.matmul ins(%p, %v : tensor<8x8xf32>, tensor<8x16xf32>) outs(%of : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %o : tensor<8x16xf32>
}

// -----

// Q.K^T without a transpose: the second operand is K^T ([B*H, D, Nk]), so
// fa.attention gets it transposed back.

// CHECK-LABEL: func.func @qk_without_transpose
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x8x8xf32>, %[[K:[a-z0-9]+]]: tensor<2x8x8xf32>
// CHECK: %[[KT:.*]] = linalg.transpose ins(%[[K]] : tensor<2x8x8xf32>) {{.*}} permutation = [0, 2, 1]
// CHECK: %[[K4:.*]] = tensor.expand_shape %[[KT]]
// CHECK: fa.attention ins(%{{.*}}, %[[K4]], %{{.*}} :
func.func @qk_without_transpose(%q: tensor<2x8x8xf32>, %k: tensor<2x8x8xf32>,
                                %v: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// Negative: f16 inputs accumulated into f32 scores (a mixed-precision
// contraction, an element type change fa.attention cannot express).

// CHECK-LABEL: func.func @mixed_precision
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @mixed_precision(%q: tensor<2x8x16xf16>, %k: tensor<2x8x16xf16>,
                           %v: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x8xf16>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf16>) outs(%kt0 : tensor<2x16x8xf16>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf16>, tensor<2x16x8xf16>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// The mask is added before the scale: (S + M) * c = c * S + c * M, so the
// mask fa.attention gets is M * c.

// CHECK-LABEL: func.func @mask_before_scale
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<2x8x8xf32>
// CHECK: %[[C:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: %[[SM:.*]] = linalg.generic {{.*}} ins(%[[M]] : tensor<2x8x8xf32>) outs(%{{.*}} : tensor<2x1x8x8xf32>)
// CHECK: arith.mulf %{{.*}}, %[[C]]
// CHECK: fa.attention {{.*}} mask(%[[SM]] : tensor<2x1x8x8xf32>) {{.*}} scale(2.500000e-01)
func.func @mask_before_scale(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>,
                             %v: tensor<2x8x4xf32>, %mask: tensor<2x8x8xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %c = arith.constant dense<0.25> : tensor<2x8x8xf32>
  %kt0 = tensor.empty() : tensor<2x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%kt0 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %sm = linalg.add ins(%s, %mask : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %ss = linalg.mul ins(%sm, %c : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%ss : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// Negative: P.V accumulates onto a non-zero tensor (O = init + P V).

// CHECK-LABEL: func.func @pv_nonzero_init
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @pv_nonzero_init(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>,
                           %v: tensor<2x8x4xf32>, %acc: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<2x8x16xf32>) outs(%kt0 : tensor<2x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<2x8x16xf32>, tensor<2x16x8xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%acc : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// Negative: a dynamic head dim (fa.attention needs D static).

// CHECK-LABEL: func.func @dynamic_head_dim
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @dynamic_head_dim(%q: tensor<2x8x?xf32>, %k: tensor<2x8x?xf32>,
                            %v: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %s = linalg.batch_matmul indexing_maps = [
         affine_map<(b, m, n, k) -> (b, m, k)>,
         affine_map<(b, m, n, k) -> (b, n, k)>,
         affine_map<(b, m, n, k) -> (b, m, n)>]
       ins(%q, %k : tensor<2x8x?xf32>, tensor<2x8x?xf32>) outs(%sf : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x8xf32>) outs(%s0 : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// Q is less static than K, V and the result: the raised result is cast back
// to the chain's type.

// CHECK-LABEL: func.func @mixed_static_dynamic
// CHECK: %[[A:.*]] = fa.attention ins({{.*}} : tensor<?x1x8x16xf32>, tensor<2x1x12x16xf32>, tensor<2x1x12x4xf32>) outs({{.*}} : tensor<?x1x8x4xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[A]] {{\[\[}}0, 1], [2], [3]] : tensor<?x1x8x4xf32> into tensor<?x8x4xf32>
// CHECK: %[[R:.*]] = tensor.cast %[[C]] : tensor<?x8x4xf32> to tensor<2x8x4xf32>
// CHECK: return %[[R]]
// NOMASK-LABEL: func.func @mixed_static_dynamic
// NOMASK: fa.attention
func.func @mixed_static_dynamic(%q: tensor<?x8x16xf32>, %k: tensor<2x12x16xf32>,
                                %v: tensor<2x12x4xf32>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<2x16x12xf32>
  %kt = linalg.transpose ins(%k : tensor<2x12x16xf32>) outs(%kt0 : tensor<2x16x12xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<2x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<?x8x16xf32>, tensor<2x16x12xf32>) outs(%sf : tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<2x8x12xf32>) outs(%s0 : tensor<2x8x12xf32>) -> tensor<2x8x12xf32>
  %o0 = tensor.empty() : tensor<2x8x4xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x8x12xf32>, tensor<2x12x4xf32>) outs(%of : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// The softmax decomposed with the subtraction and the exponential as two
// generics and the max from -inf with maximumf; K^T in a contraction
// generic's maps.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @split_sub_exp
// CHECK: fa.attention ins({{.*}} : tensor<3x8x1x16xf32>, tensor<3x8x1x16xf32>, tensor<3x8x1x16xf32>) {{.*}} scale(1.000000e+00)
// CHECK-NOT: linalg.
// NOMASK-LABEL: func.func @split_sub_exp
// NOMASK: fa.attention
func.func @split_sub_exp(%q: tensor<3x8x1x16xf32>, %k: tensor<3x8x1x16xf32>,
                         %v: tensor<3x8x1x16xf32>) -> tensor<3x8x1x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %s0 = tensor.empty() : tensor<3x8x1x1xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<3x8x1x1xf32>) -> tensor<3x8x1x1xf32>
  %x = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>,
                                        affine_map<(b, h, m, n, k) -> (b, h, n, k)>,
                                        affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<3x8x1x16xf32>, tensor<3x8x1x16xf32>) outs(%sf : tensor<3x8x1x1xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<3x8x1x1xf32>
  %r0 = tensor.empty() : tensor<3x8x1xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%r0 : tensor<3x8x1xf32>) -> tensor<3x8x1xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>],
                         iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x : tensor<3x8x1x1xf32>) outs(%mi : tensor<3x8x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<3x8x1xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %max : tensor<3x8x1x1xf32>, tensor<3x8x1xf32>) outs(%s0 : tensor<3x8x1x1xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %t = arith.subf %in, %in1 : f32
    linalg.yield %t : f32
  } -> tensor<3x8x1x1xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%d : tensor<3x8x1x1xf32>) outs(%s0 : tensor<3x8x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.exp %in : f32
    linalg.yield %t : f32
  } -> tensor<3x8x1x1xf32>
  %si = linalg.fill ins(%zero : f32) outs(%r0 : tensor<3x8x1xf32>) -> tensor<3x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>],
                         iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%e : tensor<3x8x1x1xf32>) outs(%si : tensor<3x8x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %out, %in : f32
    linalg.yield %a : f32
  } -> tensor<3x8x1xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%e, %sum : tensor<3x8x1x1xf32>, tensor<3x8x1xf32>) outs(%s0 : tensor<3x8x1x1xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %t = arith.divf %in, %in1 : f32
    linalg.yield %t : f32
  } -> tensor<3x8x1x1xf32>
  %o0 = tensor.empty() : tensor<3x8x1x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<3x8x1x16xf32>) -> tensor<3x8x1x16xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>,
                                        affine_map<(b, h, m, n, k) -> (b, h, k, n)>,
                                        affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<3x8x1x1xf32>, tensor<3x8x1x16xf32>) outs(%of : tensor<3x8x1x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<3x8x1x16xf32>
  return %o : tensor<3x8x1x16xf32>
}

// -----

// Negative: the exponential's result has a third use.

// CHECK-LABEL: func.func @exp_extra_use
// CHECK-NOT: fa.attention
// CHECK: math.exp
func.func @exp_extra_use(%q: tensor<8x16xf32>, %k: tensor<8x16xf32>,
                         %v: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt0 = tensor.empty() : tensor<16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<8x16xf32>) outs(%kt0 : tensor<16x8xf32>) permutation = [1, 0]
  %s0 = tensor.empty() : tensor<8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %x = linalg.matmul ins(%q, %kt : tensor<8x16xf32>, tensor<16x8xf32>) outs(%sf : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r0 = tensor.empty() : tensor<8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%r0 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x8xf32>) outs(%mi : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<8x8xf32>, tensor<8xf32>) outs(%s0 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %d = arith.subf %in, %in1 : f32
    %ex = math.exp %d : f32
    linalg.yield %ex : f32
  } -> tensor<8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%r0 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a)>], iterator_types = ["parallel", "reduction"]}
      ins(%e : tensor<8x8xf32>) outs(%si : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a)>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]}
      ins(%e, %sum : tensor<8x8xf32>, tensor<8xf32>) outs(%s0 : tensor<8x8xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %d = arith.divf %in, %in1 : f32
    linalg.yield %d : f32
  } -> tensor<8x8xf32>
  %o0 = tensor.empty() : tensor<8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %o = linalg.matmul ins(%p, %v : tensor<8x8xf32>, tensor<8x16xf32>) outs(%of : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %o, %e : tensor<8x16xf32>, tensor<8x8xf32>
}

// -----

// An additive [Nq, Nk] mask broadcast over B and H in a 4-D generic add: it
// becomes a [1, 1, Nq, Nk] mask.

#q4 = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#k4 = affine_map<(b, h, m, n, k) -> (b, h, n, k)>
#s4 = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
#v4 = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#e4 = affine_map<(b, h, m, n) -> (b, h, m, n)>
#m2 = affine_map<(b, h, m, n) -> (m, n)>
// CHECK-LABEL: func.func @broadcast_additive_mask
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<8x12xf32>
// CHECK: %[[M4:.*]] = tensor.expand_shape %[[M]] {{\[\[}}0, 1, 2], [3]] output_shape [1, 1, 8, 12] : tensor<8x12xf32> into tensor<1x1x8x12xf32>
// CHECK: fa.attention ins({{.*}} : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>, tensor<2x3x12x8xf32>) mask(%[[M4]] : tensor<1x1x8x12xf32>)
// CHECK-NOT: linalg.
// NOMASK-LABEL: func.func @broadcast_additive_mask
// NOMASK-NOT: fa.attention
func.func @broadcast_additive_mask(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>,
                                   %v: tensor<2x3x12x8xf32>, %mask: tensor<8x12xf32>) -> tensor<2x3x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %s0 = tensor.empty() : tensor<2x3x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %s = linalg.generic {indexing_maps = [#q4, #k4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>) outs(%sf : tensor<2x3x8x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x12xf32>
  %sm = linalg.generic {indexing_maps = [#e4, #m2, #e4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s, %mask : tensor<2x3x8x12xf32>, tensor<8x12xf32>) outs(%s0 : tensor<2x3x8x12xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%sm : tensor<2x3x8x12xf32>) outs(%s0 : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %o0 = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = linalg.generic {indexing_maps = [#q4, #v4, #s4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : tensor<2x3x8x12xf32>, tensor<2x3x12x8xf32>) outs(%of : tensor<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}

// -----

// A boolean [1, Nq, Nk] mask read at index 0 over the B*H dim: a
// [1, 1, Nq, Nk] mask.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#b0 = affine_map<(d0, d1, d2) -> (0, d1, d2)>
// CHECK-LABEL: func.func @broadcast_bool_mask_unit_dim
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<1x8x8xi1>
// CHECK: %[[M2:.*]] = tensor.collapse_shape %[[M]] {{\[\[}}0, 1], [2]] : tensor<1x8x8xi1> into tensor<8x8xi1>
// CHECK: %[[M4:.*]] = tensor.expand_shape %[[M2]] {{\[\[}}0, 1, 2], [3]] output_shape [1, 1, 8, 8] : tensor<8x8xi1> into tensor<1x1x8x8xi1>
// CHECK: fa.attention {{.*}} mask(%[[M4]] : tensor<1x1x8x8xi1>)
func.func @broadcast_bool_mask_unit_dim(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>,
                                        %mask: tensor<1x8x8xi1>) -> tensor<4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt0 = tensor.empty() : tensor<4x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<4x8x16xf32>) outs(%kt0 : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<4x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%sf : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sm = linalg.generic {indexing_maps = [#b0, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mask, %s : tensor<1x8x8xi1>, tensor<4x8x8xf32>) outs(%s0 : tensor<4x8x8xf32>) {
  ^bb0(%keep: i1, %in: f32, %out: f32):
    %r = arith.select %keep, %in, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<4x8x8xf32>) outs(%s0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %o0 = tensor.empty() : tensor<4x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%of : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}

// -----

// A key-padding mask broadcast over the queries ([B*H, 1, Nk] read at query
// 0): fa.attention's mask does not broadcast over queries, so the raising
// materializes it as [B*H, 1, Nq, Nk].

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#q0 = affine_map<(d0, d1, d2) -> (d0, 0, d2)>
// CHECK-LABEL: func.func @mask_broadcast_over_queries
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<4x1x8xi1>
// CHECK: %[[BM:.*]] = linalg.generic {{.*}} ins(%[[M]] : tensor<4x1x8xi1>) outs(%{{.*}} : tensor<4x1x8x8xi1>)
// CHECK: fa.attention {{.*}} mask(%[[BM]] : tensor<4x1x8x8xi1>)
func.func @mask_broadcast_over_queries(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>,
                                       %mask: tensor<4x1x8xi1>) -> tensor<4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %kt0 = tensor.empty() : tensor<4x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<4x8x16xf32>) outs(%kt0 : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %s0 = tensor.empty() : tensor<4x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%s0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%sf : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sm = linalg.generic {indexing_maps = [#q0, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mask, %s : tensor<4x1x8xi1>, tensor<4x8x8xf32>) outs(%s0 : tensor<4x8x8xf32>) {
  ^bb0(%keep: i1, %in: f32, %out: f32):
    %r = arith.select %keep, %in, %ninf : f32
    linalg.yield %r : f32
  } -> tensor<4x8x8xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<4x8x8xf32>) outs(%s0 : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %o0 = tensor.empty() : tensor<4x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%o0 : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%of : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}

// -----

// An f16 bias added to f16 scores, then extended and scaled by 16 in f32:
// the mask fa.attention gets is built in f32 (bias * 16 in f16 overflows
// for |bias| >= 4096). Found by hostile testing.

// CHECK-LABEL: func.func @f16_bias_scaled_in_f32
// CHECK: %[[M:.*]] = linalg.generic
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.mulf
// CHECK: fa.attention {{.*}} mask(%[[M]] : tensor<1x1x4x4xf32>) {{.*}} scale(1.600000e+01)
// NOMASK-LABEL: func.func @f16_bias_scaled_in_f32
// NOMASK-NOT: fa.attention
func.func @f16_bias_scaled_in_f32(%arg0: tensor<1x2x4x8xf16>, %arg1: tensor<1x2x4x8xf16>, %arg2: tensor<1x2x4x8xf16>, %arg3: tensor<4x4xf16>) -> (tensor<1x2x4x8xf16>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e1 = tensor.empty() : tensor<1x2x4x4xf16>
  %c2 = arith.constant 0.0 : f16
  %f3 = linalg.fill ins(%c2 : f16) outs(%e1 : tensor<1x2x4x4xf16>) -> tensor<1x2x4x4xf16>
  %g4 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %arg1 : tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>) outs(%f3 : tensor<1x2x4x4xf16>) {
  ^bb0(%i0: f16, %i1: f16, %o: f16):
    %m = arith.mulf %i0, %i1 : f16
    %x = arith.addf %o, %m : f16
    linalg.yield %x : f16
  } -> tensor<1x2x4x4xf16>
  %e5 = tensor.empty() : tensor<1x2x4x4xf32>
  %g6 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g4, %arg3 : tensor<1x2x4x4xf16>, tensor<4x4xf16>) outs(%e5 : tensor<1x2x4x4xf32>) {
  ^bb0(%i0: f16, %i1: f16, %o: f32):
    %a = arith.addf %i0, %i1 : f16
    %e = arith.extf %a : f16 to f32
    %sc = arith.constant 16.0 : f32
    %x = arith.mulf %e, %sc : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x4xf32>
  %e7 = tensor.empty() : tensor<1x2x4xf32>
  %c8 = arith.constant 0xFF800000 : f32
  %f9 = linalg.fill ins(%c8 : f32) outs(%e7 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %g10 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%g6 : tensor<1x2x4x4xf32>) outs(%f9 : tensor<1x2x4xf32>) {
  ^bb0(%i0: f32, %o: f32):
    %x = arith.maximumf %i0, %o : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4xf32>
  %g11 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g6, %g10 : tensor<1x2x4x4xf32>, tensor<1x2x4xf32>) outs(%e5 : tensor<1x2x4x4xf32>) {
  ^bb0(%i0: f32, %i1: f32, %o: f32):
    %d = arith.subf %i0, %i1 : f32
    %x = math.exp %d : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x4xf32>
  %e12 = tensor.empty() : tensor<1x2x4xf32>
  %c13 = arith.constant 0.0 : f32
  %f14 = linalg.fill ins(%c13 : f32) outs(%e12 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %g15 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%g11 : tensor<1x2x4x4xf32>) outs(%f14 : tensor<1x2x4xf32>) {
  ^bb0(%i0: f32, %o: f32):
    %x = arith.addf %i0, %o : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4xf32>
  %g16 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g11, %g15 : tensor<1x2x4x4xf32>, tensor<1x2x4xf32>) outs(%e5 : tensor<1x2x4x4xf32>) {
  ^bb0(%i0: f32, %i1: f32, %o: f32):
    %x = arith.divf %i0, %i1 : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x4xf32>
  %e17 = tensor.empty() : tensor<1x2x4x8xf32>
  %c18 = arith.constant 0.0 : f32
  %f19 = linalg.fill ins(%c18 : f32) outs(%e17 : tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %g20 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%g16, %arg2 : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf16>) outs(%f19 : tensor<1x2x4x8xf32>) {
  ^bb0(%i0: f32, %i1: f16, %o: f32):
    %va = arith.extf %i1 : f16 to f32
    %m = arith.mulf %i0, %va : f32
    %x = arith.addf %o, %m : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x8xf32>
  %e21 = tensor.empty() : tensor<1x2x4x8xf16>
  %g22 = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g20 : tensor<1x2x4x8xf32>) outs(%e21 : tensor<1x2x4x8xf16>) {
  ^bb0(%i0: f32, %o: f16):
    %x = arith.truncf %i0 : f32 to f16
    linalg.yield %x : f16
  } -> tensor<1x2x4x8xf16>
  return %g22 : tensor<1x2x4x8xf16>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#mq = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#mk = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#ms = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#mp = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#mv = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#mo = affine_map<(b, h, q, e, k) -> (b, h, q, e)>
// Gemma 2's softcap around a scale, with a sliding window written as two
// comparisons: softcap(2) of S * 0.25, causal with window(3, -1).
// CHECK-LABEL: func.func @softcap_window
// CHECK: fa.attention ins(%arg0, %arg1, %arg2 : {{.*}}) outs({{.*}}) causal(top_left) window(3, -1) softcap(2.000000e+00) scale(2.500000e-01)
// CHECK-NOT: math.tanh
// NOMASK-LABEL: func.func @softcap_window
// NOMASK-NOT: fa.attention
func.func @softcap_window(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>) -> tensor<2x3x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x3x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %s = linalg.generic {indexing_maps = [#mq, #mk, #ms], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>) outs(%sf : tensor<2x3x8x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x12xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.constant 0.25 : f32
    %two = arith.constant 2.0 : f32
    %xs = arith.mulf %in, %c : f32
    %xd = arith.divf %xs, %two : f32
    %t = math.tanh %xd : f32
    %xc = arith.mulf %t, %two : f32
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %c3 = arith.constant 3 : index
    %lo = arith.addi %ik, %c3 : index
    %k1 = arith.cmpi sle, %ik, %iq : index
    %k2 = arith.cmpi sge, %lo, %iq : index
    %keep = arith.andi %k1, %k2 : i1
    %y = arith.select %keep, %xc, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = linalg.generic {indexing_maps = [#mp, #mv, #mo], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x8x12xf32>, tensor<2x3x12x8xf32>) outs(%of : tensor<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}


// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#mq = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#mk = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#ms = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#mp = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#mv = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#mo = affine_map<(b, h, q, e, k) -> (b, h, q, e)>
// ALiBi with [B, H] slopes: -slopes[b, h] * |q - k| through math.absi is
// the alibi operand itself; no causality, no offset.
// CHECK-LABEL: func.func @alibi_batch_head
// CHECK-SAME: %[[SL:[a-z0-9]+]]: tensor<2x3xf32>
// CHECK: fa.attention ins(%arg0, %arg1, %arg2 : {{.*}}) alibi(%[[SL]] : tensor<2x3xf32>) outs({{.*}}) scale(1.000000e+00)
// CHECK-NOT: q_offset
// NOMASK-LABEL: func.func @alibi_batch_head
// NOMASK: fa.attention {{.*}} alibi(
func.func @alibi_batch_head(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>, %slopes: tensor<2x3xf32>) -> tensor<2x3x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x3x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %s = linalg.generic {indexing_maps = [#mq, #mk, #ms], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>) outs(%sf : tensor<2x3x8x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x12xf32>
  %x = linalg.generic {indexing_maps = [#id, affine_map<(b, h, q, k) -> (b, h)>, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %slopes : tensor<2x3x8x12xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3x8x12xf32>) {
  ^bb0(%in: f32, %sl: f32, %out: f32):
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %d = arith.subi %iq, %ik : index
    %di = arith.index_cast %d : index to i32
    %a = math.absi %di : i32
    %af = arith.sitofp %a : i32 to f32
    %ns = arith.negf %sl : f32
    %bias = arith.mulf %ns, %af : f32
    %y = arith.addf %in, %bias : f32
    linalg.yield %y : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = linalg.generic {indexing_maps = [#mp, #mv, #mo], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x8x12xf32>, tensor<2x3x12x8xf32>) outs(%of : tensor<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}


// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#mq = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#mk = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#ms = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#mp = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#mv = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#mo = affine_map<(b, h, q, e, k) -> (b, h, q, e)>
// An ALiBi bias added before the scale, at distance |q + 2 - k|: the slopes
// are built (scaled by 0.5), the offset is q_offset 2.
// CHECK-LABEL: func.func @alibi_scaled_offset
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C:.*]] = arith.constant -5.000000e-01 : f32
// CHECK: %[[G:.*]] = linalg.generic {{.*}} ins(%arg3 : tensor<3xf32>) outs(%{{.*}} : tensor<1x3x1x1xf32>)
// CHECK: arith.mulf %[[C]]
// CHECK: %[[S:.*]] = tensor.collapse_shape %[[G]] {{\[\[}}0, 1, 2, 3]] : tensor<1x3x1x1xf32> into tensor<3xf32>
// CHECK: fa.attention ins(%arg0, %arg1, %arg2 : {{.*}}) alibi(%[[S]] : tensor<3xf32>) q_offset(%[[C2]]) outs({{.*}}) scale(5.000000e-01)
func.func @alibi_scaled_offset(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>, %slopes: tensor<3xf32>) -> tensor<2x3x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x3x8x12xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %s = linalg.generic {indexing_maps = [#mq, #mk, #ms], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x3x8x16xf32>, tensor<2x3x12x16xf32>) outs(%sf : tensor<2x3x8x12xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x12xf32>
  %x = linalg.generic {indexing_maps = [#id, affine_map<(b, h, q, k) -> (h)>, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s, %slopes : tensor<2x3x8x12xf32>, tensor<3xf32>) outs(%e : tensor<2x3x8x12xf32>) {
  ^bb0(%in: f32, %sl: f32, %out: f32):
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %half = arith.constant 0.5 : f32
    %p = arith.addi %iq, %c2 : index
    %d = arith.subi %p, %ik : index
    %di = arith.index_cast %d : index to i64
    %df = arith.sitofp %di : i64 to f32
    %a = math.absf %df : f32
    %bias = arith.mulf %a, %sl : f32
    %y0 = arith.addf %in, %bias : f32
    %y = arith.mulf %y0, %half : f32
    linalg.yield %y : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = linalg.generic {indexing_maps = [#mp, #mv, #mo], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x8x12xf32>, tensor<2x3x12x8xf32>) outs(%of : tensor<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}
