//===- HostInfo.cpp - What the CPU backend knows about the host -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "HostInfo.h"

#include "RuntimeInternal.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

using namespace fa::runtime;
using namespace fa::runtime::host;

//===----------------------------------------------------------------------===//
// Triples
//===----------------------------------------------------------------------===//

static std::string normalizeArch(std::string_view arch) {
  if (arch == "x86_64" || arch == "amd64" || arch == "x86_64h")
    return "x86_64";
  if (arch == "i386" || arch == "i486" || arch == "i586" || arch == "i686" ||
      arch == "x86")
    return "x86";
  if (arch == "aarch64" || arch == "arm64" || arch == "arm64e")
    return "aarch64";
  if (startsWith(arch, "armv") || arch == "arm")
    return "arm";
  return std::string(arch);
}

/// The OS a triple component names, or "".
static std::string normalizeOS(std::string_view component) {
  static const std::pair<const char *, const char *> prefixes[] = {
      {"linux", "linux"},     {"darwin", "darwin"},   {"macos", "darwin"},
      {"ios", "ios"},         {"windows", "windows"}, {"win32", "windows"},
      {"mingw", "windows"},   {"cygwin", "windows"},  {"freebsd", "freebsd"},
      {"netbsd", "netbsd"},   {"openbsd", "openbsd"}, {"dragonfly", "dragonfly"},
      {"solaris", "solaris"}, {"haiku", "haiku"},     {"fuchsia", "fuchsia"},
      {"wasi", "wasi"},       {"emscripten", "emscripten"},
  };
  for (auto [prefix, os] : prefixes)
    if (startsWith(component, prefix))
      return os;
  return "";
}

TripleParts fa::runtime::host::parseTriple(std::string_view triple) {
  std::vector<std::string_view> parts = split(triple, '-');
  TripleParts out;
  out.arch = normalizeArch(parts.empty() ? std::string_view() : parts[0]);
  out.os = "unknown";
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string os = normalizeOS(parts[i]);
    if (!os.empty()) {
      out.os = os;
      break;
    }
  }
  return out;
}

TripleParts fa::runtime::host::getHostParts() {
  TripleParts p;
#if defined(__x86_64__)
  p.arch = "x86_64";
#elif defined(__i386__)
  p.arch = "x86";
#elif defined(__aarch64__)
  p.arch = "aarch64";
#elif defined(__arm__)
  p.arch = "arm";
#elif defined(__riscv) && __riscv_xlen == 64
  p.arch = "riscv64";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
  p.arch = "powerpc64le";
#else
  p.arch = "unknown";
#endif
#if defined(__linux__)
  p.os = "linux";
#elif defined(__APPLE__)
  p.os = "darwin";
#elif defined(_WIN32)
  p.os = "windows";
#elif defined(__FreeBSD__)
  p.os = "freebsd";
#else
  p.os = "unknown";
#endif
  return p;
}

std::string fa::runtime::host::getHostTriple() {
  TripleParts p = getHostParts();
  std::string triple = p.arch + "-unknown-" + p.os;
#if defined(__linux__) && defined(__GLIBC__)
  triple += "-gnu";
#endif
  return triple;
}

//===----------------------------------------------------------------------===//
// CPU features
//===----------------------------------------------------------------------===//

#if defined(__x86_64__) || defined(__i386__)

namespace {
struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};
} // namespace

/// cpuid(leaf, subleaf); false when the leaf is unsupported.
static bool cpuid(unsigned leaf, unsigned subleaf, CpuidRegs &r) {
  return __get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) !=
         0;
}

/// The low 32 bits of XCR0 (only valid when OSXSAVE is set).
static unsigned readXcr0() {
  unsigned eax, edx;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" // xgetbv
                   : "=a"(eax), "=d"(edx)
                   : "c"(0));
  return eax;
}

