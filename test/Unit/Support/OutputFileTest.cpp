//===- OutputFileTest.cpp - Tests of writeOutputFile ----------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Support/OutputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "TempDir.h"

#include "gtest/gtest.h"

#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;
using namespace mlir::fa;

namespace {

using fa_test::TempDir;

/// Writes `text` to `path`; returns the regular file written, or the error.
std::string write(StringRef path, StringRef text) {
  Expected<WrittenOutput> out =
      writeOutputFile(path, [&](raw_ostream &os) { os << text; });
  if (!out)
    return "error: " + toString(out.takeError());
  return out->regularFile;
}

std::string contents(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buf = MemoryBuffer::getFile(path);
  if (!buf)
    return "<unreadable>";
  return (*buf)->getBuffer().str();
}

bool isSymlink(StringRef path) {
  sys::fs::file_status st;
  return !sys::fs::status(path, st, /*Follow=*/false) &&
         st.type() == sys::fs::file_type::symlink_file;
}

TEST(OutputFileTest, NewAndReplacedRegularFiles) {
  TempDir dir;
  std::string path = dir.file("o.txt");
  EXPECT_EQ(write(path, "first"), path);
  EXPECT_EQ(contents(path), "first");
  // Replacing keeps the file's mode.
  ASSERT_FALSE(sys::fs::setPermissions(path, sys::fs::owner_read |
                                                 sys::fs::owner_write |
                                                 sys::fs::owner_exe));
  EXPECT_EQ(write(path, "second"), path);
  EXPECT_EQ(contents(path), "second");
  ErrorOr<sys::fs::perms> perms = sys::fs::getPermissions(path);
  ASSERT_TRUE(static_cast<bool>(perms));
  EXPECT_EQ(*perms, sys::fs::owner_read | sys::fs::owner_write |
                        sys::fs::owner_exe);
}

TEST(OutputFileTest, WritesThroughSymlinks) {
  TempDir dir;
  std::string target = dir.file("target.txt");
  std::string link = dir.file("link.txt");
  std::string link2 = dir.file("link2.txt");
  ASSERT_EQ(write(target, "old"), target);
  ASSERT_FALSE(sys::fs::create_link("target.txt", link));
  ASSERT_FALSE(sys::fs::create_link(link, link2));
  // Through a chain of two links (one relative, one absolute).
  SmallString<128> realTarget;
  ASSERT_FALSE(sys::fs::real_path(target, realTarget));
  EXPECT_EQ(write(link2, "new"), std::string(realTarget));
  EXPECT_TRUE(isSymlink(link));
  EXPECT_TRUE(isSymlink(link2));
  EXPECT_EQ(contents(target), "new");
}

TEST(OutputFileTest, DanglingSymlinkCreatesItsTarget) {
  TempDir dir;
  std::string link = dir.file("link.txt");
  ASSERT_FALSE(sys::fs::create_link("made.txt", link));
  EXPECT_EQ(write(link, "x"), dir.file("made.txt"));
  EXPECT_TRUE(isSymlink(link));
  EXPECT_EQ(contents(dir.file("made.txt")), "x");
}

TEST(OutputFileTest, SymlinkLoopIsAnError) {
  TempDir dir;
  std::string a = dir.file("a"), b = dir.file("b");
  ASSERT_FALSE(sys::fs::create_link(b, a));
  ASSERT_FALSE(sys::fs::create_link(a, b));
  std::string result = write(a, "x");
  EXPECT_EQ(result.rfind("error: " + a + ": cannot write: ", 0), 0u) << result;
  EXPECT_TRUE(isSymlink(a));
  EXPECT_TRUE(isSymlink(b));
}

TEST(OutputFileTest, DevicesAreWrittenInPlace) {
  // /dev/null stays the device; nothing is created next to it.
  EXPECT_EQ(write("/dev/null", "discarded"), "");
  sys::fs::file_status st;
  ASSERT_FALSE(sys::fs::status("/dev/null", st));
  EXPECT_EQ(st.type(), sys::fs::file_type::character_file);
}

TEST(OutputFileTest, FullDeviceIsAnError) {
  if (!sys::fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full";
  std::string big(1 << 20, 'x');
  EXPECT_EQ(write("/dev/full", big),
            "error: /dev/full: cannot write: No space left on device");
  sys::fs::file_status st;
  ASSERT_FALSE(sys::fs::status("/dev/full", st));
  EXPECT_EQ(st.type(), sys::fs::file_type::character_file);
}

TEST(OutputFileTest, FifoIsWrittenInPlace) {
  TempDir dir;
  std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Open the read end first (non-blocking) so the writer does not block.
  int readFd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(readFd, 0);
  EXPECT_EQ(write(fifo, "through"), "");
  char buf[16] = {};
  ssize_t n = ::read(readFd, buf, sizeof(buf));
  ::close(readFd);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "through");
  sys::fs::file_status st;
  ASSERT_FALSE(sys::fs::status(fifo, st));
  EXPECT_EQ(st.type(), sys::fs::file_type::fifo_file);
}

TEST(OutputFileTest, RefusedPaths) {
  TempDir dir;
  EXPECT_EQ(write(dir.path, "x"),
            "error: " + std::string(dir.path) + ": cannot write: it is a directory");
  EXPECT_EQ(write("", "x"), "error: cannot write: the output path is empty");
  std::string missing = dir.file("no/such/o.txt");
  EXPECT_EQ(write(missing, "x"),
            "error: " + missing +
                ": cannot create a temporary file next to it: No such file or "
                "directory");
}

} // namespace
