//===- AccessChecks.cpp - Memory checks of the interpreter ----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The checks of every memory access, on the per-granule Shadow records:
// races on workgroup memory (and between blocks on global memory),
// reads of workgroup memory no thread of the block has written, accesses of
// elements a cp.async still has pending, writes of elements an in-flight
// wgmma reads, and the async-proxy (wgmma) reads of shared memory, which need
// the writer's fence.proxy and a barrier after it.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;
using llvm::formatv;

void InterpreterImpl::report(int kind, Operation *second, Operation *first,
                             llvm::function_ref<std::string()> message,
                             llvm::function_ref<std::string()> note) {
  if (!reported.insert({kind, second, first}).second)
    return;
  if (reportsPrinted >= opts.maxReports)
    return;
  ++reportsPrinted;
  InFlightDiagnostic d = second->emitOpError() << message();
  if (first)
    d.attachNote(first->getLoc()) << note();
}

bool InterpreterImpl::isCrossBlock(const Frame &f, const Buffer &buf,
                                   const Shadow &s) const {
  return !buf.shared && s.wLaunch == launchId && s.wBlock >= 0 &&
         s.wBlock != f.blockLinear;
}

void InterpreterImpl::reportRaceWithWrite(
    Frame &f, const Instr &I, const Shadow &s, int32_t t,
    llvm::function_ref<std::string()> where, bool isWrite, bool crossBlock) {
  ++stats.races;
  StringRef verb = isWrite ? "writes" : "reads", also = isWrite ? " also" : "";
  if (crossBlock) {
    report(
        kCrossBlock, I.op, s.wOp,
        [&] {
          return formatv("race: {0} {1} {2}, which block {3}{4} wrote during "
                         "the same launch",
                         describeThread(f, t), verb, where(),
                         describeBlock(s.wBlock, f), also)
              .str();
        },
        [&] {
          return formatv("the write by block {0}", describeBlock(s.wBlock, f))
              .str();
        });
    return;
  }
  report(
      isWrite ? kWAW : kRAW, I.op, s.wOp,
      [&] {
        return formatv("race: {0} {1} {2}, which thread {3} (warp {4}){5} "
                       "wrote in the same barrier interval",
                       describeThread(f, t), verb, where(), s.wThread,
                       s.wThread / 32, also)
            .str();
      },
      [&] {
        return formatv(isWrite ? "the other write, by thread {0}"
                               : "the write by thread {0}",
                       s.wThread)
            .str();
      });
}

bool InterpreterImpl::checkRead(Frame &f, const Instr &I, Buffer &buf,
                                Shadow &s, int32_t t,
                                llvm::function_ref<std::string()> where,
                                bool quiet) {
  bool found = false;
  if (!quiet && buf.shared && opts.checkUninitializedShared &&
      s.wEpoch < f.blockStartEpoch) {
    found = true;
    ++stats.uninitializedReads;
    report(
        kUninit, I.op, nullptr,
        [&] {
          return formatv(
                     "reads {0} in {1} before any thread of the block wrote "
                     "it (uninitialized workgroup memory)",
                     where(), describeThread(f, t))
              .str();
        },
        [] { return std::string(); });
  }
  if (!opts.checkRaces)
    return found;
  if (quiet) {
  } else if (s.wEpoch == epoch && s.wThread != t) {
    found = true;
    reportRaceWithWrite(f, I, s, t, where, /*isWrite=*/false,
                        /*crossBlock=*/false);
  } else if (isCrossBlock(f, buf, s)) {
    found = true;
    reportRaceWithWrite(f, I, s, t, where, /*isWrite=*/false,
                        /*crossBlock=*/true);
  }
  // Record the reader (up to two of different warps per interval).
  if (s.rEpoch != epoch) {
    s.rEpoch = epoch;
    s.r0 = t;
    s.r0Op = I.op;
    s.r1 = -1;
  } else if (s.r1 < 0 && s.r0 / 32 != t / 32) {
    s.r1 = t;
    s.r1Op = I.op;
  }
  return found;
}

bool InterpreterImpl::checkWrite(Frame &f, const Instr &I, Buffer &buf,
                                 Shadow &s, int32_t t,
                                 llvm::function_ref<std::string()> where,
                                 bool quiet) {
  bool found = false;
  if (opts.checkRaces && !quiet) {
    if (s.wEpoch == epoch && s.wThread != t) {
      found = true;
      reportRaceWithWrite(f, I, s, t, where, /*isWrite=*/true,
                          /*crossBlock=*/false);
    } else if (isCrossBlock(f, buf, s)) {
      found = true;
      reportRaceWithWrite(f, I, s, t, where, /*isWrite=*/true,
                          /*crossBlock=*/true);
    }
    if (!found && s.rEpoch == epoch) {
      int32_t other = -1;
      Operation *otherOp = nullptr;
      if (s.r0 >= 0 && s.r0 / 32 != t / 32) {
        other = s.r0;
        otherOp = s.r0Op;
      } else if (s.r1 >= 0 && s.r1 / 32 != t / 32) {
        other = s.r1;
        otherOp = s.r1Op;
      }
      if (other >= 0) {
        found = true;
        ++stats.races;
        report(
            kWAR, I.op, otherOp,
            [&] {
              return formatv(
                         "race: {0} writes {1}, which thread {2} of another "
                         "warp (warp {3}) read in the same barrier interval",
                         describeThread(f, t), where(), other, other / 32)
                  .str();
            },
            [&] { return formatv("the read by thread {0}", other).str(); });
      }
    }
  }
  s.wEpoch = epoch;
  s.wTime = clock;
  s.wThread = t;
  s.wOp = I.op;
  s.wLaunch = launchId;
  s.wBlock = f.blockLinear;
  return found;
}

