/* cli_faulter.c: a CUDA program for `vx stat`'s demand-migration test: it
 * allocates N buffers of M MiB (more than the device holds), fills them
 * with a kernel round after round, says "ready PID" after the first round,
 * and keeps going until stdin reaches EOF: managed pages fault in and are
 * evicted all along, which the simulator reports as demand migrations. */
#include <poll.h>
#include <unistd.h>

#include "kit.h"

/* 1 once stdin is at EOF (or gone), without waiting. */
static int stdin_done(void) {
  struct pollfd p = {STDIN_FILENO, POLLIN, 0};
  char b[64];
  if (poll(&p, 1, 0) <= 0) return 0;
  return read(STDIN_FILENO, b, sizeof b) <= 0;
}

/* usage: cli_faulter N MIB */
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 6;
  size_t bytes = (size_t)(argc > 2 ? atoi(argv[2]) : 32) << 20;
  CUdeviceptr buf[64];
  CUcontext ctx;
  CUmodule m;
  if (n < 1 || n > 64) return fprintf(stderr, "cli_faulter: bad N\n"), 2;
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  for (int i = 0; i < n; i++)
    CHECK_CU(kit_cu.cuMemAlloc_v2(&buf[i], bytes));
  for (uint32_t round = 0; round < 1000000 && !stdin_done(); round++) {
    for (int i = 0; i < n; i++)
      CHECK_CU(kit_fill(buf[i], bytes / 4, round + (uint32_t)i, NULL));
    CHECK_CU(kit_cu.cuCtxSynchronize());
    if (round == 0) {
      printf("ready %d\n", (int)getpid());
      fflush(stdout);
    }
  }
  for (int i = 0; i < n; i++)
    CHECK_CU(kit_cu.cuMemFree_v2(buf[i]));
  return 0;
}
