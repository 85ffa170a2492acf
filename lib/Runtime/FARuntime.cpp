//===- FARuntime.cpp - C API of the fa kernel launcher --------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The C entry points: loading (metadata, then a backend), argument
// validation shared by both backends, and the per-thread error message.
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/InputChecks.h"

#include "RuntimeInternal.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>

using namespace fa::runtime;

Backend::~Backend() = default;

//===----------------------------------------------------------------------===//
// Error state
//===----------------------------------------------------------------------===//

namespace {
thread_local std::string lastError;
} // namespace

static fa_status succeed() {
  lastError.clear();
  return FA_SUCCESS;
}

static fa_status fail(fa_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

static fa_status fail(const Failure &failure) {
  return fail(failure.status, failure.message);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

struct fa_kernel {
  KernelMetadata metadata;
  std::string path;
  fa_device device = FA_DEVICE_CPU;
  std::unique_ptr<Backend> backend;
};

extern "C" const char *fa_status_name(fa_status status) {
  switch (status) {
  case FA_SUCCESS:
    return "FA_SUCCESS";
  case FA_ERROR_NO_DRIVER:
    return "FA_ERROR_NO_DRIVER";
  case FA_ERROR_NO_DEVICE:
    return "FA_ERROR_NO_DEVICE";
  case FA_ERROR_UNSUPPORTED_ARCH:
    return "FA_ERROR_UNSUPPORTED_ARCH";
  case FA_ERROR_PTX_TOO_NEW:
    return "FA_ERROR_PTX_TOO_NEW";
  case FA_ERROR_INVALID_ARTIFACT:
    return "FA_ERROR_INVALID_ARTIFACT";
  case FA_ERROR_INVALID_ARGUMENT:
    return "FA_ERROR_INVALID_ARGUMENT";
  case FA_ERROR_IO:
    return "FA_ERROR_IO";
  case FA_ERROR_CUDA:
    return "FA_ERROR_CUDA";
  case FA_ERROR_LAUNCH:
    return "FA_ERROR_LAUNCH";
  }
  return "FA_ERROR_UNKNOWN";
}

extern "C" const char *fa_last_error(void) { return lastError.c_str(); }

extern "C" fa_tensor fa_tensor_make(void *data, fa_dtype dtype, int32_t rank,
                                    const int64_t *sizes) {
  fa_tensor t;
  std::memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  if (rank < 0 || rank > FA_MAX_RANK || (rank > 0 && !sizes))
    return t; // rejected by the launch with a message
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; --i) {
    t.sizes[i] = sizes[i];
    t.strides[i] = stride;
    stride *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return t;
}

extern "C" fa_status fa_cuda_available(int *deviceCount) {
  int count = 0;
  MaybeFailure failure = getCudaDeviceCount(count);
  if (deviceCount)
    *deviceCount = failure ? 0 : count;
  if (failure)
    return fail(*failure);
  return succeed();
}

static fa_status loadKernel(const char *metadataPath, fa_device device,
                            fa_kernel **out) {
  if (!out)
    return fail(FA_ERROR_INVALID_ARGUMENT, "fa_kernel_load: out is NULL");
  *out = nullptr;
  if (!metadataPath)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_load: metadata_path is NULL");
  if (device != FA_DEVICE_CPU && device != FA_DEVICE_CUDA)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat("fa_kernel_load: unknown device ", static_cast<int>(device),
                    " (expected FA_DEVICE_CPU or FA_DEVICE_CUDA)"));

  std::string path = metadataPath;
  Result<std::string> text = readArtifactFile(path, "metadata");
  if (!text)
    return fail(text.getFailure());
  std::string error;
  std::optional<KernelMetadata> metadata = parseKernelMetadata(*text, error);
  if (!metadata)
    return fail(FA_ERROR_INVALID_ARTIFACT, path + ": " + error);

  bool isCuda = metadata->target.kind == TargetKind::Cuda;
  if (isCuda != (device == FA_DEVICE_CUDA))
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(path, ": kernel '", metadata->name, "' targets ",
                    isCuda ? "cuda" : "the cpu", " (",
                    isCuda ? metadata->target.chip : metadata->target.triple,
                    "), but ",
                    device == FA_DEVICE_CUDA ? "FA_DEVICE_CUDA"
                                             : "FA_DEVICE_CPU",
                    " was requested"));

  std::string dir = getAbsoluteDirectory(path);
  Result<std::unique_ptr<Backend>> backend =
      isCuda ? loadCudaBackend(*metadata, dir) : loadCpuBackend(*metadata, dir);
  if (!backend)
    return fail(prefixed(backend.getFailure(),
                         "kernel '" + metadata->name + "': "));

  // The binary matched the fields; the hash written with them must too
  // (an edited `signature` field, or fields changed that the binary's
  // text does not cover).
  std::string hash = getKernelSignatureHash(*metadata);
  if (metadata->signature != hash)
    return fail(FA_ERROR_INVALID_ARTIFACT,
                cat(path, ": field 'signature': '", metadata->signature,
                    "', but the fields give ", hash,
                    " (the metadata was edited after fa-compile wrote it; "
                    "recompile the kernel)"));

  auto *kernel = new fa_kernel;
  kernel->metadata = std::move(*metadata);
  kernel->path = path;
  kernel->device = device;
  kernel->backend = std::move(*backend);
  *out = kernel;
  return succeed();
}

extern "C" fa_status fa_kernel_load(const char *metadataPath, fa_device device,
                                    fa_kernel **out) {
  // No exception leaves the C API: parseKernelMetadata catches the JSON
  // library's own; this catches what is left (std::bad_alloc).
  try {
    return loadKernel(metadataPath, device, out);
  } catch (const std::exception &e) {
    return fail(FA_ERROR_INVALID_ARTIFACT,
                cat("fa_kernel_load: ", metadataPath ? metadataPath : "NULL",
                    ": ", e.what()));
  }
}

extern "C" void fa_kernel_destroy(fa_kernel *kernel) { delete kernel; }

static fa_dtype toCDType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return FA_DTYPE_F32;
  case DType::F16:
    return FA_DTYPE_F16;
  case DType::BF16:
    return FA_DTYPE_BF16;
  case DType::I32:
    return FA_DTYPE_I32;
  case DType::I8:
    return FA_DTYPE_I8;
  }
  return FA_DTYPE_F32;
}

