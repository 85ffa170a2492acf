//===- FAOps.cpp - fa dialect operations ----------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// Parses an optional `causal(top_left|bottom_right|none)` clause; its
/// absence means `none`.
static ParseResult parseCausalClause(OpAsmParser &parser,
                                     CausalKindAttr &causal) {
  MLIRContext *ctx = parser.getContext();
  if (failed(parser.parseOptionalKeyword("causal"))) {
    causal = CausalKindAttr::get(ctx, CausalKind::none);
    return success();
  }
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLParen() || parser.parseKeyword(&keyword) ||
      parser.parseRParen())
    return failure();
  std::optional<CausalKind> kind = symbolizeCausalKind(keyword);
  if (!kind)
    return parser.emitError(loc, "expected causal alignment 'none', "
                                 "'top_left' or 'bottom_right', got '")
           << keyword << "'";
  causal = CausalKindAttr::get(ctx, *kind);
  return success();
}

static void printCausalClause(OpAsmPrinter &printer, Operation *,
                              CausalKindAttr causal) {
  if (!causal || causal.getValue() == CausalKind::none)
    return;
  printer << "causal(" << stringifyCausalKind(causal.getValue()) << ")";
}

/// Parses the bounds of `window(L, R)`: two integers.
static ParseResult parseWindowBounds(OpAsmParser &parser,
                                     DenseI64ArrayAttr &window) {
  int64_t left = 0, right = 0;
  if (parser.parseInteger(left) || parser.parseComma() ||
      parser.parseInteger(right))
    return failure();
  window = DenseI64ArrayAttr::get(parser.getContext(), {left, right});
  return success();
}

static void printWindowBounds(OpAsmPrinter &printer, Operation *,
                              DenseI64ArrayAttr window) {
  // Two bounds in verified IR; print whatever is there otherwise.
  llvm::interleaveComma(window.asArrayRef(), printer);
}

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Prints a shape as `[2, ?, 64]`.
static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      },
      ", ");
  os << "]";
  return s;
}

static bool isSupportedFloat(Type t) { return t.isF32() || t.isF16() || t.isBF16(); }

/// The largest window bound and chunk size: positions and sequence lengths
/// stay below 2^31, so larger bounds would only risk index overflow.
static constexpr int64_t kMaxPosition = (int64_t(1) << 31) - 1;

