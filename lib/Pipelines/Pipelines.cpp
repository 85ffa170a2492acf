//===- Pipelines.cpp - fa pass pipelines ----------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void fa::buildLowerToCPUPipeline(OpPassManager &pm,
                                 const LowerToCPUOptions &options) {
  // fa ops -> tiled loops on tensors (or the naive reference, or the GPU
  // path's promoted form, which is already on memrefs).
  if (options.promoted)
  {
    FAPromoteSharedPassOptions promoteOpts;
    promoteOpts.blockQ = options.gpuBlockQ;
    promoteOpts.blockKV = options.gpuBlockKV;
    pm.addNestedPass<func::FuncOp>(createFAPromoteSharedPass(promoteOpts));
  }
  if (options.reference)
    pm.addPass(createFADecomposeReferencePass());
  pm.addPass(createFATileAttentionPass(
      FATileAttentionPassOptions{options.blockQ, options.blockKV}));
  pm.addPass(
      createFAOnlineSoftmaxPass(FAOnlineSoftmaxPassOptions{options.softmaxTile}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Tensors -> buffers. Function arguments keep identity layouts so callers
  // pass plain strided descriptors.
  bufferization::OneShotBufferizePassOptions bufOpts;
  bufOpts.bufferizeFunctionBoundaries = true;
  bufOpts.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufOpts));
  // CSE before canonicalize folds the self-copies that bufferizing
  // parallel_insert_slice leaves behind.
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  bufferization::BufferDeallocationPipelineOptions deallocOpts;
  bufferization::buildBufferDeallocationPipeline(pm, deallocOpts);
  pm.addPass(createConvertBufferizationToMemRefPass());

  // Loops -> LLVM.
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createForallToForLoopPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createLoopInvariantCodeMotionPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void fa::registerFAPipelines() {
  PassPipelineRegistration<LowerToCPUOptions>(
      "fa-lower-to-cpu",
      "Lower fa ops to the LLVM dialect for the CPU: tiled online softmax "
      "(or the naive reference), bufferization, loops, LLVM",
      buildLowerToCPUPipeline);
}
