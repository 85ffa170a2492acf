//===- WgmmaAttention.cpp - FA3-style kernels on sm_90a wgmma -------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Turns an eligible kernel function (f16/bf16 fa.attention, head dims
// multiples of 64 up to 256, Dv up to 192 with a user mask) directly into a
// gpu.module kernel for Hopper (sm_90a) warpgroup tensor cores, in the
// FlashAttention-3 structure:
//
//  * block = `warpgroups` x 128 threads; warpgroup g owns the 64 query rows
//    64 g ..., warp w (of the block) the 16 rows 16 w ...;
//  * Q, `stages` K and V tiles and one P tile per warpgroup in one dynamic
//    workgroup buffer whose base is aligned to 1024 bytes at run time
//    (memref.extract_aligned_pointer_as_index; 1024 bytes extra are
//    requested), all in the 128-byte-swizzled layout wgmma reads: a tile is
//    split into 64-column regions, a region row is 128 bytes, 8 rows form a
//    1024-byte atom, and the 16-byte chunk c of row r sits at chunk
//    c ^ (r % 8);
//  * cp.async (nvgpu.device_async_copy) of 16-byte chunks straight into
//    the swizzled positions, rows past the sequence ends zero-filled, a
//    `stages`-deep pipeline as in fa-map-to-tensor-cores, then
//    fence.proxy.async.shared::cta before the barrier so that the copies are
//    visible to the tensor cores (the async proxy);
//  * S = Q K^T as nvvm.wgmma.mma_async m64n<block_kv>k16 (both operands
//    K-major through shared-memory descriptors built with arith), f32
//    accumulators in an !llvm.struct;
//  * the online softmax on the struct elements (thread t of a warpgroup
//    holds rows 16 (t / 32) + (t % 32) / 4 and + 8 of its 64): row max with
//    gpu.shuffle xor 1, 2, per-thread row sums reduced after the loop, exp2
//    (ex2.approx) with log2(e) folded into the scale, the m = -inf guard,
//    masks only on the tiles that need them;
//  * P rounded to f16/bf16 and written by each thread into its warpgroup's
//    swizzled K-major P tile, fence.proxy, barrier, then
//    O = alpha O + P V as wgmma m64n<Dv>k16 (V MN-major: layoutB = row);
//  * NaN/inf in the V rows of keys that a row does not attend kept out of
//    that row (the wgmma computes 0 * NaN = NaN): the tiles that apply a
//    causal or user mask to keys below kv_end test the V elements each
//    thread copied (a block-uniform flag through a few bytes of workgroup
//    memory, published before the tile's barrier); only when it is set do
//    the threads add the non-finite V elements, per key, to the O elements
//    of the rows that attend that key, then zero them in the tile (fence,
//    barrier) before the P V wgmma. Keys at or past kv_end are zero-filled
//    by the copies and need no guard;
//  * O / l, LSE and the stores from the struct, rows past Nq skipped.
//
// Ineligible ops are left alone (fa-map-to-tensor-cores or the SIMT path
// take them).
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
#define GEN_PASS_DEF_FAMAPTOWGMMAPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

//===----------------------------------------------------------------------===//
// Eligibility and configuration
//===----------------------------------------------------------------------===//

namespace {

/// Threads of one warpgroup.
constexpr int64_t kWarpgroupSize = 128;
/// Query rows of one warpgroup (the M of wgmma).
constexpr int64_t kWarpgroupRows = 64;
/// Elements of one swizzled region row (128 bytes of 16-bit elements).
constexpr int64_t kRegionCols = 64;
/// Bytes of one region row and of one 8-row swizzle atom.
constexpr int64_t kRowBytes = 128;
constexpr int64_t kAtomBytes = 1024;

/// Tile sizes of one wgmma kernel.
struct WgmmaConfig {
  int64_t warpgroups = 1, blockKV = 64, stages = 2;
  int64_t headDim = 0, valueDim = 0;
  /// Whether masks exclude keys below kv_end (causality or a user mask):
  /// then NaN/inf in V must be kept out of the rows that do not attend them,
  /// which needs one i32 flag per warp in workgroup memory.
  bool guardNonFinite = false;

