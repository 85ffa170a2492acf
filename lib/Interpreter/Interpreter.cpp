//===- Interpreter.cpp - SIMT interpreter of gpu-level IR -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The interpreter first compiles each function it runs (the host function
// and every kernel it launches) into a tree of `Instr`s: one per op, with its
// operands and results numbered as register slots and its regions compiled
// recursively. Unsupported ops, types and attributes are rejected there,
// before anything runs. Execution then walks the tree for an active set of
// threads; a register slot holds one value per thread of the block.
//
//===----------------------------------------------------------------------===//

#include "fa/Interpreter/Interpreter.h"
#include "fa/Interpreter/FloatBits.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <tuple>

using namespace mlir;
using namespace mlir::fa;
using llvm::formatv;

//===----------------------------------------------------------------------===//
// Values and types
//===----------------------------------------------------------------------===//

namespace {

/// One thread's value of an SSA value: an integer (sign-extended from its
/// width; i1 true is -1) or a float (the exact value of its type).
union Slot {
  int64_t i;
  double f;
};

/// The float types.
enum class FKind : uint8_t { F16, BF16, F32, F64 };

/// The element types of memrefs.
enum class EKind : uint8_t { F16, BF16, F32, F64, I1, I8, I16, I32, I64 };

size_t getEKindSize(EKind k) {
  switch (k) {
  case EKind::F16:
  case EKind::BF16:
  case EKind::I16:
    return 2;
  case EKind::F32:
  case EKind::I32:
    return 4;
  case EKind::F64:
  case EKind::I64:
    return 8;
  case EKind::I1:
  case EKind::I8:
    return 1;
  }
  return 8;
}

bool isFloatEKind(EKind k) {
  return k == EKind::F16 || k == EKind::BF16 || k == EKind::F32 ||
         k == EKind::F64;
}

std::optional<FKind> getFKind(Type t) {
  if (t.isF16())
    return FKind::F16;
  if (t.isBF16())
    return FKind::BF16;
  if (t.isF32())
    return FKind::F32;
  if (t.isF64())
    return FKind::F64;
  return std::nullopt;
}

/// The width of an integer or index type (index is 64 bits), or 0.
unsigned getIntWidth(Type t) {
  if (t.isIndex())
    return 64;
  if (auto it = dyn_cast<IntegerType>(t))
    return it.getWidth() <= 64 ? it.getWidth() : 0;
  return 0;
}

std::optional<EKind> getEKind(Type t) {
  if (auto f = getFKind(t)) {
    switch (*f) {
    case FKind::F16:
      return EKind::F16;
    case FKind::BF16:
      return EKind::BF16;
    case FKind::F32:
      return EKind::F32;
    case FKind::F64:
      return EKind::F64;
    }
  }
  switch (getIntWidth(t)) {
  case 1:
    return EKind::I1;
  case 8:
    return EKind::I8;
  case 16:
    return EKind::I16;
  case 32:
    return EKind::I32;
  case 64:
    return EKind::I64;
  default:
    return std::nullopt;
  }
}

/// Whether `space` is workgroup memory: #gpu.address_space<workgroup> or
/// the NVVM shared address space 3.
bool isWorkgroupSpace(Attribute space) {
  if (gpu::GPUDialect::isWorkgroupMemoryAddressSpace(space))
    return true;
  if (auto i = dyn_cast_or_null<IntegerAttr>(space))
    return i.getInt() == 3;
  return false;
}

inline int64_t sext(int64_t v, unsigned w) {
  if (w >= 64)
    return v;
  unsigned s = 64 - w;
  return static_cast<int64_t>(static_cast<uint64_t>(v) << s) >> s;
}

inline uint64_t zext(int64_t v, unsigned w) {
  if (w >= 64)
    return static_cast<uint64_t>(v);
  return static_cast<uint64_t>(v) & ((uint64_t(1) << w) - 1);
}

inline double roundF(FKind k, double x) {
  switch (k) {
  case FKind::F16:
    return roundToHalf(x);
  case FKind::BF16:
    return roundToBFloat16(x);
  case FKind::F32:
    return static_cast<double>(static_cast<float>(x));
  case FKind::F64:
    return x;
  }
  return x;
}

/// Flushes a subnormal f32 value to a zero of the same sign.
inline float flushF32(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

const double *getHalfTable() {
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (uint32_t b = 0; b < 65536; ++b)
      t[b] = halfBitsToDouble(static_cast<uint16_t>(b));
    return t;
  }();
  return table.data();
}

/// The shape of a vector type (empty for scalars and other types).
SmallVector<int64_t, 4> getVectorShape(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return SmallVector<int64_t, 4>(vt.getShape());
  return {};
}

/// The number of register slots a value of type `t` takes: one per vector
/// element, one per field of an !llvm.struct, one for everything else.
uint32_t getNumSlots(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return static_cast<uint32_t>(vt.getNumElements());
  if (auto st = dyn_cast<LLVM::LLVMStructType>(t))
    return std::max<uint32_t>(1, st.getBody().size());
  return 1;
}

/// Whether `t` is a non-empty !llvm.struct of scalars (integers, index, f16,
/// bf16, f32, f64): the wgmma accumulator, one register slot per field.
bool isFlatStruct(Type t) {
  auto st = dyn_cast<LLVM::LLVMStructType>(t);
  if (!st || st.isOpaque() || st.getBody().empty())
    return false;
  return llvm::all_of(st.getBody(),
                      [](Type f) { return getFKind(f) || getIntWidth(f); });
}

/// The scalar type of `t`: its element type for vectors, `t` otherwise.
Type getScalarType(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    return vt.getElementType();
  return t;
}

/// Row-major strides of `shape`.
SmallVector<int64_t, 4> getRowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The multi-index of linear element `e` of `shape`.
SmallVector<int64_t, 4> delinearize(int64_t e, ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = e % shape[d];
    e /= shape[d];
  }
  return idx;
}

unsigned log2Size(size_t s) {
  unsigned l = 0;
  while ((size_t(1) << l) < s)
    ++l;
  return l;
}

//===----------------------------------------------------------------------===//
// Compiled form
//===----------------------------------------------------------------------===//

enum class Opc : uint8_t {
  // arith
  ConstI,
  ConstF,
  AddI,
  SubI,
  MulI,
  DivSI,
  DivUI,
  RemSI,
  RemUI,
  CeilDivSI,
  CeilDivUI,
  FloorDivSI,
  MinSI,
  MaxSI,
  MinUI,
  MaxUI,
  AndI,
  OrI,
  XOrI,
  ShLI,
  ShRSI,
  ShRUI,
  CmpI,
  AddF,
  SubF,
  MulF,
  DivF,
  RemF,
  MaximumF,
  MinimumF,
  MaxNumF,
  MinNumF,
  NegF,
  CmpF,
  Select,
  ExtF,
  TruncF,
  SIToFP,
  UIToFP,
  FPToSI,
  FPToUI,
  ExtSI,
  ExtUI,
  TruncI,
  IndexCast,
  IndexCastUI,
  BitcastIToF,
  BitcastFToI,
  BitcastFToF,
  BitcastIToI,
  // math and NVVM intrinsics
  Exp2,
  Exp,
  Log,
  Log2,
  Sqrt,
  Rsqrt,
  AbsF,
  Fma,
  Floor,
  Ceil,
  Tanh,
  Ex2Approx,
  Lg2Approx,
  // gpu
  ThreadId,
  BlockId,
  BlockDim,
  GridDim,
  LaneId,
  Barrier,
  Shuffle,
  LaunchFunc,
  DynamicShared,
  // memref
  GetGlobal,
  Load,
  Store,
  Dim,
  MemRefAlias,
  View,
  SubView,
  // vector
  ConstVec,
  Move,
  Reduction,
  // nvgpu
  LdMatrix,
  MmaSync,
  AsyncCopy,
  AsyncCommit,
  AsyncWait,
  // Hopper warpgroup MMA and shared-memory addresses
  ExtractPtr,
  WgFence,
  WgCommit,
  WgWait,
  WgMma,
  FenceProxy,
  NamedBarrier,
  // affine
  AffineApply,
  AffineMin,
  AffineMax,
  // scf, cf
  For,
  If,
  Br,
  CondBr,
};

struct CRegion;

/// One compiled op.
struct Instr {
  Opc opc;
  /// The float type of the op (the source type for conversions and cmpf).
  FKind fk = FKind::F32;
  /// The destination float type of conversions.
  FKind fk2 = FKind::F32;
  /// The element type of a memory access.
  EKind ek = EKind::F32;
  /// Integer widths: the result's (and operands') and a conversion source's.
  uint8_t w = 64, w2 = 64;
  /// Flush subnormals (ftz intrinsics); unsigned compare (scf.for).
  bool flag = false;
  /// Predicate, dimension, integer constant, shuffle mode, global index.
  int64_t imm = 0;
  double fimm = 0;
  /// Elementwise ops: the number of elements (1 for scalars). Memory ops:
  /// the elements accessed per thread.
  uint32_t n = 1;
  /// Elementwise ops with a scalar condition (arith.select on vectors).
  bool scalarCond = false;
  Operation *op = nullptr;
  /// Operand and result slots: the first slot of each value (scf.for and
  /// scf.if: every slot of every value).
  SmallVector<uint32_t, 4> in;
  SmallVector<uint32_t, 2> out;
  /// Move: the source slot of each result element.
  std::vector<uint32_t> src;
  /// ConstVec: the value of each element.
  std::vector<Slot> consts;
  /// Memory ops: the shape of the vector accessed (empty for scalars);
  /// alignment in bytes (0: none required).
  SmallVector<int64_t, 4> vshape;
  int64_t align = 0;
  /// Affine ops.
  AffineMap map;
  std::unique_ptr<CRegion> r0, r1;
};

/// A compiled single-block region.
struct CRegion {
  SmallVector<uint32_t, 4> args;
  std::vector<Instr> body;
  /// The operands of the terminator (scf.yield, gpu.return, func.return).
  SmallVector<uint32_t, 4> yields;
  /// In a function body of several blocks: the cf.br / cf.cond_br that ends
  /// the block (null for a return).
  std::unique_ptr<Instr> branch;
};

/// A compiled host function or kernel.
struct CFunction {
  Operation *op = nullptr;
  bool isKernel = false;
  uint32_t numSlots = 0;
  /// The entry block.
  CRegion body;
  /// A body of several blocks (unstructured control flow): every block, the
  /// entry block (`body`) first.
  std::vector<CRegion *> blocks;
  std::vector<std::unique_ptr<CRegion>> ownedBlocks;
  /// The types of the function arguments (and their slots: body.args).
  SmallVector<Type> argTypes;
  /// Workgroup globals the kernel uses (index: Instr::imm of GetGlobal).
  SmallVector<memref::GlobalOp> sharedGlobals;
  /// Workgroup attributions: their slots and types.
  SmallVector<std::pair<uint32_t, MemRefType>> workgroupAttribs;
  /// The kernel issues nvvm.wgmma.mma_async (its results are tracked until
  /// their group is retired).
  bool hasWgmma = false;
};

//===----------------------------------------------------------------------===//
// Compiler
//===----------------------------------------------------------------------===//

class Compiler {
public:
  explicit Compiler(CFunction &fn) : fn(fn) {}

  LogicalResult compileFunction(Operation *funcOp, Region &body);

private:
  /// The first register slot of `v` (a vector takes one per element).
  uint32_t slotOf(Value v) {
    auto [it, inserted] = slots.try_emplace(v, fn.numSlots);
    if (inserted)
      fn.numSlots += getNumSlots(v.getType());
    return it->second;
  }
  /// Appends every slot of `v` to `out`.
  template <typename Vec> void expand(Value v, Vec &out) {
    uint32_t base = slotOf(v);
    for (uint32_t e = 0, n = getNumSlots(v.getType()); e < n; ++e)
      out.push_back(base + e);
  }
  LogicalResult compileRegion(Region &region, CRegion &out);
  LogicalResult compileBlock(Block &block, CRegion &out);
  LogicalResult compileOp(Operation *op, Instr &instr);
  LogicalResult checkScalarType(Operation *op, Type t);
  /// Scalars, vectors and async tokens (values scf.for and scf.if carry).
  LogicalResult checkCarriedType(Operation *op, Type t) {
    if (isa<nvgpu::DeviceAsyncTokenType>(t))
      return success();
    return checkScalarType(op, t);
  }
  LogicalResult compileVectorOp(Operation *op, Instr &I);
  LogicalResult compileNVGPUOp(Operation *op, Instr &I);
  LogicalResult compileMemRefViewOp(Operation *op, Instr &I);
  LogicalResult compileNVVMOp(Operation *op, Instr &I);

  CFunction &fn;
  DenseMap<Value, uint32_t> slots;
  DenseMap<Operation *, unsigned> globalIndex;
  /// The blocks of a function body of several blocks.
  DenseMap<Block *, int64_t> blockIndex;
};

LogicalResult Compiler::compileFunction(Operation *funcOp, Region &body) {
  fn.op = funcOp;
  if (auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(funcOp)) {
    if (!gpuFunc.getPrivateAttributions().empty())
      return funcOp->emitOpError()
             << "has private attributions, which the fa interpreter does "
                "not support";
    for (BlockArgument arg : gpuFunc.getWorkgroupAttributions()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.hasStaticShape() || !getEKind(type.getElementType()))
        return funcOp->emitOpError()
               << "workgroup attribution of type " << arg.getType()
               << " is not supported by the fa interpreter";
      fn.workgroupAttribs.push_back({slotOf(arg), type});
    }
    for (unsigned i = 0, e = gpuFunc.getNumArguments(); i < e; ++i)
      fn.argTypes.push_back(gpuFunc.getArgument(i).getType());
  } else {
    for (BlockArgument arg : body.getArguments())
      fn.argTypes.push_back(arg.getType());
  }
  if (body.hasOneBlock())
    return compileBlock(body.front(), fn.body);
  // Unstructured control flow: number the blocks, then compile each.
  for (Block &block : body) {
    if (fn.blocks.empty()) {
      fn.blocks.push_back(&fn.body);
    } else {
      fn.ownedBlocks.push_back(std::make_unique<CRegion>());
      fn.blocks.push_back(fn.ownedBlocks.back().get());
    }
    blockIndex[&block] = fn.blocks.size() - 1;
  }
  for (auto [i, block] : llvm::enumerate(body)) {
    if (i > 0)
      for (BlockArgument arg : block.getArguments())
        if (failed(checkScalarType(funcOp, arg.getType())))
          return failure();
    if (failed(compileBlock(block, *fn.blocks[i])))
      return failure();
  }
  return success();
}

LogicalResult Compiler::checkScalarType(Operation *op, Type t) {
  if (auto vt = dyn_cast<VectorType>(t)) {
    if (!vt.isScalable() && vt.getRank() > 0)
      t = vt.getElementType();
  }
  if (getFKind(t) || getIntWidth(t) || isFlatStruct(t))
    return success();
  return op->emitOpError() << "has a value of type " << t
                           << ", which the fa interpreter does not support "
                              "(integers, index, f16, bf16, f32 and f64, "
                              "fixed-size vectors of them, and !llvm.struct "
                              "of them)";
}

LogicalResult Compiler::compileRegion(Region &region, CRegion &out) {
  if (!region.hasOneBlock())
    return region.getParentOp()->emitOpError()
           << "has a region with " << region.getBlocks().size()
           << " blocks; the fa interpreter supports unstructured control "
              "flow (cf.br, cf.cond_br) in function bodies only";
  return compileBlock(region.front(), out);
}

LogicalResult Compiler::compileBlock(Block &block, CRegion &out) {
  for (BlockArgument arg : block.getArguments()) {
    // gpu.func workgroup attributions are block arguments too; they were
    // numbered already.
    expand(arg, out.args);
  }
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>() &&
        isa<cf::BranchOp, cf::CondBranchOp>(op)) {
      if (!blockIndex.count(op.getBlock()))
        return op.emitOpError()
               << "is not supported by the fa interpreter outside a "
                  "function body";
      auto branch = std::make_unique<Instr>();
      branch->op = &op;
      if (auto br = dyn_cast<cf::BranchOp>(op)) {
        branch->opc = Opc::Br;
        branch->imm = blockIndex[br.getDest()];
        for (Value v : br.getDestOperands())
          expand(v, branch->in);
      } else {
        auto cbr = cast<cf::CondBranchOp>(op);
        branch->opc = Opc::CondBr;
        branch->in.push_back(slotOf(cbr.getCondition()));
        branch->imm = blockIndex[cbr.getTrueDest()];
        branch->align = blockIndex[cbr.getFalseDest()];
        for (Value v : cbr.getTrueDestOperands())
          expand(v, branch->in);
        branch->n = branch->in.size() - 1;
        for (Value v : cbr.getFalseDestOperands())
          expand(v, branch->in);
      }
      out.branch = std::move(branch);
      continue;
    }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      if (!isa<scf::YieldOp, gpu::ReturnOp, func::ReturnOp>(op))
        return op.emitOpError()
               << "is not supported by the fa interpreter (unstructured "
                  "control flow other than cf.br and cf.cond_br)";
      for (Value v : op.getOperands())
        expand(v, out.yields);
      continue;
    }
    out.body.emplace_back();
    Instr &instr = out.body.back();
    instr.op = &op;
    if (failed(compileOp(&op, instr)))
      return failure();
  }
  return success();
}

