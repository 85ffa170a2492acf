//===- InterpreterTest.cpp - Tests of the SIMT interpreter ----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The f16/bf16 conversions against APFloat; the interpreter's semantics on
// small hand-written kernels (shuffles, divergence, barriers, bounds, races,
// uninitialized reads, unsupported ops); and the mapped attention kernel
// built through the C++ API: correct against a double reference, and a race
// reported once one of its barriers is erased.
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestUtils.h"

#include "fa/Interpreter/FloatBits.h"
#include "fa/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::fa;

namespace {

//===----------------------------------------------------------------------===//
// f16 / bf16 conversions
//===----------------------------------------------------------------------===//

uint16_t apfloatBits(double x, const llvm::fltSemantics &sem) {
  llvm::APFloat v(x);
  bool lost = false;
  v.convert(sem, llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<uint16_t>(v.bitcastToAPInt().getZExtValue());
}

TEST(FloatBitsTest, HalfRoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    double x = halfBitsToDouble(static_cast<uint16_t>(b));
    if (std::isnan(x))
      continue;
    ASSERT_EQ(doubleToHalfBits(x), b) << "bits 0x" << llvm::utohexstr(b);
    ASSERT_EQ(apfloatBits(x, llvm::APFloat::IEEEhalf()), b);
  }
}

TEST(FloatBitsTest, BFloat16RoundTripsEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    double x = bfloat16BitsToDouble(static_cast<uint16_t>(b));
    if (std::isnan(x))
      continue;
    ASSERT_EQ(doubleToBFloat16Bits(x), b) << "bits 0x" << llvm::utohexstr(b);
  }
}

TEST(FloatBitsTest, RoundingMatchesAPFloat) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> exps(-40, 20);
  std::vector<double> values = {
      0.0,      -0.0,     65504.0, 65519.99,
      65520.0,  1e-8,     -1e-8,   5.960464477539063e-8,
      2.98e-8,  1e300,    -1e300,  1e-300,
      INFINITY, -INFINITY};
  for (int i = 0; i < 200000; ++i) {
    double x = std::ldexp(mant(rng), exps(rng)) * (i % 2 ? -1 : 1);
    values.push_back(x);
    // Exact ties between neighbouring f16 and bf16 values.
    uint16_t h = doubleToHalfBits(x);
    if ((h & 0x7C00) != 0x7C00)
      values.push_back((halfBitsToDouble(h) + halfBitsToDouble(h + 1)) / 2);
    uint16_t bb = doubleToBFloat16Bits(x);
    if ((bb & 0x7F80) != 0x7F80)
      values.push_back(
          (bfloat16BitsToDouble(bb) + bfloat16BitsToDouble(bb + 1)) / 2);
  }
  for (double x : values) {
    ASSERT_EQ(doubleToHalfBits(x), apfloatBits(x, llvm::APFloat::IEEEhalf()))
        << x;
    ASSERT_EQ(doubleToBFloat16Bits(x), apfloatBits(x, llvm::APFloat::BFloat()))
        << x;
  }
  EXPECT_TRUE(std::isnan(halfBitsToDouble(doubleToHalfBits(NAN))));
  EXPECT_TRUE(std::isnan(bfloat16BitsToDouble(doubleToBFloat16Bits(NAN))));
}

//===----------------------------------------------------------------------===//
// Small kernels
//===----------------------------------------------------------------------===//

class InterpreterTest : public test::InterpreterFixture {
protected:
  /// Parses `kernelBody` as the body of `gpu.func @k(%out: <outType>)` in a
  /// gpu.module that also holds `globals`, and runs it over `grid` blocks of
  /// `threads` threads on `out` (`elems` elements of `eltSize` bytes).
  LogicalResult run(StringRef globals, StringRef outType, StringRef kernelBody,
                    int64_t threads, void *out, int64_t elems,
                    InterpreterOptions options = {}, int64_t grid = 1) {
    std::string src =
        ("module attributes {gpu.container_module} {\n"
         "gpu.module @m {\n" +
         globals + "\n  gpu.func @k(%out: " + outType + ") kernel {\n" +
         kernelBody + "\n    gpu.return\n  }\n}\n}\n")
            .str();
    diags.clear();
    Operation *kernel = parseKernel(src);
    if (!module)
      return failure();
    Interpreter interp(*module, options);
    HostMemRef arg = HostMemRef::getDense("out", out, {elems});
    LogicalResult result =
        interp.runKernel(kernel, {grid, 1, 1}, {threads, 1, 1}, {arg});
    stats = interp.getStats();
    return result;
  }

  InterpreterStats stats;
};

TEST_F(InterpreterTest, ShuffleModes) {
  // out[4 * t + m] = shuffle of the thread id by mode m; out[256 + 4t + m] =
  // its valid flag.
  std::vector<int32_t> out(512, -7);
  const char *body = R"(
    %c4 = arith.constant 4 : index
    %c256 = arith.constant 256 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %w = arith.constant 32 : i32
    %o5 = arith.constant 5 : i32
    %o7 = arith.constant 7 : i32
    %o3 = arith.constant 3 : i32
    %t = gpu.thread_id x
    %ti = arith.index_cast %t : index to i32
    %x, %xv = gpu.shuffle xor %ti, %o5, %w : i32
    %i, %iv = gpu.shuffle idx %ti, %o7, %w : i32
    %d, %dv = gpu.shuffle down %ti, %o3, %w : i32
    %u, %uv = gpu.shuffle up %ti, %o3, %w : i32
    %b = arith.muli %t, %c4 : index
    %b1 = arith.addi %b, %c1 : index
    %b2 = arith.addi %b, %c2 : index
    %b3 = arith.addi %b, %c3 : index
    memref.store %x, %out[%b] : memref<512xi32>
    memref.store %i, %out[%b1] : memref<512xi32>
    memref.store %d, %out[%b2] : memref<512xi32>
    memref.store %u, %out[%b3] : memref<512xi32>
    %v0 = arith.extui %xv : i1 to i32
    %v1 = arith.extui %iv : i1 to i32
    %v2 = arith.extui %dv : i1 to i32
    %v3 = arith.extui %uv : i1 to i32
    %f = arith.addi %b, %c256 : index
    %f1 = arith.addi %f, %c1 : index
    %f2 = arith.addi %f, %c2 : index
    %f3 = arith.addi %f, %c3 : index
    memref.store %v0, %out[%f] : memref<512xi32>
    memref.store %v1, %out[%f1] : memref<512xi32>
    memref.store %v2, %out[%f2] : memref<512xi32>
    memref.store %v3, %out[%f3] : memref<512xi32>)";
  ASSERT_TRUE(succeeded(run("", "memref<512xi32>", body, 64, out.data(), 512)))
      << allDiags();
  for (int t = 0; t < 64; ++t) {
    int lane = t % 32, base = t - lane;
    EXPECT_EQ(out[4 * t], base + (lane ^ 5)) << t;
    EXPECT_EQ(out[4 * t + 1], base + 7) << t;
    EXPECT_EQ(out[4 * t + 2], lane + 3 <= 31 ? t + 3 : t) << t;
    EXPECT_EQ(out[4 * t + 3], lane >= 3 ? t - 3 : t) << t;
    EXPECT_EQ(out[256 + 4 * t], 1);
    EXPECT_EQ(out[256 + 4 * t + 1], 1);
    EXPECT_EQ(out[256 + 4 * t + 2], lane + 3 <= 31 ? 1 : 0) << t;
    EXPECT_EQ(out[256 + 4 * t + 3], lane >= 3 ? 1 : 0) << t;
  }
}

