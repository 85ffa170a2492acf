/*===- FARuntime.h - C API of the fa kernel launcher --------------*- C -*-===*\
|*                                                                            *|
|* Part of the fa project, under the Apache License v2.0 with LLVM           *|
|* Exceptions.                                                                *|
|* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
/*
 * Loads the ahead-of-time artifacts `fa-compile` writes (a `fa-kernel/3`
 * JSON metadata file plus PTX/cubin or a CPU shared library, see
 * docs/artifacts.md) and launches them:
 *
 *   fa_kernel *kernel;
 *   if (fa_kernel_load("out/attn.json", FA_DEVICE_CUDA, &kernel) != FA_SUCCESS)
 *     fprintf(stderr, "%s\n", fa_last_error());
 *   fa_tensor q = fa_tensor_make(dq, FA_DTYPE_F16, 4, (int64_t[]){B, 8, N, 64});
 *   ...
 *   fa_attention_launch(kernel, &q, &k, &v, NULL, NULL, &o, &lse, stream);
 *   fa_kernel_destroy(kernel);
 *
 * The CUDA backend opens the driver (`libcuda.so.1`, or the path in the
 * environment variable FA_CUDA_DRIVER) with dlopen at run time, so the
 * library builds and runs on machines without CUDA; every driver result is
 * checked. The CPU backend dlopens the artifact's shared library.
 *
 * Errors: every function returns an `fa_status`; after a failure
 * `fa_last_error()` gives a one-line message naming the parameter, the
 * dims, the file or the driver call. Bad input never aborts the process.
 *
 * Threads: the last-error message is per thread. A loaded kernel may be
 * launched from several threads at once; loading and destroying are not
 * synchronised with launches of the same kernel.
 *
 * Pure C (C99); usable from C++ (`extern "C"`). The library itself needs
 * only the C++17 standard library and libdl (no LLVM): lib/Runtime builds
 * on its own with CMake (`cmake -S lib/Runtime -B build-rt`).
 */

#ifndef FA_RUNTIME_FARUNTIME_H
#define FA_RUNTIME_FARUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define FA_RUNTIME_API __attribute__((visibility("default")))
#else
#define FA_RUNTIME_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Status codes
 *===----------------------------------------------------------------------===*/

typedef enum fa_status {
  FA_SUCCESS = 0,
  /* The CUDA driver library could not be opened or lacks an entry point. */
  FA_ERROR_NO_DRIVER = 1,
  /* The driver found no CUDA device. */
  FA_ERROR_NO_DEVICE = 2,
  /* The device (compute capability, shared memory) or the host CPU cannot
   * run the artifact's target. */
  FA_ERROR_UNSUPPORTED_ARCH = 3,
  /* The artifact's PTX ISA is newer than the installed driver supports. */
  FA_ERROR_PTX_TOO_NEW = 4,
  /* The metadata, the PTX or the library is malformed or inconsistent. */
  FA_ERROR_INVALID_ARTIFACT = 5,
  /* A tensor or other argument does not match the kernel. */
  FA_ERROR_INVALID_ARGUMENT = 6,
  /* A file could not be read. */
  FA_ERROR_IO = 7,
  /* A CUDA driver call failed (the message names the call and the error). */
  FA_ERROR_CUDA = 8,
  /* cuLaunchKernel (or the CPU entry point lookup) failed. */
  FA_ERROR_LAUNCH = 9
} fa_status;

/* Where a kernel runs. A kernel's metadata fixes its target; asking for the
 * other device is an FA_ERROR_INVALID_ARGUMENT. */
typedef enum fa_device { FA_DEVICE_CPU = 0, FA_DEVICE_CUDA = 1 } fa_device;

/* Element types of tensors. FA_DTYPE_BOOL and FA_DTYPE_I8 both mean one byte
 * per element (a boolean mask: nonzero = attend). f16 and bf16 elements are
 * passed as their 16-bit patterns. */
typedef enum fa_dtype {
  FA_DTYPE_F32 = 0,
  FA_DTYPE_F16 = 1,
  FA_DTYPE_BF16 = 2,
  FA_DTYPE_I32 = 3,
  FA_DTYPE_I8 = 4,
  FA_DTYPE_BOOL = 5
} fa_dtype;

