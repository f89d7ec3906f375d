/* test_ledger_robust.c: the ledger against a truncated segment file (no
 * SIGBUS, the share kept) and holders in other PID namespaces (a live one is
 * never reclaimed, a dead one is).  White-box: includes ledger.c for slots. */
#include "../../tiers/ledger.c"

#include <check.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "ledger_test_util.h"
#include "vx_check.h"

#define CAP (UINT64_C(1) << 30)

static char err[256];
static char warned[512];
static int nwarn;

static void warn_hook(const char *line) {
  snprintf(warned, sizeof warned, "%s", line);
  nwarn++;
}

static vx_ledger_t *open_key(const char *tag, uint64_t cap) {
  vx_ledger_t *l = ledger_open_key(lt_key(tag), cap, err, sizeof err);
  ck_assert_ptr_nonnull(l);
  ck_assert_msg(ledger_is_shared(l), "private ledger: %s", err);
  return l;
}

/* Truncates the segment of `tag` to `size` bytes, as another process would. */
static void truncate_segment(const char *tag, off_t size) {
  char name[128];
  ledger_seg_name(name, sizeof name, lt_key(tag));
  int fd = shm_open(name, O_RDWR, 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, size), 0);
  close(fd);
}

/* A child that opens the ledger, reserves `bytes`, reports its pid and the
 * result, and holds its share until `hold` (the write end the parent keeps)
 * is closed. */
static pid_t child_holding(const char *tag, uint64_t bytes, int *hold_w) {
  int rep[2], hold[2];
  ck_assert_int_eq(pipe(rep), 0);
  ck_assert_int_eq(pipe(hold), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    close(hold[1]);
    vx_ledger_t *l = ledger_open_key(lt_key(tag), CAP, NULL, 0);
    int rc = l && ledger_is_shared(l) ? ledger_reserve(l, bytes) : -1;
    lt_put(rep[1], (uint64_t)(int64_t)rc);
    char b;
    (void)!read(hold[0], &b, 1);
    _exit(0); /* dies holding its share */
  }
  close(hold[0]);
  close(rep[1]);
  uint64_t rc = 1;
  ck_assert_int_eq(lt_get(rep[0], &rc), 0);
  ck_assert_int_eq((int64_t)rc, 0);
  close(rep[0]);
  *hold_w = hold[1];
  return pid;
}

static void end_child(pid_t pid, int hold_w) {
  close(hold_w);
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// ---- truncation ----

static void count_entry(const ledger_entry_t *e, void *arg) {
  (void)e;
  ++*(int *)arg;
}

/* Another process truncates the file under a holder: the holder's next
 * calls must not die of SIGBUS (check forks each test: a signal fails it),
 * its share is kept in a private ledger, and it says so once. */
static void truncated_under_holder(const char *tag, off_t size) {
  nwarn = 0;
  warned[0] = '\0';
  ledger_set_warn(warn_hook);
  vx_ledger_t *a = open_key(tag, 1000);
  int hold;
  pid_t c = child_holding(tag, 200, &hold);
  ck_assert_int_eq(ledger_reserve(a, 300), 0);
  ck_assert_int_eq(ledger_others(a), 200);
  truncate_segment(tag, size);
  ck_assert_int_eq(ledger_reserve(a, 100), 0); /* SIGBUS here before */
  ck_assert_int_eq(ledger_share(a), 400);
  ck_assert_int_eq(ledger_is_shared(a), 0);
  ck_assert_int_eq(nwarn, 1);
  ck_assert_msg(strstr(warned, lt_key(tag)) && strstr(warned, "truncated") &&
                    strstr(warned, "private ledger"),
                "warning: %s", warned);
  /* the private ledger keeps enforcing the capacity for this process */
  ck_assert_int_eq(ledger_reserve(a, 601), -ENOMEM);
  ck_assert_int_eq(ledger_reserve(a, 600), 0);
  ck_assert_int_eq(ledger_others(a), 0);
  ck_assert_int_eq(ledger_release(a, 1000), 0);
  ck_assert_int_eq(ledger_share(a), 0);
  int n = 0;
  ck_assert_int_eq(ledger_list(a, count_entry, &n), 1); /* itself alone */
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(nwarn, 1); /* said once */
  ledger_close(a);
  end_child(c, hold);
  ledger_set_warn(NULL);
}

START_TEST(test_truncate_to_zero) {
  truncated_under_holder("trunc0", 0);
  /* a newcomer re-creates the segment and shares it again */
  vx_ledger_t *b = open_key("trunc0", 1000);
  vx_ledger_t *c = open_key("trunc0", 1000);
  ck_assert_int_eq(ledger_reserve(b, 700), 0);
  ck_assert_int_eq(ledger_others(c), 700);
  ck_assert_int_eq(ledger_reserve(c, 301), -ENOMEM);
  ledger_close(c);
  ledger_close(b);
  ck_assert_int_eq(ledger_unlink_key(lt_key("trunc0")), 0);
}
END_TEST

START_TEST(test_truncate_partway) {
  truncated_under_holder("trunc1", 100); /* the lock survives, the table not */
  ck_assert_int_eq(ledger_unlink_key(lt_key("trunc1")), 0);
}
END_TEST

/* Truncated and re-created by a newcomer between two calls of the holder:
 * the size is right again but the holder's slot is gone; it must notice
 * and leave, not write into the newcomer's table. */
START_TEST(test_recreated_under_holder) {
  nwarn = 0;
  ledger_set_warn(warn_hook);
  vx_ledger_t *a = open_key("recreate", 1000);
  ck_assert_int_eq(ledger_reserve(a, 300), 0);
  truncate_segment("recreate", 0);
  vx_ledger_t *b = open_key("recreate", 1000); /* re-initialises it */
  ck_assert_int_eq(ledger_reserve(b, 500), 0);
  ck_assert_int_eq(ledger_reserve(a, 100), 0);
  ck_assert_int_eq(ledger_share(a), 400);
  ck_assert_int_eq(ledger_is_shared(a), 0);
  ck_assert_int_eq(nwarn, 1);
  ck_assert_int_eq(ledger_share(b), 500); /* a wrote nothing into b's table */
  ck_assert_int_eq(ledger_others(b), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_others(b), 0);
  ledger_close(b);
  ledger_set_warn(NULL);
  ck_assert_int_eq(ledger_unlink_key(lt_key("recreate")), 0);
}
END_TEST

/* An observer (vx top) of a truncated segment sees nothing and survives. */
START_TEST(test_observer_of_truncated) {
  vx_ledger_t *a = open_key("trobs", 1000);
  ck_assert_int_eq(ledger_reserve(a, 10), 0);
  vx_ledger_t *o = ledger_observe_key(lt_key("trobs"), err, sizeof err);
  ck_assert_ptr_nonnull(o);
  truncate_segment("trobs", 0);
  ck_assert_int_eq(ledger_others(o), 0);
  ledger_close(o);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("trobs")), 0);
}
END_TEST

