//===- FloatBits.cpp - Exact f16/bf16 conversions -------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Interpreter/FloatBits.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;

namespace {

/// Rounds `x` to the binary format with `ebits` exponent bits and `mbits`
/// stored significand bits (round to nearest, ties to even) and returns the
/// (1 + ebits + mbits)-bit pattern.
uint32_t roundToFormat(double x, int ebits, int mbits) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  const uint32_t sign = static_cast<uint32_t>(b >> 63) << (ebits + mbits);
  const uint64_t mag = b & 0x7FFFFFFFFFFFFFFFull;
  const uint32_t expAllOnes = (1u << ebits) - 1;
  const uint32_t inf = sign | (expAllOnes << mbits);
  if (mag >= 0x7FF0000000000000ull) {
    if (mag == 0x7FF0000000000000ull)
      return inf;
    // NaN: quiet, keep the top payload bits.
    uint32_t payload =
        static_cast<uint32_t>((mag >> (52 - mbits)) & ((1u << mbits) - 1));
    return inf | (1u << (mbits - 1)) | payload;
  }
  if (mag == 0)
    return sign;
  const int bias = (1 << (ebits - 1)) - 1;
  const int exp = static_cast<int>(mag >> 52) - 1023; // unbiased
  if (exp > bias)
    return inf;
  // The significand with its implicit bit (double subnormals are far below
  // every narrow format's range and round to zero below).
  const uint64_t m = (mag & ((1ull << 52) - 1)) | (1ull << 52);
  // Value = m * 2^(exp - 52). The result's unit in the last place is
  // 2^(e - mbits) for a normal result with exponent e, and 2^(1 - bias -
  // mbits) for a subnormal one.
  const int minExp = 1 - bias;
  const int ulpExp = (exp >= minExp ? exp : minExp) - mbits;
  const int shift = ulpExp - (exp - 52); // bits of m below the ulp
  if (shift >= 64)
    return sign;
  uint64_t q = m >> shift;
  const uint64_t rem = m & ((1ull << shift) - 1);
  const uint64_t half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1)))
    ++q;
  if (exp < minExp) {
    // Subnormal (or rounded up to the smallest normal, whose bit pattern
    // is the carry into the exponent field).
    return sign | static_cast<uint32_t>(q);
  }
  int e = exp + bias;
  if (q == (2ull << mbits)) {
    q >>= 1;
    ++e;
  }
  if (e >= static_cast<int>(expAllOnes))
    return inf;
  return sign | (static_cast<uint32_t>(e) << mbits) |
         static_cast<uint32_t>(q & ((1ull << mbits) - 1));
}

/// The value of a (1 + ebits + mbits)-bit binary float pattern.
double formatToDouble(uint32_t bits, int ebits, int mbits) {
  const bool neg = (bits >> (ebits + mbits)) & 1;
  const uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = bits & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (e == (1u << ebits) - 1)
    v = m ? std::numeric_limits<double>::quiet_NaN()
          : std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  else
    v = std::ldexp(static_cast<double>(m | (1u << mbits)),
                   static_cast<int>(e) - bias - mbits);
  return neg ? -v : v;
}

} // namespace

uint16_t fa::doubleToHalfBits(double x) {
  return static_cast<uint16_t>(roundToFormat(x, 5, 10));
}

double fa::halfBitsToDouble(uint16_t bits) {
  return formatToDouble(bits, 5, 10);
}

uint16_t fa::doubleToBFloat16Bits(double x) {
  return static_cast<uint16_t>(roundToFormat(x, 8, 7));
}

double fa::bfloat16BitsToDouble(uint16_t bits) {
  return formatToDouble(bits, 8, 7);
}
