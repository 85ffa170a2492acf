/* A C client of libFARuntime from the standalone build: probes CUDA (no
 * driver here), loads a CPU softmax artifact and runs it. */
#include "fa/Runtime/FARuntime.h"

#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ARTIFACT.json\n", argv[0]);
    return 2;
  }
  int devices = -1;
  fa_status s = fa_cuda_available(&devices);
  printf("cuda: %s, %d devices\n", fa_status_name(s), devices);
  printf("why: %s\n", fa_last_error());

  fa_kernel *kernel = NULL;
  s = fa_kernel_load(argv[1], FA_DEVICE_CPU, &kernel);
  if (s != FA_SUCCESS) {
    printf("load: %s: %s\n", fa_status_name(s), fa_last_error());
    return 1;
  }
  fa_kernel_info info;
  fa_kernel_get_info(kernel, &info);
  printf("kernel %s: rank %d, dimension %d\n", info.name, (int)info.rank,
         (int)info.dimension);
  float x[6] = {0, 1, 2, 3, 3, 3}, y[6] = {0};
  int64_t sizes[2] = {2, 3};
  fa_tensor tx = fa_tensor_make(x, FA_DTYPE_F32, 2, sizes);
  fa_tensor ty = fa_tensor_make(y, FA_DTYPE_F32, 2, sizes);
  s = fa_softmax_launch(kernel, &tx, &ty, NULL);
  if (s != FA_SUCCESS) {
    printf("launch: %s: %s\n", fa_status_name(s), fa_last_error());
    return 1;
  }
  printf("row sums %.6f %.6f, y[1][2] = %.6f\n", y[0] + y[1] + y[2],
         y[3] + y[4] + y[5], y[5]);
  /* A mismatched tensor is refused with a message. */
  fa_tensor bad = fa_tensor_make(y, FA_DTYPE_F16, 2, sizes);
  s = fa_softmax_launch(kernel, &tx, &bad, NULL);
  printf("bad: %s: %s\n", fa_status_name(s), fa_last_error());
  fa_kernel_destroy(kernel);
  return 0;
}
