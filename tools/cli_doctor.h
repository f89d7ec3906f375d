/* cli_doctor.h: the checks of `vx doctor`, each adding ok/warn/fail lines
 * with the fix; split between the driver (doctor.c) and the system (doctor_sys.c). */
#ifndef VX_TOOLS_CLI_DOCTOR_H
#define VX_TOOLS_CLI_DOCTOR_H

enum vx_verdict { VX_OK, VX_WARN, VX_FAIL };

/* Records one line: check name, verdict, what was found, how to fix it
 * (fix may be NULL).  Strings are copied. */
void vx_doctor_add(const char *name, enum vx_verdict v, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void vx_doctor_driver(void);
void vx_doctor_uring(void);
/* dir: the NVMe directory, or NULL when none is configured. */
void vx_doctor_nvme(const char *dir);
/* program: a command to check for LD_PRELOAD reachability, or NULL. */
void vx_doctor_preload(const char *program);

#endif
