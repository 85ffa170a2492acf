//===- Pipelines.cpp - fa pass pipelines ----------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace {
/// Rejects an unknown `cpu-kernel` with a diagnostic.
struct CheckCPUOptionsPass
    : public PassWrapper<CheckCPUOptionsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CheckCPUOptionsPass)
  explicit CheckCPUOptionsPass(std::string kernel) : kernel(std::move(kernel)) {}
  StringRef getArgument() const final { return "fa-check-cpu-options"; }
  void runOnOperation() override {
    if (kernel == "vector" || kernel == "tiled")
      return;
    emitError(getOperation().getLoc())
        << "fa-lower-to-cpu: cpu-kernel must be 'vector' or 'tiled', got '"
        << kernel << "'";
    signalPassFailure();
  }
  std::string kernel;
};
} // namespace

void fa::buildLowerToCPUPipeline(OpPassManager &pm,
                                 const LowerToCPUOptions &options) {
  // fa ops -> tiled loops on tensors (or the naive reference, or the GPU
  // path's promoted form, which is already on memrefs).
  if (options.promoted)
  {
    FAPromoteSharedPassOptions promoteOpts;
    promoteOpts.blockQ = options.gpuBlockQ;
    promoteOpts.blockKV = options.gpuBlockKV;
    promoteOpts.doubleBuffer = options.gpuDoubleBuffer;
    pm.addNestedPass<func::FuncOp>(createFAPromoteSharedPass(promoteOpts));
  }
  if (options.reference)
    pm.addPass(createFADecomposeReferencePass());
  pm.addPass(std::make_unique<CheckCPUOptionsPass>(options.cpuKernel));
  // Kernel-form attention -> the vectorized kernel (on memrefs); whatever
  // is left takes the tiled path.
  if (options.cpuKernel == "vector" && !options.promoted &&
      !options.reference) {
    FACpuAttentionPassOptions cpuOpts;
    cpuOpts.vectorWidth = options.vectorWidth;
    cpuOpts.blockQ = options.cpuBlockQ;
    cpuOpts.blockKV = options.cpuBlockKV;
    cpuOpts.l2CacheSize = options.cpuL2CacheSize;
    cpuOpts.parallel = options.parallel;
    // Register blocks sized for the register file: 32 vector registers with
    // AVX-512 (6 x 4 and 4 x 4 accumulators), 16 below (2 x 4 and 2 x 4).
    if (options.vectorWidth < 16) {
      cpuOpts.keyRows = 2;
      cpuOpts.pvRows = 2;
    }
    pm.addPass(createFACpuAttentionPass(cpuOpts));
  }
  pm.addPass(createFATileAttentionPass(
      FATileAttentionPassOptions{options.blockQ, options.blockKV}));
  FAOnlineSoftmaxPassOptions softmaxOpts;
  softmaxOpts.tileSize = options.softmaxTile;
  softmaxOpts.vectorWidth = options.vectorWidth;
  pm.addPass(createFAOnlineSoftmaxPass(softmaxOpts));
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
  // The promoted form shares its workgroup buffers between blocks, so its
  // block loop stays sequential.
  bool parallel = options.parallel && !options.promoted;
  if (parallel)
    pm.addPass(createForallToParallelLoopPass());
  else
    pm.addPass(createForallToForLoopPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createLoopInvariantCodeMotionPass());
  // scf.parallel -> omp.parallel/omp.wsloop; its bodies sit in
  // memref.alloca_scope, so finalize-memref-to-llvm runs before scf-to-cf.
  if (parallel)
    pm.addPass(createConvertSCFToOpenMPPass());
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
  if (parallel)
    pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

bool fa::isSupportedChip(StringRef chip) {
  return minimumPtxVersion(chip).has_value();
}

void fa::buildMapToGPUPipeline(OpPassManager &pm,
                               const LowerToNVVMOptions &options) {
  // Hopper wgmma kernels, then mma.sync tensor-core kernels for the
  // eligible functions; the others stay for the SIMT path below.
  if (options.wgmma) {
    FAMapToWgmmaPassOptions wgOpts;
    wgOpts.warpgroups = options.wgWarpgroups;
    wgOpts.blockKV = options.wgBlockKV;
    wgOpts.stages = options.wgStages;
    pm.addPass(createFAMapToWgmmaPass(wgOpts));
  }
  if (options.tensorCores) {
    FAMapToTensorCoresPassOptions tcOpts;
    tcOpts.blockQ = options.tcBlockQ;
    tcOpts.blockKV = options.tcBlockKV;
    tcOpts.stages = options.tcStages;
    pm.addPass(createFAMapToTensorCoresPass(tcOpts));
  }
  FAPromoteSharedPassOptions promoteOpts;
  promoteOpts.blockQ = options.blockQ;
  promoteOpts.blockKV = options.blockKV;
  promoteOpts.numWarps = options.warps;
  promoteOpts.doubleBuffer = options.doubleBuffer;
  pm.addNestedPass<func::FuncOp>(createFAPromoteSharedPass(promoteOpts));
  pm.addPass(createFAMapToGPUPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

namespace {
/// Rejects an unsupported chip or a PTX version too old for it with a
/// diagnostic, before LLVM's NVPTX backend would abort on it.
struct CheckNVVMTargetPass
    : public PassWrapper<CheckNVVMTargetPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CheckNVVMTargetPass)
  CheckNVVMTargetPass(std::string chip, std::string features, bool wgmma)
      : chip(std::move(chip)), features(std::move(features)), wgmma(wgmma) {}
  StringRef getArgument() const final { return "fa-check-nvvm-target"; }
  void runOnOperation() override {
    std::optional<int> minPtx = fa::minimumPtxVersion(chip);
    if (!minPtx) {
      emitError(getOperation().getLoc())
          << "fa-lower-to-nvvm: unsupported chip '" << chip
          << "'; expected sm_80, sm_86, sm_89, sm_90 or sm_90a";
      return signalPassFailure();
    }
    if (wgmma && chip != "sm_90a") {
      emitError(getOperation().getLoc())
          << "fa-lower-to-nvvm: wgmma needs chip=sm_90a (wgmma.mma_async "
             "exists only on the sm_90a target), got '"
          << chip << "'";
      return signalPassFailure();
    }
    StringRef f(features);
    unsigned ptx = 0;
    if (!f.consume_front("+ptx") || f.getAsInteger(10, ptx)) {
      emitError(getOperation().getLoc())
          << "fa-lower-to-nvvm: features must be '+ptxNN' (the PTX ISA "
             "version, e.g. +ptx80), got '"
          << features << "'";
      return signalPassFailure();
    }
    if (static_cast<int>(ptx) < *minPtx) {
      emitError(getOperation().getLoc())
          << "fa-lower-to-nvvm: PTX ISA " << ptx / 10 << "." << ptx % 10
          << " does not support " << chip << "; it needs at least "
          << *minPtx / 10 << "." << *minPtx % 10;
      return signalPassFailure();
    }
  }
  std::string chip, features;
  bool wgmma;
};
} // namespace

std::optional<int> fa::minimumPtxVersion(StringRef chip) {
  return llvm::StringSwitch<std::optional<int>>(chip)
      .Case("sm_80", 70)
      .Case("sm_86", 71)
      .Case("sm_89", 78)
      .Case("sm_90", 78)
      .Case("sm_90a", 80)
      .Default(std::nullopt);
}

void fa::buildLowerToNVVMPipeline(OpPassManager &pm,
                                  const LowerToNVVMOptions &options) {
  pm.addPass(std::make_unique<CheckNVVMTargetPass>(
      options.chip, options.features, options.wgmma));
  buildMapToGPUPipeline(pm, options);
  buildNVVMCodegenPipeline(pm, options);
}

void fa::buildNVVMCodegenPipeline(OpPassManager &pm,
                                  const LowerToNVVMOptions &options) {
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = options.chip;
  nvvm.cubinFeatures = options.features;
  nvvm.cubinFormat = options.format;
  nvvm.optLevel = options.optLevel;
  // bf16 mma.sync of the tensor-core kernels: upstream cannot lower it.
  pm.addPass(createFALegalizeMmaBF16Pass());
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

void fa::registerFAPipelines() {
  PassPipelineRegistration<LowerToNVVMOptions>(
      "fa-lower-to-nvvm",
      "Lower kernel functions holding fa.attention to a gpu.binary (PTX or "
      "cubin) for NVIDIA GPUs: fa-promote-shared, fa-map-to-gpu, then the "
      "upstream GPU-to-NVVM pipeline",
      buildLowerToNVVMPipeline);
  PassPipelineRegistration<LowerToCPUOptions>(
      "fa-lower-to-cpu",
      "Lower fa ops to the LLVM dialect for the CPU: tiled online softmax "
      "(or the naive reference), bufferization, loops, LLVM",
      buildLowerToCPUPipeline);
}
