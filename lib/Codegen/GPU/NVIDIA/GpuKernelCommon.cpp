//===- GpuKernelCommon.cpp - shared by the tensor-core kernels ------------===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "GpuKernelCommon.h"

#include "fa/Dialect/FA/Utils/LoweringUtils.h"
#include "fa/Target/Chips.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>
#include <tuple>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::gpukernel;

//===----------------------------------------------------------------------===//
// Pass-level helpers
//===----------------------------------------------------------------------===//

SmallVector<KernelCandidate>
gpukernel::collectKernelCandidates(ModuleOp module,
                                   function_ref<bool(AttentionOp)> eligible) {
  SmallVector<KernelCandidate> work;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.getBody().hasOneBlock())
      continue;
    SmallVector<AttentionOp> ops;
    func.walk([&](AttentionOp op) { ops.push_back(op); });
    // Anything but one eligible op in the kernel form is left to the other
    // GPU paths (fa-promote-shared reports what it cannot handle).
    if (ops.size() != 1 || !eligible(ops.front()))
      continue;
    FailureOr<KernelOperands> args = matchKernelForm(ops.front());
    if (failed(args))
      continue;
    auto isArg = [&](Value v) {
      auto arg = dyn_cast_or_null<BlockArgument>(v);
      return !v || (arg && arg.getOwner() == &func.getBody().front());
    };
    // The q_offset may also be a constant (cloned into the kernel).
    if (!isArg(args->q) || !isArg(args->k) || !isArg(args->v) ||
        !isArg(args->kvLens) || !isArg(args->mask) || !isArg(args->o) ||
        !isArg(args->lse) || !isArg(args->alibi) ||
        !isArg(args->qSegments) || !isArg(args->kSegments) ||
        !isArg(args->blockMask) || !isArg(args->blockTable) ||
        !isArg(args->cuSeqlensQ) || !isArg(args->cuSeqlensK) ||
        !(isArg(args->qOffset) ||
          matchPattern(args->qOffset, m_Constant())) ||
        !llvm::all_of(args->modOperands, isArg))
      continue;
    // Boolean masks as i1 or i8 (0 = masked), additive ones as f16, bf16
    // or f32.
    if (args->mask) {
      Type m = cast<MemRefType>(args->mask.getType()).getElementType();
      if (!(m.isInteger(1) || m.isInteger(8) || m.isF16() || m.isBF16() ||
            m.isF32()))
        continue;
    }
    work.push_back({func, ops.front(), *args});
  }
  return work;
}

LogicalResult gpukernel::checkSharedMemoryFits(AttentionOp op, StringRef pass,
                                               StringRef chip,
                                               const KernelLaunch &launch,
                                               StringRef tiles) {
  const ::fa::target::ChipInfo *info = ::fa::target::lookupChip(chip);
  if (!info)
    return op.emitError() << pass << ": chip '" << chip
                          << "' is not supported; expected "
                          << ::fa::target::getChipList();
  if (launch.sharedBytes <= info->optInSharedBytesPerBlock)
    return success();
  return op.emitError() << pass << ": the tiles need " << launch.sharedBytes
                        << " bytes of workgroup memory, more than the "
                        << info->optInSharedBytesPerBlock
                        << " one block may use on " << chip << " (" << tiles
                        << ")";
}

LogicalResult gpukernel::addSplitWorkspace(AttentionOp op, StringRef pass,
                                           func::FuncOp func,
                                           KernelOperands &args) {
  if (op.isVarlen())
    return op.emitError() << pass
                          << ": split-kv does not apply to variable-length "
                             "batches (cu_seqlens) yet";
  std::tie(args.partialO, args.partialLse) =
      appendSplitWorkspace(func, args.o);
  return success();
}

void gpukernel::approximateTanhForNVVM(Operation *kernel) {
  // The softcap's tanh: a rational approximation (a few ulp), as on the
  // CPU; NVVM has no tanh without libdevice. Its math.fma and math.absf,
  // and any f32 math.exp2 / math.log2, become the LLVM and NVVM intrinsics
  // (fma.rn.f32, abs.f32, ex2.approx.f32, lg2.approx.f32): the NVVM
  // lowering would call libdevice (__nv_fmaf, __nv_exp2f, ...), which
  // nothing links.
  SmallVector<Operation *> tanhs;
  kernel->walk([&](math::TanhOp t) { tanhs.push_back(t); });
  if (!tanhs.empty())
    (void)lowering::approximateTanh(tanhs);
  SmallVector<Operation *> mathOps;
  kernel->walk([&](Operation *o) {
    if (isa<math::FmaOp, math::AbsFOp, math::Exp2Op, math::Log2Op>(o) &&
        o->getResult(0).getType().isF32() &&
        !lowering::getNVVMIntrinsicName(o).empty())
      mathOps.push_back(o);
  });
  for (Operation *o : mathOps) {
    OpBuilder ob(o);
    StringRef name = lowering::getNVVMIntrinsicName(o);
    auto call = LLVM::CallIntrinsicOp::create(
        ob, o->getLoc(), Type(ob.getF32Type()), ob.getStringAttr(name),
        ValueRange(o->getOperands()));
    o->replaceAllUsesWith(call->getResults());
    o->erase();
  }
}

