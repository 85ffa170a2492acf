//===- RaisingTracer.cpp - Element-level view of tensor chains ------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "RaisingTracer.h"

#include "fa/Dialect/FA/IR/FA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <utility>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::raising;

/// Trees larger than this are not analyzed: equality, substitution and
/// the walks are linear in the tree size.
static constexpr uint64_t kMaxTreeSize = 1u << 16;

static void setTreeSize(Expr *e) {
  uint64_t size = 1;
  for (const Expr *o : e->operands)
    size = std::min<uint64_t>(size + o->treeSize, kMaxTreeSize + 1);
  e->treeSize = size;
}

unsigned Tracer::addDim(int64_t size) {
  sizes.push_back(size);
  return sizes.size() - 1;
}

Expr *Tracer::make(ExprKind kind, Type type) {
  storage.emplace_back();
  Expr *e = &storage.back();
  e->kind = kind;
  e->type = type;
  return e;
}

const Expr *Tracer::fail(Operation *op, const Twine &message) {
  if (error.empty()) {
    error = message.str();
  }
  return nullptr;
}

const Expr *Tracer::makeConst(Attribute value, Type type) {
  Expr *e = make(ExprKind::Const, type);
  e->constant = value;
  return e;
}

const Expr *Tracer::makeRead(Value tensor, ArrayRef<AffineExpr> indices) {
  Expr *e = make(ExprKind::Read, getElementTypeOrSelf(tensor.getType()));
  e->value = tensor;
  e->indices.assign(indices.begin(), indices.end());
  auto type = cast<RankedTensorType>(tensor.getType());
  for (int64_t i = 0, r = type.getRank(); i < r; ++i)
    if (type.getDimSize(i) == 1)
      e->indices[i] = getAffineConstantExpr(0, ctx);
  e->originTensor = tensor;
  e->originIndices = e->indices;
  return e;
}

/// `map`'s results with its dims replaced by `loops`.
static SmallVector<AffineExpr> applyMap(AffineMap map,
                                        ArrayRef<AffineExpr> loops) {
  SmallVector<AffineExpr> out;
  for (AffineExpr r : map.getResults())
    out.push_back(r.replaceDims(loops));
  return out;
}

/// Solves `map(loops) == indices` for the loops `map` names directly;
/// constant results must meet constant indices. Loops `map` does not name
/// stay null.
static bool solveLoops(AffineMap map, ArrayRef<AffineExpr> indices,
                       SmallVectorImpl<AffineExpr> &loops) {
  loops.assign(map.getNumDims(), AffineExpr());
  for (auto [j, r] : llvm::enumerate(map.getResults())) {
    if (auto d = dyn_cast<AffineDimExpr>(r)) {
      AffineExpr &slot = loops[d.getPosition()];
      if (slot && slot != indices[j])
        return false;
      slot = indices[j];
      continue;
    }
    auto c = dyn_cast<AffineConstantExpr>(r);
    auto ic = dyn_cast<AffineConstantExpr>(indices[j]);
    if (!c || !ic || c.getValue() != ic.getValue())
      return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Reshapes
//===----------------------------------------------------------------------===//

/// The terms of `e` as sum(coef * dim) + constant, if it has that form.
static std::optional<LinearForm> linearOfAffine(AffineExpr e) {
  LinearForm f;
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    f.constant = c.getValue();
    return f;
  }
  if (auto d = dyn_cast<AffineDimExpr>(e)) {
    f.coef[d.getPosition()] = 1;
    return f;
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return std::nullopt;
  std::optional<LinearForm> l = linearOfAffine(bin.getLHS());
  std::optional<LinearForm> r = linearOfAffine(bin.getRHS());
  if (!l || !r)
    return std::nullopt;
  if (bin.getKind() == AffineExprKind::Add) {
    for (auto [d, c] : r->coef)
      l->coef[d] += c;
    l->constant += r->constant;
    return l;
  }
  if (bin.getKind() == AffineExprKind::Mul) {
    const LinearForm *lin = &*l, *k = &*r;
    if (!k->coef.empty())
      std::swap(lin, k);
    if (!k->coef.empty())
      return std::nullopt;
    LinearForm out;
    for (auto [d, c] : lin->coef)
      out.coef[d] = c * k->constant;
    out.constant = lin->constant * k->constant;
    return out;
  }
  return std::nullopt;
}

namespace {
/// An index as sum(coef * atom) + constant, the atoms being dims or
/// `x floordiv c` / `x mod c` of them.
struct IndexTerms {
  SmallVector<std::pair<AffineExpr, int64_t>> terms;
  int64_t constant = 0;

  void add(AffineExpr atom, int64_t coef) {
    for (auto &[a, c] : terms)
      if (a == atom) {
        c += coef;
        return;
      }
    terms.push_back({atom, coef});
  }
};
} // namespace

static bool getIndexTerms(AffineExpr e, int64_t scale, IndexTerms &out) {
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    out.constant += scale * c.getValue();
    return true;
  }
  if (isa<AffineDimExpr>(e)) {
    out.add(e, scale);
    return true;
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return false;
  switch (bin.getKind()) {
  case AffineExprKind::Add:
    return getIndexTerms(bin.getLHS(), scale, out) &&
           getIndexTerms(bin.getRHS(), scale, out);
  case AffineExprKind::Mul: {
    AffineExpr l = bin.getLHS(), r = bin.getRHS();
    if (isa<AffineConstantExpr>(l))
      std::swap(l, r);
    auto c = dyn_cast<AffineConstantExpr>(r);
    return c && getIndexTerms(l, scale * c.getValue(), out);
  }
  case AffineExprKind::FloorDiv:
  case AffineExprKind::Mod:
    if (!isa<AffineConstantExpr>(bin.getRHS()))
      return false;
    out.add(e, scale);
    return true;
  default:
    return false;
  }
}

/// Folds the atoms of one dim back together:
///   (x floordiv c) * (a * c) + (x mod c) * a  ->  x * a
///   x * a - (x floordiv c) * (a * c)          ->  (x mod c) * a
/// (MLIR's affine simplifier writes a multiplied mod in the second form).
static void foldIndexTerms(IndexTerms &t) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto &[fd, fc] : t.terms) {
      auto f = dyn_cast<AffineBinaryOpExpr>(fd);
      if (!f || f.getKind() != AffineExprKind::FloorDiv || fc == 0)
        continue;
      int64_t c = cast<AffineConstantExpr>(f.getRHS()).getValue();
      AffineExpr x = f.getLHS();
      AffineExpr mod = x % c;
      for (auto &[other, oc] : t.terms) {
        if (oc == 0)
          continue;
        if (other == mod && fc == oc * c) {
          int64_t a = oc;
          fc = oc = 0;
          t.add(x, a);
          changed = true;
        } else if (other == x && fc == -oc * c) {
          int64_t a = oc;
          fc = oc = 0;
          t.add(mod, a);
          changed = true;
        }
        if (changed)
          break;
      }
      if (changed)
        break;
    }
  }
}

