# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""`fa-run attention` with score/mask modifiers (--window, --softcap,
--chunk, --alibi, --q-segments/--k-segments) against the float64 reference
of test/lib/fa_reference.py, on the CPU vector kernel (the default, with the
automatic tile sizes, and with 2 OpenMP threads), the tiled lowering, the
reference lowering, the promoted (SIMT) form on the CPU and the SIMT GPU
kernel under the interpreter (--device emulate). Shapes cross several query and key tiles and end
in partial ones; the windows are shorter than a key tile, so full, partial
and skipped key tiles all occur.

Pass criteria: relative Frobenius error of O and LSE (non-empty rows) below
2e-5; rows with nothing attended exactly O = 0 and LSE = -inf; no NaN.

Usage: modifiers_check.py FA_RUN [ARGS...]  (extra args go to every run)
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "lib"))
from fa_reference import (reference, save_attention_inputs,  # noqa: E402
                          seed_of, sorted_segments)
from mlir_exec import rel_err  # noqa: E402


def case(name, **kw):
    c = dict(name=name, B=1, Hq=2, Hkv=2, Nq=150, Nk=150, D=64,
             causal="none", lens=None, mask=None, window=None, softcap=None,
             chunk=None, alibi=None, segments=False, mag=1.0)
    c.update(kw)
    return c


CASES = [
    case("window_br_gqa_lens", B=2, Hq=4, Hkv=2, Nq=131, Nk=290,
         causal="bottom-right", window=(40, 0), lens=[290, 201]),
    case("window_both_none", Nq=200, Nk=170, window=(25, 10)),
    case("softcap_float_mask", Nq=90, Nk=211, mag=6.0, softcap=5.0,
         mask="float"),
    case("alibi_bh_tl", B=2, Nq=100, Nk=180, causal="top-left", alibi="bh"),
    case("chunk_causal_br", Nq=260, Nk=260, causal="bottom-right", chunk=48),
    case("segments_sorted_lens", B=2, Nq=170, Nk=170, segments=True,
         lens=[170, 120], causal="top-left"),
    case("combined", B=2, Hq=4, Hkv=1, Nq=120, Nk=333, causal="bottom-right",
         window=(70, 0), softcap=4.0, alibi="h", mag=3.0, mask="bool"),
]

WAYS = {"vector": [], "parallel": ["--parallel"],
        "tiled": ["--cpu-kernel", "tiled"], "reference": ["--reference"],
        # The SIMT GPU kernel's structure run on the CPU, and the SIMT GPU
        # kernel under the interpreter.
        "promoted": ["--promoted"],
        "emulate": ["--device", "emulate", "--kernel", "simt"]}


def run_case(fa_run, extra, c, tmp):
    rng = np.random.default_rng(seed_of("fa-run-modifiers." + c["name"]))
    B, Hq, Hkv, Nq, Nk, D = (c[x] for x in ("B", "Hq", "Hkv", "Nq", "Nk", "D"))
    q = (rng.standard_normal((B, Hq, Nq, D)) * c["mag"]).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    lens = None if c["lens"] is None else np.array(c["lens"], np.int32)
    mask = None
    if c["mask"] == "bool":
        mask = rng.random((B, 1, Nq, Nk)) < 0.8
    elif c["mask"] == "float":
        mask = rng.standard_normal((1, Hq, Nq, Nk)).astype(np.float32)
    paths = {n: os.path.join(tmp, f"{c['name']}.{n}.npy")
             for n in ("q", "k", "v", "o", "lse", "lens", "mask", "alibi",
                       "qs", "ks")}
    flags = save_attention_inputs(paths, q, k, v, lens, mask, True)
    flags += ["--causal", c["causal"]]
    alibi = None
    if c["alibi"]:
        alibi = (rng.random(Hq if c["alibi"] == "h" else (B, Hq)) *
                 0.3).astype(np.float32)
        np.save(paths["alibi"], alibi)
        flags += ["--alibi", paths["alibi"]]
    segments = None
    if c["segments"]:
        segments = (sorted_segments(rng, B, Nq, 5),
                    sorted_segments(rng, B, Nk, 5))
        np.save(paths["qs"], segments[0])
        np.save(paths["ks"], segments[1])
        flags += ["--q-segments", paths["qs"], "--k-segments", paths["ks"]]
    if c["window"]:
        flags += ["--window", f"{c['window'][0]},{c['window'][1]}"]
    if c["softcap"]:
        flags += ["--softcap", str(c["softcap"])]
    if c["chunk"]:
        flags += ["--chunk", str(c["chunk"])]
    ref_o, ref_l, empty = reference(
        q, k, v, 1.0 / np.sqrt(D), c["causal"], lens, mask, np.float64,
        window=c["window"], softcap=c["softcap"], alibi=alibi,
        chunk=c["chunk"], segments=segments)
    failures = []
    for way, way_flags in WAYS.items():
        env = dict(os.environ, OMP_NUM_THREADS="2")
        r = subprocess.run([fa_run, "attention", "--quiet"] + flags +
                           way_flags + extra, capture_output=True, text=True,
                           env=env)
        tag = f"{c['name']} [{way}]"
        if r.returncode != 0:
            failures.append(f"{tag}: fa-run failed: {r.stderr.strip()}")
            continue
        o, lse = np.load(paths["o"]), np.load(paths["lse"])
        full = ~empty
        eo, el = rel_err(o[full], ref_o[full]), rel_err(lse[full], ref_l[full])
        print(f"{tag}: O rel err {eo:.2e}, LSE rel err {el:.2e}, "
              f"{int(empty.sum())} empty rows")
        if not (eo < 2e-5 and el < 2e-5):
            failures.append(f"{tag}: O {eo:.2e}, LSE {el:.2e}")
        if not (np.all(o[empty] == 0) and np.all(lse[empty] == -np.inf)):
            failures.append(f"{tag}: empty rows are not O = 0, LSE = -inf")
        if np.isnan(o).any() or np.isnan(lse).any():
            failures.append(f"{tag}: NaN in the output")
    return failures


def main(argv):
    fa_run, extra = argv[1], argv[2:]
    failures = []
    with tempfile.TemporaryDirectory(prefix="fa-run-modifiers-") as tmp:
        for c in CASES:
            failures += run_case(fa_run, extra, c, tmp)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"{len(CASES)}/{len(CASES)} modifier cases passed on "
          f"{len(WAYS)} lowerings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
