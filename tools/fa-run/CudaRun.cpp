//===- CudaRun.cpp - fa-run --device cuda ---------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "CudaRun.h"

#include "fa/Compiler/Compiler.h"

#include "fa/Pipelines/Pipelines.h"
#include "fa/Target/Chips.h"

#include "mlir/IR/Verifier.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <chrono>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::run;
namespace rt = ::fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;

static Error makeError(const llvm::Twine &message) {
  return llvm::createStringError("--device cuda: " + message.str());
}

/// "FA_ERROR_CUDA: <message>" for the last runtime failure.
static std::string lastRuntimeError(fa_status status) {
  return std::string(fa_status_name(status)) + ": " + fa_last_error();
}

static double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

std::optional<std::string> mlir::fa::run::probeCuda() {
  int devices = 0;
  fa_status status = fa_cuda_available(&devices);
  if (status == FA_SUCCESS)
    return std::nullopt;
  std::string why = fa_last_error();
  switch (status) {
  case FA_ERROR_NO_DRIVER:
    return "no CUDA driver (" + why + ")";
  case FA_ERROR_NO_DEVICE:
    return "no CUDA device (" + why + ")";
  default:
    return "CUDA is not usable (" + lastRuntimeError(status) + ")";
  }
}

/// The chip to compile for and the device's chip: `requested` if given,
/// else the device's chip if fa-lower-to-nvvm supports it, else the newest
/// supported chip older than the device (its PTX is JIT-compiled forward).
static Expected<std::pair<std::string, std::string>>
selectChip(const std::string &requested) {
  char buffer[16] = {0};
  fa_status status = fa_cuda_device_chip(buffer, sizeof(buffer));
  if (status != FA_SUCCESS)
    return makeError("cannot query the device: " + lastRuntimeError(status));
  std::string device = buffer;
  if (!requested.empty()) {
    if (!::fa::target::lookupChip(requested))
      return makeError("--chip '" + requested +
                       "' is not supported; expected " +
                       ::fa::target::getChipList());
    return std::make_pair(requested, device);
  }
  if (::fa::target::lookupChip(device))
    return std::make_pair(device, device);
  std::optional<::fa::target::ChipName> deviceName =
      ::fa::target::ChipName::parse(device);
  if (!deviceName || deviceName->suffix)
    return makeError("unexpected device chip '" + device + "'");
  // The newest chip of the table without arch-specific features that is
  // not newer than the device: its PTX is JIT-compiled forward.
  const ::fa::target::ChipInfo *best = nullptr;
  int bestCapability = 0;
  for (const ::fa::target::ChipInfo &chip : ::fa::target::getChips()) {
    std::optional<::fa::target::ChipName> name =
        ::fa::target::ChipName::parse(chip.name);
    if (!name || name->suffix ||
        name->getComputeCapability() > deviceName->getComputeCapability() ||
        name->getComputeCapability() <= bestCapability)
      continue;
    best = &chip;
    bestCapability = name->getComputeCapability();
  }
  if (best)
    return std::make_pair(std::string(best->name), device);
  return makeError("the device is " + device +
                   "; the GPU path needs sm_80 or newer");
}

namespace {
/// Device buffers, freed on destruction.
struct DeviceBuffers {
  std::vector<void *> pointers;
  ~DeviceBuffers() {
    for (void *p : pointers)
      (void)fa_cuda_free(p);
  }
};
} // namespace

