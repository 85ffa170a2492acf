//===- DecomposeReference.cpp - fa ops to the naive computation -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The unfused reference: fa.attention materializes S = scale * Q K^T for the
// whole problem, applies the masks, runs a three-sweep safe softmax over
// each row and multiplies by V; fa.softmax becomes the three-sweep safe
// softmax. Every step is one linalg.generic on full tensors.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"

#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FADECOMPOSEREFERENCEPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::lowering;

using utils::IteratorType;

static constexpr float kNegInf = -std::numeric_limits<float>::infinity();

namespace {

struct DecomposeAttention final : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override;
};

struct DecomposeSoftmax final : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override;
};

} // namespace

LogicalResult
DecomposeAttention::matchAndRewrite(AttentionOp op,
                                    PatternRewriter &rewriter) const {
  Location loc = op.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  Type elt = qType.getElementType();
  Type f32 = rewriter.getF32Type();
  int64_t hq = qType.getDimSize(1), dv = vType.getDimSize(3);
  int64_t group = op.getGroupSize();
  float scale = op.getEffectiveScale();
  CausalKind causal = op.getCausal();
  Value kvLens = op.getKvLens(), mask = op.getMask();

  OpFoldResult batch = tensor::getMixedSize(rewriter, loc, op.getQuery(), 0);
  OpFoldResult nq = tensor::getMixedSize(rewriter, loc, op.getQuery(), 2);
  OpFoldResult nk = tensor::getMixedSize(rewriter, loc, op.getKey(), 2);
  OpFoldResult heads = rewriter.getIndexAttr(hq);
  Value diagOffset = arith::ConstantIndexOp::create(rewriter, loc, 0);
  if (causal == CausalKind::bottom_right)
    diagOffset = arith::SubIOp::create(
        rewriter, loc, getValueOrCreateConstantIndexOp(rewriter, loc, nk),
        getValueOrCreateConstantIndexOp(rewriter, loc, nq));

  AffineExpr b, h, i, j, d;
  bindDims(ctx, b, h, i, j, d);
  AffineExpr hkv = group == 1 ? h : h.floorDiv(group);
  auto map5 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(5, 0, r, ctx);
  };
  auto map4 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(4, 0, r, ctx);
  };
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;

  // S[b, h, i, j] = sum_d Q[b, h, i, d] K[b, h / G, j, d].
  Value sInit = buildFilled(rewriter, loc, {batch, heads, nq, nk}, f32,
                            rewriter.getF32FloatAttr(0));
  Value s = buildGeneric(
      rewriter, loc, {op.getQuery(), op.getKey()}, {sInit},
      {map5({b, h, i, d}), map5({b, hkv, j, d}), map5({b, h, i, j})},
      {par, par, par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value prod = arith::MulFOp::create(nb, nl, toF32(nb, nl, a[0]),
                                           toF32(nb, nl, a[1]));
        return {arith::AddFOp::create(nb, nl, a[2], prod)};
      })[0];

  // Scale and masks.
  SmallVector<Value> ins = {s};
  SmallVector<AffineMap> maps = {map4({b, h, i, j})};
  if (kvLens) {
    ins.push_back(kvLens);
    maps.push_back(map4({b}));
  }
  bool boolMask = false;
  if (mask) {
    auto mType = cast<RankedTensorType>(mask.getType());
    boolMask = mType.getElementType().isInteger(1);
    AffineExpr zero = getAffineConstantExpr(0, ctx);
    ins.push_back(mask);
    maps.push_back(map4({mType.getDimSize(0) == 1 ? zero : b,
                         mType.getDimSize(1) == 1 ? zero : h, i, j}));
  }
  maps.push_back(map4({b, h, i, j}));
  Value sEmpty =
      tensor::EmptyOp::create(rewriter, loc, SmallVector<OpFoldResult>{batch, heads, nq, nk}, f32);
  Value scores = buildGeneric(
      rewriter, loc, ins, {sEmpty}, maps, {par, par, par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value ninf = negInf(nb, nl);
        Value x = arith::MulFOp::create(
            nb, nl, a[0],
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(scale)));
        unsigned next = 1;
        Value kPos = loopIndex(nb, nl, 3);
        if (kvLens) {
          Value len = arith::IndexCastOp::create(nb, nl, nb.getIndexType(),
                                                 a[next++]);
          Value keep = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt,
                                             kPos, len);
          x = arith::SelectOp::create(nb, nl, keep, x, ninf);
        }
        if (mask) {
          Value mv = a[next++];
          x = boolMask ? Value(arith::SelectOp::create(nb, nl, mv, x, ninf))
                       : Value(arith::AddFOp::create(nb, nl, x,
                                                     toF32(nb, nl, mv)));
        }
        if (causal != CausalKind::none) {
          Value limit =
              arith::AddIOp::create(nb, nl, loopIndex(nb, nl, 2), diagOffset);
          Value keep = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sle,
                                             kPos, limit);
          x = arith::SelectOp::create(nb, nl, keep, x, ninf);
        }
        return {x};
      })[0];

  // Sweep 1: row max. Sweep 2: row sum of exp. Sweep 3: normalize.
  Value mInit = buildFilled(rewriter, loc, {batch, heads, nq}, f32,
                            rewriter.getF32FloatAttr(kNegInf));
  Value rowMax = buildGeneric(
      rewriter, loc, {scores}, {mInit},
      {map4({b, h, i, j}), map4({b, h, i})}, {par, par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(nb, nl, a[0], a[1])};
      })[0];
  Value lInit = buildFilled(rewriter, loc, {batch, heads, nq}, f32,
                            rewriter.getF32FloatAttr(0));
  Value rowSum = buildGeneric(
      rewriter, loc, {scores, rowMax}, {lInit},
      {map4({b, h, i, j}), map4({b, h, i}), map4({b, h, i})},
      {par, par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value e = math::ExpOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, a[0],
                                          guardedMax(nb, nl, a[1])));
        return {arith::AddFOp::create(nb, nl, a[2], e)};
      })[0];
  Value probs = buildGeneric(
      rewriter, loc, {scores, rowMax, rowSum}, {sEmpty},
      {map4({b, h, i, j}), map4({b, h, i}), map4({b, h, i}),
       map4({b, h, i, j})},
      {par, par, par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value e = math::ExpOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, a[0],
                                          guardedMax(nb, nl, a[1])));
        Value zero = arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0));
        Value empty = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                            a[2], zero);
        return {arith::SelectOp::create(nb, nl, empty, zero,
                                        arith::DivFOp::create(nb, nl, e, a[2]))};
      })[0];

  // O[b, h, i, d] = sum_j P[b, h, i, j] V[b, h / G, j, d]; here d is the
  // value dim and j the reduction.
  bool maybeMasked = kvLens || mask || causal != CausalKind::none;
  Value oInit = buildFilled(rewriter, loc,
                            {batch, heads, nq, rewriter.getIndexAttr(dv)}, f32,
                            rewriter.getF32FloatAttr(0));
  Value oAcc = buildGeneric(
      rewriter, loc, {probs, op.getValue()}, {oInit},
      {map5({b, h, i, d}), map5({b, hkv, d, j}), map5({b, h, i, j})},
      {par, par, par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value prod = arith::MulFOp::create(nb, nl, a[0], toF32(nb, nl, a[1]));
        if (maybeMasked) {
          Value zero =
              arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0));
          Value isZero = arith::CmpFOp::create(
              nb, nl, arith::CmpFPredicate::OEQ, a[0], zero);
          prod = arith::SelectOp::create(nb, nl, isZero, zero, prod);
        }
        return {arith::AddFOp::create(nb, nl, a[2], prod)};
      })[0];
  AffineMap id4 = AffineMap::getMultiDimIdentityMap(4, ctx);
  Value out = buildGeneric(
      rewriter, loc, {oAcc}, {op.getOutput()}, {id4, id4},
      {par, par, par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {fromF32(nb, nl, a[0], elt)};
      })[0];
  SmallVector<Value> results = {out};
  if (op.getLse()) {
    AffineMap id3 = AffineMap::getMultiDimIdentityMap(3, ctx);
    results.push_back(buildGeneric(
        rewriter, loc, {rowMax, rowSum}, {op.getLse()}, {id3, id3, id3},
        {par, par, par},
        [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
          Value zero =
              arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0));
          Value empty = arith::CmpFOp::create(
              nb, nl, arith::CmpFPredicate::OEQ, a[1], zero);
          Value lse = arith::AddFOp::create(nb, nl, a[0],
                                            math::LogOp::create(nb, nl, a[1]));
          return {arith::SelectOp::create(nb, nl, empty, negInf(nb, nl), lse)};
        })[0]);
  }
  rewriter.replaceOp(op, results);
  return success();
}

