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
// launches with the metadata's grid and block on the caller's stream.
// Error handling follows Triton's driver.c: every CUresult is checked and
// turned into a status with a message naming the call.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"
#include "RuntimeInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <array>
#include <cstdlib>
#include <dlfcn.h>

using namespace fa::runtime;
using namespace fa::runtime::cuda;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

Expected<std::unique_ptr<Driver>> Driver::open() {
  std::unique_ptr<Driver> driver(new Driver());
  const char *env = std::getenv("FA_CUDA_DRIVER");
  driver->path = env && *env ? env : "libcuda.so.1";
  driver->handle =
      dlopen(driver->path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!driver->handle) {
    const char *reason = dlerror();
    return makeRuntimeError(
        FA_ERROR_NO_DRIVER,
        formatv("cannot load the CUDA driver '{0}': {1}; install the NVIDIA "
                "driver or set FA_CUDA_DRIVER to the path of libcuda.so.1",
                driver->path, reason ? reason : "unknown error"));
  }

  DriverApi &f = driver->fns;
  struct Entry {
    const char *name;
    void **slot;
  };
  const Entry entries[] = {
      {"cuInit", reinterpret_cast<void **>(&f.cuInit)},
      {"cuDriverGetVersion", reinterpret_cast<void **>(&f.cuDriverGetVersion)},
      {"cuDeviceGetCount", reinterpret_cast<void **>(&f.cuDeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void **>(&f.cuDeviceGet)},
      {"cuDeviceGetAttribute",
       reinterpret_cast<void **>(&f.cuDeviceGetAttribute)},
      {"cuCtxGetCurrent", reinterpret_cast<void **>(&f.cuCtxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void **>(&f.cuCtxSetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void **>(&f.cuCtxGetDevice)},
      {"cuCtxPushCurrent_v2", reinterpret_cast<void **>(&f.cuCtxPushCurrent_v2)},
      {"cuCtxPopCurrent_v2", reinterpret_cast<void **>(&f.cuCtxPopCurrent_v2)},
      {"cuDevicePrimaryCtxRetain",
       reinterpret_cast<void **>(&f.cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease_v2",
       reinterpret_cast<void **>(&f.cuDevicePrimaryCtxRelease_v2)},
      {"cuModuleLoadDataEx", reinterpret_cast<void **>(&f.cuModuleLoadDataEx)},
      {"cuModuleUnload", reinterpret_cast<void **>(&f.cuModuleUnload)},
      {"cuModuleGetFunction",
       reinterpret_cast<void **>(&f.cuModuleGetFunction)},
      {"cuFuncSetAttribute", reinterpret_cast<void **>(&f.cuFuncSetAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void **>(&f.cuLaunchKernel)},
      {"cuGetErrorName", reinterpret_cast<void **>(&f.cuGetErrorName)},
      {"cuGetErrorString", reinterpret_cast<void **>(&f.cuGetErrorString)},
  };
  for (const Entry &entry : entries) {
    *entry.slot = dlsym(driver->handle, entry.name);
    if (!*entry.slot)
      return makeRuntimeError(
          FA_ERROR_NO_DRIVER,
          formatv("the CUDA driver '{0}' has no entry point '{1}' (a driver "
                  "older than CUDA 11, or not a CUDA driver)",
                  driver->path, entry.name));
  }

  if (CUresult r = f.cuInit(0))
    return driver->error(r, "cuInit",
                         r == CUDA_ERROR_NO_DEVICE ? FA_ERROR_NO_DEVICE
                                                   : FA_ERROR_CUDA);
  return std::move(driver);
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
  std::string out = name ? name : formatv("CUresult {0}", result).str();
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

Error Driver::error(CUresult result, StringRef call, int status) const {
  fa_status s = status < 0 ? FA_ERROR_CUDA : static_cast<fa_status>(status);
  return makeRuntimeError(s, call + " failed: " + describe(result));
}

std::string Driver::getVersionString() const {
  int version = 0;
  if (fns.cuDriverGetVersion(&version) != CUDA_SUCCESS)
    return "unknown";
  return formatv("{0}.{1}", version / 1000, (version % 1000) / 10).str();
}

Error fa::runtime::getCudaDeviceCount(int &count) {
  count = 0;
  Expected<std::unique_ptr<Driver>> driver = Driver::open();
  if (!driver)
    return driver.takeError();
  int n = 0;
  if (CUresult r = (*driver)->api().cuDeviceGetCount(&n))
    return (*driver)->error(r, "cuDeviceGetCount");
  if (n <= 0)
    return makeRuntimeError(FA_ERROR_NO_DEVICE,
                            "the CUDA driver '" + (*driver)->getPath() +
                                "' reports no device");
  count = n;
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Artifact checks
//===----------------------------------------------------------------------===//

namespace {

/// A chip name such as sm_80, sm_90a or sm_100f.
struct Chip {
  int major = 0, minor = 0;
  char suffix = 0; ///< 0, 'a' (arch-specific) or 'f' (family)

  static std::optional<Chip> parse(StringRef name) {
    if (!name.consume_front("sm_"))
      return std::nullopt;
    Chip chip;
    if (name.ends_with("a") || name.ends_with("f")) {
      chip.suffix = name.back();
      name = name.drop_back();
    }
    unsigned value;
    if (name.empty() || name.getAsInteger(10, value) || value < 10)
      return std::nullopt;
    chip.major = value / 10;
    chip.minor = value % 10;
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
      return formatv("runs only on compute capability {0}.{1}", major, minor);
    if (suffix == 'f')
      return formatv("needs compute capability {0}.x with x >= {1}", major,
                     minor);
    return formatv("needs compute capability {0}.{1} or newer", major, minor);
  }
};

/// The first token after `directive` on a (comment-stripped) PTX line.
std::optional<StringRef> getDirectiveOperand(StringRef line,
                                             StringRef directive) {
  line = line.ltrim();
  if (!line.consume_front(directive) || line.empty() ||
      !llvm::isSpace(line.front()))
    return std::nullopt;
  line = line.ltrim();
  size_t end = line.find_first_of(" \t,;\r");
  return line.substr(0, end);
}

/// Checks the PTX text before the driver sees it; returns its `.version`.
Expected<std::string> checkPtx(StringRef text, const KernelMetadata &md,
                               StringRef path) {
  auto invalid = [&](const Twine &message) {
    return makeRuntimeError(FA_ERROR_INVALID_ARTIFACT,
                            "PTX '" + path + "' " + message);
  };
  if (text.contains('\0'))
    return invalid("contains NUL bytes: it is not PTX text");
  std::optional<StringRef> version, target;
  llvm::SmallVector<StringRef> entries;
  llvm::SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines) {
    line = line.substr(0, line.find("//"));
    if (!version)
      if (std::optional<StringRef> v = getDirectiveOperand(line, ".version"))
        version = v;
    if (!target)
      if (std::optional<StringRef> t = getDirectiveOperand(line, ".target"))
        target = t;
    // `.entry name(` may follow `.visible`/`.weak` on the same line.
    for (size_t pos = line.find(".entry"); pos != StringRef::npos;
         pos = line.find(".entry", pos + 6)) {
      StringRef rest = line.substr(pos + 6);
      if (rest.empty() || !llvm::isSpace(rest.front()))
        continue;
      rest = rest.ltrim();
      size_t end = rest.find_if_not(
          [](char c) { return llvm::isAlnum(c) || c == '_' || c == '$'; });
      entries.push_back(rest.substr(0, end));
    }
  }
  if (!version)
    return invalid("has no .version directive: it is not PTX text");
  auto [major, minor] = version->split('.');
  unsigned ignored;
  if (major.getAsInteger(10, ignored) || minor.getAsInteger(10, ignored))
    return invalid("has a malformed .version '" + *version + "'");
  if (*version != md.target.ptxIsa)
    return invalid("has .version " + *version +
                   ", but the metadata's target.ptx_isa is " +
                   md.target.ptxIsa);
  if (!target)
    return invalid("has no .target directive");
  if (*target != md.target.chip)
    return invalid("has .target " + *target +
                   ", but the metadata's target.chip is " + md.target.chip);
  if (!llvm::is_contained(entries, StringRef(md.symbol)))
    return invalid("has no .entry " + md.symbol +
                   " (the metadata's symbol); its entries: " +
                   (entries.empty() ? std::string("none")
                                    : llvm::join(entries, ", ")));
  return version->str();
}

//===----------------------------------------------------------------------===//
// CudaBackend
//===----------------------------------------------------------------------===//

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override;

  static Expected<std::unique_ptr<Backend>> load(const KernelMetadata &md,
                                                 StringRef dir);

  Error launch(const LaunchArgs &args, void *cudaStream) override;

private:
  /// Makes `ctx` current on this thread if it is not; `pushed` says whether
  /// a matching popContext is due.
  Error pushContext(bool &pushed);
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
  LaunchInfo launchInfo;
  llvm::SmallVector<LaunchExpr, 3> grid;
};

} // namespace

CudaBackend::~CudaBackend() {
  if (module) {
    bool pushed = false;
    if (Error err = pushContext(pushed))
      llvm::consumeError(std::move(err));
    (void)driver->api().cuModuleUnload(module);
    popContext(pushed);
  }
  if (retainedPrimary)
    (void)driver->api().cuDevicePrimaryCtxRelease_v2(device);
}

Error CudaBackend::pushContext(bool &pushed) {
  pushed = false;
  CUcontext current = nullptr;
  if (CUresult r = driver->api().cuCtxGetCurrent(&current))
    return driver->error(r, "cuCtxGetCurrent");
  if (current == ctx)
    return Error::success();
  if (CUresult r = driver->api().cuCtxPushCurrent_v2(ctx))
    return driver->error(r, "cuCtxPushCurrent_v2");
  pushed = true;
  return Error::success();
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
  log = StringRef(errorLog, strnlen(errorLog, sizeof(errorLog))).trim().str();
  return r;
}

Expected<std::unique_ptr<Backend>> CudaBackend::load(const KernelMetadata &md,
                                                     StringRef dir) {
  std::optional<Chip> chip = Chip::parse(md.target.chip);
  assert(chip && "verified chip");
  auto resolve = [&](StringRef file) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, file);
    return std::string(path);
  };

  // The files, checked before they reach the driver.
  std::string ptxPath, ptx, cubinPath, cubin, ptxVersion;
  if (!md.files.ptx.empty()) {
    ptxPath = resolve(md.files.ptx);
    Expected<std::string> text = readArtifactFile(ptxPath, "PTX");
    if (!text)
      return text.takeError();
    ptx = std::move(*text);
    Expected<std::string> version = checkPtx(ptx, md, ptxPath);
    if (!version)
      return version.takeError();
    ptxVersion = *version;
  }
  if (!md.files.cubin.empty()) {
    cubinPath = resolve(md.files.cubin);
    Expected<std::string> data = readArtifactFile(cubinPath, "cubin");
    if (!data)
      return data.takeError();
    cubin = std::move(*data);
    if (!StringRef(cubin).starts_with("\x7f"
                                      "ELF"))
      return makeRuntimeError(FA_ERROR_INVALID_ARTIFACT,
                              "cubin '" + cubinPath + "' is not an ELF file");
  }

  auto backend = std::make_unique<CudaBackend>();
  backend->name = md.name;
  backend->launchInfo = *md.launch;
  llvm::SmallVector<std::string> symbols = md.getSymbols();
  for (const std::string &text : md.launch->grid) {
    Expected<LaunchExpr> expr = LaunchExpr::parse(text, symbols);
    if (!expr)
      return withStatus(expr.takeError(), FA_ERROR_INVALID_ARTIFACT,
                        "launch.grid: ");
    backend->grid.push_back(std::move(*expr));
  }

  // The driver and a context.
  Expected<std::unique_ptr<Driver>> driver = Driver::open();
  if (!driver)
    return driver.takeError();
  backend->driver = std::move(*driver);
  Driver &drv = *backend->driver;
  const DriverApi &api = drv.api();
  if (CUresult r = api.cuCtxGetCurrent(&backend->ctx))
    return drv.error(r, "cuCtxGetCurrent");
  if (backend->ctx) {
    if (CUresult r = api.cuCtxGetDevice(&backend->device))
      return drv.error(r, "cuCtxGetDevice");
  } else {
    int count = 0;
    if (CUresult r = api.cuDeviceGetCount(&count))
      return drv.error(r, "cuDeviceGetCount");
    if (count <= 0)
      return makeRuntimeError(FA_ERROR_NO_DEVICE,
                              "the CUDA driver '" + drv.getPath() +
                                  "' reports no device");
    if (CUresult r = api.cuDeviceGet(&backend->device, 0))
      return drv.error(r, "cuDeviceGet");
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
  std::string deviceText =
      formatv("device {0} has compute capability {1}.{2} (sm_{1}{2})",
              backend->device, ccMajor, ccMinor)
          .str();
  bool cubinUsable = !cubin.empty() && chip->cubinRunsOn(ccMajor, ccMinor);
  bool ptxUsable = !ptx.empty() && chip->ptxRunsOn(ccMajor, ccMinor);
  if (!ptxUsable && !cubinUsable) {
    if (!chip->ptxRunsOn(ccMajor, ccMinor))
      return makeRuntimeError(FA_ERROR_UNSUPPORTED_ARCH,
                              formatv("targets {0}, which {1}, but {2}",
                                      md.target.chip, chip->requirement(),
                                      deviceText));
    return makeRuntimeError(
        FA_ERROR_UNSUPPORTED_ARCH,
        formatv("has no PTX to JIT-compile and its cubin for {0} does not "
                "run on this device: {1}",
                md.target.chip, deviceText));
  }
  if (CUresult r = api.cuDeviceGetAttribute(
          &optinShared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
          backend->device))
    return drv.error(r, "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_"
                        "OPTIN)");
  int64_t sharedBytes =
      md.launch->staticSharedBytes + md.launch->dynamicSharedBytes;
  if (sharedBytes > optinShared)
    return makeRuntimeError(
        FA_ERROR_UNSUPPORTED_ARCH,
        formatv("needs {0} bytes of shared memory per block (static {1} + "
                "dynamic {2}), but device {3} allows at most {4}",
                sharedBytes, md.launch->staticSharedBytes,
                md.launch->dynamicSharedBytes, backend->device, optinShared));

  // The module: the cubin when it runs here, else the PTX.
  std::string cubinFailure;
  if (cubinUsable) {
    std::string log;
    if (CUresult r = backend->loadModule(cubin.data(), log)) {
      cubinFailure = "cuModuleLoadDataEx failed on the cubin '" + cubinPath +
                     "': " + drv.describe(r) + (log.empty() ? "" : ": " + log);
      if (!ptxUsable)
        return makeRuntimeError(FA_ERROR_CUDA, cubinFailure);
    }
  }
  if (!backend->module) {
    std::string log;
    if (CUresult r = backend->loadModule(ptx.c_str(), log)) {
      std::string also =
          cubinFailure.empty() ? "" : " (after: " + cubinFailure + ")";
      std::string logText = log.empty() ? "" : ": " + log;
      if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        return makeRuntimeError(
            FA_ERROR_PTX_TOO_NEW,
            formatv("the CUDA driver (version {0}) does not support PTX ISA "
                    "{1} of '{2}' ({3}); update the driver or regenerate the "
                    "PTX for an older PTX ISA{4}{5}",
                    drv.getVersionString(), ptxVersion, ptxPath,
                    drv.describe(r), logText, also));
      fa_status status = r == CUDA_ERROR_INVALID_PTX ||
                                 r == CUDA_ERROR_INVALID_IMAGE
                             ? FA_ERROR_INVALID_ARTIFACT
                         : r == CUDA_ERROR_NO_BINARY_FOR_GPU
                             ? FA_ERROR_UNSUPPORTED_ARCH
                             : FA_ERROR_CUDA;
      return makeRuntimeError(status, "cuModuleLoadDataEx failed on the PTX '" +
                                          ptxPath + "': " + drv.describe(r) +
                                          logText + also);
    }
  }

  if (CUresult r = api.cuModuleGetFunction(&backend->function, backend->module,
                                           md.symbol.c_str()))
    return drv.error(r, "cuModuleGetFunction('" + md.symbol + "')",
                     r == CUDA_ERROR_NOT_FOUND ? FA_ERROR_INVALID_ARTIFACT
                                               : FA_ERROR_CUDA);
  if (md.launch->dynamicSharedBytes > kDefaultDynamicSharedBytes)
    if (CUresult r = api.cuFuncSetAttribute(
            backend->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            static_cast<int>(md.launch->dynamicSharedBytes)))
      return drv.error(
          r, formatv("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {0})",
                     md.launch->dynamicSharedBytes)
                 .str());
  return std::unique_ptr<Backend>(std::move(backend));
}

Error CudaBackend::launch(const LaunchArgs &args, void *cudaStream) {
  // Grid from the metadata's expressions.
  std::array<unsigned, 3> gridDims;
  static constexpr int64_t limits[3] = {2147483647, 65535, 65535};
  static constexpr const char *axes[3] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    Expected<int64_t> value = grid[i].evaluate(args.symbols);
    if (!value)
      return withStatus(value.takeError(), FA_ERROR_INVALID_ARGUMENT,
                        formatv("grid.{0}: ", axes[i]).str());
    if (*value < 0 || *value > limits[i])
      return makeRuntimeError(
          FA_ERROR_INVALID_ARGUMENT,
          formatv("grid.{0} = {1} = {2} is outside CUDA's range [0, {3}]",
                  axes[i], grid[i].getText(), *value, limits[i]));
    if (*value == 0)
      return Error::success(); // nothing to launch
    gridDims[i] = static_cast<unsigned>(*value);
  }

  // The expanded memref descriptors: per param allocated and aligned
  // pointers, offset, sizes, strides, each a separate kernel parameter.
  llvm::SmallVector<int64_t, 64> values;
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
  llvm::SmallVector<void *, 64> kernelParams;
  for (int64_t &value : values)
    kernelParams.push_back(&value);

  bool pushed = false;
  if (Error err = pushContext(pushed))
    return err;
  CUresult r = driver->api().cuLaunchKernel(
      function, gridDims[0], gridDims[1], gridDims[2], launchInfo.block[0],
      launchInfo.block[1], launchInfo.block[2],
      static_cast<unsigned>(launchInfo.dynamicSharedBytes),
      static_cast<CUstream>(cudaStream), kernelParams.data(), nullptr);
  popContext(pushed);
  if (r != CUDA_SUCCESS)
    return driver->error(
        r,
        formatv("cuLaunchKernel(grid [{0}, {1}, {2}], block [{3}, {4}, {5}], "
                "{6} bytes of dynamic shared memory)",
                gridDims[0], gridDims[1], gridDims[2], launchInfo.block[0],
                launchInfo.block[1], launchInfo.block[2],
                launchInfo.dynamicSharedBytes)
            .str(),
        FA_ERROR_LAUNCH);
  return Error::success();
}

Expected<std::unique_ptr<Backend>>
fa::runtime::loadCudaBackend(const KernelMetadata &md, StringRef dir) {
  return CudaBackend::load(md, dir);
}
