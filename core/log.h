/* vx_log: the one message printer.  Prefix "vx: ", stack buffer, no
 * allocation, thread-local re-entry guard, level from VX_LOG, capped count. */
#ifndef VX_INTERPOSE_LOG_H
#define VX_INTERPOSE_LOG_H

/* The levels VX_LOG_ERROR < WARN < INFO < DEBUG are VX_LOG's choices
 * (choices.def), so the option's value is the level. */
#include "options.h"

/* Messages above `level` are dropped.  Default VX_LOG_WARN. */
void vx_log_set_level(int level);
int vx_log_level(void);
/* Prints "vx: <message>\n" on stderr with one write(2).  Safe from any
 * thread and from inside hooks; a call from inside a vx_log (a signal
 * handler, a hook reached while formatting) is dropped.  After 1000
 * messages only errors are printed. */
void vx_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* bytes in words for a message: "0 B", "512 B", "64 MiB", "1.5 GiB"
 * (binary units, at most one decimal); buf is returned. */
#define VX_SIZE_TEXT 24
const char *vx_size_text(unsigned long long bytes, char buf[VX_SIZE_TEXT]);

/* Says it once per call site and process. */
#define VX_LOG_ONCE(level, ...)                                                                    \
  do {                                                                                             \
    static int vx_once_;                                                                           \
    if (!__atomic_exchange_n(&vx_once_, 1, __ATOMIC_RELAXED)) vx_log(level, __VA_ARGS__);          \
  } while (0)

#endif
