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
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"

#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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
  OnlineSoftmaxPattern(MLIRContext *ctx, int64_t tileSize,
                       int64_t vectorWidth)
      : OpRewritePattern<SoftmaxOp>(ctx), tileSize(tileSize),
        vectorWidth(vectorWidth) {}

  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &rewriter) const override;

private:
  /// Both sweeps on vectors (softmax dim innermost); returns the row of the
  /// result written into `rowOut`.
  Value buildVectorRow(OpBuilder &b, Location loc, Value row, Value rowOut,
                       Value rowLen, Type elt) const;

  int64_t tileSize;
  int64_t vectorWidth;
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

  if (vectorWidth > 0 && dim == rank - 1) {
    Value rowLenV = getValueOrCreateConstantIndexOp(b, loc, rowLen);
    Value rowOutInit = tensor::ExtractSliceOp::create(
        b, loc, rowType, forall.getRegionIterArgs()[0], offsets, sizes,
        strides);
    Value y = buildVectorRow(b, loc, row, rowOutInit, rowLenV, elt);
    b.setInsertionPointToStart(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(b, loc, y,
                                          forall.getRegionIterArgs()[0],
                                          offsets, sizes, strides);
    rewriter.replaceOp(op, forall.getResults());
    return success();
  }

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

Value OnlineSoftmaxPattern::buildVectorRow(OpBuilder &b, Location loc,
                                           Value row, Value rowOut,
                                           Value rowLen, Type elt) const {
  const int64_t vw = vectorWidth;
  const int64_t chunks = std::max<int64_t>(1, llvm::divideCeil(tileSize, vw));
  const int64_t tile = chunks * vw;
  const float inf = std::numeric_limits<float>::infinity();
  Type f32 = b.getF32Type();
  auto vf32 = VectorType::get({vw}, f32);
  auto velt = VectorType::get({vw}, elt);
  auto cIdx = [&](OpBuilder &nb, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(nb, loc, v);
  };
  auto splat = [&](OpBuilder &nb, float v) -> Value {
    return arith::ConstantOp::create(
        nb, loc, DenseElementsAttr::get(vf32, nb.getF32FloatAttr(v)));
  };
  // A chunk of the row at `at` as f32 lanes; past the end: -inf.
  auto read = [&](OpBuilder &nb, Value at, bool inBounds) -> Value {
    Value pad = arith::ConstantOp::create(
        nb, loc, nb.getFloatAttr(elt, -std::numeric_limits<double>::infinity()));
    Value v = vector::TransferReadOp::create(nb, loc, velt, row, ValueRange{at},
                                             pad, ArrayRef<bool>{inBounds});
    if (elt != f32)
      v = arith::ExtFOp::create(nb, loc, vf32, v);
    return v;
  };
  auto maxF = [&](OpBuilder &nb, Value x, Value y) -> Value {
    return arith::MaximumFOp::create(nb, loc, x, y);
  };
  auto addF = [&](OpBuilder &nb, Value x, Value y) -> Value {
    return arith::AddFOp::create(nb, loc, x, y);
  };
  auto guard = [&](OpBuilder &nb, Value m) -> Value {
    Value isInf = arith::CmpFOp::create(nb, loc, arith::CmpFPredicate::OEQ, m,
                                        splat(nb, -inf));
    return arith::SelectOp::create(nb, loc, isInf, splat(nb, 0.0f), m);
  };
  // One tile of sweep 1 at t0: per-lane max, rescale and sum.
  auto tileStep = [&](OpBuilder &nb, Value t0, Value m, Value l,
                      bool inBounds) -> std::pair<Value, Value> {
    SmallVector<Value> xs;
    for (int64_t c = 0; c < chunks; ++c)
      xs.push_back(read(
          nb, arith::AddIOp::create(nb, loc, t0, cIdx(nb, c * vw)), inBounds));
    // Tree reductions keep the dependency chains short.
    auto treeReduce = [](SmallVector<Value> vals, auto combine) {
      while (vals.size() > 1) {
        SmallVector<Value> next;
        for (size_t i = 0; i + 1 < vals.size(); i += 2)
          next.push_back(combine(vals[i], vals[i + 1]));
        if (vals.size() % 2)
          next.push_back(vals.back());
        vals = std::move(next);
      }
      return vals.front();
    };
    Value mNew = maxF(nb, m, treeReduce(xs, [&](Value x, Value y) {
                        return maxF(nb, x, y);
                      }));
    Value mUse = guard(nb, mNew);
    SmallVector<Value> es;
    for (Value x : xs)
      es.push_back(
          buildFastExp(nb, loc, arith::SubFOp::create(nb, loc, x, mUse)));
    Value alpha =
        buildFastExp(nb, loc, arith::SubFOp::create(nb, loc, m, mUse));
    Value lNew = arith::AddFOp::create(
        nb, loc, arith::MulFOp::create(nb, loc, l, alpha),
        treeReduce(es, [&](Value x, Value y) { return addF(nb, x, y); }));
    return {mNew, lNew};
  };

  // Sweep 1 over the full tiles (in bounds), then the tail tile (masked).
  Value c0 = cIdx(b, 0), c1 = cIdx(b, 1);
  Value fullTiles = arith::DivUIOp::create(b, loc, rowLen, cIdx(b, tile));
  auto sweep = scf::ForOp::create(
      b, loc, c0, fullTiles, c1, ValueRange{splat(b, -inf), splat(b, 0.0f)},
      [&](OpBuilder &lb, Location, Value t, ValueRange iter) {
        Value t0 = arith::MulIOp::create(lb, loc, t, cIdx(lb, tile));
        auto [m, l] = tileStep(lb, t0, iter[0], iter[1], /*inBounds=*/true);
        scf::YieldOp::create(lb, loc, ValueRange{m, l});
      });
  Value tailStart = arith::MulIOp::create(b, loc, fullTiles, cIdx(b, tile));
  Value hasTail = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        tailStart, rowLen);
  auto tailIf = scf::IfOp::create(
      b, loc, hasTail,
      [&](OpBuilder &ib, Location) {
        auto [m, l] = tileStep(ib, tailStart, sweep.getResult(0),
                               sweep.getResult(1), /*inBounds=*/false);
        scf::YieldOp::create(ib, loc, ValueRange{m, l});
      },
      [&](OpBuilder &ib, Location) {
        scf::YieldOp::create(ib, loc, sweep.getResults());
      });
  Value mLanes = tailIf.getResult(0), lLanes = tailIf.getResult(1);

  // Combine the lanes: M = max(m), L = sum(l * exp(m - M)).
  Value m = vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXIMUMF,
                                        mLanes);
  Value mB = vector::BroadcastOp::create(b, loc, vf32, m);
  Value mUseB = guard(b, mB);
  Value scaled = arith::MulFOp::create(
      b, loc, lLanes,
      buildFastExp(b, loc, arith::SubFOp::create(b, loc, mLanes, mUseB)));
  Value l = vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD,
                                        scaled);

  // Sweep 2: y = exp(x - M) / L; L == 0 (an all -inf row) gives zeros.
  Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l,
                                      arith::ConstantOp::create(
                                          b, loc, b.getF32FloatAttr(0.0f)));
  Value inv = arith::DivFOp::create(
      b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)), l);
  inv = arith::SelectOp::create(
      b, loc, empty, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)),
      inv);
  Value invB = vector::BroadcastOp::create(b, loc, vf32, inv);
  auto writeChunk = [&](OpBuilder &nb, Value at, Value out,
                        bool inBounds) -> Value {
    Value x = read(nb, at, inBounds);
    Value e = buildFastExp(nb, loc, arith::SubFOp::create(nb, loc, x, mUseB));
    Value y = arith::MulFOp::create(nb, loc, e, invB);
    if (elt != f32)
      y = arith::TruncFOp::create(nb, loc, velt, y);
    return vector::TransferWriteOp::create(nb, loc, y, out, ValueRange{at},
                                           ArrayRef<bool>{inBounds})
        .getResult();
  };
  Value fullChunks = arith::DivUIOp::create(b, loc, rowLen, cIdx(b, vw));
  auto write = scf::ForOp::create(
      b, loc, c0, fullChunks, c1, ValueRange{rowOut},
      [&](OpBuilder &lb, Location, Value c, ValueRange iter) {
        Value at = arith::MulIOp::create(lb, loc, c, cIdx(lb, vw));
        scf::YieldOp::create(lb, loc,
                             writeChunk(lb, at, iter[0], /*inBounds=*/true));
      });
  Value chunkTail = arith::MulIOp::create(b, loc, fullChunks, cIdx(b, vw));
  Value hasChunkTail = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ult, chunkTail, rowLen);
  auto writeTail = scf::IfOp::create(
      b, loc, hasChunkTail,
      [&](OpBuilder &ib, Location) {
        scf::YieldOp::create(ib, loc,
                             writeChunk(ib, chunkTail, write.getResult(0),
                                        /*inBounds=*/false));
      },
      [&](OpBuilder &ib, Location) {
        scf::YieldOp::create(ib, loc, write.getResult(0));
      });
  return writeTail.getResult(0);
}

void fa::populateFAOnlineSoftmaxPatterns(RewritePatternSet &patterns,
                                         int64_t tileSize) {
  patterns.add<OnlineSoftmaxPattern>(patterns.getContext(), tileSize,
                                     /*vectorWidth=*/16);
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
  if (vectorWidth < 0) {
    mlir::emitError(getOperation()->getLoc())
        << "fa-online-softmax: vector-width must be 0 (scalar) or positive, "
           "got "
        << static_cast<int64_t>(vectorWidth);
    return signalPassFailure();
  }
  RewritePatternSet patterns(&getContext());
  patterns.add<OnlineSoftmaxPattern>(&getContext(), tileSize, vectorWidth);
  walkAndApplyPatterns(getOperation(), std::move(patterns));
}
