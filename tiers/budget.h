/* The per-device VRAM budget: the limit vx lets the program use natively
 * (VX_DEVICE_LIMIT, or physical minus VX_RESERVE) and the bytes charged to it
 * (native allocations and VMM memory).  Lock-free charging. */
#ifndef VX_TIERS_BUDGET_H
#define VX_TIERS_BUDGET_H

#include <stdint.h>

#include "options.h"

/* Sets up device `dev` once: its physical size (from `physical` when
 * non-zero, else the real cuDeviceTotalMem_v2) and its limit from o.
 * Returns 0, -EINVAL for a bad ordinal, or -EIO if the driver cannot say. */
int budget_device_init(int dev, uint64_t physical, const vx_options_t *o);
/* 1 if device `dev` has been set up. */
int budget_ready(int dev);
uint64_t budget_limit(int dev);
uint64_t budget_physical(int dev);
uint64_t budget_used(int dev);
/* Charges n bytes if they fit under the limit: returns 1 (charged) or 0. */
int budget_try_charge(int dev, uint64_t n);
/* Charges n bytes even past the limit. */
void budget_charge(int dev, uint64_t n);
/* Returns n bytes (saturating at zero). */
void budget_release(int dev, uint64_t n);

/* fork: the set-up lock is held across fork() and re-created in the child. */
void budget_atfork_prepare(void);
void budget_atfork_parent(void);
void budget_atfork_child(void);

#endif
