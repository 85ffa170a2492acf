//===- TensorCoreAttention.cpp - FA2 kernels on mma.sync tensor cores -----===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Turns an eligible kernel function (f16/bf16 fa.attention, head dims
// multiples of 16 up to 256) directly into a gpu.module kernel in the
// FlashAttention-2 structure, fully unrolled over mma fragments:
//
//  * block = block_q / 16 warps, warp w owns the 16 query rows 16 w ...;
//  * one dynamic workgroup buffer viewed as Q[block_q][D + 8],
//    K[stages][block_kv][D + 8] and V[stages][block_kv][Dv + 8] (rows padded
//    by 16 bytes against ldmatrix bank conflicts);
//  * cp.async (nvgpu.device_async_copy) of 16-byte chunks, rows past the
//    sequence ends zero-filled through srcElements = 0; a `stages`-deep
//    pipeline: tile j + stages - 1 is in flight while tile j is computed;
//  * S = Q K^T and O += P V with nvgpu.mma.sync m16n8k16 fed by
//    nvgpu.ldmatrix (V transposed); P stays in registers as the A operand;
//  * online softmax on the accumulator layout (lane l holds rows l/4 and
//    l/4 + 8): row max with gpu.shuffle xor 1, 2, per-lane row sums reduced
//    once after the loop, exp2 (the NVVM ex2.approx.f32 intrinsic: no
//    libdevice) with log2(e) folded into the scale, the m = -inf guard;
//  * masks only where needed: the partial last tile and the tiles crossing
//    the causal diagonal; user masks are read per fragment element;
//  * O and LSE stored from the fragments, rows past Nq skipped.
//
// Ineligible ops are left alone for fa-promote-shared / fa-map-to-gpu.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "GpuKernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>
#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAMAPTOTENSORCORESPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

//===----------------------------------------------------------------------===//
// Eligibility and configuration
//===----------------------------------------------------------------------===//

