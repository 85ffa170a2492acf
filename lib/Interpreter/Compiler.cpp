//===- Compiler.cpp - Compiles functions into the interpreter's form ------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The compile phase: numbers the values of a function as register slots,
// compiles its blocks and regions, and dispatches each op to the compile
// function of its dialect (in the dialect's file), which checks that the op,
// its types and attributes are supported and fills in its Instr.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

namespace mlir {
namespace fa {
namespace interp {

std::optional<FKind> getFKind(Type t) {
  if (t.isF16())
    return FKind::F16;
  if (t.isBF16())
    return FKind::BF16;
  if (t.isF32())
    return FKind::F32;
  if (t.isF64())
    return FKind::F64;
  return std::nullopt;
}

unsigned getIntWidth(Type t) {
  if (t.isIndex())
    return 64;
  if (auto it = dyn_cast<IntegerType>(t))
    return it.getWidth() <= 64 ? it.getWidth() : 0;
  return 0;
}

std::optional<EKind> getEKind(Type t) {
  if (auto f = getFKind(t)) {
    switch (*f) {
    case FKind::F16:
      return EKind::F16;
    case FKind::BF16:
      return EKind::BF16;
    case FKind::F32:
      return EKind::F32;
    case FKind::F64:
      return EKind::F64;
    }
  }
  switch (getIntWidth(t)) {
  case 1:
    return EKind::I1;
  case 8:
    return EKind::I8;
  case 16:
    return EKind::I16;
  case 32:
    return EKind::I32;
  case 64:
    return EKind::I64;
  default:
    return std::nullopt;
  }
}

/// Whether `space` is workgroup memory: #gpu.address_space<workgroup> or
/// the NVVM shared address space 3.
bool isWorkgroupSpace(Attribute space) {
  if (gpu::GPUDialect::isWorkgroupMemoryAddressSpace(space))
    return true;
  if (auto i = dyn_cast_or_null<IntegerAttr>(space))
    return i.getInt() == 3;
  return false;
}

SmallVector<int64_t, 4> getVectorShape(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return SmallVector<int64_t, 4>(vt.getShape());
  return {};
}

/// The number of register slots a value of type `t` takes: one per vector
/// element, one per field of an !llvm.struct, one for everything else.
uint32_t getNumSlots(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return static_cast<uint32_t>(vt.getNumElements());
  if (auto st = dyn_cast<LLVM::LLVMStructType>(t))
    return std::max<uint32_t>(1, st.getBody().size());
  return 1;
}

/// Whether `t` is a non-empty !llvm.struct of scalars (integers, index, f16,
/// bf16, f32, f64): the wgmma accumulator, one register slot per field.
bool isFlatStruct(Type t) {
  auto st = dyn_cast<LLVM::LLVMStructType>(t);
  if (!st || st.isOpaque() || st.getBody().empty())
    return false;
  return llvm::all_of(st.getBody(),
                      [](Type f) { return getFKind(f) || getIntWidth(f); });
}

/// The scalar type of `t`: its element type for vectors, `t` otherwise.
Type getScalarType(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return vt.getElementType();
  return t;
}

} // namespace interp
} // namespace fa
} // namespace mlir

//===----------------------------------------------------------------------===//
// Functions, blocks and regions
//===----------------------------------------------------------------------===//

LogicalResult Compiler::compileFunction(Operation *funcOp, Region &body) {
  fn.op = funcOp;
  if (auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(funcOp)) {
    if (!gpuFunc.getPrivateAttributions().empty())
      return funcOp->emitOpError()
             << "has private attributions, which the fa interpreter does "
                "not support";
    for (BlockArgument arg : gpuFunc.getWorkgroupAttributions()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape() || !getEKind(type.getElementType()))
        return funcOp->emitOpError()
               << "workgroup attribution of type " << arg.getType()
               << " is not supported by the fa interpreter";
      fn.workgroupAttribs.push_back({slotOf(arg), type});
    }
    for (unsigned i = 0, e = gpuFunc.getNumArguments(); i < e; ++i)
      fn.argTypes.push_back(gpuFunc.getArgument(i).getType());
  } else {
    for (BlockArgument arg : body.getArguments())
      fn.argTypes.push_back(arg.getType());
  }
  if (body.hasOneBlock())
    return compileBlock(body.front(), fn.body);
  // Unstructured control flow: number the blocks, then compile each.
  for (Block &block : body) {
    if (fn.blocks.empty()) {
      fn.blocks.push_back(&fn.body);
    } else {
      fn.ownedBlocks.push_back(std::make_unique<CRegion>());
      fn.blocks.push_back(fn.ownedBlocks.back().get());
    }
    blockIndex[&block] = fn.blocks.size() - 1;
  }
  for (auto [i, block] : llvm::enumerate(body)) {
    if (i > 0)
      for (BlockArgument arg : block.getArguments())
        if (failed(checkScalarType(funcOp, arg.getType())))
          return failure();
    if (failed(compileBlock(block, *fn.blocks[i])))
      return failure();
  }
  return success();
}

