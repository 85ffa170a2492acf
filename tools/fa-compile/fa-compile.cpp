//===- fa-compile.cpp - Ahead-of-time compiler for fa kernels -------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Compiles fa kernels ahead of time into artifacts the FARuntime library
// loads (docs/artifacts.md):
//
//   fa-compile --op attention --head-dim 128 --heads 8 --kv-heads 2
//              --dtype f16 --causal bottom-right [--mask none|bool|additive]
//              [--kv-lens] [--lse] [--scale S] --target cpu|sm_80|... -o DIR
//   fa-compile --op softmax --rank 3 --dim -1 --dtype f32 --target cpu -o DIR
//   fa-compile kernels.mlir --target cpu -o DIR
//
// Every option is validated before anything is compiled. The artifacts are
// written to a private temporary directory and moved into DIR only when all
// of them succeeded, so a failed run leaves no partial output.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Compiler.h"
#include "fa/Compiler/Cost.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/InitAll.h"
#include "fa/Target/Chips.h"
#include "fa/Support/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdint>
#include <optional>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::compile;
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

cl::OptionCategory compileCategory("fa-compile options");
cl::OptionCategory specCategory("Kernel spec (without an input file)");

cl::opt<std::string> inputPath(cl::Positional,
                               cl::desc("[input .mlir file]"),
                               cl::init(""), cl::cat(compileCategory));
cl::opt<std::string> outputDir("o",
                               cl::desc("Output directory (created if "
                                        "missing)"),
                               cl::value_desc("dir"),
                               cl::cat(compileCategory));
/// The chip names come from the chip table.
static const std::string kTargetHelp = "cpu, " + ::fa::target::getChipList();
cl::opt<std::string> targetName(
    "target", cl::desc(kTargetHelp),
    cl::value_desc("target"), cl::cat(compileCategory));
cl::opt<std::string> cpuName(
    "cpu",
    cl::desc("CPU target: host (default), generic, or an LLVM CPU name"),
    cl::value_desc("cpu"), cl::init("host"), cl::cat(compileCategory));
cl::opt<std::string> cpuBf16(
    "cpu-bf16",
    cl::desc("CPU target, bf16 inputs: dot (default: AVX512_BF16 dot "
             "products, P rounded to bf16, where the target CPU has "
             "avx512bf16) or f32 (the f32 FMA kernel, P in f32)"),
    cl::value_desc("dot|f32"), cl::init("dot"), cl::cat(compileCategory));
cl::opt<std::string> ccName(
    "cc", cl::desc("C compiler that links the CPU shared library (default: "
                   "cc from PATH)"),
    cl::value_desc("program"), cl::cat(compileCategory));
cl::opt<int64_t> blockQ("block-q", cl::desc("Query rows per tile"),
                        cl::value_desc("N"), cl::init(64),
                        cl::cat(compileCategory));
cl::opt<int64_t> blockKV("block-kv", cl::desc("Keys per key/value tile"),
                         cl::value_desc("N"), cl::init(64),
                         cl::cat(compileCategory));
cl::opt<std::string> kernelFamily(
    "kernel",
    cl::desc("GPU targets: the attention kernel family. auto (default): "
             "wgmma on sm_90a where eligible (f16/bf16, head dims multiples "
             "of 64), else mma.sync for f16/bf16 with head dims multiples "
             "of 16, else SIMT; simt, mma (mma.sync fed by ldmatrix, "
             "cp.async K/V pipeline) or wgmma (sm_90a warpgroup tensor "
             "cores) ask for one, and a kernel it cannot take is an error. "
             "attention-backward: mma.sync for f16/bf16 with head dims "
             "multiples of 16 up to 128, else SIMT (no wgmma)"),
    cl::value_desc("auto|simt|mma|wgmma"), cl::init("auto"),
    cl::cat(compileCategory));
cl::opt<bool> packGqa(
    "pack-gqa",
    cl::desc("GPU targets: a decode kernel with packed query heads (SIMT, "
             "or mma.sync for f16/bf16): each block runs the Hq/Hkv query "
             "heads of one kv head, so K and V are read once per kv head; "
             "the grid runs over (packed_q_tiles, kv_heads, batch); with "
             "Hq = Hkv it is the ordinary kernel. Not with --kernel wgmma"),
    cl::cat(compileCategory));
