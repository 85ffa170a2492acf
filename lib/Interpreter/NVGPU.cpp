//===- NVGPU.cpp - nvgpu ops in the interpreter ---------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The Ampere tensor-core and async-copy ops, from the PTX ISA's fragment
// definitions, each executed by all 32 lanes of a warp: nvgpu.ldmatrix,
// nvgpu.mma.sync (products exact in double, rounded once per element) and
// nvgpu.device_async_copy with its create_group and wait (the source read at
// issue, the destination pending per thread until a wait retires its group).
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;
using llvm::formatv;

LogicalResult Compiler::compileNVGPUOp(Operation *op, Instr &I) {
  if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op)) {
    auto mt = cast<MemRefType>(ld.getSrcMemref().getType());
    Type elt = mt.getElementType();
    if (!elt.isF16() && !elt.isBF16())
      return unsupported(op, "element types other than f16 and bf16");
    if (!isWorkgroupSpace(mt.getMemorySpace()))
      return unsupported(op, "a source outside workgroup memory");
    int64_t tiles = ld.getNumTiles();
    VectorType rt = ld.getRes().getType();
    if ((tiles != 1 && tiles != 2 && tiles != 4) || rt.getRank() != 2 ||
        rt.getShape()[0] != tiles || rt.getShape()[1] != 2 ||
        rt.getElementType() != elt)
      return unsupported(op,
                         formatv("numTiles = {0} with result {1} (expected "
                                 "numTiles 1, 2 or 4 and vector<numTiles x 2 "
                                 "x {2}>)",
                                 tiles, rt, elt)
                             .str());
    I.opc = Opc::LdMatrix;
    I.imm = tiles;
    I.flag = ld.getTranspose();
    I.ek = *getEKind(elt);
    I.n = 2 * tiles;
    return success();
  }
  if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op)) {
    if (mma.getTf32Enabled())
      return unsupported(op, "tf32");
    std::array<int64_t, 3> shape = mma.getMmaShapeAsArray();
    VectorType a = mma.getMatrixA().getType(), b = mma.getMatrixB().getType(),
               c = mma.getMatrixC().getType();
    Type ab = a.getElementType();
    bool ok = shape[0] == 16 && shape[1] == 8 &&
              (shape[2] == 16 || shape[2] == 8) &&
              (ab.isF16() || ab.isBF16()) && b.getElementType() == ab &&
              (c.getElementType().isF32() || c.getElementType().isF16()) &&
              c.getShape() == ArrayRef<int64_t>{2, 2} &&
              a.getShape() == (shape[2] == 16 ? ArrayRef<int64_t>{4, 2}
                                              : ArrayRef<int64_t>{2, 2}) &&
              b.getShape() == (shape[2] == 16 ? ArrayRef<int64_t>{2, 2}
                                              : ArrayRef<int64_t>{1, 2});
    if (!ok)
      return unsupported(op,
                         formatv("mmaShape [{0}, {1}, {2}] on ({3}, {4}, {5}) "
                                 "(supported: m16n8k16 and m16n8k8 with f16 "
                                 "or bf16 inputs and f32 or f16 accumulators)",
                                 shape[0], shape[1], shape[2], a, b, c)
                             .str());
    I.opc = Opc::MmaSync;
    I.imm = shape[2];
    I.fk = *getFKind(c.getElementType());
    I.n = 4;
    return success();
  }
  if (auto cp = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
    auto dst = cast<MemRefType>(cp.getDst().getType());
    auto src = cast<MemRefType>(cp.getSrc().getType());
    if (!isWorkgroupSpace(dst.getMemorySpace()))
      return unsupported(op, "a destination outside workgroup memory");
    auto ek = getEKind(dst.getElementType());
    if (!ek || dst.getElementType() != src.getElementType())
      return unsupported(op, formatv("element type {0}", dst.getElementType()));
    I.opc = Opc::AsyncCopy;
    I.ek = *ek;
    I.n = static_cast<uint32_t>(cp.getDstElements().getZExtValue());
    I.imm = dst.getRank();
    I.flag = static_cast<bool>(cp.getSrcElements());
    return success();
  }
  if (isa<nvgpu::DeviceAsyncCreateGroupOp>(op)) {
    I.opc = Opc::AsyncCommit;
    return success();
  }
  auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op);
  if (!wait)
    return unsupported(op, "");
  I.opc = Opc::AsyncWait;
  I.imm = wait.getNumGroups() ? *wait.getNumGroups() : 0;
  return success();
}

