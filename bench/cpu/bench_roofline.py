#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The CPU forward kernel against this machine's measured limits (issue 18).

One run measures the limits (probes.c: the f32 FMA peak and the read
bandwidth on 1 and --threads threads, the bf16 dot-product peak where the
CPU has AVX512_BF16), then times the default vector kernel through
`fa-run attention --parallel` (OMP_NUM_THREADS = 1 and --threads; best of
--repeats processes, each running the kernel --runs times) and, where
`import torch` works, torch's CPU scaled_dot_product_attention on the same
data. Every configuration is B = 1, H = --heads, Nq = Nk = N, random
normal inputs; our output is checked against a float64 reference on
sampled rows (relative error < 1e-4 for f32, 1e-2 for f16).

For each configuration it prints GFLOP/s (4 H N^2 D, halved for causal) as
a fraction of the FMA peak of the same thread count, and the roofline
bound `max(FLOPs / FMA peak, bytes / read bandwidth)` beside the measured
time, with FLOPs and bytes from `fa-compile --report` (the cost report,
docs/cost.md), which the run checks against its own formulas (within 1%;
bytes: q, k, v read and o written once) and whose bound must not be above
the measured time. Then the issue-18 targets.

Usage:
  bench_roofline.py FA_RUN FA_COMPILE [--threads 2] [--heads 8]
      [--configs f32:128:4096:none ...] [--repeats 3] [--runs 3] [--out F]

A config is dtype:D:N:causal[:bqN] (causal: none or bottom-right; bqN:
fa-run --block-q N instead of the automatic query tile). dtype is f32, f16,
bf16 (bfloat16 inputs; the AVX512_BF16 dot-product kernel where the host
has it, whose figures are fractions of the bf16 dot peak and whose bound
uses it) or bf16f32 (the same inputs with `--cpu-bf16 f32`: the f32 FMA
kernel, P in f32). torch runs bf16 as torch.bfloat16. Benchmarks are not
tests: check-fa does not run this.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import fa_run_ms, limits_line, machine, probe  # noqa: E402

DEFAULT_CONFIGS = (
    ["f32:128:%d:none" % n for n in (512, 1024, 4096, 16384)]
    + ["f32:%d:4096:none" % d for d in (64, 96, 256)]
    + ["f32:128:16384:none:bq128", "f32:128:4096:bottom-right", "f16:128:4096:none",
       "bf16:128:4096:none", "bf16f32:128:4096:none", "bf16:128:4096:bottom-right"])


