//===- ExternDynamicShared.cpp - Dynamic shared memory as .extern ---------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Upstream lowers gpu.dynamic_shared_memory to an internal zero-size global in
// address space 3, which NVPTX prints as a one-byte static `.shared`
// variable. An external declaration prints as
// `.extern .shared .align 16 .b8 name[];`, what CUDA's `extern __shared__`
// gives: zero static bytes, all of the block's shared memory dynamic.
//
//===----------------------------------------------------------------------===//

#include "fa/Codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir {
namespace fa {
#define GEN_PASS_DEF_FAEXTERNDYNAMICSHAREDPASS
#include "fa/Codegen/Passes.h.inc"
} // namespace fa
} // namespace mlir

using namespace mlir;

namespace {
struct FAExternDynamicSharedPass final
    : fa::impl::FAExternDynamicSharedPassBase<FAExternDynamicSharedPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

/// Whether `global` is what the gpu.dynamic_shared_memory lowering defines:
/// a zero-size array in shared memory with no initializer.
static bool isDynamicSharedGlobal(LLVM::GlobalOp global) {
  auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
  return array && array.getNumElements() == 0 &&
         global.getAddrSpace() ==
             static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared) &&
         !global.getValueOrNull() && global.getInitializerRegion().empty();
}

void FAExternDynamicSharedPass::runOnOperation() {
  getOperation().walk([](LLVM::GlobalOp global) {
    if (!isDynamicSharedGlobal(global))
      return;
    global.setLinkage(LLVM::Linkage::External);
    global.setDsoLocal(false);
  });
}
