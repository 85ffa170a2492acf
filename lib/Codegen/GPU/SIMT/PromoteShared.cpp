//===- PromoteShared.cpp - block/warp tiles in workgroup memory -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers a kernel function holding one fa.attention into the promoted,
// GPU-shaped tiled form: a block-level scf.forall, tiles and running state
// in workgroup memory, thread-level copy foralls and warp-level foralls that
// compute on vector<32xT> lane vectors. See the pass description.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "fa/Codegen/GPU/GpuKernelUtils.h"
#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>
#include <tuple>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAPROMOTESHAREDPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

//===----------------------------------------------------------------------===//
// Tile sizes
//===----------------------------------------------------------------------===//

FailureOr<KernelConfig> gpukernel::chooseConfig(AttentionOp op,
                                                int64_t blockQ,
                                                int64_t blockKV,
                                                int64_t numWarps,
                                                int64_t budget,
                                                bool doubleBuffer,
                                                std::string &error) {
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  KernelConfig c;
  // The innermost dim: [B, H, N, D], or [T, H, D] in the varlen form.
  c.headDim = qType.getDimSize(qType.getRank() - 1);
  c.valueDim = vType.getDimSize(vType.getRank() - 1);
  c.elementBytes = qType.getElementType().getIntOrFloatBitWidth() / 8;
  c.numWarps = numWarps;
  c.doubleBuffer = doubleBuffer;
  auto badDim = [](int64_t d) {
    return !isSupportedHeadDim(KernelFamily::Simt, d);
  };
  if (badDim(c.headDim) || badDim(c.valueDim)) {
    error = "head dims must be multiples of 8 up to 256 on the GPU path, got "
            "D = " +
            std::to_string(c.headDim) + " and Dv = " +
            std::to_string(c.valueDim);
    return failure();
  }
  if (numWarps <= 0 || numWarps > 32) {
    error = "warps must be in [1, 32], got " + std::to_string(numWarps);
    return failure();
  }
  // K rows are padded by one 4-byte word so that the 32 lanes, each reading
  // a different key at the same d, fall in different banks.
  c.keyStride = c.headDim + 4 / c.elementBytes;
  auto fits = [&](int64_t bq, int64_t bkv) {
    return c.sharedBytes(bq, bkv) <= budget;
  };
  SmallVector<int64_t> qCands, kvCands;
  if (blockQ > 0)
    qCands.push_back(blockQ);
  else
    qCands = {16, 8, 4};
  if (blockKV > 0)
    kvCands.push_back(blockKV);
  else
    kvCands = {64, 32, 16};
  for (int64_t bq : qCands) {
    if (bq <= 0 || bq % numWarps != 0)
      continue;
    for (int64_t bkv : kvCands) {
      if (bkv <= 0 || bkv % 8 != 0 || !fits(bq, bkv))
        continue;
      c.blockQ = bq;
      c.blockKV = bkv;
      return c;
    }
  }
  error = "no tile sizes fit: block-q must be a positive multiple of the " +
          std::to_string(numWarps) +
          " warps, block-kv a positive multiple of 8, and the tiles at most " +
          std::to_string(budget) + " bytes of workgroup memory (D = " +
          std::to_string(c.headDim) + ", Dv = " + std::to_string(c.valueDim) +
          ")";
  return failure();
}

void gpukernel::setGpuConfig(func::FuncOp func, int64_t blockQ, int64_t blockKV,
                             int64_t threads, ArrayRef<StringRef> flags) {
  MLIRContext *ctx = func.getContext();
  auto index = [&](int64_t v) {
    return IntegerAttr::get(IndexType::get(ctx), v);
  };
  SmallVector<NamedAttribute> entries = {
      NamedAttribute(StringAttr::get(ctx, "block_q"), index(blockQ)),
      NamedAttribute(StringAttr::get(ctx, "block_kv"), index(blockKV)),
      NamedAttribute(StringAttr::get(ctx, "threads"), index(threads))};
  for (StringRef flag : flags)
    entries.push_back(
        NamedAttribute(StringAttr::get(ctx, flag), UnitAttr::get(ctx)));
  func->setAttr(kConfigAttrName, DictionaryAttr::get(ctx, entries));
}

scf::ForallOp gpukernel::createBlockForall(OpBuilder &b, Location loc,
                                           ArrayRef<OpFoldResult> sizes) {
  MLIRContext *ctx = b.getContext();
  return scf::ForallOp::create(
      b, loc, sizes, ValueRange{},
      b.getArrayAttr({gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimX),
                      gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimY),
                      gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimZ)}));
}

std::pair<Value, Value> gpukernel::appendSplitWorkspace(func::FuncOp func,
                                                       Value o) {
  MLIRContext *ctx = func.getContext();
  Location loc = func.getLoc();
  auto oType = cast<MemRefType>(o.getType());
  SmallVector<int64_t> poShape = {ShapedType::kDynamic};
  llvm::append_range(poShape, oType.getShape());
  Type f32 = Float32Type::get(ctx);
  auto poType = MemRefType::get(poShape, f32);
  auto plType = MemRefType::get(ArrayRef<int64_t>(poShape).drop_back(), f32);
  unsigned n = func.getNumArguments();
  auto role = [&](StringRef name) {
    return DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, kWorkspaceAttrName),
                             StringAttr::get(ctx, name))});
  };
  (void)func.insertArgument(n, poType, role("partial_o"), loc);
  (void)func.insertArgument(n + 1, plType, role("partial_lse"), loc);
  return {func.getArgument(n), func.getArgument(n + 1)};
}

bool gpukernel::isPackGqaMode(StringRef mode) {
  return mode == "auto" || mode == "always" || mode == "never";
}

bool gpukernel::shouldPackGqa(AttentionOp op, StringRef mode,
                              int64_t blockQ) {
  int64_t group = op.getGroupSize();
  // The varlen form keeps one query head per block.
  if (group <= 1 || mode == "never" || op.isVarlen())
    return false;
  if (mode == "always")
    return true;
  int64_t nq = cast<RankedTensorType>(op.getQuery().getType()).getDimSize(2);
  if (ShapedType::isDynamic(nq) || blockQ <= 0)
    return false;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  return ceilDiv(group * nq, blockQ) < group * ceilDiv(nq, blockQ);
}

int64_t KernelConfig::sharedBytes(int64_t bq, int64_t bkv) const {
  int64_t kvSlots = doubleBuffer ? 2 : 1;
  return (bq * headDim + kvSlots * bkv * (keyStride + valueDim)) *
             elementBytes +
         bq * (2 + valueDim) * 4;
}

