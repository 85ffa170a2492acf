/* Calls a softmax artifact through its generated header (no runtime):
 * y = softmax(x) along the last dim of a 2 x 3 matrix. */
#include "sm.h"

#include <stdio.h>

int main(void) {
  float x[2][3] = {{0.0f, 1.0f, 2.0f}, {-1.0f, -1.0f, -1.0f}};
  float y[2][3];
  sm_x_desc xd = {&x[0][0], &x[0][0], 0, {2, 3}, {3, 1}};
  sm_y_desc yd = {&y[0][0], &y[0][0], 0, {2, 3}, {3, 1}};
  _mlir_ciface_fa_sm(&xd, &yd);
  for (int i = 0; i < 2; ++i)
    printf("row %d sum %f\n", i, y[i][0] + y[i][1] + y[i][2]);
  printf("y[0][1] / y[0][0] = %f\n", y[0][1] / y[0][0]);
  printf("y[1][2] = %f\n", y[1][2]);
  return 0;
}
