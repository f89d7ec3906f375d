/* core/locks.h: every vx lock by rank, in LOCKS.md's order, and the rank
 * check that debug and TSan builds (VX_LOCK_CHECK) run at each lock site.
 *
 * Rule (LOCKS.md, "Order"): a thread may take a lock only while every lock
 * it holds has a lower rank.  Taking a lock of equal or lower rank than one
 * held (the same lock again, or one the table puts above a held one) is an
 * inversion: with VX_LOCK_CHECK it prints one line naming both locks and
 * aborts, before blocking.  A family of locks (EXEC: one per device) has a
 * rank per member, ascending by index: the fork prepare takes all of them
 * in that order, and code never holds two (ORDER likewise).
 *
 * Each lock site says the lock's rank: vx_mutex_lock(&m, VX_RANK_X),
 * vx_mutex_unlock(&m, VX_RANK_X), and vx_rwlock_* for the registry.
 * Without VX_LOCK_CHECK the wrappers are the pthread calls and the rank is
 * unused (zero cost).  With it, each thread keeps the set of ranks it
 * holds in one thread-local word shared by every object file (a weak
 * definition, so this header stays self-contained; 8 bytes, as libvx's
 * static TLS is small).  Condition waits keep their mutex in the set: it
 * is held again when they return. */
#ifndef VX_CORE_LOCKS_H
#define VX_CORE_LOCKS_H

#include <pthread.h>

/* Members of the EXEC family: at least VX_MAX_DEVICES (tiers/exec.c checks). */
#define VX_LOCK_EXEC_SLOTS 16

/* X(ID, members, LOCKS.md row, lock): LOCKS.md's table, top to bottom. */
#define VX_LOCK_LIST(X)                                                                            \
  X(ORDER, VX_LOCK_EXEC_SLOTS, "0", "tiers/exec.c:ex_dev[i].order")                                \
  X(CAP, 1, "1", "tiers/capture.c:cap_mu")                                                         \
  X(SPILL, 1, "2", "tiers/spill_init.c:spill_g.mu")                                                \
  X(SWAP, 1, "3", "nvme/nvme_int.h:nvme_swap.lock")                                                \
  X(SLOT, 1, "4", "nvme/nvme_int.h:nvme_swap.slot_lock")                                           \
  X(POOL, 1, "5", "nvme/pool.c:pool_eng_t.mu")                                                     \
  X(TIMELINE, 1, "6", "obs/timeline.c:tl_lock")                                                    \
  X(THREAD_START, 1, "7", "core/thread.c:start.mu")                                                \
  X(GRAPH, 1, "8", "interpose/graph.c:gx_lock")                                                    \
  X(PTRREF, 1, "8b", "tiers/ptrref.c:pr_lock")                                                     \
  X(EXEC, VX_LOCK_EXEC_SLOTS, "9", "tiers/exec.c:ex_dev[i].lock")                                  \
  X(TRACE, 1, "10", "tiers/trace_rec.c:tr_lock")                                                   \
  X(BUDGET, 1, "11", "tiers/budget.c:budget_init_lock")                                            \
  X(VMM, 1, "12", "interpose/vmm.c:vmm_handles.lock")                                              \
  X(PINNED, 1, "13", "interpose/pinned.c:host_allocs.lock")                                        \
  X(DEFER, 1, "14", "tiers/defer.c:defer_lock")                                                    \
  X(REG, 1, "15", "tiers/registry.c:reg_lock")                                                     \
  X(PUBLISH, 1, "17", "obs/stats_shm.c:p_mu")                                                      \
  X(LEDGER, 1, "18", "tiers/ledger.c:ledger_seg.lock")                                             \
  X(STREAMS, 1, "19", "tiers/move.c:streams_mu")                                                   \
  X(SITES_MEMO, 1, "20", "obs/sites.c:sym_memo_lock")                                              \
  X(SYMTAB, 1, "21", "obs/symtab.c:cache_lock")

/* VX_RANK_<ID>: the lock's rank (a family's first member; member i is
 * VX_RANK_<ID> + i).  Ranks start at 1. */
enum vx_lock_rank {
  VX_RANK_NONE_ = 0,
#define VX_LOCK_RANK_(id, n, row, what) VX_RANK_##id, VX_RANK_##id##_LAST_ = VX_RANK_##id + (n)-1,
  VX_LOCK_LIST(VX_LOCK_RANK_)
#undef VX_LOCK_RANK_
      VX_RANK_END_
};

#ifdef VX_LOCK_CHECK

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The calling thread's held ranks, bit r for rank r: one object in the
 * whole program. */
extern __thread unsigned long long vx_lock_held;
__attribute__((weak)) __thread unsigned long long vx_lock_held;

_Static_assert(VX_RANK_END_ <= 64, "a bit per rank");

/* The highest rank in a non-empty set. */
static inline int vx_lock_top_(unsigned long long held) {
  return 63 - __builtin_clzll(held);
}

