# RUN: %python %s %fa_emulate
#
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The interpreter catches deliberate bugs in the FA2-style tensor-core
kernel (fa2_kernel_gen.py). Each mutation edits the generated text (and
asserts that the edit happened), runs fa-emulate --check-races on it, and
expects either a wrong result against the float64 reference (the run
itself succeeds) or a failed run whose diagnostic names the problem and
that leaves no output behind:

  p_fragment_order  the P A-fragment shuffle [0, 1, 2, 3] -> [0, 2, 1, 3]
                    -> wrong result
  v_no_trans        the V ldmatrix without .trans -> wrong result
  max_xor_4         the row-max quad shuffle xor 2 -> 4 -> wrong result
  sum_xor_4         the row-sum quad shuffle xor 2 -> 4 -> wrong result
  wrong_slot        the pipeline computes on slot (j + 1) % 2, which the
                    prefetch is still filling -> pending-copy error
  no_wait_async     the cp.async wait removed -> pending-copy error
  no_wait_pipe      the same in the pipeline -> pending-copy error
  no_barrier_async  the barrier after the cp.async wait removed -> race
                    (another thread's completed copy read in its interval)
  no_barrier_plain  the barrier after the K/V copy removed -> race
  extra_kv_tile     the K/V loop runs one tile past Nk -> out-of-bounds read
                    of K
  q_row_past_tile   the Q tile copy writes one row past the shared tile ->
                    out-of-bounds write of @Qs
  full_warp_ldmatrix  the Q ldmatrix under a lane < 16 guard -> error (all
                    32 lanes needed)

Usage: fa2_mutations.py FA_EMULATE
"""

import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fa2_emulate as fe  # noqa: E402
import fa2_kernel_gen  # noqa: E402


def sub(pattern, repl, text, count=1):
    new, n = re.subn(pattern, repl, text, count=count)
    assert n >= 1 and new != text, "mutation did not apply: " + pattern
    return new


def add_constant(text, decl):
    i = text.index("gpu.func @fa2(")
    j = text.index("\n", i) + 1
    return text[:j] + "      " + decl + "\n" + text[j:]


def p_fragment_order(t):
    return sub(r"(vector\.shuffle %h\d+, %h\d+ )\[0, 1, 2, 3\]",
               r"\1[0, 2, 1, 3]", t)


def v_no_trans(t):
    return sub(r"transpose = true", "transpose = false", t, count=0)


def xor_4(t, which):
    lines = t.split("\n")
    hits = [i for i, l in enumerate(lines)
            if re.search(r"gpu\.shuffle xor %\w+, %c2_i32, ", l)]
    assert len(hits) == 4, hits
    i = hits[which]
    lines[i] = lines[i].replace("%c2_i32", "%c4_mut")
    return add_constant("\n".join(lines), "%c4_mut = arith.constant 4 : i32")


def wrong_slot(t):
    m = re.search(r"(%jn\d+) = arith\.addi %j, %c1 : index", t)
    return sub(r"(%cslot\d+ = arith\.remui )%j(, %c2 : index)",
               r"\g<1>" + m.group(1) + r"\2", t)


def no_wait(t):
    return sub(r"\n\s*nvgpu\.device_async_wait [^\n]*", "", t)


def no_barrier_after_copy(t):
    """Removes the barrier between the K/V copy (or the cp.async wait) and
    the first ldmatrix of the tile."""
    loop = t.index("scf.for %j")
    first_ld = t.index("nvgpu.ldmatrix", loop)
    at = t.rfind("gpu.barrier", loop, first_ld)
    assert at > loop
    line_start = t.rfind("\n", 0, at)
    return t[:line_start] + t[t.index("\n", at):]


def extra_kv_tile(t):
    m = re.search(r"\n(\s*)(%r\d+:12 = scf\.for %j = %c0 to )(%nkt\d+)", t)
    assert m
    indent, head, bound = m.group(1), m.group(2), m.group(3)
    return (t[:m.start()] + "\n%s%%nkt_mut = arith.addi %s, %%c1 : index"
            % (indent, bound) + "\n" + indent + head + "%nkt_mut" +
            t[m.end():])


def q_row_past_tile(t):
    """The last Q chunk store (rows 48..63) goes one row further: thread
    127 writes row 64 of the 64-row tile."""
    lines = t.split("\n")
    i = max(k for k, l in enumerate(lines)
            if re.search(r"vector\.store %x\d+, %Qs\d+\[", l))
    m = re.search(r"\[(%row\d+), ", lines[i])
    indent = re.match(r"\s*", lines[i]).group(0)
    lines[i] = lines[i].replace("[" + m.group(1) + ", ", "[%row_mut, ")
    lines.insert(i, "%s%%row_mut = arith.addi %s, %%c1 : index"
                 % (indent, m.group(1)))
    return "\n".join(lines)


def full_warp_ldmatrix(t):
    """The first Q ldmatrix only in lanes 0..15 (an scf.if on the lane)."""
    lane = re.search(r"(%lane\d+) = gpu\.lane_id", t).group(1)
    m = re.search(r"\n(\s*)(%qa\d+) = (nvgpu\.ldmatrix [^\n]*-> "
                  r"(vector<4x2x\w+>))", t)
    assert m
    indent, name, op, ty = m.groups()
    guarded = ("\n%s%%lo_mut = arith.cmpi ult, %s, %%c16 : index"
               "\n%s%s = scf.if %%lo_mut -> (%s) {"
               "\n%s  %%qa_mut = %s"
               "\n%s  scf.yield %%qa_mut : %s"
               "\n%s} else {"
               "\n%s  %%z_mut = arith.constant dense<0.0> : %s"
               "\n%s  scf.yield %%z_mut : %s"
               "\n%s}" % (indent, lane, indent, name, ty, indent, op, indent,
                          ty, indent, indent, ty, indent, ty, indent))
    return t[:m.start()] + guarded + t[m.end():]


MUTATIONS = [
    # name, variant, mutate, expectation, needle
    ("p_fragment_order", "plain", p_fragment_order, "wrong", None),
    ("v_no_trans", "plain", v_no_trans, "wrong", None),
    ("max_xor_4", "plain", lambda t: xor_4(t, 1), "wrong", None),
    ("sum_xor_4", "plain", lambda t: xor_4(t, 3), "wrong", None),
    ("wrong_slot", "pipe", wrong_slot, "error", "is still pending"),
    ("no_wait_async", "async", no_wait, "error", "is still pending"),
    ("no_wait_pipe", "pipe", no_wait, "error", "is still pending"),
    ("no_barrier_async", "async", no_barrier_after_copy, "error",
     "wrote in the same barrier interval"),
    ("no_barrier_plain", "plain", no_barrier_after_copy, "error",
     "wrote in the same barrier interval"),
    ("extra_kv_tile", "plain", extra_kv_tile, "error",
     "out-of-bounds read of K"),
    ("q_row_past_tile", "plain", q_row_past_tile, "error",
     "out-of-bounds write of @Qs"),
    ("full_warp_ldmatrix", "plain", full_warp_ldmatrix, "error",
     "nvgpu.ldmatrix (ldmatrix.sync) needs all 32 lanes"),
]


def main(argv):
    fa_emulate = argv[1]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="fa2-mutations-") as tmp:
        for name, variant, mutate, expect, needle in MUTATIONS:
            c = fe.fa2_case("mut_" + name, "f16", variant, Nq=64, Nk=128)
            clean = fa2_kernel_gen.generate("f16", variant)
            mutated = mutate(clean)
            assert mutated != clean
            proc, paths = fe.run_fa2(fa_emulate, c, tmp, mutated)
            first = (proc.stderr.strip().split("\n") or [""])[0]
            if expect == "wrong":
                if proc.returncode != 0:
                    ok, why = False, "fa-emulate failed: " + \
                        proc.stderr.strip()[:1500]
                else:
                    good, summary = fe.check_output(c, paths)
                    ok, why = not good, summary
            else:
                left = os.path.exists(paths["o"])
                ok = proc.returncode != 0 and needle in proc.stderr and \
                    not left
                why = first if ok else ("left O behind" if left else
                                        proc.stderr.strip()[:1500] or
                                        "fa-emulate succeeded")
            failures += not ok
            print("%s %s (%s, expect %s): %s" % ("PASS" if ok else "FAIL",
                                                 name, variant, expect, why),
                  flush=True)
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
