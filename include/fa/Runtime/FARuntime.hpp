//===- FARuntime.hpp - C++ wrapper of the fa kernel launcher ----*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A header-only RAII layer over FARuntime.h using only the standard library
// (no exceptions, no LLVM):
//
//   fa::runtime::Kernel kernel;
//   if (fa::runtime::Status s = fa::runtime::Kernel::load(path,
//                                   FA_DEVICE_CPU, kernel); !s)
//     std::cerr << s.message() << "\n";
//   fa::runtime::AttentionArgs args;
//   args.q = fa::runtime::makeTensor(q, FA_DTYPE_F32, {B, 8, N, 64});
//   ...
//   fa::runtime::Status s = kernel.attention(args);
//
// Note: inside code that has `using namespace mlir;`, `fa::` is ambiguous
// with `mlir::fa`; spell this namespace `::fa::runtime` there.
//
//===----------------------------------------------------------------------===//

#ifndef FA_RUNTIME_FARUNTIME_HPP
#define FA_RUNTIME_FARUNTIME_HPP

#include "fa/Runtime/FARuntime.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace fa {
namespace runtime {

/// The outcome of a runtime call: a status code and, on failure, the
/// message `fa_last_error()` gave.
class Status {
public:
  Status() = default;
  Status(fa_status code, std::string message)
      : code_(code), message_(std::move(message)) {}

  /// Captures `code` and, when it is a failure, this thread's last error.
  static Status fromCode(fa_status code) {
    if (code == FA_SUCCESS)
      return Status();
    return Status(code, fa_last_error());
  }