AffineExpr fa::raising::canonicalizeIndex(AffineExpr e) {
  IndexTerms t;
  if (!getIndexTerms(e, 1, t))
    return e;
  foldIndexTerms(t);
  AffineExpr out = getAffineConstantExpr(t.constant, e.getContext());
  for (auto &[a, c] : t.terms)
    if (c != 0)
      out = out + a * c;
  return out;
}

/// The number of values an index atom takes, or kDynamic.
static int64_t getAtomSize(Tracer &tracer, AffineExpr atom) {
  if (auto d = dyn_cast<AffineDimExpr>(atom))
    return tracer.getDimSize(d.getPosition());
  auto bin = dyn_cast<AffineBinaryOpExpr>(atom);
  int64_t c = cast<AffineConstantExpr>(bin.getRHS()).getValue();
  if (c <= 0)
    return ShapedType::kDynamic;
  if (bin.getKind() == AffineExprKind::Mod)
    return c;
  int64_t inner = getAtomSize(tracer, bin.getLHS());
  if (ShapedType::isDynamic(inner) || inner % c != 0)
    return ShapedType::kDynamic;
  return inner / c;
}

/// Splits the index `e` of a collapsed dim into the indices of the `sizes`
/// it collapses (row-major). `e` must be a linear combination of atoms
/// (dims, `x floordiv c`, `x mod c`) whose coefficients are the strides of
/// whole digit ranges, e.g. `b * 4 + h` over [2, 4] -> (b, h), or `h` over
/// [2, 2] -> (h floordiv 2, h mod 2).
static std::optional<SmallVector<AffineExpr>>
delinearize(Tracer &tracer, AffineExpr e, ArrayRef<int64_t> sizes,
            MLIRContext *ctx) {
  unsigned n = sizes.size();
  if (n == 1)
    return SmallVector<AffineExpr>{e};
  // Strides; every size but the first must be static.
  SmallVector<int64_t> strides(n, 1);
  for (int i = n - 2; i >= 0; --i) {
    if (ShapedType::isDynamic(sizes[i + 1]))
      return std::nullopt;
    strides[i] = strides[i + 1] * sizes[i + 1];
  }
  IndexTerms form;
  if (!getIndexTerms(e, 1, form) || form.constant != 0)
    return std::nullopt;
  foldIndexTerms(form);
  SmallVector<AffineExpr> out(n, getAffineConstantExpr(0, ctx));
  SmallVector<bool> covered(n, false);
  for (auto [x, c] : form.terms) {
    if (c == 0)
      continue;
    // The lowest digit the term lands on.
    int lo = -1;
    for (unsigned i = 0; i < n; ++i)
      if (strides[i] == c)
        lo = i;
    if (lo < 0)
      return std::nullopt;
    int64_t size = getAtomSize(tracer, x);
    int hi = lo;
    if (ShapedType::isDynamic(size)) {
      if (lo != 0 && !ShapedType::isDynamic(sizes[lo]))
        return std::nullopt;
    } else {
      // Digits hi..lo together hold exactly the atom's range.
      int64_t span = ShapedType::isDynamic(sizes[lo]) ? -1 : sizes[lo];
      while (span != size) {
        if (span < 0 || span > size || hi == 0)
          return std::nullopt;
        --hi;
        if (ShapedType::isDynamic(sizes[hi]))
          return std::nullopt;
        span *= sizes[hi];
      }
    }
    for (int i = hi; i <= lo; ++i) {
      if (covered[i])
        return std::nullopt;
      covered[i] = true;
      int64_t div = strides[i] / c;
      AffineExpr digit = div == 1 ? x : x.floorDiv(div);
      if (i != hi)
        digit = digit % sizes[i];
      out[i] = canonicalizeIndex(digit);
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// True for a body that yields one of its inputs unchanged (copies,
/// transposes, broadcasts).
static bool isCopyBody(linalg::LinalgOp op, unsigned result) {
  Value y = op.getBlock()->getTerminator()->getOperand(result);
  auto arg = dyn_cast<BlockArgument>(y);
  return arg && arg.getOwner() == op.getBlock() &&
         arg.getArgNumber() < op.getNumDpsInputs();
}

/// True for a body the Views mode evaluates: a copy, or one cast, multiply
/// or divide of an input by a constant.
static bool isViewBody(linalg::LinalgOp op, unsigned result) {
  if (isCopyBody(op, result))
    return true;
  Block *body = op.getBlock();
  // A fill: the body yields a constant from outside.
  Value yielded = body->getTerminator()->getOperand(result);
  if (yielded.getParentBlock() != body && matchPattern(yielded, m_Constant()))
    return true;
  Operation *def = body->getTerminator()->getOperand(result).getDefiningOp();
  if (!def || def->getBlock() != body || def->getNumResults() != 1)
    return false;
  auto isInput = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == body &&
           arg.getArgNumber() < op.getNumDpsInputs();
  };
  auto isConstant = [&](Value v) {
    if (matchPattern(v, m_Constant()))
      return true;
    if (auto t = v.getDefiningOp<arith::TruncFOp>())
      return matchPattern(t.getIn(), m_Constant());
    if (auto t = v.getDefiningOp<arith::ExtFOp>())
      return matchPattern(t.getIn(), m_Constant());
    return false;
  };
  if (isa<arith::ExtFOp, arith::TruncFOp>(def))
    return isInput(def->getOperand(0));
  if (isa<arith::MulFOp, arith::DivFOp>(def)) {
    for (unsigned i = 0; i < 2; ++i)
      if (isInput(def->getOperand(i)) && isConstant(def->getOperand(1 - i)))
        return true;
  }
  return false;
}

const Expr *Tracer::read(Value tensor, ArrayRef<AffineExpr> indicesIn,
                         TraceMode mode) {
  if (budget == 0)
    return fail(tensor.getDefiningOp(), "the chain is too large to analyze");
  --budget;
  auto type = dyn_cast<RankedTensorType>(tensor.getType());
  if (!type)
    return fail(tensor.getDefiningOp(), "not a ranked tensor");
  Type elt = type.getElementType();
  // A unit dim can only be read at 0.
  SmallVector<AffineExpr> indices(indicesIn);
  for (int64_t i = 0, r = type.getRank(); i < r; ++i)
    indices[i] = type.getDimSize(i) == 1 ? getAffineConstantExpr(0, ctx)
                                         : canonicalizeIndex(indices[i]);

  auto leaf = [&]() {
    Expr *e = make(ExprKind::Read, elt);
    e->value = tensor;
    e->indices = indices;
    e->originTensor = tensor;
    e->originIndices = indices;
    return e;
  };
  auto withOrigin = [&](const Expr *e) -> const Expr * {
    if (!e || e->originTensor)
      return e;
    auto *m = const_cast<Expr *>(e);
    m->originTensor = tensor;
    m->originIndices = indices;
    return m;
  };

  Operation *def = tensor.getDefiningOp();
  if (!def)
    return leaf();

  // Splat constants, fills, casts, reshapes.
  Attribute attr;
  if (matchPattern(tensor, m_Constant(&attr))) {
    if (auto dense = dyn_cast<DenseElementsAttr>(attr);
        dense && dense.isSplat())
      return makeConst(dense.getSplatValue<Attribute>(), elt);
    return leaf();
  }
  if (auto fill = dyn_cast<linalg::FillOp>(def)) {
    visited.insert(def);
    Value v = fill.getInputs()[0];
    Attribute c;
    if (matchPattern(v, m_Constant(&c)))
      return makeConst(c, elt);
    Expr *e = make(ExprKind::Scalar, elt);
    e->value = v;
    return e;
  }
  if (isa<tensor::EmptyOp>(def))
    return fail(def, "an element of an uninitialized tensor is read");
  if (auto cast = dyn_cast<tensor::CastOp>(def)) {
    visited.insert(def);
    return withOrigin(read(cast.getSource(), indices, mode));
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def)) {
    visited.insert(def);
    SmallVector<AffineExpr> src;
    for (ReassociationIndices group : expand.getReassociationIndices()) {
      AffineExpr sum = getAffineConstantExpr(0, ctx);
      int64_t stride = 1;
      for (int64_t j = group.size() - 1; j >= 0; --j) {
        int64_t dim = group[j];
        sum = sum + indices[dim] * stride;
        int64_t size = type.getDimSize(dim);
        if (j > 0 && ShapedType::isDynamic(size)) {
          // Only the outermost dim of a group may be dynamic.
          for (int64_t i = 0; i < j; ++i) {
            auto c = dyn_cast<AffineConstantExpr>(indices[group[i]]);
            if (!c || c.getValue() != 0) {
              // Not looked through: the expanded tensor is read as it is.
              note("an expand_shape splits a dynamic dim");
              return leaf();
            }
          }
          break;
        }
        stride *= size;
      }
      src.push_back(simplifyAffineExpr(sum, getNumDims(), 0));
    }
    return withOrigin(read(expand.getSrc(), src, mode));
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
    visited.insert(def);
    auto srcType = collapse.getSrcType();
    SmallVector<AffineExpr> src;
    for (auto [j, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      SmallVector<int64_t> groupSizes;
      for (int64_t d : group)
        groupSizes.push_back(srcType.getDimSize(d));
      std::optional<SmallVector<AffineExpr>> parts =
          delinearize(*this, indices[j], groupSizes, ctx);
      if (!parts) {
        std::string sizesText;
        llvm::raw_string_ostream os(sizesText);
        llvm::interleaveComma(groupSizes, os);
        std::string indexText;
        llvm::raw_string_ostream is(indexText);
        indices[j].print(is);
        // Not looked through: the collapsed tensor is read as it is.
        note("a collapse_shape merges dims the analysis cannot split back "
             "(index " +
             indexText + " over [" + sizesText + "])");
        return leaf();
      }
      llvm::append_range(src, *parts);
    }
    return withOrigin(read(collapse.getSrc(), src, mode));
  }

  // Softmax ops.
  if (isa<linalg::SoftmaxOp, fa::SoftmaxOp>(def)) {
    if (mode != TraceMode::Full)
      return leaf();
    visited.insert(def);
    Value input;
    int64_t dim;
    if (auto sm = dyn_cast<linalg::SoftmaxOp>(def)) {
      input = sm.getInput();
      dim = sm.getDimension();
    } else {
      auto fsm = cast<fa::SoftmaxOp>(def);
      input = fsm.getInput();
      dim = fsm.getDimension();
    }
    unsigned r = addDim(type.getDimSize(dim));
    SmallVector<AffineExpr> inner(indices);
    inner[dim] = getDim(r);
    const Expr *body = read(input, inner, mode);
    if (!body)
      return nullptr;
    Expr *e = make(ExprKind::Softmax, elt);
    e->op = def;
    e->operands = {body};
    e->dim = r;
    e->index = indices[dim];
    setTreeSize(e);
    return withOrigin(e);
  }

  // Elementwise ops on whole tensors (arith.select, arith.addf, ...).
  if (def->hasTrait<OpTrait::Elementwise>() && def->getNumResults() == 1 &&
      def->getNumRegions() == 0 && isMemoryEffectFree(def)) {
    if (mode != TraceMode::Full)
      return leaf();
    visited.insert(def);
    SmallVector<const Expr *> operands;
    for (Value operand : def->getOperands()) {
      const Expr *e;
      auto t = dyn_cast<RankedTensorType>(operand.getType());
      if (t && t.getRank() == type.getRank()) {
        e = read(operand, indices, mode);
      } else if (!isa<ShapedType>(operand.getType())) {
        Attribute c;
        if (matchPattern(operand, m_Constant(&c))) {
          e = makeConst(c, operand.getType());
        } else {
          Expr *s = make(ExprKind::Scalar, operand.getType());
          s->value = operand;
          e = s;
        }
      } else {
        return fail(def, "an elementwise op mixes tensor ranks");
      }
      if (!e)
        return nullptr;
      operands.push_back(e);
    }
    return withOrigin(makeOp(def, operands));
  }

  auto linalgOp = dyn_cast<linalg::LinalgOp>(def);
  if (!linalgOp || !linalgOp.hasPureTensorSemantics())
    return leaf();
  return withOrigin(
      readLinalg(linalgOp, cast<OpResult>(tensor), indices, mode));
}

const Expr *Tracer::readLinalg(linalg::LinalgOp op, OpResult result,
                               ArrayRef<AffineExpr> indices, TraceMode mode) {
  Type elt = getElementTypeOrSelf(result.getType());
  auto leaf = [&]() {
    Expr *e = make(ExprKind::Read, elt);
    e->value = result;
    e->indices.assign(indices.begin(), indices.end());
    e->originTensor = result;
    e->originIndices = e->indices;
    return e;
  };
  // Contractions are the matcher's business.
  if (op->getNumResults() == 1 && linalg::isaContractionOpInterface(op))
    return leaf();
  unsigned r = result.getResultNumber();
  bool allParallel = op.getNumParallelLoops() == op.getNumLoops();
  if (mode == TraceMode::Views && op.hasIndexSemantics())
    return leaf();
  // Views: a multiply or divide by a constant that another generic
  // broadcasts (as JAX writes q / sqrt(d)) counts too.
  bool scaleByInput = false;
  if (mode == TraceMode::Views && allParallel && !isViewBody(op, r)) {
    Block *body = op.getBlock();
    Operation *def = body->getTerminator()->getOperand(r).getDefiningOp();
    scaleByInput = def && def->getBlock() == body &&
                   isa<arith::MulFOp, arith::DivFOp>(def) &&
                   &body->front() == def;
  }
  if (mode == TraceMode::Views &&
      (!allParallel || (!isViewBody(op, r) && !scaleByInput)))
    return leaf();

  SmallVector<AffineExpr> loops;
  if (!solveLoops(op.getIndexingMapMatchingResult(result), indices, loops))
    return fail(op, "an output indexing map the analysis cannot invert");
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  SmallVector<unsigned> free;
  for (auto [i, l] : llvm::enumerate(loops))
    if (!l)
      free.push_back(i);

  if (allParallel) {
    if (!free.empty())
      return fail(op, "a parallel loop not in the output indexing map");
    llvm::DenseMap<Value, const Expr *> memo;
    auto *outer = std::exchange(bodyMemo, &memo);
    const Expr *e = evalBodyValue(
        op, loops, op.getBlock()->getTerminator()->getOperand(r), mode);
    bodyMemo = outer;
    if (scaleByInput && e && !llvm::any_of(e->operands, [](const Expr *o) {
          return o->kind == ExprKind::Const;
        }))
      return leaf();
    visited.insert(op);
    return e;
  }

  // A reduction over one loop.
  if (free.size() != 1 || op.getNumReductionLoops() != 1)
    return fail(op, "a reduction over more than one dim");
  if (iters[free[0]] != utils::IteratorType::reduction)
    return fail(op, "a reduction whose result is indexed by its reduction "
                    "loop");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned rd = addDim(ranges[free[0]]);
  loops[free[0]] = getDim(rd);
  Block *body = op.getBlock();
  Value yielded = body->getTerminator()->getOperand(r);
  Operation *comb = yielded.getDefiningOp();
  BlockArgument acc = op.getRegionOutputArgs()[r];
  if (!comb || comb->getBlock() != body || comb->getNumOperands() != 2 ||
      comb->getNumResults() != 1)
    return fail(op, "a reduction body that is not one combining op");
  Value x;
  if (comb->getOperand(0) == acc)
    x = comb->getOperand(1);
  else if (comb->getOperand(1) == acc)
    x = comb->getOperand(0);
  else
    return fail(op, "a reduction body that does not combine into its "
                    "accumulator");
  visited.insert(op);
  llvm::DenseMap<Value, const Expr *> memo;
  auto *outer = std::exchange(bodyMemo, &memo);
  const Expr *element = evalBodyValue(op, loops, x, mode);
  bodyMemo = outer;
  if (!element)
    return nullptr;
  OpOperand *init = op.getDpsInitOperand(r);
  const Expr *initValue = read(init->get(), indices, mode);
  if (!initValue)
    return nullptr;
  Expr *e = make(ExprKind::Reduce, elt);
  e->op = comb;
  e->operands = {initValue, element};
  e->dim = rd;
  setTreeSize(e);
  return e;
}

/// Folds a cast of a float constant.
static Attribute foldFloatCast(Attribute c, Type to) {
  auto f = dyn_cast_or_null<FloatAttr>(c);
  auto ft = dyn_cast<FloatType>(to);
  if (!f || !ft)
    return {};
  APFloat v = f.getValue();
  bool lost;
  v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return FloatAttr::get(ft, v);
}

const Expr *Tracer::evalBodyValue(linalg::LinalgOp op,
                                  ArrayRef<AffineExpr> loops, Value v,
                                  TraceMode mode) {
  Block *body = op.getBlock();
  if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == body) {
    OpOperand *operand = op.getMatchingOpOperand(arg);
    // In a reduction an output argument is a running value, not the init.
    if (op.isDpsInit(operand) && op.getNumReductionLoops() != 0)
      return fail(op, "a reduction body reads an accumulator other than its "
                      "own");
    SmallVector<AffineExpr> idx =
        applyMap(op.getMatchingIndexingMap(operand), loops);
    return read(operand->get(), idx, mode);
  }
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != body) {
    // A value from outside the body.
    Attribute c;
    if (matchPattern(v, m_Constant(&c)))
      return makeConst(c, v.getType());
    if (def && def->getNumOperands() == 1 &&
        isa<arith::TruncFOp, arith::ExtFOp>(def) &&
        matchPattern(def->getOperand(0), m_Constant(&c)))
      if (Attribute folded = foldFloatCast(c, v.getType()))
        return makeConst(folded, v.getType());
    Expr *e = make(ExprKind::Scalar, v.getType());
    e->value = v;
    return e;
  }
  if (auto index = dyn_cast<linalg::IndexOp>(def)) {
    Expr *e = make(ExprKind::Index, v.getType());
    e->index = loops[index.getDim()];
    return e;
  }
  if (bodyMemo)
    if (const Expr *known = bodyMemo->lookup(v))
      return known;
  if (budget == 0)
    return fail(def, "the chain is too large to analyze");
  --budget;
  if (def->getNumRegions() != 0 || def->getNumResults() != 1 ||
      !isMemoryEffectFree(def))
    return fail(def, "a body op the analysis does not model: " +
                         def->getName().getStringRef());
  SmallVector<const Expr *> operands;
  for (Value operand : def->getOperands()) {
    const Expr *e = evalBodyValue(op, loops, operand, mode);
    if (!e)
      return nullptr;
    operands.push_back(e);
  }
  const Expr *result = makeOp(def, operands);
  if (result && bodyMemo)
    (*bodyMemo)[v] = result;
  return result;
}

