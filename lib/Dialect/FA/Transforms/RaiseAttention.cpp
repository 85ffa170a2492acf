//===- RaiseAttention.cpp - linalg attention chains to fa.attention -------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Recognizes scaled dot-product attention and softmax written on tensors in
// upstream dialects, as front ends (torch-mlir's linalg-on-tensors backend,
// StableHLO -> linalg, hand-written linalg) emit them, and replaces the chain
// with one fa.attention or fa.softmax.
//
// The match does not look at ops one by one. The tracer (RaisingTracer.h)
// describes one element of the attention output, at symbolic indices over
// the output's dims, as a scalar expression: reshapes, permutations,
// broadcasts and elementwise bodies disappear, and what is left is
//
//   O[i] = sum_k P[.., k] * V[.., k, ..]            (the P.V contraction)
//   P    = exp(X - max_k X) / sum_k exp(X - max_k X) (or a softmax op)
//   X    = f(S, masks)                               (scale, masks, casts)
//   S    = sum_d Q[.., d] * K[.., d]                 (the Q.K^T contraction)
//
// from which the roles of the dims (batch, heads, queries, keys, head dims),
// the GQA head mapping (a K/V head index h floordiv g), the scale, causal
// alignment (index comparisons k <= q + off) and the masks are read off.
// Anything that does not fit is left alone, and the reason can be reported
// as a remark.
//
//===----------------------------------------------------------------------===//

#include "RaisingTracer.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/FormatVariadic.h"

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
using namespace mlir::fa::raising;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static bool isSupportedFloat(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

static bool isContraction(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.hasPureTensorSemantics() &&
         linalgOp->getNumResults() == 1 &&
         linalg::isaContractionOpInterface(linalgOp);
}

/// True when `e` reads the result of a contraction somewhere inside.
static bool readsContraction(const Expr *e) {
  if (e->kind == ExprKind::Read)
    return isContraction(e->value.getDefiningOp());
  return llvm::any_of(e->operands, readsContraction);
}

/// True when `e` looks like (part of) a softmax: an exponential, a
/// reduction or a softmax op.
static bool isSoftmaxLike(const Expr *e) {
  if (e->kind == ExprKind::Reduce || e->kind == ExprKind::Softmax)
    return true;
  if (getOp<math::ExpOp>(e))
    return true;
  return llvm::any_of(e->operands, isSoftmaxLike);
}

/// A cheap look at the producers of `v` (a few ops deep): a softmax op or
/// a body computing an exponential. Decides what deserves a remark.
static bool looksLikeSoftmax(Value v) {
  SmallVector<Value> work = {v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty() && seen.size() < 24) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second || isContraction(def))
      continue;
    if (isa<linalg::SoftmaxOp, fa::SoftmaxOp>(def))
      return true;
    if (auto op = dyn_cast<linalg::LinalgOp>(def))
      if (llvm::any_of(op.getBlock()->getOperations(),
                       [](Operation &o) { return isa<math::ExpOp>(o); }))
        return true;
    if (isa<math::ExpOp>(def))
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// Strips casts between float types.
static const Expr *stripFloatCasts(const Expr *e) {
  while (getOp<arith::ExtFOp>(e) || getOp<arith::TruncFOp>(e))
    e = e->operands[0];
  return e;
}

/// A fill value that removes a key: -inf, or a finite value at most
/// kMaskFillLimit (-1e9 in the Annotated Transformer, -10000 in BERT,
/// 0.7 * lowest in JAX). A finite fill F removes the key exactly (exp(F - m)
/// is 0 in f32) unless a kept score of the row is within about 104 of F; a
/// row with no kept key differs (the documented fully-masked-row case).
static constexpr double kMaskFillLimit = -1e4;

static bool isMaskFill(const Expr *e, double outerFactor) {
  std::optional<double> c = getConstFloat(e);
  if (!c)
    return false;
  // The fill goes through the factors applied after it: -3e38 * 1e-38 is
  // an ordinary score.
  if (std::isinf(*c))
    return *c < 0 && outerFactor > 0;
  return *c * outerFactor <= kMaskFillLimit;
}

namespace {
struct Keep {
  const Expr *cond;
  bool negate;
};
} // namespace

/// Whether `bias` is 0 where a conjunction of conditions holds and a mask
/// fill elsewhere (select(c, 0, fill), select(c, fill, 0), and selects of
/// such a bias and a fill: masked_fill applied twice to an additive mask);
/// the conditions go to `keeps`, `finite` is set for a finite fill.
static bool collectZeroFillKeeps(const Expr *bias, double outer,
                                 SmallVectorImpl<Keep> &keeps, bool &finite) {
  if (!getOp<arith::SelectOp>(bias))
    return false;
  const Expr *c = bias->operands[0];
  auto isZero = [](const Expr *e) {
    std::optional<double> v = getConstFloat(e);
    return v && *v == 0.0;
  };
  for (bool negate : {false, true}) {
    const Expr *kept = bias->operands[negate ? 2 : 1];
    const Expr *fill = bias->operands[negate ? 1 : 2];
    if (!isMaskFill(fill, outer))
      continue;
    size_t before = keeps.size();
    if (isZero(kept) || collectZeroFillKeeps(kept, outer, keeps, finite)) {
      finite |= std::isfinite(*getConstFloat(fill));
      keeps.push_back({c, negate});
      return true;
    }
    keeps.resize(before);
  }
  return false;
}

namespace {
/// A contraction read at symbolic indices, decomposed.
struct ContractionRead {
  linalg::LinalgOp op;
  unsigned reductionDim;
  SmallVector<AffineExpr> lhsIndices, rhsIndices;
};
} // namespace

/// Decomposes the read `leaf` of a zero-initialized contraction with one
/// reduction dim.
static FailureOr<ContractionRead>
decomposeContraction(Tracer &tracer, const Expr *leaf, std::string &why) {
  auto op = cast<linalg::LinalgOp>(leaf->value.getDefiningOp());
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->k.size() != 1) {
    why = "the contraction does not reduce over exactly one dim";
    return failure();
  }
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<AffineExpr> loops(op.getNumLoops(), AffineExpr());
  AffineMap out = maps[2];
  for (auto [j, r] : llvm::enumerate(out.getResults())) {
    auto d = dyn_cast<AffineDimExpr>(r);
    if (!d) {
      why = "the contraction's output indexing map is not a projection";
      return failure();
    }
    loops[d.getPosition()] = leaf->indices[j];
  }
  unsigned k = dims->k[0];
  if (loops[k]) {
    why = "the contraction's reduction dim is in its output";
    return failure();
  }
  for (auto [i, l] : llvm::enumerate(loops))
    if (!l && i != k) {
      why = "the contraction has a loop outside its operands";
      return failure();
    }
  unsigned rd = tracer.addDim(op.getStaticLoopRanges()[k]);
  loops[k] = tracer.getDim(rd);
  const Expr *init = tracer.read(op.getDpsInitOperand(0)->get(), leaf->indices,
                                 TraceMode::Views);
  std::optional<double> zero = getConstFloat(init);
  if (!zero || *zero != 0.0) {
    why = "the contraction accumulates onto something other than zero";
    return failure();
  }
  ContractionRead c{op, rd, {}, {}};
  for (AffineExpr r : maps[0].getResults())
    c.lhsIndices.push_back(r.replaceDims(loops));
  for (AffineExpr r : maps[1].getResults())
    c.rhsIndices.push_back(r.replaceDims(loops));
  return c;
}

/// The Views-mode read of a contraction operand, with constant multipliers
/// moved into `factor`; when what is left is not a plain read, the operand
/// tensor itself.
static const Expr *readOperand(Tracer &tracer, Value operand,
                               ArrayRef<AffineExpr> indices, double &factor) {
  factor = 1.0;
  const Expr *e = tracer.read(operand, indices, TraceMode::Views);
  double f = 1.0;
  while (e && e->kind == ExprKind::Op) {
    if (auto mul = getOp<arith::MulFOp>(e)) {
      std::optional<double> c0 = getConstFloat(e->operands[0]);
      std::optional<double> c1 = getConstFloat(e->operands[1]);
      if (c1) {
        f *= *c1;
        e = e->operands[0];
        continue;
      }
      if (c0) {
        f *= *c0;
        e = e->operands[1];
        continue;
      }
    }
    if (getOp<arith::DivFOp>(e)) {
      std::optional<double> c = getConstFloat(e->operands[1]);
      if (c && *c != 0.0) {
        f /= *c;
        e = e->operands[0];
        continue;
      }
    }
    break;
  }
  if (e && e->kind == ExprKind::Read) {
    factor = f;
    return e;
  }
  // The operand as it is.
  tracer.clearError();
  return tracer.makeRead(operand, indices);
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

/// Slot ids of a tensor's dims: a canonical dim, kUnit for a dim of size 1
/// read at 0, kKvHead for a K/V head dim read as `h floordiv g`.
static constexpr int kUnit = -1;
static constexpr int kKvHead = -2;

/// Brings `value`, whose dims hold `src` slots, to a tensor whose dims hold
/// `dst` slots: drops unit dims, transposes, inserts unit dims.
static Value reshapeTranspose(OpBuilder &b, Location loc, Value value,
                              ArrayRef<int> src, ArrayRef<int> dst) {
  if (src == dst)
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  auto groupsAround = [](ArrayRef<int> slots) {
    // Each unit slot joins the kept slot before it (leading ones the first
    // kept slot).
    SmallVector<ReassociationIndices> groups;
    ReassociationIndices pending;
    for (auto [i, s] : llvm::enumerate(slots)) {
      if (s == kUnit && !groups.empty()) {
        groups.back().push_back(i);
        continue;
      }
      pending.push_back(i);
      if (s != kUnit) {
        groups.push_back(pending);
        pending.clear();
      }
    }
    return groups;
  };
  SmallVector<int> kept;
  for (int s : src)
    if (s != kUnit)
      kept.push_back(s);
  if (kept.size() != src.size()) {
    value = tensor::CollapseShapeOp::create(b, loc, value, groupsAround(src));
    type = cast<RankedTensorType>(value.getType());
  }
  SmallVector<int> want;
  for (int s : dst)
    if (s != kUnit)
      want.push_back(s);
  SmallVector<int64_t> perm;
  for (int s : want)
    perm.push_back(llvm::find(kept, s) - kept.begin());
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))) {
    SmallVector<OpFoldResult> sizes;
    for (int64_t p : perm)
      sizes.push_back(tensor::getMixedSize(b, loc, value, p));
    Value init = tensor::EmptyOp::create(b, loc, sizes, type.getElementType());
    value =
        linalg::TransposeOp::create(b, loc, value, init, perm)->getResult(0);
    type = cast<RankedTensorType>(value.getType());
  }
  if (want.size() != dst.size()) {
    SmallVector<int64_t> shape;
    unsigned next = 0;
    for (int s : dst)
      shape.push_back(s == kUnit ? 1 : type.getDimSize(next++));
    value = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), value,
        groupsAround(dst));
  }
  return value;
}

