//===- AttentionSemantics.h - the rules of fa.attention, once ---*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The one home of fa.attention's semantic contract as the lowerings need it:
// which keys a query row attends (key lengths, both causal alignments,
// boolean and additive masks), which keys a query tile visits, whether a
// (query tile, key tile) pair needs element masks, the online-softmax guards
// for rows with nothing attended, and which kernel families accept an op.
//
// Every lowering -- the reference, the tiled and CPU vector kernels, the
// promoted SIMT kernel, the mma.sync and wgmma kernels -- asks this API what
// to compute and adds only how to compute it on its target. The element
// rules build plain `arith` ops and accept index scalars or vectors (a
// scalar operand is splatted to the other operand's vector type), so the
// same rule serves a linalg body, a vector lane set and a GPU thread.
//
// Adding a mask kind means: its fields in `AttentionSemantics`, its element
// rule here (keep predicate or additive term), its tile rule in
// `tileNeedsElementMask`, and one element hook per backend family.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_UTILS_ATTENTIONSEMANTICS_H
#define FA_DIALECT_FA_UTILS_ATTENTIONSEMANTICS_H

#include "fa/Dialect/FA/IR/FA.h"

#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace mlir {
namespace fa {

//===----------------------------------------------------------------------===//
// Causal alignment
//===----------------------------------------------------------------------===//

/// Parses a causal alignment as the tools spell it: `none`, `top-left` or
/// `top_left`, `bottom-right` or `bottom_right`.
std::optional<CausalKind> parseCausalKind(StringRef name);

//===----------------------------------------------------------------------===//
// The rules of one op
//===----------------------------------------------------------------------===//

/// How a user mask element acts on a score.
enum class MaskKind {
  /// No user mask.
  None,
  /// i1 (true = attend) or i8 (0 = masked): removes keys.
  Keep,
  /// f16/bf16/f32: added to the scaled score.
  Additive,
};

/// The score and mask modifiers of an op (FlashAttention 2's definitions;
/// the op description in FAOps.td is the contract).
struct AttentionModifiers {
  /// window(left, right); -1 = unbounded on that side.
  int64_t windowLeft = -1, windowRight = -1;
  /// softcap(c): s = c * tanh(s / c).
  std::optional<double> softcap;
  /// chunk(C), 0 = none.
  int64_t chunk = 0;
  /// An ALiBi slopes operand: adds -slope * |q + off - k|.
  bool alibi = false;
  /// Query and key segment ids: keep when equal.
  bool segments = false;
  /// A q_offset operand, added to the diagonal offset.
  bool qOffset = false;
  /// General score_mod / mask_mod regions (the op's; null when absent).
  Region *scoreMod = nullptr;
  Region *maskMod = nullptr;
  /// The tiles (TQ, TK) of a block_mask operand describing the mask_mod;
  /// 0 without one.
  int64_t blockTileQ = 0, blockTileKV = 0;

  bool any() const {
    return windowLeft >= 0 || windowRight >= 0 || softcap || chunk > 0 ||
           alibi || segments || qOffset || scoreMod || maskMod;
  }
};

/// What an attention op computes, as far as masking and the key range go.
/// Built once per op by `get`; every lowering reads its rules from here.
class AttentionSemantics {
public:
  /// The range [min, max] of the segment ids (i32 scalars) of a tile's
  /// query rows or keys.
  struct SegmentRange {
    Value min, max;
  };

  /// The rules of `op`.
  static AttentionSemantics get(AttentionOp op);
  /// The rules of the forward computation `op` differentiates.
  static AttentionSemantics get(AttentionBackwardOp op);
  /// The rules of an op with these parts (for kernels described outside IR).
  static AttentionSemantics get(CausalKind causal, bool hasKeyLengths,
                                Type maskElementType,
                                const AttentionModifiers &modifiers = {});

