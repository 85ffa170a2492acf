//===- AttentionSemantics.cpp - the rules of fa.attention, once -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Causal alignment
//===----------------------------------------------------------------------===//

std::optional<CausalKind> fa::parseCausalKind(StringRef name) {
  std::string spelled = name.str();
  for (char &c : spelled)
    if (c == '-')
      c = '_';
  return symbolizeCausalKind(spelled);
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// `v` splatted to the shape of `like` when `like` is a vector and `v` a
/// scalar; `v` otherwise.
static Value matchShape(OpBuilder &b, Location loc, Value v, Value like) {
  auto vt = dyn_cast<VectorType>(like.getType());
  if (!vt || isa<VectorType>(v.getType()))
    return v;
  return vector::BroadcastOp::create(
      b, loc, VectorType::get(vt.getShape(), v.getType()), v);
}

/// `x op y` with a scalar operand splatted to the other's vector type.
static Value cmpI(OpBuilder &b, Location loc, arith::CmpIPredicate p, Value x,
                  Value y) {
  x = matchShape(b, loc, x, y);
  y = matchShape(b, loc, y, x);
  return arith::CmpIOp::create(b, loc, p, x, y);
}

static Value addI(OpBuilder &b, Location loc, Value x, Value y) {
  x = matchShape(b, loc, x, y);
  y = matchShape(b, loc, y, x);
  return arith::AddIOp::create(b, loc, x, y);
}

static Value subI(OpBuilder &b, Location loc, Value x, Value y) {
  x = matchShape(b, loc, x, y);
  y = matchShape(b, loc, y, x);
  return arith::SubIOp::create(b, loc, x, y);
}

static Value andI(OpBuilder &b, Location loc, Value x, Value y) {
  if (!x)
    return y;
  if (!y)
    return x;
  x = matchShape(b, loc, x, y);
  y = matchShape(b, loc, y, x);
  return arith::AndIOp::create(b, loc, x, y);
}

static Value orI(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::OrIOp::create(b, loc, x, y);
}

static Value minS(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MinSIOp::create(b, loc, x, y);
}

static Value maxS(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MaxSIOp::create(b, loc, x, y);
}

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// floor(x / c) for an index scalar or vector `x` and a constant c > 0.
static Value floorDivC(OpBuilder &b, Location loc, Value x, int64_t c) {
  Value cv = matchShape(b, loc, cIndex(b, loc, c), x);
  return arith::FloorDivSIOp::create(b, loc, x, cv);
}

static Value mulC(OpBuilder &b, Location loc, Value x, int64_t c) {
  Value cv = matchShape(b, loc, cIndex(b, loc, c), x);
  return arith::MulIOp::create(b, loc, x, cv);
}

/// A constant of the element type of `like` (f32 scalar or vector).
static Value cFloatLike(OpBuilder &b, Location loc, Value like, double v) {
  Type t = like.getType();
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(vt, b.getFloatAttr(vt.getElementType(), v)));
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
}

/// `v` as f32 (scalar or vector), extending f16/bf16.
static Value extToF32(OpBuilder &b, Location loc, Value v) {
  Type t = v.getType();
  Type elt = getElementTypeOrSelf(t);
  if (elt.isF32())
    return v;
  Type f32 = b.getF32Type();
  if (auto vt = dyn_cast<VectorType>(t))
    f32 = VectorType::get(vt.getShape(), f32);
  return arith::ExtFOp::create(b, loc, f32, v);
}

//===----------------------------------------------------------------------===//
// AttentionSemantics
//===----------------------------------------------------------------------===//

AttentionSemantics AttentionSemantics::get(CausalKind causal,
                                           bool hasKeyLengths,
                                           Type maskElementType,
                                           const AttentionModifiers &mods) {
  AttentionSemantics s;
  s.mods = mods;
  s.causal = causal;
  s.keyLengths = hasKeyLengths;
  s.maskElementType = maskElementType;
  if (maskElementType)
    s.mask = isa<IntegerType>(maskElementType) ? MaskKind::Keep
                                                : MaskKind::Additive;
  return s;
}

/// The built-in modifiers of an op, from its attributes and operands.
static AttentionModifiers builtinModifiers(DenseI64ArrayAttr window,
                                           FloatAttr softcap, IntegerAttr chunk,
                                           Value alibi, Value qSegments,
                                           Value qOffset) {
  AttentionModifiers mods;
  if (window) {
    mods.windowLeft = window[0];
    mods.windowRight = window[1];
  }
  if (softcap)
    mods.softcap = softcap.getValueAsDouble();
  if (chunk)
    mods.chunk = chunk.getInt();
  mods.alibi = static_cast<bool>(alibi);
  mods.segments = static_cast<bool>(qSegments);
  mods.qOffset = static_cast<bool>(qOffset);
  return mods;
}

static Type maskElementTypeOf(Value mask) {
  return mask ? getElementTypeOrSelf(mask.getType()) : Type();
}

AttentionSemantics AttentionSemantics::get(AttentionOp op) {
  AttentionModifiers mods = builtinModifiers(
      op.getWindowAttr(), op.getSoftcapAttr(), op.getChunkAttr(), op.getAlibi(),
      op.getQSegments(), op.getQOffset());
  if (op.hasScoreMod())
    mods.scoreMod = &op.getScoreMod();
  if (op.hasMaskMod())
    mods.maskMod = &op.getMaskMod();
  if (DenseI64ArrayAttr tiles = op.getBlockTilesAttr();
      tiles && op.getBlockMask() && tiles.size() == 2) {
    mods.blockTileQ = tiles[0];
    mods.blockTileKV = tiles[1];
  }
  return get(op.getCausal(), static_cast<bool>(op.getKvLens()),
             maskElementTypeOf(op.getMask()), mods);
}