  int64_t blockQ() const { return warpgroups * kWarpgroupRows; }
  int64_t numThreads() const { return warpgroups * kWarpgroupSize; }
  int64_t qBytes() const { return blockQ() * headDim * 2; }
  int64_t kSlotBytes() const { return blockKV * headDim * 2; }
  int64_t vSlotBytes() const { return blockKV * valueDim * 2; }
  int64_t pBytes() const { return kWarpgroupRows * blockKV * 2; }
  /// Offsets of the tiles from the 1024-aligned base.
  int64_t kOffset() const { return qBytes(); }
  int64_t vOffset() const { return kOffset() + stages * kSlotBytes(); }
  int64_t pOffset() const { return vOffset() + stages * vSlotBytes(); }
  int64_t tileBytes() const { return pOffset() + warpgroups * pBytes(); }
  /// The non-finite flags of the warps (after the tiles).
  int64_t flagBytes() const { return guardNonFinite ? 32 : 0; }
  /// The dynamic workgroup memory requested: the tiles, the flags and the
  /// slack of the run-time alignment to 1024 bytes.
  int64_t sharedBytes() const { return tileBytes() + flagBytes() + kAtomBytes; }
};

/// The widest value head dim taken with a user mask.
constexpr int64_t kMaxMaskedValueDim = 192;

bool isWgmmaEligible(AttentionOp op) {
  if (!isEligible(KernelFamily::Wgmma, op))
    return false;
  // A user mask next to the 128 f32 of a Dv = 256 accumulator exceeds the
  // 255 registers of a thread (ptxas spills): such kernels are left to
  // fa-map-to-tensor-cores.
  return !(op.getMask() && op.getValueHeadDim() > kMaxMaskedValueDim);
}

FailureOr<WgmmaConfig> chooseWgmmaConfig(AttentionOp op, int64_t warpgroups,
                                         int64_t blockKV, int64_t stages,
                                         std::string &error) {
  WgmmaConfig c;
  c.headDim = op.getHeadDim();
  c.valueDim = op.getValueHeadDim();
  c.warpgroups = warpgroups;
  c.blockKV = blockKV;
  c.stages = stages;
  c.guardNonFinite = AttentionSemantics::get(op).removesKeysInsideRange();
  if (c.warpgroups != 1 && c.warpgroups != 2) {
    error = "warpgroups must be 1 or 2, got " + std::to_string(c.warpgroups);
    return failure();
  }
  if (c.blockKV != 64 && c.blockKV != 128) {
    error = "block-kv must be 64 or 128, got " + std::to_string(c.blockKV);
    return failure();
  }
  if (c.stages < 2 || c.stages > 4) {
    error = "stages must be 2, 3 or 4, got " + std::to_string(c.stages);
    return failure();
  }
  return c;
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

/// Emits the wgmma kernel body of one kernel function.
class WgmmaKernelBuilder : public AttentionKernelBuilder {
public:
  WgmmaKernelBuilder(AttentionOp op, const WgmmaConfig &cfg)
      : AttentionKernelBuilder(op,
                               {cfg.blockQ(), cfg.blockKV, cfg.stages,
                                cfg.headDim, cfg.valueDim, cfg.numThreads()}),
        cfg(cfg) {}

  /// Emits the kernel into the entry block of `kernel`, whose arguments are
  /// the kernel function's memrefs; `a` names them.
  void build(gpu::GPUFuncOp kernel, const KernelOperands &a);

private:
  // Small helpers.
  Value cI64(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 64); }
  Value extract(Value s, int64_t i) {
    return LLVM::ExtractValueOp::create(b, loc, s, ArrayRef<int64_t>{i});
  }
  Value insert(Value s, Value v, int64_t i) {
    return LLVM::InsertValueOp::create(b, loc, s, v, ArrayRef<int64_t>{i});
  }
  /// An !llvm.struct of `n` f32 (a wgmma accumulator of n / 2 columns).
  LLVM::LLVMStructType accStructType(int64_t columns) {
    SmallVector<Type> fields(columns / 2, b.getF32Type());
    return LLVM::LLVMStructType::getLiteral(ctx, fields);
  }

  /// The wgmma shared-memory descriptor of a 128-byte-swizzled operand at
  /// the shared address `addr` (index) with the given byte offsets.
  Value descriptor(Value addr, int64_t lbo, int64_t sbo);
  /// One wgmma m64nNk16 with f32 accumulation.
  Value wgmma(Value descA, Value descB, Value acc, int64_t n, bool accumulate,
              NVVM::MMALayout layoutB);
  void fenceProxy() {
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  }

  /// Chunk `it` of a thread in a 64-column region (8 chunks of 16 bytes
  /// per region row): its row `r`, its chunk `chunk` in the row and the
  /// chunk `swz` it is stored at (128-byte swizzle: chunk ^ (r % 8)).
  void swizzledChunk(int64_t it, Value &r, Value &chunk, Value &swz);
  /// Copies into the swizzled tile `dst[prefix..., region, r, c]`.
  void copyTile(Value src, Value srcHead, Value row0, Value rowEnd,
                int64_t rows, int64_t width, Value dst, ValueRange prefix,
                SmallVectorImpl<Value> &tokens) override;
  /// The scores `x` are in accumulator order.
  SmallVector<Value>
  mapScores(ArrayRef<Value> x, Value k0,
            function_ref<Value(Value, Value, int64_t)> fn) override;
  /// Publishes the non-finite flags of the tiles that need them; returns
  /// the `check` of tileUpdate.
  Value beforeTileBarrier(Value j) override;
  /// `check` (block-uniform, null when the kernel has no such tiles):
  /// whether the tile's V may leak NaN/inf into rows that do not attend
  /// them.
  SmallVector<Value> tileUpdate(Value j, ValueRange state,
                                Value check) override;

  /// The indices (into `vs`) of the 16-byte chunks of the V tile in `slot`
  /// this thread copies.
  SmallVector<SmallVector<Value>> vChunks(Value slot);
  /// Per element of `chunk` (vector<8 x elt>): NaN or inf (exponent bits all
  /// set: adding the lowest exponent bit to the magnitude carries into the
  /// sign bit).
  Value nonFiniteMask(Value chunk);
  /// Before the tile's barrier: lane 0 of each warp writes whether the V
  /// chunks its warp copied hold a NaN or inf.
  void publishNonFinite(Value slot);
  /// After the barrier: the OR of the warps' flags (block-uniform).
  Value readNonFinite();
  /// `o` plus, for every key of the tile whose V element is NaN or inf,
  /// that element in the O elements of the rows that attend the key.
  Value addNonFiniteV(Value o, Value slot, Value k0);
  /// Zeroes the NaN/inf elements of the V chunks this thread copied.
  void zeroNonFiniteV(Value slot);
  /// Whether row `row` (of the thread) attends key `key`.
  Value attends(Value row, Value key);
  /// O, LSE stores.
  void epilogue(ValueRange state);

  WgmmaConfig cfg;
  LLVM::LLVMStructType sType, oType;

  // Per-block values.
  Value wg, ps, flags;
  /// Shared addresses (index) of the tiles: Q, K slot 0, V slot 0, this
  /// warpgroup's P tile.
  Value qAddr, kAddr, vAddr, pAddr;
  // Per-lane fragment coordinates.
  Value warpInGroupRow0;
};

} // namespace

