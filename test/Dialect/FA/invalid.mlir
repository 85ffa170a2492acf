// RUN: fa-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of fa.attention and fa.softmax.

// Query must be rank 4.
func.func @f(%q: tensor<4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op query must have rank 4 [B, Hq, Nq, D], got rank 3 [4, 16, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Key must be rank 4.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op key must have rank 4 [B, Hkv, Nk, D], got rank 2 [32, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Value must be rank 4.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64x1xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op value must have rank 4 [B, Hkv, Nk, Dv], got rank 5}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64x1xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Output must be rank 4.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16xf32>) {
  // expected-error @+1 {{'fa.attention' op output must have rank 4 [B, Hq, Nq, Dv], got rank 3}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return
}

// -----

// Query element type must be f32, f16 or bf16.
func.func @f(%q: tensor<1x4x16x64xf64>, %k: tensor<1x2x32x64xf64>, %v: tensor<1x2x32x64xf64>, %o: tensor<1x4x16x64xf64>) {
  // expected-error @+1 {{'fa.attention' op query element type must be f32, f16 or bf16, got 'f64'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf64>, tensor<1x2x32x64xf64>, tensor<1x2x32x64xf64>) outs(%o : tensor<1x4x16x64xf64>) -> tensor<1x4x16x64xf64>
  return
}

// -----

// Integer query.
func.func @f(%q: tensor<1x4x16x64xi8>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op query element type must be f32, f16 or bf16, got 'i8'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xi8>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Key element type must match.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf16>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op key element type 'f16' must match query element type 'f32'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Value element type must match.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xbf16>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op value element type 'bf16' must match query element type 'f32'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xbf16>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Output element type must match.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf16>) {
  // expected-error @+1 {{'fa.attention' op output element type 'f16' must match query element type 'f32'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf16>) -> tensor<1x4x16x64xf16>
  return
}

// -----

// Head counts must be static.
func.func @f(%q: tensor<1x?x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x?x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op head counts must be static, got query [1, ?, 16, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x?x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x?x16x64xf32>) -> tensor<1x?x16x64xf32>
  return
}

// -----

// Head dim D must be static.
func.func @f(%q: tensor<1x4x16x?xf32>, %k: tensor<1x2x32x?xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op head dim D must be static, got query [1, 4, 16, ?] and key [1, 2, 32, ?]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x?xf32>, tensor<1x2x32x?xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Value head dim Dv must be static.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x?xf32>, %o: tensor<1x4x16x?xf32>) {
  // expected-error @+1 {{'fa.attention' op value head dim Dv must be static, got value [1, 2, 32, ?]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x?xf32>) outs(%o : tensor<1x4x16x?xf32>) -> tensor<1x4x16x?xf32>
  return
}

// -----

// Head dims must be positive.
func.func @f(%q: tensor<1x4x16x0xf32>, %k: tensor<1x2x32x0xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op head dims must be positive, got D = 0 and Dv = 64}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x0xf32>, tensor<1x2x32x0xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Batch dims must match.
func.func @f(%q: tensor<2x4x16x64xf32>, %k: tensor<3x2x32x64xf32>, %v: tensor<3x2x32x64xf32>, %o: tensor<2x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op batch dim B must match: query [2, 4, 16, 64], key [3, 2, 32, 64], value [3, 2, 32, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x16x64xf32>, tensor<3x2x32x64xf32>, tensor<3x2x32x64xf32>) outs(%o : tensor<2x4x16x64xf32>) -> tensor<2x4x16x64xf32>
  return
}

// -----

// Key and value head counts must match.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x4x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op key and value must have the same number of heads Hkv, got key [1, 2, 32, 64] and value [1, 4, 32, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x4x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Hq must be a multiple of Hkv.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x3x32x64xf32>, %v: tensor<1x3x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op query heads Hq = 4 must be a multiple of key/value heads Hkv = 3}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x3x32x64xf32>, tensor<1x3x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Query and key head dims must match.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x32xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op head dim D of query [1, 4, 16, 64] and key [1, 2, 32, 32] must match}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x32xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Key and value lengths must match.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x31x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op key length Nk of key [1, 2, 32, 64] and value [1, 2, 31, 64] must match}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x31x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Output shape must be [B, Hq, Nq, Dv].
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x32xf32>) {
  // expected-error @+1 {{'fa.attention' op output shape [1, 4, 16, 32] must be [B, Hq, Nq, Dv] = [1, 4, 16, 64] from query [1, 4, 16, 64] and value [1, 2, 32, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x32xf32>) -> tensor<1x4x16x32xf32>
  return
}

