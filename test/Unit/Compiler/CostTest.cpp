//===- CostTest.cpp - The static cost report ------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The cost report's counts against counts written here from the contract
// (DESIGN.md): kept pairs and visited tiles by brute force over every
// (query, key) position, bytes from the tensors' sizes, occupancy from the
// CUDA occupancy rules worked by hand.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Cost.h"

#include "fa/Target/Chips.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <algorithm>

using namespace mlir::fa::compile;
namespace rt = ::fa::runtime;

namespace {

rt::KernelMetadata makeAttention(rt::Causal causal, int64_t left = -1,
                                 int64_t right = -1, int64_t chunk = 0,
                                 rt::DType dtype = rt::DType::F32) {
  rt::KernelMetadata md;
  md.name = "attn";
  md.op = rt::OpKind::Attention;
  md.dtype = dtype;
  md.headDim = 64;
  md.valueHeadDim = 32;
  md.heads = 4;
  md.kvHeads = 2;
  md.causal = causal;
  md.blockQ = 16;
  md.blockKV = 8;
  md.modifiers.windowLeft = left;
  md.modifiers.windowRight = right;
  md.modifiers.chunk = chunk;
  md.params = rt::getCanonicalParams(md, rt::DType::I8, false, false);
  return md;
}

/// Whether query q keeps key k by the contract's positional rules.
bool keeps(const rt::KernelMetadata &md, int64_t q, int64_t k, int64_t nq,
           int64_t nk) {
  int64_t off = md.causal == rt::Causal::BottomRight ? nk - nq : 0;
  int64_t pos = q + off;
  if (md.causal != rt::Causal::None && k > pos)
    return false;
  if (md.modifiers.windowLeft >= 0 && k < pos - md.modifiers.windowLeft)
    return false;
  if (md.modifiers.windowRight >= 0 && k > pos + md.modifiers.windowRight)
    return false;
  if (int64_t c = md.modifiers.chunk; c > 0) {
    auto floorDiv = [](int64_t a, int64_t b) {
      return a >= 0 ? a / b : -((-a + b - 1) / b);
    };
    if (floorDiv(pos, c) != k / c)
      return false;
  }
  return true;
}

struct Counts {
  double pairs = 0, tiles = 0;
};

/// Per head, by brute force: kept pairs, and tiles holding one.
Counts bruteForce(const rt::KernelMetadata &md, int64_t nq, int64_t nk) {
  Counts counts;
  int64_t tq = (nq + md.blockQ - 1) / md.blockQ;
  int64_t tk = (nk + md.blockKV - 1) / md.blockKV;
  std::vector<char> tile(tq * tk, 0);
  for (int64_t q = 0; q < nq; ++q)
    for (int64_t k = 0; k < nk; ++k)
      if (keeps(md, q, k, nq, nk)) {
        counts.pairs += 1;
        tile[(q / md.blockQ) * tk + k / md.blockKV] = 1;
      }
  counts.tiles = double(std::count(tile.begin(), tile.end(), 1));
  return counts;
}

KernelCost estimate(const rt::KernelMetadata &md, int64_t b, int64_t nq,
                    int64_t nk, llvm::ArrayRef<EntryResources> entries = {}) {
  llvm::Expected<KernelCost> cost =
      estimateKernelCost(md, entries, {{"B", b}, {"Nq", nq}, {"Nk", nk}});
  EXPECT_TRUE(static_cast<bool>(cost)) << llvm::toString(cost.takeError());
  return std::move(*cost);
}

double value(const KernelCost &cost, llvm::StringRef name) {
  const CostQuantity *q = cost.find(name);
  EXPECT_NE(q, nullptr) << name.str();
  return q ? q->value : -1;
}

} // namespace

