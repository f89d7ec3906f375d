/* doctor_sys.c: `vx doctor` system checks: io_uring permitted, the NVMe
 * directory (writable, O_DIRECT, free space), LD_PRELOAD reaching programs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "cli_doctor.h"
#include "cli_elf.h"
#include "cli_libpath.h"
#include "options.h"

void vx_doctor_uring(void) {
  struct io_uring ring;
  int rc = io_uring_queue_init(8, &ring, 0);
  if (rc == 0) {
    io_uring_queue_exit(&ring);
    vx_doctor_add("io_uring", VX_OK, NULL, "io_uring permitted");
    return;
  }
  char sysctl[8] = "?";
  FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
  if (f && !fgets(sysctl, sizeof sysctl, f)) strcpy(sysctl, "?");
  if (f) fclose(f);
  sysctl[strcspn(sysctl, "\n")] = 0;
  vx_doctor_add(
      "io_uring", VX_WARN,
      "allow io_uring: `sysctl kernel.io_uring_disabled=0` (or add this user to "
      "kernel.io_uring_group), and permit io_uring_setup in the container's seccomp "
      "profile; meanwhile the NVMe tier uses a pread/pwrite thread pool (VX_NVME_ENGINE=pool)",
      "io_uring_setup failed: %s (kernel.io_uring_disabled=%s)", strerror(-rc), sysctl);
}

/* An unnamed file in dir (O_TMPFILE, else a temporary name unlinked at once). */
static int open_tmp(const char *dir) {
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR)) return fd;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/.vx-doctor-XXXXXX", dir);
  fd = mkostemp(path, O_CLOEXEC);
  if (fd >= 0) unlink(path);
  return fd;
}

/* Returns 0 (O_DIRECT write worked), 1 (writable, no O_DIRECT), or -errno. */
static int try_direct(const char *dir) {
  int fd = open_tmp(dir);
  if (fd < 0) return -errno;
  void *buf = NULL;
  int rc = 1;
  if (!fcntl(fd, F_SETFL, O_DIRECT) && !posix_memalign(&buf, 4096, 4096)) {
    memset(buf, 0x5a, 4096);
    rc = pwrite(fd, buf, 4096, 0) == 4096 ? 0 : errno == EINVAL ? 1 : -errno;
  }
  free(buf);
  close(fd);
  return rc;
}

static uint64_t nvme_limit(void) {
  const char *v = getenv("VX_NVME_LIMIT");
  vx_size_t s = {0, 0, 0};
  if (!v || !*v || vx_parse_size(v, &s) || s.pct > 0) vx_parse_size("64G", &s);
  return s.bytes;
}

static void nvme_space(const char *dir) {
  struct statvfs vfs;
  char a[16], b[16];
  if (statvfs(dir, &vfs)) return;
  uint64_t free_b = (uint64_t)vfs.f_bavail * vfs.f_frsize, want = nvme_limit();
  vx_doctor_add("nvme-space", free_b >= want ? VX_OK : VX_WARN,
                "free space on the drive, or lower VX_NVME_LIMIT to what is free",
                "%s free in %s (VX_NVME_LIMIT %s)", vx_fmt_bytes(free_b, a, sizeof a), dir,
                vx_fmt_bytes(want, b, sizeof b));
}

void vx_doctor_nvme(const char *dir) {
  struct stat st;
  if (!dir) {
    vx_doctor_add("nvme-dir", VX_OK, NULL,
                  "not configured: NVMe tier off (set VX_NVME_DIR or --nvme-dir)");
    return;
  }
  int rc = stat(dir, &st) ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
  if (rc) {
    vx_doctor_add("nvme-dir", VX_FAIL,
                  "create it: mkdir -p DIR && chmod 700 DIR (on a local NVMe drive)", "%s: %s", dir,
                  strerror(-rc));
    return;
  }
  rc = try_direct(dir);
  if (rc == 1) {
    vx_doctor_add("nvme-dir", VX_WARN,
                  "put VX_NVME_DIR on a local ext4/xfs NVMe file system (tmpfs and some network "
                  "file systems lack O_DIRECT); vx falls back to buffered I/O",
                  "%s: writable, but O_DIRECT is not supported", dir);
  } else if (rc) {
    vx_doctor_add("nvme-dir", VX_FAIL,
                  "use a directory you own and can write: mkdir -p DIR && chmod 700 DIR",
                  "%s: cannot create the swap file: %s", dir, strerror(-rc));
    return;
  } else {
    vx_doctor_add("nvme-dir", st.st_uid == geteuid() ? VX_OK : VX_WARN,
                  "use a directory you own (the swap file holds your data)",
                  "%s: writable with O_DIRECT%s", dir,
                  st.st_uid == geteuid() ? "" : ", but owned by another user");
  }
  nvme_space(dir);
}

/* Runs `cat /proc/self/maps` with libvx.so preloaded: is it mapped? */
static int preload_reaches(const char *lib) {
  int fds[2];
  if (pipe(fds)) return -errno;
  pid_t pid = fork();
  if (pid == 0) {
    char *pre = vx_preload_value(lib, getenv("LD_PRELOAD"));
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    if (pre) setenv("LD_PRELOAD", pre, 1);
    setenv("VX_DISABLE", "1", 1);
    execl("/bin/cat", "cat", "/proc/self/maps", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  static char out[1 << 16];
  size_t n = 0;
  ssize_t k;
  while ((k = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
    n += (size_t)k;
  out[n] = 0;
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  return pid > 0 && strstr(out, lib) ? 0 : -ENOENT;
}

static void program_check(const char *program) {
  char path[PATH_MAX];
  vx_elf_info_t info;
  if (vx_find_in_path(program, path, sizeof path) || vx_elf_inspect(path, &info)) {
    vx_doctor_add("program", VX_FAIL, "give a path to an executable", "%s: not found", program);
  } else if (info.is_static) {
    vx_doctor_add("program", VX_FAIL,
                  "link the program dynamically (the dynamic linker does the preloading)",
                  "%s is statically linked: LD_PRELOAD cannot reach it", path);
  } else if (info.setid) {
    vx_doctor_add(
        "program", VX_FAIL,
        "run an unprivileged copy: the loader ignores LD_PRELOAD paths for set-ID programs",
        "%s is set-user/group-ID", path);
  } else {
    vx_doctor_add("program", VX_OK, NULL, "%s: %s", path,
                  info.is_script ? "a script: its interpreter gets libvx.so"
                                 : "dynamically linked, reachable");
  }
}

void vx_doctor_preload(const char *program) {
  char lib[PATH_MAX];
  if (vx_find_libvx(lib, sizeof lib)) {
    vx_doctor_add("preload", VX_FAIL, "build it (cmake --build build) or reinstall vx",
                  "libvx.so not found next to vx or in %s", vx_install_libdir());
  } else if (preload_reaches(lib)) {
    vx_doctor_add("preload", VX_FAIL, "check that libvx.so matches this machine (file, ldd)",
                  "%s does not load into a test program through LD_PRELOAD", lib);
  } else {
    vx_doctor_add("preload", VX_OK, NULL,
                  "%s preloads into dynamic programs (not into static or set-ID ones)", lib);
  }
  if (program) program_check(program);
}