bool gpukernel::isTensorCoreEligible(AttentionOp op) {
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto kType = cast<RankedTensorType>(op.getKey().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  Type elt = qType.getElementType();
  if (!(elt.isF16() || elt.isBF16()) || kType.getElementType() != elt ||
      vType.getElementType() != elt)
    return false;
  auto goodDim = [](int64_t d) {
    return !ShapedType::isDynamic(d) && d > 0 && d <= 256 && d % 16 == 0;
  };
  if (!goodDim(qType.getDimSize(3)) || !goodDim(vType.getDimSize(3)))
    return false;
  Type oElt = cast<RankedTensorType>(op.getResult().getType()).getElementType();
  if (!(oElt.isF16() || oElt.isBF16() || oElt.isF32()))
    return false;
  return true;
}

int64_t TensorCoreConfig::sharedBytes() const {
  int64_t eb = 2;
  return (blockQ * (headDim + 8) + stages * blockKV * (headDim + 8) +
          stages * blockKV * (valueDim + 8)) *
         eb;
}

FailureOr<TensorCoreConfig>
gpukernel::chooseTensorCoreConfig(AttentionOp op, int64_t blockQ,
                                  int64_t blockKV, int64_t stages,
                                  std::string &error) {
  TensorCoreConfig c;
  c.headDim = cast<RankedTensorType>(op.getQuery().getType()).getDimSize(3);
  c.valueDim = cast<RankedTensorType>(op.getValue().getType()).getDimSize(3);
  c.blockQ = blockQ;
  c.stages = stages;
  if (blockKV > 0) {
    c.blockKV = blockKV;
  } else {
    // Small S fragments for the large head dims (register pressure) where
    // the copy of a tile still splits evenly over the threads.
    c.blockKV = 64;
    if (std::max(c.headDim, c.valueDim) > 128) {
      c.blockKV = 32;
      if ((c.blockKV * c.headDim / 8) % c.numThreads() != 0 ||
          (c.blockKV * c.valueDim / 8) % c.numThreads() != 0)
        c.blockKV = 64;
    }
  }
  if (c.blockQ <= 0 || c.blockQ % 16 != 0 || c.blockQ > 128) {
    error = "block-q must be 16, 32, 48, ... or 128 (16 rows per warp), got " +
            std::to_string(c.blockQ);
    return failure();
  }
  if (c.blockKV <= 0 || c.blockKV % 16 != 0 || c.blockKV > 256) {
    error = "block-kv must be a positive multiple of 16 up to 256, got " +
            std::to_string(c.blockKV);
    return failure();
  }
  if (c.stages < 2 || c.stages > 4) {
    error = "stages must be 2, 3 or 4, got " + std::to_string(c.stages);
    return failure();
  }
  // Every thread copies the same number of 16-byte chunks of each tile.
  auto even = [&](int64_t rows, int64_t width) {
    return (rows * width / 8) % c.numThreads() == 0;
  };
  if (!even(c.blockQ, c.headDim) || !even(c.blockKV, c.headDim) ||
      !even(c.blockKV, c.valueDim)) {
    error = "the 16-byte chunks of a tile must split evenly over the " +
            std::to_string(c.numThreads()) +
            " threads (block-q = " + std::to_string(c.blockQ) +
            ", block-kv = " + std::to_string(c.blockKV) +
            ", D = " + std::to_string(c.headDim) +
            ", Dv = " + std::to_string(c.valueDim) + ")";
    return failure();
  }
  return c;
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

namespace {

/// Emits the tensor-core kernel body of one kernel function.
class TensorCoreKernelBuilder {
public:
  TensorCoreKernelBuilder(AttentionOp op, const TensorCoreConfig &cfg)
      : op(op), cfg(cfg), ctx(op.getContext()), loc(op.getLoc()) {
    auto qType = cast<RankedTensorType>(op.getQuery().getType());
    elt = qType.getElementType();
    oElt = cast<RankedTensorType>(op.getResult().getType()).getElementType();
    heads = qType.getDimSize(1);
    group = op.getGroupSize();
    causal = op.getCausal();
    scaleLog2 = op.getEffectiveScale() * static_cast<float>(M_LOG2E);
  }

  /// Emits the kernel into the entry block of `kernel`, whose arguments are
  /// the kernel function's memrefs; `a` names them.
  void build(gpu::GPUFuncOp kernel, const KernelOperands &a);

private:
  // Small helpers.
  Value cIdx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value cF32(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value addC(Value x, int64_t c) { return c == 0 ? x : add(x, cIdx(c)); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  /// vector<2x2xf32> with rows (r0, r0) and (r1, r1).
  Value rowsToFragment(Value r0, Value r1) {
    return vector::FromElementsOp::create(b, loc, accType,
                                          ValueRange{r0, r0, r1, r1});
  }
  Value shuffleXor(Value v, int64_t offset) {
    Value off = arith::ConstantIntOp::create(b, loc, offset, 32);
    Value width =
        arith::ConstantIntOp::create(b, loc, gpukernel::kWarpSize, 32);
    return gpu::ShuffleOp::create(b, loc, v, off, width, gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  /// Rows [first, first + 1] of a vector<4x2xT> ldmatrix result.
  Value halfOf(Value x4, int64_t first) {
    return vector::ShuffleOp::create(b, loc, x4, x4,
                                     ArrayRef<int64_t>{first, first + 1});
  }
  /// exp2 as the NVVM intrinsic ex2.approx.f32 (no libdevice needed), on
  /// an f32 or elementwise on a vector<2x2xf32>.
  Value exp2(Value x) {
    auto call = [&](Value v) {
      return LLVM::CallIntrinsicOp::create(
                 b, loc, Type(b.getF32Type()),
                 b.getStringAttr("llvm.nvvm.ex2.approx.f32"), ValueRange{v})
          .getResult(0);
    };
    if (!isa<VectorType>(x.getType()))
      return call(x);
    SmallVector<Value> elems;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 2; ++c)
        elems.push_back(call(
            vector::ExtractOp::create(b, loc, x, ArrayRef<int64_t>{r, c})));
    return vector::FromElementsOp::create(b, loc, accType, elems);
  }
  Value mma(Value a, Value bFrag, Value c) {
    return nvgpu::MmaSyncOp::create(b, loc, a, bFrag, c,
                                    ArrayRef<int64_t>{16, 8, 16});
  }
  Value ldmatrix(Value src, ValueRange indices, bool transpose) {
    return nvgpu::LdMatrixOp::create(b, loc, fragA, src, indices, transpose,
                                     /*numTiles=*/4);
  }

  /// Issues the cp.async copies of rows [row0, row0 + rows) of
  /// `src[batch, srcHead, :, :]` (`width` columns) into `dst[prefix..., r,
  /// c]`, zero-filling rows at or past `rowEnd` (>= 1). Returns the tokens.
  void copyTile(Value src, Value srcHead, Value row0, Value rowEnd,
                int64_t rows, int64_t width, Value dst, ValueRange prefix,
                SmallVectorImpl<Value> &tokens);
  /// Copies K/V tile `j` into slot `slot` and commits them as one group.
  Value copyKVTile(Value j, Value slot, SmallVector<Value> extraTokens = {});

  /// Applies key lengths, causality and the user mask to the scaled scores
  /// `x` of the tile starting at key `k0`.
  SmallVector<Value> maskScores(ArrayRef<Value> x, Value k0);
  /// One KV tile: the loop body. Returns the new state.
  SmallVector<Value> tileUpdate(Value j, ValueRange state);
  /// O, LSE stores.
  void epilogue(ValueRange state);

  AttentionOp op;
  TensorCoreConfig cfg;
  MLIRContext *ctx;
  Location loc;
  OpBuilder b{op.getContext()};
  Type elt, oElt;
  int64_t heads, group;
  CausalKind causal;
  float scaleLog2;
  KernelOperands args;
  VectorType accType, fragA;

  // Per-block values.
  Value tid, lane, warp, batch, head, kvHead, q0, nq, nk, diag, kvEnd, numKV;
  Value qs, ks, vs;
  // Per-lane fragment coordinates.
  Value laneRow, laneQuad2, lane16, lane8, laneHi16, laneBit8;
  Value warpRow0;
};

} // namespace

void TensorCoreKernelBuilder::copyTile(Value src, Value srcHead, Value row0,
                                       Value rowEnd, int64_t rows,
                                       int64_t width, Value dst,
                                       ValueRange prefix,
                                       SmallVectorImpl<Value> &tokens) {
  int64_t chunksPerRow = width / 8;
  int64_t perThread = rows * chunksPerRow / cfg.numThreads();
  Value last = arith::SubIOp::create(b, loc, rowEnd, cIdx(1));
  Value eight = cIdx(8), zero = cIdx(0);
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  for (int64_t it = 0; it < perThread; ++it) {
    Value i = addC(tid, it * cfg.numThreads());
    Value r = arith::DivUIOp::create(b, loc, i, cIdx(chunksPerRow));
    Value c = mul(arith::RemUIOp::create(b, loc, i, cIdx(chunksPerRow)), eight);
    Value row = add(row0, r);
    Value inside = cmp(arith::CmpIPredicate::slt, row, rowEnd);
    // Every address stays inside the tensor; rows past the end read 0
    // bytes and are zero-filled.
    Value rowC = arith::MinSIOp::create(b, loc, row, last);
    Value nsrc = arith::SelectOp::create(b, loc, inside, eight, zero);
    SmallVector<Value> dstIdx(prefix.begin(), prefix.end());
    dstIdx.push_back(r);
    dstIdx.push_back(c);
    auto copy = nvgpu::DeviceAsyncCopyOp::create(
        b, loc, tokenType, dst, dstIdx, src,
        ValueRange{batch, srcHead, rowC, c}, b.getIndexAttr(8), nsrc,
        b.getUnitAttr());
    tokens.push_back(copy.getAsyncToken());
  }
}

Value TensorCoreKernelBuilder::copyKVTile(Value j, Value slot,
                                          SmallVector<Value> extraTokens) {
  Value k0 = mul(j, cIdx(cfg.blockKV));
  SmallVector<Value> tokens = std::move(extraTokens);
  copyTile(args.k, kvHead, k0, kvEnd, cfg.blockKV, cfg.headDim, ks, slot,
           tokens);
  copyTile(args.v, kvHead, k0, kvEnd, cfg.blockKV, cfg.valueDim, vs, slot,
           tokens);
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(ctx), tokens);
}

SmallVector<Value> TensorCoreKernelBuilder::maskScores(ArrayRef<Value> x,
                                                       Value k0) {
  Value ninf = cF32(-std::numeric_limits<float>::infinity());
  Value rowQ[2] = {add(add(q0, warpRow0), laneRow),
                   addC(add(add(q0, warpRow0), laneRow), 8)};
  Value limit[2];
  if (causal != CausalKind::none)
    for (int r = 0; r < 2; ++r)
      limit[r] = add(rowQ[r], diag);
  Value maskRow[2], mb, mh;
  Value lastKey;
  Type maskElt;
  if (args.mask) {
    auto mType = cast<MemRefType>(args.mask.getType());
    maskElt = mType.getElementType();
    Value lastRow = arith::SubIOp::create(b, loc, nq, cIdx(1));
    for (int r = 0; r < 2; ++r)
      maskRow[r] = arith::MinSIOp::create(b, loc, rowQ[r], lastRow);
    lastKey = arith::SubIOp::create(b, loc, nk, cIdx(1));
    mb = mType.getDimSize(0) == 1 ? cIdx(0) : batch;
    mh = mType.getDimSize(1) == 1 ? cIdx(0) : head;
  }
  SmallVector<Value> out;
  Value keyBase = add(k0, laneQuad2);
  for (int64_t nt = 0, e = x.size(); nt < e; ++nt) {
    SmallVector<Value> elems;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 2; ++c) {
        Value key = addC(keyBase, nt * 8 + c);
        Value v =
            vector::ExtractOp::create(b, loc, x[nt], ArrayRef<int64_t>{r, c});
        Value valid = cmp(arith::CmpIPredicate::slt, key, kvEnd);
        if (causal != CausalKind::none)
          valid = arith::AndIOp::create(
              b, loc, valid, cmp(arith::CmpIPredicate::sle, key, limit[r]));
        if (args.mask) {
          Value keyC = arith::MinSIOp::create(b, loc, key, lastKey);
          Value m = memref::LoadOp::create(
              b, loc, args.mask, ValueRange{mb, mh, maskRow[r], keyC});
          if (maskElt.isInteger(1)) {
            valid = arith::AndIOp::create(b, loc, valid, m);
          } else if (maskElt.isInteger(8)) {
            Value z =
                arith::ConstantOp::create(b, loc, b.getIntegerAttr(maskElt, 0));
            valid = arith::AndIOp::create(
                b, loc, valid,
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, m, z));
          } else {
            if (!maskElt.isF32())
              m = arith::ExtFOp::create(b, loc, b.getF32Type(), m);
            v = arith::AddFOp::create(
                b, loc, v,
                arith::MulFOp::create(b, loc, m,
                                      cF32(static_cast<float>(M_LOG2E))));
          }
        }
        elems.push_back(arith::SelectOp::create(b, loc, valid, v, ninf));
      }
    out.push_back(vector::FromElementsOp::create(b, loc, accType, elems));
  }
  return out;
}

SmallVector<Value> TensorCoreKernelBuilder::tileUpdate(Value j,
                                                       ValueRange state) {
  int64_t nKT = cfg.blockKV / 8, nDT = cfg.valueDim / 8;
  ValueRange oFrag = state.take_front(nDT);
  Value mOld[2] = {state[nDT], state[nDT + 1]};
  Value lOld[2] = {state[nDT + 2], state[nDT + 3]};
  Value slot = arith::RemUIOp::create(b, loc, j, cIdx(cfg.stages));
  Value k0 = mul(j, cIdx(cfg.blockKV));

  // S = Q K^T: Q fragments are re-read from workgroup memory per k-step so
  // that they do not hold registers across the loop.
  Value zeroAcc = arith::ConstantOp::create(b, loc, b.getZeroAttr(accType));
  SmallVector<Value> s(nKT, zeroAcc);
  Value qRow = add(warpRow0, lane16);
  Value qCol = mul(laneHi16, cIdx(8));
  Value kRow = add(lane8, mul(laneHi16, cIdx(8)));
  Value kCol = mul(laneBit8, cIdx(8));
  for (int64_t kstep = 0; kstep < cfg.headDim / 16; ++kstep) {
    Value qa = ldmatrix(qs, ValueRange{qRow, addC(qCol, kstep * 16)},
                        /*transpose=*/false);
    for (int64_t np = 0; np < nKT / 2; ++np) {
      Value kb = ldmatrix(
          ks, ValueRange{slot, addC(kRow, np * 16), addC(kCol, kstep * 16)},
          /*transpose=*/false);
      s[2 * np] = mma(qa, halfOf(kb, 0), s[2 * np]);
      s[2 * np + 1] = mma(qa, halfOf(kb, 2), s[2 * np + 1]);
    }
  }

  // Scores in the log2 domain, masked where the tile needs it.
  Value sclV = arith::ConstantOp::create(
      b, loc, SplatElementsAttr::get(accType, b.getF32FloatAttr(scaleLog2)));
  SmallVector<Value> x;
  for (Value v : s)
    x.push_back(arith::MulFOp::create(b, loc, v, sclV));
  if (args.mask) {
    x = maskScores(x, k0);
  } else {
    // Only the tile holding kv_end and the tiles crossing the causal
    // diagonal of this warp's rows need masking.
    Value tileEnd = addC(k0, cfg.blockKV);
    Value need = cmp(arith::CmpIPredicate::sgt, tileEnd, kvEnd);
    if (causal != CausalKind::none) {
      Value firstRowLimit = add(add(q0, warpRow0), diag);
      need =
          arith::OrIOp::create(b, loc, need,
                               cmp(arith::CmpIPredicate::sgt,
                                   addC(k0, cfg.blockKV - 1), firstRowLimit));
    }
    SmallVector<Type> types(nKT, accType);
    auto ifOp = scf::IfOp::create(b, loc, types, need, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      scf::YieldOp::create(b, loc, maskScores(x, k0));
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      scf::YieldOp::create(b, loc, x);
    }
    x.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  }

  // Online softmax on the fragments: row r of a vector<2x2xf32> is query
  // row lane/4 + 8 r; the 4 lanes of a quad share a row.
  Value ninf = cF32(-std::numeric_limits<float>::infinity());
  Value zeroF = cF32(0.0f);
  Value mNew[2], mUse[2], alpha[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value mx = vector::ExtractOp::create(b, loc, x[0], ArrayRef<int64_t>{r});
    for (int64_t nt = 1; nt < nKT; ++nt)
      mx = arith::MaximumFOp::create(
          b, loc, mx,
          vector::ExtractOp::create(b, loc, x[nt], ArrayRef<int64_t>{r}));
    Value rowMax = vector::ReductionOp::create(
        b, loc, vector::CombiningKind::MAXIMUMF, mx);
    rowMax = arith::MaximumFOp::create(b, loc, rowMax, shuffleXor(rowMax, 1));
    rowMax = arith::MaximumFOp::create(b, loc, rowMax, shuffleXor(rowMax, 2));
    mNew[r] = arith::MaximumFOp::create(b, loc, mOld[r], rowMax);
    // An all-masked row so far keeps m = -inf: exp2 against 0 instead.
    Value isInf =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew[r], ninf);
    mUse[r] = arith::SelectOp::create(b, loc, isInf, zeroF, mNew[r]);
    alpha[r] = exp2(arith::SubFOp::create(b, loc, mOld[r], mUse[r]));
  }
  Value mUseV = rowsToFragment(mUse[0], mUse[1]);
  SmallVector<Value> p;
  for (int64_t nt = 0; nt < nKT; ++nt)
    p.push_back(exp2(arith::SubFOp::create(b, loc, x[nt], mUseV)));
  SmallVector<Value> next;
  Value lNew[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value sum = vector::ExtractOp::create(b, loc, p[0], ArrayRef<int64_t>{r});
    for (int64_t nt = 1; nt < nKT; ++nt)
      sum = arith::AddFOp::create(
          b, loc, sum,
          vector::ExtractOp::create(b, loc, p[nt], ArrayRef<int64_t>{r}));
    Value laneSum =
        vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, sum);
    // Per-lane partial sum: alpha is uniform over the quad.
    lNew[r] = arith::AddFOp::create(
        b, loc, arith::MulFOp::create(b, loc, lOld[r], alpha[r]), laneSum);
  }

  // O = alpha O + P V, P reused from registers as the A operand.
  Value alphaV = rowsToFragment(alpha[0], alpha[1]);
  SmallVector<Value> o;
  for (Value v : oFrag)
    o.push_back(arith::MulFOp::create(b, loc, v, alphaV));
  auto halfType = VectorType::get({2, 2}, elt);
  Value vRow = add(lane8, mul(laneBit8, cIdx(8)));
  Value vCol = mul(laneHi16, cIdx(8));
  for (int64_t kstep = 0; kstep < cfg.blockKV / 16; ++kstep) {
    Value h0 = arith::TruncFOp::create(b, loc, halfType, p[2 * kstep]);
    Value h1 = arith::TruncFOp::create(b, loc, halfType, p[2 * kstep + 1]);
    Value pa = vector::ShuffleOp::create(b, loc, h0, h1,
                                         ArrayRef<int64_t>{0, 1, 2, 3});
    for (int64_t dp = 0; dp < cfg.valueDim / 16; ++dp) {
      Value vb = ldmatrix(
          vs, ValueRange{slot, addC(vRow, kstep * 16), addC(vCol, dp * 16)},
          /*transpose=*/true);
      o[2 * dp] = mma(pa, halfOf(vb, 0), o[2 * dp]);
      o[2 * dp + 1] = mma(pa, halfOf(vb, 2), o[2 * dp + 1]);
    }
  }
  next.append(o.begin(), o.end());
  next.append({mNew[0], mNew[1], lNew[0], lNew[1]});
  return next;
}