Value WgmmaKernelBuilder::descriptor(Value addr, int64_t lbo, int64_t sbo) {
  // bits 0-13: address >> 4; 16-29: LBO >> 4; 32-45: SBO >> 4; 62-63: 1
  // (128-byte swizzle).
  Value a = arith::IndexCastOp::create(b, loc, b.getI64Type(), addr);
  a = arith::ShRUIOp::create(b, loc, a, cI64(4));
  a = arith::AndIOp::create(b, loc, a, cI64(0x3FFF));
  int64_t fields = ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (int64_t(1) << 62);
  return arith::OrIOp::create(b, loc, a, cI64(fields));
}

Value WgmmaKernelBuilder::wgmma(Value descA, Value descB, Value acc, int64_t n,
                                bool accumulate, NVVM::MMALayout layoutB) {
  NVVM::WGMMATypes t =
      elt.isF16() ? NVVM::WGMMATypes::f16 : NVVM::WGMMATypes::bf16;
  return NVVM::WgmmaMmaAsyncOp::create(
      b, loc, acc.getType(), acc, descA, descB,
      NVVM::MMAShapeAttr::get(ctx, kWarpgroupRows, n, 16),
      NVVM::WGMMATypesAttr::get(ctx, t), NVVM::WGMMATypesAttr::get(ctx, t),
      NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
      NVVM::WGMMAScaleOutAttr::get(ctx, accumulate ? NVVM::WGMMAScaleOut::one
                                                   : NVVM::WGMMAScaleOut::zero),
      NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
      NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
      NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
      NVVM::MMALayoutAttr::get(ctx, layoutB),
      /*satfinite=*/NVVM::MMAIntOverflowAttr());
}

void WgmmaKernelBuilder::swizzledChunk(int64_t it, Value &r, Value &chunk,
                                       Value &swz) {
  Value i = addC(tid, it * cfg.numThreads());
  r = arith::ShRUIOp::create(b, loc, i, cIdx(3));
  chunk = arith::AndIOp::create(b, loc, i, cIdx(7));
  swz = arith::XOrIOp::create(b, loc, chunk,
                              arith::AndIOp::create(b, loc, r, cIdx(7)));
}