//===----------------------------------------------------------------------===//
// The attention matcher
//===----------------------------------------------------------------------===//

namespace {
struct Bias {
  const Expr *value;
  double factor;
};

/// The softmax input and the scores it is computed from.
struct ScoreForm {
  const Expr *scores = nullptr; // a read of the Q.K^T contraction
  double scale = 1.0;
  /// c of a softcap c * tanh(s / c) applied to the scaled scores.
  std::optional<double> softcap;
  SmallVector<Keep> keeps;
  SmallVector<Bias> biases;
};

/// What the attention and softmax matchers share: the tracer, the reason
/// of a failure, and the softmax chain.
class MatcherBase {
public:
  explicit MatcherBase(MLIRContext *ctx) : tracer(ctx) {}

  /// Why match() failed, and whether the op looked like what the matcher
  /// raises at all (then the failure is worth a remark).
  std::string reason;
  bool candidate = false;

protected:
  LogicalResult failWith(const Twine &why) {
    if (reason.empty()) {
      reason = why.str();
      if (!tracer.getNote().empty())
        reason += " (note: " + tracer.getNote() + ")";
    }
    return failure();
  }
  /// Matches `p`, an element of P at `pIndices`, as a softmax normalizing
  /// over dim `keyDim`; sets `x` to the softmax input's element.
  LogicalResult matchSoftmax(const Expr *p, unsigned keyDim,
                             ArrayRef<AffineExpr> pIndices, const Expr *&x);
  /// True when `c` is "every X[.., k] of the row is -inf".
  bool isRowAllNegInf(const Expr *c, const Expr *x, unsigned key);
  /// Checks that the ops computed from `roots` (forward through the ops
  /// the tracer looked through) are used only inside the chain that ends
  /// at `anchorOp`.
  LogicalResult checkUses(ArrayRef<Operation *> roots, Operation *anchorOp,
                          StringRef rootName, StringRef laterName);
  /// Points the tensor.dim users of the chain's ops at the destinations
  /// those results take their shapes from, so that the chain can go.
  void redirectDims(RewriterBase &rewriter);

  Tracer tracer;
  SmallVector<Operation *> chainOps;
  /// What the softmax dim is checked against, for messages.
  std::string keyUser = "the P.V contraction";
};

class AttentionMatcher : public MatcherBase {
public:
  AttentionMatcher(linalg::LinalgOp pv, const RaiseAttentionOptions &options)
      : MatcherBase(pv->getContext()), pv(pv), options(options) {}

  LogicalResult match();
  void rewrite(RewriterBase &rewriter);

private:
  LogicalResult decomposeScores(const Expr *x, ScoreForm &form);
  LogicalResult assignRoles();
  LogicalResult classifyMasks();
  /// Whether `c` is a window bound k <= q + c or k >= q + c; records it.
  bool addBound(const LinearForm &c, std::optional<int64_t> &upper,
                std::optional<int64_t> &lower, bool &qkOnly);
  bool matchAlibi(const Bias &bias);
  void placePositions();
  Value materializeSlopes(OpBuilder &b, Location loc, Value q4);
  std::optional<SmallVector<int>> slotsOf(const Expr *leaf, int64_t &group);
  bool canMaterialize(const Expr *e);
  Value materializeMask(OpBuilder &b, Location loc, Value qRef, Value kRef);
  Value emitElement(OpBuilder &b, Location loc, const Expr *e,
                    SmallVectorImpl<Value> &inputs,
                    SmallVectorImpl<AffineMap> &maps, Block *body,
                    llvm::DenseMap<const Expr *, Value> &done);
  std::optional<AffineMap> loopMap(ArrayRef<AffineExpr> indices);

  linalg::LinalgOp pv;
  RaiseAttentionOptions options;

  // What match() found.
  Value anchor;
  SmallVector<int64_t> anchorShape;
  const Expr *qLeaf = nullptr, *kLeaf = nullptr, *vLeaf = nullptr;
  linalg::LinalgOp qkOp;
  unsigned keyDim = 0, qkDim = 0;
  ScoreForm form;
  // Roles: up to two batch dims (the second is the heads), the query dim,
  // the value head dim; the GQA group.
  SmallVector<unsigned> batch;
  int queryDim = kUnit, valueDim = kUnit;
  /// The fa.attention batch and head dims among `batch` (kUnit when absent).
  int batchDim = kUnit, headDim = kUnit;
  /// `d`, or kUnit when its size is 1 (its index is always 0, and it is
  /// absent from the reads).
  int slot(unsigned d) const {
    return tracer.getDimSize(d) == 1 ? kUnit : int(d);
  }
  int64_t group = 1;
  CausalKind causal = CausalKind::none;
  SmallVector<Keep> maskKeeps;
  /// Keeps that are window bounds on k - q: k <= q + upperOff and
  /// k >= q + lowerOff.
  SmallVector<Keep> boundKeeps;
  std::optional<int64_t> upperOff, lowerOff;
  /// A bias that is ALiBi: fa's slopes are `coef` times the product of
  /// `slopeFactors` (functions of the batch and head), the distance
  /// |q + off - k|; `signed` when the bias is linear in k - q, which is
  /// ALiBi only on keys k <= q + off.
  struct Alibi {
    Bias bias;
    SmallVector<const Expr *> slopeFactors;
    double coef = 1.0;
    int64_t off = 0;
    bool isSigned = false;
  };
  std::optional<Alibi> alibi;
  /// What placePositions() chose: q_offset, window(left, right).
  int64_t qOffset = 0;
  std::optional<std::pair<int64_t, int64_t>> window;

public:
  /// Set when an index comparison became a boolean mask instead of a causal
  /// alignment (worth a remark: the mask costs memory and a load per key).
  std::string maskNote;
};
} // namespace

/// Advances from the contraction result through single-use reshapes,
/// transposes, copies and float truncations to the value the chain's
/// result ends up as.
static Value findAnchor(Value v) {
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    if (user->getNumResults() != 1 || user->getBlock() != v.getParentBlock())
      break;
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp>(
            user) &&
        user->getOperand(0) == v) {
      v = user->getResult(0);
      continue;
    }
    auto op = dyn_cast<linalg::LinalgOp>(user);
    if (!op || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
        op.getDpsInputOperand(0)->get() != v ||
        op.getNumParallelLoops() != op.getNumLoops() ||
        !op.getMatchingIndexingMap(op.getDpsInputOperand(0)).isPermutation() ||
        !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
      break;
    Block *body = op.getBlock();
    Value y = body->getTerminator()->getOperand(0);
    Value in = body->getArgument(0);
    auto trunc = y.getDefiningOp<arith::TruncFOp>();
    if (y != in && !(trunc && trunc.getIn() == in && trunc->getBlock() == body))
      break;
    v = user->getResult(0);
  }
  return v;
}

