//===- RaiseAttention.cpp - linalg attention chains to fa.attention -------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Recognizes scaled dot-product attention written on tensors in upstream
// dialects, as front ends (torch-mlir, StableHLO -> linalg, hand-written
// linalg) emit it, and replaces the chain with one fa.attention:
//
//   S = contraction(Q, K^T)          zero-initialized, K^T as a transpose
//                                    in the indexing maps or linalg.transpose
//   S = S * c  |  S / c              optional, c a constant
//   S = S + M  |  select(Mb, S, -inf) optional mask, possibly broadcast
//                                    over leading batch dims
//   P = softmax(S) over the last dim linalg.softmax or its decomposition
//                                    (max, sub+exp or sub then exp, sum, div)
//   O = contraction(P, V)            zero-initialized
//
// with 0, 1 or 2 batch dims ([N, D], [B*H, N, D], [B, H, N, D]); the lower
// ranks are expanded to fa.attention's [B, H, N, D] with H = 1.
//
// The match is anchored on the P.V contraction and walks the chain
// backwards; every intermediate must have exactly the uses the chain gives
// it, so nothing else observes S or P. Anything else is left alone.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FARAISEATTENTIONPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Small matchers
//===----------------------------------------------------------------------===//

/// The scalar float constant `v` holds, looking through splat tensors and
/// linalg.fill of a constant.
static std::optional<double> getConstantFloat(Value v) {
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    return getConstantFloat(fill.getInputs()[0]);
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

static bool isNegInfConstant(Value v) {
  std::optional<double> c = getConstantFloat(v);
  return c && std::isinf(*c) && *c < 0;
}

/// True when `v` is the block argument `index` of `body`.
static bool isArg(Value v, Block *body, unsigned index) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && arg.getOwner() == body && arg.getArgNumber() == index;
}

/// The op whose single result a linalg op's body yields, provided the body
/// holds exactly that op and the yield.
static Operation *getSingleBodyOp(linalg::LinalgOp op) {
  Block *body = op.getBlock();
  if (!body || body->getOperations().size() != 2)
    return nullptr;
  Operation *yield = body->getTerminator();
  if (yield->getNumOperands() != 1)
    return nullptr;
  Operation *def = yield->getOperand(0).getDefiningOp();
  return def && def->getBlock() == body ? def : nullptr;
}

/// An elementwise linalg op on tensors: every loop parallel, one init, the
/// init and every input indexed by the identity except where `anyMapFor`
/// says the input may use any map (a splat constant).
static bool isElementwise(linalg::LinalgOp op, unsigned numInputs) {
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumDpsInputs() != numInputs || op->getNumResults() != 1)
    return false;
  if (op.getNumLoops() != op.getNumParallelLoops())
    return false;
  return op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity();
}

static bool hasIdentityMap(linalg::LinalgOp op, unsigned input) {
  return op.getMatchingIndexingMap(op.getDpsInputOperand(input)).isIdentity();
}

/// Map (d0..dr-1) -> (d0..dr-2): a per-row value broadcast along the last
/// dim.
static bool isDropLastMap(AffineMap map) {
  unsigned rank = map.getNumDims();
  if (rank == 0 || map.getNumSymbols() != 0 || map.getNumResults() != rank - 1)
    return false;
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
      return false;
  return true;
}

/// A linalg op reducing the last dim of a rank-r input into a rank-(r-1)
/// init: loops (parallel x r-1, reduction), input identity, init drops the
/// last dim.
static bool isLastDimReduction(linalg::LinalgOp op) {
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || op->getNumResults() != 1)
    return false;
  unsigned rank = op.getNumLoops();
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  for (unsigned i = 0; i < rank; ++i)
    if (iters[i] != (i + 1 == rank ? utils::IteratorType::reduction
                                   : utils::IteratorType::parallel))
      return false;
  if (!hasIdentityMap(op, 0))
    return false;
  return isDropLastMap(op.getMatchingIndexingMap(op.getDpsInitOperand(0)));
}

