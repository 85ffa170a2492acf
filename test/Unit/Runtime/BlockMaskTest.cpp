//===- BlockMaskTest.cpp - the runtime's block-mask helper ----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// fa_block_mask_build against the encoding written out by hand: per tile
// pair, 0 when the keep function removes every in-range (row, key), 2 when
// it keeps every one, 1 otherwise; ragged last tiles count only in-range
// pairs. A prefix-LM mask over B = 2 (prefixes 5 and 0) gives all three
// states; sizes it refuses are errors, never a write.
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/FARuntime.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <vector>

namespace {

struct PrefixLM {
  std::vector<int64_t> prefix;
};

int prefixLMKeep(void *user, int64_t b, int64_t, int64_t q, int64_t k) {
  const auto *m = static_cast<const PrefixLM *>(user);
  return k < m->prefix[b] || k <= q;
}

int countingKeep(void *user, int64_t, int64_t, int64_t, int64_t) {
  ++*static_cast<int64_t *>(user);
  return 1;
}

TEST(BlockMaskTest, Size) {
  EXPECT_EQ(fa_block_mask_size(2, 3, 10, 17, 4, 8), 2 * 3 * 3 * 3);
  EXPECT_EQ(fa_block_mask_size(1, 1, 0, 5, 4, 4), 0);
  EXPECT_EQ(fa_block_mask_size(1, 1, 8, 8, 0, 4), -1);
  EXPECT_EQ(fa_block_mask_size(-1, 1, 8, 8, 4, 4), -1);
  EXPECT_EQ(fa_block_mask_size(INT64_MAX, INT64_MAX, 8, 8, 1, 1), -1);
}

TEST(BlockMaskTest, PrefixLMEncoding) {
  // Nq = 10, Nk = 11, tiles 4 x 4: 3 x 3 tile pairs per batch.
  PrefixLM m{{5, 0}};
  const int64_t nq = 10, nk = 11, tq = 4, tk = 4;
  std::vector<uint8_t> out(fa_block_mask_size(2, 1, nq, nk, tq, tk), 0xAA);
  ASSERT_EQ(fa_block_mask_build(2, 1, nq, nk, tq, tk, prefixLMKeep, &m,
                                out.data()),
            FA_SUCCESS);
  // Batch 0 (prefix 5): rows 0-3 see keys 0-4 (tile (0,0) full, key 4 of
  // tile (0,1) for every row, key 5+ only from row 5: (0,1) partial,
  // (0,2) none); rows 4-7: (1,0) full, (1,1) partial (keys 5..7 against
  // rows 4..7), (1,2) none (keys 8..10 > 7); rows 8-9: (2,0), (2,1) full,
  // (2,2) keys 8..10 against rows 8, 9: partial.
  // Batch 1 (prefix 0, plain causality): (0,0) partial, (0,1), (0,2) none;
  // (1,0) full, (1,1) partial, (1,2) none; (2,0), (2,1) full, (2,2)
  // partial.
  std::vector<uint8_t> expected = {2, 1, 0, 2, 1, 0, 2, 2, 1,
                                   1, 0, 0, 2, 1, 0, 2, 2, 1};
  EXPECT_EQ(out, expected);
}

TEST(BlockMaskTest, EveryPairOnce) {
  int64_t calls = 0;
  std::vector<uint8_t> out(fa_block_mask_size(2, 3, 7, 9, 4, 4));
  ASSERT_EQ(fa_block_mask_build(2, 3, 7, 9, 4, 4, countingKeep, &calls,
                                out.data()),
            FA_SUCCESS);
  EXPECT_EQ(calls, 2 * 3 * 7 * 9);
  for (uint8_t e : out)
    EXPECT_EQ(e, 2);
}

TEST(BlockMaskTest, BadArguments) {
  uint8_t out[4] = {7, 7, 7, 7};
  int64_t calls = 0;
  EXPECT_EQ(fa_block_mask_build(1, 1, 8, 8, 0, 4, countingKeep, &calls, out),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("tile sizes must be positive"),
            std::string::npos);
  EXPECT_EQ(fa_block_mask_build(1, 1, 8, 8, 4, 4, nullptr, nullptr, out),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_block_mask_build(1, 1, 8, 8, 4, 4, countingKeep, &calls,
                                nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(calls, 0);
  for (uint8_t e : out)
    EXPECT_EQ(e, 7);
}

} // namespace
