//===- Cost.cpp - The static cost report of a kernel ----------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Counts what a kernel does from its metadata (docs/cost.md): the bytes
// from its parameters' shapes, the FLOPs and exps from the (query, key)
// pairs the causal/window/chunk rule keeps, the tiles from the same rule
// at tile granularity; and, per chip of the chip table, occupancy from the
// entries' resources and the roofline bound from the chip's published
// peaks.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Cost.h"

#include "fa/Target/Chips.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir::fa::compile;
namespace rt = ::fa::runtime;
using llvm::StringRef;

//===----------------------------------------------------------------------===//
// CostPoly
//===----------------------------------------------------------------------===//

CostPoly CostPoly::constant(double value) {
  CostPoly p;
  if (value != 0)
    p.terms[{}] = value;
  return p;
}

CostPoly CostPoly::atom(StringRef name) {
  CostPoly p;
  p.terms[{name.str()}] = 1;
  return p;
}

CostPoly CostPoly::operator+(const CostPoly &other) const {
  CostPoly sum = *this;
  for (const auto &[monomial, coefficient] : other.terms) {
    double &c = sum.terms[monomial];
    c += coefficient;
    if (c == 0)
      sum.terms.erase(monomial);
  }
  return sum;
}

CostPoly CostPoly::operator-(const CostPoly &other) const {
  return *this + other * -1.0;
}

CostPoly CostPoly::operator*(const CostPoly &other) const {
  CostPoly product;
  for (const auto &[m1, c1] : terms)
    for (const auto &[m2, c2] : other.terms) {
      std::vector<std::string> monomial = m1;
      monomial.insert(monomial.end(), m2.begin(), m2.end());
      llvm::sort(monomial);
      double &c = product.terms[monomial];
      c += c1 * c2;
      if (c == 0)
        product.terms.erase(monomial);
    }
  return product;
}

CostPoly CostPoly::operator*(double factor) const {
  return *this * constant(factor);
}

/// An integer exactly when it is one (up to 2^53), else 6 significant
/// digits.
static std::string formatNumber(double value) {
  if (std::fabs(value) < 9007199254740992.0 && value == std::floor(value))
    return std::to_string(static_cast<int64_t>(value));
  return llvm::formatv("{0}", llvm::format("%.6g", value)).str();
}

std::string CostPoly::str() const {
  if (terms.empty())
    return "0";
  // Highest degree first; std::map orders equal degrees by name.
  std::vector<std::pair<std::vector<std::string>, double>> ordered(
      terms.begin(), terms.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto &a, const auto &b) {
                     return a.first.size() > b.first.size();
                   });
  std::string text;
  for (auto [i, term] : llvm::enumerate(ordered)) {
    auto &[monomial, coefficient] = term;
    double c = coefficient;
    if (i)
      text += c < 0 ? " - " : " + ";
    else if (c < 0)
      text += "-";
    c = std::fabs(c);
    std::string factors;
    for (size_t j = 0; j < monomial.size();) {
      size_t k = j;
      while (k < monomial.size() && monomial[k] == monomial[j])
        ++k;
      if (!factors.empty())
        factors += "*";
      factors += monomial[j];
      if (k - j > 1)
        factors += "^" + std::to_string(k - j);
      j = k;
    }
    if (factors.empty())
      text += formatNumber(c);
    else if (c == 1)
      text += factors;
    else
      text += formatNumber(c) + "*" + factors;
  }
  return text;
}

double CostPoly::evaluate(const std::map<std::string, double> &env) const {
  double sum = 0;
  for (const auto &[monomial, coefficient] : terms) {
    double value = coefficient;
    for (const std::string &atom : monomial)
      value *= env.at(atom);
    sum += value;
  }
  return sum;
}

//===----------------------------------------------------------------------===//
// ptxas
//===----------------------------------------------------------------------===//

