//===- CpuAttentionBackward.cpp - vectorized attention backward -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers fa.attention_backward in kernel form to memref-level loops on
// explicit SIMD vectors. Per (batch, kv head) task, per query head of the
// group and query tile, Q and dO are packed transposed (one query per vector
// lane) and the key tiles the forward visited are walked: S^T and
// (dP - Delta)^T by broadcast micro-kernels, P and dS per lane, then dV, dK
// and dQ by outer-product micro-kernels. See the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "fa/Codegen/CPU/RegisterBlocks.h"
#include "fa/Codegen/Common/KernelForm.h"
#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/bit.h"

#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FACPUATTENTIONBACKWARDPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Sizes of one backward kernel.
struct BackwardConfig {
  /// f32 lanes per vector.
  int64_t vw = 16;
  /// Query rows per tile (a multiple of vw) and keys per tile.
  int64_t blockQ = 64, blockKV = 64;
  /// Register blocks: rows of the broadcast micro-kernels (keys of S^T and
  /// dP^T; rows of dK, dV and dQ) and query vectors per row of S^T and
  /// dP^T (the rows of dK, dV and dQ take cpu::balancedVectorBlock).
  int64_t rows = 4, vectors = 4;
  bool parallel = false;
};

class BackwardKernelBuilder {
public:
  BackwardKernelBuilder(AttentionBackwardOp op,
                        const BackwardKernelOperands &args,
                        const BackwardConfig &cfg)
      : op(op), args(args), cfg(cfg), loc(op.getLoc()) {}

