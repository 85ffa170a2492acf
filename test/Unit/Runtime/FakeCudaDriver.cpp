//===- FakeCudaDriver.cpp - A scripted stand-in for libcuda.so.1 ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Exports the CUDA driver entry points FARuntime resolves, with behaviour the
// tests script through `fake_cuda_state()` (device count, compute
// capability, module load results, ...) and a record of what the runtime
// did (modules loaded, launch configuration, kernel parameter values).
// Tests point FA_CUDA_DRIVER at this library. It never touches a GPU.
//
// Built twice: complete, and with FAKE_CUDA_INCOMPLETE (no cuLaunchKernel)
// to test the "driver lacks an entry point" path.
//
// "Device memory" is host memory from malloc, so the memory helpers copy
// real bytes; kernels never run. For tools (test/Tools/fa-run), the
// environment scripts it too: FAKE_CUDA_TRACE=FILE appends one line per
// module load, launch, allocation, copy and synchronisation to FILE;
// FAKE_CUDA_CC=9.0 sets the compute capability; FAKE_CUDA_DEVICES=0 the
// device count.
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
FakeCudaState state;

/// Applies FAKE_CUDA_CC and FAKE_CUDA_DEVICES.
void applyEnvironment() {
  if (const char *cc = std::getenv("FAKE_CUDA_CC"))
    std::sscanf(cc, "%d.%d", &state.ccMajor, &state.ccMinor);
  if (const char *devices = std::getenv("FAKE_CUDA_DEVICES"))
    state.deviceCount = std::atoi(devices);
}

struct EnvironmentInit {
  EnvironmentInit() { applyEnvironment(); }
} environmentInit;

/// Appends a line to FAKE_CUDA_TRACE, if set.
void trace(const char *format, ...) __attribute__((format(printf, 1, 2)));
void trace(const char *format, ...) {
  const char *path = std::getenv("FAKE_CUDA_TRACE");
  if (!path || !*path)
    return;
  std::FILE *file = std::fopen(path, "a");
  if (!file)
    return;
  va_list args;
  va_start(args, format);
  std::vfprintf(file, format, args);
  va_end(args);
  std::fputc('\n', file);
  std::fclose(file);
}
int contextObject, moduleObject, functionObject;
void *const kContext = &contextObject;
void *const kModule = &moduleObject;
void *const kFunction = &functionObject;
} // namespace

