/*
 * image.c - TurboJPEG decode/encode, exact area-filter resize, letterbox.
 *
 * Implements: sa1b_image.h.  The resize is separable: per axis a table of
 * taps (first source index, fixed-point weights = exact overlap / source
 * span) is built per geometry and kept while the geometry repeats; each
 * source row is filtered horizontally once into a small ring buffer of
 * rows, and every destination row is the weighted sum of the ring rows it
 * covers.  The portable C code is the reference; AVX2 kernels (run-time
 * dispatch) compute the same integers.  The letterbox reuses the context's
 * scratch (decode buffer, taps, ring, SIMD plan) so a steady-state call
 * allocates nothing, and decodes straight into the canvas when the DCT
 * scale alone reaches the target size.  For sa1b_prep_run
 * (image_internal.h) it also checksums the canvas while its rows are in
 * cache and skips zeroing padding rows that are zero already.
 */
#include "sa1b_image.h"
#include "crc32c_internal.h"
#include "image_internal.h"
#include "ycc_internal.h"
#include "sa1b_shard.h" /* sa1b_crc32c */

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <jpeglib.h>
#include <jerror.h>

/* ---- area resize ----------------------------------------------------------
 *
 * Integer arithmetic throughout, so results are bit-identical on every
 * machine and compiler.  Per axis (n source pixels to m destination pixels)
 * destination pixel i spans [i*n, (i+1)*n) in units of 1/m source pixel and
 * source pixel j spans [j*m, (j+1)*m): the integer overlaps ov_ij sum to n
 * for each i, and ov_ij / n, rounded to Q16 with the remainder given to the
 * largest so that each row sums to exactly 65536, are the weights.  Every
 * destination pixel uses the same number T of taps (zero-padded), so the
 * inner loops are specialised for T and the channel count.  The horizontal
 * pass writes Q8 (uint16 <= 65280); the vertical pass sums Q16 * Q8 in
 * uint32 (<= 65280 * 65536 < 2^32) over fixed-size blocks that compilers
 * vectorise at -O2.
 *
 * The portable C code below is the reference.  On x86-64 with AVX2
 * (checked at run time) both passes have SIMD kernels computing the very
 * same integers, see "AVX2 kernels" below; tests/test-image.c checks that
 * they give the same bytes as the reference on many random shapes. */

typedef struct axis_taps {
    uint32_t *start;   /* [m] first source index; start + T <= n */
    uint32_t *ov;      /* [m][T] integer overlaps (zero where no overlap) */
    uint32_t *wq;      /* [m][T] ov / n in fixed point, each row summing to exactly 1 */
    size_t cap_m, cap_w;
    uint32_t T;        /* taps per destination pixel (the most any needs) */
    uint32_t n, m;     /* what the tables hold (n = 0: nothing yet) */
    int bits;
    uint32_t up;       /* 1: area filter; >= 2: linear reconstruction first (taps_build) */
    uint64_t gen;      /* counts the rebuilds: a plan made from other tables is rebuilt */
} axis_taps;

/* A SIMD horizontal pass's plan for one (source width, destination width,
 * channels): see hplan_build. */
typedef struct hplan {
    uint32_t *off;     /* [nblk][nw] source byte offset of each window */
    uint32_t *blk;     /* [nblk] the output block at each position */
    uint8_t *tab;      /* per position [1 or P][3][2 * vals]: gather control, low and high
                          weight halves */
    size_t off_cap, blk_cap, tab_cap;
    size_t nblk;       /* blocks of vals output values; values from nblk * vals on are done in C */
    size_t n1;         /* positions [0, n1) need one tap pair, the others P */
    uint32_t P;        /* tap pairs: ceil(T / 2) */
    uint32_t sw, dw;   /* key (sw = 0: nothing yet), with ch and gen */
    uint64_t gen;      /* the generation of the taps it was made from */
    int ch;
    int ok;            /* 0: some window does not fit, the C pass is used */
} hplan;

struct image_resizer {
    axis_taps x, y;
    uint32_t up_x, up_y; /* the source is a plane subsampled this much: see taps_build (0, 1: no) */
    uint16_t *ring;    /* [ring_rows][dw * ch] horizontally filtered rows, Q8 */
    size_t ring_cap;
    hplan hp;         /* AVX2: blocks of 8 values, two 16-byte windows */
    hplan hq;         /* AVX-512: blocks of 16 values, one 64-byte window */
    hplan h4;         /* AVX-512, up to 4 taps: blocks of 16 values, bytes (h4plan_build) */
};
typedef struct image_resizer resize_scratch;

static void taps_free(axis_taps *t)
{
    free(t->start);
    free(t->ov);
    free(t->wq);
    memset(t, 0, sizeof *t);
}

static void hplan_free(hplan *p)
{
    free(p->off);
    free(p->blk);
    free(p->tab);
}

static void scratch_free(resize_scratch *s)
{
    taps_free(&s->x);
    taps_free(&s->y);
    free(s->ring);
    hplan_free(&s->hp);
    hplan_free(&s->hq);
    hplan_free(&s->h4);
    memset(s, 0, sizeof *s);
}

/* Makes *p hold need elements of elem bytes, 64-byte aligned; what it
 * held before is not kept (every buffer here is refilled after it grows).
 * The SIMD kernels read the plans' records and the ring's rows with
 * full-width loads, and one that straddles two cache lines costs two
 * (with realloc's 16-byte alignment the AVX-512 horizontal pass took
 * 17-25% longer on an Emerald Rapids core).  0 on ENOMEM, *p unchanged. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 1;
    void *q = NULL;
    if (need > SIZE_MAX / elem || posix_memalign(&q, 64, need * elem) != 0) return 0;
    free(*p);
    *p = q;
    *cap = need;
    return 1;
}

/* Source sample j's weights in pixel p of the signal it is sampled from,
 * up times as long (up >= 2; see taps_build), times 2 up: the linear
 * interpolation between the two sample centres nearest the pixel's, each
 * centre in the middle of its up pixels; beyond the first or last centre
 * that sample alone.  *j0: the first of the (one or two) samples, w[0],
 * w[1] their weights (summing to 2 up). */
static void lin_weights(uint64_t p, uint32_t n, uint32_t up, uint32_t *j0, uint32_t w[2])
{
    const uint64_t c = 2 * p + 1, u2 = 2 * (uint64_t)up; /* in half pixels: the pixel's centre */
    if (c <= up) { /* at or before the first sample's centre */
        *j0 = 0, w[0] = (uint32_t)u2, w[1] = 0;
        return;
    }
    uint64_t j = (c - up) / u2; /* centre j at (2j + 1) up <= c */
    if (j >= (uint64_t)n - 1) {
        *j0 = n - 1, w[0] = (uint32_t)u2, w[1] = 0;
        return;
    }
    uint64_t d = c - (2 * j + 1) * up; /* < 2 up: the distance past centre j */
    *j0 = (uint32_t)j, w[0] = (uint32_t)(u2 - d), w[1] = (uint32_t)d;
}

/* The taps of an axis: n source pixels to m destination pixels, weights
 * in Q(bits).  up <= 1: the area filter.  up >= 2: the source is n samples
 * of a signal of N = n up pixels (a chroma plane and its image), which is
 * reconstructed by linear interpolation between the samples' centres (for
 * up = 2 the triangle filter of libjpeg's "fancy" upsampling, 3/4 and 1/4,
 * in exact arithmetic instead of rounded to 8 bits) and then area-filtered
 * to m: destination pixel i weighs sample j by the sum over the pixels p
 * it overlaps of ov_ip lin_pj (lin from lin_weights, summing to 2 up per
 * pixel), out of 2 up N.  Either way the integer weights are rounded to
 * Q(bits) cumulatively, so that each row sums to exactly 1 << bits. */
static int taps_build(axis_taps *t, uint32_t n, uint32_t m, int bits, uint32_t up)
{
    if (up < 2) up = 1;
    if (t->n == n && t->m == m && t->bits == bits && t->up == up) return 1; /* same tables */
    t->n = 0;
    if (!grow((void **)&t->start, &t->cap_m, m, sizeof *t->start)) return 0;
    const uint64_t N = (uint64_t)n * up; /* the pixels the destination spans */
    /* destination pixel i spans [i N, (i + 1) N) in units of 1/m pixel;
     * its samples j0 .. j1: T = the largest span, at most n */
    uint32_t T = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t lo = (uint64_t)i * N, hi = lo + N, p0 = lo / m, p1 = (hi - 1) / m;
        uint32_t a, b, w[2];
        if (up == 1) {
            a = (uint32_t)p0, b = (uint32_t)p1;
        } else {
            lin_weights(p0, n, up, &a, w);
            lin_weights(p1, n, up, &b, w);
            b += w[1] != 0;
        }
        if (b - a + 1 > T) T = b - a + 1;
    }
    if (T > n) T = n;
    size_t cw = t->cap_w;
    if (!grow((void **)&t->ov, &cw, (size_t)m * T, sizeof *t->ov)) return 0;
    if (!grow((void **)&t->wq, &t->cap_w, (size_t)m * T, sizeof *t->wq)) return 0;
    t->T = T;
    memset(t->ov, 0, (size_t)m * T * sizeof *t->ov);
    const uint64_t total = up == 1 ? N : 2 * up * N; /* what each row's ov sum to */
    for (uint32_t i = 0; i < m; i++) {
        uint64_t lo = (uint64_t)i * N, hi = lo + N;
        uint64_t p0 = lo / m, p1 = (hi - 1) / m;
        uint32_t j0 = (uint32_t)p0, w[2];
        if (up > 1) lin_weights(p0, n, up, &j0, w);
        uint32_t st = j0 + T <= n ? j0 : n - T;   /* keep all T taps inside the row */
        t->start[i] = st;
        uint32_t *o = t->ov + (size_t)i * T;
        for (uint64_t p = p0; p <= p1; p++) {
            uint64_t a = p * m, b = a + m;
            uint32_t ov = (uint32_t)((b < hi ? b : hi) - (a > lo ? a : lo));
            if (up == 1) {
                o[p - st] = ov;
                continue;
            }
            uint32_t j;
            lin_weights(p, n, up, &j, w);
            o[j - st] += ov * w[0];
            if (w[1]) o[j + 1 - st] += ov * w[1];
        }
        /* cumulative rounding: weights sum to exactly 1 << bits, none wraps,
         * and the running error never exceeds half a unit */
        uint32_t *q = t->wq + (size_t)i * T;
        uint64_t cum = 0, prev = 0;
        for (uint32_t k = 0; k < T; k++) {
            cum += o[k];
            uint64_t r = ((cum << bits) + total / 2) / total;
            q[k] = (uint32_t)(r - prev);
            prev = r;
        }
    }
    t->n = n;
    t->m = m;
    t->bits = bits;
    t->up = up;
    t->gen++;
    return 1;
}

/* out = sum of wq * v in Q8 (<= 65280), wq in Q24: 255 * 2^24 + 2^15 fits
 * 32 bits.  Inlined
 * with constant ch and T, each call site below is a specialised copy. */
static inline void hfilter(const uint8_t *restrict src, const axis_taps *tx, uint32_t dw, int ch,
                           uint32_t T, uint16_t *restrict out)
{
    const uint32_t *restrict w = tx->wq;
    const uint32_t *restrict start = tx->start;
    for (uint32_t i = 0; i < dw; i++, w += T) {
        const uint8_t *s = src + (size_t)start[i] * ch;
        uint32_t a0 = 1u << 15, a1 = 1u << 15, a2 = 1u << 15, a3 = 1u << 15;
#if defined(__GNUC__)
#pragma GCC unroll 4
#endif
        for (uint32_t k = 0; k < T; k++, s += ch) {
            uint32_t wk = w[k];
            a0 += wk * s[0];
            if (ch > 1) a1 += wk * s[1];
            if (ch > 2) a2 += wk * s[2];
            if (ch > 3) a3 += wk * s[3];
        }
        uint16_t *o = out + (size_t)i * ch;
        o[0] = (uint16_t)(a0 >> 16);
        if (ch > 1) o[1] = (uint16_t)(a1 >> 16);
        if (ch > 2) o[2] = (uint16_t)(a2 >> 16);
        if (ch > 3) o[3] = (uint16_t)(a3 >> 16);
    }
}

