//===- fa-run.cpp - JIT-compile and run fa kernels on .npy files ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Runs `fa.attention` or `fa.softmax` on NumPy arrays:
//
//   fa-run attention --q Q.npy --k K.npy --v V.npy -o O.npy [--lse LSE.npy]
//                    [--causal none|top-left|bottom-right] [--kv-lens L.npy]
//                    [--mask M.npy] [--scale S] [--block-q N] [--block-kv N]
//                    [--window L,R] [--softcap C] [--chunk C]
//                    [--alibi SLOPES.npy] [--q-segments QS.npy
//                    --k-segments KS.npy]
//                    [--device cpu|cuda|emulate|auto] [--chip sm_XX]
//                    [--artifacts DIR]
//   fa-run softmax --x X.npy -o Y.npy [--dim D] [--tile N]
//
// Every input is validated (files, dtypes, ranks, dims) before anything is
// compiled. The tool then builds a `func.func @fa_kernel` over memref
// arguments (batch and sequence lengths dynamic, heads and head dims static),
// lowers it with the registered `fa-lower-to-cpu` pipeline, JIT-compiles the
// resulting LLVM dialect with the ExecutionEngine and calls it on the loaded
// buffers. Outputs are poisoned with NaN before the call and written
// atomically afterwards, so a failed run never leaves an output file.
//
// With --device cuda (or auto, when a CUDA device is present) the attention
// kernel (attention-backward: --device cuda, its dQ and dK/dV kernels) goes
// through fa-compile's GPU path instead (fa-lower-to-nvvm, PTX
// and fa-kernel/3 metadata in a directory) and runs through FARuntime on
// device buffers (CudaRun.cpp). With --device emulate it is mapped to the
// final GPU IR (fa-promote-shared + fa-map-to-gpu, as fa-emulate does) and
// run on the CPU under the SIMT interpreter of fa/Interpreter, with its race,
// bounds and initialization checks (lib/Emulate, shared with fa-emulate).
//
//===----------------------------------------------------------------------===//

#include "CudaRun.h"
#include "fa/Compiler/Compiler.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Emulate/Emulate.h"
#include "fa/InitAll.h"
#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/InputChecks.h"
#include "fa/Runtime/KernelMetadata.h"
#include "fa/Support/Npy.h"
#include "fa/Target/Chips.h"
#include "fa/Support/Version.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

using namespace mlir;
using namespace mlir::fa;
namespace cl = llvm::cl;
namespace rt = ::fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