//===----------------------------------------------------------------------===//
// The promoted kernel
//===----------------------------------------------------------------------===//

namespace {

/// Builds the promoted body of one kernel function.
class PromotedBuilder {
public:
  PromotedBuilder(AttentionOp op, const KernelOperands &args,
                  const KernelConfig &cfg, bool packed, bool split)
      : op(op), args(args), cfg(cfg), ctx(op.getContext()),
        loc(op.getLoc()), packed(packed), split(split) {
    auto qType = cast<RankedTensorType>(op.getQuery().getType());
    elt = qType.getElementType();
    heads = qType.getDimSize(1);
    group = op.getGroupSize();
    sem = AttentionSemantics::get(op);
    // Scores live in the log2 domain: exp(x) = exp2(x * log2(e)).
    scaleLog2 = op.getEffectiveScale() * static_cast<float>(M_LOG2E);
    lanes = VectorType::get({kWarpSize}, IndexType::get(ctx));
    f32Lanes = VectorType::get({kWarpSize}, Float32Type::get(ctx));
    keySlots = (cfg.blockKV + kWarpSize - 1) / kWarpSize;
    colSlots = (cfg.valueDim + kWarpSize - 1) / kWarpSize;
  }

  /// Replaces the body of `func` by the promoted kernel.
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
    Type f32 = b.getF32Type();
    Type target = f32;
    if (auto vt = dyn_cast<VectorType>(v.getType()))
      target = VectorType::get(vt.getShape(), f32);
    if (v.getType() == target)
      return v;
    return arith::ExtFOp::create(b, loc, target, v);
  }
  Value allTrue(OpBuilder &b) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(VectorType::get({kWarpSize}, b.getI1Type()),
                                       true));
  }
  /// Lane-indexed load from a 1-d workgroup buffer at `indices` (in bounds).
  Value gather1D(OpBuilder &b, Value buffer, Value indices) {
    auto type = cast<MemRefType>(buffer.getType());
    auto resultType = VectorType::get({kWarpSize}, type.getElementType());
    Value pass = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(resultType));
    return vector::GatherOp::create(b, loc, resultType, buffer,
                                    ValueRange{cIdx(b, 0)}, indices,
                                    allTrue(b), pass);
  }
  /// Lane-indexed store into a 1-d buffer where `mask` holds.
  void scatter1D(OpBuilder &b, Value buffer, Value indices, Value mask,
                 Value values) {
    vector::ScatterOp::create(b, loc, /*result=*/Type(), buffer,
                              ValueRange{cIdx(b, 0)}, indices, mask, values);
  }
  /// A 1-d workgroup buffer.
  Value workgroupBuffer(OpBuilder &b, int64_t size, Type type) {
    auto memrefType = MemRefType::get(
        {size}, type, MemRefLayoutAttrInterface(),
        IntegerAttr::get(IntegerType::get(ctx, 64), kWorkgroupAddressSpace));
    auto alloca = memref::AllocaOp::create(b, loc, memrefType);
    alloca.setAlignment(16);
    return alloca;
  }
  /// `scf.forall (%t) in (n)` mapped onto threads or warps; `body` gets the
  /// builder and the induction variable.
  void forall(OpBuilder &b, int64_t n, Attribute mapping,
              function_ref<void(OpBuilder &, Value)> body) {
    auto op = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(n)}, ValueRange{},
        b.getArrayAttr({mapping}));
    OpBuilder nb = OpBuilder::atBlockBegin(op.getBody());
    body(nb, op.getInductionVars()[0]);
  }
  /// Strided loop `for (i = t; i < n; i += numThreads)` in a thread forall.
  void threadStrided(OpBuilder &b, Value t, int64_t n,
                     function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(b, loc, t, cIdx(b, n), cIdx(b, cfg.numThreads()),
                       ValueRange{},
                       [&](OpBuilder &lb, Location, Value i, ValueRange) {
                         body(lb, i);
                         scf::YieldOp::create(lb, loc);
                       });
  }

  /// How copyTile addresses a row of its source.
  enum class Rows {
    Dense,       ///< src[batch, head, row, :]
    PackedHeads, ///< packed row of kv head `head` (unpackGqaRow)
    PagedKeys,   ///< key `row` of a paged cache (pagedKeyRow)
    TokenMajor,  ///< src[batch + row, head, :]: `batch` is the sequence's
                 ///< first token (the varlen form)
  };
  /// Copies rows [row0, row0 + rows) of `src[b, head, :, :]` (`width`
  /// columns) into `dst` (row stride `stride`), zero-filling rows at or
  /// past `rowEnd`; `mode` says how a row is addressed.
  void copyTile(OpBuilder &b, Value t, Value src, Value batch, Value head,
                Value row0, Value rowEnd, int64_t rows, int64_t width,
                int64_t stride, Value dst, Value dstBase,
                Rows mode = Rows::Dense);
  /// Copies K/V tile `j` into the K/V buffers at slot offsets.
  void copyKVTile(OpBuilder &b, Value t, Value j, Value kBase, Value vBase);

  /// One KV tile's update of the rows of warp `w`.
  void buildRowUpdates(OpBuilder &b, Value w, Value k0, Value kBase,
                       Value vBase);
  /// Scores of key slot `t` for query row `qRow` of head `rowHead`
  /// (log2 domain, masked); `rowSlope` is that head's ALiBi slope.
  Value maskedScores(OpBuilder &b, Value s, Value qRow, Value rowHead,
                     Value rowSlope, Value k0, int64_t t);
  /// The query row and head of tile row `row` (an index): q0 + row of the
  /// block's head, or with packed heads the packed row r0 + row unpacked.
  AttentionSemantics::PackedRow rowOf(OpBuilder &b, Value row) {
    Value r = arith::AddIOp::create(b, loc, r0, row);
    if (!packed)
      return {r, head};
    return AttentionSemantics::unpackGqaRow(b, loc, r, kvHead, group);
  }
  /// The epilogue of warp `w`: O and LSE.
  void buildEpilogue(OpBuilder &b, Value w);

  AttentionOp op;
  KernelOperands args;
  KernelConfig cfg;
  MLIRContext *ctx;
  Location loc;
  /// Packed query heads (decode): a block runs packed rows of the G query
  /// heads of one kv head (grid: packed row tiles, Hkv, B).
  bool packed;
  /// Split-KV: a block runs one part of its key tiles and writes a partial
  /// (O, LSE) into the workspace; a merge kernel combines them.
  bool split;
  /// The workspace arguments (split-KV): partial O [S, B, Hq, Nq, Dv] and
  /// LSE [S, B, Hq, Nq], f32; the number of parts S (in the block) and the
  /// block's part.
  Value partialO, partialLse, numParts, splitIdx;
  Type elt;
  int64_t heads, group, keySlots, colSlots;
  AttentionSemantics sem;
  float scaleLog2;
  VectorType lanes, f32Lanes;

  // Per-block values. With packed heads `head` and `slope` are per row
  /// (null here); r0 is the block's first (packed) row, `rowEnd` the rows
  /// (Nq, or Nq x G packed), q0 the first query row.
  Value batch, head, kvHead, r0, rowEnd, q0, nq, nk, diagOffset, kvBegin,
      kvEnd, laneIds;
  /// The varlen form: the sequence's first query and key token (null
  /// otherwise); nq and nk are its lengths.
  Value qStart, kStart;
  /// The ALiBi slope of (batch, head) (f32; null without ALiBi).
  Value slope;
  /// The first key of K/V tile `j`: kvBegin + j * blockKV.
  Value tileStart(OpBuilder &b, Value j) {
    Value k0 = arith::MulIOp::create(b, loc, j, cIdx(b, cfg.blockKV));
    return kvBegin ? Value(arith::AddIOp::create(b, loc, kvBegin, k0)) : k0;
  }
  /// Whether the K/V tile from `k0` is visited (i1): the block mask does
  /// not mark it empty. Null without a block mask the kernel can use (its
  /// tiles whole multiples of the kernel's; every tile is then visited and
  /// masked, with the same result).
  Value tileVisited(OpBuilder &b, Value k0);
  Value qTile, kTile, vTile, mState, lState, accState;
  /// Whether the kernel reads the op's block mask (its tiles line up).
  bool useBlockMask = false;
};

} // namespace

