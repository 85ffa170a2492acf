#!/usr/bin/env python3
# Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""CPU side by side (issue 6): our fused attention and softmax kernels through
`fa-run`, against the unfused NumPy reference (S materialized, the two matmuls
through the BLAS NumPy links against, softmax in NumPy), PyTorch's CPU
`scaled_dot_product_attention` when `import torch` works, and `fa-run
--reference` (our naive lowering, which materializes S) for small N.

Every configuration is f32, B = 1, random normal inputs generated once; every
output of ours is checked against a float64 NumPy reference (relative
Frobenius error < 1e-4) and the run aborts on a mismatch. Times are the best
of --repeats runs (one run from --big-n on); `fa-run` times are its own
`--time` figures (kernel run only; compile reported separately), NumPy and
torch times cover the compute only. GFLOP/s counts 4*B*H*N*N*D, halved for
causal. Peak memory: the maximum resident set size of the `fa-run` process
(/usr/bin/time -v; it includes the JIT's libMLIR/libLLVM and the .npy
buffers), and for NumPy the peak of its allocations during one call
(tracemalloc) next to the bytes S needs.

Usage:
  bench_attention.py FA_RUN [--n 512 1024 2048 4096] [--d 64 128]
      [--causal none bottom-right] [--heads 8] [--repeats 3] [--out results.md]

Benchmarks are not tests: this is not run by check-fa.
"""

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc


def _blas_threads_from_argv():
    # Thread counts must be in the environment before NumPy loads its BLAS.
    for i, a in enumerate(sys.argv):
        if a == "--blas-threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--blas-threads="):
            return a.split("=", 1)[1]
    return None


if _blas_threads_from_argv():
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        os.environ[_var] = _blas_threads_from_argv()

import numpy as np  # noqa: E402

TOL = 1e-4


def blas_libraries():
    """The BLAS/LAPACK shared objects mapped into this process by NumPy."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if re.search(r"blas|lapack|mkl|blis", os.path.basename(path), re.I):
                    libs.add(path)
    except OSError:
        pass
    return sorted(libs)


def blas_description():
    libs = blas_libraries()
    names = [os.path.basename(p) for p in libs if re.search(r"blas|mkl|blis", os.path.basename(p), re.I)]
    # Debian's libblas.so.3 is an alternatives link: resolve it.
    real = sorted({os.path.realpath(p) for p in libs if "blas" in p.lower()})
    return f"NumPy {np.__version__}; BLAS mapped: {', '.join(names) or 'unknown'}" + (
        f" (-> {', '.join(real)})" if real else "")


def machine_description():
    model, cores = platform.processor() or "unknown", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", out)
        model = m.group(1).strip() if m else model
        flags = re.search(r"Flags:\s*(.+)", out)
        simd = [f for f in ("avx2", "avx512f") if flags and f in flags.group(1).split()]
    except OSError:
        simd = []
    return f"{model}, {cores} CPUs" + (f", {'/'.join(simd)}" if simd else "")


def best_time(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def rel_err(x, ref):
    return float(np.linalg.norm(x.astype(np.float64) - ref) / np.linalg.norm(ref))


def check(what, x, ref):
    err = rel_err(x, ref)
    if not np.isfinite(err) or err >= TOL:
        sys.exit(f"MISMATCH: {what}: relative error {err:.2e} >= {TOL:g}")
    return err


# ---------------------------------------------------------------- attention

def causal_keep(n):
    # bottom-right with Nq == Nk is the same as top-left: key j <= query i.
    return np.tri(n, n, dtype=bool)


def reference_f64(q, k, v, causal):
    """float64 reference, one head at a time. q, k, v: [H, N, D]."""
    h, n, d = q.shape
    out = np.empty((h, n, v.shape[-1]), np.float64)
    keep = causal_keep(n) if causal else None
    for i in range(h):
        s = (q[i].astype(np.float64) @ k[i].astype(np.float64).T) / np.sqrt(d)
        if keep is not None:
            s[~keep] = -np.inf
        s -= s.max(-1, keepdims=True)
        np.exp(s, out=s)
        out[i] = (s @ v[i].astype(np.float64)) / s.sum(-1, keepdims=True)
    return out


def numpy_unfused(q, k, v, scale, bias):
    """The unfused float32 reference: S = Q K^T * scale (BLAS), mask, row
    softmax, @ V (BLAS). q, k, v: [H, N, D]; bias: additive [N, N] or None."""
    s = np.matmul(q, k.transpose(0, 2, 1))
    s *= scale
    if bias is not None:
        s += bias
    s -= s.max(-1, keepdims=True)
    np.exp(s, out=s)
    l = s.sum(-1, keepdims=True)
    o = np.matmul(s, v)
    o /= l
    return o


def run_fa(cmd, out_path, repeats):
    """Runs fa-run `repeats` times under /usr/bin/time -v; returns
    (best run ms, compile ms of that run, peak RSS MiB, output)."""
    best = None
    peak = 0
    for _ in range(repeats):
        if os.path.exists(out_path):
            os.remove(out_path)
        proc = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stderr)
            sys.exit(f"FAILED: {' '.join(cmd)}")
        t = re.search(r"compile: ([\d.]+) ms, run: ([\d.]+) ms", proc.stderr)
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        peak = max(peak, int(rss.group(1)) / 1024 if rss else 0)
        run_ms, comp_ms = float(t.group(2)), float(t.group(1))
        if best is None or run_ms < best[0]:
            best = (run_ms, comp_ms)
    return best[0], best[1], peak, np.load(out_path)


