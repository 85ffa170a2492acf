/* Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * This machine's limits, measured (issue 18): the benchmarks give every
 * CPU figure as a fraction of these, from the same run.
 *
 *   probes fma THREADS      f32 FMA peak, GFLOP/s: each thread runs ACC
 *                           independent chains of vector FMAs (enough to
 *                           cover the FMA latency times the FMA ports) on
 *                           the widest vectors (LANES: 16 with -mavx512f,
 *                           8 with -mavx2); 2 flops per lane per FMA.
 *   probes bf16dot THREADS  bf16 dot-product peak, GFLOP/s (built with
 *                           -mavx512bf16 only): chains of vdpbf16ps, each
 *                           2 multiplies and 2 adds per f32 lane (4 flops).
 *   probes read THREADS     read bandwidth, GB/s: each thread sums its part
 *                           of a 1 GiB buffer with vector adds.
 *
 * Each prints "<value> <unit>"; the best of several repetitions. Built and
 * run by bench_common.py's probe(). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

#ifndef LANES
#define LANES 16
#endif
/* Accumulators: enough chains to hide the FMA latency on two ports, few
 * enough to stay in registers (16 with AVX2, 32 with AVX-512). */
#define ACC (LANES == 16 ? 24 : 12)
typedef float vf __attribute__((vector_size(LANES * 4)));

static double fma_chains(long iters) {
  vf acc[ACC];
  vf a, b;
  for (int i = 0; i < LANES; ++i) {
    a[i] = 1.0f + 1e-7f * i;
    b[i] = 1e-7f;
  }
  for (int j = 0; j < ACC; ++j)
    acc[j] = b * (float)j;
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int j = 0; j < ACC; ++j)
      acc[j] = acc[j] * a + b;
  }
  float sum = 0;
  for (int j = 0; j < ACC; ++j)
    for (int i = 0; i < LANES; ++i)
      sum += acc[j][i];
  return sum;
}

#ifdef __AVX512BF16__
static double dot_chains(long iters) {
  __m512 acc[ACC];
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80); /* bf16 1.0 */
  __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380); /* bf16 ~6e-8 */
  for (int j = 0; j < ACC; ++j)
    acc[j] = _mm512_set1_ps((float)j);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int j = 0; j < ACC; ++j)
      acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  float sum = 0;
  for (int j = 0; j < ACC; ++j)
    sum += _mm512_reduce_add_ps(acc[j]);
  return sum;
}
#endif

/* GFLOP/s of `chains` over `threads` threads: flops per chain step per
 * accumulator is `flops`. */
static double peak(double (*chains)(long), int threads, double flops) {
  long iters = 50000000;
  double best = 0, sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += chains(iters);
    double s = omp_get_wtime() - t0;
    double gflops = flops * ACC * (double)iters * threads / s / 1e9;
    if (gflops > best)
      best = gflops;
  }
  if (sink == 12345.0)
    printf("(sink)\n");
  return best;
}

static double read_bandwidth(int threads) {
  size_t n = (size_t)1 << 28; /* 1 GiB of floats */
  float *x = aligned_alloc(64, n * sizeof(float));
  if (!x)
    return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < n; ++i)
    x[i] = 1.0f;
  double best = 0, sink = 0;
  for (int rep = 0; rep < 6; ++rep) {
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      size_t per = n / nt / (LANES * 4) * (LANES * 4);
      const vf *p = (const vf *)(x + per * t);
      vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
      for (size_t i = 0; i < per / LANES; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
      }
      vf s = s0 + s1 + s2 + s3;
      for (int i = 0; i < LANES; ++i)
        sink += s[i];
    }
    double sec = omp_get_wtime() - t0;
    double gbs = (double)n * sizeof(float) / sec / 1e9;
    if (gbs > best)
      best = gbs;
  }
  free(x);
  if (sink == 12345.0)
    printf("(sink)\n");
  return best;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: probes fma|bf16dot|read [THREADS]\n");
    return 2;
  }
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (!strcmp(argv[1], "fma")) {
    printf("%.1f GFLOP/s\n", peak(fma_chains, threads, 2.0 * LANES));
  } else if (!strcmp(argv[1], "bf16dot")) {
#ifdef __AVX512BF16__
    printf("%.1f GFLOP/s\n", peak(dot_chains, threads, 4.0 * 16));
#else
    fprintf(stderr, "probes: built without AVX512_BF16\n");
    return 1;
#endif
  } else if (!strcmp(argv[1], "read")) {
    printf("%.1f GB/s\n", read_bandwidth(threads));
  } else {
    fprintf(stderr, "probes: unknown probe '%s'\n", argv[1]);
    return 2;
  }
  return 0;
}
