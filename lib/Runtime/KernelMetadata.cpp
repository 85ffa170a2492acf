//===- KernelMetadata.cpp - fa-kernel/3 artifact metadata -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The metadata's JSON is read and written with nlohmann-json, which only
// this file sees (the public header does not). This library is built with
// exceptions on; none leaves parseKernelMetadata or serializeKernelMetadata.
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/KernelMetadata.h"
#include "fa/Target/Chips.h"

#include "RuntimeInternal.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <set>
#include <sstream>

using namespace fa::runtime;
using MaybeError = std::optional<std::string>;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

std::string fa::runtime::getOpName(OpKind op) {
  switch (op) {
  case OpKind::Attention:
    return "attention";
  case OpKind::Softmax:
    return "softmax";
  case OpKind::AttentionBackward:
    return "attention_backward";
  }
  return "?";
}

std::string fa::runtime::getDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I8:
    return "i8";
  }
  return "?";
}

int64_t fa::runtime::getDTypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I8:
    return 1;
  }
  return 1;
}

std::optional<DType> fa::runtime::parseDType(std::string_view name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I8})
    if (name == getDTypeName(d))
      return d;
  return std::nullopt;
}

std::optional<Causal> fa::runtime::parseCausal(std::string_view name) {
  for (Causal c : {Causal::None, Causal::TopLeft, Causal::BottomRight})
    if (name == getCausalName(c))
      return c;
  return std::nullopt;
}

std::string fa::runtime::getCausalName(Causal causal) {
  switch (causal) {
  case Causal::None:
    return "none";
  case Causal::TopLeft:
    return "top_left";
  case Causal::BottomRight:
    return "bottom_right";
  }
  return "?";
}

std::string fa::runtime::getMaskKindName(MaskKind mask) {
  switch (mask) {
  case MaskKind::None:
    return "none";
  case MaskKind::Bool:
    return "bool";
  case MaskKind::Additive:
    return "additive";
  }
  return "?";
}

std::string fa::runtime::getRoleName(ParamRole role) {
  switch (role) {
  case ParamRole::Query:
    return "query";
  case ParamRole::Key:
    return "key";
  case ParamRole::Value:
    return "value";
  case ParamRole::KvLens:
    return "kv_lens";
  case ParamRole::Mask:
    return "mask";
  case ParamRole::Output:
    return "output";
  case ParamRole::Lse:
    return "lse";
  case ParamRole::Input:
    return "input";
  case ParamRole::Alibi:
    return "alibi";
  case ParamRole::QSegments:
    return "q_segments";
  case ParamRole::KSegments:
    return "k_segments";
  case ParamRole::ModOperand:
    return "mod_operand";
  case ParamRole::BlockMask:
    return "block_mask";
  case ParamRole::BlockTable:
    return "block_table";
  case ParamRole::CuSeqlensQ:
    return "cu_seqlens_q";
  case ParamRole::CuSeqlensK:
    return "cu_seqlens_k";
  case ParamRole::PartialOutput:
    return "partial_o";
  case ParamRole::PartialLse:
    return "partial_lse";
  case ParamRole::GradOutput:
    return "grad_output";
  case ParamRole::GradQuery:
    return "grad_query";
  case ParamRole::GradKey:
    return "grad_key";
  case ParamRole::GradValue:
    return "grad_value";
  }
  return "?";
}

std::string fa::runtime::getAlibiKindName(AlibiKind kind) {
  switch (kind) {
  case AlibiKind::None:
    return "none";
  case AlibiKind::Heads:
    return "heads";
  case AlibiKind::BatchHeads:
    return "batch_heads";
  }
  return "?";
}

std::string fa::runtime::getGridAxisName(GridAxis axis) {
  switch (axis) {
  case GridAxis::QueryTiles:
    return "q_tiles";
  case GridAxis::Heads:
    return "heads";
  case GridAxis::Batch:
    return "batch";
  case GridAxis::PackedQueryTiles:
    return "packed_q_tiles";
  case GridAxis::KvHeads:
    return "kv_heads";
  case GridAxis::KeyTiles:
    return "k_tiles";
  }
  return "?";
}

/// True for C identifiers: [A-Za-z_][A-Za-z0-9_]*.
static bool isIdentifier(std::string_view name) {
  if (name.empty() || isDigit(name.front()))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return isAlnum(c) || c == '_'; });
}

/// Whether `chip` is "sm_NN", "sm_NNa" or "sm_NNf" with NN >= 10 (any
/// generation: artifacts may target chips newer than fa's table).
static bool isChip(std::string_view chip) {
  return ::fa::target::ChipName::parse(chip).has_value();
}

/// "X.Y" with decimal X and Y.
static bool isVersion(std::string_view text) {
  size_t dot = text.find('.');
  if (dot == std::string_view::npos)
    return false;
  uint64_t m;
  return parseUnsigned(text.substr(0, dot), m) &&
         parseUnsigned(text.substr(dot + 1), m);
}

//===----------------------------------------------------------------------===//
// KernelMetadata
//===----------------------------------------------------------------------===//

std::vector<std::string> KernelMetadata::getSymbols() const {
  if (isAttentionOp(op)) {
    std::vector<std::string> symbols = {"B",  "Hq", "Hkv", "Nq",
                                        "Nk", "D",  "Dv"};
    if (modifiers.hasBlockMask())
      symbols.insert(symbols.end(), {"QT", "KT"});
    if (pageSize > 0)
      symbols.insert(symbols.end(), {"P", "S", "M"});
    if (varlen)
      symbols.insert(symbols.end(), {"Tq", "Tk", "B+1"});
    if (splitKv)
      symbols.push_back("Ns");
    return symbols;
  }
  std::vector<std::string> symbols;
  for (int64_t i = 0; i < rank; ++i)
    symbols.push_back("N" + std::to_string(i));
  return symbols;
}

const ParamInfo *KernelMetadata::findParam(ParamRole role) const {
  for (const ParamInfo &param : params)
    if (param.role == role)
      return &param;
  return nullptr;
}

std::vector<std::string>
fa::runtime::getCanonicalShape(const KernelMetadata &md, ParamRole role) {
  if (md.op == OpKind::Attention && md.varlen) {
    // Token-major: the batch and sequence dims are the packed tokens.
    switch (role) {
    case ParamRole::Query:
      return {"Tq", "Hq", "D"};
    case ParamRole::Key:
      return {"Tk", "Hkv", "D"};
    case ParamRole::Value:
      return {"Tk", "Hkv", "Dv"};
    case ParamRole::Output:
      return {"Tq", "Hq", "Dv"};
    case ParamRole::Lse:
      return {"Hq", "Tq"};
    default:
      break;
    }
  }
  switch (role) {
  case ParamRole::Query:
    return {"B", "Hq", "Nq", "D"};
  case ParamRole::Key:
    if (md.pageSize > 0)
      return {"P", "S", "Hkv", "D"};
    return {"B", "Hkv", "Nk", "D"};
  case ParamRole::Value:
    if (md.pageSize > 0)
      return {"P", "S", "Hkv", "Dv"};
    return {"B", "Hkv", "Nk", "Dv"};
  case ParamRole::KvLens:
    return {"B"};
  case ParamRole::Mask:
    return {"B", "Hq", "Nq", "Nk"};
  case ParamRole::Output:
  case ParamRole::GradOutput:
    if (isAttentionOp(md.op))
      return {"B", "Hq", "Nq", "Dv"};
    [[fallthrough]];
  case ParamRole::Input: {
    std::vector<std::string> shape;
    for (int64_t i = 0; i < md.rank; ++i)
      shape.push_back("N" + std::to_string(i));
    return shape;
  }
  case ParamRole::Lse:
    return {"B", "Hq", "Nq"};
  case ParamRole::Alibi:
    if (md.modifiers.alibi == AlibiKind::BatchHeads)
      return {"B", "Hq"};
    return {"Hq"};
  case ParamRole::QSegments:
    return {"B", "Nq"};
  case ParamRole::KSegments:
    return {"B", "Nk"};
  case ParamRole::ModOperand:
    // Fixed sizes only.
    return {};
  case ParamRole::BlockMask:
    return {"B", "Hq", "QT", "KT"};
  case ParamRole::BlockTable:
    return {"B", "M"};
  case ParamRole::CuSeqlensQ:
  case ParamRole::CuSeqlensK:
    return {"B+1"};
  case ParamRole::PartialOutput:
    return {"Ns", "B", "Hq", "Nq", "Dv"};
  case ParamRole::PartialLse:
    return {"Ns", "B", "Hq", "Nq"};
  case ParamRole::GradQuery:
    return {"B", "Hq", "Nq", "D"};
  case ParamRole::GradKey:
    return {"B", "Hkv", "Nk", "D"};
  case ParamRole::GradValue:
    return {"B", "Hkv", "Nk", "Dv"};
  }
  return {};
}

