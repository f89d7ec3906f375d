/* kit_hash.h: the test-pattern hash shared by the CUDA kernels and the host
 * (and the simulator's kernel bodies), so results match bit for bit. */
#ifndef VX_KIT_HASH_H
#define VX_KIT_HASH_H
#include <stdint.h>

#ifdef __CUDACC__
#define KIT_HD __host__ __device__ __forceinline__
#else
#define KIT_HD static inline
#endif

/* splitmix64 finaliser of (i, seed), low 32 bits. */
KIT_HD uint32_t kit_hash(uint32_t seed, uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + (((uint64_t)seed << 32) | seed);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (uint32_t)x;
}
#endif
