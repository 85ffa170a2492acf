//===- Signature.cpp - What a kernel binary was compiled for --------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The kernel signature: the parameter list and the facts a kernel's code
// was compiled for, as text. fa-compile embeds it in the binary (a global
// of the shared library, a `.global .b8` array of the PTX and so of the
// cubin) and writes its hash to the metadata; at load the runtime recomputes
// both from the metadata's fields, so a kernel is never called with a
// parameter list or shapes it was not compiled for (an edited or mismatched
// JSON is a load error, not memory corruption).
//
//===----------------------------------------------------------------------===//

#include "fa/Runtime/KernelMetadata.h"

#include "RuntimeInternal.h"

#include <algorithm>
#include <cstdio>

using namespace fa::runtime;

static std::string formatScale(double scale) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", scale);
  return text;
}

static std::string formatParam(const ParamInfo &param) {
  std::string text = param.name + " " + getRoleName(param.role) + " " +
                     getDTypeName(param.dtype) + " [";
  for (size_t i = 0; i < param.shape.size(); ++i) {
    const ShapeDim &dim = param.shape[i];
    text += (i ? ", " : "") +
            (dim.isSymbol() ? dim.symbol : std::to_string(dim.size));
  }
  int64_t alignment =
      param.alignment > 0 ? param.alignment : getDTypeSize(param.dtype);
  return text + "] align " + std::to_string(alignment);
}

std::string fa::runtime::getKernelSignature(const KernelMetadata &md) {
  std::string text = "fa-signature/1\n";
  auto add = [&](const std::string &key, const std::string &value) {
    text += key + "=" + value + "\n";
  };
  add("op", getOpName(md.op));
  add("symbol", md.symbol);
  add("dtype", getDTypeName(md.dtype));
  if (isAttentionOp(md.op)) {
    add("head_dim", std::to_string(md.headDim));
    add("value_head_dim", std::to_string(md.valueHeadDim));
    add("heads", std::to_string(md.heads));
    add("kv_heads", std::to_string(md.kvHeads));
    add("causal", getCausalName(md.causal));
    add("scale", formatScale(md.scale));
    add("mask", getMaskKindName(md.mask));
    add("has_kv_lens", md.hasKvLens ? "true" : "false");
    add("has_lse", md.hasLse ? "true" : "false");
    add("block_q", std::to_string(md.blockQ));
    add("block_kv", std::to_string(md.blockKV));
    // Modifiers only when set: signatures of kernels without them are
    // unchanged.
    const ModifierInfo &mods = md.modifiers;
    if (mods.hasWindow())
      add("window", cat(mods.windowLeft, ",", mods.windowRight));
    if (mods.softcap)
      add("softcap", formatScale(*mods.softcap));
    if (mods.chunk > 0)
      add("chunk", std::to_string(mods.chunk));
    if (mods.alibi != AlibiKind::None)
      add("alibi", getAlibiKindName(mods.alibi));
    if (mods.segments)
      add("has_segments", "true");
    if (mods.scoreMod)
      add("score_mod", "true");
    if (mods.maskMod)
      add("mask_mod", "true");
    if (mods.hasBlockMask())
      add("block_tiles", cat(mods.blockTileQ, ",", mods.blockTileKV));
    if (md.pageSize > 0)
      add("page_size", std::to_string(md.pageSize));
    if (md.varlen)
      add("varlen", "true");
    if (md.splitKv)
      add("split_kv", "true");
  } else {
    add("rank", std::to_string(md.rank));
    add("dimension", std::to_string(md.dimension));
  }
  if (md.target.kind == TargetKind::Cuda)
    add("kernel", md.kernel);
  if (md.launch) {
    const LaunchInfo &launch = *md.launch;
    add("launch.block", cat(launch.block[0], ",", launch.block[1], ",",
                            launch.block[2]));
    add("launch.grid", getGridAxisName(launch.grid[0]) + "," +
                           getGridAxisName(launch.grid[1]) + "," +
                           getGridAxisName(launch.grid[2]));
    add("launch.static_shared_bytes",
        std::to_string(launch.staticSharedBytes));
    add("launch.dynamic_shared_bytes",
        std::to_string(launch.dynamicSharedBytes));
    if (!launch.mergeSymbol.empty())
      add("launch.merge", cat(launch.mergeSymbol, " ", launch.mergeBlock[0],
                              ",", launch.mergeBlock[1], ",",
                              launch.mergeBlock[2]));
    if (!launch.dkdvSymbol.empty())
      add("launch.dkdv",
          cat(launch.dkdvSymbol, " ", getGridAxisName(launch.dkdvGrid[0]), ",",
              getGridAxisName(launch.dkdvGrid[1]), ",",
              getGridAxisName(launch.dkdvGrid[2]), " ",
              launch.dkdvStaticSharedBytes));
  }
  add("params", std::to_string(md.params.size()));
  for (size_t i = 0; i < md.params.size(); ++i)
    add(cat("params[", i, "]"), formatParam(md.params[i]));
  return text;
}