typedef enum fa_op {
  FA_OP_ATTENTION = 0,
  FA_OP_SOFTMAX = 1,
  /* The backward op (fa.attention_backward): fa_attention_backward_launch */
  FA_OP_ATTENTION_BACKWARD = 2
} fa_op;

typedef enum fa_causal {
  FA_CAUSAL_NONE = 0,
  FA_CAUSAL_TOP_LEFT = 1,    /* key k is kept when k <= q */
  FA_CAUSAL_BOTTOM_RIGHT = 2 /* key k is kept when k <= q + Nk - Nq */
} fa_causal;

typedef enum fa_mask_kind {
  FA_MASK_NONE = 0,
  FA_MASK_BOOL = 1,    /* one byte per element, nonzero = attend */
  FA_MASK_ADDITIVE = 2 /* added to the scaled score */
} fa_mask_kind;

/*===----------------------------------------------------------------------===*
 * Tensors
 *===----------------------------------------------------------------------===*/

#define FA_MAX_RANK 4

/* A view of a tensor in the memory of the kernel's device (host memory for
 * CPU kernels, device memory for CUDA kernels). `dtype` is an fa_dtype.
 * `strides` are in elements. Kernels take contiguous row-major tensors:
 * strides[rank-1] == 1 and strides[i] == strides[i+1] * sizes[i+1]; the
 * stride of a dimension of size 1 is ignored. Other strides are rejected. */
typedef struct fa_tensor {
  void *data;
  int32_t dtype;
  int32_t rank;
  int64_t sizes[FA_MAX_RANK];
  int64_t strides[FA_MAX_RANK];
} fa_tensor;

/* A contiguous row-major tensor of `rank` (<= FA_MAX_RANK) `sizes`.
 * Unused entries are zero. */
FA_RUNTIME_API fa_tensor fa_tensor_make(void *data, fa_dtype dtype,
                                        int32_t rank, const int64_t *sizes);

/*===----------------------------------------------------------------------===*
 * Kernels
 *===----------------------------------------------------------------------===*/

typedef struct fa_kernel fa_kernel;

/* What a loaded kernel was compiled for (from its metadata). The strings
 * live as long as the kernel. */
typedef struct fa_kernel_info {
  const char *name;   /* artifact name */
  const char *symbol; /* kernel entry (CUDA) or C entry without the
                         `_mlir_ciface_` prefix (CPU) */
  const char *target; /* "sm_80", "sm_90a", ... or the CPU triple */
  fa_op op;
  fa_device device;
  fa_dtype dtype;
  /* Attention only (zero for softmax). */
  int32_t head_dim;       /* D */
  int32_t value_head_dim; /* Dv */
  int32_t heads;          /* Hq */
  int32_t kv_heads;       /* Hkv */
  fa_causal causal;
  fa_mask_kind mask;
  int32_t has_kv_lens;
  int32_t has_lse;
  float scale; /* the scale applied to Q K^T */
  int32_t block_q;
  int32_t block_kv;
  /* Softmax only (zero for attention). */
  int32_t rank;
  int32_t dimension;
} fa_kernel_info;

/* The score/mask modifiers an attention kernel was compiled with (its
 * metadata's `window`, `softcap`, `chunk`, `alibi`, `has_segments`; the
 * op description of fa.attention defines them, FlashAttention 2's
 * definitions). All zero / -1 for a kernel without them. */
typedef struct fa_attention_modifiers {
  int64_t window_left;  /* keys q + off - window_left <= k; -1: unbounded */
  int64_t window_right; /* k <= q + off + window_right; -1: unbounded */
  double softcap;       /* s = softcap * tanh(s / softcap); 0: none */
  int64_t chunk;        /* keys in the query's chunk only; 0: none */
  int32_t alibi;        /* 0: none, 1: slopes [Hq], 2: slopes [B, Hq] */
  int32_t has_segments; /* query and key segment ids [B, Nq], [B, Nk] */
} fa_attention_modifiers;

/* The modifiers of an attention kernel (all none for softmax kernels). */
FA_RUNTIME_API fa_status
fa_kernel_get_modifiers(const fa_kernel *kernel, fa_attention_modifiers *mods);

/* The modifier operands of fa_attention_launch_ex, each given iff the
 * kernel was compiled with it (fa_kernel_get_modifiers), else NULL. */
