//===- LoweringUtils.cpp - helpers shared by fa's lowerings ---------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

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

Value lowering::guardedMax(OpBuilder &b, Location loc, Value m) {
  Value isNegInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, m,
                                         negInf(b, loc));
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  return arith::SelectOp::create(b, loc, isNegInf, zero, m);
}

static Value isZero(OpBuilder &b, Location loc, Value x, Value &zero) {
  zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, zero);
}

Value lowering::guardedDivide(OpBuilder &b, Location loc, Value num,
                              Value den) {
  Value zero;
  Value empty = isZero(b, loc, den, zero);
  Value div = arith::DivFOp::create(b, loc, num, den);
  return arith::SelectOp::create(b, loc, empty, zero, div);
}

Value lowering::guardedLogSumExp(OpBuilder &b, Location loc, Value m,
                                 Value l) {
  Value zero;
  Value empty = isZero(b, loc, l, zero);
  Value lse = arith::AddFOp::create(b, loc, m, math::LogOp::create(b, loc, l));
  return arith::SelectOp::create(b, loc, empty, negInf(b, loc), lse);
}

Value lowering::maskedProduct(OpBuilder &b, Location loc, Value p, Value v) {
  Value prod = arith::MulFOp::create(b, loc, p, v);
  Value zero;
  Value masked = isZero(b, loc, p, zero);
  return arith::SelectOp::create(b, loc, masked, zero, prod);
}

Value lowering::loopIndex(OpBuilder &b, Location loc, int64_t dim) {
  return linalg::IndexOp::create(b, loc, dim);
}