  void build(OpBuilder &b);

private:
  Value cIdx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value cF32(OpBuilder &b, double v) {
    return arith::ConstantOp::create(b, loc,
                                     b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value splat(OpBuilder &b, double v) {
    return arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(vecType,
                               b.getF32FloatAttr(static_cast<float>(v))));
  }
  Value add(OpBuilder &b, Value x, Value y) {
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value mul(OpBuilder &b, Value x, Value y) {
    return arith::MulIOp::create(b, loc, x, y);
  }
  Value sub(OpBuilder &b, Value x, Value y) {
    return arith::SubIOp::create(b, loc, x, y);
  }
  Value minI(OpBuilder &b, Value x, Value y) {
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value toF32(OpBuilder &b, Value v) {
    Type f32 = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(v.getType())) {
      if (vt.getElementType().isF32())
        return v;
      return arith::ExtFOp::create(b, loc, VectorType::get(vt.getShape(), f32),
                                   v);
    }
    return lowering::toF32(b, loc, v);
  }
  /// A vector of vw elements of `mem` at `idx`, as f32.
  Value vload(OpBuilder &b, Value mem, ValueRange idx) {
    Type elt = cast<MemRefType>(mem.getType()).getElementType();
    Value v = vector::LoadOp::create(b, loc, VectorType::get({cfg.vw}, elt),
                                     mem, idx);
    return toF32(b, v);
  }
  void vstore(OpBuilder &b, Value v, Value mem, ValueRange idx) {
    vector::StoreOp::create(b, loc, v, mem, idx);
  }
  /// A scalar of `mem` at `idx`, as f32.
  Value sload(OpBuilder &b, Value mem, ValueRange idx) {
    return toF32(b, memref::LoadOp::create(b, loc, mem, idx));
  }
  Value bcast(OpBuilder &b, Value scalar) {
    return vector::BroadcastOp::create(b, loc, vecType, scalar);
  }
  Value scratch(OpBuilder &b, ArrayRef<int64_t> shape) {
    return memref::AllocaOp::create(b, loc,
                                    MemRefType::get(shape, b.getF32Type()),
                                    ValueRange{}, b.getI64IntegerAttr(64));
  }
  void loop(OpBuilder &b, Value lb, Value ub,
            function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(b, loc, lb, ub, cIdx(b, 1), ValueRange{},
                       [&](OpBuilder &nb, Location, Value i, ValueRange) {
                         body(nb, i);
                         scf::YieldOp::create(nb, loc);
                       });
  }
  /// Vectors per register block across a head dim of `cols` columns (a
  /// multiple of vw): the shared rule, so D = 96 runs one block of 6.
  int64_t headDimBlock(int64_t cols) const {
    return cpu::balancedVectorBlock(cols / cfg.vw, cfg.rows, cfg.vw);
  }
  /// Rows [0, n) in blocks of `block` rows, then the rest in at most one
  /// block of each power of two below `block`, largest first (a 64-row
  /// tile in blocks of 6: ten blocks of 6 and one of 4, rather than four
  /// single rows, each a latency-bound chain of few accumulators):
  /// body(b, first row, rows in the block).
  void forBlocks(OpBuilder &b, Value n, int64_t block,
                 function_ref<void(OpBuilder &, Value, int64_t)> body) {
    Value full = mul(b, arith::DivUIOp::create(b, loc, n, cIdx(b, block)),
                     cIdx(b, block));
    scf::ForOp::create(b, loc, cIdx(b, 0), full, cIdx(b, block), ValueRange{},
                       [&](OpBuilder &nb, Location, Value r, ValueRange) {
                         body(nb, r, block);
                         scf::YieldOp::create(nb, loc);
                       });
    Value r = full;
    int64_t largest =
        block > 1 ? llvm::bit_floor(static_cast<uint64_t>(block - 1)) : 0;
    for (int64_t size = largest; size >= 1; size /= 2) {
      Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                         sub(b, n, r), cIdx(b, size));
      auto ifOp = scf::IfOp::create(
          b, loc, fits,
          [&](OpBuilder &tb, Location) {
            body(tb, r, size);
            scf::YieldOp::create(tb, loc, add(tb, r, cIdx(tb, size)));
          },
          [&](OpBuilder &eb, Location) { scf::YieldOp::create(eb, loc, r); });
      r = ifOp.getResult(0);
    }
  }

  /// The broadcast micro-kernel: for rows i < `count` and vectors v <
  /// `nvec`, acc[i][v] = init(i, v) + sum over t < `steps` of
  /// bcast(a(t, i)) * bvec(t, v); then store(i, v, acc[i][v]).
  void contract(OpBuilder &b, int64_t count, int64_t nvec, Value steps,
                function_ref<Value(OpBuilder &, int64_t, int64_t)> init,
                function_ref<Value(OpBuilder &, Value, int64_t)> a,
                function_ref<Value(OpBuilder &, Value, int64_t)> bvec,
                function_ref<void(OpBuilder &, int64_t, int64_t, Value)> store);

  /// Zeroes an f32 memref [n, cols] (cols a multiple of vw).
  void zeroRows(OpBuilder &b, Value mem, Value n, int64_t cols);

  void buildTask(OpBuilder &b, Value batch, Value kvHead);
  void buildQueryTile(OpBuilder &b, Value batch, Value head, Value q0,
                      Value rows, Value dkAcc, Value dvAcc);
  void buildKeyTile(OpBuilder &b, Value batch, Value head, Value kvHead,
                    Value q0, Value rows, Value k0, Value kCols, Value dkAcc,
                    Value dvAcc);

  AttentionBackwardOp op;
  BackwardKernelOperands args;
  BackwardConfig cfg;
  Location loc;
  AttentionSemantics sem;
  VectorType vecType;
  Type elt;
  int64_t headDim = 0, valueDim = 0, group = 1, qVecs = 0;
  float scale = 1.0f;
  bool inPlace = false;
  Value nq, nk, diagOffset, keyEnd, slope;
  /// Scratch: Q^T [D][BQ], dO^T [Dv][BQ], S^T / P^T [BK][BQ], (dP -
  /// Delta)^T / dS^T [BK][BQ], the softcap derivative [BK][BQ], LSE and
  /// Delta of the tile's rows [BQ], dQ of the tile [BQ][D].
  Value qT, doT, sT, dsT, derT, lseT, deltaT, dqAcc;
  /// The mask's (query tile, key tile) transposed [BK][BQ] in its element
  /// type, and the query tile's segment ids [BQ] (i32); null without them.
  Value maskT, qSegT;
  /// K of the key tile with non-finite values set to 0 [BK][D] (only where
  /// keys inside the range can be removed).
  Value kTile;
};

} // namespace

void BackwardKernelBuilder::contract(
    OpBuilder &b, int64_t count, int64_t nvec, Value steps,
    function_ref<Value(OpBuilder &, int64_t, int64_t)> init,
    function_ref<Value(OpBuilder &, Value, int64_t)> a,
    function_ref<Value(OpBuilder &, Value, int64_t)> bvec,
    function_ref<void(OpBuilder &, int64_t, int64_t, Value)> store) {
  SmallVector<Value> acc;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t v = 0; v < nvec; ++v)
      acc.push_back(init(b, i, v));
  auto loopOp = scf::ForOp::create(
      b, loc, cIdx(b, 0), steps, cIdx(b, 1), acc,
      [&](OpBuilder &nb, Location, Value t, ValueRange iter) {
        // The row broadcasts first, then one B vector at a time: count x
        // nvec accumulators + count broadcasts + 1 live vectors (16 with
        // AVX2's 3 x 4, 21 with AVX-512's 4 x 4: no spills).
        SmallVector<Value> ai;
        for (int64_t i = 0; i < count; ++i)
          ai.push_back(bcast(nb, a(nb, t, i)));
        SmallVector<Value> next(iter.begin(), iter.end());
        for (int64_t v = 0; v < nvec; ++v) {
          Value bv = bvec(nb, t, v);
          for (int64_t i = 0; i < count; ++i)
            next[i * nvec + v] =
                vector::FMAOp::create(nb, loc, ai[i], bv, iter[i * nvec + v]);
        }
        scf::YieldOp::create(nb, loc, next);
      });
  for (int64_t i = 0; i < count; ++i)
    for (int64_t v = 0; v < nvec; ++v)
      store(b, i, v, loopOp.getResult(i * nvec + v));
}

