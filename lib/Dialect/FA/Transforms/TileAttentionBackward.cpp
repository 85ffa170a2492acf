//===- TileAttentionBackward.cpp - fa.attention_backward to tiles ---------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers fa.attention_backward to FlashAttention 2's backward loops on
// tensors: an scf.forall over (batch, key/value head) around an scf.for over
// key tiles whose dK / dV tiles are accumulated over the group's query heads
// and the query tiles, with dQ accumulated in f32 by the same task (it owns
// the query heads of its group). See the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"
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
#define GEN_PASS_DEF_FATILEATTENTIONBACKWARDPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::lowering;

namespace {

using utils::IteratorType;

struct TileAttentionBackwardPattern final
    : OpRewritePattern<AttentionBackwardOp> {
  TileAttentionBackwardPattern(MLIRContext *ctx, AttentionTileSizes sizes)
      : OpRewritePattern<AttentionBackwardOp>(ctx), sizes(sizes) {}

  LogicalResult matchAndRewrite(AttentionBackwardOp op,
                                PatternRewriter &rewriter) const override;

private:
  AttentionTileSizes sizes;
};

/// The accumulators of one key tile: dK and dV of its keys and the task's
/// dQ (f32 [G, Nq, D]).
struct BackwardState {
  Value dk, dv, dq;
};

/// What one (query tile, key tile) step reads.
struct BackwardTile {
  Value b, h, g, q0, rows, k0, kCols, kTile, vTile, diagOffset, slope;
};

class BackwardBuilder {
public:
  BackwardBuilder(AttentionBackwardOp op, Location loc) : op(op), loc(loc) {
    auto qType = cast<RankedTensorType>(op.getQuery().getType());
    elementType = qType.getElementType();
    headDim = op.getHeadDim();
    valueDim = op.getValueHeadDim();
    group = op.getGroupSize();
    scale = op.getEffectiveScale();
    sem = AttentionSemantics::get(op);
    if (Value mask = op.getMask()) {
      auto mType = cast<RankedTensorType>(mask.getType());
      maskBroadcastsBatch = mType.getDimSize(0) == 1;
      maskBroadcastsHeads = mType.getDimSize(1) == 1;
    }
  }

  /// Delta = rowsum(dO * O) in f32, [B, Hq, Nq].
  Value buildDelta(OpBuilder &b);

  /// One (query tile, key tile) step: the new accumulators.
  BackwardState buildStep(OpBuilder &b, const BackwardTile &t,
                          const BackwardState &acc, Value delta);

  AttentionBackwardOp op;
  Location loc;
  Type elementType;
  int64_t headDim, valueDim, group;
  float scale;
  AttentionSemantics sem;
  bool maskBroadcastsBatch = false, maskBroadcastsHeads = false;
  Value nq, nk;
};

} // namespace

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

static RankedTensorType dynRows(int64_t cols, Type elt) {
  return RankedTensorType::get({ShapedType::kDynamic, cols}, elt);
}

Value BackwardBuilder::buildDelta(OpBuilder &b) {
  MLIRContext *ctx = b.getContext();
  Value o = op.getOutput(), dO = op.getGradOutput();
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, o);
  sizes.pop_back();
  Value init = buildFilled(b, loc, sizes, b.getF32Type(), b.getF32FloatAttr(0));
  AffineExpr d0, d1, d2, d3;
  bindDims(ctx, d0, d1, d2, d3);
  AffineMap all = AffineMap::get(4, 0, {d0, d1, d2, d3}, ctx);
  AffineMap rows = AffineMap::get(4, 0, {d0, d1, d2}, ctx);
  return buildGeneric(
      b, loc, {dO, o}, {init}, {all, all, rows},
      {IteratorType::parallel, IteratorType::parallel, IteratorType::parallel,
       IteratorType::reduction},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value prod = arith::MulFOp::create(nb, nl, toF32(nb, nl, a[0]),
                                           toF32(nb, nl, a[1]));
        return {arith::AddFOp::create(nb, nl, a[2], prod)};
      })[0];
}

