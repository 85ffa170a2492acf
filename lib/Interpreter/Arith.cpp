//===- Arith.cpp - arith, math and affine ops in the interpreter ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Elementwise integer and float arithmetic, comparisons, conversions and
// math functions (with the NVVM ex2/lg2 approximations), and the affine
// apply/min/max ops. Integers are held sign-extended from their width and
// every float result is rounded once to the op's type.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/bit.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

LogicalResult Compiler::compileArithOp(Operation *op, Instr &I) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](arith::ConstantOp c) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        if (auto ia = dyn_cast<IntegerAttr>(c.getValue())) {
          I.opc = Opc::ConstI;
          I.w = getIntWidth(c.getType());
          I.imm = sext(static_cast<int64_t>(ia.getValue().getZExtValue()), I.w);
          return success();
        }
        auto toDouble = [](APFloat v) {
          bool lost = false;
          v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
          return v.convertToDouble();
        };
        if (auto fa = dyn_cast<FloatAttr>(c.getValue())) {
          I.opc = Opc::ConstF;
          I.fk = *getFKind(c.getType());
          I.fimm = toDouble(fa.getValue());
          return success();
        }
        if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue())) {
          if (!isa<VectorType>(c.getType()))
            return unsupported(op, "only vector dense constants");
          I.opc = Opc::ConstVec;
          Type elt = dense.getElementType();
          if (isa<FloatType>(elt)) {
            for (APFloat v : dense.getValues<APFloat>()) {
              Slot sl;
              sl.f = toDouble(v);
              I.consts.push_back(sl);
            }
          } else {
            unsigned w = getIntWidth(elt);
            for (APInt v : dense.getValues<APInt>()) {
              Slot sl;
              sl.i = sext(static_cast<int64_t>(v.getZExtValue()), w);
              I.consts.push_back(sl);
            }
          }
          return success();
        }
        return unsupported(op, "only scalar integer and float constants");
      })
      .Case([&](arith::AddIOp) { return compileIntOp(op, I, Opc::AddI); })
      .Case([&](arith::SubIOp) { return compileIntOp(op, I, Opc::SubI); })
      .Case([&](arith::MulIOp) { return compileIntOp(op, I, Opc::MulI); })
      .Case([&](arith::DivSIOp) { return compileIntOp(op, I, Opc::DivSI); })
      .Case([&](arith::DivUIOp) { return compileIntOp(op, I, Opc::DivUI); })
      .Case([&](arith::RemSIOp) { return compileIntOp(op, I, Opc::RemSI); })
      .Case([&](arith::RemUIOp) { return compileIntOp(op, I, Opc::RemUI); })
      .Case([&](arith::CeilDivSIOp) {
        return compileIntOp(op, I, Opc::CeilDivSI);
      })
      .Case([&](arith::CeilDivUIOp) {
        return compileIntOp(op, I, Opc::CeilDivUI);
      })
      .Case([&](arith::FloorDivSIOp) {
        return compileIntOp(op, I, Opc::FloorDivSI);
      })
      .Case([&](arith::MinSIOp) { return compileIntOp(op, I, Opc::MinSI); })
      .Case([&](arith::MaxSIOp) { return compileIntOp(op, I, Opc::MaxSI); })
      .Case([&](arith::MinUIOp) { return compileIntOp(op, I, Opc::MinUI); })
      .Case([&](arith::MaxUIOp) { return compileIntOp(op, I, Opc::MaxUI); })
      .Case([&](arith::AndIOp) { return compileIntOp(op, I, Opc::AndI); })
      .Case([&](arith::OrIOp) { return compileIntOp(op, I, Opc::OrI); })
      .Case([&](arith::XOrIOp) { return compileIntOp(op, I, Opc::XOrI); })
      .Case([&](arith::ShLIOp) { return compileIntOp(op, I, Opc::ShLI); })
      .Case([&](arith::ShRSIOp) { return compileIntOp(op, I, Opc::ShRSI); })
      .Case([&](arith::ShRUIOp) { return compileIntOp(op, I, Opc::ShRUI); })
      .Case([&](arith::CmpIOp c) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        I.opc = Opc::CmpI;
        I.w = getIntWidth(getScalarType(c.getLhs().getType()));
        I.imm = static_cast<int64_t>(c.getPredicate());
        return success();
      })
      .Case([&](arith::AddFOp) { return compileFloatOp(op, I, Opc::AddF); })
      .Case([&](arith::SubFOp) { return compileFloatOp(op, I, Opc::SubF); })
      .Case([&](arith::MulFOp) { return compileFloatOp(op, I, Opc::MulF); })
      .Case([&](arith::DivFOp) { return compileFloatOp(op, I, Opc::DivF); })
      .Case([&](arith::RemFOp) { return compileFloatOp(op, I, Opc::RemF); })
      .Case([&](arith::MaximumFOp) {
        return compileFloatOp(op, I, Opc::MaximumF);
      })
      .Case([&](arith::MinimumFOp) {
        return compileFloatOp(op, I, Opc::MinimumF);
      })
      .Case(
          [&](arith::MaxNumFOp) { return compileFloatOp(op, I, Opc::MaxNumF); })
      .Case(
          [&](arith::MinNumFOp) { return compileFloatOp(op, I, Opc::MinNumF); })
      .Case([&](arith::NegFOp) { return compileFloatOp(op, I, Opc::NegF); })
      .Case([&](arith::CmpFOp c) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        I.opc = Opc::CmpF;
        I.fk = *getFKind(getScalarType(c.getLhs().getType()));
        I.imm = static_cast<int64_t>(c.getPredicate());
        return success();
      })
      .Case([&](arith::SelectOp s) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        I.opc = Opc::Select;
        I.scalarCond = !isa<VectorType>(s.getCondition().getType());
        return success();
      })
      .Case([&](arith::ExtFOp) { return compileCastOp(op, I, Opc::ExtF); })
      .Case([&](arith::TruncFOp t) -> LogicalResult {
        if (auto rm = t.getRoundingmodeAttr())
          if (rm.getValue() != arith::RoundingMode::to_nearest_even)
            return unsupported(op, "only the to_nearest_even rounding mode");
        return compileCastOp(op, I, Opc::TruncF);
      })
      .Case([&](arith::SIToFPOp) { return compileCastOp(op, I, Opc::SIToFP); })
      .Case([&](arith::UIToFPOp) { return compileCastOp(op, I, Opc::UIToFP); })
      .Case([&](arith::FPToSIOp) { return compileCastOp(op, I, Opc::FPToSI); })
      .Case([&](arith::FPToUIOp) { return compileCastOp(op, I, Opc::FPToUI); })
      .Case([&](arith::ExtSIOp) { return compileCastOp(op, I, Opc::ExtSI); })
      .Case([&](arith::ExtUIOp) { return compileCastOp(op, I, Opc::ExtUI); })
      .Case([&](arith::TruncIOp) { return compileCastOp(op, I, Opc::TruncI); })
      .Case([&](arith::IndexCastOp) {
        return compileCastOp(op, I, Opc::IndexCast);
      })
      .Case([&](arith::IndexCastUIOp) {
        return compileCastOp(op, I, Opc::IndexCastUI);
      })
      .Case([&](arith::BitcastOp b) -> LogicalResult {
        bool srcF =
            static_cast<bool>(getFKind(getScalarType(b.getIn().getType())));
        bool dstF = static_cast<bool>(getFKind(getScalarType(b.getType())));
        return compileCastOp(op, I,
                             srcF ? (dstF ? Opc::BitcastFToF : Opc::BitcastFToI)
                             : dstF ? Opc::BitcastIToF
                                    : Opc::BitcastIToI);
      })
      // math
      .Case([&](math::Exp2Op) { return compileFloatOp(op, I, Opc::Exp2); })
      .Case([&](math::ExpOp) { return compileFloatOp(op, I, Opc::Exp); })
      .Case([&](math::LogOp) { return compileFloatOp(op, I, Opc::Log); })
      .Case([&](math::Log2Op) { return compileFloatOp(op, I, Opc::Log2); })
      .Case([&](math::SqrtOp) { return compileFloatOp(op, I, Opc::Sqrt); })
      .Case([&](math::RsqrtOp) { return compileFloatOp(op, I, Opc::Rsqrt); })
      .Case([&](math::AbsFOp) { return compileFloatOp(op, I, Opc::AbsF); })
      .Case([&](math::FloorOp) { return compileFloatOp(op, I, Opc::Floor); })
      .Case([&](math::CeilOp) { return compileFloatOp(op, I, Opc::Ceil); })
      .Case([&](math::TanhOp) { return compileFloatOp(op, I, Opc::Tanh); })
      .Case([&](LLVM::CallIntrinsicOp c) -> LogicalResult {
        StringRef name = c.getIntrin();
        // The LLVM intrinsics the GPU kernels call for math.fma and
        // math.absf (NVPTX selects fma.rn.f32 and abs.f32).
        if (name == "llvm.fma.f32" || name == "llvm.fabs.f32") {
          unsigned arity = name == "llvm.fma.f32" ? 3 : 1;
          if (c.getNumOperands() != arity || c.getNumResults() != 1 ||
              !llvm::all_of(c.getOperandTypes(),
                            [](Type t) { return t.isF32(); }) ||
              !c.getResult(0).getType().isF32())
            return unsupported(op, "expected f32 operands and result");
          return compileFloatOp(op, I,
                                arity == 3 ? Opc::Fma : Opc::AbsF);
        }
        std::optional<std::pair<Opc, bool>> kind =
            llvm::StringSwitch<std::optional<std::pair<Opc, bool>>>(name)
                .Cases({"llvm.nvvm.ex2.approx.f32", "llvm.nvvm.ex2.approx.f"},
                       std::make_pair(Opc::Ex2Approx, false))
                .Cases({"llvm.nvvm.ex2.approx.ftz.f32",
                        "llvm.nvvm.ex2.approx.ftz.f"},
                       std::make_pair(Opc::Ex2Approx, true))
                .Cases({"llvm.nvvm.lg2.approx.f", "llvm.nvvm.lg2.approx.f32"},
                       std::make_pair(Opc::Lg2Approx, false))
                .Cases({"llvm.nvvm.lg2.approx.ftz.f",
                        "llvm.nvvm.lg2.approx.ftz.f32"},
                       std::make_pair(Opc::Lg2Approx, true))
                .Default(std::nullopt);
        if (!kind)
          return unsupported(
              op, "intrinsic '" + name +
                      "' (supported: llvm.nvvm.ex2.approx[.ftz].f32, "
                      "llvm.nvvm.lg2.approx[.ftz].f, llvm.fma.f32, "
                      "llvm.fabs.f32)");
        if (c.getNumOperands() != 1 || c.getNumResults() != 1 ||
            !c.getOperand(0).getType().isF32() ||
            !c.getResult(0).getType().isF32())
          return unsupported(op, "expected (f32) -> f32");
        I.opc = kind->first;
        I.flag = kind->second;
        I.fk = FKind::F32;
        return success();
      })
      .Case([&](math::FmaOp) { return compileFloatOp(op, I, Opc::Fma); })
      .Default([&](Operation *) { return unsupported(op, ""); });
}

