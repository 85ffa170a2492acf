//===- Dialects.h - C API of the fa dialect, passes, pipelines ----*- C -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The C API of fa, following MLIR's C API conventions (mlir-c/): a dialect
// handle, registration functions, and the two pipelines as pass-manager
// builders. Everything else (contexts, parsing, verifying, running passes,
// printing) is MLIR's core C API (mlir-c/IR.h, mlir-c/Pass.h), which the
// FA::FACAPI library brings along. See docs/embedding.md.
//
//===----------------------------------------------------------------------===//

#ifndef FA_C_DIALECTS_H
#define FA_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

/// `mlirGetDialectHandle__fa__()`: insert the fa dialect into a registry
/// (mlirDialectHandleInsertDialect) or load it into a context
/// (mlirDialectHandleLoadDialect). On its own, enough to parse, print and
/// verify fa IR.
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(FA, fa);

/// Inserts into `registry` everything fa's lowerings need
/// (mlir::fa::registerAllDialects): the fa dialect, the upstream dialects,
/// their interface extensions and external models (bufferization, value
/// bounds, ...) and LLVM IR translations. Append the registry to a context
/// (mlirContextAppendDialectRegistry) before running a pipeline.
MLIR_CAPI_EXPORTED void faRegisterAllDialects(MlirDialectRegistry registry);

//===----------------------------------------------------------------------===//
// Passes and pipelines (global registry, for mlirParsePassPipeline)
//===----------------------------------------------------------------------===//

/// Registers fa's passes (fa-tile-attention, fa-online-softmax, ...).
MLIR_CAPI_EXPORTED void faRegisterPasses(void);

/// Registers the pipelines fa-lower-to-cpu and fa-lower-to-nvvm.
MLIR_CAPI_EXPORTED void faRegisterPipelines(void);

/// Registers fa's passes and pipelines and the upstream passes they are made
/// of (mlir::fa::registerAllPasses). Idempotent.
MLIR_CAPI_EXPORTED void faRegisterAllPasses(void);

//===----------------------------------------------------------------------===//
// Pipelines, built directly (no registration needed)
//===----------------------------------------------------------------------===//

/// Appends `fa-lower-to-cpu` to `passManager`, which must be anchored on
/// builtin.module. `options` is the pipeline's option string without braces
/// (e.g. "block-q=32 block-kv=32"; empty for the defaults). On bad options,
/// returns failure and passes a message to `errorCallback` (may be NULL).
MLIR_CAPI_EXPORTED MlirLogicalResult faBuildLowerToCPUPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

/// Appends `fa-lower-to-nvvm` (e.g. options "chip=sm_90"); otherwise as
/// faBuildLowerToCPUPipeline.
MLIR_CAPI_EXPORTED MlirLogicalResult faBuildLowerToNVVMPipeline(
    MlirOpPassManager passManager, MlirStringRef options,
    MlirStringCallback errorCallback, void *userData);

#ifdef __cplusplus
}
#endif

#endif // FA_C_DIALECTS_H
