//===- CudaBackendTest.cpp - The CUDA backend without a GPU ---------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The no-driver path (a missing FA_CUDA_DRIVER and the default
// libcuda.so.1), malformed PTX and cubins (rejected before the driver sees
// them), and the backend's logic against a scripted fake driver (arch
// checks, PTX too new, cubin/PTX choice, shared memory opt-in, context
// handling, grid and kernel parameters of a launch).
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"
#include "RuntimeTestUtils.h"

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/FARuntime.hpp"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <dlfcn.h>
#include <vector>

using namespace fa::runtime;
using namespace fa::runtime::test;
using ::testing::HasSubstr;
namespace json = llvm::json;

namespace {

//===----------------------------------------------------------------------===//
// No driver
//===----------------------------------------------------------------------===//

class NoDriverTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir.write("attn.ptx", signPtx(makePtx(), makeCudaAttentionMetadata()));
    metadata = dir.write("attn.json", toJson(makeCudaAttentionMetadata()));
  }
  void TearDown() override { unsetenv("FA_CUDA_DRIVER"); }

  TempDir dir;
  std::string metadata;
};

TEST_F(NoDriverTest, MissingDriverFromEnvironment) {
  setenv("FA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(fa_kernel_load(metadata.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_NO_DRIVER);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("cannot load the CUDA driver "
                        "'/nonexistent/libcuda.so.1'"));
  EXPECT_THAT(fa_last_error(), HasSubstr("FA_CUDA_DRIVER"));

  int count = 42;
  EXPECT_EQ(fa_cuda_available(&count), FA_ERROR_NO_DRIVER);
  EXPECT_EQ(count, 0);
  EXPECT_THAT(fa_last_error(), HasSubstr("/nonexistent/libcuda.so.1"));
  EXPECT_EQ(fa_cuda_available(nullptr), FA_ERROR_NO_DRIVER);
}

TEST_F(NoDriverTest, HelpersWithoutDriver) {
  setenv("FA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  char chip[16] = "junk";
  EXPECT_EQ(fa_cuda_device_chip(chip, sizeof(chip)), FA_ERROR_NO_DRIVER);
  EXPECT_STREQ(chip, "");
  EXPECT_THAT(fa_last_error(), HasSubstr("cannot load the CUDA driver "
                                         "'/nonexistent/libcuda.so.1'"));
  void *p = reinterpret_cast<void *>(1);
  EXPECT_EQ(fa_cuda_malloc(&p, 64), FA_ERROR_NO_DRIVER);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(fa_cuda_synchronize(), FA_ERROR_NO_DRIVER);
  char host[4] = {0};
  EXPECT_EQ(fa_cuda_memcpy_htod(reinterpret_cast<void *>(0x1000), host, 4),
            FA_ERROR_NO_DRIVER);
  // Argument checks come first and need no driver.
  EXPECT_EQ(fa_cuda_device_chip(nullptr, 8), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_cuda_malloc(nullptr, 8), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_cuda_malloc(&p, 0), FA_SUCCESS);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(fa_cuda_free(nullptr), FA_SUCCESS);
  EXPECT_EQ(fa_cuda_memcpy_dtoh(nullptr, host, 4), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_cuda_memcpy_dtoh(host, nullptr, 0), FA_SUCCESS);
}

TEST_F(NoDriverTest, DefaultDriverPath) {
  unsetenv("FA_CUDA_DRIVER");
  if (void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(handle);
    GTEST_SKIP() << "this machine has a CUDA driver";
  }
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(fa_kernel_load(metadata.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_NO_DRIVER);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("cannot load the CUDA driver 'libcuda.so.1'"));
  EXPECT_EQ(fa_cuda_available(nullptr), FA_ERROR_NO_DRIVER);
}

TEST_F(NoDriverTest, DriverWithoutEntryPoint) {
  setenv("FA_CUDA_DRIVER", FA_TEST_FAKE_CUDA_INCOMPLETE, 1);
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(fa_kernel_load(metadata.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_NO_DRIVER);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no entry point 'cuLaunchKernel'"));
}

TEST_F(NoDriverTest, NotADriver) {
  // A file that is not a shared library.
  setenv("FA_CUDA_DRIVER", metadata.c_str(), 1);
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(fa_kernel_load(metadata.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_NO_DRIVER);
  EXPECT_THAT(fa_last_error(), HasSubstr("cannot load the CUDA driver"));
}

//===----------------------------------------------------------------------===//
// Malformed artifacts: rejected before the driver is opened
//===----------------------------------------------------------------------===//

class BadArtifactTest : public NoDriverTest {
protected:
  void SetUp() override {
    NoDriverTest::SetUp();
    setenv("FA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  }

  /// Loads with `ptx` as the PTX file; returns the status.
  fa_status loadWithPtx(llvm::StringRef ptx) {
    dir.write("attn.ptx", ptx);
    fa_kernel *kernel = nullptr;
    return fa_kernel_load(metadata.c_str(), FA_DEVICE_CUDA, &kernel);
  }
};

TEST_F(BadArtifactTest, PtxWithoutEntry) {
  EXPECT_EQ(loadWithPtx(makePtx("8.0", "sm_80", "other_kernel")),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("has no .entry fa_attn (the metadata's symbol); its "
                        "entries: other_kernel"));
}

TEST_F(BadArtifactTest, PtxTargetMismatch) {
  EXPECT_EQ(loadWithPtx(makePtx("8.0", "sm_90a")), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has .target sm_90a, but the "
                                         "metadata's target.chip is sm_80"));
}

TEST_F(BadArtifactTest, PtxVersionMismatch) {
  EXPECT_EQ(loadWithPtx(makePtx("8.5")), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has .version 8.5, but the "
                                         "metadata's target.ptx_isa is 8.0"));
}

TEST_F(BadArtifactTest, GarbagePtx) {
  EXPECT_EQ(loadWithPtx("hello world\n"), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no .version directive"));
  EXPECT_EQ(loadWithPtx(llvm::StringRef("\x7f"
                                        "ELF\0\0\0binary",
                                        13)),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("contains NUL bytes"));
  EXPECT_EQ(loadWithPtx(""), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_EQ(loadWithPtx(".version eight\n.target sm_80\n"),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("malformed .version 'eight'"));
  // A commented-out directive does not count.
  EXPECT_EQ(loadWithPtx("// .version 8.0\n.target sm_80\n"),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no .version directive"));
}

TEST_F(BadArtifactTest, MissingFiles) {
  llvm::sys::fs::remove(dir.file("attn.ptx"));
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(fa_kernel_load(metadata.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_IO);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("cannot read the PTX '" + dir.file("attn.ptx") + "'"));

  KernelMetadata md = makeCudaAttentionMetadata();
  md.files.cubin = "attn.cubin";
  dir.write("attn.ptx", signPtx(makePtx(), md));
  std::string path = dir.write("cubin.json", toJson(md));
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_IO);
  EXPECT_THAT(fa_last_error(), HasSubstr("cannot read the cubin '" +
                                         dir.file("attn.cubin") + "'"));
  dir.write("attn.cubin", "not an elf");
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("is not an ELF file"));
}

//===----------------------------------------------------------------------===//
// The fake driver
//===----------------------------------------------------------------------===//

class FakeDriverTest : public ::testing::Test {
protected:
  void SetUp() override {
    setenv("FA_CUDA_DRIVER", FA_TEST_FAKE_CUDA, 1);
    // The runtime dlopens the same path, so it shares this state.
    handle = dlopen(FA_TEST_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle, nullptr) << dlerror();
    auto reset = reinterpret_cast<void (*)()>(dlsym(handle, "fake_cuda_reset"));
    auto getState = reinterpret_cast<FakeCudaState *(*)()>(
        dlsym(handle, "fake_cuda_state"));
    ASSERT_TRUE(reset && getState);
    reset();
    fake = getState();
    md = makeCudaAttentionMetadata();
  }
  void TearDown() override {
    unsetenv("FA_CUDA_DRIVER");
    if (handle)
      dlclose(handle);
  }

  /// Writes the metadata and `ptx` with md's signature, and loads them.
  fa_status load(fa_kernel **kernel) {
    dir.write("attn.ptx", signPtx(ptx, md));
    std::string path = dir.write("attn.json", toJson(md));
    return fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, kernel);
  }

  TempDir dir;
  void *handle = nullptr;
  FakeCudaState *fake = nullptr;
  KernelMetadata md;
  std::string ptx = makePtx();
};

TEST_F(FakeDriverTest, LoadsIntoPrimaryContext) {
  int count = 0;
  EXPECT_EQ(fa_cuda_available(&count), FA_SUCCESS);
  EXPECT_EQ(count, 1);

  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_STREQ(fa_last_error(), "");
  EXPECT_EQ(fake->primaryRetains, 1);
  EXPECT_NE(fake->currentContext, nullptr);
  EXPECT_EQ(fake->ptxLoads, 1);
  EXPECT_EQ(fake->cubinLoads, 0);
  EXPECT_STREQ(fake->functionName, "fa_attn");
  EXPECT_EQ(fake->setAttributeCalls, 0);

  fa_kernel_info info;
  ASSERT_EQ(fa_kernel_get_info(kernel, &info), FA_SUCCESS);
  EXPECT_EQ(info.device, FA_DEVICE_CUDA);
  EXPECT_STREQ(info.target, "sm_80");
  EXPECT_EQ(info.dtype, FA_DTYPE_F16);
  EXPECT_EQ(info.heads, 8);
  EXPECT_EQ(info.has_lse, 1);

  fa_kernel_destroy(kernel);
  EXPECT_EQ(fake->modulesUnloaded, 1);
  EXPECT_EQ(fake->primaryReleases, 1);
}

TEST_F(FakeDriverTest, UsesCurrentContext) {
  int callerContext;
  fake->currentContext = &callerContext;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->primaryRetains, 0);
  EXPECT_EQ(fake->currentContext, &callerContext);
  fa_kernel_destroy(kernel);
  EXPECT_EQ(fake->primaryReleases, 0);
}

TEST_F(FakeDriverTest, NoDevice) {
  fake->deviceCount = 0;
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(load(&kernel), FA_ERROR_NO_DEVICE);
  EXPECT_THAT(fa_last_error(), HasSubstr("reports no device"));
  EXPECT_EQ(fa_cuda_available(nullptr), FA_ERROR_NO_DEVICE);

  fake->deviceCount = 1;
  fake->initResult = 100;
  EXPECT_EQ(load(&kernel), FA_ERROR_NO_DEVICE);
  EXPECT_THAT(fa_last_error(), HasSubstr("cuInit failed: CUDA_ERROR_NO_DEVICE"));
}

TEST_F(FakeDriverTest, ComputeCapability) {
  fa_kernel *kernel = nullptr;
  fake->ccMajor = 7;
  fake->ccMinor = 5;
  EXPECT_EQ(load(&kernel), FA_ERROR_UNSUPPORTED_ARCH);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("targets sm_80, which needs compute capability 8.0 or "
                        "newer, but device 0 has compute capability 7.5 "
                        "(sm_75)"));
  EXPECT_EQ(fake->ptxLoads, 0);

  // sm_80 PTX is JIT-compiled for later devices.
  fake->ccMajor = 9;
  fake->ccMinor = 0;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  fa_kernel_destroy(kernel);

  // sm_90a runs on 9.0 only.
  md.target.chip = "sm_90a";
  ptx = makePtx("8.0", "sm_90a");
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  fa_kernel_destroy(kernel);
  fake->ccMajor = 10;
  EXPECT_EQ(load(&kernel), FA_ERROR_UNSUPPORTED_ARCH);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("targets sm_90a, which runs only on compute "
                        "capability 9.0, but device 0 has compute capability "
                        "10.0"));
}