/// Positions of the dims a projected-permutation map reads, in order.
static std::optional<SmallVector<unsigned>> getDimPositions(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return std::nullopt;
    dims.push_back(d.getPosition());
  }
  return dims;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

namespace {
/// A batched contraction out[b.., m, n] = sum_k lhs[b.., m, k] * rhs[...]
/// with rhs indexed [b.., k, n] or, when `rhsTransposed`, [b.., n, k].
struct Contraction {
  linalg::LinalgOp op;
  Value lhs, rhs;
  unsigned numBatch = 0;
  bool rhsTransposed = false;
};
} // namespace

/// Matches `v` as the result of a zero-initialized contraction whose operand
/// and result element types all agree.
static std::optional<Contraction> matchContraction(Value v) {
  auto op = v.getDefiningOp<linalg::LinalgOp>();
  if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op->getNumResults() != 1)
    return std::nullopt;
  if (!linalg::isaContractionOpInterface(op))
    return std::nullopt;
  Value lhs = op.getDpsInputOperand(0)->get();
  Value rhs = op.getDpsInputOperand(1)->get();
  Value init = op.getDpsInitOperand(0)->get();
  Type elt = getElementTypeOrSelf(v.getType());
  if (getElementTypeOrSelf(lhs.getType()) != elt ||
      getElementTypeOrSelf(rhs.getType()) != elt ||
      getElementTypeOrSelf(init.getType()) != elt)
    return std::nullopt;
  // Accumulating onto anything but zero is not attention.
  std::optional<double> zero = getConstantFloat(init);
  if (!zero || *zero != 0.0)
    return std::nullopt;

  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.size() > 2)
    return std::nullopt;
  unsigned nb = dims->batch.size();
  if (op.getNumLoops() != nb + 3)
    return std::nullopt;
  unsigned m = dims->m[0], n = dims->n[0], k = dims->k[0];
  SmallVector<unsigned> batch(dims->batch.begin(), dims->batch.end());
  // Batch dims in order in every operand, matching the result's order.
  auto expect = [&](ArrayRef<unsigned> tail) {
    SmallVector<unsigned> r(batch);
    r.append(tail.begin(), tail.end());
    return r;
  };
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto lhsDims = getDimPositions(maps[0]);
  auto rhsDims = getDimPositions(maps[1]);
  auto outDims = getDimPositions(maps[2]);
  if (!lhsDims || !rhsDims || !outDims)
    return std::nullopt;
  if (*outDims != expect({m, n}) || *lhsDims != expect({m, k}))
    return std::nullopt;
  Contraction c{op, lhs, rhs, nb, false};
  if (*rhsDims == expect({n, k}))
    c.rhsTransposed = true;
  else if (*rhsDims != expect({k, n}))
    return std::nullopt;
  return c;
}

/// The source of a linalg.transpose that swaps the last two dims of `v`.
static Value getTransposeSource(Value v) {
  auto t = v.getDefiningOp<linalg::TransposeOp>();
  if (!t)
    return {};
  ArrayRef<int64_t> perm = t.getPermutation();
  int64_t r = perm.size();
  if (r < 2)
    return {};
  for (int64_t i = 0; i + 2 < r; ++i)
    if (perm[i] != i)
      return {};
  if (perm[r - 2] != r - 1 || perm[r - 1] != r - 2)
    return {};
  return t.getInput();
}

//===----------------------------------------------------------------------===//
// The attention chain
//===----------------------------------------------------------------------===//

namespace {
struct AttentionChain {
  Value query, key, value;
  Value mask;            // additive (float) or boolean (i1), or null
  double scale = 1.0;
  unsigned numBatch = 0; // batch dims of the contractions: 0, 1 or 2
};
} // namespace