cl::opt<bool> splitKv(
    "split-kv",
    cl::desc("GPU targets: split-KV (flash-decoding, every kernel "
             "family): the keys of each (batch, head) run in Ns parts "
             "chosen at launch (fa_attention_num_splits), whose f32 "
             "partials go to a workspace (fa_attention_workspace_size) that "
             "a merge kernel in the same PTX combines; launch with "
             "fa_attention_launch_split / _paged_split. Not with --varlen"),
    cl::cat(compileCategory));
// Replaced by --kernel; given, they are an error naming it.
cl::opt<bool> removedTensorCores("tensor-cores", cl::Hidden,
                                 cl::cat(compileCategory));
cl::opt<bool> removedWgmma("wgmma", cl::Hidden, cl::cat(compileCategory));
cl::opt<int64_t> softmaxTile("softmax-tile",
                             cl::desc("Row elements per softmax tile"),
                             cl::value_desc("N"), cl::init(256),
                             cl::cat(compileCategory));
cl::opt<bool> emitMlir("emit-mlir",
                       cl::desc("Also write <name>.mlir, the kernel before "
                                "lowering (a template for input files)"),
                       cl::cat(compileCategory));
cl::opt<bool> quiet("quiet", cl::desc("Do not print what was written"),
                    cl::cat(compileCategory));
cl::opt<bool>
    report("report",
           cl::desc("Print each kernel's cost report to stdout: FLOPs, exps, "
                    "bytes, intensity, tiles; GPU: registers, shared memory, "
                    "occupancy and the roofline bound per chip (docs/cost.md)"),
           cl::cat(compileCategory));
cl::opt<std::string> reportSizes(
    "report-sizes",
    cl::desc("Sizes the cost is evaluated at, e.g. B=2,Nq=1,Nk=8192 "
             "(softmax: N0=..., ...); default B=1, Nq=Nk=4096"),
    cl::value_desc("S=N,..."), cl::cat(compileCategory));

cl::opt<std::string> opName("op",
                            cl::desc("attention, attention-backward or "
                                     "softmax"),
                            cl::value_desc("op"), cl::cat(specCategory));
cl::opt<std::string>
    kernelName("name",
               cl::desc("Artifact name, a C identifier (default: derived "
                        "from the spec)"),
               cl::value_desc("name"), cl::cat(specCategory));
cl::opt<std::string> dtypeName("dtype", cl::desc("f16, bf16 or f32"),
                               cl::value_desc("dtype"), cl::cat(specCategory));
cl::opt<int64_t> headDim("head-dim",
                         cl::desc("Q/K head dim D (a multiple of 8, <= 256)"),
                         cl::value_desc("D"), cl::cat(specCategory));
cl::opt<int64_t> valueHeadDim("value-head-dim",
                              cl::desc("V head dim Dv (default: D)"),
                              cl::value_desc("Dv"), cl::cat(specCategory));
cl::opt<int64_t> heads("heads", cl::desc("Query heads Hq"),
                       cl::value_desc("Hq"), cl::cat(specCategory));
cl::opt<int64_t> kvHeads("kv-heads",
                         cl::desc("Key/value heads Hkv (default: Hq)"),
                         cl::value_desc("Hkv"), cl::cat(specCategory));
cl::opt<std::string>
    causalName("causal",
               cl::desc("none (default), top-left (keep k <= q) or "
                        "bottom-right (keep k <= q + Nk - Nq)"),
               cl::value_desc("kind"), cl::init("none"),
               cl::cat(specCategory));
cl::opt<std::string> maskName(
    "mask",
    cl::desc("none (default), bool (one byte per element, nonzero = attend) "
             "or additive (f32, added to the scaled score)"),
    cl::value_desc("kind"), cl::init("none"), cl::cat(specCategory));
cl::opt<std::string> maskBroadcastName(
    "mask-broadcast",
    cl::desc("Mask dims of size 1: none (default, [B, Hq, Nq, Nk]), batch, "
             "heads or both"),
    cl::value_desc("dims"), cl::init("none"), cl::cat(specCategory));
