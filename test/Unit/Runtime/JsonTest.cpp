//===- JsonTest.cpp - FARuntime's strict JSON reader and writer -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The reader FARuntime uses instead of llvm::json (lib/Runtime/Json.h):
// every JSON value kind, escapes and UTF-8, what it rejects (with the line,
// column and field path), and the writer's layout and number formatting,
// including a cross-check against LLVM's parser and writer.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <random>

using namespace fa::runtime;
using ::testing::HasSubstr;

namespace {

json::Value parseOk(std::string_view text) {
  std::string error;
  std::optional<json::Value> value = json::parse(text, error);
  EXPECT_TRUE(value.has_value()) << text << ": " << error;
  return value ? *value : json::Value();
}

std::string parseError(std::string_view text) {
  std::string error;
  std::optional<json::Value> value = json::parse(text, error);
  EXPECT_FALSE(value.has_value()) << text;
  return error;
}

TEST(JsonTest, Scalars) {
  EXPECT_TRUE(parseOk("null").isNull());
  EXPECT_TRUE(parseOk(" true ").getBool());
  EXPECT_FALSE(parseOk("false").getBool());
  json::Value i = parseOk("-42");
  EXPECT_TRUE(i.isInteger());
  EXPECT_EQ(i.getInteger(), -42);
  EXPECT_EQ(i.getNumberText(), "-42");
  json::Value d = parseOk("0.125");
  EXPECT_TRUE(d.isNumber());
  EXPECT_FALSE(d.isInteger());
  EXPECT_DOUBLE_EQ(d.getDouble(), 0.125);
  EXPECT_FALSE(parseOk("1e3").isInteger());
  EXPECT_DOUBLE_EQ(parseOk("1e3").getDouble(), 1000);
  EXPECT_DOUBLE_EQ(parseOk("-2.5E-2").getDouble(), -0.025);
  EXPECT_EQ(parseOk("9223372036854775807").getInteger(), INT64_MAX);
  EXPECT_EQ(parseOk("-9223372036854775808").getInteger(), INT64_MIN);
  // Beyond int64: a number, but not an integer.
  json::Value big = parseOk("9223372036854775808");
  EXPECT_TRUE(big.isNumber());
  EXPECT_FALSE(big.isInteger());
  EXPECT_EQ(parseOk("\"hi\"").getString(), "hi");
}

TEST(JsonTest, StringEscapesAndUtf8) {
  EXPECT_EQ(parseOk(R"("a\"b\\c\/d\b\f\n\r\t")").getString(),
            "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(parseOk(R"("\u0041\u00e9\u20ac")").getString(),
            "A\xc3\xa9\xe2\x82\xac");
  // A surrogate pair: U+1F600.
  EXPECT_EQ(parseOk(R"("\ud83d\ude00")").getString(), "\xf0\x9f\x98\x80");
  // Raw UTF-8 passes through.
  EXPECT_EQ(parseOk("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"").getString(),
            "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(parseOk(R"("\u0000")").getString(), std::string("\0", 1));
}

TEST(JsonTest, Containers) {
  json::Value v = parseOk(R"({"a": [1, {"b": null}, []], "c": {}, "d": "x"})");
  ASSERT_TRUE(v.isObject());
  ASSERT_EQ(v.getObject().size(), 3u);
  // Document order is kept.
  EXPECT_EQ(v.getObject()[0].key, "a");
  EXPECT_EQ(v.getObject()[1].key, "c");
  EXPECT_EQ(v.getObject()[2].key, "d");
  const json::Value *a = v.find("a");
  ASSERT_TRUE(a && a->isArray());
  ASSERT_EQ(a->getArray().size(), 3u);
  EXPECT_EQ(a->getArray()[0].getInteger(), 1);
  EXPECT_TRUE(a->getArray()[1].find("b")->isNull());
  EXPECT_TRUE(a->getArray()[2].getArray().empty());
  EXPECT_TRUE(v.find("c")->getObject().empty());
  EXPECT_EQ(v.find("nope"), nullptr);
  EXPECT_TRUE(parseOk("[]").isArray());
  EXPECT_TRUE(parseOk("{}").isObject());
  EXPECT_TRUE(parseOk(" \t\r\n[ \n1 \t, 2\r\n]\n").isArray());
}

TEST(JsonTest, RejectsMalformedInput) {
  EXPECT_THAT(parseError(""), HasSubstr("expected a JSON value, got the end"));
  EXPECT_THAT(parseError("   "), HasSubstr("line 1, column 4"));
  EXPECT_THAT(parseError("{\"a\": 1} x"),
              HasSubstr("unexpected 'x' after the JSON value (trailing "
                        "garbage)"));
  EXPECT_THAT(parseError("[1] [2]"), HasSubstr("trailing garbage"));
  EXPECT_THAT(parseError("{\"a\": 1}\n}"),
              HasSubstr("line 2, column 1: unexpected '}'"));
  EXPECT_THAT(parseError("{\"a\": 1,}"),
              HasSubstr("expected a string key in an object, got '}'"));
  EXPECT_THAT(parseError("[1,]"), HasSubstr("expected a JSON value, got ']'"));
  EXPECT_THAT(parseError("[1 2]"), HasSubstr("expected ',' or ']'"));
  EXPECT_THAT(parseError("{\"a\" 1}"), HasSubstr("expected ':' after the key"));
  EXPECT_THAT(parseError("{a: 1}"), HasSubstr("expected a string key"));
  EXPECT_THAT(parseError("{\"a\": 1, \"a\": 2}"),
              HasSubstr("line 1, column 10: duplicate key \"a\""));
  EXPECT_THAT(parseError("tru"), HasSubstr("expected a JSON value"));
  EXPECT_THAT(parseError("trueish"), HasSubstr("trailing garbage"));
  EXPECT_THAT(parseError("NaN"), HasSubstr("expected a JSON value, got 'N'"));
  EXPECT_THAT(parseError("'a'"), HasSubstr("expected a JSON value, got '''"));
  EXPECT_THAT(parseError("\xef\xbb\xbf{}"), HasSubstr("byte 0xef"));
}

TEST(JsonTest, RejectsBadNumbers) {
  EXPECT_THAT(parseError("01"), HasSubstr("leading zeros"));
  EXPECT_THAT(parseError("-"), HasSubstr("expected a digit"));
  EXPECT_THAT(parseError("+1"), HasSubstr("expected a JSON value, got '+'"));
  EXPECT_THAT(parseError(".5"), HasSubstr("expected a JSON value, got '.'"));
  EXPECT_THAT(parseError("1."), HasSubstr("after the decimal point"));
  EXPECT_THAT(parseError("1e"), HasSubstr("in the exponent"));
  EXPECT_THAT(parseError("1e+"), HasSubstr("in the exponent"));
  EXPECT_THAT(parseError("0x10"), HasSubstr("trailing garbage"));
  EXPECT_THAT(parseError("1e999"), HasSubstr("number 1e999 is out of range"));
  EXPECT_THAT(parseError("-Infinity"), HasSubstr("expected a digit"));
}

TEST(JsonTest, RejectsBadStrings) {
  EXPECT_THAT(parseError("\"abc"), HasSubstr("line 1, column 1: unterminated "
                                             "string"));
  EXPECT_THAT(parseError("\"a\nb\""),
              HasSubstr("unescaped control character byte 0x0a"));
  EXPECT_THAT(parseError(R"("\x")"), HasSubstr("invalid escape '\\x'"));
  EXPECT_THAT(parseError(R"("\u12")"), HasSubstr("4 hex digits"));
  EXPECT_THAT(parseError(R"("\u12G4")"), HasSubstr("4 hex digits"));
  EXPECT_THAT(parseError(R"("\udc00")"), HasSubstr("lone low surrogate"));
  EXPECT_THAT(parseError(R"("\ud83d")"), HasSubstr("high surrogate"));
  EXPECT_THAT(parseError(R"("\ud83d\u0041")"), HasSubstr("high surrogate"));
  // Invalid UTF-8: a stray continuation byte, an overlong encoding, an
  // encoded surrogate, a truncated sequence, a byte that never occurs.
  EXPECT_THAT(parseError("\"\x80\""), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(parseError("\"\xc0\xaf\""), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(parseError("\"\xe0\x80\xaf\""), HasSubstr("overlong"));
  EXPECT_THAT(parseError("\"\xed\xa0\x80\""), HasSubstr("surrogate"));
  EXPECT_THAT(parseError("\"\xe2\x82\""), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(parseError("\"\xff\""), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(parseError(std::string_view("\"a\0b\"", 5)),
              HasSubstr("control character byte 0x00"));
}

TEST(JsonTest, ErrorsNameTheFieldPath) {
  EXPECT_THAT(parseError("{\"a\": {\"b\": [1, 2, {\"c\": tru}]}}"),
              HasSubstr("(in 'a.b[2].c')"));
  EXPECT_THAT(parseError("{\n  \"params\": [\n    {\"shape\": [1,, 2]}\n  ]\n}"),
              HasSubstr("line 3, column 18: expected a JSON value, got ',' "
                        "(in 'params[0].shape[1]')"));
}

TEST(JsonTest, DepthLimit) {
  std::string deep(64, '[');
  deep += std::string(64, ']');
  parseOk(deep);
  std::string tooDeep(65, '[');
  tooDeep += std::string(65, ']');
  EXPECT_THAT(parseError(tooDeep), HasSubstr("nesting deeper than 64"));
  // No stack overflow on hostile input.
  EXPECT_THAT(parseError(std::string(100000, '[')),
              HasSubstr("nesting deeper"));
}

TEST(JsonTest, Describe) {
  EXPECT_EQ(parseOk("64.5").describe(), "64.5");
  EXPECT_EQ(parseOk("\"x\\ny\"").describe(), "\"x\\ny\"");
  EXPECT_EQ(parseOk("[1]").describe(), "an array");
  EXPECT_EQ(parseOk("{}").describe(), "an object");
  EXPECT_EQ(parseOk("null").describe(), "null");
  EXPECT_EQ(parseOk("\"" + std::string(50, 'a') + "\"").describe(),
            "\"" + std::string(40, 'a') + "\"...");
}

TEST(JsonTest, WriterLayout) {
  json::Writer w;
  w.beginObject();
  w.member("s", "a\"b\n\x01");
  w.intMember("i", -3);
  w.doubleMember("d", 0.5);
  w.boolMember("b", true);
  w.key("n");
  w.nullValue();
  w.key("empty");
  w.beginArray();
  w.endArray();
  w.key("o");
  w.beginObject();
  w.key("list");
  w.beginArray();
  w.intValue(1);
  w.stringValue("x");
  w.endArray();
  w.endObject();
  w.endObject();
  EXPECT_EQ(w.getText(), "{\n"
                         "  \"s\": \"a\\\"b\\n\\u0001\",\n"
                         "  \"i\": -3,\n"
                         "  \"d\": 0.5,\n"
                         "  \"b\": true,\n"
                         "  \"n\": null,\n"
                         "  \"empty\": [],\n"
                         "  \"o\": {\n"
                         "    \"list\": [\n"
                         "      1,\n"
                         "      \"x\"\n"
                         "    ]\n"
                         "  }\n"
                         "}");
}

/// The writer's layout is LLVM's json::OStream's (fa-compile's output did
/// not change when the runtime dropped LLVM).
TEST(JsonTest, WriterMatchesLLVM) {
  json::Writer w;
  std::string llvmText;
  llvm::raw_string_ostream os(llvmText);
  llvm::json::OStream j(os, 2);
  w.beginObject();
  j.objectBegin();
  w.member("name", "attn");
  j.attribute("name", "attn");
  w.key("features");
  w.beginArray();
  j.attributeBegin("features");
  j.arrayBegin();
  for (const char *f : {"avx2", "fma"}) {
    w.stringValue(f);
    j.value(f);
  }
  w.endArray();
  j.arrayEnd();
  j.attributeEnd();
  w.key("none");
  w.beginArray();
  w.endArray();
  j.attributeArray("none", [] {});
  w.intMember("heads", 8);
  j.attribute("heads", 8);
  w.boolMember("has_lse", false);
  j.attribute("has_lse", false);
  w.endObject();
  j.objectEnd();
  EXPECT_EQ(w.getText(), llvmText);
}

TEST(JsonTest, DoublesRoundTrip) {
  EXPECT_EQ(json::formatDouble(0.125), "0.125");
  EXPECT_EQ(json::formatDouble(0.5), "0.5");
  EXPECT_EQ(json::formatDouble(1.0), "1");
  EXPECT_EQ(json::formatDouble(0.0), "0");
  EXPECT_EQ(json::formatDouble(1.0 / std::sqrt(128.0)), "0.08838834764831843");
  EXPECT_EQ(json::formatDouble(static_cast<float>(1.0 / std::sqrt(128.0))),
            "0.0883883461356163");
  EXPECT_EQ(json::formatDouble(1e-300), "1e-300");
  EXPECT_EQ(json::formatDouble(std::numeric_limits<double>::quiet_NaN()),
            "null");
  EXPECT_EQ(json::formatDouble(std::numeric_limits<double>::infinity()),
            "null");
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-30, 30);
  for (int i = 0; i < 2000; ++i) {
    double value = std::pow(10.0, exponent(rng)) * (i % 2 ? 1 : -1);
    std::string text = json::formatDouble(value);
    json::Value back = parseOk(text);
    EXPECT_EQ(back.getDouble(), value) << text;
    // LLVM reads the same value.
    llvm::Expected<llvm::json::Value> llvmBack = llvm::json::parse(text);
    ASSERT_TRUE(static_cast<bool>(llvmBack));
    EXPECT_EQ(llvmBack->getAsNumber().value_or(0), value) << text;
  }
}

/// Structural equality of a value of ours and one of LLVM's.
bool sameValue(const json::Value &ours, const llvm::json::Value &theirs) {
  switch (ours.getKind()) {
  case json::Kind::Null:
    return theirs.kind() == llvm::json::Value::Null;
  case json::Kind::Boolean:
    return theirs.getAsBoolean() == std::optional<bool>(ours.getBool());
  case json::Kind::Number:
    return theirs.getAsNumber() == std::optional<double>(ours.getDouble());
  case json::Kind::String:
    return theirs.getAsString() == llvm::StringRef(ours.getString());
  case json::Kind::Array: {
    const llvm::json::Array *array = theirs.getAsArray();
    if (!array || array->size() != ours.getArray().size())
      return false;
    for (size_t i = 0; i < array->size(); ++i)
      if (!sameValue(ours.getArray()[i], (*array)[i]))
        return false;
    return true;
  }
  case json::Kind::Object: {
    const llvm::json::Object *object = theirs.getAsObject();
    if (!object || object->size() != ours.getObject().size())
      return false;
    for (const json::Member &m : ours.getObject()) {
      const llvm::json::Value *v = object->get(m.key);
      if (!v || !sameValue(m.value, *v))
        return false;
    }
    return true;
  }
  }
  return false;
}

/// This reader and LLVM's read the same documents to the same values, also
/// after LLVM's writer reformatted them.
TEST(JsonTest, AgreesWithLLVM) {
  const char *documents[] = {
      R"({"a": [1, -2, 3.5, 1e-7, true, false, null, "s\u00e9\n"], "b": {}})",
      R"([[[]], {"x": {"y": [0]}}, "\ud83d\ude00", -0.0, 12345678901234])",
      "{\"k\": \"\xc3\xa9\", \"e\": 2.5E+3}",
  };
  for (const char *doc : documents) {
    llvm::Expected<llvm::json::Value> llvmValue = llvm::json::parse(doc);
    ASSERT_TRUE(static_cast<bool>(llvmValue)) << doc;
    EXPECT_TRUE(sameValue(parseOk(doc), *llvmValue)) << doc;
    std::string llvmText = llvm::formatv("{0:2}", *llvmValue).str();
    EXPECT_TRUE(sameValue(parseOk(llvmText), *llvmValue)) << llvmText;
  }
}

} // namespace