LogicalResult Compiler::compileOp(Operation *op, Instr &I) {
  for (Value v : op->getOperands())
    I.in.push_back(slotOf(v));
  for (Value v : op->getResults())
    I.out.push_back(slotOf(v));

  auto unsupported = [&](const Twine &why) {
    return op->emitOpError() << "is not supported by the fa interpreter"
                             << (why.isTriviallyEmpty() ? "" : ": ") << why;
  };
  // The scalar types of all operands and results (memrefs and the ops
  // handling them are checked below).
  auto checkScalars = [&]() -> LogicalResult {
    for (Type t : op->getOperandTypes())
      if (failed(checkScalarType(op, t)))
        return failure();
    for (Type t : op->getResultTypes())
      if (failed(checkScalarType(op, t)))
        return failure();
    return success();
  };
  if (op->getNumResults() == 1)
    I.n = getNumSlots(op->getResult(0).getType());
  auto intOp = [&](Opc opc) -> LogicalResult {
    if (failed(checkScalars()))
      return failure();
    I.opc = opc;
    I.w = getIntWidth(getScalarType(op->getResult(0).getType()));
    if (!I.w)
      return unsupported("expected an integer or index result");
    return success();
  };
  auto floatOp = [&](Opc opc) -> LogicalResult {
    if (failed(checkScalars()))
      return failure();
    I.opc = opc;
    auto fk = getFKind(getScalarType(op->getResult(0).getType()));
    if (!fk)
      return unsupported("expected a float result");
    I.fk = *fk;
    return success();
  };
  auto castOp = [&](Opc opc) -> LogicalResult {
    if (failed(checkScalars()))
      return failure();
    I.opc = opc;
    Type src = getScalarType(op->getOperand(0).getType()),
         dst = getScalarType(op->getResult(0).getType());
    if (auto f = getFKind(src))
      I.fk = *f;
    if (auto f = getFKind(dst))
      I.fk2 = *f;
    I.w2 = getIntWidth(src);
    I.w = getIntWidth(dst);
    return success();
  };

  // Kernel-only and host-only ops.
  bool gpuIdOp =
      isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp,
          gpu::LaneIdOp, gpu::BarrierOp, gpu::ShuffleOp,
          gpu::DynamicSharedMemoryOp, nvgpu::LdMatrixOp, nvgpu::MmaSyncOp,
          nvgpu::DeviceAsyncCopyOp, nvgpu::DeviceAsyncCreateGroupOp,
          nvgpu::DeviceAsyncWaitOp, NVVM::WgmmaFenceAlignedOp,
          NVVM::WgmmaGroupSyncAlignedOp, NVVM::WgmmaWaitGroupSyncOp,
          NVVM::WgmmaMmaAsyncOp, NVVM::FenceProxyOp, NVVM::BarrierOp,
          NVVM::Barrier0Op, memref::ExtractAlignedPointerAsIndexOp>(op);
  if (gpuIdOp && !fn.isKernel)
    return op->emitOpError() << "outside a gpu.func kernel";
  if (isa<gpu::LaunchFuncOp>(op) && fn.isKernel)
    return op->emitOpError() << "inside a kernel is not supported";

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // arith
      .Case([&](arith::ConstantOp c) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        if (auto ia = dyn_cast<IntegerAttr>(c.getValue())) {
          I.opc = Opc::ConstI;
          I.w = getIntWidth(c.getType());
          I.imm = sext(static_cast<int64_t>(ia.getValue().getZExtValue()), I.w);
          return success();
        }
        auto toDouble = [](APFloat v) {
          bool lost = false;
          v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
          return v.convertToDouble();
        };
        if (auto fa = dyn_cast<FloatAttr>(c.getValue())) {
          I.opc = Opc::ConstF;
          I.fk = *getFKind(c.getType());
          I.fimm = toDouble(fa.getValue());
          return success();
        }
        if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue())) {
          if (!isa<VectorType>(c.getType()))
            return unsupported("only vector dense constants");
          I.opc = Opc::ConstVec;
          Type elt = dense.getElementType();
          if (isa<FloatType>(elt)) {
            for (APFloat v : dense.getValues<APFloat>()) {
              Slot sl;
              sl.f = toDouble(v);
              I.consts.push_back(sl);
            }
          } else {
            unsigned w = getIntWidth(elt);
            for (APInt v : dense.getValues<APInt>()) {
              Slot sl;
              sl.i = sext(static_cast<int64_t>(v.getZExtValue()), w);
              I.consts.push_back(sl);
            }
          }
          return success();
        }
        return unsupported("only scalar integer and float constants");
      })
      .Case([&](arith::AddIOp) { return intOp(Opc::AddI); })
      .Case([&](arith::SubIOp) { return intOp(Opc::SubI); })
      .Case([&](arith::MulIOp) { return intOp(Opc::MulI); })
      .Case([&](arith::DivSIOp) { return intOp(Opc::DivSI); })
      .Case([&](arith::DivUIOp) { return intOp(Opc::DivUI); })
      .Case([&](arith::RemSIOp) { return intOp(Opc::RemSI); })
      .Case([&](arith::RemUIOp) { return intOp(Opc::RemUI); })
      .Case([&](arith::CeilDivSIOp) { return intOp(Opc::CeilDivSI); })
      .Case([&](arith::CeilDivUIOp) { return intOp(Opc::CeilDivUI); })
      .Case([&](arith::FloorDivSIOp) { return intOp(Opc::FloorDivSI); })
      .Case([&](arith::MinSIOp) { return intOp(Opc::MinSI); })
      .Case([&](arith::MaxSIOp) { return intOp(Opc::MaxSI); })
      .Case([&](arith::MinUIOp) { return intOp(Opc::MinUI); })
      .Case([&](arith::MaxUIOp) { return intOp(Opc::MaxUI); })
      .Case([&](arith::AndIOp) { return intOp(Opc::AndI); })
      .Case([&](arith::OrIOp) { return intOp(Opc::OrI); })
      .Case([&](arith::XOrIOp) { return intOp(Opc::XOrI); })
      .Case([&](arith::ShLIOp) { return intOp(Opc::ShLI); })
      .Case([&](arith::ShRSIOp) { return intOp(Opc::ShRSI); })
      .Case([&](arith::ShRUIOp) { return intOp(Opc::ShRUI); })
      .Case([&](arith::CmpIOp c) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        I.opc = Opc::CmpI;
        I.w = getIntWidth(getScalarType(c.getLhs().getType()));
        I.imm = static_cast<int64_t>(c.getPredicate());
        return success();
      })
      .Case([&](arith::AddFOp) { return floatOp(Opc::AddF); })
      .Case([&](arith::SubFOp) { return floatOp(Opc::SubF); })
      .Case([&](arith::MulFOp) { return floatOp(Opc::MulF); })
      .Case([&](arith::DivFOp) { return floatOp(Opc::DivF); })
      .Case([&](arith::RemFOp) { return floatOp(Opc::RemF); })
      .Case([&](arith::MaximumFOp) { return floatOp(Opc::MaximumF); })
      .Case([&](arith::MinimumFOp) { return floatOp(Opc::MinimumF); })
      .Case([&](arith::MaxNumFOp) { return floatOp(Opc::MaxNumF); })
      .Case([&](arith::MinNumFOp) { return floatOp(Opc::MinNumF); })
      .Case([&](arith::NegFOp) { return floatOp(Opc::NegF); })
      .Case([&](arith::CmpFOp c) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        I.opc = Opc::CmpF;
        I.fk = *getFKind(getScalarType(c.getLhs().getType()));
        I.imm = static_cast<int64_t>(c.getPredicate());
        return success();
      })
      .Case([&](arith::SelectOp s) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        I.opc = Opc::Select;
        I.scalarCond = !isa<VectorType>(s.getCondition().getType());
        return success();
      })
      .Case([&](arith::ExtFOp) { return castOp(Opc::ExtF); })
      .Case([&](arith::TruncFOp t) -> LogicalResult {
        if (auto rm = t.getRoundingmodeAttr())
          if (rm.getValue() != arith::RoundingMode::to_nearest_even)
            return unsupported("only the to_nearest_even rounding mode");
        return castOp(Opc::TruncF);
      })
      .Case([&](arith::SIToFPOp) { return castOp(Opc::SIToFP); })
      .Case([&](arith::UIToFPOp) { return castOp(Opc::UIToFP); })
      .Case([&](arith::FPToSIOp) { return castOp(Opc::FPToSI); })
      .Case([&](arith::FPToUIOp) { return castOp(Opc::FPToUI); })
      .Case([&](arith::ExtSIOp) { return castOp(Opc::ExtSI); })
      .Case([&](arith::ExtUIOp) { return castOp(Opc::ExtUI); })
      .Case([&](arith::TruncIOp) { return castOp(Opc::TruncI); })
      .Case([&](arith::IndexCastOp) { return castOp(Opc::IndexCast); })
      .Case([&](arith::IndexCastUIOp) { return castOp(Opc::IndexCastUI); })
      .Case([&](arith::BitcastOp b) -> LogicalResult {
        bool srcF =
            static_cast<bool>(getFKind(getScalarType(b.getIn().getType())));
        bool dstF = static_cast<bool>(getFKind(getScalarType(b.getType())));
        return castOp(srcF   ? (dstF ? Opc::BitcastFToF : Opc::BitcastFToI)
                      : dstF ? Opc::BitcastIToF
                             : Opc::BitcastIToI);
      })
      // math
      .Case([&](math::Exp2Op) { return floatOp(Opc::Exp2); })
      .Case([&](math::ExpOp) { return floatOp(Opc::Exp); })
      .Case([&](math::LogOp) { return floatOp(Opc::Log); })
      .Case([&](math::Log2Op) { return floatOp(Opc::Log2); })
      .Case([&](math::SqrtOp) { return floatOp(Opc::Sqrt); })
      .Case([&](math::RsqrtOp) { return floatOp(Opc::Rsqrt); })
      .Case([&](math::AbsFOp) { return floatOp(Opc::AbsF); })
      .Case([&](math::FloorOp) { return floatOp(Opc::Floor); })
      .Case([&](math::CeilOp) { return floatOp(Opc::Ceil); })
      .Case([&](math::TanhOp) { return floatOp(Opc::Tanh); })
      .Case([&](LLVM::CallIntrinsicOp c) -> LogicalResult {
        StringRef name = c.getIntrin();
        std::optional<std::pair<Opc, bool>> kind =
            llvm::StringSwitch<std::optional<std::pair<Opc, bool>>>(name)
                .Cases({"llvm.nvvm.ex2.approx.f32", "llvm.nvvm.ex2.approx.f"},
                       std::make_pair(Opc::Ex2Approx, false))
                .Cases({"llvm.nvvm.ex2.approx.ftz.f32",
                        "llvm.nvvm.ex2.approx.ftz.f"},
                       std::make_pair(Opc::Ex2Approx, true))
                .Cases({"llvm.nvvm.lg2.approx.f", "llvm.nvvm.lg2.approx.f32"},
                       std::make_pair(Opc::Lg2Approx, false))
                .Cases({"llvm.nvvm.lg2.approx.ftz.f",
                        "llvm.nvvm.lg2.approx.ftz.f32"},
                       std::make_pair(Opc::Lg2Approx, true))
                .Default(std::nullopt);
        if (!kind)
          return unsupported("intrinsic '" + name +
                             "' (supported: llvm.nvvm.ex2.approx[.ftz].f32, "
                             "llvm.nvvm.lg2.approx[.ftz].f)");
        if (c.getNumOperands() != 1 || c.getNumResults() != 1 ||
            !c.getOperand(0).getType().isF32() ||
            !c.getResult(0).getType().isF32())
          return unsupported("expected (f32) -> f32");
        I.opc = kind->first;
        I.flag = kind->second;
        I.fk = FKind::F32;
        return success();
      })
      // gpu
      .Case([&](gpu::ThreadIdOp o) {
        I.opc = Opc::ThreadId;
        I.imm = static_cast<int64_t>(o.getDimension());
        return success();
      })
      .Case([&](gpu::BlockIdOp o) {
        I.opc = Opc::BlockId;
        I.imm = static_cast<int64_t>(o.getDimension());
        return success();
      })
      .Case([&](gpu::BlockDimOp o) {
        I.opc = Opc::BlockDim;
        I.imm = static_cast<int64_t>(o.getDimension());
        return success();
      })
      .Case([&](gpu::GridDimOp o) {
        I.opc = Opc::GridDim;
        I.imm = static_cast<int64_t>(o.getDimension());
        return success();
      })
      .Case([&](gpu::LaneIdOp) {
        I.opc = Opc::LaneId;
        return success();
      })
      .Case([&](gpu::BarrierOp) {
        I.opc = Opc::Barrier;
        return success();
      })
      .Case([&](gpu::ShuffleOp s) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        if (isa<VectorType>(s.getValue().getType()))
          return unsupported("vector values");
        I.opc = Opc::Shuffle;
        I.imm = static_cast<int64_t>(s.getMode());
        return success();
      })
      .Case([&](gpu::LaunchFuncOp l) -> LogicalResult {
        if (!l.getAsyncDependencies().empty() || l.getAsyncToken() ||
            l.getAsyncObject())
          return unsupported("asynchronous launches");
        if (l.hasClusterSize())
          return unsupported("thread block clusters");
        I.opc = Opc::LaunchFunc;
        return success();
      })
      // memref
      .Case([&](memref::GetGlobalOp g) -> LogicalResult {
        auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
            op, g.getNameAttr());
        if (!global)
          return op->emitOpError() << "refers to an unknown global";
        MemRefType type = global.getType();
        if (!fn.isKernel || !isWorkgroupSpace(type.getMemorySpace()))
          return unsupported("only workgroup-memory globals (address space "
                             "3) of a kernel");
        if (!global.isUninitialized() && !global.isExternal())
          return unsupported("initialized workgroup globals");
        if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
            !getEKind(type.getElementType()))
          return unsupported("global of type " +
                             llvm::formatv("{0}", type).str());
        auto [it, inserted] =
            globalIndex.try_emplace(global, fn.sharedGlobals.size());
        if (inserted)
          fn.sharedGlobals.push_back(global);
        I.opc = Opc::GetGlobal;
        I.imm = it->second;
        return success();
      })
      .Case([&](memref::LoadOp l) -> LogicalResult {
        auto ek = getEKind(l.getMemRefType().getElementType());
        if (!ek)
          return unsupported("element type " +
                             llvm::formatv("{0}", l.getType()).str());
        I.opc = Opc::Load;
        I.ek = *ek;
        return success();
      })
      .Case([&](memref::StoreOp s) -> LogicalResult {
        auto ek = getEKind(s.getMemRefType().getElementType());
        if (!ek)
          return unsupported(
              "element type " +
              llvm::formatv("{0}", s.getValueToStore().getType()).str());
        I.opc = Opc::Store;
        I.ek = *ek;
        return success();
      })
      .Case([&](memref::DimOp) {
        I.opc = Opc::Dim;
        return success();
      })
      .Case([&](memref::CastOp c) -> LogicalResult {
        if (!isa<MemRefType>(c.getType()))
          return unsupported("unranked memrefs");
        I.opc = Opc::MemRefAlias;
        return success();
      })
      .Case([&](memref::AssumeAlignmentOp) {
        I.opc = Opc::MemRefAlias;
        return success();
      })
      // scf
      .Case([&](scf::ForOp f) -> LogicalResult {
        I.opc = Opc::For;
        I.w = getIntWidth(f.getInductionVar().getType());
        I.flag = f.getUnsignedCmp();
        for (Type t : f.getResultTypes())
          if (failed(checkCarriedType(op, t)))
            return failure();
        I.in.clear();
        I.out.clear();
        for (Value v : op->getOperands())
          expand(v, I.in);
        for (Value v : op->getResults())
          expand(v, I.out);
        I.r0 = std::make_unique<CRegion>();
        return compileRegion(f.getRegion(), *I.r0);
      })
      .Case([&](scf::IfOp i) -> LogicalResult {
        I.opc = Opc::If;
        for (Type t : i.getResultTypes())
          if (failed(checkCarriedType(op, t)))
            return failure();
        I.out.clear();
        for (Value v : op->getResults())
          expand(v, I.out);
        I.r0 = std::make_unique<CRegion>();
        if (failed(compileRegion(i.getThenRegion(), *I.r0)))
          return failure();
        if (!i.getElseRegion().empty()) {
          I.r1 = std::make_unique<CRegion>();
          if (failed(compileRegion(i.getElseRegion(), *I.r1)))
            return failure();
        }
        return success();
      })
      .Case([&](math::FmaOp) { return floatOp(Opc::Fma); })
      .Case([&](vector::FMAOp) { return floatOp(Opc::Fma); })
      .Case<affine::AffineApplyOp, affine::AffineMinOp, affine::AffineMaxOp>(
          [&](Operation *) -> LogicalResult {
            if (failed(checkScalars()))
              return failure();
            I.opc = isa<affine::AffineApplyOp>(op) ? Opc::AffineApply
                    : isa<affine::AffineMinOp>(op) ? Opc::AffineMin
                                                   : Opc::AffineMax;
            I.map = op->getAttrOfType<AffineMapAttr>("map").getValue();
            return success();
          })
      .Case<gpu::DynamicSharedMemoryOp, memref::ViewOp, memref::SubViewOp>(
          [&](Operation *) { return compileMemRefViewOp(op, I); })
      .Case<vector::ExtractOp, vector::InsertOp, vector::FromElementsOp,
            vector::ShuffleOp, vector::BroadcastOp, vector::ShapeCastOp,
            vector::TransposeOp, vector::ExtractStridedSliceOp,
            vector::ReductionOp, vector::LoadOp, vector::StoreOp>(
          [&](Operation *) { return compileVectorOp(op, I); })
      .Case<nvgpu::LdMatrixOp, nvgpu::MmaSyncOp, nvgpu::DeviceAsyncCopyOp,
            nvgpu::DeviceAsyncCreateGroupOp, nvgpu::DeviceAsyncWaitOp>(
          [&](Operation *) { return compileNVGPUOp(op, I); })
      // !llvm.struct values (the wgmma accumulator)
      .Case<LLVM::UndefOp, LLVM::PoisonOp, LLVM::ZeroOp>(
          [&](Operation *) -> LogicalResult {
            if (failed(checkScalars()))
              return failure();
            I.opc = Opc::ConstVec;
            Type t = op->getResult(0).getType();
            SmallVector<Type> fields;
            if (auto st = dyn_cast<LLVM::LLVMStructType>(t))
              llvm::append_range(fields, st.getBody());
            else
              fields.assign(I.n, getScalarType(t));
            bool undef = !isa<LLVM::ZeroOp>(op);
            for (Type ft : fields) {
              Slot sl;
              // Undefined floats are NaN, so that a use shows.
              if (getFKind(ft)) {
                sl.f = undef ? std::numeric_limits<double>::quiet_NaN() : 0.0;
              } else {
                sl.i = 0;
              }
              I.consts.push_back(sl);
            }
            return success();
          })
      .Case([&](LLVM::ExtractValueOp ex) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        ArrayRef<int64_t> pos = ex.getPosition();
        if (pos.size() != 1 || !isFlatStruct(ex.getContainer().getType()) ||
            isa<LLVM::LLVMStructType>(ex.getType()))
          return unsupported("only one position into a struct of scalars");
        I.opc = Opc::Move;
        I.src.push_back(slotOf(ex.getContainer()) + pos[0]);
        return success();
      })
      .Case([&](LLVM::InsertValueOp ins) -> LogicalResult {
        if (failed(checkScalars()))
          return failure();
        ArrayRef<int64_t> pos = ins.getPosition();
        if (pos.size() != 1 || !isFlatStruct(ins.getContainer().getType()) ||
            isa<LLVM::LLVMStructType>(ins.getValue().getType()))
          return unsupported("only one position into a struct of scalars");
        I.opc = Opc::Move;
        uint32_t dest = slotOf(ins.getContainer()),
                 val = slotOf(ins.getValue());
        for (uint32_t e = 0; e < I.n; ++e)
          I.src.push_back(e == pos[0] ? val : dest + e);
        return success();
      })
      .Case([&](memref::ExtractAlignedPointerAsIndexOp x) -> LogicalResult {
        auto mt = dyn_cast<MemRefType>(x.getSource().getType());
        if (!mt || !isWorkgroupSpace(mt.getMemorySpace()))
          return unsupported("only workgroup (shared) memrefs, whose "
                             "addresses are shared-window byte addresses");
        I.opc = Opc::ExtractPtr;
        return success();
      })
      .Case<NVVM::WgmmaFenceAlignedOp, NVVM::WgmmaGroupSyncAlignedOp,
            NVVM::WgmmaWaitGroupSyncOp, NVVM::WgmmaMmaAsyncOp,
            NVVM::FenceProxyOp, NVVM::BarrierOp, NVVM::Barrier0Op>(
          [&](Operation *) { return compileNVVMOp(op, I); })
      .Default([&](Operation *) { return unsupported(""); });
}

LogicalResult Compiler::compileNVVMOp(Operation *op, Instr &I) {
  auto unsupported = [&](const Twine &why) {
    return op->emitOpError()
           << "is not supported by the fa interpreter: " << why;
  };
  if (isa<NVVM::WgmmaFenceAlignedOp>(op)) {
    I.opc = Opc::WgFence;
    return success();
  }
  if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
    I.opc = Opc::WgCommit;
    return success();
  }
  if (auto w = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op)) {
    I.opc = Opc::WgWait;
    I.imm = static_cast<int64_t>(w.getGroup());
    return success();
  }
  if (auto fp = dyn_cast<NVVM::FenceProxyOp>(op)) {
    NVVM::ProxyKind kind = fp.getKind();
    bool ok =
        kind == NVVM::ProxyKind::async ||
        (kind == NVVM::ProxyKind::async_shared &&
         (!fp.getSpace() || *fp.getSpace() == NVVM::SharedSpace::shared_cta));
    if (!ok)
      return unsupported("only fence.proxy.async and "
                         "fence.proxy.async.shared::cta (kind = "
                         "#nvvm.proxy_kind<async.shared>, space = "
                         "#nvvm.shared_space<cta>)");
    I.opc = Opc::FenceProxy;
    return success();
  }
  if (isa<NVVM::Barrier0Op>(op)) {
    I.opc = Opc::Barrier;
    return success();
  }
  if (auto b = dyn_cast<NVVM::BarrierOp>(op)) {
    if (b.getReductionOp() || b.getReductionPredicate() || b.getRes())
      return unsupported("barrier reductions");
    I.opc = Opc::NamedBarrier;
    // imm: bit 0 = has an id, bit 1 = has a thread count (operands in order).
    I.imm = (b.getBarrierId() ? 1 : 0) | (b.getNumberOfThreads() ? 2 : 0);
    return success();
  }
  auto mma = cast<NVVM::WgmmaMmaAsyncOp>(op);
  NVVM::MMAShapeAttr shape = mma.getShape();
  int64_t n = shape.getN();
  if (shape.getM() != 64 || shape.getK() != 16 || n < 8 || n > 256 ||
      n % 8 != 0)
    return unsupported(formatv("shape m{0}n{1}k{2} (supported: m64nNk16, N a "
                               "multiple of 8 up to 256)",
                               shape.getM(), n, shape.getK())
                           .str());
  NVVM::WGMMATypes ta = mma.getTypeA(), tb = mma.getTypeB();
  if (ta != tb ||
      (ta != NVVM::WGMMATypes::f16 && ta != NVVM::WGMMATypes::bf16) ||
      mma.getTypeD() != NVVM::WGMMATypes::f32)
    return unsupported("only f16 or bf16 inputs with an f32 accumulator");
  if (mma.getLayoutA() != NVVM::MMALayout::row)
    return unsupported("layoutA must be row (a K-major A from shared memory; "
                       "imm-trans-a = 0)");
  if (mma.getSatfinite())
    return unsupported("satfinite");
  auto st = dyn_cast<LLVM::LLVMStructType>(mma.getInouts().getType());
  if (!st || static_cast<int64_t>(st.getBody().size()) != n / 2 ||
      !llvm::all_of(st.getBody(), [](Type t) { return t.isF32(); }))
    return unsupported(formatv("accumulator {0} (expected a struct of N / 2 = "
                               "{1} f32)",
                               mma.getInouts().getType(), n / 2)
                           .str());
  I.opc = Opc::WgMma;
  I.imm = n;
  I.ek = ta == NVVM::WGMMATypes::f16 ? EKind::F16 : EKind::BF16;
  I.flag = mma.getScaleD() == NVVM::WGMMAScaleOut::one;
  // w: B is MN-major (layoutB = row, imm-trans-b = 1); w2: negate A (bit 0),
  // negate B (bit 1).
  I.w = mma.getLayoutB() == NVVM::MMALayout::row ? 1 : 0;
  I.w2 = (mma.getScaleA() == NVVM::WGMMAScaleIn::neg ? 1 : 0) |
         (mma.getScaleB() == NVVM::WGMMAScaleIn::neg ? 2 : 0);
  I.n = static_cast<uint32_t>(n / 2);
  fn.hasWgmma = true;
  return success();
}

