//===- MetadataTest.cpp - fa-kernel/3 metadata reader and writer ----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Malformed metadata must give FA_ERROR_INVALID_ARTIFACT with a message
// naming the field, through both the C++ reader and fa_kernel_load.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/KernelMetadata.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

using namespace fa::runtime;
using namespace fa::runtime::test;
using ::testing::HasSubstr;
namespace json = llvm::json;

namespace {

/// The error message of parsing `text` ("" if it parses).
std::string parseError(llvm::StringRef text) {
  std::string error;
  std::optional<KernelMetadata> md = parseKernelMetadata(text, error);
  if (md)
    return "";
  EXPECT_FALSE(error.empty());
  return error;
}

TEST(MetadataTest, RoundTrip) {
  KernelMetadata md = makeCudaAttentionMetadata();
  md.mask = MaskKind::Bool;
  md.hasKvLens = true;
  md.causal = Causal::BottomRight;
  md.params = getCanonicalParams(md, DType::I8, /*batch=*/true,
                                 /*heads=*/false);
  md.launch->dynamicSharedBytes = 65536;
  md.kernel = "mma";
  std::string error;
  std::optional<KernelMetadata> back = parseKernelMetadata(toJson(md), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->kernel, "mma");
  EXPECT_EQ(back->name, "attn");
  EXPECT_EQ(back->symbol, "fa_attn");
  EXPECT_EQ(back->target.chip, "sm_80");
  EXPECT_EQ(back->target.ptxIsa, "8.0");
  EXPECT_EQ(back->causal, Causal::BottomRight);
  EXPECT_EQ(back->mask, MaskKind::Bool);
  EXPECT_TRUE(back->hasKvLens);
  EXPECT_TRUE(back->hasLse);
  EXPECT_DOUBLE_EQ(back->scale, 0.125);
  EXPECT_EQ(back->launch->dynamicSharedBytes, 65536);
  EXPECT_EQ(back->launch->grid[0], GridAxis::QueryTiles);
  EXPECT_EQ(back->launch->grid[1], GridAxis::Heads);
  EXPECT_EQ(back->launch->grid[2], GridAxis::Batch);
  ASSERT_EQ(back->params.size(), 7u);
  EXPECT_EQ(back->params[3].name, "kv_lens");
  EXPECT_EQ(back->params[4].role, ParamRole::Mask);
  EXPECT_EQ(back->params[4].dtype, DType::I8);
  EXPECT_FALSE(back->params[4].shape[0].isSymbol());
  EXPECT_EQ(back->params[4].shape[0].size, 1);
  EXPECT_EQ(back->params[4].shape[1].symbol, "Hq");
  EXPECT_EQ(toJson(*back), toJson(md));
}

TEST(MetadataTest, AttentionBackward) {
  // The backward op: the forward's fields, the forward's O and LSE read,
  // dO read and dQ, dK, dV written; round-trips and checks its rules.
  KernelMetadata md = makeCudaAttentionMetadata();
  md.target = TargetInfo();
  md.target.kind = TargetKind::Cpu;
  md.target.triple = "x86_64-unknown-linux-gnu";
  md.files = FileInfo();
  md.files.library = "attn.so";
  md.launch.reset();
  md.op = OpKind::AttentionBackward;
  md.hasLse = true;
  md.hasKvLens = true;
  md.params = getCanonicalParams(md, DType::F32, false, false);
  std::vector<std::string> names;
  for (const ParamInfo &param : md.params)
    names.push_back(param.name + ":" + getRoleName(param.role));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "q:query", "k:key", "v:value", "kv_lens:kv_lens",
                       "o:output", "lse:lse", "d_o:grad_output",
                       "d_q:grad_query", "d_k:grad_key", "d_v:grad_value"}));
  EXPECT_EQ(md.findParam(ParamRole::GradKey)->shape[1].symbol, "Hkv");
  EXPECT_FALSE(verifyKernelSignature(md).has_value());
  std::string error;
  std::optional<KernelMetadata> back = parseKernelMetadata(toJson(md), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->op, OpKind::AttentionBackward);
  EXPECT_EQ(toJson(*back), toJson(md));

  KernelMetadata noLse = md;
  noLse.hasLse = false;
  EXPECT_THAT(verifyKernelSignature(noLse).value_or(""),
              HasSubstr("the backward op reads the forward's lse"));
  KernelMetadata paged = md;
  paged.pageSize = 16;
  EXPECT_THAT(verifyKernelSignature(paged).value_or(""),
              HasSubstr("not available on attention_backward kernels"));
  KernelMetadata forward = md;
  forward.op = OpKind::Attention;
  EXPECT_THAT(verifyKernelSignature(forward).value_or(""),
              HasSubstr("role 'grad_output' does not belong to this "
                        "attention kernel"));
}

TEST(MetadataTest, NotJson) {
  EXPECT_THAT(parseError("{ \"format\": "), HasSubstr("not valid JSON"));
  EXPECT_THAT(parseError("[1, 2]"), HasSubstr("JSON object at the top"));
  EXPECT_THAT(parseError("\x01\x02garbage"), HasSubstr("not valid JSON"));
}

