/* gpu_probe: prints, as one JSON object, what the CUDA driver this process
 * loads says about itself: its path, version, and each device's name and memory. */
#include <cuda.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

/* The probe dlopens libcuda.so.1 (no link-time dependency), so the same binary
 * shows which driver the dynamic linker picks: the real one or the simulator.
 * Under LD_PRELOAD=libvx.so, dlsym on that handle returns vx's hooks, so the
 * memory it reports is what vx tells applications. */

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*int_fn)(int *);
typedef CUresult (*dev_get_fn)(CUdevice *, int);
typedef CUresult (*name_fn)(char *, int, CUdevice);
typedef CUresult (*total_fn)(size_t *, CUdevice);
typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);

struct drv {
  init_fn init;
  int_fn version, count;
  dev_get_fn get;
  name_fn name;
  total_fn total;
  attr_fn attr;
};

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    fprintf(stderr, "gpu_probe: %s not found in libcuda.so.1\n", name);
  return p;
}

static int resolve(void *h, struct drv *d) {
  *(void **)&d->init = sym(h, "cuInit");
  *(void **)&d->version = sym(h, "cuDriverGetVersion");
  *(void **)&d->count = sym(h, "cuDeviceGetCount");
  *(void **)&d->get = sym(h, "cuDeviceGet");
  *(void **)&d->name = sym(h, "cuDeviceGetName");
  *(void **)&d->total = sym(h, "cuDeviceTotalMem_v2");
  *(void **)&d->attr = sym(h, "cuDeviceGetAttribute");
  return d->init && d->version && d->count && d->get && d->name && d->total && d->attr ? 0 : -1;
}

/* Prints s as a JSON string (device names are plain ASCII, but be safe). */
static void put_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20 || c > 0x7e)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static int print_device(const struct drv *d, int ordinal) {
  CUdevice dev;
  char name[256] = "";
  size_t total = 0;
  int major = 0, minor = 0, managed = 0;
  if (d->get(&dev, ordinal) != CUDA_SUCCESS || d->name(name, sizeof name, dev) != CUDA_SUCCESS ||
      d->total(&total, dev) != CUDA_SUCCESS)
    return -1;
  d->attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  d->attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  d->attr(&managed, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev);
  printf("%s{\"name\":", ordinal ? "," : "");
  put_json_string(name);
  printf(",\"total_mem\":%zu,\"cc\":\"%d.%d\",\"concurrent_managed\":%d}", total, major, minor,
         managed);
  return 0;
}

int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "gpu_probe: cannot load libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  struct link_map *map = NULL;
  struct drv d;
  int version = 0, count = 0;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || resolve(h, &d) != 0)
    return 2;
  CUresult rc = d.init(0);
  if (rc != CUDA_SUCCESS || d.version(&version) != CUDA_SUCCESS ||
      d.count(&count) != CUDA_SUCCESS) {
    fprintf(stderr, "gpu_probe: cuInit/cuDriverGetVersion/cuDeviceGetCount failed (%d)\n", rc);
    return 2;
  }
  printf("{\"libcuda\":");
  put_json_string(map->l_name);
  printf(",\"driver_version\":%d,\"devices\":[", version);
  for (int i = 0; i < count; i++)
    if (print_device(&d, i) != 0) {
      fprintf(stderr, "gpu_probe: querying device %d failed\n", i);
      return 2;
    }
  printf("]}\n");
  return 0;
}
