/* Spill/restore through the pipeline on one engine (argv[1]: uring|pool):
 * random sizes and orders, slot reuse, counters, caller-registered rings,
 * callback errors, and concurrent jobs and readers. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static nvme_engine_t engine;
static char *dir;

static void setup(void) {
  dir = tu_mkdtemp();
}

static void teardown(void) {
  nvme_sys_reset();
  tu_rmdir(dir);
  dir = NULL;
}

static void pattern(uint8_t *p, size_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (uint8_t)(x >> 16);
  }
}

/* Every chunk's home memory, its stored slot, and what it must contain. */
typedef struct item {
  uint8_t *data, *back;
  uint32_t len;
  int32_t slot; /* -1: not on the swap */
} item_t;

static void random_rounds(uint32_t chunk, int nitems, int rounds, int qd) {
  unsigned seed = tu_seed("random spill/restore");
  srand(seed);
  nvme_swap_t *s = tu_open(dir, engine, chunk, (uint64_t)chunk * nitems, qd);
  item_t *it = calloc((size_t)nitems, sizeof *it);
  nvme_chunk_t *c = calloc((size_t)nitems, sizeof *c);
  int *idx = calloc((size_t)nitems, sizeof *idx);
  uint64_t written = 0, read = 0, held = 0;
  uint32_t peak = 0, used = 0;
  for (int i = 0; i < nitems; i++) {
    it[i].len = 1 + (uint32_t)rand() % chunk;
    if (rand() % 4 == 0) it[i].len = chunk;
    it[i].data = malloc(chunk);
    it[i].back = malloc(chunk);
    pattern(it[i].data, it[i].len, seed + (unsigned)i);
    it[i].slot = -1;
  }
  for (int r = 0; r < rounds; r++) {
    int n = 0, op = rand() % 3; /* 0: spill, 1: restore, 2: restore and free */
    for (int i = 0; i < nitems; i++)
      if ((op == 0) == (it[i].slot < 0) && rand() % 2) idx[n++] = i;
    for (int k = n - 1; k > 0; k--) { /* a random order */
      int j = rand() % (k + 1), t = idx[k];
      idx[k] = idx[j], idx[j] = t;
    }
    for (int k = 0; k < n; k++) {
      item_t *x = &it[idx[k]];
      c[k] = (nvme_chunk_t){.key = (uint64_t)idx[k],
                            .arg = op ? x->back : x->data,
                            .len = op ? 0 : x->len,
                            .slot = x->slot};
      if (op) memset(x->back, 0xEE, chunk);
    }
    int rc = op == 0 ? nvme_spill(s, c, (size_t)n, tu_fill, NULL)
                     : nvme_restore(s, c, (size_t)n, tu_drain, NULL);
    ck_assert_msg(rc == 0, "round %d op %d: %s", r, op, strerror(-rc));
    for (int k = 0; k < n; k++) {
      item_t *x = &it[idx[k]];
      ck_assert_int_eq(c[k].status, 0);
      ck_assert_uint_eq(c[k].key, (uint64_t)idx[k]);
      if (op == 0) {
        ck_assert_int_ge(c[k].slot, 0);
        x->slot = c[k].slot;
        written += x->len, held += x->len, used++;
        continue;
      }
      ck_assert_uint_eq(c[k].len, x->len);
      ck_assert_msg(!memcmp(x->back, x->data, x->len), "chunk %d differs after restore", idx[k]);
      read += x->len;
      if (op == 2) {
        ck_assert_int_eq(nvme_slot_free(s, x->slot), 0);
        ck_assert_int_eq(nvme_slot_free(s, x->slot), -EINVAL); /* twice */
        x->slot = -1;
        held -= x->len, used--;
      }
    }
    peak = used > peak ? used : peak;
    nvme_stats_t st;
    nvme_stats_get(s, &st);
    ck_assert_uint_eq(st.write_bytes, written);
    ck_assert_uint_eq(st.read_bytes, read);
    ck_assert_uint_eq(st.bytes, held);
    ck_assert_uint_eq(st.retries + st.write_failures + st.read_failures + st.checksum_failures, 0);
    nvme_info_t info;
    nvme_swap_info(s, &info);
    ck_assert_uint_eq(info.slots_used, used);
  }
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.engine, engine);
  ck_assert_uint_le(info.slots_file, (uint64_t)nitems); /* never past the limit: slots reused */
  ck_assert_uint_ge(info.slots_file, peak);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_gt(st.write_ns, 0);
  nvme_swap_close(s);
  for (int i = 0; i < nitems; i++)
    free(it[i].data), free(it[i].back);
  free(it), free(c), free(idx);
  ck_assert_int_eq(tu_dir_entries(dir), 0);
}