void BackwardKernelBuilder::zeroRows(OpBuilder &b, Value mem, Value n,
                                     int64_t cols) {
  Value zero = splat(b, 0.0);
  loop(b, cIdx(b, 0), n, [&](OpBuilder &lb, Value r) {
    for (int64_t c = 0; c < cols; c += cfg.vw)
      vstore(lb, zero, mem, {r, cIdx(lb, c)});
  });
}

void BackwardKernelBuilder::build(OpBuilder &b) {
  elt = cast<MemRefType>(args.q.getType()).getElementType();
  headDim = op.getHeadDim();
  valueDim = op.getValueHeadDim();
  group = op.getGroupSize();
  scale = op.getEffectiveScale();
  sem = AttentionSemantics::get(op);
  vecType = VectorType::get({cfg.vw}, b.getF32Type());
  qVecs = cfg.blockQ / cfg.vw;
  inPlace = elt.isF32();

  Value batch = memref::DimOp::create(b, loc, args.q, 0);
  nq = memref::DimOp::create(b, loc, args.q, 2);
  nk = memref::DimOp::create(b, loc, args.k, 2);
  diagOffset = sem.diagonalOffset(b, loc, nq, nk, args.qOffset);

  SmallVector<OpFoldResult> bounds = {batch, b.getIndexAttr(op.getKvHeads())};
  auto forall =
      scf::ForallOp::create(b, loc, bounds, ValueRange{}, std::nullopt);
  OpBuilder fb = OpBuilder::atBlockBegin(forall.getBody());
  // Scratch per task when the tasks run on threads (each OpenMP iteration
  // is an alloca scope), else once before the loop.
  OpBuilder sb = cfg.parallel ? fb : OpBuilder(forall);
  qT = scratch(sb, {headDim, cfg.blockQ});
  doT = scratch(sb, {valueDim, cfg.blockQ});
  sT = scratch(sb, {cfg.blockKV, cfg.blockQ});
  dsT = scratch(sb, {cfg.blockKV, cfg.blockQ});
  if (sem.hasSoftcap())
    derT = scratch(sb, {cfg.blockKV, cfg.blockQ});
  lseT = scratch(sb, {cfg.blockQ});
  if (args.mask)
    maskT = memref::AllocaOp::create(
        sb, loc,
        MemRefType::get({cfg.blockKV, cfg.blockQ},
                        cast<MemRefType>(args.mask.getType()).getElementType()),
        ValueRange{}, sb.getI64IntegerAttr(64));
  if (args.qSegments)
    qSegT = memref::AllocaOp::create(
        sb, loc, MemRefType::get({cfg.blockQ}, sb.getI32Type()), ValueRange{},
        sb.getI64IntegerAttr(64));
  deltaT = scratch(sb, {cfg.blockQ});
  dqAcc = scratch(sb, {cfg.blockQ, headDim});
  if (sem.removesKeysInsideRange())
    kTile = scratch(sb, {cfg.blockKV, headDim});
  SmallVector<Value> ivs = forall.getInductionVars();
  buildTask(fb, ivs[0], ivs[1]);
}

