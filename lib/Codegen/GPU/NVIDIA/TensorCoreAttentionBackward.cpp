//===- TensorCoreAttentionBackward.cpp - backward kernels on mma.sync -----===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Turns an eligible kernel function holding one fa.attention_backward
// (f16/bf16, head dims multiples of 16 up to 128) into the two kernels of
// FlashAttention 2's backward pass on nvgpu.mma.sync m16n8k16 (f32
// accumulation), without atomics, so the gradients are deterministic:
//
//  * dQ (the function's name): a block per (64-row query tile, query head,
//    batch), warp w owning rows 16 w ... 16 w + 15. The Q and dO tiles stay
//    in workgroup memory; for each key tile of the forward's key range the
//    K and V tiles are copied in (cp.async), S = Q K^T and dP = dO V^T are
//    accumulated in registers, P = exp2(S - LSE) and dS = P (dP - Delta)
//    computed on the fragments (AttentionSemantics: the masks, the
//    modifiers and the softcap's derivative), and dQ += dS K with dS reused
//    from registers as the A operand.
//  * dK / dV (`<function>_dkdv`): a block per (64-key tile, kv head,
//    batch), warp w owning keys 16 w ...: the K and V tiles stay in
//    workgroup memory; for each query head of the group and each query tile
//    whose forward key range meets the key tile, the Q and dO tiles are
//    copied in with their rows' LSE and Delta, S^T = K Q^T and
//    dP^T = V dO^T are accumulated, P^T and dS^T computed as above, and
//    dV += P^T dO, dK += dS^T Q.
//
// Both kernels are the forward kernel's fragment layouts with the roles of
// the operands exchanged: a lane holds rows lane / 4 and lane / 4 + 8 of its
// warp's 16 and columns 2 (lane % 4) + {0, 1} of each n8 tile. A key that a
// row does not attend gets P = dS = 0 exactly; in the dQ kernel the K rows
// are cleared of NaN and inf before dS K (after S is taken from them) where
// keys below the key length can be removed, so a removed key's non-finite K
// cannot reach dQ through 0 * NaN in the mma.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Common/KernelForm.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "GpuKernelCommon.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAMAPTOTENSORCORESBACKWARDPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

//===----------------------------------------------------------------------===//
// Eligibility and tiles
//===----------------------------------------------------------------------===//

bool gpukernel::isTensorCoreBackwardEligible(AttentionBackwardOp op,
                                             std::string *reason) {
  auto fail = [&](const std::string &why) {
    if (reason)
      *reason = why;
    return false;
  };
  Type elt = cast<RankedTensorType>(op.getQuery().getType()).getElementType();
  if (!elt.isF16() && !elt.isBF16())
    return fail("Q, K and V must be f16 or bf16");
  for (Value v : {op.getKey(), op.getValue(), op.getGradOutput()})
    if (cast<RankedTensorType>(v.getType()).getElementType() != elt)
      return fail("K, V and dO must have Q's element type");
  int64_t d = op.getHeadDim(), dv = op.getValueHeadDim();
  if (d <= 0 || d % 16 != 0 || d > kMmaBackwardMaxHeadDim || dv <= 0 ||
      dv % 16 != 0 || dv > kMmaBackwardMaxHeadDim)
    return fail("head dims must be multiples of 16 up to " +
                std::to_string(kMmaBackwardMaxHeadDim) + ", got D = " +
                std::to_string(d) + " and Dv = " + std::to_string(dv));
  return true;
}

namespace {

/// The tiles of the two kernels. The dQ kernel's query tile (block_q) and
/// the dK/dV kernel's key tile (block_kv) are the grids' (16 rows per
/// warp); the inner tiles, the dQ kernel's key tile and the dK/dV kernel's
/// query tile, are chosen so that each kernel's tiles fit 48 KiB of static
/// workgroup memory.
struct BackwardMmaConfig {
  static constexpr int64_t kWarps = 4;
  int64_t blockQ = 16 * kWarps, blockKV = 16 * kWarps;
  int64_t inner = 32;
  int64_t headDim = 0, valueDim = 0;

  int64_t numThreads() const { return kWarps * gpukernel::kWarpSize; }
  /// Elements per row of a tile in workgroup memory: padded by 16 bytes
  /// against ldmatrix bank conflicts.
  static int64_t stride(int64_t width) { return width + 8; }
  int64_t queryKernelBytes() const {
    return 2 * (blockQ + inner) * (stride(headDim) + stride(valueDim));
  }
  int64_t keyKernelBytes() const {
    return 2 * (blockKV + inner) * (stride(headDim) + stride(valueDim)) +
           2 * 4 * inner;
  }
};

BackwardMmaConfig chooseConfig(AttentionBackwardOp op) {
  BackwardMmaConfig c;
  c.headDim = op.getHeadDim();
  c.valueDim = op.getValueHeadDim();
  c.inner = std::max(c.headDim, c.valueDim) <= 64 ? 32 : 16;
  return c;
}

/// Builds the two kernels of one backward kernel function.
class BackwardMmaBuilder {
public:
  BackwardMmaBuilder(AttentionBackwardOp op, const BackwardMmaConfig &cfg)
      : op(op), cfg(cfg), ctx(op.getContext()), loc(op.getLoc()),
        b(op.getContext()) {
    elt = cast<RankedTensorType>(op.getQuery().getType()).getElementType();
    group = op.getGroupSize();
    sem = AttentionSemantics::get(op);
    scale = op.getEffectiveScale();
    accType = VectorType::get({2, 2}, b.getF32Type());
    fragA = VectorType::get({4, 2}, elt);
    // Keys below the key length are removed for some rows only by these;
    // without them every key below it is attended by every row. (Any
    // mask, not only a boolean one: an additive -inf removes its key.)
    removesKeys = op.getCausal() != CausalKind::none ||
                  static_cast<bool>(op.getMask()) || op.getWindow() ||
                  op.getChunk() || static_cast<bool>(op.getQSegments());
  }

