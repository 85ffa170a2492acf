//===- MergeKernel.cpp - fa.merge as a warp-per-row GPU kernel -----------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers a kernel function holding one fa.merge into the form fa-map-to-gpu
// maps: a block forall over row blocks and a warp forall whose warp merges
// one row, its lanes over the Dv columns. See the pass description.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Passes.h"
#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "fa/Codegen/GPU/GpuKernelUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAGPUMERGEPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

namespace {

/// Builds the body of one merge kernel function.
class MergeKernelBuilder {
public:
  MergeKernelBuilder(Location loc, const MergeKernelOperands &args,
                     int64_t numWarps)
      : args(args), numWarps(numWarps), ctx(loc.getContext()), loc(loc) {
    auto poType = cast<MemRefType>(args.partialOutput.getType());
    valueDim = poType.getDimSize(poType.getRank() - 1);
    rowRank = poType.getRank() - 2;
    colSlots = (valueDim + kWarpSize - 1) / kWarpSize;
    outElt = cast<MemRefType>(args.output.getType()).getElementType();
  }

  /// Replaces the body of `func` by the kernel.
  void build(func::FuncOp func);
  /// Builds the block forall of the kernel at `b`'s insertion point.
  scf::ForallOp buildForall(OpBuilder &b);

private:
  Value cIdx(OpBuilder &b, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  Value cF32(OpBuilder &b, float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value splat(OpBuilder &b, Value scalar) {
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({kWarpSize}, scalar.getType()), scalar);
  }
  /// The merge of row `row` (clamped into range; `inRow` guards the
  /// stores) by one warp.
  void buildRow(OpBuilder &b, Value row, Value inRow);

  MergeKernelOperands args;
  int64_t numWarps, valueDim = 0, rowRank = 0, colSlots = 0;
  Type outElt;
  MLIRContext *ctx;
  Location loc;
};

} // namespace

void MergeKernelBuilder::buildRow(OpBuilder &b, Value row, Value inRow) {
  auto f32Lanes = VectorType::get({kWarpSize}, b.getF32Type());
  Value laneIds = vector::StepOp::create(
      b, loc, VectorType::get({kWarpSize}, b.getIndexType()));
  // The row's position d... (row-major over the LSE's dims 1..).
  SmallVector<Value> at(rowRank);
  Value rest = row;
  for (int64_t d = rowRank - 1; d >= 0; --d) {
    Value size = memref::DimOp::create(b, loc, args.partialLse, d + 1);
    at[d] = arith::RemUIOp::create(b, loc, rest, size);
    rest = arith::DivUIOp::create(b, loc, rest, size);
  }
  Value numParts = memref::DimOp::create(b, loc, args.partialLse, 0);
  auto lseAt = [&](OpBuilder &lb, Value s) {
    SmallVector<Value> idx = {s};
    idx.append(at);
    return memref::LoadOp::create(lb, loc, args.partialLse, idx).getResult();
  };

  // M = max_s LSE_s.
  Value ninf = cF32(b, -std::numeric_limits<float>::infinity());
  auto maxLoop = scf::ForOp::create(
      b, loc, cIdx(b, 0), numParts, cIdx(b, 1), ValueRange{ninf},
      [&](OpBuilder &lb, Location, Value s, ValueRange m) {
        scf::YieldOp::create(
            lb, loc,
            ValueRange{arith::MaximumFOp::create(lb, loc, m[0], lseAt(lb, s))});
      });
  Value m = maxLoop.getResult(0);

  // L = sum_s w_s and acc = sum_s w_s O_s over the partials with keys; the
  // lanes hold columns lane + 32 j.
  SmallVector<Value> cols, colsC;
  for (int64_t j = 0; j < colSlots; ++j) {
    Value c = arith::AddIOp::create(b, loc, laneIds,
                                    splat(b, cIdx(b, j * kWarpSize)));
    cols.push_back(c);
    colsC.push_back(arith::MinSIOp::create(
        b, loc, c, splat(b, cIdx(b, valueDim - 1))));
  }
  Value allTrue = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(VectorType::get({kWarpSize}, b.getI1Type()),
                             true));
  SmallVector<Value> inits = {cF32(b, 0.0f)};
  for (int64_t j = 0; j < colSlots; ++j)
    inits.push_back(
        arith::ConstantOp::create(b, loc, b.getZeroAttr(f32Lanes)));
  auto sumLoop = scf::ForOp::create(
      b, loc, cIdx(b, 0), numParts, cIdx(b, 1), inits,
      [&](OpBuilder &lb, Location, Value s, ValueRange acc) {
        AttentionSemantics::MergeWeight w =
            AttentionSemantics::mergeWeight(lb, loc, lseAt(lb, s), m);
        SmallVector<Value> next;
        Value l = arith::AddFOp::create(lb, loc, acc[0], w.weight);
        next.push_back(arith::SelectOp::create(lb, loc, w.empty, acc[0], l));
        SmallVector<Value> base = {s};
        base.append(at);
        base.push_back(cIdx(lb, 0));
        Value emptyV = splat(lb, w.empty);
        Value wV = splat(lb, w.weight);
        Value pass =
            arith::ConstantOp::create(lb, loc, lb.getZeroAttr(f32Lanes));
        for (int64_t j = 0; j < colSlots; ++j) {
          Value o = vector::GatherOp::create(lb, loc, f32Lanes,
                                             args.partialOutput, base,
                                             colsC[j], allTrue, pass);
          // An empty partial's O (NaN included) never reaches the sum.
          Value sum = arith::AddFOp::create(
              lb, loc, acc[j + 1], arith::MulFOp::create(lb, loc, wV, o));
          next.push_back(
              arith::SelectOp::create(lb, loc, emptyV, acc[j + 1], sum));
        }
        scf::YieldOp::create(lb, loc, next);
      });
  Value l = sumLoop.getResult(0);