extern "C" fa_status fa_kernel_get_info(const fa_kernel *kernel,
                                        fa_kernel_info *info) {
  if (!kernel || !info)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_get_info: kernel or info is NULL");
  const KernelMetadata &md = kernel->metadata;
  std::memset(info, 0, sizeof(*info));
  info->name = md.name.c_str();
  info->symbol = md.symbol.c_str();
  info->target = md.target.kind == TargetKind::Cuda ? md.target.chip.c_str()
                                                    : md.target.triple.c_str();
  info->op = md.op == OpKind::Attention ? FA_OP_ATTENTION
             : md.op == OpKind::Softmax ? FA_OP_SOFTMAX
                                        : FA_OP_ATTENTION_BACKWARD;
  info->device = kernel->device;
  info->dtype = toCDType(md.dtype);
  if (isAttentionOp(md.op)) {
    info->head_dim = static_cast<int32_t>(md.headDim);
    info->value_head_dim = static_cast<int32_t>(md.valueHeadDim);
    info->heads = static_cast<int32_t>(md.heads);
    info->kv_heads = static_cast<int32_t>(md.kvHeads);
    info->causal = md.causal == Causal::None      ? FA_CAUSAL_NONE
                   : md.causal == Causal::TopLeft ? FA_CAUSAL_TOP_LEFT
                                                  : FA_CAUSAL_BOTTOM_RIGHT;
    info->mask = md.mask == MaskKind::None   ? FA_MASK_NONE
                 : md.mask == MaskKind::Bool ? FA_MASK_BOOL
                                             : FA_MASK_ADDITIVE;
    info->has_kv_lens = md.hasKvLens;
    info->has_lse = md.hasLse;
    info->scale = static_cast<float>(md.scale);
    info->block_q = static_cast<int32_t>(md.blockQ);
    info->block_kv = static_cast<int32_t>(md.blockKV);
  } else {
    info->rank = static_cast<int32_t>(md.rank);
    info->dimension = static_cast<int32_t>(md.dimension);
  }
  return succeed();
}

extern "C" fa_status fa_kernel_get_modifiers(const fa_kernel *kernel,
                                             fa_attention_modifiers *mods) {
  if (!kernel || !mods)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_get_modifiers: kernel or mods is NULL");
  const ModifierInfo &m = kernel->metadata.modifiers;
  std::memset(mods, 0, sizeof(*mods));
  mods->window_left = m.windowLeft;
  mods->window_right = m.windowRight;
  mods->softcap = m.softcap.value_or(0.0);
  mods->chunk = m.chunk;
  mods->alibi = m.alibi == AlibiKind::None    ? 0
                : m.alibi == AlibiKind::Heads ? 1
                                              : 2;
  mods->has_segments = m.segments;
  return succeed();
}

extern "C" fa_status fa_kernel_get_regions(const fa_kernel *kernel,
                                           fa_attention_regions *regions) {
  if (!kernel || !regions)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_get_regions: kernel or regions is NULL");
  const KernelMetadata &md = kernel->metadata;
  std::memset(regions, 0, sizeof(*regions));
  regions->has_score_mod = md.modifiers.scoreMod;
  regions->has_mask_mod = md.modifiers.maskMod;
  for (const ParamInfo &param : md.params)
    regions->num_mod_operands += param.role == ParamRole::ModOperand;
  return succeed();
}

//===----------------------------------------------------------------------===//
// Argument validation
//===----------------------------------------------------------------------===//

static std::optional<DType> fromCDType(int32_t dtype) {
  switch (dtype) {
  case FA_DTYPE_F32:
    return DType::F32;
  case FA_DTYPE_F16:
    return DType::F16;
  case FA_DTYPE_BF16:
    return DType::BF16;
  case FA_DTYPE_I32:
    return DType::I32;
  case FA_DTYPE_I8:
  case FA_DTYPE_BOOL:
    return DType::I8;
  default:
    return std::nullopt;
  }
}

/// "[2, 8, 128, 64]" (the first `rank` sizes; rank is clamped).
static std::string formatSizes(const fa_tensor &t) {
  std::string text = "[";
  int32_t rank = std::min<int32_t>(std::max<int32_t>(t.rank, 0), FA_MAX_RANK);
  for (int32_t i = 0; i < rank; ++i)
    text += (i ? ", " : "") + std::to_string(t.sizes[i]);
  return text + "]";
}

static std::string formatStrides(const int64_t *strides, int64_t rank) {
  std::string text = "[";
  for (int64_t i = 0; i < rank; ++i)
    text += (i ? ", " : "") + std::to_string(strides[i]);
  return text + "]";
}

static std::string formatShape(const ParamInfo &param) {
  std::string text = "[";
  for (size_t i = 0; i < param.shape.size(); ++i) {
    const ShapeDim &dim = param.shape[i];
    text += (i ? ", " : "") +
            (dim.isSymbol() ? dim.symbol : std::to_string(dim.size));
  }
  return text + "]";
}

namespace {

/// The tensor passed for each role of a launch (null when not given); the
/// mod operands appear once each, in order, as ModOperand entries.
using TensorList = std::vector<std::pair<ParamRole, const fa_tensor *>>;

/// Validates the tensors of one launch against a kernel's metadata.
class ArgumentBinder {
public:
  /// `function`: the launch function (named in hints); `split`: the
  /// split-KV workspace of the _split launches, else null.
  ArgumentBinder(const KernelMetadata &md, const char *function,
                 const fa_split_kv *split)
      : md(md), function(function), split(split) {}

  /// Binds the tensors to the metadata's params.
  MaybeFailure bind(const TensorList &tensors, LaunchArgs &args);

  /// True when the launch has no output element to compute.
  bool isEmpty() const { return empty; }

private:
  static Failure error(std::string message) {
    return makeFailure(FA_ERROR_INVALID_ARGUMENT, std::move(message));
  }

  static const fa_tensor *lookup(const TensorList &tensors, ParamRole role,
                                 size_t nth = 0) {
    for (auto &[r, t] : tensors)
      if (r == role && nth-- == 0)
        return t;
    return nullptr;
  }

  /// The tensor of params[i] (the k-th ModOperand param takes the k-th
  /// ModOperand entry).
  const fa_tensor *lookupParam(const TensorList &tensors, size_t i) const {
    ParamRole role = md.params[i].role;
    size_t nth = 0;
    if (role == ParamRole::ModOperand)
      for (size_t j = 0; j < i; ++j)
        nth += md.params[j].role == ParamRole::ModOperand;
    return lookup(tensors, role, nth);
  }

  size_t symbolIndex(std::string_view symbol) const {
    return std::find(symbolNames.begin(), symbolNames.end(), symbol) -
           symbolNames.begin();
  }

  MaybeFailure checkBasics(const ParamInfo &param, const fa_tensor &t);
  MaybeFailure checkDims(const ParamInfo &param, const fa_tensor &t);
  MaybeFailure checkLayout(const ParamInfo &param, const fa_tensor &t,
                           BoundParam &bound);
  /// Binds the workspace params (PartialOutput, PartialLse) from `split`.
  MaybeFailure bindWorkspace(LaunchArgs &args);

