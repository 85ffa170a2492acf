//===- KernelBuilder.cpp - Kernel modules of the fa tools -----------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Builds the kernel function for a spec given by flags, and derives the
// metadata of kernels written in an input .mlir file.
//
// The function (memref arguments, bufferization.to_tensor, the fa op,
// bufferization.materialize_in_destination, llvm.emit_c_interface) is the
// one every tool compiles: fa-compile's artifacts, fa-run's JIT, emulator
// and CUDA runs.
//
//===----------------------------------------------------------------------===//

#include "fa/Compiler/Compiler.h"
#include "fa/Codegen/Common/KernelForm.h"
#include "fa/Dialect/FA/Utils/AttentionSemantics.h"

#include "fa/Dialect/FA/IR/FA.h"
#include "fa/Runtime/FARuntime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::compile;
namespace rt = ::fa::runtime;
using llvm::Error;
using llvm::Expected;
using llvm::formatv;
using llvm::StringRef;
using llvm::Twine;

Error mlir::fa::compile::checkHeadDim(StringRef what, int64_t value) {
  // The widest rule of any kernel family (SIMT's); narrower families are
  // chosen by eligibility.
  if (!isSupportedHeadDim(KernelFamily::Simt, value))
    return llvm::createStringError(
        formatv("{0} {1} is not supported: head dims must be "
                "positive multiples of 8 up to 256",
                what, value));
  return Error::success();
}

Expected<KernelChoice>
mlir::fa::compile::parseKernelFlag(StringRef value, bool tensorCoresGiven,
                                   bool wgmmaGiven, StringRef hint) {
  if (tensorCoresGiven)
    return llvm::createStringError(
        "--tensor-cores was replaced by --kernel mma (mma.sync "
        "is also the default, --kernel auto, for f16/bf16)");
  if (wgmmaGiven)
    return llvm::createStringError(
        "--wgmma was replaced by --kernel wgmma (wgmma is also "
        "the default, --kernel auto, on sm_90a)");
  KernelChoice choice;
  if (!parseKernelChoice(value, choice))
    return llvm::createStringError(
        "--kernel must be auto, simt, mma or wgmma, got '" + value + "'" +
        (hint.empty() ? "" : " (" + hint + ")"));
  return choice;
}

rt::Causal mlir::fa::compile::toRuntimeCausal(CausalKind kind) {
  std::optional<rt::Causal> causal =
      rt::parseCausal(stringifyCausalKind(kind).str());
  assert(causal && "the runtime names every causal alignment");
  return causal.value_or(rt::Causal::None);
}

CausalKind mlir::fa::compile::fromRuntimeCausal(rt::Causal causal) {
  std::optional<CausalKind> kind =
      symbolizeCausalKind(rt::getCausalName(causal));
  assert(kind && "the dialect names every causal alignment");
  return kind.value_or(CausalKind::none);
}

//===----------------------------------------------------------------------===//
// Building from a spec
//===----------------------------------------------------------------------===//

static Type getElementType(MLIRContext &ctx, rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F32:
    return Float32Type::get(&ctx);
  case rt::DType::F16:
    return Float16Type::get(&ctx);
  case rt::DType::BF16:
    return BFloat16Type::get(&ctx);
  case rt::DType::I32:
    return IntegerType::get(&ctx, 32);
  case rt::DType::I8:
    return IntegerType::get(&ctx, 8);
  }
  return Float32Type::get(&ctx);
}

/// The memref type of `param`: static symbols resolved, dynamic ones `?`.
static MemRefType getParamType(MLIRContext &ctx, const rt::KernelMetadata &md,
                               const rt::ParamInfo &param) {
  llvm::SmallVector<int64_t, 4> shape;
  for (const rt::ShapeDim &dim : param.shape) {
    if (!dim.isSymbol()) {
      shape.push_back(dim.size);
      continue;
    }
    shape.push_back(rt::getStaticSymbolValue(md, dim.symbol)
                        .value_or(ShapedType::kDynamic));
  }
  return MemRefType::get(shape, getElementType(ctx, param.dtype));
}

static RankedTensorType getTensorType(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  return RankedTensorType::get(type.getShape(), type.getElementType());
}

Value mlir::fa::compile::toTensor(OpBuilder &b, Location loc, Value memref,
                                  bool writable) {
  return bufferization::ToTensorOp::create(b, loc, getTensorType(memref),
                                           memref, /*restrict=*/true, writable);
}

Value mlir::fa::compile::bytesToI1(OpBuilder &b, Location loc, Value bytes) {
  auto type = cast<RankedTensorType>(bytes.getType());
  auto i1Type = RankedTensorType::get(type.getShape(), b.getI1Type());
  llvm::SmallVector<Value> dynSizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dynSizes.push_back(tensor::DimOp::create(b, loc, bytes, i));
  Value empty = tensor::EmptyOp::create(b, loc, i1Type, dynSizes);
  AffineMap identity = b.getMultiDimIdentityMap(type.getRank());
  llvm::SmallVector<utils::IteratorType> iterators(
      type.getRank(), utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{i1Type}, ValueRange{bytes}, ValueRange{empty},
      ArrayRef<AffineMap>{identity, identity}, iterators,
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        Value zero = arith::ConstantIntOp::create(nb, nloc, 0, 8);
        Value ne = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::ne,
                                         args[0], zero);
        linalg::YieldOp::create(nb, nloc, ne);
      });
  return generic.getResult(0);
}