std::map<std::string, EntryResources>
mlir::fa::compile::parsePtxasLog(StringRef log) {
  // ptxas info    : Compiling entry function 'fa_attn' for 'sm_80'
  // ptxas info    : Function properties for fa_attn
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 80 registers, 24832 bytes smem, 400 bytes cmem[0]
  std::map<std::string, EntryResources> entries;
  std::string current;
  llvm::SmallVector<StringRef> lines;
  log.split(lines, '\n');
  for (StringRef line : lines) {
    line = line.trim();
    size_t at = line.find("Compiling entry function '");
    if (at != StringRef::npos) {
      StringRef rest =
          line.drop_front(at + strlen("Compiling entry function '"));
      current = rest.take_until([](char c) { return c == '\''; }).str();
      entries[current].symbol = current;
      continue;
    }
    if (current.empty())
      continue;
    auto numberBefore = [&](StringRef what) -> int64_t {
      size_t pos = line.find(what);
      if (pos == StringRef::npos)
        return -1;
      StringRef head = line.take_front(pos).rtrim();
      size_t space = head.find_last_of(" ,:");
      int64_t value = 0;
      if (head.drop_front(space == StringRef::npos ? 0 : space + 1)
              .getAsInteger(10, value))
        return -1;
      return value;
    };
    if (int64_t regs = numberBefore(" registers"); regs >= 0)
      entries[current].registers = regs;
    int64_t stores = numberBefore(" bytes spill stores");
    int64_t loads = numberBefore(" bytes spill loads");
    if (stores >= 0 || loads >= 0)
      entries[current].spillBytes =
          std::max<int64_t>(stores, 0) + std::max<int64_t>(loads, 0);
  }
  return entries;
}

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

std::vector<std::pair<std::string, int64_t>>
mlir::fa::compile::getDefaultCostSizes(const rt::KernelMetadata &md) {
  if (md.op == rt::OpKind::Softmax) {
    std::vector<std::pair<std::string, int64_t>> sizes;
    for (int64_t i = 0; i < md.rank; ++i)
      sizes.emplace_back("N" + std::to_string(i), 4096);
    return sizes;
  }
  return {{"B", 1}, {"Nq", 4096}, {"Nk", 4096}};
}

llvm::Expected<std::vector<std::pair<std::string, int64_t>>>
mlir::fa::compile::parseCostSizes(const rt::KernelMetadata &md,
                                  StringRef text) {
  std::vector<std::pair<std::string, int64_t>> sizes = getDefaultCostSizes(md);
  std::string names;
  for (auto [i, size] : llvm::enumerate(sizes))
    names += (i ? ", " : "") + size.first;
  llvm::SmallVector<StringRef> items;
  text.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, value] = item.trim().split('=');
    auto it =
        llvm::find_if(sizes, [&](const auto &s) { return s.first == name; });
    if (it == sizes.end())
      return llvm::createStringError("--report-sizes: '" + item.trim().str() +
                                     "': not one of this kernel's sizes (" +
                                     names + ")");
    int64_t n = 0;
    if (value.trim().getAsInteger(10, n) || n < 1 || n > (int64_t(1) << 31))
      return llvm::createStringError(
          "--report-sizes: '" + item.trim().str() +
          "': the size must be an integer from 1 to 2^31");
    it->second = n;
  }
  return sizes;
}

//===----------------------------------------------------------------------===//
// Kept pairs and visited tiles
//===----------------------------------------------------------------------===//

namespace {
/// The keys [lo, hi] that the positional rules (causality, window, chunk;
/// DESIGN.md's contract) keep for query row q; empty when lo > hi. Masks,
/// key lengths and segments are data and keep every key here.
struct KeyRule {
  rt::Causal causal;
  int64_t left, right, chunk;

  std::pair<int64_t, int64_t> range(int64_t q, int64_t nq, int64_t nk) const {
    int64_t off = causal == rt::Causal::BottomRight ? nk - nq : 0;
    int64_t pos = q + off;
    int64_t lo = 0, hi = nk - 1;
    if (causal != rt::Causal::None)
      hi = std::min(hi, pos);
    if (right >= 0)
      hi = std::min(hi, pos + right);
    if (left >= 0)
      lo = std::max(lo, pos - left);
    if (chunk > 0) {
      int64_t start =
          (pos >= 0 ? pos / chunk : -((-pos + chunk - 1) / chunk)) * chunk;
      lo = std::max(lo, start);
      hi = std::min(hi, start + chunk - 1);
    }
    return {lo, hi};
  }

