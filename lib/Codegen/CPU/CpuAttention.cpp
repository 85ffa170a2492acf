//===- CpuAttention.cpp - register-blocked vector attention for CPUs ------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers fa.attention in kernel form (memref arguments -> to_tensor ->
// fa.attention -> materialize_in_destination) to memref-level loops on
// explicit SIMD vectors. The score tile is computed transposed (S^T: keys x
// queries) so that every query owns one vector lane: the online softmax
// (running max, rescale, running sum) is then purely elementwise across
// lanes and needs no horizontal reductions. See the pass description in
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "fa/Codegen/CPU/RegisterBlocks.h"
#include "fa/Codegen/Common/KernelForm.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"
#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/Iterators.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"

#include <limits>
#include <numeric>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FACPUATTENTIONPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The longest of the `numSeqs` query sequences that the offsets
/// `cuSeqlens` cut out of the token-major `q` ([Tq, Hq, D]).
static Value longestSequence(OpBuilder &b, Location loc, Value cuSeqlens,
                             Value q, Value numSeqs) {
  Value total = memref::DimOp::create(b, loc, q, 0);
  auto zero = arith::ConstantIndexOp::create(b, loc, 0);
  auto loop = scf::ForOp::create(
      b, loc, zero, numSeqs, arith::ConstantIndexOp::create(b, loc, 1),
      ValueRange{zero},
      [&](OpBuilder &lb, Location, Value s, ValueRange longest) {
        AttentionSemantics::Sequence seq =
            AttentionSemantics::loadSequence(lb, loc, cuSeqlens, s, total);
        scf::YieldOp::create(
            lb, loc,
            arith::MaxSIOp::create(lb, loc, longest[0], seq.length)
                .getResult());
      });
  return loop.getResult(0);
}

/// Tile and register-block sizes of one kernel.
struct CpuKernelConfig {
  /// f32 lanes per vector.
  int64_t vw = 16;
  /// Query rows per tile (a multiple of vw and of pvRows).
  int64_t blockQ = 64;
  /// Keys per key/value tile.
  int64_t blockKV = 64;
  /// Keys per register block of the S^T micro-kernel.
  int64_t keyRows = 6;
  /// Query rows per register block of the P V micro-kernel.
  int64_t pvRows = 4;
  /// Vectors of Dv per register block of the P V micro-kernel (0:
  /// cpu::balancedVectorBlock).
  int64_t pvVectors = 0;
  /// The forall will run in parallel (scratch per iteration).
  bool parallel = false;
  /// Decode tiles: the rows of a query tile are (query, head) pairs of the
  /// Hq / Hkv query heads that share a key/value head, query-major (row r
  /// of the packed sequence is query r / G of head kvHead * G + r % G), so
  /// that each K/V tile is read once per group instead of once per query
  /// head.
  bool packGroup = false;
  /// Decode tiles over a paged cache (with packGroup): one tile holds the
  /// packed rows of every kv head, with a row state per kv head, and each
  /// key tile is visited for all kv heads in turn, so that a page, whose
  /// rows interleave the kv heads ([S, Hkv, D]), is read whole and in
  /// order instead of one D-row every Hkv rows per tile.
  bool allKvHeads = false;
  /// Independent partial sums over d per S^T accumulator.
  int64_t dSplit = 1;
  /// bf16 inputs: S^T and P V as AVX512_BF16 dot products on pairs
  /// (vdpbf16ps), P rounded to bf16 (CpuKernelBuilder::bf16Dot says where
  /// it applies).
  bool bf16Dot = false;
};

/// Split-KV: the workspace the splits of a decode kernel write their
/// partial (O, LSE) to, [S, B, Hq, Nq, Dv] and [S, B, Hq, Nq] f32, and the
/// number of splits S (an index).
struct KVSplits {
  Value o, lse, count;
};

/// Query vectors per register block of the S^T micro-kernel: key-rows x 4
/// accumulators and 4 Q^T vectors fill the 32 AVX-512 (16 AVX2) vector
/// registers.
constexpr int64_t kScoreQueryVectors = 4;

/// How many keys ahead of the S^T register block its in-place K rows are
/// prefetched (CpuKernelBuilder::keyPrefetchAhead): far enough that a row
/// arrives from memory before the micro-kernel reaches it (16 to 256 keys
/// measured alike), near enough to stay in L2.
constexpr int64_t kScoreKeyPrefetch = 64;

/// Builds the kernel for one fa.attention.
class CpuKernelBuilder {
public:
  CpuKernelBuilder(AttentionOp op, const KernelOperands &args,
                   const CpuKernelConfig &cfg, KVSplits splits = {})
      : op(op), args(args), cfg(cfg), loc(op.getLoc()), splits(splits) {}

  /// Emits the kernel at `b`; the caller erases the tensor-level ops.
  void build(OpBuilder &b);

private:
  // Small builders.
  Value cIdx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value cF32(OpBuilder &b, float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value splatF32(OpBuilder &b, float v) {
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vecType, b.getF32FloatAttr(v)));
  }
  Value bcast(OpBuilder &b, Value scalar) {
    return vector::BroadcastOp::create(b, loc, vecType, scalar);
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
  Value maxI(OpBuilder &b, Value x, Value y) {
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value toF32(OpBuilder &b, Value v) {
    Type t = v.getType();
    Type f32 = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(t)) {
      if (vt.getElementType().isF32())
        return v;
      return arith::ExtFOp::create(b, loc, VectorType::get(vt.getShape(), f32),
                                   v);
    }
    if (t.isF32())
      return v;
    return arith::ExtFOp::create(b, loc, f32, v);
  }
  Value vload(OpBuilder &b, Value mem, ValueRange idx) {
    return vector::LoadOp::create(b, loc, vecType, mem, idx);
  }
  void vstore(OpBuilder &b, Value v, Value mem, ValueRange idx) {
    vector::StoreOp::create(b, loc, v, mem, idx);
  }
  Value fma(OpBuilder &b, Value x, Value y, Value acc) {
    return vector::FMAOp::create(b, loc, x, y, acc);
  }
  /// A 64-byte aligned f32 scratch buffer on the stack.
  Value scratch(OpBuilder &b, ArrayRef<int64_t> shape, Type type = {}) {
    return memref::AllocaOp::create(
        b, loc, MemRefType::get(shape, type ? type : b.getF32Type()),
        ValueRange{}, b.getI64IntegerAttr(64));
  }
  /// scf.for lb..ub step 1 without iter_args.
  void loop(OpBuilder &b, Value lb, Value ub,
            function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(b, loc, lb, ub, cIdx(b, 1), ValueRange{},
                       [&](OpBuilder &lb2, Location, Value i, ValueRange) {
                         body(lb2, i);
                         scf::YieldOp::create(lb2, loc);
                       });
  }
  /// Reads `count` elements of the innermost dim of a 4-d memref row at
  /// `idx` as a vector<vw x f32>, padding past the end with `pad` (of the
  /// element type).
  Value readRow(OpBuilder &b, Value mem, ValueRange idx, int64_t col,
                int64_t rowLen) {
    return toF32(b, rawRow(b, mem, idx, col, rowLen));
  }
  /// The range of the i32 segment ids `ids[batch, first + i]` for i in
  /// [0, count): vectors of vw lanes, masked past `count` (at most
  /// `maxCount`, a static bound).
  AttentionSemantics::SegmentRange segmentRange(OpBuilder &b, Value ids,
                                                Value first, Value count,
                                                int64_t maxCount) {
    Type i32 = b.getI32Type();
    auto vt = VectorType::get({cfg.vw}, i32);
    auto maskType = VectorType::get({cfg.vw}, b.getI1Type());
    auto splat = [&](int32_t v) -> Value {
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vt, b.getI32IntegerAttr(v)));
    };
    Value vmin = splat(std::numeric_limits<int32_t>::max());
    Value vmax = splat(std::numeric_limits<int32_t>::min());
    Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(i32));
    for (int64_t c = 0; c < maxCount; c += cfg.vw) {
      Value left = sub(b, count, cIdx(b, c));
      Value lanes =
          vector::CreateMaskOp::create(b, loc, maskType, ValueRange{left});
      Value x = vector::TransferReadOp::create(
          b, loc, vt, ids, ValueRange{batch, add(b, first, cIdx(b, c))}, pad,
          ArrayRef<bool>{false});
      vmin = arith::MinSIOp::create(
          b, loc, vmin,
          arith::SelectOp::create(b, loc, lanes, x,
                                  splat(std::numeric_limits<int32_t>::max())));
      vmax = arith::MaxSIOp::create(
          b, loc, vmax,
          arith::SelectOp::create(b, loc, lanes, x,
                                  splat(std::numeric_limits<int32_t>::min())));
    }
    return {
        vector::ReductionOp::create(b, loc, vector::CombiningKind::MINSI, vmin),
        vector::ReductionOp::create(b, loc, vector::CombiningKind::MAXSI,
                                    vmax)};
  }
  /// Fills an f32 scratch buffer whose innermost dim is a multiple of vw.
  void fill(OpBuilder &b, Value mem, float value) {
    auto shape = cast<MemRefType>(mem.getType()).getShape();
    Value v = splatF32(b, value);
    if (shape.size() == 1) {
      for (int64_t c = 0; c < shape[0]; c += cfg.vw)
        vstore(b, v, mem, {cIdx(b, c)});
      return;
    }
    loop(b, cIdx(b, 0), cIdx(b, shape[0]), [&](OpBuilder &lb, Value r) {
      for (int64_t c = 0; c < shape[1]; c += cfg.vw)
        vstore(lb, v, mem, {r, cIdx(lb, c)});
    });
  }

  // Kernel stages.
  void allocScratch(OpBuilder &b);
  void buildTile(OpBuilder &b, ValueRange ivs);
  void buildTileBody(OpBuilder &b, Value tile);
  /// The per-tile vectors of the modifiers' lanes (qPos, qSeg, laneHead,
  /// laneSlope) for the current kvHead.
  void buildLanes(OpBuilder &b);
  /// The row state's initial values and the tile's scaled Q (current
  /// kvHead).
  void buildRowsPrologue(OpBuilder &b);
  /// With allKvHeads: kvHead = h and the row state of head h.
  void bindKvHead(OpBuilder &b, Value h);
  /// The longest query sequence of a variable-length batch of B sequences.
  Value longestQuerySequence(OpBuilder &b, Value numSeqs);
  /// The first key and the key count of key tile `j` of the visited range.
  std::pair<Value, Value> keyTile(OpBuilder &b, Value j);
  void buildKVStep(OpBuilder &b, Value j);
  /// `maskModPartial` (i1, null without a block mask): the block mask
  /// marks the tile partial for the mask_mod.
  void buildKVTile(OpBuilder &b, Value k0, Value kCols,
                   const AttentionSemantics::SegmentRange *kSegRange,
                   Value maskModPartial = Value());
  void buildScores(OpBuilder &b, Value k0, Value kCols);
  void buildDotScores(OpBuilder &b, Value k0, Value kCols);
  /// Block `blk` of kKeys keys of the key tile [k0, k0 + kCols) that the
  /// dot-product scores visit together: their columns in S^T (the last
  /// block's clamped to the tile's last key, whose score is then written
  /// again) and the leading indices of their K and V rows (kvRow), with the
  /// rows prefetchAhead keys ahead prefetched.
  struct KeyBlock {
    SmallVector<Value> cols;
    SmallVector<SmallVector<Value>> rows;
  };
  KeyBlock keyBlock(OpBuilder &b, Value k0, Value kCols, Value blk,
                    int64_t kKeys);
  void buildDotScorePairs(OpBuilder &b, Value k0, Value kCols);
  void buildDotScoreBlocks(OpBuilder &b, Value k0, Value kCols, int64_t kRows);
  /// vw vectors of vw lanes -> one vector whose lane i is the sum of the
  /// lanes of acc[i].
  Value transposeReduce(OpBuilder &b, SmallVector<Value> acc);
  void buildSoftmax(OpBuilder &b, Value k0, Value kCols, Value needMask);
  SmallVector<Value> buildScoreModsAndMax(OpBuilder &b, Value k0, Value kCols,
                                          bool removeKeys);
  void buildPV(OpBuilder &b, Value k0, Value kCols, bool guardMasked);
  void buildF32PV(OpBuilder &b, Value k0, Value kCols, bool guardMasked);
  /// The register blocks of P V: for each block of pv-rows query rows and
  /// each group of at most pv-vectors vectors of Dv, the accumulators start
  /// as alpha * acc, `keys` carries them over the tile's keys (given the
  /// rows, the group's first vector, its size and the start values) and
  /// they are stored back.
  using PVKeyLoop = llvm::function_ref<SmallVector<Value>(
      OpBuilder &, ArrayRef<Value> rowIdx, int64_t g0, int64_t nv,
      ValueRange inits)>;
  void buildPVBlocks(OpBuilder &b, PVKeyLoop keys);
  // The bf16 dot-product kernel (bf16Dot).
  Value bf16PairBroadcast(OpBuilder &b, Value mem, ValueRange idx);
  Value rawRow(OpBuilder &b, Value mem, ValueRange idx, int64_t col,
               int64_t rowLen);
  void buildBf16Scores(OpBuilder &b, Value k0, Value kCols);
  /// Pair p of a tile's keys: the rows 2p and 2p + 1 of the tile and
  /// whether the second is inside it (2p + 1 < kCols).
  std::tuple<Value, Value, Value> keyPair(OpBuilder &b, Value p, Value kCols) {
    Value j = mul(b, p, cIdx(b, 2));
    Value j1 = add(b, j, cIdx(b, 1));
    return {j, j1,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j1,
                                  kCols)};
  }
  void buildBf16ValuePairs(OpBuilder &b, Value k0, Value kCols);
  /// Whether some tile may take the guarded P V (a mask, causality or a
  /// positional modifier removes keys), which with bf16 dot products reads
  /// P in f32 and needs vNonFinite.
  bool mayGuardValues() const {
    return args.mask || positionalMods || sem.isCausal();
  }
  SmallVector<Value> buildBf16Probabilities(OpBuilder &b, Value kCols,
                                            ArrayRef<Value> mUse);
  void buildBf16PV(OpBuilder &b, Value kCols);
  void buildEpilogue(OpBuilder &b);

  AttentionOp op;
  KernelOperands args;
  CpuKernelConfig cfg;
  Location loc;
  /// Split-KV (null members without): iteration `split` of the forall's
  /// fourth dim visits the split-th of `splits.count` runs of the tile's
  /// key tiles and writes its partial result to the workspace.
  KVSplits splits;
  Value split;
  VectorType vecType;
  Type elt;
  int64_t headDim = 0, valueDim = 0, headDimPad = 0, valueDimPad = 0;
  int64_t group = 1, keyRowsPad = 0;
  /// f32 K (and V with Dv a multiple of the vector width) are read in place
  /// instead of being packed per tile.
  bool directK = false, directV = false;
  /// bf16 inputs through AVX512_BF16 dot products (cfg.bf16Dot, query
  /// tiles of one head, 16 lanes, D even): Q is packed as bf16 pairs along
  /// d (qPairs [D / 2, 2 bq]: row p holds Q[r][2p], Q[r][2p + 1] for every
  /// row r), K pairs are broadcast from their rows in place, and each
  /// vdpbf16ps adds two products per lane; P V pairs the keys instead:
  /// the V tile as pairs of rows (vPairs [ceil(bkv / 2), 2 Dv]) and P
  /// rounded to bf16, paired the same way (pPairs [ceil(bkv / 2), 2 bq]).
  bool bf16Dot = false;
  Value qPairs, vPairs, pPairs;
  /// With bf16Dot, per key tile: whether its V rows hold an inf or a NaN
  /// (null where no tile is guarded). The dot products cannot skip a
  /// removed key per row, and 0 * NaN is NaN, so a guarded tile with such
  /// a row takes the f32 P V with its per-key select instead.
  Value vNonFinite;
  /// Decode tiles (packed heads, few rows): S as dot products of each K
  /// row, read once in place, with the rows' scaled Q (qR), instead of
  /// broadcasting K elements against Q^T vectors whose lanes are mostly
  /// empty.
  bool dotScores = false;
  /// Decode tiles over a paged cache: the K and V rows of the key this many
  /// keys ahead are prefetched into L2 as each key is read (0: none). The
  /// hardware prefetchers stream a contiguous cache, but a paged one jumps
  /// to another page every S keys (and, with several kv heads, reads one
  /// row every Hkv rows): on the machine of docs/performance.md the S = 16
  /// decode step took 2.4x the contiguous time without it, 1.3x with it.
  /// (A contiguous cache runs slower with it.)
  int64_t prefetchAhead = 0;
  /// Query tiles whose S^T micro-kernel reads K in place (the f32 kernel's
  /// broadcasts, the bf16 dot kernel's pairs): as each register block of
  /// keys starts, the K rows this many keys ahead are prefetched into L2
  /// (0: none). The micro-kernel walks key-rows rows at once along d, 4
  /// bytes a step, a pattern the hardware prefetchers follow poorly once
  /// K no longer fits the last-level cache: on the Zen 4 host of
  /// docs/performance.md one thread at N = 16384, D = 128 ran 5-15%
  /// faster with it, N = 4096 (K in L3) within the noise.
  int64_t keyPrefetchAhead = 0;
  /// The token-major variable-length form (cu_seqlens): Q, O [Tq, Hq, D],
  /// K, V [Tk, Hkv, D], LSE [Hq, Tq]; per tile, the first query row and
  /// key of the tile's sequence.
  bool varlen = false;
  Value qStart, kStart;
  float scale = 1.0f;
  AttentionSemantics sem;
  bool maskBroadcastsBatch = false, maskBroadcastsHeads = false;
  /// A window, a chunk, segment ids or a mask_mod: modifiers that remove
  /// keys inside the visited range, decided per (query tile, key tile).
  bool positionalMods = false;

  // Per tile.
  Value numTiles, batch, head, kvHead, q0, qRows, nq, nk, diagOffset, kvBegin,
      kvEnd;
  /// The ALiBi slope of (batch, head) (f32; null without ALiBi).
  Value slope;
  /// Per query vector of the tile: the query positions (vector of index)
  /// and, with segments, the query segment ids (vector of i32).
  SmallVector<Value> qPos, qSeg;
  /// With segments: the id range of the tile's query rows.
  AttentionSemantics::SegmentRange qSegRange;
  Value qT, qR, kP, vP, sT, mT, oAcc, mBuf, lBuf, aBuf;
  /// With allKvHeads: qR, oAcc, mBuf and lBuf of every kv head (a leading
  /// dim of Hkv); bindKvHead points the per-head names at one head's.
  Value qRAll, oAccAll, mBufAll, lBufAll;
  /// Where the K and V rows are read: the operands, or with allKvHeads the
  /// staged copy of the current key tile, [blockKV, Hkv, D(v) padded] f32,
  /// whose row 0 is key stageStart (null: not staged).
  Value kSrc, vSrc, kStage, vStage, stageStart;
  /// The tile's first row and its row count; without packGroup the rows
  /// are the queries [q0, q0 + qRows), with it [q0, q0 + qRows) is the
  /// range of queries the rows hold.
  Value r0, rows;
  /// With packGroup: per vector of lanes, the query head of each lane
  /// (vector of index) and its ALiBi slope (vector of f32).
  SmallVector<Value> laneHead, laneSlope;

  /// The leading indices of key `key`'s K and V rows in kSrc and vSrc:
  /// (key - stageStart, kv head) in the staged key tile, (batch, kv head,
  /// key), or in a paged cache (page, row of the page, kv head) with the
  /// page block_table[batch, key / S] clamped to [0, P - 1] (a bad table
  /// cannot make the kernel read outside the cache).
  SmallVector<Value> kvRow(OpBuilder &b, Value key) {
    if (stageStart)
      return {sub(b, key, stageStart), kvHead};
    if (varlen)
      return {add(b, kStart, key), kvHead};
    if (!args.blockTable)
      return {batch, kvHead, key};
    AttentionSemantics::PagedRow at = AttentionSemantics::pagedKeyRow(
        b, loc, args.blockTable, args.k, op.getPageSize(), batch, key);
    return {at.page, at.row, kvHead};
  }

  /// Prefetches (into L2) every cache line of the K row, and with
  /// `values` the V row, of key `key` + `ahead`, clamped to the last
  /// visited key.
  void prefetchKeyRows(OpBuilder &b, Value key, int64_t ahead, bool values) {
    Value at = minI(b, add(b, key, cIdx(b, ahead)), sub(b, kvEnd, cIdx(b, 1)));
    SmallVector<Value> row = kvRow(b, at);
    int64_t lineElements = 64 / (elt.getIntOrFloatBitWidth() / 8);
    SmallVector<std::pair<Value, int64_t>> rows = {{args.k, headDim}};
    if (values)
      rows.push_back({args.v, valueDim});
    for (auto [mem, width] : rows)
      for (int64_t c = 0; c < width; c += lineElements)
        memref::PrefetchOp::create(b, loc, mem, withLast(row, cIdx(b, c)),
                                   /*isWrite=*/false, /*localityHint=*/2,
                                   /*isDataCache=*/true);
  }

  /// Prefetches the K rows keyPrefetchAhead keys past those of the
  /// register block of `count` keys from key `first` (no-op when off).
  void prefetchBlockKeys(OpBuilder &b, Value first, int64_t count) {
    if (!keyPrefetchAhead)
      return;
    for (int64_t i = 0; i < count; ++i)
      prefetchKeyRows(b, add(b, first, cIdx(b, i)), keyPrefetchAhead,
                      /*values=*/false);
  }

  /// The leading indices of query `q` of head `h` in Q and O (the
  /// innermost index, d, follows), and its index in LSE.
  SmallVector<Value> qRow(OpBuilder &b, Value h, Value q) {
    if (varlen)
      return {add(b, qStart, q), h};
    return {batch, h, q};
  }
  SmallVector<Value> lseIndex(OpBuilder &b, Value h, Value q) {
    if (varlen)
      return {h, add(b, qStart, q)};
    return {batch, h, q};
  }

  /// `lead` followed by `last`.
  static SmallVector<Value> withLast(ArrayRef<Value> lead, Value last) {
    SmallVector<Value> at(lead);
    at.push_back(last);
    return at;
  }

  /// The query and query head of tile row `r` (an index).
  Value rowQuery(OpBuilder &b, Value r) {
    Value row = add(b, r0, r);
    return cfg.packGroup
               ? AttentionSemantics::unpackGqaRow(b, loc, row, kvHead, group)
                     .query
               : row;
  }
  Value rowHead(OpBuilder &b, Value r) {
    if (!cfg.packGroup)
      return head;
    return AttentionSemantics::unpackGqaRow(b, loc, add(b, r0, r), kvHead,
                                            group)
        .head;
  }
};

} // namespace

