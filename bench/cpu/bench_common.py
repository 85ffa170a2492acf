# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""What the CPU benchmarks share: the host description they print beside
their figures, this machine's measured limits (probes.c) and the timing of
one fa-run kernel."""

import functools
import os
import platform
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


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


def cpu_flags():
    return open("/proc/cpuinfo").read().split()


@functools.lru_cache(maxsize=None)
def _probes_exe():
    flags = cpu_flags()
    cflags = (["-mavx512f", "-mfma", "-DLANES=16"] if "avx512f" in flags else
              ["-mavx2", "-mfma", "-DLANES=8"])
    if "avx512_bf16" in flags:
        cflags.append("-mavx512bf16")
    exe = os.path.join(tempfile.mkdtemp(prefix="fa-probes-"), "probes")
    subprocess.run(["cc", "-O2", "-fopenmp"] + cflags +
                   [os.path.join(HERE, "probes.c"), "-o", exe], check=True)
    return exe


@functools.lru_cache(maxsize=None)
def probe(kind, threads):
    """This machine's limit, measured now by probes.c: 'fma' (f32 FMA peak,
    GFLOP/s), 'bf16dot' (vdpbf16ps peak, GFLOP/s; None without
    AVX512_BF16) or 'read' (read bandwidth, GB/s), on `threads` threads."""
    if kind == "bf16dot" and "avx512_bf16" not in cpu_flags():
        return None
    out = subprocess.run([_probes_exe(), kind, str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[0])


def vector_isa():
    flags = cpu_flags()
    return "AVX-512" if "avx512f" in flags else "AVX2"


def limits_line(threads):
    """One line naming the limits measured in this run."""
    parts = [f"f32 FMA peak {probe('fma', 1):.1f} GFLOP/s on 1 thread, "
             f"{probe('fma', threads):.1f} on {threads}"]
    bf = probe("bf16dot", 1)
    parts.append(f"bf16 dot peak {bf:.1f} GFLOP/s on 1 thread" if bf else
                 "no AVX512_BF16 (bf16 dot peak n/a)")
    parts.append(f"read bandwidth {probe('read', 1):.1f} GB/s on 1 thread, "
                 f"{probe('read', threads):.1f} on {threads}")
    return f"measured limits ({vector_isa()}): " + "; ".join(parts)