TEST(CostPolyTest, PrintsAndEvaluates) {
  CostPoly b = CostPoly::atom("B"), n = CostPoly::atom("Nq");
  CostPoly p =
      b * n * n * 3.0 + b * 2.0 - b * 2.0 + n * 0.5 + CostPoly::constant(7);
  EXPECT_EQ(p.str(), "3*B*Nq^2 + 0.5*Nq + 7");
  EXPECT_DOUBLE_EQ(p.evaluate({{"B", 2}, {"Nq", 10}}), 600 + 5 + 7);
  EXPECT_EQ((n - n * 2.0).str(), "-Nq");
  EXPECT_EQ(CostPoly().str(), "0");
}

// The closed forms (dense, causal) and the row sums (windows, chunks) keep
// exactly the pairs the contract keeps, and the visited tiles are exactly
// the tiles holding a kept pair, at ragged and unequal sizes.
TEST(CostTest, KeptPairsAndTilesMatchBruteForce) {
  const rt::KernelMetadata kernels[] = {
      makeAttention(rt::Causal::None),
      makeAttention(rt::Causal::TopLeft),
      makeAttention(rt::Causal::BottomRight),
      makeAttention(rt::Causal::None, 5, 3),
      makeAttention(rt::Causal::BottomRight, 17, -1),
      makeAttention(rt::Causal::TopLeft, -1, -1, 12),
      makeAttention(rt::Causal::BottomRight, 4, -1, 24),
      makeAttention(rt::Causal::None, -1, 0),
  };
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 1}, {1, 37}, {37, 1}, {50, 50}, {33, 70}, {70, 33}, {64, 64}};
  for (const rt::KernelMetadata &md : kernels)
    for (auto [nq, nk] : shapes) {
      SCOPED_TRACE(testing::Message()
                   << rt::getCausalName(md.causal) << " window "
                   << md.modifiers.windowLeft << "," << md.modifiers.windowRight
                   << " chunk " << md.modifiers.chunk << " Nq " << nq << " Nk "
                   << nk);
      Counts expected = bruteForce(md, nq, nk);
      KernelCost cost = estimate(md, 3, nq, nk);
      EXPECT_EQ(value(cost, "kept_pairs"), 3 * 4 * expected.pairs);
      EXPECT_EQ(value(cost, "tiles"), 3 * 4 * expected.tiles);
      EXPECT_EQ(value(cost, "exps"), 3 * 4 * expected.pairs);
      EXPECT_EQ(value(cost, "flops"), 3 * 4 * expected.pairs * 2 * (64 + 32));
      double all = 3 * 4 * double((nq + 15) / 16) * double((nk + 7) / 8);
      EXPECT_EQ(value(cost, "all_tiles"), all);
    }
}

TEST(CostTest, FormulasInTheDynamicSizes) {
  KernelCost dense = estimate(makeAttention(rt::Causal::None), 1, 128, 128);
  // 2 (D + Dv) Hq = 2 * 96 * 4.
  EXPECT_EQ(dense.find("flops")->formula.str(), "768*B*Nk*Nq");
  EXPECT_EQ(dense.find("tiles")->formula.str(), "4*B*ceil(Nk/8)*ceil(Nq/16)");
  KernelCost causal = estimate(makeAttention(rt::Causal::TopLeft), 1, 128, 128);
  EXPECT_EQ(causal.find("kept_pairs")->formula.str(),
            "4*B*Nk*Nq - 4*B*Nk*min(Nq,Nk) + 2*B*min(Nq,Nk)^2 + "
            "2*B*min(Nq,Nk)");
  KernelCost window =
      estimate(makeAttention(rt::Causal::None, 5, 3), 1, 128, 128);
  EXPECT_EQ(window.find("kept_pairs")->formula.str(), "4*B*kept(Nq,Nk)");
  EXPECT_EQ(window.atoms.size(), 2u);
}

