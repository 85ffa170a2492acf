//===- WgmmaTest.cpp - Tests of the interpreter's Hopper wgmma ------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// nvvm.wgmma.mma_async and its companions under the interpreter, pinned
// independently of the interpreter's code: the test lays A and B out in a
// byte image of dynamic shared memory from the PTX ISA canonical layouts
// (128-byte swizzle: the 16-byte chunk index, address bits 4-6, XORed with
// the 128-byte row index within the 1024-byte atom, bits 7-9, of the
// absolute shared address), the kernel copies the image to shared memory,
// builds the descriptors with arith from memref.extract_aligned_pointer_as_
// index, runs fence / mma_async / commit / wait and stores the accumulator
// struct through the fragment table; the result is compared with a float64
// matmul. Each error path has its own test.
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestUtils.h"

#include "fa/Interpreter/FloatBits.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::fa;
using llvm::formatv;

namespace {

/// The dynamic shared memory base the tests run with (16-aligned only).
constexpr int64_t kDynBase = 0x410;
/// Byte offsets of the A and B tiles from the first 1024-aligned address.
constexpr int64_t kOffA = 0, kOffB = 8192;

/// A tile of 16-bit elements, 64 wide in K, with `rows` rows of M or N,
/// in a canonical layout of the PTX ISA ("Canonical Layouts", T = 8
/// elements of 16 bytes; W the swizzle width in bytes, 0 for none):
///   K-major, W-byte swizzle: ((8,m),(T,2k)):((W/16 T,SBO),(1,T)): rows of
///     W/2 elements of K W bytes apart, 8-row groups at SBO = 8 W; a tile
///     wider in K than W/2 is column blocks of all its rows, one after the
///     other;
///   K-major, no swizzle: ((8,m),(T,2k)):((1T,SBO),(1,LBO)): 8x8 core
///     matrices of 128 bytes, LBO = 128 between those of K, SBO = 1024
///     between 8-row groups;
///   MN-major, W-byte swizzle: ((T,W/16,m),(8,k)):((1,T,LBO),(W/16 T,SBO)):
///     K rows of W/2 elements of N W bytes apart, 8-row groups at SBO = 8 W,
///     chunks of W/2 elements of N at LBO = 64 W (all 64 K rows);
///   MN-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)): core
///     matrices of 8 K rows of 8 N elements, LBO = 128 between those of K,
///     SBO = 1024 between those of N.
/// The W-byte swizzle XORs address bits 4.. with bits 7.. (W/16 values) of
/// the absolute address.
struct TileLayout {
  int swz = 128;
  bool mn = false;
  int64_t rows = 64;