Value PromotedBuilder::tileVisited(OpBuilder &b, Value k0) {
  if (!useBlockMask)
    return Value();
  Value entry =
      sem.loadBlockMaskEntry(b, loc, args.blockMask, batch, head, q0, k0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, entry,
                               arith::ConstantIntOp::create(b, loc, 0, 8));
}

void PromotedBuilder::copyTile(OpBuilder &b, Value t, Value src, Value bIdx,
                               Value hIdx, Value row0, Value rowEnd,
                               int64_t rows, int64_t width, int64_t stride,
                               Value dst, Value dstBase, Rows mode) {
  threadStrided(b, t, rows * width, [&](OpBuilder &lb, Value i) {
    Value w = cIdx(lb, width);
    Value r = arith::DivUIOp::create(lb, loc, i, w);
    Value c = arith::RemUIOp::create(lb, loc, i, w);
    Value row = arith::AddIOp::create(lb, loc, row0, r);
    Value inside = arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::slt,
                                         row, rowEnd);
    // Read a clamped row (rowEnd >= 1 wherever a copy runs) and select 0
    // past the end: no branch, every read in bounds.
    Type srcElt = cast<MemRefType>(src.getType()).getElementType();
    Value rowC = arith::MinSIOp::create(
        lb, loc, row, arith::SubIOp::create(lb, loc, rowEnd, cIdx(lb, 1)));
    SmallVector<Value> srcAt = {bIdx, hIdx, rowC, c};
    if (mode == Rows::PackedHeads) {
      AttentionSemantics::PackedRow p =
          AttentionSemantics::unpackGqaRow(lb, loc, rowC, hIdx, group);
      srcAt = {bIdx, p.head, p.query, c};
    } else if (mode == Rows::PagedKeys) {
      // [P, S, Hkv, D]: the key's page (from the block table) and row.
      AttentionSemantics::PagedRow p = AttentionSemantics::pagedKeyRow(
          lb, loc, args.blockTable, src, op.getPageSize(), bIdx, rowC);
      srcAt = {p.page, p.row, hIdx, c};
    } else if (mode == Rows::TokenMajor) {
      srcAt = {arith::AddIOp::create(lb, loc, bIdx, rowC), hIdx, c};
    }
    Value loaded = memref::LoadOp::create(lb, loc, src, srcAt);
    Value zero = arith::ConstantOp::create(lb, loc, lb.getZeroAttr(srcElt));
    Value value = arith::SelectOp::create(lb, loc, inside, loaded, zero);
    Value at = arith::AddIOp::create(
        lb, loc, arith::MulIOp::create(lb, loc, r, cIdx(lb, stride)), c);
    if (dstBase)
      at = arith::AddIOp::create(lb, loc, at, dstBase);
    memref::StoreOp::create(lb, loc, value, dst, ValueRange{at});
  });
}

void PromotedBuilder::copyKVTile(OpBuilder &b, Value t, Value j, Value kBase,
                                 Value vBase) {
  Value k0 = tileStart(b, j);
  Rows mode = args.blockTable ? Rows::PagedKeys
              : kStart       ? Rows::TokenMajor
                             : Rows::Dense;
  Value first = kStart ? kStart : batch;
  copyTile(b, t, args.k, first, kvHead, k0, kvEnd, cfg.blockKV, cfg.headDim,
           cfg.keyStride, kTile, kBase, mode);
  copyTile(b, t, args.v, first, kvHead, k0, kvEnd, cfg.blockKV, cfg.valueDim,
           cfg.valueDim, vTile, vBase, mode);
}