LogicalResult AttentionMatcher::match() {
  if (!pv.hasPureTensorSemantics() || pv->getNumResults() != 1 ||
      !linalg::isaContractionOpInterface(pv))
    return failure();
  candidate = looksLikeSoftmax(pv.getDpsInputOperand(0)->get()) ||
              looksLikeSoftmax(pv.getDpsInputOperand(1)->get());
  if (!candidate)
    return failure();

  anchor = findAnchor(pv->getResult(0));
  tracer.addVisited(pv);
  auto anchorType = cast<RankedTensorType>(anchor.getType());
  anchorShape.assign(anchorType.getShape().begin(),
                     anchorType.getShape().end());
  SmallVector<AffineExpr> idx;
  for (int64_t s : anchorShape)
    idx.push_back(tracer.getDim(tracer.addDim(s)));
  const Expr *out = tracer.read(anchor, idx, TraceMode::Full);
  if (!out)
    return failWith(tracer.getError());
  if (getOp<arith::TruncFOp>(out))
    out = out->operands[0];
  if (out->kind != ExprKind::Read || out->value != pv->getResult(0))
    return failWith("the contraction's result is not read back unchanged");

  std::string why;
  FailureOr<ContractionRead> pvRead = decomposeContraction(tracer, out, why);
  if (failed(pvRead))
    return failWith(why);
  keyDim = pvRead->reductionDim;

  // One operand is P, the other V.
  const Expr *x = nullptr;
  int pSide = -1;
  std::string pReason;
  for (int side = 0; side < 2 && pSide < 0; ++side) {
    Value operand = pv.getDpsInputOperand(side)->get();
    ArrayRef<AffineExpr> pIdx =
        side == 0 ? pvRead->lhsIndices : pvRead->rhsIndices;
    tracer.clearError();
    const Expr *p = tracer.read(operand, pIdx, TraceMode::Full);
    if (!p && looksLikeSoftmax(operand) && pReason.empty())
      pReason = tracer.getError();
    if (!p || !isSoftmaxLike(p))
      continue;
    reason.clear();
    if (succeeded(matchSoftmax(p, keyDim, pIdx, x))) {
      pSide = side;
      break;
    }
    if (pReason.empty())
      pReason = reason;
  }
  if (pSide < 0) {
    reason.clear();
    return failWith(pReason.empty() ? "no operand of the contraction is a "
                                      "softmax"
                                    : pReason);
  }
  reason.clear();

  Value vOperand = pv.getDpsInputOperand(1 - pSide)->get();
  double vFactor;
  vLeaf = readOperand(tracer, vOperand,
                      pSide == 0 ? pvRead->rhsIndices : pvRead->lhsIndices,
                      vFactor);
  if (!vLeaf || vFactor != 1.0)
    return failWith("V is scaled or not a plain tensor read");

  if (failed(decomposeScores(x, form)))
    return failure();
  // Which contraction operand is Q: the one not reading the key dim.
  FailureOr<ContractionRead> qk =
      decomposeContraction(tracer, form.scores, why);
  if (failed(qk))
    return failWith(why);
  qkOp = qk->op;
  qkDim = qk->reductionDim;
  double fa = 1.0, fb = 1.0;
  const Expr *a = readOperand(tracer, qkOp.getDpsInputOperand(0)->get(),
                              qk->lhsIndices, fa);
  const Expr *b = readOperand(tracer, qkOp.getDpsInputOperand(1)->get(),
                              qk->rhsIndices, fb);
  if (!a || !b)
    return failWith("Q or K is not a plain tensor read");
  llvm::SmallSetVector<unsigned, 8> aDims, bDims;
  collectDims(a, aDims);
  collectDims(b, bDims);
  bool aKey = aDims.contains(keyDim), bKey = bDims.contains(keyDim);
  if (bKey && !aKey) {
    qLeaf = a;
    kLeaf = b;
  } else if (aKey && !bKey) {
    qLeaf = b;
    kLeaf = a;
  } else if (!aKey && !bKey && tracer.getDimSize(keyDim) == 1) {
    // One key: nothing tells Q from K but the order.
    qLeaf = a;
    kLeaf = b;
  } else {
    return failWith("the softmax does not normalize over the keys of the "
                    "Q.K^T contraction");
  }
  form.scale *= fa * fb;
  if (!std::isfinite(form.scale) ||
      !std::isfinite(static_cast<float>(form.scale)))
    return failWith("the scale is not a finite f32");

  if (failed(assignRoles()) || failed(classifyMasks()) ||
      failed(checkUses({qkOp}, anchor.getDefiningOp(), "the scores S = Q.K^T",
                       "a value computed from S")))
    return failure();
  if ((causal != CausalKind::none || window || !maskKeeps.empty() ||
       !form.biases.empty()) &&
      !options.allowMaskedRows)
    return failWith("the chain is masked and allow-masked-rows=false");
  return success();
}

LogicalResult MatcherBase::matchSoftmax(const Expr *p, unsigned key,
                                        ArrayRef<AffineExpr> pIndices,
                                        const Expr *&x) {
  AffineExpr keyExpr = tracer.getDim(key);
  // Position of a dim among P's indices, for messages.
  auto positionOf = [&](unsigned d) -> int {
    for (auto [i, e] : llvm::enumerate(pIndices))
      if (e == tracer.getDim(d))
        return i;
    return -1;
  };
  // Finds the dim `reduce` reduces `whole` over, for a message.
  auto wrongDim = [&](const Expr *reduce, const Expr *whole) -> LogicalResult {
    for (unsigned d = 0; d < tracer.getNumDims(); ++d) {
      if (d == reduce->dim || d == key ||
          tracer.getDimSize(d) != tracer.getDimSize(reduce->dim))
        continue;
      if (isEqual(tracer,
                  tracer.substitute(reduce->operands.back(), reduce->dim,
                                    tracer.getDim(d)),
                  whole)) {
        int from = positionOf(d), to = positionOf(key);
        if (from >= 0 && to >= 0)
          return failWith(llvm::formatv(
              "the softmax reduces over dim {0} of P, {1} over dim {2}", from,
              keyUser, to));
        return failWith("the softmax reduces over a dim that is not " +
                        keyUser + "'s");
      }
    }
    return failWith("the softmax's " + describe(reduce) +
                    " does not reduce the values it normalizes");
  };

  p = getOp<arith::TruncFOp>(p) ? p->operands[0] : p;
  // PyTorch's safe softmax: select(row of X all -inf, 0, softmax(X)),
  // which is fa's contract for a fully masked row.
  const Expr *safeCond = nullptr;
  if (getOp<arith::SelectOp>(p)) {
    std::optional<double> z = getConstFloat(p->operands[1]);
    if (z && *z == 0.0 && isSoftmaxLike(p->operands[2])) {
      safeCond = p->operands[0];
      p = p->operands[2];
    }
  }
  // A reduction over a dim of another size is another softmax, even where
  // the indices cannot tell (a unit dim is read at 0 everywhere).
  auto sameExtent = [&](unsigned reduced) {
    int64_t a = tracer.getDimSize(reduced), b = tracer.getDimSize(key);
    return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
  };
  if (p->kind == ExprKind::Softmax) {
    if (!sameExtent(p->dim))
      return failWith("the softmax normalizes a dim of another size than " +
                      keyUser + "'s");
    if (p->index != keyExpr) {
      auto d = dyn_cast<AffineDimExpr>(p->index);
      int from = d ? positionOf(d.getPosition()) : -1;
      if (from < 0)
        return failWith("the softmax does not normalize over the dim " +
                        keyUser + " uses");
      return failWith(llvm::formatv("the softmax reduces over dim {0} of P, "
                                    "{1} over dim {2}",
                                    from, keyUser, positionOf(key)));
    }
    x = tracer.substitute(p->operands[0], p->dim, keyExpr);
    return success();
  }

  // P = E / sum or E * (1 / sum).
  const Expr *e = nullptr, *sum = nullptr;
  if (getOp<arith::DivFOp>(p)) {
    e = p->operands[0];
    sum = p->operands[1];
  } else if (getOp<arith::MulFOp>(p)) {
    for (unsigned i = 0; i < 2 && !e; ++i) {
      const Expr *r = p->operands[1 - i];
      std::optional<double> one = getOp<arith::DivFOp>(r)
                                      ? getConstFloat(r->operands[0])
                                      : std::nullopt;
      if (one && *one == 1.0) {
        e = p->operands[i];
        sum = r->operands[1];
      }
    }
  }
  if (!e) {
    if (llvm::any_of(p->operands, isSoftmaxLike))
      return failWith("P applies " + describe(p) + " to the softmax" +
                      (keyUser == "the P.V contraction"
                           ? " before the P.V contraction"
                           : ""));
    return failWith("P is not a softmax: it is " + describe(p));
  }
  if (sum->kind != ExprKind::Reduce || !isa<arith::AddFOp>(sum->op))
    return failWith("the softmax denominator is not a sum: it is " +
                    describe(sum));
  std::optional<double> zero = getConstFloat(sum->operands[0]);
  if (!zero || *zero != 0.0)
    return failWith("the softmax sum does not start from zero");
  if (!sameExtent(sum->dim) ||
      !isEqual(tracer, tracer.substitute(sum->operands[1], sum->dim, keyExpr),
               e))
    return wrongDim(sum, e);

  // E = exp(X - max).
  if (!getOp<math::ExpOp>(e))
    return failWith("the softmax numerator is not an exponential: it is " +
                    describe(e));
  const Expr *diff = e->operands[0];
  if (!getOp<arith::SubFOp>(diff))
    return failWith("the softmax does not subtract the row max before the "
                    "exponential");
  x = diff->operands[0];
  const Expr *max = diff->operands[1];
  if (max->kind != ExprKind::Reduce ||
      !isa<arith::MaximumFOp, arith::MaxNumFOp>(max->op))
    return failWith("the softmax subtracts " + describe(max) +
                    ", not a row max");
  std::optional<double> init = getConstFloat(max->operands[0]);
  bool initOk = init && ((std::isinf(*init) && *init < 0) ||
                         (std::isnan(*init) && isa<arith::MaxNumFOp>(max->op)));
  if (!initOk)
    return failWith("the row max does not start from -inf");
  if (!sameExtent(max->dim) ||
      !isEqual(tracer, tracer.substitute(max->operands[1], max->dim, keyExpr),
               x))
    return wrongDim(max, x);
  if (safeCond && !isRowAllNegInf(safeCond, x, key))
    return failWith("P selects between the softmax and zero on a condition "
                    "that is not \"the row is all -inf\"");
  return success();
}

/// `e` as not(inner): xori(inner, true) or cmpi eq(inner, false).
static const Expr *getNegated(const Expr *e) {
  if (!e->type.isInteger(1))
    return nullptr;
  if (getOp<arith::XOrIOp>(e) || getOp<arith::CmpIOp>(e)) {
    auto cmp = getOp<arith::CmpIOp>(e);
    if (cmp && cmp.getPredicate() != arith::CmpIPredicate::eq)
      return nullptr;
    int64_t want = cmp ? 0 : 1;
    for (unsigned i = 0; i < 2; ++i)
      if (std::optional<int64_t> c = getConstInt(e->operands[1 - i]);
          c && *c == want && e->operands[i]->type.isInteger(1))
        return e->operands[i];
  }
  return nullptr;
}

