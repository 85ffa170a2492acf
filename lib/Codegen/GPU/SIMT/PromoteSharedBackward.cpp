//===- PromoteSharedBackward.cpp - the SIMT backward kernels --------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers a kernel function holding one fa.attention_backward into the
// promoted, GPU-shaped form of FlashAttention 2's backward pass without
// atomics: two block-level scf.foralls (two kernels once fa-map-to-gpu has
// run), the dK/dV kernel over (key tiles, Hkv, B) and the dQ kernel over
// (query tiles, Hq, B), each with its tiles and f32 accumulators in
// workgroup memory, thread-level copy foralls and warp-level foralls on
// vector<32xT> lane vectors. See the pass description.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "fa/Codegen/Common/KernelForm.h"
#include "fa/Codegen/GPU/GpuKernelUtils.h"
#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAPROMOTESHAREDBACKWARDPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

namespace {

/// Tile sizes of the two backward kernels (shared by both).
struct BackwardGpuConfig {
  /// Query rows per tile and keys per tile; warps per block.
  int64_t blockQ = 32, blockKV = 32, numWarps = 4;
  int64_t headDim = 0, valueDim = 0, elementBytes = 4;
  /// Elements per row of the K and V tiles (padded by one 4-byte word so
  /// that lanes reading different keys fall in different banks).
  int64_t keyStride = 0, valueStride = 0;

  int64_t numThreads() const { return numWarps * kWarpSize; }
  /// Workgroup memory of the dK/dV kernel: K, V, the dK / dV accumulators,
  /// the Q and dO tiles, P and dS of a tile pair, LSE and Delta.
  int64_t keyKernelBytes(int64_t bq, int64_t bkv) const {
    return bkv * (keyStride + valueStride) * elementBytes +
           bkv * (headDim + valueDim) * 4 +
           bq * (headDim + valueDim) * elementBytes + 2 * bq * bkv * 4 +
           2 * bq * 4;
  }
  /// Workgroup memory of the dQ kernel: Q, dO, K, V, the dQ accumulator,
  /// LSE and Delta.
  int64_t queryKernelBytes(int64_t bq, int64_t bkv) const {
    return bq * (headDim + valueDim) * elementBytes +
           bkv * (keyStride + valueStride) * elementBytes + bq * headDim * 4 +
           2 * bq * 4;
  }
};

/// Picks the tile sizes (0 = automatic) within `budget` bytes of workgroup
/// memory for both kernels, or explains in `error` why none fits.
static FailureOr<BackwardGpuConfig>
chooseBackwardConfig(AttentionBackwardOp op, int64_t blockQ, int64_t blockKV,
                     int64_t numWarps, int64_t budget, std::string &error) {
  BackwardGpuConfig c;
  c.headDim = op.getHeadDim();
  c.valueDim = op.getValueHeadDim();
  c.elementBytes = cast<RankedTensorType>(op.getQuery().getType())
                       .getElementType()
                       .getIntOrFloatBitWidth() /
                   8;
  c.numWarps = numWarps;
  if (!isSupportedHeadDim(KernelFamily::Simt, c.headDim) ||
      !isSupportedHeadDim(KernelFamily::Simt, c.valueDim)) {
    error = "head dims must be multiples of 8 up to 256 on the GPU path, got "
            "D = " +
            std::to_string(c.headDim) +
            " and Dv = " + std::to_string(c.valueDim);
    return failure();
  }
  if (numWarps <= 0 || numWarps > 32) {
    error = "warps must be in [1, 32], got " + std::to_string(numWarps);
    return failure();
  }
  c.keyStride = c.headDim + 4 / c.elementBytes;
  c.valueStride = c.valueDim + 4 / c.elementBytes;
  SmallVector<int64_t> qCands, kvCands;
  if (blockQ > 0)
    qCands.push_back(blockQ);
  else if (c.elementBytes == 4)
    // f32: at most 2 rows per warp (with 4 warps); with 4, ptxas 13.0
    // spilled 8 bytes of the sm_90 dQ kernel at D = 64.
    qCands = {8, 4};
  else
    // At most 4 rows per warp (with 4 warps): the S and dP accumulators of
    // a warp's rows stay in registers without spills.
    qCands = {16, 8, 4};
  if (blockKV > 0)
    kvCands.push_back(blockKV);
  else
    kvCands = {32, 16, 8};
  // Larger key tiles first: they fill the lanes of the score phase.
  for (int64_t bkv : kvCands) {
    if (bkv <= 0 || bkv > kWarpSize || bkv % numWarps != 0)
      continue;
    for (int64_t bq : qCands) {
      if (bq <= 0 || bq % numWarps != 0)
        continue;
      if (c.keyKernelBytes(bq, bkv) > budget ||
          c.queryKernelBytes(bq, bkv) > budget)
        continue;
      c.blockQ = bq;
      c.blockKV = bkv;
      return c;
    }
  }
  error = "no tile sizes fit: block-q must be a positive multiple of the " +
          std::to_string(numWarps) +
          " warps, block-kv a multiple of them up to 32, and the tiles and "
          "accumulators of each kernel at most " +
          std::to_string(budget) +
          " bytes of workgroup memory (D = " + std::to_string(c.headDim) +
          ", Dv = " + std::to_string(c.valueDim) + ")";
  return failure();
}

/// The positions one query tile of one query head is computed at.
struct RowPlace {
  Value batch, head, kvHead, q0, slope;
};

/// Builds the two promoted kernels of one backward function.
class BackwardPromotedBuilder {
public:
  BackwardPromotedBuilder(AttentionBackwardOp op,
                          const BackwardKernelOperands &args,
                          const BackwardGpuConfig &cfg)
      : op(op), args(args), cfg(cfg), ctx(op.getContext()), loc(op.getLoc()) {
    elt = cast<MemRefType>(args.q.getType()).getElementType();
    group = op.getGroupSize();
    sem = AttentionSemantics::get(op);
    scale = op.getEffectiveScale();
    lanes = VectorType::get({kWarpSize}, IndexType::get(ctx));
    f32Lanes = VectorType::get({kWarpSize}, Float32Type::get(ctx));
    keySlots = (cfg.blockKV + kWarpSize - 1) / kWarpSize;
  }

