//===- Interpreter.h - SIMT interpreter of gpu-level IR ---------*- C++ -*-===//
//
// Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Executes the GPU kernels fa-map-to-gpu produces (a `gpu.module` of
// `gpu.func` kernels over workgroup globals, launched by `gpu.launch_func`
// from a host `func.func`) on the CPU, walking the MLIR ops through the C++
// API, so that the very IR that becomes PTX is checked against a reference
// on machines without a GPU.
//
// Execution model:
//
// * One block at a time; the threads of the block run in lock step. Every
//   SSA value holds one value per thread (a vector one per element and
//   thread) and every op executes for all threads of an active set
//   together.
// * Divergence: `scf.if` runs its regions under complementary thread sets
//   (then first); `scf.for` with per-thread bounds iterates while any
//   thread of the set is in range, each thread keeping its own induction
//   variable and iter_args. Unstructured control flow (`cf.br`,
//   `cf.cond_br`) is supported in function bodies when every branch is
//   uniform across the active threads; a divergent branch is an error.
// * `gpu.barrier` requires every thread of the block to be active (a
//   barrier in divergent code is an error) and starts a new barrier
//   interval. `gpu.shuffle` (width 32) acts on the 32 lanes of each warp
//   with the PTX `shfl.sync` semantics and requires all of them active.
// * Tensor cores, from the PTX ISA's fragment definitions (all 32 lanes of
//   the warp active): `nvgpu.ldmatrix` (x1/x2/x4, .trans, f16/bf16; lanes
//   8i..8i+7 give the row addresses of matrix i, each row 16-byte aligned
//   and in bounds; lane l gets row l/4, columns 2(l%4)+{0,1}), and
//   `nvgpu.mma.sync` m16n8k16 / m16n8k8 with f16 or bf16 inputs and f32 or
//   f16 accumulators (g = lane/4, t = lane%4: a0,a1 row g cols 2t,2t+1;
//   a2,a3 row g+8; a4..a7 cols +8; b0,b1 k = 2t,2t+1 col g; b2,b3 k + 8;
//   c0,c1 row g cols 2t,2t+1; c2,c3 row g+8); products are exact in double,
//   accumulated in double and rounded once per element.
// * Async copies: `nvgpu.device_async_copy` reads its source when issued
//   (elements past srcElements are zero-filled) and stays pending per
//   thread until that thread's `device_async_wait {numGroups = N}` retires
//   its group (every group but the N most recently committed by
//   `device_async_create_group`; tokens are ignored, as in the PTX
//   lowering). Reading or writing an element of a pending copy is an error
//   naming both ops; the completion counts as a write by the copying
//   thread in the wait's barrier interval.
// * Dynamic shared memory (the launch's dynamicSharedMemorySize bytes) is a
//   byte buffer viewed through `memref.view`; `memref.subview` and
//   `memref.view` need thread-uniform operands.
// * Memory: global memrefs are host buffers with their descriptors;
//   workgroup globals and workgroup attributions are per-block buffers,
//   poisoned (NaN for floats) at the start of every block. Every index is
//   checked against the memref's sizes before any access; an out-of-bounds
//   index stops the run with an error naming the op, the memref, the index
//   and the thread.
// * Hopper warpgroup MMA (PTX ISA "asynchronous warpgroup level matrix
//   instructions"): `memref.extract_aligned_pointer_as_index` of a workgroup
//   memref gives its address in the block's shared window (static buffers
//   from 0x10 on, dynamic shared memory at
//   InterpreterOptions::dynamicSharedBase, 0x410 by default: 16-aligned
//   only); `!llvm.struct` values of scalars (llvm.mlir.undef / zero,
//   extractvalue, insertvalue, carried by scf.for / scf.if / cf.br), one
//   register slot per field. `nvvm.wgmma.mma_async` m64nNk16 (N a multiple
//   of 8 up to 256), f16 or bf16 inputs, f32 accumulator, A K-major, B
//   K-major (layoutB = col) or MN-major (layoutB = row), swizzle none, 32B,
//   64B or 128B, base offset 0: the 128 threads of a warpgroup (4 warps,
//   the first a multiple of 4) execute it together with identical
//   descriptors; the elements are read through the canonical layouts
//   (K-major: start + (mn/8) SBO + (mn%8) W + 2k; MN-major: start +
//   (mn/(W/2)) LBO + 2 (mn%(W/2)) + (k%8) W + (k/8) SBO, W the swizzle
//   width) with the swizzle applied to the absolute address (bits 4.. XOR
//   bits 7..), each from the shared allocation that holds the address (an
//   address outside all of them is an error). The result is computed at
//   issue (products exact, the k16 sum and the accumulator added in double
//   and rounded once to f32); it may feed further mma_asyncs but any other
//   read of it before a `nvvm.wgmma.wait.group.sync.aligned` retires its
//   group (`commit.group` closes groups) is an error, as is an mma_async
//   without a `wgmma.fence.aligned` since the thread's last wait. A wgmma
//   read of shared memory needs the writer (st.shared or a completed
//   cp.async: the generic proxy) to have run `nvvm.fence.proxy` (async or
//   async.shared::cta) after the write and a barrier after the fence; it is
//   otherwise an error. Writing an element that an mma_async read before a
//   wgmma.wait of its warpgroup retired that group is an error too.
//   `nvvm.barrier` with an id and a thread count is a barrier of the
//   threads that reach it together (the count must match; the race checks
//   treat it like a block barrier).
// * Floats are held as doubles with the exact value of their type; every
//   arithmetic result is rounded once to the op's type (correct rounding
//   for f16, bf16 and f32). `llvm.nvvm.ex2.approx.f32` and
//   `llvm.nvvm.lg2.approx.f` are emulated with exp2f and log2f.
// * An op outside the supported set is an error naming the op, reported
//   before anything runs.
//
// Checks (InterpreterOptions):
//
// * Races on workgroup memory: per element, the last writer and the barrier
//   interval of the write. Reading or writing an element that another
//   thread wrote in the same interval is a race (read-after-write,
//   write-after-write; two threads writing the same value included); so is
//   writing an element that a thread of another warp read in the same
//   interval (write-after-read across warps; within a warp the lock-step
//   order of a read before a write is kept). On global memory the
//   read-after-write and write-after-write rules hold within a block, and an
//   element written by one block and then read or written by another during
//   the same launch is a race too (global reads are tracked only in buffers
//   the kernel writes, and not across blocks before the first write).
// * Reads of workgroup memory that no thread of the block has written yet.
// * Optionally the threads of every memory op are visited in a seeded
//   random order.
//
// Errors are reported through the MLIR diagnostic engine at the op's
// location (races with a note at the other access).
//
//===----------------------------------------------------------------------===//