  int64_t lbo() const {
    if (!swz)
      return 128;
    return mn ? 64 * swz : 16;
  }
  int64_t sbo() const { return swz ? 8 * swz : 1024; }
  /// The unswizzled byte offset of element (mn index, k) from the tile.
  int64_t offset(int64_t x, int64_t k) const {
    if (!mn) {
      if (!swz)
        return (x / 8) * sbo() + (x % 8) * 16 + (k / 8) * lbo() + 2 * (k % 8);
      int64_t e = swz / 2;
      return (k / e) * (rows / 8) * sbo() + (x / 8) * sbo() + (x % 8) * swz +
             2 * (k % e);
    }
    if (!swz)
      return (x / 8) * sbo() + 2 * (x % 8) + (k % 8) * 16 + (k / 8) * lbo();
    int64_t e = swz / 2;
    return (x / e) * lbo() + 2 * (x % e) + (k % 8) * swz + (k / 8) * sbo();
  }
  /// The descriptor start offset of k step ks (k = 16 ks .. 16 ks + 15).
  int64_t stepOffset(int ks) const { return offset(0, 16 * ks); }
  /// The descriptor without its start address.
  uint64_t descConst() const {
    uint64_t mode = swz == 128 ? 1 : swz == 64 ? 2 : swz == 32 ? 3 : 0;
    return (uint64_t(lbo() >> 4) << 16) | (uint64_t(sbo() >> 4) << 32) |
           (mode << 62);
  }
  int64_t swizzle(int64_t a) const {
    if (!swz)
      return a;
    return a ^ (((a >> 7) & (swz / 16 - 1)) << 4);
  }
};

/// How a test kernel is built.
struct WgmmaCase {
  int64_t n = 64;
  bool bf16 = false;
  bool scaleOne = true;
  /// B is MN-major (layoutB = row).
  bool bMN = false;
  /// The swizzle width of both tiles in bytes (128, 64, 32; 0: none).
  int swz = 128;
  /// The k16 step (0..3) of the 64-wide tiles; -1: all four in an scf.for
  /// carrying the accumulator struct.
  int kStep = 0;
  int64_t threads = 128;
  // Mutations (each an error path).
  bool noProxyFence = false, noBarrier = false, noWgFence = false;
  bool readBeforeWait = false, noCommit = false, nonUniformDesc = false;
  bool outside = false, layoutACol = false;
  /// Only threads 0..95 run the mma_async (in an scf.if).
  bool partial = false;
  /// Thread 0 stores into the A tile between the commit and the wait.
  bool writeInFlight = false;
};

uint16_t toBits(double x, bool bf16) {
  return bf16 ? doubleToBFloat16Bits(x) : doubleToHalfBits(x);
}

std::string structType(int64_t n) {
  std::string s = "!llvm.struct<(";
  for (int64_t i = 0; i < n / 2; ++i)
    s += i ? ", f32" : "f32";
  return s + ")>";
}

/// The image size in 16-bit elements: the pad to 1024 plus 24 KiB.
int64_t imageElems() {
  int64_t pad = (1024 - kDynBase % 1024) % 1024;
  return (pad + kOffB + 16384) / 2;
}

std::string buildKernel(const WgmmaCase &c) {
  const int64_t n = c.n, M = imageElems();
  // C and D hold 64 rows per warpgroup (warp w has rows 16w..16w+15).
  const int64_t rows = std::max<int64_t>(64, c.threads / 128 * 64);
  const std::string wg = "#gpu.address_space<workgroup>";
  const std::string st = structType(n);
  const char *ty = c.bf16 ? "bf16" : "f16";
  // The constant parts of the descriptors: LBO >> 4 at bit 16, SBO >> 4 at
  // bit 32, 128B swizzle (1) at bit 62.
  const TileLayout la{c.swz, false, 64}, lb{c.swz, c.bMN, n};
  uint64_t constA = la.descConst(), constB = lb.descConst();
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "module attributes {gpu.container_module} {\ngpu.module @m {\n";
  os << formatv("  gpu.func @k(%img: memref<{0}xi16>, %cin: memref<{1}xf32>, "
                "%out: memref<{1}xf32>) kernel {{\n",
                M, rows * n);
  os << R"(    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %c32 = arith.constant 32 : index
    %c128 = arith.constant 128 : index
    %t = gpu.thread_id x
    %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
)";
  os << formatv("    %cM = arith.constant {0} : index\n", M);
  os << formatv("    %sm = memref.view %dyn[%c0][] : memref<?xi8, {0}> to "
                "memref<{1}xi16, {0}>\n",
                wg, M);
  os << formatv("    %cT = arith.constant {0} : index\n", c.threads);
  os << formatv("    scf.for %i = %t to %cM step %cT {{\n"
                "      %v = memref.load %img[%i] : memref<{0}xi16>\n"
                "      memref.store %v, %sm[%i] : memref<{0}xi16, {1}>\n"
                "    }\n",
                M, wg);
  if (!c.noProxyFence)
    os << "    nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, "
          "space = #nvvm.shared_space<cta>}\n";
  if (!c.noBarrier)
    os << "    gpu.barrier\n";
  // Descriptor start addresses: the first 1024-aligned address past the
  // view's base, plus the tile offset.
  os << formatv("    %p = memref.extract_aligned_pointer_as_index %sm : "
                "memref<{0}xi16, {1}> -> index\n",
                M, wg);
  os << R"(    %pi = arith.index_cast %p : index to i64
    %c1023 = arith.constant 1023 : i64
    %cm1024 = arith.constant -1024 : i64
    %c4i = arith.constant 4 : i64
    %cmask = arith.constant 16383 : i64
    %pa = arith.addi %pi, %c1023 : i64
    %base = arith.andi %pa, %cm1024 : i64
)";
  os << formatv("    %offA = arith.constant {0} : i64\n", kOffA);
  os << formatv("    %offB = arith.constant {0} : i64\n",
                kOffB + (c.outside ? 0x20000 : 0));
  os << formatv("    %constA = arith.constant {0} : i64\n",
                static_cast<int64_t>(constA));
  os << formatv("    %constB = arith.constant {0} : i64\n",
                static_cast<int64_t>(constB));
  os << "    %tileA = arith.addi %base, %offA : i64\n"
        "    %tileB0 = arith.addi %base, %offB : i64\n";
  if (c.nonUniformDesc)
    os << "    %tw = arith.divui %t, %c128 : index\n"
          "    %tq = arith.remui %t, %c4 : index\n"
          "    %tqi = arith.index_cast %tq : index to i64\n"
          "    %c16i = arith.constant 16 : i64\n"
          "    %tqb = arith.muli %tqi, %c16i : i64\n"
          "    %tileB = arith.addi %tileB0, %tqb : i64\n";
  else
    os << "    %tileB = arith.addi %tileB0, %offA : i64\n";
  // The accumulator: element e = 4i + j of thread t = 32w + l holds
  // C[16w + l/4 + 8(j/2)][8i + 2(l%4) + j%2].
  os << formatv(R"(    %w = arith.divui %t, %c32 : index
    %l = arith.remui %t, %c32 : index
    %w16 = arith.muli %w, %c16 : index
    %g = arith.divui %l, %c4 : index
    %row0 = arith.addi %w16, %g : index
    %q = arith.remui %l, %c4 : index
    %c2 = arith.constant 2 : index
    %colq = arith.muli %q, %c2 : index
    %cn = arith.constant {0} : index
    %rn = arith.muli %row0, %cn : index
    %idx0 = arith.addi %rn, %colq : index
)",
                n);
  for (int64_t e = 0; e < n / 2; ++e) {
    int64_t i = e / 4, j = e % 4;
    int64_t off = 8 * (j / 2) * n + 8 * i + j % 2;
    os << formatv("    %o{0} = arith.constant {1} : index\n"
                  "    %x{0} = arith.addi %idx0, %o{0} : index\n",
                  e, off);
  }
  os << "    %u = llvm.mlir.undef : " << st << "\n";
  std::string prev = "%u";
  for (int64_t e = 0; e < n / 2; ++e) {
    os << formatv("    %ci{0} = memref.load %cin[%x{0}] : memref<{1}xf32>\n"
                  "    %acc{0} = llvm.insertvalue %ci{0}, {2}[{0}] : {3}\n",
                  e, rows * n, prev, st);
    prev = formatv("%acc{0}", e).str();
  }
  std::string init = prev;
  auto mma = [&](StringRef acc, StringRef dA, StringRef dB, StringRef res) {
    std::string r;
    llvm::raw_string_ostream o(r);
    if (!c.noWgFence)
      o << "      nvvm.wgmma.fence.aligned\n";
    o << formatv("      {0} = nvvm.wgmma.mma_async {1}, {2}, {3}, "
                 "#nvvm.shape<m = 64, n = {4}, k = 16>, D [<f32>, "
                 "#nvvm.wgmma_scale_out<{5}>], A [<{6}>, "
                 "#nvvm.wgmma_scale_in<one>, #nvvm.mma_layout<{7}>], B "
                 "[<{6}>, #nvvm.wgmma_scale_in<one>, #nvvm.mma_layout<{8}>] "
                 ": {9} -> {9}\n",
                 res, dA, dB, acc, n, c.scaleOne ? "one" : "zero", ty,
                 c.layoutACol ? "col" : "row", c.bMN ? "row" : "col", st);
    if (!c.noCommit)
      o << "      nvvm.wgmma.commit.group.sync.aligned\n";
    return r;
  };
  // The descriptors %dA<sfx> and %dB<sfx> (i64): the tile starts advanced
  // by the byte offsets %kbA<sfx> and %kbB<sfx>.
  auto descs = [&](StringRef sfx) {
    return formatv("      %sA{0} = arith.addi %tileA, %kbA{0} : i64\n"
                   "      %sB{0} = arith.addi %tileB, %kbB{0} : i64\n"
                   "      %eA{0} = arith.shrui %sA{0}, %c4i : i64\n"
                   "      %eB{0} = arith.shrui %sB{0}, %c4i : i64\n"
                   "      %mA{0} = arith.andi %eA{0}, %cmask : i64\n"
                   "      %mB{0} = arith.andi %eB{0}, %cmask : i64\n"
                   "      %dA{0} = arith.ori %mA{0}, %constA : i64\n"
                   "      %dB{0} = arith.ori %mB{0}, %constB : i64\n",
                   sfx)
        .str();
  };
  std::string result;
  if (c.kStep < 0) {
    // Linear k steps: 128-byte swizzle only.
    assert(c.swz == 128 && "the scf.for case needs the 128-byte swizzle");
    os << formatv("    %c0i = arith.constant 0 : i64\n"
                  "    %r = scf.for %s = %c0 to %c4 step %c1 iter_args(%a = "
                  "{0}) -> ({1}) {{\n"
                  "      %si = arith.index_cast %s : index to i64\n",
                  init, st);
    // k step %s: A start + 32 s; B start + 32 s (K-major) or + 2 SBO s
    // (MN-major).
    os << formatv("      %c32iL = arith.constant 32 : i64\n"
                  "      %kbAL = arith.muli %si, %c32iL : i64\n"
                  "      %cbsL = arith.constant {0} : i64\n"
                  "      %kbBL = arith.muli %si, %cbsL : i64\n",
                  lb.stepOffset(1));
    os << descs("L");
    os << mma("%a", "%dAL", "%dBL", "%d");
    os << "      nvvm.wgmma.wait.group.sync.aligned 0\n";
    os << "      scf.yield %d : " << st << "\n    }\n";
    result = "%r";
  } else {
    // The start offsets of the k step, from the layouts.
    os << formatv("    %kbAS = arith.constant {0} : i64\n"
                  "    %kbBS = arith.constant {1} : i64\n",
                  la.stepOffset(c.kStep), lb.stepOffset(c.kStep));
    os << descs("S");
    if (c.partial) {
      os << "    %c96 = arith.constant 96 : index\n"
            "    %lt = arith.cmpi ult, %t, %c96 : index\n"
            "    %r = scf.if %lt -> ("
         << st << ") {\n";
      os << mma(init, "%dAS", "%dBS", "%rr");
      os << "      scf.yield %rr : " << st << "\n    } else {\n"
         << "      scf.yield " << init << " : " << st << "\n    }\n";
    } else {
      os << mma(init, "%dAS", "%dBS", "%r");
    }
    if (c.writeInFlight) {
      // Element 0 of A: the tile starts at the first 1024-aligned address.
      int64_t elem = ((kDynBase + 1023) / 1024 * 1024 - kDynBase) / 2;
      os << formatv("    %is0 = arith.cmpi eq, %t, %c0 : index\n"
                    "    scf.if %is0 {{\n"
                    "      %ce = arith.constant {0} : index\n"
                    "      %zz = arith.constant 0 : i16\n"
                    "      memref.store %zz, %sm[%ce] : memref<{1}xi16, {2}>\n"
                    "    }\n",
                    elem, M, wg);
    }
    if (!c.readBeforeWait)
      os << "    nvvm.wgmma.wait.group.sync.aligned 0\n";
    result = "%r";
  }
  for (int64_t e = 0; e < n / 2; ++e)
    os << formatv("    %v{0} = llvm.extractvalue {1}[{0}] : {2}\n"
                  "    memref.store %v{0}, %out[%x{0}] : memref<{3}xf32>\n",
                  e, result, st, rows * n);
  if (c.readBeforeWait)
    os << "    nvvm.wgmma.wait.group.sync.aligned 0\n";
  os << "    gpu.return\n  }\n}\n}\n";
  return s;
}