  void build(ModuleOp module, func::FuncOp func,
             const BackwardKernelOperands &args);

private:
  // Small helpers.
  Value cIdx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value cF32(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value addC(Value x, int64_t c) { return c == 0 ? x : add(x, cIdx(c)); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value mulC(Value x, int64_t c) { return mul(x, cIdx(c)); }
  Value minS(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value lastOf(Value n) {
    return arith::SubIOp::create(b, loc, n, cIdx(1));
  }
  Value shuffleXor(Value v, int64_t offset) {
    Value off = arith::ConstantIntOp::create(b, loc, offset, 32);
    Value width = arith::ConstantIntOp::create(b, loc, gpukernel::kWarpSize, 32);
    return gpu::ShuffleOp::create(b, loc, v, off, width, gpu::ShuffleMode::XOR)
        .getShuffleResult();
  }
  void ifThen(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, cond,
                                  /*withElse=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    body();
  }
  Value mma(Value a, Value bFrag, Value c) {
    return nvgpu::MmaSyncOp::create(b, loc, a, bFrag, c,
                                    ArrayRef<int64_t>{16, 8, 16});
  }
  Value ldmatrix(Value src, ValueRange indices, bool transpose) {
    return nvgpu::LdMatrixOp::create(b, loc, fragA, src, indices, transpose,
                                     /*numTiles=*/4);
  }
  /// Rows [first, first + 1] of a vector<4x2xT> ldmatrix result.
  Value halfOf(Value x4, int64_t first) {
    return vector::ShuffleOp::create(b, loc, x4, x4,
                                     ArrayRef<int64_t>{first, first + 1});
  }
  Value element(Value frag, int64_t r, int64_t c) {
    return vector::ExtractOp::create(b, loc, frag, ArrayRef<int64_t>{r, c});
  }
  Value zeroAcc() {
    return arith::ConstantOp::create(b, loc, b.getZeroAttr(accType));
  }
  /// acc[2 p] and acc[2 p + 1] += A times the two n8 halves of the
  /// ldmatrix result `b4`.
  void mmaPair(Value a, Value b4, MutableArrayRef<Value> acc, int64_t p) {
    acc[2 * p] = mma(a, halfOf(b4, 0), acc[2 * p]);
    acc[2 * p + 1] = mma(a, halfOf(b4, 2), acc[2 * p + 1]);
  }
  /// A static workgroup buffer of the kernel being built: a memref.global
  /// in the gpu.module, read through memref.get_global.
  Value workgroupBuffer(StringRef name, ArrayRef<int64_t> shape, Type type);

  /// Emits tid, lane, warp and the per-lane fragment coordinates.
  void emitThreadIds();
  /// Emits nq, nk, keyEnd and diag for the block's batch.
  void emitSequence(const BackwardKernelOperands &a);
  /// cp.async of rows [row0, row0 + rows) of `src[batch, head, :, :]`
  /// (`width` columns, 16 bytes a copy) into `dst[r][c]`, rows at or past
  /// `rowEnd` (>= 1) zero-filled; commits them as one group and returns its
  /// token. A last round with fewer chunks than threads is copied
  /// synchronously (null when every chunk is).
  Value copyRows(Value src, Value head, Value row0, Value rowEnd, int64_t rows,
                int64_t width, Value dst);
  /// Waits for all of this thread's copies (through the last non-null of
  /// the groups `tokens`; none when all are null), then a block barrier.
  void waitCopies(ArrayRef<Value> tokens);
  /// The wait alone.
  void waitGroups(ArrayRef<Value> tokens);
  /// Sets the NaN and inf elements of rows [0, rows) of `tile` (`width`
  /// columns) to 0, each thread a strided share.
  void clearNonFinite(Value tile, int64_t rows, int64_t width);

  /// The accumulators of X Y^T for the warp's 16 rows of `x` (from row
  /// `xRow0`) and the `n` rows of `y` (from row 0), over `depth` columns:
  /// n / 8 fragments.
  SmallVector<Value> rowTimesRowT(Value x, Value xRow0, Value y, int64_t n,
                                  int64_t depth);
  /// `acc` (width / 8 fragments) plus A B for A the f32 fragments `a` (16
  /// rows of the warp, k = 8 * a.size() columns, rounded to the element
  /// type) and B the rows [0, k) of `y` (`width` columns).
  SmallVector<Value> addProduct(ValueRange acc, ArrayRef<Value> a,
                                Value y, int64_t width);

  /// P and dS of one score: `s` and `dp` the raw dot products of query `q`
  /// and key `key` (index), `lse2` the row's LSE in the log2 domain and
  /// `delta` its Delta; `head` and `slope` the query head and its ALiBi
  /// slope.
  std::pair<Value, Value> probabilityAndGradient(
      const BackwardKernelOperands &a, Value s, Value dp, Value q, Value key,
      Value lse2, Value delta, Value head, Value slope);
  /// LSE (log2 domain, -inf for rows at or past Nq) and Delta =
  /// rowsum(dO * O) of query `q` of `head`, Delta computed by the 4 lanes of
  /// a quad over the columns 2 (lane % 4) + 8 j + {0, 1} of O and dO.
  std::pair<Value, Value> rowStats(const BackwardKernelOperands &a, Value head,
                                   Value q);
  /// Stores `acc` (width / 8 fragments) times `factor`, rounded to the
  /// element type, into rows `row(0)`, `row(1)` of `dst[batch, head]` below
  /// `rowEnd`.
  void storeRows(ArrayRef<Value> acc, float factor, Value dst, Value head,
                 Value row0, Value rowEnd, int64_t width);

  void buildQueryKernel(gpu::GPUFuncOp kernel, const BackwardKernelOperands &a);
  void buildKeyKernel(gpu::GPUFuncOp kernel, const BackwardKernelOperands &a);

  AttentionBackwardOp op;
  BackwardMmaConfig cfg;
  MLIRContext *ctx;
  Location loc;
  OpBuilder b;
  Type elt;
  int64_t group;
  AttentionSemantics sem;
  float scale;
  VectorType accType, fragA;
  bool removesKeys;

  gpu::GPUModuleOp gpuModule;
  std::string kernelName;
  // Per kernel.
  Value tid, lane, warp, lane16, lane8, laneHi16, laneBit8, laneRow,
      laneQuad2, warpRow0;
  Value batch, nq, nk, keyEnd, diag;
};

} // namespace

Value BackwardMmaBuilder::workgroupBuffer(StringRef name,
                                          ArrayRef<int64_t> shape, Type type) {
  auto memrefType = MemRefType::get(
      shape, type, MemRefLayoutAttrInterface(),
      IntegerAttr::get(IntegerType::get(ctx, 64), kWorkgroupAddressSpace));
  OpBuilder gb = OpBuilder::atBlockBegin(gpuModule.getBody());
  std::string symbol = "__fa_" + kernelName + "_" + name.str();
  memref::GlobalOp::create(gb, loc, symbol, gb.getStringAttr("private"),
                           memrefType, Attribute(), /*constant=*/false,
                           gb.getI64IntegerAttr(16));
  return memref::GetGlobalOp::create(b, loc, memrefType, symbol);
}

void BackwardMmaBuilder::emitThreadIds() {
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  lane = arith::RemUIOp::create(b, loc, tid, cIdx(gpukernel::kWarpSize));
  warp = arith::DivUIOp::create(b, loc, tid, cIdx(gpukernel::kWarpSize));
  lane16 = arith::RemUIOp::create(b, loc, lane, cIdx(16));
  lane8 = arith::RemUIOp::create(b, loc, lane, cIdx(8));
  laneHi16 = arith::DivUIOp::create(b, loc, lane, cIdx(16));
  laneBit8 = arith::RemUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, lane, cIdx(8)), cIdx(2));
  laneRow = arith::DivUIOp::create(b, loc, lane, cIdx(4));
  laneQuad2 = mulC(arith::RemUIOp::create(b, loc, lane, cIdx(4)), 2);
  warpRow0 = mulC(warp, 16);
}

