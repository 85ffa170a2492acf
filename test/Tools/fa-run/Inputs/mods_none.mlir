// No modifier function at all.
func.func @other(%s: f32) -> f32 {
  return %s : f32
}
