//===- Emulate.h - Run attention kernels under the interpreter --*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What fa-emulate and `fa-run --device emulate` share: mapping a kernel
// function that holds fa.attention to the final GPU IR (the gpu.module just
// before NVVM lowering), and running that IR under the SIMT interpreter of
// fa/Interpreter on dense host buffers, with the check that every output
// element was written.
//
//===----------------------------------------------------------------------===//

#ifndef FA_EMULATE_EMULATE_H
#define FA_EMULATE_EMULATE_H

#include "fa/Interpreter/Interpreter.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <string>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir {
namespace fa {

/// How a module holding kernel functions with fa.attention becomes GPU IR.
struct EmulationMapOptions {
  /// A textual pass pipeline on builtin.module (with or without the
  /// `builtin.module(...)` wrapper); empty: buildMapToGPUPipeline(lowering).
  std::string pipeline;
  LowerToNVVMOptions lowering;
  /// Where to write the mapped module (empty: nowhere).
  std::string dumpPath;
};

/// Maps `module` to GPU IR and re-parses the printed result into a new
/// buffer of `mappedMgr`, so that the interpreter's diagnostics point at
/// lines of the mapped IR (in the `dumpPath` file, or "<mapped>") rather
/// than at the fa.attention every mapped op comes from. On failure returns
/// null and sets `error` (a one-line message; pass diagnostics are reported
/// through the context's handler).
OwningOpRef<ModuleOp> mapForEmulation(ModuleOp module,
                                      const EmulationMapOptions &options,
                                      llvm::SourceMgr &mappedMgr,
                                      std::string &error);

/// A dense row-major host buffer bound to one argument of the function
/// run. Elements are in the memref's element type (f16 and bf16 as 16-bit
/// patterns, i1/i8 as bytes).
struct EmulationBuffer {
  /// Used in diagnostics ("Q", "O", ...).
  std::string name;
  void *data = nullptr;
  SmallVector<int64_t, 4> shape;
  /// Outputs must be completely written by the run.
  bool isOutput = false;
  /// With `tokenDim` >= 0, only the elements whose index along that dim
  /// lies in [tokenBegin, tokenEnd) must be written: the token-major
  /// varlen form leaves rows outside every sequence alone.
  int64_t tokenDim = -1, tokenBegin = 0, tokenEnd = 0;
};

/// What runs: a host `func.func` (which launches its kernels), or a
/// `gpu.func` kernel over an explicit grid.
struct EmulationLaunch {
  std::string function;
  bool bareKernel = false;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t dynamicSharedBytes = 0;
};

/// Finds the `gpu.func` kernel named `name` in the gpu.modules of `module`
/// (null if there is none).
Operation *lookupKernel(ModuleOp module, StringRef name);

/// Runs `launch` on `buffers` (one per argument of the function, in order)
/// under the interpreter, then requires every element of every output
/// buffer to have been written. On failure sets `error` (a one-line
/// message; the interpreter's findings are reported as diagnostics first).
/// `stats`, when given, receives the interpreter's counters.
LogicalResult runEmulation(ModuleOp module, const EmulationLaunch &launch,
                           ArrayRef<EmulationBuffer> buffers,
                           const InterpreterOptions &options,
                           std::string &error,
                           InterpreterStats *stats = nullptr);

} // namespace fa
} // namespace mlir

#endif // FA_EMULATE_EMULATE_H