/// The reader is strict JSON (RFC 8259): nlohmann-json's errors, with the
/// line and column, plus duplicate keys.
TEST(MetadataTest, StrictJson) {
  std::string base = toJson(makeCudaAttentionMetadata());
  EXPECT_EQ(parseError(base + "\n\n"), "");
  EXPECT_EQ(parseError(base + "x"),
            "not valid JSON: line 103, column 1: syntax error while parsing "
            "value - invalid literal; expected end of input");
  EXPECT_THAT(parseError(base + "{}"),
              HasSubstr("unexpected '{'; expected end of input"));
  // A duplicate key is an error, not last-one-wins, also in nested objects.
  std::string duplicate = base;
  duplicate.replace(duplicate.find("\"heads\": 8"), 10,
                    "\"heads\": 8, \"heads\": 4");
  EXPECT_EQ(parseError(duplicate), "not valid JSON: duplicate key \"heads\"");
  std::string nested = base;
  nested.replace(nested.find("\"rank\": 4"), 9, "\"rank\": 4, \"rank\": 4");
  EXPECT_EQ(parseError(nested), "not valid JSON: duplicate key \"rank\"");
  // The same key in different objects is fine.
  EXPECT_THAT(base, HasSubstr("\"name\": \"q\""));
  // A bare word inside a nested field.
  std::string badShape = base;
  badShape.replace(badShape.find("\"Hkv\""), 5, "Hkv");
  EXPECT_EQ(parseError(badShape),
            "not valid JSON: line 61, column 9: syntax error while parsing "
            "value - invalid literal");
  EXPECT_EQ(parseError("{\"format\": \"fa-kernel/2\", \"name\": \"a\n"),
            "not valid JSON: line 2, column 0: syntax error while parsing "
            "value - invalid string: control character U+000A (LF) must be "
            "escaped to \\u000A or \\n");
  EXPECT_THAT(parseError(""), HasSubstr("not valid JSON: line 1, column 1: "
                                        "syntax error while parsing value - "
                                        "unexpected end of input"));
  EXPECT_THAT(parseError("{\"a\": 1,}"),
              HasSubstr("line 1, column 9: syntax error while parsing object "
                        "key - unexpected '}'; expected string literal"));
  EXPECT_THAT(parseError("[1, 2,]"), HasSubstr("unexpected ']'"));
  EXPECT_THAT(parseError("// c\n{}"), HasSubstr("invalid literal"));
  EXPECT_THAT(parseError("{\"a\": NaN}"), HasSubstr("invalid literal"));
  EXPECT_THAT(parseError("{\"a\": 01}"), HasSubstr("unexpected number"));
  EXPECT_THAT(parseError("{\"a\": 1e999}"),
              HasSubstr("not valid JSON: number overflow parsing '1e999'"));
  EXPECT_THAT(parseError("{\"a\": \"\xff\"}"),
              HasSubstr("invalid string: ill-formed UTF-8 byte"));
  EXPECT_THAT(parseError("{\"a\": \"\xed\xa0\x80\"}"),
              HasSubstr("ill-formed UTF-8 byte"));
  EXPECT_THAT(parseError("{\"a\": \"\\ud83d\"}"), HasSubstr("surrogate"));
  EXPECT_THAT(parseError(std::string("{\"a\": \"\0\"}", 9)),
              HasSubstr("control character U+0000"));
  // Deep nesting is an error (not an object), not a crash.
  EXPECT_THAT(parseError(std::string(100000, '[')),
              HasSubstr("not valid JSON"));
  EXPECT_EQ(parseError(std::string(100000, '[') + std::string(100000, ']')),
            "expected a JSON object at the top level, got an array");
  EXPECT_EQ(parseError("\"fa-kernel/2\""),
            "expected a JSON object at the top level, got \"fa-kernel/2\"");
  EXPECT_EQ(parseError("null"),
            "expected a JSON object at the top level, got null");
}

TEST(MetadataTest, Integers) {
  std::string base = toJson(makeCudaAttentionMetadata());
  // Integer fields take integers written as such.
  std::string fraction = base;
  fraction.replace(fraction.find("\"head_dim\": 64"), 14,
                   "\"head_dim\": 64.0");
  EXPECT_THAT(parseError(fraction),
              HasSubstr("field 'head_dim': expected an integer, got 64.0"));
  std::string exponent = base;
  exponent.replace(exponent.find("\"heads\": 8"), 10, "\"heads\": 8e0");
  EXPECT_THAT(parseError(exponent),
              HasSubstr("field 'heads': expected an integer, got 8.0"));
  std::string huge = base;
  huge.replace(huge.find("\"heads\": 8"), 10, "\"heads\": 9223372036854775808");
  EXPECT_THAT(parseError(huge), HasSubstr("field 'heads': integer "
                                          "9223372036854775808 is out of "
                                          "range"));
  // Beyond uint64_t the JSON library reads a double.
  std::string huger = base;
  huger.replace(huger.find("\"heads\": 8"), 10,
                "\"heads\": 80000000000000000000");
  EXPECT_THAT(parseError(huger),
              HasSubstr("field 'heads': expected an integer, got 8e+19"));
  std::string negative = base;
  negative.replace(negative.find("\"heads\": 8"), 10, "\"heads\": -8");
  EXPECT_THAT(parseError(negative),
              HasSubstr("field 'heads' must be positive, got -8"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("launch"))["block"] =
                                          json::Array{128, 1.5, 1};
                                    })),
              HasSubstr("field 'launch.block[1]': expected an integer, got "
                        "1.5"));
  EXPECT_THAT(parseError(mutateJson(
                  base,
                  [](json::Object &o) {
                    (*o.getObject("launch"))["block"] = json::Array{128, 1};
                  })),
              HasSubstr("field 'launch.block': expected 3 integers, got 2"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("launch"))["block"] =
                                          json::Array{1 << 20, 1, 1};
                                    })),
              HasSubstr("field 'launch.block[0]' is 1048576, more than "
                        "CUDA's 1024"));
  // A scale may be written as an integer.
  EXPECT_EQ(parseError(mutateJson(base,
                                  [](json::Object &o) { o["scale"] = 1; })),
            "");
}

TEST(MetadataTest, UnknownFieldsAreIgnored) {
  std::string base = toJson(makeCudaAttentionMetadata());
  std::string text = mutateJson(base, [](json::Object &o) {
    o["comment"] = json::Object{{"anything", json::Array{1, "x", nullptr}}};
    (*o.getObject("target"))["sm_count"] = 132;
  });
  EXPECT_EQ(parseError(text), "");
}