/// Matches the scale step and the Q.K^T contraction that produce `s`.
static bool matchScaledScores(Value s, Block *block, AttentionChain &chain) {
  double scale = 1.0;
  if (auto op = s.getDefiningOp<linalg::LinalgOp>();
      op && !linalg::isaContractionOpInterface(op) &&
      op->getBlock() == block) {
    // S * c, c * S or S / c: one input with a captured constant, or two
    // inputs, one of them a splat constant.
    Operation *body = getSingleBodyOp(op);
    if (!body || !isa<arith::MulFOp, arith::DivFOp>(body))
      return false;
    Block *blk = op.getBlock();
    bool isDiv = isa<arith::DivFOp>(body);
    Value scores;
    double c = 0.0;
    auto takeConstant = [&](std::optional<double> v) {
      if (v)
        c = *v;
      return v.has_value();
    };
    if (isElementwise(op, 1) && hasIdentityMap(op, 0)) {
      // The body multiplies (either order) or divides its input by a value
      // defined outside it or by an in-body constant.
      bool found = false;
      for (unsigned i = 0; i < (isDiv ? 1u : 2u) && !found; ++i)
        found = isArg(body->getOperand(i), blk, 0) &&
                takeConstant(getConstantFloat(body->getOperand(1 - i)));
      if (found)
        scores = op.getDpsInputOperand(0)->get();
    } else if (isElementwise(op, 2)) {
      for (unsigned si = 0; si < 2 && !scores; ++si) {
        unsigned ci = 1 - si;
        if (!hasIdentityMap(op, si))
          continue;
        bool operandsOk =
            (isArg(body->getOperand(0), blk, si) &&
             isArg(body->getOperand(1), blk, ci)) ||
            (!isDiv && isArg(body->getOperand(0), blk, ci) &&
             isArg(body->getOperand(1), blk, si));
        if (operandsOk &&
            takeConstant(getConstantFloat(op.getDpsInputOperand(ci)->get())))
          scores = op.getDpsInputOperand(si)->get();
      }
    }
    if (!scores)
      return false;
    if (isDiv) {
      if (c == 0.0)
        return false;
      scale = 1.0 / c;
    } else {
      scale = c;
    }
    if (!std::isfinite(scale) || !std::isfinite(static_cast<float>(scale)))
      return false;
    if (!scores.hasOneUse())
      return false;
    s = scores;
  }

  std::optional<Contraction> qk = matchContraction(s);
  if (!qk || qk->op->getBlock() != block)
    return false;
  Value key = qk->rhs;
  if (!qk->rhsTransposed) {
    key = getTransposeSource(qk->rhs);
    if (!key)
      return false;
  }
  chain.query = qk->lhs;
  chain.key = key;
  chain.scale = scale;
  chain.numBatch = qk->numBatch;
  return true;
}

/// True when `map`, over the loops (b.., q, k) of an elementwise op on S,
/// reads a mask [b'.., q, k] that is S's shape with some leading batch dims
/// dropped (broadcast) or read at the constant 0 from a static unit dim:
/// the broadcasts fa.attention's mask expresses with dims of size 1.
static bool isBatchBroadcastMaskMap(AffineMap map, RankedTensorType maskType) {
  unsigned rank = map.getNumDims(), maskRank = map.getNumResults();
  if (map.getNumSymbols() != 0 || maskRank < 2 || maskRank > rank ||
      maskType.getRank() != static_cast<int64_t>(maskRank))
    return false;
  for (unsigned j = 0; j < maskRank; ++j) {
    AffineExpr e = map.getResult(j);
    auto d = dyn_cast<AffineDimExpr>(e);
    if (d && d.getPosition() == rank - maskRank + j)
      continue;
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (j + 2 < maskRank && c && c.getValue() == 0 &&
        maskType.getDimSize(j) == 1)
      continue;
    return false;
  }
  return true;
}