  CausalKind getCausal() const { return causal; }
  bool isCausal() const { return causal != CausalKind::none; }
  bool hasKeyLengths() const { return keyLengths; }
  MaskKind getMaskKind() const { return mask; }
  bool hasMask() const { return mask != MaskKind::None; }
  bool hasKeepMask() const { return mask == MaskKind::Keep; }
  bool hasAdditiveMask() const { return mask == MaskKind::Additive; }
  Type getMaskElementType() const { return maskElementType; }
  const AttentionModifiers &getModifiers() const { return mods; }
  bool hasModifiers() const { return mods.any(); }
  bool hasWindowLeft() const { return mods.windowLeft >= 0; }
  bool hasWindowRight() const { return mods.windowRight >= 0; }
  bool hasChunk() const { return mods.chunk > 0; }
  bool hasSegments() const { return mods.segments; }
  bool hasAlibi() const { return mods.alibi; }
  bool hasSoftcap() const { return mods.softcap.has_value(); }
  bool hasScoreMod() const { return mods.scoreMod != nullptr; }
  bool hasMaskMod() const { return mods.maskMod != nullptr; }
  bool hasRegions() const { return hasScoreMod() || hasMaskMod(); }

  /// Whether a key inside a row's visited range can still be removed for
  /// that row (causality, a boolean mask, a window, a chunk, segments): its
  /// probability is then 0 while its V row may hold NaN/inf, so P·V must
  /// not multiply it.
  bool removesKeysInsideRange() const {
    return isCausal() || hasMask() || hasWindowLeft() || hasWindowRight() ||
           hasChunk() || hasSegments() || hasRegions();
  }

  //===--------------------------------------------------------------------===//
  // Index rules (index-typed scalars)
  //===--------------------------------------------------------------------===//

  /// The diagonal offset `off`: query row q is at key position q + off and
  /// (causal) keeps keys k <= q + off. Nk - Nq for bottom_right, 0
  /// otherwise, plus `qOffset` (the op's q_offset; null = none).
  Value diagonalOffset(OpBuilder &b, Location loc, Value nq, Value nk,
                       Value qOffset = Value()) const;

  /// The first key visited by the query rows starting at `q0`: every key
  /// below it is removed for all of them (window left bound, chunk); 0
  /// without those.
  Value visitedKeyBegin(OpBuilder &b, Location loc, Value q0, Value off) const;

  /// visitedKeyBegin rounded down to a multiple of `tile` (kernels whose
  /// key tiles stay on the tile grid), or null when every key from 0 on may
  /// be visited (no window left bound, no chunk).
  Value visitedTileBegin(OpBuilder &b, Location loc, Value q0, Value off,
                         int64_t tile) const;

  /// The number of keys in [begin, end): max(end - begin, 0), or `end`
  /// when `begin` is null (0).
  static Value visitedKeyCount(OpBuilder &b, Location loc, Value begin,
                               Value end);

  /// Whether a kernel whose query tiles hold `blockQ` rows and key tiles
  /// `blockKV` keys (starting on that grid) can use the op's block mask:
  /// there is one for a mask_mod, and its tiles are whole multiples of the
  /// kernel's, so that each kernel tile lies inside one block-mask tile.
  /// Otherwise a kernel visits and masks every tile (the same result).
  bool canUseBlockMask(int64_t blockQ, int64_t blockKV) const;

  /// The block mask's entry (i8: 0 no key kept, 1 some, 2 all) of the tile
  /// pair holding query row `q0` and key `k0`, from the block mask memref
  /// [B|1, Hq|1, QT, KT] (size-1 dims broadcast; key tiles past the last,
  /// which pipelined kernels may look at before their loop ends, read the
  /// last one).
  Value loadBlockMaskEntry(OpBuilder &b, Location loc, Value blockMask,
                           Value batch, Value head, Value q0, Value k0) const;

  /// The ALiBi slope of (batch, head) from the slopes ([Hq] or [B, Hq],
  /// f32; a memref or a tensor); null without slopes.
  static Value loadAlibiSlope(OpBuilder &b, Location loc, Value slopes,
                              Value batch, Value head);