TEST(MetadataTest, WriterOutput) {
  KernelMetadata md = makeCudaAttentionMetadata();
  md.scale = 1.0 / std::sqrt(128.0);
  md.name = "quote\"d";
  std::string text = toJson(md);
  EXPECT_THAT(text, HasSubstr("\"scale\": 0.08838834764831843,\n"));
  EXPECT_THAT(text, HasSubstr("\"name\": \"quote\\\"d\",\n"));
  EXPECT_THAT(text, HasSubstr("  \"launch\": {\n    \"block\": [\n      128,\n"));
  EXPECT_EQ(text.back(), '\n');
  // LLVM reads what this writer writes, to the same values.
  llvm::Expected<json::Value> value = json::parse(text);
  ASSERT_TRUE(static_cast<bool>(value)) << llvm::toString(value.takeError());
  EXPECT_EQ(value->getAsObject()->getNumber("scale"), md.scale);
  EXPECT_EQ(value->getAsObject()->getString("name"), md.name);
  // The std::ostream overload writes the same text.
  std::ostringstream os;
  writeKernelMetadata(md, os);
  EXPECT_EQ(os.str(), text);
}

TEST(MetadataTest, Format) {
  std::string base = toJson(makeCudaAttentionMetadata());
  EXPECT_EQ(parseError(base), "");
  // The previous version (grid expressions) and a future one.
  for (const char *old : {"fa-kernel/2", "fa-kernel/4"})
    EXPECT_EQ(parseError(mutateJson(
                  base, [&](json::Object &o) { o["format"] = old; })),
              std::string("unsupported format version '") + old +
                  "': this runtime reads fa-kernel/3 (recompile the kernel "
                  "with this fa-compile)");
  EXPECT_EQ(
      parseError(mutateJson(base, [](json::Object &o) { o["format"] = 2; })),
      "field 'format': expected a string, got 2");
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["format"] = "onnx"; })),
              HasSubstr("field 'format': unknown format 'onnx', expected "
                        "fa-kernel/3"));
  EXPECT_THAT(
      parseError(mutateJson(base, [](json::Object &o) { o.erase("format"); })),
      HasSubstr("missing field 'format'"));
}

TEST(MetadataTest, MissingFields) {
  std::string base = toJson(makeCudaAttentionMetadata());
  for (const char *field : {"name", "op", "target", "files", "symbol", "dtype",
                            "head_dim", "heads", "kv_heads", "causal",
                            "block_q", "params"}) {
    std::string text =
        mutateJson(base, [&](json::Object &o) { o.erase(field); });
    EXPECT_THAT(parseError(text),
                HasSubstr(std::string("missing field '") + field + "'"))
        << field;
  }
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o.getObject("target")->erase("chip");
                                    })),
              HasSubstr("missing field 'target.chip'"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o.erase("launch"); })),
              HasSubstr("missing field 'launch' (required for cuda"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getArray("params"))[2]
                                          .getAsObject()
                                          ->erase("shape");
                                    })),
              HasSubstr("missing field 'params[2].shape'"));
  for (const char *field : {"block", "grid"})
    EXPECT_THAT(parseError(mutateJson(base,
                                      [&](json::Object &o) {
                                        o.getObject("launch")->erase(field);
                                      })),
                HasSubstr(std::string("missing field 'launch.") + field + "'"));
  for (const char *field : {"name", "role", "dtype", "rank"})
    EXPECT_THAT(
        parseError(mutateJson(base,
                              [&](json::Object &o) {
                                (*o.getArray("params"))[0].getAsObject()->erase(
                                    field);
                              })),
        HasSubstr(std::string("missing field 'params[0].") + field + "'"));
}

TEST(MetadataTest, WrongTypes) {
  std::string base = toJson(makeCudaAttentionMetadata());
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["head_dim"] = "64"; })),
              HasSubstr("field 'head_dim': expected an integer"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["head_dim"] = 64.5; })),
              HasSubstr("field 'head_dim': expected an integer"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["has_lse"] = 1; })),
              HasSubstr("field 'has_lse': expected true or false"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) { o["scale"] = "x"; })),
              HasSubstr("field 'scale': expected a number"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) { o["target"] = 3; })),
              HasSubstr("field 'target': expected an object"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["params"] = "q,k,v"; })),
              HasSubstr("field 'params': expected an array"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getArray("params"))[0]
                                          .getAsObject()
                                          ->operator[]("dtype") = "f64";
                                    })),
              HasSubstr("field 'params[0].dtype': expected one of f32, f16, "
                        "bf16, i32, i8, got 'f64'"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getArray("params"))[0]
                                          .getAsObject()
                                          ->operator[]("shape") =
                                          json::Array{"B", "Hq", "Nq"};
                                    })),
              HasSubstr("'params[0].shape': 3 entries for rank 4"));
  EXPECT_THAT(
      parseError(mutateJson(
          base, [](json::Object &o) { (*o.getArray("params"))[0] = "q"; })),
      HasSubstr("field 'params[0]': expected an object, got \"q\""));
  EXPECT_THAT(parseError(mutateJson(
                  base,
                  [](json::Object &o) {
                    (*o.getArray("params"))[0].getAsObject()->operator[](
                        "shape") = json::Array{"B", "Hq", 2.5, "D"};
                  })),
              HasSubstr("field 'params[0].shape[2]': expected a symbol "
                        "string or an integer, got 2.5"));
  EXPECT_THAT(parseError(mutateJson(
                  base,
                  [](json::Object &o) {
                    (*o.getArray("params"))[0].getAsObject()->operator[](
                        "shape") = json::Array{"B", "", "Nq", "D"};
                  })),
              HasSubstr("field 'params[0].shape[1]': expected a symbol "
                        "string or an integer, got \"\""));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o["name"] = std::string(50, 'n');
                                      o["symbol"] = json::Array{};
                                    })),
              HasSubstr("field 'symbol': expected a string, got an array"));
  EXPECT_THAT(
      parseError(mutateJson(
          base, [](json::Object &o) { o["causal"] = std::string(50, 'c'); })),
      HasSubstr("field 'causal': expected one of none, top_left, "
                "bottom_right, got '"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o["dtype"] = std::string(50, 'd');
                                      o["heads"] = std::string(50, 'h');
                                    })),
              HasSubstr("field 'dtype': expected one of"));
  EXPECT_THAT(
      parseError(mutateJson(
          base, [](json::Object &o) { o["heads"] = std::string(50, 'h'); })),
      HasSubstr("field 'heads': expected an integer, got \"" +
                std::string(40, 'h') + "\"..."));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["launch"] = json::Array{}; })),
              HasSubstr("field 'launch': expected an object, got an array"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("launch"))["block"] = 128;
                                    })),
              HasSubstr("field 'launch.block': expected an array, got 128"));
  EXPECT_THAT(
      parseError(mutateJson(base,
                            [](json::Object &o) {
                              (*o.getObject("launch"))["dynamic_shared_bytes"] =
                                  "0";
                            })),
      HasSubstr("field 'launch.dynamic_shared_bytes': expected an "
                "integer, got \"0\""));
}

