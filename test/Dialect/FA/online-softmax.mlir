// RUN: fa-opt %s -split-input-file -fa-online-softmax="tile-size=64 vector-width=0" | FileCheck %s
// RUN: fa-opt %s -split-input-file -fa-online-softmax="tile-size=40" | FileCheck %s --check-prefix=VEC
// RUN: not fa-opt %s -fa-online-softmax="vector-width=-1" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: fa-online-softmax: vector-width must be 0 (scalar) or positive, got -1

// Vectorized (softmax dim innermost): tiles rounded up to whole vectors
// (40 -> 48 = 3 x 16). Sweep 1 over the full tiles reads in bounds and
// keeps the max and the sum per lane, rescaling the sum by
// exp(m_old - m_new) per lane (a polynomial: multiply-adds and exponent bits);
// a masked tail tile follows; the lanes are combined once. Sweep 2 writes
// exp(x - M) * (1 / L) a vector at a time, then a masked tail vector.
// VEC-LABEL: func.func @rows
//       VEC:   scf.forall
//       VEC:     %[[N:.*]] = tensor.dim
//       VEC:     %[[FULL:.*]] = arith.divui %[[N]], %c48
//       VEC:     %[[SW:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %[[FULL]] {{.*}} -> (vector<16xf32>, vector<16xf32>) {
//       VEC:       vector.transfer_read {{.*}} {in_bounds = [true]} : tensor<?xf32>, vector<16xf32>
//       VEC:       vector.transfer_read {{.*}} {in_bounds = [true]} : tensor<?xf32>, vector<16xf32>
//       VEC:       vector.transfer_read {{.*}} {in_bounds = [true]} : tensor<?xf32>, vector<16xf32>
//   VEC-NOT:       vector.transfer_read
//       VEC:       arith.maximumf
//       VEC:       arith.shli
//   VEC-NOT:       math.exp
//       VEC:       scf.yield
//       VEC:     %[[TAIL:.*]]:2 = scf.if
//       VEC:       vector.transfer_read %{{.*}}[%{{.*}}], %{{.*}} : tensor<?xf32>, vector<16xf32>
//       VEC:     %[[M:.*]] = vector.reduction <maximumf>, %[[TAIL]]#0
//       VEC:     %[[L:.*]] = vector.reduction <add>
//       VEC:     %[[EMPTY:.*]] = arith.cmpf oeq, %[[L]]
//       VEC:     %[[INV:.*]] = arith.divf %{{.*}}, %[[L]]
//       VEC:     arith.select %[[EMPTY]], %{{.*}}, %[[INV]]
//       VEC:     scf.for {{.*}} -> (tensor<?xf32>) {
//       VEC:       vector.transfer_read {{.*}} {in_bounds = [true]}
//       VEC:       arith.shli
//       VEC:       vector.transfer_write {{.*}} {in_bounds = [true]} : vector<16xf32>, tensor<?xf32>
//       VEC:     scf.if
//       VEC:       vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}] : vector<16xf32>, tensor<?xf32>
//       VEC:     scf.forall.in_parallel
//       VEC:       tensor.parallel_insert_slice

// Softmax along a middle dim keeps the scalar form.
// VEC-LABEL: func.func @middle_dim_f16
//   VEC-NOT:   vector.transfer_read
//       VEC:   linalg.generic
// VEC-LABEL: func.func @one_row
//       VEC:   vector.transfer_read

