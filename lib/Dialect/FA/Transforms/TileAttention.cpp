//===- TileAttention.cpp - fa.attention to online-softmax tiles -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers fa.attention to an scf.forall over (batch, query head, query tile)
// around an scf.for over key/value tiles that carries the running max m, the
// running sum l and the partial output acc. See the pass description in
// Passes.td for the arithmetic.
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
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FATILEATTENTIONPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::lowering;

namespace {

using utils::IteratorType;

/// Everything the tile body needs to know about one fa.attention.
struct AttentionInfo {
  Value q, k, v, kvLens, mask, alibi, qSegments, kSegments, qOffset;
  /// The tensors the score_mod / mask_mod regions read.
  SmallVector<Value> modOperands;
  /// Nq and Nk (index).
  Value nq, nk;
  Type elementType;
  int64_t headDim, valueDim, group;
  float scale;
  AttentionSemantics sem;
  /// Mask dims 0 and 1 broadcast (static size 1).
  bool maskBroadcastsBatch = false, maskBroadcastsHeads = false;
};

/// Per (b, h, query tile) values used inside the KV loop.
struct TileContext {
  Value b, h, hkv, q0, qRows, diagOffset;
  Value slope;    // ALiBi slope of (b, h), f32; null without ALiBi
  Value qSegTile; // [rows] i32 query segment ids; null without segments
  Value qTile; // [rows, D] in the input element type
};

struct TileAttentionPattern final : OpRewritePattern<AttentionOp> {
  TileAttentionPattern(MLIRContext *ctx, AttentionTileSizes sizes)
      : OpRewritePattern<AttentionOp>(ctx), sizes(sizes) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override;

private:
  /// The end (exclusive) of the keys any row of this query tile attends,
  /// from the key lengths and causality; key tiles past it are skipped.
  Value buildKeyEnd(OpBuilder &b, Location loc, const AttentionInfo &info,
                    const TileContext &tc, Value nk) const;

  /// One iteration of the KV loop: returns the new (m, l, acc).
  SmallVector<Value> buildKVStep(OpBuilder &b, Location loc,
                                 const AttentionInfo &info,
                                 const TileContext &tc, Value k0, Value kCols,
                                 Value m, Value l, Value acc) const;

  AttentionTileSizes sizes;
};

} // namespace

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// min(a, b) on index values.
static Value minIndex(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MinSIOp::create(b, loc, x, y);
}

Value TileAttentionPattern::buildKeyEnd(OpBuilder &b, Location loc,
                                        const AttentionInfo &info,
                                        const TileContext &tc,
                                        Value nk) const {
  Value len;
  if (info.kvLens)
    len = tensor::ExtractOp::create(b, loc, info.kvLens, tc.b);
  Value keyEnd = info.sem.keyLengthEnd(b, loc, len, nk);
  return info.sem.visitedKeyEnd(b, loc, keyEnd, tc.q0, tc.qRows,
                                tc.diagOffset);
}

