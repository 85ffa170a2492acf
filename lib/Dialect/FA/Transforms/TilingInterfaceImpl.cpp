//===- TilingInterfaceImpl.cpp - TilingInterface for fa ops ---------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// External TilingInterface models, so that upstream tiling
// (transform.structured.tile_using_forall / tile_using_for, scf tiling
// utilities) can distribute fa ops.
//
// fa.attention: the iteration domain is (B, Hq, Nq), all parallel. The
// reduction over keys and the head dim Dv are not part of the domain and are
// never tiled. A tile (b0 +: tb, h0 +: th, q0 +: tq) computes O[b, h, q, :]
// and LSE[b, h, q] from slices of Q, the mask, kv_lens and the K/V heads it
// reads:
//
//  * Heads under GQA (g = Hq / Hkv > 1): query heads [h0, h0 + th) read key/
//    value heads [h0 / g, (h0 + th - 1) / g]. The tile size along Hq must be
//    static and either a multiple of g (K/V heads [h0/g, th/g)) or a divisor
//    of g (one K/V head h0/g); offsets are multiples of the tile size, as the
//    scf tiling utilities produce. Anything else fails with a diagnostic.
//  * Causality depends on the absolute query index and on Nq and Nk, so a
//    query tile cannot keep the attribute as it is:
//      - bottom_right keeps k <= q + Nk - Nq. For the tile's rows
//        q = q0 + i this is k <= i + Nk' - tq with
//        Nk' = q0 + tq + Nk - Nq <= Nk: the tiled op stays bottom_right over
//        the first max(Nk', 0) keys (K, V and the mask's key dim sliced).
//        Nk' <= 0 means every row of the tile is fully masked; the tiled op
//        has no keys and gives O = 0, LSE = -inf as the untiled one does.
//      - top_left keeps k <= q = i + q0, i.e. bottom_right with
//        Nk' = q0 + tq keys. When Nq <= Nk is known statically, Nk' <= Nk
//        and K, V and the mask are sliced. Otherwise they are sliced to
//        min(Nk, Nk') keys and zero-padded to Nk', and the padded keys are
//        removed through kv_lens' = min(kv_lens, Nk) (Nk without kv_lens).
//    A tile covering all of Nq keeps the op's causality and keys unchanged.
//  * Both ways keep every row's position q + off and every key index, so
//    the window, chunk and ALiBi terms need no change. Where they cannot
//    (a q_offset operand, or positional modifiers without causality) the
//    tiled op keeps all keys and re-bases the positions with q_offset:
//    q_offset' = q_offset + q0 (+ tq - Nq for bottom_right, whose offset
//    Nk - Nq becomes Nk - tq).
//  * Segment ids are sliced as the query rows and keys are, ALiBi slopes
//    as the batch and heads.
//  * A block mask is dropped (its tiles need not line up with the tile's
//    rows; the regions alone give the same result).
//  * mod_operands stay whole: the tiled op's score_mod / mask_mod regions
//    add the tile origin (b0, h0, q0) to their index arguments, so they
//    read what the untiled op reads; keys padded past Nk are clamped to
//    Nk - 1 before a region sees them (their scores are removed anyway).
//
// fa.softmax: the iteration domain is the input's shape; the normalized
// dimension is a reduction and cannot be tiled (a tile must cover it
// entirely), every other dim is parallel.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/TilingInterface.h"

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// True when (offset, size) covers dim `dim` of `source` entirely: offset 0
/// and a size equal to the static dim, or the `tensor.dim` of that dim (what
/// the tiling utilities pass for an untiled loop of the iteration domain).
static bool coversDim(OpFoldResult offset, OpFoldResult size, Value source,
                      int64_t dim) {
  if (!isConstantIntValue(offset, 0))
    return false;
  auto type = cast<RankedTensorType>(source.getType());
  if (!type.isDynamicDim(dim))
    return isConstantIntValue(size, type.getDimSize(dim));
  auto value = dyn_cast<Value>(size);
  if (!value)
    return false;
  auto dimOp = value.getDefiningOp<tensor::DimOp>();
  if (!dimOp)
    return false;
  std::optional<int64_t> index = dimOp.getConstantIndex();
  return index && *index == dim && dimOp.getSource() == source;
}