AttentionSemantics AttentionSemantics::get(AttentionBackwardOp op) {
  AttentionModifiers mods = builtinModifiers(
      op.getWindowAttr(), op.getSoftcapAttr(), op.getChunkAttr(), op.getAlibi(),
      op.getQSegments(), op.getQOffset());
  return get(op.getCausal(), static_cast<bool>(op.getKvLens()),
             maskElementTypeOf(op.getMask()), mods);
}

Value AttentionSemantics::diagonalOffset(OpBuilder &b, Location loc, Value nq,
                                         Value nk, Value qOffset) const {
  // top_left (and no causality) aligns the first query with the first key.
  Value off = causal == CausalKind::bottom_right
                  ? Value(arith::SubIOp::create(b, loc, nk, nq))
                  : cIndex(b, loc, 0);
  if (qOffset)
    off = arith::AddIOp::create(b, loc, off, qOffset);
  return off;
}

Value AttentionSemantics::visitedKeyBegin(OpBuilder &b, Location loc, Value q0,
                                          Value off) const {
  Value begin = cIndex(b, loc, 0);
  Value pos = addI(b, loc, q0, off);
  if (hasWindowLeft())
    begin =
        maxS(b, loc, begin, subI(b, loc, pos, cIndex(b, loc, mods.windowLeft)));
  if (hasChunk())
    begin = maxS(b, loc, begin,
                 mulC(b, loc, floorDivC(b, loc, pos, mods.chunk), mods.chunk));
  return begin;
}

Value AttentionSemantics::visitedTileBegin(OpBuilder &b, Location loc,
                                           Value q0, Value off,
                                           int64_t tile) const {
  if (!hasWindowLeft() && !hasChunk())
    return Value();
  // visitedKeyBegin is >= 0: unsigned division rounds down.
  Value first = visitedKeyBegin(b, loc, q0, off);
  Value t = cIndex(b, loc, tile);
  return arith::MulIOp::create(b, loc,
                               arith::DivUIOp::create(b, loc, first, t), t);
}

Value AttentionSemantics::visitedKeyCount(OpBuilder &b, Location loc,
                                          Value begin, Value end) {
  if (!begin)
    return end;
  // end may lie below begin: nothing is visited.
  return maxS(b, loc, subI(b, loc, end, begin), cIndex(b, loc, 0));
}

bool AttentionSemantics::canUseBlockMask(int64_t blockQ,
                                         int64_t blockKV) const {
  return hasMaskMod() && mods.blockTileQ > 0 && mods.blockTileKV > 0 &&
         blockQ > 0 && blockKV > 0 && mods.blockTileQ % blockQ == 0 &&
         mods.blockTileKV % blockKV == 0;
}

Value AttentionSemantics::loadBlockMaskEntry(OpBuilder &b, Location loc,
                                             Value blockMask, Value batch,
                                             Value head, Value q0,
                                             Value k0) const {
  auto type = cast<MemRefType>(blockMask.getType());
  Value zero = cIndex(b, loc, 0);
  Value bb = type.getDimSize(0) == 1 ? zero : batch;
  Value bh = type.getDimSize(1) == 1 ? zero : head;
  Value qTile = arith::DivUIOp::create(b, loc, q0,
                                       cIndex(b, loc, mods.blockTileQ));
  Value lastKTile =
      subI(b, loc, memref::DimOp::create(b, loc, blockMask, 3),
           cIndex(b, loc, 1));
  Value kTile = arith::MinUIOp::create(
      b, loc,
      arith::DivUIOp::create(b, loc, k0, cIndex(b, loc, mods.blockTileKV)),
      lastKTile);
  return memref::LoadOp::create(b, loc, blockMask,
                                ValueRange{bb, bh, qTile, kTile});
}

Value AttentionSemantics::loadAlibiSlope(OpBuilder &b, Location loc,
                                         Value slopes, Value batch,
                                         Value head) {
  if (!slopes)
    return Value();
  SmallVector<Value> at;
  if (cast<ShapedType>(slopes.getType()).getRank() == 2)
    at.push_back(batch);
  at.push_back(head);
  if (isa<RankedTensorType>(slopes.getType()))
    return tensor::ExtractOp::create(b, loc, slopes, at);
  return memref::LoadOp::create(b, loc, slopes, at);
}

AttentionSemantics::Sequence
AttentionSemantics::loadSequence(OpBuilder &b, Location loc, Value cu,
                                 Value batch, Value total) {
  auto at = [&](Value i) -> Value {
    return arith::IndexCastOp::create(
        b, loc, b.getIndexType(), memref::LoadOp::create(b, loc, cu, i));
  };
  Value zero = cIndex(b, loc, 0);
  Value start = minS(b, loc, maxS(b, loc, at(batch), zero), total);
  Value next = arith::AddIOp::create(b, loc, batch, cIndex(b, loc, 1));
  Value end = minS(b, loc, maxS(b, loc, at(next), start), total);
  return {start, arith::SubIOp::create(b, loc, end, start)};
}

