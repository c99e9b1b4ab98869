/*
 * test-shard-pack.c - sa1b_shard_pack_mask (AVX2 when the CPU has it, SSE2,
 * eight bytes at a time, one at a time for the rest) against the documented
 * order bit by bit: bit k of the row-major mask in byte k/8 at bit k%8,
 * any nonzero byte (1, 0x80, 0xFF, ...) a one, the padding up to the
 * stride zero, whatever the output held before; every R from 1 to 130 and
 * some large ones, random, empty and full masks.  And
 * rle_resample_area_bits_valid (sa1b-shard's packed area masks, set bit
 * by bit during the resample) against sa1b_rle_resample_area's mask01
 * packed by sa1b_shard_pack_mask, in the R x R layout of a letterboxed
 * mask (content rh x rw, rw <= R).  Deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "rle_internal.h"
#include "sa1b_rle.h"
#include "sa1b_shard.h"
#include "tap.h"
#include "test-rng.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { return trng_below(&rs, n); }

int main(void)
{
    tap_plan(0);
    int bad = 0, cases = 0;
    static const uint8_t ones[] = {1, 2, 0x7F, 0x80, 0xFF, 0x10};
    for (uint32_t R = 1; R <= 1100; R += R < 130 ? 1 : 97) {
        size_t n = (size_t)R * R, stride = (size_t)sa1b_shard_mask_stride(R);
        uint8_t *m = malloc(n + 1), *out = malloc(stride), *ref = calloc(stride, 1);
        for (int kind = 0; kind < 4; kind++) {
            for (size_t i = 0; i < n; i++) {
                int on = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? rnd(2) : rnd(17) == 0;
                m[i] = on ? ones[rnd(sizeof ones)] : 0;
            }
            memset(ref, 0, stride);
            for (size_t i = 0; i < n; i++)
                if (m[i]) ref[i / 8] |= (uint8_t)(1u << (i % 8));
            memset(out, 0xA5, stride);
            sa1b_shard_pack_mask(m, R, out);
            bad += memcmp(out, ref, stride) != 0;
            cases++;
        }
        free(m);
        free(out);
        free(ref);
    }
    tap_ok(bad == 0, "sa1b_shard_pack_mask == bit by bit on %d masks (%d differ)", cases, bad);

    /* resample straight to bits: source masks of blobs and noise, targets
     * smaller and larger than the source, portrait and landscape content */
    bad = cases = 0;
    int failed = 0, rows_bad = 0, scratch_bad = 0, box_bad = 0;
    uint64_t *scratch = calloc(4 * (300 + 2), sizeof *scratch); /* R <= 300 */
    for (int t = 0; t < 300; t++) {
        uint32_t h = 1 + rnd(t < 150 ? 40 : 400), w = 1 + rnd(t < 150 ? 40 : 400);
        uint32_t R = 1 + rnd(t % 3 ? 64 : 300), rh = 1 + rnd(R), rw = 1 + rnd(R);
        uint8_t *src = malloc((size_t)h * w), *m01 = malloc((size_t)rh * rw);
        uint8_t *grid = calloc((size_t)R * R, 1);
        uint32_t cx = rnd(w), cy = rnd(h), rx = 1 + rnd(w), ry = 1 + rnd(h);
        int noise = (int)rnd(4);
        for (uint32_t x = 0; x < w; x++) /* column-major, as RLE */
            for (uint32_t y = 0; y < h; y++) {
                double dx = ((double)x - cx) / rx, dy = ((double)y - cy) / ry;
                src[(size_t)x * h + y] = dx * dx + dy * dy <= 1 || (noise && rnd(9) == 0);
            }
        sa1b_rle r = SA1B_RLE_INIT;
        sa1b_error e;
        size_t stride = (size_t)sa1b_shard_mask_stride(R);
        uint8_t *ref = malloc(stride), *got = malloc(stride);
        if (sa1b_rle_encode(&r, src, h, w, 1, &e) ||
            sa1b_rle_resample_area(&r, rh, rw, NULL, m01, &e)) {
            failed++;
        } else {
            /* mask01 is rh x rw row-major: the top-left of the R x R grid */
            for (uint32_t i = 0; i < rh; i++) memcpy(grid + (size_t)i * R, m01 + (size_t)i * rw, rw);
            sa1b_shard_pack_mask(grid, R, ref);
            memset(got, 0, stride);
            uint32_t rows[2] = {7, 7};
            double box[4] = {-1, -1, -1, -1}, want[4];
            /* every other case with the caller's scratch, which stays zero */
            failed += rle_resample_area_bits_valid(&r, rh, rw, R, got, t & 1 ? scratch : NULL,
                                                   rows, box, &e) != SA1B_OK;
            sa1b_rle_bbox(&r, want);
            box_bad += memcmp(box, want, sizeof box) != 0;
            bad += memcmp(got, ref, stride) != 0;
            for (size_t q = 0; q < 4 * ((size_t)rh + 1); q++) scratch_bad += scratch[q] != 0;
            /* the rows said hold every set bit (a row with foreground
             * below half of every cell may be among them) */
            int lo = -1, hi = -1;
            for (uint32_t i = 0; i < rh; i++)
                for (uint32_t j = 0; j < rw; j++)
                    if (m01[(size_t)i * rw + j]) {
                        if (lo < 0) lo = (int)i;
                        hi = (int)i;
                    }
            rows_bad += rows[1] > rh || (lo >= 0 && (rows[0] > (uint32_t)lo || rows[1] <= (uint32_t)hi));
        }
        cases++;
        sa1b_rle_free(&r);
        free(src), free(m01), free(grid), free(ref), free(got);
    }
    tap_ok(failed == 0 && bad == 0,
           "rle_resample_area_bits_valid == packed mask01 on %d masks (%d differ, %d failed)", cases,
           bad, failed);
    tap_ok(rows_bad == 0 && scratch_bad == 0,
           "rle_resample_area_bits_valid: its rows hold every set bit (%d wrong), the scratch "
           "is left zero (%d not)", rows_bad, scratch_bad);
    tap_ok(box_bad == 0, "rle_resample_area_bits_valid: its box is sa1b_rle_bbox's (%d differ)",
           box_bad);
    /* the box on run lists with zero-length runs anywhere (both first runs
     * too: sa1b_rle_bbox's point at position 0 less one), foreground across
     * columns, odd and even counts, one run; targets below and above the
     * source (the walk gives the box, or sa1b_rle_bbox) */
    box_bad = failed = cases = 0;
    for (int t = 0; t < 3000; t++) {
        uint32_t h = 1 + rnd(t % 2 ? 6 : 60), w = 1 + rnd(t % 3 ? 6 : 60);
        uint32_t cn[64], n = 0, left = h * w;
        while (left && n < 63) {
            uint32_t c = rnd(5) == 0 ? 0 : rnd(4) == 0 ? rnd(left + 1) : rnd(h + 1);
            c = c > left ? left : c;
            cn[n++] = c;
            left -= c;
        }
        if (left) cn[n++] = left;
        if (t % 7 == 0 && n < 63) cn[n++] = 0; /* a trailing zero-length run */
        uint32_t R = 1 + rnd(80), rh = 1 + rnd(R), rw = 1 + rnd(R);
        size_t stride = (size_t)sa1b_shard_mask_stride(R);
        uint8_t *got = calloc(stride, 1);
        sa1b_rle r = SA1B_RLE_INIT;
        sa1b_error e;
        double box[4] = {-1, -1, -1, -1}, want[4];
        if (sa1b_rle_set_runs(&r, h, w, cn, n, &e) ||
            rle_resample_area_bits_valid(&r, rh, rw, R, got, NULL, NULL, box, &e)) {
            failed++;
        } else {
            sa1b_rle_bbox(&r, want);
            box_bad += memcmp(box, want, sizeof box) != 0;
        }
        cases++;
        sa1b_rle_free(&r);
        free(got);
    }
    tap_ok(failed == 0 && box_bad == 0,
           "rle_resample_area_bits_valid's box on %d run lists with zero-length runs: %d differ "
           "from sa1b_rle_bbox, %d failed", cases, box_bad, failed);
    free(scratch);
    sa1b_error e;
    sa1b_rle r1 = SA1B_RLE_INIT;
    uint8_t one = 1, bits[64] = {0};
    int rc = sa1b_rle_encode(&r1, &one, 1, 1, 1, &e);
    tap_ok(rc == SA1B_OK && rle_resample_area_bits_valid(&r1, 4, 5, 4, bits, NULL, NULL, NULL, &e) == SA1B_EINVAL,
           "rle_resample_area_bits_valid: stride < rw refused");
    sa1b_rle_free(&r1);
    return tap_done();
}
