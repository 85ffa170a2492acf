//===- Passes.td - fa's backend kernel builders ------------*- tablegen -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The passes that build target kernels from fa.attention / fa.softmax in the
// kernel form (bufferized, one op per function): the CPU vector kernel
// (lib/Codegen/CPU), the SIMT GPU kernel (lib/Codegen/GPU/SIMT) and the
// NVIDIA tensor-core kernels (lib/Codegen/GPU/NVIDIA). The target-independent
// rewrites stay with the dialect (fa/Dialect/FA/Transforms/Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef FA_CODEGEN_PASSES_TD
#define FA_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// CPU
//===----------------------------------------------------------------------===//

def FACpuAttentionPass : Pass<"fa-cpu-attention"> {
  let summary = "Lower kernel-form fa.attention to a register-blocked, "
                "vectorized CPU kernel";
  let description = [{
    Rewrites each `fa.attention` in kernel form (operands read from memrefs
    through `bufferization.to_tensor`, results written to memrefs through
    `bufferization.materialize_in_destination`, the form `fa-run` and
    `fa-compile` build) into memref-level loops on `vector<Wxf32>` values
    (W = `vector-width`: 16 for AVX-512, 8 for AVX2):

    * an `scf.forall` over (batch, query head, query tile of `block-q`
      rows); its f32 scratch buffers (`memref.alloca`, 64-byte aligned) sit
      before the loop, or with `parallel` in the loop body, where every
      OpenMP iteration gets its own (convert-scf-to-openmp wraps the body in
      an alloca scope); with `parallel` and causality, iteration t takes
      query tile t / 2 (t even) or T - 1 - t / 2 (t odd), so that the
      contiguous chunks of the static OpenMP schedule pair light and heavy
      tiles even when threads split a head;
    * per query tile, Q is packed transposed and pre-scaled (Q^T, f32),
      one query per vector lane;
    * per key/value tile (`block-kv` keys, only the tiles below
      `kv_end = min(Nk, clamp(kv_lens[b]), causal end)`), f16/bf16 K and V
      are packed as f32 rows (converted while packing); f32 K, and f32 V
      whose Dv is a multiple of W, are read in place;
    * S^T = K (scale Q)^T by a register-blocked micro-kernel: `key-rows`
      keys x (`block-q` / W, at most 4) query vectors of accumulators
      carried as `scf.for` iter_args over d, each step broadcasting K[j][d]
      and doing `vector.fma` with the Q^T row d; a wider query tile runs
      its groups of 4 query vectors in turn on the same key rows (which
      stay in L1), so an explicit `block-q` of 8 W or more halves the
      passes over K and V without spilling; where K is read in place
      (and in the bf16 dot kernel), each register block of keys first
      prefetches into L2 the K rows 64 keys ahead, which the hardware
      prefetchers do not follow once K is streamed from memory;
    * the online softmax per lane, with no horizontal reductions: masks
      (boolean -> -inf, additive, causal per lane) and the running max in
      one sweep over the key rows, then P = exp(S - m) and its sum in a
      second; `exp` is a polynomial on vectors (no libm calls); m = -inf is
      replaced by 0 before the subtraction;
    * O += P V by a second micro-kernel: `pv-rows` query rows x
      `pv-vectors` vectors of Dv, the accumulators first rescaled by
      alpha = exp(m_old - m_new), each step broadcasting P[r][j] and doing
      `vector.fma` with the V row j; with a mask, keys with p = 0 are
      skipped by a select, so NaN or inf in their V rows cannot leak;
    * the epilogue writes O = acc / l (O = 0 when l = 0) in the element
      type and LSE = m + log(l) (-inf when l = 0).

    Score and mask modifiers (fa.attention's `window`, `softcap`, `alibi`,
    `chunk`, `segments`, `q_offset`) come from `AttentionSemantics`: the key
    loop of a query tile runs over `[visitedKeyBegin, visitedKeyEnd)` (the
    window and chunk bounds), so excluded key tiles are never visited; the
    first softmax sweep applies softcap (tanh as a rational approximation)
    and ALiBi to every score, then, on tiles that `tileNeedsElementMask`
    says are not full, removes the keys the window, chunk, causality and
    segment ids exclude; full tiles skip the key masks and the guarded
    P V. With causality and none of these, only the tiles that
    `crossesDiagonal` compare each query lane with the key.

    `block-q` and `block-kv` of 0 (the default) are chosen per op from the
    L2 size per core (`l2-cache-size`, else 512 KiB; the pass does not probe
    the host, the tools pass the host's): `block-q` is four
    vectors (the register block of the S^T micro-kernel) unless Q^T and the
    O accumulator would take more than a quarter of L2; `block-kv` is the
    largest multiple of 16 in [16, 512] for which Q^T, the O accumulator,
    the K and V tiles, S^T and the mask tile fit in half the L2 (64 x 512
    at D = 64, 64 x 352 at D = 128 with 1 MiB). Given the L1 data size
    (`l1-cache-size`; the tools pass the host's), the query-tile kernel's
    `block-kv` is at most the largest multiple of 16 whose V rows, S^T and
    mask tile fit in L1, where that is at least 64 keys, since P V reads
    them once per block of `pv-rows` rows (48 KiB: 96 keys at D = 64, 64
    at D = 96 and 128; D = 256 keeps the L2 rule). On the Zen 5 host of
    docs/performance.md, D = 128 with 64-key tiles ran 9-12% faster than
    with 352.

    **Decode.** When the query length is small, a tile of `block-q` query
    rows of one head is mostly padding and every query head reads the K/V
    rows of its kv head again. With `decode-tiles` (the default), an op
    whose Nq x G rows (G = Hq / Hkv) fit one decode tile of
    lcm(W, `pv-rows`) rows gets a second kernel: the `scf.forall` runs over
    (batch, kv head, decode tile) and a tile's rows are the (query, head)
    pairs of the G query heads that share the kv head, query-major (row r:
    query r / G of head kv_head * G + r % G), so each K/V tile is read once
    per group, as FlashAttention 3's `pack_gqa`. The lanes' positions,
    heads and ALiBi slopes are vectors (slopes and segment ids gathered);
    the key range and tile classes are those of the queries the tile
    holds. With so few rows, broadcasting K elements against Q^T vectors
    would leave most lanes empty: when D is a multiple of W, the decode
    tile's scores are dot products instead, each K row read once in place
    (through the block table of a paged cache) as vectors along d and
    dotted with every row's scaled Q (a horizontal sum per key and row).
    A static Nq picks one kernel; a dynamic one gets both, chosen by
    `Nq * G <= rows` at run time. Ops with a block mask keep the one kernel
    on its tiles.

    **Split-KV.** A decode step of few sequences and kv heads leaves
    threads idle. With `kv-splits` N > 1 the decode kernel's forall gets a
    fourth dim over N runs of equal length of each tile's visited key
    tiles (N at most the key tiles of Nk; runs past the end visit
    nothing); each writes its partial O
    (f32) and LSE to a workspace `[N, B, Hq, Nq, Dv]` / `[N, B, Hq, Nq]`
    (`memref.alloc`, freed by the pipeline's buffer deallocation), and an
    `fa.merge` of the partials, lowered here by fa-lower-merge's patterns,
    writes the outputs. With `kv-splits=0` (the default) and `parallel`, N
    is chosen at run time: `ceil(2 T / (B Hkv tiles))` for T =
    `omp_get_max_threads()`, at most one run per two key tiles of Nk, at
    least 1.

    **bf16 dot products.** With `bf16-dot` (fa-compile and fa-run set it
    where the target has AVX512_BF16), bf16 inputs with an even D in query
    tiles of one head (not the decode kernels) with 16 lanes take
    `x86vector.avx512.dot` (vdpbf16ps: per f32 lane, the sum of two bf16
    products) for both products. Q is packed as bf16 pairs along d
    (unscaled), each K pair (one 32-bit word) is broadcast from its row in
    place, and the S^T register block runs D / 2 steps; S is then scaled
    in f32. The softmax's exp pass takes the keys in pairs: P is rounded to
    bf16 (`x86vector.avx512.cvt.packed.f32_to_bf16`, round to nearest
    even) and paired along the keys as it is computed, as are the V rows
    of the tile (a key past the tile is 0 in both), and P V dots a
    broadcast P pair with the V pair vectors; the running sum l stays the
    f32 sum of the unrounded P.
    The products cannot skip a removed key per row, and 0 * NaN is NaN: a
    tile that needs the removed-key guard and whose V rows hold an inf or
    a NaN (an exponent of all ones, found while pairing) takes the f32
    P V with its select instead. Other element types and shapes keep the
    f32 kernel; the target must have avx512bf16.

    Functions not in kernel form are left for `fa-tile-attention` unless
    `require-kernel-form` is set.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes per vector (16: AVX-512, 8: AVX2)">,
    Option<"blockQ", "block-q", "int64_t", /*default=*/"0",
           "Query rows per tile (a multiple of vector-width and pv-rows; "
           "0: automatic, from the cache sizes)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"0",
           "Keys per key/value tile (0: automatic, from the cache sizes)">,
    Option<"l1CacheSize", "l1-cache-size", "int64_t", /*default=*/"0",
           "L1 data cache per core in bytes the automatic key tiles of the "
           "prefill kernel assume (0: unknown, the L2 rule alone)">,
    Option<"l2CacheSize", "l2-cache-size", "int64_t", /*default=*/"0",
           "L2 cache per core in bytes the automatic tile sizes assume "
           "(0: 512 KiB)">,
    Option<"keyRows", "key-rows", "int64_t", /*default=*/"6",
           "Keys per register block of the S micro-kernel">,
    Option<"pvRows", "pv-rows", "int64_t", /*default=*/"4",
           "Query rows per register block of the P V micro-kernel">,
    Option<"pvVectors", "pv-vectors", "int64_t", /*default=*/"0",
           "Vectors of Dv per register block of the P V micro-kernel (0: "
           "automatic: Dv's vectors in the fewest even groups of at most "
           "min(6, 24 / pv-rows) with 16 lanes, 4 with fewer)">,
    Option<"parallel", "parallel", "bool", /*default=*/"false",
           "The forall will run in parallel: scratch buffers per iteration "
           "(scf-forall-to-parallel and convert-scf-to-openmp make each "
           "iteration an alloca scope) instead of one set before the loop">,
    Option<"requireKernelForm", "require-kernel-form", "bool",
           /*default=*/"false",
           "Fail on an fa.attention that is not in kernel form instead of "
           "leaving it">,
    Option<"decodeTiles", "decode-tiles", "bool", /*default=*/"true",
           "Decode kernels: when Nq x Hq/Hkv rows fit one decode tile "
           "(lcm(vector-width, pv-rows) rows), a kernel whose query tile "
           "packs the query heads sharing a kv head (chosen at run time "
           "when Nq is dynamic)">,
    Option<"kvSplits", "kv-splits", "int64_t", /*default=*/"0",
           "Split-KV for the decode kernels: the key range of each (batch, "
           "kv head) in this many parts, combined by fa.merge (0: chosen "
           "at run time with parallel, from the OpenMP threads and the "
           "parallel work; 1: no split)">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 inputs: S and P V through AVX512_BF16 dot products "
           "(x86vector.avx512.dot, vdpbf16ps) on bf16 pairs, P rounded to "
           "bf16 (the target must have avx512bf16; needs vector-width 16, "
           "an even D and query tiles of one head)">,
  ];
  let dependentDialects = [
    "::mlir::x86vector::X86VectorDialect",
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
    "::mlir::bufferization::BufferizationDialect"
  ];
}

def FACpuAttentionBackwardPass : Pass<"fa-cpu-attention-backward"> {
  let summary = "Lower kernel-form fa.attention_backward to a vectorized CPU "
                "kernel";
  let description = [{
    Rewrites each `fa.attention_backward` in kernel form (operands read from
    memrefs through `bufferization.to_tensor`, results materialized into
    memrefs) into memref-level loops on `vector<Wxf32>` values (W =
    `vector-width`), FlashAttention 2's algorithm with the loops of
    `fa-tile-attention-backward` (its description has the formulas):

    * an `scf.forall` over (batch, kv head); a task owns the dK / dV rows
      of its kv head (the outputs themselves for f32, else f32 accumulators
      rounded at the end) and the dQ rows of its group's query heads, so
      the result does not depend on the number of threads;
    * per query head of the group and query tile of `block-q` rows, Q and
      dO are packed transposed (one query per lane; lanes past the rows are
      0, their LSE -inf so that P = 0), with Delta = rowsum(dO * O) and the
      LSE per lane;
    * per key tile of `block-kv` keys that the forward visited for the
      query tile (the forward's key range: key lengths, causality, window,
      chunk), S^T and (dP - Delta)^T by a broadcast micro-kernel (rows of
      keys x the query vectors, accumulators as `scf.for` iter_args),
      then per lane the forward's scores (AttentionSemantics: positional
      rules, softcap, ALiBi), P = exp(S - LSE) guarded for LSE = -inf,
      dS = P (dP - Delta) scale (x the softcap's derivative), exactly 0
      where P = 0;
    * dV += P^T dO, dK += dS^T Q (rows of keys) and dQ += dS K (rows of
      queries) by outer-product micro-kernels: a block of rows x up to 4
      vectors of the head dim, each step broadcasting one P / dS element
      and doing `vector.fma` with a row of dO, Q or K; where keys inside
      the range can be removed, dQ reads K from a copy whose non-finite
      values are 0 (a removed key's dS is 0);
    * `exp` and `tanh` on vectors as polynomials (no libm calls).

    A mask (boolean or additive, broadcast dims included) is packed per
    (query tile, key tile) transposed, one query per lane; segment ids of
    the query tile per lane, of each key as a scalar. Ops whose head dims
    are not multiples of W, or whose operands are not in kernel form, are
    left for `fa-tile-attention-backward`.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"16",
           "f32 lanes per vector (16: AVX-512, 8: AVX2)">,
    Option<"blockQ", "block-q", "int64_t", /*default=*/"64",
           "Query rows per tile (a multiple of vector-width)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"64",
           "Keys per key tile">,
    Option<"parallel", "parallel", "bool", /*default=*/"false",
           "Scratch buffers per task (the tasks run on OpenMP threads)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
}

//===----------------------------------------------------------------------===//
// GPU, SIMT
//===----------------------------------------------------------------------===//

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
      folded into the scale;
    * the score/mask modifiers from `AttentionSemantics`: the key loop from
      the tile holding the window's left bound or the chunk's start of the
      block's first row (`visitedKeyBegin`) to `visitedKeyEnd`; softcap
      (tanh as a rational approximation on the lane vectors) and ALiBi
      (the head's slope) through `modifyScore`; the window, the chunk and
      segment ids (the key lanes' ids gathered) in each key lane's keep
      predicate; q_offset in the diagonal offset.

    Consecutive thread- and warp-level foralls are separated by barriers
    once mapped (`fa-map-to-gpu`); run sequentially on the CPU the IR is
    already a correct kernel, which is how the promotion's arithmetic is
    tested without a GPU. Head dims must be multiples of 8 up to 256.

    Serving forms (docs/serving.md): with a `block_table` (paged K/V
    `[P, S, Hkv, D]`) the cooperative K/V copies read each key's row from
    its page (`AttentionSemantics::pagedKeyRow`, the entry clamped into the
    cache) and causality aligns to the sequence's length; with
    `cu_seqlens` (token-major `[T, H, D]` tensors) the grid is (tiles of
    Tq, Hq, B), a block loads its sequence from the offsets, skips tiles
    past its rows, and addresses Q, K, V, O and LSE `[Hq, Tq]` token-major.

    With packed query heads (`pack-gqa`; FlashAttention 3's pack_gqa),
    the grid is (tiles of Nq x G packed rows, Hkv, batch) with G = Hq /
    Hkv: row r of a block's sequence is query r / G of head
    kvHead * G + r % G (`AttentionSemantics::unpackGqaRow`, the CPU decode
    kernel's rule), so each K/V tile is read once per kv head instead of
    once per query head; the key range is that of the queries the tile
    holds; masks, ALiBi and the modifier regions read each row's head.
    `fa.gpu_config` then holds the unit entry `pack_gqa`.

    With `split-kv` (split-KV, flash-decoding), the function gets two
    workspace arguments appended (argument attribute `fa.workspace`):
    partial O `[S, B, Hq, Nq, Dv]` and partial LSE `[S, B, Hq, Nq]`, f32,
    where S, the number of parts, is the workspace's first dim at run time
    (the caller's choice). The grid's x runs over (query tile, part): a
    block computes its rows over its part of the visited key tiles
    (`ceil(tiles / S)` consecutive tiles; parts past the last tile hold
    no key) and writes a partial (O, LSE) for every row it holds, LSE
    -inf where the part has no key. A second block forall, the merge
    kernel of `fa-gpu-merge` (attributes `fa.threads` and
    `fa.kernel_suffix = "_merge"`, so that `fa-map-to-gpu` makes it the
    kernel `<function>_merge`), combines the parts into O and LSE with
    the `fa.merge` rule. `fa.gpu_config` holds the unit entry `split_kv`.
    Not with `cu_seqlens`.

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
    Option<"packGqa", "pack-gqa", "std::string", /*default=*/"\"auto\"",
           "Pack the Hq/Hkv query heads of a kv head into the query tiles "
           "(decode): auto (when Nq is static and packing reads fewer K/V "
           "tiles), always or never">,
    Option<"splitKv", "split-kv", "bool", /*default=*/"false",
           "Split-KV: append the workspace arguments (partial O and LSE, "
           "their first dim the number of parts) and merge the parts in a "
           "second kernel">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::gpu::GPUDialect"
  ];
}

def FAPromoteSharedBackwardPass
    : Pass<"fa-promote-shared-backward", "::mlir::func::FuncOp"> {
  let summary = "Lower fa.attention_backward to the two promoted SIMT "
                "backward kernels (dQ; dK and dV)";
  let description = [{
    The GPU path's backward pass (FlashAttention 2's, without atomics, so
    the gradients are deterministic). Applies to a kernel function holding
    one `fa.attention_backward` in the kernel form (memref arguments read
    through `bufferization.to_tensor`, results materialized into memrefs);
    the function body becomes two block-level `scf.forall`s, which
    `fa-map-to-gpu` turns into two kernels of one `gpu.module`:

    * **dQ** (the function's name): a block per (query tile, query head,
      batch). The Q and dO tiles, the rows' LSE (log2 domain) and Delta =
      rowsum(dO * O) and an f32 dQ accumulator live in workgroup memory.
      For each key tile the forward visited (its key range: key lengths,
      causality, window, chunk) the K and V tiles are copied in (rows
      padded by one word), and each warp computes for its query rows,
      lanes over keys, S = Q K^T and dP = dO V^T as lane-parallel dot
      products, the forward's scores (`AttentionSemantics`: positional
      rules, softcap, ALiBi, mask, segment ids), P = exp2(S - LSE) guarded
      for LSE = -inf (`guardedProbability`), dS = P (dP - Delta) scale
      (times the softcap's derivative `scoreDerivative`), exactly 0 where
      P = 0, and dQ += dS K with each key's dS broadcast from its lane.
    * **dK / dV** (`<function>_dkdv`): a block per (key tile, kv head,
      batch) keeps the K and V tiles and f32 dK / dV accumulators in
      workgroup memory and walks the query tiles of every query head of
      its group whose forward key range meets the tile: the Q and dO
      tiles are copied in, P and dS of the tile pair are computed as above
      into workgroup memory, then each warp adds dV += P^T dO and
      dK += dS^T Q for its keys, lanes over the head dim. Key tiles at or
      past the key length only write zeros.

    Rows and keys past the sequence ends are zero-filled in the tiles and
    never stored. Tile sizes (`block-q` query rows, `block-kv` keys, at
    most 32) are chosen, when 0, so that both kernels fit `shared-budget`
    bytes of static workgroup memory; `fa.gpu_config` records them with
    the unit entry `backward`. Head dims must be multiples of 8; D = 256
    fits the default budget with small tiles (f16: 16 x 8, f32: 4 x 8).
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"0",
           "Query rows per tile (0: choose from the shared-memory budget)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"0",
           "Keys per tile, at most 32 (0: choose from the shared-memory "
           "budget)">,
    Option<"numWarps", "warps", "int64_t", /*default=*/"4",
           "Warps per block">,
    Option<"sharedBudget", "shared-budget", "int64_t", /*default=*/"49152",
           "Bytes of workgroup memory each kernel may use">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::gpu::GPUDialect"
  ];
}

def FAGpuMergePass : Pass<"fa-gpu-merge", "::mlir::func::FuncOp"> {
  let summary = "Lower fa.merge in the kernel form to the promoted GPU form";
  let description = [{
    The GPU kernel of `fa.merge` (split-KV, cascade attention, context
    parallelism; docs/merge.md). Applies to a kernel function whose memref
    arguments feed one `fa.merge` through `bufferization.to_tensor` and
    receive its results through `bufferization.materialize_in_destination`.
    The body becomes the form `fa-map-to-gpu` maps:

    * an `scf.forall` over (row blocks, 1, 1) mapped to `#gpu.block<x|y|z>`,
      a row being one position `d...` of the `[d...]` rows (flattened,
      row-major);
    * in it, a warp-level `scf.forall` (`#gpu.warp<x>`): warp `w` merges
      row `block * warps + w`. Its lanes hold the Dv columns `lane + 32 j`
      (`vector<32xf32>` lane vectors); a loop over the S partials takes
      their maximum LSE, a second one sums each partial's weight and its
      weighted O row (read with `vector.gather`), skipping empty partials;
      O and LSE are stored with guarded `vector.scatter`.

    The rule (weights, empty partials, the all-empty row) is
    `AttentionSemantics::mergeWeight` / `mergedOutput` / `mergedLse`, the
    same as `fa-lower-merge`'s, with exp and log taken in base 2 (`exp2`,
    `log2`: `ex2.approx` and `lg2.approx` once mapped, no libdevice). No
    workgroup memory and no barrier is needed: each warp reads and writes
    its own row. Dv must be static; the rows `d...` at least one dim.
  }];
  let options = [
    Option<"numWarps", "warps", "int64_t", /*default=*/"4",
           "Warps per block (one row each)">,
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

//===----------------------------------------------------------------------===//
// GPU, NVIDIA tensor cores
//===----------------------------------------------------------------------===//

def FAMapToTensorCoresPass : Pass<"fa-map-to-tensor-cores", "::mlir::ModuleOp"> {
  let summary = "Map f16/bf16 attention kernels onto mma.sync tensor cores";
  let description = [{
    Turns each eligible kernel function (the form `fa-promote-shared`
    accepts) directly into a `gpu.func` kernel in a new `gpu.module`
    (`<function>_kernels`), launched like the kernels of `fa-map-to-gpu`:
    grid (ceil(Nq / block_q), Hq, B), the function's memref arguments as the
    kernel parameters in order, and `fa.gpu_config` on the function
    (block_q, block_kv, threads, stages, dynamic_shared_bytes,
    tensor_cores). The kernel has the FlashAttention-2 structure, fully
    unrolled over mma fragments:

    * `block-q / 16` warps, each owning 16 query rows;
    * Q, `stages` K tiles and `stages` V tiles in one dynamic workgroup
      buffer (`gpu.dynamic_shared_memory` + `memref.view`, its size on the
      launch), rows padded by 16 bytes against bank conflicts;
    * a `stages`-deep `cp.async` pipeline (`nvgpu.device_async_copy`, one
      group per K/V tile, rows past the sequence end zero-filled through
      `srcElements`);
    * S = Q K^T and O += P V as `nvgpu.mma.sync` m16n8k16 (f32
      accumulation) fed by `nvgpu.ldmatrix` (V transposed); P is reused
      from registers as the A operand;
    * the online softmax on the accumulator layout: row max over the quad
      with `gpu.shuffle xor` 1 and 2, per-lane row sums reduced after the
      loop, `exp2` with log2(e) folded into the scale, the m = -inf guard;
    * key lengths and causality bound the KV loop; only the tile holding
      kv_end and the tiles crossing the causal diagonal are masked; boolean
      and additive masks are read per fragment element;
    * the score/mask modifiers from `AttentionSemantics` (shared with
      `fa-map-to-wgmma`): the KV loop starts at the tile holding the
      window's left bound or the chunk's start of the block's first row
      (`visitedKeyBegin`) and ends at `visitedKeyEnd`; softcap (tanh as a
      rational approximation) and ALiBi (the head's slope, loaded once) on
      every score through `modifyScore`, in the log2 domain; the window,
      the chunk and segment ids in the element masks (`keepKey`,
      `applySegments`) of the tiles `tileNeedsElementMask` says are not
      full for the warp's 16 rows (with segment ids: every tile); q_offset
      in the diagonal offset; the (q, k) of each accumulator element from
      the fragment layout;
    * a paged K/V cache (`block_table`): each K/V row's copy reads the row
      from its page (`AttentionSemantics::pagedKeyRow`, the entry clamped
      into the cache); Nk = M x S and causality aligned to each sequence's
      length, as on every path;
    * the token-major varlen form (`cu_seqlens`): grid (ceil(Tq / block_q),
      Hq, B); a block loads its sequence (`AttentionSemantics::loadSequence`:
      its Nq, Nk and first tokens), visits nothing past its rows, copies
      Q/K/V rows from the sequence's first token and stores O [Tq, Hq, Dv]
      and LSE [Hq, Tq] there;
    * O (in the op's element type) and LSE stored from the fragments; empty
      rows give O = 0 and LSE = -inf.

    With `split-kv` (flash-decoding), as `fa-promote-shared split-kv`: the
    function gets the workspace arguments partial O `[S, B, Hq, Nq, Dv]`
    and partial LSE `[S, B, Hq, Nq]` (f32, argument attribute
    `fa.workspace`; S, the number of parts, is their first dim at run
    time); the grid's x runs over (query tile, part), the part fastest; a
    block computes its rows over its part of the visited key tiles
    (`ceil(tiles / S)` consecutive tiles, its copies reading nothing past
    the last) and stores O / l in f32 and the LSE of the part (-inf where
    it has no key) into the workspace; after the launch, the merge's block
    forall (fa.merge's kernel, 4 warps, one row each) combines the parts
    into O and LSE, and `fa-map-to-gpu` outlines it as `<function>_merge`
    into the same `gpu.module`. `fa.gpu_config` gets the unit entry
    `split_kv`. Not with the varlen form (an error).

    With `pack-gqa` (FlashAttention 3's pack_gqa, for decode; `auto` packs
    when Nq is static and packing reads fewer K/V tiles, as in
    `fa-promote-shared`), the G = Hq / Hkv query heads of a kv head share
    the query tiles: the grid is (ceil(Nq G / block_q), Hkv, B), a block's
    row p is query p / G of head kvHead G + p % G
    (`AttentionSemantics::unpackGqaRow`), so each K/V tile is read once per
    group; its Q rows are copied from their heads, every mask, modifier
    and output reads its row's head and query (ALiBi slopes per row; the
    key range from the queries the block's rows hold), the block mask is
    not used. `fa.gpu_config` gets the unit entry `pack_gqa`. Not with
    the varlen form (`always` is an error there; `auto` does not pack).

    Eligible: f16 or bf16 Q/K/V, head dims D and Dv multiples of 16 up to
    256, every `fa.attention` feature. Other kernel functions are left
    untouched for the SIMT path.
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"64",
           "Query rows per block (16 per warp, up to 128)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"0",
           "Keys per K/V tile, a multiple of 16 (0: 64, or 32 for head dims "
           "above 128)">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "K/V tiles in the cp.async pipeline (2 to 4)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_80\"",
           "The chip the kernels are for: their workgroup memory must fit "
           "what one block of it may opt in to (99 KiB on sm_86/sm_89)">,
    Option<"splitKv", "split-kv", "bool", /*default=*/"false",
           "Split-KV: append the workspace arguments (partial O and LSE, "
           "their first dim the number of parts), write f32 partials per "
           "part of the key tiles and merge them in a second kernel">,
    Option<"packGqa", "pack-gqa", "std::string", /*default=*/"\"auto\"",
           "Pack the query heads of a kv head into the query tiles "
           "(decode): auto (when Nq is static and packing reads fewer K/V "
           "tiles), always or never">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

def FAMapToWgmmaPass : Pass<"fa-map-to-wgmma", "::mlir::ModuleOp"> {
  let summary = "Map f16/bf16 attention kernels onto sm_90a wgmma tensor "
                "cores (FlashAttention-3 style)";
  let description = [{
    Turns each eligible kernel function (the form `fa-promote-shared`
    accepts) into a `gpu.func` kernel in a new `gpu.module`
    (`<function>_kernels`) for Hopper warpgroup tensor cores, launched like
    the kernels of `fa-map-to-tensor-cores`: grid (ceil(Nq / block_q), Hq,
    B) with block_q = 64 x `warpgroups`, 128 threads per warpgroup, and
    `fa.gpu_config` on the function (block_q, block_kv, threads, stages,
    warpgroups, dynamic_shared_bytes, wgmma). The kernel:

    * keeps Q, `stages` K and V tiles and one P tile per warpgroup in one
      dynamic workgroup buffer aligned to 1024 bytes at run time
      (`memref.extract_aligned_pointer_as_index`), in the 128-byte-swizzled
      layout of wgmma (64-column regions, 1024-byte atoms of 8 rows);
    * fills them with a `stages`-deep `cp.async` pipeline writing the
      swizzled positions, rows past the sequence ends zero-filled, then
      `nvvm.fence.proxy` (async.shared, cta) and a barrier;
    * computes S = Q K^T with `nvvm.wgmma.mma_async` m64n<block_kv>k16 from
      shared-memory descriptors (K-major A and B), the f32 accumulator an
      `!llvm.struct`;
    * runs the online softmax on the struct elements (rows lane/4 and
      lane/4 + 8 of each warp's 16, quad shuffles, exp2 with log2(e) folded
      into the scale, the m = -inf guard, masks only on the tiles that need
      them, causally excluded tiles skipped; the score/mask modifiers as in
      `fa-map-to-tensor-cores`);
    * writes P (f16/bf16) to a swizzled K-major tile, fences, and computes
      O = alpha O + P V with wgmma m64n<Dv>k16 (V MN-major);
    * keeps NaN/inf in the V rows of masked keys out of the rows that do
      not attend them (tiles that mask keys below kv_end test their V
      block-uniformly; when set, the non-finite elements are added to the
      attending rows and zeroed in the tile before the wgmma);
    * stores O / l and LSE, empty rows giving O = 0 and LSE = -inf.

    With `split-kv`, the split-KV form of `fa-map-to-tensor-cores`
    (workspace arguments, f32 partials per part of the key tiles, the
    merge kernel).

    The result needs chip sm_90a (`fa-lower-to-nvvm{chip=sm_90a}`, whose
    kernel=auto runs this pass first there, or kernel=wgmma).
    Eligible: f16 or bf16 Q/K/V, head dims D and Dv multiples of 64 up to
    256 (Dv up to 192 with a user mask: register budget), every
    `fa.attention` feature (paged caches and the varlen form as in
    `fa-map-to-tensor-cores`). Other kernel functions are left untouched
    for `fa-map-to-tensor-cores` or the SIMT path.
  }];
  let options = [
    Option<"warpgroups", "warpgroups", "int64_t", /*default=*/"1",
           "Consumer warpgroups per block (1 or 2), 64 query rows each">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"64",
           "Keys per K/V tile (64 or 128)">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "K/V tiles in the cp.async pipeline (2 to 4)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The chip the kernels are for: their workgroup memory must fit "
           "what one block of it may opt in to">,
    Option<"splitKv", "split-kv", "bool", /*default=*/"false",
           "Split-KV, as in fa-map-to-tensor-cores">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

def FAMapToTensorCoresBackwardPass
    : Pass<"fa-map-to-tensor-cores-backward", "::mlir::ModuleOp"> {
  let summary = "Map f16/bf16 attention_backward kernels onto mma.sync "
                "tensor cores (dQ; dK and dV)";
  let description = [{
    FlashAttention 2's backward pass on `nvgpu.mma.sync` m16n8k16 (f32
    accumulation), without atomics, so the gradients are deterministic.
    Turns each kernel function holding one eligible `fa.attention_backward`
    in the kernel form (the form `fa-promote-shared-backward` accepts, every
    memref a function argument) into two `gpu.func` kernels of a new
    `gpu.module` (`<function>_kernels`) launched one after the other with
    the function's memref arguments as their parameters, 128 threads each:

    * **dQ** (the function's name), grid (ceil(Nq / 64), Hq, B): warp w
      owns the 16 query rows 16 w ... of its block's 64. Q and dO stay in
      workgroup memory; for each K/V tile of the forward's key range
      (`visitedTileBegin` .. `visitedKeyEnd`) the tiles are copied in with
      `cp.async` (rows past the end zero-filled), S = Q K^T and
      dP = dO V^T are accumulated from `nvgpu.ldmatrix` fragments, P =
      exp2(S - LSE) (guarded for LSE = -inf) and dS = P (dP - Delta) (times
      the softcap's derivative) are computed per fragment element with the
      forward's rules (`AttentionSemantics`: key lengths, causality, the
      window, the chunk, segment ids, the user mask, softcap and ALiBi),
      exactly 0 where P = 0, and dQ += dS K reuses dS from registers as
      the A operand (K through a transposed ldmatrix). Delta =
      rowsum(dO * O) comes from the 4 lanes of each row's quad.
    * **dK / dV** (`<function>_dkdv`), grid (ceil(Nk / 64), Hkv, B): warp w
      owns the keys 16 w ... of its block's 64, whose K and V tiles stay
      in workgroup memory. For each query head of the group and each query
      tile whose forward key range meets the key tile, the Q and dO tiles
      are copied in with their rows' LSE and Delta, S^T = K Q^T and
      dP^T = V dO^T are accumulated, P^T and dS^T computed as above, and
      dV += P^T dO, dK += dS^T Q. Key tiles at or past the key length
      write zeros.

    The inner tiles (the dQ kernel's keys, the dK/dV kernel's query rows)
    are 32 for head dims up to 64 and 16 above, so that each kernel's
    static workgroup memory stays within 48 KiB. A removed key's NaN or
    inf in K or V never reaches a gradient (its dS is 0, and the dQ
    kernel clears non-finite K elements once S is taken when keys below
    the key length can be removed). `fa.gpu_config` records block_q = 64,
    block_kv = 64, threads = 128 and the unit entries `backward` and
    `tensor_cores`.

    Eligible: f16 or bf16 Q, K, V and dO, head dims D and Dv multiples of
    16 up to 128. Other functions are left to `fa-promote-shared-backward`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

def FALegalizeMmaBF16Pass : Pass<"fa-legalize-mma-bf16", "::mlir::ModuleOp"> {
  let summary = "Rewrite bf16 nvgpu.mma.sync into nvvm.mma.sync for NVVM";
  let description = [{
    The upstream NVGPU-to-NVVM conversion cannot lower `nvgpu.mma.sync` with
    bf16 operands ("failed to deduce operand PTX types"): PTX takes bf16
    fragments as packed 32-bit registers. This pass, run right before the
    NVVM code generation, rewrites each such m16n8k16 op into
    `nvvm.mma.sync` on `i32` operands (each `vector<2xbf16>` row bitcast to
    one `i32`) with explicit bf16 multiplicand types, row/col layouts and f32
    accumulators. Other ops are left alone. The kernels the interpreter runs
    (before this pass) keep `nvgpu.mma.sync`.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def FAExternDynamicSharedPass
    : Pass<"fa-extern-dynamic-shared", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Declare dynamic shared memory as an extern PTX array";
  let description = [{
    Upstream's `gpu.dynamic_shared_memory` lowering defines an internal
    zero-size global in address space 3 (`__dynamic_shmem__N`), which the
    NVPTX backend prints as `.shared .align 16 .b8 __dynamic_shmem__0;`: a
    one-byte static shared variable. ptxas then counts one byte of static
    shared memory that the kernel metadata does not report, and a kernel
    that asks for exactly the chip's opt-in maximum of dynamic shared memory
    fails `cuFuncSetAttribute` at load. This pass, run on the GPU module
    once it is in the LLVM dialect (inside `fa-lower-to-nvvm`, right before
    serialization), turns each such global into an external declaration,
    which NVPTX prints as `.extern .shared .align 16 .b8 name[];`: no static
    bytes. Other globals are left alone.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // FA_CODEGEN_PASSES_TD
