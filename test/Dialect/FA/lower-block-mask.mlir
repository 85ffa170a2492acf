// RUN: fa-opt %s -fa-lower-block-mask | FileCheck %s

// fa.create_block_mask: one generic over (b, h, query tile, key tile, row,
// key) reducing "some kept" (or) and "all kept" (and) over the in-range
// pairs (q < Nq and k < Nk) of the inlined mask_mod, which reads its table
// through tensor.extract; then 0 / 1 / 2 as i8.
// CHECK-LABEL: func.func @bm
//  CHECK-SAME:   (%[[N:.*]]: index, %[[T:.*]]: tensor<40xi32>)
//   CHECK-DAG:   %[[TQ:.*]] = arith.ceildivui %[[N]], %c8
//   CHECK-DAG:   %[[TK:.*]] = arith.ceildivui %[[N]], %c16
//       CHECK:   %[[ANY:.*]] = linalg.fill ins(%false : i1) outs(%{{.*}} : tensor<2x1x?x?xi1>)
//       CHECK:   %[[ALL:.*]] = linalg.fill ins(%true : i1) outs(%{{.*}} : tensor<2x1x?x?xi1>)
//       CHECK:   %[[SHAPE:.*]] = tensor.empty() : tensor<8x16xi1>
//       CHECK:   %[[R:.*]]:2 = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]{{.*}} ins(%[[SHAPE]] : tensor<8x16xi1>) outs(%[[ANY]], %[[ALL]] :
//       CHECK:     %[[INQ:.*]] = arith.cmpi slt, %{{.*}}, %[[N]] : index
//       CHECK:     tensor.extract %[[T]][%{{.*}}] : tensor<40xi32>
//       CHECK:     %[[SOME:.*]] = arith.ori %{{.*}}, %{{.*}} : i1
//       CHECK:     %[[EVERY:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
//       CHECK:     linalg.yield %[[SOME]], %[[EVERY]] : i1, i1
//       CHECK:   linalg.generic {{.*}} ins(%[[R]]#0, %[[R]]#1 : tensor<2x1x?x?xi1>, tensor<2x1x?x?xi1>) outs(%{{.*}} : tensor<2x1x?x?xi8>)
//       CHECK:     %[[P:.*]] = arith.select %{{.*}}, %c2_i8, %c1_i8 : i8
//       CHECK:     %[[E:.*]] = arith.select %{{.*}}, %[[P]], %c0_i8 : i8
//       CHECK:     linalg.yield %[[E]] : i8
//   CHECK-NOT:   fa.create_block_mask
func.func @bm(%n: index, %t: tensor<40xi32>) -> tensor<2x1x?x?xi8> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %bm = fa.create_block_mask sizes(%c2, %c1, %n, %n) mod_operands(%t : tensor<40xi32>) tiles(8, 16) mask_mod {
  ^bb0(%b: index, %h: index, %q: index, %k: index, %tb: tensor<40xi32>):
    %p = tensor.extract %tb[%q] : tensor<40xi32>
    %ki = arith.index_cast %k : index to i32
    %keep = arith.cmpi slt, %ki, %p : i32
    fa.yield %keep : i1
  } -> tensor<2x1x?x?xi8>
  return %bm : tensor<2x1x?x?xi8>
}