Expected<CudaRunResult>
mlir::fa::run::runAttentionOnCuda(MLIRContext &ctx, rt::KernelMetadata md,
                                  std::vector<HostOperand> &operands,
                                  const CudaRunOptions &options) {
  if (operands.size() != md.params.size())
    return makeError("internal error: operands do not match the kernel's "
                     "parameters");
  if (Error err = compile::checkHeadDim("head dim D", md.headDim))
    return makeError(llvm::toString(std::move(err)));
  if (Error err = compile::checkHeadDim("value head dim Dv", md.valueHeadDim))
    return makeError(llvm::toString(std::move(err)));
  CudaRunResult result;
  Expected<std::pair<std::string, std::string>> chip =
      selectChip(options.chip);
  if (!chip)
    return chip.takeError();
  result.chip = chip->first;
  result.device = chip->second;
  // wgmma code is sm_90a: it runs on compute capability 9.0 only.
  bool hopper = result.device == "sm_90" || result.device == "sm_90a";
  if (options.kernel == KernelFamily::Wgmma) {
    if (!options.chip.empty() && options.chip != "sm_90a")
      return makeError("--kernel wgmma needs --chip sm_90a, got '" +
                       options.chip + "'");
    if (!hopper)
      return makeError("--kernel wgmma needs an sm_90 (Hopper) device; the "
                       "device is " +
                       result.device);
    result.chip = "sm_90a";
  } else if (!options.kernel && options.chip.empty() && hopper) {
    result.chip = "sm_90a";
  }

  // Compile with fa-compile's GPU path: PTX (and a cubin where ptxas
  // exists), metadata, header.
  auto start = std::chrono::steady_clock::now();
  compile::KernelJob job;
  job.module = compile::buildKernelModule(ctx, md);
  job.metadata = md;
  if (failed(verify(*job.module)))
    return makeError("internal error: the kernel module does not verify");
  compile::CompileOptions compileOptions;
  compileOptions.target = result.chip;
  compileOptions.gpuBlockQ = options.gpuBlockQ;
  compileOptions.gpuBlockKV = options.gpuBlockKV;
  compileOptions.kernel = options.kernel;
  compileOptions.packGqa = options.packGqa;
  Expected<std::unique_ptr<compile::ArtifactStage>> stage =
      compile::ArtifactStage::create();
  if (!stage)
    return stage.takeError();
  if (Error err = compile::emitGpuArtifacts(job, compileOptions, **stage))
    return makeError("compiling for " + result.chip + ": " +
                     llvm::toString(std::move(err)));

  result.kernel = job.kernelFamily.value_or(KernelFamily::Simt);

  std::string dir = options.artifactsDir;
  bool temporary = dir.empty();
  if (temporary) {
    llvm::SmallString<128> path;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("fa-run-cuda", path))
      return makeError("cannot create a temporary directory: " +
                       ec.message());
    dir = std::string(path);
  }
  llvm::scope_exit removeTemporary([&] {
    if (temporary)
      (void)llvm::sys::fs::remove_directories(dir);
  });
  if (Error err = (*stage)->commit(dir))
    return err;
  llvm::SmallString<256> metadataPath(dir);
  llvm::sys::path::append(metadataPath, md.name + ".json");

  // Load through FARuntime, as any embedder would.
  fa_kernel *kernel = nullptr;
  fa_status status =
      fa_kernel_load(metadataPath.c_str(), FA_DEVICE_CUDA, &kernel);
  if (status != FA_SUCCESS)
    return makeError(lastRuntimeError(status));
  llvm::scope_exit destroyKernel([&] { fa_kernel_destroy(kernel); });
  result.compileMs = millisecondsSince(start);

  // Device buffers; the outputs start poisoned like the host ones.
  DeviceBuffers buffers;
  std::vector<fa_tensor> tensors;
  for (HostOperand &operand : operands) {
    void *device = nullptr;
    status = fa_cuda_malloc(&device, static_cast<size_t>(operand.bytes));
    if (status != FA_SUCCESS)
      return makeError(lastRuntimeError(status));
    buffers.pointers.push_back(device);
    status = fa_cuda_memcpy_htod(device, operand.data,
                                 static_cast<size_t>(operand.bytes));
    if (status != FA_SUCCESS)
      return makeError(lastRuntimeError(status));
    tensors.push_back(fa_tensor_make(device, operand.dtype,
                                     static_cast<int32_t>(operand.shape.size()),
                                     operand.shape.data()));
  }
  auto tensorFor = [&](rt::ParamRole role) -> fa_tensor * {
    for (size_t i = 0; i < md.params.size(); ++i)
      if (md.params[i].role == role)
        return &tensors[i];
    return nullptr;
  };

  fa_attention_extras extras{};
  extras.alibi = tensorFor(rt::ParamRole::Alibi);
  extras.q_segments = tensorFor(rt::ParamRole::QSegments);
  extras.k_segments = tensorFor(rt::ParamRole::KSegments);
  start = std::chrono::steady_clock::now();
  if (md.op == rt::OpKind::AttentionBackward)
    status = fa_attention_backward_launch(
        kernel, tensorFor(rt::ParamRole::Query), tensorFor(rt::ParamRole::Key),
        tensorFor(rt::ParamRole::Value), tensorFor(rt::ParamRole::Output),
        tensorFor(rt::ParamRole::Lse), tensorFor(rt::ParamRole::GradOutput),
        tensorFor(rt::ParamRole::KvLens), tensorFor(rt::ParamRole::Mask),
        &extras, tensorFor(rt::ParamRole::GradQuery),
        tensorFor(rt::ParamRole::GradKey), tensorFor(rt::ParamRole::GradValue),
        /*stream=*/nullptr);
  else
    status = fa_attention_launch_ex(
        kernel, tensorFor(rt::ParamRole::Query), tensorFor(rt::ParamRole::Key),
        tensorFor(rt::ParamRole::Value), tensorFor(rt::ParamRole::KvLens),
        tensorFor(rt::ParamRole::Mask), &extras,
        tensorFor(rt::ParamRole::Output), tensorFor(rt::ParamRole::Lse),
        /*stream=*/nullptr);
  if (status != FA_SUCCESS)
    return makeError(lastRuntimeError(status));
  status = fa_cuda_synchronize();
  if (status != FA_SUCCESS)
    return makeError("the kernel failed: " + lastRuntimeError(status));
  result.runMs = millisecondsSince(start);

  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].isOutput)
      continue;
    status = fa_cuda_memcpy_dtoh(operands[i].data, buffers.pointers[i],
                                 static_cast<size_t>(operands[i].bytes));
    if (status != FA_SUCCESS)
      return makeError(lastRuntimeError(status));
  }
  return result;
}
