//===- Json.h - A small strict JSON reader and writer -----------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What FARuntime needs to read and write `fa-kernel/1` metadata without
// LLVM: a strict RFC 8259 reader (objects, arrays, strings with escapes,
// numbers, true/false/null; valid UTF-8; no duplicate keys, no trailing
// garbage; errors give the line, column and field path) and a pretty
// writer.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_RUNTIME_JSON_H
#define FA_LIB_RUNTIME_JSON_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fa {
namespace runtime {
namespace json {

enum class Kind { Null, Boolean, Number, String, Array, Object };

/// "null", "a boolean", "a number", "a string", "an array", "an object".
const char *describeKind(Kind kind);

struct Member;

/// A parsed JSON value. Numbers keep the text they were written as.
class Value {
public:
  Value() = default;
  static Value makeNull() { return Value(); }
  static Value makeBool(bool b);
  /// A number from its (valid JSON number) text; nullopt when it does not
  /// fit a double (e.g. 1e999).
  static std::optional<Value> makeNumber(std::string_view text);
  static Value makeString(std::string s);
  static Value makeArray(std::vector<Value> elements);
  static Value makeObject(std::vector<Member> members);

  Kind getKind() const { return kind; }
  bool isNull() const { return kind == Kind::Null; }
  bool isBool() const { return kind == Kind::Boolean; }
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  bool isArray() const { return kind == Kind::Array; }
  bool isObject() const { return kind == Kind::Object; }

  bool getBool() const { return boolean; }
  /// The number as written ("64", "0.125", "1e3").
  const std::string &getNumberText() const { return text; }
  /// Whether the number was written as an integer (no fraction, no
  /// exponent) that fits int64_t.
  bool isInteger() const { return kind == Kind::Number && integral; }
  int64_t getInteger() const { return integer; }
  double getDouble() const { return number; }
  const std::string &getString() const { return text; }
  const std::vector<Value> &getArray() const { return elements; }
  /// Members in document order; keys are unique.
  const std::vector<Member> &getObject() const { return members; }
  /// The member named `key`, or null (objects only).
  const Value *find(std::string_view key) const;

  /// A short rendering for messages: the number text, the quoted string
  /// (cut at 40 characters), true/false/null, "an array", "an object".
  std::string describe() const;

private:
  Kind kind = Kind::Null;
  bool boolean = false;
  bool integral = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<Value> elements;
  std::vector<Member> members;
};

struct Member {
  std::string key;
  Value value;
};

/// Parses `text` as one JSON value followed by nothing but white space.
/// On failure returns nullopt and sets `error` to "line L, column C: what"
/// (with " (in 'a.b[2]')" naming the enclosing field, if any).
std::optional<Value> parse(std::string_view text, std::string &error);

/// Formats a double as the shortest text that reads back as the same
/// value ("0.125", "0.088388347648318447" -> "0.08838834764831845"), in the
/// C locale; "null" for NaN and infinities (JSON has neither).
std::string formatDouble(double value);

/// Writes pretty-printed JSON (LLVM json::OStream's layout: one member or
/// element per line, `indent` spaces per level, "[]"/"{}" when empty).
class Writer {
public:
  explicit Writer(int indent = 2) : indent(indent) {}

  void beginObject();
  void endObject();
  void beginArray();
  void endArray();
  /// The key of the next member (inside an object).
  void key(std::string_view name);

  void stringValue(std::string_view s);
  void intValue(int64_t value);
  void doubleValue(double value);
  void boolValue(bool value);
  void nullValue();

  /// Shorthands for `key(name)` then the value.
  void member(std::string_view name, std::string_view s) {
    key(name);
    stringValue(s);
  }
  void member(std::string_view name, const char *s) {
    key(name);
    stringValue(s);
  }
  void intMember(std::string_view name, int64_t value) {
    key(name);
    intValue(value);
  }
  void doubleMember(std::string_view name, double value) {
    key(name);
    doubleValue(value);
  }
  void boolMember(std::string_view name, bool value) {
    key(name);
    boolValue(value);
  }

  const std::string &getText() const { return out; }

  /// `s` as a JSON string literal, quotes included.
  static std::string quote(std::string_view s);

private:
  void beforeValue();
  void newline();

  struct Level {
    bool isObject;
    bool empty = true;
  };
  int indent;
  std::string out;
  std::vector<Level> levels;
  bool afterKey = false;
};

} // namespace json
} // namespace runtime
} // namespace fa

#endif // FA_LIB_RUNTIME_JSON_H