std::optional<int64_t>
fa::runtime::getStaticSymbolValue(const KernelMetadata &md,
                                  std::string_view symbol) {
  if (symbol == "Hq")
    return md.heads;
  if (symbol == "Hkv")
    return md.kvHeads;
  if (symbol == "D")
    return md.headDim;
  if (symbol == "Dv")
    return md.valueHeadDim;
  if (symbol == "S" && md.pageSize > 0)
    return md.pageSize;
  return std::nullopt;
}

std::vector<ParamInfo>
fa::runtime::getCanonicalParams(const KernelMetadata &md, DType maskDType,
                                bool maskBroadcastBatch,
                                bool maskBroadcastHeads) {
  std::vector<ParamInfo> params;
  auto add = [&](const char *name, ParamRole role, DType dtype) {
    ParamInfo param;
    param.name = name;
    param.role = role;
    param.dtype = dtype;
    for (const std::string &symbol : getCanonicalShape(md, role))
      param.shape.push_back(ShapeDim::sym(symbol));
    params.push_back(std::move(param));
    return &params.back();
  };
  if (md.op == OpKind::Softmax) {
    add("x", ParamRole::Input, md.dtype);
    add("y", ParamRole::Output, md.dtype);
    return params;
  }
  add("q", ParamRole::Query, md.dtype);
  add("k", ParamRole::Key, md.dtype);
  add("v", ParamRole::Value, md.dtype);
  if (md.hasKvLens)
    add("kv_lens", ParamRole::KvLens, DType::I32);
  if (md.mask != MaskKind::None) {
    ParamInfo *mask = add("mask", ParamRole::Mask, maskDType);
    if (maskBroadcastBatch)
      mask->shape[0] = ShapeDim::fixed(1);
    if (maskBroadcastHeads)
      mask->shape[1] = ShapeDim::fixed(1);
  }
  if (md.modifiers.alibi != AlibiKind::None)
    add("alibi", ParamRole::Alibi, DType::F32);
  if (md.modifiers.segments) {
    add("q_segments", ParamRole::QSegments, DType::I32);
    add("k_segments", ParamRole::KSegments, DType::I32);
  }
  add("o", ParamRole::Output, md.dtype);
  if (md.hasLse || md.op == OpKind::AttentionBackward)
    add("lse", ParamRole::Lse, DType::F32);
  if (md.op == OpKind::AttentionBackward) {
    add("d_o", ParamRole::GradOutput, md.dtype);
    add("d_q", ParamRole::GradQuery, md.dtype);
    add("d_k", ParamRole::GradKey, md.dtype);
    add("d_v", ParamRole::GradValue, md.dtype);
  }
  // fa-compile appends these to the kernel function (attachBlockTable,
  // attachCuSeqlens).
  if (md.pageSize > 0)
    add("block_table", ParamRole::BlockTable, DType::I32);
  if (md.varlen) {
    add("cu_seqlens_q", ParamRole::CuSeqlensQ, DType::I32);
    add("cu_seqlens_k", ParamRole::CuSeqlensK, DType::I32);
  }
  // fa-promote-shared's split-kv appends the workspace after all of them.
  if (md.splitKv) {
    add("partial_o", ParamRole::PartialOutput, DType::F32);
    add("partial_lse", ParamRole::PartialLse, DType::F32);
  }
  return params;
}

std::array<int64_t, 3> fa::runtime::getLaunchGrid(const KernelMetadata &md,
                                                  int64_t batch,
                                                  int64_t queryLen,
                                                  int64_t numSplits) {
  std::array<int64_t, 3> grid = {1, 1, 1};
  for (size_t i = 0; i < 3; ++i) {
    switch (md.launch->grid[i]) {
    case GridAxis::QueryTiles:
      grid[i] = queryLen / md.blockQ + (queryLen % md.blockQ != 0);
      break;
    case GridAxis::Heads:
      grid[i] = md.heads;
      break;
    case GridAxis::Batch:
      grid[i] = batch;
      break;
    case GridAxis::PackedQueryTiles: {
      int64_t group = md.kvHeads > 0 ? md.heads / md.kvHeads : 1;
      // Past int64 the launch is refused as out of CUDA's range anyway.
      if (group > 0 && queryLen > INT64_MAX / group) {
        grid[i] = INT64_MAX;
        break;
      }
      int64_t rows = queryLen * group;
      grid[i] = rows / md.blockQ + (rows % md.blockQ != 0);
      break;
    }
    case GridAxis::KvHeads:
      grid[i] = md.kvHeads;
      break;
    case GridAxis::KeyTiles: // the dK/dV entry's axis (getDkdvGrid)
      grid[i] = 0;
      break;
    }
  }
  // Split-KV: x runs over (query tile, part), the part fastest.
  if (md.splitKv && __builtin_mul_overflow(grid[0], numSplits, &grid[0]))
    grid[0] = INT64_MAX;
  return grid;
}

std::array<int64_t, 3> fa::runtime::getDkdvGrid(const KernelMetadata &md,
                                                int64_t batch, int64_t keyLen) {
  std::array<int64_t, 3> grid = {1, 1, 1};
  for (size_t i = 0; i < 3; ++i) {
    switch (md.launch->dkdvGrid[i]) {
    case GridAxis::KeyTiles:
      grid[i] = keyLen / md.blockKV + (keyLen % md.blockKV != 0);
      break;
    case GridAxis::KvHeads:
      grid[i] = md.kvHeads;
      break;
    case GridAxis::Batch:
      grid[i] = batch;
      break;
    default: // verifyKernelMetadata allows no other axis
      grid[i] = 0;
      break;
    }
  }
  return grid;
}

std::array<int64_t, 3> fa::runtime::getMergeGrid(const KernelMetadata &md,
                                                 int64_t batch,
                                                 int64_t queryLen) {
  int64_t rowsPerBlock = std::max<int64_t>(md.launch->mergeBlock[0] / 32, 1);
  int64_t rows = 0;
  if (__builtin_mul_overflow(batch, md.heads, &rows) ||
      __builtin_mul_overflow(rows, queryLen, &rows))
    return {INT64_MAX, 1, 1};
  return {rows / rowsPerBlock + (rows % rowsPerBlock != 0), 1, 1};
}

std::optional<WorkspaceLayout>
fa::runtime::getWorkspaceLayout(const KernelMetadata &md, int64_t batch,
                                int64_t queryLen, int64_t numSplits) {
  if (batch < 0 || queryLen < 0 || numSplits < 1)
    return std::nullopt;
  uint64_t rows = 0, lseBytes = 0, outputBytes = 0;
  if (__builtin_mul_overflow(uint64_t(numSplits), uint64_t(batch), &rows) ||
      __builtin_mul_overflow(rows, uint64_t(md.heads), &rows) ||
      __builtin_mul_overflow(rows, uint64_t(queryLen), &rows) ||
      __builtin_mul_overflow(rows, uint64_t(4), &lseBytes) ||
      __builtin_mul_overflow(lseBytes, uint64_t(md.valueHeadDim),
                             &outputBytes))
    return std::nullopt;
  WorkspaceLayout layout;
  layout.outputBytes = outputBytes;
  layout.lseBytes = lseBytes;
  // The log-sum-exps start on a 256-byte boundary (cudaMalloc's).
  if (__builtin_add_overflow(outputBytes, uint64_t(255), &layout.lseOffset))
    return std::nullopt;
  layout.lseOffset &= ~uint64_t(255);
  if (__builtin_add_overflow(layout.lseOffset, lseBytes, &layout.bytes))
    return std::nullopt;
  return layout;
}

int64_t fa::runtime::chooseNumSplits(const KernelMetadata &md, int64_t batch,
                                     int64_t queryLen, int64_t keyLen,
                                     int64_t multiprocessors) {
  if (!md.splitKv || !md.launch || md.blockKV <= 0 || multiprocessors <= 0 ||
      batch <= 0 || queryLen <= 0 || keyLen <= 0)
    return 1;
  std::array<int64_t, 3> grid = getLaunchGrid(md, batch, queryLen);
  int64_t blocks = 0;
  if (__builtin_mul_overflow(grid[0], grid[1], &blocks) ||
      __builtin_mul_overflow(blocks, grid[2], &blocks))
    return 1;
  int64_t keyTiles = keyLen / md.blockKV + (keyLen % md.blockKV != 0);
  // Enough blocks already, or nothing to split.
  if (keyTiles <= 1 || blocks * 5 >= multiprocessors * 4)
    return 1;
  int64_t maxSplits = std::min(keyTiles, kMaxAutoSplits);
  auto tilesPerPart = [&](int64_t s) { return (keyTiles + s - 1) / s; };
  // A part count that leaves the tiles per part unchanged only adds empty
  // parts: skip it.
  auto eligible = [&](int64_t s) {
    return s == 1 || tilesPerPart(s) != tilesPerPart(s - 1);
  };
  auto efficiency = [&](int64_t s) {
    double waves = double(blocks) * double(s) / double(multiprocessors);
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int64_t s = 1; s <= maxSplits; ++s)
    if (eligible(s))
      best = std::max(best, efficiency(s));
  for (int64_t s = 1; s <= maxSplits; ++s)
    if (eligible(s) && efficiency(s) >= 0.85 * best)
      return s;
  return 1;
}