LogicalResult Compiler::compileMemRefViewOp(Operation *op, Instr &I) {
  auto unsupported = [&](const Twine &why) {
    return op->emitOpError()
           << "is not supported by the fa interpreter: " << why;
  };
  if (auto dyn = dyn_cast<gpu::DynamicSharedMemoryOp>(op)) {
    auto type = cast<MemRefType>(dyn.getType());
    if (type.getRank() != 1 || !type.getElementType().isInteger(8))
      return unsupported("expected a memref<?xi8> result");
    I.opc = Opc::DynamicShared;
    return success();
  }
  if (auto view = dyn_cast<memref::ViewOp>(op)) {
    MemRefType type = view.getType();
    auto ek = getEKind(type.getElementType());
    if (!ek || !type.getLayout().isIdentity())
      return unsupported(formatv("a view of type {0}", type).str());
    I.opc = Opc::View;
    I.ek = *ek;
    return success();
  }
  auto sub = cast<memref::SubViewOp>(op);
  if (!getEKind(sub.getType().getElementType()))
    return unsupported(formatv("element type of {0}", sub.getType()).str());
  I.opc = Opc::SubView;
  return success();
}

LogicalResult Compiler::compileVectorOp(Operation *op, Instr &I) {
  auto unsupported = [&](const Twine &why) {
    return op->emitOpError()
           << "is not supported by the fa interpreter: " << why;
  };
  for (Type t : op->getOperandTypes())
    if (!isa<MemRefType>(t) && failed(checkScalarType(op, t)))
      return failure();
  for (Type t : op->getResultTypes())
    if (failed(checkScalarType(op, t)))
      return failure();
  if (op->getNumResults() == 1)
    I.n = getNumSlots(op->getResult(0).getType());
  // Pure data movement: every result element is a copy of one source slot.
  auto linearPosition = [&](ArrayRef<int64_t> pos, ArrayRef<int64_t> shape,
                            int64_t &off) -> LogicalResult {
    SmallVector<int64_t, 4> strides = getRowMajorStrides(shape);
    off = 0;
    for (auto [d, p] : llvm::enumerate(pos)) {
      if (ShapedType::isDynamic(p))
        return unsupported("dynamic positions");
      if (p < 0 || p >= shape[d])
        return unsupported(formatv("position {0} of dim {1} (poison or out "
                                   "of range)",
                                   p, d)
                               .str());
      off += p * strides[d];
    }
    return success();
  };
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    int64_t off;
    if (failed(linearPosition(ex.getStaticPosition(),
                              ex.getSourceVectorType().getShape(), off)))
      return failure();
    I.opc = Opc::Move;
    uint32_t base = slotOf(ex.getSource());
    for (uint32_t e = 0; e < I.n; ++e)
      I.src.push_back(base + off + e);
    return success();
  }
  if (auto ins = dyn_cast<vector::InsertOp>(op)) {
    int64_t off;
    if (failed(linearPosition(ins.getStaticPosition(),
                              ins.getDestVectorType().getShape(), off)))
      return failure();
    I.opc = Opc::Move;
    uint32_t dest = slotOf(ins.getDest()), val = slotOf(ins.getValueToStore());
    uint32_t nv = getNumSlots(ins.getValueToStore().getType());
    for (uint32_t e = 0; e < I.n; ++e)
      I.src.push_back(e >= off && e < off + nv ? val + (e - off) : dest + e);
    return success();
  }
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    I.opc = Opc::Move;
    for (Value v : fe.getElements())
      I.src.push_back(slotOf(v));
    return success();
  }
  if (auto sh = dyn_cast<vector::ShuffleOp>(op)) {
    VectorType t1 = sh.getV1VectorType();
    if (t1.getRank() == 0)
      return unsupported("0-D operands");
    int64_t len1 = t1.getShape()[0];
    int64_t row = t1.getNumElements() / len1;
    uint32_t b1 = slotOf(sh.getV1()), b2 = slotOf(sh.getV2());
    I.opc = Opc::Move;
    for (int64_t m : sh.getMask()) {
      if (m < 0)
        return unsupported("poison mask entries");
      uint32_t base = m < len1 ? b1 + m * row : b2 + (m - len1) * row;
      for (int64_t e = 0; e < row; ++e)
        I.src.push_back(base + e);
    }
    return success();
  }
  if (auto bc = dyn_cast<vector::BroadcastOp>(op)) {
    SmallVector<int64_t, 4> rs = getVectorShape(bc.getType());
    SmallVector<int64_t, 4> ss = getVectorShape(bc.getSource().getType());
    SmallVector<int64_t, 4> sstr = getRowMajorStrides(ss);
    uint32_t base = slotOf(bc.getSource());
    size_t lead = rs.size() - ss.size();
    I.opc = Opc::Move;
    for (uint32_t e = 0; e < I.n; ++e) {
      SmallVector<int64_t, 4> idx = delinearize(e, rs);
      int64_t off = 0;
      for (size_t d = 0; d < ss.size(); ++d)
        off += (ss[d] == 1 ? 0 : idx[lead + d]) * sstr[d];
      I.src.push_back(base + off);
    }
    return success();
  }
  if (auto sc = dyn_cast<vector::ShapeCastOp>(op)) {
    I.opc = Opc::Move;
    uint32_t base = slotOf(sc.getSource());
    for (uint32_t e = 0; e < I.n; ++e)
      I.src.push_back(base + e);
    return success();
  }
  if (auto tr = dyn_cast<vector::TransposeOp>(op)) {
    ArrayRef<int64_t> perm = tr.getPermutation();
    SmallVector<int64_t, 4> rs = getVectorShape(tr.getType());
    SmallVector<int64_t, 4> sstr =
        getRowMajorStrides(tr.getSourceVectorType().getShape());
    uint32_t base = slotOf(tr.getVector());
    I.opc = Opc::Move;
    for (uint32_t e = 0; e < I.n; ++e) {
      SmallVector<int64_t, 4> idx = delinearize(e, rs);
      int64_t off = 0;
      for (size_t d = 0; d < rs.size(); ++d)
        off += idx[d] * sstr[perm[d]];
      I.src.push_back(base + off);
    }
    return success();
  }
  if (auto ss = dyn_cast<vector::ExtractStridedSliceOp>(op)) {
    SmallVector<int64_t, 4> offsets, strides;
    for (Attribute a : ss.getOffsets())
      offsets.push_back(cast<IntegerAttr>(a).getInt());
    for (Attribute a : ss.getStrides())
      strides.push_back(cast<IntegerAttr>(a).getInt());
    SmallVector<int64_t, 4> rs = getVectorShape(ss.getType());
    SmallVector<int64_t, 4> sstr =
        getRowMajorStrides(ss.getSourceVectorType().getShape());
    uint32_t base = slotOf(ss.getSource());
    I.opc = Opc::Move;
    for (uint32_t e = 0; e < I.n; ++e) {
      SmallVector<int64_t, 4> idx = delinearize(e, rs);
      int64_t off = 0;
      for (size_t d = 0; d < rs.size(); ++d) {
        int64_t i = idx[d];
        if (d < offsets.size())
          i = offsets[d] + i * strides[d];
        off += i * sstr[d];
      }
      I.src.push_back(base + off);
    }
    return success();
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    I.opc = Opc::Reduction;
    I.n = getNumSlots(red.getVector().getType());
    I.imm = static_cast<int64_t>(red.getKind());
    I.flag = static_cast<bool>(red.getAcc());
    Type elt = red.getType();
    if (auto fk = getFKind(elt))
      I.fk = *fk;
    I.w = getIntWidth(elt);
    using K = vector::CombiningKind;
    bool isFloatKind = llvm::is_contained(
        {K::ADD, K::MUL, K::MINNUMF, K::MAXNUMF, K::MINIMUMF, K::MAXIMUMF},
        red.getKind());
    if (getFKind(elt) && !isFloatKind)
      return unsupported("an integer combining kind on floats");
    return success();
  }
  // vector.load / vector.store.
  Value base = isa<vector::LoadOp>(op) ? cast<vector::LoadOp>(op).getBase()
                                       : cast<vector::StoreOp>(op).getBase();
  VectorType vt = isa<vector::LoadOp>(op)
                      ? cast<vector::LoadOp>(op).getVectorType()
                      : cast<vector::StoreOp>(op).getVectorType();
  auto mt = cast<MemRefType>(base.getType());
  auto ek = getEKind(mt.getElementType());
  if (!ek)
    return unsupported(formatv("memrefs of {0}", mt.getElementType()).str());
  if (vt.getRank() > mt.getRank())
    return unsupported("a vector of higher rank than the memref");
  I.opc = isa<vector::LoadOp>(op) ? Opc::Load : Opc::Store;
  I.ek = *ek;
  I.vshape.assign(vt.getShape().begin(), vt.getShape().end());
  I.n = static_cast<uint32_t>(vt.getNumElements());
  if (auto a = op->getAttrOfType<IntegerAttr>("alignment"))
    I.align = a.getInt();
  return success();
}

LogicalResult Compiler::compileNVGPUOp(Operation *op, Instr &I) {
  auto unsupported = [&](const Twine &why) {
    return op->emitOpError()
           << "is not supported by the fa interpreter: " << why;
  };
  if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op)) {
    auto mt = cast<MemRefType>(ld.getSrcMemref().getType());
    Type elt = mt.getElementType();
    if (!elt.isF16() && !elt.isBF16())
      return unsupported("element types other than f16 and bf16");
    if (!isWorkgroupSpace(mt.getMemorySpace()))
      return unsupported("a source outside workgroup memory");
    int64_t tiles = ld.getNumTiles();
    VectorType rt = ld.getRes().getType();
    if ((tiles != 1 && tiles != 2 && tiles != 4) || rt.getRank() != 2 ||
        rt.getShape()[0] != tiles || rt.getShape()[1] != 2 ||
        rt.getElementType() != elt)
      return unsupported(formatv("numTiles = {0} with result {1} (expected "
                                 "numTiles 1, 2 or 4 and vector<numTiles x 2 "
                                 "x {2}>)",
                                 tiles, rt, elt)
                             .str());
    I.opc = Opc::LdMatrix;
    I.imm = tiles;
    I.flag = ld.getTranspose();
    I.ek = *getEKind(elt);
    I.n = 2 * tiles;
    return success();
  }
  if (auto mma = dyn_cast<nvgpu::MmaSyncOp>(op)) {
    if (mma.getTf32Enabled())
      return unsupported("tf32");
    std::array<int64_t, 3> shape = mma.getMmaShapeAsArray();
    VectorType a = mma.getMatrixA().getType(), b = mma.getMatrixB().getType(),
               c = mma.getMatrixC().getType();
    Type ab = a.getElementType();
    bool ok = shape[0] == 16 && shape[1] == 8 &&
              (shape[2] == 16 || shape[2] == 8) &&
              (ab.isF16() || ab.isBF16()) && b.getElementType() == ab &&
              (c.getElementType().isF32() || c.getElementType().isF16()) &&
              c.getShape() == ArrayRef<int64_t>{2, 2} &&
              a.getShape() == (shape[2] == 16 ? ArrayRef<int64_t>{4, 2}
                                              : ArrayRef<int64_t>{2, 2}) &&
              b.getShape() == (shape[2] == 16 ? ArrayRef<int64_t>{2, 2}
                                              : ArrayRef<int64_t>{1, 2});
    if (!ok)
      return unsupported(formatv("mmaShape [{0}, {1}, {2}] on ({3}, {4}, {5}) "
                                 "(supported: m16n8k16 and m16n8k8 with f16 "
                                 "or bf16 inputs and f32 or f16 accumulators)",
                                 shape[0], shape[1], shape[2], a, b, c)
                             .str());
    I.opc = Opc::MmaSync;
    I.imm = shape[2];
    I.fk = *getFKind(c.getElementType());
    I.n = 4;
    return success();
  }
  if (auto cp = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op)) {
    auto dst = cast<MemRefType>(cp.getDst().getType());
    auto src = cast<MemRefType>(cp.getSrc().getType());
    if (!isWorkgroupSpace(dst.getMemorySpace()))
      return unsupported("a destination outside workgroup memory");
    auto ek = getEKind(dst.getElementType());
    if (!ek || dst.getElementType() != src.getElementType())
      return unsupported(formatv("element type {0}", dst.getElementType()));
    I.opc = Opc::AsyncCopy;
    I.ek = *ek;
    I.n = static_cast<uint32_t>(cp.getDstElements().getZExtValue());
    I.imm = dst.getRank();
    I.flag = static_cast<bool>(cp.getSrcElements());
    return success();
  }
  if (isa<nvgpu::DeviceAsyncCreateGroupOp>(op)) {
    I.opc = Opc::AsyncCommit;
    return success();
  }
  auto wait = cast<nvgpu::DeviceAsyncWaitOp>(op);
  I.opc = Opc::AsyncWait;
  I.imm = wait.getNumGroups() ? *wait.getNumGroups() : 0;
  return success();
}

//===----------------------------------------------------------------------===//
// Runtime state
//===----------------------------------------------------------------------===//

/// Per-element access record of the race and initialization checks.
struct Shadow {
  /// Barrier interval of the last write, and of the reads recorded.
  uint32_t wEpoch = 0, rEpoch = 0;
  /// Launch of the last write (global memory).
  uint32_t wLaunch = 0;
  /// Thread (in its block) of the last write; up to two readers of the
  /// current interval from different warps.
  int32_t wThread = -1, r0 = -1, r1 = -1;
  /// Linear block index of the last write.
  int64_t wBlock = -1;
  Operation *wOp = nullptr, *r0Op = nullptr, *r1Op = nullptr;
  /// The nvgpu.device_async_copy whose write of this element is pending (not
  /// yet completed by a device_async_wait), and its thread.
  Operation *pendOp = nullptr;
  int32_t pendThread = -1;
  /// The interpreter's clock at the last write (orders it against the
  /// writer's nvvm.fence.proxy for async-proxy reads).
  uint64_t wTime = 0;
  /// The last nvvm.wgmma.mma_async that read this element, the first thread
  /// of its warpgroup and its group: writing the element before that group
  /// is retired is an error (the async proxy may still read it).
  Operation *asyncReadOp = nullptr;
  int32_t asyncReadWg = -1;
  uint32_t asyncReadGroup = 0;
};

/// Storage of one memref: a host buffer or a block's workgroup buffer.
/// Accesses are byte-addressed (memref.view reinterprets the i8 buffer of
/// dynamic shared memory); the checks keep one Shadow per granule of
/// 2^gshift bytes (the size of the buffer's own element type).
struct Buffer {
  std::string name;
  Type type;
  EKind ek = EKind::F32;
  char *data = nullptr;
  int64_t numElements = 0;
  unsigned gshift = 0;
  bool shared = false;
  /// Workgroup buffers: the byte address of the buffer in the block's shared
  /// window (what ptrtoint of its addrspace(3) pointer gives).
  int64_t sharedBase = -1;
  std::vector<char> storage;
  std::vector<Shadow> shadow;
  uint8_t *writtenMask = nullptr;

  int64_t getNumBytes() const {
    return numElements * static_cast<int64_t>(getEKindSize(ek));
  }

  void poison() {
    size_t size = getEKindSize(ek);
    uint64_t pattern;
    switch (ek) {
    case EKind::F16:
    case EKind::BF16:
      pattern = 0x7FFF; // NaN
      break;
    case EKind::F32:
      pattern = 0x7FFFFFFF; // NaN
      break;
    case EKind::F64:
      pattern = 0x7FFFFFFFFFFFFFFFull; // NaN
      break;
    case EKind::I8:
      pattern = 0xFF; // NaN in every float view of the bytes
      break;
    default:
      pattern = 0xA5A5A5A5A5A5A5A5ull;
      break;
    }
    for (int64_t i = 0; i < numElements; ++i)
      std::memcpy(data + i * size, &pattern, size);
  }
};

/// A memref value: its buffer and descriptor (offset and strides in
/// elements of `ek`).
struct MemRefVal {
  Buffer *buf = nullptr;
  EKind ek = EKind::F32;
  int64_t offset = 0;
  /// The byte offset in the buffer of the descriptor's aligned pointer
  /// (memref.view moves the aligned pointer; subviews move the offset).
  int64_t alignedByte = 0;
  SmallVector<int64_t, 4> sizes, strides;
};

/// One nvgpu.device_async_copy in flight: the destination bytes and the
/// values read from the source when it was issued.
struct PendingCopy {
  Operation *op = nullptr;
  Buffer *dst = nullptr;
  EKind ek = EKind::F32;
  int64_t byte = 0;
  SmallVector<Slot, 8> vals;
  SmallVector<int64_t, 4> dstIdx;
};

/// A thread's async copies: not yet committed, and committed groups (oldest
/// first).
struct ThreadAsync {
  std::vector<PendingCopy> uncommitted;
  std::deque<std::vector<PendingCopy>> groups;
  bool empty() const { return uncommitted.empty() && groups.empty(); }
};

/// The execution state of one block (or of the host function: one thread).
struct Frame {
  const CFunction *fn = nullptr;
  unsigned numThreads = 1;
  std::vector<Slot> regs;
  std::vector<MemRefVal> mems;
  std::array<int64_t, 3> blockId{0, 0, 0}, gridDim{1, 1, 1}, blockDim{1, 1, 1};
  int64_t blockLinear = 0;
  uint32_t blockStartEpoch = 0;
  std::vector<std::unique_ptr<Buffer>> sharedBufs, attribBufs;
  /// Dynamic shared memory (the launch's dynamicSharedMemorySize bytes).
  std::unique_ptr<Buffer> dynShared;
  std::vector<ThreadAsync> async;
  bool anyAsync = false;
  std::vector<uint8_t> mark;
  uint64_t threadOps = 0;
  /// nvvm.fence.proxy: per thread, the clock of its last fence, and of its
  /// last fence that a barrier has followed since.
  std::vector<uint64_t> lastFence, fenceBeforeBarrier;
  /// nvvm.wgmma (kernels that issue wgmma.mma_async): per thread, the wgmma
  /// groups committed and retired (counting on across the blocks of a
  /// launch) and whether a wgmma.fence came since its last wgmma.wait; per
  /// slot and thread, the group of the mma_async whose result the slot
  /// holds (pending while above the thread's retired count); per slot,
  /// whether it ever held one, and the mma_async.
  std::vector<uint32_t> wgCommitted, wgRetired, wgPend;
  std::vector<uint8_t> wgFenced, wgPendSlot;
  std::vector<Operation *> wgPendOp;
  bool wgIssued = false;

  Slot *reg(uint32_t slot) {
    return &regs[static_cast<size_t>(slot) * numThreads];
  }
};

std::string formatIndex(ArrayRef<int64_t> idx) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(idx, os);
  os << "]";
  return s;
}

struct Buffer;
/// Describes an element access for diagnostics: the buffer and the index in
/// the view, then the element (or, in a view of another element type, the
/// byte) of the buffer.
std::string describeElement(const Buffer &buf, EKind ek, ArrayRef<int64_t> idx,
                            int64_t lin, int64_t byte);

std::string describeElement(const Buffer &buf, EKind ek, ArrayRef<int64_t> idx,
                            int64_t lin, int64_t byte) {
  if (ek == buf.ek)
    return formatv("{0}{1} (element {2} of {3})", buf.name, formatIndex(idx),
                   lin, buf.type)
        .str();
  return formatv("{0}{1} (byte {2} of {3})", buf.name, formatIndex(idx), byte,
                 buf.type)
      .str();
}

} // namespace

//===----------------------------------------------------------------------===//
// InterpreterImpl
//===----------------------------------------------------------------------===//

namespace mlir {
namespace fa {

class InterpreterImpl {
public:
  InterpreterImpl(ModuleOp module, InterpreterOptions options)
      : module(module), opts(options), rng(options.seed) {}

  FailureOr<const CFunction *> getCompiled(Operation *funcOp);
  LogicalResult compileReachable(func::FuncOp host);
  LogicalResult runHost(func::FuncOp host, ArrayRef<HostMemRef> args);
  LogicalResult launch(Operation *launchOp, const CFunction &kernel,
                       std::array<int64_t, 3> grid,
                       std::array<int64_t, 3> block,
                       ArrayRef<MemRefVal> memArgs, ArrayRef<Slot> scalarArgs,
                       int64_t dynamicSharedBytes);
  LogicalResult finish(Location loc);
  FailureOr<std::vector<MemRefVal>> bindHostArgs(Operation *funcOp,
                                                 ArrayRef<Type> argTypes,
                                                 ArrayRef<HostMemRef> args);

