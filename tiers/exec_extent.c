/* exec_extent.c: where a tensor inside a segment ends.
 *
 * A caching allocator (PyTorch's CUDACachingAllocator) carves tensors out
 * of big segments, so a kernel gets a pointer into an allocation and vx
 * does not know where the object behind it ends.  What it knows is where
 * objects start: every pointer a launch passes.  The object at `off` ends
 * at the next start above it (objects do not overlap), else at the
 * allocation's end (launch_plan.c: ranges_of).
 *
 * Starts go stale: the allocator frees blocks, merges them and carves the
 * space again, and a boundary of the old layout then cuts a new, bigger
 * tensor short; the kernel faults in the rest behind the policy's back.
 * vx never sees those frees.  So a start bounds the object at `off` only
 * while it is evidence of a neighbour that coexists with that object:
 *   - it was passed since `off` was passed before this launch: the
 *     neighbour was in use between two uses of the object at `off`;
 *   - or it was passed in the last EX_START_RECENT extent calls: a
 *     neighbour seen just before is most likely still there.
 * A start older than both is a boundary from before the object at `off`
 * appeared, and the extent runs past it (more bytes moved, no fault).
 * The first rule once counted starts passed since `off` was *first*
 * passed; but a caching allocator hands the same offset to a new tensor
 * every iteration, so after the first one every start ever seen counted,
 * and stale boundaries cut tensors short.  Measured with `vx play` of the
 * real-model traces (tests/traces: tensors laid out as the CUDA caching
 * allocator would; libvx's own VX_TRACE of the play against the played
 * ranges), resnet50: 46% of the launches' extents exact and 32.7k chunks
 * short with the old rule, 60% and 10.5k short with this one, and virtual
 * time against plain Unified Memory 1.10 -> 0.71 (bert-base 0.90 -> 0.85,
 * gpt2-medium 0.99 -> 0.91, llama-decode 0.82 -> 0.73, but moe 1.47 ->
 * 1.58: experts used now and then overrun into neighbours not passed in
 * between); prog_torch (tests/predict) 0.69 -> 0.73 of its reference.  The
 * programs whose allocations are their tensors do not change (each extent
 * is its whole allocation).
 *
 * Under the device lock (exec.c: exec_extent); the clock is the device's
 * count of extent calls. */
#include <string.h>

#include "exec_int.h"

void ex_start_note(ex_alloc_t *e, uint64_t off, uint64_t now) {
  uint32_t i = 0;
  while (i < e->nstarts && e->starts[i] < off)
    i++;
  if (i < e->nstarts && e->starts[i] == off) {
    if (e->seen[i] != now) e->prev[i] = e->seen[i]; /* twice in one launch: one pass */
    e->seen[i] = now;
    return;
  }
  if (e->nstarts == EX_STARTS) { /* drop the least recently passed */
    uint32_t old = 0;
    for (uint32_t k = 1; k < e->nstarts; k++)
      if (e->seen[k] < e->seen[old]) old = k;
    uint32_t tail = e->nstarts - old - 1;
    memmove(&e->starts[old], &e->starts[old + 1], tail * sizeof e->starts[0]);
    memmove(&e->seen[old], &e->seen[old + 1], tail * sizeof e->seen[0]);
    memmove(&e->prev[old], &e->prev[old + 1], tail * sizeof e->prev[0]);
    e->nstarts--;
    if (old < i) i--;
  }
  uint32_t tail = e->nstarts - i;
  memmove(&e->starts[i + 1], &e->starts[i], tail * sizeof e->starts[0]);
  memmove(&e->seen[i + 1], &e->seen[i], tail * sizeof e->seen[0]);
  memmove(&e->prev[i + 1], &e->prev[i], tail * sizeof e->prev[0]);
  e->starts[i] = off, e->seen[i] = e->prev[i] = now;
  e->nstarts++;
}

uint64_t ex_start_end(const ex_alloc_t *e, uint64_t off, uint64_t now) {
  uint32_t i = 0;
  while (i < e->nstarts && e->starts[i] < off)
    i++;
  /* an offset never noted has no earlier pass: only recent starts count */
  uint64_t born = i < e->nstarts && e->starts[i] == off ? e->prev[i] : now;
  for (; i < e->nstarts; i++) {
    if (e->starts[i] <= off) continue;
    if (e->seen[i] >= born || e->seen[i] + EX_START_RECENT >= now) return e->starts[i];
  }
  return e->size;
}
