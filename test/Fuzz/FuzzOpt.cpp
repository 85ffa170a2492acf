//===- FuzzOpt.cpp - libFuzzer target for fa-opt's parser and pipelines ---===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What `fa-opt -split-input-file -PIPELINE` does to arbitrary text, with the
// dialects and passes fa-opt registers (fa/InitAll.h): each `// -----` chunk
// is parsed and verified, printed, and then run through one of fa-opt's
// pipelines (fa-lower-to-cpu, fa-lower-to-nvvm with each kernel family; the
// input's bytes pick which). Diagnostics are swallowed by a
// ScopedDiagnosticHandler; a crash, a sanitizer report, or an fa pass that
// succeeds but leaves IR that fails verification is a finding.
// Seeds: the .mlir files of test/ (docs/Testing.md).
//
//===----------------------------------------------------------------------===//

#include "fa/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

using namespace mlir;

/// The pipelines of fa-opt, as fa-opt's command line spells them. Index 0
/// only parses, verifies and prints.
static const char *const kPipelines[] = {
    nullptr,
    "builtin.module(fa-lower-to-cpu)",
    "builtin.module(fa-lower-to-cpu{reference=true})",
    "builtin.module(fa-lower-to-nvvm{chip=sm_80 kernel=simt})",
    "builtin.module(fa-lower-to-nvvm{chip=sm_80 kernel=mma})",
    "builtin.module(fa-lower-to-nvvm{chip=sm_90a kernel=wgmma})",
    "builtin.module(fa-lower-to-nvvm{chip=sm_90a})",
    "builtin.module(fa-raise-attention{report-missed=true})",
    "builtin.module(fa-raise-attention,fa-lower-to-cpu)",
};

static DialectRegistry *registry;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  registry = new DialectRegistry;
  fa::registerAllDialects(*registry);
  fa::registerAllPasses();
  return 0;
}

namespace {
/// A successful fa pass must leave valid IR (a failed one may leave
/// anything: the pass manager stops there).
struct VerifyFAPasses : public PassInstrumentation {
  void runAfterPass(Pass *pass, Operation *op) override {
    if (!pass->getArgument().starts_with("fa-"))
      return;
    if (failed(verify(op))) {
      std::fprintf(stderr,
                   "fa-fuzz-opt: '%s' succeeded but left IR that fails "
                   "verification\n",
                   pass->getArgument().str().c_str());
      std::abort();
    }
  }
};
} // namespace

/// Whether `text` starts with what DenseI64ArrayAttr::parse accepts
/// without fail: a closed list of decimal integers that fit in int64
/// (spaces and line breaks between them).
static bool startsWithPlainI64List(llvm::StringRef text) {
  constexpr llvm::StringLiteral kSpace = " \t\r\n";
  if (!text.consume_front("["))
    return false;
  text = text.ltrim(kSpace);
  if (text.consume_front("]"))
    return true;
  while (true) {
    text.consume_front("-");
    size_t digits = text.find_first_not_of("0123456789");
    if (digits == 0 || digits == llvm::StringRef::npos || digits > 18)
      return false;
    text = text.drop_front(digits).ltrim(kSpace);
    if (text.consume_front("]"))
      return true;
    if (!text.consume_front(","))
      return false;
    text = text.ltrim(kSpace);
  }
}

/// Inputs that crash upstream MLIR 22's own parser or printer (plain
/// mlir-opt too), kept as `not --crash` tests in test/Tools/fa-opt/
/// upstream-crash-*.mlir: skipped, so that a bounded run finds fa's bugs.
static bool hitsKnownUpstreamCrash(llvm::StringRef text) {
  // A dense array of `index` elements (`array<index: 1>`).
  if (text.contains("array<index"))
    return true;
  // A static size of INT64_MIN, the dynamic marker, which the printers of
  // mixed static/dynamic lists (tile_sizes, offsets, ...) take for an SSA
  // value.
  if (text.contains("9223372036854775808"))
    return true;
  // The custom parsers of linalg.transpose, linalg.broadcast and
  // linalg.reduce store whatever DenseI64ArrayAttr::parse returns for
  // `permutation = [...]` / `dimensions = [...]`, a null attribute when the
  // list is malformed (cut off, `[1 0]`, `[-]`, a number past int64, a
  // float), and crash on it. Any of these ops with such a keyword followed
  // by anything but a plain list is skipped.
  if (!text.contains("linalg.transpose") && !text.contains("linalg.broadcast") &&
      !text.contains("linalg.reduce"))
    return false;
  for (llvm::StringRef keyword : {"permutation", "dimensions"}) {
    for (size_t pos = text.find(keyword); pos != llvm::StringRef::npos;
         pos = text.find(keyword, pos + 1)) {
      llvm::StringRef rest = text.drop_front(pos + keyword.size()).ltrim();
      if (!rest.consume_front("="))
        continue; // not `keyword =`: the parser fails before the list
      if (!startsWithPlainI64List(rest.ltrim()))
        return true;
    }
  }
  return false;
}

static void runChunk(llvm::StringRef text, unsigned pipeline) {
  if (hitsKnownUpstreamCrash(text))
    return;
  MLIRContext context(*registry, MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) {
    return success();
  });
  // MLIR's lexer relies on the NUL after the buffer that every file
  // fa-opt reads has (the fuzzer's bytes have none).
  std::string source = text.str();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&context));
  if (!module)
    return;
  // The parser verified the module; so the printer must cope with it.
  module->print(llvm::nulls());
  module->print(llvm::nulls(), OpPrintingFlags().printGenericOpForm());

  const char *spec = kPipelines[pipeline];
  if (!spec)
    return;
  PassManager pm(&context);
  if (failed(parsePassPipeline(spec, pm, llvm::errs()))) {
    std::fprintf(stderr, "fa-fuzz-opt: cannot parse '%s'\n", spec);
    std::abort();
  }
  pm.enableVerifier(false);
  pm.addInstrumentation(std::make_unique<VerifyFAPasses>());
  if (failed(pm.run(*module)))
    return;
  if (succeeded(verify(*module)))
    module->print(llvm::nulls());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  // The pipeline: a function of every byte, so that mutations spread over
  // all of them and a reproducer replays the same one.
  unsigned sum = 0;
  for (uint8_t byte : input.bytes())
    sum = sum * 31 + byte;
  unsigned pipeline = sum % std::size(kPipelines);

  // -split-input-file: each chunk is its own module.
  constexpr llvm::StringLiteral kSplit = "// -----";
  while (true) {
    size_t split = input.find(kSplit);
    runChunk(input.take_front(split), pipeline);
    if (split == llvm::StringRef::npos)
      break;
    input = input.drop_front(split + kSplit.size());
    // Pipelines differ between chunks too.
    pipeline = (pipeline + 1) % std::size(kPipelines);
  }
  return 0;
}
