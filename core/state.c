/* The process-wide facts every layer reads: the options in effect (parsed
 * once by interpose/init.c) and the device of the calling thread's context. */
#include "driver.h"
#include "options.h"

vx_options_t vx_opt;
__thread int vx_tls_dev __attribute__((tls_model("initial-exec")));

int vx_current_device(int *dev) {
  CUdevice d;
  if (VX_CALL(cuCtxGetDevice, &d) != CUDA_SUCCESS) return -19; /* -ENODEV */
  vx_tls_dev = d;
  *dev = d;
  return 0;
}
