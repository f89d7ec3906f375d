/* doctor.c: `vx doctor`: what works on this machine and what to fix.
 * This file: the report lines, the command, and the CUDA driver checks. */
#include <cuda.h>
#include <dlfcn.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_doctor.h"
#include "commands.h"

static const char usage[] =
    "usage: vx doctor [--nvme-dir D] [--program CMD] [--json]\n"
    "Checks the driver, managed memory, io_uring, the NVMe directory and\n"
    "preloading; each line is ok, warn or fail with the fix.  Exits 1 if\n"
    "any check fails.\n"
    "  --nvme-dir D   directory to check for the NVMe tier (default VX_NVME_DIR)\n"
    "  --program CMD  also check that LD_PRELOAD can reach CMD\n"
    "  --json         one JSON object\n"
    "  -h, --help     this text\n";

#define MAX_LINES 64

static struct line {
  char name[32];
  enum vx_verdict v;
  char detail[512], fix[512];
} lines[MAX_LINES];
static int nlines;

void vx_doctor_add(const char *name, enum vx_verdict v, const char *fix, const char *fmt, ...) {
  if (nlines == MAX_LINES) return;
  struct line *l = &lines[nlines++];
  snprintf(l->name, sizeof l->name, "%s", name);
  l->v = v;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->detail, sizeof l->detail, fmt, ap);
  va_end(ap);
  snprintf(l->fix, sizeof l->fix, "%s", fix && v != VX_OK ? fix : "");
}

// ---- driver ----

typedef CUresult (*fn_init)(unsigned);
typedef CUresult (*fn_int)(int *);
typedef CUresult (*fn_dev)(CUdevice *, int);
typedef CUresult (*fn_attr)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*fn_procaddr)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static void device_checks(void *h, int ndev) {
  fn_dev get = (fn_dev)dlsym(h, "cuDeviceGet");
  fn_attr attr = (fn_attr)dlsym(h, "cuDeviceGetAttribute");
  for (int i = 0; get && attr && i < ndev; i++) {
    CUdevice d;
    int cma = 0, pma = 0;
    char name[32];
    snprintf(name, sizeof name, "managed[%d]", i);
    if (get(&d, i) || attr(&cma, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, d) ||
        attr(&pma, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, d)) {
      vx_doctor_add(name, VX_WARN, "check the driver installation",
                    "device %d: attributes unreadable", i);
      continue;
    }
    vx_doctor_add(name, cma ? VX_OK : VX_WARN,
                  cma ? NULL
                      : "use Linux with a Pascal or newer GPU: without concurrent managed access "
                        "the CPU may not touch managed memory while kernels run, so vx cannot "
                        "prefetch or spill safely and keeps allocations native",
                  "device %d: CONCURRENT_MANAGED_ACCESS=%d, PAGEABLE_MEMORY_ACCESS=%d%s", i, cma,
                  pma, pma ? "" : " (not needed: vx uses managed memory)");
  }
}

static void discard_check(void *h) {
  fn_procaddr gpa = (fn_procaddr)dlsym(h, "cuGetProcAddress_v2");
  void *fn = NULL;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (gpa && !gpa("cuMemDiscardBatchAsync", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) && fn &&
      st == CU_GET_PROC_ADDRESS_SUCCESS)
    vx_doctor_add("discard", VX_OK, NULL,
                  "cuMemDiscardBatchAsync available (NVMe tier can release pages)");
  else
    vx_doctor_add(
        "discard", VX_WARN, "install a CUDA 13 (R580+) driver to enable the NVMe tier",
        "cuMemDiscardBatchAsync unavailable: the NVMe tier is off, spilling stops at host memory");
}

void vx_doctor_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    vx_doctor_add("driver", VX_FAIL,
                  "install the NVIDIA driver (libcuda.so.1 must be on the loader path)",
                  "no CUDA driver: %s", dlerror());
    return;
  }
  fn_init init = (fn_init)dlsym(h, "cuInit");
  fn_int ver = (fn_int)dlsym(h, "cuDriverGetVersion"), count = (fn_int)dlsym(h, "cuDeviceGetCount");
  int v = 0, n = 0;
  CUresult rc = init && ver && count ? init(0) : CUDA_ERROR_NOT_FOUND;
  if (rc || ver(&v) || count(&n)) {
    vx_doctor_add("driver", VX_FAIL, "check `nvidia-smi`; load the nvidia kernel module",
                  "libcuda.so.1 loads but cuInit failed (error %d)", (int)rc);
  } else {
    vx_doctor_add("driver", v >= 12000 ? VX_OK : VX_WARN,
                  v >= 12000 ? NULL : "upgrade to a CUDA 12 or newer driver",
                  "CUDA driver %d.%d (%d), %d device(s)", v / 1000, v % 1000 / 10, v, n);
    device_checks(h, n);
    discard_check(h);
  }
  /* the driver stays loaded: unloading an initialised libcuda is not supported */
}

// ---- output ----

static const char *verdict_name(enum vx_verdict v) {
  return v == VX_OK ? "ok" : v == VX_WARN ? "warn" : "fail";
}

static void print_text(void) {
  for (int i = 0; i < nlines; i++) {
    printf("%-4s  %-11s %s\n", verdict_name(lines[i].v), lines[i].name, lines[i].detail);
    if (lines[i].fix[0] && lines[i].v != VX_OK) printf("      %-11s fix: %s\n", "", lines[i].fix);
  }
}

static void print_json(int failed) {
  printf("{\"ok\":%s,\"checks\":[", failed ? "false" : "true");
  for (int i = 0; i < nlines; i++) {
    printf("%s\n{\"name\":", i ? "," : "");
    vx_json_str(stdout, lines[i].name);
    printf(",\"verdict\":\"%s\",\"detail\":", verdict_name(lines[i].v));
    vx_json_str(stdout, lines[i].detail);
    printf(",\"fix\":");
    vx_json_str(stdout, lines[i].fix);
    printf("}");
  }
  printf("]}\n");
}

int vx_cmd_doctor(int argc, char **argv) {
  static const struct option longopts[] = {{"nvme-dir", 1, 0, 'n'},
                                           {"program", 1, 0, 'p'},
                                           {"json", 0, 0, 'j'},
                                           {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
  const char *dir = getenv("VX_NVME_DIR"), *program = NULL;
  int ch, json = 0;
  optind = 1;
  opterr = 0; /* vx_cli_bad_option says it, prefixed "vx doctor:" */
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (ch == 'n')
      dir = optarg;
    else if (ch == 'p')
      program = optarg;
    else if (ch == 'j')
      json = 1;
    else if (ch == 'h')
      return vx_cli_help(usage);
    else
      return vx_cli_bad_option("doctor", argc, argv, "h");
  }
  if (optind < argc) return vx_cli_usage_error("doctor", "unexpected argument");
  nlines = 0;
  vx_doctor_driver();
  vx_doctor_uring();
  vx_doctor_nvme(dir && *dir ? dir : NULL);
  vx_doctor_preload(program);
  int failed = 0;
  for (int i = 0; i < nlines; i++)
    failed |= lines[i].v == VX_FAIL;
  if (json)
    print_json(failed);
  else
    print_text();
  return failed ? 1 : 0;
}
