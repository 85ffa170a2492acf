#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The backward pass (issue 17) side by side with PyTorch's CPU SDPA
backward, in one run, with the machine's measured f32 FMA peak.

For each configuration (f32, B = 1, H heads, N = Nq = Nk, D): random
normal Q, K, V, dO; O and LSE from `fa-run attention --lse`; the time of
`fa-run attention-backward --time --parallel` (best of --repeats
processes, OMP_NUM_THREADS = --threads; kernel only) and of torch's
`scaled_dot_product_attention(...).backward(dO)` (best of --repeats, the
backward call only, torch.set_num_threads(--threads)), both checked
against each other (relative error of dQ, dK, dV < 1e-4). GFLOP/s count
10 N^2 D per head (halved for causal, whose pairs above the diagonal are
skipped). The FMA peak is probes.c compiled here (AVX-512 where the CPU
has it, else AVX2) and run on --threads threads in the same run. Peak
memory: the maximum resident set of the fa-run process (/usr/bin/time -v)
minus that of the same command at the smallest N of the run (the process,
JIT and libraries), next to the bytes of the inputs and outputs.

Usage: bench_backward.py FA_RUN [--n 1024 4096] [--d 128] [--heads 8]
    [--causal none bottom-right] [--threads 2] [--repeats 3]
Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import machine, probe, vector_isa  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def fma_peak(threads):
    return probe("fma", threads), vector_isa()


def run_fa(fa_run, paths, causal, threads, repeats):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = ["/usr/bin/time", "-v", fa_run, "attention-backward",
           "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
           "--out", paths["o"], "--lse", paths["lse"], "--do", paths["do"],
           "--dq", paths["dq"], "--dk", paths["dk"], "--dv", paths["dv"],
           "--causal", causal, "--parallel", "--time", "--quiet"]
    best, rss = float("inf"), 0
    for _ in range(repeats):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            raise RuntimeError(p.stderr)
        best = min(best, float(re.search(r"run: ([0-9.]+) ms",
                                         p.stderr).group(1)))
        rss = max(rss, int(re.search(r"Maximum resident set size \(kbytes\):"
                                     r" (\d+)", p.stderr).group(1)))
    return best, rss / 1024


def run_torch(q, k, v, do, causal, threads, repeats):
    import torch
    torch.set_num_threads(threads)
    t = [torch.from_numpy(x).requires_grad_() for x in (q, k, v)]
    best = float("inf")
    for _ in range(repeats):
        for x in t:
            x.grad = None
        o = torch.nn.functional.scaled_dot_product_attention(
            *t, is_causal=causal != "none")
        g = torch.from_numpy(do)
        start = time.perf_counter()
        o.backward(g)
        best = min(best, (time.perf_counter() - start) * 1e3)
    return best, [x.grad.numpy() for x in t]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fa_run")
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--causal", nargs="+", default=["none", "bottom-right"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    peak, isa = fma_peak(args.threads)
    print(f"machine: {machine()}; FMA peak ({isa}, {args.threads} threads, "
          f"measured): {peak:.1f} GFLOP/s")
    print("| N | D | H | causal | GFLOP | fa ms (GFLOP/s, % of peak) | "
          "torch ms (GFLOP/s) | fa vs torch | fa peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for n in args.n:
        shape = (1, args.heads, n, args.d)
        q, k, v, do = (rng.standard_normal(shape, dtype=np.float32)
                       for _ in range(4))
        with tempfile.TemporaryDirectory() as tmp:
            p = {x: os.path.join(tmp, x + ".npy") for x in
                 ("q", "k", "v", "do", "o", "lse", "dq", "dk", "dv")}
            for x, a in (("q", q), ("k", k), ("v", v), ("do", do)):
                np.save(p[x], a)
            for causal in args.causal:
                subprocess.run([args.fa_run, "attention", "--q", p["q"],
                                "--k", p["k"], "--v", p["v"], "-o", p["o"],
                                "--lse", p["lse"], "--causal", causal,
                                "--quiet"], check=True)
                fa_ms, rss = run_fa(args.fa_run, p, causal, args.threads,
                                    args.repeats)
                got = [np.load(p[x]) for x in ("dq", "dk", "dv")]
                try:
                    torch_ms, ref = run_torch(q, k, v, do, causal,
                                              args.threads, args.repeats)
                    for g, r in zip(got, ref):
                        err = np.linalg.norm(g - r) / np.linalg.norm(r)
                        if not err < 1e-4:
                            raise SystemExit(f"mismatch with torch: {err}")
                except ImportError:
                    torch_ms = None
                gflop = 10.0 * n * n * args.d * args.heads / 1e9
                if causal != "none":
                    gflop /= 2
                fa_rate = gflop / (fa_ms / 1e3)
                torch_txt = ("-" if torch_ms is None else
                             f"{torch_ms:.1f} ({gflop / (torch_ms / 1e3):.1f})")
                ratio = ("-" if torch_ms is None else
                         f"{torch_ms / fa_ms:.2f}x")
                print(f"| {n} | {args.d} | {args.heads} | {causal} | "
                      f"{gflop:.1f} | {fa_ms:.1f} ({fa_rate:.1f}, "
                      f"{100 * fa_rate / peak:.1f}%) | {torch_txt} | {ratio} "
                      f"| {rss:.0f} |", flush=True)


if __name__ == "__main__":
    main()
