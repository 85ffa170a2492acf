func.func @nothing(%a: i32) -> i32 {
  return %a : i32
}
