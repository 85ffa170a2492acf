//===- InputChecks.h - Checks of serving inputs before a launch -*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The rules a paged cache's block table and a variable-length batch's
// offsets must follow before any kernel reads memory through them
// (docs/serving.md): the launcher (FARuntime) and fa-run both call these,
// so a bad table is the same clear error everywhere. C++17 standard library
// only, like KernelMetadata.h.
//
//===----------------------------------------------------------------------===//

#ifndef FA_RUNTIME_INPUTCHECKS_H
#define FA_RUNTIME_INPUTCHECKS_H

#include "fa/Runtime/KernelMetadata.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fa {
namespace runtime {

/// A problem with one input: the role of the tensor at fault and a
/// one-line message that does not name the tensor (callers prefix it).
struct InputProblem {
  ParamRole role;
  std::string message;
};

/// Checks a paged cache's key lengths `kvLens` [batch] and block table
/// `table` [batch, maxPages] (row-major) against a cache of `numPages`
/// pages of `pageSize` rows: every length in [0, maxPages * pageSize], and
/// every entry that a sequence reads (entries j < ceil(len / pageSize); the
/// others are never read and may hold anything, e.g. -1 padding) in
/// [0, numPages). Returns the first problem, or nullopt.
std::optional<InputProblem> checkBlockTable(const int32_t *kvLens,
                                            const int32_t *table,
                                            int64_t batch, int64_t maxPages,
                                            int64_t numPages,
                                            int64_t pageSize);

/// Checks a variable-length batch's `count` (B + 1 >= 1) offsets into
/// `tokens` packed rows: the first is not negative, they never decrease,
/// and the last is at most `tokens`. `side` ("query" or "key") names the
/// rows in the message. Returns the first problem, or nullopt.
std::optional<std::string> checkCuSeqlens(const int32_t *offsets,
                                          int64_t count, int64_t tokens,
                                          std::string_view side);

} // namespace runtime
} // namespace fa

#endif // FA_RUNTIME_INPUTCHECKS_H