/// Matches an optional mask step producing `x`, then the scaled scores.
static bool matchMaskedScores(Value x, Block *block, AttentionChain &chain) {
  if (matchScaledScores(x, block, chain))
    return true;

  // arith.select on tensors: select(mask, S, splat(-inf)).
  if (auto sel = x.getDefiningOp<arith::SelectOp>()) {
    if (sel->getBlock() != block || !isa<RankedTensorType>(sel.getType()) ||
        !isa<RankedTensorType>(sel.getCondition().getType()) ||
        !isNegInfConstant(sel.getFalseValue()) ||
        !sel.getTrueValue().hasOneUse())
      return false;
    if (!matchScaledScores(sel.getTrueValue(), block, chain))
      return false;
    chain.mask = sel.getCondition();
    return true;
  }

  auto op = x.getDefiningOp<linalg::LinalgOp>();
  if (!op || op->getBlock() != block || !isElementwise(op, 2))
    return false;
  Operation *body = getSingleBodyOp(op);
  Block *blk = op.getBlock();
  if (!body)
    return false;
  for (unsigned si = 0; si < 2; ++si) {
    unsigned mi = 1 - si;
    Value scores = op.getDpsInputOperand(si)->get();
    Value mask = op.getDpsInputOperand(mi)->get();
    auto maskType = dyn_cast<RankedTensorType>(mask.getType());
    if (!scores.hasOneUse() || !hasIdentityMap(op, si) || !maskType ||
        !isBatchBroadcastMaskMap(
            op.getMatchingIndexingMap(op.getDpsInputOperand(mi)), maskType))
      continue;
    if (auto add = dyn_cast<arith::AddFOp>(body)) {
      // S + M or M + S.
      bool ok = (isArg(add.getLhs(), blk, si) && isArg(add.getRhs(), blk, mi)) ||
                (isArg(add.getLhs(), blk, mi) && isArg(add.getRhs(), blk, si));
      if (!ok)
        continue;
    } else if (auto sel = dyn_cast<arith::SelectOp>(body)) {
      // select(Mb, S, -inf) with Mb an i1 tensor.
      if (!getElementTypeOrSelf(mask.getType()).isSignlessInteger(1) ||
          !isArg(sel.getCondition(), blk, mi) ||
          !isArg(sel.getTrueValue(), blk, si) ||
          !isNegInfConstant(sel.getFalseValue()))
        continue;
    } else {
      return false;
    }
    AttentionChain attempt = chain;
    if (!matchScaledScores(scores, block, attempt))
      continue;
    attempt.mask = mask;
    chain = attempt;
    return true;
  }
  return false;
}

