//===- Pipelines.h - fa pass pipelines --------------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_PIPELINES_PIPELINES_H
#define FA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace fa {

/// Options of `fa-lower-to-cpu`.
struct LowerToCPUOptions : public PassPipelineOptions<LowerToCPUOptions> {
  PassOptions::Option<int64_t> blockQ{*this, "block-q",
                                      llvm::cl::desc("Query rows per tile"),
                                      llvm::cl::init(64)};
  PassOptions::Option<int64_t> blockKV{
      *this, "block-kv", llvm::cl::desc("Keys per key/value tile"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> softmaxTile{
      *this, "softmax-tile",
      llvm::cl::desc("Row elements per tile of the online softmax"),
      llvm::cl::init(256)};
  PassOptions::Option<bool> reference{
      *this, "reference",
      llvm::cl::desc("Use the naive lowering (materializes S) instead of the "
                     "tiled online-softmax one"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> promoted{
      *this, "promoted",
      llvm::cl::desc("Run the GPU path's promoted form (fa-promote-shared: "
                     "workgroup-memory tiles, thread/warp foralls, lane "
                     "vectors) on the CPU; attention kernels only"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> gpuBlockQ{
      *this, "gpu-block-q",
      llvm::cl::desc("fa-promote-shared block-q (0: automatic)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> gpuBlockKV{
      *this, "gpu-block-kv",
      llvm::cl::desc("fa-promote-shared block-kv (0: automatic)"),
      llvm::cl::init(0)};
};

/// Builds `fa-lower-to-cpu`: fa ops on tensors (inside functions whose
/// arguments may be tensors or memrefs) down to the LLVM dialect, ready for
/// MLIR's ExecutionEngine or mlir-translate. `pm` must be anchored on
/// builtin.module.
void buildLowerToCPUPipeline(OpPassManager &pm,
                             const LowerToCPUOptions &options);

/// Registers fa's pipelines with the global pass registry.
void registerFAPipelines();

} // namespace fa
} // namespace mlir

#endif // FA_PIPELINES_PIPELINES_H
