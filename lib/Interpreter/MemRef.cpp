//===- MemRef.cpp - memref ops in the interpreter -------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Memref descriptors (workgroup globals, casts, dims, views and subviews of
// thread-uniform operands, dynamic shared memory, shared-window addresses)
// and the loads and stores of memref and vector, every index checked against
// the memref's sizes before the access and every access passed through the
// memory checks.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;
using llvm::formatv;

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

LogicalResult Compiler::compileMemRefOp(Operation *op, Instr &I) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](memref::GetGlobalOp g) -> LogicalResult {
        auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
            op, g.getNameAttr());
        if (!global)
          return op->emitOpError() << "refers to an unknown global";
        MemRefType type = global.getType();
        if (!fn.isKernel || !isWorkgroupSpace(type.getMemorySpace()))
          return unsupported(op, "only workgroup-memory globals (address space "
                                 "3) of a kernel");
        if (!global.isUninitialized() && !global.isExternal())
          return unsupported(op, "initialized workgroup globals");
        if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
            !getEKind(type.getElementType()))
          return unsupported(op, "global of type " +
                                     llvm::formatv("{0}", type).str());
        auto [it, inserted] =
            globalIndex.try_emplace(global, fn.sharedGlobals.size());
        if (inserted)
          fn.sharedGlobals.push_back(global);
        I.opc = Opc::GetGlobal;
        I.imm = it->second;
        return success();
      })
      .Case([&](memref::LoadOp l) -> LogicalResult {
        auto ek = getEKind(l.getMemRefType().getElementType());
        if (!ek)
          return unsupported(op, "element type " +
                                     llvm::formatv("{0}", l.getType()).str());
        I.opc = Opc::Load;
        I.ek = *ek;
        return success();
      })
      .Case([&](memref::StoreOp s) -> LogicalResult {
        auto ek = getEKind(s.getMemRefType().getElementType());
        if (!ek)
          return unsupported(
              op,
              "element type " +
                  llvm::formatv("{0}", s.getValueToStore().getType()).str());
        I.opc = Opc::Store;
        I.ek = *ek;
        return success();
      })
      .Case([&](memref::DimOp) {
        I.opc = Opc::Dim;
        return success();
      })
      .Case([&](memref::CastOp c) -> LogicalResult {
        if (!isa<MemRefType>(c.getType()))
          return unsupported(op, "unranked memrefs");
        I.opc = Opc::MemRefAlias;
        return success();
      })
      .Case([&](memref::AssumeAlignmentOp) {
        I.opc = Opc::MemRefAlias;
        return success();
      })
      .Case([&](memref::ExtractAlignedPointerAsIndexOp x) -> LogicalResult {
        auto mt = dyn_cast<MemRefType>(x.getSource().getType());
        if (!mt || !isWorkgroupSpace(mt.getMemorySpace()))
          return unsupported(op, "only workgroup (shared) memrefs, whose "
                                 "addresses are shared-window byte addresses");
        I.opc = Opc::ExtractPtr;
        return success();
      })
      .Case<memref::ViewOp, memref::SubViewOp>(
          [&](Operation *) { return compileMemRefViewOp(op, I); })
      .Default([&](Operation *) { return unsupported(op, ""); });
}

LogicalResult Compiler::compileMemRefViewOp(Operation *op, Instr &I) {
  if (auto dyn = dyn_cast<gpu::DynamicSharedMemoryOp>(op)) {
    auto type = cast<MemRefType>(dyn.getType());
    if (type.getRank() != 1 || !type.getElementType().isInteger(8))
      return unsupported(op, "expected a memref<?xi8> result");
    I.opc = Opc::DynamicShared;
    return success();
  }
  if (auto view = dyn_cast<memref::ViewOp>(op)) {
    MemRefType type = view.getType();
    auto ek = getEKind(type.getElementType());
    if (!ek || !type.getLayout().isIdentity())
      return unsupported(op, formatv("a view of type {0}", type).str());
    I.opc = Opc::View;
    I.ek = *ek;
    return success();
  }
  auto sub = cast<memref::SubViewOp>(op);
  if (!getEKind(sub.getType().getElementType()))
    return unsupported(op, formatv("element type of {0}", sub.getType()).str());
  I.opc = Opc::SubView;
  return success();
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

std::string interp::formatIndex(ArrayRef<int64_t> idx) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(idx, os);
  os << "]";
  return s;
}

std::string interp::describeElement(const Buffer &buf, EKind ek,
                                    ArrayRef<int64_t> idx, int64_t lin,
                                    int64_t byte) {
  if (ek == buf.ek)
    return formatv("{0}{1} (element {2} of {3})", buf.name, formatIndex(idx),
                   lin, buf.type)
        .str();
  return formatv("{0}{1} (byte {2} of {3})", buf.name, formatIndex(idx), byte,
                 buf.type)
      .str();
}