typedef struct fa_attention_extras {
  const fa_tensor *alibi;      /* f32 [Hq] or [B, Hq]: ALiBi slopes */
  const fa_tensor *q_segments; /* i32 [B, Nq]: query segment ids */
  const fa_tensor *k_segments; /* i32 [B, Nk]: key segment ids */
} fa_attention_extras;

/* General score_mod / mask_mod regions (fa.attention's, compiled into the
 * kernel by fa-compile from an input .mlir) and the number of tensors they
 * read (the kernel's mod operands, passed to fa_attention_launch_mods in
 * the op's mod_operands order; fixed shapes, f32 or i32). */
typedef struct fa_attention_regions {
  int32_t has_score_mod;
  int32_t has_mask_mod;
  int64_t num_mod_operands;
} fa_attention_regions;

/* The regions of an attention kernel (all zero for other kernels). */
FA_RUNTIME_API fa_status fa_kernel_get_regions(const fa_kernel *kernel,
                                               fa_attention_regions *regions);

/* The tiles (*tq query rows, *tk keys) of the block mask an attention
 * kernel with a mask_mod takes (fa.attention's block_tiles; build it with
 * fa_block_mask_build and pass it to fa_attention_launch_sparse), or 0 and
 * 0 for a kernel without one. */
FA_RUNTIME_API fa_status fa_kernel_get_block_tiles(const fa_kernel *kernel,
                                                   int64_t *tq, int64_t *tk);

/* The name of a status ("FA_ERROR_NO_DRIVER"); never NULL. */
FA_RUNTIME_API const char *fa_status_name(fa_status status);

/* The message of the last failed call on this thread, "" after a call that
 * succeeded. Valid until the next fa_* call on this thread. */
FA_RUNTIME_API const char *fa_last_error(void);

/* Opens the CUDA driver and counts devices. FA_SUCCESS with *device_count
 * > 0, or FA_ERROR_NO_DRIVER / FA_ERROR_NO_DEVICE / FA_ERROR_CUDA with
 * *device_count = 0. `device_count` may be NULL. */
FA_RUNTIME_API fa_status fa_cuda_available(int *device_count);

/* The chip of the CUDA device kernels load on (the calling thread's current
 * context's device, else device 0) as "sm_<major><minor>" (e.g. "sm_90"),
 * written NUL-terminated into `buf` of `n` bytes. FA_ERROR_NO_DRIVER /
 * FA_ERROR_NO_DEVICE / FA_ERROR_CUDA like fa_cuda_available;
 * FA_ERROR_INVALID_ARGUMENT when `buf` is NULL or too small (8 bytes are
 * always enough). */
FA_RUNTIME_API fa_status fa_cuda_device_chip(char *buf, size_t n);

/*===----------------------------------------------------------------------===*
 * CUDA memory helpers
 *
 * Small conveniences over the driver API (cuMemAlloc_v2, cuMemFree_v2,
 * cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuCtxSynchronize) for programs that
 * have no CUDA runtime of their own, such as fa-run: they work in the
 * calling thread's current context, or else in device 0's primary context,
 * which they retain (for the life of the process) and make current, the
 * context fa_kernel_load then uses. Programs that already manage device
 * memory (PyTorch, CuPy, the CUDA runtime) pass their own device pointers
 * to the launches instead.
 *===----------------------------------------------------------------------===*/

/* Allocates `bytes` of device memory (at least 256-byte aligned) into *ptr;
 * *ptr is NULL on failure and for bytes == 0. */
FA_RUNTIME_API fa_status fa_cuda_malloc(void **ptr, size_t bytes);

/* Frees memory from fa_cuda_malloc; NULL is a no-op. */
FA_RUNTIME_API fa_status fa_cuda_free(void *ptr);

/* Synchronous copies between host and device memory. */
FA_RUNTIME_API fa_status fa_cuda_memcpy_htod(void *dst_device,
                                             const void *src_host,
                                             size_t bytes);
FA_RUNTIME_API fa_status fa_cuda_memcpy_dtoh(void *dst_host,
                                             const void *src_device,
                                             size_t bytes);

/* Waits for all work in the context (cuCtxSynchronize); an asynchronous
 * kernel failure (e.g. an illegal address) is reported here as
 * FA_ERROR_CUDA naming the error. */