void CpuKernelBuilder::build(OpBuilder &b) {
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  elt = qType.getElementType();
  (void)vType;
  headDim = op.getHeadDim();
  valueDim = op.getValueHeadDim();
  varlen = static_cast<bool>(args.cuSeqlensQ);
  headDimPad = llvm::divideCeil(headDim, cfg.vw) * cfg.vw;
  valueDimPad = llvm::divideCeil(valueDim, cfg.vw) * cfg.vw;
  keyRowsPad = llvm::divideCeil(cfg.blockKV, cfg.keyRows) * cfg.keyRows;
  group = op.getGroupSize();
  scale = op.getEffectiveScale();
  sem = AttentionSemantics::get(op);
  positionalMods = sem.hasWindowLeft() || sem.hasWindowRight() ||
                   sem.hasChunk() || sem.hasSegments() || sem.hasMaskMod();
  vecType = VectorType::get({cfg.vw}, b.getF32Type());
  // Decode tiles (packGroup) take their scores as dot products of K rows
  // read in place (dotScores) when D is a multiple of the vector width;
  // otherwise they copy the K tile first, row by row, as the broadcast
  // micro-kernel with few rows cannot hide the latency of reading eight
  // rows at once along d.
  directK = elt.isF32() && !cfg.packGroup && !args.blockTable;
  dotScores = cfg.packGroup && headDim % cfg.vw == 0;
  bf16Dot = cfg.bf16Dot && elt.isBF16() && !cfg.packGroup && cfg.vw == 16 &&
            headDim % 2 == 0;
  if (bf16Dot)
    keyRowsPad = llvm::alignTo(keyRowsPad, 2);
  prefetchAhead =
      dotScores && args.blockTable && !cfg.allKvHeads ? cfg.blockKV : 0;
  keyPrefetchAhead = (directK || bf16Dot) ? kScoreKeyPrefetch : 0;
  kSrc = args.k;
  vSrc = args.v;
  // V rows are read in place, through the block table for a paged cache
  // (kvRow), except in the token-major varlen form's prefill tiles: there
  // a head's V rows lie Hkv x Dv elements apart (4 KiB for 8 heads of 128
  // f32), so the rows of a tile fall in the same few L1 sets and pages,
  // and P V, which reads the tile once per block of query rows, ran at
  // about two thirds of its speed on the dense layout (Ice Lake host).
  // Decode tiles (packGroup) read each V row once and keep them in place.
  directV =
      (elt.isF32() && valueDim % cfg.vw == 0 && !(varlen && !cfg.packGroup)) ||
      cfg.allKvHeads;
  if (args.mask) {
    auto mType = cast<MemRefType>(args.mask.getType());
    maskBroadcastsBatch = mType.getDimSize(0) == 1;
    maskBroadcastsHeads = mType.getDimSize(1) == 1;
  }

  Value gB, gNq;
  if (varlen) {
    // B sequences (the offsets have B + 1 entries); the query tiles cover
    // the longest one, the tiles past a shorter one's end are skipped.
    gB = maxI(
        b,
        sub(b, memref::DimOp::create(b, loc, args.cuSeqlensQ, 0), cIdx(b, 1)),
        cIdx(b, 0));
    gNq = longestQuerySequence(b, gB);
  } else {
    gB = memref::DimOp::create(b, loc, args.q, 0);
    gNq = memref::DimOp::create(b, loc, args.q, 2);
  }
  // With packGroup the rows of a (batch, kv head) are Nq x G (query, head)
  // pairs.
  Value packedRows = cfg.packGroup ? mul(b, gNq, cIdx(b, group)) : gNq;
  int64_t heads = cfg.allKvHeads  ? 1
                  : cfg.packGroup ? op.getKvHeads()
                                  : qType.getDimSize(1);
  Value tiles =
      arith::CeilDivUIOp::create(b, loc, packedRows, cIdx(b, cfg.blockQ));
  numTiles = tiles;
  // Variable lengths: heads outermost, so that the static schedule of a
  // parallel forall gives each thread whole heads (the same work each)
  // however ragged the sequences are.
  SmallVector<OpFoldResult> bounds =
      varlen ? SmallVector<OpFoldResult>{b.getIndexAttr(heads), gB, tiles}
             : SmallVector<OpFoldResult>{gB, b.getIndexAttr(heads), tiles};
  if (splits.count)
    bounds.push_back(splits.count);
  auto forall =
      scf::ForallOp::create(b, loc, bounds, ValueRange{}, std::nullopt);
  OpBuilder fb = OpBuilder::atBlockBegin(forall.getBody());
  // Scratch: for a sequential loop, one set before the loop; for a
  // parallel one, a set per iteration (each OpenMP iteration body becomes
  // an alloca scope, so threads never share buffers and the stack does not
  // grow). A loop that is not an allocation scope (scf.for, what
  // scf-forall-to-for makes of the forall) must not hold allocas.
  if (cfg.parallel) {
    allocScratch(fb);
  } else {
    OpBuilder ab(forall);
    allocScratch(ab);
  }
  buildTile(fb, forall.getInductionVars());
}

Value CpuKernelBuilder::longestQuerySequence(OpBuilder &b, Value numSeqs) {
  return longestSequence(b, loc, args.cuSeqlensQ, args.q, numSeqs);
}

