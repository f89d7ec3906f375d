/* The per-device VRAM budget: the limit vx lets the program use natively
 * (VX_DEVICE_LIMIT, or physical minus VX_RESERVE) and the bytes charged to it
 * (native allocations and VMM memory), shared with other vx processes through
 * a per-GPU ledger (tiers/ledger.h).  Lock-free charging in this process. */
#ifndef VX_TIERS_BUDGET_H
#define VX_TIERS_BUDGET_H

#include <stdint.h>

#include "options.h"

/* Sets up device `dev` once: its physical size (from `physical` when
 * non-zero, else the real cuDeviceTotalMem_v2), its limit from o (settled
 * from the real cuMemGetInfo_v2 by the first budget_device_init() made while
 * a context of dev is current: the first vx allocation or memory query there;
 * provisional before), its concurrent-managed-access capability, and its
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
uint64_t budget_used(int dev);

/* Native bytes this process could still charge on dev now: its limit less
 * its use, and no more than the device's shared ledger leaves once every
 * live vx process's share (this one's included) is taken: what
 * cuMemGetInfo reports free under VX_REPORT_MEMORY=limit (interpose/meminfo.c). */
uint64_t budget_room(int dev);
/* Charges n bytes if they fit under the limit less `keep` (the residency
 * manager's room for movable data, place.c) and the shared ledger grants
 * them (other live vx processes' shares leave room): returns 1 (charged)
 * or 0 (nothing charged: the allocation goes to managed memory). */
int budget_try_charge_below(int dev, uint64_t n, uint64_t keep);
/* Charges n bytes even past the limit; reserved in the ledger when it has
 * room, else remembered as owed so releases stay exact. */
void budget_charge(int dev, uint64_t n);
/* Returns n bytes (saturating at zero), to the ledger too. */
void budget_release(int dev, uint64_t n);

// ---- reserve, concurrent managed access, host cap ----

/* VX_RESERVE for a device of `physical` bytes, at most a sixteenth of it. */
uint64_t budget_headroom(uint64_t physical, const vx_size_t *reserve);
/* Pure: the budget from `free` bytes reported free plus `held` bytes that
 * vx processes already hold on the device (they are budgeted, not gone),
 * capped at physical, less the headroom: *usable.  *limit is that, or
 * VX_DEVICE_LIMIT (device_limit, may be NULL) when smaller. */
void budget_size_from_free(uint64_t physical, uint64_t free, uint64_t held,
                           const vx_size_t *device_limit, const vx_size_t *reserve, uint64_t *limit,
                           uint64_t *usable);
/* 0 when device dev lacks CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS (no
 * managed placement there: said once at set-up), else 1 (also when unknown). */
int budget_managed_ok(int dev);

/* The host-memory cap: reads MemAvailable once (call at start-up; later
 * calls do nothing).  Thread-safe. */
void budget_host_init(void);
/* VX_HOST_MAX in bytes. */
uint64_t budget_host_max(void);
/* What vx can back beyond the device budgets: host RAM (the cap) and the
 * swap file (VX_NVME_LIMIT when the NVMe tier is on and spills above a
 * VX_HOST_LIMIT within the cap, else 0). */
void budget_host_capacity(uint64_t *host, uint64_t *nvme);
/* Commits n bytes of managed memory if all of vx's managed bytes still fit
 * the room the device budgets leave plus budget_host_capacity(): 1, or 0
 * (nothing committed: the allocation must fail with out of memory). */
int budget_host_try_commit(uint64_t n);
/* Returns n committed bytes (saturating at zero). */
void budget_host_uncommit(uint64_t n);

/* fork: the set-up lock is held across fork() and re-created in the child. */
void budget_atfork_prepare(void);
void budget_atfork_parent(void);
void budget_atfork_child(void);

#endif
