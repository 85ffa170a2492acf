//===- InitAll.h - register everything fa uses ------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One place that lists the dialects and passes fa's tools use, so that
// fa-opt, fa-run and embedders register the same set.
//
//===----------------------------------------------------------------------===//

#ifndef FA_INITALL_H
#define FA_INITALL_H

namespace mlir {
class DialectRegistry;
namespace fa {

/// Registers the fa dialect and the upstream dialects (and their interface
/// extensions) that fa's lowerings produce.
void registerAllDialects(DialectRegistry &registry);

/// Registers fa's passes and pipelines plus the upstream passes that the
/// pipelines are made of.
void registerAllPasses();

} // namespace fa
} // namespace mlir

#endif // FA_INITALL_H