AttentionSemantics::SequencePair
AttentionSemantics::loadSequences(OpBuilder &b, Location loc, Value cuQ,
                                  Value cuK, Value batch, Value q, Value k) {
  return {loadSequence(b, loc, cuQ, batch, memref::DimOp::create(b, loc, q, 0)),
          loadSequence(b, loc, cuK, batch,
                       memref::DimOp::create(b, loc, k, 0))};
}

AttentionSemantics::PackedRow
AttentionSemantics::unpackGqaRow(OpBuilder &b, Location loc, Value row,
                                 Value kvHead, int64_t group) {
  // `row` may be a vector of rows (one per lane); kvHead is a scalar.
  Value g = cIndex(b, loc, group);
  Value base = matchShape(b, loc, arith::MulIOp::create(b, loc, kvHead, g),
                          row);
  g = matchShape(b, loc, g, row);
  Value query = arith::DivUIOp::create(b, loc, row, g);
  Value inGroup = arith::RemUIOp::create(b, loc, row, g);
  return {query, arith::AddIOp::create(b, loc, inGroup, base)};
}

AttentionSemantics::TileRange
AttentionSemantics::splitTileRange(OpBuilder &b, Location loc, Value numTiles,
                                   Value part, Value numParts) {
  Value chunk = arith::CeilDivUIOp::create(b, loc, numTiles, numParts);
  Value begin = arith::MinUIOp::create(
      b, loc, arith::MulIOp::create(b, loc, part, chunk), numTiles);
  Value end = arith::MinUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, begin, chunk), numTiles);
  return {begin, end};
}

AttentionSemantics::QueryRange
AttentionSemantics::packedQueryRange(OpBuilder &b, Location loc, Value r0,
                                     Value rows, int64_t group) {
  Value g = cIndex(b, loc, group);
  Value one = cIndex(b, loc, 1);
  Value q0 = arith::DivUIOp::create(b, loc, r0, g);
  Value last = arith::DivUIOp::create(
      b, loc,
      arith::SubIOp::create(b, loc, arith::AddIOp::create(b, loc, r0, rows),
                            one),
      g);
  return {q0, arith::AddIOp::create(
                  b, loc, arith::SubIOp::create(b, loc, last, q0), one)};
}

Value AttentionSemantics::pagedKeyCount(OpBuilder &b, Location loc,
                                        Value blockTable, int64_t pageSize) {
  return arith::MulIOp::create(b, loc,
                               memref::DimOp::create(b, loc, blockTable, 1),
                               cIndex(b, loc, pageSize));
}

Value AttentionSemantics::pagedKeyEnd(OpBuilder &b, Location loc, Value cache,
                                      Value keyEnd) {
  Value zero = cIndex(b, loc, 0);
  Value noPages =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                            memref::DimOp::create(b, loc, cache, 0), zero);
  return arith::SelectOp::create(b, loc, noPages, zero, keyEnd);
}

AttentionSemantics::PagedRow
AttentionSemantics::pagedKeyRow(OpBuilder &b, Location loc, Value blockTable,
                                Value cache, int64_t pageSize, Value batch,
                                Value key) {
  Value s = cIndex(b, loc, pageSize);
  Value entry = memref::LoadOp::create(
      b, loc, blockTable,
      ValueRange{batch, arith::DivUIOp::create(b, loc, key, s)});
  Value page = arith::IndexCastOp::create(b, loc, b.getIndexType(), entry);
  Value lastPage = maxS(
      b, loc,
      arith::SubIOp::create(b, loc, memref::DimOp::create(b, loc, cache, 0),
                            cIndex(b, loc, 1)),
      cIndex(b, loc, 0));
  page = minS(b, loc, maxS(b, loc, page, cIndex(b, loc, 0)), lastPage);
  return {page, arith::RemUIOp::create(b, loc, key, s)};
}

AttentionSemantics::MergeWeight
AttentionSemantics::mergeWeight(OpBuilder &b, Location loc, Value lse,
                                Value m) {
  Value ninf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value empty =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lse, ninf);
  Value noMax =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, ninf);
  Value mu = arith::SelectOp::create(b, loc, noMax, zero, m);
  return {math::ExpOp::create(b, loc, arith::SubFOp::create(b, loc, lse, mu)),
          empty};
}

Value AttentionSemantics::mergedOutput(OpBuilder &b, Location loc, Value acc,
                                       Value l) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value none =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, zero);
  Value q = arith::DivFOp::create(b, loc, acc, matchShape(b, loc, l, acc));
  return arith::SelectOp::create(b, loc, matchShape(b, loc, none, acc),
                                 matchShape(b, loc, zero, acc), q);
}

Value AttentionSemantics::mergedLse(OpBuilder &b, Location loc, Value m,
                                    Value l) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value ninf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  Value none =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, zero);
  Value lse = arith::AddFOp::create(b, loc, m, math::LogOp::create(b, loc, l));
  return arith::SelectOp::create(b, loc, none, ninf, lse);
}

Value AttentionSemantics::keyLengthEnd(OpBuilder &b, Location loc, Value len,
                                       Value nk) const {
  if (!len)
    return nk;
  Value idx = len;
  if (!idx.getType().isIndex())
    idx = arith::IndexCastOp::create(b, loc, b.getIndexType(), len);
  return minS(b, loc, maxS(b, loc, idx, cIndex(b, loc, 0)), nk);
}

