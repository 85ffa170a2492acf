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
tokens). Each rate is also a fraction of the f32 FMA peak of --threads
threads that bench_common.probe measures in the same run (probes.c). Times: fa-run --repeat, best of --repeats processes per round.
Every output is checked against a float64 reference on sampled rows.

Usage:
  bench_varlen.py FA_RUN [FA_RUN ...] [--lengths ...] [--heads 8]
      [--d 128] [--threads 2] [--repeats 2] [--rounds 3] [--out results.md]

Every form runs once per round (each fa-run binary given, for a side by
side of two builds), best of --rounds: on a host whose speed moves by tens
of percent within minutes, forms measured in turn compare better than
forms measured one after the other.

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import fa_run_ms, limits_line, machine, probe  # noqa: E402


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
    ap.add_argument("fa_run", nargs="+")
    ap.add_argument("--lengths", type=int, nargs="+",
                    default=[4096, 512, 3072, 1024, 2560, 1536, 2048, 1536])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    L = args.lengths
    T, H, D = sum(L), args.heads, args.d
    rng = np.random.default_rng(0)
    work = sum(2 * x * (x + 1) * D for x in L) * H
    with tempfile.TemporaryDirectory() as tmp:
        forms = []

        def form(name, tokens, flops, q, k, v, extra, checker, **named):
            """Saves one form's inputs and appends the form to `forms`;
            its checker reads Q, K and V back from the files, so that the
            arrays of every form are not held for the whole run."""
            i = len(forms)
            f = {n: os.path.join(tmp, f"{n}{i}.npy")
                 for n in ("q", "k", "v", "o")}
            for n, a in (("q", q), ("k", k), ("v", v)):
                np.save(f[n], a)
            for n, a in named.items():
                f[n] = os.path.join(tmp, f"{n}{i}.npy")
                np.save(f[n], a)
            forms.append((name, tokens, flops, f,
                          [x.format(**f) for x in extra],
                          lambda o: checker(o, *(np.load(f[n], mmap_mode="r")
                                                 for n in ("q", "k", "v")))))

        # Token-major: Q, K, V [T, H, D] and the offsets of the sequences.
        cu = np.concatenate([[0], np.cumsum(L)]).astype(np.int32)
        form("token-major cu_seqlens, causal bottom-right", T, work,
             *(rng.standard_normal((T, H, D), dtype=np.float32)
               for _ in range(3)),
             ["--causal", "bottom-right", "--cu-seqlens-q", "{cu}",
              "--cu-seqlens-k", "{cu}"],
             lambda o, q, k, v: check_token_major(o, q, k, v, cu), cu=cu)
        # Packed: one row of T tokens, segment ids per sequence.
        seg = np.repeat(np.arange(len(L), dtype=np.int32), L)[None]
        starts = np.cumsum([0] + L[:-1])
        form("packed, segment ids, causal top-left", T, work,
             *(rng.standard_normal((1, H, T, D), dtype=np.float32)
               for _ in range(3)),
             ["--causal", "top-left", "--q-segments", "{seg}",
              "--k-segments", "{seg}"],
             lambda o, q, k, v: check(
                 o, q, k, v, seg,
                 [int(s) + x for s in starts[:3] for x in (0, 7)] + [T - 1]),
             seg=seg)
        # Dense, padded to the longest, key lengths per sequence. The
        # causal top-left rows past a sequence's length are padding.
        B, N = len(L), max(L)
        form(f"dense padded B={B} N={N} (pads computed)", B * N, work,
             *(rng.standard_normal((B, H, N, D), dtype=np.float32)
               for _ in range(3)),
             ["--causal", "top-left"], lambda o, q, k, v: None)
        # Dense equal work: B sequences of T / B.
        n = T // len(L)
        form(f"dense equal lengths B={len(L)} N={n}", T,
             2 * n * (n + 1) * D * H * len(L),
             *(rng.standard_normal((len(L), H, n, D), dtype=np.float32)
               for _ in range(3)),
             ["--causal", "top-left"],
             lambda o, q, k, v: check(o, q, k, v, None, [0, 5, n - 1]))
        # Every form (and binary) once per round, best over the rounds: the
        # ratios compare times taken minutes apart at most, not a form's
        # quiet minute with another's busy one.
        best = {}
        for _ in range(args.rounds):
            for fa_run in args.fa_run:
                for name, _, _, f, extra, checker in forms:
                    ms = run(fa_run, f, extra, args.threads, args.repeats)
                    checker(np.load(f["o"]))
                    key = (fa_run, name)
                    best[key] = min(best.get(key, float("inf")), ms)
    peak = probe("fma", args.threads)
    lines = [f"Machine: {machine()}; {limits_line(args.threads)}.", "",
             f"Varlen prefill, f32, H = {H}, D = {D}, lengths {L} (sum {T}), "
             f"{args.threads} threads; GFLOP/s of useful causal work; best "
             f"of {args.rounds} interleaved rounds.", "",
             "| form | tokens | ms | GFLOP/s | of FMA peak | vs dense equal lengths |",
             "|---|---:|---:|---:|---:|---:|"]
    for fa_run in args.fa_run:
        name, _, work, _, _, _ = forms[-1]
        dense = work / best[(fa_run, name)] / 1e6
        if len(args.fa_run) > 1:
            lines.append(f"| **{fa_run}** | | | | | |")
        for name, tok, work, _, _, _ in forms:
            ms = best[(fa_run, name)]
            g = work / ms / 1e6
            lines.append(f"| {name} | {tok} | {ms:.1f} | {g:.1f} | "
                         f"{100 * g / peak:.1f}% | {100 * g / dense:.0f}% |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