  LogicalResult exec(Frame &f, const CRegion &region, ArrayRef<int32_t> act);
  /// Runs a function body (several blocks: branch by branch, in lock step).
  LogicalResult execBody(Frame &f, const CFunction &fn, ArrayRef<int32_t> act);
  LogicalResult execInstr(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execMemory(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execShuffle(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execReduction(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execView(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execLdMatrix(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execMma(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execAsync(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execWgmma(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execWgSync(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execNamedBarrier(Frame &f, const Instr &I,
                                 ArrayRef<int32_t> act);
  /// Requires every thread of the warpgroups (128 threads, 4 warps, the
  /// first a multiple of 4) of the threads in `act` to be active.
  LogicalResult checkWarpgroups(Frame &f, const Instr &I,
                                ArrayRef<int32_t> act);
  /// Checks an async-proxy read (wgmma) of `size` bytes at `byte` of `buf`
  /// by warpgroup `wg`: no pending cp.async, written in the block, and by a
  /// thread that ran nvvm.fence.proxy and then a barrier after its write.
  LogicalResult asyncRead(Frame &f, const Instr &I, Buffer &buf, int64_t byte,
                          unsigned size, int32_t wg,
                          llvm::function_ref<std::string()> where);
  /// Fails if `I` reads a wgmma result whose group is not retired yet.
  LogicalResult checkWgPending(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  /// Copies the wgmma pending state of slot `src` to slot `dst` (values
  /// carried by scf.for, scf.if and cf.br).
  void copyPend(Frame &f, uint32_t dst, uint32_t src, ArrayRef<int32_t> act) {
    if (!f.wgIssued || (!f.wgPendSlot[src] && !f.wgPendSlot[dst]))
      return;
    const size_t nt = f.numThreads;
    for (int32_t t : act)
      f.wgPend[dst * nt + t] = f.wgPend[src * nt + t];
    if (f.wgPendSlot[src]) {
      f.wgPendSlot[dst] = 1;
      f.wgPendOp[dst] = f.wgPendOp[src];
    }
  }
  /// Completes `copy`, issued by thread `t`, in the current barrier
  /// interval.
  LogicalResult completeCopy(Frame &f, PendingCopy &copy, int32_t t);
  /// Drops every copy still in flight at the end of a block.
  void dropPendingCopies(Frame &f);
  /// Requires every lane of the warps in `act` to be active.
  LogicalResult checkFullWarps(Frame &f, const Instr &I, ArrayRef<int32_t> act,
                               StringRef what);
  /// The value of `slot`, which must be the same in every thread of `act`.
  FailureOr<int64_t> getUniform(Frame &f, const Instr &I, uint32_t slot,
                                ArrayRef<int32_t> act, StringRef what);
  /// Checks that thread `t` may access `size` bytes at `byte` of `buf`
  /// (bounds are checked by the caller), runs the race, initialization and
  /// pending-copy checks, and records the access. Fails on a hard error.
  LogicalResult touch(Frame &f, const Instr &I, Buffer &buf, int64_t byte,
                      unsigned size, int32_t t, bool isWrite,
                      llvm::function_ref<std::string()> where);

  std::string describeThread(const Frame &f, int32_t t) const {
    std::string s = formatv("thread {0}", t).str();
    if (f.fn->isKernel)
      s += formatv(" (warp {0}, lane {1}) of block ({2}, {3}, {4})", t / 32,
                   t % 32, f.blockId[0], f.blockId[1], f.blockId[2])
               .str();
    return s;
  }
  std::string describeBlock(int64_t linear, const Frame &f) const {
    int64_t gx = f.gridDim[0], gy = f.gridDim[1];
    return formatv("({0}, {1}, {2})", linear % gx, (linear / gx) % gy,
                   linear / (gx * gy))
        .str();
  }

  /// Records an access of one shadow granule for the checks; reports what
  /// they find (returns whether something was found).
  bool checkRead(Frame &f, const Instr &I, Buffer &buf, Shadow &s, int32_t t,
                 llvm::function_ref<std::string()> where, bool quiet);
  bool checkWrite(Frame &f, const Instr &I, Buffer &buf, Shadow &s, int32_t t,
                  llvm::function_ref<std::string()> where, bool quiet);
  /// Reports one finding unless the same pair of ops was reported already
  /// or the report budget is spent.
  void report(int kind, Operation *second, Operation *first,
              llvm::function_ref<std::string()> message,
              llvm::function_ref<std::string()> note);

  ModuleOp module;
  InterpreterOptions opts;
  InterpreterStats stats;
  std::mt19937_64 rng;
  DenseMap<Operation *, std::unique_ptr<CFunction>> compiled;
  DenseSet<std::tuple<int, Operation *, Operation *>> reported;
  unsigned reportsPrinted = 0;
  uint32_t epoch = 0;
  uint32_t launchId = 0;
  /// Orders writes against nvvm.fence.proxy (see Shadow::wTime).
  uint64_t clock = 1;
  /// The buffers of the host function's arguments.
  std::vector<std::unique_ptr<Buffer>> hostBuffers;
  /// Stands for the copy op when a wait completes it (for the checks).
  Instr completionInstr;
};

} // namespace fa
} // namespace mlir

FailureOr<const CFunction *> InterpreterImpl::getCompiled(Operation *funcOp) {
  auto it = compiled.find(funcOp);
  if (it != compiled.end())
    return static_cast<const CFunction *>(it->second.get());
  auto fn = std::make_unique<CFunction>();
  Compiler compiler(*fn);
  LogicalResult result = failure();
  if (auto gpuFunc = dyn_cast<gpu::GPUFuncOp>(funcOp)) {
    if (!gpuFunc.isKernel()) {
      funcOp->emitOpError() << "is not a kernel";
      return failure();
    }
    fn->isKernel = true;
    result = compiler.compileFunction(funcOp, gpuFunc.getBody());
  } else if (auto func = dyn_cast<func::FuncOp>(funcOp)) {
    if (func.isExternal()) {
      funcOp->emitOpError() << "has no body";
      return failure();
    }
    result = compiler.compileFunction(funcOp, func.getBody());
  } else {
    funcOp->emitOpError() << "is neither a func.func nor a gpu.func kernel";
    return failure();
  }
  if (failed(result))
    return failure();
  const CFunction *ptr = fn.get();
  compiled[funcOp] = std::move(fn);
  return ptr;
}

LogicalResult InterpreterImpl::compileReachable(func::FuncOp host) {
  if (failed(getCompiled(host)))
    return failure();
  WalkResult walk = host.walk([&](gpu::LaunchFuncOp launchOp) {
    Operation *kernel =
        SymbolTable::lookupNearestSymbolFrom(launchOp, launchOp.getKernel());
    if (!kernel) {
      launchOp.emitOpError()
          << "refers to an unknown kernel " << launchOp.getKernel();
      return WalkResult::interrupt();
    }
    if (failed(getCompiled(kernel)))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

FailureOr<std::vector<MemRefVal>>
InterpreterImpl::bindHostArgs(Operation *funcOp, ArrayRef<Type> argTypes,
                              ArrayRef<HostMemRef> args) {
  if (args.size() != argTypes.size()) {
    funcOp->emitOpError() << "takes " << argTypes.size() << " arguments, "
                          << args.size() << " given";
    return failure();
  }
  std::vector<MemRefVal> vals;
  for (auto [i, type, arg] : llvm::enumerate(argTypes, args)) {
    auto mt = dyn_cast<MemRefType>(type);
    std::optional<EKind> ek = mt ? getEKind(mt.getElementType()) : std::nullopt;
    if (!ek) {
      funcOp->emitOpError()
          << "argument " << i << " has type " << type
          << "; the fa interpreter takes memrefs of scalars only";
      return failure();
    }
    auto fail = [&](const Twine &msg) {
      funcOp->emitOpError() << "argument " << i << " (" << arg.name << ", "
                            << type << "): " << msg;
      return failure();
    };
    if (static_cast<int64_t>(arg.sizes.size()) != mt.getRank() ||
        arg.strides.size() != arg.sizes.size())
      return fail("the descriptor has rank " + Twine(arg.sizes.size()));
    SmallVector<int64_t> typeStrides;
    int64_t typeOffset;
    if (failed(mt.getStridesAndOffset(typeStrides, typeOffset)))
      return fail("the layout is not strided");
    int64_t last = arg.offset;
    bool empty = false;
    for (int64_t d = 0; d < mt.getRank(); ++d) {
      if (!mt.isDynamicDim(d) && mt.getDimSize(d) != arg.sizes[d])
        return fail(formatv("size {0} of dim {1} does not match the type",
                            arg.sizes[d], d)
                        .str());
      if (!ShapedType::isDynamic(typeStrides[d]) &&
          typeStrides[d] != arg.strides[d] && arg.sizes[d] > 1)
        return fail(formatv("stride {0} of dim {1} does not match the type",
                            arg.strides[d], d)
                        .str());
      if (arg.sizes[d] < 0)
        return fail("negative size");
      if (arg.sizes[d] == 0)
        empty = true;
      else
        last += (arg.sizes[d] - 1) * arg.strides[d];
    }
    if (!empty &&
        (arg.offset < 0 || last >= arg.numElements || last < 0 || !arg.data))
      return fail("the descriptor reaches past the " + Twine(arg.numElements) +
                  " elements of the buffer");
    auto buf = std::make_unique<Buffer>();
    buf->name = arg.name.empty() ? ("argument " + Twine(i)).str() : arg.name;
    buf->type = type;
    buf->ek = *ek;
    buf->data = static_cast<char *>(arg.data);
    buf->numElements = arg.numElements;
    buf->gshift = log2Size(getEKindSize(*ek));
    buf->writtenMask = arg.writtenMask;
    MemRefVal v;
    v.buf = buf.get();
    v.ek = *ek;
    v.offset = arg.offset;
    v.sizes.assign(arg.sizes.begin(), arg.sizes.end());
    v.strides.assign(arg.strides.begin(), arg.strides.end());
    vals.push_back(std::move(v));
    hostBuffers.push_back(std::move(buf));
  }
  return vals;
}

LogicalResult InterpreterImpl::runHost(func::FuncOp host,
                                       ArrayRef<HostMemRef> args) {
  if (failed(compileReachable(host)))
    return failure();
  const CFunction *fn = *getCompiled(host);
  FailureOr<std::vector<MemRefVal>> vals =
      bindHostArgs(host, fn->argTypes, args);
  if (failed(vals))
    return failure();
  Frame f;
  f.fn = fn;
  f.numThreads = 1;
  f.regs.assign(fn->numSlots, Slot{0});
  f.mems.resize(fn->numSlots);
  for (auto [slot, val] : llvm::zip(fn->body.args, *vals))
    f.mems[slot] = val;
  int32_t thread0 = 0;
  if (failed(execBody(f, *fn, ArrayRef<int32_t>(thread0))))
    return failure();
  return finish(host.getLoc());
}

LogicalResult InterpreterImpl::finish(Location loc) {
  if (stats.races || stats.uninitializedReads) {
    InFlightDiagnostic d = emitError(loc);
    d << "the fa interpreter found ";
    if (stats.races)
      d << stats.races << " racing accesses";
    if (stats.races && stats.uninitializedReads)
      d << " and ";
    if (stats.uninitializedReads)
      d << stats.uninitializedReads
        << " reads of uninitialized workgroup memory";
    d << " (" << reportsPrinted << " reported)";
    return failure();
  }
  return success();
}

LogicalResult InterpreterImpl::launch(
    Operation *launchOp, const CFunction &kernel, std::array<int64_t, 3> grid,
    std::array<int64_t, 3> block, ArrayRef<MemRefVal> memArgs,
    ArrayRef<Slot> scalarArgs, int64_t dynamicSharedBytes) {
  auto gpuFunc = cast<gpu::GPUFuncOp>(kernel.op);
  // CUDA's limits; an empty grid launches nothing (as FARuntime does).
  static constexpr int64_t gridLimits[3] = {2147483647, 65535, 65535};
  for (int d = 0; d < 3; ++d) {
    if (grid[d] < 0 || grid[d] > gridLimits[d] || block[d] < 1)
      return launchOp->emitOpError()
             << "launches a grid of (" << grid[0] << ", " << grid[1] << ", "
             << grid[2] << ") blocks of (" << block[0] << ", " << block[1]
             << ", " << block[2]
             << ") threads; grid sizes must be in [0, 2^31 - 1] x [0, 65535] "
                "x [0, 65535] and block sizes at least 1";
  }
  int64_t numThreads = block[0] * block[1] * block[2];
  if (dynamicSharedBytes < 0 || dynamicSharedBytes > (int64_t(1) << 30))
    return launchOp->emitOpError() << "launches with " << dynamicSharedBytes
                                   << " bytes of dynamic shared memory";
  if (numThreads > 1024)
    return launchOp->emitOpError() << "launches blocks of " << numThreads
                                   << " threads; at most 1024 are supported";
  if (auto known = gpuFunc.getKnownBlockSizeAttr()) {
    ArrayRef<int32_t> k = known.asArrayRef();
    for (int d = 0; d < 3 && d < static_cast<int>(k.size()); ++d)
      if (k[d] != block[d])
        return launchOp->emitOpError()
               << "launches " << gpuFunc.getName() << " with block size ("
               << block[0] << ", " << block[1] << ", " << block[2]
               << ") but the kernel's known_block_size is (" << k << ")";
  }
  ++stats.launches;
  ++launchId;

  Frame f;
  f.fn = &kernel;
  f.numThreads = static_cast<unsigned>(numThreads);
  f.regs.assign(static_cast<size_t>(kernel.numSlots) * numThreads, Slot{0});
  f.mems.resize(kernel.numSlots);
  f.gridDim = grid;
  f.blockDim = block;
  f.mark.assign(numThreads, 0);
  // Kernel arguments.
  unsigned memIdx = 0, scalarIdx = 0;
  for (auto [slot, type] : llvm::zip(kernel.body.args, kernel.argTypes)) {
    if (isa<MemRefType>(type)) {
      f.mems[slot] = memArgs[memIdx++];
    } else {
      Slot v = scalarArgs[scalarIdx++];
      Slot *r = f.reg(slot);
      std::fill(r, r + numThreads, v);
    }
  }
  // Workgroup buffers, one per global and attribution.
  auto makeShared = [&](std::string name, MemRefType type) {
    auto buf = std::make_unique<Buffer>();
    buf->name = std::move(name);
    buf->type = type;
    buf->ek = *getEKind(type.getElementType());
    buf->numElements = type.getNumElements();
    buf->gshift = log2Size(getEKindSize(buf->ek));
    buf->shared = true;
    buf->storage.assign(
        static_cast<size_t>(buf->numElements) * getEKindSize(buf->ek) + 8, 0);
    buf->data = buf->storage.data();
    buf->shadow.resize(buf->numElements);
    return buf;
  };
  auto describe = [](MemRefType type, Buffer *buf) {
    MemRefVal v;
    v.buf = buf;
    v.ek = buf->ek;
    v.sizes.assign(type.getShape().begin(), type.getShape().end());
    int64_t offset;
    SmallVector<int64_t> strides;
    (void)type.getStridesAndOffset(strides, offset);
    v.strides.assign(strides.begin(), strides.end());
    v.offset = offset;
    return v;
  };
  for (memref::GlobalOp g : kernel.sharedGlobals)
    f.sharedBufs.push_back(
        makeShared(("@" + g.getSymName()).str(), g.getType()));
  for (auto [i, attrib] : llvm::enumerate(kernel.workgroupAttribs)) {
    f.attribBufs.push_back(
        makeShared(("workgroup attribution " + Twine(i)).str(), attrib.second));
    f.mems[attrib.first] = describe(attrib.second, f.attribBufs.back().get());
  }
  {
    MLIRContext *ctx = gpuFunc.getContext();
    auto type = MemRefType::get(
        {dynamicSharedBytes}, IntegerType::get(ctx, 8),
        MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
    f.dynShared = makeShared("dynamic shared memory", type);
  }
  // The shared window: static buffers (globals, then attributions) from
  // 0x10 on, each aligned to 16 bytes or its global's alignment; dynamic
  // shared memory at opts.dynamicSharedBase (deliberately only 16-aligned by
  // default), or past the static buffers at the same offset modulo 1024.
  {
    if (opts.dynamicSharedBase < 16 || opts.dynamicSharedBase % 16 != 0)
      return launchOp->emitOpError()
             << "the interpreter's dynamic shared memory base "
             << opts.dynamicSharedBase << " must be a positive multiple of 16";
    int64_t next = 0x10;
    auto place = [&](Buffer &buf, int64_t align) {
      align = std::max<int64_t>(align, 16);
      next = (next + align - 1) / align * align;
      buf.sharedBase = next;
      next += buf.getNumBytes();
    };
    for (auto [i, buf] : llvm::enumerate(f.sharedBufs)) {
      memref::GlobalOp g = kernel.sharedGlobals[i];
      std::optional<uint64_t> align = g.getAlignment();
      place(*buf, align ? static_cast<int64_t>(*align) : 16);
    }
    for (auto &buf : f.attribBufs)
      place(*buf, 16);
    int64_t dynBase = opts.dynamicSharedBase;
    if (dynBase < next)
      dynBase = (next + 1023) / 1024 * 1024 + opts.dynamicSharedBase % 1024;
    f.dynShared->sharedBase = dynBase;
  }
  f.async.assign(numThreads, ThreadAsync());
  f.lastFence.assign(numThreads, 0);
  f.fenceBeforeBarrier.assign(numThreads, 0);
  if (kernel.hasWgmma) {
    f.wgCommitted.assign(numThreads, 0);
    f.wgRetired.assign(numThreads, 0);
    f.wgFenced.assign(numThreads, 0);
    f.wgPend.assign(static_cast<size_t>(kernel.numSlots) * numThreads, 0);
    f.wgPendSlot.assign(kernel.numSlots, 0);
    f.wgPendOp.assign(kernel.numSlots, nullptr);
  }

  std::vector<int32_t> all(numThreads);
  for (int32_t t = 0; t < numThreads; ++t)
    all[t] = t;
  for (int64_t z = 0; z < grid[2]; ++z) {
    for (int64_t y = 0; y < grid[1]; ++y) {
      for (int64_t x = 0; x < grid[0]; ++x) {
        f.blockId = {x, y, z};
        f.blockLinear = x + grid[0] * (y + grid[1] * z);
        f.blockStartEpoch = ++epoch;
        f.threadOps = 0;
        for (auto &buf : f.sharedBufs)
          buf->poison();
        for (auto &buf : f.attribBufs)
          buf->poison();
        f.dynShared->poison();
        // Every wgmma of the previous block counts as retired; a new group
        // number keeps its uncommitted results apart.
        for (int64_t t = 0; kernel.hasWgmma && t < numThreads; ++t) {
          f.wgRetired[t] = ++f.wgCommitted[t];
          f.wgFenced[t] = 0;
        }
        ++stats.blocks;
        if (failed(execBody(f, kernel, all)))
          return failure();
        dropPendingCopies(f);
      }
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

LogicalResult InterpreterImpl::exec(Frame &f, const CRegion &region,
                                    ArrayRef<int32_t> act) {
  for (const Instr &I : region.body) {
    ++stats.ops;
    stats.threadOps += act.size();
    f.threadOps += act.size();
    if (f.threadOps > opts.maxThreadOpsPerBlock)
      return I.op->emitOpError() << "exceeds the interpreter's limit of "
                                 << opts.maxThreadOpsPerBlock
                                 << " thread-ops per block (a runaway loop?)";
    if (f.wgIssued && I.opc != Opc::For && I.opc != Opc::If &&
        I.opc != Opc::WgMma && failed(checkWgPending(f, I, act)))
      return failure();
    if (failed(execInstr(f, I, act)))
      return failure();
  }
  return success();
}

LogicalResult InterpreterImpl::execBody(Frame &f, const CFunction &fn,
                                        ArrayRef<int32_t> act) {
  if (fn.blocks.empty())
    return exec(f, fn.body, act);
  const CRegion *block = fn.blocks.front();
  SmallVector<Slot, 16> tmp;
  while (true) {
    if (failed(exec(f, *block, act)))
      return failure();
    const Instr *br = block->branch.get();
    if (!br)
      return success();
    f.threadOps += act.size();
    if (f.threadOps > opts.maxThreadOpsPerBlock)
      return br->op->emitOpError() << "exceeds the interpreter's limit of "
                                   << opts.maxThreadOpsPerBlock
                                   << " thread-ops per block (a runaway loop?)";
    int64_t dest = br->imm;
    ArrayRef<uint32_t> operands = br->in;
    if (br->opc == Opc::CondBr) {
      const Slot *C = f.reg(br->in[0]);
      bool taken = C[act[0]].i != 0;
      for (int32_t t : act)
        if ((C[t].i != 0) != taken)
          return br->op->emitOpError()
                 << "branches divergently: " << describeThread(f, act[0])
                 << " goes to the " << (taken ? "true" : "false")
                 << " successor, " << describeThread(f, t) << " to the "
                 << (taken ? "false" : "true")
                 << " one; the fa interpreter runs unstructured control "
                    "flow only when it is uniform across the active threads";
      operands = operands.drop_front();
      if (taken) {
        operands = operands.take_front(br->n);
      } else {
        operands = operands.drop_front(br->n);
        dest = br->align;
      }
    }
    const CRegion *next = fn.blocks[dest];
    // Through a temporary: a block may pass its own arguments permuted.
    for (int32_t t : act) {
      tmp.clear();
      for (uint32_t s : operands)
        tmp.push_back(f.reg(s)[t]);
      for (auto [k, s] : llvm::enumerate(next->args))
        f.reg(s)[t] = tmp[k];
    }
    if (f.wgIssued) {
      // wgmma results passed along keep their pending state (through a
      // copy, as above).
      const size_t nt = f.numThreads;
      std::vector<uint32_t> pend;
      for (uint32_t s : operands)
        for (int32_t t : act)
          pend.push_back(f.wgPend[s * nt + t]);
      SmallVector<std::pair<uint8_t, Operation *>, 8> slotState;
      for (uint32_t s : operands)
        slotState.push_back({f.wgPendSlot[s], f.wgPendOp[s]});
      size_t p = 0;
      for (auto [k, s] : llvm::enumerate(next->args)) {
        for (int32_t t : act)
          f.wgPend[s * nt + t] = pend[p++];
        if (slotState[k].first) {
          f.wgPendSlot[s] = 1;
          f.wgPendOp[s] = slotState[k].second;
        }
      }
    }
    block = next;
  }
}

namespace {

double maximumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

double minimumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

double maxNumF(double a, double b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return maximumF(a, b);
}

double minNumF(double a, double b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return minimumF(a, b);
}

bool cmpF(arith::CmpFPredicate p, double a, double b) {
  bool unord = std::isnan(a) || std::isnan(b);
  using P = arith::CmpFPredicate;
  switch (p) {
  case P::AlwaysFalse:
    return false;
  case P::OEQ:
    return !unord && a == b;
  case P::OGT:
    return !unord && a > b;
  case P::OGE:
    return !unord && a >= b;
  case P::OLT:
    return !unord && a < b;
  case P::OLE:
    return !unord && a <= b;
  case P::ONE:
    return !unord && a != b;
  case P::ORD:
    return !unord;
  case P::UEQ:
    return unord || a == b;
  case P::UGT:
    return unord || a > b;
  case P::UGE:
    return unord || a >= b;
  case P::ULT:
    return unord || a < b;
  case P::ULE:
    return unord || a <= b;
  case P::UNE:
    return unord || a != b;
  case P::UNO:
    return unord;
  case P::AlwaysTrue:
    return true;
  }
  return false;
}

bool cmpI(arith::CmpIPredicate p, int64_t a, int64_t b, unsigned w) {
  using P = arith::CmpIPredicate;
  uint64_t ua = zext(a, w), ub = zext(b, w);
  switch (p) {
  case P::eq:
    return a == b;
  case P::ne:
    return a != b;
  case P::slt:
    return a < b;
  case P::sle:
    return a <= b;
  case P::sgt:
    return a > b;
  case P::sge:
    return a >= b;
  case P::ult:
    return ua < ub;
  case P::ule:
    return ua <= ub;
  case P::ugt:
    return ua > ub;
  case P::uge:
    return ua >= ub;
  }
  return false;
}

/// Applies a math function in the op's precision: float's for f16, bf16 and
/// f32 (rounded to the type afterwards), double's for f64.
template <typename FF, typename DF>
inline double mathF(FKind k, double x, FF ff, DF df) {
  if (k == FKind::F64)
    return df(x);
  return roundF(k, static_cast<double>(ff(static_cast<float>(x))));
}

double loadElem(const char *p, EKind k) {
  switch (k) {
  case EKind::F16: {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return getHalfTable()[b];
  }
  case EKind::BF16: {
    uint16_t b;
    std::memcpy(&b, p, 2);
    uint32_t w = static_cast<uint32_t>(b) << 16;
    float v;
    std::memcpy(&v, &w, 4);
    return v;
  }
  case EKind::F32: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case EKind::F64: {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  default:
    return 0;
  }
}

int64_t loadInt(const char *p, EKind k) {
  switch (k) {
  case EKind::I1:
    return *p ? -1 : 0;
  case EKind::I8:
    return static_cast<int8_t>(*p);
  case EKind::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case EKind::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case EKind::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  default:
    return 0;
  }
}

void storeElem(char *p, EKind k, Slot v) {
  switch (k) {
  case EKind::F16: {
    uint16_t b = doubleToHalfBits(v.f);
    std::memcpy(p, &b, 2);
    return;
  }
  case EKind::BF16: {
    uint16_t b = doubleToBFloat16Bits(v.f);
    std::memcpy(p, &b, 2);
    return;
  }
  case EKind::F32: {
    float x = static_cast<float>(v.f);
    std::memcpy(p, &x, 4);
    return;
  }
  case EKind::F64:
    std::memcpy(p, &v.f, 8);
    return;
  case EKind::I1:
    *p = v.i ? 1 : 0;
    return;
  case EKind::I8:
    *p = static_cast<char>(v.i);
    return;
  case EKind::I16: {
    int16_t x = static_cast<int16_t>(v.i);
    std::memcpy(p, &x, 2);
    return;
  }
  case EKind::I32: {
    int32_t x = static_cast<int32_t>(v.i);
    std::memcpy(p, &x, 4);
    return;
  }
  case EKind::I64:
    std::memcpy(p, &v.i, 8);
    return;
  }
}

double bitsToFloat(uint64_t bits, FKind k) {
  switch (k) {
  case FKind::F16:
    return halfBitsToDouble(static_cast<uint16_t>(bits));
  case FKind::BF16:
    return bfloat16BitsToDouble(static_cast<uint16_t>(bits));
  case FKind::F32: {
    uint32_t b = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  }
  case FKind::F64: {
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  }
  return 0;
}

uint64_t floatToBits(double x, FKind k) {
  switch (k) {
  case FKind::F16:
    return doubleToHalfBits(x);
  case FKind::BF16:
    return doubleToBFloat16Bits(x);
  case FKind::F32: {
    float v = static_cast<float>(x);
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  }
  case FKind::F64: {
    uint64_t b;
    std::memcpy(&b, &x, 8);
    return b;
  }
  }
  return 0;
}

/// Evaluates an affine expression; nullopt for a division by a value that
/// is not positive.
std::optional<int64_t> evalAffine(AffineExpr e, ArrayRef<int64_t> dims,
                                  ArrayRef<int64_t> syms) {
  switch (e.getKind()) {
  case AffineExprKind::Constant:
    return cast<AffineConstantExpr>(e).getValue();
  case AffineExprKind::DimId:
    return dims[cast<AffineDimExpr>(e).getPosition()];
  case AffineExprKind::SymbolId:
    return syms[cast<AffineSymbolExpr>(e).getPosition()];
  default:
    break;
  }
  auto bin = cast<AffineBinaryOpExpr>(e);
  std::optional<int64_t> l = evalAffine(bin.getLHS(), dims, syms);
  std::optional<int64_t> r = evalAffine(bin.getRHS(), dims, syms);
  if (!l || !r)
    return std::nullopt;
  int64_t x = *l, y = *r;
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return static_cast<int64_t>(static_cast<uint64_t>(x) +
                                static_cast<uint64_t>(y));
  case AffineExprKind::Mul:
    return static_cast<int64_t>(static_cast<uint64_t>(x) *
                                static_cast<uint64_t>(y));
  case AffineExprKind::Mod:
    if (y <= 0)
      return std::nullopt;
    return ((x % y) + y) % y;
  case AffineExprKind::FloorDiv:
    if (y <= 0)
      return std::nullopt;
    return x / y - ((x % y != 0 && x < 0) ? 1 : 0);
  case AffineExprKind::CeilDiv:
    if (y <= 0)
      return std::nullopt;
    return x / y + ((x % y != 0 && x > 0) ? 1 : 0);
  default:
    return std::nullopt;
  }
}

/// Converts a float to a w-bit integer rounding toward zero; NaN and
/// out-of-range values (poison in LLVM) saturate.
int64_t fpToInt(double x, unsigned w, bool isSigned) {
  if (std::isnan(x))
    return 0;
  double t = std::trunc(x);
  if (isSigned) {
    double lo = -std::ldexp(1.0, static_cast<int>(w) - 1);
    double hi = std::ldexp(1.0, static_cast<int>(w) - 1);
    if (t < lo)
      return sext(static_cast<int64_t>(uint64_t(1) << (w - 1)), w);
    if (t >= hi)
      return sext(static_cast<int64_t>((uint64_t(1) << (w - 1)) - 1), w);
    return static_cast<int64_t>(t);
  }
  if (t <= 0)
    return 0;
  double hi = std::ldexp(1.0, static_cast<int>(w));
  if (t >= hi)
    return -1;
  return sext(static_cast<int64_t>(static_cast<uint64_t>(t)), w);
}

} // namespace

LogicalResult InterpreterImpl::execInstr(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  auto R = [&](uint32_t s) { return f.reg(s); };
  const unsigned w = I.w;

#define FA_INT_BINOP(EXPR)                                                     \
  {                                                                            \
    for (uint32_t e = 0; e < I.n; ++e) {                                       \
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e);                     \
      Slot *Res = R(I.out[0] + e);                                             \
      for (int32_t t : act) {                                                  \
        int64_t x = A[t].i, y = B[t].i;                                        \
        uint64_t ux = zext(x, w), uy = zext(y, w);                             \
        (void)ux;                                                              \
        (void)uy;                                                              \
        Res[t].i = sext(static_cast<int64_t>(EXPR), w);                        \
      }                                                                        \
    }                                                                          \
    return success();                                                          \
  }
#define FA_FLOAT_BINOP(EXPR)                                                   \
  {                                                                            \
    const FKind k = I.fk;                                                      \
    for (uint32_t e = 0; e < I.n; ++e) {                                       \
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e);                     \
      Slot *Res = R(I.out[0] + e);                                             \
      for (int32_t t : act) {                                                  \
        double x = A[t].f, y = B[t].f;                                         \
        Res[t].f = roundF(k, (EXPR));                                          \
      }                                                                        \
    }                                                                          \
    return success();                                                          \
  }
#define FA_FLOAT_UNOP(EXPR)                                                    \
  {                                                                            \
    const FKind k = I.fk;                                                      \
    (void)k;                                                                   \
    for (uint32_t e = 0; e < I.n; ++e) {                                       \
      const Slot *A = R(I.in[0] + e);                                          \
      Slot *Res = R(I.out[0] + e);                                             \
      for (int32_t t : act) {                                                  \
        double x = A[t].f;                                                     \
        Res[t].f = (EXPR);                                                     \
      }                                                                        \
    }                                                                          \
    return success();                                                          \
  }
#define FA_CAST(EXPR)                                                          \
  {                                                                            \
    for (uint32_t e = 0; e < I.n; ++e) {                                       \
      const Slot *A = R(I.in[0] + e);                                          \
      Slot *Res = R(I.out[0] + e);                                             \
      (void)Res;                                                               \
      for (int32_t t : act) {                                                  \
        Slot a = A[t];                                                         \
        (void)a;                                                               \
        EXPR;                                                                  \
      }                                                                        \
    }                                                                          \
    return success();                                                          \
  }

  // Integer division: zero divisors (and signed overflow) are immediate
  // undefined behavior, reported.
  auto checkDivisor = [&](bool isSigned) -> LogicalResult {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e);
      for (int32_t t : act) {
        if (B[t].i == 0)
          return I.op->emitOpError()
                 << "divides by zero in " << describeThread(f, t);
        if (isSigned && w == 64 &&
            A[t].i == std::numeric_limits<int64_t>::min() && B[t].i == -1)
          return I.op->emitOpError()
                 << "overflows (INT64_MIN / -1) in " << describeThread(f, t);
      }
    }
    return success();
  };

  switch (I.opc) {
  case Opc::ConstI: {
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].i = I.imm;
    return success();
  }
  case Opc::ConstF: {
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].f = I.fimm;
    return success();
  }
  case Opc::AddI:
    FA_INT_BINOP(ux + uy)
  case Opc::SubI:
    FA_INT_BINOP(ux - uy)
  case Opc::MulI:
    FA_INT_BINOP(ux * uy)
  case Opc::DivSI:
    if (failed(checkDivisor(true)))
      return failure();
    FA_INT_BINOP(x / y)
  case Opc::DivUI:
    if (failed(checkDivisor(false)))
      return failure();
    FA_INT_BINOP(ux / uy)
  case Opc::RemSI:
    if (failed(checkDivisor(true)))
      return failure();
    FA_INT_BINOP(x % y)
  case Opc::RemUI:
    if (failed(checkDivisor(false)))
      return failure();
    FA_INT_BINOP(ux % uy)
  case Opc::CeilDivSI:
    if (failed(checkDivisor(true)))
      return failure();
    FA_INT_BINOP((x / y) + ((x % y != 0) && ((x < 0) == (y < 0)) ? 1 : 0))
  case Opc::CeilDivUI:
    if (failed(checkDivisor(false)))
      return failure();
    FA_INT_BINOP(ux / uy + (ux % uy != 0 ? 1 : 0))
  case Opc::FloorDivSI:
    if (failed(checkDivisor(true)))
      return failure();
    FA_INT_BINOP((x / y) - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0))
  case Opc::MinSI:
    FA_INT_BINOP(std::min(x, y))
  case Opc::MaxSI:
    FA_INT_BINOP(std::max(x, y))
  case Opc::MinUI:
    FA_INT_BINOP(std::min(ux, uy))
  case Opc::MaxUI:
    FA_INT_BINOP(std::max(ux, uy))
  case Opc::AndI:
    FA_INT_BINOP(x & y)
  case Opc::OrI:
    FA_INT_BINOP(x | y)
  case Opc::XOrI:
    FA_INT_BINOP(x ^ y)
  case Opc::ShLI:
    FA_INT_BINOP(uy >= w ? 0 : ux << uy)
  case Opc::ShRSI:
    FA_INT_BINOP(uy >= w ? (x < 0 ? -1 : 0) : x >> uy)
  case Opc::ShRUI:
    FA_INT_BINOP(uy >= w ? 0 : ux >> uy)
  case Opc::CmpI: {
    auto p = static_cast<arith::CmpIPredicate>(I.imm);
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t].i = cmpI(p, A[t].i, B[t].i, w) ? -1 : 0;
    }
    return success();
  }
  case Opc::AddF:
    FA_FLOAT_BINOP(x + y)
  case Opc::SubF:
    FA_FLOAT_BINOP(x - y)
  case Opc::MulF:
    FA_FLOAT_BINOP(x * y)
  case Opc::DivF:
    FA_FLOAT_BINOP(x / y)
  case Opc::RemF:
    FA_FLOAT_BINOP(std::fmod(x, y))
  case Opc::MaximumF:
    FA_FLOAT_BINOP(maximumF(x, y))
  case Opc::MinimumF:
    FA_FLOAT_BINOP(minimumF(x, y))
  case Opc::MaxNumF:
    FA_FLOAT_BINOP(maxNumF(x, y))
  case Opc::MinNumF:
    FA_FLOAT_BINOP(minNumF(x, y))
  case Opc::NegF:
    FA_FLOAT_UNOP(-x)
  case Opc::AbsF:
    FA_FLOAT_UNOP(std::fabs(x))
  case Opc::CmpF: {
    auto p = static_cast<arith::CmpFPredicate>(I.imm);
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t].i = cmpF(p, A[t].f, B[t].f) ? -1 : 0;
    }
    return success();
  }
  case Opc::Select: {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *C = R(I.in[0] + (I.scalarCond ? 0 : e)), *A = R(I.in[1] + e),
                 *B = R(I.in[2] + e);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t] = C[t].i ? A[t] : B[t];
    }
    return success();
  }
  case Opc::ConstVec: {
    for (uint32_t e = 0; e < I.n; ++e) {
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t] = I.consts[e];
    }
    return success();
  }
  case Opc::Move: {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.src[e]);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act)
        Res[t] = A[t];
    }
    return success();
  }
  case Opc::Reduction:
    return execReduction(f, I, act);
  case Opc::DynamicShared: {
    MemRefVal v;
    v.buf = f.dynShared.get();
    v.ek = EKind::I8;
    v.sizes = {f.dynShared->numElements};
    v.strides = {1};
    f.mems[I.out[0]] = std::move(v);
    return success();
  }
  case Opc::View:
  case Opc::SubView:
    return execView(f, I, act);
  case Opc::LdMatrix:
    return execLdMatrix(f, I, act);
  case Opc::MmaSync:
    return execMma(f, I, act);
  case Opc::AsyncCopy:
  case Opc::AsyncCommit:
  case Opc::AsyncWait:
    return execAsync(f, I, act);
  case Opc::ExtractPtr: {
    const MemRefVal &m = f.mems[I.in[0]];
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].i = m.buf->sharedBase + m.alignedByte;
    return success();
  }
  case Opc::WgMma:
    return execWgmma(f, I, act);
  case Opc::WgFence:
  case Opc::WgCommit:
  case Opc::WgWait:
    return execWgSync(f, I, act);
  case Opc::FenceProxy: {
    uint64_t c = ++clock;
    for (int32_t t : act)
      f.lastFence[t] = c;
    return success();
  }
  case Opc::NamedBarrier:
    return execNamedBarrier(f, I, act);
  case Opc::AffineApply:
  case Opc::AffineMin:
  case Opc::AffineMax: {
    unsigned nd = I.map.getNumDims();
    SmallVector<int64_t, 4> dims(nd), syms(I.map.getNumSymbols());
    Slot *Res = R(I.out[0]);
    for (int32_t t : act) {
      for (unsigned k = 0; k < I.in.size(); ++k)
        (k < nd ? dims[k] : syms[k - nd]) = R(I.in[k])[t].i;
      std::optional<int64_t> best;
      for (AffineExpr expr : I.map.getResults()) {
        std::optional<int64_t> v = evalAffine(expr, dims, syms);
        if (!v)
          return I.op->emitOpError()
                 << "divides by zero (or by a negative value) in "
                 << describeThread(f, t);
        if (!best || (I.opc == Opc::AffineMin && *v < *best) ||
            (I.opc == Opc::AffineMax && *v > *best))
          best = v;
      }
      Res[t].i = *best;
    }
    return success();
  }
  case Opc::ExtF:
    FA_CAST(Res[t] = a)
  case Opc::TruncF:
    FA_CAST(Res[t].f = roundF(I.fk2, a.f))
  case Opc::SIToFP:
    FA_CAST(Res[t].f = I.fk2 == FKind::F32
                           ? static_cast<double>(static_cast<float>(a.i))
                           : roundF(I.fk2, static_cast<double>(a.i)))
  case Opc::UIToFP:
    FA_CAST(Res[t].f =
                I.fk2 == FKind::F32
                    ? static_cast<double>(static_cast<float>(zext(a.i, I.w2)))
                    : roundF(I.fk2, static_cast<double>(zext(a.i, I.w2))))
  case Opc::FPToSI:
    FA_CAST(Res[t].i = fpToInt(a.f, w, true))
  case Opc::FPToUI:
    FA_CAST(Res[t].i = fpToInt(a.f, w, false))
  case Opc::ExtSI:
    FA_CAST(Res[t].i = a.i)
  case Opc::ExtUI:
    FA_CAST(Res[t].i = sext(static_cast<int64_t>(zext(a.i, I.w2)), w))
  case Opc::TruncI:
  case Opc::IndexCast:
  case Opc::BitcastIToI:
    FA_CAST(Res[t].i = sext(a.i, w))
  case Opc::IndexCastUI:
    FA_CAST(Res[t].i =
                w > I.w2 ? static_cast<int64_t>(zext(a.i, I.w2)) : sext(a.i, w))
  case Opc::BitcastIToF:
    FA_CAST(Res[t].f = bitsToFloat(zext(a.i, I.w2), I.fk2))
  case Opc::BitcastFToF:
    FA_CAST(Res[t].f = bitsToFloat(floatToBits(a.f, I.fk), I.fk2))
  case Opc::BitcastFToI:
    FA_CAST(Res[t].i = sext(static_cast<int64_t>(floatToBits(a.f, I.fk)), w))
  case Opc::Exp2:
    FA_FLOAT_UNOP(mathF(k, x, ::exp2f, [](double v) { return std::exp2(v); }))
  case Opc::Exp:
    FA_FLOAT_UNOP(mathF(k, x, ::expf, [](double v) { return std::exp(v); }))
  case Opc::Log:
    FA_FLOAT_UNOP(mathF(k, x, ::logf, [](double v) { return std::log(v); }))
  case Opc::Log2:
    FA_FLOAT_UNOP(mathF(k, x, ::log2f, [](double v) { return std::log2(v); }))
  case Opc::Sqrt:
    FA_FLOAT_UNOP(roundF(k, std::sqrt(x)))
  case Opc::Rsqrt:
    FA_FLOAT_UNOP(roundF(k, 1.0 / std::sqrt(x)))
  case Opc::Floor:
    FA_FLOAT_UNOP(std::floor(x))
  case Opc::Ceil:
    FA_FLOAT_UNOP(std::ceil(x))
  case Opc::Tanh:
    FA_FLOAT_UNOP(mathF(k, x, ::tanhf, [](double v) { return std::tanh(v); }))
  case Opc::Fma: {
    for (uint32_t e = 0; e < I.n; ++e) {
      const Slot *A = R(I.in[0] + e), *B = R(I.in[1] + e), *C = R(I.in[2] + e);
      Slot *Res = R(I.out[0] + e);
      for (int32_t t : act) {
        if (I.fk == FKind::F32)
          Res[t].f =
              std::fma(static_cast<float>(A[t].f), static_cast<float>(B[t].f),
                       static_cast<float>(C[t].f));
        else
          Res[t].f = roundF(I.fk, std::fma(A[t].f, B[t].f, C[t].f));
      }
    }
    return success();
  }
  case Opc::Ex2Approx:
  case Opc::Lg2Approx: {
    const Slot *A = R(I.in[0]);
    Slot *Res = R(I.out[0]);
    bool ex2 = I.opc == Opc::Ex2Approx;
    for (int32_t t : act) {
      float x = static_cast<float>(A[t].f);
      if (I.flag)
        x = flushF32(x);
      float y = ex2 ? ::exp2f(x) : ::log2f(x);
      if (I.flag)
        y = flushF32(y);
      Res[t].f = y;
    }
    return success();
  }
  case Opc::ThreadId: {
    Slot *Res = R(I.out[0]);
    int64_t bx = f.blockDim[0], by = f.blockDim[1];
    for (int32_t t : act)
      Res[t].i = I.imm == 0   ? t % bx
                 : I.imm == 1 ? (t / bx) % by
                              : t / (bx * by);
    return success();
  }
  case Opc::BlockId:
  case Opc::BlockDim:
  case Opc::GridDim: {
    Slot *Res = R(I.out[0]);
    const auto &src = I.opc == Opc::BlockId    ? f.blockId
                      : I.opc == Opc::BlockDim ? f.blockDim
                                               : f.gridDim;
    for (int32_t t : act)
      Res[t].i = src[I.imm];
    return success();
  }
  case Opc::LaneId: {
    Slot *Res = R(I.out[0]);
    for (int32_t t : act)
      Res[t].i = t % 32;
    return success();
  }
  case Opc::Barrier: {
    ++stats.barriers;
    if (act.size() != f.numThreads) {
      auto diag = I.op->emitOpError()
                  << "reached by " << act.size() << " of the " << f.numThreads
                  << " threads of block (" << f.blockId[0] << ", "
                  << f.blockId[1] << ", " << f.blockId[2]
                  << ") (a barrier in divergent code)";
      // Name the first missing thread.
      std::fill(f.mark.begin(), f.mark.end(), 0);
      for (int32_t t : act)
        f.mark[t] = 1;
      for (unsigned t = 0; t < f.numThreads; ++t)
        if (!f.mark[t]) {
          diag << "; thread " << t << " is not there";
          break;
        }
      return failure();
    }
    ++epoch;
    f.fenceBeforeBarrier = f.lastFence;
    return success();
  }
  case Opc::Shuffle:
    return execShuffle(f, I, act);
  case Opc::GetGlobal: {
    Buffer *buf = f.sharedBufs[I.imm].get();
    MemRefVal v;
    v.buf = buf;
    v.ek = buf->ek;
    auto type = cast<MemRefType>(buf->type);
    v.sizes.assign(type.getShape().begin(), type.getShape().end());
    SmallVector<int64_t> strides;
    int64_t offset;
    (void)type.getStridesAndOffset(strides, offset);
    v.strides.assign(strides.begin(), strides.end());
    v.offset = offset;
    f.mems[I.out[0]] = std::move(v);
    return success();
  }
  case Opc::MemRefAlias:
    f.mems[I.out[0]] = f.mems[I.in[0]];
    return success();
  case Opc::Dim: {
    const MemRefVal &m = f.mems[I.in[0]];
    const Slot *D = R(I.in[1]);
    Slot *Res = R(I.out[0]);
    for (int32_t t : act) {
      int64_t d = D[t].i;
      if (d < 0 || d >= static_cast<int64_t>(m.sizes.size()))
        return I.op->emitOpError()
               << "asks for dim " << d << " of a rank-" << m.sizes.size()
               << " memref in " << describeThread(f, t);
      Res[t].i = m.sizes[d];
    }
    return success();
  }
  case Opc::Load:
  case Opc::Store:
    return execMemory(f, I, act);
  case Opc::For: {
    const CRegion &body = *I.r0;
    const Slot *LB = R(I.in[0]), *UB = R(I.in[1]), *ST = R(I.in[2]);
    const size_t nIter = I.in.size() - 3;
    Slot *IV = R(body.args[0]);
    for (int32_t t : act) {
      if (ST[t].i <= 0)
        return I.op->emitOpError()
               << "has step " << ST[t].i << " in " << describeThread(f, t)
               << "; scf.for needs a positive step";
      IV[t] = LB[t];
    }
    for (size_t k = 0; k < nIter; ++k) {
      Slot *Arg = R(body.args[1 + k]);
      const Slot *Init = R(I.in[3 + k]);
      for (int32_t t : act)
        Arg[t] = Init[t];
      copyPend(f, body.args[1 + k], I.in[3 + k], act);
    }
    SmallVector<int32_t, 128> live;
    SmallVector<Slot, 8> tmp(nIter);
    const bool isUnsigned = I.flag;
    while (true) {
      live.clear();
      for (int32_t t : act) {
        bool in = isUnsigned ? zext(IV[t].i, w) < zext(UB[t].i, w)
                             : IV[t].i < UB[t].i;
        if (in)
          live.push_back(t);
      }
      if (live.empty())
        break;
      if (failed(exec(f, body, live)))
        return failure();
      if (nIter) {
        for (int32_t t : live) {
          for (size_t k = 0; k < nIter; ++k)
            tmp[k] = R(body.yields[k])[t];
          for (size_t k = 0; k < nIter; ++k)
            R(body.args[1 + k])[t] = tmp[k];
        }
        if (f.wgIssued) {
          // A yield may pass the iter_args permuted: through a copy.
          const size_t nt = f.numThreads;
          std::vector<uint32_t> pend;
          SmallVector<uint8_t, 8> any;
          SmallVector<Operation *, 8> ops;
          for (size_t k = 0; k < nIter; ++k) {
            uint32_t y = body.yields[k];
            for (int32_t t : live)
              pend.push_back(f.wgPend[y * nt + t]);
            any.push_back(f.wgPendSlot[y]);
            ops.push_back(f.wgPendOp[y]);
          }
          size_t p = 0;
          for (size_t k = 0; k < nIter; ++k) {
            uint32_t a = body.args[1 + k];
            for (int32_t t : live)
              f.wgPend[a * nt + t] = pend[p++];
            if (any[k]) {
              f.wgPendSlot[a] = 1;
              f.wgPendOp[a] = ops[k];
            }
          }
        }
      }
      for (int32_t t : live)
        IV[t].i =
            sext(static_cast<int64_t>(zext(IV[t].i, w) + zext(ST[t].i, w)), w);
      if (f.threadOps > opts.maxThreadOpsPerBlock)
        return I.op->emitOpError() << "exceeds the interpreter's limit of "
                                   << opts.maxThreadOpsPerBlock
                                   << " thread-ops per block (a runaway loop?)";
    }
    for (size_t k = 0; k < nIter; ++k) {
      const Slot *Arg = R(body.args[1 + k]);
      Slot *Res = R(I.out[k]);
      for (int32_t t : act)
        Res[t] = Arg[t];
      copyPend(f, I.out[k], body.args[1 + k], act);
    }
    return success();
  }
  case Opc::If: {
    const Slot *C = R(I.in[0]);
    SmallVector<int32_t, 128> thenSet, elseSet;
    for (int32_t t : act)
      (C[t].i ? thenSet : elseSet).push_back(t);
    auto runBranch = [&](const CRegion *region,
                         ArrayRef<int32_t> set) -> LogicalResult {
      if (set.empty() || !region)
        return success();
      if (failed(exec(f, *region, set)))
        return failure();
      for (auto [k, res] : llvm::enumerate(I.out)) {
        const Slot *Y = R(region->yields[k]);
        Slot *Res = R(res);
        for (int32_t t : set)
          Res[t] = Y[t];
        copyPend(f, res, region->yields[k], set);
      }
      return success();
    };
    if (failed(runBranch(I.r0.get(), thenSet)))
      return failure();
    return runBranch(I.r1.get(), elseSet);
  }
  case Opc::LaunchFunc: {
    auto launchOp = cast<gpu::LaunchFuncOp>(I.op);
    Operation *kernelOp =
        SymbolTable::lookupNearestSymbolFrom(launchOp, launchOp.getKernel());
    FailureOr<const CFunction *> kernel = getCompiled(kernelOp);
    if (failed(kernel))
      return failure();
    // Operand slots follow the op's operand order.
    auto slotOfOperand = [&](Value v) {
      for (OpOperand &o : launchOp->getOpOperands())
        if (o.get() == v)
          return I.in[o.getOperandNumber()];
      llvm_unreachable("not an operand");
    };
    auto sizeOf = [&](Value v) { return R(slotOfOperand(v))[act[0]].i; };
    gpu::KernelDim3 g = launchOp.getGridSizeOperandValues();
    gpu::KernelDim3 b = launchOp.getBlockSizeOperandValues();
    std::array<int64_t, 3> grid{sizeOf(g.x), sizeOf(g.y), sizeOf(g.z)};
    std::array<int64_t, 3> block{sizeOf(b.x), sizeOf(b.y), sizeOf(b.z)};
    std::vector<MemRefVal> memArgs;
    SmallVector<Slot> scalarArgs;
    const CFunction &k = **kernel;
    if (launchOp.getKernelOperands().size() != k.argTypes.size())
      return I.op->emitOpError()
             << "passes " << launchOp.getKernelOperands().size()
             << " operands to a kernel of " << k.argTypes.size()
             << " arguments";
    for (Value v : launchOp.getKernelOperands()) {
      if (isa<MemRefType>(v.getType()))
        memArgs.push_back(f.mems[slotOfOperand(v)]);
      else
        scalarArgs.push_back(R(slotOfOperand(v))[act[0]]);
    }
    int64_t dynBytes = 0;
    if (Value d = launchOp.getDynamicSharedMemorySize())
      dynBytes = sizeOf(d);
    return launch(I.op, k, grid, block, memArgs, scalarArgs, dynBytes);
  }
  case Opc::Br:
  case Opc::CondBr:
    break;
  }
#undef FA_INT_BINOP
#undef FA_FLOAT_BINOP
#undef FA_FLOAT_UNOP
#undef FA_CAST
  return I.op->emitOpError() << "has no interpreter implementation";
}

LogicalResult InterpreterImpl::execShuffle(Frame &f, const Instr &I,
                                           ArrayRef<int32_t> act) {
  const Slot *V = f.reg(I.in[0]), *Off = f.reg(I.in[1]),
             *Width = f.reg(I.in[2]);
  Slot *Res = f.reg(I.out[0]), *Valid = f.reg(I.out[1]);
  // Every existing lane of each warp taking part must be active.
  std::fill(f.mark.begin(), f.mark.end(), 0);
  for (int32_t t : act)
    f.mark[t] = 1;
  for (int32_t t : act) {
    int32_t base = t - t % 32;
    int32_t end = std::min<int32_t>(base + 32, f.numThreads);
    for (int32_t l = base; l < end; ++l)
      if (!f.mark[l])
        return I.op->emitOpError()
               << "executed by lane " << t % 32 << " of warp " << t / 32
               << " of block (" << f.blockId[0] << ", " << f.blockId[1] << ", "
               << f.blockId[2] << ") while lane " << l % 32
               << " of that warp is inactive; gpu.shuffle (shfl.sync with a "
                  "full mask) needs all 32 lanes";
    if (Width[t].i != 32)
      return I.op->emitOpError()
             << "has width " << Width[t].i << " in " << describeThread(f, t)
             << "; the fa interpreter supports width 32 only";
    if (Off[t].i < 0 || Off[t].i >= 32)
      return I.op->emitOpError()
             << "has offset " << Off[t].i << " in " << describeThread(f, t)
             << "; it must be in [0, 32)";
  }
  auto mode = static_cast<gpu::ShuffleMode>(I.imm);
  for (int32_t t : act) {
    int32_t lane = t % 32, base = t - lane;
    int32_t off = static_cast<int32_t>(Off[t].i);
    int32_t j = lane;
    bool valid = false;
    switch (mode) {
    case gpu::ShuffleMode::XOR:
      j = lane ^ off;
      valid = true;
      break;
    case gpu::ShuffleMode::IDX:
      j = off;
      valid = true;
      break;
    case gpu::ShuffleMode::DOWN:
      j = lane + off;
      valid = j <= 31;
      break;
    case gpu::ShuffleMode::UP:
      j = lane - off;
      valid = j >= 0;
      break;
    }
    if (valid && base + j >= static_cast<int32_t>(f.numThreads))
      valid = false;
    Res[t] = valid ? V[base + j] : V[t];
    Valid[t].i = valid ? -1 : 0;
  }
  return success();
}

void InterpreterImpl::report(int kind, Operation *second, Operation *first,
                             llvm::function_ref<std::string()> message,
                             llvm::function_ref<std::string()> note) {
  if (!reported.insert({kind, second, first}).second)
    return;
  if (reportsPrinted >= opts.maxReports)
    return;
  ++reportsPrinted;
  InFlightDiagnostic d = second->emitOpError() << message();
  if (first)
    d.attachNote(first->getLoc()) << note();
}

namespace {
enum ReportKind { kRAW, kWAW, kWAR, kCrossBlock, kUninit };
} // namespace

bool InterpreterImpl::checkRead(Frame &f, const Instr &I, Buffer &buf,
                                Shadow &s, int32_t t,
                                llvm::function_ref<std::string()> where,
                                bool quiet) {
  bool found = false;
  if (!quiet && buf.shared && opts.checkUninitializedShared &&
      s.wEpoch < f.blockStartEpoch) {
    found = true;
    ++stats.uninitializedReads;
    report(
        kUninit, I.op, nullptr,
        [&] {
          return formatv(
                     "reads {0} in {1} before any thread of the block wrote "
                     "it (uninitialized workgroup memory)",
                     where(), describeThread(f, t))
              .str();
        },
        [] { return std::string(); });
  }
  if (!opts.checkRaces)
    return found;
  if (quiet) {
  } else if (s.wEpoch == epoch && s.wThread != t) {
    found = true;
    ++stats.races;
    report(
        kRAW, I.op, s.wOp,
        [&] {
          return formatv("race: {0} reads {1}, which thread {2} (warp {3}) "
                         "wrote in the same barrier interval",
                         describeThread(f, t), where(), s.wThread,
                         s.wThread / 32)
              .str();
        },
        [&] { return formatv("the write by thread {0}", s.wThread).str(); });
  } else if (!buf.shared && s.wLaunch == launchId && s.wBlock >= 0 &&
             s.wBlock != f.blockLinear) {
    found = true;
    ++stats.races;
    report(
        kCrossBlock, I.op, s.wOp,
        [&] {
          return formatv(
                     "race: {0} reads {1}, which block {2} wrote during the "
                     "same launch",
                     describeThread(f, t), where(), describeBlock(s.wBlock, f))
              .str();
        },
        [&] {
          return formatv("the write by block {0}", describeBlock(s.wBlock, f))
              .str();
        });
  }
  // Record the reader (up to two of different warps per interval).
  if (s.rEpoch != epoch) {
    s.rEpoch = epoch;
    s.r0 = t;
    s.r0Op = I.op;
    s.r1 = -1;
  } else if (s.r1 < 0 && s.r0 / 32 != t / 32) {
    s.r1 = t;
    s.r1Op = I.op;
  }
  return found;
}

bool InterpreterImpl::checkWrite(Frame &f, const Instr &I, Buffer &buf,
                                 Shadow &s, int32_t t,
                                 llvm::function_ref<std::string()> where,
                                 bool quiet) {
  bool found = false;
  if (opts.checkRaces && !quiet) {
    if (s.wEpoch == epoch && s.wThread != t) {
      found = true;
      ++stats.races;
      report(
          kWAW, I.op, s.wOp,
          [&] {
            return formatv(
                       "race: {0} writes {1}, which thread {2} (warp {3}) also "
                       "wrote in the same barrier interval",
                       describeThread(f, t), where(), s.wThread, s.wThread / 32)
                .str();
          },
          [&] {
            return formatv("the other write, by thread {0}", s.wThread).str();
          });
    } else if (!buf.shared && s.wLaunch == launchId && s.wBlock >= 0 &&
               s.wBlock != f.blockLinear) {
      found = true;
      ++stats.races;
      report(
          kCrossBlock, I.op, s.wOp,
          [&] {
            return formatv("race: {0} writes {1}, which block {2} also wrote "
                           "during the same launch",
                           describeThread(f, t), where(),
                           describeBlock(s.wBlock, f))
                .str();
          },
          [&] {
            return formatv("the write by block {0}", describeBlock(s.wBlock, f))
                .str();
          });
    }
    if (!found && s.rEpoch == epoch) {
      int32_t other = -1;
      Operation *otherOp = nullptr;
      if (s.r0 >= 0 && s.r0 / 32 != t / 32) {
        other = s.r0;
        otherOp = s.r0Op;
      } else if (s.r1 >= 0 && s.r1 / 32 != t / 32) {
        other = s.r1;
        otherOp = s.r1Op;
      }
      if (other >= 0) {
        found = true;
        ++stats.races;
        report(
            kWAR, I.op, otherOp,
            [&] {
              return formatv(
                         "race: {0} writes {1}, which thread {2} of another "
                         "warp (warp {3}) read in the same barrier interval",
                         describeThread(f, t), where(), other, other / 32)
                  .str();
            },
            [&] { return formatv("the read by thread {0}", other).str(); });
      }
    }
  }
  s.wEpoch = epoch;
  s.wTime = clock;
  s.wThread = t;
  s.wOp = I.op;
  s.wLaunch = launchId;
  s.wBlock = f.blockLinear;
  return found;
}

LogicalResult InterpreterImpl::touch(Frame &f, const Instr &I, Buffer &buf,
                                     int64_t byte, unsigned size, int32_t t,
                                     bool isWrite,
                                     llvm::function_ref<std::string()> where) {
  if (buf.shadow.empty())
    return success();
  int64_t g0 = byte >> buf.gshift, g1 = (byte + size - 1) >> buf.gshift;
  bool found = false;
  for (int64_t g = g0; g <= g1; ++g) {
    Shadow &s = buf.shadow[g];
    if (s.pendOp) {
      InFlightDiagnostic d =
          I.op->emitOpError()
          << (isWrite ? "writes " : "reads ") << where() << " in "
          << describeThread(f, t) << " while the '" << s.pendOp->getName()
          << "' of thread " << s.pendThread << " to it (at "
          << s.pendOp->getLoc()
          << ") is still pending: no nvgpu.device_async_wait of that "
             "thread has completed the copy's group";
      d.attachNote(s.pendOp->getLoc()) << "the pending copy";
      return failure();
    }
    if (isWrite && s.asyncReadOp && f.fn->hasWgmma &&
        s.asyncReadGroup > f.wgRetired[s.asyncReadWg]) {
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "writes " << where() << " in " << describeThread(f, t)
          << " while the 'nvvm.wgmma.mma_async' of warpgroup "
          << s.asyncReadWg / 128
          << " that reads it is in flight: no nvvm.wgmma.wait.group.sync."
             "aligned of that warpgroup has retired its group";
      d.attachNote(s.asyncReadOp->getLoc()) << "the wgmma.mma_async";
      return failure();
    }
    found |= isWrite ? checkWrite(f, I, buf, s, t, where, found)
                     : checkRead(f, I, buf, s, t, where, found);
  }
  return success();
}

LogicalResult InterpreterImpl::execMemory(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  const bool isStore = I.opc == Opc::Store;
  const unsigned memOperand = isStore ? 1 : 0;
  const MemRefVal &m = f.mems[I.in[memOperand]];
  Buffer &buf = *m.buf;
  const size_t rank = m.sizes.size();
  const EKind ek = m.ek;
  const size_t esize = getEKindSize(ek);
  const bool isFloat = isFloatEKind(ek);
  const int64_t numBytes = buf.getNumBytes();
  const size_t bufESize = getEKindSize(buf.ek);
  if (!buf.shared && opts.checkRaces && buf.shadow.empty() && isStore)
    buf.shadow.resize(buf.numElements);
  const bool track = !buf.shadow.empty();

  SmallVector<int32_t, 128> order;
  if (opts.shuffleMemoryOrder) {
    order.assign(act.begin(), act.end());
    std::shuffle(order.begin(), order.end(), rng);
    act = order;
  }
  SmallVector<const Slot *, 4> idxRegs;
  for (size_t k = 0; k < rank; ++k)
    idxRegs.push_back(f.reg(I.in[memOperand + 1 + k]));
  // The offsets of each vector element in the trailing dims.
  const size_t vrank = I.vshape.size();
  SmallVector<int64_t, 16> voff;
  for (uint32_t e = 0; e < I.n && vrank; ++e)
    llvm::append_range(voff, delinearize(e, I.vshape));
  const uint32_t valSlot = isStore ? I.in[0] : I.out[0];
  SmallVector<int64_t, 4> idx(rank);

  for (int32_t t : act) {
    for (uint32_t e = 0; e < I.n; ++e) {
      int64_t lin = m.offset;
      bool oob = false;
      for (size_t k = 0; k < rank; ++k) {
        idx[k] = idxRegs[k][t].i;
        if (vrank && k >= rank - vrank)
          idx[k] += voff[e * vrank + (k - (rank - vrank))];
        if (idx[k] < 0 || idx[k] >= m.sizes[k])
          oob = true;
        lin += idx[k] * m.strides[k];
      }
      int64_t byte = lin * static_cast<int64_t>(esize);
      if (oob || byte < 0 || byte + static_cast<int64_t>(esize) > numBytes)
        return I.op->emitOpError()
               << "out-of-bounds " << (isStore ? "write" : "read") << " of "
               << buf.name << " (" << buf.type << ") at index "
               << formatIndex(idx) << " (sizes " << formatIndex(m.sizes)
               << ") in " << describeThread(f, t);
      if (e == 0 && I.align && byte % I.align != 0)
        return I.op->emitOpError()
               << "accesses " << buf.name << " at index " << formatIndex(idx)
               << ", byte offset " << byte << ", which is not a multiple of "
               << "its alignment " << I.align << " in " << describeThread(f, t);
      char *p = buf.data + byte;
      if (track) {
        auto where = [&]() { return describeElement(buf, ek, idx, lin, byte); };
        if (failed(touch(f, I, buf, byte, esize, t, isStore, where)))
          return failure();
      }
      Slot *v = f.reg(valSlot + e) + t;
      if (isStore) {
        storeElem(p, ek, *v);
        if (buf.writtenMask)
          buf.writtenMask[byte / static_cast<int64_t>(bufESize)] = 1;
      } else if (isFloat) {
        v->f = loadElem(p, ek);
      } else {
        v->i = loadInt(p, ek);
      }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::checkFullWarps(Frame &f, const Instr &I,
                                              ArrayRef<int32_t> act,
                                              StringRef what) {
  std::fill(f.mark.begin(), f.mark.end(), 0);
  for (int32_t t : act)
    f.mark[t] = 1;
  for (int32_t t : act) {
    if (t % 32 != 0 && f.mark[t - 1])
      continue;
    int32_t base = t - t % 32;
    for (int32_t l = base; l < base + 32; ++l)
      if (l >= static_cast<int32_t>(f.numThreads) || !f.mark[l])
        return I.op->emitOpError()
               << "executed by lane " << t % 32 << " of warp " << t / 32
               << " of block (" << f.blockId[0] << ", " << f.blockId[1] << ", "
               << f.blockId[2] << ") while lane " << l % 32
               << " of that warp is "
               << (l >= static_cast<int32_t>(f.numThreads) ? "missing"
                                                           : "inactive")
               << "; " << what << " needs all 32 lanes";
  }
  return success();
}

FailureOr<int64_t> InterpreterImpl::getUniform(Frame &f, const Instr &I,
                                               uint32_t slot,
                                               ArrayRef<int32_t> act,
                                               StringRef what) {
  const Slot *V = f.reg(slot);
  int64_t v = V[act[0]].i;
  for (int32_t t : act)
    if (V[t].i != v) {
      I.op->emitOpError() << "has a thread-dependent " << what << " (" << v
                          << " in thread " << act[0] << ", " << V[t].i
                          << " in thread " << t
                          << "); the fa interpreter needs memref descriptors "
                             "to be uniform";
      return failure();
    }
  return v;
}

LogicalResult InterpreterImpl::execReduction(Frame &f, const Instr &I,
                                             ArrayRef<int32_t> act) {
  using K = vector::CombiningKind;
  auto kind = static_cast<K>(I.imm);
  const bool isFloat = I.w == 0;
  const unsigned w = I.w;
  Slot *Res = f.reg(I.out[0]);
  for (int32_t t : act) {
    uint32_t first = 0;
    Slot acc;
    if (I.flag) {
      acc = f.reg(I.in[1])[t];
    } else {
      acc = f.reg(I.in[0])[t];
      first = 1;
    }
    for (uint32_t e = first; e < I.n; ++e) {
      Slot x = f.reg(I.in[0] + e)[t];
      if (isFloat) {
        double a = acc.f, b = x.f, r;
        switch (kind) {
        case K::ADD:
          r = a + b;
          break;
        case K::MUL:
          r = a * b;
          break;
        case K::MAXNUMF:
          r = maxNumF(a, b);
          break;
        case K::MINNUMF:
          r = minNumF(a, b);
          break;
        case K::MAXIMUMF:
          r = maximumF(a, b);
          break;
        default:
          r = minimumF(a, b);
          break;
        }
        acc.f = roundF(I.fk, r);
        continue;
      }
      int64_t a = acc.i, b = x.i;
      uint64_t ua = zext(a, w), ub = zext(b, w);
      uint64_t r;
      switch (kind) {
      case K::ADD:
        r = ua + ub;
        break;
      case K::MUL:
        r = ua * ub;
        break;
      case K::MINSI:
        r = static_cast<uint64_t>(std::min(a, b));
        break;
      case K::MAXSI:
        r = static_cast<uint64_t>(std::max(a, b));
        break;
      case K::MINUI:
        r = std::min(ua, ub);
        break;
      case K::MAXUI:
        r = std::max(ua, ub);
        break;
      case K::AND:
        r = ua & ub;
        break;
      case K::OR:
        r = ua | ub;
        break;
      case K::XOR:
        r = ua ^ ub;
        break;
      default:
        return I.op->emitOpError()
               << "has a combining kind the fa interpreter does not support "
                  "on integers";
      }
      acc.i = sext(static_cast<int64_t>(r), w);
    }
    Res[t] = acc;
  }
  return success();
}

LogicalResult InterpreterImpl::execView(Frame &f, const Instr &I,
                                        ArrayRef<int32_t> act) {
  const MemRefVal &src = f.mems[I.in[0]];
  MemRefVal v;
  v.buf = src.buf;
  if (I.opc == Opc::View) {
    auto view = cast<memref::ViewOp>(I.op);
    FailureOr<int64_t> shift = getUniform(f, I, I.in[1], act, "byte shift");
    if (failed(shift))
      return failure();
    MemRefType type = view.getType();
    v.ek = I.ek;
    size_t esize = getEKindSize(I.ek);
    unsigned next = 2;
    for (int64_t d : type.getShape()) {
      if (ShapedType::isDynamic(d)) {
        FailureOr<int64_t> size = getUniform(f, I, I.in[next++], act, "size");
        if (failed(size))
          return failure();
        d = *size;
      }
      v.sizes.push_back(d);
    }
    v.strides = SmallVector<int64_t, 4>(getRowMajorStrides(v.sizes));
    int64_t byte =
        src.offset * static_cast<int64_t>(getEKindSize(src.ek)) + *shift;
    int64_t count = 1;
    for (int64_t d : v.sizes)
      count *= d;
    if (*shift < 0 || byte % static_cast<int64_t>(esize) != 0 ||
        byte + count * static_cast<int64_t>(esize) > src.buf->getNumBytes())
      return I.op->emitOpError()
             << "views " << count * static_cast<int64_t>(esize)
             << " bytes at byte shift " << *shift << " of " << src.buf->name
             << " (" << src.buf->getNumBytes() << " bytes)"
             << "; the view must lie inside the buffer and be aligned to its "
                "element size";
    v.offset = byte / static_cast<int64_t>(esize);
    v.alignedByte = byte;
    f.mems[I.out[0]] = std::move(v);
    return success();
  }
  auto sub = cast<memref::SubViewOp>(I.op);
  v.ek = src.ek;
  unsigned next = 1;
  auto take = [&](ArrayRef<int64_t> statics, SmallVector<int64_t, 4> &out,
                  StringRef what) -> LogicalResult {
    for (int64_t x : statics) {
      if (ShapedType::isDynamic(x)) {
        FailureOr<int64_t> val = getUniform(f, I, I.in[next++], act, what);
        if (failed(val))
          return failure();
        x = *val;
      }
      out.push_back(x);
    }
    return success();
  };
  SmallVector<int64_t, 4> offsets, sizes, strides;
  if (failed(take(sub.getStaticOffsets(), offsets, "offset")) ||
      failed(take(sub.getStaticSizes(), sizes, "size")) ||
      failed(take(sub.getStaticStrides(), strides, "stride")))
    return failure();
  llvm::SmallBitVector dropped = sub.getDroppedDims();
  v.offset = src.offset;
  v.alignedByte = src.alignedByte;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 ||
        (sizes[d] > 0 &&
         offsets[d] + (sizes[d] - 1) * strides[d] >= src.sizes[d]))
      return I.op->emitOpError()
             << "takes offset " << offsets[d] << ", size " << sizes[d]
             << " and stride " << strides[d] << " in dim " << d << " of "
             << src.buf->name << " (size " << src.sizes[d]
             << "): out of bounds";
    v.offset += offsets[d] * src.strides[d];
    if (dropped.test(d))
      continue;
    v.sizes.push_back(sizes[d]);
    v.strides.push_back(src.strides[d] * strides[d]);
  }
  f.mems[I.out[0]] = std::move(v);
  return success();
}

/// The linear index (in elements of the view) of a run of `count` elements
/// along the last dim of `m` starting at `idx`; fails if any of them is out
/// of bounds.
static bool getRun(const MemRefVal &m, ArrayRef<int64_t> idx, int64_t count,
                   int64_t esize, int64_t &lin) {
  const size_t rank = m.sizes.size();
  lin = m.offset;
  for (size_t k = 0; k < rank; ++k) {
    int64_t hi = idx[k] + (k + 1 == rank ? count - 1 : 0);
    if (idx[k] < 0 || hi >= m.sizes[k])
      return false;
    lin += idx[k] * m.strides[k];
  }
  if (count == 0)
    return true;
  int64_t last = lin + (count - 1) * m.strides[rank - 1];
  return std::min(lin, last) >= 0 &&
         (std::max(lin, last) + 1) * esize <= m.buf->getNumBytes();
}

LogicalResult InterpreterImpl::execLdMatrix(Frame &f, const Instr &I,
                                            ArrayRef<int32_t> act) {
  if (failed(checkFullWarps(f, I, act, "nvgpu.ldmatrix (ldmatrix.sync)")))
    return failure();
  const MemRefVal &m = f.mems[I.in[0]];
  Buffer &buf = *m.buf;
  const size_t rank = m.sizes.size();
  const int64_t tiles = I.imm;
  const bool trans = I.flag;
  const int64_t step = m.strides[rank - 1];
  const bool isHalf = I.ek == EKind::F16;
  const double *halfTable = getHalfTable();
  SmallVector<int64_t, 4> idx(rank);
  double M[4][8][8];
  for (int32_t base : act) {
    if (base % 32 != 0)
      continue;
    for (int64_t i = 0; i < tiles; ++i) {
      for (int64_t r = 0; r < 8; ++r) {
        int32_t t = base + static_cast<int32_t>(8 * i + r);
        for (size_t k = 0; k < rank; ++k)
          idx[k] = f.reg(I.in[1 + k])[t].i;
        int64_t lin;
        if (!getRun(m, idx, 8, 2, lin))
          return I.op->emitOpError()
                 << "out-of-bounds read of " << buf.name << " (" << buf.type
                 << ") at index " << formatIndex(idx) << " (sizes "
                 << formatIndex(m.sizes) << "): the 8 elements of row " << r
                 << " of matrix " << i << ", whose address is given by "
                 << describeThread(f, t);
        int64_t byte = lin * 2;
        if (byte % 16 != 0)
          return I.op->emitOpError()
                 << "row " << r << " of matrix " << i << " at " << buf.name
                 << formatIndex(idx) << " (byte offset " << byte
                 << "), given by " << describeThread(f, t)
                 << ", is not 16-byte aligned";
        auto where = [&]() {
          return describeElement(buf, I.ek, idx, lin, byte) + " (a row of 8)";
        };
        if (step == 1) {
          if (failed(touch(f, I, buf, byte, 16, t, false, where)))
            return failure();
        } else {
          for (int64_t c = 0; c < 8; ++c)
            if (failed(
                    touch(f, I, buf, (lin + c * step) * 2, 2, t, false, where)))
              return failure();
        }
        for (int64_t c = 0; c < 8; ++c) {
          uint16_t bits;
          std::memcpy(&bits, buf.data + (lin + c * step) * 2, 2);
          if (isHalf) {
            M[i][r][c] = halfTable[bits];
          } else {
            uint32_t w = static_cast<uint32_t>(bits) << 16;
            float v;
            std::memcpy(&v, &w, 4);
            M[i][r][c] = v;
          }
        }
      }
    }
    for (int32_t l = 0; l < 32; ++l) {
      int32_t row = l / 4;
      for (int64_t i = 0; i < tiles; ++i)
        for (int32_t j = 0; j < 2; ++j) {
          int32_t col = 2 * (l % 4) + j;
          f.reg(I.out[0] + 2 * i + j)[base + l].f =
              trans ? M[i][col][row] : M[i][row][col];
        }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::execMma(Frame &f, const Instr &I,
                                       ArrayRef<int32_t> act) {
  if (failed(checkFullWarps(f, I, act, "nvgpu.mma.sync (mma.sync)")))
    return failure();
  const bool k16 = I.imm == 16;
  const int K = k16 ? 16 : 8;
  double A[16][16], B[16][8], C[16][8];
  for (int32_t base : act) {
    if (base % 32 != 0)
      continue;
    for (int32_t l = 0; l < 32; ++l) {
      int32_t g = l / 4, tq = l % 4, t = base + l;
      for (int e = 0; e < (k16 ? 8 : 4); ++e) {
        int row = g + 8 * ((e / 2) % 2), col = 2 * tq + e % 2 + 8 * (e / 4);
        A[row][col] = f.reg(I.in[0] + e)[t].f;
      }
      for (int e = 0; e < (k16 ? 4 : 2); ++e)
        B[2 * tq + e % 2 + 8 * (e / 2)][g] = f.reg(I.in[1] + e)[t].f;
      for (int e = 0; e < 4; ++e)
        C[g + 8 * (e / 2)][2 * tq + e % 2] = f.reg(I.in[2] + e)[t].f;
    }
    for (int32_t l = 0; l < 32; ++l) {
      int32_t g = l / 4, tq = l % 4, t = base + l;
      for (int e = 0; e < 4; ++e) {
        int row = g + 8 * (e / 2), col = 2 * tq + e % 2;
        double acc = C[row][col];
        for (int k = 0; k < K; ++k)
          acc += A[row][k] * B[k][col];
        f.reg(I.out[0] + e)[t].f = roundF(I.fk, acc);
      }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::execAsync(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  if (I.opc == Opc::AsyncCommit) {
    for (int32_t t : act) {
      ThreadAsync &a = f.async[t];
      a.groups.push_back(std::move(a.uncommitted));
      a.uncommitted.clear();
      f.reg(I.out[0])[t].i = 0;
    }
    f.anyAsync = true;
    return success();
  }
  if (I.opc == Opc::AsyncWait) {
    for (int32_t t : act) {
      ThreadAsync &a = f.async[t];
      while (static_cast<int64_t>(a.groups.size()) > I.imm) {
        for (PendingCopy &copy : a.groups.front())
          if (failed(completeCopy(f, copy, t)))
            return failure();
        a.groups.pop_front();
      }
    }
    return success();
  }
  // nvgpu.device_async_copy: dst, dst indices, src, src indices,
  // [srcElements].
  const unsigned rd = static_cast<unsigned>(I.imm);
  const MemRefVal &dst = f.mems[I.in[0]];
  const MemRefVal &src = f.mems[I.in[1 + rd]];
  const unsigned rs = static_cast<unsigned>(src.sizes.size());
  const size_t esize = getEKindSize(I.ek);
  const int64_t n = I.n;
  const int64_t bytes = n * static_cast<int64_t>(esize);
  if (bytes != 4 && bytes != 8 && bytes != 16)
    return I.op->emitOpError()
           << "copies " << bytes << " bytes; cp.async copies 4, 8 or 16";
  SmallVector<int64_t, 4> di(rd), si(rs);
  const int64_t esz = static_cast<int64_t>(esize);
  for (int32_t t : act) {
    for (unsigned k = 0; k < rd; ++k)
      di[k] = f.reg(I.in[1 + k])[t].i;
    for (unsigned k = 0; k < rs; ++k)
      si[k] = f.reg(I.in[2 + rd + k])[t].i;
    int64_t srcElems = I.flag ? f.reg(I.in[2 + rd + rs])[t].i : n;
    if (srcElems < 0 || srcElems > n)
      return I.op->emitOpError()
             << "has srcElements = " << srcElems << " in "
             << describeThread(f, t) << "; it must be in [0, " << n << "]";
    PendingCopy copy;
    copy.op = I.op;
    copy.dst = dst.buf;
    copy.ek = I.ek;
    copy.dstIdx.assign(di.begin(), di.end());
    // Read the source now (it is global memory the kernel only reads); the
    // elements past srcElements are not read.
    int64_t slin = 0;
    if (srcElems > 0) {
      if (!getRun(src, si, srcElems, esz, slin))
        return I.op->emitOpError()
               << "out-of-bounds read of " << src.buf->name << " ("
               << src.buf->type << ") at index " << formatIndex(si)
               << " (sizes " << formatIndex(src.sizes) << ", " << srcElems
               << " elements) in " << describeThread(f, t);
      if ((slin * esz) % bytes != 0)
        return I.op->emitOpError()
               << "reads " << src.buf->name << formatIndex(si)
               << " at byte offset " << slin * esz << ", not aligned to the "
               << bytes << "-byte copy, in " << describeThread(f, t);
    }
    const int64_t sstep = src.strides[rs - 1];
    for (int64_t e = 0; e < n; ++e) {
      Slot v;
      v.i = 0;
      if (e < srcElems) {
        int64_t lin = slin + e * sstep;
        int64_t byte = lin * esz;
        if (!src.buf->shadow.empty()) {
          auto where = [&]() {
            SmallVector<int64_t, 4> idx(si);
            idx[rs - 1] += e;
            return describeElement(*src.buf, I.ek, idx, lin, byte);
          };
          if (failed(touch(f, I, *src.buf, byte, esize, t, false, where)))
            return failure();
        }
        if (isFloatEKind(I.ek))
          v.f = loadElem(src.buf->data + byte, I.ek);
        else
          v.i = loadInt(src.buf->data + byte, I.ek);
      } else if (isFloatEKind(I.ek)) {
        v.f = 0.0;
      }
      copy.vals.push_back(v);
    }
    // Claim the destination (contiguous: the verifier requires a unit
    // innermost stride).
    int64_t dlin;
    if (!getRun(dst, di, n, esz, dlin))
      return I.op->emitOpError()
             << "out-of-bounds write of " << dst.buf->name << " ("
             << dst.buf->type << ") at index " << formatIndex(di) << " (sizes "
             << formatIndex(dst.sizes) << ", " << n << " elements) in "
             << describeThread(f, t);
    int64_t dbyte = dlin * esz;
    if (dbyte % bytes != 0)
      return I.op->emitOpError()
             << "writes " << dst.buf->name << formatIndex(di)
             << " at byte offset " << dbyte << ", not aligned to the " << bytes
             << "-byte copy, in " << describeThread(f, t);
    if (dst.strides[rd - 1] != 1)
      return I.op->emitOpError()
             << "writes a destination whose innermost stride is "
             << dst.strides[rd - 1] << "; cp.async needs contiguous elements";
    copy.byte = dbyte;
    auto where = [&]() {
      return describeElement(*dst.buf, I.ek, di, dlin, dbyte) +
             formatv(" (a copy of {0} elements)", n).str();
    };
    if (failed(touch(f, I, *dst.buf, dbyte, bytes, t, true, where)))
      return failure();
    for (int64_t g = dbyte >> dst.buf->gshift,
                 g1 = (dbyte + bytes - 1) >> dst.buf->gshift;
         g <= g1; ++g) {
      dst.buf->shadow[g].pendOp = I.op;
      dst.buf->shadow[g].pendThread = t;
    }
    f.async[t].uncommitted.push_back(std::move(copy));
    f.reg(I.out[0])[t].i = 0;
  }
  f.anyAsync = true;
  return success();
}

LogicalResult InterpreterImpl::completeCopy(Frame &f, PendingCopy &copy,
                                            int32_t t) {
  Buffer &buf = *copy.dst;
  const int64_t esize = static_cast<int64_t>(getEKindSize(copy.ek));
  const int64_t bytes = esize * static_cast<int64_t>(copy.vals.size());
  for (int64_t g = copy.byte >> buf.gshift,
               g1 = (copy.byte + bytes - 1) >> buf.gshift;
       g <= g1; ++g)
    buf.shadow[g].pendOp = nullptr;
  completionInstr.op = copy.op;
  auto where = [&]() {
    return formatv("{0}{1} (completing a copy of {2} elements)", buf.name,
                   formatIndex(copy.dstIdx), copy.vals.size())
        .str();
  };
  if (failed(touch(f, completionInstr, buf, copy.byte, bytes, t, true, where)))
    return failure();
  for (size_t e = 0; e < copy.vals.size(); ++e)
    storeElem(buf.data + copy.byte + static_cast<int64_t>(e) * esize, copy.ek,
              copy.vals[e]);
  return success();
}

void InterpreterImpl::dropPendingCopies(Frame &f) {
  if (!f.anyAsync)
    return;
  auto drop = [&](PendingCopy &copy) {
    Buffer &buf = *copy.dst;
    int64_t esize = static_cast<int64_t>(getEKindSize(copy.ek));
    int64_t end = copy.byte + esize * static_cast<int64_t>(copy.vals.size());
    for (int64_t g = copy.byte >> buf.gshift; g <= (end - 1) >> buf.gshift; ++g)
      buf.shadow[g].pendOp = nullptr;
  };
  for (ThreadAsync &a : f.async) {
    for (PendingCopy &c : a.uncommitted)
      drop(c);
    for (auto &group : a.groups)
      for (PendingCopy &c : group)
        drop(c);
    a.uncommitted.clear();
    a.groups.clear();
  }
  f.anyAsync = false;
}

//===----------------------------------------------------------------------===//
// Hopper warpgroup MMA (nvvm.wgmma.*)
//===----------------------------------------------------------------------===//

LogicalResult InterpreterImpl::checkWarpgroups(Frame &f, const Instr &I,
                                               ArrayRef<int32_t> act) {
  std::fill(f.mark.begin(), f.mark.end(), 0);
  for (int32_t t : act)
    f.mark[t] = 1;
  for (int32_t t : act) {
    if (t % 128 != 0 && f.mark[t - 1])
      continue;
    int32_t base = t - t % 128;
    for (int32_t u = base; u < base + 128; ++u)
      if (u >= static_cast<int32_t>(f.numThreads) || !f.mark[u])
        return I.op->emitOpError()
               << "executed by " << describeThread(f, t) << " while thread "
               << u << " (warp " << u / 32 << ") of its warpgroup (threads "
               << base << ".." << base + 127 << ", warps " << base / 32 << ".."
               << base / 32 + 3 << ") is "
               << (u >= static_cast<int32_t>(f.numThreads) ? "missing"
                                                           : "inactive")
               << "; wgmma instructions are executed by the 128 threads of a "
                  "warpgroup (4 consecutive warps, the first a multiple of 4) "
                  "together";
  }
  return success();
}

LogicalResult InterpreterImpl::checkWgPending(Frame &f, const Instr &I,
                                              ArrayRef<int32_t> act) {
  const size_t nt = f.numThreads;
  auto check = [&](uint32_t s) -> LogicalResult {
    if (!f.wgPendSlot[s])
      return success();
    for (int32_t t : act) {
      uint32_t g = f.wgPend[s * nt + t];
      if (g <= f.wgRetired[t])
        continue;
      Operation *mma = f.wgPendOp[s];
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "reads a result of the 'nvvm.wgmma.mma_async' at " << mma->getLoc()
          << " in " << describeThread(f, t)
          << " before a nvvm.wgmma.wait.group.sync.aligned retired its group ("
          << (g > f.wgCommitted[t] ? "the mma_async is not even committed by "
                                     "a nvvm.wgmma.commit.group.sync.aligned"
                                   : "its group is still pending")
          << ")";
      d.attachNote(mma->getLoc()) << "the wgmma.mma_async";
      return failure();
    }
    return success();
  };
  for (uint32_t s : I.in)
    if (failed(check(s)))
      return failure();
  for (uint32_t s : I.src)
    if (failed(check(s)))
      return failure();
  return success();
}

LogicalResult InterpreterImpl::execWgSync(Frame &f, const Instr &I,
                                          ArrayRef<int32_t> act) {
  if (failed(checkWarpgroups(f, I, act)))
    return failure();
  if (!f.fn->hasWgmma)
    return success();
  for (int32_t t : act) {
    switch (I.opc) {
    case Opc::WgFence:
      f.wgFenced[t] = 1;
      break;
    case Opc::WgCommit:
      ++f.wgCommitted[t];
      break;
    default: {
      int64_t keep = std::min<int64_t>(I.imm, f.wgCommitted[t]);
      f.wgRetired[t] = std::max<uint32_t>(
          f.wgRetired[t], f.wgCommitted[t] - static_cast<uint32_t>(keep));
      f.wgFenced[t] = 0;
      break;
    }
    }
  }
  return success();
}

LogicalResult InterpreterImpl::execNamedBarrier(Frame &f, const Instr &I,
                                                ArrayRef<int32_t> act) {
  unsigned next = 0;
  int64_t id = 0, count = -1;
  if (I.imm & 1) {
    FailureOr<int64_t> v = getUniform(f, I, I.in[next++], act, "barrier id");
    if (failed(v))
      return failure();
    id = *v;
  }
  if (I.imm & 2) {
    FailureOr<int64_t> v =
        getUniform(f, I, I.in[next++], act, "number of threads");
    if (failed(v))
      return failure();
    count = *v;
  }
  if (id < 0 || id > 15)
    return I.op->emitOpError()
           << "uses barrier " << id << "; barriers are numbered 0 to 15";
  if (count < 0) {
    if (act.size() != f.numThreads)
      return I.op->emitOpError()
             << "reached by " << act.size() << " of the " << f.numThreads
             << " threads of block (" << f.blockId[0] << ", " << f.blockId[1]
             << ", " << f.blockId[2]
             << ") without a thread count (a barrier in divergent code)";
  } else {
    if (count % 32 != 0 || count == 0 ||
        static_cast<size_t>(count) != act.size())
      return I.op->emitOpError()
             << "barrier " << id << " expects " << count
             << " threads but is reached by " << act.size()
             << " together (the count must be a multiple of 32 and equal "
                "the threads that execute the barrier)";
    if (failed(checkFullWarps(f, I, act, "nvvm.barrier (bar.sync)")))
      return failure();
  }
  // The race checks treat a barrier among some threads like a barrier of
  // the block (a new interval for every thread).
  ++stats.barriers;
  ++epoch;
  for (int32_t t : act)
    f.fenceBeforeBarrier[t] = f.lastFence[t];
  return success();
}

LogicalResult
InterpreterImpl::asyncRead(Frame &f, const Instr &I, Buffer &buf, int64_t byte,
                           unsigned size, int32_t wg,
                           llvm::function_ref<std::string()> where) {
  int64_t g0 = byte >> buf.gshift, g1 = (byte + size - 1) >> buf.gshift;
  for (int64_t g = g0; g <= g1; ++g) {
    Shadow &s = buf.shadow[g];
    s.asyncReadOp = I.op;
    s.asyncReadWg = wg * 128;
    s.asyncReadGroup = f.wgCommitted[wg * 128] + 1;
    if (s.pendOp) {
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "reads " << where() << " (warpgroup " << wg << ") while the '"
          << s.pendOp->getName() << "' of thread " << s.pendThread
          << " to it is still pending: no "
          << "nvgpu.device_async_wait of that thread has completed the copy's "
             "group";
      d.attachNote(s.pendOp->getLoc()) << "the pending copy";
      return failure();
    }
    if (s.wEpoch < f.blockStartEpoch || s.wThread < 0) {
      if (opts.checkUninitializedShared) {
        ++stats.uninitializedReads;
        report(
            kUninit, I.op, nullptr,
            [&] {
              return formatv("reads {0} (warpgroup {1}) before any thread of "
                             "the block wrote it (uninitialized workgroup "
                             "memory)",
                             where(), wg)
                  .str();
            },
            [] { return std::string(); });
      }
      continue;
    }
    // A generic-proxy write (st.shared, a completed cp.async) becomes
    // visible to the async proxy through fence.proxy.async in the writing
    // thread, and to the warpgroup through a barrier after that fence.
    if (f.fenceBeforeBarrier[s.wThread] <= s.wTime) {
      bool fenced = f.lastFence[s.wThread] > s.wTime;
      InFlightDiagnostic d =
          I.op->emitOpError()
          << "reads " << where() << " (warpgroup " << wg
          << ") through the async proxy, but " << describeThread(f, s.wThread)
          << " wrote it through the generic proxy and "
          << (fenced ? "no barrier followed its nvvm.fence.proxy"
                     : "ran no nvvm.fence.proxy (kind = "
                       "#nvvm.proxy_kind<async.shared>, space = "
                       "#nvvm.shared_space<cta>) after the write")
          << "; the writing thread needs fence.proxy.async.shared::cta and "
             "then a barrier before the wgmma";
      d.attachNote(s.wOp->getLoc()) << "the write";
      return failure();
    }
    if (opts.checkRaces && s.wEpoch == epoch) {
      ++stats.races;
      report(
          kRAW, I.op, s.wOp,
          [&] {
            return formatv("race: the wgmma of warpgroup {0} reads {1}, which "
                           "thread {2} wrote in the same barrier interval",
                           wg, where(), s.wThread)
                .str();
          },
          [&] { return formatv("the write by thread {0}", s.wThread).str(); });
    }
  }
  return success();
}

namespace {
/// A decoded wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format").
struct WgmmaDesc {
  int64_t start = 0, lbo = 0, sbo = 0;
  unsigned baseOffset = 0;
  /// The swizzle width in bytes: 128, 64, 32, or 0 (no swizzle).
  int64_t swizzle = 0;

  explicit WgmmaDesc(uint64_t d) {
    start = static_cast<int64_t>(d & 0x3FFF) << 4;
    lbo = static_cast<int64_t>((d >> 16) & 0x3FFF) << 4;
    sbo = static_cast<int64_t>((d >> 32) & 0x3FFF) << 4;
    baseOffset = static_cast<unsigned>((d >> 49) & 7);
    static constexpr int64_t widths[4] = {0, 128, 64, 32};
    swizzle = widths[(d >> 62) & 3];
  }

  /// The unswizzled shared address of the 16-bit element (mn, k) of a
  /// canonical layout (CUTLASS cute's GMMA layouts, PTX ISA "Canonical
  /// Layouts", T = 8 elements of 16 bytes):
  ///   K-major, W-byte swizzle: ((8,m),(T,2k)):((W/16 T,SBO),(1,T)), i.e.
  ///     start + (mn / 8) SBO + (mn % 8) W + 2 k;
  ///   K-major, no swizzle: ((8,m),(T,2k)):((1T,SBO),(1,LBO)), i.e.
  ///     start + (mn / 8) SBO + (mn % 8) 16 + (k / 8) LBO + 2 (k % 8);
  ///   MN-major, W-byte swizzle: ((T,W/16,m),(8,k)):((1,T,LBO),(W/16 T,SBO)),
  ///     i.e. start + (mn / (W/2)) LBO + 2 (mn % (W/2)) + (k % 8) W
  ///     + (k / 8) SBO;
  ///   MN-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)), i.e.
  ///     start + (mn / 8) SBO + 2 (mn % 8) + (k % 8) 16 + (k / 8) LBO.
  int64_t unswizzled(int64_t mn, int64_t k, bool mnMajor) const {
    if (!mnMajor) {
      if (swizzle)
        return start + (mn / 8) * sbo + (mn % 8) * swizzle + 2 * k;
      return start + (mn / 8) * sbo + (mn % 8) * 16 + (k / 8) * lbo +
             2 * (k % 8);
    }
    if (swizzle) {
      int64_t chunk = swizzle / 2;
      return start + (mn / chunk) * lbo + 2 * (mn % chunk) + (k % 8) * swizzle +
             (k / 8) * sbo;
    }
    return start + (mn / 8) * sbo + 2 * (mn % 8) + (k % 8) * 16 + (k / 8) * lbo;
  }

  /// The physical address: the W-byte swizzle XORs the 16-byte chunk index
  /// (bits 4..) with the 128-byte row index (bits 7..) of the absolute
  /// address (cute Swizzle<3,4,3>, <2,4,3>, <1,4,3>).
  int64_t swizzled(int64_t a) const {
    if (!swizzle)
      return a;
    int64_t mask = swizzle / 16 - 1;
    return a ^ (((a >> 7) & mask) << 4);
  }
};
} // namespace

LogicalResult InterpreterImpl::execWgmma(Frame &f, const Instr &I,
                                         ArrayRef<int32_t> act) {
  if (failed(checkWarpgroups(f, I, act)))
    return failure();
  const int64_t N = I.imm;
  const bool bMN = I.w == 1;
  const bool isHalf = I.ek == EKind::F16;
  const double signA = (I.w2 & 1) ? -1.0 : 1.0, signB = (I.w2 & 2) ? -1.0 : 1.0;
  const double *halfTable = getHalfTable();
  const uint32_t cSlot = I.in[0], aSlot = I.in[1], bSlot = I.in[2];
  const size_t nt = f.numThreads;
  // The block's shared allocations, which the descriptors address.
  SmallVector<Buffer *, 8> shared;
  for (auto &b : f.sharedBufs)
    shared.push_back(b.get());
  for (auto &b : f.attribBufs)
    shared.push_back(b.get());
  shared.push_back(f.dynShared.get());
  auto describeWindow = [&]() {
    std::string s;
    llvm::raw_string_ostream os(s);
    llvm::interleaveComma(shared, os, [&](Buffer *b) {
      os << b->name
         << formatv(" at [{0:x}, {1:x})", b->sharedBase,
                    b->sharedBase + b->getNumBytes());
    });
    return s;
  };
  std::vector<double> A(64 * 16), B(16 * N), C;
  if (I.flag)
    C.assign(64 * N, 0.0);

  for (int32_t base : act) {
    if (base % 128 != 0)
      continue;
    const int32_t wg = base / 128;
    for (int32_t t = base; t < base + 128; ++t)
      if (!f.wgFenced[t])
        return I.op->emitOpError()
               << "issued by " << describeThread(f, t)
               << " without a nvvm.wgmma.fence.aligned since its last "
                  "nvvm.wgmma.wait.group.sync.aligned (or the start of the "
                  "block)";
    // The descriptors are the same in the 128 threads.
    uint64_t desc[2];
    for (int m = 0; m < 2; ++m) {
      const Slot *D = f.reg(m == 0 ? aSlot : bSlot);
      desc[m] = static_cast<uint64_t>(D[base].i);
      for (int32_t t = base; t < base + 128; ++t)
        if (static_cast<uint64_t>(D[t].i) != desc[m])
          return I.op->emitOpError()
                 << "has descriptor " << (m == 0 ? "A" : "B")
                 << formatv(" {0:x} in thread {1} but {2:x} in thread {3}",
                            desc[m], base, static_cast<uint64_t>(D[t].i), t)
                 << " of warpgroup " << wg
                 << "; a wgmma descriptor must be the same in the 128 threads";
    }
    // Reads the 16-bit element (mn, k) of operand m through its descriptor.
    Buffer *last = nullptr;
    auto read = [&](int m, const WgmmaDesc &d, int64_t mn, int64_t k,
                    bool mnMajor, double &out) -> LogicalResult {
      int64_t un = d.unswizzled(mn, k, mnMajor);
      int64_t addr = d.swizzled(un);
      Buffer *buf = last;
      if (!buf || addr < buf->sharedBase ||
          addr + 2 > buf->sharedBase + buf->getNumBytes()) {
        buf = nullptr;
        for (Buffer *b : shared)
          if (addr >= b->sharedBase &&
              addr + 2 <= b->sharedBase + b->getNumBytes())
            buf = b;
      }
      const char *what = m == 0 ? "A" : "B";
      if (!buf)
        return I.op->emitOpError()
               << "reads element " << (m == 0 || !bMN ? "(row " : "(k ")
               << (m == 0 || !bMN ? mn : k)
               << (m == 0 || !bMN ? ", k " : ", n ")
               << (m == 0 || !bMN ? k : mn) << ") of " << what
               << formatv(" at shared address {0:x} (unswizzled {1:x}, "
                          "descriptor {2:x}: start {3:x}, LBO {4}, SBO "
                          "{5}, swizzle {6}B)",
                          addr, un, desc[m], d.start, d.lbo, d.sbo, d.swizzle)
               << " in warpgroup " << wg
               << ", outside every shared allocation of the block ("
               << describeWindow() << ")";
      last = buf;
      int64_t byte = addr - buf->sharedBase;
      auto where = [&]() {
        return formatv("element ({0}, {1}) of {2} at shared address {3:x}, "
                       "byte {4} of {5}",
                       (m == 0 || !bMN) ? mn : k, (m == 0 || !bMN) ? k : mn,
                       what, addr, byte, buf->name)
            .str();
      };
      if (!buf->shadow.empty() &&
          failed(asyncRead(f, I, *buf, byte, 2, wg, where)))
        return failure();
      uint16_t bits;
      std::memcpy(&bits, buf->data + byte, 2);
      if (isHalf) {
        out = halfTable[bits];
      } else {
        uint32_t w = static_cast<uint32_t>(bits) << 16;
        float v;
        std::memcpy(&v, &w, 4);
        out = v;
      }
      return success();
    };
    WgmmaDesc da(desc[0]), db(desc[1]);
    for (int m = 0; m < 2; ++m) {
      const WgmmaDesc &d = m == 0 ? da : db;
      if (d.baseOffset != 0)
        return I.op->emitOpError()
               << "has descriptor " << (m == 0 ? "A" : "B")
               << formatv(" {0:x} with base offset {1}", desc[m], d.baseOffset)
               << "; the fa interpreter supports base offset 0 only (matrix "
                  "atoms that start at the swizzle pattern's boundary)";
    }
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t k = 0; k < 16; ++k)
        if (failed(read(0, da, r, k, false, A[r * 16 + k])))
          return failure();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < 16; ++k)
        if (failed(read(1, db, n, k, bMN, B[k * N + n])))
          return failure();
    // The accumulator fragment: thread t = 32 w + l holds, for i < N / 8,
    // D[16 w + l / 4 + 8 (j / 2)][8 i + 2 (l % 4) + j % 2] in element
    // 4 i + j.
    auto rowCol = [&](int32_t t, int64_t e, int64_t &row, int64_t &col) {
      int64_t w = t / 32, l = t % 32, i = e / 4, j = e % 4;
      row = 16 * w + l / 4 + 8 * (j / 2);
      col = 8 * i + 2 * (l % 4) + j % 2;
    };
    if (I.flag) {
      for (int32_t t = 0; t < 128; ++t)
        for (int64_t e = 0; e < N / 2; ++e) {
          int64_t row, col;
          rowCol(t, e, row, col);
          C[row * N + col] = f.reg(cSlot + e)[base + t].f;
        }
    }
    // Products exact; the 16 of a k16 step and the accumulator summed in
    // double and rounded once to f32.
    for (int32_t t = 0; t < 128; ++t) {
      uint32_t group = f.wgCommitted[base + t] + 1;
      for (int64_t e = 0; e < N / 2; ++e) {
        int64_t row, col;
        rowCol(t, e, row, col);
        double acc = I.flag ? C[row * N + col] : 0.0;
        double sum = 0;
        for (int64_t k = 0; k < 16; ++k)
          sum += A[row * 16 + k] * B[k * N + col];
        acc += signA * signB * sum;
        uint32_t s = I.out[0] + static_cast<uint32_t>(e);
        f.reg(s)[base + t].f = static_cast<double>(static_cast<float>(acc));
        f.wgPend[s * nt + base + t] = group;
      }
    }
  }
  for (int64_t e = 0; e < N / 2; ++e) {
    uint32_t s = I.out[0] + static_cast<uint32_t>(e);
    f.wgPendSlot[s] = 1;
    f.wgPendOp[s] = I.op;
  }
  f.wgIssued = true;
  return success();
}

//===----------------------------------------------------------------------===//
// Interpreter
//===----------------------------------------------------------------------===//

HostMemRef HostMemRef::getDense(std::string name, void *data,
                                ArrayRef<int64_t> sizes) {
  HostMemRef m;
  m.name = std::move(name);
  m.data = data;
  m.sizes.assign(sizes.begin(), sizes.end());
  m.strides.resize(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    m.strides[d] = stride;
    stride *= sizes[d];
  }
  m.numElements = stride;
  return m;
}

Interpreter::Interpreter(ModuleOp module, InterpreterOptions options)
    : impl(std::make_unique<InterpreterImpl>(module, options)) {}

Interpreter::~Interpreter() = default;

const InterpreterStats &Interpreter::getStats() const { return impl->stats; }

LogicalResult Interpreter::verifySupported(StringRef name) {
  auto host = impl->module.lookupSymbol<func::FuncOp>(name);
  if (!host)
    return emitError(impl->module.getLoc())
           << "no func.func named '" << name << "' in the module";
  return impl->compileReachable(host);
}

LogicalResult Interpreter::runHostFunction(StringRef name,
                                           ArrayRef<HostMemRef> args) {
  auto host = impl->module.lookupSymbol<func::FuncOp>(name);
  if (!host)
    return emitError(impl->module.getLoc())
           << "no func.func named '" << name << "' in the module";
  return impl->runHost(host, args);
}

LogicalResult Interpreter::runKernel(Operation *kernel,
                                     std::array<int64_t, 3> grid,
                                     std::array<int64_t, 3> block,
                                     ArrayRef<HostMemRef> args,
                                     int64_t dynamicSharedBytes) {
  FailureOr<const CFunction *> fn = impl->getCompiled(kernel);
  if (failed(fn))
    return failure();
  if (!(*fn)->isKernel)
    return kernel->emitOpError() << "is not a gpu.func kernel";
  FailureOr<std::vector<MemRefVal>> vals =
      impl->bindHostArgs(kernel, (*fn)->argTypes, args);
  if (failed(vals))
    return failure();
  if (failed(impl->launch(kernel, **fn, grid, block, *vals, {},
                          dynamicSharedBytes)))
    return failure();
  return impl->finish(kernel->getLoc());
}