SmallVector<Value> TileAttentionPattern::buildKVStep(
    OpBuilder &b, Location loc, const AttentionInfo &info,
    const TileContext &tc, Value k0, Value kCols, Value m, Value l,
    Value acc) const {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  Value rows = tc.qRows;
  OpFoldResult one = b.getIndexAttr(1), zeroAttr = b.getIndexAttr(0);
  SmallVector<OpFoldResult> unitStrides(4, one);

  // K and V tiles: [kCols, D] and [kCols, Dv].
  auto kTileType =
      RankedTensorType::get({ShapedType::kDynamic, info.headDim},
                            info.elementType);
  auto vTileType =
      RankedTensorType::get({ShapedType::kDynamic, info.valueDim},
                            info.elementType);
  Value kTile = tensor::ExtractSliceOp::create(
      b, loc, kTileType, info.k,
      SmallVector<OpFoldResult>{tc.b, tc.hkv, k0, zeroAttr},
      SmallVector<OpFoldResult>{one, one, kCols, b.getIndexAttr(info.headDim)},
      unitStrides);
  Value vTile = tensor::ExtractSliceOp::create(
      b, loc, vTileType, info.v,
      SmallVector<OpFoldResult>{tc.b, tc.hkv, k0, zeroAttr},
      SmallVector<OpFoldResult>{one, one, kCols,
                                b.getIndexAttr(info.valueDim)},
      unitStrides);

  AffineExpr d0, d1, d2;
  bindDims(ctx, d0, d1, d2);
  auto map3 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(3, 0, r, ctx);
  };
  auto map2 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(2, 0, r, ctx);
  };
  auto map1 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(1, 0, r, ctx);
  };
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;

  // S = Q K^T, f32 accumulation: (i, j, d).
  Value sInit = buildFilled(b, loc, {rows, kCols}, f32, b.getF32FloatAttr(0));
  Value s = buildGeneric(
      b, loc, {tc.qTile, kTile}, {sInit},
      {map3({d0, d2}), map3({d1, d2}), map3({d0, d1})}, {par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value prod = arith::MulFOp::create(nb, nl, toF32(nb, nl, a[0]),
                                           toF32(nb, nl, a[1]));
        return {arith::AddFOp::create(nb, nl, a[2], prod)};
      })[0];

  // Scale, then masks, before the max: (i, j).
  ScoreTileOperands so;
  so.products = s;
  if (info.mask) {
    auto mType = cast<RankedTensorType>(info.mask.getType());
    auto mTileType = RankedTensorType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic}, mType.getElementType());
    OpFoldResult mb = info.maskBroadcastsBatch ? zeroAttr : OpFoldResult(tc.b);
    OpFoldResult mh = info.maskBroadcastsHeads ? zeroAttr : OpFoldResult(tc.h);
    so.maskTile = tensor::ExtractSliceOp::create(
        b, loc, mTileType, info.mask,
        SmallVector<OpFoldResult>{mb, mh, tc.q0, k0},
        SmallVector<OpFoldResult>{one, one, rows, kCols}, unitStrides);
  }
  if (tc.qSegTile) {
    so.qSegTile = tc.qSegTile;
    so.kSegTile = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type()),
        info.kSegments, SmallVector<OpFoldResult>{tc.b, k0},
        SmallVector<OpFoldResult>{one, kCols},
        SmallVector<OpFoldResult>{one, one});
  }
  so.q0 = tc.q0;
  so.k0 = k0;
  so.diagOffset = tc.diagOffset;
  so.slope = tc.slope;
  so.batch = tc.b;
  so.head = tc.h;
  so.nq = info.nq;
  so.nk = info.nk;
  so.modOperands = info.modOperands;
  so.scale = info.scale;
  Value scores = buildScoreTile(b, loc, info.sem, so)[0];

  // Tile row max, new running max.
  Value tmInit =
      buildFilled(b, loc, {rows}, f32,
                  b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  Value tileMax = buildGeneric(
      b, loc, {scores}, {tmInit}, {map2({d0, d1}), map2({d0})}, {par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::MaximumFOp::create(nb, nl, a[0], a[1])};
      })[0];
  Value rowEmpty =
      tensor::EmptyOp::create(b, loc, SmallVector<OpFoldResult>{rows}, f32);
  // m_new = max(m_old, rowmax); alpha = exp(m_old - m_new), guarded.
  // m_new is written over the loop-carried m (elementwise, so in place).
  SmallVector<Value> mAlpha = buildGeneric(
      b, loc, {m, tileMax}, {m, rowEmpty},
      {map1({d0}), map1({d0}), map1({d0}), map1({d0})}, {par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value mNew = arith::MaximumFOp::create(nb, nl, a[0], a[1]);
        Value mUse = guardedMax(nb, nl, mNew);
        Value alpha = math::ExpOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, a[0], mUse));
        return {mNew, alpha};
      });
  Value mNew = mAlpha[0], alpha = mAlpha[1];

  // P = exp(S - m_new), guarded: (i, j).
  Value pEmpty = tensor::EmptyOp::create(
      b, loc, SmallVector<OpFoldResult>{rows, kCols}, f32);
  Value p = buildGeneric(
      b, loc, {scores, mNew}, {pEmpty},
      {map2({d0, d1}), map2({d0}), map2({d0, d1})}, {par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value mUse = guardedMax(nb, nl, a[1]);
        return {math::ExpOp::create(nb, nl,
                                    arith::SubFOp::create(nb, nl, a[0], mUse))};
      })[0];

  // l_new = alpha * l + rowsum(P).
  Value lScaled = buildGeneric(
      b, loc, {alpha}, {l}, {map1({d0}), map1({d0})}, {par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::MulFOp::create(nb, nl, a[0], a[1])};
      })[0];
  Value lNew = buildGeneric(
      b, loc, {p}, {lScaled}, {map2({d0, d1}), map2({d0})}, {par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::AddFOp::create(nb, nl, a[0], a[1])};
      })[0];

  // acc_new = alpha * acc + P V: (i, d) then (i, d, j).
  Value accScaled = buildGeneric(
      b, loc, {alpha}, {acc}, {map2({d0}), map2({d0, d1})}, {par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::MulFOp::create(nb, nl, a[0], a[1])};
      })[0];
  // A masked key has p == 0; do not let a NaN/inf in its V row leak
  // through 0 * NaN when some keys of the tile can be masked.
  bool guardMaskedValues = info.sem.removesKeysInsideRange();
  Value accNew = buildGeneric(
      b, loc, {p, vTile}, {accScaled},
      {map3({d0, d2}), map3({d2, d1}), map3({d0, d1})}, {par, par, red},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value v = toF32(nb, nl, a[1]);
        Value prod = guardMaskedValues
                         ? maskedProduct(nb, nl, a[0], v)
                         : Value(arith::MulFOp::create(nb, nl, a[0], v));
        return {arith::AddFOp::create(nb, nl, a[2], prod)};
      })[0];
  return {mNew, lNew, accNew};
}

