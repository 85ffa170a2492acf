//===- KernelMetadata.cpp - fa-kernel/1 artifact metadata -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/KernelMetadata.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

static Error makeError(const Twine &message) {
  return llvm::createStringError(message);
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

StringRef fa::runtime::getOpName(OpKind op) {
  return op == OpKind::Attention ? "attention" : "softmax";
}

StringRef fa::runtime::getDTypeName(DType dtype) {
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

std::optional<DType> fa::runtime::parseDType(StringRef name) {
  return llvm::StringSwitch<std::optional<DType>>(name)
      .Case("f32", DType::F32)
      .Case("f16", DType::F16)
      .Case("bf16", DType::BF16)
      .Case("i32", DType::I32)
      .Case("i8", DType::I8)
      .Default(std::nullopt);
}

StringRef fa::runtime::getCausalName(Causal causal) {
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

StringRef fa::runtime::getMaskKindName(MaskKind mask) {
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

StringRef fa::runtime::getRoleName(ParamRole role) {
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
static bool isIdentifier(StringRef name) {
  if (name.empty() || llvm::isDigit(name.front()))
    return false;
  return llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

/// Parses "sm_80", "sm_90a", "sm_100f" into (major, minor, suffix).
static bool parseChip(StringRef chip) {
  if (!chip.consume_front("sm_"))
    return false;
  if (chip.ends_with("a") || chip.ends_with("f"))
    chip = chip.drop_back();
  unsigned value;
  return !chip.empty() && chip.size() <= 3 && !chip.getAsInteger(10, value) &&
         value >= 10;
}

/// "X.Y" with decimal X and Y.
static bool isVersion(StringRef text) {
  auto [major, minor] = text.split('.');
  unsigned m;
  return !major.empty() && !minor.empty() && !major.getAsInteger(10, m) &&
         !minor.getAsInteger(10, m);
}

//===----------------------------------------------------------------------===//
// KernelMetadata
//===----------------------------------------------------------------------===//

llvm::SmallVector<std::string> KernelMetadata::getSymbols() const {
  if (op == OpKind::Attention)
    return {"B", "Hq", "Hkv", "Nq", "Nk", "D", "Dv", "block_q", "block_kv"};
  llvm::SmallVector<std::string> symbols;
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
static llvm::SmallVector<std::string, 4>
getCanonicalShape(const KernelMetadata &md, ParamRole role) {
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
    llvm::SmallVector<std::string, 4> shape;
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
                                                   StringRef symbol) {
  return llvm::StringSwitch<std::optional<int64_t>>(symbol)
      .Case("Hq", md.heads)
      .Case("Hkv", md.kvHeads)
      .Case("D", md.headDim)
      .Case("Dv", md.valueHeadDim)
      .Default(std::nullopt);
}

std::vector<ParamInfo>
fa::runtime::getCanonicalParams(const KernelMetadata &md, DType maskDType,
                                bool maskBroadcastBatch,
                                bool maskBroadcastHeads) {
  std::vector<ParamInfo> params;
  auto add = [&](StringRef name, ParamRole role, DType dtype) {
    ParamInfo param;
    param.name = name.str();
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

static std::string formatShape(llvm::ArrayRef<ShapeDim> shape) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (i)
      text += ", ";
    text += dim.isSymbol() ? dim.symbol : std::to_string(dim.size);
  }
  return text + "]";
}

Error fa::runtime::verifyKernelMetadata(const KernelMetadata &md) {
  if (Error err = verifyKernelSignature(md))
    return err;

  // Target and files.
  if (md.target.kind == TargetKind::Cuda) {
    if (!parseChip(md.target.chip))
      return makeError("field 'target.chip': expected sm_<NN>[a|f], got '" +
                       md.target.chip + "'");
    if (!isVersion(md.target.ptxIsa))
      return makeError("field 'target.ptx_isa': expected <major>.<minor>, "
                       "got '" +
                       md.target.ptxIsa + "'");
    if (md.files.ptx.empty() && md.files.cubin.empty())
      return makeError("field 'files': a cuda artifact needs 'ptx' or "
                       "'cubin'");
    if (!md.launch)
      return makeError("missing field 'launch' (required for cuda targets)");
  } else {
    if (md.target.triple.empty())
      return makeError("field 'target.triple' must not be empty");
    if (md.files.library.empty() && md.files.object.empty())
      return makeError("field 'files': a cpu artifact needs 'library' or "
                       "'object'");
  }

  // Launch configuration.
  if (md.launch) {
    const LaunchInfo &launch = *md.launch;
    int64_t threads = 1;
    for (auto [i, b] : llvm::enumerate(launch.block)) {
      if (b <= 0)
        return makeError(formatv("field 'launch.block[{0}]' must be "
                                 "positive, got {1}",
                                 i, b));
      threads *= b;
    }
    if (threads > 1024)
      return makeError(formatv("field 'launch.block': {0} threads per block "
                               "exceed CUDA's 1024",
                               threads));
    if (launch.staticSharedBytes < 0 || launch.dynamicSharedBytes < 0)
      return makeError("field 'launch': shared memory sizes must not be "
                       "negative");
    if (launch.dynamicSharedBytes > UINT32_MAX)
      return makeError("field 'launch.dynamic_shared_bytes' is too large");
    llvm::SmallVector<std::string> symbols = md.getSymbols();
    for (auto [i, text] : llvm::enumerate(launch.grid)) {
      Expected<LaunchExpr> expr = LaunchExpr::parse(text, symbols);
      if (!expr)
        return makeError("field 'launch.grid[" + Twine(i) +
                         "]': " + llvm::toString(expr.takeError()));
    }
  }
  return Error::success();
}

Error fa::runtime::verifyKernelSignature(const KernelMetadata &md) {
  if (md.name.empty())
    return makeError("field 'name' must not be empty");
  if (!isIdentifier(md.symbol))
    return makeError("field 'symbol': '" + md.symbol +
                     "' is not a C identifier");
  if (md.dtype != DType::F32 && md.dtype != DType::F16 &&
      md.dtype != DType::BF16)
    return makeError("field 'dtype': expected f32, f16 or bf16, got '" +
                     getDTypeName(md.dtype) + "'");

  // Op attributes.
  if (md.op == OpKind::Attention) {
    for (auto [name, value] :
         {std::pair<StringRef, int64_t>{"head_dim", md.headDim},
          {"value_head_dim", md.valueHeadDim},
          {"heads", md.heads},
          {"kv_heads", md.kvHeads},
          {"block_q", md.blockQ},
          {"block_kv", md.blockKV}})
      if (value <= 0)
        return makeError(formatv("field '{0}' must be positive, got {1}", name,
                                 value));
    if (md.heads % md.kvHeads != 0)
      return makeError(formatv("fields 'heads' ({0}) and 'kv_heads' ({1}): "
                               "heads must be a multiple of kv_heads",
                               md.heads, md.kvHeads));
    if (!std::isfinite(md.scale))
      return makeError("field 'scale' must be finite");
  } else {
    if (md.rank < 1 || md.rank > 4)
      return makeError(
          formatv("field 'rank' must be in [1, 4], got {0}", md.rank));
    if (md.dimension < 0 || md.dimension >= md.rank)
      return makeError(formatv("field 'dimension' must be in [0, {0}), got "
                               "{1}",
                               md.rank, md.dimension));
  }

  // Params: the roles the op and its flags call for, each once.
  llvm::SmallVector<ParamRole> expected;
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
  for (auto [i, param] : llvm::enumerate(md.params)) {
    std::string where = formatv("params[{0}] ('{1}')", i, param.name).str();
    if (!isIdentifier(param.name))
      return makeError("field 'params[" + Twine(i) + "].name': '" +
                       param.name + "' is not an identifier");
    if (!llvm::is_contained(expected, param.role))
      return makeError(where + ": role '" + getRoleName(param.role) +
                       "' does not belong to this " + getOpName(md.op) +
                       " kernel (check has_kv_lens, mask, has_lse)");
    for (size_t j = 0; j < i; ++j)
      if (md.params[j].role == param.role)
        return makeError(where + ": role '" + getRoleName(param.role) +
                         "' appears twice");

    // Dtype.
    bool dtypeOk;
    StringRef wanted;
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
      return makeError(where + ": dtype '" + getDTypeName(param.dtype) +
                       "', expected " + wanted);

    // Rank and shape.
    int64_t rank = md.op == OpKind::Attention ? getAttentionRank(param.role)
                                              : md.rank;
    if (param.getRank() != rank)
      return makeError(formatv("{0}: rank {1}, expected {2}", where,
                               param.getRank(), rank));
    llvm::SmallVector<std::string, 4> canonical =
        getCanonicalShape(md, param.role);
    for (auto [d, dim] : llvm::enumerate(param.shape)) {
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
        return makeError(formatv("{0}: shape {1}: dim {2} must be '{3}'{4}",
                                 where, formatShape(param.shape), d, symbol,
                                 fixed ? formatv(" (= {0})", *fixed).str()
                                       : std::string()));
    }
  }
  for (ParamRole role : expected)
    if (!md.findParam(role))
      return makeError("field 'params': no parameter with role '" +
                       getRoleName(role) + "'");

  return Error::success();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// Reads the fields of a JSON object and names the field path in errors.
class ObjectReader {
public:
  ObjectReader(const json::Object &object, std::string path)
      : object(object), path(std::move(path)) {}

  std::string field(StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

  Error missing(StringRef key) const {
    return makeError("missing field '" + field(key) + "'");
  }

  Error wrongType(StringRef key, StringRef expected) const {
    return makeError("field '" + field(key) + "': expected " + expected);
  }

  bool has(StringRef key) const { return object.get(key) != nullptr; }

  Error getString(StringRef key, std::string &out, bool required = true) {
    const json::Value *value = object.get(key);
    if (!value)
      return required ? missing(key) : Error::success();
    std::optional<StringRef> s = value->getAsString();
    if (!s)
      return wrongType(key, "a string");
    out = s->str();
    return Error::success();
  }

  Error getInt(StringRef key, int64_t &out, bool required = true) {
    const json::Value *value = object.get(key);
    if (!value)
      return required ? missing(key) : Error::success();
    std::optional<int64_t> i = value->getAsInteger();
    if (!i)
      return wrongType(key, "an integer");
    out = *i;
    return Error::success();
  }

  Error getNumber(StringRef key, double &out, bool required = true) {
    const json::Value *value = object.get(key);
    if (!value)
      return required ? missing(key) : Error::success();
    std::optional<double> d = value->getAsNumber();
    if (!d)
      return wrongType(key, "a number");
    out = *d;
    return Error::success();
  }

  Error getBool(StringRef key, bool &out, bool required = true) {
    const json::Value *value = object.get(key);
    if (!value)
      return required ? missing(key) : Error::success();
    std::optional<bool> b = value->getAsBoolean();
    if (!b)
      return wrongType(key, "true or false");
    out = *b;
    return Error::success();
  }

  Expected<const json::Object *> getObject(StringRef key) {
    const json::Value *value = object.get(key);
    if (!value)
      return missing(key);
    const json::Object *o = value->getAsObject();
    if (!o)
      return wrongType(key, "an object");
    return o;
  }

  Expected<const json::Array *> getArray(StringRef key) {
    const json::Value *value = object.get(key);
    if (!value)
      return missing(key);
    const json::Array *a = value->getAsArray();
    if (!a)
      return wrongType(key, "an array");
    return a;
  }

  /// Reads a string field that must be one of `choices`.
  template <typename T>
  Error getEnum(StringRef key, T &out,
                llvm::ArrayRef<std::pair<StringRef, T>> choices,
                bool required = true) {
    std::string text;
    if (!has(key) && !required)
      return Error::success();
    if (Error err = getString(key, text))
      return err;
    for (auto &[name, value] : choices)
      if (name == text) {
        out = value;
        return Error::success();
      }
    std::string list;
    for (auto [i, choice] : llvm::enumerate(choices))
      list += (i ? ", " : "") + choice.first.str();
    return makeError("field '" + field(key) + "': expected one of " + list +
                     ", got '" + text + "'");
  }

private:
  const json::Object &object;
  std::string path;
};

} // namespace

static Error readFilePath(ObjectReader &reader, StringRef key,
                          std::string &out) {
  if (Error err = reader.getString(key, out, /*required=*/false))
    return err;
  if (!out.empty() && out.front() == '/')
    return makeError("field '" + reader.field(key) + "': '" + out +
                     "' must be relative to the metadata's directory");
  return Error::success();
}

static Error readTarget(const json::Object &object, TargetInfo &target) {
  ObjectReader reader(object, "target");
  if (Error err = reader.getEnum<TargetKind>(
          "kind", target.kind,
          {{"cuda", TargetKind::Cuda}, {"cpu", TargetKind::Cpu}}))
    return err;
  if (target.kind == TargetKind::Cuda) {
    if (Error err = reader.getString("chip", target.chip))
      return err;
    return reader.getString("ptx_isa", target.ptxIsa);
  }
  if (Error err = reader.getString("triple", target.triple))
    return err;
  if (Error err = reader.getString("cpu", target.cpu, /*required=*/false))
    return err;
  if (reader.has("features")) {
    Expected<const json::Array *> features = reader.getArray("features");
    if (!features)
      return features.takeError();
    for (auto [i, value] : llvm::enumerate(**features)) {
      std::optional<StringRef> s = value.getAsString();
      if (!s)
        return makeError("field 'target.features[" + Twine(i) +
                         "]': expected a string");
      target.features.push_back(s->str());
    }
  }
  return Error::success();
}

static Error readLaunch(const json::Object &object, LaunchInfo &launch) {
  ObjectReader reader(object, "launch");
  Expected<const json::Array *> block = reader.getArray("block");
  if (!block)
    return block.takeError();
  if ((*block)->size() != 3)
    return makeError("field 'launch.block': expected 3 integers");
  for (auto [i, value] : llvm::enumerate(**block)) {
    std::optional<int64_t> b = value.getAsInteger();
    if (!b)
      return makeError("field 'launch.block[" + Twine(i) +
                       "]': expected an integer");
    launch.block[i] = *b;
  }
  Expected<const json::Array *> grid = reader.getArray("grid");
  if (!grid)
    return grid.takeError();
  if ((*grid)->size() != 3)
    return makeError("field 'launch.grid': expected 3 entries");
  for (auto [i, value] : llvm::enumerate(**grid)) {
    if (std::optional<int64_t> g = value.getAsInteger())
      launch.grid[i] = std::to_string(*g);
    else if (std::optional<StringRef> s = value.getAsString())
      launch.grid[i] = s->str();
    else
      return makeError("field 'launch.grid[" + Twine(i) +
                       "]': expected an integer or an expression string");
  }
  if (Error err = reader.getInt("static_shared_bytes",
                                launch.staticSharedBytes, false))
    return err;
  return reader.getInt("dynamic_shared_bytes", launch.dynamicSharedBytes,
                       false);
}

static Error readParam(const json::Value &value, size_t index,
                       ParamInfo &param) {
  std::string path = formatv("params[{0}]", index).str();
  const json::Object *object = value.getAsObject();
  if (!object)
    return makeError("field '" + path + "': expected an object");
  ObjectReader reader(*object, path);
  if (Error err = reader.getString("name", param.name))
    return err;
  if (Error err = reader.getEnum<ParamRole>(
          "role", param.role,
          {{"query", ParamRole::Query},
           {"key", ParamRole::Key},
           {"value", ParamRole::Value},
           {"kv_lens", ParamRole::KvLens},
           {"mask", ParamRole::Mask},
           {"output", ParamRole::Output},
           {"lse", ParamRole::Lse},
           {"input", ParamRole::Input}}))
    return err;
  if (Error err = reader.getEnum<DType>("dtype", param.dtype,
                                        {{"f32", DType::F32},
                                         {"f16", DType::F16},
                                         {"bf16", DType::BF16},
                                         {"i32", DType::I32},
                                         {"i8", DType::I8}}))
    return err;
  int64_t rank = 0;
  if (Error err = reader.getInt("rank", rank))
    return err;
  Expected<const json::Array *> shape = reader.getArray("shape");
  if (!shape)
    return shape.takeError();
  if (static_cast<int64_t>((*shape)->size()) != rank)
    return makeError(formatv("field '{0}.shape': {1} entries for rank {2}",
                             path, (*shape)->size(), rank));
  for (auto [i, dim] : llvm::enumerate(**shape)) {
    if (std::optional<int64_t> size = dim.getAsInteger())
      param.shape.push_back(ShapeDim::fixed(*size));
    else if (std::optional<StringRef> symbol = dim.getAsString();
             symbol && !symbol->empty())
      param.shape.push_back(ShapeDim::sym(*symbol));
    else
      return makeError(formatv("field '{0}.shape[{1}]': expected a symbol "
                               "string or an integer",
                               path, i));
  }
  return Error::success();
}

Expected<KernelMetadata> fa::runtime::parseKernelMetadata(StringRef text) {
  Expected<json::Value> root = json::parse(text);
  if (!root)
    return makeError("not valid JSON: " + llvm::toString(root.takeError()));
  const json::Object *object = root->getAsObject();
  if (!object)
    return makeError("expected a JSON object at the top level");
  ObjectReader reader(*object, "");
  KernelMetadata md;

  if (Error err = reader.getString("format", md.format))
    return std::move(err);
  if (md.format != kMetadataFormat) {
    if (StringRef(md.format).starts_with("fa-kernel/"))
      return makeError("unsupported format version '" + md.format +
                       "': this runtime reads " + kMetadataFormat);
    return makeError("field 'format': unknown format '" + md.format +
                     "', expected " + kMetadataFormat);
  }
  if (Error err = reader.getString("name", md.name))
    return std::move(err);
  if (Error err = reader.getEnum<OpKind>(
          "op", md.op,
          {{"attention", OpKind::Attention}, {"softmax", OpKind::Softmax}}))
    return std::move(err);
  if (Error err = reader.getString("generator", md.generator, false))
    return std::move(err);

  Expected<const json::Object *> target = reader.getObject("target");
  if (!target)
    return target.takeError();
  if (Error err = readTarget(**target, md.target))
    return std::move(err);

  Expected<const json::Object *> files = reader.getObject("files");
  if (!files)
    return files.takeError();
  ObjectReader fileReader(**files, "files");
  for (auto [key, out] : {std::pair<StringRef, std::string *>{
                              "ptx", &md.files.ptx},
                          {"cubin", &md.files.cubin},
                          {"object", &md.files.object},
                          {"library", &md.files.library},
                          {"header", &md.files.header}})
    if (Error err = readFilePath(fileReader, key, *out))
      return std::move(err);

  if (Error err = reader.getString("symbol", md.symbol))
    return std::move(err);
  if (Error err = reader.getEnum<DType>("dtype", md.dtype,
                                        {{"f32", DType::F32},
                                         {"f16", DType::F16},
                                         {"bf16", DType::BF16},
                                         {"i32", DType::I32},
                                         {"i8", DType::I8}}))
    return std::move(err);

  if (md.op == OpKind::Attention) {
    for (auto [key, out] : {std::pair<StringRef, int64_t *>{
                                "head_dim", &md.headDim},
                            {"value_head_dim", &md.valueHeadDim},
                            {"heads", &md.heads},
                            {"kv_heads", &md.kvHeads},
                            {"block_q", &md.blockQ},
                            {"block_kv", &md.blockKV}})
      if (Error err = reader.getInt(key, *out))
        return std::move(err);
    if (Error err = reader.getEnum<Causal>(
            "causal", md.causal,
            {{"none", Causal::None},
             {"top_left", Causal::TopLeft},
             {"bottom_right", Causal::BottomRight}}))
      return std::move(err);
    md.scale = md.headDim > 0 ? 1.0 / std::sqrt(double(md.headDim)) : 0.0;
    if (Error err = reader.getNumber("scale", md.scale, false))
      return std::move(err);
    if (Error err = reader.getEnum<MaskKind>("mask", md.mask,
                                             {{"none", MaskKind::None},
                                              {"bool", MaskKind::Bool},
                                              {"additive", MaskKind::Additive}},
                                             /*required=*/false))
      return std::move(err);
    if (Error err = reader.getBool("has_kv_lens", md.hasKvLens, false))
      return std::move(err);
    if (Error err = reader.getBool("has_lse", md.hasLse, false))
      return std::move(err);
  } else {
    if (Error err = reader.getInt("rank", md.rank))
      return std::move(err);
    if (Error err = reader.getInt("dimension", md.dimension))
      return std::move(err);
  }

  if (reader.has("launch")) {
    Expected<const json::Object *> launch = reader.getObject("launch");
    if (!launch)
      return launch.takeError();
    md.launch.emplace();
    if (Error err = readLaunch(**launch, *md.launch))
      return std::move(err);
  }

  Expected<const json::Array *> params = reader.getArray("params");
  if (!params)
    return params.takeError();
  for (auto [i, value] : llvm::enumerate(**params)) {
    ParamInfo param;
    if (Error err = readParam(value, i, param))
      return std::move(err);
    md.params.push_back(std::move(param));
  }

  if (Error err = verifyKernelMetadata(md))
    return std::move(err);
  return md;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

void fa::runtime::writeKernelMetadata(const KernelMetadata &md,
                                      llvm::raw_ostream &os) {
  json::OStream j(os, /*IndentSize=*/2);
  j.object([&] {
    j.attribute("format", md.format);
    j.attribute("name", md.name);
    j.attribute("op", getOpName(md.op));
    if (!md.generator.empty())
      j.attribute("generator", md.generator);
    j.attributeObject("target", [&] {
      if (md.target.kind == TargetKind::Cuda) {
        j.attribute("kind", "cuda");
        j.attribute("chip", md.target.chip);
        j.attribute("ptx_isa", md.target.ptxIsa);
        return;
      }
      j.attribute("kind", "cpu");
      j.attribute("triple", md.target.triple);
      if (!md.target.cpu.empty())
        j.attribute("cpu", md.target.cpu);
      j.attributeArray("features", [&] {
        for (const std::string &feature : md.target.features)
          j.value(feature);
      });
    });
    j.attributeObject("files", [&] {
      for (auto [key, value] : {std::pair<StringRef, const std::string *>{
                                    "ptx", &md.files.ptx},
                                {"cubin", &md.files.cubin},
                                {"object", &md.files.object},
                                {"library", &md.files.library},
                                {"header", &md.files.header}})
        if (!value->empty())
          j.attribute(key, *value);
    });
    j.attribute("symbol", md.symbol);
    j.attribute("dtype", getDTypeName(md.dtype));
    if (md.op == OpKind::Attention) {
      j.attribute("head_dim", md.headDim);
      j.attribute("value_head_dim", md.valueHeadDim);
      j.attribute("heads", md.heads);
      j.attribute("kv_heads", md.kvHeads);
      j.attribute("causal", getCausalName(md.causal));
      j.attribute("scale", md.scale);
      j.attribute("mask", getMaskKindName(md.mask));
      j.attribute("has_kv_lens", md.hasKvLens);
      j.attribute("has_lse", md.hasLse);
      j.attribute("block_q", md.blockQ);
      j.attribute("block_kv", md.blockKV);
    } else {
      j.attribute("rank", md.rank);
      j.attribute("dimension", md.dimension);
    }
    if (md.launch) {
      j.attributeObject("launch", [&] {
        j.attributeArray("block", [&] {
          for (int64_t b : md.launch->block)
            j.value(b);
        });
        j.attributeArray("grid", [&] {
          for (const std::string &g : md.launch->grid)
            j.value(g);
        });
        j.attribute("static_shared_bytes", md.launch->staticSharedBytes);
        j.attribute("dynamic_shared_bytes", md.launch->dynamicSharedBytes);
      });
    }
    j.attributeArray("params", [&] {
      for (const ParamInfo &param : md.params) {
        j.object([&] {
          j.attribute("name", param.name);
          j.attribute("role", getRoleName(param.role));
          j.attribute("dtype", getDTypeName(param.dtype));
          j.attribute("rank", param.getRank());
          j.attributeArray("shape", [&] {
            for (const ShapeDim &dim : param.shape) {
              if (dim.isSymbol())
                j.value(dim.symbol);
              else
                j.value(dim.size);
            }
          });
        });
      }
    });
  });
  os << "\n";
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
  LaunchExprParser(StringRef text, llvm::ArrayRef<std::string> symbols,
                   LaunchExpr &expr)
      : text(text), symbols(symbols), expr(expr) {}

  Error parse() {
    if (Error err = parseExpr())
      return err;
    skipSpace();
    if (pos != text.size())
      return error("unexpected '" + text.substr(pos, 1) + "'");
    return Error::success();
  }

private:
  Error error(const Twine &message) {
    return makeError(formatv("bad expression '{0}': {1} at offset {2}", text,
                             message.str(), pos)
                         .str());
  }

  void skipSpace() {
    while (pos < text.size() && llvm::isSpace(text[pos]))
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

  Error parseExpr() {
    if (Error err = parseTerm())
      return err;
    while (true) {
      if (consume('+')) {
        if (Error err = parseTerm())
          return err;
        emit(LaunchExpr::Kind::Add);
      } else if (consume('-')) {
        if (Error err = parseTerm())
          return err;
        emit(LaunchExpr::Kind::Sub);
      } else {
        return Error::success();
      }
    }
  }

  Error parseTerm() {
    if (Error err = parseFactor())
      return err;
    while (true) {
      if (consume('*')) {
        if (Error err = parseFactor())
          return err;
        emit(LaunchExpr::Kind::Mul);
      } else if (consume('/')) {
        if (Error err = parseFactor())
          return err;
        emit(LaunchExpr::Kind::Div);
      } else {
        return Error::success();
      }
    }
  }

  Error parseFactor() {
    skipSpace();
    if (pos >= text.size())
      return error("expected a value");
    char c = text[pos];
    if (llvm::isDigit(c)) {
      size_t start = pos;
      while (pos < text.size() && llvm::isDigit(text[pos]))
        ++pos;
      int64_t value;
      if (text.substr(start, pos - start).getAsInteger(10, value))
        return error("integer too large");
      emit(LaunchExpr::Kind::Const, value);
      return Error::success();
    }
    if (consume('(')) {
      if (Error err = parseExpr())
        return err;
      if (!consume(')'))
        return error("expected ')'");
      return Error::success();
    }
    if (llvm::isAlpha(c) || c == '_') {
      size_t start = pos;
      while (pos < text.size() && (llvm::isAlnum(text[pos]) || text[pos] == '_'))
        ++pos;
      StringRef word = text.substr(start, pos - start);
      if (word == "ceil") {
        // ceil(a / b): the argument's outermost operation must be `/`,
        // which becomes a rounding-up division.
        if (!consume('('))
          return error("expected '(' after ceil");
        if (Error err = parseExpr())
          return err;
        if (!consume(')'))
          return error("expected ')'");
        if (expr.program.back().kind != LaunchExpr::Kind::Div)
          return error("expected ceil(a / b)");
        expr.program.back().kind = LaunchExpr::Kind::CeilDiv;
        return Error::success();
      }
      if (word == "cdiv") {
        if (!consume('('))
          return error("expected '(' after cdiv");
        if (Error err = parseExpr())
          return err;
        if (!consume(','))
          return error("expected cdiv(a, b)");
        if (Error err = parseExpr())
          return err;
        if (!consume(')'))
          return error("expected ')'");
        emit(LaunchExpr::Kind::CeilDiv);
        return Error::success();
      }
      for (auto [i, symbol] : llvm::enumerate(symbols))
        if (symbol == word) {
          emit(LaunchExpr::Kind::Symbol, i);
          return Error::success();
        }
      std::string known = llvm::join(symbols, ", ");
      return error("unknown symbol '" + word + "' (known: " + known + ")");
    }
    return error("unexpected '" + text.substr(pos, 1) + "'");
  }

  StringRef text;
  llvm::ArrayRef<std::string> symbols;
  LaunchExpr &expr;
  size_t pos = 0;
};

} // namespace runtime
} // namespace fa

Expected<LaunchExpr>
LaunchExpr::parse(StringRef text, llvm::ArrayRef<std::string> symbols) {
  LaunchExpr expr;
  expr.text = text.str();
  LaunchExprParser parser(text, symbols, expr);
  if (Error err = parser.parse())
    return std::move(err);
  return expr;
}

Expected<int64_t> LaunchExpr::evaluate(llvm::ArrayRef<int64_t> values) const {
  llvm::SmallVector<int64_t, 8> stack;
  for (const Node &node : program) {
    if (node.kind == Kind::Const) {
      stack.push_back(node.value);
      continue;
    }
    if (node.kind == Kind::Symbol) {
      if (node.value >= static_cast<int64_t>(values.size()))
        return makeError("'" + text + "': missing symbol value");
      stack.push_back(values[node.value]);
      continue;
    }
    assert(stack.size() >= 2 && "malformed postfix program");
    int64_t rhs = stack.pop_back_val();
    int64_t lhs = stack.pop_back_val();
    int64_t result = 0;
    bool overflow = false;
    switch (node.kind) {
    case Kind::Add:
      overflow = llvm::AddOverflow(lhs, rhs, result);
      break;
    case Kind::Sub:
      overflow = llvm::SubOverflow(lhs, rhs, result);
      break;
    case Kind::Mul:
      overflow = llvm::MulOverflow(lhs, rhs, result);
      break;
    case Kind::Div:
    case Kind::CeilDiv:
      if (rhs == 0)
        return makeError("'" + text + "': division by zero");
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
      return makeError("'" + text + "': integer overflow");
    stack.push_back(result);
  }
  if (stack.size() != 1)
    return makeError("'" + text + "': malformed expression");
  return stack.back();
}
