//===- Pipelines.cpp - fa pass pipelines ----------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "fa/Codegen/GPU/GpuKernelUtils.h"
#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"
#include "fa/Target/Chips.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

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

void mlir::fa::buildLowerToCPUPipeline(OpPassManager &pm,
                                       const LowerToCPUOptions &options) {
  // Block masks built in the module first (their results feed attention);
  // merges of partial results.
  pm.addPass(createFALowerBlockMaskPass());
  pm.addPass(createFALowerMergePass());
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
    cpuOpts.kvSplits = options.cpuKvSplits;
    cpuOpts.l2CacheSize = options.cpuL2CacheSize;
    cpuOpts.l1CacheSize = options.cpuL1CacheSize;
    cpuOpts.parallel = options.parallel;
    // Register blocks sized for the register file: 32 vector registers with
    // AVX-512 (6 x 4 and 4 x 4 accumulators), 16 below (2 x 4 and 2 x 4).
    if (options.vectorWidth < 16) {
      cpuOpts.keyRows = 2;
      cpuOpts.pvRows = 2;
    }
    if (options.cpuKeyRows > 0)
      cpuOpts.keyRows = options.cpuKeyRows;
    if (options.cpuPvRows > 0)
      cpuOpts.pvRows = options.cpuPvRows;
    if (options.cpuPvVectors > 0)
      cpuOpts.pvVectors = options.cpuPvVectors;
    cpuOpts.bf16Dot = options.cpuBf16Dot;
    pm.addPass(createFACpuAttentionPass(cpuOpts));
    FACpuAttentionBackwardPassOptions bwdOpts;
    bwdOpts.vectorWidth = options.vectorWidth;
    // Query tiles of 128 rows: K, V and the dK / dV rows are streamed
    // once per query tile; the scratch stays a few hundred KiB per thread.
    bwdOpts.blockQ = 128;
    bwdOpts.parallel = options.parallel;
    pm.addPass(createFACpuAttentionBackwardPass(bwdOpts));
  }
  pm.addPass(createFATileAttentionPass(
      FATileAttentionPassOptions{options.blockQ, options.blockKV}));
  pm.addPass(createFATileAttentionBackwardPass(
      FATileAttentionBackwardPassOptions{options.blockQ, options.blockKV}));
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
  // x86vector: the bf16 dot products of fa-cpu-attention's bf16-dot.
  ConvertVectorToLLVMPassOptions vectorOpts;
  vectorOpts.x86Vector = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorOpts));
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

StringRef mlir::fa::getChipOptionDescription() {
  static const std::string description =
      "Target GPU: " + ::fa::target::getChipList();
  return description;
}

bool mlir::fa::isSupportedChip(StringRef chip) {
  return minimumPtxVersion(chip).has_value();
}

bool mlir::fa::parseKernelChoice(StringRef name, KernelChoice &choice) {
  if (name == "auto") {
    choice = std::nullopt;
    return true;
  }
  std::optional<KernelFamily> family = parseKernelFamily(name);
  if (!family)
    return false;
  choice = *family;
  return true;
}

StringRef mlir::fa::getKernelChoiceName(KernelChoice choice) {
  return choice ? stringifyKernelFamily(*choice) : StringRef("auto");
}

SmallVector<mlir::fa::KernelFamily, 2>
mlir::fa::getAutoKernelFamilies(StringRef chip) {
  SmallVector<KernelFamily, 2> families;
  const ::fa::target::ChipInfo *info = ::fa::target::lookupChip(chip);
  if (!info)
    return families;
  if (info->hasWgmma)
    families.push_back(KernelFamily::Wgmma);
  if (info->hasMmaSync)
    families.push_back(KernelFamily::Mma);
  return families;
}

std::optional<mlir::fa::KernelFamily>
mlir::fa::getMappedKernelFamily(Operation *func) {
  auto config = func->getAttrOfType<DictionaryAttr>("fa.gpu_config");
  if (!config)
    return std::nullopt;
  if (config.get("wgmma"))
    return KernelFamily::Wgmma;
  if (config.get("tensor_cores"))
    return KernelFamily::Mma;
  return KernelFamily::Simt;
}

