//===- FastExpTest.cpp - accuracy of the polynomial exps ------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// lowering::buildFastExp and lowering::buildSoftmaxExp on vector<16xf32>,
// JIT-compiled for the host as the CPU kernels are, against expl in long
// double: the error in ulps over [-87.3, 0] (and buildFastExp's range up to
// 88), the exact values the softmax relies on (exp(0) = 1, exp(-inf) = 0,
// 0 below the range) and NaN in, NaN out.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Utils/LoweringUtils.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace mlir;
namespace lowering = mlir::fa::lowering;

namespace {

constexpr int64_t kLanes = 16;

/// The distance in units in the last place between two positive floats.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

/// `@exps(in, fast, soft)`: fast[i] = buildFastExp(in[i]), soft[i] =
/// buildSoftmaxExp(in[i]), 16 lanes at a time, JIT-compiled.
class FastExpTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  }

  FastExpTest() {
    DialectRegistry registry;
    registry.insert<arith::ArithDialect, func::FuncDialect,
                    memref::MemRefDialect, scf::SCFDialect,
                    vector::VectorDialect, LLVM::LLVMDialect>();
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Runs both exps on `in` (a multiple of 16 values); returns false after
  /// a failed ADD_FAILURE.
  bool run(const std::vector<float> &in, std::vector<float> &fast,
           std::vector<float> &soft) {
    int64_t n = static_cast<int64_t>(in.size());
    OpBuilder b(&ctx);
    Location loc = b.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    auto mt = MemRefType::get({n}, b.getF32Type());
    auto fn = func::FuncOp::create(b, loc, "exps",
                                   b.getFunctionType({mt, mt, mt}, {}));
    fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    b.setInsertionPointToStart(fn.addEntryBlock());
    auto idx = [&](int64_t v) {
      return arith::ConstantIndexOp::create(b, loc, v).getResult();
    };
    auto vt = VectorType::get({kLanes}, b.getF32Type());
    scf::ForOp::create(
        b, loc, idx(0), idx(n), idx(kLanes), ValueRange{},
        [&](OpBuilder &lb, Location, Value i, ValueRange) {
          Value x = vector::LoadOp::create(lb, loc, vt, fn.getArgument(0),
                                           ValueRange{i});
          vector::StoreOp::create(lb, loc, lowering::buildFastExp(lb, loc, x),
                                  fn.getArgument(1), ValueRange{i});
          vector::StoreOp::create(lb, loc,
                                  lowering::buildSoftmaxExp(lb, loc, x),
                                  fn.getArgument(2), ValueRange{i});
          scf::YieldOp::create(lb, loc);
        });
    func::ReturnOp::create(b, loc);

    PassManager pm(&ctx);
    pm.addPass(createSCFToControlFlowPass());
    pm.addPass(createConvertVectorToLLVMPass());
    pm.addPass(createArithToLLVMConversionPass());
    pm.addPass(createFinalizeMemRefToLLVMConversionPass());
    pm.addPass(createConvertControlFlowToLLVMPass());
    pm.addPass(createConvertFuncToLLVMPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    if (failed(pm.run(*module))) {
      ADD_FAILURE() << "lowering the test function to LLVM failed";
      return false;
    }
    ExecutionEngineOptions options;
    options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
    auto engine = ExecutionEngine::create(*module, options);
    if (!engine) {
      ADD_FAILURE() << llvm::toString(engine.takeError());
      return false;
    }
    auto call = (*engine)->lookupPacked("_mlir_ciface_exps");
    if (!call) {
      ADD_FAILURE() << llvm::toString(call.takeError());
      return false;
    }
    fast.assign(n, 0.0f);
    soft.assign(n, 0.0f);
    auto desc = [&](float *p) {
      return StridedMemRefType<float, 1>{p, p, 0, {n}, {1}};
    };
    StridedMemRefType<float, 1> dIn = desc(const_cast<float *>(in.data())),
                                dFast = desc(fast.data()),
                                dSoft = desc(soft.data());
    void *ptrs[] = {&dIn, &dFast, &dSoft};
    void *args[] = {&ptrs[0], &ptrs[1], &ptrs[2]};
    (*call)(args);
    return true;
  }

  MLIRContext ctx;
};

TEST_F(FastExpTest, WithinTwoUlpsOnTheSoftmaxRange) {
  // A dense grid over [-87.3, 0], the points near 0 where exp is close to
  // 1, and random values of every magnitude.
  std::vector<float> in;
  const float lo = -87.33f;
  for (int i = 0; i <= 200000; ++i)
    in.push_back(lo * static_cast<float>(i) / 200000.0f);
  for (float x = -1e-3f; x < 0.0f; x += 1e-6f)
    in.push_back(x);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> mag(-30.0f, 6.4f);
  for (int i = 0; i < 20000; ++i)
    in.push_back(-std::exp2(mag(rng)));
  while (in.size() % kLanes)
    in.push_back(0.0f);
  std::vector<float> fast, soft;
  ASSERT_TRUE(run(in, fast, soft));
  int64_t worstFast = 0, worstSoft = 0;
  float atFast = 0, atSoft = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    float ref = static_cast<float>(std::exp(static_cast<long double>(in[i])));
    if (ref < std::numeric_limits<float>::min())
      continue; // flushed to 0 below the range; checked apart
    int64_t uf = ulps(fast[i], ref), us = ulps(soft[i], ref);
    if (uf > worstFast)
      worstFast = uf, atFast = in[i];
    if (us > worstSoft)
      worstSoft = us, atSoft = in[i];
  }
  EXPECT_LE(worstFast, 2) << "buildFastExp at x = " << atFast;
  EXPECT_LE(worstSoft, 2) << "buildSoftmaxExp at x = " << atSoft;
}

