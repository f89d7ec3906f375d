/* crc32c (Castagnoli) for the slot checksums: software slicing-by-8, and the
 * SSE4.2 crc32 instruction when the CPU has it (chosen at run time). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "nvme.h"

#define POLY 0x82F63B78u /* reflected 0x1EDC6F41 */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_build(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (POLY & (0u - (c & 1)));
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

static uint32_t sw_bytes(uint32_t c, const uint8_t *p, size_t n) {
  while (n--)
    c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
  return c;
}

uint32_t nvme_crc32c_sw(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&table_once, table_build);
  const uint8_t *p = buf;
  uint32_t c = ~crc;
  size_t head = (8 - ((uintptr_t)p & 7)) & 7;
  if (head > n) head = n;
  c = sw_bytes(c, p, head);
  p += head;
  n -= head;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8); /* little-endian: x86, arm64 */
    w ^= c;
    c = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
        table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
        table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
  }
  return ~sw_bytes(c, p, n);
}

#if defined(__x86_64__)
#include <nmmintrin.h>

// ---- combining: crc(A || B) from crc(A), crc(B) and len(B) ----

/* a * b modulo the polynomial, in the reflected bit order. */
static uint32_t multmodp(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
  }
  return p;
}

static uint32_t x2n[32]; /* x^(2^k) mod p */
static pthread_once_t x2n_once = PTHREAD_ONCE_INIT;

static void x2n_build(void) {
  uint32_t p = 1u << 30; /* x^1 */
  x2n[0] = p;
  for (int k = 1; k < 32; k++)
    x2n[k] = p = multmodp(p, p);
}

/* x^(8 * bytes) mod p: what shifting a CRC register over `bytes` zero bytes multiplies by. */
static uint32_t shift_bytes(size_t bytes) {
  uint32_t p = 1u << 31; /* x^0 */
  for (unsigned k = 3; bytes; bytes >>= 1, k++)
    if (bytes & 1) p = multmodp(x2n[k & 31], p);
  return p;
}

#define STRIPE_MIN 4096 /* below this, one stream is as fast */

/* Three independent streams hide the crc32 instruction's 3-cycle latency;
 * their registers are then combined (CRC is linear over GF(2)). */
__attribute__((target("sse4.2"))) static uint64_t hw_stripes(uint64_t c, const uint8_t *p,
                                                             size_t len) {
  pthread_once(&x2n_once, x2n_build);
  uint64_t c1 = 0, c2 = 0;
  const uint8_t *p1 = p + len, *p2 = p + 2 * len;
  for (size_t i = 0; i < len; i += 8) {
    uint64_t w0, w1, w2;
    memcpy(&w0, p + i, 8);
    memcpy(&w1, p1 + i, 8);
    memcpy(&w2, p2 + i, 8);
    c = _mm_crc32_u64(c, w0);
    c1 = _mm_crc32_u64(c1, w1);
    c2 = _mm_crc32_u64(c2, w2);
  }
  uint32_t k = shift_bytes(len);
  return multmodp(multmodp((uint32_t)c, k) ^ (uint32_t)c1, k) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2"))) static uint32_t hw_crc(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = ~crc;
  for (; n && ((uintptr_t)p & 7); n--)
    c = _mm_crc32_u8((uint32_t)c, *p++);
  if (n >= 3 * STRIPE_MIN) {
    size_t len = n / 3 & ~(size_t)7;
    c = hw_stripes(c, p, len);
    p += 3 * len;
    n -= 3 * len;
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; n; n--)
    c = _mm_crc32_u8((uint32_t)c, *p++);
  return ~(uint32_t)c;
}

int nvme_crc32c_hw_available(void) {
  return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

uint32_t nvme_crc32c_hw(uint32_t crc, const void *p, size_t n) {
  return nvme_crc32c_hw_available() ? hw_crc(crc, p, n) : nvme_crc32c_sw(crc, p, n);
}
#else
int nvme_crc32c_hw_available(void) {
  return 0;
}
uint32_t nvme_crc32c_hw(uint32_t crc, const void *p, size_t n) {
  return nvme_crc32c_sw(crc, p, n);
}
#endif

uint32_t nvme_crc32c(uint32_t crc, const void *p, size_t n) {
  return nvme_crc32c_hw(crc, p, n);
}