LogicalResult
DecomposeSoftmax::matchAndRewrite(SoftmaxOp op,
                                  PatternRewriter &rewriter) const {
  Location loc = op.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  auto type = cast<RankedTensorType>(op.getInput().getType());
  Type elt = type.getElementType(), f32 = rewriter.getF32Type();
  int64_t rank = type.getRank();
  int64_t dim = static_cast<int64_t>(op.getDimension());

  SmallVector<OpFoldResult> reducedSizes;
  SmallVector<AffineExpr> reducedExprs;
  SmallVector<IteratorType> reduceIters, parIters(rank, IteratorType::parallel);
  for (int64_t k = 0; k < rank; ++k) {
    reduceIters.push_back(k == dim ? IteratorType::reduction
                                   : IteratorType::parallel);
    if (k == dim)
      continue;
    reducedSizes.push_back(tensor::getMixedSize(rewriter, loc, op.getInput(), k));
    reducedExprs.push_back(getAffineDimExpr(k, ctx));
  }
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap reduced = AffineMap::get(rank, 0, reducedExprs, ctx);

  Value mInit = buildFilled(rewriter, loc, reducedSizes, f32,
                            rewriter.getF32FloatAttr(kNegInf));
  Value rowMax = buildGeneric(
      rewriter, loc, {op.getInput()}, {mInit}, {id, reduced}, reduceIters,
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(nb, nl, toF32(nb, nl, a[0]), a[1])};
      })[0];
  Value lInit = buildFilled(rewriter, loc, reducedSizes, f32,
                            rewriter.getF32FloatAttr(0));
  Value rowSum = buildGeneric(
      rewriter, loc, {op.getInput(), rowMax}, {lInit}, {id, reduced, reduced},
      reduceIters,
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value e = math::ExpOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, toF32(nb, nl, a[0]),
                                          guardedMax(nb, nl, a[1])));
        return {arith::AddFOp::create(nb, nl, a[2], e)};
      })[0];
  Value y = buildGeneric(
      rewriter, loc, {op.getInput(), rowMax, rowSum}, {op.getOutput()},
      {id, reduced, reduced, id}, parIters,
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value e = math::ExpOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, toF32(nb, nl, a[0]),
                                          guardedMax(nb, nl, a[1])));
        Value zero = arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0));
        Value empty = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                            a[2], zero);
        Value v = arith::SelectOp::create(nb, nl, empty, zero,
                                          arith::DivFOp::create(nb, nl, e, a[2]));
        return {fromF32(nb, nl, v, elt)};
      })[0];
  rewriter.replaceOp(op, y);
  return success();
}

void fa::populateFADecomposeReferencePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeAttention, DecomposeSoftmax>(patterns.getContext());
}

namespace {
struct FADecomposeReferencePass final
    : fa::impl::FADecomposeReferencePassBase<FADecomposeReferencePass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFADecomposeReferencePatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
