//===- RuntimeTestUtils.h - Helpers of the FARuntime tests ------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FA_TEST_UNIT_RUNTIME_RUNTIMETESTUTILS_H
#define FA_TEST_UNIT_RUNTIME_RUNTIMETESTUTILS_H

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/KernelMetadata.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <string>

namespace fa {
namespace runtime {
namespace test {

/// A temporary directory, removed with its contents on destruction.
class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("fa-runtime-test", dir));
    path = std::string(dir);
  }
  ~TempDir() { (void)llvm::sys::fs::remove_directories(path); }

  std::string file(llvm::StringRef name) const {
    llvm::SmallString<256> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

  /// Writes `content` to `name` and returns its path.
  std::string write(llvm::StringRef name, llvm::StringRef content) const {
    std::string p = file(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(p, ec);
    EXPECT_FALSE(ec) << p;
    os << content;
    return p;
  }

  std::string path;
};

/// Serializes `md`.
inline std::string toJson(const KernelMetadata &md) {
  return serializeKernelMetadata(md);
}

/// Parses `json`, lets `mutate` edit the top-level object, serializes it
/// (with LLVM's JSON library: an independent writer for the runtime's
/// reader).
inline std::string
mutateJson(llvm::StringRef json,
           llvm::function_ref<void(llvm::json::Object &)> mutate) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  EXPECT_TRUE(static_cast<bool>(value));
  if (!value) {
    llvm::consumeError(value.takeError());
    return "";
  }
  mutate(*value->getAsObject());
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", *value);
  return text;
}

/// A CUDA attention artifact: f16, D = Dv = 64, Hq = 8, Hkv = 2, LSE,
/// block_q = 64, sm_80, PTX ISA 8.0, grid (q_tiles, heads, batch).
inline KernelMetadata makeCudaAttentionMetadata() {
  KernelMetadata md;
  md.name = "attn";
  md.op = OpKind::Attention;
  md.symbol = "fa_attn";
  md.dtype = DType::F16;
  md.headDim = md.valueHeadDim = 64;
  md.heads = 8;
  md.kvHeads = 2;
  md.scale = 0.125;
  md.hasLse = true;
  md.blockQ = md.blockKV = 64;
  md.target.kind = TargetKind::Cuda;
  md.target.chip = "sm_80";
  md.target.ptxIsa = "8.0";
  md.files.ptx = "attn.ptx";
  LaunchInfo launch;
  launch.block = {128, 1, 1};
  launch.grid = {GridAxis::QueryTiles, GridAxis::Heads, GridAxis::Batch};
  md.launch = launch;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  return md;
}

/// Minimal PTX with `version`, `target` and an entry `entry`.
inline std::string makePtx(llvm::StringRef version = "8.0",
                           llvm::StringRef target = "sm_80",
                           llvm::StringRef entry = "fa_attn") {
  return ("//\n// test PTX\n//\n\n.version " + version + "\n.target " +
          target + "\n.address_size 64\n\n\t// .globl\t" + entry +
          "\n.visible .entry " + entry + "(\n\t.param .u64 " + entry +
          "_param_0\n)\n{\n\tret;\n\n}\n")
      .str();
}

/// `ptx` with the signature of `md` declared, as fa-compile writes it.
inline std::string signPtx(llvm::StringRef ptx, const KernelMetadata &md) {
  return addPtxSignature(std::string(ptx), getSignatureSymbol(md),
                         getKernelSignature(md));
}

} // namespace test
} // namespace runtime
} // namespace fa

#endif // FA_TEST_UNIT_RUNTIME_RUNTIMETESTUTILS_H