const Expr *Tracer::makeOp(Operation *op, ArrayRef<const Expr *> operands) {
  Type type = getElementTypeOrSelf(op->getResult(0).getType());
  // A few folds that front ends leave for later passes.
  if (isa<arith::TruncFOp, arith::ExtFOp>(op) &&
      operands[0]->kind == ExprKind::Const)
    if (Attribute folded = foldFloatCast(operands[0]->constant, type))
      return makeConst(folded, type);
  if (isa<arith::MaximumFOp, arith::MaxNumFOp>(op))
    for (unsigned i = 0; i < 2; ++i)
      if (std::optional<double> c = getConstFloat(operands[i]);
          c && std::isinf(*c) && *c < 0)
        return operands[1 - i];
  if (isa<arith::SelectOp>(op))
    if (std::optional<int64_t> c = getConstInt(operands[0]))
      return *c ? operands[1] : operands[2];
  Expr *e = make(ExprKind::Op, type);
  e->op = op;
  e->operands.assign(operands.begin(), operands.end());
  setTreeSize(e);
  if (e->treeSize > kMaxTreeSize)
    return fail(op, "the chain is too large to analyze");
  return e;
}

const Expr *Tracer::substitute(const Expr *e, unsigned from, AffineExpr to) {
  AffineExpr fromExpr = getDim(from);
  auto subst = [&](AffineExpr a) { return a ? a.replace(fromExpr, to) : a; };
  bool changed = false;
  SmallVector<const Expr *> operands;
  for (const Expr *o : e->operands) {
    const Expr *n = substitute(o, from, to);
    changed |= n != o;
    operands.push_back(n);
  }
  SmallVector<AffineExpr> indices;
  for (AffineExpr a : e->indices) {
    indices.push_back(subst(a));
    changed |= indices.back() != a;
  }
  AffineExpr index = subst(e->index);
  changed |= index != e->index;
  if (!changed)
    return e;
  Expr *n = make(e->kind, e->type);
  *n = *e;
  n->operands = operands;
  setTreeSize(n);
  n->indices = indices;
  n->index = index;
  n->originTensor = Value();
  n->originIndices.clear();
  return n;
}

