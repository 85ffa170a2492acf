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

def FATileAttentionBackwardPass : Pass<"fa-tile-attention-backward"> {
  let summary = "Lower fa.attention_backward to FlashAttention 2's tiled "
                "backward loops";
  let description = [{
    Rewrites every `fa.attention_backward` into tiled loops on tensors that
    never hold more than one `[block-q, block-kv]` tile of scores:

    ```
    Delta = rowsum(dO * O)                       // f32 [B, Hq, Nq]
    forall (batch, kv head):                     // one task per pair
      for each key tile j (keys below the batch's key length):
        dK_j = dV_j = 0                          // f32
        for each query head h of the group, each query tile i that
            visits key tile j (the forward's key range of tile i):
          S    = the forward's scores of (i, j) // removed keys -inf
          P    = exp(S - LSE_i)                  // 0 where LSE = -inf
          dV_j += P^T dO_i
          dP   = dO_i V_j^T
          dS   = scale * P * (dP - Delta_i)      // x (1 - tanh^2) softcap
          dK_j += dS^T Q_i
          dQ_i += dS K_j                         // f32, owned by the task
        dK[j], dV[j] = round(dK_j), round(dV_j)
    dQ = round(dQ_acc)
    ```

    A task owns the dK / dV rows of its kv head and the dQ rows of its
    group's query heads, so the `scf.forall` has no two tasks writing one
    element and the result does not depend on the number of threads (the
    reduction order is fixed). Keys at or past a batch's key length keep
    dK = dV = 0. A removed key's dS is exactly 0 (even where its V row holds
    NaN or inf), and its K row does not reach dQ where keys inside the
    visited range can be removed. Extra memory: the f32 dQ accumulator and
    Delta, O((Nq + Nk) D) per head.
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

def FALowerBlockMaskPass : Pass<"fa-lower-block-mask"> {
  let summary = "Lower fa.create_block_mask to linalg on tensors";
  let description = [{
    `fa.create_block_mask` becomes one `linalg.generic` over (b, h, query
    tile, key tile, row in tile, key in tile) that evaluates the inlined
    `mask_mod` for every in-range (row, key) of each tile pair and reduces
    whether any and whether all of them are kept, then one that encodes 0
    (none), 1 (some) or 2 (all) as i8. The CPU pipeline runs it first, so
    a block mask can be built in the same module as the attention that
    reads it.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FALowerMergePass : Pass<"fa-lower-merge"> {
  let summary = "Lower fa.merge to linalg on tensors";
  let description = [{
    `fa.merge` becomes four `linalg.generic` ops over its rows: the maximum
    LSE of the partials (a reduction over the split dim), the sum of their
    weights `exp(LSE_s - max)` and the weighted sum of their O rows (a
    partial with `LSE = -inf` adds nothing, even a NaN in its O), then the
    merged O (0 for a row without any key, rounded to the output's type)
    and LSE (-inf for such a row). The CPU pipeline runs it first.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def FARaiseAttentionPass : Pass<"fa-raise-attention"> {
  let summary = "Raise attention and softmax written in linalg on tensors to "
                "fa.attention and fa.softmax";
  let description = [{
    Recognizes scaled dot-product attention and softmax in the forms front
    ends emit on tensors (torch-mlir's linalg-on-tensors backend, StableHLO
    lowered to linalg, hand-written linalg) and replaces the chain with one
    `fa.attention` or `fa.softmax`.

    The match is made on the value of one element of the result, not on the
    ops: the analysis follows reshapes (`tensor.expand_shape` and
    `collapse_shape` around `batch_matmul`, unit dims), permutations
    (`linalg.transpose`, permutation-copy generics), broadcasts (separate
    generics or in indexing maps, reductions into `[.., 1]` tensors) and
    elementwise bodies, so the same attention written with different op
    boundaries matches the same way. It recognizes:

    * `S = Q K^T` and `O = P V`: contractions (`linalg.matmul`,
      `batch_matmul`, contraction generics, either operand order) with one
      reduction dim, initialized with zero; 0, 1 or 2 batch dims
      (`[N, D]`, `[B*H, N, D]`, `[B, H, N, D]`) in any layout, e.g.
      `[B, N, H, D]` (`einsum("bqhd,bkhd->bhqk")`): operands in another
      layout get a `linalg.transpose`, the result is brought back;
    * GQA/MQA written as a repeat of the K/V heads (`repeat_interleave`,
      transformers' `repeat_kv`, `jnp.repeat`: K and V read at head
      `h floordiv g`): K and V are not
      repeated, `fa.attention` gets `Hkv = Hq / g` heads;
    * the scale: constant factors and divisors of the scores (f64 constants
      truncated in the body included), also `sqrt(scale)` applied to Q and
      K^T separately;
    * masks: `select(keep, S, fill)` with `fill` `-inf` or a finite value
      `<= -1e4` (`-1e9`, JAX's `0.7 * lowest`: exact unless a kept score of
      the row is within ~104 of it), additive biases (`S + M`, broadcast over
      batch or heads), additive `0 / -inf` biases; on either side of the
      scale (a bias added before the scale is scaled with it), additive
      masks built by several `masked_fill`s of a `0 / fill` tensor;
    * positions: keeps that compare indices as `k <= q + c` or
      `k >= q + c` (`tril`, `masked_fill(~mask, -inf)`,
      `jnp.where(iota >= iota, s, fill)`, `|q - k| <= c`, in any number)
      become causality and a window: `top_left` for an upper bound `c = 0`,
      `bottom_right` for `c = Nk - Nq`, `top_left` with `q_offset(c)` for
      another `c`; a lower bound is `window(L, -1)`; both bounds around
      the diagonal without causality are `window(L, R)`;
    * score modifiers: `P * tanh(Q * S)` (Gemma 2's `c * tanh(s / c)`)
      becomes `softcap(|P|)` with the scale multiplied by `P`; nothing but
      constant factors may come between the tanh and the scores. A bias
      `-slope * |q + c - k|`, or `slope * (k - q - c)` on keys that
      causality keeps to `k <= q + c`, with `slope` a function of the batch
      and head (a tensor of slopes `[H]` or `[B, H]`, a constant, or
      anything that can be rebuilt) and the distance from index arithmetic
      (`math.absi`, `math.absf`, StableHLO's select form of `abs`), becomes
      `alibi` (the slopes tensor itself when it is one, else a generic that
      builds `[H]` or `[B, H]`), with its `c` as the position offset;
    * any other mask becomes the `mask` operand (the tensor itself when it
      is already `[B or 1, H or 1, Nq, Nk]`, else a generic that builds it);
      with `report-missed`, a mask built from index comparisons or a
      position bias that is not a window or ALiBi gets a remark;
    * the softmax: `linalg.softmax`, `fa.softmax`, or its decomposition
      `exp(X - max) / sum` (max from `-inf` with `maximumf`/`maxnumf`,
      argmax-style two-result max reductions, division or multiplication by
      the reciprocal, `arith.extf`/`truncf` around it), and PyTorch's safe
      softmax (`select(row all -inf, 0, softmax)`);
    * a standalone softmax chain -> `fa.softmax`.

    Everything computed from S must be used only by the chain (uses by
    `tensor.dim` are redirected). Anything that does not fit is left alone;
    with `report-missed`, each attention or softmax candidate left alone
    gets a remark that says why (for example "the softmax reduces over dim
    1 of P, the P.V contraction over dim 2").

    Numerics: fa.attention accumulates in f32 and uses an online softmax, so
    results differ from the chain in rounding (scores computed in f16 by the
    chain are f32 in fa.attention). They also differ for a query row whose
    keys are all masked: the chain computes `exp(-inf - -inf)` and gives
    NaN (or, with a finite fill, the mean of V), fa.attention gives 0 (the
    op's contract, and what PyTorch's safe softmax gives). Raising masked
    chains therefore changes such rows; `allow-masked-rows=false`
    restricts raising to chains without a mask or causal alignment.
  }];
  let options = [
    Option<"allowMaskedRows", "allow-masked-rows", "bool", /*default=*/"true",
           "Also raise chains with a mask (fully masked rows become 0 "
           "instead of NaN)">,
    Option<"reportMissed", "report-missed", "bool", /*default=*/"false",
           "Emit a remark on each attention or softmax candidate that is "
           "not raised, saying why (like LLVM's -Rpass-missed)">,
  ];
  let dependentDialects = [
    "::mlir::fa::FADialect", "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_TD
