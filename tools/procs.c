/* procs.c: the live vx processes of this user, found by their stats segments
 * in /dev/shm; segments of dead processes (ours only) are removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_PROCS 4096

static int cmp_pid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}

/* pid from "vx-<uid>-<pid>" when uid is ours; 0 otherwise. */
static pid_t name_pid(const char *name, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n)) return 0;
  char *end;
  long pid = strtol(name + n, &end, 10);
  return (*end || end == name + n || pid <= 0 || pid > 0x3fffffff) ? 0 : (pid_t)pid;
}

/* A dead process's segment is removed if it is a regular file we own. */
static void reap(int dfd, const char *name) {
  struct stat st;
  if (!fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
      st.st_uid == geteuid())
    unlinkat(dfd, name, 0);
}

int vx_procs_each(void (*fn)(pid_t pid, void *arg), void *arg) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "vx-%u-", (unsigned)geteuid());
  DIR *d = opendir("/dev/shm");
  if (!d) return -errno;
  pid_t *pids = malloc(MAX_PROCS * sizeof *pids);
  int n = 0;
  struct dirent *e;
  while (pids && n < MAX_PROCS && (e = readdir(d))) {
    pid_t pid = name_pid(e->d_name, prefix);
    if (!pid) continue;
    if (kill(pid, 0) && errno == ESRCH)
      reap(dirfd(d), e->d_name);
    else
      pids[n++] = pid;
  }
  closedir(d);
  if (!pids) return -ENOMEM;
  qsort(pids, (size_t)n, sizeof *pids, cmp_pid);
  for (int i = 0; i < n; i++)
    fn(pids[i], arg);
  free(pids);
  return n;
}
