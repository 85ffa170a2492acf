//===- Npy.h - NumPy .npy file reading and writing --------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Reads and writes NumPy's .npy format (versions 1.0, 2.0 and 3.0 on input,
// 1.0 on output) for the few element types fa's tools exchange: float32,
// float16, bool and int32, little-endian, C order.
//
// Format reference: numpy/lib/format.py. A file is the magic string
// "\x93NUMPY", a major and minor version byte, a little-endian header length
// (2 bytes in 1.0, 4 bytes in 2.0 and 3.0), and a Python dict literal such as
//
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//
// padded with spaces and a newline so that the data starts at a multiple of
// 64 bytes, followed by the raw elements.
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_NPY_H
#define FA_SUPPORT_NPY_H

#include "fa/Support/OutputFile.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
namespace fa {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// The element types fa reads and writes.
enum class NpyDType : uint8_t {
  Float32, ///< '<f4'
  Float16, ///< '<f2', IEEE binary16 stored as raw 16-bit patterns
  Bool,    ///< '|b1', one byte per element, 0 or 1
  Int32,   ///< '<i4'
  UInt16,  ///< '<u2'; tools read bfloat16 bit patterns from it on request
  Void16,  ///< '<V2' (or '|V2'): what NumPy writes for ml_dtypes' bfloat16
  Int8,    ///< '|i1' (block masks)
};

/// Returns NumPy's name of `dtype`: "float32", "float16", "bool", "int32",
/// "uint16", "void16", "int8".
llvm::StringRef getNpyDTypeName(NpyDType dtype);

/// Returns the .npy descriptor of `dtype`: "<f4", "<f2", "|b1", "<i4", "<u2",
/// "<V2", "|i1".
llvm::StringRef getNpyDTypeDescr(NpyDType dtype);

/// Returns the size of one element of `dtype` in bytes.
size_t getNpyDTypeSize(NpyDType dtype);

/// Formats a shape the way NumPy prints it: "()", "(3,)", "(2, 3)".
std::string formatNpyShape(llvm::ArrayRef<int64_t> shape);

//===----------------------------------------------------------------------===//
// NpyArray
//===----------------------------------------------------------------------===//

/// A dense C-order array: element type, shape and the raw little-endian
/// element bytes. The storage is 64-byte aligned (so it can back a memref
/// descriptor that vectorized code reads) and never null, even for arrays
/// with no elements. Move-only: arrays can be large.
class NpyArray {
public:
  /// The alignment of the element storage, in bytes.
  static constexpr size_t kAlignment = 64;

  /// Creates a zero-filled array. Every dim of `shape` must be
  /// non-negative; a 0-d array (empty shape) holds one element.
  NpyArray(NpyDType dtype, llvm::ArrayRef<int64_t> shape);

  NpyArray(NpyArray &&) = default;
  NpyArray &operator=(NpyArray &&) = default;
  NpyArray(const NpyArray &) = delete;
  NpyArray &operator=(const NpyArray &) = delete;

  NpyDType getDType() const { return dtype; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getRank() const { return static_cast<int64_t>(shape.size()); }
  int64_t getNumElements() const { return numElements; }
  size_t getNumBytes() const { return numBytes; }

  /// The element storage (getNumBytes() bytes, kAlignment-aligned).
  void *getData() { return storage.get(); }
  const void *getData() const { return storage.get(); }

  /// The elements viewed as `T`, whose size must be the element size.
  template <typename T> llvm::MutableArrayRef<T> getElements() {
    assert(sizeof(T) == getNpyDTypeSize(dtype) && "element size mismatch");
    return {static_cast<T *>(getData()), static_cast<size_t>(numElements)};
  }
  template <typename T> llvm::ArrayRef<T> getElements() const {
    assert(sizeof(T) == getNpyDTypeSize(dtype) && "element size mismatch");
    return {static_cast<const T *>(getData()),
            static_cast<size_t>(numElements)};
  }

  /// Returns e.g. "float32 (2, 3)".
  std::string describe() const;

private:
  struct Deleter {
    size_t size;
    void operator()(char *ptr) const;
  };

  NpyDType dtype;
  std::vector<int64_t> shape;
  int64_t numElements;
  size_t numBytes;
  std::unique_ptr<char[], Deleter> storage;
};

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Parses the .npy image `bytes`. `name` (usually the file path) starts every
/// error message, e.g. "Q.npy: dtype '<f8' (float64) is not supported
/// (expected float32 or float16)". When `allowed` is not empty, element types
/// outside it are rejected as well.
///
/// Rejected: a bad magic string or version, a malformed header dict (missing,
/// unknown or ill-typed keys), fortran_order True, big-endian or unsupported
/// dtypes, negative dims, and data that is shorter or longer than the shape
/// says.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes, llvm::StringRef name,
                                  llvm::ArrayRef<NpyDType> allowed = {});

/// Reads and parses the .npy file at `path` (see parseNpy).
llvm::Expected<NpyArray> readNpyFile(llvm::StringRef path,
                                     llvm::ArrayRef<NpyDType> allowed = {});

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// Returns the header (magic, version, length and padded dict) NumPy 1.24's
/// `np.save` writes for `array`: version 1.0 unless the dict needs more than
/// 65535 bytes, padded so the data starts at a multiple of 64 bytes.
std::string getNpyHeader(const NpyArray &array);

/// Writes `array` in .npy format (header then data) to `os`.
void writeNpy(llvm::raw_ostream &os, const NpyArray &array);

/// Writes `array` to `path` by writeOutputFile's rules (OutputFile.h):
/// atomically to a regular file, through symbolic links, in place to a device
/// or FIFO; a write error is an error.
llvm::Expected<WrittenOutput> writeNpyFile(llvm::StringRef path,
                                           const NpyArray &array);

} // namespace fa
} // namespace mlir

#endif // FA_SUPPORT_NPY_H
