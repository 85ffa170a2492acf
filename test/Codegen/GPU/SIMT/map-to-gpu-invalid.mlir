// RUN: fa-opt %s -split-input-file -fa-map-to-gpu -verify-diagnostics

// Without fa-promote-shared's configuration the block forall is not mapped.
// expected-error @+1 {{fa-map-to-gpu: missing 'fa.gpu_config' (run fa-promote-shared first)}}
func.func @no_config(%m: memref<4xf32>) {
  scf.forall (%i, %j, %k) in (1, 1, 1) {
  } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
  return
}

// -----

// Only 32-lane vectors can be distributed over a warp.
func.func @wrong_vector(%m: memref<4xf32>) attributes {fa.gpu_config = {block_kv = 32 : index, block_q = 16 : index, threads = 128 : index}} {
  scf.forall (%i, %j, %k) in (1, 1, 1) {
    scf.forall (%w) in (4) {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : f32
      // expected-error @+1 {{fa-map-to-gpu: only vector<32xT> lane vectors can be distributed, got 'vector<4xf32>'}}
      %x = vector.transfer_read %m[%c0], %pad : memref<4xf32>, vector<4xf32>
    } {mapping = [#gpu.warp<x>]}
  } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
  return
}

// -----

// An op that has no lane-wise meaning is reported by name.
func.func @unsupported_op(%m: memref<32xf32>) attributes {fa.gpu_config = {block_kv = 32 : index, block_q = 16 : index, threads = 128 : index}} {
  scf.forall (%i, %j, %k) in (1, 1, 1) {
    scf.forall (%w) in (4) {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : f32
      // expected-error @+1 {{fa-map-to-gpu: cannot distribute 'vector.transfer_read' over the lanes of a warp}}
      %x = vector.transfer_read %m[%c0], %pad : memref<32xf32>, vector<32xf32>
    } {mapping = [#gpu.warp<x>]}
  } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
  return
}

// -----

// A thread forall must cover exactly the block's threads.
func.func @wrong_thread_count(%m: memref<32xf32>) attributes {fa.gpu_config = {block_kv = 32 : index, block_q = 16 : index, threads = 128 : index}} {
  scf.forall (%i, %j, %k) in (1, 1, 1) {
    // expected-error @+1 {{fa-map-to-gpu: expected a forall over the block's 128 threads mapped to #gpu.thread<x> or #gpu.warp<x>}}
    scf.forall (%t) in (64) {
    } {mapping = [#gpu.thread<x>]}
  } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
  return
}

// -----

// The kernels of one function are told apart by their block foralls'
// fa.kernel_suffix; two with the same name are refused, not overwritten.
// expected-error @+1 {{fa-map-to-gpu: two kernels named 'same_name_merge' in 'same_name_kernels'}}
func.func @same_name(%m: memref<32xf32>) attributes {fa.gpu_config = {block_kv = 32 : index, block_q = 16 : index, threads = 128 : index}} {
  scf.forall (%i, %j, %k) in (1, 1, 1) {
  } {fa.kernel_suffix = "_merge", mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
  scf.forall (%i, %j, %k) in (1, 1, 1) {
  } {fa.kernel_suffix = "_merge", mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
  return
}
