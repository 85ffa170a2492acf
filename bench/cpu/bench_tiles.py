#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Back-to-back variants of the CPU vector kernel (fa-cpu-attention): tile
sizes, element types (f32, f16, bf16), OpenMP threads, causal or not.

`fa-run` cannot do this: it has no bf16 inputs and does not pass the vector
kernel's tile sizes (`fa-lower-to-cpu{cpu-block-q, cpu-block-kv}`). So each
variant is compiled here the way `fa-run` compiles it (the same kernel-form
function `fa_kernel`: B, N dynamic, heads and head dims static; the
`fa-lower-to-cpu` pipeline; LLVM -O3 for the host CPU) but ahead of time:

    fa-opt -pass-pipeline='builtin.module(fa-lower-to-cpu{...})'
      | mlir-translate --mlir-to-llvmir | clang -O3 -march=native -shared

and called in this process through ctypes (`_mlir_ciface_fa_kernel`), with
libomp's `omp_set_num_threads` picking the thread count per call. All
variants of one configuration run on the same inputs, interleaved (round r
of every variant before round r + 1 of any), and the best of --repeats is
reported (wall time, and the process CPU time, which on a shared machine
leaves out the time other processes held the core for 1-thread variants); every output is checked against a float64 reference on sampled
query rows (relative Frobenius error < 1e-4 for f32, < 1e-2 for f16/bf16)
and the run aborts on a mismatch.

Variants are `DTYPE:BQxBKV:THREADS`, e.g. `f32:64x64:1`, `bf16:0x0:2`
(0x0 = the pass's automatic, cache-derived sizes; a `+L2` suffix
such as `f32:0x0+1048576:1` forces the L2 size the automatic choice
assumes; a `/KRxPRxPV` suffix such as `f32:0x0/6x4x4:1` sets the register
blocks: keys per S block, rows and Dv vectors per P V block); a `:dynamic` or `:guided` suffix sets that OpenMP schedule
on the worksharing loop, which is static otherwise). `--torch-bf16` adds torch's CPU SDPA on bf16 (and f32) to
each configuration when torch imports.

Usage:
  bench_tiles.py --fa-opt build/bin/fa-opt --n 4096 --d 64 128 --heads 8 \\
      --causal none --variants f32:0x0:1 f32:64x64:1 f32:32x64:1 --repeats 5

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import ctypes
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

LLVM_BIN = "/usr/lib/llvm-22/bin"
LLVM_LIB = "/usr/lib/llvm-22/lib"
MLIR_TYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16"}


class MemRef4(ctypes.Structure):
    _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                ("offset", ctypes.c_int64), ("sizes", ctypes.c_int64 * 4),
                ("strides", ctypes.c_int64 * 4)]


def memref4(a):
    """A rank-4 memref descriptor of a C-contiguous array (kept alive by the caller)."""
    assert a.flags["C_CONTIGUOUS"] and a.ndim == 4
    d = MemRef4()
    d.allocated = d.aligned = a.ctypes.data
    d.offset = 0
    for i in range(4):
        d.sizes[i] = a.shape[i]
        d.strides[i] = a.strides[i] // a.itemsize
    return d


def kernel_mlir(dtype, h, d, causal):
    t = MLIR_TYPE[dtype]
    m = f"memref<?x{h}x?x{d}x{t}>"
    tt = f"tensor<?x{h}x?x{d}x{t}>"
    causal_attr = "" if causal == "none" else f" causal({causal.replace('-', '_')})"
    return f"""
func.func @fa_kernel(%q: {m}, %k: {m}, %v: {m}, %o: {m}) attributes {{llvm.emit_c_interface}} {{
  %qt = bufferization.to_tensor %q restrict : {m} to {tt}
  %kt = bufferization.to_tensor %k restrict : {m} to {tt}
  %vt = bufferization.to_tensor %v restrict : {m} to {tt}
  %ot = bufferization.to_tensor %o restrict writable : {m} to {tt}
  %r = fa.attention ins(%qt, %kt, %vt : {tt}, {tt}, {tt}) outs(%ot : {tt}){causal_attr} -> {tt}
  bufferization.materialize_in_destination %r in restrict writable %o : ({tt}, {m}) -> ()
  return
}}
"""


def parse_variant(s):
    m = re.fullmatch(r"(f32|f16|bf16):(\d+)x(\d+)(?:\+(\d+))?(?:/(\d+)x(\d+)x(\d+))?:(\d+)"
                     r"(?::(static|dynamic|guided))?", s)
    if not m:
        sys.exit(f"bad variant '{s}': expected DTYPE:BQxBKV[+L2][/KRxPRxPV]:THREADS[:SCHEDULE]")
    dt, bq, bkv, l2, kr, pr, pv, thr, sched = m.groups()
    return dict(name=s, dtype=dt, bq=int(bq), bkv=int(bkv), l2=int(l2 or 0),
                regs=(int(kr), int(pr), int(pv)) if kr else None,
                threads=int(thr), schedule=sched or "static")


