//===- Dialects.cpp - C API of the fa dialect, passes, pipelines ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa-c/Dialects.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/InitAll.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(FA, fa, mlir::fa::FADialect)

void faRegisterAllDialects(MlirDialectRegistry registry) {
  fa::registerAllDialects(*unwrap(registry));
}

void faRegisterPasses(void) {
  fa::registerFAPasses();
  fa::registerFACodegenPasses();
}

void faRegisterPipelines(void) { fa::registerFAPipelines(); }

void faRegisterAllPasses(void) { fa::registerAllPasses(); }

namespace {
/// Parses `options` into an OptionsT and hands it to `build`; reports bad
/// options (and a wrongly anchored pass manager) through the callback.
template <typename OptionsT, typename BuildFn>
MlirLogicalResult buildPipeline(MlirOpPassManager passManager,
                                MlirStringRef options,
                                MlirStringCallback errorCallback,
                                void *userData, llvm::StringRef name,
                                BuildFn build) {
  OpPassManager &pm = *unwrap(passManager);
  std::string error;
  llvm::raw_string_ostream os(error);
  auto report = [&]() {
    if (errorCallback)
      errorCallback(mlirStringRefCreate(error.data(), error.size()),
                    userData);
    return mlirLogicalResultFailure();
  };
  if (pm.getOpAnchorName() != ModuleOp::getOperationName()) {
    os << name << ": the pass manager must be anchored on builtin.module, not "
       << pm.getOpAnchorName();
    return report();
  }
  OptionsT parsed;
  if (failed(parsed.parseFromString(unwrap(options), os))) {
    os << name << ": bad options '" << unwrap(options) << "'";
    return report();
  }
  build(pm, parsed);
  return mlirLogicalResultSuccess();
}
} // namespace

MlirLogicalResult faBuildLowerToCPUPipeline(MlirOpPassManager passManager,
                                            MlirStringRef options,
                                            MlirStringCallback errorCallback,
                                            void *userData) {
  return buildPipeline<fa::LowerToCPUOptions>(
      passManager, options, errorCallback, userData, "fa-lower-to-cpu",
      [](OpPassManager &pm, const fa::LowerToCPUOptions &opts) {
        fa::buildLowerToCPUPipeline(pm, opts);
      });
}

MlirLogicalResult faBuildLowerToNVVMPipeline(MlirOpPassManager passManager,
                                             MlirStringRef options,
                                             MlirStringCallback errorCallback,
                                             void *userData) {
  return buildPipeline<fa::LowerToNVVMOptions>(
      passManager, options, errorCallback, userData, "fa-lower-to-nvvm",
      [](OpPassManager &pm, const fa::LowerToNVVMOptions &opts) {
        fa::buildLowerToNVVMPipeline(pm, opts);
      });
}
