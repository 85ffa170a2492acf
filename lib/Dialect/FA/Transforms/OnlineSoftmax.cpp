//===- OnlineSoftmax.cpp - fa.softmax to a two-sweep online softmax -------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Each row (all dims but the softmax dim) becomes one iteration of an
// scf.forall. Sweep 1 is an scf.for over tiles of the row carrying the
// running max m and the running sum l (rescaled by exp(m_old - m_new));
// sweep 2 writes exp(x - m) / l.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAONLINESOFTMAXPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::lowering;

namespace {

struct OnlineSoftmaxPattern final : OpRewritePattern<SoftmaxOp> {
  OnlineSoftmaxPattern(MLIRContext *ctx, int64_t tileSize)
      : OpRewritePattern<SoftmaxOp>(ctx), tileSize(tileSize) {}

  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override;

private:
  int64_t tileSize;
};

} // namespace

/// Reduces a 1-d f32-convertible tensor to an f32 scalar:
/// `combine(acc, f(x))` starting from `init`.
static Value reduceRow(OpBuilder &b, Location loc, Value tile, float init,
                       function_ref<Value(OpBuilder &, Location, Value)> f,
                       function_ref<Value(OpBuilder &, Location, Value, Value)>
                           combine) {
  MLIRContext *ctx = b.getContext();
  Value acc = buildFilled(b, loc, {}, b.getF32Type(), b.getF32FloatAttr(init));
  AffineExpr d0 = getAffineDimExpr(0, ctx);
  Value r = buildGeneric(
      b, loc, {tile}, {acc},
      {AffineMap::get(1, 0, {d0}, ctx), AffineMap::get(1, 0, {}, ctx)},
      {utils::IteratorType::reduction},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {combine(nb, nl, a[1], f(nb, nl, toF32(nb, nl, a[0])))};
      })[0];
  return tensor::ExtractOp::create(b, loc, r, ValueRange{});
}