#define HF_T(CH)                                                                               \
    switch (tx->T) {                                                                           \
    case 1: hfilter(src, tx, dw, CH, 1, out); break;                                       \
    case 2: hfilter(src, tx, dw, CH, 2, out); break;                                       \
    case 3: hfilter(src, tx, dw, CH, 3, out); break;                                       \
    case 4: hfilter(src, tx, dw, CH, 4, out); break;                                       \
    default: hfilter(src, tx, dw, CH, tx->T, out); break;                                  \
    }

static void hfilter_any(const uint8_t *src, const axis_taps *tx, uint32_t dw, int ch,
                        uint16_t *out)
{
    switch (ch) {
    case 1: HF_T(1); break;
    case 2: HF_T(2); break;
    case 3: HF_T(3); break;
    default: HF_T(4); break;
    }
}

#define VBLOCK 32

/* The reference vertical pass: destination row d from the c ring rows
 * starting at source row j0, weights wv (Q16, summing to 65536). */
static void vfilter_row(const uint16_t *ring, uint32_t ring_rows, size_t row, uint32_t j0,
                        uint32_t c, const uint32_t *wv, uint8_t *restrict d)
{
    for (size_t i0 = 0; i0 < row; i0 += VBLOCK) {
        /* fixed-size blocks: compilers vectorise these at -O2 */
        size_t nb = row - i0 < VBLOCK ? row - i0 : VBLOCK;
        uint32_t a[VBLOCK];
        const uint16_t *restrict r0 = ring + (size_t)(j0 % ring_rows) * row + i0;
        if (nb == VBLOCK) {
            for (size_t i = 0; i < VBLOCK; i++) a[i] = wv[0] * r0[i];
            for (uint32_t k = 1; k < c; k++) {
                const uint16_t *restrict rk = ring + (size_t)((j0 + k) % ring_rows) * row + i0;
                uint32_t wk = wv[k];
                for (size_t i = 0; i < VBLOCK; i++) a[i] += wk * rk[i];
            }
            for (size_t i = 0; i < VBLOCK; i++) d[i0 + i] = (uint8_t)((a[i] + (1u << 23)) >> 24);
        } else {
            for (size_t i = 0; i < nb; i++) a[i] = wv[0] * r0[i];
            for (uint32_t k = 1; k < c; k++) {
                const uint16_t *restrict rk = ring + (size_t)((j0 + k) % ring_rows) * row + i0;
                for (size_t i = 0; i < nb; i++) a[i] += wv[k] * rk[i];
            }
            for (size_t i = 0; i < nb; i++) d[i0 + i] = (uint8_t)((a[i] + (1u << 23)) >> 24);
        }
    }
}

/* The checksum of the destination, made band by band as the resize writes
 * its rows (whole rows of dst_stride bytes, padding included): a band of
 * at least 24 KiB (three 8 KiB streams of sa1b_crc32c's fast path) is
 * read back while it is still in the L1 cache. */
typedef struct row_crc {
    uint32_t crc;
    uint32_t from; /* rows before this one are in crc */
    uint32_t band; /* rows per band */
} row_crc;

static void row_crc_init(row_crc *c, size_t stride)
{
    c->crc = 0;
    c->from = 0;
    c->band = (uint32_t)((24576 + stride - 1) / stride);
}

/* Rows before done are written (of total): checksums them once a band is
 * complete or the last row is done. */
static void row_crc_rows(row_crc *c, const uint8_t *dst, size_t stride, uint32_t done,
                         uint32_t total)
{
    if (done - c->from < c->band && done < total) return;
    c->crc = sa1b_crc32c(c->crc, dst + (size_t)c->from * stride, (size_t)(done - c->from) * stride);
    c->from = done;
}

/* Where a resize reads its source rows, which it asks for in increasing
 * order: a whole image in memory (img), or a JPEG being decoded (dec, see
 * image_letterbox), whose rows are decoded into a band of IMAGE_BAND_ROWS rows
 * as the resize asks for them.  The band stays in the L2 cache: a whole
 * decoded image (9 MB for a 2000x1500 photograph) went out to memory and
 * came back for the resize.  128 rows (750 KB of that photograph): in
 * sa1b-shard (2 threads, Emerald Rapids VM) the horizontal pass took
 * 11.8-12.6% of the samples with bands of 32 rows, 8.6% with 128 and 8.0%
 * with 256 (the whole process's CPU 0.967 of 32's, median of 12 alternating
 * pairs): the decoder and the AVX-512 kernels take turns, and a turn of 16
 * output rows is short enough that each start costs (likely the vector
 * units' warm-up after the decoder's scalar code). */
#define IMAGE_BAND_ROWS 128

typedef struct row_src {
    const uint8_t *img;                    /* the whole image, stride bytes a row */
    size_t stride;
    struct jpeg_decompress_struct *dec;    /* or its decoder, mid-decode */
    uint8_t *band;                         /* IMAGE_BAND_ROWS rows of stride bytes; row y at y % IMAGE_BAND_ROWS */
    uint32_t done, h;                      /* rows decoded so far, of h */
} row_src;

static row_src whole_image(const uint8_t *img, size_t stride)
{
    row_src r = {0};
    r.img = img;
    r.stride = stride;
    return r;
}

/* Source row y; rows from lo (<= y) on stay where they are until a row at
 * or beyond lo + IMAGE_BAND_ROWS is asked for.  NULL when the decoder gives no
 * more rows (errors in the data jump out of libjpeg instead). */
static const uint8_t *src_row(row_src *r, uint32_t y, uint32_t lo)
{
    if (r->img) return r->img + (size_t)y * r->stride;
    if (y >= r->done) {
        /* as far ahead as the band holds: fewer, longer decoder calls */
        const uint32_t B = IMAGE_BAND_ROWS;
        uint32_t to = lo + B < r->h ? lo + B : r->h;
        while (r->done < to) {
            JSAMPROW rows[IMAGE_BAND_ROWS];   /* rows before lo (if any) are passed over */
            uint32_t n = to - r->done < B ? to - r->done : B;
            for (uint32_t k = 0; k < n; k++) rows[k] = r->band + (size_t)((r->done + k) % B) * r->stride;
            JDIMENSION got = jpeg_read_scanlines(r->dec, rows, n);
            if (got == 0) return NULL;
            r->done += got;
        }
        if (y >= r->done) return NULL;
    }
    return r->band + (size_t)(y % IMAGE_BAND_ROWS) * r->stride;
}

static int src_ended(sa1b_error *err)
{
    return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: the decoder gave fewer rows than the image has");
}

/* The reference resize, with an explicit destination row stride (bytes)
 * and optionally the destination's rows' checksum (rc). */
static int resize_portable(resize_scratch *s, row_src *src, uint32_t sw, uint32_t sh,
                           uint8_t *dst, size_t dst_stride, uint32_t dw, uint32_t dh, int ch,
                           image_resize_stats *st, row_crc *rc, sa1b_error *err)
{
    if (!taps_build(&s->x, sw, dw, 24, s->up_x) || !taps_build(&s->y, sh, dh, 16, s->up_y))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    const uint32_t ring_rows = s->y.T;
    const size_t row = (size_t)dw * ch;
    if (!grow((void **)&s->ring, &s->ring_cap, row * ring_rows, sizeof *s->ring))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    uint32_t next = 0;   /* next source row to filter horizontally */
    for (uint32_t y = 0; y < dh; y++) {
        uint32_t j0 = s->y.start[y], c = s->y.T;
        /* source rows arrive in increasing order; rows < j0 are no longer needed */
        if (next < j0) next = j0;
        while (next < j0 + c) {
            const uint8_t *s0 = src_row(src, next, next);
            if (!s0) return src_ended(err);
            hfilter_any(s0, &s->x, dw, ch, s->ring + (size_t)(next % ring_rows) * row);
            next++;
            if (st) st->hrows_portable++;
        }
        vfilter_row(s->ring, ring_rows, row, j0, c, s->y.wq + (size_t)y * c,
                    dst + (size_t)y * dst_stride);
        if (st) st->vrows_portable++;
        if (rc) row_crc_rows(rc, dst, dst_stride, y + 1, dh);
    }
    return SA1B_OK;
}

/* ---- AVX2 kernels -----------------------------------------------------------
 *
 * Horizontal: the output row is cut into blocks of 8 interleaved values
 * (two halves of 4, one per 128-bit lane).  All the source bytes the taps
 * of a half need lie in one 16-byte window of the source row whenever the
 * ratio is at most about 2 (as after the DCT-scaled decode); hplan_build
 * checks this for every half and otherwise leaves the whole pass to C.  A
 * pshufb gathers, for a pair of taps (2q, 2q+1), each value's two source
 * bytes as 16-bit lanes, and pmaddwd multiplies them by the weights.  The
 * Q24 weights (<= 2^24) do not fit 16 bits, so each is split as
 * w = wh * 2^12 + wl (wl < 2^12, wh <= 2^12) and two pmaddwd give
 * H = sum wh * v and L = sum wl * v; (H << 12) + L + 2^15 is exactly the
 * reference's accumulator (the same integer, modulo 2^32 like uint32), so
 * >> 16 gives the same Q8 value.  Two source rows share each table load.
 *
 * Vertical: 32 destination bytes at a time, each product of a Q8 value
 * and a Q16 weight split into its 16-bit halves (vpmulhuw, vpmullw) and
 * summed in 16-bit lanes with the carries of the low halves, which gives
 * the reference's (a + 2^23) >> 24 exactly (see vsum_avx2); taps whose
 * weight is 0 are left out (they add 0).  (Measured on Zen: leaving out the
 * shuffles or half the pmaddwd of the horizontal pass barely changes the
 * time, nor does sharing table loads among 4 rows or a source that fits in
 * L2: the kernels are bound by their total count of vector instructions.)
 *
 * Where the CPU has AVX-512 (VBMI and VNNI), the horizontal pass takes
 * blocks of 16 values from one 64-byte window (a zero-masked vpermb, and
 * vpdpwssd fusing each multiply with its add) and the vertical one 64 bytes
 * at a time.  Both horizontal kernels leave out the tap pair that no value
 * of a block needs (hplan_build groups the blocks by it).  Measured on Zen 4 (session
 * of 2026-11-25, tests/bench/bench-resize, 1125x750 -> 1024x683 RGB): AVX2
 * 0.80 ms, AVX2 with the grouping 0.69, AVX-512 with it about 0.61-0.65.
 * Neither a 256-bit VNNI pass nor four rows per table pass was faster: the
 * element throughput of Zen 4's vector units is the same at both widths.
 * Where every value needs 4 taps at most (a ratio below 3, as after the
 * DCT-scaled decode), the AVX-512 horizontal pass works on bytes instead
 * (h4plan_build, hfilter512x4): one vpermb gathers all 4 taps of 16 values
 * and three vpdpbusd take the weights' three bytes, where the 16-bit pass
 * needed two vpermb and four vpdpwssd for a block of 3 or 4 taps, and two
 * blocks share one packing vpermt2b.  Measured on an Emerald Rapids core
 * (2026-11-27, one thread, 5 alternating runs, the medians): the whole
 * resize 2000x1500 -> 1024x768 RGB 1547 -> 1220 ns per output row, 1125x750
 * -> 1024x683 887 -> 750; in sa1b-shard on 2000x1500 photographs the
 * horizontal pass went from 12.0% to 10.6% of the process's samples. */

/* -DIMAGE_NO_SIMD builds the portable code alone (as on other machines). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(IMAGE_NO_SIMD)
#define IMAGE_HAVE_AVX2 1
#include <immintrin.h>
#endif

#ifdef IMAGE_HAVE_AVX2

/* The reference horizontal pass for the interleaved values [from, to) of a
 * row (value o is channel o % ch of pixel o / ch): the same sums as
 * hfilter, for the tails the SIMD kernel leaves. */