START_TEST(random_small_chunks) {
  random_rounds(4096, 64, 40, 8);
}
END_TEST

START_TEST(random_mid_chunks) {
  random_rounds(192u << 10, 24, 30, 4);
}
END_TEST

START_TEST(random_qd1) {
  random_rounds(64u << 10, 16, 20, 1);
}
END_TEST

/* The default 2 MiB slot, full and partial chunks. */
START_TEST(default_chunk) {
  nvme_swap_t *s = tu_open(dir, engine, 0, 0, 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_uint_eq(info.chunk, 2u << 20);
  ck_assert_int_eq(info.qd, 32);
  enum { N = 6 };
  uint8_t *src[N], *dst[N];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    uint32_t len = i % 2 ? (2u << 20) : (2u << 20) - 4096 * (uint32_t)i - 17;
    src[i] = malloc(2u << 20), dst[i] = calloc(1, 2u << 20);
    pattern(src[i], len, (unsigned)i);
    c[i] = (nvme_chunk_t){.arg = src[i], .len = len};
  }
  ck_assert_int_eq(nvme_spill(s, c, N, tu_fill, NULL), 0);
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(s, c, N, tu_drain, NULL), 0);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(memcmp(src[i], dst[i], c[i].len), 0);
    free(src[i]), free(dst[i]);
  }
  nvme_swap_close(s);
}
END_TEST

/* tiers hands in its own (pinned) ring: any count, buffers bigger than a slot. */
START_TEST(caller_ring) {
  enum { CH = 16384, N = 40, K = 3 };
  nvme_swap_t *s = tu_open(dir, engine, CH, 64 * CH, 8);
  void *ring[K], *bad[K];
  for (int i = 0; i < K; i++) {
    ck_assert_int_eq(posix_memalign(&ring[i], 4096, 2 * CH), 0);
    bad[i] = (char *)ring[i] + 512;
  }
  ck_assert_int_eq(nvme_register_buffers(s, bad, K, CH), -EINVAL);         /* misaligned */
  ck_assert_int_eq(nvme_register_buffers(s, ring, K, CH - 4096), -EINVAL); /* too small */
  ck_assert_int_eq(nvme_register_buffers(s, ring, 0, CH), -EINVAL);
  ck_assert_int_eq(nvme_register_buffers(s, ring, K, 2 * CH), 0);
  static uint8_t src[N][CH], dst[N][CH];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    pattern(src[i], CH, 100u + (unsigned)i);
    c[i] = (nvme_chunk_t){.arg = src[i], .len = CH - (uint32_t)i};
  }
  ck_assert_int_eq(nvme_spill(s, c, N, tu_fill, NULL), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  if (engine == NVME_ENGINE_URING) ck_assert_int_eq(info.fixed_buffers, 1);
  nvme_unregister_buffers(s); /* the rest runs on the internal ring */
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(s, c, N, tu_drain, NULL), 0);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(memcmp(src[i], dst[i], CH - (size_t)i), 0);
  nvme_swap_close(s);
  for (int i = 0; i < K; i++)
    free(ring[i]);
}
END_TEST

static int fill_fails_odd(void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  if (c->key % 2) return -EFAULT;
  memcpy(buf, c->arg, c->len);
  return 0;
}

