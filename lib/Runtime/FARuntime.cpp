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

#include "RuntimeInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

char RuntimeError::ID = 0;

Backend::~Backend() = default;

Error fa::runtime::withStatus(Error err, fa_status status,
                              const Twine &prefix) {
  std::string prefixText = prefix.str();
  fa_status outStatus = status;
  std::string message;
  llvm::handleAllErrors(
      std::move(err),
      [&](const RuntimeError &e) {
        outStatus = e.getStatus();
        message = e.getMessage();
      },
      [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
  return makeRuntimeError(outStatus, prefixText + message);
}

Expected<std::string> fa::runtime::readArtifactFile(StringRef path,
                                                    StringRef what) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeRuntimeError(FA_ERROR_IO, "cannot read the " + what + " '" +
                                             path +
                                             "': " + buffer.getError().message());
  return (*buffer)->getBuffer().str();
}

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

static fa_status fail(fa_status status, const Twine &message) {
  lastError = message.str();
  return status;
}

static fa_status fail(Error err) {
  fa_status status = FA_ERROR_INVALID_ARGUMENT;
  std::string message;
  llvm::handleAllErrors(
      std::move(err),
      [&](const RuntimeError &e) {
        status = e.getStatus();
        message = e.getMessage();
      },
      [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
  return fail(status, message);
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
  Error err = getCudaDeviceCount(count);
  if (deviceCount)
    *deviceCount = err ? 0 : count;
  if (err)
    return fail(std::move(err));
  return succeed();
}

extern "C" fa_status fa_kernel_load(const char *metadataPath, fa_device device,
                                    fa_kernel **out) {
  if (!out)
    return fail(FA_ERROR_INVALID_ARGUMENT, "fa_kernel_load: out is NULL");
  *out = nullptr;
  if (!metadataPath)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                "fa_kernel_load: metadata_path is NULL");
  if (device != FA_DEVICE_CPU && device != FA_DEVICE_CUDA)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                formatv("fa_kernel_load: unknown device {0} (expected "
                        "FA_DEVICE_CPU or FA_DEVICE_CUDA)",
                        static_cast<int>(device)));

  Expected<std::string> text = readArtifactFile(metadataPath, "metadata");
  if (!text)
    return fail(text.takeError());
  Expected<KernelMetadata> metadata = parseKernelMetadata(*text);
  if (!metadata)
    return fail(withStatus(metadata.takeError(), FA_ERROR_INVALID_ARTIFACT,
                           Twine(metadataPath) + ": "));

  bool isCuda = metadata->target.kind == TargetKind::Cuda;
  if (isCuda != (device == FA_DEVICE_CUDA))
    return fail(FA_ERROR_INVALID_ARGUMENT,
                formatv("{0}: kernel '{1}' targets {2} ({3}), but {4} was "
                        "requested",
                        metadataPath, metadata->name,
                        isCuda ? "cuda" : "the cpu",
                        isCuda ? metadata->target.chip
                               : metadata->target.triple,
                        device == FA_DEVICE_CUDA ? "FA_DEVICE_CUDA"
                                                 : "FA_DEVICE_CPU"));

  llvm::SmallString<256> dir(metadataPath);
  (void)llvm::sys::fs::make_absolute(dir);
  llvm::sys::path::remove_filename(dir);

  Expected<std::unique_ptr<Backend>> backend =
      isCuda ? loadCudaBackend(*metadata, dir)
             : loadCpuBackend(*metadata, dir);
  if (!backend)
    return fail(withStatus(backend.takeError(), FA_ERROR_INVALID_ARTIFACT,
                           "kernel '" + metadata->name + "': "));

  auto *kernel = new fa_kernel;
  kernel->metadata = std::move(*metadata);
  kernel->path = metadataPath;
  kernel->device = device;
  kernel->backend = std::move(*backend);
  *out = kernel;
  return succeed();
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
  info->op = md.op == OpKind::Attention ? FA_OP_ATTENTION : FA_OP_SOFTMAX;
  info->device = kernel->device;
  info->dtype = toCDType(md.dtype);
  if (md.op == OpKind::Attention) {
    info->head_dim = md.headDim;
    info->value_head_dim = md.valueHeadDim;
    info->heads = md.heads;
    info->kv_heads = md.kvHeads;
    info->causal = md.causal == Causal::None      ? FA_CAUSAL_NONE
                   : md.causal == Causal::TopLeft ? FA_CAUSAL_TOP_LEFT
                                                  : FA_CAUSAL_BOTTOM_RIGHT;
    info->mask = md.mask == MaskKind::None   ? FA_MASK_NONE
                 : md.mask == MaskKind::Bool ? FA_MASK_BOOL
                                             : FA_MASK_ADDITIVE;
    info->has_kv_lens = md.hasKvLens;
    info->has_lse = md.hasLse;
    info->scale = static_cast<float>(md.scale);
    info->block_q = md.blockQ;
    info->block_kv = md.blockKV;
  } else {
    info->rank = md.rank;
    info->dimension = md.dimension;
  }
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
  for (auto [i, dim] : llvm::enumerate(param.shape))
    text += (i ? ", " : "") +
            (dim.isSymbol() ? dim.symbol : std::to_string(dim.size));
  return text + "]";
}

namespace {

/// Validates the tensors of one launch against a kernel's metadata.
class ArgumentBinder {
public:
  ArgumentBinder(const KernelMetadata &md) : md(md) {}

  /// Binds `tensors[i]` (the tensor passed for the role of the i-th entry of
  /// `roles`) to the metadata's params.
  Error bind(llvm::ArrayRef<std::pair<ParamRole, const fa_tensor *>> tensors,
             LaunchArgs &args);

  /// True when the launch has no output element to compute.
  bool isEmpty() const { return empty; }

private:
  Error error(const Twine &message) {
    return makeRuntimeError(FA_ERROR_INVALID_ARGUMENT, message);
  }

  const fa_tensor *lookup(
      llvm::ArrayRef<std::pair<ParamRole, const fa_tensor *>> tensors,
      ParamRole role) {
    for (auto &[r, t] : tensors)
      if (r == role)
        return t;
    return nullptr;
  }

  Error checkBasics(const ParamInfo &param, const fa_tensor &t);
  Error checkDims(const ParamInfo &param, const fa_tensor &t);
  Error checkLayout(const ParamInfo &param, const fa_tensor &t,
                    BoundParam &bound);

  const KernelMetadata &md;
  llvm::SmallVector<std::string> symbolNames;
  llvm::SmallVector<int64_t, 9> symbolValues;
  /// For each symbol, the param that bound it (for messages).
  llvm::SmallVector<std::string, 9> symbolSources;
  bool empty = false;
};

} // namespace

Error ArgumentBinder::checkBasics(const ParamInfo &param, const fa_tensor &t) {
  std::optional<DType> dtype = fromCDType(t.dtype);
  if (!dtype)
    return error(formatv("{0}: unknown dtype {1} (expected an fa_dtype)",
                         param.name, t.dtype));
  if (*dtype != param.dtype) {
    if (param.dtype == DType::I8)
      return error(formatv("{0}: dtype {1}, but kernel '{2}' takes a bool "
                           "mask of one byte per element (FA_DTYPE_BOOL or "
                           "FA_DTYPE_I8)",
                           param.name, getDTypeName(*dtype), md.name));
    return error(formatv("{0}: dtype {1}, but kernel '{2}' takes {3}",
                         param.name, getDTypeName(*dtype), md.name,
                         getDTypeName(param.dtype)));
  }
  if (t.rank != param.getRank())
    return error(formatv("{0}: rank {1}, but kernel '{2}' takes rank {3} {4}",
                         param.name, t.rank, md.name, param.getRank(),
                         formatShape(param)));
  for (int64_t i = 0; i < param.getRank(); ++i)
    if (t.sizes[i] < 0)
      return error(formatv("{0} {1}: dim {2} is negative", param.name,
                           formatSizes(t), i));
  return Error::success();
}

Error ArgumentBinder::checkDims(const ParamInfo &param, const fa_tensor &t) {
  for (auto [i, dim] : llvm::enumerate(param.shape)) {
    int64_t actual = t.sizes[i];
    if (!dim.isSymbol()) {
      if (actual != dim.size)
        return error(formatv("{0} {1}: dim {2} is {3}, but kernel '{4}' was "
                             "compiled for a fixed size {5} there {6}",
                             param.name, formatSizes(t), i, actual, md.name,
                             dim.size, formatShape(param)));
      continue;
    }
    auto *it = llvm::find(symbolNames, dim.symbol);
    assert(it != symbolNames.end() && "verified shape symbol");
    size_t index = it - symbolNames.begin();
    int64_t expected = symbolValues[index];
    if (actual == expected)
      continue;
    if (symbolSources[index].empty())
      return error(formatv("{0} {1}: dim {2} ({3}) is {4}, but kernel '{5}' "
                           "was compiled for {3} = {6}",
                           param.name, formatSizes(t), i, dim.symbol, actual,
                           md.name, expected));
    return error(formatv("{0} {1}: dim {2} ({3}) is {4}, but {5} has {3} = "
                         "{6}",
                         param.name, formatSizes(t), i, dim.symbol, actual,
                         symbolSources[index], expected));
  }
  return Error::success();
}

Error ArgumentBinder::checkLayout(const ParamInfo &param, const fa_tensor &t,
                                  BoundParam &bound) {
  int64_t rank = param.getRank();
  bound.data = t.data;
  bound.rank = rank;
  int64_t elements = 1;
  bool overflow = false;
  for (int64_t i = 0; i < rank; ++i) {
    bound.sizes[i] = t.sizes[i];
    overflow |= llvm::MulOverflow(elements, t.sizes[i], elements);
  }
  int64_t elementSize = getDTypeSize(param.dtype);
  int64_t bytes = 0;
  overflow |= llvm::MulOverflow(elements, elementSize, bytes);
  if (overflow)
    return error(formatv("{0} {1}: too many elements", param.name,
                         formatSizes(t)));

  // Canonical strides; the given ones must match except where size is 1.
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    bound.strides[i] = stride;
    stride *= std::max<int64_t>(t.sizes[i], 1);
  }
  if (elements != 0) {
    for (int64_t i = 0; i < rank; ++i)
      if (t.sizes[i] != 1 && t.strides[i] != bound.strides[i])
        return error(formatv("{0} {1}: strides {2} are not contiguous "
                             "row-major (expected {3}); the kernels take "
                             "contiguous tensors, make a contiguous copy "
                             "first",
                             param.name, formatSizes(t),
                             formatStrides(t.strides, rank),
                             formatStrides(bound.strides, rank)));
    if (!t.data)
      return error(formatv("{0} {1}: data is NULL", param.name,
                           formatSizes(t)));
    if (reinterpret_cast<uintptr_t>(t.data) % elementSize != 0)
      return error(formatv("{0}: data {1} is not aligned to its {2}-byte "
                           "elements",
                           param.name, t.data, elementSize));
  }
  return Error::success();
}