void WgmmaKernelBuilder::copyTile(Value src, Value srcHead, Value row0,
                                  Value rowEnd, int64_t rows, int64_t width,
                                  Value dst, ValueRange prefix,
                                  SmallVectorImpl<Value> &tokens) {
  // 8 chunks of 16 bytes per region row; every thread copies the same
  // number of chunks of each region.
  int64_t perThread = rows * 8 / cfg.numThreads();
  Value last = arith::SubIOp::create(b, loc, rowEnd, cIdx(1));
  Value eight = cIdx(8), zero = cIdx(0);
  for (int64_t region = 0; region < width / kRegionCols; ++region) {
    for (int64_t it = 0; it < perThread; ++it) {
      Value r, chunk, swz;
      swizzledChunk(it, r, chunk, swz);
      auto [rowC, nsrc] = clampCopyRow(row0, r, rowEnd, last, eight, zero);
      SmallVector<Value> dstIdx(prefix.begin(), prefix.end());
      dstIdx.append({cIdx(region), r, mul(swz, eight)});
      Value col = addC(mul(chunk, eight), region * kRegionCols);
      tokens.push_back(copyChunk(dst, dstIdx, src, srcHead, rowC, col, nsrc));
    }
  }
}

SmallVector<Value>
WgmmaKernelBuilder::mapScores(ArrayRef<Value> x, Value k0,
                              function_ref<Value(Value, Value, int64_t)> fn) {
  SmallVector<Value> out;
  Value keyBase = add(k0, laneQuad2);
  for (int64_t e = 0, n = x.size(); e < n; ++e) {
    // Element 4 i + 2 r + c: row lane/4 + 8 r, key 8 i + 2 (lane % 4) + c.
    int64_t i = e / 4, r = (e % 4) / 2, c = e % 2;
    Value key = addC(keyBase, i * 8 + c);
    out.push_back(fn(x[e], key, r));
  }
  return out;
}

SmallVector<SmallVector<Value>> WgmmaKernelBuilder::vChunks(Value slot) {
  // The chunks of copyTile for the V tile.
  SmallVector<SmallVector<Value>> chunks;
  int64_t perThread = cfg.blockKV * 8 / cfg.numThreads();
  for (int64_t region = 0; region < cfg.valueDim / kRegionCols; ++region) {
    for (int64_t it = 0; it < perThread; ++it) {
      Value r, chunk, swz;
      swizzledChunk(it, r, chunk, swz);
      chunks.push_back({slot, cIdx(region), r, mul(swz, cIdx(8))});
    }
  }
  return chunks;
}

Value WgmmaKernelBuilder::nonFiniteMask(Value chunk) {
  Type i16 = b.getI16Type();
  auto bitsType = VectorType::get({8}, i16);
  auto splat = [&](int64_t v) {
    return arith::ConstantOp::create(
        b, loc, SplatElementsAttr::get(bitsType, b.getIntegerAttr(i16, v)));
  };
  Value bits = arith::BitcastOp::create(b, loc, bitsType, chunk);
  Value t = arith::AddIOp::create(
      b, loc, arith::AndIOp::create(b, loc, bits, splat(0x7fff)),
      splat(elt.isF16() ? 0x0400 : 0x0080));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, t, splat(0));
}

void WgmmaKernelBuilder::publishNonFinite(Value slot) {
  auto chunkType = VectorType::get({8}, elt);
  Value any;
  for (auto &idx : vChunks(slot)) {
    Value chunk = vector::LoadOp::create(b, loc, chunkType, vs, idx);
    Value m = vector::ReductionOp::create(b, loc, vector::CombiningKind::OR,
                                          nonFiniteMask(chunk));
    any = any ? Value(arith::OrIOp::create(b, loc, any, m)) : m;
  }
  Value mine = arith::ExtUIOp::create(b, loc, b.getI32Type(), any);
  for (int64_t offset = 1; offset < gpukernel::kWarpSize; offset *= 2)
    mine = arith::OrIOp::create(b, loc, mine, shuffleXor(mine, offset));
  Value lead = cmp(arith::CmpIPredicate::eq, lane, cIdx(0));
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, lead, /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  memref::StoreOp::create(b, loc, mine, flags, ValueRange{warp});
}

Value WgmmaKernelBuilder::readNonFinite() {
  Value result;
  Value zero = arith::ConstantIntOp::create(b, loc, 0, 32);
  for (int64_t w = 0; w < cfg.numThreads() / gpukernel::kWarpSize; ++w) {
    Value f = memref::LoadOp::create(b, loc, flags, ValueRange{cIdx(w)});
    Value set =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, f, zero);
    result = result ? Value(arith::OrIOp::create(b, loc, result, set)) : set;
  }
  return result;
}

void WgmmaKernelBuilder::zeroNonFiniteV(Value slot) {
  auto chunkType = VectorType::get({8}, elt);
  Value zeros = arith::ConstantOp::create(b, loc, b.getZeroAttr(chunkType));
  for (auto &idx : vChunks(slot)) {
    Value chunk = vector::LoadOp::create(b, loc, chunkType, vs, idx);
    Value clean =
        arith::SelectOp::create(b, loc, nonFiniteMask(chunk), zeros, chunk);
    vector::StoreOp::create(b, loc, clean, vs, idx);
  }
}

