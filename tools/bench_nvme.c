/* vx bench nvme: the swap pipeline (spill = copy -> crc -> write, restore =
 * read -> verify -> copy) against raw sequential I/O on the same file system. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "nvme.h"

typedef struct opts {
  const char *dir;
  uint64_t size;
  uint32_t chunk;
  int qd, bufs, repeat, buffered;
  nvme_engine_t engine;
} opts_t;

typedef struct figures {
  double spill, restore, raw_write, raw_read, cpu, raw_cpu, copy;
} figures_t;

// ---- small helpers ----

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int parse_size(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  int shift = 0;
  switch (*end) {
  case 'k':
  case 'K':
    shift = 10;
    end++;
    break;
  case 'm':
  case 'M':
    shift = 20;
    end++;
    break;
  case 'g':
  case 'G':
    shift = 30;
    end++;
    break;
  case 't':
  case 'T':
    shift = 40;
    end++;
    break;
  }
  if (*end == 'i' || *end == 'B') end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
  if (*end || v == 0 || v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int usage(FILE *f) {
  fprintf(f, "usage: vx bench nvme --dir DIR --size SIZE [--qd N] [--chunk S] [--bufs K]\n"
             "                     [--engine auto|uring|pool] [--repeat R] [--buffered]\n"
             "Spills SIZE bytes through the swap pipeline and restores them (memcpy stands in\n"
             "for the device copies), then compares with raw sequential I/O of the same size\n"
             "in DIR at the same queue depth, both O_DIRECT when DIR allows it (else, or with\n"
             "--buffered, both buffered with fsync and the file's cache dropped before reads).\n"
             "Prints one JSON object; figures in GB/s (1e9 bytes/s), best of R runs (3).\n"
             "Defaults: --qd 32 --chunk 2M --bufs qd+2 (bounce buffers; at most qd in flight).\n");
  return f == stdout ? 0 : 2;
}

static int parse(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.chunk = NVME_CHUNK_DEFAULT, .qd = NVME_QD_DEFAULT, .repeat = 3};
  const char *env = getenv("VX_NVME_ENGINE"); /* as libvx would run it; --engine wins */
  if (env && *env && nvme_engine_parse(env, &o->engine)) {
    fprintf(stderr, "vx bench nvme: VX_NVME_ENGINE must be auto, uring or pool, not '%s'\n", env);
    return -1;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    uint64_t n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    if (!strcmp(a, "--buffered")) {
      o->buffered = 1;
      continue;
    }
    if (!v) return -1;
    i++;
    if (!strcmp(a, "--dir"))
      o->dir = v;
    else if (!strcmp(a, "--size") && !parse_size(v, &n))
      o->size = n;
    else if (!strcmp(a, "--chunk") && !parse_size(v, &n) && n % NVME_ALIGN == 0 && n <= (1u << 30))
      o->chunk = (uint32_t)n;
    else if (!strcmp(a, "--qd") && (o->qd = atoi(v)) >= 1 && o->qd <= 1024)
      ;
    else if (!strcmp(a, "--bufs") && (o->bufs = atoi(v)) >= 1 && o->bufs <= 1024)
      ;
    else if (!strcmp(a, "--repeat") && (o->repeat = atoi(v)) >= 1 && o->repeat <= 100)
      ;
    else if (!strcmp(a, "--engine") && !nvme_engine_parse(v, &o->engine))
      ;
    else
      return -1;
  }
  if (!o->bufs) o->bufs = o->qd + 2; /* qd requests in flight while two buffers are being copied */
  return o->dir && o->size ? 0 : -1;
}

static void *alloc_aligned(size_t n) {
  void *p = NULL;
  return posix_memalign(&p, 4096, n) ? NULL : p;
}

// ---- raw sequential I/O: io_uring at depth qd, or qd threads (at most 4) ----

typedef struct raw {
  int fd, qd, write, direct;
  uint32_t chunk;
  uint64_t size;
  void **bufs;
  uint64_t next; /* thread form: next offset, under mu */
  pthread_mutex_t mu;
  int err;
} raw_t;

