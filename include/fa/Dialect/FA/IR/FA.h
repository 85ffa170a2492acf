//===- FA.h - fa dialect ----------------------------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FA_H
#define FA_DIALECT_FA_IR_FA_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fa/Dialect/FA/IR/FAOpsDialect.h.inc"

#include "fa/Dialect/FA/IR/FAEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FA/IR/FAAttrs.h.inc"

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.h.inc"

#endif // FA_DIALECT_FA_IR_FA_H