extern "C" {

FakeCudaState *fake_cuda_state() { return &state; }

void fake_cuda_reset() {
  state = FakeCudaState();
  state.deviceCount = 1;
  state.ccMajor = 8;
  state.ccMinor = 0;
  state.driverVersion = 12040;
  state.optinSharedBytes = 163 * 1024;
  applyEnvironment();
}

int cuInit(unsigned) { return state.initResult; }

int cuDriverGetVersion(int *version) {
  *version = state.driverVersion;
  return 0;
}

int cuDeviceGetCount(int *count) {
  *count = state.deviceCount;
  return 0;
}

int cuDeviceGet(int *device, int ordinal) {
  if (ordinal >= state.deviceCount)
    return 101; // CUDA_ERROR_INVALID_DEVICE
  *device = ordinal;
  return 0;
}

int cuDeviceGetAttribute(int *value, int attribute, int) {
  switch (attribute) {
  case 75:
    *value = state.ccMajor;
    return 0;
  case 76:
    *value = state.ccMinor;
    return 0;
  case 97:
    *value = state.optinSharedBytes;
    return 0;
  case 8:
    *value = 48 * 1024;
    return 0;
  case 16: // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    *value = state.multiprocessors;
    return 0;
  default:
    return 1; // CUDA_ERROR_INVALID_VALUE
  }
}

int cuCtxGetCurrent(void **ctx) {
  *ctx = state.currentContext;
  return 0;
}

int cuCtxSetCurrent(void *ctx) {
  state.currentContext = ctx;
  return 0;
}

int cuCtxGetDevice(int *device) {
  if (!state.currentContext)
    return 201; // CUDA_ERROR_INVALID_CONTEXT
  *device = 0;
  return 0;
}

int cuCtxPushCurrent_v2(void *ctx) {
  ++state.pushes;
  state.currentContext = ctx;
  return 0;
}

int cuCtxPopCurrent_v2(void **ctx) {
  ++state.pops;
  if (ctx)
    *ctx = state.currentContext;
  state.currentContext = nullptr;
  return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int) {
  ++state.primaryRetains;
  *ctx = kContext;
  return 0;
}

int cuDevicePrimaryCtxRelease_v2(int) {
  ++state.primaryReleases;
  return 0;
}

/// The image of the last cubin load.
static const char *lastCubin = nullptr;

int cuModuleLoadDataEx(void **module, const void *image, unsigned numOptions,
                       int *options, void **values) {
  bool isCubin = std::memcmp(image, "\x7f"
                                    "ELF",
                             4) == 0;
  // Valid while the runtime loads the module (cuModuleGetGlobal_v2).
  lastCubin = isCubin ? static_cast<const char *>(image) : nullptr;
  int result = isCubin ? state.cubinLoadResult : state.ptxLoadResult;
  if (isCubin)
    ++state.cubinLoads;
  else
    ++state.ptxLoads;
  if (result != 0) {
    for (unsigned i = 0; i + 1 < numOptions; ++i)
      if (options[i] == 5 && options[i + 1] == 6 && state.jitErrorLog) {
        auto size = reinterpret_cast<size_t>(values[i + 1]);
        std::snprintf(static_cast<char *>(values[i]), size, "%s",
                      state.jitErrorLog);
      }
    return result;
  }
  *module = kModule;
  ++state.modulesLoaded;
  trace("cuModuleLoadDataEx %s", isCubin ? "cubin" : "ptx");
  return 0;
}

int cuModuleUnload(void *) {
  ++state.modulesUnloaded;
  return 0;
}

/// The data of the ELF64 symbol `name` in `image` (a cubin ptxas wrote),
/// or null.
static const char *findElfSymbol(const char *image, const char *name,
                                 size_t &size) {
  // ELF64 with a CUDA OS ABI (0x33, 0x41), as ptxas writes; the unit
  // tests' stand-in cubins are shorter strings, whose NUL ends the check.
  if (!image || std::memcmp(image, "\x7f"
                                   "ELF\x02",
                            5) != 0 ||
      image[7] == 0)
    return nullptr;
  uint64_t shoff;
  uint16_t shentsize, shnum;
  std::memcpy(&shoff, image + 0x28, 8);
  std::memcpy(&shentsize, image + 0x3a, 2);
  std::memcpy(&shnum, image + 0x3c, 2);
  auto section = [&](unsigned i) { return image + shoff + i * shentsize; };
  auto field64 = [](const char *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  auto field32 = [](const char *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  for (unsigned i = 0; i < shnum; ++i) {
    const char *sh = section(i);
    if (field32(sh + 4) != 2) // SHT_SYMTAB
      continue;
    const char *strtab = image + field64(section(field32(sh + 40)) + 24);
    const char *syms = image + field64(sh + 24);
    uint64_t count = field64(sh + 32) / 24;
    for (uint64_t k = 0; k < count; ++k) {
      const char *sym = syms + k * 24;
      if (std::strcmp(strtab + field32(sym), name) != 0)
        continue;
      uint16_t shndx;
      std::memcpy(&shndx, sym + 6, 2);
      size = field64(sym + 16);
      return image + field64(section(shndx) + 24) + field64(sym + 8);
    }
  }
  return nullptr;
}

int cuModuleGetGlobal_v2(unsigned long long *ptr, size_t *bytes, void *,
                         const char *name) {
  std::snprintf(state.globalName, sizeof(state.globalName), "%s", name);
  size_t size = 0;
  const char *data = state.cubinSignature;
  if (data)
    size = std::strlen(data) + 1;
  else
    data = findElfSymbol(lastCubin, name, size);
  if (!data)
    return 500; // CUDA_ERROR_NOT_FOUND
  *ptr = reinterpret_cast<unsigned long long>(data);
  *bytes = size;
  return 0;
}

int cuModuleGetFunction(void **function, void *, const char *name) {
  std::snprintf(state.functionName, sizeof(state.functionName), "%s", name);
  if (state.missingFunction)
    return 500; // CUDA_ERROR_NOT_FOUND
  *function = kFunction;
  if (state.functionsFound < 8) {
    char *slot = state.functionNames[state.functionsFound++];
    std::snprintf(slot, 128, "%s", name);
    *function = slot;
  }
  return 0;
}

int cuFuncSetAttribute(void *, int attribute, int value) {
  ++state.setAttributeCalls;
  state.lastAttribute = attribute;
  state.lastAttributeValue = value;
  return 0;
}

#ifndef FAKE_CUDA_INCOMPLETE
int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, void *stream,
                   void **params, void **extra) {
  if (state.launchResult)
    return state.launchResult;
  if (state.launches < 8) {
    int i = state.launches;
    bool named = false;
    for (auto &slot : state.functionNames)
      named |= function == static_cast<void *>(slot);
    std::snprintf(state.launchedNames[i], 128, "%s",
                  named ? static_cast<const char *>(function) : "?");
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    for (int d = 0; d < 3; ++d) {
      state.launchedGrids[i][d] = g[d];
      state.launchedBlocks[i][d] = b[d];
    }
  }
  ++state.launches;
  state.grid[0] = gx;
  state.grid[1] = gy;
  state.grid[2] = gz;
  state.block[0] = bx;
  state.block[1] = by;
  state.block[2] = bz;
  state.sharedBytes = shared;
  state.stream = stream;
  state.extra = extra;
  state.launchContext = state.currentContext;
  for (int i = 0; i < state.paramsToRecord && i < 128; ++i)
    std::memcpy(&state.params[i], params[i], sizeof(int64_t));
  trace("cuLaunchKernel grid [%u, %u, %u] block [%u, %u, %u] shared %u", gx,
        gy, gz, bx, by, bz, shared);
  return 0;
}
#endif

int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
  if (state.allocResult)
    return state.allocResult;
  void *p = std::malloc(bytes ? bytes : 1);
  if (!p)
    return 2; // CUDA_ERROR_OUT_OF_MEMORY
  ++state.allocs;
  *ptr = reinterpret_cast<unsigned long long>(p);
  trace("cuMemAlloc_v2 %zu", bytes);
  return 0;
}

int cuMemFree_v2(unsigned long long ptr) {
  ++state.frees;
  std::free(reinterpret_cast<void *>(ptr));
  trace("cuMemFree_v2");
  return 0;
}

int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes) {
  ++state.copiesToDevice;
  state.bytesToDevice += bytes;
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  trace("cuMemcpyHtoD_v2 %zu", bytes);
  return 0;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  ++state.copiesToHost;
  state.bytesToHost += bytes;
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  trace("cuMemcpyDtoH_v2 %zu", bytes);
  return 0;
}

int cuCtxSynchronize() {
  ++state.syncs;
  trace("cuCtxSynchronize");
  return state.syncResult;
}

int cuGetErrorName(int error, const char **name) {
  switch (error) {
  case 0:
    *name = "CUDA_SUCCESS";
    return 0;
  case 2:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return 0;
  case 700:
    *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
    return 0;
  case 100:
    *name = "CUDA_ERROR_NO_DEVICE";
    return 0;
  case 209:
    *name = "CUDA_ERROR_NO_BINARY_FOR_GPU";
    return 0;
  case 218:
    *name = "CUDA_ERROR_INVALID_PTX";
    return 0;
  case 222:
    *name = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    return 0;
  case 500:
    *name = "CUDA_ERROR_NOT_FOUND";
    return 0;
  case 701:
    *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    return 0;
  default:
    return 1;
  }
}

int cuGetErrorString(int error, const char **text) {
  switch (error) {
  case 222:
    *text = "the provided PTX was compiled with an unsupported toolchain.";
    return 0;
  case 218:
    *text = "a PTX JIT compilation failed";
    return 0;
  default:
    return 1;
  }
}

} // extern "C"
