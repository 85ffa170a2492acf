// fa-opt rejects malformed input with a diagnostic and a non-zero exit, never
// a crash or a stack dump.

// Random garbage.
// RUN: not fa-opt %S/Inputs/garbage.txt 2>&1 | FileCheck %s --check-prefix=GARBAGE
// GARBAGE: error:
// GARBAGE-NOT: Stack dump
// GARBAGE-NOT: PLEASE submit a bug report

// Every prefix of a valid fa.attention line, cut mid-token.
// RUN: head -c 40 %s.input > %t.cut0.mlir
// RUN: not fa-opt %t.cut0.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: head -c 120 %s.input > %t.cut1.mlir
// RUN: not fa-opt %t.cut1.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: head -c 200 %s.input > %t.cut2.mlir
// RUN: not fa-opt %t.cut2.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: head -c 260 %s.input > %t.cut3.mlir
// RUN: not fa-opt %t.cut3.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: head -c 300 %s.input > %t.cut4.mlir
// RUN: not fa-opt %t.cut4.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: head -c 340 %s.input > %t.cut5.mlir
// RUN: not fa-opt %t.cut5.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: head -c 366 %s.input > %t.cut6.mlir
// RUN: not fa-opt %t.cut6.mlir 2>&1 | FileCheck %s --check-prefix=TRUNC
// TRUNC: error:
// TRUNC-NOT: Stack dump

// An unknown attribute and an unknown op.
// RUN: not fa-opt %S/Inputs/unknown.mlir 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: custom op 'fa.flash' is unknown
// UNKNOWN-NOT: Stack dump

// The complete input is valid (so the truncations above are what fails).
// RUN: fa-opt %s.input | FileCheck %s --check-prefix=FULL
// FULL: fa.attention