LogicalResult Compiler::compileAffineOp(Operation *op, Instr &I) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<affine::AffineApplyOp, affine::AffineMinOp, affine::AffineMaxOp>(
          [&](Operation *) -> LogicalResult {
            if (failed(checkScalars(op)))
              return failure();
            I.opc = isa<affine::AffineApplyOp>(op) ? Opc::AffineApply
                    : isa<affine::AffineMinOp>(op) ? Opc::AffineMin
                                                   : Opc::AffineMax;
            I.map = op->getAttrOfType<AffineMapAttr>("map").getValue();
            return success();
          })
      .Default([&](Operation *) { return unsupported(op, ""); });
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

namespace {

bool cmpF(arith::CmpFPredicate p, double a, double b) {
  bool unord = std::isnan(a) || std::isnan(b);
  using P = arith::CmpFPredicate;
  switch (p) {
  case P::AlwaysFalse:
    return false;
  case P::OEQ:
    return !unord && a == b;
  case P::OGT:
    return !unord && a > b;
  case P::OGE:
    return !unord && a >= b;
  case P::OLT:
    return !unord && a < b;
  case P::OLE:
    return !unord && a <= b;
  case P::ONE:
    return !unord && a != b;
  case P::ORD:
    return !unord;
  case P::UEQ:
    return unord || a == b;
  case P::UGT:
    return unord || a > b;
  case P::UGE:
    return unord || a >= b;
  case P::ULT:
    return unord || a < b;
  case P::ULE:
    return unord || a <= b;
  case P::UNE:
    return unord || a != b;
  case P::UNO:
    return unord;
  case P::AlwaysTrue:
    return true;
  }
  return false;
}

bool cmpI(arith::CmpIPredicate p, int64_t a, int64_t b, unsigned w) {
  using P = arith::CmpIPredicate;
  uint64_t ua = zext(a, w), ub = zext(b, w);
  switch (p) {
  case P::eq:
    return a == b;
  case P::ne:
    return a != b;
  case P::slt:
    return a < b;
  case P::sle:
    return a <= b;
  case P::sgt:
    return a > b;
  case P::sge:
    return a >= b;
  case P::ult:
    return ua < ub;
  case P::ule:
    return ua <= ub;
  case P::ugt:
    return ua > ub;
  case P::uge:
    return ua >= ub;
  }
  return false;
}

/// Applies a math function in the op's precision: float's for f16, bf16 and
/// f32 (rounded to the type afterwards), double's for f64.
template <typename FF, typename DF>
inline double mathF(FKind k, double x, FF ff, DF df) {
  if (k == FKind::F64)
    return df(x);
  return roundF(k, static_cast<double>(ff(static_cast<float>(x))));
}

/// The value of the float of kind `k` with the bits `bits`, and back.
double bitsToFloat(uint64_t bits, FKind k) {
  switch (k) {
  case FKind::F16:
    return halfBitsToDouble(static_cast<uint16_t>(bits));
  case FKind::BF16:
    return bfloat16BitsToDouble(static_cast<uint16_t>(bits));
  case FKind::F32:
    return llvm::bit_cast<float>(static_cast<uint32_t>(bits));
  case FKind::F64:
    return llvm::bit_cast<double>(bits);
  }
  return 0;
}

uint64_t floatToBits(double x, FKind k) {
  switch (k) {
  case FKind::F16:
    return doubleToHalfBits(x);
  case FKind::BF16:
    return doubleToBFloat16Bits(x);
  case FKind::F32:
    return llvm::bit_cast<uint32_t>(static_cast<float>(x));
  case FKind::F64:
    return llvm::bit_cast<uint64_t>(x);
  }
  return 0;
}

/// Evaluates an affine expression; nullopt for a division by a value that
/// is not positive.
std::optional<int64_t> evalAffine(AffineExpr e, ArrayRef<int64_t> dims,
                                  ArrayRef<int64_t> syms) {
  switch (e.getKind()) {
  case AffineExprKind::Constant:
    return cast<AffineConstantExpr>(e).getValue();
  case AffineExprKind::DimId:
    return dims[cast<AffineDimExpr>(e).getPosition()];
  case AffineExprKind::SymbolId:
    return syms[cast<AffineSymbolExpr>(e).getPosition()];
  default:
    break;
  }
  auto bin = cast<AffineBinaryOpExpr>(e);
  std::optional<int64_t> l = evalAffine(bin.getLHS(), dims, syms);
  std::optional<int64_t> r = evalAffine(bin.getRHS(), dims, syms);
  if (!l || !r)
    return std::nullopt;
  int64_t x = *l, y = *r;
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return static_cast<int64_t>(static_cast<uint64_t>(x) +
                                static_cast<uint64_t>(y));
  case AffineExprKind::Mul:
    return static_cast<int64_t>(static_cast<uint64_t>(x) *
                                static_cast<uint64_t>(y));
  case AffineExprKind::Mod:
    if (y <= 0)
      return std::nullopt;
    return ((x % y) + y) % y;
  case AffineExprKind::FloorDiv:
    if (y <= 0)
      return std::nullopt;
    return x / y - ((x % y != 0 && x < 0) ? 1 : 0);
  case AffineExprKind::CeilDiv:
    if (y <= 0)
      return std::nullopt;
    return x / y + ((x % y != 0 && x > 0) ? 1 : 0);
  default:
    return std::nullopt;
  }
}

