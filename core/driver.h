/* The driver below vx: the entry points libvx knows (hooks.def: those it
 * hooks and those it only calls), their ids and function-pointer types, the
 * table of the real ones, and VX_CALL.  Every layer above core/ reaches the
 * driver through this table only. */
#ifndef VX_CORE_DRIVER_H
#define VX_CORE_DRIVER_H

#include <cuda.h>
#include <stddef.h>

/* cuda.h renames cuGetProcAddress to its _v2; vx hooks both under their
 * real names, so the macro must not rewrite ours. */
#undef cuGetProcAddress
/* Likewise the v1 names cuda.h renames to their _v2:
 * vx hooks each variant under its exact name. */
#undef cuMemPrefetchAsync
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64
#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamBatchMemOp
#undef cuGraphExecUpdate
#undef cuGraphExecKernelNodeSetParams
#undef cuIpcOpenMemHandle

/* Likewise cuStreamBeginCapture (to _v2): vx hooks the CUDA 10.0 one too. */
#undef cuStreamBeginCapture
#undef cuStreamBeginCaptureToGraph

/* NVML types, ABI-identical to nvml.h (not shipped with the toolkit). */
typedef int vx_nvml_return_t;
typedef struct vx_nvml_device_st *vx_nvml_device_t;
typedef struct {
  unsigned long long total, free, used;
} vx_nvml_memory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} vx_nvml_memory_v2_t;
enum {
  VX_NVML_SUCCESS = 0,
  VX_NVML_ERROR_UNINITIALIZED = 1,
  VX_NVML_ERROR_NOT_SUPPORTED = 3,
  VX_NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  VX_NVML_ERROR_FUNCTION_NOT_FOUND = 13
};

enum { VX_FAMILY_DL, VX_FAMILY_CU, VX_FAMILY_NVML };

/* Ids: hooks first (0 .. VX_HOOK_COUNT-1), then the entry points vx only calls. */
enum vx_hook_id {
#define VX_HOOK(fam, name, stream, base, ret, params) VX_ID_##name,
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
  VX_HOOK_COUNT,
  VX_ID_REAL_FIRST_ = VX_HOOK_COUNT - 1,
#define VX_HOOK(fam, name, stream, base, ret, params)
#define VX_REAL(fam, name, ret, params) VX_ID_##name,
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
  VX_ID_COUNT
};

#define VX_HOOK(fam, name, stream, base, ret, params) typedef ret(*vx_pfn_##name) params;
#define VX_REAL(fam, name, ret, params) typedef ret(*vx_pfn_##name) params;
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL

/* Whether a hook is a per-thread-default-stream variant (hooks.def's stream
 * column): VX_HOOK_PTDS(name) is 1 for a PTDS row (its NULL stream is
 * CU_STREAM_PER_THREAD), 0 for a LEGACY one, at compile time;
 * VX_HOOK_STREAM(name, s) is the stream the call means.  By id:
 * interpose/hooks.h's vx_hook_ptds. */
enum { VX_STREAM_LEGACY = 0, VX_STREAM_PTDS = 1 };
enum vx_hook_ptds {
#define VX_HOOK(fam, name, stream, base, ret, params) VX_PTDS_##name = VX_STREAM_##stream,
#define VX_REAL(fam, name, ret, params)
#include "hooks.def"
#undef VX_HOOK
#undef VX_REAL
};
#define VX_HOOK_PTDS(name) ((int)VX_PTDS_##name)
#define VX_HOOK_STREAM(name, s) (VX_HOOK_PTDS(name) && !(s) ? CU_STREAM_PER_THREAD : (s))

/* The real entry points, by id.  CU entries are filled once by
 * vx_real_init() (pthread_once), NVML ones by vx_real_nvml_init(); an entry
 * the driver lacks stays NULL.  Never written after that. */
extern void *vx_real_v[VX_ID_COUNT];
#define VX_REAL_FN(name) ((vx_pfn_##name)vx_real_v[VX_ID_##name])

/* Loads libcuda.so.1 and resolves every CU entry with the real dlsym.
 * Returns 0, or -ENOENT when the driver cannot be loaded. Thread-safe. */
int vx_real_init(void);
/* Same for NVML (libnvidia-ml.so.1). */
int vx_real_nvml_init(void);
/* libc's dlsym (never vx's hook); NULL only if glibc has none. */
typedef void *(*vx_dlsym_fn)(void *, const char *);
vx_dlsym_fn vx_real_dlsym(void);

/* Calls a real CUDA entry point, or returns CUDA_ERROR_NOT_SUPPORTED when
 * the driver lacks it (or could not be loaded). */
#define VX_CALL(name, ...)                                                                         \
  (VX_REAL_FN(name) ? VX_REAL_FN(name)(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)

/* Code on vx's dlsym path can run before a sanitizer runtime is set up (its
 * own start-up looks functions up with dlsym, which is vx's): no
 * instrumentation there. */
#define VX_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

/* A driver error for a message: its name (CUDA_ERROR_OUT_OF_MEMORY), from
 * the driver's cuGetErrorName, else "CUresult N".  buf is returned when used. */
#define VX_CU_ERR_TEXT 32
const char *vx_cu_err(CUresult r, char buf[VX_CU_ERR_TEXT]);
/* A symbol of the loaded driver library outside the CUDA API (NULL: none). */
void *vx_real_driver_sym(const char *name);

/* Device of the calling thread's current context, as last seen by a memory
 * hook (0 until then): where launches and hook calls are counted. */
extern __thread int vx_tls_dev __attribute__((tls_model("initial-exec")));
/* Device of the current context (and remembers it in vx_tls_dev).
 * Returns 0, or -ENODEV when there is no current context. */
int vx_current_device(int *dev);

#endif
