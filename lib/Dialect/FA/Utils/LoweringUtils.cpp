//===- LoweringUtils.cpp - helpers shared by fa's lowerings ---------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::lowering;

SmallVector<Value> lowering::buildGeneric(OpBuilder &b, Location loc,
                                        ValueRange ins, ValueRange outs,
                                        ArrayRef<AffineMap> maps,
                                        ArrayRef<utils::IteratorType> iterators,
                                        GenericBody body) {
  SmallVector<Type> resultTypes;
  for (Value o : outs)
    resultTypes.push_back(o.getType());
  auto generic = linalg::GenericOp::create(
      b, loc, resultTypes, ins, outs, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> yielded = body(nb, nloc, args);
        linalg::YieldOp::create(nb, nloc, yielded);
      });
  return SmallVector<Value>(generic.getResults());
}

Value lowering::buildFilled(OpBuilder &b, Location loc,
                          ArrayRef<OpFoldResult> sizes, Type elementType,
                          TypedAttr value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, elementType);
  Value cst = arith::ConstantOp::create(b, loc, value);
  return linalg::FillOp::create(b, loc, cst, empty).getResult(0);
}

Value lowering::toF32(OpBuilder &b, Location loc, Value v) {
  Type f32 = b.getF32Type();
  if (v.getType() == f32)
    return v;
  return arith::ExtFOp::create(b, loc, f32, v);
}

Value lowering::fromF32(OpBuilder &b, Location loc, Value v, Type type) {
  if (type == v.getType())
    return v;
  return arith::TruncFOp::create(b, loc, type, v);
}

Value lowering::negInf(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(
      b, loc,
      b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
}

Value lowering::loopIndex(OpBuilder &b, Location loc, int64_t dim) {
  return linalg::IndexOp::create(b, loc, dim);
}

namespace {
/// The arithmetic that buildFastExp and buildSoftmaxExp share: f32 and i32
/// constants shaped like x, contractible multiply-adds, and the range
/// reduction.
struct ExpBuilder {
  ExpBuilder(OpBuilder &b, Location loc, Value x)
      : b(b), loc(loc), vt(dyn_cast<VectorType>(x.getType())),
        intType(vt ? Type(VectorType::get(vt.getShape(), b.getI32Type()))
                   : Type(b.getI32Type())) {}

  Value cf(float v) {
    if (vt)
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(vt, b.getF32FloatAttr(v)));
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value ci(int32_t v) {
    if (vt)
      return arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(cast<ShapedType>(intType),
                                 b.getI32IntegerAttr(v)));
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  }
  /// p * q + r, contractible: one FMA where the target has them, a
  /// multiply and an add (not a libm fmaf call, as math.fma would be)
  /// elsewhere.
  Value fma(Value p, Value q, Value r) {
    auto contract = arith::FastMathFlagsAttr::get(
        b.getContext(), arith::FastMathFlags::contract);
    Value m = arith::MulFOp::create(b, loc, p, q, contract);
    return arith::AddFOp::create(b, loc, m, r, contract);
  }

  /// Range reduction: x = n ln2 + r, |r| <= ln2 / 2 (Cody-Waite, two
  /// parts). n = round(x log2(e)) by adding 1.5 * 2^23 (t): the sum's low
  /// mantissa bits are n (no rounding instruction, no float -> int
  /// conversion); fx = n as a float.
  struct Reduced {
    Value t, fx, r;
  };
  static constexpr float kMagic = 12582912.0f; // 1.5 * 2^23
  static constexpr int32_t kMagicBits = 0x4B400000;
  Reduced reduce(Value x) {
    Value t = fma(x, cf(1.44269504088896341f), cf(kMagic));
    Value fx = arith::SubFOp::create(b, loc, t, cf(kMagic));
    Value r = fma(fx, cf(-0.693359375f), x);
    r = fma(fx, cf(2.12194440e-4f), r);
    return {t, fx, r};
  }
  Value bitsOf(Value f) { return arith::BitcastOp::create(b, loc, intType, f); }

  OpBuilder &b;
  Location loc;
  VectorType vt;
  Type intType;
};
} // namespace

Value lowering::buildFastExp(OpBuilder &b, Location loc, Value x) {
  ExpBuilder e(b, loc, x);
  // Lanes outside [lo, hi] compute garbage that the selects at the end
  // replace.
  const float lo = -87.3365447505531f, hi = 88.0f;
  ExpBuilder::Reduced red = e.reduce(x);
  Value r = red.r;
  // exp(r) = 1 + r + r^2 P(r) (Cephes expf coefficients).
  Value p = e.cf(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                  1.6666665459e-1f, 5.0000001201e-1f})
    p = e.fma(p, r, e.cf(c));
  Value r2 = arith::MulFOp::create(b, loc, r, r);
  Value y = arith::AddFOp::create(b, loc, e.fma(p, r2, r), e.cf(1.0f));
  // 2^n from the exponent bits: n = the bits of t minus those of the
  // magic number.
  Value n = arith::SubIOp::create(b, loc, e.bitsOf(red.t),
                                  e.ci(ExpBuilder::kMagicBits));
  Value bits = arith::ShLIOp::create(
      b, loc, arith::AddIOp::create(b, loc, n, e.ci(127)), e.ci(23));
  Value pow2 = arith::BitcastOp::create(b, loc, x.getType(), bits);
  Value res = arith::MulFOp::create(b, loc, y, pow2);
  // Below the range (incl. -inf): 0. Above: +inf. NaN stays NaN.
  Value under =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, e.cf(lo));
  res = arith::SelectOp::create(b, loc, under, e.cf(0.0f), res);
  Value over =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, e.cf(hi));
  res = arith::SelectOp::create(
      b, loc, over, e.cf(std::numeric_limits<float>::infinity()), res);
  Value nan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
  return arith::SelectOp::create(b, loc, nan, x, res);
}

