//===- FAOpsTest.cpp - C++ API tests of the fa dialect --------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace mlir;

namespace {

class FAOpsTest : public ::testing::Test {
protected:
  FAOpsTest() {
    DialectRegistry registry;
    fa::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Builds `fa.attention` on fresh function arguments and returns it
  /// (unverified) together with the diagnostics the verifier emits.
  fa::AttentionOp buildAttention(ArrayRef<int64_t> q, ArrayRef<int64_t> k,
                                 ArrayRef<int64_t> v, Type elt,
                                 std::optional<float> scale,
                                 fa::CausalKind causal, bool withLse) {
    OpBuilder b(&ctx);
    Location loc = b.getUnknownLoc();
    module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    auto qT = RankedTensorType::get(q, elt);
    auto kT = RankedTensorType::get(k, elt);
    auto vT = RankedTensorType::get(v, elt);
    auto oT = RankedTensorType::get({q[0], q[1], q[2], v[3]}, elt);
    auto lT = RankedTensorType::get({q[0], q[1], q[2]}, b.getF32Type());
    SmallVector<Type> args = {qT, kT, vT, oT};
    if (withLse)
      args.push_back(lT);
    auto fn = func::FuncOp::create(b, loc, "f", b.getFunctionType(args, {}));
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    SmallVector<Type> results = {oT};
    if (withLse)
      results.push_back(lT);
    auto op = fa::AttentionOp::create(
        b, loc, results, body->getArgument(0), body->getArgument(1),
        body->getArgument(2), /*kv_lens=*/Value(), /*mask=*/Value(),
        body->getArgument(3), withLse ? body->getArgument(4) : Value(),
        scale ? b.getF32FloatAttr(*scale) : FloatAttr(),
        fa::CausalKindAttr::get(&ctx, causal));
    func::ReturnOp::create(b, loc);
    return op;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(FAOpsTest, DefaultScaleIsInverseSqrtHeadDim) {
  for (int64_t d : {8, 40, 64, 96, 128, 256}) {
    auto op = buildAttention({1, 4, 16, d}, {1, 2, 32, d}, {1, 2, 32, 8},
                             Float32Type::get(&ctx), std::nullopt,
                             fa::CausalKind::none, false);
    ASSERT_TRUE(succeeded(verify(*module)));
    EXPECT_FLOAT_EQ(op.getEffectiveScale(),
                    static_cast<float>(1.0 / std::sqrt(double(d))));
  }
}

TEST_F(FAOpsTest, ExplicitScaleWins) {
  auto op = buildAttention({1, 1, 4, 64}, {1, 1, 4, 64}, {1, 1, 4, 64},
                           Float16Type::get(&ctx), 0.3f,
                           fa::CausalKind::top_left, true);
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_FLOAT_EQ(op.getEffectiveScale(), 0.3f);
  EXPECT_EQ(op.getCausal(), fa::CausalKind::top_left);
  EXPECT_TRUE(op.getLseResult());
}

TEST_F(FAOpsTest, GroupSize) {
  auto op = buildAttention({2, 12, 5, 64}, {2, 3, 7, 64}, {2, 3, 7, 32},
                           BFloat16Type::get(&ctx), std::nullopt,
                           fa::CausalKind::bottom_right, false);
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_EQ(op.getGroupSize(), 4);
}

TEST_F(FAOpsTest, DestinationStyleInits) {
  auto withLse = buildAttention({1, 2, 4, 8}, {1, 1, 4, 8}, {1, 1, 4, 8},
                                Float32Type::get(&ctx), std::nullopt,
                                fa::CausalKind::none, true);
  auto dps = cast<DestinationStyleOpInterface>(withLse.getOperation());
  ASSERT_EQ(dps.getNumDpsInits(), 2);
  EXPECT_EQ(dps.getDpsInitOperand(0)->get(), withLse.getOutput());
  EXPECT_EQ(dps.getDpsInitOperand(1)->get(), withLse.getLse());
  EXPECT_EQ(dps.getNumDpsInputs(), 3);

  auto noLse = buildAttention({1, 2, 4, 8}, {1, 1, 4, 8}, {1, 1, 4, 8},
                              Float32Type::get(&ctx), std::nullopt,
                              fa::CausalKind::none, false);
  auto dps2 = cast<DestinationStyleOpInterface>(noLse.getOperation());
  EXPECT_EQ(dps2.getNumDpsInits(), 1);
  EXPECT_EQ(dps2.getDpsInitOperand(0)->get(), noLse.getOutput());
}

TEST_F(FAOpsTest, VerifierRejectsBadGroupingWithNamedDims) {
  buildAttention({1, 6, 4, 8}, {1, 4, 4, 8}, {1, 4, 4, 8},
                 Float32Type::get(&ctx), std::nullopt, fa::CausalKind::none,
                 false);
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(message.find("Hq = 6"), std::string::npos) << message;
  EXPECT_NE(message.find("Hkv = 4"), std::string::npos) << message;
}

TEST_F(FAOpsTest, ParsePrintRoundTrip) {
  const char *src = R"mlir(
    func.func @f(%x: tensor<3x?xf16>) -> tensor<3x?xf16> {
      %y = fa.softmax ins(%x : tensor<3x?xf16>) outs(%x : tensor<3x?xf16>) dimension(1) -> tensor<3x?xf16>
      return %y : tensor<3x?xf16>
    })mlir";
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(src, &ctx);
  ASSERT_TRUE(parsed);
  std::string printed;
  llvm::raw_string_ostream os(printed);
  parsed->print(os);
  OwningOpRef<ModuleOp> reparsed = parseSourceString<ModuleOp>(printed, &ctx);
  ASSERT_TRUE(reparsed);
  fa::SoftmaxOp sm;
  reparsed->walk([&](fa::SoftmaxOp op) { sm = op; });
  ASSERT_TRUE(sm);
  EXPECT_EQ(sm.getDimension(), 1u);
}

} // namespace
