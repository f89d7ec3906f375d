/* test_ledger_procs.c: the budget ledger across processes (fork, SIGKILL).
 * White-box: includes ledger.c to fake slots and to die holding the lock. */
#include "../../tiers/ledger.c"

#include <check.h>

#include "vx_check.h"
#include <sys/wait.h>

#include "ledger_test_util.h"

#define CAP (UINT64_C(1) << 30)

static char err[256];

static vx_ledger_t *open_key(const char *tag, uint64_t cap) {
  vx_ledger_t *l = ledger_open_key(lt_key(tag), cap, err, sizeof err);
  ck_assert_ptr_nonnull(l);
  ck_assert_msg(ledger_is_shared(l), "private ledger: %s", err);
  ck_assert_str_eq(err, "");
  return l;
}

static void wait_gone(pid_t pid) {
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
}

/* Forks a child that opens the ledger, reserves `bytes`, reports, and then
 * waits (forever) for the parent to kill it. */
static pid_t child_holding(const char *tag, uint64_t bytes) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    vx_ledger_t *l = ledger_open_key(lt_key(tag), CAP, NULL, 0);
    int rc = l && ledger_is_shared(l) ? ledger_reserve(l, bytes) : -1;
    lt_put(p[1], (uint64_t)(int64_t)rc);
    for (;;)
      pause();
  }
  close(p[1]);
  uint64_t rc = 1;
  ck_assert_int_eq(lt_get(p[0], &rc), 0);
  ck_assert_int_eq((int64_t)rc, 0);
  close(p[0]);
  return pid;
}

// ---- basic contract ----

START_TEST(test_reserve_release) {
  vx_ledger_t *a = open_key("basic", 1000);
  vx_ledger_t *b = open_key("basic", 1000);
  ck_assert_int_eq(ledger_reserve(a, 600), 0);
  ck_assert_int_eq(ledger_reserve(b, 401), -ENOMEM);
  ck_assert_int_eq(ledger_share(b), 0);
  ck_assert_int_eq(ledger_reserve(b, 400), 0);
  ck_assert_int_eq(ledger_others(a), 400);
  ck_assert_int_eq(ledger_others(b), 600);
  ck_assert_int_eq(ledger_reserve(a, 1), -ENOMEM);
  ck_assert_int_eq(ledger_release(a, 100), 0);
  ck_assert_int_eq(ledger_share(a), 500);
  ck_assert_int_eq(ledger_release(a, 501), -ERANGE); /* never underflows */
  ck_assert_int_eq(ledger_share(a), 0);
  ck_assert_int_eq(ledger_capacity(a), 1000);
  ledger_close(b); /* its share returns to the pool */
  ck_assert_int_eq(ledger_others(a), 0);
  ck_assert_int_eq(ledger_reserve(a, 1000), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("basic")), 0);
}
END_TEST

START_TEST(test_overflow_and_observer) {
  vx_ledger_t *a = open_key("ovf", UINT64_MAX);
  ck_assert_int_eq(ledger_reserve(a, 5), 0);
  ck_assert_int_eq(ledger_reserve(a, UINT64_MAX), -EOVERFLOW);
  ck_assert_int_eq(ledger_share(a), 5);
  vx_ledger_t *o = ledger_observe_key(lt_key("ovf"), err, sizeof err);
  ck_assert_ptr_nonnull(o);
  ck_assert_int_eq(ledger_reserve(o, 1), -EPERM);
  ck_assert_int_eq(ledger_release(o, 1), -EPERM);
  ck_assert_int_eq(ledger_others(o), 5);
  ledger_close(o);
  ledger_close(a);
  ck_assert_ptr_null(ledger_observe_key(lt_key("none"), err, sizeof err));
  ck_assert_int_eq(ledger_unlink_key(lt_key("ovf")), 0);
}
END_TEST

static void count_entry(const ledger_entry_t *e, void *arg) {
  uint64_t *acc = arg;
  acc[0]++;
  acc[1] += e->bytes;
  acc[2] += (uint64_t)e->self;
  if (!e->self) acc[3] = (uint64_t)e->pid;
}

