/* ledger.h: per-device VRAM budget shared by every vx process of one user.
 * A 0600 shared-memory table of {pid, start time, bytes}; dead holders' shares are reclaimed. */
#ifndef VX_TIERS_LEDGER_H
#define VX_TIERS_LEDGER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Several vx processes on one GPU must not each believe they own all of
 * VRAM.  Each process holds one slot in /dev/shm/vx-ledger-<uid>-<key> (key =
 * the device ordinal, or a device UUID through ledger_open_key) recording the
 * bytes it has reserved.  The table is guarded by a robust process-shared
 * mutex: a process killed while holding the lock (or a share) is detected
 * and its share reclaimed by the next caller.
 *
 * Liveness survives PID namespaces (containers sharing /dev/shm with
 * --ipc=host): each holder keeps an open-file-description lock
 * (F_OFD_SETLK) on one byte of the segment file per slot, for as long as
 * it holds the slot.  The kernel drops it when the holder dies (or execs:
 * the descriptor is O_CLOEXEC), and any process, in any namespace, tests it
 * with F_OFD_GETLK; a slot is reclaimed only when its lock is provably
 * gone.  Slots without the lock (written by an older vx, or where the
 * kernel has no OFD locks) fall back to kill(pid,0) == ESRCH, a zombie, or
 * a different /proc start time (pid reuse), which only hold within one
 * namespace.  A fork child that inherited the descriptor and never used the
 * ledger keeps its parent's slot alive until it exits too (conservative).
 *
 * Truncation of the segment file (e.g. ftruncate to 0 by another process)
 * must not kill this process with SIGBUS: the file's size is checked with
 * fstat before the mapping is touched and again under the lock; a segment
 * that shrank or was re-created under us is left for a private ledger that
 * keeps this process's share (one line through ledger_set_warn's
 * callback).  The remaining window is a truncation in the few instructions
 * between the check and the access.
 *
 * The segment is private to the user: created 0600 (fchmod, whatever the
 * umask), and one that is owned by another user, has another mode, or has a
 * foreign layout is refused; the ledger then falls back to a private one
 * (this process alone) and says why in `err`.
 *
 * Thread safety: every call may be made from any thread; a handle must not
 * be used after ledger_close().  The lock is held only over the table and
 * the liveness checks (kill(2), /proc reads): never across a driver call,
 * an allocation or a callback. */

typedef struct vx_ledger vx_ledger_t;

/* Slots in one segment: more concurrent vx processes per device than this
 * fall back to a private ledger. */
#define LEDGER_SLOTS 64

/* One process's share, as ledger_list() reports it. */
typedef struct ledger_entry {
  pid_t pid;
  uint64_t start_time; /* /proc/<pid>/stat field 22, clock ticks since boot */
  uint64_t bytes;      /* bytes reserved */
  int self;            /* 1 for the caller's own slot */
} ledger_entry_t;

/* Opens (creating if needed) the ledger named by `key` (at most 64
 * characters of [A-Za-z0-9_-], e.g. a device UUID; a bad key gives a private
 * ledger and a warning) and takes a slot for this process.  `device_capacity` is the most bytes all
 * processes together may reserve through this handle (the caller's physical VRAM minus its
 * reserve).  Returns a handle, or NULL only when memory for the handle itself cannot be had (err
 * says why).  When the shared segment cannot be used (foreign owner or mode, bad layout, table
 * full, shm unavailable) a private ledger is returned and `err` holds a one-line warning the caller
 * prints once; otherwise err[0] == '\0'.  err may be NULL when n == 0. */
vx_ledger_t *ledger_open_key(const char *key, uint64_t device_capacity, char *err, size_t n);

/* Opens the segment of `key` to look at it (vx top): no slot is taken,
 * nothing is created.  Returns NULL and fills err when there is no usable
 * segment (ENOENT when no vx process has created one).  ledger_reserve()
 * and ledger_release() on an observer return -EPERM. */
vx_ledger_t *ledger_observe_key(const char *key, char *err, size_t n);

/* Reserves `bytes` for this process.  Returns 0 when the sum of all live
 * processes' shares plus `bytes` stays within the handle's capacity (dead
 * holders are reclaimed first when it would not), -ENOMEM otherwise (nothing
 * changes), -EOVERFLOW when the sum would overflow, -EPERM on an observer. */
int ledger_reserve(vx_ledger_t *l, uint64_t bytes);

/* Returns `bytes` of this process's share.  Never underflows: releasing more
 * than is held sets the share to 0 and returns -ERANGE; 0 otherwise. */
int ledger_release(vx_ledger_t *l, uint64_t bytes);

/* Bytes this process holds (0 for an observer). */
uint64_t ledger_share(vx_ledger_t *l);

/* Bytes held by other live processes (dead ones are reclaimed first). */
uint64_t ledger_others(vx_ledger_t *l);

/* What a ledger_reserve() could still get now: the capacity less every
 * live share, this process's included (0 for an observer). */
uint64_t ledger_room(vx_ledger_t *l);

/* Where the one line goes when a handle leaves a truncated or re-created
 * segment for a private ledger (libvx: vx_log).  NULL (the default): said
 * nowhere.  The callback must not call into the ledger. */
void ledger_set_warn(void (*warn)(const char *line));

/* The capacity given at open (0 for an observer). */
uint64_t ledger_capacity(const vx_ledger_t *l);

/* Changes the capacity this handle reserves against (the budget settled
 * from what the driver reports free, tiers/budget.c).  Shares already held
 * are kept; later ledger_reserve() calls see the new capacity.  Ignored for
 * an observer or NULL. */
void ledger_set_capacity(vx_ledger_t *l, uint64_t device_capacity);

/* 1 when the handle uses the shared segment, 0 when it is private (from the
 * start, or since the shared segment was truncated or replaced). */
int ledger_is_shared(const vx_ledger_t *l);

/* Calls cb once per live slot (dead ones are reclaimed first), from a copy
 * taken under the lock, so cb may call anything but must not keep the entry
 * pointer.  Returns the number of entries reported. */
int ledger_list(vx_ledger_t *l, void (*cb)(const ledger_entry_t *e, void *arg), void *arg);

/* Frees this process's slot (its share returns to the pool) and the handle.
 * NULL is ignored.  In a fork child that never used the handle, the
 * parent's slot is left alone. */
void ledger_close(vx_ledger_t *l);

/* The key for a device UUID (cuDeviceGetUuid_v2's 16 bytes): 32 lowercase
 * hex digits into out (33 bytes with the NUL).  Keying by UUID keeps one
 * ledger per physical GPU whatever CUDA_VISIBLE_DEVICES renumbers.  Returns out. */
char *ledger_key_uuid(const unsigned char uuid[16], char out[33]);

/* In a fork child (libvx: budget.c's atfork child handler): re-initialises
 * the process-private table's lock, which a parent thread may have held at
 * fork().  The shared segment's lock needs nothing (see LOCKS.md).  NULL is
 * ignored. */
void ledger_atfork_child(vx_ledger_t *l);

/* Removes the segment of `key` (tests, `vx` maintenance).  0 or -errno. */
int ledger_unlink_key(const char *key);

/* Start time of `pid` from /proc/<pid>/stat (field 22), or 0 when the
 * process does not exist or is a zombie. */
uint64_t ledger_proc_start(pid_t pid);

#ifdef __cplusplus
}
#endif
#endif