  static bool isWorkspace(ParamRole role) {
    return role == ParamRole::PartialOutput || role == ParamRole::PartialLse;
  }
  /// Whether the kernel writes `role`'s param: O, LSE and the workspace of
  /// the forward; dQ, dK, dV of the backward (whose O and LSE are inputs).
  static bool isWritten(OpKind op, ParamRole role) {
    if (op == OpKind::AttentionBackward)
      return role == ParamRole::GradQuery || role == ParamRole::GradKey ||
             role == ParamRole::GradValue;
    return role == ParamRole::Output || role == ParamRole::Lse ||
           isWorkspace(role);
  }

  const KernelMetadata &md;
  const char *function;
  const fa_split_kv *split;
  std::vector<std::string> symbolNames;
  std::vector<int64_t> symbolValues;
  /// For each symbol, the param that bound it (for messages).
  std::vector<std::string> symbolSources;
  bool empty = false;
};

} // namespace

MaybeFailure ArgumentBinder::checkBasics(const ParamInfo &param,
                                         const fa_tensor &t) {
  std::optional<DType> dtype = fromCDType(t.dtype);
  if (!dtype)
    return error(cat(param.name, ": unknown dtype ", t.dtype,
                     " (expected an fa_dtype)"));
  if (*dtype != param.dtype) {
    if (param.dtype == DType::I8 && param.role == ParamRole::BlockMask)
      return error(cat(param.name, ": dtype ", getDTypeName(*dtype),
                       ", but kernel '", md.name,
                       "' takes a block mask of one byte per tile pair "
                       "(FA_DTYPE_I8)"));
    if (param.dtype == DType::I8)
      return error(cat(param.name, ": dtype ", getDTypeName(*dtype),
                       ", but kernel '", md.name,
                       "' takes a bool mask of one byte per element "
                       "(FA_DTYPE_BOOL or FA_DTYPE_I8)"));
    return error(cat(param.name, ": dtype ", getDTypeName(*dtype),
                     ", but kernel '", md.name, "' takes ",
                     getDTypeName(param.dtype)));
  }
  if (t.rank != param.getRank())
    return error(cat(param.name, ": rank ", t.rank, ", but kernel '", md.name,
                     "' takes rank ", param.getRank(), " ",
                     formatShape(param)));
  for (int64_t i = 0; i < param.getRank(); ++i)
    if (t.sizes[i] < 0)
      return error(cat(param.name, " ", formatSizes(t), ": dim ", i,
                       " is negative"));
  return std::nullopt;
}

MaybeFailure ArgumentBinder::checkDims(const ParamInfo &param,
                                       const fa_tensor &t) {
  for (size_t i = 0; i < param.shape.size(); ++i) {
    const ShapeDim &dim = param.shape[i];
    int64_t actual = t.sizes[i];
    if (!dim.isSymbol()) {
      if (actual != dim.size)
        return error(cat(param.name, " ", formatSizes(t), ": dim ", i, " is ",
                         actual, ", but kernel '", md.name,
                         "' was compiled for a fixed size ", dim.size,
                         " there ", formatShape(param)));
      continue;
    }
    size_t index = symbolIndex(dim.symbol);
    if (index >= symbolNames.size())
      return error(cat(param.name, ": unknown shape symbol '", dim.symbol,
                       "'"));
    int64_t expected = symbolValues[index];
    if (actual == expected)
      continue;
    if (symbolSources[index].empty())
      return error(cat(param.name, " ", formatSizes(t), ": dim ", i, " (",
                       dim.symbol, ") is ", actual, ", but kernel '", md.name,
                       "' was compiled for ", dim.symbol, " = ", expected));
    return error(cat(param.name, " ", formatSizes(t), ": dim ", i, " (",
                     dim.symbol, ") is ", actual, ", but ",
                     symbolSources[index], " has ", dim.symbol, " = ",
                     expected));
  }
  return std::nullopt;
}

MaybeFailure ArgumentBinder::checkLayout(const ParamInfo &param,
                                         const fa_tensor &t,
                                         BoundParam &bound) {
  int64_t rank = param.getRank();
  bound.data = t.data;
  bound.rank = rank;
  int64_t elements = 1;
  bool overflow = false;
  for (int64_t i = 0; i < rank; ++i) {
    bound.sizes[i] = t.sizes[i];
    overflow |= __builtin_mul_overflow(elements, t.sizes[i], &elements);
  }
  int64_t elementSize = getDTypeSize(param.dtype);
  int64_t bytes = 0;
  overflow |= __builtin_mul_overflow(elements, elementSize, &bytes);
  if (overflow)
    return error(cat(param.name, " ", formatSizes(t), ": too many elements"));

  // Canonical strides; the given ones must match except where size is 1.
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    bound.strides[i] = stride;
    stride *= std::max<int64_t>(t.sizes[i], 1);
  }
  if (elements != 0) {
    for (int64_t i = 0; i < rank; ++i)
      if (t.sizes[i] != 1 && t.strides[i] != bound.strides[i])
        return error(cat(param.name, " ", formatSizes(t), ": strides ",
                         formatStrides(t.strides, rank),
                         " are not contiguous row-major (expected ",
                         formatStrides(bound.strides, rank),
                         "); the kernels take contiguous tensors, make a "
                         "contiguous copy first"));
    if (!t.data)
      return error(cat(param.name, " ", formatSizes(t), ": data is NULL"));
    if (reinterpret_cast<uintptr_t>(t.data) % elementSize != 0)
      return error(cat(param.name, ": data ", formatPointer(t.data),
                       " is not aligned to its ", elementSize,
                       "-byte elements"));
    // Wider accesses (the tensor-core kernels' 16-byte cp.async of Q, K
    // and V) need the pointer and every row of the tensor aligned: a view
    // at an offset would fault on the device and poison the context.
    int64_t alignment = std::max(param.alignment, elementSize);
    if (alignment > elementSize) {
      if (reinterpret_cast<uintptr_t>(t.data) % alignment != 0)
        return error(cat(param.name, ": data ", formatPointer(t.data),
                         " is not ", alignment, "-byte aligned, but kernel '",
                         md.name, "' reads ", param.name, " with ", alignment,
                         "-byte accesses (its metadata's alignment); pass "
                         "memory with that alignment (cudaMalloc's is 256 "
                         "bytes; a view at an offset may lack it)"));
      for (int64_t i = 0; i + 1 < rank; ++i)
        if (t.sizes[i] != 1 && (bound.strides[i] * elementSize) % alignment)
          return error(cat(param.name, " ", formatSizes(t), ": dim ", i,
                           " has a stride of ", bound.strides[i] * elementSize,
                           " bytes, not a multiple of the ", alignment,
                           "-byte accesses kernel '", md.name, "' reads ",
                           param.name, " with"));
    }
  }
  return std::nullopt;
}