def pipeline(v, parallel, pass_has_cache_opts):
    opts = [f"cpu-block-q={v['bq']}", f"cpu-block-kv={v['bkv']}", f"parallel={'true' if parallel else 'false'}"]
    if v["l2"]:
        if not pass_has_cache_opts:
            sys.exit("this fa-opt has no cpu-l2-cache-size option")
        opts += [f"cpu-l2-cache-size={v['l2']}"]
    if v["regs"]:
        opts += [f"cpu-key-rows={v['regs'][0]}", f"cpu-pv-rows={v['regs'][1]}",
                 f"cpu-pv-vectors={v['regs'][2]}"]
    return "builtin.module(fa-lower-to-cpu{" + " ".join(opts) + "})"


def compile_kernel(args, tmp, v, h, d, causal, cache):
    parallel = v["threads"] > 1 or args.always_parallel
    key = (v["dtype"], v["bq"], v["bkv"], v["l2"], v["regs"], parallel, v["schedule"], h, d,
           causal)
    if key in cache:
        return cache[key]
    base = os.path.join(tmp, "k%d" % len(cache))
    with open(base + ".mlir", "w") as f:
        f.write(kernel_mlir(v["dtype"], h, d, causal))
    t0 = time.perf_counter()
    has_cache = "cpu-l2-cache-size" in subprocess.run(
        [args.fa_opt, "--help"], capture_output=True, text=True).stdout
    subprocess.run([args.fa_opt, base + ".mlir", "-pass-pipeline=" + pipeline(v, parallel, has_cache),
                    "-o", base + ".llvm.mlir"], check=True)
    if v["schedule"] != "static":
        # An experiment: the OpenMP schedule of the (batch, head, query
        # tile) loop, which convert-scf-to-openmp leaves unset (static).
        with open(base + ".llvm.mlir") as f:
            text = f.read()
        assert text.count("omp.wsloop {") == 1, "expected one omp.wsloop"
        with open(base + ".llvm.mlir", "w") as f:
            f.write(text.replace("omp.wsloop {", f"omp.wsloop schedule({v['schedule']}) {{"))
    if args.dump_tiles:
        # The tile sizes the pass chose, from the scratch buffers (Q^T is D x block-q).
        out = subprocess.run([args.fa_opt, base + ".mlir", "-pass-pipeline=builtin.module(fa-cpu-attention{"
                              + f"block-q={v['bq']} block-kv={v['bkv']}"
                              + (f" l2-cache-size={v['l2']}" if v["l2"] else "")
                              + "})"], capture_output=True, text=True).stdout
        allocs = re.findall(r"memref\.alloca\(\).*: memref<([0-9x]+)xf32>", out)
        print(f"  {v['name']} D={d}: scratch {allocs}", file=sys.stderr)
    subprocess.run([os.path.join(LLVM_BIN, "mlir-translate"), "--mlir-to-llvmir", base + ".llvm.mlir",
                    "-o", base + ".ll"], check=True)
    subprocess.run([os.path.join(LLVM_BIN, "clang"), "-O3", "-march=native", "-shared", "-fPIC",
                    "-Wno-override-module", base + ".ll", "-o", base + ".so", "-L" + LLVM_LIB, "-lomp",
                    "-Wl,-rpath," + LLVM_LIB], check=True)
    comp = (time.perf_counter() - t0) * 1e3
    lib = ctypes.CDLL(base + ".so")
    fn = lib._mlir_ciface_fa_kernel
    fn.argtypes = [ctypes.POINTER(MemRef4)] * 4
    fn.restype = None
    cache[key] = (fn, comp)
    return cache[key]


def to_bf16_bits(x):
    """float32 -> bf16 bits (round to nearest even), as uint16."""
    u = x.astype(np.float32).view(np.uint32)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def storage(x, dtype):
    if dtype == "f32":
        return np.ascontiguousarray(x, np.float32)
    if dtype == "f16":
        return np.ascontiguousarray(x, np.float16)
    return np.ascontiguousarray(to_bf16_bits(x))


def as_f64(a, dtype):
    return (from_bf16_bits(a) if dtype == "bf16" else a).astype(np.float64)


