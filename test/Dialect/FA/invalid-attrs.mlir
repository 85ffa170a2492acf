// RUN: fa-opt %s -split-input-file -verify-diagnostics

// An attribute of the wrong kind for `scale`.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{Invalid attribute `scale` in property conversion: "big"}}
  %r = "fa.attention"(%q, %q, %q, %o) <{scale = "big", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

// A missing required `dimension`.
func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{requires attribute 'dimension'}}
  %r = "fa.softmax"(%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Operand segment sizes that do not add up.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{operand count (4) does not match with the total size (5) specified in attribute 'operandSegmentSizes'}}
  %r = "fa.attention"(%q, %q, %q, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

// A window that is not two integers.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{expected ','}}
  %r = fa.attention ins(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) outs(%o : tensor<1x1x4x8xf32>) window(3) -> tensor<1x1x4x8xf32>
  return
}

// -----

// A window of three bounds in the generic form.
func.func @f(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'fa.attention' op window must have two bounds (left, right), got 3}}
  %r = "fa.attention"(%q, %q, %q, %o) <{window = array<i64: 1, 2, 3>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0>}> ({}, {}) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}