void BackwardMmaBuilder::emitSequence(const BackwardKernelOperands &a) {
  batch = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  nq = memref::DimOp::create(b, loc, a.q, 2);
  nk = memref::DimOp::create(b, loc, a.k, 2);
  Value len;
  if (a.kvLens)
    len = memref::LoadOp::create(b, loc, a.kvLens, ValueRange{batch});
  keyEnd = sem.keyLengthEnd(b, loc, len, nk);
  diag = sem.diagonalOffset(b, loc, nq, nk, a.qOffset);
}

Value BackwardMmaBuilder::copyRows(Value src, Value head, Value row0,
                                  Value rowEnd, int64_t rows, int64_t width,
                                  Value dst) {
  int64_t chunksPerRow = width / 8;
  int64_t total = rows * chunksPerRow;
  int64_t threads = cfg.numThreads();
  Value last = lastOf(rowEnd);
  Value eight = cIdx(8), zero = cIdx(0);
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  SmallVector<Value> tokens;
  for (int64_t it = 0; it * threads < total; ++it) {
    auto emitCopy = [&](SmallVectorImpl<Value> &into) {
      Value i = addC(tid, it * threads);
      Value r = arith::DivUIOp::create(b, loc, i, cIdx(chunksPerRow));
      Value c =
          mulC(arith::RemUIOp::create(b, loc, i, cIdx(chunksPerRow)), 8);
      Value row = add(row0, r);
      // Every address stays inside the tensor; rows past the end read 0
      // bytes and are zero-filled.
      Value rowC = minS(row, last);
      Value bytes = arith::SelectOp::create(
          b, loc, cmp(arith::CmpIPredicate::slt, row, rowEnd), eight, zero);
      into.push_back(nvgpu::DeviceAsyncCopyOp::create(
                         b, loc, tokenType, dst, ValueRange{r, c}, src,
                         ValueRange{batch, head, rowC, c}, b.getIndexAttr(8),
                         bytes, b.getUnitAttr())
                         .getAsyncToken());
    };
    if ((it + 1) * threads <= total) {
      emitCopy(tokens);
      continue;
    }
    // The last, partial round (fewer chunks than threads): a synchronous
    // 16-byte load and store by the threads that have a chunk, so that no
    // thread commits a group of its own.
    ifThen(cmp(arith::CmpIPredicate::ult, addC(tid, it * threads),
               cIdx(total)),
           [&] {
             Value i = addC(tid, it * threads);
             Value r = arith::DivUIOp::create(b, loc, i, cIdx(chunksPerRow));
             Value c = mulC(
                 arith::RemUIOp::create(b, loc, i, cIdx(chunksPerRow)), 8);
             Value row = add(row0, r);
             auto chunkType = VectorType::get({8}, elt);
             Value loaded = vector::LoadOp::create(
                 b, loc, chunkType, src,
                 ValueRange{batch, head, minS(row, last), c});
             Value value = arith::SelectOp::create(
                 b, loc, cmp(arith::CmpIPredicate::slt, row, rowEnd), loaded,
                 arith::ConstantOp::create(b, loc,
                                           b.getZeroAttr(chunkType)));
             vector::StoreOp::create(b, loc, value, dst, ValueRange{r, c});
           });
  }
  if (tokens.empty())
    return Value();
  return nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokenType, tokens);
}

