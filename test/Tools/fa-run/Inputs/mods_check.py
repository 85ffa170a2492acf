# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""`fa-run attention --mods FILE.mlir --mod-operand X.npy ...`: general
score_mod / mask_mod functions (the region sets of
test/lib/modifier_regions.py, written as func.func @score_mod / @mask_mod)
against the float64 reference of test/lib/fa_reference.py, on the CPU
vector kernel (one and two threads), the tiled lowering and the reference
lowering, the SIMT GPU kernel under the interpreter (--device emulate), and
for a mask_mod its block mask (--block-mask) on one and two threads.
Shapes cross several query and key tiles and end in partial ones.

Pass criteria: relative Frobenius error of O and LSE (non-empty rows) below
2e-5; rows with nothing attended exactly O = 0 and LSE = -inf; no NaN.

Usage: mods_check.py FA_RUN
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "lib"))
from fa_reference import reference, save_attention_inputs, seed_of  # noqa: E402
from mlir_exec import rel_err  # noqa: E402
from modifier_regions import REGIONS, mods_file  # noqa: E402


def case(name, regions, **kw):
    c = dict(name=name, regions=regions, B=1, Hq=2, Hkv=2, Nq=150, Nk=150,
             D=64, causal="none", lens=None, window=None, softcap=None)
    c.update(kw)
    return c


CASES = [
    case("rel_bias_br_gqa_lens", "rel_bias", B=2, Hq=4, Hkv=2, Nq=131,
         Nk=290, causal="bottom-right", lens=[290, 201]),
    case("alibi_like_tl", "alibi_like", Hq=4, Hkv=1, Nq=100, Nk=180,
         causal="top-left"),
    case("prefix_lm_lens0", "prefix_lm", B=2, Nq=170, Nk=170, lens=[170, 0]),
    case("both_window_softcap", "both", B=2, Hq=4, Nq=120, Nk=333,
         causal="bottom-right", window=(70, 0), softcap=4.0),
]

WAYS = {"vector": [], "parallel": ["--parallel"],
        "tiled": ["--cpu-kernel", "tiled"], "reference": ["--reference"],
        "emulate": ["--device", "emulate", "--kernel", "simt"],
        # Only for a mask_mod: its block mask (fa.create_block_mask) read by
        # the vector kernel, one and two threads.
        "block_mask": ["--block-mask", "32,32"],
        "block_mask_parallel": ["--block-mask", "32,32", "--parallel"]}


def run_case(fa_run, c, tmp):
    rng = np.random.default_rng(seed_of("fa-run-mods." + c["name"]))
    B, Hq, Hkv, Nq, Nk, D = (c[x] for x in ("B", "Hq", "Hkv", "Nq", "Nk", "D"))
    q = rng.standard_normal((B, Hq, Nq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
    lens = None if c["lens"] is None else np.array(c["lens"], np.int32)
    paths = {n: os.path.join(tmp, f"{c['name']}.{n}.npy")
             for n in ("q", "k", "v", "o", "lse", "lens", "mask")}
    flags = save_attention_inputs(paths, q, k, v, lens, None, True)
    flags += ["--causal", c["causal"]]
    if c["window"]:
        flags += ["--window", f"{c['window'][0]},{c['window'][1]}"]
    if c["softcap"]:
        flags += ["--softcap", str(c["softcap"])]
    make, _, _, ref_score, ref_mask = REGIONS[c["regions"]]
    arrays = make(rng, B, Hq, Nq, Nk)
    mods = os.path.join(tmp, c["name"] + ".mods.mlir")
    with open(mods, "w") as f:
        f.write(mods_file(c["regions"], arrays, Nq, Nk))
    flags += ["--mods", mods]
    for i, a in enumerate(arrays):
        path = os.path.join(tmp, f"{c['name']}.mod{i}.npy")
        np.save(path, a)
        flags += ["--mod-operand", path]
    score = mask = None
    if ref_score:
        score = lambda s, b, h, qi, ki: ref_score(s, b, h, qi, ki, arrays, Nq)
    if ref_mask:
        mask = lambda b, h, qi, ki: ref_mask(b, h, qi, ki, arrays)
    ref_o, ref_l, empty = reference(
        q, k, v, 1.0 / np.sqrt(D), c["causal"], lens, None, np.float64,
        window=c["window"], softcap=c["softcap"], score_mod=score,
        mask_mod=mask)
    failures = []
    for way, way_flags in WAYS.items():
        if way.startswith("block_mask") and REGIONS[c["regions"]][2] is None:
            continue
        env = dict(os.environ, OMP_NUM_THREADS="2")
        r = subprocess.run([fa_run, "attention", "--quiet"] + flags +
                           way_flags, capture_output=True, text=True, env=env)
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
    failures = []
    with tempfile.TemporaryDirectory(prefix="fa-run-mods-") as tmp:
        for c in CASES:
            failures += run_case(argv[1], c, tmp)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"{len(CASES)}/{len(CASES)} --mods cases passed on "
          f"{len(WAYS) - 2} lowerings and with block masks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
