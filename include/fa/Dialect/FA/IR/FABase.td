//===- FABase.td - fa dialect definition -------------------*- tablegen -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FABASE_TD
#define FA_DIALECT_FA_IR_FABASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def FA_Dialect : Dialect {
  let name = "fa";
  let cppNamespace = "::mlir::fa";
  let summary = "Fused attention and softmax at the tensor level";
  let description = [{
    The `fa` dialect expresses softmax and scaled dot-product attention as
    destination-style operations on ranked tensors. Its lowerings rewrite them
    into tiled online-softmax loops (running max, running sum and partial
    output, rescaled whenever the max grows) that never materialize the score
    matrix, and from there to the CPU or to NVPTX.

    Semantic contract shared by every pass and backend:

    * Layout `[B, H, N, D]`. The query has `Hq` heads, key and value have
      `Hkv` heads with `Hq % Hkv == 0`; query head `h` reads key/value head
      `h / (Hq / Hkv)` (grouped-query and multi-query attention).
    * The scale defaults to `1/sqrt(D)`. Accumulation is in f32 whatever the
      element type.
    * Causal alignment is explicit: `top_left` keeps key `k <= q`,
      `bottom_right` keeps `k <= q + (Nk - Nq)`.
    * Key lengths (per batch, clamped to `[0, Nk]`) and boolean masks
      (`true` = attend) remove keys; additive float masks are added to the
      scaled score.
    * A query row with no attended key yields an output of exactly 0 and a
      log-sum-exp of `-inf`, never NaN. A NaN in attended inputs stays NaN.
    * The log-sum-exp is natural-log and includes the max: `m + log(l)`.
    * A softmax row that is entirely `-inf` yields zeros.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class FA_Op<string mnemonic, list<Trait> traits = []>
    : Op<FA_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def FA_CausalNone : I32EnumAttrCase<"none", 0>;
def FA_CausalTopLeft : I32EnumAttrCase<"top_left", 1>;
def FA_CausalBottomRight : I32EnumAttrCase<"bottom_right", 2>;

def FA_CausalKind : I32EnumAttr<"CausalKind",
    "causal mask alignment",
    [FA_CausalNone, FA_CausalTopLeft, FA_CausalBottomRight]> {
  let cppNamespace = "::mlir::fa";
  let genSpecializedAttr = 0;
}

def FA_CausalAttr : EnumAttr<FA_Dialect, FA_CausalKind, "causal"> {
  let summary = "Causal mask alignment: none, top_left or bottom_right";
  let assemblyFormat = "`<` $value `>`";
}

#endif // FA_DIALECT_FA_IR_FABASE_TD
