#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""CPU benchmark of the score/mask modifiers (issue 15) through `fa-run`,
side by side with PyTorch in the same run when `import torch` works.

Rows (f32, B = 1, --heads heads, D = --d, one thread and --threads
threads):
  * --long-n (16384): bottom-right causal alone, and causal with
    window(--window, 0) (Mistral's sliding window): the window visits
    about (window + block) / (N / 2) of the causal key tiles, so it should
    run many times faster;
  * --short-n (4096): no mask, softcap(--softcap) and ALiBi (slopes
    2^(-8 h / H), BLOOM's): the cost of the score modifiers;
  * --long-n: a document mask from sorted segment ids (--docs equal
    documents) against no mask: key tiles of other documents are never
    visited, so it should run about --docs times faster.
Every output is checked against a float64 reference on sampled query rows
(relative Frobenius error < 1e-4). Times: fa-run's own `--time` (kernel
only), best of --repeats; torch: best of --repeats of the call alone. The
torch peers are what a PyTorch user would run on a CPU: SDPA with
`is_causal`, SDPA with a dense boolean window or document mask (O(N^2)
memory), and the eager score computation with tanh for the softcap and an
additive bias for ALiBi (SDPA has no softcap). Where torch has FlexAttention
(2.5+), every row also runs `torch.compile(flex_attention)` on the CPU with
the same `mask_mod` (through `create_block_mask`, so its block sparsity
applies) or `score_mod`; its compile is not timed. GFLOP/s counts 4 N^2 D
per head for the keys a row keeps (the useful work), so rows compare, and
is given as a fraction of the f32 FMA peak of --threads threads measured
in the same run (bench_common.probe, probes.c).

Usage:
  bench_modifiers.py FA_RUN [--long-n 16384] [--short-n 4096] [--d 128]
      [--heads 8] [--threads 2] [--window 512] [--softcap 50] [--docs 8]
      [--repeats 2] [--no-torch] [--no-flex] [--out results.md]

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import limits_line, machine, probe  # noqa: E402


def run_fa(cmd, out_path, repeats, env):
    best = None
    for _ in range(repeats):
        if os.path.exists(out_path):
            os.remove(out_path)
        # Let the OpenMP threads of this process's torch runs (which spin a
        # while after each op) go idle: they share the 2 cores with fa-run.
        time.sleep(1.0)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stderr}")
        ms = float(re.search(r"run: ([\d.]+) ms", p.stderr).group(1))
        best = ms if best is None else min(best, ms)
    return best, np.load(out_path)


def keep_matrix(rows, nq, nk, causal, window, qs=None, ks=None):
    """[len(rows), nk] bool: which keys each sampled row keeps."""
    k = np.arange(nk)[None, :]
    q = rows[:, None] + (nk - nq)
    keep = np.ones((len(rows), nk), bool)
    if causal:
        keep &= k <= q
    if window is not None:
        keep &= k >= q - window
    if qs is not None:
        keep &= qs[rows][:, None] == ks[None, :]
    return keep