gpu::GPUFuncOp gpukernel::createKernelFunc(gpu::GPUModuleOp gpuModule,
                                           func::FuncOp func, StringRef name,
                                           int64_t numThreads) {
  MLIRContext *ctx = func.getContext();
  OpBuilder gb = OpBuilder::atBlockEnd(gpuModule.getBody());
  auto kernel =
      gpu::GPUFuncOp::create(gb, func.getLoc(), name, func.getFunctionType());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(
      ctx, {static_cast<int32_t>(numThreads), 1, 1}));
  return kernel;
}

Value gpukernel::remapIntoKernel(gpu::GPUFuncOp kernel, Value v) {
  if (!v)
    return v;
  // The kernel's parameters are the function's arguments, in order.
  Block &entry = kernel.getBody().front();
  if (auto arg = dyn_cast<BlockArgument>(v))
    return entry.getArgument(arg.getArgNumber());
  // A constant (the q_offset): cloned into the kernel.
  OpBuilder cb = OpBuilder::atBlockBegin(&entry);
  return cb.clone(*v.getDefiningOp())->getResult(0);
}

void gpukernel::outlineKernel(
    ModuleOp module, func::FuncOp func, AttentionOp op,
    const KernelOperands &args, const KernelLaunch &launch,
    function_ref<void(gpu::GPUFuncOp, const KernelOperands &)> buildBody) {
  MLIRContext *ctx = module.getContext();
  Location loc = func.getLoc();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  UnitAttr::get(ctx));
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto gpuModule =
      gpu::GPUModuleOp::create(mb, loc, (func.getName() + "_kernels").str());
  gpu::GPUFuncOp kernel =
      createKernelFunc(gpuModule, func, func.getName(), launch.numThreads);
  auto remap = [&](Value v) { return remapIntoKernel(kernel, v); };
  KernelOperands kargs{remap(args.q),         remap(args.k),
                       remap(args.v),         remap(args.kvLens),
                       remap(args.mask),      remap(args.o),
                       remap(args.lse),       remap(args.alibi),
                       remap(args.qSegments), remap(args.kSegments),
                       remap(args.qOffset)};
  kargs.blockMask = remap(args.blockMask);
  kargs.blockTable = remap(args.blockTable);
  kargs.cuSeqlensQ = remap(args.cuSeqlensQ);
  kargs.cuSeqlensK = remap(args.cuSeqlensK);
  for (Value m : args.modOperands)
    kargs.modOperands.push_back(remap(m));
  kargs.partialO = remap(args.partialO);
  kargs.partialLse = remap(args.partialLse);
  buildBody(kernel, kargs);
  approximateTanhForNVVM(kernel);

  int64_t numHeads =
      cast<RankedTensorType>(op.getQuery().getType()).getDimSize(1);
  int64_t group = op.getGroupSize();

  // Host side: replace the body by the launch.
  Block &body = func.getBody().front();
  Operation *ret = body.getTerminator();
  SmallVector<Operation *> toErase;
  for (Operation &o : llvm::reverse(body.without_terminator()))
    toErase.push_back(&o);
  for (Operation *o : toErase)
    o->erase();
  OpBuilder hb(ret);
  // The varlen form: the query tiles of all Tq tokens (the blocks past
  // their sequence's rows return at once) over B = offsets - 1 sequences.
  bool varlen = static_cast<bool>(args.cuSeqlensQ);
  Value nq = memref::DimOp::create(hb, loc, args.q, varlen ? 0 : 2);
  Value batches =
      varlen ? Value(arith::MaxSIOp::create(
                   hb, loc,
                   arith::SubIOp::create(
                       hb, loc,
                       memref::DimOp::create(hb, loc, args.cuSeqlensQ, 0),
                       arith::ConstantIndexOp::create(hb, loc, 1)),
                   arith::ConstantIndexOp::create(hb, loc, 0)))
             : Value(memref::DimOp::create(hb, loc, args.q, 0));
  int64_t numHeadsInGrid = numHeads;
  if (launch.packGqa) {
    // Packed heads: the Nq x G rows of a kv head's query heads.
    nq = arith::MulIOp::create(hb, loc, nq,
                               arith::ConstantIndexOp::create(hb, loc, group));
    numHeadsInGrid = numHeads / group;
  }
  Value tiles = arith::CeilDivUIOp::create(
      hb, loc, nq, arith::ConstantIndexOp::create(hb, loc, launch.blockQ));
  // Split-KV: x runs over (query tile, part), the part fastest.
  if (launch.splitKv)
    tiles = arith::MulIOp::create(
        hb, loc, tiles, memref::DimOp::create(hb, loc, args.partialLse, 0));
  Value heads = arith::ConstantIndexOp::create(hb, loc, numHeadsInGrid);
  Value one = arith::ConstantIndexOp::create(hb, loc, 1);
  Value threads = arith::ConstantIndexOp::create(hb, loc, launch.numThreads);
  Value smemBytes =
      arith::ConstantIntOp::create(hb, loc, launch.sharedBytes, 32);
  gpu::LaunchFuncOp::create(hb, loc, kernel,
                            gpu::KernelDim3{tiles, heads, batches},
                            gpu::KernelDim3{threads, one, one}, smemBytes,
                            ValueRange(func.getArguments()));
  if (launch.splitKv) {
    // The second kernel: fa.merge's (one warp per row) over the partials,
    // into O and LSE; fa-map-to-gpu outlines it as <function>_merge.
    scf::ForallOp merge = buildMergeForall(
        hb, loc,
        MergeKernelOperands{args.partialO, args.partialLse, args.o, args.lse},
        kSplitMergeWarps);
    merge->setAttr(kForallThreadsAttrName,
                   hb.getIndexAttr(kSplitMergeWarps * kWarpSize));
    merge->setAttr(kForallKernelSuffixAttrName, hb.getStringAttr("_merge"));
  }

  SmallVector<NamedAttribute> entries;
  for (auto &[name, value] : launch.configEntries)
    entries.push_back(
        NamedAttribute(StringAttr::get(ctx, name),
                       IntegerAttr::get(IndexType::get(ctx), value)));
  entries.push_back(
      NamedAttribute(StringAttr::get(ctx, launch.flag), UnitAttr::get(ctx)));
  if (launch.splitKv)
    entries.push_back(
        NamedAttribute(StringAttr::get(ctx, "split_kv"), UnitAttr::get(ctx)));
  if (launch.packGqa)
    entries.push_back(
        NamedAttribute(StringAttr::get(ctx, "pack_gqa"), UnitAttr::get(ctx)));
  func->setAttr(kConfigAttrName, DictionaryAttr::get(ctx, entries));
}

