# RUN: %python %s %fa_run
# RUN: %python %s %fa_run --cpu-kernel tiled
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
# RUN: %python %s %fa_run --promoted
# RUN: %python %s %fa_run --device emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""NaN and inf in the V rows of keys a row does not attend (causally
excluded, masked by a boolean or an additive -inf mask, past the key
length) must not reach that row's output (0 * NaN), while a row that does
attend such a key gets NaN (DESIGN.md: a real NaN in attended inputs stays
NaN). Each case puts NaN/inf into a few V rows, runs fa-run, and checks:

  * rows attending none of the bad keys: finite and within 1e-5 (max abs)
    of the float64 reference computed with those V rows set to 0;
  * rows attending a bad key: every output element non-finite.

Usage: nan_isolation.py FA_RUN [fa-run flags...]
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
from fa_reference import reference, save_attention_inputs, seed_of  # noqa: E402

# name, Nq, Nk, causal, lens, mask kind, bad keys (NaN, inf alternating)
CASES = [
    ("causal_bottom_right", 70, 90, "bottom-right", None, None, [89, 88, 45]),
    ("causal_top_left", 90, 70, "top-left", None, None, [69, 40, 3]),
    ("causal_square", 131, 131, "bottom-right", None, None, [130, 70, 64]),
    ("bool_mask", 64, 100, "none", None, "bool", [99, 50, 3]),
    ("additive_mask", 33, 77, "none", None, "float", [76, 30]),
    ("key_lengths", 40, 96, "none", [50, 96], None, [95, 60]),
]


def attended(B, Hq, Nq, Nk, causal, lens, mask):
    keep = np.ones((B, Hq, Nq, Nk), dtype=bool)
    qi = np.arange(Nq)[:, None]
    ki = np.arange(Nk)[None, :]
    if causal == "top-left":
        keep &= ki <= qi
    elif causal == "bottom-right":
        keep &= ki <= qi + (Nk - Nq)
    if lens is not None:
        keep &= ki[None, None] < np.clip(lens, 0, Nk)[:, None, None, None]
    if mask is not None:
        keep &= mask if mask.dtype == np.bool_ else np.isfinite(mask)
    return keep


def main(argv):
    fa_run, flags = argv[1], argv[2:]
    B, Hq, Hkv, D = 2, 4, 2, 32
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa-nan-") as tmp:
        for name, Nq, Nk, causal, lens, mask_kind, bad in CASES:
            rng = np.random.default_rng(seed_of(name))
            q = rng.standard_normal((B, Hq, Nq, D)).astype(np.float32)
            k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
            v = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
            lens_a = None if lens is None else np.array(lens, np.int32)
            mask = None
            if mask_kind == "bool":
                mask = rng.random((B, Hq, Nq, Nk)) < 0.6
            elif mask_kind == "float":
                mask = rng.standard_normal((B, Hq, Nq, Nk)).astype(np.float32)
                mask[rng.random(mask.shape) < 0.4] = -np.inf
            if mask is not None:
                # Make the bad keys rarely attended, so both kinds of rows
                # exist.
                drop = rng.random((B, Hq, Nq, len(bad))) < 0.9
                if mask.dtype == np.bool_:
                    mask[..., bad] &= ~drop
                else:
                    mask[..., bad] = np.where(drop, -np.inf, mask[..., bad])
            v_bad = v.copy()
            for i, key in enumerate(bad):
                v_bad[:, :, key, :] = np.nan if i % 2 == 0 else np.inf
            v_clean = v.copy()
            v_clean[:, :, bad, :] = 0
            paths = {n: os.path.join(tmp, "%s.%s.npy" % (name, n))
                     for n in ("q", "k", "v", "lens", "mask", "o", "lse")}
            cmd = [fa_run, "attention", "--causal", causal, "--quiet"] + flags
            cmd += save_attention_inputs(paths, q, k, v_bad, lens_a, mask,
                                         False)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print("FAIL %s: fa-run failed: %s" % (name, proc.stderr.strip()))
                failures += 1
                continue
            o = np.load(paths["o"]).astype(np.float64)
            o_ref, _, _ = reference(q, k, v_clean, 1.0 / np.sqrt(D), causal,
                                    lens_a, mask, np.float64)
            keep = attended(B, Hq, Nq, Nk, causal, lens_a, mask)
            hits = keep[..., bad].any(axis=-1)          # [B, Hq, Nq]
            clean_rows = ~hits
            problems = []
            if not np.isfinite(o[clean_rows]).all():
                problems.append("%d rows that attend no bad key have NaN/inf"
                                % int((~np.isfinite(o[clean_rows])).any(-1).sum()))
            else:
                err = np.max(np.abs(o[clean_rows] - o_ref[clean_rows]),
                             initial=0.0)
                if not err <= 1e-5:
                    problems.append("error %.3e on the clean rows" % err)
            if hits.any() and np.isfinite(o[hits]).any():
                problems.append("rows attending a bad key have finite values")
            if not (clean_rows.any() and hits.any()):
                problems.append("the case exercises nothing")
            failures += bool(problems)
            print("%s %s: %d clean rows, %d rows attend a bad key%s"
                  % ("FAIL" if problems else "PASS", name,
                     int(clean_rows.sum()), int(hits.sum()),
                     (": " + "; ".join(problems)) if problems else ""))
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
