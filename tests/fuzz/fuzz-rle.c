/*
 * fuzz-rle.c - libFuzzer target for the counts-string parser and everything
 * that runs on what it accepts.  Input: bytes 0-1 give h, bytes 2-3 give w
 * (little-endian), byte 4 picks the resampling grid; the rest is the
 * counts string (not NUL-terminated).  A string that parses must format and
 * re-parse to the same runs, decode/encode consistently, and survive area,
 * both bboxes, IoU, merge and both resampling modes; anything else must be
 * rejected without reading past the input.  Invariant violations abort.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sa1b_rle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    uint32_t h = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    uint32_t w = (uint32_t)data[2] | (uint32_t)data[3] << 8;
    uint32_t rh = 1 + (data[4] & 15), rw = 1 + (data[4] >> 4);
    const char *s = (const char *)data + 5;
    size_t len = size - 5;

    sa1b_rle r = SA1B_RLE_INIT, r2 = SA1B_RLE_INIT, m = SA1B_RLE_INIT;
    sa1b_error err;
    if (sa1b_rle_from_string(&r, h, w, s, len, &err) != SA1B_OK) {
        if (err.code == SA1B_OK || !err.msg[0]) abort();
        sa1b_rle_free(&r);
        return 0;
    }
    char *t = NULL;
    size_t tl = 0;
    if (sa1b_rle_to_string(&r, &t, &tl, &err) != SA1B_OK) abort();
    if (sa1b_rle_from_string(&r2, h, w, t, tl, &err) != SA1B_OK || r2.n != r.n ||
        (r.n && memcmp(r.cnts, r2.cnts, r.n * sizeof *r.cnts) != 0))
        abort();
    free(t);

    uint64_t area = sa1b_rle_area(&r);
    double bb[4], sb[4], iou = -1;
    sa1b_rle_bbox(&r, bb);
    sa1b_rle_bbox_sa1b(&r, sb);
    if (sa1b_rle_iou(&r, &r2, 0, &iou, &err) != SA1B_OK || iou != (area ? 1.0 : 0.0)) abort();
    const sa1b_rle *in[2] = {&r, &r2};
    if (sa1b_rle_merge(&m, in, 2, (int)(data[4] & 1), &err) != SA1B_OK ||
        sa1b_rle_area(&m) != area)
        abort();

    uint64_t hw = (uint64_t)h * w;
    if (hw && hw <= (1u << 20)) {
        uint8_t *px = malloc(hw), *px2 = malloc(hw);
        sa1b_rle_decode(&r, px, 0);
        if (sa1b_rle_encode(&r2, px, h, w, 0, &err) != SA1B_OK) abort();
        sa1b_rle_decode(&r2, px2, 0);
        if (memcmp(px, px2, hw) != 0 || sa1b_rle_area(&r2) != area) abort();
        free(px);
        free(px2);
    }
    if (hw) {
        uint8_t a[256], b[256], c[256];
        if (sa1b_rle_resample_nearest(&r, rh, rw, a, &err) != SA1B_OK) abort();
        if (sa1b_rle_resample_area(&r, rh, rw, b, c, &err) != SA1B_OK) abort();
        for (uint32_t i = 0; i < rh * rw; i++)
            if (c[i] != (b[i] >= 128)) abort(); /* f >= 1/2 iff round(255 f) >= 128 */
    }
    sa1b_rle_free(&r);
    sa1b_rle_free(&r2);
    sa1b_rle_free(&m);
    return 0;
}
