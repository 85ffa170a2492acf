//===- FAOps.td - fa dialect operations --------------------*- tablegen -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FAOPS_TD
#define FA_DIALECT_FA_IR_FAOPS_TD

include "fa/Dialect/FA/IR/FABase.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Operand constraints are deliberately loose: the verifiers check element
// types and shapes and name the operand and dims in their messages.
defvar FA_Tensor = AnyRankedTensor;

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

def FA_SoftmaxOp : FA_Op<"softmax", [
    Pure, DestinationStyleOpInterface,
    AllTypesMatch<["input", "output", "result"]>]> {
  let summary = "Softmax along one dimension of a ranked tensor";
  let description = [{
    Computes `exp(x - max(x)) / sum(exp(x - max(x)))` along `dimension` of a
    ranked f32, f16 or bf16 tensor, accumulating in f32. The result has the
    type of `input`; `output` is the destination.

    A row whose entries are all `-inf` yields zeros (not NaN). A NaN in a row
    makes that row NaN.

    Example:

    ```mlir
    %y = fa.softmax ins(%x : tensor<4x?xf32>) outs(%init : tensor<4x?xf32>)
           dimension(1) -> tensor<4x?xf32>
    ```
  }];

  let arguments = (ins FA_Tensor:$input, FA_Tensor:$output,
                       I64Attr:$dimension);
  let results = (outs FA_Tensor:$result);

  let assemblyFormat = [{
    `ins` `(` $input `:` type($input) `)`
    `outs` `(` $output `:` type($output) `)`
    `dimension` `(` $dimension `)` attr-dict `->` type($result)
  }];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputMutable();
    }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def FA_AttentionOp : FA_Op<"attention", [
    Pure, DestinationStyleOpInterface, AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention with masks, GQA and log-sum-exp";
  let description = [{
    Computes `O = softmax(scale * Q K^T + masks) V` per batch and query head.

    | operand    | shape                 | element type                  |
    |------------|-----------------------|-------------------------------|
    | `query`    | `[B, Hq, Nq, D]`      | f32, f16 or bf16              |
    | `key`      | `[B, Hkv, Nk, D]`     | same as `query`               |
    | `value`    | `[B, Hkv, Nk, Dv]`    | same as `query`               |
    | `kv_lens`  | `[B]` (optional)      | i32                           |
    | `mask`     | `[B or 1, Hq or 1, Nq, Nk]` (optional) | i1, or f32, f16, bf16 |
    | `output`   | `[B, Hq, Nq, Dv]`     | same as `query`               |
    | `lse`      | `[B, Hq, Nq]` (optional) | f32                        |

    `B`, `Nq` and `Nk` may be dynamic; `Hq`, `Hkv`, `D` and `Dv` are static,
    and `Hq % Hkv == 0`: query head `h` reads key/value head
    `h / (Hq / Hkv)`.

    * `scale` multiplies `Q K^T`; it defaults to `1/sqrt(D)`.
    * `causal` is `none` (default), `top_left` (key `k` is kept when
      `k <= q`) or `bottom_right` (kept when `k <= q + Nk - Nq`).
    * `kv_lens[b]` keeps keys `k < kv_lens[b]` of batch `b`; it is clamped to
      `[0, Nk]`.
    * An `i1` mask keeps the keys where it is true; a float mask is added to
      the scaled score. Dimensions of size 1 broadcast.
    * A query row with no attended key gives `O = 0` and `LSE = -inf`.
    * `lse` (natural log, including the row max) is produced when its
      destination is given.

    Scores, the softmax statistics and the accumulator are f32; the output
    is rounded to the element type of `query`.

    Example:

    ```mlir
    %o, %lse = fa.attention
        ins(%q, %k, %v : tensor<?x8x?x64xf16>, tensor<?x2x?x64xf16>,
                         tensor<?x2x?x64xf16>)
        kv_lens(%lens : tensor<?xi32>)
        outs(%o_init : tensor<?x8x?x64xf16>, %lse_init : tensor<?x8x?xf32>)
        causal(bottom_right) scale(1.250000e-01)
        -> tensor<?x8x?x64xf16>, tensor<?x8x?xf32>
    ```
  }];

  let arguments = (ins
    FA_Tensor:$query,
    FA_Tensor:$key,
    FA_Tensor:$value,
    Optional<FA_Tensor>:$kv_lens,
    Optional<FA_Tensor>:$mask,
    FA_Tensor:$output,
    Optional<FA_Tensor>:$lse,
    OptionalAttr<F32Attr>:$scale,
    DefaultValuedAttr<FA_CausalAttr, "::mlir::fa::CausalKind::none">:$causal
  );
  let results = (outs FA_Tensor:$result,
                      Optional<FA_Tensor>:$lse_result);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
        type($value) `)`
    (`kv_lens` `(` $kv_lens^ `:` type($kv_lens) `)`)?
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    `outs` `(` $output `:` type($output) (`,` $lse^ `:` type($lse))? `)`
    custom<CausalClause>($causal)
    (`scale` `(` $scale^ `)`)?
    attr-dict `->` type($result) (`,` type($lse_result)^)?
  }];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();

    /// The scale applied to Q K^T: the attribute, or 1/sqrt(D).
    float getEffectiveScale();

    /// Number of query heads per key/value head (Hq / Hkv).
    int64_t getGroupSize();
  }];
  let hasVerifier = 1;
}

#endif // FA_DIALECT_FA_IR_FAOPS_TD
