//===- HostInfo.h - What the CPU backend knows about the host ---*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The host's architecture and OS (from the compiler's predefined macros) and
// its CPU features under LLVM's names (from cpuid on x86, /proc/cpuinfo on
// AArch64 Linux), so FARuntime can refuse a CPU artifact the host cannot
// run without linking LLVM. The x86 table follows LLVM's
// sys::getHostCPUFeatures (test/Unit/Runtime checks the two agree).
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_RUNTIME_HOSTINFO_H
#define FA_LIB_RUNTIME_HOSTINFO_H

#include <map>
#include <string>
#include <string_view>

namespace fa {
namespace runtime {
namespace host {

/// The parts of a target triple the CPU backend compares.
struct TripleParts {
  std::string arch; ///< normalized: x86_64, x86, aarch64, arm, riscv64, ...
  std::string os;   ///< normalized: linux, darwin, windows, freebsd, ...;
                    ///< "unknown" when the triple names none
};

/// Splits and normalizes a triple ("x86_64-pc-linux-gnu" -> x86_64, linux;
/// "amd64-unknown-freebsd13" -> x86_64, freebsd; "arm64-apple-macosx14"
/// -> aarch64, darwin).
TripleParts parseTriple(std::string_view triple);

/// This process's architecture and OS.
TripleParts getHostParts();

/// A triple for this host, for messages ("x86_64-unknown-linux-gnu").
std::string getHostTriple();

/// The CPU's name for messages (the cpuid brand string on x86), or
/// "unknown".
std::string getHostCpuName();

/// The host's CPU features this detector knows about, under LLVM's names,
/// each present or absent. Features not in the map are unknown (not
/// checked). Empty where no detector exists.
const std::map<std::string, bool> &getHostCpuFeatures();

} // namespace host
} // namespace runtime
} // namespace fa

#endif // FA_LIB_RUNTIME_HOSTINFO_H
