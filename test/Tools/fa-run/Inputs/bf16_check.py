# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""`fa-run attention --dtype bf16` and `fa-run softmax --dtype bf16` against
the float64 reference of test/lib/fa_reference.py. Inputs are bfloat16 bit
patterns in uint16 files, or ('<V2', as NumPy writes ml_dtypes' bfloat16)
void16 files; the reference is computed from the values those bits hold.
O must be within 4 bfloat16 ulps of the reference (max abs error <=
2^-6 * max(1, |O_ref|): the GPU kernels round P to bfloat16 before P V,
and O is rounded once more; a masking or scaling bug costs 0.1 or more), LSE
(float32) within 1e-4, and fully masked rows exactly 0 / -inf. The output
must come back in the input's format.

Usage: bf16_check.py FA_RUN
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "lib"))
from fa_reference import reference, seed_of  # noqa: E402


def to_bf16_bits(x):
    """Rounds float32 `x` to nearest even bfloat16; returns the bits."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


CASES = [
    # name, device, file format, B, Hq, Hkv, Nq, Nk, D, causal, lens, mask
    ("cpu_u2_causal_gqa", "cpu", "u2", 2, 4, 2, 33, 70, 64, "bottom-right",
     None, False),
    ("cpu_v2_lens_mask", "cpu", "V2", 2, 2, 2, 20, 37, 32, "none", [0, 29],
     True),
    ("emulate_u2_mask", "emulate", "u2", 1, 2, 1, 24, 45, 64, "top-left",
     None, True),
    ("emulate_v2_lens", "emulate", "V2", 2, 2, 2, 17, 50, 64, "none",
     [50, 3], False),
]


def run_case(fa_run, tmp, case):
    (name, device, fmt, B, Hq, Hkv, Nq, Nk, D, causal, lens, with_mask) = case
    rng = np.random.default_rng(seed_of(name))
    bits = [to_bf16_bits(rng.standard_normal(s)) for s in
            [(B, Hq, Nq, D), (B, Hkv, Nk, D), (B, Hkv, Nk, D)]]
    flags = []
    for n, b in zip("qkv", bits):
        path = os.path.join(tmp, f"{name}_{n}.npy")
        np.save(path, b if fmt == "u2" else b.view("V2"))
        flags += [f"--{n}", path]
    lens_arr = mask = None
    if lens is not None:
        lens_arr = np.array(lens, np.int32)
        np.save(os.path.join(tmp, f"{name}_lens.npy"), lens_arr)
        flags += ["--kv-lens", os.path.join(tmp, f"{name}_lens.npy")]
    if with_mask:
        mask = rng.random((B, Hq, Nq, Nk)) < 0.7
        mask[:, :, rng.choice(Nq, 3, replace=False), :] = False
        np.save(os.path.join(tmp, f"{name}_mask.npy"), mask)
        flags += ["--mask", os.path.join(tmp, f"{name}_mask.npy")]
    o_path = os.path.join(tmp, f"{name}_o.npy")
    l_path = os.path.join(tmp, f"{name}_lse.npy")
    cmd = [fa_run, "attention", *flags, "-o", o_path, "--lse", l_path,
           "--dtype", "bf16", "--causal", causal, "--device", device,
           "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return False, "fa-run failed: " + p.stderr.strip()
    q, k, v = (from_bf16_bits(b) for b in bits)
    o_ref, lse_ref, empty = reference(q, k, v, 1.0 / np.sqrt(D), causal,
                                      lens_arr, mask, np.float64)
    raw = np.load(o_path)
    want = "uint16" if fmt == "u2" else "|V2"
    if raw.dtype.str.replace("<", "|") != np.dtype(want).str.replace("<", "|"):
        return False, f"O came back as {raw.dtype.str}, expected {want}"
    o = from_bf16_bits(raw.view(np.uint16))
    lse = np.load(l_path).astype(np.float64)
    err = np.abs(o - o_ref)
    tol = 2.0 ** -6 * np.maximum(1.0, np.abs(o_ref))
    lse_err = np.abs(np.where(empty, 0, lse) - np.where(empty, 0, lse_ref)).max()
    ok = (err <= tol).all() and lse_err <= 1e-4 and \
        (o[empty] == 0).all() and np.isneginf(lse[empty]).all()
    return ok, "O max abs err %.2e, LSE err %.2e, %d empty rows" % (
        err.max(), lse_err, empty.sum())


def softmax_case(fa_run, tmp):
    rng = np.random.default_rng(seed_of("softmax_bf16"))
    bits = to_bf16_bits(rng.standard_normal((3, 7, 45)) * 4)
    x_path = os.path.join(tmp, "sx.npy")
    y_path = os.path.join(tmp, "sy.npy")
    np.save(x_path, bits)
    p = subprocess.run([fa_run, "softmax", "--x", x_path, "-o", y_path,
                        "--dtype", "bf16", "--quiet"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        return False, "fa-run failed: " + p.stderr.strip()
    x = from_bf16_bits(bits)
    e = np.exp(x - x.max(-1, keepdims=True))
    y_ref = e / e.sum(-1, keepdims=True)
    y = from_bf16_bits(np.load(y_path).view(np.uint16))
    err = np.abs(y - y_ref).max()
    return err <= 2.0 ** -9 + 1e-4, "Y max abs err %.2e" % err


def main(argv):
    fa_run = argv[1]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa-bf16-") as tmp:
        results = [(c[0], *run_case(fa_run, tmp, c)) for c in CASES]
        results.append(("cpu_softmax", *softmax_case(fa_run, tmp)))
    for name, ok, summary in results:
        failures += not ok
        print("%s %-22s %s" % ("PASS" if ok else "FAIL", name, summary))
    print("%d/%d bf16 cases passed" % (len(results) - failures, len(results)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
