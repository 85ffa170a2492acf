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
//  * NaN/inf in the V rows of masked keys kept out of the rows that do not
//    attend them (the mma computes 0 * NaN = NaN): the tiles that apply a
//    causal or user mask first test their V tile for non-finite values (a
//    block-uniform flag: 16-byte reads of workgroup memory, 3 shuffles, one
//    barrier, per-warp flags in Q's row padding, so no extra shared memory);
//    only when it is set does the block take a slow path: each
//    lane adds the non-finite V elements, key by key, to its rows that
//    attend the key, then the block zeroes them in workgroup memory before
//    the (unchanged) P V. Keys at or past kv_end are zero-filled by the
//    copies and need no guard;
//  * O and LSE stored from the fragments, rows past Nq skipped.
//
// Ineligible ops are left alone for fa-promote-shared / fa-map-to-gpu.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "GpuKernelCommon.h"

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
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAMAPTOTENSORCORESPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

//===----------------------------------------------------------------------===//
// Eligibility and configuration
//===----------------------------------------------------------------------===//

bool gpukernel::isTensorCoreEligible(AttentionOp op) {
  return isEligible(KernelFamily::Mma, op);
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
  c.headDim = op.getHeadDim();
  c.valueDim = op.getValueHeadDim();
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
class TensorCoreKernelBuilder : public AttentionKernelBuilder {
public:
  TensorCoreKernelBuilder(AttentionOp op, const TensorCoreConfig &cfg,
                          bool packHeads)
      : AttentionKernelBuilder(op,
                               {cfg.blockQ, cfg.blockKV, cfg.stages,
                                cfg.headDim, cfg.valueDim, cfg.numThreads()}),
        cfg(cfg) {
    packed = packHeads;
  }

  /// Emits the kernel into the entry block of `kernel`, whose arguments are
  /// the kernel function's memrefs; `a` names them.
  void build(gpu::GPUFuncOp kernel, const KernelOperands &a);

private:
  /// vector<2x2xf32> with rows (r0, r0) and (r1, r1).
  Value rowsToFragment(Value r0, Value r1) {
    return vector::FromElementsOp::create(b, loc, accType,
                                          ValueRange{r0, r0, r1, r1});
  }
  /// Rows [first, first + 1] of a vector<4x2xT> ldmatrix result.
  Value halfOf(Value x4, int64_t first) {
    return vector::ShuffleOp::create(b, loc, x4, x4,
                                     ArrayRef<int64_t>{first, first + 1});
  }
  /// exp2 as the NVVM intrinsic ex2.approx.f32 (no libdevice needed), on
  /// an f32 or elementwise on a vector<2x2xf32>.
  Value exp2(Value x) {
    if (!isa<VectorType>(x.getType()))
      return ex2(x);
    SmallVector<Value> elems;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 2; ++c)
        elems.push_back(
            ex2(vector::ExtractOp::create(b, loc, x, ArrayRef<int64_t>{r, c})));
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

  /// Copies into `dst[prefix..., r, c]`; a null `srcHead` reads packed
  /// query heads (each row unpacked into its head and query).
  void copyTile(Value src, Value srcHead, Value row0, Value rowEnd,
                int64_t rows, int64_t width, Value dst, ValueRange prefix,
                SmallVectorImpl<Value> &tokens) override;
  SmallVector<Value>
  mapScores(ArrayRef<Value> x, Value k0,
            function_ref<Value(Value, Value, int64_t)> fn) override;
  SmallVector<Value> tileUpdate(Value j, ValueRange state,
                                Value /*fromBarrier*/) override;
  /// Calls `fn` with the row, the column and the bits (vector<8xi16>) of
  /// each 16-byte chunk of the V tile in `slot` this thread copied.
  void forEachVChunk(Value slot, function_ref<void(Value, Value, Value)> fn);
  /// A vector<8xi16> splat of `v`.
  Value splatBits(int64_t v);
  /// Whether the V tile in `slot` holds a NaN or inf, the same i1 in every
  /// thread of the block. Holds a barrier: emit it under a block-uniform
  /// condition only.
  Value vTileHasNonFinite(Value slot);
  /// Sets the NaN and inf elements of the V tile in `slot` to 0 (each
  /// thread the 16-byte chunks it copied).
  void zeroNonFiniteV(Value slot);
  /// The keys each of the lane's two rows attends (masked scores `x` other
  /// than -inf), as 32-key i32 words: row 0's words, then row 1's.
  SmallVector<Value> attendedKeys(ArrayRef<Value> x);
  /// `o` plus the NaN and inf elements of the V tile in `slot`, each added
  /// to the rows that attend its key (`words` from attendedKeys).
  SmallVector<Value> addNonFiniteV(ArrayRef<Value> words, ArrayRef<Value> o,
                                   Value slot);
  /// O, LSE stores.
  void epilogue(ValueRange state);

  TensorCoreConfig cfg;
  VectorType accType, fragA;
  // Per-lane ldmatrix coordinates.
  Value lane16, lane8, laneHi16, laneBit8;
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
  for (int64_t it = 0; it < perThread; ++it) {
    Value i = addC(tid, it * cfg.numThreads());
    Value r = arith::DivUIOp::create(b, loc, i, cIdx(chunksPerRow));
    Value c = mul(arith::RemUIOp::create(b, loc, i, cIdx(chunksPerRow)), eight);
    auto [rowC, nsrc] = clampCopyRow(row0, r, rowEnd, last, eight, zero);
    SmallVector<Value> dstIdx(prefix.begin(), prefix.end());
    dstIdx.push_back(r);
    dstIdx.push_back(c);
    Value head = srcHead;
    if (!head) {
      // Packed query heads: the row is query rowC / G of its own head.
      AttentionSemantics::PackedRow pr =
          AttentionSemantics::unpackGqaRow(b, loc, rowC, kvHead, group);
      rowC = pr.query;
      head = pr.head;
    }
    tokens.push_back(copyChunk(dst, dstIdx, src, head, rowC, c, nsrc));
  }
}

SmallVector<Value> TensorCoreKernelBuilder::mapScores(
    ArrayRef<Value> x, Value k0,
    function_ref<Value(Value, Value, int64_t)> fn) {
  SmallVector<Value> out;
  Value keyBase = add(k0, laneQuad2);
  for (int64_t nt = 0, e = x.size(); nt < e; ++nt) {
    SmallVector<Value> elems;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 2; ++c) {
        Value key = addC(keyBase, nt * 8 + c);
        Value v =
            vector::ExtractOp::create(b, loc, x[nt], ArrayRef<int64_t>{r, c});
        elems.push_back(fn(v, key, r));
      }
    out.push_back(vector::FromElementsOp::create(b, loc, accType, elems));
  }
  return out;
}