TEST(MetadataTest, UnknownValues) {
  std::string base = toJson(makeCudaAttentionMetadata());
  EXPECT_THAT(
      parseError(mutateJson(base, [](json::Object &o) { o["op"] = "matmul"; })),
      HasSubstr("field 'op': expected one of attention, softmax, "
                "attention_backward, got 'matmul'"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["causal"] = "diagonal"; })),
              HasSubstr("field 'causal': expected one of none, top_left, "
                        "bottom_right"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("target"))["kind"] = "tpu";
                                    })),
              HasSubstr("field 'target.kind': expected one of cuda, cpu"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("target"))["chip"] =
                                          "gfx90a";
                                    })),
              HasSubstr("field 'target.chip': expected sm_<NN>[a|f], got "
                        "'gfx90a'"));
  // The chip table's minimum PTX ISA for a chip it knows.
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("target"))["chip"] =
                                          "sm_90a";
                                      (*o.getObject("target"))["ptx_isa"] =
                                          "7.8";
                                    })),
              HasSubstr("field 'target.ptx_isa': sm_90a needs PTX ISA 8.0 "
                        "or newer, got '7.8'"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["kernel"] = "tensor"; })),
              HasSubstr("field 'kernel': expected one of simt, mma, wgmma, "
                        "got 'tensor'"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["symbol"] = "fa-attn"; })),
              HasSubstr("'fa-attn' is not a C identifier"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("files"))["ptx"] =
                                          "/etc/passwd";
                                    })),
              HasSubstr("must be relative to the metadata's directory"));
}

TEST(MetadataTest, Semantics) {
  std::string base = toJson(makeCudaAttentionMetadata());
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["kv_heads"] = 3; })),
              HasSubstr("heads must be a multiple of kv_heads"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o["heads"] = 0;
                                    })),
              HasSubstr("field 'heads' must be positive, got 0"));
  // has_lse without an lse param, and an lse param without has_lse.
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o.getArray("params")->pop_back();
                                    })),
              HasSubstr("no parameter with role 'lse'"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["has_lse"] = false; })),
              HasSubstr("role 'lse' does not belong to this attention "
                        "kernel"));
  // A param whose dtype or shape contradicts the op.
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*(*o.getArray("params"))[1]
                                            .getAsObject())["dtype"] = "f32";
                                    })),
              HasSubstr("params[1] ('k'): dtype 'f32', expected f16"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*(*o.getArray("params"))[0]
                                            .getAsObject())["shape"] =
                                          json::Array{"B", "Hkv", "Nq", "D"};
                                    })),
              HasSubstr("params[0] ('q'): shape [B, Hkv, Nq, D]: dim 1 must "
                        "be 'Hq' (= 8)"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*(*o.getArray("params"))[0]
                                            .getAsObject())["shape"] =
                                          json::Array{"B", 4, "Nq", "D"};
                                    })),
              HasSubstr("dim 1 must be 'Hq' (= 8)"));
  // A static batch is allowed; it is checked at launch.
  EXPECT_EQ(parseError(mutateJson(base,
                                  [](json::Object &o) {
                                    (*(*o.getArray("params"))[0]
                                          .getAsObject())["shape"] =
                                        json::Array{2, "Hq", "Nq", 64};
                                  })),
            "");
  // Launch configuration.
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("launch"))["block"] =
                                          json::Array{64, 32, 1};
                                    })),
              HasSubstr("2048 threads per block exceed CUDA's 1024"));
}

/// A mask_mod's block mask: block_tiles round-trips with its param, whose
/// tile dims are the symbols QT and KT; it needs a mask_mod, positive tiles
/// and a block_mask param of i8.
TEST(MetadataTest, BlockMask) {
  KernelMetadata md = makeCudaAttentionMetadata();
  md.modifiers.maskMod = true;
  md.modifiers.blockTileQ = 128;
  md.modifiers.blockTileKV = 64;
  ParamInfo bm;
  bm.name = "block_mask";
  bm.role = ParamRole::BlockMask;
  bm.dtype = DType::I8;
  bm.shape = {ShapeDim::sym("B"), ShapeDim::fixed(1), ShapeDim::sym("QT"),
              ShapeDim::sym("KT")};
  md.params.push_back(bm);
  std::string error;
  std::optional<KernelMetadata> back = parseKernelMetadata(toJson(md), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->modifiers.blockTileQ, 128);
  EXPECT_EQ(back->modifiers.blockTileKV, 64);
  ASSERT_NE(back->findParam(ParamRole::BlockMask), nullptr);
  EXPECT_EQ(back->findParam(ParamRole::BlockMask)->shape[2].symbol, "QT");
  EXPECT_EQ(toJson(*back), toJson(md));

  std::string base = toJson(md);
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["mask_mod"] = false; })),
              HasSubstr("field 'block_tiles' belongs to kernels with a "
                        "mask_mod"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o["block_tiles"] = json::Array{0, 64};
                                    })),
              HasSubstr("field 'block_tiles' must hold two positive tile "
                        "sizes, got [0, 64]"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o.erase("block_tiles"); })),
              HasSubstr("role 'block_mask' does not belong to this attention "
                        "kernel"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o.getArray("params")->pop_back();
                                    })),
              HasSubstr("no parameter with role 'block_mask'"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getArray("params")->back()
                                            .getAsObject())["dtype"] = "i32";
                                    })),
              HasSubstr("dtype 'i32', expected i8"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getArray("params")->back()
                                            .getAsObject())["shape"] =
                                          json::Array{"B", 1, "Nq", "KT"};
                                    })),
              HasSubstr("dim 2 must be 'QT'"));
}