  /// A sequence of a token-major variable-length batch: its first row and
  /// its length, from the i32 offsets `cu` ([B + 1] memref) of the
  /// `total` rows. The start is cu[batch] clamped to [0, total] and the
  /// end cu[batch + 1] clamped to [start, total], so that any offsets keep
  /// every row read inside the tensor.
  struct Sequence {
    Value start, length;
  };
  static Sequence loadSequence(OpBuilder &b, Location loc, Value cu,
                               Value batch, Value total);
  /// Sequence `batch`'s queries and keys: loadSequence of `cuQ` over the
  /// rows of `q` and of `cuK` over those of `k` (token-major memrefs,
  /// tokens in dim 0), for every kernel of the varlen form.
  struct SequencePair {
    Sequence queries, keys;
  };
  static SequencePair loadSequences(OpBuilder &b, Location loc, Value cuQ,
                                    Value cuK, Value batch, Value q, Value k);

  /// Packed query heads (FlashAttention 3's pack_gqa): the G = Hq / Hkv
  /// query heads that share kv head `kvHead` form one sequence of Nq x G
  /// rows, query-major: packed row `row` is query row / G of head
  /// kvHead * G + row % G. Every kernel that packs heads (the CPU decode
  /// kernel, the GPU SIMT decode kernel) maps its rows with this. `row`
  /// is an index or a vector of indices (one row per lane).
  struct PackedRow {
    Value query, head;
  };
  static PackedRow unpackGqaRow(OpBuilder &b, Location loc, Value row,
                                Value kvHead, int64_t group);
  /// The query rows [q0, q0 + count) the packed rows [r0, r0 + rows) hold
  /// (rows >= 1): q0 = r0 / G, count = (r0 + rows - 1) / G - q0 + 1.
  struct QueryRange {
    Value q0, count;
  };
  static QueryRange packedQueryRange(OpBuilder &b, Location loc, Value r0,
                                     Value rows, int64_t group);

  /// Split-KV on the GPU kernels: the key tiles [begin, end) of part
  /// `part` of `numParts` over `numTiles` visited tiles, ceil(numTiles /
  /// numParts) consecutive ones (begin = end = numTiles for the parts past
  /// the last tile: no key, LSE -inf, which the merge ignores).
  struct TileRange {
    Value begin, end;
  };
  static TileRange splitTileRange(OpBuilder &b, Location loc, Value numTiles,
                                  Value part, Value numParts);

  /// A paged K/V cache ([P, S, Hkv, D] pages read through an i32 block
  /// table [B, M]; docs/serving.md), for every kernel that reads one. The
  /// keys of a sequence: Nk = M S (`pagedKeyCount`); its length
  /// `keyEnd` (keyLengthEnd of kv_lens) is 0 when the cache has no page
  /// (`pagedKeyEnd`), and causality aligns to it, not to Nk. Key `key` of
  /// sequence `batch` is row key % S of page block_table[batch, key / S],
  /// the entry clamped to [0, P - 1] so that a bad table never makes the
  /// kernel read outside the cache (`pagedKeyRow`: {page, row}).
  static Value pagedKeyCount(OpBuilder &b, Location loc, Value blockTable,
                             int64_t pageSize);
  static Value pagedKeyEnd(OpBuilder &b, Location loc, Value cache,
                           Value keyEnd);
  struct PagedRow {
    Value page, row;
  };
  static PagedRow pagedKeyRow(OpBuilder &b, Location loc, Value blockTable,
                              Value cache, int64_t pageSize, Value batch,
                              Value key);

