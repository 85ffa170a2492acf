//===- Artifacts.cpp - Atomic output and metadata for fa-compile ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Compiler.h"
#include "fa/Compiler/Cost.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir::fa::compile;
namespace rt = ::fa::runtime;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// ArtifactStage
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<ArtifactStage>> ArtifactStage::create() {
  llvm::SmallString<256> dir;
  if (std::error_code ec = fs::createUniqueDirectory("fa-compile", dir))
    return llvm::createStringError("cannot create a temporary directory: " +
                                   ec.message());
  std::unique_ptr<ArtifactStage> stage(new ArtifactStage());
  stage->dir = std::string(dir);
  return std::move(stage);
}

ArtifactStage::~ArtifactStage() {
  if (!dir.empty())
    (void)fs::remove_directories(dir);
}

std::string ArtifactStage::getPath(StringRef fileName) const {
  llvm::SmallString<256> p(dir);
  path::append(p, fileName);
  return std::string(p);
}

Error ArtifactStage::writeFile(
    StringRef fileName, llvm::function_ref<void(llvm::raw_ostream &)> write) {
  std::string p = getPath(fileName);
  std::error_code ec;
  llvm::raw_fd_ostream os(p, ec, fs::OF_Text);
  if (ec)
    return llvm::createStringError("cannot write '" + p + "': " + ec.message());
  write(os);
  os.close();
  if (os.has_error()) {
    std::error_code writeError = os.error();
    os.clear_error();
    return llvm::createStringError("cannot write '" + p +
                                   "': " + writeError.message());
  }
  addFile(fileName);
  return Error::success();
}

Error mlir::fa::compile::checkOutputDir(StringRef outDir) {
  if (outDir.empty())
    return llvm::createStringError("missing the output directory: pass -o DIR");
  llvm::SmallString<256> dir(outDir);
  // The directory itself, or its nearest existing ancestor, must be a
  // writable directory.
  llvm::SmallString<256> probe(dir);
  while (!probe.empty() && !fs::exists(probe))
    path::remove_filename(probe);
  if (probe.empty())
    probe = ".";
  if (!fs::is_directory(probe)) {
    if (probe == dir)
      return llvm::createStringError("cannot write to '" + outDir +
                                     "': it exists and is not a directory");
    return llvm::createStringError("cannot create the output directory '" +
                                   outDir + "': '" + probe +
                                   "' is not a directory");
  }
  if (fs::access(probe, fs::AccessMode::Write))
    return llvm::createStringError("cannot write to '" + outDir +
                                   "': directory '" + probe +
                                   "' is not writable");
  return Error::success();
}

Error ArtifactStage::commit(StringRef outDir) {
  if (Error err = checkOutputDir(outDir))
    return err;
  if (std::error_code ec = fs::create_directories(outDir))
    return llvm::createStringError("cannot create the output directory '" +
                                   outDir + "': " + ec.message());
  llvm::SmallVector<std::string> committed;
  auto rollback = [&] {
    for (const std::string &file : committed)
      (void)fs::remove(file);
  };
  int pid = static_cast<int>(llvm::sys::Process::getProcessId());
  for (const std::string &file : files) {
    llvm::SmallString<256> target(outDir), temp(outDir);
    path::append(target, file);
    path::append(temp, formatv(".{0}.tmp{1}", file, pid).str());
    std::string source = getPath(file);
    // Copy next to the target (the stage may be on another file system),
    // then rename into place so readers never see a half-written file.
    std::error_code ec = fs::copy_file(source, temp);
    if (!ec) {
      if (llvm::ErrorOr<fs::perms> perms = fs::getPermissions(source))
        (void)fs::setPermissions(temp, *perms);
      ec = fs::rename(temp, target);
    }
    if (ec) {
      (void)fs::remove(temp);
      rollback();
      return llvm::createStringError("cannot write '" + target +
                                     "': " + ec.message());
    }
    committed.push_back(std::string(target));
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Metadata and summaries
//===----------------------------------------------------------------------===//

Error mlir::fa::compile::writeMetadataFile(
    const rt::KernelMetadata &md, ArtifactStage &stage,
    const CompileOptions &options, llvm::ArrayRef<EntryResources> entries) {
  // What we write must be what the runtime reads.
  if (std::optional<std::string> err = rt::verifyKernelMetadata(md))
    return llvm::createStringError(
        "internal error: inconsistent metadata for '" + md.name + "': " + *err);
  auto sizes = parseCostSizes(md, options.reportSizes);
  if (!sizes)
    return sizes.takeError();
  llvm::Expected<KernelCost> cost = estimateKernelCost(md, entries, *sizes);
  if (!cost)
    return cost.takeError();
  if (options.reportStream)
    printCostReport(*cost, *options.reportStream);
  std::string costText;
  llvm::raw_string_ostream(costText)
      << llvm::json::Value(llvm::json::Object{{"cost", toJson(*cost)}});
  return stage.writeFile(md.name + ".json", [&](llvm::raw_ostream &os) {
    os << rt::serializeKernelMetadata(md, costText);
  });
}

static std::string formatShape(const rt::ParamInfo &param) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(param.shape))
    text += (i ? ", " : "") +
            (dim.isSymbol() ? dim.symbol : std::to_string(dim.size));
  return text + "]";
}

