//===- ControlFlow.cpp - Control flow and the execution loop --------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The execution loop (each op of a region for an active set of threads, the
// dispatch to the exec function of its dialect), function bodies of several
// blocks (uniform cf.br / cf.cond_br), scf.for (iterating while any thread
// is in range, each with its own induction variable), scf.if (the regions
// under complementary thread sets) and gpu.launch_func.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;

LogicalResult Compiler::compileSCFOp(Operation *op, Instr &I) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](scf::ForOp f) -> LogicalResult {
        I.opc = Opc::For;
        I.w = getIntWidth(f.getInductionVar().getType());
        I.flag = f.getUnsignedCmp();
        for (Type t : f.getResultTypes())
          if (failed(checkCarriedType(op, t)))
            return failure();
        I.in.clear();
        I.out.clear();
        for (Value v : op->getOperands())
          expand(v, I.in);
        for (Value v : op->getResults())
          expand(v, I.out);
        I.r0 = std::make_unique<CRegion>();
        return compileRegion(f.getRegion(), *I.r0);
      })
      .Case([&](scf::IfOp i) -> LogicalResult {
        I.opc = Opc::If;
        for (Type t : i.getResultTypes())
          if (failed(checkCarriedType(op, t)))
            return failure();
        I.out.clear();
        for (Value v : op->getResults())
          expand(v, I.out);
        I.r0 = std::make_unique<CRegion>();
        if (failed(compileRegion(i.getThenRegion(), *I.r0)))
          return failure();
        if (!i.getElseRegion().empty()) {
          I.r1 = std::make_unique<CRegion>();
          if (failed(compileRegion(i.getElseRegion(), *I.r1)))
            return failure();
        }
        return success();
      })
      .Default([&](Operation *) { return unsupported(op, ""); });
}

LogicalResult InterpreterImpl::exec(Frame &f, const CRegion &region,
                                    ArrayRef<int32_t> act) {
  for (const Instr &I : region.body) {
    ++stats.ops;
    stats.threadOps += act.size();
    f.threadOps += act.size();
    if (f.threadOps > opts.maxThreadOpsPerBlock)
      return I.op->emitOpError() << "exceeds the interpreter's limit of "
                                 << opts.maxThreadOpsPerBlock
                                 << " thread-ops per block (a runaway loop?)";
    if (f.wgIssued && I.opc != Opc::For && I.opc != Opc::If &&
        I.opc != Opc::WgMma && failed(checkWgPending(f, I, act)))
      return failure();
    if (failed(execInstr(f, I, act)))
      return failure();
  }
  return success();
}

LogicalResult InterpreterImpl::execBody(Frame &f, const CFunction &fn,
                                        ArrayRef<int32_t> act) {
  if (fn.blocks.empty())
    return exec(f, fn.body, act);
  const CRegion *block = fn.blocks.front();
  SmallVector<Slot, 16> tmp;
  while (true) {
    if (failed(exec(f, *block, act)))
      return failure();
    const Instr *br = block->branch.get();
    if (!br)
      return success();
    f.threadOps += act.size();
    if (f.threadOps > opts.maxThreadOpsPerBlock)
      return br->op->emitOpError() << "exceeds the interpreter's limit of "
                                   << opts.maxThreadOpsPerBlock
                                   << " thread-ops per block (a runaway loop?)";
    int64_t dest = br->imm;
    ArrayRef<uint32_t> operands = br->in;
    if (br->opc == Opc::CondBr) {
      const Slot *C = f.reg(br->in[0]);
      bool taken = C[act[0]].i != 0;
      for (int32_t t : act)
        if ((C[t].i != 0) != taken)
          return br->op->emitOpError()
                 << "branches divergently: " << describeThread(f, act[0])
                 << " goes to the " << (taken ? "true" : "false")
                 << " successor, " << describeThread(f, t) << " to the "
                 << (taken ? "false" : "true")
                 << " one; the fa interpreter runs unstructured control "
                    "flow only when it is uniform across the active threads";
      operands = operands.drop_front();
      if (taken) {
        operands = operands.take_front(br->n);
      } else {
        operands = operands.drop_front(br->n);
        dest = br->align;
      }
    }
    const CRegion *next = fn.blocks[dest];
    // Through a temporary: a block may pass its own arguments permuted.
    for (int32_t t : act) {
      tmp.clear();
      for (uint32_t s : operands)
        tmp.push_back(f.reg(s)[t]);
      for (auto [k, s] : llvm::enumerate(next->args))
        f.reg(s)[t] = tmp[k];
    }
    copyPendSlots(f, next->args, operands, act);
    block = next;
  }
}

