/* cli_pty.c: test helper driving a command (vx top) through a pseudo-terminal
 * of 80x24: waits for N frames, sends a quit key, checks the tty is restored. */
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static size_t count(const char *buf, size_t len, const char *needle) {
  size_t n = 0, k = strlen(needle);
  for (size_t i = 0; i + k <= len; i++)
    n += !memcmp(buf + i, needle, k);
  return n;
}

/* Reads from fd into buf until `frames` frames were seen, EOF, or timeout. */
static size_t drain(int fd, char *buf, size_t cap, size_t len, size_t frames, int timeout_ms) {
  while (len < cap && (!frames || count(buf, len, "vx top - ") < frames)) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    ssize_t n = read(fd, buf + len, cap - len);
    if (n <= 0) break;
    len += (size_t)n;
  }
  return len;
}

/* usage: cli_pty OUT FRAMES KEY CMD ARGS...  KEY: q or ctrl-c.  Writes the
 * captured output to OUT; exits 0 if the command exited 0 after KEY (for
 * ctrl-c: by its own handling), had the terminal in raw mode while running,
 * and restored line mode and echo at exit.  The terminal is 24x80, or
 * CLI_PTY_COLS columns. */
int main(int argc, char **argv) {
  if (argc < 5) return fprintf(stderr, "usage: cli_pty OUT FRAMES q|ctrl-c CMD ARGS...\n"), 2;
  struct winsize ws = {24, 80, 0, 0};
  const char *cols = getenv("CLI_PTY_COLS");
  if (cols && atoi(cols) > 0) ws.ws_col = (unsigned short)atoi(cols);
  int master;
  pid_t pid = forkpty(&master, NULL, NULL, &ws);
  if (pid < 0) return perror("forkpty"), 1;
  if (pid == 0) {
    execvp(argv[4], argv + 4);
    _exit(127);
  }
  static char buf[1 << 20];
  size_t len = drain(master, buf, sizeof buf, 0, (size_t)atoi(argv[2]), 10000);
  struct termios during; /* the command runs with echo and line mode off */
  int raw_ok = !tcgetattr(master, &during) && !(during.c_lflag & (ICANON | ECHO));
  const char *key = strcmp(argv[3], "q") ? "\003" : "q";
  (void)!write(master, key, 1);
  len = drain(master, buf, sizeof buf, len, 0, 5000);
  struct termios after;
  int tio_ok = raw_ok && !tcgetattr(master, &after) &&
               (after.c_lflag & (ICANON | ECHO)) == (ICANON | ECHO); /* a new pty's modes */
  int status = 0;
  waitpid(pid, &status, 0);
  FILE *f = fopen(argv[1], "w");
  if (f) fwrite(buf, 1, len, f), fclose(f);
  printf("frames %zu exit %d signal %d tty_restored %d\n", count(buf, len, "vx top - "),
         WIFEXITED(status) ? WEXITSTATUS(status) : -1, WIFSIGNALED(status) ? WTERMSIG(status) : 0,
         tio_ok);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 && tio_ok ? 0 : 1;
}