def bf16_bits(x):
    """float32 -> bfloat16 bit patterns (nearest even), as fa-run reads them."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def flop_count(h, n, d, causal):
    return 4 * h * n * n * d / (2 if causal != "none" else 1)


def byte_count(h, n, d, esize):
    return 4 * h * n * d * esize  # q, k, v read; o written


def report_cost(fa_compile, tmp, dtype, h, n, d, causal):
    out = os.path.join(tmp, "cost")
    subprocess.run([fa_compile, "--op", "attention", "--head-dim", str(d), "--heads", str(h),
                    "--dtype", dtype, "--causal", causal, "--target", "cpu", "--quiet",
                    "--report-sizes", f"B=1,Nq={n},Nk={n}", "--name", "cost", "-o", out],
                   check=True)
    with open(os.path.join(out, "cost.json")) as f:
        values = json.load(f)["cost"]["values"]
    subprocess.run(["rm", "-rf", out], check=True)
    return values


def reference_rows(q, k, v, causal, rows):
    q, k, v = (x[0].astype(np.float64) for x in (q, k, v))
    s = np.einsum("hqd,hkd->hqk", q[:, rows], k) / np.sqrt(q.shape[-1])
    if causal != "none":
        s = np.where(np.arange(k.shape[1])[None, None, :] <= rows[None, :, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), v)


def try_torch():
    try:
        import torch  # noqa: F401
        return torch
    except Exception:  # noqa: BLE001
        return None


def torch_ms(torch, q, k, v, causal, threads, repeats, bf16=False):
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    tq, tk, tv = (torch.from_numpy(x.astype(np.float32)) for x in (q, k, v))
    if q.dtype == np.float16:
        tq, tk, tv = (x.half() for x in (tq, tk, tv))
    if bf16:
        tq, tk, tv = (x.bfloat16() for x in (tq, tk, tv))
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats + 1):
            t = time.perf_counter()
            F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal != "none")
            best = min(best, time.perf_counter() - t)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fa_run")
    ap.add_argument("fa_compile")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t0 = time.time()
    torch = try_torch()
    limits = limits_line(args.threads)
    log(f"{machine()}\n{limits}")
    h, rows, problems = args.heads, [], []
    with tempfile.TemporaryDirectory(prefix="fa-roofline-") as tmp:
        for config in args.configs:
            dtype, d, n, causal, *tiles = config.split(":")
            d, n = int(d), int(n)
            # An optional fifth field, bqN: fa-run --block-q N.
            tile_flags = ["--block-q", tiles[0][2:]] if tiles else []
            np_type = np.float16 if dtype == "f16" else np.float32
            bf16 = dtype.startswith("bf16")
            rng = np.random.default_rng(n + d)
            q, k, v = (rng.standard_normal((1, h, n, d), dtype=np.float32).astype(np_type)
                       for _ in range(3))
            if bf16:
                # The values the bf16 files hold, for torch and the reference.
                q, k, v = (from_bf16_bits(bf16_bits(x)) for x in (q, k, v))
            paths = {x: os.path.join(tmp, x + ".npy") for x in "qkvo"}
            for x, a in zip("qkv", (q, k, v)):
                np.save(paths[x], bf16_bits(a) if bf16 else a)
            fa_args = ["--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
                       "-o", paths["o"], "--causal", causal] + tile_flags
            if bf16:
                fa_args += ["--dtype", "bf16",
                            "--cpu-bf16", "f32" if dtype == "bf16f32" else "dot"]
            # bf16 through the dot products: fractions of the bf16 dot peak.
            peak_kind = "bf16dot" if dtype == "bf16" and probe("bf16dot", 1) else "fma"
            flops = flop_count(h, n, d, causal)
            nbytes = byte_count(h, n, d, 2 if bf16 else np.dtype(np_type).itemsize)
            cost = report_cost(args.fa_compile, tmp, "bf16" if bf16 else dtype, h, n, d,
                               causal)
            for what, ours, theirs in (("flops", cost["flops"], flops),
                                       ("bytes", cost["bytes_read"] + cost["bytes_written"],
                                        nbytes)):
                if abs(ours - theirs) > 0.01 * theirs:
                    problems.append(f"{config}: report {what} {ours:.4g} vs {theirs:.4g}")
            for threads in sorted({1, args.threads}):
                ms = fa_run_ms(args.fa_run, fa_args, threads, args.repeats, args.runs)
                o = np.load(paths["o"])
                if bf16:
                    o = from_bf16_bits(o)
                sel = np.linspace(0, n - 1, 64).astype(int)
                ref = reference_rows(q, k, v, causal, sel)
                err = np.linalg.norm(o[0][:, sel] - ref) / np.linalg.norm(ref)
                if err > (1e-4 if dtype == "f32" else 1e-2):
                    problems.append(f"{config}: relative error {err:.2e}")
                peak, bw = probe(peak_kind, threads), probe("read", threads)
                bound = max(cost["flops"] / (peak * 1e9), (cost["bytes_read"] +
                                                        cost["bytes_written"]) / (bw * 1e9)) * 1e3
                if bound > ms:
                    problems.append(f"{config} {threads} threads: bound {bound:.2f} ms "
                                    f"above the measured {ms:.2f} ms")
                t_ms = (torch_ms(torch, q, k, v, causal, threads, args.repeats, bf16)
                        if torch else None)
                gf = flops / ms / 1e6
                row = dict(dtype=dtype, d=d, n=n, causal=causal + (f" {tiles[0]}" if tiles else ""),
                           threads=threads, ms=ms, peak=peak_kind,
                           gf=gf, frac=gf / peak, bound=bound, torch=t_ms)
                rows.append(row)
                log(f"{config} {threads}T: {ms:9.2f} ms {gf:7.1f} GFLOP/s "
                    f"{100 * gf / peak:5.1f}% of {peak_kind} peak, bound {bound:8.2f} ms"
                    + (f", torch {t_ms:9.2f} ms" if t_ms else ""))

    def find(dtype, d, n, causal, threads):
        for r in rows:
            if (r["dtype"], r["d"], r["n"], r["causal"], r["threads"]) == (
                    dtype, d, n, causal, threads):
                return r
        return None

    out = [f"Machine: {machine()}; {platform.system()} {platform.release()}.",
           f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
           f"Command: `{' '.join(['python3'] + [os.path.basename(a) if i < 3 else a for i, a in enumerate(sys.argv)])}`.",
           f"{limits[0].upper() + limits[1:]}.",
           "torch: " + (f"{torch.__version__}, CPU capability "
                        f"{torch.backends.cpu.get_cpu_capability()}" if torch else "not installed"),
           "", f"B = 1, H = {h}, Nq = Nk = N; time in ms (best of {args.repeats} processes x "
           f"{args.runs} runs); GFLOP/s = 4 H N² D (halved for causal) / time; bound = the "
           "roofline lower bound from the cost report and the measured limits of the same "
           "thread count.", "",
           "| dtype | D | N | causal | threads | ms | GFLOP/s | of peak | bound ms | "
           "time / bound | torch ms | ours vs torch |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        peak_name = "bf16 dot" if r["peak"] == "bf16dot" else "FMA"
        out.append(f"| {r['dtype']} | {r['d']} | {r['n']} | {r['causal']} | {r['threads']} | "
                   f"{r['ms']:.2f} | {r['gf']:.1f} | {100 * r['frac']:.1f}% {peak_name} | "
                   f"{r['bound']:.2f} | "
                   f"{r['ms'] / r['bound']:.2f} | "
                   + (f"{r['torch']:.2f} | {r['torch'] / r['ms']:.2f}× |" if r["torch"]
                      else "— | — |"))
    t = args.threads
    base1, base2 = find("f32", 128, 4096, "none", 1), find("f32", 128, 4096, "none", t)
    out += ["", "Issue-18 targets (this run):", ""]
    if base1 and base2:
        out.append(f"- f32 D=128 N=4096: 1 thread **{100 * base1['frac']:.1f}%** of the FMA peak "
                   f"(target ≥ 85%), {t} threads **{100 * base2['frac']:.1f}%** (target ≥ 80%)")
    for d in (64, 96, 256):
        r = find("f32", d, 4096, "none", 1)
        if r:
            out.append(f"- D={d}: 1 thread **{100 * r['frac']:.1f}%** of the FMA peak "
                       f"(target ≥ 75% for D = 64 and 256)")
    long = find("f32", 128, 16384, "none", 1)
    if long and base1:
        out.append(f"- N=16384 vs N=4096, 1 thread: **{long['gf'] / base1['gf']:.2f}×** the rate "
                   "(target ≥ 0.90)")
    wide = find("f32", 128, 16384, "none bq128", 1)
    if wide and base1:
        out.append(f"- N=16384 with --block-q 128 vs N=4096, 1 thread: "
                   f"**{wide['gf'] / base1['gf']:.2f}×** the rate")
    for n in (512, 1024):
        r1, r2 = find("f32", 128, n, "none", 1), find("f32", 128, n, "none", t)
        if r1 and r2 and t > 1:
            out.append(f"- N={n}: {t} threads run {r1['ms'] / r2['ms']:.2f}× faster than 1 "
                       f"(at most 25% lost to start-up: ≥ {0.75 * t:.2f}×)")
    c1, c2 = find("f32", 128, 4096, "bottom-right", 1), find("f32", 128, 4096, "bottom-right", t)
    if c1 and c2 and t > 1:
        out.append(f"- causal N=4096: {t} threads {c1['ms'] / c2['ms']:.2f}× faster than 1")
    for threads in sorted({1, t}):
        bf, f32, bff = (find(x, 128, 4096, "none", threads) for x in ("bf16", "f32", "bf16f32"))
        if bf and f32:
            line = (f"- bf16 D=128 N=4096, {threads} thread(s): {bf['gf']:.1f} GFLOP/s, "
                    f"**{bf['gf'] / f32['gf']:.2f}×** the f32 rate (target ≥ 1.6×)")
            if bff:
                line += f", {bf['gf'] / bff['gf']:.2f}× the bf16 inputs on the f32 kernel"
            if bf["torch"]:
                line += (f"; **{bf['torch'] / bf['ms']:.2f}×** torch's bf16 SDPA "
                         "(target ≥ 3×)")
            out.append(line)
    f16 = find("f16", 128, 4096, "none", 1)
    if f16 and base1:
        out.append(f"- f16 inputs, 1 thread: {f16['gf'] / base1['gf']:.2f}× the f32 rate (no "
                   "AVX512_FP16 arithmetic: converted to f32)")
    out.append("- cost report vs this benchmark's counts: "
               + ("FLOPs and bytes within 1%, bound never above the time" if not problems
                  else "; ".join(problems)))
    out += ["", f"Wall time: {time.time() - t0:.0f} s."]
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