bool MatcherBase::isRowAllNegInf(const Expr *c, const Expr *x, unsigned key) {
  // not(or_k(not(X[k] == -inf))), the way PyTorch decomposes it.
  const Expr *any = getNegated(c);
  if (!any || any->kind != ExprKind::Reduce || !isa<arith::OrIOp>(any->op))
    return false;
  std::optional<int64_t> init = getConstInt(any->operands[0]);
  if (!init || *init != 0)
    return false;
  const Expr *notInf = getNegated(
      tracer.substitute(any->operands[1], any->dim, tracer.getDim(key)));
  if (!notInf)
    return false;
  auto cmp = getOp<arith::CmpFOp>(notInf);
  if (!cmp || cmp.getPredicate() != arith::CmpFPredicate::OEQ)
    return false;
  std::optional<double> inf = getConstFloat(notInf->operands[1]);
  return inf && std::isinf(*inf) && *inf < 0 &&
         isEqual(tracer, stripFloatCasts(notInf->operands[0]),
                 stripFloatCasts(x));
}

LogicalResult AttentionMatcher::decomposeScores(const Expr *x, ScoreForm &f) {
  // Walks from the softmax input down to the scores; the ops met on the
  // way become the scale, keeps and biases. `outer` is the product of the
  // constant factors met so far: what a bias found further in is scaled by.
  double outer = 1.0;
  // A finite fill removes a key only while nothing is added to it: no bias
  // may be added after a select's finite fill (found before it on this
  // walk from the outside in), and no other bias may come with an additive
  // finite 0 / fill term.
  bool finiteAdditiveFill = false;
  auto addKeep = [&](const Expr *cond, bool negate,
                     const Expr *fill) -> LogicalResult {
    if (outer < 0)
      return failWith("a mask is applied before a negative scale");
    std::optional<double> v = getConstFloat(fill);
    if (v && std::isfinite(*v) && !f.biases.empty())
      return failWith("a bias is added after a finite mask fill, which it "
                      "can undo");
    f.keeps.push_back({cond, negate});
    return success();
  };
  while (true) {
    if (x->kind == ExprKind::Read) {
      if (!isContraction(x->value.getDefiningOp()))
        return failWith("the softmax input is not computed from a Q.K^T "
                        "contraction");
      f.scores = x;
      f.scale = outer;
      if (f.softcap && (!std::isfinite(static_cast<float>(*f.softcap)) ||
                        static_cast<float>(*f.softcap) <= 0.0f))
        return failWith("the softcap is not a positive finite f32");
      if (finiteAdditiveFill && !f.biases.empty())
        return failWith("a bias is added with a finite additive mask fill, "
                        "which it can undo");
      return success();
    }
    if (x->kind != ExprKind::Op)
      return failWith("the softmax input is " + describe(x) +
                      ", not computed from the scores");
    Operation *op = x->op;
    if (isa<arith::ExtFOp, arith::TruncFOp>(op)) {
      x = x->operands[0];
      continue;
    }
    if (isa<arith::MulFOp, arith::DivFOp>(op)) {
      bool isDiv = isa<arith::DivFOp>(op);
      int si = -1;
      for (int i = 0; i < 2; ++i)
        if (readsContraction(x->operands[i]))
          si = si < 0 ? i : 2;
      if (si < 0 || si == 2)
        return failWith("the scores are multiplied by themselves");
      if (isDiv && si == 1)
        return failWith("the scores divide a value");
      const Expr *other = x->operands[1 - si];
      std::optional<double> c = getConstFloat(other);
      if (!c) {
        llvm::SmallSetVector<unsigned, 8> dims;
        collectDims(other, dims);
        return failWith(dims.empty()
                            ? "the scale is not a constant"
                            : "the scores are multiplied elementwise by a "
                              "tensor, not by a constant scale");
      }
      double factor = isDiv ? 1.0 / *c : *c;
      if (!std::isfinite(factor) || factor == 0.0)
        return failWith("the scale is zero or not finite");
      outer *= factor;
      x = x->operands[si];
      continue;
    }
    if (isa<math::TanhOp>(op)) {
      // P_out * tanh(P_in * S) is the softcap c = |P_out| of the scores
      // scaled by P_out * P_in (tanh is odd); nothing but constant factors
      // may come between the tanh and the scores.
      if (f.softcap)
        return failWith("the scores go through two tanh");
      f.softcap = std::fabs(outer);
      x = x->operands[0];
      continue;
    }
    if (f.softcap && isa<arith::AddFOp, arith::SubFOp, arith::SelectOp>(op))
      return failWith("the scores are biased or masked inside the softcap's "
                      "tanh (fa.attention applies the softcap first)");
    if (isa<arith::AddFOp, arith::SubFOp>(op)) {
      bool s0 = readsContraction(x->operands[0]);
      bool s1 = readsContraction(x->operands[1]);
      if (s0 == s1)
        return failWith(s0 ? "the scores are added to themselves"
                           : "the softmax input does not read the scores");
      bool isSub = isa<arith::SubFOp>(op);
      if (isSub && s1)
        return failWith("the scores are subtracted from a value");
      const Expr *bias = x->operands[s0 ? 1 : 0];
      x = x->operands[s0 ? 0 : 1];
      // A 0 / -inf bias removes keys: keeps.
      if (!isSub) {
        SmallVector<Keep> zeroFill;
        bool finite = false;
        if (collectZeroFillKeeps(bias, outer, zeroFill, finite)) {
          finiteAdditiveFill |= finite;
          f.keeps.append(zeroFill.begin(), zeroFill.end());
          continue;
        }
      }
      f.biases.push_back({bias, isSub ? -outer : outer});
      continue;
    }
    if (isa<arith::SelectOp>(op)) {
      const Expr *cond = x->operands[0];
      if (readsContraction(cond))
        return failWith("a mask condition depends on the scores");
      bool t = readsContraction(x->operands[1]);
      bool e = readsContraction(x->operands[2]);
      if (t && !e && isMaskFill(x->operands[2], outer)) {
        if (failed(addKeep(cond, false, x->operands[2])))
          return failure();
        x = x->operands[1];
        continue;
      }
      if (e && !t && isMaskFill(x->operands[1], outer)) {
        if (failed(addKeep(cond, true, x->operands[1])))
          return failure();
        x = x->operands[2];
        continue;
      }
      return failWith("a select on the scores fills with neither -inf nor a "
                      "value <= -1e4");
    }
    return failWith("the scores go through " + describe(x) +
                    " before the softmax");
  }
}

std::optional<SmallVector<int>> AttentionMatcher::slotsOf(const Expr *leaf,
                                                          int64_t &group) {
  SmallVector<int> slots;
  auto type = cast<RankedTensorType>(leaf->value.getType());
  for (auto [i, e] : llvm::enumerate(leaf->indices)) {
    if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      if (c.getValue() != 0 || type.getDimSize(i) != 1)
        return std::nullopt;
      slots.push_back(kUnit);
      continue;
    }
    // A tensor larger than the range it is read over (K with more heads or
    // keys than the chain reads) is not an fa.attention operand.
    auto sizeMatches = [&](int64_t want) {
      int64_t have = type.getDimSize(i);
      return ShapedType::isDynamic(have) || ShapedType::isDynamic(want) ||
             have == want;
    };
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (!sizeMatches(tracer.getDimSize(d.getPosition())))
        return std::nullopt;
      slots.push_back(d.getPosition());
      continue;
    }
    // h floordiv g for the heads of K and V.
    auto bin = dyn_cast<AffineBinaryOpExpr>(e);
    if (bin && bin.getKind() == AffineExprKind::FloorDiv && !batch.empty() &&
        bin.getLHS() == tracer.getDim(batch.back())) {
      auto g = dyn_cast<AffineConstantExpr>(bin.getRHS());
      int64_t hq = tracer.getDimSize(batch.back());
      if (g && g.getValue() > 1 && (group == 1 || group == g.getValue()) &&
          !ShapedType::isDynamic(hq) && hq % g.getValue() == 0 &&
          sizeMatches(hq / g.getValue())) {
        group = g.getValue();
        slots.push_back(kKvHead);
        continue;
      }
    }
    return std::nullopt;
  }
  // Every slot once.
  SmallVector<int> sorted;
  for (int s : slots)
    if (s != kUnit)
      sorted.push_back(s);
  llvm::sort(sorted);
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return std::nullopt;
  return slots;
}

