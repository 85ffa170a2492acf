//===- RaisingTracer.h - Element-level view of tensor chains ----*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The analysis behind fa-raise-attention. Front ends write attention as
// chains of linalg ops on tensors whose shapes and layouts vary (batch and
// heads folded by reshapes around batch_matmul, transposes as permutation
// copies, broadcasts as separate generics or in indexing maps, reductions
// into [.., 1] tensors, casts around the softmax). The tracer removes that
// variation: it describes one element of a tensor value, at symbolic indices
// over a canonical index space, as a scalar expression, looking through
// reshapes, permutations, broadcasts and elementwise bodies, and stopping at
// contractions, function arguments and anything it does not understand.
// The raising pattern then matches attention on expressions instead of on
// ops.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_DIALECT_FA_TRANSFORMS_RAISINGTRACER_H
#define FA_LIB_DIALECT_FA_TRANSFORMS_RAISINGTRACER_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SetVector.h"

#include <deque>
#include <optional>
#include <string>

namespace mlir {
namespace fa {
namespace raising {

enum class ExprKind {
  /// A scalar constant (`constant`).
  Const,
  /// The value of a loop index (`index`, an affine expression of the
  /// canonical dims).
  Index,
  /// A scalar SSA value defined outside every traced body (`value`).
  Scalar,
  /// An element of a tensor the tracer stops at (`value` at `indices`).
  Read,
  /// A scalar op of a linalg body (`op`) applied to `operands`.
  Op,
  /// A reduction over the fresh dim `dim`: `operands` = {init, element},
  /// `op` the combining op of the body.
  Reduce,
  /// linalg.softmax or fa.softmax: `operands` = {input element over `dim`},
  /// `index` the position along the normalized dim, `op` the softmax op.
  Softmax,
};

struct Expr {
  ExprKind kind;
  Type type;
  Attribute constant;
  AffineExpr index;
  Value value;
  SmallVector<AffineExpr> indices;
  Operation *op = nullptr;
  SmallVector<const Expr *> operands;
  unsigned dim = 0;
  /// The tensor element this expression was read from, when it came from
  /// a read of a tensor value (the tensor and its indices).
  Value originTensor;
  SmallVector<AffineExpr> originIndices;
  /// The number of nodes of the expression as a tree (shared operands
  /// counted each time), saturating: what every recursive walk costs.
  uint64_t treeSize = 1;
};

/// Whether the tracer looks through computing bodies or only through views.
enum class TraceMode {
  /// Reshapes, permutations, broadcasts, and elementwise bodies that only
  /// multiply or divide by a constant or convert the element type.
  Views,
  /// Every elementwise body and single-dim reduction.
  Full,
};

class Tracer {
public:
  explicit Tracer(MLIRContext *ctx) : ctx(ctx) {}

  /// A new canonical dim of `size` (ShapedType::kDynamic when unknown).
  unsigned addDim(int64_t size);
  int64_t getDimSize(unsigned d) const { return sizes[d]; }
  AffineExpr getDim(unsigned d) const { return getAffineDimExpr(d, ctx); }
  unsigned getNumDims() const { return sizes.size(); }

  /// The element of `tensor` at `indices` (affine expressions of the
  /// canonical dims), or null with `getError()` set.
  const Expr *read(Value tensor, ArrayRef<AffineExpr> indices, TraceMode mode);

  /// `e` with dim `from` replaced by `to`.
  const Expr *substitute(const Expr *e, unsigned from, AffineExpr to);

  const Expr *makeConst(Attribute value, Type type);
  /// A read of `tensor` at `indices` that looks through nothing.
  const Expr *makeRead(Value tensor, ArrayRef<AffineExpr> indices);
  const Expr *makeOp(Operation *op, ArrayRef<const Expr *> operands);

  /// Why the last failed read failed.
  const std::string &getError() const { return error; }
  /// The first view a read could not look through (it read the view's
  /// result as it is instead), for messages.
  const std::string &getNote() const { return firstNote; }
  void note(const llvm::Twine &message) {
    if (firstNote.empty())
      firstNote = message.str();
  }
  void clearError() { error.clear(); }

  /// Every op a read looked through or stopped at (contractions, reductions,
  /// views, elementwise ops).
  const llvm::SetVector<Operation *> &getVisited() const { return visited; }
  void addVisited(Operation *op) { visited.insert(op); }

private:
  const Expr *fail(Operation *op, const llvm::Twine &message);
  Expr *make(ExprKind kind, Type type);
  const Expr *readLinalg(linalg::LinalgOp op, OpResult result,
                         ArrayRef<AffineExpr> indices, TraceMode mode);
  const Expr *evalBodyValue(linalg::LinalgOp op, ArrayRef<AffineExpr> loops,
                            Value v, TraceMode mode);

  MLIRContext *ctx;
  SmallVector<int64_t> sizes;
  std::deque<Expr> storage;
  llvm::SetVector<Operation *> visited;
  std::string error;
  std::string firstNote;
  /// The values of the body being evaluated, so that a DAG of body ops is
  /// evaluated once per value.
  llvm::DenseMap<Value, const Expr *> *bodyMemo = nullptr;
  unsigned budget = 1u << 12;
};

/// `e` with (x floordiv c) * c + x mod c folded back to x, the form the
/// reads compare indices in.
AffineExpr canonicalizeIndex(AffineExpr e);

/// Structural equality (reduction dims compared up to renaming).
bool isEqual(Tracer &tracer, const Expr *a, const Expr *b);

/// The canonical dims `e` depends on (those bound by its reductions and
/// softmaxes excluded).
void collectDims(const Expr *e, llvm::SmallSetVector<unsigned, 8> &dims);

/// The float value of a Const, looking through nothing else.
std::optional<double> getConstFloat(const Expr *e);
std::optional<int64_t> getConstInt(const Expr *e);

/// `e` an Op node of type OpTy (null otherwise).
template <typename OpTy> OpTy getOp(const Expr *e) {
  return e && e->kind == ExprKind::Op ? dyn_cast<OpTy>(e->op) : OpTy();
}

/// A short human-readable description of `e` for remarks ("arith.select",
/// "a read of %arg3", "the constant 2.0").
std::string describe(const Expr *e);

/// A linear form sum(coef[d] * d) + constant over the canonical dims.
struct LinearForm {
  llvm::SmallDenseMap<unsigned, int64_t, 4> coef;
  int64_t constant = 0;
};

/// The integer `e` computes as a linear form of loop indices (through
/// index casts, extensions, additions, subtractions and multiplications by
/// constants), if it is one and no step wraps around in its type (the dims'
/// sizes bound the indices; dynamic sizes are assumed below 2^31).
std::optional<LinearForm> getLinearForm(Tracer &tracer, const Expr *e);

/// `x` when `e` is the absolute value of `x`: `math.absi`, `math.absf`, or
/// a select between `x` and its negation on the sign of `x` (the form
/// StableHLO's `abs` takes).
const Expr *getAbsOperand(Tracer &tracer, const Expr *e);

/// The boolean `e` as a conjunction of constraints `form <= 0` (negated
/// when `negate`), if it is one; an empty list is "always true". A bound on
/// an absolute value, `|x| <= y`, is the two constraints `x <= y` and
/// `-x <= y`.
std::optional<SmallVector<LinearForm>>
getConstraints(Tracer &tracer, const Expr *e, bool negate = false);

} // namespace raising
} // namespace fa
} // namespace mlir

#endif // FA_LIB_DIALECT_FA_TRANSFORMS_RAISINGTRACER_H
