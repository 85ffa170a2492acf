//===- LegalizeMmaBF16.cpp - bf16 mma.sync for the NVVM lowering ---------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Upstream's nvgpu-to-nvvm conversion cannot lower nvgpu.mma.sync on bf16
// fragments ("failed to deduce operand PTX types"). This pass rewrites each
// such m16n8k16 op into nvvm.mma.sync with every row of the A and B
// fragments packed into one i32 register, before the upstream pipeline
// runs; the kernels fa-map-to-tensor-cores emits (and the interpreter runs)
// keep nvgpu.mma.sync.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FALEGALIZEMMABF16PASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;


namespace {
struct FALegalizeMmaBF16Pass final
    : fa::impl::FALegalizeMmaBF16PassBase<FALegalizeMmaBF16Pass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

/// The rows of a vector<Nx2xbf16> fragment as N packed i32 values.
static SmallVector<Value> packRows(OpBuilder &b, Location loc, Value frag) {
  auto type = cast<VectorType>(frag.getType());
  auto rowType = VectorType::get({2}, type.getElementType());
  auto packedType = VectorType::get({1}, b.getI32Type());
  SmallVector<Value> rows;
  for (int64_t i = 0; i < type.getDimSize(0); ++i) {
    Value row = vector::ExtractOp::create(b, loc, frag, ArrayRef<int64_t>{i});
    assert(row.getType() == rowType && "expected a vector<Nx2xbf16>");
    Value packed = vector::BitCastOp::create(b, loc, packedType, row);
    rows.push_back(
        vector::ExtractOp::create(b, loc, packed, ArrayRef<int64_t>{0}));
  }
  return rows;
}

void FALegalizeMmaBF16Pass::runOnOperation() {
  SmallVector<nvgpu::MmaSyncOp> ops;
  getOperation().walk([&](nvgpu::MmaSyncOp op) {
    auto aType = cast<VectorType>(op.getMatrixA().getType());
    if (aType.getElementType().isBF16())
      ops.push_back(op);
  });
  for (nvgpu::MmaSyncOp op : ops) {
    auto aType = cast<VectorType>(op.getMatrixA().getType());
    auto bType = cast<VectorType>(op.getMatrixB().getType());
    auto cType = cast<VectorType>(op.getMatrixC().getType());
    SmallVector<int64_t> shape =
        llvm::to_vector(llvm::map_range(op.getMmaShape(), [](Attribute a) {
          return cast<IntegerAttr>(a).getInt();
        }));
    if (shape != SmallVector<int64_t>{16, 8, 16} ||
        aType.getShape() != ArrayRef<int64_t>{4, 2} ||
        bType.getShape() != ArrayRef<int64_t>{2, 2} ||
        !bType.getElementType().isBF16() ||
        cType.getShape() != ArrayRef<int64_t>{2, 2} ||
        !cType.getElementType().isF32()) {
      op.emitOpError("fa-legalize-mma-bf16: only m16n8k16 with "
                     "vector<4x2xbf16>, vector<2x2xbf16> and vector<2x2xf32> "
                     "fragments is supported");
      return signalPassFailure();
    }
    OpBuilder b(op);
    Location loc = op.getLoc();
    SmallVector<Value> a = packRows(b, loc, op.getMatrixA());
    SmallVector<Value> bb = packRows(b, loc, op.getMatrixB());
    SmallVector<Value> c;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t k = 0; k < 2; ++k)
        c.push_back(vector::ExtractOp::create(b, loc, op.getMatrixC(),
                                              ArrayRef<int64_t>{r, k}));
    Type f32 = b.getF32Type();
    auto resultType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    auto mma = NVVM::MmaOp::create(
        b, loc, resultType, a, bb, c, shape, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                      NVVM::MMATypes::bf16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value> d;
    for (int64_t i = 0; i < 4; ++i)
      d.push_back(LLVM::ExtractValueOp::create(b, loc, mma.getResult(), i));
    Value result = vector::FromElementsOp::create(b, loc, cType, d);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
  }
}
