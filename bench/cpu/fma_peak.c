/* Part of the fa project, under the Apache License v2.0 with LLVM Exceptions.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * The machine's f32 FMA peak, measured: each thread runs independent chains
 * of vector FMAs (ACC accumulators, enough to cover the FMA latency times the
 * FMA ports) on the widest vectors of the host (LANES: 16 with -mavx512f, 8
 * with -mavx2, chosen by bench_backward.py) and
 * reports GFLOP/s (2 flops per lane per FMA). Usage: fma_peak THREADS
 * (built and run by bench_backward.py). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef LANES
#define LANES 16
#endif
/* Accumulators: enough chains to hide the FMA latency on two ports, few
 * enough to stay in registers (16 with AVX2, 32 with AVX-512). */
#define ACC (LANES == 16 ? 24 : 12)
typedef float vf __attribute__((vector_size(LANES * 4)));

static double run(long iters) {
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

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  long iters = 50000000;
  double best = 0, sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += run(iters);
    double s = omp_get_wtime() - t0;
    double gflops = 2.0 * LANES * ACC * (double)iters * threads / s / 1e9;
    if (gflops > best)
      best = gflops;
  }
  printf("%.1f GFLOP/s (sink %g)\n", best, sink);
  return 0;
}