void InterpreterImpl::copyPendSlots(Frame &f, ArrayRef<uint32_t> dst,
                                    ArrayRef<uint32_t> src,
                                    ArrayRef<int32_t> act) {
  if (!f.wgIssued)
    return;
  const size_t nt = f.numThreads;
  std::vector<uint32_t> pend;
  SmallVector<std::pair<uint8_t, Operation *>, 8> slotState;
  for (uint32_t s : src) {
    for (int32_t t : act)
      pend.push_back(f.wgPend[s * nt + t]);
    slotState.push_back({f.wgPendSlot[s], f.wgPendOp[s]});
  }
  size_t p = 0;
  for (auto [k, s] : llvm::enumerate(dst)) {
    for (int32_t t : act)
      f.wgPend[s * nt + t] = pend[p++];
    if (slotState[k].first) {
      f.wgPendSlot[s] = 1;
      f.wgPendOp[s] = slotState[k].second;
    }
  }
}

LogicalResult InterpreterImpl::execInstr(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  if (isArithOpc(I.opc))
    return execArith(f, I, act);
  switch (I.opc) {
  case Opc::AffineApply:
  case Opc::AffineMin:
  case Opc::AffineMax:
    return execAffine(f, I, act);
  case Opc::ThreadId:
  case Opc::BlockId:
  case Opc::BlockDim:
  case Opc::GridDim:
  case Opc::LaneId:
  case Opc::Barrier:
    return execGPU(f, I, act);
  case Opc::Shuffle:
    return execShuffle(f, I, act);
  case Opc::LaunchFunc:
    return execLaunch(f, I, act);
  case Opc::GetGlobal:
  case Opc::Dim:
  case Opc::MemRefAlias:
  case Opc::DynamicShared:
  case Opc::ExtractPtr:
    return execMemRef(f, I, act);
  case Opc::Load:
  case Opc::Store:
    return execMemory(f, I, act);
  case Opc::View:
  case Opc::SubView:
    return execView(f, I, act);
  case Opc::ConstVec:
  case Opc::Move:
  case Opc::Reduction:
    return execVector(f, I, act);
  case Opc::LdMatrix:
    return execLdMatrix(f, I, act);
  case Opc::MmaSync:
    return execMma(f, I, act);
  case Opc::AsyncCopy:
  case Opc::AsyncCommit:
  case Opc::AsyncWait:
    return execAsync(f, I, act);
  case Opc::WgMma:
    return execWgmma(f, I, act);
  case Opc::WgFence:
  case Opc::WgCommit:
  case Opc::WgWait:
    return execWgSync(f, I, act);
  case Opc::FenceProxy:
    return execFenceProxy(f, I, act);
  case Opc::NamedBarrier:
    return execNamedBarrier(f, I, act);
  case Opc::For:
    return execFor(f, I, act);
  case Opc::If:
    return execIf(f, I, act);
  default:
    return reportUnimplemented(I);
  }
}

