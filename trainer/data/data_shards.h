/*
 * data_shards.h - the shard loader of pipeline/ (sa1b_loader.h) as a
 * tr_data_source (source.h): batches are handed to the model without
 * copying (the loader's u8 NHWC layout is tr_batch's), a short last batch
 * of an epoch arrives with its missing rows invalid, and seek() reopens the
 * loader at (epoch, consumed) so that a resumed run continues the same
 * stream.
 */
#ifndef SA1B_TRAINER_DATA_SHARDS_H
#define SA1B_TRAINER_DATA_SHARDS_H

#include <stdint.h>

#include "common/alloc.h"
#include "source.h"

typedef struct tr_shard_options {
    const char *glob;     /* shard files (glob(3), sorted) */
    int B, M, K;
    int S, R;             /* what the model expects; the shards must agree */
    uint64_t seed;
    uint64_t max_epochs;  /* 0 = forever */
    double flip_prob;
    int stored_point;     /* 1: point 0 is the shard's SA-1B point when present (evaluation) */
    int threads;          /* loader workers; 0 = automatic */
    tr_mem *mem;          /* batch buffers are counted here (category data); may be NULL */
    int rank, world;      /* data parallel: this process's slice of every global batch of
                             B * world images (world 0 counts as 1) */
    /* A damaged sample (a payload or masks whose CRC32C disagrees, a JPEG
     * that does not decode): 0 fails the batch (next() returns -1 with the
     * loader's line, the shard to rebuild and --skip-damaged named); 1
     * delivers the batch with that sample's row in place as padding (every
     * pair invalid, image zero), so that every other sample keeps its slot
     * and the stream its positions, and calls on_damaged (when not NULL)
     * with the loader's line. */
    int skip_damaged;
    void (*on_damaged)(void *ctx, const char *line);
    void *damaged_ctx;
} tr_shard_options;

/* Bytes of one of the loader's batch buffers for a source of opt's B, M,
 * K, S and R (category data; the planner's packed batches,
 * plan_source.h); 0 when too large. */
size_t tr_shard_batch_bytes(int B, int M, int K, int S, int R);

/* 0, or -1 with err (unreadable shards, S/R not the model's, ...). */
int tr_shard_source_open(tr_data_source *src, const tr_shard_options *opt, char *err, size_t err_len);

/* Of a source tr_shard_source_open opened: how many of its shards are
 * incomplete (made from an input that ended early: their provenance's
 * input_clean_end is false), and the path of the first (*first, NULL when
 * none).  0 and NULL for a source of another kind. */
size_t tr_shard_source_incomplete(const tr_data_source *src, const char **first);

/* Of such a source: how many inputs split into parts (sa1b-shard
 * --max-images) lack a part (a number skipped from 0 up, or a highest part
 * whose provenance says it is not the last), a part of the first (*first,
 * NULL when none) and the number of a part it lacks (*part, -1 when none).
 * 0, NULL and -1 for a source of another kind. */
size_t tr_shard_source_gapped(const tr_data_source *src, const char **first, long *part);

/* Of such a source: the damaged samples skipped so far (skip_damaged; a
 * seek keeps the count).  0 for a source of another kind. */
uint64_t tr_shard_source_damaged(const tr_data_source *src);

#endif
