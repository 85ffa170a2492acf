//===- Cost.h - The static cost report of a kernel --------------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What a compiled kernel costs, before it runs (`fa-compile --report` and
// the metadata's `cost` object; docs/cost.md): FLOPs (matmul) and exps,
// bytes read and written from global memory, arithmetic intensity and the
// tiles a causal or windowed kernel visits, as formulas in the kernel's
// dynamic sizes (B, Nq, Nk, ...) and evaluated for given ones; for GPU
// kernels also each entry's registers (from ptxas) and shared memory, and
// for every chip of the chip table that runs it the blocks per SM, the
// occupancy and the roofline lower bound on time.
//
//===----------------------------------------------------------------------===//

#ifndef FA_COMPILER_COST_H
#define FA_COMPILER_COST_H

#include "fa/Runtime/KernelMetadata.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
namespace fa {
namespace compile {

/// A polynomial with real coefficients over named atoms: the symbols of a
/// kernel's shapes ("B", "Nq") and derived quantities ("min(Nq,Nk)",
/// "ceil(Nq/64)", "kept(Nq,Nk)"), whose values an environment gives. Each
/// formula is built once and both printed and evaluated, so the two cannot
/// disagree.
class CostPoly {
public:
  CostPoly() = default;
  static CostPoly constant(double value);
  static CostPoly atom(llvm::StringRef name);

  CostPoly operator+(const CostPoly &other) const;
  CostPoly operator-(const CostPoly &other) const;
  CostPoly operator*(const CostPoly &other) const;
  CostPoly operator*(double factor) const;

  /// "4096*B*Nq*Nk + 8*B*Nq", highest degree first; "0" when empty.
  std::string str() const;
  /// The value for `env`, which must give every atom.
  double evaluate(const std::map<std::string, double> &env) const;
  bool isZero() const { return terms.empty(); }

private:
  /// Sorted atom names (repeated for powers) -> coefficient.
  std::map<std::vector<std::string>, double> terms;
};

/// One GPU kernel entry's resources.
struct EntryResources {
  std::string symbol;
  int64_t threads = 0;
  int64_t sharedBytes = 0; ///< static + dynamic
  int64_t registers = 0;   ///< per thread, from ptxas; 0: unknown
  int64_t spillBytes = 0;  ///< spill stores + loads, from ptxas
  /// Blocks of the launch at the evaluated sizes.
  double blocks = 0;
};

/// Registers and spills of each entry in a `ptxas -v` log, by symbol.
std::map<std::string, EntryResources> parsePtxasLog(llvm::StringRef log);

/// One cost quantity: its formula and value at the evaluated sizes.
struct CostQuantity {
  std::string name;
  CostPoly formula;
  double value = 0;
};

/// One chip's view of a GPU kernel.
struct ChipCost {
  std::string chip, product;
  std::vector<int64_t> blocksPerSM; ///< per entry
  std::vector<double> occupancy;    ///< resident warps / the SM's maximum
  std::vector<double> waves;        ///< blocks / (blocks per SM x SMs)
  double computeSeconds = 0, memorySeconds = 0, expSeconds = 0;
  double boundSeconds = 0;
  std::string limiter; ///< "compute", "memory" or "exp"
};

/// The cost of one kernel.
struct KernelCost {
  std::string name, op, dtype, target, kernel;
  /// The dynamic sizes, in order, and their evaluated values.
  std::vector<std::pair<std::string, int64_t>> sizes;
  /// flops, exps, bytes_read, bytes_written, kept_pairs, tiles, all_tiles
  /// (attention; softmax has the first four).
  std::vector<CostQuantity> quantities;
  /// Definitions of the derived atoms the formulas use.
  std::vector<std::pair<std::string, std::string>> atoms;
  std::vector<std::string> notes;
  std::vector<EntryResources> entries; ///< GPU only
  std::vector<ChipCost> chips;         ///< GPU only

  const CostQuantity *find(llvm::StringRef name) const;
  double getIntensity() const;
};

/// The dynamic sizes of `md` and their default values: B=1, Nq=Nk=4096 for
/// attention; N0..N{r-1} = 4096 for softmax.
std::vector<std::pair<std::string, int64_t>>
getDefaultCostSizes(const ::fa::runtime::KernelMetadata &md);

/// Parses "B=2,Nq=1,Nk=8192" (any subset, any order) over the defaults.
llvm::Expected<std::vector<std::pair<std::string, int64_t>>>
parseCostSizes(const ::fa::runtime::KernelMetadata &md, llvm::StringRef text);

/// The cost of the kernel `md` describes (after its target filled it in);
/// `entries` are its GPU entries (empty on the CPU).
llvm::Expected<KernelCost>
estimateKernelCost(const ::fa::runtime::KernelMetadata &md,
                   llvm::ArrayRef<EntryResources> entries,
                   const std::vector<std::pair<std::string, int64_t>> &sizes);

/// The metadata's `cost` object.
llvm::json::Value toJson(const KernelCost &cost);

/// The human-readable report `fa-compile --report` prints.
void printCostReport(const KernelCost &cost, llvm::raw_ostream &os);

} // namespace compile
} // namespace fa
} // namespace mlir

#endif // FA_COMPILER_COST_H