TEST_F(InterpreterTest, DivergentLoopsAndBranches) {
  // out[t] = (sum of i for i in [t, 2t) step 1) + (t odd ? 1000 : 2000).
  std::vector<int64_t> out(64, -1);
  const char *body = R"(
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %k1000 = arith.constant 1000 : i64
    %k2000 = arith.constant 2000 : i64
    %t = gpu.thread_id x
    %ub = arith.muli %t, %c2 : index
    %s = scf.for %i = %t to %ub step %c1 iter_args(%acc = %c0) -> (i64) {
      %ii = arith.index_cast %i : index to i64
      %n = arith.addi %acc, %ii : i64
      scf.yield %n : i64
    }
    %odd = arith.remui %t, %c2 : index
    %isOdd = arith.cmpi eq, %odd, %c1 : index
    %r = scf.if %isOdd -> (i64) {
      %a = arith.addi %s, %k1000 : i64
      scf.yield %a : i64
    } else {
      %a = arith.addi %s, %k2000 : i64
      scf.yield %a : i64
    }
    memref.store %r, %out[%t] : memref<64xi64>)";
  ASSERT_TRUE(succeeded(run("", "memref<64xi64>", body, 64, out.data(), 64)))
      << allDiags();
  for (int64_t t = 0; t < 64; ++t) {
    int64_t sum = 0;
    for (int64_t i = t; i < 2 * t; ++i)
      sum += i;
    EXPECT_EQ(out[t], sum + (t % 2 ? 1000 : 2000)) << t;
  }
}

TEST_F(InterpreterTest, BarrierInDivergentCode) {
  std::vector<float> out(64);
  const char *body = R"(
    %c16 = arith.constant 16 : index
    %t = gpu.thread_id x
    %p = arith.cmpi ult, %t, %c16 : index
    scf.if %p {
      gpu.barrier
    })";
  EXPECT_TRUE(failed(run("", "memref<64xf32>", body, 64, out.data(), 64)));
  EXPECT_TRUE(diagContains("'gpu.barrier' op reached by 16 of the 64 threads"))
      << allDiags();
  EXPECT_TRUE(diagContains("divergent")) << allDiags();
}

TEST_F(InterpreterTest, ShuffleNeedsTheWholeWarp) {
  std::vector<float> out(64);
  const char *body = R"(
    %c16 = arith.constant 16 : index
    %w = arith.constant 32 : i32
    %o = arith.constant 1 : i32
    %v = arith.constant 1.0 : f32
    %t = gpu.thread_id x
    %p = arith.cmpi ult, %t, %c16 : index
    scf.if %p {
      %s, %ok = gpu.shuffle xor %v, %o, %w : f32
    })";
  EXPECT_TRUE(failed(run("", "memref<64xf32>", body, 64, out.data(), 64)));
  EXPECT_TRUE(diagContains("lane 16 of that warp is inactive")) << allDiags();
}

TEST_F(InterpreterTest, OutOfBoundsIsReportedBeforeTheAccess) {
  std::vector<float> out(65, 0.0f);
  out[64] = 123.0f; // just past the memref: must stay untouched
  const char *body = R"(
    %c1 = arith.constant 1 : index
    %v = arith.constant 1.0 : f32
    %t = gpu.thread_id x
    %i = arith.addi %t, %c1 : index
    memref.store %v, %out[%i] : memref<64xf32>)";
  EXPECT_TRUE(failed(run("", "memref<64xf32>", body, 64, out.data(), 64)));
  EXPECT_TRUE(diagContains("'memref.store' op out-of-bounds write of out "
                           "('memref<64xf32>') at index [64] (sizes [64]) in "
                           "thread 63"))
      << allDiags();
  EXPECT_EQ(out[64], 123.0f);
}

constexpr const char *kShared =
    "  memref.global \"private\" @buf : memref<64xf32, 3>";

TEST_F(InterpreterTest, ReadAfterWriteWithoutBarrierIsARace) {
  // Thread 0 writes buf[0]; every thread reads it; with the barrier in
  // between there is no race.
  auto body = [](bool barrier) {
    return (Twine(R"(
    %c0 = arith.constant 0 : index
    %v = arith.constant 5.0 : f32
    %s = memref.get_global @buf : memref<64xf32, 3>
    %t = gpu.thread_id x
    %p = arith.cmpi eq, %t, %c0 : index
    scf.if %p {
      memref.store %v, %s[%c0] : memref<64xf32, 3>
    })") + (barrier ? "\n    gpu.barrier" : "") +
            R"(
    %r = memref.load %s[%c0] : memref<64xf32, 3>
    memref.store %r, %out[%t] : memref<64xf32>)")
        .str();
  };
  InterpreterOptions options;
  options.checkRaces = true;
  std::vector<float> out(64, 0.0f);
  EXPECT_TRUE(failed(run(kShared, "memref<64xf32>", body(false), 64, out.data(),
                         64, options)));
  EXPECT_TRUE(diagContains("'memref.load' op race: thread 1 (warp 0, lane 1) "
                           "of block (0, 0, 0) reads @buf[0]"))
      << allDiags();
  EXPECT_TRUE(diagContains("note: the write by thread 0")) << allDiags();
  EXPECT_GT(stats.races, 0u);

  options.shuffleMemoryOrder = true;
  options.seed = 7;
  ASSERT_TRUE(succeeded(
      run(kShared, "memref<64xf32>", body(true), 64, out.data(), 64, options)))
      << allDiags();
  for (float x : out)
    EXPECT_EQ(x, 5.0f);
  EXPECT_EQ(stats.races, 0u);
}