bool fa::raising::isEqual(Tracer &tracer, const Expr *a, const Expr *b) {
  if (a == b)
    return true;
  if (!a || !b || a->kind != b->kind || a->type != b->type)
    return false;
  switch (a->kind) {
  case ExprKind::Const:
    return a->constant == b->constant;
  case ExprKind::Index:
    return a->index == b->index;
  case ExprKind::Scalar:
    return a->value == b->value;
  case ExprKind::Read:
    return a->value == b->value && a->indices == b->indices;
  case ExprKind::Op:
    if (a->op->getName() != b->op->getName() ||
        a->op->getAttrDictionary() != b->op->getAttrDictionary() ||
        a->operands.size() != b->operands.size())
      return false;
    for (auto [x, y] : llvm::zip(a->operands, b->operands))
      if (!isEqual(tracer, x, y))
        return false;
    return true;
  case ExprKind::Reduce:
  case ExprKind::Softmax: {
    if (a->op->getName() != b->op->getName() || a->index != b->index)
      return false;
    for (auto [x, y] : llvm::zip(a->operands, b->operands))
      if (!isEqual(tracer, x,
                   tracer.substitute(y, b->dim, tracer.getDim(a->dim))))
        return false;
    return true;
  }
  }
  return false;
}

void fa::raising::collectDims(const Expr *e,
                              llvm::SmallSetVector<unsigned, 8> &dims) {
  auto walk = [&](AffineExpr a) {
    if (a)
      a.walk([&](AffineExpr x) {
        if (auto d = dyn_cast<AffineDimExpr>(x))
          dims.insert(d.getPosition());
      });
  };
  if (e->kind == ExprKind::Reduce || e->kind == ExprKind::Softmax) {
    llvm::SmallSetVector<unsigned, 8> inner;
    for (const Expr *o : e->operands)
      collectDims(o, inner);
    for (unsigned d : inner)
      if (d != e->dim)
        dims.insert(d);
    walk(e->index);
    return;
  }
  for (AffineExpr a : e->indices)
    walk(a);
  walk(e->index);
  for (const Expr *o : e->operands)
    collectDims(o, dims);
}

