/* cli_top.h: rendering one `vx top` frame (topframe.c), separate from the
 * terminal handling in top.c so that it can be driven without a terminal. */
#ifndef VX_TOOLS_CLI_TOP_H
#define VX_TOOLS_CLI_TOP_H

#include <stdio.h>
#include <sys/types.h>

#define VX_TOP_WIDTH 80

typedef struct vx_top_state vx_top_state_t;

/* Previous samples per process, for rates from deltas.  NULL on ENOMEM. */
vx_top_state_t *vx_top_new(void);
void vx_top_free(vx_top_state_t *st);
/* Shows only process pid from now on (0: all processes, the default). */
void vx_top_only(vx_top_state_t *st, pid_t pid);
/* At most rows lines per frame from now on (0: no limit): what does not
 * fit is cut, and the last line says how much and how to see it. */
void vx_top_rows(vx_top_state_t *st, int rows);
/* The processes the last frame showed. */
int vx_top_shown(const vx_top_state_t *st);
/* Samples every live vx process and prints one frame, no line wider than
 * width (<= VX_TOP_WIDTH) columns.  Rates are deltas against the previous
 * frame, or averages since each process started on its first appearance. */
void vx_top_frame(vx_top_state_t *st, FILE *out, int width, double interval);

#endif