Value PromotedBuilder::maskedScores(OpBuilder &b, Value s, Value qRow,
                                    Value rowHead, Value rowSlope, Value k0,
                                    int64_t t) {
  Value keyLocal = arith::AddIOp::create(
      b, loc, laneIds, splat(b, cIdx(b, t * kWarpSize)));
  Value key = arith::AddIOp::create(b, loc, keyLocal, splat(b, k0));
  // Lanes past the tile hold no key; the rest follow the key range,
  // causality and the mask.
  Value valid = arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, keyLocal,
                            splat(b, cIdx(b, cfg.blockKV))),
      sem.keepKey(b, loc, qRow, key, kvEnd, diagOffset));
  Value x = arith::MulFOp::create(b, loc, s, splat(b, cF32(b, scaleLog2)));
  // The score modifiers (softcap, ALiBi) in the log2 domain.
  if (sem.hasSoftcap() || sem.hasAlibi())
    x = sem.modifyScore(b, loc, x, qRow, key, diagOffset, rowSlope, M_LOG2E);
  if (args.qSegments) {
    // Document masking: the row's id against each lane's key id (indices
    // clamped like the mask's).
    Value one = cIdx(b, 1);
    Value qRowC = arith::MinSIOp::create(
        b, loc, qRow, arith::SubIOp::create(b, loc, nq, one));
    Value keyC = arith::MinSIOp::create(
        b, loc, key, splat(b, arith::SubIOp::create(b, loc, nk, one)));
    Value qSeg = memref::LoadOp::create(b, loc, args.qSegments,
                                        ValueRange{batch, qRowC});
    auto segType = VectorType::get({kWarpSize}, b.getI32Type());
    Value pass = arith::ConstantOp::create(b, loc, b.getZeroAttr(segType));
    Value kSeg = vector::GatherOp::create(
        b, loc, segType, args.kSegments, ValueRange{batch, cIdx(b, 0)}, keyC,
        allTrue(b), pass);
    sem.applySegments(b, loc, qSeg, kSeg, valid);
  }
  if (args.mask) {
    // Clamp the indices so that every lane reads inside the mask; lanes
    // past the end are invalid anyway.
    auto mType = cast<MemRefType>(args.mask.getType());
    Value one = cIdx(b, 1);
    Value qRowC = arith::MinSIOp::create(
        b, loc, qRow, arith::SubIOp::create(b, loc, nq, one));
    Value keyC = arith::MinSIOp::create(
        b, loc, key, splat(b, arith::SubIOp::create(b, loc, nk, one)));
    Value mb = mType.getDimSize(0) == 1 ? cIdx(b, 0) : batch;
    Value mh = mType.getDimSize(1) == 1 ? cIdx(b, 0) : rowHead;
    auto resultType = VectorType::get({kWarpSize}, mType.getElementType());
    Value pass = arith::ConstantOp::create(b, loc, b.getZeroAttr(resultType));
    Value mv = vector::GatherOp::create(
        b, loc, resultType, args.mask, ValueRange{mb, mh, qRowC, cIdx(b, 0)},
        keyC, allTrue(b), pass);
    sem.applyMaskElement(b, loc, mv, x, valid, M_LOG2E);
  }
  // The general modifiers, last: score_mod (log2 domain) and mask_mod on
  // the lanes' keys.
  AttentionSemantics::ModIndices idx{batch, rowHead, qRow, key, nq, nk};
  x = sem.applyScoreMod(b, loc, x, idx, args.modOperands, M_LOG2E);
  sem.applyMaskMod(b, loc, idx, args.modOperands, valid);
  return AttentionSemantics::removeUnkept(b, loc, valid, x);
}

