/* nvme internals shared by its files: the swap object, the slot table, and
 * the one interface over both I/O engines (io_uring, thread pool). */
#ifndef VX_NVME_INT_H
#define VX_NVME_INT_H

#include <pthread.h>
#include <stdint.h>

#include "nvme.h"
#include "nvme_seam.h"

// ---- engines ----

/* One I/O request; tag comes back in its completion. */
typedef struct nvme_io {
  void *buf;
  uint64_t off;
  uint32_t len;
  int buf_index; /* registered-buffer index, or -1 */
  int write;
  uint64_t tag;
} nvme_io_t;

typedef struct nvme_cqe {
  uint64_t tag;
  int res; /* bytes transferred or -errno */
} nvme_cqe_t;

typedef struct nvme_eng nvme_eng_t;

/* queue: adds one request (not yet started); submit: starts every queued
 * request (a request that cannot be started completes with the error);
 * reap: up to max completions, blocking for one when wait is set and some
 * request is outstanding; returns the count or -errno.  reg_bufs: 0 when the
 * buffers are registered (then nvme_io.buf_index is honoured). */
typedef struct nvme_eng_ops {
  int (*queue)(nvme_eng_t *e, const nvme_io_t *io);
  int (*submit)(nvme_eng_t *e);
  int (*reap)(nvme_eng_t *e, nvme_cqe_t *out, int max, int wait);
  int (*reg_bufs)(nvme_eng_t *e, void **bufs, int n, size_t size);
  void (*unreg_bufs)(nvme_eng_t *e);
  void (*fini)(nvme_eng_t *e);
  /* In a forked child: drop what the child holds (descriptors, mappings),
   * touching no thread or lock of the parent's. */
  void (*abandon)(nvme_eng_t *e);
} nvme_eng_ops_t;

struct nvme_eng {
  const nvme_eng_ops_t *ops;
  nvme_swap_t *swap; /* for messages and counters */
};

/* Both return 0 and set *out, or -errno. */
int nvme_uring_init(nvme_swap_t *s, int fd, int qd, nvme_eng_t **out);
int nvme_pool_init(nvme_swap_t *s, int fd, int qd, int threads, nvme_eng_t **out);

// ---- slots ----

enum { SLOT_FREE = 0, SLOT_WRITING, SLOT_VALID };

typedef struct nvme_slot {
  uint32_t len;
  uint32_t crc;
  uint8_t state;
} nvme_slot_t;

typedef struct nvme_slots {
  nvme_slot_t *tab; /* nfile entries */
  int32_t *free;    /* stack of freed slots below hwm */
  uint32_t nfree;
  uint32_t hwm;   /* slots ever handed out */
  uint32_t nfile; /* slots the file has room for */
  uint32_t max;   /* limit / chunk */
  uint32_t used;
} nvme_slots_t;

/* slots.c; the caller holds the swap's slot_lock. */
int nvme_slots_init(nvme_slots_t *t, uint32_t max);
void nvme_slots_fini(nvme_slots_t *t);
/* Grows the table to n slots (the file already has room for them). */
int nvme_slots_resize(nvme_slots_t *t, uint32_t n);
/* A free slot below nfile, marked WRITING, or -ENOSPC when the file is full. */
int32_t nvme_slots_take(nvme_slots_t *t);
int nvme_slots_release(nvme_slots_t *t, int32_t slot, uint32_t *len);

// ---- the swap ----

/* Message bits: each message is said once per swap. */
enum {
  SAY_URING = 1 << 0,
  SAY_DIRECT = 1 << 1,
  SAY_FALLOC = 1 << 2,
  SAY_TMPFILE = 1 << 3,
  SAY_FIXBUF = 1 << 4,
  SAY_FIXFILE = 1 << 5,
  SAY_REFUSED = 1 << 6,
  SAY_ENOSPC = 1 << 7,
};

struct nvme_swap {
  pthread_mutex_t lock;      /* one job at a time; the bounce ring */
  pthread_mutex_t slot_lock; /* the slot table and the file's size: held briefly */
  int fd;
  int o_direct, tmpfile;
  uint32_t chunk;
  uint64_t limit;
  uint32_t step; /* growth step in slots */
  int qd;
  nvme_engine_t engine;
  nvme_eng_t *eng;
  nvme_slots_t slots;
  void **bufs;
  int nbufs;
  size_t bufsize;
  int bufs_internal, fixed_bufs, fixed_file;
  int use_ftruncate;
  nvme_log_fn log;
  void *log_arg;
  unsigned said;
  nvme_stats_t st; /* updated and read with __atomic builtins */
};

#define NVME_STAT_ADD(s, field, v)                                                                 \
  __atomic_fetch_add(&(s)->st.field, (uint64_t)(v), __ATOMIC_RELAXED)
#define NVME_STAT_SUB(s, field, v)                                                                 \
  __atomic_fetch_sub(&(s)->st.field, (uint64_t)(v), __ATOMIC_RELAXED)

/* Says msg through the log callback unless `bit` was said already. */
void nvme_say(nvme_swap_t *s, unsigned bit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A fallback happened: counted every time, said once. */
void nvme_fallback(nvme_swap_t *s, unsigned bit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* swap.c, each taking slot_lock: a slot for writing (growing the file when
 * needed); the slot made valid; a slot being written given back; a valid
 * slot's length and checksum (-EINVAL if it holds nothing). */
int nvme_slot_take(nvme_swap_t *s, int32_t *slot);
void nvme_slot_commit(nvme_swap_t *s, int32_t slot, uint32_t len, uint32_t crc);
void nvme_slot_drop(nvme_swap_t *s, int32_t slot);
int nvme_slot_get(nvme_swap_t *s, int32_t slot, uint32_t *len, uint32_t *crc);
/* pipeline.c, lock held: the internal bounce ring when none is registered. */
int nvme_bufs_ensure_locked(nvme_swap_t *s);
void nvme_bufs_drop_locked(nvme_swap_t *s);

uint64_t nvme_now_ns(void);

#endif