Value WgmmaKernelBuilder::attends(Value row, Value key) {
  Value valid = sem.keepKey(b, loc, row, key, kvEnd, diag);
  sem.applyMaskMod(b, loc, {batch, head, row, key, nq, nk}, args.modOperands,
                   valid);
  if (!args.mask && !args.qSegments)
    return valid;
  Value mRow = arith::MinSIOp::create(
      b, loc, row, arith::SubIOp::create(b, loc, nq, cIdx(1)));
  Value mKey = arith::MinSIOp::create(
      b, loc, key, arith::SubIOp::create(b, loc, nk, cIdx(1)));
  if (args.qSegments) {
    Value qSeg = memref::LoadOp::create(b, loc, args.qSegments,
                                        ValueRange{batch, mRow});
    Value kSeg = memref::LoadOp::create(b, loc, args.kSegments,
                                        ValueRange{batch, mKey});
    sem.applySegments(b, loc, qSeg, kSeg, valid);
  }
  if (!args.mask)
    return valid;
  auto mType = cast<MemRefType>(args.mask.getType());
  Value mb = mType.getDimSize(0) == 1 ? cIdx(0) : batch;
  Value mh = mType.getDimSize(1) == 1 ? cIdx(0) : head;
  Value m =
      memref::LoadOp::create(b, loc, args.mask, ValueRange{mb, mh, mRow, mKey});
  return arith::AndIOp::create(b, loc, valid,
                               sem.maskElementKeeps(b, loc, m));
}

Value WgmmaKernelBuilder::addNonFiniteV(Value o, Value slot, Value k0) {
  auto loop = scf::ForOp::create(
      b, loc, cIdx(0), cIdx(cfg.blockKV), cIdx(1), ValueRange{o},
      [&](OpBuilder &lb, Location, Value kk, ValueRange iter) {
        OpBuilder::InsertionGuard inner(b);
        b.setInsertionPoint(lb.getInsertionBlock(), lb.getInsertionPoint());
        Value acc = iter[0];
        Value key = add(k0, kk);
        Value att[2];
        for (int64_t r = 0; r < 2; ++r)
          att[r] = attends(addC(add(add(q0, warpRow0), laneRow), 8 * r), key);
        Value zeroF = cF32(0.0f);
        Value rowSwizzle = arith::AndIOp::create(b, loc, kk, cIdx(7));
        auto pairType = VectorType::get({2}, elt);
        auto pairF32 = VectorType::get({2}, b.getF32Type());
        for (int64_t i = 0; i < cfg.valueDim / 8; ++i) {
          // Columns 8 i + 2 (lane % 4) + {0, 1}: chunk i % 8 of region i / 8,
          // swizzled with the key row.
          Value chunk = arith::XOrIOp::create(b, loc, cIdx(i % 8), rowSwizzle);
          Value col = add(mul(chunk, cIdx(8)), laneQuad2);
          Value pair = vector::LoadOp::create(
              b, loc, pairType, vs, ValueRange{slot, cIdx(i / 8), kk, col});
          Value wide = arith::ExtFOp::create(b, loc, pairF32, pair);
          for (int64_t c = 0; c < 2; ++c) {
            Value v =
                vector::ExtractOp::create(b, loc, wide, ArrayRef<int64_t>{c});
            // v - v is NaN exactly for NaN and inf.
            Value bad = arith::CmpFOp::create(
                b, loc, arith::CmpFPredicate::UNE,
                arith::SubFOp::create(b, loc, v, v), zeroF);
            for (int64_t r = 0; r < 2; ++r) {
              int64_t e = 4 * i + 2 * r + c;
              Value take = arith::AndIOp::create(b, loc, bad, att[r]);
              Value addend = arith::SelectOp::create(b, loc, take, v, zeroF);
              acc = insert(
                  acc, arith::AddFOp::create(b, loc, extract(acc, e), addend),
                  e);
            }
          }
        }
        scf::YieldOp::create(b, loc, acc);
      });
  return loop.getResult(0);
}

