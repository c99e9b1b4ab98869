/*
 * rle_internal.h - library-internal entry points of rle.c for the pipeline
 * (prep.c), not exported: the same work as the public functions of
 * sa1b_rle.h without checks that the caller has already made.
 */
#ifndef SA1B_RLE_INTERNAL_H
#define SA1B_RLE_INTERNAL_H

#include "sa1b_rle.h"

/* sa1b_rle_from_string (same validation, errors and runs) that also sets
 * *area (may be NULL) to the foreground pixel count, sa1b_rle_area of the
 * result, summed on the way; 0 on error.  A string of len characters holds
 * at most len runs: when r->cnts is not NULL and r->cap >= len, the runs
 * go into r->cnts as it is, never reallocated, so r may be a view into the
 * caller's buffer (prep.c parses all masks of a sample into one). */
int rle_from_string_area(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                         uint64_t *area, sa1b_error *err);

/* sa1b_rle_resample_nearest and sa1b_rle_resample_area for runs that are
 * valid by construction (r as rle_from_string_area or another function of
 * sa1b_rle.h left it on success): the run sum is not checked again (it is
 * h*w), everything else is; the same output. */
int rle_resample_nearest_valid(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *out,
                               sa1b_error *err);
int rle_resample_area_valid(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                            uint8_t *mask01, sa1b_error *err);

/* rle_resample_area_valid's mask01 straight into packed bits: cell (i, j)
 * of the rh x rw target at bit i * stride + j of bits (byte b / 8, bit
 * b % 8, LSB first: sa1b_shard_pack_mask's order for an R x R mask with
 * stride R), set where mask01 is 1; the other bits are left as they are
 * (the caller zeroes them).  No rh x rw byte mask is written or packed.
 * rows (may be NULL): target rows [rows[0], rows[1]) outside which no
 * bit was set (those with any foreground; 0, 0 on error), so that a
 * caller that reuses bits for another mask need clear only those.  scratch (may be
 * NULL): 4 (rh + 1) uint64 zeros, used and left zero, instead of the
 * work's own (zeroed on each call).  bbox (may be NULL): sa1b_rle_bbox(r),
 * taken on the way where the resample walks every run (rw <= w, the
 * downsampling sa1b-shard does), so that the caller need not walk them
 * again.  SA1B_EINVAL when stride < rw. */
int rle_resample_area_bits_valid(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint32_t stride,
                                 uint8_t *bits, uint64_t *scratch, uint32_t rows[2],
                                 double bbox[4], sa1b_error *err);

#endif
