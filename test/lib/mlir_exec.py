# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Helpers of the raising and tiling numerics tests: embed NumPy arrays in an
MLIR module as constants, run the module through fa-opt passes and
mlir-runner, and read back the tensors it prints with printMemrefF32."""

import os
import re
import shutil
import subprocess

import numpy as np

MLIR_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
              np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8",
              np.dtype(np.int32): "i32",
              np.dtype(np.int64): "i64"}


def bf16_bits(array):
    """The bf16 bit patterns (uint16) of a float32 array: the top 16 bits of
    each f32, rounded to nearest, ties to even; NaN stays a (quiet) NaN."""
    x = np.ascontiguousarray(array, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    bits[nan] = (u[nan] >> 16).astype(np.uint16) | 0x0040
    return bits


def bf16_round(array):
    """`array` rounded to bf16 (nearest, ties to even), held in float32."""
    return (bf16_bits(array).astype(np.uint32) << 16).view(np.float32)


def tensor_type(shape, elt):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


def constant(name, array, elt=None):
    """`%name = arith.constant dense<"0x...">` holding `array`. With
    elt="bf16", `array` (float32) is stored rounded to bf16 (bf16_bits)."""
    array = np.ascontiguousarray(array)
    if elt == "bf16":
        payload = f'"0x{bf16_bits(array).tobytes().hex().upper()}"'
        return (f"    %{name} = arith.constant dense<{payload}>"
                f" : {tensor_type(array.shape, elt)}\n")
    elt = MLIR_TYPES[array.dtype]
    if array.dtype == np.bool_:
        # i1 has no byte-per-element hex form: write nested literals.
        def lit(a):
            if a.ndim == 0:
                return "true" if a else "false"
            return "[" + ", ".join(lit(x) for x in a) + "]"
        payload = lit(array)
    else:
        payload = f'"0x{array.tobytes().hex().upper()}"'
    return (f"    %{name} = arith.constant dense<{payload}>"
            f" : {tensor_type(array.shape, elt)}\n")


def print_call(value, shape, name=None):
    """Prints a f32 tensor value from main (after bufferization); `name`
    prefixes the SSA names it defines."""
    t = tensor_type(shape, "f32")
    m = "memref<" + "".join(f"{d}x" for d in shape) + "f32>"
    n = name or value.lstrip("%")
    return (f"    %{n}_buf = bufferization.to_buffer {value} : {t} to {m}\n"
            f"    %{n}_u = memref.cast %{n}_buf : {m} to memref<*xf32>\n"
            f"    func.call @printMemrefF32(%{n}_u) : (memref<*xf32>) -> ()\n")


def extf_call(value, shape, elt, name):
    """`%name`: the f16/bf16 tensor `value` extended to f32 (a linalg.generic
    of arith.extf, which bufferizes), for print_call."""
    src, dst = tensor_type(shape, elt), tensor_type(shape, "f32")
    ids = ", ".join(f"d{i}" for i in range(len(shape)))
    idm = f"affine_map<({ids}) -> ({ids})>"
    iters = ", ".join(['"parallel"'] * len(shape))
    return (f"    %{name}_e = tensor.empty() : {dst}\n"
            f"    %{name} = linalg.generic {{indexing_maps = [{idm}, {idm}], "
            f"iterator_types = [{iters}]}} ins({value} : {src}) "
            f"outs(%{name}_e : {dst}) {{\n"
            f"    ^bb0(%in: {elt}, %out: f32):\n"
            f"      %x = arith.extf %in : {elt} to f32\n"
            f"      linalg.yield %x : f32\n"
            f"    }} -> {dst}\n")


PRINT_DECL = "  func.func private @printMemrefF32(memref<*xf32>)\n"

_TOKEN = re.compile(r"-?nan|-?inf|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def parse_printed(text):
    """The arrays printed by printMemrefF32, in order."""
    arrays = []
    for chunk in text.split("Unranked Memref")[1:]:
        sizes = re.search(r"sizes = \[([^\]]*)\]", chunk).group(1)
        shape = [int(s) for s in sizes.split(",") if s.strip()]
        data = chunk.split("data =", 1)[1]
        values = [float(t) for t in _TOKEN.findall(data)]
        arrays.append(np.array(values, dtype=np.float64).reshape(shape))
    return arrays


def runner_libs():
    runner = shutil.which("mlir-runner")
    if runner is None:
        raise SystemExit("mlir-runner not found on PATH")
    libdir = os.path.join(os.path.dirname(os.path.realpath(runner)), "..", "lib")
    libs = [os.path.join(libdir, n) for n in
            ("libmlir_runner_utils.so", "libmlir_c_runner_utils.so")]
    return runner, ",".join(libs)


def fa_opt(fa_opt_path, text, args, workdir, name):
    path = os.path.join(workdir, name + ".in.mlir")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([fa_opt_path, path] + args, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"fa-opt {' '.join(args)} failed on {path}:\n"
                           f"{r.stderr[-4000:]}")
    return r.stdout


def execute(fa_opt_path, text, workdir, name, lower_args=("--fa-lower-to-cpu",)):
    """Lowers `text` (a module with @main) to LLVM with fa-opt and runs it;
    returns the printed arrays."""
    llvm = fa_opt(fa_opt_path, text, list(lower_args), workdir, name + ".lower")
    path = os.path.join(workdir, name + ".llvm.mlir")
    with open(path, "w") as f:
        f.write(llvm)
    runner, libs = runner_libs()
    r = subprocess.run([runner, path, "-e", "main", "-entry-point-result=void",
                        "-shared-libs=" + libs], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"mlir-runner failed on {path}:\n{r.stderr[-4000:]}")
    return parse_printed(r.stdout)


def rel_err(x, ref):
    """Relative Frobenius error over the finite reference entries."""
    den = np.linalg.norm(ref)
    return np.linalg.norm(x - ref) / (den if den > 0 else 1.0)


def finish(failures):
    """Ends a numerics test: prints and exits 1 on failures, else PASS."""
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        raise SystemExit(1)
    print("PASS")