SmallVector<Value> WgmmaKernelBuilder::tileUpdate(Value j, ValueRange state,
                                                  Value check) {
  int64_t nS = cfg.blockKV / 2;
  Value oAcc = state[0];
  Value mOld[2] = {state[1], state[2]};
  Value lOld[2] = {state[3], state[4]};
  Value slot = arith::RemUIOp::create(b, loc, j, cIdx(cfg.stages));
  Value k0 = tileStart(j);

  // Whether the V tile holds NaN/inf that a masked row must not see, read
  // before the P barrier (which separates these reads from the next tile's
  // flag writes).
  Value nonFinite;
  if (check)
    nonFinite = ifElseFalse(check, [&] { return readNonFinite(); });

  // S = Q K^T: both operands K-major (rows of 64-column regions), one
  // wgmma per 16 columns of D; K steps advance the start by 32 bytes inside
  // a 128-byte row, regions by a whole region.
  Value kSlotAddr = add(kAddr, mul(slot, cIdx(cfg.kSlotBytes())));
  Value vSlotAddr = add(vAddr, mul(slot, cIdx(cfg.vSlotBytes())));
  Value qWgAddr = add(qAddr, mul(wg, cIdx(kWarpgroupRows * kRowBytes)));
  Value qDesc = descriptor(qWgAddr, 16, kAtomBytes);
  Value kDesc = descriptor(kSlotAddr, 16, kAtomBytes);
  auto stepDesc = [&](Value desc, int64_t bytes) -> Value {
    if (bytes == 0)
      return desc;
    return arith::AddIOp::create(b, loc, desc, cI64(bytes >> 4));
  };
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  Value s = LLVM::UndefOp::create(b, loc, sType);
  for (int64_t kstep = 0; kstep < cfg.headDim / 16; ++kstep) {
    int64_t region = kstep / 4, inRow = (kstep % 4) * 32;
    s = wgmma(stepDesc(qDesc, region * cfg.blockQ() * kRowBytes + inRow),
              stepDesc(kDesc, region * cfg.blockKV * kRowBytes + inRow), s,
              cfg.blockKV, /*accumulate=*/kstep != 0, NVVM::MMALayout::col);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);

  // Scores in the log2 domain, masked where the tile needs it.
  Value scl = cF32(scaleLog2);
  SmallVector<Value> x;
  for (int64_t e = 0; e < nS; ++e)
    x.push_back(arith::MulFOp::create(b, loc, extract(s, e), scl));
  x = maskScoresWhereNeeded(modifyScores(x, k0), k0);

  // Online softmax: element 4 i + 2 r + c belongs to row lane/4 + 8 r; the
  // 4 lanes of a quad share a row.
  Value ninf = cF32(-std::numeric_limits<float>::infinity());
  Value zeroF = cF32(0.0f);
  Value mNew[2], mUse[2], alpha[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value mx;
    for (int64_t e = 0; e < nS; ++e) {
      if ((e % 4) / 2 != r)
        continue;
      mx = mx ? Value(arith::MaximumFOp::create(b, loc, mx, x[e])) : x[e];
    }
    updateRowMax(mx, mOld[r], ninf, zeroF, mNew[r], mUse[r], alpha[r]);
  }
  SmallVector<Value> p;
  for (int64_t e = 0; e < nS; ++e)
    p.push_back(ex2(arith::SubFOp::create(b, loc, x[e], mUse[(e % 4) / 2])));
  Value lNew[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value sum;
    for (int64_t e = 0; e < nS; ++e) {
      if ((e % 4) / 2 != r)
        continue;
      sum = sum ? Value(arith::AddFOp::create(b, loc, sum, p[e])) : p[e];
    }
    // Per-thread partial sum: alpha is uniform over the quad.
    lNew[r] = arith::AddFOp::create(
        b, loc, arith::MulFOp::create(b, loc, lOld[r], alpha[r]), sum);
  }

  // P into this warpgroup's swizzled K-major tile: row 16 (warp % 4) +
  // lane/4 + 8 r (row % 8 = lane / 4), keys 8 i + 2 (lane % 4) + {0, 1} in
  // region i / 8, chunk (i % 8) ^ (lane / 4).
  auto pairType = VectorType::get({2}, elt);
  for (int64_t i = 0; i < cfg.blockKV / 8; ++i) {
    Value chunk = arith::XOrIOp::create(b, loc, cIdx(i % 8), laneRow);
    Value col = add(mul(chunk, cIdx(8)), laneQuad2);
    for (int64_t r = 0; r < 2; ++r) {
      Value pair = vector::FromElementsOp::create(
          b, loc, VectorType::get({2}, b.getF32Type()),
          ValueRange{p[4 * i + 2 * r], p[4 * i + 2 * r + 1]});
      Value h = arith::TruncFOp::create(b, loc, pairType, pair);
      Value row = addC(add(warpInGroupRow0, laneRow), 8 * r);
      vector::StoreOp::create(b, loc, h, ps,
                              ValueRange{wg, cIdx(i / 8), row, col});
    }
  }
  // The generic-proxy stores become visible to the tensor cores' reads.
  fenceProxy();
  gpu::BarrierOp::create(b, loc);

  // O = alpha O + P V: P K-major (64 rows of keys), V MN-major (K = keys in
  // rows of 64-column regions of Dv: LBO = region, SBO = 8 rows).
  Value o = oAcc;
  for (int64_t e = 0; e < cfg.valueDim / 2; ++e)
    o = insert(
        o, arith::MulFOp::create(b, loc, extract(o, e), alpha[(e % 4) / 2]), e);
  if (nonFinite) {
    // NaN/inf in V (block-uniform): added to the rows that attend their
    // keys, then zeroed in the tile so that the wgmma's 0 * NaN cannot reach
    // the other rows.
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{oType}, nonFinite,
                                  /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value guarded = addNonFiniteV(o, slot, k0);
    gpu::BarrierOp::create(b, loc);
    zeroNonFiniteV(slot);
    fenceProxy();
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, guarded);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, loc, o);
    b.setInsertionPointAfter(ifOp);
    o = ifOp.getResult(0);
  }
  Value pDesc = descriptor(pAddr, 16, kAtomBytes);
  Value vDesc = descriptor(vSlotAddr, cfg.blockKV * kRowBytes, kAtomBytes);
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t kstep = 0; kstep < cfg.blockKV / 16; ++kstep) {
    int64_t region = kstep / 4, inRow = (kstep % 4) * 32;
    o = wgmma(stepDesc(pDesc, region * kWarpgroupRows * kRowBytes + inRow),
              stepDesc(vDesc, kstep * 2 * kAtomBytes), o, cfg.valueDim,
              /*accumulate=*/true, NVVM::MMALayout::row);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  return {o, mNew[0], mNew[1], lNew[0], lNew[1]};
}