void CpuKernelBuilder::allocScratch(OpBuilder &b) {
  int64_t bq = cfg.blockQ;
  if (cfg.allKvHeads) {
    // The row state of every kv head; sT, aBuf (and mT) hold one key tile
    // of one head at a time and are shared.
    int64_t hkv = op.getKvHeads();
    qRAll = scratch(b, {hkv, bq, headDim});
    oAccAll = scratch(b, {hkv, bq, valueDimPad});
    mBufAll = scratch(b, {hkv, bq});
    lBufAll = scratch(b, {hkv, bq});
    sT = scratch(b, {keyRowsPad, bq});
    if (args.mask)
      mT = scratch(b, {cfg.blockKV, bq});
    aBuf = scratch(b, {bq});
    kStage = scratch(b, {cfg.blockKV, hkv, headDimPad});
    vStage = scratch(b, {cfg.blockKV, hkv, valueDimPad});
    return;
  }
  if (bf16Dot) {
    Type bf16 = b.getBF16Type();
    int64_t pairs = llvm::divideCeil(cfg.blockKV, 2);
    qPairs = scratch(b, {headDim / 2, 2 * bq}, bf16);
    vPairs = scratch(b, {pairs, 2 * valueDimPad}, bf16);
    pPairs = scratch(b, {pairs, 2 * bq}, bf16);
  } else if (dotScores) {
    qR = scratch(b, {bq, headDim});
  } else {
    qT = scratch(b, {headDim, bq});
  }
  if (!directK && !dotScores && !bf16Dot)
    kP = scratch(b, {keyRowsPad, headDimPad});
  if (!directV && !bf16Dot)
    vP = scratch(b, {cfg.blockKV, valueDimPad});
  sT = scratch(b, {keyRowsPad, bq});
  if (args.mask)
    mT = scratch(b, {cfg.blockKV, bq});
  oAcc = scratch(b, {bq, valueDimPad});
  mBuf = scratch(b, {bq});
  lBuf = scratch(b, {bq});
  aBuf = scratch(b, {bq});
}

void CpuKernelBuilder::buildTile(OpBuilder &b, ValueRange ivs) {
  batch = varlen ? ivs[1] : ivs[0];
  split = splits.count ? ivs[3] : Value();
  if (cfg.packGroup) {
    // The lanes' heads are per row (rowHead, laneHead); with allKvHeads
    // kvHead is bound per head (bindKvHead).
    kvHead = varlen ? ivs[0] : ivs[1];
    head = Value();
  } else {
    head = varlen ? ivs[0] : ivs[1];
    kvHead = group == 1
                 ? head
                 : Value(arith::DivUIOp::create(b, loc, head, cIdx(b, group)));
  }
  if (varlen) {
    // The tile's sequence: its rows and keys are Nq and Nk of every rule;
    // the query tiles past its rows are empty.
    AttentionSemantics::SequencePair seq = AttentionSemantics::loadSequences(
        b, loc, args.cuSeqlensQ, args.cuSeqlensK, batch, args.q, args.k);
    qStart = seq.queries.start;
    nq = seq.queries.length;
    kStart = seq.keys.start;
    nk = seq.keys.length;
    Value packedRows = cfg.packGroup ? mul(b, nq, cIdx(b, group)) : nq;
    numTiles =
        arith::CeilDivUIOp::create(b, loc, packedRows, cIdx(b, cfg.blockQ));
    Value inSequence = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             ivs[2], numTiles);
    scf::IfOp::create(b, loc, inSequence, [&](OpBuilder &tb, Location) {
      buildTileBody(tb, ivs[2]);
      scf::YieldOp::create(tb, loc);
    });
    return;
  }
  nq = memref::DimOp::create(b, loc, args.q, 2);
  // A paged cache stands for Nk = M x S keys.
  nk = args.blockTable ? AttentionSemantics::pagedKeyCount(
                             b, loc, args.blockTable, op.getPageSize())
                       : Value(memref::DimOp::create(b, loc, args.k, 2));
  buildTileBody(b, ivs[2]);
}

void CpuKernelBuilder::buildTileBody(OpBuilder &b, Value tile) {
  if (cfg.parallel && sem.isCausal()) {
    // Causal work grows along the query tiles of a head. Iteration t takes
    // tile t / 2 when t is even and T - 1 - t / 2 when odd (0, T-1, 1,
    // T-2, ...), so any contiguous run of iterations, what the static
    // OpenMP schedule gives a thread, pairs light and heavy tiles even when
    // the threads split a head.
    Value half = arith::DivUIOp::create(b, loc, tile, cIdx(b, 2));
    Value odd = arith::TruncIOp::create(
        b, loc, b.getI1Type(),
        arith::IndexCastUIOp::create(
            b, loc, b.getI64Type(),
            arith::RemUIOp::create(b, loc, tile, cIdx(b, 2))));
    Value mirrored = sub(b, sub(b, numTiles, cIdx(b, 1)), half);
    tile = arith::SelectOp::create(b, loc, odd, mirrored, half);
  }
  r0 = mul(b, tile, cIdx(b, cfg.blockQ));
  if (cfg.packGroup) {
    // Rows [r0, r0 + rows) of the packed sequence hold the queries
    // [r0 / G, (r0 + rows - 1) / G]: the key range, the tile classes and
    // the segment-id range below are those of these queries.
    Value g = cIdx(b, group);
    rows = minI(b, cIdx(b, cfg.blockQ), sub(b, mul(b, nq, g), r0));
    AttentionSemantics::QueryRange range =
        AttentionSemantics::packedQueryRange(b, loc, r0, rows, group);
    q0 = range.q0;
    qRows = range.count;
  } else {
    q0 = r0;
    qRows = minI(b, cIdx(b, cfg.blockQ), sub(b, nq, q0));
    rows = qRows;
  }
  // Only the keys [kvBegin, kvEnd) are visited: key lengths, causality, the
  // window and the chunk remove every other key for every row of the tile.
  Value zero = cIdx(b, 0);
  Value len;
  if (args.kvLens)
    len = memref::LoadOp::create(b, loc, args.kvLens, ValueRange{batch});
  Value keyEnd = sem.keyLengthEnd(b, loc, len, nk);
  // A paged cache aligns causality per sequence (its len_b keys); with no
  // pages at all no key can be read.
  if (args.blockTable)
    keyEnd = AttentionSemantics::pagedKeyEnd(b, loc, args.k, keyEnd);
  diagOffset = sem.diagonalOffset(b, loc, nq, args.blockTable ? keyEnd : nk,
                                  args.qOffset);
  // Null: the keys begin at 0. With a block mask the key tiles stay on its
  // grid.
  if (args.blockMask)
    kvBegin = sem.visitedTileBegin(b, loc, q0, diagOffset, cfg.blockKV);
  else
    kvBegin = sem.hasWindowLeft() || sem.hasChunk()
                  ? sem.visitedKeyBegin(b, loc, q0, diagOffset)
                  : Value();
  kvEnd = sem.visitedKeyEnd(b, loc, keyEnd, q0, qRows, diagOffset);
  if (split) {
    // Split-KV: the visited key tiles in splits.count runs of equal
    // length; this iteration visits run `split` (none past the end).
    Value begin = kvBegin ? kvBegin : zero;
    Value tilesTotal = arith::CeilDivUIOp::create(
        b, loc, AttentionSemantics::visitedKeyCount(b, loc, begin, kvEnd),
        cIdx(b, cfg.blockKV));
    Value run =
        mul(b, arith::CeilDivUIOp::create(b, loc, tilesTotal, splits.count),
            cIdx(b, cfg.blockKV));
    kvBegin = add(b, begin, mul(b, split, run));
    kvEnd = minI(b, add(b, kvBegin, run), kvEnd);
  }

  // The modifiers' per-tile operands: the head's ALiBi slope, the query
  // positions and segment ids of each vector of lanes.
  // With packGroup the lanes of a vector hold several heads and queries
  // (the causal rule compares query positions too): the positions, heads
  // and slopes are vectors, the segment ids gathered.
  slope = cfg.packGroup ? Value()
                        : AttentionSemantics::loadAlibiSlope(b, loc, args.alibi,
                                                             batch, head);
  // Document masking: the id range of the tile's rows decides, per key
  // tile, whether it is visited and whether it is full.
  if (args.qSegments)
    qSegRange = segmentRange(b, args.qSegments, q0, qRows, cfg.blockQ);

  if (!cfg.allKvHeads) {
    buildLanes(b);
    buildRowsPrologue(b);
    Value span = AttentionSemantics::visitedKeyCount(b, loc, kvBegin, kvEnd);
    Value numKV =
        arith::CeilDivUIOp::create(b, loc, span, cIdx(b, cfg.blockKV));
    loop(b, zero, numKV, [&](OpBuilder &lb, Value j) { buildKVStep(lb, j); });
    buildEpilogue(b);
    return;
  }
  // Every kv head's rows: each key tile is visited for all kv heads before
  // the next one, the rows of a page read in order.
  Value heads = cIdx(b, op.getKvHeads());
  loop(b, zero, heads, [&](OpBuilder &hb, Value h) {
    bindKvHead(hb, h);
    buildRowsPrologue(hb);
  });
  Value span = AttentionSemantics::visitedKeyCount(b, loc, kvBegin, kvEnd);
  Value numKV = arith::CeilDivUIOp::create(b, loc, span, cIdx(b, cfg.blockKV));
  loop(b, zero, numKV, [&](OpBuilder &lb, Value j) {
    // The key tile's rows of every kv head, staged in the order of the
    // pages (each key's [Hkv, D] rows are contiguous): the reads stream
    // through each page as through a contiguous cache.
    auto [k0, kCols] = keyTile(lb, j);
    loop(lb, cIdx(lb, 0), kCols, [&](OpBuilder &cb, Value jj) {
      AttentionSemantics::PagedRow at = AttentionSemantics::pagedKeyRow(
          cb, loc, args.blockTable, args.k, op.getPageSize(), batch,
          add(cb, k0, jj));
      for (auto [mem, stage, width, pad] :
           {std::tuple{args.k, kStage, headDim, headDimPad},
            std::tuple{args.v, vStage, valueDim, valueDimPad}})
        loop(cb, cIdx(cb, 0), heads, [&](OpBuilder &sb, Value h) {
          for (int64_t c = 0; c < pad; c += cfg.vw)
            vstore(sb, readRow(sb, mem, {at.page, at.row, h}, c, width), stage,
                   {jj, h, cIdx(sb, c)});
        });
    });
    kSrc = kStage;
    vSrc = vStage;
    stageStart = k0;
    loop(lb, cIdx(lb, 0), heads, [&](OpBuilder &hb, Value h) {
      bindKvHead(hb, h);
      buildLanes(hb);
      buildKVStep(hb, j);
    });
    kSrc = args.k;
    vSrc = args.v;
    stageStart = Value();
  });
  loop(b, zero, heads, [&](OpBuilder &hb, Value h) {
    bindKvHead(hb, h);
    buildEpilogue(hb);
  });
}

void CpuKernelBuilder::bindKvHead(OpBuilder &b, Value h) {
  kvHead = h;
  auto view = [&](Value all) -> Value {
    auto t = cast<MemRefType>(all.getType());
    int64_t rank = t.getRank();
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes,
        strides(rank, b.getIndexAttr(1));
    offsets[0] = h;
    sizes.push_back(b.getIndexAttr(1));
    for (int64_t i = 1; i < rank; ++i)
      sizes.push_back(b.getIndexAttr(t.getDimSize(i)));
    auto type = memref::SubViewOp::inferRankReducedResultType(
        t.getShape().drop_front(), t, offsets, sizes, strides);
    return memref::SubViewOp::create(b, loc, cast<MemRefType>(type), all,
                                     offsets, sizes, strides);
  };
  qR = view(qRAll);
  oAcc = view(oAccAll);
  mBuf = view(mBufAll);
  lBuf = view(lBufAll);
}

void CpuKernelBuilder::buildLanes(OpBuilder &b) {
  qPos.clear();
  qSeg.clear();
  laneHead.clear();
  laneSlope.clear();
  if (sem.hasModifiers() || sem.hasSegments() || cfg.packGroup) {
    auto idxVec = VectorType::get({cfg.vw}, b.getIndexType());
    for (int64_t v = 0; v < cfg.blockQ / cfg.vw; ++v) {
      Value first = add(b, r0, cIdx(b, v * cfg.vw));
      Value lanes = arith::AddIOp::create(
          b, loc, vector::StepOp::create(b, loc, idxVec),
          vector::BroadcastOp::create(b, loc, idxVec, first));
      if (!cfg.packGroup) {
        qPos.push_back(lanes);
      } else {
        AttentionSemantics::PackedRow packed =
            AttentionSemantics::unpackGqaRow(b, loc, lanes, kvHead, group);
        qPos.push_back(packed.query);
        laneHead.push_back(packed.head);
        if (args.alibi) {
          // Every lane's head is in range (< Hq), its slope defined.
          auto sType = cast<MemRefType>(args.alibi.getType());
          SmallVector<Value> at;
          if (sType.getRank() == 2)
            at.push_back(batch);
          at.push_back(cIdx(b, 0));
          Value all = arith::ConstantOp::create(
              b, loc,
              DenseElementsAttr::get(VectorType::get({cfg.vw}, b.getI1Type()),
                                     true));
          laneSlope.push_back(vector::GatherOp::create(
              b, loc, vecType, args.alibi, at, laneHead.back(), all,
              splatF32(b, 0.0f)));
        }
      }
      if (args.qSegments && cfg.packGroup) {
        // Lanes past the tile's rows read 0 (their results are dropped).
        Type i32 = b.getI32Type();
        auto vt = VectorType::get({cfg.vw}, i32);
        Value left = sub(b, rows, cIdx(b, v * cfg.vw));
        Value inRows = vector::CreateMaskOp::create(
            b, loc, VectorType::get({cfg.vw}, b.getI1Type()), ValueRange{left});
        qSeg.push_back(vector::GatherOp::create(
            b, loc, vt, args.qSegments, ValueRange{batch, cIdx(b, 0)},
            qPos.back(), inRows,
            arith::ConstantOp::create(
                b, loc, DenseElementsAttr::get(vt, b.getI32IntegerAttr(0)))));
      } else if (args.qSegments) {
        // Lanes past the query rows read 0 (their results are dropped).
        Type i32 = b.getI32Type();
        Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(i32));
        qSeg.push_back(vector::TransferReadOp::create(
            b, loc, VectorType::get({cfg.vw}, i32), args.qSegments,
            ValueRange{batch, first}, pad, ArrayRef<bool>{false}));
      }
    }
  }
}

