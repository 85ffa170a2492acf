//===- OutputFile.cpp - Writing a tool's output file safely ---------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Support/OutputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Errc.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#ifdef LLVM_ON_UNIX
#include <unistd.h>
#endif

using namespace llvm;
using namespace mlir;
using namespace mlir::fa;

static Error makeError(StringRef path, const Twine &message) {
  return createStringError(Twine(path) + ": " + message);
}

/// The most symbolic links followed before giving up (Linux's MAXSYMLINKS).
static constexpr int kMaxSymlinkHops = 40;

/// The path a new file at `path` is created at: `path` itself, or, when it is
/// a dangling symbolic link, the path its chain of links ends at.
static Expected<std::string> resolveNewFilePath(StringRef path) {
  SmallString<256> current(path);
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    sys::fs::file_status st;
    std::error_code ec = sys::fs::status(current, st, /*Follow=*/false);
    if (ec == errc::no_such_file_or_directory)
      return std::string(current);
    if (ec)
      return makeError(path, "cannot write: " + ec.message());
    if (st.type() != sys::fs::file_type::symlink_file)
      return std::string(current);
#ifdef LLVM_ON_UNIX
    char buffer[4096];
    ssize_t length = ::readlink(current.c_str(), buffer, sizeof(buffer));
    if (length < 0 || length == static_cast<ssize_t>(sizeof(buffer)))
      return makeError(path, "cannot read the symbolic link '" + current + "'");
    StringRef link(buffer, length);
    if (sys::path::is_absolute(link)) {
      current = link;
    } else {
      sys::path::remove_filename(current);
      sys::path::append(current, link);
    }
#else
    return std::string(current);
#endif
  }
  return makeError(path, "cannot write: too many levels of symbolic links");
}

/// Runs `write` into `os`, flushes and returns the stream's error, clearing it
/// (a raw_fd_ostream destroyed with an error pending aborts the process).
static std::error_code writeTo(raw_fd_ostream &os,
                               function_ref<void(raw_ostream &)> write) {
  write(os);
  os.flush();
  std::error_code ec = os.error();
  os.clear_error();
  return ec;
}

/// Writes in place to the existing non-regular file `path` (a FIFO or a
/// device): opened, never created, truncated or replaced.
static Error writeInPlace(StringRef path,
                          function_ref<void(raw_ostream &)> write) {
  int fd;
  if (std::error_code ec = sys::fs::openFileForWrite(
          path, fd, sys::fs::CD_OpenExisting, sys::fs::OF_None))
    return makeError(path, "cannot open for writing: " + ec.message());
  raw_fd_ostream os(fd, /*shouldClose=*/true);
  std::error_code ec = writeTo(os, write);
  if (!ec) {
    os.close();
    ec = os.error();
    os.clear_error();
  }
  if (ec)
    return makeError(path, "cannot write: " + ec.message());
  return Error::success();
}

/// Writes `target` (a regular file or none yet) atomically.
static Error writeAtomically(StringRef path, StringRef target,
                             function_ref<void(raw_ostream &)> write) {
  Expected<sys::fs::TempFile> temp =
      sys::fs::TempFile::create(target + ".tmp-%%%%%%");
  if (!temp)
    return makeError(path,
                     "cannot create a temporary file next to " +
                         (target == path ? Twine("it") : "'" + target + "'") +
                         ": " + errorToErrorCode(temp.takeError()).message());
  std::error_code ec;
  {
    raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
    ec = writeTo(os, write);
  }
  if (!ec) {
    // Keep the mode of the file being replaced.
    if (ErrorOr<sys::fs::perms> perms = sys::fs::getPermissions(target))
      ec = sys::fs::setPermissions(temp->TmpName, *perms);
  }
  if (ec) {
    consumeError(temp->discard());
    return makeError(path, "cannot write: " + ec.message());
  }
  if (Error err = temp->keep(target))
    return makeError(path, "cannot write: " +
                               errorToErrorCode(std::move(err)).message());
  return Error::success();
}

Expected<WrittenOutput>
fa::writeOutputFile(StringRef path, function_ref<void(raw_ostream &)> write) {
  if (path.empty())
    return createStringError("cannot write: the output path is empty");
  sys::fs::file_status st;
  std::error_code ec = sys::fs::status(path, st, /*Follow=*/true);
  if (ec && ec != errc::no_such_file_or_directory)
    return makeError(path, "cannot write: " + ec.message());

  if (!ec && st.type() == sys::fs::file_type::directory_file)
    return makeError(path, "cannot write: it is a directory");

  if (!ec && st.type() != sys::fs::file_type::regular_file) {
    // /dev/stdout, /dev/null, a FIFO: opening the path follows the links
    // (including /proc's, which name no file), and nothing is replaced.
    if (Error err = writeInPlace(path, write))
      return std::move(err);
    return WrittenOutput{};
  }

  std::string target;
  if (!ec) {
    SmallString<256> real;
    if (std::error_code realEc = sys::fs::real_path(path, real))
      return makeError(path, "cannot resolve: " + realEc.message());
    target = std::string(real);
  } else {
    Expected<std::string> resolved = resolveNewFilePath(path);
    if (!resolved)
      return resolved.takeError();
    target = std::move(*resolved);
  }
  if (Error err = writeAtomically(path, target, write))
    return std::move(err);
  return WrittenOutput{target};
}