static int drain_fails_3(const void *buf, const nvme_chunk_t *c, void *arg) {
  (void)arg;
  if (c->key == 3) return -EFAULT;
  memcpy(c->arg, buf, c->len);
  return 0;
}

START_TEST(callback_errors) {
  enum { CH = 8192, N = 8 };
  nvme_swap_t *s = tu_open(dir, engine, CH, 64 * CH, 4);
  static uint8_t src[N][CH], dst[N][CH];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    pattern(src[i], CH, (unsigned)i);
    c[i] = (nvme_chunk_t){.key = (uint64_t)i, .arg = src[i], .len = CH};
  }
  ck_assert_int_eq(nvme_spill(s, c, N, fill_fails_odd, NULL), -EFAULT);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(c[i].status, i % 2 ? -EFAULT : 0);
    ck_assert_int_eq(c[i].slot >= 0, i % 2 == 0);
  }
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_uint_eq(info.slots_used, N / 2); /* failed chunks gave their slots back */
  nvme_chunk_t r[N / 2];
  for (int i = 0; i < N / 2; i++)
    r[i] = (nvme_chunk_t){.key = (uint64_t)(2 * i + 1), .arg = dst[2 * i], .slot = c[2 * i].slot};
  r[1].key = 3;
  ck_assert_int_eq(nvme_restore(s, r, N / 2, drain_fails_3, NULL), -EFAULT);
  for (int i = 0; i < N / 2; i++) {
    ck_assert_int_eq(r[i].status, r[i].key == 3 ? -EFAULT : 0);
    if (r[i].key != 3) ck_assert_int_eq(memcmp(dst[2 * i], src[2 * i], CH), 0);
  }
  nvme_chunk_t bad[3] = {{.slot = -1}, {.slot = 1000}, {.slot = c[1].slot}};
  ck_assert_int_eq(nvme_restore(s, bad, 3, tu_drain, NULL), -EINVAL);
  nvme_chunk_t big = {.arg = src[0], .len = CH + 1};
  ck_assert_int_eq(nvme_spill(s, &big, 1, tu_fill, NULL), -EINVAL);
  ck_assert_int_eq(nvme_spill(s, NULL, 0, tu_fill, NULL), 0);
  nvme_swap_close(s);
}
END_TEST

/* Past the limit: -ENOSPC per chunk, the caller keeps the data; freed slots
 * are reused and the file never grows past the limit. */
START_TEST(limit_and_reuse) {
  enum { CH = 4096, LIMIT = 5, N = 8 };
  nvme_config_t cfg = {.dir = dir,
                       .engine = engine,
                       .chunk = CH,
                       .limit = LIMIT * CH + 100,
                       .grow_step = 2 * CH,
                       .log = tu_log};
  nvme_swap_t *s = NULL;
  ck_assert_int_eq(nvme_swap_open(&cfg, &s), 0);
  static uint8_t src[N][CH], dst[CH];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    pattern(src[i], CH, (unsigned)i);
    c[i] = (nvme_chunk_t){.arg = src[i], .len = CH};
  }
  ck_assert_int_eq(nvme_spill(s, c, N, tu_fill, NULL), -ENOSPC);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(c[i].status, i < LIMIT ? 0 : -ENOSPC);
    ck_assert_int_eq(c[i].slot >= 0, i < LIMIT);
  }
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.enospc, N - LIMIT);
  ck_assert_uint_eq(st.write_failures, N - LIMIT);
  ck_assert_uint_eq(st.file_bytes, LIMIT * CH);
  ck_assert_uint_eq(st.bytes, LIMIT * CH);
  int32_t freed = c[2].slot;
  ck_assert_int_eq(nvme_slot_free(s, freed), 0);
  nvme_chunk_t again = {.arg = src[7], .len = CH};
  ck_assert_int_eq(nvme_spill(s, &again, 1, tu_fill, NULL), 0);
  ck_assert_int_eq(again.slot, freed);
  again.arg = dst;
  ck_assert_int_eq(nvme_restore(s, &again, 1, tu_drain, NULL), 0);
  ck_assert_int_eq(memcmp(dst, src[7], CH), 0);
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.file_bytes, LIMIT * CH);
  nvme_swap_close(s);
}
END_TEST