Value AttentionSemantics::visitedKeyEnd(OpBuilder &b, Location loc,
                                        Value keyEnd, Value q0, Value rows,
                                        Value off) const {
  if (!isCausal() && !hasWindowRight() && !hasChunk())
    return keyEnd;
  // The last row q0 + rows - 1 is at position q0 + rows - 1 + off, so the
  // keys it keeps causally end at q0 + rows + off.
  Value diagEnd = addI(b, loc, addI(b, loc, q0, rows), off);
  Value c0 = cIndex(b, loc, 0);
  Value end = keyEnd;
  auto bound = [&](Value e) { end = minS(b, loc, maxS(b, loc, e, c0), end); };
  if (isCausal())
    bound(diagEnd);
  if (hasWindowRight())
    bound(addI(b, loc, diagEnd, cIndex(b, loc, mods.windowRight)));
  if (hasChunk()) {
    Value lastPos = subI(b, loc, diagEnd, cIndex(b, loc, 1));
    bound(mulC(
        b, loc,
        addI(b, loc, floorDivC(b, loc, lastPos, mods.chunk), cIndex(b, loc, 1)),
        mods.chunk));
  }
  return end;
}

Value AttentionSemantics::crossesDiagonal(OpBuilder &b, Location loc, Value k0,
                                          Value cols, Value firstRow,
                                          Value off) const {
  if (!isCausal())
    return arith::ConstantIntOp::create(b, loc, 0, 1);
  Value lastKey = subI(b, loc, addI(b, loc, k0, cols), cIndex(b, loc, 1));
  return cmpI(b, loc, arith::CmpIPredicate::sgt, lastKey,
              lastCausalKey(b, loc, firstRow, off));
}

Value AttentionSemantics::tileNeedsElementMask(OpBuilder &b, Location loc,
                                               Value k0, Value cols,
                                               Value keyEnd, Value firstRow,
                                               Value off, Value rows,
                                               const SegmentRange *qSeg,
                                               const SegmentRange *kSeg,
                                               Value maskModPartial) const {
  if (hasMask() || (hasMaskMod() && !maskModPartial) ||
      (hasSegments() && !(qSeg && kSeg)) ||
      (!rows && (hasWindowLeft() || hasChunk())))
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  Value need = cmpI(b, loc, arith::CmpIPredicate::sgt, addI(b, loc, k0, cols),
                    keyEnd);
  if (hasSegments())
    need = orI(b, loc, need, segmentTileNeedsMask(b, loc, *qSeg, *kSeg));
  if (hasMaskMod())
    need = orI(b, loc, need, maskModPartial);
  if (isCausal())
    need = orI(b, loc, need, crossesDiagonal(b, loc, k0, cols, firstRow, off));
  if (!hasWindowLeft() && !hasWindowRight() && !hasChunk())
    return need;
  Value c1 = cIndex(b, loc, 1);
  Value firstPos = addI(b, loc, firstRow, off);
  Value lastKey = subI(b, loc, addI(b, loc, k0, cols), c1);
  Value lastPos;
  if (rows)
    lastPos = subI(b, loc, addI(b, loc, firstPos, rows), c1);
  // The first row bounds the keys from above, the last from below.
  if (hasWindowRight())
    need = orI(b, loc, need,
               cmpI(b, loc, arith::CmpIPredicate::sgt, lastKey,
                    addI(b, loc, firstPos, cIndex(b, loc, mods.windowRight))));
  if (hasWindowLeft())
    need = orI(b, loc, need,
               cmpI(b, loc, arith::CmpIPredicate::slt, k0,
                    subI(b, loc, lastPos, cIndex(b, loc, mods.windowLeft))));
  if (hasChunk()) {
    // Full iff the first row's chunk is the last key's and the last row's
    // chunk the first key's (chunks grow with positions).
    int64_t c = mods.chunk;
    need = orI(b, loc, need,
               cmpI(b, loc, arith::CmpIPredicate::ne,
                    floorDivC(b, loc, firstPos, c),
                    floorDivC(b, loc, lastKey, c)));
    need = orI(b, loc, need,
               cmpI(b, loc, arith::CmpIPredicate::ne,
                    floorDivC(b, loc, lastPos, c), floorDivC(b, loc, k0, c)));
  }
  return need;
}

Value AttentionSemantics::segmentTileVisited(OpBuilder &b, Location loc,
                                             SegmentRange q,
                                             SegmentRange k) const {
  if (!hasSegments())
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  // Two ranges of ids overlap iff neither lies wholly below the other.
  Value below = cmpI(b, loc, arith::CmpIPredicate::slt, k.max, q.min);
  Value above = cmpI(b, loc, arith::CmpIPredicate::sgt, k.min, q.max);
  Value disjoint = orI(b, loc, below, above);
  return arith::XOrIOp::create(b, loc, disjoint,
                               arith::ConstantIntOp::create(b, loc, 1, 1));
}

Value AttentionSemantics::segmentTileNeedsMask(OpBuilder &b, Location loc,
                                               SegmentRange q,
                                               SegmentRange k) const {
  if (!hasSegments())
    return arith::ConstantIntOp::create(b, loc, 0, 1);
  // Full iff all four bounds are one id.
  Value need = cmpI(b, loc, arith::CmpIPredicate::ne, q.min, q.max);
  need = orI(b, loc, need, cmpI(b, loc, arith::CmpIPredicate::ne, k.min, k.max));
  return orI(b, loc, need,
             cmpI(b, loc, arith::CmpIPredicate::ne, q.min, k.min));
}

