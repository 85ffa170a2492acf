//===- GPU.cpp - gpu ops in the interpreter -------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Thread, block and lane ids, block and grid sizes, gpu.barrier (every
// thread of the block active) and gpu.shuffle (shfl.sync on the 32 lanes of
// each warp, all of them active).
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;

LogicalResult Compiler::compileGPUOp(Operation *op, Instr &I) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp>(
          [&](Operation *) {
            I.opc = isa<gpu::ThreadIdOp>(op)   ? Opc::ThreadId
                    : isa<gpu::BlockIdOp>(op)  ? Opc::BlockId
                    : isa<gpu::BlockDimOp>(op) ? Opc::BlockDim
                                               : Opc::GridDim;
            I.imm = static_cast<int64_t>(
                op->getAttrOfType<gpu::DimensionAttr>("dimension").getValue());
            return success();
          })
      .Case([&](gpu::LaneIdOp) {
        I.opc = Opc::LaneId;
        return success();
      })
      .Case([&](gpu::BarrierOp) {
        I.opc = Opc::Barrier;
        return success();
      })
      .Case([&](gpu::ShuffleOp s) -> LogicalResult {
        if (failed(checkScalars(op)))
          return failure();
        if (isa<VectorType>(s.getValue().getType()))
          return unsupported(op, "vector values");
        I.opc = Opc::Shuffle;
        I.imm = static_cast<int64_t>(s.getMode());
        return success();
      })
      .Case([&](gpu::LaunchFuncOp l) -> LogicalResult {
        if (!l.getAsyncDependencies().empty() || l.getAsyncToken() ||
            l.getAsyncObject())
          return unsupported(op, "asynchronous launches");
        if (l.hasClusterSize())
          return unsupported(op, "thread block clusters");
        I.opc = Opc::LaunchFunc;
        return success();
      })
      .Case([&](gpu::DynamicSharedMemoryOp) {
        return compileMemRefViewOp(op, I);
      })
      .Default([&](Operation *) { return unsupported(op, ""); });
}

LogicalResult InterpreterImpl::execGPU(Frame &f, const Instr &I,
                                       ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  switch (I.opc) {
  case Opc::ThreadId: {
    Slot *Res = R(I.out[0]);
    int64_t bx = f.blockDim[0], by = f.blockDim[1];
    for (int32_t t : act)
      Res[t].i = I.imm == 0   ? t % bx
                 : I.imm == 1 ? (t / bx) % by
                              : t / (bx * by);
    return success();
  }
  case Opc::BlockId:
  case Opc::BlockDim:
  case Opc::GridDim: {
    Slot *Res = R(I.out[0]);
    const auto &src = I.opc == Opc::BlockId    ? f.blockId
                      : I.opc == Opc::BlockDim ? f.blockDim
                                               : f.gridDim;
    for (int32_t t : act)
      Res[t].i = src[I.imm];
    return success();
  }
  case Opc::LaneId: {
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].i = t % 32;
    return success();
  }
  case Opc::Barrier: {
    ++stats.barriers;
    if (act.size() != f.numThreads) {
      auto diag = I.op->emitOpError()
                  << "reached by " << act.size() << " of the " << f.numThreads
                  << " threads of block (" << f.blockId[0] << ", "
                  << f.blockId[1] << ", " << f.blockId[2]
                  << ") (a barrier in divergent code)";
      // Name the first missing thread.
      std::fill(f.mark.begin(), f.mark.end(), 0);
      for (int32_t t : act)
        f.mark[t] = 1;
      for (unsigned t = 0; t < f.numThreads; ++t)
        if (!f.mark[t]) {
          diag << "; thread " << t << " is not there";
          break;
        }
      return failure();
    }
    ++epoch;
    f.fenceBeforeBarrier = f.lastFence;
    return success();
  }
  default:
    return reportUnimplemented(I);
  }
}

