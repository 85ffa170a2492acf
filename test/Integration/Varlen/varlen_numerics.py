# RUN: %python %s %fa_run
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
# The SIMT GPU kernel under the interpreter (fa-run --device emulate).
# RUN: %python %s %fa_run --device emulate --kernel simt
# The tensor-core kernels (mma.sync; wgmma at D 64) under the interpreter:
# every case in float16 where its head dims suit the family.
# RUN: %python %s %fa_run --device emulate --kernel mma
# RUN: %python %s %fa_run --device emulate --kernel wgmma
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of fa.attention's token-major variable-length form
(cu_seqlens: Q [Tq, Hq, D], K/V [Tk, Hkv, D], O [Tq, Hq, Dv], LSE
[Hq, Tq]) through fa-run --cu-seqlens-q/--cu-seqlens-k, the CPU vector
kernel (serial and parallel) and the SIMT GPU kernel under the SIMT
interpreter (--device emulate), and the tensor-core kernels (--kernel mma,
wgmma: each case in float16 where its head dims are multiples of 16, or of
64 for wgmma, which then runs at D 64), against a float64 reference that
cuts each sequence out of the
packed tensors (sharing no code with the kernel) and applies
test/lib/fa_reference.py's contract to it alone: its own lengths are Nq
and Nk, so bottom-right causality is aligned per sequence.

The cases have ragged lengths not multiple of any tile, batches of
decode steps (few queries per sequence: the CPU's packed decode kernel),
sequences with no
queries, with no keys (their rows: O = 0, LSE = -inf), with one token,
with more queries than keys (the first rows under bottom-right causality
are empty), GQA and MQA, Dv != D, every causal mode, windows, softcap,
ALiBi slopes per head and per (sequence, head), chunks, f16 inputs, and
offsets that leave rows of the packed tensors in no sequence (before the
first offset, after the last): those rows must keep fa-run's NaN poison,
that is, never be written.

Pass criteria: relative Frobenius error of O and LSE below 2e-5 (f32) or
2e-3 (f16 outputs); empty rows exactly O = 0 and LSE = -inf; no NaN inside
a sequence; rows outside every sequence untouched.

The comparison can fail: two cases are compared again against references
that must not match, and must fail: one aligning causality to the packed
lengths Tq, Tk instead of each sequence's (a kernel using the tensor's
lengths), one giving each sequence the keys of the next (a kernel reading
from the wrong key offset).
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import compare_outputs, reference, seed_of  # noqa: E402

FA_RUN = sys.argv[1]
EXTRA = sys.argv[2:]
# The tensor-core families take f16/bf16 inputs and head dims multiples of
# 16 (mma.sync) or 64 (wgmma).
FAMILY = EXTRA[EXTRA.index("--kernel") + 1] if "--kernel" in EXTRA else None
HEAD_DIM_MULTIPLE = {"mma": 16, "wgmma": 64}.get(FAMILY)


def for_family(c):
    """Case c as the kernel family of this run takes it: float16 for the
    tensor-core families, at D 64 for wgmma; None when its head dims do not
    suit the family."""
    if HEAD_DIM_MULTIPLE is None:
        return c
    c = dict(c, dtype=np.float16)
    if FAMILY == "wgmma":
        c.update(D=64, Dv=None)
    dv = c["Dv"] or c["D"]
    if c["D"] % HEAD_DIM_MULTIPLE or dv % HEAD_DIM_MULTIPLE:
        return None
    return c


def case(name, **kw):
    c = dict(name=name, Hq=8, Hkv=2, D=32, Dv=None, lq=[5, 0, 1, 37, 70, 20],
             lk=[5, 3, 90, 37, 133, 7], causal="bottom-right", window=None,
             softcap=None, alibi=None, chunk=None, lead=0, tail=0,
             dtype=np.float32, mag=1.0)
    c.update(kw)
    return c


