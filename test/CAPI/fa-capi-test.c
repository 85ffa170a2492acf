//===- fa-capi-test.c - the fa C API end to end ---------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

// RUN: fa-capi-test 2>&1 | FileCheck %s

#include "fa-c/Dialects.h"

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kAttention =
    "func.func @attn(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>,\n"
    "                %v: tensor<1x2x16x8xf32>, %o: tensor<1x4x16x8xf32>)\n"
    "    -> tensor<1x4x16x8xf32> {\n"
    "  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>,\n"
    "         tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)\n"
    "         outs(%o : tensor<1x4x16x8xf32>) causal(top_left)\n"
    "         -> tensor<1x4x16x8xf32>\n"
    "  return %r : tensor<1x4x16x8xf32>\n"
    "}\n";

// 4 query heads over 3 key/value heads: the verifier rejects it.
static const char *kBadAttention =
    "func.func @bad(%q: tensor<1x4x16x8xf32>, %k: tensor<1x3x16x8xf32>,\n"
    "               %v: tensor<1x3x16x8xf32>, %o: tensor<1x4x16x8xf32>)\n"
    "    -> tensor<1x4x16x8xf32> {\n"
    "  %r = fa.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>,\n"
    "         tensor<1x3x16x8xf32>, tensor<1x3x16x8xf32>)\n"
    "         outs(%o : tensor<1x4x16x8xf32>)\n"
    "         -> tensor<1x4x16x8xf32>\n"
    "  return %r : tensor<1x4x16x8xf32>\n"
    "}\n";

static void printToStdout(MlirStringRef str, void *userData) {
  (void)userData;
  fwrite(str.data, 1, str.length, stdout);
}

static void printToStderr(MlirStringRef str, void *userData) {
  (void)userData;
  fwrite(str.data, 1, str.length, stderr);
}

/// Prints each diagnostic on one line: "diagnostic: <message>".
static MlirLogicalResult printDiagnostic(MlirDiagnostic diag, void *userData) {
  (void)userData;
  fprintf(stdout, "diagnostic: ");
  mlirDiagnosticPrint(diag, printToStdout, NULL);
  fprintf(stdout, "\n");
  fflush(stdout);
  return mlirLogicalResultSuccess();
}

/// Walk callback: counts operations whose name starts with "fa." or is
/// "llvm.func".
typedef struct {
  int faOps;
  int llvmFuncs;
} OpCounts;

static MlirWalkResult countOps(MlirOperation op, void *userData) {
  OpCounts *counts = (OpCounts *)userData;
  MlirIdentifier name = mlirOperationGetName(op);
  MlirStringRef str = mlirIdentifierStr(name);
  if (str.length > 3 && strncmp(str.data, "fa.", 3) == 0)
    ++counts->faOps;
  if (str.length == 9 && strncmp(str.data, "llvm.func", 9) == 0)
    ++counts->llvmFuncs;
  return MlirWalkResultAdvance;
}

static OpCounts count(MlirModule module) {
  OpCounts counts = {0, 0};
  mlirOperationWalk(mlirModuleGetOperation(module), countOps, &counts,
                    MlirWalkPreOrder);
  return counts;
}

/// Operands made by an unregistered op, so that the fa dialect alone is
/// enough.
static const char *kSoftmaxOnly =
    "%x = \"src.x\"() : () -> tensor<4x16xf32>\n"
    "%y = \"src.y\"() : () -> tensor<4x16xf32>\n"
    "%r = fa.softmax ins(%x : tensor<4x16xf32>) outs(%y : tensor<4x16xf32>)\n"
    "       dimension(1) -> tensor<4x16xf32>\n";

/// The fa dialect alone, through its handle: parse, verify, print.
static void testDialectOnly(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectHandle fa = mlirGetDialectHandle__fa__();
  MlirStringRef ns = mlirDialectHandleGetNamespace(fa);
  fprintf(stdout, "dialect namespace: %.*s\n", (int)ns.length, ns.data);
  mlirDialectHandleLoadDialect(fa, ctx);
  mlirContextSetAllowUnregisteredDialects(ctx, true);

  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kSoftmaxOnly));
  if (mlirModuleIsNull(module)) {
    fprintf(stdout, "unexpected parse failure\n");
    exit(1);
  }
  MlirOperation op = mlirModuleGetOperation(module);
  fprintf(stdout, "verified: %d\n", (int)mlirOperationVerify(op));
  OpCounts counts = count(module);
  fprintf(stdout, "fa ops: %d\n", counts.faOps);
  mlirOperationPrint(op, printToStdout, NULL);
  fprintf(stdout, "\n");
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
}
// CHECK-LABEL: dialect namespace: fa
// CHECK:       verified: 1
// CHECK:       fa ops: 1
// CHECK:       %[[X:.*]] = "src.x"()
// CHECK:       %[[Y:.*]] = "src.y"()
// CHECK:       fa.softmax ins(%[[X]] : tensor<4x16xf32>) outs(%[[Y]] : tensor<4x16xf32>) dimension(1)

