/* Runs tools/bench_nvme.c on its own (without the rest of the vx tool), so
 * the benchmark's JSON contract is tested with the nvme tests. */
#include "bench.h"

int main(int argc, char **argv) {
  return vx_bench_nvme(argc - 1, argv + 1);
}
