//===- FADialect.cpp - fa dialect -----------------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;

#include "fa/Dialect/FA/IR/FAOpsDialect.cpp.inc"

#include "fa/Dialect/FA/IR/FAEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FA/IR/FAAttrs.cpp.inc"

void FADialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fa/Dialect/FA/IR/FAAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fa/Dialect/FA/IR/FAOps.cpp.inc"
      >();
}