START_TEST(test_list_shows_each_process) {
  vx_ledger_t *a = open_key("list", CAP);
  ck_assert_int_eq(ledger_reserve(a, 7), 0);
  pid_t c = child_holding("list", 11);
  uint64_t acc[4] = {0};
  ck_assert_int_eq(ledger_list(a, count_entry, acc), 2);
  ck_assert_int_eq(acc[0], 2);
  ck_assert_int_eq(acc[1], 18);
  ck_assert_int_eq(acc[2], 1);
  ck_assert_int_eq(acc[3], c);
  kill(c, SIGKILL);
  wait_gone(c);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("list")), 0);
}
END_TEST

START_TEST(test_segment_mode_0600) {
  mode_t old = umask(0); /* the mode must not depend on the umask */
  vx_ledger_t *a = open_key("mode", CAP);
  umask(old);
  char path[160];
  snprintf(path, sizeof path, "/dev/shm/vx-ledger-%u-%s", (unsigned)geteuid(), lt_key("mode"));
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 07777, 0600);
  ck_assert_int_eq(st.st_uid, geteuid());
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("mode")), 0);
}
END_TEST

// ---- refusing foreign segments ----

/* Creates the segment of `tag` by hand with the given mode and size. */
static void make_segment(const char *tag, mode_t mode, off_t size) {
  char name[128];
  ledger_seg_name(name, sizeof name, lt_key(tag));
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(fchmod(fd, mode), 0);
  ck_assert_int_eq(ftruncate(fd, size), 0);
  close(fd);
}

START_TEST(test_wrong_mode_refused) {
  make_segment("m644", 0644, sizeof(struct ledger_seg));
  vx_ledger_t *l = ledger_open_key(lt_key("m644"), CAP, err, sizeof err);
  ck_assert_ptr_nonnull(l);
  ck_assert_int_eq(ledger_is_shared(l), 0);
  ck_assert_msg(strstr(err, "mode 0644") && strstr(err, "private ledger"), "err: %s", err);
  /* the private ledger still enforces the capacity for this process */
  ck_assert_int_eq(ledger_reserve(l, CAP), 0);
  ck_assert_int_eq(ledger_reserve(l, 1), -ENOMEM);
  ck_assert_int_eq(ledger_others(l), 0);
  ledger_close(l);
  ck_assert_ptr_null(ledger_observe_key(lt_key("m644"), err, sizeof err));
  ck_assert_int_eq(ledger_unlink_key(lt_key("m644")), 0);
}
END_TEST

START_TEST(test_foreign_layout_refused) {
  make_segment("size", 0600, 4096 * 3);
  vx_ledger_t *l = ledger_open_key(lt_key("size"), CAP, err, sizeof err);
  ck_assert_int_eq(ledger_is_shared(l), 0);
  ck_assert_msg(strstr(err, "foreign layout"), "err: %s", err);
  ledger_close(l);
  ck_assert_int_eq(ledger_unlink_key(lt_key("size")), 0);
  /* right size, a foreign magic */
  make_segment("magic", 0600, sizeof(struct ledger_seg));
  char name[128];
  ledger_seg_name(name, sizeof name, lt_key("magic"));
  int fd = shm_open(name, O_RDWR, 0);
  uint64_t junk = 0x1234;
  ck_assert_int_eq(pwrite(fd, &junk, sizeof junk, 0), sizeof junk);
  close(fd);
  l = ledger_open_key(lt_key("magic"), CAP, err, sizeof err);
  ck_assert_int_eq(ledger_is_shared(l), 0);
  ledger_close(l);
  ck_assert_int_eq(ledger_unlink_key(lt_key("magic")), 0);
}
END_TEST

START_TEST(test_foreign_owner_refused) {
  if (geteuid() != 0) return; /* only root can make a file another user owns */
  make_segment("owner", 0600, sizeof(struct ledger_seg));
  char name[128];
  ledger_seg_name(name, sizeof name, lt_key("owner"));
  int fd = shm_open(name, O_RDWR, 0);
  ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
  close(fd);
  vx_ledger_t *l = ledger_open_key(lt_key("owner"), CAP, err, sizeof err);
  ck_assert_int_eq(ledger_is_shared(l), 0);
  ck_assert_msg(strstr(err, "owned by uid 65534"), "err: %s", err);
  ledger_close(l);
  ck_assert_int_eq(ledger_unlink_key(lt_key("owner")), 0);
}
END_TEST