LogicalResult InterpreterImpl::execMemRef(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  switch (I.opc) {
  case Opc::GetGlobal: {
    Buffer *buf = f.sharedBufs[I.imm].get();
    MemRefVal v;
    v.buf = buf;
    v.ek = buf->ek;
    auto type = cast<MemRefType>(buf->type);
    v.sizes.assign(type.getShape().begin(), type.getShape().end());
    SmallVector<int64_t> strides;
    int64_t offset;
    (void)type.getStridesAndOffset(strides, offset);
    v.strides.assign(strides.begin(), strides.end());
    v.offset = offset;
    f.mems[I.out[0]] = std::move(v);
    return success();
  }
  case Opc::MemRefAlias:
    f.mems[I.out[0]] = f.mems[I.in[0]];
    return success();
  case Opc::Dim: {
    const MemRefVal &m = f.mems[I.in[0]];
    const Slot *D = R(I.in[1]);
    Slot *Res = R(I.out[0]);
    for (int32_t t : act) {
      int64_t d = D[t].i;
      if (d < 0 || d >= static_cast<int64_t>(m.sizes.size()))
        return I.op->emitOpError()
               << "asks for dim " << d << " of a rank-" << m.sizes.size()
               << " memref in " << describeThread(f, t);
      Res[t].i = m.sizes[d];
    }
    return success();
  }
  case Opc::DynamicShared: {
    MemRefVal v;
    v.buf = f.dynShared.get();
    v.ek = EKind::I8;
    v.sizes = {f.dynShared->numElements};
    v.strides = {1};
    f.mems[I.out[0]] = std::move(v);
    return success();
  }
  case Opc::ExtractPtr: {
    const MemRefVal &m = f.mems[I.in[0]];
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].i = m.buf->sharedBase + m.alignedByte;
    return success();
  }
  default:
    return reportUnimplemented(I);
  }
}

LogicalResult InterpreterImpl::execMemory(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  const bool isStore = I.opc == Opc::Store;
  const unsigned memOperand = isStore ? 1 : 0;
  const MemRefVal &m = f.mems[I.in[memOperand]];
  Buffer &buf = *m.buf;
  const size_t rank = m.sizes.size();
  const EKind ek = m.ek;
  const size_t esize = getEKindSize(ek);
  const bool isFloat = isFloatEKind(ek);
  const int64_t numBytes = buf.getNumBytes();
  const size_t bufESize = getEKindSize(buf.ek);
  if (!buf.shared && opts.checkRaces && buf.shadow.empty() && isStore)
    buf.shadow.resize(buf.numElements);
  const bool track = !buf.shadow.empty();

  SmallVector<int32_t, 128> order;
  if (opts.shuffleMemoryOrder) {
    order.assign(act.begin(), act.end());
    std::shuffle(order.begin(), order.end(), rng);
    act = order;
  }
  SmallVector<const Slot *, 4> idxRegs;
  for (size_t k = 0; k < rank; ++k)
    idxRegs.push_back(f.reg(I.in[memOperand + 1 + k]));
  // The offsets of each vector element in the trailing dims.
  const size_t vrank = I.vshape.size();
  SmallVector<int64_t, 16> voff;
  for (uint32_t e = 0; e < I.n && vrank; ++e)
    llvm::append_range(voff, delinearize(e, I.vshape));
  const uint32_t valSlot = isStore ? I.in[0] : I.out[0];
  SmallVector<int64_t, 4> idx(rank);

  for (int32_t t : act) {
    for (uint32_t e = 0; e < I.n; ++e) {
      int64_t lin = m.offset;
      bool oob = false;
      for (size_t k = 0; k < rank; ++k) {
        idx[k] = idxRegs[k][t].i;
        if (vrank && k >= rank - vrank)
          idx[k] += voff[e * vrank + (k - (rank - vrank))];
        if (idx[k] < 0 || idx[k] >= m.sizes[k])
          oob = true;
        lin += idx[k] * m.strides[k];
      }
      int64_t byte = lin * static_cast<int64_t>(esize);
      if (oob || byte < 0 || byte + static_cast<int64_t>(esize) > numBytes)
        return I.op->emitOpError()
               << "out-of-bounds " << (isStore ? "write" : "read") << " of "
               << buf.name << " (" << buf.type << ") at index "
               << formatIndex(idx) << " (sizes " << formatIndex(m.sizes)
               << ") in " << describeThread(f, t);
      if (e == 0 && I.align && byte % I.align != 0)
        return I.op->emitOpError()
               << "accesses " << buf.name << " at index " << formatIndex(idx)
               << ", byte offset " << byte << ", which is not a multiple of "
               << "its alignment " << I.align << " in " << describeThread(f, t);
      if (e == 0 && I.align &&
          failed(checkAbsoluteAlignment(f, I, buf, idx, byte, I.align, t,
                                        "accesses", "access")))
        return failure();
      char *p = buf.data + byte;
      if (track) {
        auto where = [&]() { return describeElement(buf, ek, idx, lin, byte); };
        if (failed(touch(f, I, buf, byte, esize, t, isStore, where)))
          return failure();
      }
      Slot *v = f.reg(valSlot + e) + t;
      if (isStore) {
        storeElem(p, ek, *v);
        if (buf.writtenMask)
          buf.writtenMask[byte / static_cast<int64_t>(bufESize)] = 1;
      } else if (isFloat) {
        v->f = loadElem(p, ek);
      } else {
        v->i = loadInt(p, ek);
      }
    }
  }
  return success();
}