void mlir::fa::compile::materialize(OpBuilder &b, Location loc, Value result,
                                    Value memref) {
  bufferization::MaterializeInDestinationOp::create(
      b, loc, /*result=*/Type(), result, memref, /*restrict=*/false,
      /*writable=*/true);
}

OwningOpRef<ModuleOp>
mlir::fa::compile::buildKernelModule(MLIRContext &ctx,
                                     const rt::KernelMetadata &md) {
  OpBuilder b(&ctx);
  Location loc = NameLoc::get(b.getStringAttr(md.symbol));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  llvm::SmallVector<Type> argTypes;
  for (const rt::ParamInfo &param : md.params)
    argTypes.push_back(getParamType(ctx, md, param));
  auto func = func::FuncOp::create(b, loc, md.symbol,
                                   b.getFunctionType(argTypes, {}));
  func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);

  // Tensors by role.
  llvm::DenseMap<unsigned, Value> tensors, memrefs;
  for (auto [i, param] : llvm::enumerate(md.params)) {
    Value memref = body->getArgument(i);
    bool backward = md.op == rt::OpKind::AttentionBackward;
    bool isOutput = backward ? param.role == rt::ParamRole::GradQuery ||
                                   param.role == rt::ParamRole::GradKey ||
                                   param.role == rt::ParamRole::GradValue
                             : param.role == rt::ParamRole::Output ||
                                   param.role == rt::ParamRole::Lse;
    Value t = toTensor(b, loc, memref, isOutput);
    if (param.role == rt::ParamRole::Mask && param.dtype == rt::DType::I8)
      t = bytesToI1(b, loc, t);
    tensors[static_cast<unsigned>(param.role)] = t;
    memrefs[static_cast<unsigned>(param.role)] = memref;
  }
  auto get = [&](rt::ParamRole role) {
    return tensors.lookup(static_cast<unsigned>(role));
  };
  auto getMemRef = [&](rt::ParamRole role) {
    return memrefs.lookup(static_cast<unsigned>(role));
  };

  if (md.op == rt::OpKind::Softmax) {
    Value y = get(rt::ParamRole::Output);
    auto softmax =
        SoftmaxOp::create(b, loc, y.getType(), get(rt::ParamRole::Input), y,
                          b.getI64IntegerAttr(md.dimension));
    materialize(b, loc, softmax.getResult(), getMemRef(rt::ParamRole::Output));
  } else {
    Value oInit = get(rt::ParamRole::Output);
    Value lseInit = get(rt::ParamRole::Lse);
    CausalKind causal = fromRuntimeCausal(md.causal);
    // The scale attribute is only set when it differs from the default.
    float defaultScale = 1.0f / std::sqrt(static_cast<float>(md.headDim));
    FloatAttr scale;
    if (static_cast<float>(md.scale) != defaultScale)
      scale = b.getF32FloatAttr(static_cast<float>(md.scale));
    const rt::ModifierInfo &mods = md.modifiers;
    DenseI64ArrayAttr window;
    if (mods.hasWindow())
      window = b.getDenseI64ArrayAttr({mods.windowLeft, mods.windowRight});
    FloatAttr softcap;
    if (mods.softcap)
      softcap = b.getF32FloatAttr(static_cast<float>(*mods.softcap));
    IntegerAttr chunk;
    if (mods.chunk > 0)
      chunk = b.getI64IntegerAttr(mods.chunk);
    if (md.op == rt::OpKind::AttentionBackward) {
      Value dq = get(rt::ParamRole::GradQuery),
            dk = get(rt::ParamRole::GradKey),
            dv = get(rt::ParamRole::GradValue);
      auto backward = AttentionBackwardOp::create(
          b, loc, TypeRange{dq.getType(), dk.getType(), dv.getType()},
          get(rt::ParamRole::Query), get(rt::ParamRole::Key),
          get(rt::ParamRole::Value), oInit, lseInit,
          get(rt::ParamRole::GradOutput), get(rt::ParamRole::KvLens),
          get(rt::ParamRole::Mask), get(rt::ParamRole::Alibi),
          get(rt::ParamRole::QSegments), get(rt::ParamRole::KSegments),
          /*q_offset=*/Value(), dq, dk, dv, scale,
          CausalKindAttr::get(&ctx, causal), window, softcap, chunk);
      const std::pair<Value, rt::ParamRole> results[] = {
          {backward.getGradQueryResult(), rt::ParamRole::GradQuery},
          {backward.getGradKeyResult(), rt::ParamRole::GradKey},
          {backward.getGradValueResult(), rt::ParamRole::GradValue}};
      for (auto [result, role] : results)
        materialize(b, loc, result, getMemRef(role));
      func::ReturnOp::create(b, loc);
      return module;
    }
    llvm::SmallVector<Type> resultTypes = {oInit.getType()};
    if (lseInit)
      resultTypes.push_back(lseInit.getType());
    auto attention = AttentionOp::create(
        b, loc, resultTypes, get(rt::ParamRole::Query), get(rt::ParamRole::Key),
        get(rt::ParamRole::Value), get(rt::ParamRole::KvLens),
        /*block_table=*/Value(), /*cu_seqlens_q=*/Value(),
        /*cu_seqlens_k=*/Value(), get(rt::ParamRole::Mask), get(rt::ParamRole::Alibi),
        get(rt::ParamRole::QSegments), get(rt::ParamRole::KSegments),
        /*q_offset=*/Value(), /*block_mask=*/Value(),
        /*mod_operands=*/ValueRange(), oInit, lseInit, scale,
        CausalKindAttr::get(&ctx, causal), window, softcap, chunk,
        /*block_tiles=*/nullptr);
    materialize(b, loc, attention.getResult(),
                getMemRef(rt::ParamRole::Output));
    if (lseInit)
      materialize(b, loc, attention.getLseResult(),
                  getMemRef(rt::ParamRole::Lse));
  }
  func::ReturnOp::create(b, loc);
  return module;
}