namespace {
/// Collects the extract_slice ops a tiled implementation creates.
struct Slicer {
  OpBuilder &b;
  Location loc;
  SmallVector<Operation *> slices;

  Value slice(Value source, ArrayRef<OpFoldResult> offsets,
              ArrayRef<OpFoldResult> sizes) {
    auto type = cast<RankedTensorType>(source.getType());
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    auto op = tensor::ExtractSliceOp::create(b, loc, source, offsets, sizes,
                                             strides);
    slices.push_back(op);
    return op.getResult();
  }

  /// Offsets 0 and full sizes except for the given dims.
  SmallVector<OpFoldResult> fullSizes(Value source) {
    return tensor::getMixedSizes(b, loc, source);
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// fa.attention
//===----------------------------------------------------------------------===//

namespace {
struct AttentionTilingModel final
    : TilingInterface::ExternalModel<AttentionTilingModel, AttentionOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return SmallVector<utils::IteratorType>(3, utils::IteratorType::parallel);
  }

  SmallVector<Range> getIterationDomain(Operation *op, OpBuilder &b) const {
    auto attention = cast<AttentionOp>(op);
    Location loc = op->getLoc();
    SmallVector<Range> domain;
    for (int64_t d = 0; d < 3; ++d)
      domain.push_back(
          Range{b.getIndexAttr(0),
                tensor::getMixedSize(b, loc, attention.getQuery(), d),
                b.getIndexAttr(1)});
    return domain;
  }

  FailureOr<TilingResult>
  getTiledImplementation(Operation *op, OpBuilder &b,
                         ArrayRef<OpFoldResult> offsets,
                         ArrayRef<OpFoldResult> sizes) const;

  LogicalResult
  getResultTilePosition(Operation *op, OpBuilder &b, unsigned resultNumber,
                        ArrayRef<OpFoldResult> offsets,
                        ArrayRef<OpFoldResult> sizes,
                        SmallVector<OpFoldResult> &resultOffsets,
                        SmallVector<OpFoldResult> &resultSizes) const {
    auto attention = cast<AttentionOp>(op);
    if (attention.isVarlen())
      return failure();
    resultOffsets.assign(offsets.begin(), offsets.begin() + 3);
    resultSizes.assign(sizes.begin(), sizes.begin() + 3);
    if (resultNumber == 0) {
      auto oType = cast<RankedTensorType>(attention.getOutput().getType());
      resultOffsets.push_back(b.getIndexAttr(0));
      resultSizes.push_back(b.getIndexAttr(oType.getDimSize(3)));
    }
    return success();
  }

  FailureOr<TilingResult>
  generateResultTileValue(Operation *op, OpBuilder &b, unsigned resultNumber,
                          ArrayRef<OpFoldResult> offsets,
                          ArrayRef<OpFoldResult> sizes) const {
    auto attention = cast<AttentionOp>(op);
    // O's head dim is not in the iteration domain: only whole rows of O.
    if (resultNumber == 0 &&
        !coversDim(offsets[3], sizes[3], attention.getOutput(), 3))
      return failure();
    return getTiledImplementation(op, b, offsets.take_front(3),
                                  sizes.take_front(3));
  }
};
} // namespace

FailureOr<TilingResult> AttentionTilingModel::getTiledImplementation(
    Operation *op, OpBuilder &b, ArrayRef<OpFoldResult> offsets,
    ArrayRef<OpFoldResult> sizes) const {
  auto attention = cast<AttentionOp>(op);
  if (attention.isPaged())
    return op->emitOpError("with a block_table (paged K/V) cannot be tiled "
                           "yet");
  if (attention.isVarlen())
    return op->emitOpError("with cu_seqlens (token-major variable-length "
                           "batches) cannot be tiled yet");
  Location loc = op->getLoc();
  Slicer s{b, loc, {}};
  OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
  OpFoldResult b0 = offsets[0], h0 = offsets[1], q0 = offsets[2];
  OpFoldResult tb = sizes[0], th = sizes[1], tq = sizes[2];

  Value query = attention.getQuery(), key = attention.getKey(),
        value = attention.getValue();
  auto qType = cast<RankedTensorType>(query.getType());
  auto kType = cast<RankedTensorType>(key.getType());
  auto vType = cast<RankedTensorType>(value.getType());
  int64_t hq = qType.getDimSize(1), hkv = kType.getDimSize(1);
  int64_t group = attention.getGroupSize();

  // Key/value heads read by query heads [h0, h0 + th).
  OpFoldResult kvH0 = h0, kvTh = th;
  if (group != 1) {
    AffineExpr d0 = b.getAffineDimExpr(0);
    std::optional<int64_t> thC = getConstantIntValue(th);
    std::optional<int64_t> h0C = getConstantIntValue(h0);
    if (coversDim(h0, th, query, 1)) {
      kvH0 = zero;
      kvTh = b.getIndexAttr(hkv);
    } else if (thC && *thC > 0 && *thC % group == 0 &&
               (!h0C || *h0C % group == 0)) {
      kvH0 = affine::makeComposedFoldedAffineApply(b, loc, d0.floorDiv(group),
                                                   {h0});
      kvTh = b.getIndexAttr(*thC / group);
    } else if (thC && *thC > 0 && group % *thC == 0 &&
               (!h0C || *h0C % *thC == 0)) {
      kvH0 = affine::makeComposedFoldedAffineApply(b, loc, d0.floorDiv(group),
                                                   {h0});
      kvTh = one;
    } else {
      return op->emitOpError("cannot tile query heads (Hq = ")
             << hq << ", Hkv = " << hkv
             << "): under grouped-query attention the tile size along Hq "
                "must be static and a multiple or a divisor of Hq / Hkv = "
             << group << ", and divide Hq";
    }
  }

  // Keys the tile needs, and the causality of the tiled op.
  OpFoldResult nq = tensor::getMixedSize(b, loc, query, 2);
  OpFoldResult nk = tensor::getMixedSize(b, loc, key, 2);
  CausalKind causal = attention.getCausal();
  bool sliceKeys = false, padKeys = false;
  OpFoldResult keys = nk;       // keys of the tiled op
  OpFoldResult keptKeys = nk;   // keys sliced from K/V (<= keys)
  bool positional = attention.getWindowAttr() || attention.getChunkAttr() ||
                    attention.getAlibi();
  bool tilesRows = !coversDim(q0, tq, query, 2);
  Value qOffset = attention.getQOffset();
  if (tilesRows && (qOffset || (causal == CausalKind::none && positional))) {
    // Re-base the positions; all keys stay.
    AffineExpr d0, d1, d2, d3;
    bindDims(b.getContext(), d0, d1, d2, d3);
    Value p =
        qOffset ? qOffset : Value(arith::ConstantIndexOp::create(b, loc, 0));
    OpFoldResult shifted =
        causal == CausalKind::bottom_right
            ? affine::makeComposedFoldedAffineApply(b, loc, d0 + d1 + d2 - d3,
                                                    {p, q0, tq, nq})
            : affine::makeComposedFoldedAffineApply(b, loc, d0 + d1, {p, q0});
    qOffset = getValueOrCreateConstantIndexOp(b, loc, shifted);
  } else if (causal != CausalKind::none && tilesRows) {
    AffineExpr d0, d1, d2, d3;
    bindDims(b.getContext(), d0, d1, d2, d3);
    if (causal == CausalKind::bottom_right) {
      // max(0, q0 + tq + Nk - Nq).
      keys = affine::makeComposedFoldedAffineMax(
          b, loc,
          AffineMap::get(4, 0, {b.getAffineConstantExpr(0), d0 + d1 + d2 - d3},
                         b.getContext()),
          {q0, tq, nk, nq});
      keptKeys = keys;
      sliceKeys = true;
    } else {
      // top_left: q0 + tq keys, bottom_right.
      keys = affine::makeComposedFoldedAffineApply(b, loc, d0 + d1, {q0, tq});
      sliceKeys = true;
      bool nqLeNk = !qType.isDynamicDim(2) && !kType.isDynamicDim(2) &&
                    qType.getDimSize(2) <= kType.getDimSize(2);
      if (nqLeNk) {
        keptKeys = keys;
      } else {
        keptKeys = affine::makeComposedFoldedAffineMin(
            b, loc, AffineMap::get(2, 0, {d0, d1}, b.getContext()),
            {keys, nk});
        padKeys = true;
      }
      causal = CausalKind::bottom_right;
    }
  }

  // Q, O, LSE: the tile.
  int64_t dq = qType.getDimSize(3), dk = kType.getDimSize(3),
          dv = vType.getDimSize(3);
  Value q = s.slice(query, {b0, h0, q0, zero}, {tb, th, tq, b.getIndexAttr(dq)});
  Value o = s.slice(attention.getOutput(), {b0, h0, q0, zero},
                    {tb, th, tq, b.getIndexAttr(dv)});
  Value lse;
  if (Value l = attention.getLse())
    lse = s.slice(l, {b0, h0, q0}, {tb, th, tq});

  // K, V: the batch tile, the K/V heads, the needed keys.
  Value k = s.slice(key, {b0, kvH0, zero, zero},
                    {tb, kvTh, keptKeys, b.getIndexAttr(dk)});
  Value v = s.slice(value, {b0, kvH0, zero, zero},
                    {tb, kvTh, keptKeys, b.getIndexAttr(dv)});

  // Mask: broadcast dims (static 1) stay whole.
  Value mask;
  if (Value m = attention.getMask()) {
    auto mType = cast<RankedTensorType>(m.getType());
    OpFoldResult mb0 = b0, mtb = tb, mh0 = h0, mth = th;
    if (mType.getDimSize(0) == 1) {
      mb0 = zero;
      mtb = one;
    }
    if (mType.getDimSize(1) == 1) {
      mh0 = zero;
      mth = one;
    }
    OpFoldResult mKeys =
        sliceKeys ? keptKeys : tensor::getMixedSize(b, loc, m, 3);
    mask = s.slice(m, {mb0, mh0, q0, zero}, {mtb, mth, tq, mKeys});
  }

  // Key lengths: the batch tile.
  Value lens;
  if (Value l = attention.getKvLens())
    lens = s.slice(l, {b0}, {tb});

  // ALiBi slopes: the batch and head tile. Segment ids: the rows and keys.
  Value alibi;
  if (Value a = attention.getAlibi()) {
    if (cast<RankedTensorType>(a.getType()).getRank() == 1)
      alibi = s.slice(a, {h0}, {th});
    else
      alibi = s.slice(a, {b0, h0}, {tb, th});
  }
  Value qSegments, kSegments;
  if (Value qs = attention.getQSegments()) {
    qSegments = s.slice(qs, {b0, q0}, {tb, tq});
    kSegments = s.slice(attention.getKSegments(), {b0, zero}, {tb, keptKeys});
  }

  if (padKeys) {
    // Zero keys up to `keys`, removed by kv_lens' = min(kv_lens, Nk).
    AffineExpr d0, d1;
    bindDims(b.getContext(), d0, d1);
    OpFoldResult high =
        affine::makeComposedFoldedAffineApply(b, loc, d0 - d1, {keys, keptKeys});
    auto pad = [&](Value t, int64_t dim) -> Value {
      auto type = cast<RankedTensorType>(t.getType());
      SmallVector<OpFoldResult> lows(type.getRank(), zero);
      SmallVector<OpFoldResult> highs(type.getRank(), zero);
      highs[dim] = high;
      SmallVector<int64_t> shape(type.getShape());
      shape[dim] = ShapedType::kDynamic;
      Type elt = type.getElementType();
      Value padValue = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
      return tensor::PadOp::create(
          b, loc, RankedTensorType::get(shape, elt), t, lows, highs, padValue);
    };
    k = pad(k, 2);
    v = pad(v, 2);
    if (mask)
      mask = pad(mask, 3);
    if (kSegments)
      kSegments = pad(kSegments, 1);
    Type i32 = b.getI32Type();
    Value nkIndex = getValueOrCreateConstantIndexOp(b, loc, nk);
    Value nkI32 = arith::IndexCastOp::create(b, loc, i32, nkIndex);
    Value empty = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{tb},
                                          i32);
    if (lens) {
      auto map = b.getMultiDimIdentityMap(1);
      lens = linalg::GenericOp::create(
                 b, loc, empty.getType(), ValueRange{lens}, ValueRange{empty},
                 ArrayRef<AffineMap>{map, map},
                 ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
                 [&](OpBuilder &nb, Location nloc, ValueRange args) {
                   Value m = arith::MinSIOp::create(nb, nloc, args[0], nkI32);
                   linalg::YieldOp::create(nb, nloc, m);
                 })
                 .getResult(0);
    } else {
      lens = linalg::FillOp::create(b, loc, ValueRange{nkI32},
                                    ValueRange{empty})
                 .getResult(0);
    }
  }

