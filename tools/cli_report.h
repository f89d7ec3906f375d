/* cli_report.h: the exit report (VX_REPORT=x.json) as `vx report` reads it,
 * and the SVG timeline renderer (svg.c). */
#ifndef VX_TOOLS_CLI_REPORT_H
#define VX_TOOLS_CLI_REPORT_H

#include <stdio.h>

#include "cli_json.h"

/* The report's memory columns (a sample's tier[], the timeline's bands):
 * not tiers/registry.h's allocation tiers, which count placements. */
enum {
  VX_REPORT_COL_NATIVE,
  VX_REPORT_COL_MANAGED,
  VX_REPORT_COL_HOST,
  VX_REPORT_COL_NVME,
  VX_REPORT_COLS
};

/* One timeline sample: process totals at time t (seconds from start); tier
 * bytes are current values, up/down are rates derived from the cumulative
 * bytes_up/bytes_down of consecutive samples (bytes per second). */
typedef struct vx_sample {
  double t;
  double tier[VX_REPORT_COLS];
  double up, down;
} vx_sample_t;

typedef struct vx_site {
  double spilled, bytes, count;
  const vx_json_t *stack; /* array of frame strings, or a string; may be NULL */
} vx_site_t;

typedef struct vx_report {
  vx_json_t *root;
  const char *command;
  vx_sample_t *samples;
  size_t nsamples;
  vx_site_t *sites; /* sorted by bytes spilled, largest first */
  size_t nsites;
  double budget; /* the devices' limit_bytes summed: the device budget (0: not recorded) */
} vx_report_t;

extern const char *const vx_report_col_names[VX_REPORT_COLS];

/* Reads and interprets a report file.  Returns 0 or -errno with a reason in
 * err (unreadable, not JSON, not an object). */
int vx_report_load(const char *path, vx_report_t *r, char *err, size_t errlen);
void vx_report_free(vx_report_t *r);
/* Writes the timeline picture and the top-sites table as one SVG document. */
void vx_report_svg(const vx_report_t *r, FILE *out);
/* One stack as "f0 < f1 < f2" into buf (at most len bytes). */
void vx_site_stack(const vx_site_t *s, char *buf, size_t len);

#endif