SmallVector<Value>
TensorCoreKernelBuilder::tileUpdate(Value j, ValueRange state, Value) {
  int64_t nKT = cfg.blockKV / 8, nDT = cfg.valueDim / 8;
  ValueRange oFrag = state.take_front(nDT);
  Value mOld[2] = {state[nDT], state[nDT + 1]};
  Value lOld[2] = {state[nDT + 2], state[nDT + 3]};
  Value slot = arith::RemUIOp::create(b, loc, j, cIdx(cfg.stages));
  Value k0 = tileStart(j);

  // NaN/inf in V: only a tile that masks keys below kv_end for some row of
  // the block (a user mask or segments: every tile; causality: the tiles
  // crossing the diagonal of the block's first row; a window or a chunk:
  // the tiles they cut) can leak them, through 0 * NaN in the mma. Such a
  // tile tests its V tile once, block-uniformly; the others skip the test.
  Value vNonFinite;
  if (Value removes = tileMayRemoveKeys(k0)) {
    if (matchPattern(removes, m_One()))
      vNonFinite = vTileHasNonFinite(slot);
    else
      vNonFinite =
          ifElseFalse(removes, [&] { return vTileHasNonFinite(slot); });
  }

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
  x = maskScoresWhereNeeded(modifyScores(x, k0), k0);

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
    updateRowMax(rowMax, mOld[r], ninf, zeroF, mNew[r], mUse[r], alpha[r]);
  }
  // The attended keys of a tile with NaN/inf in V, taken before P so that
  // the masked scores are dead by P V. (A warp that skipped the masking
  // attends every key below kv_end; the V rows past it are 0.)
  SmallVector<Value> words;
  if (vNonFinite) {
    int64_t numWords = 2 * ((cfg.blockKV + 31) / 32);
    SmallVector<Type> types(numWords, b.getI32Type());
    auto ifOp =
        scf::IfOp::create(b, loc, types, vNonFinite, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, loc, attendedKeys(x));
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(
        b, loc,
        SmallVector<Value>(numWords,
                           arith::ConstantIntOp::create(b, loc, 0, 32)));
    words.assign(ifOp.getResults().begin(), ifOp.getResults().end());
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
  // P packed to the A operands first: the slow path below then holds them
  // instead of the wider f32 fragments.
  auto halfType = VectorType::get({2, 2}, elt);
  SmallVector<Value> pa;
  for (int64_t kstep = 0; kstep < cfg.blockKV / 16; ++kstep) {
    Value h0 = arith::TruncFOp::create(b, loc, halfType, p[2 * kstep]);
    Value h1 = arith::TruncFOp::create(b, loc, halfType, p[2 * kstep + 1]);
    pa.push_back(vector::ShuffleOp::create(b, loc, h0, h1,
                                           ArrayRef<int64_t>{0, 1, 2, 3}));
  }
  if (vNonFinite) {
    // NaN/inf in V (block-uniform): every lane adds them to its rows that
    // attend their keys, then the block zeroes them for the mma.
    SmallVector<Type> types(nDT, accType);
    auto ifOp =
        scf::IfOp::create(b, loc, types, vNonFinite, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<Value> added = addNonFiniteV(words, o, slot);
    gpu::BarrierOp::create(b, loc);
    zeroNonFiniteV(slot);
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, added);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, loc, o);
    b.setInsertionPointAfter(ifOp);
    o.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  }
  Value vRow = add(lane8, mul(laneBit8, cIdx(8)));
  Value vCol = mul(laneHi16, cIdx(8));
  for (int64_t kstep = 0; kstep < cfg.blockKV / 16; ++kstep) {
    for (int64_t dp = 0; dp < cfg.valueDim / 16; ++dp) {
      Value vb = ldmatrix(
          vs, ValueRange{slot, addC(vRow, kstep * 16), addC(vCol, dp * 16)},
          /*transpose=*/true);
      o[2 * dp] = mma(pa[kstep], halfOf(vb, 0), o[2 * dp]);
      o[2 * dp + 1] = mma(pa[kstep], halfOf(vb, 2), o[2 * dp + 1]);
    }
  }
  next.append(o.begin(), o.end());
  next.append({mNew[0], mNew[1], lNew[0], lNew[1]});
  return next;
}

