//===- CudaRun.h - fa-run --device cuda -------------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// fa-run's CUDA device: probing the driver, picking the chip, compiling the
// kernel in process with fa-compile's GPU path (fa-lower-to-nvvm, PTX and
// fa-kernel/3 metadata written to a directory) and running it through
// FARuntime (device buffers from fa_cuda_malloc, copies, launch, copies
// back).
//
//===----------------------------------------------------------------------===//

#ifndef FA_TOOLS_FARUN_CUDARUN_H
#define FA_TOOLS_FARUN_CUDARUN_H

#include "fa/Pipelines/Pipelines.h"
#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/KernelMetadata.h"

#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace fa {
namespace run {

/// Whether a CUDA device can be used: nullopt if so, else why not (a
/// one-line message starting with "no CUDA driver", "no CUDA device" or
/// naming the failed call).
std::optional<std::string> probeCuda();

/// One kernel parameter in host memory, in the metadata's call order.
/// Outputs are copied to the device too (poisoned, to catch elements the
/// kernel does not write) and copied back after the launch.
struct HostOperand {
  void *data = nullptr;
  fa_dtype dtype = FA_DTYPE_F32;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  bool isOutput = false;
};

struct CudaRunOptions {
  /// "sm_90" etc.; empty: the device's (or the newest supported chip
  /// older than it).
  std::string chip;
  /// GPU tile sizes; 0 lets fa-promote-shared choose.
  int64_t gpuBlockQ = 0, gpuBlockKV = 0;
  /// The kernel family; auto on an sm_90 device without --chip compiles for
  /// sm_90a, so that the wgmma kernels are tried first.
  KernelChoice kernel;
  /// Packed query heads (fa-lower-to-nvvm's pack-gqa).
  std::string packGqa = "auto";
  /// Where the PTX and metadata go; empty: a temporary directory, removed
  /// afterwards.
  std::string artifactsDir;
};

struct CudaRunResult {
  std::string chip;   ///< the chip the kernel was compiled for
  std::string device; ///< the device's chip ("sm_90")
  KernelFamily kernel = KernelFamily::Simt; ///< the family compiled
  double compileMs = 0, runMs = 0;
};

/// Compiles the attention or attention_backward kernel `md` describes (op
/// fields and params set) for the device and runs it on `operands` (the
/// params' data, in order; outputs are overwritten with the results).
llvm::Expected<CudaRunResult>
runAttentionOnCuda(MLIRContext &ctx, ::fa::runtime::KernelMetadata md,
                   std::vector<HostOperand> &operands,
                   const CudaRunOptions &options);

} // namespace run
} // namespace fa
} // namespace mlir

#endif // FA_TOOLS_FARUN_CUDARUN_H