void CpuKernelBuilder::buildRowsPrologue(OpBuilder &b) {
  Value zero = cIdx(b, 0);
  // Scratch (f32): Q^T (scaled), the K and V tiles, S^T / P^T, the additive
  // mask tile (transposed), the output accumulator and the row state.
  int64_t bq = cfg.blockQ;
  fill(b, mBuf, -std::numeric_limits<float>::infinity());
  fill(b, lBuf, 0.0f);
  fill(b, oAcc, 0.0f);
  // Rows of the K tile past the keys are read by the last register block;
  // keep them finite.
  if (kP)
    fill(b, kP, 0.0f);
  if (mT)
    fill(b, mT, 0.0f);

  // Q^T, scaled; lanes past the query rows are 0. The dot-product scores
  // take the scaled rows (qR) instead, 0 past the tile's rows (a block of
  // rows may run past them), and S^T starts at 0.
  if (dotScores)
    fill(b, qR, 0.0f);
  if (bf16Dot) {
    // Q as bf16 pairs along d, unscaled (the scale multiplies S in f32);
    // rows past the tile's are 0.
    loop(b, zero, cIdx(b, bq), [&](OpBuilder &lb, Value r) {
      Value inRows =
          arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, r, rows);
      Value q = minI(lb, rowQuery(lb, r), sub(lb, nq, cIdx(lb, 1)));
      loop(lb, cIdx(lb, 0), cIdx(lb, headDim), [&](OpBuilder &ib, Value d) {
        SmallVector<Value> at = qRow(ib, head, q);
        at.push_back(d);
        Value x = memref::LoadOp::create(ib, loc, args.q, at);
        x = arith::SelectOp::create(
            ib, loc, inRows, x,
            arith::ConstantOp::create(ib, loc, ib.getZeroAttr(elt)));
        Value two = cIdx(ib, 2);
        Value p = arith::DivUIOp::create(ib, loc, d, two);
        Value col = add(ib, mul(ib, r, two), arith::RemUIOp::create(ib, loc, d, two));
        memref::StoreOp::create(ib, loc, x, qPairs, ValueRange{p, col});
      });
    });
    return;
  }
  Value scaleC = cF32(b, scale);
  loop(b, zero, rows, [&](OpBuilder &lb, Value r) {
    Value q = rowQuery(lb, r);
    Value h = rowHead(lb, r);
    loop(lb, cIdx(lb, 0), cIdx(lb, headDim), [&](OpBuilder &ib, Value d) {
      SmallVector<Value> at = qRow(ib, h, q);
      at.push_back(d);
      Value x = memref::LoadOp::create(ib, loc, args.q, at);
      Value xs = arith::MulFOp::create(ib, loc, toF32(ib, x), scaleC);
      if (dotScores)
        memref::StoreOp::create(ib, loc, xs, qR, ValueRange{r, d});
      else
        memref::StoreOp::create(ib, loc, xs, qT, ValueRange{d, r});
    });
  });
  if (dotScores) {
    fill(b, sT, 0.0f);
  } else {
    loop(b, rows, cIdx(b, bq), [&](OpBuilder &lb, Value r) {
      loop(lb, cIdx(lb, 0), cIdx(lb, headDim), [&](OpBuilder &ib, Value d) {
        memref::StoreOp::create(ib, loc, cF32(ib, 0.0f), qT, ValueRange{d, r});
      });
    });
  }
}

std::pair<Value, Value> CpuKernelBuilder::keyTile(OpBuilder &b, Value j) {
  Value k0 = mul(b, j, cIdx(b, cfg.blockKV));
  if (kvBegin)
    k0 = add(b, kvBegin, k0);
  return {k0, minI(b, cIdx(b, cfg.blockKV), sub(b, kvEnd, k0))};
}

void CpuKernelBuilder::buildKVStep(OpBuilder &b, Value j) {
  auto [k0, kCols] = keyTile(b, j);
  // The block mask's entry for this tile pair (the kernel's tiles are its
  // tiles): 0 skips the tile, 1 (partial) needs the mask_mod per element.
  Value visited, partial;
  if (args.blockMask) {
    Value entry =
        sem.loadBlockMaskEntry(b, loc, args.blockMask, batch, head, q0, k0);
    Type i8 = b.getI8Type();
    visited = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne, entry,
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(i8, 0)));
    partial = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq, entry,
        arith::ConstantOp::create(b, loc, b.getIntegerAttr(i8, 1)));
  }
  std::optional<AttentionSemantics::SegmentRange> kRange;
  if (args.kSegments) {
    // Document masking: a key tile whose ids no query row of the tile
    // shares is never visited.
    kRange = segmentRange(b, args.kSegments, k0, kCols, cfg.blockKV);
    Value docs = sem.segmentTileVisited(b, loc, qSegRange, *kRange);
    visited =
        visited ? Value(arith::AndIOp::create(b, loc, visited, docs)) : docs;
  }
  const AttentionSemantics::SegmentRange *kr = kRange ? &*kRange : nullptr;
  if (!visited) {
    buildKVTile(b, k0, kCols, kr, partial);
    return;
  }
  scf::IfOp::create(b, loc, visited, [&](OpBuilder &tb, Location) {
    buildKVTile(tb, k0, kCols, kr, partial);
    scf::YieldOp::create(tb, loc);
  });
}

void CpuKernelBuilder::buildKVTile(
    OpBuilder &b, Value k0, Value kCols,
    const AttentionSemantics::SegmentRange *kSegRange, Value maskModPartial) {
  Value zero = cIdx(b, 0);
  // With a window, a chunk, segments or causality, whether some key of
  // this tile is removed for some row (false: a full tile, no element mask
  // and no NaN guard in P V).
  Value needMask;
  if (positionalMods)
    needMask = sem.tileNeedsElementMask(
        b, loc, k0, kCols, kvEnd, q0, diagOffset, qRows,
        kSegRange ? &qSegRange : nullptr, kSegRange, maskModPartial);
  else if (sem.isCausal())
    // Causality alone: only the tiles across the diagonal remove keys (the
    // others skip the per-lane causal compare and select).
    needMask = sem.crossesDiagonal(b, loc, k0, kCols, q0, diagOffset);
  bool alwaysMask = needMask && matchPattern(needMask, m_One());
  if (alwaysMask)
    needMask = Value();

  // Pack the K and V tiles as f32 rows (vectorized copies), unless they
  // are read in place.
  if (kP || vP)
    loop(b, zero, kCols, [&](OpBuilder &lb, Value jj) {
      SmallVector<Value> row = kvRow(lb, add(lb, k0, jj));
      if (kP)
        for (int64_t c = 0; c < headDimPad; c += cfg.vw)
          vstore(lb, readRow(lb, kSrc, row, c, headDim), kP, {jj, cIdx(lb, c)});
      if (vP)
        for (int64_t c = 0; c < valueDimPad; c += cfg.vw)
          vstore(lb, readRow(lb, vSrc, row, c, valueDim), vP,
                 {jj, cIdx(lb, c)});
    });

  // The mask tile, transposed, as an additive f32 (0 / -inf for booleans).
  if (mT) {
    Value mb = maskBroadcastsBatch ? zero : batch;
    loop(b, zero, rows, [&](OpBuilder &lb, Value r) {
      Value q = rowQuery(lb, r);
      Value mh = maskBroadcastsHeads ? zero : rowHead(lb, r);
      loop(lb, cIdx(lb, 0), kCols, [&](OpBuilder &ib, Value jj) {
        Value x = memref::LoadOp::create(
            ib, loc, args.mask, ValueRange{mb, mh, q, add(ib, k0, jj)});
        // The mask's term of the score: x (additive) or 0 / -inf (keep).
        Value f = cF32(ib, 0.0f), keep;
        sem.applyMaskElement(ib, loc, x, f, keep);
        f = AttentionSemantics::removeUnkept(ib, loc, keep, f);
        memref::StoreOp::create(ib, loc, f, mT, ValueRange{jj, r});
      });
    });
  }

  if (bf16Dot)
    buildBf16ValuePairs(b, k0, kCols);

  buildScores(b, k0, kCols);
  buildSoftmax(b, k0, kCols, needMask);
  // Keys with p == 0 that a mask, causality or a modifier excludes must not
  // let a NaN or inf in their V rows through 0 * NaN. With a mask every
  // tile is guarded; otherwise only the tiles that need element masks
  // (with causality alone: that cross the diagonal, some key of the tile
  // past the first row's last key).
  if (args.mask || alwaysMask || (!sem.isCausal() && !needMask)) {
    buildPV(b, k0, kCols, /*guardMasked=*/args.mask || alwaysMask);
    return;
  }
  Value crosses = needMask
                      ? needMask
                      : sem.crossesDiagonal(b, loc, k0, kCols, q0, diagOffset);
  scf::IfOp::create(
      b, loc, crosses,
      [&](OpBuilder &tb, Location) {
        buildPV(tb, k0, kCols, /*guardMasked=*/true);
        scf::YieldOp::create(tb, loc);
      },
      [&](OpBuilder &eb, Location) {
        buildPV(eb, k0, kCols, /*guardMasked=*/false);
        scf::YieldOp::create(eb, loc);
      });
}

Value CpuKernelBuilder::transposeReduce(OpBuilder &b, SmallVector<Value> acc) {
  // Pairs of vectors are added lane-wise after two shuffles that line up
  // the lanes of the same sum, halving the count at each level: unpack
  // pairs of floats, then of doubles, within 4-lane blocks, then the even
  // and the odd 4-lane blocks of both. Each level keeps the order, so that
  // in the end lane i holds the sum of acc[i].
  int64_t w = cfg.vw;
  assert(static_cast<int64_t>(acc.size()) == w && w >= 4 &&
         llvm::isPowerOf2_64(w) && "one accumulator per lane");
  for (int64_t period = 1; acc.size() > 1; period *= 2) {
    SmallVector<int64_t> lo, hi;
    if (period <= 2) {
      for (int64_t blk = 0; blk < w; blk += 4) {
        // period 1: x0 y0 x1 y1 / x2 y2 x3 y3; period 2: x0 x1 y0 y1 /
        // x2 x3 y2 y3 (indices into x ++ y).
        for (int64_t half = 0; half < 2; ++half) {
          SmallVector<int64_t> &m = half ? hi : lo;
          int64_t base = blk + 2 * half;
          if (period == 1)
            m.append({base, w + base, base + 1, w + base + 1});
          else
            m.append({base, base + 1, w + base, w + base + 1});
        }
      }
    } else {
      for (int64_t src : {int64_t(0), w})
        for (int64_t blk = 0; blk < w / 4; blk += 2)
          for (int64_t l = 0; l < 4; ++l) {
            lo.push_back(src + blk * 4 + l);
            hi.push_back(src + (blk + 1) * 4 + l);
          }
    }
    SmallVector<Value> next;
    for (size_t i = 0; i < acc.size(); i += 2) {
      Value x = vector::ShuffleOp::create(b, loc, acc[i], acc[i + 1], lo);
      Value y = vector::ShuffleOp::create(b, loc, acc[i], acc[i + 1], hi);
      next.push_back(arith::AddFOp::create(b, loc, x, y));
    }
    acc = std::move(next);
  }
  return acc.front();
}

CpuKernelBuilder::KeyBlock CpuKernelBuilder::keyBlock(OpBuilder &b, Value k0,
                                                      Value kCols, Value blk,
                                                      int64_t kKeys) {
  KeyBlock keys;
  Value lastCol = sub(b, kCols, cIdx(b, 1));
  Value j0 = mul(b, blk, cIdx(b, kKeys));
  for (int64_t i = 0; i < kKeys; ++i) {
    keys.cols.push_back(minI(b, add(b, j0, cIdx(b, i)), lastCol));
    Value key = add(b, k0, keys.cols.back());
    keys.rows.push_back(kvRow(b, key));
    if (prefetchAhead)
      prefetchKeyRows(b, key, prefetchAhead, /*values=*/true);
  }
  return keys;
}

void CpuKernelBuilder::buildDotScorePairs(OpBuilder &b, Value k0, Value kCols) {
  // S^T[j][r] = sum_d K[j][d] * (scale Q)[r][d], two keys at a time: their
  // K rows are read once, in place (through the block table of a paged
  // cache), as vectors along d, and dotted with each row's scaled Q (two
  // partial sums per key, then one horizontal sum per (key, row)). The
  // second key of the last pair is clamped to the tile's last key (the
  // same score, written twice).
  constexpr int64_t kKeys = 2;
  int64_t dVecs = headDim / cfg.vw;
  Value pairs = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, kKeys));
  loop(b, cIdx(b, 0), pairs, [&](OpBuilder &lb, Value p) {
    KeyBlock keys = keyBlock(lb, k0, kCols, p, kKeys);
    const SmallVector<Value> &cols = keys.cols;
    SmallVector<SmallVector<Value>> kv(kKeys);
    for (int64_t i = 0; i < kKeys; ++i)
      for (int64_t c = 0; c < dVecs; ++c)
        kv[i].push_back(readRow(lb, kSrc, keys.rows[i], c * cfg.vw, headDim));
    loop(lb, cIdx(lb, 0), rows, [&](OpBuilder &rb, Value r) {
      SmallVector<Value> acc(2 * kKeys, splatF32(rb, 0.0f));
      for (int64_t c = 0; c < dVecs; ++c) {
        Value qv = vload(rb, qR, {r, cIdx(rb, c * cfg.vw)});
        for (int64_t i = 0; i < kKeys; ++i) {
          Value &a = acc[i * 2 + c % 2];
          a = fma(rb, qv, kv[i][c], a);
        }
      }
      for (int64_t i = 0; i < kKeys; ++i) {
        Value sum = arith::AddFOp::create(rb, loc, acc[i * 2], acc[i * 2 + 1]);
        Value s =
            vector::ReductionOp::create(rb, loc, vector::CombiningKind::ADD,
                                        sum, arith::FastMathFlags::reassoc);
        memref::StoreOp::create(rb, loc, s, sT, ValueRange{cols[i], r});
      }
    });
  });
}