void TensorCoreKernelBuilder::forEachVChunk(
    Value slot, function_ref<void(Value, Value, Value)> fn) {
  int64_t chunksPerRow = cfg.valueDim / 8;
  int64_t perThread = cfg.blockKV * chunksPerRow / cfg.numThreads();
  auto chunkType = VectorType::get({8}, elt);
  auto bitsType = VectorType::get({8}, b.getI16Type());
  for (int64_t it = 0; it < perThread; ++it) {
    Value i = addC(tid, it * cfg.numThreads());
    Value r = arith::DivUIOp::create(b, loc, i, cIdx(chunksPerRow));
    Value c =
        mul(arith::RemUIOp::create(b, loc, i, cIdx(chunksPerRow)), cIdx(8));
    Value chunk =
        vector::LoadOp::create(b, loc, chunkType, vs, ValueRange{slot, r, c});
    fn(r, c, arith::BitcastOp::create(b, loc, bitsType, chunk));
  }
}

Value TensorCoreKernelBuilder::splatBits(int64_t v) {
  Type i16 = b.getI16Type();
  return arith::ConstantOp::create(
      b, loc,
      SplatElementsAttr::get(VectorType::get({8}, i16),
                             b.getIntegerAttr(i16, v)));
}

Value TensorCoreKernelBuilder::vTileHasNonFinite(Value slot) {
  // Each thread tests the 16-byte chunks it copied: an element is NaN or
  // inf when its exponent bits are all set, i.e. when adding the lowest
  // exponent bit to its magnitude bits carries into the sign bit.
  Type i16 = b.getI16Type();
  Value magnitude = splatBits(0x7fff);
  Value lowestExp = splatBits(elt.isF16() ? 0x0400 : 0x0080);
  Value acc;
  forEachVChunk(slot, [&](Value, Value, Value bits) {
    Value t = arith::AddIOp::create(
        b, loc, arith::AndIOp::create(b, loc, bits, magnitude), lowestExp);
    acc = acc ? Value(arith::OrIOp::create(b, loc, acc, t)) : t;
  });
  Value any = vector::ReductionOp::create(
      b, loc, vector::CombiningKind::OR,
      arith::AndIOp::create(b, loc, acc, splatBits(0x8000)));
  Value mine = arith::ShRUIOp::create(
      b, loc, arith::ExtUIOp::create(b, loc, b.getI32Type(), any),
      arith::ConstantIntOp::create(b, loc, 15, 32));
  // OR over lanes l, l + 4, ..., l + 28, then over the warps through
  // workgroup memory: lane l < 4 of warp w writes its flag into the
  // (never read) row padding of Q, element [w, D + l]. The barrier at the
  // top of the next tile separates these reads from the next writes.
  for (int64_t offset = gpukernel::kWarpSize / 2; offset >= 4; offset /= 2)
    mine = arith::OrIOp::create(b, loc, mine, shuffleXor(mine, offset));
  Value flagElt = arith::SelectOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, mine,
                            arith::ConstantIntOp::create(b, loc, 0, 32)),
      arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, 1.0)),
      arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, 0.0)));
  Value writer = cmp(arith::CmpIPredicate::ult, lane, cIdx(4));
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, writer,
                                  /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    memref::StoreOp::create(b, loc, flagElt, qs,
                            ValueRange{warp, addC(lane, cfg.headDim)});
  }
  gpu::BarrierOp::create(b, loc);
  auto flagsType = VectorType::get({4}, elt);
  auto flagBitsType = VectorType::get({4}, i16);
  // Warp w + i reads warp (w + i) mod numWarps: no constant addresses in
  // the dynamic shared memory (ptxas warns of those as out of bounds).
  Value result;
  for (int64_t w = 0; w < cfg.numWarps(); ++w) {
    Value row = w == 0 ? warp
                       : Value(arith::RemUIOp::create(b, loc, addC(warp, w),
                                                      cIdx(cfg.numWarps())));
    Value f = vector::LoadOp::create(b, loc, flagsType, qs,
                                     ValueRange{row, cIdx(cfg.headDim)});
    Value bitsW = vector::ReductionOp::create(
        b, loc, vector::CombiningKind::OR,
        arith::BitcastOp::create(b, loc, flagBitsType, f));
    result = result ? Value(arith::OrIOp::create(b, loc, result, bitsW))
                    : bitsW;
  }
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, result,
                               arith::ConstantIntOp::create(b, loc, 0, 16));
}

