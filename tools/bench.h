/* `vx bench`: micro-benchmarks.  vx_cmd_bench (bench_hooks.c) dispatches
 * `vx bench hooks` itself and each other benchmark to its own function. */
#ifndef VX_TOOLS_BENCH_H
#define VX_TOOLS_BENCH_H

/* `vx bench hooks [--iters N]`: one JSON object with launch_ns_added and
 * alloc_free_ns_added.  Returns the exit status. */
int vx_bench_hooks(int argc, char **argv);
/* `vx bench nvme ...` (tools/bench_nvme.c, the NVMe tier's). */
int vx_bench_nvme(int argc, char **argv);

#endif
