//===- KernelMetadata.h - fa-kernel/3 artifact metadata ---------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The in-memory form of the `fa-kernel/3` JSON metadata that describes an
// ahead-of-time kernel artifact (docs/artifacts.md), with its reader (used
// by FARuntime) and writer (used by fa-compile and fa-run), so both sides
// share one definition of the schema.
//
// This is a C++17 API of the FARuntime library that depends on the standard
// library only (no LLVM); the C API (FARuntime.h) does not expose it.
// Errors are one-line messages naming the field, returned as
// std::optional<std::string> (nullopt: no error).
//
//===----------------------------------------------------------------------===//

#ifndef FA_RUNTIME_KERNELMETADATA_H
#define FA_RUNTIME_KERNELMETADATA_H

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fa {
namespace runtime {

/// The format string this library reads and writes.
inline constexpr const char *kMetadataFormat = "fa-kernel/3";

enum class OpKind { Attention, Softmax, AttentionBackward };

/// Whether `op` carries attention's fields (heads, head dims, causal
/// alignment, masks, modifiers): the forward and the backward op.
inline bool isAttentionOp(OpKind op) { return op != OpKind::Softmax; }
enum class TargetKind { Cuda, Cpu };
enum class DType { F32, F16, BF16, I32, I8 };
enum class Causal { None, TopLeft, BottomRight };
enum class MaskKind { None, Bool, Additive };

/// The meaning of a kernel parameter.
enum class ParamRole {
  Query,
  Key,
  Value,
  KvLens,
  Mask,
  Output,
  Lse,
  // Softmax.
  Input,
  // Attention modifiers.
  Alibi,
  QSegments,
  KSegments,
  /// A tensor the kernel's score_mod / mask_mod regions read (any number,
  /// in the op's mod_operands order; fixed shapes, f32 or i32).
  ModOperand,
  /// The block mask of a mask_mod: i8 [B|1, Hq|1, QT, KT], QT and KT the
  /// numbers of query and key tiles of the kernel's block_tiles.
  BlockMask,
  /// A paged K/V cache's block table: i32 [B, M], entry [b, j] the page
  /// that holds keys j*S .. j*S + S - 1 of sequence b.
  BlockTable,
  /// A variable-length batch's offsets into the packed tokens: i32 [B+1],
  /// sequence b's queries (keys) are rows cu[b] .. cu[b + 1] - 1.
  CuSeqlensQ,
  CuSeqlensK,
  /// A split-KV kernel's workspace (not tensors the caller passes: the
  /// launcher carves them out of the workspace buffer, see
  /// getWorkspaceLayout): the parts' f32 outputs [Ns, B, Hq, Nq, Dv] and
  /// log-sum-exps [Ns, B, Hq, Nq], Ns the number of parts.
  PartialOutput,
  PartialLse,
  // The backward op: dO [B, Hq, Nq, Dv] (read) and the gradients dQ, dK,
  // dV (written), shaped like Q, K and V; its Output and Lse are the
  // forward's, read.
  GradOutput,
  GradQuery,
  GradKey,
  GradValue,
};

/// The shape of an attention kernel's ALiBi slopes.
enum class AlibiKind {
  None,
  Heads,      ///< "heads": [Hq]
  BatchHeads, ///< "batch_heads": [B, Hq]
};

/// The score and mask modifiers of an attention kernel, as fa.attention
/// defines them (docs/FA/FADialect.md): window(left, right) with -1 for
/// unbounded, softcap(c), chunk(C) (0: none), ALiBi slopes and segment ids
/// (params).
struct ModifierInfo {
  int64_t windowLeft = -1, windowRight = -1;
  std::optional<double> softcap;
  int64_t chunk = 0;
  AlibiKind alibi = AlibiKind::None;
  bool segments = false;
  /// General score_mod / mask_mod regions, compiled into the kernel (the
  /// metadata records that they are there; their operands are ModOperand
  /// params).
  bool scoreMod = false, maskMod = false;
  /// The tiles (TQ, TK) of the mask_mod's block mask (a BlockMask param);
  /// 0 without one.
  int64_t blockTileQ = 0, blockTileKV = 0;

  bool hasWindow() const { return windowLeft >= 0 || windowRight >= 0; }
  bool hasBlockMask() const { return blockTileQ > 0; }
  bool hasRegions() const { return scoreMod || maskMod; }
  bool any() const {
    return hasWindow() || softcap || chunk > 0 || alibi != AlibiKind::None ||
           segments || hasRegions() || hasBlockMask();
  }
};

/// The schema's names: "attention", "f16", "bottom_right", "bool", "kv_lens",
/// "heads".
std::string getOpName(OpKind op);
std::string getDTypeName(DType dtype);
/// Bytes per element.
int64_t getDTypeSize(DType dtype);
std::string getCausalName(Causal causal);
std::string getMaskKindName(MaskKind mask);
std::string getRoleName(ParamRole role);
std::string getAlibiKindName(AlibiKind kind);
std::optional<DType> parseDType(std::string_view name);
/// The inverse of getCausalName.
std::optional<Causal> parseCausal(std::string_view name);

/// One dimension of a parameter's shape: a symbol (`B`, `Hq`, `Nq`, `Nk`,
/// `D`, `Dv`, `Hkv`; `N0`... for softmax) or a fixed size.
struct ShapeDim {
  std::string symbol;
  int64_t size = -1;

  static ShapeDim sym(std::string name) { return {std::move(name), -1}; }
  static ShapeDim fixed(int64_t size) { return {"", size}; }
  bool isSymbol() const { return !symbol.empty(); }
};

/// A kernel parameter (a memref passed as an MLIR descriptor).
struct ParamInfo {
  std::string name;
  ParamRole role = ParamRole::Query;
  DType dtype = DType::F32;
  std::vector<ShapeDim> shape;
  /// The byte alignment the kernel needs of the tensor's base pointer and
  /// of every stride (in bytes) but the innermost: the GPU kernels copy Q, K
  /// and V rows with 16-byte cp.async. 0: the element size (the schema's
  /// `alignment` field is then omitted).
  int64_t alignment = 0;

  int64_t getRank() const { return static_cast<int64_t>(shape.size()); }
};

/// Where the artifact runs.
struct TargetInfo {
  TargetKind kind = TargetKind::Cpu;
  // CUDA.
  std::string chip;   ///< "sm_80", "sm_90a", ...
  std::string ptxIsa; ///< "8.0"
  // CPU.
  std::string triple;
  std::string cpu;                   ///< LLVM CPU name the code was tuned for
  std::vector<std::string> features; ///< ISA features the code may use
};

/// Files of the artifact, relative to the metadata's directory; empty when
/// absent.
struct FileInfo {
  std::string ptx, cubin;      ///< CUDA
  std::string object, library; ///< CPU
  std::string header;          ///< the C header (both)
};

/// What one dimension of a CUDA kernel's grid runs over.
enum class GridAxis {
  QueryTiles, ///< "q_tiles": ceil(Nq / block_q) tiles of query rows
  Heads,      ///< "heads": the Hq query heads
  Batch,      ///< "batch": the B batch entries
  /// "packed_q_tiles": ceil(Nq * Hq / Hkv / block_q) tiles of the packed
  /// rows of a kv head's query heads (a decode kernel with packed heads)
  PackedQueryTiles,
  KvHeads, ///< "kv_heads": the Hkv key/value heads (with packed_q_tiles)
  /// "k_tiles": ceil(Nk / block_kv) tiles of keys (the backward's dK/dV
  /// kernel, launch.dkdv)
  KeyTiles,
};

/// The schema's name of `axis`: "q_tiles", "heads", "batch",
/// "packed_q_tiles", "kv_heads".
std::string getGridAxisName(GridAxis axis);

/// The launch configuration of a CUDA kernel. The grid is named by what
/// its x, y and z dimensions run over: q_tiles, heads and batch, or for a
/// kernel with packed query heads packed_q_tiles, kv_heads and batch (each
/// axis once); the runtime derives the sizes from the shapes
/// (getLaunchGrid).
struct LaunchInfo {
  std::array<int64_t, 3> block = {1, 1, 1};
  std::array<GridAxis, 3> grid = {GridAxis::QueryTiles, GridAxis::Heads,
                                  GridAxis::Batch};
  int64_t staticSharedBytes = 0;
  int64_t dynamicSharedBytes = 0;
  /// A split-KV kernel's second entry (the `merge` object; empty symbol
  /// without one): launched after the first on the same stream with the
  /// same parameters, over (ceil(B * Hq * Nq / (mergeBlock[0] / 32)), 1, 1)
  /// blocks of mergeBlock threads, one warp per (batch, head, query row).
  /// The first entry's grid x is then its axis times Ns.
  std::string mergeSymbol;
  std::array<int64_t, 3> mergeBlock = {0, 0, 0};
  /// An attention_backward kernel's second entry (the `dkdv` object; empty
  /// symbol without one): dK and dV, launched after the first (dQ) on the
  /// same stream with the same parameters and block, over `dkdvGrid`
  /// (k_tiles, kv_heads, batch) with its own static shared memory.
  std::string dkdvSymbol;
  std::array<GridAxis, 3> dkdvGrid = {GridAxis::KeyTiles, GridAxis::KvHeads,
                                      GridAxis::Batch};
  int64_t dkdvStaticSharedBytes = 0;
};

/// Everything `fa-kernel/3` metadata says.
struct KernelMetadata {
  std::string format = kMetadataFormat;
  std::string name;
  OpKind op = OpKind::Attention;
  TargetInfo target;
  /// CUDA: the kernel family, "simt", "mma" (mma.sync) or "wgmma"; empty
  /// for CPU artifacts and CUDA artifacts that predate the field.
  std::string kernel;
  FileInfo files;
  std::string symbol;
  DType dtype = DType::F32;

  // Attention.
  int64_t headDim = 0, valueHeadDim = 0, heads = 0, kvHeads = 0;
  Causal causal = Causal::None;
  double scale = 0; ///< the effective scale (1/sqrt(D) unless given)
  MaskKind mask = MaskKind::None;
  bool hasKvLens = false, hasLse = false;
  int64_t blockQ = 0, blockKV = 0;
  /// A paged K/V cache (the optional `page_size` field): K and V are pages
  /// `[P, S, Hkv, D|Dv]` of `pageSize` = S rows, read through a BlockTable
  /// param (needs kv_lens); 0 for a contiguous cache.
  int64_t pageSize = 0;
  /// The token-major variable-length form (the optional `varlen` field):
  /// Q `[Tq, Hq, D]`, K/V `[Tk, Hkv, D|Dv]`, O `[Tq, Hq, Dv]`, LSE
  /// `[Hq, Tq]` and the CuSeqlensQ/K params `[B+1]`.
  bool varlen = false;
  /// Split-KV (the optional `split_kv` field; CUDA, SIMT kernel): the keys
  /// of each (batch, head) are split into Ns parts (a launch-time choice)
  /// whose partial outputs a merge kernel combines (launch.merge); the
  /// PartialOutput and PartialLse params live in a caller's workspace.
  bool splitKv = false;
  /// The optional `window`, `softcap`, `chunk`, `alibi` and `has_segments`
  /// fields.
  ModifierInfo modifiers;

  // Softmax.
  int64_t rank = 0, dimension = 0;

  std::optional<LaunchInfo> launch; ///< required for CUDA
  std::vector<ParamInfo> params;    ///< in call order
  std::string generator;            ///< informational, e.g. "fa-compile"
  /// The `signature` field as read: getKernelSignatureHash of the fields
  /// at compile time. The writer always writes the hash of the fields it
  /// writes; this member is not consulted.
  std::string signature;

  /// The symbols shapes may use, in a fixed order: attention
  /// `B Hq Hkv Nq Nk D Dv` (then `QT KT` with a block mask, `P S M` for a
  /// paged cache: pages, page size, block-table entries per sequence;
  /// `Tq Tk B+1` for the varlen form: packed query and key tokens, offsets;
  /// `Ns` with split-KV: the parts), softmax `N0 ...`.
  std::vector<std::string> getSymbols() const;
  /// The param with `role`, or null.
  const ParamInfo *findParam(ParamRole role) const;
};

/// The canonical shape of a `role` param of `metadata`'s kernel, as
/// symbols (empty for mod operands, whose sizes are fixed).
std::vector<std::string> getCanonicalShape(const KernelMetadata &metadata,
                                           ParamRole role);

/// The size a static shape symbol stands for in `metadata`'s kernel (`Hq`,
/// `Hkv`, `D`, `Dv`, and `S` with a paged cache), or nullopt for a symbol
/// bound at launch.
std::optional<int64_t> getStaticSymbolValue(const KernelMetadata &metadata,
                                            std::string_view symbol);

/// The canonical parameters of an attention or softmax kernel as fa-compile
/// emits them (q, k, v, [kv_lens], [mask], [alibi], [q_segments,
/// k_segments], o, [lse], [block_table | cu_seqlens_q, cu_seqlens_k]; or
/// x, y), with the
/// canonical symbolic shapes. `maskBroadcastBatch`/`Heads` make the mask's
/// dims 0/1 a fixed 1.
std::vector<ParamInfo> getCanonicalParams(const KernelMetadata &metadata,
                                          DType maskDType,
                                          bool maskBroadcastBatch,
                                          bool maskBroadcastHeads);

/// Why `backward` (an attention_backward kernel) does not compute the
/// gradients of `forward` (an attention kernel): the first option that
/// differs (dtype, head dims, heads, causal alignment, scale, mask kind and
/// broadcast, key lengths, modifiers; the forward must have LSE), or nullopt
/// when they match. Tile sizes and targets may differ.
std::optional<std::string> getBackwardMismatch(const KernelMetadata &forward,
                                               const KernelMetadata &backward);

/// Parses and checks metadata text (strict JSON: no trailing garbage,
/// comments, duplicate keys or invalid UTF-8; unknown fields are ignored).
/// On failure returns nullopt and sets `error`, which names the field, e.g.
/// "field 'params[2].dtype': expected one of f32, f16, bf16, i32, i8, got
/// 'f64'", or starts with "not valid JSON: " (with the line and column
/// where the JSON library gives them). Never throws.
std::optional<KernelMetadata> parseKernelMetadata(std::string_view text,
                                                  std::string &error);

/// Checks the semantic rules of the schema (what parseKernelMetadata checks
/// after reading the fields): verifyKernelSignature, plus the target, the
/// files and the launch configuration. Returns the first problem, or
/// nullopt.
std::optional<std::string> verifyKernelMetadata(const KernelMetadata &metadata);

/// Checks what does not depend on the target: name, symbol, dtype, the op's
/// attributes, and the params against the op's flags and canonical shapes.
/// Returns the first problem, or nullopt.
std::optional<std::string>
verifyKernelSignature(const KernelMetadata &metadata);

/// `metadata` as pretty-printed JSON with a fixed field order (2-space
/// indent, one field per line, a final newline). `extraFields`, a JSON
/// object's text, adds its members after the others: fields the writer
/// records that the runtime does not read (fa-compile's `cost`); text
/// that is not a JSON object adds nothing.
std::string serializeKernelMetadata(const KernelMetadata &metadata,
                                    std::string_view extraFields = {});

/// Writes serializeKernelMetadata(metadata) to `os`.
void writeKernelMetadata(const KernelMetadata &metadata, std::ostream &os);

//===----------------------------------------------------------------------===//
// Signatures: what a kernel binary was compiled for
//===----------------------------------------------------------------------===//

/// The kernel's ABI and the facts its code was compiled for, as text: one
/// `key=value` line per field (op, symbol, dtype, head dims, heads, causal,
/// scale, mask, kv_lens, lse, tiles, softmax rank and dimension; for CUDA
/// the kernel family and the launch configuration), then `params=<count>`
/// and one `params[i]=<name> <role> <dtype> [<shape>] align <n>` line per
/// parameter in call order. Names of the artifact, its files, the target
/// and the generator are not part of it. fa-compile embeds this text in the
/// kernel binary (getSignatureSymbol) and writes its hash to the metadata;
/// the runtime compares both with the metadata's fields at load.
std::string getKernelSignature(const KernelMetadata &metadata);

/// FNV-1a (64-bit) of getKernelSignature(metadata), as 16 lowercase hex
/// digits: the metadata's `signature` field.
std::string getKernelSignatureHash(const KernelMetadata &metadata);

/// The symbol of the NUL-terminated signature text in the kernel binary:
/// `fa_signature_<symbol>` (a global of the shared library and object file;
/// a `.global .b8` array of the PTX and cubin).
std::string getSignatureSymbol(const KernelMetadata &metadata);

/// Compares the signature text `compiled` (from the kernel binary) with
/// getKernelSignature(metadata). Returns nullopt when they are equal, else
/// a message naming the first field that differs, e.g. "field 'heads': the
/// kernel was compiled for 4, the metadata says 8".
std::optional<std::string>
compareKernelSignature(std::string_view compiled,
                       const KernelMetadata &metadata);

/// `ptx` with the signature global declared after its module directives
/// (`.version`, `.target`, `.address_size`): `.visible .global .align 1
/// .b8 fa_signature_<symbol>[N] = {...};` holding `signature` and a NUL.
std::string addPtxSignature(std::string_view ptx, std::string_view symbol,
                            std::string_view signature);

/// The text of the global `symbol` that addPtxSignature declares in `ptx`
/// (without the NUL), or nullopt when `ptx` declares no such global or
/// its initializer is malformed.
std::optional<std::string> findPtxSignature(std::string_view ptx,
                                            std::string_view symbol);

/// The grid of a CUDA attention launch over `batch` (B) entries of
/// `queryLen` (Nq) query rows: `metadata.launch->grid` with q_tiles =
/// ceil(queryLen / block_q), heads = Hq, batch = B, packed_q_tiles =
/// ceil(queryLen * Hq / Hkv / block_q) and kv_heads = Hkv. Needs a launch
/// configuration, a positive block_q and non-negative sizes.
std::array<int64_t, 3> getLaunchGrid(const KernelMetadata &metadata,
                                     int64_t batch, int64_t queryLen,
                                     int64_t numSplits = 1);

/// The grid of an attention_backward kernel's dK/dV entry (launch.dkdv)
/// over `batch` entries of `keyLen` keys: k_tiles = ceil(keyLen /
/// block_kv), kv_heads = Hkv, batch = B.
std::array<int64_t, 3> getDkdvGrid(const KernelMetadata &metadata,
                                   int64_t batch, int64_t keyLen);

/// The grid of a split-KV kernel's merge entry (launch.merge):
/// (ceil(batch * Hq * queryLen / rows per block), 1, 1), saturating at
/// INT64_MAX.
std::array<int64_t, 3> getMergeGrid(const KernelMetadata &metadata,
                                    int64_t batch, int64_t queryLen);

/// Where a split-KV kernel's workspace holds its parts: the f32 partial
/// outputs [Ns, B, Hq, Nq, Dv] at offset 0, the f32 partial log-sum-exps
/// [Ns, B, Hq, Nq] at `lseOffset` (256-byte aligned), `bytes` in all.
struct WorkspaceLayout {
  uint64_t outputBytes = 0, lseOffset = 0, lseBytes = 0, bytes = 0;
};

/// The workspace of a launch of `metadata`'s split-KV kernel over `batch`
/// entries of `queryLen` query rows in `numSplits` parts, or nullopt when
/// a size is negative, numSplits < 1 or the sizes overflow 64 bits.
std::optional<WorkspaceLayout>
getWorkspaceLayout(const KernelMetadata &metadata, int64_t batch,
                   int64_t queryLen, int64_t numSplits);

/// The most parts chooseNumSplits picks (a launch may force more).
inline constexpr int64_t kMaxAutoSplits = 128;

/// The split-KV heuristic (docs/serving.md): the number of parts Ns for a
/// launch of `metadata`'s kernel over `batch` entries of `queryLen` query
/// rows and `keyLen` keys on a device of `multiprocessors` SMs. 1 when
/// the blocks without splitting (getLaunchGrid) already fill 80% of the
/// SMs or there is one key tile; else the smallest Ns in [1, min(key
/// tiles, kMaxAutoSplits)] whose wave efficiency (blocks / SMs over its
/// ceiling) is within 85% of the best, counting only Ns that change the
/// tiles per part.
int64_t chooseNumSplits(const KernelMetadata &metadata, int64_t batch,
                        int64_t queryLen, int64_t keyLen,
                        int64_t multiprocessors);

} // namespace runtime
} // namespace fa

#endif // FA_RUNTIME_KERNELMETADATA_H
