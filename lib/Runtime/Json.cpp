//===- Json.cpp - A small strict JSON reader and writer -------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <locale>
#include <sstream>

using namespace fa::runtime::json;

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

const char *fa::runtime::json::describeKind(Kind kind) {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Boolean:
    return "a boolean";
  case Kind::Number:
    return "a number";
  case Kind::String:
    return "a string";
  case Kind::Array:
    return "an array";
  case Kind::Object:
    return "an object";
  }
  return "a value";
}

Value Value::makeBool(bool b) {
  Value v;
  v.kind = Kind::Boolean;
  v.boolean = b;
  return v;
}

/// Reads a double in the C locale, whatever the global locale.
static bool readDouble(std::string_view text, double &out) {
  std::istringstream in{std::string(text)};
  in.imbue(std::locale::classic());
  double value = 0;
  in >> value;
  if (in.fail() || !in.eof())
    return false;
  if (!std::isfinite(value))
    return false;
  out = value;
  return true;
}

std::optional<Value> Value::makeNumber(std::string_view text) {
  Value v;
  v.kind = Kind::Number;
  v.text = std::string(text);
  bool plainInteger = text.find_first_of(".eE") == std::string_view::npos;
  if (plainInteger) {
    int64_t i = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
    if (ec == std::errc() && end == text.data() + text.size()) {
      v.integral = true;
      v.integer = i;
      v.number = static_cast<double>(i);
      return v;
    }
  }
  if (!readDouble(text, v.number)) {
    // "-0" style underflow to zero is fine; only overflow fails here.
    if (text.find_first_of("123456789") == std::string_view::npos) {
      v.number = 0;
      return v;
    }
    return std::nullopt;
  }
  return v;
}

Value Value::makeString(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.text = std::move(s);
  return v;
}

Value Value::makeArray(std::vector<Value> elements) {
  Value v;
  v.kind = Kind::Array;
  v.elements = std::move(elements);
  return v;
}

Value Value::makeObject(std::vector<Member> members) {
  Value v;
  v.kind = Kind::Object;
  v.members = std::move(members);
  return v;
}

const Value *Value::find(std::string_view key) const {
  for (const Member &m : members)
    if (m.key == key)
      return &m.value;
  return nullptr;
}

