// RUN: fa-opt %s -split-input-file -verify-diagnostics

// One case per verifier rule of fa.attention_backward; the forward operands
// share fa.attention's checks (invalid.mlir covers each of those), so only
// a few are repeated here.

// The forward operands are checked as fa.attention's.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x3x32x64xf32>, %v: tensor<1x3x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op query heads Hq = 4 must be a multiple of key/value heads Hkv = 3}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x3x32x64xf32>, tensor<1x3x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x16x64xf32>) outs(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x3x32x64xf32>, tensor<1x3x32x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x3x32x64xf32>, tensor<1x3x32x64xf32>
  return
}

// -----

// The output must match the forward's shape.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x8x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op output shape [1, 4, 8, 64] must be [B, Hq, Nq, Dv] = [1, 4, 16, 64]}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x8x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x8x64xf32>) outs(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

// The LSE must be f32 [B, Hq, Nq].
func.func @f(%q: tensor<1x4x16x64xf16>, %k: tensor<1x2x32x64xf16>, %v: tensor<1x2x32x64xf16>, %o: tensor<1x4x16x64xf16>, %lse: tensor<1x4x16xf16>, %do: tensor<1x4x16x64xf16>) {
  // expected-error @+1 {{'fa.attention_backward' op lse element type must be f32, got 'f16'}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>) forward(%o, %lse : tensor<1x4x16x64xf16>, tensor<1x4x16xf16>) grad_output(%do : tensor<1x4x16x64xf16>) outs(%q, %k, %v : tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>) -> tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x15xf32>, %do: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op lse shape [1, 4, 15] must be [B, Hq, Nq] from query [1, 4, 16, 64]}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x15xf32>) grad_output(%do : tensor<1x4x16x64xf32>) outs(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

// grad_output is shaped like the output.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x17x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op grad_output 'tensor<1x4x17x64xf32>' must have the output's shape and type 'tensor<1x4x16x64xf32>'}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x17x64xf32>) outs(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf16>) {
  // expected-error @+1 {{'fa.attention_backward' op grad_output 'tensor<1x4x16x64xf16>' must have the output's shape and type 'tensor<1x4x16x64xf32>'}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x16x64xf16>) outs(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

// Each gradient is shaped like its input.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf32>, %dk: tensor<1x4x32x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op grad_key 'tensor<1x4x32x64xf32>' must have the shape and type of its input 'tensor<1x2x32x64xf32>'}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x16x64xf32>) outs(%q, %dk, %v : tensor<1x4x16x64xf32>, tensor<1x4x32x64xf32>, tensor<1x2x32x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x4x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x16x64xf16>, %k: tensor<1x2x32x64xf16>, %v: tensor<1x2x32x64xf16>, %o: tensor<1x4x16x64xf16>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf16>, %dq: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op grad_query 'tensor<1x4x16x64xf32>' must have the shape and type of its input 'tensor<1x4x16x64xf16>'}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>) forward(%o, %lse : tensor<1x4x16x64xf16>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x16x64xf16>) outs(%dq, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>
  return
}

// -----

// Results mirror the destinations.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf32>, %dv: tensor<1x2x?x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op result type 'tensor<1x2x32x64xf32>' must match grad_value type 'tensor<1x2x?x64xf32>'}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x16x64xf32>) outs(%q, %k, %dv : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x?x64xf32>) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

// Modifier attributes follow fa.attention's rules.
func.func @f(%q: tensor<1x4x16x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x64xf32>, %o: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x64xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op softcap must be positive and finite, got -1}}
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) forward(%o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) grad_output(%do : tensor<1x4x16x64xf32>) outs(%q, %k, %v : tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>) softcap(-1.0) -> tensor<1x4x16x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x64xf32>
  return
}

// -----

// operandSegmentSizes may not move a required operand's value to another
// group: here grad_value's value is counted as kv_lens.
func.func @f(%q: tensor<1x4x16x64xf32>, %lse: tensor<1x4x16xf32>) {
  // expected-error @+1 {{'fa.attention_backward' op operand 'grad_value' is required: 'operandSegmentSizes' gives it 0 values, expected 1}}
  %r:3 = "fa.attention_backward"(%q, %q, %q, %q, %lse, %q, %q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0>}> : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>) -> (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
  return
}
