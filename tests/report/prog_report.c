/* prog_report: an ordinary driver-API program for the exit-report tests: it
 * fills the device budget, then allocates over it from two named call sites
 * (report_site_alpha: 3 x 4 MiB, report_site_beta: 2 x 8 MiB), runs kernels
 * over everything for about REPORT_APP_MS (default 1000) ms, frees beta's
 * buffers and exits.  Run with SIMCUDA_VRAM=64M VX_RESERVE=0
 * VX_DEVICE_LIMIT=8M; `prog_report fork` also forks a child that moves to
 * child/ (so a relative VX_REPORT lands there), sleeps 200 ms without CUDA
 * (a child of a CUDA process cannot use it) and exits; the parent waits. */
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kit.h"

#define MB ((size_t)1 << 20)
#define NBUF 6

static CUdeviceptr buf[NBUF];
static size_t len[NBUF];
static int nbuf;

/* Exported (the program links with -rdynamic) so dladdr names them. */
__attribute__((noinline, used)) void report_site_alpha(size_t n, size_t bytes) {
  for (size_t i = 0; i < n; i++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&buf[nbuf], bytes));
    len[nbuf++] = bytes;
  }
  __asm__ volatile("" ::: "memory"); /* no tail call: keep this frame */
}

__attribute__((noinline, used)) void report_site_beta(size_t n, size_t bytes) {
  for (size_t i = 0; i < n; i++) {
    CHECK_CU(kit_cu.cuMemAlloc_v2(&buf[nbuf], bytes));
    len[nbuf++] = bytes;
  }
  __asm__ volatile("" ::: "memory");
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void run_kernels(double ms) {
  double end = now_ms() + ms;
  for (uint32_t round = 0; round < 100000 && now_ms() < end; round++) {
    for (int k = 0; k < nbuf; k++)
      CHECK_CU(kit_fill(buf[k], len[k] / 4, round + (uint32_t)k, NULL));
    for (int k = 0; k < nbuf; k++) {
      unsigned long long bad = 0;
      CHECK_CU(kit_check(buf[k], len[k] / 4, round + (uint32_t)k, NULL, &bad));
      if (bad) {
        fprintf(stderr, "FAIL: buffer %d: %llu words wrong\n", k, bad);
        exit(1);
      }
    }
  }
}

static void child(void) {
  if (chdir("child")) {
    perror("chdir child");
    exit(1);
  }
  usleep(200 * 1000);
  /* A child that makes a CUDA call (one that is legal after fork) writes
   * its own report; one that makes none writes none (#14). */

  size_t total;
  if (getenv("REPORT_APP_CHILD_CUDA")) kit_cu.cuDeviceTotalMem_v2(&total, 0);
  exit(0); /* runs the destructors */
}

int main(int argc, char **argv) {
  CUcontext ctx;
  CUmodule m;
  CUdeviceptr fill;
  const char *ms = getenv("REPORT_APP_MS");
  CHECK_CU(kit_init(0, &ctx));
  CHECK_CU(kit_module(&m));
  CHECK_CU(kit_cu.cuMemAlloc_v2(&fill, 8 * MB)); /* the whole budget: the rest spills */
  report_site_alpha(3, 4 * MB);
  report_site_beta(2, 8 * MB);
  if (argc > 1 && !strcmp(argv[1], "fork")) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) child();
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
      fprintf(stderr, "FAIL: child status %d\n", st);
      return 1;
    }
  }
  run_kernels(ms ? atof(ms) : 1000);
  for (int k = 3; k < 5; k++) /* beta's buffers */
    CHECK_CU(kit_cu.cuMemFree_v2(buf[k]));
  printf("prog_report: %d buffers, ok\n", nbuf);
  return 0;
}
