//===- NVVM.cpp - Hopper wgmma and NVVM ops in the interpreter ------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Hopper warpgroup MMA (nvvm.wgmma.*): matrix descriptors, the canonical
// layouts and their swizzles, wgmma.fence / commit_group / wait_group and the
// pending state of the results, executed by the 128 threads of a warpgroup
// together. Also nvvm.fence.proxy (the async-proxy visibility of
// generic-proxy writes) and nvvm.barrier with an id and a thread count.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;
using llvm::formatv;

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

LogicalResult Compiler::compileNVVMOp(Operation *op, Instr &I) {
  if (isa<NVVM::WgmmaFenceAlignedOp>(op)) {
    I.opc = Opc::WgFence;
    return success();
  }
  if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
    I.opc = Opc::WgCommit;
    return success();
  }
  if (auto w = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
    I.opc = Opc::WgWait;
    I.imm = static_cast<int64_t>(w.getGroup());
    return success();
  }
  if (auto fp = dyn_cast<NVVM::FenceProxyOp>(op)) {
    NVVM::ProxyKind kind = fp.getKind();
    bool ok =
        kind == NVVM::ProxyKind::async ||
        (kind == NVVM::ProxyKind::async_shared &&
         (!fp.getSpace() || *fp.getSpace() == NVVM::SharedSpace::shared_cta));
    if (!ok)
      return unsupported(op, "only fence.proxy.async and "
                             "fence.proxy.async.shared::cta (kind = "
                             "#nvvm.proxy_kind<async.shared>, space = "
                             "#nvvm.shared_space<cta>)");
    I.opc = Opc::FenceProxy;
    return success();
  }
  if (isa<NVVM::Barrier0Op>(op)) {
    I.opc = Opc::Barrier;
    return success();
  }
  if (auto b = dyn_cast<NVVM::BarrierOp>(op)) {
    if (b.getReductionOp() || b.getReductionPredicate() || b.getRes())
      return unsupported(op, "barrier reductions");
    I.opc = Opc::NamedBarrier;
    // imm: bit 0 = has an id, bit 1 = has a thread count (operands in order).
    I.imm = (b.getBarrierId() ? 1 : 0) | (b.getNumberOfThreads() ? 2 : 0);
    return success();
  }
  auto mma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op);
  if (!mma)
    return unsupported(op, "");
  NVVM::MMAShapeAttr shape = mma.getShape();
  int64_t n = shape.getN();
  if (shape.getM() != 64 || shape.getK() != 16 || n < 8 || n > 256 ||
      n % 8 != 0)
    return unsupported(op,
                       formatv("shape m{0}n{1}k{2} (supported: m64nNk16, N a "
                               "multiple of 8 up to 256)",
                               shape.getM(), n, shape.getK())
                           .str());
  NVVM::WGMMATypes ta = mma.getTypeA(), tb = mma.getTypeB();
  if (ta != tb ||
      (ta != NVVM::WGMMATypes::f16 && ta != NVVM::WGMMATypes::bf16) ||
      mma.getTypeD() != NVVM::WGMMATypes::f32)
    return unsupported(op, "only f16 or bf16 inputs with an f32 accumulator");
  if (mma.getLayoutA() != NVVM::MMALayout::row)
    return unsupported(op,
                       "layoutA must be row (a K-major A from shared memory; "
                       "imm-trans-a = 0)");
  if (mma.getSatfinite())
    return unsupported(op, "satfinite");
  auto st = dyn_cast<LLVM::LLVMStructType>(mma.getInouts().getType());
  if (!st || static_cast<int64_t>(st.getBody().size()) != n / 2 ||
      !llvm::all_of(st.getBody(), [](Type t) { return t.isF32(); }))
    return unsupported(op,
                       formatv("accumulator {0} (expected a struct of N / 2 = "
                               "{1} f32)",
                               mma.getInouts().getType(), n / 2)
                           .str());
  I.opc = Opc::WgMma;
  I.imm = n;
  I.ek = ta == NVVM::WGMMATypes::f16 ? EKind::F16 : EKind::BF16;
  I.flag = mma.getScaleD() == NVVM::WGMMAScaleOut::one;
  // w: B is MN-major (layoutB = row, imm-trans-b = 1); w2: negate A (bit 0),
  // negate B (bit 1).
  I.w = mma.getLayoutB() == NVVM::MMALayout::row ? 1 : 0;
  I.w2 = (mma.getScaleA() == NVVM::WGMMAScaleIn::neg ? 1 : 0) |
         (mma.getScaleB() == NVVM::WGMMAScaleIn::neg ? 2 : 0);
  I.n = static_cast<uint32_t>(n / 2);
  fn.hasWgmma = true;
  return success();
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