TEST_F(InterpreterTest, TwoThreadsWritingTheSameValueIsARace) {
  const char *body = R"(
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.0 : f32
    %s = memref.get_global @buf : memref<64xf32, 3>
    memref.store %v, %s[%c0] : memref<64xf32, 3>)";
  std::vector<float> out(64);
  InterpreterOptions options;
  EXPECT_TRUE(succeeded(
      run(kShared, "memref<64xf32>", body, 64, out.data(), 64, options)));
  options.checkRaces = true;
  EXPECT_TRUE(failed(
      run(kShared, "memref<64xf32>", body, 64, out.data(), 64, options)));
  EXPECT_TRUE(diagContains("also wrote in the same barrier interval"))
      << allDiags();
  // Each pair of ops is reported once.
  EXPECT_EQ(diags.size(), 2u) << allDiags();
}

TEST_F(InterpreterTest, WriteAfterReadAcrossWarps) {
  // Warp 1 reads buf[t % 32], then warp 0 overwrites it in the same
  // interval: a race. Lane 0 overwriting what the lanes of its own warp
  // read is not reported (lock-step order within a warp).
  auto body = [](StringRef writers) {
    return (Twine(R"(
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %v = arith.constant 1.0 : f32
    %s = memref.get_global @buf : memref<64xf32, 3>
    %t = gpu.thread_id x
    %l = arith.remui %t, %c32 : index
    memref.store %v, %s[%t] : memref<64xf32, 3>
    gpu.barrier
    %r = memref.load %s[%l] : memref<64xf32, 3>
    %p = arith.cmpi )") +
            writers + R"(, %t, %c32 : index
    scf.if %p {
      memref.store %r, %s[%l] : memref<64xf32, 3>
    })")
        .str();
  };
  std::vector<float> out(64);
  InterpreterOptions options;
  options.checkRaces = true;
  EXPECT_TRUE(failed(run(kShared, "memref<64xf32>", body("ult"), 64, out.data(),
                         64, options)));
  EXPECT_TRUE(diagContains("which thread 32 of another warp (warp 1) read in "
                           "the same barrier interval"))
      << allDiags();
  // Only the lanes of warp 1 write what both warps read: still a race (warp
  // 0 read it); a warp writing only what it alone read is fine.
  const char *ownWarp = R"(
    %c32 = arith.constant 32 : index
    %v = arith.constant 1.0 : f32
    %s = memref.get_global @buf : memref<64xf32, 3>
    %t = gpu.thread_id x
    %l = arith.remui %t, %c32 : index
    %w = arith.subi %t, %l : index
    memref.store %v, %s[%t] : memref<64xf32, 3>
    gpu.barrier
    %r = memref.load %s[%w] : memref<64xf32, 3>
    %c0 = arith.constant 0 : index
    %p = arith.cmpi eq, %l, %c0 : index
    scf.if %p {
      memref.store %r, %s[%t] : memref<64xf32, 3>
    })";
  EXPECT_TRUE(succeeded(
      run(kShared, "memref<64xf32>", ownWarp, 64, out.data(), 64, options)))
      << allDiags();
}

TEST_F(InterpreterTest, UninitializedSharedMemory) {
  const char *body = R"(
    %s = memref.get_global @buf : memref<64xf32, 3>
    %t = gpu.thread_id x
    %r = memref.load %s[%t] : memref<64xf32, 3>
    memref.store %r, %out[%t] : memref<64xf32>)";
  std::vector<float> out(64, 0.0f);
  EXPECT_TRUE(failed(run(kShared, "memref<64xf32>", body, 64, out.data(), 64)));
  EXPECT_TRUE(diagContains("before any thread of the block wrote it"))
      << allDiags();
  InterpreterOptions options;
  options.checkUninitializedShared = false;
  EXPECT_TRUE(succeeded(
      run(kShared, "memref<64xf32>", body, 64, out.data(), 64, options)));
  // The workgroup buffer is poisoned with NaN.
  for (float x : out)
    EXPECT_TRUE(std::isnan(x));
}

TEST_F(InterpreterTest, CrossBlockWritesRace) {
  const char *body = R"(
    %c0 = arith.constant 0 : index
    %t = gpu.thread_id x
    %b = gpu.block_id x
    %p = arith.cmpi eq, %t, %c0 : index
    scf.if %p {
      %v = arith.index_cast %b : index to i32
      memref.store %v, %out[%c0] : memref<4xi32>
    })";
  std::vector<int32_t> out(4);
  InterpreterOptions options;
  options.checkRaces = true;
  EXPECT_TRUE(failed(
      run("", "memref<4xi32>", body, 32, out.data(), 4, options, /*grid=*/2)));
  EXPECT_TRUE(diagContains("which block (0, 0, 0) also wrote during the same "
                           "launch"))
      << allDiags();
}

TEST_F(InterpreterTest, UnsupportedOpIsNamed) {
  const char *body = R"(
    %v = arith.constant 1.0 : f32
    %s = math.sin %v : f32)";
  std::vector<float> out(32);
  EXPECT_TRUE(failed(run("", "memref<32xf32>", body, 32, out.data(), 32)));
  EXPECT_TRUE(diagContains("'math.sin' op is not supported by the fa "
                           "interpreter"))
      << allDiags();
  EXPECT_EQ(stats.ops, 0u) << "nothing may run before the check";
}

TEST_F(InterpreterTest, HalfArithmeticRoundsOnce) {
  // out[t] = f16(x_t) * f16(y_t) + f16 rounding, exactly as APFloat.
  const char *body = R"(
    %c1000 = arith.constant 1000.0 : f32
    %third = arith.constant 0.333333343 : f32
    %t = gpu.thread_id x
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    %x = arith.divf %tf, %c1000 : f32
    %y = arith.addf %x, %third : f32
    %xh = arith.truncf %x : f32 to f16
    %yh = arith.truncf %y : f32 to f16
    %p = arith.mulf %xh, %yh : f16
    %s = arith.addf %p, %yh : f16
    memref.store %s, %out[%t] : memref<128xf16>)";
  std::vector<uint16_t> out(128);
  ASSERT_TRUE(succeeded(run("", "memref<128xf16>", body, 128, out.data(), 128)))
      << allDiags();
  for (int t = 0; t < 128; ++t) {
    using llvm::APFloat;
    bool lost;
    float xf = static_cast<float>(t) / 1000.0f;
    float yf = xf + 0.333333343f;
    APFloat x(xf), y(yf);
    x.convert(APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven, &lost);
    y.convert(APFloat::IEEEhalf(), APFloat::rmNearestTiesToEven, &lost);
    APFloat p = x;
    p.multiply(y, APFloat::rmNearestTiesToEven);
    p.add(y, APFloat::rmNearestTiesToEven);
    EXPECT_EQ(out[t], p.bitcastToAPInt().getZExtValue()) << t;
  }
}