CASES = [
    # Ragged lengths: an empty query sequence, one query against 90 keys,
    # 70 queries (two 64-row tiles) against 133 keys, 20 queries against 7
    # keys (the first 13 rows attend to nothing).
    case("ragged_gqa"),
    case("top_left", causal="top-left"),
    case("not_causal", causal="none", lk=[5, 3, 90, 37, 133, 0]),
    # A sequence with queries and no keys; MQA; Dv != D.
    case("no_keys_mqa", Hq=4, Hkv=1, D=24, Dv=40, lq=[3, 65, 1],
         lk=[0, 65, 200]),
    # Rows before the first offset and after the last are in no sequence.
    case("rows_outside", lead=5, tail=9, lq=[12, 64, 1], lk=[30, 64, 10]),
    # Modifiers at in-sequence positions.
    case("window_softcap", window=(16, 0), softcap=3.0, mag=3.0),
    case("window_right", causal="none", window=(8, 4)),
    case("alibi_heads", alibi="h"),
    case("alibi_seq_heads", alibi="bh", lq=[40, 1, 66], lk=[40, 300, 66]),
    case("chunk", chunk=16, lq=[50, 20], lk=[50, 90]),
    # Long sequences, several query tiles each, in one batch.
    case("long", Hq=4, Hkv=4, lq=[300, 129, 1, 257], lk=[300, 500, 1, 257]),
    case("f16", dtype=np.float16, lq=[33, 70, 0], lk=[33, 100, 4]),
    # One sequence.
    case("single", Hq=2, Hkv=1, lq=[77], lk=[77]),
    # Batches of decode steps: every sequence's Nq x Hq/Hkv rows fit one
    # decode tile of the CPU kernel (8 rows with AVX2, 16 with AVX-512),
    # which packs the query heads of a kv head: empty sequences, one with
    # queries and no keys, several queries per sequence, MQA with D not a
    # multiple of the vector width, modifiers read per packed lane.
    case("decode_gqa", lq=[1, 0, 1, 2, 2, 1], lk=[5, 3, 90, 37, 133, 0]),
    case("decode_mqa", Hq=8, Hkv=1, D=24, Dv=40, lq=[1, 1, 0, 1],
         lk=[0, 65, 9, 200]),
    case("decode_modifiers", window=(16, 0), softcap=3.0, alibi="bh",
         mag=3.0, lq=[1, 2, 1], lk=[40, 300, 2]),
    case("decode_outside", lead=5, tail=9, lq=[2, 1, 1], lk=[30, 64, 10]),
]


def offsets(lens, lead):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32) + lead


