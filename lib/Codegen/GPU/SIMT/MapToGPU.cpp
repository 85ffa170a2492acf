//===- MapToGPU.cpp - promoted tiles onto blocks, warps and threads -------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Maps the form fa-promote-shared produces onto the GPU:
//
//  * the block-level scf.forall becomes a gpu.func kernel in a gpu.module,
//    launched by gpu.launch_func over (query tiles, Hq, B); its induction
//    variables become block ids;
//  * the workgroup allocas become workgroup globals of the gpu.module;
//  * a thread-level forall runs its body once per thread (thread id x), a
//    warp-level forall once per warp (thread id / 32), each followed by a
//    gpu.barrier;
//  * inside a warp forall every vector<32xT> value is distributed over the
//    lanes: lane l holds element l. Elementwise ops become scalar ops,
//    vector.step the lane id, vector.reduction a butterfly of gpu.shuffle xor
//    (offsets 16, 8, 4, 2, 1), vector.extract at a dynamic position a
//    gpu.shuffle idx, vector.gather a load and vector.scatter a guarded
//    store at the lane's index.
//
// Anything outside this vocabulary is reported, never skipped.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Codegen/Passes.h"

#include "fa/Codegen/GPU/GpuKernelUtils.h"
#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAMAPTOGPUPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

namespace {

/// Whether a forall carries a mapping attribute of kind `Attr`.
template <typename Attr>
static bool hasMapping(scf::ForallOp op) {
  std::optional<ArrayAttr> mapping = op.getMapping();
  return mapping && !mapping->empty() && isa<Attr>((*mapping)[0]);
}

/// Distributed type of a lane vector: vector<32xT> -> T.
static Type laneType(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return vt.getElementType();
  return t;
}

/// Builds the kernel body by cloning the promoted block body.
class KernelEmitter {
public:
  KernelEmitter(func::FuncOp func, IRMapping &map, int64_t numThreads)
      : func(func), map(map), numThreads(numThreads) {}

  /// Emits the ops of `block` (without its terminator) at `b`.
  LogicalResult emitBlock(Block &block, OpBuilder &b, bool warp);

  Value threadId, laneId;

private:
  LogicalResult emitOp(Operation &op, OpBuilder &b, bool warp);
  LogicalResult emitFor(scf::ForOp op, OpBuilder &b, bool warp);
  LogicalResult emitIf(scf::IfOp op, OpBuilder &b, bool warp);
  LogicalResult emitForall(scf::ForallOp op, OpBuilder &b);
  LogicalResult emitWarpOp(Operation &op, OpBuilder &b);
  /// The kernel-side value of `v`, cloning pure computations that the
  /// promoted body used from outside the block forall (constants, dims).
  FailureOr<Value> lookup(Value v, OpBuilder &b);
  Value shuffle(OpBuilder &b, Location loc, Value v, Value offset,
                gpu::ShuffleMode mode);

  func::FuncOp func;
  IRMapping &map;
  int64_t numThreads;
};

} // namespace

FailureOr<Value> KernelEmitter::lookup(Value v, OpBuilder &b) {
  if (Value m = map.lookupOrNull(v))
    return m;
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumRegions() != 0 || !isMemoryEffectFree(def) ||
      def->getParentOp() != func.getOperation())
    return emitError(v.getLoc())
           << "fa-map-to-gpu: the kernel uses a value defined outside the "
              "block-level forall that cannot be recomputed in the kernel";
  // Recompute at the kernel entry so that it dominates every use.
  OpBuilder::InsertionGuard guard(b);
  Block *entry = b.getInsertionBlock();
  while (!isa<gpu::GPUFuncOp>(entry->getParentOp()))
    entry = entry->getParentOp()->getBlock();
  b.setInsertionPointToStart(entry);
  for (Value operand : def->getOperands())
    if (failed(lookup(operand, b)))
      return failure();
  b.setInsertionPointToStart(entry);
  // Keep the operands' definitions first.
  Operation *last = nullptr;
  for (Value operand : def->getOperands())
    if (Operation *d = map.lookup(operand).getDefiningOp())
      if (d->getBlock() == entry && (!last || last->isBeforeInBlock(d)))
        last = d;
  if (last)
    b.setInsertionPointAfter(last);
  Operation *clone = b.clone(*def, map);
  return clone->getResult(cast<OpResult>(v).getResultNumber());
}

Value KernelEmitter::shuffle(OpBuilder &b, Location loc, Value v,
                             Value offset, gpu::ShuffleMode mode) {
  Value width = arith::ConstantIntOp::create(b, loc, kWarpSize, 32);
  return gpu::ShuffleOp::create(b, loc, v, offset, width, mode)
      .getShuffleResult();
}