void BackwardMmaBuilder::waitGroups(ArrayRef<Value> tokens) {
  // numGroups = 0: every group of the thread, whichever token names it.
  for (Value token : llvm::reverse(tokens))
    if (token) {
      nvgpu::DeviceAsyncWaitOp::create(b, loc, token, b.getI32IntegerAttr(0));
      return;
    }
}

void BackwardMmaBuilder::waitCopies(ArrayRef<Value> tokens) {
  waitGroups(tokens);
  gpu::BarrierOp::create(b, loc);
}

void BackwardMmaBuilder::clearNonFinite(Value tile, int64_t rows,
                                        int64_t width) {
  // An element is NaN or inf when its exponent bits are all set: adding the
  // lowest exponent bit to its magnitude bits then carries into bit 15.
  int64_t chunksPerRow = width / 8;
  int64_t total = rows * chunksPerRow;
  int64_t threads = cfg.numThreads();
  auto chunkType = VectorType::get({8}, elt);
  Type i16 = b.getI16Type();
  auto bitsType = VectorType::get({8}, i16);
  auto splatBits = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(
        b, loc, SplatElementsAttr::get(bitsType, b.getIntegerAttr(i16, v)));
  };
  for (int64_t it = 0; it * threads < total; ++it) {
    auto clear = [&] {
      Value i = addC(tid, it * threads);
      Value r = arith::DivUIOp::create(b, loc, i, cIdx(chunksPerRow));
      Value c =
          mulC(arith::RemUIOp::create(b, loc, i, cIdx(chunksPerRow)), 8);
      Value chunk =
          vector::LoadOp::create(b, loc, chunkType, tile, ValueRange{r, c});
      Value bits = arith::BitcastOp::create(b, loc, bitsType, chunk);
      Value carry = arith::AddIOp::create(
          b, loc, arith::AndIOp::create(b, loc, bits, splatBits(0x7fff)),
          splatBits(elt.isF16() ? 0x0400 : 0x0080));
      Value bad = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ne,
          arith::AndIOp::create(b, loc, carry, splatBits(0x8000)),
          splatBits(0));
      Value cleared = arith::SelectOp::create(
          b, loc, bad,
          arith::ConstantOp::create(b, loc, b.getZeroAttr(chunkType)), chunk);
      vector::StoreOp::create(b, loc, cleared, tile, ValueRange{r, c});
    };
    if ((it + 1) * threads <= total)
      clear();
    else
      ifThen(cmp(arith::CmpIPredicate::ult, addC(tid, it * threads),
                 cIdx(total)),
             clear);
  }
}

SmallVector<Value> BackwardMmaBuilder::rowTimesRowT(Value x, Value xRow0,
                                                    Value y, int64_t n,
                                                    int64_t depth) {
  SmallVector<Value> acc(n / 8, zeroAcc());
  Value xRow = add(xRow0, lane16);
  Value xCol = mulC(laneHi16, 8);
  Value yRow = add(lane8, mulC(laneHi16, 8));
  Value yCol = mulC(laneBit8, 8);
  for (int64_t kstep = 0; kstep < depth / 16; ++kstep) {
    Value xa = ldmatrix(x, ValueRange{xRow, addC(xCol, kstep * 16)},
                        /*transpose=*/false);
    for (int64_t np = 0; np < n / 16; ++np) {
      Value yb = ldmatrix(y, ValueRange{addC(yRow, np * 16),
                                        addC(yCol, kstep * 16)},
                          /*transpose=*/false);
      mmaPair(xa, yb, acc, np);
    }
  }
  return acc;
}

SmallVector<Value> BackwardMmaBuilder::addProduct(ValueRange acc,
                                                  ArrayRef<Value> a, Value y,
                                                  int64_t width) {
  SmallVector<Value> out(acc.begin(), acc.end());
  auto halfType = VectorType::get({2, 2}, elt);
  Value yRow = add(lane8, mulC(laneBit8, 8));
  Value yCol = mulC(laneHi16, 8);
  for (int64_t kstep = 0; kstep < static_cast<int64_t>(a.size()) / 2;
       ++kstep) {
    Value h0 = arith::TruncFOp::create(b, loc, halfType, a[2 * kstep]);
    Value h1 = arith::TruncFOp::create(b, loc, halfType, a[2 * kstep + 1]);
    Value af = vector::ShuffleOp::create(b, loc, h0, h1,
                                         ArrayRef<int64_t>{0, 1, 2, 3});
    for (int64_t dp = 0; dp < width / 16; ++dp) {
      Value yb = ldmatrix(y, ValueRange{addC(yRow, kstep * 16),
                                        addC(yCol, dp * 16)},
                          /*transpose=*/true);
      mmaPair(af, yb, out, dp);
    }
  }
  return out;
}