/// The grid names what each dimension runs over; fa-kernel/1's expressions
/// are gone.
/// The serving forms: `page_size` and `varlen` round-trip with their params
/// (pages over the symbols P, S, M; token-major tensors over Tq and Tk,
/// offsets over B+1), follow fa.attention's rules, and run on cpu targets
/// only.
TEST(MetadataTest, ServingForms) {
  auto makeCpu = [] {
    KernelMetadata md = makeCudaAttentionMetadata();
    md.target = TargetInfo();
    md.target.kind = TargetKind::Cpu;
    md.target.triple = "x86_64-unknown-linux-gnu";
    md.files = FileInfo();
    md.files.library = "attn.so";
    md.launch.reset();
    return md;
  };
  auto shapeOf = [](const KernelMetadata &md, ParamRole role) {
    std::string text;
    for (const ShapeDim &dim : md.findParam(role)->shape)
      text += (text.empty() ? "" : ",") +
              (dim.isSymbol() ? dim.symbol : std::to_string(dim.size));
    return text;
  };

  KernelMetadata paged = makeCpu();
  paged.hasKvLens = true;
  paged.pageSize = 16;
  paged.params = getCanonicalParams(paged, DType::I8, false, false);
  std::string error;
  std::optional<KernelMetadata> back =
      parseKernelMetadata(toJson(paged), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_EQ(back->pageSize, 16);
  EXPECT_FALSE(back->varlen);
  EXPECT_EQ(shapeOf(*back, ParamRole::Key), "P,S,Hkv,D");
  EXPECT_EQ(shapeOf(*back, ParamRole::Value), "P,S,Hkv,Dv");
  EXPECT_EQ(shapeOf(*back, ParamRole::BlockTable), "B,M");
  EXPECT_EQ(back->params.back().role, ParamRole::BlockTable);
  EXPECT_EQ(toJson(*back), toJson(paged));
  std::string base = toJson(paged);
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["page_size"] = 0; })),
              HasSubstr("field 'page_size' must be positive, got 0"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["has_kv_lens"] = false; })),
              HasSubstr("a paged cache needs kv_lens"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o.erase("page_size"); })),
              HasSubstr("params[1] ('k'): shape [P, S, Hkv, D]: dim 0 must "
                        "be 'B'"));
  // The signature covers the page size.
  KernelMetadata other = paged;
  other.pageSize = 32;
  EXPECT_NE(getKernelSignatureHash(other), getKernelSignatureHash(paged));
  EXPECT_THAT(compareKernelSignature(getKernelSignature(other), paged)
                  .value_or(""),
              HasSubstr("page_size"));

  KernelMetadata varlen = makeCpu();
  varlen.varlen = true;
  varlen.params = getCanonicalParams(varlen, DType::I8, false, false);
  back = parseKernelMetadata(toJson(varlen), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_TRUE(back->varlen);
  EXPECT_EQ(shapeOf(*back, ParamRole::Query), "Tq,Hq,D");
  EXPECT_EQ(shapeOf(*back, ParamRole::Key), "Tk,Hkv,D");
  EXPECT_EQ(shapeOf(*back, ParamRole::Output), "Tq,Hq,Dv");
  EXPECT_EQ(shapeOf(*back, ParamRole::Lse), "Hq,Tq");
  EXPECT_EQ(shapeOf(*back, ParamRole::CuSeqlensQ), "B+1");
  EXPECT_EQ(shapeOf(*back, ParamRole::CuSeqlensK), "B+1");
  EXPECT_EQ(toJson(*back), toJson(varlen));
  base = toJson(varlen);
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["mask"] = "bool"; })),
              HasSubstr("field 'varlen': key lengths, masks, segment ids and "
                        "block masks are not available"));
  EXPECT_THAT(parseError(mutateJson(
                  base,
                  [](json::Object &o) {
                    o["page_size"] = 16;
                    o["has_kv_lens"] = true;
                  })),
              HasSubstr("the varlen form are not available with a paged "
                        "cache"));

  // CUDA artifacts of the serving forms run on every family.
  KernelMetadata pagedMma = makeCudaAttentionMetadata();
  pagedMma.hasKvLens = true;
  pagedMma.pageSize = 16;
  pagedMma.params = getCanonicalParams(pagedMma, DType::I8, false, false);
  pagedMma.kernel = "mma";
  EXPECT_EQ(verifyKernelMetadata(pagedMma), std::nullopt);
  KernelMetadata cuda = makeCudaAttentionMetadata();
  cuda.varlen = true;
  cuda.params = getCanonicalParams(cuda, DType::I8, false, false);
  cuda.kernel = "simt";
  EXPECT_EQ(verifyKernelMetadata(cuda), std::nullopt);
  cuda.kernel = "";
  EXPECT_EQ(verifyKernelMetadata(cuda), std::nullopt);
  cuda.kernel = "mma";
  EXPECT_EQ(verifyKernelMetadata(cuda), std::nullopt);
}

