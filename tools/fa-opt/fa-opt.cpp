//===- fa-opt.cpp - fa optimizer driver -----------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// An mlir-opt style driver that knows the fa dialect, its passes and
// pipelines, and the upstream dialects and passes they rely on.
//
//===----------------------------------------------------------------------===//

#include "fa/InitAll.h"
#include "fa/Support/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::fa::registerAllDialects(registry);
  mlir::fa::registerAllPasses();
  mlir::fa::registerVersionPrinter("fa-opt");
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "fa optimizer driver\n", registry));
}
