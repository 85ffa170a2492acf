// RUN: fa-opt %s -split-input-file -fa-raise-attention=report-missed -verify-diagnostics | FileCheck %s

// Near misses: attention written the way the front ends write it (contraction
// generics, an unfused softmax chain, masks from index comparisons) with one
// thing that makes it something fa.attention does not compute, or does not
// compute as it first looks (index arithmetic that wraps, a fill that a
// later scale makes an ordinary value). Each is left alone with a remark
// that says why, or raised as exactly what it computes (a boolean mask
// instead of a causal alignment). The softmax of a chain that is still a
// softmax is raised to fa.softmax on its own.


#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// The control: a causal (top-left) attention that is raised.
// CHECK-LABEL: func.func @control
// CHECK: fa.attention {{.*}} causal(top_left) scale(2.500000e-01)
// CHECK-NOT: linalg.generic
func.func @control(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %keep = arith.cmpi ule, %ik, %iq : index
    %y = arith.select %keep, %in, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// The max and the sum reduce over the queries (dim 2), not the keys.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT: fa.attention
// CHECK: fa.softmax {{.*}} dimension(2)
func.func @softmax_over_queries(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#idq, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#idq, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  // expected-remark @+1 {{attention not raised: the softmax reduces over dim 2 of P, the P.V contraction over dim 3}}
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// The causal mask is applied to P (zeroing probabilities), not to S.
// CHECK-LABEL: func.func @mask_after_softmax
// CHECK-NOT: fa.attention
// CHECK: fa.softmax {{.*}} dimension(3)
func.func @mask_after_softmax(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p0 : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %keep = arith.cmpi ule, %ik, %iq : index
    %y = arith.select %keep, %in, %zero : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  // expected-remark @+1 {{attention not raised: P applies arith.select to the softmax before the P.V contraction}}
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// S is also returned.
// CHECK-LABEL: func.func @extra_use_of_s
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @extra_use_of_s(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  // expected-remark @+1 {{attention not raised: the scores S = Q.K^T (linalg.generic) are also used by func.return}}
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o, %s : tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// P is also returned (the softmax is raised alone first).
// CHECK-LABEL: func.func @extra_use_of_p
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @extra_use_of_p(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  // expected-remark @+1 {{attention not raised: a value computed from S (fa.softmax) is also used by func.return}}
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o, %p0 : tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// The scale is a function argument.
// CHECK-LABEL: func.func @non_constant_scale
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @non_constant_scale(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %scale: f32) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %scale : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  // expected-remark @+1 {{attention not raised: the scale is not a constant}}
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// A causal comparison k <= q + 3 is neither top_left (k <= q) nor bottom_right
// (k <= q + Nk - Nq = q): top_left causality with q_offset 3, no mask.
// CHECK-LABEL: func.func @causal_offset
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: fa.attention {{.*}} q_offset(%[[C3]]) outs({{.*}}) causal(top_left)
// CHECK-NOT: mask(
func.func @causal_offset(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %c3 = arith.constant 3 : index
    %iq3 = arith.addi %iq, %c3 : index
    %keep = arith.cmpi ule, %ik, %iq3 : index
    %y = arith.select %keep, %in, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#idq = affine_map<(b, h, k, q) -> (b, h, q, k)>
#row = affine_map<(b, h, q, k) -> (b, h, q)>
#col = affine_map<(b, h, q, k) -> (b, h, k)>
#qk_q = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#qk_k = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#qk_s = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#pv_p = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#pv_v = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#pv_o = affine_map<(b, h, q, e, k) -> (b, h, q, e)>

// The mask condition compares the scores themselves.
// CHECK-LABEL: func.func @mask_from_scores
// CHECK-NOT: fa.attention
// CHECK: fa.softmax
func.func @mask_from_scores(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32
  %e = tensor.empty() : tensor<1x2x8x8xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %s = linalg.generic {indexing_maps = [#qk_q, #qk_k, #qk_s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%sf : tensor<1x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0 : tensor<1x2x8x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %keep = arith.cmpf ogt, %in, %zero : f32
    %y = arith.select %keep, %in, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %re = tensor.empty() : tensor<1x2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x2x8x8xf32>) outs(%mi : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.maximumf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %y = math.exp %d : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %si = linalg.fill ins(%zero : f32) outs(%re : tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x8x8xf32>) outs(%si : tensor<1x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.addf %in, %out : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8xf32>
  %p0 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x8x8xf32>, tensor<1x2x8xf32>) outs(%e : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %out: f32):
    %y = arith.divf %in, %sm : f32
    linalg.yield %y : f32
  } -> tensor<1x2x8x8xf32>
  %oe = tensor.empty() : tensor<1x2x8x16xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  // expected-remark @+1 {{attention not raised: a mask condition depends on the scores}}
  %o = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p0, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) outs(%of : tensor<1x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

// K has 2 heads and V 4, both read at head h floordiv 2: V is not an Hkv-head
// operand (fa.attention needs K and V with the same heads).
// Found by hostile testing.
// CHECK-LABEL: func.func @gqa_v_heads
// CHECK-NOT: fa.attention
func.func @gqa_v_heads(%Q: tensor<2x4x8x16xf32>, %K: tensor<2x2x8x16xf32>, %V: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %kbe = tensor.empty() : tensor<2x4x8x16xf32>
  %KB = linalg.generic {indexing_maps = [affine_map<(b, h, n, d) -> (b, h floordiv 2, n, d)>, affine_map<(b, h, n, d) -> (b, h, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%K : tensor<2x2x8x16xf32>) outs(%kbe : tensor<2x4x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x4x8x16xf32>
  %vbe = tensor.empty() : tensor<2x4x8x16xf32>
  %VB = linalg.generic {indexing_maps = [affine_map<(b, h, n, d) -> (b, h floordiv 2, n, d)>, affine_map<(b, h, n, d) -> (b, h, n, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%V : tensor<2x4x8x16xf32>) outs(%vbe : tensor<2x4x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x4x8x16xf32>
  %se = tensor.empty() : tensor<2x4x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %KB : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) outs(%sz : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<2x4x8x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %x = arith.mulf %s, %c : f32
    linalg.yield %x : f32
  } -> tensor<2x4x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<2x4x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<2x4x8x8xf32>) outs(%rf : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2x4x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<2x4x8x8xf32>) outs(%rz : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<2x4x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<2x4x8x8xf32>
  %oe = tensor.empty() : tensor<2x4x8x16xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // expected-remark @+1 {{attention not raised: V is read in a way fa.attention cannot express (not a permutation of its dims)}}
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %VB : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%oz : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x16xf32>
  return %O : tensor<2x4x8x16xf32>
}

// -----

// The sum's body reads the running value of the reduction's other output,
// not its init: not a softmax sum.
// Found by hostile testing.
// CHECK-LABEL: func.func @reduce_reads_other_acc
// CHECK-NOT: fa.attention
func.func @reduce_reads_other_acc(%Q: tensor<1x1x4x4xf32>, %K: tensor<1x1x4x4xf32>, %V: tensor<1x1x4x4xf32>) -> (tensor<1x1x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<1x1x4x4xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) outs(%sz : tensor<1x1x4x4xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x4x4xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<1x1x4x4xf32>) outs(%se : tensor<1x1x4x4xf32>) {
  ^bb0(%s: f32, %o: f32):
    %x = arith.mulf %s, %c : f32
    linalg.yield %x : f32
  } -> tensor<1x1x4x4xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<1x1x4xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<1x1x4x4xf32>) outs(%rf : tensor<1x1x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x1x4xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<1x1x4x4xf32>, tensor<1x1x4xf32>) outs(%se : tensor<1x1x4x4xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<1x1x4x4xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %rn = linalg.fill ins(%ninf : f32) outs(%re : tensor<1x1x4xf32>) -> tensor<1x1x4xf32>
  %cst5 = arith.constant dense<5.0> : tensor<1x1x4x4xf32>
  %SM, %AUX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E, %cst5 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) outs(%rz, %rn : tensor<1x1x4xf32>, tensor<1x1x4xf32>) {
  ^bb0(%in: f32, %bb: f32, %acc: f32, %acc1: f32):
    %u = arith.maximumf %in, %acc1 : f32
    %t = arith.addf %u, %acc : f32
    %m1 = arith.maximumf %acc1, %bb : f32
    linalg.yield %t, %m1 : f32, f32
  } -> (tensor<1x1x4xf32>, tensor<1x1x4xf32>)
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<1x1x4x4xf32>, tensor<1x1x4xf32>) outs(%se : tensor<1x1x4x4xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<1x1x4x4xf32>
  %oe = tensor.empty() : tensor<1x1x4x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  // expected-remark @+1 {{attention not raised: a reduction body reads an accumulator other than its own}}
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) outs(%oz : tensor<1x1x4x4xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x4x4xf32>
  return %O : tensor<1x1x4x4xf32>
}

// -----

// A -3e38 fill scaled by 1e-38 afterwards is an ordinary score of -3, not a
// mask.
// Found by hostile testing.
// CHECK-LABEL: func.func @finite_fill_tiny_scale
// CHECK-NOT: fa.attention
func.func @finite_fill_tiny_scale(%Q: tensor<2x4x8x16xf32>, %K: tensor<2x4x8x16xf32>, %V: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 1.0e-38 : f32
  %ff = arith.constant -3.0e38 : f32
  %se = tensor.empty() : tensor<2x4x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) outs(%sz : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<2x4x8x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
%cnd = arith.cmpi sle, %ki, %qi : index
    %sl = arith.select %cnd, %s, %ff : f32
    %x = arith.mulf %sl, %c : f32
    linalg.yield %x : f32
  } -> tensor<2x4x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<2x4x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<2x4x8x8xf32>) outs(%rf : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2x4x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<2x4x8x8xf32>) outs(%rz : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<2x4x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<2x4x8x8xf32>
  %oe = tensor.empty() : tensor<2x4x8x16xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // expected-remark @+1 {{attention not raised: a select on the scores fills with neither -inf nor a value <= -1e4}}
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%oz : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x16xf32>
  return %O : tensor<2x4x8x16xf32>
}

// -----

// k <= q compared after index_cast to i8 with N = 200: the indices wrap, so it
// is not causal(top_left); it is raised as the boolean mask it computes.
// Found by hostile testing.
// CHECK-LABEL: func.func @causal_i8_wrap
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: causal
func.func @causal_i8_wrap(%Q: tensor<1x1x200x4xf32>, %K: tensor<1x1x200x4xf32>, %V: tensor<1x1x200x4xf32>) -> (tensor<1x1x200x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<1x1x200x200xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x1x200x200xf32>) -> tensor<1x1x200x200xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<1x1x200x4xf32>, tensor<1x1x200x4xf32>) outs(%sz : tensor<1x1x200x200xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x200x200xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<1x1x200x200xf32>) outs(%se : tensor<1x1x200x200xf32>) {
  ^bb0(%s: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
%qi8 = arith.index_cast %qi : index to i8
    %ki8 = arith.index_cast %ki : index to i8
    %cnd = arith.cmpi sle, %ki8, %qi8 : i8
    %sc = arith.mulf %s, %c : f32
    %x = arith.select %cnd, %sc, %ninf : f32
    linalg.yield %x : f32
  } -> tensor<1x1x200x200xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<1x1x200xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<1x1x200xf32>) -> tensor<1x1x200xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<1x1x200x200xf32>) outs(%rf : tensor<1x1x200xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x1x200xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<1x1x200x200xf32>, tensor<1x1x200xf32>) outs(%se : tensor<1x1x200x200xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<1x1x200x200xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<1x1x200xf32>) -> tensor<1x1x200xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<1x1x200x200xf32>) outs(%rz : tensor<1x1x200xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<1x1x200xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<1x1x200x200xf32>, tensor<1x1x200xf32>) outs(%se : tensor<1x1x200x200xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<1x1x200x200xf32>
  %oe = tensor.empty() : tensor<1x1x200x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x1x200x4xf32>) -> tensor<1x1x200x4xf32>
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<1x1x200x200xf32>, tensor<1x1x200x4xf32>) outs(%oz : tensor<1x1x200x4xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x200x4xf32>
  return %O : tensor<1x1x200x4xf32>
}

// -----

// extui((q - k) : i32) >= 0 is always true (a zero extension is never
// negative): not causal(top_left); raised as the boolean mask it computes.
// Found by hostile testing.
// CHECK-LABEL: func.func @causal_extui_wrap
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: causal
func.func @causal_extui_wrap(%Q: tensor<1x1x8x4xf32>, %K: tensor<1x1x8x4xf32>, %V: tensor<1x1x8x4xf32>) -> (tensor<1x1x8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<1x1x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) outs(%sz : tensor<1x1x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<1x1x8x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
    %q32 = arith.index_cast %qi : index to i32
    %k32 = arith.index_cast %ki : index to i32
    %d32 = arith.subi %q32, %k32 : i32
    %d64 = arith.extui %d32 : i32 to i64
    %z = arith.constant 0 : i64
    %cnd = arith.cmpi sge, %d64, %z : i64
    %sc = arith.mulf %s, %c : f32
    %x = arith.select %cnd, %sc, %ninf : f32
    linalg.yield %x : f32
  } -> tensor<1x1x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<1x1x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<1x1x8x8xf32>) outs(%rf : tensor<1x1x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x1x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<1x1x8x8xf32>, tensor<1x1x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<1x1x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<1x1x8x8xf32>) outs(%rz : tensor<1x1x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<1x1x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<1x1x8x8xf32>, tensor<1x1x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<1x1x8x8xf32>
  %oe = tensor.empty() : tensor<1x1x8x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x1x8x4xf32>) -> tensor<1x1x8x4xf32>
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<1x1x8x8xf32>, tensor<1x1x8x4xf32>) outs(%oz : tensor<1x1x8x4xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x8x4xf32>
  return %O : tensor<1x1x8x4xf32>
}

// -----

// The softmax of x[n:2n], read through an expand_shape with a dynamic inner
// dim at row 1: raised as fa.softmax of that row (the copy), not of x.
// Found by hostile testing.
// CHECK-LABEL: func.func @expand_dynamic_inner
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK: fa.softmax ins(%[[Y]] : tensor<?xf32>)
func.func @expand_dynamic_inner(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %len = tensor.dim %x, %c0 : tensor<?xf32>
  %n = arith.divui %len, %c2 : index
  %e = tensor.expand_shape %x [[0, 1]] output_shape [2, %n] : tensor<?xf32> into tensor<2x?xf32>
  %ye = tensor.empty(%n) : tensor<?xf32>
  %Y = linalg.generic {indexing_maps = [affine_map<(d0) -> (1, d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%e : tensor<2x?xf32>) outs(%ye : tensor<?xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<?xf32>
  %r0 = tensor.empty() : tensor<f32>
  %rm = linalg.fill ins(%ninf : f32) outs(%r0 : tensor<f32>) -> tensor<f32>
  %M = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%Y : tensor<?xf32>) outs(%rm : tensor<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  %E = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%Y, %M : tensor<?xf32>, tensor<f32>) outs(%ye : tensor<?xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %ex = math.exp %d : f32
    linalg.yield %ex : f32
  } -> tensor<?xf32>
  %rz = linalg.fill ins(%zero : f32) outs(%r0 : tensor<f32>) -> tensor<f32>
  %SM = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%E : tensor<?xf32>) outs(%rz : tensor<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  %P = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%E, %SM : tensor<?xf32>, tensor<f32>) outs(%ye : tensor<?xf32>) {
  ^bb0(%in: f32, %s: f32, %o: f32):
    %p = arith.divf %in, %s : f32
    linalg.yield %p : f32
  } -> tensor<?xf32>
  return %P : tensor<?xf32>
}

// -----

// (q - k) * 2^62 >= 0 in index wraps around in 64 bits: not causal(top_left);
// raised as the boolean mask it computes.
// Found by hostile testing.
// CHECK-LABEL: func.func @wrap_index_mul
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: causal
func.func @wrap_index_mul(%Q: tensor<1x1x8x16xf32>, %K: tensor<1x1x8x16xf32>, %V: tensor<1x1x8x16xf32>) -> (tensor<1x1x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<1x1x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) outs(%sz : tensor<1x1x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<1x1x8x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
%d = arith.subi %qi, %ki : index
    %big = arith.constant 4611686018427387904 : index
    %m = arith.muli %d, %big : index
    %z = arith.constant 0 : index
    %cnd = arith.cmpi sge, %m, %z : index
    %sc = arith.mulf %s, %c : f32
    %x = arith.select %cnd, %sc, %ninf : f32
    linalg.yield %x : f32
  } -> tensor<1x1x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<1x1x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<1x1x8x8xf32>) outs(%rf : tensor<1x1x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x1x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<1x1x8x8xf32>, tensor<1x1x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<1x1x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<1x1x8x8xf32>) outs(%rz : tensor<1x1x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<1x1x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<1x1x8x8xf32>, tensor<1x1x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<1x1x8x8xf32>
  %oe = tensor.empty() : tensor<1x1x8x16xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<1x1x8x8xf32>, tensor<1x1x8x16xf32>) outs(%oz : tensor<1x1x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x8x16xf32>
  return %O : tensor<1x1x8x16xf32>
}

// -----

// k + (2^63 - 4) <= q + (2^63 - 4) in index wraps around: not causal(top_left);
// raised as the boolean mask it computes.
// Found by hostile testing.
// CHECK-LABEL: func.func @wrap_index_add
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: causal
func.func @wrap_index_add(%Q: tensor<1x1x8x16xf32>, %K: tensor<1x1x8x16xf32>, %V: tensor<1x1x8x16xf32>) -> (tensor<1x1x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<1x1x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) outs(%sz : tensor<1x1x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<1x1x8x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
%big = arith.constant 9223372036854775804 : index
    %kb = arith.addi %ki, %big : index
    %qb = arith.addi %qi, %big : index
    %cnd = arith.cmpi sle, %kb, %qb : index
    %sc = arith.mulf %s, %c : f32
    %x = arith.select %cnd, %sc, %ninf : f32
    linalg.yield %x : f32
  } -> tensor<1x1x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<1x1x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<1x1x8x8xf32>) outs(%rf : tensor<1x1x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x1x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<1x1x8x8xf32>, tensor<1x1x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<1x1x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<1x1x8x8xf32>) outs(%rz : tensor<1x1x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<1x1x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<1x1x8x8xf32>, tensor<1x1x8xf32>) outs(%se : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<1x1x8x8xf32>
  %oe = tensor.empty() : tensor<1x1x8x16xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<1x1x8x8xf32>, tensor<1x1x8x16xf32>) outs(%oz : tensor<1x1x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1x8x16xf32>
  return %O : tensor<1x1x8x16xf32>
}

// -----

// A softmax over a dim of size 1 (all ones) is not a softmax over another
// dim: its reduction reads index 0 whatever dim is substituted, so the sizes
// decide.
// Found by hostile testing.
// CHECK-LABEL: func.func @softmax_over_unit_dim
// CHECK-NOT: fa.softmax
func.func @softmax_over_unit_dim(%arg0: tensor<4x1x8xf32>) -> (tensor<4x1x8xf32>) {
  %e1 = tensor.empty() : tensor<4x8xf32>
  %c0 = arith.constant 0xFF800000 : f32
  %f2 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%arg0 : tensor<4x1x8xf32>) outs(%f2 : tensor<4x8xf32>) {
  ^bb0(%a0: f32, %o: f32):
    %r = arith.maximumf %a0, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e4 = tensor.empty() : tensor<4x1x8xf32>
  %g5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %g3 : tensor<4x1x8xf32>, tensor<4x8xf32>) outs(%e4 : tensor<4x1x8xf32>) {
  ^bb0(%a0: f32, %a1: f32, %o: f32):
    %d = arith.subf %a0, %a1 : f32
    %x = math.exp %d : f32
    linalg.yield %x : f32
  } -> tensor<4x1x8xf32>
  %e6 = tensor.empty() : tensor<4x8xf32>
  %c1 = arith.constant 0.0 : f32
  %f7 = linalg.fill ins(%c1 : f32) outs(%e6 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%g5 : tensor<4x1x8xf32>) outs(%f7 : tensor<4x8xf32>) {
  ^bb0(%a0: f32, %o: f32):
    %r = arith.addf %a0, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e9 = tensor.empty() : tensor<4x1x8xf32>
  // expected-remark @+1 {{softmax not raised: the softmax reduces over a dim that is not the candidate dim's}}
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%g5, %g8 : tensor<4x1x8xf32>, tensor<4x8xf32>) outs(%e9 : tensor<4x1x8xf32>) {
  ^bb0(%a0: f32, %a1: f32, %o: f32):
    %d = arith.divf %a0, %a1 : f32
    linalg.yield %d : f32
  } -> tensor<4x1x8xf32>
  return %g10 : tensor<4x1x8xf32>
}

// -----

// A bias added after a finite (-1e4) fill can bring the masked keys back: not
// raised.
// Found by hostile testing.
// CHECK-LABEL: func.func @fill_then_bias
// CHECK-NOT: fa.attention
func.func @fill_then_bias(%Q: tensor<2x4x8x16xf32>, %K: tensor<2x4x8x16xf32>, %V: tensor<2x4x8x16xf32>, %bias: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<2x4x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) outs(%sz : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S, %bias : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%s: f32, %bi: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
%cnd = arith.cmpi sle, %ki, %qi : index
    %f = arith.constant -1.0e4 : f32
    %sc = arith.mulf %s, %c : f32
    %y = arith.select %cnd, %sc, %f : f32
    %x = arith.addf %y, %bi : f32
    linalg.yield %x : f32
  } -> tensor<2x4x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<2x4x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<2x4x8x8xf32>) outs(%rf : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2x4x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<2x4x8x8xf32>) outs(%rz : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<2x4x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<2x4x8x8xf32>
  %oe = tensor.empty() : tensor<2x4x8x16xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // expected-remark @+1 {{attention not raised: a bias is added after a finite mask fill, which it can undo}}
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%oz : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x16xf32>
  return %O : tensor<2x4x8x16xf32>
}

// -----

// An index DAG of 18 levels in the score body (each op reading the previous
// twice) is a tree of 2^18 nodes: refused quickly, not expanded.
// Found by hostile testing.
// CHECK-LABEL: func.func @body_dag
// CHECK-NOT: fa.attention
func.func @body_dag(%Q: tensor<2x4x8x16xf32>, %K: tensor<2x4x8x16xf32>, %V: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c = arith.constant 0.25 : f32

  %se = tensor.empty() : tensor<2x4x8x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %S = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, d) -> (b, h, q, d)>, affine_map<(b, h, q, k, d) -> (b, h, k, d)>, affine_map<(b, h, q, k, d) -> (b, h, q, k)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%Q, %K : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) outs(%sz : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b2: f32, %acc: f32):
    
    
    %m = arith.mulf %a, %b2 : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x8xf32>
  %X = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%S : tensor<2x4x8x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %qi = linalg.index 2 : index
    %ki = linalg.index 3 : index
    %a0 = arith.addi %qi, %qi : index
    %a1 = arith.minsi %a0, %a0 : index
    %a2 = arith.minsi %a1, %a1 : index
    %a3 = arith.minsi %a2, %a2 : index
    %a4 = arith.minsi %a3, %a3 : index
    %a5 = arith.minsi %a4, %a4 : index
    %a6 = arith.minsi %a5, %a5 : index
    %a7 = arith.minsi %a6, %a6 : index
    %a8 = arith.minsi %a7, %a7 : index
    %a9 = arith.minsi %a8, %a8 : index
    %a10 = arith.minsi %a9, %a9 : index
    %a11 = arith.minsi %a10, %a10 : index
    %a12 = arith.minsi %a11, %a11 : index
    %a13 = arith.minsi %a12, %a12 : index
    %a14 = arith.minsi %a13, %a13 : index
    %a15 = arith.minsi %a14, %a14 : index
    %a16 = arith.minsi %a15, %a15 : index
    %a17 = arith.minsi %a16, %a16 : index
    %cnd = arith.cmpi sle, %ki, %a17 : index
    %sc = arith.mulf %s, %c : f32
    %x = arith.select %cnd, %sc, %ninf : f32
    linalg.yield %x : f32
  } -> tensor<2x4x8x8xf32>
  %mxinit = arith.constant 0xFF800000 : f32
  %re = tensor.empty() : tensor<2x4x8xf32>
  %rf = linalg.fill ins(%mxinit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %MX = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%X : tensor<2x4x8x8xf32>) outs(%rf : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8xf32>
  %E = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%X, %MX : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<2x4x8x8xf32>
  %suminit = arith.constant 0.0 : f32
  %rz = linalg.fill ins(%suminit : f32) outs(%re : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %SM = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%E : tensor<2x4x8x8xf32>) outs(%rz : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.addf %in, %acc : f32
    linalg.yield %t : f32
  } -> tensor<2x4x8xf32>
  %P = linalg.generic {indexing_maps = [affine_map<(b, h, q, k) -> (b, h, q, k)>, affine_map<(b, h, q, k) -> (b, h, q)>, affine_map<(b, h, q, k) -> (b, h, q, k)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%E, %SM : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%se : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %p = arith.divf %in, %sm : f32
    linalg.yield %p : f32
  } -> tensor<2x4x8x8xf32>
  %oe = tensor.empty() : tensor<2x4x8x16xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // expected-remark @+1 {{attention not raised: the chain is too large to analyze}}
  %O = linalg.generic {indexing_maps = [affine_map<(b, h, q, k, e) -> (b, h, q, k)>, affine_map<(b, h, q, k, e) -> (b, h, k, e)>, affine_map<(b, h, q, k, e) -> (b, h, q, e)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%P, %V : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%oz : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    
    %m = arith.mulf %a, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8x16xf32>
  return %O : tensor<2x4x8x16xf32>
}

// -----

// Nk = 1 with S written as K.Q^T: neither the attention nor its [.., 6, 1]
// softmax is raised over a wrong dim.
// Found by hostile testing.
// CHECK-LABEL: func.func @unit_key_dim_swapped
// CHECK-NOT: fa.attention
// CHECK-NOT: fa.softmax
func.func @unit_key_dim_swapped(%arg0: tensor<2x2x6x8xf32>, %arg1: tensor<2x2x1x8xf32>, %arg2: tensor<2x2x1x4xf32>) -> (tensor<2x2x6x4xf32>) {
  %sc = arith.constant 0.3 : f32
  %fl = arith.constant 0xFF800000 : f32
  %e1 = tensor.empty() : tensor<2x2x6x1xf32>
  %c0 = arith.constant 0.0 : f32
  %f2 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<2x2x6x1xf32>) -> tensor<2x2x6x1xf32>
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%arg1, %arg0 : tensor<2x2x1x8xf32>, tensor<2x2x6x8xf32>) outs(%f2 : tensor<2x2x6x1xf32>) {
  ^bb0(%a0: f32, %a1: f32, %o: f32):
    %m = arith.mulf %a0, %a1 : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x6x1xf32>
  %e4 = tensor.empty() : tensor<2x2x6x1xf32>
  %g5 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g3 : tensor<2x2x6x1xf32>) outs(%e4 : tensor<2x2x6x1xf32>) {
  ^bb0(%a0: f32, %o: f32):
    %m = arith.mulf %a0, %sc : f32
    linalg.yield %m : f32
  } -> tensor<2x2x6x1xf32>
  %e6 = tensor.empty() : tensor<2x2x6xf32>
  %c1 = arith.constant 0xFF800000 : f32
  %f7 = linalg.fill ins(%c1 : f32) outs(%e6 : tensor<2x2x6xf32>) -> tensor<2x2x6xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%g5 : tensor<2x2x6x1xf32>) outs(%f7 : tensor<2x2x6xf32>) {
  ^bb0(%a0: f32, %o: f32):
    %r = arith.maximumf %a0, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x2x6xf32>
  %e9 = tensor.empty() : tensor<2x2x6x1xf32>
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g5, %g8 : tensor<2x2x6x1xf32>, tensor<2x2x6xf32>) outs(%e9 : tensor<2x2x6x1xf32>) {
  ^bb0(%a0: f32, %a1: f32, %o: f32):
    %d = arith.subf %a0, %a1 : f32
    %x = math.exp %d : f32
    linalg.yield %x : f32
  } -> tensor<2x2x6x1xf32>
  %e11 = tensor.empty() : tensor<2x2x6xf32>
  %f12 = linalg.fill ins(%c0 : f32) outs(%e11 : tensor<2x2x6xf32>) -> tensor<2x2x6xf32>
  %g13 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%g10 : tensor<2x2x6x1xf32>) outs(%f12 : tensor<2x2x6xf32>) {
  ^bb0(%a0: f32, %o: f32):
    %r = arith.addf %a0, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x2x6xf32>
  %e14 = tensor.empty() : tensor<2x2x6x1xf32>
  // expected-remark @+1 {{softmax not raised: the softmax reduces over a dim that is not the candidate dim's}}
  %g15 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%g10, %g13 : tensor<2x2x6x1xf32>, tensor<2x2x6xf32>) outs(%e14 : tensor<2x2x6x1xf32>) {
  ^bb0(%a0: f32, %a1: f32, %o: f32):
    %d = arith.divf %a0, %a1 : f32
    linalg.yield %d : f32
  } -> tensor<2x2x6x1xf32>
  %e16 = tensor.empty() : tensor<2x2x6x4xf32>
  %f17 = linalg.fill ins(%c0 : f32) outs(%e16 : tensor<2x2x6x4xf32>) -> tensor<2x2x6x4xf32>
  // expected-remark @+1 {{attention not raised: dim 2 of the result is not a batch, query or value dim}}
  %g18 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%g15, %arg2 : tensor<2x2x6x1xf32>, tensor<2x2x1x4xf32>) outs(%f17 : tensor<2x2x6x4xf32>) {
  ^bb0(%a0: f32, %a1: f32, %o: f32):
    %m = arith.mulf %a0, %a1 : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x6x4xf32>
  return %g18 : tensor<2x2x6x4xf32>
}

