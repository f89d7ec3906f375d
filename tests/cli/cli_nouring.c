/* cli_nouring.c: test helper that forbids io_uring with a seccomp filter
 * (io_uring_setup fails with EPERM, as in a locked-down container), then execs. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

/* usage: cli_nouring CMD ARGS...   Exits 77 where seccomp is unavailable. */
int main(int argc, char **argv) {
#ifdef ARCH
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (argc < 2) return fprintf(stderr, "usage: cli_nouring CMD ARGS...\n"), 2;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
    perror("cli_nouring: seccomp");
    return 77;
  }
  if (syscall(__NR_io_uring_setup, 1, NULL) != -1 || errno != EPERM)
    return fprintf(stderr, "cli_nouring: filter not effective\n"), 1;
  execvp(argv[1], argv + 1);
  perror(argv[1]);
  return 127;
#else
  (void)argc, (void)argv;
  fprintf(stderr, "cli_nouring: unknown architecture\n");
  return 77;
#endif
}