LogicalResult Compiler::checkScalarType(Operation *op, Type t) {
  if (auto vt = dyn_cast<VectorType>(t)) {
    if (!vt.isScalable() && vt.getRank() > 0)
      t = vt.getElementType();
  }
  if (getFKind(t) || getIntWidth(t) || isFlatStruct(t))
    return success();
  return op->emitOpError() << "has a value of type " << t
                           << ", which the fa interpreter does not support "
                              "(integers, index, f16, bf16, f32 and f64, "
                              "fixed-size vectors of them, and !llvm.struct "
                              "of them)";
}

LogicalResult Compiler::checkCarriedType(Operation *op, Type t) {
  if (isa<nvgpu::DeviceAsyncTokenType>(t))
    return success();
  return checkScalarType(op, t);
}

LogicalResult Compiler::compileRegion(Region &region, CRegion &out) {
  if (!region.hasOneBlock())
    return region.getParentOp()->emitOpError()
           << "has a region with " << region.getBlocks().size()
           << " blocks; the fa interpreter supports unstructured control "
              "flow (cf.br, cf.cond_br) in function bodies only";
  return compileBlock(region.front(), out);
}

LogicalResult Compiler::compileBlock(Block &block, CRegion &out) {
  for (BlockArgument arg : block.getArguments()) {
    // gpu.func workgroup attributions are block arguments too; they were
    // numbered already.
    expand(arg, out.args);
  }
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>() &&
        isa<cf::BranchOp, cf::CondBranchOp>(op)) {
      if (!blockIndex.count(op.getBlock()))
        return op.emitOpError()
               << "is not supported by the fa interpreter outside a "
                  "function body";
      auto branch = std::make_unique<Instr>();
      branch->op = &op;
      if (auto br = dyn_cast<cf::BranchOp>(op)) {
        branch->opc = Opc::Br;
        branch->imm = blockIndex[br.getDest()];
        for (Value v : br.getDestOperands())
          expand(v, branch->in);
      } else {
        auto cbr = cast<cf::CondBranchOp>(op);
        branch->opc = Opc::CondBr;
        branch->in.push_back(slotOf(cbr.getCondition()));
        branch->imm = blockIndex[cbr.getTrueDest()];
        branch->align = blockIndex[cbr.getFalseDest()];
        for (Value v : cbr.getTrueDestOperands())
          expand(v, branch->in);
        branch->n = branch->in.size() - 1;
        for (Value v : cbr.getFalseDestOperands())
          expand(v, branch->in);
      }
      out.branch = std::move(branch);
      continue;
    }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      if (!isa<scf::YieldOp, gpu::ReturnOp, func::ReturnOp>(op))
        return op.emitOpError()
               << "is not supported by the fa interpreter (unstructured "
                  "control flow other than cf.br and cf.cond_br)";
      for (Value v : op.getOperands())
        expand(v, out.yields);
      continue;
    }
    out.body.emplace_back();
    Instr &instr = out.body.back();
    instr.op = &op;
    if (failed(compileOp(&op, instr)))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult Compiler::unsupported(Operation *op, const Twine &why) {
  return op->emitOpError() << "is not supported by the fa interpreter"
                           << (why.isTriviallyEmpty() ? "" : ": ") << why;
}

LogicalResult Compiler::checkScalars(Operation *op) {
  for (Type t : op->getOperandTypes())
    if (failed(checkScalarType(op, t)))
      return failure();
  for (Type t : op->getResultTypes())
    if (failed(checkScalarType(op, t)))
      return failure();
  return success();
}