LogicalResult InterpreterImpl::reportPendingCopyAccess(
    Frame &f, const Instr &I, const Shadow &s, int32_t t, bool isWrite,
    llvm::function_ref<std::string()> where) {
  InFlightDiagnostic d =
      I.op->emitOpError()
      << (isWrite ? "writes " : "reads ") << where() << " in "
      << describeThread(f, t) << " while the '" << s.pendOp->getName()
      << "' of thread " << s.pendThread << " to it (at " << s.pendOp->getLoc()
      << ") is still pending: no nvgpu.device_async_wait of that "
         "thread has completed the copy's group";
  d.attachNote(s.pendOp->getLoc()) << "the pending copy";
  return failure();
}

LogicalResult
InterpreterImpl::reportWgmmaReadWrite(Frame &f, const Instr &I, const Shadow &s,
                                      int32_t t,
                                      llvm::function_ref<std::string()> where) {
  InFlightDiagnostic d =
      I.op->emitOpError()
      << "writes " << where() << " in " << describeThread(f, t)
      << " while the 'nvvm.wgmma.mma_async' of warpgroup "
      << s.asyncReadWg / 128
      << " that reads it is in flight: no nvvm.wgmma.wait.group.sync."
         "aligned of that warpgroup has retired its group";
  d.attachNote(s.asyncReadOp->getLoc()) << "the wgmma.mma_async";
  return failure();
}

LogicalResult
InterpreterImpl::asyncRead(Frame &f, const Instr &I, Buffer &buf, int64_t byte,
                           unsigned size, int32_t wg,
                           llvm::function_ref<std::string()> where) {
  int64_t g0 = byte >> buf.gshift, g1 = (byte + size - 1) >> buf.gshift;
  for (int64_t g = g0; g <= g1; ++g) {
    Shadow &s = buf.shadow[g];
    s.asyncReadOp = I.op;
    s.asyncReadWg = wg * 128;
    s.asyncReadGroup = f.wgCommitted[wg * 128] + 1;
    if (s.pendOp) {
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "reads " << where() << " (warpgroup " << wg << ") while the '"
          << s.pendOp->getName() << "' of thread " << s.pendThread
          << " to it is still pending: no "
          << "nvgpu.device_async_wait of that thread has completed the copy's "
             "group";
      d.attachNote(s.pendOp->getLoc()) << "the pending copy";
      return failure();
    }
    if (s.wEpoch < f.blockStartEpoch || s.wThread < 0) {
      if (opts.checkUninitializedShared) {
        ++stats.uninitializedReads;
        report(
            kUninit, I.op, nullptr,
            [&] {
              return formatv("reads {0} (warpgroup {1}) before any thread of "
                             "the block wrote it (uninitialized workgroup "
                             "memory)",
                             where(), wg)
                  .str();
            },
            [] { return std::string(); });
      }
      continue;
    }
    // A generic-proxy write (st.shared, a completed cp.async) becomes
    // visible to the async proxy through fence.proxy.async in the writing
    // thread, and to the warpgroup through a barrier after that fence.
    if (f.fenceBeforeBarrier[s.wThread] <= s.wTime) {
      bool fenced = f.lastFence[s.wThread] > s.wTime;
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "reads " << where() << " (warpgroup " << wg
          << ") through the async proxy, but " << describeThread(f, s.wThread)
          << " wrote it through the generic proxy and "
          << (fenced ? "no barrier followed its nvvm.fence.proxy"
                     : "ran no nvvm.fence.proxy (kind = "
                       "#nvvm.proxy_kind<async.shared>, space = "
                       "#nvvm.shared_space<cta>) after the write")
          << "; the writing thread needs fence.proxy.async.shared::cta and "
             "then a barrier before the wgmma";
      d.attachNote(s.wOp->getLoc()) << "the write";
      return failure();
    }
    if (opts.checkRaces && s.wEpoch == epoch) {
      ++stats.races;
      report(
          kRAW, I.op, s.wOp,
          [&] {
            return formatv("race: the wgmma of warpgroup {0} reads {1}, which "
                           "thread {2} wrote in the same barrier interval",
                           wg, where(), s.wThread)
                .str();
          },
          [&] { return formatv("the write by thread {0}", s.wThread).str(); });
    }
  }
  return success();
}

std::string interp::formatAddress(uint64_t address) {
  return formatv("{0:x}", address).str();
}

LogicalResult InterpreterImpl::checkAbsoluteAlignment(
    Frame &f, const Instr &I, const Buffer &buf, ArrayRef<int64_t> idx,
    int64_t byte, int64_t bytes, int32_t t, StringRef verb, StringRef what) {
  uint64_t address = getAbsoluteAddress(buf, byte);
  if (bytes <= 0 || address % static_cast<uint64_t>(bytes) == 0)
    return success();
  InFlightDiagnostic d =
      I.op->emitOpError()
      << verb << " " << buf.name << formatIndex(idx) << " at address "
      << formatAddress(address) << " (byte offset " << byte << "), not aligned"
      << " to the " << bytes << "-byte " << what << ", in "
      << describeThread(f, t);
  if (!buf.shared)
    d << ": the buffer's data starts at "
      << formatAddress(getAbsoluteAddress(buf, 0))
      << ", which is not " << bytes
      << "-byte aligned (a view at an offset); the hardware would fault";
  return failure();
}