  bool ok() const { return code_ == FA_SUCCESS; }
  explicit operator bool() const { return ok(); }
  fa_status code() const { return code_; }
  const std::string &message() const { return message_; }
  /// "FA_ERROR_INVALID_ARGUMENT: <message>".
  std::string toString() const {
    if (ok())
      return "FA_SUCCESS";
    return std::string(fa_status_name(code_)) + ": " + message_;
  }

private:
  fa_status code_ = FA_SUCCESS;
  std::string message_;
};

/// A contiguous row-major tensor view of `data`.
inline fa_tensor makeTensor(void *data, fa_dtype dtype,
                            std::initializer_list<int64_t> sizes) {
  int64_t buffer[FA_MAX_RANK] = {0, 0, 0, 0};
  int32_t rank = 0;
  for (int64_t size : sizes) {
    if (rank == FA_MAX_RANK) {
      // Let the launch report the rank; fa_tensor holds FA_MAX_RANK dims.
      rank = FA_MAX_RANK + 1;
      break;
    }
    buffer[rank++] = size;
  }
  if (rank > FA_MAX_RANK) {
    fa_tensor t = fa_tensor_make(data, dtype, FA_MAX_RANK, buffer);
    t.rank = rank;
    return t;
  }
  return fa_tensor_make(data, dtype, rank, buffer);
}

/// The operands of `Kernel::attention`; the optional ones stay null.
struct AttentionArgs {
  fa_tensor q{}, k{}, v{}, o{};
  const fa_tensor *kvLens = nullptr;
  const fa_tensor *mask = nullptr;
  fa_tensor *lse = nullptr;
  /// The modifier operands (ALiBi slopes, segment ids), for kernels
  /// compiled with them.
  fa_attention_extras extras{};
  /// The tensors a kernel's score_mod / mask_mod regions read, in the
  /// kernel's order (fa_kernel_get_regions).
  std::vector<const fa_tensor *> modOperands;
  /// The block mask of a kernel compiled with one
  /// (fa_kernel_get_block_tiles).
  const fa_tensor *blockMask = nullptr;
  /// The block table of a paged-cache kernel (k and v are then its pages;
  /// fa_attention_launch_paged).
  const fa_tensor *blockTable = nullptr;
  /// The offsets of a variable-length kernel (fa_attention_launch_varlen).
  const fa_tensor *cuSeqlensQ = nullptr, *cuSeqlensK = nullptr;
  /// The parts and workspace of a split-KV kernel
  /// (fa_attention_launch_split / _paged_split).
  const fa_split_kv *split = nullptr;
};

/// The operands of `Kernel::attentionBackward`; the optional ones stay
/// null (they are the forward's).
struct AttentionBackwardArgs {
  fa_tensor q{}, k{}, v{}, o{}, lse{}, dO{}, dQ{}, dK{}, dV{};
  const fa_tensor *kvLens = nullptr;
  const fa_tensor *mask = nullptr;
  fa_attention_extras extras{};
};

/// An owned, loaded kernel (move-only).
class Kernel {
public:
  Kernel() = default;
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  Kernel(Kernel &&other) noexcept : kernel_(other.release()) {}
  Kernel &operator=(Kernel &&other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  ~Kernel() { reset(); }

  /// Loads the artifact described by `metadataPath` into `out`.
  static Status load(const std::string &metadataPath, fa_device device,
                     Kernel &out) {
    fa_kernel *kernel = nullptr;
    Status status =
        Status::fromCode(fa_kernel_load(metadataPath.c_str(), device, &kernel));
    if (status)
      out.reset(kernel);
    return status;
  }

  /// Launches an attention kernel (see fa_attention_launch_sparse, or
  /// fa_attention_launch_paged / _varlen when `args` has a block table or
  /// offsets, fa_attention_launch_split / _paged_split with a split).
  Status attention(AttentionArgs &args, void *cudaStream = nullptr) {
    if (args.split && args.blockTable)
      return Status::fromCode(fa_attention_launch_paged_split(
          kernel_, &args.q, &args.k, &args.v, args.blockTable, args.kvLens,
          args.mask, &args.extras, args.split, &args.o, args.lse,
          cudaStream));
    if (args.split)
      return Status::fromCode(fa_attention_launch_split(
          kernel_, &args.q, &args.k, &args.v, args.kvLens, args.mask,
          &args.extras, args.split, &args.o, args.lse, cudaStream));
    if (args.blockTable)
      return Status::fromCode(fa_attention_launch_paged(
          kernel_, &args.q, &args.k, &args.v, args.blockTable, args.kvLens,
          args.mask, &args.extras, &args.o, args.lse, cudaStream));
    if (args.cuSeqlensQ || args.cuSeqlensK)
      return Status::fromCode(fa_attention_launch_varlen(
          kernel_, &args.q, &args.k, &args.v, args.cuSeqlensQ,
          args.cuSeqlensK, &args.extras, &args.o, args.lse, cudaStream));
    return Status::fromCode(fa_attention_launch_sparse(
        kernel_, &args.q, &args.k, &args.v, args.kvLens, args.mask,
        &args.extras, args.modOperands.data(),
        static_cast<int64_t>(args.modOperands.size()), args.blockMask,
        &args.o, args.lse, cudaStream));
  }

  /// Launches an attention backward kernel (see
  /// fa_attention_backward_launch).
  Status attentionBackward(AttentionBackwardArgs &args,
                           void *cudaStream = nullptr) {
    return Status::fromCode(fa_attention_backward_launch(
        kernel_, &args.q, &args.k, &args.v, &args.o, &args.lse, &args.dO,
        args.kvLens, args.mask, &args.extras, &args.dQ, &args.dK, &args.dV,
        cudaStream));
  }

  /// Whether this backward kernel computes the gradients of `forward`
  /// (see fa_kernel_check_backward).
  Status checkBackwardOf(const Kernel &forward) const {
    return Status::fromCode(fa_kernel_check_backward(forward.kernel_, kernel_));
  }

  /// Launches a softmax kernel (see fa_softmax_launch).
  Status softmax(const fa_tensor &x, fa_tensor &y,
                 void *cudaStream = nullptr) {
    return Status::fromCode(fa_softmax_launch(kernel_, &x, &y, cudaStream));
  }

  /// What the kernel was compiled for; zeroed if no kernel is held.
  fa_kernel_info info() const {
    fa_kernel_info info{};
    if (kernel_)
      (void)fa_kernel_get_info(kernel_, &info);
    return info;
  }

  explicit operator bool() const { return kernel_ != nullptr; }
  fa_kernel *get() const { return kernel_; }
  fa_kernel *release() {
    fa_kernel *kernel = kernel_;
    kernel_ = nullptr;
    return kernel;
  }
  void reset(fa_kernel *kernel = nullptr) {
    if (kernel_)
      fa_kernel_destroy(kernel_);
    kernel_ = kernel;
  }

private:
  fa_kernel *kernel_ = nullptr;
};

} // namespace runtime
} // namespace fa

#endif // FA_RUNTIME_FARUNTIME_HPP
