/*
 * batch.h - what the trainer consumes: one micro-batch of B images with M
 * prompted masks each (the layout the loader of issue 5 delivers), and its
 * allocation.  Where batches come from: source.h (the interface),
 * data_shards.h (shards), synthetic.h (the generator), plan_source.h (the
 * planner's buffers).
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
    int32_t *n_masks;  /* [B] the image's masks in the batch, valid or not (a mask
                          with no pixel at R is one, valid 0); NULL where a source
                          has no such count (synthetic batches) */
} tr_batch;

/* Allocates a zeroed batch (category data); NULL when out of memory. */
tr_batch *tr_batch_alloc(tr_mem *mem, int B, int M, int K, int S, int R);
/* Frees b's buffers (on the mem it was allocated on) and b; NULL is a no-op. */
void tr_batch_free(tr_mem *mem, tr_batch *b);

#endif
