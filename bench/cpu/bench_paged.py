#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""CPU benchmark of paged decode (issue 16): the same decode step on a
paged K/V cache (fa-run --block-table, pages in shuffled order) and on the
contiguous cache holding the same keys, through `fa-run` in the same run.
torch has no paged attention, so the peer is our own contiguous kernel
(and torch's SDPA on the contiguous cache for scale).

Rows: f32, Nq = 1, B = --batch, Hq = --hq, Hkv = --hkv, D = --d, every
sequence --nk keys, bottom-right causal, --threads threads, page sizes
--pages. GB/s count the K and V bytes read, also as a fraction of the
read bandwidth of --threads threads measured in the same run
(bench_common.probe, probes.c). Times: fa-run --repeat 10,
best of --repeats processes. Outputs checked against each other (relative
Frobenius error < 1e-5).

Usage:
  bench_paged.py FA_RUN [--batch 4] [--hq 32] [--hkv 8] [--nk 8192]
      [--d 128] [--pages 16 256] [--threads 2] [--repeats 3] [--out f.md]

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import fa_run_ms, limits_line, machine, probe  # noqa: E402


def run_fa(fa_run, files, extra, threads, repeats):
    return fa_run_ms(fa_run, ["--q", files["q"], "--k", files["k"], "--v",
                              files["v"], "-o", files["o"], "--kv-lens",
                              files["lens"], "--causal", "bottom-right"] +
                     extra, threads, repeats)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fa_run")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--nk", type=int, default=8192)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--pages", type=int, nargs="+", default=[16, 256])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-shuffle", action="store_true",
                    help="pages in order (the layout cost alone)")
    ap.add_argument("--out")
    args = ap.parse_args()
    B, Hq, Hkv, N, D = args.batch, args.hq, args.hkv, args.nk, args.d
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, Hq, 1, D), dtype=np.float32)
    k = rng.standard_normal((B, Hkv, N, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, N, D), dtype=np.float32)
    lens = np.full(B, N, dtype=np.int32)
    kv_bytes = k.nbytes + v.nbytes
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        f = {n: os.path.join(tmp, n + ".npy")
             for n in ("q", "k", "v", "o", "lens", "bt")}
        np.save(f["q"], q)
        np.save(f["lens"], lens)
        np.save(f["k"], k)
        np.save(f["v"], v)
        dense = run_fa(args.fa_run, f, [], args.threads, args.repeats)
        ref = np.load(f["o"])
        rows.append(("contiguous [B, Hkv, Nk, D]", dense, 0.0))
        for s in args.pages:
            m = -(-N // s)
            order = (np.arange(B * m) if args.no_shuffle else rng.permutation(B * m)).astype(np.int32)
            table = order.reshape(B, m)
            # Page p holds rows of the sequence and block that map to it.
            kc = np.zeros((B * m, s, Hkv, D), dtype=np.float32)
            vc = np.zeros_like(kc)
            for b in range(B):
                for j in range(m):
                    rows_k = k[b, :, j * s:(j + 1) * s].transpose(1, 0, 2)
                    rows_v = v[b, :, j * s:(j + 1) * s].transpose(1, 0, 2)
                    kc[table[b, j], :rows_k.shape[0]] = rows_k
                    vc[table[b, j], :rows_v.shape[0]] = rows_v
            np.save(f["k"], kc)
            np.save(f["v"], vc)
            np.save(f["bt"], table)
            ms = run_fa(args.fa_run, f, ["--block-table", f["bt"]],
                        args.threads, args.repeats)
            o = np.load(f["o"])
            err = np.linalg.norm(o - ref) / np.linalg.norm(ref)
            if not err < 1e-5:
                raise RuntimeError(f"page size {s}: rel err {err}")
            rows.append((f"paged, S = {s}, "
                         f"{'pages in order' if args.no_shuffle else 'shuffled pages'}",
                         ms, err))
    bw = probe("read", args.threads)
    lines = [f"Paged decode, f32, B={B}, Hq={Hq}, Hkv={Hkv}, Nq=1, Nk={N}, "
             f"D={D}, bottom-right causal, {args.threads} threads; "
             f"{machine()}; {limits_line(args.threads)}.", "",
             "| cache | ms | GB/s (K+V) | of read bandwidth | vs contiguous | rel. diff. |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, ms, err in rows:
        gbs = kv_bytes / ms / 1e6
        lines.append(f"| {name} | {ms:.3f} | {gbs:.1f} | {100 * gbs / bw:.0f}% | "
                     f"{dense / ms:.2f}x | {err:.1e} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(f"\nCommand: `{' '.join(sys.argv)}`\n\n{text}\n")


if __name__ == "__main__":
    main()
