// RUN: fa-opt %s -split-input-file -fa-raise-attention=report-missed -verify-diagnostics | FileCheck %s

// Near misses: attention written the way the front ends write it (contraction
// generics, an unfused softmax chain, masks from index comparisons) with one
// thing that makes it something fa.attention does not compute. Each is left
// alone and report-missed says why. The softmax of a chain that is still a
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
// (k <= q + Nk - Nq = q): raised with the comparison as a boolean mask.
// CHECK-LABEL: func.func @causal_offset
// CHECK: %[[M:.*]] = linalg.generic
// CHECK: arith.addi
// CHECK: arith.cmpi ule
// CHECK: fa.attention {{.*}} mask(%[[M]] : tensor<1x1x8x8xi1>)
// CHECK-NOT: causal
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
  // expected-remark @+1 {{attention raised with a mask: the index comparison k <= q + 3 is neither top_left (k <= q) nor bottom_right (k <= q + 0); it is raised as a boolean mask}}
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
