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
  }];
  let options = [
    Option<"tileSize", "tile-size", "int64_t", /*default=*/"256",
           "Elements of a row per tile of the first sweep">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
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

def FAPromoteSharedPass : Pass<"fa-promote-shared", "::mlir::func::FuncOp"> {
  let summary = "Lower fa.attention to block/warp-structured tiles promoted "
                "to workgroup memory";
  let description = [{
    The first half of the GPU path. Applies to a kernel function whose
    memref arguments feed one `fa.attention` through
    `bufferization.to_tensor` and receive its results through
    `bufferization.materialize_in_destination` (the form `fa-run` and
    `fa-compile` build). The function body becomes:

    * an `scf.forall` over (query tile, query head, batch) mapped to
      `#gpu.block<x|y|z>`;
    * in it, the Q tile, each K/V tile and the running state (`m`, `l`,
      `acc` per query row, f32) in workgroup memory (address space 3), the
      K rows padded so that lanes reading different keys hit different
      banks;
    * cooperative copies as `scf.forall` over the block's threads
      (`#gpu.thread<x>`), zero-filling rows past the sequence ends;
    * the online-softmax update of each query row as an `scf.forall` over
      warps (`#gpu.warp<x>`) whose body computes on `vector<32x...>` values,
      one element per lane: scores by lane-parallel dot products, the row
      max and row sum as `vector.reduction`, P V by broadcasting each lane's
      `p` with `vector.extract`. Exponentials use `exp2` with `log2(e)`
      folded into the scale.

    Consecutive thread- and warp-level foralls are separated by barriers
    once mapped (`fa-map-to-gpu`); run sequentially on the CPU the IR is
    already a correct kernel, which is how the promotion's arithmetic is
    tested without a GPU. Head dims must be multiples of 8 up to 256.

    With `double-buffer`, K and V get two slots: a prologue copies tile 0,
    and iteration j copies tile j+1 into the other slot in the same barrier
    interval as the compute of tile j (the copy forall is marked
    `fa.no_barrier_after`), so the global loads of the next tile overlap the
    current tile's arithmetic across warps and each tile costs one barrier
    instead of two.
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"0",
           "Query rows per block (0: choose from the shared-memory budget)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"0",
           "Keys per K/V tile (0: choose from the shared-memory budget)">,
    Option<"numWarps", "warps", "int64_t", /*default=*/"4",
           "Warps per block">,
    Option<"sharedBudget", "shared-budget", "int64_t", /*default=*/"49152",
           "Bytes of workgroup memory the tiles may use">,
    Option<"doubleBuffer", "double-buffer", "bool", /*default=*/"false",
           "Two K/V slots: the copy of tile j+1 shares a barrier interval "
           "with the compute of tile j (one barrier per tile instead of "
           "two)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::gpu::GPUDialect"
  ];
}

def FAMapToGPUPass : Pass<"fa-map-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Map the promoted tiles onto a gpu.func kernel";
  let description = [{
    The second half of the GPU path, run after `fa-promote-shared`. For each
    kernel function, the block-level `scf.forall` becomes a `gpu.func`
    kernel in a new `gpu.module` (named `<function>_kernels`), launched by a
    `gpu.launch_func` over the grid (query tiles, Hq, B) with the threads of
    the promoted form; the function's memref arguments are the kernel's
    parameters, in order. The workgroup buffers become workgroup globals
    (`memref.global` in address space 3, 16-byte aligned).

    Inside the kernel a thread-level forall runs once per thread and a
    warp-level forall once per warp, each followed by `gpu.barrier`. Every
    `vector<32xT>` lane vector of a warp forall is distributed, lane `l`
    holding element `l`: elementwise ops become scalar ops, `vector.step`
    the lane id, `vector.reduction` a butterfly of `gpu.shuffle xor` with
    offsets 16, 8, 4, 2, 1 (the warp-level row max and row sum),
    `vector.extract` a `gpu.shuffle idx`, `vector.gather` a load and
    `vector.scatter` a guarded store at the lane's index. An op outside this
    vocabulary is an error naming the op.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_TD