  /// fa.merge's rule (docs/merge.md), for every lowering of the op (linalg,
  /// the GPU kernel) and the CPU split-KV kernels: with `m` the rows' max
  /// LSE over the partials and mu = m (0 when m = -inf), a partial with LSE
  /// `lse` weighs exp(lse - mu) and is empty (contributes nothing, whatever
  /// its O holds) when lse = -inf.
  struct MergeWeight {
    Value weight, empty;
  };
  static MergeWeight mergeWeight(OpBuilder &b, Location loc, Value lse,
                                 Value m);
  /// The merged O from the weighted sum `acc` of the non-empty partials'
  /// O and the sum `l` of their weights: acc / l, 0 when l = 0 (no partial
  /// has keys). `acc` may be a vector, `l` a scalar.
  static Value mergedOutput(OpBuilder &b, Location loc, Value acc, Value l);
  /// The merged LSE: m + log l, -inf when l = 0.
  static Value mergedLse(OpBuilder &b, Location loc, Value m, Value l);

  /// The keys of a batch: min(max(len, 0), nk) for an integer key length
  /// `len` (any integer type; null = none), else nk.
  Value keyLengthEnd(OpBuilder &b, Location loc, Value len, Value nk) const;

  /// The end of the keys visited by the query rows [q0, q0 + rows): every
  /// key at or past it is removed for all of them (key lengths through
  /// `keyEnd` from keyLengthEnd; causality, the window's right bound and
  /// the chunk through `off`). It may lie below visitedKeyBegin: the tile
  /// then visits no key.
  Value visitedKeyEnd(OpBuilder &b, Location loc, Value keyEnd, Value q0,
                      Value rows, Value off) const;

  /// Whether the key tile [k0, k0 + cols) needs element masks for the query
  /// rows starting at `firstRow` (i1): a key of it lies at or past `keyEnd`,
  /// or (causal) past the diagonal of `firstRow`, or there is a user mask.
  /// Tiles for which it is false are full: every key is kept for every row.
  /// `rows` (the rows of the query tile) is needed for the window's left
  /// bound and the chunk; without it such tiles always need masks. With a
  /// mask_mod every tile needs them. With
  /// segments, `qSeg` and `kSeg` (the id ranges of the tile's rows and
  /// keys) decide through segmentTileNeedsMask; without them such tiles
  /// always need masks.
  /// With a mask_mod, `maskModPartial` (i1: the block mask marks the tile
  /// partial) decides the mask_mod's part; without it every tile needs
  /// masks.
  Value tileNeedsElementMask(OpBuilder &b, Location loc, Value k0, Value cols,
                             Value keyEnd, Value firstRow, Value off,
                             Value rows = Value(),
                             const SegmentRange *qSeg = nullptr,
                             const SegmentRange *kSeg = nullptr,
                             Value maskModPartial = Value()) const;

  /// Document masking, per (query tile, key tile): whether some query of
  /// the tile can share a segment with some key of the tile (i1), judged
  /// from the ranges of their ids. Tiles for which it is false are never
  /// visited. Exact for sorted ids (each tile's ids are then one
  /// contiguous run of documents); a conservative per-tile check for
  /// unsorted ones. True without segments.
  Value segmentTileVisited(OpBuilder &b, Location loc, SegmentRange q,
                           SegmentRange k) const;

  /// Whether segment ids remove some key of the tile for some query row
  /// (i1): false only when every query and every key of the tile lie in
  /// one and the same segment. False without segments.
  Value segmentTileNeedsMask(OpBuilder &b, Location loc, SegmentRange q,
                             SegmentRange k) const;

  /// Whether some key of [k0, k0 + cols) is causally removed for the row
  /// `firstRow` (and so for some row of a tile starting there); false when
  /// not causal.
  Value crossesDiagonal(OpBuilder &b, Location loc, Value k0, Value cols,
                        Value firstRow, Value off) const;

  //===--------------------------------------------------------------------===//
  // Element rules (index scalars or vectors of index)
  //===--------------------------------------------------------------------===//

  /// The last key query `q` keeps causally: q + off (null when not causal).
  Value lastCausalKey(OpBuilder &b, Location loc, Value q, Value off) const;

  /// The first query that keeps key `k` causally: k - off (null when not
  /// causal). Rows q >= firstCausalQuery(k) keep k.
  Value firstCausalQuery(OpBuilder &b, Location loc, Value k, Value off) const;

