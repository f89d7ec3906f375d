/* vx_fork: fork() under vx.  (a) vx started but CUDA not yet: the child
 * uses CUDA fully (native and managed memory, kernels, data verified).
 * (b) CUDA started in the parent while another thread allocates and frees
 * through vx: the child's CUDA calls get exactly the driver's own answers
 * (a driver is unusable in such a child) with no hang or crash, and the
 * parent carries on with its data intact. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vxt.h"

#define MB (1ULL << 20)

static void fill_verify(CUfunction fill, CUdeviceptr p, size_t bytes, uint32_t seed, int launch) {
  uint64_t words = bytes / 4;
  if (launch) {
    void *args[] = {&p, &words, &seed};
    VXT_CU(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    VXT_CU(cuCtxSynchronize());
  }
  uint32_t *h = malloc(bytes);
  VXT_CU(cuMemcpyDtoH_v2(h, p, bytes));
  for (uint64_t i = 0; i < words; i++)
    VXT_ASSERT(h[i] == vxt_pattern(i, seed), "word %llu", (unsigned long long)i);
  free(h);
}

/* Full CUDA use: 4M native + 24M managed (over the 16M limit), kernels. */
static void use_cuda(uint32_t seed) {
  vxt_api_t a;
  CUfunction fill, add, nop8;
  vxt_api_load(&a, "linked", 0);
  vxt_ctx(&a, 0);
  vxt_module(&a, &fill, &add, &nop8);
  CUdeviceptr nat, man;
  VXT_CU(cuMemAlloc_v2(&nat, 4 * MB));
  VXT_CU(cuMemAlloc_v2(&man, 24 * MB));
  fill_verify(fill, nat, 4 * MB, seed, 1);
  fill_verify(fill, man, 24 * MB, seed + 1, 1);
  VXT_CU(cuMemFree_v2(nat));
  VXT_CU(cuMemFree_v2(man));
}

static pid_t fork_child(void) {
  fflush(NULL);
  pid_t pid = fork();
  VXT_ASSERT(pid >= 0);
  if (pid == 0) alarm(10); /* a hang in the child fails the test instead of blocking it */
  return pid;
}

static int wait_child(pid_t pid) {
  int st;
  VXT_ASSERT(waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int stop;
static CUcontext parent_ctx;

static void *churn(void *arg) {
  (void)arg;
  VXT_CU(cuCtxSetCurrent(parent_ctx));
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    CUdeviceptr p;
    VXT_CU(cuMemAlloc_v2(&p, (size_t)(1 + rand() % 20) * MB));
    VXT_CU(cuMemFree_v2(p));
  }
  return NULL;
}

static int worker(void) {
  /* (a) vx is started (a lookup through it), CUDA is not */
  void *fn = NULL;
  VXT_CU(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, NULL));
  pid_t pid = fork_child();
  if (pid == 0) {
    use_cuda(31);
    printf("child a ok\n");
    exit(0);
  }
  VXT_ASSERT(wait_child(pid) == 0, "child (a) failed");
  /* (b) CUDA started here, a thread allocating through vx during fork() */
  use_cuda(41);
  CUdeviceptr keep;
  VXT_CU(cuCtxGetCurrent(&parent_ctx));
  VXT_CU(cuMemAlloc_v2(&keep, 24 * MB));
  CUfunction fill, add, nop8;
  vxt_api_t a;
  vxt_api_load(&a, "linked", 0);
  vxt_module(&a, &fill, &add, &nop8);
  fill_verify(fill, keep, 24 * MB, 51, 1);
  pthread_t t;
  VXT_ASSERT(pthread_create(&t, NULL, churn, NULL) == 0);
  for (int i = 0; i < 5; i++) {
    pid = fork_child();
    if (pid == 0) { /* the driver's own answers, whatever they are */
      CUdeviceptr p = 0;
      size_t f = 0, tot = 0;
      CUresult r1 = cuMemAlloc_v2(&p, 2 * MB), r2 = cuMemFree_v2(keep),
               r3 = cuMemGetInfo_v2(&f, &tot);
      printf("child b %d %d %d\n", (int)r1, (int)r2, (int)r3);
      fflush(stdout);
      /* _exit: the parent's other thread does not exist here, so what it
       * held on its stack at fork() is unreachable; LSan would call that a
       * leak at exit (it is the child's copy, gone with the process). */
      _exit(0);
    }
    VXT_ASSERT(wait_child(pid) == 0, "child (b) %d failed", i);
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  pthread_join(t, NULL);
  fill_verify(fill, keep, 24 * MB, 51, 0);
  VXT_CU(cuMemFree_v2(keep));
  printf("parent ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  VXT_ASSERT(vxt_vx_preloaded(), "run me with libvx.so in LD_PRELOAD");
  char report[256], env_report[300];
  vxt_tmpname(report, sizeof report, ".json");
  snprintf(env_report, sizeof env_report, "VX_REPORT=%s", report);
  const char *env[] = {"SIMCUDA_VRAM=64M", "VX_DEVICE_LIMIT=16M", env_report, NULL};
  static vxt_run_t plain, with;
  VXT_ASSERT(vxt_run(&plain, 0, env, NULL) == 0);
  VXT_ASSERT(plain.status == 0, "without vx: status %d\n%s%s", plain.status, plain.out, plain.err);
  VXT_ASSERT(vxt_run(&with, 1, env, NULL) == 0);
  VXT_ASSERT(with.status == 0 && strstr(with.out, "child a ok") && strstr(with.out, "parent ok"),
             "status %d\n%s%s", with.status, with.out, with.err);
  /* the children of (b) saw what they would have seen without vx */
  const char *pb = strstr(plain.out, "child b "), *wb = strstr(with.out, "child b ");
  VXT_ASSERT(pb && wb && !strncmp(pb, wb, strcspn(pb, "\n")), "child results differ:\n%s--\n%s",
             plain.out, with.out);
  char *json = vxt_read_file(report); /* the parent exits last and writes it */
  VXT_ASSERT(json);
  unlink(report);
  VXT_ASSERT(vxt_json_u64(json, -1, "tracked") == 0 && vxt_json_u64(json, 0, "native_bytes") == 0 &&
                 vxt_json_u64(json, 0, "managed_bytes") == 0 &&
                 vxt_json_u64(json, 0, "underflows") == 0,
             "%s", json);
  printf("fork: ok (%.*s)\n", (int)strcspn(wb, "\n"), wb);
  free(json);
  return 0;
}
