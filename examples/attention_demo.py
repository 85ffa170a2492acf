#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""fa's main job on the CPU: compile a grouped-query, bottom-right causal
attention kernel with key lengths, run it on random data with `fa-run`, and
check O and LSE against an independent float64 reference.

Usage: attention_demo.py FA_RUN [--n N] [--d D]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def reference(q, k, v, lens, scale):
    """Naive float64 attention: GQA, bottom-right causal, key lengths."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", q, k)
    nq, nk = q.shape[2], k.shape[2]
    qi, ki = np.arange(nq)[:, None], np.arange(nk)[None, :]
    keep = (ki <= qi + (nk - nq))[None, None] & \
        (ki[None, None] < np.clip(lens, 0, nk)[:, None, None, None])
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    empty = np.isneginf(m[..., 0])
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    l = p.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(empty[..., None], 0, np.einsum("bhqk,bhkd->bhqd", p, v) / l[..., None])
        lse = np.where(empty, -np.inf, m[..., 0] + np.log(l))
    return o, lse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fa_run")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--d", type=int, default=64)
    args = ap.parse_args()

    rng = np.random.default_rng()
    B, Hq, Hkv, N, D = 2, 8, 2, args.n, args.d
    q = rng.standard_normal((B, Hq, N, D), dtype=np.float32)
    k = rng.standard_normal((B, Hkv, N, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, N, D), dtype=np.float32)
    lens = np.array([N, N // 3], dtype=np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {n: os.path.join(tmp, n + ".npy") for n in ("q", "k", "v", "lens", "o", "lse")}
        for name, arr in (("q", q), ("k", k), ("v", v), ("lens", lens)):
            np.save(paths[name], arr)
        cmd = [args.fa_run, "attention", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
               "--kv-lens", paths["lens"], "--causal", "bottom-right", "-o", paths["o"],
               "--lse", paths["lse"], "--time"]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        o, lse = np.load(paths["o"]), np.load(paths["lse"])
    ref_o, ref_lse = reference(q, k, v, lens, 1.0 / np.sqrt(D))
    rel = np.linalg.norm(o - ref_o) / np.linalg.norm(ref_o)
    fin = np.isfinite(ref_lse)
    lse_err = np.abs(lse[fin] - ref_lse[fin]).max()
    masked_ok = np.all(o[~fin] == 0) and np.all(np.isneginf(lse[~fin]))
    ok = rel < 1e-5 and lse_err < 1e-4 and masked_ok and not np.isnan(o).any()
    print(f"B={B} Hq={Hq} Hkv={Hkv} N={N} D={D} causal=bottom-right kv_lens={lens.tolist()}")
    print(f"rel. error of O vs float64 reference: {rel:.2e} (limit 1e-5)")
    print(f"max abs error of LSE: {lse_err:.2e} (limit 1e-4)")
    print(f"fully masked rows: {int((~fin).sum())}, exactly O=0 and LSE=-inf: {masked_ok}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