void WgmmaKernelBuilder::epilogue(ValueRange state) {
  Value oAcc = state[0];
  Value m[2] = {state[1], state[2]};
  Value l[2] = {state[3], state[4]};
  Value empty[2], inv[2];
  reduceRowSums(l, empty, inv);
  Value quadLead = cmp(arith::CmpIPredicate::eq,
                       arith::RemUIOp::create(b, loc, lane, cIdx(4)), cIdx(0));
  auto pairF32 = VectorType::get({2}, b.getF32Type());
  // A split-KV partial stays in f32 until the merge.
  Type stored = storedOutputType();
  auto outType = VectorType::get({2}, stored);
  for (int64_t r = 0; r < 2; ++r) {
    OutputRow row = beginOutputRow(r, m[r], l[r], empty[r]);
    SmallVector<Value> parts;
    for (int64_t i = 0; i < cfg.valueDim / 8; ++i) {
      Value v0 =
          arith::MulFOp::create(b, loc, extract(oAcc, 4 * i + 2 * r), inv[r]);
      Value v1 = arith::MulFOp::create(b, loc, extract(oAcc, 4 * i + 2 * r + 1),
                                       inv[r]);
      Value pair =
          vector::FromElementsOp::create(b, loc, pairF32, ValueRange{v0, v1});
      if (!stored.isF32())
        pair = arith::TruncFOp::create(b, loc, outType, pair);
      parts.push_back(pair);
    }
    storeOutputRow(row, quadLead, [&] {
      for (int64_t i = 0; i < cfg.valueDim / 8; ++i)
        vector::StoreOp::create(
            b, loc, parts[i], outputBuffer(),
            outputIndex(row, addC(laneQuad2, i * 8)));
    });
  }
}