static void hfilter_values(const uint8_t *src, const axis_taps *tx, int ch, size_t from,
                           size_t to, uint16_t *out)
{
    const uint32_t T = tx->T;
    for (size_t o = from; o < to; o++) {
        size_t i = o / (size_t)ch;
        const uint8_t *s = src + (size_t)tx->start[i] * ch + o % (size_t)ch;
        const uint32_t *w = tx->wq + i * T;
        uint32_t a = 1u << 15;
        for (uint32_t k = 0; k < T; k++) a += w[k] * s[(size_t)k * ch];
        out[o] = (uint16_t)(a >> 16);
    }
}

#define HPLAN_MAXT 16   /* more taps than this: the C pass (windows could not fit anyway) */

/* Whether the bv output values of block b (ch channels) need one tap pair
 * alone: none has a non-zero weight beyond its second tap. */
static int block_one_pair(const axis_taps *tx, size_t b, size_t bv, int ch)
{
    for (size_t o = b * bv; o < (b + 1) * bv; o++)
        for (uint32_t k = 2; k < tx->T; k++)
            if (tx->wq[o / ch * tx->T + k]) return 0;
    return 1;
}

/* The offset of the wb-byte source window holding every tap of the n
 * output values from o0 (ch channels), kept inside the row of rowbytes
 * bytes: 0 when they do not fit one window. */
static int tap_window(const axis_taps *tx, int ch, size_t o0, size_t n, size_t rowbytes, size_t wb,
                      size_t *off)
{
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t o = o0; o < o0 + n; o++) {
        size_t base = (size_t)tx->start[o / ch] * ch + o % ch;
        if (base < lo) lo = base;
        if (base + (size_t)(tx->T - 1) * ch > hi) hi = base + (size_t)(tx->T - 1) * ch;
    }
    *off = lo + wb <= rowbytes ? lo : rowbytes - wb;   /* stay inside the row */
    return hi - *off < wb;
}

/* Plans a SIMD horizontal pass for the x taps in tx (built for sw -> dw):
 * blocks of nw * vw output values, each block's values read from nw windows
 * of wb source bytes (vw values per window), and per tap pair a record of
 * three parts of 4 * nw * vw bytes: the gather control (the source byte of
 * each value's two taps as the low bytes of 16-bit lanes, 0x80 in the high
 * bytes and for taps beyond T, whose weights are 0), then the weights' low
 * and high halves (w = wh * 2^12 + wl, see the kernels).  Blocks whose
 * values all need two taps at most (most, after the DCT-scaled decode:
 * a ratio of 1.1 gives a third tap to one pixel in ten) come first with one
 * record each, the others after them with P.  AVX2: nw = 2, vw = 4,
 * wb = 16 (a pshufb per 128-bit lane); AVX-512: nw = 1, vw = 16, wb = 64
 * (one vpermb).  0 on ENOMEM; hp->ok says whether the kernel applies. */
static int hplan_build(hplan *hp, const axis_taps *tx, uint32_t sw, uint32_t dw, int ch,
                       size_t nw, size_t vw, size_t wb)
{
    if (hp->sw == sw && hp->dw == dw && hp->ch == ch && hp->gen == tx->gen) return 1;
    hp->sw = 0;
    hp->ok = 0;
    const uint32_t T = tx->T;
    const size_t nval = (size_t)dw * ch, rowbytes = (size_t)sw * ch, bv = nw * vw;
    const size_t nblk = nval / bv, part = 4 * bv, rec_len = 3 * part;
    const uint32_t P = (T + 1) / 2;
    int fits = nblk > 0 && rowbytes >= wb && T <= HPLAN_MAXT;
    if (fits) {
        if (!grow((void **)&hp->off, &hp->off_cap, nblk * nw, sizeof *hp->off) ||
            !grow((void **)&hp->blk, &hp->blk_cap, nblk, sizeof *hp->blk) ||
            !grow((void **)&hp->tab, &hp->tab_cap, nblk * P * rec_len, 1))
            return 0;
        memset(hp->tab, 0, nblk * P * rec_len);
    }
    /* the blocks of one tap pair first, at positions [0, n1) */
    size_t n1 = 0;
    for (size_t b = 0; fits && b < nblk; b++) n1 += P == 1 || block_one_pair(tx, b, bv, ch);
    for (size_t b = 0, q1 = 0, q2 = n1; fits && b < nblk; b++) {
        const size_t q = P == 1 || block_one_pair(tx, b, bv, ch) ? q1++ : q2++;
        const uint32_t Pq = q < n1 ? 1 : P;
        uint8_t *recs = hp->tab + (q < n1 ? q : n1 + (q - n1) * P) * rec_len;
        hp->blk[q] = (uint32_t)b;
        for (size_t h = 0; h < nw && fits; h++) {
            size_t o0 = b * bv + h * vw, off;
            if (!tap_window(tx, ch, o0, vw, rowbytes, wb, &off)) {
                fits = 0;
                break;
            }
            hp->off[q * nw + h] = (uint32_t)off;
            for (size_t j = 0; j < vw; j++) {
                size_t o = o0 + j, i = o / ch, base = (size_t)tx->start[i] * ch + o % ch;
                for (uint32_t k = 0; k < 2 * Pq; k++) {
                    uint8_t *rec = recs + (k / 2) * rec_len;
                    size_t lane = h * 2 * vw + j * 2 + k % 2;   /* 16-bit element */
                    int16_t wl = 0, wh = 0;
                    uint8_t idx = 0x80;   /* pshufb: zero */
                    if (k < T) {
                        uint32_t w = tx->wq[i * T + k];
                        wl = (int16_t)(w & 4095);
                        wh = (int16_t)(w >> 12);
                        idx = (uint8_t)(base + (size_t)k * ch - off);
                    }
                    rec[lane * 2] = idx;
                    rec[lane * 2 + 1] = 0x80;
                    memcpy(rec + part + lane * 2, &wl, 2);
                    memcpy(rec + 2 * part + lane * 2, &wh, 2);
                }
            }
        }
    }
    hp->nblk = fits ? nblk : 0;
    hp->n1 = fits ? n1 : 0;
    hp->P = P;
    hp->ok = fits;
    hp->sw = sw;
    hp->gen = tx->gen;
    hp->dw = dw;
    hp->ch = ch;
    return 1;
}

/* Plans the AVX-512 byte kernel (hfilter512x4) for the x taps in tx: blocks
 * of 16 output values, each value's (up to) 4 taps as the 4 bytes of a
 * 32-bit lane, gathered from one 64-byte window by one vpermb, and each
 * weight w (< 2^24) as its three bytes w = d2 2^16 + d1 2^8 + d0, so that
 * three vpdpbusd (unsigned byte times signed byte, 4 products a lane) give
 * the sums of every digit.  The pixels enter as signed bytes x - 128: the
 * weights of a value sum to exactly 2^24, so sum w x = sum w (x - 128) +
 * 2^31, an integer the kernel adds back (see hfilter512x4).  Per block a
 * record of 256 bytes: the gather control, then the digit bytes d0, d1, d2
 * (zero for taps beyond T).  Applies where T <= 4 (a ratio below 3) and no
 * weight is 2^24 (a tap alone: a ratio of 1 or below), and every block's
 * taps fit its window.  0 on ENOMEM; hp->ok says whether it applies. */
static int h4plan_build(hplan *hp, const axis_taps *tx, uint32_t sw, uint32_t dw, int ch)
{
    if (hp->sw == sw && hp->dw == dw && hp->ch == ch && hp->gen == tx->gen) return 1;
    hp->sw = 0;
    hp->ok = 0;
    const uint32_t T = tx->T;
    const size_t nval = (size_t)dw * ch, rowbytes = (size_t)sw * ch, nblk = nval / 16;
    int fits = nblk > 0 && rowbytes >= 64 && T <= 4;
    for (size_t k = 0; fits && k < (size_t)dw * T; k++) fits = tx->wq[k] < (1u << 24);
    if (fits) {
        if (!grow((void **)&hp->off, &hp->off_cap, nblk, sizeof *hp->off) ||
            !grow((void **)&hp->tab, &hp->tab_cap, nblk * 256, 1))
            return 0;
    }
    for (size_t b = 0; fits && b < nblk; b++) {
        size_t off;
        if (!tap_window(tx, ch, b * 16, 16, rowbytes, 64, &off)) {
            fits = 0;
            break;
        }
        hp->off[b] = (uint32_t)off;
        uint8_t *rec = hp->tab + b * 256;
        for (size_t j = 0; j < 16; j++) {
            size_t o = b * 16 + j, i = o / ch, base = (size_t)tx->start[i] * ch + o % ch;
            for (uint32_t t = 0; t < 4; t++) {
                uint32_t w = t < T ? tx->wq[i * T + t] : 0;
                rec[j * 4 + t] = (uint8_t)(t < T ? base + (size_t)t * ch - off : 0);
                rec[64 + j * 4 + t] = (uint8_t)w;
                rec[128 + j * 4 + t] = (uint8_t)(w >> 8);
                rec[192 + j * 4 + t] = (uint8_t)(w >> 16);
            }
        }
    }
    hp->nblk = fits ? nblk : 0;
    hp->ok = fits;
    hp->sw = sw;
    hp->gen = tx->gen;
    hp->dw = dw;
    hp->ch = ch;
    return 1;
}

static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* (libgcc sets the AVX-512 features only where the OS saves the registers) */
static int cpu_has_avx512(void)
{
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("avx512vnni");
}

__attribute__((target("avx2"))) static inline __m256i load_2x128(const uint8_t *a,
                                                                 const uint8_t *b)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                   _mm_loadu_si128((const __m128i *)b), 1);
}

/* (H << 12) + L + 2^15 >> 16, 8 values packed to uint16 at o. */
__attribute__((target("avx2"))) static inline void hstore(__m256i H, __m256i L, uint16_t *o)
{
    __m256i a = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(H, 12), L),
                                 _mm256_set1_epi32(1 << 15));
    a = _mm256_srli_epi32(a, 16);
    __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    _mm_storeu_si128((__m128i *)o, p);
}

/* Rows s0 and s1 (nr = 2) or s0 alone (nr = 1): the blocks at positions
 * [q0, q1) of the plan, whose records start at t, P tap pairs each.
 * Inlined with constant nr and P. */
__attribute__((target("avx2"))) static inline void
hfilter_avx2_k(const uint8_t *s0, const uint8_t *s1, const hplan *hp, size_t q0, size_t q1,
               const uint8_t *t, int nr, uint32_t P, uint16_t *o0, uint16_t *o1)
{
    for (size_t b = q0; b < q1; b++) {
        const uint32_t *off = hp->off + 2 * b;
        __m256i w0 = load_2x128(s0 + off[0], s0 + off[1]);
        __m256i w1 = nr > 1 ? load_2x128(s1 + off[0], s1 + off[1]) : w0;
        __m256i L0 = _mm256_setzero_si256(), H0 = L0, L1 = L0, H1 = L0;
        for (uint32_t q = 0; q < P; q++, t += 96) {
            __m256i ctl = _mm256_loadu_si256((const __m256i *)t);
            __m256i wl = _mm256_loadu_si256((const __m256i *)(t + 32));
            __m256i wh = _mm256_loadu_si256((const __m256i *)(t + 64));
            __m256i p0 = _mm256_shuffle_epi8(w0, ctl);
            L0 = _mm256_add_epi32(L0, _mm256_madd_epi16(p0, wl));
            H0 = _mm256_add_epi32(H0, _mm256_madd_epi16(p0, wh));
            if (nr > 1) {
                __m256i p1 = _mm256_shuffle_epi8(w1, ctl);
                L1 = _mm256_add_epi32(L1, _mm256_madd_epi16(p1, wl));
                H1 = _mm256_add_epi32(H1, _mm256_madd_epi16(p1, wh));
            }
        }
        hstore(H0, L0, o0 + (size_t)hp->blk[b] * 8);
        if (nr > 1) hstore(H1, L1, o1 + (size_t)hp->blk[b] * 8);
    }
}

