/*
 * shard_resample.c - a shard's mask at a chosen R (sa1b_shard_resample_mask):
 * the masks of a source-size shard (each annotation's own runs, version 2,
 * mask size 0) resampled straight from their runs with the letterbox and
 * the nearest/area rules of sa1b-shard, so that they are the bytes a packed
 * shard made at that R holds; the masks of other shards as they are.
 */
#include "sa1b_image.h"
#include "sa1b_prep.h"
#include "sa1b_shard.h"
#include "shard_format.h"

#include <stdlib.h>
#include <string.h>

#include "rle_internal.h"
#include "sa1b_rle.h"

int sa1b_shard_resample_mask(const sa1b_shard *s, const sa1b_shard_mask_view *m, uint32_t R,
                             int mode, uint8_t *out, sa1b_error *err)
{
    if (!s || !m || !out) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    if (in->mask_format != SA1B_SHARD_RLE_SOURCE) {
        if (R != in->mask_size)
            return sa1b_error_set(err, SA1B_EINVAL, -1, "masks of %ux%u asked for at %ux%u",
                                  in->mask_size, in->mask_size, R, R);
        return sa1b_shard_decode_mask(s, m, out, err);
    }
    if (R < 1 || R > in->image_size)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "mask size %u not in 1..%u", R, in->image_size);
    sa1b_shard_image_view im;
    SA1B_FORWARD(sa1b_shard_image(s, m->image_index, &im, err));
    sa1b_letterbox lb;
    SA1B_FORWARD(sa1b_letterbox_geometry(im.orig_w, im.orig_h, R, &lb, err));
    /* the runs (each takes a byte at least), validated */
    size_t cap = m->data_len ? (size_t)m->data_len : 1, n = 0;
    uint32_t *runs = malloc(cap * sizeof *runs);
    uint8_t *grid = lb.new_w == R ? out : malloc((size_t)lb.new_w * lb.new_h);
    if (!runs || !grid) {
        free(runs);
        if (grid != out) free(grid);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    }
    sa1b_error e;
    shard_runs_it it;
    int rc = shard_runs_begin(&it, m->bits, (size_t)m->data_len, (uint64_t)im.orig_w * im.orig_h, &e);
    while (!rc && it.left) rc = shard_runs_next(&it, &runs[n++], &e);
    if (!rc) rc = shard_runs_end(&it, &e);
    if (!rc) {
        sa1b_rle r = {im.orig_h, im.orig_w, n, runs, cap};
        rc = mode == SA1B_MASK_NEAREST ? rle_resample_nearest_valid(&r, lb.new_h, lb.new_w, grid, &e)
                                       : rle_resample_area_valid(&r, lb.new_h, lb.new_w, NULL, grid, &e);
    }
    if (!rc) {
        if (grid != out)
            for (uint32_t y = 0; y < lb.new_h; y++) {
                memcpy(out + (size_t)y * R, grid + (size_t)y * lb.new_w, lb.new_w);
                memset(out + (size_t)y * R + lb.new_w, 0, R - lb.new_w);
            }
        memset(out + (size_t)lb.new_h * R, 0, (size_t)(R - lb.new_h) * R);
    }
    free(runs);
    if (grid != out) free(grid);
    if (rc)
        return sa1b_error_set(err, rc, (int64_t)m->data_offset,
                              "image %llu mask row %llu runs at offset %llu: %s",
                              (unsigned long long)m->image_index, (unsigned long long)m->index,
                              (unsigned long long)m->data_offset, e.msg);
    return SA1B_OK;
}
