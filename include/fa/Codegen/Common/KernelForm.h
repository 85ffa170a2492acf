//===- KernelForm.h - fa.attention in the kernel form -----------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The kernel form every backend kernel builder starts from: one fa.attention
// per function whose operands are read from memrefs
// (`bufferization.to_tensor`, or an elementwise i8 -> i1 conversion of one)
// and whose results are materialized into memrefs.
//
//===----------------------------------------------------------------------===//

#ifndef FA_CODEGEN_COMMON_KERNELFORM_H
#define FA_CODEGEN_COMMON_KERNELFORM_H

#include "fa/Dialect/FA/IR/FA.h"

namespace mlir {
namespace fa {

/// The memrefs of an attention op in the kernel form (null when absent).
struct KernelOperands {
  Value q, k, v, kvLens, mask, o, lse;
  /// The modifier operands: ALiBi slopes and segment ids (memrefs), and the
  /// q_offset (the op's index operand itself).
  Value alibi, qSegments, kSegments, qOffset;
  /// The block mask (i8 memref; null when absent).
  Value blockMask;
  /// The block table of a paged K/V cache (i32 memref [B, M]; null when K
  /// and V are dense).
  Value blockTable;
  /// The offsets of a token-major variable-length batch (i32 memrefs
  /// [B + 1]; null for the [B, H, N, D] form).
  Value cuSeqlensQ, cuSeqlensK;
  /// The memrefs the score_mod / mask_mod regions read (the op's
  /// mod_operands, in order).
  SmallVector<Value> modOperands;
  /// Split-KV on the GPU: the f32 workspace arguments a mapping pass
  /// appended to the kernel function, partial O [S, <O's dims>] and
  /// partial LSE [S, <O's dims but the last>] (null otherwise).
  Value partialO, partialLse;
};

/// The memrefs `op` reads and writes, or failure when it is not in the
/// kernel form.
FailureOr<KernelOperands> matchKernelForm(AttentionOp op);

/// The memrefs of an fa.merge in the kernel form: the partials [S, d...,
/// Dv] and [S, d...], the output [d..., Dv] and the LSE [d...] (null when
/// absent).
struct MergeKernelOperands {
  Value partialOutput, partialLse, output, lse;
};

/// The memrefs `op` reads and writes, or failure when it is not in the
/// kernel form.
FailureOr<MergeKernelOperands> matchMergeKernelForm(MergeOp op);

/// The memrefs of an fa.attention_backward in the kernel form (null when
/// absent).
struct BackwardKernelOperands {
  Value q, k, v, o, lse, dO, kvLens, mask, alibi, qSegments, kSegments;
  Value qOffset;
  Value dq, dk, dv;
};

/// The memrefs `op` reads and writes, or failure when it is not in the
/// kernel form.
FailureOr<BackwardKernelOperands>
matchBackwardKernelForm(AttentionBackwardOp op);

/// Checks that the results of `op`, in the kernel form, are used only by
/// their `bufferization.materialize_in_destination` (which has no uses
/// itself): a kernel builder replaces the op and erases those users, so any
/// other use would be left pointing at erased IR. Emits "<pass>: a result is
/// used by '<op>'; expected only materialize_in_destination" on `op` and
/// fails otherwise.
LogicalResult verifyKernelResultUses(Operation *op, StringRef pass);

/// Emits the error of `pass`, which needs the kernel form, on `op`, which is
/// not in it; the message says what the form is and where an example is
/// (examples/kernel-form.mlir, `fa-compile --emit-mlir`). Returns failure.
LogicalResult emitNotInKernelFormError(Operation *op, StringRef pass);

/// The one op named `opName` (an fa op's operation name) in `func`, a
/// kernel function: null when there is none; when there are several, or
/// the body has more than one block, emits "<pass>: expected one <opName>
/// per kernel function, found <N>" on `func` and fails.
FailureOr<Operation *> findKernelOp(Operation *func, StringRef opName,
                                    StringRef pass);

/// Checks that `qOffset` (null: none) of `op`, in the kernel form, reaches
/// the kernel: a function argument or a constant (which a builder clones
/// into the kernel). Emits "<pass>: the q_offset must be a function
/// argument or a constant in the kernel form" on `op` and fails otherwise.
LogicalResult verifyKernelQOffset(Operation *op, Value qOffset, StringRef pass);

} // namespace fa
} // namespace mlir

#endif // FA_CODEGEN_COMMON_KERNELFORM_H
