/* Helpers shared by the nvme tests: temporary directories, finding the swap
 * file through /proc, memcpy callbacks, seeds and the fault-injection plan. */
#ifndef VX_TESTS_NVME_UTIL_H
#define VX_TESTS_NVME_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nvme.h"
#include "nvme_seam.h"

/* A fresh 0700 directory under /tmp; tu_rmdir empties and removes it. */
char *tu_mkdtemp(void);
void tu_rmdir(char *dir);
/* Entries in dir other than . and .. */
int tu_dir_entries(const char *dir);
/* The descriptor of process pid whose link target starts with dir (the swap
 * file); copies the target into link.  -1 if none. */
int tu_find_fd(pid_t pid, const char *dir, char *link, size_t n);

/* Seed from NVME_TEST_SEED or the clock, printed so a failure can be rerun. */
unsigned tu_seed(const char *what);

/* Opens a swap; fatal on failure. */
nvme_swap_t *tu_open(const char *dir, nvme_engine_t e, uint32_t chunk, uint64_t limit, int qd);
/* The fallbacks this file system causes by itself (no O_DIRECT, no
 * O_TMPFILE), as a plain open in dir with engine e counts them. */
int tu_fs_fallbacks(const char *dir, nvme_engine_t e, int *direct, int *tmpfile);

/* Engine from argv[1] ("uring" or "pool"); exits 77 for "uring" when
 * io_uring cannot be set up here. */
nvme_engine_t tu_engine_arg(int argc, char **argv);

/* Log callback counting messages and keeping the last one. */
extern int tu_log_count;
extern char tu_log_last[256];
void tu_log(void *arg, const char *msg);

/* fill/drain for tests: c->arg is the chunk's own memory. */
int tu_fill(void *buf, const nvme_chunk_t *c, void *arg);
int tu_drain(const void *buf, const nvme_chunk_t *c, void *arg);
extern long tu_drains; /* drain calls (atomic) */

// ---- fault plan ----
enum { TU_WRITE = 1, TU_READ = 2, TU_SUBMIT = 4 };
enum { TU_ERR = 1, TU_SHORT = 2 };
typedef struct tu_fault {
  int ops;    /* TU_WRITE|TU_READ|TU_SUBMIT: which calls count */
  int mode;   /* TU_ERR (return -err) or TU_SHORT */
  int err;    /* e.g. EIO, ENOSPC */
  long nth;   /* first failing call, 1-based */
  long times; /* consecutive failing calls; -1 = every call from nth on */
  long calls; /* counted calls (atomic) */
  long hits;  /* injected failures (atomic) */
} tu_fault_t;
extern tu_fault_t tu_fault;
/* Installs the plan on the seam (pwrite, pread, uring_submit, uring_result). */
void tu_fault_arm(int ops, int mode, int err, long nth, long times);
void tu_fault_off(void);

#endif
