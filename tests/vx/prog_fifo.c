/* prog_fifo: VX_REPORT and VX_TRACE naming a FIFO.  With no reader the program
 * must not hang (the ctest TIMEOUT catches the old blocking open) and must
 * exit with its own status, vx saying once why there is no report or trace.
 * A FIFO with a reader gets the report; the trace refuses a FIFO (it needs a
 * regular file to rewrite its header). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vxt.h"

#define WORKER_STATUS 7 /* the program's own exit status, kept whatever vx does */

static int worker(void) {
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr p;
  VXT_CU(cuInit(0));
  VXT_CU(cuDeviceGet(&dev, 0));
  VXT_CU(cuCtxCreate_v2(&ctx, 0, dev));
  VXT_CU(cuMemAlloc_v2(&p, 1 << 20));
  VXT_CU(cuMemsetD8_v2(p, 0x5a, 1 << 20));
  VXT_CU(cuMemFree_v2(p));
  VXT_CU(cuCtxDestroy_v2(ctx));
  printf("worker done\n");
  return WORKER_STATUS;
}

static vxt_run_t *run_with(const char *var, const char *path) {
  char kv[512];
  snprintf(kv, sizeof kv, "%s=%s", var, path);
  const char *env[] = {kv, "VX_STATS=0", NULL};
  vxt_run_t *r = malloc(sizeof *r);
  VXT_ASSERT(r && vxt_run(r, 1, env, NULL) == 0);
  VXT_ASSERT(r->status == WORKER_STATUS && strstr(r->out, "worker done"), "%s: status %d\n%s%s", kv,
             r->status, r->out, r->err);
  return r;
}

/* No reader: one line naming the variable, the path and the reason. */
static void no_reader(const char *var, const char *fifo) {
  vxt_run_t *r = run_with(var, fifo);
  char want[600];
  snprintf(want, sizeof want, "vx: %s=%s: ", var, fifo);
  VXT_ASSERT(vxt_count(r->err, want) == 1 && vxt_count(r->err, "a FIFO with no reader") == 1,
             "%s: want one line \"%s... a FIFO with no reader\":\n%s", var, want, r->err);
  printf("%s on a FIFO with no reader: exit %d, one line\n", var, r->status);
  free(r);
}

/* A reader is there (this process, the read end opened first). */
static void with_reader(const char *var, const char *fifo, int want_data) {
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  VXT_ASSERT(rd >= 0, "open %s: %s", fifo, strerror(errno));
  vxt_run_t *r = run_with(var, fifo);
  static char got[65536];
  ssize_t n = read(rd, got, sizeof got - 1);
  got[n > 0 ? n : 0] = '\0';
  close(rd);
  if (want_data) {
    VXT_ASSERT(strstr(got, "vx summary") && strstr(got, "device 0:"),
               "%s: the reader got %zd bytes: %.200s\nstderr: %s", var, n, got, r->err);
    VXT_ASSERT(!strstr(r->err, var), "%s: unexpected line: %s", var, r->err);
  } else {
    VXT_ASSERT(n <= 0, "%s: %zd bytes written into a FIFO", var, n);
    VXT_ASSERT(vxt_count(r->err, "a FIFO, not a regular file") == 1, "%s: %s", var, r->err);
  }
  printf("%s on a FIFO with a reader: %s\n", var, want_data ? "report read" : "refused, one line");
  free(r);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--worker")) return worker();
  if (!vxt_vx_preloaded()) {
    fprintf(stderr, "prog_fifo: needs LD_PRELOAD=libvx.so\n");
    return 77;
  }
  char fifo[256];
  vxt_tmpname(fifo, sizeof fifo, ".fifo");
  VXT_ASSERT(mkfifo(fifo, 0600) == 0, "mkfifo %s: %s", fifo, strerror(errno));
  no_reader("VX_REPORT", fifo);
  no_reader("VX_TRACE", fifo);
  with_reader("VX_REPORT", fifo, 1);
  with_reader("VX_TRACE", fifo, 0);
  struct stat st;
  VXT_ASSERT(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
  unlink(fifo);
  printf("prog_fifo: ok\n");
  return 0;
}