//===----------------------------------------------------------------------===//
// Kernel builder base
//===----------------------------------------------------------------------===//

AttentionKernelBuilder::AttentionKernelBuilder(AttentionOp op,
                                               const KernelTiles &tiles)
    : op(op), tiles(tiles), ctx(op.getContext()), loc(op.getLoc()) {
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  elt = qType.getElementType();
  oElt = cast<RankedTensorType>(op.getResult().getType()).getElementType();
  group = op.getGroupSize();
  sem = AttentionSemantics::get(op);
  scaleLog2 = op.getEffectiveScale() * static_cast<float>(M_LOG2E);
}

Value AttentionKernelBuilder::shuffleXor(Value v, int64_t offset) {
  Value off = arith::ConstantIntOp::create(b, loc, offset, 32);
  Value width = arith::ConstantIntOp::create(b, loc, kWarpSize, 32);
  return gpu::ShuffleOp::create(b, loc, v, off, width, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

Value AttentionKernelBuilder::ex2(Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, Type(b.getF32Type()),
             b.getStringAttr("llvm.nvvm.ex2.approx.f32"), ValueRange{x})
      .getResult(0);
}

Value AttentionKernelBuilder::rowIndex(int64_t r) {
  return addC(add(add(q0, warpRow0), laneRow), 8 * r);
}

AttentionSemantics::QueryRange
AttentionKernelBuilder::queriesOfRows(Value r0, Value rows) {
  if (!packed)
    return {r0, rows};
  return AttentionSemantics::packedQueryRange(b, loc, r0, rows, group);
}

void AttentionKernelBuilder::emitThreadIds() {
  tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  lane = gpu::LaneIdOp::create(b, loc, /*upperBound=*/nullptr);
  warp = arith::DivUIOp::create(b, loc, tid, cIdx(kWarpSize));
}

Value AttentionKernelBuilder::emitBlockIds() {
  Value qTile = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  if (isSplit()) {
    numParts = memref::DimOp::create(b, loc, args.partialLse, 0);
    part = arith::RemUIOp::create(b, loc, qTile, numParts);
    qTile = arith::DivUIOp::create(b, loc, qTile, numParts);
  }
  batch = gpu::BlockIdOp::create(b, loc, gpu::Dimension::z);
  if (packed) {
    // Packed heads: y runs over the kv heads; each row has its own head.
    kvHead = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
    head = Value();
  } else {
    head = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
    kvHead = group == 1
                 ? head
                 : Value(arith::DivUIOp::create(b, loc, head, cIdx(group)));
  }
  laneRow = arith::DivUIOp::create(b, loc, lane, cIdx(4));
  laneQuad2 = mul(arith::RemUIOp::create(b, loc, lane, cIdx(4)), cIdx(2));
  return qTile;
}

void AttentionKernelBuilder::emitKeyRange(Value qTile) {
  if (args.cuSeqlensQ) {
    // The block's sequence: its rows and keys are Nq and Nk of every rule.
    AttentionSemantics::SequencePair seq = AttentionSemantics::loadSequences(
        b, loc, args.cuSeqlensQ, args.cuSeqlensK, batch, args.q, args.k);
    qStart = seq.queries.start;
    nq = seq.queries.length;
    kStart = seq.keys.start;
    nk = seq.keys.length;
  } else {
    nq = memref::DimOp::create(b, loc, args.q, 2);
    // A paged cache stands for Nk = M x S keys.
    nk = args.blockTable
             ? AttentionSemantics::pagedKeyCount(b, loc, args.blockTable,
                                                 op.getPageSize())
             : Value(memref::DimOp::create(b, loc, args.k, 2));
  }
  q0 = mul(qTile, cIdx(tiles.blockQ));
  nRows = packed ? mul(nq, cIdx(group)) : nq;
  Value qRows = arith::MinSIOp::create(
      b, loc, cIdx(tiles.blockQ), arith::SubIOp::create(b, loc, nRows, q0));
  AttentionSemantics::QueryRange queries = queriesOfRows(q0, qRows);
  qFirst = queries.q0;
  qCount = queries.count;
  zeroIdx = cIdx(0);
  // Keys past kv_end (key lengths, causally excluded tiles, the window's
  // right bound, the chunk's end) and tiles before the one holding the
  // window's left bound or the chunk's start are never visited. The first
  // tile stays on the tile grid.
  Value len;
  if (args.kvLens)
    len = memref::LoadOp::create(b, loc, args.kvLens, ValueRange{batch});
  Value keyEnd = sem.keyLengthEnd(b, loc, len, nk);
  // A paged cache aligns causality per sequence (its len_b keys); with no
  // pages at all no key can be read.
  if (args.blockTable)
    keyEnd = AttentionSemantics::pagedKeyEnd(b, loc, args.k, keyEnd);
  diag = sem.diagonalOffset(b, loc, nq, args.blockTable ? keyEnd : nk,
                            args.qOffset);
  kvEnd = sem.visitedKeyEnd(b, loc, keyEnd, qFirst, qCount, diag);
  Value begin = sem.visitedTileBegin(b, loc, qFirst, diag, tiles.blockKV);
  kvBegin = begin ? begin : zeroIdx;
  numKV = arith::CeilDivUIOp::create(
      b, loc, AttentionSemantics::visitedKeyCount(b, loc, begin, kvEnd),
      cIdx(tiles.blockKV));
  // A varlen block past its sequence's rows visits nothing (and stores
  // nothing: every row is past Nq).
  if (args.cuSeqlensQ)
    numKV = arith::SelectOp::create(b, loc,
                                    cmp(arith::CmpIPredicate::slt, q0, nq),
                                    numKV, zeroIdx);
  copyEnd = kvEnd;
  if (isSplit()) {
    // The block's part: ceil(tiles / S) consecutive visited tiles (parts
    // past the last tile have none: LSE -inf, which the merge ignores).
    // The copies read nothing past the part's last tile.
    AttentionSemantics::TileRange range =
        AttentionSemantics::splitTileRange(b, loc, numKV, part, numParts);
    kvBegin = add(kvBegin, mul(range.begin, cIdx(tiles.blockKV)));
    numKV = arith::SubIOp::create(b, loc, range.end, range.begin);
    copyEnd = arith::MinUIOp::create(
        b, loc, kvEnd, add(kvBegin, mul(numKV, cIdx(tiles.blockKV))));
  }
  if (packed) {
    // Each of the thread's rows: its query, head and slope.
    for (int64_t r = 0; r < 2; ++r) {
      AttentionSemantics::PackedRow pr =
          AttentionSemantics::unpackGqaRow(b, loc, rowIndex(r), kvHead, group);
      packedQuery[r] = pr.query;
      packedHead[r] = pr.head;
      packedSlope[r] = AttentionSemantics::loadAlibiSlope(b, loc, args.alibi,
                                                          batch, pr.head);
    }
  } else {
    slope =
        AttentionSemantics::loadAlibiSlope(b, loc, args.alibi, batch, head);
  }

  // The block mask, when each kernel tile lies inside one of its tiles (the
  // first visited key tile stays on the kernel's tile grid); not with
  // packed heads, whose rows are of several heads.
  useBlockMask = args.blockMask && !packed &&
                 sem.canUseBlockMask(tiles.blockQ, tiles.blockKV);
  // Document masking: the id range of the block's rows.
  if (args.qSegments)
    qSegRange = segmentRange(args.qSegments, qFirst, qCount, tiles.blockQ);
}

AttentionSemantics::SegmentRange
AttentionKernelBuilder::segmentRange(Value ids, Value first, Value count,
                                     int64_t maxCount) {
  Type i32 = b.getI32Type();
  auto cI32 = [&](int32_t v) {
    return arith::ConstantIntOp::create(b, loc, i32, v).getResult();
  };
  Value lo = cI32(std::numeric_limits<int32_t>::max());
  Value hi = cI32(std::numeric_limits<int32_t>::min());
  // Indices past the ids read the last one (their values are dropped).
  Value lastId = arith::SubIOp::create(
      b, loc, memref::DimOp::create(b, loc, ids, 1), cIdx(1));
  for (int64_t i = 0; i < maxCount; i += kWarpSize) {
    Value offset = addC(lane, i);
    Value inside = cmp(arith::CmpIPredicate::slt, offset, count);
    Value at = arith::MinSIOp::create(b, loc, add(first, offset), lastId);
    Value id = memref::LoadOp::create(b, loc, ids, ValueRange{batch, at});
    lo = arith::MinSIOp::create(
        b, loc, lo,
        arith::SelectOp::create(b, loc, inside, id,
                                cI32(std::numeric_limits<int32_t>::max())));
    hi = arith::MaxSIOp::create(
        b, loc, hi,
        arith::SelectOp::create(b, loc, inside, id,
                                cI32(std::numeric_limits<int32_t>::min())));
  }
  for (int64_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    lo = arith::MinSIOp::create(b, loc, lo, shuffleXor(lo, offset));
    hi = arith::MaxSIOp::create(b, loc, hi, shuffleXor(hi, offset));
  }
  return {lo, hi};
}

Value AttentionKernelBuilder::blockMaskEntry(Value k0) {
  if (!useBlockMask)
    return Value();
  return sem.loadBlockMaskEntry(b, loc, args.blockMask, batch, head, q0, k0);
}

Value AttentionKernelBuilder::tileVisited(Value k0) {
  Value visited;
  tileMaskModPartial = Value();
  tileKSegRange.reset();
  if (Value entry = blockMaskEntry(k0)) {
    visited = cmp(arith::CmpIPredicate::ne, entry,
                  arith::ConstantIntOp::create(b, loc, 0, 8));
    tileMaskModPartial = cmp(arith::CmpIPredicate::eq, entry,
                             arith::ConstantIntOp::create(b, loc, 1, 8));
  }
  if (qSegRange) {
    Value cols = arith::SubIOp::create(b, loc, kvEnd, k0);
    tileKSegRange = segmentRange(args.kSegments, k0, cols, tiles.blockKV);
    Value docs = sem.segmentTileVisited(b, loc, *qSegRange, *tileKSegRange);
    visited = visited ? Value(arith::AndIOp::create(b, loc, visited, docs))
                      : docs;
  }
  return visited;
}

Value AttentionKernelBuilder::tileStart(Value j) {
  Value k0 = mul(j, cIdx(tiles.blockKV));
  return matchPattern(kvBegin, m_Zero()) ? k0 : add(kvBegin, k0);
}

Value AttentionKernelBuilder::tileMayRemoveKeys(Value k0) {
  if (!sem.removesKeysInsideRange())
    return Value();
  if (args.mask || sem.hasSegments() || sem.hasRegions())
    return arith::ConstantIntOp::create(b, loc, 1, 1);
  if (!sem.hasWindowLeft() && !sem.hasWindowRight() && !sem.hasChunk())
    return tileCrossesBlockDiagonal(k0);
  return sem.tileNeedsElementMask(b, loc, k0, cIdx(tiles.blockKV), kvEnd,
                                  qFirst, diag,
                                  packed ? qCount : cIdx(tiles.blockQ));
}

Value AttentionKernelBuilder::tileCrossesBlockDiagonal(Value k0) {
  return sem.crossesDiagonal(b, loc, k0, cIdx(tiles.blockKV), qFirst, diag);
}

Value AttentionKernelBuilder::ifElseFalse(Value cond,
                                          function_ref<Value()> thenValue) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{b.getI1Type()}, cond,
                                /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  scf::YieldOp::create(b, loc, thenValue());
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc,
                       ValueRange{arith::ConstantIntOp::create(b, loc, 0, 1)});
  return ifOp.getResult(0);
}