class WgmmaTest : public test::InterpreterFixture {
protected:
  /// Builds and runs case `c` on random A (64x64), B (64 x N, K x N) and C;
  /// `expect` gets the float64 reference of the case.
  LogicalResult run(const WgmmaCase &c, std::vector<float> &out,
                    std::vector<double> &expect, uint64_t seed = 1) {
    const int64_t n = c.n, M = imageElems();
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> small(-12, 12);
    // Multiples of 1/4 up to 3: exact in f16 and bf16; every product and sum
    // is exact in f32, so the result must equal the float64 reference.
    const int64_t rows = std::max<int64_t>(64, c.threads / 128 * 64);
    std::vector<double> A(64 * 64), B(64 * n), C(rows * n);
    for (double &x : A)
      x = small(rng) / 4.0;
    for (double &x : B)
      x = small(rng) / 4.0;
    for (double &x : C)
      x = small(rng) / 8.0;
    // The image of dynamic shared memory.
    std::vector<uint16_t> img(M, 0);
    const TileLayout la{c.swz, false, 64}, lb{c.swz, c.bMN, n};
    const int64_t tile = (kDynBase + 1023) / 1024 * 1024;
    auto put = [&](int64_t unswizzled, double v) {
      int64_t phys = la.swizzle(unswizzled) - kDynBase;
      ASSERT_GE(phys, 0);
      ASSERT_LT(phys / 2, M);
      img[phys / 2] = toBits(v, c.bf16);
    };
    // A: K-major, row r of 64 elements of K in 128 bytes, 8-row groups at
    // SBO.
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t k = 0; k < 64; ++k)
        put(tile + kOffA + la.offset(r, k), A[r * 64 + k]);
    for (int64_t k = 0; k < 64; ++k)
      for (int64_t j = 0; j < n; ++j) {
        double v = B[k * n + j];
        put(tile + kOffB + lb.offset(j, k), v);
      }
    // The float64 reference.
    // Every warpgroup multiplies the same A and B (its own C).
    expect.assign(rows * n, 0.0);
    int k0 = c.kStep < 0 ? 0 : 16 * c.kStep, k1 = c.kStep < 0 ? 64 : k0 + 16;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = c.scaleOne ? C[i * n + j] : 0.0;
        for (int k = k0; k < k1; ++k)
          acc += A[(i % 64) * 64 + k] * B[k * n + j];
        expect[i * n + j] = acc;
      }

    diags.clear();
    Operation *kernel = parseKernel(buildKernel(c));
    if (!module)
      return failure();
    std::vector<float> cin(C.begin(), C.end());
    out.assign(rows * n, -12345.0f);
    InterpreterOptions options;
    options.checkRaces = true;
    options.dynamicSharedBase = kDynBase;
    SmallVector<HostMemRef> args = {
        HostMemRef::getDense("img", img.data(), {M}),
        HostMemRef::getDense("cin", cin.data(), {rows * n}),
        HostMemRef::getDense("out", out.data(), {rows * n})};
    return runKernel(kernel, c.threads, args, options, 1, 2 * M);
  }

  /// Runs `c` and expects the float64 reference exactly.
  void expectProduct(const WgmmaCase &c) {
    std::vector<float> out;
    std::vector<double> expect;
    ASSERT_TRUE(succeeded(run(c, out, expect))) << allDiags();
    int bad = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(out.size()) && bad < 10; ++i)
      if (static_cast<double>(out[i]) != expect[i]) {
        ++bad;
        ADD_FAILURE() << "D[" << i / c.n << "][" << i % c.n << "] = " << out[i]
                      << ", expected " << expect[i];
      }
  }

  /// Runs the default case with the mutation `flag` set and expects failure
  /// with `needle` reported.
  void expectError(bool WgmmaCase::*flag, StringRef needle) {
    WgmmaCase c;
    c.*flag = true;
    std::vector<float> out;
    std::vector<double> expect;
    EXPECT_TRUE(failed(run(c, out, expect)));
    EXPECT_TRUE(diagContains(needle)) << allDiags();
  }
};

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

