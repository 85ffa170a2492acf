//===- KernelForm.cpp - matching fa.attention in the kernel form ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Common/KernelForm.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::fa;


/// `memref` when it is an argument of the function holding it (the kernels
/// replace the whole body: a memref defined in it would be erased under
/// them), else null.
static Value functionArgument(Value memref) {
  auto arg = dyn_cast<BlockArgument>(memref);
  if (!arg || !arg.getOwner()->isEntryBlock() ||
      !isa<FunctionOpInterface>(arg.getOwner()->getParentOp()))
    return Value();
  return memref;
}

/// Follows a tensor operand back to the memref argument it was read from:
/// either `bufferization.to_tensor %m`, or an elementwise i8 -> i1
/// conversion of such a tensor (how byte-per-element boolean masks enter
/// the kernel). `anyMemref` accepts a memref that is not an argument (the
/// mod_operands, which the kernels check themselves with their own error).
static Value traceToMemref(Value tensor, bool anyMemref = false) {
  Operation *def = tensor.getDefiningOp();
  if (auto toTensor = dyn_cast_or_null<bufferization::ToTensorOp>(def))
    return anyMemref ? toTensor.getBuffer()
                     : functionArgument(toTensor.getBuffer());
  if (auto generic = dyn_cast_or_null<linalg::GenericOp>(def)) {
    if (generic.getNumDpsInputs() != 1)
      return Value();
    Value in = generic.getDpsInputOperand(0)->get();
    auto inType = dyn_cast<RankedTensorType>(in.getType());
    if (!inType || !inType.getElementType().isInteger(8))
      return Value();
    return traceToMemref(in, anyMemref);
  }
  return Value();
}

/// The memref argument a result is materialized into.
static Value traceToDestination(Value result) {
  for (Operation *user : result.getUsers())
    if (auto mat = dyn_cast<bufferization::MaterializeInDestinationOp>(user))
      if (isa<BaseMemRefType>(mat.getDest().getType()))
        return functionArgument(mat.getDest());
  return Value();
}

LogicalResult fa::emitNotInKernelFormError(Operation *op, StringRef pass) {
  return op->emitError()
         << pass
         << ": operands must come from memref arguments through "
            "bufferization.to_tensor and results go to memrefs through "
            "bufferization.materialize_in_destination (the kernel form: "
            "examples/kernel-form.mlir shows it, `fa-compile --emit-mlir` "
            "writes it for a kernel spec)";
}

FailureOr<Operation *> fa::findKernelOp(Operation *func, StringRef opName,
                                        StringRef pass) {
  SmallVector<Operation *> ops;
  func->walk([&](Operation *o) {
    if (o->getName().getStringRef() == opName)
      ops.push_back(o);
  });
  if (ops.empty())
    return static_cast<Operation *>(nullptr);
  if (ops.size() != 1 || !func->getRegion(0).hasOneBlock()) {
    func->emitError() << pass << ": expected one " << opName
                      << " per kernel function, found " << ops.size();
    return failure();
  }
  return ops.front();
}

LogicalResult fa::verifyKernelQOffset(Operation *op, Value qOffset,
                                      StringRef pass) {
  if (!qOffset || matchPattern(qOffset, m_Constant()))
    return success();
  auto arg = dyn_cast<BlockArgument>(qOffset);
  auto func = op->getParentOfType<FunctionOpInterface>();
  if (arg && func && arg.getOwner() == &func.getFunctionBody().front())
    return success();
  return op->emitError() << pass
                         << ": the q_offset must be a function argument or a "
                            "constant in the kernel form";
}

LogicalResult fa::verifyKernelResultUses(Operation *op, StringRef pass) {
  for (Value r : op->getResults()) {
    for (Operation *u : r.getUsers()) {
      if (isa<bufferization::MaterializeInDestinationOp>(u) && u->use_empty())
        continue;
      return op->emitError() << pass << ": a result is used by '"
                            << u->getName()
                            << "'; expected only materialize_in_destination";
    }
  }
  return success();
}

FailureOr<KernelOperands> fa::matchKernelForm(AttentionOp op) {
  KernelOperands k;
  k.q = traceToMemref(op.getQuery());
  k.k = traceToMemref(op.getKey());
  k.v = traceToMemref(op.getValue());
  if (op.getKvLens())
    k.kvLens = traceToMemref(op.getKvLens());
  if (op.getMask())
    k.mask = traceToMemref(op.getMask());
  if (op.getAlibi())
    k.alibi = traceToMemref(op.getAlibi());
  if (op.getQSegments()) {
    k.qSegments = traceToMemref(op.getQSegments());
    k.kSegments = traceToMemref(op.getKSegments());
  }
  k.qOffset = op.getQOffset();
  if (Value table = op.getBlockTable()) {
    k.blockTable = traceToMemref(table);
    if (!k.blockTable)
      return failure();
  }
  if (op.isVarlen()) {
    k.cuSeqlensQ = traceToMemref(op.getCuSeqlensQ());
    k.cuSeqlensK = traceToMemref(op.getCuSeqlensK());
    if (!k.cuSeqlensQ || !k.cuSeqlensK)
      return failure();
  }
  if (Value bm = op.getBlockMask()) {
    k.blockMask = traceToMemref(bm);
    if (!k.blockMask)
      return failure();
  }
  for (Value operand : op.getModOperands()) {
    Value m = traceToMemref(operand, /*anyMemref=*/true);
    if (!m)
      return failure();
    k.modOperands.push_back(m);
  }
  k.o = traceToDestination(op.getResult());
  if (op.getLseResult())
    k.lse = traceToDestination(op.getLseResult());
  if (!k.q || !k.k || !k.v || !k.o || (op.getKvLens() && !k.kvLens) ||
      (op.getMask() && !k.mask) || (op.getLseResult() && !k.lse) ||
      (op.getAlibi() && !k.alibi) ||
      (op.getQSegments() && (!k.qSegments || !k.kSegments)))
    return failure();
  return k;
}

FailureOr<BackwardKernelOperands>
fa::matchBackwardKernelForm(AttentionBackwardOp op) {
  BackwardKernelOperands k;
  auto trace = [](Value operand, Value &memref) {
    if (operand)
      memref = traceToMemref(operand);
    return !operand || memref;
  };
  bool ok = trace(op.getQuery(), k.q) && trace(op.getKey(), k.k) &&
            trace(op.getValue(), k.v) && trace(op.getOutput(), k.o) &&
            trace(op.getLse(), k.lse) && trace(op.getGradOutput(), k.dO) &&
            trace(op.getKvLens(), k.kvLens) && trace(op.getMask(), k.mask) &&
            trace(op.getAlibi(), k.alibi) &&
            trace(op.getQSegments(), k.qSegments) &&
            trace(op.getKSegments(), k.kSegments);
  k.qOffset = op.getQOffset();
  k.dq = traceToDestination(op.getGradQueryResult());
  k.dk = traceToDestination(op.getGradKeyResult());
  k.dv = traceToDestination(op.getGradValueResult());
  if (!ok || !k.dq || !k.dk || !k.dv)
    return failure();
  return k;
}

FailureOr<MergeKernelOperands> fa::matchMergeKernelForm(MergeOp op) {
  MergeKernelOperands k;
  k.partialOutput = traceToMemref(op.getPartialOutput());
  k.partialLse = traceToMemref(op.getPartialLse());
  k.output = traceToDestination(op.getResult());
  if (op.getLseResult())
    k.lse = traceToDestination(op.getLseResult());
  if (!k.partialOutput || !k.partialLse || !k.output ||
      (op.getLseResult() && !k.lse))
    return failure();
  return k;
}
