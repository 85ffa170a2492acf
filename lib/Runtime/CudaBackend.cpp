//===- CudaBackend.cpp - Loading and launching PTX/cubin artifacts --------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The CUDA backend: checks the artifact's PTX and cubin before the driver
// sees them, opens the driver with dlopen, checks the device's compute
// capability and shared memory against the artifact, loads the module and
// launches on the caller's stream with the metadata's block and a grid
// derived from its axes and the shapes.
// Error handling follows Triton's driver.c: every CUresult is checked and
// turned into a status with a message naming the call.
//
// Also the small memory helpers of the C API (fa_cuda_malloc, ...) and the
// device queries (fa_cuda_available, fa_cuda_device_chip).
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"
#include "RuntimeInternal.h"

#include "fa/Target/Chips.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>

using namespace fa::runtime;
using namespace fa::runtime::cuda;

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// The driver library FA_CUDA_DRIVER names, or libcuda.so.1.
static std::string getDriverPath() {
  const char *env = std::getenv("FA_CUDA_DRIVER");
  return env && *env ? env : "libcuda.so.1";
}

Result<std::unique_ptr<Driver>> Driver::open() {
  std::unique_ptr<Driver> driver(new Driver());
  driver->path = getDriverPath();
  driver->handle =
      dlopen(driver->path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!driver->handle) {
    const char *reason = dlerror();
    return makeFailure(
        FA_ERROR_NO_DRIVER,
        cat("cannot load the CUDA driver '", driver->path, "': ",
            reason ? reason : "unknown error",
            "; install the NVIDIA driver or set FA_CUDA_DRIVER to the path "
            "of libcuda.so.1"));
  }

  DriverApi &f = driver->fns;
  struct Entry {
    const char *name;
    void **slot;
  };
#define FA_ENTRY(name)                                                         \
  Entry { #name, reinterpret_cast<void **>(&f.name) }
  const Entry entries[] = {
      FA_ENTRY(cuInit),
      FA_ENTRY(cuDriverGetVersion),
      FA_ENTRY(cuDeviceGetCount),
      FA_ENTRY(cuDeviceGet),
      FA_ENTRY(cuDeviceGetAttribute),
      FA_ENTRY(cuCtxGetCurrent),
      FA_ENTRY(cuCtxSetCurrent),
      FA_ENTRY(cuCtxGetDevice),
      FA_ENTRY(cuCtxPushCurrent_v2),
      FA_ENTRY(cuCtxPopCurrent_v2),
      FA_ENTRY(cuDevicePrimaryCtxRetain),
      FA_ENTRY(cuDevicePrimaryCtxRelease_v2),
      FA_ENTRY(cuModuleLoadDataEx),
      FA_ENTRY(cuModuleUnload),
      FA_ENTRY(cuModuleGetFunction),
      FA_ENTRY(cuModuleGetGlobal_v2),
      FA_ENTRY(cuFuncSetAttribute),
      FA_ENTRY(cuLaunchKernel),
      FA_ENTRY(cuGetErrorName),
      FA_ENTRY(cuGetErrorString),
      FA_ENTRY(cuMemAlloc_v2),
      FA_ENTRY(cuMemFree_v2),
      FA_ENTRY(cuMemcpyHtoD_v2),
      FA_ENTRY(cuMemcpyDtoH_v2),
      FA_ENTRY(cuCtxSynchronize),
  };
#undef FA_ENTRY
  for (const Entry &entry : entries) {
    *entry.slot = dlsym(driver->handle, entry.name);
    if (!*entry.slot)
      return makeFailure(FA_ERROR_NO_DRIVER,
                         cat("the CUDA driver '", driver->path,
                             "' has no entry point '", entry.name,
                             "' (a driver older than CUDA 11, or not a CUDA "
                             "driver)"));
  }

  if (CUresult r = f.cuInit(0))
    return driver->error(r, "cuInit",
                         r == CUDA_ERROR_NO_DEVICE ? FA_ERROR_NO_DEVICE
                                                   : FA_ERROR_CUDA);
  return driver;
}

Result<Driver *> Driver::shared() {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Driver>> drivers;
  std::lock_guard<std::mutex> lock(mutex);
  std::string path = getDriverPath();
  auto it = drivers.find(path);
  if (it != drivers.end())
    return it->second.get();
  Result<std::unique_ptr<Driver>> driver = open();
  if (!driver)
    return driver.getFailure();
  Driver *raw = driver->get();
  // Kept for the life of the process: the helpers' context stays retained.
  drivers.emplace(path, std::move(*driver));
  return raw;
}

Driver::~Driver() {
  if (handle)
    dlclose(handle);
}

std::string Driver::describe(CUresult result) const {
  const char *name = nullptr, *text = nullptr;
  if (fns.cuGetErrorName && fns.cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (fns.cuGetErrorString &&
      fns.cuGetErrorString(result, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string out = name ? name : cat("CUresult ", result);
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

Failure Driver::error(CUresult result, const std::string &call,
                      int status) const {
  fa_status s = status < 0 ? FA_ERROR_CUDA : static_cast<fa_status>(status);
  return makeFailure(s, call + " failed: " + describe(result));
}

std::string Driver::getVersionString() const {
  int version = 0;
  if (fns.cuDriverGetVersion(&version) != CUDA_SUCCESS)
    return "unknown";
  return cat(version / 1000, ".", (version % 1000) / 10);
}

/// Device 0, or FA_ERROR_NO_DEVICE.
static Result<CUdevice> getFirstDevice(Driver &driver) {
  int count = 0;
  if (CUresult r = driver.api().cuDeviceGetCount(&count))
    return driver.error(r, "cuDeviceGetCount");
  if (count <= 0)
    return makeFailure(FA_ERROR_NO_DEVICE, "the CUDA driver '" +
                                               driver.getPath() +
                                               "' reports no device");
  CUdevice device = 0;
  if (CUresult r = driver.api().cuDeviceGet(&device, 0))
    return driver.error(r, "cuDeviceGet");
  return device;
}

Result<CUdevice> Driver::currentDevice() {
  CUcontext current = nullptr;
  if (CUresult r = fns.cuCtxGetCurrent(&current))
    return error(r, "cuCtxGetCurrent");
  if (!current)
    return getFirstDevice(*this);
  CUdevice device = 0;
  if (CUresult r = fns.cuCtxGetDevice(&device))
    return error(r, "cuCtxGetDevice");
  return device;
}

MaybeFailure Driver::ensureContext() {
  CUcontext current = nullptr;
  if (CUresult r = fns.cuCtxGetCurrent(&current))
    return error(r, "cuCtxGetCurrent");
  if (current)
    return std::nullopt;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!helperContext) {
    Result<CUdevice> device = getFirstDevice(*this);
    if (!device)
      return device.getFailure();
    if (CUresult r = fns.cuDevicePrimaryCtxRetain(&helperContext, *device))
      return error(r, "cuDevicePrimaryCtxRetain");
  }
  if (CUresult r = fns.cuCtxSetCurrent(helperContext))
    return error(r, "cuCtxSetCurrent");
  return std::nullopt;
}

MaybeFailure fa::runtime::getCudaDeviceCount(int &count) {
  count = 0;
  Result<std::unique_ptr<Driver>> driver = Driver::open();
  if (!driver)
    return driver.getFailure();
  int n = 0;
  if (CUresult r = (*driver)->api().cuDeviceGetCount(&n))
    return (*driver)->error(r, "cuDeviceGetCount");
  if (n <= 0)
    return makeFailure(FA_ERROR_NO_DEVICE, "the CUDA driver '" +
                                               (*driver)->getPath() +
                                               "' reports no device");
  count = n;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Memory helpers and device queries (the C API's fa_cuda_*)
//===----------------------------------------------------------------------===//

namespace fa {
namespace runtime {

MaybeFailure cudaDeviceChip(std::string &chip) {
  Result<Driver *> driver = Driver::shared();
  if (!driver)
    return driver.getFailure();
  Driver &drv = **driver;
  Result<CUdevice> device = drv.currentDevice();
  if (!device)
    return device.getFailure();
  int major = 0, minor = 0;
  if (CUresult r = drv.api().cuDeviceGetAttribute(
          &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *device))
    return drv.error(r, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  if (CUresult r = drv.api().cuDeviceGetAttribute(
          &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, *device))
    return drv.error(r, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  if (major <= 0 || major > 99 || minor < 0 || minor > 9)
    return makeFailure(FA_ERROR_CUDA,
                       cat("the CUDA driver reports an unexpected compute "
                           "capability ",
                           major, ".", minor));
  chip = cat("sm_", major, minor);
  return std::nullopt;
}

/// The shared driver with a current context, for the memory helpers.
static Result<Driver *> helperDriver() {
  Result<Driver *> driver = Driver::shared();
  if (!driver)
    return driver;
  if (MaybeFailure failure = (*driver)->ensureContext())
    return *failure;
  return driver;
}

static CUdeviceptr toDevice(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

MaybeFailure cudaMalloc(void **ptr, size_t bytes) {
  Result<Driver *> driver = helperDriver();
  if (!driver)
    return driver.getFailure();
  CUdeviceptr p = 0;
  if (CUresult r = (*driver)->api().cuMemAlloc_v2(&p, bytes))
    return (*driver)->error(r, cat("cuMemAlloc_v2(", bytes, " bytes)"));
  *ptr = reinterpret_cast<void *>(static_cast<uintptr_t>(p));
  return std::nullopt;
}

MaybeFailure cudaFree(void *ptr) {
  Result<Driver *> driver = helperDriver();
  if (!driver)
    return driver.getFailure();
  if (CUresult r = (*driver)->api().cuMemFree_v2(toDevice(ptr)))
    return (*driver)->error(r, "cuMemFree_v2(" + formatPointer(ptr) + ")");
  return std::nullopt;
}

MaybeFailure cudaMemcpyHtoD(void *dst, const void *src, size_t bytes) {
  Result<Driver *> driver = helperDriver();
  if (!driver)
    return driver.getFailure();
  if (CUresult r = (*driver)->api().cuMemcpyHtoD_v2(toDevice(dst), src, bytes))
    return (*driver)->error(r, cat("cuMemcpyHtoD_v2(", bytes, " bytes)"));
  return std::nullopt;
}

MaybeFailure cudaMemcpyDtoH(void *dst, const void *src, size_t bytes) {
  Result<Driver *> driver = helperDriver();
  if (!driver)
    return driver.getFailure();
  if (CUresult r = (*driver)->api().cuMemcpyDtoH_v2(dst, toDevice(src), bytes))
    return (*driver)->error(r, cat("cuMemcpyDtoH_v2(", bytes, " bytes)"));
  return std::nullopt;
}

MaybeFailure cudaSynchronize() {
  Result<Driver *> driver = helperDriver();
  if (!driver)
    return driver.getFailure();
  if (CUresult r = (*driver)->api().cuCtxSynchronize())
    return (*driver)->error(r, "cuCtxSynchronize");
  return std::nullopt;
}

} // namespace runtime
} // namespace fa

//===----------------------------------------------------------------------===//
// Artifact checks
//===----------------------------------------------------------------------===//

namespace {

/// A chip name such as sm_80, sm_90a or sm_100f.
struct Chip {
  int major = 0, minor = 0;
  char suffix = 0; ///< 0, 'a' (arch-specific) or 'f' (family)

  static std::optional<Chip> parse(std::string_view name) {
    std::optional<::fa::target::ChipName> parsed =
        ::fa::target::ChipName::parse(name);
    if (!parsed)
      return std::nullopt;
    Chip chip;
    chip.major = parsed->major;
    chip.minor = parsed->minor;
    chip.suffix = parsed->suffix;
    return chip;
  }

  /// Whether PTX for this chip can be JIT-compiled for compute capability
  /// (major, minor).
  bool ptxRunsOn(int devMajor, int devMinor) const {
    if (suffix == 'a')
      return devMajor == major && devMinor == minor;
    if (suffix == 'f')
      return devMajor == major && devMinor >= minor;
    return devMajor > major || (devMajor == major && devMinor >= minor);
  }

  /// Whether a cubin for this chip runs on (major, minor): same major,
  /// minor at least ours (exactly ours for `a`).
  bool cubinRunsOn(int devMajor, int devMinor) const {
    if (suffix == 'a')
      return devMajor == major && devMinor == minor;
    return devMajor == major && devMinor >= minor;
  }

  std::string requirement() const {
    if (suffix == 'a')
      return cat("runs only on compute capability ", major, ".", minor);
    if (suffix == 'f')
      return cat("needs compute capability ", major, ".x with x >= ", minor);
    return cat("needs compute capability ", major, ".", minor, " or newer");
  }
};

/// The first token after `directive` on a (comment-stripped) PTX line.
std::optional<std::string_view> getDirectiveOperand(std::string_view line,
                                                    std::string_view directive) {
  line = trim(line);
  if (!startsWith(line, directive))
    return std::nullopt;
  line.remove_prefix(directive.size());
  if (line.empty() || !isSpace(line.front()))
    return std::nullopt;
  line = trim(line);
  size_t end = line.find_first_of(" \t,;\r");
  return line.substr(0, end);
}

/// Checks the PTX text before the driver sees it; returns its `.version`.
Result<std::string> checkPtx(std::string_view text, const KernelMetadata &md,
                             const std::string &path) {
  auto invalid = [&](const std::string &message) {
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       "PTX '" + path + "' " + message);
  };
  if (text.find('\0') != std::string_view::npos)
    return invalid("contains NUL bytes: it is not PTX text");
  std::optional<std::string_view> version, target;
  std::vector<std::string> entries;
  for (std::string_view line : split(text, '\n')) {
    line = line.substr(0, line.find("//"));
    if (!version)
      if (std::optional<std::string_view> v =
              getDirectiveOperand(line, ".version"))
        version = v;
    if (!target)
      if (std::optional<std::string_view> t =
              getDirectiveOperand(line, ".target"))
        target = t;
    // `.entry name(` may follow `.visible`/`.weak` on the same line.
    for (size_t pos = line.find(".entry"); pos != std::string_view::npos;
         pos = line.find(".entry", pos + 6)) {
      std::string_view rest = line.substr(pos + 6);
      if (rest.empty() || !isSpace(rest.front()))
        continue;
      rest = trim(rest);
      size_t end = 0;
      while (end < rest.size() &&
             (isAlnum(rest[end]) || rest[end] == '_' || rest[end] == '$'))
        ++end;
      entries.emplace_back(rest.substr(0, end));
    }
  }
  if (!version)
    return invalid("has no .version directive: it is not PTX text");
  size_t dot = version->find('.');
  uint64_t ignored;
  if (dot == std::string_view::npos ||
      !parseUnsigned(version->substr(0, dot), ignored) ||
      !parseUnsigned(version->substr(dot + 1), ignored))
    return invalid("has a malformed .version '" + std::string(*version) + "'");
  if (*version != md.target.ptxIsa)
    return invalid("has .version " + std::string(*version) +
                   ", but the metadata's target.ptx_isa is " +
                   md.target.ptxIsa);
  if (!target)
    return invalid("has no .target directive");
  if (*target != md.target.chip)
    return invalid("has .target " + std::string(*target) +
                   ", but the metadata's target.chip is " + md.target.chip);
  if (std::find(entries.begin(), entries.end(), md.symbol) == entries.end())
    return invalid("has no .entry " + md.symbol +
                   " (the metadata's symbol); its entries: " +
                   (entries.empty() ? std::string("none")
                                    : join(entries, ", ")));
  const std::string &dkdv = md.launch->dkdvSymbol;
  if (!dkdv.empty() &&
      std::find(entries.begin(), entries.end(), dkdv) == entries.end())
    return invalid("has no .entry " + dkdv +
                   " (the metadata's launch.dkdv.symbol, the backward's dK/dV "
                   "kernel); its entries: " +
                   join(entries, ", "));
  const std::string &merge = md.launch->mergeSymbol;
  if (!merge.empty() &&
      std::find(entries.begin(), entries.end(), merge) == entries.end())
    return invalid("has no .entry " + merge +
                   " (the metadata's launch.merge.symbol, the split-KV "
                   "merge); its entries: " + join(entries, ", "));
  return std::string(*version);
}

//===----------------------------------------------------------------------===//
// CudaBackend
//===----------------------------------------------------------------------===//

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override;

  static Result<std::unique_ptr<Backend>> load(const KernelMetadata &md,
                                               const std::string &dir);

  MaybeFailure launch(const LaunchArgs &args, void *cudaStream) override;
  int64_t getMultiprocessorCount() const override { return multiprocessors; }

private:
  /// Launches `fn` over `grid` blocks of `block` threads.
  MaybeFailure launchOne(CUfunction fn, const std::string &symbol,
                         const std::array<int64_t, 3> &grid,
                         const std::array<int64_t, 3> &block,
                         int64_t dynamicShared, void *cudaStream,
                         std::vector<void *> &kernelParams);

  /// Makes `ctx` current on this thread if it is not; `pushed` says whether
  /// a matching popContext is due.
  MaybeFailure pushContext(bool &pushed);
  void popContext(bool pushed);

  /// Loads `image` into a module; the JIT error log goes into `log`.
  CUresult loadModule(const void *image, std::string &log);

  std::unique_ptr<Driver> driver;
  std::string name;
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  bool retainedPrimary = false;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  /// A split-KV kernel's merge entry (launch.merge), else null.
  CUfunction mergeFunction = nullptr;
  /// An attention_backward kernel's dK/dV entry (launch.dkdv), else null.
  CUfunction dkdvFunction = nullptr;
  int64_t multiprocessors = 0;
  KernelMetadata metadata;
  /// The indices of B, Nq, Nk and (split-KV) Ns in LaunchArgs::symbols.
  size_t batchSymbol = 0, queryLenSymbol = 0, keyLenSymbol = 0,
         splitsSymbol = 0;
};

} // namespace

CudaBackend::~CudaBackend() {
  if (module) {
    bool pushed = false;
    (void)pushContext(pushed);
    (void)driver->api().cuModuleUnload(module);
    popContext(pushed);
  }
  if (retainedPrimary)
    (void)driver->api().cuDevicePrimaryCtxRelease_v2(device);
}

MaybeFailure CudaBackend::pushContext(bool &pushed) {
  pushed = false;
  CUcontext current = nullptr;
  if (CUresult r = driver->api().cuCtxGetCurrent(&current))
    return driver->error(r, "cuCtxGetCurrent");
  if (current == ctx)
    return std::nullopt;
  if (CUresult r = driver->api().cuCtxPushCurrent_v2(ctx))
    return driver->error(r, "cuCtxPushCurrent_v2");
  pushed = true;
  return std::nullopt;
}

void CudaBackend::popContext(bool pushed) {
  if (!pushed)
    return;
  CUcontext popped = nullptr;
  (void)driver->api().cuCtxPopCurrent_v2(&popped);
}

CUresult CudaBackend::loadModule(const void *image, std::string &log) {
  char errorLog[8192] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog,
                    reinterpret_cast<void *>(uintptr_t(sizeof(errorLog) - 1))};
  CUresult r =
      driver->api().cuModuleLoadDataEx(&module, image, 2, options, values);
  if (r != CUDA_SUCCESS)
    module = nullptr;
  log = std::string(trim(std::string_view(
      errorLog, strnlen(errorLog, sizeof(errorLog)))));
  return r;
}

Result<std::unique_ptr<Backend>> CudaBackend::load(const KernelMetadata &md,
                                                   const std::string &dir) {
  std::optional<Chip> chip = Chip::parse(md.target.chip);
  if (!chip)
    return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                       "unsupported chip '" + md.target.chip + "'");

  // The files, checked before they reach the driver.
  std::string ptxPath, ptx, cubinPath, cubin, ptxVersion;
  if (!md.files.ptx.empty()) {
    ptxPath = joinPath(dir, md.files.ptx);
    Result<std::string> text = readArtifactFile(ptxPath, "PTX");
    if (!text)
      return text.getFailure();
    ptx = std::move(*text);
    Result<std::string> version = checkPtx(ptx, md, ptxPath);
    if (!version)
      return version.getFailure();
    ptxVersion = *version;
    std::string signatureSymbol = getSignatureSymbol(md);
    std::optional<std::string> compiled =
        findPtxSignature(ptx, signatureSymbol);
    if (!compiled)
      return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                         "PTX '" + ptxPath + "' declares no signature '" +
                             signatureSymbol +
                             "': it was not compiled by this fa-compile for "
                             "this metadata (recompile the kernel)");
    if (std::optional<std::string> diff = compareKernelSignature(*compiled, md))
      return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                         "the metadata does not describe the PTX '" + ptxPath +
                             "': " + *diff +
                             " (edited metadata or another kernel's files; "
                             "recompile the kernel)");
  }
  if (!md.files.cubin.empty()) {
    cubinPath = joinPath(dir, md.files.cubin);
    Result<std::string> data = readArtifactFile(cubinPath, "cubin");
    if (!data)
      return data.getFailure();
    cubin = std::move(*data);
    if (!startsWith(cubin, "\x7f"
                           "ELF"))
      return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                         "cubin '" + cubinPath + "' is not an ELF file");
  }

  auto backend = std::make_unique<CudaBackend>();
  backend->name = md.name;
  backend->metadata = md;
  std::vector<std::string> symbols = md.getSymbols();
  auto indexOf = [&](const char *symbol) {
    return static_cast<size_t>(
        std::find(symbols.begin(), symbols.end(), symbol) - symbols.begin());
  };
  backend->batchSymbol = indexOf("B");
  // A variable-length batch's query tiles cover the longest sequence,
  // at most Tq rows; the blocks past a sequence's rows return at once.
  backend->queryLenSymbol = indexOf(md.varlen ? "Tq" : "Nq");
  backend->splitsSymbol = indexOf("Ns");
  backend->keyLenSymbol = indexOf("Nk");

  // The driver and a context.
  Result<std::unique_ptr<Driver>> driver = Driver::open();
  if (!driver)
    return driver.getFailure();
  backend->driver = std::move(*driver);
  Driver &drv = *backend->driver;
  const DriverApi &api = drv.api();
  if (CUresult r = api.cuCtxGetCurrent(&backend->ctx))
    return drv.error(r, "cuCtxGetCurrent");
  if (backend->ctx) {
    if (CUresult r = api.cuCtxGetDevice(&backend->device))
      return drv.error(r, "cuCtxGetDevice");
  } else {
    Result<CUdevice> first = getFirstDevice(drv);
    if (!first)
      return first.getFailure();
    backend->device = *first;
    if (CUresult r =
            api.cuDevicePrimaryCtxRetain(&backend->ctx, backend->device))
      return drv.error(r, "cuDevicePrimaryCtxRetain");
    backend->retainedPrimary = true;
    if (CUresult r = api.cuCtxSetCurrent(backend->ctx))
      return drv.error(r, "cuCtxSetCurrent");
  }

  // The device against the artifact.
  int ccMajor = 0, ccMinor = 0, optinShared = 0;
  if (CUresult r = api.cuDeviceGetAttribute(
          &ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
          backend->device))
    return drv.error(r, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  if (CUresult r = api.cuDeviceGetAttribute(
          &ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
          backend->device))
    return drv.error(r, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  std::string deviceText = cat("device ", backend->device,
                               " has compute capability ", ccMajor, ".",
                               ccMinor, " (sm_", ccMajor, ccMinor, ")");
  bool cubinUsable = !cubin.empty() && chip->cubinRunsOn(ccMajor, ccMinor);
  bool ptxUsable = !ptx.empty() && chip->ptxRunsOn(ccMajor, ccMinor);
  if (!ptxUsable && !cubinUsable) {
    if (!chip->ptxRunsOn(ccMajor, ccMinor))
      return makeFailure(FA_ERROR_UNSUPPORTED_ARCH,
                         cat("targets ", md.target.chip, ", which ",
                             chip->requirement(), ", but ", deviceText));
    return makeFailure(FA_ERROR_UNSUPPORTED_ARCH,
                       cat("has no PTX to JIT-compile and its cubin for ",
                           md.target.chip, " does not run on this device: ",
                           deviceText));
  }
  if (CUresult r = api.cuDeviceGetAttribute(
          &optinShared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
          backend->device))
    return drv.error(r, "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_"
                        "OPTIN)");
  int64_t sharedBytes =
      md.launch->staticSharedBytes + md.launch->dynamicSharedBytes;
  if (!md.launch->dkdvSymbol.empty() &&
      md.launch->dkdvStaticSharedBytes > optinShared)
    return makeFailure(
        FA_ERROR_UNSUPPORTED_ARCH,
        cat("its dK/dV kernel needs ", md.launch->dkdvStaticSharedBytes,
            " bytes of static shared memory per block, but device ",
            backend->device, " allows at most ", optinShared));
  if (sharedBytes > optinShared)
    return makeFailure(
        FA_ERROR_UNSUPPORTED_ARCH,
        cat("needs ", sharedBytes, " bytes of shared memory per block (static ",
            md.launch->staticSharedBytes, " + dynamic ",
            md.launch->dynamicSharedBytes, "), but device ", backend->device,
            " allows at most ", optinShared));

  // The module: the cubin when it runs here, else the PTX.
  std::string cubinFailure;
  if (cubinUsable) {
    std::string log;
    if (CUresult r = backend->loadModule(cubin.data(), log)) {
      cubinFailure = "cuModuleLoadDataEx failed on the cubin '" + cubinPath +
                     "': " + drv.describe(r) + (log.empty() ? "" : ": " + log);
      if (!ptxUsable)
        return makeFailure(FA_ERROR_CUDA, cubinFailure);
    }
  }
  // The cubin carries the signature as a global, which the driver reads
  // back (PTX was checked as text above).
  if (backend->module) {
    std::string signatureSymbol = getSignatureSymbol(md);
    CUdeviceptr global = 0;
    size_t bytes = 0;
    CUresult r = api.cuModuleGetGlobal_v2(&global, &bytes, backend->module,
                                          signatureSymbol.c_str());
    if (r == CUDA_ERROR_NOT_FOUND)
      return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                         "cubin '" + cubinPath + "' has no signature '" +
                             signatureSymbol +
                             "': it was not compiled by this fa-compile for "
                             "this metadata (recompile the kernel)");
    if (r)
      return drv.error(r, "cuModuleGetGlobal_v2('" + signatureSymbol + "')");
    if (bytes == 0 || bytes > (1u << 20))
      return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                         cat("cubin '", cubinPath, "': its signature '",
                             signatureSymbol, "' has ", bytes, " bytes"));
    std::string compiled(bytes, '\0');
    if (CUresult r2 = api.cuMemcpyDtoH_v2(compiled.data(), global, bytes))
      return drv.error(r2, "cuMemcpyDtoH_v2 (the cubin's signature)");
    compiled.resize(strnlen(compiled.data(), bytes));
    if (std::optional<std::string> diff = compareKernelSignature(compiled, md))
      return makeFailure(FA_ERROR_INVALID_ARTIFACT,
                         "the metadata does not describe the cubin '" +
                             cubinPath + "': " + *diff +
                             " (edited metadata or another kernel's files; "
                             "recompile the kernel)");
  }
  if (!backend->module) {
    std::string log;
    if (CUresult r = backend->loadModule(ptx.c_str(), log)) {
      std::string also =
          cubinFailure.empty() ? "" : " (after: " + cubinFailure + ")";
      std::string logText = log.empty() ? "" : ": " + log;
      if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        return makeFailure(
            FA_ERROR_PTX_TOO_NEW,
            cat("the CUDA driver (version ", drv.getVersionString(),
                ") does not support PTX ISA ", ptxVersion, " of '", ptxPath,
                "' (", drv.describe(r),
                "); update the driver or regenerate the PTX for an older PTX "
                "ISA",
                logText, also));
      fa_status status = r == CUDA_ERROR_INVALID_PTX ||
                                 r == CUDA_ERROR_INVALID_IMAGE
                             ? FA_ERROR_INVALID_ARTIFACT
                         : r == CUDA_ERROR_NO_BINARY_FOR_GPU
                             ? FA_ERROR_UNSUPPORTED_ARCH
                             : FA_ERROR_CUDA;
      return makeFailure(status, "cuModuleLoadDataEx failed on the PTX '" +
                                     ptxPath + "': " + drv.describe(r) +
                                     logText + also);
    }
  }

  if (CUresult r = api.cuModuleGetFunction(&backend->function, backend->module,
                                           md.symbol.c_str()))
    return drv.error(r, "cuModuleGetFunction('" + md.symbol + "')",
                     r == CUDA_ERROR_NOT_FOUND ? FA_ERROR_INVALID_ARTIFACT
                                               : FA_ERROR_CUDA);
  if (!md.launch->mergeSymbol.empty()) {
    if (CUresult r = api.cuModuleGetFunction(&backend->mergeFunction,
                                             backend->module,
                                             md.launch->mergeSymbol.c_str()))
      return drv.error(r,
                       "cuModuleGetFunction('" + md.launch->mergeSymbol +
                           "') (the split-KV merge entry)",
                       r == CUDA_ERROR_NOT_FOUND ? FA_ERROR_INVALID_ARTIFACT
                                                 : FA_ERROR_CUDA);
    int count = 0;
    if (CUresult r = api.cuDeviceGetAttribute(
            &count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, backend->device))
      return drv.error(r, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
    backend->multiprocessors = count;
  }
  if (!md.launch->dkdvSymbol.empty())
    if (CUresult r =
            api.cuModuleGetFunction(&backend->dkdvFunction, backend->module,
                                    md.launch->dkdvSymbol.c_str()))
      return drv.error(r,
                       "cuModuleGetFunction('" + md.launch->dkdvSymbol +
                           "') (the backward's dK/dV entry)",
                       r == CUDA_ERROR_NOT_FOUND ? FA_ERROR_INVALID_ARTIFACT
                                                 : FA_ERROR_CUDA);
  if (md.launch->dynamicSharedBytes > kDefaultDynamicSharedBytes)
    if (CUresult r = api.cuFuncSetAttribute(
            backend->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(md.launch->dynamicSharedBytes)))
      return drv.error(r, cat("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_"
                              "BYTES, ",
                              md.launch->dynamicSharedBytes, ")"));
  return std::unique_ptr<Backend>(std::move(backend));
}

MaybeFailure CudaBackend::launchOne(CUfunction fn, const std::string &symbol,
                                    const std::array<int64_t, 3> &grid,
                                    const std::array<int64_t, 3> &block,
                                    int64_t dynamicShared, void *cudaStream,
                                    std::vector<void *> &kernelParams) {
  std::array<unsigned, 3> gridDims;
  static constexpr int64_t limits[3] = {2147483647, 65535, 65535};
  static constexpr const char *axes[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    if (grid[i] < 0 || grid[i] > limits[i])
      return makeFailure(
          FA_ERROR_INVALID_ARGUMENT,
          cat("grid.", axes[i], " of '", symbol, "' = ", grid[i],
              " is outside CUDA's range [0, ", limits[i], "]"));
    gridDims[i] = static_cast<unsigned>(grid[i]);
  }
  bool pushed = false;
  if (MaybeFailure err = pushContext(pushed))
    return err;
  CUresult r = driver->api().cuLaunchKernel(
      fn, gridDims[0], gridDims[1], gridDims[2],
      static_cast<unsigned>(block[0]), static_cast<unsigned>(block[1]),
      static_cast<unsigned>(block[2]), static_cast<unsigned>(dynamicShared),
      static_cast<CUstream>(cudaStream), kernelParams.data(), nullptr);
  popContext(pushed);
  if (r != CUDA_SUCCESS)
    return driver->error(
        r,
        cat("cuLaunchKernel('", symbol, "', grid [", gridDims[0], ", ",
            gridDims[1], ", ", gridDims[2], "], block [", block[0], ", ",
            block[1], ", ", block[2], "], ", dynamicShared,
            " bytes of dynamic shared memory)"),
        FA_ERROR_LAUNCH);
  return std::nullopt;
}

MaybeFailure CudaBackend::launch(const LaunchArgs &args, void *cudaStream) {
  // The grids from the metadata's axes and the shapes.
  const LaunchInfo &launchInfo = *metadata.launch;
  int64_t batch = args.symbols[batchSymbol];
  int64_t queryLen = args.symbols[queryLenSymbol];
  int64_t numSplits = metadata.splitKv ? args.symbols[splitsSymbol] : 1;
  std::array<int64_t, 3> grid =
      getLaunchGrid(metadata, batch, queryLen, numSplits);
  static constexpr int64_t limits[3] = {2147483647, 65535, 65535};
  static constexpr const char *axes[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i)
    if (grid[i] < 0 || grid[i] > limits[i])
      return makeFailure(
          FA_ERROR_INVALID_ARGUMENT,
          cat("grid.", axes[i], " = ", getGridAxisName(launchInfo.grid[i]),
              i == 0 && metadata.splitKv ? " x Ns" : "", " = ", grid[i],
              " is outside CUDA's range [0, ", limits[i], "]"));
  // The backward's dK/dV grid, checked before either kernel launches.
  std::array<int64_t, 3> dkdvGrid = {0, 0, 0};
  if (dkdvFunction) {
    dkdvGrid = getDkdvGrid(metadata, batch, args.symbols[keyLenSymbol]);
    for (int i = 0; i < 3; ++i)
      if (dkdvGrid[i] < 0 || dkdvGrid[i] > limits[i])
        return makeFailure(
            FA_ERROR_INVALID_ARGUMENT,
            cat("grid.", axes[i], " of '", launchInfo.dkdvSymbol,
                "' = ", getGridAxisName(launchInfo.dkdvGrid[i]), " = ",
                dkdvGrid[i], " is outside CUDA's range [0, ", limits[i], "]"));
  }
  auto isEmpty = [](const std::array<int64_t, 3> &g) {
    return g[0] == 0 || g[1] == 0 || g[2] == 0;
  };
  // Nothing to launch (the backward: Nq = 0 still zeroes dK and dV).
  if (isEmpty(grid) && (!dkdvFunction || isEmpty(dkdvGrid)))
    return std::nullopt;

  // The expanded memref descriptors: per param allocated and aligned
  // pointers, offset, sizes, strides, each a separate kernel parameter.
  std::vector<int64_t> values;
  values.reserve(args.params.size() * (3 + 2 * kMaxParamRank));
  for (const BoundParam &param : args.params) {
    auto ptr = static_cast<int64_t>(reinterpret_cast<intptr_t>(param.data));
    values.push_back(ptr);
    values.push_back(ptr);
    values.push_back(0);
    for (int64_t i = 0; i < param.rank; ++i)
      values.push_back(param.sizes[i]);
    for (int64_t i = 0; i < param.rank; ++i)
      values.push_back(param.strides[i]);
  }
  std::vector<void *> kernelParams;
  kernelParams.reserve(values.size());
  for (int64_t &value : values)
    kernelParams.push_back(&value);

  // Split-KV: check both grids before launching either.
  std::array<int64_t, 3> mergeGrid = {0, 0, 0};
  if (mergeFunction) {
    mergeGrid = getMergeGrid(metadata, batch, queryLen);
    if (mergeGrid[0] > 2147483647)
      return makeFailure(FA_ERROR_INVALID_ARGUMENT,
                         cat("grid.x of '", launchInfo.mergeSymbol,
                             "' = ", mergeGrid[0],
                             " is outside CUDA's range [0, 2147483647]"));
  }
  if (!isEmpty(grid))
    if (MaybeFailure err =
            launchOne(function, metadata.symbol, grid, launchInfo.block,
                      launchInfo.dynamicSharedBytes, cudaStream, kernelParams))
      return err;
  // The backward: dK and dV, independent of dQ (the same stream orders
  // them all the same).
  if (dkdvFunction) {
    if (isEmpty(dkdvGrid))
      return std::nullopt;
    return launchOne(dkdvFunction, launchInfo.dkdvSymbol, dkdvGrid,
                     launchInfo.block, 0, cudaStream, kernelParams);
  }
  // The merge reads every part the first kernel wrote: the stream orders
  // them.
  if (mergeFunction)
    return launchOne(mergeFunction, launchInfo.mergeSymbol, mergeGrid,
                     launchInfo.mergeBlock, 0, cudaStream, kernelParams);
  return std::nullopt;
}

Result<std::unique_ptr<Backend>>
fa::runtime::loadCudaBackend(const KernelMetadata &md, const std::string &dir) {
  return CudaBackend::load(md, dir);
}