BackwardState BackwardBuilder::buildStep(OpBuilder &b, const BackwardTile &t,
                                         const BackwardState &acc,
                                         Value delta) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  SmallVector<OpFoldResult> unit4(4, one);
  AffineExpr d0, d1, d2;
  bindDims(ctx, d0, d1, d2);
  auto map3 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(3, 0, r, ctx);
  };
  auto map2 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(2, 0, r, ctx);
  };
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;
  auto rowSlice = [&](Value src, int64_t cols) {
    return tensor::ExtractSliceOp::create(
        b, loc, dynRows(cols, elementType), src,
        SmallVector<OpFoldResult>{t.b, t.h, t.q0, zero},
        SmallVector<OpFoldResult>{one, one, t.rows, b.getIndexAttr(cols)},
        unit4);
  };
  Value qTile = rowSlice(op.getQuery(), headDim);
  Value doTile = rowSlice(op.getGradOutput(), valueDim);
  auto vecType = RankedTensorType::get({ShapedType::kDynamic}, f32);
  auto rowVector = [&](Value src) {
    return tensor::ExtractSliceOp::create(
        b, loc, vecType, src, SmallVector<OpFoldResult>{t.b, t.h, t.q0},
        SmallVector<OpFoldResult>{one, one, t.rows},
        SmallVector<OpFoldResult>(3, one));
  };
  Value lseTile = rowVector(op.getLse());
  Value deltaTile = rowVector(delta);

  // A matmul-like generic over (d0, d1, d2) reducing d2, accumulating
  // into `init`; `guard` multiplies with maskedProduct (the first operand
  // is a probability-like factor that is 0 for removed keys).
  auto contract = [&](Value lhs, AffineMap lhsMap, Value rhs, AffineMap rhsMap,
                      Value init, bool guard) {
    return buildGeneric(
        b, loc, {lhs, rhs}, {init}, {lhsMap, rhsMap, map3({d0, d1})},
        {par, par, red},
        [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
          Value x = toF32(nb, nl, a[0]), y = toF32(nb, nl, a[1]);
          Value prod = guard ? maskedProduct(nb, nl, x, y)
                             : Value(arith::MulFOp::create(nb, nl, x, y));
          return {arith::AddFOp::create(nb, nl, a[2], prod)};
        })[0];
  };

  // S = Q K^T, then the forward's scores (and the softcap's derivative).
  Value sInit =
      buildFilled(b, loc, {t.rows, t.kCols}, f32, b.getF32FloatAttr(0));
  Value s = contract(qTile, map3({d0, d2}), t.kTile, map3({d1, d2}), sInit,
                     /*guard=*/false);
  ScoreTileOperands so;
  so.products = s;
  if (Value mask = op.getMask()) {
    auto mType = cast<RankedTensorType>(mask.getType());
    OpFoldResult mb = maskBroadcastsBatch ? zero : OpFoldResult(t.b);
    OpFoldResult mh = maskBroadcastsHeads ? zero : OpFoldResult(t.h);
    so.maskTile = tensor::ExtractSliceOp::create(
        b, loc,
        RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                              mType.getElementType()),
        mask, SmallVector<OpFoldResult>{mb, mh, t.q0, t.k0},
        SmallVector<OpFoldResult>{one, one, t.rows, t.kCols}, unit4);
  }
  if (op.getQSegments()) {
    auto segType =
        RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type());
    SmallVector<OpFoldResult> unit2(2, one);
    so.qSegTile = tensor::ExtractSliceOp::create(
        b, loc, segType, op.getQSegments(),
        SmallVector<OpFoldResult>{t.b, t.q0},
        SmallVector<OpFoldResult>{one, t.rows}, unit2);
    so.kSegTile = tensor::ExtractSliceOp::create(
        b, loc, segType, op.getKSegments(),
        SmallVector<OpFoldResult>{t.b, t.k0},
        SmallVector<OpFoldResult>{one, t.kCols}, unit2);
  }
  so.q0 = t.q0;
  so.k0 = t.k0;
  so.diagOffset = t.diagOffset;
  so.slope = t.slope;
  so.batch = t.b;
  so.head = t.h;
  so.nq = nq;
  so.nk = nk;
  so.scale = scale;
  SmallVector<Value> scored =
      buildScoreTile(b, loc, sem, so, /*withDerivative=*/true);

  // P = exp(S - LSE), 0 for removed keys and for rows with LSE = -inf.
  Value pEmpty = tensor::EmptyOp::create(
      b, loc, SmallVector<OpFoldResult>{t.rows, t.kCols}, f32);
  Value p = buildGeneric(
      b, loc, {scored[0], lseTile}, {pEmpty},
      {map2({d0, d1}), map2({d0}), map2({d0, d1})}, {par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {guardedProbability(nb, nl, a[0], a[1])};
      })[0];

  // dV += P^T dO: (key, d, row).
  Value dv = contract(p, map3({d2, d0}), doTile, map3({d2, d1}), acc.dv,
                      /*guard=*/false);

  // dP - Delta = dO V^T - Delta: (row, key, d), accumulated from -Delta.
  Value negDelta = buildGeneric(
      b, loc, {deltaTile},
      {tensor::EmptyOp::create(
          b, loc, SmallVector<OpFoldResult>{t.rows, t.kCols}, f32)},
      {map2({d0}), map2({d0, d1})}, {par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {arith::NegFOp::create(nb, nl, a[0])};
      })[0];
  Value dpDelta = contract(doTile, map3({d0, d2}), t.vTile, map3({d1, d2}),
                           negDelta, /*guard=*/false);

  // dS = scale * P * (dP - Delta) (times the softcap's derivative); a
  // removed key's dS is exactly 0 even when its V row held NaN or inf.
  SmallVector<Value> dsIns = {p, dpDelta};
  SmallVector<AffineMap> dsMaps = {map2({d0, d1}), map2({d0, d1})};
  if (scored.size() > 1) {
    dsIns.push_back(scored[1]);
    dsMaps.push_back(map2({d0, d1}));
  }
  dsMaps.push_back(map2({d0, d1}));
  Value dsEmpty = tensor::EmptyOp::create(
      b, loc, SmallVector<OpFoldResult>{t.rows, t.kCols}, f32);
  Value ds = buildGeneric(
      b, loc, dsIns, {dsEmpty}, dsMaps, {par, par},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value diff = a[1];
        if (dsIns.size() > 2)
          diff = arith::MulFOp::create(nb, nl, diff, a[2]);
        Value scaleC =
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(scale));
        diff = arith::MulFOp::create(nb, nl, diff, scaleC);
        return {maskedProduct(nb, nl, a[0], diff)};
      })[0];

  // dK += dS^T Q: (key, d, row).
  Value dk = contract(ds, map3({d2, d0}), qTile, map3({d2, d1}), acc.dk,
                      /*guard=*/false);

  // dQ[g, rows] += dS K: (row, d, key); a removed key's K row may hold
  // NaN or inf when keys inside the range can be removed.
  SmallVector<OpFoldResult> dqOffsets = {t.g, t.q0, zero};
  SmallVector<OpFoldResult> dqSizes = {one, t.rows, b.getIndexAttr(headDim)};
  SmallVector<OpFoldResult> unit3(3, one);
  Value dqTile = tensor::ExtractSliceOp::create(
      b, loc, dynRows(headDim, f32), acc.dq, dqOffsets, dqSizes, unit3);
  dqTile = contract(ds, map3({d0, d2}), t.kTile, map3({d2, d1}), dqTile,
                    sem.removesKeysInsideRange());
  Value dq = tensor::InsertSliceOp::create(b, loc, dqTile, acc.dq, dqOffsets,
                                           dqSizes, unit3);
  return {dk, dv, dq};
}

