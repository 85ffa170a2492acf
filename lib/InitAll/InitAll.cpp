//===- InitAll.cpp - register everything fa uses --------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/InitAll.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void fa::registerAllDialects(DialectRegistry &registry) {
  registry.insert<fa::FADialect, affine::AffineDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, func::FuncDialect,
                  linalg::LinalgDialect, LLVM::LLVMDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect>();
  mlir::registerAllExtensions(registry);
}

void fa::registerAllPasses() {
  fa::registerFAPasses();
  mlir::registerTransformsPasses();
}
