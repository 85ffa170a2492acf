//===- Interpreter.cpp - SIMT interpreter of gpu-level IR -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The public API: compiling the functions a run reaches, binding the host
// buffers to memref arguments, and launching kernels (the workgroup buffers,
// their places in the shared window, and the blocks of the grid one after
// another). The interpreter's internals are described in InterpreterImpl.h.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::interp;
using llvm::formatv;

FailureOr<const CFunction *> InterpreterImpl::getCompiled(Operation *funcOp) {
  auto it = compiled.find(funcOp);
  if (it != compiled.end())
    return static_cast<const CFunction *>(it->second.get());
  auto fn = std::make_unique<CFunction>();
  Compiler compiler(*fn);
  LogicalResult result = failure();
  if (auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(funcOp)) {
    if (!gpuFunc.isKernel()) {
      funcOp->emitOpError() << "is not a kernel";
      return failure();
    }
    fn->isKernel = true;
    result = compiler.compileFunction(funcOp, gpuFunc.getBody());
  } else if (auto func = dyn_cast<func::FuncOp>(funcOp)) {
    if (func.isExternal()) {
      funcOp->emitOpError() << "has no body";
      return failure();
    }
    result = compiler.compileFunction(funcOp, func.getBody());
  } else {
    funcOp->emitOpError() << "is neither a func.func nor a gpu.func kernel";
    return failure();
  }
  if (failed(result))
    return failure();
  const CFunction *ptr = fn.get();
  compiled[funcOp] = std::move(fn);
  return ptr;
}

