#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks fa's ahead-of-time attention kernels and times them against
torch.nn.functional.scaled_dot_product_attention, through FARuntime's C API
(ctypes, fa_runtime.py). Run by bench/gpu/run.sh on the GPU machine:

    check_and_time.py --lib BUILD/libFARuntime.so --artifacts bench/gpu/artifacts \\
                      --device cuda --out $OUT

1. Checks. Every `check_*` kernel (the `check_paged_*` and `check_varlen_*`
   serving kernels on their own cases: shuffled block tables with a shared
   page, empty and one-key sequences, ragged token-major batches, checked
   with fa_check_block_table / fa_check_cu_seqlens on the host first), and
   every other (bf16/f16/f32, D 64/128, causal none and
   bottom-right, GQA Hq 8 / Hkv 2, key lengths, LSE) runs on fresh random
   inputs of several shapes (ragged lengths, Nq > Nk, decode, rows with no
   key at all); outputs are poisoned with NaN first. O and LSE are compared
   with an independent float64 reference (numpy, on the host) and, where
   torch is present, with a float32 reference computed by torch on the same
   device: O within the dtype's max-abs and relative-L2 tolerances, LSE
   within 1e-3 relative, and every row with no key exactly O = 0, LSE = -inf.
2. Timing (needs torch with CUDA). Every `bench_*` kernel (B 1, H 16, D 128,
   bf16/f16, causal none/bottom-right) at N = 1024, 4096, 8192, 16384: its
   output is first checked against SDPA's, then both are timed in the same
   process with CUDA events (warm-up, then the median of several runs sized
   to the time budget) on torch's current stream. TFLOP/s count 4*B*H*N*N*D
   FLOPs, halved for causal.
3. Backward. Every `check_bwd_*` kernel (attention_backward) runs the
   check shapes with O and LSE from the float64 forward and random dO; dQ,
   dK, dV (poisoned first) are compared with float64 gradients (relative
   L2 per dtype, GRAD_TOLERANCE) and must be exactly 0 where nothing
   contributes. Every `bwd_*` kernel is checked against torch's autograd
   gradients of SDPA and timed beside them at B = 1, Nq = Nk = 1024, 4096,
   8192 (--backward-sizes); TFLOP/s count 10*B*H*N*N*D, halved for causal.
4. Decode timing. Every `decode_*` kernel (Hq 32, Hkv 8, D 128, no
   causality) runs one decode step, B = 4 sequences of one new query
   against Nk = 1024, 8192 and 32768 cached keys, checked against and timed
   beside SDPA (enable_gqa=True) on the same data. `decode_paged_*` kernels
   read the keys from a paged cache (shuffled pages); SDPA reads the same
   keys gathered contiguous. TB/s count the bytes a
   step must move (Q, K, V, O), against the H200's published 4.8 TB/s.

Writes results.md (the tables) and results.json to --out and prints the
tables last. Exits 1 on any mismatch, unwritten element or failed call; a
timing row skipped for the time budget is reported, not failed.

--device cpu runs the checks on CPU artifacts (bench/gpu/prepare.sh --cpu)
with numpy host buffers: a dry run of this script without a GPU.
--memory runtime uses FARuntime's fa_cuda_malloc/memcpy helpers instead of
torch for the checks (no torch needed; no timing).
"""

import argparse
import json
import math
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fa_runtime import FARuntime, FARuntimeError  # noqa: E402

# O tolerances against the references: (max abs error, relative L2 error).
O_TOLERANCE = {"f32": (2e-3, 1e-3), "f16": (1e-2, 5e-3), "bf16": (2e-2, 1e-2)}
# LSE: |lse - ref| <= LSE_RTOL * max(1, |ref|).
LSE_RTOL = 1e-3
# The torch float32 reference against the float64 one (a sanity check of the
# references themselves, not of the kernel).
REFERENCE_AGREEMENT = 1e-4

BENCH_SIZES = (1024, 4096, 8192, 16384)
BACKWARD_SIZES = (1024, 4096, 8192)
# Decode timing: B sequences of one query, Nk cached keys.
DECODE_SIZES = (1024, 8192, 32768)
DECODE_BATCH = 4
# The H200's HBM3e bandwidth (NVIDIA's data sheet), TB/s.
H200_TBPS = 4.8

# Shapes of the checks: (B, Nq, Nk, key lengths or None for all Nk).
CHECK_CASES = [
    ("masked batch", 2, 128, 128, [0, 77]),
    ("ragged", 1, 77, 203, None),
    ("Nq > Nk", 3, 100, 37, [37, 20, 1]),
    ("decode", 2, 1, 300, [300, 150]),
    ("multi-tile", 1, 256, 512, [400]),
]
# Paged caches: (label, Nq, kv_lens; None = three pages and one key).
PAGED_CASES = [
    ("decode", 1, [None, 0, 1, 700]),
    ("decode GQA chunk", 5, [300, None, 5]),
    ("prefill", 70, [70, 200]),
]
# Variable-length batches: (label, query lengths, key lengths).
VARLEN_CASES = [
    ("ragged", [5, 0, 1, 130, 64], [9, 3, 0, 130, 200]),
    ("prefill", [200, 77], [200, 77]),
]


def log(*args):
    print(*args, flush=True)


# ---------------------------------------------------------------------------
# Element encodings (numpy; bf16 as uint16 bit patterns)
# ---------------------------------------------------------------------------

POISON_BITS = {"f32": 0x7FC00000, "f16": 0x7E00, "bf16": 0x7FC0}
STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16,
           "i32": np.int32}


def f32_to_bf16_bits(x):
    """Rounds float32 values to bf16 (nearest even), as uint16 patterns."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) >> 16).astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def quantize(x, dtype):
    """(storage array, exact float64 values) of float32 data in `dtype`."""
    if dtype == "f32":
        raw = np.ascontiguousarray(x, dtype=np.float32)
        return raw, raw.astype(np.float64)
    if dtype == "f16":
        raw = np.ascontiguousarray(x.astype(np.float16))
        return raw, raw.astype(np.float64)
    if dtype == "bf16":
        raw = f32_to_bf16_bits(x)
        return raw, bf16_bits_to_f32(raw).astype(np.float64)
    raise ValueError(dtype)


def decode(raw, dtype):
    """Storage array -> float64."""
    if dtype == "bf16":
        return bf16_bits_to_f32(raw).astype(np.float64)
    return raw.astype(np.float64)


def poisoned(shape, dtype):
    raw = np.empty(shape, dtype=STORAGE[dtype])
    view = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}[dtype]
    raw.view(view)[...] = POISON_BITS[dtype]
    return raw


# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------


def keep_mask(B, Nq, Nk, causal, kv_lens):
    """[B, 1, Nq, Nk] bool: which keys each query row attends."""
    keep = np.ones((B, 1, Nq, Nk), dtype=bool)
    if causal == "bottom_right":
        keep &= np.tril(np.ones((Nq, Nk), dtype=bool), k=Nk - Nq)[None, None]
    elif causal == "top_left":
        keep &= np.tril(np.ones((Nq, Nk), dtype=bool))[None, None]
    if kv_lens is not None:
        keep &= (np.arange(Nk)[None, None, None, :] <
                 np.asarray(kv_lens)[:, None, None, None])
    return keep