std::optional<std::string>
mlir::fa::verifyLowerToNVVMOptions(const LowerToNVVMOptions &options) {
  if (options.removedTensorCores)
    return std::string("fa-lower-to-nvvm: the tensor-cores option was "
                       "replaced by kernel=mma (or kernel=auto)");
  if (options.removedWgmma)
    return std::string("fa-lower-to-nvvm: the wgmma option was replaced by "
                       "kernel=wgmma (or kernel=auto)");
  const ::fa::target::ChipInfo *info = ::fa::target::lookupChip(options.chip);
  if (!info)
    return "fa-lower-to-nvvm: unsupported chip '" + options.chip +
           "'; expected " + ::fa::target::getChipList();
  KernelChoice family;
  if (!parseKernelChoice(options.kernel, family))
    return "fa-lower-to-nvvm: kernel must be auto, simt, mma or wgmma, got "
           "'" +
           options.kernel + "'";
  if (family == KernelFamily::Wgmma && !info->hasWgmma)
    return "fa-lower-to-nvvm: kernel=wgmma needs chip=sm_90a "
           "(wgmma.mma_async exists only on the sm_90a target), got '" +
           options.chip + "'";
  if (family == KernelFamily::Mma && !info->hasMmaSync)
    return "fa-lower-to-nvvm: kernel=mma needs a chip with mma.sync, got '" +
           options.chip + "'";
  if (!gpukernel::isPackGqaMode(options.packGqa))
    return "fa-lower-to-nvvm: pack-gqa must be auto, always or never, got '" +
           options.packGqa + "'";
  if (options.packGqa == "always" && family &&
      *family == KernelFamily::Wgmma)
    return "fa-lower-to-nvvm: pack-gqa=always needs the SIMT or mma.sync "
           "kernels (kernel=auto, simt or mma); the wgmma kernels do not "
           "pack query heads";
  if (!llvm::is_contained({"isa", "bin", "fatbin"}, options.format.getValue()))
    return "fa-lower-to-nvvm: format must be isa, bin or fatbin, got '" +
           options.format + "'";
  StringRef f(options.features);
  unsigned ptx = 0;
  if (!f.consume_front("+ptx") || f.getAsInteger(10, ptx))
    return "fa-lower-to-nvvm: features must be '+ptxNN' (the PTX ISA "
           "version, e.g. +ptx80), got '" +
           options.features + "'";
  if (static_cast<int>(ptx) < info->minPtxIsa)
    return llvm::formatv("fa-lower-to-nvvm: PTX ISA {0}.{1} does not support "
                         "{2}; it needs at least {3}.{4}",
                         ptx / 10, ptx % 10, options.chip.getValue(),
                         info->minPtxIsa / 10, info->minPtxIsa % 10)
        .str();
  return std::nullopt;
}

namespace {
/// Rejects options verifyLowerToNVVMOptions rejects with a diagnostic,
/// before the mapping passes or LLVM's NVPTX backend would fail on them.
struct CheckNVVMTargetPass
    : public PassWrapper<CheckNVVMTargetPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CheckNVVMTargetPass)
  explicit CheckNVVMTargetPass(std::optional<std::string> error)
      : error(std::move(error)) {}
  StringRef getArgument() const final { return "fa-check-nvvm-target"; }
  void runOnOperation() override {
    if (!error)
      return;
    emitError(getOperation().getLoc()) << *error;
    signalPassFailure();
  }
  std::optional<std::string> error;
};