LogicalResult KernelEmitter::emitBlock(Block &block, OpBuilder &b,
                                       bool warp) {
  for (Operation &op : block.without_terminator())
    if (failed(emitOp(op, b, warp)))
      return failure();
  return success();
}

LogicalResult KernelEmitter::emitFor(scf::ForOp op, OpBuilder &b, bool warp) {
  SmallVector<Value> inits;
  for (Value v : op.getInitArgs()) {
    FailureOr<Value> m = lookup(v, b);
    if (failed(m))
      return failure();
    inits.push_back(*m);
  }
  FailureOr<Value> lb = lookup(op.getLowerBound(), b);
  FailureOr<Value> ub = lookup(op.getUpperBound(), b);
  FailureOr<Value> step = lookup(op.getStep(), b);
  if (failed(lb) || failed(ub) || failed(step))
    return failure();
  LogicalResult status = success();
  auto newFor = scf::ForOp::create(
      b, op.getLoc(), *lb, *ub, *step, inits,
      [&](OpBuilder &nb, Location loc, Value iv, ValueRange iter) {
        map.map(op.getInductionVar(), iv);
        for (auto [from, to] : llvm::zip(op.getRegionIterArgs(), iter))
          map.map(from, to);
        status = emitBlock(*op.getBody(), nb, warp);
        SmallVector<Value> yielded;
        if (succeeded(status))
          for (Value v : op.getBody()->getTerminator()->getOperands()) {
            FailureOr<Value> m = lookup(v, nb);
            if (failed(m)) {
              status = failure();
              break;
            }
            yielded.push_back(*m);
          }
        if (failed(status))
          yielded = SmallVector<Value>(iter.begin(), iter.end());
        scf::YieldOp::create(nb, loc, yielded);
      });
  if (failed(status))
    return failure();
  map.map(op.getResults(), newFor.getResults());
  return success();
}

LogicalResult KernelEmitter::emitIf(scf::IfOp op, OpBuilder &b, bool warp) {
  FailureOr<Value> cond = lookup(op.getCondition(), b);
  if (failed(cond))
    return failure();
  SmallVector<Type> types;
  for (Type t : op.getResultTypes())
    types.push_back(warp ? laneType(t) : t);
  auto newIf = scf::IfOp::create(b, op.getLoc(), types, *cond,
                                 /*withElseRegion=*/!op.getElseRegion().empty());
  auto emitRegion = [&](Region &from, Region &to) -> LogicalResult {
    if (from.empty())
      return success();
    Block &src = from.front();
    Block &dst = to.front();
    // The builder of scf.if added a terminator only when there are no
    // results; replace it with the mapped yield.
    if (!dst.empty())
      dst.back().erase();
    OpBuilder rb = OpBuilder::atBlockEnd(&dst);
    if (failed(emitBlock(src, rb, warp)))
      return failure();
    SmallVector<Value> yielded;
    for (Value v : src.getTerminator()->getOperands()) {
      FailureOr<Value> m = lookup(v, rb);
      if (failed(m))
        return failure();
      yielded.push_back(*m);
    }
    scf::YieldOp::create(rb, op.getLoc(), yielded);
    return success();
  };
  if (failed(emitRegion(op.getThenRegion(), newIf.getThenRegion())) ||
      failed(emitRegion(op.getElseRegion(), newIf.getElseRegion())))
    return failure();
  map.map(op.getResults(), newIf.getResults());
  return success();
}

LogicalResult KernelEmitter::emitForall(scf::ForallOp op, OpBuilder &b) {
  Location loc = op.getLoc();
  if (op.getRank() != 1 || !op.getOutputs().empty())
    return op.emitError("fa-map-to-gpu: expected a 1-d forall without "
                        "outputs inside the block");
  std::optional<int64_t> count = getConstantIntValue(op.getMixedUpperBound()[0]);
  bool isThread = hasMapping<gpu::GPUThreadMappingAttr>(op);
  bool isWarp = hasMapping<gpu::GPUWarpMappingAttr>(op);
  int64_t expected = isThread ? numThreads : numThreads / kWarpSize;
  if ((!isThread && !isWarp) || !count || *count != expected)
    return op.emitError("fa-map-to-gpu: expected a forall over the block's ")
           << expected << (isThread ? " threads" : " warps")
           << " mapped to #gpu.thread<x> or #gpu.warp<x>";
  if (isThread) {
    map.map(op.getInductionVars()[0], threadId);
  } else {
    Value warpId = arith::DivUIOp::create(
        b, loc, threadId, arith::ConstantIndexOp::create(b, loc, kWarpSize));
    map.map(op.getInductionVars()[0], warpId);
  }
  if (failed(emitBlock(*op.getBody(), b, /*warp=*/isWarp)))
    return failure();
  // The next phase reads what this one wrote (and overwrites what it read),
  // unless fa-promote-shared marked the phases as touching disjoint memory.
  if (!op->hasAttr(kNoBarrierAttrName))
    gpu::BarrierOp::create(b, loc);
  return success();
}

