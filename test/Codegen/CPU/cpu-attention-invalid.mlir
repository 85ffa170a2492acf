// RUN: fa-opt %s -split-input-file -fa-cpu-attention="require-kernel-form=true" -verify-diagnostics
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="block-q=40" 2>&1 | FileCheck %s --check-prefix=BQ
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="block-q=-16" 2>&1 | FileCheck %s --check-prefix=BQNEG
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="key-rows=0" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="pv-vectors=-1" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="block-kv=-64" 2>&1 | FileCheck %s --check-prefix=BKV
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="l2-cache-size=-1" 2>&1 | FileCheck %s --check-prefix=L2
// RUN: not fa-opt %s -split-input-file -fa-lower-to-cpu="cpu-block-q=24" 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="kv-splits=-2" 2>&1 | FileCheck %s --check-prefix=SPLITS
// RUN: not fa-opt %s -split-input-file -fa-cpu-attention="l1-cache-size=-1" 2>&1 | FileCheck %s --check-prefix=L1

// BQ: error: fa-cpu-attention: block-q must be 0 (automatic) or a positive multiple of vector-width (16) and of pv-rows (4), got 40
// BQNEG: error: fa-cpu-attention: block-q must be 0 (automatic) or a positive multiple of vector-width (16) and of pv-rows (4), got -16
// ROWS: error: fa-cpu-attention: vector-width, key-rows and pv-rows must be positive, pv-vectors positive or 0 (automatic)
// BKV: error: fa-cpu-attention: block-kv and l2-cache-size must not be negative (0: automatic), got -64 and 0
// L2: error: fa-cpu-attention: block-kv and l2-cache-size must not be negative (0: automatic), got 0 and -1
// PIPE: error: fa-cpu-attention: block-q must be 0 (automatic) or a positive multiple of vector-width (16) and of pv-rows (4), got 24
// SPLITS: error: fa-cpu-attention: kv-splits must be 0 (automatic) or positive, got -2
// L1: error: fa-cpu-attention: l1-cache-size must not be negative (0: unknown), got -1

// Tensor arguments are not the kernel form.
func.func @tensors(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x8x16xf32>, %v: tensor<1x1x8x16xf32>, %o: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  // expected-error @+1 {{fa-cpu-attention: operands must come from memref arguments through bufferization.to_tensor and results go to memrefs through bufferization.materialize_in_destination (the kernel form: examples/kernel-form.mlir shows it}}
  %r = fa.attention ins(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
           outs(%o : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}

// -----

// A result that is also used by something else than its materialization.
func.func @extra_use(%q: memref<1x1x8x16xf32>, %k: memref<1x1x8x16xf32>, %v: memref<1x1x8x16xf32>, %o: memref<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x8x16xf32> to tensor<1x1x8x16xf32>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x8x16xf32> to tensor<1x1x8x16xf32>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x8x16xf32> to tensor<1x1x8x16xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x1x8x16xf32> to tensor<1x1x8x16xf32>
  // expected-error @+1 {{fa-cpu-attention: a result is used by 'func.return'; expected only materialize_in_destination}}
  %r = fa.attention ins(%qt, %kt, %vt : tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>)
           outs(%ot : tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x1x8x16xf32>, memref<1x1x8x16xf32>) -> ()
  return %r : tensor<1x1x8x16xf32>
}
