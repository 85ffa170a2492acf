// A @score_mod without the key index (fa-run --mods error path).
func.func @score_mod(%s: f32, %b: index, %h: index, %q: index) -> f32 {
  return %s : f32
}