//===----------------------------------------------------------------------===//
// Extracting from an input file
//===----------------------------------------------------------------------===//

/// The block argument `value` is read from, looking through to_tensor,
/// tensor.cast and single-input elementwise conversions (linalg.generic).
static BlockArgument traceToArgument(Value value) {
  while (value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg;
    Operation *def = value.getDefiningOp();
    if (auto toTensor = dyn_cast<bufferization::ToTensorOp>(def))
      value = toTensor.getBuffer();
    else if (auto cast = dyn_cast<tensor::CastOp>(def))
      value = cast.getSource();
    else if (auto generic = dyn_cast<linalg::GenericOp>(def);
             generic && generic.getNumDpsInputs() == 1)
      value = generic.getDpsInputs()[0];
    else
      return nullptr;
  }
  return nullptr;
}

/// The memref argument `result` is materialized into, if any.
static BlockArgument findDestination(Value result) {
  for (Operation *user : result.getUsers())
    if (auto mat = dyn_cast<bufferization::MaterializeInDestinationOp>(user))
      if (auto arg = dyn_cast<BlockArgument>(mat.getDest()))
        return arg;
  return nullptr;
}

static rt::DType getDType(Type type, bool &ok) {
  ok = true;
  if (type.isF32())
    return rt::DType::F32;
  if (type.isF16())
    return rt::DType::F16;
  if (type.isBF16())
    return rt::DType::BF16;
  if (type.isSignlessInteger(32))
    return rt::DType::I32;
  if (type.isSignlessInteger(8))
    return rt::DType::I8;
  ok = false;
  return rt::DType::F32;
}