void mlir::fa::compile::printKernelSummary(const rt::KernelMetadata &md,
                                           llvm::raw_ostream &os,
                                           StringRef prefix) {
  if (rt::isAttentionOp(md.op)) {
    if (md.op == rt::OpKind::AttentionBackward)
      os << prefix
         << formatv("attention backward, {0}: dQ, dK, dV of O = softmax("
                    "scale * Q K^T + masks) V from the forward's O and LSE "
                    "(launch with fa_attention_backward_launch)",
                    rt::getDTypeName(md.dtype))
         << "\n";
    else
      os << prefix
         << formatv("attention, {0}: O = softmax(scale * Q K^T + masks) V",
                    rt::getDTypeName(md.dtype))
         << "\n";
    os << prefix
       << formatv("  D = {0}, Dv = {1}, Hq = {2}, Hkv = {3} (query head h "
                  "reads kv head h / {4})",
                  md.headDim, md.valueHeadDim, md.heads, md.kvHeads,
                  md.heads / md.kvHeads)
       << "\n";
    os << prefix
       << formatv("  causal {0}, scale {1}, mask {2}, kv_lens {3}, lse {4}",
                  rt::getCausalName(md.causal),
                  llvm::format("%.9g", md.scale),
                  rt::getMaskKindName(md.mask), md.hasKvLens ? "yes" : "no",
                  md.hasLse ? "yes" : "no")
       << "\n";
    const rt::ModifierInfo &mods = md.modifiers;
    if (mods.any()) {
      std::string text;
      llvm::raw_string_ostream ms(text);
      if (mods.hasWindow())
        ms << formatv(" window({0}, {1})", mods.windowLeft, mods.windowRight);
      if (mods.softcap)
        ms << " softcap(" << llvm::format("%.9g", *mods.softcap) << ")";
      if (mods.chunk > 0)
        ms << " chunk(" << mods.chunk << ")";
      if (mods.alibi != rt::AlibiKind::None)
        ms << " alibi(" << rt::getAlibiKindName(mods.alibi) << ")";
      if (mods.segments)
        ms << " segments";
      if (mods.scoreMod)
        ms << " score_mod";
      if (mods.maskMod)
        ms << " mask_mod";
      if (mods.hasBlockMask())
        ms << formatv(" block_mask({0}, {1})", mods.blockTileQ,
                      mods.blockTileKV);
      os << prefix << "  modifiers:" << text << "\n";
    }
    if (md.pageSize > 0)
      os << prefix
         << formatv("  paged K/V cache: pages of S = {0} rows, read through "
                    "block_table (launch with fa_attention_launch_paged)",
                    md.pageSize)
         << "\n";
    if (md.varlen)
      os << prefix
         << "  variable-length batch: token-major tensors, sequence b in "
            "rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1 (launch with "
            "fa_attention_launch_varlen)\n";
    if (md.splitKv)
      os << prefix
         << "  split-KV: the keys in Ns parts (a launch-time choice), f32 "
            "partials in a workspace (partial_o, partial_lse: "
            "fa_attention_workspace_size), merged by a second kernel "
            "(launch with fa_attention_launch_split)\n";
    os << prefix
       << formatv("  tiles: block_q = {0}, block_kv = {1}", md.blockQ,
                  md.blockKV)
       << "\n";
  } else {
    os << prefix
       << formatv("softmax, {0}, rank {1}, along dimension {2}",
                  rt::getDTypeName(md.dtype), md.rank, md.dimension)
       << "\n";
  }
  os << prefix << "Parameters, in call order:\n";
  for (const rt::ParamInfo &param : md.params)
    os << prefix
       << formatv("  {0,-8} {1,-5} {2,-20} {3}", param.name,
                  rt::getDTypeName(param.dtype), formatShape(param),
                  rt::getRoleName(param.role))
       << "\n";
  if (rt::isAttentionOp(md.op))
    os << prefix
       << (md.varlen ? "Tq, Tk and B+1 (sequences + 1) are free; Hq, Hkv, D "
                       "and Dv are fixed"
           : md.pageSize > 0
               ? "B, Nq, P and M are free (Nk = M x S); S, Hq, Hkv, D and Dv "
                 "are fixed"
               : "B, Nq and Nk are free; Hq, Hkv, D and Dv are fixed")
       << (md.splitKv ? "; Ns is the launch's parts" : "")
       << (md.mask != rt::MaskKind::None ? "; a fixed 1 in the mask broadcasts"
                                         : "")
       << ".\n";
  else
    os << prefix << "Every dim is free; x and y have the same shape.\n";
}