void TensorCoreKernelBuilder::zeroNonFiniteV(Value slot) {
  auto chunkType = VectorType::get({8}, elt);
  Value magnitude = splatBits(0x7fff);
  Value infBits = splatBits(elt.isF16() ? 0x7c00 : 0x7f80);
  Value zero = splatBits(0);
  forEachVChunk(slot, [&](Value r, Value c, Value bits) {
    Value finite = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ult,
        arith::AndIOp::create(b, loc, bits, magnitude), infBits);
    Value kept = arith::SelectOp::create(b, loc, finite, bits, zero);
    vector::StoreOp::create(b, loc,
                            arith::BitcastOp::create(b, loc, chunkType, kept),
                            vs, ValueRange{slot, r, c});
  });
}

SmallVector<Value> TensorCoreKernelBuilder::attendedKeys(ArrayRef<Value> x) {
  // Each lane sets the bits of its fragment columns, the quad ORs them.
  Type i32 = b.getI32Type();
  int64_t nKT = cfg.blockKV / 8;
  int64_t numWords = (cfg.blockKV + 31) / 32;
  Value ninf = cF32(-std::numeric_limits<float>::infinity());
  Value zeroI = arith::ConstantIntOp::create(b, loc, 0, 32);
  Value oneI = arith::ConstantIntOp::create(b, loc, 1, 32);
  SmallVector<Value> all;
  for (int64_t r = 0; r < 2; ++r) {
    SmallVector<Value> words(numWords, zeroI);
    for (int64_t nt = 0; nt < nKT; ++nt)
      for (int64_t c = 0; c < 2; ++c) {
        Value s =
            vector::ExtractOp::create(b, loc, x[nt], ArrayRef<int64_t>{r, c});
        Value attends = arith::CmpFOp::create(
            b, loc, arith::CmpFPredicate::UNE, s, ninf);
        Value shift = arith::IndexCastOp::create(
            b, loc, i32, addC(laneQuad2, (nt % 4) * 8 + c));
        Value bit = arith::SelectOp::create(
            b, loc, attends, arith::ShLIOp::create(b, loc, oneI, shift),
            zeroI);
        words[nt / 4] = arith::OrIOp::create(b, loc, words[nt / 4], bit);
      }
    for (Value &w : words) {
      w = arith::OrIOp::create(b, loc, w, shuffleXor(w, 1));
      w = arith::OrIOp::create(b, loc, w, shuffleXor(w, 2));
      all.push_back(w);
    }
  }
  return all;
}