def run_case(c, tmp, mutate=None):
    rng = np.random.default_rng(seed_of("varlen." + c["name"]))
    Hq, Hkv, D = c["Hq"], c["Hkv"], c["D"]
    Dv = c["Dv"] or D
    lq, lk = c["lq"], c["lk"]
    B = len(lq)
    cu_q, cu_k = offsets(lq, c["lead"]), offsets(lk, c["lead"])
    Tq, Tk = int(cu_q[-1]) + c["tail"], int(cu_k[-1]) + c["tail"]
    dt = c["dtype"]
    q = (rng.standard_normal((Tq, Hq, D)) * c["mag"]).astype(dt)
    k = rng.standard_normal((Tk, Hkv, D)).astype(dt)
    v = rng.standard_normal((Tk, Hkv, Dv)).astype(dt)
    p = {n: os.path.join(tmp, f"{c['name']}.{n}.npy")
         for n in ("q", "k", "v", "o", "lse", "cuq", "cuk", "alibi")}
    for n, x in (("q", q), ("k", k), ("v", v), ("cuq", cu_q), ("cuk", cu_k)):
        np.save(p[n], x)
    cmd = [FA_RUN, "attention", "--q", p["q"], "--k", p["k"], "--v", p["v"],
           "--cu-seqlens-q", p["cuq"], "--cu-seqlens-k", p["cuk"],
           "-o", p["o"], "--lse", p["lse"], "--causal", c["causal"],
           "--quiet"] + EXTRA
    kw = {}
    if c["window"]:
        kw["window"] = c["window"]
        cmd += ["--window", "{},{}".format(*c["window"])]
    if c["softcap"]:
        kw["softcap"] = c["softcap"]
        cmd += ["--softcap", repr(c["softcap"])]
    if c["chunk"]:
        kw["chunk"] = c["chunk"]
        cmd += ["--chunk", str(c["chunk"])]
    slopes = None
    if c["alibi"]:
        shape = (Hq,) if c["alibi"] == "h" else (B, Hq)
        slopes = (rng.random(shape) * 0.3).astype(np.float32)
        np.save(p["alibi"], slopes)
        cmd += ["--alibi", p["alibi"]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"{c['name']}: fa-run failed: {proc.stderr.strip()}"]
    o = np.load(p["o"]).astype(np.float64)
    lse = np.load(p["lse"]).astype(np.float64)
    if o.shape != (Tq, Hq, Dv) or lse.shape != (Hq, Tq):
        return [f"{c['name']}: output shapes {o.shape} and {lse.shape}, "
                f"expected {(Tq, Hq, Dv)} and {(Hq, Tq)}"]

    # The reference, per sequence; rows of no sequence stay NaN.
    parts = []
    for b in range(B):
        qs = slice(cu_q[b], cu_q[b + 1])
        kb = b
        if mutate == "next_keys":
            kb = (b + 1) % B
        ks = slice(cu_k[kb], cu_k[kb + 1])
        qb = q[qs].transpose(1, 0, 2)[None]
        kk = k[ks].transpose(1, 0, 2)[None]
        vv = v[ks].transpose(1, 0, 2)[None]
        akw = dict(kw)
        if slopes is not None:
            akw["alibi"] = slopes if slopes.ndim == 1 else slopes[b:b + 1]
        causal = c["causal"]
        if mutate == "packed_alignment" and causal == "bottom-right":
            # Aligned to the packed lengths: q_offset (Tk - Tq) - (Lk - Lq).
            akw["q_offset"] = (Tk - Tq) - (kk.shape[2] - qb.shape[2])
        ro, rl, re_ = reference(qb, kk, vv, 1.0 / np.sqrt(D), causal, None,
                                None, np.float64, **akw)
        parts.append((qs, ro[0].transpose(1, 0, 2), rl[0].T, re_[0].T))
    inside = np.zeros(Tq, dtype=bool)
    ref_o = np.zeros((Tq, Hq, Dv))
    ref_l = np.zeros((Tq, Hq))
    empty = np.zeros((Tq, Hq), dtype=bool)
    for qs, ro, rl, re_ in parts:
        inside[qs] = True
        ref_o[qs], ref_l[qs], empty[qs] = ro, rl, re_
    lse_t = lse.T
    tol = 2e-5 if dt == np.float32 else 2e-3
    tag = (f"{c['name']}{' (' + mutate + ', must fail)' if mutate else ''}: "
           f"Hq={Hq} Hkv={Hkv} D={D} Dv={Dv} lq={lq} lk={lk} "
           f"{np.dtype(dt).name}")
    failures = compare_outputs(tag, o[inside], lse_t[inside], ref_o[inside],
                               ref_l[inside], empty[inside], tol=tol)
    if not (np.isnan(o[~inside]).all() and np.isnan(lse_t[~inside]).all()):
        failures.append(f"{tag}: rows outside every sequence were written")
    return failures


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in CASES:
            c = for_family(c)
            if c is not None:
                failures += run_case(c, tmp)
        # The comparison can fail: wrong alignments and key ranges.
        for name, mutate in (("ragged_gqa", "packed_alignment"),
                             ("ragged_gqa", "next_keys"),
                             ("decode_gqa", "packed_alignment"),
                             ("decode_gqa", "next_keys")):
            c = for_family(next(x for x in CASES if x["name"] == name))
            if not run_case(c, tmp, mutate):
                failures.append(f"{name}: the {mutate} reference matched; "
                                "the comparison cannot fail")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        raise SystemExit(1)
    print("PASS")


main()
