//===- Vector.cpp - vector ops in the interpreter -------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A vector value takes one register slot per element, so the vector ops that
// only move data (extract, insert, from_elements, shuffle, broadcast,
// shape_cast, transpose, extract_strided_slice, and the !llvm.struct
// extractvalue and insertvalue) compile to a Move: the source slot of each
// result element. vector.reduction combines the elements in order;
// vector.load and vector.store are memory ops (MemRef.cpp).
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;
using llvm::formatv;

LogicalResult Compiler::compileVectorOp(Operation *op, Instr &I) {
  if (isa<vector::FMAOp>(op))
    return compileFloatOp(op, I, Opc::Fma);
  if (!isa<vector::ExtractOp, vector::InsertOp, vector::FromElementsOp,
           vector::ShuffleOp, vector::BroadcastOp, vector::ShapeCastOp,
           vector::TransposeOp, vector::ExtractStridedSliceOp,
           vector::ReductionOp, vector::LoadOp, vector::StoreOp>(op))
    return unsupported(op, "");
  for (Type t : op->getOperandTypes())
    if (!isa<MemRefType>(t) && failed(checkScalarType(op, t)))
      return failure();
  for (Type t : op->getResultTypes())
    if (failed(checkScalarType(op, t)))
      return failure();
  if (op->getNumResults() == 1)
    I.n = getNumSlots(op->getResult(0).getType());
  // Pure data movement: every result element is a copy of one source slot.
  auto linearPosition = [&](ArrayRef<int64_t> pos, ArrayRef<int64_t> shape,
                            int64_t &off) -> LogicalResult {
    SmallVector<int64_t, 4> strides = getRowMajorStrides(shape);
    off = 0;
    for (auto [d, p] : llvm::enumerate(pos)) {
      if (ShapedType::isDynamic(p))
        return unsupported(op, "dynamic positions");
      if (p < 0 || p >= shape[d])
        return unsupported(op, formatv("position {0} of dim {1} (poison or out "
                                       "of range)",
                                       p, d)
                                   .str());
      off += p * strides[d];
    }
    return success();
  };
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    int64_t off;
    if (failed(linearPosition(ex.getStaticPosition(),
                              ex.getSourceVectorType().getShape(), off)))
      return failure();
    I.opc = Opc::Move;
    uint32_t base = slotOf(ex.getSource());
    for (uint32_t e = 0; e < I.n; ++e)
      I.src.push_back(base + off + e);
    return success();
  }
  if (auto ins = dyn_cast<vector::InsertOp>(op)) {
    int64_t off;
    if (failed(linearPosition(ins.getStaticPosition(),
                              ins.getDestVectorType().getShape(), off)))
      return failure();
    I.opc = Opc::Move;
    uint32_t dest = slotOf(ins.getDest()), val = slotOf(ins.getValueToStore());
    uint32_t nv = getNumSlots(ins.getValueToStore().getType());
    for (uint32_t e = 0; e < I.n; ++e)
      I.src.push_back(e >= off && e < off + nv ? val + (e - off) : dest + e);
    return success();
  }
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    I.opc = Opc::Move;
    for (Value v : fe.getElements())
      I.src.push_back(slotOf(v));
    return success();
  }
  if (auto sh = dyn_cast<vector::ShuffleOp>(op)) {
    VectorType t1 = sh.getV1VectorType();
    if (t1.getRank() == 0)
      return unsupported(op, "0-D operands");
    int64_t len1 = t1.getShape()[0];
    int64_t row = t1.getNumElements() / len1;
    uint32_t b1 = slotOf(sh.getV1()), b2 = slotOf(sh.getV2());
    I.opc = Opc::Move;
    for (int64_t m : sh.getMask()) {
      if (m < 0)
        return unsupported(op, "poison mask entries");
      uint32_t base = m < len1 ? b1 + m * row : b2 + (m - len1) * row;
      for (int64_t e = 0; e < row; ++e)
        I.src.push_back(base + e);
    }
    return success();
  }
  if (auto bc = dyn_cast<vector::BroadcastOp>(op)) {
    SmallVector<int64_t, 4> rs = getVectorShape(bc.getType());
    SmallVector<int64_t, 4> ss = getVectorShape(bc.getSource().getType());
    SmallVector<int64_t, 4> sstr = getRowMajorStrides(ss);
    uint32_t base = slotOf(bc.getSource());
    size_t lead = rs.size() - ss.size();
    I.opc = Opc::Move;
    for (uint32_t e = 0; e < I.n; ++e) {
      SmallVector<int64_t, 4> idx = delinearize(e, rs);
      int64_t off = 0;
      for (size_t d = 0; d < ss.size(); ++d)
        off += (ss[d] == 1 ? 0 : idx[lead + d]) * sstr[d];
      I.src.push_back(base + off);
    }
    return success();
  }
  if (auto sc = dyn_cast<vector::ShapeCastOp>(op)) {
    I.opc = Opc::Move;
    uint32_t base = slotOf(sc.getSource());
    for (uint32_t e = 0; e < I.n; ++e)
      I.src.push_back(base + e);
    return success();
  }
  if (auto tr = dyn_cast<vector::TransposeOp>(op)) {
    ArrayRef<int64_t> perm = tr.getPermutation();
    SmallVector<int64_t, 4> rs = getVectorShape(tr.getType());
    SmallVector<int64_t, 4> sstr =
        getRowMajorStrides(tr.getSourceVectorType().getShape());
    uint32_t base = slotOf(tr.getVector());
    I.opc = Opc::Move;
    for (uint32_t e = 0; e < I.n; ++e) {
      SmallVector<int64_t, 4> idx = delinearize(e, rs);
      int64_t off = 0;
      for (size_t d = 0; d < rs.size(); ++d)
        off += idx[d] * sstr[perm[d]];
      I.src.push_back(base + off);
    }
    return success();
  }
  if (auto ss = dyn_cast<vector::ExtractStridedSliceOp>(op)) {
    SmallVector<int64_t, 4> offsets, strides;
    for (Attribute a : ss.getOffsets())
      offsets.push_back(cast<IntegerAttr>(a).getInt());
    for (Attribute a : ss.getStrides())
      strides.push_back(cast<IntegerAttr>(a).getInt());
    SmallVector<int64_t, 4> rs = getVectorShape(ss.getType());
    SmallVector<int64_t, 4> sstr =
        getRowMajorStrides(ss.getSourceVectorType().getShape());
    uint32_t base = slotOf(ss.getSource());
    I.opc = Opc::Move;
    for (uint32_t e = 0; e < I.n; ++e) {
      SmallVector<int64_t, 4> idx = delinearize(e, rs);
      int64_t off = 0;
      for (size_t d = 0; d < rs.size(); ++d) {
        int64_t i = idx[d];
        if (d < offsets.size())
          i = offsets[d] + i * strides[d];
        off += i * sstr[d];
      }
      I.src.push_back(base + off);
    }
    return success();
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    I.opc = Opc::Reduction;
    I.n = getNumSlots(red.getVector().getType());
    I.imm = static_cast<int64_t>(red.getKind());
    I.flag = static_cast<bool>(red.getAcc());
    Type elt = red.getType();
    if (auto fk = getFKind(elt))
      I.fk = *fk;
    I.w = getIntWidth(elt);
    using K = vector::CombiningKind;
    bool isFloatKind = llvm::is_contained(
        {K::ADD, K::MUL, K::MINNUMF, K::MAXNUMF, K::MINIMUMF, K::MAXIMUMF},
        red.getKind());
    if (getFKind(elt) && !isFloatKind)
      return unsupported(op, "an integer combining kind on floats");
    return success();
  }
  // vector.load / vector.store.
  Value base = isa<vector::LoadOp>(op) ? cast<vector::LoadOp>(op).getBase()
                                       : cast<vector::StoreOp>(op).getBase();
  VectorType vt = isa<vector::LoadOp>(op)
                      ? cast<vector::LoadOp>(op).getVectorType()
                      : cast<vector::StoreOp>(op).getVectorType();
  auto mt = cast<MemRefType>(base.getType());
  auto ek = getEKind(mt.getElementType());
  if (!ek)
    return unsupported(op,
                       formatv("memrefs of {0}", mt.getElementType()).str());
  if (vt.getRank() > mt.getRank())
    return unsupported(op, "a vector of higher rank than the memref");
  I.opc = isa<vector::LoadOp>(op) ? Opc::Load : Opc::Store;
  I.ek = *ek;
  I.vshape.assign(vt.getShape().begin(), vt.getShape().end());
  I.n = static_cast<uint32_t>(vt.getNumElements());
  if (auto a = op->getAttrOfType<IntegerAttr>("alignment"))
    I.align = a.getInt();
  return success();
}