  /// Replaces the body of `func` by the two promoted kernels.
  void build(func::FuncOp func);

private:
  Value cIdx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value cF32(OpBuilder &b, float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value splat(OpBuilder &b, Value scalar) {
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({kWarpSize}, scalar.getType()), scalar);
  }
  Value toF32(OpBuilder &b, Value v) {
    Type target = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(v.getType()))
      target = VectorType::get(vt.getShape(), target);
    return v.getType() == target ? v : arith::ExtFOp::create(b, loc, target, v);
  }
  Value allTrue(OpBuilder &b) {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(VectorType::get({kWarpSize}, b.getI1Type()),
                               true));
  }
  Value zeroLanes(OpBuilder &b) {
    return arith::ConstantOp::create(b, loc, b.getZeroAttr(f32Lanes));
  }
  Value gather1D(OpBuilder &b, Value buffer, Value indices) {
    auto type = cast<MemRefType>(buffer.getType());
    auto resultType = VectorType::get({kWarpSize}, type.getElementType());
    Value pass = arith::ConstantOp::create(b, loc, b.getZeroAttr(resultType));
    return vector::GatherOp::create(b, loc, resultType, buffer,
                                    ValueRange{cIdx(b, 0)}, indices, allTrue(b),
                                    pass);
  }
  void scatter1D(OpBuilder &b, Value buffer, Value indices, Value mask,
                 Value values) {
    vector::ScatterOp::create(b, loc, /*result=*/Type(), buffer,
                              ValueRange{cIdx(b, 0)}, indices, mask, values);
  }
  Value workgroupBuffer(OpBuilder &b, int64_t size, Type type) {
    auto memrefType = MemRefType::get(
        {size}, type, MemRefLayoutAttrInterface(),
        IntegerAttr::get(IntegerType::get(ctx, 64), kWorkgroupAddressSpace));
    auto alloca = memref::AllocaOp::create(b, loc, memrefType);
    alloca.setAlignment(16);
    return alloca;
  }
  void forall(OpBuilder &b, int64_t n, Attribute mapping,
              function_ref<void(OpBuilder &, Value)> body) {
    auto forallOp =
        scf::ForallOp::create(b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(n)},
                              ValueRange{}, b.getArrayAttr({mapping}));
    OpBuilder nb = OpBuilder::atBlockBegin(forallOp.getBody());
    body(nb, forallOp.getInductionVars()[0]);
  }
  void threads(OpBuilder &b, function_ref<void(OpBuilder &, Value)> body) {
    forall(b, cfg.numThreads(),
           gpu::GPUThreadMappingAttr::get(ctx, gpu::MappingId::DimX), body);
  }
  /// A warp forall; `body` gets the warp index (laneIds is set).
  void warps(OpBuilder &b, function_ref<void(OpBuilder &, Value)> body) {
    forall(b, cfg.numWarps,
           gpu::GPUWarpMappingAttr::get(ctx, gpu::MappingId::DimX),
           [&](OpBuilder &wb, Value w) {
             laneIds = vector::StepOp::create(wb, loc, lanes);
             body(wb, w);
           });
  }
  void threadStrided(OpBuilder &b, Value t, int64_t n,
                     function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(b, loc, t, cIdx(b, n), cIdx(b, cfg.numThreads()),
                       ValueRange{},
                       [&](OpBuilder &lb, Location, Value i, ValueRange) {
                         body(lb, i);
                         scf::YieldOp::create(lb, loc);
                       });
  }
  void ifThen(OpBuilder &b, Value cond, function_ref<void(OpBuilder &)> body) {
    scf::IfOp::create(b, loc, cond, [&](OpBuilder &ib, Location) {
      body(ib);
      scf::YieldOp::create(ib, loc);
    });
  }
  void zeroFill(OpBuilder &b, Value t, Value buffer, int64_t n) {
    threadStrided(b, t, n, [&](OpBuilder &lb, Value i) {
      memref::StoreOp::create(lb, loc, cF32(lb, 0.0f), buffer, ValueRange{i});
    });
  }
  /// Copies rows [row0, row0 + rows) of `src[batch, head, :, :]` (`width`
  /// columns) into `dst` (row stride `stride`), zero-filling rows at or
  /// past `rowEnd` (>= 1).
  void copyTile(OpBuilder &b, Value t, Value src, Value batch, Value head,
                Value row0, Value rowEnd, int64_t rows, int64_t width,
                int64_t stride, Value dst);
  /// Lane vector of column slot `i` (c + 32 i) and its clamped form.
  std::pair<Value, Value> columns(OpBuilder &b, int64_t i, int64_t width) {
    Value c = arith::AddIOp::create(b, loc, laneIds,
                                    splat(b, cIdx(b, i * kWarpSize)));
    Value cC = arith::MinSIOp::create(b, loc, c, splat(b, cIdx(b, width - 1)));
    return {c, cC};
  }
  /// Delta = rowsum(dO * O) and the LSE (log2 domain, -inf past the rows)
  /// of the query tile's rows held by warp `w`.
  void buildRowStats(OpBuilder &b, Value w, const RowPlace &at);
  /// P and dS (scaled: the gradient of the raw score Q K^T) of the rows of
  /// warp `w` against the key tile from `k0` (lanes over keys, one vector
  /// per key slot): result[row][slot] = {p, ds}.
  SmallVector<SmallVector<std::pair<Value, Value>>>
  buildTilePair(OpBuilder &b, Value w, const RowPlace &at, Value k0);
  /// The scores of key slot `t` for query row `qRow` (log2 domain, masked)
  /// from the raw dot products `s`; `der` receives the softcap derivative
  /// (null without softcap).
  Value maskedScores(OpBuilder &b, Value s, Value qRow, const RowPlace &at,
                     Value k0, int64_t t, Value &der);

  void buildKeyKernel(OpBuilder &b);
  void buildQueryKernel(OpBuilder &b);

  AttentionBackwardOp op;
  BackwardKernelOperands args;
  BackwardGpuConfig cfg;
  MLIRContext *ctx;
  Location loc;
  Type elt;
  int64_t group, keySlots;
  AttentionSemantics sem;
  float scale;
  VectorType lanes, f32Lanes;

  // Per block.
  Value nq, nk, keyEnd, diagOffset, laneIds;
  // Workgroup buffers.
  Value qTile, doTile, kTile, vTile, lseState, deltaState;
  Value dkAcc, dvAcc, pBuf, dsBuf, dqAcc;
};

} // namespace

