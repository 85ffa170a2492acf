//===- Version.h - fa's version and the tools' --version --------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_VERSION_H
#define FA_SUPPORT_VERSION_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir {
namespace fa {

/// fa's release version (the CMake project's VERSION), e.g. "0.1.0".
llvm::StringRef getVersion();

/// The git revision fa was built from: a short hash, with "-dirty" when the
/// checkout had changes, or "unknown" outside a git checkout.
llvm::StringRef getGitRevision();

/// Prints "<tool> (fa <version>, git <revision>)" and then LLVM's own version
/// block, as `--version` of every fa tool does.
void printVersion(llvm::raw_ostream &os, llvm::StringRef tool);

/// Makes `--version` of the calling tool print printVersion's text. Call
/// before parsing the command line.
void registerVersionPrinter(llvm::StringRef tool);

} // namespace fa
} // namespace mlir

#endif // FA_SUPPORT_VERSION_H