// -----

// Output Nq must match the query.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x17x64xf32>) {
  // expected-error @+1 {{'fa.attention' op output shape [1, 4, 17, 64] must be [B, Hq, Nq, Dv]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x17x64xf32>) -> tensor<1x4x17x64xf32>
  return
}

// -----

// Key lengths must be i32.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lens: tensor<1xi64>) {
  // expected-error @+1 {{'fa.attention' op kv_lens element type must be i32, got 'i64'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) kv_lens(%lens : tensor<1xi64>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Key lengths must be [B].
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'fa.attention' op kv_lens must have shape [B] with B from query [1, 4, 16, 64], got [2]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) kv_lens(%lens : tensor<2xi32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Key lengths must be rank 1.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lens: tensor<1x1xi32>) {
  // expected-error @+1 {{'fa.attention' op kv_lens must have shape [B] with B from query [1, 4, 16, 64], got [1, 1]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) kv_lens(%lens : tensor<1x1xi32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Mask element type must be i1 or float.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %m: tensor<1x4x16x32xi8>) {
  // expected-error @+1 {{'fa.attention' op mask element type must be i1 (true = attend) or f32, f16, bf16 (additive), got 'i8'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) mask(%m : tensor<1x4x16x32xi8>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Mask must be rank 4.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %m: tensor<16x32xi1>) {
  // expected-error @+1 {{'fa.attention' op mask must have rank 4 [B|1, Hq|1, Nq, Nk], got [16, 32]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) mask(%m : tensor<16x32xi1>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Mask heads must be Hq or 1 (not Hkv).
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %m: tensor<1x2x16x32xi1>) {
  // expected-error @+1 {{'fa.attention' op mask shape [1, 2, 16, 32] is not broadcastable to [B|1, Hq|1, Nq, Nk] with query [1, 4, 16, 64] and key [1, 2, 32, 64]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) mask(%m : tensor<1x2x16x32xi1>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Mask key dim must be Nk.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %m: tensor<1x1x16x16xf32>) {
  // expected-error @+1 {{'fa.attention' op mask shape [1, 1, 16, 16] is not broadcastable to [B|1, Hq|1, Nq, Nk]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) mask(%m : tensor<1x1x16x16xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Mask batch must be B or 1.
func.func @f(%q: tensor<3x4x16x64xf32>, %k: tensor<3x2x32x64xf32>, %v: tensor<3x2x32x64xf32>, %o: tensor<3x4x16x64xf32>, %m: tensor<2x1x16x32xi1>) {
  // expected-error @+1 {{'fa.attention' op mask shape [2, 1, 16, 32] is not broadcastable}}
  %r = fa.attention ins(%q, %k, %v : tensor<3x4x16x64xf32>, tensor<3x2x32x64xf32>, tensor<3x2x32x64xf32>) mask(%m : tensor<2x1x16x32xi1>) outs(%o : tensor<3x4x16x64xf32>) -> tensor<3x4x16x64xf32>
  return
}

// -----

// Scale must be finite.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op scale must be finite, got INF}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) scale(0x7F800000) -> tensor<1x4x16x64xf32>
  return
}

// -----

// LSE must be f32.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %l: tensor<1x4x16xf16>) {
  // expected-error @+1 {{'fa.attention' op lse element type must be f32, got 'f16'}}
  %r:2 = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>, %l : tensor<1x4x16xf16>) -> tensor<1x4x16x64xf32>, tensor<1x4x16xf16>
  return
}

// -----

// LSE must be [B, Hq, Nq].
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %l: tensor<1x2x16xf32>) {
  // expected-error @+1 {{'fa.attention' op lse shape [1, 2, 16] must be [B, Hq, Nq] from query [1, 4, 16, 64]}}
  %r:2 = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>, %l : tensor<1x2x16xf32>) -> tensor<1x4x16x64xf32>, tensor<1x2x16xf32>
  return
}

// -----

// LSE must be rank 3.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %l: tensor<1x4x16x1xf32>) {
  // expected-error @+1 {{'fa.attention' op lse shape [1, 4, 16, 1] must be [B, Hq, Nq]}}
  %r:2 = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>, %l : tensor<1x4x16x1xf32>) -> tensor<1x4x16x64xf32>, tensor<1x4x16x1xf32>
  return
}

// -----

// Result must match the output destination.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op result type 'tensor<1x4x16x64xf16>' must match output type 'tensor<1x4x16x64xf32>'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf16>
  return
}

// -----