// ---- holders in other PID namespaces ----

/* A pid that does not exist in this namespace. */
static pid_t absent_pid(void) {
  for (pid_t p = 4000000; p > 1000; p -= 7919)
    if (kill(p, 0) != 0 && errno == ESRCH) return p;
  ck_abort_msg("no free pid found");
  return 0;
}

/* The slot of `tag`'s segment held by pid. */
static int slot_of(vx_ledger_t *a, pid_t pid) {
  int found = -1;
  for (int i = 0; i < LEDGER_SLOTS; i++)
    if (a->seg->slot[i].pid == pid) found = i;
  return found;
}

/* A live holder whose slot's pid means nothing here (as a holder in
 * another container's PID namespace looks): alive while its lock is held,
 * reclaimed once it is dead.  The old code took ESRCH for death. */
START_TEST(test_foreign_pid_alive_until_dead) {
  vx_ledger_t *a = open_key("nsfake", CAP);
  int hold;
  pid_t c = child_holding("nsfake", CAP / 2, &hold);
  ck_assert_int_eq(seg_lock(a->seg, a->fd, a->slot), 0);
  int i = slot_of(a, c);
  ck_assert_int_ge(i, 0);
  ck_assert_uint_eq(a->seg->slot[i].flags, SLOT_LOCKED);
  a->seg->slot[i].pid = absent_pid();
  a->seg->slot[i].start = 12345; /* a start time that means nothing here either */
  seg_unlock(a->seg);
  ck_assert_int_eq(ledger_others(a), CAP / 2);
  ck_assert_int_eq(ledger_reserve(a, CAP / 2 + 1), -ENOMEM);
  ck_assert_int_eq(ledger_reserve(a, CAP / 2), 0);
  ck_assert_int_eq(ledger_release(a, CAP / 2), 0);
  end_child(c, hold); /* dies holding its share */
  ck_assert_int_eq(ledger_reserve(a, CAP), 0);
  ck_assert_int_eq(ledger_others(a), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("nsfake")), 0);
}
END_TEST

/* Writes `text` to /proc/self/<file>; 0 or -1. */
static int proc_write(const char *file, const char *text) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/%s", file);
  int fd = open(path, O_WRONLY);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A new PID and mount namespace for the next child, as a container has:
 * unshare(), or as an unprivileged user with a user namespace mapping our
 * own ids.  0 or -1. */
static int new_pid_namespace(void) {
  if (unshare(CLONE_NEWPID | CLONE_NEWNS) == 0) return 0;
  uid_t u = geteuid();
  gid_t g = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) != 0) return -1;
  char map[64];
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)u, (unsigned)u);
  if (proc_write("uid_map", map) != 0) return -1;
  proc_write("setgroups", "deny\n");
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)g, (unsigned)g);
  return proc_write("gid_map", map);
}

/* Its own /proc, as in a container (pids and start times of that
 * namespace); 0 or -1. */