Value AttentionSemantics::lastCausalKey(OpBuilder &b, Location loc, Value q,
                                        Value off) const {
  if (!isCausal())
    return Value();
  return addI(b, loc, q, off);
}

Value AttentionSemantics::firstCausalQuery(OpBuilder &b, Location loc, Value k,
                                           Value off) const {
  if (!isCausal())
    return Value();
  return subI(b, loc, k, off);
}

Value AttentionSemantics::keepKey(OpBuilder &b, Location loc, Value q, Value k,
                                  Value keyEnd, Value off) const {
  Value keep;
  if (keyEnd)
    keep = cmpI(b, loc, arith::CmpIPredicate::slt, k, keyEnd);
  if (isCausal())
    keep = andI(b, loc, keep,
                cmpI(b, loc, arith::CmpIPredicate::sle, k,
                     lastCausalKey(b, loc, q, off)));
  if (!hasWindowLeft() && !hasWindowRight() && !hasChunk())
    return keep;
  Value pos = addI(b, loc, q, off);
  if (hasWindowLeft())
    keep = andI(b, loc, keep,
                cmpI(b, loc, arith::CmpIPredicate::sge, k,
                     subI(b, loc, pos, cIndex(b, loc, mods.windowLeft))));
  if (hasWindowRight())
    keep = andI(b, loc, keep,
                cmpI(b, loc, arith::CmpIPredicate::sle, k,
                     addI(b, loc, pos, cIndex(b, loc, mods.windowRight))));
  if (hasChunk()) {
    // Splat first so that both quotients have the same shape.
    pos = matchShape(b, loc, pos, k);
    Value kk = matchShape(b, loc, k, pos);
    keep = andI(b, loc, keep,
                cmpI(b, loc, arith::CmpIPredicate::eq,
                     floorDivC(b, loc, pos, mods.chunk),
                     floorDivC(b, loc, kk, mods.chunk)));
  }
  return keep;
}

void AttentionSemantics::applySegments(OpBuilder &b, Location loc, Value qSeg,
                                       Value kSeg, Value &keep) const {
  if (!hasSegments())
    return;
  keep = andI(b, loc, keep, cmpI(b, loc, arith::CmpIPredicate::eq, qSeg, kSeg));
}

Value AttentionSemantics::modifyScore(OpBuilder &b, Location loc, Value score,
                                      Value q, Value k, Value off, Value slope,
                                      double factor) const {
  Value x = score;
  if (hasSoftcap()) {
    // c * tanh(s / c); in the exp2 domain x = s * factor, so the cap is
    // c * factor.
    Value cap = cFloatLike(b, loc, x, *mods.softcap * factor);
    x = arith::MulFOp::create(
        b, loc, cap,
        math::TanhOp::create(b, loc, arith::DivFOp::create(b, loc, x, cap)));
  }
  if (hasAlibi() && slope) {
    Value d = subI(b, loc, addI(b, loc, q, off), k);
    d = matchShape(b, loc, d, x);
    Value zero = matchShape(b, loc, cIndex(b, loc, 0), d);
    Value neg = arith::SubIOp::create(b, loc, zero, d);
    Value isNeg =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, d, zero);
    Value dist = arith::SelectOp::create(b, loc, isNeg, neg, d);
    Type i64 = b.getI64Type();
    if (auto vt = dyn_cast<VectorType>(dist.getType()))
      i64 = VectorType::get(vt.getShape(), i64);
    Value distI = arith::IndexCastOp::create(b, loc, i64, dist);
    Value distF = arith::SIToFPOp::create(b, loc, x.getType(), distI);
    Value s = slope;
    if (factor != 1.0)
      s = arith::MulFOp::create(b, loc, s, cFloatLike(b, loc, s, factor));
    s = matchShape(b, loc, s, x);
    x = arith::SubFOp::create(b, loc, x,
                              arith::MulFOp::create(b, loc, s, distF));
  }
  return x;
}

Value AttentionSemantics::scoreDerivative(OpBuilder &b, Location loc,
                                          Value score) const {
  if (!hasSoftcap())
    return Value();
  // d/ds c tanh(s / c) = 1 - tanh(s / c)^2.
  Value cap = cFloatLike(b, loc, score, *mods.softcap);
  Value t =
      math::TanhOp::create(b, loc, arith::DivFOp::create(b, loc, score, cap));
  return arith::SubFOp::create(b, loc, cFloatLike(b, loc, score, 1.0),
                               arith::MulFOp::create(b, loc, t, t));
}

//===----------------------------------------------------------------------===//
// Modifier regions
//===----------------------------------------------------------------------===//

/// `type` with the shape of the vector `shape` (a scalar type when `shape`
/// is null).
static Type withShape(Type type, VectorType shape) {
  return shape ? VectorType::get(shape.getShape(), type) : type;
}