def reference(q, k, v, causal, rows):
    """float64 reference of the sampled query rows; q, k, v: [H, N, D] float64."""
    h, n, d = q.shape
    out = np.empty((h, len(rows), v.shape[-1]))
    for i in range(h):
        s = q[i][rows] @ k[i].T / np.sqrt(d)
        if causal != "none":
            s[np.arange(n)[None, :] > rows[:, None]] = -np.inf
        s -= s.max(-1, keepdims=True)
        p = np.exp(s)
        out[i] = p @ v[i] / p.sum(-1, keepdims=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fa-opt", required=True)
    ap.add_argument("--n", type=int, nargs="+", default=[4096])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--causal", nargs="+", default=["none"], choices=["none", "top-left", "bottom-right"])
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--always-parallel", action="store_true",
                    help="compile 1-thread variants with parallel=true too (the OpenMP loop on 1 thread)")
    ap.add_argument("--torch", action="store_true", help="also time torch SDPA (bf16 and f32) when it imports")
    ap.add_argument("--dump-tiles", action="store_true", help="print the scratch buffers each variant gets")
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args()
    variants = [parse_variant(s) for s in args.variants]

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    omp = ctypes.CDLL(os.path.join(LLVM_LIB, "libomp.so"), mode=ctypes.RTLD_GLOBAL)
    torch = None
    if args.torch:
        try:
            import torch
            import torch.nn.functional  # noqa: F401
        except Exception as e:  # ImportError or a broken install
            log(f"note: no torch ({e})")
            torch = None
    load0 = os.getloadavg()
    start = datetime.datetime.now(datetime.timezone.utc)
    lines = [f"Date: {start:%Y-%m-%d %H:%M} UTC. Machine: {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs. Load average at the start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}.",
             f"Command: `{' '.join([os.path.basename(sys.executable)] + sys.argv)}`", "",
             "| N | D | causal | variant | best ms | GFLOP/s | median ms | vs first | best CPU ms | CPU vs first | compile ms | rel. err |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cache = {}
    with tempfile.TemporaryDirectory(prefix="fa-tiles-") as tmp:
        for n in args.n:
            for d in args.d:
                for causal in args.causal:
                    h = args.heads
                    gflop = 4 * h * n * n * d / 1e9 / (2 if causal != "none" else 1)
                    rng = np.random.default_rng(1000 * n + d)
                    x = {c: rng.standard_normal((1, h, n, d), dtype=np.float32) for c in "qkv"}
                    rows = np.sort(rng.choice(n, min(n, 64), replace=False))
                    inputs, refs = {}, {}
                    for dt in sorted({v["dtype"] for v in variants}):
                        inputs[dt] = {c: storage(x[c], dt) for c in "qkv"}
                        f64 = {c: as_f64(inputs[dt][c], dt)[0] for c in "qkv"}
                        refs[dt] = reference(f64["q"], f64["k"], f64["v"], causal, rows)
                    runs = []
                    for v in variants:
                        fn, comp = compile_kernel(args, tmp, v, h, d, causal, cache)
                        o = np.full_like(inputs[v["dtype"]]["q"], 0)
                        descs = [memref4(a) for a in (inputs[v["dtype"]]["q"], inputs[v["dtype"]]["k"],
                                                      inputs[v["dtype"]]["v"], o)]
                        runs.append(dict(v=v, fn=fn, comp=comp, o=o, descs=descs, times=[], cpu=[]))
                    tv = {}
                    if torch is not None:
                        for dt, tdt in (("bf16", torch.bfloat16), ("f32", torch.float32)):
                            tv[dt] = [torch.from_numpy(x[c]).to(tdt) for c in "qkv"]
                        torch_times = {dt: [] for dt in tv}
                    for _ in range(args.repeats):
                        for r in runs:
                            omp.omp_set_num_threads(r["v"]["threads"])
                            c0, t0 = time.process_time(), time.perf_counter()
                            r["fn"](*[ctypes.byref(dsc) for dsc in r["descs"]])
                            r["times"].append((time.perf_counter() - t0) * 1e3)
                            r["cpu"].append((time.process_time() - c0) * 1e3)
                        for dt in tv:
                            torch.set_num_threads(max(v["threads"] for v in variants))
                            with torch.no_grad():
                                t0 = time.perf_counter()
                                to = torch.nn.functional.scaled_dot_product_attention(
                                    *tv[dt], is_causal=causal != "none")
                                torch_times[dt].append((time.perf_counter() - t0) * 1e3)
                    first, first_cpu = min(runs[0]["times"]), min(runs[0]["cpu"])
                    for r in runs:
                        v = r["v"]
                        got = as_f64(r["o"], v["dtype"])[0][:, rows]
                        err = float(np.linalg.norm(got - refs[v["dtype"]]) / np.linalg.norm(refs[v["dtype"]]))
                        tol = 1e-4 if v["dtype"] == "f32" else 1e-2
                        if not err < tol:
                            sys.exit(f"MISMATCH: {v['name']} N={n} D={d} causal={causal}: rel. err {err:.2e}")
                        best, med = min(r["times"]), float(np.median(r["times"]))
                        cpu = min(r["cpu"])
                        lines.append(f"| {n} | {d} | {causal} | `{v['name']}` | {best:.1f} | {gflop / best * 1e3:.1f} | "
                                     f"{med:.1f} | {first / best:.2f}× | {cpu:.1f} | {first_cpu / cpu:.2f}× | "
                                     f"{r['comp']:.0f} | {err:.1e} |")
                        log(lines[-1])
                    for dt in tv:
                        best = min(torch_times[dt])
                        lines.append(f"| {n} | {d} | {causal} | torch SDPA {dt}, "
                                     f"{max(v['threads'] for v in variants)} threads | {best:.1f} | "
                                     f"{gflop / best * 1e3:.1f} | {float(np.median(torch_times[dt])):.1f} | "
                                     f"{first / best:.2f}× | — | — | — | — |")
                        log(lines[-1])
    load1 = os.getloadavg()
    lines += ["", f"Load average at the end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}. "
              f"\"vs first\": the first variant's best time / this one's (> 1: faster). CPU ms: the "
              "process CPU time of the call (all threads; on a loaded machine the 1-thread figure "
              "leaves out the time other processes held the core)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