std::pair<Value, Value> BackwardMmaBuilder::probabilityAndGradient(
    const BackwardKernelOperands &a, Value s, Value dp, Value q, Value key,
    Value lse2, Value delta, Value head, Value slope) {
  Value scaled = arith::MulFOp::create(b, loc, s, cF32(scale));
  Value der = sem.scoreDerivative(b, loc, scaled);
  Value x = arith::MulFOp::create(b, loc, scaled,
                                  cF32(static_cast<float>(M_LOG2E)));
  if (sem.hasSoftcap() || sem.hasAlibi())
    x = sem.modifyScore(b, loc, x, q, key, diag, slope, M_LOG2E);
  Value keep = sem.keepKey(b, loc, q, key, keyEnd, diag);
  if (a.qSegments || a.mask) {
    // Rows and keys past the ends read the last ones (their P is 0).
    Value qC = minS(q, lastOf(nq)), keyC = minS(key, lastOf(nk));
    if (a.qSegments) {
      Value qSeg =
          memref::LoadOp::create(b, loc, a.qSegments, ValueRange{batch, qC});
      Value kSeg =
          memref::LoadOp::create(b, loc, a.kSegments, ValueRange{batch, keyC});
      sem.applySegments(b, loc, qSeg, kSeg, keep);
    }
    if (a.mask) {
      auto mType = cast<MemRefType>(a.mask.getType());
      Value mb = mType.getDimSize(0) == 1 ? cIdx(0) : batch;
      Value mh = mType.getDimSize(1) == 1 ? cIdx(0) : head;
      Value m = memref::LoadOp::create(b, loc, a.mask,
                                       ValueRange{mb, mh, qC, keyC});
      sem.applyMaskElement(b, loc, m, x, keep, M_LOG2E);
    }
  }
  x = AttentionSemantics::removeUnkept(b, loc, keep, x);
  Value p = guardedProbability(b, loc, x, lse2, /*base2=*/true);
  // dS = P (dP - Delta) (times the softcap's derivative), exactly 0 where
  // P = 0 (a removed key's V row may hold NaN).
  Value ds = arith::MulFOp::create(b, loc, p,
                                   arith::SubFOp::create(b, loc, dp, delta));
  if (der)
    ds = arith::MulFOp::create(b, loc, ds, der);
  Value zero = cF32(0.0f);
  ds = arith::SelectOp::create(
      b, loc, arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, p, zero),
      zero, ds);
  return {p, ds};
}

std::pair<Value, Value>
BackwardMmaBuilder::rowStats(const BackwardKernelOperands &a, Value head,
                             Value q) {
  Value inRows = cmp(arith::CmpIPredicate::slt, q, nq);
  Value qC = minS(q, lastOf(nq));
  Value sum = cF32(0.0f);
  for (int64_t j = 0; j < cfg.valueDim / 8; ++j)
    for (int64_t c = 0; c < 2; ++c) {
      Value col = addC(laneQuad2, 8 * j + c);
      SmallVector<Value> at = {batch, head, qC, col};
      auto f32 = [&](Value v) {
        return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
      };
      Value o = f32(memref::LoadOp::create(b, loc, a.o, at));
      Value d = f32(memref::LoadOp::create(b, loc, a.dO, at));
      sum = arith::AddFOp::create(b, loc, sum,
                                  arith::MulFOp::create(b, loc, o, d));
    }
  sum = arith::AddFOp::create(b, loc, sum, shuffleXor(sum, 1));
  sum = arith::AddFOp::create(b, loc, sum, shuffleXor(sum, 2));
  Value lse = memref::LoadOp::create(b, loc, a.lse, ValueRange{batch, head, qC});
  Value lse2 =
      arith::MulFOp::create(b, loc, lse, cF32(static_cast<float>(M_LOG2E)));
  // A row past Nq has no probability: LSE -inf makes its P exactly 0.
  lse2 = arith::SelectOp::create(
      b, loc, inRows, lse2, cF32(-std::numeric_limits<float>::infinity()));
  Value delta = arith::SelectOp::create(b, loc, inRows, sum, cF32(0.0f));
  return {lse2, delta};
}

void BackwardMmaBuilder::storeRows(ArrayRef<Value> acc, float factor,
                                   Value dst, Value head, Value row0,
                                   Value rowEnd, int64_t width) {
  for (int64_t r = 0; r < 2; ++r) {
    Value row = addC(add(add(row0, warpRow0), laneRow), 8 * r);
    ifThen(cmp(arith::CmpIPredicate::slt, row, rowEnd), [&] {
      for (int64_t j = 0; j < width / 8; ++j)
        for (int64_t c = 0; c < 2; ++c) {
          Value v = element(acc[j], r, c);
          if (factor != 1.0f)
            v = arith::MulFOp::create(b, loc, v, cF32(factor));
          v = arith::TruncFOp::create(b, loc, elt, v);
          memref::StoreOp::create(
              b, loc, v, dst,
              ValueRange{batch, head, row, addC(laneQuad2, 8 * j + c)});
        }
    });
  }
}

//===----------------------------------------------------------------------===//
// dQ
//===----------------------------------------------------------------------===//