/// Clones the scalar `op` with `operands`; a tensor.extract whose source
/// became a memref becomes a memref.load.
static Operation *cloneScalar(OpBuilder &b, Operation &op,
                              ArrayRef<Value> operands) {
  if (auto extract = dyn_cast<tensor::ExtractOp>(op))
    if (isa<MemRefType>(operands[0].getType()))
      return memref::LoadOp::create(b, op.getLoc(), operands[0],
                                    ArrayRef<Value>(operands).drop_front());
  OperationState state(op.getLoc(), op.getName());
  state.addOperands(operands);
  state.addTypes(op.getResultTypes());
  state.addAttributes(op.getAttrs());
  return b.create(state);
}

/// Inlines the one block of a modifier region at `b` with its arguments
/// bound to `args` (scalars, or vectors of one shape), and returns the
/// value it yields. Ops whose operands are all scalars stay scalar;
/// elementwise ops with a vector operand are built on vectors; a memref
/// read (tensor.extract) whose last index alone is a vector becomes a
/// vector.gather; any other op with a vector operand is computed lane by
/// lane.
static Value inlineModifierRegion(OpBuilder &b, Region &region,
                                  ArrayRef<Value> args) {
  Block &block = region.front();
  assert(block.getNumArguments() == args.size() && "region arity");
  VectorType shape;
  for (Value a : args)
    if (auto vt = dyn_cast<VectorType>(a.getType()))
      shape = vt;
  IRMapping map;
  map.map(block.getArguments(), args);
  for (Operation &op : block.without_terminator()) {
    SmallVector<Value> operands;
    bool vector = false;
    for (Value v : op.getOperands()) {
      // A constant captured from above is cloned where the region is
      // inlined (which may be another function: a GPU kernel); any other
      // captured value is used as it is (isEligible keeps those out of the
      // GPU kernels).
      if (!map.contains(v) && !region.isAncestor(v.getParentRegion()))
        if (Operation *def = v.getDefiningOp();
            def && def->hasTrait<OpTrait::ConstantLike>())
          map.map(v, b.clone(*def)->getResult(0));
      Value m = map.lookupOrDefault(v);
      operands.push_back(m);
      vector |= isa<VectorType>(m.getType());
    }
    Location loc = op.getLoc();
    if (isa<math::AbsIOp>(op)) {
      // |x| = max(x, 0 - x), in arith: every backend (and the GPU
      // interpreter) has these.
      Value x = operands[0];
      Type elt = getElementTypeOrSelf(x.getType());
      Value zero = matchShape(
          b, loc, arith::ConstantOp::create(b, loc, b.getZeroAttr(elt)), x);
      map.map(op.getResult(0),
              arith::MaxSIOp::create(b, loc, x,
                                     arith::SubIOp::create(b, loc, zero, x)));
      continue;
    }
    if (!vector) {
      map.map(op.getResults(), cloneScalar(b, op, operands)->getResults());
      continue;
    }
    if (OpTrait::hasElementwiseMappableTraits(&op)) {
      for (Value &v : operands)
        if (!isa<VectorType>(v.getType()))
          v = vector::BroadcastOp::create(b, loc, withShape(v.getType(), shape),
                                          v);
      OperationState state(loc, op.getName());
      state.addOperands(operands);
      for (Type t : op.getResultTypes())
        state.addTypes(withShape(t, shape));
      state.addAttributes(op.getAttrs());
      map.map(op.getResults(), b.create(state)->getResults());
      continue;
    }
    // A memref read whose last index alone varies over the lanes: a gather
    // (what the SIMT distribution and the CPU lowering both take).
    if (isa<tensor::ExtractOp>(op) && isa<MemRefType>(operands[0].getType()) &&
        operands.size() >= 2 && isa<VectorType>(operands.back().getType()) &&
        llvm::none_of(ArrayRef<Value>(operands).slice(1, operands.size() - 2),
                      [](Value v) { return isa<VectorType>(v.getType()); })) {
      SmallVector<Value> offsets(ArrayRef<Value>(operands).slice(
          1, operands.size() - 2));
      offsets.push_back(cIndex(b, loc, 0));
      Type elt = op.getResult(0).getType();
      auto resultType = VectorType::get(shape.getShape(), elt);
      auto maskType = VectorType::get(shape.getShape(), b.getI1Type());
      Value mask = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(maskType, true));
      Value pass = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(resultType, b.getZeroAttr(elt)));
      Value gathered = vector::GatherOp::create(
          b, loc, resultType, operands[0], offsets, operands.back(), mask,
          pass);
      map.map(op.getResult(0), gathered);
      continue;
    }
    // Lane by lane.
    int64_t lanes = shape.getNumElements();
    SmallVector<SmallVector<Value>> perResult(op.getNumResults());
    for (int64_t lane = 0; lane < lanes; ++lane) {
      SmallVector<Value> scalars;
      for (Value v : operands)
        scalars.push_back(isa<VectorType>(v.getType())
                              ? Value(vector::ExtractOp::create(
                                    b, loc, v, ArrayRef<int64_t>{lane}))
                              : v);
      Operation *clone = cloneScalar(b, op, scalars);
      for (auto [i, r] : llvm::enumerate(clone->getResults()))
        perResult[i].push_back(r);
    }
    for (auto [i, r] : llvm::enumerate(op.getResults()))
      map.map(r, vector::FromElementsOp::create(
                     b, loc, cast<VectorType>(withShape(r.getType(), shape)),
                     perResult[i]));
  }
  return map.lookupOrDefault(block.getTerminator()->getOperand(0));
}