  /// Whether query `q` keeps key `k` by the key range and the positional
  /// rules: k < keyEnd (when `keyEnd` is non-null), k <= q + off (causal),
  /// q + off - L <= k <= q + off + R (window), floor((q + off) / C) ==
  /// floor(k / C) (chunk). Null when nothing applies.
  Value keepKey(OpBuilder &b, Location loc, Value q, Value k, Value keyEnd,
                Value off) const;

  /// Applies one user mask element `m` (the mask's element type, scalar or
  /// vector) to a score: a keep mask ANDs its predicate into `keep` (which
  /// may be null, meaning "kept"), an additive mask adds `m * factor` (as f32)
  /// to `score` (a factor of log2(e) serves exp2-domain kernels).
  void applyMaskElement(OpBuilder &b, Location loc, Value m, Value &score,
                        Value &keep, double factor = 1.0) const;

  /// Document masking: ANDs `qSeg == kSeg` (the segment ids of the query
  /// and the key, i32 scalars or vectors) into `keep` (null = kept).
  void applySegments(OpBuilder &b, Location loc, Value qSeg, Value kSeg,
                     Value &keep) const;

  /// The score modifiers, in the documented order, on a scaled score
  /// (f32 scalar or vector) of query `q` and key `k`: softcap, then ALiBi
  /// with the head's `slope` (f32 scalar; null without ALiBi). A `factor`
  /// of log2(e) serves exp2-domain kernels whose `score` is already
  /// multiplied by it. The additive mask comes after (applyMaskElement).
  Value modifyScore(OpBuilder &b, Location loc, Value score, Value q, Value k,
                    Value off, Value slope, double factor = 1.0) const;

  /// The derivative of the modified score with respect to the scaled score
  /// `score` (f32 scalar or vector, before modifyScore): 1 - tanh(s / c)^2
  /// with softcap(c), null (1) without; ALiBi and an additive mask add
  /// constants. The backward pass multiplies dS by it.
  Value scoreDerivative(OpBuilder &b, Location loc, Value score) const;

  /// The indices a modifier region sees: batch, query head, query row and
  /// key (index scalars or vectors of index), and the op's Nq and Nk
  /// (index scalars), to which q and k are clamped (a kernel may evaluate
  /// rows and keys past them; the region may only see in-range ones).
  struct ModIndices {
    Value batch, head, q, k, nq, nk;
  };

  /// Applies the op's score_mod region (last in the documented order) to
  /// `score` (f32 scalar or vector): inlines its body at `b` with its
  /// arguments bound to `score`, `idx` and `modOperands` (the op's
  /// mod_operands as tensors, or memrefs in the kernels, where
  /// tensor.extract becomes memref.load). With a vector among them, the
  /// body is computed on vectors (elementwise ops broadcast their scalar
  /// operands; other ops lane by lane). A `factor` of log2(e) serves
  /// exp2-domain kernels (the region sees `score / factor`). `score` when
  /// there is no score_mod.
  Value applyScoreMod(OpBuilder &b, Location loc, Value score,
                      const ModIndices &idx, ValueRange modOperands,
                      double factor = 1.0) const;

  /// ANDs the op's mask_mod region, inlined like applyScoreMod, into
  /// `keep` (null = kept); nothing without a mask_mod.
  void applyMaskMod(OpBuilder &b, Location loc, const ModIndices &idx,
                    ValueRange modOperands, Value &keep) const;

  /// The i1 a mask_mod `region` (fa.attention's or fa.create_block_mask's)
  /// yields for `idx`, inlined as applyMaskMod does.
  static Value evaluateMaskMod(OpBuilder &b, Location loc, Region &region,
                               const ModIndices &idx, ValueRange modOperands);

  /// The predicate of a keep-mask element `m` (i1 or i8, scalar or vector).
  static Value keepMaskPredicate(OpBuilder &b, Location loc, Value m);

