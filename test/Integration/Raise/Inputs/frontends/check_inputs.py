#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""For each generated input: does fa-opt parse it, does --fa-raise-attention
raise anything, and which dialects/ops does it contain.  Writes check_results.md."""
import glob, os, re, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
FA_OPT = os.environ.get("FA_OPT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..", "build", "bin", "fa-opt"))
UPSTREAM = {"linalg", "tensor", "arith", "math", "func", "builtin", "scf", "affine"}
rows = []
for f in sorted(glob.glob(os.path.join(HERE, "*.mlir"))):
    name = os.path.basename(f)[:-5]
    p = subprocess.run([FA_OPT, f], capture_output=True, text=True)
    parses = p.returncode == 0
    err = "" if parses else p.stderr.strip().splitlines()[0][:200]
    ops = {}
    for m in re.finditer(r"(?:=|^)\s*\"?([a-z_]+)\.([a-z_.]+)", open(f).read(), re.M):
        ops[m.group(1) + "." + m.group(2)] = ops.get(m.group(1) + "." + m.group(2), 0) + 1
    nonup = sorted({k.split(".")[0] for k in ops} - UPSTREAM)
    raised = "-"
    if parses:
        r = subprocess.run([FA_OPT, f, "--fa-raise-attention"], capture_output=True, text=True)
        if r.returncode != 0:
            raised = "pass error: " + r.stderr.strip().splitlines()[0][:150]
        else:
            na = len(re.findall(r"\bfa\.attention\b", r.stdout))
            ns = len(re.findall(r"\bfa\.softmax\b", r.stdout))
            raised = "yes (fa.attention x%d, fa.softmax x%d)" % (na, ns) if na + ns else "no"
    lin = {k: v for k, v in ops.items() if k.startswith(("linalg.", "tensor."))}
    rows.append((name, "yes" if parses else "NO: " + err, raised, ",".join(nonup) or "none",
                 " ".join("%s:%d" % kv for kv in sorted(lin.items()))))
out = ["| file | parses | raised | non-upstream dialects | linalg/tensor ops |", "|---|---|---|---|---|"]
out += ["| %s |" % " | ".join(r) for r in rows]
open(os.path.join(HERE, "check_results.md"), "w").write("\n".join(out) + "\n")
print("\n".join(out))