void TensorCoreKernelBuilder::epilogue(ValueRange state) {
  int64_t nDT = cfg.valueDim / 8;
  ValueRange oFrag = state.take_front(nDT);
  Value m[2] = {state[nDT], state[nDT + 1]};
  Value l[2] = {state[nDT + 2], state[nDT + 3]};
  Value zeroF = cF32(0.0f), oneF = cF32(1.0f);
  Value empty[2], inv[2];
  for (int r = 0; r < 2; ++r) {
    l[r] = arith::AddFOp::create(b, loc, l[r], shuffleXor(l[r], 1));
    l[r] = arith::AddFOp::create(b, loc, l[r], shuffleXor(l[r], 2));
    // A row without any attended key: O = 0 exactly.
    empty[r] =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l[r], zeroF);
    inv[r] = arith::SelectOp::create(b, loc, empty[r], zeroF,
                                     arith::DivFOp::create(b, loc, oneF, l[r]));
  }
  Value invV = rowsToFragment(inv[0], inv[1]);
  auto outType = VectorType::get({2, 2}, oElt);
  SmallVector<Value> o;
  for (Value v : oFrag) {
    Value scaled = arith::MulFOp::create(b, loc, v, invV);
    if (!oElt.isF32())
      scaled = arith::TruncFOp::create(b, loc, outType, scaled);
    o.push_back(scaled);
  }
  Value quadLead = cmp(arith::CmpIPredicate::eq,
                       arith::RemUIOp::create(b, loc, lane, cIdx(4)), cIdx(0));
  for (int64_t r = 0; r < 2; ++r) {
    Value row = addC(add(add(q0, warpRow0), laneRow), 8 * r);
    Value inRows = cmp(arith::CmpIPredicate::slt, row, nq);
    Value lse;
    if (args.lse) {
      // LSE = ln 2 * (m + log2 l), natural log; -inf for an empty row.
      Value lg =
          LLVM::CallIntrinsicOp::create(
              b, loc, Type(b.getF32Type()),
              b.getStringAttr("llvm.nvvm.lg2.approx.f"), ValueRange{l[r]})
              .getResult(0);
      lse =
          arith::MulFOp::create(b, loc, arith::AddFOp::create(b, loc, m[r], lg),
                                cF32(static_cast<float>(M_LN2)));
      lse = arith::SelectOp::create(
          b, loc, empty[r], cF32(-std::numeric_limits<float>::infinity()), lse);
    }
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, inRows,
                                  /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    for (int64_t dt = 0; dt < nDT; ++dt) {
      Value part =
          vector::ExtractOp::create(b, loc, o[dt], ArrayRef<int64_t>{r});
      vector::StoreOp::create(
          b, loc, part, args.o,
          ValueRange{batch, head, row, addC(laneQuad2, dt * 8)});
    }
    if (args.lse) {
      auto lseIf = scf::IfOp::create(b, loc, TypeRange{}, quadLead,
                                     /*withElse=*/false);
      b.setInsertionPointToStart(&lseIf.getThenRegion().front());
      memref::StoreOp::create(b, loc, lse, args.lse,
                              ValueRange{batch, head, row});
    }
  }
}