Error ArgumentBinder::bind(
    llvm::ArrayRef<std::pair<ParamRole, const fa_tensor *>> tensors,
    LaunchArgs &args) {
  // Presence and basics, in call order.
  for (const ParamInfo &param : md.params) {
    const fa_tensor *t = lookup(tensors, param.role);
    if (!t)
      return error(formatv("{0} is NULL, but kernel '{1}' takes {2} {3}",
                           param.name, md.name, getDTypeName(param.dtype),
                           formatShape(param)));
    if (Error err = checkBasics(param, *t))
      return err;
  }
  for (auto &[role, t] : tensors)
    if (t && !md.findParam(role)) {
      StringRef hint = role == ParamRole::KvLens ? " (compile with --kv-lens)"
                       : role == ParamRole::Mask ? " (compile with --mask)"
                       : role == ParamRole::Lse  ? " (compile with --lse)"
                                                 : "";
      return error(formatv("{0} was given, but kernel '{1}' was compiled "
                           "without it{2}; pass NULL",
                           getRoleName(role), md.name, hint));
    }

  // Symbols: static ones from the metadata, dynamic ones from the tensors.
  symbolNames = md.getSymbols();
  symbolValues.assign(symbolNames.size(), 0);
  symbolSources.assign(symbolNames.size(), "");
  auto set = [&](StringRef symbol, int64_t value, const Twine &source) {
    size_t index = llvm::find(symbolNames, symbol) - symbolNames.begin();
    symbolValues[index] = value;
    symbolSources[index] = source.str();
  };
  if (md.op == OpKind::Attention) {
    const fa_tensor &q = *lookup(tensors, ParamRole::Query);
    const fa_tensor &k = *lookup(tensors, ParamRole::Key);
    std::string qName = md.findParam(ParamRole::Query)->name;
    std::string kName = md.findParam(ParamRole::Key)->name;
    set("B", q.sizes[0], qName + " " + formatSizes(q));
    set("Nq", q.sizes[2], qName + " " + formatSizes(q));
    set("Nk", k.sizes[2], kName + " " + formatSizes(k));
    set("Hq", md.heads, "");
    set("Hkv", md.kvHeads, "");
    set("D", md.headDim, "");
    set("Dv", md.valueHeadDim, "");
    set("block_q", md.blockQ, "");
    set("block_kv", md.blockKV, "");
  } else {
    const ParamInfo &xParam = *md.findParam(ParamRole::Input);
    const fa_tensor &x = *lookup(tensors, ParamRole::Input);
    for (int64_t i = 0; i < md.rank; ++i)
      set("N" + std::to_string(i), x.sizes[i],
          xParam.name + " " + formatSizes(x));
  }

  // Dims and layouts, in call order.
  args.params.clear();
  for (const ParamInfo &param : md.params) {
    const fa_tensor &t = *lookup(tensors, param.role);
    if (Error err = checkDims(param, t))
      return err;
    BoundParam bound;
    if (Error err = checkLayout(param, t, bound))
      return err;
    args.params.push_back(bound);
  }

  // Outputs must not overlap any other operand.
  auto byteRange = [&](const ParamInfo &param, const BoundParam &b) {
    int64_t elements = 1;
    for (int64_t i = 0; i < b.rank; ++i)
      elements *= b.sizes[i];
    auto begin = reinterpret_cast<uintptr_t>(b.data);
    return std::make_pair(begin, begin + elements * getDTypeSize(param.dtype));
  };
  for (auto [i, out] : llvm::enumerate(md.params)) {
    if (out.role != ParamRole::Output && out.role != ParamRole::Lse)
      continue;
    auto [ob, oe] = byteRange(out, args.params[i]);
    if (ob == oe)
      continue;
    for (auto [j, other] : llvm::enumerate(md.params)) {
      if (i == j)
        continue;
      auto [b, e] = byteRange(other, args.params[j]);
      if (b != e && ob < e && b < oe)
        return error(formatv("{0} overlaps {1}: outputs must not alias "
                             "other operands",
                             out.name, other.name));
    }
  }

  // An empty output means nothing to compute.
  for (auto [i, param] : llvm::enumerate(md.params))
    if (param.role == ParamRole::Output)
      for (int64_t d = 0; d < args.params[i].rank; ++d)
        if (args.params[i].sizes[d] == 0)
          empty = true;

  args.symbols = symbolValues;
  return Error::success();
}

