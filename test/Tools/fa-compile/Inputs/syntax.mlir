func.func @broken(
