//===- RuntimeInternal.h - FARuntime internals ------------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the C API (FARuntime.cpp) shares with the backends: errors that carry
// an fa_status, the validated argument list of a launch, and the backend
// interface.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define FA_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/KernelMetadata.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace fa {
namespace runtime {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// An llvm::Error payload carrying an fa_status and a message.
class RuntimeError : public llvm::ErrorInfo<RuntimeError> {
public:
  static char ID;

  RuntimeError(fa_status status, std::string message)
      : status(status), message(std::move(message)) {}

  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

  fa_status getStatus() const { return status; }
  const std::string &getMessage() const { return message; }

private:
  fa_status status;
  std::string message;
};

/// An error with `status` and `message`.
inline llvm::Error makeRuntimeError(fa_status status,
                                    const llvm::Twine &message) {
  return llvm::make_error<RuntimeError>(status, message.str());
}

/// Re-tags a plain error as `status` (RuntimeErrors keep their status),
/// prefixing the message with `prefix`.
llvm::Error withStatus(llvm::Error err, fa_status status,
                       const llvm::Twine &prefix = "");

//===----------------------------------------------------------------------===//
// Launch arguments
//===----------------------------------------------------------------------===//

/// One validated kernel argument: a contiguous row-major buffer.
struct BoundParam {
  void *data = nullptr;
  int64_t rank = 0;
  int64_t sizes[FA_MAX_RANK] = {0, 0, 0, 0};
  int64_t strides[FA_MAX_RANK] = {0, 0, 0, 0}; ///< canonical, in elements
};

/// A validated launch: the params in the metadata's call order and the
/// values of the metadata's symbols (KernelMetadata::getSymbols order).
struct LaunchArgs {
  llvm::SmallVector<BoundParam, 8> params;
  llvm::SmallVector<int64_t, 9> symbols;
};

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

/// Runs one loaded artifact.
class Backend {
public:
  virtual ~Backend();
  /// Launches with validated arguments.
  virtual llvm::Error launch(const LaunchArgs &args, void *cudaStream) = 0;
};

/// Loads a CUDA artifact (metadata already parsed; `dir` holds its files).
llvm::Expected<std::unique_ptr<Backend>>
loadCudaBackend(const KernelMetadata &metadata, llvm::StringRef dir);

/// Loads a CPU artifact.
llvm::Expected<std::unique_ptr<Backend>>
loadCpuBackend(const KernelMetadata &metadata, llvm::StringRef dir);

/// Implements fa_cuda_available.
llvm::Error getCudaDeviceCount(int &count);

/// Reads a whole file; FA_ERROR_IO naming `what` and the path on failure.
llvm::Expected<std::string> readArtifactFile(llvm::StringRef path,
                                             llvm::StringRef what);

} // namespace runtime
} // namespace fa

#endif // FA_LIB_RUNTIME_RUNTIMEINTERNAL_H
