/* svg.c: the report picture: stacked areas of bytes per tier over time,
 * migration traffic up/down, and the top allocation sites by bytes spilled. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_report.h"

#define W 900
#define LEFT 80
#define PLOT_W (W - LEFT - 20)
#define TIER_Y 60
#define TIER_H 260
#define MOVE_Y (TIER_Y + TIER_H + 60)
#define MOVE_H 140
#define SITES_Y (MOVE_Y + MOVE_H + 60)
#define MAX_SITES 10
#define SITE_CHARS 76 /* of a site's stack on its line: 12px sans-serif, 900 wide */

static const char *const tier_colors[VX_REPORT_COLS] = {"#2b6cb0", "#38a169", "#d69e2e", "#c53030"};

static void xml_text(FILE *out, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '&')
      fputs("&amp;", out);
    else if (c == '<')
      fputs("&lt;", out);
    else if (c == '>')
      fputs("&gt;", out);
    else if (c == '"')
      fputs("&quot;", out);
    else if (c < 0x20 && c != '\t')
      fputc('?', out); /* not allowed in XML 1.0 */
    else
      fputc(c, out);
  }
}

static double x_of(const vx_report_t *r, double t) {
  double t0 = r->samples[0].t, t1 = r->samples[r->nsamples - 1].t;
  return LEFT + (t1 > t0 ? (t - t0) / (t1 - t0) : 0) * PLOT_W;
}

static double stack_top(const vx_sample_t *s, int k) {
  double v = 0;
  for (int i = 0; i <= k; i++)
    v += s->tier[i];
  return v;
}

/* Report numbers are doubles read from JSON: anything outside uint64_t
 * (negative, NaN, huge) is clamped instead of converted (undefined). */
static uint64_t clamp_u64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 18446744073709549568.0) return UINT64_MAX;
  return (uint64_t)v;
}

/* Axes with four steps of the scale, in human units (12G, 1.5M/s). */
static void axis(FILE *out, int y, int h, double max, const char *unit) {
  char b[16];
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", LEFT, y + h,
          LEFT + PLOT_W, y + h);
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n", LEFT, y, LEFT,
          y + h);
  for (int k = 1; k <= 4; k++) {
    double v = max * k / 4, py = y + h - (double)h * k / 4;
    fprintf(out,
            "<line class=\"ytick\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s%s</text>\n",
            LEFT, py, LEFT + PLOT_W, py, LEFT - 6, py + 4, vx_fmt_bytes(clamp_u64(v), b, sizeof b),
            unit);
  }
  fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>\n", LEFT - 6, y + h);
}

/* Ticks under a panel at a round step of seconds (1, 2 or 5 times a power
 * of ten), five to ten of them. */
static void time_labels(const vx_report_t *r, FILE *out, int y) {
  double t0 = r->samples[0].t, t1 = r->samples[r->nsamples - 1].t, span = t1 - t0;
  if (!(span > 0)) {
    fprintf(out, "<text class=\"xtick\" x=\"%d\" y=\"%d\">%.1f s</text>\n", LEFT, y + 14, t0);
    return;
  }
  double raw = span / 8, p10 = pow(10, floor(log10(raw))), m = raw / p10;
  double step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p10;
  for (double t = step * (double)(long long)(t0 / step + 0.999999); t <= t1 + step * 1e-9;
       t += step) {
    double x = x_of(r, t);
    fprintf(out,
            "<line class=\"xtick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>"
            "<text class=\"xtick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g s</text>\n",
            x, y, x, y + 4, x, y + 16, t);
  }
}

static void tier_areas(const vx_report_t *r, FILE *out) {
  double max = 1;
  for (size_t i = 0; i < r->nsamples; i++)
    if (stack_top(&r->samples[i], VX_REPORT_COLS - 1) > max)
      max = stack_top(&r->samples[i], VX_REPORT_COLS - 1);
  if (r->budget > max) max = r->budget; /* the budget line stays in the picture */
  axis(out, TIER_Y, TIER_H, max, "");
  time_labels(r, out, TIER_Y + TIER_H);
  for (int k = 0; k < VX_REPORT_COLS; k++) {
    fprintf(out, "<path id=\"tier-%s\" class=\"tier\" fill=\"%s\" fill-opacity=\"0.8\" d=\"",
            vx_report_col_names[k], tier_colors[k]);
    for (size_t i = 0; i < r->nsamples; i++)
      fprintf(out, "%c%.1f,%.1f ", i ? 'L' : 'M', x_of(r, r->samples[i].t),
              TIER_Y + TIER_H - stack_top(&r->samples[i], k) / max * TIER_H);
    for (size_t i = r->nsamples; i-- > 0;)
      fprintf(out, "L%.1f,%.1f ", x_of(r, r->samples[i].t),
              TIER_Y + TIER_H - (k ? stack_top(&r->samples[i], k - 1) : 0) / max * TIER_H);
    fprintf(out, "Z\"><title>%s bytes</title></path>\n", vx_report_col_names[k]);
    fprintf(out,
            "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%d\" y=\"%d\">%s</text>\n",
            LEFT + 10 + k * 110, TIER_Y - 24, tier_colors[k], LEFT + 26 + k * 110, TIER_Y - 14,
            vx_report_col_names[k]);
  }
  if (r->budget > 0) { /* what the device budget allowed: above it, data had to move */
    char b[16];
    double y = TIER_Y + TIER_H - r->budget / max * TIER_H;
    fprintf(out,
            "<line id=\"budget\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
            "stroke-dasharray=\"6,4\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">device budget "
            "%s</text>\n",
            LEFT, y, LEFT + PLOT_W, y, LEFT + PLOT_W, y - 4,
            vx_fmt_bytes(clamp_u64(r->budget), b, sizeof b));
  }
}

