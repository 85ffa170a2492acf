//===- HostInfo.cpp - What the tools ask the host -------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The host's cache sizes and vector width, which the tools pass to
// fa-lower-to-cpu (cpu-l2-cache-size, vector-width): the passes themselves
// do not probe the machine they run on, so their output depends only on
// their input and options.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Compiler.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/TargetParser/Host.h"

#include <unistd.h> // sysconf

using namespace mlir;
using llvm::StringRef;

/// Reads a sysfs cache size ("1024K", "2M"); 0 when unreadable.
static int64_t readSysfsCacheSize(const llvm::Twine &path) {
  auto buf = llvm::MemoryBuffer::getFileAsStream(path);
  if (!buf)
    return 0;
  StringRef text = (*buf)->getBuffer().trim();
  int64_t unit = 1;
  if (text.consume_back("K"))
    unit = 1024;
  else if (text.consume_back("M"))
    unit = 1024 * 1024;
  int64_t value = 0;
  if (text.getAsInteger(10, value) || value <= 0)
    return 0;
  return value * unit;
}

/// The size of cpu0's data (or unified) cache of `level` from sysfs, or 0.
static int64_t readSysfsDataCacheSize(StringRef level) {
  for (int index = 0; index < 8; ++index) {
    std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    auto levelFile = llvm::MemoryBuffer::getFileAsStream(dir + "/level");
    auto type = llvm::MemoryBuffer::getFileAsStream(dir + "/type");
    if (!levelFile || !type)
      break;
    if ((*levelFile)->getBuffer().trim() == level &&
        (*type)->getBuffer().trim() != "Instruction")
      if (int64_t size = readSysfsCacheSize(dir + "/size"))
        return size;
  }
  return 0;
}

int64_t mlir::fa::compile::getHostL2CacheSize() {
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (long size = sysconf(_SC_LEVEL2_CACHE_SIZE); size > 0)
    return size;
#endif
  return readSysfsDataCacheSize("2");
}

int64_t mlir::fa::compile::getHostL1CacheSize() {
#ifdef _SC_LEVEL1_DCACHE_SIZE
  if (long size = sysconf(_SC_LEVEL1_DCACHE_SIZE); size > 0)
    return size;
#endif
  return readSysfsDataCacheSize("1");
}

int64_t mlir::fa::compile::getHostVectorWidth() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto it = features.find("avx512f");
  return it != features.end() && it->second ? 16 : 8;
}

bool mlir::fa::compile::hostHasBf16Dot() {
  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  return features.lookup("avx512f") && features.lookup("avx512bf16");
}
