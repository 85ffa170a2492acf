// A relative-position bias read from a [Hq, 63] table (fa-run --mods).
func.func @score_mod(%s: f32, %b: index, %h: index, %q: index, %k: index, %t: tensor<4x63xf32>) -> f32 {
  %c31 = arith.constant 31 : index
  %d = arith.subi %k, %q : index
  %i = arith.addi %d, %c31 : index
  %x = tensor.extract %t[%h, %i] : tensor<4x63xf32>
  %r = arith.addf %s, %x : f32
  return %r : f32
}