llvm::LogicalResult
mlir::fa::compile::printToolDiagnostic(StringRef tool, mlir::Diagnostic &diag) {
  llvm::raw_ostream &os = llvm::errs();
  os << tool << ": ";
  switch (diag.getSeverity()) {
  case mlir::DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  }
  Location loc = diag.getLocation();
  if (auto fileLoc = dyn_cast<FileLineColLoc>(loc))
    os << fileLoc.getFilename().getValue() << ":" << fileLoc.getLine() << ":"
       << fileLoc.getColumn() << ": ";
  else if (!isa<UnknownLoc>(loc))
    os << loc << ": ";
  os << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    (void)printToolDiagnostic(tool, note);
  return success();
}

Expected<rt::ModifierInfo> mlir::fa::compile::parseModifierFlags(
    std::optional<StringRef> window, std::optional<StringRef> softcap,
    std::optional<int64_t> chunk, std::optional<StringRef> alibi,
    bool segments) {
  constexpr int64_t kMaxPosition = (int64_t(1) << 31) - 1;
  rt::ModifierInfo mods;
  if (window) {
    auto [l, r] = window->split(',');
    if (l.trim().getAsInteger(10, mods.windowLeft) ||
        r.trim().getAsInteger(10, mods.windowRight) || mods.windowLeft < -1 ||
        mods.windowRight < -1 || mods.windowLeft > kMaxPosition ||
        mods.windowRight > kMaxPosition)
      return llvm::createStringError(
          "--window must be L,R with integers in [-1, 2^31 - 1] (-1 = "
          "unbounded), got '" +
          *window + "'");
  }
  if (softcap) {
    double cap = 0;
    if (softcap->trim().getAsDouble(cap) || !(cap > 0) ||
        !std::isfinite(static_cast<float>(cap)) ||
        static_cast<float>(cap) < std::numeric_limits<float>::min())
      return llvm::createStringError(
          "--softcap must be a positive, finite float32 number, got '" +
          *softcap + "'");
    mods.softcap = static_cast<float>(cap);
  }
  if (chunk) {
    if (*chunk <= 0 || *chunk > kMaxPosition)
      return llvm::createStringError(
          formatv("--chunk must be in [1, 2^31 - 1], got {0}", *chunk).str());
    mods.chunk = *chunk;
  }
  if (alibi) {
    std::optional<rt::AlibiKind> kind =
        llvm::StringSwitch<std::optional<rt::AlibiKind>>(alibi->trim())
            .Case("none", rt::AlibiKind::None)
            .Case("heads", rt::AlibiKind::Heads)
            .Cases({"batch_heads", "batch-heads"}, rt::AlibiKind::BatchHeads)
            .Default(std::nullopt);
    if (!kind)
      return llvm::createStringError(
          "--alibi must be none, heads ([Hq] slopes) or batch-heads ([B, Hq] "
          "slopes), got '" +
          *alibi + "'");
    mods.alibi = *kind;
  }
  mods.segments = segments;
  return mods;
}