std::string Value::describe() const {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Boolean:
    return boolean ? "true" : "false";
  case Kind::Number:
    return text;
  case Kind::String:
    if (text.size() > 40)
      return Writer::quote(text.substr(0, 40)) + "...";
    return Writer::quote(text);
  case Kind::Array:
    return "an array";
  case Kind::Object:
    return "an object";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace {

/// Recursive descent over RFC 8259 with a depth limit.
class Parser {
public:
  explicit Parser(std::string_view text) : text(text) {}

  std::optional<Value> run(std::string &errorOut) {
    Value value;
    bool ok = parseValue(value);
    if (ok) {
      skipSpace();
      if (pos != text.size())
        ok = fail("unexpected " + describeChar() +
                  " after the JSON value (trailing garbage)");
    }
    if (!ok) {
      errorOut = error;
      return std::nullopt;
    }
    return value;
  }

private:
  static constexpr int kMaxDepth = 64;

  bool fail(const std::string &message) {
    if (!error.empty())
      return false; // keep the first error
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    error = "line " + std::to_string(line) + ", column " +
            std::to_string(column) + ": " + message;
    std::string where = currentPath();
    if (!where.empty())
      error += " (in '" + where + "')";
    return false;
  }

  std::string currentPath() const {
    std::string p;
    for (const std::string &piece : path) {
      if (!p.empty() && piece.front() != '[')
        p += '.';
      p += piece;
    }
    return p;
  }

  std::string describeChar() const {
    if (pos >= text.size())
      return "end of input";
    unsigned char c = static_cast<unsigned char>(text[pos]);
    if (c >= 0x20 && c < 0x7f)
      return std::string("'") + static_cast<char>(c) + "'";
    char buffer[16];
    std::snprintf(buffer, sizeof(buffer), "byte 0x%02x", c);
    return buffer;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool parseValue(Value &out) {
    skipSpace();
    if (pos >= text.size())
      return fail("expected a JSON value, got the end of the input");
    char c = text[pos];
    switch (c) {
    case '{':
      return parseObject(out);
    case '[':
      return parseArray(out);
    case '"': {
      std::string s;
      if (!parseString(s))
        return false;
      out = Value::makeString(std::move(s));
      return true;
    }
    case 't':
      return parseLiteral("true", Value::makeBool(true), out);
    case 'f':
      return parseLiteral("false", Value::makeBool(false), out);
    case 'n':
      return parseLiteral("null", Value::makeNull(), out);
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      return fail("expected a JSON value, got " + describeChar());
    }
  }

  bool parseLiteral(std::string_view word, Value value, Value &out) {
    if (text.substr(pos, word.size()) != word)
      return fail("expected a JSON value, got " + describeChar());
    pos += word.size();
    out = std::move(value);
    return true;
  }

  bool parseNumber(Value &out) {
    size_t start = pos;
    auto digits = [&] {
      size_t first = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos - first;
    };
    if (text[pos] == '-')
      ++pos;
    if (pos < text.size() && text[pos] == '0') {
      ++pos;
      if (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        return fail("a number must not have leading zeros");
    } else if (digits() == 0) {
      return fail("expected a digit in a number, got " + describeChar());
    }
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      if (digits() == 0)
        return fail("expected a digit after the decimal point, got " +
                    describeChar());
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (digits() == 0)
        return fail("expected a digit in the exponent, got " + describeChar());
    }
    std::string_view number = text.substr(start, pos - start);
    std::optional<Value> value = Value::makeNumber(number);
    if (!value) {
      pos = start;
      return fail("number " + std::string(number) + " is out of range");
    }
    out = std::move(*value);
    return true;
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xc0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xe0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      s += static_cast<char>(0xf0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  bool parseHex4(uint32_t &out) {
    if (pos + 4 > text.size())
      return fail("expected 4 hex digits after \\u");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos];
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return fail("expected 4 hex digits after \\u, got " + describeChar());
      out = out * 16 + d;
      ++pos;
    }
    return true;
  }

  /// Validates one UTF-8 sequence starting at pos (a byte >= 0x80) and
  /// appends it.
  bool parseUtf8(std::string &s) {
    auto byte = [&](size_t i) {
      return static_cast<unsigned char>(text[pos + i]);
    };
    unsigned char b0 = byte(0);
    size_t length;
    uint32_t cp;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      length = 2;
      cp = b0 & 0x1f;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      length = 3;
      cp = b0 & 0x0f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      length = 4;
      cp = b0 & 0x07;
    } else {
      return fail("invalid UTF-8 in a string (" + describeChar() + ")");
    }
    if (pos + length > text.size())
      return fail("truncated UTF-8 sequence in a string");
    for (size_t i = 1; i < length; ++i) {
      if ((byte(i) & 0xc0) != 0x80) {
        pos += i;
        return fail("invalid UTF-8 in a string (" + describeChar() + ")");
      }
      cp = (cp << 6) | (byte(i) & 0x3f);
    }
    if ((length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return fail("invalid UTF-8 in a string (overlong, surrogate or out of "
                  "range)");
    s.append(text.substr(pos, length));
    pos += length;
    return true;
  }

  bool parseString(std::string &s) {
    size_t open = pos;
    ++pos; // '"'
    while (true) {
      if (pos >= text.size()) {
        pos = open;
        return fail("unterminated string");
      }
      unsigned char c = static_cast<unsigned char>(text[pos]);
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20)
        return fail("unescaped control character " + describeChar() +
                    " in a string");
      if (c >= 0x80) {
        if (!parseUtf8(s))
          return false;
        continue;
      }
      if (c != '\\') {
        s += static_cast<char>(c);
        ++pos;
        continue;
      }
      ++pos;
      if (pos >= text.size()) {
        pos = open;
        return fail("unterminated string");
      }
      char e = text[pos++];
      switch (e) {
      case '"':
        s += '"';
        break;
      case '\\':
        s += '\\';
        break;
      case '/':
        s += '/';
        break;
      case 'b':
        s += '\b';
        break;
      case 'f':
        s += '\f';
        break;
      case 'n':
        s += '\n';
        break;
      case 'r':
        s += '\r';
        break;
      case 't':
        s += '\t';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!parseHex4(cp))
          return false;
        if (cp >= 0xdc00 && cp <= 0xdfff)
          return fail("lone low surrogate in a \\u escape");
        if (cp >= 0xd800 && cp <= 0xdbff) {
          if (text.substr(pos, 2) != "\\u")
            return fail("high surrogate not followed by a low surrogate");
          pos += 2;
          uint32_t low = 0;
          if (!parseHex4(low))
            return false;
          if (low < 0xdc00 || low > 0xdfff)
            return fail("high surrogate not followed by a low surrogate");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        appendUtf8(s, cp);
        break;
      }
      default:
        --pos;
        return fail("invalid escape '\\" + std::string(1, e) +
                    "' in a string");
      }
    }
  }

  bool enter() {
    if (++depth > kMaxDepth)
      return fail("nesting deeper than " + std::to_string(kMaxDepth) +
                  " levels");
    return true;
  }

  bool parseArray(Value &out) {
    if (!enter())
      return false;
    ++pos; // '['
    std::vector<Value> elements;
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      --depth;
      out = Value::makeArray({});
      return true;
    }
    while (true) {
      path.push_back("[" + std::to_string(elements.size()) + "]");
      Value element;
      if (!parseValue(element))
        return false;
      path.pop_back();
      elements.push_back(std::move(element));
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        break;
      }
      return fail("expected ',' or ']' in an array, got " + describeChar());
    }
    --depth;
    out = Value::makeArray(std::move(elements));
    return true;
  }

  bool parseObject(Value &out) {
    if (!enter())
      return false;
    ++pos; // '{'
    std::vector<Member> members;
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      --depth;
      out = Value::makeObject({});
      return true;
    }
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key in an object, got " +
                    describeChar());
      size_t keyPos = pos;
      std::string key;
      if (!parseString(key))
        return false;
      for (const Member &m : members)
        if (m.key == key) {
          pos = keyPos;
          return fail("duplicate key " + Writer::quote(key));
        }
      skipSpace();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected ':' after the key " + Writer::quote(key) +
                    ", got " + describeChar());
      ++pos;
      path.push_back(key);
      Value value;
      if (!parseValue(value))
        return false;
      path.pop_back();
      members.push_back(Member{std::move(key), std::move(value)});
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        break;
      }
      return fail("expected ',' or '}' in an object, got " + describeChar());
    }
    --depth;
    out = Value::makeObject(std::move(members));
    return true;
  }

  std::string_view text;
  size_t pos = 0;
  int depth = 0;
  std::vector<std::string> path;
  std::string error;
};

} // namespace