void BackwardPromotedBuilder::copyTile(OpBuilder &b, Value t, Value src,
                                       Value batch, Value head, Value row0,
                                       Value rowEnd, int64_t rows,
                                       int64_t width, int64_t stride,
                                       Value dst) {
  threadStrided(b, t, rows * width, [&](OpBuilder &lb, Value i) {
    Value w = cIdx(lb, width);
    Value r = arith::DivUIOp::create(lb, loc, i, w);
    Value c = arith::RemUIOp::create(lb, loc, i, w);
    Value row = arith::AddIOp::create(lb, loc, row0, r);
    Value inside =
        arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::slt, row, rowEnd);
    // A clamped row, 0 past the end: every read in bounds, no branch.
    Value rowC = arith::MinSIOp::create(
        lb, loc, row, arith::SubIOp::create(lb, loc, rowEnd, cIdx(lb, 1)));
    Value loaded =
        memref::LoadOp::create(lb, loc, src, ValueRange{batch, head, rowC, c});
    Value zero = arith::ConstantOp::create(lb, loc, lb.getZeroAttr(elt));
    Value value = arith::SelectOp::create(lb, loc, inside, loaded, zero);
    Value at = arith::AddIOp::create(
        lb, loc, arith::MulIOp::create(lb, loc, r, cIdx(lb, stride)), c);
    memref::StoreOp::create(lb, loc, value, dst, ValueRange{at});
  });
}

void BackwardPromotedBuilder::buildRowStats(OpBuilder &b, Value w,
                                            const RowPlace &at) {
  int64_t rpw = cfg.blockQ / cfg.numWarps;
  int64_t colSlots = (cfg.valueDim + kWarpSize - 1) / kWarpSize;
  Value laneZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         laneIds, splat(b, cIdx(b, 0)));
  Value rowBase = arith::MulIOp::create(b, loc, w, cIdx(b, rpw));
  Value last = arith::SubIOp::create(b, loc, nq, cIdx(b, 1));
  for (int64_t rr = 0; rr < rpw; ++rr) {
    Value row = arith::AddIOp::create(b, loc, rowBase, cIdx(b, rr));
    Value q = arith::AddIOp::create(b, loc, at.q0, row);
    Value inRows =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, q, nq);
    // Rows past Nq read row Nq - 1 (a tile exists only when Nq >= 1).
    Value qC = arith::MinSIOp::create(b, loc, q, last);
    Value sum = zeroLanes(b);
    for (int64_t i = 0; i < colSlots; ++i) {
      auto [c, cC] = columns(b, i, cfg.valueDim);
      Value inCols = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, c,
                                           splat(b, cIdx(b, cfg.valueDim)));
      Value dov = toF32(
          b, gather1D(b, doTile,
                      arith::AddIOp::create(
                          b, loc,
                          splat(b, arith::MulIOp::create(
                                       b, loc, row, cIdx(b, cfg.valueDim))),
                          cC)));
      auto oType = VectorType::get({kWarpSize}, elt);
      Value pass = arith::ConstantOp::create(b, loc, b.getZeroAttr(oType));
      Value ov = toF32(b, vector::GatherOp::create(
                              b, loc, oType, args.o,
                              ValueRange{at.batch, at.head, qC, cIdx(b, 0)}, cC,
                              allTrue(b), pass));
      Value prod = arith::MulFOp::create(b, loc, dov, ov);
      sum = arith::AddFOp::create(
          b, loc, sum,
          arith::SelectOp::create(b, loc, inCols, prod, zeroLanes(b)));
    }
    Value delta =
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, sum);
    Value lse = memref::LoadOp::create(b, loc, args.lse,
                                       ValueRange{at.batch, at.head, qC});
    Value lse2 = arith::MulFOp::create(b, loc, lse,
                                       cF32(b, static_cast<float>(M_LOG2E)));
    // A row past Nq has no probability: LSE -inf makes its P exactly 0.
    lse2 = arith::SelectOp::create(
        b, loc, inRows, lse2, cF32(b, -std::numeric_limits<float>::infinity()));
    delta = arith::SelectOp::create(b, loc, inRows, delta, cF32(b, 0.0f));
    Value rowV = splat(b, row);
    scatter1D(b, deltaState, rowV, laneZero, splat(b, delta));
    scatter1D(b, lseState, rowV, laneZero, splat(b, lse2));
  }
}

Value BackwardPromotedBuilder::maskedScores(OpBuilder &b, Value s, Value qRow,
                                            const RowPlace &at, Value k0,
                                            int64_t t, Value &der) {
  Value keyLocal =
      arith::AddIOp::create(b, loc, laneIds, splat(b, cIdx(b, t * kWarpSize)));
  Value key = arith::AddIOp::create(b, loc, keyLocal, splat(b, k0));
  // Lanes past the tile hold no key; the rest follow the forward's rules.
  Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                      keyLocal, splat(b, cIdx(b, cfg.blockKV)));
  if (Value keep = sem.keepKey(b, loc, qRow, key, keyEnd, diagOffset))
    valid = arith::AndIOp::create(b, loc, valid, keep);
  Value scaled = arith::MulFOp::create(b, loc, s, splat(b, cF32(b, scale)));
  der = sem.scoreDerivative(b, loc, scaled);
  Value x = arith::MulFOp::create(
      b, loc, scaled, splat(b, cF32(b, static_cast<float>(M_LOG2E))));
  if (sem.hasSoftcap() || sem.hasAlibi())
    x = sem.modifyScore(b, loc, x, qRow, key, diagOffset, at.slope, M_LOG2E);
  Value one = cIdx(b, 1);
  Value qRowC = arith::MinSIOp::create(b, loc, qRow,
                                       arith::SubIOp::create(b, loc, nq, one));
  Value keyC = arith::MinSIOp::create(
      b, loc, key, splat(b, arith::SubIOp::create(b, loc, nk, one)));
  if (args.qSegments) {
    Value qSeg = memref::LoadOp::create(b, loc, args.qSegments,
                                        ValueRange{at.batch, qRowC});
    auto segType = VectorType::get({kWarpSize}, b.getI32Type());
    Value pass = arith::ConstantOp::create(b, loc, b.getZeroAttr(segType));
    Value kSeg = vector::GatherOp::create(b, loc, segType, args.kSegments,
                                          ValueRange{at.batch, cIdx(b, 0)},
                                          keyC, allTrue(b), pass);
    sem.applySegments(b, loc, qSeg, kSeg, valid);
  }
  if (args.mask) {
    auto mType = cast<MemRefType>(args.mask.getType());
    Value mb = mType.getDimSize(0) == 1 ? cIdx(b, 0) : at.batch;
    Value mh = mType.getDimSize(1) == 1 ? cIdx(b, 0) : at.head;
    auto resultType = VectorType::get({kWarpSize}, mType.getElementType());
    Value pass = arith::ConstantOp::create(b, loc, b.getZeroAttr(resultType));
    Value mv = vector::GatherOp::create(b, loc, resultType, args.mask,
                                        ValueRange{mb, mh, qRowC, cIdx(b, 0)},
                                        keyC, allTrue(b), pass);
    sem.applyMaskElement(b, loc, mv, x, valid, M_LOG2E);
  }
  return AttentionSemantics::removeUnkept(b, loc, valid, x);
}

