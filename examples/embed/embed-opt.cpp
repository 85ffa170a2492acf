//===- embed-opt.cpp - an mlir-opt that embeds fa, minimal registration ---===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The minimal route: a compiler that has its own dialect list adds fa's
// dialect, passes and pipelines, and the upstream dialects and external
// interface models that fa-lower-to-cpu goes through. Everything else of
// upstream MLIR stays out.
//
//   embed-opt attention.mlir --fa-lower-to-cpu
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/SubsetInsertionOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/Transforms/SubsetInsertionOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/Transforms/SubsetOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // fa, and the dialects of the input (func, tensor).
  registry.insert<mlir::fa::FADialect, mlir::func::FuncDialect,
                  mlir::tensor::TensorDialect>();
  // What the lowering produces on the way to the LLVM dialect. The passes
  // would load these on demand; registering them lets the tool parse its
  // own output.
  registry.insert<mlir::arith::ArithDialect, mlir::linalg::LinalgDialect,
                  mlir::scf::SCFDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect,
                  mlir::vector::VectorDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::LLVM::LLVMDialect>();
  // One-shot bufferization needs the ops' BufferizableOpInterface models,
  // which upstream keeps apart from the dialects, and the subset models that
  // let it see that a loop's extract_slice/insert_slice pair (or a linalg
  // op's output) updates its iteration argument in place.
  mlir::arith::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  mlir::linalg::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::scf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::tensor::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::vector::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::linalg::registerSubsetOpInterfaceExternalModels(registry);
  mlir::tensor::registerSubsetOpInterfaceExternalModels(registry);
  mlir::vector::registerSubsetOpInterfaceExternalModels(registry);

  // fa's passes (fa-tile-attention, ...) and pipelines (fa-lower-to-cpu,
  // fa-lower-to-nvvm), plus two upstream passes for stepping through.
  mlir::fa::registerFAPasses();
  mlir::fa::registerFACodegenPasses();
  mlir::fa::registerFAPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "embed-opt: an optimizer that embeds fa\n", registry));
}
