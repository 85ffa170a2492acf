//===- Npy.cpp - NumPy .npy file reading and writing ----------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Support/Npy.h"

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif
#include "fa/Support/OutputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemAlloc.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <optional>
#include <variant>

using namespace llvm;
using namespace mlir;
using namespace mlir::fa;

static_assert(!sys::IsBigEndianHost,
              "fa's .npy support assumes a little-endian host");

/// The magic string every .npy file starts with.
static constexpr StringLiteral kMagic("\x93NUMPY");

/// Data start alignment that NumPy pads headers to (ARRAY_ALIGN).
static constexpr size_t kHeaderAlign = 64;

/// NumPy reserves room for the leading dim to grow to this many digits
/// (GROWTH_AXIS_MAX_DIGITS in numpy/lib/format.py).
static constexpr size_t kGrowthAxisMaxDigits = 21;

/// Returns an error "<name>: <message>".
static Error makeError(StringRef name, const Twine &message) {
  return createStringError(Twine(name) + ": " + message);
}

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

static constexpr NpyDType kAllDTypes[] = {
    NpyDType::Float32, NpyDType::Float16, NpyDType::Bool,
    NpyDType::Int32,   NpyDType::UInt16,  NpyDType::Void16,
    NpyDType::Int8};

StringRef fa::getNpyDTypeName(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::Float32:
    return "float32";
  case NpyDType::Float16:
    return "float16";
  case NpyDType::Bool:
    return "bool";
  case NpyDType::Int32:
    return "int32";
  case NpyDType::UInt16:
    return "uint16";
  case NpyDType::Void16:
    return "void16";
  case NpyDType::Int8:
    return "int8";
  }
  llvm_unreachable("unknown NpyDType");
}

StringRef fa::getNpyDTypeDescr(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::Float32:
    return "<f4";
  case NpyDType::Float16:
    return "<f2";
  case NpyDType::Bool:
    return "|b1";
  case NpyDType::Int32:
    return "<i4";
  case NpyDType::UInt16:
    return "<u2";
  case NpyDType::Void16:
    return "<V2";
  case NpyDType::Int8:
    return "|i1";
  }
  llvm_unreachable("unknown NpyDType");
}

size_t fa::getNpyDTypeSize(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::Float32:
  case NpyDType::Int32:
    return 4;
  case NpyDType::Float16:
  case NpyDType::UInt16:
  case NpyDType::Void16:
    return 2;
  case NpyDType::Bool:
  case NpyDType::Int8:
    return 1;
  }
  llvm_unreachable("unknown NpyDType");
}

std::string fa::formatNpyShape(ArrayRef<int64_t> shape) {
  std::string s = "(";
  raw_string_ostream os(s);
  interleave(shape, os, ", ");
  if (shape.size() == 1)
    os << ",";
  os << ")";
  return s;
}

/// Returns NumPy's name for a descriptor's kind and size ("float64" for
/// 'f' and 8), or an empty string when there is no common name.
static std::string getCommonTypeName(char kind, unsigned size) {
  switch (kind) {
  case 'f':
    return "float" + std::to_string(size * 8);
  case 'i':
    return "int" + std::to_string(size * 8);
  case 'u':
    return "uint" + std::to_string(size * 8);
  case 'c':
    return "complex" + std::to_string(size * 8);
  case 'b':
    return size == 1 ? "bool" : "";
  case 'V':
    return "void" + std::to_string(size * 8);
  default:
    return "";
  }
}

/// Lists the names of `dtypes` as "float32, float16 or bool".
static std::string listDTypes(ArrayRef<NpyDType> dtypes) {
  std::string s;
  for (auto [i, dtype] : llvm::enumerate(dtypes)) {
    if (i > 0)
      s += i + 1 == dtypes.size() ? " or " : ", ";
    s += getNpyDTypeName(dtype).str();
  }
  return s;
}