/* Both groups of blocks of a plan: one tap pair, then P (see hplan_build);
 * each call with constant nr and P. */
#define HFILTER_GROUPS(K, REC)                                                                 \
    do {                                                                                       \
        const uint8_t *t2 = hp->tab + hp->n1 * (REC);                                          \
        const size_t n1 = hp->n1, nb = hp->nblk;                                               \
        if (s1) {                                                                              \
            K(s0, s1, hp, 0, n1, hp->tab, 2, 1, o0, o1);                                       \
            if (hp->P == 2) K(s0, s1, hp, n1, nb, t2, 2, 2, o0, o1);                           \
            else if (hp->P > 2) K(s0, s1, hp, n1, nb, t2, 2, hp->P, o0, o1);                   \
        } else {                                                                               \
            K(s0, s0, hp, 0, n1, hp->tab, 1, 1, o0, o0);                                       \
            if (hp->P == 2) K(s0, s0, hp, n1, nb, t2, 1, 2, o0, o0);                           \
            else if (hp->P > 2) K(s0, s0, hp, n1, nb, t2, 1, hp->P, o0, o0);                   \
        }                                                                                      \
    } while (0)

__attribute__((target("avx2"))) static void hfilter_avx2(const uint8_t *s0, const uint8_t *s1,
                                                         const hplan *hp, uint16_t *o0,
                                                         uint16_t *o1)
{
    HFILTER_GROUPS(hfilter_avx2_k, 96);
}

/* AVX-512 (VBMI, VNNI): blocks of 16 values from one 64-byte window, the
 * gather a zero-masked vpermb, multiply-adds fused (vpdpwssd); the rounding
 * term starts in L.  Same integers as hfilter_avx2_k. */
#define T512 __attribute__((target("avx2,avx512f,avx512bw,avx512vbmi,avx512vnni")))
T512 static inline void hstore512(__m512i H, __m512i L, uint16_t *o)
{
    __m512i a = _mm512_srli_epi32(_mm512_add_epi32(_mm512_slli_epi32(H, 12), L), 16);
    _mm256_storeu_si256((__m256i *)o, _mm512_cvtepi32_epi16(a));
}

T512 static inline void hfilter512_k(const uint8_t *s0, const uint8_t *s1, const hplan *hp,
                                     size_t q0, size_t q1, const uint8_t *t, int nr, uint32_t P,
                                     uint16_t *o0, uint16_t *o1)
{
    const __mmask64 even = 0x5555555555555555ull;   /* the low byte of each 16-bit lane */
    const __m512i rnd = _mm512_set1_epi32(1 << 15);
    const uint32_t *off = hp->off, *blk = hp->blk;
    for (size_t b = q0; b < q1; b++) {
        __m512i w0 = _mm512_loadu_si512(s0 + off[b]);
        __m512i w1 = nr > 1 ? _mm512_loadu_si512(s1 + off[b]) : w0;
        __m512i L0 = rnd, L1 = rnd, H0 = _mm512_setzero_si512(), H1 = H0;
        for (uint32_t q = 0; q < P; q++, t += 192) {
            __m512i ctl = _mm512_loadu_si512(t);
            __m512i wl = _mm512_loadu_si512(t + 64);
            __m512i wh = _mm512_loadu_si512(t + 128);
            __m512i p0 = _mm512_maskz_permutexvar_epi8(even, ctl, w0);
            L0 = _mm512_dpwssd_epi32(L0, p0, wl);
            H0 = _mm512_dpwssd_epi32(H0, p0, wh);
            if (nr > 1) {
                __m512i p1 = _mm512_maskz_permutexvar_epi8(even, ctl, w1);
                L1 = _mm512_dpwssd_epi32(L1, p1, wl);
                H1 = _mm512_dpwssd_epi32(H1, p1, wh);
            }
        }
        hstore512(H0, L0, o0 + (size_t)blk[b] * 16);
        if (nr > 1) hstore512(H1, L1, o1 + (size_t)blk[b] * 16);
    }
}

T512 static void hfilter512(const uint8_t *s0, const uint8_t *s1, const hplan *hp, uint16_t *o0,
                            uint16_t *o1)
{
    HFILTER_GROUPS(hfilter512_k, 192);
}

/* The sums of a block of h4plan_build: rows w0 (and w1) biased to signed
 * bytes, the record's control and digits c, d0, d1, d2.  R = a0 + a1 2^8 +
 * a2 2^16 with a0 starting at 2^31 + 2^15 is, modulo 2^32, sum w (x - 128)
 * + 2^31 + 2^15 = sum w x + 2^15, the reference's accumulator (below 2^32);
 * the shifts by whole bytes are byte shuffles within each lane. */
T512 static inline __m512i h4sum(__m512i w, __m512i c, __m512i d0, __m512i d1, __m512i d2,
                                 __m512i sh8, __m512i sh16)
{
    const __m512i rnd = _mm512_set1_epi32((int)0x80008000u);
    __m512i p = _mm512_permutexvar_epi8(c, w);
    __m512i a0 = _mm512_dpbusd_epi32(rnd, d0, p);
    __m512i a1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d1, p);
    __m512i a2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), d2, p);
    return _mm512_add_epi32(_mm512_add_epi32(a0, _mm512_shuffle_epi8(a1, sh8)), _mm512_shuffle_epi8(a2, sh16));
}

/* Rows s0 and s1 (or s0 alone: s1 NULL) through the plan of h4plan_build:
 * two blocks at a time, whose results' high halves (the Q8 values) one
 * vpermt2b packs into 32 consecutive outputs.  Same integers as hfilter. */
T512 static void hfilter512x4(const uint8_t *s0, const uint8_t *s1, const hplan *hp, uint16_t *o0,
                              uint16_t *o1)
{
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    /* per 32-bit lane: the bytes moved up by one and by two places (zeros in) */
    const __m512i sh8 = _mm512_set4_epi32(0x0e0d0c80, 0x0a090880, 0x06050480, 0x02010080);
    const __m512i sh16 = _mm512_set4_epi32(0x0d0c8080, 0x09088080, 0x05048080, 0x01008080);
    static const uint8_t pk[64] = {   /* bytes 2 and 3 of each lane of A (0-63), then of B (64-127) */
        2,  3,  6,  7,  10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31,
        34, 35, 38, 39, 42, 43, 46, 47, 50, 51, 54, 55, 58, 59, 62, 63,
        66, 67, 70, 71, 74, 75, 78, 79, 82, 83, 86, 87, 90, 91, 94, 95,
        98, 99, 102, 103, 106, 107, 110, 111, 114, 115, 118, 119, 122, 123, 126, 127};
    const __m512i pick = _mm512_loadu_si512(pk);
    const uint32_t *off = hp->off;
    const uint8_t *t = hp->tab;
    const size_t nb = hp->nblk;
    size_t b = 0;
    for (; b + 2 <= nb; b += 2, t += 512) {
        __m512i ca = _mm512_loadu_si512(t), a0 = _mm512_loadu_si512(t + 64),
                a1 = _mm512_loadu_si512(t + 128), a2 = _mm512_loadu_si512(t + 192);
        __m512i cb = _mm512_loadu_si512(t + 256), b0 = _mm512_loadu_si512(t + 320),
                b1 = _mm512_loadu_si512(t + 384), b2 = _mm512_loadu_si512(t + 448);
        __m512i ra = h4sum(_mm512_xor_si512(_mm512_loadu_si512(s0 + off[b]), bias), ca, a0, a1, a2, sh8, sh16);
        __m512i rb = h4sum(_mm512_xor_si512(_mm512_loadu_si512(s0 + off[b + 1]), bias), cb, b0, b1, b2, sh8, sh16);
        _mm512_storeu_si512(o0 + b * 16, _mm512_permutex2var_epi8(ra, pick, rb));
        if (s1) {
            ra = h4sum(_mm512_xor_si512(_mm512_loadu_si512(s1 + off[b]), bias), ca, a0, a1, a2, sh8, sh16);
            rb = h4sum(_mm512_xor_si512(_mm512_loadu_si512(s1 + off[b + 1]), bias), cb, b0, b1, b2, sh8, sh16);
            _mm512_storeu_si512(o1 + b * 16, _mm512_permutex2var_epi8(ra, pick, rb));
        }
    }
    if (b < nb) { /* an odd block last */
        __m512i c = _mm512_loadu_si512(t), d0 = _mm512_loadu_si512(t + 64), d1 = _mm512_loadu_si512(t + 128),
                d2 = _mm512_loadu_si512(t + 192);
        __m512i r = h4sum(_mm512_xor_si512(_mm512_loadu_si512(s0 + off[b]), bias), c, d0, d1, d2, sh8, sh16);
        _mm256_storeu_si256((__m256i *)(o0 + b * 16), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        if (s1) {
            r = h4sum(_mm512_xor_si512(_mm512_loadu_si512(s1 + off[b]), bias), c, d0, d1, d2, sh8, sh16);
            _mm256_storeu_si256((__m256i *)(o1 + b * 16), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        }
    }
}
#undef T512

#define VMAXT 8   /* more vertical taps than this: the C pass */

/* The vertical kernels split each product of a Q8 value x (<= 65280) and
 * a Q16 weight w (< 65536) into 16-bit halves, x w = hi 2^16 + lo
 * (vpmulhuw, vpmullw), and sum the halves of the taps in 16-bit lanes: H
 * the his, L the los modulo 2^16 with each carry out of L added to H.  The
 * reference's accumulator is then a = H 2^16 + L (H < 2^16, since a <=
 * 65280 * 65536), and its result (a + 2^23) >> 24 equals (H + 128) >> 8
 * exactly: L / 2^16 < 1 never carries H + 128 across a multiple of 256.
 * Twice the values per instruction of a 32-bit multiply, and no widening.
 * A weight of 65536 (a tap alone, every other weight 0) does not fit 16
 * bits: resize_avx2 passes it as two taps of 32768 on the same row. */

/* The result bytes (as 16-bit lanes) of 16 values at i of the taps
 * r[0..c-1], weights w (AVX2). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256i
vsum_avx2(const uint16_t *const *r, size_t i, uint32_t c, const __m256i *w)
{
    const __m256i bias = _mm256_set1_epi16(INT16_MIN);
    __m256i h = _mm256_setzero_si256(), l = h;
    for (uint32_t k = 0; k < c; k++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(r[k] + i));
        __m256i lo = _mm256_mullo_epi16(x, w[k]);
        h = _mm256_add_epi16(h, _mm256_mulhi_epu16(x, w[k]));
        l = _mm256_add_epi16(l, lo);
        /* carry: the sum wrapped below the addend (unsigned compare via xor bias) */
        h = _mm256_sub_epi16(h, _mm256_cmpgt_epi16(_mm256_xor_si256(lo, bias),
                                                   _mm256_xor_si256(l, bias)));
    }
    return _mm256_srli_epi16(_mm256_add_epi16(h, _mm256_set1_epi16(128)), 8);
}

/* The first (row / 32) * 32 bytes of destination row d from the ring rows
 * r[0..c-1] with weights wv (Q16, each < 65536).  Inlined with constant c. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
vfilter_avx2_k(const uint16_t *const *r, const uint32_t *wv, uint32_t c, size_t row, uint8_t *d)
{
    __m256i w[VMAXT];
    for (uint32_t k = 0; k < c; k++) w[k] = _mm256_set1_epi16((int16_t)(uint16_t)wv[k]);
    for (size_t i = 0; i + 32 <= row; i += 32) {
        __m256i a = vsum_avx2(r, i, c, w), b = vsum_avx2(r, i + 16, c, w);
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)(d + i), p);
    }
}

__attribute__((target("avx2"))) static void vfilter_avx2(const uint16_t *const *r,
                                                         const uint32_t *wv, uint32_t c,
                                                         size_t row, uint8_t *d)
{
    switch (c) {
    case 1: vfilter_avx2_k(r, wv, 1, row, d); break;
    case 2: vfilter_avx2_k(r, wv, 2, row, d); break;
    case 3: vfilter_avx2_k(r, wv, 3, row, d); break;
    case 4: vfilter_avx2_k(r, wv, 4, row, d); break;
    default: vfilter_avx2_k(r, wv, c, row, d); break;
    }
}

/* AVX-512: 64 destination bytes at a time (the carry a compare into a
 * mask register and a masked add), otherwise vfilter_avx2_k. */