/// The linear index (in elements of the view) of a run of `count` elements
/// along the last dim of `m` starting at `idx`; fails if any of them is out
/// of bounds.
static bool getRun(const MemRefVal &m, ArrayRef<int64_t> idx, int64_t count,
                   int64_t esize, int64_t &lin) {
  const size_t rank = m.sizes.size();
  lin = m.offset;
  for (size_t k = 0; k < rank; ++k) {
    int64_t hi = idx[k] + (k + 1 == rank ? count - 1 : 0);
    if (idx[k] < 0 || hi >= m.sizes[k])
      return false;
    lin += idx[k] * m.strides[k];
  }
  if (count == 0)
    return true;
  int64_t last = lin + (count - 1) * m.strides[rank - 1];
  return std::min(lin, last) >= 0 &&
         (std::max(lin, last) + 1) * esize <= m.buf->getNumBytes();
}

LogicalResult InterpreterImpl::execLdMatrix(Frame &f, const Instr &I,
                                            ArrayRef<int32_t> act) {
  if (failed(checkFullWarps(f, I, act, "nvgpu.ldmatrix (ldmatrix.sync)")))
    return failure();
  const MemRefVal &m = f.mems[I.in[0]];
  Buffer &buf = *m.buf;
  const size_t rank = m.sizes.size();
  const int64_t tiles = I.imm;
  const bool trans = I.flag;
  const int64_t step = m.strides[rank - 1];
  const bool isHalf = I.ek == EKind::F16;
  SmallVector<int64_t, 4> idx(rank);
  double M[4][8][8];
  for (int32_t base : act) {
    if (base % 32 != 0)
      continue;
    for (int64_t i = 0; i < tiles; ++i) {
      for (int64_t r = 0; r < 8; ++r) {
        int32_t t = base + static_cast<int32_t>(8 * i + r);
        for (size_t k = 0; k < rank; ++k)
          idx[k] = f.reg(I.in[1 + k])[t].i;
        int64_t lin;
        if (!getRun(m, idx, 8, 2, lin))
          return I.op->emitOpError()
                 << "out-of-bounds read of " << buf.name << " (" << buf.type
                 << ") at index " << formatIndex(idx) << " (sizes "
                 << formatIndex(m.sizes) << "): the 8 elements of row " << r
                 << " of matrix " << i << ", whose address is given by "
                 << describeThread(f, t);
        int64_t byte = lin * 2;
        if (byte % 16 != 0 || getAbsoluteAddress(buf, byte) % 16 != 0)
          return I.op->emitOpError()
                 << "row " << r << " of matrix " << i << " at " << buf.name
                 << formatIndex(idx) << " (byte offset " << byte
                 << ", address " << formatAddress(getAbsoluteAddress(buf, byte))
                 << "), given by " << describeThread(f, t)
                 << ", is not 16-byte aligned";
        auto where = [&]() {
          return describeElement(buf, I.ek, idx, lin, byte) + " (a row of 8)";
        };
        if (step == 1) {
          if (failed(touch(f, I, buf, byte, 16, t, false, where)))
            return failure();
        } else {
          for (int64_t c = 0; c < 8; ++c)
            if (failed(
                    touch(f, I, buf, (lin + c * step) * 2, 2, t, false, where)))
              return failure();
        }
        for (int64_t c = 0; c < 8; ++c)
          M[i][r][c] = float16ToDouble(
              loadAs<uint16_t>(buf.data + (lin + c * step) * 2), isHalf);
      }
    }
    for (int32_t l = 0; l < 32; ++l) {
      int32_t row = l / 4;
      for (int64_t i = 0; i < tiles; ++i)
        for (int32_t j = 0; j < 2; ++j) {
          int32_t col = 2 * (l % 4) + j;
          f.reg(I.out[0] + 2 * i + j)[base + l].f =
              trans ? M[i][col][row] : M[i][row][col];
        }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::execMma(Frame &f, const Instr &I,
                                       ArrayRef<int32_t> act) {
  if (failed(checkFullWarps(f, I, act, "nvgpu.mma.sync (mma.sync)")))
    return failure();
  const bool k16 = I.imm == 16;
  const int K = k16 ? 16 : 8;
  double A[16][16], B[16][8], C[16][8];
  for (int32_t base : act) {
    if (base % 32 != 0)
      continue;
    for (int32_t l = 0; l < 32; ++l) {
      int32_t g = l / 4, tq = l % 4, t = base + l;
      for (int e = 0; e < (k16 ? 8 : 4); ++e) {
        int row = g + 8 * ((e / 2) % 2), col = 2 * tq + e % 2 + 8 * (e / 4);
        A[row][col] = f.reg(I.in[0] + e)[t].f;
      }
      for (int e = 0; e < (k16 ? 4 : 2); ++e)
        B[2 * tq + e % 2 + 8 * (e / 2)][g] = f.reg(I.in[1] + e)[t].f;
      for (int e = 0; e < 4; ++e)
        C[g + 8 * (e / 2)][2 * tq + e % 2] = f.reg(I.in[2] + e)[t].f;
    }
    for (int32_t l = 0; l < 32; ++l) {
      int32_t g = l / 4, tq = l % 4, t = base + l;
      for (int e = 0; e < 4; ++e) {
        int row = g + 8 * (e / 2), col = 2 * tq + e % 2;
        double acc = C[row][col];
        for (int k = 0; k < K; ++k)
          acc += A[row][k] * B[k][col];
        f.reg(I.out[0] + e)[t].f = roundF(I.fk, acc);
      }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::execAsync(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  if (I.opc == Opc::AsyncCommit) {
    for (int32_t t : act) {
      ThreadAsync &a = f.async[t];
      a.groups.push_back(std::move(a.uncommitted));
      a.uncommitted.clear();
      f.reg(I.out[0])[t].i = 0;
    }
    f.anyAsync = true;
    return success();
  }
  if (I.opc == Opc::AsyncWait) {
    for (int32_t t : act) {
      ThreadAsync &a = f.async[t];
      while (static_cast<int64_t>(a.groups.size()) > I.imm) {
        for (PendingCopy &copy : a.groups.front())
          if (failed(completeCopy(f, copy, t)))
            return failure();
        a.groups.pop_front();
      }
    }
    return success();
  }
  // nvgpu.device_async_copy: dst, dst indices, src, src indices,
  // [srcElements].
  const unsigned rd = static_cast<unsigned>(I.imm);
  const MemRefVal &dst = f.mems[I.in[0]];
  const MemRefVal &src = f.mems[I.in[1 + rd]];
  const unsigned rs = static_cast<unsigned>(src.sizes.size());
  const size_t esize = getEKindSize(I.ek);
  const int64_t n = I.n;
  const int64_t bytes = n * static_cast<int64_t>(esize);
  if (bytes != 4 && bytes != 8 && bytes != 16)
    return I.op->emitOpError()
           << "copies " << bytes << " bytes; cp.async copies 4, 8 or 16";
  SmallVector<int64_t, 4> di(rd), si(rs);
  const int64_t esz = static_cast<int64_t>(esize);
  for (int32_t t : act) {
    for (unsigned k = 0; k < rd; ++k)
      di[k] = f.reg(I.in[1 + k])[t].i;
    for (unsigned k = 0; k < rs; ++k)
      si[k] = f.reg(I.in[2 + rd + k])[t].i;
    int64_t srcElems = I.flag ? f.reg(I.in[2 + rd + rs])[t].i : n;
    if (srcElems < 0 || srcElems > n)
      return I.op->emitOpError()
             << "has srcElements = " << srcElems << " in "
             << describeThread(f, t) << "; it must be in [0, " << n << "]";
    PendingCopy copy;
    copy.op = I.op;
    copy.dst = dst.buf;
    copy.ek = I.ek;
    copy.dstIdx.assign(di.begin(), di.end());
    // Read the source now (it is global memory the kernel only reads); the
    // elements past srcElements are not read.
    int64_t slin = 0;
    if (srcElems > 0) {
      if (!getRun(src, si, srcElems, esz, slin))
        return I.op->emitOpError()
               << "out-of-bounds read of " << src.buf->name << " ("
               << src.buf->type << ") at index " << formatIndex(si)
               << " (sizes " << formatIndex(src.sizes) << ", " << srcElems
               << " elements) in " << describeThread(f, t);
      if ((slin * esz) % bytes != 0)
        return I.op->emitOpError()
               << "reads " << src.buf->name << formatIndex(si)
               << " at byte offset " << slin * esz << ", not aligned to the "
               << bytes << "-byte copy, in " << describeThread(f, t);
      if (failed(checkAbsoluteAlignment(f, I, *src.buf, si, slin * esz, bytes,
                                        t, "reads", "copy")))
        return failure();
    }
    const int64_t sstep = src.strides[rs - 1];
    for (int64_t e = 0; e < n; ++e) {
      Slot v;
      v.i = 0;
      if (e < srcElems) {
        int64_t lin = slin + e * sstep;
        int64_t byte = lin * esz;
        if (!src.buf->shadow.empty()) {
          auto where = [&]() {
            SmallVector<int64_t, 4> idx(si);
            idx[rs - 1] += e;
            return describeElement(*src.buf, I.ek, idx, lin, byte);
          };
          if (failed(touch(f, I, *src.buf, byte, esize, t, false, where)))
            return failure();
        }
        if (isFloatEKind(I.ek))
          v.f = loadElem(src.buf->data + byte, I.ek);
        else
          v.i = loadInt(src.buf->data + byte, I.ek);
      } else if (isFloatEKind(I.ek)) {
        v.f = 0.0;
      }
      copy.vals.push_back(v);
    }
    // Claim the destination (contiguous: the verifier requires a unit
    // innermost stride).
    int64_t dlin;
    if (!getRun(dst, di, n, esz, dlin))
      return I.op->emitOpError()
             << "out-of-bounds write of " << dst.buf->name << " ("
             << dst.buf->type << ") at index " << formatIndex(di) << " (sizes "
             << formatIndex(dst.sizes) << ", " << n << " elements) in "
             << describeThread(f, t);
    int64_t dbyte = dlin * esz;
    if (dbyte % bytes != 0)
      return I.op->emitOpError()
             << "writes " << dst.buf->name << formatIndex(di)
             << " at byte offset " << dbyte << ", not aligned to the " << bytes
             << "-byte copy, in " << describeThread(f, t);
    if (failed(checkAbsoluteAlignment(f, I, *dst.buf, di, dbyte, bytes, t,
                                      "writes", "copy")))
      return failure();
    if (dst.strides[rd - 1] != 1)
      return I.op->emitOpError()
             << "writes a destination whose innermost stride is "
             << dst.strides[rd - 1] << "; cp.async needs contiguous elements";
    copy.byte = dbyte;
    auto where = [&]() {
      return describeElement(*dst.buf, I.ek, di, dlin, dbyte) +
             formatv(" (a copy of {0} elements)", n).str();
    };
    if (failed(touch(f, I, *dst.buf, dbyte, bytes, t, true, where)))
      return failure();
    for (int64_t g = dbyte >> dst.buf->gshift,
                 g1 = (dbyte + bytes - 1) >> dst.buf->gshift;
         g <= g1; ++g) {
      dst.buf->shadow[g].pendOp = I.op;
      dst.buf->shadow[g].pendThread = t;
    }
    f.async[t].uncommitted.push_back(std::move(copy));
    f.reg(I.out[0])[t].i = 0;
  }
  f.anyAsync = true;
  return success();
}

LogicalResult InterpreterImpl::completeCopy(Frame &f, PendingCopy &copy,
                                            int32_t t) {
  Buffer &buf = *copy.dst;
  const int64_t esize = static_cast<int64_t>(getEKindSize(copy.ek));
  const int64_t bytes = esize * static_cast<int64_t>(copy.vals.size());
  for (int64_t g = copy.byte >> buf.gshift,
               g1 = (copy.byte + bytes - 1) >> buf.gshift;
       g <= g1; ++g)
    buf.shadow[g].pendOp = nullptr;
  completionInstr.op = copy.op;
  auto where = [&]() {
    return formatv("{0}{1} (completing a copy of {2} elements)", buf.name,
                   formatIndex(copy.dstIdx), copy.vals.size())
        .str();
  };
  if (failed(touch(f, completionInstr, buf, copy.byte, bytes, t, true, where)))
    return failure();
  for (size_t e = 0; e < copy.vals.size(); ++e)
    storeElem(buf.data + copy.byte + static_cast<int64_t>(e) * esize, copy.ek,
              copy.vals[e]);
  return success();
}

void InterpreterImpl::dropPendingCopies(Frame &f) {
  if (!f.anyAsync)
    return;
  auto drop = [&](PendingCopy &copy) {
    Buffer &buf = *copy.dst;
    int64_t esize = static_cast<int64_t>(getEKindSize(copy.ek));
    int64_t end = copy.byte + esize * static_cast<int64_t>(copy.vals.size());
    for (int64_t g = copy.byte >> buf.gshift; g <= (end - 1) >> buf.gshift; ++g)
      buf.shadow[g].pendOp = nullptr;
  };
  for (ThreadAsync &a : f.async) {
    for (PendingCopy &c : a.uncommitted)
      drop(c);
    for (auto &group : a.groups)
      for (PendingCopy &c : group)
        drop(c);
    a.uncommitted.clear();
    a.groups.clear();
  }
  f.anyAsync = false;
}
