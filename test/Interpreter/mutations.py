# RUN: %python %s %fa_emulate %S/attention_emulate.py
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The interpreter can fail: deliberate bugs in the mapped GPU IR are caught.

One kernel (f16, GQA 4/2, causal bottom-right, key lengths [0, 77], Nq = 37
so the last query tile is partial, Nk = 100 so there are two K/V tiles) is
mapped once by fa-emulate (--dump-mapped); the clean IR must pass with
--check-races and match the float64 reference. Each mutation then edits the
mapped text and runs it again (--arg-roles, the module is already mapped):

  barrier_after_copy   remove the barrier between the K/V copy and its use
                       -> race reported (read after another thread's write)
  barrier_end_of_tile  remove the barrier at the end of the K/V tile loop
                       -> race reported
  scatter_all_lanes    every lane stores the row state (not only lane 0)
                       -> race reported (two threads write one address)
  shuffle_max_15       the row-max butterfly's first offset 16 -> 15
                       -> wrong result against the reference
  shuffle_sum_15       the row-sum butterfly's first offset 16 -> 15
                       -> wrong result
  shuffle_idx_xor      the P broadcast `shuffle idx` becomes `shuffle xor`
                       -> wrong result
  copy_past_tile       the K tile copy loop runs one row past the tile
                       -> out-of-bounds write of the shared K buffer
  extra_kv_tile        the K/V tile loop runs one tile more
                       -> out-of-bounds read of K (key length 0)
  unclamped_q_row      the Q copy reads rows past Nq (no clamp)
                       -> out-of-bounds read of Q
  unsupported_op       a math.sin in the kernel -> an error naming the op

The decode kernel with packed query heads (f16, G = 4, Nq = 3, key
lengths [0, 100]) gets its own clean run and two mutations:

  packed_head_in_q_copy   the Q copy reads every packed row from the
                          group's first head -> wrong result
  packed_query_in_scores  the scores take the packed row, not row / G, as
                          the query position -> wrong result (causality)

A failing run must not leave an output file behind.

Usage: mutations.py FA_EMULATE ATTENTION_EMULATE_PY
"""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def load_helpers(path):
    spec = importlib.util.spec_from_file_location("attention_emulate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

#===------------------------------------------------------------------------===#
# Mutations of the mapped text
#===------------------------------------------------------------------------===#


def add_constants(text, decls):
    """Inserts `%name = arith.constant ...` lines at the top of the kernel."""
    i = text.index("gpu.func @fa_attention")
    j = text.index("\n", i) + 1
    return text[:j] + "".join("      %s\n" % d for d in decls) + text[j:]


def remove_barrier(text, n):
    lines = text.split("\n")
    barriers = [i for i, l in enumerate(lines) if "gpu.barrier" in l]
    del lines[barriers[n]]
    return "\n".join(lines)


def shuffle_offset(text, consumer):
    """Offset 16 -> 15 in the first butterfly whose result feeds `consumer`."""
    lines = text.split("\n")
    for i, l in enumerate(lines):
        if re.search(r"gpu\.shuffle\s+xor %\S+, %c16_i32,", l) and \
                consumer in lines[i + 1]:
            lines[i] = l.replace("%c16_i32", "%c15_mut")
            break
    else:
        raise RuntimeError("no butterfly feeding " + consumer)
    return add_constants("\n".join(lines), ["%c15_mut = arith.constant 15 : i32"])


def shuffle_idx_to_xor(text):
    new, n = re.subn(r"gpu\.shuffle\s+idx", "gpu.shuffle xor", text, count=1)
    assert n == 1
    return new


def scatter_all_lanes(text):
    """The lane-0 guard of the row-state stores becomes `true`."""
    lines = text.split("\n")
    for i, l in enumerate(lines):
        m = re.match(r"(\s*)scf\.if (%\w+) \{$", l)
        if m and "memref.store" in lines[i + 1] and \
                re.search(r"memref<\d+xf32, 3>", lines[i + 1]):
            lines[i] = "%sscf.if %%true_mut {" % m.group(1)
            break
    else:
        raise RuntimeError("no guarded row-state store")
    return add_constants("\n".join(lines), ["%true_mut = arith.constant true"])


def copy_past_tile(text, tile_elems, row):
    new, n = re.subn(r"(scf\.for %\w+ = %thread_id_x to )%c" + str(tile_elems)
                     + r"( step %c128)", r"\1%bound_mut\2", text, count=1)
    assert n == 1
    return add_constants(new, ["%%bound_mut = arith.constant %d : index"
                               % (tile_elems + row)])


def extra_kv_tile(text):
    m = re.search(r"\n(\s*)scf\.for (%\w+) = %c0 to (%\d+) step %c1 \{", text)
    assert m
    indent, bound = m.group(1), m.group(3)
    start = m.start() + 1
    line_end = text.index("\n", start)
    loop = text[start:line_end].replace("to " + bound, "to %tiles_mut")
    return (text[:start] + "%s%%tiles_mut = arith.addi %s, %%c1 : index\n"
            % (indent, bound) + loop + text[line_end:])


def unclamped_q_row(text):
    """In the first thread loop (the Q copy), index the load with the row
    before its clamp to Nq - 1."""
    start = re.search(r"scf\.for %\w+ = %thread_id_x to", text).start()
    m = re.compile(r"(%\w+) = arith\.minsi (%\w+), (%\w+) : index").search(
        text, start)
    clamped, raw = m.group(1), m.group(2)
    load = re.compile(r"memref\.load %arg0\[[^\]]*\]").search(text, m.end())
    fixed = load.group(0).replace(clamped + ",", raw + ",")
    assert fixed != load.group(0)
    return text[:load.start()] + fixed + text[load.end():]


def unsupported_op(text):
    return add_constants(text, ["%one_mut = arith.constant 1.0 : f32",
                                "%sin_mut = math.sin %one_mut : f32"])

#===------------------------------------------------------------------------===#
# Running
#===------------------------------------------------------------------------===#


def packed_head_in_q_copy(text, group):
    """Packed heads: in the Q copy (the first thread loop), the row's head
    within its group (`row % G`) becomes 0: every row reads the group's
    first query head."""
    start = re.search(r"scf\.for %\w+ = %thread_id_x to", text).start()
    pat = re.compile(r"arith\.remui (%\w+), %c" + str(group) + " : index")
    m = pat.search(text, start)
    assert m, "no row % G in the Q copy"
    return text[:m.start()] + "arith.remui %s, %%c1 : index" % m.group(1) + \
        text[m.end():]


def packed_query_in_scores(text, group):
    """Packed heads: in the K/V tile loop, the first query position of a
    packed row (`row / G`) becomes the packed row itself."""
    loop = re.search(r"scf\.for %\w+ = %c0 to %\d+ step %c1 \{", text)
    assert loop
    pat = re.compile(r"arith\.divui (%\w+), %c" + str(group) + " : index")
    m = pat.search(text, loop.end())
    assert m, "no row / G in the K/V loop"
    return text[:m.start()] + "arith.divui %s, %%c1 : index" % m.group(1) + \
        text[m.end():]


def check_kernel(h, fa_emulate, tmp, c, flags, make_mutations):
    """Maps case `c` once (fa-emulate with `flags`), checks the clean
    kernel, then each mutation of make_mutations(text); returns the number
    of failures."""
    failures = 0
    rng = np.random.default_rng(h.seed_of(c["name"]))
    q, k, v, lens, _ = h.make_inputs(c, rng)
    p = {n: os.path.join(tmp, c["name"] + "." + n + ".npy")
         for n in ("q", "k", "v", "lens", "o", "lse")}
    for n, a in (("q", q), ("k", k), ("v", v), ("lens", lens)):
        np.save(p[n], a)
    src = os.path.join(tmp, c["name"] + ".mlir")
    mapped = os.path.join(tmp, c["name"] + ".mapped.mlir")
    with open(src, "w") as f:
        f.write(h.kernel_text(c))
    io = ["--q", p["q"], "--k", p["k"], "--v", p["v"], "--kv-lens",
          p["lens"], "-o", p["o"], "--lse", p["lse"], "--check-races",
          "--kernel", "simt"]

    def run(path, extra=()):
        for n in ("o", "lse"):
            if os.path.exists(p[n]):
                os.remove(p[n])
        return subprocess.run([fa_emulate, path] + io + list(extra),
                              capture_output=True, text=True)

    def numerics():
        o, lse = np.load(p["o"]), np.load(p["lse"])
        return h.check(c, q, k, v, lens, None, o, lse)

    # The clean kernel.
    proc = run(src, ["--dump-mapped", mapped] + list(flags))
    if proc.returncode != 0:
        print("FAIL %s clean: fa-emulate failed: %s" % (c["name"],
                                                        proc.stderr.strip()))
        return 1
    ok, summary = numerics()
    print("%s %s clean: %s" % ("PASS" if ok else "FAIL", c["name"], summary))
    failures += not ok
    with open(mapped) as f:
        text = f.read()
    for name, mutated, expect, needle in make_mutations(text):
        path = os.path.join(tmp, name + ".mlir")
        with open(path, "w") as f:
            f.write(mutated)
        proc = run(path, ["--func", "fa_attention", "--arg-roles",
                          "q,k,v,kv_lens,o,lse"])
        first = (proc.stderr.strip().split("\n") or [""])[0]
        if expect == "wrong":
            if proc.returncode != 0:
                ok, why = False, "fa-emulate failed: " + first
            else:
                good, summary = numerics()
                ok, why = not good, summary
        else:
            left = [n for n in ("o", "lse") if os.path.exists(p[n])]
            ok = proc.returncode != 0 and needle in proc.stderr and \
                not left
            why = first if not left else "left outputs behind: %s" % left
        failures += not ok
        print("%s %s (expect %s): %s" % ("PASS" if ok else "FAIL", name,
                                         expect, why), flush=True)
    return failures


def main(argv):
    fa_emulate, helpers_path = argv[1], argv[2]
    h = load_helpers(helpers_path)
    c = h.case("mutations", dtype="float16", B=2, Hq=4, Hkv=2, Nq=37, Nk=100,
               lens=[0, 77], causal="bottom-right")

    def dense_mutations(text):
        # The K tile: block_kv rows of D elements, copied by one thread loop.
        tile = int(re.search(r"scf\.for %\w+ = %thread_id_x to %c(\d+) step "
                             r"%c128 \{\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n"
                             r"[^\n]*\n[^\n]*\n\s*%\w+ = memref\.load %arg1",
                             text).group(1))
        return [
            ("barrier_after_copy", remove_barrier(text, 1),
             "race", "wrote in the same barrier interval"),
            ("barrier_end_of_tile", remove_barrier(text, 2), "race", "race:"),
            ("scatter_all_lanes", scatter_all_lanes(text), "race",
             "also wrote in the same barrier interval"),
            ("shuffle_max_15", shuffle_offset(text, "arith.maximumf"),
             "wrong", None),
            ("shuffle_sum_15", shuffle_offset(text, "arith.addf"), "wrong",
             None),
            ("shuffle_idx_xor", shuffle_idx_to_xor(text), "wrong", None),
            ("copy_past_tile", copy_past_tile(text, tile, c["D"]), "error",
             "out-of-bounds write of @__fa_smem"),
            ("extra_kv_tile", extra_kv_tile(text), "error",
             "out-of-bounds read of K"),
            ("unclamped_q_row", unclamped_q_row(text), "error",
             "out-of-bounds read of Q"),
            ("unsupported_op", unsupported_op(text), "error",
             "'math.sin' op is not supported by the fa interpreter"),
        ]

    # The decode kernel with packed query heads (G = 8 / 2 = 4; Nq = 3; the
    # second sequence's keys all there, so that causality removes keys).
    packed = h.case("mutations_packed", dtype="float16", B=2, Hq=8, Hkv=2,
                    Nq=3, Nk=100, lens=[0, 100], causal="bottom-right")

    def packed_mutations(text):
        return [
            ("packed_head_in_q_copy", packed_head_in_q_copy(text, 4),
             "wrong", None),
            ("packed_query_in_scores", packed_query_in_scores(text, 4),
             "wrong", None),
        ]

    with tempfile.TemporaryDirectory(prefix="fa-mutations-") as tmp:
        failures = check_kernel(h, fa_emulate, tmp, c, [], dense_mutations)
        failures += check_kernel(h, fa_emulate, tmp, packed,
                                 ["--pack-gqa", "always"], packed_mutations)
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