  // O = acc / l (0 without keys), in the output's type.
  SmallVector<Value> oBase(at);
  oBase.push_back(cIdx(b, 0));
  auto outLanes = VectorType::get({kWarpSize}, outElt);
  for (int64_t j = 0; j < colSlots; ++j) {
    Value o =
        AttentionSemantics::mergedOutput(b, loc, sumLoop.getResult(j + 1), l);
    if (outLanes != f32Lanes)
      o = arith::TruncFOp::create(b, loc, outLanes, o);
    Value mask = arith::AndIOp::create(
        b, loc, splat(b, inRow),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, cols[j],
                              splat(b, cIdx(b, valueDim))));
    vector::ScatterOp::create(b, loc, Type(), args.output, oBase, colsC[j],
                              mask, o);
  }
  if (args.lse) {
    // Lane 0 stores the row's LSE (its last index as the lane offset).
    Value lse = AttentionSemantics::mergedLse(b, loc, m, l);
    SmallVector<Value> lBase(at.begin(), at.end() - 1);
    lBase.push_back(cIdx(b, 0));
    Value laneZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                           laneIds, splat(b, cIdx(b, 0)));
    Value mask = arith::AndIOp::create(b, loc, laneZero, splat(b, inRow));
    vector::ScatterOp::create(b, loc, Type(), args.lse, lBase,
                              splat(b, at.back()), mask, splat(b, lse));
  }
}

void MergeKernelBuilder::build(func::FuncOp func) {
  Block &entry = func.getBody().front();
  Operation *ret = entry.getTerminator();
  SmallVector<Operation *> toErase;
  for (Operation &o : llvm::reverse(entry.without_terminator()))
    toErase.push_back(&o);
  OpBuilder b(ret);
  (void)buildForall(b);
  for (Operation *o : toErase)
    o->erase();
}

