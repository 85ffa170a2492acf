//===- TempDir.h - A temporary directory for the Support tests --*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_TEST_UNIT_SUPPORT_TEMPDIR_H
#define FA_TEST_UNIT_SUPPORT_TEMPDIR_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace fa_test {

/// A fresh temporary directory, removed with its files at the end.
class TempDir {
public:
  explicit TempDir(llvm::StringRef prefix = "fa-support-test") {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }

  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

  /// The names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(path, ec), end;
         it != end && !ec; it.increment(ec))
      names.push_back(std::string(llvm::sys::path::filename(it->path())));
    llvm::sort(names);
    return names;
  }

  llvm::SmallString<128> path;
};

} // namespace fa_test

#endif // FA_TEST_UNIT_SUPPORT_TEMPDIR_H