void TensorCoreKernelBuilder::build(gpu::GPUFuncOp kernel,
                                    const KernelOperands &a) {
  args = a;
  accType = VectorType::get({2, 2}, b.getF32Type());
  fragA = VectorType::get({4, 2}, elt);
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);

  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  lane = gpu::LaneIdOp::create(b, loc, /*upperBound=*/nullptr);
  warp = arith::DivUIOp::create(b, loc, tid, cIdx(gpukernel::kWarpSize));
  Value qTile = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  head = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  batch = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  kvHead = group == 1
               ? head
               : Value(arith::DivUIOp::create(b, loc, head, cIdx(group)));
  laneRow = arith::DivUIOp::create(b, loc, lane, cIdx(4));
  laneQuad2 = mul(arith::RemUIOp::create(b, loc, lane, cIdx(4)), cIdx(2));
  lane16 = arith::RemUIOp::create(b, loc, lane, cIdx(16));
  lane8 = arith::RemUIOp::create(b, loc, lane, cIdx(8));
  laneHi16 = arith::DivUIOp::create(b, loc, lane, cIdx(16));
  laneBit8 = arith::RemUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, lane, cIdx(8)), cIdx(2));
  warpRow0 = mul(warp, cIdx(16));

  nq = memref::DimOp::create(b, loc, args.q, 2);
  nk = memref::DimOp::create(b, loc, args.k, 2);
  q0 = mul(qTile, cIdx(cfg.blockQ));
  Value qRows = arith::MinSIOp::create(b, loc, cIdx(cfg.blockQ),
                                       arith::SubIOp::create(b, loc, nq, q0));
  diag = causal == CausalKind::bottom_right
             ? Value(arith::SubIOp::create(b, loc, nk, nq))
             : cIdx(0);
  Value zero = cIdx(0);
  kvEnd = nk;
  if (args.kvLens) {
    Value len = memref::LoadOp::create(b, loc, args.kvLens, ValueRange{batch});
    Value lenIdx = arith::IndexCastOp::create(b, loc, b.getIndexType(), len);
    kvEnd = arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, lenIdx, zero), kvEnd);
  }
  if (causal != CausalKind::none) {
    // Causally excluded tiles are never visited.
    Value end = add(add(q0, qRows), diag);
    kvEnd = arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, end, zero), kvEnd);
  }
  numKV = arith::CeilDivUIOp::create(b, loc, kvEnd, cIdx(cfg.blockKV));

  // Workgroup memory: one dynamic buffer, three views.
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto dynType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                 MemRefLayoutAttrInterface(), wg);
  Value smem = gpu::DynamicSharedMemoryOp::create(b, loc, dynType);
  auto qsType = MemRefType::get({cfg.blockQ, cfg.headDim + 8}, elt,
                                MemRefLayoutAttrInterface(), wg);
  auto ksType = MemRefType::get({cfg.stages, cfg.blockKV, cfg.headDim + 8}, elt,
                                MemRefLayoutAttrInterface(), wg);
  auto vsType = MemRefType::get({cfg.stages, cfg.blockKV, cfg.valueDim + 8},
                                elt, MemRefLayoutAttrInterface(), wg);
  int64_t qBytes = cfg.blockQ * (cfg.headDim + 8) * 2;
  int64_t kBytes = cfg.stages * cfg.blockKV * (cfg.headDim + 8) * 2;
  qs = memref::ViewOp::create(b, loc, qsType, smem, cIdx(0), ValueRange{});
  ks = memref::ViewOp::create(b, loc, ksType, smem, cIdx(qBytes), ValueRange{});
  vs = memref::ViewOp::create(b, loc, vsType, smem, cIdx(qBytes + kBytes),
                              ValueRange{});

  // State: O fragments, m, l for the two rows of the lane.
  int64_t nDT = cfg.valueDim / 8;
  SmallVector<Value> init(
      nDT, arith::ConstantOp::create(b, loc, b.getZeroAttr(accType)));
  Value ninf = cF32(-std::numeric_limits<float>::infinity());
  Value zeroF = cF32(0.0f);
  init.append({ninf, ninf, zeroF, zeroF});
  SmallVector<Type> stateTypes = llvm::to_vector(
      llvm::map_range(init, [](Value v) { return v.getType(); }));

  Value any = cmp(arith::CmpIPredicate::sgt, numKV, zero);
  auto work = scf::IfOp::create(b, loc, stateTypes, any, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&work.getElseRegion().front());
    scf::YieldOp::create(b, loc, init);

    b.setInsertionPointToStart(&work.getThenRegion().front());
    // Prologue: Q with K/V tile 0 as one group, then tiles 1 .. stages - 2.
    SmallVector<Value> qTokens;
    copyTile(args.q, head, q0, nq, cfg.blockQ, cfg.headDim, qs, ValueRange{},
             qTokens);
    Value first = copyKVTile(cIdx(0), cIdx(0), qTokens);
    for (int64_t st = 1; st < cfg.stages - 1; ++st)
      copyKVTile(cIdx(st), cIdx(st));

    auto loop = scf::ForOp::create(
        b, loc, zero, numKV, cIdx(1), init,
        [&](OpBuilder &lb, Location, Value j, ValueRange state) {
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPoint(lb.getInsertionBlock(), lb.getInsertionPoint());
          // Tile j has landed (this thread's copies), then every thread's
          // copies are visible and every warp is done with tile j - 1,
          // whose slot the next copy overwrites.
          nvgpu::DeviceAsyncWaitOp::create(b, loc, first,
                                           b.getI32IntegerAttr(cfg.stages - 2));
          gpu::BarrierOp::create(b, loc);
          Value ahead = addC(j, cfg.stages - 1);
          copyKVTile(ahead,
                     arith::RemUIOp::create(b, loc, ahead, cIdx(cfg.stages)));
          SmallVector<Value> next = tileUpdate(j, state);
          scf::YieldOp::create(b, loc, next);
        });
    // Drain the (zero-filling) copies still in flight.
    nvgpu::DeviceAsyncWaitOp::create(b, loc, first, b.getI32IntegerAttr(0));
    scf::YieldOp::create(b, loc, loop.getResults());
  }
  epilogue(work.getResults());
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FAMapToTensorCoresPass final
    : fa::impl::FAMapToTensorCoresPassBase<FAMapToTensorCoresPass> {
  using Base::Base;
  void runOnOperation() override;
  LogicalResult mapFunction(func::FuncOp func, AttentionOp op,
                            const KernelOperands &args);
};
} // namespace