// Bytes: every tensor once, at its element size; outputs written.
TEST(CostTest, BytesFromTheTensors) {
  rt::KernelMetadata md =
      makeAttention(rt::Causal::None, -1, -1, 0, rt::DType::F16);
  md.mask = rt::MaskKind::Bool;
  md.hasKvLens = true;
  md.hasLse = true;
  md.params = rt::getCanonicalParams(md, rt::DType::I8, /*batch=*/true, false);
  int64_t b = 2, nq = 100, nk = 300;
  KernelCost cost = estimate(md, b, nq, nk);
  double read = 2.0 * (b * 4 * nq * 64 + b * 2 * nk * 64 + b * 2 * nk * 32) +
                1.0 * (1 * 4 * nq * nk) + 4.0 * b;
  double written = 2.0 * b * 4 * nq * 32 + 4.0 * b * 4 * nq;
  EXPECT_EQ(value(cost, "bytes_read"), read);
  EXPECT_EQ(value(cost, "bytes_written"), written);
  EXPECT_DOUBLE_EQ(cost.getIntensity(),
                   value(cost, "flops") / (read + written));
  EXPECT_FALSE(cost.notes.empty()); // the mask is counted as keeping all
}

TEST(CostTest, BackwardCountsTenDPerPair) {
  rt::KernelMetadata md = makeAttention(rt::Causal::None);
  md.op = rt::OpKind::AttentionBackward;
  md.valueHeadDim = 64;
  md.params = rt::getCanonicalParams(md, rt::DType::I8, false, false);
  KernelCost cost = estimate(md, 1, 40, 40);
  EXPECT_EQ(value(cost, "flops"), 4 * 40 * 40 * 10 * 64.0);
  // Reads Q, K, V, O, dO (f32) and the LSE; writes dQ, dK, dV.
  double read = 4.0 * (4 * 40 * 64 * 3 + 2 * 40 * 64 * 2) + 4.0 * 4 * 40;
  double written = 4.0 * (4 * 40 * 64 + 2 * 40 * 64 * 2);
  EXPECT_EQ(value(cost, "bytes_read"), read);
  EXPECT_EQ(value(cost, "bytes_written"), written);
}

TEST(CostTest, Softmax) {
  rt::KernelMetadata md;
  md.name = "sm";
  md.op = rt::OpKind::Softmax;
  md.dtype = rt::DType::BF16;
  md.rank = 2;
  md.dimension = 1;
  md.params = rt::getCanonicalParams(md, rt::DType::I8, false, false);
  llvm::Expected<KernelCost> cost =
      estimateKernelCost(md, {}, {{"N0", 3}, {"N1", 1000}});
  ASSERT_TRUE(static_cast<bool>(cost));
  EXPECT_EQ(value(*cost, "exps"), 3000);
  EXPECT_EQ(value(*cost, "bytes_read"), 6000);
  EXPECT_EQ(value(*cost, "bytes_written"), 6000);
}

TEST(CostTest, ParsesSizes) {
  rt::KernelMetadata md = makeAttention(rt::Causal::None);
  auto sizes = parseCostSizes(md, "Nk=8192, B=2");
  ASSERT_TRUE(static_cast<bool>(sizes));
  std::vector<std::pair<std::string, int64_t>> expected = {
      {"B", 2}, {"Nq", 4096}, {"Nk", 8192}};
  EXPECT_EQ(*sizes, expected);
  for (const char *bad : {"N0=3", "B=0", "Nq=x", "Nk=-4", "B"}) {
    auto err = parseCostSizes(md, bad);
    ASSERT_FALSE(static_cast<bool>(err)) << bad;
    EXPECT_NE(llvm::toString(err.takeError()).find("--report-sizes"),
              std::string::npos);
  }
}

TEST(CostTest, PtxasLog) {
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'fa_a_dkdv' for 'sm_80'\n"
      "ptxas info    : Function properties for fa_a_dkdv\n"
      "    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 113 registers, 35072 bytes smem, 400 bytes "
      "cmem[0]\n"
      "ptxas info    : Compiling entry function 'fa_a' for 'sm_80'\n"
      "ptxas info    : Function properties for fa_a\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 80 registers, 24832 bytes smem, 400 bytes "
      "cmem[0]\n";
  std::map<std::string, EntryResources> entries = parsePtxasLog(log);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries["fa_a_dkdv"].registers, 113);
  EXPECT_EQ(entries["fa_a_dkdv"].spillBytes, 20);
  EXPECT_EQ(entries["fa_a"].registers, 80);
  EXPECT_EQ(entries["fa_a"].spillBytes, 0);
}