MaybeFailure ArgumentBinder::bind(const TensorList &tensors,
                                  LaunchArgs &args) {
  // Presence and basics, in call order.
  std::string_view fn = function;
  for (size_t i = 0; i < md.params.size(); ++i) {
    const ParamInfo &param = md.params[i];
    // The workspace comes from `split` (bindWorkspace).
    if (isWorkspace(param.role)) {
      if (!split)
        return error(cat("kernel '", md.name,
                         "' was compiled with --split-kv: launch it with "
                         "fa_attention_launch_split or "
                         "fa_attention_launch_paged_split and a workspace "
                         "(fa_attention_workspace_size)"));
      continue;
    }
    const fa_tensor *t = lookupParam(tensors, i);
    if (!t) {
      const char *hint =
          param.role == ParamRole::BlockTable &&
                  fn != "fa_attention_launch_paged" &&
                  fn != "fa_attention_launch_paged_split"
              ? " (a paged-cache kernel: launch it with "
                "fa_attention_launch_paged)"
          : (param.role == ParamRole::CuSeqlensQ ||
             param.role == ParamRole::CuSeqlensK) &&
                  function != std::string_view("fa_attention_launch_varlen")
              ? " (a variable-length kernel: launch it with "
                "fa_attention_launch_varlen)"
              : "";
      return error(cat(param.name, " is NULL, but kernel '", md.name,
                       "' takes ", getDTypeName(param.dtype), " ",
                       formatShape(param), hint));
    }
    if (MaybeFailure err = checkBasics(param, *t))
      return err;
  }
  size_t modParams = 0, modGiven = 0;
  for (const ParamInfo &param : md.params)
    modParams += param.role == ParamRole::ModOperand;
  for (auto &[role, t] : tensors)
    modGiven += role == ParamRole::ModOperand;
  if (modGiven > modParams)
    return error(cat(modGiven, " mod operands were given, but kernel '",
                     md.name, "' takes ", modParams));
  for (auto &[role, t] : tensors)
    if (t && role != ParamRole::ModOperand && !md.findParam(role)) {
      const char *hint =
          role == ParamRole::KvLens ? " (compile with --kv-lens)"
          : role == ParamRole::Mask ? " (compile with --mask)"
          : role == ParamRole::Lse  ? " (compile with --lse)"
          : role == ParamRole::BlockMask
              ? " (compile a kernel function whose fa.attention has a "
                "block_mask)"
          : role == ParamRole::BlockTable ? " (compile with --page-size)"
          : role == ParamRole::CuSeqlensQ || role == ParamRole::CuSeqlensK
              ? " (compile with --varlen)"
              : "";
      return error(cat(getRoleName(role), " was given, but kernel '", md.name,
                       "' was compiled without it", hint, "; pass NULL"));
    }

  // Symbols: static ones from the metadata, dynamic ones from the tensors.
  symbolNames = md.getSymbols();
  symbolValues.assign(symbolNames.size(), 0);
  symbolSources.assign(symbolNames.size(), "");
  auto set = [&](std::string_view symbol, int64_t value, std::string source) {
    size_t index = symbolIndex(symbol);
    symbolValues[index] = value;
    symbolSources[index] = std::move(source);
  };
  if (isAttentionOp(md.op)) {
    const fa_tensor &q = *lookup(tensors, ParamRole::Query);
    const fa_tensor &k = *lookup(tensors, ParamRole::Key);
    std::string qName = md.findParam(ParamRole::Query)->name;
    std::string kName = md.findParam(ParamRole::Key)->name;
    if (md.varlen) {
      // Token-major: B from the offsets, Nq and Nk per sequence.
      const ParamInfo &cuParam = *md.findParam(ParamRole::CuSeqlensQ);
      const fa_tensor &cu = *lookup(tensors, ParamRole::CuSeqlensQ);
      std::string source = cuParam.name + " " + formatSizes(cu);
      if (cu.sizes[0] < 1)
        return error(cat(source, ": expected B + 1 >= 1 offsets (the first "
                                 "row of each of B sequences, then the end)"));
      set("B+1", cu.sizes[0], source);
      set("B", cu.sizes[0] - 1, source + " (B + 1 offsets)");
      set("Tq", q.sizes[0], qName + " " + formatSizes(q));
      set("Tk", k.sizes[0], kName + " " + formatSizes(k));
    } else {
      set("B", q.sizes[0], qName + " " + formatSizes(q));
      set("Nq", q.sizes[2], qName + " " + formatSizes(q));
    }
    if (md.pageSize > 0) {
      // Pages [P, S, Hkv, D]; the logical key length is M x S.
      const ParamInfo &tParam = *md.findParam(ParamRole::BlockTable);
      const fa_tensor &table = *lookup(tensors, ParamRole::BlockTable);
      std::string source = tParam.name + " " + formatSizes(table);
      set("P", k.sizes[0], kName + " " + formatSizes(k));
      set("S", md.pageSize, "");
      // (checkBasics checked the table's rank.)
      set("M", table.sizes[1], source);
      int64_t nk = 0;
      if (!__builtin_mul_overflow(table.sizes[1], md.pageSize, &nk))
        set("Nk", nk, source + " in pages of " + std::to_string(md.pageSize));
    } else if (!md.varlen) {
      set("Nk", k.sizes[2], kName + " " + formatSizes(k));
    }
    set("Hq", md.heads, "");
    set("Hkv", md.kvHeads, "");
    set("D", md.headDim, "");
    set("Dv", md.valueHeadDim, "");
    if (md.splitKv) {
      if (split->num_splits < 1)
        return error(cat("split: num_splits is ", split->num_splits,
                         ", expected at least 1"));
      set("Ns", split->num_splits, "split.num_splits");
    }
    if (md.modifiers.hasBlockMask()) {
      // The block mask holds one entry per (query tile, key tile).
      int64_t tq = md.modifiers.blockTileQ, tk = md.modifiers.blockTileKV;
      set("QT", (q.sizes[2] + tq - 1) / tq,
          cat(qName, " ", formatSizes(q), " in query tiles of ", tq,
              " (the kernel's block_tiles)"));
      set("KT", (k.sizes[2] + tk - 1) / tk,
          cat(kName, " ", formatSizes(k), " in key tiles of ", tk,
              " (the kernel's block_tiles)"));
    }
  } else {
    const ParamInfo &xParam = *md.findParam(ParamRole::Input);
    const fa_tensor &x = *lookup(tensors, ParamRole::Input);
    for (int64_t i = 0; i < md.rank; ++i)
      set("N" + std::to_string(i), x.sizes[i],
          xParam.name + " " + formatSizes(x));
  }

  // Dims and layouts, in call order.
  args.params.clear();
  for (size_t i = 0; i < md.params.size(); ++i) {
    const ParamInfo &param = md.params[i];
    if (isWorkspace(param.role)) {
      args.params.emplace_back(); // bound below
      continue;
    }
    const fa_tensor &t = *lookupParam(tensors, i);
    if (MaybeFailure err = checkDims(param, t))
      return err;
    BoundParam bound;
    if (MaybeFailure err = checkLayout(param, t, bound))
      return err;
    args.params.push_back(bound);
  }

  if (md.splitKv)
    if (MaybeFailure err = bindWorkspace(args))
      return err;

  // The tables a kernel reads memory through, checked on the host before
  // a CPU kernel runs. A CUDA kernel's tables are device memory, which the
  // launcher does not read (a copy would synchronise the stream): the
  // kernel clamps every page and offset into its tensors, and the caller
  // checks the host copies with fa_check_block_table / fa_check_cu_seqlens.
  auto paramOf = [&](ParamRole role) -> const BoundParam & {
    return args.params[md.findParam(role) - md.params.data()];
  };
  bool hostTables = md.target.kind == TargetKind::Cpu;
  if (md.pageSize > 0 && hostTables) {
    const BoundParam &lens = paramOf(ParamRole::KvLens);
    const BoundParam &table = paramOf(ParamRole::BlockTable);
    const BoundParam &key = paramOf(ParamRole::Key);
    if (std::optional<InputProblem> problem = checkBlockTable(
            static_cast<const int32_t *>(lens.data),
            static_cast<const int32_t *>(table.data), lens.sizes[0],
            table.sizes[1], key.sizes[0], md.pageSize))
      return error(cat(md.findParam(problem->role)->name, ": ",
                       problem->message));
  }
  if (md.varlen && hostTables) {
    for (auto [role, tokensRole, side] :
         {std::tuple{ParamRole::CuSeqlensQ, ParamRole::Query, "query"},
          std::tuple{ParamRole::CuSeqlensK, ParamRole::Key, "key"}}) {
      const BoundParam &cu = paramOf(role);
      if (std::optional<std::string> problem = checkCuSeqlens(
              static_cast<const int32_t *>(cu.data), cu.sizes[0],
              paramOf(tokensRole).sizes[0], side))
        return error(cat(md.findParam(role)->name, ": ", *problem));
    }
  }

  // Outputs must not overlap any other operand.
  auto byteRange = [&](const ParamInfo &param, const BoundParam &b) {
    int64_t elements = 1;
    for (int64_t i = 0; i < b.rank; ++i)
      elements *= b.sizes[i];
    auto begin = reinterpret_cast<uintptr_t>(b.data);
    return std::make_pair(begin, begin + elements * getDTypeSize(param.dtype));
  };
  for (size_t i = 0; i < md.params.size(); ++i) {
    const ParamInfo &out = md.params[i];
    if (!isWritten(md.op, out.role))
      continue;
    auto [ob, oe] = byteRange(out, args.params[i]);
    if (ob == oe)
      continue;
    for (size_t j = 0; j < md.params.size(); ++j) {
      if (i == j)
        continue;
      auto [b, e] = byteRange(md.params[j], args.params[j]);
      if (b != e && ob < e && b < oe)
        return error(cat(out.name, " overlaps ", md.params[j].name,
                         ": outputs must not alias other operands"));
    }
  }

  // An empty output means nothing to compute. The backward's gradients
  // are all written (dK, dV are zero where Nq = 0, dQ where Nk = 0), so
  // only a launch with every gradient empty does nothing.
  bool allEmpty = md.op == OpKind::AttentionBackward;
  for (size_t i = 0; i < md.params.size(); ++i) {
    if (!isWritten(md.op, md.params[i].role) || isWorkspace(md.params[i].role))
      continue;
    if (md.op != OpKind::AttentionBackward &&
        md.params[i].role != ParamRole::Output)
      continue;
    bool hasZero = false;
    for (int64_t d = 0; d < args.params[i].rank; ++d)
      hasZero |= args.params[i].sizes[d] == 0;
    if (md.op == OpKind::AttentionBackward)
      allEmpty &= hasZero;
    else
      empty |= hasZero;
  }
  if (md.op == OpKind::AttentionBackward)
    empty = allEmpty;

  args.symbols = symbolValues;
  return std::nullopt;
}

