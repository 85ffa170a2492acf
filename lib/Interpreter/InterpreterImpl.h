//===- InterpreterImpl.h - Internals of the SIMT interpreter ----*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The structures the files of the interpreter share (private to
// lib/Interpreter). The interpreter first compiles each function it runs (the
// host function and every kernel it launches) into a tree of `Instr`s: one
// per op, with its operands and results numbered as register slots and its
// regions compiled recursively. Unsupported ops, types and attributes are
// rejected there, before anything runs. Execution then walks the tree for an
// active set of threads; a register slot holds one value per thread of the
// block.
//
// Each dialect has one file that holds both phases of its ops (the
// `Compiler::compile*Op` and `InterpreterImpl::exec*` functions):
//
//   Arith.cpp        arith, math, affine and the NVVM ex2/lg2 intrinsics
//   MemRef.cpp       memref loads, stores, views and descriptors
//   Vector.cpp       vector data movement and reductions, !llvm.struct
//                    values
//   ControlFlow.cpp  scf.for, scf.if, cf.br, cf.cond_br, gpu.launch_func and
//                    the execution loop
//   GPU.cpp          thread and block ids, barriers, shuffles
//   NVGPU.cpp        ldmatrix, mma.sync, cp.async
//   NVVM.cpp         wgmma (descriptors, swizzles, fences), fence.proxy,
//                    named barriers
//
// Compiler.cpp compiles functions, blocks and regions and dispatches each op
// to its dialect; AccessChecks.cpp holds the race, uninitialized-read,
// pending-copy and async-proxy checks of memory accesses; Interpreter.cpp the
// public API, host arguments and kernel launches.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_INTERPRETER_INTERPRETERIMPL_H
#define FA_LIB_INTERPRETER_INTERPRETERIMPL_H

#include "fa/Interpreter/FloatBits.h"
#include "fa/Interpreter/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