std::string fa::runtime::getKernelSignatureHash(const KernelMetadata &md) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : getKernelSignature(md)) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

std::string fa::runtime::getSignatureSymbol(const KernelMetadata &md) {
  return "fa_signature_" + md.symbol;
}

/// Splits signature text into (key, value) lines.
static std::vector<std::pair<std::string, std::string>>
splitSignature(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (std::string_view line : split(text, '\n')) {
    if (line.empty())
      continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos)
      fields.emplace_back(std::string(line), "");
    else
      fields.emplace_back(std::string(line.substr(0, eq)),
                          std::string(line.substr(eq + 1)));
  }
  return fields;
}

std::optional<std::string>
fa::runtime::compareKernelSignature(std::string_view compiled,
                                    const KernelMetadata &md) {
  std::string expected = getKernelSignature(md);
  if (compiled == expected)
    return std::nullopt;
  auto have = splitSignature(compiled);
  auto want = splitSignature(expected);
  if (have.empty() || have.front().first != want.front().first)
    return "the kernel binary's signature is not " + want.front().first +
           " text (a binary of another fa version?)";
  // The first field, in the metadata's order, whose value differs.
  for (const auto &[key, value] : want) {
    auto it = std::find_if(have.begin(), have.end(),
                           [&](const auto &f) { return f.first == key; });
    std::string field = "field '" + key + "'";
    if (it == have.end())
      return field + ": the kernel was compiled without it, the metadata "
                     "says '" +
             value + "'";
    if (it->second != value)
      return field + ": the kernel was compiled for '" + it->second +
             "', the metadata says '" + value + "'";
  }
  for (const auto &[key, value] : have)
    if (std::none_of(want.begin(), want.end(),
                     [&](const auto &f) { return f.first == key; }))
      return "field '" + key + "': the kernel was compiled with '" + value +
             "', the metadata has no such field";
  return std::string("the kernel binary's signature differs from the "
                     "metadata's fields");
}

std::string fa::runtime::addPtxSignature(std::string_view ptx,
                                         std::string_view symbol,
                                         std::string_view signature) {
  std::string decl = cat(".visible .global .align 1 .b8 ", symbol, "[",
                         signature.size() + 1, "] = {");
  for (unsigned char c : signature)
    decl += std::to_string(c) + ", ";
  decl += "0};\n";
  // After the last module directive of the header.
  size_t insertAt = std::string_view::npos;
  for (const char *directive : {".address_size", ".target", ".version"}) {
    size_t pos = ptx.find(directive);
    if (pos == std::string_view::npos)
      continue;
    size_t eol = ptx.find('\n', pos);
    insertAt = eol == std::string_view::npos ? ptx.size() : eol + 1;
    break;
  }
  if (insertAt == std::string_view::npos)
    insertAt = 0;
  std::string out(ptx.substr(0, insertAt));
  if (!out.empty() && out.back() != '\n')
    out += '\n';
  out += "\n// The kernel's signature (fa-kernel metadata, checked at load).\n";
  out += decl;
  out += ptx.substr(insertAt);
  return out;
}

std::optional<std::string>
fa::runtime::findPtxSignature(std::string_view ptx, std::string_view symbol) {
  std::string needle = cat(".b8 ", symbol, "[");
  size_t pos = ptx.find(needle);
  if (pos == std::string_view::npos)
    return std::nullopt;
  std::string_view rest = ptx.substr(pos + needle.size());
  size_t close = rest.find(']');
  uint64_t count = 0;
  if (close == std::string_view::npos ||
      !parseUnsigned(rest.substr(0, close), count) || count == 0)
    return std::nullopt;
  rest = rest.substr(close + 1);
  size_t open = rest.find('{'), end = rest.find('}');
  if (open == std::string_view::npos || end == std::string_view::npos ||
      end < open || trim(rest.substr(0, open)) != "=")
    return std::nullopt;
  std::vector<std::string_view> bytes =
      split(rest.substr(open + 1, end - open - 1), ',');
  if (bytes.size() != count)
    return std::nullopt;
  std::string text;
  for (size_t i = 0; i < bytes.size(); ++i) {
    uint64_t byte = 0;
    if (!parseUnsigned(trim(bytes[i]), byte) || byte > 255)
      return std::nullopt;
    if (i + 1 == bytes.size()) {
      if (byte != 0)
        return std::nullopt;
      break;
    }
    text += static_cast<char>(byte);
  }
  return text;
}
