#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""CPU benchmark of decode attention (issue 16): one new query token per
sequence against a KV cache, through `fa-run`, side by side with torch's
CPU SDPA (`enable_gqa=True`) on the same data in the same run, against the
machine's read bandwidth measured in the same run.

Rows: f32, Nq = 1, D = --d, Hq = --hq query heads and Hq / G kv heads for
every group size G in --groups, B in --batch, Nk in --nk, bottom-right
causal (what a decode step is), --threads threads. A decode step reads the
whole K/V cache once, so its speed limit is the read bandwidth: GB/s counts
the K and V bytes (B Hkv Nk (D + Dv) 4). The bandwidth is the best of five
`torch.sum` over a 1 GiB f32 buffer with the same thread count (a streaming
read). Times: fa-run's kernel time with `--repeat` (the first call's thread
start and page faults out), best of --repeats processes; torch: best of
--repeats calls after one warm-up. Every output is checked against torch's
(relative Frobenius error < 1e-4). Rows whose K/V would exceed --max-gib are
skipped (listed).

Usage:
  bench_decode.py FA_RUN [--batch 1 4 16] [--nk 1024 8192 32768]
      [--groups 1 4 8] [--hq 32] [--d 128] [--threads 2] [--repeats 3]
      [--max-gib 2.5] [--out results.md] [--plot decode.png]

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import datetime
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import fa_run_ms, machine  # noqa: E402


def read_bandwidth(torch, threads):
    """Best of five streaming reads (torch.sum) of a 1 GiB f32 buffer."""
    torch.set_num_threads(threads)
    x = torch.ones(256 * 1024 * 1024, dtype=torch.float32)
    best = float("inf")
    for _ in range(6):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best / 1e9


def run_fa(fa_run, paths, threads, repeats, runs):
    return fa_run_ms(fa_run, ["--q", paths["q"], "--k", paths["k"], "--v",
                              paths["v"], "-o", paths["o"], "--causal",
                              "bottom-right"], threads, repeats, runs)


def bench(args, torch, tmp):
    rows, skipped = [], []
    for b in args.batch:
        for g in args.groups:
            hkv = args.hq // g
            for nk in args.nk:
                kv_bytes = b * hkv * nk * args.d * 4 * 2
                if kv_bytes > args.max_gib * 2**30:
                    skipped.append((b, g, nk, kv_bytes))
                    continue
                rng = np.random.default_rng(0)
                q = rng.standard_normal((b, args.hq, 1, args.d),
                                        dtype=np.float32)
                k = rng.standard_normal((b, hkv, nk, args.d), dtype=np.float32)
                v = rng.standard_normal((b, hkv, nk, args.d), dtype=np.float32)
                paths = {n: os.path.join(tmp, n + ".npy")
                         for n in ("q", "k", "v", "o")}
                for n, a in (("q", q), ("k", k), ("v", v)):
                    np.save(paths[n], a)
                ours = run_fa(args.fa_run, paths, args.threads, args.repeats,
                              args.runs)
                o = np.load(paths["o"])
                tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
                sdpa = torch.nn.functional.scaled_dot_product_attention
                ref = sdpa(tq, tk, tv, enable_gqa=True)
                peer = float("inf")
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    sdpa(tq, tk, tv, enable_gqa=True)
                    peer = min(peer, (time.perf_counter() - t) * 1e3)
                ref = ref.numpy()
                err = np.linalg.norm(o - ref) / np.linalg.norm(ref)
                if not err < 1e-4:
                    raise RuntimeError(f"B={b} G={g} Nk={nk}: rel err {err}")
                row = dict(b=b, g=g, hkv=hkv, nk=nk, ours=ours, torch=peer,
                           gbs=kv_bytes / ours / 1e6,
                           torch_gbs=kv_bytes / peer / 1e6, err=err,
                           mib=kv_bytes / 2**20)
                rows.append(row)
                print(f"B={b:2d} G={g} Hkv={hkv:2d} Nk={nk:6d}: ours "
                      f"{ours:8.3f} ms ({row['gbs']:5.1f} GB/s), torch "
                      f"{peer:8.3f} ms ({row['torch_gbs']:5.1f} GB/s), "
                      f"{peer / ours:5.2f}x, rel err {err:.1e}", flush=True)
    return rows, skipped


def table(args, rows, skipped, bw):
    lines = [
        f"Decode, f32, Nq = 1, Hq = {args.hq}, D = {args.d}, bottom-right "
        f"causal, {args.threads} threads; read bandwidth {bw:.1f} GB/s "
        f"(torch.sum of 1 GiB, {args.threads} threads, best of 5).",
        "",
        "| B | Hq/Hkv | Hkv | Nk | K+V MiB | fa ms | fa GB/s | % of read BW "
        "| torch SDPA ms | torch GB/s | fa vs torch |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['b']} | {r['g']} | {r['hkv']} | {r['nk']} | "
            f"{r['mib']:.0f} | {r['ours']:.3f} | {r['gbs']:.1f} | "
            f"{100 * r['gbs'] / bw:.0f}% | {r['torch']:.3f} | "
            f"{r['torch_gbs']:.1f} | **{r['torch'] / r['ours']:.2f}x** |")
    if skipped:
        lines += ["", "Skipped (K+V above --max-gib): " + ", ".join(
            f"B={b} G={g} Nk={nk} ({n / 2**30:.1f} GiB)"
            for b, g, nk, n in skipped)]
    return "\n".join(lines)


def plot(args, rows, bw, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot")
        return
    fig, axes = plt.subplots(1, len(args.batch),
                             figsize=(5 * len(args.batch), 4), squeeze=False)
    for ax, b in zip(axes[0], args.batch):
        for g in args.groups:
            sel = [r for r in rows if r["b"] == b and r["g"] == g]
            if not sel:
                continue
            nk = [r["nk"] for r in sel]
            line, = ax.plot(nk, [r["gbs"] for r in sel], "o-",
                            label=f"fa, Hq/Hkv={g}")
            ax.plot(nk, [r["torch_gbs"] for r in sel], "x--",
                    color=line.get_color(), label=f"torch SDPA, Hq/Hkv={g}")
        ax.axhline(bw, color="k", lw=0.8, label="read bandwidth")
        ax.set_xscale("log", base=2)
        ax.set_title(f"B = {b}")
        ax.set_xlabel("Nk")
        ax.set_ylabel("GB/s of K+V")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Decode, f32, Hq={args.hq}, D={args.d}, {args.threads} "
                 "threads: " + machine(), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("plot:", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fa_run")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--nk", type=int, nargs="+", default=[1024, 8192, 32768])
    ap.add_argument("--groups", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10,
                    help="fa-run --repeat (kernel calls per process)")
    ap.add_argument("--max-gib", type=float, default=2.5)
    ap.add_argument("--out", help="append the markdown table here")
    ap.add_argument("--plot", help="write a plot here (needs matplotlib)")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    bw = read_bandwidth(torch, args.threads)
    print(f"{machine()}; torch {torch.__version__}; read bandwidth "
          f"{bw:.1f} GB/s ({args.threads} threads)")
    with tempfile.TemporaryDirectory() as tmp:
        rows, skipped = bench(args, torch, tmp)
    text = table(args, rows, skipped, bw)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n## {datetime.date.today()}: {machine()}, torch "
                    f"{torch.__version__}\n\nCommand: `{' '.join(sys.argv)}`"
                    f"\n\n{text}\n")
    if args.plot:
        plot(args, rows, bw, args.plot)


if __name__ == "__main__":
    main()
