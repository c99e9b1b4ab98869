/*
 * source.h - the data-source interface: what the trainer draws its batches
 * from (the shard loader, data_shards.h; the synthetic generator,
 * synthetic.h; the planner's buffers, plan_source.h).  As a backend is a
 * handle and a table of its ops (backend.h's tr_ops), a source is its
 * context and a pointer to the static const table of its kind: a source
 * states its operations once, where they are defined, and an open fills
 * nothing but ctx and ops (tr_source_init).
 *
 * Callers go through the tr_source_* helpers below, which also answer for
 * the optional operations a kind lacks.  A zeroed tr_data_source is one
 * not opened (tr_source_close does nothing to it).
 */
#ifndef SA1B_TRAINER_SOURCE_H
#define SA1B_TRAINER_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "batch.h"

/* The operations of one kind of source, each given the source's ctx.
 * Required: next, release, close; the others may be NULL. */
typedef struct tr_source_ops {
    /* 1 with *out set, 0 at the end of the data, -1 on error (err filled).
     * The batch stays valid until release(ctx, batch). */
    int (*next)(void *ctx, tr_batch **out, char *err, size_t err_len);
    void (*release)(void *ctx, tr_batch *b);
    /* Total time next() spent waiting for data, in seconds (for the
     * data-wait %).  NULL: it never waits. */
    double (*wait_seconds)(void *ctx);
    /* Where the stream is, saved in checkpoints so that a resume continues
     * it (seek).  NULL: a stream without a position. */
    void (*position)(void *ctx, uint64_t *epoch, uint64_t *consumed);
    /* 0, or -1 when the stream cannot continue there.  NULL: no seeking. */
    int (*seek)(void *ctx, uint64_t epoch, uint64_t consumed);
    /* What the data is, as a line that changes when it does (the shards'
     * names, sizes and images).  NULL where the source has nothing to
     * compare (synthetic batches).  Resume refuses to go on over other data. */
    void (*identity)(void *ctx, char *buf, size_t len);
    /* Stops the source's threads and frees ctx and its batches. */
    void (*close)(void *ctx);
} tr_source_ops;

typedef struct tr_data_source {
    void *ctx;
    const tr_source_ops *ops; /* the static const table of the source's kind */
} tr_data_source;

/* For a source's open: src becomes (ctx, ops), ops a static const table. */
static inline void tr_source_init(tr_data_source *src, void *ctx, const tr_source_ops *ops)
{
    memset(src, 0, sizeof *src);
    src->ctx = ctx;
    src->ops = ops;
}

/* ops->next: 1 with *out, 0 at the end of the data, -1 with err. */
static inline int tr_source_next(tr_data_source *src, tr_batch **out, char *err, size_t err_len)
{
    return src->ops->next(src->ctx, out, err, err_len);
}

/* Hands b, from tr_source_next, back to the source. */
static inline void tr_source_release(tr_data_source *src, tr_batch *b) { src->ops->release(src->ctx, b); }

/* Seconds next() waited for data in all (0 for a source that never waits). */
static inline double tr_source_wait_seconds(const tr_data_source *src)
{
    return src->ops->wait_seconds ? src->ops->wait_seconds(src->ctx) : 0.0;
}

/* 1 with the stream's position in *epoch, *consumed; 0 (both untouched)
 * for a source without one. */
static inline int tr_source_position(const tr_data_source *src, uint64_t *epoch, uint64_t *consumed)
{
    if (!src->ops->position) return 0;
    src->ops->position(src->ctx, epoch, consumed);
    return 1;
}

/* 0 with the stream at (epoch, consumed), or where a source without a
 * position is anyway; -1 when it cannot continue there. */
static inline int tr_source_seek(tr_data_source *src, uint64_t epoch, uint64_t consumed)
{
    return src->ops->seek ? src->ops->seek(src->ctx, epoch, consumed) : 0;
}

/* 1 with the data's identity line in buf; 0 (buf untouched) for a source
 * with nothing to compare. */
static inline int tr_source_identity(const tr_data_source *src, char *buf, size_t len)
{
    if (!src->ops->identity) return 0;
    src->ops->identity(src->ctx, buf, len);
    return 1;
}

/* Closes an opened source and zeroes *src; a zeroed (never opened or
 * closed) source is a no-op. */
static inline void tr_source_close(tr_data_source *src)
{
    if (src->ops) src->ops->close(src->ctx);
    memset(src, 0, sizeof *src);
}

#endif