TEST_F(FakeDriverTest, PtxTooNew) {
  fake->ptxLoadResult = 222;
  fake->driverVersion = 12020;
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(load(&kernel), FA_ERROR_PTX_TOO_NEW);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("the CUDA driver (version 12.2) does not support PTX "
                        "ISA 8.0 of '" +
                        dir.file("attn.ptx") + "'"));
  EXPECT_THAT(fa_last_error(), HasSubstr("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
  // The retained context is released again.
  EXPECT_EQ(fake->primaryRetains, fake->primaryReleases);
}

TEST_F(FakeDriverTest, InvalidPtxCarriesJitLog) {
  fake->ptxLoadResult = 218;
  fake->jitErrorLog = "ptxas application ptx input, line 9; error: bad";
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(load(&kernel), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("cuModuleLoadDataEx failed on the "
                                         "PTX"));
  EXPECT_THAT(fa_last_error(), HasSubstr("CUDA_ERROR_INVALID_PTX"));
  EXPECT_THAT(fa_last_error(), HasSubstr("line 9; error: bad"));
}

TEST_F(FakeDriverTest, PrefersMatchingCubin) {
  md.files.cubin = "attn.cubin";
  dir.write("attn.cubin", llvm::StringRef("\x7f"
                                          "ELF\x02\x01\x01",
                                          7));
  std::string signature = getKernelSignature(md);
  fake->cubinSignature = signature.c_str();
  fa_kernel *kernel = nullptr;
  fake->ccMajor = 8;
  fake->ccMinor = 6; // an sm_80 cubin runs on 8.6
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->cubinLoads, 1);
  EXPECT_EQ(fake->ptxLoads, 0);
  fa_kernel_destroy(kernel);

  // Not on 9.0: the PTX is JIT-compiled instead.
  fake->ccMajor = 9;
  fake->ccMinor = 0;
  fake->cubinLoads = 0;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->cubinLoads, 0);
  EXPECT_EQ(fake->ptxLoads, 1);
  fa_kernel_destroy(kernel);

  // A cubin the driver rejects falls back to the PTX.
  fake->ccMajor = 8;
  fake->cubinLoadResult = 209;
  fake->ptxLoads = 0;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->cubinLoads, 1);
  EXPECT_EQ(fake->ptxLoads, 1);
  fa_kernel_destroy(kernel);

  // Without PTX the cubin's failure is the error.
  md.files.ptx.clear();
  EXPECT_EQ(load(&kernel), FA_ERROR_CUDA);
  EXPECT_THAT(fa_last_error(), HasSubstr("on the cubin"));
  EXPECT_THAT(fa_last_error(), HasSubstr("CUDA_ERROR_NO_BINARY_FOR_GPU"));
  fake->ccMajor = 9;
  EXPECT_EQ(load(&kernel), FA_ERROR_UNSUPPORTED_ARCH);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no PTX to JIT-compile and its "
                                         "cubin for sm_80 does not run"));
}