/// Maps a descriptor such as "<f4" to a supported dtype, or returns an error
/// message (without the file name) saying why it is not supported.
static std::variant<NpyDType, std::string>
lookupDescr(StringRef descr, ArrayRef<NpyDType> allowed) {
  if (allowed.empty())
    allowed = kAllDTypes;
  std::string quoted = ("'" + descr + "'").str();
  auto unsupported = [&](StringRef commonName) -> std::string {
    std::string what = quoted;
    if (!commonName.empty())
      what += (" (" + commonName + ")").str();
    return "dtype " + what + " is not supported (expected " +
           listDTypes(allowed) + ")";
  };

  // A simple descriptor is a byte order, a kind letter and a size.
  unsigned size = 0;
  if (descr.size() < 3 || !StringRef("<>|=").contains(descr[0]) ||
      !isAlpha(descr[1]) || descr.drop_front(2).getAsInteger(10, size))
    return unsupported("");
  char order = descr[0], kind = descr[1];
  std::string common = getCommonTypeName(kind, size);
  if (order == '>' && size > 1)
    return "dtype " + quoted + " is big-endian (only little-endian data " +
           "is supported)";

  std::optional<NpyDType> dtype;
  if (kind == 'f' && size == 4)
    dtype = NpyDType::Float32;
  else if (kind == 'f' && size == 2)
    dtype = NpyDType::Float16;
  else if (kind == 'b' && size == 1)
    dtype = NpyDType::Bool;
  else if (kind == 'i' && size == 4)
    dtype = NpyDType::Int32;
  else if (kind == 'i' && size == 1)
    dtype = NpyDType::Int8;
  else if (kind == 'u' && size == 2)
    dtype = NpyDType::UInt16;
  else if (kind == 'V' && size == 2)
    dtype = NpyDType::Void16;
  if (!dtype || !llvm::is_contained(allowed, *dtype))
    return unsupported(common);
  return *dtype;
}

//===----------------------------------------------------------------------===//
// NpyArray
//===----------------------------------------------------------------------===//

/// Arrays of at least this many bytes are aligned to, and asked to live
/// in, 2 MiB transparent huge pages (see NpyArray's constructor).
static constexpr size_t kHugePageBytes = size_t(2) << 20;

/// The alignment of an allocation of `size` bytes.
static size_t getStorageAlignment(size_t size) {
  return size >= kHugePageBytes ? kHugePageBytes : NpyArray::kAlignment;
}

void NpyArray::Deleter::operator()(char *ptr) const {
  deallocate_buffer(ptr, size, getStorageAlignment(size));
}

NpyArray::NpyArray(NpyDType dtype, ArrayRef<int64_t> shape)
    : dtype(dtype), shape(shape.begin(), shape.end()), numElements(1),
      numBytes(0), storage(nullptr, Deleter{0}) {
  for (int64_t d : shape) {
    assert(d >= 0 && "negative dim");
    numElements *= d;
  }
  numBytes = static_cast<size_t>(numElements) * getNpyDTypeSize(dtype);
  // Round the allocation up to whole alignment units, and never allocate
  // zero bytes, so getData() is aligned, non-null and may be over-read by a
  // vector load up to the next alignment boundary.
  size_t allocSize =
      std::max<size_t>(alignTo(numBytes, kAlignment), kAlignment);
  if (allocSize >= kHugePageBytes)
    allocSize = alignTo(allocSize, kHugePageBytes);
  storage = std::unique_ptr<char[], Deleter>(
      static_cast<char *>(
          allocate_buffer(allocSize, getStorageAlignment(allocSize))),
      Deleter{allocSize});
#ifdef MADV_HUGEPAGE
  // Large arrays (a K/V cache) in transparent huge pages where the system
  // gives them on request (transparent_hugepage=madvise), as numpy does for
  // its arrays: kernels that read a paged cache through its block table
  // jump between pages that 4 KiB pages would spread over as many TLB
  // entries. Advice only; a refusal changes nothing.
  if (allocSize >= kHugePageBytes)
    (void)madvise(storage.get(), allocSize, MADV_HUGEPAGE);
#endif
  std::memset(storage.get(), 0, allocSize);
}

