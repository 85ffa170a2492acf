//===- CpuBackendTest.cpp - fa-compile CPU artifacts run by FARuntime -----===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Loads the artifacts the build compiled with `fa-compile --target cpu`
// (FA_TEST_ARTIFACT_DIR), runs them on random data and compares against a
// float64 reference written here with naive loops (no code shared with the
// kernels). Outputs are poisoned with NaN first, so an element the kernel
// forgets to write fails. Also checks argument validation and the CPU
// artifact checks.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtils.h"

#include "fa/Runtime/FARuntime.h"
#include "fa/Runtime/FARuntime.hpp"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace fa::runtime;
using namespace fa::runtime::test;
using ::testing::HasSubstr;
namespace json = llvm::json;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::string artifact(llvm::StringRef name) {
  return (llvm::Twine(FA_TEST_ARTIFACT_DIR) + "/" + name + ".json").str();
}

//===----------------------------------------------------------------------===//
// Element encodings (independent of the kernels)
//===----------------------------------------------------------------------===//

double halfToDouble(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double value;
  if (exponent == 0)
    value = std::ldexp(mantissa, -24);
  else if (exponent == 31)
    value = mantissa ? std::numeric_limits<double>::quiet_NaN() : kInf;
  else
    value = std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -value : value;
}

/// Encodes a value exactly representable as a normal f16, zero, inf or
/// NaN.
uint16_t doubleToHalfExact(double value) {
  if (std::isnan(value))
    return 0x7e00;
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (value == 0)
    return sign;
  if (std::isinf(value))
    return sign | 0x7c00;
  int exponent = 0;
  double fraction = std::frexp(std::fabs(value), &exponent); // [0.5, 1)
  auto mantissa = static_cast<uint16_t>(std::ldexp(fraction, 11)) & 0x3ff;
  return sign | static_cast<uint16_t>((exponent + 14) << 10) | mantissa;
}

double bf16ToDouble(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// A host buffer of one dtype, read and written as doubles.
class Buffer {
public:
  Buffer(fa_dtype dtype, std::vector<int64_t> sizes)
      : dtype(dtype), sizes(std::move(sizes)) {
    int64_t n = 1;
    for (int64_t s : this->sizes)
      n *= s;
    count = n;
    bytes.assign(std::max<int64_t>(n, 1) * elementSize(), 0);
  }

  int64_t elementSize() const {
    switch (dtype) {
    case FA_DTYPE_F32:
    case FA_DTYPE_I32:
      return 4;
    case FA_DTYPE_F16:
    case FA_DTYPE_BF16:
      return 2;
    default:
      return 1;
    }
  }

  /// Stores `value`, which must be exactly representable.
  void set(int64_t i, double value) {
    char *p = bytes.data() + i * elementSize();
    switch (dtype) {
    case FA_DTYPE_F32: {
      float f = static_cast<float>(value);
      std::memcpy(p, &f, 4);
      break;
    }
    case FA_DTYPE_F16: {
      uint16_t h = doubleToHalfExact(value);
      std::memcpy(p, &h, 2);
      break;
    }
    case FA_DTYPE_BF16: {
      float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      auto b = static_cast<uint16_t>(bits >> 16);
      std::memcpy(p, &b, 2);
      break;
    }
    case FA_DTYPE_I32: {
      auto v = static_cast<int32_t>(value);
      std::memcpy(p, &v, 4);
      break;
    }
    default:
      *p = static_cast<char>(static_cast<int>(value));
      break;
    }
  }

  double get(int64_t i) const {
    const char *p = bytes.data() + i * elementSize();
    switch (dtype) {
    case FA_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case FA_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return halfToDouble(h);
    }
    case FA_DTYPE_BF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16ToDouble(b);
    }
    case FA_DTYPE_I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default:
      return static_cast<unsigned char>(*p);
    }
  }

  /// Fills with NaN (floats) so unwritten elements show.
  void poison() {
    for (int64_t i = 0; i < count; ++i)
      set(i, std::numeric_limits<double>::quiet_NaN());
  }

  fa_tensor tensor() {
    return fa_tensor_make(bytes.data(), dtype,
                          static_cast<int32_t>(sizes.size()), sizes.data());
  }

  fa_dtype dtype;
  std::vector<int64_t> sizes;
  int64_t count = 0;
  std::vector<char> bytes;
};

/// Random values on a grid every dtype represents exactly: multiples of
/// 2^-10 in [-1, 1] (f32, f16) or of 2^-6 (bf16).
void fillRandom(Buffer &buffer, std::mt19937 &rng) {
  int steps = buffer.dtype == FA_DTYPE_BF16 ? 64 : 1024;
  std::uniform_int_distribution<int> dist(-steps, steps);
  for (int64_t i = 0; i < buffer.count; ++i)
    buffer.set(i, static_cast<double>(dist(rng)) / steps);
}

//===----------------------------------------------------------------------===//
// Reference
//===----------------------------------------------------------------------===//

/// One attention problem; masks are [mB, mH, Nq, Nk].
struct AttentionCase {
  int64_t B = 1, Nq = 1, Nk = 1;
  std::vector<int32_t> lens; ///< empty: the kernel takes none
  int64_t mB = 1, mH = 1;
  std::vector<double> mask; ///< additive values or 0/1 (empty: no mask)
  std::vector<uint8_t> maskBytes;
  /// ALiBi slopes, [Hq] or [B, Hq] as the kernel takes them.
  std::vector<double> alibi;
  /// Segment ids [B, Nq] and [B, Nk].
  std::vector<int32_t> qSeg, kSeg;
};

/// The score of key `j` for query row `i` of (batch `b`, query head `h`)
/// in float64, or -inf when the key is removed, with the score/mask
/// modifiers as fa.attention's description defines them (FlashAttention
/// 2's): off = Nk - Nq for bottom-right, else 0; the window keeps
/// q + off - L <= k <= q + off + R; the chunk keeps (q + off) / C == k / C;
/// segment ids keep equal ids; the scaled score is softcapped, then ALiBi
/// subtracts slope * |q + off - k|, then the additive mask is added.
/// `scaled` (if given) receives the scaled score before the softcap.
double referenceScore(const fa_kernel_info &info,
                      const fa_attention_modifiers &mods,
                      const AttentionCase &c, const Buffer &q, const Buffer &k,
                      int64_t b, int64_t h, int64_t i, int64_t j,
                      double *scaled = nullptr) {
  const int64_t Hq = info.heads, Hkv = info.kv_heads, D = info.head_dim,
                kvh = h / (Hq / Hkv);
  int64_t len = c.Nk;
  if (!c.lens.empty())
    len = std::min<int64_t>(std::max<int64_t>(c.lens[b], 0), c.Nk);
  if (j >= len)
    return -kInf;
  if (info.causal == FA_CAUSAL_TOP_LEFT && j > i)
    return -kInf;
  if (info.causal == FA_CAUSAL_BOTTOM_RIGHT && j > i + c.Nk - c.Nq)
    return -kInf;
  int64_t pos = i + (info.causal == FA_CAUSAL_BOTTOM_RIGHT ? c.Nk - c.Nq : 0);
  if (mods.window_left >= 0 && j < pos - mods.window_left)
    return -kInf;
  if (mods.window_right >= 0 && j > pos + mods.window_right)
    return -kInf;
  auto floorDiv = [](int64_t a, int64_t d) {
    return a >= 0 ? a / d : -((-a + d - 1) / d);
  };
  if (mods.chunk > 0 && floorDiv(pos, mods.chunk) != floorDiv(j, mods.chunk))
    return -kInf;
  if (mods.has_segments && c.qSeg[b * c.Nq + i] != c.kSeg[b * c.Nk + j])
    return -kInf;
  int64_t mi =
      (((c.mB == 1 ? 0 : b) * c.mH + (c.mH == 1 ? 0 : h)) * c.Nq + i) * c.Nk +
      j;
  if (info.mask == FA_MASK_BOOL && c.maskBytes[mi] == 0)
    return -kInf;
  double s = 0;
  for (int64_t d = 0; d < D; ++d)
    s += q.get(((b * Hq + h) * c.Nq + i) * D + d) *
         k.get(((b * Hkv + kvh) * c.Nk + j) * D + d);
  s *= static_cast<double>(info.scale);
  if (scaled)
    *scaled = s;
  if (mods.softcap > 0)
    s = mods.softcap * std::tanh(s / mods.softcap);
  if (mods.alibi != 0) {
    double slope = c.alibi[mods.alibi == 2 ? b * Hq + h : h];
    s -= slope * std::fabs(static_cast<double>(pos - j));
  }
  if (info.mask == FA_MASK_ADDITIVE)
    s += c.mask[mi];
  return s;
}

/// O and LSE by the textbook formula in float64 (referenceScore's scores).
void referenceAttention(const fa_kernel_info &info,
                        const fa_attention_modifiers &mods,
                        const AttentionCase &c, const Buffer &q,
                        const Buffer &k, const Buffer &v,
                        std::vector<double> &o, std::vector<double> &lse) {
  const int64_t Hq = info.heads, Hkv = info.kv_heads, Dv = info.value_head_dim,
                group = Hq / Hkv;
  o.assign(c.B * Hq * c.Nq * Dv, 0.0);
  lse.assign(c.B * Hq * c.Nq, -kInf);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t kvh = h / group;
      for (int64_t i = 0; i < c.Nq; ++i) {
        std::vector<double> scores(c.Nk, -kInf);
        double m = -kInf;
        for (int64_t j = 0; j < c.Nk; ++j) {
          scores[j] = referenceScore(info, mods, c, q, k, b, h, i, j);
          m = std::max(m, scores[j]);
        }
        if (m == -kInf)
          continue; // no attended key: O = 0, LSE = -inf
        double l = 0;
        std::vector<double> acc(Dv, 0.0);
        for (int64_t j = 0; j < c.Nk; ++j) {
          if (scores[j] == -kInf)
            continue;
          double p = std::exp(scores[j] - m);
          l += p;
          for (int64_t d = 0; d < Dv; ++d)
            acc[d] += p * v.get(((b * Hkv + kvh) * c.Nk + j) * Dv + d);
        }
        for (int64_t d = 0; d < Dv; ++d)
          o[((b * Hq + h) * c.Nq + i) * Dv + d] = acc[d] / l;
        lse[(b * Hq + h) * c.Nq + i] = m + std::log(l);
      }
    }
  }
}

