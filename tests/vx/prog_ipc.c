/* vx_ipc: cuIpcGetMemHandle on an allocation vx placed beyond the device
 * budget (issue #12 point 9).  With vx's defaults the call fails with one
 * line naming the allocation and the way out; with VX_IPC=native the same
 * program gets a handle, and a second process opens it and reads the bytes. */
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "kit.h"
#include "vxt.h"

extern char **environ;

#define MB ((size_t)1 << 20)
#define BIG (128 * MB) /* over VX_DEVICE_LIMIT=64M */
#define N32 (BIG / 4)

/* The second process: opens the handle (hex), checks the pattern. */
static int opener(const char *hex) {
  CUipcMemHandle h;
  for (size_t i = 0; i < sizeof h.reserved; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    h.reserved[i] = (char)v;
  }
  CUcontext c;
  CUdeviceptr p;
  CHECK_CU(kit_init(0, &c));
  CHECK_CU(kit_module(NULL));
  CHECK_CU(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  unsigned long long bad = 1;
  CHECK_CU(kit_check(p, N32, 9, NULL, &bad));
  CHECK_CU(cuIpcCloseMemHandle(p));
  return bad ? 1 : 0;
}

static int spawn_opener(const CUipcMemHandle *h) {
  char hex[2 * sizeof h->reserved + 1];
  for (size_t i = 0; i < sizeof h->reserved; i++)
    sprintf(hex + 2 * i, "%02x", (unsigned char)h->reserved[i]);
  char *argv[] = {"prog_ipc", "--opener", hex, NULL};
  pid_t pid;
  int st;
  if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) return -1;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Prints "small=R big=R opened=S" (CUresults, the opener's status). */
static int worker(void) {
  CUcontext c;
  CHECK_CU(kit_init(0, &c));
  CHECK_CU(kit_module(NULL));
  CUdeviceptr small, big;
  CUipcMemHandle hs, hb;
  CHECK_CU(cuMemAlloc(&small, MB));
  CHECK_CU(cuMemAlloc(&big, BIG));
  CHECK_CU(kit_fill(big, N32, 9, NULL));
  CHECK_CU(cuCtxSynchronize());
  CUresult rs = cuIpcGetMemHandle(&hs, small);
  CUresult rb = cuIpcGetMemHandle(&hb, big);
  int opened = rb == CUDA_SUCCESS ? spawn_opener(&hb) : -1;
  printf("small=%d big=%d opened=%d\n", (int)rs, (int)rb, opened);
  fflush(stdout);
  CHECK_CU(cuMemFree(big));
  CHECK_CU(cuMemFree(small));
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--opener")) return opener(argv[2]);
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  static vxt_run_t r;
  const char *base[] = {"SIMCUDA_VRAM=512M", "VX_DEVICE_LIMIT=64M", "VX_IPC=", NULL};
  const char *args[] = {NULL};

  /* Defaults: the big allocation is managed; the call fails, and says so. */
  VXT_ASSERT(vxt_run(&r, 1, base, args) == 0);
  printf("defaults: %s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0, "worker status %d", r.status);
  VXT_ASSERT(strstr(r.out, "small=0 big=1 opened=-1"), "small native, big refused: %s", r.out);
  VXT_ASSERT(strstr(r.err, "vx: cuIpcGetMemHandle(") && strstr(r.err, "134217728 bytes") &&
                 strstr(r.err, "VX_IPC=native"),
             "no line naming the allocation and the way out: %s", r.err);

  /* The way out: kept native, the handle works in another process. */
  const char *native[] = {"SIMCUDA_VRAM=512M", "VX_DEVICE_LIMIT=64M", "VX_IPC=native", NULL};
  VXT_ASSERT(vxt_run(&r, 1, native, args) == 0);
  printf("VX_IPC=native: %s%s", r.out, r.err);
  VXT_ASSERT(r.status == 0 && strstr(r.out, "small=0 big=0 opened=0"), "IPC failed: %s%s", r.out,
             r.err);
  VXT_ASSERT(!strstr(r.err, "cuIpcGetMemHandle"), "unexpected message: %s", r.err);
  return 0;
}