#define T512 __attribute__((target("avx2,avx512f,avx512bw")))
/* vsum_avx2 for 32 values */
T512 static inline __attribute__((always_inline)) __m512i
vsum512(const uint16_t *const *r, size_t i, uint32_t c, const __m512i *w)
{
    __m512i h = _mm512_setzero_si512(), l = h;
    for (uint32_t k = 0; k < c; k++) {
        __m512i x = _mm512_loadu_si512(r[k] + i);
        __m512i lo = _mm512_mullo_epi16(x, w[k]);
        h = _mm512_add_epi16(h, _mm512_mulhi_epu16(x, w[k]));
        l = _mm512_add_epi16(l, lo);
        h = _mm512_mask_add_epi16(h, _mm512_cmplt_epu16_mask(l, lo), h, _mm512_set1_epi16(1));
    }
    return _mm512_srli_epi16(_mm512_add_epi16(h, _mm512_set1_epi16(128)), 8);
}

T512 static inline __attribute__((always_inline)) void
vfilter512_k(const uint16_t *const *r, const uint32_t *wv, uint32_t c, size_t row, uint8_t *d)
{
    const __m512i perm = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
    __m512i w[VMAXT];
    for (uint32_t k = 0; k < c; k++) w[k] = _mm512_set1_epi16((int16_t)(uint16_t)wv[k]);
    for (size_t i = 0; i + 64 <= row; i += 64) {
        __m512i a = vsum512(r, i, c, w), b = vsum512(r, i + 32, c, w);
        /* packus interleaves the 128-bit lanes of a and b: the permute
         * puts a's bytes first */
        __m512i p = _mm512_permutexvar_epi64(perm, _mm512_packus_epi16(a, b));
        _mm512_storeu_si512(d + i, p);
    }
}

T512 static void vfilter512(const uint16_t *const *r, const uint32_t *wv, uint32_t c, size_t row,
                            uint8_t *d)
{
    switch (c) {
    case 1: vfilter512_k(r, wv, 1, row, d); break;
    case 2: vfilter512_k(r, wv, 2, row, d); break;
    case 3: vfilter512_k(r, wv, 3, row, d); break;
    default: vfilter512_k(r, wv, c, row, d); break;
    }
}
#undef T512

/* The resize with the AVX2 kernels (and C for the tails and the shapes they
 * do not take); the same bytes as resize_portable. */
static int resize_avx2(resize_scratch *s, row_src *src, uint32_t sw, uint32_t sh,
                       uint8_t *dst, size_t dst_stride, uint32_t dw, uint32_t dh, int ch,
                       int wide, image_resize_stats *st, row_crc *rc, sa1b_error *err)
{
    /* wide: the AVX-512 vertical pass, and an AVX-512 horizontal one where
     * its windows fit (hwide): on bytes (h4) where that plan applies, else
     * on 16-bit lanes; else AVX2's.  Only the plan used is built (a new
     * image size builds it again). */
    if (!taps_build(&s->x, sw, dw, 24, s->up_x) || !taps_build(&s->y, sh, dh, 16, s->up_y) ||
        (wide && !h4plan_build(&s->h4, &s->x, sw, dw, ch)) ||
        (wide && !s->h4.ok && !hplan_build(&s->hq, &s->x, sw, dw, ch, 1, 16, 64)))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    const int h4 = wide && s->h4.ok, hwide = wide && (h4 || s->hq.ok);
    if (!hwide && !hplan_build(&s->hp, &s->x, sw, dw, ch, 2, 4, 16))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    const hplan *hp = h4 ? &s->h4 : hwide ? &s->hq : &s->hp;
    const uint32_t c = s->y.T;
    const uint32_t ring_rows = c + 1;   /* one more: rows are filtered two at a time */
    const size_t row = (size_t)dw * ch, done = hp->nblk * (hwide ? 16 : 8);
    if (!grow((void **)&s->ring, &s->ring_cap, row * ring_rows, sizeof *s->ring))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
#define RING(j) (s->ring + (size_t)((j) % ring_rows) * row)
    uint32_t next = 0;   /* next source row to filter horizontally */
    for (uint32_t y = 0; y < dh; y++) {
        uint32_t j0 = s->y.start[y];
        /* source rows arrive in increasing order; rows < j0 are no longer
         * needed, rows j0 .. j0 + c (c + 1 of them) fit in the ring */
        if (next < j0) next = j0;
        while (next < j0 + c) {
            const uint8_t *s0 = src_row(src, next, next);
            if (!s0) return src_ended(err);
            if (!hp->ok) {
                hfilter_any(s0, &s->x, dw, ch, RING(next));
                next++;
                if (st) st->hrows_portable++;
                continue;
            }
            const uint8_t *s1 = next + 1 < sh ? src_row(src, next + 1, next) : NULL;
            const int two = s1 != NULL;
            if (next + 1 < sh && !two) return src_ended(err);
            (h4 ? hfilter512x4 : hwide ? hfilter512 : hfilter_avx2)(s0, s1, hp, RING(next),
                                                                  two ? RING(next + 1) : NULL);
            hfilter_values(s0, &s->x, ch, done, row, RING(next));
            if (two) hfilter_values(s1, &s->x, ch, done, row, RING(next + 1));
            next += 1 + (uint32_t)two;
            if (st) st->hrows_simd += 1 + (uint64_t)two;
            if (st && hwide) st->hrows_avx512 += 1 + (uint64_t)two;
        }
        const uint32_t *wv = s->y.wq + (size_t)y * c;
        uint8_t *d = dst + (size_t)y * dst_stride;
        if (c > VMAXT || row < 32) {
            vfilter_row(s->ring, ring_rows, row, j0, c, wv, d);
            if (st) st->vrows_portable++;
            if (rc) row_crc_rows(rc, dst, dst_stride, y + 1, dh);
            continue;
        }
        /* taps with weight 0 (the zero padding: most rows of a ratio near 1
         * need one tap fewer than T) add 0 to the reference's sums: skipped */
        const uint16_t *r[VMAXT];
        uint32_t w[VMAXT], cn = 0;
        for (uint32_t k = 0; k < c; k++)
            if (wv[k]) {
                r[cn] = RING(j0 + k);
                w[cn++] = wv[k];
            }
        if (cn == 1 && w[0] > 65535) { /* 65536 alone: two taps of 32768, each fits 16 bits */
            r[1] = r[0];
            w[0] = w[1] = 32768;
            cn = 2;
        }
        size_t vdone = row / 32 * 32;
        if (wide) {
            vfilter512(r, w, cn, row, d);
            vdone = row / 64 * 64;
            if (vdone + 32 <= row) { /* one more block of 32 */
                const uint16_t *r32[VMAXT];
                for (uint32_t k = 0; k < cn; k++) r32[k] = r[k] + vdone;
                vfilter_avx2(r32, w, cn, 32, d + vdone);
                vdone += 32;
            }
        } else {
            vfilter_avx2(r, w, cn, row, d);
        }
        for (size_t i = vdone; i < row; i++) {   /* the reference's sums */
            uint32_t a = 0;
            for (uint32_t k = 0; k < cn; k++) a += w[k] * r[k][i];
            d[i] = (uint8_t)((a + (1u << 23)) >> 24);
        }
        if (st) st->vrows_simd++;
        if (rc) row_crc_rows(rc, dst, dst_stride, y + 1, dh);
    }
#undef RING
    return SA1B_OK;
}

#else

static int cpu_has_avx2(void)
{
    return 0;
}

static int cpu_has_avx512(void)
{
    return 0;
}

static int resize_avx2(resize_scratch *s, row_src *src, uint32_t sw, uint32_t sh,
                       uint8_t *dst, size_t dst_stride, uint32_t dw, uint32_t dh, int ch,
                       int wide, image_resize_stats *st, row_crc *rc, sa1b_error *err)
{
    (void)wide;
    return resize_portable(s, src, sw, sh, dst, dst_stride, dw, dh, ch, st, rc, err);
}

#endif

/* ---- resize entry points --------------------------------------------------- */

int image_resize_supported(int impl)
{
    switch (impl) {
    case IMAGE_RESIZE_AUTO:
    case IMAGE_RESIZE_PORTABLE: return 1;
    case IMAGE_RESIZE_AVX2: return cpu_has_avx2();
    case IMAGE_RESIZE_AVX512: return cpu_has_avx512();
    default: return 0;
    }
}

image_resizer *image_resizer_new(void)
{
    return calloc(1, sizeof(image_resizer));
}

void image_resizer_set_up(image_resizer *r, uint32_t up_x, uint32_t up_y)
{
    if (!r) return;
    r->up_x = up_x;
    r->up_y = up_y;
}

void image_resizer_free(image_resizer *r)
{
    if (!r) return;
    scratch_free(r);
    free(r);
}

static int check_resize_args(const uint8_t *src, uint32_t sw, uint32_t sh, const uint8_t *dst,
                             uint32_t dw, uint32_t dh, int channels, sa1b_error *err)
{
    if (!src || !dst) return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: NULL buffer");
    if (channels < 1 || channels > 4)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: %d channels, not 1..4", channels);
    if (!sw || !sh || !dw || !dh || sw > SA1B_IMAGE_MAX_SIDE || sh > SA1B_IMAGE_MAX_SIDE ||
        dw > SA1B_IMAGE_MAX_SIDE || dh > SA1B_IMAGE_MAX_SIDE)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: bad size %ux%u -> %ux%u", sw, sh,
                              dw, dh);
    return SA1B_OK;
}

/* The library's resize: the fastest implementation the CPU has. */
static int resize_into(resize_scratch *s, row_src *src, uint32_t sw, uint32_t sh,
                       uint8_t *dst, size_t dst_stride, uint32_t dw, uint32_t dh, int ch,
                       row_crc *rc, sa1b_error *err)
{
    if (cpu_has_avx2())
        return resize_avx2(s, src, sw, sh, dst, dst_stride, dw, dh, ch, cpu_has_avx512(), NULL,
                           rc, err);
    return resize_portable(s, src, sw, sh, dst, dst_stride, dw, dh, ch, NULL, rc, err);
}

int image_resize(image_resizer *r, const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst,
                 size_t dst_stride, uint32_t dw, uint32_t dh, int channels, int impl,
                 image_resize_stats *st, sa1b_error *err)
{
    if (!r) return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: NULL resizer");
    SA1B_FORWARD(check_resize_args(src, sw, sh, dst, dw, dh, channels, err));
    if (dst_stride < (size_t)dw * channels)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: stride %zu < %zu", dst_stride,
                              (size_t)dw * channels);
    if (!image_resize_supported(impl))
        return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: implementation %d not available",
                              impl);
    if (impl == IMAGE_RESIZE_AUTO)
        impl = cpu_has_avx512() ? IMAGE_RESIZE_AVX512
               : cpu_has_avx2() ? IMAGE_RESIZE_AVX2
                                : IMAGE_RESIZE_PORTABLE;
    row_src rs = whole_image(src, (size_t)sw * channels);
    if (impl != IMAGE_RESIZE_PORTABLE)
        return resize_avx2(r, &rs, sw, sh, dst, dst_stride, dw, dh, channels,
                           impl == IMAGE_RESIZE_AVX512, st, NULL, err);
    return resize_portable(r, &rs, sw, sh, dst, dst_stride, dw, dh, channels, st, NULL, err);
}

