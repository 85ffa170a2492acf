//===- OutputFile.h - Writing a tool's output file safely -------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One rule for every file a tool writes on the user's behalf (fa-run's and
// fa-emulate's outputs, the .npy writer):
//
//  * a regular file (or a new one) is written atomically: the bytes go to a
//    temporary file in the target's directory that is renamed over it, so a
//    failure never leaves a partial file nor touches the existing one; the
//    existing file's permissions are kept;
//  * a symbolic link is followed (through every hop, dangling or not) and its
//    final target is written that way; the link itself is left alone;
//  * anything else that exists (a FIFO, a character device such as
//    /dev/stdout or /dev/null, a socket) is written in place, never replaced;
//  * a directory is refused;
//  * every write error (ENOSPC, /dev/full, EPIPE) is an error, never success.
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_OUTPUTFILE_H
#define FA_SUPPORT_OUTPUTFILE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir {
namespace fa {

/// What writeOutputFile wrote.
struct WrittenOutput {
  /// The regular file that now holds the bytes (the final target of any
  /// symbolic links), or empty when they went in place to a non-regular file.
  std::string regularFile;
};

/// Writes what `write` prints to `path` by the rules above. Errors name `path`.
llvm::Expected<WrittenOutput>
writeOutputFile(llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace fa
} // namespace mlir

#endif // FA_SUPPORT_OUTPUTFILE_H