AttentionKernelBuilder::ScoreMask AttentionKernelBuilder::beginScoreMask() {
  ScoreMask m;
  m.ninf = cF32(-std::numeric_limits<float>::infinity());
  Value rowQ[2] = {rowQuery(0), rowQuery(1)};
  for (int r = 0; r < 2; ++r)
    m.row[r] = rowQ[r];
  if (args.mask || args.qSegments) {
    // Rows and keys past the ends read the last ones (their scores are
    // dropped or removed).
    Value lastRow = arith::SubIOp::create(b, loc, nq, cIdx(1));
    for (int r = 0; r < 2; ++r)
      m.maskRow[r] = arith::MinSIOp::create(b, loc, rowQ[r], lastRow);
    m.lastKey = arith::SubIOp::create(b, loc, nk, cIdx(1));
  }
  if (args.mask) {
    auto mType = cast<MemRefType>(args.mask.getType());
    m.mb = mType.getDimSize(0) == 1 ? cIdx(0) : batch;
    for (int r = 0; r < 2; ++r)
      m.mh[r] = mType.getDimSize(1) == 1 ? cIdx(0) : rowHead(r);
  }
  if (args.qSegments)
    for (int r = 0; r < 2; ++r)
      m.qSeg[r] = memref::LoadOp::create(b, loc, args.qSegments,
                                         ValueRange{batch, m.maskRow[r]});
  return m;
}