MaybeFailure ArgumentBinder::bindWorkspace(LaunchArgs &args) {
  int64_t batch = symbolValues[symbolIndex("B")];
  int64_t queryLen = symbolValues[symbolIndex("Nq")];
  std::optional<WorkspaceLayout> layout =
      getWorkspaceLayout(md, batch, queryLen, split->num_splits);
  if (!layout)
    return error(cat("split: the workspace of ", split->num_splits,
                     " parts over B = ", batch, ", Nq = ", queryLen,
                     " overflows"));
  if (split->workspace_bytes < layout->bytes)
    return error(cat("split: workspace_bytes is ", split->workspace_bytes,
                     ", but ", split->num_splits, " parts over B = ", batch,
                     ", Hq = ", md.heads, ", Nq = ", queryLen, " need ",
                     layout->bytes,
                     " (fa_attention_workspace_size)"));
  if (layout->bytes > 0 && !split->workspace)
    return error("split: workspace is NULL");
  if (reinterpret_cast<uintptr_t>(split->workspace) % 16 != 0)
    return error(cat("split: workspace ", formatPointer(split->workspace),
                     " is not 16-byte aligned"));
  for (size_t i = 0; i < md.params.size(); ++i) {
    const ParamInfo &param = md.params[i];
    if (!isWorkspace(param.role))
      continue;
    BoundParam &bound = args.params[i];
    bound.rank = param.getRank();
    for (int64_t d = 0; d < bound.rank; ++d)
      bound.sizes[d] = symbolValues[symbolIndex(param.shape[d].symbol)];
    int64_t stride = 1;
    for (int64_t d = bound.rank - 1; d >= 0; --d) {
      bound.strides[d] = stride;
      stride *= std::max<int64_t>(bound.sizes[d], 1);
    }
    bound.data = static_cast<char *>(split->workspace) +
                 (param.role == ParamRole::PartialLse ? layout->lseOffset : 0);
  }
  return std::nullopt;
}