FA_RUNTIME_API fa_status fa_cuda_synchronize(void);

/* Loads the artifact described by the JSON metadata at `metadata_path`
 * (its file names are relative to the metadata's directory) for `device`.
 *
 * Everything is checked before the kernel is handed out: the metadata
 * schema, the PTX (`.version`, `.target` matching the metadata's chip,
 * `.entry <symbol>`), the files, and for CUDA the device's compute
 * capability and shared memory limits. CUDA kernels load into the calling
 * thread's current context, or else into device 0's primary context (which
 * is then made current). The cubin is used when present and compatible with
 * the device, else the PTX is JIT-compiled by the driver. Kernels needing
 * more than 48 KiB of dynamic shared memory are opted in here.
 *
 * On failure *out is NULL. */
FA_RUNTIME_API fa_status fa_kernel_load(const char *metadata_path,
                                        fa_device device, fa_kernel **out);

/* Unloads the kernel (module, library, context reference). NULL is a
 * no-op. */
FA_RUNTIME_API void fa_kernel_destroy(fa_kernel *kernel);

FA_RUNTIME_API fa_status fa_kernel_get_info(const fa_kernel *kernel,
                                            fa_kernel_info *info);

/* Runs an attention kernel: O = softmax(scale * Q K^T + masks) V.
 *
 *   q       [B, Hq, Nq, D]    the kernel's dtype
 *   k       [B, Hkv, Nk, D]   the kernel's dtype
 *   v       [B, Hkv, Nk, Dv]  the kernel's dtype
 *   kv_lens [B] int32         iff the kernel has key lengths, else NULL
 *   mask    [B|1, Hq|1, Nq, Nk] iff the kernel has a mask, else NULL; the
 *           broadcast dims are those the kernel was compiled for
 *   o       [B, Hq, Nq, Dv]   the kernel's dtype (written)
 *   lse     [B, Hq, Nq] f32   iff the kernel has LSE, else NULL (written)
 *
 * Hq, Hkv, D and Dv must equal the kernel's; B, Nq and Nk are free. Outputs
 * must not overlap inputs. `cuda_stream` is the CUstream to launch on (NULL
 * is the legacy default stream); it is ignored by CPU kernels. CUDA launches
 * are asynchronous: nothing is synchronised, copied or allocated here, so
 * launches can be captured in CUDA graphs. A launch with B == 0 or Nq == 0
 * does nothing and succeeds. */
FA_RUNTIME_API fa_status fa_attention_launch(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kv_lens, const fa_tensor *mask,
    fa_tensor *o, fa_tensor *lse, void *cuda_stream);

/* fa_attention_launch with the modifier operands of `extras` (NULL: none),
 * for kernels compiled with ALiBi slopes or segment ids (document masks).
 * A kernel that takes one refuses a launch without it, and one that does
 * not refuses it given. */
FA_RUNTIME_API fa_status fa_attention_launch_ex(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, fa_tensor *o, fa_tensor *lse,
    void *cuda_stream);

/* Runs an attention backward kernel (fa-compile --op attention-backward):
 * the gradients of the forward launch with the same options, from its saved
 * O and LSE (docs/backward.md).
 *
 *   q, k, v, kv_lens, mask, extras   as the forward's launch
 *   o       [B, Hq, Nq, Dv]   the kernel's dtype: the forward's output
 *   lse     [B, Hq, Nq] f32   the forward's log-sum-exp
 *   d_o     [B, Hq, Nq, Dv]   the kernel's dtype: the gradient of O
 *   d_q     [B, Hq, Nq, D]    the kernel's dtype (written)
 *   d_k     [B, Hkv, Nk, D]   the kernel's dtype (written; GQA sums the
 *                             query heads of a group)
 *   d_v     [B, Hkv, Nk, Dv]  the kernel's dtype (written)
 *
 * The kernel's options (causal, scale, mask kind, window, softcap, chunk,
 * ALiBi, segments) must be the forward's: fa_kernel_check_backward compares
 * two loaded kernels. Gradients must not overlap any other operand. Rows
 * with no attended key get zero gradients. A CUDA kernel launches its dQ
 * entry, then its dK/dV entry (launch.dkdv), on `cuda_stream`. A launch
 * where every gradient is empty does nothing and succeeds. */