std::optional<double> fa::raising::getConstFloat(const Expr *e) {
  if (!e || e->kind != ExprKind::Const)
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(e->constant))
    return f.getValueAsDouble();
  return std::nullopt;
}

std::optional<int64_t> fa::raising::getConstInt(const Expr *e) {
  if (!e || e->kind != ExprKind::Const)
    return std::nullopt;
  if (auto i = dyn_cast<IntegerAttr>(e->constant))
    return i.getType().isInteger(1) ? (i.getValue().isZero() ? 0 : 1)
                                    : i.getValue().getSExtValue();
  if (auto b = dyn_cast<BoolAttr>(e->constant))
    return b.getValue() ? 1 : 0;
  return std::nullopt;
}

std::string fa::raising::describe(const Expr *e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  switch (e->kind) {
  case ExprKind::Const:
    os << "the constant " << e->constant;
    break;
  case ExprKind::Index:
    os << "a loop index";
    break;
  case ExprKind::Scalar:
    os << "a scalar value that is not a constant";
    break;
  case ExprKind::Read:
    if (Operation *def = e->value.getDefiningOp())
      os << "the result of " << def->getName();
    else
      os << "a block argument";
    break;
  case ExprKind::Op:
    os << e->op->getName();
    break;
  case ExprKind::Reduce:
    os << "a " << e->op->getName() << " reduction";
    break;
  case ExprKind::Softmax:
    os << e->op->getName();
    break;
  }
  return s;
}

