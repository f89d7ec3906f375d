/* run.c: `vx run [options] -- CMD ARGS...`: puts libvx.so in LD_PRELOAD,
 * maps options to VX_* (validated), warns about what defeats vx, then execs. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_elf.h"
#include "cli_libpath.h"
#include "commands.h"
#include "options.h"

static const char usage[] =
    "usage: vx run [OPTIONS] [--] CMD [ARGS...]\n"
    "Runs CMD with libvx.so preloaded; exits with CMD's status.\n"
    "  --device-limit S   VX_DEVICE_LIMIT: VRAM per device (8G, 50%, 8G,4G)\n"
    "  --host-limit S     VX_HOST_LIMIT: host RAM for spilled data\n"
    "  --nvme-dir D       VX_NVME_DIR: directory of the swap file (NVMe tier)\n"
    "  --policy P         VX_POLICY: predict|demand|static\n"
    "  --report FILE      VX_REPORT: exit summary (.json = JSON) or 'stderr'\n"
    "  --trace FILE       VX_TRACE: record a launch trace\n"
    "  --log LEVEL        VX_LOG: error|warn|info|debug\n"
    "  --env K=V          set any variable (VX_* ones are checked); repeatable\n"
    "  -h, --help         this text\n";

#define MAX_SETS 128

struct run_cfg {
  const char *names[MAX_SETS];
  char *values[MAX_SETS];
  int n;
  char abs[3][PATH_MAX]; /* absolute forms of --nvme-dir, --report, --trace */
};

static int add_set(struct run_cfg *c, const char *name, const char *value) {
  if (c->n == MAX_SETS) return vx_cli_usage_error("run", "too many settings");
  c->names[c->n] = name;
  c->values[c->n++] = (char *)value;
  return 0;
}

/* Relative paths become absolute: the program may change directory. */
static const char *absolute(const char *p, char *buf, size_t len) {
  char cwd[PATH_MAX];
  if (p[0] == '/' || !strcmp(p, "stderr") || !*p || !getcwd(cwd, sizeof cwd)) return p;
  if ((size_t)snprintf(buf, len, "%.*s/%s", (int)(len / 2), cwd, p) >= len) return p;
  return buf;
}

static int check_var(const char *name, const char *value) {
  char err[256];
  if (strncmp(name, "VX_", 3)) return 0;
  int o = vx_option_find(name);
  if (o < 0) {
    snprintf(err, sizeof err, "unknown variable %s (see `vx env`)", name);
    return vx_cli_usage_error("run", err);
  }
  if (vx_opt_check(o, value, err, sizeof err)) return vx_cli_usage_error("run", err);
  return 0;
}