TEST_F(WgmmaTest, M64N8K16F16KMajor) {
  WgmmaCase c;
  c.n = 8;
  expectProduct(c);
}

TEST_F(WgmmaTest, M64N64K16F16KMajorScaleZero) {
  WgmmaCase c;
  c.scaleOne = false;
  expectProduct(c);
}

TEST_F(WgmmaTest, M64N128K16BF16KMajor) {
  WgmmaCase c;
  c.n = 128;
  c.bf16 = true;
  expectProduct(c);
}

TEST_F(WgmmaTest, M64N64K16F16MNMajor) {
  WgmmaCase c;
  c.bMN = true;
  expectProduct(c);
}

TEST_F(WgmmaTest, M64N128K16BF16MNMajorScaleZero) {
  // N = 128: two 64-column chunks of B at LBO.
  WgmmaCase c;
  c.n = 128;
  c.bf16 = true;
  c.bMN = true;
  c.scaleOne = false;
  expectProduct(c);
}

TEST_F(WgmmaTest, KStepsAdvanceTheStartInsideTheSwizzledRow) {
  // k step 1 and 3: A start + 32 and + 96 bytes inside its 128-byte rows;
  // B start + 32 ks (K-major) or + 2 SBO ks (MN-major).
  for (int ks : {1, 3})
    for (bool mn : {false, true}) {
      WgmmaCase c;
      c.kStep = ks;
      c.bMN = mn;
      c.n = mn ? 128 : 64;
      SCOPED_TRACE(formatv("k step {0}, MN-major {1}", ks, mn).str());
      expectProduct(c);
    }
}