void BackwardKernelBuilder::buildTask(OpBuilder &b, Value batch, Value kvHead) {
  Type f32 = b.getF32Type();
  // dK / dV of the task's kv head: the outputs themselves (f32) or f32
  // accumulators rounded at the end. Keys nobody attends keep 0.
  auto rowsOf = [&](Value mem, int64_t cols) -> Value {
    auto type = cast<MemRefType>(mem.getType());
    SmallVector<OpFoldResult> offsets = {batch, kvHead, b.getIndexAttr(0),
                                         b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1), nk,
                                       b.getIndexAttr(cols)};
    SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
    auto resultType = memref::SubViewOp::inferRankReducedResultType(
        {ShapedType::kDynamic, cols}, type, offsets, sizes, strides);
    return memref::SubViewOp::create(b, loc, cast<MemRefType>(resultType), mem,
                                     offsets, sizes, strides);
  };
  Value dkAcc, dvAcc;
  if (inPlace) {
    dkAcc = rowsOf(args.dk, headDim);
    dvAcc = rowsOf(args.dv, valueDim);
  } else {
    dkAcc = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic, headDim}, f32),
        ValueRange{nk}, b.getI64IntegerAttr(64));
    dvAcc = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic, valueDim}, f32),
        ValueRange{nk}, b.getI64IntegerAttr(64));
  }
  zeroRows(b, dkAcc, nk, headDim);
  zeroRows(b, dvAcc, nk, valueDim);

  Value len;
  if (args.kvLens)
    len = memref::LoadOp::create(b, loc, args.kvLens, batch);
  keyEnd = sem.keyLengthEnd(b, loc, len, nk);
  Value numQTiles = arith::CeilDivUIOp::create(b, loc, nq, cIdx(b, cfg.blockQ));
  Value headBase = mul(b, kvHead, cIdx(b, group));
  loop(b, cIdx(b, 0), cIdx(b, group), [&](OpBuilder &gb, Value g) {
    Value head = add(gb, headBase, g);
    slope =
        AttentionSemantics::loadAlibiSlope(gb, loc, args.alibi, batch, head);
    loop(gb, cIdx(gb, 0), numQTiles, [&](OpBuilder &qb, Value i) {
      Value q0 = mul(qb, i, cIdx(qb, cfg.blockQ));
      Value rows = minI(qb, cIdx(qb, cfg.blockQ), sub(qb, nq, q0));
      buildQueryTile(qb, batch, head, q0, rows, dkAcc, dvAcc);
    });
  }); // dK = scale dS^T Q: the scale once per element.
  auto scaleRows = [&](OpBuilder &lb, Value r, Value mem, int64_t c) {
    Value v = vector::LoadOp::create(lb, loc, vecType, mem,
                                     ValueRange{r, cIdx(lb, c)});
    return arith::MulFOp::create(lb, loc, v, splat(lb, scale)).getResult();
  };
  if (inPlace) {
    loop(b, cIdx(b, 0), nk, [&](OpBuilder &lb, Value r) {
      for (int64_t c = 0; c < headDim; c += cfg.vw)
        vstore(lb, scaleRows(lb, r, dkAcc, c), dkAcc, {r, cIdx(lb, c)});
    });
    return;
  }
  // Round dK / dV once.
  auto round = [&](Value acc, Value out, int64_t cols) {
    loop(b, cIdx(b, 0), nk, [&](OpBuilder &lb, Value r) {
      for (int64_t c = 0; c < cols; c += cfg.vw) {
        Value v = acc == dkAcc
                      ? scaleRows(lb, r, acc, c)
                      : vector::LoadOp::create(lb, loc, vecType, acc,
                                               ValueRange{r, cIdx(lb, c)})
                            .getResult();
        Value t =
            arith::TruncFOp::create(lb, loc, VectorType::get({cfg.vw}, elt), v);
        vector::StoreOp::create(lb, loc, t, out,
                                ValueRange{batch, kvHead, r, cIdx(lb, c)});
      }
    });
    // The pipeline's buffer deallocation frees the accumulators.
  };
  round(dkAcc, args.dk, headDim);
  round(dvAcc, args.dv, valueDim);
}