LogicalResult
TileAttentionBackwardPattern::matchAndRewrite(AttentionBackwardOp op,
                                              PatternRewriter &rewriter) const {
  Location loc = op.getLoc();
  BackwardBuilder bb(op, loc);
  Type f32 = rewriter.getF32Type();
  OpBuilder &b = rewriter;
  OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  SmallVector<OpFoldResult> unit4(4, one);
  int64_t hkv = op.getKvHeads(), g = bb.group;
  int64_t d = bb.headDim, dv = bb.valueDim;

  Value c0 = cIndex(b, loc, 0), c1 = cIndex(b, loc, 1);
  Value batch = tensor::DimOp::create(b, loc, op.getQuery(), 0);
  Value nq = tensor::DimOp::create(b, loc, op.getQuery(), 2);
  Value nk = tensor::DimOp::create(b, loc, op.getKey(), 2);
  bb.nq = nq;
  bb.nk = nk;
  Value blockQ = cIndex(b, loc, sizes.blockQ);
  Value blockKV = cIndex(b, loc, sizes.blockKV);
  Value numQTiles = arith::CeilDivUIOp::create(b, loc, nq, blockQ);
  Value diagOffset = bb.sem.diagonalOffset(b, loc, nq, nk, op.getQOffset());
  Value delta = bb.buildDelta(b);

  // dQ accumulates in f32 (in its destination when that is f32); keys no
  // row attends keep dK = dV = 0.
  bool inPlace = bb.elementType.isF32();
  Value dqAcc;
  if (inPlace) {
    Value zeroF = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
    dqAcc =
        linalg::FillOp::create(b, loc, zeroF, op.getGradQuery()).getResult(0);
  } else {
    dqAcc = buildFilled(b, loc, tensor::getMixedSizes(b, loc, op.getQuery()),
                        f32, b.getF32FloatAttr(0));
  }
  auto zeroOf = [&](Value dest) {
    Type elt = getElementTypeOrSelf(dest.getType());
    Value z = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
    return linalg::FillOp::create(b, loc, z, dest).getResult(0);
  };
  Value dkOut = zeroOf(op.getGradKey());
  Value dvOut = zeroOf(op.getGradValue());

  // One task per (batch, kv head): it owns dK / dV of that head and dQ of
  // the group's query heads, so the tasks never write the same element.
  SmallVector<OpFoldResult> ubs = {batch, b.getIndexAttr(hkv)};
  auto forall =
      scf::ForallOp::create(b, loc, ubs, ValueRange{dqAcc, dkOut, dvOut},
                            /*mapping=*/std::nullopt);
  OpBuilder tb = OpBuilder::atBlockBegin(forall.getBody());
  Value bIdx = forall.getInductionVars()[0];
  Value kvHead = forall.getInductionVars()[1];
  ValueRange shared = forall.getRegionIterArgs();
  Value headBase =
      g == 1
          ? kvHead
          : Value(arith::MulIOp::create(tb, loc, kvHead, cIndex(tb, loc, g)));
  SmallVector<OpFoldResult> dqTaskOffsets = {bIdx, headBase, zero, zero};
  SmallVector<OpFoldResult> dqTaskSizes = {one, tb.getIndexAttr(g), nq,
                                           tb.getIndexAttr(d)};
  auto dqTaskType = RankedTensorType::get({g, ShapedType::kDynamic, d}, f32);
  Value dqTask = tensor::ExtractSliceOp::create(
      tb, loc, dqTaskType, shared[0], dqTaskOffsets, dqTaskSizes, unit4);
  SmallVector<OpFoldResult> kvOffsets = {bIdx, kvHead, zero, zero};
  auto kvTaskSizes = [&](int64_t cols) {
    return SmallVector<OpFoldResult>{one, one, nk, tb.getIndexAttr(cols)};
  };
  Value dkTask = tensor::ExtractSliceOp::create(
      tb, loc, dynRows(d, bb.elementType), shared[1], kvOffsets, kvTaskSizes(d),
      unit4);
  Value dvTask = tensor::ExtractSliceOp::create(
      tb, loc, dynRows(dv, bb.elementType), shared[2], kvOffsets,
      kvTaskSizes(dv), unit4);

  Value len;
  if (Value lens = op.getKvLens())
    len = tensor::ExtractOp::create(tb, loc, lens, bIdx);
  Value keyEnd = bb.sem.keyLengthEnd(tb, loc, len, nk);
  Value numKTiles = arith::CeilDivUIOp::create(tb, loc, keyEnd, blockKV);
  auto kLoop = scf::ForOp::create(
      tb, loc, c0, numKTiles, c1, ValueRange{dqTask, dkTask, dvTask},
      [&](OpBuilder &kb, Location, Value j, ValueRange kIter) {
        Value k0 = arith::MulIOp::create(kb, loc, j, blockKV);
        Value kCols = arith::MinSIOp::create(
            kb, loc, blockKV, arith::SubIOp::create(kb, loc, keyEnd, k0));
        auto kvSlice = [&](Value src, int64_t cols) {
          return tensor::ExtractSliceOp::create(
              kb, loc, dynRows(cols, bb.elementType), src,
              SmallVector<OpFoldResult>{bIdx, kvHead, k0, zero},
              SmallVector<OpFoldResult>{one, one, kCols, kb.getIndexAttr(cols)},
              unit4);
        };
        Value kTile = kvSlice(op.getKey(), d);
        Value vTile = kvSlice(op.getValue(), dv);
        // The key tile's rows of the task's dK / dV; f32 gradients are
        // accumulated in place there, others in an f32 tile.
        SmallVector<OpFoldResult> rowOffsets = {k0, zero};
        SmallVector<OpFoldResult> unit2(2, one);
        auto rowSizes = [&](int64_t cols) {
          return SmallVector<OpFoldResult>{kCols, kb.getIndexAttr(cols)};
        };
        auto slot = [&](Value dest, int64_t cols) -> Value {
          return tensor::ExtractSliceOp::create(
              kb, loc, dynRows(cols, bb.elementType), dest, rowOffsets,
              rowSizes(cols), unit2);
        };
        auto accInit = [&](Value dest, int64_t cols) -> Value {
          Value zeroF =
              arith::ConstantOp::create(kb, loc, kb.getF32FloatAttr(0));
          Value init = inPlace ? slot(dest, cols)
                               : Value(tensor::EmptyOp::create(
                                     kb, loc, rowSizes(cols), f32));
          return linalg::FillOp::create(kb, loc, zeroF, init).getResult(0);
        };
        Value dkInit = accInit(kIter[1], d);
        Value dvInit = accInit(kIter[2], dv);
        auto gLoop = scf::ForOp::create(
            kb, loc, c0, cIndex(kb, loc, g), c1,
            ValueRange{dkInit, dvInit, kIter[0]},
            [&](OpBuilder &gb, Location, Value gi, ValueRange gIter) {
              Value h =
                  g == 1 ? headBase
                         : Value(arith::AddIOp::create(gb, loc, headBase, gi));
              Value slope = AttentionSemantics::loadAlibiSlope(
                  gb, loc, op.getAlibi(), bIdx, h);
              auto qLoop = scf::ForOp::create(
                  gb, loc, c0, numQTiles, c1, gIter,
                  [&](OpBuilder &qb, Location, Value i, ValueRange qIter) {
                    Value q0 = arith::MulIOp::create(qb, loc, i, blockQ);
                    Value rows = arith::MinSIOp::create(
                        qb, loc, blockQ,
                        arith::SubIOp::create(qb, loc, nq, q0));
                    // The pair is visited when some row of the query tile
                    // attends some key of the key tile by the positional
                    // rules (the forward's key range of the query tile).
                    Value end = bb.sem.visitedKeyEnd(qb, loc, keyEnd, q0, rows,
                                                     diagOffset);
                    Value begin =
                        bb.sem.visitedKeyBegin(qb, loc, q0, diagOffset);
                    Value visited = arith::AndIOp::create(
                        qb, loc,
                        arith::CmpIOp::create(
                            qb, loc, arith::CmpIPredicate::slt, k0, end),
                        arith::CmpIOp::create(
                            qb, loc, arith::CmpIPredicate::sgt,
                            arith::AddIOp::create(qb, loc, k0, kCols), begin));
                    auto ifOp =
                        scf::IfOp::create(qb, loc, qIter.getTypes(), visited,
                                          /*addElseBlock=*/true);
                    {
                      OpBuilder ib = ifOp.getThenBodyBuilder();
                      BackwardTile t{bIdx,  h,     gi,    q0,         rows, k0,
                                     kCols, kTile, vTile, diagOffset, slope};
                      BackwardState next = bb.buildStep(
                          ib, t, {qIter[0], qIter[1], qIter[2]}, delta);
                      scf::YieldOp::create(
                          ib, loc, ValueRange{next.dk, next.dv, next.dq});
                    }
                    {
                      OpBuilder eb = ifOp.getElseBodyBuilder();
                      scf::YieldOp::create(eb, loc, qIter);
                    }
                    scf::YieldOp::create(qb, loc, ifOp.getResults());
                  });
              scf::YieldOp::create(gb, loc, qLoop.getResults());
            });
        // Round this key tile's dK / dV once into the task's rows.
        auto store = [&](Value accTile, Value dest, int64_t cols) {
          Value rows = accTile;
          if (!inPlace) {
            AffineMap id =
                AffineMap::getMultiDimIdentityMap(2, kb.getContext());
            rows =
                buildGeneric(kb, loc, {accTile}, {slot(dest, cols)}, {id, id},
                             {IteratorType::parallel, IteratorType::parallel},
                             [&](OpBuilder &nb, Location nl,
                                 ValueRange a) -> SmallVector<Value> {
                               return {fromF32(nb, nl, a[0], bb.elementType)};
                             })[0];
          }
          return tensor::InsertSliceOp::create(kb, loc, rows, dest, rowOffsets,
                                               rowSizes(cols), unit2)
              .getResult();
        };
        Value dkNext = store(gLoop.getResult(0), kIter[1], d);
        Value dvNext = store(gLoop.getResult(1), kIter[2], dv);
        scf::YieldOp::create(kb, loc,
                             ValueRange{gLoop.getResult(2), dkNext, dvNext});
      });

  tb.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(tb, loc, kLoop.getResult(0), shared[0],
                                        dqTaskOffsets, dqTaskSizes, unit4);
  tensor::ParallelInsertSliceOp::create(tb, loc, kLoop.getResult(1), shared[1],
                                        kvOffsets, kvTaskSizes(d), unit4);
  tensor::ParallelInsertSliceOp::create(tb, loc, kLoop.getResult(2), shared[2],
                                        kvOffsets, kvTaskSizes(dv), unit4);

  // dQ rounded once into its destination.
  b.setInsertionPointAfter(forall);
  if (inPlace) {
    rewriter.replaceOp(op, forall.getResults());
    return success();
  }
  AffineMap id4 = AffineMap::getMultiDimIdentityMap(4, b.getContext());
  Value dq = buildGeneric(
      b, loc, {forall.getResult(0)}, {op.getGradQuery()}, {id4, id4},
      SmallVector<IteratorType>(4, IteratorType::parallel),
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        return {fromF32(nb, nl, a[0], bb.elementType)};
      })[0];
  rewriter.replaceOp(op, {dq, forall.getResult(1), forall.getResult(2)});
  return success();
}

void fa::populateFATileAttentionBackwardPatterns(RewritePatternSet &patterns,
                                                 AttentionTileSizes sizes) {
  patterns.add<TileAttentionBackwardPattern>(patterns.getContext(), sizes);
}

namespace {
struct FATileAttentionBackwardPass final
    : fa::impl::FATileAttentionBackwardPassBase<FATileAttentionBackwardPass> {
  using Base::Base;
  void runOnOperation() override {
    if (blockQ <= 0 || blockKV <= 0) {
      mlir::emitError(getOperation()->getLoc())
          << "fa-tile-attention-backward: block-q and block-kv must be "
             "positive, got block-q="
          << static_cast<int64_t>(blockQ)
          << " block-kv=" << static_cast<int64_t>(blockKV);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateFATileAttentionBackwardPatterns(patterns, {blockQ, blockKV});
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