//===----------------------------------------------------------------------===//
// Index arithmetic
//===----------------------------------------------------------------------===//

/// The range [lo, hi] of a linear form over loop indices d in [0, size(d)),
/// infinite where a dim's size is unknown.
/// The range [lo, hi] of a linear form over loop indices d in [0, size(d)).
/// A dim of dynamic size is taken to be below 2^31 (a sequence length).
static std::pair<double, double> getRange(Tracer &tracer, const LinearForm &f) {
  double lo = f.constant, hi = f.constant;
  for (auto [d, c] : f.coef) {
    int64_t size = tracer.getDimSize(d);
    double extent = ShapedType::isDynamic(size) ? std::ldexp(1.0, 31) - 1
                                                : double(size - 1);
    double span = double(c) * extent;
    (c > 0 ? hi : lo) += span;
  }
  return {lo, hi};
}

/// Whether the values of `f` are exact in the integer type `t` (nothing
/// wraps around).
static bool fitsIn(Tracer &tracer, const LinearForm &f, Type t) {
  unsigned width = t.isIndex() ? 64 : t.getIntOrFloatBitWidth();
  auto [lo, hi] = getRange(tracer, f);
  double limit = std::ldexp(1.0, width - 1);
  return lo >= -limit && hi <= limit - 1;
}

