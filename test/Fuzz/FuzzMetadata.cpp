//===- FuzzMetadata.cpp - libFuzzer target for kernel metadata ------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Feeds arbitrary bytes to the runtime's metadata reader (fa-kernel/2 JSON,
// lib/Runtime/KernelMetadata.cpp) and loader (fa_kernel_load). Accepted
// metadata must serialize and re-parse to the same text; the loader, given
// the bytes as a .json file in an otherwise empty directory, must return a
// status (no artifact files exist, and no CUDA driver is needed: without
// one the CUDA load fails cleanly). Seeds: test/Fuzz/corpus/metadata.
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/KernelMetadata.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

using namespace fa::runtime;

[[noreturn]] static void fail(const char *what, const std::string &detail) {
  std::fprintf(stderr, "fa-fuzz-metadata: %s: %s\n", what, detail.c_str());
  std::abort();
}

static std::string scratchDir, metadataPath;

static void removeScratch() {
  unlink(metadataPath.c_str());
  rmdir(scratchDir.c_str());
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // One scratch directory per process, holding only the metadata file.
  char dir[] = "/tmp/fa-fuzz-metadata-XXXXXX";
  if (!mkdtemp(dir))
    fail("mkdtemp", dir);
  scratchDir = dir;
  metadataPath = scratchDir + "/kernel.json";
  std::atexit(removeScratch);
  // Never pick up a real CUDA driver: the fuzzer tests the reader.
  setenv("FA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  return 0;
}

static bool mentionsParentDirectory(const KernelMetadata &md) {
  for (const std::string *path : {&md.files.ptx, &md.files.cubin,
                                  &md.files.object, &md.files.library,
                                  &md.files.header})
    if (path->find("..") != std::string::npos)
      return true;
  return false;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  std::string error;
  std::optional<KernelMetadata> md = parseKernelMetadata(text, error);
  if (!md) {
    if (error.empty())
      fail("rejected without a message", std::string(text));
    return 0;
  }
  if (std::optional<std::string> problem = verifyKernelMetadata(*md))
    fail("parseKernelMetadata accepted what verifyKernelMetadata rejects",
         *problem);

  // Serialization is a fixed point of parsing.
  std::string serialized = serializeKernelMetadata(*md);
  std::optional<KernelMetadata> again = parseKernelMetadata(serialized, error);
  if (!again)
    fail("serialized metadata does not re-parse", error);
  if (serializeKernelMetadata(*again) != serialized)
    fail("serialize(parse(serialize(m))) != serialize(m)", serialized);

  (void)getCanonicalParams(*md, md->dtype, false, false);
  if (md->launch && md->blockQ > 0)
    (void)getLaunchGrid(*md, 3, 1000);

  // The loader on the same bytes. A relative path with ".." could name a
  // real library on this machine; the reader allows it (the artifact's
  // directory is the user's), so skip the load there.
  if (mentionsParentDirectory(*md))
    return 0;
  {
    std::ofstream out(metadataPath, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  for (fa_device device : {FA_DEVICE_CPU, FA_DEVICE_CUDA}) {
    fa_kernel *kernel = nullptr;
    fa_status status = fa_kernel_load(metadataPath.c_str(), device, &kernel);
    if (status == FA_SUCCESS)
      fail("loaded a kernel whose files do not exist", std::string(text));
    if (kernel)
      fail("a failed load returned a kernel", fa_last_error());
    (void)fa_last_error();
  }
  return 0;
}
