/* exec_time.c: how long the kernels that read an allocation compute, and how
 * fast the link moves data, timed on the device with event pairs.  The
 * thrash pin (exec.c, pin_due) reads an allocation over the link instead of
 * moving it; a kernel doing so holds the compute engine for the transfer,
 * where a prefetch would have run beside the kernels before it.  These
 * timings tell the two kinds of allocation apart: one whose kernels
 * compute for a good part of what reading it over the link takes, whose
 * moves the compute hides, and one whose kernels are tiny (decode
 * weights), which the link carries either way.
 *
 * Everything here runs under the device's `order` lock (exec.c), which a
 * thread holds from its plan to the mark after its launch: one timed
 * launch is being made at a time, and the FIFOs need no other lock.
 * Events are made with timing on first use and kept (a few dozen per
 * device).  A driver error drops the sample: no timing means the old rule. */
#include <string.h>

#include "exec_int.h"
#include "driver.h"

/* Starts pair p on s (its events made on first use): 0, or -1. */
static int pair_start(ex_tpair_t *p, CUstream s) {
  if (!p->a && VX_CALL(cuEventCreate, &p->a, CU_EVENT_DEFAULT) != CUDA_SUCCESS) p->a = NULL;
  if (p->a && !p->b && VX_CALL(cuEventCreate, &p->b, CU_EVENT_DEFAULT) != CUDA_SUCCESS) p->b = NULL;
  if (!p->b || VX_CALL(cuEventRecord, p->a, s) != CUDA_SUCCESS) return -1;
  p->state = EX_T_STARTED;
  return 0;
}

/* Ends a started pair on s (ok: what it times was enqueued), or drops it. */
static void pair_end(ex_tpair_t *p, CUstream s, int ok) {
  if (p->state != EX_T_STARTED) return;
  p->state = ok && VX_CALL(cuEventRecord, p->b, s) == CUDA_SUCCESS ? EX_T_RECORDED : EX_T_FREE;
}

/* A pair's elapsed ns once its end has completed: 1, 0 not yet, -1 failed
 * or dropped (the slot is freed unless 0). */
static int pair_take(ex_tpair_t *p, uint64_t *ns) {
  if (p->state != EX_T_RECORDED) {
    p->state = EX_T_FREE;
    return -1;
  }
  CUresult q = VX_CALL(cuEventQuery, p->b);
  if (q == CUDA_ERROR_NOT_READY) return 0;
  p->state = EX_T_FREE;
  float ms = 0;
  /* by its table name: cuda.h maps the call's name to a _v2 vx does not hook */
  vx_pfn_cuEventElapsedTime f = VX_REAL_FN(cuEventElapsedTime);
  if (q != CUDA_SUCCESS || !f || f(&ms, p->a, p->b) != CUDA_SUCCESS || ms < 0) return -1;
  *ns = (uint64_t)((double)ms * 1e6);
  return 1;
}

int ex_time_launch_begin(ex_time_t *t, CUstream s, const uint64_t *ids, int n) {
  if (n <= 0 || t->kn == EX_KT_RING) return 0;
  unsigned i = (t->khead + t->kn) % EX_KT_RING;
  if (pair_start(&t->k[i].ev, s)) return 0;
  t->k[i].nid = (uint8_t)(n < EX_KT_IDS ? n : EX_KT_IDS);
  memcpy(t->k[i].id, ids, t->k[i].nid * sizeof ids[0]);
  t->kn++;
  return (int)i + 1;
}

void ex_time_launch_end(ex_time_t *t, int slot, CUstream s, int ok) {
  if (slot > 0 && slot <= EX_KT_RING) pair_end(&t->k[slot - 1].ev, s, ok);
}

static int cmp_u32(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return (a > b) - (a < b);
}

/* A link sample of `bytes` in `ns`: its rate joins the last EX_LT_RATES,
 * whose median is the link's rate.  A median, as one sample can be slow
 * (the prefetch waited for the engine behind other transfers) or fast (its
 * chunks were on the device already: nothing moved). */
static void rate_add(ex_time_t *t, uint64_t bytes, uint64_t ns) {
  if (!ns) return;
  uint64_t r = bytes * 1000 / ns; /* bytes per microsecond */
  if (!r || r > UINT32_MAX) return;
  t->rate[t->rate_at++ % EX_LT_RATES] = (uint32_t)r;
  if (t->nrate < EX_LT_RATES) t->nrate++;
  uint32_t v[EX_LT_RATES];
  memcpy(v, t->rate, t->nrate * sizeof v[0]);
  qsort(v, t->nrate, sizeof v[0], cmp_u32);
  t->bpus = v[t->nrate / 2];
}

static void harvest_link(ex_time_t *t) {
  while (t->ln) {
    uint64_t ns = 0;
    int r = pair_take(&t->l[t->lhead].ev, &ns);
    if (r == 0) return;
    if (r > 0) rate_add(t, t->l[t->lhead].bytes, ns);
    t->lhead = (t->lhead + 1) % EX_LT_RING;
    t->ln--;
  }
}

int ex_time_harvest(ex_time_t *t, ex_ktres_t *out, int max) {
  harvest_link(t);
  int n = 0;
  while (t->kn && n < max) {
    unsigned i = t->khead;
    uint64_t ns = 0;
    int r = pair_take(&t->k[i].ev, &ns);
    if (r == 0) return n;
    if (r > 0) {
      out[n].nid = t->k[i].nid;
      memcpy(out[n].id, t->k[i].id, sizeof out[n].id);
      out[n++].ns = ns;
    }
    t->khead = (t->khead + 1) % EX_KT_RING;
    t->kn--;
  }
  return n;
}

int ex_time_link_begin(ex_time_t *t, CUstream s, uint64_t bytes) {
  if (bytes < EX_LT_MIN || t->ln == EX_LT_RING) return 0;
  /* once the rate is known, one prefetch in EX_LT_EVERY keeps it current */
  if (t->nrate == EX_LT_RATES && t->skip++ % EX_LT_EVERY) return 0;
  unsigned i = (t->lhead + t->ln) % EX_LT_RING;
  if (pair_start(&t->l[i].ev, s)) return 0;
  t->l[i].bytes = bytes;
  t->ln++;
  return (int)i + 1;
}

void ex_time_link_end(ex_time_t *t, int slot, CUstream s, int ok) {
  if (slot > 0 && slot <= EX_LT_RING) pair_end(&t->l[slot - 1].ev, s, ok);
}

void ex_time_reset(ex_time_t *t) {
  memset(t, 0, sizeof *t);
}
