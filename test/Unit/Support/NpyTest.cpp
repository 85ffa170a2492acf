//===- NpyTest.cpp - tests of the .npy reader and writer ------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Support/Npy.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "TempDir.h"

#include "gtest/gtest.h"

#include <cstring>
#include <string>
#include <vector>

using namespace llvm;
using namespace mlir::fa;

namespace {

/// Returns the message of `err` (which must be an error).
std::string errorMessage(Error err) {
  EXPECT_TRUE(static_cast<bool>(err)) << "expected an error";
  return toString(std::move(err));
}

/// Writes `array` to `path`, returning only the error.
Error writeNpy(StringRef path, const NpyArray &array) {
  return writeNpyFile(path, array).takeError();
}

/// Parses `bytes` and expects it to fail; returns the message.
std::string parseError(StringRef bytes, ArrayRef<NpyDType> allowed = {}) {
  Expected<NpyArray> array = parseNpy(bytes, "x.npy", allowed);
  if (array) {
    ADD_FAILURE() << "parsed " << array->describe() << ", expected an error";
    return "";
  }
  return toString(array.takeError());
}

/// Builds a version 1.0 .npy image with header dict `dict` (padded as NumPy
/// does) followed by `data`.
std::string makeNpy(StringRef dict, StringRef data, unsigned major = 1) {
  size_t lenSize = major == 1 ? 2 : 4;
  std::string header = dict.str();
  size_t total = 6 + 2 + lenSize + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < lenSize; ++i)
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data.str();
}

/// `n` bytes of data.
std::string bytesOf(size_t n) { return std::string(n, '\x01'); }

/// Serializes `array` in memory.
std::string serialize(const NpyArray &array) {
  std::string s;
  raw_string_ostream os(s);
  writeNpy(os, array);
  return s;
}

/// Fills an array's bytes with a recognizable pattern valid for every dtype
/// (bool bytes stay 0 or 1).
void fillPattern(NpyArray &array) {
  auto *bytes = static_cast<uint8_t *>(array.getData());
  for (size_t i = 0; i < array.getNumBytes(); ++i)
    bytes[i] = array.getDType() == NpyDType::Bool
                   ? static_cast<uint8_t>(i % 3 == 0)
                   : static_cast<uint8_t>(i * 37 + 11);
}

using fa_test::TempDir;

constexpr NpyDType kAllDTypes[] = {NpyDType::Float32, NpyDType::Float16,
                                   NpyDType::Bool,    NpyDType::Int32,
                                   NpyDType::UInt16,  NpyDType::Void16,
                                   NpyDType::Int8};

const std::vector<std::vector<int64_t>> kShapes = {
    {}, {0}, {1}, {7}, {2, 3}, {3, 0, 5}, {2, 3, 4, 5}, {1, 1, 1}};

//===----------------------------------------------------------------------===//
// Element types and arrays
//===----------------------------------------------------------------------===//

TEST(NpyTest, DTypeNamesAndSizes) {
  EXPECT_EQ(getNpyDTypeName(NpyDType::Float32), "float32");
  EXPECT_EQ(getNpyDTypeName(NpyDType::Float16), "float16");
  EXPECT_EQ(getNpyDTypeName(NpyDType::Bool), "bool");
  EXPECT_EQ(getNpyDTypeName(NpyDType::Int32), "int32");
  EXPECT_EQ(getNpyDTypeName(NpyDType::UInt16), "uint16");
  EXPECT_EQ(getNpyDTypeName(NpyDType::Void16), "void16");
  EXPECT_EQ(getNpyDTypeName(NpyDType::Int8), "int8");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::Float32), "<f4");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::Float16), "<f2");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::Bool), "|b1");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::Int32), "<i4");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::UInt16), "<u2");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::Void16), "<V2");
  EXPECT_EQ(getNpyDTypeDescr(NpyDType::Int8), "|i1");
  EXPECT_EQ(getNpyDTypeSize(NpyDType::Float32), 4u);
  EXPECT_EQ(getNpyDTypeSize(NpyDType::Float16), 2u);
  EXPECT_EQ(getNpyDTypeSize(NpyDType::Bool), 1u);
  EXPECT_EQ(getNpyDTypeSize(NpyDType::Int32), 4u);
  EXPECT_EQ(getNpyDTypeSize(NpyDType::UInt16), 2u);
  EXPECT_EQ(getNpyDTypeSize(NpyDType::Void16), 2u);
  EXPECT_EQ(getNpyDTypeSize(NpyDType::Int8), 1u);
}