std::optional<Value> fa::runtime::json::parse(std::string_view text,
                                              std::string &error) {
  return Parser(text).run(error);
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

std::string fa::runtime::json::formatDouble(double value) {
  if (!std::isfinite(value))
    return "null";
  if (value == 0)
    return std::signbit(value) ? "-0" : "0";
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream out;
    out.imbue(std::locale::classic());
    out.precision(precision);
    out << value;
    double back = 0;
    if (readDouble(out.str(), back) && back == value)
      return out.str();
  }
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out.precision(17);
  out << value;
  return out.str();
}

std::string Writer::quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20 || c == 0x7f) {
        char buffer[8];
        std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
        out += buffer;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

void Writer::newline() {
  out += '\n';
  out.append(levels.size() * indent, ' ');
}

void Writer::beforeValue() {
  if (afterKey) {
    afterKey = false;
    return;
  }
  if (levels.empty())
    return;
  Level &level = levels.back();
  if (!level.empty)
    out += ',';
  level.empty = false;
  newline();
}

void Writer::key(std::string_view name) {
  Level &level = levels.back();
  if (!level.empty)
    out += ',';
  level.empty = false;
  newline();
  out += quote(name);
  out += ": ";
  afterKey = true;
}

void Writer::beginObject() {
  beforeValue();
  out += '{';
  levels.push_back(Level{true});
}

void Writer::endObject() {
  bool empty = levels.back().empty;
  levels.pop_back();
  if (!empty)
    newline();
  out += '}';
}

void Writer::beginArray() {
  beforeValue();
  out += '[';
  levels.push_back(Level{false});
}

void Writer::endArray() {
  bool empty = levels.back().empty;
  levels.pop_back();
  if (!empty)
    newline();
  out += ']';
}

void Writer::stringValue(std::string_view s) {
  beforeValue();
  out += quote(s);
}

void Writer::intValue(int64_t value) {
  beforeValue();
  out += std::to_string(value);
}

void Writer::doubleValue(double value) {
  beforeValue();
  out += formatDouble(value);
}

void Writer::boolValue(bool value) {
  beforeValue();
  out += value ? "true" : "false";
}

void Writer::nullValue() {
  beforeValue();
  out += "null";
}