// Occupancy and the roofline on the chip table, worked by hand.
TEST(CostTest, GpuOccupancyAndRoofline) {
  rt::KernelMetadata md =
      makeAttention(rt::Causal::None, -1, -1, 0, rt::DType::F16);
  md.target.kind = rt::TargetKind::Cuda;
  md.target.chip = "sm_80";
  md.kernel = "mma";
  md.symbol = "fa_attn";
  md.launch = rt::LaunchInfo();
  EntryResources entry;
  entry.symbol = "fa_attn";
  entry.threads = 128;
  entry.sharedBytes = 48 * 1024;
  entry.registers = 128;
  int64_t nq = 4096, nk = 4096;
  KernelCost cost = estimate(md, 2, nq, nk, {entry});
  ASSERT_EQ(cost.entries.size(), 1u);
  EXPECT_EQ(cost.entries[0].blocks, (4096 / 16) * 4 * 2);
  // sm_80, sm_86, sm_89, sm_90 run sm_80 code; sm_90a is sm_90's chip.
  ASSERT_EQ(cost.chips.size(), 4u);
  const ChipCost &a100 = cost.chips[0];
  EXPECT_EQ(a100.chip, "sm_80");
  // Threads: 2048/128 = 16; shared: 164 KiB / 49 KiB = 3; registers:
  // 128 x 32 = 4096 per warp, 65536 / 4096 = 16 warps = 4 blocks.
  EXPECT_EQ(a100.blocksPerSM[0], 3);
  EXPECT_DOUBLE_EQ(a100.occupancy[0], 12.0 / 64.0);
  EXPECT_DOUBLE_EQ(a100.waves[0], 2048.0 / (3 * 108));
  // sm_86: 100 KiB per SM -> 2 blocks.
  EXPECT_EQ(cost.chips[1].blocksPerSM[0], 2);
  const ::fa::target::ChipInfo *chip = ::fa::target::lookupChip("sm_80");
  double flops = 2.0 * 4 * nq * nk * 2 * 96;
  EXPECT_DOUBLE_EQ(a100.computeSeconds, flops / (chip->tensorTflops * 1e12));
  double bytes = value(cost, "bytes_read") + value(cost, "bytes_written");
  EXPECT_DOUBLE_EQ(a100.memorySeconds, bytes / (chip->bandwidthGBs * 1e9));
  EXPECT_DOUBLE_EQ(a100.expSeconds, 2.0 * 4 * nq * nk / (16.0 * 108 * 1410e6));
  EXPECT_DOUBLE_EQ(
      a100.boundSeconds,
      std::max({a100.computeSeconds, a100.memorySeconds, a100.expSeconds}));
  // A block larger than the chip allows does not fit.
  entry.sharedBytes = 120 * 1024;
  KernelCost big = estimate(md, 2, nq, nk, {entry});
  EXPECT_EQ(big.chips[0].blocksPerSM[0], 1);
  EXPECT_EQ(big.chips[1].blocksPerSM[0], 0);
  // Arch-specific code runs on its own chip only.
  md.target.chip = "sm_90a";
  KernelCost hopper = estimate(md, 2, nq, nk, {entry});
  ASSERT_EQ(hopper.chips.size(), 1u);
  EXPECT_EQ(hopper.chips[0].chip, "sm_90a");
  std::string text;
  llvm::raw_string_ostream os(text);
  printCostReport(hopper, os);
  EXPECT_NE(text.find("sm_90a (H100 SXM5 80GB): 1 blocks/SM"),
            std::string::npos)
      << text;
}