int sa1b_resize_area(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dw,
                     uint32_t dh, int channels, sa1b_error *err)
{
    SA1B_FORWARD(check_resize_args(src, sw, sh, dst, dw, dh, channels, err));
    resize_scratch s = {0};
    row_src rs = whole_image(src, (size_t)sw * channels);
    int rc = resize_into(&s, &rs, sw, sh, dst, (size_t)dw * channels, dw, dh, channels, NULL, err);
    scratch_free(&s);
    return rc;
}

/* ---- TurboJPEG ------------------------------------------------------------ */

/* libjpeg's error manager for region decodes: errors, and warnings as
 * TJFLAG_STOPONWARNING makes them, jump back with the message kept (never
 * printed). */
typedef struct jerr_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jerr_mgr;

typedef struct jenc jenc;

struct sa1b_imgctx {
    tjhandle dec;
    uint8_t *buf;          /* decode scratch */
    size_t buf_cap;
    resize_scratch rs;     /* the letterbox's resize (RGB, or the luma plane) */
    resize_scratch rs_c;   /* the chroma planes' (decode_planes) */
    uint8_t *ycc;          /* the resized planes (decode_planes) */
    size_t ycc_cap;
    struct jpeg_decompress_struct *jd; /* libjpeg's decodes (created on first use) */
    jerr_mgr *je;
    struct jpeg_progress_mgr jp;       /* the scan limit */
    uint8_t *band;                     /* their band of rows (row_src) */
    size_t band_cap;
    jenc *enc;             /* encodes (created on first use) */
};

/* TJFLAG_LIMITSCANS bounds the work a hostile progressive JPEG can ask for;
 * STOPONWARNING makes truncated data ("Premature end of JPEG file") fail at
 * once instead of returning grey. */
#define DEC_FLAGS (TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)

int sa1b_imgctx_new(sa1b_imgctx **c, sa1b_error *err)
{
    if (!c) return sa1b_error_set(err, SA1B_EINVAL, -1, "imgctx: NULL argument");
    *c = NULL;
    sa1b_imgctx *x = calloc(1, sizeof *x);
    if (!x) return sa1b_error_set(err, SA1B_ENOMEM, -1, "imgctx: out of memory");
    x->dec = tjInitDecompress();
    if (!x->dec) {
        free(x);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "imgctx: cannot create a TurboJPEG decompressor");
    }
    *c = x;
    return SA1B_OK;
}

static void jenc_free(jenc *e);

void sa1b_imgctx_free(sa1b_imgctx *c)
{
    if (!c) return;
    if (c->dec) tjDestroy(c->dec);
    jenc_free(c->enc);
    if (c->jd) jpeg_destroy_decompress(c->jd);
    free(c->jd);
    free(c->je);
    free(c->buf);
    free(c->band);
    free(c->ycc);
    scratch_free(&c->rs);
    scratch_free(&c->rs_c);
    free(c);
}

static void jerr_exit(j_common_ptr ci)
{
    jerr_mgr *e = (jerr_mgr *)(void *)ci->err;
    e->pub.format_message(ci, e->msg);
    longjmp(e->jump, 1);
}

static void jerr_emit(j_common_ptr ci, int level)
{
    if (level < 0) jerr_exit(ci); /* a warning: corrupt or truncated data */
}

static void jerr_output(j_common_ptr ci) { (void)ci; }

/* libjpeg's standard error manager with the three above: nothing printed,
 * every error and warning jumps to e->jump. */
static struct jpeg_error_mgr *jerr_init(jerr_mgr *e)
{
    struct jpeg_error_mgr *pub = jpeg_std_error(&e->pub);
    pub->error_exit = jerr_exit;
    pub->emit_message = jerr_emit;
    pub->output_message = jerr_output;
    return pub;
}

/* TJFLAG_LIMITSCANS for libjpeg's own decodes: a progressive JPEG of more
 * than 500 scans is refused, as tjDecompress2 refuses it. */
static void scan_limit(j_common_ptr ci)
{
    j_decompress_ptr d = (j_decompress_ptr)ci;
    if (d->progressive_mode && d->input_scan_number > 500) {
        jerr_mgr *e = (jerr_mgr *)(void *)ci->err;
        snprintf(e->msg, sizeof e->msg, "Progressive JPEG image has more than 500 scans");
        longjmp(e->jump, 1);
    }
}

/* c's libjpeg decompressor, created on first use. */
static int decoder(sa1b_imgctx *c, sa1b_error *err)
{
    if (c->jd) return SA1B_OK;
    c->jd = calloc(1, sizeof *c->jd);
    c->je = calloc(1, sizeof *c->je);
    volatile int failed = !c->jd || !c->je;
    if (!failed) {
        /* jpeg_create_decompress fails (jumps back here) only out of memory */
        if (setjmp(c->je->jump)) {
            failed = 1;
        } else {
            c->jd->err = jerr_init(c->je);
            jpeg_create_decompress(c->jd);
            c->jp.progress_monitor = scan_limit;
            c->jd->progress = &c->jp;
        }
    }
    if (failed) {
        free(c->jd);
        free(c->je);
        c->jd = NULL;
        c->je = NULL;
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: cannot create a decompressor");
    }
    return SA1B_OK;
}

/* A decoder's message as an error: data that ends early is SA1B_ETRUNC;
 * an allocation that failed inside libjpeg ("Insufficient memory (case N)")
 * or TurboJPEG ("...: Memory allocation failure") is SA1B_ENOMEM, never the
 * data's fault: a caller that skips bad samples must not skip it. */
static int jpeg_msg_error(const char *msg, sa1b_error *err)
{
    if (strstr(msg, "Premature end of JPEG file"))
        return sa1b_error_set(err, SA1B_ETRUNC, -1, "jpeg: truncated: %s", msg);
    if (strstr(msg, "Insufficient memory") || strstr(msg, "Memory allocation failure"))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory: %s", msg);
    return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: %s", msg);
}

/* The error a jump from libjpeg brought back (the decompressor reset). */
static int jerr_report(sa1b_imgctx *c, sa1b_error *err)
{
    jpeg_abort_decompress(c->jd);
    return jpeg_msg_error(c->je->msg, err);
}

/* tjDecompress2's settings for TJPF_RGB without the FAST flags, on a header
 * just read: libjpeg's decodes give its very pixels. */
static void tj_settings(struct jpeg_decompress_struct *d)
{
    d->out_color_space = JCS_EXT_RGB;
    d->dct_method = JDCT_ISLOW;
    d->do_fancy_upsampling = TRUE;
}

/* Reports the decompressor's error, then replaces the handle: TurboJPEG 2.1
 * leaves a handle whose header read failed half-way in a state where the
 * next tjDecompressHeader3 "succeeds" without reporting any size. */
static int tj_error(sa1b_imgctx *c, sa1b_error *err)
{
    const char *msg = tjGetErrorStr2(c->dec);
    int rc = jpeg_msg_error(msg ? msg : "unknown error", err);
    tjhandle fresh = tjInitDecompress();
    if (fresh) {
        tjDestroy(c->dec);
        c->dec = fresh;
    }
    return rc;
}

static int header(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t *w, uint32_t *h,
                  sa1b_error *err)
{
    if (!c || (!jpg && len)) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    if (len < 4 || jpg[0] != 0xFF || jpg[1] != 0xD8)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: not a JPEG file");
    if (len > (size_t)0xFFFFFFFFu)   /* TurboJPEG takes unsigned long sizes */
        return sa1b_error_set(err, SA1B_ERANGE, -1, "jpeg: %zu bytes, too large", len);
    int iw = 0, ih = 0, sub, cs;
    if (tjDecompressHeader3(c->dec, jpg, (unsigned long)len, &iw, &ih, &sub, &cs) != 0)
        return tj_error(c, err);
    if (iw <= 0 || ih <= 0) return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: no image in the data");
    if ((uint32_t)iw > SA1B_IMAGE_MAX_SIDE || (uint32_t)ih > SA1B_IMAGE_MAX_SIDE ||
        (uint64_t)iw * (uint64_t)ih > SA1B_IMAGE_MAX_PIXELS)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "jpeg: %dx%d too large", iw, ih);
    *w = (uint32_t)iw;
    *h = (uint32_t)ih;
    return SA1B_OK;
}

int sa1b_jpeg_size(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t *w, uint32_t *h,
                   sa1b_error *err)
{
    if (!w || !h) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    return header(c, jpg, len, w, h, err);
}

int sa1b_letterbox_geometry(uint32_t w, uint32_t h, uint32_t S, sa1b_letterbox *lb,
                            sa1b_error *err)
{
    if (!lb) return sa1b_error_set(err, SA1B_EINVAL, -1, "letterbox: NULL argument");
    if (!w || !h || !S || S > SA1B_IMAGE_MAX_SIDE)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "letterbox: bad size %ux%u to %u", w, h, S);
    uint64_t m = w > h ? w : h;
    uint64_t nw = ((uint64_t)w * S * 2 + m) / (2 * m);   /* round(w*S/m), halves up */
    uint64_t nh = ((uint64_t)h * S * 2 + m) / (2 * m);
    lb->orig_w = w;
    lb->orig_h = h;
    lb->new_w = nw ? (uint32_t)nw : 1;
    lb->new_h = nh ? (uint32_t)nh : 1;
    lb->S = S;
    lb->scale = (double)S / (double)m;
    return SA1B_OK;
}

/* The smallest DCT scale 1/8, 1/4 or 1/2 giving >= min_w x min_h: *bw x *bh
 * (w x h, 1/1, when none does).  Only these: libjpeg-turbo decodes them with
 * its SIMD inverse DCTs, the other k/8 with generic C ones, slower than a
 * whole decode (a 2000x1500 photograph, this machine: 1/1 8.0-9.4 ms,
 * 5/8 11.3-11.8, 6/8 13.3, 7/8 20-25; 1/2 5.9, 3/8 7.0), so an SA-1B
 * image of 2000x1500 at --image-size 1024 decodes whole and the area
 * filter takes it from there instead of from 5/8. */
static void pick_scale(uint32_t w, uint32_t h, uint32_t min_w, uint32_t min_h, uint32_t *bw,
                       uint32_t *bh, uint32_t *denom)
{
    int nsf = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&nsf);
    *bw = w;
    *bh = h;
    *denom = 1;
    if (!sf) return;
    for (int i = 0; i < nsf; i++) {
        if (sf[i].num != 1 || sf[i].denom <= 1 || sf[i].denom > 8) continue;
        uint32_t sw = (uint32_t)(((uint64_t)w * sf[i].num + sf[i].denom - 1) / sf[i].denom);
        uint32_t sh = (uint32_t)(((uint64_t)h * sf[i].num + sf[i].denom - 1) / sf[i].denom);
        if (sw >= min_w && sh >= min_h && (uint64_t)sw * sh < (uint64_t)*bw * *bh) {
            *bw = sw;
            *bh = sh;
            *denom = (uint32_t)sf[i].denom;
        }
    }
}

/* Decodes bw x bh RGB (a size pick_scale chose) into dst, rows pitch bytes apart. */
static int decode_into(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t bw, uint32_t bh,
                       uint8_t *dst, size_t pitch, sa1b_error *err)
{
    if (tjDecompress2(c->dec, jpg, (unsigned long)len, dst, (int)bw, (int)pitch, (int)bh,
                      TJPF_RGB, DEC_FLAGS) != 0)
        return tj_error(c, err);
    return SA1B_OK;
}

/* Decodes at the smallest scale k/8 (k <= 8) giving >= min_w x min_h, into c->buf. */
static int decode_scaled(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t w, uint32_t h,
                         uint32_t min_w, uint32_t min_h, uint32_t *ow, uint32_t *oh,
                         sa1b_error *err)
{
    uint32_t bw, bh, denom;
    pick_scale(w, h, min_w, min_h, &bw, &bh, &denom);
    size_t need = (size_t)bw * bh * 3;
    if (!grow((void **)&c->buf, &c->buf_cap, need, 1))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory for %ux%u", bw, bh);
    SA1B_FORWARD(decode_into(c, jpg, len, bw, bh, c->buf, (size_t)bw * 3, err));
    *ow = bw;
    *oh = bh;
    return SA1B_OK;
}