static int raw_uring(raw_t *r) {
  struct io_uring ring;
  int e = io_uring_queue_init((unsigned)r->qd, &ring, 0);
  if (e < 0) return e;
  struct iovec *iov = calloc((size_t)r->qd, sizeof *iov);
  for (int b = 0; iov && b < r->qd; b++)
    iov[b] = (struct iovec){.iov_base = r->bufs[b], .iov_len = r->chunk};
  /* the strongest plain form: registered buffers and file, as the swap uses */
  int fixed = iov && io_uring_register_buffers(&ring, iov, (unsigned)r->qd) == 0;
  int ffile = io_uring_register_files(&ring, &r->fd, 1) == 0;
  free(iov);
  uint64_t off = 0, done = 0;
  int inflight = 0, *free_b = malloc(sizeof(int) * (size_t)r->qd), nfree = 0;
  for (int b = 0; b < r->qd; b++)
    free_b[nfree++] = b;
  while (done < r->size && !e) {
    while (off < r->size && nfree) {
      int b = free_b[--nfree];
      uint32_t len = r->size - off < r->chunk ? (uint32_t)(r->size - off) : r->chunk;
      struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
      int fd = ffile ? 0 : r->fd;
      if (r->write && fixed)
        io_uring_prep_write_fixed(sqe, fd, r->bufs[b], len, off, b);
      else if (r->write)
        io_uring_prep_write(sqe, fd, r->bufs[b], len, off);
      else if (fixed)
        io_uring_prep_read_fixed(sqe, fd, r->bufs[b], len, off, b);
      else
        io_uring_prep_read(sqe, fd, r->bufs[b], len, off);
      if (ffile) sqe->flags |= IOSQE_FIXED_FILE;
      io_uring_sqe_set_data64(sqe, (uint64_t)b << 32 | len);
      off += len, inflight++;
    }
    io_uring_submit(&ring);
    struct io_uring_cqe *cqe;
    if ((e = io_uring_wait_cqe(&ring, &cqe)) == -EINTR) {
      e = 0;
      continue;
    }
    for (; !e && io_uring_peek_cqe(&ring, &cqe) == 0; inflight--) {
      uint64_t d = io_uring_cqe_get_data64(cqe);
      if (cqe->res != (int)(uint32_t)d) e = cqe->res < 0 ? cqe->res : -EIO;
      done += (uint32_t)d;
      free_b[nfree++] = (int)(d >> 32);
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  io_uring_queue_exit(&ring);
  free(free_b);
  return e;
}

typedef struct raw_arg {
  raw_t *r;
  void *buf;
} raw_arg_t;

static void *raw_worker(void *arg) {
  raw_arg_t *a = arg;
  raw_t *r = a->r;
  for (;;) {
    pthread_mutex_lock(&r->mu);
    uint64_t off = r->next;
    r->next += r->chunk;
    pthread_mutex_unlock(&r->mu);
    if (off >= r->size) return NULL;
    size_t len = r->size - off < r->chunk ? (size_t)(r->size - off) : r->chunk;
    ssize_t k =
        r->write ? pwrite(r->fd, a->buf, len, (off_t)off) : pread(r->fd, a->buf, len, (off_t)off);
    if (k != (ssize_t)len) {
      pthread_mutex_lock(&r->mu);
      r->err = k < 0 ? -errno : -EIO;
      pthread_mutex_unlock(&r->mu);
      return NULL;
    }
  }
}

static int raw_threads(raw_t *r) {
  int n = r->qd < 4 ? r->qd : 4;
  pthread_t th[4];
  raw_arg_t a[4];
  r->next = 0;
  r->err = 0;
  for (int i = 0; i < n; i++) {
    a[i] = (raw_arg_t){.r = r, .buf = r->bufs[i]};
    pthread_create(&th[i], NULL, raw_worker, &a[i]);
  }
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  return r->err;
}

/* Sequential write then read of r->size bytes; GB/s into w and rd. */
static int raw_run(raw_t *r, int use_uring, double *w, double *rd, double *cpu) {
  double c0 = cpu_s();
  for (r->write = 1; r->write >= 0; r->write--) {
    if (!r->write && !r->direct)
      posix_fadvise(r->fd, 0, 0, POSIX_FADV_DONTNEED); /* read from the device, not the cache */
    double t = now_s();
    int e = use_uring ? raw_uring(r) : raw_threads(r);
    if (!e && r->write && !r->direct && fsync(r->fd) < 0) e = -errno;
    if (e) return e;
    *(r->write ? w : rd) = (double)r->size / (now_s() - t) / 1e9;
  }
  *cpu = (cpu_s() - c0) / (2.0 * (double)r->size / 1e9);
  return 0;
}

static int raw_open(const char *dir, int buffered, int *direct) {
  int fd = buffered ? -1 : open(dir, O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
  *direct = fd >= 0;
  if (fd < 0) fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  return fd < 0 ? -errno : fd;
}

// ---- the pipeline ----

typedef struct mem {
  uint8_t *src, *dst;
  uint32_t chunk;
  double copy_s; /* wall time inside the callbacks: what DMA would do on a GPU */
} mem_t;

static int fill_cb(void *buf, const nvme_chunk_t *c, void *arg) {
  mem_t *m = arg;
  double t = now_s();
  memcpy(buf, m->src + c->key * m->chunk, c->len);
  m->copy_s += now_s() - t;
  return 0;
}

static int drain_cb(const void *buf, const nvme_chunk_t *c, void *arg) {
  mem_t *m = arg;
  double t = now_s();
  memcpy(m->dst + c->key * m->chunk, buf, c->len);
  m->copy_s += now_s() - t;
  return 0;
}

static void say(void *arg, const char *msg) {
  (void)arg;
  fprintf(stderr, "vx: %s\n", msg);
}

static int pipeline_run(nvme_swap_t *s, const opts_t *o, mem_t *m, figures_t *f, int direct) {
  size_t n = (size_t)((o->size + o->chunk - 1) / o->chunk);
  nvme_chunk_t *c = calloc(n, sizeof *c);
  if (!c) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    uint64_t left = o->size - (uint64_t)i * o->chunk;
    c[i] = (nvme_chunk_t){.key = i, .len = left < o->chunk ? (uint32_t)left : o->chunk};
  }
  m->copy_s = 0;
  double c0 = cpu_s(), t = now_s();
  int e = nvme_spill(s, c, n, fill_cb, m);
  if (!e && !direct)
    e = nvme_swap_flush(s); /* as the raw figure: on the device, out of the cache */
  double t1 = now_s();
  if (!e) e = nvme_restore(s, c, n, drain_cb, m);
  double t2 = now_s();
  f->cpu = (cpu_s() - c0) / (2.0 * (double)o->size / 1e9);
  f->copy = m->copy_s / (2.0 * (double)o->size / 1e9);
  for (size_t i = 0; !e && i < n; i++)
    e = nvme_slot_free(s, c[i].slot);
  free(c);
  f->spill = (double)o->size / (t1 - t) / 1e9;
  f->restore = (double)o->size / (t2 - t1) / 1e9;
  return e;
}

// ---- the run ----

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++)
    if (*s == '"' || *s == '\\')
      printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      printf("\\u%04x", *s);
    else
      putchar(*s);
  putchar('"');
}