TEST_F(WgmmaTest, SwizzleModes64B32BAndNone) {
  // The other swizzle modes (and the no-swizzle layouts, where LBO is the
  // K stride of K-major and the K stride of MN-major core matrices), both B
  // layouts, k steps 0 and 3.
  for (int swz : {64, 32, 0})
    for (bool mn : {false, true})
      for (int ks : {0, 3}) {
        WgmmaCase c;
        c.swz = swz;
        c.bMN = mn;
        c.kStep = ks;
        c.n = mn ? 128 : 64;
        SCOPED_TRACE(
            formatv("swizzle {0}B, MN-major {1}, k step {2}", swz, mn, ks)
                .str());
        expectProduct(c);
      }
}

TEST_F(WgmmaTest, AccumulatorStructThroughScfFor) {
  // Four k steps in an scf.for whose iter_arg is the accumulator struct:
  // D = C + A (64x64) B (64xN).
  for (bool mn : {false, true}) {
    WgmmaCase c;
    c.kStep = -1;
    c.bMN = mn;
    c.bf16 = mn;
    SCOPED_TRACE(mn ? "MN-major" : "K-major");
    expectProduct(c);
  }
}

TEST_F(WgmmaTest, TwoWarpgroups) {
  // 256 threads: warpgroup 1 (warps 4..7) accumulates rows 64..127 of C and
  // D (its fragment rows 16w + ...) with the same A and B.
  WgmmaCase c;
  c.threads = 256;
  c.bMN = true;
  expectProduct(c);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(WgmmaTest, MissingFenceProxyIsAnError) {
  expectError(&WgmmaCase::noProxyFence, "through the async proxy, but thread");
  EXPECT_TRUE(diagContains("ran no nvvm.fence.proxy")) << allDiags();
}

TEST_F(WgmmaTest, FenceProxyWithoutABarrierIsAnError) {
  expectError(&WgmmaCase::noBarrier,
              "no barrier followed its nvvm.fence.proxy");
}

TEST_F(WgmmaTest, MissingWgmmaFenceIsAnError) {
  expectError(&WgmmaCase::noWgFence,
              "without a nvvm.wgmma.fence.aligned since its last");
}

TEST_F(WgmmaTest, ReadingTheResultBeforeTheWaitIsAnError) {
  expectError(&WgmmaCase::readBeforeWait,
              "'llvm.extractvalue' op reads a result of the "
              "'nvvm.wgmma.mma_async'");
  EXPECT_TRUE(diagContains("its group is still pending")) << allDiags();
}

TEST_F(WgmmaTest, ReadingAnUncommittedResultIsAnError) {
  expectError(&WgmmaCase::noCommit, "the mma_async is not even committed");
}

TEST_F(WgmmaTest, WritingSharedMemoryAWgmmaReadsInFlightIsAnError) {
  expectError(&WgmmaCase::writeInFlight,
              "while the 'nvvm.wgmma.mma_async' of warpgroup 0 that reads "
              "it is in flight");
}

TEST_F(WgmmaTest, DescriptorsMustBeUniform) {
  expectError(&WgmmaCase::nonUniformDesc, "has descriptor B");
  EXPECT_TRUE(diagContains("a wgmma descriptor must be the same in the 128 "
                           "threads"))
      << allDiags();
}

TEST_F(WgmmaTest, AddressOutsideSharedMemoryIsAnError) {
  expectError(&WgmmaCase::outside,
              "outside every shared allocation of the block (dynamic "
              "shared memory at [0x410,");
}

TEST_F(WgmmaTest, PartialWarpgroupIsAnError) {
  // Threads 0..95 only (three warps of the warpgroup).
  expectError(&WgmmaCase::partial,
              "while thread 96 (warp 3) of its warpgroup (threads 0..127, "
              "warps 0..3) is inactive");
}

TEST_F(WgmmaTest, IncompleteWarpgroupIsAnError) {
  // 160 threads: the second warpgroup has one warp.
  const char *src = R"(
module attributes {gpu.container_module} {
gpu.module @m {
  gpu.func @k(%out: memref<1xf32>) kernel {
    nvvm.wgmma.fence.aligned
    gpu.return
  }
}
}
)";
  std::vector<float> out(1, 0.0f);
  EXPECT_TRUE(failed(runSource(src, out, 160)));
  EXPECT_TRUE(diagContains("while thread 160 (warp 5) of its warpgroup "
                           "(threads 128..255, warps 4..7) is missing"))
      << allDiags();
  diags.clear();
  EXPECT_TRUE(succeeded(runSource(src, out, 256))) << allDiags();
}

