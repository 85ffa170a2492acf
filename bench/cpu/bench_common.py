# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""What the CPU benchmarks share: the host description they print beside
their figures and the timing of one fa-run kernel."""

import os
import platform
import re
import subprocess


def machine():
    """'<CPU model> (<widest vector ISA>), <n> CPUs'."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.*)", out).group(1).strip()
    except Exception:  # noqa: BLE001
        model = platform.processor()
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "?"
    return f"{model} ({isa}), {os.cpu_count()} CPUs"


def fa_run_ms(fa_run, args, threads, repeats, runs=10):
    """Best kernel time (ms) of `fa-run attention <args>` over `repeats`
    processes, each running the kernel `runs` times (--repeat) with
    OMP_NUM_THREADS=threads and --parallel; raises with fa-run's stderr on
    failure."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [fa_run, "attention"] + list(args) + [
        "--parallel", "--time", "--quiet", "--repeat", str(runs)]
    best = float("inf")
    for _ in range(repeats):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            raise RuntimeError(p.stderr)
        best = min(best, float(re.search(r"run: ([0-9.]+) ms",
                                         p.stderr).group(1)))
    return best
