/* The per-device VRAM budget: the limit vx lets the program use natively
 * (VX_DEVICE_LIMIT, or physical minus VX_RESERVE) and the bytes charged to it
 * (native allocations and VMM memory), shared with other vx processes through
 * a per-GPU ledger (tiers/ledger.h).  Lock-free charging in this process. */
#ifndef VX_TIERS_BUDGET_H
#define VX_TIERS_BUDGET_H

#include <stdint.h>

#include "options.h"

/* Sets up device `dev` once: its physical size (from `physical` when
 * non-zero, else the real cuDeviceTotalMem_v2), its limit from o, and its
 * ledger (o->LEDGER): "uuid" opens the ledger keyed by the device's UUID
 * (the real cuDeviceGetUuid_v2), NAME opens NAME-<dev>, "off" none.  The
 * ledger's capacity is physical minus VX_RESERVE (or this process's limit,
 * capped at physical, when VX_DEVICE_LIMIT asks for more).  A ledger that
 * cannot be opened or shared leaves private accounting, with one warning.
 * Returns 0, -EINVAL for a bad ordinal, or -EIO if the driver cannot say. */
int budget_device_init(int dev, uint64_t physical, const vx_options_t *o);
/* 1 if device `dev` has been set up. */
int budget_ready(int dev);
uint64_t budget_limit(int dev);
uint64_t budget_physical(int dev);
/* Physical memory minus VX_RESERVE (the reserve capped at a quarter of the
 * device): what native and managed data together may occupy.  0 when the
 * device is not initialised. */
uint64_t budget_usable(int dev);
uint64_t budget_used(int dev);
/* Charges n bytes if they fit under the limit and the shared ledger grants
 * them (other live vx processes' shares leave room): returns 1 (charged)
 * or 0 (nothing charged: the allocation goes to managed memory). */
int budget_try_charge(int dev, uint64_t n);
/* Charges n bytes even past the limit; reserved in the ledger when it has
 * room, else remembered as owed so releases stay exact. */
void budget_charge(int dev, uint64_t n);
/* Returns n bytes (saturating at zero), to the ledger too. */
void budget_release(int dev, uint64_t n);
/* 1 when device dev's budget is shared with other processes through a
 * ledger segment, 0 when private (off, unopenable, or not set up). */
int budget_shared(int dev);

/* fork: the set-up lock is held across fork() and re-created in the child. */
void budget_atfork_prepare(void);
void budget_atfork_parent(void);
void budget_atfork_child(void);

#endif