// ---- threads ----

typedef struct worker {
  nvme_swap_t *s;
  int id, ok;
} worker_t;

static void *job_thread(void *arg) {
  worker_t *w = arg;
  enum { CH = 8192, N = 12 };
  static uint8_t src[4][N][CH], dst[4][N][CH];
  w->ok = 1;
  for (int round = 0; round < 5; round++) {
    nvme_chunk_t c[N];
    for (int i = 0; i < N; i++) {
      pattern(src[w->id][i], CH, (unsigned)(w->id * 1000 + round * 50 + i));
      c[i] = (nvme_chunk_t){.arg = src[w->id][i], .len = CH};
    }
    w->ok &= nvme_spill(w->s, c, N, tu_fill, NULL) == 0;
    for (int i = 0; i < N; i++)
      c[i].arg = dst[w->id][i];
    w->ok &= nvme_restore(w->s, c, N, tu_drain, NULL) == 0;
    for (int i = 0; i < N; i++) {
      w->ok &= !memcmp(src[w->id][i], dst[w->id][i], CH);
      w->ok &= nvme_slot_free(w->s, c[i].slot) == 0;
    }
  }
  return NULL;
}

static volatile int stop_reader;

static void *stats_reader(void *arg) {
  nvme_stats_t st;
  nvme_info_t info;
  while (!__atomic_load_n(&stop_reader, __ATOMIC_RELAXED)) {
    nvme_stats_get(arg, &st);
    nvme_swap_info(arg, &info);
  }
  return NULL;
}

START_TEST(concurrent_jobs) {
  nvme_swap_t *s = tu_open(dir, engine, 8192, 1 << 20, 4);
  pthread_t th[4], rd;
  worker_t w[4];
  __atomic_store_n(&stop_reader, 0, __ATOMIC_RELAXED);
  pthread_create(&rd, NULL, stats_reader, s);
  for (int i = 0; i < 4; i++) {
    w[i] = (worker_t){.s = s, .id = i};
    pthread_create(&th[i], NULL, job_thread, &w[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ck_assert_int_eq(w[i].ok, 1);
  }
  __atomic_store_n(&stop_reader, 1, __ATOMIC_RELAXED);
  pthread_join(rd, NULL);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.write_bytes, 4ull * 5 * 12 * 8192);
  ck_assert_uint_eq(st.read_bytes, st.write_bytes);
  ck_assert_uint_eq(st.bytes, 0);
  nvme_swap_close(s);
}
END_TEST

/* A forked child drops its copies (pthread_atfork child handler); the
 * parent's swap keeps working. */
START_TEST(fork_child_abandons) {
  enum { CH = 8192 };
  nvme_swap_t *s = tu_open(dir, engine, CH, 64 * CH, 4);
  static uint8_t src[CH], dst[CH];
  pattern(src, CH, 9);
  nvme_chunk_t c = {.arg = src, .len = CH};
  ck_assert_int_eq(nvme_spill(s, &c, 1, tu_fill, NULL), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    nvme_swap_abandon(s);
    char link[512];
    _exit(tu_find_fd(getpid(), dir, link, sizeof link) == -1 ? 0 : 3);
  }
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st));
  ck_assert_int_eq(WEXITSTATUS(st), 0);
  c.arg = dst;
  ck_assert_int_eq(nvme_restore(s, &c, 1, tu_drain, NULL), 0);
  ck_assert_int_eq(memcmp(src, dst, CH), 0);
  nvme_chunk_t d = {.arg = src, .len = CH};
  ck_assert_int_eq(nvme_spill(s, &d, 1, tu_fill, NULL), 0);
  nvme_swap_close(s);
}
END_TEST

// ---- overlap (thread pool: its I/O can be held in the seam) ----

static long fills, drains, io_calls, io_now, io_max;