  /// Whether the mask element `m` leaves its key attended: the keep
  /// predicate of a keep mask, `m > -inf` for an additive mask (an additive
  /// -inf removes the key).
  Value maskElementKeeps(OpBuilder &b, Location loc, Value m) const;

  /// `keep ? score : -inf`; `score` when `keep` is null.
  static Value removeUnkept(OpBuilder &b, Location loc, Value keep,
                            Value score);

private:
  CausalKind causal = CausalKind::none;
  bool keyLengths = false;
  MaskKind mask = MaskKind::None;
  Type maskElementType;
  AttentionModifiers mods;
};

//===----------------------------------------------------------------------===//
// Online softmax and empty rows
//===----------------------------------------------------------------------===//

/// Replaces a row max of -inf (a row with nothing attended so far) by 0, so
/// that exp(x - m) and exp(m_old - m) never compute -inf - -inf.
Value guardedMax(OpBuilder &b, Location loc, Value m);

/// `den == 0 ? 0 : num / den`: the output of a row whose running sum is 0
/// (nothing attended) is exactly 0, never 0/0.
Value guardedDivide(OpBuilder &b, Location loc, Value num, Value den);

/// `l == 0 ? -inf : m + log(l)`: the natural log-sum-exp of a row, -inf for
/// a row with nothing attended.
Value guardedLogSumExp(OpBuilder &b, Location loc, Value m, Value l);

/// The backward pass's probability of a score `s` in a row with
/// log-sum-exp `lse` (f32 scalars or vectors): exp(s - lse), and 0 when
/// lse = -inf (a row with nothing attended), never exp(-inf - -inf). With
/// `base2`, `s` and `lse` are in the log2 domain (multiplied by log2(e), as
/// the GPU kernels keep them) and the result is exp2(s - lse).
Value guardedProbability(OpBuilder &b, Location loc, Value s, Value lse,
                         bool base2 = false);

/// `p == 0 ? 0 : p * v`: a masked key (p == 0) contributes 0 even when its
/// value row holds NaN or inf.
Value maskedProduct(OpBuilder &b, Location loc, Value p, Value v);

//===----------------------------------------------------------------------===//
// Kernel families
//===----------------------------------------------------------------------===//

/// The GPU kernel families fa builds.
enum class KernelFamily {
  /// fa-promote-shared + fa-map-to-gpu: any element type, CUDA cores.
  Simt,
  /// fa-map-to-tensor-cores: mma.sync m16n8k16 (sm_80 and later).
  Mma,
  /// fa-map-to-wgmma: Hopper warpgroup wgmma.mma_async (sm_90a).
  Wgmma,
};

/// `simt`, `mma` or `wgmma`.
StringRef stringifyKernelFamily(KernelFamily family);
std::optional<KernelFamily> parseKernelFamily(StringRef name);

/// The head-dim rule of a kernel family: `dim` (of Q/K or of V) is static,
/// positive, at most 256 and a multiple of 8 (SIMT), 16 (mma.sync) or 64
/// (wgmma).
bool isSupportedHeadDim(KernelFamily family, int64_t dim);

/// Why the regions of `op` cannot be inlined into a kernel outlined from
/// its function (they read a non-constant value defined outside them), or
/// nullopt.
std::optional<std::string> getOutlinedRegionProblem(AttentionOp op);

/// For a lowering that reads neither paged caches nor the token-major
/// variable-length form (only the CPU vector kernel does): emits its error
/// on the first fa.attention with a block_table or cu_seqlens under `root`
/// ("`pass` does not read ...") and returns failure; success when there is
/// none.
LogicalResult rejectCpuKernelOnlyForms(Operation *root, StringRef pass);

/// Whether `family` accepts the types and head dims of `op`; otherwise
/// `reason` (when non-null) says why in a phrase such as "head dims must be
/// multiples of 16 up to 256".
bool isEligible(KernelFamily family, AttentionOp op,
                std::string *reason = nullptr);

} // namespace fa
} // namespace mlir

#endif // FA_DIALECT_FA_UTILS_ATTENTIONSEMANTICS_H
