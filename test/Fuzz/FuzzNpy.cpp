//===- FuzzNpy.cpp - libFuzzer target for the .npy reader -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Feeds arbitrary bytes to parseNpy (lib/Support/Npy.cpp), the reader behind
// every .npy file fa-run and fa-emulate open. A rejected image must come
// back as an llvm::Error; an accepted one must describe itself, survive a
// write and re-read unchanged. Seeds: test/Fuzz/corpus/npy (docs/Testing.md).
//
//===----------------------------------------------------------------------===//

#include "fa/Support/Npy.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace mlir::fa;

[[noreturn]] static void fail(const char *what) {
  std::fprintf(stderr, "fa-fuzz-npy: %s\n", what);
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  llvm::Expected<NpyArray> array = parseNpy(bytes, "fuzz.npy");
  if (!array) {
    std::string message = llvm::toString(array.takeError());
    if (!llvm::StringRef(message).starts_with("fuzz.npy: "))
      fail("an error message does not start with the file name");
    return 0;
  }
  // Touch every element and the description.
  (void)array->describe();
  volatile uint8_t sink = 0;
  const auto *elements = static_cast<const uint8_t *>(array->getData());
  for (size_t i = 0; i < array->getNumBytes(); ++i)
    sink ^= elements[i];
  (void)sink;

  // What fa writes, fa reads back unchanged.
  std::string written;
  {
    llvm::raw_string_ostream os(written);
    writeNpy(os, *array);
  }
  llvm::Expected<NpyArray> again = parseNpy(written, "rewritten.npy");
  if (!again) {
    llvm::errs() << llvm::toString(again.takeError()) << "\n";
    fail("an array fa accepted does not re-read after writeNpy");
  }
  if (again->getDType() != array->getDType() ||
      again->getShape() != array->getShape() ||
      again->getNumBytes() != array->getNumBytes() ||
      std::memcmp(again->getData(), array->getData(), array->getNumBytes()))
    fail("writeNpy + parseNpy changed the array");
  return 0;
}
