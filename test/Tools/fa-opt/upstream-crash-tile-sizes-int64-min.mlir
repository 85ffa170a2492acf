// A known bug in upstream MLIR 22, not in fa: a static size of
// -9223372036854775808 (INT64_MIN, the "dynamic" marker) parses, and the
// printer then looks for the SSA value it thinks stands there: plain
// mlir-opt crashes; the output, where printing gets that far, is
// `tile_sizes [<<NULL VALUE>>]`, which does not parse. Here in a transform
// op, which fa-opt registers for test/Dialect/FA/tiling*.mlir. Found by
// fuzzing fa-opt (test/Fuzz, docs/Testing.md), which skips inputs that hit
// it. Expected to fail (crash or no round trip); when it passes, MLIR has
// fixed it: drop the XFAIL and the skip in test/Fuzz/FuzzOpt.cpp.
// UNSUPPORTED: asan
// XFAIL: *
// RUN: fa-opt %s | fa-opt

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %op = transform.structured.match ops{["fa.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_for %op tile_sizes [-9223372036854775808] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
