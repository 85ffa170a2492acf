// RUN: fa-opt %s -split-input-file -pass-pipeline='builtin.module(gpu.module(fa-extern-dynamic-shared))' | FileCheck %s

// What gpu.dynamic_shared_memory lowers to becomes an external declaration;
// every other global keeps its linkage.
// CHECK-LABEL: gpu.module @kernels
// CHECK-DAG: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global internal @static_tile() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<64 x f32>
// CHECK-DAG: llvm.mlir.global internal @zero_size_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global internal constant @init_shared(dense<0> : tensor<0xi8>) {addr_space = 3 : i32} : !llvm.array<0 x i8>
gpu.module @kernels {
  llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.mlir.global internal @static_tile() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<64 x f32>
  llvm.mlir.global internal @zero_size_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
  llvm.mlir.global internal constant @init_shared(dense<0> : tensor<0xi8>) {addr_space = 3 : i32} : !llvm.array<0 x i8>
  llvm.func @kernel() attributes {nvvm.kernel} {
    %0 = llvm.mlir.addressof @__dynamic_shmem__0 : !llvm.ptr<3>
    llvm.return
  }
}

// -----

// Globals outside a GPU module are not visited.
// CHECK-LABEL: module
// CHECK: llvm.mlir.global internal @__dynamic_shmem__0()
llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