static int wait_for(long *what, long n) { /* 1 when *what reached n within 2 s */
  for (int i = 0; i < 2000 && __atomic_load_n(what, __ATOMIC_ACQUIRE) < n; i++)
    usleep(1000);
  return __atomic_load_n(what, __ATOMIC_ACQUIRE) >= n;
}

static void io_enter(void) {
  long now = __atomic_add_fetch(&io_now, 1, __ATOMIC_ACQ_REL), m;
  while ((m = __atomic_load_n(&io_max, __ATOMIC_ACQUIRE)) < now &&
         !__atomic_compare_exchange_n(&io_max, &m, now, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    ;
  /* Hold the request until a second one is in flight (100 ms at most, so the
   * last one of a job does not wait long), then a little more, so that a
   * third could enter if the engine allowed it. */
  for (int i = 0; i < 1000 && __atomic_load_n(&io_now, __ATOMIC_ACQUIRE) < 2; i++)
    usleep(100);
  usleep(2000);
}

static long slow_first_missed;

/* The first write waits for the second chunk's fill: a pipeline that
 * copied and wrote one chunk at a time would stall here. */
static ssize_t overlap_pwrite(int fd, const void *b, size_t n, off_t off) {
  if (__atomic_add_fetch(&io_calls, 1, __ATOMIC_ACQ_REL) == 1 && !wait_for(&fills, 2))
    __atomic_store_n(&slow_first_missed, 1, __ATOMIC_RELEASE);
  io_enter();
  ssize_t r = pwrite(fd, b, n, off);
  __atomic_sub_fetch(&io_now, 1, __ATOMIC_ACQ_REL);
  return r;
}

/* Reads after the first wait for the first drain: a pipeline that read
 * everything before copying anything would stall here. */
static ssize_t overlap_pread(int fd, void *b, size_t n, off_t off) {
  if (__atomic_add_fetch(&io_calls, 1, __ATOMIC_ACQ_REL) >= 3 && !wait_for(&drains, 1))
    __atomic_store_n(&slow_first_missed, 1, __ATOMIC_RELEASE);
  io_enter();
  ssize_t r = pread(fd, b, n, off);
  __atomic_sub_fetch(&io_now, 1, __ATOMIC_ACQ_REL);
  return r;
}

static int count_fill(void *buf, const nvme_chunk_t *c, void *arg) {
  __atomic_add_fetch(&fills, 1, __ATOMIC_ACQ_REL);
  return tu_fill(buf, c, arg);
}

static int count_drain(const void *buf, const nvme_chunk_t *c, void *arg) {
  int r = tu_drain(buf, c, arg);
  __atomic_add_fetch(&drains, 1, __ATOMIC_ACQ_REL);
  return r;
}

START_TEST(copies_overlap_io) {
  enum { CH = 65536, N = 12 };
  nvme_swap_t *s = tu_open(dir, NVME_ENGINE_POOL, CH, 64 * CH, 8);
  static uint8_t src[N][CH], dst[N][CH];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    pattern(src[i], CH, 50u + (unsigned)i);
    c[i] = (nvme_chunk_t){.arg = src[i], .len = CH};
  }
  fills = drains = io_calls = io_now = io_max = slow_first_missed = 0;
  nvme_sys.pwrite = overlap_pwrite;
  ck_assert_int_eq(nvme_spill(s, c, N, count_fill, NULL), 0);
  ck_assert_int_eq(slow_first_missed, 0);
  ck_assert_int_ge(io_max, 2); /* several writes in flight */
  io_calls = io_max = 0;
  nvme_sys.pread = overlap_pread;
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(s, c, N, count_drain, NULL), 0);
  ck_assert_int_eq(slow_first_missed, 0);
  ck_assert_int_ge(io_max, 2); /* several reads in flight */
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(memcmp(src[i], dst[i], CH), 0);
  nvme_sys_reset();
  nvme_swap_close(s);
}
END_TEST

