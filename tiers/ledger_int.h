/* ledger_int.h: the layout of the ledger's shared segment and the helpers
 * ledger.c shares with ledger_seg.c (the segment file) and ledger_live.c
 * (whether a slot's holder lives). */
#ifndef VX_TIERS_LEDGER_INT_H
#define VX_TIERS_LEDGER_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ledger.h"

#define LEDGER_MAGIC UINT64_C(0x7678206c65646772) /* "vx ledgr" */
#define LEDGER_VERSION 1u
#define LEDGER_KEY_MAX 64
/* Slot i's liveness lock is on byte LEDGER_LOCK_BASE + i of the segment
 * file (past its end: a lock needs no data). */
#define LEDGER_LOCK_BASE ((off_t)1 << 20)
/* flags: the holder holds its slot's OFD lock for as long as it lives.
 * Without it (a slot written by an older vx, or a kernel without OFD
 * locks) liveness falls back to the pid and /proc start time, which mean
 * nothing across PID namespaces. */
#define SLOT_LOCKED 1u

struct ledger_slot {
  int32_t pid;    /* 0 = free; in the holder's PID namespace */
  uint32_t flags; /* SLOT_LOCKED; 0 in segments written by older vx */
  uint64_t start; /* /proc start time; 0 = unknown (no procfs) */
  uint64_t bytes;
};

/* The layout of the shared segment; its size is part of the check. */
struct ledger_seg {
  uint64_t magic;
  uint32_t version;
  uint32_t nslots;
  pthread_mutex_t lock;
  struct ledger_slot slot[LEDGER_SLOTS];
};

/* The process-private table: from the start when no shared segment could
 * be used, or after the shared one was truncated or replaced. */

/* snprintf into err[0..n) (nothing when err is NULL or n is 0). */
void ledger_say(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- ledger_seg.c ----

/* The shm name of `key`'s segment: /vx-ledger-<euid>-<key>. */
void ledger_seg_name(char *buf, size_t n, const char *key);
/* Initialises the table's mutex: robust and process-shared when pshared.
 * 0 or -errno. */
int ledger_seg_init_lock(struct ledger_seg *s, int pshared);
/* Maps the segment of `key` (creating it when `create`), checked for owner,
 * mode and layout; *fd_out keeps the file open (the slot lock lives on it,
 * and fstat guards every use of the mapping).  0 or -errno, err filled. */
int ledger_seg_map(const char *key, int create, struct ledger_seg **out, int *fd_out, char *err,
                   size_t n);

// ---- ledger_live.c ----

/* 1 and *start set: running; 0: gone or zombie; -1: cannot tell. */
int ledger_proc_stat(pid_t pid, uint64_t *start);
/* Slot i's liveness lock on fd: F_OFD_SETLK with type F_WRLCK or F_UNLCK.
 * 0 or -errno (-EAGAIN: another open file description holds it). */
int ledger_slot_lock_set(int fd, int i, short type);
/* 1 unless slot i's holder is proven dead (fd < 0: no lock test). */
int ledger_slot_alive(const struct ledger_slot *s, int fd, int i);

#endif