void CpuKernelBuilder::buildDotScoreBlocks(OpBuilder &b, Value k0, Value kCols,
                                           int64_t kRows) {
  // S^T[j][r] = sum_d K[j][d] * (scale Q)[r][d] in blocks of kRows rows x
  // vw / kRows keys: vw dot products, each accumulated along d in a vector
  // of its own (the K rows read in place, through the block table of a
  // paged cache), then reduced together into one vector of the vw scores
  // (transposeReduce), stored into S^T as one kRows-lane piece per key. A
  // block may run past the tile's rows, over rows of qR that are 0. The
  // last block's keys are clamped to the tile's last key (the same score,
  // written again).
  int64_t dVecs = headDim / cfg.vw;
  int64_t kKeys = cfg.vw / kRows;
  Value keyBlocks = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, kKeys));
  Value rowBlocks = arith::CeilDivUIOp::create(b, loc, rows, cIdx(b, kRows));
  loop(b, cIdx(b, 0), keyBlocks, [&](OpBuilder &lb, Value kb) {
    KeyBlock keys = keyBlock(lb, k0, kCols, kb, kKeys);
    const SmallVector<Value> &cols = keys.cols;
    const SmallVector<SmallVector<Value>> &keyAt = keys.rows;
    loop(lb, cIdx(lb, 0), rowBlocks, [&](OpBuilder &rb, Value blk) {
      Value rr0 = mul(rb, blk, cIdx(rb, kRows));
      SmallVector<Value> acc(cfg.vw, splatF32(rb, 0.0f));
      for (int64_t c = 0; c < dVecs; ++c) {
        SmallVector<Value> qv;
        for (int64_t r = 0; r < kRows; ++r)
          qv.push_back(
              vload(rb, qR, {add(rb, rr0, cIdx(rb, r)), cIdx(rb, c * cfg.vw)}));
        for (int64_t i = 0; i < kKeys; ++i) {
          Value kv = readRow(rb, kSrc, keyAt[i], c * cfg.vw, headDim);
          for (int64_t r = 0; r < kRows; ++r) {
            Value &a = acc[i * kRows + r];
            a = fma(rb, qv[r], kv, a);
          }
        }
      }
      Value s = transposeReduce(rb, acc);
      for (int64_t i = 0; i < kKeys; ++i) {
        Value piece = vector::ExtractStridedSliceOp::create(
            rb, loc, s, ArrayRef<int64_t>{i * kRows}, ArrayRef<int64_t>{kRows},
            ArrayRef<int64_t>{1});
        vector::StoreOp::create(rb, loc, piece, sT, ValueRange{cols[i], rr0});
      }
    });
  });
}

void CpuKernelBuilder::buildDotScores(OpBuilder &b, Value k0, Value kCols) {
  // One row (multi-head decode): blocks of 1 row x vw keys. Five to eight
  // rows: blocks of 8 rows x 2 keys. Otherwise pairs of keys with one
  // horizontal sum per (key, row), which the blocks of 4 rows x 4 keys did
  // not beat on a memory-bound decode step (their K loads are spread along
  // the FMAs instead of issued together); see docs/performance.md.
  if (cfg.vw != 16)
    return buildDotScorePairs(b, k0, kCols);
  auto cmp = [&](OpBuilder &ib, arith::CmpIPredicate pred, int64_t n) {
    return arith::CmpIOp::create(ib, loc, pred, rows, cIdx(ib, n));
  };
  Value one = cmp(b, arith::CmpIPredicate::eq, 1);
  Value fiveToEight =
      arith::AndIOp::create(b, loc, cmp(b, arith::CmpIPredicate::ugt, 4),
                            cmp(b, arith::CmpIPredicate::ule, 8));
  auto branch = [&](OpBuilder &ib, Value cond,
                    function_ref<void(OpBuilder &)> then,
                    function_ref<void(OpBuilder &)> otherwise) {
    scf::IfOp::create(
        ib, loc, cond,
        [&](OpBuilder &tb, Location) {
          then(tb);
          scf::YieldOp::create(tb, loc);
        },
        [&](OpBuilder &eb, Location) {
          otherwise(eb);
          scf::YieldOp::create(eb, loc);
        });
  };
  branch(
      b, one, [&](OpBuilder &tb) { buildDotScoreBlocks(tb, k0, kCols, 1); },
      [&](OpBuilder &eb) {
        branch(
            eb, fiveToEight,
            [&](OpBuilder &tb) { buildDotScoreBlocks(tb, k0, kCols, 8); },
            [&](OpBuilder &fb) { buildDotScorePairs(fb, k0, kCols); });
      });
}

void CpuKernelBuilder::buildScores(OpBuilder &b, Value k0, Value kCols) {
  if (dotScores)
    return buildDotScores(b, k0, kCols);
  if (bf16Dot)
    return buildBf16Scores(b, k0, kCols);
  // S^T[j][r] = sum_d K[j][d] * (scale Q)[r][d]: a register block of
  // keyRows keys x (at most kScoreQueryVectors) query vectors, accumulated
  // over d in vector iter_args (broadcast K[j][d], FMA with the Q^T row d).
  // Wider query tiles run their groups of query vectors in turn on the
  // same keys, whose rows stay in L1.
  int64_t qVecs = cfg.blockQ / cfg.vw;
  int64_t groupVecs = std::min(qVecs, kScoreQueryVectors);
  int64_t kr = cfg.keyRows;
  Value numBlocks = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, kr));
  loop(b, cIdx(b, 0), numBlocks, [&](OpBuilder &lb, Value kb) {
    Value j0 = mul(lb, kb, cIdx(lb, kr));
    // In place: the key rows of the block, clamped to the last key (rows
    // past kCols are computed but never used).
    SmallVector<SmallVector<Value>> keyIdx;
    if (!kP) {
      prefetchBlockKeys(lb, add(lb, k0, j0), kr);
      Value last = sub(lb, kvEnd, cIdx(lb, 1));
      for (int64_t i = 0; i < kr; ++i)
        keyIdx.push_back(
            kvRow(lb, minI(lb, add(lb, add(lb, k0, j0), cIdx(lb, i)), last)));
    }
    for (int64_t g0 = 0; g0 < qVecs; g0 += groupVecs) {
      int64_t gv = std::min(groupVecs, qVecs - g0);
      // cfg.dSplit independent partial sums over d per accumulator (d
      // strided by dSplit), added at the end: with few accumulators the
      // FMA chains would otherwise be latency-bound.
      int64_t ds = cfg.dSplit;
      int64_t dMain = headDim - headDim % ds;
      auto accumulate = [&](OpBuilder &db, Value d, ValueRange acc,
                            int64_t set) {
        SmallVector<Value> next(acc);
        SmallVector<Value> qv;
        for (int64_t v = 0; v < gv; ++v)
          qv.push_back(vload(db, qT, {d, cIdx(db, (g0 + v) * cfg.vw)}));
        for (int64_t i = 0; i < kr; ++i) {
          Value kx =
              kP ? Value(memref::LoadOp::create(
                       db, loc, kP, ValueRange{add(db, j0, cIdx(db, i)), d}))
                 : Value(memref::LoadOp::create(db, loc, kSrc,
                                                withLast(keyIdx[i], d)));
          Value kb2 = bcast(db, kx);
          for (int64_t v = 0; v < gv; ++v) {
            int64_t a = (set * kr + i) * gv + v;
            next[a] = fma(db, kb2, qv[v], acc[a]);
          }
        }
        return next;
      };
      SmallVector<Value> inits(ds * kr * gv, splatF32(lb, 0.0f));
      auto dLoop = scf::ForOp::create(
          lb, loc, cIdx(lb, 0), cIdx(lb, dMain), cIdx(lb, ds), inits,
          [&](OpBuilder &db, Location, Value d, ValueRange acc) {
            SmallVector<Value> next(acc);
            for (int64_t set = 0; set < ds; ++set)
              next = accumulate(db, set == 0 ? d : add(db, d, cIdx(db, set)),
                                next, set);
            scf::YieldOp::create(db, loc, next);
          });
      SmallVector<Value> acc(dLoop.getResults());
      for (int64_t d = dMain; d < headDim; ++d)
        acc = accumulate(lb, cIdx(lb, d), acc, 0);
      for (int64_t i = 0; i < kr; ++i)
        for (int64_t v = 0; v < gv; ++v) {
          Value sum = acc[i * gv + v];
          for (int64_t set = 1; set < ds; ++set)
            sum = arith::AddFOp::create(lb, loc, sum,
                                        acc[(set * kr + i) * gv + v]);
          vstore(lb, sum, sT,
                 {add(lb, j0, cIdx(lb, i)), cIdx(lb, (g0 + v) * cfg.vw)});
        }
    }
  });
}

void CpuKernelBuilder::buildSoftmax(OpBuilder &b, Value k0, Value kCols,
                                    Value needMask) {
  // Each query is a lane: the running max, the rescale and the running sum
  // are elementwise over the key rows of S^T.
  int64_t qVecs = cfg.blockQ / cfg.vw;
  float inf = std::numeric_limits<float>::infinity();
  Value zero = cIdx(b, 0);

  // Pass 1: score modifiers, masks (-inf) and the tile max per lane. Tiles
  // that a window, chunk, segments or causality leave full skip the key
  // masks. Pass 1 writes every final score back to S^T and takes the max
  // of exactly those values, so pass 2's arguments s - m_use are <= 0 (or
  // -inf or NaN), the domain of buildSoftmaxExp: nothing may change a
  // score between the two passes.
  SmallVector<Value> tileMax;
  if (needMask) {
    auto ifOp = scf::IfOp::create(
        b, loc, needMask,
        [&](OpBuilder &tb, Location) {
          scf::YieldOp::create(tb, loc,
                               buildScoreModsAndMax(tb, k0, kCols, true));
        },
        [&](OpBuilder &eb, Location) {
          scf::YieldOp::create(eb, loc,
                               buildScoreModsAndMax(eb, k0, kCols, false));
        });
    tileMax.append(ifOp.getResults().begin(), ifOp.getResults().end());
  } else {
    tileMax = buildScoreModsAndMax(b, k0, kCols, /*removeKeys=*/true);
  }

  // m_new = max(m_old, tile max); alpha = exp(m_old - m_use), where m_use
  // is m_new with -inf (nothing attended yet) replaced by 0.
  SmallVector<Value> mUse;
  for (int64_t v = 0; v < qVecs; ++v) {
    Value col = cIdx(b, v * cfg.vw);
    Value mOld = vload(b, mBuf, {col});
    Value mNew = arith::MaximumFOp::create(b, loc, mOld, tileMax[v]);
    Value isInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew,
                                        splatF32(b, -inf));
    Value use = arith::SelectOp::create(b, loc, isInf, splatF32(b, 0.0f), mNew);
    Value alpha = lowering::buildSoftmaxExp(
        b, loc, arith::SubFOp::create(b, loc, mOld, use));
    vstore(b, mNew, mBuf, {col});
    vstore(b, alpha, aBuf, {col});
    mUse.push_back(use);
  }

  // Pass 2: P = exp(S - m_use) in place, and its sum per lane (with bf16
  // dot products, P rounded to bf16 pairs in the same pass).
  SmallVector<Value> sumInit(qVecs, splatF32(b, 0.0f));
  if (bf16Dot) {
    SmallVector<Value> sums = buildBf16Probabilities(b, kCols, mUse);
    for (int64_t v = 0; v < qVecs; ++v) {
      Value col = cIdx(b, v * cfg.vw);
      Value l = vload(b, lBuf, {col});
      Value a = vload(b, aBuf, {col});
      vstore(b, fma(b, a, l, sums[v]), lBuf, {col});
    }
    return;
  }
  auto sumLoop = scf::ForOp::create(
      b, loc, zero, kCols, cIdx(b, 1), sumInit,
      [&](OpBuilder &lb, Location, Value jj, ValueRange sum) {
        SmallVector<Value> next;
        for (int64_t v = 0; v < qVecs; ++v) {
          Value col = cIdx(lb, v * cfg.vw);
          Value s = vload(lb, sT, {jj, col});
          Value p = lowering::buildSoftmaxExp(
              lb, loc, arith::SubFOp::create(lb, loc, s, mUse[v]));
          vstore(lb, p, sT, {jj, col});
          next.push_back(arith::AddFOp::create(lb, loc, sum[v], p));
        }
        scf::YieldOp::create(lb, loc, next);
      });
  // l = alpha * l + sum(P).
  for (int64_t v = 0; v < qVecs; ++v) {
    Value col = cIdx(b, v * cfg.vw);
    Value l = vload(b, lBuf, {col});
    Value a = vload(b, aBuf, {col});
    vstore(b, fma(b, a, l, sumLoop.getResult(v)), lBuf, {col});
  }
}

SmallVector<Value> CpuKernelBuilder::buildScoreModsAndMax(OpBuilder &b,
                                                          Value k0, Value kCols,
                                                          bool removeKeys) {
  // For each key row of S^T and vector of query lanes: the score modifiers
  // (softcap, ALiBi), the additive mask or a boolean mask's -inf, score_mod,
  // then (removeKeys) -inf for the keys causality, the window, the chunk,
  // segments or mask_mod remove; returns the max per lane.
  int64_t qVecs = cfg.blockQ / cfg.vw;
  float inf = std::numeric_limits<float>::infinity();
  auto idxVec = VectorType::get({cfg.vw}, b.getIndexType());
  bool scoreMods = sem.hasSoftcap() || sem.hasAlibi();
  // score_mod comes after the additive mask and before any key removal
  // (a keep mask's -inf included): a region could map -inf to a finite
  // score.
  bool scoreRegion = sem.hasScoreMod();
  SmallVector<Value> maxInit(qVecs, splatF32(b, -inf));
  auto maxLoop = scf::ForOp::create(
      b, loc, cIdx(b, 0), kCols, cIdx(b, 1), maxInit,
      [&](OpBuilder &lb, Location, Value jj, ValueRange vmax) {
        SmallVector<Value> next;
        Value key = add(lb, k0, jj);
        Value threshold, kSeg;
        if (removeKeys && sem.isCausal() && !positionalMods) {
          // Lane r (query q0 + r) keeps key k0 + jj when q0 + r is at least
          // the first query keeping it; with packGroup, when the lane's
          // query is.
          threshold = sem.firstCausalQuery(lb, loc, key, diagOffset);
          if (!cfg.packGroup)
            threshold = sub(lb, threshold, q0);
        }
        if (removeKeys && args.kSegments)
          kSeg = memref::LoadOp::create(lb, loc, args.kSegments,
                                        ValueRange{batch, key});
        for (int64_t v = 0; v < qVecs; ++v) {
          Value col = cIdx(lb, v * cfg.vw);
          Value s = vload(lb, sT, {jj, col});
          bool changed = false;
          if (scoreMods) {
            s = sem.modifyScore(lb, loc, s, qPos[v], key, diagOffset,
                                laneSlope.empty() ? slope : laneSlope[v]);
            changed = true;
          }
          Value dropMask;
          if (mT) {
            Value m = vload(lb, mT, {jj, col});
            if (sem.hasKeepMask())
              dropMask = arith::CmpFOp::create(
                  lb, loc, arith::CmpFPredicate::OEQ, m, splatF32(lb, -inf));
            else
              s = arith::AddFOp::create(lb, loc, s, m);
            changed = true;
          }
          AttentionSemantics::ModIndices idx{batch,
                                             laneHead.empty() ? head
                                                              : laneHead[v],
                                             qPos.empty() ? Value() : qPos[v],
                                             key,
                                             nq,
                                             nk};
          if (scoreRegion) {
            s = sem.applyScoreMod(lb, loc, s, idx, args.modOperands);
            changed = true;
          }
          if (dropMask)
            s = arith::SelectOp::create(lb, loc, dropMask, splatF32(lb, -inf),
                                        s);
          if (removeKeys && positionalMods) {
            Value keep =
                sem.keepKey(lb, loc, qPos[v], key, Value(), diagOffset);
            if (kSeg)
              sem.applySegments(lb, loc, qSeg[v], kSeg, keep);
            sem.applyMaskMod(lb, loc, idx, args.modOperands, keep);
            s = AttentionSemantics::removeUnkept(lb, loc, keep, s);
            changed = true;
          }
          if (threshold) {
            Value lanes = cfg.packGroup
                              ? qPos[v]
                              : Value(vector::StepOp::create(lb, loc, idxVec));
            if (!cfg.packGroup)
              lanes = arith::AddIOp::create(
                  lb, loc, lanes,
                  vector::BroadcastOp::create(lb, loc, idxVec, col));
            Value keep = arith::CmpIOp::create(
                lb, loc, arith::CmpIPredicate::sge, lanes,
                vector::BroadcastOp::create(lb, loc, idxVec, threshold));
            s = arith::SelectOp::create(lb, loc, keep, s, splatF32(lb, -inf));
            changed = true;
          }
          if (changed)
            vstore(lb, s, sT, {jj, col});
          // The tile max per lane as s > max ? s : max, one vmaxps (where
          // arith.maximumf's NaN propagation costs six instructions in the
          // loop's critical path). A NaN score is left out of the max but
          // not of the row: exp(NaN - m) makes P, the sum and O NaN, as the
          // contract asks for a NaN in attended inputs.
          Value greater = arith::CmpFOp::create(
              lb, loc, arith::CmpFPredicate::OGT, s, vmax[v]);
          next.push_back(
              arith::SelectOp::create(lb, loc, greater, s, vmax[v]));
        }
        scf::YieldOp::create(lb, loc, next);
      });
  return SmallVector<Value>(maxLoop.getResults());
}

