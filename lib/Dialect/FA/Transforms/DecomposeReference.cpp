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
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"
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
  if (op.isPaged() || op.isVarlen())
    return rewriter.notifyMatchFailure(op, "paged K/V or cu_seqlens");
  Location loc = op.getLoc();
  MLIRContext *ctx = rewriter.getContext();
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  Type elt = qType.getElementType();
  Type f32 = rewriter.getF32Type();
  int64_t hq = qType.getDimSize(1), dv = vType.getDimSize(3);
  int64_t group = op.getGroupSize();
  float scale = op.getEffectiveScale();
  Value kvLens = op.getKvLens(), mask = op.getMask();

  OpFoldResult batch = tensor::getMixedSize(rewriter, loc, op.getQuery(), 0);
  OpFoldResult nq = tensor::getMixedSize(rewriter, loc, op.getQuery(), 2);
  OpFoldResult nk = tensor::getMixedSize(rewriter, loc, op.getKey(), 2);
  OpFoldResult heads = rewriter.getIndexAttr(hq);
  AttentionSemantics sem = AttentionSemantics::get(op);
  Value nqValue = getValueOrCreateConstantIndexOp(rewriter, loc, nq);
  Value nkValue = getValueOrCreateConstantIndexOp(rewriter, loc, nk);
  Value diagOffset =
      sem.diagonalOffset(rewriter, loc, nqValue, nkValue, op.getQOffset());

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
  if (mask) {
    auto mType = cast<RankedTensorType>(mask.getType());
    AffineExpr zero = getAffineConstantExpr(0, ctx);
    ins.push_back(mask);
    maps.push_back(map4({mType.getDimSize(0) == 1 ? zero : b,
                         mType.getDimSize(1) == 1 ? zero : h, i, j}));
  }
  Value alibi = op.getAlibi();
  if (alibi) {
    ins.push_back(alibi);
    maps.push_back(cast<RankedTensorType>(alibi.getType()).getRank() == 1
                       ? map4({h})
                       : map4({b, h}));
  }
  bool segments = sem.hasSegments();
  if (segments) {
    ins.push_back(op.getQSegments());
    maps.push_back(map4({b, i}));
    ins.push_back(op.getKSegments());
    maps.push_back(map4({b, j}));
  }
  maps.push_back(map4({b, h, i, j}));
  Value sEmpty =
      tensor::EmptyOp::create(rewriter, loc, SmallVector<OpFoldResult>{batch, heads, nq, nk}, f32);
  Value scores = buildGeneric(
      rewriter, loc, ins, {sEmpty}, maps, {par, par, par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value x = arith::MulFOp::create(
            nb, nl, a[0],
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(scale)));
        unsigned next = 1;
        Value qPos = loopIndex(nb, nl, 2), kPos = loopIndex(nb, nl, 3);
        // The key length is compared unclamped here: a key k < Nk is kept
        // when k < len, which is what min(max(len, 0), Nk) gives.
        Value keyEnd;
        if (kvLens)
          keyEnd = arith::IndexCastOp::create(nb, nl, nb.getIndexType(),
                                              a[next++]);
        Value keep = sem.keepKey(nb, nl, qPos, kPos, keyEnd, diagOffset);
        Value maskElt = mask ? a[next++] : Value();
        Value slope = alibi ? a[next++] : Value();
        x = sem.modifyScore(nb, nl, x, qPos, kPos, diagOffset, slope);
        if (maskElt)
          sem.applyMaskElement(nb, nl, maskElt, x, keep);
        if (segments) {
          sem.applySegments(nb, nl, a[next], a[next + 1], keep);
          next += 2;
        }
        AttentionSemantics::ModIndices idx{loopIndex(nb, nl, 0),
                                           loopIndex(nb, nl, 1), qPos, kPos,
                                           nqValue, nkValue};
        x = sem.applyScoreMod(nb, nl, x, idx, op.getModOperands());
        sem.applyMaskMod(nb, nl, idx, op.getModOperands(), keep);
        return {AttentionSemantics::removeUnkept(nb, nl, keep, x)};
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
        return {guardedDivide(nb, nl, e, a[2])};
      })[0];

  // O[b, h, i, d] = sum_j P[b, h, i, j] V[b, h / G, j, d]; here d is the
  // value dim and j the reduction.
  bool maybeMasked = kvLens || sem.removesKeysInsideRange();
  Value oInit = buildFilled(rewriter, loc,
                            {batch, heads, nq, rewriter.getIndexAttr(dv)}, f32,
                            rewriter.getF32FloatAttr(0));
  Value oAcc = buildGeneric(
      rewriter, loc, {probs, op.getValue()}, {oInit},
      {map5({b, h, i, d}), map5({b, hkv, d, j}), map5({b, h, i, j})},
      {par, par, par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value v = toF32(nb, nl, a[1]);
        Value prod = maybeMasked ? maskedProduct(nb, nl, a[0], v)
                                 : Value(arith::MulFOp::create(nb, nl, a[0], v));
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
          return {guardedLogSumExp(nb, nl, a[0], a[1])};
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
        return {fromF32(nb, nl, guardedDivide(nb, nl, e, a[2]), elt)};
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
    if (failed(rejectCpuKernelOnlyForms(getOperation(), getArgument())))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateFADecomposeReferencePatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