FA_RUNTIME_API fa_status fa_attention_backward_launch(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *o, const fa_tensor *lse,
    const fa_tensor *d_o, const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, fa_tensor *d_q, fa_tensor *d_k,
    fa_tensor *d_v, void *cuda_stream);

/* Succeeds when `backward` (an attention_backward kernel) computes the
 * gradients of `forward` (an attention kernel with LSE): the same dtype,
 * head dims, heads, causal alignment, scale, mask kind and broadcast, key
 * lengths and modifiers. Otherwise FA_ERROR_INVALID_ARGUMENT and
 * fa_last_error() names the first option that differs. */
FA_RUNTIME_API fa_status fa_kernel_check_backward(const fa_kernel *forward,
                                                  const fa_kernel *backward);

/* Block masks (the host helper beside fa.create_block_mask). A keep
 * function says whether key `k` of query row `q` in batch `b` and query
 * head `h` is attended (nonzero) or removed (0): the mask_mod of the
 * kernel the block mask is for, written in C. */
typedef int (*fa_keep_fn)(void *user, int64_t b, int64_t h, int64_t q,
                          int64_t k);

/* The number of bytes of a block mask [batch, heads, ceil(nq / tq),
 * ceil(nk / tk)] (one i8 per tile pair), or -1 when a size is negative, a
 * tile size is not positive or the count overflows. */
FA_RUNTIME_API int64_t fa_block_mask_size(int64_t batch, int64_t heads,
                                          int64_t nq, int64_t nk, int64_t tq,
                                          int64_t tk);

/* Fills `out` (fa_block_mask_size bytes, C order) with fa.attention's block
 * mask encoding for query tiles of `tq` rows and key tiles of `tk` keys:
 * 0 when `keep` removes every (row, key) pair of the tile pair, 2 when it
 * keeps them all, 1 otherwise; rows at or past `nq` and keys at or past
 * `nk` do not count. `keep` is called once per (b, h, q, k) (b < batch,
 * h < heads): give batch or heads 1 for a mask that does not depend on
 * them (the kernel broadcasts). FA_ERROR_INVALID_ARGUMENT for NULL `keep`
 * or `out`, or sizes fa_block_mask_size refuses. */
FA_RUNTIME_API fa_status fa_block_mask_build(int64_t batch, int64_t heads,
                                             int64_t nq, int64_t nk,
                                             int64_t tq, int64_t tk,
                                             fa_keep_fn keep, void *user,
                                             uint8_t *out);

/* fa_attention_launch_ex for a kernel with score_mod / mask_mod regions:
 * `mod_operands` holds `num_mod_operands` tensors (fa_kernel_get_regions'
 * count, in the kernel's order); each must have its param's fixed shape and
 * dtype. NULL and 0 for a kernel without any. */
FA_RUNTIME_API fa_status fa_attention_launch_mods(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_tensor *const *mod_operands,
    int64_t num_mod_operands, fa_tensor *o, fa_tensor *lse,
    void *cuda_stream);

/* fa_attention_launch_mods with the block mask of a kernel compiled with
 * one (fa_kernel_get_block_tiles): `block_mask` is i8 (FA_DTYPE_I8) [B or
 * 1, Hq or 1 (as compiled), ceil(Nq / tq), ceil(Nk / tk)] in the encoding
 * of fa_block_mask_build, and must describe the kernel's mask_mod exactly
 * (the kernel skips the tiles marked 0 and the mask_mod on those marked 2).
 * NULL for a kernel without one. */
FA_RUNTIME_API fa_status fa_attention_launch_sparse(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_tensor *const *mod_operands,
    int64_t num_mod_operands, const fa_tensor *block_mask, fa_tensor *o,
    fa_tensor *lse, void *cuda_stream);

/* The serving form an attention kernel was compiled for: *page_size the
 * rows S of a paged K/V cache's pages (fa-compile --page-size; 0 for a
 * contiguous cache), *varlen 1 for the token-major variable-length form
 * (fa-compile --varlen), else 0. Kernels of either form run through
 * fa_attention_launch_paged / fa_attention_launch_varlen, on the CPU. */
