//===- InitAll.h - register everything fa uses ------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One place that lists the dialects and passes fa's tools use, so that
// fa-opt, fa-run and embedders register the same set (docs/embedding.md).
//
//   mlir::DialectRegistry registry;
//   mlir::fa::registerAllDialects(registry);  // dialects + extensions
//   mlir::fa::registerAllPasses();            // passes + pipelines
//   mlir::MLIRContext context(registry);
//
// An embedder that registers its own dialect list can instead insert
// fa::FADialect itself and call registerAllExtensions(registry), or only the
// upstream external models its pipelines need (examples/embed/embed-opt.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FA_INITALL_H
#define FA_INITALL_H

namespace mlir {
class DialectRegistry;
namespace fa {

/// Registers the fa dialect and the upstream dialects that fa's lowerings
/// produce, plus everything registerAllExtensions registers.
void registerAllDialects(DialectRegistry &registry);

/// Registers the extensions and external interface models the lowerings
/// rely on: fa's own (the hook for models fa attaches to its or upstream
/// ops), upstream's (bufferization, value bounds, inlining, ...; MLIR
/// registers them apart from the dialects) and the LLVM IR translations that
/// gpu-module-to-binary uses.
void registerAllExtensions(DialectRegistry &registry);

/// Registers fa's passes and pipelines (fa-lower-to-cpu, fa-lower-to-nvvm)
/// plus the upstream passes that the pipelines are made of. Safe to call
/// more than once.
void registerAllPasses();

} // namespace fa
} // namespace mlir

#endif // FA_INITALL_H