cl::opt<bool> kvLens("kv-lens",
                     cl::desc("Take per-batch key lengths (i32 [B])"),
                     cl::cat(specCategory));
cl::opt<bool> lse("lse", cl::desc("Also write the log-sum-exp (f32 [B, Hq, "
                                  "Nq])"),
                  cl::cat(specCategory));
cl::opt<std::string> scaleText("scale",
                               cl::desc("Scale of Q K^T (default 1/sqrt(D))"),
                               cl::value_desc("S"), cl::cat(specCategory));
cl::opt<std::string>
    windowText("window",
               cl::desc("Sliding window L,R: keep keys q + off - L <= k <= "
                        "q + off + R (-1 = unbounded; FlashAttention 2's "
                        "definition)"),
               cl::value_desc("L,R"), cl::cat(specCategory));
cl::opt<std::string> softcapText("softcap",
                                 cl::desc("Tanh softcap: s = C tanh(s / C)"),
                                 cl::value_desc("C"), cl::cat(specCategory));
cl::opt<int64_t> chunkSize("chunk",
                           cl::desc("Chunked attention: keys in the query's "
                                    "chunk of C positions only"),
                           cl::value_desc("C"), cl::cat(specCategory));
cl::opt<std::string>
    alibiName("alibi",
              cl::desc("ALiBi slopes: none (default), heads (f32 [Hq]) or "
                       "batch-heads (f32 [B, Hq])"),
              cl::value_desc("kind"), cl::init("none"),
              cl::cat(specCategory));
cl::opt<bool> segments("segments",
                       cl::desc("Document masking: take query and key "
                                "segment ids (i32 [B, Nq], [B, Nk])"),
                       cl::cat(specCategory));
cl::opt<int64_t> pageSize(
    "page-size",
    cl::desc("Read K/V from a paged cache of S-row pages ([P, S, Hkv, D]) "
             "through a block table (i32 [B, M]); needs --kv-lens; cpu "
             "target"),
    cl::value_desc("S"), cl::cat(specCategory));
cl::opt<bool> varlen("varlen",
                     cl::desc("Token-major variable-length batch: Q [Tq, "
                              "Hq, D], K/V [Tk, Hkv, D], O [Tq, Hq, Dv], "
                              "LSE [Hq, Tq] and cu_seqlens_q/k (i32 [B+1]); "
                              "cpu target"),
                     cl::cat(specCategory));
cl::opt<int64_t> softmaxRank("rank", cl::desc("Softmax: rank (1 to 4)"),
                             cl::value_desc("R"), cl::cat(specCategory));
cl::opt<int64_t> softmaxDim("dim",
                            cl::desc("Softmax: dimension; negative counts "
                                     "from the end (default -1)"),
                            cl::value_desc("D"), cl::init(-1),
                            cl::cat(specCategory));

} // namespace

static Error makeError(const Twine &message) {
  return llvm::createStringError(message);
}