namespace {

cl::SubCommand attentionCmd(
    "attention",
    "Scaled dot-product attention: O = softmax(scale * Q K^T + masks) V");
cl::SubCommand softmaxCmd("softmax", "Softmax along one dimension");
cl::SubCommand backwardCmd(
    "attention-backward",
    "The gradients dQ, dK, dV of attention from the forward's O and LSE and "
    "dO (fa.attention_backward; --device cpu, emulate or cuda)");

cl::OptionCategory runCategory("fa-run options");

// Options of both subcommands.
cl::opt<std::string> outputPath("o", cl::desc("Output .npy file"),
                                cl::value_desc("file"), cl::sub(attentionCmd),
                                cl::sub(softmaxCmd), cl::cat(runCategory));
cl::opt<std::string> deviceName(
    "device",
    cl::desc("Where to run the kernel: cpu (JIT, the default), cuda (PTX "
             "through FARuntime and the CUDA driver; not softmax), "
             "emulate (the GPU kernel's final IR under fa's SIMT interpreter "
             "on the CPU, with race and bounds checks; not softmax) or "
             "auto (cuda when a CUDA device is present, else the CPU with a "
             "note; attention only)"),
    cl::value_desc("cpu|cuda|emulate|auto"), cl::init("cpu"),
    cl::sub(attentionCmd), cl::sub(softmaxCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<std::string> kernelFamily(
    "kernel",
    cl::desc("GPU kernels (--device cuda, emulate, auto): the attention "
             "kernel family. auto (default): wgmma on sm_90a where eligible "
             "(f16/bf16, head dims multiples of 64), else mma.sync for "
             "f16/bf16 with head dims multiples of 16, else SIMT; simt, mma "
             "or wgmma ask for one, and a kernel it cannot take is an error. "
             "attention-backward: mma.sync for f16/bf16 with head dims "
             "multiples of 16 up to 128, else SIMT (no wgmma)"),
    cl::value_desc("auto|simt|mma|wgmma"), cl::init("auto"),
    cl::sub(attentionCmd), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<bool> packGqa(
    "pack-gqa",
    cl::desc("GPU kernels (--device cuda, emulate, auto): the decode "
             "kernel with packed query heads (each block runs the Hq/Hkv "
             "query heads of one kv head, so K and V are read once per kv "
             "head), SIMT or mma.sync; not with --kernel wgmma"),
    cl::sub(attentionCmd), cl::cat(runCategory));
// Replaced by --kernel; given, they are an error naming it.
cl::opt<bool> removedTensorCores("tensor-cores", cl::Hidden,
                                 cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<bool> removedWgmma("wgmma", cl::Hidden, cl::sub(attentionCmd),
                           cl::cat(runCategory));
/// The chip names come from the chip table.
static const std::string kChipHelp =
    "With --device cuda or emulate: the chip to compile for (" +
    ::fa::target::getChipList() +
    "; default: the device's, sm_90a on an sm_90 device with --kernel auto "
    "or wgmma; emulate: sm_80, sm_90a with --kernel wgmma)";
cl::opt<std::string> chipName("chip", cl::desc(kChipHelp),
                              cl::value_desc("sm_XX"), cl::sub(attentionCmd),
                              cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> artifactsDir(
    "artifacts",
    cl::desc("With --device cuda: keep the compiled kernel (PTX, metadata, "
             "header) in this directory"),
    cl::value_desc("dir"), cl::sub(attentionCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<bool> referenceLowering(
    "reference",
    cl::desc("Use the untiled reference lowering instead of the tiled "
             "online-softmax one"),
    cl::sub(attentionCmd), cl::sub(softmaxCmd), cl::cat(runCategory));
cl::opt<bool> promotedLowering(
    "promoted",
    cl::desc("Run the GPU path's promoted form (fa-promote-shared) on the "
             "CPU: workgroup-memory tiles, thread/warp loops, lane vectors"),
    cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<bool> doubleBuffer(
    "double-buffer",
    cl::desc("With --promoted: two K/V slots, tile j+1 copied while tile j "
             "is computed (fa-promote-shared{double-buffer})"),
    cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<std::string> cpuKernel(
    "cpu-kernel",
    cl::desc("CPU attention kernel: vector (fa-cpu-attention, the default) "
             "or tiled (fa-tile-attention); attention-backward: vector "
             "(fa-cpu-attention-backward) or tiled "
             "(fa-tile-attention-backward)"),
    cl::value_desc("kind"), cl::init("vector"), cl::sub(attentionCmd),
    cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<bool> parallelRun(
    "parallel",
    cl::desc("CPU: run the (batch, head, query tile) loop on OpenMP threads "
             "(OMP_NUM_THREADS; the promoted form stays sequential)"),
    cl::sub(attentionCmd), cl::sub(softmaxCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<bool> printIRAfterAll(
    "print-ir-after-all",
    cl::desc("Print the kernel module before lowering and after every pass "
             "(to stderr)"),
    cl::sub(attentionCmd), cl::sub(softmaxCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<std::string> dumpLLVMDialect(
    "dump-llvm-dialect",
    cl::desc("Write the lowered module (LLVM dialect) to this file"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::sub(softmaxCmd),
    cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> dataType(
    "dtype",
    cl::desc("Element type of the float inputs: auto (default: float32 or "
             "float16, from the files), f32, f16, or bf16: bfloat16 bit "
             "patterns in uint16 ('<u2') or ml_dtypes bfloat16 ('<V2') "
             "files; the output is written in the input's format"),
    cl::value_desc("type"), cl::init("auto"), cl::sub(attentionCmd),
    cl::sub(softmaxCmd), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<bool> printTimes("time",
                         cl::desc("Print compile and run times (to stderr)"),
                         cl::sub(attentionCmd), cl::sub(softmaxCmd),
                         cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<unsigned> kvSplitsOpt(
    "kv-splits",
    cl::desc("CPU decode kernels: split the key range of each (batch, kv "
             "head) into N parts run in parallel and combined by fa.merge "
             "(default 0: chosen at run time with --parallel from the "
             "threads and the parallel work; 1: no split). --device "
             "emulate: N >= 2 runs the split-KV GPU kernel (of the --kernel "
             "family) and its merge kernel with N parts"),
    cl::value_desc("N"), cl::init(0), cl::sub(attentionCmd),
    cl::cat(runCategory));
cl::opt<std::string> cpuBf16(
    "cpu-bf16",
    cl::desc("CPU vector kernel, bf16 inputs: dot (default: AVX512_BF16 dot "
             "products, P rounded to bf16, where the host has avx512bf16) "
             "or f32 (the f32 FMA kernel, P in f32)"),
    cl::value_desc("dot|f32"), cl::init("dot"), cl::sub(attentionCmd),
    cl::cat(runCategory));
cl::opt<std::string> cpuRegisterBlocks(
    "cpu-register-blocks",
    cl::desc("CPU vector kernel: the register blocks KR,PR,PV (keys per S "
             "block, query rows and Dv vectors per P V block; default "
             "6,4 with 16 lanes and Dv's vectors in even groups of at most "
             "6, 2,2,4 with 8), for tuning"),
    cl::value_desc("KR,PR,PV"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<unsigned> repeatRuns(
    "repeat",
    cl::desc("CPU: run the compiled kernel N times (the same inputs and "
             "outputs) and report the fastest run with --time: the first "
             "call's one-time costs (thread start, page faults) out"),
    cl::value_desc("N"), cl::init(1), cl::sub(attentionCmd),
    cl::sub(softmaxCmd), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<bool> quiet("quiet",
                    cl::desc("Do not print the one-line summary on success"),
                    cl::sub(attentionCmd), cl::sub(softmaxCmd),
                    cl::sub(backwardCmd), cl::cat(runCategory));

// Attention.
cl::opt<std::string>
    queryPath("q", cl::desc("Query [B, Hq, Nq, D], float32 or float16"),
              cl::value_desc("file"), cl::sub(attentionCmd),
              cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> keyPath("k",
                             cl::desc("Key [B, Hkv, Nk, D], the query dtype"),
                             cl::value_desc("file"), cl::sub(attentionCmd),
                             cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string>
    valuePath("v", cl::desc("Value [B, Hkv, Nk, Dv], the query dtype"),
              cl::value_desc("file"), cl::sub(attentionCmd),
              cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> lsePath(
    "lse", cl::desc("Also write the log-sum-exp [B, Hq, Nq] (float32) here"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<std::string>
    kvLensPath("kv-lens",
               cl::desc("Key lengths [B], int32 (keys k < len are kept)"),
               cl::value_desc("file"), cl::sub(attentionCmd),
               cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> blockTablePath(
    "block-table",
    cl::desc("A paged K/V cache: block table [B, M], int32; -k and -v are "
             "then pages [P, S, Hkv, D] / [P, S, Hkv, Dv] and --kv-lens the "
             "sequences' lengths (key k of sequence b is row k % S of page "
             "table[b, k / S]; bottom-right causality per sequence; checked "
             "before the run; --device cpu)"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<std::string> cuSeqlensQPath(
    "cu-seqlens-q",
    cl::desc("A token-major variable-length batch: query offsets [B + 1], "
             "int32 (with --cu-seqlens-k; -q is then [Tq, Hq, D], -k and -v "
             "[Tk, Hkv, D] / [Tk, Hkv, Dv], -o [Tq, Hq, Dv], --lse [Hq, Tq]; "
             "sequence b is rows cu_q[b] .. cu_q[b + 1] - 1, bottom-right "
             "causality per sequence; checked before the run; --device cpu)"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<std::string> cuSeqlensKPath(
    "cu-seqlens-k",
    cl::desc("Key offsets [B + 1], int32, of a variable-length batch (with "
             "--cu-seqlens-q)"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<std::string> maskPath(
    "mask",
    cl::desc("Mask [B|1, Hq|1, Nq, Nk]: bool (true = attend) or float32 "
             "(added to the scaled scores)"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<std::string>
    causalName("causal",
               cl::desc("Causal alignment: none, top-left (keep k <= q) or "
                        "bottom-right (keep k <= q + Nk - Nq)"),
               cl::value_desc("kind"), cl::init("none"), cl::sub(attentionCmd),
               cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> scaleText("scale",
                               cl::desc("Scale of Q K^T (default 1/sqrt(D))"),
                               cl::value_desc("S"), cl::sub(attentionCmd),
                               cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> windowText(
    "window",
    cl::desc("Sliding window L,R: query q keeps keys q + off - L <= k <= "
             "q + off + R (off: the causal alignment's offset; -1 = "
             "unbounded)"),
    cl::value_desc("L,R"), cl::sub(attentionCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<std::string>
    softcapText("softcap", cl::desc("Score softcap C > 0: s = C * tanh(s / C)"),
                cl::value_desc("C"), cl::sub(attentionCmd),
                cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<int64_t>
    chunkSize("chunk",
              cl::desc("Chunked attention: keep keys of the query's chunk, "
                       "floor((q + off) / C) == floor(k / C)"),
              cl::value_desc("C"), cl::init(0), cl::sub(attentionCmd),
              cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string>
    alibiPath("alibi",
              cl::desc("ALiBi slopes [Hq] or [B, Hq], float32: adds "
                       "-slope * |q + off - k| to the scaled scores"),
              cl::value_desc("file"), cl::sub(attentionCmd),
              cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> qSegmentsPath(
    "q-segments",
    cl::desc("Query segment ids [B, Nq], int32 (with --k-segments: keys of "
             "another segment are removed)"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::sub(backwardCmd),
    cl::cat(runCategory));
cl::opt<std::string> kSegmentsPath("k-segments",
                                   cl::desc("Key segment ids [B, Nk], int32"),
                                   cl::value_desc("file"),
                                   cl::sub(attentionCmd), cl::sub(backwardCmd),
                                   cl::cat(runCategory));
cl::opt<std::string> modsPath(
    "mods",
    cl::desc("General modifiers: an .mlir file defining func.func "
             "@score_mod(f32, index x4, tensors...) -> f32 and/or "
             "@mask_mod(index x4, tensors...) -> i1, which become the op's "
             "score_mod / mask_mod regions (--device cpu)"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<std::string> blockMaskTiles(
    "block-mask",
    cl::desc("With a --mods @mask_mod: build its block mask for tiles "
             "TQ,TK (fa.create_block_mask, timed apart) and let the kernel "
             "skip the empty tiles and the mask_mod on full ones; the CPU "
             "vector kernel takes TQ and TK as its tile sizes (--device "
             "cpu)"),
    cl::value_desc("TQ,TK"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::list<std::string> modOperandPaths(
    "mod-operand",
    cl::desc("A tensor the --mods functions take (float32 or int32), one "
             "per tensor argument, in order"),
    cl::value_desc("file"), cl::sub(attentionCmd), cl::cat(runCategory));
cl::opt<int64_t> blockQ("block-q", cl::desc("Query tile size"),
                        cl::value_desc("N"), cl::init(64),
                        cl::sub(attentionCmd), cl::sub(backwardCmd),
                        cl::cat(runCategory));
cl::opt<int64_t> blockKV("block-kv", cl::desc("Key/value tile size"),
                         cl::value_desc("N"), cl::init(64),
                         cl::sub(attentionCmd), cl::sub(backwardCmd),
                         cl::cat(runCategory));

// Attention backward: the forward's outputs and dO in, the gradients out.
cl::opt<std::string> forwardOutPath(
    "out", cl::desc("The forward's output O [B, Hq, Nq, Dv], the query dtype"),
    cl::value_desc("file"), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> forwardLsePath(
    "lse",
    cl::desc("The forward's log-sum-exp [B, Hq, Nq], float32 (fa-run "
             "attention --lse)"),
    cl::value_desc("file"), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> gradOutPath(
    "do", cl::desc("The gradient dO [B, Hq, Nq, Dv], the query dtype"),
    cl::value_desc("file"), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> gradQueryPath("dq",
                                   cl::desc("Write dQ [B, Hq, Nq, D] here"),
                                   cl::value_desc("file"), cl::sub(backwardCmd),
                                   cl::cat(runCategory));
cl::opt<std::string> gradKeyPath("dk",
                                 cl::desc("Write dK [B, Hkv, Nk, D] here"),
                                 cl::value_desc("file"), cl::sub(backwardCmd),
                                 cl::cat(runCategory));
cl::opt<std::string> gradValuePath("dv",
                                   cl::desc("Write dV [B, Hkv, Nk, Dv] here"),
                                   cl::value_desc("file"), cl::sub(backwardCmd),
                                   cl::cat(runCategory));

// --device emulate: the mapped GPU IR, written out or read back (how the
// mutation tests edit the kernels: test/Integration/Backward).
cl::opt<std::string> dumpMappedPath(
    "dump-mapped",
    cl::desc("--device emulate: also write the mapped GPU IR here"),
    cl::value_desc("file"), cl::sub(backwardCmd), cl::cat(runCategory));
cl::opt<std::string> mappedPath(
    "mapped",
    cl::desc("--device emulate: run this mapped GPU IR (a --dump-mapped "
             "file, possibly edited) instead of mapping the op; the other "
             "flags must be those it was mapped with"),
    cl::value_desc("file"), cl::sub(backwardCmd), cl::cat(runCategory));

// Softmax.
cl::opt<std::string> inputPath("x",
                               cl::desc("Input, float32 or float16, rank >= 1"),
                               cl::value_desc("file"), cl::sub(softmaxCmd),
                               cl::cat(runCategory));
cl::opt<int64_t>
    softmaxDim("dim",
               cl::desc("Dimension to normalize; negative counts from the end "
                        "(default -1, the last)"),
               cl::value_desc("D"), cl::init(-1), cl::sub(softmaxCmd),
               cl::cat(runCategory));
cl::opt<int64_t> softmaxTile("tile", cl::desc("Row tile size"),
                             cl::value_desc("N"), cl::init(256),
                             cl::sub(softmaxCmd), cl::cat(runCategory));

} // namespace

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// An error with a plain message (printed after "fa-run: error: ").
static Error makeError(const Twine &message) {
  return llvm::createStringError(message);
}

/// An input array and the file it came from.
struct Input {
  std::string path;
  NpyArray array;

  ArrayRef<int64_t> shape() const { return array.getShape(); }
  /// "Q.npy (2, 8, 77, 64)".
  std::string describe() const {
    return path + " " + formatNpyShape(array.getShape());
  }
};

/// The file dtypes of float inputs: float32 and float16, and, as bfloat16
/// bit patterns (with --dtype bf16), uint16 and void16.
static constexpr NpyDType kFloatTypes[] = {NpyDType::Float32,
                                           NpyDType::Float16};
static constexpr NpyDType kBF16BitTypes[] = {NpyDType::UInt16,
                                             NpyDType::Void16};

/// Whether files of `dtype` hold bfloat16 bit patterns (see --dtype).
static bool holdsBF16(NpyDType dtype) {
  return dtype == NpyDType::UInt16 || dtype == NpyDType::Void16;
}

/// The element type name of a float input in messages and summaries.
static StringRef getFloatTypeName(NpyDType dtype) {
  return holdsBF16(dtype) ? "bfloat16" : getNpyDTypeName(dtype);
}

/// Reads `path` with one of the `allowed` dtypes.
static Expected<Input> loadInput(StringRef path, ArrayRef<NpyDType> allowed) {
  Expected<NpyArray> array = readNpyFile(path, allowed);
  if (!array)
    return array.takeError();
  return Input{path.str(), std::move(*array)};
}

/// Checks the dtype of the float input `in` against --dtype: bfloat16 bit
/// patterns only when asked for, and exactly the type asked for.
static Error checkFloatType(const Input &in) {
  NpyDType dtype = in.array.getDType();
  std::string got = ("dtype '" + getNpyDTypeDescr(dtype) + "' (" +
                     getNpyDTypeName(dtype) + ")")
                        .str();
  if (dataType == "auto") {
    if (holdsBF16(dtype))
      return makeError(in.path + ": " + got +
                       " is not a float type; pass --dtype bf16 if it holds "
                       "bfloat16 bit patterns");
    return Error::success();
  }
  if (dataType == "bf16" && !holdsBF16(dtype))
    return makeError(in.path + ": --dtype bf16 takes bfloat16 bit patterns "
                               "(uint16 '<u2' or ml_dtypes bfloat16 '<V2' "
                               "files), got " +
                     got);
  NpyDType want = dataType == "f16" ? NpyDType::Float16 : NpyDType::Float32;
  if (dataType != "bf16" && dtype != want)
    return makeError(in.path + ": --dtype " + dataType + " takes " +
                     getNpyDTypeName(want) + " files, got " + got);
  return Error::success();
}

/// Reads the float input `path` as --dtype says. A file of the other kind
/// (bit patterns without --dtype bf16, or floats with it) gets the error of
/// checkFloatType, which says what to pass.
static Expected<Input> loadFloatInput(StringRef path) {
  bool bits = dataType == "bf16";
  Expected<Input> in = loadInput(path, bits ? kBF16BitTypes : kFloatTypes);
  if (!in) {
    Expected<Input> other =
        loadInput(path, bits ? kFloatTypes : kBF16BitTypes);
    if (!other) {
      consumeError(other.takeError());
      return in.takeError();
    }
    consumeError(in.takeError());
    in = std::move(other);
  }
  if (Error err = checkFloatType(*in))
    return std::move(err);
  return in;
}

/// Checks that `path` can be created: its directory exists and is writable,
/// and it is not a directory itself.
static Error checkWritable(StringRef path) {
  if (llvm::sys::fs::is_directory(path))
    return makeError(path + ": cannot write the output: it is a directory");
  StringRef dir = llvm::sys::path::parent_path(path);
  if (dir.empty())
    dir = ".";
  if (!llvm::sys::fs::is_directory(dir))
    return makeError(path + ": cannot write the output: directory '" + dir +
                     "' does not exist");
  if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
    return makeError(path + ": cannot write the output: directory '" + dir +
                     "' is not writable");
  return Error::success();
}

/// Fills `array` (float32 or float16) with quiet NaNs, so elements a kernel
/// forgets to write are caught.
static void poison(NpyArray &array) {
  if (array.getDType() == NpyDType::Float32) {
    llvm::fill(array.getElements<float>(), std::nanf(""));
  } else if (holdsBF16(array.getDType())) {
    llvm::fill(array.getElements<uint16_t>(), uint16_t(0x7fc0));
  } else {
    assert(array.getDType() == NpyDType::Float16 && "expected a float array");
    llvm::fill(array.getElements<uint16_t>(), uint16_t(0x7e00));
  }
}

/// A ranked memref descriptor laid out as the LLVM lowering expects it (and
/// as StridedMemRefType<T, N> declares it): allocated pointer, aligned
/// pointer, offset, sizes[N], strides[N], every field 64-bit. Describes a
/// contiguous C-order array of any rank.
class MemRefDescriptor {
public:
  MemRefDescriptor(void *data, ArrayRef<int64_t> shape)
      : fields(3 + 2 * shape.size()) {
    static_assert(sizeof(void *) == sizeof(int64_t), "64-bit hosts only");
    int64_t ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(data));
    fields[0] = ptr;
    fields[1] = ptr;
    fields[2] = 0;
    int64_t rank = shape.size(), stride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      fields[3 + i] = shape[i];
      fields[3 + rank + i] = stride;
      stride *= shape[i];
    }
  }

  /// The address of the descriptor (what the C interface takes).
  void *get() { return fields.data(); }

private:
  llvm::SmallVector<int64_t, 11> fields;
};

/// Milliseconds since `start`.
static double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

//===----------------------------------------------------------------------===//
// Compile and run
//===----------------------------------------------------------------------===//

/// Reports diagnostics as "fa-run: error: <location>: <message>".
static LogicalResult printDiagnostic(Diagnostic &diag) {
  return compile::printToolDiagnostic("fa-run", diag);
}

/// A function called before the kernel (the block mask's builder).
struct Prelude {
  std::string name;
  MutableArrayRef<MemRefDescriptor> descriptors;
  double ms = 0;
};

/// Lowers `module` with `pipeline` to the LLVM dialect, JIT-compiles it and
/// calls `@fa_kernel` with `descriptors` (one per memref argument, in order),
/// after `prelude` when given. Adds the compile and run times to
/// `compileMs` and `runMs` (the prelude's to its own `ms`).
static Error lowerAndRun(ModuleOp module, StringRef pipeline,
                         MutableArrayRef<MemRefDescriptor> descriptors,
                         double &compileMs, double &runMs,
                         Prelude *prelude = nullptr) {
  MLIRContext *ctx = module.getContext();
  auto start = std::chrono::steady_clock::now();

  if (failed(verify(module)))
    return makeError("internal error: the kernel module does not verify");

  PassManager pm(ctx);
  std::string pipelineErrors;
  llvm::raw_string_ostream pipelineErrorStream(pipelineErrors);
  // The bare list form: "builtin.module(...)" would nest the pipeline under
  // the module PassManager and silently run it on nothing.
  if (failed(parsePassPipeline(pipeline, pm, pipelineErrorStream)))
    return makeError("cannot build the lowering pipeline '" + pipeline +
                     "': " + StringRef(pipelineErrors).trim());
  if (printIRAfterAll) {
    ctx->disableMultithreading();
    llvm::errs() << "// -----// fa-run: kernel module before '" << pipeline
                 << "' //----- //\n"
                 << module << "\n";
    pm.enableIRPrinting(
        /*shouldPrintBeforePass=*/[](Pass *, Operation *) { return false; },
        /*shouldPrintAfterPass=*/[](Pass *, Operation *) { return true; },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  }
  if (failed(pm.run(module)))
    return makeError("lowering with '" + pipeline + "' failed");

  if (!dumpLLVMDialect.empty()) {
    std::string message;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(dumpLLVMDialect, &message);
    if (!file)
      return makeError(dumpLLVMDialect + ": " + message);
    module.print(file->os());
    file->os() << "\n";
    file->keep();
  }

  // JIT-compile for the host.
  auto tmBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!tmBuilder)
    return makeError("cannot target the host: " +
                     llvm::toString(tmBuilder.takeError()));
  tmBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto tm = tmBuilder->createTargetMachine();
  if (!tm)
    return makeError("cannot create a target machine for the host: " +
                     llvm::toString(tm.takeError()));
  auto optimize = makeOptimizingTransformer(
      /*optLevel=*/3, /*sizeLevel=*/0, /*targetMachine=*/tm->get());
  // A named callable: ExecutionEngineOptions::transformer is a
  // function_ref and must not refer to a temporary.
  auto transformer = [&optimize](llvm::Module *m) -> llvm::Error {
    // bf16 rounding on hosts without AVX512_BF16 calls __truncsfbf2.
    compile::addBF16TruncationHelper(*m);
    return optimize(m);
  };
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  // --parallel: the OpenMP runtime the kernel's __kmpc_* calls bind to.
  SmallVector<StringRef> sharedLibs;
  if (parallelRun) {
    if (!llvm::sys::fs::exists(FA_OPENMP_RUNTIME))
      return makeError("--parallel needs the OpenMP runtime, which is not at "
                       "'" FA_OPENMP_RUNTIME "' (install libomp-22-dev)");
    sharedLibs.push_back(FA_OPENMP_RUNTIME);
  }
  options.sharedLibPaths = sharedLibs;
  auto engine = ExecutionEngine::create(module, options, std::move(*tm));
  if (!engine)
    return makeError("JIT compilation failed: " +
                     llvm::toString(engine.takeError()));
  (*engine)->initialize();
  auto kernel = (*engine)->lookupPacked("_mlir_ciface_fa_kernel");
  if (!kernel)
    return makeError("JIT compilation failed: " +
                     llvm::toString(kernel.takeError()));
  compileMs += millisecondsSince(start);

  // The C interface takes a pointer to each memref descriptor; the packed
  // wrapper takes a pointer to each of those arguments.
  auto call = [](auto &fn, MutableArrayRef<MemRefDescriptor> ds) {
    llvm::SmallVector<void *> ptrs, args;
    for (MemRefDescriptor &d : ds)
      ptrs.push_back(d.get());
    for (void *&p : ptrs)
      args.push_back(&p);
    fn(args.data());
  };
  if (prelude) {
    auto fn = (*engine)->lookupPacked("_mlir_ciface_" + prelude->name);
    if (!fn)
      return makeError("JIT compilation failed: " +
                       llvm::toString(fn.takeError()));
    start = std::chrono::steady_clock::now();
    call(*fn, prelude->descriptors);
    prelude->ms += millisecondsSince(start);
  }
  llvm::SmallVector<void *> descriptorPtrs, args;
  for (MemRefDescriptor &d : descriptors)
    descriptorPtrs.push_back(d.get());
  for (void *&p : descriptorPtrs)
    args.push_back(&p);
  double best = 0;
  for (unsigned i = 0; i < std::max(1u, unsigned(repeatRuns)); ++i) {
    start = std::chrono::steady_clock::now();
    (*kernel)(args.data());
    double ms = millisecondsSince(start);
    best = i == 0 ? ms : std::min(best, ms);
  }
  runMs += best;
  return Error::success();
}

/// Writes `outputs` (path, array) in order (writeOutputFile's rules). If one
/// fails, the regular files already written by this call are removed again;
/// a device or FIFO written in place is left alone.
static Error
writeOutputs(ArrayRef<std::pair<std::string, const NpyArray *>> outputs) {
  llvm::SmallVector<std::string> written;
  for (const auto &output : outputs) {
    Expected<WrittenOutput> result =
        writeNpyFile(output.first, *output.second);
    if (!result) {
      for (const std::string &file : written)
        (void)llvm::sys::fs::remove(file);
      return result.takeError();
    }
    if (!result->regularFile.empty())
      written.push_back(result->regularFile);
  }
  return Error::success();
}

/// The kernel dtype of a float array.
static rt::DType getKernelDType(NpyDType dtype) {
  if (holdsBF16(dtype))
    return rt::DType::BF16;
  return dtype == NpyDType::Float16 ? rt::DType::F16 : rt::DType::F32;
}

/// Builds the kernel `md` describes with the compiler library's builder
/// (the one fa-compile uses) and checks it.
static Expected<OwningOpRef<ModuleOp>>
buildKernel(MLIRContext &ctx, const rt::KernelMetadata &md) {
  OwningOpRef<ModuleOp> module = compile::buildKernelModule(ctx, md);
  if (failed(verify(*module)))
    return makeError("internal error: the kernel module does not verify");
  return module;
}

/// Prints `--time` and the summary line.
static void reportSuccess(StringRef summary, double compileMs, double runMs) {
  if (printTimes)
    llvm::errs() << llvm::formatv("compile: {0:f1} ms, run: {1:f3} ms\n",
                                  compileMs, runMs);
  if (!quiet)
    llvm::errs() << "fa-run: " << summary << "\n";
}

/// --cpu-register-blocks as its three integers (1 to 32 each); nullopt
/// when given with another shape. Absent: {0, 0, 0}, the pass's defaults.
static std::optional<std::array<int64_t, 3>> parseRegisterBlocks() {
  std::array<int64_t, 3> blocks = {0, 0, 0};
  if (cpuRegisterBlocks.empty())
    return blocks;
  llvm::SmallVector<StringRef> parts;
  StringRef(cpuRegisterBlocks).split(parts, ',');
  if (parts.size() != 3)
    return std::nullopt;
  for (auto [part, value] : llvm::zip(parts, blocks))
    if (part.getAsInteger(10, value) || value < 1 || value > 32)
      return std::nullopt;
  return blocks;
}

/// --cpu-register-blocks as pipeline options (appended inside the braces),
/// or "" when not given. Checked by parseRegisterBlocks first.
static std::string registerBlocksText() {
  std::array<int64_t, 3> blocks =
      parseRegisterBlocks().value_or(std::array<int64_t, 3>{0, 0, 0});
  if (blocks[0] == 0)
    return "";
  return llvm::formatv(" cpu-key-rows={0} cpu-pv-rows={1} cpu-pv-vectors={2}",
                       blocks[0], blocks[1], blocks[2])
      .str();
}

/// Returns the text of the pipeline options shared by both kernels.
static std::string pipelineText(int64_t bq, int64_t bkv, int64_t tile) {
  return llvm::formatv("fa-lower-to-cpu{{block-q={0} block-kv={1} "
                       "softmax-tile={2} reference={3} promoted={4} "
                       "gpu-block-q={5} gpu-block-kv={6} "
                       "gpu-double-buffer={7} parallel={8} "
                       "cpu-kernel={9} cpu-block-q={10} cpu-block-kv={11} "
                       "cpu-l2-cache-size={12} vector-width={13} "
                       "cpu-kv-splits={14} cpu-bf16-dot={16} "
                       "cpu-l1-cache-size={17}{15}}",
                       bq, bkv, tile, referenceLowering ? "true" : "false",
                       promotedLowering ? "true" : "false",
                       // The promoted form picks its own tile sizes unless
                       // they are given explicitly.
                       blockQ.getNumOccurrences() ? bq : 0,
                       blockKV.getNumOccurrences() ? bkv : 0,
                       doubleBuffer ? "true" : "false",
                       parallelRun ? "true" : "false", cpuKernel.getValue(),
                       // The vector kernel too (0: its automatic sizes).
                       blockQ.getNumOccurrences() ? bq : 0,
                       blockKV.getNumOccurrences() ? bkv : 0,
                       compile::getHostL2CacheSize(),
                       // The host's widest f32 vectors (16 or 8 lanes).
                       compile::getHostVectorWidth(),
                       static_cast<unsigned>(kvSplitsOpt), registerBlocksText(),
                       // bf16 dot products where the host has them.
                       compile::hostHasBf16Dot() && cpuBf16 == "dot"
                           ? "true"
                           : "false",
                       compile::getHostL1CacheSize())
      .str();
}

/// Where the kernel runs, once --device is resolved.
enum class Device { Cpu, Cuda, Emulate };

/// The options that only the CPU (JIT) path has, given on the command line.
static llvm::SmallVector<StringRef> getCpuOnlyOptions() {
  llvm::SmallVector<StringRef> given;
  if (referenceLowering)
    given.push_back("--reference");
  if (promotedLowering)
    given.push_back("--promoted");
  if (doubleBuffer)
    given.push_back("--double-buffer");
  if (cpuKernel.getNumOccurrences())
    given.push_back("--cpu-kernel");
  if (printIRAfterAll)
    given.push_back("--print-ir-after-all");
  if (!dumpLLVMDialect.empty())
    given.push_back("--dump-llvm-dialect");
  return given;
}

/// Whether the outputs `a` and `b` would write one regular file: the same
/// path, or paths (links) that resolve to one existing file.
static bool sameOutputFile(StringRef a, StringRef b) {
  if (a == b)
    return true;
  bool same = false;
  return llvm::sys::fs::is_regular_file(a) &&
         !llvm::sys::fs::equivalent(a, b, same) && same;
}

/// Rejects CPU lowering flags that contradict each other or have nothing to
/// apply to, naming both flags: each picks or tunes one CPU lowering.
static Error checkLoweringFlags() {
  if (referenceLowering && promotedLowering)
    return makeError("--reference and --promoted pick different lowerings; "
                     "give one");
  if (doubleBuffer && !promotedLowering)
    return makeError("--double-buffer applies to --promoted only");
  if (cpuKernel.getNumOccurrences() && (referenceLowering || promotedLowering))
    return makeError(Twine("--cpu-kernel picks the default lowering's kernel; "
                           "it does not apply with ") +
                     (referenceLowering ? "--reference" : "--promoted"));
  if (parallelRun && promotedLowering)
    return makeError("--parallel does not apply to --promoted (the promoted "
                     "form runs sequentially)");
  return Error::success();
}

/// Resolves --device: `cuda` needs a usable CUDA device (else a one-line
/// error); `auto` takes one when present and otherwise runs on the CPU with
/// a one-line note. `op` is "attention" or "softmax".
static Expected<Device> resolveDevice(StringRef op) {
  if (Error err = checkLoweringFlags())
    return std::move(err);
  if (deviceName != "cpu" && deviceName != "cuda" && deviceName != "auto" &&
      deviceName != "emulate")
    return makeError("--device must be cpu, cuda, emulate or auto, got '" +
                     deviceName + "'");
  // Checked here; the runs parse it again where they need the family.
  if (Expected<KernelChoice> choice = compile::parseKernelFlag(
          kernelFamily, removedTensorCores.getNumOccurrences(),
          removedWgmma.getNumOccurrences());
      !choice)
    return choice.takeError();
  if (deviceName == "cpu" && kernelFamily.getNumOccurrences())
    return makeError("--kernel applies to --device cuda, emulate or auto "
                     "only");
  if (deviceName == "cpu" && packGqa)
    return makeError("--pack-gqa applies to --device cuda, emulate or auto "
                     "only (the CPU kernels pack query heads by themselves "
                     "when Nq is small)");
  if (packGqa && kernelFamily == "wgmma")
    return makeError("--pack-gqa makes a SIMT or mma.sync kernel; it cannot "
                     "be combined with --kernel wgmma");
  bool cudaOnlyOption = chipName.getNumOccurrences() ||
                        artifactsDir.getNumOccurrences();
  if (deviceName == "cpu") {
    if (cudaOnlyOption)
      return makeError(Twine(chipName.getNumOccurrences() ? "--chip"
                                                          : "--artifacts") +
                       " applies to --device cuda or auto only");
    return Device::Cpu;
  }
  llvm::SmallVector<StringRef> cpuOnly = getCpuOnlyOptions();
  if (deviceName == "emulate") {
    if (op == "softmax")
      return makeError("--device emulate: softmax has no GPU kernel yet; use "
                       "--device cpu");
    if (artifactsDir.getNumOccurrences())
      return makeError("--artifacts applies to --device cuda or auto only");
    if (chipName.getNumOccurrences() && !::fa::target::lookupChip(chipName))
      return makeError("--chip '" + chipName + "' is not supported; expected " +
                       ::fa::target::getChipList());
    if (!cpuOnly.empty())
      return makeError("--device emulate: " + llvm::join(cpuOnly, ", ") +
                       (cpuOnly.size() == 1 ? " applies" : " apply") +
                       " to the CPU only");
    return Device::Emulate;
  }
  if (deviceName == "cuda") {
    if (op == "softmax")
      return makeError("--device cuda: softmax has no GPU kernel yet; use "
                       "--device cpu or auto");
    if (!cpuOnly.empty())
      return makeError("--device cuda: " + llvm::join(cpuOnly, ", ") +
                       (cpuOnly.size() == 1 ? " applies" : " apply") +
                       " to the CPU only");
    if (std::optional<std::string> why = run::probeCuda())
      return makeError("--device cuda: " + *why);
    return Device::Cuda;
  }
  // auto: the CPU-only options and softmax pick the CPU without probing.
  if (op == "softmax" || !cpuOnly.empty())
    return Device::Cpu;
  if (std::optional<std::string> why = run::probeCuda()) {
    std::string reason = *why;
    // "no CUDA driver (...)" reads better as "no CUDA device (...)" here.
    if (StringRef(reason).starts_with("no CUDA driver ("))
      reason = "no CUDA device (" + reason.substr(16);
    llvm::errs() << "fa-run: note: " << reason << "; running on the CPU";
    // The GPU kernel choices do not apply there; say so rather than drop
    // them silently.
    SmallVector<std::string> gpuOnly;
    if (kernelFamily.getNumOccurrences())
      gpuOnly.push_back("--kernel " + kernelFamily);
    if (packGqa)
      gpuOnly.push_back("--pack-gqa (the CPU kernels pack query heads by "
                        "themselves when Nq is small)");
    if (!gpuOnly.empty())
      llvm::errs() << ", without " << llvm::join(gpuOnly, " and ");
    llvm::errs() << "\n";
    return Device::Cpu;
  }
  return Device::Cuda;
}

/// Counts the NaNs in a float32 or float16 array.
static int64_t countNaNs(const NpyArray &array) {
  int64_t count = 0;
  if (array.getDType() == NpyDType::Float32) {
    for (float f : array.getElements<float>())
      count += std::isnan(f);
  } else if (array.getDType() == NpyDType::Float16) {
    for (uint16_t h : array.getElements<uint16_t>())
      count += (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
  } else if (holdsBF16(array.getDType())) {
    for (uint16_t h : array.getElements<uint16_t>())
      count += (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
  }
  return count;
}

/// Whether every element is finite (float32 or float16; other dtypes are).
static bool allFinite(const NpyArray &array) {
  if (array.getDType() == NpyDType::Float32) {
    for (float f : array.getElements<float>())
      if (!std::isfinite(f))
        return false;
  } else if (array.getDType() == NpyDType::Float16) {
    for (uint16_t h : array.getElements<uint16_t>())
      if ((h & 0x7c00) == 0x7c00)
        return false;
  } else if (holdsBF16(array.getDType())) {
    for (uint16_t h : array.getElements<uint16_t>())
      if ((h & 0x7f80) == 0x7f80)
        return false;
  }
  return true;
}

/// The arrays of one attention run, by role (null when absent).
struct AttentionArrays {
  NpyArray *q, *k, *v, *lens, *mask, *out, *lse;
  NpyArray *alibi = nullptr, *qSegments = nullptr, *kSegments = nullptr;

  NpyArray *get(rt::ParamRole role) const {
    switch (role) {
    case rt::ParamRole::Query:
      return q;
    case rt::ParamRole::Key:
      return k;
    case rt::ParamRole::Value:
      return v;
    case rt::ParamRole::KvLens:
      return lens;
    case rt::ParamRole::Mask:
      return mask;
    case rt::ParamRole::Output:
      return out;
    case rt::ParamRole::Lse:
      return lse;
    case rt::ParamRole::Alibi:
      return alibi;
    case rt::ParamRole::QSegments:
      return qSegments;
    case rt::ParamRole::KSegments:
      return kSegments;
    case rt::ParamRole::Input:
    case rt::ParamRole::ModOperand: // fa-run's --mods tensors come apart
      break;
    }
    return nullptr;
  }
};

/// What --device emulate passes to the interpreter for `array`, the kernel
/// argument `name` (`isOutput`: the kernel writes it).
static EmulationBuffer makeEmulationBuffer(StringRef name, NpyArray &array,
                                           bool isOutput) {
  EmulationBuffer buf;
  buf.name = name.str();
  buf.data = array.getData();
  buf.shape.assign(array.getShape().begin(), array.getShape().end());
  buf.isOutput = isOutput;
  return buf;
}

/// Whether `role` is one of the backward's outputs dQ, dK, dV.
static bool isGradient(rt::ParamRole role) {
  return role == rt::ParamRole::GradQuery || role == rt::ParamRole::GradKey ||
         role == rt::ParamRole::GradValue;
}

/// What --device cuda passes to the launch for `array`, a parameter of the
/// kernel (`isOutput`: copied back after the run).
static run::HostOperand makeHostOperand(NpyArray &array, bool isOutput) {
  run::HostOperand operand;
  operand.data = array.getData();
  switch (array.getDType()) {
  case NpyDType::Float16:
    operand.dtype = FA_DTYPE_F16;
    break;
  case NpyDType::UInt16:
  case NpyDType::Void16:
    operand.dtype = FA_DTYPE_BF16;
    break;
  case NpyDType::Int32:
    operand.dtype = FA_DTYPE_I32;
    break;
  case NpyDType::Bool:
    operand.dtype = FA_DTYPE_BOOL;
    break;
  default:
    operand.dtype = FA_DTYPE_F32;
    break;
  }
  operand.shape.assign(array.getShape().begin(), array.getShape().end());
  operand.bytes = static_cast<int64_t>(array.getNumBytes());
  operand.isOutput = isOutput;
  return operand;
}

/// The --device cuda options of the command line.
static run::CudaRunOptions getCudaRunOptions() {
  run::CudaRunOptions options;
  options.chip = chipName;
  options.gpuBlockQ = blockQ.getNumOccurrences() ? blockQ.getValue() : 0;
  options.gpuBlockKV = blockKV.getNumOccurrences() ? blockKV.getValue() : 0;
  (void)parseKernelChoice(kernelFamily, options.kernel);
  options.packGqa = packGqa ? "always" : "auto";
  options.artifactsDir = artifactsDir;
  return options;
}

/// Where a --device cuda run ran: "cuda (<chip>[ on <device>], kernel
/// <family>)".
static std::string describeCudaRun(const run::CudaRunResult &ran) {
  return "cuda (" + ran.chip +
         (ran.chip == ran.device ? "" : " on " + ran.device) + ", kernel " +
         stringifyKernelFamily(ran.kernel).str() + ")";
}

/// --device cuda: compiles the kernel `md` describes with the compiler
/// library's GPU path and runs it through FARuntime. Returns where it ran.
static Expected<std::string> runOnCuda(MLIRContext &ctx,
                                       const rt::KernelMetadata &md,
                                       const AttentionArrays &arrays,
                                       double &compileMs, double &runMs) {
  std::vector<run::HostOperand> operands;
  for (const rt::ParamInfo &param : md.params) {
    NpyArray *array = arrays.get(param.role);
    assert(array && "every attention param has an array");
    operands.push_back(
        makeHostOperand(*array, param.role == rt::ParamRole::Output ||
                                    param.role == rt::ParamRole::Lse));
  }
  Expected<run::CudaRunResult> ran =
      run::runAttentionOnCuda(ctx, md, operands, getCudaRunOptions());
  if (!ran)
    return ran.takeError();

  // Poisoned outputs the kernel left as NaN, when no input could have
  // produced a NaN, mean elements it did not write.
  NpyArray *mask = arrays.mask;
  bool finiteInputs = allFinite(*arrays.q) && allFinite(*arrays.k) &&
                      allFinite(*arrays.v) &&
                      (!mask || mask->getDType() == NpyDType::Bool || [&] {
                        for (float f : mask->getElements<float>())
                          if (std::isnan(f) || f == INFINITY)
                            return false;
                        return true;
                      }());
  if (finiteInputs) {
    NpyArray *lse = arrays.lse;
    int64_t missing = countNaNs(*arrays.out) + (lse ? countNaNs(*lse) : 0);
    int64_t total =
        arrays.out->getNumElements() + (lse ? lse->getNumElements() : 0);
    if (missing)
      return makeError(formatv("--device cuda: the kernel left {0} of {1} "
                               "output elements unwritten (still NaN) on "
                               "{2}; no output written",
                               missing, total, ran->device));
  }
  compileMs = ran->compileMs;
  runMs = ran->runMs;
  return describeCudaRun(*ran);
}

/// Sets how --device emulate maps a kernel: the tile sizes, kernel family and
/// chip of the command line (sm_80 unless given; sm_90a for --kernel
/// wgmma).
static void setEmulationMapOptions(EmulationMapOptions &mapOptions) {
  mapOptions.lowering.blockQ =
      blockQ.getNumOccurrences() ? blockQ.getValue() : 0;
  mapOptions.lowering.blockKV =
      blockKV.getNumOccurrences() ? blockKV.getValue() : 0;
  mapOptions.lowering.kernel = kernelFamily.getValue();
  mapOptions.lowering.packGqa = packGqa ? "always" : "auto";
  mapOptions.lowering.chip = chipName.getNumOccurrences() ? chipName.getValue()
                             : kernelFamily == "wgmma"    ? "sm_90a"
                                                          : "sm_80";
  if (blockQ.getNumOccurrences())
    mapOptions.lowering.tcBlockQ = blockQ.getValue();
  if (blockKV.getNumOccurrences())
    mapOptions.lowering.tcBlockKV = blockKV.getValue();
}

/// --device emulate: maps `module` as fa-emulate does and runs it under the
/// SIMT interpreter, the host function launching the kernel over its grid.
/// Returns where it ran.
static Expected<std::string> runOnEmulator(ModuleOp module,
                                           const rt::KernelMetadata &md,
                                           const AttentionArrays &arrays,
                                           MutableArrayRef<Input> modOperands,
                                           ArrayRef<NpyArray *> serving,
                                           double &compileMs, double &runMs) {
  auto start = std::chrono::steady_clock::now();
  EmulationMapOptions mapOptions;
  setEmulationMapOptions(mapOptions);
  // Split-KV: --kv-splits N >= 2 parts (the workspace below has N).
  unsigned parts = kvSplitsOpt;
  mapOptions.lowering.splitKv = parts >= 2;
  llvm::SourceMgr mappedMgr;
  std::string error;
  OwningOpRef<ModuleOp> mapped =
      mapForEmulation(module, mapOptions, mappedMgr, error);
  if (!mapped)
    return makeError("--device emulate: " + error);
  compileMs = millisecondsSince(start);

  llvm::SmallVector<EmulationBuffer> buffers;
  auto add = [&](StringRef name, NpyArray *array, bool isOutput) {
    if (array)
      buffers.push_back(makeEmulationBuffer(name, *array, isOutput));
  };
  // The kernel function's arguments, in the metadata's order (named as
  // fa-emulate names them).
  for (const rt::ParamInfo &param : md.params) {
    StringRef name = llvm::StringSwitch<StringRef>(param.name)
                         .Case("q", "Q")
                         .Case("k", "K")
                         .Case("v", "V")
                         .Case("o", "O")
                         .Case("lse", "LSE")
                         .Default(param.name);
    add(name, arrays.get(param.role),
        param.role == rt::ParamRole::Output ||
            param.role == rt::ParamRole::Lse);
  }
  // The --mods tensors: the arguments attachMods appended.
  for (auto [i, in] : llvm::enumerate(modOperands))
    add(("mod" + Twine(i)).str(), &in.array, /*isOutput=*/false);
  // The block table, or the offsets of a variable-length batch: the
  // arguments attachBlockTable / attachCuSeqlens appended.
  for (NpyArray *array : serving)
    add(array->getRank() == 2 ? "block_table" : "cu_seqlens", array,
        /*isOutput=*/false);
  // Split-KV: the workspace of partials, [N, B, Hq, Nq, Dv] and [N, B, Hq,
  // Nq] f32, the arguments fa-promote-shared appended.
  std::optional<NpyArray> partialO, partialLse;
  if (parts >= 2) {
    // At most one part per 16 keys (the smallest key tile): more would
    // only add empty parts to a larger workspace.
    ArrayRef<int64_t> kShape = arrays.k->getShape();
    int64_t keys = serving.size() == 1
                       ? serving[0]->getShape()[1] * kShape[1]
                       : kShape[2];
    parts = static_cast<unsigned>(std::min<int64_t>(
        parts, std::max<int64_t>(2, (keys + 15) / 16)));
    SmallVector<int64_t, 5> poShape = {static_cast<int64_t>(parts)};
    llvm::append_range(poShape, arrays.out->getShape());
    partialO.emplace(NpyDType::Float32, poShape);
    partialLse.emplace(NpyDType::Float32,
                       ArrayRef<int64_t>(poShape).drop_back());
    add("partial_o", &*partialO, /*isOutput=*/false);
    add("partial_lse", &*partialLse, /*isOutput=*/false);
  }
  // Varlen: rows of no sequence (before cu_q[0], from cu_q[B]) are not
  // written (O [Tq, Hq, Dv] dim 0, LSE [Hq, Tq] dim 1).
  if (serving.size() == 2) {
    ArrayRef<int32_t> cu = serving[0]->getElements<int32_t>();
    for (EmulationBuffer &buf : buffers) {
      if (!buf.isOutput)
        continue;
      buf.tokenDim = buf.name == "LSE" ? 1 : 0;
      buf.tokenBegin = cu.front();
      buf.tokenEnd = cu.back();
    }
  }
  InterpreterOptions options;
  options.checkRaces = true;
  EmulationLaunch launch;
  launch.function = "fa_kernel";
  start = std::chrono::steady_clock::now();
  if (failed(runEmulation(*mapped, launch, buffers, options, error)))
    return makeError("--device emulate: " + error);
  runMs = millisecondsSince(start);
  KernelFamily family = KernelFamily::Simt;
  if (auto host = mapped->lookupSymbol<func::FuncOp>("fa_kernel"))
    family = getMappedKernelFamily(host).value_or(KernelFamily::Simt);
  return ("emulate (SIMT interpreter, " + mapOptions.lowering.chip.getValue() +
          ", kernel " + stringifyKernelFamily(family) + ")")
      .str();
}

/// Checks the options both subcommands share.
static Error checkCommonOptions() {
  if (outputPath.empty())
    return makeError("missing the output file: pass -o FILE");
  if (dataType != "auto" && dataType != "f32" && dataType != "f16" &&
      dataType != "bf16")
    return makeError("--dtype must be auto, f32, f16 or bf16, got '" +
                     dataType + "'");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Validates the attention inputs, runs the kernel and writes the outputs.
/// Attaches the --mods functions to the kernel `module` and checks the
/// --mod-operand arrays against the tensors they take.
static Error attachMods(MLIRContext &ctx, ModuleOp module,
                        ArrayRef<Input> operands) {
  OwningOpRef<ModuleOp> mods = parseSourceFile<ModuleOp>(modsPath, &ctx);
  if (!mods)
    return makeError("--mods: cannot parse '" + modsPath + "'");
  Expected<SmallVector<RankedTensorType>> tensors =
      compile::attachModifierFunctions(module, *mods);
  if (!tensors)
    return makeError("--mods " + modsPath + ": " +
                     llvm::toString(tensors.takeError()));
  if (tensors->size() != operands.size())
    return makeError(llvm::formatv(
        "--mods {0}: the functions take {1} tensor(s), --mod-operand gives "
        "{2}",
        modsPath.getValue(), tensors->size(), operands.size()));
  for (auto [i, t] : llvm::enumerate(*tensors)) {
    const Input &in = operands[i];
    Type elt = t.getElementType();
    bool ok = (elt.isF32() && in.array.getDType() == NpyDType::Float32) ||
              (elt.isSignlessInteger(32) &&
               in.array.getDType() == NpyDType::Int32);
    ArrayRef<int64_t> shape = in.shape();
    ok = ok && shape.size() == static_cast<size_t>(t.getRank());
    for (int64_t d = 0; ok && d < t.getRank(); ++d)
      ok = t.isDynamicDim(d) || t.getDimSize(d) == shape[d];
    if (!ok) {
      std::string want;
      llvm::raw_string_ostream os(want);
      os << t;
      return makeError(llvm::formatv(
          "{0}: tensor #{1} of --mods is {2}, got {3} {4}", in.path, i, want,
          getNpyDTypeName(in.array.getDType()), formatNpyShape(shape)));
    }
  }
  if (failed(verify(module)))
    return makeError("--mods " + modsPath +
                     ": the modifier functions do not fit fa.attention's "
                     "regions (see the error above)");
  return Error::success();
}

/// The flags attention and its backward share, checked: the causal
/// alignment, the tile sizes, the scale and the built-in modifiers.
struct AttentionFlags {
  std::optional<CausalKind> causal;
  std::optional<float> scale;
  rt::ModifierInfo mods;
};

static Expected<AttentionFlags> parseAttentionFlags() {
  AttentionFlags flags;
  flags.causal = parseCausalKind(causalName);
  if (!flags.causal)
    return makeError("--causal must be none, top-left or bottom-right, got '" +
                     causalName + "'");
  if (blockQ <= 0 || blockKV <= 0)
    return makeError(llvm::formatv("--block-q and --block-kv must be "
                                   "positive, got {0} and {1}",
                                   blockQ.getValue(), blockKV.getValue()));
  if (scaleText.getNumOccurrences()) {
    double value = 0;
    if (StringRef(scaleText).trim().getAsDouble(value) ||
        !std::isfinite(value) || !std::isfinite(static_cast<float>(value)))
      return makeError("--scale must be a finite float32 number, got '" +
                       scaleText + "'");
    flags.scale = static_cast<float>(value);
  }
  // The modifiers (checked like the op's verifier does).
  Expected<rt::ModifierInfo> mods = compile::parseModifierFlags(
      compile::getGivenValue(windowText), compile::getGivenValue(softcapText),
      chunkSize.getNumOccurrences() ? std::optional<int64_t>(chunkSize)
                                    : std::nullopt,
      std::nullopt, false);
  if (!mods)
    return mods.takeError();
  flags.mods = *mods;
  if (qSegmentsPath.empty() != kSegmentsPath.empty())
    return makeError("--q-segments and --k-segments go together: give both");
  return flags;
}

/// The optional inputs of a dense attention (or its backward): key
/// lengths, a mask, ALiBi slopes, segment ids.
struct AuxInputs {
  std::optional<Input> lens, mask, alibi, qSegments, kSegments;
};

/// Loads --kv-lens, --mask, --alibi and --q-segments / --k-segments.
static Expected<AuxInputs> loadAuxInputs() {
  AuxInputs aux;
  auto load = [](StringRef path, ArrayRef<NpyDType> allowed,
                 std::optional<Input> &to) -> Error {
    if (path.empty())
      return Error::success();
    Expected<Input> in = loadInput(path, allowed);
    if (!in)
      return in.takeError();
    to = std::move(*in);
    return Error::success();
  };
  if (Error err = load(kvLensPath, {NpyDType::Int32}, aux.lens))
    return std::move(err);
  if (Error err = load(maskPath, {NpyDType::Bool, NpyDType::Float32}, aux.mask))
    return std::move(err);
  if (Error err = load(alibiPath, {NpyDType::Float32}, aux.alibi))
    return std::move(err);
  if (Error err = load(qSegmentsPath, {NpyDType::Int32}, aux.qSegments))
    return std::move(err);
  if (!aux.qSegments)
    return aux;
  if (Error err = load(kSegmentsPath, {NpyDType::Int32}, aux.kSegments))
    return std::move(err);
  return aux;
}

/// Checks the mask, ALiBi slopes and segment ids against B, Hq, Nq and Nk
/// (from the query `q` and the key `k`) and records the ALiBi and segment
/// modifiers in `mods`.
static Error checkAuxInputs(const Input &qIn, const Input &kIn, int64_t B,
                            int64_t Hq, int64_t Nq, int64_t Nk,
                            const std::optional<Input> &mask,
                            const std::optional<Input> &alibi,
                            const std::optional<Input> &qSegments,
                            const std::optional<Input> &kSegments,
                            rt::ModifierInfo &mods) {
  const Input *q = &qIn, *k = &kIn;
  auto dimError = [](const Input &in, const Twine &message) {
    return makeError(in.path + ": " + message);
  };
  if (mask) {
    ArrayRef<int64_t> m = mask->shape();
    bool ok = m.size() == 4 && (m[0] == B || m[0] == 1) &&
              (m[1] == Hq || m[1] == 1) && m[2] == Nq && m[3] == Nk;
    if (!ok)
      return dimError(*mask, formatv("mask shape {0} does not match [B|1, "
                                     "Hq|1, Nq, Nk] = [{1}|1, {2}|1, {3}, "
                                     "{4}] from the query {5} and the key "
                                     "{6}",
                                     formatNpyShape(m), B, Hq, Nq, Nk,
                                     q->describe(), k->describe()));
  }

  if (alibi) {
    ArrayRef<int64_t> a = alibi->shape();
    if (!((a.size() == 1 && a[0] == Hq) ||
          (a.size() == 2 && a[0] == B && a[1] == Hq)))
      return dimError(*alibi, formatv("expected ALiBi slopes of shape ({0},) "
                                      "or ({1}, {0}) (Hq and B from the "
                                      "query {2}), got {3}",
                                      Hq, B, q->describe(), formatNpyShape(a)));
    mods.alibi =
        a.size() == 2 ? rt::AlibiKind::BatchHeads : rt::AlibiKind::Heads;
  }
  if (qSegments) {
    for (auto [in, n, name] :
         {std::tuple<const Input *, int64_t, StringRef>{&*qSegments, Nq, "Nq"},
          {&*kSegments, Nk, "Nk"}}) {
      ArrayRef<int64_t> sh = in->shape();
      if (sh.size() != 2 || sh[0] != B || sh[1] != n)
        return dimError(*in, formatv("expected segment ids of shape ({0}, "
                                     "{1}) (B and {2} from the query {3} and "
                                     "the key {4}), got {5}",
                                     B, n, name, q->describe(), k->describe(),
                                     formatNpyShape(sh)));
    }
    mods.segments = true;
  }

  return Error::success();
}

static Error runAttention(MLIRContext &ctx) {
  if (Error err = checkCommonOptions())
    return err;
  if (queryPath.empty() || keyPath.empty() || valuePath.empty())
    return makeError("attention needs --q, --k and --v (and -o)");
  Expected<AttentionFlags> flags = parseAttentionFlags();
  if (!flags)
    return flags.takeError();
  std::optional<CausalKind> causal = flags->causal;
  std::optional<float> scale = flags->scale;
  rt::ModifierInfo mods = flags->mods;

  if (!lsePath.empty() && sameOutputFile(lsePath, outputPath))
    return makeError("-o and --lse name the same file '" + outputPath + "'");
  if (Error err = checkWritable(outputPath))
    return err;
  if (!lsePath.empty())
    if (Error err = checkWritable(lsePath))
      return err;
  Expected<Device> device = resolveDevice("attention");
  if (!device)
    return device.takeError();

  // Load and validate the inputs.
  Expected<Input> q = loadFloatInput(queryPath);
  if (!q)
    return q.takeError();
  Expected<Input> k = loadFloatInput(keyPath);
  if (!k)
    return k.takeError();
  Expected<Input> v = loadFloatInput(valuePath);
  if (!v)
    return v.takeError();
  Expected<AuxInputs> aux = loadAuxInputs();
  if (!aux)
    return aux.takeError();
  std::optional<Input> lens = std::move(aux->lens), mask = std::move(aux->mask);
  std::optional<Input> alibi = std::move(aux->alibi),
                       qSegments = std::move(aux->qSegments),
                       kSegments = std::move(aux->kSegments);
  std::optional<Input> table;
  if (!blockTablePath.empty()) {
    Expected<Input> in = loadInput(blockTablePath, {NpyDType::Int32});
    if (!in)
      return in.takeError();
    table = std::move(*in);
  }
  std::optional<Input> cuQ, cuK;
  if (cuSeqlensQPath.empty() != cuSeqlensKPath.empty())
    return makeError("--cu-seqlens-q and --cu-seqlens-k go together");
  if (!cuSeqlensQPath.empty()) {
    Expected<Input> inQ = loadInput(cuSeqlensQPath, {NpyDType::Int32});
    if (!inQ)
      return inQ.takeError();
    cuQ = std::move(*inQ);
    Expected<Input> inK = loadInput(cuSeqlensKPath, {NpyDType::Int32});
    if (!inK)
      return inK.takeError();
    cuK = std::move(*inK);
  }
  bool varlen = cuQ.has_value();
  // General modifiers: the CPU lowerings run them.
  SmallVector<Input> modOperands;
  if (modsPath.empty() && !modOperandPaths.empty())
    return makeError("--mod-operand needs --mods (the functions that read "
                     "it)");
  std::optional<std::pair<int64_t, int64_t>> bmTiles;
  if (!blockMaskTiles.empty()) {
    StringRef text = blockMaskTiles;
    auto [l, r] = text.split(',');
    int64_t tq = 0, tk = 0;
    if (l.trim().getAsInteger(10, tq) || r.trim().getAsInteger(10, tk) ||
        tq <= 0 || tk <= 0 || tq > (int64_t(1) << 31) - 1 ||
        tk > (int64_t(1) << 31) - 1)
      return makeError("--block-mask must be TQ,TK with sizes in [1, 2^31 - "
                       "1], got '" + blockMaskTiles + "'");
    if (modsPath.empty())
      return makeError("--block-mask needs --mods with a @mask_mod");
    if (*device != Device::Cpu)
      return makeError("--block-mask runs on --device cpu only (the GPU "
                       "kernels do not read block masks yet)");
    if (referenceLowering || promotedLowering)
      return makeError("--block-mask applies to the default CPU lowering "
                       "(the reference and promoted ones do not read block "
                       "masks)");
    bmTiles = {tq, tk};
  }
  if (!modsPath.empty() && *device == Device::Cuda)
    return makeError("--mods: fa-run --device cuda does not take general "
                     "modifiers yet; use --device cpu or emulate, or compile "
                     "a kernel function with the regions with fa-compile "
                     "(docs/artifacts.md)");
  for (const std::string &path : modOperandPaths) {
    Expected<Input> in =
        loadInput(path, {NpyDType::Float32, NpyDType::Int32});
    if (!in)
      return in.takeError();
    modOperands.push_back(std::move(*in));
  }

  for (auto [in, what, varlenWhat] :
       {std::tuple<Input *, StringRef, StringRef>{
            &*q, "the query [B, Hq, Nq, D]", "the query [Tq, Hq, D]"},
        {&*k, "the key [B, Hkv, Nk, D]", "the key [Tk, Hkv, D]"},
        {&*v, "the value [B, Hkv, Nk, Dv]", "the value [Tk, Hkv, Dv]"}})
    if (in->array.getRank() != (varlen ? 3 : 4))
      return makeError(in->path + ": expected rank " + (varlen ? "3" : "4") +
                       " for " + (varlen ? varlenWhat : what) +
                       (varlen ? " (--cu-seqlens-q)" : "") + ", got shape " +
                       formatNpyShape(in->shape()));
  NpyDType dtype = q->array.getDType();
  for (Input *in : {&*k, &*v})
    if (in->array.getDType() != dtype)
      return makeError(in->path + ": dtype " +
                       getNpyDTypeName(in->array.getDType()) +
                       " does not match the query's " + getNpyDTypeName(dtype) +
                       " (" + q->path + ")");
  int64_t B, Hq, Nq, D, Hkv, Nk, Dv;
  if (varlen) {
    // Token-major: Nq and Nk are the packed lengths Tq and Tk.
    B = cuQ->array.getRank() == 1 ? cuQ->shape()[0] - 1 : 0;
    Nq = q->shape()[0];
    Hq = q->shape()[1];
    D = q->shape()[2];
    Nk = k->shape()[0];
    Hkv = k->shape()[1];
    Dv = v->shape()[2];
  } else {
    B = q->shape()[0];
    Hq = q->shape()[1];
    Nq = q->shape()[2];
    D = q->shape()[3];
    Hkv = k->shape()[1];
    Nk = k->shape()[2];
    Dv = v->shape()[3];
  }
  auto dimError = [](const Input &in, const Twine &message) {
    return makeError(in.path + ": " + message);
  };
  if (!parseRegisterBlocks())
    return makeError("--cpu-register-blocks: expected KR,PR,PV, three "
                     "integers from 1 to 32 (e.g. 6,4,4), got '" +
                     cpuRegisterBlocks + "'");
  if (!cpuRegisterBlocks.empty() &&
      (*device != Device::Cpu || referenceLowering || promotedLowering ||
       cpuKernel != "vector"))
    return makeError("--cpu-register-blocks applies to the CPU vector kernel "
                     "(--device cpu, --cpu-kernel vector, no --reference or "
                     "--promoted)");
  if (cpuBf16 != "dot" && cpuBf16 != "f32")
    return makeError("--cpu-bf16 must be dot or f32, got '" + cpuBf16 + "'");
  if (cpuBf16.getNumOccurrences() &&
      (*device != Device::Cpu || referenceLowering || promotedLowering ||
       cpuKernel != "vector"))
    return makeError("--cpu-bf16 applies to the CPU vector kernel (--device "
                     "cpu, --cpu-kernel vector, no --reference or "
                     "--promoted)");
  if (kvSplitsOpt.getNumOccurrences() &&
      (*device == Device::Cuda || referenceLowering || promotedLowering ||
       cpuKernel != "vector"))
    return makeError("--kv-splits applies to the CPU vector kernel's decode "
                     "kernels (--device cpu, --cpu-kernel vector, no "
                     "--reference or --promoted) and to the SIMT kernel "
                     "under --device emulate");
  if (varlen) {
    if ((*device != Device::Cpu && *device != Device::Emulate) ||
        referenceLowering || promotedLowering || cpuKernel != "vector")
      return makeError("--cu-seqlens-q: variable-length batches run on "
                       "--device cpu with the vector kernel or --device "
                       "emulate (the SIMT GPU kernel) only (no CUDA "
                       "artifact, reference or promoted lowering reads them "
                       "yet)");
    if (lens || table || mask || qSegments || !blockMaskTiles.empty() ||
        kvSplitsOpt.getNumOccurrences())
      return makeError("--cu-seqlens-q: --kv-lens, --block-table, --mask, "
                       "segment ids, --block-mask and --kv-splits are not "
                       "available with a variable-length batch");
    // The offsets, checked before any kernel reads through them.
    for (auto [cu, total, tokens, side] :
         {std::tuple<Input *, int64_t, Input *, StringRef>{&*cuQ, Nq, &*q,
                                                           "query"},
          {&*cuK, Nk, &*k, "key"}}) {
      ArrayRef<int64_t> sh = cu->shape();
      if (sh.size() != 1 || sh[0] < 1 || sh[0] != cuQ->shape()[0])
        return dimError(*cu, formatv("expected {0} offsets of shape (B + 1,) "
                                     "with B + 1 >= 1 entries, as many as "
                                     "{1}, got {2}",
                                     side, cuQ->describe(),
                                     formatNpyShape(sh)));
      ArrayRef<int32_t> off = cu->array.getElements<int32_t>();
      if (std::optional<std::string> problem = rt::checkCuSeqlens(
              off.data(), sh[0], total, side))
        return dimError(*cu, *problem + " of " + tokens->describe());
    }
    if (v->shape()[0] != Nk || v->shape()[1] != Hkv)
      return dimError(*v, formatv("tokens and heads [Tk, Hkv] of {0} do "
                                  "not match those of the key {1}",
                                  v->describe(), k->describe()));
  }
  // A paged cache: K/V [P, S, Hkv, D], Nk = M x S.
  int64_t pageSize = 0;
  if (table) {
    if ((*device != Device::Cpu && *device != Device::Emulate) ||
        referenceLowering || promotedLowering || cpuKernel != "vector")
      return makeError("--block-table: paged caches run on --device cpu "
                       "with the vector kernel or --device emulate (the "
                       "SIMT GPU kernel) only (no CUDA artifact, reference "
                       "or promoted lowering reads them yet)");
    if (!lens)
      return makeError("--block-table needs --kv-lens: the number of keys "
                       "of each sequence");
    if (qSegments || !blockMaskTiles.empty())
      return makeError("--block-table: segment ids and block masks are not "
                       "available with a paged cache");
    ArrayRef<int64_t> t = table->shape(), ks = k->shape(), vs = v->shape();
    if (t.size() != 2 || t[0] != B)
      return dimError(*table, formatv("expected a block table of shape ({0}, "
                                      "M) (B from the query {1}), got {2}",
                                      B, q->describe(), formatNpyShape(t)));
    if (ks[0] != vs[0] || ks[1] != vs[1] || ks[2] != vs[2])
      return dimError(*v, formatv("pages [P, S, Hkv] of {0} do not match "
                                  "those of the key {1}",
                                  v->describe(), k->describe()));
    if (ks[1] <= 0)
      return dimError(*k, formatv("the page size S (dim 1 of {0}) must be "
                                  "positive",
                                  k->describe()));
    pageSize = ks[1];
    Hkv = ks[2];
    Nk = t[1] * pageSize;
  }
  for (Input *in : {&*k, &*v})
    if (!table && !varlen && in->shape()[0] != B)
      return dimError(*in, formatv("batch B = {0} of {1} does not match B = "
                                   "{2} of the query {3}",
                                   in->shape()[0], in->describe(), B,
                                   q->describe()));
  if (!table && !varlen && v->shape()[1] != Hkv)
    return dimError(*v,
                    formatv("heads Hkv = {0} of {1} do not match Hkv = "
                            "{2} of the key {3}",
                            v->shape()[1], v->describe(), Hkv, k->describe()));
  if (!table && !varlen && v->shape()[2] != Nk)
    return dimError(*v,
                    formatv("key length Nk = {0} of {1} does not match "
                            "Nk = {2} of the key {3}",
                            v->shape()[2], v->describe(), Nk, k->describe()));
  if (k->shape().back() != D)
    return dimError(*k,
                    formatv("head dim D = {0} of {1} does not match D = "
                            "{2} of the query {3}",
                            k->shape().back(), k->describe(), D,
                            q->describe()));
  if (Hq == 0 || Hkv == 0)
    return dimError(Hq == 0 ? *q : *k,
                    formatv("head counts must be positive, got Hq = {0} "
                            "({1}) and Hkv = {2} ({3})",
                            Hq, q->describe(), Hkv, k->describe()));
  if (Hq % Hkv != 0)
    return dimError(*k, formatv("query heads Hq = {0} ({1}) are not a "
                                "multiple of key/value heads Hkv = {2} ({3})",
                                Hq, q->describe(), Hkv, k->describe()));
  if (D == 0 || Dv == 0)
    return dimError(D == 0 ? *q : *v,
                    formatv("head dims must be positive, got D = {0} ({1}) "
                            "and Dv = {2} ({3})",
                            D, q->describe(), Dv, v->describe()));
  if (lens && (lens->array.getRank() != 1 || lens->shape()[0] != B))
    return dimError(*lens,
                    formatv("expected key lengths of shape ({0},) "
                            "(B from the query {1}), got {2}",
                            B, q->describe(), formatNpyShape(lens->shape())));
  if (table) {
    // The table and lengths, checked before any kernel reads through them:
    // every page a sequence's keys need is a page of the cache.
    ArrayRef<int32_t> len = lens->array.getElements<int32_t>();
    ArrayRef<int32_t> entries = table->array.getElements<int32_t>();
    if (std::optional<rt::InputProblem> problem = rt::checkBlockTable(
            len.data(), entries.data(), B, table->shape()[1], k->shape()[0],
            pageSize))
      return problem->role == rt::ParamRole::KvLens
                 ? dimError(*lens, problem->message + " (" +
                                       table->describe() + ")")
                 : dimError(*table, problem->message + " (the cache: " +
                                        k->describe() + ")");
  }
  if (Error err = checkAuxInputs(*q, *k, B, Hq, Nq, Nk, mask, alibi, qSegments,
                                 kSegments, mods))
    return err;

  // The outputs, poisoned.
  NpyArray out = varlen ? NpyArray(dtype, {Nq, Hq, Dv})
                        : NpyArray(dtype, {B, Hq, Nq, Dv});
  poison(out);
  std::optional<NpyArray> lse;
  if (!lsePath.empty()) {
    if (varlen)
      lse.emplace(NpyDType::Float32, ArrayRef<int64_t>{Hq, Nq});
    else
      lse.emplace(NpyDType::Float32, ArrayRef<int64_t>{B, Hq, Nq});
    poison(*lse);
  }

  // Writes the outputs and prints the summary.
  auto finish = [&](double compileMs, double runMs,
                    const std::string &where) -> Error {
    llvm::SmallVector<std::pair<std::string, const NpyArray *>> outputs = {
        {outputPath, &out}};
    if (lse)
      outputs.push_back({lsePath, &*lse});
    if (Error err = writeOutputs(outputs))
      return err;

    std::string summary =
        formatv("attention {0} B={1} Hq={2} Hkv={3} Nq={4} Nk={5} D={6} "
                "Dv={7} causal={8}",
                getFloatTypeName(dtype), B, Hq, Hkv, Nq, Nk, D, Dv,
                causalName.getValue())
            .str();
    if (lens)
      summary += " kv-lens";
    if (varlen)
      summary += formatv(" varlen(Tq={0} Tk={1})", Nq, Nk).str();
    if (table)
      summary += formatv(" paged(P={0} S={1} M={2})", k->shape()[0],
                         pageSize, table->shape()[1])
                     .str();
    if (mask)
      summary += (" mask=" + getNpyDTypeName(mask->array.getDType()) +
                  formatNpyShape(mask->shape()))
                     .str();
    if (mods.hasWindow())
      summary +=
          formatv(" window={0},{1}", mods.windowLeft, mods.windowRight).str();
    if (mods.softcap) {
      char text[32];
      std::snprintf(text, sizeof(text), " softcap=%g", *mods.softcap);
      summary += text;
    }
    if (mods.chunk)
      summary += formatv(" chunk={0}", mods.chunk).str();
    if (alibi)
      summary += " alibi" + formatNpyShape(alibi->shape());
    if (qSegments)
      summary += " segments";
    summary += " on " + where + " -> " + outputPath;
    if (lse)
      summary += ", " + lsePath;
    reportSuccess(summary, compileMs, runMs);
    return Error::success();
  };

  // The kernel as fa-compile describes it: B, Nq and Nk dynamic; heads and
  // head dims static; mask dims of size 1 static (they broadcast).
  bool boolMask = mask && mask->array.getDType() == NpyDType::Bool;
  rt::KernelMetadata md;
  md.name = "attention";
  // The JIT and the emulator call @fa_kernel; the CUDA artifact is named
  // like fa-compile's.
  md.symbol = *device == Device::Cuda ? "fa_attention" : "fa_kernel";
  md.generator = "fa-run";
  md.op = rt::OpKind::Attention;
  md.dtype = getKernelDType(dtype);
  md.headDim = D;
  md.valueHeadDim = Dv;
  md.heads = Hq;
  md.kvHeads = Hkv;
  md.causal = compile::toRuntimeCausal(*causal);
  md.scale = scale ? *scale : 1.0f / std::sqrt(static_cast<float>(D));
  md.mask = !mask      ? rt::MaskKind::None
            : boolMask ? rt::MaskKind::Bool
                       : rt::MaskKind::Additive;
  md.hasKvLens = lens.has_value();
  md.hasLse = lse.has_value();
  md.blockQ = blockQ;
  md.blockKV = blockKV;
  md.modifiers = mods;
  md.params = rt::getCanonicalParams(
      md, boolMask ? rt::DType::I8 : rt::DType::F32,
      /*maskBroadcastBatch=*/mask && mask->shape()[0] == 1,
      /*maskBroadcastHeads=*/mask && mask->shape()[1] == 1);
  if (std::optional<std::string> err = rt::verifyKernelSignature(md))
    return makeError("internal error: " + *err);

  AttentionArrays arrays{&q->array,
                         &k->array,
                         &v->array,
                         lens ? &lens->array : nullptr,
                         mask ? &mask->array : nullptr,
                         &out,
                         lse ? &*lse : nullptr,
                         alibi ? &alibi->array : nullptr,
                         qSegments ? &qSegments->array : nullptr,
                         kSegments ? &kSegments->array : nullptr};
  double compileMs = 0, runMs = 0;
  if (*device == Device::Cuda) {
    Expected<std::string> where = runOnCuda(ctx, md, arrays, compileMs, runMs);
    if (!where)
      return where.takeError();
    return finish(compileMs, runMs, *where);
  }

  Expected<OwningOpRef<ModuleOp>> module = buildKernel(ctx, md);
  if (!module)
    return module.takeError();

  if (!modsPath.empty())
    if (Error err = attachMods(ctx, **module, modOperands))
      return err;
  if (table)
    if (Error err = compile::attachBlockTable(**module, pageSize))
      return makeError("--block-table: " + llvm::toString(std::move(err)));
  if (varlen)
    if (Error err = compile::attachCuSeqlens(**module))
      return makeError("--cu-seqlens-q: " + llvm::toString(std::move(err)));
  if (*device == Device::Emulate) {
    llvm::SmallVector<NpyArray *> serving;
    if (table)
      serving.push_back(&table->array);
    if (varlen) {
      serving.push_back(&cuQ->array);
      serving.push_back(&cuK->array);
    }
    Expected<std::string> where = runOnEmulator(
        **module, md, arrays, modOperands, serving, compileMs, runMs);
    if (!where)
      return where.takeError();
    return finish(compileMs, runMs, *where);
  }

  // Run on the CPU.
  llvm::SmallVector<MemRefDescriptor> descriptors;
  for (const rt::ParamInfo &param : md.params) {
    NpyArray *array = arrays.get(param.role);
    descriptors.emplace_back(array->getData(), array->getShape());
  }
  for (Input &in : modOperands)
    descriptors.emplace_back(in.array.getData(), in.shape());
  if (table)
    descriptors.emplace_back(table->array.getData(), table->shape());
  if (varlen) {
    descriptors.emplace_back(cuQ->array.getData(), cuQ->shape());
    descriptors.emplace_back(cuK->array.getData(), cuK->shape());
  }
  if (!bmTiles) {
    if (Error err = lowerAndRun(**module, pipelineText(blockQ, blockKV, 256),
                                descriptors, compileMs, runMs))
      return err;
    return finish(compileMs, runMs, "cpu");
  }
  // The block mask: built by @fa_block_mask(q, k, mods..., out) before the
  // kernel, which reads it as its last argument.
  if (Error err = compile::attachBlockMask(**module, bmTiles->first,
                                           bmTiles->second, "fa_block_mask"))
    return makeError("--block-mask: " + llvm::toString(std::move(err)));
  ArrayRef<int64_t> qs = q->shape(), ks = k->shape();
  auto bmType = cast<MemRefType>(
      (*module)->lookupSymbol<func::FuncOp>("fa_block_mask")
          .getArgumentTypes().back());
  NpyArray blockMask(
      NpyDType::Bool,
      {bmType.getDimSize(0) == 1 ? 1 : qs[0],
       bmType.getDimSize(1) == 1 ? 1 : qs[1],
       (qs[2] + bmTiles->first - 1) / bmTiles->first,
       (ks[2] + bmTiles->second - 1) / bmTiles->second});
  llvm::SmallVector<MemRefDescriptor> bmDescriptors;
  bmDescriptors.emplace_back(q->array.getData(), qs);
  bmDescriptors.emplace_back(k->array.getData(), ks);
  for (Input &in : modOperands)
    bmDescriptors.emplace_back(in.array.getData(), in.shape());
  bmDescriptors.emplace_back(blockMask.getData(), blockMask.getShape());
  descriptors.emplace_back(blockMask.getData(), blockMask.getShape());
  Prelude prelude{"fa_block_mask", bmDescriptors};
  if (Error err = lowerAndRun(**module, pipelineText(blockQ, blockKV, 256),
                              descriptors, compileMs, runMs, &prelude))
    return err;
  if (printTimes)
    llvm::errs() << llvm::formatv("block mask: {0:f3} ms\n", prelude.ms);
  return finish(compileMs, runMs, "cpu");
}

//===----------------------------------------------------------------------===//
// Attention backward
//===----------------------------------------------------------------------===//

/// Validates the backward's inputs, runs fa.attention_backward on the CPU
/// and writes dQ, dK and dV.
static Error runAttentionBackward(MLIRContext &ctx) {
  if (queryPath.empty() || keyPath.empty() || valuePath.empty() ||
      forwardOutPath.empty() || forwardLsePath.empty() || gradOutPath.empty())
    return makeError("attention-backward needs --q, --k, --v, --out, --lse "
                     "and --do (and --dq, --dk, --dv)");
  if (gradQueryPath.empty() || gradKeyPath.empty() || gradValuePath.empty())
    return makeError("attention-backward writes three files: pass --dq, --dk "
                     "and --dv");
  if (dataType != "auto" && dataType != "f32" && dataType != "f16" &&
      dataType != "bf16")
    return makeError("--dtype must be auto, f32, f16 or bf16, got '" +
                     dataType + "'");
  if (deviceName != "cpu" && deviceName != "emulate" && deviceName != "cuda")
    return makeError("attention-backward runs on --device cpu, emulate (the "
                     "GPU kernels under the interpreter) or cuda, got '" +
                     deviceName + "'");
  bool emulate = deviceName == "emulate";
  bool cuda = deviceName == "cuda";
  if (kernelFamily.getNumOccurrences()) {
    if (deviceName == "cpu")
      return makeError("--kernel applies to --device cuda or emulate only");
    if (kernelFamily != "auto" && kernelFamily != "simt" &&
        kernelFamily != "mma")
      return makeError("attention-backward: --kernel must be auto, simt or "
                       "mma (there are no wgmma backward kernels), got '" +
                       kernelFamily + "'");
  }
  if (!emulate &&
      (dumpMappedPath.getNumOccurrences() || mappedPath.getNumOccurrences()))
    return makeError("--dump-mapped and --mapped apply to --device emulate "
                     "only");
  if (deviceName != "cpu") {
    llvm::SmallVector<StringRef> cpuOnly = getCpuOnlyOptions();
    if (!cpuOnly.empty())
      return makeError(
          "--device " + deviceName + ": " + llvm::join(cpuOnly, ", ") +
          (cpuOnly.size() == 1 ? " applies" : " apply") + " to the CPU only");
  }
  if (!cuda && artifactsDir.getNumOccurrences())
    return makeError("--artifacts applies to --device cuda only");
  if (chipName.getNumOccurrences()) {
    if (deviceName == "cpu")
      return makeError("--chip applies to --device cuda or emulate only");
    if (!::fa::target::lookupChip(chipName))
      return makeError("--chip '" + chipName + "' is not supported; expected " +
                       ::fa::target::getChipList());
  }
  if (cuda) {
    if (std::optional<std::string> why = run::probeCuda())
      return makeError("--device cuda: " + *why);
  }
  if (!dumpMappedPath.empty() && !mappedPath.empty())
    return makeError("--dump-mapped and --mapped cannot be combined: the "
                     "mapped IR is either written or read");
  if (cpuKernel != "vector" && cpuKernel != "tiled")
    return makeError("--cpu-kernel must be vector or tiled, got '" + cpuKernel +
                     "'");
  Expected<AttentionFlags> flags = parseAttentionFlags();
  if (!flags)
    return flags.takeError();
  std::optional<CausalKind> causal = flags->causal;
  std::optional<float> scale = flags->scale;
  rt::ModifierInfo mods = flags->mods;
  const std::string *outs[] = {&gradQueryPath.getValue(),
                               &gradKeyPath.getValue(),
                               &gradValuePath.getValue()};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < i; ++j)
      if (sameOutputFile(*outs[i], *outs[j]))
        return makeError("--dq, --dk and --dv must name three files, got '" +
                         *outs[i] + "' twice");
    if (Error err = checkWritable(*outs[i]))
      return err;
  }

  // Inputs.
  Expected<Input> q = loadFloatInput(queryPath);
  if (!q)
    return q.takeError();
  Expected<Input> k = loadFloatInput(keyPath);
  if (!k)
    return k.takeError();
  Expected<Input> v = loadFloatInput(valuePath);
  if (!v)
    return v.takeError();
  Expected<Input> o = loadFloatInput(forwardOutPath);
  if (!o)
    return o.takeError();
  Expected<Input> dO = loadFloatInput(gradOutPath);
  if (!dO)
    return dO.takeError();
  Expected<Input> lse = loadInput(forwardLsePath, {NpyDType::Float32});
  if (!lse)
    return lse.takeError();
  Expected<AuxInputs> aux = loadAuxInputs();
  if (!aux)
    return aux.takeError();

  auto dimError = [](const Input &in, const Twine &message) {
    return makeError(in.path + ": " + message);
  };
  for (Input *in : {&*q, &*k, &*v, &*o, &*dO})
    if (in->array.getRank() != 4)
      return dimError(*in, "expected rank 4, got shape " +
                               formatNpyShape(in->shape()));
  NpyDType dtype = q->array.getDType();
  for (Input *in : {&*k, &*v, &*o, &*dO})
    if (in->array.getDType() != dtype)
      return dimError(*in, "dtype " + getNpyDTypeName(in->array.getDType()) +
                               " does not match the query's " +
                               getNpyDTypeName(dtype) + " (" + q->path + ")");
  ArrayRef<int64_t> qs = q->shape(), ks = k->shape(), vs = v->shape();
  int64_t B = qs[0], Hq = qs[1], Nq = qs[2], D = qs[3];
  int64_t Hkv = ks[1], Nk = ks[2], Dv = vs[3];
  if (ks[0] != B || vs[0] != B || vs[1] != Hkv || vs[2] != Nk || ks[3] != D)
    return dimError(*k, formatv("key {0} and value {1} must be [B, Hkv, Nk, "
                                "D] and [B, Hkv, Nk, Dv] with B and D from "
                                "the query {2}",
                                k->describe(), v->describe(), q->describe()));
  if (Hq == 0 || Hkv == 0 || Hq % Hkv != 0)
    return dimError(*k, formatv("query heads Hq = {0} must be a positive "
                                "multiple of key/value heads Hkv = {1}",
                                Hq, Hkv));
  if (D == 0 || Dv == 0)
    return dimError(*q, formatv("head dims must be positive, got D = {0} and "
                                "Dv = {1}",
                                D, Dv));
  for (Input *in : {&*o, &*dO})
    if (in->shape() != ArrayRef<int64_t>{B, Hq, Nq, Dv})
      return dimError(*in, formatv("expected [B, Hq, Nq, Dv] = ({0}, {1}, "
                                   "{2}, {3}) from the query and the value, "
                                   "got {4}",
                                   B, Hq, Nq, Dv, formatNpyShape(in->shape())));
  if (lse->shape() != ArrayRef<int64_t>{B, Hq, Nq})
    return dimError(*lse, formatv("expected the forward's log-sum-exp [B, Hq, "
                                  "Nq] = ({0}, {1}, {2}), got {3}",
                                  B, Hq, Nq, formatNpyShape(lse->shape())));
  if (aux->lens &&
      (aux->lens->array.getRank() != 1 || aux->lens->shape()[0] != B))
    return dimError(*aux->lens,
                    formatv("expected key lengths of shape ({0},) (B from the "
                            "query {1}), got {2}",
                            B, q->describe(),
                            formatNpyShape(aux->lens->shape())));
  if (Error err = checkAuxInputs(*q, *k, B, Hq, Nq, Nk, aux->mask, aux->alibi,
                                 aux->qSegments, aux->kSegments, mods))
    return err;

  // Outputs, poisoned.
  NpyArray dq(dtype, {B, Hq, Nq, D}), dk(dtype, {B, Hkv, Nk, D}),
      dv(dtype, {B, Hkv, Nk, Dv});
  for (NpyArray *a : {&dq, &dk, &dv})
    poison(*a);

  bool boolMask = aux->mask && aux->mask->array.getDType() == NpyDType::Bool;
  rt::KernelMetadata md;
  md.name = "attention_backward";
  md.symbol = "fa_kernel";
  md.generator = "fa-run";
  md.op = rt::OpKind::AttentionBackward;
  md.dtype = getKernelDType(dtype);
  md.headDim = D;
  md.valueHeadDim = Dv;
  md.heads = Hq;
  md.kvHeads = Hkv;
  md.causal = compile::toRuntimeCausal(*causal);
  md.scale = scale ? *scale : 1.0f / std::sqrt(static_cast<float>(D));
  md.mask = !aux->mask ? rt::MaskKind::None
            : boolMask ? rt::MaskKind::Bool
                       : rt::MaskKind::Additive;
  md.hasKvLens = aux->lens.has_value();
  md.hasLse = true;
  md.blockQ = blockQ;
  md.blockKV = blockKV;
  md.modifiers = mods;
  md.params = rt::getCanonicalParams(
      md, boolMask ? rt::DType::I8 : rt::DType::F32,
      /*maskBroadcastBatch=*/aux->mask && aux->mask->shape()[0] == 1,
      /*maskBroadcastHeads=*/aux->mask && aux->mask->shape()[1] == 1);
  if (std::optional<std::string> err = rt::verifyKernelSignature(md))
    return makeError("internal error: " + *err);

  Expected<OwningOpRef<ModuleOp>> module = buildKernel(ctx, md);
  if (!module)
    return module.takeError();
  auto arrayOf = [&](rt::ParamRole role) -> NpyArray * {
    switch (role) {
    case rt::ParamRole::Query:
      return &q->array;
    case rt::ParamRole::Key:
      return &k->array;
    case rt::ParamRole::Value:
      return &v->array;
    case rt::ParamRole::Output:
      return &o->array;
    case rt::ParamRole::Lse:
      return &lse->array;
    case rt::ParamRole::GradOutput:
      return &dO->array;
    case rt::ParamRole::KvLens:
      return &aux->lens->array;
    case rt::ParamRole::Mask:
      return &aux->mask->array;
    case rt::ParamRole::Alibi:
      return &aux->alibi->array;
    case rt::ParamRole::QSegments:
      return &aux->qSegments->array;
    case rt::ParamRole::KSegments:
      return &aux->kSegments->array;
    case rt::ParamRole::GradQuery:
      return &dq;
    case rt::ParamRole::GradKey:
      return &dk;
    case rt::ParamRole::GradValue:
      return &dv;
    default:
      return nullptr;
    }
  };
  llvm::SmallVector<MemRefDescriptor> descriptors;
  for (const rt::ParamInfo &param : md.params) {
    NpyArray *array = arrayOf(param.role);
    if (!array)
      return makeError("internal error: no array for parameter '" + param.name +
                       "'");
    descriptors.emplace_back(array->getData(), array->getShape());
  }
  double compileMs = 0, runMs = 0;
  std::string where = "cpu";
  if (emulate) {
    // The two SIMT kernels (dQ, then dK/dV) launched by the host function
    // under the interpreter, with its race, bounds and initialization
    // checks.
    auto start = std::chrono::steady_clock::now();
    EmulationMapOptions mapOptions;
    setEmulationMapOptions(mapOptions);
    mapOptions.dumpPath = dumpMappedPath;
    llvm::SourceMgr mappedMgr;
    std::string error;
    OwningOpRef<ModuleOp> mapped;
    if (!mappedPath.empty()) {
      mapped = parseSourceFile<ModuleOp>(mappedPath.getValue(), mappedMgr,
                                         ParserConfig(&ctx));
      if (!mapped)
        return makeError("--mapped: cannot parse '" + mappedPath + "'");
      if (!mapped->lookupSymbol<func::FuncOp>("fa_kernel"))
        return makeError("--mapped: '" + mappedPath +
                         "' has no host function @fa_kernel (write one with "
                         "--dump-mapped)");
    } else {
      mapped = mapForEmulation(**module, mapOptions, mappedMgr, error);
    }
    if (!mapped)
      return makeError("--device emulate: " + error);
    compileMs = millisecondsSince(start);
    llvm::SmallVector<EmulationBuffer> buffers;
    for (const rt::ParamInfo &param : md.params)
      buffers.push_back(makeEmulationBuffer(param.name, *arrayOf(param.role),
                                            isGradient(param.role)));
    InterpreterOptions options;
    options.checkRaces = true;
    EmulationLaunch launch;
    launch.function = "fa_kernel";
    start = std::chrono::steady_clock::now();
    if (failed(runEmulation(*mapped, launch, buffers, options, error)))
      return makeError("--device emulate: " + error);
    runMs = millisecondsSince(start);
    where = "emulate (SIMT interpreter, " +
            mapOptions.lowering.chip.getValue() + ", kernel simt)";
    // The file's kernels decide what ran; the flags only shaped the
    // arguments.
    if (!mappedPath.empty())
      where += ", mapped IR from " + mappedPath.getValue() +
               " (its options, not the flags')";
  } else if (cuda) {
    // The dQ and dK/dV kernels compiled for the device and launched by
    // fa_attention_backward_launch, as fa-compile's artifacts would be.
    std::vector<run::HostOperand> operands;
    for (const rt::ParamInfo &param : md.params)
      operands.push_back(
          makeHostOperand(*arrayOf(param.role), isGradient(param.role)));
    Expected<run::CudaRunResult> ran =
        run::runAttentionOnCuda(ctx, md, operands, getCudaRunOptions());
    if (!ran)
      return ran.takeError();
    // Gradients left poisoned (NaN) where no input holds a NaN or an
    // infinity are elements the kernels did not write.
    bool finiteInputs = true;
    for (const rt::ParamInfo &param : md.params) {
      NpyArray *array = arrayOf(param.role);
      if (!isGradient(param.role) && array->getDType() != NpyDType::Int32 &&
          array->getDType() != NpyDType::Bool && !allFinite(*array))
        finiteInputs = false;
    }
    int64_t missing = countNaNs(dq) + countNaNs(dk) + countNaNs(dv);
    if (finiteInputs && missing)
      return makeError(formatv(
          "--device cuda: the kernels left {0} of {1} gradient "
          "elements unwritten (still NaN) on {2}; no output written",
          missing,
          dq.getNumElements() + dk.getNumElements() + dv.getNumElements(),
          ran->device));
    compileMs = ran->compileMs;
    runMs = ran->runMs;
    where = describeCudaRun(*ran);
  } else if (Error err =
                 lowerAndRun(**module, pipelineText(blockQ, blockKV, 256),
                             descriptors, compileMs, runMs)) {
    return err;
  }
  if (Error err = writeOutputs(
          {{gradQueryPath, &dq}, {gradKeyPath, &dk}, {gradValuePath, &dv}}))
    return err;
  std::string summary =
      formatv("attention-backward {0} B={1} Hq={2} Hkv={3} Nq={4} Nk={5} "
              "D={6} Dv={7} causal={8} on {12} -> {9}, {10}, {11}",
              getFloatTypeName(dtype), B, Hq, Hkv, Nq, Nk, D, Dv,
              causalName.getValue(), gradQueryPath.getValue(),
              gradKeyPath.getValue(), gradValuePath.getValue(), where)
          .str();
  reportSuccess(summary, compileMs, runMs);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

/// Validates the softmax input, runs the kernel and writes the output.
static Error runSoftmax(MLIRContext &ctx) {
  if (Error err = checkCommonOptions())
    return err;
  if (inputPath.empty())
    return makeError("softmax needs --x (and -o)");
  if (softmaxTile <= 0)
    return makeError(
        formatv("--tile must be positive, got {0}", softmaxTile.getValue()));
  if (Error err = checkWritable(outputPath))
    return err;
  Expected<Device> device = resolveDevice("softmax");
  if (!device)
    return device.takeError();

  Expected<Input> x = loadFloatInput(inputPath);
  if (!x)
    return x.takeError();
  int64_t rank = x->array.getRank();
  if (rank == 0)
    return makeError(x->path + ": expected rank >= 1, got a 0-d array");
  int64_t dim = softmaxDim;
  if (dim < -rank || dim >= rank)
    return makeError(formatv("--dim {0} is out of range for {1} of rank {2} "
                             "(expected -{2} <= dim < {2})",
                             dim, x->describe(), rank));
  if (dim < 0)
    dim += rank;

  NpyArray out(x->array.getDType(), x->shape());
  poison(out);

  // The kernel: every dim dynamic.
  rt::KernelMetadata md;
  md.name = "softmax";
  md.symbol = "fa_kernel";
  md.generator = "fa-run";
  md.op = rt::OpKind::Softmax;
  md.dtype = getKernelDType(x->array.getDType());
  md.rank = rank;
  md.dimension = dim;
  md.params = rt::getCanonicalParams(md, rt::DType::I8,
                                     /*maskBroadcastBatch=*/false,
                                     /*maskBroadcastHeads=*/false);
  Expected<OwningOpRef<ModuleOp>> module = buildKernel(ctx, md);
  if (!module)
    return module.takeError();

  llvm::SmallVector<MemRefDescriptor> descriptors;
  descriptors.emplace_back(x->array.getData(), x->shape());
  descriptors.emplace_back(out.getData(), out.getShape());
  double compileMs = 0, runMs = 0;
  if (Error err = lowerAndRun(**module, pipelineText(64, 64, softmaxTile),
                              descriptors, compileMs, runMs))
    return err;
  if (Error err = writeOutputs({{outputPath, &out}}))
    return err;

  reportSuccess(formatv("softmax {0} {1} dim={2} on {3} -> {4}",
                        getFloatTypeName(x->array.getDType()),
                        formatNpyShape(x->shape()), dim, "cpu",
                        outputPath.getValue())
                    .str(),
                compileMs, runMs);
  return Error::success();
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mlir::fa::registerVersionPrinter("fa-run");
  cl::HideUnrelatedOptions(runCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "fa-run: compile an fa kernel for the shapes of .npy files and run it "
      "(CPU JIT, or --device cuda|auto through FARuntime)\n\n"
      "  fa-run attention --q Q.npy --k K.npy --v V.npy -o O.npy [options]\n"
      "  fa-run softmax --x X.npy -o Y.npy [options]\n"
      "  fa-run attention-backward --q Q.npy --k K.npy --v V.npy --out O.npy "
      "--lse LSE.npy --do DO.npy --dq DQ.npy --dk DK.npy --dv DV.npy "
      "[options]\n\n"
      "`fa-run <subcommand> --help` lists a subcommand's options.\n");

  if (!attentionCmd && !softmaxCmd && !backwardCmd) {
    llvm::errs() << "fa-run: error: expected a subcommand: 'attention', "
                    "'attention-backward' or 'softmax' (see fa-run --help)\n";
    return 1;
  }

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  registerAllPasses();
  MLIRContext ctx(registry);
  // Diagnostics name the kernel; a dump of the op adds noise, not help.
  ctx.printOpOnDiagnostic(false);
  // Only what the kernel builder creates; the passes load the rest.
  ctx.loadDialect<FADialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, func::FuncDialect,
                  linalg::LinalgDialect, tensor::TensorDialect>();
  ScopedDiagnosticHandler diagHandler(&ctx, printDiagnostic);

  Error err = attentionCmd  ? runAttention(ctx)
              : backwardCmd ? runAttentionBackward(ctx)
                            : runSoftmax(ctx);
  if (err) {
    llvm::errs() << "fa-run: error: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  return 0;
}