START_TEST(test_uuid_key) {
  unsigned char u[16];
  for (int i = 0; i < 16; i++)
    u[i] = (unsigned char)(i * 17 + 10);
  char key[33];
  ck_assert_str_eq(ledger_key_uuid(u, key), "0a1b2c3d4e5f708192a3b4c5d6e7f809");
  vx_ledger_t *l = ledger_open_key(key, CAP, err, sizeof err);
  ck_assert_msg(ledger_is_shared(l), "err: %s", err);
  ledger_close(l);
  ck_assert_int_eq(ledger_unlink_key(key), 0);
}
END_TEST

START_TEST(test_bad_key_private) {
  vx_ledger_t *l = ledger_open_key("../etc", CAP, err, sizeof err);
  ck_assert_ptr_nonnull(l);
  ck_assert_int_eq(ledger_is_shared(l), 0);
  ck_assert_msg(strstr(err, "ledger key"), "err: %s", err);
  ledger_close(l);
  ck_assert_int_eq(ledger_unlink_key("a/b"), -EINVAL);
}
END_TEST

// ---- concurrency across processes ----

/* Each child reserves one unit at a time until the ledger says no, reports
 * how many it got, and stays alive (holding them) until the parent has all
 * the reports.  With a working lock the total is exactly the capacity; a
 * lost race would overshoot it.  The children start together (a pipe closed
 * by the parent is the starting gun) so that their reserves interleave. */
static uint64_t race_children(const char *tag, int nchild, uint64_t cap) {
  int rep[2], gun[2], hold[2];
  ck_assert_int_eq(pipe(rep), 0);
  ck_assert_int_eq(pipe(gun), 0);
  ck_assert_int_eq(pipe(hold), 0);
  for (int c = 0; c < nchild; c++) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      char b;
      close(gun[1]);
      close(hold[1]);
      vx_ledger_t *l = ledger_open_key(lt_key(tag), cap, NULL, 0);
      (void)!read(gun[0], &b, 1);
      uint64_t got = 0;
      while (l && ledger_is_shared(l) && ledger_reserve(l, 1) == 0)
        got++;
      uint64_t msg[2] = {got, ledger_share(l)}; /* one write: atomic in a pipe */
      (void)!write(rep[1], msg, sizeof msg);
      (void)!read(hold[0], &b, 1);
      _exit(0); /* dies holding its share: the next caller reclaims it */
    }
  }
  close(rep[1]);
  close(gun[0]);
  close(hold[0]);
  close(gun[1]);
  uint64_t total = 0;
  for (int c = 0; c < nchild; c++) {
    uint64_t msg[2];
    ck_assert_int_eq(read(rep[0], msg, sizeof msg), sizeof msg);
    ck_assert_int_eq(msg[0], msg[1]); /* nobody took this live child's share */
    total += msg[0];
  }
  close(rep[0]);
  close(hold[1]);
  for (int c = 0; c < nchild; c++)
    ck_assert_int_gt(wait(NULL), 0);
  return total;
}

START_TEST(test_concurrent_reserve_never_exceeds) {
  ck_assert_int_eq(race_children("race2", 2, 3000), 3000);
  ck_assert_int_eq(race_children("race6", 6, 6000), 6000);
  /* the children exited holding everything: a newcomer gets it all back */
  vx_ledger_t *a = open_key("race6", 6000);
  ck_assert_int_eq(ledger_reserve(a, 6000), 0);
  ck_assert_int_eq(ledger_others(a), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("race2")), 0);
  ck_assert_int_eq(ledger_unlink_key(lt_key("race6")), 0);
}
END_TEST

// ---- death ----

