//===- LoweringUtils.h - helpers shared by fa's lowerings -------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_UTILS_LOWERINGUTILS_H
#define FA_DIALECT_FA_UTILS_LOWERINGUTILS_H

#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace mlir {
namespace fa {
namespace lowering {

/// Body of a linalg.generic: receives the block arguments (inputs then
/// outputs) and returns the values to yield.
using GenericBody =
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

/// Builds a linalg.generic over `ins`/`outs` with the given maps, iterator
/// types and body; returns its results.
SmallVector<Value> buildGeneric(OpBuilder &b, Location loc, ValueRange ins,
                                ValueRange outs, ArrayRef<AffineMap> maps,
                                ArrayRef<utils::IteratorType> iterators,
                                GenericBody body);

/// A tensor of `shape` (dynamic sizes in `dynSizes`) filled with `value`.
Value buildFilled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Type elementType, TypedAttr value);

/// Converts `v` to f32 (extf for f16/bf16, identity for f32).
Value toF32(OpBuilder &b, Location loc, Value v);

/// Converts an f32 `v` to `type` (truncf or identity).
Value fromF32(OpBuilder &b, Location loc, Value v, Type type);

/// The f32 constant -inf.
Value negInf(OpBuilder &b, Location loc);

/// exp(x) for f32 scalars or vectors of f32 in plain arith ops (contractible
/// multiply-adds, integer exponent bits): a Cephes-style polynomial, ~1 ulp on
/// [-87.3, 88], exactly 0 below (incl. -inf), +inf above 88, NaN kept. Unlike
/// math.exp on vectors it needs no libm call per lane.
Value buildFastExp(OpBuilder &b, Location loc, Value x);

/// Rewrites each of `tanhs` (math.tanh ops, scalar or vector f32) into
/// MLIR's rational approximation (a few ulp, plain arith plus math.fma and
/// math.absf): what the CPU and GPU kernels use for the softcap, needing no
/// libm or libdevice call.
LogicalResult approximateTanh(ArrayRef<Operation *> tanhs);

/// The intrinsic an f32 math op becomes in the GPU kernels, which link no
/// libdevice: llvm.nvvm.ex2.approx.f32 (math.exp2), llvm.nvvm.lg2.approx.f
/// (math.log2), llvm.fma.f32 (math.fma), llvm.fabs.f32 (math.absf); empty
/// for any other op.
StringRef getNVVMIntrinsicName(Operation *op);

/// The index `i` as an f32-free index value from linalg.index.
Value loopIndex(OpBuilder &b, Location loc, int64_t dim);

} // namespace lowering
} // namespace fa
} // namespace mlir

#endif // FA_DIALECT_FA_UTILS_LOWERINGUTILS_H