/// Matches `p` as a softmax over the last dim: linalg.softmax or the
/// max / sub+exp / sum / div decomposition that linalg.softmax's
/// AggregatedOpInterface produces. Returns the softmax input.
static Value matchSoftmax(Value p, Block *block) {
  auto type = dyn_cast<RankedTensorType>(p.getType());
  if (!type)
    return {};
  int64_t rank = type.getRank();
  if (auto sm = p.getDefiningOp<linalg::SoftmaxOp>()) {
    if (sm->getBlock() != block ||
        static_cast<int64_t>(sm.getDimension()) != rank - 1 ||
        sm.getInput().getType() != type || !sm.getInput().hasOneUse())
      return {};
    return sm.getInput();
  }

  // div: P = E / sum, the sum broadcast along the last dim.
  auto div = p.getDefiningOp<linalg::LinalgOp>();
  if (!div || div->getBlock() != block || !isElementwise(div, 2) ||
      !hasIdentityMap(div, 0) ||
      !isDropLastMap(div.getMatchingIndexingMap(div.getDpsInputOperand(1))))
    return {};
  Operation *divBody = getSingleBodyOp(div);
  if (!divBody || !isa<arith::DivFOp>(divBody) ||
      !isArg(divBody->getOperand(0), div.getBlock(), 0) ||
      !isArg(divBody->getOperand(1), div.getBlock(), 1))
    return {};
  Value e = div.getDpsInputOperand(0)->get();
  Value sum = div.getDpsInputOperand(1)->get();

  // sum: reduction of E over the last dim with addf, from zero.
  auto sumOp = sum.getDefiningOp<linalg::LinalgOp>();
  if (!sum.hasOneUse() || !sumOp || sumOp->getBlock() != block ||
      !isLastDimReduction(sumOp) || sumOp.getDpsInputOperand(0)->get() != e)
    return {};
  Operation *sumBody = getSingleBodyOp(sumOp);
  if (!sumBody || !isa<arith::AddFOp>(sumBody) ||
      !((isArg(sumBody->getOperand(0), sumOp.getBlock(), 0) &&
         isArg(sumBody->getOperand(1), sumOp.getBlock(), 1)) ||
        (isArg(sumBody->getOperand(0), sumOp.getBlock(), 1) &&
         isArg(sumBody->getOperand(1), sumOp.getBlock(), 0))))
    return {};
  std::optional<double> zero =
      getConstantFloat(sumOp.getDpsInitOperand(0)->get());
  if (!zero || *zero != 0.0)
    return {};

  // E = exp(X - max), used by the sum and the div only: one generic (as
  // linalg.softmax decomposes) or a sub generic followed by an exp generic
  // (as torch-mlir-like front ends emit it).
  auto expOp = e.getDefiningOp<linalg::LinalgOp>();
  if (!expOp || expOp->getBlock() != block)
    return {};
  for (Operation *user : e.getUsers())
    if (user != div.getOperation() && user != sumOp.getOperation())
      return {};
  if (std::distance(e.getUses().begin(), e.getUses().end()) != 2)
    return {};
  // The op computing X - max, and whether it also takes the exp.
  linalg::LinalgOp subOp = expOp;
  bool fused = isElementwise(expOp, 2);
  if (!fused) {
    if (!isElementwise(expOp, 1) || !hasIdentityMap(expOp, 0))
      return {};
    Operation *expBody = getSingleBodyOp(expOp);
    if (!expBody || !isa<math::ExpOp>(expBody) ||
        !isArg(expBody->getOperand(0), expOp.getBlock(), 0))
      return {};
    Value diff = expOp.getDpsInputOperand(0)->get();
    subOp = diff.getDefiningOp<linalg::LinalgOp>();
    if (!diff.hasOneUse() || !subOp || subOp->getBlock() != block ||
        !isElementwise(subOp, 2))
      return {};
  }
  if (!hasIdentityMap(subOp, 0) ||
      !isDropLastMap(
          subOp.getMatchingIndexingMap(subOp.getDpsInputOperand(1))))
    return {};
  Block *subBlk = subOp.getBlock();
  if (subBlk->getOperations().size() != (fused ? 3u : 2u))
    return {};
  Value diffValue = subBlk->getTerminator()->getOperand(0);
  if (fused) {
    auto exp = diffValue.getDefiningOp<math::ExpOp>();
    if (!exp)
      return {};
    diffValue = exp.getOperand();
  }
  auto sub = diffValue.getDefiningOp<arith::SubFOp>();
  if (!sub || !isArg(sub.getLhs(), subBlk, 0) ||
      !isArg(sub.getRhs(), subBlk, 1))
    return {};
  Value x = subOp.getDpsInputOperand(0)->get();
  Value max = subOp.getDpsInputOperand(1)->get();

  // max: reduction of X over the last dim with maxnumf (from -inf or NaN)
  // or maximumf (from -inf).
  auto maxOp = max.getDefiningOp<linalg::LinalgOp>();
  if (!max.hasOneUse() || !maxOp || maxOp->getBlock() != block ||
      !isLastDimReduction(maxOp) || maxOp.getDpsInputOperand(0)->get() != x)
    return {};
  Operation *maxBody = getSingleBodyOp(maxOp);
  if (!maxBody || !isa<arith::MaxNumFOp, arith::MaximumFOp>(maxBody) ||
      !((isArg(maxBody->getOperand(0), maxOp.getBlock(), 0) &&
         isArg(maxBody->getOperand(1), maxOp.getBlock(), 1)) ||
        (isArg(maxBody->getOperand(0), maxOp.getBlock(), 1) &&
         isArg(maxBody->getOperand(1), maxOp.getBlock(), 0))))
    return {};
  std::optional<double> init =
      getConstantFloat(maxOp.getDpsInitOperand(0)->get());
  bool initOk = init && ((std::isinf(*init) && *init < 0) ||
                         (std::isnan(*init) && isa<arith::MaxNumFOp>(maxBody)));
  if (!initOk)
    return {};

  // X feeds the max and the subtraction only.
  for (Operation *user : x.getUsers())
    if (user != maxOp.getOperation() && user != subOp.getOperation())
      return {};
  if (std::distance(x.getUses().begin(), x.getUses().end()) != 2)
    return {};
  if (x.getType() != type)
    return {};
  return x;
}

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

