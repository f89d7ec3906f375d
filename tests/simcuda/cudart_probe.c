/* cudart_probe.c: a tiny program linked with the real libcudart; run over the
 * simulator it shows the runtime's start-up lookups (SIMCUDA_LOG=procaddr). */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
  int n = -1;
  cudaError_t r = cudaGetDeviceCount(&n);
  printf("cudaGetDeviceCount: %s, %d devices\n", cudaGetErrorName(r), n);
  r = cudaFree(0);
  printf("cudaFree(0): %s\n", cudaGetErrorName(r));
  return 0;
}