/// Coefficients and offsets of index arithmetic stay small, so that the
/// forms' own int64 arithmetic cannot overflow.
static bool isSmall(const LinearForm &f) {
  constexpr int64_t limit = int64_t(1) << 31;
  if (f.constant > limit || f.constant < -limit)
    return false;
  return llvm::all_of(
      f.coef, [](auto p) { return p.second <= limit && p.second >= -limit; });
}

std::optional<LinearForm> fa::raising::getLinearForm(Tracer &tracer,
                                                     const Expr *e) {
  if (!e->type.isSignlessIntOrIndex() || e->type.isInteger(1))
    return std::nullopt;
  std::optional<LinearForm> f;
  if (e->kind == ExprKind::Index) {
    f = linearOfAffine(e->index);
    if (f && !isSmall(*f))
      return std::nullopt;
  } else if (std::optional<int64_t> c = getConstInt(e)) {
    f = LinearForm();
    f->constant = *c;
  } else if (e->kind == ExprKind::Op) {
    Operation *op = e->op;
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp, arith::TruncIOp>(op)) {
      f = getLinearForm(tracer, e->operands[0]);
      // A zero extension or an unsigned cast keeps only nonnegative values.
      if (f && isa<arith::ExtUIOp, arith::IndexCastUIOp>(op) &&
          getRange(tracer, *f).first < 0)
        return std::nullopt;
    } else if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op)) {
      std::optional<LinearForm> l = getLinearForm(tracer, e->operands[0]);
      std::optional<LinearForm> r = getLinearForm(tracer, e->operands[1]);
      if (!l || !r || !isSmall(*l) || !isSmall(*r))
        return std::nullopt;
      if (isa<arith::MulIOp>(op)) {
        // One side is a constant.
        LinearForm *lin = &*l, *k = &*r;
        if (!k->coef.empty())
          std::swap(lin, k);
        if (!k->coef.empty())
          return std::nullopt;
        for (auto &[d, c] : lin->coef)
          c *= k->constant;
        lin->constant *= k->constant;
        if (lin != &*l)
          *l = *lin;
      } else {
        int64_t sign = isa<arith::SubIOp>(op) ? -1 : 1;
        for (auto [d, c] : r->coef)
          l->coef[d] += sign * c;
        l->constant += sign * r->constant;
      }
      f = l;
    }
  }
  // The form is the value only while nothing wraps around in the type.
  if (!f || !isSmall(*f) || !fitsIn(tracer, *f, e->type))
    return std::nullopt;
  return f;
}

const Expr *fa::raising::getAbsOperand(Tracer &tracer, const Expr *e) {
  if (getOp<math::AbsIOp>(e) || getOp<math::AbsFOp>(e))
    return e->operands[0];
  if (!getOp<arith::SelectOp>(e))
    return nullptr;
  // x or its negation, on the sign of x.
  auto isNegationOf = [&](const Expr *n, const Expr *x) {
    if (getOp<arith::NegFOp>(n))
      return isEqual(tracer, n->operands[0], x);
    if (!getOp<arith::SubIOp>(n) && !getOp<arith::SubFOp>(n))
      return false;
    std::optional<int64_t> zi = getConstInt(n->operands[0]);
    std::optional<double> zf = getConstFloat(n->operands[0]);
    return ((zi && *zi == 0) || (zf && *zf == 0.0)) &&
           isEqual(tracer, n->operands[1], x);
  };
  const Expr *c = e->operands[0], *t = e->operands[1], *f = e->operands[2];
  auto isZero = [](const Expr *z) {
    std::optional<int64_t> zi = getConstInt(z);
    std::optional<double> zf = getConstFloat(z);
    return (zi && *zi == 0) || (zf && *zf == 0.0);
  };
  // The predicate is "x >= 0" (select x, -x) or "x < 0" (select -x, x).
  bool nonNegative;
  if (auto cmp = getOp<arith::CmpIOp>(c)) {
    auto p = cmp.getPredicate();
    if (p == arith::CmpIPredicate::sge || p == arith::CmpIPredicate::sgt)
      nonNegative = true;
    else if (p == arith::CmpIPredicate::slt || p == arith::CmpIPredicate::sle)
      nonNegative = false;
    else
      return nullptr;
  } else if (auto cmp = getOp<arith::CmpFOp>(c)) {
    auto p = cmp.getPredicate();
    if (p == arith::CmpFPredicate::OGE || p == arith::CmpFPredicate::OGT)
      nonNegative = true;
    else if (p == arith::CmpFPredicate::OLT || p == arith::CmpFPredicate::OLE)
      nonNegative = false;
    else
      return nullptr;
  } else {
    return nullptr;
  }
  if (!isZero(c->operands[1]))
    return nullptr;
  const Expr *x = c->operands[0];
  const Expr *kept = nonNegative ? t : f, *negated = nonNegative ? f : t;
  if (!isEqual(tracer, kept, x) || !isNegationOf(negated, x))
    return nullptr;
  return x;
}

static LinearForm negateConstraint(LinearForm f) {
  // not(f <= 0) is f >= 1, i.e. -f + 1 <= 0.
  for (auto &[d, c] : f.coef)
    c = -c;
  f.constant = -f.constant + 1;
  return f;
}