static fa_status launch(fa_kernel *kernel, OpKind op, const char *function,
                        const TensorList &tensors, void *cudaStream,
                        const fa_split_kv *split = nullptr) {
  if (!kernel)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                std::string(function) + ": kernel is NULL");
  const KernelMetadata &md = kernel->metadata;
  if (md.op != op)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": kernel '", md.name, "' computes ",
                    getOpName(md.op), ", not ", getOpName(op)));
  // The serving forms have their own launch functions.
  std::string_view fn = function;
  bool splitFn = fn == "fa_attention_launch_split" ||
                 fn == "fa_attention_launch_paged_split";
  if (splitFn && !split)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": split is NULL"));
  if (splitFn && !md.splitKv)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": kernel '", md.name,
                    "' was not compiled with --split-kv; launch it without "
                    "a split (fa_attention_launch_ex or _paged)"));
  if ((fn == "fa_attention_launch_paged" ||
       fn == "fa_attention_launch_paged_split") &&
      md.pageSize == 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": kernel '", md.name,
                    "' reads a contiguous K/V cache, not pages (compile with "
                    "--page-size for a paged one); launch it with "
                    "fa_attention_launch_sparse or _ex"));
  if (fn == "fa_attention_launch_varlen" && !md.varlen)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": kernel '", md.name,
                    "' is not a variable-length kernel (compile with "
                    "--varlen for one); launch it with "
                    "fa_attention_launch_sparse or _ex"));
  if (fn == "fa_attention_launch_split" && md.pageSize > 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": kernel '", md.name,
                    "' reads a paged K/V cache; launch it with "
                    "fa_attention_launch_paged_split"));
  ArgumentBinder binder(md, function, split);
  LaunchArgs args;
  if (MaybeFailure err = binder.bind(tensors, args))
    return fail(prefixed(*err, std::string(function) + ": "));
  if (binder.isEmpty())
    return succeed();
  if (MaybeFailure err = kernel->backend->launch(args, cudaStream))
    return fail(prefixed(*err, cat(function, ": kernel '", md.name, "': ")));
  return succeed();
}

extern "C" fa_status fa_attention_launch(fa_kernel *kernel, const fa_tensor *q,
                                         const fa_tensor *k, const fa_tensor *v,
                                         const fa_tensor *kvLens,
                                         const fa_tensor *mask, fa_tensor *o,
                                         fa_tensor *lse, void *cudaStream) {
  TensorList tensors = {{ParamRole::Query, q},   {ParamRole::Key, k},
                        {ParamRole::Value, v},   {ParamRole::KvLens, kvLens},
                        {ParamRole::Mask, mask}, {ParamRole::Output, o},
                        {ParamRole::Lse, lse}};
  return launch(kernel, OpKind::Attention, "fa_attention_launch", tensors,
                cudaStream);
}

extern "C" fa_status fa_attention_backward_launch(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *dO, const fa_tensor *kvLens, const fa_tensor *mask,
    const fa_attention_extras *extras, fa_tensor *dQ, fa_tensor *dK,
    fa_tensor *dV, void *cudaStream) {
  fa_attention_extras none{};
  const fa_attention_extras &x = extras ? *extras : none;
  TensorList tensors = {{ParamRole::Query, q},
                        {ParamRole::Key, k},
                        {ParamRole::Value, v},
                        {ParamRole::Output, o},
                        {ParamRole::Lse, lse},
                        {ParamRole::GradOutput, dO},
                        {ParamRole::KvLens, kvLens},
                        {ParamRole::Mask, mask},
                        {ParamRole::Alibi, x.alibi},
                        {ParamRole::QSegments, x.q_segments},
                        {ParamRole::KSegments, x.k_segments},
                        {ParamRole::GradQuery, dQ},
                        {ParamRole::GradKey, dK},
                        {ParamRole::GradValue, dV}};
  return launch(kernel, OpKind::AttentionBackward,
                "fa_attention_backward_launch", tensors, cudaStream);
}

extern "C" fa_status fa_kernel_check_backward(const fa_kernel *forward,
                                              const fa_kernel *backward) {
  const char *fn = "fa_kernel_check_backward";
  if (!forward || !backward)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": ", !forward ? "forward" : "backward", " is NULL"));
  const KernelMetadata &f = forward->metadata, &b = backward->metadata;
  if (f.op != OpKind::Attention || b.op != OpKind::AttentionBackward)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn,
                    ": expected an attention kernel and an "
                    "attention_backward kernel, got '",
                    f.name, "' (", getOpName(f.op), ") and '", b.name, "' (",
                    getOpName(b.op), ")"));
  if (std::optional<std::string> diff = getBackwardMismatch(f, b))
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": kernel '", b.name, "' is not the backward of '",
                    f.name, "': ", *diff));
  return succeed();
}

/// The attention operands of a launch: the core ones, the modifier
/// operands of `extras` (may be null) and `numModOperands` mod operands.
static TensorList attentionTensors(const fa_tensor *q, const fa_tensor *k,
                                   const fa_tensor *v, const fa_tensor *kvLens,
                                   const fa_tensor *mask,
                                   const fa_attention_extras *extras,
                                   const fa_tensor *const *modOperands,
                                   int64_t numModOperands,
                                   const fa_tensor *blockMask, fa_tensor *o,
                                   fa_tensor *lse) {
  fa_attention_extras none{};
  const fa_attention_extras &x = extras ? *extras : none;
  TensorList tensors = {{ParamRole::Query, q},
                        {ParamRole::Key, k},
                        {ParamRole::Value, v},
                        {ParamRole::KvLens, kvLens},
                        {ParamRole::Mask, mask},
                        {ParamRole::Alibi, x.alibi},
                        {ParamRole::QSegments, x.q_segments},
                        {ParamRole::KSegments, x.k_segments},
                        {ParamRole::BlockMask, blockMask},
                        {ParamRole::Output, o},
                        {ParamRole::Lse, lse}};
  for (int64_t i = 0; i < numModOperands; ++i)
    tensors.emplace_back(ParamRole::ModOperand, modOperands[i]);
  return tensors;
}

extern "C" fa_status
fa_attention_launch_ex(fa_kernel *kernel, const fa_tensor *q,
                       const fa_tensor *k, const fa_tensor *v,
                       const fa_tensor *kvLens, const fa_tensor *mask,
                       const fa_attention_extras *extras, fa_tensor *o,
                       fa_tensor *lse, void *cudaStream) {
  return launch(kernel, OpKind::Attention, "fa_attention_launch_ex",
                attentionTensors(q, k, v, kvLens, mask, extras, nullptr, 0,
                                 nullptr, o, lse),
                cudaStream);
}

extern "C" fa_status fa_attention_launch_mods(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kvLens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_tensor *const *modOperands,
    int64_t numModOperands, fa_tensor *o, fa_tensor *lse, void *cudaStream) {
  return fa_attention_launch_sparse(kernel, q, k, v, kvLens, mask, extras,
                                    modOperands, numModOperands, nullptr, o,
                                    lse, cudaStream);
}

extern "C" fa_status fa_attention_launch_sparse(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kvLens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_tensor *const *modOperands,
    int64_t numModOperands, const fa_tensor *blockMask, fa_tensor *o,
    fa_tensor *lse, void *cudaStream) {
  const char *function = blockMask ? "fa_attention_launch_sparse"
                                   : "fa_attention_launch_mods";
  if (numModOperands < 0 || (numModOperands > 0 && !modOperands))
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(function, ": ", numModOperands, " mod operands at ",
                    modOperands ? "an array" : "NULL"));
  return launch(kernel, OpKind::Attention, function,
                attentionTensors(q, k, v, kvLens, mask, extras, modOperands,
                                 numModOperands, blockMask, o, lse),
                cudaStream);
}

