//===- fa-emulate.cpp - Run fa's GPU kernels on the CPU -------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Runs an attention kernel's final GPU IR (the gpu.module fa-map-to-gpu
// produces, just before NVVM lowering) under the SIMT interpreter of
// fa/Interpreter on .npy inputs:
//
//   fa-emulate K.mlir [--kernel F] --q Q.npy --k K.npy --v V.npy -o O.npy
//              [--lse LSE.npy] [--kv-lens L.npy] [--mask M.npy]
//              [--check-races] [--shuffle-order --seed N]
//
// K.mlir is either a kernel function over memrefs holding fa.attention (the
// form fa-run and fa-compile build; it is mapped here with
// fa-promote-shared + fa-map-to-gpu, or with --pipeline), or a module that
// is already mapped, in which case --arg-roles names the role of each
// argument of the host function. The host function runs under the
// interpreter too: its gpu.launch_func computes the grid from the memref
// descriptors of the inputs. With --grid (and --block, --dynamic-shared),
// --kernel names a gpu.func kernel of a mapped module that runs over that
// grid directly (--arg-roles then names its arguments).
//
// Outputs are poisoned with NaN first, every element must have been written
// by the kernel, and the files are written atomically, only when the run
// and every check succeeded.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Compiler.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Emulate/Emulate.h"
#include "fa/InitAll.h"
#include "fa/Interpreter/FloatBits.h"
#include "fa/Interpreter/Interpreter.h"
#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/Npy.h"
#include "fa/Target/Chips.h"
#include "fa/Support/Version.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

using namespace mlir;
using namespace mlir::fa;
namespace cl = llvm::cl;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

namespace {

cl::OptionCategory emulateCategory("fa-emulate options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<kernel.mlir>"),
                               cl::Required, cl::cat(emulateCategory));
cl::opt<std::string> kernelName(
    "func",
    cl::desc("The kernel function (a func.func holding fa.attention, or the "
             "host function launching the mapped kernel; with --grid, the "
             "gpu.func); default: the only such function"),
    cl::value_desc("name"), cl::cat(emulateCategory));
cl::opt<std::string> queryPath("q", cl::desc("Query [B, Hq, Nq, D]"),
                               cl::value_desc("file"),
                               cl::cat(emulateCategory));
