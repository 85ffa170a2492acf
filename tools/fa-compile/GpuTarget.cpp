//===- GpuTarget.cpp - fa-compile --target sm_* ---------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The GPU path of fa-compile: not available yet. The driver has validated
// the options and the chip name (options.target) before calling this.
//
// What an implementation provides (see CpuTarget.cpp for the CPU analogue):
// lower `job.module` with `fa-lower-to-nvvm{chip=...}`, write `<name>.ptx`
// (and `<name>.cubin` where ptxas exists) with `stage.writeFile`/`addFile`,
// fill `job.metadata.target` (kind cuda, chip, ptx_isa), `files` and
// `launch` (block, grid expressions over B/Hq/Nq/block_q..., shared memory
// bytes), write a `<name>.h`, then `writeMetadataFile(job.metadata, stage)`.
// The params (and so the kernel's parameter list) are in
// `job.metadata.params` order, each an expanded memref descriptor.
//
//===----------------------------------------------------------------------===//

#include "FACompile.h"

using namespace mlir::fa::compile;

llvm::Error mlir::fa::compile::emitGpuArtifacts(KernelJob &job,
                                                const CompileOptions &options,
                                                ArtifactStage &stage) {
  (void)job;
  (void)stage;
  return llvm::createStringError("target " + options.target +
                                 ": the GPU path is not available yet");
}