SmallVector<SmallVector<std::pair<Value, Value>>>
BackwardPromotedBuilder::buildTilePair(OpBuilder &b, Value w,
                                       const RowPlace &at, Value k0) {
  int64_t rpw = cfg.blockQ / cfg.numWarps;
  Value rowBase = arith::MulIOp::create(b, loc, w, cIdx(b, rpw));
  SmallVector<Value> keyRows;
  for (int64_t t = 0; t < keySlots; ++t) {
    Value r = arith::AddIOp::create(b, loc, laneIds,
                                    splat(b, cIdx(b, t * kWarpSize)));
    keyRows.push_back(
        arith::MinSIOp::create(b, loc, r, splat(b, cIdx(b, cfg.blockKV - 1))));
  }
  // S = Q K^T and dP = dO V^T for the warp's rows: lane-parallel dot
  // products per (row, key slot), one loop over d and one over the value
  // columns.
  auto dots = [&](Value tile, Value keyTile, int64_t width, int64_t stride) {
    SmallVector<Value> inits(rpw * keySlots, zeroLanes(b));
    auto loop = scf::ForOp::create(
        b, loc, cIdx(b, 0), cIdx(b, width), cIdx(b, 1), inits,
        [&](OpBuilder &lb, Location, Value d, ValueRange acc) {
          SmallVector<Value> kv;
          for (int64_t t = 0; t < keySlots; ++t) {
            Value idx = arith::AddIOp::create(
                lb, loc,
                arith::MulIOp::create(lb, loc, keyRows[t],
                                      splat(lb, cIdx(lb, stride))),
                splat(lb, d));
            kv.push_back(toF32(lb, gather1D(lb, keyTile, idx)));
          }
          SmallVector<Value> next;
          for (int64_t rr = 0; rr < rpw; ++rr) {
            Value row = arith::AddIOp::create(lb, loc, rowBase, cIdx(lb, rr));
            Value idx = arith::AddIOp::create(
                lb, loc, arith::MulIOp::create(lb, loc, row, cIdx(lb, width)),
                d);
            Value qs =
                splat(lb, toF32(lb, memref::LoadOp::create(lb, loc, tile,
                                                           ValueRange{idx})));
            for (int64_t t = 0; t < keySlots; ++t)
              next.push_back(arith::AddFOp::create(
                  lb, loc, acc[rr * keySlots + t],
                  arith::MulFOp::create(lb, loc, qs, kv[t])));
          }
          scf::YieldOp::create(lb, loc, next);
        });
    return loop;
  };
  auto sLoop = dots(qTile, kTile, cfg.headDim, cfg.keyStride);
  auto dpLoop = dots(doTile, vTile, cfg.valueDim, cfg.valueStride);

  Value zero = zeroLanes(b);
  Value scaleV = splat(b, cF32(b, scale));
  SmallVector<SmallVector<std::pair<Value, Value>>> result;
  for (int64_t rr = 0; rr < rpw; ++rr) {
    Value row = arith::AddIOp::create(b, loc, rowBase, cIdx(b, rr));
    Value qRow = arith::AddIOp::create(b, loc, at.q0, row);
    Value lse2 =
        splat(b, memref::LoadOp::create(b, loc, lseState, ValueRange{row}));
    Value delta =
        splat(b, memref::LoadOp::create(b, loc, deltaState, ValueRange{row}));
    SmallVector<std::pair<Value, Value>> slots;
    for (int64_t t = 0; t < keySlots; ++t) {
      Value der;
      Value x = maskedScores(b, sLoop.getResult(rr * keySlots + t), qRow, at,
                             k0, t, der);
      // P = exp(S - LSE), 0 for removed keys and rows without keys.
      Value p = guardedProbability(b, loc, x, lse2, /*base2=*/true);
      // dS = P (dP - Delta) (x the softcap's derivative) x scale, exactly 0
      // where P = 0 (a removed key's V row may hold NaN).
      Value ds = arith::MulFOp::create(
          b, loc, p,
          arith::SubFOp::create(b, loc, dpLoop.getResult(rr * keySlots + t),
                                delta));
      if (der)
        ds = arith::MulFOp::create(b, loc, ds, der);
      ds = arith::MulFOp::create(b, loc, ds, scaleV);
      Value pZero =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, p, zero);
      ds = arith::SelectOp::create(b, loc, pZero, zero, ds);
      slots.push_back({p, ds});
    }
    result.push_back(std::move(slots));
  }
  return result;
}

