# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The host description the CPU benchmarks print beside their figures."""

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
