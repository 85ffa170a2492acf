//===- Emulate.cpp - Run attention kernels under the interpreter ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Emulate/Emulate.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fa;
using llvm::formatv;

OwningOpRef<ModuleOp> fa::mapForEmulation(ModuleOp module,
                                          const EmulationMapOptions &options,
                                          llvm::SourceMgr &mappedMgr,
                                          std::string &error) {
  MLIRContext *ctx = module.getContext();
  PassManager pm(ctx);
  if (!options.pipeline.empty()) {
    // The pass manager is anchored on builtin.module already.
    StringRef text = StringRef(options.pipeline).trim();
    if (!(text.consume_front("builtin.module(") && text.consume_back(")")))
      text = StringRef(options.pipeline).trim();
    std::string parseErrors;
    llvm::raw_string_ostream os(parseErrors);
    if (failed(parsePassPipeline(text.trim(), pm, os))) {
      error = "--pipeline: cannot parse '" + options.pipeline + "'";
      if (!parseErrors.empty())
        error += ": " + StringRef(parseErrors).trim().str();
      return nullptr;
    }
  } else {
    buildMapToGPUPipeline(pm, options.lowering);
  }
  if (failed(pm.run(module))) {
    error = "mapping the kernel to the GPU failed";
    return nullptr;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  if (!options.dumpPath.empty()) {
    std::string err;
    std::unique_ptr<llvm::ToolOutputFile> out =
        openOutputFile(options.dumpPath, &err);
    if (!out) {
      error = err;
      return nullptr;
    }
    out->os() << text;
    out->keep();
  }
  mappedMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          text, options.dumpPath.empty() ? "<mapped>" : options.dumpPath),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> mapped =
      parseSourceFile<ModuleOp>(mappedMgr, ParserConfig(ctx));
  if (!mapped)
    error = "cannot re-parse the mapped module";
  return mapped;
}

Operation *fa::lookupKernel(ModuleOp module, StringRef name) {
  Operation *found = nullptr;
  module.walk([&](gpu::GPUFuncOp func) {
    if (func.getName() == name && func.isKernel()) {
      found = func;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

LogicalResult fa::runEmulation(ModuleOp module, const EmulationLaunch &launch,
                               ArrayRef<EmulationBuffer> buffers,
                               const InterpreterOptions &options,
                               std::string &error, InterpreterStats *stats) {
  // Written-element masks of the outputs.
  std::vector<std::vector<uint8_t>> written(buffers.size());
  SmallVector<HostMemRef> args;
  for (auto [i, buf] : llvm::enumerate(buffers)) {
    HostMemRef m = HostMemRef::getDense(buf.name, buf.data, buf.shape);
    if (buf.isOutput) {
      written[i].assign(static_cast<size_t>(m.numElements), 0);
      m.writtenMask = written[i].data();
    }
    args.push_back(std::move(m));
  }

  Interpreter interpreter(module, options);
  LogicalResult result = failure();
  if (launch.bareKernel) {
    Operation *kernel = lookupKernel(module, launch.function);
    if (!kernel) {
      error = "no gpu.func kernel @" + launch.function + " in the module";
      return failure();
    }
    result = interpreter.runKernel(kernel, launch.grid, launch.block, args,
                                   launch.dynamicSharedBytes);
  } else {
    result = interpreter.runHostFunction(launch.function, args);
  }
  if (stats)
    *stats = interpreter.getStats();
  if (failed(result)) {
    error = "the kernel failed under the interpreter; no output written";
    return failure();
  }

  for (auto [i, buf] : llvm::enumerate(buffers)) {
    if (!buf.isOutput)
      continue;
    // The flat index of each element that had to be written and was not.
    int64_t stride = 1;
    for (size_t d = buf.shape.size(); buf.tokenDim >= 0 &&
                                      d-- > static_cast<size_t>(buf.tokenDim) + 1;)
      stride *= buf.shape[d];
    auto required = [&](size_t flat) {
      if (buf.tokenDim < 0)
        return true;
      int64_t t = static_cast<int64_t>(flat) / stride % buf.shape[buf.tokenDim];
      return t >= buf.tokenBegin && t < buf.tokenEnd;
    };
    size_t missing = 0, first = 0;
    for (size_t e = written[i].size(); e-- > 0;)
      if (!written[i][e] && required(e)) {
        ++missing;
        first = e;
      }
    if (!missing)
      continue;
    SmallVector<int64_t, 4> idx(buf.shape.size());
    for (size_t d = buf.shape.size(), rest = first; d-- > 0;) {
      idx[d] = static_cast<int64_t>(rest % buf.shape[d]);
      rest /= buf.shape[d];
    }
    std::string where = "(";
    llvm::raw_string_ostream os(where);
    llvm::interleaveComma(idx, os);
    os << (idx.size() == 1 ? ",)" : ")");
    error = formatv("the kernel left {0} of the {1} elements of {2} "
                    "unwritten (the first at {3}); no output written",
                    missing, written[i].size(), buf.name, where)
                .str();
    return failure();
  }
  return success();
}
