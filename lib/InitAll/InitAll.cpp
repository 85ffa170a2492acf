//===- InitAll.cpp - register everything fa uses --------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/InitAll.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void fa::registerAllDialects(DialectRegistry &registry) {
  registry.insert<fa::FADialect>();
  // The lowerings go through most of upstream MLIR (linalg, bufferization,
  // scf, memref, LLVM, later gpu/nvvm).
  mlir::registerAllDialects(registry);
  fa::registerAllExtensions(registry);
}

void fa::registerAllExtensions(DialectRegistry &registry) {
  // fa's own external models and extensions go here.
  fa::registerTilingInterfaceExternalModels(registry);

  // The external interface models (bufferization, value bounds, inlining,
  // LLVM translation, ...) that upstream registers apart from its dialects.
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR and PTX in-process.
  mlir::registerAllToLLVMIRTranslations(registry);
}

void fa::registerAllPasses() {
  // Pipelines may be registered only once; make repeated calls harmless.
  static const bool registered = [] {
    fa::registerFAPasses();
    fa::registerFACodegenPasses();
    fa::registerFAPipelines();
    // Upstream passes the pipelines are made of, so users can run the steps
    // one by one with fa-opt.
    mlir::registerAllPasses();
    return true;
  }();
  (void)registered;
}