std::optional<SmallVector<LinearForm>>
fa::raising::getConstraints(Tracer &tracer, const Expr *e, bool negate) {
  using Result = std::optional<SmallVector<LinearForm>>;
  if (std::optional<int64_t> c = getConstInt(e)) {
    if (!e->type.isInteger(1))
      return std::nullopt;
    if ((*c != 0) != negate)
      return SmallVector<LinearForm>{};
    return std::nullopt; // never true: not a mask we express
  }
  if (e->kind != ExprKind::Op)
    return std::nullopt;
  Operation *op = e->op;
  auto both = [&](const Expr *a, bool na, const Expr *b, bool nb) -> Result {
    Result x = getConstraints(tracer, a, na), y = getConstraints(tracer, b, nb);
    if (!x || !y)
      return std::nullopt;
    x->append(y->begin(), y->end());
    return x;
  };
  if (auto x = dyn_cast<arith::XOrIOp>(op)) {
    for (unsigned i = 0; i < 2; ++i)
      if (std::optional<int64_t> c = getConstInt(e->operands[i]);
          c && e->type.isInteger(1))
        return getConstraints(tracer, e->operands[1 - i], negate != (*c != 0));
    return std::nullopt;
  }
  // a and b; under negation (not a) or (not b), which is not a conjunction.
  if (isa<arith::AndIOp>(op) && !negate)
    return both(e->operands[0], false, e->operands[1], false);
  if (isa<arith::OrIOp>(op) && negate)
    return both(e->operands[0], true, e->operands[1], true);
  if (isa<arith::SelectOp>(op) && e->type.isInteger(1)) {
    std::optional<int64_t> t = getConstInt(e->operands[1]);
    std::optional<int64_t> f = getConstInt(e->operands[2]);
    // select(c, x, false) = c and x; select(c, true, x) = c or x.
    if (f && *f == 0 && !negate)
      return both(e->operands[0], false, e->operands[1], false);
    if (t && *t == 1 && negate)
      return both(e->operands[0], true, e->operands[2], true);
    return std::nullopt;
  }
  auto cmp = dyn_cast<arith::CmpIOp>(op);
  if (!cmp)
    return std::nullopt;
  // |x| <= y (or < y) is x <= y and -x <= y: a conjunction; under negation,
  // or with the absolute value on the other side, a disjunction.
  {
    const Expr *lhs = e->operands[0], *rhs = e->operands[1];
    arith::CmpIPredicate p = cmp.getPredicate();
    bool strict;
    switch (p) {
    case arith::CmpIPredicate::sle:
    case arith::CmpIPredicate::slt:
      strict = p == arith::CmpIPredicate::slt;
      break;
    case arith::CmpIPredicate::sge:
    case arith::CmpIPredicate::sgt:
      strict = p == arith::CmpIPredicate::sgt;
      std::swap(lhs, rhs);
      break;
    default:
      lhs = rhs = nullptr;
      strict = false;
      break;
    }
    if (lhs && negate) {
      // not(x <= y) is y < x; not(x < y) is y <= x.
      std::swap(lhs, rhs);
      strict = !strict;
    }
    if (lhs && getAbsOperand(tracer, rhs))
      return std::nullopt;
    if (const Expr *x = lhs ? getAbsOperand(tracer, lhs) : nullptr) {
      std::optional<LinearForm> a = getLinearForm(tracer, x);
      std::optional<LinearForm> b = getLinearForm(tracer, rhs);
      if (!a || !b)
        return std::nullopt;
      SmallVector<LinearForm> out;
      for (int64_t sign : {1, -1}) {
        LinearForm f;
        for (auto [d, c] : a->coef)
          f.coef[d] += sign * c;
        for (auto [d, c] : b->coef)
          f.coef[d] -= c;
        f.constant = sign * a->constant - b->constant + (strict ? 1 : 0);
        out.push_back(f);
      }
      return out;
    }
  }
  std::optional<LinearForm> a = getLinearForm(tracer, e->operands[0]);
  std::optional<LinearForm> b = getLinearForm(tracer, e->operands[1]);
  if (!a || !b)
    return std::nullopt;
  // diff = a - b.
  LinearForm diff = *a;
  for (auto [d, c] : b->coef)
    diff.coef[d] -= c;
  diff.constant -= b->constant;
  // An unsigned comparison of values that cannot be negative (loop
  // indices, nonnegative multiples and offsets) is the signed one.
  auto nonNegative = [&](const LinearForm &l) {
    return getRange(tracer, l).first >= 0;
  };
  arith::CmpIPredicate pred = cmp.getPredicate();
  if (nonNegative(*a) && nonNegative(*b)) {
    switch (pred) {
    case arith::CmpIPredicate::ule:
      pred = arith::CmpIPredicate::sle;
      break;
    case arith::CmpIPredicate::ult:
      pred = arith::CmpIPredicate::slt;
      break;
    case arith::CmpIPredicate::uge:
      pred = arith::CmpIPredicate::sge;
      break;
    case arith::CmpIPredicate::ugt:
      pred = arith::CmpIPredicate::sgt;
      break;
    default:
      break;
    }
  }
  LinearForm f;
  switch (pred) {
  case arith::CmpIPredicate::sle:
    f = diff;
    break;
  case arith::CmpIPredicate::slt:
    f = diff;
    f.constant += 1;
    break;
  case arith::CmpIPredicate::sge:
    // b - a <= 0.
    f = negateConstraint(diff);
    f.constant -= 1;
    break;
  case arith::CmpIPredicate::sgt:
    // b - a + 1 <= 0.
    f = negateConstraint(diff);
    break;
  default:
    return std::nullopt;
  }
  if (negate)
    f = negateConstraint(f);
  return SmallVector<LinearForm>{f};
}