  bool isDense() const {
    return causal == rt::Causal::None && left < 0 && right < 0 && chunk <= 0;
  }

  /// Sum over rows of the kept keys.
  double keptPairs(int64_t nq, int64_t nk) const {
    double sum = 0;
    for (int64_t q = 0; q < nq; ++q) {
      auto [lo, hi] = range(q, nq, nk);
      sum += std::max<int64_t>(hi - lo + 1, 0);
    }
    return sum;
  }

  /// (query tile, key tile) pairs holding a kept key: the key tiles from
  /// the first to the last key that a tile's rows keep (each row keeps an
  /// interval, and the intervals of consecutive rows overlap or touch).
  double tiles(int64_t nq, int64_t nk, int64_t bq, int64_t bk) const {
    double sum = 0;
    for (int64_t q0 = 0; q0 < nq; q0 += bq) {
      int64_t lo = nk, hi = -1;
      for (int64_t q = q0; q < std::min(nq, q0 + bq); ++q) {
        auto [rowLo, rowHi] = range(q, nq, nk);
        if (rowLo <= rowHi) {
          lo = std::min(lo, rowLo);
          hi = std::max(hi, rowHi);
        }
      }
      if (lo <= hi)
        sum += hi / bk - lo / bk + 1;
    }
    return sum;
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// The estimate
//===----------------------------------------------------------------------===//

const CostQuantity *KernelCost::find(StringRef name) const {
  for (const CostQuantity &q : quantities)
    if (q.name == name)
      return &q;
  return nullptr;
}

double KernelCost::getIntensity() const {
  const CostQuantity *flops = find("flops"), *read = find("bytes_read"),
                     *written = find("bytes_written");
  double bytes = read->value + written->value;
  return bytes > 0 ? flops->value / bytes : 0;
}

/// The atom "ceil(<size>/<tile>)".
static std::string ceilName(StringRef size, int64_t tile) {
  return ("ceil(" + size + "/" + llvm::Twine(tile) + ")").str();
}

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Whether the role is written by the kernel (else read); the split-KV
/// workspace is neither (it stays in L2 for the merge, and its size
/// depends on the launch).
static std::optional<bool> isWritten(const rt::KernelMetadata &md,
                                     rt::ParamRole role) {
  switch (role) {
  case rt::ParamRole::PartialOutput:
  case rt::ParamRole::PartialLse:
    return std::nullopt;
  case rt::ParamRole::Output:
  case rt::ParamRole::Lse:
    return md.op != rt::OpKind::AttentionBackward;
  case rt::ParamRole::GradQuery:
  case rt::ParamRole::GradKey:
  case rt::ParamRole::GradValue:
    return true;
  default:
    return false;
  }
}

llvm::Expected<KernelCost> mlir::fa::compile::estimateKernelCost(
    const rt::KernelMetadata &md, llvm::ArrayRef<EntryResources> entries,
    const std::vector<std::pair<std::string, int64_t>> &sizes) {
  KernelCost cost;
  cost.name = md.name;
  cost.op = rt::getOpName(md.op);
  cost.dtype = rt::getDTypeName(md.dtype);
  cost.target = md.target.kind == rt::TargetKind::Cuda ? md.target.chip : "cpu";
  cost.kernel = md.kernel;
  cost.sizes = sizes;

  std::map<std::string, double> env;
  for (const auto &[name, value] : sizes)
    env[name] = double(value);
  auto size = [&](StringRef name) { return int64_t(env.at(name.str())); };

  // Bytes: every parameter's elements times its element size, the fixed
  // symbols (heads, head dims, page size) folded in.
  bool attention = rt::isAttentionOp(md.op);
  CostPoly read, written;
  for (const rt::ParamInfo &param : md.params) {
    std::optional<bool> writes = isWritten(md, param.role);
    if (!writes)
      continue;
    CostPoly elements = CostPoly::constant(1);
    for (const rt::ShapeDim &dim : param.shape) {
      if (!dim.isSymbol()) {
        elements = elements * double(dim.size);
      } else if (std::optional<int64_t> fixed =
                     rt::getStaticSymbolValue(md, dim.symbol)) {
        elements = elements * double(*fixed);
      } else {
        std::string atom = dim.symbol == "B+1" ? "(B+1)" : dim.symbol;
        elements = elements * CostPoly::atom(atom);
      }
    }
    CostPoly bytes = elements * double(rt::getDTypeSize(param.dtype));
    (*writes ? written : read) = (*writes ? written : read) + bytes;
  }
  // The symbols of the serving forms, for B sequences of Nq queries and Nk
  // keys each.
  if (attention) {
    int64_t b = size("B"), nq = size("Nq"), nk = size("Nk");
    env["(B+1)"] = double(b + 1);
    env["Tq"] = double(b * nq);
    env["Tk"] = double(b * nk);
    if (md.pageSize > 0) {
      env["M"] = double(ceilDiv(nk, md.pageSize));
      env["P"] = double(b * ceilDiv(nk, md.pageSize));
    }
    if (md.modifiers.hasBlockMask()) {
      env["QT"] = double(ceilDiv(nq, md.modifiers.blockTileQ));
      env["KT"] = double(ceilDiv(nk, md.modifiers.blockTileKV));
    }
  }

  if (!attention) {
    // Softmax: per element a max, a subtract, a sum and a scale, and an
    // exp.
    CostPoly elements = CostPoly::constant(1);
    for (const auto &[name, value] : sizes)
      elements = elements * CostPoly::atom(name);
    cost.quantities.push_back({"flops", elements * 4.0});
    cost.quantities.push_back({"exps", elements});
  } else {
    int64_t nq = size("Nq"), nk = size("Nk");
    KeyRule rule{md.causal, md.modifiers.windowLeft, md.modifiers.windowRight,
                 md.modifiers.chunk};
    // Kept (query, key) pairs of one head: closed forms for the dense and
    // causal cases (cross-checked against the row sum in the unit tests),
    // else the row sum as an atom.
    CostPoly pairs;
    CostPoly qn = CostPoly::atom("Nq"), kn = CostPoly::atom("Nk");
    if (rule.isDense()) {
      pairs = qn * kn;
    } else if (md.modifiers.windowLeft < 0 && md.modifiers.windowRight < 0 &&
               md.modifiers.chunk <= 0) {
      CostPoly m = CostPoly::atom("min(Nq,Nk)");
      env["min(Nq,Nk)"] = double(std::min(nq, nk));
      // m(m+1)/2 kept by the m rows on or past the diagonal, plus the
      // rows before (top-left: Nq - m rows keeping all Nk keys) or the
      // keys left of the diagonal (bottom-right: m rows, Nk - m keys).
      CostPoly triangle = (m * m + m) * 0.5;
      pairs = md.causal == rt::Causal::TopLeft ? triangle + (qn - m) * kn
                                               : triangle + m * (kn - m);
      cost.atoms.emplace_back("min(Nq,Nk)", "the smaller of Nq and Nk");
    } else {
      pairs = CostPoly::atom("kept(Nq,Nk)");
      env["kept(Nq,Nk)"] = rule.keptPairs(nq, nk);
      cost.atoms.emplace_back(
          "kept(Nq,Nk)",
          "the (query, key) pairs of one head that the causal, window and "
          "chunk rules keep: the sum over rows q of the keys k with "
          "max(0, q+off-L, chunk start) <= k <= min(Nk-1, q+off [causal], "
          "q+off+R, chunk end)");
    }
    CostPoly heads = CostPoly::atom("B") * double(md.heads);
    CostPoly kept = heads * pairs;
    // Matmul FLOPs per kept pair: forward S = QK^T (2D) and PV (2Dv);
    // backward also dV (2Dv), dP (2Dv), dK (2D) and dQ (2D).
    double perPair = md.op == rt::OpKind::AttentionBackward
                         ? 2.0 * (3 * md.headDim + 2 * md.valueHeadDim)
                         : 2.0 * (md.headDim + md.valueHeadDim);
    cost.quantities.push_back({"flops", kept * perPair});
    cost.quantities.push_back({"exps", kept});
    cost.quantities.push_back({"bytes_read", read});
    cost.quantities.push_back({"bytes_written", written});
    cost.quantities.push_back({"kept_pairs", kept});

    // Tiles of block_q x block_kv.
    int64_t bq = md.blockQ, bk = md.blockKV;
    std::string qTiles = ceilName("Nq", bq), kTiles = ceilName("Nk", bk);
    CostPoly all = heads * CostPoly::atom(qTiles) * CostPoly::atom(kTiles);
    env[qTiles] = double(ceilDiv(nq, bq));
    env[kTiles] = double(ceilDiv(nk, bk));
    CostPoly visited = all;
    if (!rule.isDense()) {
      visited = heads * CostPoly::atom("tiles(Nq,Nk)");
      env["tiles(Nq,Nk)"] = rule.tiles(nq, nk, bq, bk);
      cost.atoms.emplace_back(
          "tiles(Nq,Nk)",
          llvm::formatv("the ({0} x {1}) tiles of one head holding a kept "
                        "pair: per query tile, the key tiles from the first "
                        "to the last key its rows keep",
                        bq, bk)
              .str());
    }
    cost.quantities.push_back({"tiles", visited});
    cost.quantities.push_back({"all_tiles", all});
    if (md.mask != rt::MaskKind::None || md.hasKvLens ||
        md.modifiers.segments || md.modifiers.maskMod ||
        md.modifiers.hasBlockMask())
      cost.notes.push_back(
          "masks, key lengths, segments and mask_mod remove keys the data "
          "decides: the counts keep those keys (an upper bound)");
    if (md.varlen || md.pageSize > 0)
      cost.notes.push_back("evaluated for B sequences of Nq queries and Nk "
                           "keys each (Tq = B*Nq, Tk = B*Nk; pages P = "
                           "B*M, M = ceil(Nk/S))");
    if (md.splitKv)
      cost.notes.push_back("split-KV: the f32 partials (workspace) are not "
                           "counted; the grid's x axis is times the parts");
    if (md.op == rt::OpKind::AttentionBackward &&
        md.target.kind == rt::TargetKind::Cuda)
      cost.notes.push_back(
          "the GPU backward's dQ kernel recomputes S and dP (a further "
          "2(D+Dv) FLOPs and one exp per kept pair), not counted");
  }
  // Quantities built before the byte sums (softmax) take them now.
  if (!attention) {
    cost.quantities.push_back({"bytes_read", read});
    cost.quantities.push_back({"bytes_written", written});
  }
  for (CostQuantity &q : cost.quantities)
    q.value = q.formula.evaluate(env);

  if (md.target.kind != rt::TargetKind::Cuda || !md.launch) {
    cost.notes.push_back(
        "the CPU roofline needs this machine's measured peak: "
        "bench/cpu/bench_roofline.py prints the bound beside the time");
    return cost;
  }

  // GPU: the entries' grids at the evaluated sizes.
  auto axisBlocks = [&](rt::GridAxis axis) -> double {
    int64_t nq = attention ? size("Nq") : 0, nk = attention ? size("Nk") : 0;
    switch (axis) {
    case rt::GridAxis::QueryTiles:
      return double(ceilDiv(nq, md.blockQ));
    case rt::GridAxis::Heads:
      return double(md.heads);
    case rt::GridAxis::Batch:
      return env.at("B");
    case rt::GridAxis::PackedQueryTiles:
      return double(ceilDiv(nq * (md.heads / md.kvHeads), md.blockQ));
    case rt::GridAxis::KvHeads:
      return double(md.kvHeads);
    case rt::GridAxis::KeyTiles:
      return double(ceilDiv(nk, md.blockKV));
    }
    return 1;
  };
  auto gridBlocks = [&](const std::array<rt::GridAxis, 3> &grid) {
    return axisBlocks(grid[0]) * axisBlocks(grid[1]) * axisBlocks(grid[2]);
  };
  cost.entries.assign(entries.begin(), entries.end());
  for (EntryResources &entry : cost.entries)
    entry.blocks = entry.symbol == md.launch->dkdvSymbol
                       ? gridBlocks(md.launch->dkdvGrid)
                       : gridBlocks(md.launch->grid);

  std::optional<::fa::target::ChipName> built =
      ::fa::target::ChipName::parse(md.target.chip);
  bool tensorCores = md.kernel == "mma" || md.kernel == "wgmma";
  double flops = cost.find("flops")->value;
  double bytes =
      cost.find("bytes_read")->value + cost.find("bytes_written")->value;
  double exps = cost.find("exps")->value;
  for (const ::fa::target::ChipInfo &chip : ::fa::target::getChips()) {
    std::optional<::fa::target::ChipName> name =
        ::fa::target::ChipName::parse(chip.name);
    if (!built || !name)
      continue;
    // Arch-specific code runs on its chip only; other PTX on its chip and
    // later ones (each physical chip once: skip the `a` rows there).
    bool runs = built->suffix == 'a'
                    ? md.target.chip == chip.name
                    : name->suffix != 'a' && name->getComputeCapability() >=
                                                 built->getComputeCapability();
    if (!runs)
      continue;
    ChipCost c;
    c.chip = chip.name;
    c.product = chip.product;
    for (const EntryResources &entry : cost.entries) {
      int64_t warps = ceilDiv(entry.threads, 32);
      int64_t blocks =
          std::min(chip.maxBlocksPerSM, chip.maxThreadsPerSM / (warps * 32));
      if (entry.sharedBytes > chip.optInSharedBytesPerBlock)
        blocks = 0;
      blocks = std::min(
          blocks, chip.sharedBytesPerSM /
                      (entry.sharedBytes +
                       ::fa::target::ChipInfo::kReservedSharedBytesPerBlock));
      if (entry.registers > 0) {
        int64_t unit = ::fa::target::ChipInfo::kRegisterAllocationUnit;
        int64_t perWarp = ceilDiv(entry.registers * 32, unit) * unit;
        blocks = std::min(blocks, (chip.registersPerSM / perWarp) / warps);
      }
      c.blocksPerSM.push_back(blocks);
      c.occupancy.push_back(double(blocks * warps * 32) /
                            double(chip.maxThreadsPerSM));
      c.waves.push_back(blocks > 0 ? entry.blocks / double(blocks * chip.sms)
                                   : 0);
    }
    double peak = (tensorCores ? chip.tensorTflops : chip.f32Tflops) * 1e12;
    c.computeSeconds = flops / peak;
    c.memorySeconds = bytes / (chip.bandwidthGBs * 1e9);
    c.expSeconds = exps / chip.getExpPerSecond();
    c.boundSeconds =
        std::max({c.computeSeconds, c.memorySeconds, c.expSeconds});
    c.limiter = c.boundSeconds == c.computeSeconds  ? "compute"
                : c.boundSeconds == c.memorySeconds ? "memory"
                                                    : "exp";
    cost.chips.push_back(std::move(c));
  }
  return cost;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

static llvm::json::Value jsonNumber(double value) {
  if (std::fabs(value) < 9007199254740992.0 && value == std::floor(value))
    return static_cast<int64_t>(value);
  return value;
}

llvm::json::Value mlir::fa::compile::toJson(const KernelCost &cost) {
  llvm::json::Object formulas, values, at;
  for (const CostQuantity &q : cost.quantities) {
    formulas[q.name] = q.formula.str();
    values[q.name] = jsonNumber(q.value);
  }
  values["intensity"] = cost.getIntensity();
  for (const auto &[name, value] : cost.sizes)
    at[name] = value;
  llvm::json::Object atoms;
  for (const auto &[name, meaning] : cost.atoms)
    atoms[name] = meaning;
  llvm::json::Object object{{"formulas", std::move(formulas)},
                            {"at", std::move(at)},
                            {"values", std::move(values)}};
  if (!atoms.empty())
    object["atoms"] = std::move(atoms);
  if (!cost.notes.empty())
    object["notes"] = llvm::json::Array(cost.notes);
  if (!cost.entries.empty()) {
    llvm::json::Array entries;
    for (const EntryResources &e : cost.entries) {
      llvm::json::Object entry{{"symbol", e.symbol},
                               {"threads", e.threads},
                               {"shared_bytes", e.sharedBytes},
                               {"blocks", jsonNumber(e.blocks)}};
      if (e.registers > 0) {
        entry["registers"] = e.registers;
        entry["spill_bytes"] = e.spillBytes;
      }
      entries.push_back(std::move(entry));
    }
    object["kernels"] = std::move(entries);
    llvm::json::Array chips;
    for (const ChipCost &c : cost.chips) {
      llvm::json::Array blocks, occupancy, waves;
      for (auto [b, o, w] : llvm::zip(c.blocksPerSM, c.occupancy, c.waves)) {
        blocks.push_back(b);
        occupancy.push_back(o);
        waves.push_back(w);
      }
      chips.push_back(llvm::json::Object{{"chip", c.chip},
                                         {"product", c.product},
                                         {"blocks_per_sm", std::move(blocks)},
                                         {"occupancy", std::move(occupancy)},
                                         {"waves", std::move(waves)},
                                         {"bound_seconds", c.boundSeconds},
                                         {"compute_seconds", c.computeSeconds},
                                         {"memory_seconds", c.memorySeconds},
                                         {"exp_seconds", c.expSeconds},
                                         {"limiter", c.limiter}});
    }
    object["chips"] = std::move(chips);
  }
  return llvm::json::Value(std::move(object));
}

static std::string formatValue(double value) {
  if (std::fabs(value) >= 1e6)
    return llvm::formatv("{0}", llvm::format("%.4g", value)).str();
  return formatNumber(std::round(value * 1000) / 1000);
}

static std::string formatSeconds(double s) {
  if (s >= 1e-3)
    return llvm::formatv("{0:f3} ms", s * 1e3).str();
  return llvm::formatv("{0:f2} us", s * 1e6).str();
}

void mlir::fa::compile::printCostReport(const KernelCost &cost,
                                        llvm::raw_ostream &os) {
  os << "cost of '" << cost.name << "' (" << cost.op << ", " << cost.dtype
     << ", " << cost.target;
  if (!cost.kernel.empty())
    os << ", " << cost.kernel << " kernel";
  os << ")\n  evaluated at ";
  for (auto [i, size] : llvm::enumerate(cost.sizes))
    os << (i ? ", " : "") << size.first << " = " << size.second;
  os << "\n";
  size_t width = 0;
  for (const CostQuantity &q : cost.quantities)
    width = std::max(width, q.name.size());
  for (const CostQuantity &q : cost.quantities)
    os << "  " << llvm::left_justify(q.name, width) << "  "
       << formatValue(q.value) << "  = " << q.formula.str() << "\n";
  os << "  " << llvm::left_justify("intensity", width) << "  "
     << llvm::formatv("{0:f1}", cost.getIntensity())
     << " FLOP/byte (flops / (bytes_read + bytes_written))\n";
  for (const auto &[name, meaning] : cost.atoms)
    os << "  where " << name << ": " << meaning << "\n";
  for (const EntryResources &e : cost.entries) {
    os << "  kernel " << e.symbol << ": " << e.threads << " threads, "
       << e.sharedBytes << " bytes shared";
    if (e.registers > 0)
      os << ", " << e.registers << " registers, " << e.spillBytes
         << " bytes spilled";
    else
      os << ", registers unknown (no ptxas)";
    os << "; " << formatValue(e.blocks) << " blocks\n";
  }
  for (const ChipCost &c : cost.chips) {
    os << "  " << c.chip << " (" << c.product << "):";
    for (size_t i = 0; i < c.blocksPerSM.size(); ++i) {
      if (c.blocksPerSM[i] == 0) {
        os << (i ? ";" : "") << " does not fit";
        continue;
      }
      os << (i ? ";" : "") << " " << c.blocksPerSM[i] << " blocks/SM, "
         << llvm::formatv("{0:f0}", c.occupancy[i] * 100) << "% occupancy, "
         << llvm::formatv("{0:f2}", c.waves[i]) << " waves";
    }
    os << "; bound " << formatSeconds(c.boundSeconds) << ", " << c.limiter
       << "-bound (compute " << formatSeconds(c.computeSeconds) << ", memory "
       << formatSeconds(c.memorySeconds) << ", exp "
       << formatSeconds(c.expSeconds) << ")\n";
  }
  for (const std::string &note : cost.notes)
    os << "  note: " << note << "\n";
}