FA_RUNTIME_API fa_status fa_kernel_get_serving(const fa_kernel *kernel,
                                               int64_t *page_size,
                                               int32_t *varlen);

/* Runs an attention kernel over a paged K/V cache (the vLLM /
 * FlashAttention layout; docs/serving.md):
 *
 *   q           [B, Hq, Nq, D]    the kernel's dtype
 *   k_pages     [P, S, Hkv, D]    the kernel's dtype, S its page size
 *   v_pages     [P, S, Hkv, Dv]   the kernel's dtype
 *   block_table [B, M] int32      entry [b, j]: the page holding keys
 *                                 j*S .. j*S + S - 1 of sequence b
 *   kv_lens     [B] int32         the keys of each sequence (required)
 *   mask        [B|1, Hq|1, Nq, M*S] iff the kernel has a mask, else NULL
 *   extras      as fa_attention_launch_ex (NULL: none)
 *   o, lse      as fa_attention_launch
 *
 * Before the kernel runs, every length must be in [0, M*S] and every
 * entry a sequence reads (j < ceil(kv_lens[b] / S)) a page in [0, P):
 * else FA_ERROR_INVALID_ARGUMENT naming the sequence and entry, and
 * nothing is read or written. Entries past a sequence's pages are never
 * read (any value, e.g. -1 padding). Pages may be shared between
 * sequences. A CUDA kernel's tables are device memory, which the launch
 * does not check: see fa_check_block_table. */
FA_RUNTIME_API fa_status fa_attention_launch_paged(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k_pages,
    const fa_tensor *v_pages, const fa_tensor *block_table,
    const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, fa_tensor *o, fa_tensor *lse,
    void *cuda_stream);

/* Runs a token-major variable-length attention kernel (FlashAttention 2's
 * varlen layout; docs/serving.md): sequence b's queries are rows
 * cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of q and its keys rows
 * cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of k and v, each sequence
 * with its own causal alignment.
 *
 *   q            [Tq, Hq, D]    the kernel's dtype
 *   k            [Tk, Hkv, D]   the kernel's dtype
 *   v            [Tk, Hkv, Dv]  the kernel's dtype
 *   cu_seqlens_q [B + 1] int32  non-decreasing, first >= 0, last <= Tq
 *   cu_seqlens_k [B + 1] int32  non-decreasing, first >= 0, last <= Tk
 *   extras       as fa_attention_launch_ex (NULL: none)
 *   o            [Tq, Hq, Dv]   (written for the rows of the sequences)
 *   lse          [Hq, Tq] f32   iff the kernel has LSE, else NULL
 *
 * Offsets that break the rules above are FA_ERROR_INVALID_ARGUMENT before
 * the kernel runs. Empty sequences are allowed (a sequence with queries
 * but no keys gives O = 0 and LSE = -inf). A CUDA kernel's offsets are
 * device memory, which the launch does not check: see fa_check_cu_seqlens;
 * its grid covers ceil(Tq / block_q) query tiles per sequence, the tiles
 * past a sequence's rows returning at once. */
FA_RUNTIME_API fa_status fa_attention_launch_varlen(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *cu_seqlens_q,
    const fa_tensor *cu_seqlens_k, const fa_attention_extras *extras,
    fa_tensor *o, fa_tensor *lse, void *cuda_stream);

/* The host-side checks fa_attention_launch_paged and _varlen make before a
 * CPU kernel runs, for the caller to make on host copies of a CUDA
 * kernel's tables: a CUDA launch does not read its tables, which are
 * device memory (copying them back would synchronise the stream). The
 * CUDA kernel clamps every page entry into [0, P), every length into
 * [0, M*S] and every offset into [0, T], so a bad table cannot make it
 * read or write outside its tensors, but its results are then
 * meaningless: check the tables where they are built.
 *
 * fa_check_block_table: `block_table` i32 [B, M] and `kv_lens` i32 [B],
 * contiguous host memory, for a cache of `num_pages` pages of `page_size`
 * rows; the rules of fa_attention_launch_paged.
 * fa_check_cu_seqlens: `cu_seqlens` i32 [B + 1], contiguous host memory,
 * over `tokens` packed rows (Tq or Tk); the rules of
 * fa_attention_launch_varlen.
 *
 * FA_SUCCESS, or FA_ERROR_INVALID_ARGUMENT with the sequence and entry at
 * fault in fa_last_error. */