/* A ring bigger than qd: never more than qd requests in flight. */
START_TEST(qd_caps_inflight) {
  enum { CH = 16384, N = 12, K = 6 };
  nvme_swap_t *s = tu_open(dir, NVME_ENGINE_POOL, CH, 64 * CH, 2);
  void *ring[K];
  for (int i = 0; i < K; i++)
    ck_assert_int_eq(posix_memalign(&ring[i], 4096, CH), 0);
  ck_assert_int_eq(nvme_register_buffers(s, ring, K, CH), 0);
  static uint8_t src[N][CH], dst[N][CH];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    pattern(src[i], CH, 70u + (unsigned)i);
    c[i] = (nvme_chunk_t){.arg = src[i], .len = CH};
  }
  fills = drains = io_calls = io_now = io_max = slow_first_missed = 0;
  nvme_sys.pwrite = overlap_pwrite;
  nvme_sys.pread = overlap_pread;
  ck_assert_int_eq(nvme_spill(s, c, N, count_fill, NULL), 0);
  ck_assert_int_eq(io_max, 2);
  io_calls = io_max = 0;
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(s, c, N, count_drain, NULL), 0);
  ck_assert_int_eq(io_max, 2);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(memcmp(src[i], dst[i], CH), 0);
  nvme_sys_reset();
  nvme_swap_close(s);
  for (int i = 0; i < K; i++)
    free(ring[i]);
}
END_TEST

static int no_register(struct io_uring *ring, const struct iovec *iov, unsigned n) {
  (void)ring, (void)iov, (void)n;
  return -ENOMEM; /* e.g. RLIMIT_MEMLOCK */
}

/* Buffers io_uring will not register: plain reads and writes, said once. */
START_TEST(unregistered_buffers) {
  int base = tu_fs_fallbacks(dir, engine, NULL, NULL);
  nvme_sys.uring_register_buffers = no_register;
  enum { CH = 8192, N = 6 };
  nvme_swap_t *s = tu_open(dir, engine, CH, 64 * CH, 4);
  static uint8_t src[N][CH], dst[N][CH];
  nvme_chunk_t c[N];
  for (int i = 0; i < N; i++) {
    pattern(src[i], CH, 90u + (unsigned)i);
    c[i] = (nvme_chunk_t){.arg = src[i], .len = CH};
  }
  ck_assert_int_eq(nvme_spill(s, c, N, tu_fill, NULL), 0);
  for (int i = 0; i < N; i++)
    c[i].arg = dst[i];
  ck_assert_int_eq(nvme_restore(s, c, N, tu_drain, NULL), 0);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(memcmp(src[i], dst[i], CH), 0);
  nvme_info_t info;
  nvme_swap_info(s, &info);
  ck_assert_int_eq(info.fixed_buffers, 0);
  nvme_stats_t st;
  nvme_stats_get(s, &st);
  ck_assert_uint_eq(st.fallbacks, 1 + base);
  ck_assert_int_eq(tu_log_count, 1 + base);
  ck_assert_ptr_nonnull(strstr(tu_log_last, "registration failed"));
  nvme_swap_close(s);
}
END_TEST

int main(int argc, char **argv) {
  engine = tu_engine_arg(argc, argv);
  Suite *s =
      suite_create(engine == NVME_ENGINE_URING ? "nvme_pipeline_uring" : "nvme_pipeline_pool");
  TCase *tc = tcase_create("pipeline");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, random_small_chunks);
  tcase_add_test(tc, random_mid_chunks);
  tcase_add_test(tc, random_qd1);
  tcase_add_test(tc, default_chunk);
  tcase_add_test(tc, caller_ring);
  tcase_add_test(tc, callback_errors);
  tcase_add_test(tc, limit_and_reuse);
  tcase_add_test(tc, concurrent_jobs);
  tcase_add_test(tc, fork_child_abandons);
  if (engine == NVME_ENGINE_URING) tcase_add_test(tc, unregistered_buffers);
  if (engine == NVME_ENGINE_POOL) {
    tcase_add_test(tc, copies_overlap_io);
    tcase_add_test(tc, qd_caps_inflight);
  }
  suite_add_tcase(s, tc);
  return vx_check_run(s, 1);
}