void WgmmaKernelBuilder::build(gpu::GPUFuncOp kernel, const KernelOperands &a) {
  args = a;
  sType = accStructType(cfg.blockKV);
  oType = accStructType(cfg.valueDim);
  Block &entry = kernel.getBody().front();
  // After a constant q_offset outlineKernel may have cloned there.
  b.setInsertionPointToEnd(&entry);

  emitThreadIds();
  wg = arith::DivUIOp::create(b, loc, tid, cIdx(kWarpgroupSize));
  Value qTile = emitBlockIds();
  warpRow0 = mul(warp, cIdx(16));
  warpInGroupRow0 =
      mul(arith::RemUIOp::create(b, loc, warp, cIdx(4)), cIdx(16));
  emitKeyRange(qTile);

  // Workgroup memory: one dynamic buffer, its tiles from the first
  // 1024-byte boundary on (the swizzle atoms must be 1024-aligned).
  auto wgSpace = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto dynType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                 MemRefLayoutAttrInterface(), wgSpace);
  Value smem = gpu::DynamicSharedMemoryOp::create(b, loc, dynType);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem);
  Value pad = arith::AndIOp::create(
      b, loc, arith::SubIOp::create(b, loc, cIdx(0), base),
      cIdx(kAtomBytes - 1));
  Value alignedBase = add(base, pad);
  auto view = [&](ArrayRef<int64_t> shape, int64_t offset) -> Value {
    auto type =
        MemRefType::get(shape, elt, MemRefLayoutAttrInterface(), wgSpace);
    return memref::ViewOp::create(b, loc, type, smem, addC(pad, offset),
                                  ValueRange{});
  };
  qs = view({cfg.headDim / kRegionCols, cfg.blockQ(), kRegionCols}, 0);
  ks = view({cfg.stages, cfg.headDim / kRegionCols, cfg.blockKV, kRegionCols},
            cfg.kOffset());
  vs = view({cfg.stages, cfg.valueDim / kRegionCols, cfg.blockKV, kRegionCols},
            cfg.vOffset());
  ps = view(
      {cfg.warpgroups, cfg.blockKV / kRegionCols, kWarpgroupRows, kRegionCols},
      cfg.pOffset());
  qAddr = alignedBase;
  kAddr = addC(alignedBase, cfg.kOffset());
  vAddr = addC(alignedBase, cfg.vOffset());
  pAddr = add(addC(alignedBase, cfg.pOffset()), mul(wg, cIdx(cfg.pBytes())));
  if (cfg.guardNonFinite)
    flags = memref::ViewOp::create(
        b, loc,
        MemRefType::get({cfg.flagBytes() / 4}, b.getI32Type(),
                        MemRefLayoutAttrInterface(), wgSpace),
        smem, addC(pad, cfg.tileBytes()), ValueRange{});

  // State: the O accumulator, m, l for the two rows of the thread.
  Value oInit = LLVM::ZeroOp::create(b, loc, oType);
  Value ninf = cF32(-std::numeric_limits<float>::infinity());
  Value zeroF = cF32(0.0f);
  SmallVector<Value> init = {oInit, ninf, ninf, zeroF, zeroF};
  epilogue(emitMainLoop(init));
  gpu::ReturnOp::create(b, loc);
}

Value WgmmaKernelBuilder::beforeTileBarrier(Value j) {
  // Tiles that mask keys below kv_end for some row of the block (a user
  // mask or segments: all; causality: those crossing the diagonal of the
  // block's first row; a window or a chunk: those they cut) publish whether
  // their V holds NaN/inf.
  Value check = tileMayRemoveKeys(tileStart(j));
  if (check && matchPattern(check, m_One())) {
    publishNonFinite(arith::RemUIOp::create(b, loc, j, cIdx(cfg.stages)));
  } else if (check) {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, check,
                                  /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    publishNonFinite(arith::RemUIOp::create(b, loc, j, cIdx(cfg.stages)));
  }
  // The copies of tile j become visible to the async proxy (the tensor
  // cores) before the barrier; after it, every warpgroup is also done with
  // its P tile.
  fenceProxy();
  return check;
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FAMapToWgmmaPass final
    : fa::impl::FAMapToWgmmaPassBase<FAMapToWgmmaPass> {
  using Base::Base;
  void runOnOperation() override;
  LogicalResult mapFunction(func::FuncOp func, AttentionOp op,
                            KernelOperands args);
};
} // namespace

LogicalResult FAMapToWgmmaPass::mapFunction(func::FuncOp func, AttentionOp op,
                                            KernelOperands args) {
  std::string error;
  FailureOr<WgmmaConfig> cfg =
      chooseWgmmaConfig(op, warpgroups, blockKV, stages, error);
  if (failed(cfg))
    return op.emitError() << "fa-map-to-wgmma: " << error;
  KernelLaunch launch{cfg->blockQ(),
                      cfg->numThreads(),
                      cfg->sharedBytes(),
                      {{"block_q", cfg->blockQ()},
                       {"block_kv", cfg->blockKV},
                       {"threads", cfg->numThreads()},
                       {"stages", cfg->stages},
                       {"warpgroups", cfg->warpgroups},
                       {"dynamic_shared_bytes", cfg->sharedBytes()}},
                      "wgmma",
                      splitKv};
  std::string tiles =
      llvm::formatv("D = {0}, Dv = {1}, block-kv = {2}, stages = {3}, "
                    "warpgroups = {4}",
                    cfg->headDim, cfg->valueDim, cfg->blockKV, cfg->stages,
                    cfg->warpgroups)
          .str();
  if (failed(checkSharedMemoryFits(op, getArgument(), chip, launch, tiles)))
    return failure();
  if (splitKv && failed(addSplitWorkspace(op, getArgument(), func, args)))
    return failure();
  outlineKernel(getOperation(), func, op, args, launch,
                [&](gpu::GPUFuncOp kernel, const KernelOperands &kargs) {
                  WgmmaKernelBuilder(op, *cfg).build(kernel, kargs);
                });
  return success();
}

void FAMapToWgmmaPass::runOnOperation() {
  for (auto &[func, op, args] :
       collectKernelCandidates(getOperation(), isWgmmaEligible))
    if (failed(verifyKernelResultUses(op, getArgument())) ||
        failed(mapFunction(func, op, args)))
      return signalPassFailure();
}