FailureOr<int64_t> InterpreterImpl::getUniform(Frame &f, const Instr &I,
                                               uint32_t slot,
                                               ArrayRef<int32_t> act,
                                               StringRef what) {
  const Slot *V = f.reg(slot);
  int64_t v = V[act[0]].i;
  for (int32_t t : act)
    if (V[t].i != v) {
      I.op->emitOpError() << "has a thread-dependent " << what << " (" << v
                          << " in thread " << act[0] << ", " << V[t].i
                          << " in thread " << t
                          << "); the fa interpreter needs memref descriptors "
                             "to be uniform";
      return failure();
    }
  return v;
}

LogicalResult InterpreterImpl::execView(Frame &f, const Instr &I,
                                        ArrayRef<int32_t> act) {
  const MemRefVal &src = f.mems[I.in[0]];
  MemRefVal v;
  v.buf = src.buf;
  if (I.opc == Opc::View) {
    auto view = cast<memref::ViewOp>(I.op);
    FailureOr<int64_t> shift = getUniform(f, I, I.in[1], act, "byte shift");
    if (failed(shift))
      return failure();
    MemRefType type = view.getType();
    v.ek = I.ek;
    size_t esize = getEKindSize(I.ek);
    unsigned next = 2;
    for (int64_t d : type.getShape()) {
      if (ShapedType::isDynamic(d)) {
        FailureOr<int64_t> size = getUniform(f, I, I.in[next++], act, "size");
        if (failed(size))
          return failure();
        d = *size;
      }
      v.sizes.push_back(d);
    }
    v.strides = SmallVector<int64_t, 4>(getRowMajorStrides(v.sizes));
    int64_t byte =
        src.offset * static_cast<int64_t>(getEKindSize(src.ek)) + *shift;
    int64_t count = 1;
    for (int64_t d : v.sizes)
      count *= d;
    if (*shift < 0 || byte % static_cast<int64_t>(esize) != 0 ||
        byte + count * static_cast<int64_t>(esize) > src.buf->getNumBytes())
      return I.op->emitOpError()
             << "views " << count * static_cast<int64_t>(esize)
             << " bytes at byte shift " << *shift << " of " << src.buf->name
             << " (" << src.buf->getNumBytes() << " bytes)"
             << "; the view must lie inside the buffer and be aligned to its "
                "element size";
    v.offset = byte / static_cast<int64_t>(esize);
    v.alignedByte = byte;
    f.mems[I.out[0]] = std::move(v);
    return success();
  }
  auto sub = cast<memref::SubViewOp>(I.op);
  v.ek = src.ek;
  unsigned next = 1;
  auto take = [&](ArrayRef<int64_t> statics, SmallVector<int64_t, 4> &out,
                  StringRef what) -> LogicalResult {
    for (int64_t x : statics) {
      if (ShapedType::isDynamic(x)) {
        FailureOr<int64_t> val = getUniform(f, I, I.in[next++], act, what);
        if (failed(val))
          return failure();
        x = *val;
      }
      out.push_back(x);
    }
    return success();
  };
  SmallVector<int64_t, 4> offsets, sizes, strides;
  if (failed(take(sub.getStaticOffsets(), offsets, "offset")) ||
      failed(take(sub.getStaticSizes(), sizes, "size")) ||
      failed(take(sub.getStaticStrides(), strides, "stride")))
    return failure();
  llvm::SmallBitVector dropped = sub.getDroppedDims();
  v.offset = src.offset;
  v.alignedByte = src.alignedByte;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 ||
        (sizes[d] > 0 &&
         offsets[d] + (sizes[d] - 1) * strides[d] >= src.sizes[d]))
      return I.op->emitOpError()
             << "takes offset " << offsets[d] << ", size " << sizes[d]
             << " and stride " << strides[d] << " in dim " << d << " of "
             << src.buf->name << " (size " << src.sizes[d]
             << "): out of bounds";
    v.offset += offsets[d] * src.strides[d];
    if (dropped.test(d))
      continue;
    v.sizes.push_back(sizes[d]);
    v.strides.push_back(src.strides[d] * strides[d]);
  }
  f.mems[I.out[0]] = std::move(v);
  return success();
}