// LSE result must match the LSE destination.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %l: tensor<1x4x16xf32>) {
  // expected-error @+1 {{'fa.attention' op lse result type 'tensor<1x4x?xf32>' must match lse type 'tensor<1x4x16xf32>'}}
  %r:2 = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>, %l : tensor<1x4x16xf32>) -> tensor<1x4x16x64xf32>, tensor<1x4x?xf32>
  return
}

// -----

// An LSE result without an LSE destination.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op an lse result requires an lse destination and vice versa}}
  %r:2 = "fa.attention"(%q, %q, %q, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4xf32>)
  return
}

// -----

// An unknown causal alignment.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{expected causal alignment 'none', 'top_left' or 'bottom_right', got 'sideways'}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) outs(%o : tensor<1x1x4x8xf32>) causal(sideways) -> tensor<1x1x4x8xf32>
  return
}

// -----

// An unknown causal enum value in generic form.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+2 {{expected ::mlir::fa::CausalKind to be one of: none, top_left, bottom_right}}
  // expected-error @+1 {{failed to parse FA_CausalAttr parameter 'value'}}
  %r = "fa.attention"(%q, %q, %q, %o) <{causal = #fa.causal<diagonal>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

// operandSegmentSizes may not move a required operand's value to another
// group (ODS checks only the sum and the optional groups): here `output`'s
// value is counted as a mod operand.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op operand 'output' is required: 'operandSegmentSizes' gives it 0 values, expected 1}}
  %r = "fa.attention"(%q, %q, %q, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0>}> ({}, {}) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

// The same for a leading operand: `value`'s group is empty, `key`'s holds two.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op operand 'key' is required: 'operandSegmentSizes' gives it 2 values, expected 1}}
  %r = "fa.attention"(%q, %q, %q, %o) <{operandSegmentSizes = array<i32: 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

// Memrefs are not accepted: the op is on tensors.
func.func @f(%q: memref<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op operand #0 must be ranked tensor of any type values, but got 'memref<1x1x4x8xf32>'}}
  %r = "fa.attention"(%q, %q, %q, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (memref<1x1x4x8xf32>, memref<1x1x4x8xf32>, memref<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

// Softmax: unsupported element type.
func.func @f(%x: tensor<4x8xf64>) {
  // expected-error @+1 {{'fa.softmax' op input element type must be f32, f16 or bf16, got 'f64'}}
  %r = fa.softmax ins(%x : tensor<4x8xf64>) outs(%x : tensor<4x8xf64>) dimension(1) -> tensor<4x8xf64>
  return
}

// -----

// Softmax: dimension out of range.
func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fa.softmax' op dimension 2 is out of range for input of rank 2 [4, 8]}}
  %r = fa.softmax ins(%x : tensor<4x8xf32>) outs(%x : tensor<4x8xf32>) dimension(2) -> tensor<4x8xf32>
  return
}

// -----

// Softmax: a 0-d tensor has no dimension to reduce.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{'fa.softmax' op input must have rank >= 1, got a 0-d tensor}}
  %r = fa.softmax ins(%x : tensor<f32>) outs(%x : tensor<f32>) dimension(0) -> tensor<f32>
  return
}

// -----

// Softmax: input, output and result types must match.
func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf16>) {
  // expected-error @+1 {{'fa.softmax' op failed to verify that all of {input, output, result} have same type}}
  %r = fa.softmax ins(%x : tensor<4x8xf32>) outs(%y : tensor<4x8xf16>) dimension(1) -> tensor<4x8xf32>
  return
}

// -----

// Softmax: a negative dimension.
func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'fa.softmax' op dimension -1 is out of range for input of rank 2 [4, 8]}}
  %r = fa.softmax ins(%x : tensor<4x8xf32>) outs(%x : tensor<4x8xf32>) dimension(-1) -> tensor<4x8xf32>
  return
}

// -----

// Window bounds below -1.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op window bounds must be in [-1, 2^31 - 1] (-1 = unbounded), got left = -2 and right = 0}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>)  outs(%o : tensor<1x4x16x64xf32>) window(-2, 0) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Softcap <= 0.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op softcap must be positive and finite, got 0}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>)  outs(%o : tensor<1x4x16x64xf32>) softcap(0.0) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Softcap negative.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op softcap must be positive and finite, got -3}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>)  outs(%o : tensor<1x4x16x64xf32>) softcap(-3.0) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Chunk <= 0.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op chunk size must be in [1, 2^31 - 1], got 0}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>)  outs(%o : tensor<1x4x16x64xf32>) chunk(0) -> tensor<1x4x16x64xf32>
  return
}