LogicalResult AttentionMatcher::assignRoles() {
  llvm::SmallSetVector<unsigned, 8> qd, kd, vd;
  collectDims(qLeaf, qd);
  collectDims(kLeaf, kd);
  collectDims(vLeaf, vd);
  // Dims of size 1 have no role: they are read at 0 everywhere. A role of
  // size 1 (one query, one batch) is a unit dim of the fa.attention
  // operands.
  for (auto [i, size] : llvm::enumerate(anchorShape)) {
    if (size == 1)
      continue;
    bool inQ = qd.contains(i), inK = kd.contains(i), inV = vd.contains(i);
    if (inQ && inK && inV) {
      batch.push_back(i);
    } else if (inQ && !inK && !inV && queryDim == kUnit) {
      queryDim = i;
    } else if (inV && !inQ && !inK && valueDim == kUnit) {
      valueDim = i;
    } else {
      return failWith(llvm::formatv(
          "dim {0} of the result is not a batch, query or value dim", i));
    }
  }
  if (batch.size() > 2)
    return failWith("more than two batch dims");
  auto check = [&](const Expr *leaf, ArrayRef<unsigned> roles, StringRef name,
                   int64_t &g) -> LogicalResult {
    g = 1;
    std::optional<SmallVector<int>> slots = slotsOf(leaf, g);
    if (!slots)
      return failWith(name + " is read in a way fa.attention cannot express "
                             "(not a permutation of its dims)");
    SmallVector<int> want;
    for (int s : *slots)
      if (s != kUnit)
        want.push_back(s == kKvHead ? batch.back() : s);
    SmallVector<int> expected(roles.begin(), roles.end());
    llvm::sort(want);
    llvm::sort(expected);
    if (want != expected)
      return failWith(name + " does not hold exactly the batch, sequence and "
                             "head dims");
    return success();
  };
  SmallVector<unsigned> qRoles(batch), kRoles(batch), vRoles(batch);
  for (int d : {queryDim, slot(qkDim)})
    if (d != kUnit)
      qRoles.push_back(d);
  for (int d : {slot(keyDim), slot(qkDim)})
    if (d != kUnit)
      kRoles.push_back(d);
  for (int d : {slot(keyDim), valueDim})
    if (d != kUnit)
      vRoles.push_back(d);
  // GQA only over the second batch dim, the heads; K and V agree.
  int64_t qGroup, kGroup, vGroup;
  if (failed(check(qLeaf, qRoles, "Q", qGroup)) ||
      failed(check(kLeaf, kRoles, "K", kGroup)) ||
      failed(check(vLeaf, vRoles, "V", vGroup)))
    return failure();
  if (qGroup != 1)
    return failWith("Q reads its heads through a division");
  if (kGroup != vGroup)
    return failWith("K and V map query heads to different key/value heads");
  group = kGroup;
  if (group > 1) {
    // K's head dim holds exactly Hq / group heads.
    int64_t g = 1;
    SmallVector<int> slots = *slotsOf(kLeaf, g);
    int64_t hkv = cast<RankedTensorType>(kLeaf->value.getType())
                      .getDimSize(llvm::find(slots, kKvHead) - slots.begin());
    if (anchorShape[batch.back()] % group != 0 ||
        hkv != anchorShape[batch.back()] / group)
      return failWith("K/V have a head count that does not match the query "
                      "heads' grouping");
  }

  // Two batch dims are [B, H]; one is B*H, or H when K/V read it through
  // a division (GQA).
  if (batch.size() == 2) {
    batchDim = batch[0];
    headDim = batch[1];
  } else if (batch.size() == 1) {
    // [1, H, N, D] with B = 1 keeps its layout: the one batch dim after a
    // unit dim is the heads.
    bool afterUnit =
        llvm::any_of(llvm::seq<unsigned>(0, batch[0]),
                     [&](unsigned i) { return anchorShape[i] == 1; });
    (group > 1 || afterUnit ? headDim : batchDim) = batch[0];
  }

  Type elt = qLeaf->type;
  if (!isSupportedFloat(elt) || kLeaf->type != elt || vLeaf->type != elt)
    return failWith("Q, K and V are not all f32, all f16 or all bf16");
  if (getElementTypeOrSelf(anchor.getType()) != elt)
    return failWith("the result's element type differs from Q's");
  if (tracer.getDimSize(qkDim) == ShapedType::kDynamic ||
      (valueDim != kUnit && anchorShape[valueDim] == ShapedType::kDynamic) ||
      (headDim != kUnit && anchorShape[headDim] == ShapedType::kDynamic))
    return failWith("head dims and head counts must be static");
  return success();
}

LogicalResult AttentionMatcher::classifyMasks() {
  llvm::SmallSetVector<unsigned, 8> allowed;
  allowed.insert(batch.begin(), batch.end());
  if (queryDim != kUnit)
    allowed.insert(queryDim);
  allowed.insert(keyDim);
  auto checkDims = [&](const Expr *e) -> LogicalResult {
    llvm::SmallSetVector<unsigned, 8> dims;
    collectDims(e, dims);
    for (unsigned d : dims)
      if (!allowed.contains(d))
        return failWith("a mask depends on a dim other than batch, heads, "
                        "queries and keys");
    return success();
  };
  auto checkBuildable = [&](const Expr *e) -> LogicalResult {
    if (!canMaterialize(e))
      return failWith("a mask is computed in a way the raising cannot "
                      "rebuild");
    return success();
  };
  for (Keep k : form.keeps) {
    // not(not(x)) is x: masked_fill(~mask, -inf) keeps where mask is true.
    while (const Expr *inner = getNegated(k.cond)) {
      k.cond = inner;
      k.negate = !k.negate;
    }
    if (!k.cond->type.isInteger(1))
      return failWith("a mask condition is not an i1");
    if (failed(checkDims(k.cond)))
      return failure();
    // A conjunction of bounds k <= q + c and k >= q + c is causality or a
    // window (placePositions); anything else is a boolean mask.
    std::optional<SmallVector<LinearForm>> cs =
        getConstraints(tracer, k.cond, k.negate);
    std::optional<int64_t> upper = upperOff, lower = lowerOff;
    bool bounds = cs.has_value(), qkOnly = true;
    if (cs)
      for (const LinearForm &c : *cs)
        bounds &= addBound(c, upper, lower, qkOnly);
    if (bounds) {
      upperOff = upper;
      lowerOff = lower;
      boundKeeps.push_back(k);
      continue;
    }
    if (cs && qkOnly)
      maskNote = "an index comparison of the query and key positions is "
                 "not a bound k <= q + c or k >= q + c; it is raised as a "
                 "boolean mask";
    if (failed(checkBuildable(k.cond)))
      return failure();
    maskKeeps.push_back(k);
  }
  // One bias may be ALiBi.
  for (auto [i, b] : llvm::enumerate(form.biases)) {
    if (!matchAlibi(b))
      continue;
    form.biases.erase(form.biases.begin() + i);
    break;
  }
  placePositions();
  for (const Bias &b : form.biases) {
    if (failed(checkDims(b.value)) || failed(checkBuildable(b.value)))
      return failure();
    if (!isSupportedFloat(b.value->type))
      return failWith("an additive mask is not f32, f16 or bf16");
    if (b.value->type != form.biases.front().value->type)
      return failWith("additive masks of different element types");
  }
  return success();
}

bool AttentionMatcher::addBound(const LinearForm &c,
                                std::optional<int64_t> &upper,
                                std::optional<int64_t> &lower, bool &qkOnly) {
  bool trivial = llvm::all_of(c.coef, [](auto p) { return p.second == 0; });
  if (trivial)
    return c.constant <= 0; // always true; never true is not a window
  qkOnly &= llvm::all_of(c.coef, [&](auto p) {
    return p.second == 0 || p.first == keyDim || int(p.first) == queryDim;
  });
  if (!qkOnly)
    return false;
  // a*k - a*q + c0 <= 0. With one query, q is 0 and absent from the form.
  int64_t a = c.coef.lookup(keyDim);
  int64_t aq = queryDim == kUnit ? -a : c.coef.lookup(queryDim);
  if (a == 0 || aq != -a)
    return false;
  if (a > 0) {
    // k - q <= floor(-c0 / a).
    int64_t u = llvm::divideFloorSigned(-c.constant, a);
    upper = upper ? std::min(*upper, u) : u;
  } else {
    // q - k <= floor(-c0 / -a).
    int64_t l = -llvm::divideFloorSigned(-c.constant, -a);
    lower = lower ? std::max(*lower, l) : l;
  }
  return true;
}

/// Splits `e` into a constant factor and a product of other factors,
/// through multiplications, negations, divisions by constants and
/// conversions.
static bool collectFactors(const Expr *e, double &coef,
                           SmallVectorImpl<const Expr *> &factors) {
  if (std::optional<double> c = getConstFloat(e)) {
    coef *= *c;
    return true;
  }
  if (std::optional<int64_t> c = getConstInt(e);
      c && !e->type.isInteger(1)) {
    coef *= double(*c);
    return true;
  }
  if (getOp<arith::MulFOp>(e) || getOp<arith::MulIOp>(e))
    return collectFactors(e->operands[0], coef, factors) &&
           collectFactors(e->operands[1], coef, factors);
  if (getOp<arith::NegFOp>(e)) {
    coef = -coef;
    return collectFactors(e->operands[0], coef, factors);
  }
  if (getOp<arith::DivFOp>(e))
    if (std::optional<double> c = getConstFloat(e->operands[1]);
        c && *c != 0.0) {
      coef /= *c;
      return collectFactors(e->operands[0], coef, factors);
    }
  if (getOp<arith::ExtFOp>(e) || getOp<arith::TruncFOp>(e) ||
      getOp<arith::SIToFPOp>(e) || getOp<arith::ExtSIOp>(e) ||
      getOp<arith::IndexCastOp>(e))
    return collectFactors(e->operands[0], coef, factors);
  factors.push_back(e);
  return true;
}

/// Whether `e` is computed from loop indices and constants only.
static bool isIndexArithmetic(const Expr *e) {
  if (e->kind == ExprKind::Index || e->kind == ExprKind::Const)
    return true;
  if (e->kind != ExprKind::Op)
    return false;
  return llvm::all_of(e->operands, isIndexArithmetic);
}

/// The integer linear form of `e`, looking through signed int-to-float
/// conversions.
static std::optional<LinearForm> getIntLinearForm(Tracer &tracer,
                                                  const Expr *e) {
  while (getOp<arith::SIToFPOp>(e) || getOp<arith::ExtFOp>(e))
    e = e->operands[0];
  return getLinearForm(tracer, e);
}

