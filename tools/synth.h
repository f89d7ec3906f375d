/* synth.h: synthetic workloads for `vx replay --synth` and the policy tests:
 * training, inference, CNN, mixture-of-experts and two-stream launch traces. */
#ifndef VX_TOOLS_SYNTH_H
#define VX_TOOLS_SYNTH_H

#include <stddef.h>

/* Generates the workload described by spec, "NAME[,key=value...]" (NAME one of
 * synth_names(); keys per workload, see `vx replay --help`), as an encoded
 * VXTRACE buffer whose header capacity is the peak footprint / oversub.
 * Returns 0 and a malloc'd *buf of *len bytes, or -EINVAL (unknown name or
 * key, bad value: a one-line reason in err) or -ENOMEM. */
int synth_generate(const char *spec, void **buf, size_t *len, char *err, size_t errlen);

/* NULL-terminated list of workload names. */
extern const char *const synth_names[];

#endif