START_TEST(test_sigkill_share_reclaimed) {
  vx_ledger_t *a = open_key("kill", CAP);
  pid_t c = child_holding("kill", CAP / 2 + 1);
  ck_assert_int_eq(ledger_others(a), CAP / 2 + 1);
  ck_assert_int_eq(ledger_reserve(a, CAP / 2), -ENOMEM);
  kill(c, SIGKILL);
  wait_gone(c);
  ck_assert_int_eq(ledger_reserve(a, CAP / 2), 0);
  ck_assert_int_eq(ledger_others(a), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("kill")), 0);
}
END_TEST

START_TEST(test_zombie_is_dead) {
  vx_ledger_t *a = open_key("zombie", CAP);
  pid_t c = child_holding("zombie", CAP);
  kill(c, SIGKILL);
  /* not reaped yet: kill(pid, 0) still succeeds, /proc says Z */
  uint64_t start = 1;
  for (int i = 0; i < 2000 && ledger_proc_stat(c, &start) != 0; i++)
    usleep(1000);
  ck_assert_int_eq(ledger_proc_stat(c, &start), 0);
  ck_assert_int_eq(ledger_reserve(a, CAP), 0);
  wait_gone(c);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("zombie")), 0);
}
END_TEST

START_TEST(test_sigkill_holding_lock) {
  vx_ledger_t *a = open_key("lockdeath", CAP);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {
    vx_ledger_t *l = ledger_open_key(lt_key("lockdeath"), CAP, NULL, 0);
    if (!l || ledger_reserve(l, CAP) != 0) _exit(1);
    pthread_mutex_lock(&l->seg->lock); /* the test hook: die inside the lock */
    raise(SIGKILL);
    _exit(2);
  }
  int st;
  ck_assert_int_eq(waitpid(c, &st, 0), c);
  ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  /* EOWNERDEAD: the next caller repairs the lock and reclaims the share */
  ck_assert_int_eq(ledger_reserve(a, CAP), 0);
  ck_assert_int_eq(ledger_release(a, CAP), 0);
  ck_assert_int_eq(ledger_reserve(a, 1), 0); /* the lock works again */
  ck_assert_int_eq(ledger_others(a), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("lockdeath")), 0);
}
END_TEST

START_TEST(test_sigkill_mid_run) {
  /* Children reserve and release in a loop; each is killed at some point
   * of its loop, possibly inside the lock.  Afterwards nothing is left. */
  vx_ledger_t *a = open_key("midrun", 1000);
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    kids[i] = fork();
    ck_assert_int_ge(kids[i], 0);
    if (kids[i] == 0) {
      vx_ledger_t *l = ledger_open_key(lt_key("midrun"), 1000, NULL, 0);
      for (unsigned k = 0;; k++) {
        if (ledger_reserve(l, 1 + k % 200) == 0 && k % 3) ledger_release(l, 1 + k % 200);
      }
    }
  }
  for (int i = 0; i < 4; i++) {
    usleep(20000);
    kill(kids[i], SIGKILL);
    wait_gone(kids[i]);
  }
  ck_assert_int_eq(ledger_others(a), 0);
  ck_assert_int_eq(ledger_reserve(a, 1000), 0);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("midrun")), 0);
}
END_TEST

START_TEST(test_pid_reuse_not_alive) {
  vx_ledger_t *a = open_key("reuse", CAP);
  pid_t c = child_holding("reuse", 0); /* a live process with a real start */
  uint64_t cstart = ledger_proc_start(c);
  ck_assert_uint_ne(cstart, 0);
  /* slot 1: the live pid with a wrong start time (its pid was reused);
   * slot 2: the same pid with the right start time (truly alive) */
  ck_assert_int_eq(seg_lock(a->seg, a->fd, a->slot), 0);
  int fake = -1, real = -1;
  for (int i = 0; i < LEDGER_SLOTS; i++) {
    if (a->seg->slot[i].pid == c)
      real = i;
    else if (a->seg->slot[i].pid == 0 && fake < 0)
      fake = i;
  }
  ck_assert_int_ge(real, 0);
  ck_assert_int_ge(fake, 0);
  a->seg->slot[fake] = (struct ledger_slot){.pid = c, .start = cstart + 12345, .bytes = CAP / 2};
  a->seg->slot[real].bytes = 100;
  seg_unlock(a->seg);
  ck_assert_int_eq(ledger_others(a), 100);
  ck_assert_int_eq(a->seg->slot[fake].pid, 0);
  ck_assert_int_eq(ledger_reserve(a, CAP - 100), 0);
  ck_assert_int_eq(ledger_reserve(a, 1), -ENOMEM);
  kill(c, SIGKILL);
  wait_gone(c);
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("reuse")), 0);
}
END_TEST

