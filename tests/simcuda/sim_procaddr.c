/* sim_procaddr.c: cuGetProcAddress and cuGetProcAddress_v2 as the driver does
 * them: base name + requested version + stream flag pick the variant. */
#include <string.h>

#include "sim_internal.h"

typedef struct proc_row {
  const char *base, *sym;
  void *fn;
  int version;
  int ptds;
} proc_row;

static const proc_row procs[] = {
#define SIM_PROC(base, sym, ver, ptds) {#base, #sym, (void *)&sym, ver, ptds},
#include "sim_procs.def"
#undef SIM_PROC
};

#define NPROCS (sizeof procs / sizeof procs[0])

/* The newest row of `base` with version <= v and the given stream kind.
 * Rows newer than the driver release imitated do not exist at all: a
 * symbol with none left is not found (what an older driver says).  *seen:
 * some row of base exists; *kind (kind may be NULL): some row of that stream
 * kind exists. */
static const proc_row *pick(const char *base, int v, int ptds, int *seen, int *kind) {
  const proc_row *best = NULL;
  int driver = sim_driver_version();
  for (size_t i = 0; i < NPROCS; i++) {
    if (strcmp(procs[i].base, base) != 0 || procs[i].version > driver) continue;
    *seen = 1;
    if (procs[i].ptds != ptds) continue;
    if (kind) *kind = 1;
    if (procs[i].version > v) continue;
    if (!best || procs[i].version >= best->version) best = &procs[i];
  }
  return best;
}

/* As NVIDIA's driver answers (seen with the real R535 and R550 libcuda):
 * CUDA_SUCCESS whether or not a variant is found, pfn NULL and the status
 * saying why when none is (cuda.h: "will return CUDA_SUCCESS and set the
 * returned pfn to NULL").  With the per-thread flag, a symbol that has a
 * per-thread variant, only newer than the version asked for, gets no
 * variant at all (VERSION_NOT_SUFFICIENT), not the legacy one; the legacy
 * one is the answer only for symbols without a per-thread variant. */
static CUresult lookup(const char *sym, void **pfn, int v, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status) {
  if (!sym || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  int seen = 0, has_ptds = 0;
  const proc_row *r = NULL;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) r = pick(sym, v, 1, &seen, &has_ptds);
  if (!r && !has_ptds) r = pick(sym, v, 0, &seen, NULL);
  CUdriverProcAddressQueryResult st = r      ? CU_GET_PROC_ADDRESS_SUCCESS
                                      : seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                             : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  *pfn = r ? r->fn : NULL;
  if (status) *status = st;
  if (sim_boot() == 0 && sim_g.log_procaddr)
    sim_log("simcuda: procaddr %s version=%d flags=%llu -> %s", sym, v, (unsigned long long)flags,
            r                                                  ? "found"
            : st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version"
                                                               : "not-found");
  return CUDA_SUCCESS;
}

SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  SIM_ENTER(cuGetProcAddress_v2);
  return lookup(symbol, pfn, cudaVersion, flags, status);
}

SIM_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags) {
  SIM_ENTER(cuGetProcAddress);
  return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

/* For tests: the number of rows and row i's exported symbol name. */
SIM_API int simcuda_proc_row(int i, const char **sym) {
  if (i < 0 || (size_t)i >= NPROCS) return -1;
  *sym = procs[i].sym;
  return 0;
}