LogicalResult Compiler::compileLLVMOp(Operation *op, Instr &I) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<LLVM::UndefOp, LLVM::PoisonOp, LLVM::ZeroOp>(
          [&](Operation *) -> LogicalResult {
            if (failed(checkScalars(op)))
              return failure();
            I.opc = Opc::ConstVec;
            Type t = op->getResult(0).getType();
            SmallVector<Type> fields;
            if (auto st = dyn_cast<LLVM::LLVMStructType>(t))
              llvm::append_range(fields, st.getBody());
            else
              fields.assign(I.n, getScalarType(t));
            bool undef = !isa<LLVM::ZeroOp>(op);
            for (Type ft : fields) {
              Slot sl;
              // Undefined floats are NaN, so that a use shows.
              if (getFKind(ft)) {
                sl.f = undef ? std::numeric_limits<double>::quiet_NaN() : 0.0;
              } else {
                sl.i = 0;
              }
              I.consts.push_back(sl);
            }
            return success();
          })
      .Case([&](LLVM::ExtractValueOp ex) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        ArrayRef<int64_t> pos = ex.getPosition();
        if (pos.size() != 1 || !isFlatStruct(ex.getContainer().getType()) ||
            isa<LLVM::LLVMStructType>(ex.getType()))
          return unsupported(op, "only one position into a struct of scalars");
        I.opc = Opc::Move;
        I.src.push_back(slotOf(ex.getContainer()) + pos[0]);
        return success();
      })
      .Case([&](LLVM::InsertValueOp ins) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        ArrayRef<int64_t> pos = ins.getPosition();
        if (pos.size() != 1 || !isFlatStruct(ins.getContainer().getType()) ||
            isa<LLVM::LLVMStructType>(ins.getValue().getType()))
          return unsupported(op, "only one position into a struct of scalars");
        I.opc = Opc::Move;
        uint32_t dest = slotOf(ins.getContainer()),
                 val = slotOf(ins.getValue());
        for (uint32_t e = 0; e < I.n; ++e)
          I.src.push_back(e == pos[0] ? val : dest + e);
        return success();
      })
      .Default([&](Operation *) { return unsupported(op, ""); });
}