START_TEST(test_fork_child_gets_own_slot) {
  vx_ledger_t *a = open_key("fork", 1000);
  ck_assert_int_eq(ledger_reserve(a, 300), 0);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t c = fork();
  ck_assert_int_ge(c, 0);
  if (c == 0) {                         /* uses the inherited handle */
    uint64_t r1 = ledger_share(a);      /* 0: not the parent's share */
    int rc = ledger_reserve(a, 700);    /* fits beside the parent's 300 */
    int rc2 = ledger_reserve(a, 1);     /* does not */
    uint64_t others = ledger_others(a); /* the parent's 300 */
    lt_put(p[1], r1);
    lt_put(p[1], (uint64_t)(int64_t)rc);
    lt_put(p[1], (uint64_t)(int64_t)rc2);
    lt_put(p[1], others);
    ledger_close(a);
    _exit(0);
  }
  close(p[1]);
  uint64_t v[4];
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(lt_get(p[0], &v[i]), 0);
  close(p[0]);
  wait_gone(c);
  ck_assert_int_eq(v[0], 0);
  ck_assert_int_eq((int64_t)v[1], 0);
  ck_assert_int_eq((int64_t)v[2], -ENOMEM);
  ck_assert_int_eq(v[3], 300);
  ck_assert_int_eq(ledger_share(a), 300); /* the parent's slot untouched */
  ck_assert_int_eq(ledger_others(a), 0);  /* the child's slot freed at close */
  ledger_close(a);
  ck_assert_int_eq(ledger_unlink_key(lt_key("fork")), 0);
}
END_TEST

START_TEST(test_table_full_falls_back) {
  vx_ledger_t *h[LEDGER_SLOTS];
  for (int i = 0; i < LEDGER_SLOTS; i++)
    h[i] = open_key("full", CAP);
  vx_ledger_t *x = ledger_open_key(lt_key("full"), CAP, err, sizeof err);
  ck_assert_int_eq(ledger_is_shared(x), 0);
  ck_assert_msg(strstr(err, "full"), "err: %s", err);
  ledger_close(x);
  for (int i = 0; i < LEDGER_SLOTS; i++)
    ledger_close(h[i]);
  ck_assert_int_eq(ledger_unlink_key(lt_key("full")), 0);
}
END_TEST

int main(void) {
  lt_base = getpid();
  Suite *s = suite_create("ledger_procs");
  TCase *t = tcase_create("ledger");
  tcase_set_timeout(t, 20);
  tcase_add_test(t, test_reserve_release);
  tcase_add_test(t, test_overflow_and_observer);
  tcase_add_test(t, test_list_shows_each_process);
  tcase_add_test(t, test_segment_mode_0600);
  tcase_add_test(t, test_wrong_mode_refused);
  tcase_add_test(t, test_foreign_layout_refused);
  tcase_add_test(t, test_foreign_owner_refused);
  tcase_add_test(t, test_uuid_key);
  tcase_add_test(t, test_bad_key_private);
  tcase_add_test(t, test_concurrent_reserve_never_exceeds);
  tcase_add_test(t, test_sigkill_share_reclaimed);
  tcase_add_test(t, test_zombie_is_dead);
  tcase_add_test(t, test_sigkill_holding_lock);
  tcase_add_test(t, test_sigkill_mid_run);
  tcase_add_test(t, test_pid_reuse_not_alive);
  tcase_add_test(t, test_fork_child_gets_own_slot);
  tcase_add_test(t, test_table_full_falls_back);
  suite_add_tcase(s, t);
  return vx_check_run(s, 1);
}