TEST_F(InterpreterTest, WorkgroupAttributionsAndStructuredControlFlowOnly) {
  // A workgroup attribution is a per-block buffer like a global.
  const char *src = R"(
module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k(%out: memref<128xf32>)
      workgroup(%w : memref<64xf32, #gpu.address_space<workgroup>>) kernel {
    %c63 = arith.constant 63 : index
    %c64 = arith.constant 64 : index
    %t = gpu.thread_id x
    %b = gpu.block_id x
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    memref.store %tf, %w[%t] : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %r = arith.subi %c63, %t : index
    %v = memref.load %w[%r] : memref<64xf32, #gpu.address_space<workgroup>>
    %o = arith.muli %b, %c64 : index
    %i = arith.addi %o, %t : index
    memref.store %v, %out[%i] : memref<128xf32>
    gpu.return
  }
  gpu.func @bad(%out: memref<128xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %r = scf.while (%i = %c0) : (index) -> index {
      %p = arith.cmpi ult, %i, %c1 : index
      scf.condition(%p) %i : index
    } do {
    ^bb0(%i: index):
      scf.yield %i : index
    }
    gpu.return
  }
}
}
)";
  parseKernel(src);
  ASSERT_TRUE(module);
  SmallVector<gpu::GPUFuncOp> kernels;
  module->walk([&](gpu::GPUFuncOp f) { kernels.push_back(f); });
  ASSERT_EQ(kernels.size(), 2u);
  std::vector<float> out(128, -1.0f);
  InterpreterOptions options;
  options.checkRaces = true;
  HostMemRef arg = HostMemRef::getDense("out", out.data(), {128});
  ASSERT_TRUE(succeeded(runKernel(kernels[0], 64, {arg}, options, 2)))
      << allDiags();
  for (int t = 0; t < 128; ++t)
    EXPECT_EQ(out[t], 63 - t % 64);
  EXPECT_TRUE(failed(runKernel(kernels[1], 64, {arg}, options)));
  EXPECT_TRUE(diagContains("'scf.while' op is not supported by the fa "
                           "interpreter"))
      << allDiags();
}

//===----------------------------------------------------------------------===//
// The mapped attention kernel
//===----------------------------------------------------------------------===//

constexpr const char *kAttention = R"(
func.func @attn(%q: memref<?x2x?x64xf32>, %k: memref<?x2x?x64xf32>,
                %v: memref<?x2x?x64xf32>, %o: memref<?x2x?x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x2x?x64xf32> to tensor<?x2x?x64xf32>
  %r = fa.attention ins(%qt, %kt, %vt : tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>)
         outs(%ot : tensor<?x2x?x64xf32>) causal(bottom_right) -> tensor<?x2x?x64xf32>
  bufferization.materialize_in_destination %r in writable %o : (tensor<?x2x?x64xf32>, memref<?x2x?x64xf32>) -> ()
  return
}
)";

//===----------------------------------------------------------------------===//
// Tensor-core and async-copy ops
//===----------------------------------------------------------------------===//

/// Fills a 16x16 f16 shared tile with value(r, c) = r * 16 + c (exact in
/// f16) from one warp: lane l writes row l / 2, columns 8 (l % 2) .. + 7.
const char *fillTile = R"(
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %l = gpu.lane_id
    %r = arith.divui %l, %c2 : index
    %h = arith.remui %l, %c2 : index
    %c0 = arith.muli %h, %c8 : index
    %r16 = arith.muli %r, %c16 : index
    %base = arith.addi %r16, %c0 : index
    %bi = arith.index_cast %base : index to i32
    %bf = arith.sitofp %bi : i32 to f16
    %iota = arith.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]> : vector<8xf16>
    %bv = vector.broadcast %bf : f16 to vector<8xf16>
    %vals = arith.addf %bv, %iota : vector<8xf16>
    %s = memref.get_global @tile : memref<16x16xf16, #gpu.address_space<workgroup>>
    vector.store %vals, %s[%r, %c0] {alignment = 16 : i64} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<8xf16>
    gpu.barrier
)";

const char *tileGlobal = "memref.global \"private\" @tile : "
                         "memref<16x16xf16, #gpu.address_space<workgroup>> "
                         "{alignment = 16 : i64}";

TEST_F(InterpreterTest, LdMatrixFollowsThePTXFragmentLayout) {
  // x4, A-operand addresses (row = lane % 16, col = (lane / 16) * 8): lane
  // l gets a_e = tile[g + 8 ((e / 2) % 2)][2t + e % 2 + 8 (e / 4)] with g =
  // l / 4, t = l % 4; x2.trans with rows k = lane % 16, col 0: lane l gets
  // b_e = tile[2t + e % 2 + 8 (e / 2)][g] (the B operand of a column-major
  // tile). out[l * 12 + e]: the 8 values of x4 then the 4 of x2.trans.
  std::string body = std::string(fillTile) + R"(
    %c12 = arith.constant 12 : index
    %ar = arith.remui %l, %c16 : index
    %aq = arith.divui %l, %c16 : index
    %ac = arith.muli %aq, %c8 : index
    %a = nvgpu.ldmatrix %s[%ar, %ac] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    %z = arith.constant 0 : index
    %b = nvgpu.ldmatrix %s[%ar, %z] {numTiles = 2 : i32, transpose = true} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
    %af = arith.extf %a : vector<4x2xf16> to vector<4x2xf32>
    %bf2 = arith.extf %b : vector<2x2xf16> to vector<2x2xf32>
    %a1 = vector.shape_cast %af : vector<4x2xf32> to vector<8xf32>
    %b1 = vector.shape_cast %bf2 : vector<2x2xf32> to vector<4xf32>
    %o = arith.muli %l, %c12 : index
    vector.store %a1, %out[%o] : memref<384xf32>, vector<8xf32>
    %o8 = arith.addi %o, %c8 : index
    vector.store %b1, %out[%o8] : memref<384xf32>, vector<4xf32>)";
  std::vector<float> out(384, -1.0f);
  InterpreterOptions options;
  options.checkRaces = true;
  ASSERT_TRUE(succeeded(
      run(tileGlobal, "memref<384xf32>", body, 32, out.data(), 384, options)))
      << allDiags();
  for (int l = 0; l < 32; ++l) {
    int g = l / 4, t = l % 4;
    for (int e = 0; e < 8; ++e)
      EXPECT_EQ(out[l * 12 + e],
                16 * (g + 8 * ((e / 2) % 2)) + 2 * t + e % 2 + 8 * (e / 4))
          << "lane " << l << " a" << e;
    for (int e = 0; e < 4; ++e)
      EXPECT_EQ(out[l * 12 + 8 + e], 16 * (2 * t + e % 2 + 8 * (e / 2)) + g)
          << "lane " << l << " b" << e;
  }
}

