#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""CPU benchmark of variable-length prefill (issue 16) in the two forms fa
runs: token-major with `cu_seqlens` (FlashAttention 2's varlen layout,
causal bottom-right per sequence) and the sequences packed along one batch
row with sorted segment ids (document masking, causal top-left, which
inside one document is each sequence's own causality), against a dense
batch of the same sequences padded to the longest and one of equal-length
sequences, all through `fa-run` in the same run.

--lengths gives the sequences (default: 8 ragged lengths summing to
16384). GFLOP/s count the useful work, 2 L (L + 1) D per head per sequence
of length L (causal, Q K^T and P V), so the packed and dense rows compare;
the dense equal-work row is B = 8 sequences of 2048 (the same total
tokens). Times: fa-run --repeat, best of --repeats processes. Every output
is checked against a float64 reference on sampled rows.

Usage:
  bench_varlen.py FA_RUN [--lengths ...] [--heads 8] [--d 128]
      [--threads 2] [--repeats 2] [--out results.md]

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import fa_run_ms  # noqa: E402


def run(fa_run, files, extra, threads, repeats):
    return fa_run_ms(fa_run, ["--q", files["q"], "--k", files["k"], "--v",
                              files["v"], "-o", files["o"]] + extra,
                     threads, repeats, runs=3)


def check(o, q, k, v, qs, causal_rows):
    """Float64 reference on sampled rows of batch 0 (document + causal)."""
    d = q.shape[-1]
    for h in (0, q.shape[1] - 1):
        for r in causal_rows:
            keep = np.arange(k.shape[2]) <= r
            if qs is not None:
                keep &= qs[0] == qs[0, r]
            s = k[0, h].astype(np.float64) @ q[0, h, r].astype(np.float64)
            s = np.where(keep, s / np.sqrt(d), -np.inf)
            p = np.exp(s - s.max())
            ref = (p / p.sum()) @ v[0, h].astype(np.float64)
            err = np.linalg.norm(o[0, h, r] - ref) / np.linalg.norm(ref)
            if not err < 1e-4:
                raise RuntimeError(f"row {r}: rel err {err}")


def check_token_major(o, q, k, v, cu):
    """Float64 reference on sampled rows of the first sequences and the
    last one (causal inside each sequence)."""
    d = q.shape[-1]
    for b in (0, 1, len(cu) - 2):
        s0, s1 = int(cu[b]), int(cu[b + 1])
        for r in (s0, s0 + 7, s1 - 1):
            for h in (0, q.shape[1] - 1):
                kk = k[s0:r + 1, h].astype(np.float64)
                s = kk @ q[r, h].astype(np.float64) / np.sqrt(d)
                p = np.exp(s - s.max())
                ref = (p / p.sum()) @ v[s0:r + 1, h].astype(np.float64)
                err = np.linalg.norm(o[r, h] - ref) / np.linalg.norm(ref)
                if not err < 1e-4:
                    raise RuntimeError(f"token-major row {r}: rel err {err}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fa_run")
    ap.add_argument("--lengths", type=int, nargs="+",
                    default=[4096, 512, 3072, 1024, 2560, 1536, 2048, 1536])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    L = args.lengths
    T, H, D = sum(L), args.heads, args.d
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        f = {n: os.path.join(tmp, n + ".npy")
             for n in ("q", "k", "v", "o", "qs")}

        def save(q, k, v):
            for n, a in (("q", q), ("k", k), ("v", v)):
                np.save(f[n], a)

        # Token-major: Q, K, V [T, H, D] and the offsets of the sequences.
        q = rng.standard_normal((T, H, D), dtype=np.float32)
        k = rng.standard_normal((T, H, D), dtype=np.float32)
        v = rng.standard_normal((T, H, D), dtype=np.float32)
        cu = np.concatenate([[0], np.cumsum(L)]).astype(np.int32)
        np.save(f["qs"], cu)
        save(q, k, v)
        ms = run(args.fa_run, f, ["--causal", "bottom-right",
                                  "--cu-seqlens-q", f["qs"],
                                  "--cu-seqlens-k", f["qs"]],
                 args.threads, args.repeats)
        check_token_major(np.load(f["o"]), q, k, v, cu)
        work = sum(2 * x * (x + 1) * D for x in L) * H
        rows.append(("token-major cu_seqlens, causal bottom-right", T, ms,
                     work))
        # Packed: one row of T tokens, segment ids per sequence.
        q = rng.standard_normal((1, H, T, D), dtype=np.float32)
        k = rng.standard_normal((1, H, T, D), dtype=np.float32)
        v = rng.standard_normal((1, H, T, D), dtype=np.float32)
        seg = np.repeat(np.arange(len(L), dtype=np.int32), L)[None]
        np.save(f["qs"], seg)
        save(q, k, v)
        ms = run(args.fa_run, f, ["--causal", "top-left", "--q-segments",
                                  f["qs"], "--k-segments", f["qs"]],
                 args.threads, args.repeats)
        starts = np.cumsum([0] + L[:-1])
        check(np.load(f["o"]), q, k, v, seg,
              [int(s) + x for s in starts[:3] for x in (0, 7)] + [T - 1])
        work = sum(2 * x * (x + 1) * D for x in L) * H
        rows.append(("packed, segment ids, causal top-left", T, ms, work))
        # Dense, padded to the longest, key lengths per sequence. The
        # causal top-left rows past a sequence's length are padding.
        B, N = len(L), max(L)
        q = rng.standard_normal((B, H, N, D), dtype=np.float32)
        k = rng.standard_normal((B, H, N, D), dtype=np.float32)
        v = rng.standard_normal((B, H, N, D), dtype=np.float32)
        save(q, k, v)
        ms = run(args.fa_run, f, ["--causal", "top-left"], args.threads,
                 args.repeats)
        rows.append((f"dense padded B={B} N={N} (pads computed)", B * N, ms,
                     work))
        # Dense equal work: B sequences of T / B.
        n = T // len(L)
        q = rng.standard_normal((len(L), H, n, D), dtype=np.float32)
        k = rng.standard_normal((len(L), H, n, D), dtype=np.float32)
        v = rng.standard_normal((len(L), H, n, D), dtype=np.float32)
        save(q, k, v)
        ms = run(args.fa_run, f, ["--causal", "top-left"], args.threads,
                 args.repeats)
        check(np.load(f["o"]), q, k, v, None, [0, 5, n - 1])
        rows.append((f"dense equal lengths B={len(L)} N={n}", T, ms,
                     2 * n * (n + 1) * D * H * len(L)))
    dense = rows[-1][3] / rows[-1][2] / 1e6
    lines = [f"Varlen prefill, f32, H = {H}, D = {D}, lengths {L} (sum {T}), "
             f"{args.threads} threads; GFLOP/s of useful causal work.", "",
             "| form | tokens | ms | GFLOP/s | vs dense equal lengths |",
             "|---|---:|---:|---:|---:|"]
    for name, tok, ms, work in rows:
        g = work / ms / 1e6
        lines.append(f"| {name} | {tok} | {ms:.1f} | {g:.1f} | "
                     f"{100 * g / dense:.0f}% |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
