//===- CudaAbiTest.cpp - FARuntime's CUDA declarations against cuda.h -----===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// FARuntime declares the few CUDA driver types, constants and entry points
// it uses itself (lib/Runtime/CudaDriver.h) so that it builds without CUDA.
// Where cuda.h is installed, this test checks those declarations against it
// at compile time: constant values, type sizes, the ABI names the runtime
// resolves with dlsym, and each entry point's arity. Nothing is linked
// against the driver.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

#include <cuda.h>

#include "gtest/gtest.h"

#include <type_traits>

namespace rc = fa::runtime::cuda;

namespace {

template <typename T>
struct Arity;
template <typename R, typename... Args>
struct Arity<R (*)(Args...)> {
  static constexpr size_t value = sizeof...(Args);
};

// Constants.
#define FA_CHECK_VALUE(name)                                                   \
  static_assert(static_cast<int>(rc::name) == static_cast<int>(name), #name)
FA_CHECK_VALUE(CUDA_SUCCESS);
FA_CHECK_VALUE(CUDA_ERROR_INVALID_VALUE);
FA_CHECK_VALUE(CUDA_ERROR_OUT_OF_MEMORY);
FA_CHECK_VALUE(CUDA_ERROR_NOT_INITIALIZED);
FA_CHECK_VALUE(CUDA_ERROR_NO_DEVICE);
FA_CHECK_VALUE(CUDA_ERROR_INVALID_IMAGE);
FA_CHECK_VALUE(CUDA_ERROR_NO_BINARY_FOR_GPU);
FA_CHECK_VALUE(CUDA_ERROR_INVALID_PTX);
FA_CHECK_VALUE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
FA_CHECK_VALUE(CUDA_ERROR_NOT_FOUND);
FA_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
FA_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
FA_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
FA_CHECK_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
FA_CHECK_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
FA_CHECK_VALUE(CU_JIT_INFO_LOG_BUFFER);
FA_CHECK_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
FA_CHECK_VALUE(CU_JIT_ERROR_LOG_BUFFER);
FA_CHECK_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);

// Types passed across the ABI.
static_assert(sizeof(rc::CUresult) == sizeof(CUresult));
static_assert(sizeof(rc::CUdevice) == sizeof(CUdevice));
static_assert(sizeof(rc::CUjit_option) == sizeof(CUjit_option));
static_assert(sizeof(rc::CUdevice_attribute) == sizeof(CUdevice_attribute));
static_assert(sizeof(rc::CUfunction_attribute) ==
              sizeof(CUfunction_attribute));
static_assert(sizeof(rc::CUcontext) == sizeof(CUcontext));
static_assert(sizeof(rc::CUstream) == sizeof(CUstream));
static_assert(sizeof(rc::CUdeviceptr) == sizeof(CUdeviceptr));
static_assert(std::is_unsigned_v<rc::CUdeviceptr> ==
              std::is_unsigned_v<CUdeviceptr>);

// The ABI names the runtime resolves exist, with the same arity.
#define FA_CHECK_ENTRY(field, name)                                            \
  static_assert(Arity<decltype(rc::DriverApi::field)>::value ==                \
                    Arity<decltype(&::name)>::value,                           \
                #name " arity")
FA_CHECK_ENTRY(cuInit, cuInit);
FA_CHECK_ENTRY(cuDriverGetVersion, cuDriverGetVersion);
FA_CHECK_ENTRY(cuDeviceGetCount, cuDeviceGetCount);
FA_CHECK_ENTRY(cuDeviceGet, cuDeviceGet);
FA_CHECK_ENTRY(cuDeviceGetAttribute, cuDeviceGetAttribute);
FA_CHECK_ENTRY(cuCtxGetCurrent, cuCtxGetCurrent);
FA_CHECK_ENTRY(cuCtxSetCurrent, cuCtxSetCurrent);
FA_CHECK_ENTRY(cuCtxGetDevice, cuCtxGetDevice);
FA_CHECK_ENTRY(cuCtxPushCurrent_v2, cuCtxPushCurrent_v2);
FA_CHECK_ENTRY(cuCtxPopCurrent_v2, cuCtxPopCurrent_v2);
FA_CHECK_ENTRY(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
FA_CHECK_ENTRY(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2);
FA_CHECK_ENTRY(cuModuleLoadDataEx, cuModuleLoadDataEx);
FA_CHECK_ENTRY(cuModuleUnload, cuModuleUnload);
FA_CHECK_ENTRY(cuModuleGetFunction, cuModuleGetFunction);
FA_CHECK_ENTRY(cuModuleGetGlobal_v2, cuModuleGetGlobal_v2);
FA_CHECK_ENTRY(cuFuncSetAttribute, cuFuncSetAttribute);
FA_CHECK_ENTRY(cuLaunchKernel, cuLaunchKernel);
FA_CHECK_ENTRY(cuGetErrorName, cuGetErrorName);
FA_CHECK_ENTRY(cuGetErrorString, cuGetErrorString);
FA_CHECK_ENTRY(cuMemAlloc_v2, cuMemAlloc_v2);
FA_CHECK_ENTRY(cuMemFree_v2, cuMemFree_v2);
FA_CHECK_ENTRY(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2);
FA_CHECK_ENTRY(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2);
FA_CHECK_ENTRY(cuCtxSynchronize, cuCtxSynchronize);
#undef FA_CHECK_ENTRY
#undef FA_CHECK_VALUE

// The macros cuda.h maps the API names to must be the names resolved.
#define FA_STRINGIFY_(x) #x
#define FA_STRINGIFY(x) FA_STRINGIFY_(x)

TEST(CudaAbiTest, AbiNames) {
  // cuda.h renames cuCtxPushCurrent etc.; the runtime resolves the targets.
  EXPECT_STREQ(FA_STRINGIFY(cuCtxPushCurrent), "cuCtxPushCurrent_v2");
  EXPECT_STREQ(FA_STRINGIFY(cuCtxPopCurrent), "cuCtxPopCurrent_v2");
  EXPECT_STREQ(FA_STRINGIFY(cuDevicePrimaryCtxRelease),
               "cuDevicePrimaryCtxRelease_v2");
  // Unversioned in CUDA 12 and 13.
  EXPECT_STREQ(FA_STRINGIFY(cuModuleLoadDataEx), "cuModuleLoadDataEx");
  EXPECT_STREQ(FA_STRINGIFY(cuCtxGetCurrent), "cuCtxGetCurrent");
  EXPECT_STREQ(FA_STRINGIFY(cuDevicePrimaryCtxRetain),
               "cuDevicePrimaryCtxRetain");
  EXPECT_STREQ(FA_STRINGIFY(cuModuleUnload), "cuModuleUnload");
  EXPECT_STREQ(FA_STRINGIFY(cuLaunchKernel), "cuLaunchKernel");
  EXPECT_STREQ(FA_STRINGIFY(cuModuleGetFunction), "cuModuleGetFunction");
  EXPECT_STREQ(FA_STRINGIFY(cuFuncSetAttribute), "cuFuncSetAttribute");
  // The memory helpers' calls (legacy default stream, no _ptds).
  EXPECT_STREQ(FA_STRINGIFY(cuMemAlloc), "cuMemAlloc_v2");
  EXPECT_STREQ(FA_STRINGIFY(cuMemFree), "cuMemFree_v2");
  EXPECT_STREQ(FA_STRINGIFY(cuMemcpyHtoD), "cuMemcpyHtoD_v2");
  EXPECT_STREQ(FA_STRINGIFY(cuMemcpyDtoH), "cuMemcpyDtoH_v2");
  EXPECT_STREQ(FA_STRINGIFY(cuCtxSynchronize), "cuCtxSynchronize");
}

} // namespace
