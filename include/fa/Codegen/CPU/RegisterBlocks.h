//===- RegisterBlocks.h - CPU register block widths -------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The rule both CPU vector kernels (fa-cpu-attention's P V block,
// fa-cpu-attention-backward's dK / dV / dQ rows) use to split a head dim's
// vectors into register blocks.
//
//===----------------------------------------------------------------------===//

#ifndef FA_CODEGEN_CPU_REGISTERBLOCKS_H
#define FA_CODEGEN_CPU_REGISTERBLOCKS_H

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cstdint>

namespace mlir {
namespace fa {
namespace cpu {

/// The vectors per register block for a head dim of `vectors` vectors
/// accumulated over `rows` rows with `lanes` f32 lanes: the fewest groups of
/// at most min(6, 24 / rows) vectors with 16 lanes (24 accumulators of the 32
/// registers), 4 with fewer, as even as they divide. So 6 vectors (D = 96)
/// run as one group of 6 rather than 4 + 2, whose 8 accumulators take 6
/// loads per 8 FMAs; 8 vectors (D = 128) as two of 4.
inline int64_t balancedVectorBlock(int64_t vectors, int64_t rows,
                                   int64_t lanes) {
  int64_t most =
      lanes >= 16 ? std::max<int64_t>(1, std::min<int64_t>(6, 24 / rows)) : 4;
  int64_t groups = llvm::divideCeil(std::max<int64_t>(vectors, 1), most);
  return std::max<int64_t>(1, llvm::divideCeil(vectors, groups));
}

} // namespace cpu
} // namespace fa
} // namespace mlir

#endif // FA_CODEGEN_CPU_REGISTERBLOCKS_H
