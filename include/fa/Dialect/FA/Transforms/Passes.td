//===- Passes.td - fa dialect passes -----------------------*- tablegen -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_TRANSFORMS_PASSES_TD
#define FA_DIALECT_FA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_TD