extern "C" fa_status fa_attention_launch_paged(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *kPages,
    const fa_tensor *vPages, const fa_tensor *blockTable,
    const fa_tensor *kvLens, const fa_tensor *mask,
    const fa_attention_extras *extras, fa_tensor *o, fa_tensor *lse,
    void *cudaStream) {
  TensorList tensors = attentionTensors(q, kPages, vPages, kvLens, mask,
                                        extras, nullptr, 0, nullptr, o, lse);
  tensors.emplace_back(ParamRole::BlockTable, blockTable);
  return launch(kernel, OpKind::Attention, "fa_attention_launch_paged",
                tensors, cudaStream);
}

extern "C" fa_status fa_attention_launch_split(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kvLens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_split_kv *split, fa_tensor *o,
    fa_tensor *lse, void *cudaStream) {
  return launch(kernel, OpKind::Attention, "fa_attention_launch_split",
                attentionTensors(q, k, v, kvLens, mask, extras, nullptr, 0,
                                 nullptr, o, lse),
                cudaStream, split);
}

extern "C" fa_status fa_attention_launch_paged_split(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *kPages,
    const fa_tensor *vPages, const fa_tensor *blockTable,
    const fa_tensor *kvLens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_split_kv *split, fa_tensor *o,
    fa_tensor *lse, void *cudaStream) {
  TensorList tensors = attentionTensors(q, kPages, vPages, kvLens, mask,
                                        extras, nullptr, 0, nullptr, o, lse);
  tensors.emplace_back(ParamRole::BlockTable, blockTable);
  return launch(kernel, OpKind::Attention, "fa_attention_launch_paged_split",
                tensors, cudaStream, split);
}

extern "C" fa_status fa_kernel_get_split_kv(const fa_kernel *kernel,
                                            int32_t *splitKv) {
  if (!kernel || !splitKv)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_get_split_kv: kernel and split_kv must not be "
                "NULL");
  *splitKv = kernel->metadata.splitKv ? 1 : 0;
  return succeed();
}

extern "C" fa_status fa_attention_num_splits(const fa_kernel *kernel,
                                             int64_t batch, int64_t nq,
                                             int64_t nk, int64_t *numSplits) {
  const char *fn = "fa_attention_num_splits";
  if (!kernel || !numSplits)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": kernel and num_splits must not be NULL"));
  *numSplits = 1;
  if (batch < 0 || nq < 0 || nk < 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": sizes must not be negative, got batch ", batch,
                    ", nq ", nq, ", nk ", nk));
  if (!kernel->metadata.splitKv)
    return succeed();
  int64_t multiprocessors = kernel->backend->getMultiprocessorCount();
  *numSplits =
      chooseNumSplits(kernel->metadata, batch, nq, nk, multiprocessors);
  return succeed();
}

extern "C" fa_status fa_attention_workspace_size(const fa_kernel *kernel,
                                                 int64_t batch, int64_t nq,
                                                 int64_t numSplits,
                                                 size_t *bytes) {
  const char *fn = "fa_attention_workspace_size";
  if (!kernel || !bytes)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": kernel and bytes must not be NULL"));
  *bytes = 0;
  if (!kernel->metadata.splitKv)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": kernel '", kernel->metadata.name,
                    "' was not compiled with --split-kv and takes no "
                    "workspace"));
  std::optional<WorkspaceLayout> layout =
      getWorkspaceLayout(kernel->metadata, batch, nq, numSplits);
  if (!layout || layout->bytes > SIZE_MAX)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": no workspace for batch ", batch, ", nq ", nq,
                    " and ", numSplits,
                    " parts (sizes must not be negative, parts at least 1, "
                    "and the bytes must fit)"));
  *bytes = static_cast<size_t>(layout->bytes);
  return succeed();
}

extern "C" fa_status fa_attention_launch_varlen(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *cuSeqlensQ,
    const fa_tensor *cuSeqlensK, const fa_attention_extras *extras,
    fa_tensor *o, fa_tensor *lse, void *cudaStream) {
  TensorList tensors = attentionTensors(q, k, v, nullptr, nullptr, extras,
                                        nullptr, 0, nullptr, o, lse);
  tensors.emplace_back(ParamRole::CuSeqlensQ, cuSeqlensQ);
  tensors.emplace_back(ParamRole::CuSeqlensK, cuSeqlensK);
  return launch(kernel, OpKind::Attention, "fa_attention_launch_varlen",
                tensors, cudaStream);
}

/// A contiguous host i32 tensor of `rank` (the serving tables), or an
/// error naming `function` and `name`.
static std::optional<std::string> checkHostTable(const char *function,
                                                 const char *name,
                                                 const fa_tensor *t,
                                                 int32_t rank) {
  if (!t)
    return cat(function, ": ", name, " is NULL");
  if (t->dtype != FA_DTYPE_I32 || t->rank != rank)
    return cat(function, ": ", name, " must be i32 of rank ", rank, ", got ",
               getDTypeName(static_cast<DType>(t->dtype)), " of rank ",
               t->rank);
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; --i) {
    if (t->sizes[i] < 0)
      return cat(function, ": ", name, " has a negative size");
    if (t->sizes[i] != 1 && t->strides[i] != stride)
      return cat(function, ": ", name, " must be contiguous (C order)");
    stride *= t->sizes[i];
  }
  if (!t->data && stride != 0)
    return cat(function, ": ", name, " has no data");
  return std::nullopt;
}

extern "C" fa_status fa_check_block_table(const fa_tensor *blockTable,
                                          const fa_tensor *kvLens,
                                          int64_t numPages, int64_t pageSize) {
  const char *fn = "fa_check_block_table";
  if (auto err = checkHostTable(fn, "block_table", blockTable, 2))
    return fail(FA_ERROR_INVALID_ARGUMENT, *err);
  if (auto err = checkHostTable(fn, "kv_lens", kvLens, 1))
    return fail(FA_ERROR_INVALID_ARGUMENT, *err);
  if (kvLens->sizes[0] != blockTable->sizes[0])
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": kv_lens has ", kvLens->sizes[0],
                    " sequences, block_table ", blockTable->sizes[0]));
  if (numPages < 0 || pageSize <= 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": expected num_pages >= 0 and page_size > 0, got ",
                    numPages, " and ", pageSize));
  if (std::optional<InputProblem> problem = checkBlockTable(
          static_cast<const int32_t *>(kvLens->data),
          static_cast<const int32_t *>(blockTable->data), kvLens->sizes[0],
          blockTable->sizes[1], numPages, pageSize))
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": ",
                    problem->role == ParamRole::KvLens ? "kv_lens"
                                                       : "block_table",
                    ": ", problem->message));
  return succeed();
}

