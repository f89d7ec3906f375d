/* Secure-execution detection: a setuid/setgid (or file-capability) program
 * runs with AT_SECURE set, and vx must then leave it entirely alone. */
#ifndef VX_INTERPOSE_SECURE_H
#define VX_INTERPOSE_SECURE_H

/* 1 when the kernel started this process in secure-execution mode
 * (getauxval(AT_SECURE) != 0: setuid, setgid, file capabilities or an LSM
 * transition), else 0.  In such a process vx must stay passive: every hook
 * passes straight through, and vx reads no VX_* variable, writes no file,
 * creates no shared-memory segment and prints nothing, so that an
 * unprivileged user's environment cannot steer a privileged program.
 * Async-signal-safe, no allocation, callable before vx is initialised. */
int vx_secure_exec(void);

#endif
