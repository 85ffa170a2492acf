//===- Chips.h - The NVIDIA chips fa compiles for ---------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The one table of GPU chips: what fa-lower-to-nvvm accepts, the oldest PTX
// ISA each needs, which tensor-core kernel families it has and how much
// shared memory a block may opt in to. The pipelines, fa-compile, fa-run and
// the runtime read it. Like the runtime, this header and Chips.cpp need only
// the C++17 standard library (no LLVM): the runtime's standalone build
// compiles them too.
//
// Adding a chip means adding one row to the table in lib/Target/Chips.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef FA_TARGET_CHIPS_H
#define FA_TARGET_CHIPS_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fa {
namespace target {

/// One chip of the GPU path.
struct ChipInfo {
  /// The target name, e.g. "sm_90a".
  const char *name;
  /// The oldest PTX ISA version that supports the chip, as 10 * major +
  /// minor (80: PTX ISA 8.0).
  int minPtxIsa;
  /// Whether the mma.sync kernels (fa-map-to-tensor-cores) run on it.
  bool hasMmaSync;
  /// Whether the wgmma kernels (fa-map-to-wgmma) run on it.
  bool hasWgmma;
  /// The most shared memory (static + dynamic) one block may use after
  /// opting in, in bytes.
  int64_t optInSharedBytesPerBlock;

  /// Per-SM limits (the CUDA programming guide's compute-capability
  /// table), for occupancy: resident threads, resident blocks, 32-bit
  /// registers and shared memory (bytes; each block also takes
  /// kReservedSharedBytesPerBlock of it).
  int64_t maxThreadsPerSM;
  int64_t maxBlocksPerSM;
  int64_t registersPerSM;
  int64_t sharedBytesPerSM;

  /// The product the cost report's roofline is evaluated for (one
  /// representative part of the chip; published figures, cited in
  /// docs/cost.md): its name, SM count, boost clock (MHz), dense f16/bf16
  /// tensor-core peak with f32 accumulation and f32 (CUDA core) peak in
  /// TFLOP/s, and memory bandwidth in GB/s.
  const char *product;
  int64_t sms;
  int64_t boostMHz;
  double tensorTflops;
  double f32Tflops;
  double bandwidthGBs;

  /// exp2 (MUFU.EX2) results per clock per SM: 16 on every chip here.
  static constexpr int64_t kExpPerClockPerSM = 16;
  /// Shared memory the driver reserves for each resident block.
  static constexpr int64_t kReservedSharedBytesPerBlock = 1024;
  /// Registers are allocated per warp in units of this many.
  static constexpr int64_t kRegisterAllocationUnit = 256;

  /// Peak exp throughput of the product, per second.
  double getExpPerSecond() const {
    return double(kExpPerClockPerSM) * double(sms) * double(boostMHz) * 1e6;
  }
};

/// The chips, oldest first.
struct ChipRange {
  const ChipInfo *first, *last;
  const ChipInfo *begin() const { return first; }
  const ChipInfo *end() const { return last; }
};
ChipRange getChips();

/// The row of `name`, or null for a chip fa does not compile for.
const ChipInfo *lookupChip(std::string_view name);

/// The supported chip names for messages: "sm_80, sm_86, sm_89, sm_90 or
/// sm_90a".
std::string getChipList();

/// A chip name of any generation, "sm_<major><minor>" with an optional
/// suffix: `a` (arch-specific code, that exact chip only) or `f` (family
/// code, that major and later minors). The runtime loads artifacts for
/// chips outside the table too.
struct ChipName {
  int major = 0, minor = 0;
  char suffix = 0; ///< 0, 'a' or 'f'

  /// Parses "sm_80", "sm_90a", "sm_100f"; nullopt for anything else.
  static std::optional<ChipName> parse(std::string_view name);

  /// 10 * major + minor.
  int getComputeCapability() const { return major * 10 + minor; }
};

} // namespace target
} // namespace fa

#endif // FA_TARGET_CHIPS_H
