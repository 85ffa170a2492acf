// A known crash in upstream MLIR 22, not in fa: the builtin parser aborts
// on a dense array attribute of `index` elements (plain mlir-opt crashes
// the same way). Found by fuzzing fa-opt (test/Fuzz, docs/Testing.md),
// which skips inputs that hit it. When this test fails because fa-opt no
// longer crashes, MLIR has fixed it: turn it into a round-trip or
// diagnostic test and drop the skip in test/Fuzz/FuzzOpt.cpp.
// UNSUPPORTED: asan
// RUN: not --crash fa-opt %s

func.func @f() attributes {a = array<index: 1>} {
  return
}
