# RUN: %python %s %fa_run
# RUN: %python %s %fa_run --cpu-kernel tiled
# RUN: env OMP_NUM_THREADS=2 %python %s %fa_run --parallel
# RUN: %python %s %fa_run --promoted
# RUN: %python %s %fa_run --device emulate
# RUN: %python %s %fa_run --dtype float16 --device emulate --kernel mma
# RUN: %python %s %fa_emulate --dtype bfloat16 --kernel mma
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""NaN and inf in the V rows of keys a row does not attend (causally
excluded, masked by a boolean or an additive -inf mask, past the key
length) must not reach that row's output (0 * NaN), while a row that does
attend such a key gets NaN (docs/FA/FADialect.md: a real NaN in attended inputs stays
NaN). Each case puts NaN/inf into a few V rows, runs fa-run, and checks:

  * rows attending none of the bad keys: finite and within 1e-5 (max abs)
    of the float64 reference computed with those V rows set to 0;
  * rows attending a bad key: every output element non-finite.

With --dtype float16 or bfloat16 the inputs are rounded to that type first
and the reference is computed from the rounded values; the clean rows are
then held to the tolerance of test/Interpreter/attention_emulate_tc.py: max
abs error at most 2x that of a naive kernel (float32 math on the 16-bit
inputs, O rounded to the 16-bit type) plus 1e-4. This is how the
tensor-core kernels (fa-map-to-tensor-cores, f16/bf16 only) are run: through
`fa-run --device emulate --kernel mma` for float16 and, since fa-run reads
no bfloat16, through fa-emulate (the kernel text of
test/Interpreter/attention_emulate.py, float32 files rounded to bfloat16)
for bfloat16.

Usage: nan_isolation.py FA_RUN|FA_EMULATE [--dtype float32|float16|bfloat16]
                        [tool flags...]
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Interpreter"))
from fa_reference import reference, save_attention_inputs, seed_of  # noqa: E402
from attention_emulate import kernel_text, round_bf16  # noqa: E402