/// Derives the job of one function.
static Expected<std::optional<KernelJob>>
extractJob(func::FuncOp func, const CompileOptions &options) {
  std::string fname = ("func @" + func.getSymName()).str();
  auto err = [&](const Twine &message) {
    return llvm::createStringError(fname + ": " + message);
  };

  llvm::SmallVector<Operation *> faOps;
  func.walk([&](Operation *op) {
    if (isa<AttentionOp, AttentionBackwardOp, SoftmaxOp>(op))
      faOps.push_back(op);
  });
  if (faOps.empty())
    return std::optional<KernelJob>();
  if (faOps.size() > 1)
    return err(formatv("holds {0} fa ops; fa-compile makes one kernel per "
                       "function, so put each op in its own function",
                       faOps.size()));
  if (func.getNumResults() != 0)
    return err("must return nothing: kernels write their outputs into "
               "memref arguments (the kernel form: see "
               "examples/kernel-form.mlir)");
  StringRef name = func.getSymName();
  if (name.empty() || llvm::isDigit(name.front()) ||
      !llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return err("the function name must be a C identifier (it names the "
               "artifact and its symbol)");
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref)
      return err(formatv("argument #{0} has type {1}; kernel arguments must "
                         "be memrefs (the kernel form: see "
                         "examples/kernel-form.mlir)",
                         i, type));
    if (!memref.getLayout().isIdentity())
      return err(formatv("argument #{0} has type {1}; kernel arguments must "
                         "have the identity (row-major) layout",
                         i, type));
    if (memref.getMemorySpace())
      return err(formatv("argument #{0} has type {1}; kernel arguments must "
                         "be in the default memory space",
                         i, type));
  }

  rt::KernelMetadata md;
  md.name = name.str();
  md.symbol = name.str();
  md.generator = "fa-compile";
  md.blockQ = options.blockQ;
  md.blockKV = options.blockKV;
  llvm::DenseMap<unsigned, rt::ParamRole> roles; // argument -> role
  auto assign = [&](Value operand, rt::ParamRole role,
                    bool isResult = false) -> Error {
    BlockArgument arg = isResult ? findDestination(operand)
                                 : traceToArgument(operand);
    if (!arg || arg.getOwner() != &func.getBody().front()) {
      if (isResult)
        return err("the fa op's " + rt::getRoleName(role) +
                   " result must be written to a memref argument with "
                   "bufferization.materialize_in_destination");
      return err("the fa op's " + rt::getRoleName(role) +
                 " operand must come from a memref argument through "
                 "bufferization.to_tensor");
    }
    auto [it, inserted] = roles.try_emplace(arg.getArgNumber(), role);
    if (!inserted && it->second != role)
      return err(formatv("argument #{0} is used as both {1} and {2}",
                         arg.getArgNumber(), rt::getRoleName(it->second),
                         rt::getRoleName(role)));
    return Error::success();
  };

  Operation *op = faOps.front();
  Type elementType;
  if (auto backward = dyn_cast<AttentionBackwardOp>(op)) {
    // The forward's options, read as for fa.attention; the forward's
    // outputs and dO are inputs here, the gradients the results.
    md.op = rt::OpKind::AttentionBackward;
    elementType =
        cast<RankedTensorType>(backward.getQuery().getType()).getElementType();
    md.heads = backward.getQueryHeads();
    md.kvHeads = backward.getKvHeads();
    md.headDim = backward.getHeadDim();
    md.valueHeadDim = backward.getValueHeadDim();
    md.causal = toRuntimeCausal(backward.getCausal());
    md.scale = backward.getEffectiveScale();
    md.hasKvLens = static_cast<bool>(backward.getKvLens());
    md.hasLse = true;
    if (Value mask = backward.getMask())
      md.mask = cast<RankedTensorType>(mask.getType())
                        .getElementType()
                        .isSignlessInteger(1)
                    ? rt::MaskKind::Bool
                    : rt::MaskKind::Additive;
    if (backward.getQOffset())
      return err("the fa op has a q_offset, which kernels do not take yet "
                 "(kernel arguments are memrefs)");
    rt::ModifierInfo &mods = md.modifiers;
    if (DenseI64ArrayAttr window = backward.getWindowAttr()) {
      mods.windowLeft = window[0];
      mods.windowRight = window[1];
    }
    if (FloatAttr cap = backward.getSoftcapAttr())
      mods.softcap = cap.getValueAsDouble();
    if (IntegerAttr chunk = backward.getChunkAttr())
      mods.chunk = chunk.getInt();
    if (Value alibi = backward.getAlibi())
      mods.alibi = cast<RankedTensorType>(alibi.getType()).getRank() == 2
                       ? rt::AlibiKind::BatchHeads
                       : rt::AlibiKind::Heads;
    mods.segments = static_cast<bool>(backward.getQSegments());
    if (Error e = checkHeadDim("head dim D", md.headDim))
      return err(llvm::toString(std::move(e)));
    if (Error e = checkHeadDim("value head dim Dv", md.valueHeadDim))
      return err(llvm::toString(std::move(e)));
    const std::pair<Value, rt::ParamRole> inputs[] = {
        {backward.getQuery(), rt::ParamRole::Query},
        {backward.getKey(), rt::ParamRole::Key},
        {backward.getValue(), rt::ParamRole::Value},
        {backward.getOutput(), rt::ParamRole::Output},
        {backward.getLse(), rt::ParamRole::Lse},
        {backward.getGradOutput(), rt::ParamRole::GradOutput},
        {backward.getKvLens(), rt::ParamRole::KvLens},
        {backward.getMask(), rt::ParamRole::Mask},
        {backward.getAlibi(), rt::ParamRole::Alibi},
        {backward.getQSegments(), rt::ParamRole::QSegments},
        {backward.getKSegments(), rt::ParamRole::KSegments}};
    for (auto [value, role] : inputs)
      if (value)
        if (Error e = assign(value, role))
          return std::move(e);
    const std::pair<Value, rt::ParamRole> results[] = {
        {backward.getGradQueryResult(), rt::ParamRole::GradQuery},
        {backward.getGradKeyResult(), rt::ParamRole::GradKey},
        {backward.getGradValueResult(), rt::ParamRole::GradValue}};
    for (auto [value, role] : results)
      if (Error e = assign(value, role, /*isResult=*/true))
        return std::move(e);
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    md.op = rt::OpKind::Attention;
    auto qType = cast<RankedTensorType>(attention.getQuery().getType());
    elementType = qType.getElementType();
    // Through the op's accessors: the paged and varlen forms have other
    // ranks and dims.
    md.heads = attention.getQueryHeads();
    md.kvHeads = attention.getKvHeads();
    md.headDim = attention.getHeadDim();
    md.valueHeadDim = attention.getValueHeadDim();
    md.causal = toRuntimeCausal(attention.getCausal());
    md.scale = attention.getEffectiveScale();
    md.hasKvLens = static_cast<bool>(attention.getKvLens());
    md.hasLse = static_cast<bool>(attention.getLse());
    if (Value mask = attention.getMask())
      md.mask = cast<RankedTensorType>(mask.getType())
                        .getElementType()
                        .isSignlessInteger(1)
                    ? rt::MaskKind::Bool
                    : rt::MaskKind::Additive;
    if (attention.getQOffset())
      return err("the fa op has a q_offset, which kernels do not take yet "
                 "(kernel arguments are memrefs)");
    // The serving forms: a paged cache [P, S, Hkv, D] or token-major
    // [T, H, D] tensors (the verifier checked their shapes).
    md.pageSize = attention.getPageSize();
    md.varlen = attention.isVarlen();
    if ((md.pageSize > 0 || md.varlen) && !attention.getModOperands().empty())
      return err("a score_mod / mask_mod that reads tensors cannot be "
                 "combined with a block_table or cu_seqlens in a kernel yet "
                 "(the launcher's paged and varlen entries take no mod "
                 "operands)");
    // The regions are compiled into the kernel (the job module is this
    // function); the metadata records them and their operands.
    rt::ModifierInfo &mods = md.modifiers;
    if (DenseI64ArrayAttr window = attention.getWindowAttr()) {
      mods.windowLeft = window[0];
      mods.windowRight = window[1];
    }
    if (FloatAttr cap = attention.getSoftcapAttr())
      mods.softcap = cap.getValueAsDouble();
    if (IntegerAttr chunk = attention.getChunkAttr())
      mods.chunk = chunk.getInt();
    if (Value alibi = attention.getAlibi())
      mods.alibi = cast<RankedTensorType>(alibi.getType()).getRank() == 2
                       ? rt::AlibiKind::BatchHeads
                       : rt::AlibiKind::Heads;
    mods.segments = static_cast<bool>(attention.getQSegments());
    mods.scoreMod = attention.hasScoreMod();
    mods.maskMod = attention.hasMaskMod();
    // The block mask is a param ([B|1, Hq|1, QT, KT] for its tiles).
    if (attention.getBlockMask()) {
      DenseI64ArrayAttr tiles = attention.getBlockTilesAttr();
      mods.blockTileQ = tiles[0];
      mods.blockTileKV = tiles[1];
    }
    if (Error e = checkHeadDim("head dim D", md.headDim))
      return err(llvm::toString(std::move(e)));
    if (Error e = checkHeadDim("value head dim Dv", md.valueHeadDim))
      return err(llvm::toString(std::move(e)));

    if (Error e = assign(attention.getQuery(), rt::ParamRole::Query))
      return std::move(e);
    if (Error e = assign(attention.getKey(), rt::ParamRole::Key))
      return std::move(e);
    if (Error e = assign(attention.getValue(), rt::ParamRole::Value))
      return std::move(e);
    if (md.hasKvLens)
      if (Error e = assign(attention.getKvLens(), rt::ParamRole::KvLens))
        return std::move(e);
    if (md.mask != rt::MaskKind::None)
      if (Error e = assign(attention.getMask(), rt::ParamRole::Mask))
        return std::move(e);
    if (mods.alibi != rt::AlibiKind::None)
      if (Error e = assign(attention.getAlibi(), rt::ParamRole::Alibi))
        return std::move(e);
    if (mods.segments) {
      if (Error e = assign(attention.getQSegments(), rt::ParamRole::QSegments))
        return std::move(e);
      if (Error e = assign(attention.getKSegments(), rt::ParamRole::KSegments))
        return std::move(e);
    }
    if (Error e = assign(attention.getResult(), rt::ParamRole::Output,
                         /*isResult=*/true))
      return std::move(e);
    if (md.hasLse)
      if (Error e = assign(attention.getLseResult(), rt::ParamRole::Lse,
                           /*isResult=*/true))
        return std::move(e);
    for (Value m : attention.getModOperands())
      if (Error e = assign(m, rt::ParamRole::ModOperand))
        return std::move(e);
    if (mods.hasBlockMask())
      if (Error e = assign(attention.getBlockMask(), rt::ParamRole::BlockMask))
        return std::move(e);
    if (md.pageSize > 0)
      if (Error e =
              assign(attention.getBlockTable(), rt::ParamRole::BlockTable))
        return std::move(e);
    if (md.varlen) {
      if (Error e =
              assign(attention.getCuSeqlensQ(), rt::ParamRole::CuSeqlensQ))
        return std::move(e);
      if (Error e =
              assign(attention.getCuSeqlensK(), rt::ParamRole::CuSeqlensK))
        return std::move(e);
    }
  } else {
    auto softmax = cast<SoftmaxOp>(op);
    md.op = rt::OpKind::Softmax;
    auto xType = cast<RankedTensorType>(softmax.getInput().getType());
    elementType = xType.getElementType();
    md.rank = xType.getRank();
    md.dimension = softmax.getDimension();
    if (md.rank > FA_MAX_RANK)
      return err(formatv("softmax of rank {0}: the runtime takes tensors of "
                         "rank at most {1}",
                         md.rank, FA_MAX_RANK));
    if (Error e = assign(softmax.getInput(), rt::ParamRole::Input))
      return std::move(e);
    if (Error e = assign(softmax.getResult(), rt::ParamRole::Output,
                         /*isResult=*/true))
      return std::move(e);
  }
  bool ok;
  md.dtype = getDType(elementType, ok);

  // Params in argument order.
  int64_t numModParams = 0;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto it = roles.find(i);
    if (it == roles.end())
      return err(formatv("argument #{0} is not an operand or destination of "
                         "the fa op; kernels take exactly the op's operands",
                         i));
    auto memref = cast<MemRefType>(type);
    // The runtime sizes every tensor in bytes as int64: a static shape whose
    // size cannot be represented would be rejected by every launch.
    std::optional<int64_t> bytes =
        (memref.getElementTypeBitWidth() + 7) / 8;
    for (int64_t size : memref.getShape())
      if (bytes && !ShapedType::isDynamic(size))
        bytes = llvm::checkedMul(*bytes, size);
    if (!bytes)
      return err(formatv("argument #{0} ({1}) has more bytes than an int64 "
                         "can count; no launch could pass it",
                         i, memref));
    rt::ParamInfo param;
    param.role = it->second;
    param.dtype = getDType(memref.getElementType(), ok);
    if (!ok) {
      if (param.role == rt::ParamRole::Mask &&
          memref.getElementType().isSignlessInteger(1))
        return err(formatv("argument #{0} is an i1 memref; pass boolean "
                           "masks as i8 memrefs (one byte per element) and "
                           "convert them with `arith.cmpi ne` (fa-compile "
                           "--emit-mlir shows the form)",
                           i));
      return err(formatv("argument #{0} has element type {1}, which the "
                         "runtime does not pass",
                         i, memref.getElementType()));
    }
    if (param.role == rt::ParamRole::ModOperand) {
      // The regions' tensors: fixed shapes, named mod0, mod1, ... in
      // argument order.
      if (!memref.hasStaticShape())
        return err(formatv("argument #{0} ({1}) is read by the fa op's "
                           "score_mod / mask_mod; kernels take such tensors "
                           "with static shapes",
                           i, memref));
      param.name = "mod" + std::to_string(numModParams++);
      for (int64_t size : memref.getShape())
        param.shape.push_back(rt::ShapeDim::fixed(size));
      md.params.push_back(std::move(param));
      continue;
    }
    static const char *const canonicalNames[] = {"q",
                                                 "k",
                                                 "v",
                                                 "kv_lens",
                                                 "mask",
                                                 "o",
                                                 "lse",
                                                 "x",
                                                 "alibi",
                                                 "q_segments",
                                                 "k_segments",
                                                 "mod_operand",
                                                 "block_mask",
                                                 "block_table",
                                                 "cu_seqlens_q",
                                                 "cu_seqlens_k",
                                                 "partial_o",
                                                 "partial_lse",
                                                 "d_o",
                                                 "d_q",
                                                 "d_k",
                                                 "d_v"};
    static_assert(std::size(canonicalNames) ==
                      static_cast<size_t>(rt::ParamRole::GradValue) + 1,
                  "a name per role");
    param.name = md.op == rt::OpKind::Softmax
                     ? (param.role == rt::ParamRole::Input ? "x" : "y")
                     : canonicalNames[static_cast<unsigned>(param.role)];
    std::vector<std::string> symbols = rt::getCanonicalShape(md, param.role);
    for (int64_t d = 0; d < memref.getRank(); ++d) {
      // A rank the op does not allow fails verifyKernelMetadata below.
      std::string symbol =
          d < static_cast<int64_t>(symbols.size()) ? symbols[d] : "?";
      int64_t size = memref.getDimSize(d);
      bool isStaticSymbol = rt::getStaticSymbolValue(md, symbol).has_value();
      bool broadcast = (param.role == rt::ParamRole::Mask ||
                        param.role == rt::ParamRole::BlockMask) &&
                       d < 2 && size == 1;
      if (ShapedType::isDynamic(size) || (isStaticSymbol && !broadcast))
        param.shape.push_back(rt::ShapeDim::sym(symbol));
      else
        param.shape.push_back(rt::ShapeDim::fixed(size));
    }
    md.params.push_back(std::move(param));
  }
  if (std::optional<std::string> e = rt::verifyKernelSignature(md))
    return err("unsupported kernel: " + *e);

  KernelJob job;
  job.metadata = std::move(md);
  job.module = ModuleOp::create(func.getLoc());
  auto clone = cast<func::FuncOp>(func->clone());
  clone->setAttr("llvm.emit_c_interface", UnitAttr::get(func.getContext()));
  clone.setPublic();
  job.module->getBody()->push_back(clone);
  return std::optional<KernelJob>(std::move(job));
}

