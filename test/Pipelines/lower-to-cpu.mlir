// fa-lower-to-cpu takes a kernel whose arguments are memrefs (wrapped with
// bufferization.to_tensor / materialize_in_destination) to the LLVM dialect
// only, with no runtime-library calls beyond malloc/free.
// DEFINE: %{only_llvm} = --implicit-check-not=" fa." --implicit-check-not="scf." --implicit-check-not="linalg." --implicit-check-not="tensor." --implicit-check-not="bufferization." --implicit-check-not="memref." --implicit-check-not="memrefCopy"
// RUN: fa-opt %s -fa-lower-to-cpu="block-q=16 block-kv=32 cpu-kernel=tiled vector-width=0" | FileCheck %s %{only_llvm}
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s %{only_llvm} --check-prefix=VEC
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s --check-prefix=NOLIBM --implicit-check-not="llvm.intr.fma(" --implicit-check-not="llvm.intr.floor" --implicit-check-not="llvm.intr.exp"
// RUN: fa-opt %s -fa-lower-to-cpu="vector-width=8" | FileCheck %s %{only_llvm} --check-prefix=AVX2
// RUN: not fa-opt %s -fa-lower-to-cpu="cpu-kernel=blocked" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: fa-opt %s -fa-lower-to-cpu="reference=true" | FileCheck %s %{only_llvm}
// RUN: fa-opt %s -fa-lower-to-cpu | FileCheck %s --check-prefix=NOCOPY
// RUN: fa-opt %s -fa-lower-to-cpu="parallel=true" | FileCheck %s --check-prefix=OMP
// RUN: fa-opt %s -fa-lower-to-cpu="parallel=true promoted=true" | FileCheck %s --check-prefix=SEQ

// parallel=true: the (batch, head, query tile) loop becomes an OpenMP
// worksharing loop; the promoted form stays sequential.
// OMP-LABEL: llvm.func @fa_kernel(
// OMP:       omp.parallel
// OMP:       omp.wsloop
// OMP:       omp.loop_nest
// SEQ-NOT:   omp.

// CHECK:     llvm.func @fa_kernel(
// CHECK:     llvm.intr.exp
// CHECK:     llvm.func @_mlir_ciface_fa_kernel(

// The default: the vector kernel (fa-cpu-attention) and the vectorized
// softmax, with a polynomial exp (no llvm.intr.exp, which would become one
// libm call per lane: integer exponent bits, contractible multiply-adds, no
// llvm.intr.fma/floor, which are libm calls on targets without FMA or
// SSE4.1) and FMAs on 16-lane vectors.
// NOLIBM: llvm.func @fa_kernel(
// VEC-LABEL: llvm.func @fa_kernel(
// VEC-NOT:   llvm.intr.exp
// VEC:       llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// VEC:       llvm.bitcast {{.*}} : vector<16xf32> to vector<16xi32>
// VEC-LABEL: llvm.func @softmax(
// VEC-NOT:   llvm.intr.exp
// VEC:       llvm.intr.masked.load
// VEC:       llvm.bitcast {{.*}} : vector<16xf32> to vector<16xi32>
// VEC:       llvm.intr.vector.reduce.fmaximum
// AVX2 (vector-width=8, 16 vector registers): 2 keys x 4 query vectors of
// accumulators in the S micro-kernel, 2 rows x 4 vectors in P V.
// AVX2-LABEL: llvm.func @fa_kernel(
// AVX2:       llvm.intr.fmuladd({{.*}}) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// AVX2:       ^bb{{[0-9]+}}(%{{[0-9]+}}: i64, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>, %{{[0-9]+}}: vector<8xf32>):
// BAD: error: fa-lower-to-cpu: cpu-kernel must be 'vector' or 'tiled', got 'blocked'
// NOCOPY-NOT: memrefCopy

func.func @fa_kernel(%q: memref<?x4x?x40xf16>, %k: memref<?x2x?x40xf16>, %v: memref<?x2x?x40xf16>,
                     %lens: memref<?xi32>, %mask: memref<1x1x?x?xf32>,
                     %o: memref<?x4x?x40xf16>, %lse: memref<?x4x?xf32>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<?x4x?x40xf16> to tensor<?x4x?x40xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x2x?x40xf16> to tensor<?x2x?x40xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x2x?x40xf16> to tensor<?x2x?x40xf16>
  %lt = bufferization.to_tensor %lens restrict : memref<?xi32> to tensor<?xi32>
  %mt = bufferization.to_tensor %mask restrict : memref<1x1x?x?xf32> to tensor<1x1x?x?xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<?x4x?x40xf16> to tensor<?x4x?x40xf16>
  %st = bufferization.to_tensor %lse restrict writable : memref<?x4x?xf32> to tensor<?x4x?xf32>
  %r:2 = fa.attention ins(%qt, %kt, %vt : tensor<?x4x?x40xf16>, tensor<?x2x?x40xf16>, tensor<?x2x?x40xf16>)
           kv_lens(%lt : tensor<?xi32>) mask(%mt : tensor<1x1x?x?xf32>)
           outs(%ot : tensor<?x4x?x40xf16>, %st : tensor<?x4x?xf32>) causal(bottom_right)
           -> tensor<?x4x?x40xf16>, tensor<?x4x?xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<?x4x?x40xf16>, memref<?x4x?x40xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<?x4x?xf32>, memref<?x4x?xf32>) -> ()
  return
}

func.func @softmax(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {llvm.emit_c_interface} {
  %xt = bufferization.to_tensor %x restrict : memref<?x?xf32> to tensor<?x?xf32>
  %yt = bufferization.to_tensor %y restrict writable : memref<?x?xf32> to tensor<?x?xf32>
  %r = fa.softmax ins(%xt : tensor<?x?xf32>) outs(%yt : tensor<?x?xf32>) dimension(1) -> tensor<?x?xf32>
  bufferization.materialize_in_destination %r in restrict writable %y : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  return
}
