//===- RuntimeInternal.h - FARuntime internals ------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the C API (FARuntime.cpp) shares with the backends: failures that
// carry an fa_status, a few string and file helpers, the validated argument
// list of a launch, and the backend interface.
//
// FARuntime depends on the C++17 standard library and libdl only (no LLVM):
// it builds on machines without LLVM (see lib/Runtime/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define FA_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/KernelMetadata.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace fa {
namespace runtime {

//===----------------------------------------------------------------------===//
// Failures
//===----------------------------------------------------------------------===//

/// A failed operation: the status the C API returns and its one-line
/// message.
struct Failure {
  fa_status status = FA_ERROR_INVALID_ARGUMENT;
  std::string message;
};

/// Nothing (success) or a failure.
using MaybeFailure = std::optional<Failure>;

inline Failure makeFailure(fa_status status, std::string message) {
  return Failure{status, std::move(message)};
}

/// `failure` with `prefix` in front of its message.
inline Failure prefixed(Failure failure, const std::string &prefix) {
  failure.message = prefix + failure.message;
  return failure;
}

/// A value or a failure.
template <typename T>
class [[nodiscard]] Result {
public:
  Result(T value) : value(std::move(value)) {}
  Result(Failure failure) : failure(std::move(failure)) {}

  bool ok() const { return value.has_value(); }
  explicit operator bool() const { return ok(); }
  T &operator*() { return *value; }
  const T &operator*() const { return *value; }
  T *operator->() { return &*value; }
  const T *operator->() const { return &*value; }
  /// The failure (only meaningful when !ok()).
  Failure &getFailure() { return failure; }

private:
  std::optional<T> value;
  Failure failure;
};

//===----------------------------------------------------------------------===//
// Strings
//===----------------------------------------------------------------------===//

namespace detail {
inline void appendPart(std::string &out, std::string_view s) { out += s; }
inline void appendPart(std::string &out, const char *s) { out += s; }
inline void appendPart(std::string &out, const std::string &s) { out += s; }
inline void appendPart(std::string &out, char c) { out += c; }
template <typename T>
inline std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, char> &&
                        !std::is_same_v<T, bool>>
appendPart(std::string &out, T value) {
  if constexpr (std::is_signed_v<T>)
    out += std::to_string(static_cast<long long>(value));
  else
    out += std::to_string(static_cast<unsigned long long>(value));
}
} // namespace detail

/// Concatenates strings, characters and integers (in decimal).
template <typename... Parts>
std::string cat(const Parts &...parts) {
  std::string out;
  (detail::appendPart(out, parts), ...);
  return out;
}

inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
inline bool isAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool isAlnum(char c) { return isDigit(c) || isAlpha(c); }
inline bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

inline bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
inline bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

/// `s` without leading and trailing white space.
std::string_view trim(std::string_view s);

/// `s` split at every `separator` (empty pieces kept).
std::vector<std::string_view> split(std::string_view s, char separator);

/// The pieces joined with `separator`.
std::string join(const std::vector<std::string> &pieces,
                 std::string_view separator);

/// Parses a whole string of decimal digits (no sign) into `value`; false
/// on anything else or overflow.
bool parseUnsigned(std::string_view s, uint64_t &value);

/// "0x7f..." for a pointer.
std::string formatPointer(const void *p);

//===----------------------------------------------------------------------===//
// Files and paths
//===----------------------------------------------------------------------===//

/// Reads a whole file; FA_ERROR_IO naming `what` and the path on failure.
Result<std::string> readArtifactFile(const std::string &path,
                                     std::string_view what);

/// Whether `path` names an existing file system entry.
bool pathExists(const std::string &path);

/// The directory part of `path` made absolute ("/a/b/c.json" -> "/a/b").
std::string getAbsoluteDirectory(const std::string &path);

/// `dir` + "/" + `name` (or `name` when it is absolute).
std::string joinPath(const std::string &dir, const std::string &name);

//===----------------------------------------------------------------------===//
// Launch arguments
//===----------------------------------------------------------------------===//

/// The highest rank of a kernel param: the caller's tensors have at most
/// FA_MAX_RANK dims, a split-KV workspace's partial outputs 5.
inline constexpr int64_t kMaxParamRank = 5;

/// One validated kernel argument: a contiguous row-major buffer.
struct BoundParam {
  void *data = nullptr;
  int64_t rank = 0;
  int64_t sizes[kMaxParamRank] = {};
  int64_t strides[kMaxParamRank] = {}; ///< canonical, in elements
};

/// A validated launch: the params in the metadata's call order and the
/// values of the metadata's symbols (KernelMetadata::getSymbols order).
struct LaunchArgs {
  std::vector<BoundParam> params;
  std::vector<int64_t> symbols;
};

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

/// Runs one loaded artifact.
class Backend {
public:
  virtual ~Backend();
  /// Launches with validated arguments.
  virtual MaybeFailure launch(const LaunchArgs &args, void *cudaStream) = 0;
  /// The SMs of a CUDA kernel's device (read at load for split-KV
  /// kernels), else 0.
  virtual int64_t getMultiprocessorCount() const { return 0; }
};

/// Loads a CUDA artifact (metadata already parsed; `dir` holds its files).
Result<std::unique_ptr<Backend>> loadCudaBackend(const KernelMetadata &metadata,
                                                 const std::string &dir);

/// Loads a CPU artifact.
Result<std::unique_ptr<Backend>> loadCpuBackend(const KernelMetadata &metadata,
                                                const std::string &dir);

/// Implements fa_cuda_available.
MaybeFailure getCudaDeviceCount(int &count);

} // namespace runtime
} // namespace fa

#endif // FA_LIB_RUNTIME_RUNTIMEINTERNAL_H