void CpuKernelBuilder::buildPV(OpBuilder &b, Value k0, Value kCols,
                               bool guardMasked) {
  if (!bf16Dot)
    return buildF32PV(b, k0, kCols, guardMasked);
  if (!guardMasked || !vNonFinite)
    return buildBf16PV(b, kCols);
  // A removed key's inf or NaN V row must not reach the rows that removed
  // it: such a tile takes the f32 micro-kernel with its per-key select
  // (on P in f32, V converted from bf16).
  scf::IfOp::create(
      b, loc, vNonFinite,
      [&](OpBuilder &tb, Location) {
        buildF32PV(tb, k0, kCols, /*guardMasked=*/true);
        scf::YieldOp::create(tb, loc);
      },
      [&](OpBuilder &eb, Location) {
        buildBf16PV(eb, kCols);
        scf::YieldOp::create(eb, loc);
      });
}

void CpuKernelBuilder::buildPVBlocks(OpBuilder &b, PVKeyLoop keys) {
  int64_t rows = cfg.pvRows;
  Value numBlocks =
      arith::CeilDivUIOp::create(b, loc, this->rows, cIdx(b, rows));
  int64_t dvVecs = valueDimPad / cfg.vw;
  int64_t pvVectors = cfg.pvVectors > 0
                          ? cfg.pvVectors
                          : cpu::balancedVectorBlock(dvVecs, rows, cfg.vw);
  loop(b, cIdx(b, 0), numBlocks, [&](OpBuilder &lb, Value rb) {
    Value r0 = mul(lb, rb, cIdx(lb, rows));
    SmallVector<Value> rowIdx, alphas;
    for (int64_t i = 0; i < rows; ++i) {
      rowIdx.push_back(add(lb, r0, cIdx(lb, i)));
      alphas.push_back(bcast(
          lb, memref::LoadOp::create(lb, loc, aBuf, ValueRange{rowIdx[i]})));
    }
    for (int64_t g0 = 0; g0 < dvVecs; g0 += pvVectors) {
      int64_t nv = std::min(pvVectors, dvVecs - g0);
      SmallVector<Value> inits;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t v = 0; v < nv; ++v)
          inits.push_back(arith::MulFOp::create(
              lb, loc,
              vload(lb, oAcc, {rowIdx[i], cIdx(lb, (g0 + v) * cfg.vw)}),
              alphas[i]));
      SmallVector<Value> acc = keys(lb, rowIdx, g0, nv, inits);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t v = 0; v < nv; ++v)
          vstore(lb, acc[i * nv + v], oAcc,
                 {rowIdx[i], cIdx(lb, (g0 + v) * cfg.vw)});
    }
  });
}

void CpuKernelBuilder::buildF32PV(OpBuilder &b, Value k0, Value kCols,
                                  bool guardMasked) {
  // acc[r] = alpha[r] * acc[r] + sum_j P^T[j][r] * V[j]: a register block of
  // pvRows query rows x pvVectors vectors of Dv, accumulated over the keys
  // (broadcast P^T[j][r], FMA with the V row j).
  int64_t rows = cfg.pvRows;
  buildPVBlocks(b, [&](OpBuilder &lb, ArrayRef<Value> rowIdx, int64_t g0,
                       int64_t nv, ValueRange inits) {
    auto kLoop = scf::ForOp::create(
        lb, loc, cIdx(lb, 0), kCols, cIdx(lb, 1), inits,
        [&](OpBuilder &kb, Location, Value jj, ValueRange acc) {
          SmallVector<Value> vv;
          SmallVector<Value> vRow;
          if (!vP)
            vRow = kvRow(kb, add(kb, k0, jj));
          for (int64_t v = 0; v < nv; ++v) {
            Value col = cIdx(kb, (g0 + v) * cfg.vw);
            if (vP) {
              vv.push_back(vload(kb, vP, {jj, col}));
              continue;
            }
            if (!elt.isF32()) {
              vv.push_back(
                  readRow(kb, vSrc, vRow, (g0 + v) * cfg.vw, valueDim));
              continue;
            }
            SmallVector<Value> at(vRow);
            at.push_back(col);
            vv.push_back(vload(kb, vSrc, at));
          }
          SmallVector<Value> next;
          for (int64_t i = 0; i < rows; ++i) {
            Value p =
                memref::LoadOp::create(kb, loc, sT, ValueRange{jj, rowIdx[i]});
            Value pb = bcast(kb, p);
            Value isZero;
            if (guardMasked)
              isZero = arith::CmpFOp::create(kb, loc, arith::CmpFPredicate::OEQ,
                                             p, cF32(kb, 0.0f));
            for (int64_t v = 0; v < nv; ++v) {
              Value a = acc[i * nv + v];
              Value n = fma(kb, pb, vv[v], a);
              // A masked key (p == 0) must not let a NaN or inf in its V
              // row through 0 * NaN.
              if (guardMasked)
                n = arith::SelectOp::create(kb, loc, isZero, a, n);
              next.push_back(n);
            }
          }
          scf::YieldOp::create(kb, loc, next);
        });
    return SmallVector<Value>(kLoop.getResults());
  });
}

//===----------------------------------------------------------------------===//
// bf16 through AVX512_BF16 dot products
//===----------------------------------------------------------------------===//

Value CpuKernelBuilder::bf16PairBroadcast(OpBuilder &b, Value mem,
                                          ValueRange idx) {
  // The two bf16 at idx (the innermost index even) as one 32-bit lane,
  // broadcast to all 16 lanes of a vector<32xbf16>: a vpbroadcastd from
  // memory.
  Type bf16 = b.getBF16Type();
  Value pair =
      vector::LoadOp::create(b, loc, VectorType::get({2}, bf16), mem, idx);
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  Value scalar = vector::ExtractOp::create(b, loc, word, ArrayRef<int64_t>{0});
  Value splat = vector::BroadcastOp::create(
      b, loc, VectorType::get({cfg.vw}, b.getI32Type()), scalar);
  return vector::BitCastOp::create(b, loc, VectorType::get({2 * cfg.vw}, bf16),
                                   splat);
}

Value CpuKernelBuilder::rawRow(OpBuilder &b, Value mem, ValueRange idx,
                               int64_t col, int64_t rowLen) {
  // vw elements of a row in its own element type, 0 past rowLen.
  Type t = cast<MemRefType>(mem.getType()).getElementType();
  SmallVector<Value> at(idx);
  at.push_back(cIdx(b, col));
  Value pad = arith::ConstantOp::create(b, loc, b.getZeroAttr(t));
  return vector::TransferReadOp::create(b, loc, VectorType::get({cfg.vw}, t),
                                        mem, at, pad,
                                        ArrayRef<bool>{col + cfg.vw <= rowLen});
}

void CpuKernelBuilder::buildBf16Scores(OpBuilder &b, Value k0, Value kCols) {
  // S^T[j][r] = scale * sum_p (K[j][2p] Q[r][2p] + K[j][2p+1] Q[r][2p+1]):
  // the f32 micro-kernel's register block (key-rows keys x at most 4 query
  // vectors), each step broadcasting a K pair and doing vdpbf16ps with
  // the Q pair row p, half the steps of the f32 kernel.
  int64_t qVecs = cfg.blockQ / cfg.vw;
  int64_t groupVecs = std::min(qVecs, kScoreQueryVectors);
  int64_t kr = cfg.keyRows;
  auto pairType = VectorType::get({2 * cfg.vw}, b.getBF16Type());
  Value numBlocks = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, kr));
  loop(b, cIdx(b, 0), numBlocks, [&](OpBuilder &lb, Value kb) {
    Value j0 = mul(lb, kb, cIdx(lb, kr));
    // The key rows of the block in place, clamped to the last key (rows
    // past kCols are computed but never used).
    prefetchBlockKeys(lb, add(lb, k0, j0), kr);
    Value last = sub(lb, kvEnd, cIdx(lb, 1));
    SmallVector<SmallVector<Value>> keyIdx;
    for (int64_t i = 0; i < kr; ++i)
      keyIdx.push_back(
          kvRow(lb, minI(lb, add(lb, add(lb, k0, j0), cIdx(lb, i)), last)));
    Value scaleV = splatF32(lb, scale);
    for (int64_t g0 = 0; g0 < qVecs; g0 += groupVecs) {
      int64_t gv = std::min(groupVecs, qVecs - g0);
      SmallVector<Value> inits(kr * gv, splatF32(lb, 0.0f));
      auto pLoop = scf::ForOp::create(
          lb, loc, cIdx(lb, 0), cIdx(lb, headDim / 2), cIdx(lb, 1), inits,
          [&](OpBuilder &db, Location, Value p, ValueRange acc) {
            SmallVector<Value> next(acc);
            SmallVector<Value> qv;
            for (int64_t v = 0; v < gv; ++v)
              qv.push_back(vector::LoadOp::create(
                  db, loc, pairType, qPairs,
                  ValueRange{p, cIdx(db, 2 * (g0 + v) * cfg.vw)}));
            Value d = mul(db, p, cIdx(db, 2));
            for (int64_t i = 0; i < kr; ++i) {
              Value kp = bf16PairBroadcast(db, kSrc, withLast(keyIdx[i], d));
              for (int64_t v = 0; v < gv; ++v) {
                int64_t a = i * gv + v;
                next[a] =
                    x86vector::DotBF16Op::create(db, loc, acc[a], kp, qv[v]);
              }
            }
            scf::YieldOp::create(db, loc, next);
          });
      for (int64_t i = 0; i < kr; ++i)
        for (int64_t v = 0; v < gv; ++v)
          vstore(lb,
                 arith::MulFOp::create(lb, loc, pLoop.getResult(i * gv + v),
                                       scaleV),
                 sT, {add(lb, j0, cIdx(lb, i)), cIdx(lb, (g0 + v) * cfg.vw)});
    }
  });
}

void CpuKernelBuilder::buildBf16ValuePairs(OpBuilder &b, Value k0,
                                           Value kCols) {
  // vPairs[p] = the V rows of keys 2p and 2p + 1 interleaved (a key past
  // kCols is 0), so that P V's vdpbf16ps adds two keys per lane. Where a
  // tile may be guarded, also whether a row holds an inf or a NaN (an
  // exponent of all ones).
  Type i16 = b.getI16Type();
  auto i16Vec = VectorType::get({cfg.vw}, i16);
  auto boolVec = VectorType::get({cfg.vw}, b.getI1Type());
  bool track = mayGuardValues();
  Value numPairs = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, 2));
  Value last = sub(b, kvEnd, cIdx(b, 1));
  Value zeros = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(VectorType::get({cfg.vw}, elt),
                             b.getZeroAttr(elt)));
  Value expMask = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(i16Vec, b.getIntegerAttr(i16, 0x7f80)));
  SmallVector<Value> inits;
  if (track)
    inits.push_back(arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(boolVec, false)));
  auto pairLoop = scf::ForOp::create(
      b, loc, cIdx(b, 0), numPairs, cIdx(b, 1), inits,
      [&](OpBuilder &lb, Location, Value p, ValueRange flags) {
        auto [j, j1, has1] = keyPair(lb, p, kCols);
        SmallVector<Value> row0 = kvRow(lb, add(lb, k0, j));
        SmallVector<Value> row1 = kvRow(lb, minI(lb, add(lb, k0, j1), last));
        Value flag = track ? flags[0] : Value();
        for (int64_t c = 0; c < valueDimPad; c += cfg.vw) {
          Value a = rawRow(lb, vSrc, row0, c, valueDim);
          Value second = arith::SelectOp::create(
              lb, loc, has1, rawRow(lb, vSrc, row1, c, valueDim), zeros);
          if (track)
            for (Value x : {a, second}) {
              Value e = arith::AndIOp::create(
                  lb, loc, vector::BitCastOp::create(lb, loc, i16Vec, x),
                  expMask);
              flag = arith::OrIOp::create(
                  lb, loc, flag,
                  arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::eq, e,
                                        expMask));
            }
          Value pair = vector::InterleaveOp::create(lb, loc, a, second);
          vector::StoreOp::create(lb, loc, pair, vPairs,
                                  ValueRange{p, cIdx(lb, 2 * c)});
        }
        SmallVector<Value> next;
        if (track)
          next.push_back(flag);
        scf::YieldOp::create(lb, loc, next);
      });
  vNonFinite =
      track ? Value(vector::ReductionOp::create(
                  b, loc, vector::CombiningKind::OR, pairLoop.getResult(0)))
            : Value();
}

