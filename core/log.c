/* vx_log: formats into a stack buffer and writes it to stderr in one call;
 * no allocation and no stdio, so it is safe inside hooks and at exit. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { LOG_BUF = 1024, LOG_CAP = 1000 };

static int log_level = VX_LOG_WARN;
static unsigned log_count;
static __thread int log_busy __attribute__((tls_model("initial-exec")));

void vx_log_set_level(int level) {
  __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int vx_log_level(void) {
  return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

static void log_write(const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(STDERR_FILENO, buf, len);
    if (n <= 0) return;
    buf += n;
    len -= (size_t)n;
  }
}

const char *vx_size_text(unsigned long long bytes, char buf[VX_SIZE_TEXT]) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  unsigned long long whole = bytes, rem = 0;
  while (whole >= 1024 && u < 6) {
    rem = whole % 1024;
    whole /= 1024;
    u++;
  }
  unsigned tenth = (unsigned)((rem * 10 + 512) / 1024);
  if (tenth == 10) whole++, tenth = 0;
  if (tenth && whole < 100)
    snprintf(buf, VX_SIZE_TEXT, "%llu.%u %s", whole, tenth, units[u]);
  else
    snprintf(buf, VX_SIZE_TEXT, "%llu %s", whole, units[u]);
  return buf;
}

void vx_log(int level, const char *fmt, ...) {
  if (level > vx_log_level() || log_busy) return;
  if (__atomic_fetch_add(&log_count, 1, __ATOMIC_RELAXED) >= LOG_CAP && level > VX_LOG_ERROR)
    return;
  log_busy = 1;
  char buf[LOG_BUF];
  memcpy(buf, "vx: ", 4);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + 4, sizeof buf - 5, fmt, ap);
  va_end(ap);
  size_t len = 4 + (n < 0 ? 0 : (size_t)n > sizeof buf - 6 ? sizeof buf - 6 : (size_t)n);
  buf[len++] = '\n';
  log_write(buf, len);
  log_busy = 0;
}
