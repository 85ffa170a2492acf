// A known crash in upstream MLIR 22, not in fa: the custom parsers of
// linalg.transpose, linalg.broadcast and linalg.reduce store whatever
// DenseI64ArrayAttr::parse returns for `permutation = [...]` /
// `dimensions = [...]`, and segfault on the null attribute it returns for a
// malformed list (`[1 0]` here; also `[-]`, `[0,,1]`, `[1.0, 0]`, a number
// past int64; plain mlir-opt crashes the same way). Found by fuzzing
// fa-opt (test/Fuzz, docs/Testing.md), which skips inputs that hit it.
// When this test fails because fa-opt reports a parse error instead, MLIR
// has fixed it: expect the diagnostic and drop the skip in
// test/Fuzz/FuzzOpt.cpp.
// UNSUPPORTED: asan
// RUN: not --crash fa-opt %s

func.func @f(%a: tensor<3x2xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %0 = linalg.reduce ins(%a : tensor<3x2xf32>) outs(%b : tensor<3xf32>) dimensions = [1 0]
    (%x: f32, %y: f32) {
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
    }
  return %0 : tensor<3xf32>
}
