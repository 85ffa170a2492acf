//===- Passes.td - fa dialect passes -----------------------*- tablegen -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_TRANSFORMS_PASSES_TD
#define FA_DIALECT_FA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FATileAttentionPass : Pass<"fa-tile-attention"> {
  let summary = "Lower fa.attention to tiled online-softmax loops";
  let description = [{
    Rewrites every `fa.attention` into an `scf.forall` over (batch, query
    head, query tile) whose body runs an `scf.for` over key/value tiles that
    carries the running row max `m`, the running row sum `l` and the partial
    output `acc` (all f32). Per key/value tile:

    ```
    S     = scale * Q_tile K_tile^T  (+ additive mask)
    S     = -inf where the causal / boolean mask removes a key
    m_new = max(m, rowmax(S))
    alpha = exp(m - m_new)               // rescale what is already summed
    P     = exp(S - m_new)
    l     = alpha * l + rowsum(P)
    acc   = alpha * acc + P V_tile
    ```

    Where `m_new` is `-inf` (nothing attended yet) it is replaced by 0 in
    the exponentials, so no `exp(-inf - -inf)` appears. After the loop,
    `O = acc / l` and `LSE = m + log(l)`, except where `l == 0` (a fully
    masked row): `O = 0` and `LSE = -inf`.

    The score matrix is never materialized beyond one tile. Key/value tiles
    that causality or the key lengths exclude entirely are skipped by the
    loop's upper bound: the loop runs over `ceil(kv_end / block-kv)` tiles
    with `kv_end = min(Nk, kv_lens[b], q0 + rows + (Nk - Nq | 0))`. Tiles at
    the end of a sequence shorter than the block are handled by dynamic tile
    sizes. Query head `h` reads key/value head `h / (Hq / Hkv)`.
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"64",
           "Query rows per tile">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"64",
           "Keys per key/value tile">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FAOnlineSoftmaxPass : Pass<"fa-online-softmax"> {
  let summary = "Lower fa.softmax to a two-sweep online softmax";
  let description = [{
    Rewrites every `fa.softmax` into two sweeps over each row instead of the
    three of a safe softmax. The first sweep runs over tiles of the row and
    keeps a running max `m` and a running sum `l`, rescaling `l` by
    `exp(m_old - m_new)` whenever the max grows; the second writes
    `exp(x - m) / l`. A row that is entirely `-inf` gives zeros.

    When the softmax dim is the innermost one (and `vector-width` > 0) both
    sweeps work on `vector<Wxf32>` values read with `vector.transfer_read`
    (full tiles in bounds, one masked tail): sweep 1 keeps the running max
    and sum per lane (one rescale per lane and tile) and combines the lanes
    at the end; `exp` is a polynomial on vectors (no libm calls). Other dims
    use scalar `linalg.generic` loops.
  }];
  let options = [
    Option<"tileSize", "tile-size", "int64_t", /*default=*/"256",
           "Elements of a row per tile of the first sweep">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes per vector when the softmax dim is the innermost one "
           "(0: scalar linalg.generic loops)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::vector::VectorDialect"
  ];
}

def FADecomposeReferencePass : Pass<"fa-decompose-reference"> {
  let summary = "Lower fa ops to the naive computation that materializes S";
  let description = [{
    The unfused reference lowering: `fa.attention` becomes `S = scale * Q
    K^T`, the masks, a three-sweep safe softmax over whole rows of `S`, and
    `O = P V`, each a `linalg.generic` on full tensors; `fa.softmax` becomes
    the three-sweep safe softmax. It is written separately from the tiled
    lowering (its masking, guards and softmax are its own; only generic IR
    building helpers are shared) and serves as a second path for differential
    tests and as the unfused baseline for benchmarks. It needs `B * Hq * Nq * Nk` floats for
    `S`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def FARaiseAttentionPass : Pass<"fa-raise-attention"> {
  let summary = "Raise attention written in linalg on tensors to fa.attention";
  let description = [{
    Recognizes scaled dot-product attention as front ends emit it on
    tensors and replaces the whole chain with one `fa.attention`:

    * `S = Q K^T`: `linalg.matmul`, `linalg.batch_matmul` or a contraction
      `linalg.generic` with 0, 1 or 2 batch dims (`[N, D]`, `[B*H, N, D]`,
      `[B, H, N, D]`), initialized with zero; K^T either in the indexing
      maps or as a `linalg.transpose` swapping K's last two dims;
    * an optional scale: `S * c`, `c * S` or `S / c` with `c` a constant
      (a scalar captured by a `linalg.generic`, a splat constant tensor or
      a `linalg.fill` of a constant, e.g. through `linalg.mul`/`linalg.div`)
      -> the `scale` attribute (1 when absent, 1/c for a division);
    * an optional mask applied after the scale: `S + M` (`linalg.add` or a
      generic `addf`) -> additive `mask`, or `select(Mb, S, -inf)` with an
      `i1` tensor `Mb` (`arith.select` on tensors or inside a generic) ->
      boolean `mask`; in a generic the mask may be broadcast over leading
      batch dims (dropped from its indexing map, or read at 0 from a unit
      dim), not over queries or keys;
    * `P = softmax(S)` over the last dim: `linalg.softmax` or the
      max / sub+exp / sum / div generics of its upstream decomposition
      (also with the subtraction and the exponential as two generics; the
      max from `-inf` with `maximumf` or `maxnumf`, or from NaN with
      `maxnumf`);
    * `O = P V` (zero-initialized, V indexed `[.., Nk, Dv]`).

    Rank-3 operands `[B*H, N, D]` become `[B*H, 1, N, D]` (and rank-2
    `[1, 1, N, D]`) through `tensor.expand_shape`; the result is collapsed
    back. Every intermediate must be used only by the next step of the
    chain. Anything that does not match exactly is left alone: another
    reduction dim, an extra use of S or P, a non-constant scale, a scale
    applied after the mask, softmax over another dim, element type changes
    (mixed-precision contractions), dynamic head dims or head counts.

    Numerics: fa.attention accumulates in f32 and uses an online softmax, so
    results differ from the chain in rounding. They also differ for a query
    row whose keys are all masked (all `-inf` after the mask): the chain
    computes `exp(-inf - -inf)` and gives NaN, fa.attention gives 0
    (the op's contract). Raising masked chains therefore turns NaN rows into zero
    rows; `allow-masked-rows=false` restricts raising to chains without a
    mask, where no row can be fully masked.
  }];
  let options = [
    Option<"allowMaskedRows", "allow-masked-rows", "bool", /*default=*/"true",
           "Also raise chains with a mask (fully masked rows become 0 "
           "instead of NaN)">,
  ];
  let dependentDialects = [
    "::mlir::fa::FADialect", "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_TD
