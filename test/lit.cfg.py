# -*- Python -*-
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".py"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "Inputs", "lib"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fa_obj_root, "test")

# A test that hangs (a kernel mutated into an endless loop, a tool waiting
# on input) fails after this many seconds instead of stalling the suite;
# the slowest takes about two and a half minutes on two cores. lit needs psutil
# for it (python3-psutil, installed by .ci/bootstrap); without it the
# suite runs with no limit.
try:
    import psutil  # noqa: F401
    lit_config.maxIndividualTestTime = 600
except ImportError:
    lit_config.note("python3-psutil is missing: no per-test time limit")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%fa_src_root", config.fa_src_root))
config.substitutions.append(("%fa_obj_root", config.fa_obj_root))
# x86-64 hosts: fa-compile's named x86 CPUs (--cpu x86-64-v3, znver5, ...)
# record the features the host's detection knows.
import platform
if platform.machine() in ("x86_64", "AMD64"):
    config.available_features.add("x86_64-host")
# avx512bf16: the host runs vdpbf16ps (fa-run's bf16 dot-product kernel is
# then the default for bf16 inputs). Tests of that kernel's numerics need
# it; its IR and objects are checked everywhere.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                if {"avx512f", "avx512_bf16"} <= flags:
                    config.available_features.add("avx512bf16")
                break
except OSError:
    pass

# %python_runtime: the Python that loads the build's libFARuntime.so through
# ctypes. In a sanitizer build (FA_ENABLE_SANITIZERS, .ci/sanitize) that
# library needs the ASan and UBSan runtimes loaded first, and Python's own
# allocations are not fa's leaks. First in the list: %python, a prefix of
# it, is already there (use_default_substitutions).
python_runtime = config.python_executable
if config.fa_sanitizers:
    import subprocess
    config.available_features.add("asan")
    preload = [
        subprocess.check_output([config.cxx_compiler, "-print-file-name=" + lib],
                                text=True).strip()
        for lib in ("libasan.so", "libubsan.so")
    ]
    asan_options = os.environ.get("ASAN_OPTIONS", "")
    python_runtime = "env LD_PRELOAD=%s ASAN_OPTIONS=%s %s" % (
        ":".join(preload), (asan_options + ":" if asan_options else "") +
        "detect_leaks=0", config.python_executable)
config.substitutions.insert(0, ("%python_runtime", python_runtime))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%fa_run", os.path.join(config.fa_tools_dir, "fa-run")))

config.substitutions.append(("%fa_opt", os.path.join(config.fa_tools_dir, "fa-opt")))
config.substitutions.append(("%fa_emulate", os.path.join(config.fa_tools_dir, "fa-emulate")))

# ptxas (CUDA toolkit) assembles the PTX the GPU path emits; tests that need
# it are skipped where it is absent.
import shutil
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

tool_dirs = [config.fa_tools_dir, config.llvm_tools_dir]
tools = ["fa-opt", "fa-run", "fa-compile", "fa-emulate", "fa-capi-test", "mlir-opt",
         "mlir-translate"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.fa_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