SmallVector<Value>
CpuKernelBuilder::buildBf16Probabilities(OpBuilder &b, Value kCols,
                                         ArrayRef<Value> mUse) {
  // Softmax pass 2 for the bf16 dot-product P V, over pairs of key rows of
  // S^T: P = exp(S - m_use) and its sum per lane in f32; pPairs[p] = P^T
  // rows 2p and 2p + 1 rounded to bf16 (vcvtneps2bf16, round to nearest
  // even) and interleaved, so that (P[r][2p], P[r][2p + 1]) is one 32-bit
  // word; a key past kCols is 0. The f32 P goes back to S^T only where a
  // tile may take the guarded f32 P V (a removed key's inf or NaN V row).
  // Row 2p + 1 of S^T exists even past kCols (S^T has an even number of
  // rows, keyRowsPad); its exp is computed and dropped.
  int64_t qVecs = cfg.blockQ / cfg.vw;
  bool keepF32 = mayGuardValues();
  auto halfType = VectorType::get({cfg.vw}, b.getBF16Type());
  Value numPairs = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, 2));
  SmallVector<Value> sumInit(qVecs, splatF32(b, 0.0f));
  auto pairLoop = scf::ForOp::create(
      b, loc, cIdx(b, 0), numPairs, cIdx(b, 1), sumInit,
      [&](OpBuilder &lb, Location, Value p, ValueRange sum) {
        auto [j, j1, has1] = keyPair(lb, p, kCols);
        SmallVector<Value> next;
        for (int64_t v = 0; v < qVecs; ++v) {
          Value col = cIdx(lb, v * cfg.vw);
          Value first = lowering::buildSoftmaxExp(
              lb, loc,
              arith::SubFOp::create(lb, loc, vload(lb, sT, {j, col}), mUse[v]));
          Value second = arith::SelectOp::create(
              lb, loc, has1,
              lowering::buildSoftmaxExp(
                  lb, loc,
                  arith::SubFOp::create(lb, loc, vload(lb, sT, {j1, col}),
                                        mUse[v])),
              splatF32(lb, 0.0f));
          if (keepF32) {
            vstore(lb, first, sT, {j, col});
            vstore(lb, second, sT, {j1, col});
          }
          next.push_back(arith::AddFOp::create(
              lb, loc, sum[v], arith::AddFOp::create(lb, loc, first, second)));
          Value r0 =
              x86vector::CvtPackedF32ToBF16Op::create(lb, loc, halfType, first);
          Value r1 = x86vector::CvtPackedF32ToBF16Op::create(lb, loc, halfType,
                                                             second);
          Value pair = vector::InterleaveOp::create(lb, loc, r0, r1);
          vector::StoreOp::create(lb, loc, pair, pPairs,
                                  ValueRange{p, cIdx(lb, 2 * v * cfg.vw)});
        }
        scf::YieldOp::create(lb, loc, next);
      });
  return SmallVector<Value>(pairLoop.getResults());
}

void CpuKernelBuilder::buildBf16PV(OpBuilder &b, Value kCols) {
  // acc[r] = alpha[r] * acc[r] + sum_p (P[r][2p] V[2p] + P[r][2p+1]
  // V[2p+1]): the f32 micro-kernel's register block (pv-rows rows x
  // pv-vectors vectors of Dv), each step broadcasting a P pair and doing
  // vdpbf16ps with the V pair row p.
  int64_t rows = cfg.pvRows;
  auto pairType = VectorType::get({2 * cfg.vw}, b.getBF16Type());
  Value numPairs = arith::CeilDivUIOp::create(b, loc, kCols, cIdx(b, 2));
  buildPVBlocks(b, [&](OpBuilder &lb, ArrayRef<Value> rowIdx, int64_t g0,
                       int64_t nv, ValueRange inits) {
    auto pLoop = scf::ForOp::create(
        lb, loc, cIdx(lb, 0), numPairs, cIdx(lb, 1), inits,
        [&](OpBuilder &kb, Location, Value p, ValueRange acc) {
          SmallVector<Value> vv;
          for (int64_t v = 0; v < nv; ++v)
            vv.push_back(vector::LoadOp::create(
                kb, loc, pairType, vPairs,
                ValueRange{p, cIdx(kb, 2 * (g0 + v) * cfg.vw)}));
          SmallVector<Value> next;
          for (int64_t i = 0; i < rows; ++i) {
            Value pb = bf16PairBroadcast(
                kb, pPairs, ValueRange{p, mul(kb, rowIdx[i], cIdx(kb, 2))});
            for (int64_t v = 0; v < nv; ++v)
              next.push_back(x86vector::DotBF16Op::create(
                  kb, loc, acc[i * nv + v], pb, vv[v]));
          }
          scf::YieldOp::create(kb, loc, next);
        });
    return SmallVector<Value>(pLoop.getResults());
  });
}

void CpuKernelBuilder::buildEpilogue(OpBuilder &b) {
  // O = acc / l and LSE = m + log(l); a row with nothing attended (l == 0)
  // gives O = 0 and LSE = -inf.
  float inf = std::numeric_limits<float>::infinity();
  loop(b, cIdx(b, 0), rows, [&](OpBuilder &lb, Value r) {
    Value q = rowQuery(lb, r);
    Value h = rowHead(lb, r);
    Value l = memref::LoadOp::create(lb, loc, lBuf, ValueRange{r});
    Value empty = arith::CmpFOp::create(lb, loc, arith::CmpFPredicate::OEQ, l,
                                        cF32(lb, 0.0f));
    Value inv = arith::DivFOp::create(lb, loc, cF32(lb, 1.0f), l);
    Value invB = bcast(lb, inv);
    Value emptyB = vector::BroadcastOp::create(
        lb, loc, VectorType::get({cfg.vw}, lb.getI1Type()), empty);
    for (int64_t c = 0; c < valueDimPad; c += cfg.vw) {
      Value a = vload(lb, oAcc, {r, cIdx(lb, c)});
      Value o =
          arith::SelectOp::create(lb, loc, emptyB, splatF32(lb, 0.0f),
                                  arith::MulFOp::create(lb, loc, a, invB));
      bool inBounds = c + cfg.vw <= valueDim;
      if (split) {
        // The partial result, in f32, for fa.merge.
        vector::TransferWriteOp::create(
            lb, loc, o, splits.o, ValueRange{split, batch, h, q, cIdx(lb, c)},
            ArrayRef<bool>{inBounds});
        continue;
      }
      if (!elt.isF32())
        o = arith::TruncFOp::create(lb, loc, VectorType::get({cfg.vw}, elt), o);
      SmallVector<Value> at = qRow(lb, h, q);
      at.push_back(cIdx(lb, c));
      vector::TransferWriteOp::create(lb, loc, o, args.o, at,
                                      ArrayRef<bool>{inBounds});
    }
    if (args.lse || split) {
      Value m = memref::LoadOp::create(lb, loc, mBuf, ValueRange{r});
      Value lse =
          arith::AddFOp::create(lb, loc, m, math::LogOp::create(lb, loc, l));
      lse = arith::SelectOp::create(lb, loc, empty, cF32(lb, -inf), lse);
      if (split)
        memref::StoreOp::create(lb, loc, lse, splits.lse,
                                ValueRange{split, batch, h, q});
      else
        memref::StoreOp::create(lb, loc, lse, args.lse, lseIndex(lb, h, q));
    }
  });
}

//===----------------------------------------------------------------------===//
// Tile sizes
//===----------------------------------------------------------------------===//

/// The L2 size assumed when none is given (small for current x86 and
/// AArch64 cores, which have 0.5 to 2 MiB per core). The tools pass the
/// host's (fa::compile::getHostL2CacheSize).
static constexpr int64_t kDefaultL2CacheSize = 512 * 1024;

/// Fills in block-q and block-kv where they are 0 (automatic) for an
/// attention with head dims D and Dv, given the L2 size per core. All
/// scratch is f32 (f16/bf16 K and V are packed as f32), so sizes are
/// 4 bytes per element; D and Dv are rounded up to the vector width.
///
///  * block-q is four vectors, 4 W: the register block of the S^T
///    micro-kernel (key-rows x block-q / W accumulators plus block-q / W Q^T
///    vectors fill the 32 AVX-512 or 16 AVX2 registers), unless the query
///    tile's own state, Q^T and the O accumulator (block-q x (D + Dv)),
///    would take more than a quarter of L2; then the largest multiple of
///    lcm(W, pv-rows) that fits (at least one).
///  * block-kv: the V tile is re-read by every register block of pv-rows
///    queries and S^T by the two softmax sweeps and by P V, so the key
///    tile's data, the K and V tiles (block-kv x (D + Dv)), S^T and the
///    mask tile (block-kv x block-q each), must stay in L2 next to the
///    query tile's state: all of it in half the L2 (the other half for the
///    streamed K/V rows of the next tile and the outputs). block-kv is the
///    largest multiple of 16 that fits, in [16, 512]; larger key tiles
///    amortize the per-tile rescale of the O accumulator and the row
///    statistics.
///
/// The L1 is not part of the model: Q^T (4 D block-q bytes, 32 KiB at
/// D = 128) is streamed once per register block of keys and the hardware
/// prefetcher keeps that stream fed from L2; 32-row tiles, whose Q^T fits
/// a 32 KiB L1 at D = 128 and 256, measured no faster than 64-row ones
/// (bench/cpu/bench_tiles.py).
static void chooseTileSizes(CpuKernelConfig &cfg, int64_t headDim,
                            int64_t valueDim, bool hasMask, int64_t l2CacheSize,
                            int64_t kvHeads = 1, int64_t l1CacheSize = 0) {
  int64_t dPad = llvm::divideCeil(headDim, cfg.vw) * cfg.vw;
  int64_t dvPad = llvm::divideCeil(valueDim, cfg.vw) * cfg.vw;
  if (cfg.blockQ == 0) {
    int64_t align = std::lcm(cfg.vw, cfg.pvRows);
    int64_t fit = l2CacheSize / 4 / (4 * std::max<int64_t>(dPad + dvPad, 1));
    int64_t bq = std::min(fit, 4 * cfg.vw) / align * align;
    cfg.blockQ = std::max(bq, align);
  }
  if (cfg.blockKV == 0) {
    constexpr int64_t kMinBlockKV = 16, kMaxBlockKV = 512;
    int64_t bq = cfg.blockQ;
    // With allKvHeads (kvHeads > 1) a key tile's K and V rows of every kv
    // head, and every head's row state, share the L2.
    int64_t queryState = 4 * bq * (dPad + dvPad) * kvHeads;
    int64_t perKey = 4 * ((dPad + dvPad) * kvHeads + bq * (hasMask ? 2 : 1));
    int64_t fit = (l2CacheSize / 2 - queryState) / perKey;
    cfg.blockKV = std::clamp<int64_t>(fit / kMinBlockKV * kMinBlockKV,
                                      kMinBlockKV, kMaxBlockKV);
    // P V passes over the tile's V rows once per block of pv-rows query
    // rows, reading S^T (and the mask tile) beside them: where a tile of
    // at least kMinL1BlockKV keys keeps those in L1, take the largest such
    // tile (D = 64: 96 keys, D = 96 and 128: 64 with 48 KiB of L1; D = 256
    // keeps the L2 rule).
    constexpr int64_t kMinL1BlockKV = 64;
    int64_t l1Fit =
        l1CacheSize / (4 * (dvPad + bq * (hasMask ? 2 : 1))) / kMinBlockKV *
        kMinBlockKV;
    if (l1Fit >= kMinL1BlockKV)
      cfg.blockKV = std::min(cfg.blockKV, l1Fit);
  }
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FACpuAttentionPass final
    : fa::impl::FACpuAttentionPassBase<FACpuAttentionPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

/// Erases the tensor-level ops the kernel left without uses (the
/// to_tensor reads, the i8 -> i1 mask conversion, dims of them).
static void eraseDeadTensorOps(Region &region) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    region.walk<WalkOrder::PostOrder, mlir::ReverseIterator>([&](Operation *o) {
      if (!o->use_empty() || o->getNumResults() == 0)
        return;
      if (isa<bufferization::ToTensorOp>(o) || isOpTriviallyDead(o))
        dead.push_back(o);
    });
    for (Operation *o : dead) {
      o->erase();
      changed = true;
    }
  }
}

/// The tensor type of a memref.
static RankedTensorType tensorTypeOf(Value memref) {
  auto t = cast<MemRefType>(memref.getType());
  return RankedTensorType::get(t.getShape(), t.getElementType());
}

/// The largest row state (bytes) of a decode tile over all kv heads
/// (CpuKernelConfig::allKvHeads), on the stack of each thread; with the
/// stage of a key tile at most twice this.
constexpr int64_t kMaxAllKvHeadsState = 256 * 1024;

