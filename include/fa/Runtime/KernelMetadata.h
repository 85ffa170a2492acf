//===- KernelMetadata.h - fa-kernel/1 artifact metadata ---------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The in-memory form of the `fa-kernel/1` JSON metadata that describes an
// ahead-of-time kernel artifact (docs/artifacts.md), with its reader (used
// by FARuntime) and writer (used by fa-compile), so both sides share one
// definition of the schema.
//
// This is a C++ API of the FARuntime library that uses LLVM Support; the C
// API (FARuntime.h) does not expose it.
//
//===----------------------------------------------------------------------===//

#ifndef FA_RUNTIME_KERNELMETADATA_H
#define FA_RUNTIME_KERNELMETADATA_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace fa {
namespace runtime {

/// The format string this library reads and writes.
inline constexpr const char *kMetadataFormat = "fa-kernel/1";

enum class OpKind { Attention, Softmax };
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
};

llvm::StringRef getOpName(OpKind op);
llvm::StringRef getDTypeName(DType dtype);
/// Bytes per element.
int64_t getDTypeSize(DType dtype);
llvm::StringRef getCausalName(Causal causal);
llvm::StringRef getMaskKindName(MaskKind mask);
llvm::StringRef getRoleName(ParamRole role);
std::optional<DType> parseDType(llvm::StringRef name);

/// One dimension of a parameter's shape: a symbol (`B`, `Hq`, `Nq`, `Nk`,
/// `D`, `Dv`, `Hkv`; `N0`... for softmax) or a fixed size.
struct ShapeDim {
  std::string symbol;
  int64_t size = -1;

  static ShapeDim sym(llvm::StringRef name) { return {name.str(), -1}; }
  static ShapeDim fixed(int64_t size) { return {"", size}; }
  bool isSymbol() const { return !symbol.empty(); }
};

/// A kernel parameter (a memref passed as an MLIR descriptor).
struct ParamInfo {
  std::string name;
  ParamRole role = ParamRole::Query;
  DType dtype = DType::F32;
  llvm::SmallVector<ShapeDim, 4> shape;

  int64_t getRank() const { return shape.size(); }
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

/// The launch configuration of a CUDA kernel. Grid entries are expressions
/// over the kernel's symbols (see LaunchExpr).
struct LaunchInfo {
  std::array<int64_t, 3> block = {1, 1, 1};
  std::array<std::string, 3> grid = {"1", "1", "1"};
  int64_t staticSharedBytes = 0;
  int64_t dynamicSharedBytes = 0;
};

/// Everything `fa-kernel/1` metadata says.
struct KernelMetadata {
  std::string format = kMetadataFormat;
  std::string name;
  OpKind op = OpKind::Attention;
  TargetInfo target;
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

  // Softmax.
  int64_t rank = 0, dimension = 0;

  std::optional<LaunchInfo> launch; ///< required for CUDA
  std::vector<ParamInfo> params;    ///< in call order
  std::string generator;            ///< informational, e.g. "fa-compile"

  /// The symbols shapes and grid expressions may use, in a fixed order:
  /// attention `B Hq Hkv Nq Nk D Dv block_q block_kv`, softmax `N0 ...`.
  llvm::SmallVector<std::string> getSymbols() const;
  /// The param with `role`, or null.
  const ParamInfo *findParam(ParamRole role) const;
};

/// The canonical parameters of an attention or softmax kernel as fa-compile
/// emits them (q, k, v, [kv_lens], [mask], o, [lse]; or x, y), with the
/// canonical symbolic shapes. `maskBroadcastBatch`/`Heads` make the mask's
/// dims 0/1 a fixed 1.
std::vector<ParamInfo> getCanonicalParams(const KernelMetadata &metadata,
                                          DType maskDType,
                                          bool maskBroadcastBatch,
                                          bool maskBroadcastHeads);

/// Parses and checks metadata text. Errors name the field, e.g.
/// "field 'params[2].dtype': expected one of f32, f16, bf16, i32, i8, got
/// 'f64'".
llvm::Expected<KernelMetadata> parseKernelMetadata(llvm::StringRef text);

/// Checks the semantic rules of the schema (what parseKernelMetadata checks
/// after reading the fields): verifyKernelSignature, plus the target, the
/// files and the launch configuration.
llvm::Error verifyKernelMetadata(const KernelMetadata &metadata);

/// Checks what does not depend on the target: name, symbol, dtype, the op's
/// attributes, and the params against the op's flags and canonical shapes.
llvm::Error verifyKernelSignature(const KernelMetadata &metadata);

/// Writes `metadata` as pretty-printed JSON with a fixed field order.
void writeKernelMetadata(const KernelMetadata &metadata,
                         llvm::raw_ostream &os);

/// An integer expression over named symbols, used for grid sizes:
/// integers, symbols, `+ - * /` (`/` rounds down), parentheses and
/// `ceil(a / b)` (also written `cdiv(a, b)`).
class LaunchExpr {
public:
  /// Parses `text`; symbols must be in `symbols` (their index is what
  /// `evaluate` takes).
  static llvm::Expected<LaunchExpr> parse(llvm::StringRef text,
                                          llvm::ArrayRef<std::string> symbols);

  /// Evaluates with `values[i]` for symbol i. Fails on division by zero or
  /// overflow.
  llvm::Expected<int64_t> evaluate(llvm::ArrayRef<int64_t> values) const;

  const std::string &getText() const { return text; }

private:
  enum class Kind : uint8_t { Const, Symbol, Add, Sub, Mul, Div, CeilDiv };
  struct Node {
    Kind kind;
    int64_t value; ///< constant or symbol index
  };
  std::string text;
  std::vector<Node> program; ///< postfix
  friend class LaunchExprParser;
};

} // namespace runtime
} // namespace fa

#endif // FA_RUNTIME_KERNELMETADATA_H