# name, Nq, Nk, causal, lens, mask kind, bad keys (NaN, inf alternating)
CASES = [
    ("causal_bottom_right", 70, 90, "bottom-right", None, None, [89, 88, 45]),
    ("causal_top_left", 90, 70, "top-left", None, None, [69, 40, 3]),
    ("causal_square", 131, 131, "bottom-right", None, None, [130, 70, 64]),
    ("bool_mask", 64, 100, "none", None, "bool", [99, 50, 3]),
    ("additive_mask", 33, 77, "none", None, "float", [76, 30]),
    ("key_lengths", 40, 96, "none", [50, 96], None, [95, 60]),
    ("causal_key_lengths", 50, 120, "bottom-right", [100, 70], None,
     [99, 75, 110]),
    # NaN in K rows instead of V: the scores of those keys are NaN, which
    # the kernels' running max may leave out (the CPU kernel does) but
    # exp(NaN - m) must still carry into the sum and O of every row that
    # attends the key.
    ("k_nan_causal", 70, 90, "bottom-right", None, None, [89, 45], "k"),
    ("k_nan_bool_mask", 64, 100, "none", None, "bool", [99, 50, 3], "k"),
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


def to_dtype(x, dtype):
    """Rounds float32 `x` to `dtype`; bfloat16 stays in float32 files."""
    if dtype == "float16":
        return x.astype(np.float16)
    if dtype == "bfloat16":
        return round_bf16(x)
    return x


def poison_inputs(rng, v, bad, mask_kind, mask_shape):
    """Draws the mask of kind `mask_kind` ("bool", "float" or None) with
    the keys `bad` rarely attended (so rows of both kinds exist), and puts
    NaN/inf (alternating) into those keys' V rows. Returns (mask, V with the
    bad rows, V with those rows set to 0)."""
    # (The K cases poison K apart, in main.)
    mask = None
    if mask_kind == "bool":
        mask = rng.random(mask_shape) < 0.6
    elif mask_kind == "float":
        mask = rng.standard_normal(mask_shape).astype(np.float32)
        mask[rng.random(mask.shape) < 0.4] = -np.inf
    if mask is not None:
        drop = rng.random(mask_shape[:3] + (len(bad),)) < 0.9
        if mask.dtype == np.bool_:
            mask[..., bad] &= ~drop
        else:
            mask[..., bad] = np.where(drop, -np.inf, mask[..., bad])
    v_bad = v.copy()
    for i, key in enumerate(bad):
        v_bad[:, :, key, :] = np.nan if i % 2 == 0 else np.inf
    v_clean = v.copy()
    v_clean[:, :, bad, :] = 0
    return mask, v_bad, v_clean


def main(argv):
    tool, flags = argv[1], argv[2:]
    dtype = "float32"
    if "--dtype" in flags:
        i = flags.index("--dtype")
        dtype = flags[i + 1]
        del flags[i:i + 2]
    emulate = os.path.basename(tool).startswith("fa-emulate")
    if dtype == "bfloat16" and not emulate:
        print("FAIL: fa-run reads no bfloat16; pass fa-emulate")
        return 1
    B, Hq, Hkv, D = 2, 4, 2, 32
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa-nan-") as tmp:
        for name, Nq, Nk, causal, lens, mask_kind, bad, *where in CASES:
            rng = np.random.default_rng(seed_of(name))
            q = rng.standard_normal((B, Hq, Nq, D)).astype(np.float32)
            k = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
            v = rng.standard_normal((B, Hkv, Nk, D)).astype(np.float32)
            q, k, v = (to_dtype(x, dtype) for x in (q, k, v))
            lens_a = None if lens is None else np.array(lens, np.int32)
            mask, v_bad, v_clean = poison_inputs(rng, v, bad, mask_kind,
                                                 (B, Hq, Nq, Nk))
            k_bad = k
            if where == ["k"]:
                # NaN only: an inf K row could give -inf scores, which
                # act as a mask rather than a NaN.
                v_bad, v_clean = v, v.copy()
                v_clean[:, :, bad, :] = 0
                k_bad = k.copy()
                k_bad[:, :, bad, :] = np.nan
            paths = {n: os.path.join(tmp, "%s.%s.npy" % (name, n))
                     for n in ("q", "k", "v", "lens", "mask", "o", "lse")}
            if emulate:
                kernel = os.path.join(tmp, name + ".mlir")
                with open(kernel, "w") as f:
                    f.write(kernel_text(dict(
                        dtype=dtype, B=B, Hq=Hq, Hkv=Hkv, D=D, Dv=D,
                        causal=causal, lens=lens, mask=mask_kind,
                        mask_shape="BHQK", scale=None, lse=False)))
                cmd = [tool, kernel, "--check-races"] + flags
            else:
                cmd = [tool, "attention", "--causal", causal, "--quiet"]
                cmd += flags
            cmd += save_attention_inputs(paths, q, k_bad, v_bad, lens_a, mask,
                                         False)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print("FAIL %s: fa-run failed: %s" % (name, proc.stderr.strip()))
                failures += 1
                continue
            o = np.load(paths["o"]).astype(np.float64)
            o_ref, _, _ = reference(q, k, v_clean, 1.0 / np.sqrt(D), causal,
                                    lens_a, mask, np.float64)
            tol = 1e-5
            if dtype != "float32":
                # attention_emulate_tc.py's bound: 2x the error of a naive
                # kernel with O rounded to the 16-bit type, plus 1e-4.
                o_naive, _, _ = reference(q, k, v_clean, 1.0 / np.sqrt(D),
                                          causal, lens_a, mask, np.float32)
                naive = to_dtype(o_naive, dtype).astype(np.float64)
                tol = 2 * np.max(np.abs(naive - o_ref)) + 1e-4
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
                if not err <= tol:
                    problems.append("error %.3e on the clean rows (tol %.1e)"
                                    % (err, tol))
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
