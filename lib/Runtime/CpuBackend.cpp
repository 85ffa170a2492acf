//===- CpuBackend.cpp - Loading and running CPU artifacts -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CPU backend: checks the artifact's triple and ISA features against the
// host, dlopens its shared library and calls `_mlir_ciface_<symbol>` with
// one pointer to a memref descriptor per parameter.
//
//===----------------------------------------------------------------------===//

#include "HostInfo.h"
#include "RuntimeInternal.h"

#include <dlfcn.h>
#include <utility>

using namespace fa::runtime;

namespace {

/// The most memref parameters an entry takes: Q, K, V, key lengths, mask,
/// ALiBi slopes, two segment id tensors, O and LSE (10), and up to 8 mod
/// operands of score_mod / mask_mod regions.
constexpr size_t kMaxParams = 18;

/// Calls `entry` as `void (void *, ..., void *)` with p[Js]...
template <size_t... Js>
void callEntry(void *entry, void *const *p, std::index_sequence<Js...>) {
  using Fn = void (*)(decltype((void)Js, static_cast<void *>(nullptr))...);
  reinterpret_cast<Fn>(entry)(p[Js]...);
}

/// Calls `entry` with the first `n` (1 <= n <= sizeof...(Is)) of `p`.
template <size_t... Is>
void callWithPointers(void *entry, void *const *p, size_t n,
                      std::index_sequence<Is...>) {
  ((n == Is + 1 ? (callEntry(entry, p, std::make_index_sequence<Is + 1>()), 0)
                : 0),
   ...);
}

/// A memref descriptor as the C interface takes it
/// (StridedMemRefType<T, N>): allocated and aligned pointers, offset,
/// sizes[N], strides[N]; every field 64-bit.
struct Descriptor {
  int64_t fields[3 + 2 * FA_MAX_RANK];
};

class CpuBackend final : public Backend {
public:
  ~CpuBackend() override {
    if (handle)
      dlclose(handle);
  }

  static Result<std::unique_ptr<Backend>> load(const KernelMetadata &md,
                                               const std::string &dir);

  MaybeFailure launch(const LaunchArgs &args, void *cudaStream) override;

private:
  void *handle = nullptr;
  void *entry = nullptr;
  size_t numParams = 0;
};

} // namespace

Result<std::unique_ptr<Backend>> CpuBackend::load(const KernelMetadata &md,
                                                  const std::string &dir) {
  if (md.params.size() > kMaxParams)
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       cat("has ", md.params.size(),
                           " params; the CPU backend calls entries with at "
                           "most ",
                           kMaxParams));

  // The host must be able to run the code.
  host::TripleParts artifact = host::parseTriple(md.target.triple);
  host::TripleParts self = host::getHostParts();
  if (artifact.arch != self.arch || artifact.os != self.os)
    return makeFailure(FA_ERROR_UNSUPPORTED_ARCH,
                       cat("targets ", md.target.triple, ", but this host is ",
                           host::getHostTriple()));
  if (!md.target.features.empty()) {
    const std::map<std::string, bool> &hostFeatures =
        host::getHostCpuFeatures();
    std::vector<std::string> missing;
    for (const std::string &feature : md.target.features) {
      auto it = hostFeatures.find(feature);
      // Features the detector does not know (tuning flags) are not checked.
      if (it != hostFeatures.end() && !it->second)
        missing.push_back(feature);
    }
    if (!missing.empty())
      return makeFailure(
          FA_ERROR_UNSUPPORTED_ARCH,
          cat("was compiled for CPU '", md.target.cpu,
              "' with features this CPU ('", host::getHostCpuName(),
              "') lacks: ", join(missing, ", "),
              "; recompile with `fa-compile --cpu generic` or for this host"));
  }

  if (md.files.library.empty())
    return makeFailure(
        FA_ERROR_INVALID_ARTIFACT,
        "has no shared library (files.library), only the object '" +
            md.files.object +
            "'; link it with `cc -shared -o NAME.so NAME.o -lm` and add "
            "files.library to the metadata");
  std::string path = joinPath(dir, md.files.library);
  if (!pathExists(path))
    return makeFailure(FA_ERROR_IO,
                       "cannot read the library '" + path + "': no such file");

  auto backend = std::make_unique<CpuBackend>();
  backend->numParams = md.params.size();
  backend->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!backend->handle) {
    const char *reason = dlerror();
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       cat("cannot load the library '", path, "': ",
                           reason ? reason : "unknown error"));
  }
  // The library must have been compiled for this metadata's parameters
  // and attributes: fa-compile embeds the signature text.
  std::string signatureSymbol = getSignatureSymbol(md);
  const char *compiled = static_cast<const char *>(
      dlsym(backend->handle, signatureSymbol.c_str()));
  if (!compiled)
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       cat("the library '", path, "' has no signature '",
                           signatureSymbol,
                           "': it was not compiled by this fa-compile for "
                           "this metadata (recompile the kernel)"));
  if (std::optional<std::string> diff =
          compareKernelSignature(compiled, md))
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       cat("the metadata does not describe the library '",
                           path, "': ", *diff,
                           " (edited metadata or another kernel's files; "
                           "recompile the kernel)"));

  std::string symbol = "_mlir_ciface_" + md.symbol;
  backend->entry = dlsym(backend->handle, symbol.c_str());
  if (!backend->entry)
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       cat("the library '", path, "' does not export '",
                           symbol, "'"));
  return std::unique_ptr<Backend>(std::move(backend));
}

MaybeFailure CpuBackend::launch(const LaunchArgs &args,
                                void * /*cudaStream*/) {
  if (args.params.size() != numParams)
    return makeFailure(FA_ERROR_LAUNCH, "wrong number of arguments");
  Descriptor descriptors[kMaxParams];
  void *p[kMaxParams] = {};
  for (size_t i = 0; i < args.params.size(); ++i) {
    const BoundParam &param = args.params[i];
    int64_t *f = descriptors[i].fields;
    auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(param.data));
    f[0] = ptr;
    f[1] = ptr;
    f[2] = 0;
    for (int64_t d = 0; d < param.rank; ++d) {
      f[3 + d] = param.sizes[d];
      f[3 + param.rank + d] = param.strides[d];
    }
    p[i] = &descriptors[i];
  }

  // `void _mlir_ciface_<symbol>(Descriptor *, ...)` with numParams args.
  if (numParams == 0 || numParams > kMaxParams)
    return makeFailure(FA_ERROR_LAUNCH, "unsupported parameter count");
  callWithPointers(entry, p, numParams,
                   std::make_index_sequence<kMaxParams>());
  return std::nullopt;
}

Result<std::unique_ptr<Backend>>
fa::runtime::loadCpuBackend(const KernelMetadata &md, const std::string &dir) {
  return CpuBackend::load(md, dir);
}
