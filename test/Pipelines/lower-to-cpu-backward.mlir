// RUN: fa-opt %s --fa-lower-to-cpu | FileCheck %s
// RUN: fa-opt %s --fa-lower-to-cpu="parallel=true" | FileCheck %s --check-prefix=OMP

// fa-lower-to-cpu lowers fa.attention_backward (fa-tile-attention-backward)
// all the way to the LLVM dialect; with parallel=true the (batch, kv head)
// tasks run on OpenMP threads.
// CHECK-NOT: fa.attention_backward
// CHECK: llvm.func @bw(
// CHECK-NOT: fa.attention_backward
// OMP: omp.parallel
func.func @bw(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x8xf32>, %o: tensor<1x4x?x8xf32>, %lse: tensor<1x4x?xf32>, %do: tensor<1x4x?x8xf32>, %dq: tensor<1x4x?x16xf32>, %dk: tensor<1x2x?x16xf32>, %dv: tensor<1x2x?x8xf32>) -> (tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>) {
  %r:3 = fa.attention_backward ins(%q, %k, %v : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>) forward(%o, %lse : tensor<1x4x?x8xf32>, tensor<1x4x?xf32>) grad_output(%do : tensor<1x4x?x8xf32>) outs(%dq, %dk, %dv : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>) causal(bottom_right) softcap(20.0) -> tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
  return %r#0, %r#1, %r#2 : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
}