SmallVector<Value>
TensorCoreKernelBuilder::addNonFiniteV(ArrayRef<Value> allWords,
                                       ArrayRef<Value> oIn, Value slot) {
  Type i32 = b.getI32Type();
  int64_t nDT = cfg.valueDim / 8;
  int64_t numWords = (cfg.blockKV + 31) / 32;
  Value zeroI = arith::ConstantIntOp::create(b, loc, 0, 32);
  Value oneI = arith::ConstantIntOp::create(b, loc, 1, 32);
  ArrayRef<Value> words[2] = {allWords.take_front(numWords),
                              allWords.drop_front(numWords)};

  // One key at a time: its V elements of this lane's O columns, kept where
  // NaN or inf, added to the rows that attend the key.
  SmallVector<Value> o(oIn.begin(), oIn.end());
  auto pairType = VectorType::get({2}, elt);
  auto widePair = VectorType::get({2}, b.getF32Type());
  auto bitsPair = VectorType::get({2}, b.getI16Type());
  for (int64_t w = 0; w < numWords; ++w) {
    int64_t keys = std::min<int64_t>(32, cfg.blockKV - 32 * w);
    auto loop = scf::ForOp::create(
        b, loc, cIdx(0), cIdx(keys), cIdx(1), o,
        [&](OpBuilder &lb, Location, Value kk, ValueRange acc) {
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPoint(lb.getInsertionBlock(), lb.getInsertionPoint());
          Value sh = arith::IndexCastOp::create(b, loc, i32, kk);
          Value att[2];
          for (int64_t r = 0; r < 2; ++r)
            att[r] = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::ne,
                arith::AndIOp::create(
                    b, loc, arith::ShRUIOp::create(b, loc, words[r][w], sh),
                    oneI),
                zeroI);
          Value row = addC(kk, 32 * w);
          // Integer tests only (math.absf would become a libdevice call).
          Value magnitude = arith::ConstantOp::create(
              b, loc, SplatElementsAttr::get(bitsPair, b.getI16IntegerAttr(
                                                            0x7fff)));
          Value infBits = arith::ConstantOp::create(
              b, loc,
              SplatElementsAttr::get(bitsPair, b.getI16IntegerAttr(
                                                   elt.isF16() ? 0x7c00
                                                               : 0x7f80)));
          Value zero2 =
              arith::ConstantOp::create(b, loc, b.getZeroAttr(widePair));
          Value zeroF = cF32(0.0f);
          SmallVector<Value> next;
          for (int64_t dt = 0; dt < nDT; ++dt) {
            Value v = vector::LoadOp::create(
                b, loc, pairType, vs,
                ValueRange{slot, row, addC(laneQuad2, dt * 8)});
            Value wide = arith::ExtFOp::create(b, loc, widePair, v);
            Value finite = arith::CmpIOp::create(
                b, loc, arith::CmpIPredicate::ult,
                arith::AndIOp::create(
                    b, loc, arith::BitcastOp::create(b, loc, bitsPair, v),
                    magnitude),
                infBits);
            Value bad = arith::SelectOp::create(b, loc, finite, zero2, wide);
            SmallVector<Value> elems;
            for (int64_t r = 0; r < 2; ++r)
              for (int64_t c = 0; c < 2; ++c)
                elems.push_back(arith::SelectOp::create(
                    b, loc, att[r],
                    vector::ExtractOp::create(b, loc, bad, ArrayRef<int64_t>{c}),
                    zeroF));
            next.push_back(arith::AddFOp::create(
                b, loc, acc[dt],
                vector::FromElementsOp::create(b, loc, accType, elems)));
          }
          scf::YieldOp::create(b, loc, next);
        });
    o.assign(loop.getResults().begin(), loop.getResults().end());
  }
  return o;
}