extern "C" fa_status fa_check_cu_seqlens(const fa_tensor *cuSeqlens,
                                         int64_t tokens) {
  const char *fn = "fa_check_cu_seqlens";
  if (auto err = checkHostTable(fn, "cu_seqlens", cuSeqlens, 1))
    return fail(FA_ERROR_INVALID_ARGUMENT, *err);
  if (tokens < 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat(fn, ": tokens must not be negative, got ", tokens));
  if (std::optional<std::string> problem =
          checkCuSeqlens(static_cast<const int32_t *>(cuSeqlens->data),
                         cuSeqlens->sizes[0], tokens, "token"))
    return fail(FA_ERROR_INVALID_ARGUMENT, cat(fn, ": cu_seqlens: ", *problem));
  return succeed();
}

extern "C" fa_status fa_kernel_get_serving(const fa_kernel *kernel,
                                           int64_t *pageSize,
                                           int32_t *varlen) {
  if (!kernel || !pageSize || !varlen)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_get_serving: kernel, page_size and varlen must "
                "not be NULL");
  *pageSize = kernel->metadata.pageSize;
  *varlen = kernel->metadata.varlen ? 1 : 0;
  return succeed();
}

extern "C" fa_status fa_kernel_get_block_tiles(const fa_kernel *kernel,
                                               int64_t *tq, int64_t *tk) {
  if (!kernel || !tq || !tk)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_get_block_tiles: kernel, tq and tk must not be "
                "NULL");
  *tq = kernel->metadata.modifiers.blockTileQ;
  *tk = kernel->metadata.modifiers.blockTileKV;
  return succeed();
}

extern "C" fa_status fa_softmax_launch(fa_kernel *kernel, const fa_tensor *x,
                                       fa_tensor *y, void *cudaStream) {
  TensorList tensors = {{ParamRole::Input, x}, {ParamRole::Output, y}};
  return launch(kernel, OpKind::Softmax, "fa_softmax_launch", tensors,
                cudaStream);
}

//===----------------------------------------------------------------------===//
// CUDA helpers (implemented in CudaBackend.cpp)
//===----------------------------------------------------------------------===//

namespace fa {
namespace runtime {
MaybeFailure cudaDeviceChip(std::string &chip);
MaybeFailure cudaMalloc(void **ptr, size_t bytes);
MaybeFailure cudaFree(void *ptr);
MaybeFailure cudaMemcpyHtoD(void *dst, const void *src, size_t bytes);
MaybeFailure cudaMemcpyDtoH(void *dst, const void *src, size_t bytes);
MaybeFailure cudaSynchronize();
} // namespace runtime
} // namespace fa

static fa_status toStatus(MaybeFailure failure) {
  return failure ? fail(*failure) : succeed();
}

extern "C" fa_status fa_cuda_device_chip(char *buf, size_t n) {
  if (!buf || n == 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_cuda_device_chip: buf is NULL or n is 0");
  buf[0] = '\0';
  std::string chip;
  if (MaybeFailure failure = cudaDeviceChip(chip))
    return fail(*failure);
  if (chip.size() + 1 > n)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                cat("fa_cuda_device_chip: the chip '", chip, "' needs ",
                    chip.size() + 1, " bytes, but buf has ", n));
  std::memcpy(buf, chip.c_str(), chip.size() + 1);
  return succeed();
}

extern "C" fa_status fa_cuda_malloc(void **ptr, size_t bytes) {
  if (!ptr)
    return fail(FA_ERROR_INVALID_ARGUMENT, "fa_cuda_malloc: ptr is NULL");
  *ptr = nullptr;
  if (bytes == 0)
    return succeed();
  return toStatus(cudaMalloc(ptr, bytes));
}

extern "C" fa_status fa_cuda_free(void *ptr) {
  if (!ptr)
    return succeed();
  return toStatus(cudaFree(ptr));
}

extern "C" fa_status fa_cuda_memcpy_htod(void *dst, const void *src,
                                         size_t bytes) {
  if (bytes == 0)
    return succeed();
  if (!dst || !src)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_cuda_memcpy_htod: dst or src is NULL");
  return toStatus(cudaMemcpyHtoD(dst, src, bytes));
}

extern "C" fa_status fa_cuda_memcpy_dtoh(void *dst, const void *src,
                                         size_t bytes) {
  if (bytes == 0)
    return succeed();
  if (!dst || !src)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_cuda_memcpy_dtoh: dst or src is NULL");
  return toStatus(cudaMemcpyDtoH(dst, src, bytes));
}

extern "C" fa_status fa_cuda_synchronize(void) {
  return toStatus(cudaSynchronize());
}

//===----------------------------------------------------------------------===//
// Block masks
//===----------------------------------------------------------------------===//

extern "C" int64_t fa_block_mask_size(int64_t batch, int64_t heads,
                                      int64_t nq, int64_t nk, int64_t tq,
                                      int64_t tk) {
  if (batch < 0 || heads < 0 || nq < 0 || nk < 0 || tq <= 0 || tk <= 0)
    return -1;
  int64_t dims[4] = {batch, heads, nq / tq + (nq % tq != 0),
                     nk / tk + (nk % tk != 0)};
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > INT64_MAX / d)
      return -1;
    n *= d;
  }
  return n;
}

extern "C" fa_status fa_block_mask_build(int64_t batch, int64_t heads,
                                         int64_t nq, int64_t nk, int64_t tq,
                                         int64_t tk, fa_keep_fn keep,
                                         void *user, uint8_t *out) {
  if (!keep || !out)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_block_mask_build: keep and out must not be NULL");
  if (fa_block_mask_size(batch, heads, nq, nk, tq, tk) < 0)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_block_mask_build: sizes must not be negative and tile "
                "sizes must be positive (batch " +
                    std::to_string(batch) + ", heads " +
                    std::to_string(heads) + ", nq " + std::to_string(nq) +
                    ", nk " + std::to_string(nk) + ", tiles " +
                    std::to_string(tq) + " x " + std::to_string(tk) + ")");
  int64_t qTiles = nq / tq + (nq % tq != 0), kTiles = nk / tk + (nk % tk != 0);
  uint8_t *entry = out;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < qTiles; ++i)
        for (int64_t j = 0; j < kTiles; ++j) {
          bool some = false, all = true;
          for (int64_t q = i * tq; q < std::min(nq, (i + 1) * tq); ++q)
            for (int64_t k = j * tk; k < std::min(nk, (j + 1) * tk); ++k) {
              bool kept = keep(user, b, h, q, k) != 0;
              some |= kept;
              all &= kept;
            }
          *entry++ = some ? (all ? 2 : 1) : 0;
        }
  return succeed();
}
