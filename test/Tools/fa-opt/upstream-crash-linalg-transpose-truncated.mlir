// A known crash in upstream MLIR 22, not in fa: linalg.transpose's custom
// parser segfaults when its `permutation` list is cut off (`[0,` followed
// by another line; plain mlir-opt crashes the same way). Found by fuzzing
// fa-opt (test/Fuzz, docs/Testing.md), which skips inputs that hit it.
// When this test fails because fa-opt reports a parse error instead, MLIR
// has fixed it: expect the diagnostic and drop the skip in
// test/Fuzz/FuzzOpt.cpp.
// UNSUPPORTED: asan
// RUN: not --crash fa-opt %s

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %0 = linalg.transpose ins(%a : tensor<2x3xf32>) outs(%b : tensor<3x2xf32>) permutation = [0,
  return %0 : tensor<3x2xf32>
}
