/* fuzz_report.c: libFuzzer target for `vx report`: a JSON report file interpreted
 * (tools/report_load.c) and drawn as SVG (tools/svg.c).  Any input loads or is refused; a loaded
 * one renders. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli_report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  static FILE *sink;
  static char path[64];
  if (fd < 0) { /* one in-memory file, rewritten per input */
    fd = memfd_create("fuzz-report", MFD_CLOEXEC);
    sink = fopen("/dev/null", "w");
    if (fd < 0 || !sink) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  vx_report_t r;
  char err[256] = "";
  if (vx_report_load(path, &r, err, sizeof err) == 0) {
    for (size_t i = 1; i < r.nsamples; i++)
      if (r.samples[i].t < r.samples[i - 1].t) __builtin_trap(); /* forward in time */
    char stack[512];
    for (size_t i = 0; i < r.nsites; i++)
      vx_site_stack(&r.sites[i], stack, sizeof stack);
    vx_report_svg(&r, sink);
    vx_report_free(&r);
  } else if (!err[0]) {
    __builtin_trap(); /* a refusal says why */
  }
  return 0;
}
