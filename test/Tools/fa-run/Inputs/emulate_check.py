# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""`fa-run attention --device emulate` against the float64 reference of
test/lib/fa_reference.py: each case writes seeded random inputs, runs fa-run
(the mapped GPU kernel under the SIMT interpreter, with its race and bounds
checks) and compares O and LSE with the thresholds of the interpreter tests
(f32: relative Frobenius error of O below max(1e-5, 2x a naive float32
kernel); f16: max abs error at most 2x a naive kernel's plus 1e-4; LSE
within max(1e-4, 2x naive); fully masked rows exactly 0 / -inf).

Usage: emulate_check.py FA_RUN
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "lib"))
from fa_reference import reference, save_attention_inputs, seed_of  # noqa: E402

CASES = [
    # name, dtype, B, Hq, Hkv, Nq, Nk, D, Dv, causal, lens, mask
    ("f32_gqa_causal_lens", np.float32, 2, 4, 2, 37, 70, 64, 64,
     "bottom-right", [0, 61], None),
    ("f16_bool_mask", np.float16, 1, 2, 2, 24, 45, 32, 32, "none", None,
     "bool", ["--kernel", "simt"]),
    ("f32_float_mask_dv", np.float32, 1, 2, 1, 20, 33, 32, 16, "top-left",
     None, "float"),
    # --kernel mma: mma.sync/ldmatrix/cp.async kernels (f16; N not a
    # multiple of the 64-row tiles, an empty batch, GQA, a boolean mask).
    ("f16_tc_gqa_causal_lens", np.float16, 2, 4, 2, 70, 93, 64, 64,
     "bottom-right", [0, 81], None, ["--kernel", "mma"]),
    ("f16_tc_bool_mask", np.float16, 1, 2, 2, 33, 45, 32, 32, "none", None,
     "bool", ["--kernel", "mma"]),
    # --pack-gqa: the decode kernel with packed query heads (Nq = 1, GQA
    # 8/2, ragged key lengths with an empty sequence).
    ("f16_decode_pack_gqa", np.float16, 3, 8, 2, 1, 150, 64, 64,
     "bottom-right", [150, 33, 0], None, ["--pack-gqa"]),
]


def main(argv):
    fa_run = argv[1]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa-run-emulate-") as tmp:
        for case in CASES:
            (name, dt, B, Hq, Hkv, Nq, Nk, D, Dv, causal, lens,
             mask_kind) = case[:12]
            flags = case[12] if len(case) > 12 else []
            rng = np.random.default_rng(seed_of(name))
            q = rng.standard_normal((B, Hq, Nq, D)).astype(dt)
            k = rng.standard_normal((B, Hkv, Nk, D)).astype(dt)
            v = rng.standard_normal((B, Hkv, Nk, Dv)).astype(dt)
            lens_a = None if lens is None else np.array(lens, np.int32)
            mask = None
            if mask_kind == "bool":
                mask = rng.random((B, Hq, Nq, Nk)) < 0.7
                mask[..., 3, :] = False
            elif mask_kind == "float":
                mask = rng.standard_normal((1, Hq, Nq, Nk)).astype(np.float32)
                mask[..., 5, :] = -np.inf
            paths = {n: os.path.join(tmp, "%s.%s.npy" % (name, n))
                     for n in ("q", "k", "v", "lens", "mask", "o", "lse")}
            cmd = [fa_run, "attention", "--device", "emulate", "--causal",
                   causal, "--quiet"] + flags
            cmd += save_attention_inputs(paths, q, k, v, lens_a, mask, True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print("FAIL %s: fa-run failed: %s" % (name,
                                                      proc.stderr.strip()))
                failures += 1
                continue
            o = np.load(paths["o"]).astype(np.float64)
            lse = np.load(paths["lse"]).astype(np.float64)
            scale = 1.0 / np.sqrt(D)
            o_ref, lse_ref, empty = reference(q, k, v, scale, causal, lens_a,
                                              mask, np.float64)
            o_naive, lse_naive, _ = reference(q, k, v, scale, causal, lens_a,
                                              mask, np.float32)
            problems = []
            if dt == np.float16:
                err = np.max(np.abs(o - o_ref))
                naive = np.max(np.abs(o_naive.astype(np.float16)
                                      .astype(np.float64) - o_ref))
                tol = 2 * naive + 1e-4
            else:
                norm = np.linalg.norm(o_ref)
                err = np.linalg.norm(o - o_ref) / norm
                tol = max(1e-5, 2 * np.linalg.norm(o_naive - o_ref) / norm)
            if not err <= tol:
                problems.append("O error %.3e > %.3e" % (err, tol))
            if empty.any() and not ((o[empty] == 0).all() and
                                    (lse[empty] == -np.inf).all()):
                problems.append("fully masked rows are not 0 / -inf")
            fin = ~empty
            lerr = np.max(np.abs(lse[fin] - lse_ref[fin])) if fin.any() else 0
            ltol = max(1e-4, 2 * np.max(np.abs(lse_naive[fin] - lse_ref[fin]))
                       if fin.any() else 0)
            if not lerr <= ltol:
                problems.append("LSE error %.3e > %.3e" % (lerr, ltol))
            if np.isnan(o).any() or np.isnan(lse).any():
                problems.append("NaN in the outputs")
            failures += bool(problems)
            print("%s %s: O err %.2e (tol %.2e), LSE err %.2e, %d empty rows%s"
                  % ("FAIL" if problems else "PASS", name, err, tol, lerr,
                     int(empty.sum()),
                     (": " + "; ".join(problems)) if problems else ""))
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
