/* nvme: vx's swap tier -- a private swap file of chunk-sized slots, written and
 * read through io_uring (or a thread pool), pipelined over bounce buffers. */
#ifndef VX_NVME_NVME_H
#define VX_NVME_NVME_H

#include <stddef.h>
#include <stdint.h>

/* Everything here returns 0 or -errno unless said otherwise.  nvme/ knows
 * files and buffers, never CUDA: the copies between device memory and the
 * bounce buffers are the caller's callbacks. */

#define NVME_CHUNK_DEFAULT (2u << 20)    /* slot size when cfg.chunk == 0 */
#define NVME_CHUNK_MAX (1u << 30)        /* largest slot: one I/O's result fits an int */
#define NVME_LIMIT_DEFAULT (64ull << 30) /* VX_NVME_LIMIT default */
#define NVME_QD_DEFAULT 32               /* VX_NVME_QD default */
#define NVME_QD_MAX 4096
#define NVME_BUFS_DEFAULT 8 /* internal ring, min(qd + 2, this), when none registered */
#define NVME_RETRIES 3      /* extra attempts after EIO/short I/O */
#define NVME_ALIGN 4096u    /* slot size, buffer and I/O alignment */

typedef enum nvme_engine {
  NVME_ENGINE_AUTO = 0, /* io_uring, else the thread pool (said once, counted) */
  NVME_ENGINE_URING,    /* io_uring only: open fails with its error if unavailable */
  NVME_ENGINE_POOL,     /* pread/pwrite thread pool (forced; VX_NVME_ENGINE=pool) */
} nvme_engine_t;

/* Messages (fallbacks, refusals) go to this callback, each said once per swap;
 * msg has no trailing newline and no "vx:" prefix.  May be NULL: silent. */
typedef void (*nvme_log_fn)(void *arg, const char *msg);

typedef struct nvme_config {
  const char *dir;      /* VX_NVME_DIR: must exist, be owned by the user (or
                         * be a root-owned sticky directory such as /tmp),
                         * not group/world-writable unless sticky, not a symlink */
  uint64_t limit;       /* VX_NVME_LIMIT: largest file size; 0 = NVME_LIMIT_DEFAULT */
  uint32_t chunk;       /* slot size, a multiple of 4 KiB up to 1 GiB; 0 = 2 MiB */
  int qd;               /* VX_NVME_QD: requests in flight; 0 = 32 */
  uint64_t grow_step;   /* preallocation step (rounded to slots); 0 = 64 MiB */
  nvme_engine_t engine; /* see above */
  int pool_threads;     /* thread-pool size, 2..4; 0 = 4 */
  int buffered;         /* 1 = never O_DIRECT (tests; O_DIRECT is probed anyway) */
  nvme_log_fn log;      /* may be NULL */
  void *log_arg;
} nvme_config_t;

/* Counters, monotonic unless said.  Copy them into vx's counters
 * (counters.def: nvme_write_bytes, nvme_read_bytes, nvme_write_ns,
 * nvme_read_ns, nvme_bytes, nvme_retries, nvme_fallbacks, ...). */
typedef struct nvme_stats {
  uint64_t write_bytes;       /* payload bytes spilled successfully */
  uint64_t read_bytes;        /* payload bytes restored successfully */
  uint64_t write_ns;          /* time with at least one write in flight */
  uint64_t read_ns;           /* time with at least one read in flight */
  uint64_t bytes;             /* CUR: payload bytes held in slots now */
  uint64_t file_bytes;        /* CUR: size of the (preallocated) file */
  uint64_t retries;           /* I/O attempts repeated after EIO/short/failed submit */
  uint64_t fallbacks;         /* io_uring->pool, O_DIRECT->buffered, fallocate->ftruncate,
                               * O_TMPFILE->unlinked file, unregistered buffers/file */
  uint64_t checksum_failures; /* restores refused with -EBADMSG */
  uint64_t write_failures;    /* chunks whose spill failed (kept by the caller) */
  uint64_t read_failures;     /* chunks whose restore failed (EIO/short/checksum) */
  uint64_t enospc;            /* chunks refused for want of space (limit or disk) */
} nvme_stats_t;

/* One chunk of a spill or restore job.  The caller fills key/len/arg (and
 * slot for a restore); nvme sets slot (spill) and status. */
typedef struct nvme_chunk {
  uint64_t key; /* the caller's id for the chunk; nvme never reads it */
  void *arg;    /* the caller's per-chunk pointer (e.g. its source/destination) */
  uint32_t len; /* spill: payload bytes, 1..chunk; restore: set to the stored length */
  int32_t slot; /* spill: out, the slot now holding it (-1 on failure);
                 * restore: in, the slot to read (it stays allocated) */
  int status;   /* out: 0 or -errno for this chunk alone */
} nvme_chunk_t;

/* fill: copy the chunk's payload (c->len bytes) into buf (the DtoH copy).
 * drain: copy c->len verified bytes from buf to the chunk's home (the HtoD
 * copy).  Both run on the thread that called nvme_spill/nvme_restore, while
 * other chunks' I/O is in flight; buf is a bounce buffer, valid only during
 * the call.  Return 0 or -errno (the chunk then fails with it).  They must not
 * call nvme_* on the same swap. */
typedef int (*nvme_fill_fn)(void *buf, const nvme_chunk_t *c, void *arg);
typedef int (*nvme_drain_fn)(const void *buf, const nvme_chunk_t *c, void *arg);

typedef struct nvme_swap nvme_swap_t;