static fa_status launch(fa_kernel *kernel, OpKind op, StringRef function,
                        llvm::ArrayRef<std::pair<ParamRole, const fa_tensor *>>
                            tensors,
                        void *cudaStream) {
  if (!kernel)
    return fail(FA_ERROR_INVALID_ARGUMENT, function + ": kernel is NULL");
  const KernelMetadata &md = kernel->metadata;
  if (md.op != op)
    return fail(FA_ERROR_INVALID_ARGUMENT,
                formatv("{0}: kernel '{1}' computes {2}, not {3}", function,
                        md.name, getOpName(md.op), getOpName(op)));
  ArgumentBinder binder(md);
  LaunchArgs args;
  if (Error err = binder.bind(tensors, args))
    return fail(withStatus(std::move(err), FA_ERROR_INVALID_ARGUMENT,
                           function + ": "));
  if (binder.isEmpty())
    return succeed();
  if (Error err = kernel->backend->launch(args, cudaStream))
    return fail(withStatus(std::move(err), FA_ERROR_LAUNCH,
                           function + ": kernel '" + md.name + "': "));
  return succeed();
}

extern "C" fa_status fa_attention_launch(fa_kernel *kernel, const fa_tensor *q,
                                         const fa_tensor *k, const fa_tensor *v,
                                         const fa_tensor *kvLens,
                                         const fa_tensor *mask, fa_tensor *o,
                                         fa_tensor *lse, void *cudaStream) {
  std::pair<ParamRole, const fa_tensor *> tensors[] = {
      {ParamRole::Query, q},      {ParamRole::Key, k},
      {ParamRole::Value, v},      {ParamRole::KvLens, kvLens},
      {ParamRole::Mask, mask},    {ParamRole::Output, o},
      {ParamRole::Lse, lse}};
  return launch(kernel, OpKind::Attention, "fa_attention_launch", tensors,
                cudaStream);
}

extern "C" fa_status fa_softmax_launch(fa_kernel *kernel, const fa_tensor *x,
                                       fa_tensor *y, void *cudaStream) {
  std::pair<ParamRole, const fa_tensor *> tensors[] = {
      {ParamRole::Input, x}, {ParamRole::Output, y}};
  return launch(kernel, OpKind::Softmax, "fa_softmax_launch", tensors,
                cudaStream);
}
