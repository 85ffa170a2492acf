# RUN: %python %s %fa_opt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of fa-raise-attention on the frontend-generated inputs.

Every .mlir file in Inputs/frontends (PyTorch through torch-mlir, JAX
through StableHLO; see the README there) must have a row in CASES below
saying what it computes; a file without one, or a row without a file, fails
the test, so no new input is skipped silently. For each file:

  * the signature is checked against the case's documented shapes and
    dtype (B=2, H=4, Hkv=2, N=16, D=32; bottom-right Nq=16, Nk=32; the
    dynamic files have '?' for N), so a mislabelled input is caught;
  * its public @main is renamed and called from a driver @main on seeded
    random inputs embedded as constants (dynamic files: static constants
    tensor.cast to the dynamic type, for N = 16, 13 and 77); f16/bf16 results
    are extended to f32 in the driver and printed with printMemrefF32;
  * un-raised: the file as it is, and raised: after fa-opt
    --fa-raise-attention, are each lowered with --fa-lower-to-cpu and run by
    mlir-runner (all cases in one module per half; a half that fails to
    lower or run is rerun case by case to name the file);
  * both are compared with a float64 NumPy reference written here from the
    semantic contract (docs/FA/FADialect.md), not from the frontends:
    S = Q K^T / sqrt(D), query head h reading kv head
    h // (Hq/Hkv), additive bias added to the scaled score, boolean masks
    (true = attend), key padding and causal alignment (top_left k <= q,
    bottom_right k <= q + Nk - Nq) removing keys, softmax over keys, P V.
    Random masks leave at least one key per row (fully masked rows are a
    documented difference between the IR and fa, not part of these inputs);
  * the raised text must hold exactly one fa.attention (fa.softmax for the
    standalone softmax files) and no contraction or softmax chain: no
    linalg matmul/softmax op, no linalg.generic with a reduction iterator,
    no math.exp (transposes, casts and mask construction may stay).

Tolerances are relative Frobenius errors (mlir_exec.rel_err) against the
float64 reference; the bounds, per dtype and half, are justified at TOL.