/// Whether `got` matches `want` within atol + rtol * |want|; infinities
/// must match exactly.
bool close(double got, double want, double atol, double rtol) {
  if (std::isinf(want))
    return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

/// Runs `c` through the artifact `name` and compares O (and LSE) with the
/// reference. Returns the number of rows with no attended key.
int64_t checkAttention(llvm::StringRef name, const AttentionCase &c,
                       uint32_t seed, double atol, double rtol) {
  Kernel kernel;
  Status status = Kernel::load(artifact(name), FA_DEVICE_CPU, kernel);
  EXPECT_TRUE(status.ok()) << status.toString();
  if (!status.ok())
    return -1;
  fa_kernel_info info = kernel.info();
  fa_attention_modifiers mods{};
  EXPECT_EQ(fa_kernel_get_modifiers(kernel.get(), &mods), FA_SUCCESS);
  const int64_t Hq = info.heads, Hkv = info.kv_heads, D = info.head_dim,
                Dv = info.value_head_dim;
  std::mt19937 rng(seed);
  Buffer q(info.dtype, {c.B, Hq, c.Nq, D});
  Buffer k(info.dtype, {c.B, Hkv, c.Nk, D});
  Buffer v(info.dtype, {c.B, Hkv, c.Nk, Dv});
  fillRandom(q, rng);
  fillRandom(k, rng);
  fillRandom(v, rng);
  Buffer o(info.dtype, {c.B, Hq, c.Nq, Dv});
  Buffer lse(FA_DTYPE_F32, {c.B, Hq, c.Nq});
  o.poison();
  lse.poison();
  Buffer lens(FA_DTYPE_I32, {c.B});
  for (size_t i = 0; i < c.lens.size(); ++i)
    lens.set(i, c.lens[i]);
  Buffer mask(info.mask == FA_MASK_BOOL ? FA_DTYPE_BOOL : FA_DTYPE_F32,
              {c.mB, c.mH, c.Nq, c.Nk});
  if (info.mask == FA_MASK_BOOL)
    for (size_t i = 0; i < c.maskBytes.size(); ++i)
      mask.set(i, c.maskBytes[i]);
  else if (info.mask == FA_MASK_ADDITIVE)
    for (size_t i = 0; i < c.mask.size(); ++i)
      mask.set(i, c.mask[i]);

  AttentionArgs args;
  args.q = q.tensor();
  args.k = k.tensor();
  args.v = v.tensor();
  args.o = o.tensor();
  fa_tensor lensT = lens.tensor(), maskT = mask.tensor(), lseT = lse.tensor();
  if (info.has_kv_lens)
    args.kvLens = &lensT;
  if (info.mask != FA_MASK_NONE)
    args.mask = &maskT;
  if (info.has_lse)
    args.lse = &lseT;
  Buffer alibi(FA_DTYPE_F32, mods.alibi == 2 ? std::vector<int64_t>{c.B, Hq}
                                             : std::vector<int64_t>{Hq});
  Buffer qSeg(FA_DTYPE_I32, {c.B, c.Nq}), kSeg(FA_DTYPE_I32, {c.B, c.Nk});
  for (size_t i = 0; i < c.alibi.size(); ++i)
    alibi.set(i, c.alibi[i]);
  for (size_t i = 0; i < c.qSeg.size(); ++i)
    qSeg.set(i, c.qSeg[i]);
  for (size_t i = 0; i < c.kSeg.size(); ++i)
    kSeg.set(i, c.kSeg[i]);
  fa_tensor alibiT = alibi.tensor(), qSegT = qSeg.tensor(),
            kSegT = kSeg.tensor();
  if (mods.alibi != 0)
    args.extras.alibi = &alibiT;
  if (mods.has_segments) {
    args.extras.q_segments = &qSegT;
    args.extras.k_segments = &kSegT;
  }
  status = kernel.attention(args);
  EXPECT_TRUE(status.ok()) << status.toString();

  std::vector<double> oRef, lseRef;
  referenceAttention(info, mods, c, q, k, v, oRef, lseRef);
  int64_t badO = 0, badLse = 0, emptyRows = 0;
  for (int64_t i = 0; i < o.count; ++i)
    if (!close(o.get(i), oRef[i], atol, rtol) && badO++ < 5)
      ADD_FAILURE() << name.str() << ": O[" << i << "] = " << o.get(i)
                    << ", reference " << oRef[i];
  for (int64_t r = 0; r < lse.count; ++r) {
    if (lseRef[r] == -kInf) {
      ++emptyRows;
      // A row with no attended key: exactly 0 and -inf.
      for (int64_t d = 0; d < Dv; ++d)
        EXPECT_EQ(o.get(r * Dv + d), 0.0) << name.str() << " row " << r;
    }
    if (info.has_lse && !close(lse.get(r), lseRef[r], 1e-4, 1e-4) &&
        badLse++ < 5)
      ADD_FAILURE() << name.str() << ": LSE[" << r << "] = " << lse.get(r)
                    << ", reference " << lseRef[r];
  }
  EXPECT_EQ(badO, 0) << name.str() << ": O elements off";
  EXPECT_EQ(badLse, 0) << name.str() << ": LSE elements off";
  return emptyRows;
}

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

// attn_lens: f32, D = 16, Dv = 8, Hq = 4, Hkv = 2, key lengths, LSE,
// 16x16 tiles. Shapes not multiples of the tiles.
TEST(CpuBackendTest, KeyLengths) {
  AttentionCase c;
  c.B = 3;
  c.Nq = 37;
  c.Nk = 29;
  c.lens = {29, 0, 11};
  int64_t empty = checkAttention("attn_lens", c, 1, 1e-5, 1e-4);
  EXPECT_EQ(empty, 4 * 37); // batch 1: every row
  // Lengths are clamped to [0, Nk].
  c.lens = {100, -3, 1};
  EXPECT_EQ(checkAttention("attn_lens", c, 2, 1e-5, 1e-4), 4 * 37);
}

TEST(CpuBackendTest, NoKeys) {
  AttentionCase c;
  c.B = 2;
  c.Nq = 5;
  c.Nk = 0;
  c.lens = {0, 0};
  EXPECT_EQ(checkAttention("attn_lens", c, 3, 0, 0), 2 * 4 * 5);
}

TEST(CpuBackendTest, QueryOfOne) {
  AttentionCase c;
  c.B = 2;
  c.Nq = 1;
  c.Nk = 70;
  c.lens = {70, 33};
  EXPECT_EQ(checkAttention("attn_lens", c, 4, 1e-5, 1e-4), 0);
}

// attn_causal_br: f32, D = 32, Hq = 2, Hkv = 1, bottom-right causal, LSE.
TEST(CpuBackendTest, CausalBottomRight) {
  AttentionCase c;
  c.B = 2;
  c.Nq = 20;
  c.Nk = 45; // q < k: every row sees at least Nk - Nq + 1 keys
  EXPECT_EQ(checkAttention("attn_causal_br", c, 5, 1e-5, 1e-4), 0);
  c.Nq = 45;
  c.Nk = 20; // q > k: rows q < 25 see no key
  EXPECT_EQ(checkAttention("attn_causal_br", c, 6, 1e-5, 1e-4), 2 * 2 * 25);
}

// attn_causal_tl_amask: f32, D = 8, Hq = 2, top-left causal, additive mask
// broadcast over heads ([B, 1, Nq, Nk]), scale 0.3, LSE.
TEST(CpuBackendTest, CausalTopLeftAdditiveMask) {
  AttentionCase c;
  c.B = 2;
  c.Nq = 13;
  c.Nk = 21;
  c.mB = 2;
  c.mH = 1;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dist(-64, 64);
  c.mask.resize(c.mB * c.mH * c.Nq * c.Nk);
  for (size_t i = 0; i < c.mask.size(); ++i)
    c.mask[i] = i % 7 == 3 ? -kInf : dist(rng) / 16.0;
  // Batch 1, row 4: every key masked by -inf.
  for (int64_t j = 0; j < c.Nk; ++j)
    c.mask[((1 * c.mH) * c.Nq + 4) * c.Nk + j] = -kInf;
  Kernel kernel;
  ASSERT_TRUE(Kernel::load(artifact("attn_causal_tl_amask"), FA_DEVICE_CPU,
                           kernel)
                  .ok());
  EXPECT_FLOAT_EQ(kernel.info().scale, 0.3f);
  EXPECT_EQ(checkAttention("attn_causal_tl_amask", c, 8, 1e-5, 1e-4), 2);
}

// attn_f16_bmask: f16, D = 16, Hq = 2, bool mask broadcast over the batch
// ([1, Hq, Nq, Nk]), no LSE.
TEST(CpuBackendTest, Float16BoolMask) {
  AttentionCase c;
  c.B = 2;
  c.Nq = 19;
  c.Nk = 23;
  c.mB = 1;
  c.mH = 2;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> dist(0, 3);
  c.maskBytes.resize(c.mB * c.mH * c.Nq * c.Nk);
  for (uint8_t &m : c.maskBytes) {
    int r = dist(rng);
    m = r == 0 ? 0 : r == 1 ? 255 : 1; // any nonzero byte attends
  }
  // Head 1, row 2 attends nothing.
  for (int64_t j = 0; j < c.Nk; ++j)
    c.maskBytes[(1 * c.Nq + 2) * c.Nk + j] = 0;
  EXPECT_EQ(checkAttention("attn_f16_bmask", c, 10, 3e-3, 3e-3), 2);
}

// attn_bf16_generic: bf16, D = 8, Hq = 2, LSE, compiled with --cpu generic
// (exercises the f32 -> bf16 conversion helper fa-compile links in).
TEST(CpuBackendTest, BFloat16Generic) {
  AttentionCase c;
  c.B = 1;
  c.Nq = 9;
  c.Nk = 17;
  EXPECT_EQ(checkAttention("attn_bf16_generic", c, 11, 1e-2, 1e-2), 0);
}

// attn_mods: f32, D = 16, Hq = 4, Hkv = 2, bottom-right causal,
// window(5, 2), softcap 2.5, chunk 12, ALiBi [B, Hq], segment ids, key
// lengths, LSE, 8x8 tiles, launched through fa_attention_launch_ex (the
// C++ wrapper's extras). Rows emptied by the window and key lengths.
TEST(CpuBackendTest, Modifiers) {
  Kernel kernel;
  ASSERT_TRUE(Kernel::load(artifact("attn_mods"), FA_DEVICE_CPU, kernel).ok());
  fa_attention_modifiers mods{};
  ASSERT_EQ(fa_kernel_get_modifiers(kernel.get(), &mods), FA_SUCCESS);
  EXPECT_EQ(mods.window_left, 5);
  EXPECT_EQ(mods.window_right, 2);
  EXPECT_DOUBLE_EQ(mods.softcap, 2.5);
  EXPECT_EQ(mods.chunk, 12);
  EXPECT_EQ(mods.alibi, 2);
  EXPECT_EQ(mods.has_segments, 1);
  AttentionCase c;
  c.B = 2;
  c.Nq = 21;
  c.Nk = 37;
  c.lens = {37, 9};
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> slope(1, 32);
  for (int64_t i = 0; i < c.B * 4; ++i)
    c.alibi.push_back(slope(rng) / 64.0);
  // Sorted ids with an empty document (id 1 has no query row in batch 0)
  // and unsorted ones in batch 1.
  std::uniform_int_distribution<int> seg(0, 2);
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t i = 0; i < c.Nq; ++i)
      c.qSeg.push_back(b == 0 ? (i < 10 ? 0 : 2) : seg(rng));
    for (int64_t j = 0; j < c.Nk; ++j)
      c.kSeg.push_back(b == 0 ? (j < 20 ? 0 : j < 25 ? 1 : 2) : seg(rng));
  }
  int64_t empty = checkAttention("attn_mods", c, 13, 1e-5, 1e-4);
  EXPECT_GT(empty, 0);

  // The operands are required and checked: no slopes, then slopes of the
  // wrong shape, then segment ids for a kernel without them.
  Kernel plain;
  ASSERT_TRUE(Kernel::load(artifact("attn_lens"), FA_DEVICE_CPU, plain).ok());
  std::vector<float> data(2 * 4 * 21 * 37, 0.0f);
  int64_t qs[] = {2, 4, 21, 16}, ks[] = {2, 2, 37, 16}, os[] = {2, 4, 21, 16},
          ls[] = {2, 4, 21}, lens[] = {2}, sl[] = {4}, seg2[] = {2, 21};
  fa_tensor q = fa_tensor_make(data.data(), FA_DTYPE_F32, 4, qs);
  fa_tensor k = fa_tensor_make(data.data(), FA_DTYPE_F32, 4, ks);
  std::vector<float> out(2 * 4 * 21 * 16), lseOut(2 * 4 * 21);
  fa_tensor o = fa_tensor_make(out.data(), FA_DTYPE_F32, 4, os);
  fa_tensor l = fa_tensor_make(lseOut.data(), FA_DTYPE_F32, 3, ls);
  std::vector<int32_t> lensData = {37, 9}, segData(2 * 37, 0);
  fa_tensor lensT = fa_tensor_make(lensData.data(), FA_DTYPE_I32, 1, lens);
  fa_tensor slopes = fa_tensor_make(data.data(), FA_DTYPE_F32, 1, sl);
  fa_tensor qSeg = fa_tensor_make(segData.data(), FA_DTYPE_I32, 2, seg2);
  fa_attention_extras extras{};
  extras.q_segments = &qSeg;
  extras.k_segments = &qSeg;
  EXPECT_EQ(fa_attention_launch_ex(kernel.get(), &q, &k, &k, &lensT, nullptr,
                                   &extras, &o, &l, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("alibi is NULL"),
            std::string::npos)
      << fa_last_error();
  extras.alibi = &slopes;
  EXPECT_EQ(fa_attention_launch_ex(kernel.get(), &q, &k, &k, &lensT, nullptr,
                                   &extras, &o, &l, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("alibi"), std::string::npos)
      << fa_last_error();
  // The plain fa_attention_launch has no slot for them.
  EXPECT_EQ(fa_attention_launch(kernel.get(), &q, &k, &k, &lensT, nullptr, &o,
                                &l, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  fa_attention_extras segOnly{};
  segOnly.q_segments = &qSeg;
  segOnly.k_segments = &qSeg;
  EXPECT_EQ(fa_attention_launch_ex(plain.get(), &q, &k, &k, &lensT, nullptr,
                                   &segOnly, &o, &l, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("q_segments was given"),
            std::string::npos)
      << fa_last_error();
}

//===----------------------------------------------------------------------===//
// The backward pass
//===----------------------------------------------------------------------===//

/// dQ, dK, dV of sum(O * dO) in float64 from the contract (docs/backward.md):
/// P = exp(S - LSE) over the kept keys, Delta = rowsum(dO * O),
/// dS = P (dO V^T - Delta) (times 1 - tanh^2 of the scaled score over the
/// softcap), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO, GQA summing
/// dK and dV over a group's query heads. O and LSE are the float64 ones.
void referenceBackward(const fa_kernel_info &info,
                       const fa_attention_modifiers &mods,
                       const AttentionCase &c, const Buffer &q, const Buffer &k,
                       const Buffer &v, const Buffer &dO,
                       std::vector<double> &dq, std::vector<double> &dk,
                       std::vector<double> &dv) {
  const int64_t Hq = info.heads, Hkv = info.kv_heads, D = info.head_dim,
                Dv = info.value_head_dim, group = Hq / Hkv;
  const double scale = info.scale;
  std::vector<double> o, lse;
  referenceAttention(info, mods, c, q, k, v, o, lse);
  dq.assign(c.B * Hq * c.Nq * D, 0.0);
  dk.assign(c.B * Hkv * c.Nk * D, 0.0);
  dv.assign(c.B * Hkv * c.Nk * Dv, 0.0);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < c.Nq; ++i) {
        int64_t row = (b * Hq + h) * c.Nq + i, kvh = h / group;
        if (lse[row] == -kInf)
          continue;
        double delta = 0;
        for (int64_t d = 0; d < Dv; ++d)
          delta += dO.get(row * Dv + d) * o[row * Dv + d];
        for (int64_t j = 0; j < c.Nk; ++j) {
          double scaled = 0;
          double s = referenceScore(info, mods, c, q, k, b, h, i, j, &scaled);
          if (s == -kInf)
            continue;
          int64_t key = (b * Hkv + kvh) * c.Nk + j;
          double p = std::exp(s - lse[row]), dp = 0;
          for (int64_t d = 0; d < Dv; ++d) {
            dp += dO.get(row * Dv + d) * v.get(key * Dv + d);
            dv[key * Dv + d] += p * dO.get(row * Dv + d);
          }
          double ds = p * (dp - delta);
          if (mods.softcap > 0) {
            double t = std::tanh(scaled / mods.softcap);
            ds *= 1 - t * t;
          }
          for (int64_t d = 0; d < D; ++d) {
            dq[row * D + d] += scale * ds * k.get(key * D + d);
            dk[key * D + d] += scale * ds * q.get(row * D + d);
          }
        }
      }
}

/// Runs the forward artifact `forwardName` for O and LSE, then the backward
/// artifact `backwardName` from them, and compares dQ, dK, dV with
/// referenceBackward. Gradients are poisoned with NaN first.
void checkBackward(llvm::StringRef forwardName, llvm::StringRef backwardName,
                   const AttentionCase &c, uint32_t seed, double atol,
                   double rtol) {
  Kernel forward, backward;
  Status status = Kernel::load(artifact(forwardName), FA_DEVICE_CPU, forward);
  ASSERT_TRUE(status.ok()) << status.toString();
  status = Kernel::load(artifact(backwardName), FA_DEVICE_CPU, backward);
  ASSERT_TRUE(status.ok()) << status.toString();
  status = backward.checkBackwardOf(forward);
  ASSERT_TRUE(status.ok()) << status.toString();
  fa_kernel_info info = backward.info();
  EXPECT_EQ(info.op, FA_OP_ATTENTION_BACKWARD);
  fa_attention_modifiers mods{};
  ASSERT_EQ(fa_kernel_get_modifiers(backward.get(), &mods), FA_SUCCESS);
  const int64_t Hq = info.heads, Hkv = info.kv_heads, D = info.head_dim,
                Dv = info.value_head_dim;
  std::mt19937 rng(seed);
  Buffer q(info.dtype, {c.B, Hq, c.Nq, D});
  Buffer k(info.dtype, {c.B, Hkv, c.Nk, D});
  Buffer v(info.dtype, {c.B, Hkv, c.Nk, Dv});
  Buffer dO(info.dtype, {c.B, Hq, c.Nq, Dv});
  fillRandom(q, rng);
  fillRandom(k, rng);
  fillRandom(v, rng);
  fillRandom(dO, rng);
  Buffer o(info.dtype, {c.B, Hq, c.Nq, Dv});
  Buffer lse(FA_DTYPE_F32, {c.B, Hq, c.Nq});
  Buffer lens(FA_DTYPE_I32, {c.B});
  for (size_t i = 0; i < c.lens.size(); ++i)
    lens.set(i, c.lens[i]);
  Buffer mask(FA_DTYPE_BOOL, {c.mB, c.mH, c.Nq, c.Nk});
  for (size_t i = 0; i < c.maskBytes.size(); ++i)
    mask.set(i, c.maskBytes[i]);
  Buffer alibi(FA_DTYPE_F32, mods.alibi == 2 ? std::vector<int64_t>{c.B, Hq}
                                             : std::vector<int64_t>{Hq});
  for (size_t i = 0; i < c.alibi.size(); ++i)
    alibi.set(i, c.alibi[i]);
  fa_tensor lensT = lens.tensor(), maskT = mask.tensor(), lseT = lse.tensor(),
            alibiT = alibi.tensor();

  AttentionArgs fargs;
  fargs.q = q.tensor();
  fargs.k = k.tensor();
  fargs.v = v.tensor();
  fargs.o = o.tensor();
  fargs.lse = &lseT;
  if (info.has_kv_lens)
    fargs.kvLens = &lensT;
  if (info.mask != FA_MASK_NONE)
    fargs.mask = &maskT;
  if (mods.alibi != 0)
    fargs.extras.alibi = &alibiT;
  status = forward.attention(fargs);
  ASSERT_TRUE(status.ok()) << status.toString();

  Buffer dq(info.dtype, {c.B, Hq, c.Nq, D});
  Buffer dk(info.dtype, {c.B, Hkv, c.Nk, D});
  Buffer dv(info.dtype, {c.B, Hkv, c.Nk, Dv});
  dq.poison();
  dk.poison();
  dv.poison();
  AttentionBackwardArgs args;
  args.q = q.tensor();
  args.k = k.tensor();
  args.v = v.tensor();
  args.o = o.tensor();
  args.lse = lse.tensor();
  args.dO = dO.tensor();
  args.dQ = dq.tensor();
  args.dK = dk.tensor();
  args.dV = dv.tensor();
  args.kvLens = fargs.kvLens;
  args.mask = fargs.mask;
  args.extras = fargs.extras;
  status = backward.attentionBackward(args);
  ASSERT_TRUE(status.ok()) << status.toString();

  std::vector<double> dqRef, dkRef, dvRef;
  referenceBackward(info, mods, c, q, k, v, dO, dqRef, dkRef, dvRef);
  const std::pair<const Buffer *, const std::vector<double> *> grads[] = {
      {&dq, &dqRef}, {&dk, &dkRef}, {&dv, &dvRef}};
  const char *names[] = {"dQ", "dK", "dV"};
  for (int g = 0; g < 3; ++g) {
    const Buffer &got = *grads[g].first;
    const std::vector<double> &want = *grads[g].second;
    int64_t bad = 0, zeros = 0;
    for (int64_t i = 0; i < got.count; ++i) {
      // Exact zeros where nothing contributes (rows with no attended key,
      // keys no query attends); never NaN.
      if (want[i] == 0 && got.get(i) != 0 && bad++ < 5)
        ADD_FAILURE() << backwardName.str() << ": " << names[g] << "[" << i
                      << "] = " << got.get(i) << ", expected exactly 0";
      zeros += want[i] == 0;
      if (!close(got.get(i), want[i], atol, rtol) && bad++ < 5)
        ADD_FAILURE() << backwardName.str() << ": " << names[g] << "[" << i
                      << "] = " << got.get(i) << ", reference " << want[i];
    }
    EXPECT_EQ(bad, 0) << backwardName.str() << ": " << names[g]
                      << " elements off";
    EXPECT_GT(zeros, 0) << names[g] << ": the case has no empty rows";
  }
}

// attn_bwd_fwd / attn_bwd: f32, D = 16, Dv = 8, GQA 4/2, bottom-right
// causal with Nq > Nk (rows with no key), key lengths (one 0), a window, a
// softcap, ALiBi per batch and head, a boolean mask with a fully masked
// row; 8x8 tiles, ragged.
TEST(CpuBackendTest, Backward) {
  AttentionCase c;
  c.B = 2;
  c.Nq = 23;
  c.Nk = 19;
  c.lens = {17, 0};
  c.mB = 2;
  c.mH = 4;
  std::mt19937 rng(31);
  std::bernoulli_distribution keep(0.85);
  for (int64_t i = 0; i < c.mB * c.mH * c.Nq * c.Nk; ++i)
    c.maskBytes.push_back(keep(rng));
  for (int64_t j = 0; j < c.Nk; ++j)
    c.maskBytes[(0 * c.Nq + 20) * c.Nk + j] = 0; // batch 0, head 0, row 20
  std::uniform_int_distribution<int> slope(1, 32);
  for (int64_t i = 0; i < c.B * 4; ++i)
    c.alibi.push_back(slope(rng) / 64.0);
  checkBackward("attn_bwd_fwd", "attn_bwd", c, 32, 1e-5, 1e-4);
}

// attn_bwd_file: fa.attention_backward compiled from an .mlir file with
// its arguments in their own order (Inputs/attn_bwd_file.mlir), after the
// spec-built forward attn_bwd_file_fwd: top-left causal with Nq > Nk, key
// lengths (one 0), a softcap, GQA 4/2, Dv != D.
TEST(CpuBackendTest, BackwardFromFile) {
  AttentionCase c;
  c.B = 3;
  c.Nq = 29;
  c.Nk = 21;
  c.lens = {21, 0, 13};
  checkBackward("attn_bwd_file_fwd", "attn_bwd_file", c, 33, 1e-5, 1e-4);
}

TEST(CpuBackendTest, BackwardErrors) {
  Kernel forward, backward, other;
  ASSERT_TRUE(
      Kernel::load(artifact("attn_bwd_fwd"), FA_DEVICE_CPU, forward).ok());
  ASSERT_TRUE(Kernel::load(artifact("attn_bwd"), FA_DEVICE_CPU, backward).ok());
  ASSERT_TRUE(Kernel::load(artifact("attn_mods"), FA_DEVICE_CPU, other).ok());
  // A forward with other options: the first that differs is named.
  EXPECT_EQ(fa_kernel_check_backward(other.get(), backward.get()),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("value_head_dim differs: 16 in the forward, 8 in the "
                        "backward"));
  // The arguments swapped, and NULL.
  EXPECT_EQ(fa_kernel_check_backward(backward.get(), forward.get()),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("expected an attention kernel and "
                                         "an attention_backward kernel"));
  EXPECT_EQ(fa_kernel_check_backward(nullptr, backward.get()),
            FA_ERROR_INVALID_ARGUMENT);

  // Launch checks: the op, missing and misshaped operands, aliasing.
  const int64_t B = 1, Nq = 5, Nk = 7;
  std::vector<float> q(B * 4 * Nq * 16), k(B * 2 * Nk * 16), v(B * 2 * Nk * 8),
      o(B * 4 * Nq * 8), lse(B * 4 * Nq), dO(B * 4 * Nq * 8), dq(q.size()),
      dk(k.size()), dv(v.size()), slopes(B * 4);
  std::vector<int32_t> lens(B, Nk);
  std::vector<uint8_t> mask(B * 4 * Nq * Nk, 1);
  int64_t qs[] = {B, 4, Nq, 16}, ks[] = {B, 2, Nk, 16}, vs[] = {B, 2, Nk, 8},
          os[] = {B, 4, Nq, 8}, ls[] = {B, 4, Nq}, ns[] = {B},
          ms[] = {B, 4, Nq, Nk}, as[] = {B, 4}, wrong[] = {B, 4, Nq, 9};
  fa_tensor tq = fa_tensor_make(q.data(), FA_DTYPE_F32, 4, qs),
            tk = fa_tensor_make(k.data(), FA_DTYPE_F32, 4, ks),
            tv = fa_tensor_make(v.data(), FA_DTYPE_F32, 4, vs),
            to = fa_tensor_make(o.data(), FA_DTYPE_F32, 4, os),
            tl = fa_tensor_make(lse.data(), FA_DTYPE_F32, 3, ls),
            tdo = fa_tensor_make(dO.data(), FA_DTYPE_F32, 4, os),
            tdq = fa_tensor_make(dq.data(), FA_DTYPE_F32, 4, qs),
            tdk = fa_tensor_make(dk.data(), FA_DTYPE_F32, 4, ks),
            tdv = fa_tensor_make(dv.data(), FA_DTYPE_F32, 4, vs),
            tn = fa_tensor_make(lens.data(), FA_DTYPE_I32, 1, ns),
            tm = fa_tensor_make(mask.data(), FA_DTYPE_BOOL, 4, ms),
            ta = fa_tensor_make(slopes.data(), FA_DTYPE_F32, 2, as),
            tbad = fa_tensor_make(dO.data(), FA_DTYPE_F32, 4, wrong);
  fa_attention_extras extras{};
  extras.alibi = &ta;
  auto run = [&](const fa_tensor *dOArg, fa_tensor *dkArg,
                 const fa_attention_extras *ex) {
    return fa_attention_backward_launch(backward.get(), &tq, &tk, &tv, &to, &tl,
                                        dOArg, &tn, &tm, ex, &tdq, dkArg, &tdv,
                                        nullptr);
  };
  EXPECT_EQ(run(&tdo, &tdk, &extras), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(run(&tbad, &tdk, &extras), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("d_o"));
  EXPECT_EQ(run(nullptr, &tdk, &extras), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("d_o is NULL"));
  EXPECT_EQ(run(&tdo, &tdk, nullptr), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("alibi is NULL"));
  // dK written over K.
  fa_tensor alias = tk;
  EXPECT_EQ(run(&tdo, &alias, &extras), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("d_k overlaps k"));
  // A forward kernel is not launched as a backward one, nor the reverse.
  EXPECT_EQ(fa_attention_backward_launch(forward.get(), &tq, &tk, &tv, &to, &tl,
                                         &tdo, &tn, &tm, &extras, &tdq, &tdk,
                                         &tdv, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("computes attention, not "
                                         "attention_backward"));
  EXPECT_EQ(fa_attention_launch_ex(backward.get(), &tq, &tk, &tv, &tn, &tm,
                                   &extras, &to, &tl, nullptr),
            FA_ERROR_INVALID_ARGUMENT);

  // Nq = 0: dQ is empty, but dK and dV are written (zeros).
  int64_t q0s[] = {B, 4, 0, 16}, o0s[] = {B, 4, 0, 8}, l0s[] = {B, 4, 0},
          m0s[] = {B, 4, 0, Nk};
  fa_tensor q0 = fa_tensor_make(q.data(), FA_DTYPE_F32, 4, q0s),
            o0 = fa_tensor_make(o.data(), FA_DTYPE_F32, 4, o0s),
            l0 = fa_tensor_make(lse.data(), FA_DTYPE_F32, 3, l0s),
            do0 = fa_tensor_make(dO.data(), FA_DTYPE_F32, 4, o0s),
            dq0 = fa_tensor_make(dq.data(), FA_DTYPE_F32, 4, q0s),
            m0 = fa_tensor_make(mask.data(), FA_DTYPE_BOOL, 4, m0s);
  dk.assign(dk.size(), 7.0f);
  dv.assign(dv.size(), 7.0f);
  EXPECT_EQ(fa_attention_backward_launch(backward.get(), &q0, &tk, &tv, &o0,
                                         &l0, &do0, &tn, &m0, &extras, &dq0,
                                         &tdk, &tdv, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  EXPECT_EQ(*std::max_element(dk.begin(), dk.end()), 0.0f);
  EXPECT_EQ(*std::min_element(dk.begin(), dk.end()), 0.0f);
  EXPECT_EQ(*std::min_element(dv.begin(), dv.end()), 0.0f);
  EXPECT_EQ(*std::max_element(dv.begin(), dv.end()), 0.0f);
}

/// Softmax along `dim` in float64, all--inf rows giving zeros.
void checkSoftmax(llvm::StringRef name, std::vector<int64_t> sizes,
                  uint32_t seed, double atol, double rtol, bool infColumn) {
  Kernel kernel;
  Status status = Kernel::load(artifact(name), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  fa_kernel_info info = kernel.info();
  std::mt19937 rng(seed);
  Buffer x(info.dtype, sizes), y(info.dtype, sizes);
  fillRandom(x, rng);
  y.poison();
  int64_t dim = info.dimension, rank = info.rank;
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= sizes[d];
  int64_t n = sizes[dim], outer = x.count / (n * inner);
  if (infColumn)
    for (int64_t i = 0; i < n; ++i)
      x.set(i * inner, -kInf); // row (outer 0, inner 0) all -inf
  fa_tensor xt = x.tensor(), yt = y.tensor();
  status = kernel.softmax(xt, yt);
  ASSERT_TRUE(status.ok()) << status.toString();
  int64_t bad = 0;
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t c = 0; c < inner; ++c) {
      double m = -kInf;
      for (int64_t i = 0; i < n; ++i)
        m = std::max(m, x.get((a * n + i) * inner + c));
      double l = 0;
      for (int64_t i = 0; i < n; ++i)
        if (m != -kInf)
          l += std::exp(x.get((a * n + i) * inner + c) - m);
      for (int64_t i = 0; i < n; ++i) {
        int64_t idx = (a * n + i) * inner + c;
        double want = m == -kInf ? 0.0 : std::exp(x.get(idx) - m) / l;
        if (!close(y.get(idx), want, atol, rtol) && bad++ < 5)
          ADD_FAILURE() << name.str() << ": y[" << idx << "] = " << y.get(idx)
                        << ", reference " << want;
      }
    }
  EXPECT_EQ(bad, 0);
}

// attn_regions (Inputs/attn_regions.mlir): f32, D = 16, Hq = 4, Hkv = 2,
// LSE, a score_mod adding bias[h, k - q + 31] from a [4, 63] table and a
// mask_mod keeping k < prefix[b] or k <= q, compiled from an input file;
// launched through fa_attention_launch_mods with the two tensors, against
// a reference written from that meaning.
/// The inputs of the region kernels (attn_regions, attn_block_mask): a
/// relative-bias table [Hq, 63] and prefix-LM lengths [B], and the float64
/// reference of what they compute.
struct RegionsCase {
  static constexpr int64_t B = 2, Hq = 4, Hkv = 2, Nq = 20, Nk = 29, D = 16;
  std::vector<float> q, k, v, bias;
  std::vector<int32_t> prefix = {5, 0};
  std::vector<float> o = std::vector<float>(B * Hq * Nq * D, NAN);
  std::vector<float> lse = std::vector<float>(B * Hq * Nq, NAN);
  int64_t qs[4] = {B, Hq, Nq, D}, ks[4] = {B, Hkv, Nk, D}, ls[3] = {B, Hq, Nq},
          ts[2] = {Hq, 63}, ps[1] = {B};
  fa_tensor qT, kT, vT, oT, lT, tT, pT;

  RegionsCase() {
    std::mt19937 rng(21);
    std::normal_distribution<float> normal;
    auto fill = [&](std::vector<float> &x, size_t n) {
      x.resize(n);
      for (float &e : x)
        e = normal(rng);
    };
    fill(q, B * Hq * Nq * D);
    fill(k, B * Hkv * Nk * D);
    fill(v, B * Hkv * Nk * D);
    fill(bias, Hq * 63);
    qT = fa_tensor_make(q.data(), FA_DTYPE_F32, 4, qs);
    kT = fa_tensor_make(k.data(), FA_DTYPE_F32, 4, ks);
    vT = fa_tensor_make(v.data(), FA_DTYPE_F32, 4, ks);
    oT = fa_tensor_make(o.data(), FA_DTYPE_F32, 4, qs);
    lT = fa_tensor_make(lse.data(), FA_DTYPE_F32, 3, ls);
    tT = fa_tensor_make(bias.data(), FA_DTYPE_F32, 2, ts);
    pT = fa_tensor_make(prefix.data(), FA_DTYPE_I32, 1, ps);
  }

  /// The mask_mod: key j of row i in batch b is kept when j < prefix[b] or
  /// j <= i.
  bool keep(int64_t b, int64_t i, int64_t j) const {
    return j < prefix[b] || j <= i;
  }

  /// The number of O and LSE elements that differ from the reference: s =
  /// scale q.k + bias[h][k - q + 31], the keys the mask_mod removes
  /// removed; query head h reads kv head h / 2. Reports the first few.
  int64_t countMismatches(bool report = true) const {
    double scale = 1.0 / std::sqrt(double(D));
    int64_t bad = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Nq; ++i) {
          std::vector<double> s(Nk, -kInf);
          double m = -kInf;
          for (int64_t j = 0; j < Nk; ++j) {
            if (!keep(b, i, j))
              continue;
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += double(q[((b * Hq + h) * Nq + i) * D + d]) *
                     k[((b * Hkv + h / 2) * Nk + j) * D + d];
            s[j] = scale * dot + bias[h * 63 + (j - i + 31)];
            m = std::max(m, s[j]);
          }
          double l = 0;
          std::vector<double> acc(D, 0.0);
          for (int64_t j = 0; j < Nk; ++j) {
            if (s[j] == -kInf)
              continue;
            double p = std::exp(s[j] - m);
            l += p;
            for (int64_t d = 0; d < D; ++d)
              acc[d] += p * v[((b * Hkv + h / 2) * Nk + j) * D + d];
          }
          int64_t row = (b * Hq + h) * Nq + i;
          if (!close(lse[row], m + std::log(l), 1e-4, 1e-4) &&
              bad++ < 5 && report)
            ADD_FAILURE() << "LSE row " << row << ": " << lse[row] << " vs "
                          << m + std::log(l);
          for (int64_t d = 0; d < D; ++d)
            if (!close(o[row * D + d], acc[d] / l, 1e-5, 1e-4) &&
                bad++ < 5 && report)
              ADD_FAILURE() << "O[" << row << ", " << d << "] = "
                            << o[row * D + d] << ", reference " << acc[d] / l;
        }
    return bad;
  }
};

TEST(CpuBackendTest, Regions) {
  Kernel kernel;
  Status loaded = Kernel::load(artifact("attn_regions"), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(loaded.ok()) << loaded.toString();
  fa_attention_regions regions{};
  ASSERT_EQ(fa_kernel_get_regions(kernel.get(), &regions), FA_SUCCESS);
  EXPECT_EQ(regions.has_score_mod, 1);
  EXPECT_EQ(regions.has_mask_mod, 1);
  EXPECT_EQ(regions.num_mod_operands, 2);
  fa_attention_modifiers mods{};
  ASSERT_EQ(fa_kernel_get_modifiers(kernel.get(), &mods), FA_SUCCESS);
  EXPECT_EQ(mods.window_left, -1);
  int64_t tq = -1, tk = -1;
  ASSERT_EQ(fa_kernel_get_block_tiles(kernel.get(), &tq, &tk), FA_SUCCESS);
  EXPECT_EQ(tq, 0);
  EXPECT_EQ(tk, 0);

  RegionsCase c;
  const int64_t Hq = RegionsCase::Hq;
  fa_tensor &qT = c.qT, &kT = c.kT, &vT = c.vT, &oT = c.oT, &lT = c.lT,
            &tT = c.tT, &pT = c.pT;
  std::vector<float> &bias = c.bias;
  const fa_tensor *modOperands[] = {&tT, &pT};
  ASSERT_EQ(fa_attention_launch_mods(kernel.get(), &qT, &kT, &vT, nullptr,
                                     nullptr, nullptr, modOperands, 2, &oT,
                                     &lT, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  EXPECT_EQ(c.countMismatches(), 0);

  // The mod operands are checked: a wrong shape, one missing, one too
  // many, and a kernel without regions given some.
  int64_t badShape[] = {Hq, 62};
  fa_tensor wrong = fa_tensor_make(bias.data(), FA_DTYPE_F32, 2, badShape);
  const fa_tensor *wrongOps[] = {&wrong, &pT};
  EXPECT_EQ(fa_attention_launch_mods(kernel.get(), &qT, &kT, &vT, nullptr,
                                     nullptr, nullptr, wrongOps, 2, &oT, &lT,
                                     nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("mod0"), std::string::npos)
      << fa_last_error();
  EXPECT_EQ(fa_attention_launch_mods(kernel.get(), &qT, &kT, &vT, nullptr,
                                     nullptr, nullptr, modOperands, 1, &oT,
                                     &lT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("mod1 is NULL"),
            std::string::npos)
      << fa_last_error();
  const fa_tensor *three[] = {&tT, &pT, &pT};
  EXPECT_EQ(fa_attention_launch_mods(kernel.get(), &qT, &kT, &vT, nullptr,
                                     nullptr, nullptr, three, 3, &oT, &lT,
                                     nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error())
                .find("3 mod operands were given, but kernel 'attn_regions' "
                      "takes 2"),
            std::string::npos)
      << fa_last_error();
  EXPECT_EQ(fa_attention_launch(kernel.get(), &qT, &kT, &vT, nullptr,
                                nullptr, &oT, &lT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fa_attention_launch_mods(kernel.get(), &qT, &kT, &vT, nullptr,
                                     nullptr, nullptr, nullptr, 2, &oT, &lT,
                                     nullptr),
            FA_ERROR_INVALID_ARGUMENT);
}

/// The keep function of RegionsCase's mask_mod, for fa_block_mask_build.
static int regionsKeep(void *user, int64_t b, int64_t, int64_t q, int64_t k) {
  return static_cast<const RegionsCase *>(user)->keep(b, q, k);
}

TEST(CpuBackendTest, BlockMask) {
  Kernel kernel;
  Status loaded =
      Kernel::load(artifact("attn_block_mask"), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(loaded.ok()) << loaded.toString();
  int64_t tq = 0, tk = 0;
  ASSERT_EQ(fa_kernel_get_block_tiles(kernel.get(), &tq, &tk), FA_SUCCESS);
  EXPECT_EQ(tq, 16);
  EXPECT_EQ(tk, 8);

  // The block mask [B, 1, ceil(20 / 16), ceil(29 / 8)] from the host
  // helper.
  RegionsCase c;
  const int64_t B = RegionsCase::B, Nq = RegionsCase::Nq,
                Nk = RegionsCase::Nk;
  int64_t size = fa_block_mask_size(B, 1, Nq, Nk, tq, tk);
  ASSERT_EQ(size, B * 2 * 4);
  std::vector<uint8_t> bm(size);
  ASSERT_EQ(fa_block_mask_build(B, 1, Nq, Nk, tq, tk, regionsKeep, &c,
                                bm.data()),
            FA_SUCCESS);
  int64_t bs[] = {B, 1, 2, 4};
  fa_tensor bmT = fa_tensor_make(bm.data(), FA_DTYPE_I8, 4, bs);
  const fa_tensor *modOperands[] = {&c.tT, &c.pT};
  ASSERT_EQ(fa_attention_launch_sparse(kernel.get(), &c.qT, &c.kT, &c.vT,
                                       nullptr, nullptr, nullptr, modOperands,
                                       2, &bmT, &c.oT, &c.lT, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  EXPECT_EQ(c.countMismatches(), 0);

  // The kernel reads the block mask: with a partial tile marked empty
  // (keys it keeps never visited), or marked full (its mask_mod skipped),
  // the result differs from the reference.
  auto partial = std::find(bm.begin(), bm.end(), 1);
  ASSERT_NE(partial, bm.end());
  for (uint8_t wrong : {0, 2}) {
    std::vector<uint8_t> corrupt = bm;
    corrupt[partial - bm.begin()] = wrong;
    fa_tensor cT = fa_tensor_make(corrupt.data(), FA_DTYPE_I8, 4, bs);
    ASSERT_EQ(fa_attention_launch_sparse(kernel.get(), &c.qT, &c.kT, &c.vT,
                                         nullptr, nullptr, nullptr,
                                         modOperands, 2, &cT, &c.oT, &c.lT,
                                         nullptr),
              FA_SUCCESS)
        << fa_last_error();
    EXPECT_GT(c.countMismatches(/*report=*/false), 0)
        << "a partial tile marked " << int(wrong) << " went unnoticed";
  }

  // Checked: missing, the wrong number of tiles (named with the tiles),
  // the wrong dtype, and a block mask for a kernel without one.
  auto launch = [&](const fa_tensor *mask) {
    return fa_attention_launch_sparse(kernel.get(), &c.qT, &c.kT, &c.vT,
                                      nullptr, nullptr, nullptr, modOperands,
                                      2, mask, &c.oT, &c.lT, nullptr);
  };
  EXPECT_EQ(launch(nullptr), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("block_mask is NULL"),
            std::string::npos)
      << fa_last_error();
  int64_t badTiles[] = {B, 1, 2, 3};
  fa_tensor badT = fa_tensor_make(bm.data(), FA_DTYPE_I8, 4, badTiles);
  EXPECT_EQ(launch(&badT), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("in key tiles of 8"),
            std::string::npos)
      << fa_last_error();
  fa_tensor f32T = fa_tensor_make(bm.data(), FA_DTYPE_F32, 4, bs);
  EXPECT_EQ(launch(&f32T), FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error()).find("block mask of one byte"),
            std::string::npos)
      << fa_last_error();
  Kernel plain;
  ASSERT_TRUE(
      Kernel::load(artifact("attn_regions"), FA_DEVICE_CPU, plain).ok());
  EXPECT_EQ(fa_attention_launch_sparse(plain.get(), &c.qT, &c.kT, &c.vT,
                                       nullptr, nullptr, nullptr, modOperands,
                                       2, &bmT, &c.oT, &c.lT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fa_last_error())
                .find("block_mask was given, but kernel 'attn_regions' was "
                      "compiled without it"),
            std::string::npos)
      << fa_last_error();

  // The C++ API passes it too.
  AttentionArgs args;
  args.q = c.qT;
  args.k = c.kT;
  args.v = c.vT;
  args.o = c.oT;
  args.lse = &c.lT;
  args.modOperands = {&c.tT, &c.pT};
  args.blockMask = &bmT;
  std::fill(c.o.begin(), c.o.end(), NAN);
  Status status = kernel.attention(args);
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(c.countMismatches(), 0);
}

//===----------------------------------------------------------------------===//
// Serving forms: paged K/V caches and variable-length batches
//===----------------------------------------------------------------------===//

/// The float64 reference of `info`'s attention for one dense problem of
/// the given buffers (referenceAttention without modifiers).
void referenceDense(const fa_kernel_info &info, const AttentionCase &c,
                    const Buffer &q, const Buffer &k, const Buffer &v,
                    std::vector<double> &o, std::vector<double> &lse) {
  fa_attention_modifiers none{};
  none.window_left = none.window_right = -1;
  referenceAttention(info, none, c, q, k, v, o, lse);
}

/// Runs a paged-cache artifact on `lens` keys per sequence through a
/// shuffled block table of M entries (unused entries -1, one page shared
/// by two sequences) and compares each sequence with the reference of its
/// keys gathered into a contiguous cache.
void checkPaged(llvm::StringRef name, int64_t Nq, std::vector<int32_t> lens,
                int64_t M, uint32_t seed) {
  Kernel kernel;
  Status status = Kernel::load(artifact(name), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  fa_kernel_info info = kernel.info();
  int64_t S = 0;
  int32_t varlen = 1;
  ASSERT_EQ(fa_kernel_get_serving(kernel.get(), &S, &varlen), FA_SUCCESS);
  ASSERT_GT(S, 0);
  EXPECT_EQ(varlen, 0);
  const int64_t B = lens.size(), Hq = info.heads, Hkv = info.kv_heads,
                D = info.head_dim, Dv = info.value_head_dim;
  std::mt19937 rng(seed);
  // Pages: each sequence's pages at shuffled places, plus spare pages; the
  // first page of sequence 0 is also the first page of the last sequence
  // (prefix sharing), whose keys there are then the same.
  std::vector<int32_t> table(B * M, -1);
  int64_t P = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < (lens[b] + S - 1) / S; ++j)
      table[b * M + j] = static_cast<int32_t>(P++);
  bool share = B > 1 && lens[0] > 0 && lens[B - 1] > 0;
  if (share)
    table[(B - 1) * M] = table[0];
  P += 3;
  std::vector<int32_t> perm(P);
  for (int64_t p = 0; p < P; ++p)
    perm[p] = static_cast<int32_t>(p);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int32_t &entry : table)
    if (entry >= 0)
      entry = perm[entry];

  Buffer q(info.dtype, {B, Hq, Nq, D}), o(info.dtype, {B, Hq, Nq, Dv});
  Buffer kp(info.dtype, {P, S, Hkv, D}), vp(info.dtype, {P, S, Hkv, Dv});
  Buffer lse(FA_DTYPE_F32, {B, Hq, Nq});
  Buffer tableT(FA_DTYPE_I32, {B, M}), lensT(FA_DTYPE_I32, {B});
  fillRandom(q, rng);
  fillRandom(kp, rng);
  fillRandom(vp, rng);
  o.poison();
  lse.poison();
  for (int64_t i = 0; i < B * M; ++i)
    tableT.set(i, table[i]);
  for (int64_t b = 0; b < B; ++b)
    lensT.set(b, lens[b]);

  fa_tensor qT = q.tensor(), kT = kp.tensor(), vT = vp.tensor(),
            tT = tableT.tensor(), lT = lensT.tensor(), oT = o.tensor(),
            lseT = lse.tensor();
  ASSERT_EQ(fa_attention_launch_paged(kernel.get(), &qT, &kT, &vT, &tT, &lT,
                                      nullptr, nullptr, &oT, &lseT, nullptr),
            FA_SUCCESS)
      << fa_last_error();

  // Each sequence as its own dense problem of kv_lens[b] keys (the paged
  // form aligns bottom-right causality to each sequence's length): logical
  // key j of sequence b is row j % S of page table[b, j / S].
  int64_t bad = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lens[b];
    Buffer qb(info.dtype, {1, Hq, Nq, D}), kb(info.dtype, {1, Hkv, len, D}),
        vb(info.dtype, {1, Hkv, len, Dv});
    for (int64_t i = 0; i < Hq * Nq * D; ++i)
      qb.set(i, q.get(b * Hq * Nq * D + i));
    for (int64_t j = 0; j < len; ++j) {
      int64_t page = table[b * M + j / S], row = j % S;
      for (int64_t h = 0; h < Hkv; ++h) {
        for (int64_t d = 0; d < D; ++d)
          kb.set((h * len + j) * D + d,
                 kp.get(((page * S + row) * Hkv + h) * D + d));
        for (int64_t d = 0; d < Dv; ++d)
          vb.set((h * len + j) * Dv + d,
                 vp.get(((page * S + row) * Hkv + h) * Dv + d));
      }
    }
    AttentionCase c;
    c.Nq = Nq;
    c.Nk = len;
    std::vector<double> oRef, lseRef;
    referenceDense(info, c, qb, kb, vb, oRef, lseRef);
    for (int64_t i = 0; i < Hq * Nq * Dv; ++i)
      if (!close(o.get(b * Hq * Nq * Dv + i), oRef[i], 1e-5, 1e-4) &&
          bad++ < 5)
        ADD_FAILURE() << name.str() << ": sequence " << b << " O[" << i
                      << "] = " << o.get(b * Hq * Nq * Dv + i)
                      << ", reference " << oRef[i];
    for (int64_t r = 0; r < Hq * Nq; ++r)
      if (!close(lse.get(b * Hq * Nq + r), lseRef[r], 1e-4, 1e-4) &&
          bad++ < 5)
        ADD_FAILURE() << name.str() << ": sequence " << b << " LSE[" << r
                      << "] = " << lse.get(b * Hq * Nq + r) << ", reference "
                      << lseRef[r];
  }
  EXPECT_EQ(bad, 0) << name.str() << " Nq = " << Nq;
}

// attn_paged16 / attn_paged1: f32, D = 16, Hq = 4, Hkv = 2, bottom-right
// causal, LSE; pages of 16 and 1 rows. Decode (Nq = 1, 3: the packed-head
// decode kernel) and prefill (Nq = 21) query lengths; an empty sequence;
// lengths that end inside a page.
TEST(CpuBackendTest, PagedCache) {
  checkPaged("attn_paged16", 1, {40, 0, 17, 33}, 4, 21);
  checkPaged("attn_paged16", 3, {40, 0, 17, 33}, 3, 22);
  checkPaged("attn_paged16", 21, {64, 5, 30}, 4, 23);
  checkPaged("attn_paged1", 1, {9, 0, 4}, 12, 24);
  checkPaged("attn_paged1", 6, {9, 7, 12}, 12, 25);
}

// Bad tables are errors before the kernel runs: nothing is written.
TEST(CpuBackendTest, PagedCacheBadTables) {
  Kernel kernel;
  Status status = Kernel::load(artifact("attn_paged16"), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  const int64_t B = 2, M = 2, P = 3, S = 16;
  Buffer q(FA_DTYPE_F32, {B, 4, 1, 16}), o(FA_DTYPE_F32, {B, 4, 1, 16});
  Buffer kp(FA_DTYPE_F32, {P, S, 2, 16}), vp(FA_DTYPE_F32, {P, S, 2, 16});
  Buffer lse(FA_DTYPE_F32, {B, 4, 1});
  Buffer table(FA_DTYPE_I32, {B, M}), lens(FA_DTYPE_I32, {B});
  std::mt19937 rng(26);
  fillRandom(q, rng);
  fillRandom(kp, rng);
  fillRandom(vp, rng);
  fa_tensor qT = q.tensor(), kT = kp.tensor(), vT = vp.tensor(),
            tT = table.tensor(), lT = lens.tensor(), oT = o.tensor(),
            lseT = lse.tensor();
  auto launch = [&](std::vector<int32_t> entries, std::vector<int32_t> len) {
    for (size_t i = 0; i < entries.size(); ++i)
      table.set(i, entries[i]);
    for (size_t i = 0; i < len.size(); ++i)
      lens.set(i, len[i]);
    o.poison();
    fa_status s = fa_attention_launch_paged(kernel.get(), &qT, &kT, &vT, &tT,
                                            &lT, nullptr, nullptr, &oT, &lseT,
                                            nullptr);
    return std::make_pair(s, std::string(fa_last_error()));
  };
  // Valid: the entry past sequence 1's pages is never read.
  EXPECT_EQ(launch({0, 1, 2, 99}, {20, 16}).first, FA_SUCCESS);
  auto [s1, e1] = launch({0, 1, 2, 3}, {20, 17});
  EXPECT_EQ(s1, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e1, HasSubstr("block_table: entry [1, 1] = 3 is not a page of "
                            "the cache (P = 3 pages); sequence 1 reads it "
                            "for its keys 16 to 16"));
  EXPECT_TRUE(std::isnan(o.get(0))) << "written despite the error";
  auto [s2, e2] = launch({0, -1, 2, 1}, {17, 3});
  EXPECT_EQ(s2, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e2, HasSubstr("entry [0, 1] = -1 is not a page"));
  auto [s3, e3] = launch({0, 1, 2, 1}, {20, 33});
  EXPECT_EQ(s3, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e3, HasSubstr("kv_lens: sequence 1 has 33 keys, but its 2 "
                            "block table entries of 16-row pages hold 0 to "
                            "32"));
  auto [s4, e4] = launch({0, 1, 2, 1}, {-2, 3});
  EXPECT_EQ(s4, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e4, HasSubstr("kv_lens: sequence 0 has a negative length -2"));
  EXPECT_TRUE(std::isnan(o.get(0))) << "written despite the error";

  // The wrong launch function, a table of another B, pages of another S.
  EXPECT_EQ(fa_attention_launch(kernel.get(), &qT, &kT, &vT, &lT, nullptr,
                                &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("fa_attention_launch_paged"));
  Buffer table3(FA_DTYPE_I32, {3, M});
  fa_tensor t3 = table3.tensor();
  EXPECT_EQ(fa_attention_launch_paged(kernel.get(), &qT, &kT, &vT, &t3, &lT,
                                      nullptr, nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("(B) is 3"));
  Buffer k8(FA_DTYPE_F32, {P, 8, 2, 16});
  fa_tensor k8T = k8.tensor();
  EXPECT_EQ(fa_attention_launch_paged(kernel.get(), &qT, &k8T, &vT, &tT, &lT,
                                      nullptr, nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("(S) is 8"));
}

/// Runs the varlen artifact on sequences of `qLens` queries and `kLens`
/// keys packed token-major, and compares each sequence with the reference
/// of its own dense problem.
void checkVarlen(llvm::StringRef name, std::vector<int32_t> qLens,
                 std::vector<int32_t> kLens, uint32_t seed) {
  Kernel kernel;
  Status status = Kernel::load(artifact(name), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  fa_kernel_info info = kernel.info();
  int64_t S = -1;
  int32_t varlen = 0;
  ASSERT_EQ(fa_kernel_get_serving(kernel.get(), &S, &varlen), FA_SUCCESS);
  EXPECT_EQ(S, 0);
  ASSERT_EQ(varlen, 1);
  const int64_t B = qLens.size(), Hq = info.heads, Hkv = info.kv_heads,
                D = info.head_dim, Dv = info.value_head_dim;
  fa_attention_modifiers mods{};
  ASSERT_EQ(fa_kernel_get_modifiers(kernel.get(), &mods), FA_SUCCESS);
  std::vector<int64_t> cuQ = {0}, cuK = {0};
  for (int64_t b = 0; b < B; ++b) {
    cuQ.push_back(cuQ.back() + qLens[b]);
    cuK.push_back(cuK.back() + kLens[b]);
  }
  const int64_t Tq = cuQ.back(), Tk = cuK.back();
  std::mt19937 rng(seed);
  Buffer q(info.dtype, {Tq, Hq, D}), k(info.dtype, {Tk, Hkv, D}),
      v(info.dtype, {Tk, Hkv, Dv}), o(info.dtype, {Tq, Hq, Dv}),
      lse(FA_DTYPE_F32, {Hq, Tq}), cuQT(FA_DTYPE_I32, {B + 1}),
      cuKT(FA_DTYPE_I32, {B + 1});
  fillRandom(q, rng);
  fillRandom(k, rng);
  fillRandom(v, rng);
  o.poison();
  lse.poison();
  for (int64_t b = 0; b <= B; ++b) {
    cuQT.set(b, cuQ[b]);
    cuKT.set(b, cuK[b]);
  }
  // ALiBi slopes per (sequence, head) or per head.
  Buffer slopes(FA_DTYPE_F32, mods.alibi == 2 ? std::vector<int64_t>{B, Hq}
                                               : std::vector<int64_t>{Hq});
  for (int64_t i = 0; i < slopes.count; ++i)
    slopes.set(i, (1 + i % 5) / 16.0);
  // Through the C++ wrapper (the paged test uses the C API).
  fa_tensor lseT = lse.tensor(), cqT = cuQT.tensor(), ckT = cuKT.tensor(),
            slopesT = slopes.tensor();
  AttentionArgs args;
  if (mods.alibi)
    args.extras.alibi = &slopesT;
  args.q = q.tensor();
  args.k = k.tensor();
  args.v = v.tensor();
  args.o = o.tensor();
  args.lse = &lseT;
  args.cuSeqlensQ = &cqT;
  args.cuSeqlensK = &ckT;
  status = kernel.attention(args);
  ASSERT_TRUE(status.ok()) << status.toString();

  int64_t bad = 0;
  for (int64_t b = 0; b < B; ++b) {
    // Sequence b as its own dense problem [1, H, L, D].
    const int64_t lq = qLens[b], lk = kLens[b];
    Buffer qb(info.dtype, {1, Hq, lq, D}), kb(info.dtype, {1, Hkv, lk, D}),
        vb(info.dtype, {1, Hkv, lk, Dv});
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < lq; ++i)
        for (int64_t d = 0; d < D; ++d)
          qb.set((h * lq + i) * D + d, q.get(((cuQ[b] + i) * Hq + h) * D + d));
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < lk; ++j) {
        for (int64_t d = 0; d < D; ++d)
          kb.set((h * lk + j) * D + d, k.get(((cuK[b] + j) * Hkv + h) * D + d));
        for (int64_t d = 0; d < Dv; ++d)
          vb.set((h * lk + j) * Dv + d,
                 v.get(((cuK[b] + j) * Hkv + h) * Dv + d));
      }
    AttentionCase c;
    c.Nq = lq;
    c.Nk = lk;
    // Sequence b's slopes as the [1, Hq] (or [Hq]) slopes of its problem.
    for (int64_t h = 0; h < Hq; ++h)
      c.alibi.push_back(slopes.get((mods.alibi == 2 ? b * Hq : 0) + h));
    std::vector<double> oRef, lseRef;
    referenceAttention(info, mods, c, qb, kb, vb, oRef, lseRef);
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < lq; ++i) {
        double gotLse = lse.get(h * Tq + cuQ[b] + i),
               wantLse = lseRef[h * lq + i];
        if (!close(gotLse, wantLse, 1e-4, 1e-4) && bad++ < 5)
          ADD_FAILURE() << name.str() << ": sequence " << b << " head " << h
                        << " row " << i << ": LSE " << gotLse
                        << ", reference " << wantLse;
        for (int64_t d = 0; d < Dv; ++d) {
          double got = o.get(((cuQ[b] + i) * Hq + h) * Dv + d),
                 want = oRef[(h * lq + i) * Dv + d];
          if (!close(got, want, 1e-5, 1e-4) && bad++ < 5)
            ADD_FAILURE() << name.str() << ": sequence " << b << " head "
                          << h << " row " << i << " O[" << d << "] = " << got
                          << ", reference " << want;
        }
      }
  }
  EXPECT_EQ(bad, 0) << name.str();
}

// attn_varlen: f32, D = 16, Hq = 4, Hkv = 2, bottom-right causal, LSE,
// 16-row tiles. Ragged lengths, an empty sequence, a sequence of queries
// without keys (O = 0, LSE = -inf), single tokens, Nq > Nk and Nq < Nk.
TEST(CpuBackendTest, VarlenBatch) {
  checkVarlen("attn_varlen", {5, 0, 37, 1, 3, 20}, {9, 4, 37, 0, 20, 11},
              31);
  checkVarlen("attn_varlen", {1}, {1}, 32);
  checkVarlen("attn_varlen", {17, 16, 33}, {17, 40, 2}, 33);
  // ALiBi slopes [B, Hq], B from the offsets.
  checkVarlen("attn_varlen_alibi", {5, 0, 18, 2}, {9, 3, 18, 0}, 34);
}

TEST(CpuBackendTest, VarlenBadOffsets) {
  Kernel kernel;
  Status status = Kernel::load(artifact("attn_varlen"), FA_DEVICE_CPU, kernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  Buffer q(FA_DTYPE_F32, {10, 4, 16}), k(FA_DTYPE_F32, {12, 2, 16}),
      v(FA_DTYPE_F32, {12, 2, 16}), o(FA_DTYPE_F32, {10, 4, 16}),
      lse(FA_DTYPE_F32, {4, 10}), cuQ(FA_DTYPE_I32, {3}),
      cuK(FA_DTYPE_I32, {3});
  fa_tensor qT = q.tensor(), kT = k.tensor(), vT = v.tensor(),
            oT = o.tensor(), lseT = lse.tensor(), cqT = cuQ.tensor(),
            ckT = cuK.tensor();
  auto launch = [&](std::vector<int32_t> qs, std::vector<int32_t> ks) {
    for (int i = 0; i < 3; ++i) {
      cuQ.set(i, qs[i]);
      cuK.set(i, ks[i]);
    }
    o.poison();
    fa_status s = fa_attention_launch_varlen(kernel.get(), &qT, &kT, &vT,
                                             &cqT, &ckT, nullptr, &oT, &lseT,
                                             nullptr);
    return std::make_pair(s, std::string(fa_last_error()));
  };
  EXPECT_EQ(launch({0, 4, 10}, {0, 12, 12}).first, FA_SUCCESS);
  auto [s1, e1] = launch({0, 6, 4}, {0, 5, 12});
  EXPECT_EQ(s1, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e1, HasSubstr("cu_seqlens_q: offsets must not decrease: entry "
                            "2 = 4 is below entry 1 = 6"));
  EXPECT_TRUE(std::isnan(o.get(0))) << "written despite the error";
  auto [s2, e2] = launch({0, 4, 10}, {0, 5, 13});
  EXPECT_EQ(s2, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e2, HasSubstr("cu_seqlens_k: the last offset 13 is past the 12 "
                            "packed key rows"));
  auto [s3, e3] = launch({-1, 4, 10}, {0, 5, 12});
  EXPECT_EQ(s3, FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(e3, HasSubstr("cu_seqlens_q: the first offset is negative"));
  EXPECT_TRUE(std::isnan(o.get(0))) << "written despite the error";
  // Offsets of different batch sizes; the dense launch function.
  Buffer cuK4(FA_DTYPE_I32, {4});
  fa_tensor ck4 = cuK4.tensor();
  EXPECT_EQ(fa_attention_launch_varlen(kernel.get(), &qT, &kT, &vT, &cqT,
                                       &ck4, nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("(B+1) is 4"));
  EXPECT_EQ(fa_attention_launch(kernel.get(), &qT, &kT, &vT, nullptr, nullptr,
                                &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("fa_attention_launch_varlen"));
  EXPECT_EQ(fa_attention_launch_varlen(kernel.get(), &qT, &kT, &vT, &cqT,
                                       nullptr, nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("cu_seqlens_k is NULL"));
  EXPECT_THAT(fa_last_error(), ::testing::Not(HasSubstr("launch it with")));
  Buffer cu0(FA_DTYPE_I32, {0});
  fa_tensor cu0T = cu0.tensor();
  EXPECT_EQ(fa_attention_launch_varlen(kernel.get(), &qT, &kT, &vT, &cu0T,
                                       &cu0T, nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("expected B + 1 >= 1 offsets"));

  // Slopes [B, Hq] with B from the offsets (3 here, B = 2).
  Kernel alibiKernel;
  status = Kernel::load(artifact("attn_varlen_alibi"), FA_DEVICE_CPU,
                        alibiKernel);
  ASSERT_TRUE(status.ok()) << status.toString();
  ASSERT_EQ(launch({0, 4, 10}, {0, 5, 12}).first, FA_SUCCESS);
  Buffer slopes(FA_DTYPE_F32, {2, 4}), slopes0(FA_DTYPE_F32, {0, 4});
  fa_tensor sT = slopes.tensor(), s0T = slopes0.tensor();
  fa_attention_extras extras{};
  extras.alibi = &sT;
  EXPECT_EQ(fa_attention_launch_varlen(alibiKernel.get(), &qT, &kT, &vT, &cqT,
                                       &ckT, &extras, &oT, &lseT, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  extras.alibi = &s0T;
  EXPECT_EQ(fa_attention_launch_varlen(alibiKernel.get(), &qT, &kT, &vT, &cqT,
                                       &ckT, &extras, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("dim 0 (B) is 0, but cu_seqlens_q "
                                         "[3] (B + 1 offsets) has B = 2"));

  // A dense kernel is not launched as a variable-length or paged one.
  Kernel dense;
  status = Kernel::load(artifact("attn_lens"), FA_DEVICE_CPU, dense);
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(fa_attention_launch_varlen(dense.get(), &qT, &kT, &vT, &cqT, &ckT,
                                       nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("is not a variable-length kernel"));
  EXPECT_EQ(fa_attention_launch_paged(dense.get(), &qT, &kT, &vT, &cqT, &ckT,
                                      nullptr, nullptr, &oT, &lseT, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("reads a contiguous K/V cache, not "
                                         "pages"));
}

TEST(CpuBackendTest, Softmax) {
  checkSoftmax("softmax_f32", {3, 50, 4}, 12, 1e-6, 1e-5, true);
  checkSoftmax("softmax_f32", {1, 1, 1}, 13, 1e-6, 1e-5, false);
  checkSoftmax("softmax_f16", {5, 300}, 14, 1e-3, 3e-3, true);
}

//===----------------------------------------------------------------------===//
// Argument validation (on attn_lens: f32, D = 16, Dv = 8, Hq = 4, Hkv = 2)
//===----------------------------------------------------------------------===//

class ValidationTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(fa_kernel_load(artifact("attn_lens").c_str(), FA_DEVICE_CPU,
                             &kernel),
              FA_SUCCESS)
        << fa_last_error();
    q = makeTensor(qData.data(), FA_DTYPE_F32, {2, 4, 3, 16});
    k = makeTensor(kData.data(), FA_DTYPE_F32, {2, 2, 5, 16});
    v = makeTensor(vData.data(), FA_DTYPE_F32, {2, 2, 5, 8});
    o = makeTensor(oData.data(), FA_DTYPE_F32, {2, 4, 3, 8});
    lse = makeTensor(lseData.data(), FA_DTYPE_F32, {2, 4, 3});
    lens = makeTensor(lensData.data(), FA_DTYPE_I32, {2});
  }
  void TearDown() override { fa_kernel_destroy(kernel); }

  fa_status launch() {
    return fa_attention_launch(kernel, &q, &k, &v, &lens, nullptr, &o, &lse,
                               nullptr);
  }

  /// Expects `launch()` to fail with an argument error containing `text`.
  void expectError(const std::string &text) {
    EXPECT_EQ(launch(), FA_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(fa_last_error(), HasSubstr(text));
  }

  fa_kernel *kernel = nullptr;
  std::vector<float> qData = std::vector<float>(2 * 4 * 3 * 16, 0.5f),
                     kData = std::vector<float>(2 * 2 * 5 * 16, 0.25f),
                     vData = std::vector<float>(2 * 2 * 5 * 8, 1.0f),
                     oData = std::vector<float>(2 * 4 * 3 * 8),
                     lseData = std::vector<float>(2 * 4 * 3);
  std::vector<int32_t> lensData = {5, 5};
  fa_tensor q, k, v, o, lse, lens;
};

TEST_F(ValidationTest, Valid) {
  ASSERT_EQ(launch(), FA_SUCCESS) << fa_last_error();
  EXPECT_STREQ(fa_last_error(), "");
  for (float x : oData)
    EXPECT_FLOAT_EQ(x, 1.0f); // every value row is 1
}

TEST_F(ValidationTest, Dtypes) {
  q.dtype = FA_DTYPE_F16;
  expectError("fa_attention_launch: q: dtype f16, but kernel 'attn_lens' "
              "takes f32");
  q.dtype = 42;
  expectError("q: unknown dtype 42");
  q.dtype = FA_DTYPE_F32;
  lens.dtype = FA_DTYPE_F32;
  expectError("kv_lens: dtype f32, but kernel 'attn_lens' takes i32");
}

TEST_F(ValidationTest, StaticDims) {
  q.sizes[3] = 32;
  q.strides[2] = 32;
  q.strides[1] = 96;
  q.strides[0] = 384;
  expectError("q [2, 4, 3, 32]: dim 3 (D) is 32, but kernel 'attn_lens' was "
              "compiled for D = 16");
  q = makeTensor(qData.data(), FA_DTYPE_F32, {2, 2, 6, 16});
  expectError("q [2, 2, 6, 16]: dim 1 (Hq) is 2, but kernel 'attn_lens' was "
              "compiled for Hq = 4");
}

TEST_F(ValidationTest, DynamicDims) {
  k = makeTensor(kData.data(), FA_DTYPE_F32, {1, 2, 10, 16});
  expectError("k [1, 2, 10, 16]: dim 0 (B) is 1, but q [2, 4, 3, 16] has B = "
              "2");
  k = makeTensor(kData.data(), FA_DTYPE_F32, {2, 2, 5, 16});
  v = makeTensor(vData.data(), FA_DTYPE_F32, {2, 2, 4, 8});
  expectError("v [2, 2, 4, 8]: dim 2 (Nk) is 4, but k [2, 2, 5, 16] has Nk = "
              "5");
  v = makeTensor(vData.data(), FA_DTYPE_F32, {2, 2, 5, 8});
  lse = makeTensor(lseData.data(), FA_DTYPE_F32, {2, 4, 2});
  expectError("lse [2, 4, 2]: dim 2 (Nq) is 2, but q [2, 4, 3, 16] has Nq = "
              "3");
  lse = makeTensor(lseData.data(), FA_DTYPE_F32, {2, 4, 3});
  lens = makeTensor(lensData.data(), FA_DTYPE_I32, {3});
  expectError("kv_lens [3]: dim 0 (B) is 3, but q [2, 4, 3, 16] has B = 2");
  lens.sizes[0] = -1;
  expectError("kv_lens [-1]: dim 0 is negative");
}

TEST_F(ValidationTest, Ranks) {
  lse = makeTensor(lseData.data(), FA_DTYPE_F32, {2, 4, 3, 1});
  expectError("lse: rank 4, but kernel 'attn_lens' takes rank 3 [B, Hq, Nq]");
  lse.rank = 9;
  expectError("lse: rank 9");
}

TEST_F(ValidationTest, Layout) {
  // Transposed heads and rows.
  std::swap(q.strides[1], q.strides[2]);
  expectError("q [2, 4, 3, 16]: strides [192, 16, 48, 1] are not contiguous "
              "row-major (expected [192, 48, 16, 1])");
  q = makeTensor(qData.data(), FA_DTYPE_F32, {2, 4, 3, 16});
  // A broadcast (zero) stride.
  k.strides[0] = 0;
  expectError("k [2, 2, 5, 16]: strides [0, 80, 16, 1] are not contiguous");
  k = makeTensor(kData.data(), FA_DTYPE_F32, {2, 2, 5, 16});
  // The stride of a size-1 dim does not matter.
  lens = makeTensor(lensData.data(), FA_DTYPE_I32, {2});
  o.data = nullptr;
  expectError("o [2, 4, 3, 8]: data is NULL");
  o.data = oData.data();
  q.data = reinterpret_cast<char *>(qData.data()) + 2;
  expectError("q: data");
  q.data = qData.data();
  EXPECT_EQ(launch(), FA_SUCCESS) << fa_last_error();
}

TEST_F(ValidationTest, SizeOneStridesIgnored) {
  // B = 1 with an odd batch stride, as frameworks produce after slicing.
  q = makeTensor(qData.data(), FA_DTYPE_F32, {1, 4, 3, 16});
  q.strides[0] = 12345;
  k = makeTensor(kData.data(), FA_DTYPE_F32, {1, 2, 5, 16});
  v = makeTensor(vData.data(), FA_DTYPE_F32, {1, 2, 5, 8});
  o = makeTensor(oData.data(), FA_DTYPE_F32, {1, 4, 3, 8});
  o.strides[0] = 0;
  lse = makeTensor(lseData.data(), FA_DTYPE_F32, {1, 4, 3});
  lens = makeTensor(lensData.data(), FA_DTYPE_I32, {1});
  EXPECT_EQ(launch(), FA_SUCCESS) << fa_last_error();
}

TEST_F(ValidationTest, MissingAndExtraOperands) {
  EXPECT_EQ(fa_attention_launch(kernel, nullptr, &k, &v, &lens, nullptr, &o,
                                &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("q is NULL, but kernel 'attn_lens' "
                                         "takes f32 [B, Hq, Nq, D]"));
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, nullptr, nullptr, &o,
                                &lse, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("kv_lens is NULL"));
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, &lens, nullptr, &o,
                                nullptr, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("lse is NULL"));
  fa_tensor mask =
      makeTensor(qData.data(), FA_DTYPE_BOOL, {2, 4, 3, 5});
  EXPECT_EQ(fa_attention_launch(kernel, &q, &k, &v, &lens, &mask, &o, &lse,
                                nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("mask was given, but kernel 'attn_lens' was compiled "
                        "without it (compile with --mask); pass NULL"));
  EXPECT_EQ(fa_attention_launch(nullptr, &q, &k, &v, &lens, nullptr, &o, &lse,
                                nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("kernel is NULL"));
  fa_tensor x = q, y = o;
  EXPECT_EQ(fa_softmax_launch(kernel, &x, &y, nullptr),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("kernel 'attn_lens' computes attention, "
                                         "not softmax"));
}

TEST_F(ValidationTest, Overlap) {
  o.data = qData.data();
  expectError("o overlaps q: outputs must not alias other operands");
  o.data = oData.data();
  lse.data = oData.data() + 4;
  expectError("o overlaps lse");
}

TEST_F(ValidationTest, EmptyLaunches) {
  // B = 0: nothing is read or written, NULL data is fine.
  fa_tensor q0 = makeTensor(nullptr, FA_DTYPE_F32, {0, 4, 3, 16});
  fa_tensor k0 = makeTensor(nullptr, FA_DTYPE_F32, {0, 2, 5, 16});
  fa_tensor v0 = makeTensor(nullptr, FA_DTYPE_F32, {0, 2, 5, 8});
  fa_tensor o0 = makeTensor(nullptr, FA_DTYPE_F32, {0, 4, 3, 8});
  fa_tensor lse0 = makeTensor(nullptr, FA_DTYPE_F32, {0, 4, 3});
  fa_tensor lens0 = makeTensor(nullptr, FA_DTYPE_I32, {0});
  EXPECT_EQ(fa_attention_launch(kernel, &q0, &k0, &v0, &lens0, nullptr, &o0,
                                &lse0, nullptr),
            FA_SUCCESS)
      << fa_last_error();
  // Nq = 0.
  q = makeTensor(qData.data(), FA_DTYPE_F32, {2, 4, 0, 16});
  o = makeTensor(oData.data(), FA_DTYPE_F32, {2, 4, 0, 8});
  lse = makeTensor(lseData.data(), FA_DTYPE_F32, {2, 4, 0});
  oData.assign(oData.size(), 7.0f);
  EXPECT_EQ(launch(), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(oData[0], 7.0f);
}

//===----------------------------------------------------------------------===//
// CPU artifact checks
//===----------------------------------------------------------------------===//

/// A copy of attn_lens in a temporary directory with edited metadata.
class CpuArtifactTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> json =
        llvm::MemoryBuffer::getFile(artifact("attn_lens"));
    ASSERT_TRUE(static_cast<bool>(json));
    base = (*json)->getBuffer().str();
    ASSERT_FALSE(llvm::sys::fs::copy_file(
        llvm::Twine(FA_TEST_ARTIFACT_DIR) + "/attn_lens.so",
        dir.file("attn_lens.so")));
  }

  fa_status load(llvm::function_ref<void(json::Object &)> mutate,
                 fa_device device = FA_DEVICE_CPU) {
    std::string path = dir.write("k.json", mutateJson(base, mutate));
    fa_kernel *kernel = nullptr;
    fa_status status = fa_kernel_load(path.c_str(), device, &kernel);
    fa_kernel_destroy(kernel);
    return status;
  }

  TempDir dir;
  std::string base;
};

TEST_F(CpuArtifactTest, Copy) {
  EXPECT_EQ(load([](json::Object &) {}), FA_SUCCESS) << fa_last_error();
  EXPECT_EQ(load([](json::Object &) {}, FA_DEVICE_CUDA),
            FA_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(fa_last_error(), HasSubstr("targets the cpu"));
}

TEST_F(CpuArtifactTest, ForeignTriple) {
  EXPECT_EQ(load([](json::Object &o) {
              (*o.getObject("target"))["triple"] = "aarch64-unknown-linux-gnu";
            }),
            FA_ERROR_UNSUPPORTED_ARCH);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("targets aarch64-unknown-linux-gnu, but this host is"));
}

TEST_F(CpuArtifactTest, MissingCpuFeature) {
  llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
  std::string absent;
  for (const char *feature : {"amx-tile", "avx512fp16", "avx10.1", "sha512",
                              "avx512vp2intersect", "sve", "sme"})
    if (host.count(feature) && !host.lookup(feature)) {
      absent = feature;
      break;
    }
  if (absent.empty())
    GTEST_SKIP() << "no known-absent feature on this host";
  EXPECT_EQ(load([&](json::Object &o) {
              o.getObject("target")->getArray("features")->push_back(absent);
            }),
            FA_ERROR_UNSUPPORTED_ARCH);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("with features this CPU"));
  EXPECT_THAT(fa_last_error(), HasSubstr(absent));
}

TEST_F(CpuArtifactTest, LibraryProblems) {
  EXPECT_EQ(load([](json::Object &o) {
              (*o.getObject("files"))["library"] = "gone.so";
            }),
            FA_ERROR_IO);
  EXPECT_THAT(fa_last_error(), HasSubstr("gone.so': no such file"));

  dir.write("garbage.so", "not a library");
  EXPECT_EQ(load([](json::Object &o) {
              (*o.getObject("files"))["library"] = "garbage.so";
            }),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("cannot load the library"));

  EXPECT_EQ(load([](json::Object &o) { o["symbol"] = "fa_other"; }),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("has no signature 'fa_signature_fa_other': it was not "
                        "compiled by this fa-compile"));

  EXPECT_EQ(load([](json::Object &o) {
              o.getObject("files")->erase("library");
            }),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("has no shared library"));
}

/// The library's embedded signature against the metadata: each edit that
/// would call the kernel with descriptors it was not compiled for is a load
/// error naming the field (before, each loaded and launched).
TEST_F(CpuArtifactTest, SignatureMismatch) {
  auto expectMismatch = [&](llvm::function_ref<void(json::Object &)> mutate,
                            const std::string &message) {
    EXPECT_EQ(load(mutate), FA_ERROR_INVALID_ARTIFACT) << message;
    EXPECT_THAT(fa_last_error(),
                HasSubstr("the metadata does not describe the library"));
    EXPECT_THAT(fa_last_error(), HasSubstr(message));
  };
  expectMismatch(
      [](json::Object &o) {
        json::Array *params = o.getArray("params");
        std::reverse(params->begin(), params->end());
      },
      "field 'params[0]': the kernel was compiled for 'q query f32 [B, Hq, "
      "Nq, D] align 4', the metadata says 'lse lse f32 [B, Hq, Nq] align 4'");
  expectMismatch([](json::Object &o) { o["heads"] = 8; },
                 "field 'heads': the kernel was compiled for '4', the "
                 "metadata says '8'");
  expectMismatch(
      [](json::Object &o) {
        o["has_lse"] = false;
        json::Array *params = o.getArray("params");
        params->erase(params->end() - 1);
      },
      "field 'has_lse': the kernel was compiled for 'true', the metadata "
      "says 'false'");
  expectMismatch([](json::Object &o) { o["block_q"] = 32; },
                 "field 'block_q'");
  expectMismatch(
      [](json::Object &o) {
        (*(*o.getArray("params"))[0].getAsObject())["alignment"] = 16;
      },
      "field 'params[0]': the kernel was compiled for 'q query f32 [B, Hq, "
      "Nq, D] align 4', the metadata says 'q query f32 [B, Hq, Nq, D] align "
      "16'");

  // Fields the signature does not cover may change; the hash must not.
  EXPECT_EQ(load([](json::Object &o) { o["name"] = "renamed"; }), FA_SUCCESS)
      << fa_last_error();
  EXPECT_EQ(load([](json::Object &o) { o["signature"] = "0123456789abcdef"; }),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(),
              HasSubstr("field 'signature': '0123456789abcdef', but the "
                        "fields give "));
  EXPECT_EQ(load([](json::Object &o) { o.erase("signature"); }),
            FA_ERROR_INVALID_ARTIFACT);
  EXPECT_THAT(fa_last_error(), HasSubstr("missing field 'signature'"));
}

} // namespace