void BackwardKernelBuilder::buildQueryTile(OpBuilder &b, Value batch,
                                           Value head, Value q0, Value rows,
                                           Value dkAcc, Value dvAcc) {
  // Pack Q^T and dO^T (lanes past `rows` zero), LSE (-inf past `rows`, so
  // that P = 0 there) and Delta = rowsum(dO * O).
  Value zero = splat(b, 0.0);
  for (auto [mem, dim] :
       {std::pair<Value, int64_t>{qT, headDim}, {doT, valueDim}})
    loop(b, cIdx(b, 0), cIdx(b, dim), [&](OpBuilder &lb, Value d) {
      for (int64_t v = 0; v < qVecs; ++v)
        vstore(lb, zero, mem, {d, cIdx(lb, v * cfg.vw)});
    });
  for (int64_t v = 0; v < qVecs; ++v) {
    vstore(b, splat(b, -std::numeric_limits<double>::infinity()), lseT,
           {cIdx(b, v * cfg.vw)});
    vstore(b, zero, deltaT, {cIdx(b, v * cfg.vw)});
  }
  zeroRows(b, dqAcc, cIdx(b, cfg.blockQ), headDim);
  loop(b, cIdx(b, 0), rows, [&](OpBuilder &lb, Value r) {
    Value q = add(lb, q0, r);
    loop(lb, cIdx(lb, 0), cIdx(lb, headDim), [&](OpBuilder &db, Value d) {
      // Q^T pre-scaled: the micro-kernel gives the scaled scores.
      memref::StoreOp::create(
          db, loc,
          arith::MulFOp::create(db, loc, sload(db, args.q, {batch, head, q, d}),
                                cF32(db, scale)),
          qT, ValueRange{d, r});
    });
    Value deltaVec = splat(lb, 0.0);
    for (int64_t c = 0; c < valueDim; c += cfg.vw) {
      Value dov = vload(lb, args.dO, {batch, head, q, cIdx(lb, c)});
      Value ov = vload(lb, args.o, {batch, head, q, cIdx(lb, c)});
      deltaVec = vector::FMAOp::create(lb, loc, dov, ov, deltaVec);
      for (int64_t l = 0; l < cfg.vw; ++l)
        memref::StoreOp::create(
            lb, loc,
            vector::ExtractOp::create(lb, loc, dov, ArrayRef<int64_t>{l}), doT,
            ValueRange{cIdx(lb, c + l), r});
    }
    memref::StoreOp::create(lb, loc,
                            vector::ReductionOp::create(
                                lb, loc, vector::CombiningKind::ADD, deltaVec),
                            deltaT, r);
    memref::StoreOp::create(
        lb, loc,
        memref::LoadOp::create(lb, loc, args.lse, ValueRange{batch, head, q}),
        lseT, r);
    if (qSegT)
      memref::StoreOp::create(
          lb, loc,
          memref::LoadOp::create(lb, loc, args.qSegments, ValueRange{batch, q}),
          qSegT, r);
  });

  // The key tiles the forward visited for these rows.
  Value kvHead = arith::DivUIOp::create(b, loc, head, cIdx(b, group));
  Value end = sem.visitedKeyEnd(b, loc, keyEnd, q0, rows, diagOffset);
  Value numKTiles =
      arith::CeilDivUIOp::create(b, loc, end, cIdx(b, cfg.blockKV));
  Value firstKTile = cIdx(b, 0);
  if (Value begin = sem.visitedTileBegin(b, loc, q0, diagOffset, cfg.blockKV))
    firstKTile = arith::DivUIOp::create(b, loc, begin, cIdx(b, cfg.blockKV));
  loop(b, firstKTile, numKTiles, [&](OpBuilder &lb, Value j) {
    Value k0 = mul(lb, j, cIdx(lb, cfg.blockKV));
    Value kCols = minI(lb, cIdx(lb, cfg.blockKV), sub(lb, end, k0));
    buildKeyTile(lb, batch, head, kvHead, q0, rows, k0, kCols, dkAcc, dvAcc);
  });

  // dQ of the tile's rows, rounded once.
  loop(b, cIdx(b, 0), rows, [&](OpBuilder &lb, Value r) {
    for (int64_t c = 0; c < headDim; c += cfg.vw) {
      Value v = vector::LoadOp::create(lb, loc, vecType, dqAcc,
                                       ValueRange{r, cIdx(lb, c)});
      v = arith::MulFOp::create(lb, loc, v, splat(lb, scale));
      if (!inPlace)
        v = arith::TruncFOp::create(lb, loc, VectorType::get({cfg.vw}, elt), v);
      vector::StoreOp::create(
          lb, loc, v, args.dq,
          ValueRange{batch, head, add(lb, q0, r), cIdx(lb, c)});
    }
  });
}