// -----

// ALiBi slopes of the wrong type.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<4xf16>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op alibi slopes element type must be f32, got 'f16'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) alibi(%x : tensor<4xf16>) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// ALiBi slopes per kv head instead of per query head.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<2xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op alibi slopes must have shape [Hq] or [B, Hq] = [1, 4] from query [1, 4, 16, 64], got [2]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) alibi(%x : tensor<2xf32>) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// ALiBi slopes with the wrong batch.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<3x4xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op alibi slopes must have shape [Hq] or [B, Hq] = [1, 4] from query [1, 4, 16, 64], got [3, 4]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) alibi(%x : tensor<3x4xf32>) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// Segment ids of the wrong type.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<1x16xi64>, %y: tensor<1x32xi32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op query segment ids element type must be i32, got 'i64'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) segments(%x, %y : tensor<1x16xi64>, tensor<1x32xi32>) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// Key segment ids of the wrong length.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<1x16xi32>, %y: tensor<1x16xi32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op key segment ids must have shape [B, Nk] from query [1, 4, 16, 64] and key [1, 2, 32, 64], got [1, 16]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) segments(%x, %y : tensor<1x16xi32>, tensor<1x16xi32>) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// Query segment ids of the wrong rank.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<16xi32>, %y: tensor<1x32xi32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op query segment ids must have shape [B, Nq] from query [1, 4, 16, 64] and key [1, 2, 32, 64], got [16]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) segments(%x, %y : tensor<16xi32>, tensor<1x32xi32>) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// Window bounds past 2^31 - 1 (index arithmetic on them could overflow).
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op window bounds must be in [-1, 2^31 - 1] (-1 = unbounded), got left = 0 and right = 4611686018427387904}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) outs(%o : tensor<1x4x16x64xf32>) window(0, 4611686018427387904) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Segment ids for the queries only.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %x: tensor<1x16xi32>, %o: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention' op segments need both query and key segment ids}}
  %r = "fa.attention"(%q, %k, %v, %x, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>, tensor<1x16xi32>, tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32>
  return
}

// -----

// Dynamic query dims: the static dims of the other operands are checked
// against each other (B = 5 from the key lengths, not 4 from the slopes).
func.func @f(%q: tensor<?x4x?x64xf32>, %k: tensor<?x2x?x64xf32>, %v: tensor<?x2x?x64xf32>, %lens: tensor<5xi32>, %x: tensor<4x4xf32>, %o: tensor<?x4x?x64xf32>) {
  // expected-error @+1 {{'fa.attention' op alibi slopes must have shape [Hq] or [B, Hq] = [5, 4] from query [?, 4, ?, 64], got [4, 4]}}
  %r = fa.attention ins(%q, %k, %v : tensor<?x4x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>) kv_lens(%lens : tensor<5xi32>) alibi(%x : tensor<4x4xf32>) outs(%o : tensor<?x4x?x64xf32>)  -> tensor<?x4x?x64xf32>
  return
}

// -----

// Dynamic query dims: Nq = 7 from the output, not 5 from the segment ids.
func.func @f(%q: tensor<?x4x?x64xf32>, %k: tensor<?x2x?x64xf32>, %v: tensor<?x2x?x64xf32>, %qs: tensor<1x5xi32>, %ks: tensor<1x?xi32>, %o: tensor<?x4x7x64xf32>) {
  // expected-error @+1 {{'fa.attention' op query segment ids must have shape [B, Nq] from query [?, 4, ?, 64] and key [?, 2, ?, 64], got [1, 5]}}
  %r = fa.attention ins(%q, %k, %v : tensor<?x4x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>) segments(%qs, %ks : tensor<1x5xi32>, tensor<1x?xi32>) outs(%o : tensor<?x4x7x64xf32>)  -> tensor<?x4x7x64xf32>
  return
}

// -----

// A constant q_offset outside the positions' range.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>) {
  %p = arith.constant -9223372036854775808 : index
  // expected-error @+1 {{'fa.attention' op q_offset must be in [-(2^31 - 1), 2^31 - 1], got -9223372036854775808}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) q_offset(%p) outs(%o : tensor<1x4x16x64xf32>)  -> tensor<1x4x16x64xf32>
  return
}

// -----