namespace mlir {
namespace fa {
namespace interp {

//===----------------------------------------------------------------------===//
// Values and types
//===----------------------------------------------------------------------===//

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

/// The size in bytes of an element of kind `k`.
inline size_t getEKindSize(EKind k) {
  static constexpr uint8_t sizes[] = {2, 2, 4, 8, 1, 1, 2, 4, 8};
  return sizes[static_cast<unsigned>(k)];
}

inline bool isFloatEKind(EKind k) { return k <= EKind::F64; }

/// The float type of `t`, if it is f16, bf16, f32 or f64.
std::optional<FKind> getFKind(Type t);

/// The width of an integer or index type (index is 64 bits), or 0.
unsigned getIntWidth(Type t);

/// The element kind of a scalar type, if it is a float or integer type the
/// interpreter supports.
std::optional<EKind> getEKind(Type t);

/// Whether `space` is workgroup memory: #gpu.address_space<workgroup> or
/// the NVVM shared address space 3.
bool isWorkgroupSpace(Attribute space);

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

inline const double *getHalfTable() {
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (uint32_t b = 0; b < 65536; ++b)
      t[b] = halfBitsToDouble(static_cast<uint16_t>(b));
    return t;
  }();
  return table.data();
}

/// The shape of a vector type (empty for scalars and other types).
/// The shape of a vector type (empty for scalars and other types).
SmallVector<int64_t, 4> getVectorShape(Type t);

/// The number of register slots a value of type `t` takes: one per vector
/// element, one per field of an !llvm.struct, one for everything else.
uint32_t getNumSlots(Type t);

/// Whether `t` is a non-empty !llvm.struct of scalars (integers, index, f16,
/// bf16, f32, f64): the wgmma accumulator, one register slot per field.
bool isFlatStruct(Type t);

/// The scalar type of `t`: its element type for vectors, `t` otherwise.
Type getScalarType(Type t);

/// Row-major strides of `shape`.
inline SmallVector<int64_t, 4> getRowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The multi-index of linear element `e` of `shape`.
/// The multi-index of linear element `e` of `shape`.
inline SmallVector<int64_t, 4> delinearize(int64_t e, ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = e % shape[d];
    e /= shape[d];
  }
  return idx;
}

inline unsigned log2Size(size_t s) {
  unsigned l = 0;
  while ((size_t(1) << l) < s)
    ++l;
  return l;
}

/// Reads a `T` from (possibly unaligned) `p`.
template <typename T> inline T loadAs(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Writes `v` to (possibly unaligned) `p`.
template <typename T> inline void storeAs(char *p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

/// The value of the bf16 with the bits `b` (through the f32 of its upper
/// half).
inline double bfloat16ToDouble(uint16_t b) {
  return llvm::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

/// The value of the 16-bit float (f16 or bf16) with the bits `b`.
inline double float16ToDouble(uint16_t b, bool isHalf) {
  return isHalf ? getHalfTable()[b] : bfloat16ToDouble(b);
}

/// The float value of the element of kind `k` at `p`.
inline double loadElem(const char *p, EKind k) {
  switch (k) {
  case EKind::F16:
    return getHalfTable()[loadAs<uint16_t>(p)];
  case EKind::BF16:
    return bfloat16ToDouble(loadAs<uint16_t>(p));
  case EKind::F32:
    return loadAs<float>(p);
  case EKind::F64:
    return loadAs<double>(p);
  default:
    return 0;
  }
}

/// The integer value (sign-extended) of the element of kind `k` at `p`.
inline int64_t loadInt(const char *p, EKind k) {
  switch (k) {
  case EKind::I1:
    return *p ? -1 : 0;
  case EKind::I8:
    return static_cast<int8_t>(*p);
  case EKind::I16:
    return loadAs<int16_t>(p);
  case EKind::I32:
    return loadAs<int32_t>(p);
  case EKind::I64:
    return loadAs<int64_t>(p);
  default:
    return 0;
  }
}

/// Stores `v` as an element of kind `k` at `p`.
inline void storeElem(char *p, EKind k, Slot v) {
  switch (k) {
  case EKind::F16:
    return storeAs(p, doubleToHalfBits(v.f));
  case EKind::BF16:
    return storeAs(p, doubleToBFloat16Bits(v.f));
  case EKind::F32:
    return storeAs(p, static_cast<float>(v.f));
  case EKind::F64:
    return storeAs(p, v.f);
  case EKind::I1:
    *p = v.i ? 1 : 0;
    return;
  case EKind::I8:
    *p = static_cast<char>(v.i);
    return;
  case EKind::I16:
    return storeAs(p, static_cast<int16_t>(v.i));
  case EKind::I32:
    return storeAs(p, static_cast<int32_t>(v.i));
  case EKind::I64:
    return storeAs(p, v.i);
  }
}

/// The IEEE 754-2019 maximum and minimum (NaN if either operand is; -0 <
/// +0) and maximumNumber and minimumNumber (the other operand if one is
/// NaN), as arith.maximumf, arith.minimumf, arith.maxnumf, arith.minnumf.
inline double maximumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

inline double minimumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == 0 && b == 0)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

inline double maxNumF(double a, double b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return maximumF(a, b);
}

inline double minNumF(double a, double b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return minimumF(a, b);
}

//===----------------------------------------------------------------------===//
// Compiled form
//===----------------------------------------------------------------------===//

/// The operations of compiled ops. The arith and math ones come first, from
/// ConstI to Lg2Approx (InterpreterImpl::execArith runs them).
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

/// Whether `opc` is run by InterpreterImpl::execArith.
inline bool isArithOpc(Opc opc) { return opc <= Opc::Lg2Approx; }

/// Reports an op whose opcode the exec function it reached does not handle.
inline LogicalResult reportUnimplemented(const Instr &I) {
  return I.op->emitOpError() << "has no interpreter implementation";
}

//===----------------------------------------------------------------------===//
// Compiler
//===----------------------------------------------------------------------===//

/// Compiles one function into a CFunction (Compiler.cpp; the ops of each
/// dialect in the dialect's file).
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
  LogicalResult checkCarriedType(Operation *op, Type t);
  /// Reports that `op` is not supported (for the reason `why`, if any).
  LogicalResult unsupported(Operation *op, const Twine &why);
  /// Checks the scalar types of all operands and results of `op`.
  LogicalResult checkScalars(Operation *op);
  /// Elementwise ops of an integer, a float result, and conversions.
  LogicalResult compileIntOp(Operation *op, Instr &I, Opc opc);
  LogicalResult compileFloatOp(Operation *op, Instr &I, Opc opc);
  LogicalResult compileCastOp(Operation *op, Instr &I, Opc opc);

  /// The ops of each dialect (arith and math with the NVVM math intrinsics,
  /// LLVM: the !llvm.struct values).
  LogicalResult compileArithOp(Operation *op, Instr &I);
  LogicalResult compileAffineOp(Operation *op, Instr &I);
  LogicalResult compileGPUOp(Operation *op, Instr &I);
  LogicalResult compileMemRefOp(Operation *op, Instr &I);
  LogicalResult compileMemRefViewOp(Operation *op, Instr &I);
  LogicalResult compileVectorOp(Operation *op, Instr &I);
  LogicalResult compileSCFOp(Operation *op, Instr &I);
  LogicalResult compileNVGPUOp(Operation *op, Instr &I);
  LogicalResult compileNVVMOp(Operation *op, Instr &I);
  LogicalResult compileLLVMOp(Operation *op, Instr &I);

  CFunction &fn;
  DenseMap<Value, uint32_t> slots;
  DenseMap<Operation *, unsigned> globalIndex;
  /// The blocks of a function body of several blocks.
  DenseMap<Block *, int64_t> blockIndex;
};

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

/// The address the hardware would see for `byte` of `buf`: the shared
/// window's address for workgroup buffers, the host address of the data for
/// global ones (the caller's allocation; a view at an offset may not be
/// aligned like an allocation is).
inline uint64_t getAbsoluteAddress(const Buffer &buf, int64_t byte) {
  if (buf.shared)
    return static_cast<uint64_t>(buf.sharedBase + byte);
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buf.data)) +
         static_cast<uint64_t>(byte);
}

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