static void best(figures_t *b, const figures_t *f, int first) {
  if (first) {
    *b = *f;
    return;
  }
  b->spill = f->spill > b->spill ? f->spill : b->spill;
  b->restore = f->restore > b->restore ? f->restore : b->restore;
  b->raw_write = f->raw_write > b->raw_write ? f->raw_write : b->raw_write;
  b->raw_read = f->raw_read > b->raw_read ? f->raw_read : b->raw_read;
  b->cpu = f->cpu < b->cpu ? f->cpu : b->cpu;
  b->raw_cpu = f->raw_cpu < b->raw_cpu ? f->raw_cpu : b->raw_cpu;
  b->copy = f->copy < b->copy ? f->copy : b->copy;
}

static void print_json(const opts_t *o, const nvme_info_t *in, const nvme_stats_t *st,
                       const figures_t *f, int verified) {
  printf("{\"dir\": ");
  json_str(o->dir);
  printf(", \"size\": %llu, \"chunk\": %u, \"qd\": %d, \"bufs\": %d, \"repeat\": %d",
         (unsigned long long)o->size, o->chunk, o->qd, o->bufs, o->repeat);
  printf(", \"engine\": \"%s\", \"o_direct\": %s, \"fixed_buffers\": %s, \"crc32c\": \"%s\"",
         nvme_engine_name(in->engine), in->o_direct ? "true" : "false",
         in->fixed_buffers ? "true" : "false", nvme_crc32c_hw_available() ? "sse4.2" : "software");
  printf(", \"spill_gbps\": %.3f, \"restore_gbps\": %.3f, \"raw_write_gbps\": %.3f, "
         "\"raw_read_gbps\": %.3f",
         f->spill, f->restore, f->raw_write, f->raw_read);
  printf(", \"raw_method\": \"%s\"", in->engine == NVME_ENGINE_URING
                                         ? "io_uring, registered buffers and file, qd in flight"
                                         : "min(qd,4) threads of pwrite/pread");
  printf(", \"spill_vs_raw\": %.3f, \"restore_vs_raw\": %.3f", f->spill / f->raw_write,
         f->restore / f->raw_read);
  printf(", \"cpu_seconds_per_gb\": %.4f, \"raw_cpu_seconds_per_gb\": %.4f", f->cpu, f->raw_cpu);
  printf(", \"copy_seconds_per_gb\": %.4f", f->copy); /* of it, the memcpy stand-ins */
  printf(", \"retries\": %llu, \"fallbacks\": %llu, \"verified\": %s",
         (unsigned long long)st->retries, (unsigned long long)st->fallbacks,
         verified ? "true" : "false");
  printf(", \"units\": \"GB/s = 1e9 bytes/s; cpu seconds (user+sys) per 1e9 bytes moved, "
         "spill+restore\"}\n");
}