bool AttentionMatcher::matchAlibi(const Bias &bias) {
  if (alibi)
    return false;
  Alibi a;
  a.bias = bias;
  a.coef = bias.factor;
  SmallVector<const Expr *> factors;
  if (!collectFactors(bias.value, a.coef, factors))
    return false;
  const Expr *distance = nullptr;
  for (const Expr *f : factors) {
    llvm::SmallSetVector<unsigned, 8> dims;
    collectDims(f, dims);
    bool positions = dims.contains(keyDim) ||
                     (queryDim != kUnit && dims.contains(queryDim));
    bool perHead = llvm::all_of(dims, [&](unsigned d) {
      return int(d) == batchDim || int(d) == headDim;
    });
    if (perHead && isa<FloatType>(f->type) && canMaterialize(f)) {
      a.slopeFactors.push_back(f);
    } else if (positions && !distance && isIndexArithmetic(f) &&
               llvm::all_of(dims, [&](unsigned d) {
                 return d == keyDim || int(d) == queryDim;
               })) {
      distance = f;
    } else {
      if (positions && isIndexArithmetic(f))
        maskNote = "a bias computed from the query and key positions is "
                   "not ALiBi's -slope * |q + c - k|; it is raised as an "
                   "additive mask";
      return false;
    }
  }
  if (!distance)
    return false;
  // The distance: |a*k - a*q + c0| = |a| * |q + off - k| with off = -c0 / a,
  // or, without the absolute value, -a * (q + off - k).
  const Expr *inner = getAbsOperand(tracer, distance);
  std::optional<LinearForm> l =
      getIntLinearForm(tracer, inner ? inner : distance);
  auto notAlibi = [&] {
    maskNote = "a bias computed from the query and key positions is not "
               "ALiBi's -slope * |q + c - k|; it is raised as an additive "
               "mask";
    return false;
  };
  if (!l)
    return notAlibi();
  int64_t ak = l->coef.lookup(keyDim);
  int64_t aq = queryDim == kUnit ? -ak : l->coef.lookup(queryDim);
  bool other = llvm::any_of(l->coef, [&](auto p) {
    return p.second != 0 && p.first != keyDim && int(p.first) != queryDim;
  });
  if (ak == 0 || aq != -ak || other || l->constant % ak != 0)
    return notAlibi();
  a.off = -l->constant / ak;
  a.isSigned = inner == nullptr;
  // bias = coef * slopes * |ak| * |q + off - k|, or coef * slopes * -ak *
  // (q + off - k); fa adds -slope * |q + off - k|.
  a.coef *= a.isSigned ? double(ak) : -double(std::abs(ak));
  alibi = a;
  return true;
}

void AttentionMatcher::placePositions() {
  int64_t nq = queryDim == kUnit ? 1 : anchorShape[queryDim];
  int64_t nk = tracer.getDimSize(keyDim);
  bool isStatic = !ShapedType::isDynamic(nq) && !ShapedType::isDynamic(nk);
  auto fits = [&](int64_t off) {
    return (!upperOff || *upperOff >= off) && (!lowerOff || off >= *lowerOff);
  };
  // ALiBi's offset is the position offset of everything else; a signed
  // ALiBi is ALiBi only where causality keeps k <= q + off.
  if (alibi && (!fits(alibi->off) ||
                (alibi->isSigned && (!upperOff || *upperOff != alibi->off)))) {
    form.biases.push_back(alibi->bias);
    alibi.reset();
  }
  if (upperOff && lowerOff && *upperOff < *lowerOff) {
    // No key is kept: not a window; the mask says so.
    maskNote = "the window bounds keep no key; they are raised as a boolean "
               "mask";
    maskKeeps.append(boundKeeps.begin(), boundKeeps.end());
    boundKeeps.clear();
    upperOff.reset();
    lowerOff.reset();
    if (alibi && alibi->isSigned) {
      form.biases.push_back(alibi->bias);
      alibi.reset();
    }
  }
  std::optional<int64_t> off;
  if (alibi)
    off = alibi->off;
  else if (upperOff && lowerOff && *lowerOff <= 0 && *upperOff >= 0 &&
           *upperOff != 0 && !(isStatic && *upperOff == nk - nq))
    off = 0; // a window around the diagonal: window(L, R)
  else if (upperOff)
    off = *upperOff;
  else if (lowerOff)
    off = *lowerOff;
  if (!off)
    return;
  // Causality where the upper bound is the diagonal itself.
  bool useCausal = upperOff && *upperOff == *off;
  int64_t alignment = 0;
  if (useCausal) {
    causal = CausalKind::top_left;
    if (*off != 0 && isStatic && *off == nk - nq) {
      causal = CausalKind::bottom_right;
      alignment = nk - nq;
    }
  }
  qOffset = *off - alignment;
  if (lowerOff || (upperOff && !useCausal))
    window = {lowerOff ? *off - *lowerOff : -1,
              upperOff && !useCausal ? *upperOff - *off : -1};
}

LogicalResult MatcherBase::checkUses(ArrayRef<Operation *> roots,
                                     Operation *anchorOp, StringRef rootName,
                                     StringRef laterName) {
  const llvm::SetVector<Operation *> &visited = tracer.getVisited();
  llvm::SetVector<Operation *> chain;
  chain.insert(roots.begin(), roots.end());
  for (unsigned i = 0; i < chain.size(); ++i)
    if (chain[i] != anchorOp)
      for (Operation *user : chain[i]->getUsers())
        if (visited.contains(user))
          chain.insert(user);
  for (Operation *op : chain) {
    if (op == anchorOp)
      continue;
    for (Operation *user : op->getUsers())
      if (!chain.contains(user) && !isa<tensor::DimOp>(user))
        return failWith(llvm::formatv(
            "{0} ({1}) {2} also used by {3}",
            llvm::is_contained(roots, op) ? rootName : laterName,
            op->getName().getStringRef(),
            llvm::is_contained(roots, op) ? "are" : "is", user->getName()));
  }
  if (!chain.contains(anchorOp))
    return failWith("the chain's ops do not reach its result");
  chainOps = chain.takeVector();
  return success();
}

void MatcherBase::redirectDims(RewriterBase &rewriter) {
  for (Operation *op : chainOps) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(op);
    if (!dps)
      continue;
    for (OpResult r : op->getResults())
      for (OpOperand &use : llvm::make_early_inc_range(r.getUses()))
        if (auto dim = dyn_cast<tensor::DimOp>(use.getOwner()))
          rewriter.modifyOpInPlace(dim, [&] {
            use.set(dps.getDpsInitOperand(r.getResultNumber())->get());
          });
  }
}

std::optional<AffineMap>
AttentionMatcher::loopMap(ArrayRef<AffineExpr> indices) {
  // Loops of the mask: b0, b1, q, k.
  MLIRContext *ctx = pv->getContext();
  SmallVector<AffineExpr> repl(tracer.getNumDims(),
                               getAffineConstantExpr(0, ctx));
  SmallVector<bool> ok(tracer.getNumDims(), false);
  auto setLoop = [&](unsigned d, unsigned loop) {
    repl[d] = getAffineDimExpr(loop, ctx);
    ok[d] = true;
  };
  if (batchDim != kUnit)
    setLoop(batchDim, 0);
  if (headDim != kUnit)
    setLoop(headDim, 1);
  if (queryDim != kUnit)
    setLoop(queryDim, 2);
  setLoop(keyDim, 3);
  SmallVector<AffineExpr> out;
  for (AffineExpr e : indices) {
    bool bad = false;
    e.walk([&](AffineExpr x) {
      if (auto d = dyn_cast<AffineDimExpr>(x))
        bad |= !ok[d.getPosition()];
    });
    if (bad)
      return std::nullopt;
    out.push_back(e.replaceDims(repl));
  }
  AffineMap map = AffineMap::get(4, 0, out, ctx);
  if (!map.isProjectedPermutation(/*allowZeroInResults=*/true))
    return std::nullopt;
  return map;
}

bool AttentionMatcher::canMaterialize(const Expr *e) {
  if (e->kind == ExprKind::Read)
    return loopMap(e->indices).has_value();
  if (e->originTensor && e->kind != ExprKind::Const &&
      loopMap(e->originIndices))
    return true;
  switch (e->kind) {
  case ExprKind::Const:
  case ExprKind::Scalar:
    return true;
  case ExprKind::Index:
    return isa<AffineConstantExpr>(e->index) ||
           (isa<AffineDimExpr>(e->index) && loopMap({e->index}).has_value());
  case ExprKind::Op:
    // Ops on whole tensors are only read, never rebuilt.
    return !isa<ShapedType>(e->op->getResult(0).getType()) &&
           llvm::all_of(e->operands,
                        [&](const Expr *o) { return canMaterialize(o); });
  default:
    return false;
  }
}

Value AttentionMatcher::emitElement(OpBuilder &b, Location loc, const Expr *e,
                                    SmallVectorImpl<Value> &inputs,
                                    SmallVectorImpl<AffineMap> &maps,
                                    Block *body,
                                    llvm::DenseMap<const Expr *, Value> &done) {
  auto asInput = [&](Value tensor, ArrayRef<AffineExpr> indices) {
    std::optional<AffineMap> map = loopMap(indices);
    for (auto [i, in] : llvm::enumerate(inputs))
      if (in == tensor && maps[i] == *map)
        return body->getArgument(i);
    inputs.push_back(tensor);
    maps.push_back(*map);
    return body->insertArgument(inputs.size() - 1,
                                getElementTypeOrSelf(tensor.getType()), loc);
  };
  if (e->kind == ExprKind::Read)
    return asInput(e->value, e->indices);
  if (e->originTensor && e->kind != ExprKind::Const &&
      loopMap(e->originIndices))
    return asInput(e->originTensor, e->originIndices);
  switch (e->kind) {
  case ExprKind::Const:
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(e->constant));
  case ExprKind::Scalar:
    return e->value;
  case ExprKind::Index: {
    if (auto c = dyn_cast<AffineConstantExpr>(e->index))
      return arith::ConstantIndexOp::create(b, loc, c.getValue());
    std::optional<AffineMap> m = loopMap({e->index});
    return linalg::IndexOp::create(
        b, loc, cast<AffineDimExpr>(m->getResult(0)).getPosition());
  }
  case ExprKind::Op: {
    // A value the expression uses twice is built once.
    if (Value known = done.lookup(e))
      return known;
    IRMapping mapping;
    for (auto [operand, oe] : llvm::zip(e->op->getOperands(), e->operands))
      mapping.map(operand, emitElement(b, loc, oe, inputs, maps, body, done));
    Value v = b.clone(*e->op, mapping)->getResult(0);
    done[e] = v;
    return v;
  }
  default:
    llvm_unreachable("checked by canMaterialize");
  }
}