/// The first thread `t` of `act` whose group of `size` threads (aligned to
/// `size`: a warp, a warpgroup) is not all active, with the first thread of
/// that group that is missing (past the block) or inactive; none when every
/// group is complete. Uses Frame::mark.
std::optional<std::pair<int32_t, int32_t>>
findIncompleteGroup(Frame &f, ArrayRef<int32_t> act, int32_t size);

/// Formats a multi-index as "[i, j, ...]".
std::string formatIndex(ArrayRef<int64_t> idx);

/// Formats an address as "0x..." (hex).
std::string formatAddress(uint64_t address);

/// Describes an element access for diagnostics: the buffer and the index in
/// the view, then the element (or, in a view of another element type, the
/// byte) of the buffer.
std::string describeElement(const Buffer &buf, EKind ek, ArrayRef<int64_t> idx,
                            int64_t lin, int64_t byte);

/// The kinds of findings of the memory checks (InterpreterImpl::report).
enum ReportKind { kRAW, kWAW, kWAR, kCrossBlock, kUninit };

} // namespace interp

//===----------------------------------------------------------------------===//
// InterpreterImpl
//===----------------------------------------------------------------------===//

/// The state of an Interpreter: the compiled functions, the clocks and
/// counters of the checks, and the execution of each op (the `exec*`
/// functions, in the file of the op's dialect).
class InterpreterImpl {
public:
  using Buffer = interp::Buffer;
  using CFunction = interp::CFunction;
  using CRegion = interp::CRegion;
  using Frame = interp::Frame;
  using Instr = interp::Instr;
  using MemRefVal = interp::MemRefVal;
  using PendingCopy = interp::PendingCopy;
  using Shadow = interp::Shadow;
  using Slot = interp::Slot;

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
  /// Runs one op for the threads of `act` (dispatches on its opcode).
  LogicalResult execInstr(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  /// arith and math (the opcodes isArithOpc accepts), affine.
  LogicalResult execArith(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execAffine(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  /// Thread and block ids, gpu.barrier.
  LogicalResult execGPU(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  /// Memref descriptors: globals, casts, dims, dynamic shared memory,
  /// shared-window addresses.
  LogicalResult execMemRef(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  /// Constant vectors, data movement and reductions.
  LogicalResult execVector(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execFor(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execIf(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execLaunch(Frame &f, const Instr &I, ArrayRef<int32_t> act);
  LogicalResult execFenceProxy(Frame &f, const Instr &I, ArrayRef<int32_t> act);
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
  /// Copies the pending state of the wgmma results in slots `src` to the
  /// slots `dst` (values passed along by a yield or a branch, possibly
  /// permuted: through a copy).
  void copyPendSlots(Frame &f, ArrayRef<uint32_t> dst, ArrayRef<uint32_t> src,
                     ArrayRef<int32_t> act);
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
  /// Defined here so that the memory ops inline it: it runs for every
  /// element and thread.
  LogicalResult touch(Frame &f, const Instr &I, Buffer &buf, int64_t byte,
                      unsigned size, int32_t t, bool isWrite,
                      llvm::function_ref<std::string()> where) {
    if (buf.shadow.empty())
      return success();
    int64_t g0 = byte >> buf.gshift, g1 = (byte + size - 1) >> buf.gshift;
    bool found = false;
    for (int64_t g = g0; g <= g1; ++g) {
      Shadow &s = buf.shadow[g];
      if (s.pendOp)
        return reportPendingCopyAccess(f, I, s, t, isWrite, where);
      if (isWrite && s.asyncReadOp && f.fn->hasWgmma &&
          s.asyncReadGroup > f.wgRetired[s.asyncReadWg])
        return reportWgmmaReadWrite(f, I, s, t, where);
      found |= isWrite ? checkWrite(f, I, buf, s, t, where, found)
                       : checkRead(f, I, buf, s, t, where, found);
    }
    return success();
  }
  /// The hard errors of touch: an access of an element a cp.async has
  /// pending, a write of an element an in-flight wgmma reads.
  LogicalResult
  reportPendingCopyAccess(Frame &f, const Instr &I, const Shadow &s, int32_t t,
                          bool isWrite,
                          llvm::function_ref<std::string()> where);
  /// Checks that the access of `bytes` at `byte` of `buf` (index `idx`) is
  /// aligned to `bytes` at its absolute address (getAbsoluteAddress): a
  /// global buffer whose data starts at an address aligned only to its
  /// elements (a view at an offset) cannot be read with wider accesses.
  /// `verb` ("reads") and `what` ("copy") word the error.
  LogicalResult checkAbsoluteAlignment(Frame &f, const Instr &I,
                                       const Buffer &buf, ArrayRef<int64_t> idx,
                                       int64_t byte, int64_t bytes, int32_t t,
                                       StringRef verb, StringRef what);
  LogicalResult reportWgmmaReadWrite(Frame &f, const Instr &I, const Shadow &s,
                                     int32_t t,
                                     llvm::function_ref<std::string()> where);

  std::string describeThread(const Frame &f, int32_t t) const {
    std::string s = llvm::formatv("thread {0}", t).str();
    if (f.fn->isKernel)
      s += llvm::formatv(" (warp {0}, lane {1}) of block ({2}, {3}, {4})",
                         t / 32, t % 32, f.blockId[0], f.blockId[1],
                         f.blockId[2])
               .str();
    return s;
  }
  std::string describeBlock(int64_t linear, const Frame &f) const {
    int64_t gx = f.gridDim[0], gy = f.gridDim[1];
    return llvm::formatv("({0}, {1}, {2})", linear % gx, (linear / gx) % gy,
                         linear / (gx * gy))
        .str();
  }

  /// Records an access of one shadow granule for the checks; reports what
  /// they find (returns whether something was found).
  bool checkRead(Frame &f, const Instr &I, Buffer &buf, Shadow &s, int32_t t,
                 llvm::function_ref<std::string()> where, bool quiet);
  bool checkWrite(Frame &f, const Instr &I, Buffer &buf, Shadow &s, int32_t t,
                  llvm::function_ref<std::string()> where, bool quiet);
  /// Whether `s` records a write of global memory `buf` by another block in
  /// this launch.
  bool isCrossBlock(const Frame &f, const Buffer &buf, const Shadow &s) const;
  /// Counts and reports a race of the access of thread `t` (a read, or a
  /// write) with the last write recorded in `s`: in the same barrier
  /// interval, or by another block of the launch.
  void reportRaceWithWrite(Frame &f, const Instr &I, const Shadow &s, int32_t t,
                           llvm::function_ref<std::string()> where,
                           bool isWrite, bool crossBlock);
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

#endif // FA_LIB_INTERPRETER_INTERPRETERIMPL_H