/// The index arguments of a region: (b, h, q, k) with q and k clamped to
/// Nq - 1 and Nk - 1.
static SmallVector<Value>
regionIndices(OpBuilder &b, Location loc,
              const AttentionSemantics::ModIndices &idx) {
  Value c1 = cIndex(b, loc, 1);
  Value q = idx.nq ? Value(arith::MinSIOp::create(
                         b, loc, idx.q,
                         matchShape(b, loc, subI(b, loc, idx.nq, c1), idx.q)))
                   : idx.q;
  Value k = idx.nk ? Value(arith::MinSIOp::create(
                         b, loc, idx.k,
                         matchShape(b, loc, subI(b, loc, idx.nk, c1), idx.k)))
                   : idx.k;
  return {idx.batch, idx.head, q, k};
}

Value AttentionSemantics::applyScoreMod(OpBuilder &b, Location loc,
                                        Value score, const ModIndices &idx,
                                        ValueRange modOperands,
                                        double factor) const {
  if (!hasScoreMod())
    return score;
  Value s = score;
  if (factor != 1.0)
    s = arith::MulFOp::create(b, loc, s, cFloatLike(b, loc, s, 1.0 / factor));
  SmallVector<Value> args = {s};
  llvm::append_range(args, regionIndices(b, loc, idx));
  llvm::append_range(args, modOperands);
  Value r = inlineModifierRegion(b, *mods.scoreMod, args);
  // A result that does not depend on a vector argument stays scalar.
  r = matchShape(b, loc, r, score);
  if (factor != 1.0)
    r = arith::MulFOp::create(b, loc, r, cFloatLike(b, loc, r, factor));
  return r;
}

Value AttentionSemantics::evaluateMaskMod(OpBuilder &b, Location loc,
                                          Region &region,
                                          const ModIndices &idx,
                                          ValueRange modOperands) {
  SmallVector<Value> args = regionIndices(b, loc, idx);
  llvm::append_range(args, modOperands);
  return inlineModifierRegion(b, region, args);
}

void AttentionSemantics::applyMaskMod(OpBuilder &b, Location loc,
                                      const ModIndices &idx,
                                      ValueRange modOperands,
                                      Value &keep) const {
  if (!hasMaskMod())
    return;
  keep = andI(b, loc, keep,
              evaluateMaskMod(b, loc, *mods.maskMod, idx, modOperands));
}

Value AttentionSemantics::keepMaskPredicate(OpBuilder &b, Location loc,
                                            Value m) {
  Type elt = getElementTypeOrSelf(m.getType());
  if (elt.isInteger(1))
    return m;
  Value zero;
  if (auto vt = dyn_cast<VectorType>(m.getType()))
    zero = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vt, b.getIntegerAttr(elt, 0)));
  else
    zero = arith::ConstantOp::create(b, loc, b.getIntegerAttr(elt, 0));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, m, zero);
}

Value AttentionSemantics::maskElementKeeps(OpBuilder &b, Location loc,
                                           Value m) const {
  if (mask == MaskKind::Keep)
    return keepMaskPredicate(b, loc, m);
  Value f = extToF32(b, loc, m);
  return arith::CmpFOp::create(
      b, loc, arith::CmpFPredicate::OGT, f,
      cFloatLike(b, loc, f, -std::numeric_limits<double>::infinity()));
}

void AttentionSemantics::applyMaskElement(OpBuilder &b, Location loc, Value m,
                                          Value &score, Value &keep,
                                          double factor) const {
  switch (mask) {
  case MaskKind::None:
    return;
  case MaskKind::Keep:
    keep = andI(b, loc, keep, keepMaskPredicate(b, loc, m));
    return;
  case MaskKind::Additive: {
    Value add = extToF32(b, loc, m);
    if (factor != 1.0)
      add = arith::MulFOp::create(b, loc, add,
                                  cFloatLike(b, loc, add, factor));
    score = arith::AddFOp::create(b, loc, score, add);
    return;
  }
  }
}

Value AttentionSemantics::removeUnkept(OpBuilder &b, Location loc, Value keep,
                                       Value score) {
  if (!keep)
    return score;
  Value ninf =
      cFloatLike(b, loc, score, -std::numeric_limits<double>::infinity());
  keep = matchShape(b, loc, keep, score);
  return arith::SelectOp::create(b, loc, keep, score, ninf);
}

//===----------------------------------------------------------------------===//
// Online softmax and empty rows
//===----------------------------------------------------------------------===//

Value fa::guardedMax(OpBuilder &b, Location loc, Value m) {
  Value ninf = cFloatLike(b, loc, m, -std::numeric_limits<double>::infinity());
  Value isNegInf =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m, ninf);
  Value zero = cFloatLike(b, loc, m, 0.0);
  return arith::SelectOp::create(b, loc, isNegInf, zero, m);
}

/// `x == 0` and the zero it compared with.
static Value isZero(OpBuilder &b, Location loc, Value x, Value &zero) {
  zero = cFloatLike(b, loc, x, 0.0);
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, zero);
}

Value fa::guardedDivide(OpBuilder &b, Location loc, Value num, Value den) {
  Value zero;
  Value empty = isZero(b, loc, den, zero);
  Value div = arith::DivFOp::create(b, loc, num, den);
  return arith::SelectOp::create(b, loc, empty, zero, div);
}

