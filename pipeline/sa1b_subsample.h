/*
 * sa1b_subsample.h - which masks of an image are kept: filters, then one of
 * four subsampling strategies, decided while masks are still compressed
 * (area and bounding box come from the runs, nothing is decoded).
 *
 * Every strategy is a pure function of (candidates, k, seed, image id): the
 * same inputs select the same masks on any machine and with any thread
 * count.  The selection is returned as indices into the input array in
 * ascending order, so kept masks keep their annotation order.  The exact
 * definitions (normative, re-implementable) are in man/sa1b-shard.1,
 * section SUBSAMPLING; the comments below summarise them.
 */
#ifndef SA1B_SUBSAMPLE_H
#define SA1B_SUBSAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One candidate mask: what the strategies look at. */
typedef struct sa1b_cand {
    uint64_t area;           /* foreground pixels (from the runs) */
    double bbox[4];          /* COCO convention [x, y, w, h] from the runs */
    double predicted_iou;
    double stability_score;
} sa1b_cand;

typedef enum sa1b_strategy {
    SA1B_STRATEGY_RANDOM = 0,       /* k uniformly at random */
    SA1B_STRATEGY_QUALITY = 1,      /* top k by predicted_iou, then stability_score */
    SA1B_STRATEGY_SIZE_BALANCED = 2,/* equal quotas over log-area bins, rest random */
    SA1B_STRATEGY_KMEANS = 3        /* k-means on (centre, log area, aspect), best per cluster */
} sa1b_strategy;

typedef struct sa1b_filter {
    uint64_t min_area;       /* keep area >= min_area (0: no filter) */
    double min_iou;          /* keep predicted_iou >= min_iou (-inf: none) */
    double min_stability;    /* keep stability_score >= min_stability (-inf: none) */
} sa1b_filter;

/* Default filter: keeps every mask, including empty ones. */
void sa1b_filter_default(sa1b_filter *f);

/* 1 when the filter keeps c, 0 when it drops it (NULL: the default). */
int sa1b_filter_keeps(const sa1b_filter *f, const sa1b_cand *c);

/* Parses "random", "quality", "size-balanced", "kmeans"; -1 when unknown. */
int sa1b_strategy_parse(const char *name);
const char *sa1b_strategy_name(sa1b_strategy s);

/* Number of log-area bins of size-balanced. */
#define SA1B_SIZE_BINS 8
/* Lloyd iterations of kmeans at most. */
#define SA1B_KMEANS_ITERS 25

/* Applies the filter to cand[0..n-1], then keeps at most k of the survivors
 * with the strategy (all survivors when they are k or fewer; k == 0 means
 * no limit).  img_w, img_h: the image size (kmeans normalises by them).
 * The random decisions use the stream rng_seed(seed, image_id).
 * out: capacity n; receives the kept indices ascending; *n_out their count.
 * scratch is allocated internally (SA1B_ENOMEM on failure). */
int sa1b_subsample(const sa1b_cand *cand, size_t n, const sa1b_filter *filter,
                   sa1b_strategy strategy, size_t k, uint64_t seed, int64_t image_id,
                   uint32_t img_w, uint32_t img_h, size_t *out, size_t *n_out,
                   sa1b_error *err);

#ifdef __cplusplus
}
#endif
#endif