LogicalResult InterpreterImpl::execFenceProxy(Frame &f, const Instr &I,
                                              ArrayRef<int32_t> act) {
  uint64_t c = ++clock;
  for (int32_t t : act)
    f.lastFence[t] = c;
  return success();
}

LogicalResult InterpreterImpl::checkWarpgroups(Frame &f, const Instr &I,
                                               ArrayRef<int32_t> act) {
  std::optional<std::pair<int32_t, int32_t>> missing =
      findIncompleteGroup(f, act, 128);
  if (!missing)
    return success();
  auto [t, u] = *missing;
  int32_t base = t - t % 128;
  return I.op->emitOpError()
         << "executed by " << describeThread(f, t) << " while thread " << u
         << " (warp " << u / 32 << ") of its warpgroup (threads " << base
         << ".." << base + 127 << ", warps " << base / 32 << ".."
         << base / 32 + 3 << ") is "
         << (u >= static_cast<int32_t>(f.numThreads) ? "missing" : "inactive")
         << "; wgmma instructions are executed by the 128 threads of a "
            "warpgroup (4 consecutive warps, the first a multiple of 4) "
            "together";
}

LogicalResult InterpreterImpl::checkWgPending(Frame &f, const Instr &I,
                                              ArrayRef<int32_t> act) {
  const size_t nt = f.numThreads;
  auto check = [&](uint32_t s) -> LogicalResult {
    if (!f.wgPendSlot[s])
      return success();
    for (int32_t t : act) {
      uint32_t g = f.wgPend[s * nt + t];
      if (g <= f.wgRetired[t])
        continue;
      Operation *mma = f.wgPendOp[s];
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "reads a result of the 'nvvm.wgmma.mma_async' at " << mma->getLoc()
          << " in " << describeThread(f, t)
          << " before a nvvm.wgmma.wait.group.sync.aligned retired its group ("
          << (g > f.wgCommitted[t] ? "the mma_async is not even committed by "
                                     "a nvvm.wgmma.commit.group.sync.aligned"
                                   : "its group is still pending")
          << ")";
      d.attachNote(mma->getLoc()) << "the wgmma.mma_async";
      return failure();
    }
    return success();
  };
  for (uint32_t s : I.in)
    if (failed(check(s)))
      return failure();
  for (uint32_t s : I.src)
    if (failed(check(s)))
      return failure();
  return success();
}