/// Split-KV metadata: the field, the merge entry, the workspace params,
/// their rules, the signature, the grids and the workspace layout.
TEST(MetadataTest, SplitKv) {
  KernelMetadata md = makeCudaAttentionMetadata();
  md.kernel = "simt";
  md.splitKv = true;
  md.launch->mergeSymbol = "fa_attn_merge";
  md.launch->mergeBlock = {64, 1, 1};
  md.params = getCanonicalParams(md, DType::I8, false, false);
  ASSERT_EQ(md.params.size(), 7u);
  EXPECT_EQ(md.params[5].role, ParamRole::PartialOutput);
  EXPECT_EQ(md.params[6].role, ParamRole::PartialLse);
  std::string error;
  std::optional<KernelMetadata> back = parseKernelMetadata(toJson(md), error);
  ASSERT_TRUE(back.has_value()) << error;
  EXPECT_TRUE(back->splitKv);
  EXPECT_EQ(back->launch->mergeSymbol, "fa_attn_merge");
  EXPECT_EQ(back->launch->mergeBlock[0], 64);
  EXPECT_EQ(back->params[5].getRank(), 5);
  EXPECT_EQ(back->params[5].shape[0].symbol, "Ns");
  EXPECT_EQ(toJson(*back), toJson(md));

  std::string base = toJson(md);
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o.getObject("launch")->erase("merge");
                                    })),
              HasSubstr("a split_kv kernel needs its merge entry"));
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["split_kv"] = false; })),
              HasSubstr("role 'partial_o' does not belong"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("launch")
                                            ->getObject("merge"))["block"] =
                                          json::Array{48, 1, 1};
                                    })),
              HasSubstr("field 'launch.merge.block': expected [32 * w, 1, 1]"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      (*o.getObject("launch")
                                            ->getObject("merge"))["symbol"] =
                                          "fa_attn";
                                    })),
              HasSubstr("is not a C identifier other than the symbol"));
  // Every kernel family splits the keys.
  for (const char *family : {"simt", "mma", "wgmma"})
    EXPECT_EQ(parseError(mutateJson(
                  base, [&](json::Object &o) { o["kernel"] = family; })),
              "")
        << family;
  KernelMetadata varlen = md;
  varlen.varlen = true;
  varlen.params = getCanonicalParams(varlen, DType::I8, false, false);
  EXPECT_THAT(verifyKernelMetadata(varlen).value_or(""),
              HasSubstr("field 'split_kv': the variable-length form"));
  KernelMetadata partialF16 = md;
  partialF16.params[5].dtype = DType::F16;
  EXPECT_THAT(verifyKernelMetadata(partialF16).value_or(""),
              HasSubstr("dtype 'f16', expected f32"));

  // The signature covers split-KV and the merge entry.
  KernelMetadata other = md;
  other.launch->mergeBlock = {128, 1, 1};
  EXPECT_NE(getKernelSignatureHash(other), getKernelSignatureHash(md));

  // Grids: x times the parts; the merge over rows of 2 warps.
  EXPECT_EQ(getLaunchGrid(md, 3, 70, 5), (std::array<int64_t, 3>{10, 8, 3}));
  EXPECT_EQ(getMergeGrid(md, 3, 70), (std::array<int64_t, 3>{840, 1, 1}));
  // Workspace: 2 x 3 x 8 x 70 x 64 floats, then 2 x 3 x 8 x 70 from the
  // next 256 bytes.
  std::optional<WorkspaceLayout> layout = getWorkspaceLayout(md, 3, 70, 2);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->outputBytes, 860160u);
  EXPECT_EQ(layout->lseOffset, 860160u);
  EXPECT_EQ(layout->lseBytes, 13440u);
  EXPECT_EQ(layout->bytes, 873600u);
  md.valueHeadDim = 3; // partial_o of 2 x 3 x 8 x 70 x 3 floats: 40320 bytes
  layout = getWorkspaceLayout(md, 3, 70, 2);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->lseOffset, 40448u);
  EXPECT_FALSE(getWorkspaceLayout(md, 3, 70, 0).has_value());
  EXPECT_FALSE(getWorkspaceLayout(md, INT64_MAX, INT64_MAX, 2).has_value());
}

TEST(MetadataTest, LaunchGridAxes) {
  std::string base = toJson(makeCudaAttentionMetadata());
  EXPECT_THAT(base, HasSubstr("    \"grid\": [\n      \"q_tiles\",\n      "
                              "\"heads\",\n      \"batch\"\n    ],\n"));
  auto withGrid = [&](json::Value grid) {
    return parseError(mutateJson(base, [&](json::Object &o) {
      (*o.getObject("launch"))["grid"] = grid;
    }));
  };
  EXPECT_EQ(withGrid(json::Array{"batch", "q_tiles", "heads"}), "");
  EXPECT_EQ(withGrid(json::Array{"ceil(Nq/block_q)", "Hq", "B"}),
            "field 'launch.grid[0]': expected one of q_tiles, heads, batch, "
            "packed_q_tiles, kv_heads, k_tiles, got 'ceil(Nq/block_q)'");
  // k_tiles is the backward's dK/dV axis (launch.dkdv) only.
  EXPECT_THAT(withGrid(json::Array{"k_tiles", "heads", "batch"}),
              HasSubstr("field 'launch.grid': expected q_tiles, heads and "
                        "batch, or packed_q_tiles, kv_heads and batch"));
  EXPECT_EQ(withGrid(json::Array{"q_tiles", 1, "batch"}),
            "field 'launch.grid[1]': expected a string, got 1");
  EXPECT_EQ(withGrid(json::Array{"q_tiles", "heads"}),
            "field 'launch.grid': expected 3 axes, got 2");
  EXPECT_EQ(withGrid(json::Array{"q_tiles", "heads", "batch", "batch"}),
            "field 'launch.grid': expected 3 axes, got 4");
  EXPECT_EQ(withGrid("q_tiles"),
            "field 'launch.grid': expected an array, got \"q_tiles\"");
  EXPECT_EQ(withGrid(json::Array{"q_tiles", "heads", "heads"}),
            "field 'launch.grid': 'heads' appears twice (expected q_tiles, "
            "heads and batch, or packed_q_tiles, kv_heads and batch, each "
            "once)");
  // Packed query heads: packed_q_tiles with kv_heads, in any order; never
  // mixed with the unpacked axes.
  EXPECT_EQ(withGrid(json::Array{"packed_q_tiles", "kv_heads", "batch"}), "");
  EXPECT_EQ(withGrid(json::Array{"batch", "kv_heads", "packed_q_tiles"}), "");
  const char *mixed = "field 'launch.grid': expected q_tiles, heads and "
                      "batch, or packed_q_tiles, kv_heads and batch";
  EXPECT_EQ(withGrid(json::Array{"packed_q_tiles", "heads", "batch"}), mixed);
  EXPECT_EQ(withGrid(json::Array{"q_tiles", "kv_heads", "batch"}), mixed);
  EXPECT_EQ(withGrid(json::Array{"q_tiles", "packed_q_tiles", "kv_heads"}),
            mixed);
}

