//===- GpuKernelCommon.h - shared by the tensor-core kernels ----*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What fa-map-to-tensor-cores (mma.sync) and fa-map-to-wgmma (Hopper wgmma)
// have in common: the selection of the kernel functions, the host-side
// launch, and a kernel builder base class with the block coordinates, the
// key range of a block, the score masks, the online-softmax row maximum, the
// K/V copy pipeline and the O/LSE stores. Both kernels give a thread two
// query rows, lane / 4 and lane / 4 + 8 of its warp's 16, and the 4 lanes of
// a quad share a row.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CODEGEN_GPU_NVIDIA_GPUKERNELCOMMON_H
#define FA_LIB_CODEGEN_GPU_NVIDIA_GPUKERNELCOMMON_H

#include "fa/Codegen/GPU/GpuKernelUtils.h"

#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <tuple>
#include <utility>

namespace mlir {
namespace fa {
namespace gpukernel {

//===----------------------------------------------------------------------===//
// Pass-level helpers
//===----------------------------------------------------------------------===//

/// A kernel function the tensor-core passes rewrite, its attention op and
/// its memrefs.
using KernelCandidate = std::tuple<func::FuncOp, AttentionOp, KernelOperands>;

/// The functions of `module` that hold exactly one attention op accepted by
/// `eligible`, in the kernel form, whose memrefs are all function arguments
/// and whose mask (if any) is i1, i8 (0 = masked), f16, bf16 or f32.
SmallVector<KernelCandidate>
collectKernelCandidates(ModuleOp module,
                        function_ref<bool(AttentionOp)> eligible);

/// Launch geometry and the `fa.gpu_config` entries of one kernel.
struct KernelLaunch {
  /// Query rows per block (blocks: ceil(Nq / blockQ) x heads x batches;
  /// with split-KV ceil(Nq / blockQ) x S in x).
  int64_t blockQ;
  int64_t numThreads;
  int64_t sharedBytes;
  /// Index entries of the config attribute, then `flag` as a unit entry.
  SmallVector<std::pair<StringRef, int64_t>> configEntries;
  StringRef flag;
  /// Split-KV: the kernel writes partials into the workspace arguments
  /// (KernelOperands::partialO/partialLse), whose first dim S multiplies
  /// the grid's x; a second kernel, `<function>_merge` (fa.merge's, built
  /// as a block forall that fa-map-to-gpu outlines), combines them.
  /// fa.gpu_config gets the unit entry `split_kv`.
  bool splitKv = false;
  /// Packed query heads (decode, FlashAttention 3's pack_gqa): the grid is
  /// (ceil(Nq G / blockQ), Hkv, B), a block's rows the packed rows of the
  /// G query heads of its kv head (AttentionSemantics::unpackGqaRow).
  /// fa.gpu_config gets the unit entry `pack_gqa`.
  bool packGqa = false;
};

/// Checks that `launch.sharedBytes` of workgroup memory fit what one block of
/// `chip` may opt in to (the chip table); otherwise emits an error on `op`
/// naming `pass`, the bytes, the limit and the tiles (`tiles` describes
/// them, e.g. "block-q = 128, block-kv = 128, stages = 4"). An unknown chip
/// is an error too.
LogicalResult checkSharedMemoryFits(AttentionOp op, StringRef pass,
                                    StringRef chip,
                                    const KernelLaunch &launch,
                                    StringRef tiles);

/// Split-KV: appends the workspace arguments to `func` and records them in
/// `args` (partialO, partialLse); an error naming `pass` for the forms it
/// does not apply to (variable-length batches).
LogicalResult addSplitWorkspace(AttentionOp op, StringRef pass,
                                func::FuncOp func, KernelOperands &args);

/// Replaces each math.tanh in `kernel` by a rational approximation, then
/// the f32 math.fma, math.absf, math.exp2 and math.log2 by LLVM / NVVM
/// intrinsics (no libdevice is linked).
void approximateTanhForNVVM(Operation *kernel);

/// A `gpu.func` kernel named `name` at the end of `gpuModule` with the
/// signature of `func` and the known block size (numThreads, 1, 1).
gpu::GPUFuncOp createKernelFunc(gpu::GPUModuleOp gpuModule, func::FuncOp func,
                                StringRef name, int64_t numThreads);

/// `v`, a value of the kernel function `kernel` was created from, inside
/// `kernel`: an argument becomes the kernel's parameter of the same
/// position, a constant (the q_offset) is cloned in; null stays null.
Value remapIntoKernel(gpu::GPUFuncOp kernel, Value v);

/// Moves `func` into a gpu.module kernel: creates the gpu.func (same
/// signature, the known block size), lets `buildBody` emit its body from its
/// remapped memrefs, replaces the body of `func` by the launch (with
/// split-KV, followed by the merge's block forall) and records the
/// configuration on `func`.
void outlineKernel(
    ModuleOp module, func::FuncOp func, AttentionOp op,
    const KernelOperands &args, const KernelLaunch &launch,
    function_ref<void(gpu::GPUFuncOp, const KernelOperands &)> buildBody);

//===----------------------------------------------------------------------===//
// Kernel builder base
//===----------------------------------------------------------------------===//

/// The sizes of a kernel the shared parts of the builders need.
struct KernelTiles {
  int64_t blockQ, blockKV, stages, headDim, valueDim, numThreads;
};

/// Warps per block of the merge kernel of a split-KV tensor-core kernel
/// (one row per warp).
constexpr int64_t kSplitMergeWarps = 4;

/// State and emitters shared by the tensor-core kernel builders.
class AttentionKernelBuilder {
public:
  AttentionKernelBuilder(AttentionOp op, const KernelTiles &tiles);
  virtual ~AttentionKernelBuilder() = default;

protected:
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
  Value shuffleXor(Value v, int64_t offset);
  /// exp2 of an f32 as the NVVM intrinsic ex2.approx.f32 (no libdevice).
  Value ex2(Value x);
  /// Row `r` (0 or 1) of the thread: q0 + 16 warp + lane / 4 + 8 r (a
  /// packed row with packed query heads).
  Value rowIndex(int64_t r);
  /// The query position, the head and the ALiBi slope of the thread's row
  /// `r`: rowIndex(r), the block's head and slope, or with packed heads
  /// its unpacked row's.
  Value rowQuery(int64_t r) { return packed ? packedQuery[r] : rowIndex(r); }
  Value rowHead(int64_t r) { return packed ? packedHead[r] : head; }
  Value rowSlope(int64_t r) { return packed ? packedSlope[r] : slope; }
  /// The query positions [first, first + count) that the rows [r0, r0 +
  /// rows) hold (themselves without packed heads).
  AttentionSemantics::QueryRange queriesOfRows(Value r0, Value rows);