/// Builds the decode kernel at `b`, with split-KV when `kvSplits` asks for
/// it: the splits write partial (O, LSE) to a workspace and `fa.merge`
/// combines them into the outputs (lowered by the caller). `kvSplits` > 1
/// forces that many splits, at most one per key tile of Nk; 0 chooses at
/// run time with `parallel`: enough splits for B x Hkv (1 with
/// allKvHeads) x query tiles x splits to reach twice the OpenMP threads
/// (omp_get_max_threads), at most one per two key tiles of Nk.
/// 1, or 0 without `parallel`, builds the kernel without splits.
static void buildDecodeKernel(OpBuilder &b, AttentionOp op,
                              const KernelOperands &args,
                              const CpuKernelConfig &cfg, int64_t kvSplits) {
  if (kvSplits == 1 || (kvSplits == 0 && !cfg.parallel)) {
    CpuKernelBuilder(op, args, cfg).build(b);
    return;
  }
  Location loc = op.getLoc();
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value batch = memref::DimOp::create(b, loc, args.q, 0);
  Value nq = memref::DimOp::create(b, loc, args.q, 2);
  Value nk = args.blockTable ? AttentionSemantics::pagedKeyCount(
                                   b, loc, args.blockTable, op.getPageSize())
                             : Value(memref::DimOp::create(b, loc, args.k, 2));
  Value count;
  if (kvSplits > 1) {
    // At most one run per key tile of Nk (more would only add empty runs
    // and workspace).
    Value keyTiles = arith::MaxUIOp::create(
        b, loc, arith::CeilDivUIOp::create(b, loc, nk, idx(cfg.blockKV)),
        idx(1));
    count = arith::MinUIOp::create(b, loc, idx(kvSplits), keyTiles);
  } else {
    auto module = op->getParentOfType<ModuleOp>();
    StringRef name = "omp_get_max_threads";
    auto fnType = b.getFunctionType({}, {b.getI32Type()});
    if (!module.lookupSymbol<func::FuncOp>(name)) {
      OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
      func::FuncOp::create(mb, loc, name, fnType).setPrivate();
    }
    Value threads = arith::IndexCastOp::create(
        b, loc, b.getIndexType(),
        func::CallOp::create(b, loc, name, TypeRange{b.getI32Type()},
                             ValueRange{})
            .getResult(0));
    Value rows = arith::MulIOp::create(b, loc, nq, idx(op.getGroupSize()));
    Value items = arith::MulIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, batch,
                              idx(cfg.allKvHeads ? 1 : op.getKvHeads())),
        arith::CeilDivUIOp::create(b, loc, rows, idx(cfg.blockQ)));
    items = arith::MaxUIOp::create(b, loc, items, idx(1));
    Value want = arith::CeilDivUIOp::create(
        b, loc, arith::MulIOp::create(b, loc, threads, idx(2)), items);
    Value cap = arith::CeilDivUIOp::create(b, loc, nk, idx(2 * cfg.blockKV));
    count = arith::MaxUIOp::create(
        b, loc, arith::MinUIOp::create(b, loc, want, cap), idx(1));
  }
  auto oType = cast<MemRefType>(args.o.getType());
  int64_t hq = oType.getDimSize(1), dv = oType.getDimSize(3);
  int64_t dyn = ShapedType::kDynamic;
  Type f32 = b.getF32Type();
  auto wsO = memref::AllocOp::create(
      b, loc, MemRefType::get({dyn, dyn, hq, dyn, dv}, f32),
      ValueRange{count, batch, nq}, b.getI64IntegerAttr(64));
  auto wsL = memref::AllocOp::create(
      b, loc, MemRefType::get({dyn, dyn, hq, dyn}, f32),
      ValueRange{count, batch, nq}, b.getI64IntegerAttr(64));
  CpuKernelBuilder(op, args, cfg, KVSplits{wsO, wsL, count}).build(b);
  // fa.merge of the partials into the outputs.
  auto read = [&](Value m) -> Value {
    return bufferization::ToTensorOp::create(b, loc, tensorTypeOf(m), m,
                                             /*restrict=*/true,
                                             /*writable=*/false);
  };
  // Empty outs of the outputs' types (their dynamic dims among B and Nq).
  auto empty = [&](Value out) -> Value {
    RankedTensorType t = tensorTypeOf(out);
    SmallVector<Value> sizes;
    for (auto [i, size] : llvm::enumerate(t.getShape()))
      if (ShapedType::isDynamic(size))
        sizes.push_back(memref::DimOp::create(b, loc, out, i));
    return tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType(),
                                   sizes);
  };
  Value initO = empty(args.o);
  Value initL;
  SmallVector<Type> results = {initO.getType()};
  if (args.lse) {
    initL = empty(args.lse);
    results.push_back(initL.getType());
  }
  auto merge =
      MergeOp::create(b, loc, results, read(wsO), read(wsL), initO, initL);
  bufferization::MaterializeInDestinationOp::create(
      b, loc, /*result=*/Type(), merge.getResult(), args.o,
      /*restrict=*/false, /*writable=*/true);
  if (args.lse)
    bufferization::MaterializeInDestinationOp::create(
        b, loc, /*result=*/Type(), merge.getLseResult(), args.lse,
        /*restrict=*/false, /*writable=*/true);
  // The pipeline's buffer deallocation frees the workspace (one-shot
  // bufferization does not accept a dealloc of a buffer read as a tensor).
}

/// Builds the kernel(s) of `op` before it: the general one on `cfg`'s
/// tiles and, with `decode` (and no block mask), the decode kernel
/// `decodeCfg` (packed query heads) for the shapes whose Nq x G rows fit
/// its tile; a dynamic Nq gets both behind an `scf.if`.
static void buildKernels(AttentionOp op, const KernelOperands &args,
                         const CpuKernelConfig &cfg,
                         const CpuKernelConfig &decodeCfg, bool decode,
                         int64_t kvSplits) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t group = op.getGroupSize();
  auto qType = cast<ShapedType>(op.getQuery().getType());
  if (!decode || args.blockMask) {
    CpuKernelBuilder(op, args, cfg).build(b);
    return;
  }
  if (args.cuSeqlensQ) {
    // Token-major variable-length batches: the decode kernel (without
    // split-KV) when the longest query sequence's Nq x G rows fit its
    // tile, as in a batch of decode steps; else the general one.
    Value numSeqs = arith::MaxSIOp::create(
        b, loc,
        arith::SubIOp::create(b, loc,
                              memref::DimOp::create(b, loc, args.cuSeqlensQ, 0),
                              arith::ConstantIndexOp::create(b, loc, 1)),
        arith::ConstantIndexOp::create(b, loc, 0));
    Value rows = arith::MulIOp::create(
        b, loc, longestSequence(b, loc, args.cuSeqlensQ, args.q, numSeqs),
        arith::ConstantIndexOp::create(b, loc, group));
    Value fits = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ule, rows,
        arith::ConstantIndexOp::create(b, loc, decodeCfg.blockQ));
    scf::IfOp::create(
        b, loc, fits,
        [&](OpBuilder &tb, Location) {
          CpuKernelBuilder(op, args, decodeCfg).build(tb);
          scf::YieldOp::create(tb, loc);
        },
        [&](OpBuilder &eb, Location) {
          CpuKernelBuilder(op, args, cfg).build(eb);
          scf::YieldOp::create(eb, loc);
        });
    return;
  }
  int64_t nq = qType.getDimSize(2);
  if (!ShapedType::isDynamic(nq)) {
    if (nq * group <= decodeCfg.blockQ)
      buildDecodeKernel(b, op, args, decodeCfg, kvSplits);
    else
      CpuKernelBuilder(op, args, cfg).build(b);
    return;
  }
  Value rows =
      arith::MulIOp::create(b, loc, memref::DimOp::create(b, loc, args.q, 2),
                            arith::ConstantIndexOp::create(b, loc, group));
  Value fits = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ule, rows,
      arith::ConstantIndexOp::create(b, loc, decodeCfg.blockQ));
  scf::IfOp::create(
      b, loc, fits,
      [&](OpBuilder &tb, Location) {
        buildDecodeKernel(tb, op, args, decodeCfg, kvSplits);
        scf::YieldOp::create(tb, loc);
      },
      [&](OpBuilder &eb, Location) {
        CpuKernelBuilder(op, args, cfg).build(eb);
        scf::YieldOp::create(eb, loc);
      });
}

void FACpuAttentionPass::runOnOperation() {
  CpuKernelConfig cfg;
  cfg.vw = vectorWidth;
  cfg.blockQ = blockQ;
  cfg.blockKV = blockKV;
  cfg.keyRows = keyRows;
  cfg.pvRows = pvRows;
  cfg.pvVectors = pvVectors;
  cfg.parallel = parallel;
  cfg.bf16Dot = bf16Dot;
  Location loc = getOperation()->getLoc();
  if (cfg.vw <= 0 || cfg.keyRows <= 0 || cfg.pvRows <= 0 || cfg.pvVectors < 0) {
    mlir::emitError(loc) << "fa-cpu-attention: vector-width, key-rows and "
                            "pv-rows must be positive, pv-vectors positive "
                            "or 0 (automatic)";
    return signalPassFailure();
  }
  if (kvSplits < 0) {
    mlir::emitError(loc) << "fa-cpu-attention: kv-splits must be 0 "
                            "(automatic) or positive, got "
                         << static_cast<int64_t>(kvSplits);
    return signalPassFailure();
  }
  if (cfg.blockKV < 0 || l2CacheSize < 0) {
    mlir::emitError(loc) << "fa-cpu-attention: block-kv and l2-cache-size "
                            "must not be negative (0: automatic), got "
                         << cfg.blockKV << " and "
                         << static_cast<int64_t>(l2CacheSize);
    return signalPassFailure();
  }
  if (cfg.blockQ < 0 || (cfg.blockQ > 0 && (cfg.blockQ % cfg.vw != 0 ||
                                            cfg.blockQ % cfg.pvRows != 0))) {
    mlir::emitError(loc) << "fa-cpu-attention: block-q must be 0 "
                            "(automatic) or a positive multiple of "
                            "vector-width ("
                         << cfg.vw << ") and of pv-rows (" << cfg.pvRows
                         << "), got " << cfg.blockQ;
    return signalPassFailure();
  }
  if (l1CacheSize < 0) {
    mlir::emitError(loc) << "fa-cpu-attention: l1-cache-size must not be "
                            "negative (0: unknown), got "
                         << static_cast<int64_t>(l1CacheSize);
    return signalPassFailure();
  }
  int64_t l2 = l2CacheSize == 0 ? kDefaultL2CacheSize : l2CacheSize;

  SmallVector<AttentionOp> ops;
  getOperation()->walk([&](AttentionOp op) { ops.push_back(op); });
  // The fa.merge ops split-KV kernels create are lowered here (the
  // pipeline's fa-lower-merge has run); the user's are left alone.
  llvm::SmallPtrSet<Operation *, 4> userMerges;
  getOperation()->walk([&](MergeOp m) { userMerges.insert(m); });
  for (AttentionOp op : ops) {
    FailureOr<KernelOperands> args = matchKernelForm(op);
    if (failed(args)) {
      if (requireKernelForm) {
        (void)emitNotInKernelFormError(op, getArgument());
        return signalPassFailure();
      }
      // Left for fa-tile-attention.
      continue;
    }
    if (failed(verifyKernelResultUses(op, getArgument())))
      return signalPassFailure();
    SmallVector<Operation *> users;
    for (Value r : op->getResults())
      for (Operation *u : r.getUsers())
        users.push_back(u);
    CpuKernelConfig opCfg = cfg;
    if (DenseI64ArrayAttr tiles = op.getBlockTilesAttr()) {
      // The block mask's entries are per tile pair: the kernel's tiles are
      // its tiles.
      if (tiles[0] % cfg.vw != 0 || tiles[0] % cfg.pvRows != 0) {
        op.emitError() << "fa-cpu-attention: the block mask's query tiles ("
                       << tiles[0] << " rows) must be a multiple of the "
                       << "vector width (" << cfg.vw << ") and of pv-rows ("
                       << cfg.pvRows << ")";
        return signalPassFailure();
      }
      opCfg.blockQ = tiles[0];
      opCfg.blockKV = tiles[1];
    }
    int64_t d = op.getHeadDim();
    int64_t dv = op.getValueHeadDim();
    chooseTileSizes(opCfg, d, dv, static_cast<bool>(args->mask), l2,
                    /*kvHeads=*/1, l1CacheSize);
    // The decode kernel: one tile of lcm(W, pv-rows) packed rows, block-kv
    // as given or chosen for that tile. Its S^T micro-kernel has one query
    // vector: key-rows x 2 partial sums over d keep the FMA chains from
    // being latency-bound within the register file (16 vector registers
    // below AVX-512: 3 x 2 accumulators; 32: 6 x 2).
    CpuKernelConfig decodeCfg = cfg;
    decodeCfg.packGroup = true;
    decodeCfg.blockQ = std::lcm(cfg.vw, cfg.pvRows);
    decodeCfg.keyRows = cfg.vw >= 16 ? 6 : 3;
    decodeCfg.dSplit = 2;
    // A paged cache: all kv heads per tile where D is a multiple of the
    // vector width (the dot-product scores) and their row state is small
    // enough for the stack (qR and the accumulator of every head).
    int64_t hkv = op.getKvHeads();
    int64_t rowState = 4 * hkv * decodeCfg.blockQ *
                       (d + llvm::divideCeil(dv, cfg.vw) * cfg.vw);
    decodeCfg.allKvHeads = args->blockTable && hkv > 1 && d % cfg.vw == 0 &&
                           rowState <= kMaxAllKvHeadsState;
    CpuKernelConfig perHeadCfg = decodeCfg;
    chooseTileSizes(decodeCfg, d, dv, static_cast<bool>(args->mask), l2,
                    decodeCfg.allKvHeads ? hkv : 1);
    // The stage of a key tile (K and V rows of every kv head) is on the
    // stack too.
    int64_t stage =
        4 * decodeCfg.blockKV * hkv *
        (llvm::divideCeil(d, cfg.vw) + llvm::divideCeil(dv, cfg.vw)) * cfg.vw;
    if (decodeCfg.allKvHeads && rowState + stage > 2 * kMaxAllKvHeadsState) {
      decodeCfg = perHeadCfg;
      decodeCfg.allKvHeads = false;
      chooseTileSizes(decodeCfg, d, dv, static_cast<bool>(args->mask), l2);
    }
    Operation *anchor = op->getParentOp();
    llvm::SmallPtrSet<Operation *, 4> userTanhs;
    anchor->walk([&](math::TanhOp t) { userTanhs.insert(t); });
    buildKernels(op, *args, opCfg, decodeCfg, decodeTiles, kvSplits);
    for (Operation *u : users)
      u->erase();
    Region *region = op->getParentRegion();
    op->erase();
    eraseDeadTensorOps(*region);
    // The softcap's tanh on vectors: a rational approximation (a few ulp,
    // exact +-1 saturation) instead of a libm call per lane.
    SmallVector<Operation *> tanhs;
    anchor->walk([&](math::TanhOp t) {
      if (!userTanhs.contains(t))
        tanhs.push_back(t);
    });
    if (failed(lowering::approximateTanh(tanhs)))
      return signalPassFailure();
  }
  SmallVector<Operation *> merges;
  getOperation()->walk([&](MergeOp m) {
    if (!userMerges.contains(m))
      merges.push_back(m);
  });
  if (merges.empty())
    return;
  RewritePatternSet patterns(&getContext());
  populateFALowerMergePatterns(patterns);
  if (failed(applyOpPatternsGreedily(merges, std::move(patterns))))
    return signalPassFailure();
}