// score_mod block arguments: the score, four indices, one per mod operand.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %t: tensor<2x15xf32>) {
  // expected-error @+1 {{'fa.attention' op score_mod arguments must be (f32, index, index, index, index, tensor<2x15xf32>) (the score, b, h, q, k indices, then one per mod_operands operand), got (f32, index, index, index, index)}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) mod_operands(%t : tensor<2x15xf32>) outs(%o : tensor<1x2x8x16xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    fa.yield %s : f32
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// mask_mod arguments are indices, not a score.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'fa.attention' op mask_mod arguments must be (index, index, index, index) (the b, h, q, k indices, then one per mod_operands operand), got (f32, index, index, index, index)}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%o : tensor<1x2x8x16xf32>) mask_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    %t = arith.constant true
    fa.yield %t : i1
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// score_mod yields one f32.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'fa.attention' op score_mod must yield one 'f32', got (index)}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%o : tensor<1x2x8x16xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    fa.yield %qi : index
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// mask_mod yields one i1.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'fa.attention' op mask_mod must yield one 'i1', got ()}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%o : tensor<1x2x8x16xf32>) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    fa.yield
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// No side effects in a region.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %m: memref<4xf32>) {
  // expected-error @+1 {{'fa.attention' op score_mod may only hold side-effect-free ops, got 'memref.store'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%o : tensor<1x2x8x16xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index):
    memref.store %s, %m[%qi] : memref<4xf32>
    fa.yield %s : f32
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// No nested regions.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %c: i1) {
  // expected-error @+1 {{'fa.attention' op mask_mod may not hold ops with regions, got 'scf.if'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) outs(%o : tensor<1x2x8x16xf32>) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %t = scf.if %c -> i1 {
      scf.yield %c : i1
    } else {
      scf.yield %c : i1
    }
    fa.yield %t : i1
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// mod_operands are read only by tensor.extract.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %t: tensor<?xf32>) {
  // expected-error @+1 {{'fa.attention' op score_mod may read mod_operands #0 only with tensor.extract, got 'tensor.dim'}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) mod_operands(%t : tensor<?xf32>) outs(%o : tensor<1x2x8x16xf32>) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %ki: index, %x: tensor<?xf32>):
    %c0 = arith.constant 0 : index
    %n = tensor.dim %x, %c0 : tensor<?xf32>
    fa.yield %s : f32
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// mod_operands without a region to read them.
func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %t: tensor<4xf32>) {
  // expected-error @+1 {{'fa.attention' op mod_operands are given but there is no score_mod or mask_mod region to read them}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) mod_operands(%t : tensor<4xf32>) outs(%o : tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  return
}

// -----

// fa.yield belongs to fa.attention.
func.func @f(%x: f32) {
  // expected-error @+1 {{'fa.yield' op expects parent op to be one of 'fa.attention, fa.create_block_mask'}}
  fa.yield %x : f32
}

// -----

// A block mask describes a mask_mod.
func.func @f(%q: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %bm: tensor<1x1x1x1xi8>) {
  // expected-error @+1 {{'fa.attention' op a block_mask describes a mask_mod, and there is none}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) block_mask(%bm : tensor<1x1x1x1xi8>) outs(%o : tensor<1x2x8x16xf32>) block_tiles(8, 8) -> tensor<1x2x8x16xf32>
  return
}

// -----

// block_mask and block_tiles go together.
func.func @f(%q: tensor<1x2x8x16xf32>, %o: tensor<1x2x8x16xf32>, %bm: tensor<1x1x1x1xi8>) {
  // expected-error @+1 {{'fa.attention' op block_mask and block_tiles go together: the tiles say what the block mask's entries cover}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) block_mask(%bm : tensor<1x1x1x1xi8>) outs(%o : tensor<1x2x8x16xf32>) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x2x8x16xf32>
  return
}

// -----

// A block mask of the wrong tile count.
func.func @f(%q: tensor<1x2x40x16xf32>, %o: tensor<1x2x40x16xf32>, %bm: tensor<1x2x3x3xi8>) {
  // expected-error @+1 {{'fa.attention' op block_mask shape [1, 2, 3, 3] must be [B|1, Hq|1, ceil(Nq / TQ), ceil(Nk / TK)] with block_tiles(16, 32), query [1, 2, 40, 16] and key [1, 2, 40, 16]}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) block_mask(%bm : tensor<1x2x3x3xi8>) outs(%o : tensor<1x2x40x16xf32>) block_tiles(16, 32) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x2x40x16xf32>
  return
}

// -----

// A block mask of i32.
func.func @f(%q: tensor<1x2x40x16xf32>, %o: tensor<1x2x40x16xf32>, %bm: tensor<1x2x3x2xi32>) {
  // expected-error @+1 {{'fa.attention' op block_mask element type must be i8, got 'i32'}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) block_mask(%bm : tensor<1x2x3x2xi32>) outs(%o : tensor<1x2x40x16xf32>) block_tiles(16, 32) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x2x40x16xf32>
  return
}