LogicalResult
OnlineSoftmaxPattern::matchAndRewrite(SoftmaxOp op,
                                      PatternRewriter &rewriter) const {
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(op.getInput().getType());
  Type elt = type.getElementType();
  int64_t rank = type.getRank();
  int64_t dim = static_cast<int64_t>(op.getDimension());
  Value input = op.getInput();

  // One forall iteration per row; a 1-d input is a single row.
  SmallVector<OpFoldResult> ubs;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim)
      ubs.push_back(tensor::getMixedSize(rewriter, loc, input, i));
  if (ubs.empty())
    ubs.push_back(rewriter.getIndexAttr(1));
  auto forall = scf::ForallOp::create(rewriter, loc, ubs, {op.getOutput()},
                                      /*mapping=*/std::nullopt);
  OpBuilder b = OpBuilder::atBlockBegin(forall.getBody());
  SmallVector<Value> ivs = forall.getInductionVars();

  OpFoldResult rowLen = tensor::getMixedSize(b, loc, input, dim);
  SmallVector<OpFoldResult> offsets, sizes;
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  for (int64_t i = 0, iv = 0; i < rank; ++i) {
    if (i == dim) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(rowLen);
    } else {
      offsets.push_back(ivs[iv++]);
      sizes.push_back(b.getIndexAttr(1));
    }
  }
  auto rowType = RankedTensorType::get({type.getDimSize(dim)}, elt);
  Value row = tensor::ExtractSliceOp::create(b, loc, rowType, input, offsets,
                                             sizes, strides);

  // Sweep 1: running max and running sum over tiles of the row.
  Value rowLenV = getValueOrCreateConstantIndexOp(b, loc, rowLen);
  Value tile = arith::ConstantIndexOp::create(b, loc, tileSize);
  Value numTiles = arith::CeilDivUIOp::create(b, loc, rowLenV, tile);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value mInit = negInf(b, loc);
  Value lInit = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  auto sweep = scf::ForOp::create(
      b, loc, c0, numTiles, c1, ValueRange{mInit, lInit},
      [&](OpBuilder &lb, Location ll, Value t, ValueRange iter) {
        Value t0 = arith::MulIOp::create(lb, ll, t, tile);
        Value tn = arith::MinSIOp::create(
            lb, ll, tile, arith::SubIOp::create(lb, ll, rowLenV, t0));
        Value part = tensor::ExtractSliceOp::create(
            lb, ll, RankedTensorType::get({ShapedType::kDynamic}, elt), row,
            ArrayRef<OpFoldResult>{t0}, ArrayRef<OpFoldResult>{tn},
            ArrayRef<OpFoldResult>{lb.getIndexAttr(1)});
        Value tileMax = reduceRow(
            lb, ll, part, -std::numeric_limits<float>::infinity(),
            [](OpBuilder &, Location, Value x) { return x; },
            [](OpBuilder &nb, Location nl, Value a, Value x) -> Value {
              return arith::MaximumFOp::create(nb, nl, a, x);
            });
        Value mNew = arith::MaximumFOp::create(lb, ll, iter[0], tileMax);
        Value mUse = guardedMax(lb, ll, mNew);
        Value tileSum = reduceRow(
            lb, ll, part, 0.0f,
            [&](OpBuilder &nb, Location nl, Value x) -> Value {
              return math::ExpOp::create(nb, nl,
                                         arith::SubFOp::create(nb, nl, x, mUse));
            },
            [](OpBuilder &nb, Location nl, Value a, Value x) -> Value {
              return arith::AddFOp::create(nb, nl, a, x);
            });
        // l = l * exp(m_old - m_new) + sum(exp(x - m_new)).
        Value alpha = math::ExpOp::create(
            lb, ll, arith::SubFOp::create(lb, ll, iter[0], mUse));
        Value lNew = arith::AddFOp::create(
            lb, ll, arith::MulFOp::create(lb, ll, iter[1], alpha), tileSum);
        scf::YieldOp::create(lb, ll, ValueRange{mNew, lNew});
      });
  Value m = sweep.getResult(0), l = sweep.getResult(1);

  // Sweep 2: y = exp(x - m) / l; an all -inf row (l == 0) gives zeros.
  // Written straight into the destination row, so no copy is needed.
  Value rowOutEmpty = tensor::ExtractSliceOp::create(
      b, loc, rowType, forall.getRegionIterArgs()[0], offsets, sizes, strides);
  MLIRContext *ctx = rewriter.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  Value y = buildGeneric(
      b, loc, {row}, {rowOutEmpty}, {id, id}, {utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value mUse = guardedMax(nb, nl, m);
        Value e = math::ExpOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, toF32(nb, nl, a[0]), mUse));
        return {fromF32(nb, nl, guardedDivide(nb, nl, e, l), elt)};
      })[0];

  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, y,
                                        forall.getRegionIterArgs()[0], offsets,
                                        sizes, strides);
  rewriter.replaceOp(op, forall.getResults());
  return success();
}

void fa::populateFAOnlineSoftmaxPatterns(RewritePatternSet &patterns,
                                         int64_t tileSize) {
  patterns.add<OnlineSoftmaxPattern>(patterns.getContext(), tileSize);
}

namespace {
struct FAOnlineSoftmaxPass final
    : fa::impl::FAOnlineSoftmaxPassBase<FAOnlineSoftmaxPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void FAOnlineSoftmaxPass::runOnOperation() {
  if (tileSize <= 0) {
    mlir::emitError(getOperation()->getLoc())
        << "fa-online-softmax: tile-size must be positive, got "
        << static_cast<int64_t>(tileSize);
    return signalPassFailure();
  }
  RewritePatternSet patterns(&getContext());
  populateFAOnlineSoftmaxPatterns(patterns, tileSize);
  walkAndApplyPatterns(getOperation(), std::move(patterns));
}