TEST_F(WgmmaTest, LayoutAColIsUnsupported) {
  expectError(&WgmmaCase::layoutACol, "layoutA must be row");
}

//===----------------------------------------------------------------------===//
// Shared addresses and struct values
//===----------------------------------------------------------------------===//

TEST_F(WgmmaTest, SharedWindowAddressesAndStructValues) {
  // out[0..3]: addresses of a static global, the dynamic base, a view 256
  // bytes in (memref.view moves the aligned pointer) and a subview of it
  // (which does not); out[4..]: struct fields through insertvalue, scf.if
  // and extractvalue.
  const char *src = R"(
module attributes {gpu.container_module} {
gpu.module @m {
  memref.global "private" @g : memref<100xf32, #gpu.address_space<workgroup>>
  gpu.func @k(%out: memref<8xi64>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %t = gpu.thread_id x
    %g = memref.get_global @g : memref<100xf32, #gpu.address_space<workgroup>>
    %d = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %v = memref.view %d[%c256][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
    %s = memref.subview %v[8] [8] [1] : memref<64xf32, #gpu.address_space<workgroup>> to memref<8xf32, strided<[1], offset: 8>, #gpu.address_space<workgroup>>
    %pg = memref.extract_aligned_pointer_as_index %g : memref<100xf32, #gpu.address_space<workgroup>> -> index
    %pd = memref.extract_aligned_pointer_as_index %d : memref<?xi8, #gpu.address_space<workgroup>> -> index
    %pv = memref.extract_aligned_pointer_as_index %v : memref<64xf32, #gpu.address_space<workgroup>> -> index
    %ps = memref.extract_aligned_pointer_as_index %s : memref<8xf32, strided<[1], offset: 8>, #gpu.address_space<workgroup>> -> index
    %is0 = arith.cmpi eq, %t, %c0 : index
    scf.if %is0 {
      %a0 = arith.index_cast %pg : index to i64
      %a1 = arith.index_cast %pd : index to i64
      %a2 = arith.index_cast %pv : index to i64
      %a3 = arith.index_cast %ps : index to i64
      memref.store %a0, %out[%c0] : memref<8xi64>
      memref.store %a1, %out[%c1] : memref<8xi64>
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      memref.store %a2, %out[%c2] : memref<8xi64>
      memref.store %a3, %out[%c3] : memref<8xi64>
      %z = llvm.mlir.zero : !llvm.struct<(i64, i64)>
      %seven = arith.constant 7 : i64
      %nine = arith.constant 9 : i64
      %s1 = llvm.insertvalue %seven, %z[1] : !llvm.struct<(i64, i64)>
      %true = arith.constant true
      %s2 = scf.if %true -> (!llvm.struct<(i64, i64)>) {
        %s3 = llvm.insertvalue %nine, %s1[0] : !llvm.struct<(i64, i64)>
        scf.yield %s3 : !llvm.struct<(i64, i64)>
      } else {
        scf.yield %s1 : !llvm.struct<(i64, i64)>
      }
      %e0 = llvm.extractvalue %s2[0] : !llvm.struct<(i64, i64)>
      %e1 = llvm.extractvalue %s2[1] : !llvm.struct<(i64, i64)>
      %e2 = llvm.extractvalue %z[0] : !llvm.struct<(i64, i64)>
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      %c6 = arith.constant 6 : index
      memref.store %e0, %out[%c4] : memref<8xi64>
      memref.store %e1, %out[%c5] : memref<8xi64>
      memref.store %e2, %out[%c6] : memref<8xi64>
    }
    gpu.return
  }
}
}
)";
  std::vector<int64_t> out(8, -1);
  ASSERT_TRUE(succeeded(runSource(src, out, 32, {}, 4096))) << allDiags();
  // The static global at 0x10 (400 bytes), the dynamic base at 0x410.
  EXPECT_EQ(out[0], 0x10);
  EXPECT_EQ(out[1], 0x410);
  EXPECT_EQ(out[2], 0x410 + 256);
  EXPECT_EQ(out[3], 0x410 + 256);
  EXPECT_EQ(out[4], 9);
  EXPECT_EQ(out[5], 7);
  EXPECT_EQ(out[6], 0);
}

