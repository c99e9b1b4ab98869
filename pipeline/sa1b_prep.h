/*
 * sa1b_prep.h - one SA-1B sample (a JPEG and its annotation JSON) turned
 * into one shard sample: validate, filter and subsample the masks while they
 * are still runs, decode only the kept ones straight to the mask grid,
 * letterbox the image, and scale the metadata to shard coordinates.
 *
 * This is the per-image work of sa1b-shard(1), as a library function so
 * that other pipelines get the same bytes.  It is pure: the output depends
 * only on the inputs and the options (the seed included), never on which
 * thread runs it.  Images go to an S x S letterbox (longest side -> S, top
 * left, zero padding); masks to an R x R grid letterboxed the same way
 * (content round(w R / L) x round(h R / L), L = max(w, h)).
 */
#ifndef SA1B_PREP_H
#define SA1B_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"
#include "sa1b_image.h"
#include "sa1b_shard.h"
#include "sa1b_subsample.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SA1B_MASK_AREA = 0, SA1B_MASK_NEAREST = 1 }; /* mask resampling */

typedef struct sa1b_prep_opts {
    uint32_t image_size;   /* S */
    uint32_t mask_size;    /* R (1..S) */
    int image_format;      /* SA1B_SHARD_RAW or SA1B_SHARD_JPEG (re-encoded at S) */
    int jpeg_quality;      /* 1..100, for SA1B_SHARD_JPEG */
    int jpeg_huffman;      /* SA1B_JPEG_OPTIMIZED (default) or SA1B_JPEG_STANDARD */
    int mask_mode;         /* SA1B_MASK_AREA: cell foreground fraction >= 0.5;
                              SA1B_MASK_NEAREST: the pixel under the cell centre */
    sa1b_filter filter;
    sa1b_strategy strategy;
    size_t max_masks;      /* 0: keep every mask passing the filter */
    uint64_t seed;
    int mask_format;       /* SA1B_SHARD_PACKED (default) or SA1B_SHARD_RLE: the masks of
                              the sample come packed or as runs (each mask's data_len) */
    int keep_empty;        /* 0 (default): a mask that the filter keeps but that has no
                              set cell at R (none at all for source-size masks) is
                              dropped before subsampling, so that max_masks counts
                              masks that are there; 1: kept (and counted) */
} sa1b_prep_opts;

/* Defaults of sa1b-shard: S 1024, R S/4, raw, quality 90, optimized
 * Huffman tables, area, no filter, masks empty at R dropped, random, no
 * limit, seed 0. */
void sa1b_prep_opts_default(sa1b_prep_opts *o);

/* Buffers of one prepared sample, reused from call to call.  Start from
 * SA1B_PREP_OUT_INIT; sa1b_prep_out_free releases them. */
typedef struct sa1b_prep_out {
    sa1b_shard_sample_in sample;  /* what sa1b_shard_writer_add_packed takes (the masks
                                     come packed, or as runs); points into the buffers */
    uint32_t masks_in;            /* annotations in the JSON */
    uint32_t masks_kept;          /* = sample.n_masks */
    uint32_t masks_empty;         /* masks the filter keeps with no set cell at R: dropped
                                     (in masks_in - masks_kept), or with keep_empty the kept
                                     ones (in masks_kept) */
    uint32_t image_crc;           /* sa1b_crc32c(0, sample.image, sample.image_len), made by
                                     the worker (for sa1b_shard_writer_add_packed_crc) */
    uint32_t masks_crc;           /* the CRC32C of the masks' stored bytes in order (each
                                     mask's stride, or its runs' data_len bytes), made by the
                                     worker as each mask is made (likewise) */
    void *priv_;                  /* buffers */
} sa1b_prep_out;
#define SA1B_PREP_OUT_INIT {{0}, 0, 0, 0, 0, 0, NULL}
void sa1b_prep_out_free(sa1b_prep_out *o);

/* Prepares one sample.  name is the member stem ("sa_123") used in
 * messages, which read "sa_123.json: mask 7: run sum 2999999 != 1500x2000"
 * or "sa_123.jpg: size 2250x1500 != annotation 2000x1500": the file and
 * what was wrong.  ctx is the calling thread's TurboJPEG context. */
int sa1b_prep_run(sa1b_imgctx *ctx, const sa1b_prep_opts *o, const char *name,
                  const uint8_t *jpg, size_t jpg_len, const uint8_t *json, size_t json_len,
                  sa1b_prep_out *out, sa1b_error *err);

#ifdef __cplusplus
}
#endif
#endif
