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
    | `block_table` | `[B, M]` (optional) | i32                           |
    | `cu_seqlens` | `[B + 1]` twice (optional) | i32                     |
    | `mask`     | `[B or 1, Hq or 1, Nq, Nk]` (optional) | i1, or f32, f16, bf16 |
    | `alibi`    | `[Hq]` or `[B, Hq]` (optional) | f32                  |
    | `segments` | `[B, Nq]` and `[B, Nk]` (optional) | i32              |
    | `q_offset` | index scalar (optional) |                             |
    | `block_mask` | `[B or 1, Hq or 1, ceil(Nq / TQ), ceil(Nk / TK)]` (optional) | i8 |
    | `mod_operands` | any ranked tensors (optional) | read by the regions |
    | `output`   | `[B, Hq, Nq, Dv]`     | same as `query`               |
    | `lse`      | `[B, Hq, Nq]` (optional) | f32                        |

    `B`, `Nq` and `Nk` may be dynamic; `Hq`, `Hkv`, `D` and `Dv` are static,
    and `Hq % Hkv == 0`: query head `h` reads key/value head
    `h / (Hq / Hkv)`.

    **Paged K/V.** With a `block_table`, `key` and `value` are a paged
    cache, `[P, S, Hkv, D]` and `[P, S, Hkv, Dv]` (P pages of S rows, the
    vLLM / FlashAttention layout; S static), and sequence `b` holds
    `kv_lens[b]` keys (`kv_lens` is then required): key `k` of batch `b`
    is row `k % S` of page `block_table[b, k / S]`. The key length of the
    op is `Nk = M * S`, clamping `kv_lens` and sizing a mask; the causal
    alignment is per sequence: `bottom_right` keeps `k <= q + len_b - Nq`
    with `len_b = clamp(kv_lens[b], 0, Nk)` (the last query is the newest
    token of its sequence), and `off` below is `len_b - Nq`. Entries read
    (those below `ceil(len_b / S)`) must be in `[0, P)`; kernels clamp
    them, so a bad table gives wrong values, never an out-of-bounds read
    (`fa-run` checks tables before it runs). Pages may be shared between
    sequences. Segment ids and block masks are not available with a block
    table. The CPU vector kernel (`fa-cpu-attention`, kernel form) lowers
    paged ops; the other lowerings reject them.

    **Variable-length batches (token-major).** With `cu_seqlens(cu_q,
    cu_k)`, two i32 `[B + 1]` offsets (FlashAttention 2's varlen layout),
    `query` is `[Tq, Hq, D]`, `key` and `value` `[Tk, Hkv, D]` and
    `[Tk, Hkv, Dv]`, `output` `[Tq, Hq, Dv]` and `lse` `[Hq, Tq]`: sequence
    `b` is the query rows `cu_q[b] .. cu_q[b + 1] - 1` and the keys
    `cu_k[b] .. cu_k[b + 1] - 1`. Inside a sequence positions count from 0
    and its lengths `Lq_b`, `Lk_b` are the `Nq` and `Nk` of every rule
    below: `bottom_right` keeps `k <= q + Lk_b - Lq_b`, `off` is
    `Lk_b - Lq_b`, the regions get in-sequence `q < Lq_b` and `k < Lk_b`.
    A sequence with no keys gives its rows `O = 0` and `LSE = -inf`; one
    with no queries has no rows; rows outside every sequence (before
    `cu_q[0]`, from `cu_q[B]`) are not written. The offsets must be
    non-decreasing and within `[0, Tq]` / `[0, Tk]`; kernels clamp them
    (each start to `[0, T]`, each end to `[start, T]`), so bad offsets give
    wrong values, never an out-of-bounds access (`fa-run` checks them
    before it runs). `kv_lens`, a block table, a mask, segment ids and a
    block mask are not available with `cu_seqlens`; ALiBi slopes are
    `[Hq]` or `[B, Hq]`. The CPU vector kernel (`fa-cpu-attention`, kernel
    form) lowers this form; the other lowerings reject it.

    * `scale` multiplies `Q K^T`; it defaults to `1/sqrt(D)`.
    * `causal` is `none` (default), `top_left` (key `k` is kept when
      `k <= q`) or `bottom_right` (kept when `k <= q + Nk - Nq`).
    * `kv_lens[b]` keeps keys `k < kv_lens[b]` of batch `b`; it is clamped to
      `[0, Nk]`.
    * An `i1` mask keeps the keys where it is true; a float mask is added to
      the scaled score. Dimensions of size 1 broadcast.
    * Score and mask modifiers, with FlashAttention 2's definitions. `off`
      is the diagonal offset of the causal alignment (`Nk - Nq` for
      `bottom_right`, 0 otherwise) plus `q_offset` when given; query row
      `q` is at key position `q + off`.
      - `window(L, R)` keeps key `k` when `q + off - L <= k <= q + off + R`
        (inclusive; `-1` leaves that side unbounded). With `causal`, both
        apply. FlashAttention 2 aligns a window bottom-right even without
        causality; for `Nq != Nk` that is `q_offset(Nk - Nq)` here.
      - `softcap(c)`, `c > 0`: the scaled score `s` becomes
        `c * tanh(s / c)`.
      - `alibi(slopes)` adds `-slopes[h] * |q + off - k|` (`slopes[b, h]`
        for a `[B, Hq]` operand) to the score.
      - `chunk(C)`, `C > 0`, keeps the keys of the query's chunk:
        `floor((q + off) / C) == floor(k / C)`.
      - `segments(qs, ks)` keeps key `k` of query `q` in batch `b` when
        `qs[b, q] == ks[b, k]` (document masking of packed sequences).
      - `q_offset(p)` shifts every query position by `p`: causality,
        window, chunk and ALiBi read `q + p`. The tiling of the op uses it
        to keep a query tile's positions. `|p|` must be at most `2^31 - 1`
        (the verifier checks a constant `p`), as positions are.
    * General modifiers, as FlexAttention's `score_mod` and `mask_mod`:
      - a `score_mod` region maps the score of query row `q` and key `k`
        of batch `b` and query head `h` to a new f32 score. Its block
        arguments are `(score: f32, b: index, h: index, q: index,
        k: index)` followed by one argument per `mod_operands` operand, of
        its type; it ends in `fa.yield %new : f32`.
      - a `mask_mod` region keeps key `k` of row `q` when it yields true:
        arguments `(b, h, q, k: index)` and one per `mod_operands` operand;
        it ends in `fa.yield %keep : i1`.
      - `mod_operands` are tensors the regions read with `tensor.extract`
        (for example a relative-bias table `[Hq, Nq + Nk - 1]`); the
        kernel form passes them as memrefs. No other op may use them.
      - A region is one block of side-effect-free ops without regions of
        their own (`arith`, `math`, `tensor.extract`, ...). It may be
        evaluated for more (q, k) pairs than are kept, and in any order,
        but only with `b < B`, `h < Hq`, `q < Nq` and `k < Nk`.
      - Its indices are those of the op's own operands; tiling the op adds
        the tile's origin inside the tiled op's regions.
    * Block sparsity for a `mask_mod`: a `block_mask` with `block_tiles(TQ,
      TK)` says, per batch, query head, query tile of TQ rows and key tile
      of TK keys, whether the mask_mod keeps no key of the tile (0), some
      (1) or every one (2), counting only rows below Nq and keys below Nk
      (size-1 batch or head dims broadcast). `fa.create_block_mask` builds
      it from the same mask_mod. Kernels may skip the tiles marked 0 and
      skip the mask_mod on those marked 2, so the block mask must describe
      the op's mask_mod exactly; ops that do not use it (the reference)
      give the same result. The CPU vector kernel takes its tile sizes
      from `block_tiles`; the GPU kernels (SIMT, mma.sync, wgmma) use the
      block mask when `TQ` and `TK` are whole multiples of their query and
      key tiles (a tile marked empty is neither loaded nor computed; the
      SIMT kernel still applies the mask_mod on full tiles), and ignore it
      otherwise.
    * Order of application, on every backend: scale, softcap, ALiBi, the
      additive mask, `score_mod`; then every removed key (causal, window,
      chunk, segments, key lengths, boolean mask, `mask_mod`) becomes
      `-inf` before the max.
    * A query row with no attended key gives `O = 0` and `LSE = -inf`,
      whichever rule emptied it.
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
    Optional<FA_Tensor>:$block_table,
    Optional<FA_Tensor>:$cu_seqlens_q,
    Optional<FA_Tensor>:$cu_seqlens_k,
    Optional<FA_Tensor>:$mask,
    Optional<FA_Tensor>:$alibi,
    Optional<FA_Tensor>:$q_segments,
    Optional<FA_Tensor>:$k_segments,
    Optional<Index>:$q_offset,
    Optional<FA_Tensor>:$block_mask,
    Variadic<FA_Tensor>:$mod_operands,
    FA_Tensor:$output,
    Optional<FA_Tensor>:$lse,
    OptionalAttr<F32Attr>:$scale,
    DefaultValuedAttr<FA_CausalAttr, "::mlir::fa::CausalKind::none">:$causal,
    OptionalAttr<DenseI64ArrayAttr>:$window,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<I64Attr>:$chunk,
    OptionalAttr<DenseI64ArrayAttr>:$block_tiles
  );
  let results = (outs FA_Tensor:$result,
                      Optional<FA_Tensor>:$lse_result);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
        type($value) `)`
    (`kv_lens` `(` $kv_lens^ `:` type($kv_lens) `)`)?
    (`block_table` `(` $block_table^ `:` type($block_table) `)`)?
    (`cu_seqlens` `(` $cu_seqlens_q^ `,` $cu_seqlens_k `:`
        type($cu_seqlens_q) `,` type($cu_seqlens_k) `)`)?
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`alibi` `(` $alibi^ `:` type($alibi) `)`)?
    (`segments` `(` $q_segments^ `,` $k_segments `:` type($q_segments) `,`
        type($k_segments) `)`)?
    (`q_offset` `(` $q_offset^ `)`)?
    (`block_mask` `(` $block_mask^ `:` type($block_mask) `)`)?
    (`mod_operands` `(` $mod_operands^ `:` type($mod_operands) `)`)?
    `outs` `(` $output `:` type($output) (`,` $lse^ `:` type($lse))? `)`
    custom<CausalClause>($causal)
    (`window` `(` custom<WindowBounds>($window)^ `)`)?
    (`softcap` `(` $softcap^ `)`)?
    (`chunk` `(` $chunk^ `)`)?
    (`block_tiles` `(` custom<WindowBounds>($block_tiles)^ `)`)?
    (`scale` `(` $scale^ `)`)?
    (`score_mod` $score_mod^)?
    (`mask_mod` $mask_mod^)?
    attr-dict `->` type($result) (`,` type($lse_result)^)?
  }];

  let builders = [
    // An op without score/mask modifiers.
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$kv_lens,
      "::mlir::Value":$mask, "::mlir::Value":$output, "::mlir::Value":$lse,
      "::mlir::FloatAttr":$scale, "::mlir::fa::CausalKindAttr":$causal), [{
      build($_builder, $_state, resultTypes, query, key, value, kv_lens,
            /*block_table=*/::mlir::Value(),
            /*cu_seqlens_q=*/::mlir::Value(), /*cu_seqlens_k=*/::mlir::Value(),
            mask, /*alibi=*/::mlir::Value(), /*q_segments=*/::mlir::Value(),
            /*k_segments=*/::mlir::Value(), /*q_offset=*/::mlir::Value(),
            /*block_mask=*/::mlir::Value(),
            /*mod_operands=*/::mlir::ValueRange(), output, lse, scale, causal,
            /*window=*/nullptr, /*softcap=*/nullptr, /*chunk=*/nullptr,
            /*block_tiles=*/nullptr);
    }]>,
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::mlir::Value":$query,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$kv_lens,
      "::mlir::Value":$mask, "::mlir::Value":$output, "::mlir::Value":$lse,
      "::mlir::FloatAttr":$scale, "::mlir::fa::CausalKind":$causal), [{
      build($_builder, $_state, resultTypes, query, key, value, kv_lens,
            mask, output, lse, scale,
            ::mlir::fa::CausalKindAttr::get($_builder.getContext(), causal));
    }]>
  ];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();

    /// Whether any score or mask modifier (window, softcap, ALiBi, chunk,
    /// segments, q_offset, a score_mod or mask_mod region) is set.
    bool hasModifiers();

    /// Whether the op has a score_mod / mask_mod region.
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }

    /// The number of leading index arguments of a region: (b, h, q, k).
    static constexpr unsigned kNumModIndices = 4;

    /// The scale applied to Q K^T: the attribute, or 1/sqrt(D).
    float getEffectiveScale();

    /// Number of query heads per key/value head (Hq / Hkv).
    int64_t getGroupSize();

    /// Whether K/V are a paged cache read through a block table.
    bool isPaged() { return static_cast<bool>(getBlockTable()); }
    /// Whether the op is in the token-major variable-length form (with
    /// cu_seqlens): Q [Tq, Hq, D], K/V [Tk, Hkv, D], O [Tq, Hq, Dv],
    /// LSE [Hq, Tq].
    bool isVarlen() { return static_cast<bool>(getCuSeqlensQ()); }
    /// The head dim of Q (its last dim) and the value head dim Dv.
    int64_t getHeadDim();
    int64_t getValueHeadDim();
    /// The query heads Hq (Q's dim 1).
    int64_t getQueryHeads();
    /// The key/value heads Hkv (K's dim 1, or 2 when paged).
    int64_t getKvHeads();
    /// The rows per page S of a paged cache (K's dim 1); 0 when not paged.
    int64_t getPageSize();
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// AttentionBackwardOp
//===----------------------------------------------------------------------===//

