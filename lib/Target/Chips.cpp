//===- Chips.cpp - The NVIDIA chips fa compiles for -----------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The chip table. Only the C++17 standard library: lib/Runtime compiles this
// file into FARuntime (also in its standalone build), the compiler side
// links it as FATarget.
//
//===----------------------------------------------------------------------===//

#include "fa/Target/Chips.h"

#include <iterator>

using namespace fa::target;

/// PTX ISA minimums from the PTX ISA's target table; opt-in shared memory
/// per block and the per-SM limits from the CUDA programming guide's
/// compute-capability table (163 KiB per block on 8.0, 99 KiB on 8.6 and
/// 8.9, 227 KiB on 9.0). The products and their peaks are NVIDIA's
/// published figures (docs/cost.md cites each): A100 SXM4 80 GB, RTX A6000,
/// L40S and H100 SXM5.
static const ChipInfo kChips[] = {
    // name, PTX, mma.sync, wgmma, opt-in shared bytes per block,
    // threads/SM, blocks/SM, registers/SM, shared bytes/SM,
    // product, SMs, boost MHz, tensor TFLOP/s, f32 TFLOP/s, GB/s
    {"sm_80", 70, true, false, 163 * 1024, 2048, 32, 65536, 164 * 1024,
     "A100 SXM4 80GB", 108, 1410, 312.0, 19.5, 2039.0},
    {"sm_86", 71, true, false, 99 * 1024, 1536, 16, 65536, 100 * 1024,
     "RTX A6000", 84, 1800, 154.8, 38.7, 768.0},
    {"sm_89", 78, true, false, 99 * 1024, 1536, 24, 65536, 100 * 1024, "L40S",
     142, 2520, 362.05, 91.6, 864.0},
    {"sm_90", 78, true, false, 227 * 1024, 2048, 32, 65536, 228 * 1024,
     "H100 SXM5 80GB", 132, 1980, 989.4, 67.0, 3350.0},
    {"sm_90a", 80, true, true, 227 * 1024, 2048, 32, 65536, 228 * 1024,
     "H100 SXM5 80GB", 132, 1980, 989.4, 67.0, 3350.0},
};

ChipRange fa::target::getChips() {
  return {std::begin(kChips), std::end(kChips)};
}

const ChipInfo *fa::target::lookupChip(std::string_view name) {
  for (const ChipInfo &chip : kChips)
    if (name == chip.name)
      return &chip;
  return nullptr;
}

std::string fa::target::getChipList() {
  std::string list;
  size_t n = std::size(kChips);
  for (size_t i = 0; i < n; ++i) {
    if (i)
      list += i + 1 == n ? " or " : ", ";
    list += kChips[i].name;
  }
  return list;
}

std::optional<ChipName> ChipName::parse(std::string_view name) {
  if (name.substr(0, 3) != "sm_")
    return std::nullopt;
  name.remove_prefix(3);
  ChipName chip;
  if (!name.empty() && (name.back() == 'a' || name.back() == 'f')) {
    chip.suffix = name.back();
    name.remove_suffix(1);
  }
  if (name.empty() || name.size() > 3)
    return std::nullopt;
  int value = 0;
  for (char c : name) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 10)
    return std::nullopt;
  chip.major = value / 10;
  chip.minor = value % 10;
  return chip;
}
