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

/* fork handlers of the VMM table (vmm.c) and the pinned-host table
 * (pinned.c). */
void vmm_atfork_prepare(void);
void vmm_atfork_parent(void);
void vmm_atfork_child(void);
void pinned_atfork_prepare(void);
void pinned_atfork_parent(void);
void pinned_atfork_child(void);

#endif
