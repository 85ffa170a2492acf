//===- Passes.h - fa's backend kernel builders ------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_CODEGEN_PASSES_H
#define FA_CODEGEN_PASSES_H

#include "fa/Dialect/FA/IR/FA.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace fa {

#define GEN_PASS_DECL
#include "fa/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa/Codegen/Passes.h.inc"

} // namespace fa
} // namespace mlir

#endif // FA_CODEGEN_PASSES_H
