//===- CudaDriver.h - the CUDA driver API, opened at run time ---*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The few CUDA driver types, constants and entry points FARuntime uses,
// declared here so the build needs no CUDA headers (test/Unit/Runtime checks
// them against cuda.h where it is installed). The driver library is opened
// with dlopen: `libcuda.so.1`, or the path in FA_CUDA_DRIVER.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_RUNTIME_CUDADRIVER_H
#define FA_LIB_RUNTIME_CUDADRIVER_H

#include "RuntimeInternal.h"

#include <cstddef>
#include <memory>
#include <string>

namespace fa {
namespace runtime {
namespace cuda {

//===----------------------------------------------------------------------===//
// Types and constants (values from cuda.h, CUDA 12/13)
//===----------------------------------------------------------------------===//

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUdeviceptr = unsigned long long;
using CUjit_option = int;
using CUdevice_attribute = int;
using CUfunction_attribute = int;

enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_NOT_FOUND = 500,
};

enum : CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum : CUfunction_attribute {
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum : CUjit_option {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

/// Dynamic shared memory a kernel gets without opting in.
inline constexpr int kDefaultDynamicSharedBytes = 48 * 1024;

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// The driver's entry points, resolved with dlsym. The names are the ABI
/// names CUDA 13's cuda.h maps the API to (cuDevicePrimaryCtxRelease, the
/// context stack and the memory calls carry a `_v2` suffix).
struct DriverApi {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attribute,
                                   CUdevice device);
  CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxGetDevice)(CUdevice *device);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext *ctx);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device);
  CUresult (*cuModuleLoadDataEx)(CUmodule *module, const void *image,
                                 unsigned numOptions, CUjit_option *options,
                                 void **optionValues);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module,
                                  const char *name);
  CUresult (*cuModuleGetGlobal_v2)(CUdeviceptr *ptr, size_t *bytes,
                                   CUmodule module, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction function,
                                 CUfunction_attribute attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned gridX, unsigned gridY,
                             unsigned gridZ, unsigned blockX, unsigned blockY,
                             unsigned blockZ, unsigned sharedMemBytes,
                             CUstream stream, void **kernelParams,
                             void **extra);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  // Memory helpers (fa_cuda_malloc, ...).
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuCtxSynchronize)();
};

/// An opened driver library. Opened with RTLD_NODELETE: the real driver is
/// never unloaded, even after the last kernel is destroyed.
class Driver {
public:
  /// Opens the driver named by FA_CUDA_DRIVER (or libcuda.so.1), resolves
  /// every entry point and calls cuInit. FA_ERROR_NO_DRIVER when the library
  /// or an entry point is missing; FA_ERROR_NO_DEVICE when cuInit reports no
  /// device.
  static Result<std::unique_ptr<Driver>> open();

  /// The process-wide driver for the memory helpers and device queries,
  /// opened on first use (and again if FA_CUDA_DRIVER changes); never
  /// closed.
  static Result<Driver *> shared();
  ~Driver();

  const DriverApi &api() const { return fns; }
  const std::string &getPath() const { return path; }

  /// "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)".
  std::string describe(CUresult result) const;

  /// An FA_ERROR_CUDA (or `status`) failure for a failed `call`.
  Failure error(CUresult result, const std::string &call,
                int status = -1) const;

  /// Makes a context current on this thread if none is: device 0's primary
  /// context, retained once for the life of the process (helpers only).
  MaybeFailure ensureContext();

  /// The device of the current context, or device 0 when there is none.
  Result<CUdevice> currentDevice();

  /// The driver version as "12.4".
  std::string getVersionString() const;

private:
  Driver() = default;
  void *handle = nullptr;
  std::string path;
  DriverApi fns{};
  CUcontext helperContext = nullptr; ///< retained by ensureContext()
};

} // namespace cuda
} // namespace runtime
} // namespace fa

#endif // FA_LIB_RUNTIME_CUDADRIVER_H