cl::opt<std::string> keyPath("k", cl::desc("Key [B, Hkv, Nk, D]"),
                             cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> valuePath("v", cl::desc("Value [B, Hkv, Nk, Dv]"),
                               cl::value_desc("file"),
                               cl::cat(emulateCategory));
cl::opt<std::string> outputPath("o", cl::desc("Output O [B, Hq, Nq, Dv]"),
                                cl::value_desc("file"),
                                cl::cat(emulateCategory));
cl::opt<std::string> lsePath("lse",
                             cl::desc("Output LSE [B, Hq, Nq] (float32)"),
                             cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> kvLensPath("kv-lens", cl::desc("Key lengths [B] (int32)"),
                                cl::value_desc("file"),
                                cl::cat(emulateCategory));
cl::opt<std::string>
    maskPath("mask",
             cl::desc("Mask [B|1, Hq|1, Nq, Nk]: bool, or float for an "
                      "additive mask"),
             cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string>
    alibiPath("alibi", cl::desc("ALiBi slopes [Hq] or [B, Hq] (float32)"),
              cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string>
    qSegmentsPath("q-segments", cl::desc("Query segment ids [B, Nq] (int32)"),
                  cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string>
    kSegmentsPath("k-segments", cl::desc("Key segment ids [B, Nk] (int32)"),
                  cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> blockMaskPath(
    "block-mask",
    cl::desc("Block mask [B|1, Hq|1, ceil(Nq / TQ), ceil(Nk / TK)] (int8: 0 "
             "no key, 1 partial, 2 full) of a mask_mod, for the op's "
             "block_tiles(TQ, TK)"),
    cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> blockTablePath(
    "block-table",
    cl::desc("Block table [B, M] (int32) of a paged K/V cache: K and V are "
             "then pages [P, S, Hkv, D]"),
    cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> partialOutputPath(
    "partial-o",
    cl::desc("fa.merge kernels: the partial outputs [S, d..., Dv] (float32)"),
    cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> partialLsePath(
    "partial-lse",
    cl::desc("fa.merge kernels: the partial LSEs [S, d...] (float32)"),
    cl::value_desc("file"), cl::cat(emulateCategory));
cl::list<std::string> modOperandPaths(
    "mod-operand",
    cl::desc("A tensor the op's score_mod / mask_mod regions read (its "
             "mod_operands, in order); repeat for each"),
    cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> argRoles(
    "arg-roles",
    cl::desc("The role of each argument of the kernel function, in order, "
             "comma-separated from q, k, v, kv_lens, mask, o, lse, alibi, "
             "q_segments, k_segments, block_mask, mod (one per "
             "--mod-operand) (needed "
             "for an already-mapped module; default: traced from "
             "fa.attention)"),
    cl::value_desc("list"), cl::cat(emulateCategory));
cl::opt<std::string> pipelineText(
    "pipeline",
    cl::desc("The pass pipeline that maps the kernel function (default: "
             "fa-promote-shared with --block-q/--block-kv/--warps, "
             "fa-map-to-gpu, canonicalize, cse)"),
    cl::value_desc("pipeline"), cl::cat(emulateCategory));
cl::opt<int64_t> blockQ("block-q",
                        cl::desc("fa-promote-shared block-q (0: automatic)"),
                        cl::init(0), cl::cat(emulateCategory));
cl::opt<int64_t> blockKV("block-kv",
                         cl::desc("fa-promote-shared block-kv (0: automatic)"),
                         cl::init(0), cl::cat(emulateCategory));
cl::opt<int64_t> numWarps("warps", cl::desc("fa-promote-shared warps"),
                          cl::init(4), cl::cat(emulateCategory));
cl::opt<bool> checkRaces(
    "check-races",
    cl::desc("Report races: an element of workgroup memory read or written "
             "by one thread after another thread wrote it in the same "
             "barrier interval (or written after a thread of another warp "
             "read it), and global elements shared between blocks"),
    cl::cat(emulateCategory));
cl::opt<int64_t> dynamicSharedBase(
    "dynamic-shared-base",
    cl::desc("Shared-window address of dynamic shared memory (a positive "
             "multiple of 16; the default 0x410 is deliberately not "
             "1024-aligned, so kernels that need aligned tiles must align "
             "them at run time)"),
    cl::init(0x410), cl::cat(emulateCategory));
cl::opt<bool> noCheckUninit(
    "no-check-uninit",
    cl::desc("Do not report reads of workgroup memory the block has not "
             "written"),
    cl::cat(emulateCategory));
cl::opt<bool> shuffleOrder(
    "shuffle-order",
    cl::desc("Visit the threads of every memory op in a random order"),
    cl::cat(emulateCategory));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of --shuffle-order"), cl::init(0),
                       cl::cat(emulateCategory));
cl::opt<unsigned> maxReports("max-reports",
                             cl::desc("Print at most this many race and "
                                      "uninitialized-read reports"),
                             cl::init(10), cl::cat(emulateCategory));
cl::opt<std::string> dumpMapped(
    "dump-mapped",
    cl::desc("Write the mapped module here; diagnostics then point into "
             "this file"),
    cl::value_desc("file"), cl::cat(emulateCategory));
cl::opt<std::string> kernelFamily(
    "kernel",
    cl::desc("The attention kernel family to map to (fa-lower-to-nvvm's "
             "kernel option): auto (default: wgmma on sm_90a where eligible, "
             "else mma.sync for f16/bf16 where eligible, else SIMT), simt, "
             "mma or wgmma"),
    cl::value_desc("auto|simt|mma|wgmma"), cl::init("auto"),
    cl::cat(emulateCategory));
cl::opt<std::string> packGqa(
    "pack-gqa",
    cl::desc("Packed query heads of the SIMT kernel (fa-lower-to-nvvm's "
             "pack-gqa): auto (default: static Nq, when packing reads fewer "
             "K/V tiles), always or never"),
    cl::value_desc("auto|always|never"), cl::init("auto"),
    cl::cat(emulateCategory));
/// The chip names come from the chip table.
static const std::string kChipHelp =
    "The chip the mapping targets (" + ::fa::target::getChipList() +
    "; default sm_80, sm_90a with --kernel wgmma)";
cl::opt<std::string> chipName(
    "chip", cl::desc(kChipHelp),
    cl::value_desc("sm_XX"), cl::cat(emulateCategory));
// Replaced by --kernel; given, they are an error naming it.
cl::opt<bool> removedTensorCores("tensor-cores", cl::Hidden,
                                 cl::cat(emulateCategory));
cl::opt<bool> removedWgmma("wgmma", cl::Hidden, cl::cat(emulateCategory));
cl::list<int64_t> gridSizes(
    "grid",
    cl::desc("Run the gpu.func kernel named by --kernel over this grid "
             "(x[,y[,z]]) instead of a host function"),
    cl::CommaSeparated, cl::cat(emulateCategory));
cl::list<int64_t>
    blockSizes("block", cl::desc("With --grid: threads per block (x[,y[,z]])"),
               cl::CommaSeparated, cl::cat(emulateCategory));
cl::opt<int64_t> dynamicShared(
    "dynamic-shared",
    cl::desc("With --grid: bytes of dynamic shared memory per block"),
    cl::init(0), cl::cat(emulateCategory));
cl::opt<bool> printTimes("time",
                         cl::desc("Print times and counters (to stderr)"),
                         cl::cat(emulateCategory));

/// What a kernel function argument holds.
enum class Role {
  Q,
  K,
  V,
  KvLens,
  Mask,
  O,
  Lse,
  Alibi,
  QSegments,
  KSegments,
  BlockMask,
  /// One of the op's mod_operands; the k-th Mod argument (in argument
  /// order) is read from the k-th --mod-operand.
  Mod,
  /// fa.merge's partial outputs and LSEs.
  PartialO,
  PartialLse,
  /// A paged K/V cache's block table.
  BlockTable
};

StringRef roleName(Role r) {
  switch (r) {
  case Role::Q:
    return "q";
  case Role::K:
    return "k";
  case Role::V:
    return "v";
  case Role::KvLens:
    return "kv_lens";
  case Role::Mask:
    return "mask";
  case Role::O:
    return "o";
  case Role::Lse:
    return "lse";
  case Role::Alibi:
    return "alibi";
  case Role::QSegments:
    return "q_segments";
  case Role::KSegments:
    return "k_segments";
  case Role::BlockMask:
    return "block_mask";
  case Role::Mod:
    return "mod";
  case Role::PartialO:
    return "partial_o";
  case Role::PartialLse:
    return "partial_lse";
  case Role::BlockTable:
    return "block_table";
  }
  return "?";
}

/// The command-line flag of an input role (`kv-lens`, `q-segments`, ...).
std::string flagName(Role r) {
  std::string name = roleName(r).str();
  llvm::replace(name, '_', '-');
  return name;
}

/// The file an input or output role is read from or written to.
const std::string &rolePath(Role r) {
  switch (r) {
  case Role::Q:
    return queryPath;
  case Role::K:
    return keyPath;
  case Role::V:
    return valuePath;
  case Role::KvLens:
    return kvLensPath;
  case Role::Mask:
    return maskPath;
  case Role::O:
    return outputPath;
  case Role::Lse:
    return lsePath;
  case Role::Alibi:
    return alibiPath;
  case Role::QSegments:
    return qSegmentsPath;
  case Role::KSegments:
    return kSegmentsPath;
  case Role::BlockMask:
    return blockMaskPath;
  case Role::PartialO:
    return partialOutputPath;
  case Role::PartialLse:
    return partialLsePath;
  case Role::BlockTable:
    return blockTablePath;
  case Role::Mod:
    break;
  }
  llvm_unreachable("no single file for this role");
}

/// Prints a one-line error and returns the tool's exit code for it.
int fail(const Twine &message) {
  llvm::errs() << "fa-emulate: error: " << message << "\n";
  return 1;
}

//===----------------------------------------------------------------------===//
// The kernel function
//===----------------------------------------------------------------------===//

/// Follows `v` back through bufferization.to_tensor and single-input
/// destination-style ops (the i8 -> i1 mask conversion) to an argument of
/// `func`.
std::optional<unsigned> traceToArgument(Value v, func::FuncOp func) {
  for (int steps = 0; steps < 16; ++steps) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == func.getOperation())
        return arg.getArgNumber();
      return std::nullopt;
    }
    Operation *def = v.getDefiningOp();
    if (isa<bufferization::ToTensorOp>(def)) {
      v = def->getOperand(0);
      continue;
    }
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(def)) {
      if (dps.getNumDpsInputs() == 1) {
        v = dps.getDpsInputOperand(0)->get();
        continue;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

/// Marks in `roles` the argument of `func` each (operand, role) of `op`
/// comes from (null operands are skipped).
LogicalResult traceRoles(func::FuncOp func, StringRef op,
                         ArrayRef<std::pair<Value, Role>> operands,
                         SmallVectorImpl<std::optional<Role>> &roles,
                         std::string &error) {
  for (auto [value, role] : operands) {
    if (!value)
      continue;
    std::optional<unsigned> arg = traceToArgument(value, func);
    if (!arg) {
      error = ("cannot tell which argument of @" + func.getSymName() +
               " feeds the " + roleName(role) + " operand of " + op +
               "; pass --arg-roles")
                  .str();
      return failure();
    }
    roles[*arg] = role;
  }
  return success();
}

/// `roles` with every argument given one, or an error naming the first
/// argument that feeds no operand of `op`.
FailureOr<SmallVector<Role>>
completeRoles(func::FuncOp func, StringRef op,
              ArrayRef<std::optional<Role>> roles, std::string &error) {
  SmallVector<Role> result;
  for (auto [i, role] : llvm::enumerate(roles)) {
    if (!role) {
      error = formatv("argument {0} of @{1} feeds no operand of {2}; pass "
                      "--arg-roles",
                      i, func.getSymName(), op)
                  .str();
      return failure();
    }
    result.push_back(*role);
  }
  return result;
}

/// The roles of `func`'s arguments, from the fa.attention it holds.
FailureOr<SmallVector<Role>>
rolesFromAttention(func::FuncOp func, AttentionOp attn, std::string &error) {
  SmallVector<std::optional<Role>> roles(func.getNumArguments());
  std::pair<Value, Role> operands[] = {
      {attn.getQuery(), Role::Q},   {attn.getKey(), Role::K},
      {attn.getValue(), Role::V},   {attn.getKvLens(), Role::KvLens},
      {attn.getMask(), Role::Mask}, {attn.getOutput(), Role::O},
      {attn.getLse(), Role::Lse},   {attn.getAlibi(), Role::Alibi},
      {attn.getQSegments(), Role::QSegments},
      {attn.getKSegments(), Role::KSegments},
      {attn.getBlockMask(), Role::BlockMask},
      {attn.getBlockTable(), Role::BlockTable}};
  if (failed(traceRoles(func, "fa.attention", operands, roles, error)))
    return failure();
  // The mod_operands, in order, in increasing argument positions (the k-th
  // Mod argument reads the k-th --mod-operand).
  int64_t lastMod = -1;
  for (Value m : attn.getModOperands()) {
    std::optional<unsigned> arg = traceToArgument(m, func);
    if (!arg || static_cast<int64_t>(*arg) <= lastMod) {
      error = ("the mod_operands of fa.attention in @" + func.getSymName() +
               " must come from arguments in their order; pass --arg-roles")
                  .str();
      return failure();
    }
    roles[*arg] = Role::Mod;
    lastMod = *arg;
  }
  return completeRoles(func, "fa.attention", roles, error);
}

/// The roles of `func`'s arguments, from the fa.merge it holds.
FailureOr<SmallVector<Role>> rolesFromMerge(func::FuncOp func, MergeOp merge,
                                            std::string &error) {
  SmallVector<std::optional<Role>> roles(func.getNumArguments());
  std::pair<Value, Role> operands[] = {
      {merge.getPartialOutput(), Role::PartialO},
      {merge.getPartialLse(), Role::PartialLse},
      {merge.getOutput(), Role::O},
      {merge.getLse(), Role::Lse}};
  if (failed(traceRoles(func, "fa.merge", operands, roles, error)))
    return failure();
  return completeRoles(func, "fa.merge", roles, error);
}

FailureOr<SmallVector<Role>> parseRoles(StringRef text, std::string &error) {
  SmallVector<StringRef> parts;
  text.split(parts, ',');
  SmallVector<Role> roles;
  for (StringRef p : parts) {
    std::optional<Role> r = llvm::StringSwitch<std::optional<Role>>(p.trim())
                                .Case("q", Role::Q)
                                .Case("k", Role::K)
                                .Case("v", Role::V)
                                .Cases({"kv_lens", "kv-lens"}, Role::KvLens)
                                .Case("mask", Role::Mask)
                                .Case("o", Role::O)
                                .Case("lse", Role::Lse)
                                .Case("alibi", Role::Alibi)
                                .Cases({"q_segments", "q-segments"},
                                       Role::QSegments)
                                .Cases({"k_segments", "k-segments"},
                                       Role::KSegments)
                                .Cases({"block_mask", "block-mask"},
                                       Role::BlockMask)
                                .Case("mod", Role::Mod)
                                .Cases({"partial_o", "partial-o"},
                                       Role::PartialO)
                                .Cases({"partial_lse", "partial-lse"},
                                       Role::PartialLse)
                                .Cases({"block_table", "block-table"},
                                       Role::BlockTable)
                                .Default(std::nullopt);
    if (!r) {
      error = ("--arg-roles: unknown role '" + p.trim() +
               "' (expected q, k, v, kv_lens, mask, o, lse, alibi, "
               "q_segments, k_segments, block_mask, mod, partial_o, "
               "partial_lse or block_table)")
                  .str();
      return failure();
    }
    if (*r != Role::Mod && llvm::is_contained(roles, *r)) {
      error = ("--arg-roles: role '" + p.trim() + "' appears twice").str();
      return failure();
    }
    roles.push_back(*r);
  }
  return roles;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// The storage of one kernel argument: element bytes in the memref's element
/// type.
struct ArgBuffer {
  Role role;
  std::string file;
  MemRefType type;
  SmallVector<int64_t, 4> shape;
  std::vector<char> bytes;
};

size_t elementSize(Type t) {
  if (t.isIndex())
    return 8;
  unsigned bits = t.getIntOrFloatBitWidth();
  return bits == 1 ? 1 : bits / 8;
}

/// The .npy dtypes accepted for a memref element type.
SmallVector<NpyDType> acceptedDTypes(Type elt) {
  if (elt.isF16())
    return {NpyDType::Float16};
  if (elt.isF32() || elt.isBF16())
    return {NpyDType::Float32};
  if (elt.isInteger(32))
    return {NpyDType::Int32};
  if (elt.isInteger(1))
    return {NpyDType::Bool};
  if (elt.isInteger(8))
    return {NpyDType::Bool, NpyDType::Int8};
  return {};
}

/// Copies `array` into the element bytes of `type`'s element type (bf16 is
/// read from float32, rounded to nearest even).
std::vector<char> toElementBytes(const NpyArray &array, Type elt) {
  size_t n = static_cast<size_t>(array.getNumElements());
  if (elt.isBF16()) {
    std::vector<char> out(n * 2);
    ArrayRef<float> src = array.getElements<float>();
    for (size_t i = 0; i < n; ++i) {
      uint16_t b = doubleToBFloat16Bits(src[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
    return out;
  }
  const char *p = static_cast<const char *>(array.getData());
  return std::vector<char>(p, p + array.getNumBytes());
}

std::string formatShape(ArrayRef<int64_t> shape) {
  return formatNpyShape(shape);
}

/// Fills `buf` with NaN (floats) or a pattern (integers).
void poisonOutput(ArgBuffer &buf) {
  Type elt = buf.type.getElementType();
  size_t esize = elementSize(elt);
  size_t n = buf.bytes.size() / esize;
  for (size_t i = 0; i < n; ++i) {
    char *p = buf.bytes.data() + i * esize;
    if (elt.isF32()) {
      float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(p, &nan, 4);
    } else if (elt.isF16() || elt.isBF16()) {
      uint16_t nan = elt.isF16() ? 0x7E00 : 0x7FC0;
      std::memcpy(p, &nan, 2);
    } else {
      std::memset(p, 0xA5, esize);
    }
  }
}

/// Converts an output buffer to the .npy array written for it.
NpyArray toNpy(const ArgBuffer &buf) {
  Type elt = buf.type.getElementType();
  NpyDType dtype = acceptedDTypes(elt).front();
  NpyArray array(dtype, buf.shape);
  size_t n = static_cast<size_t>(array.getNumElements());
  if (elt.isBF16()) {
    MutableArrayRef<float> dst = array.getElements<float>();
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, buf.bytes.data() + 2 * i, 2);
      dst[i] = static_cast<float>(bfloat16BitsToDouble(b));
    }
  } else if (array.getNumBytes() > 0) {
    // An empty output (Nq = 0) has no bytes: its data() is null, which
    // memcpy may not be passed even for zero bytes.
    std::memcpy(array.getData(), buf.bytes.data(), array.getNumBytes());
  }
  return array;
}

//===----------------------------------------------------------------------===//
// Main flow
//===----------------------------------------------------------------------===//

int run(MLIRContext &ctx, llvm::SourceMgr &sourceMgr) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();

  llvm::Expected<KernelChoice> parsedChoice = compile::parseKernelFlag(
      kernelFamily, removedTensorCores.getNumOccurrences(),
      removedWgmma.getNumOccurrences(),
      "the kernel function is named with --func");
  // Checked here; the mapping parses the family again from the option.
  if (!parsedChoice)
    return fail(llvm::toString(parsedChoice.takeError()));

  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(inputPath.getValue(), sourceMgr, &ctx);
  if (!module)
    return fail("cannot parse '" + inputPath + "'");

  // A bare kernel over an explicit grid.
  const bool bare = gridSizes.getNumOccurrences() > 0;
  EmulationLaunch launch;
  if (bare) {
    auto dims = [](const cl::list<int64_t> &list, StringRef flag,
                   std::array<int64_t, 3> &out) -> bool {
      if (list.empty() || list.size() > 3) {
        fail(Twine(flag) + " takes 1 to 3 comma-separated sizes");
        return false;
      }
      out = {1, 1, 1};
      for (auto [i, v] : llvm::enumerate(list))
        out[i] = v;
      return true;
    };
    if (kernelName.empty())
      return fail("--grid: name the gpu.func kernel with --func");
    if (!dims(gridSizes, "--grid", launch.grid))
      return 1;
    if (!blockSizes.getNumOccurrences())
      return fail("--grid needs --block");
    if (!dims(blockSizes, "--block", launch.block))
      return 1;
    if (argRoles.empty())
      return fail("--grid: pass --arg-roles for the kernel's arguments");
    launch.bareKernel = true;
    launch.dynamicSharedBytes = dynamicShared;
  } else if (blockSizes.getNumOccurrences() ||
             dynamicShared.getNumOccurrences()) {
    return fail("--block and --dynamic-shared apply with --grid only");
  }

  // The kernel function.
  func::FuncOp func;
  Operation *kernel = nullptr;
  if (bare) {
    kernel = lookupKernel(*module, kernelName);
    if (!kernel)
      return fail(inputPath + ": no gpu.func kernel @" + kernelName);
  } else if (!kernelName.empty()) {
    func = module->lookupSymbol<func::FuncOp>(kernelName);
    if (!func)
      return fail(inputPath + ": no func.func @" + kernelName);
  } else {
    SmallVector<func::FuncOp> candidates;
    for (auto f : module->getOps<func::FuncOp>()) {
      bool hasKernel = false;
      f.walk([&](Operation *op) {
        if (isa<AttentionOp, MergeOp, gpu::LaunchFuncOp>(op))
          hasKernel = true;
      });
      if (hasKernel)
        candidates.push_back(f);
    }
    if (candidates.size() != 1)
      return fail(inputPath + ": " + Twine(candidates.size()) +
                  " functions hold fa.attention or fa.merge or launch a "
                  "kernel; name one "
                  "with --kernel");
    func = candidates.front();
  }
  std::string funcName = bare ? kernelName.getValue() : func.getSymName().str();
  unsigned numArgs = bare ? cast<FunctionOpInterface>(kernel).getNumArguments()
                          : func.getNumArguments();

  // The argument roles.
  SmallVector<AttentionOp> attentions;
  SmallVector<MergeOp> merges;
  if (func) {
    func.walk([&](AttentionOp op) { attentions.push_back(op); });
    func.walk([&](MergeOp op) { merges.push_back(op); });
  }
  SmallVector<Role> roles;
  std::string error;
  if (!argRoles.empty()) {
    FailureOr<SmallVector<Role>> parsed = parseRoles(argRoles, error);
    if (failed(parsed))
      return fail(error);
    roles = *parsed;
  } else if (attentions.size() == 1) {
    FailureOr<SmallVector<Role>> traced =
        rolesFromAttention(func, attentions.front(), error);
    if (failed(traced))
      return fail(inputPath + ": " + error);
    roles = *traced;
  } else if (merges.size() == 1 && attentions.empty()) {
    FailureOr<SmallVector<Role>> traced =
        rolesFromMerge(func, merges.front(), error);
    if (failed(traced))
      return fail(inputPath + ": " + error);
    roles = *traced;
  } else {
    return fail(inputPath + ": @" + funcName +
                (attentions.empty() ? " holds no fa.attention"
                                    : " holds several fa.attention ops") +
                "; pass --arg-roles");
  }
  if (roles.size() != numArgs)
    return fail(formatv("--arg-roles names {0} roles but @{1} has {2} "
                        "arguments",
                        roles.size(), funcName, numArgs)
                    .str());
  // A merge kernel (partials in, O and LSE out) or an attention kernel.
  const bool isMerge = llvm::is_contained(roles, Role::PartialO) ||
                       llvm::is_contained(roles, Role::PartialLse);
  SmallVector<Role> required = {Role::Q, Role::K, Role::V, Role::O};
  if (isMerge)
    required = {Role::PartialO, Role::PartialLse, Role::O};
  for (Role r : required)
    if (!llvm::is_contained(roles, r))
      return fail("@" + funcName + " has no " + roleName(r) + " argument");

  // Map to the GPU unless the module is mapped already.
  bool mapped = false;
  module->walk([&](gpu::GPUModuleOp) { mapped = true; });
  OwningOpRef<ModuleOp> kernelModule;
  llvm::SourceMgr mappedMgr;
  if (!bare && (!attentions.empty() || !merges.empty() || !mapped)) {
    EmulationMapOptions mapOptions;
    mapOptions.pipeline = pipelineText;
    mapOptions.lowering.blockQ = blockQ;
    mapOptions.lowering.blockKV = blockKV;
    mapOptions.lowering.warps = numWarps;
    mapOptions.lowering.kernel = kernelFamily.getValue();
    mapOptions.lowering.packGqa = packGqa.getValue();
    mapOptions.lowering.chip = chipName.getNumOccurrences()
                                   ? chipName.getValue()
                               : kernelFamily == "wgmma" ? "sm_90a"
                                                         : "sm_80";
    mapOptions.dumpPath = dumpMapped;
    kernelModule = mapForEmulation(*module, mapOptions, mappedMgr, error);
    if (!kernelModule)
      return fail(inputPath + ": @" + funcName + ": " + error);
  } else {
    if (!dumpMapped.empty())
      return fail("--dump-mapped: " + inputPath + " is mapped already");
    kernelModule = std::move(module);
  }
  SmallVector<Type> argTypes;
  if (bare) {
    kernel = lookupKernel(*kernelModule, kernelName);
    llvm::append_range(argTypes,
                       cast<FunctionOpInterface>(kernel).getArgumentTypes());
  } else {
    func::FuncOp host = kernelModule->lookupSymbol<func::FuncOp>(funcName);
    if (!host)
      return fail("the mapped module has no @" + funcName);
    llvm::append_range(argTypes, host.getArgumentTypes());
  }
  launch.function = funcName;
  auto t1 = Clock::now();

  // Inputs.
  std::optional<NpyArray> q, k, v, lens, mask, alibi, qSeg, kSeg, blockMask,
      partialO, partialLse, blockTable;
  auto load = [&](const std::string &path, Role role,
                  std::optional<NpyArray> &slot) -> bool {
    bool wanted = llvm::is_contained(roles, role);
    if (path.empty()) {
      if (wanted) {
        fail(formatv("@{0} takes {1}; pass --{2}", funcName, roleName(role),
                     flagName(role))
                 .str());
        return false;
      }
      return true;
    }
    if (!wanted) {
      fail(formatv("{0}: @{1} takes no {2}", path, funcName, roleName(role))
               .str());
      return false;
    }
    unsigned idx = llvm::find(roles, role) - roles.begin();
    auto type = dyn_cast<MemRefType>(argTypes[idx]);
    if (!type) {
      fail(
          formatv("argument {0} of @{1} is not a memref", idx, funcName).str());
      return false;
    }
    SmallVector<NpyDType> dtypes = acceptedDTypes(type.getElementType());
    if (dtypes.empty()) {
      fail(formatv("argument {0} of @{1} has unsupported type {2}", idx,
                   funcName, type)
               .str());
      return false;
    }
    llvm::Expected<NpyArray> array = readNpyFile(path, dtypes);
    if (!array) {
      fail(llvm::toString(array.takeError()));
      return false;
    }
    if (array->getRank() != type.getRank()) {
      fail(formatv("{0}: shape {1} has rank {2}; @{3} takes {4} as {5}", path,
                   formatShape(array->getShape()), array->getRank(), funcName,
                   roleName(role), type)
               .str());
      return false;
    }
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (!type.isDynamicDim(d) && type.getDimSize(d) != array->getShape()[d]) {
        fail(formatv("{0}: shape {1} does not match {2} (dim {3} must be {4})",
                     path, formatShape(array->getShape()), type, d,
                     type.getDimSize(d))
                 .str());
        return false;
      }
    slot.emplace(std::move(*array));
    return true;
  };
  if (!load(queryPath, Role::Q, q) || !load(keyPath, Role::K, k) ||
      !load(valuePath, Role::V, v) || !load(kvLensPath, Role::KvLens, lens) ||
      !load(maskPath, Role::Mask, mask) ||
      !load(alibiPath, Role::Alibi, alibi) ||
      !load(qSegmentsPath, Role::QSegments, qSeg) ||
      !load(kSegmentsPath, Role::KSegments, kSeg) ||
      !load(blockMaskPath, Role::BlockMask, blockMask) ||
      !load(partialOutputPath, Role::PartialO, partialO) ||
      !load(partialLsePath, Role::PartialLse, partialLse) ||
      !load(blockTablePath, Role::BlockTable, blockTable))
    return 1;
  // The mod_operands: one file per Mod argument, in argument order.
  SmallVector<NpyArray> modArrays;
  {
    SmallVector<unsigned> modArgs;
    for (auto [i, r] : llvm::enumerate(roles))
      if (r == Role::Mod)
        modArgs.push_back(i);
    if (modArgs.size() != modOperandPaths.size())
      return fail(formatv("@{0} takes {1} mod operand(s); --mod-operand "
                          "gives {2}",
                          funcName, modArgs.size(), modOperandPaths.size())
                      .str());
    for (auto [k, idx] : llvm::enumerate(modArgs)) {
      const std::string &path = modOperandPaths[k];
      auto type = dyn_cast<MemRefType>(argTypes[idx]);
      if (!type || acceptedDTypes(type.getElementType()).empty())
        return fail(formatv("argument {0} of @{1} (a mod operand) has "
                            "unsupported type {2}",
                            idx, funcName, argTypes[idx])
                        .str());
      llvm::Expected<NpyArray> array =
          readNpyFile(path, acceptedDTypes(type.getElementType()));
      if (!array)
        return fail(llvm::toString(array.takeError()));
      bool ok = array->getRank() == type.getRank();
      for (int64_t d = 0; ok && d < type.getRank(); ++d)
        ok = type.isDynamicDim(d) ||
             type.getDimSize(d) == array->getShape()[d];
      if (!ok)
        return fail(formatv("{0}: shape {1} does not match {2}, mod operand "
                            "#{3} of @{4}",
                            path, formatShape(array->getShape()), type, k,
                            funcName)
                        .str());
      modArrays.push_back(std::move(*array));
    }
  }
  if (outputPath.empty())
    return fail("-o is required");
  if (!lsePath.empty() && !llvm::is_contained(roles, Role::Lse))
    return fail(lsePath + ": @" + funcName + " produces no lse");

  // The shapes of O and LSE, from the inputs.
  SmallVector<int64_t> oShape, lseShape;
  if (isMerge) {
    // [S, d..., Dv] and [S, d...]: O is [d..., Dv], LSE [d...].
    ArrayRef<int64_t> ps = partialO->getShape(), ls = partialLse->getShape();
    if (ps.size() < 2 || ls.size() != ps.size() - 1 ||
        !std::equal(ls.begin(), ls.end(), ps.begin()))
      return fail(formatv("{0}: shape {1} does not match the partial outputs "
                          "{2}; expected [S, d...] for [S, d..., Dv]",
                          partialLsePath, formatShape(ls), formatShape(ps))
                      .str());
    oShape.assign(ps.begin() + 1, ps.end());
    lseShape.assign(ls.begin() + 1, ls.end());
  } else {
    // Consistency of the shapes: [B, Hq, Nq, D], [B, Hkv, Nk, D], [B, Hkv,
    // Nk, Dv], [B], [B|1, Hq|1, Nq, Nk].
    ArrayRef<int64_t> qs = q->getShape(), ks = k->getShape(), vs = v->getShape();
    if (qs.size() != 4)
      return fail(queryPath + ": expected [B, Hq, Nq, D], got shape " +
                  formatShape(qs));
    auto mismatch = [&](const std::string &path, ArrayRef<int64_t> shape,
                        StringRef expected) {
      return fail(formatv("{0}: shape {1} does not match the query {2}; "
                          "expected {3}",
                          path, formatShape(shape), formatShape(qs), expected)
                      .str());
    };
    int64_t B = qs[0], Hq = qs[1], Nq = qs[2], D = qs[3];
    int64_t Hkv = 0, Nk = 0;
    if (blockTable) {
      // Pages [P, S, Hkv, D] / [P, S, Hkv, Dv] read through [B, M]: the
      // sequences have Nk = M S keys.
      ArrayRef<int64_t> ts = blockTable->getShape();
      if (ts.size() != 2 || ts[0] != B)
        return mismatch(blockTablePath, ts, "[B, M]");
      if (ks.size() != 4 || ks[3] != D || ks[2] == 0 || Hq % ks[2] != 0)
        return mismatch(keyPath, ks,
                        "pages [P, S, Hkv, D] with Hq % Hkv == 0");
      Hkv = ks[2];
      Nk = ts[1] * ks[1];
      if (vs.size() != 4 || vs[0] != ks[0] || vs[1] != ks[1] ||
          vs[2] != Hkv)
        return mismatch(valuePath, vs, "pages [P, S, Hkv, Dv] matching the "
                                       "key pages");
    } else {
      if (ks.size() != 4 || ks[0] != B || ks[3] != D || ks[1] == 0 ||
          Hq % ks[1] != 0)
        return mismatch(keyPath, ks, "[B, Hkv, Nk, D] with Hq % Hkv == 0");
      Hkv = ks[1];
      Nk = ks[2];
      if (vs.size() != 4 || vs[0] != B || vs[1] != Hkv || vs[2] != Nk)
        return mismatch(valuePath, vs, "[B, Hkv, Nk, Dv] matching the key");
    }
    if (lens && (lens->getRank() != 1 || lens->getShape()[0] != B))
      return mismatch(kvLensPath, lens->getShape(), "[B]");
    if (mask) {
      ArrayRef<int64_t> ms = mask->getShape();
      if (ms.size() != 4 || (ms[0] != B && ms[0] != 1) ||
          (ms[1] != Hq && ms[1] != 1) || ms[2] != Nq || ms[3] != Nk)
        return mismatch(maskPath, ms, "[B|1, Hq|1, Nq, Nk]");
    }
    if (alibi) {
      ArrayRef<int64_t> as = alibi->getShape();
      if (!((as.size() == 1 && as[0] == Hq) ||
            (as.size() == 2 && as[0] == B && as[1] == Hq)))
        return mismatch(alibiPath, as, "[Hq] or [B, Hq]");
    }
    if (qSeg && (qSeg->getRank() != 2 || qSeg->getShape()[0] != B ||
                 qSeg->getShape()[1] != Nq))
      return mismatch(qSegmentsPath, qSeg->getShape(), "[B, Nq]");
    if (kSeg && (kSeg->getRank() != 2 || kSeg->getShape()[0] != B ||
                 kSeg->getShape()[1] != Nk))
      return mismatch(kSegmentsPath, kSeg->getShape(), "[B, Nk]");
    if (blockMask) {
      ArrayRef<int64_t> bs = blockMask->getShape();
      if (bs.size() != 4 || (bs[0] != B && bs[0] != 1) ||
          (bs[1] != Hq && bs[1] != 1))
        return mismatch(blockMaskPath, bs,
                        "[B|1, Hq|1, query tiles, key tiles]");
    }
    int64_t Dv = vs[3];
    oShape = {B, Hq, Nq, Dv};
    lseShape = {B, Hq, Nq};
  }

  // Argument buffers in the function's order.
  std::vector<ArgBuffer> buffers(roles.size());
  unsigned nextMod = 0;
  for (auto [i, role] : llvm::enumerate(roles)) {
    ArgBuffer &buf = buffers[i];
    buf.role = role;
    buf.type = cast<MemRefType>(argTypes[i]);
    Type elt = buf.type.getElementType();
    if (role == Role::Mod) {
      const NpyArray &array = modArrays[nextMod];
      buf.file = modOperandPaths[nextMod++];
      buf.shape.assign(array.getShape().begin(), array.getShape().end());
      buf.bytes = toElementBytes(array, elt);
      continue;
    }
    std::optional<NpyArray> *input = role == Role::Q           ? &q
                                     : role == Role::K         ? &k
                                     : role == Role::V         ? &v
                                     : role == Role::KvLens    ? &lens
                                     : role == Role::Mask      ? &mask
                                     : role == Role::Alibi     ? &alibi
                                     : role == Role::QSegments ? &qSeg
                                     : role == Role::KSegments ? &kSeg
                                     : role == Role::BlockMask ? &blockMask
                                     : role == Role::PartialO  ? &partialO
                                     : role == Role::PartialLse
                                         ? &partialLse
                                     : role == Role::BlockTable ? &blockTable
                                                                : nullptr;
    if (input) {
      buf.file = rolePath(role);
      buf.shape.assign((*input)->getShape().begin(),
                       (*input)->getShape().end());
      buf.bytes = toElementBytes(**input, elt);
      continue;
    }
    if (role == Role::O) {
      buf.file = outputPath;
      buf.shape.assign(oShape.begin(), oShape.end());
    } else {
      buf.file = lsePath;
      buf.shape.assign(lseShape.begin(), lseShape.end());
    }
    if (static_cast<int64_t>(buf.shape.size()) != buf.type.getRank())
      return fail(formatv("the {0} argument of @{1} is {2}; expected rank {3}",
                          roleName(role), funcName, buf.type, buf.shape.size())
                      .str());
    for (int64_t d = 0; d < buf.type.getRank(); ++d)
      if (!buf.type.isDynamicDim(d) && buf.type.getDimSize(d) != buf.shape[d])
        return fail(formatv("the {0} argument of @{1} is {2}, but the inputs "
                            "give it shape {3}",
                            roleName(role), funcName, buf.type,
                            formatShape(buf.shape))
                        .str());
    if (acceptedDTypes(elt).empty() || (role == Role::Lse && !elt.isF32()))
      return fail(formatv("the {0} argument of @{1} has unsupported type {2}",
                          roleName(role), funcName, buf.type)
                      .str());
    int64_t n = 1;
    for (int64_t s : buf.shape)
      n *= s;
    buf.bytes.assign(static_cast<size_t>(n) * elementSize(elt), 0);
    poisonOutput(buf);
  }

  SmallVector<EmulationBuffer> args;
  for (ArgBuffer &buf : buffers) {
    EmulationBuffer m;
    m.name = buf.role == Role::Q     ? "Q"
             : buf.role == Role::K   ? "K"
             : buf.role == Role::V   ? "V"
             : buf.role == Role::O   ? "O"
             : buf.role == Role::Lse ? "LSE"
                                     : roleName(buf.role).str();
    m.data = buf.bytes.data();
    m.shape = buf.shape;
    m.isOutput = buf.role == Role::O || buf.role == Role::Lse;
    args.push_back(std::move(m));
  }

  // Run.
  InterpreterOptions options;
  options.checkRaces = checkRaces;
  options.checkUninitializedShared = !noCheckUninit;
  options.shuffleMemoryOrder = shuffleOrder;
  options.seed = seed;
  options.maxReports = maxReports;
  options.dynamicSharedBase = dynamicSharedBase;
  auto t2 = Clock::now();
  InterpreterStats stats;
  LogicalResult result =
      runEmulation(*kernelModule, launch, args, options, error, &stats);
  auto t3 = Clock::now();
  if (printTimes) {
    auto secs = [](auto a, auto b) {
      return std::chrono::duration<double>(b - a).count();
    };
    llvm::errs() << formatv(
        "fa-emulate: parse+map {0:f3}s, run {1:f3}s: {2} launches, {3} "
        "blocks, {4} ops, {5} thread-ops, {6} barriers\n",
        secs(t0, t1), secs(t2, t3), stats.launches, stats.blocks, stats.ops,
        stats.threadOps, stats.barriers);
  }
  if (failed(result))
    return fail(error);

  for (ArgBuffer &buf : buffers) {
    bool isOutput = buf.role == Role::O || buf.role == Role::Lse;
    if (!isOutput || buf.file.empty())
      continue;
    if (llvm::Expected<WrittenOutput> written =
            writeNpyFile(buf.file, toNpy(buf));
        !written)
      return fail(llvm::toString(written.takeError()));
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  mlir::fa::registerVersionPrinter("fa-emulate");
  registerAllPasses();
  cl::HideUnrelatedOptions(emulateCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "fa-emulate: run an attention kernel's GPU IR on the CPU under fa's "
      "SIMT interpreter\n\n"
      "  fa-emulate K.mlir [--kernel F] --q Q.npy --k K.npy --v V.npy "
      "-o O.npy\n"
      "             [--lse LSE.npy] [--kv-lens L.npy] [--mask M.npy] "
      "[--check-races]\n"
      "             [--alibi S.npy] [--q-segments QS.npy --k-segments "
      "KS.npy]\n\n"
      "Layout [B, H, N, D], C order. f16 kernels take float16 files, f32 "
      "and bf16 kernels float32 files (bf16 is rounded to nearest even and "
      "written back as float32); key lengths int32, boolean masks bool.\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Locations point into the mapped text; the generic-form dump of the op
  // adds nothing.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &ctx);
  return run(ctx, sourceMgr);
}
