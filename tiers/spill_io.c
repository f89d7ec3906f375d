/* Spill (DtoH -> swap -> discard) and restore (swap -> HtoD) of chunk
 * lists, through the pinned bounce ring, and nvme's counters copied into
 * vx's.  Every function here runs under the spill lock. */
#include <errno.h>
#include <string.h>

#include "capture.h"
#include "move.h"
#include "spill_int.h"
#include "vx.h"

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

static int fill_dtoh(void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  CUresult r = VX_CALL(cuMemcpyDtoH_v2, buf, (CUdeviceptr)(uintptr_t)c->arg, c->len);
  return r == CUDA_SUCCESS ? 0 : -EIO;
}

static int drain_htod(const void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  CUdeviceptr to = (CUdeviceptr)(uintptr_t)c->arg;
  /* a synchronous copy uses the legacy stream: illegal during a capture */
  CUresult r = vx_capture_active() ? vx_capture_safe_htod(to, buf, c->len)
                                   : VX_CALL(cuMemcpyHtoD_v2, to, buf, c->len);
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
 * driver would not discard.  Returns the number of chunks now spilled. */
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
  CUresult r;
  size_t nbad = move_discard_sync(p, sz, k, bad, &r);
  for (size_t j = 0, i = 0; j < n; j++) {
    if (c[j].status != 0) continue;
    if (bad[i++]) { /* the data is still in managed memory: keep it there */
      nvme_slot_free(spill_g.swap, c[j].slot);
      continue;
    }
    v[j].r->slot[v[j].i] = c[j].slot;
    spill_g.resident -= c[j].len;
    spill_g.nspilled++;
    ctr_cur_add(v[j].r->dev, VX_CTR_nvme_bytes, c[j].len);
  }
  if (nbad == k) {
    spill_g.no_discard = 1;
    VX_LOG_ONCE(VX_LOG_WARN,
                "cuMemDiscardBatchAsync failed (%d): data stays in host RAM, no more spills",
                (int)r);
  } else {
    ctr_add(v[0].r->dev, VX_CTR_nvme_spills, 1);
  }
  __atomic_store_n(&spill_g.any, spill_g.nspilled, __ATOMIC_RELAXED);
  return k - nbad;
}

int spill_batch_locked(victim_t *v, size_t n) {
  nvme_chunk_t c[SPILL_BATCH];
  if (!spill_g.swap) return -ENOSPC;
  if (spill_g.unseen) return -ENOTSUP; /* see spill_unseen_launch */
  /* cuCtxSynchronize and synchronous copies would invalidate a capture in
   * progress on any thread: the data stays in host RAM until it ends. */
  if (vx_capture_active()) return -EAGAIN;
  spill_bounce_ensure_locked();
  /* The copies out must see every write enqueued before: wait for the
   * context's work (chunks chosen here are cold, so rarely any). */
  if (VX_CALL(cuCtxSynchronize) != CUDA_SUCCESS) return -EIO;
  for (size_t j = 0; j < n; j++)
    c[j] = (nvme_chunk_t){.key = v[j].i,
                          .arg = (void *)(uintptr_t)(v[j].r->base + (size_t)v[j].i * SPILL_CHUNK),
                          .len = (uint32_t)spill_chunk_len(v[j].r, v[j].i),
                          .slot = -1};
  int rc = nvme_spill(spill_g.swap, c, n, fill_dtoh, NULL);
  size_t ok = commit_spill_locked(v, c, n);
  spill_stats_sync_locked(v[0].r->dev);
  if (rc == -ENOSPC) spill_g.full_at = spill_g.nspilled ? spill_g.nspilled : 1;
  if (rc) say_failure(rc);
  return rc ? rc : ok == n ? 0 : -EIO;
}

int spill_restore_locked(spill_rec_t *r, uint32_t first, uint32_t end) {
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