std::string NpyArray::describe() const {
  return (getNpyDTypeName(dtype) + " " + formatNpyShape(shape)).str();
}

//===----------------------------------------------------------------------===//
// Header dict parsing
//===----------------------------------------------------------------------===//

namespace {

/// The three entries of a .npy header dict.
struct HeaderDict {
  std::optional<std::string> descr;
  std::optional<bool> fortranOrder;
  std::optional<std::vector<int64_t>> shape;
};

/// A recursive-descent parser for the Python dict literal NumPy writes as
/// the header. It accepts exactly what `np.save` produces plus the usual
/// literal variations (either quote style, any spacing, trailing commas).
class HeaderParser {
public:
  explicit HeaderParser(StringRef text) : rest(text) {}

  /// Parses the whole dict into `dict`; on failure returns a message.
  std::optional<std::string> parse(HeaderDict &dict);

private:
  void skipSpace() { rest = rest.ltrim(" \t\r\n"); }

  /// Consumes `c` (after whitespace) if it is next.
  bool consume(char c) {
    skipSpace();
    if (!rest.consume_front(StringRef(&c, 1)))
      return false;
    return true;
  }

  /// Describes the next token for messages: "'x'" or "end of header".
  std::string next() {
    skipSpace();
    StringRef text = rest.rtrim(" \t\r\n");
    if (text.empty())
      return "end of header";
    return ("'" + text.take_front(12) + (text.size() > 12 ? "..." : "") + "'")
        .str();
  }

  std::optional<std::string> parseString(std::string &out);
  std::optional<std::string> parseBool(bool &out);
  std::optional<std::string> parseShape(std::vector<int64_t> &out);

  StringRef rest;
};

} // namespace

std::optional<std::string> HeaderParser::parseString(std::string &out) {
  skipSpace();
  if (rest.empty() || (rest[0] != '\'' && rest[0] != '"'))
    return "expected a string, found " + next();
  char quote = rest[0];
  size_t end = rest.find(quote, 1);
  if (end == StringRef::npos)
    return std::string("unterminated string");
  StringRef body = rest.slice(1, end);
  if (body.contains('\\'))
    return "escape sequences in strings are not supported: '" + body.str() +
           "'";
  out = body.str();
  rest = rest.drop_front(end + 1);
  return std::nullopt;
}

std::optional<std::string> HeaderParser::parseBool(bool &out) {
  skipSpace();
  if (rest.consume_front("True"))
    out = true;
  else if (rest.consume_front("False"))
    out = false;
  else
    return "expected True or False, found " + next();
  return std::nullopt;
}

std::optional<std::string> HeaderParser::parseShape(std::vector<int64_t> &out) {
  if (!consume('('))
    return "'shape' must be a tuple of integers, found " + next();
  out.clear();
  bool needComma = false, sawComma = false;
  while (true) {
    if (consume(')'))
      break;
    if (needComma) {
      if (!consume(','))
        return "expected ',' or ')' in 'shape', found " + next();
      sawComma = true;
      needComma = false;
      continue;
    }
    skipSpace();
    if (!rest.empty() && rest[0] == '-')
      return "'shape' has a negative dim: " + next();
    size_t digits = 0;
    while (digits < rest.size() && isDigit(rest[digits]))
      ++digits;
    if (digits == 0)
      return "expected an integer in 'shape', found " + next();
    int64_t dim = 0;
    if (rest.take_front(digits).getAsInteger(10, dim) || dim < 0)
      return "'shape' dim " + rest.take_front(digits).str() + " is too large";
    rest = rest.drop_front(digits);
    rest.consume_front("L"); // Python 2 long literals in old files.
    out.push_back(dim);
    needComma = true;
  }
  // `(3)` is an int in Python, not a tuple.
  if (out.size() == 1 && !sawComma)
    return std::string("'shape' must be a tuple; a 1-tuple needs a trailing "
                       "comma, as in (3,)");
  return std::nullopt;
}