scf::ForallOp MergeKernelBuilder::buildForall(OpBuilder &b) {
  // Rows: the product of the LSE's dims 1.. (the partials' d...).
  Value rows = cIdx(b, 1);
  for (int64_t d = 0; d < rowRank; ++d)
    rows = arith::MulIOp::create(
        b, loc, rows, memref::DimOp::create(b, loc, args.partialLse, d + 1));
  Value blocksX =
      arith::CeilDivUIOp::create(b, loc, rows, cIdx(b, numWarps));
  auto blocks = createBlockForall(
      b, loc, {blocksX, b.getIndexAttr(1), b.getIndexAttr(1)});
  {
    OpBuilder bb = OpBuilder::atBlockBegin(blocks.getBody());
    Value blockIdx = blocks.getInductionVars()[0];
    // Every value the block body uses is computed inside it.
    Value total = cIdx(bb, 1);
    for (int64_t d = 0; d < rowRank; ++d)
      total = arith::MulIOp::create(
          bb, loc, total,
          memref::DimOp::create(bb, loc, args.partialLse, d + 1));
    auto warps = scf::ForallOp::create(
        bb, loc, ArrayRef<OpFoldResult>{bb.getIndexAttr(numWarps)},
        ValueRange{},
        bb.getArrayAttr(
            {gpu::GPUWarpMappingAttr::get(ctx, gpu::MappingId::DimX)}));
    OpBuilder wb = OpBuilder::atBlockBegin(warps.getBody());
    Value row = arith::AddIOp::create(
        wb, loc, arith::MulIOp::create(wb, loc, blockIdx, cIdx(wb, numWarps)),
        warps.getInductionVars()[0]);
    Value inRow =
        arith::CmpIOp::create(wb, loc, arith::CmpIPredicate::slt, row, total);
    // The last block's spare warps merge the last row again and store
    // nothing (total >= 1 wherever a block runs).
    Value rowC = arith::MinSIOp::create(
        wb, loc, row, arith::SubIOp::create(wb, loc, total, cIdx(wb, 1)));
    buildRow(wb, rowC, inRow);
  }
  // exp and log in base 2, which fa-map-to-gpu turns into ex2.approx and
  // lg2.approx (math.exp / math.log would need libdevice):
  // exp(x) = exp2(x log2 e), log(x) = log2(x) ln 2.
  SmallVector<Operation *> expLog;
  blocks.walk([&](Operation *o) {
    if (isa<math::ExpOp, math::LogOp>(o))
      expLog.push_back(o);
  });
  for (Operation *o : expLog) {
    OpBuilder rb(o);
    Value x = o->getOperand(0);
    Value r;
    if (isa<math::ExpOp>(o)) {
      r = math::Exp2Op::create(
          rb, loc, arith::MulFOp::create(rb, loc, x, cF32(rb, M_LOG2E)));
    } else {
      r = arith::MulFOp::create(rb, loc, math::Log2Op::create(rb, loc, x),
                                cF32(rb, M_LN2));
    }
    o->getResult(0).replaceAllUsesWith(r);
    o->erase();
  }
  return blocks;
}

scf::ForallOp gpukernel::buildMergeForall(OpBuilder &b, Location loc,
                                          const MergeKernelOperands &args,
                                          int64_t numWarps) {
  return MergeKernelBuilder(loc, args, numWarps).buildForall(b);
}

namespace {
struct FAGpuMergePass final
    : fa::impl::FAGpuMergePassBase<FAGpuMergePass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void FAGpuMergePass::runOnOperation() {
  func::FuncOp func = getOperation();
  SmallVector<MergeOp> ops;
  func.walk([&](MergeOp op) { ops.push_back(op); });
  if (ops.empty())
    return;
  bool hasAttention = false;
  func.walk([&](AttentionOp) { hasAttention = true; });
  if (ops.size() != 1 || hasAttention || !func.getBody().hasOneBlock()) {
    func.emitError() << "fa-gpu-merge: expected one fa.merge per kernel "
                        "function and nothing else to lower, found "
                     << ops.size() << " fa.merge"
                     << (hasAttention ? " and an fa.attention" : "");
    return signalPassFailure();
  }
  MergeOp op = ops.front();
  FailureOr<MergeKernelOperands> args = matchMergeKernelForm(op);
  if (failed(args)) {
    (void)emitNotInKernelFormError(op, getArgument());
    return signalPassFailure();
  }
  if (failed(verifyKernelResultUses(op, getArgument())))
    return signalPassFailure();
  auto poType = cast<MemRefType>(args->partialOutput.getType());
  if (poType.getRank() < 3 ||
      ShapedType::isDynamic(poType.getDimSize(poType.getRank() - 1))) {
    op.emitError() << "fa-gpu-merge: the partial outputs must be [S, d..., "
                      "Dv] with at least one row dim and a static Dv, got "
                   << poType;
    return signalPassFailure();
  }
  if (numWarps <= 0 || numWarps > 32) {
    op.emitError() << "fa-gpu-merge: warps must be in [1, 32], got "
                   << static_cast<int64_t>(numWarps);
    return signalPassFailure();
  }
  MergeKernelBuilder(op.getLoc(), *args, numWarps).build(func);
  MLIRContext *ctx = &getContext();
  func->setAttr(
      kConfigAttrName,
      DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, "threads"),
                               IntegerAttr::get(IndexType::get(ctx),
                                                numWarps * kWarpSize)),
                NamedAttribute(StringAttr::get(ctx, "merge"),
                               UnitAttr::get(ctx))}));
}
