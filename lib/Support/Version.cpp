//===- Version.cpp - fa's version and the tools' --version ----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Support/Version.h"

#include "fa/Support/Version.inc"

#include "llvm/Support/CommandLine.h"

#include <string>

using namespace llvm;

StringRef mlir::fa::getVersion() { return FA_VERSION_STRING; }

StringRef mlir::fa::getGitRevision() { return FA_GIT_REVISION; }

void mlir::fa::printVersion(raw_ostream &os, StringRef tool) {
  os << tool << " (fa " << getVersion() << ", git " << getGitRevision()
     << ")\n";
  os.flush();
  // LLVM's block (version, build type, host CPU) follows.
  cl::PrintVersionMessage();
}

void mlir::fa::registerVersionPrinter(StringRef tool) {
  static std::string name;
  name = tool.str();
  cl::SetVersionPrinter([](raw_ostream &os) { printVersion(os, name); });
}
