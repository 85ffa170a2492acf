#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Wiring fa's forward and backward kernels into an autograd (docs/backward.md).

The forward saves what the backward needs: Q, K, V, the output O and the
log-sum-exp LSE (fa-run attention --lse). The backward gets dO and returns
dQ, dK, dV (fa-run attention-backward). `FaAttention` wraps both as a
torch.autograd.Function when torch is installed.

The demo checks the gradients end to end against the forward kernel itself:
for random directions U, the directional derivative of sum(O * dO) along U,
by central differences of two forward runs, must match <dX, U> to 0.1% of
the larger of |<dX, U>| and ||dX|| (the typical size of <dX, U> for a
standard normal U: a direction almost orthogonal to dX leaves only the
float32 noise of the forward runs, which a relative error alone would
magnify). With torch it also compares with torch's own SDPA gradients.

Usage: autograd_demo.py FA_RUN [--n N] [--d D]
"""

import argparse
import os
import subprocess
import tempfile

import numpy as np

FA_RUN = "fa-run"


def _run(args):
    r = subprocess.run([FA_RUN] + args + ["--quiet"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())


def fa_forward(q, k, v, causal="none"):
    """O and LSE of attention (float32 arrays [B, H, N, D])."""
    with tempfile.TemporaryDirectory() as tmp:
        p = {n: os.path.join(tmp, n + ".npy") for n in "qkv"}
        for n, a in zip("qkv", (q, k, v)):
            np.save(p[n], np.ascontiguousarray(a, dtype=np.float32))
        o, lse = os.path.join(tmp, "o.npy"), os.path.join(tmp, "lse.npy")
        _run(["attention", "--q", p["q"], "--k", p["k"], "--v", p["v"],
              "-o", o, "--lse", lse, "--causal", causal])
        return np.load(o), np.load(lse)


def fa_backward(q, k, v, o, lse, do, causal="none"):
    """dQ, dK, dV from the forward's inputs, O, LSE and dO."""
    with tempfile.TemporaryDirectory() as tmp:
        p = {n: os.path.join(tmp, n + ".npy") for n in
             ("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv")}
        for n, a in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do)):
            np.save(p[n], np.ascontiguousarray(a, dtype=np.float32))
        np.save(p["lse"], np.ascontiguousarray(lse, dtype=np.float32))
        _run(["attention-backward", "--q", p["q"], "--k", p["k"], "--v",
              p["v"], "--out", p["o"], "--lse", p["lse"], "--do", p["do"],
              "--dq", p["dq"], "--dk", p["dk"], "--dv", p["dv"],
              "--causal", causal])
        return np.load(p["dq"]), np.load(p["dk"]), np.load(p["dv"])


try:
    import torch

    class FaAttention(torch.autograd.Function):
        """softmax(Q K^T / sqrt(D)) V with fa's kernels (CPU tensors)."""

        @staticmethod
        def forward(ctx, q, k, v, causal="none"):
            o, lse = fa_forward(q.detach().numpy(), k.detach().numpy(),
                                v.detach().numpy(), causal)
            o, lse = torch.from_numpy(o), torch.from_numpy(lse)
            # Save O and LSE: the backward recomputes P from them.
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal = causal
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = fa_backward(*(t.detach().numpy()
                                       for t in (q, k, v, o, lse)),
                                     do.detach().numpy(), ctx.causal)
            return (torch.from_numpy(dq), torch.from_numpy(dk),
                    torch.from_numpy(dv), None)
except ImportError:
    torch = None


def main():
    global FA_RUN
    ap = argparse.ArgumentParser()
    ap.add_argument("fa_run")
    ap.add_argument("--n", type=int, default=96)
    ap.add_argument("--d", type=int, default=32)
    args = ap.parse_args()
    FA_RUN = args.fa_run

    rng = np.random.default_rng()
    B, Hq, Hkv, N, D = 2, 4, 2, args.n, args.d
    q = rng.standard_normal((B, Hq, N, D), dtype=np.float32)
    k = rng.standard_normal((B, Hkv, N, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, N, D), dtype=np.float32)
    do = rng.standard_normal((B, Hq, N, D), dtype=np.float32)
    causal = "bottom-right"
    o, lse = fa_forward(q, k, v, causal)
    grads = fa_backward(q, k, v, o, lse, do, causal)

    # Directional derivatives of sum(O * dO) through the forward kernel.
    def loss(x):
        return float((fa_forward(*x, causal)[0].astype(np.float64) *
                      do).sum())
    worst = 0.0
    t = 1e-2
    for i, name in enumerate(("dQ", "dK", "dV")):
        for _ in range(2):
            u = rng.standard_normal((q, k, v)[i].shape).astype(np.float32)
            plus = [q, k, v]
            minus = [q, k, v]
            plus[i] = (q, k, v)[i] + t * u
            minus[i] = (q, k, v)[i] - t * u
            numeric = (loss(plus) - loss(minus)) / (2 * t)
            g = grads[i].astype(np.float64)
            analytic = float((g * u).sum())
            err = abs(numeric - analytic) / max(abs(numeric),
                                                np.linalg.norm(g), 1e-6)
            worst = max(worst, err)
            print(f"{name}: directional derivative {analytic:.6g}, central "
                  f"difference {numeric:.6g}")
    if not worst < 1e-3:
        raise SystemExit(f"FAILED: directional derivatives differ by "
                         f"{worst:.2e}")
    print(f"directional derivatives agree (worst relative difference "
          f"{worst:.1e})")

    if torch is not None:
        tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        FaAttention.apply(tq, tk, tv, causal).backward(torch.from_numpy(do))
        rq, rk, rv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
        mask = torch.ones(N, N, dtype=torch.bool).tril()
        ref = torch.nn.functional.scaled_dot_product_attention(
            rq, rk, rv, attn_mask=mask, enable_gqa=True)
        ref.backward(torch.from_numpy(do))
        for name, a, b in (("dQ", tq, rq), ("dK", tk, rk), ("dV", tv, rv)):
            err = (a.grad - b.grad).norm() / b.grad.norm()
            print(f"{name} vs torch: relative error {err:.1e}")
            if not err < 1e-4:
                raise SystemExit(f"FAILED: {name} differs from torch's")


if __name__ == "__main__":
    main()