static std::map<std::string, bool> detectX86Features() {
  std::map<std::string, bool> f;
  CpuidRegs r;
  if (!cpuid(0, 0, r) || r.eax < 1)
    return f;
  unsigned maxLevel = r.eax;
  cpuid(1, 0, r);
  auto bit = [](unsigned reg, int b) { return ((reg >> b) & 1) != 0; };

  f["cx8"] = bit(r.edx, 8);
  f["cmov"] = bit(r.edx, 15);
  f["mmx"] = bit(r.edx, 23);
  f["fxsr"] = bit(r.edx, 24);
  f["sse"] = bit(r.edx, 25);
  f["sse2"] = bit(r.edx, 26);
  f["sse3"] = bit(r.ecx, 0);
  f["pclmul"] = bit(r.ecx, 1);
  f["ssse3"] = bit(r.ecx, 9);
  f["cx16"] = bit(r.ecx, 13);
  f["sse4.1"] = bit(r.ecx, 19);
  f["sse4.2"] = bit(r.ecx, 20);
  f["crc32"] = f["sse4.2"];
  f["movbe"] = bit(r.ecx, 22);
  f["popcnt"] = bit(r.ecx, 23);
  f["aes"] = bit(r.ecx, 25);
  f["rdrnd"] = bit(r.ecx, 30);

  // AVX needs the OS to save the YMM state (XCR0 bits 1, 2), AVX-512 the
  // opmask and ZMM state (bits 5-7), AMX the tile state (bits 17, 18).
  bool hasXSave = bit(r.ecx, 27);
  unsigned xcr0 = hasXSave ? readXcr0() : 0;
  bool avxSave = hasXSave && bit(r.ecx, 28) && (xcr0 & 0x6) == 0x6;
#if defined(__APPLE__)
  bool avx512Save = true;
#else
  bool avx512Save = avxSave && (xcr0 & 0xe0) == 0xe0;
#endif
  const unsigned amxBits = (1u << 17) | (1u << 18);
  bool amxSave = hasXSave && (xcr0 & amxBits) == amxBits;

  f["avx"] = avxSave;
  f["fma"] = bit(r.ecx, 12) && avxSave;
  f["xsave"] = bit(r.ecx, 26) && avxSave;
  f["f16c"] = bit(r.ecx, 29) && avxSave;

  CpuidRegs ext;
  cpuid(0x80000000, 0, ext);
  unsigned maxExtLevel = ext.eax;
  CpuidRegs e1;
  bool hasExt1 = maxExtLevel >= 0x80000001 && cpuid(0x80000001, 0, e1);
  f["sahf"] = hasExt1 && bit(e1.ecx, 0);
  f["lzcnt"] = hasExt1 && bit(e1.ecx, 5);
  f["sse4a"] = hasExt1 && bit(e1.ecx, 6);
  f["prfchw"] = hasExt1 && bit(e1.ecx, 8);
  f["xop"] = hasExt1 && bit(e1.ecx, 11) && avxSave;
  f["lwp"] = hasExt1 && bit(e1.ecx, 15);
  f["fma4"] = hasExt1 && bit(e1.ecx, 16) && avxSave;
  f["tbm"] = hasExt1 && bit(e1.ecx, 21);
  f["mwaitx"] = hasExt1 && bit(e1.ecx, 29);
  f["64bit"] = hasExt1 && bit(e1.edx, 29);

  CpuidRegs e8;
  bool hasExt8 = maxExtLevel >= 0x80000008 && cpuid(0x80000008, 0, e8);
  f["clzero"] = hasExt8 && bit(e8.ebx, 0);
  f["rdpru"] = hasExt8 && bit(e8.ebx, 4);
  f["wbnoinvd"] = hasExt8 && bit(e8.ebx, 9);

  CpuidRegs l7;
  bool hasLeaf7 = maxLevel >= 7 && cpuid(7, 0, l7);
  f["fsgsbase"] = hasLeaf7 && bit(l7.ebx, 0);
  f["sgx"] = hasLeaf7 && bit(l7.ebx, 2);
  f["bmi"] = hasLeaf7 && bit(l7.ebx, 3);
  f["avx2"] = hasLeaf7 && bit(l7.ebx, 5) && avxSave;
  f["bmi2"] = hasLeaf7 && bit(l7.ebx, 8);
  f["invpcid"] = hasLeaf7 && bit(l7.ebx, 10);
  f["rtm"] = hasLeaf7 && bit(l7.ebx, 11);
  f["avx512f"] = hasLeaf7 && bit(l7.ebx, 16) && avx512Save;
  f["avx512dq"] = hasLeaf7 && bit(l7.ebx, 17) && avx512Save;
  f["rdseed"] = hasLeaf7 && bit(l7.ebx, 18);
  f["adx"] = hasLeaf7 && bit(l7.ebx, 19);
  f["avx512ifma"] = hasLeaf7 && bit(l7.ebx, 21) && avx512Save;
  f["clflushopt"] = hasLeaf7 && bit(l7.ebx, 23);
  f["clwb"] = hasLeaf7 && bit(l7.ebx, 24);
  f["avx512cd"] = hasLeaf7 && bit(l7.ebx, 28) && avx512Save;
  f["sha"] = hasLeaf7 && bit(l7.ebx, 29);
  f["avx512bw"] = hasLeaf7 && bit(l7.ebx, 30) && avx512Save;
  f["avx512vl"] = hasLeaf7 && bit(l7.ebx, 31) && avx512Save;
  f["avx512vbmi"] = hasLeaf7 && bit(l7.ecx, 1) && avx512Save;
  f["pku"] = hasLeaf7 && bit(l7.ecx, 4);
  f["waitpkg"] = hasLeaf7 && bit(l7.ecx, 5);
  f["avx512vbmi2"] = hasLeaf7 && bit(l7.ecx, 6) && avx512Save;
  f["shstk"] = hasLeaf7 && bit(l7.ecx, 7);
  f["gfni"] = hasLeaf7 && bit(l7.ecx, 8);
  f["vaes"] = hasLeaf7 && bit(l7.ecx, 9) && avxSave;
  f["vpclmulqdq"] = hasLeaf7 && bit(l7.ecx, 10) && avxSave;
  f["avx512vnni"] = hasLeaf7 && bit(l7.ecx, 11) && avx512Save;
  f["avx512bitalg"] = hasLeaf7 && bit(l7.ecx, 12) && avx512Save;
  f["avx512vpopcntdq"] = hasLeaf7 && bit(l7.ecx, 14) && avx512Save;
  f["rdpid"] = hasLeaf7 && bit(l7.ecx, 22);
  f["kl"] = hasLeaf7 && bit(l7.ecx, 23);
  f["cldemote"] = hasLeaf7 && bit(l7.ecx, 25);
  f["movdiri"] = hasLeaf7 && bit(l7.ecx, 27);
  f["movdir64b"] = hasLeaf7 && bit(l7.ecx, 28);
  f["enqcmd"] = hasLeaf7 && bit(l7.ecx, 29);
  f["uintr"] = hasLeaf7 && bit(l7.edx, 5);
  f["avx512vp2intersect"] = hasLeaf7 && bit(l7.edx, 8) && avx512Save;
  f["serialize"] = hasLeaf7 && bit(l7.edx, 14);
  f["tsxldtrk"] = hasLeaf7 && bit(l7.edx, 16);
  f["pconfig"] = hasLeaf7 && bit(l7.edx, 18);
  f["amx-bf16"] = hasLeaf7 && bit(l7.edx, 22) && amxSave;
  f["avx512fp16"] = hasLeaf7 && bit(l7.edx, 23) && avx512Save;
  f["amx-tile"] = hasLeaf7 && bit(l7.edx, 24) && amxSave;
  f["amx-int8"] = hasLeaf7 && bit(l7.edx, 25) && amxSave;

  CpuidRegs l71;
  bool hasLeaf7Sub1 = hasLeaf7 && l7.eax >= 1 && cpuid(7, 1, l71);
  f["sha512"] = hasLeaf7Sub1 && bit(l71.eax, 0);
  f["sm3"] = hasLeaf7Sub1 && bit(l71.eax, 1);
  f["sm4"] = hasLeaf7Sub1 && bit(l71.eax, 2);
  f["raoint"] = hasLeaf7Sub1 && bit(l71.eax, 3);
  f["avxvnni"] = hasLeaf7Sub1 && bit(l71.eax, 4) && avxSave;
  f["avx512bf16"] = hasLeaf7Sub1 && bit(l71.eax, 5) && avx512Save;
  f["cmpccxadd"] = hasLeaf7Sub1 && bit(l71.eax, 7);
  f["amx-fp16"] = hasLeaf7Sub1 && bit(l71.eax, 21) && amxSave;
  f["hreset"] = hasLeaf7Sub1 && bit(l71.eax, 22);
  f["avxifma"] = hasLeaf7Sub1 && bit(l71.eax, 23) && avxSave;
  f["avxvnniint8"] = hasLeaf7Sub1 && bit(l71.edx, 4) && avxSave;
  f["avxneconvert"] = hasLeaf7Sub1 && bit(l71.edx, 5) && avxSave;
  f["amx-complex"] = hasLeaf7Sub1 && bit(l71.edx, 8) && amxSave;
  f["avxvnniint16"] = hasLeaf7Sub1 && bit(l71.edx, 10) && avxSave;
  f["prefetchi"] = hasLeaf7Sub1 && bit(l71.edx, 14);
  f["usermsr"] = hasLeaf7Sub1 && bit(l71.edx, 15);
  bool hasAvx10 = hasLeaf7Sub1 && bit(l71.edx, 19);
  bool hasApx = hasLeaf7Sub1 && bit(l71.edx, 21);
  for (const char *apx :
       {"egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu"})
    f[apx] = hasApx;

  CpuidRegs ld;
  bool hasLeafD = maxLevel >= 0xd && cpuid(0xd, 1, ld);
  f["xsaveopt"] = hasLeafD && bit(ld.eax, 0) && avxSave;
  f["xsavec"] = hasLeafD && bit(ld.eax, 1) && avxSave;
  f["xsaves"] = hasLeafD && bit(ld.eax, 3) && avxSave;

  CpuidRegs l14;
  bool hasLeaf14 = maxLevel >= 0x14 && cpuid(0x14, 0, l14);
  f["ptwrite"] = hasLeaf14 && bit(l14.ebx, 4);

  CpuidRegs l24;
  bool hasLeaf24 = maxLevel >= 0x24 && cpuid(0x24, 0, l24);
  unsigned avx10Version = hasLeaf24 ? (l24.ebx & 0xff) : 0;
  f["avx10.1"] = hasAvx10 && avx10Version >= 1;
  return f;
}