LogicalResult InterpreterImpl::execFor(Frame &f, const Instr &I,
                                       ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  const unsigned w = I.w;
  const CRegion &body = *I.r0;
  const Slot *LB = R(I.in[0]), *UB = R(I.in[1]), *ST = R(I.in[2]);
  const size_t nIter = I.in.size() - 3;
  Slot *IV = R(body.args[0]);
  for (int32_t t : act) {
    if (ST[t].i <= 0)
      return I.op->emitOpError()
             << "has step " << ST[t].i << " in " << describeThread(f, t)
             << "; scf.for needs a positive step";
    IV[t] = LB[t];
  }
  for (size_t k = 0; k < nIter; ++k) {
    Slot *Arg = R(body.args[1 + k]);
    const Slot *Init = R(I.in[3 + k]);
    for (int32_t t : act)
      Arg[t] = Init[t];
    copyPend(f, body.args[1 + k], I.in[3 + k], act);
  }
  SmallVector<int32_t, 128> live;
  SmallVector<Slot, 8> tmp(nIter);
  const bool isUnsigned = I.flag;
  while (true) {
    live.clear();
    for (int32_t t : act) {
      bool in =
          isUnsigned ? zext(IV[t].i, w) < zext(UB[t].i, w) : IV[t].i < UB[t].i;
      if (in)
        live.push_back(t);
    }
    if (live.empty())
      break;
    if (failed(exec(f, body, live)))
      return failure();
    if (nIter) {
      for (int32_t t : live) {
        for (size_t k = 0; k < nIter; ++k)
          tmp[k] = R(body.yields[k])[t];
        for (size_t k = 0; k < nIter; ++k)
          R(body.args[1 + k])[t] = tmp[k];
      }
      copyPendSlots(f, ArrayRef<uint32_t>(body.args).drop_front(), body.yields,
                    live);
    }
    for (int32_t t : live)
      IV[t].i =
          sext(static_cast<int64_t>(zext(IV[t].i, w) + zext(ST[t].i, w)), w);
    if (f.threadOps > opts.maxThreadOpsPerBlock)
      return I.op->emitOpError() << "exceeds the interpreter's limit of "
                                 << opts.maxThreadOpsPerBlock
                                 << " thread-ops per block (a runaway loop?)";
  }
  for (size_t k = 0; k < nIter; ++k) {
    const Slot *Arg = R(body.args[1 + k]);
    Slot *Res = R(I.out[k]);
    for (int32_t t : act)
      Res[t] = Arg[t];
    copyPend(f, I.out[k], body.args[1 + k], act);
  }
  return success();
}

LogicalResult InterpreterImpl::execIf(Frame &f, const Instr &I,
                                      ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  const Slot *C = R(I.in[0]);
  SmallVector<int32_t, 128> thenSet, elseSet;
  for (int32_t t : act)
    (C[t].i ? thenSet : elseSet).push_back(t);
  auto runBranch = [&](const CRegion *region,
                       ArrayRef<int32_t> set) -> LogicalResult {
    if (set.empty() || !region)
      return success();
    if (failed(exec(f, *region, set)))
      return failure();
    for (auto [k, res] : llvm::enumerate(I.out)) {
      const Slot *Y = R(region->yields[k]);
      Slot *Res = R(res);
      for (int32_t t : set)
        Res[t] = Y[t];
      copyPend(f, res, region->yields[k], set);
    }
    return success();
  };
  if (failed(runBranch(I.r0.get(), thenSet)))
    return failure();
  return runBranch(I.r1.get(), elseSet);
}

LogicalResult InterpreterImpl::execLaunch(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  auto launchOp = cast<gpu::LaunchFuncOp>(I.op);
  Operation *kernelOp =
      SymbolTable::lookupNearestSymbolFrom(launchOp, launchOp.getKernel());
  FailureOr<const CFunction *> kernel = getCompiled(kernelOp);
  if (failed(kernel))
    return failure();
  // Operand slots follow the op's operand order.
  auto slotOfOperand = [&](Value v) {
    for (OpOperand &o : launchOp->getOpOperands())
      if (o.get() == v)
        return I.in[o.getOperandNumber()];
    llvm_unreachable("not an operand");
  };
  auto sizeOf = [&](Value v) { return R(slotOfOperand(v))[act[0]].i; };
  gpu::KernelDim3 g = launchOp.getGridSizeOperandValues();
  gpu::KernelDim3 b = launchOp.getBlockSizeOperandValues();
  std::array<int64_t, 3> grid{sizeOf(g.x), sizeOf(g.y), sizeOf(g.z)};
  std::array<int64_t, 3> block{sizeOf(b.x), sizeOf(b.y), sizeOf(b.z)};
  std::vector<MemRefVal> memArgs;
  SmallVector<Slot> scalarArgs;
  const CFunction &k = **kernel;
  if (launchOp.getKernelOperands().size() != k.argTypes.size())
    return I.op->emitOpError()
           << "passes " << launchOp.getKernelOperands().size()
           << " operands to a kernel of " << k.argTypes.size() << " arguments";
  for (Value v : launchOp.getKernelOperands()) {
    if (isa<MemRefType>(v.getType()))
      memArgs.push_back(f.mems[slotOfOperand(v)]);
    else
      scalarArgs.push_back(R(slotOfOperand(v))[act[0]]);
  }
  int64_t dynBytes = 0;
  if (Value d = launchOp.getDynamicSharedMemorySize())
    dynBytes = sizeOf(d);
  return launch(I.op, k, grid, block, memArgs, scalarArgs, dynBytes);
}