/// Converts a float to a w-bit integer rounding toward zero; NaN and
/// out-of-range values (poison in LLVM) saturate.
int64_t fpToInt(double x, unsigned w, bool isSigned) {
  if (std::isnan(x))
    return 0;
  double t = std::trunc(x);
  if (isSigned) {
    double lo = -std::ldexp(1.0, static_cast<int>(w) - 1);
    double hi = std::ldexp(1.0, static_cast<int>(w) - 1);
    if (t < lo)
      return sext(static_cast<int64_t>(uint64_t(1) << (w - 1)), w);
    if (t >= hi)
      return sext(static_cast<int64_t>((uint64_t(1) << (w - 1)) - 1), w);
    return static_cast<int64_t>(t);
  }
  if (t <= 0)
    return 0;
  double hi = std::ldexp(1.0, static_cast<int>(w));
  if (t >= hi)
    return -1;
  return sext(static_cast<int64_t>(static_cast<uint64_t>(t)), w);
}

/// One element of the operands of an integer binary op in one thread:
/// sign-extended (x, y) and zero-extended (ux, uy) from the op's width.
struct IntOperands {
  int64_t x, y;
  uint64_t ux, uy;
};

/// Runs a one-operand op: Res = fn(A) per element and active thread.
template <typename Fn>
LogicalResult mapUnary(Frame &f, const Instr &I, ArrayRef<int32_t> act, Fn fn) {
  for (uint32_t e = 0; e < I.n; ++e) {
    const Slot *A = f.reg(I.in[0] + e);
    Slot *Res = f.reg(I.out[0] + e);
    for (int32_t t : act)
      Res[t] = fn(A[t]);
  }
  return success();
}

