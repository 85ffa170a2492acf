#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""One head of attention with N queries and keys (default 65,536, D = 64) on
the CPU through `fa-run`, reporting wall time and peak resident memory, and
checking 256 sampled query rows against a float64 reference over all keys.

The naive kernel would materialize S = Q K^T: N * N * 4 bytes (16 GiB at
N = 65,536). The tiled online-softmax kernel keeps one tile of S.

Usage: long_sequence.py FA_RUN [--n N] [--d D] [--causal MODE] [--promoted]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fa_run")
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--causal", default="none")
    ap.add_argument("--promoted", action="store_true")
    args = ap.parse_args()

    rng = np.random.default_rng(args.n)
    shape = (1, 1, args.n, args.d)
    with tempfile.TemporaryDirectory(prefix="fa-long-") as tmp:
        paths = {n: os.path.join(tmp, n + ".npy") for n in ("q", "k", "v", "o", "lse")}
        arrays = {n: rng.standard_normal(shape, dtype=np.float32) for n in "qkv"}
        for n, a in arrays.items():
            np.save(paths[n], a)
        cmd = ["/usr/bin/time", "-v", args.fa_run, "attention", "--q", paths["q"],
               "--k", paths["k"], "--v", paths["v"], "-o", paths["o"], "--lse",
               paths["lse"], "--causal", args.causal, "--time"]
        if args.promoted:
            cmd.append("--promoted")
        print("$", " ".join(cmd[2:]), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        sys.stderr.write(proc.stderr if proc.returncode else "")
        if proc.returncode:
            return 1
        peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
        times = re.search(r"compile: ([\d.]+) ms, run: ([\d.]+) ms", proc.stderr)
        o, lse = np.load(paths["o"])[0, 0], np.load(paths["lse"])[0, 0]

    q, k, v = (arrays[n][0, 0].astype(np.float64) for n in "qkv")
    rows = np.sort(np.random.default_rng(7).choice(args.n, 256, replace=False))
    s = (q[rows] @ k.T) / np.sqrt(args.d)
    if args.causal != "none":
        s = np.where(np.arange(args.n)[None, :] <= rows[:, None], s, -np.inf)
    m = s.max(1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(1)
    ref, ref_lse = (p @ v) / l[:, None], m[:, 0] + np.log(l)
    rel = np.linalg.norm(o[rows] - ref) / np.linalg.norm(ref)
    lse_err = np.abs(lse[rows] - ref_lse).max()
    naive_gib = args.n * args.n * 4 / 2**30
    print(f"N={args.n} D={args.d} causal={args.causal}: compile {float(times.group(1)):.0f} ms, "
          f"run {float(times.group(2)) / 1000:.1f} s, peak RSS {peak_kib / 1024:.0f} MiB "
          f"(S alone would be {naive_gib:.0f} GiB)")
    print(f"256 sampled rows vs float64: rel. error of O {rel:.1e}, max abs error of LSE {lse_err:.1e}, "
          f"NaN in O: {int(np.isnan(o).sum())}")
    return 0 if rel < 1e-5 and lse_err < 1e-4 and not np.isnan(o).any() else 1


if __name__ == "__main__":
    sys.exit(main())
