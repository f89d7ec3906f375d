/* sim_variant.c: linked only into the driver-V variants of libcuda.so.1
 * (SIM_DRIVER_VARIANT=V): the release whose entry points they export. */
#include "sim_internal.h"

int sim_variant_version(void) {
  return SIM_DRIVER_VARIANT;
}