static int own_proc(void) {
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* A real holder in another PID namespace with its own /proc (pid 1 there):
 * its share counts here while it lives (the old code saw pid 1 here, init,
 * with another start time, and reclaimed it), ours counts there (the old
 * code found no such pid there), and its share returns when it dies.
 * Skipped where namespaces cannot be made. */
START_TEST(test_real_pid_namespace) {
  vx_ledger_t *a = open_key("nsreal", CAP);
  ck_assert_int_eq(ledger_reserve(a, CAP / 2), 0);
  int rep[2], hold[2];
  ck_assert_int_eq(pipe(rep), 0);
  ck_assert_int_eq(pipe(hold), 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    close(hold[1]);
    if (new_pid_namespace() != 0) {
      uint64_t msg[3] = {UINT64_MAX, 0, 0};
      (void)!write(rep[1], msg, sizeof msg);
      _exit(0);
    }
    pid_t g = fork(); /* pid 1 of the new namespace */
    if (g == 0) {
      if (own_proc() != 0) {
        uint64_t msg[3] = {UINT64_MAX, 0, 0};
        (void)!write(rep[1], msg, sizeof msg);
        _exit(0);
      }
      vx_ledger_t *l = ledger_open_key(lt_key("nsreal"), CAP, NULL, 0);
      int rc = l && ledger_is_shared(l) ? ledger_reserve(l, CAP / 4) : -1;
      uint64_t msg[3] = {(uint64_t)getpid(), (uint64_t)(int64_t)rc, l ? ledger_others(l) : 0};
      (void)!write(rep[1], msg, sizeof msg);
      char b;
      (void)!read(hold[0], &b, 1);
      _exit(0);
    }
    int st;
    waitpid(g, &st, 0);
    _exit(0);
  }
  close(rep[1]);
  close(hold[0]);
  uint64_t msg[3];
  ck_assert_int_eq(read(rep[0], msg, sizeof msg), sizeof msg);
  close(rep[0]);
  if (msg[0] == UINT64_MAX) {
    close(hold[1]);
    waitpid(c, NULL, 0);
    ledger_close(a);
    ledger_unlink_key(lt_key("nsreal"));
    fprintf(stderr, "test_real_pid_namespace: skipped: cannot create a PID namespace here\n");
    return;
  }
  ck_assert_int_eq((int64_t)msg[1], 0);
  ck_assert_int_eq(msg[0], 1);       /* it is pid 1 over there */
  ck_assert_int_eq(msg[2], CAP / 2); /* it counted our share */
  ck_assert_int_eq(ledger_others(a), CAP / 4);
  ck_assert_int_eq(ledger_reserve(a, CAP / 4 + 1), -ENOMEM);
  ck_assert_int_eq(ledger_others(a), CAP / 4);
  close(hold[1]); /* the holder ends */
  int st;
  ck_assert_int_eq(waitpid(c, &st, 0), c);
  ck_assert_int_eq(ledger_others(a), 0);
  ck_assert_int_eq(ledger_reserve(a, CAP / 2), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("nsreal")), 0);
}
END_TEST

/* exec() drops the slot lock (O_CLOEXEC): the old image's share returns
 * even though the pid lives on. */
START_TEST(test_exec_releases_share) {
  vx_ledger_t *a = open_key("exec", CAP);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    close(p[1]);
    vx_ledger_t *l = ledger_open_key(lt_key("exec"), CAP, NULL, 0);
    if (!l || ledger_reserve(l, CAP) != 0) _exit(1);
    dup2(p[0], 0);
    execl("/bin/sh", "sh", "-c", "read x", (char *)NULL); /* lives on until told */
    _exit(127);
  }
  close(p[0]);
  /* until the exec the child holds everything; after it, nothing */
  for (int i = 0; i < 5000 && ledger_others(a) != 0; i++)
    usleep(1000);
  ck_assert_int_eq(ledger_others(a), 0);
  ck_assert_int_eq(kill(c, 0), 0); /* still alive */
  ck_assert_int_eq(ledger_reserve(a, CAP), 0);
  ck_assert_int_eq(write(p[1], "\n", 1), 1);
  close(p[1]);
  waitpid(c, NULL, 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("exec")), 0);
}
END_TEST

int main(void) {
  lt_base = getpid();
  Suite *s = suite_create("ledger_robust");
  TCase *t = tcase_create("robust");
  tcase_set_timeout(t, 20);
  tcase_add_test(t, test_truncate_to_zero);
  tcase_add_test(t, test_truncate_partway);
  tcase_add_test(t, test_recreated_under_holder);
  tcase_add_test(t, test_observer_of_truncated);
  tcase_add_test(t, test_foreign_pid_alive_until_dead);
  tcase_add_test(t, test_real_pid_namespace);
  tcase_add_test(t, test_exec_releases_share);
  suite_add_tcase(s, t);
  return vx_check_run(s, 1);
}