LogicalResult InterpreterImpl::compileReachable(func::FuncOp host) {
  if (failed(getCompiled(host)))
    return failure();
  WalkResult walk = host.walk([&](gpu::LaunchFuncOp launchOp) {
    Operation *kernel =
        SymbolTable::lookupNearestSymbolFrom(launchOp, launchOp.getKernel());
    if (!kernel) {
      launchOp.emitOpError()
          << "refers to an unknown kernel " << launchOp.getKernel();
      return WalkResult::interrupt();
    }
    if (failed(getCompiled(kernel)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

FailureOr<std::vector<MemRefVal>>
InterpreterImpl::bindHostArgs(Operation *funcOp, ArrayRef<Type> argTypes,
                              ArrayRef<HostMemRef> args) {
  if (args.size() != argTypes.size()) {
    funcOp->emitOpError() << "takes " << argTypes.size() << " arguments, "
                          << args.size() << " given";
    return failure();
  }
  std::vector<MemRefVal> vals;
  for (auto [i, type, arg] : llvm::enumerate(argTypes, args)) {
    auto mt = dyn_cast<MemRefType>(type);
    std::optional<EKind> ek = mt ? getEKind(mt.getElementType()) : std::nullopt;
    if (!ek) {
      funcOp->emitOpError()
          << "argument " << i << " has type " << type
          << "; the fa interpreter takes memrefs of scalars only";
      return failure();
    }
    auto fail = [&](const Twine &msg) {
      funcOp->emitOpError() << "argument " << i << " (" << arg.name << ", "
                            << type << "): " << msg;
      return failure();
    };
    if (static_cast<int64_t>(arg.sizes.size()) != mt.getRank() ||
        arg.strides.size() != arg.sizes.size())
      return fail("the descriptor has rank " + Twine(arg.sizes.size()));
    SmallVector<int64_t> typeStrides;
    int64_t typeOffset;
    if (failed(mt.getStridesAndOffset(typeStrides, typeOffset)))
      return fail("the layout is not strided");
    int64_t last = arg.offset;
    bool empty = false;
    for (int64_t d = 0; d < mt.getRank(); ++d) {
      if (!mt.isDynamicDim(d) && mt.getDimSize(d) != arg.sizes[d])
        return fail(formatv("size {0} of dim {1} does not match the type",
                            arg.sizes[d], d)
                        .str());
      if (!ShapedType::isDynamic(typeStrides[d]) &&
          typeStrides[d] != arg.strides[d] && arg.sizes[d] > 1)
        return fail(formatv("stride {0} of dim {1} does not match the type",
                            arg.strides[d], d)
                        .str());
      if (arg.sizes[d] < 0)
        return fail("negative size");
      if (arg.sizes[d] == 0)
        empty = true;
      else
        last += (arg.sizes[d] - 1) * arg.strides[d];
    }
    if (!empty &&
        (arg.offset < 0 || last >= arg.numElements || last < 0 || !arg.data))
      return fail("the descriptor reaches past the " + Twine(arg.numElements) +
                  " elements of the buffer");
    auto buf = std::make_unique<Buffer>();
    buf->name = arg.name.empty() ? ("argument " + Twine(i)).str() : arg.name;
    buf->type = type;
    buf->ek = *ek;
    buf->data = static_cast<char *>(arg.data);
    buf->numElements = arg.numElements;
    buf->gshift = log2Size(getEKindSize(*ek));
    buf->writtenMask = arg.writtenMask;
    MemRefVal v;
    v.buf = buf.get();
    v.ek = *ek;
    v.offset = arg.offset;
    v.sizes.assign(arg.sizes.begin(), arg.sizes.end());
    v.strides.assign(arg.strides.begin(), arg.strides.end());
    vals.push_back(std::move(v));
    hostBuffers.push_back(std::move(buf));
  }
  return vals;
}

LogicalResult InterpreterImpl::runHost(func::FuncOp host,
                                       ArrayRef<HostMemRef> args) {
  if (failed(compileReachable(host)))
    return failure();
  const CFunction *fn = *getCompiled(host);
  FailureOr<std::vector<MemRefVal>> vals =
      bindHostArgs(host, fn->argTypes, args);
  if (failed(vals))
    return failure();
  Frame f;
  f.fn = fn;
  f.numThreads = 1;
  f.regs.assign(fn->numSlots, Slot{0});
  f.mems.resize(fn->numSlots);
  for (auto [slot, val] : llvm::zip(fn->body.args, *vals))
    f.mems[slot] = val;
  int32_t thread0 = 0;
  if (failed(execBody(f, *fn, ArrayRef<int32_t>(thread0))))
    return failure();
  return finish(host.getLoc());
}

LogicalResult InterpreterImpl::finish(Location loc) {
  if (stats.races || stats.uninitializedReads) {
    InFlightDiagnostic d = emitError(loc);
    d << "the fa interpreter found ";
    if (stats.races)
      d << stats.races << " racing accesses";
    if (stats.races && stats.uninitializedReads)
      d << " and ";
    if (stats.uninitializedReads)
      d << stats.uninitializedReads
        << " reads of uninitialized workgroup memory";
    d << " (" << reportsPrinted << " reported)";
    return failure();
  }
  return success();
}

LogicalResult InterpreterImpl::launch(
    Operation *launchOp, const CFunction &kernel, std::array<int64_t, 3> grid,
    std::array<int64_t, 3> block, ArrayRef<MemRefVal> memArgs,
    ArrayRef<Slot> scalarArgs, int64_t dynamicSharedBytes) {
  auto gpuFunc = cast<gpu::GPUFuncOp>(kernel.op);
  // CUDA's limits; an empty grid launches nothing (as FARuntime does).
  static constexpr int64_t gridLimits[3] = {2147483647, 65535, 65535};
  for (int d = 0; d < 3; ++d) {
    if (grid[d] < 0 || grid[d] > gridLimits[d] || block[d] < 1)
      return launchOp->emitOpError()
             << "launches a grid of (" << grid[0] << ", " << grid[1] << ", "
             << grid[2] << ") blocks of (" << block[0] << ", " << block[1]
             << ", " << block[2]
             << ") threads; grid sizes must be in [0, 2^31 - 1] x [0, 65535] "
                "x [0, 65535] and block sizes at least 1";
  }
  int64_t numThreads = block[0] * block[1] * block[2];
  if (dynamicSharedBytes < 0 || dynamicSharedBytes > (int64_t(1) << 30))
    return launchOp->emitOpError() << "launches with " << dynamicSharedBytes
                                   << " bytes of dynamic shared memory";
  if (numThreads > 1024)
    return launchOp->emitOpError() << "launches blocks of " << numThreads
                                   << " threads; at most 1024 are supported";
  if (auto known = gpuFunc.getKnownBlockSizeAttr()) {
    ArrayRef<int32_t> k = known.asArrayRef();
    for (int d = 0; d < 3 && d < static_cast<int>(k.size()); ++d)
      if (k[d] != block[d])
        return launchOp->emitOpError()
               << "launches " << gpuFunc.getName() << " with block size ("
               << block[0] << ", " << block[1] << ", " << block[2]
               << ") but the kernel's known_block_size is (" << k << ")";
  }
  ++stats.launches;
  ++launchId;

  Frame f;
  f.fn = &kernel;
  f.numThreads = static_cast<unsigned>(numThreads);
  f.regs.assign(static_cast<size_t>(kernel.numSlots) * numThreads, Slot{0});
  f.mems.resize(kernel.numSlots);
  f.gridDim = grid;
  f.blockDim = block;
  f.mark.assign(numThreads, 0);
  // Kernel arguments.
  unsigned memIdx = 0, scalarIdx = 0;
  for (auto [slot, type] : llvm::zip(kernel.body.args, kernel.argTypes)) {
    if (isa<MemRefType>(type)) {
      f.mems[slot] = memArgs[memIdx++];
    } else {
      Slot v = scalarArgs[scalarIdx++];
      Slot *r = f.reg(slot);
      std::fill(r, r + numThreads, v);
    }
  }
  // Workgroup buffers, one per global and attribution.
  auto makeShared = [&](std::string name, MemRefType type) {
    auto buf = std::make_unique<Buffer>();
    buf->name = std::move(name);
    buf->type = type;
    buf->ek = *getEKind(type.getElementType());
    buf->numElements = type.getNumElements();
    buf->gshift = log2Size(getEKindSize(buf->ek));
    buf->shared = true;
    buf->storage.assign(
        static_cast<size_t>(buf->numElements) * getEKindSize(buf->ek) + 8, 0);
    buf->data = buf->storage.data();
    buf->shadow.resize(buf->numElements);
    return buf;
  };
  auto describe = [](MemRefType type, Buffer *buf) {
    MemRefVal v;
    v.buf = buf;
    v.ek = buf->ek;
    v.sizes.assign(type.getShape().begin(), type.getShape().end());
    int64_t offset;
    SmallVector<int64_t> strides;
    (void)type.getStridesAndOffset(strides, offset);
    v.strides.assign(strides.begin(), strides.end());
    v.offset = offset;
    return v;
  };
  for (memref::GlobalOp g : kernel.sharedGlobals)
    f.sharedBufs.push_back(
        makeShared(("@" + g.getSymName()).str(), g.getType()));
  for (auto [i, attrib] : llvm::enumerate(kernel.workgroupAttribs)) {
    f.attribBufs.push_back(
        makeShared(("workgroup attribution " + Twine(i)).str(), attrib.second));
    f.mems[attrib.first] = describe(attrib.second, f.attribBufs.back().get());
  }
  {
    MLIRContext *ctx = gpuFunc.getContext();
    auto type = MemRefType::get(
        {dynamicSharedBytes}, IntegerType::get(ctx, 8),
        MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
    f.dynShared = makeShared("dynamic shared memory", type);
  }
  // The shared window: static buffers (globals, then attributions) from
  // 0x10 on, each aligned to 16 bytes or its global's alignment; dynamic
  // shared memory at opts.dynamicSharedBase (deliberately only 16-aligned by
  // default), or past the static buffers at the same offset modulo 1024.
  {
    if (opts.dynamicSharedBase < 16 || opts.dynamicSharedBase % 16 != 0)
      return launchOp->emitOpError()
             << "the interpreter's dynamic shared memory base "
             << opts.dynamicSharedBase << " must be a positive multiple of 16";
    int64_t next = 0x10;
    auto place = [&](Buffer &buf, int64_t align) {
      align = std::max<int64_t>(align, 16);
      next = (next + align - 1) / align * align;
      buf.sharedBase = next;
      next += buf.getNumBytes();
    };
    for (auto [i, buf] : llvm::enumerate(f.sharedBufs)) {
      memref::GlobalOp g = kernel.sharedGlobals[i];
      std::optional<uint64_t> align = g.getAlignment();
      place(*buf, align ? static_cast<int64_t>(*align) : 16);
    }
    for (auto &buf : f.attribBufs)
      place(*buf, 16);
    int64_t dynBase = opts.dynamicSharedBase;
    if (dynBase < next)
      dynBase = (next + 1023) / 1024 * 1024 + opts.dynamicSharedBase % 1024;
    f.dynShared->sharedBase = dynBase;
  }
  f.async.assign(numThreads, ThreadAsync());
  f.lastFence.assign(numThreads, 0);
  f.fenceBeforeBarrier.assign(numThreads, 0);
  if (kernel.hasWgmma) {
    f.wgCommitted.assign(numThreads, 0);
    f.wgRetired.assign(numThreads, 0);
    f.wgFenced.assign(numThreads, 0);
    f.wgPend.assign(static_cast<size_t>(kernel.numSlots) * numThreads, 0);
    f.wgPendSlot.assign(kernel.numSlots, 0);
    f.wgPendOp.assign(kernel.numSlots, nullptr);
  }

  std::vector<int32_t> all(numThreads);
  for (int32_t t = 0; t < numThreads; ++t)
    all[t] = t;
  for (int64_t z = 0; z < grid[2]; ++z) {
    for (int64_t y = 0; y < grid[1]; ++y) {
      for (int64_t x = 0; x < grid[0]; ++x) {
        f.blockId = {x, y, z};
        f.blockLinear = x + grid[0] * (y + grid[1] * z);
        f.blockStartEpoch = ++epoch;
        f.threadOps = 0;
        for (auto &buf : f.sharedBufs)
          buf->poison();
        for (auto &buf : f.attribBufs)
          buf->poison();
        f.dynShared->poison();
        // Every wgmma of the previous block counts as retired; a new group
        // number keeps its uncommitted results apart.
        for (int64_t t = 0; kernel.hasWgmma && t < numThreads; ++t) {
          f.wgRetired[t] = ++f.wgCommitted[t];
          f.wgFenced[t] = 0;
        }
        ++stats.blocks;
        if (failed(execBody(f, kernel, all)))
          return failure();
        dropPendingCopies(f);
      }
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Interpreter
//===----------------------------------------------------------------------===//

HostMemRef HostMemRef::getDense(std::string name, void *data,
                                ArrayRef<int64_t> sizes) {
  HostMemRef m;
  m.name = std::move(name);
  m.data = data;
  m.sizes.assign(sizes.begin(), sizes.end());
  m.strides.resize(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    m.strides[d] = stride;
    stride *= sizes[d];
  }
  m.numElements = stride;
  return m;
}

Interpreter::Interpreter(ModuleOp module, InterpreterOptions options)
    : impl(std::make_unique<InterpreterImpl>(module, options)) {}

Interpreter::~Interpreter() = default;

const InterpreterStats &Interpreter::getStats() const { return impl->stats; }

LogicalResult Interpreter::verifySupported(StringRef name) {
  auto host = impl->module.lookupSymbol<func::FuncOp>(name);
  if (!host)
    return emitError(impl->module.getLoc())
           << "no func.func named '" << name << "' in the module";
  return impl->compileReachable(host);
}

LogicalResult Interpreter::runHostFunction(StringRef name,
                                           ArrayRef<HostMemRef> args) {
  auto host = impl->module.lookupSymbol<func::FuncOp>(name);
  if (!host)
    return emitError(impl->module.getLoc())
           << "no func.func named '" << name << "' in the module";
  return impl->runHost(host, args);
}

LogicalResult Interpreter::runKernel(Operation *kernel,
                                     std::array<int64_t, 3> grid,
                                     std::array<int64_t, 3> block,
                                     ArrayRef<HostMemRef> args,
                                     int64_t dynamicSharedBytes) {
  FailureOr<const CFunction *> fn = impl->getCompiled(kernel);
  if (failed(fn))
    return failure();
  if (!(*fn)->isKernel)
    return kernel->emitOpError() << "is not a gpu.func kernel";
  FailureOr<std::vector<MemRefVal>> vals =
      impl->bindHostArgs(kernel, (*fn)->argTypes, args);
  if (failed(vals))
    return failure();
  if (failed(impl->launch(kernel, **fn, grid, block, *vals, {},
                          dynamicSharedBytes)))
    return failure();
  return impl->finish(kernel->getLoc());
}