/// getLaunchGrid derives the grid from block_q, Hq and the shapes.
TEST(MetadataTest, LaunchGridSizes) {
  KernelMetadata md = makeCudaAttentionMetadata(); // block_q 64, Hq 8
  using Grid = std::array<int64_t, 3>;
  EXPECT_EQ(getLaunchGrid(md, 3, 130), (Grid{3, 8, 3}));
  EXPECT_EQ(getLaunchGrid(md, 1, 128), (Grid{2, 8, 1}));
  EXPECT_EQ(getLaunchGrid(md, 1, 1), (Grid{1, 8, 1}));
  EXPECT_EQ(getLaunchGrid(md, 2, 0), (Grid{0, 8, 2}));
  EXPECT_EQ(getLaunchGrid(md, 0, 64), (Grid{1, 8, 0}));
  // No overflow in the rounding up.
  EXPECT_EQ(getLaunchGrid(md, 1, INT64_MAX)[0], INT64_MAX / 64 + 1);
  md.launch->grid = {GridAxis::Batch, GridAxis::QueryTiles, GridAxis::Heads};
  md.blockQ = 16;
  EXPECT_EQ(getLaunchGrid(md, 5, 33), (Grid{5, 3, 8}));
  // Packed query heads: ceil(Nq * Hq / Hkv / block_q) tiles of the packed
  // rows (G = 8 / 2 = 4), over the kv heads.
  md.launch->grid = {GridAxis::PackedQueryTiles, GridAxis::KvHeads,
                     GridAxis::Batch};
  EXPECT_EQ(getLaunchGrid(md, 3, 1), (Grid{1, 2, 3}));
  EXPECT_EQ(getLaunchGrid(md, 3, 4), (Grid{1, 2, 3}));
  EXPECT_EQ(getLaunchGrid(md, 3, 5), (Grid{2, 2, 3}));
  EXPECT_EQ(getLaunchGrid(md, 1, 0), (Grid{0, 2, 1}));
  // Past int64, a size CUDA refuses (no wrap to a small grid).
  EXPECT_EQ(getLaunchGrid(md, 1, INT64_MAX / 2)[0], INT64_MAX);
}

TEST(MetadataTest, Softmax) {
  KernelMetadata md;
  md.name = "sm";
  md.op = OpKind::Softmax;
  md.symbol = "fa_sm";
  md.dtype = DType::F32;
  md.rank = 3;
  md.dimension = 1;
  md.target.triple = "x86_64-pc-linux-gnu";
  md.files.library = "sm.so";
  md.params = getCanonicalParams(md, DType::I8, false, false);
  std::string base = toJson(md);
  EXPECT_EQ(parseError(base), "");
  EXPECT_THAT(parseError(mutateJson(
                  base, [](json::Object &o) { o["dimension"] = 3; })),
              HasSubstr("field 'dimension' must be in [0, 3), got 3"));
  EXPECT_THAT(
      parseError(mutateJson(base, [](json::Object &o) { o["rank"] = 5; })),
      HasSubstr("field 'rank' must be in [1, 4], got 5"));
  EXPECT_THAT(parseError(mutateJson(base,
                                    [](json::Object &o) {
                                      o.getObject("files")->erase("library");
                                    })),
              HasSubstr("a cpu artifact needs 'library' or 'object'"));
  // The CUDA grid tiles the queries: there is no CUDA softmax.
  KernelMetadata cuda = makeCudaAttentionMetadata();
  md.target = cuda.target;
  md.files = cuda.files;
  md.launch = cuda.launch;
  EXPECT_EQ(parseError(toJson(md)),
            "field 'op': cuda kernels compute attention or its backward "
            "(their grid tiles the queries), got 'softmax'");
}