void TensorCoreKernelBuilder::epilogue(ValueRange state) {
  int64_t nDT = cfg.valueDim / 8;
  ValueRange oFrag = state.take_front(nDT);
  Value m[2] = {state[nDT], state[nDT + 1]};
  Value l[2] = {state[nDT + 2], state[nDT + 3]};
  Value empty[2], inv[2];
  reduceRowSums(l, empty, inv);
  Value invV = rowsToFragment(inv[0], inv[1]);
  // A split-KV partial stays in f32 until the merge.
  Type stored = storedOutputType();
  auto outType = VectorType::get({2, 2}, stored);
  SmallVector<Value> o;
  for (Value v : oFrag) {
    Value scaled = arith::MulFOp::create(b, loc, v, invV);
    if (!stored.isF32())
      scaled = arith::TruncFOp::create(b, loc, outType, scaled);
    o.push_back(scaled);
  }
  Value quadLead = cmp(arith::CmpIPredicate::eq,
                       arith::RemUIOp::create(b, loc, lane, cIdx(4)), cIdx(0));
  for (int64_t r = 0; r < 2; ++r) {
    OutputRow row = beginOutputRow(r, m[r], l[r], empty[r]);
    storeOutputRow(row, quadLead, [&] {
      for (int64_t dt = 0; dt < nDT; ++dt) {
        Value pair =
            vector::ExtractOp::create(b, loc, o[dt], ArrayRef<int64_t>{r});
        vector::StoreOp::create(
            b, loc, pair, outputBuffer(),
            outputIndex(row, addC(laneQuad2, dt * 8)));
      }
    });
  }
}

void TensorCoreKernelBuilder::build(gpu::GPUFuncOp kernel,
                                    const KernelOperands &a) {
  args = a;
  accType = VectorType::get({2, 2}, b.getF32Type());
  fragA = VectorType::get({4, 2}, elt);
  Block &entry = kernel.getBody().front();
  // After a constant q_offset outlineKernel may have cloned there.
  b.setInsertionPointToEnd(&entry);

  emitThreadIds();
  Value qTile = emitBlockIds();
  lane16 = arith::RemUIOp::create(b, loc, lane, cIdx(16));
  lane8 = arith::RemUIOp::create(b, loc, lane, cIdx(8));
  laneHi16 = arith::DivUIOp::create(b, loc, lane, cIdx(16));
  laneBit8 = arith::RemUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, lane, cIdx(8)), cIdx(2));
  warpRow0 = mul(warp, cIdx(16));
  emitKeyRange(qTile);

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
  epilogue(emitMainLoop(init));
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
                            KernelOperands args);
};
} // namespace

LogicalResult FAMapToTensorCoresPass::mapFunction(func::FuncOp func,
                                                  AttentionOp op,
                                                  KernelOperands args) {
  std::string error;
  FailureOr<TensorCoreConfig> cfg =
      chooseTensorCoreConfig(op, blockQ, blockKV, stages, error);
  if (failed(cfg))
    return op.emitError() << "fa-map-to-tensor-cores: " << error;
  if (!isPackGqaMode(packGqa))
    return op.emitError() << "fa-map-to-tensor-cores: pack-gqa must be "
                              "auto, always or never, got '"
                           << packGqa << "'";
  bool packed = shouldPackGqa(op, packGqa, cfg->blockQ);
  if (packed && op.isVarlen()) {
    if (packGqa == "always")
      return op.emitError() << "fa-map-to-tensor-cores: pack-gqa does not "
                               "apply to variable-length batches "
                               "(cu_seqlens) yet";
    packed = false;
  }
  KernelLaunch launch{cfg->blockQ,
                      cfg->numThreads(),
                      cfg->sharedBytes(),
                      {{"block_q", cfg->blockQ},
                       {"block_kv", cfg->blockKV},
                       {"threads", cfg->numThreads()},
                       {"stages", cfg->stages},
                       {"dynamic_shared_bytes", cfg->sharedBytes()}},
                      "tensor_cores",
                      splitKv,
                      packed};
  std::string tiles = llvm::formatv("D = {0}, Dv = {1}, block-q = {2}, "
                                    "block-kv = {3}, stages = {4}",
                                    cfg->headDim, cfg->valueDim, cfg->blockQ,
                                    cfg->blockKV, cfg->stages)
                          .str();
  if (failed(checkSharedMemoryFits(op, getArgument(), chip, launch, tiles)))
    return failure();
  if (splitKv && failed(addSplitWorkspace(op, getArgument(), func, args)))
    return failure();
  outlineKernel(getOperation(), func, op, args, launch,
                [&](gpu::GPUFuncOp kernel, const KernelOperands &kargs) {
                  TensorCoreKernelBuilder(op, *cfg, packed).build(kernel,
                                                                  kargs);
                });
  return success();
}

void FAMapToTensorCoresPass::runOnOperation() {
  for (auto &[func, op, args] :
       collectKernelCandidates(getOperation(), isTensorCoreEligible))
    if (failed(verifyKernelResultUses(op, getArgument())) ||
        failed(mapFunction(func, op, args)))
      return signalPassFailure();
}