/// Runs a two-operand op: Res = fn(A, B) per element and active thread.
template <typename Fn>
LogicalResult mapBinary(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                        Fn fn) {
  for (uint32_t e = 0; e < I.n; ++e) {
    const Slot *A = f.reg(I.in[0] + e), *B = f.reg(I.in[1] + e);
    Slot *Res = f.reg(I.out[0] + e);
    for (int32_t t : act)
      Res[t] = fn(A[t], B[t]);
  }
  return success();
}

inline Slot intSlot(int64_t v) {
  Slot s;
  s.i = v;
  return s;
}

inline Slot floatSlot(double v) {
  Slot s;
  s.f = v;
  return s;
}

/// An integer binary op of width `w`: fn(IntOperands), truncated to the
/// width and sign-extended.
template <typename Fn>
LogicalResult intBinary(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                        Fn fn) {
  const unsigned w = I.w;
  return mapBinary(f, I, act, [=](Slot a, Slot b) {
    IntOperands o{a.i, b.i, zext(a.i, w), zext(b.i, w)};
    return intSlot(sext(static_cast<int64_t>(fn(o)), w));
  });
}

/// A float binary op: fn(x, y) rounded to the op's type.
template <typename Fn>
LogicalResult floatBinary(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                          Fn fn) {
  const FKind k = I.fk;
  return mapBinary(f, I, act, [=](Slot a, Slot b) {
    return floatSlot(roundF(k, fn(a.f, b.f)));
  });
}