static bool isSupportedFloat(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

/// [b.., n, d] with 0, 1 or 2 batch dims -> [B, H, n, d]: a rank-3 value is
/// taken as [B*H, n, d] with H = 1, a rank-2 value gets B = H = 1.
static SmallVector<ReassociationIndices> getReassociation(unsigned numBatch) {
  if (numBatch == 2)
    return {{0}, {1}, {2}, {3}};
  if (numBatch == 1)
    return {{0, 1}, {2}, {3}};
  return {{0, 1, 2}, {3}};
}

static Value expandTo4D(PatternRewriter &rewriter, Location loc, Value v,
                        unsigned numBatch) {
  if (numBatch == 2)
    return v;
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.insert(shape.begin() + (numBatch == 1 ? 1 : 0), 2 - numBatch, 1);
  auto newType = RankedTensorType::get(shape, type.getElementType());
  return tensor::ExpandShapeOp::create(rewriter, loc, newType, v,
                                       getReassociation(numBatch));
}

namespace {
struct RaiseAttentionPattern final
    : OpInterfaceRewritePattern<linalg::LinalgOp> {
  RaiseAttentionPattern(MLIRContext *ctx, RaiseAttentionOptions options)
      : OpInterfaceRewritePattern(ctx), options(options) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp pvOp,
                                PatternRewriter &rewriter) const override {
    // O = P V with V indexed [b.., k, n].
    if (pvOp->getNumResults() != 1)
      return failure();
    std::optional<Contraction> pv = matchContraction(pvOp->getResult(0));
    if (!pv || pv->rhsTransposed)
      return rewriter.notifyMatchFailure(pvOp, "not a P.V contraction");
    Block *block = pvOp->getBlock();
    Value p = pv->lhs;
    if (!p.hasOneUse())
      return rewriter.notifyMatchFailure(pvOp, "P has other uses");
    Value x = matchSoftmax(p, block);
    if (!x)
      return rewriter.notifyMatchFailure(pvOp,
                                         "P is not a last-dim softmax");
    AttentionChain chain;
    if (!matchMaskedScores(x, block, chain))
      return rewriter.notifyMatchFailure(pvOp, "no scaled, masked Q.K^T");
    chain.value = pv->rhs;
    if (chain.numBatch != pv->numBatch)
      return rewriter.notifyMatchFailure(pvOp, "batch dims differ");
    if (chain.mask && !options.allowMaskedRows)
      return rewriter.notifyMatchFailure(
          pvOp, "masked chain and allow-masked-rows=false");

    // What fa.attention can express.
    auto qType = cast<RankedTensorType>(chain.query.getType());
    auto kType = cast<RankedTensorType>(chain.key.getType());
    auto vType = cast<RankedTensorType>(chain.value.getType());
    Type elt = qType.getElementType();
    if (!isSupportedFloat(elt) || kType.getElementType() != elt ||
        vType.getElementType() != elt ||
        getElementTypeOrSelf(pvOp->getResult(0).getType()) != elt)
      return rewriter.notifyMatchFailure(pvOp, "unsupported element types");
    int64_t r = qType.getRank();
    if (kType.getRank() != r || vType.getRank() != r)
      return rewriter.notifyMatchFailure(pvOp, "operand ranks differ");
    if (qType.isDynamicDim(r - 1) || vType.isDynamicDim(r - 1) ||
        (chain.numBatch == 2 && (qType.isDynamicDim(1) ||
                                 kType.isDynamicDim(1) ||
                                 vType.isDynamicDim(1))))
      return rewriter.notifyMatchFailure(pvOp,
                                         "head dims and head counts must be "
                                         "static");
    if (chain.mask) {
      Type mElt = getElementTypeOrSelf(chain.mask.getType());
      if (!mElt.isSignlessInteger(1) && !isSupportedFloat(mElt))
        return rewriter.notifyMatchFailure(pvOp, "unsupported mask type");
    }

    Location loc = pvOp->getLoc();
    unsigned nb = chain.numBatch;
    Value q = expandTo4D(rewriter, loc, chain.query, nb);
    Value k = expandTo4D(rewriter, loc, chain.key, nb);
    Value v = expandTo4D(rewriter, loc, chain.value, nb);
    Value mask;
    if (chain.mask) {
      // A mask broadcast over leading batch dims gets them back as unit
      // dims, then takes the operands' 4-D form.
      mask = chain.mask;
      auto mType = cast<RankedTensorType>(mask.getType());
      if (mType.getRank() < r) {
        int64_t missing = r - mType.getRank();
        SmallVector<int64_t> shape(missing, 1);
        llvm::append_range(shape, mType.getShape());
        SmallVector<ReassociationIndices> groups(1);
        for (int64_t i = 0; i <= missing; ++i)
          groups[0].push_back(i);
        for (int64_t i = missing + 1; i < r; ++i)
          groups.push_back({i});
        mask = tensor::ExpandShapeOp::create(
            rewriter, loc, RankedTensorType::get(shape, mType.getElementType()),
            mask, groups);
      }
      mask = expandTo4D(rewriter, loc, mask, nb);
    }
    SmallVector<OpFoldResult> outSizes = {
        tensor::getMixedSize(rewriter, loc, q, 0),
        tensor::getMixedSize(rewriter, loc, q, 1),
        tensor::getMixedSize(rewriter, loc, q, 2),
        tensor::getMixedSize(rewriter, loc, v, 3)};
    Value init = tensor::EmptyOp::create(rewriter, loc, outSizes, elt);
    auto attention = AttentionOp::create(
        rewriter, loc, TypeRange{init.getType()}, q, k, v, /*kv_lens=*/Value(),
        mask, init, /*lse=*/Value(),
        rewriter.getF32FloatAttr(static_cast<float>(chain.scale)),
        CausalKind::none);
    Value result = attention.getResult();
    if (nb != 2)
      result = tensor::CollapseShapeOp::create(rewriter, loc, result,
                                               getReassociation(nb));
    // Q's dims may be less static than the chain's result (or vice versa).
    Type resultType = pvOp->getResult(0).getType();
    if (result.getType() != resultType)
      result = tensor::CastOp::create(rewriter, loc, resultType, result);
    rewriter.replaceOp(pvOp, result);
    return success();
  }

  RaiseAttentionOptions options;
};

struct RaiseAttentionPass final
    : fa::impl::FARaiseAttentionPassBase<RaiseAttentionPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void fa::populateRaiseAttentionPatterns(RewritePatternSet &patterns,
                                        RaiseAttentionOptions options) {
  patterns.add<RaiseAttentionPattern>(patterns.getContext(), options);
}

void RaiseAttentionPass::runOnOperation() {
  RewritePatternSet patterns(&getContext());
  RaiseAttentionOptions options;
  options.allowMaskedRows = allowMaskedRows;
  populateRaiseAttentionPatterns(patterns, options);
  // No folding: leave everything that is not raised as it was. The greedy
  // driver still erases the chain ops the rewrite leaves dead.
  GreedyRewriteConfig config;
  config.enableFolding(false);
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                   config)))
    signalPassFailure();
}