Value AttentionKernelBuilder::maskScore(const ScoreMask &sm, Value v, Value key,
                                        int64_t r) {
  Value valid = sem.keepKey(b, loc, sm.row[r], key, kvEnd, diag);
  if (args.kSegments) {
    Value keyC = arith::MinSIOp::create(b, loc, key, sm.lastKey);
    Value kSeg = memref::LoadOp::create(b, loc, args.kSegments,
                                        ValueRange{batch, keyC});
    sem.applySegments(b, loc, sm.qSeg[r], kSeg, valid);
  }
  if (args.mask) {
    Value keyC = arith::MinSIOp::create(b, loc, key, sm.lastKey);
    Value m = memref::LoadOp::create(
        b, loc, args.mask, ValueRange{sm.mb, sm.mh[r], sm.maskRow[r], keyC});
    // Scores are in the log2 domain.
    sem.applyMaskElement(b, loc, m, v, valid, M_LOG2E);
  }
  AttentionSemantics::ModIndices idx{batch, rowHead(r), sm.row[r], key, nq,
                                     nk};
  // With an additive mask the score_mod comes after it, so here (every
  // tile is masked then); otherwise modifyScores applied it.
  if (sem.hasAdditiveMask())
    v = sem.applyScoreMod(b, loc, v, idx, args.modOperands, M_LOG2E);
  sem.applyMaskMod(b, loc, idx, args.modOperands, valid);
  return arith::SelectOp::create(b, loc, valid, v, sm.ninf);
}