#ifndef FA_INTERPRETER_INTERPRETER_H
#define FA_INTERPRETER_INTERPRETER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace mlir {
namespace fa {

/// Options of the interpreter.
struct InterpreterOptions {
  /// Report races on workgroup memory (and between blocks on global
  /// memory); see the file comment.
  bool checkRaces = false;
  /// Report reads of workgroup memory not yet written in the block.
  bool checkUninitializedShared = true;
  /// Visit the threads of every memory op in a random order (seeded).
  bool shuffleMemoryOrder = false;
  uint64_t seed = 0;
  /// At most this many race and uninitialized-read reports are printed
  /// (each distinct pair of ops once); the rest are only counted.
  unsigned maxReports = 10;
  /// A block that executes more ops than this (summed over threads) is
  /// stopped with an error: a guard against runaway loops.
  uint64_t maxThreadOpsPerBlock = uint64_t(1) << 34;
  /// The shared-window byte address of dynamic shared memory (what
  /// memref.extract_aligned_pointer_as_index gives for it): a positive
  /// multiple of 16, deliberately not 1024-aligned by default so that a
  /// kernel assuming more alignment than CUDA guarantees is caught.
  int64_t dynamicSharedBase = 0x410;
};

/// A host buffer viewed as a memref: `data` holds `numElements` elements of
/// the memref's element type (f16 and bf16 as 16-bit patterns, i1 as one
/// byte, index as 8 bytes), addressed with offset, sizes and strides in
/// elements.
struct HostMemRef {
  /// Used in diagnostics, e.g. "Q" or "argument 3".
  std::string name;
  void *data = nullptr;
  int64_t numElements = 0;
  int64_t offset = 0;
  SmallVector<int64_t, 4> sizes;
  SmallVector<int64_t, 4> strides;
  /// When set, has numElements bytes; every element a store writes gets 1.
  uint8_t *writtenMask = nullptr;

  /// A dense row-major view of `sizes` over `data`.
  static HostMemRef getDense(std::string name, void *data,
                             ArrayRef<int64_t> sizes);
};

/// Counters of one run.
struct InterpreterStats {
  uint64_t launches = 0;
  uint64_t blocks = 0;
  /// Ops executed, counting each op once per execution (not per thread).
  uint64_t ops = 0;
  /// Ops executed summed over the active threads.
  uint64_t threadOps = 0;
  uint64_t barriers = 0;
  uint64_t races = 0;
  uint64_t uninitializedReads = 0;
};

class InterpreterImpl;

/// Runs host functions and kernels of one module. Not thread-safe.
class Interpreter {
public:
  Interpreter(ModuleOp module, InterpreterOptions options = {});
  ~Interpreter();

  /// Runs the host `func.func` named `name` on `args` (one per function
  /// argument; memrefs only). Each `gpu.launch_func` it reaches runs its
  /// kernel over the whole grid before the host continues. Fails, after
  /// reporting, on the first error (unsupported op, out-of-bounds access,
  /// barrier or shuffle in divergent code, ...) and, after the whole run, if
  /// any race or uninitialized read was found.
  LogicalResult runHostFunction(StringRef name, ArrayRef<HostMemRef> args);

  /// Runs the kernel `kernel` (a `gpu.func` with the `kernel` attribute)
  /// over `grid` blocks of `block` threads on `args` (one per kernel
  /// argument; memrefs only), with `dynamicSharedBytes` bytes of dynamic
  /// shared memory per block.
  LogicalResult runKernel(Operation *kernel, std::array<int64_t, 3> grid,
                          std::array<int64_t, 3> block,
                          ArrayRef<HostMemRef> args,
                          int64_t dynamicSharedBytes = 0);

  /// Checks that every op reachable from the host function `name` (and the
  /// kernels it launches) is supported, reporting the first that is not.
  LogicalResult verifySupported(StringRef name);

  const InterpreterStats &getStats() const;

private:
  std::unique_ptr<InterpreterImpl> impl;
};

} // namespace fa
} // namespace mlir

#endif // FA_INTERPRETER_INTERPRETER_H
