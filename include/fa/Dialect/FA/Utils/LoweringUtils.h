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

/// exp(x) for the online softmax's arguments, x = s - m <= 0 (or NaN), as
/// buildFastExp with the same range reduction and ~1 ulp, in fewer
/// operations: no overflow branch (x > 88 gives garbage, never asked for),
/// NaN carried by the arithmetic instead of a select, the polynomial in
/// one Horner chain and the exponent bits in one integer add. Exactly 0
/// below -87.3 (incl. -inf). Used where the exps are a visible share of a
/// CPU kernel's time.
Value buildSoftmaxExp(OpBuilder &b, Location loc, Value x);

/// Rewrites each of `tanhs` (math.tanh ops, scalar or vector f32) into
/// MLIR's rational approximation (a few ulp, plain arith plus math.fma and
/// math.absf): what the CPU and GPU kernels use for the softcap, needing no
/// libm or libdevice call.
LogicalResult approximateTanh(ArrayRef<Operation *> tanhs);

/// approximateTanh on every math.tanh nested in `root`.
LogicalResult approximateTanhsIn(Operation *root);

/// The intrinsic an f32 math op becomes in the GPU kernels, which link no
/// libdevice: llvm.nvvm.ex2.approx.f32 (math.exp2), llvm.nvvm.lg2.approx.f
/// (math.log2), llvm.fma.f32 (math.fma), llvm.fabs.f32 (math.absf); empty
/// for any other op.
StringRef getNVVMIntrinsicName(Operation *op);

/// The index `i` as an f32-free index value from linalg.index.
Value loopIndex(OpBuilder &b, Location loc, int64_t dim);

/// One (query tile, key tile) of an attention op's scores, for the tiled
/// lowerings (fa-tile-attention, fa-tile-attention-backward).
struct ScoreTileOperands {
  /// Q K^T of the tile, [rows, cols] f32.
  Value products;
  /// The mask's [rows, cols] tile and the segment ids of the rows and keys
  /// ([rows], [cols] i32); null when absent.
  Value maskTile, qSegTile, kSegTile;
  /// The tile's first query row and key, the diagonal offset, the ALiBi
  /// slope of (batch, head) (null without ALiBi), and the indices the
  /// modifier regions see.
  Value q0, k0, diagOffset, slope, batch, head, nq, nk;
  ValueRange modOperands;
  float scale = 1.0f;
};

/// The scores of one tile in the documented order (scale, the positional
/// rules, softcap and ALiBi, the mask, segment ids, the regions), removed
/// keys at -inf: a linalg.generic over [rows, cols]. With
/// `withDerivative` and a softcap, a second result holds the derivative
/// of each score with respect to the scaled product
/// (AttentionSemantics::scoreDerivative).
SmallVector<Value> buildScoreTile(OpBuilder &b, Location loc,
                                  const AttentionSemantics &sem,
                                  const ScoreTileOperands &ops,
                                  bool withDerivative = false);

} // namespace lowering
} // namespace fa
} // namespace mlir

#endif // FA_DIALECT_FA_UTILS_LOWERINGUTILS_H