/// Stores the m16n8 accumulator %d of every lane to out[16 x 8] row-major
/// (lane l holds rows l/4 and l/4 + 8, columns 2 (l%4) and 2 (l%4) + 1).
static const char *storeAccumulator = R"(
    %c4 = arith.constant 4 : index
    %g = arith.divui %l, %c4 : index
    %t = arith.remui %l, %c4 : index
    %t2 = arith.muli %t, %c2 : index
    %g8 = arith.muli %g, %c8 : index
    %o0 = arith.addi %g8, %t2 : index
    %c64 = arith.constant 64 : index
    %o1 = arith.addi %o0, %c64 : index
    %d0 = vector.extract %d[0] : vector<2xf32> from vector<2x2xf32>
    %d1 = vector.extract %d[1] : vector<2xf32> from vector<2x2xf32>
    vector.store %d0, %out[%o0] : memref<128xf32>, vector<2xf32>
    vector.store %d1, %out[%o1] : memref<128xf32>, vector<2xf32>)";

TEST_F(InterpreterTest, MmaSyncComputesTheMatrixProduct) {
  // A = tile (16x16, row-major), B[k][n] = tile[k][n] for n < 8 (loaded with
  // ldmatrix.trans), C[i][j] = 0.5: D = A B + C, scattered from the
  // accumulator layout (c_e: row g + 8 (e / 2), col 2t + e % 2) into
  // out[16 * row + col]... as a 16x8 row-major matrix.
  std::string body = std::string(fillTile) + R"(
    %ar = arith.remui %l, %c16 : index
    %aq = arith.divui %l, %c16 : index
    %ac = arith.muli %aq, %c8 : index
    %a = nvgpu.ldmatrix %s[%ar, %ac] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
    %z = arith.constant 0 : index
    %b = nvgpu.ldmatrix %s[%ar, %z] {numTiles = 2 : i32, transpose = true} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
    %cc = arith.constant dense<0.5> : vector<2x2xf32>
    %d = nvgpu.mma.sync (%a, %b, %cc) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
)" + std::string(storeAccumulator);
  std::vector<float> out(128, -1.0f);
  ASSERT_TRUE(
      succeeded(run(tileGlobal, "memref<128xf32>", body, 32, out.data(), 128)))
      << allDiags();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double acc = 0.5;
      for (int k = 0; k < 16; ++k)
        acc += (16.0 * i + k) * (16.0 * k + j);
      EXPECT_EQ(out[8 * i + j], static_cast<float>(acc)) << i << ", " << j;
    }
}

TEST_F(InterpreterTest, MmaSyncM16N8K8) {
  // m16n8k8: A = tile[:, 0:8] (ldmatrix x2: a0,a1 row g, a2,a3 row g + 8,
  // cols 2t, 2t + 1), B[k][n] = tile[k][n] for k, n < 8 (ldmatrix x1.trans:
  // b0,b1 k = 2t, 2t + 1, col g), C = 0.
  std::string body = std::string(fillTile) + R"(
    %ar = arith.remui %l, %c16 : index
    %z = arith.constant 0 : index
    %a = nvgpu.ldmatrix %s[%ar, %z] {numTiles = 2 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
    %b = nvgpu.ldmatrix %s[%ar, %z] {numTiles = 1 : i32, transpose = true} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<1x2xf16>
    %cc = arith.constant dense<0.0> : vector<2x2xf32>
    %d = nvgpu.mma.sync (%a, %b, %cc) {mmaShape = [16, 8, 8]} : (vector<2x2xf16>, vector<1x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
)" + std::string(storeAccumulator);
  std::vector<float> out(128, -1.0f);
  ASSERT_TRUE(
      succeeded(run(tileGlobal, "memref<128xf32>", body, 32, out.data(), 128)))
      << allDiags();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double acc = 0;
      for (int k = 0; k < 8; ++k)
        acc += (16.0 * i + k) * (16.0 * k + j);
      EXPECT_EQ(out[8 * i + j], static_cast<float>(acc)) << i << ", " << j;
    }
}

