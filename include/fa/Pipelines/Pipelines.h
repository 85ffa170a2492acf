//===- Pipelines.h - fa pass pipelines --------------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_PIPELINES_PIPELINES_H
#define FA_PIPELINES_PIPELINES_H

#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

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
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run the (batch, head, query tile) loop of the tiled "
                     "and reference lowerings (and softmax's row loop) on "
                     "OpenMP threads; the module then needs the OpenMP "
                     "runtime (libomp). The promoted form stays sequential"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> cpuKernel{
      *this, "cpu-kernel",
      llvm::cl::desc("Attention kernel in kernel form: 'vector' (fa-cpu-"
                     "attention: register-blocked SIMD micro-kernels) or "
                     "'tiled' (fa-tile-attention: linalg per tile). Other "
                     "forms always take the tiled path"),
      llvm::cl::init("vector")};
  PassOptions::Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("fa-cpu-attention and the softmax: f32 lanes per vector "
                     "(16: AVX-512, 8: AVX2)"),
      llvm::cl::init(16)};
  PassOptions::Option<int64_t> cpuBlockQ{
      *this, "cpu-block-q",
      llvm::cl::desc("fa-cpu-attention query rows per tile (0: automatic, "
                     "from cpu-l2-cache-size)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuBlockKV{
      *this, "cpu-block-kv",
      llvm::cl::desc("fa-cpu-attention keys per tile (0: automatic, from "
                     "cpu-l2-cache-size)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuKvSplits{
      *this, "cpu-kv-splits",
      llvm::cl::desc("fa-cpu-attention kv-splits: split-KV parts of the "
                     "decode kernels (0: chosen at run time with parallel; "
                     "1: none)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuL1CacheSize{
      *this, "cpu-l1-cache-size",
      llvm::cl::desc("fa-cpu-attention l1-cache-size: L1 data bytes per "
                     "core the automatic key tiles assume (0: unknown; "
                     "fa-compile and fa-run pass the host's)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuL2CacheSize{
      *this, "cpu-l2-cache-size",
      llvm::cl::desc("fa-cpu-attention l2-cache-size: L2 bytes per core "
                     "the automatic tile sizes assume (0: 512 KiB; fa-compile "
                     "and fa-run pass the host's)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuKeyRows{
      *this, "cpu-key-rows",
      llvm::cl::desc("fa-cpu-attention key-rows: keys per register block of "
                     "the S micro-kernel (0: 6 with 16 lanes, else 2)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuPvRows{
      *this, "cpu-pv-rows",
      llvm::cl::desc("fa-cpu-attention pv-rows: query rows per register "
                     "block of the P V micro-kernel (0: 4 with 16 lanes, "
                     "else 2)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> cpuPvVectors{
      *this, "cpu-pv-vectors",
      llvm::cl::desc("fa-cpu-attention pv-vectors: vectors of Dv per "
                     "register block of the P V micro-kernel (0: "
                     "automatic, from Dv)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> cpuBf16Dot{
      *this, "cpu-bf16-dot",
      llvm::cl::desc("fa-cpu-attention bf16-dot: bf16 inputs through "
                     "AVX512_BF16 dot products (vdpbf16ps), P rounded to "
                     "bf16; the target must have avx512bf16 (fa-compile and "
                     "fa-run set it from the target's features)"),
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
  PassOptions::Option<bool> gpuDoubleBuffer{
      *this, "gpu-double-buffer",
      llvm::cl::desc("fa-promote-shared double-buffer"), llvm::cl::init(false)};
};

/// "Target GPU: " and the chips of the chip table, for the `chip` option.
llvm::StringRef getChipOptionDescription();

/// Options of `fa-lower-to-nvvm`.
struct LowerToNVVMOptions : public PassPipelineOptions<LowerToNVVMOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc(getChipOptionDescription()),
      llvm::cl::init("sm_80")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (the PTX ISA version), e.g. +ptx80"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu.binary contents: isa (PTX), bin (cubin, needs "
                     "ptxas) or fatbin"),
      llvm::cl::init("isa")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("LLVM optimization level"),
      llvm::cl::init(3)};
  PassOptions::Option<int64_t> blockQ{
      *this, "block-q",
      llvm::cl::desc("Query rows per block (0: automatic)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> blockKV{
      *this, "block-kv", llvm::cl::desc("Keys per K/V tile (0: automatic)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> warps{
      *this, "warps", llvm::cl::desc("Warps per block"), llvm::cl::init(4)};
  PassOptions::Option<bool> doubleBuffer{
      *this, "double-buffer",
      llvm::cl::desc("Two K/V slots: copy tile j+1 while tile j is computed"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> packGqa{
      *this, "pack-gqa",
      llvm::cl::desc("Packed query heads for decode (pack-gqa of "
                     "fa-promote-shared and fa-map-to-tensor-cores): auto "
                     "(static Nq, when packing reads fewer K/V tiles), "
                     "always (the SIMT or mma.sync kernel, packed where "
                     "Hq > Hkv; wgmma is not tried) or never"),
      llvm::cl::init("auto")};
  PassOptions::Option<bool> splitKv{
      *this, "split-kv",
      llvm::cl::desc("Split-KV kernels (split-kv of fa-promote-shared, "
                     "fa-map-to-tensor-cores and fa-map-to-wgmma): "
                     "workspace arguments for partial results, a merge "
                     "kernel beside each attention kernel"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> kernel{
      *this, "kernel",
      llvm::cl::desc("Kernel family of the attention kernels: auto (the "
                     "default: wgmma where the chip has it and the op is "
                     "eligible, else mma.sync where eligible, else SIMT), "
                     "simt (fa-promote-shared), mma (fa-map-to-tensor-cores: "
                     "mma.sync/ldmatrix/cp.async) or wgmma (fa-map-to-wgmma, "
                     "chip=sm_90a). An explicit family an op is not "
                     "eligible for is an error"),
      llvm::cl::init("auto")};
  /// Replaced by `kernel`; given, they are an error that names it.
  PassOptions::Option<bool> removedTensorCores{
      *this, "tensor-cores", llvm::cl::desc("Removed: use kernel=mma"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> removedWgmma{
      *this, "wgmma", llvm::cl::desc("Removed: use kernel=wgmma"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> tcBlockQ{
      *this, "tc-block-q",
      llvm::cl::desc("fa-map-to-tensor-cores block-q (16 rows per warp)"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> tcBlockKV{
      *this, "tc-block-kv",
      llvm::cl::desc("fa-map-to-tensor-cores block-kv (0: automatic)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> tcStages{
      *this, "tc-stages",
      llvm::cl::desc("fa-map-to-tensor-cores cp.async pipeline stages"),
      llvm::cl::init(2)};
  PassOptions::Option<int64_t> wgWarpgroups{
      *this, "wg-warpgroups",
      llvm::cl::desc("fa-map-to-wgmma warpgroups per block (1 or 2)"),
      llvm::cl::init(1)};
  PassOptions::Option<int64_t> wgBlockKV{
      *this, "wg-block-kv",
      llvm::cl::desc("fa-map-to-wgmma block-kv (64 or 128)"),
      llvm::cl::init(64)};
  PassOptions::Option<int64_t> wgStages{
      *this, "wg-stages",
      llvm::cl::desc("fa-map-to-wgmma cp.async pipeline stages"),
      llvm::cl::init(2)};
};

/// The `kernel` option of `fa-lower-to-nvvm` (and the tools' --kernel): a
/// kernel family (AttentionSemantics.h), or auto (nullopt): the best family
/// the chip has and the op is eligible for.
using KernelChoice = std::optional<KernelFamily>;

/// Parses "auto", "simt", "mma" or "wgmma" into `choice`; false for
/// anything else.
bool parseKernelChoice(llvm::StringRef name, KernelChoice &choice);

/// The option spelling of `choice`: "auto", "simt", "mma" or "wgmma".
llvm::StringRef getKernelChoiceName(KernelChoice choice);

/// The families `kernel=auto` tries on `chip`, best first (wgmma where the
/// chip has it, then mma.sync); SIMT takes whatever they leave.
llvm::SmallVector<KernelFamily, 2> getAutoKernelFamilies(llvm::StringRef chip);

/// The family fa-map-to-gpu's launch configuration (`fa.gpu_config`) on a
/// mapped kernel function records, or nothing when it has none.
std::optional<KernelFamily> getMappedKernelFamily(Operation *func);

/// Checks the `fa-lower-to-nvvm` options that need no IR: the chip, the
/// PTX features, the kernel family (and that the chip has it), the removed
/// options. Returns a one-line message on failure.
std::optional<std::string>
verifyLowerToNVVMOptions(const LowerToNVVMOptions &options);

/// The chips `fa-lower-to-nvvm` accepts.
bool isSupportedChip(llvm::StringRef chip);

/// The oldest PTX ISA version (as 10 * major + minor) that supports `chip`,
/// or nothing for an unsupported chip.
std::optional<int> minimumPtxVersion(llvm::StringRef chip);

/// Builds the first half of `fa-lower-to-nvvm`: fa-promote-shared and
/// fa-map-to-gpu, leaving gpu.module kernels and their host launches.
void buildMapToGPUPipeline(OpPassManager &pm,
                           const LowerToNVVMOptions &options);

/// Builds the second half of `fa-lower-to-nvvm`: gpu.module kernels (as
/// fa-map-to-gpu leaves them) to a gpu.binary, host code to LLVM.
void buildNVVMCodegenPipeline(OpPassManager &pm,
                              const LowerToNVVMOptions &options);

/// Builds `fa-lower-to-nvvm`: kernel functions with fa.attention down to a
/// gpu.binary holding PTX (format=isa) or a cubin, and host code in the LLVM
/// dialect.
void buildLowerToNVVMPipeline(OpPassManager &pm,
                              const LowerToNVVMOptions &options);

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
