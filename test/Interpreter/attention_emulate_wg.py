# RUN: %python %s %fa_emulate --fa-run %fa_run
# RUN: %python %s %fa_emulate --dynamic-shared-base 1024 wg_f16_d128 wg_bf16_causal_tl wg_f16_2wg
# RUN: %python %s %fa_emulate --dynamic-shared-base 4080 wg_f16_d128 wg_bf16_causal_tl wg_f16_2wg
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The Hopper wgmma GPU kernels (fa-map-to-wgmma: 128-byte-swizzled tiles
filled by cp.async, wgmma.mma_async from shared-memory descriptors, P through
shared memory, fence.proxy.async) run under the SIMT interpreter (fa-emulate)
against an independent float64 reference.

Same kernels, inputs, reference and criteria as attention_emulate_tc.py
(the matrix of mma_cases and the runners of attention_emulate.py, which
both use); the kernel function is mapped with
`--pipeline builtin.module(fa-map-to-wgmma{...},canonicalize,cse)` (one case
through `--kernel wgmma`, the default pipeline's option) and interpreted with race
and bounds checks. The interpreter places the dynamic workgroup memory at a
base that is NOT 1024-aligned and applies the 128-byte swizzle to absolute
addresses, so the kernel's run-time alignment is exercised.

Criteria: max abs error of O at most 2x that of a naive kernel (float32 math
on the 16-bit inputs, O rounded to the 16-bit type) plus 1e-4; LSE within
max(1e-4, 2x naive); fully masked rows give O = 0 and LSE = -inf exactly; no
NaN, no race, no out-of-bounds access, no read of uninitialized workgroup
memory. Each case also checks that the mapped module really holds the wgmma
kernel.

The matrix: f16 and bf16 at head dims 64, 128 and 256 (multiples of 64 are
what the pass takes); causal none, top-left and bottom-right with Nq < Nk and
Nq > Nk; key lengths 0, inside, beyond Nk and negative; no keys; GQA and
MQA; Dv != D; an explicit scale; no LSE; boolean and additive masks
(broadcast, fully masked rows); Nq and Nk not multiples of the tiles; two
warpgroups, 128-key tiles, 3 stages. Then NaN/inf in the V rows of keys
that some rows do not attend (causal, boolean and additive masks: the rule
and the checks of test/Integration/CPU/nan_isolation.py at head dims 64 and
128, and a sliding window): the other rows stay finite and accurate, the
attending rows are non-finite. The score/mask modifiers (window, softcap, ALiBi, chunk,
segment ids, alone and together on two warpgroups). Then mutations of a
mapped kernel (V read K-major, no proxy fence, no wgmma wait, an unswizzled
descriptor, tiles only 16-byte aligned, a wrong shuffle offset, on a NaN
case the non-finite V elements not zeroed before the wgmma, and on a
modifier kernel the window's first key too late and the wrong softcap) must
each be caught.

With `--fa-run FA_RUN`, f16 cases also run through
`fa-run attention --device emulate --kernel wgmma` (the tool's option), and
`--device cpu --kernel wgmma` must be a one-line error.

Usage: attention_emulate_wg.py FA_EMULATE [--fa-run FA_RUN] [SUBSTRING...]
"""

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "Integration", "CPU"))
from attention_emulate import (check_outputs, kernel_text,  # noqa: E402
                               mapped_case, mma_cases, prepare_case,
                               round_bf16, run_block_mask_mutations,
                               run_case, run_mutations, run_suite)
from fa_reference import (reference, save_attention_inputs,  # noqa: E402
                          seed_of)
from nan_isolation import attended, poison_inputs  # noqa: E402

PIPELINE = "builtin.module(fa-map-to-wgmma{%s},canonicalize,cse)"

# The shared 16-bit matrix (head dims 64 and 128; the largest head dim with
# one head), then two warpgroups, 128-key tiles, pipeline depth and the
# default pipeline's wgmma option (fa-emulate --kernel wgmma).
CASES = mma_cases("wg", (64, 128), mqa_dv=128, Hq=1, Hkv=1) + [
    mapped_case("wg_f16_2wg", "warpgroups=2", dtype="float16", Hq=2, Hkv=1,
                Nq=150, Nk=100, causal="bottom-right", lens=[90]),
    mapped_case("wg_bf16_kv128", "block-kv=128", dtype="bfloat16", Nq=45,
                Nk=200, causal="top-left"),
    mapped_case("wg_f16_stages3", "stages=3", dtype="float16", Nq=40, Nk=200,
                causal="bottom-right", lens=[170]),
    mapped_case("wg_f16_option", dtype="float16", Hq=4, Hkv=2, Nq=37, Nk=70,
                causal="top-left", flags=["--kernel", "wgmma"]),
    # The score/mask modifiers (issue 15): a sliding window skipping leading
    # key tiles, softcap + ALiBi, a chunk with sorted segment ids, and all
    # of them with GQA, key lengths and a boolean mask on two warpgroups.
    mapped_case("wg_f16_window_br", "", dtype="float16", Hq=1, Hkv=1,
                Nq=40, Nk=260, causal="bottom-right", window=(70, 0),
                lens=[250]),
    mapped_case("wg_bf16_softcap_alibi", "", dtype="bfloat16", B=2, Hq=2,
                Hkv=1, Nq=45, Nk=90, softcap=2.0, alibi="bh"),
    mapped_case("wg_f16_chunk_segments", "", dtype="float16", Hq=1, Hkv=1,
                Nq=70, Nk=140, chunk=48, segments="sorted", lens=[130]),
    mapped_case("wg_bf16_q_offset_window", "", dtype="bfloat16", Hq=1, Hkv=1,
                Nq=40, Nk=200, causal="top-left", window=(70, -1),
                q_offset=100),
    mapped_case("wg_bf16_combined_2wg", "warpgroups=2", dtype="bfloat16",
                B=2, Hq=2, Hkv=1, Nq=130, Nk=150, causal="top-left",
                window=(60, 10), softcap=3.0, alibi="h", lens=[150, 77],
                mask="bool", mask_shape="B1QK"),
    # General regions (test/lib/modifier_regions.py) on the wgmma fragment
    # layout: a relative-bias table with key lengths, both regions with a
    # window and softcap, a mask_mod after an additive mask.
    mapped_case("wg_f16_regions_rel_bias", "", dtype="float16", Hq=1, Hkv=1,
                Nq=40, Nk=150, causal="bottom-right", lens=[140],
                regions="rel_bias"),
    mapped_case("wg_bf16_regions_both", "", dtype="bfloat16", B=2, Hq=2,
                Hkv=1, Nq=45, Nk=90, causal="top-left", window=(30, 5),
                softcap=3.0, regions="both"),
    mapped_case("wg_f16_regions_prefix_lm_mask", "", dtype="float16", B=2,
                Hq=1, Hkv=1, Nq=30, Nk=70, mask="float", lens=[70, 0],
                regions="prefix_lm"),
    # Document masking over many key tiles (sorted ids with empty
    # documents): tiles of other documents are skipped.
    mapped_case("wg_f16_documents_sorted", "", dtype="float16", B=2, Hq=1,
                Hkv=1, Nq=200, Nk=300, causal="bottom-right",
                segments="sorted"),
    # Block sparsity: the prefix-LM mask_mod's block mask on the kernel's
    # key tiles (empty tiles skipped, full ones without the mask_mod).
    mapped_case("wg_f16_block_mask_prefix_lm", "", dtype="float16", B=2,
                Hq=1, Hkv=1, Nq=70, Nk=200, causal="bottom-right",
                lens=[200, 150], regions="prefix_lm", block_mask=(128, 64)),
]

# What the mapped module must hold: the wgmma kernel.
NEEDLES = ("nvvm.wgmma.mma_async", "nvvm.wgmma.wait.group.sync.aligned",
           "nvvm.fence.proxy", "memref.extract_aligned_pointer_as_index",
           "nvgpu.device_async_copy", "wgmma}")


def run_wg_case(fa_emulate, c, tmp):
    pipeline = None if "--kernel" in c["flags"] else PIPELINE % c["opts"]
    return run_case(fa_emulate, c, tmp, pipeline, NEEDLES)


#===------------------------------------------------------------------------===#
# Mutations: the checks above must catch a broken wgmma kernel
#===------------------------------------------------------------------------===#

# Descriptor constants (LBO, SBO, swizzle fields) of the K-major operands:
# LBO 16, SBO 1024, 128-byte swizzle; the same without the swizzle mode.
K_MAJOR = str((1 << 62) | (64 << 32) | (1 << 16))
K_MAJOR_NO_SWIZZLE = str((64 << 32) | (1 << 16))

# (name, old text, new text[, anchor]) applied once to the mapped module of
# MUTANT: the first `old` (after the first `anchor`, when given).
MUTATIONS = [
    # P V reading V K-major (imm-trans-b 0): the wrong B matrix.
    ("v_k_major", "B[<f16>, <one>, <row>]", "B[<f16>, <one>, <col>]"),
    # The landed cp.async data is not fenced into the async proxy.
    ("no_proxy_fence",
     "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, "
     "space = #nvvm.shared_space<cta>}\n", ""),
    # S read before its wgmma group is retired.
    ("no_wgmma_wait", "nvvm.wgmma.wait.group.sync.aligned 0\n", ""),
    # The descriptors claim an unswizzled layout.
    ("descriptor_not_swizzled", "arith.constant %s : i64" % K_MAJOR,
     "arith.constant %s : i64" % K_MAJOR_NO_SWIZZLE),
    # Tiles aligned to 16 bytes only: the swizzle atoms are misplaced.
    ("tiles_16_aligned", "arith.constant 1023 : index",
     "arith.constant 15 : index"),
    # The quad row max skips offset 2 (shuffles xor 1 twice): the first
    # shuffle by 2 after S (the earlier ones OR the non-finite flags).
    ("row_max_offset", "%c2_i32, %c32_i32", "%c1_i32, %c32_i32",
     "nvvm.wgmma.wait.group.sync.aligned 0"),
]

# The modifiers: the first visited key of a window(100, 0) block taken 100
# keys too late (the window's left bound dropped from the tile range: the
# key tile [128, 192) holds attended keys), and a softcap of 6 instead of 3
# (the cap in the log2 domain, 3 log2(e)).
MODIFIER_MUTATIONS = [
    ("window_begin_late", ", %c100 : index", ", %c0 : index"),
    ("softcap_cap", "4.32808495 : f32", "8.65616989 : f32"),
]

MODIFIER_MUTANT = mapped_case("modifier_mutant", dtype="float16", Hq=1,
                              Hkv=1, Nq=70, Nk=300, causal="bottom-right",
                              window=(100, 0), softcap=3.0, lens=[290])

#===------------------------------------------------------------------------===#
# NaN/inf in the V rows of keys a row does not attend
#===------------------------------------------------------------------------===#

# The rule of test/Integration/CPU/nan_isolation.py at the wgmma head dims:
# NaN/inf in V rows of keys some rows do not attend (causally excluded,
# masked) must not reach those rows (the wgmma computes 0 * NaN = NaN),
# while rows attending such a key get non-finite values.
# (name, dtype, D, Nq, Nk, causal, mask kind, bad keys, mapping options)
NAN_CASES = [
    ("nan_causal_br", "float16", 64, 70, 90, "bottom-right", None,
     [89, 88, 45], ""),
    ("nan_causal_tl_d128", "bfloat16", 128, 90, 70, "top-left", None,
     [69, 40, 3], ""),
    ("nan_bool_mask", "float16", 64, 64, 100, "none", "bool", [99, 50, 3],
     ""),
    ("nan_additive_mask", "bfloat16", 64, 33, 77, "none", "float", [76, 30],
     ""),
    ("nan_causal_2wg_kv128", "float16", 64, 150, 131, "bottom-right", None,
     [130, 70, 64], "warpgroups=2 block-kv=128"),
    # A sliding window (no causality): keys inside the visited tiles but
    # outside some rows' windows (an optional tenth field: the window).
    ("nan_window", "float16", 64, 100, 160, "none", None, [5, 60, 130], "",
     (20, 10)),
]


def run_nan_case(fa_emulate, nc, tmp, mutate=None):
    """Runs NaN case `nc`; with `mutate` (text -> text), the mapped kernel is
    mutated and rerun instead."""
    name, dtype, D, Nq, Nk, causal, mask_kind, bad, opts = nc[:9]
    window = nc[9] if len(nc) > 9 else None
    B, Hq, Hkv = 2, 4, 2
    rng = np.random.default_rng(seed_of(name))
    q, k, v = (rng.standard_normal(shape).astype(np.float32)
               for shape in ((B, Hq, Nq, D), (B, Hkv, Nk, D),
                             (B, Hkv, Nk, D)))
    if dtype == "float16":
        q, k, v = (x.astype(np.float16) for x in (q, k, v))
    else:
        q, k, v = (round_bf16(x) for x in (q, k, v))
    mask, v_bad, v_clean = poison_inputs(rng, v, bad, mask_kind,
                                         (B, Hq, Nq, Nk))
    base = os.path.join(tmp, name)
    paths = {n: base + "." + n + ".npy"
             for n in ("q", "k", "v", "lens", "mask", "o", "lse")}
    with open(base + ".mlir", "w") as f:
        f.write(kernel_text(dict(dtype=dtype, B=B, Hq=Hq, Hkv=Hkv, D=D, Dv=D,
                                 causal=causal, lens=None, mask=mask_kind,
                                 mask_shape="BHQK", scale=None, lse=False,
                                 window=window)))
    mapped = base + ".mapped.mlir"
    cmd = [fa_emulate, base + ".mlir", "--check-races", "--pipeline",
           PIPELINE % opts, "--dump-mapped", mapped]
    cmd += save_attention_inputs(paths, q, k, v_bad, None, mask, False)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return False, "fa-emulate failed: " + proc.stderr.strip()[:1000]
    with open(mapped) as f:
        text = f.read()
    if "nvvm.wgmma.mma_async" not in text:
        return False, "the mapped kernel is not the wgmma kernel"
    if mutate:
        mutant = base + ".mutant.mlir"
        with open(mutant, "w") as f:
            f.write(mutate(text))
        os.remove(paths["o"])
        roles = "q,k,v" + (",mask" if mask is not None else "") + ",o"
        proc = subprocess.run(
            [fa_emulate, mutant, "--check-races", "--arg-roles", roles] +
            save_attention_inputs(paths, q, k, v_bad, None, mask, False),
            capture_output=True, text=True)
        if proc.returncode != 0:
            return False, "fa-emulate: " + proc.stderr.strip()[:160]
    o = np.load(paths["o"]).astype(np.float64)
    scale = 1.0 / np.sqrt(D)
    o_ref, _, _ = reference(q, k, v_clean, scale, causal, None, mask,
                            np.float64, window=window)
    o_naive, _, _ = reference(q, k, v_clean, scale, causal, None, mask,
                              np.float32, window=window)
    naive = o_naive.astype(np.float16) if dtype == "float16" \
        else round_bf16(o_naive)
    tol = 2 * np.max(np.abs(naive.astype(np.float64) - o_ref)) + 1e-4
    keep = attended(B, Hq, Nq, Nk, causal, None, mask)
    if window is not None:
        # The window's rule (off = 0 without bottom-right causality).
        off = Nk - Nq if causal == "bottom-right" else 0
        qi, ki = np.arange(Nq)[:, None] + off, np.arange(Nk)[None, :]
        if window[0] >= 0:
            keep &= ki >= qi - window[0]
        if window[1] >= 0:
            keep &= ki <= qi + window[1]
    hits = keep[..., bad].any(-1)
    clean = ~hits
    problems = []
    if not np.isfinite(o[clean]).all():
        problems.append("%d rows that attend no bad key have NaN/inf" % int(
            (~np.isfinite(o[clean])).any(-1).sum()))
    else:
        err = np.max(np.abs(o[clean] - o_ref[clean]), initial=0.0)
        if not err <= tol:
            problems.append("error %.3e on the clean rows (tol %.1e)" % (
                err, tol))
    if hits.any() and np.isfinite(o[hits]).any():
        problems.append("rows attending a bad key have finite values")
    if not (clean.any() and hits.any()):
        problems.append("the case exercises nothing")
    summary = "%d clean rows, %d rows attend a bad key" % (int(clean.sum()),
                                                          int(hits.sum()))
    return not problems, summary + ("" if not problems else
                                    ": " + "; ".join(problems))


MUTANT = mapped_case("mutant", dtype="float16", Hq=2, Hkv=1, D=128, Nq=70,
                     Nk=150, causal="bottom-right", lens=[140])


# Cases also run through fa-run (f16: fa-run reads no bfloat16).
FA_RUN_CASES = ("wg_f16_d128", "wg_f16_causal_br", "wg_f16_kv_lens",
                "wg_f16_bool_mask", "wg_f16_mqa_dv")


def run_fa_run(fa_run, c, tmp):
    """Runs case `c` with `fa-run attention --device emulate --kernel
    wgmma`."""
    inputs, base, paths = prepare_case(c, tmp)
    for name in ("o", "lse"):
        if os.path.exists(paths[name]):
            os.remove(paths[name])
    cmd = [fa_run, "attention", "--device", "emulate", "--kernel", "wgmma",
           "--causal", c["causal"]]
    if c["scale"] is not None:
        cmd += ["--scale", repr(c["scale"])]
    cmd += save_attention_inputs(paths, *inputs[:5], c["lse"])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return False, "fa-run failed (exit %d): %s" % (
            proc.returncode, proc.stderr.strip()[:1000])
    if "(SIMT interpreter, sm_90a, kernel wgmma)" not in proc.stderr + \
            proc.stdout:
        return False, "fa-run did not report the wgmma emulation"
    return check_outputs(c, inputs, paths)


def check_fa_run_errors(fa_run):
    proc = subprocess.run([fa_run, "attention", "--device", "cpu", "--kernel",
                           "wgmma",
                           "--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
                           "-o", "o.npy"], capture_output=True, text=True)
    expected = "--kernel applies to --device cuda, emulate or auto only"
    ok = proc.returncode != 0 and expected in proc.stderr
    print("%s fa-run --device cpu --kernel wgmma is an error: %s" % (
        "PASS" if ok else "FAIL", proc.stderr.strip()[:200]), flush=True)
    return ok


def run_extra(fa_emulate, fa_run, filters, cases, tmp):
    """The NaN cases, the mutations and the fa-run runs; returns the number
    of failures."""
    failures = 0
    for nc in NAN_CASES:
        if filters and not any(f in nc[0] for f in filters):
            continue
        ok, summary = run_nan_case(fa_emulate, nc, tmp)
        failures += not ok
        print("%s %-30s %s" % ("PASS" if ok else "FAIL", nc[0], summary),
              flush=True)
    if not filters or "mutations" in filters:
        # Without the zeroing of the non-finite V elements in the tile,
        # the wgmma's 0 * NaN must reach the clean rows.
        ok, summary = run_nan_case(
            fa_emulate, NAN_CASES[2], tmp,
            lambda t: "\n".join(
                l for l in t.split("\n")
                if not ("vector.store" in l and "vector<8xf16>" in l)))
        failures += ok
        print("%s mutation %-24s caught: %s" % (
            "FAIL" if ok else "PASS", "no_nan_zeroing",
            "NO" if ok else summary[:160]), flush=True)
        bm = next(c for c in cases
                  if c["name"] == "wg_f16_block_mask_prefix_lm")
        failures += run_block_mask_mutations(
            fa_emulate, bm, tmp, PIPELINE % bm["opts"],
            ("partial_full", "visited_empty"))
    if fa_run:
        for c in cases:
            if c["name"] not in FA_RUN_CASES:
                continue
            ok, summary = run_fa_run(fa_run, c, tmp)
            failures += not ok
            print("%s fa-run %-23s %s" % ("PASS" if ok else "FAIL",
                                          c["name"], summary), flush=True)
        failures += not check_fa_run_errors(fa_run)
    if not filters or "mutations" in filters:
        failures += run_mutations(fa_emulate, MUTANT, tmp, PIPELINE % "",
                                  MUTATIONS)
        failures += run_mutations(fa_emulate, MODIFIER_MUTANT, tmp,
                                  PIPELINE % "", MODIFIER_MUTATIONS)
    return failures


def main(argv):
    argv = list(argv)
    fa_run = None
    if "--fa-run" in argv[2:]:
        i = argv.index("--fa-run", 2)
        fa_run = argv[i + 1]
        del argv[i:i + 2]
    cases = CASES
    if "--dynamic-shared-base" in argv[2:]:
        # Another placement of dynamic shared memory in the shared window:
        # the kernel aligns its swizzled tiles to 1024 bytes at run time,
        # so the results must not depend on it.
        i = argv.index("--dynamic-shared-base", 2)
        base = argv[i + 1]
        del argv[i:i + 2]
        cases = [dict(c, flags=c["flags"] + ["--dynamic-shared-base", base])
                 for c in CASES]
    return run_suite(
        argv, __doc__, cases, "wgmma cases", run_wg_case,
        lambda fa_emulate, filters, cases, tmp: run_extra(
            fa_emulate, fa_run, filters, cases, tmp))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
