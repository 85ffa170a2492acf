// A known crash in upstream MLIR 22, not in fa: a static size of
// -9223372036854775808 (INT64_MIN, the "dynamic" marker) parses, and the
// printer then crashes looking for the SSA value it thinks stands there
// (plain mlir-opt crashes the same way; here in a transform op, which
// fa-opt registers for test/Dialect/FA/tiling*.mlir). Found by fuzzing
// fa-opt (test/Fuzz, docs/Testing.md), which skips inputs that hit it.
// When this test fails because fa-opt rejects or prints it, MLIR has fixed
// it: check the new behaviour and drop the skip in test/Fuzz/FuzzOpt.cpp.
// UNSUPPORTED: asan
// RUN: not --crash fa-opt %s

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_for %op tile_sizes [-9223372036854775808] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
