/* Spill (DtoH -> swap -> discard) and restore (swap -> HtoD) of chunk
 * lists, through the pinned bounce ring, and nvme's counters copied into
 * vx's.  Every function here runs under the spill lock. */
#include <errno.h>
#include <string.h>

#include "capture.h"
#include "move.h"
#include "spill_int.h"
#include "spill_order.h"
#include "driver.h"
#include "ctr.h"
#include "log.h"

// ---- counters ----

#define SYNC_SUM(field, ctr)                                                                       \
  do {                                                                                             \
    if (st.field > spill_g.seen.field) ctr_add(dev, VX_CTR_##ctr, st.field - spill_g.seen.field);  \
  } while (0)

void spill_stats_sync_locked(int dev) {
  nvme_stats_t st;
  if (!spill_g.swap) return;
  nvme_stats_get(spill_g.swap, &st);
  SYNC_SUM(write_bytes, nvme_write_bytes);
  SYNC_SUM(read_bytes, nvme_read_bytes);
  SYNC_SUM(write_ns, nvme_write_ns);
  SYNC_SUM(read_ns, nvme_read_ns);
  SYNC_SUM(retries, nvme_retries);
  SYNC_SUM(fallbacks, nvme_fallbacks);
  SYNC_SUM(checksum_failures, nvme_checksum_failures);
  SYNC_SUM(write_failures, nvme_write_failures);
  SYNC_SUM(read_failures, nvme_read_failures);
  SYNC_SUM(enospc, nvme_enospc);
  spill_g.seen = st;
}

// ---- bounce buffers ----

void spill_bounce_ensure_locked(void) {
  if (spill_g.bounce_tried) return;
  spill_g.bounce_tried = 1;
  int n = 0;
  vx_capture_relax_t rx; /* pinned allocation: a potentially unsafe call */
  vx_capture_relax_begin(&rx);
  for (; n < SPILL_BOUNCE; n++)
    if (VX_CALL(cuMemAllocHost_v2, &spill_g.bounce[n], NVME_CHUNK_DEFAULT) != CUDA_SUCCESS) break;
  int rc =
      n >= 2 ? nvme_register_buffers(spill_g.swap, spill_g.bounce, n, NVME_CHUNK_DEFAULT) : -ENOMEM;
  if (rc == 0) {
    spill_g.nbounce = n;
    vx_capture_relax_end(&rx);
    return;
  }
  while (n > 0)
    VX_CALL(cuMemFreeHost, spill_g.bounce[--n]);
  vx_capture_relax_end(&rx);
  VX_LOG_ONCE(VX_LOG_INFO, "no pinned bounce buffers (%s): the NVMe tier uses pageable ones",
              strerror(-rc));
}

void spill_bounce_forget_locked(void) {
  if (spill_g.nbounce) nvme_unregister_buffers(spill_g.swap);
}

// ---- spill and restore of chunk lists ----

/* Both directions go on vx's own non-blocking stream and wait for it
 * alone (in relaxed capture mode, set by the callers): a synchronous copy
 * uses the legacy stream, illegal while another thread captures. */
static int fill_dtoh(void *buf, const nvme_chunk_t *c, void *arg) {
  CUstream s = arg;
  CUresult r = VX_CALL(cuMemcpyDtoHAsync_v2, buf, (CUdeviceptr)(uintptr_t)c->arg, c->len, s);
  if (r == CUDA_SUCCESS) r = VX_CALL(cuStreamSynchronize, s);
  return r == CUDA_SUCCESS ? 0 : -EIO;
}

static int drain_htod(const void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  CUresult r = vx_capture_safe_htod((CUdeviceptr)(uintptr_t)c->arg, buf, c->len);
  return r == CUDA_SUCCESS ? 0 : -EIO;
}

static void say_failure(int err) {
  if (err == -ENOSPC)
    VX_LOG_ONCE(VX_LOG_WARN,
                "NVMe swap full (VX_NVME_LIMIT or the disk): data stays in host RAM, over "
                "VX_HOST_LIMIT");
  else
    VX_LOG_ONCE(VX_LOG_WARN, "NVMe spill failed (%s): the data stays in host RAM", strerror(-err));
}

/* After a spill job: discards what reached the swap, takes back what the
 * driver would not discard.  A slot is freed only where the data is
 * provably still in managed memory (the driver refused that discard): a
 * discard enqueued whose end could not be waited for may have happened,
 * so its chunk counts as spilled (the swap holds its data, and the next
 * use restores it).  Returns the number of chunks now spilled. */
static size_t commit_spill_locked(victim_t *v, nvme_chunk_t *c, size_t n) {
  CUdeviceptr p[SPILL_BATCH];
  size_t sz[SPILL_BATCH], k = 0;
  for (size_t j = 0; j < n; j++)
    if (c[j].status == 0) {
      p[k] = (CUdeviceptr)(uintptr_t)c[j].arg;
      sz[k++] = c[j].len;
    }
  if (!k) return 0;
  /* On vx's own stream: the batch calls refuse the legacy one. */
  uint8_t bad[SPILL_BATCH];
  CUresult r, wait = CUDA_SUCCESS;
  size_t nbad = move_discard_sync(p, sz, k, bad, &r, &wait);
  for (size_t j = 0, i = 0; j < n; j++) {
    if (c[j].status != 0) continue;
    if (bad[i++]) { /* refused: the data is still in managed memory */
      nvme_slot_free(spill_g.swap, c[j].slot);
      continue;
    }
    v[j].r->slot[v[j].i] = c[j].slot;
    spill_g.resident -= c[j].len;
    spill_g.nspilled++;
    ctr_cur_add(v[j].r->dev, VX_CTR_nvme_bytes, c[j].len);
  }
  char eb[VX_CU_ERR_TEXT];
  if (wait != CUDA_SUCCESS)
    VX_LOG_ONCE(VX_LOG_WARN,
                "waiting for a discard failed (%s): its chunks are kept in the NVMe swap and "
                "restored on their next use",
                vx_cu_err(wait, eb));
  if (nbad == k) {
    spill_g.no_discard = 1;
    VX_LOG_ONCE(VX_LOG_WARN,
                "cuMemDiscardBatchAsync failed (%s): data stays in host RAM, no more spills",
                vx_cu_err(r, eb));
  } else {
    ctr_add(v[0].r->dev, VX_CTR_nvme_spills, 1);
  }
  __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
  return k - nbad;
}

/* Keeps the victims whose records' users are all done (spill_order.c),
 * in order; *err: the first reason one was left out. */
static size_t settled_locked(victim_t *v, size_t n, int *err) {
  spill_rec_t *seen[SPILL_BATCH];
  int rc[SPILL_BATCH];
  size_t nseen = 0, m = 0;
  *err = 0;
  for (size_t j = 0; j < n; j++) {
    size_t k = 0;
    while (k < nseen && seen[k] != v[j].r)
      k++;
    if (k == nseen) {
      seen[nseen] = v[j].r;
      rc[nseen++] = spill_order_wait_locked(v[j].r);
    }
    if (rc[k] && !*err) *err = rc[k];
    if (!rc[k]) v[m++] = v[j];
  }
  return m;
}

static int batch_relaxed_locked(victim_t *v, size_t n) {
  nvme_chunk_t c[SPILL_BATCH];
  spill_bounce_ensure_locked();
  /* The copies out must see every write enqueued before, in any context
   * or device: each record waits for the streams that used it. */
  int wait_err;
  n = settled_locked(v, n, &wait_err);
  if (!n) return wait_err ? wait_err : -EAGAIN;
  CUstream ms = move_stream();
  if (!ms) return -ENOMEM;
  for (size_t j = 0; j < n; j++)
    c[j] = (nvme_chunk_t){.key = v[j].i,
                          .arg = (void *)(uintptr_t)(v[j].r->base + (size_t)v[j].i * SPILL_CHUNK),
                          .len = (uint32_t)spill_chunk_len(v[j].r, v[j].i),
                          .slot = -1};
  int rc = nvme_spill(spill_g.swap, c, n, fill_dtoh, ms);
  size_t ok = commit_spill_locked(v, c, n);
  spill_stats_sync_locked(v[0].r->dev);
  if (rc == -ENOSPC) spill_g.full_at = spill_g.nspilled ? spill_g.nspilled : 1;
  if (rc) say_failure(rc);
  return rc ? rc : ok == n ? wait_err : -EIO;
}

int spill_batch_locked(victim_t *v, size_t n) {
  if (!spill_g.swap) return -ENOSPC;
  if (spill_g.unseen) return -ENOTSUP; /* see spill_unseen_launch */
  /* A thread's own capture forbids it every wait (relaxed mode or not):
   * the data stays in host RAM until the capture ends. */
  if (vx_capture_mine()) return -EAGAIN;
  /* Other threads' captures: every call below is legal in relaxed mode
   * (no context synchronisation, no legacy stream). */
  vx_capture_relax_t rx;
  vx_capture_relax_force(&rx);
  int rc = batch_relaxed_locked(v, n);
  vx_capture_relax_end(&rx);
  return rc;
}

static int restore_relaxed_locked(spill_rec_t *r, uint32_t first, uint32_t end) {
  nvme_chunk_t c[SPILL_BATCH];
  uint32_t idx[SPILL_BATCH];
  int rc = 0;
  for (uint32_t i = first; i < end;) {
    size_t n = 0;
    for (; i < end && n < SPILL_BATCH; i++)
      if (r->slot[i] >= 0) {
        idx[n] = i;
        c[n++] = (nvme_chunk_t){.key = i,
                                .arg = (void *)(uintptr_t)(r->base + (size_t)i * SPILL_CHUNK),
                                .slot = r->slot[i]};
      }
    if (!n) continue;
    spill_bounce_ensure_locked();
    int e = nvme_restore(spill_g.swap, c, n, drain_htod, NULL);
    for (size_t j = 0; j < n; j++) {
      if (c[j].status) continue;
      nvme_slot_free(spill_g.swap, r->slot[idx[j]]);
      r->slot[idx[j]] = -1;
      spill_g.resident += c[j].len;
      spill_g.nspilled--;
      ctr_cur_sub(r->dev, VX_CTR_nvme_bytes, c[j].len);
    }
    spill_g.full_at = 0;
    __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
    spill_stats_sync_locked(r->dev);
    if (e && !rc) rc = e;
  }
  return rc;
}

int spill_restore_locked(spill_rec_t *r, uint32_t first, uint32_t end) {
  /* the copies in wait for vx's own stream: relaxed, legal while another
   * thread captures */
  vx_capture_relax_t rx;
  vx_capture_relax_force(&rx);
  int rc = restore_relaxed_locked(r, first, end);
  vx_capture_relax_end(&rx);
  return rc;
}