static bool isIdentifier(StringRef name) {
  return !name.empty() && !llvm::isDigit(name.front()) &&
         llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

/// Reports diagnostics as "fa-compile: error: <location>: <message>".
static LogicalResult printDiagnostic(Diagnostic &diag) {
  return compile::printToolDiagnostic("fa-compile", diag);
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

/// Checks the options every mode shares.
static Error checkCommonOptions(CompileOptions &options) {
  if (targetName.empty())
    return makeError("missing --target: cpu, " + ::fa::target::getChipList());
  if (targetName != "cpu" && !::fa::target::lookupChip(targetName))
    return makeError("unknown --target '" + targetName + "': expected cpu, " +
                     ::fa::target::getChipList());
  bool isCpu = targetName == "cpu";
  if (!isCpu && cpuName.getNumOccurrences())
    return makeError("--cpu applies to --target cpu only");
  if (!isCpu && ccName.getNumOccurrences())
    return makeError("--cc applies to --target cpu only");
  if (!isCpu && cpuBf16.getNumOccurrences())
    return makeError("--cpu-bf16 applies to --target cpu only");
  if (cpuBf16 != "dot" && cpuBf16 != "f32")
    return makeError("--cpu-bf16 must be dot or f32, got '" + cpuBf16 + "'");
  if (blockQ <= 0 || blockKV <= 0)
    return makeError(formatv("--block-q and --block-kv must be positive, got "
                             "{0} and {1}",
                             blockQ.getValue(), blockKV.getValue()));
  if (softmaxTile <= 0)
    return makeError(formatv("--softmax-tile must be positive, got {0}",
                             softmaxTile.getValue()));
  Expected<KernelChoice> parsedFamily =
      parseKernelFlag(kernelFamily, removedTensorCores.getNumOccurrences(),
                      removedWgmma.getNumOccurrences());
  if (!parsedFamily)
    return parsedFamily.takeError();
  KernelChoice family = *parsedFamily;
  if (isCpu && family)
    return makeError("--kernel " + kernelFamily +
                     " applies to GPU targets (sm_*) only");
  if (!isCpu && family == KernelFamily::Wgmma &&
      !::fa::target::lookupChip(targetName)->hasWgmma)
    return makeError("--kernel wgmma needs --target sm_90a (wgmma.mma_async "
                     "exists only on the sm_90a target), got '" +
                     targetName + "'");
  if (packGqa && isCpu)
    return makeError("--pack-gqa applies to GPU targets (sm_*) only; the CPU "
                     "kernels pack query heads by themselves when Nq is "
                     "small");
  if (packGqa && family == KernelFamily::Wgmma)
    return makeError("--pack-gqa makes a SIMT or mma.sync kernel; it cannot "
                     "be combined with --kernel wgmma");
  if (packGqa && varlen)
    return makeError("--pack-gqa cannot be combined with --varlen: the "
                     "variable-length kernel keeps one query head per block");
  if (splitKv && isCpu)
    return makeError("--split-kv applies to GPU targets (sm_*) only; the CPU "
                     "kernels split the keys across threads by themselves");
  if (splitKv && varlen)
    return makeError("--split-kv cannot be combined with --varlen yet: the "
                     "variable-length kernel does not split its keys");
  if (outputDir.empty())
    return makeError("missing the output directory: pass -o DIR");
  if (Error err = checkOutputDir(outputDir))
    return err;
  options.target = targetName;
  options.cpu = cpuName;
  options.cpuBf16 = cpuBf16;
  options.cc = ccName;
  options.blockQ = blockQ;
  options.blockKV = blockKV;
  options.kernel = family;
  options.packGqa = packGqa ? "always" : "auto";
  options.splitKv = splitKv;
  if (blockQ.getNumOccurrences())
    options.gpuBlockQ = blockQ;
  if (blockKV.getNumOccurrences())
    options.gpuBlockKV = blockKV;
  options.softmaxTile = softmaxTile;
  return Error::success();
}

/// The spec options given on the command line (for "cannot be combined"
/// errors).
static llvm::SmallVector<StringRef> getGivenOptions(
    llvm::ArrayRef<std::pair<StringRef, cl::Option *>> options) {
  llvm::SmallVector<StringRef> given;
  for (auto &[name, option] : options)
    if (option->getNumOccurrences())
      given.push_back(name);
  return given;
}

/// The name fa-compile picks when --name is not given, e.g.
/// attn_f16_d128_h8_kv2_causal_br_lse_cpu.
static std::string getDefaultName(const rt::KernelMetadata &md,
                                  StringRef target, StringRef maskBroadcast) {
  std::string name;
  llvm::raw_string_ostream os(name);
  if (md.op == rt::OpKind::Softmax) {
    os << "softmax_" << rt::getDTypeName(md.dtype) << "_r" << md.rank << "_d"
       << md.dimension;
  } else {
    os << (md.op == rt::OpKind::AttentionBackward ? "attn_bwd_" : "attn_")
       << rt::getDTypeName(md.dtype) << "_d" << md.headDim;
    if (md.valueHeadDim != md.headDim)
      os << "_dv" << md.valueHeadDim;
    os << "_h" << md.heads;
    if (md.kvHeads != md.heads)
      os << "_kv" << md.kvHeads;
    if (md.causal == rt::Causal::TopLeft)
      os << "_causal_tl";
    else if (md.causal == rt::Causal::BottomRight)
      os << "_causal_br";
    if (md.mask != rt::MaskKind::None) {
      os << (md.mask == rt::MaskKind::Bool ? "_bmask" : "_amask");
      if (maskBroadcast != "none")
        os << "_" << maskBroadcast;
    }
    if (md.hasKvLens)
      os << "_lens";
    if (md.hasLse && md.op != rt::OpKind::AttentionBackward)
      os << "_lse";
    const rt::ModifierInfo &mods = md.modifiers;
    if (mods.hasWindow())
      os << "_win" << (mods.windowLeft < 0 ? "inf" : std::to_string(mods.windowLeft))
         << "_" << (mods.windowRight < 0 ? "inf" : std::to_string(mods.windowRight));
    if (mods.softcap)
      os << "_softcap";
    if (mods.chunk > 0)
      os << "_chunk" << mods.chunk;
    if (mods.alibi != rt::AlibiKind::None)
      os << "_alibi";
    if (mods.segments)
      os << "_seg";
    if (md.pageSize > 0)
      os << "_paged" << md.pageSize;
    if (md.varlen)
      os << "_varlen";
  }
  if (splitKv)
    os << "_split";
  os << "_" << target;
  return name;
}

/// Builds the job described by the spec options.
static Expected<KernelJob> buildJobFromSpec(MLIRContext &ctx,
                                            const CompileOptions &options) {
  if (opName.empty())
    return makeError("missing --op attention|attention-backward|softmax (or "
                     "pass an input .mlir file)");
  std::optional<rt::OpKind> op =
      llvm::StringSwitch<std::optional<rt::OpKind>>(opName)
          .Case("attention", rt::OpKind::Attention)
          .Case("attention-backward", rt::OpKind::AttentionBackward)
          .Case("softmax", rt::OpKind::Softmax)
          .Default(std::nullopt);
  if (!op)
    return makeError("--op must be attention, attention-backward or softmax, "
                     "got '" +
                     opName + "'");
  if (dtypeName.empty())
    return makeError("missing --dtype f16|bf16|f32");
  std::optional<rt::DType> dtype = rt::parseDType(dtypeName);
  if (!dtype || *dtype == rt::DType::I32 || *dtype == rt::DType::I8)
    return makeError("--dtype must be f16, bf16 or f32, got '" + dtypeName +
                     "'");

  rt::KernelMetadata md;
  md.op = *op;
  md.dtype = *dtype;
  md.generator = "fa-compile";
  md.blockQ = options.blockQ;
  md.blockKV = options.blockKV;
  std::string maskBroadcast = "none";
  rt::DType maskDType = rt::DType::I8;
  bool broadcastBatch = false, broadcastHeads = false;

  if (*op == rt::OpKind::AttentionBackward) {
    // The forward's options describe the backward too; these are the
    // forward's own outputs or serving forms, which the op does not take.
    llvm::SmallVector<StringRef> misplaced = getGivenOptions(
        {{"--lse", &lse}, {"--page-size", &pageSize}, {"--varlen", &varlen}});
    if (!misplaced.empty())
      return makeError(llvm::join(misplaced, ", ") +
                       (misplaced.size() == 1 ? " does" : " do") +
                       " not apply to --op attention-backward (it always "
                       "reads the forward's lse; no paged or varlen form)");
  }
  if (*op != rt::OpKind::Softmax) {
    llvm::SmallVector<StringRef> misplaced =
        getGivenOptions({{"--rank", &softmaxRank}, {"--dim", &softmaxDim}});
    if (!misplaced.empty())
      return makeError(llvm::join(misplaced, " and ") +
                       (misplaced.size() == 1 ? " applies" : " apply") +
                       " to --op softmax only");
    if (!headDim.getNumOccurrences())
      return makeError("missing --head-dim (a multiple of 8 up to 256)");
    if (Error err = checkHeadDim("--head-dim", headDim))
      return std::move(err);
    md.headDim = headDim;
    md.valueHeadDim =
        valueHeadDim.getNumOccurrences() ? valueHeadDim.getValue() : headDim;
    if (Error err = checkHeadDim("--value-head-dim", md.valueHeadDim))
      return std::move(err);
    if (!heads.getNumOccurrences())
      return makeError("missing --heads (query heads Hq)");
    if (heads <= 0)
      return makeError(
          formatv("--heads must be positive, got {0}", heads.getValue()));
    md.heads = heads;
    md.kvHeads = kvHeads.getNumOccurrences() ? kvHeads.getValue() : md.heads;
    if (md.kvHeads <= 0)
      return makeError(
          formatv("--kv-heads must be positive, got {0}", md.kvHeads));
    if (md.heads % md.kvHeads != 0)
      return makeError(formatv("--heads {0} is not a multiple of --kv-heads "
                               "{1} (query head h reads kv head h / (Hq / "
                               "Hkv))",
                               md.heads, md.kvHeads));
    std::optional<CausalKind> causal = parseCausalKind(causalName);
    if (!causal)
      return makeError("--causal must be none, top-left or bottom-right, got "
                       "'" +
                       causalName + "'");
    md.causal = toRuntimeCausal(*causal);
    std::optional<rt::MaskKind> mask =
        llvm::StringSwitch<std::optional<rt::MaskKind>>(maskName)
            .Case("none", rt::MaskKind::None)
            .Case("bool", rt::MaskKind::Bool)
            .Case("additive", rt::MaskKind::Additive)
            .Default(std::nullopt);
    if (!mask)
      return makeError("--mask must be none, bool or additive, got '" +
                       maskName + "'");
    md.mask = *mask;
    maskDType = md.mask == rt::MaskKind::Bool ? rt::DType::I8 : rt::DType::F32;
    maskBroadcast = maskBroadcastName;
    if (!llvm::is_contained({"none", "batch", "heads", "both"},
                            StringRef(maskBroadcast)))
      return makeError("--mask-broadcast must be none, batch, heads or both, "
                       "got '" +
                       maskBroadcast + "'");
    if (maskBroadcast != "none" && md.mask == rt::MaskKind::None)
      return makeError("--mask-broadcast needs --mask bool or additive");
    broadcastBatch = maskBroadcast == "batch" || maskBroadcast == "both";
    broadcastHeads = maskBroadcast == "heads" || maskBroadcast == "both";
    md.hasKvLens = kvLens;
    md.hasLse = lse || *op == rt::OpKind::AttentionBackward;
    Expected<rt::ModifierInfo> mods = parseModifierFlags(
        compile::getGivenValue(windowText),
        compile::getGivenValue(softcapText),
        chunkSize.getNumOccurrences() ? std::optional<int64_t>(chunkSize)
                                      : std::nullopt,
        compile::getGivenValue(alibiName), segments);
    if (!mods)
      return mods.takeError();
    md.modifiers = *mods;
    md.scale = 1.0f / std::sqrt(static_cast<float>(md.headDim));
    if (scaleText.getNumOccurrences()) {
      double value = 0;
      if (StringRef(scaleText).trim().getAsDouble(value) ||
          !std::isfinite(value) || !std::isfinite(static_cast<float>(value)))
        return makeError("--scale must be a finite float32 number, got '" +
                         scaleText + "'");
      md.scale = static_cast<float>(value);
    }
    // The serving forms (docs/serving.md), with fa.attention's rules.
    if (pageSize.getNumOccurrences()) {
      if (pageSize <= 0 || pageSize > INT32_MAX)
        return makeError(formatv("--page-size must be in [1, 2^31 - 1], got "
                                 "{0}",
                                 pageSize.getValue()));
      if (!md.hasKvLens)
        return makeError("--page-size needs --kv-lens: the number of keys of "
                         "each sequence");
      if (md.modifiers.segments || varlen)
        return makeError("--page-size cannot be combined with --segments or "
                         "--varlen");
      md.pageSize = pageSize;
    }
    if (varlen) {
      if (md.hasKvLens || md.mask != rt::MaskKind::None ||
          md.modifiers.segments)
        return makeError("--varlen cannot be combined with --kv-lens, --mask "
                         "or --segments (each sequence's keys are its own)");
      md.varlen = true;
    }
  } else {
    llvm::SmallVector<StringRef> misplaced = getGivenOptions(
        {{"--head-dim", &headDim},
         {"--value-head-dim", &valueHeadDim},
         {"--heads", &heads},
         {"--kv-heads", &kvHeads},
         {"--causal", &causalName},
         {"--mask", &maskName},
         {"--mask-broadcast", &maskBroadcastName},
         {"--kv-lens", &kvLens},
         {"--lse", &lse},
         {"--scale", &scaleText},
         {"--window", &windowText},
         {"--softcap", &softcapText},
         {"--chunk", &chunkSize},
         {"--alibi", &alibiName},
         {"--segments", &segments},
         {"--page-size", &pageSize},
         {"--varlen", &varlen}});
    if (!misplaced.empty())
      return makeError(llvm::join(misplaced, ", ") +
                       (misplaced.size() == 1 ? " applies" : " apply") +
                       " to --op attention and attention-backward only");
    if (!softmaxRank.getNumOccurrences())
      return makeError("missing --rank (1 to 4)");
    if (softmaxRank < 1 || softmaxRank > 4)
      return makeError(formatv("--rank must be in [1, 4] (the runtime's "
                               "tensors have rank <= 4), got {0}",
                               softmaxRank.getValue()));
    md.rank = softmaxRank;
    int64_t dim = softmaxDim;
    if (dim < -md.rank || dim >= md.rank)
      return makeError(formatv("--dim {0} is out of range for rank {1} "
                               "(expected -{1} <= dim < {1})",
                               dim, md.rank));
    md.dimension = dim < 0 ? dim + md.rank : dim;
  }

  md.name = kernelName.getNumOccurrences()
                ? kernelName.getValue()
                : getDefaultName(md, options.target, maskBroadcast);
  if (!isIdentifier(md.name))
    return makeError("--name '" + md.name +
                     "' is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
  md.symbol = "fa_" + md.name;
  md.params = rt::getCanonicalParams(md, maskDType, broadcastBatch,
                                     broadcastHeads);
  if (std::optional<std::string> err = rt::verifyKernelSignature(md))
    return makeError("internal error: " + *err);

  KernelJob job;
  // The serving forms: the dense kernel, then its paged cache or offsets
  // (appended arguments, as getCanonicalParams orders them).
  rt::KernelMetadata dense = md;
  dense.pageSize = 0;
  dense.varlen = false;
  dense.params = rt::getCanonicalParams(dense, maskDType, broadcastBatch,
                                        broadcastHeads);
  job.module = buildKernelModule(ctx, dense);
  if (md.pageSize > 0)
    if (Error err = compile::attachBlockTable(*job.module, md.pageSize))
      return makeError("internal error: " + llvm::toString(std::move(err)));
  if (md.varlen)
    if (Error err = compile::attachCuSeqlens(*job.module))
      return makeError("internal error: " + llvm::toString(std::move(err)));
  job.metadata = std::move(md);
  if (failed(verify(*job.module)))
    return makeError("internal error: the kernel module does not verify");
  return job;
}

/// Reads the kernels of an input file.
static Expected<std::vector<KernelJob>>
buildJobsFromFile(MLIRContext &ctx, const CompileOptions &options) {
  llvm::SmallVector<StringRef> misplaced = getGivenOptions(
      {{"--op", &opName},
       {"--name", &kernelName},
       {"--dtype", &dtypeName},
       {"--head-dim", &headDim},
       {"--value-head-dim", &valueHeadDim},
       {"--heads", &heads},
       {"--kv-heads", &kvHeads},
       {"--causal", &causalName},
       {"--mask", &maskName},
       {"--mask-broadcast", &maskBroadcastName},
       {"--kv-lens", &kvLens},
       {"--lse", &lse},
       {"--scale", &scaleText},
       {"--window", &windowText},
       {"--softcap", &softcapText},
       {"--chunk", &chunkSize},
       {"--alibi", &alibiName},
       {"--segments", &segments},
       {"--page-size", &pageSize},
       {"--varlen", &varlen},
       {"--rank", &softmaxRank},
       {"--dim", &softmaxDim}});
  if (!misplaced.empty())
    return makeError(llvm::join(misplaced, ", ") +
                     " cannot be combined with an input file: the file "
                     "defines the kernels");
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(inputPath.getValue(), sourceMgr, &ctx);
  if (!module)
    return makeError("cannot parse '" + inputPath + "'");
  Expected<std::vector<KernelJob>> jobs = extractKernelJobs(*module, options);
  if (!jobs)
    return makeError(inputPath + ": " + llvm::toString(jobs.takeError()));
  if (jobs->empty())
    return makeError(inputPath +
                     ": no func.func holds an fa op; nothing to compile");
  for (KernelJob &job : *jobs) {
    if (failed(verify(*job.module)))
      return makeError(inputPath + ": func @" + job.metadata.name +
                       " does not verify on its own");
  }
  return jobs;
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

static Error run(MLIRContext &ctx) {
  CompileOptions options;
  if (Error err = checkCommonOptions(options))
    return err;

  std::vector<KernelJob> jobs;
  if (inputPath.empty()) {
    Expected<KernelJob> job = buildJobFromSpec(ctx, options);
    if (!job)
      return job.takeError();
    jobs.push_back(std::move(*job));
  } else {
    Expected<std::vector<KernelJob>> fileJobs =
        buildJobsFromFile(ctx, options);
    if (!fileJobs)
      return fileJobs.takeError();
    jobs = std::move(*fileJobs);
  }

  // --report-sizes names each kernel's sizes: checked before compiling.
  for (KernelJob &job : jobs)
    if (auto sizes = parseCostSizes(job.metadata, reportSizes); !sizes)
      return sizes.takeError();

  // The reports are printed once everything is written.
  std::string reportText;
  llvm::raw_string_ostream reportStream(reportText);
  options.reportSizes = reportSizes;
  if (report)
    options.reportStream = &reportStream;
  Expected<std::unique_ptr<ArtifactStage>> stage = ArtifactStage::create();
  if (!stage)
    return stage.takeError();
  for (KernelJob &job : jobs) {
    if (emitMlir)
      if (Error err = (*stage)->writeFile(
              job.metadata.name + ".mlir",
              [&](llvm::raw_ostream &os) { os << *job.module << "\n"; }))
        return err;
    Error err = options.target == "cpu"
                    ? emitCpuArtifacts(job, options, **stage)
                    : emitGpuArtifacts(job, options, **stage);
    if (err)
      return err;
  }
  if (Error err = (*stage)->commit(outputDir))
    return err;
  llvm::outs() << reportText;

  if (!quiet) {
    for (KernelJob &job : jobs) {
      llvm::SmallVector<StringRef> written;
      for (const std::string &file : (*stage)->getFiles())
        if (StringRef(file).starts_with(job.metadata.name + "."))
          written.push_back(file);
      llvm::errs() << "fa-compile: " << job.metadata.name << ": wrote "
                   << llvm::join(written, ", ") << " to " << outputDir
                   << "\n";
    }
  }
  return Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  mlir::fa::registerVersionPrinter("fa-compile");
  cl::HideUnrelatedOptions({&compileCategory, &specCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "fa-compile: compile fa kernels ahead of time into artifacts for the "
      "FARuntime launcher\n\n"
      "  fa-compile --op attention --head-dim 128 --heads 8 --kv-heads 2 "
      "--dtype f16 --target cpu -o DIR\n"
      "  fa-compile --op softmax --rank 2 --dim -1 --dtype f32 --target cpu "
      "-o DIR\n"
      "  fa-compile kernels.mlir --target cpu -o DIR\n\n"
      "Writes <name>.json (fa-kernel/3 metadata), <name>.h and, for the "
      "CPU, <name>.o and <name>.so. See docs/artifacts.md.\n");

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext ctx(registry);
  // Diagnostics name the kernel; a dump of the op adds noise, not help.
  ctx.printOpOnDiagnostic(false);
  ctx.loadAllAvailableDialects();
  ScopedDiagnosticHandler diagHandler(&ctx, printDiagnostic);

  if (Error err = run(ctx)) {
    llvm::errs() << "fa-compile: error: " << llvm::toString(std::move(err))
                 << "\n";
    return 1;
  }
  return 0;
}