  /// Emits tid, lane and warp.
  void emitThreadIds();
  /// Emits batch, head, kvHead, laneRow and laneQuad2 (with split-KV,
  /// numParts and part: the grid's x is query tile x S, the part fastest);
  /// returns the query tile index.
  Value emitBlockIds();
  /// Emits nq, nk, q0, diag (with the q_offset), kvBegin, kvEnd (key
  /// lengths, causality, the window and the chunk applied), numKV and the
  /// head's ALiBi slope for the query tile `qTile`; zeroIdx is its index 0.
  /// With split-KV, kvBegin and numKV are the block's part of the visited
  /// tiles: ceil(tiles / S) consecutive ones (none for the parts past the
  /// last), and copyEnd the end of its last tile.
  void emitKeyRange(Value qTile);
  /// The first key of K/V tile `j` of the block: kvBegin + j * blockKV.
  Value tileStart(Value j);
  /// Whether a key of the tile from `k0` below kv_end may be removed for
  /// some row of the block (i1), so that a NaN/inf in its V row must not
  /// reach P V: always with a user mask or segment ids, the tiles crossing
  /// the diagonal with causality alone, the tiles needing element masks
  /// with a window or a chunk. Null when no key inside the range is ever
  /// removed.
  Value tileMayRemoveKeys(Value k0);
  /// The block mask's entry (i8: 0 no key, 1 partial, 2 full) for this
  /// block's query tile and the key tile holding `k0`, when the block mask
  /// can be used: its tiles (block_tiles) are whole multiples of the
  /// kernel's, so that each kernel tile lies in one block-mask tile. Null
  /// otherwise (every tile is then visited and masked; the result is the
  /// same).
  Value blockMaskEntry(Value k0);
  /// Whether the K/V tile from `k0` is visited (i1; null when every tile in
  /// [kvBegin, kvEnd) is): the block mask does not mark it empty and, with
  /// segment ids, some row of the block may share a document with some key
  /// of the tile. Sets tileMaskModPartial and tileKSegRange for the tile.
  Value tileVisited(Value k0);
  /// The range of the segment ids `ids[batch, first .. first + count)`
  /// (count <= maxCount; an empty range, min > max, when count <= 0):
  /// every warp reads them 32 at a time and reduces with shuffles, so the
  /// result is block-uniform.
  AttentionSemantics::SegmentRange segmentRange(Value ids, Value first,
                                                Value count,
                                                int64_t maxCount);
  /// Whether the tile from key `k0` crosses the causal diagonal of the
  /// block's first row.
  Value tileCrossesBlockDiagonal(Value k0);
  /// An i1 scf.if on `cond`: `thenValue()`, else false.
  Value ifElseFalse(Value cond, function_ref<Value()> thenValue);