The harness was checked by perturbing it one change at a time (the
perturbations are not kept). In the reference: bottom-right treated as
top-left, top-left off by one, query head h reading kv head h % Hkv instead
of h // (Hq/Hkv), scale 1/D instead of 1/sqrt(D), the bias dropped, the
boolean mask shifted by one key, key padding off by one, softmax over the
wrong axis: each failed exactly the files it concerns, in both halves, with
relative errors 0.35 to 1.1. A CASES row removed failed with "no entry in
CASES"; a raised function that does not lower was named alone after the
case-by-case rerun; a raised function with a wrong scale failed alone;
hand-written raised modules (fa.attention with causal, GQA, float and
boolean masks, bf16/f16, dynamic N, [B,N,H,D] transposes; fa.softmax)
passed both checks.
The score-modifier rows (softcap, ALiBi, windows, their near misses) were
checked the same way: the reference's softcap dropped, its window's lower
bound one key lower, its ALiBi positions without the bottom-right shift, its
squared distance made |q - k|: each failed exactly its files in both halves
(rel err 0.15 to 1.4). In the raising, a window's left bound off by one, the
sign of a signed ALiBi's slopes, the sign of ALiBi's offset, the softcap
doubled and an upper bound one key later each failed the raised half here
or in raise_numerics.py.
Not caught: the reference reading the f16/bf16 inputs before rounding them
(bf16 4.5e-3 -> 5.3e-3, under the bound), i.e. changes at the level of one
input rounding are below what the low-precision bounds can see.
"""

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from mlir_exec import (PRINT_DECL, bf16_round, constant, execute, finish,  # noqa: E402
                       extf_call, print_call, rel_err, tensor_type)

FA_OPT = sys.argv[1]
FRONTENDS = os.path.join(HERE, "Inputs", "frontends")

B, H, HKV, N, D = 2, 4, 2, 16, 32
NQ_BR, NK_BR = 16, 32
SCALE = 1.0 / np.sqrt(D)
# The score modifiers of the generated files (make_inputs.py): softcap 2,
# JAX's constant ALiBi slopes 2^-(h+1).
SOFTCAP = 2.0
ALIBI_SLOPES = np.array([0.5, 0.25, 0.125, 0.0625])
# Dynamic files run at N = 16, 13 (inside one tile, not a multiple of the
# vector width) and 77 (two 64-key tiles, the second partial).
DYN_LENGTHS = (16, 13, 77)

# Relative Frobenius error bounds against the float64 reference.
#  f32: the computation is exact to ~1e-6; printMemrefF32 prints 6
#       significant digits (5e-7 relative per entry).
#  f16/bf16: the inputs are exact (the reference reads the rounded values),
#       but O is rounded to the input type (about 0.4u RMS alone, u the unit
#       roundoff: f16 2^-11 = 4.9e-4, bf16 2^-8 = 3.9e-3), and the frontend
#       IR also rounds S after Q K^T, the scaled S and P before P V; the JAX
#       files also accumulate both matmuls in f16/bf16. Measured un-raised:
#       torch 1.2u, JAX 2.4u (f16 5.6e-4 / 1.1e-3, bf16 4.5e-3 / 9.6e-3);
#       4u (f16 2.0e-3, bf16 1.6e-2) leaves 1.7x margin on the worst file.
#       Raised, fa.attention accumulates in f32 and rounds only O: 0.42u
#       measured with hand-raised modules, so its bound is 2u (f16 9.8e-4,
#       bf16 7.8e-3); a raised module that fails the structural check keeps
#       (some of) the frontend's arithmetic and gets the un-raised bound.
#       A wrong mask, head mapping or scale is an O(1) error.
U = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8}
TOL = {"un-raised": {"f32": 2e-5, "f16": 4 * U["f16"], "bf16": 4 * U["bf16"]},
       "raised": {"f32": 2e-5, "f16": 2 * U["f16"], "bf16": 2 * U["bf16"]}}


def A(**kw):
    """An attention case: `layout` bhnd ([B,H,N,D]) or bnhd ([B,N,H,D]),
    `causal` None/top_left/bottom_right, `hkv` kv heads, `extra` None, "bias"
    (f32 [B,1,Nq,Nk] added to the scaled score), "mask" (bool [B,1,Nq,Nk],
    true = attend) or "key_padding" (bool [B,1,1,Nk], true = a real key),
    `nq`/`nk`, `dyn` (the sequence length is '?'; q, k, v share it).
    More extras, as model code writes them: "bias_dt" (an additive
    [B,1,Nq,Nk] bias in the case's dtype), "int_mask" (i64 [B,1,Nq,Nk],
    masked where 0, filled with -1e9), "bert_mask" (f32 [B,Nk] of 0/1, added
    as (1 - mask) * -10000), "bias_finite" (an f32 [B,1,Nq,Nk] N(0,1)
    bias), "slopes" (f32 [H] ALiBi slopes).
    Score modifiers: `softcap` c (c * tanh(s / c) of the scaled score;
    `softcap_after_bias`: of the score plus the bias, a near miss),
    `window` (lo, hi): keys q + lo <= k <= q + hi kept (None: unbounded),
    `pos_bias` "alibi" (-slope[h] * |q + Nk - Nq - k|) or "squared"
    (-slope[h] * (q - k)^2), slopes from the "slopes" input or the
    constant ALIBI_SLOPES.
    `expect`: strings the raised text must hold (the modifier attributes),
    `forbid`: strings it must not (a materialized mask)."""
    c = dict(kind="attention", layout="bhnd", causal=None, hkv=H, extra=None,
             nq=N, nk=N, dyn=False, dtype="f32", softcap=None,
             softcap_after_bias=False, window=None, pos_bias=None,
             expect=(), forbid=())
    c.update(kw)
    return c


def S(**kw):
    """A standalone softmax over the last dim of a [B,H,N,N] tensor."""
    c = dict(kind="softmax", dtype="f32")
    c.update(kw)
    return c


TL, BR = "top_left", "bottom_right"
CASES = {
    # PyTorch (torch-mlir linalg-on-tensors).
    "torch_plain_f32": A(),
    "torch_causal_f32": A(causal=TL),
    "torch_causal_bottomright_f32": A(causal=BR, nq=NQ_BR, nk=NK_BR),
    "torch_gqa_bias_f32": A(hkv=HKV, extra="bias"),
    "torch_bnhd_f32": A(layout="bnhd"),
    "torch_plain_f16_softmax_f32": A(dtype="f16"),
    "torch_plain_bf16_softmax_f32": A(dtype="bf16"),
    "torch_softmax_f32": S(),
    "torch_plain_dyn_f32": A(dyn=True),
    "torch_causal_dyn_f32": A(causal=TL, dyn=True),
    "torch_sdpa_f32": A(),
    "torch_sdpa_decomposed_f32": A(),
    # F.scaled_dot_product_attention(is_causal=True) is top-left aligned.
    "torch_sdpa_causal_decomposed_f32": A(causal=TL),
    "torch_bool_mask_f32": A(extra="mask"),
    "torch_key_padding_f32": A(extra="key_padding"),
    # The mask is applied before the (positive) scale: the same attention.
    "torch_scale_after_mask_f32": A(causal=TL),
    # Model code: transformers' Llama (repeat_kv, bf16, additive mask input),
    # the Annotated Transformer (-1e9 fill), BERT (-10000 additive), and a
    # causal bias full(-inf).triu(1).
    "torch_hf_llama_bf16": A(hkv=HKV, dtype="bf16", extra="bias_dt"),
    "torch_annotated_f32": A(extra="int_mask"),
    "torch_bert_f32": A(extra="bert_mask"),
    "torch_triu_bias_f32": A(causal=TL),
    # JAX (StableHLO through IREE's input pipeline).
    # flax's dot_product_attention body (q scaled first, finfo.min fill) and
    # GQA through grouped einsums over q reshaped to [B,N,Hkv,G,D].
    "jax_flax_dpa_f32": A(layout="bnhd", extra="mask"),
    "jax_grouped_gqa_f32": A(layout="bnhd", hkv=HKV, causal=TL),
    "jax_plain_f32": A(),
    "jax_plain_matmul_f32": A(),
    "jax_causal_f32": A(causal=TL),
    "jax_causal_bottomright_f32": A(causal=BR, nq=NQ_BR, nk=NK_BR),
    # jnp.repeat(k, 2, axis=1) repeats each kv head in place, like
    # repeat_interleave: query head h reads kv head h // 2.
    "jax_gqa_bias_f32": A(hkv=HKV, extra="bias"),
    "jax_bnhd_f32": A(layout="bnhd"),
    "jax_plain_f16_softmax_f32": A(dtype="f16"),
    "jax_plain_bf16_softmax_f32": A(dtype="bf16"),
    "jax_softmax_f32": S(),
    "jax_plain_dyn_f32": A(dyn=True),
    "jax_causal_dyn_f32": A(causal=TL, dyn=True),
    # jax.nn.dot_product_attention takes [B,N,H,D]; is_causal is top-left.
    "jax_dpa_f32": A(layout="bnhd"),
    "jax_dpa_causal_f32": A(layout="bnhd", causal=TL),
    "jax_bool_mask_f32": A(extra="mask"),
    # Score modifiers (issue 15): Gemma 2's softcap, MPT's ALiBi, the
    # transformers sliding-window mask, JAX equivalents; near misses.
    "torch_softcap_f32": A(causal=TL, softcap=SOFTCAP,
                           expect=("causal(top_left)", "softcap(2.0"),
                           forbid=("mask(",)),
    "torch_softcap_biased_f32": A(extra="bias_finite", softcap=SOFTCAP,
                                  softcap_after_bias=True),
    "torch_alibi_f32": A(causal=TL, extra="slopes", pos_bias="alibi",
                         expect=("alibi(%arg3 : tensor<4xf32>)",
                                 "causal(top_left)"),
                         forbid=("mask(",)),
    # k > q - 5 and k <= q: window(4, -1) with causality.
    "torch_window_f32": A(causal=TL, window=(-4, None),
                          expect=("causal(top_left) window(4, -1)",),
                          forbid=("mask(",)),
    "jax_softcap_f32": A(causal=TL, softcap=SOFTCAP,
                         expect=("causal(top_left)", "softcap(2.0"),
                         forbid=("mask(",)),
    "jax_alibi_bottomright_f32": A(causal=BR, nq=NQ_BR, nk=NK_BR,
                                   pos_bias="alibi",
                                   expect=("alibi(", "causal(bottom_right)"),
                                   forbid=("mask(",)),
    "jax_alibi_squared_f32": A(pos_bias="squared", expect=("mask(",),
                               forbid=("alibi(",)),
    "jax_window_f32": A(causal=TL, window=(-4, None),
                        expect=("causal(top_left) window(4, -1)",),
                        forbid=("mask(",)),
    "jax_local_window_f32": A(window=(-2, 2), expect=("window(2, 2)",),
                              forbid=("mask(", "causal(")),
}

# Whether the raised module must hold fa.attention / fa.softmax. Every
# case is meant to be raised but the near misses that fa.attention cannot
# express (they must be left alone).
NOT_RAISED = {"torch_softcap_biased_f32"}
EXPECT_RAISED = {name: name not in NOT_RAISED for name in CASES}


# ---------------------------------------------------------------------------
# The float64 reference.
# ---------------------------------------------------------------------------

def ref_attention(q, k, v, causal, bias=None, keep=None, softcap=None,
                  softcap_after_bias=False, window=None):
    """q [B,Hq,Nq,D], k/v [B,Hkv,Nk,D] (float64); bias broadcastable to
    [B,Hq,Nq,Nk] and added to the scaled score (after the softcap c *
    tanh(s / c), or before it with softcap_after_bias); keep (bool,
    broadcastable) true = attend; window (lo, hi) keeps q + lo <= k <=
    q + hi."""
    b, hq, nq, _ = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    kv_head = np.arange(hq) // (hq // hkv)  # query head h -> kv head
    kh, vh = k[:, kv_head], v[:, kv_head]
    s = np.einsum("bhqd,bhkd->bhqk", q, kh) * SCALE
    if bias is not None and softcap_after_bias:
        s = s + bias
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    if bias is not None and not softcap_after_bias:
        s = s + bias
    allowed = np.ones((b, hq, nq, nk), dtype=bool)
    if keep is not None:
        allowed &= keep
    qi, ki = np.arange(nq)[:, None], np.arange(nk)[None, :]
    if causal == TL:
        allowed &= ki <= qi
    elif causal == BR:
        allowed &= ki <= qi + (nk - nq)
    if window is not None:
        lo, hi = window
        if lo is not None:
            allowed &= ki >= qi + lo
        if hi is not None:
            allowed &= ki <= qi + hi
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    assert np.isfinite(m).all(), "reference: a row with no key"
    p = np.exp(s - m)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, vh)


def ref_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# Inputs.
# ---------------------------------------------------------------------------

def seed_of(name):
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def low_precision(x, dtype):
    """(array to embed, its float64 value) for a float32 array `x`."""
    if dtype == "f32":
        return x, x.astype(np.float64)
    if dtype == "f16":
        h = x.astype(np.float16)
        return h, h.astype(np.float64)
    r = bf16_round(x)
    return r, r.astype(np.float64)


def expected_signature(c):
    """[(shape with '?' for dynamic dims, elt)] of the arguments, and the
    result's."""
    sq = "?" if c.get("dyn") else None
    if c["kind"] == "softmax":
        t = ((B, H, N, N), c["dtype"])
        return [t], t
    nq, nk = (sq or c["nq"]), (sq or c["nk"])
    if c["layout"] == "bhnd":
        qs, ks = (B, H, nq, D), (B, c["hkv"], nk, D)
    else:
        qs, ks = (B, nq, H, D), (B, nk, c["hkv"], D)
    args = [(qs, c["dtype"]), (ks, c["dtype"]), (ks, c["dtype"])]
    if c["extra"] == "bias":
        args.append(((B, 1, nq, nk), "f32"))
    elif c["extra"] == "mask":
        args.append(((B, 1, nq, nk), "i1"))
    elif c["extra"] == "key_padding":
        args.append(((B, 1, 1, nk), "i1"))
    elif c["extra"] == "bias_dt":
        args.append(((B, 1, nq, nk), c["dtype"]))
    elif c["extra"] == "int_mask":
        args.append(((B, 1, nq, nk), "i64"))
    elif c["extra"] == "bert_mask":
        args.append(((B, nk), "f32"))
    elif c["extra"] == "bias_finite":
        args.append(((B, 1, nq, nk), "f32"))
    elif c["extra"] == "slopes":
        args.append(((H,), "f32"))
    return args, (qs, c["dtype"])


