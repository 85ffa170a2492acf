//===- LowerBlockMask.cpp - fa.create_block_mask to linalg ----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// fa.create_block_mask evaluates its mask_mod for every (row, key) of every
// tile pair: one linalg.generic over (b, h, query tile, key tile, row in
// tile, key in tile) reduces "some kept" and "all kept" over the in-range
// pairs, a second encodes them as 0 / 1 / 2 (i8).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"
#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FALOWERBLOCKMASKPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::lowering;

namespace {

struct LowerCreateBlockMask final : OpRewritePattern<CreateBlockMaskOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CreateBlockMaskOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto type = cast<RankedTensorType>(op.getResult().getType());
    int64_t tq = op.getTiles()[0], tk = op.getTiles()[1];
    Value nq = op.getQueryLen(), nk = op.getKeyLen();

    // The result's sizes: the static dims, or batch, heads and the tile
    // counts.
    auto tiles = [&](Value n, int64_t t) -> Value {
      return arith::CeilDivUIOp::create(
          rewriter, loc, n, arith::ConstantIndexOp::create(rewriter, loc, t));
    };
    Value sizesV[4] = {op.getBatch(), op.getHeads(), tiles(nq, tq),
                       tiles(nk, tk)};
    SmallVector<OpFoldResult> sizes;
    for (int64_t d = 0; d < 4; ++d)
      sizes.push_back(
          type.isDynamicDim(d)
              ? OpFoldResult(sizesV[d])
              : OpFoldResult(rewriter.getIndexAttr(type.getDimSize(d))));
    Type i1 = rewriter.getI1Type();
    Value anyInit = buildFilled(rewriter, loc, sizes, i1,
                                rewriter.getBoolAttr(false));
    Value allInit = buildFilled(rewriter, loc, sizes, i1,
                                rewriter.getBoolAttr(true));

    // (b, h, i, j, r, c): key tile j's key c against query tile i's row r.
    // The (r, c) extents come from an empty [TQ, TK] input.
    Value shape = tensor::EmptyOp::create(
        rewriter, loc, ArrayRef<int64_t>{tq, tk}, i1);
    AffineExpr b, h, i, j, r, c;
    bindDims(ctx, b, h, i, j, r, c);
    auto map6 = [&](ArrayRef<AffineExpr> e) {
      return AffineMap::get(6, 0, e, ctx);
    };
    using utils::IteratorType;
    IteratorType par = IteratorType::parallel, red = IteratorType::reduction;
    SmallVector<Value> reduced = buildGeneric(
        rewriter, loc, {shape}, {anyInit, allInit},
        {map6({r, c}), map6({b, h, i, j}), map6({b, h, i, j})},
        {par, par, par, par, red, red},
        [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
          Value q = arith::AddIOp::create(
              nb, nl,
              arith::MulIOp::create(nb, nl, loopIndex(nb, nl, 2),
                                    arith::ConstantIndexOp::create(nb, nl, tq)),
              loopIndex(nb, nl, 4));
          Value k = arith::AddIOp::create(
              nb, nl,
              arith::MulIOp::create(nb, nl, loopIndex(nb, nl, 3),
                                    arith::ConstantIndexOp::create(nb, nl, tk)),
              loopIndex(nb, nl, 5));
          Value inRange = arith::AndIOp::create(
              nb, nl,
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, q, nq),
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, k, nk));
          Value keep = AttentionSemantics::evaluateMaskMod(
              nb, nl, op.getMaskMod(),
              {loopIndex(nb, nl, 0), loopIndex(nb, nl, 1), q, k, nq, nk},
              op.getModOperands());
          Value t = arith::ConstantIntOp::create(nb, nl, 1, 1);
          // any |= inRange & keep; all &= !inRange | keep.
          Value some = arith::OrIOp::create(
              nb, nl, a[1], arith::AndIOp::create(nb, nl, inRange, keep));
          Value notIn = arith::XOrIOp::create(nb, nl, inRange, t);
          Value every = arith::AndIOp::create(
              nb, nl, a[2], arith::OrIOp::create(nb, nl, notIn, keep));
          return {some, every};
        });

    // 0 (none), 1 (some), 2 (all).
    AffineMap id = AffineMap::getMultiDimIdentityMap(4, ctx);
    Value out = tensor::EmptyOp::create(rewriter, loc, sizes,
                                        rewriter.getI8Type());
    Value encoded = buildGeneric(
        rewriter, loc, {reduced[0], reduced[1]}, {out}, {id, id, id},
        {par, par, par, par},
        [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
          Value c0 = arith::ConstantIntOp::create(nb, nl, 0, 8);
          Value c1 = arith::ConstantIntOp::create(nb, nl, 1, 8);
          Value c2 = arith::ConstantIntOp::create(nb, nl, 2, 8);
          Value partial = arith::SelectOp::create(nb, nl, a[1], c2, c1);
          return {arith::SelectOp::create(nb, nl, a[0], partial, c0)};
        })[0];
    if (encoded.getType() != type)
      encoded = tensor::CastOp::create(rewriter, loc, type, encoded);
    rewriter.replaceOp(op, encoded);
    return success();
  }
};

} // namespace

void fa::populateFALowerBlockMaskPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerCreateBlockMask>(patterns.getContext());
}

namespace {
struct FALowerBlockMaskPass final
    : fa::impl::FALowerBlockMaskPassBase<FALowerBlockMaskPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFALowerBlockMaskPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