LogicalResult Compiler::compileIntOp(Operation *op, Instr &I, Opc opc) {
  if (failed(checkScalars(op)))
    return failure();
  I.opc = opc;
  I.w = getIntWidth(getScalarType(op->getResult(0).getType()));
  if (!I.w)
    return unsupported(op, "expected an integer or index result");
  return success();
}

LogicalResult Compiler::compileFloatOp(Operation *op, Instr &I, Opc opc) {
  if (failed(checkScalars(op)))
    return failure();
  I.opc = opc;
  auto fk = getFKind(getScalarType(op->getResult(0).getType()));
  if (!fk)
    return unsupported(op, "expected a float result");
  I.fk = *fk;
  return success();
}

LogicalResult Compiler::compileCastOp(Operation *op, Instr &I, Opc opc) {
  if (failed(checkScalars(op)))
    return failure();
  I.opc = opc;
  Type src = getScalarType(op->getOperand(0).getType()),
       dst = getScalarType(op->getResult(0).getType());
  if (auto f = getFKind(src))
    I.fk = *f;
  if (auto f = getFKind(dst))
    I.fk2 = *f;
  I.w2 = getIntWidth(src);
  I.w = getIntWidth(dst);
  return success();
}

LogicalResult Compiler::compileOp(Operation *op, Instr &I) {
  for (Value v : op->getOperands())
    I.in.push_back(slotOf(v));
  for (Value v : op->getResults())
    I.out.push_back(slotOf(v));
  if (op->getNumResults() == 1)
    I.n = getNumSlots(op->getResult(0).getType());

  // Kernel-only and host-only ops.
  bool gpuIdOp =
      isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp,
          gpu::LaneIdOp, gpu::BarrierOp, gpu::ShuffleOp,
          gpu::DynamicSharedMemoryOp, nvgpu::LdMatrixOp, nvgpu::MmaSyncOp,
          nvgpu::DeviceAsyncCopyOp, nvgpu::DeviceAsyncCreateGroupOp,
          nvgpu::DeviceAsyncWaitOp, NVVM::WgmmaFenceAlignedOp,
          NVVM::WgmmaGroupSyncAlignedOp, NVVM::WgmmaWaitGroupSyncOp,
          NVVM::WgmmaMmaAsyncOp, NVVM::FenceProxyOp, NVVM::BarrierOp,
          NVVM::Barrier0Op, memref::ExtractAlignedPointerAsIndexOp>(op);
  if (gpuIdOp && !fn.isKernel)
    return op->emitOpError() << "outside a gpu.func kernel";
  if (isa<gpu::LaunchFuncOp>(op) && fn.isKernel)
    return op->emitOpError() << "inside a kernel is not supported";
  // The NVVM math intrinsics are compiled with math.
  if (isa<LLVM::CallIntrinsicOp>(op))
    return compileArithOp(op, I);
  using CompileFn = LogicalResult (Compiler::*)(Operation *, Instr &);
  CompileFn compile =
      llvm::StringSwitch<CompileFn>(op->getName().getDialectNamespace())
          .Case(arith::ArithDialect::getDialectNamespace(),
                &Compiler::compileArithOp)
          .Case(math::MathDialect::getDialectNamespace(),
                &Compiler::compileArithOp)
          .Case(affine::AffineDialect::getDialectNamespace(),
                &Compiler::compileAffineOp)
          .Case(gpu::GPUDialect::getDialectNamespace(), &Compiler::compileGPUOp)
          .Case(memref::MemRefDialect::getDialectNamespace(),
                &Compiler::compileMemRefOp)
          .Case(vector::VectorDialect::getDialectNamespace(),
                &Compiler::compileVectorOp)
          .Case(scf::SCFDialect::getDialectNamespace(), &Compiler::compileSCFOp)
          .Case(nvgpu::NVGPUDialect::getDialectNamespace(),
                &Compiler::compileNVGPUOp)
          .Case(NVVM::NVVMDialect::getDialectNamespace(),
                &Compiler::compileNVVMOp)
          .Case(LLVM::LLVMDialect::getDialectNamespace(),
                &Compiler::compileLLVMOp)
          .Default(nullptr);
  if (!compile)
    return unsupported(op, "");
  return (this->*compile)(op, I);
}