def modify(s, keep, B, Hq, Nq, Nk, causal, mods):
    """The score/mask modifiers of fa.attention (FlashAttention 2's
    definitions, docs/FA/FADialect.md) on scaled scores `s` [B,Hq,Nq,Nk] and
    the keep mask: window(L, R) keeps q+off-L <= k <= q+off+R (-1 unbounded),
    softcap c: s = c tanh(s / c), ALiBi: s -= slope * |q+off-k|, chunk C:
    floor((q+off)/C) == floor(k/C), segments: qs[b,q] == ks[b,k]; off =
    Nk - Nq for bottom_right, else 0. Returns (s, keep)."""
    off = Nk - Nq if causal == "bottom_right" else 0
    pos = np.arange(Nq)[:, None] + off
    key = np.arange(Nk)[None, :]
    keep = np.array(np.broadcast_to(keep, s.shape))
    if mods.get("softcap"):
        c = mods["softcap"]
        s = c * np.tanh(s / c)
    if mods.get("alibi") is not None:
        slopes = np.asarray(mods["alibi"], np.float64)
        slopes = slopes[None, :] if slopes.ndim == 1 else slopes
        s = s - slopes[:, :, None, None] * np.abs(pos - key)[None, None]
    if mods.get("window"):
        left, right = mods["window"]
        if left >= 0:
            keep &= (key >= pos - left)[None, None]
        if right >= 0:
            keep &= (key <= pos + right)[None, None]
    if mods.get("chunk"):
        c = mods["chunk"]
        keep &= (pos // c == key // c)[None, None]
    if mods.get("q_segments") is not None:
        qs, ks = mods["q_segments"], mods["k_segments"]
        keep &= qs[:, None, :, None] == ks[:, None, None, :]
    return s, keep


def reference_numpy(q, k, v, scale, causal, kv_lens, mods=None):
    """float64 O [B,Hq,Nq,Dv] and LSE [B,Hq,Nq]: softmax(scale QK^T + masks)V;
    query head h reads kv head h // (Hq / Hkv); rows with no key give O = 0
    and LSE = -inf. `mods`: modify()'s modifiers."""
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    k = np.repeat(k, Hq // Hkv, axis=1)
    v = np.repeat(v, Hq // Hkv, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    keep = np.broadcast_to(keep_mask(B, Nq, Nk, causal, kv_lens), s.shape)
    if mods:
        s, keep = modify(s, keep, B, Hq, Nq, Nk, causal, mods)
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.where(keep, np.exp(s - m), 0.0)
    l = p.sum(axis=-1, keepdims=True)
    has_keys = l > 0
    o = np.where(has_keys, np.einsum("bhqk,bhkd->bhqd", p, v) /
                 np.where(has_keys, l, 1.0), 0.0)
    lse = np.where(has_keys[..., 0],
                   m[..., 0] + np.log(np.where(has_keys[..., 0], l[..., 0], 1.0)),
                   -np.inf)
    return o, lse


def reference_backward_numpy(q, k, v, do, scale, causal, kv_lens, mods=None):
    """float64 dQ, dK, dV of sum(O * dO) (docs/backward.md): P = exp(S -
    LSE) over the kept keys, dS = P (dO V^T - rowsum(dO * O)) (times 1 -
    tanh^2 of the scaled score over the softcap), dQ = scale dS K, dK =
    scale dS^T Q, dV = P^T dO; GQA sums dK and dV over a group's heads."""
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    group = Hq // Hkv
    kr = np.repeat(k, group, axis=1)
    vr = np.repeat(v, group, axis=1)
    scaled = np.einsum("bhqd,bhkd->bhqk", q, kr) * scale
    keep = np.broadcast_to(keep_mask(B, Nq, Nk, causal, kv_lens), scaled.shape)
    s = scaled
    if mods:
        s, keep = modify(scaled, keep, B, Hq, Nq, Nk, causal, mods)
    o, lse = reference_numpy(q, k, v, scale, causal, kv_lens, mods)
    live = keep & np.isfinite(lse)[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.where(live, np.exp(np.where(live, s, 0.0) -
                                  np.where(live, lse[..., None], 0.0)), 0.0)
    dv = np.einsum("bhqk,bhqd->bhkd", p, do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, vr)
    delta = (do * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta)
    if mods and mods.get("softcap"):
        ds = ds * (1.0 - np.tanh(scaled / mods["softcap"]) ** 2)
    dq = scale * np.einsum("bhqk,bhkd->bhqd", ds, kr)
    dk = scale * np.einsum("bhqk,bhqd->bhkd", ds, q)
    fold = lambda x: x.reshape(B, Hkv, group, Nk, x.shape[-1]).sum(axis=2)
    return o, lse, dq, fold(dk), fold(dv)


def reference_torch(torch, q, k, v, scale, causal, kv_lens):
    """The same in float32 with torch on the tensors' device."""
    q, k, v = q.float(), k.float(), v.float()
    B, Hq, Nq, _ = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, dim=1)
    v = v.repeat_interleave(Hq // Hkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    rows = torch.arange(Nq, device=q.device)[:, None]
    cols = torch.arange(Nk, device=q.device)[None, :]
    if causal == "bottom_right":
        keep = cols <= rows + (Nk - Nq)
    elif causal == "top_left":
        keep = cols <= rows
    else:
        keep = torch.ones(Nq, Nk, dtype=torch.bool, device=q.device)
    keep = keep[None, None].expand(B, 1, Nq, Nk)
    if kv_lens is not None:
        positions = torch.arange(Nk, device=q.device)[None, None, None, :]
        keep = keep & (positions < kv_lens.long()[:, None, None, None])
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return torch.matmul(p, v), lse


# ---------------------------------------------------------------------------
# Memory: where the kernel's operands live
# ---------------------------------------------------------------------------


class HostMemory:
    """CPU kernels: numpy arrays are the buffers."""

    name = "host (numpy)"

    def put(self, raw):
        return np.ascontiguousarray(raw).copy()

    def ptr(self, buf):
        return buf.ctypes.data

    def get(self, buf, dtype):
        return decode(buf, dtype) if dtype != "i32" else buf.copy()

    def synchronize(self):
        pass

    def stream(self):
        return None


class RuntimeMemory:
    """CUDA kernels, device buffers from FARuntime's helpers (no torch)."""

    name = "device (fa_cuda_malloc)"

    def __init__(self, rt):
        self.rt = rt
        self.live = []

    def put(self, raw):
        raw = np.ascontiguousarray(raw)
        ptr = self.rt.cuda_malloc(raw.nbytes)
        self.rt.memcpy_htod(ptr, raw.ctypes.data, raw.nbytes)
        self.live.append(ptr)
        return (ptr, raw.shape, raw.dtype)

    def ptr(self, buf):
        return buf[0]

    def get(self, buf, dtype):
        ptr, shape, storage = buf
        raw = np.empty(shape, dtype=storage)
        self.rt.memcpy_dtoh(raw.ctypes.data, ptr, raw.nbytes)
        return decode(raw, dtype) if dtype != "i32" else raw

    def synchronize(self):
        self.rt.synchronize()

    def stream(self):
        return None

    def free_all(self):
        for ptr in self.live:
            self.rt.cuda_free(ptr)
        self.live = []


class TorchMemory:
    """CUDA kernels, torch tensors on the current device and stream."""

    name = "device (torch)"

    def __init__(self, torch):
        self.torch = torch

    def put(self, raw):
        torch = self.torch
        raw = np.ascontiguousarray(raw)
        if raw.dtype == np.uint16:  # bf16 bit patterns
            t = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(raw)
        return t.to("cuda").contiguous()

    def ptr(self, buf):
        return buf.data_ptr()

    def get(self, buf, dtype):
        if dtype == "i32":
            return buf.cpu().numpy()
        return buf.float().cpu().numpy().astype(np.float64)

    def synchronize(self):
        self.torch.cuda.synchronize()

    def stream(self):
        return self.torch.cuda.current_stream().cuda_stream


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def compare(o, lse, ref_o, ref_lse, dtype, what):
    """Problems of (o, lse) against a reference, and the error figures."""
    problems = []
    atol, rtol = O_TOLERANCE[dtype]
    unwritten = int(np.isnan(o).sum())
    if unwritten:
        problems.append(f"{what}: {unwritten} of {o.size} O elements unwritten "
                        f"or NaN")
    if not np.isfinite(o).all() and not unwritten:
        problems.append(f"{what}: O has infinities")
    masked = ~np.isfinite(ref_lse) if ref_lse is not None else None
    figures = {}
    finite = np.isfinite(o)
    diff = np.where(finite, np.abs(o - ref_o), np.inf)
    figures["o_max_abs"] = float(diff.max()) if diff.size else 0.0
    norm = float(np.linalg.norm(ref_o))
    if not finite.all():
        figures["o_rel_l2"] = math.inf
    else:
        figures["o_rel_l2"] = (float(np.linalg.norm(o - ref_o)) / norm
                               if norm > 0 else 0.0)
    if figures["o_max_abs"] > atol:
        where = np.unravel_index(int(np.argmax(diff)), diff.shape)
        problems.append(f"{what}: max |O - ref| = {figures['o_max_abs']:.3g} > "
                        f"{atol:g} at {tuple(int(i) for i in where)} "
                        f"(got {o[where]:.6g}, expected {ref_o[where]:.6g})")
    if figures["o_rel_l2"] > rtol:
        problems.append(f"{what}: |O - ref| / |ref| = {figures['o_rel_l2']:.3g} "
                        f"> {rtol:g}")
    if lse is not None:
        if np.isnan(lse).any():
            problems.append(f"{what}: {int(np.isnan(lse).sum())} LSE elements "
                            f"unwritten or NaN")
        rows = masked
        figures["masked_rows"] = int(rows.sum())
        if rows.any():
            if not np.all(lse[rows] == -np.inf):
                problems.append(f"{what}: rows with no key must have LSE = -inf, "
                                f"got e.g. {lse[rows][lse[rows] != -np.inf][:3]}")
            row_o = o[rows]
            if not np.all(row_o == 0):
                worst_o = np.abs(np.nan_to_num(row_o, nan=np.inf)).max()
                problems.append(f"{what}: rows with no key must have O = 0 "
                                f"exactly, got max |O| = {worst_o:.3g}")
        live = ~rows
        if live.any():
            err = np.abs(lse[live] - ref_lse[live]) / np.maximum(
                1.0, np.abs(ref_lse[live]))
            err = np.where(np.isfinite(err), err, np.inf)
            figures["lse_rel"] = float(err.max())
            if figures["lse_rel"] > LSE_RTOL:
                problems.append(f"{what}: LSE relative error "
                                f"{figures['lse_rel']:.3g} > {LSE_RTOL:g}")
        else:
            figures["lse_rel"] = 0.0
    return problems, figures


def reference_sequences(q, k, v, scale, causal):
    """reference_numpy for one sequence (q [1, Hq, Nq, D], k/v [1, Hkv,
    Nk, D]), its causality aligned to its own Nk; no key gives O = 0 and
    LSE = -inf."""
    _, Hq, Nq, _ = q.shape
    if k.shape[2] == 0 or Nq == 0:
        return (np.zeros((1, Hq, Nq, v.shape[3])),
                np.full((1, Hq, Nq), -np.inf))
    return reference_numpy(q, k, v, scale, causal, None)


def launch_and_read(mem, launch, bufs, dtype, has_lse):
    """Runs `launch`, waits, and reads O (and LSE) back as float64; frees
    the runtime's device buffers either way."""
    try:
        launch()
        mem.synchronize()
        o = mem.get(bufs["o"], dtype)
        return o, mem.get(bufs["lse"], "f32") if has_lse else None
    finally:
        if isinstance(mem, RuntimeMemory):
            mem.free_all()


def split_parts(rt, kernel, B, Nq, Nk):
    """The part counts a split-KV kernel is checked with: the heuristic's on
    this device, 3, and more parts than key tiles (empty parts); [None]
    (no split) for other kernels."""
    if not kernel.split_kv:
        return [None]
    tiles = -(-Nk // kernel.block_kv)
    parts = [rt.num_splits(kernel, B, Nq, Nk), 3, tiles + 2]
    return sorted(set(parts))


def split_args(rt, kernel, mem, bufs, B, Nq, parts):
    """The split keyword arguments of rt.attention_split for `parts` (a
    fresh workspace in `bufs`), or None without a split."""
    if parts is None:
        return None
    nbytes = rt.workspace_size(kernel, B, Nq, parts)
    bufs["workspace"] = mem.put(np.zeros(max(nbytes, 1), np.uint8))
    return {"num_splits": parts, "workspace": mem.ptr(bufs["workspace"]),
            "workspace_bytes": nbytes}


def record(worst, figures):
    """Folds one case's error figures into the kernel's worst ones."""
    for key in ("o_max_abs", "o_rel_l2", "lse_rel"):
        worst[key] = max(worst[key], figures.get(key, 0.0))
    worst["masked_rows"] += figures.get("masked_rows", 0)


def check_paged(rt, kernel, dtype, mem, seed, worst):
    """A paged-cache kernel: PAGED_CASES with shuffled block tables, a shared
    prefix, entries past a sequence's pages set to -1, against the float64
    reference of each sequence's contiguous keys (causality aligned to its
    kv_lens); the host tables pass fa_check_block_table first, and a bad
    copy of one must fail it."""
    problems = []
    S = kernel.page_size
    Hq, Hkv = kernel.heads, kernel.kv_heads
    D, Dv = kernel.head_dim, kernel.value_head_dim
    scale = float(np.float32(kernel.scale))
    for index, (label, Nq, lens) in enumerate(PAGED_CASES):
        lens = [S * 3 + 1 if n is None else n for n in lens]
        B = len(lens)
        what = f"{kernel.name} [{label}: B={B} Nq={Nq} lens={lens} S={S}]"
        rng = np.random.default_rng(seed + index)
        counts = [-(-n // S) for n in lens]
        M = max(counts) + 1
        P = sum(counts) + 2
        ids = rng.permutation(P).astype(np.int32)
        table = np.full((B, M), -1, np.int32)
        at = 0
        for b, c in enumerate(counts):
            table[b, :c] = ids[at:at + c]
            at += c
        # Sequence 1 shares sequence 0's first page (a common prefix).
        if B > 1 and counts[0] and counts[1]:
            table[1, 0] = table[0, 0]
        q_raw, q = quantize(rng.standard_normal((B, Hq, Nq, D), np.float32), dtype)
        k_raw, kp = quantize(rng.standard_normal((P, S, Hkv, D), np.float32), dtype)
        v_raw, vp = quantize(rng.standard_normal((P, S, Hkv, Dv), np.float32), dtype)
        kv_lens = np.asarray(lens, np.int32)
        try:
            rt.check_block_table(table, kv_lens, P, S)
        except FARuntimeError as e:
            problems.append(f"{what}: a good table was refused: {e}")
            continue
        bad = table.copy()
        bad[0, 0] = P
        try:
            rt.check_block_table(bad, kv_lens, P, S)
            problems.append(f"{what}: fa_check_block_table accepted page {P} "
                            f"of a {P}-page cache")
        except FARuntimeError:
            pass
        ref_o = np.zeros((B, Hq, Nq, Dv))
        ref_lse = np.zeros((B, Hq, Nq))
        for b, n in enumerate(lens):
            rows = np.arange(n)
            pages = table[b, rows // S]
            kb = kp[pages, rows % S].transpose(1, 0, 2)[None]
            vb = vp[pages, rows % S].transpose(1, 0, 2)[None]
            ref_o[b], ref_lse[b] = (x[0] for x in reference_sequences(
                q[b:b + 1], kb, vb, scale, kernel.causal))
        for parts in split_parts(rt, kernel, B, Nq, M * S):
            label_parts = "" if parts is None else f" parts={parts}"
            bufs = {"q": mem.put(q_raw), "k": mem.put(k_raw),
                    "v": mem.put(v_raw), "table": mem.put(table),
                    "lens": mem.put(kv_lens),
                    "o": mem.put(poisoned((B, Hq, Nq, Dv), dtype))}
            if kernel.has_lse:
                bufs["lse"] = mem.put(poisoned((B, Hq, Nq), "f32"))
            t = lambda name, dt, shape: rt.tensor(mem.ptr(bufs[name]), dt,
                                                  shape)
            args = (kernel, t("q", dtype, q.shape), t("k", dtype, kp.shape),
                    t("v", dtype, vp.shape))
            lse_t = t("lse", "f32", (B, Hq, Nq)) if kernel.has_lse else None
            split = split_args(rt, kernel, mem, bufs, B, Nq, parts)
            if split is None:
                launch = lambda: rt.attention_paged(
                    *args, t("table", "i32", table.shape),
                    t("lens", "i32", kv_lens.shape),
                    t("o", dtype, (B, Hq, Nq, Dv)), lse=lse_t,
                    stream=mem.stream())
            else:
                launch = lambda: rt.attention_split(
                    *args, t("o", dtype, (B, Hq, Nq, Dv)),
                    kv_lens=t("lens", "i32", kv_lens.shape), lse=lse_t,
                    block_table=t("table", "i32", table.shape),
                    stream=mem.stream(), **split)
            try:
                o, lse = launch_and_read(mem, launch, bufs, dtype,
                                         kernel.has_lse)
            except Exception as e:  # noqa: BLE001 - reported, then fail
                problems.append(f"{what}{label_parts}: {e}")
                continue
            found, figures = compare(o, lse, ref_o,
                                     ref_lse if kernel.has_lse else None,
                                     dtype, what + label_parts + " vs float64")
            problems += found
            record(worst, figures)
    return problems


def check_varlen(rt, kernel, dtype, mem, seed, worst):
    """A token-major variable-length kernel: VARLEN_CASES (empty and
    one-token sequences, ragged lengths) against the float64 reference of
    each sequence; the host offsets pass fa_check_cu_seqlens first, and a
    decreasing copy must fail it."""
    problems = []
    Hq, Hkv = kernel.heads, kernel.kv_heads
    D, Dv = kernel.head_dim, kernel.value_head_dim
    scale = float(np.float32(kernel.scale))
    for index, (label, q_lens, k_lens) in enumerate(VARLEN_CASES):
        B = len(q_lens)
        what = f"{kernel.name} [{label}: q {q_lens} k {k_lens}]"
        rng = np.random.default_rng(seed + index)
        cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
        Tq, Tk = int(cu_q[-1]), int(cu_k[-1])
        try:
            rt.check_cu_seqlens(cu_q, Tq)
            rt.check_cu_seqlens(cu_k, Tk)
        except FARuntimeError as e:
            problems.append(f"{what}: good offsets were refused: {e}")
            continue
        try:
            rt.check_cu_seqlens(cu_q[::-1].copy(), Tq)
            problems.append(f"{what}: fa_check_cu_seqlens accepted "
                            f"decreasing offsets")
        except FARuntimeError:
            pass
        q_raw, q = quantize(rng.standard_normal((Tq, Hq, D), np.float32), dtype)
        k_raw, k = quantize(rng.standard_normal((Tk, Hkv, D), np.float32), dtype)
        v_raw, v = quantize(rng.standard_normal((Tk, Hkv, Dv), np.float32), dtype)
        bufs = {"q": mem.put(q_raw), "k": mem.put(k_raw), "v": mem.put(v_raw),
                "cu_q": mem.put(cu_q), "cu_k": mem.put(cu_k),
                "o": mem.put(poisoned((Tq, Hq, Dv), dtype))}
        if kernel.has_lse:
            bufs["lse"] = mem.put(poisoned((Hq, Tq), "f32"))
        t = lambda name, dt, shape: rt.tensor(mem.ptr(bufs[name]), dt, shape)
        try:
            o, lse = launch_and_read(mem, lambda: rt.attention_varlen(
                kernel, t("q", dtype, q.shape), t("k", dtype, k.shape),
                t("v", dtype, v.shape), t("cu_q", "i32", cu_q.shape),
                t("cu_k", "i32", cu_k.shape), t("o", dtype, (Tq, Hq, Dv)),
                lse=t("lse", "f32", (Hq, Tq)) if kernel.has_lse else None,
                stream=mem.stream()), bufs, dtype, kernel.has_lse)
        except Exception as e:  # noqa: BLE001 - reported, then fail
            problems.append(f"{what}: {e}")
            continue
        ref_o = np.zeros((Tq, Hq, Dv))
        ref_lse = np.zeros((Hq, Tq))
        for b in range(B):
            qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
            ob, lb = reference_sequences(
                q[qs].transpose(1, 0, 2)[None], k[ks].transpose(1, 0, 2)[None],
                v[ks].transpose(1, 0, 2)[None], scale, kernel.causal)
            ref_o[qs] = ob[0].transpose(1, 0, 2)
            ref_lse[:, qs] = lb[0]
        # Head-major, as LSE [Hq, Tq].
        found, figures = compare(o.transpose(1, 0, 2), lse,
                                 ref_o.transpose(1, 0, 2),
                                 ref_lse if kernel.has_lse else None, dtype,
                                 what + " vs float64")
        problems += found
        record(worst, figures)
    return problems


# Relative L2 tolerances of dQ, dK, dV against the float64 gradients.
GRAD_TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 2e-2}


def check_backward(rt, kernel, dtype, mem, seed, worst):
    """An attention_backward kernel on every CHECK_CASES shape: O and LSE
    from the float64 forward (O rounded to the dtype, LSE to float32, as a
    framework saves them), dO random; dQ, dK, dV (poisoned first) against
    reference_backward_numpy, and exact zeros where no key or query
    contributes. Returns the problems; `worst` gets o_max_abs (the worst
    gradient max-abs), o_rel_l2 and masked_rows."""
    problems = []
    Hq, Hkv = kernel.heads, kernel.kv_heads
    D, Dv = kernel.head_dim, kernel.value_head_dim
    scale = float(np.float32(kernel.scale))
    for index, (label, B, Nq, Nk, lens) in enumerate(CHECK_CASES):
        what = f"{kernel.name} [{label}: B={B} Nq={Nq} Nk={Nk}]"
        rng = np.random.default_rng(seed + index)
        q_raw, q = quantize(rng.standard_normal((B, Hq, Nq, D), np.float32), dtype)
        k_raw, k = quantize(rng.standard_normal((B, Hkv, Nk, D), np.float32), dtype)
        v_raw, v = quantize(rng.standard_normal((B, Hkv, Nk, Dv), np.float32), dtype)
        do_raw, do = quantize(rng.standard_normal((B, Hq, Nq, Dv), np.float32),
                              dtype)
        kv_lens = np.asarray(lens if lens is not None else [Nk] * B, np.int32)
        used_lens = kv_lens if kernel.has_kv_lens else None
        mods = {"window": kernel.window, "softcap": kernel.softcap,
                "chunk": kernel.chunk}
        o, lse, dq, dk, dv = reference_backward_numpy(
            q, k, v, do, scale, kernel.causal, used_lens, mods)
        o_raw, _ = quantize(o.astype(np.float32), dtype)
        shapes = {"q": q.shape, "k": k.shape, "v": v.shape, "o": o.shape,
                  "d_o": do.shape, "d_q": q.shape, "d_k": k.shape,
                  "d_v": v.shape}
        bufs = {"q": mem.put(q_raw), "k": mem.put(k_raw), "v": mem.put(v_raw),
                "o": mem.put(o_raw), "d_o": mem.put(do_raw),
                "lse": mem.put(lse.astype(np.float32)),
                "d_q": mem.put(poisoned(q.shape, dtype)),
                "d_k": mem.put(poisoned(k.shape, dtype)),
                "d_v": mem.put(poisoned(v.shape, dtype))}
        if kernel.has_kv_lens:
            bufs["kv_lens"] = mem.put(kv_lens)
        t = lambda name, dt, shape: rt.tensor(mem.ptr(bufs[name]), dt, shape)
        try:
            rt.attention_backward(
                kernel, *(t(n, dtype, shapes[n]) for n in ("q", "k", "v", "o")),
                t("lse", "f32", (B, Hq, Nq)), t("d_o", dtype, shapes["d_o"]),
                *(t(n, dtype, shapes[n]) for n in ("d_q", "d_k", "d_v")),
                kv_lens=(t("kv_lens", "i32", (B,)) if kernel.has_kv_lens
                         else None),
                stream=mem.stream())
            mem.synchronize()
        except Exception as e:  # noqa: BLE001 - reported, then fail
            problems.append(f"{what}: {e}")
            continue
        empty_rows = ~np.isfinite(lse)
        # Keys no query attends: no P anywhere in their column.
        keep = np.broadcast_to(keep_mask(B, Nq, Nk, kernel.causal, used_lens),
                               (B, Hq, Nq, Nk))
        # The window and chunk remove keys too.
        _, keep = modify(np.zeros(keep.shape), keep, B, Hq, Nq, Nk,
                         kernel.causal, mods)
        live_keys = (keep & ~empty_rows[..., None]).any(axis=2)
        dead_keys = ~live_keys.reshape(B, Hkv, Hq // Hkv, Nk).any(axis=2)
        for name, ref, zero_rows in (("dQ", dq, empty_rows),
                                     ("dK", dk, dead_keys),
                                     ("dV", dv, dead_keys)):
            got = mem.get(bufs["d_" + name[1].lower()], dtype)
            unwritten = int(np.isnan(got).sum())
            if unwritten:
                problems.append(f"{what}: {unwritten} of {got.size} {name} "
                                f"elements unwritten or NaN")
                worst["o_rel_l2"] = math.inf
                continue
            max_abs = float(np.abs(got - ref).max()) if got.size else 0.0
            norm = float(np.linalg.norm(ref))
            rel = float(np.linalg.norm(got - ref)) / norm if norm > 0 else 0.0
            worst["o_max_abs"] = max(worst["o_max_abs"], max_abs)
            worst["o_rel_l2"] = max(worst["o_rel_l2"], rel)
            if not rel <= GRAD_TOLERANCE[dtype]:
                problems.append(f"{what}: |{name} - ref| / |ref| = {rel:.3g} > "
                                f"{GRAD_TOLERANCE[dtype]:g}")
            if zero_rows.any():
                worst["masked_rows"] += int(zero_rows.sum())
                if not np.all(got[zero_rows] == 0):
                    problems.append(f"{what}: {name} rows nothing reaches must "
                                    f"be exactly 0, got max "
                                    f"{np.abs(got[zero_rows]).max():.3g}")
        if isinstance(mem, RuntimeMemory):
            mem.free_all()
    return problems


def check_kernel(rt, kernel, dtype, mem, torch, seed):
    """Runs every CHECK_CASES shape (PAGED_CASES or VARLEN_CASES for the
    serving forms); returns (problems, worst figures)."""
    problems = []
    worst = {"o_max_abs": 0.0, "o_rel_l2": 0.0, "lse_rel": 0.0,
             "masked_rows": 0, "torch_o_max_abs": None}
    if kernel.op == "attention_backward":
        return check_backward(rt, kernel, dtype, mem, seed, worst), worst
    if kernel.page_size:
        return check_paged(rt, kernel, dtype, mem, seed, worst), worst
    if kernel.varlen:
        return check_varlen(rt, kernel, dtype, mem, seed, worst), worst
    Hq, Hkv = kernel.heads, kernel.kv_heads
    D, Dv = kernel.head_dim, kernel.value_head_dim
    for index, (label, B, Nq, Nk, lens) in enumerate(CHECK_CASES):
        what = f"{kernel.name} [{label}: B={B} Nq={Nq} Nk={Nk}]"
        rng = np.random.default_rng(seed + index)
        q_raw, q = quantize(rng.standard_normal((B, Hq, Nq, D), np.float32), dtype)
        k_raw, k = quantize(rng.standard_normal((B, Hkv, Nk, D), np.float32), dtype)
        v_raw, v = quantize(rng.standard_normal((B, Hkv, Nk, Dv), np.float32), dtype)
        kv_lens = np.asarray(lens if lens is not None else [Nk] * B, np.int32)
        bufs = {
            "q": mem.put(q_raw), "k": mem.put(k_raw), "v": mem.put(v_raw),
            "o": mem.put(poisoned((B, Hq, Nq, Dv), dtype)),
        }
        shapes = {"q": q.shape, "k": k.shape, "v": v.shape, "o": (B, Hq, Nq, Dv)}
        if kernel.has_kv_lens:
            bufs["kv_lens"] = mem.put(kv_lens)
        if kernel.has_lse:
            bufs["lse"] = mem.put(poisoned((B, Hq, Nq), "f32"))
        # The modifier operands: ALiBi slopes, sorted segment ids (four
        # documents of random lengths, some maybe empty).
        mods = {"window": kernel.window, "softcap": kernel.softcap,
                "chunk": kernel.chunk}
        if kernel.alibi:
            shape = (Hq,) if kernel.alibi == "heads" else (B, Hq)
            mods["alibi"] = (rng.random(shape) * 0.3).astype(np.float32)
            bufs["alibi"] = mem.put(mods["alibi"])
            shapes["alibi"] = shape
        if kernel.has_segments:
            for name, n in (("q_segments", Nq), ("k_segments", Nk)):
                cuts = np.sort(rng.integers(0, n + 1, size=(B, 3)), axis=1)
                ids = (np.arange(n)[None, :, None] >= cuts[:, None, :]).sum(
                    axis=2).astype(np.int32)
                mods[name] = ids
                bufs[name] = mem.put(ids)
                shapes[name] = (B, n)
        t = lambda name, dt, shape: rt.tensor(mem.ptr(bufs[name]), dt, shape)
        try:
            problems += run_case(rt, kernel, dtype, mem, torch, what, bufs, t,
                                 shapes, (q, k, v, kv_lens), worst, mods)
        finally:
            if isinstance(mem, RuntimeMemory):
                mem.free_all()
    return problems, worst


def run_case(rt, kernel, dtype, mem, torch, what, bufs, t, shapes, inputs,
             worst, mods=None):
    """Launches one case and compares; updates `worst`, returns problems."""
    q, k, v, kv_lens = inputs
    B, Hq, Nq, _ = q.shape
    problems = []
    if kernel.split_kv:
        # Every part count of split_parts, each into fresh poisoned outputs.
        Nk = k.shape[2]
        for parts in split_parts(rt, kernel, B, Nq, Nk):
            bufs["o"] = mem.put(poisoned(shapes["o"], dtype))
            if kernel.has_lse:
                bufs["lse"] = mem.put(poisoned((B, Hq, Nq), "f32"))
            split = split_args(rt, kernel, mem, bufs, B, Nq, parts)
            problems += run_launch(rt, kernel, dtype, mem, torch,
                                   f"{what} parts={parts}", bufs, t, shapes,
                                   inputs, worst, mods, split)
        return problems
    return run_launch(rt, kernel, dtype, mem, torch, what, bufs, t, shapes,
                      inputs, worst, mods, None)


def run_launch(rt, kernel, dtype, mem, torch, what, bufs, t, shapes, inputs,
               worst, mods, split):
    """One launch of run_case (with `split`'s parts and workspace, or
    none) and its comparisons."""
    q, k, v, kv_lens = inputs
    B, Hq, Nq, _ = q.shape
    problems = []
    extra = {name: t(name, "f32" if name == "alibi" else "i32", shapes[name])
             for name in ("alibi", "q_segments", "k_segments") if name in bufs}
    try:
        common = dict(
            kv_lens=t("kv_lens", "i32", (B,)) if kernel.has_kv_lens else None,
            lse=t("lse", "f32", (B, Hq, Nq)) if kernel.has_lse else None,
            stream=mem.stream())
        tensors = (kernel, t("q", dtype, shapes["q"]),
                   t("k", dtype, shapes["k"]), t("v", dtype, shapes["v"]))
        if split is None:
            rt.attention(*tensors, o=t("o", dtype, shapes["o"]), **common,
                         **extra)
        else:
            rt.attention_split(*tensors, t("o", dtype, shapes["o"]),
                               **common, **split)
        mem.synchronize()
    except Exception as e:  # noqa: BLE001 - reported, then fail
        return [f"{what}: {e}"]
    o = mem.get(bufs["o"], dtype)
    lse = mem.get(bufs["lse"], "f32") if kernel.has_lse else None
    used_lens = kv_lens if kernel.has_kv_lens else None
    ref_o, ref_lse = reference_numpy(q, k, v, float(np.float32(kernel.scale)),
                                     kernel.causal, used_lens, mods)
    found, figures = compare(o, lse, ref_o, ref_lse if kernel.has_lse else None,
                             dtype, what + " vs float64")
    problems += found
    # The torch float32 reference knows no modifiers: modifier kernels are
    # judged against the float64 one only.
    if (torch is not None and isinstance(mem, TorchMemory) and
            not kernel.has_modifiers):
        tref_o, tref_lse = reference_torch(
            torch, bufs["q"], bufs["k"], bufs["v"],
            float(np.float32(kernel.scale)), kernel.causal,
            bufs.get("kv_lens") if kernel.has_kv_lens else None)
        tref_o = tref_o.cpu().numpy().astype(np.float64)
        tref_lse = tref_lse.cpu().numpy().astype(np.float64)
        agree = float(np.abs(tref_o - ref_o).max()) if ref_o.size else 0.0
        if agree > REFERENCE_AGREEMENT:
            problems.append(f"{what}: the torch float32 reference disagrees "
                            f"with the float64 one by {agree:.3g} (a bug in "
                            f"the references, not the kernel)")
        found, tfig = compare(o, lse, tref_o,
                              tref_lse if kernel.has_lse else None, dtype,
                              what + " vs torch float32")
        problems += found
        worst["torch_o_max_abs"] = max(worst["torch_o_max_abs"] or 0.0,
                                       tfig["o_max_abs"])
    for key in ("o_max_abs", "o_rel_l2", "lse_rel"):
        worst[key] = max(worst[key], figures.get(key, 0.0))
    worst["masked_rows"] += figures.get("masked_rows", 0)
    return problems


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def median_ms(torch, fn, target_ms, max_reps=50):
    """Median of per-launch CUDA-event times: 2 warm-ups, one sizing run,
    then enough runs to fill about target_ms (3 to max_reps)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end), 1e-3)
    reps = max(3, min(max_reps, int(target_ms / one)))
    events = [(torch.cuda.Event(enable_timing=True),
               torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in events:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    return times[len(times) // 2], reps


def time_kernel(rt, kernel, dtype, n, torch, target_ms, decode=False):
    """Checks the kernel against SDPA, then times both: at sequence length
    n (B = 1, Nq = Nk = n), or for `decode` one step of B = DECODE_BATCH
    single queries against Nk = n keys."""
    F = torch.nn.functional
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    H, Hkv, D, Dv = (kernel.heads, kernel.kv_heads, kernel.head_dim,
                     kernel.value_head_dim)
    B, Nq, Nk = (DECODE_BATCH, 1, n) if decode else (1, n, n)
    causal = kernel.causal != "none"
    gen = torch.Generator(device="cuda").manual_seed(n)
    q = torch.randn(B, H, Nq, D, device="cuda", dtype=tdtype, generator=gen)
    S = kernel.page_size
    if S:
        # A paged cache: B * Nk / S pages in a shuffled order; SDPA reads
        # the same keys gathered into [B, Hkv, Nk, D].
        pages = B * Nk // S
        kp = torch.randn(pages, S, Hkv, D, device="cuda", dtype=tdtype,
                         generator=gen)
        vp = torch.randn(pages, S, Hkv, Dv, device="cuda", dtype=tdtype,
                         generator=gen)
        order = np.random.default_rng(n).permutation(pages).astype(np.int32)
        table = torch.from_numpy(order.reshape(B, Nk // S)).to("cuda")
        lens = torch.from_numpy(np.full(B, Nk, np.int32)).to("cuda")
        gather = lambda p, d: p[table.long()].reshape(
            B, Nk // S, S, Hkv, d).permute(0, 3, 1, 2, 4).reshape(B, Hkv, Nk, d)
        k, v = gather(kp, D), gather(vp, Dv)
        tk = rt.tensor(kp.data_ptr(), dtype, kp.shape)
        tv = rt.tensor(vp.data_ptr(), dtype, vp.shape)
        ttable = rt.tensor(table.data_ptr(), "i32", table.shape)
        tlens = rt.tensor(lens.data_ptr(), "i32", lens.shape)
    else:
        k = torch.randn(B, Hkv, Nk, D, device="cuda", dtype=tdtype,
                        generator=gen)
        v = torch.randn(B, Hkv, Nk, Dv, device="cuda", dtype=tdtype,
                        generator=gen)
        tk = rt.tensor(k.data_ptr(), dtype, k.shape)
        tv = rt.tensor(v.data_ptr(), dtype, v.shape)
    o = torch.full((B, H, Nq, Dv), float("nan"), device="cuda", dtype=tdtype)
    tq = rt.tensor(q.data_ptr(), dtype, q.shape)
    to = rt.tensor(o.data_ptr(), dtype, o.shape)
    stream = torch.cuda.current_stream().cuda_stream
    gqa = {"enable_gqa": True} if Hkv != H else {}

    # Split-KV: the heuristic's parts on this device, a workspace from torch.
    parts = rt.num_splits(kernel, B, Nq, Nk) if kernel.split_kv else None
    if parts is not None:
        nbytes = rt.workspace_size(kernel, B, Nq, parts)
        ws = torch.empty(max(nbytes, 1), device="cuda", dtype=torch.uint8)
        split = {"num_splits": parts, "workspace": ws.data_ptr(),
                 "workspace_bytes": nbytes}
        if not S:
            tlens = None
            if kernel.has_kv_lens:
                lens = torch.from_numpy(np.full(B, Nk, np.int32)).to("cuda")
                tlens = rt.tensor(lens.data_ptr(), "i32", lens.shape)

    def ours():
        if parts is not None:
            rt.attention_split(kernel, tq, tk, tv, to, kv_lens=tlens,
                               block_table=ttable if S else None,
                               stream=stream, **split)
        elif S:
            rt.attention_paged(kernel, tq, tk, tv, ttable, tlens, o=to,
                               stream=stream)
        else:
            rt.attention(kernel, tq, tk, tv, o=to, stream=stream)

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                              scale=kernel.scale, **gqa)

    ours()
    reference = sdpa()
    torch.cuda.synchronize()
    unwritten = int(torch.isnan(o).sum().item())
    max_abs = float((o.float() - reference.float()).abs().max().item())
    atol = 2 * O_TOLERANCE[dtype][0]
    problem = None
    what = f"{kernel.name} {'Nk' if decode else 'N'}={n}"
    if unwritten:
        problem = f"{what}: {unwritten} O elements unwritten or NaN"
    elif not max_abs <= atol:
        problem = f"{what}: max |O - SDPA| = {max_abs:.3g} > {atol:g}"
    if problem:
        return {"problem": problem, "max_abs_vs_sdpa": max_abs}
    ours_ms, ours_reps = median_ms(torch, ours, target_ms)
    sdpa_ms, sdpa_reps = median_ms(torch, sdpa, target_ms)
    flops = 4.0 * B * H * Nq * Nk * D * (0.5 if causal else 1.0)
    # What a step must move at least: Q, K, V once and O.
    moved = (B * H * Nq * (D + Dv) + B * Hkv * Nk * (D + Dv)) * q.element_size()
    del q, k, v, o, reference
    return {
        "max_abs_vs_sdpa": max_abs, "parts": parts,
        "ours_ms": ours_ms, "ours_reps": ours_reps,
        "sdpa_ms": sdpa_ms, "sdpa_reps": sdpa_reps,
        "ours_tflops": flops / (ours_ms * 1e-3) / 1e12,
        "sdpa_tflops": flops / (sdpa_ms * 1e-3) / 1e12,
        "ours_tbps": moved / (ours_ms * 1e-3) / 1e12,
        "sdpa_tbps": moved / (sdpa_ms * 1e-3) / 1e12,
        "speed_vs_sdpa": sdpa_ms / ours_ms,
    }


def time_backward(rt, kernel, dtype, n, torch, target_ms):
    """An attention_backward kernel at B = 1, Nq = Nk = n: O from SDPA and
    LSE from torch (float32 logsumexp of the masked scores, per head), dO
    random; our dQ, dK, dV are checked against torch's autograd gradients
    of SDPA, then both backward passes are timed (torch's as
    torch.autograd.grad of SDPA's output with the graph kept)."""
    F = torch.nn.functional
    tdtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    H, Hkv, D, Dv = (kernel.heads, kernel.kv_heads, kernel.head_dim,
                     kernel.value_head_dim)
    causal = kernel.causal != "none"
    gen = torch.Generator(device="cuda").manual_seed(n)
    make = lambda h, d: torch.randn(1, h, n, d, device="cuda", dtype=tdtype,
                                    generator=gen)
    q, k, v, do = make(H, D), make(Hkv, D), make(Hkv, Dv), make(H, Dv)
    gqa = {"enable_gqa": True} if Hkv != H else {}
    with torch.no_grad():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                           scale=kernel.scale, **gqa)
        lse = torch.empty(1, H, n, device="cuda", dtype=torch.float32)
        mask = (torch.ones(n, n, device="cuda", dtype=torch.bool).tril()
                if causal else None)
        for h in range(H):
            s = (q[0, h].float() @ k[0, h // (H // Hkv)].float().T) * \
                kernel.scale
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            lse[0, h] = torch.logsumexp(s, dim=-1)
            del s
    grads = [torch.full_like(x, float("nan")) for x in (q, k, v)]
    tensors = [rt.tensor(x.data_ptr(), dtype, x.shape)
               for x in (q, k, v, o)]
    tlse = rt.tensor(lse.data_ptr(), "f32", lse.shape)
    tdo = rt.tensor(do.data_ptr(), dtype, do.shape)
    tgrads = [rt.tensor(x.data_ptr(), dtype, x.shape) for x in grads]
    stream = torch.cuda.current_stream().cuda_stream

    def ours():
        rt.attention_backward(kernel, *tensors, tlse, tdo, *tgrads,
                              stream=stream)

    qr, kr, vr = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal,
                                         scale=kernel.scale, **gqa)

    def sdpa_backward():
        return torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True)

    ours()
    reference = sdpa_backward()
    torch.cuda.synchronize()
    what = f"{kernel.name} N={n}"
    worst = 0.0
    for name, got, want in zip(("dQ", "dK", "dV"), grads, reference):
        unwritten = int(torch.isnan(got).sum().item())
        if unwritten:
            return {"problem": f"{what}: {unwritten} {name} elements "
                               "unwritten or NaN"}
        rel = float((got.float() - want.float()).norm().item() /
                    max(want.float().norm().item(), 1e-30))
        worst = max(worst, rel)
        if not rel <= 3 * GRAD_TOLERANCE[dtype]:
            return {"problem": f"{what}: |{name} - SDPA's| / |SDPA's| = "
                               f"{rel:.3g} > {3 * GRAD_TOLERANCE[dtype]:g}",
                    "rel_vs_sdpa": rel}
    ours_ms, ours_reps = median_ms(torch, ours, target_ms)
    sdpa_ms, sdpa_reps = median_ms(torch, sdpa_backward, target_ms)
    flops = 10.0 * H * n * n * D * (0.5 if causal else 1.0)
    del q, k, v, do, o, lse, grads, qr, kr, vr, out, reference
    return {
        "rel_vs_sdpa": worst,
        "ours_ms": ours_ms, "ours_reps": ours_reps,
        "sdpa_ms": sdpa_ms, "sdpa_reps": sdpa_reps,
        "ours_tflops": flops / (ours_ms * 1e-3) / 1e12,
        "sdpa_tflops": flops / (sdpa_ms * 1e-3) / 1e12,
        "speed_vs_sdpa": sdpa_ms / ours_ms,
    }


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------


def load_artifacts(directory, kind, only):
    """(name, metadata) of the `kind` ('check' or 'bench') kernels."""
    found = []
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".json") or entry == "manifest.json":
            continue
        path = os.path.join(directory, entry)
        with open(path) as f:
            md = json.load(f)
        fmt = md.get("format")
        if isinstance(fmt, str) and fmt.startswith("fa-kernel/") and fmt != "fa-kernel/3":
            sys.exit(f"{path}: format '{fmt}', but this script and FARuntime read "
                     "fa-kernel/3: re-run bench/gpu/prepare.sh")
        if fmt != "fa-kernel/3" or not md["name"].startswith(kind + "_"):
            continue
        if only and not re.search(only, md["name"]):
            continue
        found.append((path, md))
    return found


def markdown_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True, help="libFARuntime.so")
    parser.add_argument("--artifacts", required=True,
                        help="directory of fa-kernel/3 artifacts")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--memory", choices=("auto", "torch", "runtime"),
                        default="auto",
                        help="where operands live (auto: torch on cuda, numpy "
                             "on cpu)")
    parser.add_argument("--out", default=None,
                        help="directory for results.md and results.json")
    parser.add_argument("--only", default=None, help="regex on kernel names")
    parser.add_argument("--sizes", default=",".join(map(str, BENCH_SIZES)),
                        help="sequence lengths to time")
    parser.add_argument("--backward-sizes",
                        default=",".join(map(str, BACKWARD_SIZES)),
                        help="sequence lengths to time the backward kernels "
                             "at")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="stop starting new timing rows after this many "
                             "seconds (the checks always run)")
    parser.add_argument("--target-ms", type=float, default=300.0,
                        help="time spent per timed kernel and size")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv[1:])
    started = time.time()

    rt = FARuntime(args.lib)
    torch = None
    env = {"device": args.device, "lib": args.lib}
    if args.device == "cuda":
        count, why = rt.cuda_available()
        if not count:
            log(f"error: no usable CUDA device: {why}")
            return 1
        env["chip"] = rt.cuda_device_chip()
        if args.memory in ("auto", "torch"):
            try:
                import torch as torch_module
                torch = torch_module
            except ImportError:
                if args.memory == "torch":
                    raise
                log("note: no torch: device buffers from fa_cuda_malloc, no "
                    "timing")
        if torch is not None:
            if not torch.cuda.is_available():
                log("error: torch sees no CUDA device")
                return 1
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.cuda.init()
            torch.zeros(1, device="cuda")  # the primary context, current
            env["gpu"] = torch.cuda.get_device_name()
            env["torch"] = torch.__version__
            env["cuda"] = torch.version.cuda
        mem = TorchMemory(torch) if torch is not None else RuntimeMemory(rt)
    else:
        mem = HostMemory()
    manifest_path = os.path.join(args.artifacts, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            env["artifacts"] = json.load(f)
    log("environment: " + json.dumps(env))

    failures = []
    results = {"environment": env, "checks": [], "timing": []}
    target_kind = "cuda" if args.device == "cuda" else "cpu"

    # 1. Checks.
    checks = [(p, md) for p, md in load_artifacts(args.artifacts, "check", args.only)
              if md["target"]["kind"] == target_kind]
    if not checks:
        failures.append(f"no {target_kind} check_* kernels in {args.artifacts}")
    check_rows = []
    for index, (path, md) in enumerate(checks):
        name, dtype = md["name"], md["dtype"]
        try:
            kernel = rt.load(path, args.device)
        except FARuntimeError as e:
            if e.status == "FA_ERROR_UNSUPPORTED_ARCH":
                log(f"SKIP {name}: {e.message}")
                check_rows.append([name, dtype, "-", "-", "-", "-", "-",
                                   "skipped: " + e.message[:60]])
                continue
            failures.append(str(e))
            check_rows.append([name, dtype, "-", "-", "-", "-", "-", "FAIL (load)"])
            continue
        t0 = time.time()
        problems, worst = check_kernel(rt, kernel, dtype, mem, torch,
                                       args.seed + 100 * index)
        kernel.close()
        status = "PASS" if not problems else "FAIL"
        failures += problems
        for p in problems[:5]:
            log("  " + p)
        log(f"{status} {name}: max|dO| {worst['o_max_abs']:.2e}, rel "
            f"{worst['o_rel_l2']:.2e}, LSE rel {worst['lse_rel']:.2e}, "
            f"{worst['masked_rows']} masked rows ({time.time() - t0:.1f} s)")
        check_rows.append([name, dtype, fmt(worst["o_max_abs"]),
                           fmt(worst["o_rel_l2"]), fmt(worst["lse_rel"]),
                           fmt(worst["torch_o_max_abs"]), worst["masked_rows"],
                           status])
        results["checks"].append({"name": name, "status": status,
                                  "problems": problems, **worst})

    # 2. Timing.
    timing_rows = []
    benches = [(p, md) for p, md in load_artifacts(args.artifacts, "bench", args.only)
               if md["target"]["kind"] == target_kind]
    decodes = [(p, md) for p, md in
               load_artifacts(args.artifacts, "decode", args.only)
               if md["target"]["kind"] == target_kind]
    backwards = [(p, md) for p, md in
                 load_artifacts(args.artifacts, "bwd", args.only)
                 if md["target"]["kind"] == target_kind]
    if args.skip_timing or torch is None or args.device != "cuda":
        if (benches or decodes or backwards) and not args.skip_timing:
            log("note: timing needs --device cuda and torch; skipped")
        benches = []
        decodes = []
        backwards = []

    def load_all(found):
        loaded = []
        for path, md in found:
            try:
                loaded.append((md, rt.load(path, "cuda")))
            except FARuntimeError as e:
                if e.status == "FA_ERROR_UNSUPPORTED_ARCH":
                    log(f"SKIP {md['name']}: {e.message}")
                    continue
                failures.append(str(e))
        return loaded
    kernels = load_all(benches)
    decode_kernels = load_all(decodes)
    decode_rows = []
    # Decode steps first: they are short, and the budget cuts the long
    # prefill rows at the end.
    for nk in DECODE_SIZES:
        for md, kernel in decode_kernels:
            label = [md["name"], md["dtype"], kernel.target, nk]
            if time.time() - started > args.budget_s:
                decode_rows.append(label + ["-"] * 7 + ["skipped (budget)"])
                continue
            try:
                r = time_kernel(rt, kernel, md["dtype"], nk, torch,
                                args.target_ms, decode=True)
            except Exception as e:  # noqa: BLE001
                r = {"problem": f"{md['name']} Nk={nk}: {e}"}
            results["timing"].append({"name": md["name"], "nk": nk,
                                      "decode": True, **r})
            if "problem" in r:
                failures.append(r["problem"])
                log("FAIL " + r["problem"])
                decode_rows.append(label + ["-"] * 7 + ["FAIL"])
                continue
            log(f"{md['name']} Nk={nk}: ours {r['ours_ms']:.4f} ms "
                f"({r['ours_tbps']:.2f} TB/s), SDPA {r['sdpa_ms']:.4f} ms "
                f"({r['sdpa_tbps']:.2f} TB/s), ratio {r['speed_vs_sdpa']:.3f}")
            decode_rows.append(label + [
                f"{r['ours_ms']:.4f}", f"{r['ours_tbps']:.2f}",
                f"{r['ours_tbps'] / H200_TBPS:.0%}", f"{r['sdpa_ms']:.4f}",
                f"{r['sdpa_tbps']:.2f}", f"{r['sdpa_tbps'] / H200_TBPS:.0%}",
                f"{r['speed_vs_sdpa']:.3f}",
                f"ok ({r['max_abs_vs_sdpa']:.1e})"])
    for _, kernel in decode_kernels:
        kernel.close()
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    last = {}  # kernel name -> (n, our ms) of its last timed size
    for n in sizes:  # smallest first, so the budget cuts the largest
        for md, kernel in kernels:
            label = [md["name"], md["dtype"], kernel.causal, kernel.target, n]
            # About 8 launches of ours per row (check, warm-up, sizing,
            # repeats); predicted from the last size, quadratic in N.
            predicted_s = 0.0
            if md["name"] in last:
                prev_n, prev_ms = last[md["name"]]
                predicted_s = 8 * prev_ms * (n / prev_n) ** 2 / 1000
            elapsed = time.time() - started
            if elapsed + predicted_s > args.budget_s:
                log(f"SKIP {md['name']} N={n}: {elapsed:.0f} s elapsed + "
                    f"~{predicted_s:.0f} s predicted > the {args.budget_s:.0f} s "
                    f"budget")
                timing_rows.append(label + ["-"] * 5 + ["skipped (budget)"])
                continue
            try:
                r = time_kernel(rt, kernel, md["dtype"], n, torch, args.target_ms)
            except Exception as e:  # noqa: BLE001
                r = {"problem": f"{md['name']} N={n}: {e}"}
            results["timing"].append({"name": md["name"], "n": n, **r})
            if "problem" in r:
                failures.append(r["problem"])
                log("FAIL " + r["problem"])
                timing_rows.append(label + ["-"] * 5 + ["FAIL"])
                continue
            last[md["name"]] = (n, r["ours_ms"])
            log(f"{md['name']} N={n}: ours {r['ours_ms']:.3f} ms "
                f"({r['ours_tflops']:.1f} TFLOP/s), SDPA {r['sdpa_ms']:.3f} ms "
                f"({r['sdpa_tflops']:.1f} TFLOP/s), ratio "
                f"{r['speed_vs_sdpa']:.3f}")
            timing_rows.append(label + [
                f"{r['ours_ms']:.3f}", f"{r['ours_tflops']:.1f}",
                f"{r['sdpa_ms']:.3f}", f"{r['sdpa_tflops']:.1f}",
                f"{r['speed_vs_sdpa']:.3f}", f"ok ({r['max_abs_vs_sdpa']:.1e})"])
    for _, kernel in kernels:
        kernel.close()
    # The backward kernels last: the budget cuts them first.
    backward_kernels = load_all(backwards)
    backward_rows = []
    for n in sorted(int(x) for x in args.backward_sizes.split(",") if x):
        for md, kernel in backward_kernels:
            label = [md["name"], md["dtype"], kernel.causal, kernel.target, n]
            if time.time() - started > args.budget_s:
                backward_rows.append(label + ["-"] * 5 + ["skipped (budget)"])
                continue
            try:
                r = time_backward(rt, kernel, md["dtype"], n, torch,
                                  args.target_ms)
            except Exception as e:  # noqa: BLE001
                r = {"problem": f"{md['name']} N={n}: {e}"}
            results["timing"].append({"name": md["name"], "n": n,
                                      "backward": True, **r})
            if "problem" in r:
                failures.append(r["problem"])
                log("FAIL " + r["problem"])
                backward_rows.append(label + ["-"] * 5 + ["FAIL"])
                continue
            log(f"{md['name']} N={n}: ours {r['ours_ms']:.3f} ms "
                f"({r['ours_tflops']:.1f} TFLOP/s), SDPA backward "
                f"{r['sdpa_ms']:.3f} ms ({r['sdpa_tflops']:.1f} TFLOP/s), "
                f"ratio {r['speed_vs_sdpa']:.3f}")
            backward_rows.append(label + [
                f"{r['ours_ms']:.3f}", f"{r['ours_tflops']:.1f}",
                f"{r['sdpa_ms']:.3f}", f"{r['sdpa_tflops']:.1f}",
                f"{r['speed_vs_sdpa']:.3f}",
                f"ok ({r['rel_vs_sdpa']:.1e})"])
    for _, kernel in backward_kernels:
        kernel.close()

    # Report.
    lines = ["# fa GPU check and benchmark", "",
             "Environment: `" + json.dumps(env) + "`", "",
             f"## Checks ({mem.name}; tolerances on O max-abs/rel-L2: " +
             ", ".join(f"{d} {a:g}/{r:g}" for d, (a, r) in O_TOLERANCE.items()) +
             f"; LSE rel {LSE_RTOL:g})", "",
             markdown_table(["kernel", "dtype", "max abs dO (f64 ref)",
                             "rel L2 dO", "LSE rel err", "max abs dO (torch f32)",
                             "rows with no key", "status"], check_rows), ""]
    if timing_rows:
        lines += ["## Timing (B=1, D=128; CUDA events, median; TFLOP/s = "
                  "4*B*H*N*N*D, halved for causal; ratio = SDPA time / ours)", "",
                  markdown_table(["kernel", "dtype", "causal", "chip", "N",
                                  "ours ms", "ours TFLOP/s", "SDPA ms",
                                  "SDPA TFLOP/s", "ratio", "check vs SDPA"],
                                 timing_rows), ""]
    if decode_rows:
        lines += [f"## Decode (B={DECODE_BATCH}, Nq=1, no causality; CUDA "
                  "events, median; TB/s = bytes of Q, K, V and O per step / "
                  f"time; % of the H200's {H200_TBPS} TB/s; ratio = SDPA "
                  "time / ours)", "",
                  markdown_table(["kernel", "dtype", "chip", "Nk", "ours ms",
                                  "ours TB/s", "of HBM", "SDPA ms",
                                  "SDPA TB/s", "of HBM", "ratio",
                                  "check vs SDPA"], decode_rows), ""]
    if backward_rows:
        lines += ["## Backward (B=1, Nq=Nk=N; CUDA events, median; TFLOP/s = "
                  "10*B*H*N*N*D, halved for causal; SDPA = torch.autograd."
                  "grad of SDPA's output; ratio = SDPA time / ours; check = "
                  "max rel L2 of dQ, dK, dV against SDPA's)", "",
                  markdown_table(["kernel", "dtype", "causal", "chip", "N",
                                  "ours ms", "ours TFLOP/s", "SDPA ms",
                                  "SDPA TFLOP/s", "ratio", "check vs SDPA"],
                                 backward_rows), ""]
    lines += [f"Result: {'FAIL' if failures else 'PASS'} "
              f"({len(failures)} problems) in {time.time() - started:.0f} s", ""]
    if failures:
        lines += ["Problems:", ""] + [f"- {p}" for p in failures[:50]] + [""]
    report = "\n".join(lines)
    results["failures"] = failures
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(report)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
    print()
    print(report, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