static int bench(const opts_t *o, mem_t *m) {
  nvme_config_t cfg = {.dir = o->dir,
                       .chunk = o->chunk,
                       .qd = o->qd,
                       .engine = o->engine,
                       .limit = (o->size + o->chunk - 1) / o->chunk * o->chunk,
                       .grow_step = 1ull << 30,
                       .buffered = o->buffered,
                       .log = say};
  nvme_swap_t *s = NULL;
  int e = nvme_swap_open(&cfg, &s);
  if (e) {
    fprintf(stderr, "vx bench nvme: cannot open a swap file in %s: %s\n", o->dir, strerror(-e));
    return 1;
  }
  void **ring = calloc((size_t)o->bufs, sizeof *ring);
  for (int i = 0; ring && i < o->bufs; i++)
    if (!(ring[i] = alloc_aligned(o->chunk))) e = -ENOMEM;
  if (!ring) e = -ENOMEM;
  if (!e) e = nvme_register_buffers(s, ring, o->bufs, o->chunk);
  nvme_info_t in;
  nvme_swap_info(s, &in);
  raw_t r = {.qd = o->qd, .chunk = o->chunk, .size = o->size, .bufs = ring};
  pthread_mutex_init(&r.mu, NULL);
  r.fd = e ? -1 : raw_open(o->dir, !in.o_direct, &r.direct);
  if (!e && r.fd < 0) e = r.fd;
  if (!e && r.direct != in.o_direct)
    fprintf(stderr, "vx bench nvme: O_DIRECT differs between the swap and the raw file\n");
  if (!e && fallocate(r.fd, 0, 0, (off_t)o->size) < 0 && ftruncate(r.fd, (off_t)o->size) < 0)
    e = -errno;
  figures_t b = {0}, f;
  for (int k = 0; !e && k < o->repeat; k++) { /* alternate the order: drift hits both */
    int uring = in.engine == NVME_ENGINE_URING;
    if (k % 2) e = pipeline_run(s, o, m, &f, in.o_direct);
    if (!e) e = raw_run(&r, uring, &f.raw_write, &f.raw_read, &f.raw_cpu);
    if (!e && k % 2 == 0) e = pipeline_run(s, o, m, &f, in.o_direct);
    best(&b, &f, k == 0);
  }
  int verified = !e && !memcmp(m->src, m->dst, o->size);
  if (!e) {
    nvme_stats_t st;
    nvme_stats_get(s, &st);
    print_json(o, &in, &st, &b, verified);
  } else {
    fprintf(stderr, "vx bench nvme: %s\n", strerror(-e));
  }
  if (r.fd >= 0) close(r.fd);
  pthread_mutex_destroy(&r.mu);
  nvme_swap_close(s);
  for (int i = 0; ring && i < o->bufs; i++)
    free(ring[i]);
  free(ring);
  return e ? 1 : verified ? 0 : 1;
}

int vx_bench_nvme(int argc, char **argv) {
  opts_t o;
  int p = parse(argc, argv, &o);
  if (p > 0) return usage(stdout);
  if (p) /* tools/cli.c's form; this file is also linked without it (tests/nvme) */
    return fprintf(stderr, "vx bench nvme: needs --dir DIR and --size SIZE, with valid values\n"
                           "Try 'vx bench nvme --help'.\n"),
           2;
  mem_t m = {.src = alloc_aligned(o.size), .dst = alloc_aligned(o.size), .chunk = o.chunk};
  int rc = 1;
  if (!m.src || !m.dst) {
    fprintf(stderr, "vx bench nvme: cannot allocate 2 x %llu bytes\n", (unsigned long long)o.size);
  } else {
    for (uint64_t i = 0; i < o.size; i += 8) { /* every page touched, no zero pages */
      uint64_t v = i * 0x9E3779B97F4A7C15ull;
      memcpy(m.src + i, &v, o.size - i < 8 ? o.size - i : 8);
    }
    memset(m.dst, 0, o.size);
    rc = bench(&o, &m);
  }
  free(m.src);
  free(m.dst);
  return rc;
}