void PromotedBuilder::buildRowUpdates(OpBuilder &b, Value w, Value k0,
                                      Value kBase, Value vBase) {
  int64_t rpw = cfg.rowsPerWarp();
  Value rowBase = arith::MulIOp::create(b, loc, w, cIdx(b, rpw));
  // Key slot t of this lane: key row lane + 32 t of the tile, clamped.
  SmallVector<Value> keyRows;
  for (int64_t t = 0; t < keySlots; ++t) {
    Value r = arith::AddIOp::create(b, loc, laneIds,
                                    splat(b, cIdx(b, t * kWarpSize)));
    keyRows.push_back(arith::MinSIOp::create(
        b, loc, r, splat(b, cIdx(b, cfg.blockKV - 1))));
  }

  // S = Q K^T for the warp's rows: one lane-parallel dot product per (row,
  // key slot), accumulated over d.
  SmallVector<Value> inits(rpw * keySlots,
                           arith::ConstantOp::create(
                               b, loc, b.getZeroAttr(f32Lanes)));
  auto dot = scf::ForOp::create(
      b, loc, cIdx(b, 0), cIdx(b, cfg.headDim), cIdx(b, 1), inits,
      [&](OpBuilder &lb, Location, Value d, ValueRange acc) {
        SmallVector<Value> kv;
        for (int64_t t = 0; t < keySlots; ++t) {
          Value at = arith::AddIOp::create(
              lb, loc,
              arith::MulIOp::create(lb, loc, keyRows[t],
                                    splat(lb, cIdx(lb, cfg.keyStride))),
              splat(lb, arith::AddIOp::create(lb, loc, d, kBase)));
          kv.push_back(toF32(lb, gather1D(lb, kTile, at)));
        }
        SmallVector<Value> next;
        for (int64_t rr = 0; rr < rpw; ++rr) {
          Value row = arith::AddIOp::create(lb, loc, rowBase, cIdx(lb, rr));
          Value at = arith::AddIOp::create(
              lb, loc, arith::MulIOp::create(lb, loc, row, cIdx(lb, cfg.headDim)),
              d);
          Value qv = toF32(lb, memref::LoadOp::create(lb, loc, qTile,
                                                      ValueRange{at}));
          Value qs = splat(lb, qv);
          for (int64_t t = 0; t < keySlots; ++t)
            next.push_back(arith::AddFOp::create(
                lb, loc, acc[rr * keySlots + t],
                arith::MulFOp::create(lb, loc, qs, kv[t])));
        }
        scf::YieldOp::create(lb, loc, next);
      });

  Value laneZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         laneIds, splat(b, cIdx(b, 0)));
  Value zeroF = cF32(b, 0.0f);
  Value ninf = cF32(b, -std::numeric_limits<float>::infinity());
  for (int64_t rr = 0; rr < rpw; ++rr) {
    Value row = arith::AddIOp::create(b, loc, rowBase, cIdx(b, rr));
    AttentionSemantics::PackedRow at = rowOf(b, row);
    // With packed heads each row has its head's slope.
    Value rowSlope = packed ? AttentionSemantics::loadAlibiSlope(
                                  b, loc, args.alibi, batch, at.head)
                            : slope;
    SmallVector<Value> x;
    for (int64_t t = 0; t < keySlots; ++t)
      x.push_back(maskedScores(b, dot.getResult(rr * keySlots + t), at.query,
                               at.head, rowSlope, k0, t));

    // Row max over the tile: elementwise over key slots, then across lanes.
    Value lm = x[0];
    for (int64_t t = 1; t < keySlots; ++t)
      lm = arith::MaximumFOp::create(b, loc, lm, x[t]);
    Value tileMax = vector::ReductionOp::create(
        b, loc, vector::CombiningKind::MAXIMUMF, lm);
    Value mOld = memref::LoadOp::create(b, loc, mState, ValueRange{row});
    Value lOld = memref::LoadOp::create(b, loc, lState, ValueRange{row});
    Value mNew = arith::MaximumFOp::create(b, loc, mOld, tileMax);
    Value mUse = arith::SelectOp::create(
        b, loc,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, ninf),
        zeroF, mNew);
    Value alpha = math::Exp2Op::create(
        b, loc, arith::SubFOp::create(b, loc, mOld, mUse));
    SmallVector<Value> p;
    Value mUseV = splat(b, mUse);
    for (int64_t t = 0; t < keySlots; ++t)
      p.push_back(math::Exp2Op::create(
          b, loc, arith::SubFOp::create(b, loc, x[t], mUseV)));
    Value ps = p[0];
    for (int64_t t = 1; t < keySlots; ++t)
      ps = arith::AddFOp::create(b, loc, ps, p[t]);
    Value rowSum =
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, ps);
    Value lNew = arith::AddFOp::create(
        b, loc, arith::MulFOp::create(b, loc, lOld, alpha), rowSum);
    Value rowV = splat(b, row);
    scatter1D(b, mState, rowV, laneZero, splat(b, mNew));
    scatter1D(b, lState, rowV, laneZero, splat(b, lNew));

    // acc = alpha * acc + P V, lane c owning columns c + 32 i.
    SmallVector<Value> cols, colsC, accAt, acc;
    Value alphaV = splat(b, alpha);
    for (int64_t i = 0; i < colSlots; ++i) {
      Value c = arith::AddIOp::create(b, loc, laneIds,
                                      splat(b, cIdx(b, i * kWarpSize)));
      cols.push_back(c);
      colsC.push_back(arith::MinSIOp::create(
          b, loc, c, splat(b, cIdx(b, cfg.valueDim - 1))));
      Value at = arith::AddIOp::create(
          b, loc, splat(b, arith::MulIOp::create(b, loc, row,
                                                 cIdx(b, cfg.valueDim))),
          colsC.back());
      accAt.push_back(at);
      acc.push_back(arith::MulFOp::create(b, loc, gather1D(b, accState, at),
                                          alphaV));
    }
    for (int64_t t = 0; t < keySlots; ++t) {
      int64_t keysInSlot = std::min<int64_t>(kWarpSize,
                                             cfg.blockKV - t * kWarpSize);
      auto pv = scf::ForOp::create(
          b, loc, cIdx(b, 0), cIdx(b, keysInSlot), cIdx(b, 1), acc,
          [&](OpBuilder &lb, Location, Value src, ValueRange a) {
            // p of the key held by lane `src`, broadcast to the warp.
            Value pk = vector::ExtractOp::create(lb, loc, p[t],
                                                 ArrayRef<OpFoldResult>{src});
            Value keyRow = arith::AddIOp::create(lb, loc, src,
                                                 cIdx(lb, t * kWarpSize));
            Value base = arith::AddIOp::create(
                lb, loc,
                arith::MulIOp::create(lb, loc, keyRow, cIdx(lb, cfg.valueDim)),
                vBase);
            // A masked key has p == 0: do not let a NaN in its V row leak.
            Value pZero = arith::CmpFOp::create(
                lb, loc, arith::CmpFPredicate::OEQ, pk,
                arith::ConstantOp::create(lb, loc, lb.getF32FloatAttr(0)));
            SmallVector<Value> next;
            for (int64_t i = 0; i < colSlots; ++i) {
              Value at = arith::AddIOp::create(lb, loc, splat(lb, base),
                                               colsC[i]);
              Value vv = toF32(lb, gather1D(lb, vTile, at));
              Value prod = arith::MulFOp::create(lb, loc, splat(lb, pk), vv);
              prod = arith::SelectOp::create(
                  lb, loc, pZero,
                  arith::ConstantOp::create(lb, loc, lb.getZeroAttr(f32Lanes)),
                  prod);
              next.push_back(arith::AddFOp::create(lb, loc, a[i], prod));
            }
            scf::YieldOp::create(lb, loc, next);
          });
      acc = llvm::to_vector(llvm::map_range(
          pv.getResults(), [](OpResult r) -> Value { return r; }));
    }
    for (int64_t i = 0; i < colSlots; ++i) {
      Value inCols = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::slt, cols[i],
          splat(b, cIdx(b, cfg.valueDim)));
      scatter1D(b, accState, accAt[i], inCols, acc[i]);
    }
  }
}

void PromotedBuilder::buildEpilogue(OpBuilder &b, Value w) {
  int64_t rpw = cfg.rowsPerWarp();
  Value rowBase = arith::MulIOp::create(b, loc, w, cIdx(b, rpw));
  Value zeroF = cF32(b, 0.0f);
  Value one = cIdx(b, 1);
  Value laneZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         laneIds, splat(b, cIdx(b, 0)));
  auto eltLanes = VectorType::get({kWarpSize}, elt);
  for (int64_t rr = 0; rr < rpw; ++rr) {
    Value row = arith::AddIOp::create(b, loc, rowBase, cIdx(b, rr));
    Value r = arith::AddIOp::create(b, loc, r0, row);
    Value inRows =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, rowEnd);
    // Rows past the end store nothing; their indices are clamped.
    AttentionSemantics::PackedRow pos = rowOf(
        b, arith::SubIOp::create(
               b, loc,
               arith::MinSIOp::create(
                   b, loc, r, arith::SubIOp::create(b, loc, rowEnd, one)),
               r0));
    Value qRowC = pos.query;
    Value m = memref::LoadOp::create(b, loc, mState, ValueRange{row});
    Value l = memref::LoadOp::create(b, loc, lState, ValueRange{row});
    Value empty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, zeroF);
    for (int64_t i = 0; i < colSlots; ++i) {
      Value c = arith::AddIOp::create(b, loc, laneIds,
                                      splat(b, cIdx(b, i * kWarpSize)));
      Value cC = arith::MinSIOp::create(b, loc, c,
                                        splat(b, cIdx(b, cfg.valueDim - 1)));
      Value at = arith::AddIOp::create(
          b, loc, splat(b, arith::MulIOp::create(b, loc, row,
                                                 cIdx(b, cfg.valueDim))),
          cC);
      Value acc = gather1D(b, accState, at);
      Value o = arith::SelectOp::create(
          b, loc, splat(b, empty),
          arith::ConstantOp::create(b, loc, b.getZeroAttr(f32Lanes)),
          arith::DivFOp::create(b, loc, acc, splat(b, l)));
      // A partial stays in f32 until the merge.
      if (eltLanes != f32Lanes && !split)
        o = arith::TruncFOp::create(b, loc, eltLanes, o);
      Value mask = arith::AndIOp::create(
          b, loc, splat(b, inRows),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, c,
                                splat(b, cIdx(b, cfg.valueDim))));
      SmallVector<Value> oAt = {batch, pos.head, qRowC, cIdx(b, 0)};
      if (qStart)
        oAt = {arith::AddIOp::create(b, loc, qStart, qRowC), pos.head,
               cIdx(b, 0)};
      Value dest = args.o;
      if (split) {
        oAt.insert(oAt.begin(), splitIdx);
        dest = partialO;
      }
      vector::ScatterOp::create(b, loc, Type(), dest, oAt, cC, mask, o);
    }
    if (args.lse || split) {
      // LSE = ln(2) * (m + log2(l)), natural log; -inf for an empty row.
      Value lse = arith::MulFOp::create(
          b, loc,
          arith::AddFOp::create(b, loc, m, math::Log2Op::create(b, loc, l)),
          cF32(b, static_cast<float>(M_LN2)));
      lse = arith::SelectOp::create(
          b, loc, empty, cF32(b, -std::numeric_limits<float>::infinity()),
          lse);
      Value mask = arith::AndIOp::create(b, loc, laneZero, splat(b, inRows));
      // [B, Hq, Nq], or [Hq, Tq] in the varlen form.
      SmallVector<Value> lAt = {batch, pos.head, cIdx(b, 0)};
      Value lRow = qRowC;
      if (qStart) {
        lAt = {pos.head, cIdx(b, 0)};
        lRow = arith::AddIOp::create(b, loc, qStart, qRowC);
      }
      Value dest = args.lse;
      if (split) {
        // Every part's LSE, -inf where it holds no key of the row.
        lAt.insert(lAt.begin(), splitIdx);
        dest = partialLse;
      }
      vector::ScatterOp::create(b, loc, Type(), dest, lAt, splat(b, lRow),
                                mask, splat(b, lse));
    }
  }
}