void BackwardPromotedBuilder::buildKeyKernel(OpBuilder &b) {
  // Grid: (key tiles, Hkv, B).
  Value gB = memref::DimOp::create(b, loc, args.q, 0);
  Value gNk = memref::DimOp::create(b, loc, args.k, 2);
  Value gTiles = arith::CeilDivUIOp::create(b, loc, gNk, cIdx(b, cfg.blockKV));
  auto blocks =
      createBlockForall(b, loc, {gTiles, b.getIndexAttr(op.getKvHeads()), gB});
  blocks->setAttr(kForallKernelSuffixAttrName, b.getStringAttr("_dkdv"));
  OpBuilder bb = OpBuilder::atBlockBegin(blocks.getBody());
  SmallVector<Value> ivs = blocks.getInductionVars();
  Value batch = ivs[2], kvHead = ivs[1];
  Value k0 = arith::MulIOp::create(bb, loc, ivs[0], cIdx(bb, cfg.blockKV));
  nq = memref::DimOp::create(bb, loc, args.q, 2);
  nk = memref::DimOp::create(bb, loc, args.k, 2);
  Value qOffset = args.qOffset;
  if (qOffset && !isa<BlockArgument>(qOffset))
    qOffset = bb.clone(*qOffset.getDefiningOp())->getResult(0);
  Value len;
  if (args.kvLens)
    len = memref::LoadOp::create(bb, loc, args.kvLens, ValueRange{batch});
  keyEnd = sem.keyLengthEnd(bb, loc, len, nk);
  diagOffset = sem.diagonalOffset(bb, loc, nq, nk, qOffset);
  int64_t dK = cfg.headDim, dV = cfg.valueDim;

  threads(bb, [&](OpBuilder &tb, Value t) {
    zeroFill(tb, t, dkAcc, cfg.blockKV * dK);
    zeroFill(tb, t, dvAcc, cfg.blockKV * dV);
  });
  // Keys past the key lengths get no gradient: a tile starting there only
  // writes zeros.
  Value anyKey =
      arith::CmpIOp::create(bb, loc, arith::CmpIPredicate::slt, k0, keyEnd);
  ifThen(bb, anyKey, [&](OpBuilder &ib) {
    threads(ib, [&](OpBuilder &tb, Value t) {
      copyTile(tb, t, args.k, batch, kvHead, k0, keyEnd, cfg.blockKV, dK,
               cfg.keyStride, kTile);
      copyTile(tb, t, args.v, batch, kvHead, k0, keyEnd, cfg.blockKV, dV,
               cfg.valueStride, vTile);
    });
    Value kEnd = arith::AddIOp::create(ib, loc, k0, cIdx(ib, cfg.blockKV));
    Value numQ = arith::CeilDivUIOp::create(ib, loc, nq, cIdx(ib, cfg.blockQ));
    // Every query head of the group, every query tile whose forward key
    // range meets this key tile (the pairs the forward visited).
    scf::ForOp::create(
        ib, loc, cIdx(ib, 0), cIdx(ib, group), cIdx(ib, 1), ValueRange{},
        [&](OpBuilder &gb, Location, Value g, ValueRange) {
          RowPlace at;
          at.batch = batch;
          at.kvHead = kvHead;
          at.head = arith::AddIOp::create(
              gb, loc, arith::MulIOp::create(gb, loc, kvHead, cIdx(gb, group)),
              g);
          at.slope = AttentionSemantics::loadAlibiSlope(gb, loc, args.alibi,
                                                        batch, at.head);
          scf::ForOp::create(
              gb, loc, cIdx(gb, 0), numQ, cIdx(gb, 1), ValueRange{},
              [&](OpBuilder &lb, Location, Value i, ValueRange) {
                at.q0 = arith::MulIOp::create(lb, loc, i, cIdx(lb, cfg.blockQ));
                Value rows = arith::MinSIOp::create(
                    lb, loc, cIdx(lb, cfg.blockQ),
                    arith::SubIOp::create(lb, loc, nq, at.q0));
                Value end =
                    sem.visitedKeyEnd(lb, loc, keyEnd, at.q0, rows, diagOffset);
                Value visited = arith::CmpIOp::create(
                    lb, loc, arith::CmpIPredicate::slt, k0, end);
                if (Value begin =
                        sem.visitedKeyBegin(lb, loc, at.q0, diagOffset))
                  visited = arith::AndIOp::create(
                      lb, loc, visited,
                      arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::slt,
                                            begin, kEnd));
                ifThen(lb, visited, [&](OpBuilder &vb) {
                  threads(vb, [&](OpBuilder &tb, Value t) {
                    copyTile(tb, t, args.q, batch, at.head, at.q0, nq,
                             cfg.blockQ, dK, dK, qTile);
                    copyTile(tb, t, args.dO, batch, at.head, at.q0, nq,
                             cfg.blockQ, dV, dV, doTile);
                  });
                  warps(vb, [&](OpBuilder &wb, Value w) {
                    buildRowStats(wb, w, at);
                  });
                  // P and dS of the tile pair, by query rows.
                  warps(vb, [&](OpBuilder &wb, Value w) {
                    auto pair = buildTilePair(wb, w, at, k0);
                    int64_t rpw = cfg.blockQ / cfg.numWarps;
                    Value rowBase =
                        arith::MulIOp::create(wb, loc, w, cIdx(wb, rpw));
                    for (int64_t rr = 0; rr < rpw; ++rr) {
                      Value row =
                          arith::AddIOp::create(wb, loc, rowBase, cIdx(wb, rr));
                      for (int64_t t = 0; t < keySlots; ++t) {
                        Value key = arith::AddIOp::create(
                            wb, loc, laneIds,
                            splat(wb, cIdx(wb, t * kWarpSize)));
                        Value inTile = arith::CmpIOp::create(
                            wb, loc, arith::CmpIPredicate::slt, key,
                            splat(wb, cIdx(wb, cfg.blockKV)));
                        Value idx = arith::AddIOp::create(
                            wb, loc,
                            splat(wb, arith::MulIOp::create(
                                          wb, loc, row, cIdx(wb, cfg.blockKV))),
                            key);
                        scatter1D(wb, pBuf, idx, inTile, pair[rr][t].first);
                        scatter1D(wb, dsBuf, idx, inTile, pair[rr][t].second);
                      }
                    }
                  });
                  // dV += P^T dO and dK += dS^T Q, by keys: lanes over the
                  // columns, P and dS broadcast from workgroup memory.
                  warps(vb, [&](OpBuilder &wb, Value w) {
                    int64_t kpw = cfg.blockKV / cfg.numWarps;
                    int64_t cK = (dK + kWarpSize - 1) / kWarpSize;
                    int64_t cV = (dV + kWarpSize - 1) / kWarpSize;
                    Value keyBase =
                        arith::MulIOp::create(wb, loc, w, cIdx(wb, kpw));
                    SmallVector<Value> colsK, colsV, inits;
                    for (int64_t c = 0; c < cK; ++c)
                      colsK.push_back(columns(wb, c, dK).second);
                    for (int64_t c = 0; c < cV; ++c)
                      colsV.push_back(columns(wb, c, dV).second);
                    auto accAt = [&](OpBuilder &ob, Value key, Value col,
                                     int64_t width) {
                      return arith::AddIOp::create(
                          ob, loc,
                          splat(ob, arith::MulIOp::create(ob, loc, key,
                                                          cIdx(ob, width))),
                          col);
                    };
                    SmallVector<Value> keys;
                    for (int64_t kk = 0; kk < kpw; ++kk) {
                      keys.push_back(arith::AddIOp::create(wb, loc, keyBase,
                                                           cIdx(wb, kk)));
                      for (int64_t c = 0; c < cK; ++c)
                        inits.push_back(gather1D(
                            wb, dkAcc, accAt(wb, keys[kk], colsK[c], dK)));
                      for (int64_t c = 0; c < cV; ++c)
                        inits.push_back(gather1D(
                            wb, dvAcc, accAt(wb, keys[kk], colsV[c], dV)));
                    }
                    auto loop = scf::ForOp::create(
                        wb, loc, cIdx(wb, 0), cIdx(wb, cfg.blockQ), cIdx(wb, 1),
                        inits,
                        [&](OpBuilder &fb, Location, Value q, ValueRange acc) {
                          SmallVector<Value> qv, dov;
                          for (int64_t c = 0; c < cK; ++c)
                            qv.push_back(toF32(
                                fb, gather1D(fb, qTile,
                                             accAt(fb, q, colsK[c], dK))));
                          for (int64_t c = 0; c < cV; ++c)
                            dov.push_back(toF32(
                                fb, gather1D(fb, doTile,
                                             accAt(fb, q, colsV[c], dV))));
                          SmallVector<Value> next;
                          for (int64_t kk = 0; kk < kpw; ++kk) {
                            Value at = arith::AddIOp::create(
                                fb, loc,
                                arith::MulIOp::create(fb, loc, q,
                                                      cIdx(fb, cfg.blockKV)),
                                keys[kk]);
                            Value p =
                                splat(fb, memref::LoadOp::create(
                                              fb, loc, pBuf, ValueRange{at}));
                            Value ds =
                                splat(fb, memref::LoadOp::create(
                                              fb, loc, dsBuf, ValueRange{at}));
                            int64_t base = kk * (cK + cV);
                            for (int64_t c = 0; c < cK; ++c)
                              next.push_back(arith::AddFOp::create(
                                  fb, loc, acc[base + c],
                                  arith::MulFOp::create(fb, loc, ds, qv[c])));
                            for (int64_t c = 0; c < cV; ++c)
                              next.push_back(arith::AddFOp::create(
                                  fb, loc, acc[base + cK + c],
                                  arith::MulFOp::create(fb, loc, p, dov[c])));
                          }
                          scf::YieldOp::create(fb, loc, next);
                        });
                    for (int64_t kk = 0; kk < kpw; ++kk) {
                      int64_t base = kk * (cK + cV);
                      for (int64_t c = 0; c < cK; ++c) {
                        auto [col, colC] = columns(wb, c, dK);
                        Value in = arith::CmpIOp::create(
                            wb, loc, arith::CmpIPredicate::slt, col,
                            splat(wb, cIdx(wb, dK)));
                        scatter1D(wb, dkAcc, accAt(wb, keys[kk], colC, dK), in,
                                  loop.getResult(base + c));
                      }
                      for (int64_t c = 0; c < cV; ++c) {
                        auto [col, colC] = columns(wb, c, dV);
                        Value in = arith::CmpIOp::create(
                            wb, loc, arith::CmpIPredicate::slt, col,
                            splat(wb, cIdx(wb, dV)));
                        scatter1D(wb, dvAcc, accAt(wb, keys[kk], colC, dV), in,
                                  loop.getResult(base + cK + c));
                      }
                    }
                  });
                });
                scf::YieldOp::create(lb, loc);
              });
          scf::YieldOp::create(gb, loc);
        });
  });

  // dK and dV of the tile's keys below Nk, rounded to the element type.
  warps(bb, [&](OpBuilder &wb, Value w) {
    int64_t kpw = cfg.blockKV / cfg.numWarps;
    auto eltLanes = VectorType::get({kWarpSize}, elt);
    for (int64_t kk = 0; kk < kpw; ++kk) {
      Value local = arith::AddIOp::create(
          wb, loc, arith::MulIOp::create(wb, loc, w, cIdx(wb, kpw)),
          cIdx(wb, kk));
      Value key = arith::AddIOp::create(wb, loc, k0, local);
      Value inKeys =
          arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, key, nk);
      Value keyC = arith::MinSIOp::create(
          wb, loc, key, arith::SubIOp::create(wb, loc, nk, cIdx(wb, 1)));
      for (auto [acc, dest, width] :
           {std::tuple(dkAcc, args.dk, dK), std::tuple(dvAcc, args.dv, dV)}) {
        for (int64_t c = 0; c < (width + kWarpSize - 1) / kWarpSize; ++c) {
          auto [col, colC] = columns(wb, c, width);
          Value value =
              gather1D(wb, acc,
                       arith::AddIOp::create(
                           wb, loc,
                           splat(wb, arith::MulIOp::create(wb, loc, local,
                                                           cIdx(wb, width))),
                           colC));
          if (eltLanes != f32Lanes)
            value = arith::TruncFOp::create(wb, loc, eltLanes, value);
          Value mask = arith::AndIOp::create(
              wb, loc, splat(wb, inKeys),
              arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, col,
                                    splat(wb, cIdx(wb, width))));
          vector::ScatterOp::create(
              wb, loc, Type(), dest,
              ValueRange{batch, kvHead, keyC, cIdx(wb, 0)}, colC, mask, value);
        }
      }
    }
  });
}