TEST_F(WgmmaTest, NamedBarrierOfOneWarpgroup) {
  // Warpgroup 1 (threads 128..255) synchronizes on barrier 1 alone: thread
  // 128 + i writes s[i], the barrier, thread 255 - i reads it. With a count
  // of 64 (or reached by only part of the warpgroup) it is an error.
  auto source = [](int count, int limit) {
    return formatv(R"(
module attributes {{gpu.container_module} {{
gpu.module @m {{
  memref.global "private" @s : memref<128xf32, #gpu.address_space<workgroup>>
  gpu.func @k(%out: memref<256xf32>) kernel {{
    %c128 = arith.constant 128 : index
    %c255 = arith.constant 255 : index
    %climit = arith.constant {1} : index
    %id = arith.constant 1 : i32
    %n = arith.constant {0} : i32
    %t = gpu.thread_id x
    %s = memref.get_global @s : memref<128xf32, #gpu.address_space<workgroup>>
    %hi = arith.cmpi uge, %t, %c128 : index
    %lo = arith.cmpi ult, %t, %climit : index
    %in = arith.andi %hi, %lo : i1
    scf.if %in {{
      %i = arith.subi %t, %c128 : index
      %ti = arith.index_cast %t : index to i32
      %tf = arith.sitofp %ti : i32 to f32
      memref.store %tf, %s[%i] : memref<128xf32, #gpu.address_space<workgroup>>
      nvvm.barrier id = %id number_of_threads = %n
      %j = arith.subi %c255, %t : index
      %v = memref.load %s[%j] : memref<128xf32, #gpu.address_space<workgroup>>
      memref.store %v, %out[%t] : memref<256xf32>
    }
    gpu.return
  }
}
}
)",
                   count, limit)
        .str();
  };
  auto runIt = [&](int count, int limit, std::vector<float> &out) {
    out.assign(256, -1.0f);
    InterpreterOptions options;
    options.checkRaces = true;
    return runSource(source(count, limit), out, 256, options);
  };
  std::vector<float> out;
  ASSERT_TRUE(succeeded(runIt(128, 256, out))) << allDiags();
  for (int t = 128; t < 256; ++t)
    EXPECT_EQ(out[t], 128 + (255 - t)) << t;
  diags.clear();
  EXPECT_TRUE(failed(runIt(64, 256, out)));
  EXPECT_TRUE(diagContains("barrier 1 expects 64 threads but is reached by "
                           "128 together"))
      << allDiags();
  diags.clear();
  EXPECT_TRUE(failed(runIt(128, 224, out)));
  EXPECT_TRUE(diagContains("barrier 1 expects 128 threads but is reached by "
                           "96 together"))
      << allDiags();
}

} // namespace