TEST_F(FastExpTest, FastExpAboveZero) {
  // buildFastExp's whole range: positive arguments up to 88, +inf above.
  std::vector<float> in;
  for (int i = 0; i < 16 * 1000; ++i)
    in.push_back(88.0f * static_cast<float>(i) / (16 * 1000));
  in.back() = 88.5f;
  std::vector<float> fast, soft;
  ASSERT_TRUE(run(in, fast, soft));
  for (size_t i = 0; i + 1 < in.size(); ++i) {
    float ref = static_cast<float>(std::exp(static_cast<long double>(in[i])));
    ASSERT_LE(ulps(fast[i], ref), 2) << "x = " << in[i];
  }
  EXPECT_EQ(fast.back(), std::numeric_limits<float>::infinity());
}

TEST_F(FastExpTest, ExactValuesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> in = {0.0f, -0.0f, -inf, nan, -87.34f, -88.0f, -100.0f,
                           -1e30f, -std::numeric_limits<float>::max(),
                           -87.33f, -1e-30f, -std::numeric_limits<float>::min(),
                           -std::numeric_limits<float>::denorm_min(), -nan,
                           -20.0f, -1.0f};
  std::vector<float> fast, soft;
  ASSERT_TRUE(run(in, fast, soft));
  for (const std::vector<float> *out : {&fast, &soft}) {
    const char *name = out == &fast ? "buildFastExp" : "buildSoftmaxExp";
    const std::vector<float> &y = *out;
    EXPECT_EQ(y[0], 1.0f) << name;
    EXPECT_EQ(y[1], 1.0f) << name;
    // Below the range, -inf included: exactly 0 (a fully masked row's
    // weights must sum to 0, not to N denormals).
    for (int i : {2, 4, 5, 6, 7, 8})
      EXPECT_EQ(y[i], 0.0f) << name << " at x = " << in[i];
    EXPECT_TRUE(std::isnan(y[3])) << name;
    EXPECT_TRUE(std::isnan(y[13])) << name;
    // Just inside the range: a normal float, not 0.
    EXPECT_GE(y[9], std::numeric_limits<float>::min()) << name;
    for (int i : {10, 11, 12})
      EXPECT_EQ(y[i], 1.0f) << name << " at x = " << in[i];
    EXPECT_LE(ulps(y[14], std::exp(-20.0f)), 1) << name;
    EXPECT_LE(ulps(y[15], std::exp(-1.0f)), 1) << name;
  }
}

} // namespace