LogicalResult
TileAttentionPattern::matchAndRewrite(AttentionOp op,
                                      PatternRewriter &rewriter) const {
  if (op.isPaged() || op.isVarlen())
    return rewriter.notifyMatchFailure(op, "paged K/V or cu_seqlens");
  Location loc = op.getLoc();
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  Type f32 = rewriter.getF32Type();

  AttentionInfo info;
  info.q = op.getQuery();
  info.k = op.getKey();
  info.v = op.getValue();
  info.kvLens = op.getKvLens();
  info.mask = op.getMask();
  info.alibi = op.getAlibi();
  info.qSegments = op.getQSegments();
  info.kSegments = op.getKSegments();
  info.qOffset = op.getQOffset();
  info.elementType = qType.getElementType();
  info.headDim = qType.getDimSize(3);
  info.valueDim = vType.getDimSize(3);
  info.group = op.getGroupSize();
  info.scale = op.getEffectiveScale();
  info.sem = AttentionSemantics::get(op);
  if (info.mask) {
    auto mType = cast<RankedTensorType>(info.mask.getType());
    info.maskBroadcastsBatch = mType.getDimSize(0) == 1;
    info.maskBroadcastsHeads = mType.getDimSize(1) == 1;
  }

  Value c0 = cIndex(rewriter, loc, 0), c1 = cIndex(rewriter, loc, 1);
  Value batch = tensor::DimOp::create(rewriter, loc, info.q, 0);
  Value nq = tensor::DimOp::create(rewriter, loc, info.q, 2);
  Value nk = tensor::DimOp::create(rewriter, loc, info.k, 2);
  info.modOperands.assign(op.getModOperands().begin(),
                          op.getModOperands().end());
  info.nq = nq;
  info.nk = nk;
  Value blockQ = cIndex(rewriter, loc, sizes.blockQ);
  Value blockKV = cIndex(rewriter, loc, sizes.blockKV);
  Value numQTiles = arith::CeilDivUIOp::create(rewriter, loc, nq, blockQ);
  Value diagOffset =
      info.sem.diagonalOffset(rewriter, loc, nq, nk, info.qOffset);

  SmallVector<Value> sharedOuts = {op.getOutput()};
  if (op.getLse())
    sharedOuts.push_back(op.getLse());
  SmallVector<OpFoldResult> ubs = {batch, rewriter.getIndexAttr(qType.getDimSize(1)),
                                   numQTiles};
  auto forall = scf::ForallOp::create(rewriter, loc, ubs, sharedOuts,
                                      /*mapping=*/std::nullopt);
  OpBuilder b = OpBuilder::atBlockBegin(forall.getBody());
  SmallVector<Value> ivs = forall.getInductionVars();

  TileContext tc;
  tc.b = ivs[0];
  tc.h = ivs[1];
  tc.hkv = info.group == 1
               ? ivs[1]
               : Value(arith::DivUIOp::create(b, loc, ivs[1],
                                              cIndex(b, loc, info.group)));
  tc.q0 = arith::MulIOp::create(b, loc, ivs[2], blockQ);
  tc.qRows = minIndex(b, loc, blockQ, arith::SubIOp::create(b, loc, nq, tc.q0));
  tc.diagOffset = diagOffset;
  OpFoldResult one = b.getIndexAttr(1), zeroAttr = b.getIndexAttr(0);
  SmallVector<OpFoldResult> unitStrides(4, one);
  tc.qTile = tensor::ExtractSliceOp::create(
      b, loc,
      RankedTensorType::get({ShapedType::kDynamic, info.headDim},
                            info.elementType),
      info.q, SmallVector<OpFoldResult>{tc.b, tc.h, tc.q0, zeroAttr},
      SmallVector<OpFoldResult>{one, one, tc.qRows,
                                b.getIndexAttr(info.headDim)},
      unitStrides);
  tc.slope = AttentionSemantics::loadAlibiSlope(b, loc, info.alibi, tc.b, tc.h);
  if (info.qSegments)
    tc.qSegTile = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type()),
        info.qSegments, SmallVector<OpFoldResult>{tc.b, tc.q0},
        SmallVector<OpFoldResult>{one, tc.qRows},
        SmallVector<OpFoldResult>{one, one});

  // Running state: m = -inf, l = 0, acc = 0.
  Value mInit = buildFilled(
      b, loc, {tc.qRows}, f32,
      b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  Value lInit = buildFilled(b, loc, {tc.qRows}, f32, b.getF32FloatAttr(0));
  Value accInit =
      buildFilled(b, loc, {tc.qRows, b.getIndexAttr(info.valueDim)}, f32,
                  b.getF32FloatAttr(0));

  // Loop over the key tiles that any row of this query tile attends.
  // The window's left bound and the chunk start the loop past key 0; a
  // tile whose range is empty (begin >= end) runs no iteration.
  Value keyEnd = buildKeyEnd(b, loc, info, tc, nk);
  Value numKVTiles = arith::CeilDivUIOp::create(b, loc, keyEnd, blockKV);
  Value firstKVTile = c0;
  if (info.sem.hasWindowLeft() || info.sem.hasChunk())
    firstKVTile = arith::DivUIOp::create(
        b, loc, info.sem.visitedKeyBegin(b, loc, tc.q0, tc.diagOffset),
        blockKV);
  auto kvLoop = scf::ForOp::create(
      b, loc, firstKVTile, numKVTiles, c1, ValueRange{mInit, lInit, accInit},
      [&](OpBuilder &lb, Location ll, Value j, ValueRange iter) {
        Value k0 = arith::MulIOp::create(lb, ll, j, blockKV);
        Value kCols = minIndex(lb, ll, blockKV,
                               arith::SubIOp::create(lb, ll, keyEnd, k0));
        SmallVector<Value> next = buildKVStep(lb, ll, info, tc, k0, kCols,
                                              iter[0], iter[1], iter[2]);
        scf::YieldOp::create(lb, ll, next);
      });
  Value m = kvLoop.getResult(0), l = kvLoop.getResult(1),
        acc = kvLoop.getResult(2);

  // O = acc / l and LSE = m + log(l); a fully masked row (l == 0) gives
  // O = 0 and LSE = -inf.
  MLIRContext *ctx = rewriter.getContext();
  AffineExpr d0, d1;
  bindDims(ctx, d0, d1);
  // The epilogue writes straight into this tile's slice of the destination
  // so that bufferization needs no copy.
  ValueRange outs = forall.getRegionIterArgs();
  SmallVector<OpFoldResult> oOffsets = {tc.b, tc.h, tc.q0, zeroAttr};
  SmallVector<OpFoldResult> oSizes = {one, one, tc.qRows,
                                      b.getIndexAttr(info.valueDim)};
  Value oEmpty = tensor::ExtractSliceOp::create(
      b, loc,
      RankedTensorType::get({ShapedType::kDynamic, info.valueDim},
                            info.elementType),
      outs[0], oOffsets, oSizes, unitStrides);
  Value oTile = buildGeneric(
      b, loc, {acc, l}, {oEmpty},
      {AffineMap::get(2, 0, {d0, d1}, ctx), AffineMap::get(2, 0, {d0}, ctx),
       AffineMap::get(2, 0, {d0, d1}, ctx)},
      {IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {fromF32(nb, nl, guardedDivide(nb, nl, a[0], a[1]),
                        info.elementType)};
      })[0];
  Value lseTile;
  if (op.getLse()) {
    Value lseEmpty = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get({ShapedType::kDynamic}, f32), outs[1],
        SmallVector<OpFoldResult>{tc.b, tc.h, tc.q0},
        SmallVector<OpFoldResult>{one, one, tc.qRows},
        SmallVector<OpFoldResult>(3, one));
    lseTile = buildGeneric(
        b, loc, {m, l}, {lseEmpty},
        {AffineMap::get(1, 0, {d0}, ctx), AffineMap::get(1, 0, {d0}, ctx),
         AffineMap::get(1, 0, {d0}, ctx)},
        {IteratorType::parallel},
        [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
          return {guardedLogSumExp(nb, nl, a[0], a[1])};
        })[0];
  }

  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(b, loc, oTile, outs[0], oOffsets,
                                        oSizes, unitStrides);
  if (lseTile)
    tensor::ParallelInsertSliceOp::create(
        b, loc, lseTile, outs[1],
        SmallVector<OpFoldResult>{tc.b, tc.h, tc.q0},
        SmallVector<OpFoldResult>{one, one, tc.qRows},
        SmallVector<OpFoldResult>(3, one));

  rewriter.replaceOp(op, forall.getResults());
  return success();
}

void fa::populateFATileAttentionPatterns(RewritePatternSet &patterns,
                                         AttentionTileSizes sizes) {
  patterns.add<TileAttentionPattern>(patterns.getContext(), sizes);
}

namespace {
struct FATileAttentionPass final
    : fa::impl::FATileAttentionPassBase<FATileAttentionPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void FATileAttentionPass::runOnOperation() {
  if (blockQ <= 0 || blockKV <= 0) {
    mlir::emitError(getOperation()->getLoc())
        << "fa-tile-attention: block-q and block-kv must be positive, got "
           "block-q="
        << static_cast<int64_t>(blockQ)
        << " block-kv=" << static_cast<int64_t>(blockKV);
    return signalPassFailure();
  }
  if (failed(rejectCpuKernelOnlyForms(getOperation(), getArgument())))
    return signalPassFailure();
  RewritePatternSet patterns(&getContext());
  populateFATileAttentionPatterns(patterns, {blockQ, blockKV});
  walkAndApplyPatterns(getOperation(), std::move(patterns));
}