LogicalResult FAMapToTensorCoresPass::mapFunction(func::FuncOp func,
                                                  AttentionOp op,
                                                  const KernelOperands &args) {
  MLIRContext *ctx = &getContext();
  ModuleOp module = getOperation();
  Location loc = func.getLoc();
  std::string error;
  FailureOr<TensorCoreConfig> cfg =
      chooseTensorCoreConfig(op, blockQ, blockKV, stages, error);
  if (failed(cfg))
    return op.emitError() << "fa-map-to-tensor-cores: " << error;

  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(ctx));
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto gpuModule =
      gpu::GPUModuleOp::create(mb, loc, (func.getName() + "_kernels").str());
  OpBuilder gb = OpBuilder::atBlockBegin(gpuModule.getBody());
  auto kernel =
      gpu::GPUFuncOp::create(gb, loc, func.getName(), func.getFunctionType());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(
      ctx, {static_cast<int32_t>(cfg->numThreads()), 1, 1}));

  // The kernel's parameters are the function's arguments, in order.
  Block &entry = kernel.getBody().front();
  auto remap = [&](Value v) -> Value {
    if (!v)
      return v;
    return entry.getArgument(cast<BlockArgument>(v).getArgNumber());
  };
  KernelOperands kargs{remap(args.q),      remap(args.k),    remap(args.v),
                       remap(args.kvLens), remap(args.mask), remap(args.o),
                       remap(args.lse)};
  TensorCoreKernelBuilder(op, *cfg).build(kernel, kargs);

  int64_t numHeads =
      cast<RankedTensorType>(op.getQuery().getType()).getDimSize(1);

  // Host side: replace the body by the launch.
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  SmallVector<Operation *> toErase;
  for (Operation &o : llvm::reverse(body.without_terminator()))
    toErase.push_back(&o);
  for (Operation *o : toErase)
    o->erase();
  OpBuilder hb(ret);
  Value nq = memref::DimOp::create(hb, loc, args.q, 2);
  Value batches = memref::DimOp::create(hb, loc, args.q, 0);
  Value tiles = arith::CeilDivUIOp::create(
      hb, loc, nq, arith::ConstantIndexOp::create(hb, loc, cfg->blockQ));
  Value heads = arith::ConstantIndexOp::create(hb, loc, numHeads);
  Value one = arith::ConstantIndexOp::create(hb, loc, 1);
  Value threads = arith::ConstantIndexOp::create(hb, loc, cfg->numThreads());
  Value smemBytes =
      arith::ConstantIntOp::create(hb, loc, cfg->sharedBytes(), 32);
  gpu::LaunchFuncOp::create(hb, loc, kernel,
                            gpu::KernelDim3{tiles, heads, batches},
                            gpu::KernelDim3{threads, one, one}, smemBytes,
                            ValueRange(func.getArguments()));

  auto idx = [&](int64_t v) {
    return IntegerAttr::get(IndexType::get(ctx), v);
  };
  func->setAttr(
      kConfigAttrName,
      DictionaryAttr::get(
          ctx,
          {NamedAttribute(StringAttr::get(ctx, "block_q"), idx(cfg->blockQ)),
           NamedAttribute(StringAttr::get(ctx, "block_kv"), idx(cfg->blockKV)),
           NamedAttribute(StringAttr::get(ctx, "threads"),
                          idx(cfg->numThreads())),
           NamedAttribute(StringAttr::get(ctx, "stages"), idx(cfg->stages)),
           NamedAttribute(StringAttr::get(ctx, "dynamic_shared_bytes"),
                          idx(cfg->sharedBytes())),
           NamedAttribute(StringAttr::get(ctx, "tensor_cores"),
                          UnitAttr::get(ctx))}));
  return success();
}