static void traffic(const vx_report_t *r, FILE *out) {
  double max = 1;
  for (size_t i = 0; i < r->nsamples; i++) {
    if (r->samples[i].up > max) max = r->samples[i].up;
    if (r->samples[i].down > max) max = r->samples[i].down;
  }
  axis(out, MOVE_Y, MOVE_H, max, "/s");
  time_labels(r, out, MOVE_Y + MOVE_H);
  for (int dir = 0; dir < 2; dir++) {
    fprintf(
        out,
        "<polyline id=\"traffic-%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
        dir ? "down" : "up", dir ? "#c05621" : "#2f855a");
    for (size_t i = 0; i < r->nsamples; i++) {
      double v = dir ? r->samples[i].down : r->samples[i].up;
      fprintf(out, "%.1f,%.1f ", x_of(r, r->samples[i].t), MOVE_Y + MOVE_H - v / max * MOVE_H);
    }
    fprintf(out, "\"><title>bytes %s per second</title></polyline>\n", dir ? "down" : "up");
  }
  fprintf(out, "<text x=\"%d\" y=\"%d\">migration: up (green) and down (orange), %.1f s</text>\n",
          LEFT, MOVE_Y - 10, r->samples[r->nsamples - 1].t - r->samples[0].t);
}

static void sites(const vx_report_t *r, FILE *out) {
  fprintf(
      out,
      "<text x=\"20\" y=\"%d\" font-weight=\"bold\">Top allocation sites by bytes spilled</text>\n",
      SITES_Y);
  if (!r->nsites) {
    fprintf(out,
            "<text id=\"no-sites\" x=\"20\" y=\"%d\">no allocation sites recorded "
            "(run with VX_SITES=1)</text>\n",
            SITES_Y + 22);
    return;
  }
  for (size_t i = 0; i < r->nsites && i < MAX_SITES; i++) {
    char sp[16], by[16], stack[400], shown[SITE_CHARS + 4];
    vx_site_stack(&r->sites[i], stack, sizeof stack);
    /* The line stays inside the picture: the stack is cut, whole in its title. */
    snprintf(shown, sizeof shown, "%.*s%s", SITE_CHARS, stack,
             strlen(stack) > SITE_CHARS ? "..." : "");
    fprintf(
        out, "<text class=\"site\" x=\"20\" y=\"%zu\">%zu. %s spilled of %s in %.0f allocations: ",
        SITES_Y + 22 + i * 20, i + 1, vx_fmt_bytes(clamp_u64(r->sites[i].spilled), sp, sizeof sp),
        vx_fmt_bytes(clamp_u64(r->sites[i].bytes), by, sizeof by), r->sites[i].count);
    xml_text(out, shown);
    fputs("<title>", out);
    xml_text(out, stack);
    fputs("</title></text>\n", out);
  }
}

void vx_report_svg(const vx_report_t *r, FILE *out) {
  size_t rows = r->nsites < MAX_SITES ? (r->nsites ? r->nsites : 1) : MAX_SITES;
  int h = SITES_Y + 40 + (int)rows * 20;
  fprintf(out,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
          "<text x=\"20\" y=\"22\" font-size=\"16\" font-weight=\"bold\">vx report: ",
          W, h, W, h);
  xml_text(out, r->command);
  fputs("</text>\n", out);
  if (r->nsamples >= 1) {
    tier_areas(r, out);
    traffic(r, out);
  } else {
    fprintf(out, "<text id=\"no-timeline\" x=\"%d\" y=\"%d\">no timeline recorded</text>\n", LEFT,
            TIER_Y + TIER_H / 2);
  }
  sites(r, out);
  fputs("</svg>\n", out);
}