/// Two dims are compatible when either is dynamic or both are equal.
static bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// ODS checks that `operandSegmentSizes` sums to the operand count and that
/// an optional group holds at most one value, but not that a required
/// operand's group holds exactly one: the generic form can move a value from
/// it to another group (`array<i32: 1, 1, 0, ...>`), after which that
/// operand's getter would read another group's value or past the operands.
/// `required` lists the required groups' indices and names.
static LogicalResult
verifyRequiredOperandGroups(Operation *op, ArrayRef<int32_t> segmentSizes,
                            ArrayRef<std::pair<unsigned, StringRef>> required) {
  for (auto [index, name] : required)
    if (segmentSizes[index] != 1)
      return op->emitOpError("operand '")
             << name << "' is required: 'operandSegmentSizes' gives it "
             << segmentSizes[index] << " values, expected 1";
  return success();
}

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  auto type = cast<RankedTensorType>(getInput().getType());
  if (!isSupportedFloat(type.getElementType()))
    return emitOpError("input element type must be f32, f16 or bf16, got ")
           << type.getElementType();
  int64_t rank = type.getRank();
  if (rank == 0)
    return emitOpError("input must have rank >= 1, got a 0-d tensor");
  int64_t dim = static_cast<int64_t>(getDimension());
  if (dim < 0 || dim >= rank)
    return emitOpError("dimension ")
           << dim << " is out of range for input of rank " << rank << " "
           << shapeStr(type.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// MergeOp
//===----------------------------------------------------------------------===//

MutableOperandRange MergeOp::getDpsInitsMutable() {
  // `output` and the optional `lse` are the trailing operands.
  unsigned numInits = getLse() ? 2 : 1;
  return MutableOperandRange(getOperation(),
                             getOperation()->getNumOperands() - numInits,
                             numInits);
}

LogicalResult MergeOp::verify() {
  auto po = cast<RankedTensorType>(getPartialOutput().getType());
  auto pl = cast<RankedTensorType>(getPartialLse().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (po.getRank() < 2)
    return emitOpError("partial_output must be [S, ..., Dv] (rank >= 2), got ")
           << shapeStr(po.getShape());
  if (!po.getElementType().isF32() || !pl.getElementType().isF32())
    return emitOpError("partial_output and partial_lse must be f32, got ")
           << po.getElementType() << " and " << pl.getElementType();
  // partial_lse is partial_output without Dv; output without S.
  bool lseOk = pl.getRank() == po.getRank() - 1;
  for (int64_t d = 0; lseOk && d < pl.getRank(); ++d)
    lseOk = dimsCompatible(pl.getDimSize(d), po.getDimSize(d));
  if (!lseOk)
    return emitOpError("partial_lse shape ")
           << shapeStr(pl.getShape())
           << " must be partial_output's without its last dim, "
           << shapeStr(po.getShape().drop_back());
  if (!isSupportedFloat(out.getElementType()))
    return emitOpError("output element type must be f32, f16 or bf16, got ")
           << out.getElementType();
  bool outOk = out.getRank() == po.getRank() - 1;
  for (int64_t d = 0; outOk && d < out.getRank(); ++d)
    outOk = dimsCompatible(out.getDimSize(d), po.getDimSize(d + 1));
  if (!outOk)
    return emitOpError("output shape ")
           << shapeStr(out.getShape())
           << " must be partial_output's without its first (split) dim, "
           << shapeStr(po.getShape().drop_front());
  if (getResult().getType() != out)
    return emitOpError("result type ")
           << getResult().getType() << " must be the output's, " << out;
  if (Value lse = getLse()) {
    auto lt = cast<RankedTensorType>(lse.getType());
    bool ok = lt.getElementType().isF32() && lt.getRank() == pl.getRank() - 1;
    for (int64_t d = 0; ok && d < lt.getRank(); ++d)
      ok = dimsCompatible(lt.getDimSize(d), pl.getDimSize(d + 1));
    if (!ok)
      return emitOpError("lse must be f32 ")
             << shapeStr(pl.getShape().drop_front())
             << " (partial_lse without its split dim), got " << lt;
    if (!getLseResult() || getLseResult().getType() != lt)
      return emitOpError("an lse destination needs an lse result of its "
                         "type ")
             << lt;
  } else if (getLseResult()) {
    return emitOpError("an lse result needs an lse destination");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

MutableOperandRange AttentionOp::getDpsInitsMutable() {
  // `output` and the optional `lse` are the trailing operands.
  unsigned numInits = getLse() ? 2 : 1;
  return MutableOperandRange(getOperation(),
                             getOperation()->getNumOperands() - numInits,
                             numInits);
}

bool AttentionOp::hasModifiers() {
  return getWindowAttr() || getSoftcapAttr() || getChunkAttr() || getAlibi() ||
         getQSegments() || getKSegments() || getQOffset() || hasScoreMod() ||
         hasMaskMod();
}

int64_t AttentionOp::getGroupSize() {
  int64_t hq = cast<RankedTensorType>(getQuery().getType()).getDimSize(1);
  return hq / getKvHeads();
}

int64_t AttentionOp::getKvHeads() {
  return cast<RankedTensorType>(getKey().getType())
      .getDimSize(isPaged() ? 2 : 1);
}

int64_t AttentionOp::getPageSize() {
  return isPaged() ? cast<RankedTensorType>(getKey().getType()).getDimSize(1)
                   : 0;
}

int64_t AttentionOp::getHeadDim() {
  auto t = cast<RankedTensorType>(getQuery().getType());
  return t.getDimSize(t.getRank() - 1);
}

int64_t AttentionOp::getValueHeadDim() {
  auto t = cast<RankedTensorType>(getValue().getType());
  return t.getDimSize(t.getRank() - 1);
}

int64_t AttentionOp::getQueryHeads() {
  return cast<RankedTensorType>(getQuery().getType()).getDimSize(1);
}

float AttentionOp::getEffectiveScale() {
  if (auto s = getScaleAttr())
    return s.getValueAsDouble();
  int64_t d = getHeadDim();
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
}

namespace {
/// Folds `tensor.cast`s that erase static shape information into
/// fa.attention (its results take the static shapes of the new outs, cast
/// back for the old users), as tensor's FoldTensorCastProducerOp does for
/// every destination-style op. fa.attention needs its own: that pattern
/// rebuilds the op with mlir::clone, which under a rewriter's listener
/// dereferences the first block of every region, and the op's
/// score_mod / mask_mod regions are empty when absent (a crash after
/// tiling into single-iteration loops, whose slices become static). With
/// a higher benefit this pattern folds the casts first.
struct FoldTensorCastIntoAttention final : OpRewritePattern<AttentionOp> {
  FoldTensorCastIntoAttention(MLIRContext *ctx)
      : OpRewritePattern<AttentionOp>(ctx, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!tensor::hasFoldableTensorCastOperand(op))
      return failure();
    SmallVector<Type> newResultTypes(op->getResultTypes());
    SmallVector<Value> newOperands =
        tensor::getUpdatedOperandsAfterCastOpFolding(
            cast<DestinationStyleOpInterface>(op.getOperation()),
            newResultTypes);
    Operation *newOp = rewriter.clone(*op);
    rewriter.modifyOpInPlace(newOp, [&] {
      newOp->setOperands(newOperands);
      for (auto [result, type] : llvm::zip(newOp->getResults(), newResultTypes))
        result.setType(type);
    });
    SmallVector<Value> replacements;
    for (auto [oldResult, newResult] :
         llvm::zip(op->getResults(), newOp->getResults())) {
      Value v = newResult;
      if (v.getType() != oldResult.getType())
        v = tensor::CastOp::create(rewriter, op.getLoc(), oldResult.getType(),
                                   v);
      replacements.push_back(v);
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }
};
} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<FoldTensorCastIntoAttention>(context);
}

/// The operands and attributes of the forward computation, as both
/// fa.attention and fa.attention_backward hold them (null when absent).
struct ForwardOperands {
  Value query, key, value, kvLens, blockTable, cuSeqlensQ, cuSeqlensK, mask,
      alibi, qSegments, kSegments, qOffset, blockMask, output, lse;
  ValueRange modOperands;
  bool hasScoreMod = false, hasMaskMod = false;
  DenseI64ArrayAttr window, blockTiles;
  FloatAttr softcap, scale;
  IntegerAttr chunk;
};

/// Checks the forward operands of `op` against fa.attention's contract
/// (the rules of FAOps.td), naming the operand and dims in its errors.
static LogicalResult verifyForwardOperands(Operation *op,
                                           const ForwardOperands &f) {
  auto qType = cast<RankedTensorType>(f.query.getType());
  auto kType = cast<RankedTensorType>(f.key.getType());
  auto vType = cast<RankedTensorType>(f.value.getType());
  auto oType = cast<RankedTensorType>(f.output.getType());

  // Ranks.
  auto checkRank = [&](RankedTensorType t, StringRef name, int64_t rank,
                       StringRef layout) -> LogicalResult {
    if (t.getRank() != rank)
      return op->emitOpError()
             << name << " must have rank " << rank << " " << layout
             << ", got rank " << t.getRank() << " " << shapeStr(t.getShape());
    return success();
  };
  // The token-major variable-length form is checked as the logical
  // [B, H, T, D] operands it stands for (below).
  if (static_cast<bool>(f.cuSeqlensQ) != static_cast<bool>(f.cuSeqlensK))
    return op->emitOpError(
        "cu_seqlens needs both the query and the key offsets");
  bool varlen = static_cast<bool>(f.cuSeqlensQ);
  if (varlen) {
    if (failed(checkRank(qType, "with cu_seqlens, query", 3, "[Tq, Hq, D]")) ||
        failed(checkRank(kType, "with cu_seqlens, key", 3, "[Tk, Hkv, D]")) ||
        failed(checkRank(vType, "with cu_seqlens, value", 3,
                         "[Tk, Hkv, Dv]")) ||
        failed(checkRank(oType, "with cu_seqlens, output", 3,
                         "[Tq, Hq, Dv]")))
      return failure();
    if (f.kvLens || f.blockTable || f.mask || f.qSegments || f.blockMask)
      return op->emitOpError(
          "kv_lens, a block_table, a mask, segment ids and a "
          "block_mask are not available with cu_seqlens");
  } else if (failed(checkRank(qType, "query", 4, "[B, Hq, Nq, D]")) ||
             failed(checkRank(kType, "key", 4, "[B, Hkv, Nk, D]")) ||
             failed(checkRank(vType, "value", 4, "[B, Hkv, Nk, Dv]")) ||
             failed(checkRank(oType, "output", 4, "[B, Hq, Nq, Dv]"))) {
    return failure();
  }

  // Element types.
  Type elt = qType.getElementType();
  if (!isSupportedFloat(elt))
    return op->emitOpError("query element type must be f32, f16 or bf16, got ")
           << elt;
  if (kType.getElementType() != elt)
    return op->emitOpError("key element type ")
           << kType.getElementType() << " must match query element type "
           << elt;
  if (vType.getElementType() != elt)
    return op->emitOpError("value element type ")
           << vType.getElementType() << " must match query element type "
           << elt;
  if (oType.getElementType() != elt)
    return op->emitOpError("output element type ")
           << oType.getElementType() << " must match query element type "
           << elt;

  ArrayRef<int64_t> q = qType.getShape(), k = kType.getShape(),
                    v = vType.getShape(), o = oType.getShape();

  // cu_seqlens: [Tq, H, D] operands are checked as [B, H, Tq, D] with B
  // from the offsets.
  SmallVector<int64_t> qVar, kVar, vVar, oVar;
  if (varlen) {
    int64_t batch = ShapedType::kDynamic;
    for (auto [cu, name] : {std::pair<Value, StringRef>{f.cuSeqlensQ, "query"},
                            {f.cuSeqlensK, "key"}}) {
      auto cType = cast<RankedTensorType>(cu.getType());
      if (!cType.getElementType().isSignlessInteger(32) ||
          cType.getRank() != 1)
        return op->emitOpError("cu_seqlens must be i32 tensors [B + 1], got ")
               << cType << " for the " << name << " offsets";
      int64_t n = cType.getDimSize(0);
      if (n == 0)
        return op->emitOpError("cu_seqlens must have B + 1 >= 1 entries, got 0 "
                               "for the ")
               << name << " offsets";
      int64_t b = ShapedType::isDynamic(n) ? n : n - 1;
      if (!dimsCompatible(batch, b))
        return op->emitOpError(
                   "the query and key cu_seqlens must have the same "
                   "B + 1 entries, got ")
               << shapeStr(
                      cast<RankedTensorType>(f.cuSeqlensQ.getType()).getShape())
               << " and " << shapeStr(cType.getShape());
      if (ShapedType::isDynamic(batch))
        batch = b;
    }
    qVar = {batch, q[1], q[0], q[2]};
    kVar = {batch, k[1], k[0], k[2]};
    vVar = {batch, v[1], v[0], v[2]};
    oVar = {batch, o[1], o[0], o[2]};
    q = qVar;
    k = kVar;
    v = vVar;
    o = oVar;
  }
  if (varlen && (!dimsCompatible(k[2], v[2]) || k[1] != v[1]))
    return op->emitOpError("with cu_seqlens, key ")
           << shapeStr(kType.getShape()) << " and value "
           << shapeStr(vType.getShape())
           << " must have the same tokens Tk and heads Hkv";

  // A paged cache [P, S, Hkv, D] is checked as the logical [B, Hkv, M * S,
  // D] it stands for (B and M from the block table).
  SmallVector<int64_t> kLogical, vLogical;
  if (Value table = f.blockTable) {
    auto tType = cast<RankedTensorType>(table.getType());
    if (!tType.getElementType().isSignlessInteger(32) || tType.getRank() != 2)
      return op->emitOpError("block_table must be an i32 tensor [B, M], got ")
             << tType;
    if (kType.getRank() != 4 || vType.getRank() != 4)
      return op->emitOpError("with a block_table, key and value must be paged "
                             "caches [P, S, Hkv, D] and [P, S, Hkv, Dv], got ")
             << shapeStr(k) << " and " << shapeStr(v);
    if (ShapedType::isDynamic(k[1]) || k[1] <= 0)
      return op->emitOpError("the page size S (key dim 1) must be static and "
                             "positive, got key ")
             << shapeStr(k);
    if (!dimsCompatible(k[0], v[0]) || k[1] != v[1])
      return op->emitOpError("key and value must have the same pages [P, S], "
                             "got key ")
             << shapeStr(k) << " and value " << shapeStr(v);
    if (!f.kvLens)
      return op->emitOpError("a paged cache needs kv_lens: the number of keys "
                             "of each sequence");
    if (f.qSegments || f.blockMask)
      return op->emitOpError("segment ids and block masks are not available "
                             "with a block_table");
    int64_t m = tType.getDimSize(1);
    if (!ShapedType::isDynamic(m) && m > 0 &&
        k[1] > std::numeric_limits<int64_t>::max() / m)
      return op->emitOpError("the key length M x S of block_table ")
             << shapeStr(tType.getShape()) << " and key " << shapeStr(k)
             << " overflows";
    int64_t nk = ShapedType::isDynamic(m) ? ShapedType::kDynamic : m * k[1];
    int64_t b = tType.getDimSize(0);
    if (!dimsCompatible(b, q[0]))
      return op->emitOpError("block_table must have shape [B, M] with B from "
                             "query ")
             << shapeStr(q) << ", got " << shapeStr(tType.getShape());
    kLogical = {b, k[2], nk, k[3]};
    vLogical = {b, v[2], nk, v[3]};
    k = kLogical;
    v = vLogical;
  }

  // Static head counts and head dims.
  if (ShapedType::isDynamic(q[1]) || ShapedType::isDynamic(k[1]) ||
      ShapedType::isDynamic(v[1]))
    return op->emitOpError("head counts must be static, got query ")
           << shapeStr(q) << ", key " << shapeStr(k) << ", value "
           << shapeStr(v);
  if (ShapedType::isDynamic(q[3]) || ShapedType::isDynamic(k[3]))
    return op->emitOpError("head dim D must be static, got query ")
           << shapeStr(q) << " and key " << shapeStr(k);
  if (ShapedType::isDynamic(v[3]))
    return op->emitOpError("value head dim Dv must be static, got value ")
           << shapeStr(v);
  if (q[1] <= 0 || k[1] <= 0)
    return op->emitOpError("head counts must be positive, got Hq = ")
           << q[1] << " and Hkv = " << k[1];
  if (q[3] <= 0 || v[3] <= 0)
    return op->emitOpError("head dims must be positive, got D = ")
           << q[3] << " and Dv = " << v[3];

  // A dynamic B, Nq or Nk takes the size any operand gives it statically,
  // so that static operands are checked against each other even when the
  // query's dims are dynamic (a broadcast mask dim says nothing).
  int64_t B = q[0], Nq = q[2], Nk = k[2];
  auto learn = [](int64_t &dim, int64_t size) {
    if (ShapedType::isDynamic(dim))
      dim = size;
  };
  auto shapeOf = [](Value v) -> ArrayRef<int64_t> {
    return v ? cast<RankedTensorType>(v.getType()).getShape()
             : ArrayRef<int64_t>();
  };
  learn(B, k[0]);
  learn(B, v[0]);
  learn(B, o[0]);
  learn(Nk, v[2]);
  learn(Nq, o[2]);
  if (ArrayRef<int64_t> s = shapeOf(f.kvLens); s.size() == 1)
    learn(B, s[0]);
  if (ArrayRef<int64_t> s = shapeOf(f.mask); s.size() == 4) {
    learn(Nq, s[2]);
    learn(Nk, s[3]);
  }
  if (ArrayRef<int64_t> s = shapeOf(f.alibi); s.size() == 2)
    learn(B, s[0]);
  if (ArrayRef<int64_t> s = shapeOf(f.qSegments); s.size() == 2) {
    learn(B, s[0]);
    learn(Nq, s[1]);
  }
  if (ArrayRef<int64_t> s = shapeOf(f.kSegments); s.size() == 2) {
    learn(B, s[0]);
    learn(Nk, s[1]);
  }
  if (ArrayRef<int64_t> s = shapeOf(f.lse); !varlen && s.size() == 3) {
    learn(B, s[0]);
    learn(Nq, s[2]);
  } else if (varlen && s.size() == 2) {
    learn(Nq, s[1]);
  }

  // Matching dims.
  if (!dimsCompatible(B, k[0]) || !dimsCompatible(B, v[0]))
    return op->emitOpError("batch dim B must match: query ")
           << shapeStr(q) << ", key " << shapeStr(k) << ", value "
           << shapeStr(v);
  if (k[1] != v[1])
    return op->emitOpError("key and value must have the same number of heads "
                           "Hkv, got key ")
           << shapeStr(k) << " and value " << shapeStr(v);
  if (q[1] % k[1] != 0)
    return op->emitOpError("query heads Hq = ")
           << q[1] << " must be a multiple of key/value heads Hkv = " << k[1];
  if (q[3] != k[3])
    return op->emitOpError("head dim D of query ")
           << shapeStr(q) << " and key " << shapeStr(k) << " must match";
  if (!dimsCompatible(Nk, v[2]))
    return op->emitOpError("key length Nk of key ")
           << shapeStr(k) << " and value " << shapeStr(v) << " must match";
  if (varlen && (!dimsCompatible(o[2], Nq) || o[1] != q[1] || o[3] != v[3]))
    return op->emitOpError("with cu_seqlens, output shape ")
           << shapeStr(oType.getShape()) << " must be [Tq, Hq, Dv] = "
           << shapeStr(SmallVector<int64_t>{Nq, q[1], v[3]}) << " from query "
           << shapeStr(qType.getShape()) << " and value "
           << shapeStr(vType.getShape());
  if (!dimsCompatible(o[0], B) || o[1] != q[1] || !dimsCompatible(o[2], Nq) ||
      o[3] != v[3])
    return op->emitOpError("output shape ")
           << shapeStr(o) << " must be [B, Hq, Nq, Dv] = "
           << shapeStr(SmallVector<int64_t>{q[0], q[1], q[2], v[3]})
           << " from query " << shapeStr(q) << " and value " << shapeStr(v);

  // Key lengths.
  if (Value lens = f.kvLens) {
    auto lType = cast<RankedTensorType>(lens.getType());
    if (!lType.getElementType().isSignlessInteger(32))
      return op->emitOpError("kv_lens element type must be i32, got ")
             << lType.getElementType();
    if (lType.getRank() != 1 || !dimsCompatible(lType.getDimSize(0), B))
      return op->emitOpError("kv_lens must have shape [B] with B from query ")
             << shapeStr(q) << ", got " << shapeStr(lType.getShape());
  }

  // Mask.
  if (Value mask = f.mask) {
    auto mType = cast<RankedTensorType>(mask.getType());
    Type mElt = mType.getElementType();
    if (!mElt.isSignlessInteger(1) && !isSupportedFloat(mElt))
      return op->emitOpError("mask element type must be i1 (true = attend) or "
                             "f32, f16, bf16 (additive), got ")
             << mElt;
    if (mType.getRank() != 4)
      return op->emitOpError("mask must have rank 4 [B|1, Hq|1, Nq, Nk], got ")
             << shapeStr(mType.getShape());
    ArrayRef<int64_t> m = mType.getShape();
    bool ok = (m[0] == 1 || dimsCompatible(m[0], B)) &&
              (m[1] == 1 || m[1] == q[1]) && dimsCompatible(m[2], Nq) &&
              dimsCompatible(m[3], Nk);
    if (!ok)
      return op->emitOpError("mask shape ")
             << shapeStr(m)
             << " is not broadcastable to [B|1, Hq|1, Nq, Nk] with query "
             << shapeStr(q) << " and key " << shapeStr(k);
  }

  // ALiBi slopes.
  if (Value alibi = f.alibi) {
    auto aType = cast<RankedTensorType>(alibi.getType());
    if (!aType.getElementType().isF32())
      return op->emitOpError("alibi slopes element type must be f32, got ")
             << aType.getElementType();
    ArrayRef<int64_t> a = aType.getShape();
    bool ok = (a.size() == 1 && a[0] == q[1]) ||
              (a.size() == 2 && dimsCompatible(a[0], B) && a[1] == q[1]);
    if (!ok)
      return op->emitOpError("alibi slopes must have shape [Hq] or [B, Hq] = [")
             << (ShapedType::isDynamic(B) ? std::string("?")
                                          : std::to_string(B))
             << ", " << q[1] << "] from query " << shapeStr(qType.getShape())
             << ", got " << shapeStr(a);
  }

  // Segment ids.
  if (static_cast<bool>(f.qSegments) != static_cast<bool>(f.kSegments))
    return op->emitOpError("segments need both query and key segment ids");
  if (Value qs = f.qSegments) {
    auto checkSegments = [&](Value ids, StringRef name, int64_t n,
                             StringRef dim) -> LogicalResult {
      auto t = cast<RankedTensorType>(ids.getType());
      if (!t.getElementType().isSignlessInteger(32))
        return op->emitOpError() << name << " segment ids element type must be "
                                 << "i32, got " << t.getElementType();
      ArrayRef<int64_t> sh = t.getShape();
      if (sh.size() != 2 || !dimsCompatible(sh[0], B) ||
          !dimsCompatible(sh[1], n))
        return op->emitOpError()
               << name << " segment ids must have shape [B, " << dim
               << "] from query " << shapeStr(q) << " and key " << shapeStr(k)
               << ", got " << shapeStr(sh);
      return success();
    };
    if (failed(checkSegments(qs, "query", Nq, "Nq")) ||
        failed(checkSegments(f.kSegments, "key", Nk, "Nk")))
      return failure();
  }

  // Window, softcap, chunk.
  if (auto window = f.window) {
    if (window.size() != 2)
      return op->emitOpError("window must have two bounds (left, right), got ")
             << window.size();
    if (window[0] < -1 || window[1] < -1 || window[0] > kMaxPosition ||
        window[1] > kMaxPosition)
      return op->emitOpError("window bounds must be in [-1, 2^31 - 1] (-1 = "
                             "unbounded), got left = ")
             << window[0] << " and right = " << window[1];
  }
  if (auto cap = f.softcap) {
    double c = cap.getValueAsDouble();
    if (!(c > 0) || !std::isfinite(c))
      return op->emitOpError("softcap must be positive and finite, got ") << c;
  }
  if (auto chunk = f.chunk) {
    if (chunk.getInt() <= 0 || chunk.getInt() > kMaxPosition)
      return op->emitOpError("chunk size must be in [1, 2^31 - 1], got ")
             << chunk.getInt();
  }

  if (Value off = f.qOffset) {
    APInt p;
    if (matchPattern(off, m_ConstantInt(&p)) &&
        (p.getSExtValue() < -kMaxPosition || p.getSExtValue() > kMaxPosition))
      return op->emitOpError(
                 "q_offset must be in [-(2^31 - 1), 2^31 - 1], got ")
             << p.getSExtValue();
  }

  // Operands of the modifier regions.
  if (!f.modOperands.empty() && !f.hasScoreMod && !f.hasMaskMod)
    return op->emitOpError(
        "mod_operands are given but there is no score_mod or "
        "mask_mod region to read them");

  // Block mask.
  if (static_cast<bool>(f.blockMask) != static_cast<bool>(f.blockTiles))
    return op->emitOpError("block_mask and block_tiles go together: the tiles "
                           "say what the block mask's entries cover");
  if (Value bm = f.blockMask) {
    if (!f.hasMaskMod)
      return op->emitOpError("a block_mask describes a mask_mod, and there is "
                             "none");
    DenseI64ArrayAttr tiles = f.blockTiles;
    if (tiles.size() != 2 || tiles[0] <= 0 || tiles[1] <= 0 ||
        tiles[0] > kMaxPosition || tiles[1] > kMaxPosition)
      return op->emitOpError("block_tiles must be two sizes in [1, 2^31 - 1], "
                             "got ")
             << tiles;
    auto bType = cast<RankedTensorType>(bm.getType());
    if (!bType.getElementType().isSignlessInteger(8))
      return op->emitOpError("block_mask element type must be i8, got ")
             << bType.getElementType();
    ArrayRef<int64_t> bs = bType.getShape();
    auto tilesOf = [](int64_t n, int64_t t) {
      return ShapedType::isDynamic(n) ? n : (n + t - 1) / t;
    };
    bool ok = bs.size() == 4 && (bs[0] == 1 || dimsCompatible(bs[0], B)) &&
              (bs[1] == 1 || bs[1] == q[1]) &&
              dimsCompatible(bs[2], tilesOf(Nq, tiles[0])) &&
              dimsCompatible(bs[3], tilesOf(Nk, tiles[1]));
    if (!ok)
      return op->emitOpError("block_mask shape ")
             << shapeStr(bs)
             << " must be [B|1, Hq|1, ceil(Nq / TQ), ceil(Nk / TK)] with "
                "block_tiles("
             << tiles[0] << ", " << tiles[1] << "), query " << shapeStr(q)
             << " and key " << shapeStr(k);
  }

  // Scale.
  if (auto s = f.scale) {
    double sv = s.getValueAsDouble();
    if (!std::isfinite(sv))
      return op->emitOpError("scale must be finite, got ") << sv;
  }

  // Log-sum-exp.
  if (Value lse = f.lse) {
    auto lType = cast<RankedTensorType>(lse.getType());
    if (!lType.getElementType().isF32())
      return op->emitOpError("lse element type must be f32, got ")
             << lType.getElementType();
    ArrayRef<int64_t> l = lType.getShape();
    if (varlen && (l.size() != 2 || l[0] != q[1] || !dimsCompatible(l[1], Nq)))
      return op->emitOpError("with cu_seqlens, lse shape ")
             << shapeStr(l) << " must be [Hq, Tq] from query "
             << shapeStr(qType.getShape());
    if (!varlen && (l.size() != 3 || !dimsCompatible(l[0], B) ||
                    l[1] != q[1] || !dimsCompatible(l[2], Nq)))
      return op->emitOpError("lse shape ")
             << shapeStr(l) << " must be [B, Hq, Nq] from query "
             << shapeStr(q);
  }

  return success();
}

LogicalResult AttentionOp::verify() {
  // The group indices below follow the operand list in FAOps.td.
  static_assert(std::tuple_size<decltype(Properties::operandSegmentSizes)>() ==
                    16,
                "fa.attention's operand groups changed");
  if (failed(verifyRequiredOperandGroups(
          *this, getProperties().operandSegmentSizes,
          {{0, "query"}, {1, "key"}, {2, "value"}, {14, "output"}})))
    return failure();
  ForwardOperands f;
  f.query = getQuery();
  f.key = getKey();
  f.value = getValue();
  f.kvLens = getKvLens();
  f.blockTable = getBlockTable();
  f.cuSeqlensQ = getCuSeqlensQ();
  f.cuSeqlensK = getCuSeqlensK();
  f.mask = getMask();
  f.alibi = getAlibi();
  f.qSegments = getQSegments();
  f.kSegments = getKSegments();
  f.qOffset = getQOffset();
  f.blockMask = getBlockMask();
  f.output = getOutput();
  f.lse = getLse();
  f.modOperands = getModOperands();
  f.hasScoreMod = hasScoreMod();
  f.hasMaskMod = hasMaskMod();
  f.window = getWindowAttr();
  f.blockTiles = getBlockTilesAttr();
  f.softcap = getSoftcapAttr();
  f.scale = getScaleAttr();
  f.chunk = getChunkAttr();
  if (failed(verifyForwardOperands(getOperation(), f)))
    return failure();
  auto oType = cast<RankedTensorType>(getOutput().getType());

  // Results mirror the destinations.
  if (getResult().getType() != oType)
    return emitOpError("result type ")
           << getResult().getType() << " must match output type " << oType;
  if (static_cast<bool>(getLse()) != static_cast<bool>(getLseResult()))
    return emitOpError("an lse result requires an lse destination and vice "
                       "versa");
  if (getLse() && getLseResult().getType() != getLse().getType())
    return emitOpError("lse result type ")
           << getLseResult().getType() << " must match lse type "
           << getLse().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionBackwardOp
//===----------------------------------------------------------------------===//

int64_t AttentionBackwardOp::getHeadDim() {
  return cast<RankedTensorType>(getQuery().getType()).getDimSize(3);
}

int64_t AttentionBackwardOp::getValueHeadDim() {
  return cast<RankedTensorType>(getValue().getType()).getDimSize(3);
}

int64_t AttentionBackwardOp::getQueryHeads() {
  return cast<RankedTensorType>(getQuery().getType()).getDimSize(1);
}

int64_t AttentionBackwardOp::getKvHeads() {
  return cast<RankedTensorType>(getKey().getType()).getDimSize(1);
}

float AttentionBackwardOp::getEffectiveScale() {
  if (auto s = getScaleAttr())
    return s.getValueAsDouble();
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(getHeadDim())));
}

LogicalResult AttentionBackwardOp::verify() {
  static_assert(std::tuple_size<decltype(Properties::operandSegmentSizes)>() ==
                    15,
                "fa.attention_backward's operand groups changed");
  if (failed(verifyRequiredOperandGroups(*this,
                                         getProperties().operandSegmentSizes,
                                         {{0, "query"},
                                          {1, "key"},
                                          {2, "value"},
                                          {3, "output"},
                                          {4, "lse"},
                                          {5, "grad_output"},
                                          {12, "grad_query"},
                                          {13, "grad_key"},
                                          {14, "grad_value"}})))
    return failure();
  // The forward operands follow fa.attention's rules; the LSE is required.
  ForwardOperands f;
  f.query = getQuery();
  f.key = getKey();
  f.value = getValue();
  f.kvLens = getKvLens();
  f.mask = getMask();
  f.alibi = getAlibi();
  f.qSegments = getQSegments();
  f.kSegments = getKSegments();
  f.qOffset = getQOffset();
  f.output = getOutput();
  f.lse = getLse();
  f.window = getWindowAttr();
  f.softcap = getSoftcapAttr();
  f.scale = getScaleAttr();
  f.chunk = getChunkAttr();
  if (failed(verifyForwardOperands(getOperation(), f)))
    return failure();

  // dO is shaped like O; each gradient like its input.
  auto oType = cast<RankedTensorType>(getOutput().getType());
  auto doType = cast<RankedTensorType>(getGradOutput().getType());
  if (doType.getElementType() != oType.getElementType() ||
      doType.getRank() != oType.getRank() ||
      llvm::any_of(
          llvm::zip(doType.getShape(), oType.getShape()), [](auto dims) {
            return !dimsCompatible(std::get<0>(dims), std::get<1>(dims));
          }))
    return emitOpError("grad_output ")
           << doType << " must have the output's shape and type " << oType;
  for (auto [grad, input, result, name] :
       {std::tuple<Value, Value, Value, StringRef>{
            getGradQuery(), getQuery(), getGradQueryResult(), "grad_query"},
        {getGradKey(), getKey(), getGradKeyResult(), "grad_key"},
        {getGradValue(), getValue(), getGradValueResult(), "grad_value"}}) {
    auto gType = cast<RankedTensorType>(grad.getType());
    auto iType = cast<RankedTensorType>(input.getType());
    bool ok = gType.getElementType() == iType.getElementType() &&
              gType.getRank() == iType.getRank();
    for (int64_t d = 0; ok && d < gType.getRank(); ++d)
      ok = dimsCompatible(gType.getDimSize(d), iType.getDimSize(d));
    if (!ok)
      return emitOpError() << name << " " << gType
                           << " must have the shape and type of its input "
                           << iType;
    if (result.getType() != gType)
      return emitOpError() << "result type " << result.getType()
                           << " must match " << name << " type " << gType;
  }
  return success();
}

/// Checks one modifier region (`name`: score_mod or mask_mod): its block
/// arguments (`leading` types, then the types of `modOperands`), its
/// fa.yield of one `yieldType`, and its body (side-effect-free ops without
/// regions; the mod_operands arguments read only by tensor.extract).
static LogicalResult verifyModifierRegion(Operation *op, Region &region,
                                          StringRef name,
                                          ArrayRef<Type> leading,
                                          ValueRange modOperands,
                                          Type yieldType) {
  if (region.empty())
    return success();
  Block &block = region.front();
  SmallVector<Type> expected(leading.begin(), leading.end());
  llvm::append_range(expected, modOperands.getTypes());
  auto typesStr = [](TypeRange types) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "(";
    llvm::interleaveComma(types, os);
    os << ")";
    return s;
  };
  if (block.getArgumentTypes() != TypeRange(expected))
    return op->emitOpError()
           << name << " arguments must be " << typesStr(expected)
           << " (the " << (leading.size() == 5 ? "score, " : "")
           << "b, h, q, k indices, then one per mod_operands operand), got "
           << typesStr(block.getArgumentTypes());
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << name << " must end in fa.yield";
  if (yield.getValues().size() != 1 ||
      yield.getValues().front().getType() != yieldType)
    return op->emitOpError()
           << name << " must yield one " << yieldType << ", got "
           << typesStr(yield.getValues().getTypes());
  for (Operation &inner : block.without_terminator()) {
    if (inner.getNumRegions() != 0)
      return op->emitOpError()
             << name << " may not hold ops with regions, got '"
             << inner.getName() << "'";
    if (!isMemoryEffectFree(&inner))
      return op->emitOpError()
             << name << " may only hold side-effect-free ops, got '"
             << inner.getName() << "'";
  }
  unsigned first = leading.size();
  for (unsigned i = 0, e = modOperands.size(); i < e; ++i) {
    for (OpOperand &use : block.getArgument(first + i).getUses()) {
      auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
      if (!extract || use.getOperandNumber() != 0)
        return op->emitOpError()
               << name << " may read mod_operands #" << i
               << " only with tensor.extract, got '"
               << use.getOwner()->getName() << "'";
    }
  }
  return success();
}

LogicalResult AttentionOp::verifyRegions() {
  Builder b(getContext());
  Type index = b.getIndexType();
  Type f32 = b.getF32Type();
  if (failed(verifyModifierRegion(getOperation(), getScoreMod(), "score_mod",
                                  {f32, index, index, index, index},
                                  getModOperands(), f32)) ||
      failed(verifyModifierRegion(getOperation(), getMaskMod(), "mask_mod",
                                  {index, index, index, index},
                                  getModOperands(), b.getI1Type())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// CreateBlockMaskOp
//===----------------------------------------------------------------------===//

LogicalResult CreateBlockMaskOp::verify() {
  ArrayRef<int64_t> tiles = getTiles();
  if (tiles.size() != 2 || tiles[0] <= 0 || tiles[1] <= 0 ||
      tiles[0] > kMaxPosition || tiles[1] > kMaxPosition)
    return emitOpError("tiles must be two sizes in [1, 2^31 - 1], got ")
           << getTilesAttr();
  auto type = cast<RankedTensorType>(getResult().getType());
  if (type.getRank() != 4 || !type.getElementType().isSignlessInteger(8))
    return emitOpError("result must be a rank-4 i8 tensor [batch, heads, "
                       "ceil(query_len / TQ), ceil(key_len / TK)], got ")
           << type;
  // Constant sizes fix the static dims.
  auto constant = [](Value v) -> std::optional<int64_t> {
    APInt c;
    if (matchPattern(v, m_ConstantInt(&c)))
      return c.getSExtValue();
    return std::nullopt;
  };
  std::optional<int64_t> sizes[4] = {constant(getBatch()), constant(getHeads()),
                                     constant(getQueryLen()),
                                     constant(getKeyLen())};
  for (auto [i, s] : llvm::enumerate(sizes))
    if (s && *s < 0)
      return emitOpError("sizes must not be negative, got ") << *s;
  int64_t expected[4] = {
      sizes[0] ? *sizes[0] : ShapedType::kDynamic,
      sizes[1] ? *sizes[1] : ShapedType::kDynamic,
      sizes[2] ? (*sizes[2] + tiles[0] - 1) / tiles[0] : ShapedType::kDynamic,
      sizes[3] ? (*sizes[3] + tiles[1] - 1) / tiles[1] : ShapedType::kDynamic};
  for (int64_t d = 0; d < 4; ++d)
    if (!dimsCompatible(type.getDimSize(d), expected[d]))
      return emitOpError("result shape ")
             << shapeStr(type.getShape())
             << " does not match the sizes: expected "
             << shapeStr(expected) << " for tiles(" << tiles[0] << ", "
             << tiles[1] << ")";
  return success();
}

LogicalResult CreateBlockMaskOp::verifyRegions() {
  Builder b(getContext());
  Type index = b.getIndexType();
  return verifyModifierRegion(getOperation(), getMaskMod(), "mask_mod",
                              {index, index, index, index}, getModOperands(),
                              b.getI1Type());
}