int sa1b_jpeg_decode_scaled(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t min_w,
                            uint32_t min_h, const uint8_t **rgb, uint32_t *out_w,
                            uint32_t *out_h, sa1b_error *err)
{
    uint32_t w = 0, h = 0;
    if (!rgb || !out_w || !out_h) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    SA1B_FORWARD(header(c, jpg, len, &w, &h, err));
    SA1B_FORWARD(decode_scaled(c, jpg, len, w, h, min_w, min_h, out_w, out_h, err));
    *rgb = c->buf;
    return SA1B_OK;
}

/* ---- the planar path ---------------------------------------------------------
 *
 * A whole (1/1) decode of a JPEG whose chroma is subsampled (4:2:0, as
 * SA-1B's photographs are) spends a fifth of its time upsampling the
 * chroma to full size and converting every pixel to RGB (a 2000x1500
 * photograph, this machine: 11.3 ms to RGB, 9.1 ms to its planes), only
 * for the area filter to take the image down to about half that size.
 * There the letterbox decodes the planes as they are (libjpeg's raw data
 * output: the same integers its RGB decode starts from), resizes each over
 * the image's extent (a chroma plane of 4:2:0 is reconstructed by linear
 * interpolation to twice its size, as libjpeg's "fancy" upsampling does,
 * but within the resize's taps: see taps_build), and converts the result
 * to RGB (ycc_internal.h, libjpeg's integers).  Where libjpeg decodes
 * chroma at full size through its scaled inverse DCT (4:2:0 and 4:4:4 at
 * 1/2 to 1/8) the planes gain nothing and the RGB decode stays: decoding
 * three full planes and resizing each took longer than the RGB decode and
 * one resize (2250x1500 photographs at 1/2, 1.1-1.6 ms over the decode
 * against 0.8-0.9).  Other samplings (4:2:2 with an even width, 4:4:0)
 * take the planar way at those scales too. */

#if JPEG_LIB_VERSION >= 70
#define COMP_DCT_H(ci) ((ci)->DCT_h_scaled_size)
#define COMP_DCT_V(ci) ((ci)->DCT_v_scaled_size)
#define MIN_DCT_H(d) ((d)->min_DCT_h_scaled_size)
#define MIN_DCT_V(d) ((d)->min_DCT_v_scaled_size)
#else
#define COMP_DCT_H(ci) ((ci)->DCT_scaled_size)
#define COMP_DCT_V(ci) ((ci)->DCT_scaled_size)
#define MIN_DCT_H(d) ((d)->min_DCT_scaled_size)
#define MIN_DCT_V(d) ((d)->min_DCT_scaled_size)
#endif

enum { PLANE_MAX_ROWS = 64 }; /* rows of a component per iMCU row: v_samp (<= 4) * DCT size (<= 16) */

/* Whether d (header read, raw output and scale set, output size calculated)
 * goes the planar way: YCbCr in 3 components, the luma plane the output's
 * size and each chroma plane an exact integer fraction of it (their
 * samples cover whole pixels: an odd width at 4:2:0 goes the RGB way), one
 * of them smaller. */
static int planar_ok(const struct jpeg_decompress_struct *d)
{
    if (d->jpeg_color_space != JCS_YCbCr || d->num_components != 3 || d->out_color_space != JCS_YCbCr)
        return 0;
    int smaller = 0;
    for (int k = 0; k < 3; k++) {
        const jpeg_component_info *ci = &d->comp_info[k];
        const long num_x = (long)d->max_h_samp_factor * MIN_DCT_H(d), den_x = (long)ci->h_samp_factor * COMP_DCT_H(ci);
        const long num_y = (long)d->max_v_samp_factor * MIN_DCT_V(d), den_y = (long)ci->v_samp_factor * COMP_DCT_V(ci);
        if (den_x <= 0 || den_y <= 0 || num_x % den_x || num_y % den_y) return 0;
        if ((uint64_t)ci->downsampled_width * (uint64_t)(num_x / den_x) != d->output_width ||
            (uint64_t)ci->downsampled_height * (uint64_t)(num_y / den_y) != d->output_height)
            return 0;
        if ((long)ci->v_samp_factor * COMP_DCT_V(ci) > PLANE_MAX_ROWS) return 0;
        if (k == 0 && (num_x != den_x || num_y != den_y)) return 0;
        if (num_x != den_x || num_y != den_y) smaller = 1;
    }
    return smaller;
}

/* d (started, planar_ok) decoded to its three planes in c->buf, then each
 * resized to dw x dh and converted to RGB into dst (rows stride bytes
 * apart, rc: their checksum).  Errors in the data jump to the caller's
 * setjmp. */
static int decode_planes(sa1b_imgctx *c, struct jpeg_decompress_struct *d, uint8_t *dst,
                         size_t stride, uint32_t dw, uint32_t dh, row_crc *rc, sa1b_error *err)
{
    size_t pstride[3], off[3], total = 0;
    for (int k = 0; k < 3; k++) {
        const jpeg_component_info *ci = &d->comp_info[k];
        /* libjpeg writes whole blocks: width_in_blocks of them a row, and
         * whole iMCU rows (the last one's rows past the image unused) */
        pstride[k] = ((size_t)ci->width_in_blocks * COMP_DCT_H(ci) + 63) / 64 * 64;
        off[k] = total;
        total += pstride[k] * d->total_iMCU_rows * ci->v_samp_factor * COMP_DCT_V(ci);
    }
    if (!grow((void **)&c->buf, &c->buf_cap, total, 1) ||
        !grow((void **)&c->ycc, &c->ycc_cap, (size_t)dw * dh * 3, 1))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory for %ux%u",
                              (unsigned)d->output_width, (unsigned)d->output_height);
    const JDIMENSION lines = (JDIMENSION)(d->max_v_samp_factor * MIN_DCT_V(d));
    JSAMPROW rows[3][PLANE_MAX_ROWS];
    JSAMPARRAY planes[3] = {rows[0], rows[1], rows[2]};
    for (JDIMENSION imcu = 0; d->output_scanline < d->output_height; imcu++) {
        if (imcu >= d->total_iMCU_rows) /* (libjpeg gives the rows of every iMCU row it has) */
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: the decoder gave fewer rows than the image has");
        for (int k = 0; k < 3; k++) {
            const jpeg_component_info *ci = &d->comp_info[k];
            const size_t n = (size_t)ci->v_samp_factor * COMP_DCT_V(ci);
            uint8_t *p = c->buf + off[k] + (size_t)imcu * n * pstride[k];
            for (size_t r = 0; r < n; r++) rows[k][r] = p + r * pstride[k];
        }
        if (jpeg_read_raw_data(d, planes, lines) == 0)
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: the decoder gave fewer rows than the image has");
    }
    uint8_t *out[3];
    for (int k = 0; k < 3; k++) {
        const jpeg_component_info *ci = &d->comp_info[k];
        out[k] = c->ycc + (size_t)k * dw * dh;
        row_src rs = whole_image(c->buf + off[k], pstride[k]);
        /* chroma: reconstructed linearly over the image, then area-filtered */
        resize_scratch *r = k ? &c->rs_c : &c->rs;
        r->up_x = (uint32_t)(d->output_width / ci->downsampled_width);
        r->up_y = (uint32_t)(d->output_height / ci->downsampled_height);
        SA1B_FORWARD(resize_into(r, &rs, ci->downsampled_width, ci->downsampled_height, out[k], dw,
                                 dw, dh, 1, NULL, err));
    }
    const int impl = ycc_rgb_supported(YCC_AVX2) ? YCC_AVX2 : YCC_PORTABLE;
    for (uint32_t y = 0; y < dh; y++) {
        const size_t o = (size_t)y * dw;
        ycc_rgb_row(out[0] + o, out[1] + o, out[2] + o, dst + (size_t)y * stride, dw, impl);
        if (rc) row_crc_rows(rc, dst, stride, y + 1, dh);
    }
    return SA1B_OK;
}

/* Decodes the w x h JPEG at scale 1/denom (bw x bh, as pick_scale chose)
 * through libjpeg and resizes it to dw x dh into dst: the planar way where
 * planar_ok, else with tjDecompress2's settings (so the same pixels) as its
 * rows come (row_src's band). */
static int decode_resize(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t w, uint32_t h,
                         uint32_t denom, uint32_t bw, uint32_t bh, uint8_t *dst, size_t stride,
                         uint32_t dw, uint32_t dh, row_crc *rc, sa1b_error *err)
{
    SA1B_FORWARD(decoder(c, err));
    row_src rs = {0};
    rs.stride = (size_t)bw * 3;
    rs.h = bh;
    struct jpeg_decompress_struct *d = c->jd;
    rs.dec = d;
    if (setjmp(c->je->jump)) return jerr_report(c, err);
    jpeg_mem_src(d, jpg, (unsigned long)len);
    jpeg_read_header(d, TRUE);
    d->dct_method = JDCT_ISLOW;
    d->out_color_space = JCS_YCbCr;
    d->raw_data_out = TRUE;
    d->scale_num = 1;
    d->scale_denom = denom;
    jpeg_calc_output_dimensions(d);
    if (d->image_width == w && d->image_height == h && d->output_width == bw &&
        d->output_height == bh && planar_ok(d)) {
        jpeg_start_decompress(d);
        int rc_ = decode_planes(c, d, dst, stride, dw, dh, rc, err);
        if (rc_ != SA1B_OK) {
            jpeg_abort_decompress(d);
            return rc_;
        }
        jpeg_finish_decompress(d); /* to the end of the data, as tjDecompress2 reads it */
        return SA1B_OK;
    }
    d->raw_data_out = FALSE;
    tj_settings(d);
    if (!grow((void **)&c->band, &c->band_cap, rs.stride * IMAGE_BAND_ROWS, 1)) {
        jpeg_abort_decompress(d);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory for %ux%u", bw, bh);
    }
    rs.band = c->band;
    jpeg_start_decompress(d);
    if (d->image_width != w || d->image_height != h || d->output_width != bw ||
        d->output_height != bh || d->output_components != 3) {
        jpeg_abort_decompress(d);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: the decoder gives %ux%ux%d, not %ux%ux3",
                              (unsigned)d->output_width, (unsigned)d->output_height,
                              d->output_components, bw, bh);
    }
    int rc_ = resize_into(&c->rs, &rs, bw, bh, dst, stride, dw, dh, 3, rc, err);
    if (rc_ != SA1B_OK) {
        jpeg_abort_decompress(d);
        return rc_;
    }
    /* the rows the resize did not need (none but a last one or two), then
     * the end of the data, as tjDecompress2 reads them: a JPEG cut short
     * after its last needed row still fails */
    while (d->output_scanline < d->output_height) {
        JSAMPROW row = c->band;
        if (jpeg_read_scanlines(d, &row, 1) == 0) break;
    }
    jpeg_finish_decompress(d);
    return SA1B_OK;
}

