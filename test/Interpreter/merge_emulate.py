# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""fa.merge's GPU kernel (fa-gpu-merge + fa-map-to-gpu: one warp per row,
lanes over Dv), run under the SIMT interpreter (fa-emulate --check-races),
against a float64 log-sum-exp merge written from the op's contract
(docs/FA/FADialect.md), on fresh random data:

  * LSE ~ 3 N(0, 1), about a third of the partials empty (LSE = -inf, their
    O NaN: an empty partial contributes nothing whatever its O holds) and
    some rows with every partial empty (O = 0 and LSE = -inf exactly);
  * S = 1, 2, 5 and 37 partials; row dims [B, H, Nq] and [R]; row counts
    that are not multiples of the 4 warps per block; Dv = 8, 40 (not a
    multiple of the 32 lanes), 64 and 160 (five lanes' worth); f32, f16 and
    bf16 outputs; with and without LSE; 2 and 8 warps per block;
  * split-KV end to end: two partials that are attention over the two
    halves of the keys (computed here in float64 and rounded to f32) merge
    to attention over all keys.

O: f32 relative error at most 1e-5 elementwise (plus 1e-6 absolute); f16 and
bf16 at most one unit in the last place (2^-10, 2^-7 relative) of the
float64 value; LSE 1e-5 absolute; empty rows exactly; no NaN, no race, no
output element left unwritten (fa-emulate poisons the outputs).

Mutation: the mapped kernel with the empty-partial test (LSE == -inf)
replaced by `false` must fail the suite (NaN O of empty partials leaks).

Usage: merge_emulate.py FA_EMULATE
"""

import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
from fa_reference import seed_of  # noqa: E402

TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def kernel_text(rows_rank, dv, dtype, lse):
    """A kernel function @merge: partials [?, rows..., Dv] / [?, rows...]
    (every dim dynamic but Dv), O [rows..., Dv] in `dtype`, LSE [rows...]."""
    t = TYPES[dtype]
    rows = "x".join("?" * rows_rank)
    ty = {"po": f"?x{rows}x{dv}xf32", "pl": f"?x{rows}xf32",
          "o": f"{rows}x{dv}x{t}", "lse": f"{rows}xf32"}
    names = ["po", "pl", "o"] + (["lse"] if lse else [])
    args = ", ".join(f"%{n}: memref<{ty[n]}>" for n in names)
    lines = [f"func.func @merge({args}) {{"]
    for n in names:
        w = " writable" if n in ("o", "lse") else ""
        lines.append(f"  %{n}_t = bufferization.to_tensor %{n} restrict{w} : "
                     f"memref<{ty[n]}> to tensor<{ty[n]}>")
    outs = f"%o_t : tensor<{ty['o']}>"
    res_types = f"tensor<{ty['o']}>"
    if lse:
        outs += f", %lse_t : tensor<{ty['lse']}>"
        res_types += f", tensor<{ty['lse']}>"
    res = "%r:2" if lse else "%r"
    lines.append(f"  {res} = fa.merge ins(%po_t, %pl_t : tensor<{ty['po']}>, "
                 f"tensor<{ty['pl']}>) outs({outs}) -> {res_types}")
    o_res = "%r#0" if lse else "%r"
    lines.append(f"  bufferization.materialize_in_destination {o_res} in "
                 f"writable %o : (tensor<{ty['o']}>, memref<{ty['o']}>) -> ()")
    if lse:
        lines.append("  bufferization.materialize_in_destination %r#1 in "
                     f"writable %lse : (tensor<{ty['lse']}>, "
                     f"memref<{ty['lse']}>) -> ()")
    lines += ["  return", "}", ""]
    return "\n".join(lines)


def reference(po, pl):
    """float64 merge of partials po [S, rows..., Dv], pl [S, rows...]."""
    po = po.astype(np.float64)
    pl = pl.astype(np.float64)
    valid = pl > -np.inf
    m = np.where(valid, pl, -np.inf).max(axis=0)
    any_valid = valid.any(axis=0)
    mu = np.where(any_valid, m, 0.0)
    w = np.where(valid, np.exp(np.where(valid, pl, 0.0) - mu), 0.0)
    l = w.sum(axis=0)
    acc = (w[..., None] * np.where(valid[..., None], po, 0.0)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        o = np.where(any_valid[..., None], acc / np.where(l > 0, l, 1)[..., None],
                     0.0)
        lse = np.where(any_valid, mu + np.log(np.where(l > 0, l, 1)), -np.inf)
    return o, lse, ~any_valid


def random_partials(rng, S, rows, dv):
    po = rng.standard_normal((S,) + rows + (dv,)).astype(np.float32)
    pl = (3 * rng.standard_normal((S,) + rows)).astype(np.float32)
    empty = rng.random((S,) + rows) < 0.33
    if len(rows) and rows[-1] > 2:
        empty[:, ..., 1] = True  # rows with every partial empty
    pl[empty] = -np.inf
    po[empty] = np.nan
    return po, pl


def split_kv_partials(rng, rows, dv):
    """Two partials: float64 attention over each half of Nk = 50 keys (one
    query row per position), rounded to f32."""
    d, nk = 16, 50
    q = rng.standard_normal(rows + (d,))
    k = rng.standard_normal(rows + (nk, d))
    v = rng.standard_normal(rows + (nk, dv))
    s = np.einsum("...d,...kd->...k", q, k) / np.sqrt(d)
    pos, pls = [], []
    for lo, hi in ((0, 23), (23, nk)):
        part = s[..., lo:hi]
        mx = part.max(axis=-1, keepdims=True)
        p = np.exp(part - mx)
        pos.append(np.einsum("...k,...kd->...d", p, v[..., lo:hi, :]) /
                   p.sum(axis=-1)[..., None])
        pls.append(mx[..., 0] + np.log(p.sum(axis=-1)))
    mx = s.max(axis=-1, keepdims=True)
    p = np.exp(s - mx)
    full = np.einsum("...k,...kd->...d", p, v) / p.sum(axis=-1)[..., None]
    return (np.stack(pos).astype(np.float32),
            np.stack(pls).astype(np.float32), full)


CASES = [
    # name, S, rows, Dv, dtype, lse, warps, kind
    ("f32_s5_bhq_dv40", 5, (2, 4, 3), 40, "float32", True, 4, "random"),
    ("f32_s1_r7_dv8", 1, (7,), 8, "float32", True, 4, "random"),
    ("f16_s2_dv64_no_lse", 2, (3, 5), 64, "float16", False, 4, "random"),
    ("bf16_s37_dv160", 37, (2, 3), 160, "bfloat16", True, 4, "random"),
    ("f32_s5_warps2", 5, (9,), 40, "float32", True, 2, "random"),
    ("f16_s5_warps8", 5, (3, 7), 64, "float16", True, 8, "random"),
    ("f32_split_kv", 2, (2, 4, 3), 40, "float32", True, 4, "split"),
]


def run_case(fa_emulate, c, tmp, mutate=None):
    """Runs case `c`; returns (ok, summary). `mutate(text)` edits the
    mapped kernel first (a mutation test); ok is None when the clean
    kernel does not run."""
    name, S, rows, dv, dtype, lse, warps, kind = c
    rng = np.random.default_rng(seed_of(name))
    full = None
    if kind == "split":
        po, pl, full = split_kv_partials(rng, rows, dv)
    else:
        po, pl = random_partials(rng, S, rows, dv)
    base = os.path.join(tmp, name)
    src = base + ".mlir"
    with open(src, "w") as f:
        f.write(kernel_text(len(rows), dv, dtype, lse))
    np.save(base + ".po.npy", po)
    np.save(base + ".pl.npy", pl)
    io = ["--partial-o", base + ".po.npy", "--partial-lse", base + ".pl.npy",
          "-o", base + ".o.npy", "--check-races", "--warps", str(warps)]
    if lse:
        io += ["--lse", base + ".lse.npy"]
    path = src
    if mutate:
        mapped = base + ".mapped.mlir"
        proc = subprocess.run([fa_emulate, src, "--dump-mapped", mapped] + io,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return None, "clean run failed: " + proc.stderr.strip()[:500]
        with open(mapped) as f:
            text = mutate(f.read())
        path = base + ".mutated.mlir"
        with open(path, "w") as f:
            f.write(text)
        io += ["--func", "merge", "--arg-roles",
               "partial_o,partial_lse,o" + (",lse" if lse else "")]
    proc = subprocess.run([fa_emulate, path] + io, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return False, "fa-emulate failed: " + proc.stderr.strip()[:800]
    o = np.load(base + ".o.npy").astype(np.float64)
    o_ref, lse_ref, empty = reference(po, pl)
    problems = []
    if np.isnan(o).any():
        problems.append("%d NaN in O" % np.isnan(o).sum())
    if empty.any() and not (o[empty] == 0).all():
        problems.append("rows with every partial empty: O is not exactly 0")
    eps = {"float32": 1e-5, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
    err = np.nanmax(np.abs(o - o_ref) / (np.abs(o_ref) + 1e-6 / eps[dtype])) \
        if o.size else 0.0
    if not err <= eps[dtype]:
        problems.append("O error %.3e exceeds %.3e" % (err, eps[dtype]))
    summary = "O err %.2e (tol %.2e)" % (err, eps[dtype])
    if full is not None:
        ferr = np.max(np.abs(o - full))
        summary += ", vs attention over all keys %.2e" % ferr
        if not ferr <= 1e-5:
            problems.append("split-KV merge differs from attention over all "
                            "keys by %.3e" % ferr)
    if lse:
        l = np.load(base + ".lse.npy").astype(np.float64)
        if empty.any() and not (l[empty] == -np.inf).all():
            problems.append("rows with every partial empty: LSE is not -inf")
        if np.isnan(l).any():
            problems.append("NaN in LSE")
        finite = ~empty
        lerr = np.max(np.abs(l[finite] - lse_ref[finite])) if finite.any() \
            else 0.0
        if not lerr <= 1e-5:
            problems.append("LSE error %.3e exceeds 1e-5" % lerr)
        summary += ", LSE err %.2e" % lerr
    summary += ", %d empty rows" % int(empty.sum())
    return not problems, summary + ("" if not problems else
                                    ": " + "; ".join(problems))


def empty_never(text):
    """The empty-partial test (LSE == -inf) of the weighted sum becomes
    false: NaN O of empty partials reaches the sum."""
    loop = re.search(r"scf\.for .* iter_args\(%\w+ = %cst\w*, ", text)
    assert loop, "no sum loop"
    m = re.compile(r"(%\w+) = arith\.cmpf oeq, (%\w+), (%\w+) : f32").search(
        text, loop.end())
    assert m, "no empty test in the sum loop"
    return (text[:m.start()] + "%s = arith.cmpf false, %s, %s : f32"
            % (m.group(1), m.group(2), m.group(3)) + text[m.end():])


def main(argv):
    fa_emulate = argv[1]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa-merge-emulate-") as tmp:
        for c in CASES:
            ok, summary = run_case(fa_emulate, c, tmp)
            failures += not ok
            print("%s %-22s %s" % ("PASS" if ok else "FAIL", c[0], summary),
                  flush=True)
        ok, summary = run_case(fa_emulate, CASES[0], tmp, mutate=empty_never)
        # A mutation is caught when its run fails the checks, not when the
        # clean kernel could not even be mapped (ok is None).
        caught = ok is False
        failures += not caught
        print("%s mutation empty_never (expect a failure): %s"
              % ("PASS" if caught else "FAIL", summary), flush=True)
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