void BackwardPromotedBuilder::buildQueryKernel(OpBuilder &b) {
  // Grid: (query tiles, Hq, B).
  Value gB = memref::DimOp::create(b, loc, args.q, 0);
  Value gNq = memref::DimOp::create(b, loc, args.q, 2);
  Value gTiles = arith::CeilDivUIOp::create(b, loc, gNq, cIdx(b, cfg.blockQ));
  int64_t heads = cast<MemRefType>(args.q.getType()).getDimSize(1);
  auto blocks = createBlockForall(b, loc, {gTiles, b.getIndexAttr(heads), gB});
  OpBuilder bb = OpBuilder::atBlockBegin(blocks.getBody());
  SmallVector<Value> ivs = blocks.getInductionVars();
  RowPlace at;
  at.batch = ivs[2];
  at.head = ivs[1];
  at.kvHead =
      group == 1
          ? at.head
          : Value(arith::DivUIOp::create(bb, loc, at.head, cIdx(bb, group)));
  at.q0 = arith::MulIOp::create(bb, loc, ivs[0], cIdx(bb, cfg.blockQ));
  at.slope = AttentionSemantics::loadAlibiSlope(bb, loc, args.alibi, at.batch,
                                                at.head);
  nq = memref::DimOp::create(bb, loc, args.q, 2);
  nk = memref::DimOp::create(bb, loc, args.k, 2);
  Value qOffset = args.qOffset;
  if (qOffset && !isa<BlockArgument>(qOffset))
    qOffset = bb.clone(*qOffset.getDefiningOp())->getResult(0);
  Value len;
  if (args.kvLens)
    len = memref::LoadOp::create(bb, loc, args.kvLens, ValueRange{at.batch});
  keyEnd = sem.keyLengthEnd(bb, loc, len, nk);
  diagOffset = sem.diagonalOffset(bb, loc, nq, nk, qOffset);
  Value rows = arith::MinSIOp::create(
      bb, loc, cIdx(bb, cfg.blockQ), arith::SubIOp::create(bb, loc, nq, at.q0));
  Value kvEnd = sem.visitedKeyEnd(bb, loc, keyEnd, at.q0, rows, diagOffset);
  Value kvBegin = sem.visitedTileBegin(bb, loc, at.q0, diagOffset, cfg.blockKV);
  Value span = AttentionSemantics::visitedKeyCount(bb, loc, kvBegin, kvEnd);
  Value numKV =
      arith::CeilDivUIOp::create(bb, loc, span, cIdx(bb, cfg.blockKV));
  int64_t dK = cfg.headDim, dV = cfg.valueDim;
  int64_t cK = (dK + kWarpSize - 1) / kWarpSize;
  int64_t rpw = cfg.blockQ / cfg.numWarps;

  threads(bb, [&](OpBuilder &tb, Value t) {
    copyTile(tb, t, args.q, at.batch, at.head, at.q0, nq, cfg.blockQ, dK, dK,
             qTile);
    copyTile(tb, t, args.dO, at.batch, at.head, at.q0, nq, cfg.blockQ, dV, dV,
             doTile);
    zeroFill(tb, t, dqAcc, cfg.blockQ * dK);
  });
  warps(bb, [&](OpBuilder &wb, Value w) { buildRowStats(wb, w, at); });
  scf::ForOp::create(
      bb, loc, cIdx(bb, 0), numKV, cIdx(bb, 1), ValueRange{},
      [&](OpBuilder &lb, Location, Value j, ValueRange) {
        Value k0 = arith::MulIOp::create(lb, loc, j, cIdx(lb, cfg.blockKV));
        if (kvBegin)
          k0 = arith::AddIOp::create(lb, loc, kvBegin, k0);
        threads(lb, [&](OpBuilder &tb, Value t) {
          copyTile(tb, t, args.k, at.batch, at.kvHead, k0, kvEnd, cfg.blockKV,
                   dK, cfg.keyStride, kTile);
          copyTile(tb, t, args.v, at.batch, at.kvHead, k0, kvEnd, cfg.blockKV,
                   dV, cfg.valueStride, vTile);
        });
        // dQ += dS K: each key's dS broadcast from its lane.
        warps(lb, [&](OpBuilder &wb, Value w) {
          auto pair = buildTilePair(wb, w, at, k0);
          Value rowBase = arith::MulIOp::create(wb, loc, w, cIdx(wb, rpw));
          Value zeroF = cF32(wb, 0.0f);
          for (int64_t rr = 0; rr < rpw; ++rr) {
            Value row = arith::AddIOp::create(wb, loc, rowBase, cIdx(wb, rr));
            SmallVector<Value> colsC, accAt, acc;
            for (int64_t c = 0; c < cK; ++c) {
              colsC.push_back(columns(wb, c, dK).second);
              accAt.push_back(arith::AddIOp::create(
                  wb, loc,
                  splat(wb, arith::MulIOp::create(wb, loc, row, cIdx(wb, dK))),
                  colsC.back()));
              acc.push_back(gather1D(wb, dqAcc, accAt.back()));
            }
            for (int64_t t = 0; t < keySlots; ++t) {
              int64_t keysInSlot =
                  std::min<int64_t>(kWarpSize, cfg.blockKV - t * kWarpSize);
              Value ds = pair[rr][t].second;
              auto loop = scf::ForOp::create(
                  wb, loc, cIdx(wb, 0), cIdx(wb, keysInSlot), cIdx(wb, 1), acc,
                  [&](OpBuilder &fb, Location, Value src, ValueRange a) {
                    Value dsk = vector::ExtractOp::create(
                        fb, loc, ds, ArrayRef<OpFoldResult>{src});
                    Value keyRow = arith::AddIOp::create(
                        fb, loc, src, cIdx(fb, t * kWarpSize));
                    Value base = arith::MulIOp::create(fb, loc, keyRow,
                                                       cIdx(fb, cfg.keyStride));
                    // A removed key has dS == 0: its K row may hold NaN.
                    Value dsZero = arith::CmpFOp::create(
                        fb, loc, arith::CmpFPredicate::OEQ, dsk, zeroF);
                    SmallVector<Value> next;
                    for (int64_t c = 0; c < cK; ++c) {
                      Value kv = toF32(
                          fb,
                          gather1D(fb, kTile,
                                   arith::AddIOp::create(
                                       fb, loc, splat(fb, base), colsC[c])));
                      Value prod =
                          arith::MulFOp::create(fb, loc, splat(fb, dsk), kv);
                      prod = arith::SelectOp::create(fb, loc, dsZero,
                                                     zeroLanes(fb), prod);
                      next.push_back(
                          arith::AddFOp::create(fb, loc, a[c], prod));
                    }
                    scf::YieldOp::create(fb, loc, next);
                  });
              acc.assign(loop.getResults().begin(), loop.getResults().end());
            }
            for (int64_t c = 0; c < cK; ++c) {
              auto [col, colC] = columns(wb, c, dK);
              Value in =
                  arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, col,
                                        splat(wb, cIdx(wb, dK)));
              scatter1D(wb, dqAcc, accAt[c], in, acc[c]);
            }
          }
        });
        scf::YieldOp::create(lb, loc);
      });

  // dQ of the tile's rows below Nq, rounded to the element type.
  warps(bb, [&](OpBuilder &wb, Value w) {
    auto eltLanes = VectorType::get({kWarpSize}, elt);
    Value rowBase = arith::MulIOp::create(wb, loc, w, cIdx(wb, rpw));
    for (int64_t rr = 0; rr < rpw; ++rr) {
      Value row = arith::AddIOp::create(wb, loc, rowBase, cIdx(wb, rr));
      Value q = arith::AddIOp::create(wb, loc, at.q0, row);
      Value inRows =
          arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, q, nq);
      Value qC = arith::MinSIOp::create(
          wb, loc, q, arith::SubIOp::create(wb, loc, nq, cIdx(wb, 1)));
      for (int64_t c = 0; c < cK; ++c) {
        auto [col, colC] = columns(wb, c, dK);
        Value value = gather1D(
            wb, dqAcc,
            arith::AddIOp::create(
                wb, loc,
                splat(wb, arith::MulIOp::create(wb, loc, row, cIdx(wb, dK))),
                colC));
        if (eltLanes != f32Lanes)
          value = arith::TruncFOp::create(wb, loc, eltLanes, value);
        Value mask = arith::AndIOp::create(
            wb, loc, splat(wb, inRows),
            arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, col,
                                  splat(wb, cIdx(wb, dK))));
        vector::ScatterOp::create(
            wb, loc, Type(), args.dq,
            ValueRange{at.batch, at.head, qC, cIdx(wb, 0)}, colC, mask, value);
      }
    }
  });
}