Value fa::guardedLogSumExp(OpBuilder &b, Location loc, Value m, Value l) {
  Value zero;
  Value empty = isZero(b, loc, l, zero);
  // l > 0 implies m > -inf: no guard on m needed here.
  Value lse = arith::AddFOp::create(b, loc, m, math::LogOp::create(b, loc, l));
  Value ninf = cFloatLike(b, loc, l, -std::numeric_limits<double>::infinity());
  return arith::SelectOp::create(b, loc, empty, ninf, lse);
}

Value fa::guardedProbability(OpBuilder &b, Location loc, Value s, Value lse,
                             bool base2) {
  Value ninf =
      cFloatLike(b, loc, lse, -std::numeric_limits<double>::infinity());
  Value empty =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lse, ninf);
  Value diff = arith::SubFOp::create(b, loc, s, lse);
  Value p = base2 ? Value(math::Exp2Op::create(b, loc, diff))
                  : Value(math::ExpOp::create(b, loc, diff));
  Value zero = cFloatLike(b, loc, p, 0.0);
  return arith::SelectOp::create(b, loc, empty, zero, p);
}

Value fa::maskedProduct(OpBuilder &b, Location loc, Value p, Value v) {
  Value prod = arith::MulFOp::create(b, loc, p, v);
  Value zero;
  Value masked = isZero(b, loc, p, zero);
  return arith::SelectOp::create(b, loc, masked, zero, prod);
}

//===----------------------------------------------------------------------===//
// Kernel families
//===----------------------------------------------------------------------===//

StringRef fa::stringifyKernelFamily(KernelFamily family) {
  switch (family) {
  case KernelFamily::Simt:
    return "simt";
  case KernelFamily::Mma:
    return "mma";
  case KernelFamily::Wgmma:
    return "wgmma";
  }
  llvm_unreachable("unknown kernel family");
}

std::optional<KernelFamily> fa::parseKernelFamily(StringRef name) {
  return llvm::StringSwitch<std::optional<KernelFamily>>(name)
      .Case("simt", KernelFamily::Simt)
      .Case("mma", KernelFamily::Mma)
      .Case("wgmma", KernelFamily::Wgmma)
      .Default(std::nullopt);
}

/// The multiple a head dim of `family` must be.
static int64_t headDimMultiple(KernelFamily family) {
  switch (family) {
  case KernelFamily::Simt:
    return 8;
  case KernelFamily::Mma:
    return 16;
  case KernelFamily::Wgmma:
    return 64;
  }
  llvm_unreachable("unknown kernel family");
}

bool fa::isSupportedHeadDim(KernelFamily family, int64_t dim) {
  return !ShapedType::isDynamic(dim) && dim > 0 && dim <= 256 &&
         dim % headDimMultiple(family) == 0;
}

std::optional<std::string> fa::getOutlinedRegionProblem(AttentionOp op) {
  // The regions are inlined into the outlined kernel: values they capture
  // from the enclosing function must be constants (cloned into it).
  for (Region *region : {&op.getScoreMod(), &op.getMaskMod()}) {
    WalkResult captured = region->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (!region->isAncestor(v.getParentRegion()) &&
            !matchPattern(v, m_Constant()))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (captured.wasInterrupted())
      return std::string("its score_mod / mask_mod reads a value from "
                         "outside the region that is not a constant; pass "
                         "it as a mod_operands tensor");
  }
  return std::nullopt;
}

LogicalResult fa::rejectCpuKernelOnlyForms(Operation *root, StringRef pass) {
  WalkResult found = root->walk([&](AttentionOp op) {
    if (op.isPaged()) {
      op.emitOpError() << "with a block_table (paged K/V): " << pass
                       << " does not read paged caches; only the CPU vector "
                          "kernel (fa-cpu-attention, kernel form) does";
      return WalkResult::interrupt();
    }
    if (op.isVarlen()) {
      op.emitOpError() << "with cu_seqlens (token-major variable-length "
                          "batches): "
                       << pass
                       << " does not read this form; only the CPU vector "
                          "kernel (fa-cpu-attention, kernel form) does";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(found.wasInterrupted());
}

bool fa::isEligible(KernelFamily family, AttentionOp op,
                    std::string *reason) {
  auto fail = [&](const std::string &why) {
    if (reason)
      *reason = why;
    return false;
  };
  if (std::optional<std::string> why = getOutlinedRegionProblem(op))
    return fail(*why);
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto kType = cast<RankedTensorType>(op.getKey().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  int64_t d = qType.getDimSize(qType.getRank() - 1),
          dv = vType.getDimSize(vType.getRank() - 1);
  if (!isSupportedHeadDim(family, d) || !isSupportedHeadDim(family, dv))
    return fail("head dims must be multiples of " +
                std::to_string(headDimMultiple(family)) +
                " up to 256, got D = " + std::to_string(d) +
                " and Dv = " + std::to_string(dv));
  if (family == KernelFamily::Simt)
    return true;
  Type elt = qType.getElementType();
  if (!(elt.isF16() || elt.isBF16()) || kType.getElementType() != elt ||
      vType.getElementType() != elt)
    return fail("Q, K and V must all be f16 or all be bf16");
  Type oElt = cast<RankedTensorType>(op.getResult().getType()).getElementType();
  if (!(oElt.isF16() || oElt.isBF16() || oElt.isF32()))
    return fail("the output must be f16, bf16 or f32");
  return true;
}