  SmallVector<Type> resultTypes = {o.getType()};
  if (lse)
    resultTypes.push_back(lse.getType());
  // The regions' index origins (defined before the tiled op uses them).
  bool regions = attention.hasScoreMod() || attention.hasMaskMod();
  Value nkValue;
  SmallVector<Value> origins;
  if (regions) {
    if (padKeys)
      nkValue = getValueOrCreateConstantIndexOp(b, loc, nk);
    origins = {getValueOrCreateConstantIndexOp(b, loc, b0),
               getValueOrCreateConstantIndexOp(b, loc, h0),
               getValueOrCreateConstantIndexOp(b, loc, q0)};
  }
  auto tiled = AttentionOp::create(
      b, loc, resultTypes, q, k, v, lens, /*block_table=*/Value(),
      /*cu_seqlens_q=*/Value(), /*cu_seqlens_k=*/Value(), mask,
      alibi, qSegments, kSegments,
      qOffset, /*block_mask=*/Value(), attention.getModOperands(), o, lse,
      attention.getScaleAttr(), CausalKindAttr::get(b.getContext(), causal),
      attention.getWindowAttr(), attention.getSoftcapAttr(),
      attention.getChunkAttr(), /*block_tiles=*/nullptr);

  // The modifier regions read whole mod_operands with the untiled op's
  // indices: add the tile's origin to (b, h, q), and keep the keys padded
  // past Nk (top_left with Nq > Nk; removed through kv_lens) inside the
  // operands' bounds.
  for (auto [from, to] : {std::make_pair(&attention.getScoreMod(),
                                         &tiled.getScoreMod()),
                          std::make_pair(&attention.getMaskMod(),
                                         &tiled.getMaskMod())}) {
    if (from->empty())
      continue;
    IRMapping map;
    from->cloneInto(to, map);
    Block &block = to->front();
    OpBuilder rb = OpBuilder::atBlockBegin(&block);
    // score_mod's arguments start with the score.
    unsigned first = to == &tiled.getScoreMod() ? 1 : 0;
    for (unsigned i = 0; i < 3; ++i) {
      if (isConstantIntValue(origins[i], 0))
        continue;
      BlockArgument arg = block.getArgument(first + i);
      Value shifted = arith::AddIOp::create(rb, loc, arg, origins[i]);
      arg.replaceAllUsesExcept(shifted, shifted.getDefiningOp());
    }
    if (nkValue) {
      BlockArgument arg = block.getArgument(first + 3);
      Value last = arith::SubIOp::create(
          rb, loc, nkValue, arith::ConstantIndexOp::create(rb, loc, 1));
      Value clamped = arith::MinSIOp::create(rb, loc, arg, last);
      arg.replaceAllUsesExcept(clamped, clamped.getDefiningOp());
    }
  }
  return TilingResult{{tiled}, SmallVector<Value>(tiled->getResults()),
                      s.slices};
}