TEST(NpyTest, FormatShapeLikeNumPy) {
  EXPECT_EQ(formatNpyShape({}), "()");
  EXPECT_EQ(formatNpyShape({3}), "(3,)");
  EXPECT_EQ(formatNpyShape({2, 3}), "(2, 3)");
  EXPECT_EQ(formatNpyShape({0, 1, 0}), "(0, 1, 0)");
}

TEST(NpyTest, ArraysAreZeroedAlignedAndNonNull) {
  for (NpyDType dtype : kAllDTypes) {
    for (const auto &shape : kShapes) {
      NpyArray array(dtype, shape);
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      EXPECT_EQ(array.getNumElements(), n);
      EXPECT_EQ(array.getNumBytes(), n * getNpyDTypeSize(dtype));
      EXPECT_EQ(array.getRank(), static_cast<int64_t>(shape.size()));
      ASSERT_NE(array.getData(), nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(array.getData()) %
                    NpyArray::kAlignment,
                0u);
      const auto *bytes = static_cast<const uint8_t *>(array.getData());
      for (size_t i = 0; i < array.getNumBytes(); ++i)
        ASSERT_EQ(bytes[i], 0);
    }
  }
  NpyArray f(NpyDType::Float32, {2, 2});
  f.getElements<float>()[3] = 1.5f;
  EXPECT_EQ(f.getElements<float>().size(), 4u);
  EXPECT_EQ(static_cast<const NpyArray &>(f).getElements<float>()[3], 1.5f);
  EXPECT_EQ(f.describe(), "float32 (2, 2)");
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(NpyTest, RoundTripEveryDTypeAndShapeInMemory) {
  for (NpyDType dtype : kAllDTypes) {
    for (const auto &shape : kShapes) {
      NpyArray array(dtype, shape);
      fillPattern(array);
      std::string bytes = serialize(array);
      Expected<NpyArray> back = parseNpy(bytes, "mem.npy");
      ASSERT_TRUE(static_cast<bool>(back)) << toString(back.takeError());
      EXPECT_EQ(back->getDType(), dtype);
      EXPECT_EQ(back->getShape(), ArrayRef<int64_t>(shape));
      ASSERT_EQ(back->getNumBytes(), array.getNumBytes());
      EXPECT_EQ(
          std::memcmp(back->getData(), array.getData(), array.getNumBytes()), 0)
          << array.describe();
    }
  }
}

TEST(NpyTest, RoundTripThroughFiles) {
  TempDir dir;
  for (NpyDType dtype : kAllDTypes) {
    for (const auto &shape : kShapes) {
      NpyArray array(dtype, shape);
      fillPattern(array);
      std::string path = dir.file("a.npy");
      ASSERT_FALSE(static_cast<bool>(writeNpy(path, array)));
      Expected<NpyArray> back = readNpyFile(path);
      ASSERT_TRUE(static_cast<bool>(back)) << toString(back.takeError());
      EXPECT_EQ(back->getDType(), dtype);
      EXPECT_EQ(back->getShape(), ArrayRef<int64_t>(shape));
      EXPECT_EQ(
          std::memcmp(back->getData(), array.getData(), array.getNumBytes()),
          0);
    }
  }
  // Only the output is left: no temporary files.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.npy"});
}

TEST(NpyTest, ReadsVersions2And3) {
  std::string data(6 * 4, '\0');
  float values[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(data.data(), values, sizeof(values));
  for (unsigned major : {2u, 3u}) {
    std::string bytes =
        makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                data, major);
    Expected<NpyArray> array = parseNpy(bytes, "v.npy");
    ASSERT_TRUE(static_cast<bool>(array)) << toString(array.takeError());
    EXPECT_EQ(array->getShape(), ArrayRef<int64_t>({2, 3}));
    EXPECT_EQ(array->getElements<float>()[5], 6.0f);
  }
}

TEST(NpyTest, AcceptsLiteralVariations) {
  // Double quotes, other key order, no spaces, no trailing comma, '=' byte
  // order, Python 2 long literals, a 1-tuple with a space before ')'.
  for (StringRef dict :
       {StringRef("{\"shape\": (2,), \"fortran_order\": False, \"descr\": "
                  "\"<i4\"}"),
        StringRef("{'descr':'=i4','fortran_order':False,'shape':(2L,)}"),
        StringRef("{ 'descr' : '<i4' , 'fortran_order' : False , "
                  "'shape' : ( 2 , ) , }")}) {
    Expected<NpyArray> array = parseNpy(makeNpy(dict, bytesOf(8)), "v.npy");
    ASSERT_TRUE(static_cast<bool>(array))
        << dict.str() << ": " << toString(array.takeError());
    EXPECT_EQ(array->getDType(), NpyDType::Int32);
    EXPECT_EQ(array->getShape(), ArrayRef<int64_t>({2}));
  }
  // A one-byte type may carry any byte order.
  Expected<NpyArray> b = parseNpy(
      makeNpy("{'descr': '<b1', 'fortran_order': False, 'shape': (3,), }",
              std::string("\x01\x00\x01", 3)),
      "b.npy");
  ASSERT_TRUE(static_cast<bool>(b)) << toString(b.takeError());
  EXPECT_EQ(b->getDType(), NpyDType::Bool);
}

//===----------------------------------------------------------------------===//
// The header NumPy writes
//===----------------------------------------------------------------------===//

/// Headers produced by NumPy 1.24's np.lib.format.write_array (np.save) for
/// these arrays, byte for byte.
TEST(NpyTest, HeaderMatchesNumPyByteForByte) {
  auto numpyHeader = [](StringRef dict, size_t totalLen) {
    std::string h = dict.str();
    h.append(totalLen - 10 - dict.size() - 1, ' ');
    h.push_back('\n');
    std::string prefix = "\x93NUMPY\x01";
    prefix.push_back('\0');
    size_t len = totalLen - 10;
    prefix.push_back(static_cast<char>(len & 0xff));
    prefix.push_back(static_cast<char>(len >> 8));
    return prefix + h;
  };
  // np.zeros((2, 3), np.float32)
  EXPECT_EQ(getNpyHeader(NpyArray(NpyDType::Float32, {2, 3})),
            numpyHeader("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2, 3), }",
                        128));
  // np.zeros((), np.float16)
  EXPECT_EQ(getNpyHeader(NpyArray(NpyDType::Float16, {})),
            numpyHeader("{'descr': '<f2', 'fortran_order': False, "
                        "'shape': (), }",
                        128));
  // np.zeros((0,), np.bool_)
  EXPECT_EQ(getNpyHeader(NpyArray(NpyDType::Bool, {0})),
            numpyHeader("{'descr': '|b1', 'fortran_order': False, "
                        "'shape': (0,), }",
                        128));
  // np.zeros((3, 0, 5), np.int32)
  EXPECT_EQ(getNpyHeader(NpyArray(NpyDType::Int32, {3, 0, 5})),
            numpyHeader("{'descr': '<i4', 'fortran_order': False, "
                        "'shape': (3, 0, 5), }",
                        128));
  // np.zeros((1,) * 20, np.float32): a header longer than 128 bytes.
  std::vector<int64_t> ones(20, 1);
  EXPECT_EQ(getNpyHeader(NpyArray(NpyDType::Float32, ones)),
            numpyHeader("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
                        "1, 1, 1, 1, 1, 1), }",
                        192));
}

TEST(NpyTest, HeaderStructure) {
  for (NpyDType dtype : kAllDTypes) {
    for (const auto &shape : kShapes) {
      std::string h = getNpyHeader(NpyArray(dtype, shape));
      ASSERT_GE(h.size(), 11u);
      EXPECT_EQ(h.size() % 64, 0u) << "data must start 64-byte aligned";
      EXPECT_EQ(StringRef(h).take_front(8), StringRef("\x93NUMPY\x01\x00", 8));
      size_t len = static_cast<uint8_t>(h[8]) |
                   (static_cast<size_t>(static_cast<uint8_t>(h[9])) << 8);
      EXPECT_EQ(len + 10, h.size());
      EXPECT_EQ(h.back(), '\n');
      EXPECT_NE(h.find(("'descr': '" + getNpyDTypeDescr(dtype) + "'").str()),
                std::string::npos);
      EXPECT_NE(h.find("'shape': " + formatNpyShape(shape) + ", }"),
                std::string::npos);
    }
  }
}

//===----------------------------------------------------------------------===//
// Rejections
//===----------------------------------------------------------------------===//

TEST(NpyTest, RejectsBadMagicAndVersions) {
  EXPECT_EQ(parseError("PK\x03\x04 not numpy"),
            "x.npy: not a .npy file (missing the \\x93NUMPY magic string)");
  EXPECT_EQ(parseError(""),
            "x.npy: not a .npy file (missing the \\x93NUMPY magic string)");
  EXPECT_EQ(parseError("\x93NUMPY"), "x.npy: truncated header (no format "
                                     "version)");
  std::string v4 = makeNpy(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", bytesOf(4));
  v4[6] = 4;
  EXPECT_EQ(parseError(v4), "x.npy: .npy format version 4.0 is not supported "
                            "(expected 1.0, 2.0 or 3.0)");
  v4[6] = 1;
  v4[7] = 1;
  EXPECT_EQ(parseError(v4), "x.npy: .npy format version 1.1 is not supported "
                            "(expected 1.0, 2.0 or 3.0)");
}

TEST(NpyTest, RejectsTruncatedHeaders) {
  std::string full = makeNpy(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", bytesOf(4));
  EXPECT_EQ(parseError(StringRef(full).take_front(9)),
            "x.npy: truncated header (no header length)");
  EXPECT_EQ(parseError(StringRef(full).take_front(40)),
            "x.npy: truncated header: it declares 118 bytes, the file has 30 "
            "after the prefix");
}

TEST(NpyTest, RejectsMalformedHeaderDicts) {
  struct Case {
    const char *dict;
    const char *message;
  };
  const Case cases[] = {
      {"[1, 2]", "expected '{' at the start of the header dict, found "
                 "'[1, 2]'"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'fortran_order': False, 'shape': ()}", "missing key 'descr'"},
      {"{'descr': '<f4', 'shape': ()}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}",
       "unexpected key 'x' (expected 'descr', 'fortran_order' and 'shape')"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
       "'shape': ()}",
       "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
       "'fortran_order': expected True or False, found '0, 'shape': ...'"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': ()}",
       "'descr': expected a string, found '<f4, 'fortra...'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': ()}",
       "expected ',' or '}' after the value of 'descr', found "
       "'fortran_orde...'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}",
       "structured dtypes are not supported ('descr' is a list)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
       "'shape' must be a tuple of integers, found '[2, 3]}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}",
       "'shape' has a negative dim: '-3)}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
       "expected ',' or ')' in 'shape', found '3)}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
       "expected an integer in 'shape', found ',)}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}",
       "expected ',' or ')' in 'shape', found '.5,)}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}",
       "'shape' must be a tuple; a 1-tuple needs a trailing comma, as in "
       "(3,)"},
      {"{'descr': '<f4', 'fortran_order': False, "
       "'shape': (99999999999999999999,)}",
       "'shape' dim 99999999999999999999 is too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk",
       "unexpected text after the header dict: 'junk'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': ()}",
       "expected ',' or '}' after the value of 'descr', found "
       "''fortran_ord...'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,",
       "expected an integer in 'shape', found end of header"},
      {"{'descr': 'a\\'b', 'fortran_order': False, 'shape': ()}",
       "'descr': escape sequences in strings are not supported: 'a\\'"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(parseError(makeNpy(c.dict, "")),
              std::string("x.npy: malformed header: ") + c.message)
        << c.dict;
}

TEST(NpyTest, RejectsFortranOrder) {
  EXPECT_EQ(
      parseError(
          makeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                  bytesOf(24))),
      "x.npy: fortran_order True (column-major data) is not supported; save "
      "a C-order array, e.g. with numpy.ascontiguousarray");
}

TEST(NpyTest, RejectsUnsupportedDTypes) {
  auto withDescr = [](StringRef descr) {
    return makeNpy(
        ("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }")
            .str(),
        bytesOf(8));
  };
  EXPECT_EQ(parseError(withDescr("<f8")),
            "x.npy: dtype '<f8' (float64) is not supported (expected "
            "float32, float16, bool, int32, uint16, void16 or int8)");
  EXPECT_EQ(parseError(withDescr("<i8")),
            "x.npy: dtype '<i8' (int64) is not supported (expected float32, "
            "float16, bool, int32, uint16, void16 or int8)");
  EXPECT_EQ(parseError(withDescr("|u1")),
            "x.npy: dtype '|u1' (uint8) is not supported (expected float32, "
            "float16, bool, int32, uint16, void16 or int8)");
  EXPECT_EQ(parseError(withDescr("<c8")),
            "x.npy: dtype '<c8' (complex64) is not supported (expected "
            "float32, float16, bool, int32, uint16, void16 or int8)");
  EXPECT_EQ(parseError(withDescr("<U3")),
            "x.npy: dtype '<U3' is not supported (expected float32, float16, "
            "bool, int32, uint16, void16 or int8)");
  EXPECT_EQ(parseError(withDescr("O")),
            "x.npy: dtype 'O' is not supported (expected float32, float16, "
            "bool, int32, uint16, void16 or int8)");
  EXPECT_EQ(parseError(withDescr(">f4")),
            "x.npy: dtype '>f4' is big-endian (only little-endian data is "
            "supported)");
  EXPECT_EQ(parseError(withDescr(">i4")),
            "x.npy: dtype '>i4' is big-endian (only little-endian data is "
            "supported)");
  // Restricted to what the caller accepts.
  const NpyDType floats[] = {NpyDType::Float32, NpyDType::Float16};
  EXPECT_EQ(parseError(withDescr("<f8"), floats),
            "x.npy: dtype '<f8' (float64) is not supported (expected float32 "
            "or float16)");
  EXPECT_EQ(parseError(withDescr("<i4"), floats),
            "x.npy: dtype '<i4' (int32) is not supported (expected float32 "
            "or float16)");
  const NpyDType ints[] = {NpyDType::Int32};
  EXPECT_EQ(parseError(withDescr("<f4"), ints),
            "x.npy: dtype '<f4' (float32) is not supported (expected int32)");
}

TEST(NpyTest, RejectsTruncatedAndTrailingData) {
  const char *dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(parseError(makeNpy(dict, bytesOf(20))),
            "x.npy: truncated data: shape (2, 3) of float32 needs 24 bytes, "
            "the file has 20");
  EXPECT_EQ(parseError(makeNpy(dict, "")),
            "x.npy: truncated data: shape (2, 3) of float32 needs 24 bytes, "
            "the file has 0");
  EXPECT_EQ(parseError(makeNpy(dict, bytesOf(25))),
            "x.npy: 1 bytes of trailing data after the 24 bytes of shape "
            "(2, 3) of float32");
  EXPECT_EQ(parseError(makeNpy("{'descr': '<f2', 'fortran_order': False, "
                               "'shape': (4000000000, 4000000000, "
                               "4000000000), }",
                               "")),
            "x.npy: shape (4000000000, 4000000000, 4000000000) has too many "
            "elements");
}

TEST(NpyTest, ReadErrorsNameTheFile) {
  TempDir dir;
  std::string missing = dir.file("missing.npy");
  EXPECT_EQ(errorMessage(readNpyFile(missing).takeError()),
            missing + ": cannot read: No such file or directory");
  EXPECT_EQ(errorMessage(readNpyFile(dir.path).takeError()),
            std::string(dir.path) + ": is a directory, not a .npy file");
}

//===----------------------------------------------------------------------===//
// Atomic writes
//===----------------------------------------------------------------------===//

TEST(NpyTest, WriteReplacesExistingFile) {
  TempDir dir;
  std::string path = dir.file("o.npy");
  NpyArray big(NpyDType::Float32, {100});
  ASSERT_FALSE(static_cast<bool>(writeNpy(path, big)));
  NpyArray small(NpyDType::Int32, {2});
  small.getElements<int32_t>()[1] = 42;
  ASSERT_FALSE(static_cast<bool>(writeNpy(path, small)));
  Expected<NpyArray> back = readNpyFile(path);
  ASSERT_TRUE(static_cast<bool>(back)) << toString(back.takeError());
  EXPECT_EQ(back->getDType(), NpyDType::Int32);
  EXPECT_EQ(back->getElements<int32_t>()[1], 42);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"o.npy"});
}

TEST(NpyTest, FailedWriteLeavesNothingBehind) {
  TempDir dir;
  NpyArray array(NpyDType::Float32, {4});
  // A missing directory: nothing can be created.
  std::string inMissingDir = dir.file("no/such/dir/o.npy");
  std::string msg = errorMessage(writeNpy(inMissingDir, array));
  EXPECT_EQ(msg, inMissingDir + ": cannot create a temporary file next to "
                                "it: No such file or directory");
  EXPECT_FALSE(sys::fs::exists(inMissingDir));
  // The target is a directory: refused before anything is created.
  std::string sub = dir.file("sub");
  ASSERT_FALSE(sys::fs::create_directory(sub));
  EXPECT_EQ(errorMessage(writeNpy(sub, array)),
            sub + ": cannot write: it is a directory");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"sub"});
}

} // namespace