LogicalResult KernelEmitter::emitOp(Operation &op, OpBuilder &b, bool warp) {
  if (auto forall = dyn_cast<scf::ForallOp>(op)) {
    if (warp)
      return op.emitError("fa-map-to-gpu: nested forall inside a warp forall");
    return emitForall(forall, b);
  }
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp, b, warp);
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return emitIf(ifOp, b, warp);
  if (warp)
    return emitWarpOp(op, b);
  if (op.getNumRegions() != 0)
    return op.emitError("fa-map-to-gpu: unsupported op with regions in the "
                        "block body");
  for (Value v : op.getOperands())
    if (failed(lookup(v, b)))
      return failure();
  b.clone(op, map);
  return success();
}

LogicalResult KernelEmitter::emitWarpOp(Operation &op, OpBuilder &b) {
  Location loc = op.getLoc();
  SmallVector<Value> operands;
  for (Value v : op.getOperands()) {
    FailureOr<Value> m = lookup(v, b);
    if (failed(m))
      return failure();
    operands.push_back(*m);
  }
  auto isLaneVector = [](Type t) {
    auto vt = dyn_cast<VectorType>(t);
    return vt && vt.getRank() == 1 && vt.getDimSize(0) == kWarpSize;
  };
  bool touchesVectors =
      llvm::any_of(op.getOperandTypes(), isLaneVector) ||
      llvm::any_of(op.getResultTypes(), isLaneVector);
  for (Type t : llvm::concat<const Type>(op.getOperandTypes(),
                                         op.getResultTypes()))
    if (isa<VectorType>(t) && !isLaneVector(t))
      return op.emitError("fa-map-to-gpu: only vector<32xT> lane vectors "
                          "can be distributed, got ")
             << t;

  // exp2 and log2 become the NVVM intrinsics ex2.approx.f32 / lg2.approx.f32
  // (non-ftz), fma and |x| (the softcap's tanh approximation) llvm.fma.f32
  // and llvm.fabs.f32: no libdevice is needed to build the kernel.
  if (StringRef name = lowering::getNVVMIntrinsicName(&op); !name.empty()) {
    auto call = LLVM::CallIntrinsicOp::create(
        b, loc, Type(b.getF32Type()), b.getStringAttr(name),
        ValueRange(operands));
    map.map(op.getResult(0), call.getResult(0));
    return success();
  }
  if (!touchesVectors) {
    if (op.getNumRegions() != 0)
      return op.emitError("fa-map-to-gpu: unsupported op with regions in a "
                          "warp forall");
    b.clone(op, map);
    return success();
  }

  if (isa<vector::StepOp>(op)) {
    map.map(op.getResult(0), laneId);
    return success();
  }
  if (isa<vector::BroadcastOp>(op)) {
    map.map(op.getResult(0), operands[0]);
    return success();
  }
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    auto dense = dyn_cast<SplatElementsAttr>(cst.getValue());
    if (!dense)
      return op.emitError("fa-map-to-gpu: only splat lane-vector constants "
                          "can be distributed");
    Value s = arith::ConstantOp::create(
        b, loc, cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    map.map(op.getResult(0), s);
    return success();
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    if (red.getAcc())
      return op.emitError("fa-map-to-gpu: reductions with an accumulator are "
                          "not supported");
    Value acc = operands[0];
    for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
      Value off = arith::ConstantIntOp::create(b, loc, offset, 32);
      Value other = shuffle(b, loc, acc, off, gpu::ShuffleMode::XOR);
      switch (red.getKind()) {
      case vector::CombiningKind::MAXIMUMF:
        acc = arith::MaximumFOp::create(b, loc, acc, other);
        break;
      case vector::CombiningKind::ADD:
        acc = arith::AddFOp::create(b, loc, acc, other);
        break;
      default:
        return op.emitError("fa-map-to-gpu: unsupported reduction kind");
      }
    }
    map.map(red.getResult(), acc);
    return success();
  }
  if (auto extract = dyn_cast<vector::ExtractOp>(op)) {
    // Element `pos` lives in lane `pos`.
    OpFoldResult pos = extract.getMixedPosition()[0];
    Value src;
    if (auto v = dyn_cast<Value>(pos)) {
      FailureOr<Value> m = lookup(v, b);
      if (failed(m))
        return failure();
      src = arith::IndexCastOp::create(b, loc, b.getI32Type(), *m);
    } else {
      src = arith::ConstantIntOp::create(
          b, loc, *getConstantIntValue(pos), 32);
    }
    map.map(extract.getResult(),
            shuffle(b, loc, operands[0], src, gpu::ShuffleMode::IDX));
    return success();
  }
  if (auto gather = dyn_cast<vector::GatherOp>(op)) {
    if (!matchPattern(gather.getMask(), m_One()))
      return op.emitError("fa-map-to-gpu: only unmasked gathers can be "
                          "distributed");
    SmallVector<Value> idx;
    for (Value v : gather.getOffsets())
      idx.push_back(map.lookup(v));
    idx.back() = arith::AddIOp::create(b, loc, idx.back(),
                                       map.lookup(gather.getIndices()));
    map.map(gather.getResult(),
            memref::LoadOp::create(b, loc, map.lookup(gather.getBase()), idx));
    return success();
  }
  if (auto scatter = dyn_cast<vector::ScatterOp>(op)) {
    SmallVector<Value> idx;
    for (Value v : scatter.getOffsets())
      idx.push_back(map.lookup(v));
    idx.back() = arith::AddIOp::create(b, loc, idx.back(),
                                       map.lookup(scatter.getIndices()));
    Value base = map.lookup(scatter.getBase());
    Value value = map.lookup(scatter.getValueToStore());
    scf::IfOp::create(b, loc, map.lookup(scatter.getMask()),
                      [&](OpBuilder &tb, Location tl) {
                        memref::StoreOp::create(tb, tl, value, base, idx);
                        scf::YieldOp::create(tb, tl);
                      });
    return success();
  }
  // Elementwise arith and math ops: the same op on the lane's element.
  if (op.getNumRegions() == 0 && op.getNumResults() == 1 &&
      (isa<arith::ArithDialect, math::MathDialect>(op.getDialect())) &&
      op.hasTrait<OpTrait::Elementwise>()) {
    Operation *scalar = b.clone(op, map);
    scalar->getResult(0).setType(laneType(op.getResult(0).getType()));
    map.map(op.getResult(0), scalar->getResult(0));
    return success();
  }
  return op.emitError("fa-map-to-gpu: cannot distribute '")
         << op.getName() << "' over the lanes of a warp";
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FAMapToGPUPass final : fa::impl::FAMapToGPUPassBase<FAMapToGPUPass> {
  using Base::Base;
  void runOnOperation() override;
  LogicalResult mapFunction(func::FuncOp func, scf::ForallOp blocks);
};
} // namespace

