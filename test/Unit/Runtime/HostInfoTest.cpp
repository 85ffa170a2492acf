//===- HostInfoTest.cpp - FARuntime's host detection against LLVM's -------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// FARuntime decides whether the host can run a CPU artifact without LLVM
// (lib/Runtime/HostInfo.h). Its answers must be LLVM's: the triple's arch
// and OS, and every CPU feature both detectors know.
//
//===----------------------------------------------------------------------===//

#include "HostInfo.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include "gtest/gtest.h"

using namespace fa::runtime;

namespace {

TEST(HostInfoTest, ParseTriple) {
  auto parts = [](const char *triple) {
    host::TripleParts p = host::parseTriple(triple);
    return p.arch + " " + p.os;
  };
  EXPECT_EQ(parts("x86_64-pc-linux-gnu"), "x86_64 linux");
  EXPECT_EQ(parts("x86_64-unknown-linux-gnu"), "x86_64 linux");
  EXPECT_EQ(parts("x86_64-linux-gnu"), "x86_64 linux");
  EXPECT_EQ(parts("amd64-unknown-freebsd13.2"), "x86_64 freebsd");
  EXPECT_EQ(parts("aarch64-unknown-linux-gnu"), "aarch64 linux");
  EXPECT_EQ(parts("arm64-apple-macosx14.0.0"), "aarch64 darwin");
  EXPECT_EQ(parts("arm64-apple-darwin23.1.0"), "aarch64 darwin");
  EXPECT_EQ(parts("x86_64-pc-windows-msvc"), "x86_64 windows");
  EXPECT_EQ(parts("i686-pc-linux-gnu"), "x86 linux");
  EXPECT_EQ(parts("riscv64-unknown-elf"), "riscv64 unknown");
  EXPECT_EQ(parts(""), " unknown");
}

TEST(HostInfoTest, HostMatchesLLVM) {
  llvm::Triple triple(llvm::sys::getProcessTriple());
  host::TripleParts ours = host::getHostParts();
  host::TripleParts llvmParts = host::parseTriple(triple.str());
  EXPECT_EQ(ours.arch, llvmParts.arch) << triple.str();
  EXPECT_EQ(ours.os, llvmParts.os) << triple.str();
  host::TripleParts fromOurTriple = host::parseTriple(host::getHostTriple());
  EXPECT_EQ(fromOurTriple.arch, ours.arch);
  EXPECT_EQ(fromOurTriple.os, ours.os);
}

TEST(HostInfoTest, CpuFeaturesMatchLLVM) {
  const std::map<std::string, bool> &ours = host::getHostCpuFeatures();
  llvm::StringMap<bool> theirs = llvm::sys::getHostCPUFeatures();
#if defined(__x86_64__)
  // The features fa-compile records for x86 hosts are all known.
  for (const char *f : {"64bit", "sse2", "sse4.2", "avx", "avx2", "fma",
                        "avx512f", "avx512bw", "avx512vl", "amx-tile",
                        "avx512fp16", "avx10.1", "sha512", "f16c", "bmi2"})
    EXPECT_TRUE(ours.count(f)) << f;
  EXPECT_TRUE(ours.at("sse2"));
#endif
  size_t compared = 0;
  for (const auto &[name, present] : ours) {
    auto it = theirs.find(name);
    if (it == theirs.end())
      continue;
    ++compared;
    EXPECT_EQ(present, it->second) << "feature " << name;
  }
  // Features LLVM reports present must not be unknown-absent here.
  for (const auto &entry : theirs) {
    auto it = ours.find(entry.getKey().str());
    if (it != ours.end()) {
      EXPECT_EQ(it->second, entry.getValue()) << entry.getKey().str();
    }
  }
#if defined(__x86_64__)
  EXPECT_GT(compared, 50u);
#endif
  EXPECT_FALSE(host::getHostCpuName().empty());
}

} // namespace