def try_torch():
    try:
        import torch  # noqa: F401
        import torch.nn.functional as F  # noqa: F401
        return torch
    except Exception as e:  # ImportError, or a broken install
        return str(e).splitlines()[0] if str(e) else type(e).__name__


def fmt_ms(ms, gflop):
    if ms is None:
        return "—"
    return f"{ms:,.1f} ({gflop / ms * 1e3:.2f})"


def fmt_ratio(ours, peer):
    return "—" if ours is None or peer is None else f"{peer / ours:.2f}×"


def bench_attention(args, tmp, torch, log):
    rows = []
    for d in args.d:
        for n in args.n:
            for causal in args.causal:
                is_causal = causal != "none"
                h = args.heads
                reps = 1 if n >= args.big_n else args.repeats
                gflop = 4 * h * n * n * d / 1e9 / (2 if is_causal else 1)
                rng = np.random.default_rng(1000 * n + d)
                q, k, v = (rng.standard_normal((1, h, n, d), dtype=np.float32) for _ in range(3))
                paths = {x: os.path.join(tmp, x + ".npy") for x in "qkvo"}
                for x, a in zip("qkv", (q, k, v)):
                    np.save(paths[x], a)
                ref = reference_f64(q[0], k[0], v[0], is_causal)
                scale = np.float32(1 / np.sqrt(d))
                r = dict(n=n, d=d, causal=causal, gflop=gflop, reps=reps)

                base = [args.fa_run, "attention", "--q", paths["q"], "--k", paths["k"], "--v",
                        paths["v"], "-o", paths["o"], "--causal", causal, "--time", "--quiet"]
                for key, extra in (("tiled", []), ("promoted", ["--promoted"]),
                                   ("reference", ["--reference"])):
                    if key == "reference" and n > args.ref_max_n:
                        r[key] = None
                        continue
                    ms, comp, rss, o = run_fa(base + extra, paths["o"], reps)
                    err = check(f"fa-run {key} N={n} D={d} causal={causal}", o[0], ref)
                    r[key], r[key + "_compile"], r[key + "_rss"], r[key + "_err"] = ms, comp, rss, err

                bias = None
                if is_causal:
                    bias = np.where(causal_keep(n), 0, -np.inf).astype(np.float32)
                qh, kh, vh = q[0], k[0], v[0]
                o = numpy_unfused(qh, kh, vh, scale, bias)  # warm-up, and checked
                r["numpy_err"] = check(f"numpy unfused N={n} D={d}", o, ref)
                # NumPy is cheap next to ours: at least 5 runs against scheduling noise.
                r["numpy"] = best_time(lambda: numpy_unfused(qh, kh, vh, scale, bias), max(reps, 5))
                tracemalloc.start()
                numpy_unfused(qh, kh, vh, scale, bias)
                r["numpy_peak"] = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
                r["s_mib"] = h * n * n * 4 / 2**20

                r["torch"] = None
                if not isinstance(torch, str):
                    import torch.nn.functional as F
                    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
                    with torch.no_grad():
                        fn = lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal)
                        to = fn().numpy()
                        check(f"torch SDPA N={n} D={d}", to[0], ref)
                        r["torch"] = best_time(fn, max(reps, 5))

                rows.append(r)
                ours = min(r["tiled"], r["promoted"])
                log(f"N={n:5d} D={d:3d} causal={causal:12s} {gflop:6.2f} GFLOP  tiled {r['tiled']:9.1f} ms"
                    f"  promoted {r['promoted']:9.1f} ms  numpy {r['numpy']:9.1f} ms"
                    + (f"  torch {r['torch']:8.1f} ms" if r["torch"] else "")
                    + (f"  fa-ref {r['reference']:9.1f} ms" if r["reference"] else "")
                    + f"  ours/numpy {r['numpy'] / ours:.2f}x")
    return rows


