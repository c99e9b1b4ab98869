/*
 * batch.h - what the trainer consumes: one micro-batch of B images with M
 * prompted masks each (the layout the loader of issue 5 delivers), the
 * data-source interface a loader plugs into, and a deterministic synthetic
 * batch generator used by tests, the PyTorch comparison and --synthetic-batch.
 */
#ifndef SA1B_TRAINER_BATCH_H
#define SA1B_TRAINER_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/alloc.h"

typedef struct tr_batch {
    int B, M, K, S, R;
    uint8_t *image;    /* [B, S, S, 3] RGB letterboxed, content top-left */
    int32_t *content;  /* [B, 2] width, height of the content in pixels; outside
                          it the normalised image is exactly 0 */
    uint8_t *masks;    /* [B, M, R, R] 0/1 targets at the logit resolution */
    uint8_t *valid;    /* [B, M] 1 for a real (image, mask) pair, 0 for padding */
    float *points;     /* [B, M, K, 2] (x, y) in input pixels */
    int32_t *labels;   /* [B, M, K] 1 positive, 0 negative, -1 padding */
} tr_batch;

/* A source of batches (the loader, or the synthetic generator).
 * next: 1 with *out set, 0 at the end of the data, -1 on error (err filled).
 * The batch stays valid until release(ctx, batch).  wait_seconds: total time
 * next() spent waiting for data (for the data-wait %); position: where the
 * stream is, saved in checkpoints so that a resume continues it. */
typedef struct tr_data_source {
    void *ctx;
    int (*next)(void *ctx, tr_batch **out, char *err, size_t err_len);
    void (*release)(void *ctx, tr_batch *b);
    double (*wait_seconds)(void *ctx);
    void (*position)(void *ctx, uint64_t *epoch, uint64_t *consumed);
    int (*seek)(void *ctx, uint64_t epoch, uint64_t consumed);
    /* What the data is, as a line that changes when it does (the shards'
     * names, sizes and images); NULL where the source has nothing to
     * compare (synthetic batches).  Resume refuses to go on over other data. */
    void (*identity)(void *ctx, char *buf, size_t len);
    void (*close)(void *ctx);
} tr_data_source;

/* Allocates a zeroed batch (category data); NULL when out of memory. */
tr_batch *tr_batch_alloc(tr_mem *mem, int B, int M, int K, int S, int R);
void tr_batch_free(tr_mem *mem, tr_batch *b);

/* Fills b deterministically from seed: images of coloured rectangles and
 * ellipses on a textured background, letterboxed with varied content sizes
 * (the first image always fills S x S), one mask per shape at R x R, point
 * prompts: the first point positive inside the mask, the others negative
 * outside it or padding (-1); when M > 1 the last pair of the last image is
 * invalid.  Masks and points agree with the image, so a model can learn. */
void tr_batch_synthetic(tr_batch *b, uint64_t seed);

/* A data source producing tr_batch_synthetic(seed + i) for i = 0, 1, ...
 * Two batches of mem: a thread of its own makes batch i + 1 while the
 * caller works on batch i (handed out until it asks for the next); its
 * wait_seconds is the time next() waited for that thread. */
int tr_synthetic_source_open(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R,
                             uint64_t seed);
/* The same for rank `rank` of `world` data-parallel processes: batch i is
 * rows [rank*B, (rank+1)*B) of tr_batch_synthetic(seed + i) over B*world
 * images, so that the ranks together see the batch one process of B*world
 * images would. */
int tr_synthetic_source_open_rank(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R,
                                  uint64_t seed, int rank, int world);

#endif
