//===- InterpreterTestUtils.h - Shared fixture of the interpreter tests ---===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The fixture the interpreter's unit tests (InterpreterTest.cpp,
// WgmmaTest.cpp) share: a context with every dialect of the project loaded,
// the parsed module, and the diagnostics reported while a test runs.
//
//===----------------------------------------------------------------------===//

#ifndef FA_TEST_UNIT_INTERPRETER_INTERPRETERTESTUTILS_H
#define FA_TEST_UNIT_INTERPRETER_INTERPRETERTESTUTILS_H

#include "fa/InitAll.h"
#include "fa/Interpreter/Interpreter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/StringExtras.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace mlir::fa::test {

class InterpreterFixture : public ::testing::Test {
protected:
  InterpreterFixture() {
    DialectRegistry registry;
    registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    ctx.printOpOnDiagnostic(false);
  }

  /// Parses `src` into `module` and returns its (last) gpu.func; a test
  /// failure and nullptr where it does not parse.
  Operation *parseKernel(StringRef src) {
    module = parseSourceString<ModuleOp>(src, &ctx);
    if (!module) {
      ADD_FAILURE() << "cannot parse:\n" << src.str();
      return nullptr;
    }
    Operation *kernel = nullptr;
    module->walk([&](gpu::GPUFuncOp f) { kernel = f; });
    return kernel;
  }

  /// Runs `kernel` of `module` over `grid` blocks of `threads` threads (both
  /// in x) on `args`.
  LogicalResult runKernel(Operation *kernel, int64_t threads,
                          ArrayRef<HostMemRef> args,
                          InterpreterOptions options = {}, int64_t grid = 1,
                          int64_t dynamicSharedBytes = 0) {
    Interpreter interp(*module, options);
    return interp.runKernel(kernel, {grid, 1, 1}, {threads, 1, 1}, args,
                            dynamicSharedBytes);
  }

  /// Parses `src` into `module` and runs its (last) gpu.func in one block of
  /// `threads` threads on its one argument, `out`.
  template <typename T>
  LogicalResult runSource(StringRef src, std::vector<T> &out, int64_t threads,
                          InterpreterOptions options = {},
                          int64_t dynamicSharedBytes = 0) {
    Operation *kernel = parseKernel(src);
    if (!kernel)
      return failure();
    HostMemRef arg = HostMemRef::getDense("out", out.data(),
                                          {static_cast<int64_t>(out.size())});
    return runKernel(kernel, threads, {arg}, options, 1, dynamicSharedBytes);
  }

  bool diagContains(StringRef needle) const {
    for (const std::string &d : diags)
      if (StringRef(d).contains(needle))
        return true;
    return false;
  }
  std::string allDiags() const { return llvm::join(diags, "\n"); }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  /// The diagnostics reported in `ctx` (with their notes), in order.
  std::vector<std::string> diags;
  ScopedDiagnosticHandler handler{&ctx, [this](Diagnostic &d) {
                                    std::string s = d.str();
                                    for (Diagnostic &note : d.getNotes())
                                      s += "\n  note: " + note.str();
                                    diags.push_back(s);
                                    return success();
                                  }};
};

} // namespace mlir::fa::test

#endif // FA_TEST_UNIT_INTERPRETER_INTERPRETERTESTUTILS_H
