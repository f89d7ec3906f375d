/* stats_shm.h: the live stats segment, /dev/shm/vx-<uid>-<pid>, 0600.
 * One versioned header, per-device limits, then the counters of counters.def. */
#ifndef VX_INTERPOSE_STATS_SHM_H
#define VX_INTERPOSE_STATS_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "counters.h"

#define VX_STATS_MAGIC "VXSTATS" /* 8 bytes with the NUL */
#define VX_STATS_VERSION 1u
#define VX_STATS_MAX_DEV 64u
#define VX_STATS_MAX_COUNTERS 4096u
#define VX_STATS_CMDLINE 256u
/* Largest segment a reader maps (64 devices x 4096 counters fit easily). */
#define VX_STATS_MAX_SIZE (64u << 20)

/* The counters of counters.def, in order: VX_STATS_<name> is its index in
 * a device's row, the same number as its counter id VX_CTR_<name>
 * (counters.h: one enum, named here for the segment's readers). */
enum {
#define VX_COUNTER(name, kind, help) VX_STATS_##name = VX_CTR_##name,
#define VX_GAUGE VX_GAUGE_ROWS
#include "counters.def"
#undef VX_GAUGE
#undef VX_COUNTER
  VX_STATS_NCOUNTERS = VX_CTR_COUNT
};
_Static_assert(VX_STATS_NCOUNTERS <= VX_STATS_MAX_COUNTERS, "the counters fit a segment row");

/* Limits per device, in this order (bytes; 0 = none). */
enum { VX_LIMIT_DEVICE, VX_LIMIT_HOST, VX_LIMIT_NVME, VX_LIMIT_COUNT };

/* Layout (native endianness, all offsets from the start of the segment):
 *   vx_stats_hdr_t                     at 0
 *   uint64_t limits[ndev][VX_LIMIT_COUNT]   at header_size
 *   uint64_t counters[ndev][ncounters]      right after the limits
 * total_size is exactly the sum, and the file is exactly that long.  Counters
 * and heartbeat_ns are written with relaxed atomics and must be read so.
 * The writer stores the magic last, so a half-built segment does not validate.
 * Counters are appended to counters.def only, so a reader with a different
 * counter count uses the first min(its, ncounters). */
typedef struct vx_stats_hdr {
  union {
    char magic[8];
    uint64_t magic_word; /* stored last, with release order */
  };
  uint32_t version;
  uint32_t header_size; /* sizeof(vx_stats_hdr_t) of the writer */
  uint64_t total_size;
  int32_t pid;
  uint32_t uid;
  uint32_t ndev;
  uint32_t ncounters;
  uint64_t start_ns;              /* CLOCK_REALTIME at creation */
  uint64_t heartbeat_ns;          /* CLOCK_REALTIME of the last heartbeat */
  char cmdline[VX_STATS_CMDLINE]; /* NUL-terminated, arguments space-separated */
} vx_stats_hdr_t;

/* ---- writer side (the library) ---- */

/* Creates this process's segment (O_EXCL; a stale one of ours with the same
 * name, left by a dead process whose pid we reuse, is replaced; a foreign one
 * is refused).  limits is ndev x VX_LIMIT_COUNT values, or NULL for zeros.
 * Returns the live counters array (ndev x VX_STATS_NCOUNTERS uint64_t, zeroed)
 * to update in place with relaxed atomics, or NULL with a one-line reason in
 * err.  Call once per process (not thread-safe against itself). */
uint64_t *vx_stats_shm_create(int ndev, const uint64_t *limits, char *err, size_t errlen);
/* For a library that keeps its counters in its own memory: creates the
 * segment (as vx_stats_shm_create, ndev devices, limits zero) and starts one
 * background thread that copies live[0 .. ndev*VX_STATS_NCOUNTERS) uint64_t
 * (e.g. a vx_counters_t array) into it with relaxed atomics and stamps the
 * heartbeat every VX_STATS_PERIOD_MS.  live must stay valid until
 * vx_stats_shm_destroy(), which publish registers with atexit().  Returns 0
 * or -errno (segment or thread failed; nothing is left behind). */
#define VX_STATS_PERIOD_MS 200
int vx_stats_shm_publish(const void *live, int ndev);
/* fn runs on the publisher thread before each copy, with no lock held
 * (it may call the driver: report.c refreshes the driver's own migration
 * counters there).  NULL removes it.  Set it before vx_stats_shm_publish. */
void vx_stats_shm_before_copy(void (*fn)(void));
/* Overwrites the limits (ndev x VX_LIMIT_COUNT).  No-op without a segment. */
void vx_stats_shm_set_limits(const uint64_t *limits);
/* Stamps heartbeat_ns with the current time.  Async-signal-safe, lock-free. */
void vx_stats_shm_heartbeat(void);
/* Stops the publisher thread (joined, with a final copy), unmaps and
 * unlinks the segment (only in the process that created it: a forked child
 * never removes its parent's).  Idempotent. */
void vx_stats_shm_destroy(void);

/* ---- reader side (the tools) ---- */

typedef struct vx_stats_view {
  vx_stats_hdr_t hdr;       /* validated copy of the header */
  const uint64_t *limits;   /* [ndev][VX_LIMIT_COUNT], live */
  const uint64_t *counters; /* [ndev][hdr.ncounters], live */
  void *map;
  size_t map_len;
} vx_stats_view_t;

/* The segment's path for (uid, pid) into buf; returns buf. */
char *vx_stats_shm_path(uid_t uid, pid_t pid, char *buf, size_t len);
/* Pure check of a segment's bytes (buf, len = the file size): magic, version,
 * header size, device and counter counts within bounds, total size consistent
 * and not past len, NUL-terminated command line.  If hdr_out is not NULL the
 * header copy that was checked is stored there.  Returns 0, or -EBADMSG
 * (corrupt) / -EPROTONOSUPPORT (other version) with a reason in err. */
int vx_stats_validate(const void *buf, size_t len, vx_stats_hdr_t *hdr_out, char *err,
                      size_t errlen);
/* Pure check of an open segment's metadata: a regular file owned by uid with
 * mode exactly 0600.  Returns 0, -EPERM (foreign owner) or -EACCES (mode). */
int vx_stats_check_owner(const struct stat *st, uid_t uid);
/* Opens and validates the segment of pid (owned by the caller's euid).
 * Returns 0, or -ENOENT (none), -EPERM/-EACCES (foreign or bad mode),
 * -EBADMSG/-EPROTONOSUPPORT (invalid), -errno; v is untouched on failure. */
int vx_stats_shm_open(pid_t pid, vx_stats_view_t *v);
void vx_stats_shm_close(vx_stats_view_t *v);
/* Counter idx of device dev (relaxed atomic load); 0 past the writer's
 * counter count or device count. */
uint64_t vx_stats_get(const vx_stats_view_t *v, unsigned dev, unsigned idx);
uint64_t vx_stats_limit(const vx_stats_view_t *v, unsigned dev, unsigned which);
uint64_t vx_stats_heartbeat(const vx_stats_view_t *v);
/* 1 if device dev is worth showing: device 0, or any limit or counter set
 * (a library publishing a fixed-size device table leaves unused ones zero). */
int vx_stats_dev_active(const vx_stats_view_t *v, unsigned dev);

#endif