/// The PTX's and the cubin's signature against the metadata: a mismatch
/// is an error before the launch (before, the kernel ran with descriptors
/// it was not compiled for).
TEST_F(FakeDriverTest, SignatureMismatch) {
  fa_kernel *kernel = nullptr;
  // PTX of another kernel (other heads) under the same symbol.
  KernelMetadata other = md;
  other.heads = 16;
  std::string ptxPath = dir.file("attn.ptx");
  std::string path = dir.write("attn.json", toJson(md));
  dir.write("attn.ptx", signPtx(ptx, other));
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("the metadata does not describe the PTX '" + ptxPath +
                        "': field 'heads': the kernel was compiled for '16', "
                        "the metadata says '8'"));
  // Params in another order.
  other = md;
  std::swap(other.params[0], other.params[1]);
  dir.write("attn.ptx", signPtx(ptx, other));
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("field 'params[0]': the kernel was compiled for 'k "
                        "key f16 [B, Hkv, Nk, D] align 2', the metadata says "
                        "'q query f16 [B, Hq, Nq, D] align 2'"));
  // The launch configuration is part of it.
  other = md;
  other.launch->block = {256, 1, 1};
  dir.write("attn.ptx", signPtx(ptx, other));
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("field 'launch.block': the kernel "
                                         "was compiled for '256,1,1', the "
                                         "metadata says '128,1,1'"));
  // No signature at all, or a malformed one.
  dir.write("attn.ptx", ptx);
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("declares no signature "
                                         "'fa_signature_fa_attn'"));
  std::string broken = signPtx(ptx, md);
  broken.replace(broken.find("= {"), 3, "= {300, ");
  dir.write("attn.ptx", broken);
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("declares no signature"));
  EXPECT_EQ(fake->ptxLoads, 0);

  // The cubin's global, read through the driver.
  md.files.cubin = "attn.cubin";
  md.files.ptx.clear();
  dir.write("attn.cubin", llvm::StringRef("\x7f"
                                          "ELF\x02\x01\x01",
                                          7));
  path = dir.write("attn.json", toJson(md));
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("cubin '" + dir.file("attn.cubin") +
                                         "' has no signature "
                                         "'fa_signature_fa_attn'"));
  EXPECT_STREQ(fake->globalName, "fa_signature_fa_attn");
  other = md;
  other.heads = 16;
  std::string wrong = getKernelSignature(other);
  fake->cubinSignature = wrong.c_str();
  EXPECT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("the metadata does not describe the cubin '" +
                        dir.file("attn.cubin") +
                        "': field 'heads': the kernel was compiled for '16'"));
  EXPECT_EQ(fake->modulesUnloaded, fake->modulesLoaded);
  std::string right = getKernelSignature(md);
  fake->cubinSignature = right.c_str();
  ASSERT_EQ(fa_kernel_load(path.c_str(), FA_DEVICE_CUDA, &kernel), FA_SUCCESS)
      << fa_last_error();
  fa_kernel_destroy(kernel);
}

TEST_F(FakeDriverTest, DynamicSharedMemory) {
  fa_kernel *kernel = nullptr;
  md.launch->dynamicSharedBytes = 48 * 1024; // exactly 48 KiB: no opt-in
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->setAttributeCalls, 0);
  fa_kernel_destroy(kernel);

  md.launch->dynamicSharedBytes = 48 * 1024 + 16;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->setAttributeCalls, 1);
  EXPECT_EQ(fake->lastAttribute, 8); // MAX_DYNAMIC_SHARED_SIZE_BYTES
  EXPECT_EQ(fake->lastAttributeValue, 48 * 1024 + 16);
  fa_kernel_destroy(kernel);

  md.launch->staticSharedBytes = 1024;
  md.launch->dynamicSharedBytes = 163 * 1024;
  EXPECT_EQ(load(&kernel), FA_ERROR_UNSUPPORTED_ARCH);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("needs 167936 bytes of shared memory per block "
                        "(static 1024 + dynamic 166912), but device 0 allows "
                        "at most 166912"));
}

TEST_F(FakeDriverTest, MissingFunction) {
  fake->missingFunction = 1;
  fa_kernel *kernel = nullptr;
  EXPECT_EQ(load(&kernel), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("cuModuleGetFunction('fa_attn') "
                                         "failed: CUDA_ERROR_NOT_FOUND"));
}

/// Device buffers are never dereferenced by the runtime, so fake
/// addresses stand in for them.
fa_tensor deviceTensor(uintptr_t address, fa_dtype dtype,
                       std::vector<int64_t> sizes) {
  return fa_tensor_make(reinterpret_cast<void *>(address), dtype,
                        static_cast<int32_t>(sizes.size()), sizes.data());
}

TEST_F(FakeDriverTest, LaunchPassesGridAndDescriptors) {
  md.launch->dynamicSharedBytes = 4096;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  // Launch from a thread whose current context is another one.
  int otherContext;
  fake->currentContext = &otherContext;
  // 5 params of rank 4, 4, 4, 4, 3: 5 * 3 + 2 * 19 = 53 values.
  fake->paramsToRecord = 53;

  const int64_t B = 3, Nq = 130, Nk = 77;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  int streamObject;
  void *stream = &streamObject;
  ASSERT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o,
                                &lse, stream),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  EXPECT_EQ(fake->grid[0], 3u); // ceil(130 / 64)
  EXPECT_EQ(fake->grid[1], 8u); // Hq
  EXPECT_EQ(fake->grid[2], 3u); // B
  EXPECT_EQ(fake->block[0], 128u);
  EXPECT_EQ(fake->block[1], 1u);
  EXPECT_EQ(fake->sharedBytes, 4096u);
  EXPECT_EQ(fake->stream, stream);
  EXPECT_EQ(fake->extra, nullptr);
  // The kernel's context was pushed for the launch and popped after.
  EXPECT_NE(fake->launchContext, &otherContext);
  EXPECT_EQ(fake->pushes, 1);
  EXPECT_EQ(fake->pops, 1);

  // q: allocated, aligned, offset, sizes, strides.
  std::vector<int64_t> expected = {0x100000, 0x100000, 0,    B,  8, Nq,
                                   64,       8 * Nq * 64, Nq * 64, 64, 1};
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(fake->params[i], expected[i]) << "value " << i;
  // lse, the last param: 11 * 4 values before it.
  std::vector<int64_t> lseExpected = {0x500000, 0x500000, 0, B, 8, Nq,
                                      8 * Nq,   Nq,       1};
  for (size_t i = 0; i < lseExpected.size(); ++i)
    EXPECT_EQ(fake->params[44 + i], lseExpected[i]) << "lse value " << i;

  // Empty launches do nothing.
  fa_tensor q0 = deviceTensor(0, FA_DTYPE_F16, {0, 8, Nq, 64});
  fa_tensor k0 = deviceTensor(0, FA_DTYPE_F16, {0, 2, Nk, 64});
  fa_tensor v0 = deviceTensor(0, FA_DTYPE_F16, {0, 2, Nk, 64});
  fa_tensor o0 = deviceTensor(0, FA_DTYPE_F16, {0, 8, Nq, 64});
  fa_tensor lse0 = deviceTensor(0, FA_DTYPE_F32, {0, 8, Nq});
  EXPECT_EQ(fa_attention_launch(kernel, &q0, &k0, &v0, nullptr, nullptr, &o0,
                                &lse0, stream),
            FA_SUCCESS)
      << fa_last_error();
  fa_tensor qn = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, 0, 64});
  fa_tensor on = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, 0, 64});
  fa_tensor lsen = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, 0});
  EXPECT_EQ(fa_attention_launch(kernel, &qn, &k, &v, nullptr, nullptr, &on,
                                &lsen, stream),
            FA_SUCCESS)
      << fa_last_error();
  EXPECT_EQ(fake->launches, 1);

  // A grid beyond CUDA's limits is an argument error, not a launch.
  const int64_t hugeB = 70000;
  fa_tensor qh = deviceTensor(0x100000, FA_DTYPE_F16, {hugeB, 8, 1, 64});
  fa_tensor kh = deviceTensor(0x200000, FA_DTYPE_F16, {hugeB, 2, 1, 64});
  fa_tensor vh = deviceTensor(0x300000, FA_DTYPE_F16, {hugeB, 2, 1, 64});
  fa_tensor oh = deviceTensor(0x10000000, FA_DTYPE_F16, {hugeB, 8, 1, 64});
  fa_tensor lseh = deviceTensor(0x20000000, FA_DTYPE_F32, {hugeB, 8, 1});
  EXPECT_EQ(fa_attention_launch(kernel, &qh, &kh, &vh, nullptr, nullptr, &oh,
                                &lseh, stream),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("grid.z = batch = 70000 is outside CUDA's range [0, "
                        "65535]"));
  EXPECT_EQ(fake->launches, 1);

  // Launch failures name the call and the configuration.
  fake->launchResult = 701;
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o,
                                &lse, stream),
            FA_ERROR_LAUNCH);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("cuLaunchKernel('fa_attn', grid [3, 8, 3], block [128, 1, 1], "
                        "4096 bytes of dynamic shared memory) failed: "
                        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"));
  fa_kernel_destroy(kernel);
}