TEST_F(InterpreterTest, AsyncCopiesArePendingUntilTheirGroupIsWaited) {
  // Thread t copies out[4t .. 4t + 1] (srcElements 2 of 4: the rest is
  // zero-filled) to shared s[4t ..]; after the wait it reads its own copy
  // back into out[128 + 4t ..].
  const char *globals = "memref.global \"private\" @s : memref<128xf32, "
                        "#gpu.address_space<workgroup>> {alignment = 16 : "
                        "i64}";
  auto body = [](StringRef betweenCopyAndRead) {
    return (R"(
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c128 = arith.constant 128 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c4 : index
    %s = memref.get_global @s : memref<128xf32, #gpu.address_space<workgroup>>
    %tok = nvgpu.device_async_copy %out[%i], %s[%i], 4, %c2 {bypassL1} : memref<256xf32> to memref<128xf32, #gpu.address_space<workgroup>>
    %g = nvgpu.device_async_create_group %tok
    %e = nvgpu.device_async_create_group
)" + betweenCopyAndRead +
            R"(
    %v = vector.load %s[%i] : memref<128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    %o = arith.addi %i, %c128 : index
    vector.store %v, %out[%o] : memref<256xf32>, vector<4xf32>)")
        .str();
  };
  InterpreterOptions options;
  options.checkRaces = true;
  // wait 1 leaves the empty second group pending: the copy is complete.
  std::vector<float> out(256);
  for (int i = 0; i < 256; ++i)
    out[i] = static_cast<float>(i);
  ASSERT_TRUE(succeeded(run(globals, "memref<256xf32>",
                            body("    nvgpu.device_async_wait %g "
                                 "{numGroups = 1 : i32}"),
                            32, out.data(), 256, options)))
      << allDiags();
  for (int t = 0; t < 32; ++t)
    for (int e = 0; e < 4; ++e)
      EXPECT_EQ(out[128 + 4 * t + e], e < 2 ? 4.0f * t + e : 0.0f) << t;
  // wait 2 leaves both groups pending: reading the copy is an error naming
  // both ops.
  EXPECT_TRUE(failed(run(globals, "memref<256xf32>",
                         body("    nvgpu.device_async_wait %g "
                              "{numGroups = 2 : i32}"),
                         32, out.data(), 256, options)));
  EXPECT_TRUE(diagContains("'vector.load' op reads @s[0]"));
  EXPECT_TRUE(diagContains("while the 'nvgpu.device_async_copy' of thread 0 "
                           "to it"))
      << allDiags();
  EXPECT_TRUE(diagContains("note: the pending copy")) << allDiags();
  // A barrier does not complete a copy.
  EXPECT_TRUE(failed(run(globals, "memref<256xf32>", body("    gpu.barrier"),
                         32, out.data(), 256, options)));
  EXPECT_TRUE(diagContains("is still pending")) << allDiags();
}

TEST_F(InterpreterTest, CompletedCopiesRaceWithoutABarrier) {
  // Thread t waits for its copy to s[4t ..], then reads s[4 (t ^ 1) ..],
  // which thread t ^ 1 completed in the same barrier interval.
  const char *globals = "memref.global \"private\" @s : memref<128xf32, "
                        "#gpu.address_space<workgroup>> {alignment = 16 : "
                        "i64}";
  const char *body = R"(
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c128 = arith.constant 128 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c4 : index
    %s = memref.get_global @s : memref<128xf32, #gpu.address_space<workgroup>>
    %tok = nvgpu.device_async_copy %out[%i], %s[%i], 4 : memref<256xf32> to memref<128xf32, #gpu.address_space<workgroup>>
    %g = nvgpu.device_async_create_group %tok
    nvgpu.device_async_wait %g
    %n = arith.xori %t, %c1 : index
    %j = arith.muli %n, %c4 : index
    %v = vector.load %s[%j] : memref<128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    %o = arith.addi %i, %c128 : index
    vector.store %v, %out[%o] : memref<256xf32>, vector<4xf32>)";
  std::vector<float> out(256, 1.0f);
  InterpreterOptions options;
  options.checkRaces = true;
  EXPECT_TRUE(failed(
      run(globals, "memref<256xf32>", body, 32, out.data(), 256, options)));
  EXPECT_TRUE(diagContains("wrote in the same barrier interval")) << allDiags();
}

TEST_F(InterpreterTest, CopyNeedsAbsoluteAlignment) {
  // A 16-byte cp.async of out[4t ..] and an aligned vector.store: fine on a
  // 16-byte aligned buffer, an error naming the address on a buffer whose
  // data starts 4 bytes in (element- but not 16-byte aligned, as a view at
  // an offset of a tensor would be; the hardware faults).
  const char *globals = "memref.global \"private\" @s : memref<128xf32, "
                        "#gpu.address_space<workgroup>> {alignment = 16 : "
                        "i64}";
  auto body = [](StringRef store) {
    return (R"(
    %c4 = arith.constant 4 : index
    %c128 = arith.constant 128 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c4 : index
    %s = memref.get_global @s : memref<128xf32, #gpu.address_space<workgroup>>
    %tok = nvgpu.device_async_copy %out[%i], %s[%i], 4 : memref<256xf32> to memref<128xf32, #gpu.address_space<workgroup>>
    %g = nvgpu.device_async_create_group %tok
    nvgpu.device_async_wait %g
    %v = vector.load %s[%i] : memref<128xf32, #gpu.address_space<workgroup>>, vector<4xf32>
    %o = arith.addi %i, %c128 : index
)" + store)
        .str();
  };
  std::string copyOnly =
      body("    vector.store %v, %out[%o] : memref<256xf32>, vector<4xf32>");
  alignas(16) float storage[256 + 4];
  for (float &x : storage)
    x = 1.0f;
  ASSERT_TRUE(succeeded(
      run(globals, "memref<256xf32>", copyOnly, 32, storage, 256)))
      << allDiags();
  float *shifted = storage + 1;
  EXPECT_TRUE(failed(
      run(globals, "memref<256xf32>", copyOnly, 32, shifted, 256)));
  EXPECT_TRUE(diagContains(
      "'nvgpu.device_async_copy' op reads out[0] at address " +
      llvm::formatv("{0:x}", reinterpret_cast<uintptr_t>(shifted)).str() +
      " (byte offset 0), not aligned to the 16-byte copy, in thread 0"))
      << allDiags();
  EXPECT_TRUE(diagContains("which is not 16-byte aligned (a view at an "
                           "offset); the hardware would fault"))
      << allDiags();

  // A vector store with an alignment attribute, absolute too.
  std::string alignedStore = (R"(
    %t = gpu.thread_id x
    %c4 = arith.constant 4 : index
    %i = arith.muli %t, %c4 : index
    %v = arith.constant dense<2.0> : vector<4xf32>
    vector.store %v, %out[%i] {alignment = 16} : memref<256xf32>, vector<4xf32>)");
  ASSERT_TRUE(succeeded(
      run("", "memref<256xf32>", alignedStore, 32, storage, 256)))
      << allDiags();
  EXPECT_TRUE(failed(
      run("", "memref<256xf32>", alignedStore, 32, shifted, 256)));
  EXPECT_TRUE(diagContains("'vector.store' op accesses out[0] at address "))
      << allDiags();
  EXPECT_TRUE(diagContains("not aligned to the 16-byte access")) << allDiags();
}

