# RUN: %python %s %fa_run
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
# RUN: %python %s %fa_run --tiled
# RUN: %python %s %fa_run --emulate
# RUN: %python %s %fa_run --emulate --simt
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Numerics of `fa-run attention-backward` on the CPU (fa.attention_backward
through the vector kernel, fa-cpu-attention-backward; with --tiled through
fa-tile-attention-backward; with --emulate the SIMT GPU kernels of
fa-map-to-tensor-cores-backward's mma.sync kernels for f16 and bf16 at
head dims multiples of 16, fa-promote-shared-backward's SIMT ones for the
rest, and with --emulate --simt the SIMT ones for every case, dQ and dK/dV,
under fa's interpreter with its race, bounds and initialization checks)
against the float64 gradients of
test/lib/fa_reference.py (reference_backward), written from the op's
contract and shared with no lowering.

First the reference itself is checked against central finite differences
of sum(O * dO) on small cases (causal, window + softcap + ALiBi, GQA, key
lengths, a boolean mask): an error there would make every comparison
below meaningless.

Each case draws seeded random Q, K, V and dO, computes the forward's O and
LSE in float64 (O rounded to the case's type, LSE to float32, as a
framework would save them), runs fa-run and compares dQ, dK and dV:
  * float32: relative Frobenius error below 1e-5 (2e-5 with softcap);
  * float16 / bfloat16: max abs error at most 2x that of a naive backward
    (float32 math on the rounded inputs, gradients rounded to the type)
    plus 1e-5 (FlashAttention's criterion); for the mma.sync kernels the
    naive backward also rounds P and dS to the type before their products,
    as every tensor-core kernel (and FlashAttention's half-precision
    reference) does;
  * exact zeros: dQ rows of queries with no attended key (LSE = -inf) and
    dK / dV rows of keys no query attends (past a key length, or removed
    for every row); no NaN anywhere (the outputs are poisoned first), also
    when K / V rows past a key length or under a boolean mask hold NaN;
  * determinism: one case's gradients are bit-identical serially and on 2
    threads, run twice.

With --emulate the cases also run at the GPU kernels' own head dims (D = 64
and 128 in float16 and bfloat16, the sizes ptxas checks) and on every tile
size the cases name (block-kv at most 32 there).

Usage: backward_numerics.py FA_RUN [--parallel] [--tiled]
                            [--emulate [--simt]] [SUBSTRING...]
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
from fa_reference import (modifier_inputs, reference,  # noqa: E402
                          reference_backward, seed_of)
from mlir_exec import bf16_bits, bf16_round  # noqa: E402

FA_RUN = sys.argv[1]
ARGS = sys.argv[2:]
PARALLEL = "--parallel" in ARGS
TILED = "--tiled" in ARGS
EMULATE = "--emulate" in ARGS
SIMT = "--simt" in ARGS
ONLY = [a for a in ARGS
        if a not in ("--parallel", "--tiled", "--emulate", "--simt")]


def uses_mma(c):
    """Whether --device emulate runs the case on the mma.sync kernels
    (kernel=auto: f16/bf16, head dims multiples of 16 up to 128)."""
    dims = (c["D"], c["Dv"] or c["D"])
    return (EMULATE and not SIMT and c["dtype"] != "float32"
            and all(d % 16 == 0 and d <= 128 for d in dims))


def case(name, **kw):
    c = dict(name=name, B=2, Hq=4, Hkv=4, Nq=64, Nk=64, D=32, Dv=None,
             dtype="float32", causal="none", lens=None, mask=None,
             mask_shape="BHQK", scale=None, window=None, softcap=None,
             alibi=None, chunk=None, segments=None, nan_padding=False,
             block_q=None, block_kv=None)
    c.update(kw)
    return c


CASES = [
    case("dense_tile_multiple"),
    case("ragged_tiles", Nq=70, Nk=50, D=16, block_q=32, block_kv=16),
    case("causal_top_left_q_lt_k", Nq=40, Nk=90, causal="top-left",
         block_q=16, block_kv=32),
    case("causal_bottom_right_q_gt_k", Nq=90, Nk=40, causal="bottom-right",
         block_q=32, block_kv=16),
    case("causal_bottom_right_q_lt_k", Nq=33, Nk=100, causal="bottom-right"),
    case("kv_lens_with_zero", B=3, Nq=20, Nk=70, lens=[0, 17, 200],
         block_kv=16),
    case("kv_lens_nan_padding", B=2, Nq=24, Nk=60, lens=[33, 5],
         nan_padding=True, block_kv=16),
    case("bool_mask_fully_masked_rows", Nq=30, Nk=45, mask="bool"),
    case("bool_mask_nan_values", Nq=30, Nk=45, mask="bool",
         nan_padding=True),
    case("additive_mask_broadcast", Nq=30, Nk=45, mask="float",
         mask_shape="11QK"),
    case("gqa", Hq=8, Hkv=2, Nq=48, Nk=80, causal="bottom-right",
         block_q=16, block_kv=32),
    case("mqa_dv_ne_d", Hq=4, Hkv=1, Nq=37, Nk=53, D=32, Dv=16),
    # Head dims of 6 and 5 vectors with 16 lanes (register blocks of 6 and
    # 5 vectors for the rows of dK, dV and dQ), ragged rows.
    case("d96_dv80_causal", B=1, Hq=2, Hkv=1, Nq=45, Nk=70, D=96, Dv=80,
         causal="bottom-right"),
    case("window_softcap_alibi", Hq=4, Hkv=2, Nq=70, Nk=90,
         causal="bottom-right", window=(20, 0), softcap=5.0, alibi="h",
         block_q=16, block_kv=16),
    case("window_both_sides_alibi_bh", Nq=50, Nk=50, window=(7, 9),
         alibi="bh", block_q=16, block_kv=8),
    case("chunk_segments", Nq=48, Nk=48, causal="top-left", chunk=16,
         segments="sorted", block_q=16, block_kv=16),
    case("scale_large_scores", Nq=40, Nk=40, scale=0.5),
    case("f16_causal_gqa", dtype="float16", Hq=4, Hkv=2, Nq=64, Nk=96,
         causal="bottom-right"),
    case("f16_softcap_mask", dtype="float16", Nq=40, Nk=56, softcap=10.0,
         mask="bool"),
    case("bf16_window", dtype="bfloat16", Hq=4, Hkv=2, Nq=50, Nk=64,
         window=(16, 16), lens=[64, 40]),
    # Half types with NaN in removed K / V rows (the mma.sync dQ kernel
    # clears them from the K tile), ragged query and key tiles, Dv != D,
    # and the positional modifiers together.
    case("f16_mask_nan_values", dtype="float16", Nq=30, Nk=45, mask="bool",
         nan_padding=True),
    case("f16_lens_nan_ragged_causal", dtype="float16", B=2, Hq=2, Hkv=1,
         Nq=70, Nk=150, lens=[150, 37], nan_padding=True,
         causal="bottom-right"),
    case("f16_mqa_dv_ne_d", dtype="float16", Hq=4, Hkv=1, Nq=37, Nk=53,
         D=64, Dv=32),
    case("bf16_chunk_segments_alibi", dtype="bfloat16", Nq=48, Nk=80,
         causal="top-left", chunk=16, segments="sorted", alibi="bh"),
]
if EMULATE:
    # The GPU kernels' head dims, f16 and bf16 (their tiles are chosen for
    # the workgroup-memory budget), causal with key lengths and a mask.
    CASES += [
        case("gpu_f16_d64_causal_lens", dtype="float16", B=2, Hq=2, Hkv=1,
             Nq=45, Nk=70, D=64, causal="bottom-right", lens=[70, 31]),
        case("gpu_bf16_d128_mask", dtype="bfloat16", B=1, Hq=2, Hkv=2,
             Nq=40, Nk=36, D=128, mask="bool"),
        case("gpu_f16_d128_softcap_gqa", dtype="float16", B=1, Hq=4, Hkv=2,
             Nq=33, Nk=40, D=128, causal="top-left", softcap=8.0),
        case("gpu_f32_d128", B=1, Hq=1, Hkv=1, Nq=20, Nk=50, D=128, Dv=64),
    ]


def draw(c, rng):
    B, Hq, Hkv, Nq, Nk, D = (c[x] for x in ("B", "Hq", "Hkv", "Nq", "Nk", "D"))
    Dv = c["Dv"] or D
    a = {"q": rng.standard_normal((B, Hq, Nq, D)),
         "k": rng.standard_normal((B, Hkv, Nk, D)),
         "v": rng.standard_normal((B, Hkv, Nk, Dv)),
         "do": rng.standard_normal((B, Hq, Nq, Dv))}
    # Inputs rounded to the case's type, held in float32.
    for n in list(a):
        x = a[n].astype(np.float32)
        if c["dtype"] == "float16":
            x = x.astype(np.float16).astype(np.float32)
        elif c["dtype"] == "bfloat16":
            x = bf16_round(x)
        a[n] = x
    if c["lens"] is not None:
        a["lens"] = np.array(c["lens"], dtype=np.int32)
    if c["mask"] is not None:
        shape = {"BHQK": (B, Hq, Nq, Nk), "11QK": (1, 1, Nq, Nk)}[
            c["mask_shape"]]
        if c["mask"] == "bool":
            m = rng.random(shape) < 0.7
            m[..., 3, :] = False  # a fully masked row
            if c["nan_padding"]:
                # Keys no row keeps, whose K / V rows get NaN below.
                m[..., :, 7] = False
                m[..., :, 20] = False
            a["mask"] = m
        else:
            m = (rng.standard_normal(shape) * 2).astype(np.float32)
            m[..., 5, :] = -np.inf
            m[rng.random(shape) < 0.2] = -np.inf
            a["mask"] = m
    mods = modifier_inputs(rng, B, Hq, Nq, Nk, c["alibi"], c["segments"])
    a.update(mods)
    return a


def save(path, x, dtype):
    if dtype == "float16":
        np.save(path, x.astype(np.float16))
    elif dtype == "bfloat16":
        np.save(path, bf16_bits(x))
    else:
        np.save(path, x.astype(np.float32))


def load(path, dtype):
    x = np.load(path)
    if dtype == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def round_to(x, dtype):
    x = x.astype(np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return bf16_round(x).astype(np.float64)
    return x.astype(np.float64)


def check_reference():
    """reference_backward against finite differences of sum(O * dO)."""
    failures = []
    rng = np.random.default_rng(seed_of("backward.fd"))
    cases = [
        dict(causal="bottom-right", lens=None, mask=None, kw={}),
        dict(causal="none", lens=np.array([6], np.int32), mask=None,
             kw=dict(window=(2, 1), softcap=1.5,
                     alibi=np.array([0.1, 0.2, 0.3, 0.4]))),
        dict(causal="top-left", lens=None,
             mask=rng.random((1, 4, 5, 7)) < 0.6, kw=dict(chunk=3)),
    ]
    for i, fd in enumerate(cases):
        B, Hq, Hkv, Nq, Nk, D, Dv = 1, 4, 2, 5, 7, 3, 2
        q = rng.standard_normal((B, Hq, Nq, D))
        k = rng.standard_normal((B, Hkv, Nk, D))
        v = rng.standard_normal((B, Hkv, Nk, Dv))
        do = rng.standard_normal((B, Hq, Nq, Dv))
        grads = reference_backward(q, k, v, do, 0.7, fd["causal"],
                                   fd["lens"], fd["mask"], **fd["kw"])

        def loss(x, y, z):
            o, _, _ = reference(x, y, z, 0.7, fd["causal"], fd["lens"],
                                fd["mask"], np.float64, **fd["kw"])
            return (o * do).sum()
        h = 1e-6
        for name, arr, g in zip("qkv", (q, k, v), grads):
            num = np.zeros_like(arr)
            for idx in np.ndindex(arr.shape):
                plus, minus = arr.copy(), arr.copy()
                plus[idx] += h
                minus[idx] -= h
                args = {"q": q, "k": k, "v": v}
                args[name] = plus
                lp = loss(args["q"], args["k"], args["v"])
                args[name] = minus
                lm = loss(args["q"], args["k"], args["v"])
                num[idx] = (lp - lm) / (2 * h)
            err = np.abs(num - g).max()
            if not err < 1e-6:
                failures.append(f"reference d{name} of finite-difference "
                                f"case {i}: max abs error {err:.2e}")
    print(f"reference vs finite differences: {len(cases)} cases")
    return failures


def run_case(c, workdir):
    rng = np.random.default_rng(seed_of("backward." + c["name"]))
    a = draw(c, rng)
    D = c["D"]
    scale = c["scale"] if c["scale"] is not None else 1.0 / np.sqrt(D)
    segs = (a["qs"], a["ks"]) if "qs" in a else None
    kw = dict(window=c["window"], softcap=c["softcap"], alibi=a.get("alibi"),
              chunk=c["chunk"], segments=segs)
    lens, mask = a.get("lens"), a.get("mask")
    o, lse, empty = reference(a["q"], a["k"], a["v"], scale, c["causal"],
                              lens, mask, np.float64, **kw)
    ref = reference_backward(a["q"], a["k"], a["v"], a["do"], scale,
                             c["causal"], lens, mask, **kw)
    # Keys no query row of the group attends: exact zeros in dK and dV.
    s_keep = _attended(a, c, scale, kw)

    k_in, v_in = a["k"].copy(), a["v"].copy()
    if c["nan_padding"]:
        # Values a kernel must never let through: rows past the key length
        # and rows every query masks.
        if lens is not None:
            for b, n in enumerate(lens):
                k_in[b, :, max(n, 0):] = np.nan
                v_in[b, :, max(n, 0):] = np.nan
        if mask is not None:
            removed = ~mask.any(axis=(1, 2))  # [B, Nk] keys nobody keeps
            assert removed.any(), "no key for the NaN rows"
            for b in range(mask.shape[0]):
                k_in[b, :, removed[b]] = np.nan
                v_in[b, :, removed[b]] = np.nan
    p = {n: os.path.join(workdir, f"{c['name']}.{n}.npy") for n in
         ("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv", "lens", "mask",
          "alibi", "qs", "ks")}
    dt = c["dtype"]
    save(p["q"], a["q"], dt)
    save(p["k"], k_in, dt)
    save(p["v"], v_in, dt)
    save(p["do"], a["do"], dt)
    save(p["o"], o, dt)
    np.save(p["lse"], lse.astype(np.float32))
    cmd = [FA_RUN, "attention-backward", "--q", p["q"], "--k", p["k"],
           "--v", p["v"], "--out", p["o"], "--lse", p["lse"], "--do",
           p["do"], "--dq", p["dq"], "--dk", p["dk"], "--dv", p["dv"],
           "--causal", c["causal"], "--quiet"]
    if dt == "bfloat16":
        cmd += ["--dtype", "bf16"]
    if c["scale"] is not None:
        cmd += ["--scale", repr(float(c["scale"]))]
    if lens is not None:
        np.save(p["lens"], lens)
        cmd += ["--kv-lens", p["lens"]]
    if mask is not None:
        np.save(p["mask"], mask)
        cmd += ["--mask", p["mask"]]
    if c["window"] is not None:
        cmd += ["--window", f"{c['window'][0]},{c['window'][1]}"]
    if c["softcap"] is not None:
        cmd += ["--softcap", repr(c["softcap"])]
    if c["chunk"] is not None:
        cmd += ["--chunk", str(c["chunk"])]
    if "alibi" in a:
        np.save(p["alibi"], a["alibi"])
        cmd += ["--alibi", p["alibi"]]
    if segs is not None:
        np.save(p["qs"], a["qs"])
        np.save(p["ks"], a["ks"])
        cmd += ["--q-segments", p["qs"], "--k-segments", p["ks"]]
    if c["block_q"]:
        cmd += ["--block-q", str(c["block_q"])]
    if c["block_kv"]:
        cmd += ["--block-kv", str(c["block_kv"])]
    if PARALLEL:
        cmd += ["--parallel"]
    if TILED:
        cmd += ["--cpu-kernel", "tiled"]
    if EMULATE:
        cmd += ["--device", "emulate"]
    if SIMT:
        cmd += ["--kernel", "simt"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return [f"{c['name']}: fa-run failed: {r.stderr.strip()[-2000:]}"]
    got = [load(p[n], dt) for n in ("dq", "dk", "dv")]

    failures = []
    naive = None
    if dt != "float32":
        # A naive backward in the type: float32 math on the rounded inputs
        # and the saved O, gradients rounded once.
        nv = reference_backward(a["q"].astype(np.float32),
                                a["k"].astype(np.float32),
                                a["v"].astype(np.float32),
                                a["do"].astype(np.float32), scale,
                                c["causal"], lens, mask, **kw,
                                round_operands=((lambda x: round_to(x, dt))
                                                if uses_mma(c) else None))
        naive = [round_to(x, dt) for x in nv]
    for i, name in enumerate(("dq", "dk", "dv")):
        g, r_ = got[i], ref[i]
        if np.isnan(g).any():
            failures.append(f"{c['name']}: {name} has "
                            f"{int(np.isnan(g).sum())} NaN")
            continue
        if dt == "float32":
            err = np.linalg.norm(g - r_) / max(np.linalg.norm(r_), 1e-30)
            tol = 2e-5 if c["softcap"] else 1e-5
            msg = f"rel err {err:.2e} (tol {tol:.0e})"
        else:
            err = np.abs(g - r_).max()
            base = np.abs(naive[i] - r_).max()
            tol = 2 * base + 1e-5
            msg = f"max abs err {err:.2e} (naive {base:.2e}, tol {tol:.2e})"
        print(f"{c['name']} {name}: {msg}")
        if not err <= tol:
            failures.append(f"{c['name']}: {name} {msg}")
    # Exact zeros.
    dq, dk, dv = got
    if np.any(dq[empty] != 0):
        failures.append(f"{c['name']}: dQ of rows with no attended key is "
                        "not exactly 0")
    dead = ~s_keep
    if np.any(dk[dead] != 0) or np.any(dv[dead] != 0):
        failures.append(f"{c['name']}: dK / dV of keys no row attends are "
                        "not exactly 0")
    return failures


def _attended(a, c, scale, kw):
    """[B, Hkv, Nk]: whether some query row of the kv head's group attends
    the key (from the reference's scores)."""
    from fa_reference import scores
    s, _ = scores(a["q"], a["k"], scale, c["causal"], a.get("lens"),
                  a.get("mask"), np.float64, **kw)
    B, Hq, Nq, Nk = s.shape
    Hkv = c["Hkv"]
    kept = np.isfinite(s).reshape(B, Hkv, Hq // Hkv, Nq, Nk)
    return kept.any(axis=(2, 3))


def check_determinism(workdir):
    """The gradients are bit-identical across runs and thread counts (one
    task owns every element it writes, in a fixed order): the gqa case run
    serially, then twice on 2 threads."""
    c = next(x for x in CASES if x["name"] == "gqa")
    outputs = []
    for threads, parallel in (("1", False), ("2", True), ("2", True)):
        d = os.path.join(workdir, f"det{len(outputs)}")
        os.makedirs(d)
        global PARALLEL
        saved, PARALLEL = PARALLEL, parallel
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        old_env = os.environ.copy()
        os.environ.update(env)
        try:
            problems = run_case(c, d)
        finally:
            os.environ.clear()
            os.environ.update(old_env)
            PARALLEL = saved
        if problems:
            return problems
        outputs.append([open(os.path.join(d, f"gqa.{n}.npy"), "rb").read()
                        for n in ("dq", "dk", "dv")])
    if any(o != outputs[0] for o in outputs[1:]):
        return ["determinism: the gradients differ between runs or thread "
                "counts"]
    print("determinism: bit-identical on 1 and 2 threads, twice")
    return []


def main():
    failures = check_reference()
    cases = [c for c in CASES if not ONLY or any(s in c["name"] for s in ONLY)]
    with tempfile.TemporaryDirectory() as workdir:
        for c in cases:
            failures += run_case(c, workdir)
        if not ONLY and not EMULATE:
            failures += check_determinism(workdir)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"PASS: {len(cases)} cases")


if __name__ == "__main__":
    main()
