/* env.c: `vx env [--json]`: every VX_* variable from options.def with its
 * meaning, default and the value in effect now; invalid values are marked. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "options.h"

extern char **environ;

static const char usage[] =
    "usage: vx env [--json | --markdown]\n"
    "Lists every VX_* variable: value in effect, default, meaning.  Exits 1\n"
    "if a variable set in the environment is invalid or unknown.\n"
    "  --json      one JSON object\n"
    "  --markdown  the table of variables for the README (defaults, no values)\n"
    "  -h, --help  this text\n";

struct env_row {
  const vx_option_info_t *o;
  const char *value; /* in effect: the environment's, else the default */
  int set;
  char err[256]; /* empty when valid */
};

static void fill(struct env_row *r, int i) {
  const vx_option_info_t *o = vx_option_info(i);
  const char *v = getenv(o->name);
  r->o = o;
  r->set = v != NULL;
  r->value = v ? v : o->def;
  r->err[0] = 0;
  vx_opt_check(i, r->value, r->err, sizeof r->err);
}

/* The meaning as people read it: the help text, and an ENUM's choices. */
static void meaning(FILE *out, const vx_option_info_t *o, void (*put)(FILE *, const char *)) {
  put(out, o->help);
  if (!o->choices) return;
  put(out, "; one of ");
  put(out, o->choices);
}

static void put_plain(FILE *out, const char *s) {
  fputs(s, out);
}

/* Calls fn for each VX_* variable in the environment that is not in the table. */
static int each_unknown(void (*fn)(const char *entry, int first, FILE *out), FILE *out) {
  int n = 0;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "VX_", 3)) continue;
    char name[64];
    size_t k = strcspn(*e, "=");
    snprintf(name, sizeof name, "%.*s", (int)(k < 63 ? k : 63), *e);
    int unknown = vx_option_find(name) < 0;
    if (unknown && fn) fn(*e, n == 0, out);
    n += unknown;
  }
  return n;
}

static void text_unknown(const char *entry, int first, FILE *out) {
  (void)first;
  fprintf(out, "%s  [UNKNOWN variable: not a vx option]\n", entry);
}

static void json_unknown(const char *entry, int first, FILE *out) {
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(entry, "="), entry);
  fputs(first ? "" : ",", out);
  vx_json_str(out, name);
}

static int print_text(FILE *out) {
  int bad = 0;
  for (int i = 0; i < vx_option_count(); i++) {
    struct env_row r;
    fill(&r, i);
    bad += r.err[0] != 0;
    fprintf(out, "%s=%s  [%s%s]\n", r.o->name, r.value, r.err[0] ? "INVALID: " : "",
            r.err[0] ? r.err
            : r.set  ? "set"
                     : "default");
    fprintf(out, "    %s, default \"%s\": ", r.o->type, r.o->def);
    meaning(out, r.o, put_plain);
    fputc('\n', out);
  }
  return bad + each_unknown(text_unknown, out);
}

static int print_json(FILE *out) {
  int bad = 0;
  fputs("{\"options\":[", out);
  for (int i = 0; i < vx_option_count(); i++) {
    struct env_row r;
    fill(&r, i);
    bad += r.err[0] != 0;
    fprintf(out, "%s\n{\"name\":\"%s\",\"type\":\"%s\",\"default\":", i ? "," : "", r.o->name,
            r.o->type);
    vx_json_str(out, r.o->def);
    fputs(",\"value\":", out);
    vx_json_str(out, r.value);
    fprintf(out, ",\"set\":%s,\"valid\":%s,\"error\":", r.set ? "true" : "false",
            r.err[0] ? "false" : "true");
    if (r.err[0])
      vx_json_str(out, r.err);
    else
      fputs("null", out);
    fputs(",\"help\":", out);
    vx_json_str(out, r.o->help);
    fputs(",\"choices\":", out);
    if (r.o->choices)
      vx_json_str(out, r.o->choices);
    else
      fputs("null", out);
    fputs("}", out);
  }
  fputs("],\n\"unknown\":[", out);
  bad += each_unknown(json_unknown, out);
  fputs("]}\n", out);
  return bad;
}

/* Markdown cells: '|' would end the cell. */
static void md_cell(FILE *out, const char *s) {
  for (; *s; s++)
    fputs(*s == '|' ? "\\|" : (char[]){*s, 0}, out);
}

static void print_markdown(FILE *out) {
  fputs("| variable | type | default | meaning |\n| --- | --- | --- | --- |\n", out);
  for (int i = 0; i < vx_option_count(); i++) {
    const vx_option_info_t *o = vx_option_info(i);
    fprintf(out, "| `%s` | %s | %s%s%s | ", o->name, o->type, *o->def ? "`" : "",
            *o->def ? o->def : "(empty)", *o->def ? "`" : "");
    meaning(out, o, md_cell);
    fputs(" |\n", out);
  }
}

int vx_cmd_env(int argc, char **argv) {
  static const struct option longopts[] = {
      {"json", 0, 0, 'j'}, {"markdown", 0, 0, 'm'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int ch, json = 0, markdown = 0;
  optind = 1;
  opterr = 0; /* vx_cli_bad_option says it, prefixed "vx env:" */
  while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (ch == 'm')
      markdown = 1;
    else if (ch == 'j')
      json = 1;
    else if (ch == 'h')
      return vx_cli_help(usage);
    else
      return vx_cli_bad_option("env", argc, argv, "h");
  }
  if (optind < argc) return vx_cli_usage_error("env", "unexpected argument");
  if (markdown && json) return vx_cli_usage_error("env", "--json or --markdown, not both");
  if (markdown) {
    print_markdown(stdout);
    return 0;
  }
  int bad = json ? print_json(stdout) : print_text(stdout);
  return bad ? 1 : 0;
}
