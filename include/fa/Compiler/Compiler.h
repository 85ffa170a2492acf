//===- Compiler.h - The fa kernel compiler library --------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the parts of fa-compile share: a kernel job (metadata + the kernel
// module), the compile options, the staging directory that makes the output
// atomic, and the per-target emitters.
//
//===----------------------------------------------------------------------===//

#ifndef FA_COMPILER_COMPILER_H
#define FA_COMPILER_COMPILER_H

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Pipelines/Pipelines.h"
#include "fa/Runtime/KernelMetadata.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace llvm {
class Module;
class raw_ostream;
} // namespace llvm

namespace mlir {
namespace func {
class FuncOp;
} // namespace func

namespace fa {
namespace compile {

/// One kernel to emit.
struct KernelJob {
  /// The op fields, name, symbol and params are set; each target fills in
  /// `target`, `files` and (CUDA) `launch`.
  ::fa::runtime::KernelMetadata metadata;
  /// A module holding `func.func @<symbol>` over memref arguments (in the
  /// order of `metadata.params`) whose body runs one fa op on tensors, with
  /// `llvm.emit_c_interface`.
  OwningOpRef<ModuleOp> module;
  /// The family of the GPU kernel emitGpuArtifacts made.
  std::optional<KernelFamily> kernelFamily;
};

/// Options that apply to every kernel of one fa-compile run.
struct CompileOptions {
  std::string target;     ///< "cpu" or a chip such as "sm_90a"
  std::string cpu;        ///< CPU target: "host", "generic" or an LLVM name
  /// CPU, bf16 inputs: "dot" (the default) takes the AVX512_BF16
  /// dot-product kernel where the target has it (P rounded to bf16), "f32"
  /// the f32 FMA kernel (inputs converted, P in f32) everywhere.
  std::string cpuBf16 = "dot";
  std::string cc;         ///< C compiler for linking; empty: find `cc`
  int64_t blockQ = 64;    ///< query rows per tile
  int64_t blockKV = 64;   ///< keys per tile
  int64_t softmaxTile = 256;
  /// GPU tile sizes (0: chosen by fa-promote-shared from the shared-memory
  /// budget); set from --block-q / --block-kv when given explicitly.
  int64_t gpuBlockQ = 0, gpuBlockKV = 0;
  /// GPU: the kernel family (fa-lower-to-nvvm's `kernel`); auto takes the
  /// fastest one the chip has and the kernel is eligible for.
  KernelChoice kernel;
  /// GPU: packed query heads (fa-lower-to-nvvm's `pack-gqa`: auto, always,
  /// never); always makes a SIMT decode kernel whose grid runs over the kv
  /// heads.
  std::string packGqa = "auto";
  /// GPU: split-KV (fa-lower-to-nvvm's `split-kv`): the SIMT kernel over
  /// (query tile x part) blocks writing f32 partials to a workspace, and
  /// its merge kernel in the same PTX.
  bool splitKv = false;
  /// The cost report (docs/cost.md): the sizes it is evaluated at
  /// ("B=1,Nq=4096,Nk=4096"; empty: the defaults), and the stream
  /// `--report` prints it to (null: none; the metadata's `cost` object is
  /// always written).
  std::string reportSizes;
  llvm::raw_ostream *reportStream = nullptr;
};

//===----------------------------------------------------------------------===//
// Kernel construction
//===----------------------------------------------------------------------===//

/// Builds the kernel module for `metadata` (op fields, symbol and params
/// set): B, Nq, Nk (and softmax dims) dynamic, heads and head dims static,
/// boolean masks passed as i8 and converted to i1.
OwningOpRef<ModuleOp> buildKernelModule(MLIRContext &ctx,
                                        const ::fa::runtime::KernelMetadata &md);

/// Attaches general modifiers to the attention of a kernel module built by
/// buildKernelModule: `mods` holds `func.func @score_mod(%s: f32, %b: index,
/// %h: index, %q: index, %k: index, <tensors>) -> f32` and/or
/// `func.func @mask_mod(%b, %h, %q, %k: index, <tensors>) -> i1` (one block
/// each, the same trailing tensors in both). Their bodies become the op's
/// score_mod / mask_mod regions; each trailing tensor becomes a memref
/// argument appended to the kernel function and a mod_operands operand.
/// Returns those tensor types, in order, or an error naming what does not
/// fit (the op's verifier then checks the bodies).
llvm::Expected<llvm::SmallVector<RankedTensorType>>
attachModifierFunctions(ModuleOp kernel, ModuleOp mods);

/// Makes the attention of `kernel` (in the kernel form, with kv_lens) read
/// a paged K/V cache: its key and value arguments become
/// `[P, pageSize, Hkv, D]` / `[P, pageSize, Hkv, Dv]` memrefs (P dynamic)
/// and an i32 block table `[B, M]` is appended to the kernel function's
/// arguments (fa.attention's `block_table`). Fails with an error when the
/// attention has no kv_lens or the page size is not positive.
llvm::Error attachBlockTable(ModuleOp kernel, int64_t pageSize);

/// Makes the attention of `kernel` (in the kernel form, built by
/// buildKernelModule) the token-major variable-length form: its query,
/// key, value and output arguments become `[T, H, D]` memrefs (T dynamic),
/// its LSE argument `[Hq, Tq]`, and two i32 offsets `[B + 1]` (cu_seqlens
/// of the queries, then of the keys) are appended to the kernel function's
/// arguments. Fails with an error when the attention has key lengths, a
/// mask, segment ids, a block table or a block mask.
llvm::Error attachCuSeqlens(ModuleOp kernel);

/// Gives the attention of `kernel` (with a mask_mod, after
/// attachModifierFunctions) a block mask of `tiles` (TQ, TK): an i8 memref
/// `[B, Hq, ceil(Nq / TQ), ceil(Nk / TK)]` (B or Hq 1 when the mask_mod
/// does not read b or h) appended to the kernel function's
/// arguments, and adds `func.func @<name>(q, k, <mod_operands>, out)` that
/// builds it with fa.create_block_mask from the same mask_mod. Fails with
/// an error when the attention has no mask_mod.
llvm::Error attachBlockMask(ModuleOp kernel, int64_t tq, int64_t tk,
                            StringRef name);

/// `bufferization.to_tensor %memref restrict [writable]`: how a kernel
/// function's memref arguments enter the tensor-level fa op.
Value toTensor(OpBuilder &b, Location loc, Value memref, bool writable);

/// Converts a tensor of i8 to i1 (`x != 0`). Boolean masks cross the kernel
/// ABI as one byte per element: an i1 memref would be read as packed bits
/// once the lowering vectorizes the mask reads.
Value bytesToI1(OpBuilder &b, Location loc, Value bytes);

/// `bufferization.materialize_in_destination %result in writable %memref`:
/// how a result reaches the kernel function's output memref.
void materialize(OpBuilder &b, Location loc, Value result, Value memref);

/// Turns each `func.func` of `module` that holds an fa op into a job named
/// after the function. Functions without an fa op are skipped; anything else
/// that does not fit (results, non-memref arguments, two fa ops, arguments
/// that are no operand) is an error naming the function.
llvm::Expected<std::vector<KernelJob>>
extractKernelJobs(ModuleOp module, const CompileOptions &options);

/// The runtime's name for the causal alignment `kind` and back, through the
/// names both share (`none`, `top_left`, `bottom_right`).
::fa::runtime::Causal toRuntimeCausal(CausalKind kind);
CausalKind fromRuntimeCausal(::fa::runtime::Causal causal);

/// Checks a head dim: a positive multiple of 8, at most 256.
llvm::Error checkHeadDim(llvm::StringRef what, int64_t value);

/// The tools' `--kernel` value (auto, simt, mma or wgmma). The removed
/// `--tensor-cores` / `--wgmma` flags, when given, are errors naming
/// `--kernel`; a bad value is an error that ends with `(<hint>)` when `hint`
/// is not empty.
llvm::Expected<KernelChoice> parseKernelFlag(llvm::StringRef value,
                                             bool tensorCoresGiven,
                                             bool wgmmaGiven,
                                             llvm::StringRef hint = "");

/// Defines `__truncsfbf2` (f32 -> bf16, round to nearest even, NaNs kept
/// quiet) as a hidden weak function in `module` when it computes with bf16
/// and does not define it already. Hosts without a native conversion (no
/// AVX512_BF16) lower `fptrunc float to bfloat` to a call of it, which
/// neither older libgcc (GCC < 13) nor the JIT's process provides. The CPU
/// artifacts and fa-run's JIT both call it.
void addBF16TruncationHelper(llvm::Module &module);

/// The host's L2 cache per core in bytes (sysconf where the C library knows
/// it, else /sys/devices/system/cpu/cpu0/cache on Linux), or 0 when unknown
/// (fa-lower-to-cpu then assumes 512 KiB). What the tools pass as
/// `cpu-l2-cache-size`.
int64_t getHostL2CacheSize();

/// The host's L1 data cache per core in bytes (as getHostL2CacheSize), or
/// 0 when unknown. What the tools pass as `cpu-l1-cache-size`.
int64_t getHostL1CacheSize();

/// The value of a string option, or nullopt when it was not given (the
/// tools' modifier flags, for parseModifierFlags).
inline std::optional<llvm::StringRef>
getGivenValue(const llvm::cl::opt<std::string> &option) {
  if (!option.getNumOccurrences())
    return std::nullopt;
  return llvm::StringRef(option.getValue());
}

/// The built-in score/mask modifiers as the tools spell them, checked like
/// fa.attention's verifier checks them: `window` "L,R" (integers in [-1,
/// 2^31 - 1], -1 = unbounded), `softcap` a positive, finite float32
/// number, `chunk` in [1, 2^31 - 1], `alibi` "none", "heads" ([Hq]) or
/// "batch_heads" / "batch-heads" ([B, Hq]). An absent flag leaves its
/// modifier off. Errors name the flag (--window, ...).
llvm::Expected<::fa::runtime::ModifierInfo>
parseModifierFlags(std::optional<llvm::StringRef> window,
                   std::optional<llvm::StringRef> softcap,
                   std::optional<int64_t> chunk,
                   std::optional<llvm::StringRef> alibi, bool segments);

/// The f32 lanes of the host's widest vectors as fa-lower-to-cpu's
/// vector kernels use them: 16 with AVX-512 (avx512f), else 8 (AVX2, or two
/// SSE halves). What fa-run passes as `vector-width`; fa-compile asks its
/// target machine instead, so that it can build for another CPU.
int64_t getHostVectorWidth();

/// Whether the host has AVX512_BF16 (vdpbf16ps) with 512-bit vectors: then
/// fa-run lowers bf16 attention through the bf16 dot-product kernel
/// (`cpu-bf16-dot`); fa-compile asks its target machine instead.
bool hostHasBf16Dot();

/// Prints a diagnostic and its notes as "<tool>: error: <location>:
/// <message>" (file:line:col for file locations) to stderr; for
/// ScopedDiagnosticHandler in fa-compile and fa-run.
LogicalResult printToolDiagnostic(llvm::StringRef tool, Diagnostic &diag);

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

/// A private temporary directory where one run writes its artifacts; commit
/// moves them into the output directory (each file renamed into place), so
/// a failed run leaves nothing behind. The directory is removed on
/// destruction.
class ArtifactStage {
public:
  static llvm::Expected<std::unique_ptr<ArtifactStage>> create();
  ~ArtifactStage();