/// A float unary op: fn(x), which rounds where it must.
template <typename Fn>
LogicalResult floatUnary(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                         Fn fn) {
  return mapUnary(f, I, act, [=](Slot a) { return floatSlot(fn(a.f)); });
}

/// A conversion to a float (fn gives the value) or to an integer.
template <typename Fn>
LogicalResult castToFloat(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                          Fn fn) {
  return mapUnary(f, I, act, [=](Slot a) { return floatSlot(fn(a)); });
}
template <typename Fn>
LogicalResult castToInt(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                        Fn fn) {
  return mapUnary(f, I, act, [=](Slot a) { return intSlot(fn(a)); });
}

} // namespace

LogicalResult InterpreterImpl::execArith(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  const unsigned w = I.w, w2 = I.w2;
  const FKind k = I.fk, k2 = I.fk2;

  // Integer division: zero divisors (and signed overflow) are immediate
  // undefined behavior, reported.
  auto checkDivisor = [&](bool isSigned) -> LogicalResult {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e);
      for (int32_t t : act) {
        if (B[t].i == 0)
          return I.op->emitOpError()
                 << "divides by zero in " << describeThread(f, t);
        if (isSigned && w == 64 &&
            A[t].i == std::numeric_limits<int64_t>::min() && B[t].i == -1)
          return I.op->emitOpError()
                 << "overflows (INT64_MIN / -1) in " << describeThread(f, t);
      }
    }
    return success();
  };
  // A division: the divisor check, then the op.
  auto division = [&](bool isSigned, auto fn) -> LogicalResult {
    if (failed(checkDivisor(isSigned)))
      return failure();
    return intBinary(f, I, act, fn);
  };

  using O = IntOperands;
  switch (I.opc) {
  case Opc::ConstI: {
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].i = I.imm;
    return success();
  }
  case Opc::ConstF: {
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].f = I.fimm;
    return success();
  }
  case Opc::AddI:
    return intBinary(f, I, act, [](O o) { return o.ux + o.uy; });
  case Opc::SubI:
    return intBinary(f, I, act, [](O o) { return o.ux - o.uy; });
  case Opc::MulI:
    return intBinary(f, I, act, [](O o) { return o.ux * o.uy; });
  case Opc::DivSI:
    return division(true, [](O o) { return o.x / o.y; });
  case Opc::DivUI:
    return division(false, [](O o) { return o.ux / o.uy; });
  case Opc::RemSI:
    return division(true, [](O o) { return o.x % o.y; });
  case Opc::RemUI:
    return division(false, [](O o) { return o.ux % o.uy; });
  case Opc::CeilDivSI:
    return division(true, [](O o) {
      return o.x / o.y + (o.x % o.y != 0 && (o.x < 0) == (o.y < 0) ? 1 : 0);
    });
  case Opc::CeilDivUI:
    return division(
        false, [](O o) { return o.ux / o.uy + (o.ux % o.uy != 0 ? 1 : 0); });
  case Opc::FloorDivSI:
    return division(true, [](O o) {
      return o.x / o.y - (o.x % o.y != 0 && (o.x < 0) != (o.y < 0) ? 1 : 0);
    });
  case Opc::MinSI:
    return intBinary(f, I, act, [](O o) { return std::min(o.x, o.y); });
  case Opc::MaxSI:
    return intBinary(f, I, act, [](O o) { return std::max(o.x, o.y); });
  case Opc::MinUI:
    return intBinary(f, I, act, [](O o) { return std::min(o.ux, o.uy); });
  case Opc::MaxUI:
    return intBinary(f, I, act, [](O o) { return std::max(o.ux, o.uy); });
  case Opc::AndI:
    return intBinary(f, I, act, [](O o) { return o.x & o.y; });
  case Opc::OrI:
    return intBinary(f, I, act, [](O o) { return o.x | o.y; });
  case Opc::XOrI:
    return intBinary(f, I, act, [](O o) { return o.x ^ o.y; });
  case Opc::ShLI:
    return intBinary(f, I, act,
                     [w](O o) { return o.uy >= w ? 0 : o.ux << o.uy; });
  case Opc::ShRSI:
    return intBinary(f, I, act, [w](O o) {
      return o.uy >= w ? (o.x < 0 ? -1 : 0) : o.x >> o.uy;
    });
  case Opc::ShRUI:
    return intBinary(f, I, act,
                     [w](O o) { return o.uy >= w ? 0 : o.ux >> o.uy; });
  case Opc::CmpI: {
    auto p = static_cast<arith::CmpIPredicate>(I.imm);
    return mapBinary(f, I, act, [=](Slot a, Slot b) {
      return intSlot(cmpI(p, a.i, b.i, w) ? -1 : 0);
    });
  }
  case Opc::AddF:
    return floatBinary(f, I, act, [](double x, double y) { return x + y; });
  case Opc::SubF:
    return floatBinary(f, I, act, [](double x, double y) { return x - y; });
  case Opc::MulF:
    return floatBinary(f, I, act, [](double x, double y) { return x * y; });
  case Opc::DivF:
    return floatBinary(f, I, act, [](double x, double y) { return x / y; });
  case Opc::RemF:
    return floatBinary(f, I, act,
                       [](double x, double y) { return std::fmod(x, y); });
  case Opc::MaximumF:
    return floatBinary(f, I, act,
                       [](double x, double y) { return maximumF(x, y); });
  case Opc::MinimumF:
    return floatBinary(f, I, act,
                       [](double x, double y) { return minimumF(x, y); });
  case Opc::MaxNumF:
    return floatBinary(f, I, act,
                       [](double x, double y) { return maxNumF(x, y); });
  case Opc::MinNumF:
    return floatBinary(f, I, act,
                       [](double x, double y) { return minNumF(x, y); });
  case Opc::NegF:
    return floatUnary(f, I, act, [](double x) { return -x; });
  case Opc::AbsF:
    return floatUnary(f, I, act, [](double x) { return std::fabs(x); });
  case Opc::CmpF: {
    auto p = static_cast<arith::CmpFPredicate>(I.imm);
    return mapBinary(f, I, act, [=](Slot a, Slot b) {
      return intSlot(cmpF(p, a.f, b.f) ? -1 : 0);
    });
  }
  case Opc::Select: {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *C = R(I.in[0] + (I.scalarCond ? 0 : e)), *A = R(I.in[1] + e),
                 *B = R(I.in[2] + e);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t] = C[t].i ? A[t] : B[t];
    }
    return success();
  }
  case Opc::ExtF:
    return mapUnary(f, I, act, [](Slot a) { return a; });
  case Opc::TruncF:
    return castToFloat(f, I, act, [=](Slot a) { return roundF(k2, a.f); });
  case Opc::SIToFP:
    return castToFloat(f, I, act, [=](Slot a) {
      return k2 == FKind::F32 ? static_cast<double>(static_cast<float>(a.i))
                              : roundF(k2, static_cast<double>(a.i));
    });
  case Opc::UIToFP:
    return castToFloat(f, I, act, [=](Slot a) {
      uint64_t u = zext(a.i, w2);
      return k2 == FKind::F32 ? static_cast<double>(static_cast<float>(u))
                              : roundF(k2, static_cast<double>(u));
    });
  case Opc::FPToSI:
    return castToInt(f, I, act, [=](Slot a) { return fpToInt(a.f, w, true); });
  case Opc::FPToUI:
    return castToInt(f, I, act, [=](Slot a) { return fpToInt(a.f, w, false); });
  case Opc::ExtSI:
    return castToInt(f, I, act, [](Slot a) { return a.i; });
  case Opc::ExtUI:
    return castToInt(f, I, act, [=](Slot a) {
      return sext(static_cast<int64_t>(zext(a.i, w2)), w);
    });
  case Opc::TruncI:
  case Opc::IndexCast:
  case Opc::BitcastIToI:
    return castToInt(f, I, act, [=](Slot a) { return sext(a.i, w); });
  case Opc::IndexCastUI:
    return castToInt(f, I, act, [=](Slot a) {
      return w > w2 ? static_cast<int64_t>(zext(a.i, w2)) : sext(a.i, w);
    });
  case Opc::BitcastIToF:
    return castToFloat(f, I, act,
                       [=](Slot a) { return bitsToFloat(zext(a.i, w2), k2); });
  case Opc::BitcastFToF:
    return castToFloat(f, I, act, [=](Slot a) {
      return bitsToFloat(floatToBits(a.f, k), k2);
    });
  case Opc::BitcastFToI:
    return castToInt(f, I, act, [=](Slot a) {
      return sext(static_cast<int64_t>(floatToBits(a.f, k)), w);
    });
  case Opc::Exp2:
    return floatUnary(f, I, act, [=](double x) {
      return mathF(k, x, ::exp2f, [](double v) { return std::exp2(v); });
    });
  case Opc::Exp:
    return floatUnary(f, I, act, [=](double x) {
      return mathF(k, x, ::expf, [](double v) { return std::exp(v); });
    });
  case Opc::Log:
    return floatUnary(f, I, act, [=](double x) {
      return mathF(k, x, ::logf, [](double v) { return std::log(v); });
    });
  case Opc::Log2:
    return floatUnary(f, I, act, [=](double x) {
      return mathF(k, x, ::log2f, [](double v) { return std::log2(v); });
    });
  case Opc::Tanh:
    return floatUnary(f, I, act, [=](double x) {
      return mathF(k, x, ::tanhf, [](double v) { return std::tanh(v); });
    });
  case Opc::Sqrt:
    return floatUnary(f, I, act,
                      [=](double x) { return roundF(k, std::sqrt(x)); });
  case Opc::Rsqrt:
    return floatUnary(f, I, act,
                      [=](double x) { return roundF(k, 1.0 / std::sqrt(x)); });
  case Opc::Floor:
    return floatUnary(f, I, act, [](double x) { return std::floor(x); });
  case Opc::Ceil:
    return floatUnary(f, I, act, [](double x) { return std::ceil(x); });
  case Opc::Fma: {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e), *C = R(I.in[2] + e);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act) {
        if (I.fk == FKind::F32)
          Res[t].f =
              std::fma(static_cast<float>(A[t].f), static_cast<float>(B[t].f),
                       static_cast<float>(C[t].f));
        else
          Res[t].f = roundF(I.fk, std::fma(A[t].f, B[t].f, C[t].f));
      }
    }
    return success();
  }
  case Opc::Ex2Approx:
  case Opc::Lg2Approx: {
    const Slot *A = R(I.in[0]);
    Slot *Res = R(I.out[0]);
    bool ex2 = I.opc == Opc::Ex2Approx;
    for (int32_t t : act) {
      float x = static_cast<float>(A[t].f);
      if (I.flag)
        x = flushF32(x);
      float y = ex2 ? ::exp2f(x) : ::log2f(x);
      if (I.flag)
        y = flushF32(y);
      Res[t].f = y;
    }
    return success();
  }
  default:
    return reportUnimplemented(I);
  }
}

LogicalResult InterpreterImpl::execAffine(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  unsigned nd = I.map.getNumDims();
  SmallVector<int64_t, 4> dims(nd), syms(I.map.getNumSymbols());
  Slot *Res = R(I.out[0]);
  for (int32_t t : act) {
    for (unsigned k = 0; k < I.in.size(); ++k)
      (k < nd ? dims[k] : syms[k - nd]) = R(I.in[k])[t].i;
    std::optional<int64_t> best;
    for (AffineExpr expr : I.map.getResults()) {
      std::optional<int64_t> v = evalAffine(expr, dims, syms);
      if (!v)
        return I.op->emitOpError()
               << "divides by zero (or by a negative value) in "
               << describeThread(f, t);
      if (!best || (I.opc == Opc::AffineMin && *v < *best) ||
          (I.opc == Opc::AffineMax && *v > *best))
        best = v;
    }
    Res[t].i = *best;
  }
  return success();
}
