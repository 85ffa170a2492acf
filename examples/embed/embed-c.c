/*===- embed-c.c - lower fa IR to LLVM through fa's C API ------------------===
 *
 * Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 *===----------------------------------------------------------------------===
 *
 * The C route: register fa's dialects and passes, parse a file, run
 * "builtin.module(fa-lower-to-cpu{...})" and print the result.
 *
 *   embed-c attention.mlir ["block-q=32 block-kv=32"]
 *
 *===----------------------------------------------------------------------===*/

#include "fa-c/Dialects.h"

#include <stdio.h>
#include <string.h>

static void printToFile(MlirStringRef str, void *userData) {
  fwrite(str.data, 1, str.length, (FILE *)userData);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: embed-c FILE.mlir [OPTIONS]\n");
    return 2;
  }
  MlirContext ctx = mlirContextCreate();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  faRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);

  int status = 1;
  MlirModule module =
      mlirModuleCreateParseFromFile(ctx, mlirStringRefCreateFromCString(argv[1]));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "embed-c: cannot parse %s\n", argv[1]);
    goto done;
  }

  MlirPassManager pm = mlirPassManagerCreateOnOperation(
      ctx, mlirStringRefCreateFromCString("builtin.module"));
  const char *options = argc > 2 ? argv[2] : "";
  if (mlirLogicalResultIsFailure(faBuildLowerToCPUPipeline(
          mlirPassManagerGetAsOpPassManager(pm),
          mlirStringRefCreateFromCString(options), printToFile, stderr))) {
    fprintf(stderr, "\nembed-c: bad options\n");
  } else if (mlirLogicalResultIsFailure(
                 mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "embed-c: fa-lower-to-cpu failed\n");
  } else {
    mlirOperationPrint(mlirModuleGetOperation(module), printToFile, stdout);
    fprintf(stdout, "\n");
    status = 0;
  }
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
done:
  mlirContextDestroy(ctx);
  return status;
}
