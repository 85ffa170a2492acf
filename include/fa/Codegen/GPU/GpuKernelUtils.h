//===- GpuKernelUtils.h - shared by the GPU-path passes ---------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_CODEGEN_GPU_GPUKERNELUTILS_H
#define FA_CODEGEN_GPU_GPUKERNELUTILS_H

#include "fa/Codegen/Common/KernelForm.h"
#include "fa/Dialect/FA/IR/FA.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <string>
#include <utility>

namespace mlir {
namespace fa {
namespace gpukernel {

/// Lanes per warp.
constexpr int64_t kWarpSize = 32;
/// The NVVM address space of workgroup (shared) memory. Integer, not
/// #gpu.address_space<workgroup>, so that the promoted IR also lowers for
/// the host.
constexpr int64_t kWorkgroupAddressSpace = 3;
/// Discardable attribute recording the chosen tile sizes on the kernel
/// function (block_q, block_kv, threads).
constexpr const char *kConfigAttrName = "fa.gpu_config";

/// Discardable unit attribute on a thread-level forall whose writes do not
/// conflict with the next forall's accesses: fa-map-to-gpu puts no barrier
/// after it.
constexpr const char *kNoBarrierAttrName = "fa.no_barrier_after";

/// Records a promoted kernel's launch configuration on `func` as the
/// kConfigAttrName dictionary: block_q, block_kv and threads (index), and
/// a unit entry for each of `flags` (pack_gqa, split_kv, backward).
void setGpuConfig(func::FuncOp func, int64_t blockQ, int64_t blockKV,
                  int64_t threads, ArrayRef<StringRef> flags);

/// Tile sizes and derived layout of one promoted kernel.
struct KernelConfig {
  int64_t blockQ = 16, blockKV = 64, numWarps = 4;
  int64_t headDim = 0, valueDim = 0, elementBytes = 4;
  /// Elements per row of the K tile in workgroup memory (padded).
  int64_t keyStride = 0;
  /// Two K/V slots: tile j + 1 is copied while tile j is computed.
  bool doubleBuffer = false;

  int64_t numThreads() const { return numWarps * kWarpSize; }
  int64_t rowsPerWarp() const { return blockQ / numWarps; }
  /// Workgroup memory of the tiles and the state for the given sizes.
  int64_t sharedBytes(int64_t bq, int64_t bkv) const;
};

/// Picks tile sizes (0 = automatic) within `budget` bytes of workgroup
/// memory, or explains in `error` why none fits.
FailureOr<KernelConfig> chooseConfig(AttentionOp op, int64_t blockQ,
                                     int64_t blockKV, int64_t numWarps,
                                     int64_t budget, bool doubleBuffer,
                                     std::string &error);

/// Whether the SIMT kernel packs the G = Hq / Hkv query heads of a kv head
/// into its query tiles (FlashAttention 3's pack_gqa, for decode): `mode`
/// "always" packs every op with G > 1; "auto" packs when Nq is static and
/// packing reads fewer K/V tiles (ceil(G Nq / block-q) tiles per kv head
/// instead of G ceil(Nq / block-q)); "never" does not. A dynamic Nq is
/// never packed automatically.
bool shouldPackGqa(AttentionOp op, llvm::StringRef mode, int64_t blockQ);

/// The block-level `scf.forall` of a promoted kernel over `sizes` (x, y,
/// z), mapped to #gpu.block<x|y|z>: what fa-map-to-gpu turns into the
/// kernel's grid.
scf::ForallOp createBlockForall(OpBuilder &b, Location loc,
                                ArrayRef<OpFoldResult> sizes);

/// Builds, at `b`'s insertion point, the block forall of the fa.merge
/// kernel over `args` (one warp per row of the partial LSE's dims 1..,
/// lanes over Dv; `numWarps` rows per block): fa-gpu-merge's kernel, and
/// the second kernel of a split-KV attention function.
scf::ForallOp buildMergeForall(OpBuilder &b, Location loc,
                               const MergeKernelOperands &args,
                               int64_t numWarps);

/// Discardable attributes of a block forall that fa-map-to-gpu turns into
/// a kernel of its own beside the function's first: its thread count
/// (index; otherwise the function's fa.gpu_config `threads`) and the
/// suffix of its kernel's name (`<function><suffix>`).
constexpr const char *kForallThreadsAttrName = "fa.threads";
constexpr const char *kForallKernelSuffixAttrName = "fa.kernel_suffix";
/// Argument attribute naming a workspace argument that fa-promote-shared
/// appended to a split-KV kernel function ("partial_o", "partial_lse").
constexpr const char *kWorkspaceAttrName = "fa.workspace";

/// Split-KV: appends the workspace arguments to `func`, partial O
/// `[S, <O's dims>]` and partial LSE `[S, <O's dims but the last>]` in f32
/// (argument attribute kWorkspaceAttrName "partial_o", "partial_lse"),
/// whose first dim S, the number of parts, is the caller's choice at run
/// time; `o` is the function's output memref. Returns the two arguments.
std::pair<Value, Value> appendSplitWorkspace(func::FuncOp func, Value o);

/// Whether `mode` is a pack-gqa mode (auto, always, never).
bool isPackGqaMode(llvm::StringRef mode);

/// Tile sizes of one tensor-core (mma.sync) kernel.
struct TensorCoreConfig {
  /// Query rows per block (16 per warp) and keys per K/V tile.
  int64_t blockQ = 64, blockKV = 64;
  /// K/V tiles in flight (cp.async pipeline depth).
  int64_t stages = 2;
  int64_t headDim = 0, valueDim = 0;

  int64_t numWarps() const { return blockQ / 16; }
  int64_t numThreads() const { return numWarps() * kWarpSize; }
  /// Dynamic workgroup memory: Q, then `stages` K tiles, then `stages` V
  /// tiles, 16-bit elements, rows padded by 8 elements.
  int64_t sharedBytes() const;
};

/// Whether fa-map-to-tensor-cores handles `op`: f16/bf16 Q, K, V, head dims
/// multiples of 16 up to 256, an f16/bf16/f32 output.
bool isTensorCoreEligible(AttentionOp op);

/// The largest head dim (D and Dv) of fa-map-to-tensor-cores-backward.
constexpr int64_t kMmaBackwardMaxHeadDim = 128;

/// Whether fa-map-to-tensor-cores-backward handles `op`: f16/bf16 Q, K, V
/// and dO, head dims multiples of 16 up to kMmaBackwardMaxHeadDim;
/// otherwise `reason` (when given) says why not.
bool isTensorCoreBackwardEligible(AttentionBackwardOp op,
                                  std::string *reason = nullptr);

/// Validates the tensor-core tile sizes for `op` (block-kv 0 = automatic),
/// or explains in `error` why they do not work.
FailureOr<TensorCoreConfig> chooseTensorCoreConfig(AttentionOp op,
                                                   int64_t blockQ,
                                                   int64_t blockKV,
                                                   int64_t stages,
                                                   std::string &error);

} // namespace gpukernel
} // namespace fa
} // namespace mlir

#endif // FA_CODEGEN_GPU_GPUKERNELUTILS_H
