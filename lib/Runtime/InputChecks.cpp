//===- InputChecks.cpp - Checks of serving inputs before a launch ---------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/InputChecks.h"

#include "RuntimeInternal.h"

#include <algorithm>

using namespace fa::runtime;

std::optional<InputProblem>
fa::runtime::checkBlockTable(const int32_t *kvLens, const int32_t *table,
                             int64_t batch, int64_t maxPages, int64_t numPages,
                             int64_t pageSize) {
  // maxPages * pageSize fits: the tensor sizes and the page size are below
  // 2^31 and 2^63 respectively, and the product is compared in 128 bits.
  __int128 capacity = static_cast<__int128>(maxPages) * pageSize;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = kvLens[b];
    if (len < 0)
      return InputProblem{ParamRole::KvLens,
                          cat("sequence ", b, " has a negative length ", len)};
    if (len > capacity)
      return InputProblem{
          ParamRole::KvLens,
          cat("sequence ", b, " has ", len, " keys, but its ", maxPages,
              " block table entries of ", pageSize, "-row pages hold 0 to ",
              static_cast<int64_t>(capacity))};
    for (int64_t j = 0, e = (len + pageSize - 1) / pageSize; j < e; ++j) {
      int32_t page = table[b * maxPages + j];
      if (page < 0 || page >= numPages)
        return InputProblem{
            ParamRole::BlockTable,
            cat("entry [", b, ", ", j, "] = ", page,
                " is not a page of the cache (P = ", numPages,
                " pages); sequence ", b, " reads it for its keys ",
                j * pageSize, " to ",
                std::min<int64_t>((j + 1) * pageSize, len) - 1)};
    }
  }
  return std::nullopt;
}

std::optional<std::string>
fa::runtime::checkCuSeqlens(const int32_t *offsets, int64_t count,
                            int64_t tokens, std::string_view side) {
  if (count < 1)
    return cat("expected B + 1 >= 1 ", side, " offsets, got ", count);
  if (offsets[0] < 0)
    return cat("the first offset is negative (", offsets[0], ")");
  for (int64_t b = 0; b + 1 < count; ++b)
    if (offsets[b + 1] < offsets[b])
      return cat("offsets must not decrease: entry ", b + 1, " = ",
                 offsets[b + 1], " is below entry ", b, " = ", offsets[b],
                 " (sequence ", b, " would have a negative length)");
  if (offsets[count - 1] > tokens)
    return cat("the last offset ", offsets[count - 1], " is past the ", tokens,
               " packed ", side, " rows");
  return std::nullopt;
}