Value AttentionMatcher::materializeMask(OpBuilder &b, Location loc, Value q4,
                                        Value k4) {
  if (maskKeeps.empty() && form.biases.empty())
    return {};
  MLIRContext *ctx = b.getContext();
  // Direct: one keep or one unscaled bias that is a plain tensor read.
  auto direct = [&](const Expr *e) -> Value {
    if (e->kind != ExprKind::Read)
      return {};
    int64_t g = 1;
    std::optional<SmallVector<int>> slots = slotsOf(e, g);
    if (!slots || g != 1)
      return {};
    SmallVector<int> dst;
    auto use = [&](int d) { return llvm::is_contained(*slots, d) ? d : kUnit; };
    dst.push_back(batchDim == kUnit ? kUnit : use(batchDim));
    dst.push_back(headDim == kUnit ? kUnit : use(headDim));
    dst.push_back(queryDim == kUnit ? kUnit : use(queryDim));
    dst.push_back(slot(keyDim) == kUnit ? kUnit : use(keyDim));
    // Queries and keys must be there; a mask broadcast over them is
    // materialized instead.
    if ((dst[2] == kUnit && queryDim != kUnit) ||
        (dst[3] == kUnit && slot(keyDim) != kUnit))
      return {};
    return reshapeTranspose(b, loc, e->value, *slots, dst);
  };
  if (maskKeeps.size() == 1 && form.biases.empty() && !maskKeeps[0].negate)
    if (Value v = direct(maskKeeps[0].cond))
      return v;
  if (maskKeeps.empty() && form.biases.size() == 1 &&
      form.biases[0].factor == 1.0)
    if (Value v = direct(form.biases[0].value))
      return v;

  // Materialize [B or 1, H or 1, Nq, Nk].
  llvm::SmallSetVector<unsigned, 8> used;
  for (const Keep &k : maskKeeps)
    collectDims(k.cond, used);
  for (const Bias &bias : form.biases)
    collectDims(bias.value, used);
  // A bias that is scaled, or one of several, is built in f32: the chain
  // multiplied or added it in a wider type than its own (an f16 bias of
  // 4096 scaled by 16 is +inf in f16).
  bool rebuilt = form.biases.size() > 1 ||
                 llvm::any_of(form.biases,
                              [](const Bias &bb) { return bb.factor != 1.0; });
  Type elt = form.biases.empty() ? Type(b.getI1Type())
             : rebuilt           ? Type(b.getF32Type())
                                 : form.biases.front().value->type;
  SmallVector<OpFoldResult> sizes;
  auto size = [&](Value ref, int64_t d) {
    return tensor::getMixedSize(b, loc, ref, d);
  };
  sizes.push_back(batchDim != kUnit && used.contains(batchDim)
                      ? size(q4, 0)
                      : OpFoldResult(b.getIndexAttr(1)));
  sizes.push_back(headDim != kUnit && used.contains(headDim)
                      ? size(q4, 1)
                      : OpFoldResult(b.getIndexAttr(1)));
  sizes.push_back(size(q4, 2));
  sizes.push_back(size(k4, 2));
  Value init = tensor::EmptyOp::create(b, loc, sizes, elt);

  // Build the body in a detached block, then move it into the generic.
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  auto block = std::make_unique<Block>();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(block.get());
  llvm::DenseMap<const Expr *, Value> done;
  Value keep;
  for (const Keep &k : maskKeeps) {
    Value c = emitElement(b, loc, k.cond, inputs, maps, block.get(), done);
    if (k.negate)
      c = arith::XOrIOp::create(
          b, loc, c, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
    keep = keep ? arith::AndIOp::create(b, loc, keep, c).getResult() : c;
  }
  Value sum;
  for (const Bias &bias : form.biases) {
    Value v = emitElement(b, loc, bias.value, inputs, maps, block.get(), done);
    if (v.getType() != elt)
      v = arith::ExtFOp::create(b, loc, elt, v);
    if (bias.factor != 1.0)
      v = arith::MulFOp::create(
          b, loc, v,
          arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, bias.factor)));
    sum = sum ? arith::AddFOp::create(b, loc, sum, v).getResult() : v;
  }
  Value result = keep;
  if (sum) {
    result = sum;
    if (keep) {
      Value ninf = arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(elt, -std::numeric_limits<double>::infinity()));
      result = arith::SelectOp::create(b, loc, keep, sum, ninf);
    }
  }
  linalg::YieldOp::create(b, loc, result);
  block->addArgument(elt, loc);

  b.setInsertionPoint(init.getDefiningOp()->getNextNode());
  maps.push_back(AffineMap::getMultiDimIdentityMap(4, ctx));
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(b, loc, init.getType(), inputs,
                                           ValueRange{init}, maps, iters);
  generic.getRegion().push_back(block.release());
  return generic.getResult(0);
}

Value AttentionMatcher::materializeSlopes(OpBuilder &b, Location loc,
                                         Value q4) {
  // fa's slopes: [Hq], or [B, Hq] when they depend on the batch.
  llvm::SmallSetVector<unsigned, 8> used;
  for (const Expr *f : alibi->slopeFactors)
    collectDims(f, used);
  bool perBatch = batchDim != kUnit && used.contains(batchDim);
  // Direct: the slopes tensor itself.
  if (alibi->coef == 1.0 && alibi->slopeFactors.size() == 1) {
    const Expr *e = alibi->slopeFactors.front();
    int64_t g = 1;
    std::optional<SmallVector<int>> slots =
        e->kind == ExprKind::Read ? slotsOf(e, g) : std::nullopt;
    if (slots && g == 1 && e->type.isF32()) {
      SmallVector<int> dst;
      if (perBatch)
        dst.push_back(batchDim);
      dst.push_back(headDim);
      return reshapeTranspose(b, loc, e->value, *slots, dst);
    }
  }
  // Built: [B or 1, Hq, 1, 1], then collapsed.
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  SmallVector<OpFoldResult> sizes = {
      perBatch ? tensor::getMixedSize(b, loc, q4, 0)
               : OpFoldResult(b.getIndexAttr(1)),
      tensor::getMixedSize(b, loc, q4, 1), b.getIndexAttr(1),
      b.getIndexAttr(1)};
  Value init = tensor::EmptyOp::create(b, loc, sizes, f32);
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  auto block = std::make_unique<Block>();
  Value slope;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(block.get());
    llvm::DenseMap<const Expr *, Value> done;
    slope = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(alibi->coef));
    for (const Expr *f : alibi->slopeFactors) {
      Value v = emitElement(b, loc, f, inputs, maps, block.get(), done);
      if (v.getType() != f32)
        v = arith::ExtFOp::create(b, loc, f32, v);
      slope = arith::MulFOp::create(b, loc, slope, v);
    }
    linalg::YieldOp::create(b, loc, slope);
  }
  block->addArgument(f32, loc);
  maps.push_back(AffineMap::getMultiDimIdentityMap(4, ctx));
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(b, loc, init.getType(), inputs,
                                           ValueRange{init}, maps, iters);
  generic.getRegion().push_back(block.release());
  SmallVector<ReassociationIndices> groups;
  if (perBatch)
    groups = {{0}, {1, 2, 3}};
  else
    groups = {{0, 1, 2, 3}};
  return tensor::CollapseShapeOp::create(b, loc, generic.getResult(0), groups);
}

void AttentionMatcher::rewrite(RewriterBase &rewriter) {
  redirectDims(rewriter);
  Operation *anchorOp = anchor.getDefiningOp();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(anchorOp);
  Location loc = pv->getLoc();

  int b0 = batchDim, h = headDim;
  int kvh = group > 1 ? kKvHead : h;
  auto operand = [&](const Expr *leaf, ArrayRef<int> dst) {
    int64_t g = 1;
    return reshapeTranspose(rewriter, loc, leaf->value, *slotsOf(leaf, g), dst);
  };
  Value q = operand(qLeaf, {b0, h, queryDim, slot(qkDim)});
  Value k = operand(kLeaf, {b0, kvh, slot(keyDim), slot(qkDim)});
  Value v = operand(vLeaf, {b0, kvh, slot(keyDim), valueDim});
  Value mask = materializeMask(rewriter, loc, q, k);

  Type elt = getElementTypeOrSelf(q.getType());
  SmallVector<OpFoldResult> outSizes = {
      tensor::getMixedSize(rewriter, loc, q, 0),
      tensor::getMixedSize(rewriter, loc, q, 1),
      tensor::getMixedSize(rewriter, loc, q, 2),
      tensor::getMixedSize(rewriter, loc, v, 3)};
  Value slopes = alibi ? materializeSlopes(rewriter, loc, q) : Value();
  Value qOffsetValue =
      qOffset != 0 ? arith::ConstantIndexOp::create(rewriter, loc, qOffset)
                         .getResult()
                   : Value();
  Value init = tensor::EmptyOp::create(rewriter, loc, outSizes, elt);
  auto attention = AttentionOp::create(
      rewriter, loc, TypeRange{init.getType()}, q, k, v, /*kv_lens=*/Value(),
      /*block_table=*/Value(), /*cu_seqlens_q=*/Value(),
      /*cu_seqlens_k=*/Value(), mask, slopes, /*q_segments=*/Value(), /*k_segments=*/Value(),
      qOffsetValue, /*block_mask=*/Value(), /*mod_operands=*/ValueRange(),
      init, /*lse=*/Value(),
      rewriter.getF32FloatAttr(static_cast<float>(form.scale)), causal,
      window ? rewriter.getDenseI64ArrayAttr({window->first, window->second})
             : DenseI64ArrayAttr(),
      form.softcap
          ? rewriter.getF32FloatAttr(static_cast<float>(*form.softcap))
          : FloatAttr(),
      /*chunk=*/IntegerAttr(), /*block_tiles=*/DenseI64ArrayAttr());
  SmallVector<int> anchorSlots;
  for (auto [i, s] : llvm::enumerate(anchorShape))
    anchorSlots.push_back(s == 1 ? kUnit : int(i));
  Value result = reshapeTranspose(rewriter, loc, attention.getResult(),
                                  {b0, h, queryDim, valueDim}, anchorSlots);
  if (result.getType() != anchor.getType())
    result = tensor::CastOp::create(rewriter, loc, anchor.getType(), result);
  rewriter.replaceOp(anchorOp, result);
}