//===----------------------------------------------------------------------===//
// Semantic checks
//===----------------------------------------------------------------------===//


static std::string formatShape(const std::vector<ShapeDim> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += shape[i].isSymbol() ? shape[i].symbol
                                : std::to_string(shape[i].size);
  }
  return text + "]";
}

MaybeError fa::runtime::verifyKernelMetadata(const KernelMetadata &md) {
  if (MaybeError err = verifyKernelSignature(md))
    return err;

  // Target and files.
  if (md.target.kind == TargetKind::Cuda) {
    if (!isChip(md.target.chip))
      return "field 'target.chip': expected sm_<NN>[a|f], got '" +
             md.target.chip + "'";
    if (!isVersion(md.target.ptxIsa))
      return "field 'target.ptx_isa': expected <major>.<minor>, got '" +
             md.target.ptxIsa + "'";
    // A chip of fa's table needs at least the table's PTX ISA version.
    if (const ::fa::target::ChipInfo *chip =
            ::fa::target::lookupChip(md.target.chip)) {
      size_t dot = md.target.ptxIsa.find('.');
      uint64_t major = 0, minor = 0;
      parseUnsigned(std::string_view(md.target.ptxIsa).substr(0, dot), major);
      parseUnsigned(std::string_view(md.target.ptxIsa).substr(dot + 1), minor);
      if (static_cast<int64_t>(major * 10 + minor) < chip->minPtxIsa)
        return "field 'target.ptx_isa': " + md.target.chip + " needs PTX ISA " +
               std::to_string(chip->minPtxIsa / 10) + "." +
               std::to_string(chip->minPtxIsa % 10) + " or newer, got '" +
               md.target.ptxIsa + "'";
    }
    if (md.files.ptx.empty() && md.files.cubin.empty())
      return std::string("field 'files': a cuda artifact needs 'ptx' or "
                         "'cubin'");
    if (!md.launch)
      return std::string("missing field 'launch' (required for cuda "
                         "targets)");
    if (!isAttentionOp(md.op))
      return "field 'op': cuda kernels compute attention or its backward "
             "(their grid tiles the queries), got '" +
             getOpName(md.op) + "'";
    if (md.op == OpKind::AttentionBackward && md.kernel != "simt" &&
        md.kernel != "mma")
      return "field 'kernel': cuda attention_backward kernels are SIMT or "
             "mma kernels, got '" +
             md.kernel + "'";
    if (!md.kernel.empty() && md.kernel != "simt" && md.kernel != "mma" &&
        md.kernel != "wgmma")
      return "field 'kernel': expected one of simt, mma, wgmma, got '" +
             md.kernel + "'";
  } else {
    if (md.target.triple.empty())
      return std::string("field 'target.triple' must not be empty");
    if (md.files.library.empty() && md.files.object.empty())
      return std::string("field 'files': a cpu artifact needs 'library' or "
                         "'object'");
    if (!md.kernel.empty())
      return std::string("field 'kernel' applies to cuda targets only");
    if (md.splitKv)
      return std::string("field 'split_kv' applies to cuda targets only (the "
                         "cpu kernels split the keys across threads "
                         "themselves)");
  }

  // Launch configuration.
  if (md.launch) {
    const LaunchInfo &launch = *md.launch;
    int64_t threads = 1;
    for (size_t i = 0; i < 3; ++i) {
      int64_t b = launch.block[i];
      if (b <= 0)
        return cat("field 'launch.block[", i, "]' must be positive, got ", b);
      if (b > 1024)
        return cat("field 'launch.block[", i, "]' is ", b,
                   ", more than CUDA's 1024 threads per block");
      threads *= b;
    }
    if (threads > 1024)
      return cat("field 'launch.block': ", threads,
                 " threads per block exceed CUDA's 1024");
    if (launch.staticSharedBytes < 0 || launch.dynamicSharedBytes < 0)
      return std::string("field 'launch': shared memory sizes must not be "
                         "negative");
    if (launch.dynamicSharedBytes > UINT32_MAX)
      return std::string("field 'launch.dynamic_shared_bytes' is too large");
    // Each axis once: the kernel reads its tile, head and batch entry from
    // the block's coordinates.
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < i; ++j)
        if (launch.grid[i] == launch.grid[j])
          return "field 'launch.grid': '" + getGridAxisName(launch.grid[i]) +
                 "' appears twice (expected q_tiles, heads and batch, or "
                 "packed_q_tiles, kv_heads and batch, each once)";
    // The packed axes go together: the packed tiles of a kv head's query
    // heads, over the kv heads.
    auto has = [&](GridAxis axis) {
      return std::find(launch.grid.begin(), launch.grid.end(), axis) !=
             launch.grid.end();
    };
    if (has(GridAxis::PackedQueryTiles) != has(GridAxis::KvHeads) ||
        has(GridAxis::PackedQueryTiles) == has(GridAxis::QueryTiles) ||
        has(GridAxis::KeyTiles))
      return std::string("field 'launch.grid': expected q_tiles, heads and "
                         "batch, or packed_q_tiles, kv_heads and batch");
    if (has(GridAxis::PackedQueryTiles) &&
        (md.kvHeads <= 0 || md.heads % md.kvHeads != 0))
      return std::string("field 'launch.grid': packed query heads need "
                         "heads to be a multiple of kv_heads");
    // A split-KV kernel's merge entry, and only theirs.
    if (md.splitKv != !launch.mergeSymbol.empty())
      return std::string(md.splitKv ? "field 'launch.merge': a split_kv "
                                      "kernel needs its merge entry"
                                    : "field 'launch.merge' belongs to "
                                      "split_kv kernels");
    // The backward's dK/dV entry, and only theirs.
    bool backward = md.op == OpKind::AttentionBackward;
    if (backward != !launch.dkdvSymbol.empty())
      return std::string(backward ? "field 'launch.dkdv': an "
                                    "attention_backward kernel needs its "
                                    "dK/dV entry"
                                  : "field 'launch.dkdv' belongs to "
                                    "attention_backward kernels");
    if (backward) {
      if (has(GridAxis::PackedQueryTiles))
        return std::string("field 'launch.grid': an attention_backward "
                           "kernel's dQ entry runs over q_tiles, heads and "
                           "batch");
      if (!isIdentifier(launch.dkdvSymbol) || launch.dkdvSymbol == md.symbol)
        return "field 'launch.dkdv.symbol': '" + launch.dkdvSymbol +
               "' is not a C identifier other than the symbol";
      // The kernel reads its key tile, kv head and batch entry from the
      // block's x, y and z, in that order.
      if (launch.dkdvGrid != std::array<GridAxis, 3>{GridAxis::KeyTiles,
                                                     GridAxis::KvHeads,
                                                     GridAxis::Batch})
        return std::string("field 'launch.dkdv.grid': expected [k_tiles, "
                           "kv_heads, batch] (the dK/dV kernel's x, y, z)");
      if (launch.dkdvStaticSharedBytes < 0)
        return std::string("field 'launch.dkdv.static_shared_bytes' must "
                           "not be negative");
      if (launch.dynamicSharedBytes != 0)
        return std::string("field 'launch.dynamic_shared_bytes': the "
                           "backward's kernels take no dynamic shared "
                           "memory");
    }
    if (md.splitKv) {
      if (!isIdentifier(launch.mergeSymbol) ||
          launch.mergeSymbol == md.symbol)
        return "field 'launch.merge.symbol': '" + launch.mergeSymbol +
               "' is not a C identifier other than the symbol";
      const std::array<int64_t, 3> &mb = launch.mergeBlock;
      if (mb[0] < 32 || mb[0] > 1024 || mb[0] % 32 != 0 || mb[1] != 1 ||
          mb[2] != 1)
        return cat("field 'launch.merge.block': expected [32 * w, 1, 1] "
                   "with 1 <= w <= 32 (one warp per row), got [",
                   mb[0], ", ", mb[1], ", ", mb[2], "]");
    }
  }
  return std::nullopt;
}

