//===- LowerMerge.cpp - fa.merge to linalg --------------------------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// fa.merge rescales S partial (O, LSE) pairs by exp(LSE_s - max_s LSE_s) and
// normalizes, the online softmax's rule applied once across partials. Four
// linalg.generic ops over the rows (d...): the maximum LSE (a reduction over
// s), the sum of the weights and the weighted sum of the O rows (reductions
// over s; a partial with LSE = -inf has weight 0 and its O is never read
// into the sum), then O and LSE (0 and -inf for a row with no partial).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FA/Transforms/Transforms.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FALOWERMERGEPASS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;
using namespace mlir::fa;

namespace {

struct LowerMerge final : OpRewritePattern<MergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MergeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value po = op.getPartialOutput(), pl = op.getPartialLse();
    // Rows d... (k dims), then Dv.
    int64_t k = cast<RankedTensorType>(pl.getType()).getRank() - 1;
    Type f32 = rewriter.getF32Type();
    SmallVector<OpFoldResult> rowSizes =
        tensor::getMixedSizes(rewriter, loc, pl);
    rowSizes.erase(rowSizes.begin());
    SmallVector<OpFoldResult> outSizes =
        tensor::getMixedSizes(rewriter, loc, po);
    outSizes.erase(outSizes.begin());
    auto cF = [&](OpBuilder &b, float v) -> Value {
      return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
    };
    float ninf = -std::numeric_limits<float>::infinity();
    auto filled = [&](ArrayRef<OpFoldResult> sizes, float v) {
      Value e = tensor::EmptyOp::create(rewriter, loc, sizes, f32);
      return linalg::FillOp::create(rewriter, loc, cF(rewriter, v), e)
          .getResult(0);
    };

    // Maps over loops (d..., [v,] s): the rows, the partial rows (s, d...),
    // the O rows and the partial O rows.
    auto map = [&](unsigned numLoops, ArrayRef<int64_t> dims) {
      SmallVector<AffineExpr> exprs;
      for (int64_t d : dims)
        exprs.push_back(getAffineDimExpr(d, ctx));
      return AffineMap::get(numLoops, 0, exprs, ctx);
    };
    SmallVector<int64_t> rows, sRows, rowsV, sRowsV;
    for (int64_t d = 0; d < k; ++d)
      rows.push_back(d);
    // Loops of the row reductions: (d..., s), s = k.
    sRows.push_back(k);
    sRows.append(rows);
    // Loops of the O reduction: (d..., v, s), v = k, s = k + 1.
    rowsV = rows;
    rowsV.push_back(k);
    sRowsV.push_back(k + 1);
    sRowsV.append(rowsV);
    SmallVector<int64_t> sRowsOfV = {k + 1};
    sRowsOfV.append(rows);

    auto iters = [&](unsigned parallel, bool reduction) {
      SmallVector<utils::IteratorType> it(parallel,
                                          utils::IteratorType::parallel);
      if (reduction)
        it.push_back(utils::IteratorType::reduction);
      return it;
    };
    // The weight exp(LSE_s - Mu) of a partial (Mu: the max, 0 when -inf),
    // and whether it is empty: fa.merge's rule (AttentionSemantics).
    auto weight = [&](OpBuilder &b, Value lse, Value m, Value &empty) {
      AttentionSemantics::MergeWeight w =
          AttentionSemantics::mergeWeight(b, loc, lse, m);
      empty = w.empty;
      return w.weight;
    };

    // M = max_s LSE_s.
    Value ninfRows = filled(rowSizes, ninf);
    Value m =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{ninfRows.getType()}, ValueRange{pl},
            ValueRange{ninfRows},
            SmallVector<AffineMap>{map(k + 1, sRows), map(k + 1, rows)},
            iters(k, true),
            [&](OpBuilder &b, Location, ValueRange args) {
              linalg::YieldOp::create(
                  b, loc,
                  ValueRange{arith::MaximumFOp::create(b, loc, args[0],
                                                       args[1])});
            })
            .getResult(0);
    // L = sum_s w_s (empty partials: 0).
    Value zeroRows = filled(rowSizes, 0.0f);
    Value l =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{zeroRows.getType()}, ValueRange{pl, m},
            ValueRange{zeroRows},
            SmallVector<AffineMap>{map(k + 1, sRows), map(k + 1, rows),
                                   map(k + 1, rows)},
            iters(k, true),
            [&](OpBuilder &b, Location, ValueRange args) {
              Value empty;
              Value w = weight(b, args[0], args[1], empty);
              w = arith::SelectOp::create(b, loc, empty, cF(b, 0.0f), w);
              linalg::YieldOp::create(
                  b, loc, ValueRange{arith::AddFOp::create(b, loc, args[2], w)});
            })
            .getResult(0);
    // A[d..., v] = sum_s w_s O_s[d..., v] over the partials with keys.
    Value zeroOut = filled(outSizes, 0.0f);
    Value acc =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{zeroOut.getType()}, ValueRange{po, pl, m},
            ValueRange{zeroOut},
            SmallVector<AffineMap>{map(k + 2, sRowsV), map(k + 2, sRowsOfV),
                                   map(k + 2, rows), map(k + 2, rowsV)},
            iters(k + 1, true),
            [&](OpBuilder &b, Location, ValueRange args) {
              Value empty;
              Value w = weight(b, args[1], args[2], empty);
              Value term = arith::MulFOp::create(b, loc, w, args[0]);
              Value sum = arith::AddFOp::create(b, loc, args[3], term);
              linalg::YieldOp::create(
                  b, loc,
                  ValueRange{
                      arith::SelectOp::create(b, loc, empty, args[3], sum)});
            })
            .getResult(0);
    // O = A / L (0 for a row without any key), in the output's type.
    Type outElt = getElementTypeOrSelf(op.getOutput().getType());
    Value o =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{op.getOutput().getType()},
            ValueRange{acc, l}, ValueRange{op.getOutput()},
            SmallVector<AffineMap>{map(k + 1, rowsV), map(k + 1, rows),
                                   map(k + 1, rowsV)},
            iters(k + 1, false),
            [&](OpBuilder &b, Location, ValueRange args) {
              Value v = AttentionSemantics::mergedOutput(b, loc, args[0],
                                                         args[1]);
              if (outElt != b.getF32Type())
                v = arith::TruncFOp::create(b, loc, outElt, v);
              linalg::YieldOp::create(b, loc, ValueRange{v});
            })
            .getResult(0);
    SmallVector<Value> results = {o};
    if (Value lseInit = op.getLse()) {
      // LSE = Mu + log L, -inf for a row without any key.
      results.push_back(
          linalg::GenericOp::create(
              rewriter, loc, TypeRange{lseInit.getType()}, ValueRange{m, l},
              ValueRange{lseInit},
              SmallVector<AffineMap>{map(k, rows), map(k, rows),
                                     map(k, rows)},
              iters(k, false),
              [&](OpBuilder &b, Location, ValueRange args) {
                linalg::YieldOp::create(
                    b, loc,
                    ValueRange{AttentionSemantics::mergedLse(b, loc, args[0],
                                                             args[1])});
              })
              .getResult(0));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void fa::populateFALowerMergePatterns(RewritePatternSet &patterns) {
  patterns.add<LowerMerge>(patterns.getContext());
}

namespace {
struct FALowerMergePass final
    : fa::impl::FALowerMergePassBase<FALowerMergePass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFALowerMergePatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