SmallVector<Value> AttentionKernelBuilder::maskScores(ArrayRef<Value> x,
                                                      Value k0) {
  ScoreMask sm = beginScoreMask();
  return mapScores(x, k0, [&](Value v, Value key, int64_t r) {
    return maskScore(sm, v, key, r);
  });
}

SmallVector<Value> AttentionKernelBuilder::modifyScores(ArrayRef<Value> x,
                                                        Value k0) {
  bool scoreMod = sem.hasScoreMod() && !sem.hasAdditiveMask();
  if (!sem.hasSoftcap() && !sem.hasAlibi() && !scoreMod)
    return SmallVector<Value>(x);
  Value row[2] = {rowQuery(0), rowQuery(1)};
  // Scores are in the log2 domain.
  return mapScores(x, k0, [&](Value v, Value key, int64_t r) {
    v = sem.modifyScore(b, loc, v, row[r], key, diag, rowSlope(r), M_LOG2E);
    if (scoreMod)
      v = sem.applyScoreMod(b, loc, v,
                            {batch, rowHead(r), row[r], key, nq, nk},
                            args.modOperands, M_LOG2E);
    return v;
  });
}

SmallVector<Value>
AttentionKernelBuilder::maskScoresWhereNeeded(SmallVector<Value> x, Value k0) {
  if (args.mask)
    return maskScores(x, k0);
  // Only the tile holding kv_end, the tiles crossing the causal diagonal of
  // this warp's 16 rows and those the window or the chunk cut need masking
  // (with segments: every tile).
  AttentionSemantics::QueryRange warpQueries =
      queriesOfRows(add(q0, warpRow0), cIdx(16));
  Value need = sem.tileNeedsElementMask(
      b, loc, k0, cIdx(tiles.blockKV), kvEnd, warpQueries.q0, diag,
      warpQueries.count, qSegRange && tileKSegRange ? &*qSegRange : nullptr,
      tileKSegRange ? &*tileKSegRange : nullptr, tileMaskModPartial);
  SmallVector<Type> types =
      llvm::to_vector(llvm::map_range(x, [](Value v) { return v.getType(); }));
  auto ifOp = scf::IfOp::create(b, loc, types, need, /*withElse=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, loc, maskScores(x, k0));
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, loc, x);
  }
  x.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  return x;
}

void AttentionKernelBuilder::updateRowMax(Value mx, Value mOld, Value ninf,
                                          Value zeroF, Value &mNew, Value &mUse,
                                          Value &alpha) {
  mx = arith::MaximumFOp::create(b, loc, mx, shuffleXor(mx, 1));
  mx = arith::MaximumFOp::create(b, loc, mx, shuffleXor(mx, 2));
  mNew = arith::MaximumFOp::create(b, loc, mOld, mx);
  // An all-masked row so far keeps m = -inf: exp2 against 0 instead.
  Value isInf =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, ninf);
  mUse = arith::SelectOp::create(b, loc, isInf, zeroF, mNew);
  alpha = ex2(arith::SubFOp::create(b, loc, mOld, mUse));
}

std::pair<Value, Value>
AttentionKernelBuilder::clampCopyRow(Value row0, Value r, Value rowEnd,
                                     Value last, Value eight, Value zero) {
  Value row = add(row0, r);
  Value inside = cmp(arith::CmpIPredicate::slt, row, rowEnd);
  if (copyKeep)
    inside = arith::AndIOp::create(b, loc, inside, copyKeep);
  // Every address stays inside the tensor; rows past the end read 0
  // bytes and are zero-filled.
  Value rowC = arith::MinSIOp::create(b, loc, row, last);
  Value nsrc = arith::SelectOp::create(b, loc, inside, eight, zero);
  return {rowC, nsrc};
}

Value AttentionKernelBuilder::copyChunk(Value dst, ValueRange dstIdx, Value src,
                                        Value srcHead, Value row, Value col,
                                        Value bytes) {
  SmallVector<Value> srcIdx = {batch, srcHead, row, col};
  // The varlen form: token-major rows from the sequence's first.
  if (args.cuSeqlensQ)
    srcIdx = {add(src == args.q ? qStart : kStart, row), srcHead, col};
  // A paged cache: key `row` is a row of its page, through the block table
  // (the entry clamped into the cache).
  if (args.blockTable && (src == args.k || src == args.v)) {
    AttentionSemantics::PagedRow at = AttentionSemantics::pagedKeyRow(
        b, loc, args.blockTable, src, op.getPageSize(), batch, row);
    srcIdx = {at.page, at.row, srcHead, col};
  }
  auto copy = nvgpu::DeviceAsyncCopyOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(ctx), dst, dstIdx, src,
      srcIdx, b.getIndexAttr(8), bytes, b.getUnitAttr());
  return copy.getAsyncToken();
}

SmallVector<Value> AttentionKernelBuilder::outputIndex(const OutputRow &row,
                                                      Value col) {
  if (args.cuSeqlensQ)
    return {add(qStart, row.query), row.head, col};
  if (isSplit())
    return {part, batch, row.head, row.query, col};
  return {batch, row.head, row.query, col};
}

Type AttentionKernelBuilder::storedOutputType() const {
  return isSplit() ? Type(Float32Type::get(ctx)) : oElt;
}

Value AttentionKernelBuilder::copyKVTile(Value j, Value slot,
                                         SmallVector<Value> extraTokens) {
  Value k0 = tileStart(j);
  SmallVector<Value> tokens = std::move(extraTokens);
  // A tile the block mask or the segment ids skip is zero-filled without
  // reading K/V.
  copyKeep = tileVisited(k0);
  tileMaskModPartial = Value();
  tileKSegRange.reset();
  copyTile(args.k, kvHead, k0, copyEnd, tiles.blockKV, tiles.headDim, ks, slot,
           tokens);
  copyTile(args.v, kvHead, k0, copyEnd, tiles.blockKV, tiles.valueDim, vs,
           slot, tokens);
  copyKeep = Value();
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(ctx), tokens);
}

ValueRange AttentionKernelBuilder::emitMainLoop(ValueRange init) {
  SmallVector<Type> stateTypes = llvm::to_vector(
      llvm::map_range(init, [](Value v) { return v.getType(); }));
  Value any = cmp(arith::CmpIPredicate::sgt, numKV, zeroIdx);
  auto work = scf::IfOp::create(b, loc, stateTypes, any, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&work.getElseRegion().front());
  scf::YieldOp::create(b, loc, init);

  b.setInsertionPointToStart(&work.getThenRegion().front());
  // Prologue: Q with K/V tile 0 as one group, then tiles 1 .. stages - 2.
  SmallVector<Value> qTokens;
  // With packed heads each Q row is of its own head (a null source head).
  copyTile(args.q, packed ? Value() : head, q0, nRows, tiles.blockQ,
           tiles.headDim, qs, ValueRange{}, qTokens);
  Value first = copyKVTile(cIdx(0), cIdx(0), qTokens);
  for (int64_t st = 1; st < tiles.stages - 1; ++st)
    copyKVTile(cIdx(st), cIdx(st));

  auto loop = scf::ForOp::create(
      b, loc, zeroIdx, numKV, cIdx(1), init,
      [&](OpBuilder &lb, Location, Value j, ValueRange state) {
        OpBuilder::InsertionGuard inner(b);
        b.setInsertionPoint(lb.getInsertionBlock(), lb.getInsertionPoint());
        // Tile j has landed (this thread's copies), then every thread's
        // copies are visible and every warp is done with tile j - 1,
        // whose slot the next copy overwrites.
        nvgpu::DeviceAsyncWaitOp::create(b, loc, first,
                                         b.getI32IntegerAttr(tiles.stages - 2));
        Value fromBarrier = beforeTileBarrier(j);
        gpu::BarrierOp::create(b, loc);
        Value ahead = addC(j, tiles.stages - 1);
        copyKVTile(ahead,
                   arith::RemUIOp::create(b, loc, ahead, cIdx(tiles.stages)));
        // A tile the block mask marks empty or whose keys share no document
        // with the block's rows is not computed (the condition is
        // block-uniform); a full one skips the mask_mod.
        Value visited = tileVisited(tileStart(j));
        if (!visited) {
          scf::YieldOp::create(b, loc, tileUpdate(j, state, fromBarrier));
          return;
        }
        auto ifOp = scf::IfOp::create(b, loc, stateTypes, visited,
                                      /*withElse=*/true);
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(&ifOp.getThenRegion().front());
          scf::YieldOp::create(b, loc, tileUpdate(j, state, fromBarrier));
          b.setInsertionPointToStart(&ifOp.getElseRegion().front());
          scf::YieldOp::create(b, loc, state);
        }
        tileMaskModPartial = Value();
        tileKSegRange.reset();
        scf::YieldOp::create(b, loc, ifOp.getResults());
      });
  // Drain the (zero-filling) copies still in flight.
  nvgpu::DeviceAsyncWaitOp::create(b, loc, first, b.getI32IntegerAttr(0));
  scf::YieldOp::create(b, loc, loop.getResults());
  return work.getResults();
}