void BackwardKernelBuilder::buildKeyTile(OpBuilder &b, Value batch, Value head,
                                         Value kvHead, Value q0, Value rows,
                                         Value k0, Value kCols, Value dkAcc,
                                         Value dvAcc) {
  auto key = [&](OpBuilder &nb, Value r) { return add(nb, k0, r); };

  // The mask tile, transposed (one query per lane); lanes past `rows` hold
  // 0 (their P is 0 anyway: LSE = -inf).
  if (maskT) {
    auto mType = cast<MemRefType>(args.mask.getType());
    Value zeroM = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(mType.getElementType()));
    Value mb = mType.getDimSize(0) == 1 ? cIdx(b, 0) : batch;
    Value mh = mType.getDimSize(1) == 1 ? cIdx(b, 0) : head;
    loop(b, cIdx(b, 0), kCols, [&](OpBuilder &lb, Value k) {
      loop(lb, rows, cIdx(lb, cfg.blockQ), [&](OpBuilder &qb, Value r) {
        memref::StoreOp::create(qb, loc, zeroM, maskT, ValueRange{k, r});
      });
    });
    loop(b, cIdx(b, 0), rows, [&](OpBuilder &lb, Value r) {
      loop(lb, cIdx(lb, 0), kCols, [&](OpBuilder &kb, Value k) {
        Value m = memref::LoadOp::create(
            kb, loc, args.mask, ValueRange{mb, mh, add(kb, q0, r), key(kb, k)});
        memref::StoreOp::create(kb, loc, m, maskT, ValueRange{k, r});
      });
    });
  }
  // S^T[k][q] = sum_d K[k][d] Q^T[d][q], scaled; then P^T and (softcap)
  // the derivative, per lane.
  Value qLanes = vector::StepOp::create(
      b, loc, VectorType::get({cfg.vw}, b.getIndexType()));
  // Query vectors outermost: their Q^T / dO^T columns stay in L1 while the
  // key blocks walk them.
  for (int64_t v0 = 0; v0 < qVecs; v0 += cfg.vectors)
    forBlocks(b, kCols, cfg.rows, [&](OpBuilder &nb, Value r0, int64_t count) {
      {
        auto lanes = [&](OpBuilder &ib, int64_t v) {
          return cIdx(ib, (v0 + v) * cfg.vw);
        };
        contract(
            nb, count, std::min(cfg.vectors, qVecs - v0), cIdx(nb, headDim),
            [&](OpBuilder &ib, int64_t, int64_t) { return splat(ib, 0.0); },
            [&](OpBuilder &ib, Value d, int64_t i) {
              return sload(
                  ib, args.k,
                  {batch, kvHead, key(ib, add(ib, r0, cIdx(ib, i))), d});
            },
            [&](OpBuilder &ib, Value d, int64_t v) {
              return vector::LoadOp::create(ib, loc, vecType, qT,
                                            ValueRange{d, lanes(ib, v)})
                  .getResult();
            },
            [&](OpBuilder &ib, int64_t i, int64_t v, Value s) {
              Value r = add(ib, r0, cIdx(ib, i));
              Value kPos = key(ib, r);
              Value qPos =
                  add(ib,
                      vector::BroadcastOp::create(ib, loc, qLanes.getType(),
                                                  add(ib, q0, lanes(ib, v))),
                      qLanes);
              Value scaled = s;
              Value keep =
                  sem.keepKey(ib, loc, qPos, kPos, Value(), diagOffset);
              Value x = sem.modifyScore(ib, loc, scaled, qPos, kPos, diagOffset,
                                        slope);
              if (maskT) {
                Type mElt = cast<MemRefType>(maskT.getType()).getElementType();
                Value m = vector::LoadOp::create(
                    ib, loc, VectorType::get({cfg.vw}, mElt), maskT,
                    ValueRange{r, lanes(ib, v)});
                sem.applyMaskElement(ib, loc, m, x, keep);
              }
              if (qSegT) {
                Value qSeg = vector::LoadOp::create(
                    ib, loc, VectorType::get({cfg.vw}, ib.getI32Type()), qSegT,
                    ValueRange{lanes(ib, v)});
                Value kSeg = vector::BroadcastOp::create(
                    ib, loc, VectorType::get({cfg.vw}, ib.getI32Type()),
                    memref::LoadOp::create(ib, loc, args.kSegments,
                                           ValueRange{batch, kPos}));
                sem.applySegments(ib, loc, qSeg, kSeg, keep);
              }
              x = AttentionSemantics::removeUnkept(ib, loc, keep, x);
              Value lse = vector::LoadOp::create(ib, loc, vecType, lseT,
                                                 ValueRange{lanes(ib, v)});
              vstore(ib, guardedProbability(ib, loc, x, lse), sT,
                     {r, lanes(ib, v)});
              if (derT)
                vstore(ib, sem.scoreDerivative(ib, loc, scaled), derT,
                       {r, lanes(ib, v)});
            });
      }
    });

  // (dP - Delta)^T[k][q] = sum_dv V[k][dv] dO^T[dv][q] - Delta[q], then
  // dS^T = P^T (dP - Delta)^T scale (x derivative), exactly 0 where P = 0.
  // Query vectors outermost: their Q^T / dO^T columns stay in L1 while the
  // key blocks walk them.
  for (int64_t v0 = 0; v0 < qVecs; v0 += cfg.vectors)
    forBlocks(b, kCols, cfg.rows, [&](OpBuilder &nb, Value r0, int64_t count) {
      {
        auto lanes = [&](OpBuilder &ib, int64_t v) {
          return cIdx(ib, (v0 + v) * cfg.vw);
        };
        contract(
            nb, count, std::min(cfg.vectors, qVecs - v0), cIdx(nb, valueDim),
            [&](OpBuilder &ib, int64_t, int64_t v) {
              Value delta = vector::LoadOp::create(ib, loc, vecType, deltaT,
                                                   ValueRange{lanes(ib, v)});
              return arith::NegFOp::create(ib, loc, delta).getResult();
            },
            [&](OpBuilder &ib, Value d, int64_t i) {
              return sload(
                  ib, args.v,
                  {batch, kvHead, key(ib, add(ib, r0, cIdx(ib, i))), d});
            },
            [&](OpBuilder &ib, Value d, int64_t v) {
              return vector::LoadOp::create(ib, loc, vecType, doT,
                                            ValueRange{d, lanes(ib, v)})
                  .getResult();
            },
            [&](OpBuilder &ib, int64_t i, int64_t v, Value dp) {
              Value r = add(ib, r0, cIdx(ib, i));
              Value p = vector::LoadOp::create(ib, loc, vecType, sT,
                                               ValueRange{r, lanes(ib, v)});
              // scale is applied to dQ and dK once, at the end.
              Value diff = dp;
              if (derT)
                diff = arith::MulFOp::create(
                    ib, loc, diff,
                    vector::LoadOp::create(ib, loc, vecType, derT,
                                           ValueRange{r, lanes(ib, v)}));
              vstore(ib, maskedProduct(ib, loc, p, diff), dsT,
                     {r, lanes(ib, v)});
            });
      }
    });

  // dV[k] += sum_q P^T[k][q] dO[q], dK[k] += sum_q dS^T[k][q] Q[q]: rows of
  // keys, headDimBlock vectors of the head dim at a time.
  auto keyRows = [&](Value acc, Value tile, Value src, int64_t cols) {
    int64_t block = headDimBlock(cols);
    forBlocks(b, kCols, cfg.rows, [&](OpBuilder &nb, Value r0, int64_t count) {
      for (int64_t c0 = 0; c0 < cols; c0 += block * cfg.vw) {
        int64_t nvec = std::min(block, (cols - c0) / cfg.vw);
        auto col = [&](OpBuilder &ib, int64_t v) {
          return cIdx(ib, c0 + v * cfg.vw);
        };
        contract(
            nb, count, nvec, rows,
            [&](OpBuilder &ib, int64_t i, int64_t v) {
              return vector::LoadOp::create(
                         ib, loc, vecType, acc,
                         ValueRange{key(ib, add(ib, r0, cIdx(ib, i))),
                                    col(ib, v)})
                  .getResult();
            },
            [&](OpBuilder &ib, Value q, int64_t i) {
              return memref::LoadOp::create(
                         ib, loc, tile, ValueRange{add(ib, r0, cIdx(ib, i)), q})
                  .getResult();
            },
            [&](OpBuilder &ib, Value q, int64_t v) {
              return vload(ib, src, {batch, head, add(ib, q0, q), col(ib, v)});
            },
            [&](OpBuilder &ib, int64_t i, int64_t v, Value x) {
              vstore(ib, x, acc,
                     {key(ib, add(ib, r0, cIdx(ib, i))), col(ib, v)});
            });
      }
    });
  };
  keyRows(dvAcc, sT, args.dO, valueDim);
  keyRows(dkAcc, dsT, args.q, headDim);

  // dQ[q] += sum_k dS^T[k][q] K[k]: rows of queries. Where keys inside the
  // range can be removed, a removed key's K row may hold NaN or inf while
  // its dS is 0: the rows are read from a copy with those set to 0.
  bool guardK = sem.removesKeysInsideRange();
  if (guardK) {
    Value zero = splat(b, 0.0);
    loop(b, cIdx(b, 0), kCols, [&](OpBuilder &lb, Value r) {
      for (int64_t c = 0; c < headDim; c += cfg.vw) {
        Value kv = vload(lb, args.k, {batch, kvHead, key(lb, r), cIdx(lb, c)});
        Value finite =
            arith::CmpFOp::create(lb, loc, arith::CmpFPredicate::ORD,
                                  arith::SubFOp::create(lb, loc, kv, kv), zero);
        vstore(lb, arith::SelectOp::create(lb, loc, finite, kv, zero), kTile,
               {r, cIdx(lb, c)});
      }
    });
  }
  int64_t block = headDimBlock(headDim);
  forBlocks(b, rows, cfg.rows, [&](OpBuilder &nb, Value r0, int64_t count) {
    for (int64_t c0 = 0; c0 < headDim; c0 += block * cfg.vw) {
      int64_t nvec = std::min(block, (headDim - c0) / cfg.vw);
      auto col = [&](OpBuilder &ib, int64_t v) {
        return cIdx(ib, c0 + v * cfg.vw);
      };
      contract(
          nb, count, nvec, kCols,
          [&](OpBuilder &ib, int64_t i, int64_t v) {
            return vector::LoadOp::create(
                       ib, loc, vecType, dqAcc,
                       ValueRange{add(ib, r0, cIdx(ib, i)), col(ib, v)})
                .getResult();
          },
          [&](OpBuilder &ib, Value k, int64_t i) {
            return memref::LoadOp::create(
                       ib, loc, dsT, ValueRange{k, add(ib, r0, cIdx(ib, i))})
                .getResult();
          },
          [&](OpBuilder &ib, Value k, int64_t v) {
            if (guardK)
              return vload(ib, kTile, {k, col(ib, v)});
            return vload(ib, args.k, {batch, kvHead, key(ib, k), col(ib, v)});
          },
          [&](OpBuilder &ib, int64_t i, int64_t v, Value x) {
            vstore(ib, x, dqAcc, {add(ib, r0, cIdx(ib, i)), col(ib, v)});
          });
    }
  });
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FACpuAttentionBackwardPass final
    : fa::impl::FACpuAttentionBackwardPassBase<FACpuAttentionBackwardPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