// -----

// Block tiles must be positive.
func.func @f(%q: tensor<1x2x40x16xf32>, %o: tensor<1x2x40x16xf32>, %bm: tensor<1x2x3x2xi8>) {
  // expected-error @+1 {{'fa.attention' op block_tiles must be two sizes in [1, 2^31 - 1], got array<i64: 0, 32>}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) block_mask(%bm : tensor<1x2x3x2xi8>) outs(%o : tensor<1x2x40x16xf32>) block_tiles(0, 32) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x2x40x16xf32>
  return
}

// -----

// create_block_mask: the result shape follows the constant sizes and tiles.
func.func @f() {
  %c1 = arith.constant 1 : index
  %c40 = arith.constant 40 : index
  // expected-error @+1 {{'fa.create_block_mask' op result shape [1, 1, 2, 2] does not match the sizes: expected [1, 1, 3, 2] for tiles(16, 32)}}
  %bm = fa.create_block_mask sizes(%c1, %c1, %c40, %c40) tiles(16, 32) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<1x1x2x2xi8>
  return
}

// -----

// create_block_mask: positive tiles, an i8 result, a mask_mod of indices.
func.func @f(%n: index) {
  // expected-error @+1 {{'fa.create_block_mask' op tiles must be two sizes in [1, 2^31 - 1], got array<i64: 16, -1>}}
  %bm = fa.create_block_mask sizes(%n, %n, %n, %n) tiles(16, -1) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<?x?x?x?xi8>
  return
}

// -----

func.func @f(%n: index) {
  // expected-error @+1 {{'fa.create_block_mask' op result must be a rank-4 i8 tensor [batch, heads, ceil(query_len / TQ), ceil(key_len / TK)], got 'tensor<?x?x?x?xi1>'}}
  %bm = fa.create_block_mask sizes(%n, %n, %n, %n) tiles(16, 16) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index):
    %keep = arith.cmpi sle, %ki, %qi : index
    fa.yield %keep : i1
  } -> tensor<?x?x?x?xi1>
  return
}

// -----

func.func @f(%n: index) {
  // expected-error @+1 {{'fa.create_block_mask' op mask_mod arguments must be (index, index, index, index) (the b, h, q, k indices, then one per mod_operands operand), got (index, index, index)}}
  %bm = fa.create_block_mask sizes(%n, %n, %n, %n) tiles(16, 16) mask_mod {
  ^bb0(%b: index, %h: index, %qi: index):
    %keep = arith.cmpi sle, %h, %qi : index
    fa.yield %keep : i1
  } -> tensor<?x?x?x?xi8>
  return
}

// -----