//===----------------------------------------------------------------------===//
// The softmax matcher
//===----------------------------------------------------------------------===//

/// True for an elementwise op that only converts its one input's float type.
static bool isCastOp(Operation *op, Value input) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp.getNumDpsInputs() != 1 ||
      linalgOp.getDpsInputOperand(0)->get() != input ||
      linalgOp.getNumParallelLoops() != linalgOp.getNumLoops())
    return false;
  Block *body = linalgOp.getBlock();
  Operation *def = body->getTerminator()->getOperand(0).getDefiningOp();
  return def && def->getBlock() == body &&
         isa<arith::TruncFOp, arith::ExtFOp>(def) &&
         def->getOperand(0) == body->getArgument(0);
}

namespace {
class SoftmaxMatcher : public MatcherBase {
public:
  explicit SoftmaxMatcher(Operation *op)
      : MatcherBase(op->getContext()), op(op) {
    keyUser = "the candidate dim";
  }

  LogicalResult match();
  void rewrite(RewriterBase &rewriter);

private:
  Operation *op;
  Value input;
  int64_t dim = 0;
};
} // namespace

LogicalResult SoftmaxMatcher::match() {
  // The last op of a softmax chain: a division or multiplication (or a
  // cast of one), or linalg.softmax.
  if (op->getNumResults() != 1)
    return failure();
  Value anchor = op->getResult(0);
  auto type = dyn_cast<RankedTensorType>(anchor.getType());
  if (!type || !isSupportedFloat(type.getElementType()))
    return failure();
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!isa<linalg::SoftmaxOp>(op)) {
    if (!linalgOp || !linalgOp.hasPureTensorSemantics() ||
        linalgOp.getNumParallelLoops() != linalgOp.getNumLoops())
      return failure();
    Block *body = linalgOp.getBlock();
    Operation *last = body->getTerminator()->getOperand(0).getDefiningOp();
    if (last && isa<arith::TruncFOp>(last))
      last = last->getOperand(0).getDefiningOp();
    if (!last || !isa<arith::DivFOp, arith::MulFOp>(last))
      return failure();
  }
  // A cast right after is the better anchor.
  if (anchor.hasOneUse() && isCastOp(*anchor.getUsers().begin(), anchor))
    return failure();
  // Cheap first: an exponential or a softmax op among the producers.
  if (!looksLikeSoftmax(anchor))
    return failure();

  SmallVector<AffineExpr> idx;
  for (int64_t s : type.getShape())
    idx.push_back(s == 1 ? getAffineConstantExpr(0, op->getContext())
                         : tracer.getDim(tracer.addDim(s)));
  const Expr *p = tracer.read(anchor, idx, TraceMode::Full);
  if (!p || !isSoftmaxLike(p))
    return failure();
  candidate = true;
  const Expr *x = nullptr;
  std::string firstReason;
  for (int64_t d = type.getRank() - 1; d >= 0 && !x; --d) {
    auto dimExpr = dyn_cast<AffineDimExpr>(idx[d]);
    if (!dimExpr)
      continue;
    reason.clear();
    if (failed(matchSoftmax(p, dimExpr.getPosition(), idx, x))) {
      x = nullptr;
      if (firstReason.empty())
        firstReason = reason;
      continue;
    }
    dim = d;
  }
  reason.clear();
  if (!x)
    return failWith(firstReason);

  // The input: a tensor read at the same indices, maybe through a cast
  // that P casts back.
  bool pCast = getOp<arith::TruncFOp>(p) != nullptr;
  if (getOp<arith::ExtFOp>(x) && pCast)
    x = x->operands[0];
  // Candidates: what X was read from, and the inputs of the chain's
  // reductions; the one that reads as X at P's indices.
  SmallVector<Value> candidates;
  if (x->kind == ExprKind::Read && ArrayRef(x->indices) == ArrayRef(idx))
    candidates.push_back(x->value);
  if (x->originTensor && ArrayRef(x->originIndices) == ArrayRef(idx))
    candidates.push_back(x->originTensor);
  if (auto sm = dyn_cast<linalg::SoftmaxOp>(op))
    candidates.push_back(sm.getInput());
  SmallVector<const Expr *> work = {p};
  while (!work.empty()) {
    const Expr *e = work.pop_back_val();
    if (e->kind == ExprKind::Reduce)
      if (auto red = dyn_cast<linalg::LinalgOp>(e->op->getParentOp()))
        for (OpOperand *in : red.getDpsInputOperands())
          candidates.push_back(in->get());
    llvm::append_range(work, e->operands);
  }
  Value in;
  for (Value c : candidates) {
    auto cType = dyn_cast<RankedTensorType>(c.getType());
    if (!cType || failed(verifyCompatibleShape(cType, type)))
      continue;
    const Expr *r = tracer.read(c, idx, TraceMode::Full);
    if (r && isEqual(tracer, r, x)) {
      in = c;
      break;
    }
  }
  tracer.clearError();
  if (!in)
    return failWith("the softmax input is not a tensor of the result's "
                    "shape");
  auto inType = cast<RankedTensorType>(in.getType());
  if (inType.getElementType() != type.getElementType())
    return failWith("the softmax changes the element type");
  if (failed(verifyCompatibleShape(inType, type)))
    return failWith("the softmax input's shape differs from its result's");
  SmallVector<Operation *> roots;
  for (Operation *user : in.getUsers())
    if (tracer.getVisited().contains(user))
      roots.push_back(user);
  if (failed(checkUses(roots, op, "the softmax's inputs",
                       "a value of the softmax")))
    return failure();
  input = in;
  return success();
}

void SoftmaxMatcher::rewrite(RewriterBase &rewriter) {
  redirectDims(rewriter);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Location loc = op->getLoc();
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rewriter, loc, input);
  Value init = tensor::EmptyOp::create(rewriter, loc, sizes,
                                       getElementTypeOrSelf(input.getType()));
  Value result = fa::SoftmaxOp::create(rewriter, loc, input.getType(), input,
                                       init, rewriter.getI64IntegerAttr(dim))
                     .getResult();
  if (result.getType() != op->getResult(0).getType())
    result = tensor::CastOp::create(rewriter, loc, op->getResult(0).getType(),
                                    result);
  rewriter.replaceOp(op, result);
}

//===----------------------------------------------------------------------===//
// Patterns and the pass
//===----------------------------------------------------------------------===//

namespace {
struct RaiseAttentionPattern final
    : OpInterfaceRewritePattern<linalg::LinalgOp> {
  RaiseAttentionPattern(MLIRContext *ctx, RaiseAttentionOptions options)
      : OpInterfaceRewritePattern(ctx, /*benefit=*/2), options(options) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    AttentionMatcher matcher(op, options);
    if (failed(matcher.match()))
      return rewriter.notifyMatchFailure(op, matcher.reason);
    if (options.reportMissed && !matcher.maskNote.empty())
      op->emitRemark() << "attention raised with a mask: " << matcher.maskNote;
    matcher.rewrite(rewriter);
    return success();
  }

  RaiseAttentionOptions options;
};

struct RaiseSoftmaxPattern final : RewritePattern {
  explicit RaiseSoftmaxPattern(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<linalg::LinalgOp, linalg::SoftmaxOp>(op))
      return failure();
    SoftmaxMatcher matcher(op);
    if (failed(matcher.match()))
      return rewriter.notifyMatchFailure(op, matcher.reason);
    matcher.rewrite(rewriter);
    return success();
  }
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
  patterns.add<RaiseSoftmaxPattern>(patterns.getContext());
}

void RaiseAttentionPass::runOnOperation() {
  RaiseAttentionOptions options;
  options.allowMaskedRows = allowMaskedRows;
  options.reportMissed = reportMissed;
  // Attention first, so that a softmax inside an attention is raised with
  // it; then standalone softmaxes.
  for (bool softmax : {false, true}) {
    RewritePatternSet patterns(&getContext());
    if (softmax)
      patterns.add<RaiseSoftmaxPattern>(&getContext());
    else
      patterns.add<RaiseAttentionPattern>(&getContext(), options);
    // No folding: leave everything that is not raised as it was. The greedy
    // driver still erases the chain ops the rewrite leaves dead.
    GreedyRewriteConfig config;
    config.enableFolding(false);
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
  if (!reportMissed)
    return;
  // What was left alone, and why.
  getOperation()->walk([&](Operation *op) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
        linalgOp && linalg::isaContractionOpInterface(linalgOp)) {
      AttentionMatcher matcher(linalgOp, options);
      if (failed(matcher.match()) && matcher.candidate)
        op->emitRemark() << "attention not raised: " << matcher.reason;
      return;
    }
    if (!isa<linalg::LinalgOp, linalg::SoftmaxOp>(op))
      return;
    SoftmaxMatcher matcher(op);
    if (failed(matcher.match()) && matcher.candidate)
      op->emitRemark() << "softmax not raised: " << matcher.reason;
  });
}