  /// The path of `fileName` inside the stage.
  std::string getPath(llvm::StringRef fileName) const;

  /// Writes `fileName` with `write`, registering it for the commit.
  llvm::Error writeFile(llvm::StringRef fileName,
                        llvm::function_ref<void(llvm::raw_ostream &)> write);

  /// Registers a file some other step created at getPath(fileName).
  void addFile(llvm::StringRef fileName) { files.push_back(fileName.str()); }

  /// Moves every registered file into `outDir` (created if missing). On
  /// failure, the files already moved are removed again.
  llvm::Error commit(llvm::StringRef outDir);

  llvm::ArrayRef<std::string> getFiles() const { return files; }

private:
  ArtifactStage() = default;
  std::string dir;
  std::vector<std::string> files;
};

/// Checks early that `outDir` is, or can be created as, a writable
/// directory.
llvm::Error checkOutputDir(llvm::StringRef outDir);

struct EntryResources;

/// Writes `<name>.json` with the kernel's `cost` object (docs/cost.md),
/// evaluated at `options.reportSizes`, and prints the cost report to
/// `options.reportStream` when set. `entries`: the GPU entries' resources.
llvm::Error writeMetadataFile(const ::fa::runtime::KernelMetadata &md,
                              ArtifactStage &stage,
                              const CompileOptions &options,
                              llvm::ArrayRef<EntryResources> entries = {});

/// Prints a description of the kernel (op, attributes, params with shapes)
/// as comment lines, each starting with `prefix`.
void printKernelSummary(const ::fa::runtime::KernelMetadata &md,
                        llvm::raw_ostream &os, llvm::StringRef prefix);

//===----------------------------------------------------------------------===//
// Targets
//===----------------------------------------------------------------------===//

/// `--target cpu`: lowers with fa-lower-to-cpu, emits `<name>.o`, links
/// `<name>.so` with the system C compiler, writes `<name>.h` and
/// `<name>.json`.
llvm::Error emitCpuArtifacts(KernelJob &job, const CompileOptions &options,
                             ArtifactStage &stage);

/// `--target sm_*`: the GPU path (PTX, cubin where ptxas exists, header,
/// metadata). Defined in GpuTarget.cpp.
llvm::Error emitGpuArtifacts(KernelJob &job, const CompileOptions &options,
                             ArtifactStage &stage);

} // namespace compile
} // namespace fa
} // namespace mlir

#endif // FA_COMPILER_COMPILER_H