/* "tiers/exec.c:ex_dev[i].lock (LOCKS.md row 9, member 3)" into buf. */
static inline void vx_lock_describe_(int rank, char *buf, size_t len) {
  static const struct {
    int rank, n;
    const char *row, *what;
  } rows[] = {
#define VX_LOCK_ROW_(id, n, row, what) {VX_RANK_##id, n, row, what},
      VX_LOCK_LIST(VX_LOCK_ROW_)
#undef VX_LOCK_ROW_
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
    if (rank >= rows[i].rank && rank < rows[i].rank + rows[i].n) {
      if (rows[i].n > 1)
        snprintf(buf, len, "%s (LOCKS.md row %s, member %d)", rows[i].what, rows[i].row,
                 rank - rows[i].rank);
      else
        snprintf(buf, len, "%s (LOCKS.md row %s)", rows[i].what, rows[i].row);
      return;
    }
  snprintf(buf, len, "unknown lock rank %d", rank);
}

/* One line on stderr (write(2): no stdio lock, no allocation), then abort. */
__attribute__((noreturn, cold)) static inline void vx_lock_fail_(const char *what, int a, int b) {
  char la[128], lb[128], line[400];
  vx_lock_describe_(a, la, sizeof la);
  vx_lock_describe_(b, lb, sizeof lb);
  int k = b ? snprintf(line, sizeof line, "vx: lock order: %s %s while holding %s\n", what, la, lb)
            : snprintf(line, sizeof line, "vx: lock order: %s %s\n", what, la);
  if (k > 0) {
    ssize_t w = write(2, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
    (void)w;
  }
  abort();
}

/* Before taking the lock of `rank`: aborts on an inversion (a held rank
 * >= rank), else adds it. */
static inline void vx_lock_acquire_(int rank) {
  if (rank <= VX_RANK_NONE_ || rank >= VX_RANK_END_) vx_lock_fail_("taking", rank, 0);
  unsigned long long held = vx_lock_held;
  if (held >> rank) vx_lock_fail_("taking", rank, vx_lock_top_(held));
  vx_lock_held = held | 1ull << rank;
}

/* After releasing the lock of `rank` (in any order: unlocks need not nest). */
static inline void vx_lock_release_(int rank) {
  if (rank <= VX_RANK_NONE_ || rank >= VX_RANK_END_ || !(vx_lock_held >> rank & 1))
    vx_lock_fail_("releasing a lock not held:", rank, 0);
  vx_lock_held &= ~(1ull << rank);
}

/* In a fork child, after the child handlers re-created every lock the
 * prepare handlers took: the one thread holds none. */
static inline void vx_lock_forget_all(void) {
  vx_lock_held = 0;
}

/* A held lock of `rank` that the thread leaves locked on purpose (the
 * ledger's, in a segment it abandons): no longer counted as held. */
static inline void vx_lock_forget(int rank) {
  vx_lock_release_(rank);
}

#else

#define vx_lock_acquire_(rank) ((void)(rank))
#define vx_lock_release_(rank) ((void)(rank))
static inline void vx_lock_forget_all(void) {}
static inline void vx_lock_forget(int rank) {
  (void)rank;
}

#endif

/* Returns what pthread_mutex_lock returns; a robust mutex's EOWNERDEAD
 * counts as taken. */
static inline int vx_mutex_lock(pthread_mutex_t *m, int rank) {
  vx_lock_acquire_(rank);
  int rc = pthread_mutex_lock(m);
#ifdef VX_LOCK_CHECK
  if (rc && rc != EOWNERDEAD) vx_lock_release_(rank);
#endif
  return rc;
}
static inline int vx_mutex_unlock(pthread_mutex_t *m, int rank) {
  int rc = pthread_mutex_unlock(m);
  vx_lock_release_(rank);
  return rc;
}
/* Returns what pthread_mutex_trylock returns; held only when it is 0.  A
 * try never blocks, but it follows the order all the same. */
static inline int vx_mutex_trylock(pthread_mutex_t *m, int rank) {
  vx_lock_acquire_(rank);
  int rc = pthread_mutex_trylock(m);
#ifdef VX_LOCK_CHECK
  if (rc) vx_lock_release_(rank);
#endif
  return rc;
}
static inline int vx_rwlock_rdlock(pthread_rwlock_t *l, int rank) {
  vx_lock_acquire_(rank);
  return pthread_rwlock_rdlock(l);
}
static inline int vx_rwlock_wrlock(pthread_rwlock_t *l, int rank) {
  vx_lock_acquire_(rank);
  return pthread_rwlock_wrlock(l);
}
static inline int vx_rwlock_unlock(pthread_rwlock_t *l, int rank) {
  int rc = pthread_rwlock_unlock(l);
  vx_lock_release_(rank);
  return rc;
}

#endif