/// A kernel with ALiBi slopes and segment ids: fa_attention_launch_ex
/// passes their descriptors in the metadata's order (after V, before O);
/// fa_attention_launch, which has no slot for them, is refused.
TEST_F(FakeDriverTest, LaunchPassesModifierOperands) {
  md.modifiers.windowLeft = 16;
  md.modifiers.windowRight = 0;
  md.modifiers.alibi = AlibiKind::BatchHeads;
  md.modifiers.segments = true;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  fa_attention_modifiers mods{};
  ASSERT_EQ(fa_kernel_get_modifiers(kernel, &mods), FA_SUCCESS);
  EXPECT_EQ(mods.window_left, 16);
  EXPECT_EQ(mods.window_right, 0);
  EXPECT_EQ(mods.alibi, 2);
  EXPECT_EQ(mods.has_segments, 1);
  // q, k, v: 3 * 11 values, then alibi, q_segments, k_segments (rank 2: 7
  // values each); the first 64 are recorded.
  fake->paramsToRecord = 64;

  const int64_t B = 2, Nq = 70, Nk = 90;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor slopes = deviceTensor(0x600000, FA_DTYPE_F32, {B, 8});
  fa_tensor qs = deviceTensor(0x700000, FA_DTYPE_I32, {B, Nq});
  fa_tensor ks = deviceTensor(0x800000, FA_DTYPE_I32, {B, Nk});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o,
                                &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("alibi is NULL"));
  fa_attention_extras extras{&slopes, &qs, &ks};
  ASSERT_EQ(fa_attention_launch_ex(kernel, &q, &k, &v, nullptr, nullptr,
                                   &extras, &o, &lse, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  std::vector<int64_t> expected = {
      0x600000, 0x600000, 0, B, 8,  8,  1, // alibi [B, Hq]
      0x700000, 0x700000, 0, B, Nq, Nq, 1, // q_segments [B, Nq]
      0x800000, 0x800000, 0, B, Nk, Nk, 1}; // k_segments [B, Nk]
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(fake->params[33 + i], expected[i]) << "value " << 33 + i;
  // The segment ids must match the query's and the key's lengths.
  fa_tensor ksBad = deviceTensor(0x800000, FA_DTYPE_I32, {B, Nq});
  fa_attention_extras bad{&slopes, &qs, &ksBad};
  EXPECT_EQ(fa_attention_launch_ex(kernel, &q, &k, &v, nullptr, nullptr, &bad,
                                   &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("k_segments"));
  EXPECT_EQ(fake->launches, 1);
  fa_kernel_destroy(kernel);
}

/// A kernel with score_mod / mask_mod regions: its mod operands (fixed
/// shapes, in call order after the canonical params here) reach the launch
/// as descriptors; fa_kernel_get_regions reports them; a wrong count or
/// shape is an error before any launch.
TEST_F(FakeDriverTest, LaunchPassesModOperands) {
  md.modifiers.scoreMod = true;
  md.modifiers.maskMod = true;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  ParamInfo table;
  table.name = "mod0";
  table.role = ParamRole::ModOperand;
  table.dtype = DType::F32;
  table.shape = {ShapeDim::fixed(8), ShapeDim::fixed(63)};
  ParamInfo prefix;
  prefix.name = "mod1";
  prefix.role = ParamRole::ModOperand;
  prefix.dtype = DType::I32;
  prefix.shape = {ShapeDim::fixed(2)};
  md.params.push_back(table);
  md.params.push_back(prefix);
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  fa_attention_regions regions{};
  ASSERT_EQ(fa_kernel_get_regions(kernel, &regions), FA_SUCCESS);
  EXPECT_EQ(regions.has_score_mod, 1);
  EXPECT_EQ(regions.has_mask_mod, 1);
  EXPECT_EQ(regions.num_mod_operands, 2);
  fake->paramsToRecord = 64;

  const int64_t B = 2, Nq = 70, Nk = 90;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  fa_tensor t = deviceTensor(0x600000, FA_DTYPE_F32, {8, 63});
  fa_tensor p = deviceTensor(0x700000, FA_DTYPE_I32, {2});
  const fa_tensor *mods[] = {&t, &p};
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o,
                                &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("mod0 is NULL"));
  ASSERT_EQ(fa_attention_launch_mods(kernel, &q, &k, &v, nullptr, nullptr,
                                     nullptr, mods, 2, &o, &lse, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  // q, k, v, o (11 values each), lse (9), then mod0 (7) and mod1 (5; the
  // fake records the first 64 values: not its stride).
  std::vector<int64_t> expected = {
      0x600000, 0x600000, 0, 8, 63, 63, 1, // mod0 [8, 63]
      0x700000, 0x700000, 0, 2};           // mod1 [2]
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(fake->params[53 + i], expected[i]) << "value " << 53 + i;
  fa_tensor tBad = deviceTensor(0x600000, FA_DTYPE_F32, {8, 62});
  const fa_tensor *bad[] = {&tBad, &p};
  EXPECT_EQ(fa_attention_launch_mods(kernel, &q, &k, &v, nullptr, nullptr,
                                     nullptr, bad, 2, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("mod0"));
  EXPECT_EQ(fa_attention_launch_mods(kernel, &q, &k, &v, nullptr, nullptr,
                                     nullptr, mods, -1, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fake->launches, 1);
  fa_kernel_destroy(kernel);
}

/// A kernel with a mask_mod and its block mask: the block mask reaches the
/// launch as a descriptor [B, 1, QT, KT] with QT and KT from the kernel's
/// block_tiles; a block mask for other tiles, or none, is an error before
/// any launch.
TEST_F(FakeDriverTest, LaunchPassesBlockMask) {
  md.modifiers.maskMod = true;
  md.modifiers.blockTileQ = 64;
  md.modifiers.blockTileKV = 32;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  ParamInfo bm;
  bm.name = "block_mask";
  bm.role = ParamRole::BlockMask;
  bm.dtype = DType::I8;
  bm.shape = {ShapeDim::sym("B"), ShapeDim::fixed(1), ShapeDim::sym("QT"),
              ShapeDim::sym("KT")};
  md.params.push_back(bm);
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  int64_t tq = 0, tk = 0;
  ASSERT_EQ(fa_kernel_get_block_tiles(kernel, &tq, &tk), FA_SUCCESS);
  EXPECT_EQ(tq, 64);
  EXPECT_EQ(tk, 32);
  fake->paramsToRecord = 64;

  const int64_t B = 2, Nq = 70, Nk = 90;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  // ceil(70 / 64) = 2 query tiles, ceil(90 / 32) = 3 key tiles.
  fa_tensor mask = deviceTensor(0x600000, FA_DTYPE_I8, {B, 1, 2, 3});
  EXPECT_EQ(fa_attention_launch_mods(kernel, &q, &k, &v, nullptr, nullptr,
                                     nullptr, nullptr, 0, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("block_mask is NULL"));
  fa_tensor wrong = deviceTensor(0x600000, FA_DTYPE_I8, {B, 1, 2, 4});
  EXPECT_EQ(fa_attention_launch_sparse(kernel, &q, &k, &v, nullptr, nullptr,
                                       nullptr, nullptr, 0, &wrong, &o, &lse,
                                       nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("dim 3 (KT) is 4"));
  EXPECT_THAT(fa_last_error(), HasSubstr("in key tiles of 32"));
  EXPECT_EQ(fake->launches, 0);
  ASSERT_EQ(fa_attention_launch_sparse(kernel, &q, &k, &v, nullptr, nullptr,
                                       nullptr, nullptr, 0, &mask, &o, &lse,
                                       nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  // q, k, v, o (11 values each), lse (9), then the block mask.
  std::vector<int64_t> expected = {0x600000, 0x600000, 0, B, 1, 2, 3,
                                   6,        6,        3, 1};
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(fake->params[53 + i], expected[i]) << "value " << 53 + i;
  fa_kernel_destroy(kernel);
}

/// The grid follows the metadata's axis order.
/// A kernel that copies Q, K and V with 16-byte cp.async (alignment 16 in
/// its metadata): a pointer that is element- but not 16-byte aligned, or a
/// row stride that breaks the alignment, is an error before the launch
/// (on a GPU it would fault and poison the context).
TEST_F(FakeDriverTest, LaunchChecksPointerAlignment) {
  for (ParamInfo &param : md.params)
    if (param.role == ParamRole::Query || param.role == ParamRole::Key ||
        param.role == ParamRole::Value)
      param.alignment = 16;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  const int64_t B = 1, Nq = 16, Nk = 16;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor o = deviceTensor(0x400002, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500004, FA_DTYPE_F32, {B, 8, Nq});
  // o and lse are written element by element: 2- and 4-byte aligned do.
  ASSERT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o, &lse,
                                nullptr),
            FA_SUCCESS)
      << fa_last_error();
  EXPECT_EQ(fake->launches, 1);
  for (fa_tensor *t : {&q, &k, &v}) {
    fa_tensor saved = *t;
    t->data = static_cast<char *>(t->data) + 2; // a view at element 1
    EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o,
                                  &lse, nullptr),
              FA_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(fa_last_error(),
                HasSubstr("is not 16-byte aligned, but kernel 'attn' reads"));
    EXPECT_THAT(fa_last_error(), HasSubstr("with 16-byte accesses"));
    *t = saved;
  }
  EXPECT_THAT(fa_last_error(), HasSubstr("v: data 0x300002 is not 16-byte"));
  fa_kernel_destroy(kernel);

  // Rows of 64 f16 elements are 128 bytes: fine for 16, not for 256.
  md.params[0].alignment = 256;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o, &lse,
                                nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  // (dim 0 has size 1; dim 1's 2048 bytes are a multiple of 256.)
  EXPECT_THAT(fa_last_error(),
              HasSubstr("q [1, 8, 16, 64]: dim 2 has a stride of 128 bytes, "
                        "not a multiple of the 256-byte accesses kernel "
                        "'attn' reads q with"));
  EXPECT_EQ(fake->launches, 1);
  fa_kernel_destroy(kernel);

  // Bad alignments in the metadata.
  md.params[0].alignment = 24;
  EXPECT_EQ(load(&kernel), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("params[0] ('q'): alignment 24 must be a power of two "
                        "from the element size (2) to 4096"));
  md.params[0].alignment = 1;
  EXPECT_EQ(load(&kernel), FA_ERROR_INVALID_ARTIFACT);
}

TEST_F(FakeDriverTest, LaunchGridOrder) {
  md.launch->grid = {GridAxis::Batch, GridAxis::Heads, GridAxis::QueryTiles};
  md.blockQ = 32;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  const int64_t B = 5, Nq = 65, Nk = 7;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  ASSERT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o, &lse,
                                nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  EXPECT_EQ(fake->grid[0], 5u); // B
  EXPECT_EQ(fake->grid[1], 8u); // Hq
  EXPECT_EQ(fake->grid[2], 3u); // ceil(65 / 32)
  fa_kernel_destroy(kernel);
}

/// A decode kernel with packed query heads runs over ceil(Nq * Hq / Hkv /
/// block_q) packed tiles and the kv heads.
TEST_F(FakeDriverTest, LaunchGridPackedHeads) {
  md.launch->grid = {GridAxis::PackedQueryTiles, GridAxis::KvHeads,
                     GridAxis::Batch};
  md.blockQ = 16;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  const int64_t B = 3, Nq = 5, Nk = 70;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  ASSERT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o, &lse,
                                nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  EXPECT_EQ(fake->grid[0], 2u); // ceil(5 * 4 / 16)
  EXPECT_EQ(fake->grid[1], 2u); // Hkv
  EXPECT_EQ(fake->grid[2], 3u); // B
  fa_kernel_destroy(kernel);
}

/// An attention_backward kernel on CUDA: the dQ entry over (q_tiles, Hq,
/// B), then the dK/dV entry (launch.dkdv) over (k_tiles, Hkv, B), both with
/// the same parameters; Nq = 0 launches only dK/dV (which zeroes them),
/// Nk = 0 only dQ.
TEST_F(FakeDriverTest, LaunchBackward) {
  md.op = OpKind::AttentionBackward;
  md.kernel = "simt";
  md.blockQ = 16;
  md.blockKV = 32;
  md.hasKvLens = true;
  md.launch->dkdvSymbol = "fa_attn_dkdv";
  md.launch->dkdvStaticSharedBytes = 35072;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  ptx += "\n.visible .entry fa_attn_dkdv(\n\t.param .u64 p\n)\n{\n\tret;\n}\n";
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  fa_kernel_info info{};
  ASSERT_EQ(fa_kernel_get_info(kernel, &info), FA_SUCCESS);
  EXPECT_EQ(info.op, FA_OP_ATTENTION_BACKWARD);

  const int64_t B = 3, Nq = 40, Nk = 70;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor lens = deviceTensor(0x380000, FA_DTYPE_I32, {B});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  fa_tensor dO = deviceTensor(0x600000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor dq = deviceTensor(0x700000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor dk = deviceTensor(0x800000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor dv = deviceTensor(0x900000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fake->paramsToRecord = 102;
  ASSERT_EQ(fa_attention_backward_launch(kernel, &q, &k, &v, &o, &lse, &dO,
                                         &lens, nullptr, nullptr, &dq, &dk, &dv,
                                         nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 2);
  EXPECT_STREQ(fake->launchedNames[0], "fa_attn");
  EXPECT_EQ(fake->launchedGrids[0][0], 3u); // ceil(40 / 16)
  EXPECT_EQ(fake->launchedGrids[0][1], 8u); // Hq
  EXPECT_EQ(fake->launchedGrids[0][2], 3u); // B
  EXPECT_STREQ(fake->launchedNames[1], "fa_attn_dkdv");
  EXPECT_EQ(fake->launchedGrids[1][0], 3u); // ceil(70 / 32)
  EXPECT_EQ(fake->launchedGrids[1][1], 2u); // Hkv
  EXPECT_EQ(fake->launchedGrids[1][2], 3u); // B
  EXPECT_EQ(fake->launchedBlocks[1][0], 128u);
  // q, k, v (11 values each), kv_lens (5), o (11), lse (9), d_o, d_q, d_k,
  // d_v (11 each): d_k starts at 11 * 3 + 5 + 11 + 9 + 22.
  EXPECT_EQ(fake->params[80], 0x800000);
  EXPECT_EQ(fake->params[80 + 3], B);
  EXPECT_EQ(fake->params[80 + 5], Nk);

  // Nq = 0: only the dK/dV kernel; Nk = 0: only the dQ kernel.
  fa_tensor q0 = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, 0, 64});
  fa_tensor o0 = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, 0, 64});
  fa_tensor lse0 = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, 0});
  ASSERT_EQ(fa_attention_backward_launch(kernel, &q0, &k, &v, &o0, &lse0, &o0,
                                         &lens, nullptr, nullptr, &q0, &dk, &dv,
                                         nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 3);
  EXPECT_STREQ(fake->launchedNames[2], "fa_attn_dkdv");
  fa_tensor k0 = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, 0, 64});
  fa_tensor dk0 = deviceTensor(0x800000, FA_DTYPE_F16, {B, 2, 0, 64});
  fa_tensor dv0 = deviceTensor(0x900000, FA_DTYPE_F16, {B, 2, 0, 64});
  ASSERT_EQ(fa_attention_backward_launch(kernel, &q, &k0, &k0, &o, &lse, &dO,
                                         &lens, nullptr, nullptr, &dq, &dk0,
                                         &dv0, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 4);
  EXPECT_STREQ(fake->launchedNames[3], "fa_attn");
  fa_kernel_destroy(kernel);

  // A PTX without the dK/dV entry is refused at load.
  ptx = makePtx();
  EXPECT_EQ(load(&kernel), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no .entry fa_attn_dkdv"));
}

/// A paged-cache kernel on CUDA: the block table and lengths are device
/// memory, which the launch passes to the kernel without reading (these
/// addresses would fault on the host); the grid is that of Nq.
TEST_F(FakeDriverTest, LaunchPaged) {
  md.hasKvLens = true;
  md.pageSize = 16;
  md.kernel = "simt";
  md.params = getCanonicalParams(md, DType::I8, false, false);
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  int64_t pageSize = 0;
  int32_t varlen = 1;
  ASSERT_EQ(fa_kernel_get_serving(kernel, &pageSize, &varlen), FA_SUCCESS);
  EXPECT_EQ(pageSize, 16);
  EXPECT_EQ(varlen, 0);
  // q, k, v (11 values each), kv_lens (5), o (11), lse (9), block_table (7).
  fake->paramsToRecord = 65;
  const int64_t B = 3, Nq = 70, P = 40, M = 9;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {P, 16, 2, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {P, 16, 2, 64});
  fa_tensor lens = deviceTensor(0x380000, FA_DTYPE_I32, {B});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  fa_tensor table = deviceTensor(0x600000, FA_DTYPE_I32, {B, M});
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, &lens, nullptr, &o, &lse,
                                nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("launch it with "
                                         "fa_attention_launch_paged"));
  fa_tensor wrongPage = deviceTensor(0x300000, FA_DTYPE_F16, {P, 8, 2, 64});
  EXPECT_EQ(fa_attention_launch_paged(kernel, &q, &k, &wrongPage, &table,
                                      &lens, nullptr, nullptr, &o, &lse,
                                      nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fake->launches, 0);
  ASSERT_EQ(fa_attention_launch_paged(kernel, &q, &k, &v, &table, &lens,
                                      nullptr, nullptr, &o, &lse, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  EXPECT_EQ(fake->grid[0], 2u); // ceil(70 / 64)
  EXPECT_EQ(fake->grid[1], 8u); // Hq
  EXPECT_EQ(fake->grid[2], 3u); // B
  std::vector<int64_t> pages = {0x200000, 0x200000, 0, P, 16, 2, 64};
  for (size_t i = 0; i < pages.size(); ++i)
    EXPECT_EQ(fake->params[11 + i], pages[i]) << "k value " << i;
  std::vector<int64_t> lensExpected = {0x380000, 0x380000, 0, B, 1};
  for (size_t i = 0; i < lensExpected.size(); ++i)
    EXPECT_EQ(fake->params[33 + i], lensExpected[i]) << "kv_lens value " << i;
  std::vector<int64_t> tableExpected = {0x600000, 0x600000, 0, B, M, M, 1};
  for (size_t i = 0; i < tableExpected.size(); ++i)
    EXPECT_EQ(fake->params[58 + i], tableExpected[i])
        << "block_table value " << i;
  fa_kernel_destroy(kernel);
}

/// A split-KV kernel on CUDA: the heuristic from the device's SMs, the
/// workspace size and layout, both entries launched in order with the same
/// parameters (the workspace carved into partial_o and partial_lse after
/// the caller's tensors), and the errors of a missing, small or misaligned
/// workspace.
TEST_F(FakeDriverTest, LaunchSplit) {
  md.hasKvLens = true;
  md.kernel = "simt";
  md.splitKv = true;
  md.launch->mergeSymbol = "fa_attn_merge";
  md.launch->mergeBlock = {128, 1, 1};
  md.launch->grid = {GridAxis::PackedQueryTiles, GridAxis::KvHeads,
                     GridAxis::Batch};
  md.blockQ = 16;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  ptx += "\n.visible .entry fa_attn_merge(\n\t.param .u64 p\n)\n{\n\tret;\n}\n";
  fake->multiprocessors = 132;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  int32_t split = 0;
  ASSERT_EQ(fa_kernel_get_split_kv(kernel, &split), FA_SUCCESS);
  EXPECT_EQ(split, 1);

  // B = 1, Nq = 1, Hkv = 2: 2 blocks without splitting; 8192 keys are 128
  // tiles of 64. Part counts that change the tiles per part: ..., 43 (3
  // tiles), 64 (2), 128 (1). The best efficiency is 128 / 132 (s = 64 and
  // 128); within 85% of it the fewest parts are 64 (s = 43 reaches 86 /
  // 132, only 67%).
  int64_t parts = 0;
  ASSERT_EQ(fa_attention_num_splits(kernel, 1, 1, 8192, &parts), FA_SUCCESS);
  EXPECT_EQ(parts, 64);
  // 16 x 2 blocks: 4 parts make 128 of 132.
  ASSERT_EQ(fa_attention_num_splits(kernel, 16, 1, 8192, &parts), FA_SUCCESS);
  EXPECT_EQ(parts, 4);
  // Enough blocks already (B = 64: 128 >= 0.8 x 132): no split.
  ASSERT_EQ(fa_attention_num_splits(kernel, 64, 1, 8192, &parts), FA_SUCCESS);
  EXPECT_EQ(parts, 1);
  // One key tile: nothing to split.
  ASSERT_EQ(fa_attention_num_splits(kernel, 1, 1, 64, &parts), FA_SUCCESS);
  EXPECT_EQ(parts, 1);
  EXPECT_EQ(fa_attention_num_splits(kernel, -1, 1, 64, &parts),
            FA_ERROR_INVALID_ARGUMENT);

  const int64_t B = 3, Nq = 5, Nk = 700, S = 4;
  size_t bytes = 0;
  ASSERT_EQ(fa_attention_workspace_size(kernel, B, Nq, S, &bytes), FA_SUCCESS);
  // partial_o: 4 x 3 x 8 x 5 x 64 floats = 122880 bytes (a multiple of
  // 256), then partial_lse: 4 x 3 x 8 x 5 floats.
  EXPECT_EQ(bytes, 122880u + 1920u);
  size_t refused = 1;
  EXPECT_EQ(fa_attention_workspace_size(kernel, B, Nq, 0, &refused),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(refused, 0u);

  fake->paramsToRecord = 82;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {B, 2, Nk, 64});
  fa_tensor lens = deviceTensor(0x380000, FA_DTYPE_I32, {B});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {B, 8, Nq, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {B, 8, Nq});
  fa_split_kv ws = {S, reinterpret_cast<void *>(0x600000), bytes};

  // Without a split, or with a broken one: nothing launches.
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, &lens, nullptr, &o, &lse,
                                nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("was compiled with --split-kv: launch it with "
                        "fa_attention_launch_split"));
  fa_split_kv small = ws;
  small.workspace_bytes = bytes - 1;
  EXPECT_EQ(fa_attention_launch_split(kernel, &q, &k, &v, &lens, nullptr,
                                      nullptr, &small, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("split: workspace_bytes is 124799, but 4 parts over "
                        "B = 3, Hq = 8, Nq = 5 need 124800"));
  fa_split_kv zero = ws;
  zero.num_splits = 0;
  EXPECT_EQ(fa_attention_launch_split(kernel, &q, &k, &v, &lens, nullptr,
                                      nullptr, &zero, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("num_splits is 0, expected at least 1"));
  fa_split_kv odd = ws;
  odd.workspace = reinterpret_cast<void *>(0x600008);
  EXPECT_EQ(fa_attention_launch_split(kernel, &q, &k, &v, &lens, nullptr,
                                      nullptr, &odd, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("is not 16-byte aligned"));
  fa_split_kv overlapping = ws;
  overlapping.workspace = reinterpret_cast<void *>(0x300000);
  EXPECT_EQ(fa_attention_launch_split(kernel, &q, &k, &v, &lens, nullptr,
                                      nullptr, &overlapping, &o, &lse,
                                      nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("partial_o overlaps v"));
  EXPECT_EQ(fa_attention_launch_split(kernel, &q, &k, &v, &lens, nullptr,
                                      nullptr, nullptr, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fake->launches, 0);

  ASSERT_EQ(fa_attention_launch_split(kernel, &q, &k, &v, &lens, nullptr,
                                      nullptr, &ws, &o, &lse, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 2);
  EXPECT_STREQ(fake->launchedNames[0], "fa_attn");
  // (ceil(5 x 4 / 16) = 2 packed tiles) x 4 parts, Hkv, B.
  EXPECT_EQ(fake->launchedGrids[0][0], 8u);
  EXPECT_EQ(fake->launchedGrids[0][1], 2u);
  EXPECT_EQ(fake->launchedGrids[0][2], 3u);
  EXPECT_STREQ(fake->launchedNames[1], "fa_attn_merge");
  // ceil(3 x 8 x 5 / 4 rows per block), 1, 1; 128 threads.
  EXPECT_EQ(fake->launchedGrids[1][0], 30u);
  EXPECT_EQ(fake->launchedGrids[1][1], 1u);
  EXPECT_EQ(fake->launchedBlocks[1][0], 128u);
  // q, k, v (11 values each), kv_lens (5), o (11), lse (9), then
  // partial_o (13) and partial_lse (11), both from the workspace.
  std::vector<int64_t> partialO = {0x600000, 0x600000, 0, S, B, 8, Nq, 64,
                                   B * 8 * Nq * 64, 8 * Nq * 64, Nq * 64, 64,
                                   1};
  for (size_t i = 0; i < partialO.size(); ++i)
    EXPECT_EQ(fake->params[58 + i], partialO[i]) << "partial_o value " << i;
  std::vector<int64_t> partialLse = {0x600000 + 122880, 0x600000 + 122880, 0,
                                     S, B, 8, Nq, B * 8 * Nq, 8 * Nq, Nq, 1};
  for (size_t i = 0; i < partialLse.size(); ++i)
    EXPECT_EQ(fake->params[71 + i], partialLse[i])
        << "partial_lse value " << i;

  // The C++ wrapper takes the split through AttentionArgs.
  Kernel wrapped;
  wrapped.reset(kernel);
  AttentionArgs args;
  args.q = q;
  args.k = k;
  args.v = v;
  args.o = o;
  args.kvLens = &lens;
  args.lse = &lse;
  EXPECT_EQ(wrapped.attention(args).code(), FA_ERROR_INVALID_ARGUMENT);
  args.split = &ws;
  Status launched = wrapped.attention(args);
  EXPECT_TRUE(launched.ok()) << launched.toString();
  EXPECT_EQ(fake->launches, 4);
  wrapped.reset();

  // A PTX without the merge entry is refused at load.
  ptx = makePtx();
  EXPECT_EQ(load(&kernel), FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no .entry fa_attn_merge"));
}

/// A variable-length kernel on CUDA: the offsets are device memory, passed
/// without being read; the query tiles cover Tq rows (the longest possible
/// sequence), B comes from the offsets' length.
TEST_F(FakeDriverTest, LaunchVarlen) {
  md.varlen = true;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  // q, k, v, o (9 values each), lse (7), cu_seqlens_q and _k (5 each).
  fake->paramsToRecord = 53;
  const int64_t B = 5, Tq = 200, Tk = 300;
  fa_tensor q = deviceTensor(0x100000, FA_DTYPE_F16, {Tq, 8, 64});
  fa_tensor k = deviceTensor(0x200000, FA_DTYPE_F16, {Tk, 2, 64});
  fa_tensor v = deviceTensor(0x300000, FA_DTYPE_F16, {Tk, 2, 64});
  fa_tensor o = deviceTensor(0x400000, FA_DTYPE_F16, {Tq, 8, 64});
  fa_tensor lse = deviceTensor(0x500000, FA_DTYPE_F32, {8, Tq});
  fa_tensor cuQ = deviceTensor(0x600000, FA_DTYPE_I32, {B + 1});
  fa_tensor cuK = deviceTensor(0x700000, FA_DTYPE_I32, {B + 1});
  ASSERT_EQ(fa_attention_launch_varlen(kernel, &q, &k, &v, &cuQ, &cuK,
                                       nullptr, &o, &lse, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  ASSERT_EQ(fake->launches, 1);
  EXPECT_EQ(fake->grid[0], 4u); // ceil(200 / 64)
  EXPECT_EQ(fake->grid[1], 8u); // Hq
  EXPECT_EQ(fake->grid[2], 5u); // B
  std::vector<int64_t> tail = {0x600000, 0x600000, 0, B + 1, 1,
                               0x700000, 0x700000, 0, B + 1, 1};
  for (size_t i = 0; i < tail.size(); ++i)
    EXPECT_EQ(fake->params[43 + i], tail[i]) << "offsets value " << i;
  // Offsets of another length are a different B, checked against O's
  // shape only through the symbols they share: none here, so the launch
  // with a mismatched k is what fails.
  fa_tensor kBad = deviceTensor(0x200000, FA_DTYPE_F16, {Tk + 1, 2, 64});
  EXPECT_EQ(fa_attention_launch_varlen(kernel, &q, &kBad, &v, &cuQ, &cuK,
                                       nullptr, &o, &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fake->launches, 1);
  fa_kernel_destroy(kernel);
}

/// The host-side checks a CUDA caller makes on its tables' host copies
/// (the same rules the CPU launch applies).
TEST(ServingTableChecks, BlockTable) {
  std::vector<int32_t> lens = {20, 0, 33};
  std::vector<int32_t> table = {4, 1, -1, //
                                -1, -1, -1, //
                                0, 2, 3};
  int64_t lensSize[] = {3}, tableSize[] = {3, 3};
  fa_tensor l = fa_tensor_make(lens.data(), FA_DTYPE_I32, 1, lensSize);
  fa_tensor t = fa_tensor_make(table.data(), FA_DTYPE_I32, 2, tableSize);
  EXPECT_EQ(fa_check_block_table(&t, &l, 5, 16), FA_SUCCESS)
      << fa_last_error();
  // Page 4 is past a cache of 4 pages.
  EXPECT_EQ(fa_check_block_table(&t, &l, 4, 16), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("fa_check_block_table: block_table: entry [0, 0] = "
                        "4 is not a page of the cache (P = 4 pages)"));
  // In pages of 8 rows, sequence 0's 20 keys read its third entry (-1),
  // and sequence 2's 33 keys need more than its three entries.
  EXPECT_EQ(fa_check_block_table(&t, &l, 5, 8), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("block_table: entry [0, 2] = -1 is not a page of the "
                        "cache (P = 5 pages); sequence 0 reads it for its "
                        "keys 16 to 19"));
  lens[0] = 10;
  EXPECT_EQ(fa_check_block_table(&t, &l, 5, 8), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("kv_lens: sequence 2 has 33 keys, but its 3 block "
                        "table entries of 8-row pages hold 0 to 24"));
  lens[1] = -1;
  EXPECT_EQ(fa_check_block_table(&t, &l, 5, 16), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("sequence 1 has a negative length"));
  lens[1] = 0;
  // Bad tensors.
  fa_tensor f = t;
  f.dtype = FA_DTYPE_F32;
  EXPECT_EQ(fa_check_block_table(&f, &l, 5, 16), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("block_table must be i32 of rank 2"));
  EXPECT_EQ(fa_check_block_table(&t, nullptr, 5, 16),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("kv_lens is NULL"));
  fa_tensor strided = t;
  strided.strides[1] = 2;
  EXPECT_EQ(fa_check_block_table(&strided, &l, 5, 16),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("must be contiguous"));
  int64_t twoSize[] = {2};
  fa_tensor two = fa_tensor_make(lens.data(), FA_DTYPE_I32, 1, twoSize);
  EXPECT_EQ(fa_check_block_table(&t, &two, 5, 16), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("kv_lens has 2 sequences, block_table 3"));
  EXPECT_EQ(fa_check_block_table(&t, &l, 5, 0), FA_ERROR_INVALID_ARGUMENT);
}

TEST(ServingTableChecks, CuSeqlens) {
  std::vector<int32_t> cu = {0, 5, 5, 12};
  int64_t size[] = {4};
  fa_tensor t = fa_tensor_make(cu.data(), FA_DTYPE_I32, 1, size);
  EXPECT_EQ(fa_check_cu_seqlens(&t, 12), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fa_check_cu_seqlens(&t, 11), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("fa_check_cu_seqlens: cu_seqlens: the last offset 12 "
                        "is past the 11 packed token rows"));
  cu[2] = 4;
  EXPECT_EQ(fa_check_cu_seqlens(&t, 12), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("offsets must not decrease: entry "
                                         "2 = 4 is below entry 1 = 5"));
  cu[2] = 5;
  cu[0] = -1;
  EXPECT_EQ(fa_check_cu_seqlens(&t, 12), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("the first offset is negative"));
  int64_t none[] = {0};
  fa_tensor empty = fa_tensor_make(cu.data(), FA_DTYPE_I32, 1, none);
  EXPECT_EQ(fa_check_cu_seqlens(&empty, 12), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("expected B + 1 >= 1"));
  EXPECT_EQ(fa_check_cu_seqlens(nullptr, 12), FA_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeDriverTest, DeviceChip) {
  char chip[8];
  ASSERT_EQ(fa_cuda_device_chip(chip, sizeof(chip)), FA_SUCCESS)
      << fa_last_error();
  EXPECT_STREQ(chip, "sm_80");
  fake->ccMajor = 9;
  fake->ccMinor = 0;
  ASSERT_EQ(fa_cuda_device_chip(chip, sizeof(chip)), FA_SUCCESS);
  EXPECT_STREQ(chip, "sm_90");
  fake->ccMajor = 12;
  ASSERT_EQ(fa_cuda_device_chip(chip, sizeof(chip)), FA_SUCCESS);
  EXPECT_STREQ(chip, "sm_120");
  EXPECT_EQ(fa_cuda_device_chip(chip, 6), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("the chip 'sm_120' needs 7 bytes, "
                                         "but buf has 6"));
  // A query needs no context and creates none.
  EXPECT_EQ(fake->currentContext, nullptr);
  EXPECT_EQ(fake->primaryRetains, 0);
  fake->deviceCount = 0;
  EXPECT_EQ(fa_cuda_device_chip(chip, sizeof(chip)), FA_ERROR_NO_DEVICE);
}

TEST_F(FakeDriverTest, MemoryHelpers) {
  std::vector<float> host = {1, 2, 3, 4}, back(4, 0);
  void *device = nullptr;
  ASSERT_EQ(fa_cuda_malloc(&device, sizeof(float) * 4), FA_SUCCESS)
      << fa_last_error();
  ASSERT_NE(device, nullptr);
  // Device 0's primary context is now current (for fa_kernel_load too).
  EXPECT_NE(fake->currentContext, nullptr);
  ASSERT_EQ(fa_cuda_memcpy_htod(device, host.data(), sizeof(float) * 4),
            FA_SUCCESS);
  ASSERT_EQ(fa_cuda_synchronize(), FA_SUCCESS);
  ASSERT_EQ(fa_cuda_memcpy_dtoh(back.data(), device, sizeof(float) * 4),
            FA_SUCCESS);
  EXPECT_EQ(back, host);
  EXPECT_EQ(fa_cuda_free(device), FA_SUCCESS);
  EXPECT_EQ(fake->allocs, 1);
  EXPECT_EQ(fake->frees, 1);
  EXPECT_EQ(fake->copiesToDevice, 1);
  EXPECT_EQ(fake->copiesToHost, 1);
  EXPECT_EQ(fake->bytesToDevice, 16u);
  EXPECT_EQ(fake->syncs, 1);

  // The loaded kernel uses the helpers' context rather than retaining one.
  void *context = fake->currentContext;
  int retains = fake->primaryRetains;
  fa_kernel *kernel = nullptr;
  ASSERT_EQ(load(&kernel), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(fake->primaryRetains, retains);
  EXPECT_EQ(fake->currentContext, context);
  fa_kernel_destroy(kernel);

  // Driver failures name the call.
  fake->allocResult = 2;
  EXPECT_EQ(fa_cuda_malloc(&device, 1024), FA_ERROR_CUDA);
  EXPECT_EQ(device, nullptr);
  EXPECT_THAT(fa_last_error(), HasSubstr("cuMemAlloc_v2(1024 bytes) failed: "
                                         "CUDA_ERROR_OUT_OF_MEMORY"));
  fake->syncResult = 700;
  EXPECT_EQ(fa_cuda_synchronize(), FA_ERROR_CUDA);
  EXPECT_THAT(fa_last_error(), HasSubstr("cuCtxSynchronize failed: "
                                         "CUDA_ERROR_ILLEGAL_ADDRESS"));
}

TEST_F(FakeDriverTest, CppWrapper) {
  dir.write("attn.ptx", signPtx(ptx, md));
  std::string path = dir.write("attn.json", toJson(md));
  Kernel kernel;
  Status status = Kernel::load(path, FA_DEVICE_CUDA, kernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_TRUE(static_cast<bool>(kernel));
  EXPECT_EQ(kernel.info().heads, 8);

  Kernel moved = std::move(kernel);
  EXPECT_FALSE(static_cast<bool>(kernel));
  EXPECT_TRUE(static_cast<bool>(moved));

  AttentionArgs args;
  args.q = deviceTensor(0x1000, FA_DTYPE_F32, {1, 8, 4, 64});
  args.k = deviceTensor(0x2000, FA_DTYPE_F16, {1, 2, 4, 64});
  args.v = deviceTensor(0x3000, FA_DTYPE_F16, {1, 2, 4, 64});
  args.o = deviceTensor(0x4000, FA_DTYPE_F16, {1, 8, 4, 64});
  Status bad = moved.attention(args);
  EXPECT_EQ(bad.code(), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(bad.message(), HasSubstr("q: dtype f32, but kernel 'attn' "
                                       "takes f16"));
  EXPECT_THAT(bad.toString(), HasSubstr("FA_ERROR_INVALID_ARGUMENT: "));

  moved.reset();
  EXPECT_EQ(fake->modulesUnloaded, 1);

  Kernel missing;
  Status notFound = Kernel::load(dir.file("none.json"), FA_DEVICE_CUDA,
                                 missing);
  EXPECT_EQ(notFound.code(), FA_ERROR_IO);
  EXPECT_FALSE(static_cast<bool>(missing));
}

} // namespace