/// After the mapping pass of an explicitly requested family: an attention
/// op it left (not eligible for that family) is an error.
struct RequireKernelFamilyPass
    : public PassWrapper<RequireKernelFamilyPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RequireKernelFamilyPass)
  explicit RequireKernelFamilyPass(mlir::fa::KernelFamily family)
      : family(family) {}
  StringRef getArgument() const final { return "fa-require-kernel-family"; }
  void runOnOperation() override {
    bool isWgmma = family == mlir::fa::KernelFamily::Wgmma;
    WalkResult result = getOperation().walk([&](mlir::fa::AttentionOp op) {
      auto func = op->getParentOfType<func::FuncOp>();
      InFlightDiagnostic diag = op.emitError();
      diag << "fa-lower-to-nvvm: kernel="
           << mlir::fa::stringifyKernelFamily(family) << ": the attention";
      if (func)
        diag << " of @" << func.getSymName();
      std::string reason;
      if ((op.hasModifiers() || op.isPaged() || op.isVarlen()) &&
          !mlir::fa::isEligible(family, op, &reason)) {
        diag << " is not eligible: " << reason;
        return WalkResult::interrupt();
      }
      diag << " is not eligible for "
           << (isWgmma ? "the wgmma kernels (f16/bf16 Q, K, V in kernel "
                         "form, head dims multiples of 64 up to 256, Dv "
                         "<= 192 with a mask)"
                       : "the mma.sync kernels (f16/bf16 Q, K, V in kernel "
                         "form, head dims multiples of 16 up to 256)")
           << "; use kernel=auto or kernel=simt";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    // The backward: mma.sync kernels where eligible, no wgmma ones.
    result = getOperation().walk([&](mlir::fa::AttentionBackwardOp op) {
      auto func = op->getParentOfType<func::FuncOp>();
      InFlightDiagnostic diag = op.emitError();
      diag << "fa-lower-to-nvvm: kernel="
           << mlir::fa::stringifyKernelFamily(family)
           << ": the attention_backward";
      if (func)
        diag << " of @" << func.getSymName();
      std::string reason;
      if (isWgmma)
        diag << " has no wgmma kernels; use kernel=auto, mma or simt";
      else if (!mlir::fa::gpukernel::isTensorCoreBackwardEligible(op,
                                                                  &reason))
        diag << " is not eligible for the mma.sync kernels: " << reason
             << "; use kernel=auto or kernel=simt";
      else
        diag << " is not eligible for the mma.sync kernels (not in the "
                "kernel form); use kernel=auto or kernel=simt";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
  mlir::fa::KernelFamily family;
};
} // namespace

void mlir::fa::buildMapToGPUPipeline(OpPassManager &pm,
                                     const LowerToNVVMOptions &options) {
  std::optional<std::string> error = verifyLowerToNVVMOptions(options);
  pm.addPass(std::make_unique<CheckNVVMTargetPass>(error));
  if (error)
    return;
  // The tensor-core families first, for the functions they are eligible
  // for: auto tries what the chip has (wgmma, then mma.sync) and leaves the
  // others to the SIMT path below; an explicit family must take them all.
  KernelChoice family;
  (void)parseKernelChoice(options.kernel, family);
  SmallVector<KernelFamily, 2> families;
  // Packed query heads (pack-gqa=always): the SIMT and mma.sync kernels
  // pack, wgmma is not tried.
  if (!family) {
    families = getAutoKernelFamilies(options.chip);
    if (options.packGqa == "always")
      llvm::erase(families, KernelFamily::Wgmma);
  }
  else if (*family != KernelFamily::Simt)
    families.push_back(*family);
  for (KernelFamily f : families) {
    if (f == KernelFamily::Wgmma) {
      FAMapToWgmmaPassOptions wgOpts;
      wgOpts.warpgroups = options.wgWarpgroups;
      wgOpts.blockKV = options.wgBlockKV;
      wgOpts.stages = options.wgStages;
      wgOpts.chip = options.chip;
      wgOpts.splitKv = options.splitKv;
      pm.addPass(createFAMapToWgmmaPass(wgOpts));
    } else {
      FAMapToTensorCoresPassOptions tcOpts;
      tcOpts.blockQ = options.tcBlockQ;
      tcOpts.blockKV = options.tcBlockKV;
      tcOpts.stages = options.tcStages;
      tcOpts.chip = options.chip;
      tcOpts.splitKv = options.splitKv;
      tcOpts.packGqa = options.packGqa;
      pm.addPass(createFAMapToTensorCoresPass(tcOpts));
      pm.addPass(createFAMapToTensorCoresBackwardPass());
    }
  }
  if (family == KernelFamily::Mma || family == KernelFamily::Wgmma)
    pm.addPass(std::make_unique<RequireKernelFamilyPass>(*family));
  FAPromoteSharedPassOptions promoteOpts;
  promoteOpts.blockQ = options.blockQ;
  promoteOpts.blockKV = options.blockKV;
  promoteOpts.numWarps = options.warps;
  promoteOpts.doubleBuffer = options.doubleBuffer;
  promoteOpts.packGqa = options.packGqa;
  promoteOpts.splitKv = options.splitKv;
  // fa.merge kernels (one warp per row).
  FAGpuMergePassOptions mergeOpts;
  mergeOpts.numWarps = options.warps;
  pm.addNestedPass<func::FuncOp>(createFAGpuMergePass(mergeOpts));
  pm.addNestedPass<func::FuncOp>(createFAPromoteSharedPass(promoteOpts));
  // fa.attention_backward left by the mma.sync kernels: the SIMT dQ and
  // dK/dV kernels.
  FAPromoteSharedBackwardPassOptions backwardOpts;
  backwardOpts.blockQ = options.blockQ;
  backwardOpts.blockKV = options.blockKV;
  backwardOpts.numWarps = options.warps;
  pm.addNestedPass<func::FuncOp>(
      createFAPromoteSharedBackwardPass(backwardOpts));
  pm.addPass(createFAMapToGPUPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

std::optional<int> mlir::fa::minimumPtxVersion(StringRef chip) {
  if (const ::fa::target::ChipInfo *info = ::fa::target::lookupChip(chip))
    return info->minPtxIsa;
  return std::nullopt;
}

void mlir::fa::buildLowerToNVVMPipeline(OpPassManager &pm,
                                        const LowerToNVVMOptions &options) {
  buildMapToGPUPipeline(pm, options);
  if (verifyLowerToNVVMOptions(options))
    return;
  buildNVVMCodegenPipeline(pm, options);
}

void mlir::fa::buildNVVMCodegenPipeline(OpPassManager &pm,
                                        const LowerToNVVMOptions &options) {
  // bf16 mma.sync of the tensor-core kernels: upstream cannot lower it.
  pm.addPass(createFALegalizeMmaBF16Pass());

  // Upstream's gpu-lower-to-nvvm-pipeline (MLIR 22), pass for pass, with one
  // addition: fa-extern-dynamic-shared between the GPU module's conversion to
  // LLVM and its serialization. test/Pipelines/lower-to-nvvm-upstream.test
  // checks that the two lists stay the same otherwise.
  gpu::GPUToNVVMPipelineOptions defaults;
  const int64_t indexBitwidth = defaults.indexBitWidth;
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions target;
  target.triple = defaults.cubinTriple;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertIndexToLLVMPassOptions index;
  index.indexBitwidth = indexBitwidth;
  pm.addPass(createConvertIndexToLLVMPass(index));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  ConvertGpuOpsToNVVMOpsOptions gpuToNVVM;
  gpuToNVVM.useBarePtrCallConv = defaults.kernelUseBarePtrCallConv;
  gpuToNVVM.indexBitwidth = indexBitwidth;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(gpuToNVVM));
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());
  // Dynamic shared memory as `.extern .shared ... name[]`, not a one-byte
  // static variable.
  pm.addNestedPass<gpu::GPUModuleOp>(createFAExternDynamicSharedPass());

  GpuToLLVMConversionPassOptions host;
  host.hostBarePtrCallConv = defaults.hostUseBarePtrCallConv;
  host.kernelBarePtrCallConv = defaults.kernelUseBarePtrCallConv;
  pm.addPass(createGpuToLLVMConversionPass(host));
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::fa::registerFAPipelines() {
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