  /// What the masking of one tile's scores reads, computed once per tile.
  struct ScoreMask {
    Value ninf;
    Value row[2], maskRow[2], mb, mh[2], lastKey;
    /// The segment ids of the thread's two rows (null without segments).
    Value qSeg[2];
  };
  ScoreMask beginScoreMask();
  /// The masked log2-domain score `v` of row `r` of the thread and `key`.
  Value maskScore(const ScoreMask &m, Value v, Value key, int64_t r);
  /// Applies `fn(score, key, r)` to every score of the thread in `x` (the
  /// scaled scores of the tile starting at key `k0`; `r` is the thread's
  /// row, 0 or 1): the kernel's fragment layout gives each element's key.
  virtual SmallVector<Value>
  mapScores(ArrayRef<Value> x, Value k0,
            function_ref<Value(Value, Value, int64_t)> fn) = 0;
  /// Applies key lengths, causality, the window, the chunk, segment ids and
  /// the user mask to the scaled scores `x` of the tile starting at `k0`.
  SmallVector<Value> maskScores(ArrayRef<Value> x, Value k0);
  /// The score modifiers (softcap, ALiBi) on every score of the tile, in
  /// the log2 domain; `x` unchanged without them.
  SmallVector<Value> modifyScores(ArrayRef<Value> x, Value k0);
  /// maskScores where the tile needs it: always with a user mask, else only
  /// on the tile holding kv_end and the tiles crossing the causal diagonal
  /// of this warp's rows.
  SmallVector<Value> maskScoresWhereNeeded(SmallVector<Value> x, Value k0);

  /// Online softmax of a row from the thread's maximum `mx` of its scores:
  /// the new row maximum over the quad and the previous one, the maximum
  /// exp2 is taken against (0 for a row still at -inf) and the rescaling
  /// of the old state.
  void updateRowMax(Value mx, Value mOld, Value ninf, Value zeroF, Value &mNew,
                    Value &mUse, Value &alpha);

  /// Issues the cp.async copies of rows [row0, row0 + rows) of
  /// `src[batch, srcHead, :, :]` (`width` columns) into `dst[prefix...]`,
  /// zero-filling rows at or past `rowEnd` (>= 1).
  virtual void copyTile(Value src, Value srcHead, Value row0, Value rowEnd,
                        int64_t rows, int64_t width, Value dst,
                        ValueRange prefix, SmallVectorImpl<Value> &tokens) = 0;
  /// Row `row0 + r` clamped into the source and the bytes to read of it
  /// (8 or 0: rows past the end are zero-filled).
  std::pair<Value, Value> clampCopyRow(Value row0, Value r, Value rowEnd,
                                       Value last, Value eight, Value zero);
  /// One 16-byte cp.async of `src[batch, srcHead, row, col]`; returns its
  /// token.
  Value copyChunk(Value dst, ValueRange dstIdx, Value src, Value srcHead,
                  Value row, Value col, Value bytes);
  /// Copies K/V tile `j` into slot `slot` and commits them as one group.
  Value copyKVTile(Value j, Value slot, SmallVector<Value> extraTokens = {});