Expected<std::vector<KernelJob>>
mlir::fa::compile::extractKernelJobs(ModuleOp module,
                                     const CompileOptions &options) {
  std::vector<KernelJob> jobs;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    Expected<std::optional<KernelJob>> job = extractJob(func, options);
    if (!job)
      return job.takeError();
    if (*job)
      jobs.push_back(std::move(**job));
  }
  return jobs;
}

//===----------------------------------------------------------------------===//
// General modifiers from a file
//===----------------------------------------------------------------------===//

/// An llvm::Error holding `message`.
static llvm::Error error(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

llvm::Expected<SmallVector<RankedTensorType>>
compile::attachModifierFunctions(ModuleOp kernel, ModuleOp mods) {
  auto scoreMod = mods.lookupSymbol<func::FuncOp>("score_mod");
  auto maskMod = mods.lookupSymbol<func::FuncOp>("mask_mod");
  if (!scoreMod && !maskMod)
    return error("the modifier file defines neither func.func @score_mod "
                 "nor func.func @mask_mod");
  Builder builder(kernel.getContext());
  Type index = builder.getIndexType(), f32 = builder.getF32Type();
  SmallVector<RankedTensorType> tensors;
  bool haveTensors = false;
  // Checks one function's signature and collects its trailing tensors.
  auto check = [&](func::FuncOp fn, ArrayRef<Type> leading,
                   Type result) -> llvm::Error {
    StringRef name = fn.getSymName();
    FunctionType type = fn.getFunctionType();
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      return error("@" + name + " must have a body of one block");
    if (type.getNumInputs() < leading.size() ||
        TypeRange(type.getInputs().take_front(leading.size())) !=
            TypeRange(leading))
      return error("@" + name + " must take " +
                   (leading.size() == 5 ? "(f32, index, index, index, index"
                                        : "(index, index, index, index") +
                   ") (the " + (leading.size() == 5 ? "score, " : "") +
                   "b, h, q, k indices), then its tensors");
    if (type.getNumResults() != 1 || type.getResult(0) != result) {
      std::string want;
      llvm::raw_string_ostream os(want);
      os << result;
      return error("@" + name + " must return one " + want);
    }
    SmallVector<RankedTensorType> mine;
    for (Type t : type.getInputs().drop_front(leading.size())) {
      auto tensor = dyn_cast<RankedTensorType>(t);
      if (!tensor)
        return error("@" + name + ": the arguments after the indices must "
                     "be ranked tensors");
      mine.push_back(tensor);
    }
    if (haveTensors && mine != tensors)
      return error("@score_mod and @mask_mod must take the same tensors");
    tensors = mine;
    haveTensors = true;
    return llvm::Error::success();
  };
  if (scoreMod)
    if (llvm::Error e = check(scoreMod, {f32, index, index, index, index}, f32))
      return std::move(e);
  if (maskMod)
    if (llvm::Error e = check(maskMod, {index, index, index, index},
                              builder.getI1Type()))
      return std::move(e);

  AttentionOp op;
  kernel.walk([&](AttentionOp found) { op = found; });
  auto func = op ? op->getParentOfType<func::FuncOp>() : func::FuncOp();
  if (!func)
    return error("internal error: no attention kernel to attach modifiers to");

  // The tensors as memref arguments of the kernel, read through to_tensor.
  Location loc = func.getLoc();
  OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
  SmallVector<Value> operands;
  for (RankedTensorType t : tensors) {
    auto memref = MemRefType::get(t.getShape(), t.getElementType());
    unsigned at = func.getNumArguments();
    if (failed(func.insertArgument(at, memref, {}, loc)))
      return error("internal error: cannot add a kernel argument");
    operands.push_back(toTensor(b, loc, func.getArgument(at),
                                /*writable=*/false));
  }
  op.getModOperandsMutable().assign(operands);

  // The function bodies as the regions, func.return as fa.yield.
  auto attach = [&](func::FuncOp fn, Region &region) {
    Block &from = fn.getBody().front();
    Block *to = new Block();
    region.push_back(to);
    IRMapping map;
    for (BlockArgument arg : from.getArguments())
      map.map(arg, to->addArgument(arg.getType(), arg.getLoc()));
    OpBuilder rb = OpBuilder::atBlockEnd(to);
    for (Operation &inner : from) {
      if (auto ret = dyn_cast<func::ReturnOp>(inner)) {
        SmallVector<Value> values;
        for (Value v : ret.getOperands())
          values.push_back(map.lookupOrDefault(v));
        YieldOp::create(rb, ret.getLoc(), values);
        continue;
      }
      rb.clone(inner, map);
    }
  };
  if (scoreMod)
    attach(scoreMod, op.getScoreMod());
  if (maskMod)
    attach(maskMod, op.getMaskMod());
  return tensors;
}

llvm::Error compile::attachBlockTable(ModuleOp kernel, int64_t pageSize) {
  AttentionOp op;
  kernel.walk([&](AttentionOp found) { op = found; });
  if (!op || !op.getKvLens())
    return error("a paged cache needs the sequences' lengths (kv_lens)");
  if (pageSize <= 0)
    return error("the page size must be positive, got " + Twine(pageSize));
  FailureOr<KernelOperands> args = matchKernelForm(op);
  if (failed(args))
    return error("internal error: the attention is not in the kernel form");
  auto func = op->getParentOfType<func::FuncOp>();
  Location loc = func.getLoc();
  MLIRContext *ctx = kernel.getContext();
  int64_t dyn = ShapedType::kDynamic;
  // K and V: [B, Hkv, Nk, D] arguments -> [P, S, Hkv, D], with the
  // to_tensor reads retyped (the op verifies once it has its table).
  for (Value arg : {args->k, args->v}) {
    auto dense = cast<MemRefType>(arg.getType());
    auto paged = MemRefType::get(
        {dyn, pageSize, dense.getDimSize(1), dense.getDimSize(3)},
        dense.getElementType());
    arg.setType(paged);
    for (Operation *user : arg.getUsers())
      if (auto read = dyn_cast<bufferization::ToTensorOp>(user))
        cast<Value>(read.getResult())
            .setType(RankedTensorType::get(paged.getShape(),
                                           paged.getElementType()));
  }
  auto table = MemRefType::get({dyn, dyn}, IntegerType::get(ctx, 32));
  unsigned at = func.getNumArguments();
  if (failed(func.insertArgument(at, table, {}, loc)))
    return error("internal error: cannot add a kernel argument");
  SmallVector<Type> inputs;
  for (BlockArgument a : func.getArguments())
    inputs.push_back(a.getType());
  func.setType(FunctionType::get(ctx, inputs, func.getResultTypes()));
  OpBuilder b(op);
  op.getBlockTableMutable().assign(
      toTensor(b, loc, func.getArgument(at), /*writable=*/false));
  if (failed(verify(func)))
    return error("internal error: the paged kernel does not verify");
  return llvm::Error::success();
}

llvm::Error compile::attachCuSeqlens(ModuleOp kernel) {
  AttentionOp op;
  kernel.walk([&](AttentionOp found) { op = found; });
  if (!op)
    return error("the kernel has no attention");
  if (op.getKvLens() || op.getMask() || op.getQSegments() ||
      op.getBlockTable() || op.getBlockMask())
    return error("key lengths, masks, segment ids, block tables and block "
                 "masks are not available with cu_seqlens");
  FailureOr<KernelOperands> args = matchKernelForm(op);
  if (failed(args))
    return error("internal error: the attention is not in the kernel form");
  auto func = op->getParentOfType<func::FuncOp>();
  Location loc = func.getLoc();
  MLIRContext *ctx = kernel.getContext();
  int64_t dyn = ShapedType::kDynamic;
  // [B, H, N, D] -> [T, H, D]; LSE [B, Hq, Nq] -> [Hq, Tq]. The to_tensor
  // reads and the results follow (the op verifies once it has its offsets).
  auto retype = [&](Value arg, ArrayRef<int64_t> shape) {
    auto dense = cast<MemRefType>(arg.getType());
    arg.setType(MemRefType::get(shape, dense.getElementType()));
    auto tensorType = RankedTensorType::get(shape, dense.getElementType());
    for (Operation *user : arg.getUsers())
      if (auto read = dyn_cast<bufferization::ToTensorOp>(user))
        cast<Value>(read.getResult()).setType(tensorType);
    return tensorType;
  };
  for (Value arg : {args->q, args->k, args->v}) {
    auto t = cast<MemRefType>(arg.getType());
    retype(arg, {dyn, t.getDimSize(1), t.getDimSize(3)});
  }
  auto oType = cast<MemRefType>(args->o.getType());
  op.getResult().setType(
      retype(args->o, {dyn, oType.getDimSize(1), oType.getDimSize(3)}));
  if (args->lse)
    op.getLseResult().setType(retype(
        args->lse, {cast<MemRefType>(args->lse.getType()).getDimSize(1), dyn}));
  auto offsets = MemRefType::get({dyn}, IntegerType::get(ctx, 32));
  unsigned at = func.getNumArguments();
  if (failed(func.insertArgument(at, offsets, {}, loc)) ||
      failed(func.insertArgument(at + 1, offsets, {}, loc)))
    return error("internal error: cannot add a kernel argument");
  SmallVector<Type> inputs;
  for (BlockArgument a : func.getArguments())
    inputs.push_back(a.getType());
  func.setType(FunctionType::get(ctx, inputs, func.getResultTypes()));
  OpBuilder b(op);
  op.getCuSeqlensQMutable().assign(
      toTensor(b, loc, func.getArgument(at), /*writable=*/false));
  op.getCuSeqlensKMutable().assign(
      toTensor(b, loc, func.getArgument(at + 1), /*writable=*/false));
  if (failed(verify(func)))
    return error("internal error: the variable-length kernel does not "
                 "verify");
  return llvm::Error::success();
}

llvm::Error compile::attachBlockMask(ModuleOp kernel, int64_t tq, int64_t tk,
                                     StringRef name) {
  AttentionOp op;
  kernel.walk([&](AttentionOp found) { op = found; });
  if (!op || !op.hasMaskMod())
    return error("a block mask needs a @mask_mod");
  FailureOr<KernelOperands> args = matchKernelForm(op);
  if (failed(args))
    return error("internal error: the attention is not in the kernel form");
  auto func = op->getParentOfType<func::FuncOp>();
  Location loc = func.getLoc();
  MLIRContext *ctx = kernel.getContext();
  int64_t hq = cast<RankedTensorType>(op.getQuery().getType()).getDimSize(1);
  int64_t dyn = ShapedType::kDynamic;
  auto i8 = IntegerType::get(ctx, 8);
  // A mask_mod that does not read b (or h) gets a block mask of one batch
  // (or head), broadcast: B (or Hq) times less work to build.
  Block &maskBody = op.getMaskMod().front();
  bool perBatch = !maskBody.getArgument(0).use_empty();
  bool perHead = !maskBody.getArgument(1).use_empty();
  auto bmMemref = MemRefType::get(
      {perBatch ? dyn : 1, perHead ? hq : 1, dyn, dyn}, i8);

  // The kernel reads it.
  unsigned at = func.getNumArguments();
  if (failed(func.insertArgument(at, bmMemref, {}, loc)))
    return error("internal error: cannot add a kernel argument");
  OpBuilder b(op);
  Value bm = toTensor(b, loc, func.getArgument(at), /*writable=*/false);
  op.getBlockMaskMutable().assign(bm);
  op.setBlockTilesAttr(b.getDenseI64ArrayAttr({tq, tk}));

  // @name(q, k, mod_operands..., out) builds it.
  SmallVector<Type> inputs = {args->q.getType(), args->k.getType()};
  for (Value m : args->modOperands)
    inputs.push_back(m.getType());
  inputs.push_back(bmMemref);
  OpBuilder mb = OpBuilder::atBlockEnd(kernel.getBody());
  auto builder = func::FuncOp::create(mb, loc, name,
                                      FunctionType::get(ctx, inputs, {}));
  builder->setAttr("llvm.emit_c_interface", UnitAttr::get(ctx));
  Block *entry = builder.addEntryBlock();
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  auto dim = [&](Value memref, int64_t d) -> Value {
    return memref::DimOp::create(fb, loc, memref, d);
  };
  Value batch = perBatch ? dim(entry->getArgument(0), 0)
                         : Value(arith::ConstantIndexOp::create(fb, loc, 1));
  Value heads = arith::ConstantIndexOp::create(fb, loc, perHead ? hq : 1);
  Value nq = dim(entry->getArgument(0), 2);
  Value nk = dim(entry->getArgument(1), 2);
  SmallVector<Value> mods;
  for (unsigned i = 0, e = args->modOperands.size(); i < e; ++i)
    mods.push_back(toTensor(fb, loc, entry->getArgument(2 + i),
                            /*writable=*/false));
  auto resultType = RankedTensorType::get(bmMemref.getShape(), i8);
  auto create = CreateBlockMaskOp::create(
      fb, loc, resultType, batch, heads, nq, nk, mods,
      fb.getDenseI64ArrayAttr({tq, tk}));
  IRMapping map;
  op.getMaskMod().cloneInto(&create.getMaskMod(), map);
  materialize(fb, loc, create.getResult(), entry->getArguments().back());
  func::ReturnOp::create(fb, loc);
  return llvm::Error::success();
}
