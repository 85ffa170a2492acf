/* FARuntime.h is plain C99. */
#include "fa/Runtime/FARuntime.h"

#include <stddef.h>

int run(fa_kernel *kernel, void *q, void *k, void *v, void *o) {
  int64_t qs[4] = {1, 8, 16, 64}, ks[4] = {1, 2, 16, 64};
  fa_tensor tq = fa_tensor_make(q, FA_DTYPE_F16, 4, qs);
  fa_tensor tk = fa_tensor_make(k, FA_DTYPE_F16, 4, ks);
  fa_tensor tv = fa_tensor_make(v, FA_DTYPE_F16, 4, ks);
  fa_tensor to = fa_tensor_make(o, FA_DTYPE_F16, 4, qs);
  fa_kernel_info info;
  if (fa_kernel_get_info(kernel, &info) != FA_SUCCESS)
    return 1;
  fa_status s = fa_attention_launch(kernel, &tq, &tk, &tv, NULL, NULL, &to,
                                    NULL, NULL);
  return s == FA_SUCCESS ? 0 : (int)fa_status_name(s)[0];
}