void FAMapToTensorCoresPass::runOnOperation() {
  SmallVector<std::tuple<func::FuncOp, AttentionOp, KernelOperands>> work;
  for (auto func : getOperation().getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.getBody().hasOneBlock())
      continue;
    SmallVector<AttentionOp> ops;
    func.walk([&](AttentionOp op) { ops.push_back(op); });
    // Anything but one eligible op in the kernel form is left to the SIMT
    // path (fa-promote-shared reports what it cannot handle).
    if (ops.size() != 1 || !isTensorCoreEligible(ops.front()))
      continue;
    FailureOr<KernelOperands> args = matchKernelForm(ops.front());
    if (failed(args))
      continue;
    auto isArg = [&](Value v) {
      auto arg = dyn_cast_or_null<BlockArgument>(v);
      return !v || (arg && arg.getOwner() == &func.getBody().front());
    };
    if (!isArg(args->q) || !isArg(args->k) || !isArg(args->v) ||
        !isArg(args->kvLens) || !isArg(args->mask) || !isArg(args->o) ||
        !isArg(args->lse))
      continue;
    // Boolean masks as i1 or i8 (0 = masked), additive ones as f16, bf16
    // or f32.
    if (args->mask) {
      Type m = cast<MemRefType>(args->mask.getType()).getElementType();
      if (!(m.isInteger(1) || m.isInteger(8) || m.isF16() || m.isBF16() ||
            m.isF32()))
        continue;
    }
    work.push_back({func, ops.front(), *args});
  }
  for (auto &[func, op, args] : work)
    if (failed(mapFunction(func, op, args)))
      return signalPassFailure();
}