void BackwardMmaBuilder::buildQueryKernel(gpu::GPUFuncOp kernel,
                                          const BackwardKernelOperands &a) {
  // After a constant q_offset remapIntoKernel may have cloned there.
  b.setInsertionPointToEnd(&kernel.getBody().front());
  int64_t dK = cfg.headDim, dV = cfg.valueDim, kt = cfg.inner;
  Value qs = workgroupBuffer("q", {cfg.blockQ, cfg.stride(dK)}, elt);
  Value dos = workgroupBuffer("do", {cfg.blockQ, cfg.stride(dV)}, elt);
  Value ks = workgroupBuffer("k", {kt, cfg.stride(dK)}, elt);
  Value vs = workgroupBuffer("v", {kt, cfg.stride(dV)}, elt);
  emitThreadIds();
  Value qTile = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value head = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  emitSequence(a);
  Value kvHead = group == 1 ? head
                            : Value(arith::DivUIOp::create(b, loc, head,
                                                           cIdx(group)));
  Value slope =
      AttentionSemantics::loadAlibiSlope(b, loc, a.alibi, batch, head);
  Value q0 = mulC(qTile, cfg.blockQ);
  Value rows = minS(cIdx(cfg.blockQ), arith::SubIOp::create(b, loc, nq, q0));
  Value kvEnd = sem.visitedKeyEnd(b, loc, keyEnd, q0, rows, diag);
  Value kvBegin = sem.visitedTileBegin(b, loc, q0, diag, kt);
  Value span = AttentionSemantics::visitedKeyCount(b, loc, kvBegin, kvEnd);
  Value numKV = arith::CeilDivUIOp::create(b, loc, span, cIdx(kt));

  // Waited for here; the barrier at the top of each K/V tile orders them
  // before the reads.
  Value qCopied = copyRows(a.q, head, q0, nq, cfg.blockQ, dK, qs);
  waitGroups({qCopied, copyRows(a.dO, head, q0, nq, cfg.blockQ, dV, dos)});
  Value row[2], lse2[2], delta[2];
  for (int64_t r = 0; r < 2; ++r) {
    row[r] = addC(add(add(q0, warpRow0), laneRow), 8 * r);
    std::tie(lse2[r], delta[r]) = rowStats(a, head, row[r]);
  }

  SmallVector<Value> init(dK / 8, zeroAcc());
  auto loop = scf::ForOp::create(b, loc, cIdx(0), numKV, cIdx(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    Value k0 = mulC(j, kt);
    if (kvBegin)
      k0 = add(kvBegin, k0);
    // The previous tile's reads of K and V are done before the copies.
    gpu::BarrierOp::create(b, loc);
    Value kCopied = copyRows(a.k, kvHead, k0, kvEnd, kt, dK, ks);
    waitCopies({kCopied, copyRows(a.v, kvHead, k0, kvEnd, kt, dV, vs)});
    SmallVector<Value> s = rowTimesRowT(qs, warpRow0, ks, kt, dK);
    SmallVector<Value> dp = rowTimesRowT(dos, warpRow0, vs, kt, dV);
    SmallVector<Value> ds;
    for (int64_t nt = 0; nt < kt / 8; ++nt) {
      SmallVector<Value> elems;
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 2; ++c) {
          Value key = addC(add(k0, laneQuad2), nt * 8 + c);
          elems.push_back(probabilityAndGradient(
                              a, element(s[nt], r, c), element(dp[nt], r, c),
                              row[r], key, lse2[r], delta[r], head, slope)
                              .second);
        }
      ds.push_back(vector::FromElementsOp::create(b, loc, accType, elems));
    }
    if (removesKeys) {
      // A removed key's K row may hold NaN or inf: cleared once S is taken,
      // so that 0 * NaN in dS K cannot reach dQ (an attended one has NaN
      // dS already).
      gpu::BarrierOp::create(b, loc);
      clearNonFinite(ks, kt, dK);
      gpu::BarrierOp::create(b, loc);
    }
    SmallVector<Value> dq = addProduct(
        ValueRange(loop.getRegionIterArgs()), ds, ks, dK);
    scf::YieldOp::create(b, loc, dq);
  }
  storeRows(SmallVector<Value>(loop.getResults()), scale, a.dq, head, q0, nq,
            dK);
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// dK, dV
//===----------------------------------------------------------------------===//

void BackwardMmaBuilder::buildKeyKernel(gpu::GPUFuncOp kernel,
                                        const BackwardKernelOperands &a) {
  // After a constant q_offset remapIntoKernel may have cloned there.
  b.setInsertionPointToEnd(&kernel.getBody().front());
  int64_t dK = cfg.headDim, dV = cfg.valueDim, qt = cfg.inner;
  Value ks = workgroupBuffer("k", {cfg.blockKV, cfg.stride(dK)}, elt);
  Value vs = workgroupBuffer("v", {cfg.blockKV, cfg.stride(dV)}, elt);
  Value qs = workgroupBuffer("q", {qt, cfg.stride(dK)}, elt);
  Value dos = workgroupBuffer("do", {qt, cfg.stride(dV)}, elt);
  Type f32 = b.getF32Type();
  Value lseS = workgroupBuffer("lse", {qt}, f32);
  Value deltaS = workgroupBuffer("delta", {qt}, f32);
  emitThreadIds();
  Value kTile = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value kvHead = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  emitSequence(a);
  Value k0 = mulC(kTile, cfg.blockKV);
  Value kEnd = addC(k0, cfg.blockKV);
  Value key[2];
  for (int64_t r = 0; r < 2; ++r)
    key[r] = addC(add(add(k0, warpRow0), laneRow), 8 * r);

  SmallVector<Value> init(dK / 8 + dV / 8, zeroAcc());
  // Keys past the key lengths get no gradient: a tile starting there only
  // writes zeros.
  Value anyKey = cmp(arith::CmpIPredicate::slt, k0, keyEnd);
  SmallVector<Type> accTypes(init.size(), accType);
  auto work = scf::IfOp::create(b, loc, accTypes, anyKey, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&work.getElseRegion().front());
    scf::YieldOp::create(b, loc, init);
    b.setInsertionPointToStart(&work.getThenRegion().front());
    SmallVector<Value> kvCopied = {
        copyRows(a.k, kvHead, k0, keyEnd, cfg.blockKV, dK, ks),
        copyRows(a.v, kvHead, k0, keyEnd, cfg.blockKV, dV, vs)};
    Value numQ = arith::CeilDivUIOp::create(b, loc, nq, cIdx(qt));
    // Every query head of the group, every query tile whose forward key
    // range meets this key tile (the pairs the forward visited).
    auto heads = scf::ForOp::create(b, loc, cIdx(0), cIdx(group), cIdx(1),
                                    init);
    b.setInsertionPointToStart(heads.getBody());
    Value head = add(mulC(kvHead, group), heads.getInductionVar());
    Value slope =
        AttentionSemantics::loadAlibiSlope(b, loc, a.alibi, batch, head);
    auto tiles = scf::ForOp::create(b, loc, cIdx(0), numQ, cIdx(1),
                                    heads.getRegionIterArgs());
    scf::YieldOp::create(b, loc, tiles.getResults());
    b.setInsertionPointToStart(tiles.getBody());
    Value q0 = mulC(tiles.getInductionVar(), qt);
    Value rows = minS(cIdx(qt), arith::SubIOp::create(b, loc, nq, q0));
    Value end = sem.visitedKeyEnd(b, loc, keyEnd, q0, rows, diag);
    Value visited = cmp(arith::CmpIPredicate::slt, k0, end);
    if (Value begin = sem.visitedKeyBegin(b, loc, q0, diag))
      visited = arith::AndIOp::create(
          b, loc, visited, cmp(arith::CmpIPredicate::slt, begin, kEnd));
    ValueRange accIn = tiles.getRegionIterArgs();
    auto pair = scf::IfOp::create(b, loc, accTypes, visited, /*withElse=*/true);
    scf::YieldOp::create(b, loc, pair.getResults());
    b.setInsertionPointToStart(&pair.getElseRegion().front());
    scf::YieldOp::create(b, loc, accIn);
    b.setInsertionPointToStart(&pair.getThenRegion().front());

    // The previous pair's reads are done before the copies.
    gpu::BarrierOp::create(b, loc);
    SmallVector<Value> copied = kvCopied;
    copied.push_back(copyRows(a.q, head, q0, nq, qt, dK, qs));
    copied.push_back(copyRows(a.dO, head, q0, nq, qt, dV, dos));
    // LSE and Delta of the tile's rows: warp w's quads take rows w * 8 +
    // lane / 4 (rows qt / 8 and up of a warp past the tile idle).
    {
      Value local = add(mulC(warp, 8), laneRow);
      ifThen(cmp(arith::CmpIPredicate::ult, local, cIdx(qt)), [&] {
        auto [lse2, delta] = rowStats(a, head, add(q0, local));
        ifThen(cmp(arith::CmpIPredicate::eq, laneQuad2, cIdx(0)), [&] {
          memref::StoreOp::create(b, loc, lse2, lseS, ValueRange{local});
          memref::StoreOp::create(b, loc, delta, deltaS, ValueRange{local});
        });
      });
    }
    waitCopies(copied);
    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys.
    SmallVector<Value> s = rowTimesRowT(ks, warpRow0, qs, qt, dK);
    SmallVector<Value> dp = rowTimesRowT(vs, warpRow0, dos, qt, dV);
    SmallVector<Value> p, ds;
    for (int64_t nt = 0; nt < qt / 8; ++nt) {
      SmallVector<Value> pElems, dsElems;
      Value local[2], lse2[2], delta[2];
      for (int64_t c = 0; c < 2; ++c) {
        local[c] = addC(laneQuad2, nt * 8 + c);
        lse2[c] = memref::LoadOp::create(b, loc, lseS, ValueRange{local[c]});
        delta[c] =
            memref::LoadOp::create(b, loc, deltaS, ValueRange{local[c]});
      }
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 2; ++c) {
          auto [pv, dsv] = probabilityAndGradient(
              a, element(s[nt], r, c), element(dp[nt], r, c),
              add(q0, local[c]), key[r], lse2[c], delta[c], head, slope);
          pElems.push_back(pv);
          dsElems.push_back(dsv);
        }
      p.push_back(vector::FromElementsOp::create(b, loc, accType, pElems));
      ds.push_back(vector::FromElementsOp::create(b, loc, accType, dsElems));
    }
    SmallVector<Value> dk =
        addProduct(accIn.take_front(dK / 8), ds, qs, dK);
    SmallVector<Value> dv =
        addProduct(accIn.drop_front(dK / 8), p, dos, dV);
    dk.append(dv.begin(), dv.end());
    scf::YieldOp::create(b, loc, dk);
    b.setInsertionPointAfter(heads);
    // The K/V copies of a tile no query tile visits.
    waitGroups(kvCopied);
    scf::YieldOp::create(b, loc, heads.getResults());
  }
  SmallVector<Value> acc(work.getResults());
  ArrayRef<Value> accRef(acc);
  storeRows(accRef.take_front(dK / 8), scale, a.dk, kvHead, k0, nk, dK);
  storeRows(accRef.drop_front(dK / 8), 1.0f, a.dv, kvHead, k0, nk, dV);
  gpu::ReturnOp::create(b, loc);
}

