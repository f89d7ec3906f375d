/* history.h: the predictor's launch history (ring of launches, context tables,
 * per-stream state), shared by history.c (recording) and predict.c (iterating). */
#ifndef VX_POL_HISTORY_H
#define VX_POL_HISTORY_H

#include "pol_internal.h"

struct hrec {
  uint64_t seq; /* 0 = empty slot */
  uint64_t stream, time, kernel;
  uint64_t kf, km, kc; /* fine, medium (names only) and coarse keys */
  uint64_t next_same;  /* next launch on the same stream, 0 = none yet */
  uint64_t rpos;       /* absolute index of the first range in the range ring */
  uint32_t nr;
};

struct hrng {
  uint64_t name;
  uint32_t first, count, mode;
  uint32_t whole; /* the range covered the whole allocation (it may have grown since) */
};

#define HIST_BIRTHS 8 /* allocations first used by one launch, kept for hist_successor */

struct hctx {
  uint64_t key, seq;
  uint64_t prev; /* the occurrence before seq, 0 = none */
};

struct hstream {
  uint64_t id, last_seq, last_time;
  uint64_t kf, km, kc; /* keys of the stream's last launch */
  uint64_t match;      /* the past launch the stream's last launch repeats, 0 = none */
  uint64_t lost;       /* match == 0: the sticky candidate it had, whose lag is kept */
  int live;
};

/* Iterator over the predicted future, merged across streams by predicted time. */
struct pred_it {
  uint64_t cur[POL_MAX_STREAMS];  /* next past launch to replay, per stream; 0 = done */
  uint64_t base[POL_MAX_STREAMS]; /* time of the matched launch */
  uint64_t stop[POL_MAX_STREAMS]; /* replay no launch at or after this (the present) */
  uint32_t n;                     /* launches yielded */
};

struct pred_hist {
  struct hrec *rec;
  uint32_t nrec; /* power of two */
  struct hrng *rng;
  uint64_t nrng, rng_w;
  struct hctx *tf, *tm, *tc; /* fine, medium and coarse context tables */
  uint32_t tsize;
  struct hstream s[POL_MAX_STREAMS];
  struct pred_it it;
  int on_track;      /* the last launch was the one predicted (the sequence continues) */
  uint64_t born_seq; /* the launch that first used born[0..nborn) */
  uint64_t born[HIST_BIRTHS];
  uint32_t nborn;
};

/* 1 if the last recorded launch continued the predicted sequence. */
int hist_on_track(const pol_t *p);

const struct hrec *hist_get(const struct pred_hist *h, uint64_t seq);

#endif
