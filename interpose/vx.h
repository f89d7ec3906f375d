/* libvx's internal state shared by the hook files: start-up, the options
 * in effect, per-thread facts, and the prologue every hook runs. */
#ifndef VX_INTERPOSE_VX_H
#define VX_INTERPOSE_VX_H

#include "ctr.h"
#include "hooks.h"
#include "log.h"
#include "options.h"

/* 0 = not started, 1 = active, 2 = pass-through (disabled or failed). */
extern int vx_state;
/* The options, parsed once at start-up; read-only afterwards. */
extern vx_options_t vx_opt;
/* Device of the calling thread's current context, as last seen by a memory
 * hook (0 until then): where launches and hook calls are counted. */
extern __thread int vx_tls_dev __attribute__((tls_model("initial-exec")));
/* Non-zero while this thread is inside vx start-up or vx's dlsym logic:
 * hooks reached then pass straight through. */
extern __thread int vx_tls_busy __attribute__((tls_model("initial-exec")));

/* Starts vx once (thread-safe, lazy) and returns 1 when vx is active, 0
 * when every hook must pass through.  Never blocks on itself. */
int vx_start(void);

static inline int vx_active(void) {
  int s = __atomic_load_n(&vx_state, __ATOMIC_ACQUIRE);
  if (__builtin_expect(s != 0, 1)) return s == 1;
  return vx_start();
}

/* Prologue of every CUDA/NVML hook: starts vx, counts the call. */
#define VX_ENTER(on)                                                                               \
  int on = vx_active();                                                                            \
  if (on) ctr_add(vx_tls_dev, VX_CTR_hook_calls, 1)

/* Calls a real CUDA entry point, or returns CUDA_ERROR_NOT_SUPPORTED when
 * the driver lacks it (or could not be loaded). */
#define VX_CALL(name, ...)                                                                         \
  (VX_REAL_FN(name) ? VX_REAL_FN(name)(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

/* Device of the current context (and remembers it in vx_tls_dev).
 * Returns 0, or -ENODEV when there is no current context. */
int vx_current_device(int *dev);

/* A driver error for a message: its name (CUDA_ERROR_OUT_OF_MEMORY), from
 * the driver's cuGetErrorName, else "CUresult N".  buf is returned when used. */
#define VX_CU_ERR_TEXT 32
/* A symbol of the loaded driver library outside the CUDA API (NULL: none). */
void *vx_real_driver_sym(const char *name);
const char *vx_cu_err(CUresult r, char buf[VX_CU_ERR_TEXT]);

/* Republishes the per-device limits in the live stats segment (after a
 * device's budget is set up). */
void vx_stats_limits_changed(void);

/* fork handlers of the VMM table (vmm.c) and the pinned-host table
 * (pinned.c). */
void vmm_atfork_prepare(void);
void vmm_atfork_parent(void);
void vmm_atfork_child(void);
void pinned_atfork_prepare(void);
void pinned_atfork_parent(void);
void pinned_atfork_child(void);

/* Writes the exit summary now (also run at exit), into a file only when
 * this process made a CUDA call since it started or forked. */
void vx_report_write(void);
/* Rewrites a regular VX_REPORT file while the program runs (the timeline's
 * sampler, every VX_REPORT_PERIOD seconds). */
void vx_report_refresh(void);
/* At start-up: says at once when the report could not be written. */
void vx_report_init(void);
void vx_report_atfork_child(void);

#endif