//===----------------------------------------------------------------------===//
// fa.softmax
//===----------------------------------------------------------------------===//

namespace {
struct SoftmaxTilingModel final
    : TilingInterface::ExternalModel<SoftmaxTilingModel, SoftmaxOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    auto softmax = cast<SoftmaxOp>(op);
    int64_t rank = cast<RankedTensorType>(softmax.getInput().getType()).getRank();
    SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
    iters[softmax.getDimension()] = utils::IteratorType::reduction;
    return iters;
  }

  SmallVector<Range> getIterationDomain(Operation *op, OpBuilder &b) const {
    auto softmax = cast<SoftmaxOp>(op);
    SmallVector<Range> domain;
    for (OpFoldResult size :
         tensor::getMixedSizes(b, op->getLoc(), softmax.getInput()))
      domain.push_back(Range{b.getIndexAttr(0), size, b.getIndexAttr(1)});
    return domain;
  }

  FailureOr<TilingResult>
  getTiledImplementation(Operation *op, OpBuilder &b,
                         ArrayRef<OpFoldResult> offsets,
                         ArrayRef<OpFoldResult> sizes) const {
    auto softmax = cast<SoftmaxOp>(op);
    int64_t dim = softmax.getDimension();
    if (!coversDim(offsets[dim], sizes[dim], softmax.getInput(), dim))
      return op->emitOpError("cannot tile the normalized dimension ")
             << dim << ": a tile must cover whole rows";
    Slicer s{b, op->getLoc(), {}};
    Value in = s.slice(softmax.getInput(), offsets, sizes);
    Value out = s.slice(softmax.getOutput(), offsets, sizes);
    auto tiled = SoftmaxOp::create(b, op->getLoc(), in.getType(), in, out,
                                   softmax.getDimension());
    return TilingResult{{tiled}, SmallVector<Value>(tiled->getResults()),
                        s.slices};
  }

  LogicalResult
  getResultTilePosition(Operation *, OpBuilder &, unsigned,
                        ArrayRef<OpFoldResult> offsets,
                        ArrayRef<OpFoldResult> sizes,
                        SmallVector<OpFoldResult> &resultOffsets,
                        SmallVector<OpFoldResult> &resultSizes) const {
    resultOffsets.assign(offsets.begin(), offsets.end());
    resultSizes.assign(sizes.begin(), sizes.end());
    return success();
  }

  FailureOr<TilingResult>
  generateResultTileValue(Operation *op, OpBuilder &b, unsigned,
                          ArrayRef<OpFoldResult> offsets,
                          ArrayRef<OpFoldResult> sizes) const {
    return getTiledImplementation(op, b, offsets, sizes);
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// fa.attention_backward
//===----------------------------------------------------------------------===//

namespace {
/// fa.attention_backward: the iteration domain is (B, Hkv), both parallel:
/// a tile (b0 +: tb, k0 +: tk) computes dK and dV of kv heads [k0, k0 +
/// tk) and dQ of their query heads [k0 G, (k0 + tk) G) (G = Hq / Hkv), the
/// whole of Nq, Nk and the head dims, so no position changes and the tiled
/// ops compute exactly what the untiled one does. Q, O, LSE, dO, dQ, the
/// mask and the ALiBi slopes are sliced along the query heads (a size-1
/// broadcast mask dim stays whole), everything along the batch.
struct AttentionBackwardTilingModel final
    : TilingInterface::ExternalModel<AttentionBackwardTilingModel,
                                     AttentionBackwardOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel);
  }

  SmallVector<Range> getIterationDomain(Operation *op, OpBuilder &b) const {
    auto bwd = cast<AttentionBackwardOp>(op);
    Location loc = op->getLoc();
    return {Range{b.getIndexAttr(0),
                  tensor::getMixedSize(b, loc, bwd.getQuery(), 0),
                  b.getIndexAttr(1)},
            Range{b.getIndexAttr(0), b.getIndexAttr(bwd.getKvHeads()),
                  b.getIndexAttr(1)}};
  }

  /// The query-head range [k0 G, (k0 + tk) G) of the kv heads [k0, k0 + tk).
  static std::pair<OpFoldResult, OpFoldResult>
  queryHeads(OpBuilder &b, Location loc, AttentionBackwardOp op,
             OpFoldResult k0, OpFoldResult tk) {
    int64_t g = op.getGroupSize();
    AffineExpr d0;
    bindDims(b.getContext(), d0);
    auto times = [&](OpFoldResult x) {
      return affine::makeComposedFoldedAffineApply(b, loc, d0 * g, {x});
    };
    return {times(k0), times(tk)};
  }

  FailureOr<TilingResult>
  getTiledImplementation(Operation *op, OpBuilder &b,
                         ArrayRef<OpFoldResult> offsets,
                         ArrayRef<OpFoldResult> sizes) const {
    auto bwd = cast<AttentionBackwardOp>(op);
    Location loc = op->getLoc();
    Slicer s{b, loc, {}};
    OpFoldResult zero = b.getIndexAttr(0);
    OpFoldResult b0 = offsets[0], k0 = offsets[1];
    OpFoldResult tb = sizes[0], tk = sizes[1];
    auto [h0, th] = queryHeads(b, loc, bwd, k0, tk);
    // Rank-4 operands [B, H, N, D]: batch and heads sliced.
    auto rows = [&](Value v, OpFoldResult ho, OpFoldResult hs) -> Value {
      SmallVector<OpFoldResult> size = s.fullSizes(v);
      size[0] = tb;
      size[1] = hs;
      return s.slice(v, {b0, ho, zero, zero}, size);
    };
    auto perQueryHead = [&](Value v) { return rows(v, h0, th); };
    auto perKvHead = [&](Value v) { return rows(v, k0, tk); };
    Value lse;
    {
      SmallVector<OpFoldResult> size = s.fullSizes(bwd.getLse());
      size[0] = tb;
      size[1] = th;
      lse = s.slice(bwd.getLse(), {b0, h0, zero}, size);
    }
    Value kvLens;
    if (Value lens = bwd.getKvLens())
      kvLens = s.slice(lens, {b0}, {tb});
    Value mask;
    if (Value m = bwd.getMask()) {
      auto mType = cast<RankedTensorType>(m.getType());
      SmallVector<OpFoldResult> off = {zero, zero, zero, zero};
      SmallVector<OpFoldResult> size = s.fullSizes(m);
      if (mType.getDimSize(0) != 1) {
        off[0] = b0;
        size[0] = tb;
      }
      if (mType.getDimSize(1) != 1) {
        off[1] = h0;
        size[1] = th;
      }
      mask = s.slice(m, off, size);
    }
    Value alibi;
    if (Value a = bwd.getAlibi()) {
      if (cast<RankedTensorType>(a.getType()).getRank() == 1)
        alibi = s.slice(a, {h0}, {th});
      else
        alibi = s.slice(a, {b0, h0}, {tb, th});
    }
    Value qSeg, kSeg;
    if (Value qs = bwd.getQSegments()) {
      SmallVector<OpFoldResult> qSize = s.fullSizes(qs);
      qSize[0] = tb;
      qSeg = s.slice(qs, {b0, zero}, qSize);
      SmallVector<OpFoldResult> kSize = s.fullSizes(bwd.getKSegments());
      kSize[0] = tb;
      kSeg = s.slice(bwd.getKSegments(), {b0, zero}, kSize);
    }
    Value dq = perQueryHead(bwd.getGradQuery());
    Value dk = perKvHead(bwd.getGradKey());
    Value dv = perKvHead(bwd.getGradValue());
    auto tiled = AttentionBackwardOp::create(
        b, loc, TypeRange{dq.getType(), dk.getType(), dv.getType()},
        perQueryHead(bwd.getQuery()), perKvHead(bwd.getKey()),
        perKvHead(bwd.getValue()), perQueryHead(bwd.getOutput()), lse,
        perQueryHead(bwd.getGradOutput()), kvLens, mask, alibi, qSeg, kSeg,
        bwd.getQOffset(), dq, dk, dv, bwd.getScaleAttr(), bwd.getCausalAttr(),
        bwd.getWindowAttr(), bwd.getSoftcapAttr(), bwd.getChunkAttr());
    // The default scale reads D, which tiling keeps.
    return TilingResult{
        {tiled}, SmallVector<Value>(tiled->getResults()), s.slices};
  }

  LogicalResult
  getResultTilePosition(Operation *op, OpBuilder &b, unsigned resultNumber,
                        ArrayRef<OpFoldResult> offsets,
                        ArrayRef<OpFoldResult> sizes,
                        SmallVector<OpFoldResult> &resultOffsets,
                        SmallVector<OpFoldResult> &resultSizes) const {
    auto bwd = cast<AttentionBackwardOp>(op);
    Location loc = op->getLoc();
    Value dest = op->getOperand(op->getNumOperands() - 3 + resultNumber);
    SmallVector<OpFoldResult> full = tensor::getMixedSizes(b, loc, dest);
    OpFoldResult zero = b.getIndexAttr(0);
    OpFoldResult ho = offsets[1], hs = sizes[1];
    if (resultNumber == 0)
      std::tie(ho, hs) = queryHeads(b, loc, bwd, offsets[1], sizes[1]);
    resultOffsets = {offsets[0], ho, zero, zero};
    resultSizes = {sizes[0], hs, full[2], full[3]};
    return success();
  }
};
} // namespace

void fa::registerTilingInterfaceExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FADialect *) {
    AttentionOp::attachInterface<AttentionTilingModel>(*ctx);
    SoftmaxOp::attachInterface<SoftmaxTilingModel>(*ctx);
    AttentionBackwardOp::attachInterface<AttentionBackwardTilingModel>(*ctx);
  });
}