// -----

#id = affine_map<(b, h, q, k) -> (b, h, q, k)>
#mq = affine_map<(b, h, q, k, d) -> (b, h, q, d)>
#mk = affine_map<(b, h, q, k, d) -> (b, h, k, d)>
#ms = affine_map<(b, h, q, k, d) -> (b, h, q, k)>
#mp = affine_map<(b, h, q, e, k) -> (b, h, q, k)>
#mv = affine_map<(b, h, q, e, k) -> (b, h, k, e)>
#mo = affine_map<(b, h, q, e, k) -> (b, h, q, e)>
// A mask applied inside the softcap's tanh: tanh(-inf) is -1, not a removed
// key, and fa.attention applies the softcap before every mask.
// CHECK-LABEL: func.func @softcap_masked_inside
// CHECK: math.tanh
// CHECK-NOT: fa.attention
func.func @softcap_masked_inside(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>) -> tensor<2x3x8x8xf32> {
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
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %keep = arith.cmpi sle, %ik, %iq : index
    %sel = arith.select %keep, %in, %ninf : f32
    %t = math.tanh %sel : f32
    linalg.yield %t : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // expected-remark @+1 {{attention not raised: the scores are biased or masked inside the softcap's tanh (fa.attention applies the softcap first)}}
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
// Two softcaps in a row are not one.
// CHECK-LABEL: func.func @softcap_twice
// CHECK: math.tanh
// CHECK: math.tanh
// CHECK-NOT: fa.attention
func.func @softcap_twice(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>) -> tensor<2x3x8x8xf32> {
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
    %t0 = math.tanh %in : f32
    %t = math.tanh %t0 : f32
    linalg.yield %t : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // expected-remark @+1 {{attention not raised: the scores go through two tanh}}
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
// k <= 2q compares the positions with a factor: not a window bound; a
// boolean mask, with a remark.
// CHECK-LABEL: func.func @index_compare_scaled
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: causal(
func.func @index_compare_scaled(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>) -> tensor<2x3x8x8xf32> {
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
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %q2 = arith.muli %iq, %c2 : index
    %keep = arith.cmpi sle, %ik, %q2 : index
    %y = arith.select %keep, %in, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // expected-remark @+1 {{attention raised with a mask: an index comparison of the query and key positions is not a bound k <= q + c or k >= q + c; it is raised as a boolean mask}}
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
// -slope * |q - 2k| is not ALiBi's distance: an additive mask, with a
// remark.
// CHECK-LABEL: func.func @alibi_scaled_key
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: alibi(
func.func @alibi_scaled_key(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>, %slopes: tensor<3xf32>) -> tensor<2x3x8x8xf32> {
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
    %k2 = arith.muli %ik, %c2 : index
    %d = arith.subi %iq, %k2 : index
    %di = arith.index_cast %d : index to i32
    %a = math.absi %di : i32
    %af = arith.sitofp %a : i32 to f32
    %bias = arith.mulf %af, %sl : f32
    %y = arith.subf %in, %bias : f32
    linalg.yield %y : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // expected-remark @+1 {{attention raised with a mask: a bias computed from the query and key positions is not ALiBi's -slope * |q + c - k|; it is raised as an additive mask}}
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
// Bounds that keep no key (k <= q - 2 and k >= q + 1) are not a window:
// a boolean mask, with a remark.
// CHECK-LABEL: func.func @window_empty
// CHECK: fa.attention {{.*}} mask(
// CHECK-NOT: window(
func.func @window_empty(%q: tensor<2x3x8x16xf32>, %k: tensor<2x3x12x16xf32>, %v: tensor<2x3x12x8xf32>) -> tensor<2x3x8x8xf32> {
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
    %iq = linalg.index 2 : index
    %ik = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %k2 = arith.addi %ik, %c2 : index
    %q1 = arith.addi %iq, %c1 : index
    %k1 = arith.cmpi sle, %k2, %iq : index
    %kk = arith.cmpi sge, %ik, %q1 : index
    %keep = arith.andi %k1, %kk : i1
    %y = arith.select %keep, %in, %ninf : f32
    linalg.yield %y : f32
  } -> tensor<2x3x8x12xf32>
  %p = linalg.softmax dimension(3) ins(%x : tensor<2x3x8x12xf32>) outs(%e : tensor<2x3x8x12xf32>) -> tensor<2x3x8x12xf32>
  %oe = tensor.empty() : tensor<2x3x8x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // expected-remark @+1 {{attention raised with a mask: the window bounds keep no key; they are raised as a boolean mask}}
  %o = linalg.generic {indexing_maps = [#mp, #mv, #mo], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x3x8x12xf32>, tensor<2x3x12x8xf32>) outs(%of : tensor<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}