/// A CUDA attention_backward kernel: a dQ entry over (q_tiles, heads,
/// batch) and a dK/dV entry (launch.dkdv) over (k_tiles, kv_heads, batch);
/// the dkdv object belongs to backward kernels only.
TEST(MetadataTest, CudaBackward) {
  KernelMetadata md = makeCudaAttentionMetadata();
  md.op = OpKind::AttentionBackward;
  md.hasLse = true;
  md.kernel = "simt";
  md.blockKV = 32;
  md.params = getCanonicalParams(md, DType::I8, false, false);
  md.launch->dkdvSymbol = md.symbol + "_dkdv";
  md.launch->dkdvStaticSharedBytes = 35072;
  std::string error;
  std::optional<KernelMetadata> parsed = parseKernelMetadata(toJson(md), error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->launch->dkdvSymbol, md.symbol + "_dkdv");
  EXPECT_EQ(parsed->launch->dkdvStaticSharedBytes, 35072);
  EXPECT_EQ(parsed->launch->dkdvGrid[0], GridAxis::KeyTiles);
  // Nk = 70 keys in tiles of 32: 3 tiles; Hkv = 2; B = 5.
  EXPECT_EQ(getDkdvGrid(*parsed, 5, 70), (std::array<int64_t, 3>{3, 2, 5}));
  EXPECT_EQ(getDkdvGrid(*parsed, 5, 0), (std::array<int64_t, 3>{0, 2, 5}));

  KernelMetadata bad = md;
  bad.launch->dkdvSymbol.clear();
  EXPECT_THAT(parseError(toJson(bad)),
              HasSubstr("field 'launch.dkdv': an attention_backward kernel "
                        "needs its dK/dV entry"));
  bad = md;
  bad.launch->dkdvGrid = {GridAxis::KeyTiles, GridAxis::Heads, GridAxis::Batch};
  EXPECT_THAT(parseError(toJson(bad)),
              HasSubstr("field 'launch.dkdv.grid': expected [k_tiles, "
                        "kv_heads, batch] (the dK/dV kernel's x, y, z)"));
  bad = md;
  bad.launch->dkdvGrid = {GridAxis::Batch, GridAxis::KvHeads,
                          GridAxis::KeyTiles};
  EXPECT_THAT(parseError(toJson(bad)),
              HasSubstr("field 'launch.dkdv.grid': expected [k_tiles"));
  bad = md;
  bad.launch->grid = {GridAxis::KeyTiles, GridAxis::Heads, GridAxis::Batch};
  EXPECT_THAT(parseError(toJson(bad)), HasSubstr("field 'launch.grid'"));
  bad = md;
  bad.kernel = "wgmma";
  EXPECT_THAT(parseError(toJson(bad)),
              HasSubstr("cuda attention_backward kernels are SIMT or mma "
                        "kernels, got 'wgmma'"));
  bad = md;
  bad.launch->dkdvSymbol = md.symbol;
  EXPECT_THAT(parseError(toJson(bad)),
              HasSubstr("is not a C identifier other than the symbol"));
  // The signature covers the dK/dV entry: its shared memory and symbol.
  KernelMetadata other = md;
  other.launch->dkdvStaticSharedBytes = 1024;
  EXPECT_NE(getKernelSignatureHash(other), getKernelSignatureHash(md));
  EXPECT_THAT(
      compareKernelSignature(getKernelSignature(other), md).value_or(""),
      HasSubstr("launch.dkdv"));

  // getBackwardMismatch: floats compared as float32, exactly.
  KernelMetadata cpuForward = makeCudaAttentionMetadata();
  KernelMetadata cpuBackward = md;
  EXPECT_EQ(getBackwardMismatch(cpuForward, cpuBackward), std::nullopt);
  cpuBackward.scale = 0.1250004;
  EXPECT_THAT(getBackwardMismatch(cpuForward, cpuBackward).value_or(""),
              HasSubstr("scale differs: 0.125 in the forward, 0.125000402 in "
                        "the backward"));
  cpuBackward = md;
  cpuForward.modifiers.softcap = 30.0;
  cpuBackward.modifiers.softcap = 30.00004;
  EXPECT_THAT(getBackwardMismatch(cpuForward, cpuBackward).value_or(""),
              HasSubstr("softcap differs"));
  cpuForward.hasLse = false;
  EXPECT_THAT(getBackwardMismatch(cpuForward, md).value_or(""),
              HasSubstr("does not write the LSE"));

  KernelMetadata forward = makeCudaAttentionMetadata();
  forward.launch->dkdvSymbol = "fa_attn_dkdv";
  EXPECT_THAT(parseError(toJson(forward)),
              HasSubstr("field 'launch.dkdv' belongs to attention_backward "
                        "kernels"));
}

/// fa_kernel_load reports metadata problems with the path and the field.
TEST(MetadataTest, LoadReportsArtifactErrors) {
  // The driver must never be reached for a malformed artifact.
  setenv("FA_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  TempDir dir;
  fa_kernel *kernel = reinterpret_cast<fa_kernel *>(1);

  std::string missing = dir.file("nope.json");
  EXPECT_EQ(fa_kernel_load(missing.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_IO);
  EXPECT_EQ(kernel, nullptr);
  EXPECT_THAT(fa_last_error(), HasSubstr("cannot read the metadata '" +
                                         missing + "'"));

  std::string bad = dir.write("bad.json", "{ not json");
  EXPECT_EQ(fa_kernel_load(bad.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr(bad + ": not valid JSON"));

  // An artifact of the previous schema: one line naming the file and what
  // this runtime reads.
  std::string base = toJson(makeCudaAttentionMetadata());
  std::string old = dir.write("old.json", mutateJson(base, [](json::Object &o) {
                                o["format"] = "fa-kernel/1";
                                (*o.getObject("launch"))["grid"] =
                                    json::Array{"ceil(Nq/block_q)", "Hq", "B"};
                              }));
  EXPECT_EQ(fa_kernel_load(old.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_EQ(std::string(fa_last_error()),
            old + ": unsupported format version 'fa-kernel/1': this runtime "
                  "reads fa-kernel/3 (recompile the kernel with this "
                  "fa-compile)");
  std::string wrongType = dir.write(
      "type.json",
      mutateJson(base, [](json::Object &o) { o["heads"] = json::Array{8}; }));
  EXPECT_EQ(fa_kernel_load(wrongType.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_EQ(std::string(fa_last_error()),
            wrongType + ": field 'heads': expected an integer, got an array");

  std::string noSymbol = dir.write(
      "nosym.json",
      mutateJson(base, [](json::Object &o) { o.erase("symbol"); }));
  EXPECT_EQ(fa_kernel_load(noSymbol.c_str(), FA_DEVICE_CUDA, &kernel),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("missing field 'symbol'"));

  // The device must match the artifact's target.
  std::string cuda = dir.write("cuda.json", base);
  EXPECT_EQ(fa_kernel_load(cuda.c_str(), FA_DEVICE_CPU, &kernel),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("kernel 'attn' targets cuda (sm_80), but "
                        "FA_DEVICE_CPU was requested"));

  EXPECT_EQ(fa_kernel_load(cuda.c_str(), static_cast<fa_device>(7), &kernel),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("unknown device 7"));
  EXPECT_EQ(fa_kernel_load(nullptr, FA_DEVICE_CPU, &kernel),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_kernel_load(cuda.c_str(), FA_DEVICE_CPU, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
}

TEST(MetadataTest, StatusNames) {
  EXPECT_STREQ(fa_status_name(FA_SUCCESS), "FA_SUCCESS");
  EXPECT_STREQ(fa_status_name(FA_ERROR_PTX_TOO_NEW), "FA_ERROR_PTX_TOO_NEW");
  EXPECT_STREQ(fa_status_name(static_cast<fa_status>(99)),
               "FA_ERROR_UNKNOWN");
}

} // namespace