std::string fa::runtime::host::getHostCpuName() {
  CpuidRegs r;
  if (!cpuid(0x80000000, 0, r) || r.eax < 0x80000004)
    return "unknown";
  char brand[49] = {0};
  for (unsigned i = 0; i < 3; ++i) {
    CpuidRegs b;
    cpuid(0x80000002 + i, 0, b);
    std::memcpy(brand + 16 * i, &b.eax, 4);
    std::memcpy(brand + 16 * i + 4, &b.ebx, 4);
    std::memcpy(brand + 16 * i + 8, &b.ecx, 4);
    std::memcpy(brand + 16 * i + 12, &b.edx, 4);
  }
  std::string name(trim(brand));
  return name.empty() ? "unknown" : name;
}

#else // !x86

#if defined(__linux__) && defined(__aarch64__)
/// LLVM's mapping of /proc/cpuinfo's "Features" to feature names; only
/// present features are reported (absent ones stay unknown), as LLVM does.
static std::map<std::string, bool> detectAArch64Features() {
  std::map<std::string, bool> f;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!startsWith(line, "Features"))
      continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos)
      break;
    std::istringstream words(line.substr(colon + 1));
    std::string word;
    bool aes = false, pmull = false, sha1 = false, sha2 = false;
    static const std::pair<const char *, const char *> names[] = {
        {"asimd", "neon"},  {"fp", "fp-armv8"}, {"crc32", "crc"},
        {"atomics", "lse"}, {"sha3", "sha3"},   {"sm4", "sm4"},
        {"sve", "sve"},     {"sve2", "sve2"},   {"sveaes", "sve-aes"},
        {"svesha3", "sve-sha3"}, {"svesm4", "sve-sm4"}};
    while (words >> word) {
      for (auto [cpuinfo, llvm] : names)
        if (word == cpuinfo)
          f[llvm] = true;
      aes |= word == "aes";
      pmull |= word == "pmull";
      sha1 |= word == "sha1";
      sha2 |= word == "sha2";
    }
    f["aes"] = aes && pmull;
    f["sha2"] = sha1 && sha2;
    break;
  }
  return f;
}
#endif

std::string fa::runtime::host::getHostCpuName() { return "unknown"; }

#endif

const std::map<std::string, bool> &fa::runtime::host::getHostCpuFeatures() {
  static const std::map<std::string, bool> features = [] {
#if defined(__x86_64__) || defined(__i386__)
    return detectX86Features();
#elif defined(__linux__) && defined(__aarch64__)
    return detectAArch64Features();
#else
    return std::map<std::string, bool>();
#endif
  }();
  return features;
}