Value lowering::buildSoftmaxExp(OpBuilder &b, Location loc, Value x) {
  ExpBuilder e(b, loc, x);
  const float lo = -87.3365447505531f;
  ExpBuilder::Reduced red = e.reduce(x);
  // exp(r) = 1 + r (1 + r P(r)), P Cephes expf's, in one Horner chain.
  Value p = e.cf(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                  1.6666665459e-1f, 5.0000001201e-1f, 1.0f, 1.0f})
    p = e.fma(p, red.r, e.cf(c));
  // 2^n: the bits of t minus those of the magic number are n; plus the
  // bias 127, shifted into the exponent field (n >= -126 on [lo, 0]).
  Value bits = arith::ShLIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, e.bitsOf(red.t),
                            e.ci(127 - ExpBuilder::kMagicBits)),
      e.ci(23));
  Value res = arith::MulFOp::create(
      b, loc, p, arith::BitcastOp::create(b, loc, x.getType(), bits));
  // Below the range (incl. -inf): 0. A NaN x made every step NaN.
  Value under =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, e.cf(lo));
  return arith::SelectOp::create(b, loc, under, e.cf(0.0f), res);
}

LogicalResult mlir::fa::lowering::approximateTanhsIn(Operation *root) {
  SmallVector<Operation *> tanhs;
  root->walk([&](math::TanhOp t) { tanhs.push_back(t); });
  return approximateTanh(tanhs);
}

LogicalResult mlir::fa::lowering::approximateTanh(ArrayRef<Operation *> tanhs) {
  if (tanhs.empty())
    return success();
  RewritePatternSet patterns(tanhs.front()->getContext());
  populatePolynomialApproximateTanhPattern(patterns);
  return applyOpPatternsGreedily(tanhs, std::move(patterns));
}

StringRef mlir::fa::lowering::getNVVMIntrinsicName(Operation *op) {
  if (op->getNumResults() != 1 ||
      !getElementTypeOrSelf(op->getResult(0).getType()).isF32())
    return StringRef();
  if (isa<math::Exp2Op>(op))
    return "llvm.nvvm.ex2.approx.f32";
  if (isa<math::Log2Op>(op))
    return "llvm.nvvm.lg2.approx.f";
  if (isa<math::FmaOp>(op))
    return "llvm.fma.f32";
  if (isa<math::AbsFOp>(op))
    return "llvm.fabs.f32";
  return StringRef();
}

SmallVector<Value> lowering::buildScoreTile(OpBuilder &b, Location loc,
                                            const AttentionSemantics &sem,
                                            const ScoreTileOperands &ops,
                                            bool withDerivative) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  AffineExpr d0, d1;
  bindDims(ctx, d0, d1);
  auto map2 = [&](ArrayRef<AffineExpr> r) {
    return AffineMap::get(2, 0, r, ctx);
  };
  SmallVector<Value> ins = {ops.products};
  SmallVector<AffineMap> maps = {map2({d0, d1})};
  if (ops.maskTile) {
    ins.push_back(ops.maskTile);
    maps.push_back(map2({d0, d1}));
  }
  if (ops.qSegTile) {
    ins.push_back(ops.qSegTile);
    maps.push_back(map2({d0}));
    ins.push_back(ops.kSegTile);
    maps.push_back(map2({d1}));
  }
  withDerivative = withDerivative && sem.hasSoftcap();
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, ops.products);
  SmallVector<Value> outs = {tensor::EmptyOp::create(b, loc, sizes, f32)};
  if (withDerivative)
    outs.push_back(tensor::EmptyOp::create(b, loc, sizes, f32));
  maps.append(outs.size(), map2({d0, d1}));
  return buildGeneric(
      b, loc, ins, outs, maps,
      {utils::IteratorType::parallel, utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location nl, ValueRange a) -> SmallVector<Value> {
        Value scaleC =
            arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(ops.scale));
        Value scaled = arith::MulFOp::create(nb, nl, a[0], scaleC);
        Value qPos =
            arith::AddIOp::create(nb, nl, ops.q0, loopIndex(nb, nl, 0));
        Value kPos =
            arith::AddIOp::create(nb, nl, ops.k0, loopIndex(nb, nl, 1));
        // Keys past the key end are never visited; the positional rules
        // and the mask remove keys inside the tile.
        Value keep =
            sem.keepKey(nb, nl, qPos, kPos, /*keyEnd=*/Value(), ops.diagOffset);
        Value x = sem.modifyScore(nb, nl, scaled, qPos, kPos, ops.diagOffset,
                                  ops.slope);
        unsigned next = 1;
        if (ops.maskTile)
          sem.applyMaskElement(nb, nl, a[next++], x, keep);
        if (ops.qSegTile)
          sem.applySegments(nb, nl, a[next], a[next + 1], keep);
        AttentionSemantics::ModIndices idx{ops.batch, ops.head, qPos,
                                           kPos,      ops.nq,   ops.nk};
        x = sem.applyScoreMod(nb, nl, x, idx, ops.modOperands);
        sem.applyMaskMod(nb, nl, idx, ops.modOperands, keep);
        SmallVector<Value> results = {
            AttentionSemantics::removeUnkept(nb, nl, keep, x)};
        if (withDerivative)
          results.push_back(sem.scoreDerivative(nb, nl, scaled));
        return results;
      });
}