LogicalResult FAMapToGPUPass::mapFunction(func::FuncOp func,
                                          scf::ForallOp blocks) {
  MLIRContext *ctx = &getContext();
  ModuleOp module = getOperation();
  Location loc = func.getLoc();
  auto config = func->getAttrOfType<DictionaryAttr>(kConfigAttrName);
  // A second kernel of the function (the merge of a split-KV attention)
  // carries its own thread count and name suffix.
  IntegerAttr threadsAttr =
      blocks->getAttrOfType<IntegerAttr>(kForallThreadsAttrName);
  if (!threadsAttr && config)
    threadsAttr = config.getAs<IntegerAttr>("threads");
  std::string kernelName = func.getName().str();
  if (auto suffix =
          blocks->getAttrOfType<StringAttr>(kForallKernelSuffixAttrName))
    kernelName += suffix.getValue().str();
  if (!threadsAttr)
    return func.emitError("fa-map-to-gpu: missing '")
           << kConfigAttrName << "' (run fa-promote-shared first)";
  int64_t numThreads = threadsAttr.getInt();
  if (blocks.getRank() != 3 || !blocks.getOutputs().empty())
    return blocks.emitError("fa-map-to-gpu: expected a 3-d block forall "
                            "without outputs");

  // gpu.module @<func>_kernels { workgroup globals; gpu.func @<func> }: the
  // kernels of one function (a split-KV attention and its merge) share the
  // module, so one PTX file holds both entries.
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(ctx));
  std::string moduleName = func.getName().str() + "_kernels";
  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(moduleName);
  if (!gpuModule) {
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointToEnd(module.getBody());
    gpuModule = gpu::GPUModuleOp::create(mb, loc, moduleName);
  }
  SymbolTable gpuSymbols(gpuModule);
  if (gpuSymbols.lookup(kernelName))
    return func.emitError("fa-map-to-gpu: two kernels named '")
           << kernelName << "' in '" << moduleName << "'";
  OpBuilder gb = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto kernel = gpu::GPUFuncOp::create(gb, loc, kernelName,
                                       func.getFunctionType());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  UnitAttr::get(ctx));
  kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(
      ctx, {static_cast<int32_t>(numThreads), 1, 1}));

  IRMapping map;
  Block &entry = kernel.getBody().front();
  for (auto [from, to] :
       llvm::zip(func.getArguments(), entry.getArguments()))
    map.map(from, to);
  OpBuilder kb = OpBuilder::atBlockBegin(&entry);

  // Workgroup allocas this kernel uses -> workgroup globals.
  int counter = 0;
  SmallVector<memref::AllocaOp> allocas;
  func.walk([&](memref::AllocaOp alloca) {
    if (alloca->getParentOp() == func.getOperation() &&
        llvm::any_of(alloca->getUsers(), [&](Operation *user) {
          return blocks->isAncestor(user);
        }))
      allocas.push_back(alloca);
  });
  for (memref::AllocaOp alloca : allocas) {
    MemRefType type = alloca.getType();
    auto space = dyn_cast_or_null<IntegerAttr>(type.getMemorySpace());
    if (!space || space.getInt() != kWorkgroupAddressSpace || !type.hasStaticShape())
      return alloca.emitError("fa-map-to-gpu: expected static workgroup "
                              "(address space 3) buffers outside the block "
                              "forall");
    OpBuilder sb = OpBuilder::atBlockBegin(gpuModule.getBody());
    auto global = memref::GlobalOp::create(
        sb, alloca.getLoc(), "__fa_smem" + std::to_string(counter++),
        sb.getStringAttr("private"), type, Attribute(), /*constant=*/false,
        sb.getI64IntegerAttr(alloca.getAlignment().value_or(16)));
    gpuSymbols.insert(global);
    Value view = memref::GetGlobalOp::create(kb, alloca.getLoc(), type,
                                             global.getSymName());
    map.map(alloca.getResult(), view);
  }

  // Block ids for the block forall's induction variables (x, y, z).
  SmallVector<Value> ivs = blocks.getInductionVars();
  map.map(ivs[0], gpu::BlockIdOp::create(kb, loc, gpu::Dimension::x));
  map.map(ivs[1], gpu::BlockIdOp::create(kb, loc, gpu::Dimension::y));
  map.map(ivs[2], gpu::BlockIdOp::create(kb, loc, gpu::Dimension::z));
  KernelEmitter emitter(func, map, numThreads);
  emitter.threadId = gpu::ThreadIdOp::create(kb, loc, gpu::Dimension::x);
  emitter.laneId = arith::RemUIOp::create(
      kb, loc, emitter.threadId,
      arith::ConstantIndexOp::create(kb, loc, kWarpSize));
  if (failed(emitter.emitBlock(*blocks.getBody(), kb, /*warp=*/false)))
    return failure();
  gpu::ReturnOp::create(kb, loc);

  // Host side: launch over the block forall's grid.
  OpBuilder hb(blocks);
  SmallVector<Value> grid = blocks.getUpperBound(hb);
  Value one = arith::ConstantIndexOp::create(hb, loc, 1);
  Value threads = arith::ConstantIndexOp::create(hb, loc, numThreads);
  gpu::LaunchFuncOp::create(hb, loc, kernel, gpu::KernelDim3{grid[0], grid[1], grid[2]},
                            gpu::KernelDim3{threads, one, one},
                            /*dynamicSharedMemorySize=*/Value(),
                            ValueRange(func.getArguments()));
  blocks.erase();
  for (memref::AllocaOp alloca : allocas)
    if (alloca->use_empty())
      alloca.erase();
  return success();
}

void FAMapToGPUPass::runOnOperation() {
  SmallVector<std::pair<func::FuncOp, scf::ForallOp>> work;
  for (auto func : getOperation().getOps<func::FuncOp>())
    for (auto forall : func.getBody().getOps<scf::ForallOp>())
      if (hasMapping<gpu::GPUBlockMappingAttr>(forall))
        work.push_back({func, forall});
  for (auto [func, forall] : work)
    if (failed(mapFunction(func, forall)))
      return signalPassFailure();
}