def concrete(shape, n):
    return tuple(n if d == "?" else d for d in shape)


def make_inputs(name, c, n):
    """The inputs (arrays to embed, with their elt) and the float64
    reference result, for sequence length `n` where the case is dynamic."""
    rng = np.random.default_rng(seed_of(f"frontend.{name}.{n}"))
    args, _ = expected_signature(c)
    dt = c["dtype"]
    if c["kind"] == "softmax":
        x, x64 = low_precision(3 * rng.standard_normal(args[0][0], dtype=np.float32), dt)
        return [(x, dt)], ref_softmax(x64)
    shapes = [concrete(s, n) for s, _ in args]
    embedded, f64 = [], []
    for shape in shapes[:3]:
        x, x64 = low_precision(rng.standard_normal(shape, dtype=np.float32), dt)
        embedded.append((x, dt))
        f64.append(x64)
    q, k, v = f64
    if c["layout"] == "bnhd":
        q, k, v = (np.transpose(t, (0, 2, 1, 3)) for t in (q, k, v))
    nq, nk = q.shape[2], k.shape[2]
    bias = keep = None
    if c["extra"] == "bias":
        # Additive: N(0,1) with about a fifth -inf (at least one finite
        # entry per row).
        bias = rng.standard_normal((B, 1, nq, nk), dtype=np.float32)
        drop = rng.random((B, 1, nq, nk)) < 0.2
        drop[..., rng.integers(0, nk)] = False
        bias[drop] = -np.inf
        embedded.append((bias, "f32"))
        bias = bias.astype(np.float64)
    elif c["extra"] == "mask":
        keep = rng.random((B, 1, nq, nk)) < 0.6
        for bb in range(B):
            for qq in range(nq):
                if not keep[bb, 0, qq].any():
                    keep[bb, 0, qq, rng.integers(0, nk)] = True
        embedded.append((keep, "i1"))
    elif c["extra"] == "key_padding":
        lens = rng.integers(1, nk, size=B)  # 1 <= len < Nk: real padding
        keep = np.arange(nk)[None, None, None, :] < lens[:, None, None, None]
        embedded.append((np.ascontiguousarray(keep), "i1"))
    elif c["extra"] == "bias_dt":
        # In the model dtype; about a fifth at the dtype's lowest value (as
        # transformers fills its causal mask), one finite entry per row.
        raw = rng.standard_normal((B, 1, nq, nk), dtype=np.float32)
        drop = rng.random((B, 1, nq, nk)) < 0.2
        drop[..., rng.integers(0, nk)] = False
        raw[drop] = -3.3e38 if dt == "bf16" else -65504.0
        b_e, bias = low_precision(raw, dt)
        embedded.append((b_e, dt))
    elif c["extra"] == "int_mask":
        im = (rng.random((B, 1, nq, nk)) < 0.6).astype(np.int64)
        for bb in range(B):
            for qq in range(nq):
                if not im[bb, 0, qq].any():
                    im[bb, 0, qq, rng.integers(0, nk)] = 1
        embedded.append((im, "i64"))
        keep = im != 0
    elif c["extra"] == "bert_mask":
        lens = rng.integers(1, nk, size=B)
        fm = (np.arange(nk)[None, :] < lens[:, None]).astype(np.float32)
        embedded.append((fm, "f32"))
        bias = ((1.0 - fm.astype(np.float64)) * -10000.0)[:, None, None, :]
    elif c["extra"] == "bias_finite":
        bf = rng.standard_normal((B, 1, nq, nk), dtype=np.float32)
        embedded.append((bf, "f32"))
        bias = bf.astype(np.float64)
    slopes = ALIBI_SLOPES
    if c["extra"] == "slopes":
        sl = rng.uniform(0.1, 1.0, size=H).astype(np.float32)
        embedded.append((sl, "f32"))
        slopes = sl.astype(np.float64)
    if c["pos_bias"] is not None:
        qi = np.arange(nq)[:, None] + (nk - nq)
        ki = np.arange(nk)[None, :]
        dist = (np.abs(qi - ki) if c["pos_bias"] == "alibi"
                else (qi - ki).astype(np.float64) ** 2)
        pb = -slopes[None, :, None, None] * dist[None, None]
        bias = pb if bias is None else bias + pb
    o = ref_attention(q, k, v, c["causal"], bias, keep, c["softcap"],
                      c["softcap_after_bias"], c["window"])
    if c["layout"] == "bnhd":
        o = np.transpose(o, (0, 2, 1, 3))
    return embedded, o