func.func @f(%po: tensor<3x8xf16>, %pl: tensor<3xf32>, %o: tensor<8xf32>) {
  // expected-error @+1 {{'fa.merge' op partial_output and partial_lse must be f32, got 'f16' and 'f32'}}
  %r = fa.merge ins(%po, %pl : tensor<3x8xf16>, tensor<3xf32>) outs(%o : tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @f(%po: tensor<8xf32>, %pl: tensor<f32>, %o: tensor<f32>) {
  // expected-error @+1 {{'fa.merge' op partial_output must be [S, ..., Dv] (rank >= 2), got [8]}}
  %r = fa.merge ins(%po, %pl : tensor<8xf32>, tensor<f32>) outs(%o : tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @f(%po: tensor<3x4x8xf32>, %pl: tensor<3x5xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'fa.merge' op partial_lse shape [3, 5] must be partial_output's without its last dim, [3, 4]}}
  %r = fa.merge ins(%po, %pl : tensor<3x4x8xf32>, tensor<3x5xf32>) outs(%o : tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%po: tensor<3x4x8xf32>, %pl: tensor<3x4xf32>, %o: tensor<4x8xi32>) {
  // expected-error @+1 {{'fa.merge' op output element type must be f32, f16 or bf16, got 'i32'}}
  %r = fa.merge ins(%po, %pl : tensor<3x4x8xf32>, tensor<3x4xf32>) outs(%o : tensor<4x8xi32>) -> tensor<4x8xi32>
  return
}

// -----

func.func @f(%po: tensor<3x4x8xf32>, %pl: tensor<3x4xf32>, %o: tensor<3x4x8xf32>) {
  // expected-error @+1 {{'fa.merge' op output shape [3, 4, 8] must be partial_output's without its first (split) dim, [4, 8]}}
  %r = fa.merge ins(%po, %pl : tensor<3x4x8xf32>, tensor<3x4xf32>) outs(%o : tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  return
}

// -----

func.func @f(%po: tensor<3x4x8xf32>, %pl: tensor<3x4xf32>, %o: tensor<4x8xf32>, %l: tensor<3x4xf32>) {
  // expected-error @+1 {{'fa.merge' op lse must be f32 [4] (partial_lse without its split dim), got 'tensor<3x4xf32>'}}
  %r:2 = fa.merge ins(%po, %pl : tensor<3x4x8xf32>, tensor<3x4xf32>) outs(%o : tensor<4x8xf32>, %l : tensor<3x4xf32>) -> tensor<4x8xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @f(%po: tensor<3x4x8xf32>, %pl: tensor<3x4xf32>, %o: tensor<4x8xf32>, %l: tensor<4xf32>) {
  // expected-error @+1 {{'fa.merge' op an lse destination needs an lse result of its type 'tensor<4xf32>'}}
  %r = fa.merge ins(%po, %pl : tensor<3x4x8xf32>, tensor<3x4xf32>) outs(%o : tensor<4x8xf32>, %l : tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%po: tensor<3x4x8xf32>, %pl: tensor<3x4xf32>, %o: tensor<4x8xf32>) {
  // expected-error @+1 {{'fa.merge' op result type 'tensor<4x8xf16>' must be the output's, 'tensor<4x8xf32>'}}
  %r = fa.merge ins(%po, %pl : tensor<3x4x8xf32>, tensor<3x4xf32>) outs(%o : tensor<4x8xf32>) -> tensor<4x8xf16>
  return
}

// -----

// Paged K/V: the block table must be i32 [B, M].
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x16x2x8xf32>, %v: tensor<5x16x2x8xf32>, %l: tensor<2xi32>, %bt: tensor<2x3xi64>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op block_table must be an i32 tensor [B, M], got 'tensor<2x3xi64>'}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) kv_lens(%l : tensor<2xi32>) block_table(%bt : tensor<2x3xi64>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: the page size must be static.
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x?x2x8xf32>, %v: tensor<5x?x2x8xf32>, %l: tensor<2xi32>, %bt: tensor<2x3xi32>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op the page size S (key dim 1) must be static and positive, got key [5, ?, 2, 8]}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x?x2x8xf32>, tensor<5x?x2x8xf32>) kv_lens(%l : tensor<2xi32>) block_table(%bt : tensor<2x3xi32>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: key and value share their pages.
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x16x2x8xf32>, %v: tensor<5x32x2x8xf32>, %l: tensor<2xi32>, %bt: tensor<2x3xi32>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op key and value must have the same pages [P, S], got key [5, 16, 2, 8] and value [5, 32, 2, 8]}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x32x2x8xf32>) kv_lens(%l : tensor<2xi32>) block_table(%bt : tensor<2x3xi32>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: the sequences' lengths are required.
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x16x2x8xf32>, %v: tensor<5x16x2x8xf32>, %bt: tensor<2x3xi32>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op a paged cache needs kv_lens: the number of keys of each sequence}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) block_table(%bt : tensor<2x3xi32>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: no segment ids.
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x16x2x8xf32>, %v: tensor<5x16x2x8xf32>, %l: tensor<2xi32>, %bt: tensor<2x3xi32>, %qs: tensor<2x1xi32>, %ks: tensor<2x48xi32>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op segment ids and block masks are not available with a block_table}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) kv_lens(%l : tensor<2xi32>) block_table(%bt : tensor<2x3xi32>) segments(%qs, %ks : tensor<2x1xi32>, tensor<2x48xi32>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: the table's B is the query's.
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x16x2x8xf32>, %v: tensor<5x16x2x8xf32>, %l: tensor<2xi32>, %bt: tensor<3x3xi32>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op block_table must have shape [B, M] with B from query [2, 4, 1, 8], got [3, 3]}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) kv_lens(%l : tensor<2xi32>) block_table(%bt : tensor<3x3xi32>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: a mask spans Nk = M x S = 48 keys.
func.func @f(%q: tensor<2x4x1x8xf32>, %k: tensor<5x16x2x8xf32>, %v: tensor<5x16x2x8xf32>, %l: tensor<2xi32>, %bt: tensor<2x3xi32>, %m: tensor<2x1x1x40xi1>, %o: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op mask shape [2, 1, 1, 40] is not broadcastable to [B|1, Hq|1, Nq, Nk] with query [2, 4, 1, 8] and key [2, 2, 48, 8]}}
  %r = fa.attention ins(%q, %k, %v : tensor<2x4x1x8xf32>, tensor<5x16x2x8xf32>, tensor<5x16x2x8xf32>) kv_lens(%l : tensor<2xi32>) block_table(%bt : tensor<2x3xi32>) mask(%m : tensor<2x1x1x40xi1>) outs(%o : tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

// Paged K/V: M x S must not overflow.
func.func @f(%q: tensor<1x4x1x8xf32>, %k: tensor<2x4611686018427387904x2x8xf32>, %v: tensor<2x4611686018427387904x2x8xf32>, %l: tensor<1xi32>, %bt: tensor<1x4xi32>, %o: tensor<1x4x1x8xf32>) {
  // expected-error @+1 {{'fa.attention' op the key length M x S of block_table [1, 4] and key [2, 4611686018427387904, 2, 8] overflows}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x4x1x8xf32>, tensor<2x4611686018427387904x2x8xf32>, tensor<2x4611686018427387904x2x8xf32>) kv_lens(%l : tensor<1xi32>) block_table(%bt : tensor<1x4xi32>) outs(%o : tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xf32>
  return
}

// -----

// cu_seqlens: the query is [Tq, Hq, D].
func.func @f(%q: tensor<1x10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op with cu_seqlens, query must have rank 3 [Tq, Hq, D], got rank 4 [1, 10, 4, 8]}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: the offsets are i32 [B + 1].
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi64>, %o: tensor<10x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op cu_seqlens must be i32 tensors [B + 1], got 'tensor<3xi64>' for the key offsets}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi64>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: as many query as key offsets.
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<4xi32>, %o: tensor<10x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op the query and key cu_seqlens must have the same B + 1 entries, got [3] and [4]}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<4xi32>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: B + 1 is at least 1.
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<0xi32>, %ck: tensor<0xi32>, %o: tensor<10x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op cu_seqlens must have B + 1 >= 1 entries, got 0 for the query offsets}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<0xi32>, tensor<0xi32>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: the output is [Tq, Hq, Dv].
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<12x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op with cu_seqlens, output shape [12, 4, 8] must be [Tq, Hq, Dv] = [10, 4, 8] from query [10, 4, 8] and value [12, 2, 8]}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<12x4x8xf32>) -> tensor<12x4x8xf32>
  return
}

