/* plan.c: appending actions to a caller's bounded plan array, merging runs of
 * adjacent chunks of one allocation into one action. */
#include <errno.h>

#include "pol_internal.h"

/* Returns 0, or -ENOSPC (plan->truncated set) when the array is full. */
int plan_emit_f(pol_plan_t *plan, int op, int when, int tier, int flags,
                const struct pol_chunk *c) {
  if (plan->n) {
    pol_action_t *last = &plan->actions[plan->n - 1];
    if (last->op == op && last->when == when && last->tier == tier && last->flags == flags &&
        last->alloc_id == c->a->id && last->index + last->count == c->idx) {
      last->count++;
      return 0;
    }
  }
  if (plan->n >= plan->cap) {
    plan->truncated = 1;
    return -ENOSPC;
  }
  plan->actions[plan->n++] = (pol_action_t){.alloc_id = c->a->id,
                                            .index = c->idx,
                                            .count = 1,
                                            .op = (uint8_t)op,
                                            .when = (uint8_t)when,
                                            .tier = (uint8_t)tier,
                                            .flags = (uint8_t)flags};
  return 0;
}

int plan_emit(pol_plan_t *plan, int op, int when, int tier, const struct pol_chunk *c) {
  return plan_emit_f(plan, op, when, tier, 0, c);
}

int plan_emit_alloc(pol_plan_t *plan, int op, int when, const struct pol_arec *a) {
  if (plan->n >= plan->cap) {
    plan->truncated = 1;
    return -ENOSPC;
  }
  plan->actions[plan->n++] = (pol_action_t){
      .alloc_id = a->id, .index = 0, .count = a->nchunks, .op = (uint8_t)op, .when = (uint8_t)when};
  return 0;
}

/* PREFETCH chunks of alloc_id in plan: at `when` (any when < 0), and with
 * POL_ACT_NODATA ones only if `nodata`. */
static uint64_t prefetched(const pol_plan_t *plan, uint64_t alloc_id, int when, int nodata) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < plan->n; i++) {
    const pol_action_t *a = &plan->actions[i];
    if (a->alloc_id == alloc_id && a->op == POL_OP_PREFETCH && (when < 0 || a->when == when) &&
        (nodata || !(a->flags & POL_ACT_NODATA)))
      n += a->count;
  }
  return n;
}

uint64_t pol_plan_ups(const pol_plan_t *plan, uint64_t alloc_id, int when) {
  return prefetched(plan, alloc_id, when, 0);
}

uint64_t pol_plan_resident(const pol_plan_t *plan, uint64_t alloc_id) {
  return prefetched(plan, alloc_id, -1, 1);
}
