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

#include "RuntimeInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <dlfcn.h>

using namespace fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

namespace {

/// The most parameters a kernel has (q, k, v, kv_lens, mask, o, lse).
constexpr size_t kMaxParams = 8;

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

  static Expected<std::unique_ptr<Backend>> load(const KernelMetadata &md,
                                                 StringRef dir);

  Error launch(const LaunchArgs &args, void *cudaStream) override;

private:
  void *handle = nullptr;
  void *entry = nullptr;
  size_t numParams = 0;
};

} // namespace

Expected<std::unique_ptr<Backend>> CpuBackend::load(const KernelMetadata &md,
                                                    StringRef dir) {
  if (md.params.size() > kMaxParams)
    return makeRuntimeError(FA_ERROR_INVALID_ARTIFACT,
                            formatv("has {0} params; the CPU backend calls "
                                    "entries with at most {1}",
                                    md.params.size(), kMaxParams));

  // The host must be able to run the code.
  llvm::Triple artifact(md.target.triple);
  llvm::Triple host(llvm::sys::getProcessTriple());
  if (artifact.getArch() != host.getArch() || artifact.getOS() != host.getOS())
    return makeRuntimeError(FA_ERROR_UNSUPPORTED_ARCH,
                            formatv("targets {0}, but this host is {1}",
                                    md.target.triple, host.str()));
  if (!md.target.features.empty()) {
    llvm::StringMap<bool> hostFeatures = llvm::sys::getHostCPUFeatures();
    llvm::SmallVector<std::string> missing;
    for (const std::string &feature : md.target.features) {
      auto it = hostFeatures.find(feature);
      // Features the host does not report (tuning flags) are not checked.
      if (it != hostFeatures.end() && !it->second)
        missing.push_back(feature);
    }
    if (!missing.empty())
      return makeRuntimeError(
          FA_ERROR_UNSUPPORTED_ARCH,
          formatv("was compiled for CPU '{0}' with features this CPU ('{1}') "
                  "lacks: {2}; recompile with `fa-compile --cpu generic` or "
                  "for this host",
                  md.target.cpu, llvm::sys::getHostCPUName(),
                  llvm::join(missing, ", ")));
  }

  if (md.files.library.empty())
    return makeRuntimeError(
        FA_ERROR_INVALID_ARTIFACT,
        "has no shared library (files.library), only the object '" +
            md.files.object +
            "'; link it with `cc -shared -o NAME.so NAME.o -lm` and add "
            "files.library to the metadata");
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, md.files.library);
  if (!llvm::sys::fs::exists(path))
    return makeRuntimeError(FA_ERROR_IO, "cannot read the library '" + path +
                                             "': no such file");

  auto backend = std::make_unique<CpuBackend>();
  backend->numParams = md.params.size();
  backend->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!backend->handle) {
    const char *reason = dlerror();
    return makeRuntimeError(FA_ERROR_INVALID_ARTIFACT,
                            formatv("cannot load the library '{0}': {1}", path,
                                    reason ? reason : "unknown error"));
  }
  std::string symbol = "_mlir_ciface_" + md.symbol;
  backend->entry = dlsym(backend->handle, symbol.c_str());
  if (!backend->entry)
    return makeRuntimeError(FA_ERROR_INVALID_ARTIFACT,
                            formatv("the library '{0}' does not export '{1}'",
                                    path, symbol));
  return std::unique_ptr<Backend>(std::move(backend));
}

Error CpuBackend::launch(const LaunchArgs &args, void * /*cudaStream*/) {
  if (args.params.size() != numParams)
    return makeRuntimeError(FA_ERROR_LAUNCH, "wrong number of arguments");
  Descriptor descriptors[kMaxParams];
  void *p[kMaxParams] = {};
  for (auto [i, param] : llvm::enumerate(args.params)) {
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
  using P = void *;
  switch (numParams) {
  case 1:
    reinterpret_cast<void (*)(P)>(entry)(p[0]);
    break;
  case 2:
    reinterpret_cast<void (*)(P, P)>(entry)(p[0], p[1]);
    break;
  case 3:
    reinterpret_cast<void (*)(P, P, P)>(entry)(p[0], p[1], p[2]);
    break;
  case 4:
    reinterpret_cast<void (*)(P, P, P, P)>(entry)(p[0], p[1], p[2], p[3]);
    break;
  case 5:
    reinterpret_cast<void (*)(P, P, P, P, P)>(entry)(p[0], p[1], p[2], p[3],
                                                     p[4]);
    break;
  case 6:
    reinterpret_cast<void (*)(P, P, P, P, P, P)>(entry)(p[0], p[1], p[2],
                                                        p[3], p[4], p[5]);
    break;
  case 7:
    reinterpret_cast<void (*)(P, P, P, P, P, P, P)>(entry)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
    break;
  case 8:
    reinterpret_cast<void (*)(P, P, P, P, P, P, P, P)>(entry)(
        p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
    break;
  default:
    return makeRuntimeError(FA_ERROR_LAUNCH, "unsupported parameter count");
  }
  return Error::success();
}

Expected<std::unique_ptr<Backend>>
fa::runtime::loadCpuBackend(const KernelMetadata &md, StringRef dir) {
  return CpuBackend::load(md, dir);
}