  /// Before the barrier of tile `j` in the loop: returns a block-uniform
  /// value for tileUpdate (null by default).
  virtual Value beforeTileBarrier(Value j) { return Value(); }
  /// One KV tile: the loop body. Returns the new state.
  virtual SmallVector<Value> tileUpdate(Value j, ValueRange state,
                                        Value fromBarrier) = 0;
  /// The pipelined K/V loop from `init` (the state of a block without
  /// keys): Q with tile 0 as one group, tiles 1 .. stages - 2, then per tile
  /// the wait, the barrier, the next copy and tileUpdate. Returns the final
  /// state.
  ValueRange emitMainLoop(ValueRange init);

  /// Sums the thread's row sums `l` over the quad; `empty`: rows without
  /// any attended key, `inv`: 1 / l (0 for empty rows).
  void reduceRowSums(Value (&l)[2], Value (&empty)[2], Value (&inv)[2]);
  /// Row `r` of the output: its index, whether it is a row of the block's
  /// sequence (below Nq, or Nq G packed), its query position and head, its
  /// LSE (null without one).
  struct OutputRow {
    Value row, inRows, query, head, lse;
  };
  OutputRow beginOutputRow(int64_t r, Value m, Value l, Value empty);
  /// The index of O's element (row, col) of the block's sequence: [batch,
  /// head, row, col], or token-major [qStart + row, head, col]; with
  /// split-KV the part's partial O element [part, batch, head, row, col].
  SmallVector<Value> outputIndex(const OutputRow &row, Value col);
  /// Where O is stored: args.o, or with split-KV the partial O.
  Value outputBuffer() const { return isSplit() ? args.partialO : args.o; }
  /// The element type O is stored in: O's, or f32 for a split-KV partial.
  Type storedOutputType() const;
  /// Whether the kernel writes split-KV partials.
  bool isSplit() const { return static_cast<bool>(args.partialO); }
  /// For a row below Nq: `storeO()`, then the LSE from the quad's lead lane
  /// (with split-KV into the partial LSE, -inf where the part has no key).
  void storeOutputRow(const OutputRow &row, Value quadLead,
                      function_ref<void()> storeO);

  AttentionOp op;
  KernelTiles tiles;
  /// Packed query heads (KernelLaunch::packGqa): `head` and `slope` are
  /// null, rows are packed rows; set by the builder before emitBlockIds.
  bool packed = false;
  MLIRContext *ctx;
  Location loc;
  OpBuilder b{op.getContext()};
  Type elt, oElt;
  int64_t group;
  AttentionSemantics sem;
  float scaleLog2;
  KernelOperands args;

  // Per-block values.
  Value tid, lane, warp, batch, head, kvHead, q0, nq, nk, diag, kvBegin,
      kvEnd, numKV;
  /// Where the K/V copies stop reading (rows from it on are zero-filled):
  /// kvEnd, or with split-KV the end of the part's last tile if earlier.
  Value copyEnd;
  /// Split-KV: the number of parts S and the block's part (null otherwise).
  Value numParts, part;
  /// The block's rows (Nq, or Nq G with packed heads) and the query
  /// positions [qFirst, qFirst + qCount) its rows hold.
  Value nRows, qFirst, qCount;
  /// Packed heads: the query, head and slope of the thread's two rows.
  Value packedQuery[2], packedHead[2], packedSlope[2];
  /// The varlen form: the first token of the block's query and key
  /// sequences (null otherwise).
  Value qStart, kStart;
  /// The ALiBi slope of (batch, head) (f32; null without ALiBi).
  Value slope;
  /// Whether the kernel reads the op's block mask (its tiles line up).
  bool useBlockMask = false;
  /// While copyKVTile copies a tile: false where the tile is skipped (its
  /// rows are zero-filled without a read); null when every tile is read.
  Value copyKeep;
  /// While tileUpdate runs: whether the block mask marks the tile partial
  /// (i1), so that a full one skips the mask_mod; null without one.
  Value tileMaskModPartial;
  /// With segment ids: the id range of the block's query rows, and while
  /// tileUpdate runs, of the tile's keys (document masking skips the tiles
  /// they cannot share, and masks only those that mix documents).
  std::optional<AttentionSemantics::SegmentRange> qSegRange, tileKSegRange;
  Value zeroIdx;
  Value qs, ks, vs;
  // Per-lane fragment coordinates.
  Value laneRow, laneQuad2, warpRow0;
};

} // namespace gpukernel
} // namespace fa
} // namespace mlir

#endif // FA_LIB_CODEGEN_GPU_NVIDIA_GPUKERNELCOMMON_H