static int parse(int argc, char **argv, struct run_cfg *c) {
  static const struct option longopts[] = {{"device-limit", 1, 0, 'd'}, {"host-limit", 1, 0, 'H'},
                                           {"nvme-dir", 1, 0, 'n'},     {"policy", 1, 0, 'p'},
                                           {"report", 1, 0, 'r'},       {"trace", 1, 0, 't'},
                                           {"log", 1, 0, 'l'},          {"env", 1, 0, 'e'},
                                           {"help", 0, 0, 'h'},         {0, 0, 0, 0}};
  int ch, rc = 0;
  optind = 1;
  opterr = 0; /* vx_cli_bad_option says it, prefixed "vx run:" */
  while (!rc && (ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
    char *eq;
    if (optarg && !strcmp(optarg, "--")) { /* `vx run --report -- cmd`: the value is missing */
      char msg[96];
      const char *name = "?";
      for (const struct option *o = longopts; o->name; o++)
        if (o->val == ch) name = o->name;
      snprintf(msg, sizeof msg, "option '--%s' needs a value before '--'", name);
      return vx_cli_usage_error("run", msg);
    }
    switch (ch) {
    case 'd':
      rc = add_set(c, "VX_DEVICE_LIMIT", optarg);
      break;
    case 'H':
      rc = add_set(c, "VX_HOST_LIMIT", optarg);
      break;
    case 'p':
      rc = add_set(c, "VX_POLICY", optarg);
      break;
    case 'l':
      rc = add_set(c, "VX_LOG", optarg);
      break;
    case 'n':
      rc = add_set(c, "VX_NVME_DIR", absolute(optarg, c->abs[0], PATH_MAX));
      break;
    case 'r':
      rc = add_set(c, "VX_REPORT", absolute(optarg, c->abs[1], PATH_MAX));
      break;
    case 't':
      rc = add_set(c, "VX_TRACE", absolute(optarg, c->abs[2], PATH_MAX));
      break;
    case 'e':
      if (!(eq = strchr(optarg, '=')) || eq == optarg)
        return vx_cli_usage_error("run", "--env takes NAME=VALUE");
      *eq = 0;
      rc = add_set(c, optarg, eq + 1);
      break;
    case 'h':
      return -1;
    default:
      return vx_cli_bad_option("run", argc, argv, "+h");
    }
  }
  for (int i = 0; !rc && i < c->n; i++)
    rc = check_var(c->names[i], c->values[i]);
  return rc;
}

static void warn_env(void) {
  const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (conf && strcasestr(conf, "expandable_segments:true"))
    fprintf(stderr,
            "vx run: warning: PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True: PyTorch "
            "then allocates through VMM (cuMemCreate), which vx only counts and never "
            "spills; unset it to let vx extend memory\n");
  const char *dis = getenv("VX_DISABLE");
  int off = 0;
  if (dis && !vx_parse_bool(dis, &off) && off)
    fprintf(stderr, "vx run: warning: VX_DISABLE=%s: vx passes everything through\n", dis);
  for (int i = 0; i < vx_option_count(); i++) {
    char err[256];
    const char *v = getenv(vx_option_info(i)->name);
    if (v && vx_opt_check(i, v, err, sizeof err))
      fprintf(stderr, "vx run: warning: %s; libvx will ignore its settings\n", err);
  }
}

static void warn_target(const char *cmd) {
  char path[PATH_MAX];
  vx_elf_info_t info;
  if (vx_find_in_path(cmd, path, sizeof path) || vx_elf_inspect(path, &info)) return;
  if (info.is_static)
    fprintf(stderr,
            "vx run: warning: %s is statically linked: LD_PRELOAD cannot reach it, so vx "
            "will do nothing (link it dynamically)\n",
            path);
  if (info.setid)
    fprintf(stderr,
            "vx run: warning: %s is set-user/group-ID: the dynamic linker ignores "
            "LD_PRELOAD paths for it, so vx will do nothing\n",
            path);
}

int vx_cmd_run(int argc, char **argv) {
  static struct run_cfg c;
  char lib[PATH_MAX];
  int rc = parse(argc, argv, &c);
  if (rc) return rc < 0 ? vx_cli_help(usage) : rc;
  if (optind >= argc) return vx_cli_usage_error("run", "no command given");
  if (vx_find_libvx(lib, sizeof lib)) {
    fprintf(stderr, "vx run: libvx.so not found next to vx, in ../lib of its prefix, or in %s\n",
            vx_install_libdir());
    return 1;
  }
  for (int i = 0; i < c.n; i++)
    setenv(c.names[i], c.values[i], 1);
  char *pre = vx_preload_value(lib, getenv("LD_PRELOAD"));
  if (!pre || setenv("LD_PRELOAD", pre, 1)) {
    fprintf(stderr, "vx run: out of memory\n");
    return 1;
  }
  free(pre);
  warn_env();
  warn_target(argv[optind]);
  fflush(NULL);
  execvp(argv[optind], argv + optind);
  int e = errno;
  fprintf(stderr, "vx run: %s: %s\n", argv[optind], strerror(e));
  return e == ENOENT ? 127 : 126;
}