void PromotedBuilder::build(func::FuncOp func) {
  // Split-KV: the workspace of partial results, two arguments appended to
  // the function (its first dim, the number of parts S, is chosen by the
  // caller at run time).
  if (split)
    std::tie(partialO, partialLse) = appendSplitWorkspace(func, args.o);
  // Drop the tensor-level body; the kernel only needs the memref arguments.
  Block &entry = func.getBody().front();
  Operation *ret = entry.getTerminator();
  SmallVector<Operation *> toErase;
  for (Operation &o : llvm::reverse(entry.without_terminator()))
    toErase.push_back(&o);
  OpBuilder b(ret);

  // Grid: (query tiles, Hq, B). Every value the block body uses is computed
  // inside it, so that fa-map-to-gpu can move the body into a kernel.
  // Workgroup memory: the tiles and the running state, one set per block.
  // They are allocated outside the block loop: fa-map-to-gpu turns them
  // into workgroup globals, and run sequentially on the CPU every block
  // reuses them.
  qTile = workgroupBuffer(b, cfg.blockQ * cfg.headDim, elt);
  int64_t kvSlots = cfg.doubleBuffer ? 2 : 1;
  kTile = workgroupBuffer(b, kvSlots * cfg.blockKV * cfg.keyStride, elt);
  vTile = workgroupBuffer(b, kvSlots * cfg.blockKV * cfg.valueDim, elt);
  mState = workgroupBuffer(b, cfg.blockQ, b.getF32Type());
  lState = workgroupBuffer(b, cfg.blockQ, b.getF32Type());
  accState = workgroupBuffer(b, cfg.blockQ * cfg.valueDim, b.getF32Type());

  // The varlen form: B = the offsets' length - 1, and the query tiles of
  // every sequence fit in those of all Tq tokens (blocks past their
  // sequence's end exit at once).
  bool varlen = static_cast<bool>(args.cuSeqlensQ);
  Value gB =
      varlen ? Value(arith::MaxSIOp::create(
                   b, loc,
                   arith::SubIOp::create(
                       b, loc, memref::DimOp::create(b, loc, args.cuSeqlensQ, 0),
                       cIdx(b, 1)),
                   cIdx(b, 0)))
             : Value(memref::DimOp::create(b, loc, args.q, 0));
  Value gNq = memref::DimOp::create(b, loc, args.q, varlen ? 0 : 2);
  // With packed heads the grid is (tiles of the Nq x G packed rows, Hkv,
  // B).
  Value gRows = packed ? Value(arith::MulIOp::create(b, loc, gNq,
                                                     cIdx(b, group)))
                       : gNq;
  Value gTiles = arith::CeilDivUIOp::create(b, loc, gRows, cIdx(b, cfg.blockQ));
  // Split-KV: x runs over (query tile, part), the part fastest.
  if (split)
    gTiles = arith::MulIOp::create(
        b, loc, gTiles, memref::DimOp::create(b, loc, partialLse, 0));
  int64_t gridHeads = packed ? heads / group : heads;
  auto blocks = createBlockForall(
      b, loc, {gTiles, b.getIndexAttr(gridHeads), gB});
  {
    OpBuilder bb = OpBuilder::atBlockBegin(blocks.getBody());
    SmallVector<Value> ivs = blocks.getInductionVars();
    Value qTileIdx = ivs[0];
    if (split) {
      numParts = memref::DimOp::create(bb, loc, partialLse, 0);
      splitIdx = arith::RemUIOp::create(bb, loc, qTileIdx, numParts);
      qTileIdx = arith::DivUIOp::create(bb, loc, qTileIdx, numParts);
    }
    batch = ivs[2];
    if (packed) {
      kvHead = ivs[1];
      head = Value();
    } else {
      head = ivs[1];
      kvHead = group == 1 ? head
                          : Value(arith::DivUIOp::create(bb, loc, head,
                                                         cIdx(bb, group)));
    }
    r0 = arith::MulIOp::create(bb, loc, qTileIdx, cIdx(bb, cfg.blockQ));
    if (varlen) {
      // The block's sequence: its rows and keys are Nq and Nk of every
      // rule; a tile past its rows does nothing (a block-uniform branch).
      AttentionSemantics::SequencePair seq =
          AttentionSemantics::loadSequences(bb, loc, args.cuSeqlensQ,
                                            args.cuSeqlensK, batch, args.q,
                                            args.k);
      qStart = seq.queries.start;
      nq = seq.queries.length;
      kStart = seq.keys.start;
      nk = seq.keys.length;
      Value inSequence = arith::CmpIOp::create(
          bb, loc, arith::CmpIPredicate::ult, r0, nq);
      auto ifOp = scf::IfOp::create(bb, loc, inSequence,
                                    /*withElseRegion=*/false);
      bb.setInsertionPointToStart(ifOp.thenBlock());
    } else {
      nq = memref::DimOp::create(bb, loc, args.q, 2);
      // A paged cache stands for Nk = M x S keys.
      nk = args.blockTable
               ? AttentionSemantics::pagedKeyCount(bb, loc, args.blockTable,
                                                   op.getPageSize())
               : Value(memref::DimOp::create(bb, loc, args.k, 2));
    }
    rowEnd = packed ? Value(arith::MulIOp::create(bb, loc, nq,
                                                  cIdx(bb, group)))
                    : nq;
    Value rows = arith::MinSIOp::create(
        bb, loc, cIdx(bb, cfg.blockQ),
        arith::SubIOp::create(bb, loc, rowEnd, r0));
    // The query rows the block's rows hold: the key range below is theirs.
    Value qRows = rows;
    q0 = r0;
    if (packed) {
      AttentionSemantics::QueryRange range =
          AttentionSemantics::packedQueryRange(bb, loc, r0, rows, group);
      q0 = range.q0;
      qRows = range.count;
    }
    // A constant q_offset is cloned into the block body (the function's
    // body is erased).
    Value qOffset = args.qOffset;
    if (qOffset && !isa<BlockArgument>(qOffset))
      qOffset = bb.clone(*qOffset.getDefiningOp())->getResult(0);
    // Keys past kv_end are never visited (key lengths, causality, the
    // window's right bound, the chunk's end), nor the tiles before the one
    // holding the window's left bound or the chunk's start.
    Value len;
    if (args.kvLens)
      len = memref::LoadOp::create(bb, loc, args.kvLens, ValueRange{batch});
    Value keyEnd = sem.keyLengthEnd(bb, loc, len, nk);
    // A paged cache aligns causality per sequence (its len_b keys); with
    // no pages at all no key can be read.
    if (args.blockTable)
      keyEnd = AttentionSemantics::pagedKeyEnd(bb, loc, args.k, keyEnd);
    diagOffset = sem.diagonalOffset(bb, loc, nq,
                                    args.blockTable ? keyEnd : nk, qOffset);
    kvEnd = sem.visitedKeyEnd(bb, loc, keyEnd, q0, qRows, diagOffset);
    kvBegin = sem.visitedTileBegin(bb, loc, q0, diagOffset, cfg.blockKV);
    Value span = AttentionSemantics::visitedKeyCount(bb, loc, kvBegin, kvEnd);
    slope = packed ? Value()
                   : AttentionSemantics::loadAlibiSlope(bb, loc, args.alibi,
                                                        batch, head);
    // The block mask, when each kernel tile lies inside one of its tiles
    // (the first visited key tile stays on the kernel's tile grid); not
    // with packed heads, whose rows are of several heads (every tile is
    // then visited and masked).
    useBlockMask = args.blockMask && !packed &&
                   sem.canUseBlockMask(cfg.blockQ, cfg.blockKV);

    auto threadMap = gpu::GPUThreadMappingAttr::get(ctx, gpu::MappingId::DimX);
    auto warpMap = gpu::GPUWarpMappingAttr::get(ctx, gpu::MappingId::DimX);

    // Copy the Q tile; m = -inf, l = 0, acc = 0.
    forall(bb, cfg.numThreads(), threadMap, [&](OpBuilder &tb, Value t) {
      copyTile(tb, t, args.q, varlen ? qStart : batch,
               packed ? kvHead : head, r0, rowEnd, cfg.blockQ, cfg.headDim,
               cfg.headDim, qTile, Value(),
               packed   ? Rows::PackedHeads
               : varlen ? Rows::TokenMajor
                        : Rows::Dense);
      threadStrided(tb, t, cfg.blockQ, [&](OpBuilder &lb, Value i) {
        memref::StoreOp::create(
            lb, loc, cF32(lb, -std::numeric_limits<float>::infinity()),
            mState, ValueRange{i});
        memref::StoreOp::create(lb, loc, cF32(lb, 0.0f), lState,
                                ValueRange{i});
      });
      threadStrided(tb, t, cfg.blockQ * cfg.valueDim,
                    [&](OpBuilder &lb, Value i) {
                      memref::StoreOp::create(lb, loc, cF32(lb, 0.0f),
                                              accState, ValueRange{i});
                    });
    });

    Value numKV = arith::CeilDivUIOp::create(bb, loc, span,
                                             cIdx(bb, cfg.blockKV));
    // The block's key tiles [jBegin, jEnd): all of them, or with split-KV
    // its part of ceil(tiles / S) tiles (parts past the last tile are
    // empty: LSE -inf, which the merge ignores).
    Value jBegin = cIdx(bb, 0), jEnd = numKV;
    if (split) {
      AttentionSemantics::TileRange range = AttentionSemantics::splitTileRange(
          bb, loc, numKV, splitIdx, numParts);
      jBegin = range.begin;
      jEnd = range.end;
    }
    int64_t kSlot = cfg.blockKV * cfg.keyStride;
    int64_t vSlot = cfg.blockKV * cfg.valueDim;
    // Offsets of K/V slot `j % 2` (double buffering) or 0.
    auto slotBase = [&](OpBuilder &sb, Value j, int64_t slotElems) -> Value {
      if (!cfg.doubleBuffer)
        return cIdx(sb, 0);
      Value slot = arith::RemUIOp::create(sb, loc, j, cIdx(sb, 2));
      return arith::MulIOp::create(sb, loc, slot, cIdx(sb, slotElems));
    };
    if (cfg.doubleBuffer) {
      // Prologue: the first tile (0, or the part's first) into its slot.
      Value any = split ? Value(arith::CmpIOp::create(
                              bb, loc, arith::CmpIPredicate::ult, jBegin, jEnd))
                        : Value(arith::CmpIOp::create(
                              bb, loc, arith::CmpIPredicate::sgt, numKV,
                              cIdx(bb, 0)));
      scf::IfOp::create(bb, loc, any, [&](OpBuilder &ib, Location) {
        forall(ib, cfg.numThreads(), threadMap, [&](OpBuilder &tb, Value t) {
          if (split)
            copyKVTile(tb, t, jBegin, slotBase(tb, jBegin, kSlot),
                       slotBase(tb, jBegin, vSlot));
          else
            copyKVTile(tb, t, cIdx(tb, 0), cIdx(tb, 0), cIdx(tb, 0));
        });
        scf::YieldOp::create(ib, loc);
      });
    }
    scf::ForOp::create(
        bb, loc, jBegin, jEnd, cIdx(bb, 1), ValueRange{},
        [&](OpBuilder &lb, Location, Value j, ValueRange) {
          Value k0 = tileStart(lb, j);
          // Tiles the block mask marks empty are neither copied nor
          // computed (the condition is block-uniform).
          Value visited = tileVisited(lb, k0);
          auto ifVisited = [&](OpBuilder &ob, Value cond,
                               function_ref<void(OpBuilder &)> body) {
            if (!cond) {
              body(ob);
              return;
            }
            scf::IfOp::create(ob, loc, cond, [&](OpBuilder &ib, Location) {
              body(ib);
              scf::YieldOp::create(ib, loc);
            });
          };
          if (cfg.doubleBuffer) {
            // Copy tile j + 1 into the other slot in the same barrier
            // interval as the compute of tile j: the two touch different
            // slots, so no barrier separates them.
            Value next = arith::AddIOp::create(lb, loc, j, cIdx(lb, 1));
            Value more = arith::CmpIOp::create(
                lb, loc, arith::CmpIPredicate::slt, next, jEnd);
            if (Value nextVisited = tileVisited(lb, tileStart(lb, next)))
              more = arith::AndIOp::create(lb, loc, more, nextVisited);
            scf::IfOp::create(lb, loc, more, [&](OpBuilder &ib, Location) {
              forall(ib, cfg.numThreads(), threadMap,
                     [&](OpBuilder &tb, Value t) {
                       copyKVTile(tb, t, next, slotBase(tb, next, kSlot),
                                  slotBase(tb, next, vSlot));
                     });
              ib.getInsertionBlock()->back().setAttr(kNoBarrierAttrName,
                                                    ib.getUnitAttr());
              scf::YieldOp::create(ib, loc);
            });
          }
          ifVisited(lb, visited, [&](OpBuilder &vb) {
            if (!cfg.doubleBuffer)
              forall(vb, cfg.numThreads(), threadMap,
                     [&](OpBuilder &tb, Value t) {
                       copyKVTile(tb, t, j, cIdx(tb, 0), cIdx(tb, 0));
                     });
            forall(vb, cfg.numWarps, warpMap, [&](OpBuilder &wb, Value w) {
              laneIds = vector::StepOp::create(wb, loc, lanes);
              buildRowUpdates(wb, w, k0, slotBase(wb, j, kSlot),
                              slotBase(wb, j, vSlot));
            });
          });
          scf::YieldOp::create(lb, loc);
        });

    forall(bb, cfg.numWarps, warpMap, [&](OpBuilder &wb, Value w) {
      laneIds = vector::StepOp::create(wb, loc, lanes);
      buildEpilogue(wb, w);
    });
  }
  if (split) {
    // The second kernel: fa.merge's (one warp per row) over the partials,
    // into O and LSE.
    scf::ForallOp merge = buildMergeForall(
        b, loc, MergeKernelOperands{partialO, partialLse, args.o, args.lse},
        cfg.numWarps);
    merge->setAttr(kForallThreadsAttrName,
                   b.getIndexAttr(cfg.numThreads()));
    merge->setAttr(kForallKernelSuffixAttrName, b.getStringAttr("_merge"));
  }
  for (Operation *o : toErase)
    o->erase();
  // The softcap's tanh on lane vectors: a rational approximation (a few
  // ulp), as on the CPU; NVVM has no tanh without libdevice.
  (void)lowering::approximateTanhsIn(func);
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FAPromoteSharedPass final
    : fa::impl::FAPromoteSharedPassBase<FAPromoteSharedPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void FAPromoteSharedPass::runOnOperation() {
  func::FuncOp func = getOperation();
  FailureOr<Operation *> found =
      findKernelOp(func, AttentionOp::getOperationName(), getArgument());
  if (failed(found))
    return signalPassFailure();
  if (!*found)
    return;
  auto op = cast<AttentionOp>(*found);
  std::string reason;
  if ((op.isPaged() || op.isVarlen()) && !isEligible(KernelFamily::Simt, op, &reason)) {
    op.emitError() << "fa-promote-shared: " << reason;
    return signalPassFailure();
  }
  FailureOr<KernelOperands> args = matchKernelForm(op);
  if (failed(args)) {
    (void)emitNotInKernelFormError(op, getArgument());
    return signalPassFailure();
  }
  if (failed(verifyKernelResultUses(op, getArgument())))
    return signalPassFailure();
  if (std::optional<std::string> why = getOutlinedRegionProblem(op)) {
    op.emitError() << "fa-promote-shared: " << *why;
    return signalPassFailure();
  }
  // The block body becomes the kernel: the regions' operands must reach it
  // as function arguments.
  for (Value m : args->modOperands) {
    auto arg = dyn_cast<BlockArgument>(m);
    if (!arg || arg.getOwner() != &func.getBody().front()) {
      op.emitError() << "fa-promote-shared: the mod_operands must be read "
                        "from function arguments in the kernel form";
      return signalPassFailure();
    }
  }
  // The block body becomes the kernel: a q_offset must reach it.
  if (failed(verifyKernelQOffset(op, args->qOffset, getArgument())))
    return signalPassFailure();
  std::string error;
  FailureOr<KernelConfig> cfg = chooseConfig(
      op, blockQ, blockKV, numWarps, sharedBudget, doubleBuffer, error);
  if (failed(cfg)) {
    op.emitError() << "fa-promote-shared: " << error;
    return signalPassFailure();
  }
  if (!isPackGqaMode(packGqa)) {
    op.emitError() << "fa-promote-shared: pack-gqa must be auto, always or "
                      "never, got '"
                   << packGqa << "'";
    return signalPassFailure();
  }
  bool packed = shouldPackGqa(op, packGqa, cfg->blockQ);
  if (splitKv && op.isVarlen()) {
    op.emitError() << "fa-promote-shared: split-kv does not apply to "
                      "variable-length batches (cu_seqlens) yet";
    return signalPassFailure();
  }
  PromotedBuilder(op, *args, *cfg, packed, splitKv).build(func);
  // Packed query heads change the grid: (packed row tiles, Hkv, B).
  // Split-KV: two kernels (the function's and <function>_merge) and the
  // workspace arguments.
  SmallVector<StringRef> flags;
  if (packed)
    flags.push_back("pack_gqa");
  if (splitKv)
    flags.push_back("split_kv");
  setGpuConfig(func, cfg->blockQ, cfg->blockKV, cfg->numThreads(), flags);
}