int image_letterbox(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S, uint8_t *out,
                    uint32_t *zero_from, sa1b_letterbox *lb, uint32_t *crc, sa1b_error *err)
{
    uint32_t w = 0, h = 0, dw, dh;
    sa1b_letterbox g;
    if (!out || !zero_from) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    const uint32_t zero_before = *zero_from < S ? *zero_from : S;
    *zero_from = S; /* nothing known if this call fails half-way */
    SA1B_FORWARD(header(c, jpg, len, &w, &h, err));
    SA1B_FORWARD(sa1b_letterbox_geometry(w, h, S, &g, err));
    const size_t stride = (size_t)S * 3;
    /* zero padding right of each image row first (the decode and the
     * resize write only the columns of the image), so that the rows the
     * resize completes can be checksummed as they come */
    if (g.new_w < S)
        for (uint32_t y = 0; y < g.new_h; y++)
            memset(out + y * stride + (size_t)g.new_w * 3, 0, (size_t)(S - g.new_w) * 3);
    row_crc rc;
    row_crc_init(&rc, stride);
    uint32_t denom;
    pick_scale(w, h, g.new_w, g.new_h, &dw, &dh, &denom);
    if (dw == g.new_w && dh == g.new_h) {
        /* the DCT scale hits the target: decode straight into the canvas */
        SA1B_FORWARD(decode_into(c, jpg, len, dw, dh, out, stride, err));
        if (crc) row_crc_rows(&rc, out, stride, g.new_h, g.new_h);
    } else {
        SA1B_FORWARD(decode_resize(c, jpg, len, w, h, denom, dw, dh, out, stride, g.new_w,
                                   g.new_h, crc ? &rc : NULL, err));
    }
    /* the rows below the image: zero already from zero_before on */
    if (g.new_h < zero_before)
        memset(out + (size_t)g.new_h * stride, 0, (size_t)(zero_before - g.new_h) * stride);
    *zero_from = g.new_h;
    if (crc) *crc = crc32c_zeros(rc.crc, (uint64_t)(S - g.new_h) * stride);
    if (lb) *lb = g;
    return SA1B_OK;
}

int sa1b_jpeg_letterbox(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S, uint8_t *out,
                        sa1b_letterbox *lb, sa1b_error *err)
{
    uint32_t zero_from = S; /* nothing known about the caller's buffer */
    return image_letterbox(c, jpg, len, S, out, &zero_from, lb, NULL, err);
}

/* The header of a JPEG that must be w x h (SA1B_EMISMATCH otherwise), and
 * an output buffer that must be there. */
static int header_is(sa1b_imgctx *c, const uint8_t *jpg, size_t len, const uint8_t *out, uint32_t w,
                     uint32_t h, sa1b_error *err)
{
    uint32_t jw = 0, jh = 0;
    if (!out) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    SA1B_FORWARD(header(c, jpg, len, &jw, &jh, err));
    if (jw != w || jh != h)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "jpeg: image is %ux%u, expected %ux%u",
                              jw, jh, w, h);
    return SA1B_OK;
}

int sa1b_jpeg_decode(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint8_t *rgb, uint32_t w,
                     uint32_t h, sa1b_error *err)
{
    SA1B_FORWARD(header_is(c, jpg, len, rgb, w, h, err));
    if (tjDecompress2(c->dec, jpg, (unsigned long)len, rgb, (int)w, 0, (int)h, TJPF_RGB,
                      DEC_FLAGS) != 0)
        return tj_error(c, err);
    return SA1B_OK;
}

/* The rows of a region decode: reads scanlines [0, h) into rgb (stride
 * bytes apart), the columns cropped to [0, cw) where cw < the width, then
 * drops the rest of the image undecoded.  Returns 1 when the JPEG is not a
 * single-scan one (the caller decodes it whole), 0 when done; errors jump. */
static int region_rows(struct jpeg_decompress_struct *d, const uint8_t *jpg, size_t len,
                       uint32_t jw, uint32_t jh, uint8_t *rgb, size_t stride, uint32_t w,
                       uint32_t h)
{
    jpeg_mem_src(d, jpg, (unsigned long)len);
    jpeg_read_header(d, TRUE);
    if (d->image_width != jw || d->image_height != jh || jpeg_has_multiple_scans(d) ||
        (d->num_components != 3 && d->num_components != 1)) {
        jpeg_abort_decompress(d);
        return 1;
    }
    tj_settings(d);
    jpeg_start_decompress(d);
    /* crop a margin of two iMCUs beyond w: the upsampling of the last
     * columns then sees the same neighbours as in a whole decode */
    JDIMENSION imcu = (JDIMENSION)d->max_h_samp_factor * DCTSIZE;
    if ((uint64_t)w + 2 * imcu < jw) {
        JDIMENSION x0 = 0, cw = w + 2 * imcu;
        jpeg_crop_scanline(d, &x0, &cw);
    }
    while (d->output_scanline < h) {
        JSAMPROW rows[16];
        JDIMENSION n = h - d->output_scanline;
        if (n > 16) n = 16;
        for (JDIMENSION k = 0; k < n; k++) rows[k] = rgb + (size_t)(d->output_scanline + k) * stride;
        jpeg_read_scanlines(d, rows, n);
    }
    jpeg_abort_decompress(d);
    return 0;
}

int sa1b_jpeg_decode_region(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint8_t *rgb,
                            size_t stride, uint32_t jw, uint32_t jh, uint32_t w, uint32_t h,
                            sa1b_error *err)
{
    SA1B_FORWARD(header_is(c, jpg, len, rgb, jw, jh, err));
    if (w == 0 || h == 0 || w > jw || h > jh || stride < (size_t)jw * 3)
        return sa1b_error_set(err, SA1B_EINVAL, -1,
                              "jpeg: region %ux%u of %ux%u, stride %zu", w, h, jw, jh, stride);
    SA1B_FORWARD(decoder(c, err));
    int whole;
    if (setjmp(c->je->jump)) return jerr_report(c, err);
    whole = region_rows(c->jd, jpg, len, jw, jh, rgb, stride, w, h);
    if (!whole) return SA1B_OK;
    /* progressive, multi-scan or unusual: the whole image, then the rows */
    if (!grow((void **)&c->buf, &c->buf_cap, (size_t)jw * jh * 3, 1))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory for %ux%u", jw, jh);
    SA1B_FORWARD(decode_into(c, jpg, len, jw, jh, c->buf, (size_t)jw * 3, err));
    for (uint32_t y = 0; y < h; y++)
        memcpy(rgb + (size_t)y * stride, c->buf + (size_t)y * jw * 3, (size_t)w * 3);
    return SA1B_OK;
}

/* ---- encode ----------------------------------------------------------------
 *
 * Through libjpeg rather than tjCompress2: TurboJPEG 2.1 cannot ask for
 * optimal Huffman tables but through its TJ_OPTIMIZE environment variable
 * (process-wide state, and it also reads TJ_PROGRESSIVE, TJ_RESTART and
 * TJ_ARITHMETIC).  The parameters are tjCompress2's for TJPF_RGB and
 * TJSAMP_420: libjpeg's defaults, the quality's tables, YCbCr with Y
 * sampled 2x2, and the fast integer DCT below quality 96 (the accurate
 * one from 96), so the quantised coefficients, hence the decoded pixels,
 * are the same whichever tables code them, and SA1B_JPEG_STANDARD gives
 * tjCompress2's very bytes (tests/test-image.c checks both). */

/* The compressor (of one encode at a time), its error manager and a
 * destination that grows one malloc'ed buffer, in one allocation: what the
 * error path reads after longjmp lives here, not in the caller's locals.
 * ci comes first, so the destination callbacks find the rest from the
 * j_compress_ptr. */
struct jenc {
    struct jpeg_compress_struct ci;
    struct jpeg_destination_mgr dst;
    jerr_mgr err;
    uint8_t *out;    /* the JPEG being written, cap bytes (NULL between encodes) */
    size_t cap;
    int nomem;       /* the buffer could not grow */
};

static void dst_init(j_compress_ptr ci)
{
    jenc *e = (jenc *)(void *)ci;
    e->dst.next_output_byte = e->out;
    e->dst.free_in_buffer = e->cap;
}

/* libjpeg calls this when the buffer is full: double it. */
static boolean dst_grow(j_compress_ptr ci)
{
    jenc *e = (jenc *)(void *)ci;
    size_t cap = e->cap * 2;
    uint8_t *p = cap > e->cap ? realloc(e->out, cap) : NULL;
    if (!p) {
        e->nomem = 1;
        ERREXIT1(ci, JERR_OUT_OF_MEMORY, 0);
    }
    e->dst.next_output_byte = p + e->cap;
    e->dst.free_in_buffer = cap - e->cap;
    e->out = p;
    e->cap = cap;
    return TRUE;
}

static void dst_term(j_compress_ptr ci) { (void)ci; }

static void jenc_free(jenc *e)
{
    if (!e) return;
    free(e->out);
    free(e);
}

static jenc *jenc_new(void)
{
    jenc *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->dst.init_destination = dst_init;
    e->dst.empty_output_buffer = dst_grow;
    e->dst.term_destination = dst_term;
    return e;
}

/* One encode into e->out (e->cap bytes allocated): 0, or -1 after an
 * error of libjpeg (its message in e->err.msg, e->nomem set when out of
 * memory).  A new compressor each time: libjpeg-turbo 2.1's
 * jpeg_set_defaults keeps the Huffman tables a compressor already has, so
 * after an optimized encode a standard one would code with the previous
 * image's tables (tests/test-image.c saw it).  Creating one costs
 * microseconds against the milliseconds of an encode. */
static int jenc_run(jenc *e, const uint8_t *rgb, uint32_t w, uint32_t h, int quality, int huffman)
{
    j_compress_ptr ci = &e->ci;
    ci->err = jerr_init(&e->err);
    if (setjmp(e->err.jump)) {
        jpeg_destroy_compress(ci);   /* also after a failed create (nothing to free then) */
        return -1;
    }
    jpeg_create_compress(ci);
    ci->dest = &e->dst;
    ci->image_width = w;
    ci->image_height = h;
    ci->input_components = 3;
    ci->in_color_space = JCS_RGB;
    jpeg_set_defaults(ci);
    jpeg_set_quality(ci, quality, TRUE);
    ci->dct_method = quality >= 96 ? JDCT_ISLOW : JDCT_IFAST;
    jpeg_set_colorspace(ci, JCS_YCbCr);
    ci->comp_info[0].h_samp_factor = ci->comp_info[0].v_samp_factor = 2;   /* 4:2:0 */
    for (int k = 1; k < 3; k++) ci->comp_info[k].h_samp_factor = ci->comp_info[k].v_samp_factor = 1;
    ci->optimize_coding = huffman == SA1B_JPEG_OPTIMIZED;
    jpeg_start_compress(ci, TRUE);
    while (ci->next_scanline < h) {
        JSAMPROW rows[16];
        JDIMENSION n = h - ci->next_scanline;
        if (n > 16) n = 16;
        for (JDIMENSION k = 0; k < n; k++)
            rows[k] = (JSAMPROW)(uintptr_t)(rgb + (size_t)(ci->next_scanline + k) * w * 3);
        jpeg_write_scanlines(ci, rows, n);
    }
    jpeg_finish_compress(ci);
    jpeg_destroy_compress(ci);
    return 0;
}

int sa1b_jpeg_encode(sa1b_imgctx *c, const uint8_t *rgb, uint32_t w, uint32_t h, int quality,
                     int huffman, uint8_t **out, size_t *len, sa1b_error *err)
{
    if (!c || !rgb || !out || !len) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    *out = NULL;
    *len = 0;
    if (quality < 1 || quality > 100)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: quality %d not in 1..100", quality);
    if (huffman != SA1B_JPEG_OPTIMIZED && huffman != SA1B_JPEG_STANDARD)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: Huffman tables %d unknown", huffman);
    if (!w || !h || w > SA1B_IMAGE_MAX_SIDE || h > SA1B_IMAGE_MAX_SIDE ||
        (uint64_t)w * h > SA1B_IMAGE_MAX_PIXELS)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: cannot encode %ux%u", w, h);
    if (!c->enc && !(c->enc = jenc_new()))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: cannot create a compressor");
    jenc *e = c->enc;
    /* most images take well under a byte per pixel at any quality; the
     * buffer doubles when one does not */
    e->cap = (size_t)w * h / 2 + 4096;
    e->out = malloc(e->cap);
    e->nomem = 0;
    if (!e->out) return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory");
    if (jenc_run(e, rgb, w, h, quality, huffman)) {
        free(e->out);
        e->out = NULL;
        if (e->nomem) return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: encode: out of memory");
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: encode: %s", e->err.msg);
    }
    size_t size = e->cap - e->dst.free_in_buffer;
    uint8_t *shrunk = realloc(e->out, size);
    *out = shrunk ? shrunk : e->out;
    *len = size;
    e->out = NULL;
    return SA1B_OK;
}