def attention_table(rows, torch_ok):
    head = ["N", "D", "causal", "GFLOP", "tiled ms (GFLOP/s)", "promoted ms (GFLOP/s)",
            "NumPy unfused ms (GFLOP/s)"]
    if torch_ok:
        head.append("torch SDPA ms (GFLOP/s)")
    head += ["fa `--reference` ms (GFLOP/s)", "ours vs NumPy"]
    if torch_ok:
        head.append("ours vs torch")
    head += ["ours vs `--reference`", "compile ms (tiled / promoted)",
             "peak RSS MiB (tiled / promoted)", "NumPy peak alloc MiB (S alone)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ours = min(r["tiled"], r["promoted"])
        cells = [f"{r['n']}", f"{r['d']}", r["causal"], f"{r['gflop']:.2f}",
                 fmt_ms(r["tiled"], r["gflop"]), fmt_ms(r["promoted"], r["gflop"]),
                 fmt_ms(r["numpy"], r["gflop"])]
        if torch_ok:
            cells.append(fmt_ms(r["torch"], r["gflop"]))
        cells += [fmt_ms(r["reference"], r["gflop"]), fmt_ratio(ours, r["numpy"])]
        if torch_ok:
            cells.append(fmt_ratio(ours, r["torch"]))
        cells += [fmt_ratio(ours, r["reference"]),
                  f"{r['tiled_compile']:.0f} / {r['promoted_compile']:.0f}",
                  f"{r['tiled_rss']:.0f} / {r['promoted_rss']:.0f}",
                  f"{r['numpy_peak']:.0f} ({r['s_mib']:.0f})"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------- sgemm

SGEMM_CODE = """
import sys, time, numpy as np
n, reps = int(sys.argv[1]), int(sys.argv[2])
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
c = a @ b
best = float('inf')
for _ in range(reps):
    t = time.perf_counter(); np.matmul(a, b, out=c); best = min(best, time.perf_counter() - t)
print(2 * n**3 / best / 1e9)
"""


def sgemm_gflops(n, threads=None):
    env = dict(os.environ)
    if threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
            env[var] = str(threads)
    out = subprocess.run([sys.executable, "-c", SGEMM_CODE, str(n), "3"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(out)


# ---------------------------------------------------------------- softmax

def bench_softmax(args, tmp, log):
    shape = tuple(args.softmax_shape)
    rng = np.random.default_rng(42)
    x = rng.standard_normal(shape, dtype=np.float32) * 4
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    del x64
    gbytes = 2 * x.nbytes / 1e9  # one read and one write: the minimum traffic
    res = {}
    base = [args.fa_run, "softmax", "--x", xp, "-o", yp, "--time", "--quiet"]
    for key, extra in (("online", []), ("reference", ["--reference"])):
        ms, comp, rss, y = run_fa(base + extra, yp, args.softmax_repeats)
        if key == "online":
            err = check(f"fa-run softmax {key}", y, ref)
        else:
            # The three-sweep reference lowering is the baseline here, not a
            # kernel of ours under test: report its error, do not abort (its
            # row sums accumulate sequentially in f32: ~1e-3 over 1M elements).
            err = rel_err(y, ref)
            if not err < TOL:
                log(f"note: fa-run softmax --reference: relative error {err:.2e} >= {TOL:g}")
        res[key] = (ms, comp, rss, err)

    buf = np.empty_like(x)

    def three_sweep():
        m = x.max(-1, keepdims=True)          # sweep 1: max
        np.subtract(x, m, out=buf)            # sweep 2: exp(x - m), sum
        np.exp(buf, out=buf)
        s = buf.sum(-1, keepdims=True)
        np.divide(buf, s, out=buf)            # sweep 3: normalize
        return buf

    np_err = check("numpy three-sweep softmax", three_sweep(), ref)
    res["numpy"] = (best_time(three_sweep, args.softmax_repeats), None, None, np_err)
    lines = ["| softmax over rows of " + f"{shape[-1]:,}" + f" f32, shape {list(shape)} | run ms | GB/s (2 × {x.nbytes / 2**20:.0f} MiB) | online vs this | rel. error vs float64 |",
             "|---|---|---|---|---|"]
    online = res["online"][0]
    for key, label in (("online", "`fa-run softmax` (tiled online: max and sum in one sweep, then normalize)"),
                       ("reference", "`fa-run softmax --reference` (three-sweep safe softmax, same codegen)"),
                       ("numpy", "NumPy three-sweep (max; exp(x − m) and sum; divide)")):
        ms = res[key][0]
        lines.append(f"| {label} | {ms:.1f} | {gbytes / ms * 1e3:.1f} | {ms / online:.2f}× | {res[key][3]:.1e} |")
    log(f"softmax {list(shape)}: online {online:.1f} ms, fa --reference {res['reference'][0]:.1f} ms, "
        f"numpy {res['numpy'][0]:.1f} ms")
    return res, lines


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fa_run")
    ap.add_argument("--n", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--causal", nargs="+", default=["none", "bottom-right"],
                    choices=["none", "top-left", "bottom-right"])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--big-n", type=int, default=2048, help="one repeat from this N on")
    ap.add_argument("--ref-max-n", type=int, default=1024,
                    help="largest N for fa-run --reference (it materializes S)")
    ap.add_argument("--sgemm-n", type=int, default=2048)
    ap.add_argument("--softmax-shape", type=int, nargs="+", default=[8, 1 << 20])
    ap.add_argument("--softmax-repeats", type=int, default=5)
    ap.add_argument("--no-softmax", action="store_true")
    ap.add_argument("--blas-threads", type=int,
                    help="threads for NumPy's BLAS (default: the BLAS's own default)")
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t0 = time.time()
    torch = try_torch()
    torch_ok = not isinstance(torch, str)
    torch_desc = (f"torch {torch.__version__}, {torch.get_num_threads()} threads" if torch_ok
                  else f"not installed for {sys.executable} ({torch})")
    blas = blas_description() + (f", {args.blas_threads} BLAS thread(s)" if args.blas_threads
                                 else ", BLAS threads: its default")
    log(f"{machine_description()}\n{blas}\ntorch: {torch_desc}")

    sg = sgemm_gflops(args.sgemm_n)
    sg1 = sgemm_gflops(args.sgemm_n, threads=1)
    log(f"sgemm {args.sgemm_n}: {sg:.1f} GFLOP/s (this run's threads), {sg1:.1f} GFLOP/s (1 thread)")

    with tempfile.TemporaryDirectory(prefix="fa-bench-") as tmp:
        rows = bench_attention(args, tmp, torch, log)
        sm = None if args.no_softmax else bench_softmax(args, tmp, log)

    out = [f"Machine: {machine_description()}; {platform.system()} {platform.release()}.",
           f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
           f"Python {platform.python_version()} ({sys.executable}); {blas}.",
           f"PyTorch: {torch_desc}.",
           f"Square sgemm (NumPy float32 {args.sgemm_n}×{args.sgemm_n} matmul, best of 3): "
           f"**{sg:.1f} GFLOP/s** with this run's BLAS threads ({args.blas_threads or 'the BLAS default'}), "
           f"{sg1:.1f} GFLOP/s on one thread.",
           "",
           f"Attention, f32, B = 1, H = {args.heads}; time in ms (GFLOP/s in parentheses), best of "
           f"{args.repeats} (ours: 1 from N = {args.big_n}; NumPy at least 5); \"ours\" is the faster of tiled and promoted, "
           "a ratio above 1× means ours is faster. Every output of ours is within "
           f"{TOL:g} (relative) of a float64 reference.",
           ""]
    out += attention_table(rows, torch_ok)

    # issue-6 targets, at the target configuration where it was measured.
    tgt = [r for r in rows if r["d"] == 128 and r["causal"] == "none"]
    tgt = max(tgt, key=lambda r: r["n"]) if tgt else None
    out += ["", "Issue-6 targets (measured in this run):", ""]
    if tgt:
        ours = min(tgt["tiled"], tgt["promoted"])
        gf = tgt["gflop"] / ours * 1e3
        cz = [r for r in rows if r["d"] == 128 and r["n"] == tgt["n"] and r["causal"] != "none"]
        out.append(f"- at N = {tgt['n']}, D = 128, H = {args.heads}, non-causal: ours vs unfused NumPy/BLAS "
                   f"**{tgt['numpy'] / ours:.2f}×** (target ≥ 1.5×); "
                   f"ours at {gf:.2f} GFLOP/s = **{100 * gf / sg:.1f}%** of sgemm's {sg:.1f} GFLOP/s (target ≥ 40%)"
                   + (f"; vs torch SDPA {tgt['torch'] / ours:.2f}×" if tgt["torch"] else "; torch SDPA not measured"))
        if cz:
            c = cz[0]
            out.append(f"- causal speed-up at N = {tgt['n']}, D = 128: tiled {tgt['tiled'] / c['tiled']:.2f}×, "
                       f"promoted {tgt['promoted'] / c['promoted']:.2f}× faster than non-causal (target ≥ 1.8×)")
    if sm:
        res = sm[0]
        out.append(f"- online softmax vs three-sweep (target ≥ 1.25×): vs `fa-run softmax --reference` (the "
                   f"three-sweep decomposition, same codegen) **{res['reference'][0] / res['online'][0]:.2f}×**, "
                   f"vs NumPy three-sweep {res['numpy'][0] / res['online'][0]:.2f}×")
        out += ["", "Softmax (best of %d):" % args.softmax_repeats, ""] + sm[1]
    out += ["", f"Sweep wall time: {time.time() - t0:.0f} s."]
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