LogicalResult InterpreterImpl::execWgSync(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  if (failed(checkWarpgroups(f, I, act)))
    return failure();
  if (!f.fn->hasWgmma)
    return success();
  for (int32_t t : act) {
    switch (I.opc) {
    case Opc::WgFence:
      f.wgFenced[t] = 1;
      break;
    case Opc::WgCommit:
      ++f.wgCommitted[t];
      break;
    default: {
      int64_t keep = std::min<int64_t>(I.imm, f.wgCommitted[t]);
      f.wgRetired[t] = std::max<uint32_t>(
          f.wgRetired[t], f.wgCommitted[t] - static_cast<uint32_t>(keep));
      f.wgFenced[t] = 0;
      break;
    }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::execNamedBarrier(Frame &f, const Instr &I,
                                                ArrayRef<int32_t> act) {
  unsigned next = 0;
  int64_t id = 0, count = -1;
  if (I.imm & 1) {
    FailureOr<int64_t> v = getUniform(f, I, I.in[next++], act, "barrier id");
    if (failed(v))
      return failure();
    id = *v;
  }
  if (I.imm & 2) {
    FailureOr<int64_t> v =
        getUniform(f, I, I.in[next++], act, "number of threads");
    if (failed(v))
      return failure();
    count = *v;
  }
  if (id < 0 || id > 15)
    return I.op->emitOpError()
           << "uses barrier " << id << "; barriers are numbered 0 to 15";
  if (count < 0) {
    if (act.size() != f.numThreads)
      return I.op->emitOpError()
             << "reached by " << act.size() << " of the " << f.numThreads
             << " threads of block (" << f.blockId[0] << ", " << f.blockId[1]
             << ", " << f.blockId[2]
             << ") without a thread count (a barrier in divergent code)";
  } else {
    if (count % 32 != 0 || count == 0 ||
        static_cast<size_t>(count) != act.size())
      return I.op->emitOpError()
             << "barrier " << id << " expects " << count
             << " threads but is reached by " << act.size()
             << " together (the count must be a multiple of 32 and equal "
                "the threads that execute the barrier)";
    if (failed(checkFullWarps(f, I, act, "nvvm.barrier (bar.sync)")))
      return failure();
  }
  // The race checks treat a barrier among some threads like a barrier of
  // the block (a new interval for every thread).
  ++stats.barriers;
  ++epoch;
  for (int32_t t : act)
    f.fenceBeforeBarrier[t] = f.lastFence[t];
  return success();
}

namespace {
/// A decoded wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format").
struct WgmmaDesc {
  int64_t start = 0, lbo = 0, sbo = 0;
  unsigned baseOffset = 0;
  /// The swizzle width in bytes: 128, 64, 32, or 0 (no swizzle).
  int64_t swizzle = 0;

  explicit WgmmaDesc(uint64_t d) {
    start = static_cast<int64_t>(d & 0x3FFF) << 4;
    lbo = static_cast<int64_t>((d >> 16) & 0x3FFF) << 4;
    sbo = static_cast<int64_t>((d >> 32) & 0x3FFF) << 4;
    baseOffset = static_cast<unsigned>((d >> 49) & 7);
    static constexpr int64_t widths[4] = {0, 128, 64, 32};
    swizzle = widths[(d >> 62) & 3];
  }

  /// The unswizzled shared address of the 16-bit element (mn, k) of a
  /// canonical layout (CUTLASS cute's GMMA layouts, PTX ISA "Canonical
  /// Layouts", T = 8 elements of 16 bytes):
  ///   K-major, W-byte swizzle: ((8,m),(T,2k)):((W/16 T,SBO),(1,T)), i.e.
  ///     start + (mn / 8) SBO + (mn % 8) W + 2 k;
  ///   K-major, no swizzle: ((8,m),(T,2k)):((1T,SBO),(1,LBO)), i.e.
  ///     start + (mn / 8) SBO + (mn % 8) 16 + (k / 8) LBO + 2 (k % 8);
  ///   MN-major, W-byte swizzle: ((T,W/16,m),(8,k)):((1,T,LBO),(W/16 T,SBO)),
  ///     i.e. start + (mn / (W/2)) LBO + 2 (mn % (W/2)) + (k % 8) W
  ///     + (k / 8) SBO;
  ///   MN-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)), i.e.
  ///     start + (mn / 8) SBO + 2 (mn % 8) + (k % 8) 16 + (k / 8) LBO.
  int64_t unswizzled(int64_t mn, int64_t k, bool mnMajor) const {
    if (!mnMajor) {
      if (swizzle)
        return start + (mn / 8) * sbo + (mn % 8) * swizzle + 2 * k;
      return start + (mn / 8) * sbo + (mn % 8) * 16 + (k / 8) * lbo +
             2 * (k % 8);
    }
    if (swizzle) {
      int64_t chunk = swizzle / 2;
      return start + (mn / chunk) * lbo + 2 * (mn % chunk) + (k % 8) * swizzle +
             (k / 8) * sbo;
    }
    return start + (mn / 8) * sbo + 2 * (mn % 8) + (k % 8) * 16 + (k / 8) * lbo;
  }

  /// The physical address: the W-byte swizzle XORs the 16-byte chunk index
  /// (bits 4..) with the 128-byte row index (bits 7..) of the absolute
  /// address (cute Swizzle<3,4,3>, <2,4,3>, <1,4,3>).
  int64_t swizzled(int64_t a) const {
    if (!swizzle)
      return a;
    int64_t mask = swizzle / 16 - 1;
    return a ^ (((a >> 7) & mask) << 4);
  }
};
} // namespace

LogicalResult InterpreterImpl::execWgmma(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  if (failed(checkWarpgroups(f, I, act)))
    return failure();
  const int64_t N = I.imm;
  const bool bMN = I.w == 1;
  const bool isHalf = I.ek == EKind::F16;
  const double signA = (I.w2 & 1) ? -1.0 : 1.0, signB = (I.w2 & 2) ? -1.0 : 1.0;
  const uint32_t cSlot = I.in[0], aSlot = I.in[1], bSlot = I.in[2];
  const size_t nt = f.numThreads;
  // The block's shared allocations, which the descriptors address.
  SmallVector<Buffer *, 8> shared;
  for (auto &b : f.sharedBufs)
    shared.push_back(b.get());
  for (auto &b : f.attribBufs)
    shared.push_back(b.get());
  shared.push_back(f.dynShared.get());
  auto describeWindow = [&]() {
    std::string s;
    llvm::raw_string_ostream os(s);
    llvm::interleaveComma(shared, os, [&](Buffer *b) {
      os << b->name
         << formatv(" at [{0:x}, {1:x})", b->sharedBase,
                    b->sharedBase + b->getNumBytes());
    });
    return s;
  };
  std::vector<double> A(64 * 16), B(16 * N), C;
  if (I.flag)
    C.assign(64 * N, 0.0);

  for (int32_t base : act) {
    if (base % 128 != 0)
      continue;
    const int32_t wg = base / 128;
    for (int32_t t = base; t < base + 128; ++t)
      if (!f.wgFenced[t])
        return I.op->emitOpError()
               << "issued by " << describeThread(f, t)
               << " without a nvvm.wgmma.fence.aligned since its last "
                  "nvvm.wgmma.wait.group.sync.aligned (or the start of the "
                  "block)";
    // The descriptors are the same in the 128 threads.
    uint64_t desc[2];
    for (int m = 0; m < 2; ++m) {
      const Slot *D = f.reg(m == 0 ? aSlot : bSlot);
      desc[m] = static_cast<uint64_t>(D[base].i);
      for (int32_t t = base; t < base + 128; ++t)
        if (static_cast<uint64_t>(D[t].i) != desc[m])
          return I.op->emitOpError()
                 << "has descriptor " << (m == 0 ? "A" : "B")
                 << formatv(" {0:x} in thread {1} but {2:x} in thread {3}",
                            desc[m], base, static_cast<uint64_t>(D[t].i), t)
                 << " of warpgroup " << wg
                 << "; a wgmma descriptor must be the same in the 128 threads";
    }
    // Reads the 16-bit element (mn, k) of operand m through its descriptor.
    Buffer *last = nullptr;
    auto read = [&](int m, const WgmmaDesc &d, int64_t mn, int64_t k,
                    bool mnMajor, double &out) -> LogicalResult {
      int64_t un = d.unswizzled(mn, k, mnMajor);
      int64_t addr = d.swizzled(un);
      Buffer *buf = last;
      if (!buf || addr < buf->sharedBase ||
          addr + 2 > buf->sharedBase + buf->getNumBytes()) {
        buf = nullptr;
        for (Buffer *b : shared)
          if (addr >= b->sharedBase &&
              addr + 2 <= b->sharedBase + b->getNumBytes())
            buf = b;
      }
      const char *what = m == 0 ? "A" : "B";
      if (!buf)
        return I.op->emitOpError()
               << "reads element " << (m == 0 || !bMN ? "(row " : "(k ")
               << (m == 0 || !bMN ? mn : k)
               << (m == 0 || !bMN ? ", k " : ", n ")
               << (m == 0 || !bMN ? k : mn) << ") of " << what
               << formatv(" at shared address {0:x} (unswizzled {1:x}, "
                          "descriptor {2:x}: start {3:x}, LBO {4}, SBO "
                          "{5}, swizzle {6}B)",
                          addr, un, desc[m], d.start, d.lbo, d.sbo, d.swizzle)
               << " in warpgroup " << wg
               << ", outside every shared allocation of the block ("
               << describeWindow() << ")";
      last = buf;
      int64_t byte = addr - buf->sharedBase;
      auto where = [&]() {
        return formatv("element ({0}, {1}) of {2} at shared address {3:x}, "
                       "byte {4} of {5}",
                       (m == 0 || !bMN) ? mn : k, (m == 0 || !bMN) ? k : mn,
                       what, addr, byte, buf->name)
            .str();
      };
      if (!buf->shadow.empty() &&
          failed(asyncRead(f, I, *buf, byte, 2, wg, where)))
        return failure();
      out = float16ToDouble(loadAs<uint16_t>(buf->data + byte), isHalf);
      return success();
    };
    WgmmaDesc da(desc[0]), db(desc[1]);
    for (int m = 0; m < 2; ++m) {
      const WgmmaDesc &d = m == 0 ? da : db;
      if (d.baseOffset != 0)
        return I.op->emitOpError()
               << "has descriptor " << (m == 0 ? "A" : "B")
               << formatv(" {0:x} with base offset {1}", desc[m], d.baseOffset)
               << "; the fa interpreter supports base offset 0 only (matrix "
                  "atoms that start at the swizzle pattern's boundary)";
    }
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t k = 0; k < 16; ++k)
        if (failed(read(0, da, r, k, false, A[r * 16 + k])))
          return failure();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < 16; ++k)
        if (failed(read(1, db, n, k, bMN, B[k * N + n])))
          return failure();
    // The accumulator fragment: thread t = 32 w + l holds, for i < N / 8,
    // D[16 w + l / 4 + 8 (j / 2)][8 i + 2 (l % 4) + j % 2] in element
    // 4 i + j.
    auto rowCol = [&](int32_t t, int64_t e, int64_t &row, int64_t &col) {
      int64_t w = t / 32, l = t % 32, i = e / 4, j = e % 4;
      row = 16 * w + l / 4 + 8 * (j / 2);
      col = 8 * i + 2 * (l % 4) + j % 2;
    };
    if (I.flag) {
      for (int32_t t = 0; t < 128; ++t)
        for (int64_t e = 0; e < N / 2; ++e) {
          int64_t row, col;
          rowCol(t, e, row, col);
          C[row * N + col] = f.reg(cSlot + e)[base + t].f;
        }
    }
    // Products exact; the 16 of a k16 step and the accumulator summed in
    // double and rounded once to f32.
    for (int32_t t = 0; t < 128; ++t) {
      uint32_t group = f.wgCommitted[base + t] + 1;
      for (int64_t e = 0; e < N / 2; ++e) {
        int64_t row, col;
        rowCol(t, e, row, col);
        double acc = I.flag ? C[row * N + col] : 0.0;
        double sum = 0;
        for (int64_t k = 0; k < 16; ++k)
          sum += A[row * 16 + k] * B[k * N + col];
        acc += signA * signB * sum;
        uint32_t s = I.out[0] + static_cast<uint32_t>(e);
        f.reg(s)[base + t].f = static_cast<double>(static_cast<float>(acc));
        f.wgPend[s * nt + base + t] = group;
      }
    }
  }
  for (int64_t e = 0; e < N / 2; ++e) {
    uint32_t s = I.out[0] + static_cast<uint32_t>(e);
    f.wgPendSlot[s] = 1;
    f.wgPendOp[s] = I.op;
  }
  f.wgIssued = true;
  return success();
}