FA_RUNTIME_API fa_status fa_check_block_table(const fa_tensor *block_table,
                                              const fa_tensor *kv_lens,
                                              int64_t num_pages,
                                              int64_t page_size);
FA_RUNTIME_API fa_status fa_check_cu_seqlens(const fa_tensor *cu_seqlens,
                                             int64_t tokens);

/*===----------------------------------------------------------------------===*
 * Split-KV (flash-decoding)
 *
 * A CUDA kernel compiled with `fa-compile --split-kv` splits the keys of
 * each (batch, head) into `num_splits` parts that run as separate blocks,
 * each writing a partial output and log-sum-exp in f32 to a workspace;
 * a second kernel (the fa.merge rule) combines the parts into O and LSE.
 * Both run on the launch's stream, in order, so the workspace may be
 * reused by the next launch on the same stream. It pays when B x heads x
 * query tiles leaves SMs idle: decode over long caches.
 *===----------------------------------------------------------------------===*/

/* *split_kv = 1 for a kernel compiled with --split-kv, else 0. */
FA_RUNTIME_API fa_status fa_kernel_get_split_kv(const fa_kernel *kernel,
                                                int32_t *split_kv);

/* The number of parts the documented heuristic picks (docs/serving.md)
 * for a launch over `batch` entries of `nq` query rows and `nk` keys (the
 * longest sequence's; for a paged cache M x S) on the kernel's device:
 * 1 when the blocks without splitting fill 80% of its SMs, else the
 * fewest parts (at most 128 and the key tiles) within 85% of the best
 * wave efficiency. Always 1 for a kernel without split-KV. */
FA_RUNTIME_API fa_status fa_attention_num_splits(const fa_kernel *kernel,
                                                 int64_t batch, int64_t nq,
                                                 int64_t nk,
                                                 int64_t *num_splits);

/* The bytes of workspace a split-KV launch over `batch` entries of `nq`
 * query rows in `num_splits` parts needs: f32 partial outputs [num_splits,
 * B, Hq, Nq, Dv] at offset 0, then f32 partial log-sum-exps [num_splits, B,
 * Hq, Nq] from the next multiple of 256 bytes. */
FA_RUNTIME_API fa_status fa_attention_workspace_size(const fa_kernel *kernel,
                                                     int64_t batch,
                                                     int64_t nq,
                                                     int64_t num_splits,
                                                     size_t *bytes);

/* The split of one launch: `num_splits` >= 1 parts (fa_attention_num_splits
 * or forced; more parts than key tiles leave the extra parts empty, which
 * is correct but wasted work) and `workspace`, device memory of at least
 * fa_attention_workspace_size bytes, 16-byte aligned, not overlapping any
 * tensor of the launch. */
typedef struct fa_split_kv {
  int64_t num_splits;
  void *workspace;
  size_t workspace_bytes;
} fa_split_kv;

/* fa_attention_launch_ex / fa_attention_launch_paged for a kernel compiled
 * with --split-kv: the same tensors, plus `split`. The other launch
 * functions refuse split-KV kernels (they have no workspace). */
FA_RUNTIME_API fa_status fa_attention_launch_split(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k,
    const fa_tensor *v, const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_split_kv *split, fa_tensor *o,
    fa_tensor *lse, void *cuda_stream);
FA_RUNTIME_API fa_status fa_attention_launch_paged_split(
    fa_kernel *kernel, const fa_tensor *q, const fa_tensor *k_pages,
    const fa_tensor *v_pages, const fa_tensor *block_table,
    const fa_tensor *kv_lens, const fa_tensor *mask,
    const fa_attention_extras *extras, const fa_split_kv *split, fa_tensor *o,
    fa_tensor *lse, void *cuda_stream);

/* Runs a softmax kernel along the kernel's dimension: y = softmax(x). x and
 * y have the kernel's rank and dtype and the same sizes and must not
 * overlap. Empty tensors are a no-op. */
FA_RUNTIME_API fa_status fa_softmax_launch(fa_kernel *kernel,
                                           const fa_tensor *x, fa_tensor *y,
                                           void *cuda_stream);

#ifdef __cplusplus
}
#endif

#endif /* FA_RUNTIME_FARUNTIME_H */