/* Creates the swap file in cfg->dir: O_TMPFILE (else a random name unlinked
 * at once), mode 0600, O_DIRECT when the file system takes it (else buffered,
 * said once, counted), and the I/O engine.  The file holds no name at any
 * time after open returns, so it vanishes with the process, even on kill -9.
 * Errors: -EINVAL (bad config), -ELOOP (dir is a symlink), -ENOTDIR, -EPERM
 * (dir not owned by the user, or group/world-writable without the sticky
 * bit), the open error, or the io_uring error with NVME_ENGINE_URING.
 * A refusal is also said through cfg->log.  *out is set only on success. */
int nvme_swap_open(const nvme_config_t *cfg, nvme_swap_t **out);

/* Closes and frees everything; the caller makes sure no job is running.
 * Registered buffers stay the caller's.  NULL is a no-op. */
void nvme_swap_close(nvme_swap_t *s);

/* In the child of a fork(): closes the child's copies of the swap file and
 * of the io_uring ring, so the file's space goes when the parent closes it,
 * without touching the parent's threads or locks.  The object's memory is
 * left as it is (never use or close it in the child).  For a
 * pthread_atfork child handler. */
void nvme_swap_abandon(nvme_swap_t *s);

/* Hands nvme the caller's bounce ring: n buffers of size bytes each
 * (size >= the slot size; every buffer 4 KiB-aligned, e.g. pinned host memory
 * from cuMemAllocHost).  They are registered with io_uring where possible.
 * Replaces a previous ring (or the internal one).  Jobs cycle through all n
 * buffers with at most qd requests in flight: n = qd + 2 lets the copies
 * into two buffers run while qd requests are in flight.  The memory stays
 * the caller's: keep it alive until nvme_unregister_buffers or
 * nvme_swap_close.  Waits for a running job. */
int nvme_register_buffers(nvme_swap_t *s, void **bufs, int n, size_t size);
/* Forgets the caller's ring; later jobs use an internal one. */
void nvme_unregister_buffers(nvme_swap_t *s);

/* Spill job: for each chunk, takes a slot, calls fill into a bounce buffer,
 * checksums it (crc32c) and writes it, pipelined over the ring.  EIO, short
 * writes and failed submits are retried NVME_RETRIES times.  A chunk that
 * fails has status < 0 and slot -1 (its slot is freed; the caller still has
 * the data): -ENOSPC past the limit or when the disk is full, -EIO after the
 * retries, the submission error if io_uring kept refusing (e.g. -EBUSY), or
 * fill's error.  Returns 0 if every chunk succeeded, else the
 * status of the first failed chunk (by index).  One job at a time per swap
 * (a mutex serialises them); thread-safe otherwise. */
int nvme_spill(nvme_swap_t *s, nvme_chunk_t *chunks, size_t n, nvme_fill_fn fill, void *arg);

/* Restore job: reads each chunk's slot into a bounce buffer, checks its
 * crc32c and only then calls drain.  Sets c->len to the stored length.
 * Failures (drain is NOT called, nothing is delivered): -EINVAL (slot not
 * allocated), -EIO (I/O error or short read after the retries), -EBADMSG
 * (checksum mismatch), or drain's error.  Slots stay allocated: free them with
 * nvme_slot_free once the data is safe elsewhere.  Returns as nvme_spill. */
int nvme_restore(nvme_swap_t *s, nvme_chunk_t *chunks, size_t n, nvme_drain_fn drain, void *arg);

/* Releases a slot for reuse.  -EINVAL if it is not allocated.  Never waits
 * for a running job (safe from a free hook). */
int nvme_slot_free(nvme_swap_t *s, int32_t slot);

/* Copies the counters (safe from any thread, at any time). */
void nvme_stats_get(const nvme_swap_t *s, nvme_stats_t *out);

/* Describes the swap as opened, and its slots now.  Never waits for a job. */
typedef struct nvme_info {
  nvme_engine_t engine; /* NVME_ENGINE_URING or NVME_ENGINE_POOL, as running */
  int o_direct;         /* 1 when I/O bypasses the page cache */
  int tmpfile;          /* 1 = O_TMPFILE, 0 = named file unlinked at once */
  int fixed_buffers;    /* 1 when io_uring uses registered buffers */
  int qd;
  uint32_t chunk;
  uint64_t limit;
  uint32_t slots_used; /* slots allocated now */
  uint32_t slots_file; /* slots the file has room for now */
} nvme_info_t;
void nvme_swap_info(const nvme_swap_t *s, nvme_info_t *out);

/* fdatasync, then drop the file's cached pages (benchmarks of buffered I/O). */
int nvme_swap_flush(nvme_swap_t *s);

/* "auto"|"uring"|"pool" -> engine; -EINVAL otherwise (VX_NVME_ENGINE). */
int nvme_engine_parse(const char *s, nvme_engine_t *out);
const char *nvme_engine_name(nvme_engine_t e);

/* crc32c (Castagnoli, reflected, init/xorout 0xFFFFFFFF): crc32c("123456789")
 * == 0xE3069283.  Chain with crc = nvme_crc32c(crc, p, n) starting from 0.
 * nvme_crc32c uses SSE4.2 when the CPU has it, else slicing-by-8; the _sw
 * and _hw forms are for tests (_hw returns the _sw result on CPUs without
 * SSE4.2; nvme_crc32c_hw_available says which). */
uint32_t nvme_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t nvme_crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t nvme_crc32c_hw(uint32_t crc, const void *p, size_t n);
int nvme_crc32c_hw_available(void);

#endif
