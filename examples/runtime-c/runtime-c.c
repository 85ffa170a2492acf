/* Loads a CPU softmax artifact (fa-compile --op softmax --rank 2 --dim -1
 * --dtype f32 --target cpu) with FARuntime's C API and runs it on a 2 x 3
 * tensor. */
#include "fa/Runtime/FARuntime.h"

#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s ARTIFACT.json\n", argv[0]);
    return 2;
  }
  fa_kernel *kernel = NULL;
  fa_status s = fa_kernel_load(argv[1], FA_DEVICE_CPU, &kernel);
  if (s != FA_SUCCESS) {
    printf("load: %s: %s\n", fa_status_name(s), fa_last_error());
    return 1;
  }
  float x[6] = {0, 1, 2, 3, 3, 3}, y[6] = {0};
  int64_t sizes[2] = {2, 3};
  fa_tensor tx = fa_tensor_make(x, FA_DTYPE_F32, 2, sizes);
  fa_tensor ty = fa_tensor_make(y, FA_DTYPE_F32, 2, sizes);
  s = fa_softmax_launch(kernel, &tx, &ty, NULL);
  printf("softmax: %s, row sums %.6f %.6f, y[1][2] = %.6f\n",
         fa_status_name(s), y[0] + y[1] + y[2], y[3] + y[4] + y[5], y[5]);
  fa_kernel_destroy(kernel);
  return s == FA_SUCCESS ? 0 : 1;
}