void BackwardPromotedBuilder::build(func::FuncOp func) {
  Block &entry = func.getBody().front();
  Operation *ret = entry.getTerminator();
  SmallVector<Operation *> toErase;
  for (Operation &o : llvm::reverse(entry.without_terminator()))
    toErase.push_back(&o);
  OpBuilder b(ret);
  Type f32 = b.getF32Type();
  // Workgroup buffers, shared by the two kernels' blocks (fa-map-to-gpu
  // gives each kernel the ones it uses).
  qTile = workgroupBuffer(b, cfg.blockQ * cfg.headDim, elt);
  doTile = workgroupBuffer(b, cfg.blockQ * cfg.valueDim, elt);
  kTile = workgroupBuffer(b, cfg.blockKV * cfg.keyStride, elt);
  vTile = workgroupBuffer(b, cfg.blockKV * cfg.valueStride, elt);
  lseState = workgroupBuffer(b, cfg.blockQ, f32);
  deltaState = workgroupBuffer(b, cfg.blockQ, f32);
  dkAcc = workgroupBuffer(b, cfg.blockKV * cfg.headDim, f32);
  dvAcc = workgroupBuffer(b, cfg.blockKV * cfg.valueDim, f32);
  pBuf = workgroupBuffer(b, cfg.blockQ * cfg.blockKV, f32);
  dsBuf = workgroupBuffer(b, cfg.blockQ * cfg.blockKV, f32);
  dqAcc = workgroupBuffer(b, cfg.blockQ * cfg.headDim, f32);
  // The dQ kernel is the function's first (named like the function); the
  // dK/dV kernel is `<function>_dkdv`.
  buildQueryKernel(b);
  buildKeyKernel(b);
  for (Operation *o : toErase)
    o->erase();
  // The softcap's tanh on lane vectors: a rational approximation, as in
  // the forward kernel (NVVM has no tanh without libdevice).
  (void)lowering::approximateTanhsIn(func);
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FAPromoteSharedBackwardPass final
    : fa::impl::FAPromoteSharedBackwardPassBase<FAPromoteSharedBackwardPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void FAPromoteSharedBackwardPass::runOnOperation() {
  func::FuncOp func = getOperation();
  FailureOr<Operation *> found = findKernelOp(
      func, AttentionBackwardOp::getOperationName(), getArgument());
  if (failed(found))
    return signalPassFailure();
  if (!*found)
    return;
  auto op = cast<AttentionBackwardOp>(*found);
  FailureOr<BackwardKernelOperands> args = matchBackwardKernelForm(op);
  if (failed(args)) {
    (void)emitNotInKernelFormError(op, getArgument());
    return signalPassFailure();
  }
  if (failed(verifyKernelResultUses(op, getArgument())))
    return signalPassFailure();
  if (failed(verifyKernelQOffset(op, args->qOffset, getArgument())))
    return signalPassFailure();
  std::string error;
  FailureOr<BackwardGpuConfig> cfg =
      chooseBackwardConfig(op, blockQ, blockKV, numWarps, sharedBudget, error);
  if (failed(cfg)) {
    op.emitError() << "fa-promote-shared-backward: " << error;
    return signalPassFailure();
  }
  BackwardPromotedBuilder(op, *args, *cfg).build(func);
  setGpuConfig(func, cfg->blockQ, cfg->blockKV, cfg->numThreads(),
               {"backward"});
}