// Softmax over the last dim: one row per forall iteration; sweep 1 keeps a
// running max and a running sum rescaled by exp(m_old - m_new); sweep 2
// writes exp(x - m) / l straight into the destination row, with l == 0 (a
// row of -inf) giving 0.
// CHECK-LABEL: func.func @rows
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<4x?xf32>, %[[Y:[a-z0-9]+]]: tensor<4x?xf32>)
//       CHECK:   scf.forall (%[[R:.*]]) in (4) shared_outs(%[[YS:.*]] = %[[Y]])
//       CHECK:     %[[N:.*]] = tensor.dim %[[X]]
//       CHECK:     %[[ROW:.*]] = tensor.extract_slice %[[X]][%[[R]], 0] [1, %[[N]]] [1, 1] : tensor<4x?xf32> to tensor<?xf32>
//       CHECK:     %[[NT:.*]] = arith.ceildivui %[[N]], %c64
//       CHECK:     %[[SW:.*]]:2 = scf.for %[[T:.*]] = %{{.*}} to %[[NT]] step %{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}) -> (f32, f32)
//       CHECK:       %[[T0:.*]] = arith.muli %[[T]], %c64
//       CHECK:       %[[TN:.*]] = arith.minsi %c64
//       CHECK:       %[[TILE:.*]] = tensor.extract_slice %[[ROW]][%[[T0]]] [%[[TN]]] [1]
//       CHECK:       linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}} ins(%[[TILE]]
//       CHECK:         arith.maximumf
//       CHECK:       %[[TMAX:.*]] = tensor.extract
//       CHECK:       %[[MNEW:.*]] = arith.maximumf %[[M]], %[[TMAX]] : f32
//       CHECK:       %[[ISINF:.*]] = arith.cmpf oeq, %[[MNEW]]
//       CHECK:       %[[MUSE:.*]] = arith.select %[[ISINF]], %{{.*}}, %[[MNEW]]
//       CHECK:       linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}} ins(%[[TILE]]
//       CHECK:         arith.subf %{{.*}}, %[[MUSE]]
//       CHECK:         math.exp
//       CHECK:         arith.addf
//       CHECK:       %[[TSUM:.*]] = tensor.extract
//       CHECK:       %[[D:.*]] = arith.subf %[[M]], %[[MUSE]] : f32
//       CHECK:       %[[ALPHA:.*]] = math.exp %[[D]] : f32
//       CHECK:       %[[LS:.*]] = arith.mulf %[[L]], %[[ALPHA]] : f32
//       CHECK:       %[[LNEW:.*]] = arith.addf %[[LS]], %[[TSUM]] : f32
//       CHECK:       scf.yield %[[MNEW]], %[[LNEW]] : f32, f32
//       CHECK:     %[[YROW:.*]] = tensor.extract_slice %[[YS]][%[[R]], 0] [1, %[[N]]] [1, 1]
//       CHECK:     %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[ROW]] : tensor<?xf32>) outs(%[[YROW]] : tensor<?xf32>)
//       CHECK:       math.exp
//       CHECK:       %[[EMPTY:.*]] = arith.cmpf oeq, %[[SW]]#1
//       CHECK:       %[[Q:.*]] = arith.divf %{{.*}}, %[[SW]]#1
//       CHECK:       arith.select %[[EMPTY]], %{{.*}}, %[[Q]]
//       CHECK:     scf.forall.in_parallel
//       CHECK:       tensor.parallel_insert_slice %[[OUT]] into %[[YS]][%[[R]], 0] [1, %[[N]]] [1, 1]
func.func @rows(%x: tensor<4x?xf32>, %y: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %r = fa.softmax ins(%x : tensor<4x?xf32>) outs(%y : tensor<4x?xf32>) dimension(1) -> tensor<4x?xf32>
  return %r : tensor<4x?xf32>
}

// -----

// Softmax along the middle dim of a 3-d f16 tensor: the forall runs over
// the other two dims; values are extended to f32 and the result truncated.
// CHECK-LABEL: func.func @middle_dim_f16
//       CHECK:   scf.forall (%[[I:.*]], %[[K:.*]]) in (2, 5)
//       CHECK:     tensor.extract_slice %{{.*}}[%[[I]], 0, %[[K]]] [1, 300, 1] [1, 1, 1] : tensor<2x300x5xf16> to tensor<300xf16>
//       CHECK:     scf.for
//       CHECK:       arith.extf %{{.*}} : f16 to f32
//       CHECK:     linalg.generic
//       CHECK:       arith.truncf %{{.*}} : f32 to f16
func.func @middle_dim_f16(%x: tensor<2x300x5xf16>) -> tensor<2x300x5xf16> {
  %r = fa.softmax ins(%x : tensor<2x300x5xf16>) outs(%x : tensor<2x300x5xf16>) dimension(1) -> tensor<2x300x5xf16>
  return %r : tensor<2x300x5xf16>
}

// -----

// A 1-d input is a single row.
// CHECK-LABEL: func.func @one_row
//       CHECK:   scf.forall (%{{.*}}) in (1)
//       CHECK:     tensor.extract_slice %{{.*}}[0] [%{{.*}}] [1] : tensor<?xf32> to tensor<?xf32>
func.func @one_row(%x: tensor<?xf32>) -> tensor<?xf32> {
  %r = fa.softmax ins(%x : tensor<?xf32>) outs(%x : tensor<?xf32>) dimension(0) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