/// Bad IR: the verifier's message reaches the diagnostic handler and the
/// parse returns a null module.
static void testBadIR(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  faRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(ctx, printDiagnostic, NULL, NULL);

  fprintf(stdout, "bad ir:\n");
  fflush(stdout);
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kBadAttention));
  fprintf(stdout, "module is null: %d\n", (int)mlirModuleIsNull(module));

  module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString("func.func @f() { fa.nope }"));
  fprintf(stdout, "module is null: %d\n", (int)mlirModuleIsNull(module));

  mlirContextDetachDiagnosticHandler(ctx, handler);
  mlirContextDestroy(ctx);
}
// CHECK-LABEL: bad ir:
// CHECK:       diagnostic: {{.*}}query heads Hq = 4 must be a multiple of key/value heads Hkv = 3
// CHECK:       module is null: 1
// CHECK:       diagnostic: {{.*}}fa.nope
// CHECK:       module is null: 1

/// Runs `pipeline` (textual, through the global registry) or, when NULL,
/// fa-lower-to-cpu built with faBuildLowerToCPUPipeline(options) into a pass
/// manager anchored on `anchor` (NULL: op-agnostic).
static int lower(MlirContext ctx, const char *pipeline, const char *options,
                 const char *anchor) {
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kAttention));
  if (mlirModuleIsNull(module))
    return 1;
  MlirPassManager pm =
      anchor ? mlirPassManagerCreateOnOperation(
                   ctx, mlirStringRefCreateFromCString(anchor))
             : mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult built =
      pipeline ? mlirParsePassPipeline(
                     opm, mlirStringRefCreateFromCString(pipeline),
                     printToStderr, NULL)
               : faBuildLowerToCPUPipeline(
                     opm, mlirStringRefCreateFromCString(options),
                     printToStdout, NULL);
  int status = 0;
  if (mlirLogicalResultIsFailure(built)) {
    fprintf(stdout, "\npipeline not built\n");
    status = 2;
  } else {
    MlirLogicalResult ran =
        mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
    OpCounts counts = count(module);
    fprintf(stdout, "ran: %d, fa ops left: %d, llvm.func: %d\n",
            (int)mlirLogicalResultIsSuccess(ran), counts.faOps,
            counts.llvmFuncs);
    if (mlirLogicalResultIsFailure(ran))
      status = 3;
  }
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  return status;
}

/// The pipelines: by name after faRegisterAllPasses, and built directly.
static void testPipelines(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  faRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  faRegisterAllPasses();
  faRegisterAllPasses(); // harmless a second time

  fprintf(stdout, "pipeline by name:\n");
  int status = lower(
      ctx, "builtin.module(fa-lower-to-cpu{block-q=8 block-kv=8})", "", NULL);
  fprintf(stdout, "status: %d\n", status);

  fprintf(stdout, "pipeline built:\n");
  status = lower(ctx, NULL, "block-q=8 block-kv=8", "builtin.module");
  fprintf(stdout, "status: %d\n", status);

  fprintf(stdout, "bad options:\n");
  fflush(stdout);
  status = lower(ctx, NULL, "block-q=eight", "builtin.module");
  fprintf(stdout, "status: %d\n", status);

  fprintf(stdout, "op-agnostic pass manager:\n");
  status = lower(ctx, NULL, "", NULL);
  fprintf(stdout, "status: %d\n", status);

  mlirContextDestroy(ctx);
}
// CHECK-LABEL: pipeline by name:
// CHECK-NEXT:  ran: 1, fa ops left: 0, llvm.func: {{[1-9][0-9]*}}
// CHECK-NEXT:  status: 0
// CHECK-LABEL: pipeline built:
// CHECK-NEXT:  ran: 1, fa ops left: 0, llvm.func: {{[1-9][0-9]*}}
// CHECK-NEXT:  status: 0
// CHECK-LABEL: bad options:
// CHECK:       fa-lower-to-cpu: bad options 'block-q=eight'
// CHECK-NEXT:  pipeline not built
// CHECK-NEXT:  status: 2
// CHECK-LABEL: op-agnostic pass manager:
// CHECK-NEXT:  fa-lower-to-cpu: the pass manager must be anchored on builtin.module, not any
// CHECK-NEXT:  pipeline not built
// CHECK-NEXT:  status: 2

int main(void) {
  testDialectOnly();
  testBadIR();
  testPipelines();
  return 0;
}
