//===- FloatBits.h - Exact f16/bf16 conversions -----------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Conversions between double and the 16-bit float formats the GPU kernels
// use, rounding to nearest, ties to even, as `cvt.rn.f16.f32` and
// `arith.truncf` do. Overflow gives infinity, underflow gives (signed) zero
// or a subnormal, NaN stays NaN (quiet, sign kept). The interpreter keeps
// every float value as a double holding the exact value of its type; these
// functions move values in and out of the 16-bit formats.
//
// Rounding a double once to a 16-bit format is exact rounding: a double has
// more than 2 * 11 + 2 significand bits, so computing +, -, *, / and sqrt
// of two f16 (or bf16, or f32) values in double and rounding the result
// once to the narrow format is correctly rounded (no double-rounding error).
//
//===----------------------------------------------------------------------===//

#ifndef FA_INTERPRETER_FLOATBITS_H
#define FA_INTERPRETER_FLOATBITS_H

#include <cstdint>

namespace mlir {
namespace fa {

/// Rounds `x` to IEEE binary16 (round to nearest even) and returns its bits.
uint16_t doubleToHalfBits(double x);
/// The exact value of the IEEE binary16 number with bits `bits`.
double halfBitsToDouble(uint16_t bits);

/// Rounds `x` to bfloat16 (round to nearest even) and returns its bits.
uint16_t doubleToBFloat16Bits(double x);
/// The exact value of the bfloat16 number with bits `bits`.
double bfloat16BitsToDouble(uint16_t bits);

/// `x` rounded to the nearest binary16 value (as a double).
inline double roundToHalf(double x) {
  return halfBitsToDouble(doubleToHalfBits(x));
}
/// `x` rounded to the nearest bfloat16 value (as a double).
inline double roundToBFloat16(double x) {
  return bfloat16BitsToDouble(doubleToBFloat16Bits(x));
}

} // namespace fa
} // namespace mlir

#endif // FA_INTERPRETER_FLOATBITS_H