void AttentionKernelBuilder::reduceRowSums(Value (&l)[2], Value (&empty)[2],
                                           Value (&inv)[2]) {
  Value zeroF = cF32(0.0f), oneF = cF32(1.0f);
  for (int r = 0; r < 2; ++r) {
    l[r] = arith::AddFOp::create(b, loc, l[r], shuffleXor(l[r], 1));
    l[r] = arith::AddFOp::create(b, loc, l[r], shuffleXor(l[r], 2));
    // A row without any attended key: O = 0 exactly.
    empty[r] =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l[r], zeroF);
    inv[r] = arith::SelectOp::create(b, loc, empty[r], zeroF,
                                     arith::DivFOp::create(b, loc, oneF, l[r]));
  }
}

AttentionKernelBuilder::OutputRow
AttentionKernelBuilder::beginOutputRow(int64_t r, Value m, Value l,
                                       Value empty) {
  OutputRow out;
  out.row = rowIndex(r);
  out.inRows = cmp(arith::CmpIPredicate::slt, out.row, nRows);
  out.query = packed ? packedQuery[r] : out.row;
  out.head = rowHead(r);
  if (args.lse || isSplit()) {
    // LSE = ln 2 * (m + log2 l), natural log; -inf for an empty row.
    Value lg = LLVM::CallIntrinsicOp::create(
                   b, loc, Type(b.getF32Type()),
                   b.getStringAttr("llvm.nvvm.lg2.approx.f"), ValueRange{l})
                   .getResult(0);
    Value lse =
        arith::MulFOp::create(b, loc, arith::AddFOp::create(b, loc, m, lg),
                              cF32(static_cast<float>(M_LN2)));
    out.lse = arith::SelectOp::create(
        b, loc, empty, cF32(-std::numeric_limits<float>::infinity()), lse);
  }
  return out;
}

void AttentionKernelBuilder::storeOutputRow(const OutputRow &row,
                                            Value quadLead,
                                            function_ref<void()> storeO) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, row.inRows,
                                /*withElse=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  storeO();
  if (args.lse || isSplit()) {
    auto lseIf = scf::IfOp::create(b, loc, TypeRange{}, quadLead,
                                   /*withElse=*/false);
    b.setInsertionPointToStart(&lseIf.getThenRegion().front());
    // LSE [B, Hq, Nq], or [Hq, Tq] for the varlen form; every part's LSE
    // [S, B, Hq, Nq] with split-KV.
    SmallVector<Value> at = {batch, row.head, row.query};
    if (args.cuSeqlensQ)
      at = {row.head, add(qStart, row.query)};
    if (isSplit()) {
      at.insert(at.begin(), part);
      memref::StoreOp::create(b, loc, row.lse, args.partialLse, at);
    } else {
      memref::StoreOp::create(b, loc, row.lse, args.lse, at);
    }
  }
}