def reference_rows(q, k, v, rows, keep, softcap=None, slopes=None,
                   nk_off=0):
    """float64 O for the sampled rows (per head)."""
    H, _, D = q.shape
    out = np.zeros((H, len(rows), v.shape[2]))
    for h in range(H):
        s = q[h, rows].astype(np.float64) @ k[h].astype(np.float64).T
        s /= np.sqrt(D)
        if softcap:
            s = softcap * np.tanh(s / softcap)
        if slopes is not None:
            dist = np.abs(rows[:, None] + nk_off - np.arange(k.shape[1])[None])
            s -= slopes[h] * dist
        s = np.where(keep, s, -np.inf)
        m = s.max(axis=1, keepdims=True)
        p = np.exp(s - m)
        out[h] = (p / p.sum(axis=1, keepdims=True)) @ v[h].astype(np.float64)
    return out


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rel_err(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fa_run")
    ap.add_argument("--long-n", type=int, default=16384)
    ap.add_argument("--short-n", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--softcap", type=float, default=50.0)
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None,
                    help="run only the sets (long, short) whose case names "
                    "contain this substring, e.g. 'ALiBi'")
    args = ap.parse_args()
    try:
        if args.no_torch:
            raise ImportError
        import torch
        import torch.nn.functional as F
        torch_ok = True
    except ImportError:
        torch_ok = False

    # FlexAttention, compiled for the CPU (torch 2.5+).
    flex = None
    flex_note = "not run (--no-flex)" if args.no_flex else "not available"
    if torch_ok and not args.no_flex:
        try:
            from torch.nn.attention.flex_attention import (create_block_mask,
                                                           flex_attention)
            flex = (torch.compile(flex_attention, dynamic=False),
                    create_block_mask)
            flex_note = "torch.compile(flex_attention)"
        except Exception as e:  # noqa: BLE001
            flex_note = f"not available ({type(e).__name__})"

    H, D = args.heads, args.d
    rng = np.random.default_rng(0)
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    log(f"# bench_modifiers.py, {datetime.date.today()}, {machine()}")
    log(f"f32, B=1, H={H}, D={D}; threads 1 and {args.threads}; torch "
        f"{torch.__version__ if torch_ok else 'not available'}; FlexAttention "
        f"{flex_note}")
    if torch_ok:
        for t in (1, args.threads):
            torch.set_num_threads(t)
            a = torch.randn(2048, 2048)
            best = min(_timed(lambda: a @ a) for _ in range(3))
            log(f"torch sgemm 2048^3 on {t} thread(s): "
                f"{2 * 2048 ** 3 / best / 1e9:.1f} GFLOP/s (a peer, not the "
                "limit)")
    peak = probe("fma", args.threads)
    log(limits_line(args.threads))
    log("")
    log("| N | case | keys kept / row | ours 1 thr ms | ours "
        f"{args.threads} thr ms | GFLOP/s ({args.threads} thr) | of FMA peak | "
        "vs base (same threads) | torch ms | torch peer | ours vs torch | "
        "flex ms | ours vs flex |")
    log("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        def case_set(n, cases):
            if args.only and not any(args.only in c[0] for c in cases):
                return
            q = rng.standard_normal((1, H, n, D), dtype=np.float32)
            k = rng.standard_normal((1, H, n, D), dtype=np.float32)
            v = rng.standard_normal((1, H, n, D), dtype=np.float32)
            p = {x: os.path.join(tmp, x + ".npy") for x in
                 ("q", "k", "v", "o")}
            for x, arr in (("q", q), ("k", k), ("v", v)):
                np.save(p[x], arr)
            rows = np.sort(rng.choice(n, size=min(n, 64), replace=False))
            base_ms = {}
            for name, flags, ref_kw, torch_fn, peer in cases:
                kept = ref_kw["keep"](rows).sum() / len(rows)
                gflop = 4 * H * n * kept * D / 1e9
                cmd = [args.fa_run, "attention", "--q", p["q"], "--k", p["k"],
                       "--v", p["v"], "-o", p["o"], "--time", "--quiet"] + \
                    [f.format(**p) for f in flags]
                env1 = dict(os.environ, OMP_NUM_THREADS="1")
                envn = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
                ms1, o = run_fa(cmd, p["o"], args.repeats, env1)
                msn, o2 = run_fa(cmd + ["--parallel"], p["o"], args.repeats,
                                 envn)
                ref = reference_rows(q[0], k[0], v[0], rows,
                                     ref_kw["keep"](rows),
                                     ref_kw.get("softcap"),
                                     ref_kw.get("slopes"))
                for what, out in (("1 thread", o), ("parallel", o2)):
                    e = rel_err(out[0][:, rows], ref)
                    if not e < 1e-4:
                        sys.exit(f"FAILED: {name} N={n} {what}: rel err {e:.2e}")
                base_ms.setdefault(ref_kw["base"], None)
                if name == ref_kw["base"]:
                    base_ms[name] = msn
                ratio = base_ms.get(ref_kw["base"])
                ratio = f"{ratio / msn:.2f}x" if ratio and name != \
                    ref_kw["base"] else "(base)"
                t_ms, t_txt = None, "skipped"
                if torch_ok and torch_fn is not None:
                    torch.set_num_threads(args.threads)
                    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                    best = None
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        to = torch_fn(torch, F, tq, tk, tv)
                        dt = (time.perf_counter() - t0) * 1e3
                        best = dt if best is None else min(best, dt)
                    e = rel_err(to[0][:, rows].double().numpy(), ref)
                    if not e < 1e-4:
                        sys.exit(f"FAILED: torch {name} N={n}: rel err {e:.2e}")
                    t_ms, t_txt = best, f"{best:.0f}"
                vs = f"{t_ms / msn:.2f}x" if t_ms else "-"
                f_ms = None
                if flex is not None and "flex" in ref_kw:
                    torch.set_num_threads(args.threads)
                    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                    run_flex = ref_kw["flex"](torch, flex, n)
                    fo = run_flex(tq, tk, tv)  # compiles
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        fo = run_flex(tq, tk, tv)
                        dt = (time.perf_counter() - t0) * 1e3
                        f_ms = dt if f_ms is None else min(f_ms, dt)
                    e = rel_err(fo[0][:, rows].double().numpy(), ref)
                    if not e < 1e-4:
                        sys.exit(f"FAILED: flex {name} N={n}: rel err {e:.2e}")
                f_txt = f"{f_ms:.0f}" if f_ms else "-"
                f_vs = f"{f_ms / msn:.2f}x" if f_ms else "-"
                log(f"| {n} | {name} | {kept:.0f} | {ms1:.0f} | {msn:.0f} | "
                    f"{gflop / msn * 1e3:.1f} | "
                    f"{100 * gflop / msn * 1e3 / peak:.1f}% | {ratio} | {t_txt} | "
                    f"{peer if t_ms else '-'} | {vs} | {f_txt} | {f_vs} |")

        n = args.long_n
        W = args.window

        def kc(rows, n=n):
            return keep_matrix(rows, n, n, True, None)

        def kw(rows, n=n):
            return keep_matrix(rows, n, n, True, W)

        def band(n):
            i = np.arange(n)
            return (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - W)

        def flex_mask(mask_mod):
            """A FlexAttention run with `mask_mod` (its block mask built
            once per N, outside the timing)."""
            def make(t, flex, n):
                fn, create_block_mask = flex
                bm = create_block_mask(mask_mod, None, None, n, n,
                                       device="cpu")
                return lambda q, k, v: fn(q, k, v, block_mask=bm)
            return make

        def flex_score(score_mod):
            def make(t, flex, n):
                return lambda q, k, v: flex[0](q, k, v, score_mod=score_mod)
            return make

        def flex_plain(t, flex, n):
            return lambda q, k, v: flex[0](q, k, v)

        def causal_mod(b, h, qi, ki):
            return ki <= qi

        def window_mod(b, h, qi, ki):
            return (ki <= qi) & (qi - ki <= W)

        case_set(n, [
            ("causal", ["--causal", "bottom-right"],
             dict(keep=kc, base="causal", flex=flex_mask(causal_mod)),
             lambda t, F, q, k, v: F.scaled_dot_product_attention(
                 q, k, v, is_causal=True), "SDPA is_causal"),
            (f"causal + window({W}, 0)", ["--causal", "bottom-right",
                                          "--window", f"{W},0"],
             dict(keep=kw, base="causal", flex=flex_mask(window_mod)),
             lambda t, F, q, k, v: F.scaled_dot_product_attention(
                 q, k, v, attn_mask=t.from_numpy(band(n))),
             "SDPA dense bool mask"),
        ])
        docs = np.repeat(np.arange(args.docs, dtype=np.int32),
                         -(-n // args.docs))[:n][None, :]
        segs = os.path.join(tmp, "segs.npy")
        np.save(segs, docs)

        def kn_long(rows, n=n):
            return keep_matrix(rows, n, n, False, None)

        def kd(rows, n=n, docs=docs):
            return keep_matrix(rows, n, n, False, None, docs[0], docs[0])

        def torch_docs(t, F, q, k, v, docs=docs):
            d = t.from_numpy(docs[0])
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=(d[:, None] == d[None, :]))

        docs_t = torch.from_numpy(docs[0]) if torch_ok else None

        def doc_mod(b, h, qi, ki):
            return docs_t[qi] == docs_t[ki]

        case_set(n, [
            ("no mask", [], dict(keep=kn_long, base="no mask",
                                 flex=flex_plain),
             lambda t, F, q, k, v: F.scaled_dot_product_attention(q, k, v),
             "SDPA"),
            (f"document mask ({args.docs} docs)",
             ["--q-segments", segs, "--k-segments", segs],
             dict(keep=kd, base="no mask", flex=flex_mask(doc_mod)),
             torch_docs,
             "SDPA dense bool mask"),
        ])

        n = args.short_n
        slopes = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)
        alibi_path = os.path.join(tmp, "alibi.npy")
        np.save(alibi_path, slopes.astype(np.float32))
        cap = args.softcap

        def kn(rows, n=n):
            return keep_matrix(rows, n, n, False, None)

        def torch_softcap(t, F, q, k, v):
            s = (q @ k.transpose(-1, -2)) / np.sqrt(D)
            s = cap * t.tanh(s / cap)
            return t.softmax(s, dim=-1) @ v

        def torch_alibi(t, F, q, k, v):
            i = t.arange(n)
            dist = (i[:, None] - i[None, :]).abs().float()
            bias = -t.from_numpy(slopes.astype(np.float32))[:, None, None] * dist
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None])

        slopes_t = (torch.from_numpy(slopes.astype(np.float32))
                    if torch_ok else None)
        # ALiBi written as a general score_mod (fa-run --mods): the same
        # formula as the built-in, through the region path.
        alibi_mods = os.path.join(tmp, "alibi_mods.mlir")
        with open(alibi_mods, "w") as f:
            f.write(f"""func.func @score_mod(%s: f32, %b: index, %h: index, %q: index, %k: index, %t: tensor<{H}xf32>) -> f32 {{
  %slope = tensor.extract %t[%h] : tensor<{H}xf32>
  %d = arith.subi %q, %k : index
  %a = math.absi %d : index
  %ai = arith.index_cast %a : index to i32
  %af = arith.sitofp %ai : i32 to f32
  %p = arith.mulf %slope, %af : f32
  %r = arith.subf %s, %p : f32
  return %r : f32
}}
""")

        def softcap_mod(score, b, h, qi, ki):
            return cap * torch.tanh(score / cap)

        def alibi_mod(score, b, h, qi, ki):
            return score - slopes_t[h] * (qi - ki).abs()

        case_set(n, [
            ("no mask", [], dict(keep=kn, base="no mask", flex=flex_plain),
             lambda t, F, q, k, v: F.scaled_dot_product_attention(q, k, v),
             "SDPA"),
            (f"softcap({cap:g})", ["--softcap", str(cap)],
             dict(keep=kn, base="no mask", softcap=cap,
                  flex=flex_score(softcap_mod)), torch_softcap,
             "eager tanh + softmax"),
            ("ALiBi", ["--alibi", alibi_path],
             dict(keep=kn, base="no mask", slopes=slopes,
                  flex=flex_score(alibi_mod)), torch_alibi,
             "SDPA dense additive bias"),
            ("score_mod ALiBi", ["--mods", alibi_mods, "--mod-operand",
                                 alibi_path],
             dict(keep=kn, base="no mask", slopes=slopes,
                  flex=flex_score(alibi_mod)), torch_alibi,
             "SDPA dense additive bias"),
        ])

        # Causality as a general mask_mod, without and with its block mask
        # (fa.create_block_mask, built once outside the kernel's time),
        # beside the built-in at the same tiles (64, 64).
        causal_mods = os.path.join(tmp, "causal_mods.mlir")
        with open(causal_mods, "w") as f:
            f.write("""func.func @mask_mod(%b: index, %h: index, %q: index, %k: index) -> i1 {
  %keep = arith.cmpi sle, %k, %q : index
  return %keep : i1
}
""")
        tiles = ["--block-q", "64", "--block-kv", "64"]

        def kc_short(rows, n=n):
            return keep_matrix(rows, n, n, True, None)

        case_set(n, [
            ("causal (tiles 64, 64)", ["--causal", "top-left"] + tiles,
             dict(keep=kc_short, base="causal (tiles 64, 64)",
                  flex=flex_mask(causal_mod)),
             lambda t, F, q, k, v: F.scaled_dot_product_attention(
                 q, k, v, is_causal=True), "SDPA is_causal"),
            ("mask_mod causal, no block mask", ["--mods", causal_mods] + tiles,
             dict(keep=kc_short, base="causal (tiles 64, 64)",
                  flex=flex_mask(causal_mod)),
             None, "-"),
            ("mask_mod causal + block mask", ["--mods", causal_mods,
                                              "--block-mask", "64,64"],
             dict(keep=kc_short, base="causal (tiles 64, 64)",
                  flex=flex_mask(causal_mod)),
             None, "-"),
        ])
    log("")
    log("`vs base`: the time of the row's base (causal; no mask) over this "
        "row's, same thread count (> 1: faster than the base). `ours vs "
        "torch`, `ours vs flex`: the peer's time over ours, both on "
        f"{args.threads} threads (> 1: ours faster).")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