TEST_F(InterpreterTest, DynamicSharedMemoryViews) {
  // Two f32 views of the launch's dynamic shared memory, the second 512
  // bytes in, and a subview of it; a view past the end is an error.
  const char *src = R"(
module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k(%out: memref<128xf32>) kernel {
    %z = arith.constant 0 : index
    %sh = arith.constant 512 : index
    %c64 = arith.constant 64 : index
    %c127 = arith.constant 127 : index
    %t = gpu.thread_id x
    %d = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %a = memref.view %d[%z][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xf32, #gpu.address_space<workgroup>>
    %b = memref.view %d[%sh][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xf32, #gpu.address_space<workgroup>>
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    memref.store %tf, %b[%t] : memref<128xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %r = arith.subi %c127, %t : index
    %v = memref.load %b[%r] : memref<128xf32, #gpu.address_space<workgroup>>
    %sub = memref.subview %b[64] [64] [1] : memref<128xf32, #gpu.address_space<workgroup>> to memref<64xf32, strided<[1], offset: 64>, #gpu.address_space<workgroup>>
    %q = arith.remui %t, %c64 : index
    %w = memref.load %sub[%q] : memref<64xf32, strided<[1], offset: 64>, #gpu.address_space<workgroup>>
    %x = arith.addf %v, %w : f32
    memref.store %x, %out[%t] : memref<128xf32>
    gpu.return
  }
}
}
)";
  std::vector<float> out(128, -1.0f);
  InterpreterOptions options;
  options.checkRaces = true;
  ASSERT_TRUE(succeeded(runSource(src, out, 128, options, 1024))) << allDiags();
  for (int t = 0; t < 128; ++t)
    EXPECT_EQ(out[t], (127 - t) + (64 + t % 64)) << t;
  // 1000 bytes: the second view (512 + 512 bytes) does not fit.
  EXPECT_TRUE(failed(runSource(src, out, 128, options, 1000)));
  EXPECT_TRUE(diagContains("'memref.view' op views 512 bytes at byte shift "
                           "512 of dynamic shared memory (1000 bytes)"))
      << allDiags();
}

TEST_F(InterpreterTest, VectorDataMovementAndReductions) {
  // Per thread t (x = [t, t+1, ..., t+7] as vector<2x4xf32>):
  //   out[16t + 0..3]  = extract x[1]                  -> t+4 .. t+7
  //   out[16t + 4..7]  = shuffle rows [1, 0] of x, row 0 of the result
  //                      with element 2 replaced by 100 (vector.insert)
  //   out[16t + 8..9]  = extract_strided_slice x[0, 1:3]  -> t+1, t+2
  //   out[16t + 10]    = reduction <maxnumf> of x        -> t+7
  //   out[16t + 11]    = reduction <add> of x, acc 0.5   -> 8t+28.5
  //   out[16t + 12..13] = transpose(x)[3, 0..1]          -> t+3, t+7
  //   out[16t + 14..15] = broadcast(t) : vector<2xf32> + [0.25, 0.5]
  const char *body = R"(
    %c16 = arith.constant 16 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c10 = arith.constant 10 : index
    %c11 = arith.constant 11 : index
    %c12 = arith.constant 12 : index
    %c14 = arith.constant 14 : index
    %t = gpu.thread_id x
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    %iota = arith.constant dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]> : vector<2x4xf32>
    %tb = vector.broadcast %tf : f32 to vector<2x4xf32>
    %x = arith.addf %tb, %iota : vector<2x4xf32>
    %o = arith.muli %t, %c16 : index
    %r1 = vector.extract %x[1] : vector<4xf32> from vector<2x4xf32>
    vector.store %r1, %out[%o] : memref<1024xf32>, vector<4xf32>
    %sw = vector.shuffle %x, %x [1, 0] : vector<2x4xf32>, vector<2x4xf32>
    %hundred = arith.constant 100.0 : f32
    %ins = vector.insert %hundred, %sw[0, 2] : f32 into vector<2x4xf32>
    %row0 = vector.extract %ins[0] : vector<4xf32> from vector<2x4xf32>
    %o4 = arith.addi %o, %c4 : index
    vector.store %row0, %out[%o4] : memref<1024xf32>, vector<4xf32>
    %sl = vector.extract_strided_slice %x {offsets = [0, 1], sizes = [1, 2], strides = [1, 1]} : vector<2x4xf32> to vector<1x2xf32>
    %sl1 = vector.shape_cast %sl : vector<1x2xf32> to vector<2xf32>
    %o8 = arith.addi %o, %c8 : index
    vector.store %sl1, %out[%o8] : memref<1024xf32>, vector<2xf32>
    %flat = vector.shape_cast %x : vector<2x4xf32> to vector<8xf32>
    %mx = vector.reduction <maxnumf>, %flat : vector<8xf32> into f32
    %half = arith.constant 0.5 : f32
    %sum = vector.reduction <add>, %flat, %half : vector<8xf32> into f32
    %o10 = arith.addi %o, %c10 : index
    %o11 = arith.addi %o, %c11 : index
    memref.store %mx, %out[%o10] : memref<1024xf32>
    memref.store %sum, %out[%o11] : memref<1024xf32>
    %tr = vector.transpose %x, [1, 0] : vector<2x4xf32> to vector<4x2xf32>
    %tr3 = vector.extract %tr[3] : vector<2xf32> from vector<4x2xf32>
    %o12 = arith.addi %o, %c12 : index
    vector.store %tr3, %out[%o12] : memref<1024xf32>, vector<2xf32>
    %b2 = vector.broadcast %tf : f32 to vector<2xf32>
    %q = arith.constant dense<[0.25, 0.5]> : vector<2xf32>
    %bq = arith.addf %b2, %q : vector<2xf32>
    %o14 = arith.addi %o, %c14 : index
    vector.store %bq, %out[%o14] : memref<1024xf32>, vector<2xf32>)";
  std::vector<float> out(1024, -1.0f);
  ASSERT_TRUE(
      succeeded(run("", "memref<1024xf32>", body, 64, out.data(), 1024)))
      << allDiags();
  for (int t = 0; t < 64; ++t) {
    const float *o = &out[16 * t];
    float x = static_cast<float>(t);
    std::vector<float> expected = {
        x + 4, x + 5, x + 6, x + 7,         x + 4, x + 5, 100,      x + 7,
        x + 1, x + 2, x + 7, 8 * x + 28.5f, x + 3, x + 7, x + .25f, x + .5f};
    for (int e = 0; e < 16; ++e)
      EXPECT_EQ(o[e], expected[e]) << "thread " << t << " element " << e;
  }
}