LogicalResult InterpreterImpl::execVector(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  switch (I.opc) {
  case Opc::ConstVec: {
    for (uint32_t e = 0; e < I.n; ++e) {
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t] = I.consts[e];
    }
    return success();
  }
  case Opc::Move: {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.src[e]);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t] = A[t];
    }
    return success();
  }
  case Opc::Reduction:
    return execReduction(f, I, act);
  default:
    return reportUnimplemented(I);
  }
}

LogicalResult InterpreterImpl::execReduction(Frame &f, const Instr &I,
                                             ArrayRef<int32_t> act) {
  using K = vector::CombiningKind;
  auto kind = static_cast<K>(I.imm);
  const bool isFloat = I.w == 0;
  const unsigned w = I.w;
  Slot *Res = f.reg(I.out[0]);
  for (int32_t t : act) {
    uint32_t first = 0;
    Slot acc;
    if (I.flag) {
      acc = f.reg(I.in[1])[t];
    } else {
      acc = f.reg(I.in[0])[t];
      first = 1;
    }
    for (uint32_t e = first; e < I.n; ++e) {
      Slot x = f.reg(I.in[0] + e)[t];
      if (isFloat) {
        double a = acc.f, b = x.f, r;
        switch (kind) {
        case K::ADD:
          r = a + b;
          break;
        case K::MUL:
          r = a * b;
          break;
        case K::MAXNUMF:
          r = maxNumF(a, b);
          break;
        case K::MINNUMF:
          r = minNumF(a, b);
          break;
        case K::MAXIMUMF:
          r = maximumF(a, b);
          break;
        default:
          r = minimumF(a, b);
          break;
        }
        acc.f = roundF(I.fk, r);
        continue;
      }
      int64_t a = acc.i, b = x.i;
      uint64_t ua = zext(a, w), ub = zext(b, w);
      uint64_t r;
      switch (kind) {
      case K::ADD:
        r = ua + ub;
        break;
      case K::MUL:
        r = ua * ub;
        break;
      case K::MINSI:
        r = static_cast<uint64_t>(std::min(a, b));
        break;
      case K::MAXSI:
        r = static_cast<uint64_t>(std::max(a, b));
        break;
      case K::MINUI:
        r = std::min(ua, ub);
        break;
      case K::MAXUI:
        r = std::max(ua, ub);
        break;
      case K::AND:
        r = ua & ub;
        break;
      case K::OR:
        r = ua | ub;
        break;
      case K::XOR:
        r = ua ^ ub;
        break;
      default:
        return I.op->emitOpError()
               << "has a combining kind the fa interpreter does not support "
                  "on integers";
      }
      acc.i = sext(static_cast<int64_t>(r), w);
    }
    Res[t] = acc;
  }
  return success();
}
