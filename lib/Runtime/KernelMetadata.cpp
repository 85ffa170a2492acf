//===- KernelMetadata.cpp - fa-kernel/1 artifact metadata -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/KernelMetadata.h"
#include "fa/Target/Chips.h"

#include "Json.h"
#include "RuntimeInternal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>

using namespace fa::runtime;
using MaybeError = std::optional<std::string>;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

std::string fa::runtime::getOpName(OpKind op) {
  return op == OpKind::Attention ? "attention" : "softmax";
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
  if (op == OpKind::Attention)
    return {"B", "Hq", "Hkv", "Nq", "Nk", "D", "Dv", "block_q", "block_kv"};
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

/// The canonical shape of `role`, as symbols.
static std::vector<std::string> getCanonicalShape(const KernelMetadata &md,
                                                  ParamRole role) {
  switch (role) {
  case ParamRole::Query:
    return {"B", "Hq", "Nq", "D"};
  case ParamRole::Key:
    return {"B", "Hkv", "Nk", "D"};
  case ParamRole::Value:
    return {"B", "Hkv", "Nk", "Dv"};
  case ParamRole::KvLens:
    return {"B"};
  case ParamRole::Mask:
    return {"B", "Hq", "Nq", "Nk"};
  case ParamRole::Output:
    if (md.op == OpKind::Attention)
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
  }
  return {};
}

/// The fixed value of a static symbol, or nullopt for dynamic ones.
static std::optional<int64_t> getStaticSymbolValue(const KernelMetadata &md,
                                                   std::string_view symbol) {
  if (symbol == "Hq")
    return md.heads;
  if (symbol == "Hkv")
    return md.kvHeads;
  if (symbol == "D")
    return md.headDim;
  if (symbol == "Dv")
    return md.valueHeadDim;
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
  add("o", ParamRole::Output, md.dtype);
  if (md.hasLse)
    add("lse", ParamRole::Lse, DType::F32);
  return params;
}

//===----------------------------------------------------------------------===//
// Semantic checks
//===----------------------------------------------------------------------===//

/// Expected rank of each attention role.
static int64_t getAttentionRank(ParamRole role) {
  switch (role) {
  case ParamRole::KvLens:
    return 1;
  case ParamRole::Lse:
    return 3;
  default:
    return 4;
  }
}

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
    std::vector<std::string> symbols = md.getSymbols();
    for (size_t i = 0; i < 3; ++i) {
      std::string error;
      if (!LaunchExpr::parse(launch.grid[i], symbols, error))
        return cat("field 'launch.grid[", i, "]': ", error);
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
  if (md.op == OpKind::Attention) {
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
  } else {
    if (md.rank < 1 || md.rank > 4)
      return cat("field 'rank' must be in [1, 4], got ", md.rank);
    if (md.dimension < 0 || md.dimension >= md.rank)
      return cat("field 'dimension' must be in [0, ", md.rank, "), got ",
                 md.dimension);
  }

  // Params: the roles the op and its flags call for, each once.
  std::vector<ParamRole> expected;
  if (md.op == OpKind::Attention) {
    expected = {ParamRole::Query, ParamRole::Key, ParamRole::Value,
                ParamRole::Output};
    if (md.hasKvLens)
      expected.push_back(ParamRole::KvLens);
    if (md.mask != MaskKind::None)
      expected.push_back(ParamRole::Mask);
    if (md.hasLse)
      expected.push_back(ParamRole::Lse);
  } else {
    expected = {ParamRole::Input, ParamRole::Output};
  }
  for (size_t i = 0; i < md.params.size(); ++i) {
    const ParamInfo &param = md.params[i];
    std::string where = cat("params[", i, "] ('", param.name, "')");
    if (!isIdentifier(param.name))
      return cat("field 'params[", i, "].name': '", param.name,
                 "' is not an identifier");
    if (std::find(expected.begin(), expected.end(), param.role) ==
        expected.end())
      return where + ": role '" + getRoleName(param.role) +
             "' does not belong to this " + getOpName(md.op) +
             " kernel (check has_kv_lens, mask, has_lse)";
    for (size_t j = 0; j < i; ++j)
      if (md.params[j].role == param.role)
        return where + ": role '" + getRoleName(param.role) +
               "' appears twice";

    // Dtype.
    bool dtypeOk;
    std::string wanted;
    switch (param.role) {
    case ParamRole::KvLens:
      dtypeOk = param.dtype == DType::I32;
      wanted = "i32";
      break;
    case ParamRole::Lse:
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

    // Rank and shape.
    int64_t rank = md.op == OpKind::Attention ? getAttentionRank(param.role)
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
      else if (param.role == ParamRole::Mask && d < 2 && dim.size == 1)
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

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

using json::Value;

/// Reads the fields of a JSON object and names the field path in errors.
class ObjectReader {
public:
  ObjectReader(const Value &object, std::string path)
      : object(object), path(std::move(path)) {}

  std::string field(std::string_view key) const {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

  std::string missing(std::string_view key) const {
    return "missing field '" + field(key) + "'";
  }

  std::string wrongType(std::string_view key, std::string_view expected,
                        const Value &got) const {
    return "field '" + field(key) + "': expected " + std::string(expected) +
           ", got " + got.describe();
  }

  bool has(std::string_view key) const { return object.find(key) != nullptr; }

  MaybeError getString(std::string_view key, std::string &out,
                       bool required = true) const {
    const Value *value = object.find(key);
    if (!value)
      return required ? MaybeError(missing(key)) : std::nullopt;
    if (!value->isString())
      return wrongType(key, "a string", *value);
    out = value->getString();
    return std::nullopt;
  }

  MaybeError getInt(std::string_view key, int64_t &out,
                    bool required = true) const {
    const Value *value = object.find(key);
    if (!value)
      return required ? MaybeError(missing(key)) : std::nullopt;
    return readInteger(*value, field(key), out);
  }

  MaybeError getNumber(std::string_view key, double &out,
                       bool required = true) const {
    const Value *value = object.find(key);
    if (!value)
      return required ? MaybeError(missing(key)) : std::nullopt;
    if (!value->isNumber())
      return wrongType(key, "a number", *value);
    out = value->getDouble();
    return std::nullopt;
  }

  MaybeError getBool(std::string_view key, bool &out,
                     bool required = true) const {
    const Value *value = object.find(key);
    if (!value)
      return required ? MaybeError(missing(key)) : std::nullopt;
    if (!value->isBool())
      return wrongType(key, "true or false", *value);
    out = value->getBool();
    return std::nullopt;
  }

  MaybeError getObject(std::string_view key, const Value *&out) const {
    const Value *value = object.find(key);
    if (!value)
      return missing(key);
    if (!value->isObject())
      return wrongType(key, "an object", *value);
    out = value;
    return std::nullopt;
  }

  MaybeError getArray(std::string_view key, const Value *&out) const {
    const Value *value = object.find(key);
    if (!value)
      return missing(key);
    if (!value->isArray())
      return wrongType(key, "an array", *value);
    out = value;
    return std::nullopt;
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
    for (const auto &[name, value] : choices)
      if (text == name) {
        out = value;
        return std::nullopt;
      }
    std::string list;
    for (size_t i = 0; i < N; ++i)
      list += std::string(i ? ", " : "") + choices[i].first;
    return "field '" + field(key) + "': expected one of " + list + ", got '" +
           text + "'";
  }

  /// An integer written as one ("64", not "64.0" or "6.4e1").
  static MaybeError readInteger(const Value &value, const std::string &field,
                                int64_t &out) {
    if (value.isInteger()) {
      out = value.getInteger();
      return std::nullopt;
    }
    if (value.isNumber() &&
        value.getNumberText().find_first_of(".eE") == std::string::npos)
      return "field '" + field + "': integer " + value.getNumberText() +
             " is out of range";
    return "field '" + field + "': expected an integer, got " +
           value.describe();
  }

private:
  const Value &object;
  std::string path;
};

constexpr std::pair<const char *, DType> kDTypeChoices[] = {
    {"f32", DType::F32},
    {"f16", DType::F16},
    {"bf16", DType::BF16},
    {"i32", DType::I32},
    {"i8", DType::I8}};

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

static MaybeError readTarget(const Value &object, TargetInfo &target) {
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
    const Value *features = nullptr;
    if (MaybeError err = reader.getArray("features", features))
      return err;
    const std::vector<Value> &list = features->getArray();
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].isString())
        return cat("field 'target.features[", i, "]': expected a string, got ",
                   list[i].describe());
      target.features.push_back(list[i].getString());
    }
  }
  return std::nullopt;
}

static MaybeError readLaunch(const Value &object, LaunchInfo &launch) {
  ObjectReader reader(object, "launch");
  const Value *block = nullptr;
  if (MaybeError err = reader.getArray("block", block))
    return err;
  if (block->getArray().size() != 3)
    return cat("field 'launch.block': expected 3 integers, got ",
               block->getArray().size());
  for (size_t i = 0; i < 3; ++i)
    if (MaybeError err = ObjectReader::readInteger(
            block->getArray()[i], cat("launch.block[", i, "]"),
            launch.block[i]))
      return err;
  const Value *grid = nullptr;
  if (MaybeError err = reader.getArray("grid", grid))
    return err;
  if (grid->getArray().size() != 3)
    return cat("field 'launch.grid': expected 3 entries, got ",
               grid->getArray().size());
  for (size_t i = 0; i < 3; ++i) {
    const Value &g = grid->getArray()[i];
    if (g.isInteger())
      launch.grid[i] = std::to_string(g.getInteger());
    else if (g.isString())
      launch.grid[i] = g.getString();
    else
      return cat("field 'launch.grid[", i,
                 "]': expected an integer or an expression string, got ",
                 g.describe());
  }
  if (MaybeError err = reader.getInt("static_shared_bytes",
                                     launch.staticSharedBytes, false))
    return err;
  return reader.getInt("dynamic_shared_bytes", launch.dynamicSharedBytes,
                       false);
}

static MaybeError readParam(const Value &value, size_t index,
                            ParamInfo &param) {
  std::string path = cat("params[", index, "]");
  if (!value.isObject())
    return "field '" + path + "': expected an object, got " + value.describe();
  ObjectReader reader(value, path);
  if (MaybeError err = reader.getString("name", param.name))
    return err;
  constexpr std::pair<const char *, ParamRole> roles[] = {
      {"query", ParamRole::Query},    {"key", ParamRole::Key},
      {"value", ParamRole::Value},    {"kv_lens", ParamRole::KvLens},
      {"mask", ParamRole::Mask},      {"output", ParamRole::Output},
      {"lse", ParamRole::Lse},        {"input", ParamRole::Input}};
  if (MaybeError err = reader.getEnum("role", param.role, roles))
    return err;
  if (MaybeError err = reader.getEnum("dtype", param.dtype, kDTypeChoices))
    return err;
  int64_t rank = 0;
  if (MaybeError err = reader.getInt("rank", rank))
    return err;
  const Value *shape = nullptr;
  if (MaybeError err = reader.getArray("shape", shape))
    return err;
  const std::vector<Value> &dims = shape->getArray();
  if (static_cast<int64_t>(dims.size()) != rank)
    return cat("field '", path, ".shape': ", dims.size(), " entries for rank ",
               rank);
  for (size_t i = 0; i < dims.size(); ++i) {
    const Value &dim = dims[i];
    if (dim.isInteger())
      param.shape.push_back(ShapeDim::fixed(dim.getInteger()));
    else if (dim.isString() && !dim.getString().empty())
      param.shape.push_back(ShapeDim::sym(dim.getString()));
    else
      return cat("field '", path, ".shape[", i,
                 "]': expected a symbol string or an integer, got ",
                 dim.describe());
  }
  return std::nullopt;
}

/// Reads the fields of the top-level object into `md`.
static MaybeError readMetadata(const Value &root, KernelMetadata &md) {
  ObjectReader reader(root, "");

  if (MaybeError err = reader.getString("format", md.format))
    return err;
  if (md.format != kMetadataFormat) {
    if (startsWith(md.format, "fa-kernel/"))
      return "unsupported format version '" + md.format +
             "': this runtime reads " + kMetadataFormat;
    return "field 'format': unknown format '" + md.format + "', expected " +
           kMetadataFormat;
  }
  if (MaybeError err = reader.getString("name", md.name))
    return err;
  constexpr std::pair<const char *, OpKind> ops[] = {
      {"attention", OpKind::Attention}, {"softmax", OpKind::Softmax}};
  if (MaybeError err = reader.getEnum("op", md.op, ops))
    return err;
  if (MaybeError err = reader.getString("generator", md.generator, false))
    return err;

  const Value *target = nullptr;
  if (MaybeError err = reader.getObject("target", target))
    return err;
  if (MaybeError err = readTarget(*target, md.target))
    return err;
  if (MaybeError err = reader.getString("kernel", md.kernel, false))
    return err;

  const Value *files = nullptr;
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
  if (MaybeError err = reader.getEnum("dtype", md.dtype, kDTypeChoices))
    return err;

  if (md.op == OpKind::Attention) {
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
  } else {
    if (MaybeError err = reader.getInt("rank", md.rank))
      return err;
    if (MaybeError err = reader.getInt("dimension", md.dimension))
      return err;
  }

  if (reader.has("launch")) {
    const Value *launch = nullptr;
    if (MaybeError err = reader.getObject("launch", launch))
      return err;
    md.launch.emplace();
    if (MaybeError err = readLaunch(*launch, *md.launch))
      return err;
  }

  const Value *params = nullptr;
  if (MaybeError err = reader.getArray("params", params))
    return err;
  const std::vector<Value> &list = params->getArray();
  for (size_t i = 0; i < list.size(); ++i) {
    ParamInfo param;
    if (MaybeError err = readParam(list[i], i, param))
      return err;
    md.params.push_back(std::move(param));
  }
  return verifyKernelMetadata(md);
}

std::optional<KernelMetadata>
fa::runtime::parseKernelMetadata(std::string_view text, std::string &error) {
  std::string jsonError;
  std::optional<json::Value> root = json::parse(text, jsonError);
  if (!root) {
    error = "not valid JSON: " + jsonError;
    return std::nullopt;
  }
  if (!root->isObject()) {
    error = "expected a JSON object at the top level, got " +
            std::string(json::describeKind(root->getKind()));
    return std::nullopt;
  }
  KernelMetadata md;
  if (MaybeError err = readMetadata(*root, md)) {
    error = *err;
    return std::nullopt;
  }
  return md;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

std::string fa::runtime::serializeKernelMetadata(const KernelMetadata &md) {
  json::Writer j;
  j.beginObject();
  j.member("format", md.format);
  j.member("name", md.name);
  j.member("op", getOpName(md.op));
  if (!md.generator.empty())
    j.member("generator", md.generator);
  j.key("target");
  j.beginObject();
  if (md.target.kind == TargetKind::Cuda) {
    j.member("kind", "cuda");
    j.member("chip", md.target.chip);
    j.member("ptx_isa", md.target.ptxIsa);
  } else {
    j.member("kind", "cpu");
    j.member("triple", md.target.triple);
    if (!md.target.cpu.empty())
      j.member("cpu", md.target.cpu);
    j.key("features");
    j.beginArray();
    for (const std::string &feature : md.target.features)
      j.stringValue(feature);
    j.endArray();
  }
  j.endObject();
  if (!md.kernel.empty())
    j.member("kernel", md.kernel);
  j.key("files");
  j.beginObject();
  const std::pair<const char *, const std::string *> fileFields[] = {
      {"ptx", &md.files.ptx},
      {"cubin", &md.files.cubin},
      {"object", &md.files.object},
      {"library", &md.files.library},
      {"header", &md.files.header}};
  for (auto [key, value] : fileFields)
    if (!value->empty())
      j.member(key, *value);
  j.endObject();
  j.member("symbol", md.symbol);
  j.member("dtype", getDTypeName(md.dtype));
  if (md.op == OpKind::Attention) {
    j.intMember("head_dim", md.headDim);
    j.intMember("value_head_dim", md.valueHeadDim);
    j.intMember("heads", md.heads);
    j.intMember("kv_heads", md.kvHeads);
    j.member("causal", getCausalName(md.causal));
    j.doubleMember("scale", md.scale);
    j.member("mask", getMaskKindName(md.mask));
    j.boolMember("has_kv_lens", md.hasKvLens);
    j.boolMember("has_lse", md.hasLse);
    j.intMember("block_q", md.blockQ);
    j.intMember("block_kv", md.blockKV);
  } else {
    j.intMember("rank", md.rank);
    j.intMember("dimension", md.dimension);
  }
  if (md.launch) {
    j.key("launch");
    j.beginObject();
    j.key("block");
    j.beginArray();
    for (int64_t b : md.launch->block)
      j.intValue(b);
    j.endArray();
    j.key("grid");
    j.beginArray();
    for (const std::string &g : md.launch->grid)
      j.stringValue(g);
    j.endArray();
    j.intMember("static_shared_bytes", md.launch->staticSharedBytes);
    j.intMember("dynamic_shared_bytes", md.launch->dynamicSharedBytes);
    j.endObject();
  }
  j.key("params");
  j.beginArray();
  for (const ParamInfo &param : md.params) {
    j.beginObject();
    j.member("name", param.name);
    j.member("role", getRoleName(param.role));
    j.member("dtype", getDTypeName(param.dtype));
    j.intMember("rank", param.getRank());
    j.key("shape");
    j.beginArray();
    for (const ShapeDim &dim : param.shape) {
      if (dim.isSymbol())
        j.stringValue(dim.symbol);
      else
        j.intValue(dim.size);
    }
    j.endArray();
    j.endObject();
  }
  j.endArray();
  j.endObject();
  return j.getText() + "\n";
}

void fa::runtime::writeKernelMetadata(const KernelMetadata &md,
                                      std::ostream &os) {
  os << serializeKernelMetadata(md);
}

//===----------------------------------------------------------------------===//
// LaunchExpr
//===----------------------------------------------------------------------===//

namespace fa {
namespace runtime {

/// Recursive descent over
///   expr   := term (('+' | '-') term)*
///   term   := factor (('*' | '/') factor)*
///   factor := INT | SYMBOL | '(' expr ')' | 'ceil' '(' expr '/' expr ')'
///           | 'cdiv' '(' expr ',' expr ')'
/// emitting postfix code.
class LaunchExprParser {
public:
  LaunchExprParser(std::string_view text,
                   const std::vector<std::string> &symbols, LaunchExpr &expr)
      : text(text), symbols(symbols), expr(expr) {}

  MaybeError parse() {
    if (MaybeError err = parseExpr())
      return err;
    skipSpace();
    if (pos != text.size())
      return error("unexpected '" + std::string(text.substr(pos, 1)) + "'");
    return std::nullopt;
  }

private:
  static constexpr int kMaxDepth = 32;

  std::string error(const std::string &message) const {
    return cat("bad expression '", text, "': ", message, " at offset ", pos);
  }

  void skipSpace() {
    while (pos < text.size() && isSpace(text[pos]))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  void emit(LaunchExpr::Kind kind, int64_t value = 0) {
    expr.program.push_back({kind, value});
  }

  MaybeError parseExpr() {
    if (++depth > kMaxDepth)
      return error("nested too deeply");
    if (MaybeError err = parseTerm())
      return err;
    while (true) {
      if (consume('+')) {
        if (MaybeError err = parseTerm())
          return err;
        emit(LaunchExpr::Kind::Add);
      } else if (consume('-')) {
        if (MaybeError err = parseTerm())
          return err;
        emit(LaunchExpr::Kind::Sub);
      } else {
        --depth;
        return std::nullopt;
      }
    }
  }

  MaybeError parseTerm() {
    if (MaybeError err = parseFactor())
      return err;
    while (true) {
      if (consume('*')) {
        if (MaybeError err = parseFactor())
          return err;
        emit(LaunchExpr::Kind::Mul);
      } else if (consume('/')) {
        if (MaybeError err = parseFactor())
          return err;
        emit(LaunchExpr::Kind::Div);
      } else {
        return std::nullopt;
      }
    }
  }

  MaybeError parseFactor() {
    skipSpace();
    if (pos >= text.size())
      return error("expected a value");
    char c = text[pos];
    if (isDigit(c)) {
      size_t start = pos;
      while (pos < text.size() && isDigit(text[pos]))
        ++pos;
      uint64_t value;
      if (!parseUnsigned(text.substr(start, pos - start), value) ||
          value > static_cast<uint64_t>(INT64_MAX))
        return error("integer too large");
      emit(LaunchExpr::Kind::Const, static_cast<int64_t>(value));
      return std::nullopt;
    }
    if (consume('(')) {
      if (MaybeError err = parseExpr())
        return err;
      if (!consume(')'))
        return error("expected ')'");
      return std::nullopt;
    }
    if (isAlpha(c) || c == '_') {
      size_t start = pos;
      while (pos < text.size() && (isAlnum(text[pos]) || text[pos] == '_'))
        ++pos;
      std::string_view word = text.substr(start, pos - start);
      if (word == "ceil") {
        // ceil(a / b): the argument's outermost operation must be `/`,
        // which becomes a rounding-up division.
        if (!consume('('))
          return error("expected '(' after ceil");
        if (MaybeError err = parseExpr())
          return err;
        if (!consume(')'))
          return error("expected ')'");
        if (expr.program.empty() ||
            expr.program.back().kind != LaunchExpr::Kind::Div)
          return error("expected ceil(a / b)");
        expr.program.back().kind = LaunchExpr::Kind::CeilDiv;
        return std::nullopt;
      }
      if (word == "cdiv") {
        if (!consume('('))
          return error("expected '(' after cdiv");
        if (MaybeError err = parseExpr())
          return err;
        if (!consume(','))
          return error("expected cdiv(a, b)");
        if (MaybeError err = parseExpr())
          return err;
        if (!consume(')'))
          return error("expected ')'");
        emit(LaunchExpr::Kind::CeilDiv);
        return std::nullopt;
      }
      for (size_t i = 0; i < symbols.size(); ++i)
        if (symbols[i] == word) {
          emit(LaunchExpr::Kind::Symbol, static_cast<int64_t>(i));
          return std::nullopt;
        }
      return error("unknown symbol '" + std::string(word) +
                   "' (known: " + join(symbols, ", ") + ")");
    }
    return error("unexpected '" + std::string(1, c) + "'");
  }

  std::string_view text;
  const std::vector<std::string> &symbols;
  LaunchExpr &expr;
  size_t pos = 0;
  int depth = 0;
};

} // namespace runtime
} // namespace fa

std::optional<LaunchExpr>
LaunchExpr::parse(std::string_view text,
                  const std::vector<std::string> &symbols,
                  std::string &error) {
  LaunchExpr expr;
  expr.text = std::string(text);
  LaunchExprParser parser(text, symbols, expr);
  if (MaybeError err = parser.parse()) {
    error = *err;
    return std::nullopt;
  }
  return expr;
}

std::optional<int64_t> LaunchExpr::evaluate(const std::vector<int64_t> &values,
                                            std::string &error) const {
  std::vector<int64_t> stack;
  auto fail = [&](const char *what) -> std::optional<int64_t> {
    error = "'" + text + "': " + what;
    return std::nullopt;
  };
  for (const Node &node : program) {
    if (node.kind == Kind::Const) {
      stack.push_back(node.value);
      continue;
    }
    if (node.kind == Kind::Symbol) {
      if (node.value >= static_cast<int64_t>(values.size()))
        return fail("missing symbol value");
      stack.push_back(values[node.value]);
      continue;
    }
    if (stack.size() < 2)
      return fail("malformed expression");
    int64_t rhs = stack.back();
    stack.pop_back();
    int64_t lhs = stack.back();
    stack.pop_back();
    int64_t result = 0;
    bool overflow = false;
    switch (node.kind) {
    case Kind::Add:
      overflow = __builtin_add_overflow(lhs, rhs, &result);
      break;
    case Kind::Sub:
      overflow = __builtin_sub_overflow(lhs, rhs, &result);
      break;
    case Kind::Mul:
      overflow = __builtin_mul_overflow(lhs, rhs, &result);
      break;
    case Kind::Div:
    case Kind::CeilDiv:
      if (rhs == 0)
        return fail("division by zero");
      if (lhs == INT64_MIN && rhs == -1)
        return fail("integer overflow");
      result = lhs / rhs;
      if (node.kind == Kind::CeilDiv && lhs % rhs != 0 &&
          ((lhs < 0) == (rhs < 0)))
        ++result;
      else if (node.kind == Kind::Div && lhs % rhs != 0 &&
               ((lhs < 0) != (rhs < 0)))
        --result;
      break;
    default:
      break;
    }
    if (overflow)
      return fail("integer overflow");
    stack.push_back(result);
  }
  if (stack.size() != 1)
    return fail("malformed expression");
  return stack.back();
}