# ---------------------------------------------------------------------------
# Driver modules.
# ---------------------------------------------------------------------------

_TENSOR = re.compile(r"tensor<([^>]*)>")


def parse_tensor(t):
    *dims, elt = t.split("x")
    return tuple("?" if d == "?" else int(d) for d in dims), elt


def run_fa_opt(path, args):
    r = subprocess.run([FA_OPT, path] + args, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def extract(text, tag):
    """The top-level ops of the module `text` (fa-opt output printed with
    --mlir-print-local-scope, so no aliases), every function renamed
    `<sym>__<tag>`; and the signature of the former @main."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("module"))
    end = max(i for i, l in enumerate(lines) if l.startswith("}"))
    body = "\n".join(lines[start + 1:end]) + "\n"
    head = re.search(r"func\.func (?:public |private )?@main\((.*)\) -> (.*) \{",
                     body)
    if head is None:
        raise ValueError("no func.func @main")
    args = [parse_tensor(t) for t in _TENSOR.findall(head.group(1))]
    results = [parse_tensor(t) for t in _TENSOR.findall(head.group(2))]
    for sym in set(re.findall(r"func\.func (?:public |private )?@([\w$.]+)", body)):
        body = re.sub("@" + re.escape(sym) + r"\b", f"@{sym}__{tag}", body)
    return body, args, results


def ttype(shape, elt):
    return tensor_type(shape, elt)


def driver(funcs, calls):
    """A module with the frontend functions `funcs` (text) and an @main that
    makes each call of `calls` and prints its result as f32."""
    out = ["module {\n", PRINT_DECL] + funcs + ["  func.func @main() {\n"]
    for j, call in enumerate(calls):
        names, types = [], []
        for a, ((arr, elt), (sig_shape, sig_elt)) in enumerate(
                zip(call["inputs"], call["sig_args"])):
            nm = f"c{j}_{a}"
            out.append(constant(nm, arr, elt if elt == "bf16" else None))
            static_t = ttype(arr.shape, elt)
            sig_t = ttype(sig_shape, sig_elt)
            if static_t != sig_t:
                out.append(f"    %{nm}_d = tensor.cast %{nm} : {static_t} to {sig_t}\n")
                nm += "_d"
            names.append("%" + nm)
            types.append(sig_t)
        rshape, relt = call["sig_result"]
        rt = ttype(rshape, relt)
        shape = call["ref"].shape
        out.append(f"    %r{j} = func.call @main__{call['tag']}({', '.join(names)})"
                   f" : ({', '.join(types)}) -> {rt}\n")
        val = f"%r{j}"
        if "?" in rshape:
            out.append(f"    %r{j}_s = tensor.cast {val} : {rt} to {ttype(shape, relt)}\n")
            val = f"%r{j}_s"
        if relt != "f32":
            out.append(extf_call(val, shape, relt, f"r{j}_f"))
            val = f"%r{j}_f"
        out.append(print_call(val, shape, f"p{j}"))
    out.append("    return\n  }\n}\n")
    return "".join(out)


def run_half(label, funcs, calls, workdir):
    """Runs every call (one module); {call index: output or error}."""
    if not calls:
        return {}
    used = sorted({c["tag"] for c in calls})
    text = driver([funcs[t] for t in used], calls)
    try:
        outs = execute(FA_OPT, text, workdir, label)
        if len(outs) == len(calls):
            return dict(enumerate(outs))
    except RuntimeError:
        pass
    # Name the culprit: one module per call.
    res = {}
    for j, call in enumerate(calls):
        text = driver([funcs[call["tag"]]], [call])
        try:
            [res[j]] = execute(FA_OPT, text, workdir, f"{label}.{j}")
        except (RuntimeError, ValueError) as e:
            lines = str(e).strip().splitlines()
            errs = [l for l in lines[1:] if "error" in l] or lines[1:2]
            res[j] = RuntimeError(lines[0].split(" on ")[0] + ": " +
                                  (errs[0][:300] if errs else "?"))
    return res


# ---------------------------------------------------------------------------
# Raised-text expectations.
# ---------------------------------------------------------------------------

LEFTOVER_OPS = ("linalg.matmul", "linalg.batch_matmul", "linalg.softmax",
                "linalg.contract", "linalg.batch_reduce_matmul",
                "linalg.matmul_transpose", "linalg.batch_matmul_transpose",
                "linalg.reduce", "math.exp")


def check_raised(c, text):
    problems = []
    for want in c.get("expect", ()):
        if want not in text:
            problems.append(f"no '{want}' in the raised text")
    for bad in c.get("forbid", ()):
        if bad in text:
            problems.append(f"'{bad}' in the raised text")
    want = "fa.attention" if c["kind"] == "attention" else "fa.softmax"
    other = "fa.softmax" if want == "fa.attention" else "fa.attention"
    def count(op):
        return len(re.findall(r'=\s*"?' + re.escape(op) + r'\b', text))
    n_want, n_other = count(want), count(other)
    if n_want != 1:
        problems.append(f"expected one {want}, found {n_want}")
    if n_other:
        problems.append(f"unexpected {other} x{n_other}")
    for op in LEFTOVER_OPS:
        k = text.count(op)
        if k:
            problems.append(f"{op} x{k} left")
    red = len(re.findall(r'iterator_types = \[[^\]]*"reduction"', text))
    if red:
        problems.append(f"{red} reduction linalg.generic left (contraction "
                        "or softmax max/sum)")
    return problems


# ---------------------------------------------------------------------------

def main():
    t0 = time.time()
    failures = []
    files = {f[:-len(".mlir")]: os.path.join(FRONTENDS, f)
             for f in sorted(os.listdir(FRONTENDS)) if f.endswith(".mlir")}
    for name in files:
        if name not in CASES:
            failures.append(f"{name}.mlir: no entry in CASES (what does it "
                            "compute?); add one")
    for name in CASES:
        if name not in files:
            failures.append(f"{name}: in CASES but Inputs/frontends/{name}.mlir "
                            "is missing")

    funcs = {"plain": {}, "raised": {}}
    calls = {"plain": [], "raised": []}
    raised_ok = {}
    with tempfile.TemporaryDirectory() as workdir:
        for tag, name in enumerate(sorted(n for n in files if n in CASES)):
            c, path = CASES[name], files[name]
            rc, plain, err = run_fa_opt(path, ["--mlir-print-local-scope"])
            if rc != 0:
                failures.append(f"{name}: fa-opt does not parse it: "
                                f"{err.strip().splitlines()[0][:200]}")
                continue
            body, sig_args, sig_res = extract(plain, tag)
            want_args, want_res = expected_signature(c)
            if sig_args != want_args or sig_res != [want_res]:
                failures.append(f"{name}: signature {sig_args} -> {sig_res} is not "
                                f"the case's {want_args} -> {want_res} "
                                "(mislabelled input or CASES row?)")
                continue
            funcs["plain"][tag] = body
            rc, raised, err = run_fa_opt(path, ["--fa-raise-attention",
                                                "--mlir-print-local-scope"])
            try:
                if rc != 0:
                    raise ValueError(err.strip().splitlines()[0][:200])
                rbody, rargs, rres = extract(raised, tag)
            except ValueError as e:
                failures.append(f"{name}: fa-opt --fa-raise-attention failed: {e}")
            else:
                if (rargs, rres) != (sig_args, sig_res):
                    failures.append(f"{name}: raising changed the signature to "
                                    f"{rargs} -> {rres}")
                else:
                    funcs["raised"][tag] = rbody
                problems = check_raised(c, rbody)
                raised_ok[tag] = not problems
                print(f"{name}: raised form: " +
                      ("; ".join(problems) if problems else "ok"))
                if EXPECT_RAISED[name] and problems:
                    failures.append(f"{name}: not raised: " + "; ".join(problems))
                if not EXPECT_RAISED[name] and not problems:
                    failures.append(f"{name}: a near miss was raised")
            for n in (DYN_LENGTHS if c.get("dyn") else (N,)):
                inputs, ref = make_inputs(name, c, n)
                call = dict(tag=tag, name=name, n=n, inputs=inputs, ref=ref,
                            sig_args=sig_args, sig_result=sig_res[0],
                            dtype=c["dtype"])
                calls["plain"].append(call)
                if tag in funcs["raised"]:
                    calls["raised"].append(call)

        for half, label in (("plain", "un-raised"), ("raised", "raised")):
            res = run_half(half, funcs[half], calls[half], workdir)
            for j, call in enumerate(calls[half]):
                what = call["name"] + (f" (N={call['n']})" if
                                       CASES[call["name"]].get("dyn") else "")
                o = res.get(j)
                if isinstance(o, Exception) or o is None:
                    failures.append(f"{what}: {label}: did not run: {o}")
                    continue
                tol = TOL["raised" if half == "raised" and raised_ok[call["tag"]]
                          else "un-raised"][call["dtype"]]
                if o.shape != call["ref"].shape:
                    failures.append(f"{what}: {label}: printed shape {o.shape}, "
                                    f"expected {call['ref'].shape}")
                    continue
                err = rel_err(o, call["ref"])
                print(f"{what} {label}: rel err {err:.2e} (tol {tol:.1e})")
                if not err < tol:
                    failures.append(f"{what}: {label}: rel err {err:.2e} >= "
                                    f"{tol:.1e} against the float64 reference")

    print(f"{len(files)} files, {time.time() - t0:.1f} s")
    finish(failures)


if __name__ == "__main__":
    main()
