/* Unit test of core/outfile.c: opening a user-given output path never
 * blocks and refuses what the caller cannot use; a write into a pipe whose
 * reader left is -EPIPE, not the process's death by SIGPIPE. */
#include <check.h>

#include "vx_check.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

static char dir[] = "/tmp/vx-outfile-XXXXXX";
static char why[128];

static const char *path_in(const char *name) {
  static char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

START_TEST(regular_file_created_0600_and_truncated) {
  const char *p = path_in("report.txt");
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, "old contents", 12), 12);
  close(fd);
  fd = vx_outfile_open(p, VX_OUT_REGULAR, why, sizeof why);
  ck_assert_msg(fd >= 0, "%s", why);
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  ck_assert_int_eq(st.st_size, 0);
  ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* cleared */
  ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  close(fd);
  unlink(p);
  fd = vx_outfile_open(p, VX_OUT_REGULAR, why, sizeof why);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(fstat(fd, &st), 0);
  ck_assert_int_eq(st.st_mode & 0077, 0); /* new: 0600, whatever the umask adds */
  close(fd);
  unlink(p);
}
END_TEST

START_TEST(fifo_without_reader_is_enxio) {
  const char *p = path_in("fifo");
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  ck_assert_int_eq(vx_outfile_open(p, VX_OUT_STREAM, why, sizeof why), -ENXIO);
  ck_assert_str_eq(why, "a FIFO with no reader");
  ck_assert_int_eq(vx_outfile_open(p, VX_OUT_REGULAR, why, sizeof why), -ENXIO);
  /* with a reader: a stream may write, a regular-file user is refused */
  int rd = open(p, O_RDONLY | O_NONBLOCK);
  ck_assert_int_ge(rd, 0);
  int fd = vx_outfile_open(p, VX_OUT_STREAM, why, sizeof why);
  ck_assert_msg(fd >= 0, "%s", why);
  ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  ck_assert_int_eq(vx_outfile_write(fd, "hello", 5), 0);
  char buf[8] = "";
  ck_assert_int_eq(read(rd, buf, sizeof buf), 5);
  close(fd);
  ck_assert_int_eq(vx_outfile_open(p, VX_OUT_REGULAR, why, sizeof why), -EINVAL);
  ck_assert_str_eq(why, "a FIFO, not a regular file");
  close(rd);
  unlink(p);
}
END_TEST

START_TEST(other_kinds_refused) {
  ck_assert_int_eq(vx_outfile_open(dir, VX_OUT_STREAM, why, sizeof why), -EISDIR);
  ck_assert_str_eq(why, strerror(EISDIR));
  int fd = vx_outfile_open("/dev/null", VX_OUT_STREAM, why, sizeof why);
  ck_assert_msg(fd >= 0, "%s", why);
  close(fd);
  ck_assert_int_eq(vx_outfile_open("/dev/null", VX_OUT_REGULAR, why, sizeof why), -EINVAL);
  ck_assert_str_eq(why, "a character device, not a regular file");
  ck_assert_int_eq(vx_outfile_open(path_in("no/such/dir"), VX_OUT_STREAM, why, sizeof why),
                   -ENOENT);
}
END_TEST

/* SIGPIPE's default action kills: the write must survive it, leave no
 * SIGPIPE pending, and restore the signal mask. */
START_TEST(reader_gone_is_epipe_not_death) {
  signal(SIGPIPE, SIG_DFL);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  close(p[0]);
  sigset_t before, after, pending;
  pthread_sigmask(SIG_SETMASK, NULL, &before);
  ck_assert_int_eq(vx_outfile_write(p[1], "report", 6), -EPIPE);
  pthread_sigmask(SIG_SETMASK, NULL, &after);
  ck_assert_int_eq(sigismember(&after, SIGPIPE), sigismember(&before, SIGPIPE));
  sigpending(&pending);
  ck_assert_int_eq(sigismember(&pending, SIGPIPE), 0);
  close(p[1]);
}
END_TEST

int main(void) {
  if (!mkdtemp(dir)) return 1;
  Suite *s = suite_create("outfile");
  TCase *t = tcase_create("outfile");
  tcase_add_test(t, regular_file_created_0600_and_truncated);
  tcase_add_test(t, fifo_without_reader_is_enxio);
  tcase_add_test(t, other_kinds_refused);
  tcase_add_test(t, reader_gone_is_epipe_not_death);
  suite_add_tcase(s, t);
  int rc = vx_check_run(s, 1);
  rmdir(dir);
  return rc;
}