//===----------------------------------------------------------------------===//
// Outlining
//===----------------------------------------------------------------------===//

void BackwardMmaBuilder::build(ModuleOp module, func::FuncOp func,
                               const BackwardKernelOperands &args) {
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(ctx));
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  gpuModule =
      gpu::GPUModuleOp::create(mb, loc, (func.getName() + "_kernels").str());
  auto makeKernel = [&](StringRef name) {
    gpu::GPUFuncOp kernel =
        createKernelFunc(gpuModule, func, name, cfg.numThreads());
    auto remap = [&](Value v) { return remapIntoKernel(kernel, v); };
    BackwardKernelOperands k{remap(args.q),         remap(args.k),
                             remap(args.v),         remap(args.o),
                             remap(args.lse),       remap(args.dO),
                             remap(args.kvLens),    remap(args.mask),
                             remap(args.alibi),     remap(args.qSegments),
                             remap(args.kSegments), remap(args.qOffset),
                             remap(args.dq),        remap(args.dk),
                             remap(args.dv)};
    return std::make_pair(kernel, k);
  };
  auto [dqKernel, dqArgs] = makeKernel(func.getName());
  kernelName = func.getName().str();
  buildQueryKernel(dqKernel, dqArgs);
  auto [dkdvKernel, dkdvArgs] = makeKernel((func.getName() + "_dkdv").str());
  kernelName = (func.getName() + "_dkdv").str();
  buildKeyKernel(dkdvKernel, dkdvArgs);
  approximateTanhForNVVM(dqKernel);
  approximateTanhForNVVM(dkdvKernel);

  // Host side: the body (the op with it) becomes the two launches.
  int64_t queryHeads = op.getQueryHeads(), kvHeads = op.getKvHeads();
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  SmallVector<Operation *> toErase;
  for (Operation &o : llvm::reverse(body.without_terminator()))
    toErase.push_back(&o);
  for (Operation *o : toErase)
    o->erase();
  OpBuilder hb(ret);
  auto cst = [&](int64_t v) {
    return arith::ConstantIndexOp::create(hb, loc, v);
  };
  Value batches = memref::DimOp::create(hb, loc, args.q, 0);
  Value qTiles = arith::CeilDivUIOp::create(
      hb, loc, memref::DimOp::create(hb, loc, args.q, 2), cst(cfg.blockQ));
  Value kTiles = arith::CeilDivUIOp::create(
      hb, loc, memref::DimOp::create(hb, loc, args.k, 2), cst(cfg.blockKV));
  Value threads = cst(cfg.numThreads()), one = cst(1);
  gpu::LaunchFuncOp::create(
      hb, loc, dqKernel,
      gpu::KernelDim3{qTiles, cst(queryHeads), batches},
      gpu::KernelDim3{threads, one, one}, Value(),
      ValueRange(func.getArguments()));
  gpu::LaunchFuncOp::create(
      hb, loc, dkdvKernel,
      gpu::KernelDim3{kTiles, cst(kvHeads), batches},
      gpu::KernelDim3{threads, one, one}, Value(),
      ValueRange(func.getArguments()));
  setGpuConfig(func, cfg.blockQ, cfg.blockKV, cfg.numThreads(),
               {"backward", "tensor_cores"});
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FAMapToTensorCoresBackwardPass final
    : fa::impl::FAMapToTensorCoresBackwardPassBase<
          FAMapToTensorCoresBackwardPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void FAMapToTensorCoresBackwardPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<std::tuple<func::FuncOp, AttentionBackwardOp,
                         BackwardKernelOperands>>
      work;
  for (auto func : module.getOps<func::FuncOp>()) {
    SmallVector<AttentionBackwardOp> ops(func.getOps<AttentionBackwardOp>());
    if (ops.size() != 1 || !isTensorCoreBackwardEligible(ops.front()))
      continue;
    FailureOr<BackwardKernelOperands> args =
        matchBackwardKernelForm(ops.front());
    if (failed(args))
      continue;
    // Every memref a function argument (the kernels' parameters), the
    // q_offset an argument or a constant.
    auto isArg = [](Value v) { return !v || isa<BlockArgument>(v); };
    const BackwardKernelOperands &x = *args;
    if (!llvm::all_of(ValueRange{x.q, x.k, x.v, x.o, x.lse, x.dO, x.dq, x.dk,
                                 x.dv},
                      isArg) ||
        !isArg(x.kvLens) || !isArg(x.mask) || !isArg(x.alibi) ||
        !isArg(x.qSegments) || !isArg(x.kSegments) ||
        !(isArg(x.qOffset) || matchPattern(x.qOffset, m_Constant())))
      continue;
    if (failed(verifyKernelResultUses(ops.front(), getArgument())))
      return signalPassFailure();
    work.push_back({func, ops.front(), *args});
  }
  for (auto &[func, op, args] : work) {
    BackwardMmaConfig cfg = chooseConfig(op);
    // Static workgroup memory: 48 KiB per block on every chip.
    constexpr int64_t kStaticSharedLimit = 48 * 1024;
    if (cfg.queryKernelBytes() > kStaticSharedLimit ||
        cfg.keyKernelBytes() > kStaticSharedLimit) {
      op.emitError() << getArgument() << ": the tiles need "
                     << cfg.queryKernelBytes() << " and "
                     << cfg.keyKernelBytes()
                     << " bytes of static workgroup memory, more than "
                     << kStaticSharedLimit;
      return signalPassFailure();
    }
    BackwardMmaBuilder(op, cfg).build(module, func, args);
  }
}