/// Why the kernel does not take `op` (it is left to
/// fa-tile-attention-backward), or an empty string.
static std::string unsupportedReason(AttentionBackwardOp op, int64_t vw) {
  if (op.getHeadDim() % vw != 0 || op.getValueHeadDim() % vw != 0)
    return "head dims that are not multiples of the vector width";
  return "";
}

void FACpuAttentionBackwardPass::runOnOperation() {
  if (vectorWidth != 8 && vectorWidth != 16) {
    mlir::emitError(getOperation()->getLoc())
        << "fa-cpu-attention-backward: vector-width must be 8 or 16, got "
        << static_cast<int64_t>(vectorWidth);
    return signalPassFailure();
  }
  if (blockKV <= 0 || blockQ <= 0 || blockQ % vectorWidth != 0) {
    mlir::emitError(getOperation()->getLoc())
        << "fa-cpu-attention-backward: block-q must be a positive multiple "
           "of vector-width and block-kv positive, got block-q="
        << static_cast<int64_t>(blockQ)
        << " block-kv=" << static_cast<int64_t>(blockKV);
    return signalPassFailure();
  }
  SmallVector<AttentionBackwardOp> ops;
  getOperation()->walk([&](AttentionBackwardOp op) { ops.push_back(op); });
  for (AttentionBackwardOp op : ops) {
    FailureOr<BackwardKernelOperands> args = matchBackwardKernelForm(op);
    if (failed(args))
      continue;
    if (!unsupportedReason(op, vectorWidth).empty())
      continue;
    if (failed(verifyKernelResultUses(op, getArgument())))
      return signalPassFailure();
    BackwardConfig cfg;
    cfg.vw = vectorWidth;
    cfg.blockQ = blockQ;
    cfg.blockKV = blockKV;
    // Register blocks for the register file: 32 vectors with AVX-512, 16
    // with AVX2. With AVX-512, 4 x 4 (21 live vectors) ran 1.15-1.2x
    // faster than 6 x 4 (31) on the Ice Lake host (N = 4096, D = 128; see
    // docs/performance.md), and 4 divides the 64-row tiles.
    cfg.rows = vectorWidth == 16 ? 4 : 3;
    cfg.vectors = 4;
    cfg.parallel = parallel;
    OpBuilder b(op);
    BackwardKernelBuilder(op, *args, cfg).build(b);
    // The kernel wrote the outputs: drop the tensor-level op and its
    // materializations.
    SmallVector<Operation *> users;
    for (Value r : op->getResults())
      for (Operation *u : r.getUsers())
        users.push_back(u);
    for (Operation *u : users)
      u->erase();
    op->erase();
  }
  // exp and tanh on vectors as polynomials (no libm call per lane).
  SmallVector<Operation *> exps, tanhs;
  getOperation()->walk([&](Operation *o) {
    if (isa<math::ExpOp>(o) && isa<VectorType>(o->getResult(0).getType()))
      exps.push_back(o);
    if (isa<math::TanhOp>(o) && isa<VectorType>(o->getResult(0).getType()))
      tanhs.push_back(o);
  });
  for (Operation *e : exps) {
    OpBuilder b(e);
    Value x = lowering::buildFastExp(b, e->getLoc(), e->getOperand(0));
    e->getResult(0).replaceAllUsesWith(x);
    e->erase();
  }
  if (failed(lowering::approximateTanh(tanhs)))
    return signalPassFailure();
}
