/* costs.h: the one set of cost-model numbers shared by `vx replay` (offline,
 * tools/replay_engine.c) and the simulated driver (live, tests/simcuda), so a
 * trace played live and replayed offline is charged the same. */
#ifndef VX_POL_COSTS_H
#define VX_POL_COSTS_H

/* Host link, each direction (full duplex): PCIe 4 x16 as measured, GB/s
 * (= bytes per ns). */
#define VX_COST_LINK_GBPS 25.0
/* Device memory bandwidth, GB/s: what a launch with no measured duration
 * costs per byte its ranges cover (H100-class HBM). */
#define VX_COST_DEV_GBPS 3000.0
/* One fault batch's fixed cost (the driver's fault handling round trip), ns. */
#define VX_COST_FAULT_NS 45000
/* Chunks (2 MiB) serviced per fault batch. */
#define VX_COST_FAULT_BATCH 32
/* Launch overhead the simulator adds to a kernel that does not say how long
 * it runs, ns.  The replay has no such term: a trace's dur_ns is the whole
 * kernel time, and `vx play` tells the simulator exactly that. */
#define VX_COST_LAUNCH_NS 3000

#endif
