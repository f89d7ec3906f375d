/* The report's timeline: a sampler thread that records, at a period that
 * doubles whenever its bounded ring fills, bytes per tier and migration. */
#ifndef VX_INTERPOSE_TIMELINE_H
#define VX_INTERPOSE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

/* One sample: process totals (all devices) at t seconds after start-up. */
typedef struct tl_sample {
  double t;
  /* Bytes the program has allocated through vx (live), as a partition:
   * native (device memory, VMM included) + managed (location not known:
   * device or host) + host (known to be in host memory) + nvme (in the
   * swap file) == live. */
  uint64_t native, managed, host, nvme, live;
  uint64_t up, down; /* cumulative bytes_up / bytes_down */
} tl_sample_t;

/* At most this many samples are kept; when full, every other one is dropped
 * and the period doubles, so any run length stays bounded. */
#define TL_MAX_SAMPLES 4096
#define TL_FIRST_PERIOD_MS 100

/* Starts the sampler (one thread, all signals blocked) when VX_REPORT is set;
 * takes the first sample.  Returns 0, or -errno (then the report has only the
 * samples taken at init and fini).  Call once, from start-up. */
int timeline_init(void);
/* The sampler also calls fn every `seconds` (0: never), with no lock held
 * (the report's rewrite).  Before timeline_init. */
void timeline_every(void (*fn)(void), unsigned seconds);
/* Stops and joins the sampler, then takes a last sample.  Idempotent. */
void timeline_fini(void);
/* Takes one sample now (the sampler does this every period).  Only after
 * timeline_init, else nothing. */
void timeline_sample(void);
/* Copies up to max samples, oldest first; returns how many. */
size_t timeline_copy(tl_sample_t *out, size_t max);
/* A sample of now (the partition below), without keeping it. */
void timeline_read(tl_sample_t *s);
/* Fills s's partition from the counters' sums (timeline.c says how). */
void timeline_partition(tl_sample_t *s, uint64_t native, uint64_t vmm, uint64_t managed,
                        uint64_t host_tier, uint64_t app_managed, uint64_t host_held,
                        uint64_t nvme);
/* Current period between samples in milliseconds (doubles on decimation). */
unsigned timeline_period_ms(void);
/* fork: prepare takes the lock, the parent releases it.  The child re-creates
 * it and has no sampler (no thread survives fork, and a child of a process
 * that used CUDA cannot use CUDA): its report keeps the samples so far plus
 * the one timeline_fini takes. */
void timeline_atfork_prepare(void);
void timeline_atfork_parent(void);
void timeline_atfork_child(void);

#endif
