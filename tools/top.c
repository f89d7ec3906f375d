/* top.c: `vx top`: every vx process of this user, refreshing: per device the
 * bytes in each tier against its limit, migration and NVMe rates, prefetch hits,
 * and each process's share of every GPU's shared budget. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_top.h"
#include "commands.h"

static const char usage[] =
    "usage: vx top [PID] [--interval S] [--once] [--count N]\n"
    "Shows every process of this user running under vx (or only PID),\n"
    "refreshing; q or Ctrl-C quits.  At most 80 columns.\n"
    "  --interval S  seconds between refreshes (default 1)\n"
    "  --once        print one frame, no screen control (for pipes and scripts)\n"
    "  --count N     stop after N frames\n"
    "  -h, --help    this text\n";

static volatile sig_atomic_t stop_sig;
static struct termios saved_tio;
static int tio_saved;

static void on_signal(int sig) {
  stop_sig = sig;
}

static void term_enter(void) {
  struct termios t;
  if (isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &saved_tio)) {
    tio_saved = 1;
    t = saved_tio;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &t);
  }
  fputs("\033[?1049h\033[?25l", stdout); /* the alternate screen, cursor hidden */
}

static void term_leave(void) {
  if (tio_saved) tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
  fputs("\033[?25h\033[?1049l", stdout); /* the user's screen back as it was */
  fflush(stdout);
}

static int term_width(void) {
  struct winsize ws;
  if (!ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col > 0 && ws.ws_col < VX_TOP_WIDTH)
    return ws.ws_col;
  return VX_TOP_WIDTH;
}

/* Rows of the terminal (0: unknown, no limit). */
static int term_rows(void) {
  struct winsize ws;
  return !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_row > 0 ? ws.ws_row : 0;
}

/* Waits up to secs for a key; returns 1 when the user asked to quit. */
static int wait_key(double secs) {
  struct pollfd p = {STDIN_FILENO, POLLIN, 0};
  int has_tty = tio_saved;
  int rc = poll(has_tty ? &p : NULL, has_tty ? 1 : 0, (int)(secs * 1000));
  if (rc > 0 && (p.revents & POLLIN)) {
    char ch = 0;
    if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q' || ch == 3)) return 1;
  }
  return stop_sig != 0;
}

static int loop(double interval, long count, int live, pid_t only) {
  vx_top_state_t *st = vx_top_new();
  if (!st) return 1;
  vx_top_only(st, only);
  if (live) {
    struct sigaction sa = {0};
    sa.sa_handler = on_signal; /* no SA_RESTART: poll returns at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    term_enter();
  }
  int rc = 0;
  for (long n = 0; !count || n < count; n++) {
    if (n && wait_key(interval)) break;
    if (live) fputs("\033[H\033[2J", stdout);
    /* A live frame keeps to the screen: its last row stays free for the
     * cursor, so that nothing scrolls. */
    int rows = live ? term_rows() : 0;
    vx_top_rows(st, rows > 1 ? rows - 1 : rows);
    vx_top_frame(st, stdout, live ? term_width() : VX_TOP_WIDTH, interval);
    fflush(stdout);
    if (live && stop_sig) break;
    if (only && !live && !vx_top_shown(st)) { /* as vx stat PID: nothing to show is an error */
      fprintf(stderr, "vx top: no vx statistics for pid %d (not running under vx, or VX_STATS=0)\n",
              (int)only);
      rc = 1;
      break;
    }
  }
  if (live) term_leave();
  vx_top_free(st);
  return rc;
}

int vx_cmd_top(int argc, char **argv) {
  static const struct option longopts[] = {{"interval", 1, 0, 'i'},
                                           {"once", 0, 0, 'o'},
                                           {"count", 1, 0, 'n'},
                                           {"help", 0, 0, 'h'},
                                           {0, 0, 0, 0}};
  double interval = 1;
  long count = 0;
  int ch, once = 0;
  optind = 1;
  opterr = 0; /* vx_cli_bad_option says it, prefixed "vx top:" */
  while ((ch = getopt_long(argc, argv, "hi:n:", longopts, NULL)) != -1) {
    if (ch == 'i' && (vx_cli_parse_seconds(optarg, &interval) || interval < 0.05))
      return vx_cli_usage_error("top", "--interval takes seconds >= 0.05");
    if (ch == 'n' && vx_cli_parse_count(optarg, &count))
      return vx_cli_usage_error("top", "--count takes a positive number");
    if (ch == 'o')
      once = 1;
    else if (ch == 'h')
      return vx_cli_help(usage);
    else if (ch != 'i' && ch != 'n')
      return vx_cli_bad_option("top", argc, argv, "hi:n:");
  }
  long pid = 0;
  if (argc - optind > 1 ||
      (optind < argc && (vx_cli_parse_count(argv[optind], &pid) || pid > 0x3fffffff)))
    return vx_cli_usage_error("top", "PID must be one positive number");
  if (once) count = 1;
  return loop(interval, count, !once && isatty(STDOUT_FILENO), (pid_t)pid);
}