LogicalResult InterpreterImpl::execShuffle(Frame &f, const Instr &I,
                                           ArrayRef<int32_t> act) {
  const Slot *V = f.reg(I.in[0]), *Off = f.reg(I.in[1]),
             *Width = f.reg(I.in[2]);
  Slot *Res = f.reg(I.out[0]), *Valid = f.reg(I.out[1]);
  // Every existing lane of each warp taking part must be active.
  std::fill(f.mark.begin(), f.mark.end(), 0);
  for (int32_t t : act)
    f.mark[t] = 1;
  for (int32_t t : act) {
    int32_t base = t - t % 32;
    int32_t end = std::min<int32_t>(base + 32, f.numThreads);
    for (int32_t l = base; l < end; ++l)
      if (!f.mark[l])
        return I.op->emitOpError()
               << "executed by lane " << t % 32 << " of warp " << t / 32
               << " of block (" << f.blockId[0] << ", " << f.blockId[1] << ", "
               << f.blockId[2] << ") while lane " << l % 32
               << " of that warp is inactive; gpu.shuffle (shfl.sync with a "
                  "full mask) needs all 32 lanes";
    if (Width[t].i != 32)
      return I.op->emitOpError()
             << "has width " << Width[t].i << " in " << describeThread(f, t)
             << "; the fa interpreter supports width 32 only";
    if (Off[t].i < 0 || Off[t].i >= 32)
      return I.op->emitOpError()
             << "has offset " << Off[t].i << " in " << describeThread(f, t)
             << "; it must be in [0, 32)";
  }
  auto mode = static_cast<gpu::ShuffleMode>(I.imm);
  for (int32_t t : act) {
    int32_t lane = t % 32, base = t - lane;
    int32_t off = static_cast<int32_t>(Off[t].i);
    int32_t j = lane;
    bool valid = false;
    switch (mode) {
    case gpu::ShuffleMode::XOR:
      j = lane ^ off;
      valid = true;
      break;
    case gpu::ShuffleMode::IDX:
      j = off;
      valid = true;
      break;
    case gpu::ShuffleMode::DOWN:
      j = lane + off;
      valid = j <= 31;
      break;
    case gpu::ShuffleMode::UP:
      j = lane - off;
      valid = j >= 0;
      break;
    }
    if (valid && base + j >= static_cast<int32_t>(f.numThreads))
      valid = false;
    Res[t] = valid ? V[base + j] : V[t];
    Valid[t].i = valid ? -1 : 0;
  }
  return success();
}

std::optional<std::pair<int32_t, int32_t>>
interp::findIncompleteGroup(Frame &f, ArrayRef<int32_t> act, int32_t size) {
  std::fill(f.mark.begin(), f.mark.end(), 0);
  for (int32_t t : act)
    f.mark[t] = 1;
  for (int32_t t : act) {
    if (t % size != 0 && f.mark[t - 1])
      continue;
    int32_t base = t - t % size;
    for (int32_t u = base; u < base + size; ++u)
      if (u >= static_cast<int32_t>(f.numThreads) || !f.mark[u])
        return std::make_pair(t, u);
  }
  return std::nullopt;
}

LogicalResult InterpreterImpl::checkFullWarps(Frame &f, const Instr &I,
                                              ArrayRef<int32_t> act,
                                              StringRef what) {
  std::optional<std::pair<int32_t, int32_t>> missing =
      findIncompleteGroup(f, act, 32);
  if (!missing)
    return success();
  auto [t, l] = *missing;
  return I.op->emitOpError()
         << "executed by lane " << t % 32 << " of warp " << t / 32
         << " of block (" << f.blockId[0] << ", " << f.blockId[1] << ", "
         << f.blockId[2] << ") while lane " << l % 32 << " of that warp is "
         << (l >= static_cast<int32_t>(f.numThreads) ? "missing" : "inactive")
         << "; " << what << " needs all 32 lanes";
}