std::optional<std::string> HeaderParser::parse(HeaderDict &dict) {
  if (!consume('{'))
    return "expected '{' at the start of the header dict, found " + next();
  while (true) {
    if (consume('}'))
      break;
    std::string key;
    if (auto err = parseString(key))
      return "expected a key or '}': " + *err;
    if (!consume(':'))
      return "expected ':' after key '" + key + "', found " + next();
    auto duplicate = [&] { return "duplicate key '" + key + "'"; };
    if (key == "descr") {
      if (dict.descr)
        return duplicate();
      skipSpace();
      if (rest.starts_with("["))
        return std::string("structured dtypes are not supported ('descr' "
                           "is a list)");
      std::string descr;
      if (auto err = parseString(descr))
        return "'descr': " + *err;
      dict.descr = descr;
    } else if (key == "fortran_order") {
      if (dict.fortranOrder)
        return duplicate();
      bool value = false;
      if (auto err = parseBool(value))
        return "'fortran_order': " + *err;
      dict.fortranOrder = value;
    } else if (key == "shape") {
      if (dict.shape)
        return duplicate();
      std::vector<int64_t> shape;
      if (auto err = parseShape(shape))
        return err;
      dict.shape = std::move(shape);
    } else {
      return "unexpected key '" + key +
             "' (expected 'descr', 'fortran_order' and 'shape')";
    }
    if (consume('}'))
      break;
    if (!consume(','))
      return "expected ',' or '}' after the value of '" + key + "', found " +
             next();
  }
  skipSpace();
  if (!rest.empty())
    return "unexpected text after the header dict: " + next();
  for (auto [present, key] :
       {std::pair<bool, StringRef>{dict.descr.has_value(), "descr"},
        {dict.fortranOrder.has_value(), "fortran_order"},
        {dict.shape.has_value(), "shape"}})
    if (!present)
      return ("missing key '" + key + "'").str();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

Expected<NpyArray> fa::parseNpy(StringRef bytes, StringRef name,
                                ArrayRef<NpyDType> allowed) {
  // Magic and version.
  if (!bytes.starts_with(kMagic))
    return makeError(name, "not a .npy file (missing the \\x93NUMPY magic "
                           "string)");
  if (bytes.size() < kMagic.size() + 2)
    return makeError(name, "truncated header (no format version)");
  unsigned major = static_cast<uint8_t>(bytes[kMagic.size()]);
  unsigned minor = static_cast<uint8_t>(bytes[kMagic.size() + 1]);
  if (minor != 0 || major < 1 || major > 3)
    return makeError(name, formatv(".npy format version {0}.{1} is not "
                                   "supported (expected 1.0, 2.0 or 3.0)",
                                   major, minor));

  // Header length: 2 bytes in 1.0, 4 bytes in 2.0 and 3.0.
  size_t lenSize = major == 1 ? 2 : 4;
  size_t prefix = kMagic.size() + 2 + lenSize;
  if (bytes.size() < prefix)
    return makeError(name, "truncated header (no header length)");
  const char *lenPtr = bytes.data() + kMagic.size() + 2;
  uint64_t headerLen = major == 1 ? support::endian::read16le(lenPtr)
                                  : support::endian::read32le(lenPtr);
  if (bytes.size() - prefix < headerLen)
    return makeError(name, formatv("truncated header: it declares {0} bytes, "
                                   "the file has {1} after the prefix",
                                   headerLen, bytes.size() - prefix));
  StringRef headerText = bytes.substr(prefix, headerLen);

  HeaderDict dict;
  if (auto err = HeaderParser(headerText).parse(dict))
    return makeError(name, "malformed header: " + *err);

  // Element type and order.
  auto dtypeOrError = lookupDescr(*dict.descr, allowed);
  if (auto *msg = std::get_if<std::string>(&dtypeOrError))
    return makeError(name, *msg);
  NpyDType dtype = std::get<NpyDType>(dtypeOrError);
  if (*dict.fortranOrder)
    return makeError(name, "fortran_order True (column-major data) is not "
                           "supported; save a C-order array, e.g. with "
                           "numpy.ascontiguousarray");

  // Data size.
  const std::vector<int64_t> &shape = *dict.shape;
  int64_t numElements = 1, numBytes = 0;
  for (int64_t d : shape)
    if (MulOverflow(numElements, d, numElements))
      return makeError(name, "shape " + formatNpyShape(shape) +
                                 " has too many elements");
  if (MulOverflow(numElements, static_cast<int64_t>(getNpyDTypeSize(dtype)),
                  numBytes))
    return makeError(name, "shape " + formatNpyShape(shape) +
                               " has too many elements");
  size_t available = bytes.size() - prefix - headerLen;
  std::string what =
      (formatNpyShape(shape) + " of " + getNpyDTypeName(dtype)).str();
  if (available < static_cast<uint64_t>(numBytes))
    return makeError(name, formatv("truncated data: shape {0} needs {1} "
                                   "bytes, the file has {2}",
                                   what, numBytes, available));
  if (available > static_cast<uint64_t>(numBytes))
    return makeError(name, formatv("{0} bytes of trailing data after the {1} "
                                   "bytes of shape {2}",
                                   available - numBytes, numBytes, what));

  NpyArray array(dtype, shape);
  if (numBytes > 0)
    std::memcpy(array.getData(), bytes.data() + prefix + headerLen,
                static_cast<size_t>(numBytes));
  return std::move(array);
}

Expected<NpyArray> fa::readNpyFile(StringRef path, ArrayRef<NpyDType> allowed) {
  if (sys::fs::is_directory(path))
    return makeError(path, "is a directory, not a .npy file");
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (std::error_code ec = buffer.getError())
    return makeError(path, "cannot read: " + ec.message());
  return parseNpy((*buffer)->getBuffer(), path, allowed);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

std::string fa::getNpyHeader(const NpyArray &array) {
  // The dict, keys sorted, exactly as `repr` prints each value.
  std::string dict = "{'descr': '" + getNpyDTypeDescr(array.getDType()).str() +
                     "', 'fortran_order': False, 'shape': " +
                     formatNpyShape(array.getShape()) + ", }";
  // Room for the leading dim to grow in place.
  if (array.getRank() > 0) {
    size_t digits = std::to_string(array.getShape().front()).size();
    if (digits < kGrowthAxisMaxDigits)
      dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }

  // Pad with spaces and a final newline so the data is 64-byte aligned;
  // version 1.0 stores the length in 2 bytes, 2.0 in 4.
  auto wrap = [&](unsigned major, size_t lenSize) {
    size_t hlen = dict.size() + 1;
    size_t padlen =
        kHeaderAlign - (kMagic.size() + 2 + lenSize + hlen) % kHeaderAlign;
    std::string out = kMagic.str();
    out.push_back(static_cast<char>(major));
    out.push_back(0);
    uint32_t total = static_cast<uint32_t>(hlen + padlen);
    for (size_t i = 0; i < lenSize; ++i)
      out.push_back(static_cast<char>((total >> (8 * i)) & 0xff));
    out += dict;
    out.append(padlen, ' ');
    out.push_back('\n');
    return std::make_pair(out, hlen + padlen);
  };
  auto [v1, v1Len] = wrap(1, 2);
  if (v1Len <= 0xffff)
    return v1;
  return wrap(2, 4).first;
}

void fa::writeNpy(raw_ostream &os, const NpyArray &array) {
  os << getNpyHeader(array);
  os.write(static_cast<const char *>(array.getData()), array.getNumBytes());
}

Expected<WrittenOutput> fa::writeNpyFile(StringRef path,
                                         const NpyArray &array) {
  return writeOutputFile(path,
                         [&](raw_ostream &os) { writeNpy(os, array); });
}
