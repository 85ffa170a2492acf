# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The SIMT GPU kernel on a paged K/V cache (fa.attention ... block_table),
run under the SIMT interpreter (fa-emulate --check-races), against the
float64 reference of test/Integration/Paged/paged_numerics.py: each
sequence's keys gathered from its pages (sharing no code with the kernel)
and test/lib/fa_reference.py's contract applied per sequence (bottom-right
causality aligned to the sequence's own length).

The cases are paged_numerics.py's: page sizes 1, 16, 32, 64, 128 and 256
with partly filled last pages and shuffled tables whose entries past a
sequence point at other valid pages; several queries per sequence (GQA 8/2,
both causal alignments); prefix sharing with an empty sequence; a window,
ALiBi and softcap on the logical positions; a boolean mask over Nk = M S.
Each runs three ways: the SIMT kernel (block-kv 64, so tiles span several
small pages and lie inside large ones), block-kv 16, and with packed query
heads (--pack-gqa always, the decode kernel).

Pass criteria (compare_outputs): relative error of O and LSE below 2e-5;
empty rows exactly O = 0 and LSE = -inf; no NaN; no race and no
out-of-bounds access (the interpreter checks every load against the
cache's shape).

Mutation: the kernel reading each key's page one block-table entry further
on (block_table[b, k / S + 1], paged_numerics.py's page_past edit of the
mapped IR) must fail: wrong values, or the interpreter's out-of-bounds
read of the block table.

Usage: paged_emulate.py FA_EMULATE
"""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fa_reference import compare_outputs, seed_of  # noqa: E402


def load_paged_numerics():
    path = os.path.join(HERE, "..", "Integration", "Paged",
                        "paged_numerics.py")
    spec = importlib.util.spec_from_file_location("paged_numerics", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_text(c, a, elt="f32"):
    """@attn in the kernel form: B, Nq, P and M dynamic; a boolean mask
    enters as i8 and is turned into i1; Q, K, V and O of element type
    `elt`."""
    Hq, Hkv, D, S = c["Hq"], c["Hkv"], c["D"], c["S"]
    ty = {"q": f"?x{Hq}x?x{D}x{elt}", "kc": f"?x{S}x{Hkv}x{D}x{elt}",
          "vc": f"?x{S}x{Hkv}x{D}x{elt}", "lens": "?xi32", "bt": "?x?xi32",
          "mask": f"?x{Hq}x?x?xi8", "alibi": f"{Hq}xf32",
          "o": f"?x{Hq}x?x{D}x{elt}", "l": f"?x{Hq}x?xf32"}
    names = ["q", "kc", "vc", "lens", "bt"]
    names += [n for n in ("mask", "alibi") if n in a]
    names += ["o", "l"]
    lines = ["func.func @attn(" + ", ".join(
        f"%{n}_m: memref<{ty[n]}>" for n in names) + ") {"]
    for n in names:
        w = " writable" if n in ("o", "l") else ""
        lines.append(f"  %{n} = bufferization.to_tensor %{n}_m restrict{w} : "
                     f"memref<{ty[n]}> to tensor<{ty[n]}>")
    clauses = " kv_lens(%lens : tensor<?xi32>) block_table(%bt : " \
              "tensor<?x?xi32>)"
    if "mask" in a:
        i1 = ty["mask"].replace("xi8", "xi1")
        lines += [
            "  %c0 = arith.constant 0 : index",
            "  %c2 = arith.constant 2 : index",
            "  %c3 = arith.constant 3 : index",
            f"  %d0 = tensor.dim %mask, %c0 : tensor<{ty['mask']}>",
            f"  %d2 = tensor.dim %mask, %c2 : tensor<{ty['mask']}>",
            f"  %d3 = tensor.dim %mask, %c3 : tensor<{ty['mask']}>",
            f"  %e = tensor.empty(%d0, %d2, %d3) : tensor<{i1}>",
            "  %mask_i1 = linalg.generic {indexing_maps = ["
            "affine_map<(a, b, c, d) -> (a, b, c, d)>, "
            "affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = "
            "[\"parallel\", \"parallel\", \"parallel\", \"parallel\"]} "
            f"ins(%mask : tensor<{ty['mask']}>) outs(%e : tensor<{i1}>) {{",
            "  ^bb0(%x: i8, %y: i1):",
            "    %z = arith.constant 0 : i8",
            "    %ne = arith.cmpi ne, %x, %z : i8",
            "    linalg.yield %ne : i1",
            f"  }} -> tensor<{i1}>"]
        clauses += f" mask(%mask_i1 : tensor<{i1}>)"
    if "alibi" in a:
        clauses += f" alibi(%alibi : tensor<{ty['alibi']}>)"
    attrs = {"none": "", "top-left": " causal(top_left)",
             "bottom-right": " causal(bottom_right)"}[c["causal"]]
    if c["window"]:
        attrs += " window({}, {})".format(*c["window"])
    if c["softcap"]:
        attrs += f" softcap({c['softcap']!r})"
    o_t, l_t = f"tensor<{ty['o']}>", f"tensor<{ty['l']}>"
    lines.append(
        f"  %r:2 = fa.attention ins(%q, %kc, %vc : tensor<{ty['q']}>, "
        f"tensor<{ty['kc']}>, tensor<{ty['vc']}>){clauses} "
        f"outs(%o : {o_t}, %l : {l_t}){attrs} -> {o_t}, {l_t}")
    lines += [
        f"  bufferization.materialize_in_destination %r#0 in writable %o_m : "
        f"({o_t}, memref<{ty['o']}>) -> ()",
        f"  bufferization.materialize_in_destination %r#1 in writable %l_m : "
        f"({l_t}, memref<{ty['l']}>) -> ()",
        "  return", "}", ""]
    return "\n".join(lines)


WAYS = {"simt": [], "block_kv16": ["--block-kv", "16"],
        "packed": ["--pack-gqa", "always"]}


def run(fa_emulate, c, a, tmp, way, mutate=None, elt="f32", flags=None):
    """Runs case `c` one way (`flags`: the kernel's, default the SIMT
    kernel with WAYS[way]); returns (o, lse) or raises RuntimeError."""
    base = os.path.join(tmp, f"{c['name']}.{way}")
    files = {"q": "--q", "kc": "--k", "vc": "--v", "lens": "--kv-lens",
             "bt": "--block-table", "mask": "--mask", "alibi": "--alibi"}
    cmd = []
    for n, flag in files.items():
        if n in a:
            np.save(f"{base}.{n}.npy", a[n])
            cmd += [flag, f"{base}.{n}.npy"]
    cmd += ["-o", base + ".o.npy", "--lse", base + ".l.npy", "--check-races"]
    cmd += flags if flags is not None else ["--kernel", "simt"] + WAYS[way]
    src = base + ".mlir"
    with open(src, "w") as f:
        f.write(kernel_text(c, a, elt))
    if mutate:
        mapped = base + ".mapped.mlir"
        proc = subprocess.run([fa_emulate, src, "--dump-mapped", mapped] + cmd,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError("clean run failed: " + proc.stderr.strip())
        with open(mapped) as f:
            text = mutate(f.read())
        if text is None:
            raise RuntimeError("the mutation found nothing to edit")
        src = base + ".mutated.mlir"
        with open(src, "w") as f:
            f.write(text)
        roles = "q,k,v,kv_lens,block_table" + \
            (",mask" if "mask" in a else "") + \
            (",alibi" if "alibi" in a else "") + ",o,lse"
        cmd += ["--func", "attn", "--arg-roles", roles]
    proc = subprocess.run([fa_emulate, src] + cmd, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError("fa-emulate failed: " + proc.stderr.strip()[:800])
    return np.load(base + ".o.npy"), np.load(base + ".l.npy")


def check_page_past(run_mutant, judge):
    """Runs the page-past mutant (`run_mutant()` -> (o, lse)) and judges it
    (`judge(o, lse)` -> failures): it must fail, by wrong values or the
    interpreter's out-of-bounds read of the block table (any other error
    is not a catch). Returns the failures of the check itself."""
    try:
        o, lse = run_mutant()
        caught = judge(o, lse)
    except RuntimeError as e:
        caught = ["out-of-bounds"] if "out-of-bounds read of " \
            "block_table" in str(e) else []
        if not caught:
            print(f"FAIL mutation page_past: {e}")
            return [f"mutation page_past: {e}"]
    if caught:
        print("PASS mutation page_past is caught")
        return []
    print("FAIL mutation page_past was not caught")
    return ["mutation page_past was not caught"]


def main(argv):
    fa_emulate = argv[1]
    pn = load_paged_numerics()
    failures = []
    with tempfile.TemporaryDirectory(prefix="fa-paged-emulate-") as tmp:
        for c in pn.CASES:
            rng = np.random.default_rng(seed_of("paged." + c["name"]))
            a = pn.build(c, rng)
            ref_o, ref_l, empty = pn.reference_paged(c, a)
            for way in WAYS:
                tag = f"{c['name']} [{way}] S={c['S']} Nq={c['Nq']}"
                try:
                    o, lse = run(fa_emulate, c, a, tmp, way)
                except RuntimeError as e:
                    failures.append(f"{tag}: {e}")
                    print(f"FAIL {tag}: {e}")
                    continue
                failures += compare_outputs(tag, o, lse, ref_o, ref_l, empty)
        # The mutation: reading the next entry's page must fail.
        c = next(x for x in pn.CASES if x["name"] == "shared_prefix")
        rng = np.random.default_rng(seed_of("paged." + c["name"]))
        a = pn.build(c, rng)
        ref_o, ref_l, empty = pn.reference_paged(c, a)
        failures += check_page_past(
            lambda: run(fa_emulate, c, a, tmp, "simt",
                        mutate=pn.mutate_page_past),
            lambda o, lse: compare_outputs("mutation page_past", o, lse,
                                           ref_o, ref_l, empty))
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
