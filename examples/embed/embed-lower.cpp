//===- embed-lower.cpp - lower fa IR to LLVM from C++ ---------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The all-in-one route and the programmatic pipeline: register what fa
// registers for its own tools (fa::registerAllDialects), parse a module,
// build fa-lower-to-cpu into a PassManager with fa::buildLowerToCPUPipeline,
// run it, and check the result: LLVM dialect functions and no fa op left.
//
//   embed-lower attention.mlir [block-q] [block-kv]    (prints the result)
//
//===----------------------------------------------------------------------===//

#include "fa/InitAll.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: embed-lower FILE.mlir [block-q] [block-kv]\n";
    return 2;
  }

  DialectRegistry registry;
  fa::registerAllDialects(registry);
  MLIRContext context(registry);

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(argv[1], &context);
  if (!module)
    return 1; // The parser has reported the error.

  fa::LowerToCPUOptions options;
  if (argc > 2)
    options.blockQ = std::atoi(argv[2]);
  if (argc > 3)
    options.blockKV = std::atoi(argv[3]);
  PassManager pm(&context, ModuleOp::getOperationName());
  fa::buildLowerToCPUPipeline(pm, options);
  if (failed(pm.run(*module))) {
    llvm::errs() << "embed-lower: fa-lower-to-cpu failed\n";
    return 1;
  }

  int llvmFuncs = 0, faOps = 0;
  module->walk([&](Operation *op) {
    if (op->getName().getStringRef() == "llvm.func")
      ++llvmFuncs;
    if (op->getName().getDialectNamespace() == "fa")
      ++faOps;
  });
  module->print(llvm::outs());
  llvm::outs() << "\n";
  llvm::errs() << "embed-lower: " << llvmFuncs << " llvm.func, " << faOps
               << " fa ops left\n";
  return (llvmFuncs > 0 && faOps == 0) ? 0 : 1;
}
