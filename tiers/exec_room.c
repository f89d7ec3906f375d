/* exec_room.c: which eviction each prefetch of a plan waits for.
 *
 * The policy counts an evicted chunk's room as free from the plan on; the
 * room is there once the chunk's write-back has ended.  Waiting for all of
 * `down` before every prefetch that followed an eviction was always safe,
 * but it chained the link's two directions: under load `down` holds
 * evictions made ahead of need (room for allocations to come, the
 * watermark) behind the kernels that last used them, and a launch's
 * required prefetch that needed none of them waited for them all.  Here,
 * as in the replay's model (a freed slot is usable once its old chunk's
 * write-back ends), each prefetch takes the room that is free now first,
 * then the room of the oldest evictions under way (`down` runs in order:
 * the oldest end first), and waits for the end of the group that gives it
 * its last chunk.
 *
 * That needs the ring's order to be `down`'s.  A pin's move goes down
 * before the evictions of the plan made with it, and its room is pushed
 * before theirs (exec.c: pin_room_locked).  (It used to be pushed after
 * them, and while a pin was in the ring every prefetch that took room
 * waited for all of `down`: vx play of moe, whose experts are pinned,
 * stalled each iteration's first launches behind 8 ms of write-backs made
 * ahead of need.)  Room the policy does not know of (the driver
 * made it, a fault took it) makes the count wrong either way, as it did
 * before: too little free room adds waits; too much lets a prefetch start
 * before its room is there, and the driver evicts for it as for any
 * migration. */
#include "exec_int.h"

static void pend_pop(ex_room_t *r) {
  r->head = (r->head + 1) % EX_PEND;
  r->n--;
}

static void pend_push(ex_room_t *r, uint32_t group) {
  if (r->n == EX_PEND) pend_pop(r); /* forgotten: who takes its room waits for a later group */
  unsigned at = (r->head + r->n++) % EX_PEND;
  r->pend[at].hi = r->planned;
  r->pend[at].group = group;
}

static uint32_t group_new(ex_room_t *r) {
  while (!++r->group) { /* 0 means none */
  }
  return r->group;
}

/* The group whose end gives a prefetch the room up to `taken`; EX_ROOM_ALL
 * when that is not known (forgotten, or the policy's count ahead of the
 * plans'). */
static uint32_t take(ex_room_t *r) {
  while (r->n && r->pend[r->head].hi < r->taken)
    pend_pop(r);
  if (!r->n) return EX_ROOM_ALL;
  uint32_t g = r->pend[r->head].group;
  if (r->pend[r->head].hi == r->taken) pend_pop(r); /* all of its room is given */
  return g;
}

void ex_room_plan_locked(ex_room_t *r, ex_op_t *ops, int n, uint64_t free_before) {
  uint64_t pending = r->planned - r->taken;
  /* More room under way than the policy counts free: some of it went
   * without a prefetch (the policy took chunks back: a failed eviction, a
   * pin, native memory's share grown).  Which is not known: the oldest is
   * given up, so that prefetches wait for later groups, never earlier. */
  if (pending > free_before) {
    r->taken += pending - free_before;
    while (r->n && r->pend[r->head].hi <= r->taken)
      pend_pop(r);
    pending = free_before;
  }
  uint64_t now = free_before - pending; /* free with no wait */
  uint32_t req_group = 0, req_in = 0;
  for (int i = 0; i < n; i++) {
    ex_op_t *o = &ops[i];
    o->group = o->room = 0;
    if (o->dropped) continue;
    if (o->op == POL_OP_EVICT) {
      if (o->tier == POL_TIER_NVME) { /* spilled synchronously: free once issued */
        now += o->count;
        continue;
      }
      r->planned += o->count;
      if (o->when == POL_REQUIRED) { /* a plan's REQUIRED evictions: a group per slice */
        if (!req_group || req_in >= EX_REQ_SLICE) req_group = group_new(r), req_in = 0;
        req_in += o->count;
        unsigned last = (r->head + r->n + EX_PEND - 1) % EX_PEND;
        if (r->n && r->pend[last].group == req_group)
          r->pend[last].hi = r->planned;
        else
          pend_push(r, req_group);
        o->group = req_group;
      } else {
        o->group = group_new(r);
        pend_push(r, o->group);
      }
    } else if (o->op == POL_OP_PREFETCH) {
      uint64_t need = o->count, free = need < now ? need : now;
      now -= free;
      if (free == need) continue;
      r->taken += need - free;
      if (r->taken > r->planned) r->taken = r->planned;
      o->room = take(r);
    }
  }
}

uint32_t ex_room_add_locked(ex_room_t *r, uint64_t chunks) {
  uint32_t g = group_new(r);
  r->planned += chunks;
  pend_push(r, g);
  return g;
}