// -----

// cu_seqlens: key and value have the same tokens.
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<11x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op with cu_seqlens, key [12, 2, 8] and value [11, 2, 8] must have the same tokens Tk and heads Hkv}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<11x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: the LSE is [Hq, Tq].
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf32>, %l: tensor<10x4xf32>) {
  // expected-error @+1 {{'fa.attention' op with cu_seqlens, lse shape [10, 4] must be [Hq, Tq] from query [10, 4, 8]}}
  %r, %lr = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<10x4x8xf32>, %l : tensor<10x4xf32>) -> tensor<10x4x8xf32>, tensor<10x4xf32>
  return
}

// -----

// cu_seqlens: no key lengths.
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf32>, %kl: tensor<2xi32>) {
  // expected-error @+1 {{'fa.attention' op kv_lens, a block_table, a mask, segment ids and a block_mask are not available with cu_seqlens}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) kv_lens(%kl : tensor<2xi32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: ALiBi slopes [B, Hq] with B from the offsets.
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %v: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %ck: tensor<3xi32>, %o: tensor<10x4x8xf32>, %al: tensor<3x4xf32>) {
  // expected-error @+1 {{'fa.attention' op alibi slopes must have shape [Hq] or [B, Hq] = [2, 4] from query [10, 4, 8], got [3, 4]}}
  %r = fa.attention ins(%q, %k, %v : tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>) cu_seqlens(%cq, %ck : tensor<3xi32>, tensor<3xi32>) alibi(%al : tensor<3x4xf32>) outs(%o : tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}

// -----

// cu_seqlens: the query and the key offsets go together (generic form).
func.func @f(%q: tensor<10x4x8xf32>, %k: tensor<12x2x8xf32>, %cq: tensor<3xi32>, %o: tensor<10x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op cu_seqlens needs both the query and the key offsets}}
  %r = "fa.attention"(%q, %k, %k, %cq, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<10x4x8xf32>, tensor<12x2x8xf32>, tensor<12x2x8xf32>, tensor<3xi32>, tensor<10x4x8xf32>) -> tensor<10x4x8xf32>
  return
}