TEST_F(InterpreterTest, AffineApplyMinMax) {
  // out[3t] = (t floordiv 4) * 8 + t mod 4 - 2; out[3t + 1] = min(t, 40 - t,
  // 17); out[3t + 2] = max(t ceildiv 3, 5).
  const char *body = R"(
    %c3 = arith.constant 3 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c40 = arith.constant 40 : index
    %t = gpu.thread_id x
    %a = affine.apply affine_map<(d0)[s0] -> ((d0 floordiv 4) * 8 + d0 mod 4 - s0)>(%t)[%c2]
    %b = affine.min affine_map<(d0)[s0] -> (d0, s0 - d0, 17)>(%t)[%c40]
    %c = affine.max affine_map<(d0) -> (d0 ceildiv 3, 5)>(%t)
    %o = arith.muli %t, %c3 : index
    %o1 = arith.addi %o, %c1 : index
    %o2 = arith.addi %o, %c2 : index
    %ai = arith.index_cast %a : index to i64
    %bi = arith.index_cast %b : index to i64
    %ci = arith.index_cast %c : index to i64
    memref.store %ai, %out[%o] : memref<96xi64>
    memref.store %bi, %out[%o1] : memref<96xi64>
    memref.store %ci, %out[%o2] : memref<96xi64>)";
  std::vector<int64_t> out(96, -1);
  ASSERT_TRUE(succeeded(run("", "memref<96xi64>", body, 32, out.data(), 96)))
      << allDiags();
  for (int64_t t = 0; t < 32; ++t) {
    EXPECT_EQ(out[3 * t], (t / 4) * 8 + t % 4 - 2) << t;
    EXPECT_EQ(out[3 * t + 1], std::min({t, 40 - t, int64_t(17)})) << t;
    EXPECT_EQ(out[3 * t + 2], std::max((t + 2) / 3, int64_t(5))) << t;
  }
}

TEST_F(InterpreterTest, UniformUnstructuredControlFlow) {
  // A cf loop whose trip count is uniform (out[t] = t + 3 * 5, with the
  // block arguments swapped on the back edge once), then a cond_br on the
  // thread id: divergent, an error.
  auto src = [](StringRef cond) {
    return (R"(
module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k(%out: memref<64xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c5 = arith.constant 5.0 : f32
    %z = arith.constant 0.0 : f32
    %t = gpu.thread_id x
    cf.br ^loop(%c0, %z, %z : index, f32, f32)
  ^loop(%i: index, %a: f32, %b: f32):
    %a2 = arith.addf %a, %c5 : f32
    %i2 = arith.addi %i, %c1 : index
    %more = arith.cmpi ult, %i2, )" +
            cond + R"( : index
    cf.cond_br %more, ^loop(%i2, %b, %a2 : index, f32, f32), ^done(%a2, %b : f32, f32)
  ^done(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    %r = arith.addf %s, %tf : f32
    memref.store %r, %out[%t] : memref<64xf32>
    gpu.return
  }
}
}
)")
        .str();
  };
  std::vector<float> out(64, -1.0f);
  for (bool divergent : {false, true}) {
    LogicalResult r = runSource(src(divergent ? "%t" : "%c3"), out, 64);
    if (!divergent) {
      ASSERT_TRUE(succeeded(r)) << allDiags();
      for (int t = 0; t < 64; ++t)
        EXPECT_EQ(out[t], 15.0f + t) << t;
    } else {
      EXPECT_TRUE(failed(r));
      EXPECT_TRUE(diagContains("'cf.cond_br' op branches divergently"))
          << allDiags();
    }
  }
}

class MappedAttentionTest : public InterpreterTest {
protected:
  static constexpr int64_t B = 1, H = 2, Nq = 20, Nk = 70, D = 64;

  MappedAttentionTest() {
    module = parseSourceString<ModuleOp>(kAttention, &ctx);
    PassManager pm(&ctx);
    buildMapToGPUPipeline(pm, LowerToNVVMOptions());
    mapped = module && succeeded(pm.run(*module));
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (auto *a : {&q, &k, &v}) {
      a->resize(B * H * (a == &q ? Nq : Nk) * D);
      for (float &x : *a)
        x = normal(rng);
    }
  }

  LogicalResult runMapped(InterpreterOptions options) {
    o.assign(B * H * Nq * D, NAN);
    diags.clear();
    Interpreter interp(*module, options);
    return interp.runHostFunction(
        "attn", {HostMemRef::getDense("Q", q.data(), {B, H, Nq, D}),
                 HostMemRef::getDense("K", k.data(), {B, H, Nk, D}),
                 HostMemRef::getDense("V", v.data(), {B, H, Nk, D}),
                 HostMemRef::getDense("O", o.data(), {B, H, Nq, D})});
  }

  /// Max abs difference of O from a double reference (causal bottom-right).
  double maxError() const {
    double err = 0;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < Nq; ++i) {
        std::vector<double> s(Nk, -INFINITY);
        double m = -INFINITY;
        for (int64_t j = 0; j <= i + (Nk - Nq) && j < Nk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(q[(h * Nq + i) * D + d]) * k[(h * Nk + j) * D + d];
          s[j] = dot / std::sqrt(double(D));
          m = std::max(m, s[j]);
        }
        double l = 0;
        for (double &x : s)
          l += (x = std::exp(x - m));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < Nk; ++j)
            acc += s[j] * v[(h * Nk + j) * D + d];
          err = std::max(err, std::fabs(acc / l - o[(h * Nq + i) * D + d]));
        }
      }
    }
    return err;
  }

  bool mapped = false;
  std::vector<float> q, k, v, o;
};

TEST_F(MappedAttentionTest, MatchesTheReference) {
  ASSERT_TRUE(mapped);
  InterpreterOptions options;
  options.checkRaces = true;
  ASSERT_TRUE(succeeded(runMapped(options))) << allDiags();
  EXPECT_LT(maxError(), 1e-5);
}

TEST_F(MappedAttentionTest, ErasingABarrierIsARace) {
  ASSERT_TRUE(mapped);
  SmallVector<gpu::BarrierOp> barriers;
  module->walk([&](gpu::BarrierOp b) { barriers.push_back(b); });
  ASSERT_GE(barriers.size(), 3u);
  // The barrier between the K/V tile copy and its use.
  barriers[1].erase();
  InterpreterOptions options;
  options.checkRaces = true;
  EXPECT_TRUE(failed(runMapped(options)));
  EXPECT_TRUE(diagContains("race:")) << allDiags();
  EXPECT_TRUE(diagContains("racing accesses")) << allDiags();
}

} // namespace