MaybeError fa::runtime::verifyKernelSignature(const KernelMetadata &md) {
  if (md.name.empty())
    return std::string("field 'name' must not be empty");
  if (!isIdentifier(md.symbol))
    return "field 'symbol': '" + md.symbol + "' is not a C identifier";
  if (md.dtype != DType::F32 && md.dtype != DType::F16 &&
      md.dtype != DType::BF16)
    return "field 'dtype': expected f32, f16 or bf16, got '" +
           getDTypeName(md.dtype) + "'";

  // Op attributes.
  if (md.op == OpKind::AttentionBackward) {
    if (!md.hasLse)
      return std::string("field 'has_lse': the backward op reads the "
                         "forward's lse, so it must be true");
    if (md.pageSize != 0 || md.varlen || md.splitKv ||
        md.modifiers.hasRegions() || md.modifiers.hasBlockMask())
      return std::string("fields 'page_size', 'varlen', 'split_kv', "
                         "'score_mod', 'mask_mod' and 'block_tiles' are not "
                         "available on attention_backward kernels");
  }
  if (isAttentionOp(md.op)) {
    const std::pair<const char *, int64_t> positives[] = {
        {"head_dim", md.headDim}, {"value_head_dim", md.valueHeadDim},
        {"heads", md.heads},      {"kv_heads", md.kvHeads},
        {"block_q", md.blockQ},   {"block_kv", md.blockKV}};
    for (auto [name, value] : positives)
      if (value <= 0)
        return cat("field '", name, "' must be positive, got ", value);
    if (md.heads % md.kvHeads != 0)
      return cat("fields 'heads' (", md.heads, ") and 'kv_heads' (",
                 md.kvHeads, "): heads must be a multiple of kv_heads");
    if (!std::isfinite(md.scale))
      return std::string("field 'scale' must be finite");
    // The modifiers, with the op's bounds (positions are below 2^31).
    const ModifierInfo &mods = md.modifiers;
    constexpr int64_t kMaxPosition = (int64_t(1) << 31) - 1;
    if (mods.windowLeft < -1 || mods.windowRight < -1 ||
        mods.windowLeft > kMaxPosition || mods.windowRight > kMaxPosition)
      return cat("field 'window': bounds must be in [-1, 2^31 - 1] (-1 = "
                 "unbounded), got [",
                 mods.windowLeft, ", ", mods.windowRight, "]");
    if (mods.softcap && (!(*mods.softcap > 0) || !std::isfinite(*mods.softcap)))
      return std::string("field 'softcap' must be positive and finite");
    if (mods.chunk < 0 || mods.chunk > kMaxPosition)
      return cat("field 'chunk' must be in [1, 2^31 - 1], got ", mods.chunk);
    // The serving forms, with fa.attention's rules (docs/serving.md).
    if (md.pageSize < 0 || md.pageSize > kMaxPosition)
      return cat("field 'page_size' must be in [1, 2^31 - 1], got ",
                 md.pageSize);
    if (md.pageSize > 0) {
      if (!md.hasKvLens)
        return std::string("field 'page_size': a paged cache needs kv_lens "
                           "(has_kv_lens), the number of keys of each "
                           "sequence");
      if (mods.segments || mods.hasBlockMask() || md.varlen)
        return std::string("field 'page_size': segment ids, block masks "
                           "and the varlen form are not available with a "
                           "paged cache");
    }
    if (md.varlen && (md.hasKvLens || md.mask != MaskKind::None ||
                      mods.segments || mods.hasBlockMask()))
      return std::string("field 'varlen': key lengths, masks, segment ids "
                         "and block masks are not available with the "
                         "variable-length form");
    if (md.splitKv && (md.varlen || mods.hasRegions() || mods.hasBlockMask()))
      return std::string("field 'split_kv': the variable-length form, "
                         "score_mod / mask_mod regions and block masks are "
                         "not available with split-KV");
  } else {
    if (md.pageSize != 0 || md.varlen || md.splitKv)
      return std::string("fields 'page_size', 'varlen' and 'split_kv' belong "
                         "to attention kernels");
    if (md.rank < 1 || md.rank > 4)
      return cat("field 'rank' must be in [1, 4], got ", md.rank);
    if (md.dimension < 0 || md.dimension >= md.rank)
      return cat("field 'dimension' must be in [0, ", md.rank, "), got ",
                 md.dimension);
  }

  // Params: the roles the op and its flags call for, each once.
  std::vector<ParamRole> expected;
  if (isAttentionOp(md.op)) {
    expected = {ParamRole::Query, ParamRole::Key, ParamRole::Value,
                ParamRole::Output};
    if (md.op == OpKind::AttentionBackward)
      expected.insert(expected.end(),
                      {ParamRole::GradOutput, ParamRole::GradQuery,
                       ParamRole::GradKey, ParamRole::GradValue});
    if (md.hasKvLens)
      expected.push_back(ParamRole::KvLens);
    if (md.mask != MaskKind::None)
      expected.push_back(ParamRole::Mask);
    if (md.hasLse)
      expected.push_back(ParamRole::Lse);
    if (md.modifiers.alibi != AlibiKind::None)
      expected.push_back(ParamRole::Alibi);
    if (md.modifiers.segments) {
      expected.push_back(ParamRole::QSegments);
      expected.push_back(ParamRole::KSegments);
    }
    if (md.modifiers.hasBlockMask())
      expected.push_back(ParamRole::BlockMask);
    if (md.pageSize > 0)
      expected.push_back(ParamRole::BlockTable);
    if (md.varlen) {
      expected.push_back(ParamRole::CuSeqlensQ);
      expected.push_back(ParamRole::CuSeqlensK);
    }
    if (md.splitKv) {
      expected.push_back(ParamRole::PartialOutput);
      expected.push_back(ParamRole::PartialLse);
    }
  } else {
    expected = {ParamRole::Input, ParamRole::Output};
  }
  for (size_t i = 0; i < md.params.size(); ++i) {
    const ParamInfo &param = md.params[i];
    std::string where = cat("params[", i, "] ('", param.name, "')");
    if (!isIdentifier(param.name))
      return cat("field 'params[", i, "].name': '", param.name,
                 "' is not an identifier");
    if (param.role == ParamRole::ModOperand) {
      // The regions' tensors: any number, fixed shapes, f32 or i32.
      if (!md.modifiers.hasRegions())
        return where + ": role 'mod_operand' belongs to kernels with a "
                       "score_mod or mask_mod (check score_mod, mask_mod)";
      if (param.dtype != DType::F32 && param.dtype != DType::I32)
        return where + ": dtype '" + getDTypeName(param.dtype) +
               "', expected f32 or i32";
      if (param.getRank() < 1 || param.getRank() > FA_MAX_RANK)
        return cat(where, ": rank ", param.getRank(), ", expected 1 to ",
                   FA_MAX_RANK);
      for (size_t d = 0; d < param.shape.size(); ++d)
        if (param.shape[d].isSymbol() || param.shape[d].size < 0)
          return cat(where, ": shape ", formatShape(param.shape), ": dim ",
                     d, " must be a fixed size");
      continue;
    }
    if (std::find(expected.begin(), expected.end(), param.role) ==
        expected.end())
      return where + ": role '" + getRoleName(param.role) +
             "' does not belong to this " + getOpName(md.op) +
             " kernel (check has_kv_lens, mask, has_lse, alibi, "
             "has_segments, block_tiles, page_size, varlen, split_kv)";
    for (size_t j = 0; j < i; ++j)
      if (md.params[j].role == param.role)
        return where + ": role '" + getRoleName(param.role) +
               "' appears twice";

    // Dtype.
    bool dtypeOk;
    std::string wanted;
    switch (param.role) {
    case ParamRole::KvLens:
    case ParamRole::QSegments:
    case ParamRole::KSegments:
    case ParamRole::BlockTable:
    case ParamRole::CuSeqlensQ:
    case ParamRole::CuSeqlensK:
      dtypeOk = param.dtype == DType::I32;
      wanted = "i32";
      break;
    case ParamRole::Alibi:
      dtypeOk = param.dtype == DType::F32;
      wanted = "f32";
      break;
    case ParamRole::BlockMask:
      dtypeOk = param.dtype == DType::I8;
      wanted = "i8";
      break;
    case ParamRole::Lse:
    case ParamRole::PartialOutput:
    case ParamRole::PartialLse:
      dtypeOk = param.dtype == DType::F32;
      wanted = "f32";
      break;
    case ParamRole::Mask:
      if (md.mask == MaskKind::Bool) {
        dtypeOk = param.dtype == DType::I8;
        wanted = "i8 (a bool mask, one byte per element)";
      } else {
        dtypeOk = param.dtype == DType::F32 || param.dtype == DType::F16 ||
                  param.dtype == DType::BF16;
        wanted = "f32, f16 or bf16 (an additive mask)";
      }
      break;
    default:
      dtypeOk = param.dtype == md.dtype;
      wanted = getDTypeName(md.dtype);
      break;
    }
    if (!dtypeOk)
      return where + ": dtype '" + getDTypeName(param.dtype) +
             "', expected " + wanted;

    // Alignment: a power of two, at least the element size.
    if (param.alignment != 0) {
      int64_t a = param.alignment;
      if (a < getDTypeSize(param.dtype) || a > 4096 || (a & (a - 1)) != 0)
        return cat(where, ": alignment ", a,
                   " must be a power of two from the element size (",
                   getDTypeSize(param.dtype), ") to 4096");
    }

    // Rank and shape.
    int64_t rank =
        isAttentionOp(md.op)
            ? static_cast<int64_t>(getCanonicalShape(md, param.role).size())
            : md.rank;
    if (param.getRank() != rank)
      return cat(where, ": rank ", param.getRank(), ", expected ", rank);
    std::vector<std::string> canonical = getCanonicalShape(md, param.role);
    for (size_t d = 0; d < param.shape.size(); ++d) {
      const ShapeDim &dim = param.shape[d];
      const std::string &symbol = canonical[d];
      std::optional<int64_t> fixed = getStaticSymbolValue(md, symbol);
      bool ok;
      if (dim.isSymbol())
        ok = dim.symbol == symbol;
      else if ((param.role == ParamRole::Mask ||
                param.role == ParamRole::BlockMask) &&
               d < 2 && dim.size == 1)
        ok = true; // a broadcast mask dim
      else if (fixed)
        ok = dim.size == *fixed;
      else
        ok = dim.size >= 0;
      if (!ok)
        return cat(where, ": shape ", formatShape(param.shape), ": dim ", d,
                   " must be '", symbol, "'",
                   fixed ? cat(" (= ", *fixed, ")") : std::string());
    }
  }
  for (ParamRole role : expected)
    if (!md.findParam(role))
      return "field 'params': no parameter with role '" + getRoleName(role) +
             "'";

  return std::nullopt;
}