def FA_AttentionBackwardOp : FA_Op<"attention_backward", [
    Pure, DestinationStyleOpInterface, AttrSizedOperandSegments]> {
  let summary = "Gradients dQ, dK, dV of fa.attention from its saved output "
                "and log-sum-exp";
  let description = [{
    The backward pass of `fa.attention`: given the forward's inputs, its
    output `O` and log-sum-exp `LSE` (saved by the forward) and the
    gradient `dO` of a loss with respect to `O`, computes the gradients
    `dQ`, `dK` and `dV` of that loss with respect to `Q`, `K` and `V`.

    | operand       | shape                 | element type              |
    |---------------|-----------------------|---------------------------|
    | `query`       | `[B, Hq, Nq, D]`      | f32, f16 or bf16          |
    | `key`         | `[B, Hkv, Nk, D]`     | same as `query`           |
    | `value`       | `[B, Hkv, Nk, Dv]`    | same as `query`           |
    | `output`      | `[B, Hq, Nq, Dv]`     | same as `query`           |
    | `lse`         | `[B, Hq, Nq]`         | f32                       |
    | `grad_output` | `[B, Hq, Nq, Dv]`     | same as `query`           |
    | `kv_lens`, `mask`, `alibi`, `segments`, `q_offset` | as fa.attention's | |
    | `grad_query`  | `[B, Hq, Nq, D]`      | same as `query`           |
    | `grad_key`    | `[B, Hkv, Nk, D]`     | same as `query`           |
    | `grad_value`  | `[B, Hkv, Nk, Dv]`    | same as `query`           |

    The key lengths, masks, causal alignment, scale and built-in modifiers
    (`window`, `softcap`, `chunk`, `alibi`, `segments`, `q_offset`) are
    those of fa.attention, with the same rules: they must be the ones the
    forward ran with, or the gradients are not those of its output. With
    `P = exp(S - LSE)` (row-wise; the scores `S` as the forward computes
    them, removed keys at `-inf`) and `Delta = rowsum(dO * O)`:

    * `dV = P^T dO`;
    * `dP = dO V^T`, `dS = P * (dP - Delta)`;
    * where `softcap(c)` is on, `dS` is multiplied by the derivative of the
      cap, `1 - tanh(s / c)^2` at the scaled score `s` (ALiBi and an
      additive mask are constants: their derivative is 1);
    * `dQ = scale * dS K` and `dK = scale * dS^T Q`.

    With grouped query heads (`Hq > Hkv`), `dK` and `dV` of a key/value
    head sum the contributions of its `Hq / Hkv` query heads. A removed key
    gets `P = 0` and so no gradient from that row; a row with no attended
    key (`LSE = -inf`) contributes nothing (zero `dQ`, never NaN), and so
    does a key no row attends (zero `dK`, `dV`). The additive mask,
    slopes and segment ids get no gradient.

    Gradients are accumulated in f32 and rounded to the element type of
    `query` once. The lowerings never materialize an `[Nq, Nk]` buffer
    (FlashAttention 2's algorithm: per key tile, a loop over the query
    tiles recomputes `S` and `P`).

    General `score_mod` / `mask_mod` regions, block masks, paged caches
    and the variable-length form are not available on this op.

    Example:

    ```mlir
    %dq, %dk, %dv = fa.attention_backward
        ins(%q, %k, %v : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>,
                         tensor<1x2x?x64xf32>)
        forward(%o, %lse : tensor<1x8x?x64xf32>, tensor<1x8x?xf32>)
        grad_output(%do : tensor<1x8x?x64xf32>)
        outs(%dq0, %dk0, %dv0 : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>,
                                tensor<1x2x?x64xf32>)
        causal(bottom_right)
        -> tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>
    ```
  }];

  let arguments = (ins
    FA_Tensor:$query,
    FA_Tensor:$key,
    FA_Tensor:$value,
    FA_Tensor:$output,
    FA_Tensor:$lse,
    FA_Tensor:$grad_output,
    Optional<FA_Tensor>:$kv_lens,
    Optional<FA_Tensor>:$mask,
    Optional<FA_Tensor>:$alibi,
    Optional<FA_Tensor>:$q_segments,
    Optional<FA_Tensor>:$k_segments,
    Optional<Index>:$q_offset,
    FA_Tensor:$grad_query,
    FA_Tensor:$grad_key,
    FA_Tensor:$grad_value,
    OptionalAttr<F32Attr>:$scale,
    DefaultValuedAttr<FA_CausalAttr, "::mlir::fa::CausalKind::none">:$causal,
    OptionalAttr<DenseI64ArrayAttr>:$window,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<I64Attr>:$chunk
  );
  let results = (outs FA_Tensor:$grad_query_result,
                      FA_Tensor:$grad_key_result,
                      FA_Tensor:$grad_value_result);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,`
        type($value) `)`
    `forward` `(` $output `,` $lse `:` type($output) `,` type($lse) `)`
    `grad_output` `(` $grad_output `:` type($grad_output) `)`
    (`kv_lens` `(` $kv_lens^ `:` type($kv_lens) `)`)?
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`alibi` `(` $alibi^ `:` type($alibi) `)`)?
    (`segments` `(` $q_segments^ `,` $k_segments `:` type($q_segments) `,`
        type($k_segments) `)`)?
    (`q_offset` `(` $q_offset^ `)`)?
    `outs` `(` $grad_query `,` $grad_key `,` $grad_value `:`
        type($grad_query) `,` type($grad_key) `,` type($grad_value) `)`
    custom<CausalClause>($causal)
    (`window` `(` custom<WindowBounds>($window)^ `)`)?
    (`softcap` `(` $softcap^ `)`)?
    (`chunk` `(` $chunk^ `)`)?
    (`scale` `(` $scale^ `)`)?
    attr-dict `->` type($grad_query_result) `,` type($grad_key_result) `,`
        type($grad_value_result)
  }];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      // grad_query, grad_key and grad_value are the trailing operands.
      return ::mlir::MutableOperandRange(
          getOperation(), getOperation()->getNumOperands() - 3, 3);
    }

    /// Whether any built-in modifier (window, softcap, ALiBi, chunk,
    /// segments, q_offset) is set.
    bool hasModifiers() {
      return getWindowAttr() || getSoftcapAttr() || getChunkAttr() ||
             getAlibi() || getQSegments() || getQOffset();
    }
    /// The scale applied to Q K^T: the attribute, or 1/sqrt(D).
    float getEffectiveScale();
    /// The head dims D and Dv, the query heads Hq and key/value heads Hkv.
    int64_t getHeadDim();
    int64_t getValueHeadDim();
    int64_t getQueryHeads();
    int64_t getKvHeads();
    /// Number of query heads per key/value head (Hq / Hkv).
    int64_t getGroupSize() { return getQueryHeads() / getKvHeads(); }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// YieldOp
//===----------------------------------------------------------------------===//

def FA_MergeOp : FA_Op<"merge", [Pure, DestinationStyleOpInterface]> {
  let summary = "Combines partial attention results computed over disjoint "
                "key ranges";
  let description = [{
    Merges `S` partial results of attention, each computed over its own
    subset of the keys (split-KV / flash-decoding, cascade attention with a
    shared prefix, context parallelism across devices), into the result of
    attention over all of them. `partial_output` is `[S, d..., Dv]` and
    `partial_lse` `[S, d...]` (f32; the natural-log LSE of each partial,
    as fa.attention produces it); `output` is `[d..., Dv]` (f32, f16 or
    bf16) and the optional `lse` `[d...]` (f32). For each position `d...`,
    with `M = max_s LSE_s`:

    * `O = sum_s exp(LSE_s - M) O_s / sum_s exp(LSE_s - M)` and
      `LSE = M + log(sum_s exp(LSE_s - M))`: the rescaling of the online
      softmax, so merging is exact (up to rounding) and associative;
    * a partial with `LSE_s = -inf` (no attended key) contributes nothing,
      whatever its `O_s` holds (NaN included);
    * when every partial is empty: `O = 0`, `LSE = -inf`, as fa.attention
      gives for a row with no attended key.

    Example (two halves of the keys):

    ```mlir
    %o, %lse = fa.merge ins(%po, %pl : tensor<2x4x8x1x128xf32>,
                                       tensor<2x4x8x1xf32>)
                 outs(%o0 : tensor<4x8x1x128xf16>, %l0 : tensor<4x8x1xf32>)
                 -> tensor<4x8x1x128xf16>, tensor<4x8x1xf32>
    ```
  }];

  let arguments = (ins FA_Tensor:$partial_output, FA_Tensor:$partial_lse,
                       FA_Tensor:$output, Optional<FA_Tensor>:$lse);
  let results = (outs FA_Tensor:$result, Optional<FA_Tensor>:$lse_result);

  let assemblyFormat = [{
    `ins` `(` $partial_output `,` $partial_lse `:` type($partial_output) `,`
        type($partial_lse) `)`
    `outs` `(` $output `:` type($output) (`,` $lse^ `:` type($lse))? `)`
    attr-dict `->` type($result) (`,` type($lse_result)^)?
  }];

  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable();
  }];

  let hasVerifier = 1;
}

def FA_CreateBlockMaskOp : FA_Op<"create_block_mask", [Pure]> {
  let summary = "Evaluates a mask_mod per tile pair: the block mask of "
                "fa.attention";
  let description = [{
    Builds the `block_mask` operand of `fa.attention` (as FlexAttention's
    `create_block_mask`): for every batch `b < batch`, head `h < heads`,
    query tile `i` (rows `[i TQ, (i + 1) TQ)`) and key tile `j` (keys
    `[j TK, (j + 1) TK)`), the result holds 0 when the `mask_mod` keeps
    none of the tile's (row, key) pairs, 2 when it keeps all of them and 1
    otherwise, counting only rows below `query_len` and keys below
    `key_len`. The result type is `[batch, heads, ceil(query_len / TQ),
    ceil(key_len / TK)]` in i8; `batch` or `heads` of 1 evaluates the
    region at b = 0 or h = 0 only (for a mask_mod that does not read
    them, as fa.attention broadcasts the dim).

    The `mask_mod` region and `mod_operands` are those of fa.attention's
    mask_mod (the same arguments and rules). The work is O(B Hq Nq Nk)
    evaluations of the region, done once for many attention calls.

    Example:

    ```mlir
    %bm = fa.create_block_mask sizes(%c1, %c1, %n, %n) tiles(64, 64)
        mask_mod {
        ^bb0(%b: index, %h: index, %q: index, %k: index):
          %keep = arith.cmpi sle, %k, %q : index
          fa.yield %keep : i1
        } -> tensor<1x1x?x?xi8>
    ```
  }];
  let arguments = (ins Index:$batch, Index:$heads, Index:$query_len,
                       Index:$key_len, Variadic<FA_Tensor>:$mod_operands,
                       DenseI64ArrayAttr:$tiles);
  let results = (outs FA_Tensor:$result);
  let regions = (region SizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    `sizes` `(` $batch `,` $heads `,` $query_len `,` $key_len `)`
    (`mod_operands` `(` $mod_operands^ `:` type($mod_operands) `)`)?
    `tiles` `(` custom<WindowBounds>($tiles) `)`
    `mask_mod` $mask_mod attr-dict `->` type($result)
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def FA_YieldOp : FA_Op<"yield", [
    Pure, Terminator,
    ParentOneOf<["AttentionOp", "CreateBlockMaskOp"]>]> {
  let summary = "Yields the value of a modifier region";
  let description = [{
    Ends a `score_mod` region (one f32: the new score) or a `mask_mod`
    region (one i1: true keeps the key) of `fa.attention` or
    `fa.create_block_mask`.

    Example:

    ```mlir
    fa.yield %score : f32
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // FA_DIALECT_FA_IR_FAOPS_TD