// Reading
//===----------------------------------------------------------------------===//

namespace {

/// The JSON values the reader and the writer use; ordered, so that the
/// writer keeps the schema's field order.
using Json = nlohmann::ordered_json;

/// How a value appears in an error message: `null`, `true`, `64`, `64.0`,
/// `"text"` (cut at 40 bytes), `an array`, `an object`.
std::string describe(const Json &value) {
  if (value.is_array())
    return "an array";
  if (value.is_object())
    return "an object";
  if (value.is_string()) {
    const auto &text = value.get_ref<const std::string &>();
    if (text.size() > 40)
      return Json(text.substr(0, 40))
                 .dump(-1, ' ', false, Json::error_handler_t::replace) +
             "...";
  }
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// Reads the fields of a JSON object and names the field path in errors.
class ObjectReader {
public:
  ObjectReader(const Json &object, std::string path)
      : object(object), path(std::move(path)) {}

  std::string field(std::string_view key) const {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  const Json *find(std::string_view key) const {
    auto it = object.find(std::string(key));
    return it == object.end() ? nullptr : &*it;
  }

  bool has(std::string_view key) const { return find(key) != nullptr; }

  /// Looks up `key`: sets `out` (null when absent) and returns an error
  /// when it is required but missing, or present but fails `isType`.
  template <typename IsType>
  MaybeError lookup(std::string_view key, const Json *&out, bool required,
                    const char *expected, IsType isType) const {
    out = find(key);
    if (!out)
      return required ? MaybeError("missing field '" + field(key) + "'")
                      : std::nullopt;
    if (!isType(*out))
      return wrongType(field(key), expected, *out);
    return std::nullopt;
  }

  MaybeError getString(std::string_view key, std::string &out,
                       bool required = true) const {
    const Json *value;
    if (MaybeError err = lookup(key, value, required, "a string",
                                [](const Json &v) { return v.is_string(); }))
      return err;
    if (value)
      out = value->get<std::string>();
    return std::nullopt;
  }

  MaybeError getInt(std::string_view key, int64_t &out,
                    bool required = true) const {
    const Json *value = find(key);
    if (!value)
      return required ? MaybeError("missing field '" + field(key) + "'")
                      : std::nullopt;
    return readInteger(*value, field(key), out);
  }

  MaybeError getNumber(std::string_view key, double &out,
                       bool required = true) const {
    const Json *value;
    if (MaybeError err = lookup(key, value, required, "a number",
                                [](const Json &v) { return v.is_number(); }))
      return err;
    if (value)
      out = value->get<double>();
    return std::nullopt;
  }

  MaybeError getBool(std::string_view key, bool &out,
                     bool required = true) const {
    const Json *value;
    if (MaybeError err = lookup(key, value, required, "true or false",
                                [](const Json &v) { return v.is_boolean(); }))
      return err;
    if (value)
      out = value->get<bool>();
    return std::nullopt;
  }

  MaybeError getObject(std::string_view key, const Json *&out) const {
    return lookup(key, out, true, "an object",
                  [](const Json &v) { return v.is_object(); });
  }

  MaybeError getArray(std::string_view key, const Json *&out) const {
    return lookup(key, out, true, "an array",
                  [](const Json &v) { return v.is_array(); });
  }

  /// Reads a string field that must be one of `choices`.
  template <typename T, size_t N>
  MaybeError getEnum(std::string_view key, T &out,
                     const std::pair<const char *, T> (&choices)[N],
                     bool required = true) const {
    if (!has(key) && !required)
      return std::nullopt;
    std::string text;
    if (MaybeError err = getString(key, text))
      return err;
    return readChoice(text, field(key), out, choices);
  }

  /// Sets `out` to the choice named `text`, or names `field` in the error.
  template <typename T, size_t N>
  static MaybeError readChoice(const std::string &text,
                               const std::string &field, T &out,
                               const std::pair<const char *, T> (&choices)[N]) {
    for (const auto &[name, value] : choices)
      if (text == name) {
        out = value;
        return std::nullopt;
      }
    std::string list;
    for (size_t i = 0; i < N; ++i)
      list += std::string(i ? ", " : "") + choices[i].first;
    return "field '" + field + "': expected one of " + list + ", got '" + text +
           "'";
  }

  /// An integer written as one ("64", not "64.0" or "6.4e1") that fits
  /// int64_t.
  static MaybeError readInteger(const Json &value, const std::string &field,
                                int64_t &out) {
    if (value.is_number_unsigned()) {
      auto u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        return "field '" + field + "': integer " + value.dump() +
               " is out of range";
      out = static_cast<int64_t>(u);
      return std::nullopt;
    }
    if (value.is_number_integer()) {
      out = value.get<int64_t>();
      return std::nullopt;
    }
    return wrongType(field, "an integer", value);
  }

  static std::string wrongType(const std::string &field,
                               std::string_view expected, const Json &got) {
    return "field '" + field + "': expected " + std::string(expected) +
           ", got " + describe(got);
  }

private:
  const Json &object;
  std::string path;
};

constexpr std::pair<const char *, DType> kDTypeChoices[] = {
    {"f32", DType::F32},
    {"f16", DType::F16},
    {"bf16", DType::BF16},
    {"i32", DType::I32},
    {"i8", DType::I8}};

constexpr std::pair<const char *, GridAxis> kGridAxisChoices[] = {
    {"q_tiles", GridAxis::QueryTiles},
    {"heads", GridAxis::Heads},
    {"batch", GridAxis::Batch},
    {"packed_q_tiles", GridAxis::PackedQueryTiles},
    {"kv_heads", GridAxis::KvHeads},
    {"k_tiles", GridAxis::KeyTiles}};

} // namespace

static MaybeError readFilePath(const ObjectReader &reader,
                               std::string_view key, std::string &out) {
  if (MaybeError err = reader.getString(key, out, /*required=*/false))
    return err;
  if (!out.empty() && out.front() == '/')
    return "field '" + reader.field(key) + "': '" + out +
           "' must be relative to the metadata's directory";
  return std::nullopt;
}

static MaybeError readTarget(const Json &object, TargetInfo &target) {
  ObjectReader reader(object, "target");
  constexpr std::pair<const char *, TargetKind> kinds[] = {
      {"cuda", TargetKind::Cuda}, {"cpu", TargetKind::Cpu}};
  if (MaybeError err = reader.getEnum("kind", target.kind, kinds))
    return err;
  if (target.kind == TargetKind::Cuda) {
    if (MaybeError err = reader.getString("chip", target.chip))
      return err;
    return reader.getString("ptx_isa", target.ptxIsa);
  }
  if (MaybeError err = reader.getString("triple", target.triple))
    return err;
  if (MaybeError err = reader.getString("cpu", target.cpu, false))
    return err;
  if (reader.has("features")) {
    const Json *features = nullptr;
    if (MaybeError err = reader.getArray("features", features))
      return err;
    for (size_t i = 0; i < features->size(); ++i) {
      const Json &feature = (*features)[i];
      if (!feature.is_string())
        return ObjectReader::wrongType(cat("target.features[", i, "]"),
                                       "a string", feature);
      target.features.push_back(feature.get<std::string>());
    }
  }
  return std::nullopt;
}

/// Reads the `block` array of `reader`'s object (3 integers).
static MaybeError readBlock(const ObjectReader &reader,
                            std::array<int64_t, 3> &block) {
  const Json *array = nullptr;
  if (MaybeError err = reader.getArray("block", array))
    return err;
  std::string field = reader.field("block");
  if (array->size() != 3)
    return cat("field '", field, "': expected 3 integers, got ",
               array->size());
  for (size_t i = 0; i < 3; ++i)
    if (MaybeError err = ObjectReader::readInteger(
            (*array)[i], cat(field, "[", i, "]"), block[i]))
      return err;
  return std::nullopt;
}

static MaybeError readLaunch(const Json &object, LaunchInfo &launch) {
  ObjectReader reader(object, "launch");
  if (MaybeError err = readBlock(reader, launch.block))
    return err;
  const Json *grid = nullptr;
  if (MaybeError err = reader.getArray("grid", grid))
    return err;
  if (grid->size() != 3)
    return cat("field 'launch.grid': expected 3 axes, got ", grid->size());
  for (size_t i = 0; i < 3; ++i) {
    const Json &axis = (*grid)[i];
    std::string field = cat("launch.grid[", i, "]");
    if (!axis.is_string())
      return ObjectReader::wrongType(field, "a string", axis);
    if (MaybeError err = ObjectReader::readChoice(
            axis.get<std::string>(), field, launch.grid[i], kGridAxisChoices))
      return err;
  }
  if (MaybeError err = reader.getInt("static_shared_bytes",
                                     launch.staticSharedBytes, false))
    return err;
  if (MaybeError err = reader.getInt("dynamic_shared_bytes",
                                     launch.dynamicSharedBytes, false))
    return err;
  if (reader.has("dkdv")) {
    const Json *dkdv = nullptr;
    if (MaybeError err = reader.getObject("dkdv", dkdv))
      return err;
    ObjectReader dkdvReader(*dkdv, "launch.dkdv");
    if (MaybeError err = dkdvReader.getString("symbol", launch.dkdvSymbol))
      return err;
    if (launch.dkdvSymbol.empty())
      return std::string("field 'launch.dkdv.symbol' must not be empty");
    const Json *dkdvGrid = nullptr;
    if (MaybeError err = dkdvReader.getArray("grid", dkdvGrid))
      return err;
    if (dkdvGrid->size() != 3)
      return cat("field 'launch.dkdv.grid': expected 3 axes, got ",
                 dkdvGrid->size());
    for (size_t i = 0; i < 3; ++i) {
      const Json &axis = (*dkdvGrid)[i];
      std::string field = cat("launch.dkdv.grid[", i, "]");
      if (!axis.is_string())
        return ObjectReader::wrongType(field, "a string", axis);
      if (MaybeError err =
              ObjectReader::readChoice(axis.get<std::string>(), field,
                                       launch.dkdvGrid[i], kGridAxisChoices))
        return err;
    }
    if (MaybeError err = dkdvReader.getInt("static_shared_bytes",
                                           launch.dkdvStaticSharedBytes, false))
      return err;
  }
  if (!reader.has("merge"))
    return std::nullopt;
  const Json *merge = nullptr;
  if (MaybeError err = reader.getObject("merge", merge))
    return err;
  ObjectReader mergeReader(*merge, "launch.merge");
  if (MaybeError err = mergeReader.getString("symbol", launch.mergeSymbol))
    return err;
  if (MaybeError err = readBlock(mergeReader, launch.mergeBlock))
    return err;
  if (launch.mergeSymbol.empty())
    return std::string("field 'launch.merge.symbol' must not be empty");
  return std::nullopt;
}

/// The optional modifier fields of an attention kernel.
static MaybeError readModifiers(const ObjectReader &reader,
                                ModifierInfo &mods) {
  if (const Json *window = reader.find("window")) {
    if (!window->is_array() || window->size() != 2)
      return ObjectReader::wrongType(reader.field("window"),
                                     "an array of two integers [left, right]",
                                     *window);
    if (MaybeError err = ObjectReader::readInteger(
            (*window)[0], reader.field("window") + "[0]", mods.windowLeft))
      return err;
    if (MaybeError err = ObjectReader::readInteger(
            (*window)[1], reader.field("window") + "[1]", mods.windowRight))
      return err;
  }
  if (reader.has("softcap")) {
    double cap = 0;
    if (MaybeError err = reader.getNumber("softcap", cap))
      return err;
    mods.softcap = cap;
  }
  if (reader.has("chunk")) {
    if (MaybeError err = reader.getInt("chunk", mods.chunk))
      return err;
    if (mods.chunk <= 0)
      return cat("field 'chunk' must be in [1, 2^31 - 1], got ", mods.chunk);
  }
  constexpr std::pair<const char *, AlibiKind> alibis[] = {
      {"none", AlibiKind::None},
      {"heads", AlibiKind::Heads},
      {"batch_heads", AlibiKind::BatchHeads}};
  if (MaybeError err =
          reader.getEnum("alibi", mods.alibi, alibis, /*required=*/false))
    return err;
  if (MaybeError err = reader.getBool("has_segments", mods.segments, false))
    return err;
  if (MaybeError err = reader.getBool("score_mod", mods.scoreMod, false))
    return err;
  if (MaybeError err = reader.getBool("mask_mod", mods.maskMod, false))
    return err;
  if (const Json *tiles = reader.find("block_tiles")) {
    if (!tiles->is_array() || tiles->size() != 2)
      return ObjectReader::wrongType(reader.field("block_tiles"),
                                     "an array of two integers [tq, tk]",
                                     *tiles);
    if (MaybeError err = ObjectReader::readInteger(
            (*tiles)[0], reader.field("block_tiles") + "[0]",
            mods.blockTileQ))
      return err;
    if (MaybeError err = ObjectReader::readInteger(
            (*tiles)[1], reader.field("block_tiles") + "[1]",
            mods.blockTileKV))
      return err;
    if (mods.blockTileQ <= 0 || mods.blockTileKV <= 0)
      return cat("field 'block_tiles' must hold two positive tile sizes, "
                 "got [",
                 mods.blockTileQ, ", ", mods.blockTileKV, "]");
    if (!mods.maskMod)
      return std::string("field 'block_tiles' belongs to kernels with a "
                         "mask_mod (check mask_mod)");
  }
  return std::nullopt;
}

static MaybeError readParam(const Json &value, size_t index, ParamInfo &param) {
  std::string path = cat("params[", index, "]");
  if (!value.is_object())
    return ObjectReader::wrongType(path, "an object", value);
  ObjectReader reader(value, path);
  if (MaybeError err = reader.getString("name", param.name))
    return err;
  constexpr std::pair<const char *, ParamRole> roles[] = {
      {"query", ParamRole::Query},
      {"key", ParamRole::Key},
      {"value", ParamRole::Value},
      {"kv_lens", ParamRole::KvLens},
      {"mask", ParamRole::Mask},
      {"output", ParamRole::Output},
      {"lse", ParamRole::Lse},
      {"input", ParamRole::Input},
      {"alibi", ParamRole::Alibi},
      {"q_segments", ParamRole::QSegments},
      {"k_segments", ParamRole::KSegments},
      {"mod_operand", ParamRole::ModOperand},
      {"block_mask", ParamRole::BlockMask},
      {"block_table", ParamRole::BlockTable},
      {"cu_seqlens_q", ParamRole::CuSeqlensQ},
      {"cu_seqlens_k", ParamRole::CuSeqlensK},
      {"partial_o", ParamRole::PartialOutput},
      {"partial_lse", ParamRole::PartialLse},
      {"grad_output", ParamRole::GradOutput},
      {"grad_query", ParamRole::GradQuery},
      {"grad_key", ParamRole::GradKey},
      {"grad_value", ParamRole::GradValue}};
  if (MaybeError err = reader.getEnum("role", param.role, roles))
    return err;
  if (MaybeError err = reader.getEnum("dtype", param.dtype, kDTypeChoices))
    return err;
  int64_t rank = 0;
  if (MaybeError err = reader.getInt("rank", rank))
    return err;
  const Json *shape = nullptr;
  if (MaybeError err = reader.getArray("shape", shape))
    return err;
  if (static_cast<int64_t>(shape->size()) != rank)
    return cat("field '", path, ".shape': ", shape->size(),
               " entries for rank ", rank);
  for (size_t i = 0; i < shape->size(); ++i) {
    const Json &dim = (*shape)[i];
    std::string field = cat(path, ".shape[", i, "]");
    if (dim.is_string() && !dim.get_ref<const std::string &>().empty()) {
      param.shape.push_back(ShapeDim::sym(dim.get<std::string>()));
      continue;
    }
    if (!dim.is_number_integer())
      return ObjectReader::wrongType(field, "a symbol string or an integer",
                                     dim);
    int64_t size;
    if (MaybeError err = ObjectReader::readInteger(dim, field, size))
      return err;
    param.shape.push_back(ShapeDim::fixed(size));
  }
  return reader.getInt("alignment", param.alignment, /*required=*/false);
}

/// Reads the fields of the top-level object into `md`.
static MaybeError readMetadata(const Json &root, KernelMetadata &md) {
  ObjectReader reader(root, "");

  if (MaybeError err = reader.getString("format", md.format))
    return err;
  if (md.format != kMetadataFormat) {
    if (startsWith(md.format, "fa-kernel/"))
      return "unsupported format version '" + md.format +
             "': this runtime reads " + kMetadataFormat +
             " (recompile the kernel with this fa-compile)";
    return "field 'format': unknown format '" + md.format + "', expected " +
           kMetadataFormat;
  }
  if (MaybeError err = reader.getString("name", md.name))
    return err;
  constexpr std::pair<const char *, OpKind> ops[] = {
      {"attention", OpKind::Attention},
      {"softmax", OpKind::Softmax},
      {"attention_backward", OpKind::AttentionBackward}};
  if (MaybeError err = reader.getEnum("op", md.op, ops))
    return err;
  if (MaybeError err = reader.getString("generator", md.generator, false))
    return err;

  const Json *target = nullptr;
  if (MaybeError err = reader.getObject("target", target))
    return err;
  if (MaybeError err = readTarget(*target, md.target))
    return err;
  if (MaybeError err = reader.getString("kernel", md.kernel, false))
    return err;

  const Json *files = nullptr;
  if (MaybeError err = reader.getObject("files", files))
    return err;
  ObjectReader fileReader(*files, "files");
  const std::pair<const char *, std::string *> fileFields[] = {
      {"ptx", &md.files.ptx},
      {"cubin", &md.files.cubin},
      {"object", &md.files.object},
      {"library", &md.files.library},
      {"header", &md.files.header}};
  for (auto [key, out] : fileFields)
    if (MaybeError err = readFilePath(fileReader, key, *out))
      return err;

  if (MaybeError err = reader.getString("symbol", md.symbol))
    return err;
  if (MaybeError err = reader.getString("signature", md.signature))
    return err;
  if (MaybeError err = reader.getEnum("dtype", md.dtype, kDTypeChoices))
    return err;

  if (isAttentionOp(md.op)) {
    const std::pair<const char *, int64_t *> ints[] = {
        {"head_dim", &md.headDim}, {"value_head_dim", &md.valueHeadDim},
        {"heads", &md.heads},      {"kv_heads", &md.kvHeads},
        {"block_q", &md.blockQ},   {"block_kv", &md.blockKV}};
    for (auto [key, out] : ints)
      if (MaybeError err = reader.getInt(key, *out))
        return err;
    constexpr std::pair<const char *, Causal> causals[] = {
        {"none", Causal::None},
        {"top_left", Causal::TopLeft},
        {"bottom_right", Causal::BottomRight}};
    if (MaybeError err = reader.getEnum("causal", md.causal, causals))
      return err;
    md.scale = md.headDim > 0 ? 1.0 / std::sqrt(double(md.headDim)) : 0.0;
    if (MaybeError err = reader.getNumber("scale", md.scale, false))
      return err;
    constexpr std::pair<const char *, MaskKind> masks[] = {
        {"none", MaskKind::None},
        {"bool", MaskKind::Bool},
        {"additive", MaskKind::Additive}};
    if (MaybeError err =
            reader.getEnum("mask", md.mask, masks, /*required=*/false))
      return err;
    if (MaybeError err = reader.getBool("has_kv_lens", md.hasKvLens, false))
      return err;
    if (MaybeError err = reader.getBool("has_lse", md.hasLse, false))
      return err;
    if (MaybeError err = readModifiers(reader, md.modifiers))
      return err;
    if (reader.has("page_size")) {
      if (MaybeError err = reader.getInt("page_size", md.pageSize))
        return err;
      if (md.pageSize <= 0)
        return cat("field 'page_size' must be positive, got ", md.pageSize);
    }
    if (MaybeError err = reader.getBool("varlen", md.varlen, false))
      return err;
    if (MaybeError err = reader.getBool("split_kv", md.splitKv, false))
      return err;
  } else {
    if (MaybeError err = reader.getInt("rank", md.rank))
      return err;
    if (MaybeError err = reader.getInt("dimension", md.dimension))
      return err;
  }

  if (reader.has("launch")) {
    const Json *launch = nullptr;
    if (MaybeError err = reader.getObject("launch", launch))
      return err;
    md.launch.emplace();
    if (MaybeError err = readLaunch(*launch, *md.launch))
      return err;
  }

  const Json *params = nullptr;
  if (MaybeError err = reader.getArray("params", params))
    return err;
  for (size_t i = 0; i < params->size(); ++i) {
    ParamInfo param;
    if (MaybeError err = readParam((*params)[i], i, param))
      return err;
    md.params.push_back(std::move(param));
  }
  return verifyKernelMetadata(md);
}

/// nlohmann-json's "[json.exception.parse_error.101] parse error at line 1,
/// column 8: syntax error while parsing value - invalid literal; last read:
/// '...'; expected end of input" without the exception's id, "parse error
/// at " and the last read token (which runs over lines).
static std::string formatJsonError(std::string_view what) {
  if (startsWith(what, "[json.exception.")) {
    size_t end = what.find("] ");
    if (end != std::string_view::npos)
      what.remove_prefix(end + 2);
  }
  if (startsWith(what, "parse error at "))
    what.remove_prefix(std::string_view("parse error at ").size());
  std::string text(what);
  size_t lastRead = text.find("; last read: '");
  if (lastRead != std::string::npos) {
    size_t end = text.rfind("'; expected ");
    if (end == std::string::npos || end < lastRead)
      end = text.size() - 1; // the closing quote
    text.erase(lastRead, end + 1 - lastRead);
  }
  return text;
}

/// Parses `text` into `root` (strict JSON, and no duplicate keys: the JSON
/// library would keep the last one).
static MaybeError parseJson(std::string_view text, Json &root) {
  std::vector<std::set<std::string>> keys; // one set per open object
  std::string duplicate;
  auto callback = [&](int, Json::parse_event_t event, Json &parsed) {
    if (event == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == Json::parse_event_t::key && !keys.empty()) {
      const auto &key = parsed.get_ref<const std::string &>();
      if (!keys.back().insert(key).second && duplicate.empty())
        duplicate = key;
    }
    return true;
  };
  try {
    root = Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::exception &e) {
    return "not valid JSON: " + formatJsonError(e.what());
  }
  if (!duplicate.empty())
    return "not valid JSON: duplicate key " +
           Json(duplicate).dump(-1, ' ', false, Json::error_handler_t::replace);
  return std::nullopt;
}

std::optional<KernelMetadata>
fa::runtime::parseKernelMetadata(std::string_view text, std::string &error) {
  // Nothing throws past this point: the JSON library's exceptions (and
  // std::bad_alloc) become the usual error message.
  try {
    Json root;
    if (MaybeError err = parseJson(text, root)) {
      error = *err;
      return std::nullopt;
    }
    if (!root.is_object()) {
      error = "expected a JSON object at the top level, got " + describe(root);
      return std::nullopt;
    }
    KernelMetadata md;
    if (MaybeError err = readMetadata(root, md)) {
      error = *err;
      return std::nullopt;
    }
    return md;
  } catch (const std::exception &e) {
    error = std::string("cannot read the metadata: ") + e.what();
    return std::nullopt;
  }
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

std::string fa::runtime::serializeKernelMetadata(const KernelMetadata &md,
                                                 std::string_view extraFields) {
  Json j = Json::object();
  j["format"] = md.format;
  j["name"] = md.name;
  j["op"] = getOpName(md.op);
  if (!md.generator.empty())
    j["generator"] = md.generator;
  Json &target = j["target"] = Json::object();
  if (md.target.kind == TargetKind::Cuda) {
    target["kind"] = "cuda";
    target["chip"] = md.target.chip;
    target["ptx_isa"] = md.target.ptxIsa;
  } else {
    target["kind"] = "cpu";
    target["triple"] = md.target.triple;
    if (!md.target.cpu.empty())
      target["cpu"] = md.target.cpu;
    target["features"] = md.target.features;
  }
  if (!md.kernel.empty())
    j["kernel"] = md.kernel;
  Json &files = j["files"] = Json::object();
  const std::pair<const char *, const std::string *> fileFields[] = {
      {"ptx", &md.files.ptx},
      {"cubin", &md.files.cubin},
      {"object", &md.files.object},
      {"library", &md.files.library},
      {"header", &md.files.header}};
  for (auto [key, value] : fileFields)
    if (!value->empty())
      files[key] = *value;
  j["symbol"] = md.symbol;
  j["signature"] = getKernelSignatureHash(md);
  j["dtype"] = getDTypeName(md.dtype);
  if (isAttentionOp(md.op)) {
    j["head_dim"] = md.headDim;
    j["value_head_dim"] = md.valueHeadDim;
    j["heads"] = md.heads;
    j["kv_heads"] = md.kvHeads;
    j["causal"] = getCausalName(md.causal);
    j["scale"] = md.scale;
    j["mask"] = getMaskKindName(md.mask);
    j["has_kv_lens"] = md.hasKvLens;
    j["has_lse"] = md.hasLse;
    j["block_q"] = md.blockQ;
    j["block_kv"] = md.blockKV;
    // The modifiers only when set, so that metadata without them reads as
    // before.
    const ModifierInfo &mods = md.modifiers;
    if (mods.hasWindow())
      j["window"] = {mods.windowLeft, mods.windowRight};
    if (mods.softcap)
      j["softcap"] = *mods.softcap;
    if (mods.chunk > 0)
      j["chunk"] = mods.chunk;
    if (mods.alibi != AlibiKind::None)
      j["alibi"] = getAlibiKindName(mods.alibi);
    if (mods.segments)
      j["has_segments"] = true;
    if (mods.scoreMod)
      j["score_mod"] = true;
    if (mods.maskMod)
      j["mask_mod"] = true;
    if (mods.hasBlockMask())
      j["block_tiles"] = {mods.blockTileQ, mods.blockTileKV};
    if (md.pageSize > 0)
      j["page_size"] = md.pageSize;
    if (md.varlen)
      j["varlen"] = true;
    if (md.splitKv)
      j["split_kv"] = true;
  } else {
    j["rank"] = md.rank;
    j["dimension"] = md.dimension;
  }
  if (md.launch) {
    Json &launch = j["launch"] = Json::object();
    launch["block"] = md.launch->block;
    Json &grid = launch["grid"] = Json::array();
    for (GridAxis axis : md.launch->grid)
      grid.push_back(getGridAxisName(axis));
    launch["static_shared_bytes"] = md.launch->staticSharedBytes;
    launch["dynamic_shared_bytes"] = md.launch->dynamicSharedBytes;
    if (!md.launch->mergeSymbol.empty())
      launch["merge"] = {{"symbol", md.launch->mergeSymbol},
                         {"block", md.launch->mergeBlock}};
    if (!md.launch->dkdvSymbol.empty()) {
      Json dkdvGrid = Json::array();
      for (GridAxis axis : md.launch->dkdvGrid)
        dkdvGrid.push_back(getGridAxisName(axis));
      launch["dkdv"] = {
          {"symbol", md.launch->dkdvSymbol},
          {"grid", dkdvGrid},
          {"static_shared_bytes", md.launch->dkdvStaticSharedBytes}};
    }
  }
  Json &params = j["params"] = Json::array();
  for (const ParamInfo &param : md.params) {
    Json p = Json::object();
    p["name"] = param.name;
    p["role"] = getRoleName(param.role);
    p["dtype"] = getDTypeName(param.dtype);
    p["rank"] = param.getRank();
    Json &shape = p["shape"] = Json::array();
    for (const ShapeDim &dim : param.shape) {
      if (dim.isSymbol())
        shape.push_back(dim.symbol);
      else
        shape.push_back(dim.size);
    }
    if (param.alignment > 0)
      p["alignment"] = param.alignment;
    params.push_back(std::move(p));
  }
  if (!extraFields.empty()) {
    Json extra = Json::parse(extraFields, nullptr, /*allow_exceptions=*/false);
    if (extra.is_object())
      for (const auto &item : extra.items())
        if (!j.contains(item.key()))
          j[item.key()] = item.value();
  }
  // Strings that are not UTF-8 are written with U+FFFD rather than
  // throwing.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

void fa::runtime::writeKernelMetadata(const KernelMetadata &md,
                                      std::ostream &os) {
  os << serializeKernelMetadata(md);
}

std::optional<std::string>
fa::runtime::getBackwardMismatch(const KernelMetadata &f,
                                 const KernelMetadata &b) {
  if (!f.hasLse)
    return "the forward '" + f.name +
           "' does not write the LSE the backward reads (compile it with "
           "--lse)";
  auto differs = [](const char *what, const std::string &fv,
                    const std::string &bv) -> std::optional<std::string> {
    if (fv == bv)
      return std::nullopt;
    return std::string(what) + " differs: " + fv + " in the forward, " + bv +
           " in the backward";
  };
  // Floats as the kernels hold them (float32), every digit that tells two
  // apart: equal text is equal value.
  auto num = [](double value) {
    std::ostringstream os;
    os.precision(std::numeric_limits<float>::max_digits10);
    os << static_cast<float>(value);
    return os.str();
  };
  auto window = [](const ModifierInfo &m) {
    return m.hasWindow() ? "(" + std::to_string(m.windowLeft) + ", " +
                               std::to_string(m.windowRight) + ")"
                         : std::string("none");
  };
  auto maskShape = [](const KernelMetadata &md) {
    const ParamInfo *mask = md.findParam(ParamRole::Mask);
    if (!mask)
      return std::string("none");
    std::string text = getDTypeName(mask->dtype) + " [";
    for (size_t i = 0; i < mask->shape.size(); ++i)
      text += (i ? ", " : "") + (mask->shape[i].symbol.empty()
                                     ? std::to_string(mask->shape[i].size)
                                     : mask->shape[i].symbol);
    return text + "]";
  };
  const ModifierInfo &fm = f.modifiers, &bm = b.modifiers;
  const std::pair<const char *, std::pair<std::string, std::string>> fields[] =
      {{"dtype", {getDTypeName(f.dtype), getDTypeName(b.dtype)}},
       {"head_dim", {std::to_string(f.headDim), std::to_string(b.headDim)}},
       {"value_head_dim",
        {std::to_string(f.valueHeadDim), std::to_string(b.valueHeadDim)}},
       {"heads", {std::to_string(f.heads), std::to_string(b.heads)}},
       {"kv_heads", {std::to_string(f.kvHeads), std::to_string(b.kvHeads)}},
       {"causal", {getCausalName(f.causal), getCausalName(b.causal)}},
       {"scale", {num(f.scale), num(b.scale)}},
       {"mask", {maskShape(f), maskShape(b)}},
       {"kv_lens", {f.hasKvLens ? "yes" : "no", b.hasKvLens ? "yes" : "no"}},
       {"window", {window(fm), window(bm)}},
       {"softcap",
        {fm.softcap ? num(*fm.softcap) : "none",
         bm.softcap ? num(*bm.softcap) : "none"}},
       {"chunk", {std::to_string(fm.chunk), std::to_string(bm.chunk)}},
       {"alibi", {getAlibiKindName(fm.alibi), getAlibiKindName(bm.alibi)}},
       {"segments", {fm.segments ? "yes" : "no", bm.segments ? "yes" : "no"}}};
  for (const auto &[what, values] : fields)
    if (std::optional<std::string> diff =
            differs(what, values.first, values.second))
      return diff;
  if (f.pageSize > 0 || f.varlen || f.splitKv || fm.hasRegions() ||
      fm.hasBlockMask())
    return "the forward '" + f.name +
           "' uses a paged cache, varlen, split-KV, score_mod / mask_mod "
           "regions or a block mask, which the backward op does not take";
  return std::nullopt;
}
