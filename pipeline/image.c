/*
 * image.c - TurboJPEG decode/encode, exact area-filter resize, letterbox.
 *
 * Implements: sa1b_image.h.  The resize is separable: per axis a table of
 * taps (first source index, fixed-point weights = exact overlap / source
 * span) is built once per call; each source row is filtered horizontally
 * once into a small ring buffer of rows, and every destination row is the
 * weighted sum of the ring rows it covers.  The
 * letterbox reuses the context's scratch (decode buffer, taps, ring) so a
 * steady-state call allocates nothing.
 */
#include "sa1b_image.h"

#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

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
 * vectorise at -O2. */

typedef struct axis_taps {
    uint32_t *start;   /* [m] first source index; start + T <= n */
    uint32_t *ov;      /* [m][T] integer overlaps (zero where no overlap) */
    uint32_t *wq;      /* [m][T] ov / n in fixed point, each row summing to exactly 1 */
    size_t cap_m, cap_w;
    uint32_t T;        /* taps per destination pixel (the most any needs) */
} axis_taps;

typedef struct resize_scratch {
    axis_taps x, y;
    uint16_t *ring;    /* [ring_rows][dw * ch] horizontally filtered rows, Q8 */
    size_t ring_cap;
} resize_scratch;

static void taps_free(axis_taps *t)
{
    free(t->start);
    free(t->ov);
    free(t->wq);
    memset(t, 0, sizeof *t);
}

static void scratch_free(resize_scratch *s)
{
    taps_free(&s->x);
    taps_free(&s->y);
    free(s->ring);
    memset(s, 0, sizeof *s);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 1;
    void *q = realloc(*p, need * elem);
    if (!q) return 0;
    *p = q;
    *cap = need;
    return 1;
}

static int taps_build(axis_taps *t, uint32_t n, uint32_t m, int bits)
{
    if (m > t->cap_m) {
        uint32_t *a = realloc(t->start, m * sizeof *a);
        if (!a) return 0;
        t->start = a;
        t->cap_m = m;
    }
    /* T = the largest span: ceil(n / m) + 1 at most, and at most n */
    uint32_t T = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t lo = (uint64_t)i * n, hi = lo + n;
        uint32_t c = (uint32_t)((hi - 1) / m - lo / m + 1);
        if (c > T) T = c;
    }
    size_t cw = t->cap_w;
    if (!grow((void **)&t->ov, &cw, (size_t)m * T, sizeof *t->ov)) return 0;
    if (!grow((void **)&t->wq, &t->cap_w, (size_t)m * T, sizeof *t->wq)) return 0;
    t->T = T;
    memset(t->ov, 0, (size_t)m * T * sizeof *t->ov);
    for (uint32_t i = 0; i < m; i++) {
        uint64_t lo = (uint64_t)i * n, hi = lo + n;
        uint32_t j0 = (uint32_t)(lo / m), j1 = (uint32_t)((hi - 1) / m);
        uint32_t st = j0 + T <= n ? j0 : n - T;   /* keep all T taps inside the row */
        t->start[i] = st;
        uint32_t *w = t->ov + (size_t)i * T;
        for (uint32_t j = j0; j <= j1; j++) {
            uint64_t a = (uint64_t)j * m, b = a + m;
            w[j - st] = (uint32_t)((b < hi ? b : hi) - (a > lo ? a : lo));
        }
        /* cumulative rounding: weights sum to exactly 1 << bits, none wraps,
         * and the running error never exceeds half a unit */
        uint32_t *q = t->wq + (size_t)i * T;
        uint64_t cum = 0, prev = 0;
        for (uint32_t k = 0; k < T; k++) {
            cum += w[k];
            uint64_t r = ((cum << bits) + n / 2) / n;
            q[k] = (uint32_t)(r - prev);
            prev = r;
        }
    }
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

/* Resize with an explicit destination row stride (bytes). */
static int resize_into(resize_scratch *s, const uint8_t *src, uint32_t sw, uint32_t sh,
                       uint8_t *dst, size_t dst_stride, uint32_t dw, uint32_t dh, int ch,
                       sa1b_error *err)
{
    if (!taps_build(&s->x, sw, dw, 24) || !taps_build(&s->y, sh, dh, 16))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    const uint32_t ring_rows = s->y.T;
    const size_t row = (size_t)dw * ch;
    if (!grow((void **)&s->ring, &s->ring_cap, row * ring_rows, sizeof *s->ring))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    const size_t src_stride = (size_t)sw * ch;
    uint32_t next = 0;   /* next source row to filter horizontally */
    for (uint32_t y = 0; y < dh; y++) {
        uint32_t j0 = s->y.start[y], c = s->y.T;
        /* source rows arrive in increasing order; rows < j0 are no longer needed */
        if (next < j0) next = j0;
        while (next < j0 + c) {
            hfilter_any(src + (size_t)next * src_stride, &s->x, dw, ch,
                        s->ring + (size_t)(next % ring_rows) * row);
            next++;
        }
        const uint32_t *wv = s->y.wq + (size_t)y * c;   /* Q16, summing to 65536 */
        uint8_t *restrict d = dst + (size_t)y * dst_stride;
        for (size_t i0 = 0; i0 < row; i0 += VBLOCK) {
            /* fixed-size blocks: compilers vectorise these at -O2 */
            size_t nb = row - i0 < VBLOCK ? row - i0 : VBLOCK;
            uint32_t a[VBLOCK];
            const uint16_t *restrict r0 = s->ring + (size_t)(j0 % ring_rows) * row + i0;
            if (nb == VBLOCK) {
                for (size_t i = 0; i < VBLOCK; i++) a[i] = wv[0] * r0[i];
                for (uint32_t k = 1; k < c; k++) {
                    const uint16_t *restrict rk = s->ring + (size_t)((j0 + k) % ring_rows) * row + i0;
                    uint32_t wk = wv[k];
                    for (size_t i = 0; i < VBLOCK; i++) a[i] += wk * rk[i];
                }
                for (size_t i = 0; i < VBLOCK; i++) d[i0 + i] = (uint8_t)((a[i] + (1u << 23)) >> 24);
            } else {
                for (size_t i = 0; i < nb; i++) a[i] = wv[0] * r0[i];
                for (uint32_t k = 1; k < c; k++) {
                    const uint16_t *restrict rk = s->ring + (size_t)((j0 + k) % ring_rows) * row + i0;
                    for (size_t i = 0; i < nb; i++) a[i] += wv[k] * rk[i];
                }
                for (size_t i = 0; i < nb; i++) d[i0 + i] = (uint8_t)((a[i] + (1u << 23)) >> 24);
            }
        }
    }
    return SA1B_OK;
}

int sa1b_resize_area(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dw,
                     uint32_t dh, int channels, sa1b_error *err)
{
    if (!src || !dst) return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: NULL buffer");
    if (channels < 1 || channels > 4)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: %d channels, not 1..4", channels);
    if (!sw || !sh || !dw || !dh || sw > SA1B_IMAGE_MAX_SIDE || sh > SA1B_IMAGE_MAX_SIDE ||
        dw > SA1B_IMAGE_MAX_SIDE || dh > SA1B_IMAGE_MAX_SIDE)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "resize: bad size %ux%u -> %ux%u", sw, sh,
                              dw, dh);
    resize_scratch s = {0};
    int rc = resize_into(&s, src, sw, sh, dst, (size_t)dw * channels, dw, dh, channels, err);
    scratch_free(&s);
    return rc;
}

/* ---- TurboJPEG ------------------------------------------------------------ */

struct sa1b_imgctx {
    tjhandle dec, enc;
    uint8_t *buf;          /* decode scratch */
    size_t buf_cap;
    resize_scratch rs;
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

void sa1b_imgctx_free(sa1b_imgctx *c)
{
    if (!c) return;
    if (c->dec) tjDestroy(c->dec);
    if (c->enc) tjDestroy(c->enc);
    free(c->buf);
    scratch_free(&c->rs);
    free(c);
}

/* Reports the decompressor's error, then replaces the handle: TurboJPEG 2.1
 * leaves a handle whose header read failed half-way in a state where the
 * next tjDecompressHeader3 "succeeds" without reporting any size. */
static int tj_error(sa1b_imgctx *c, sa1b_error *err)
{
    const char *msg = tjGetErrorStr2(c->dec);
    if (!msg) msg = "unknown error";
    int rc;
    if (strstr(msg, "Premature end of JPEG file"))
        rc = sa1b_error_set(err, SA1B_ETRUNC, -1, "jpeg: truncated: %s", msg);
    else
        rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: %s", msg);
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

/* Decodes at the smallest scale k/8 (k <= 8) giving >= min_w x min_h, into c->buf. */
static int decode_scaled(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t w, uint32_t h,
                         uint32_t min_w, uint32_t min_h, uint32_t *ow, uint32_t *oh,
                         sa1b_error *err)
{
    int nsf = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&nsf);
    uint32_t bw = w, bh = h;   /* 1/1 unless a smaller scale fits */
    if (sf) {
        for (int i = 0; i < nsf; i++) {
            if (sf[i].num <= 0 || sf[i].denom <= 0 || sf[i].num > sf[i].denom) continue;
            uint32_t sw = (uint32_t)(((uint64_t)w * sf[i].num + sf[i].denom - 1) / sf[i].denom);
            uint32_t sh = (uint32_t)(((uint64_t)h * sf[i].num + sf[i].denom - 1) / sf[i].denom);
            if (sw >= min_w && sh >= min_h && (uint64_t)sw * sh < (uint64_t)bw * bh) {
                bw = sw;
                bh = sh;
            }
        }
    }
    size_t need = (size_t)bw * bh * 3;
    if (!grow((void **)&c->buf, &c->buf_cap, need, 1))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory for %ux%u", bw, bh);
    if (tjDecompress2(c->dec, jpg, (unsigned long)len, c->buf, (int)bw, 0, (int)bh, TJPF_RGB,
                      DEC_FLAGS) != 0)
        return tj_error(c, err);
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

int sa1b_jpeg_letterbox(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S, uint8_t *out,
                        sa1b_letterbox *lb, sa1b_error *err)
{
    uint32_t w = 0, h = 0, dw, dh;
    sa1b_letterbox g;
    if (!out) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    SA1B_FORWARD(header(c, jpg, len, &w, &h, err));
    SA1B_FORWARD(sa1b_letterbox_geometry(w, h, S, &g, err));
    SA1B_FORWARD(decode_scaled(c, jpg, len, w, h, g.new_w, g.new_h, &dw, &dh, err));
    const size_t stride = (size_t)S * 3;
    if (dw == g.new_w && dh == g.new_h) {
        for (uint32_t y = 0; y < dh; y++)
            memcpy(out + y * stride, c->buf + (size_t)y * dw * 3, (size_t)dw * 3);
    } else {
        SA1B_FORWARD(resize_into(&c->rs, c->buf, dw, dh, out, stride, g.new_w, g.new_h, 3, err));
    }
    /* zero padding: right of each image row, then the rows below */
    if (g.new_w < S)
        for (uint32_t y = 0; y < g.new_h; y++)
            memset(out + y * stride + (size_t)g.new_w * 3, 0, (size_t)(S - g.new_w) * 3);
    if (g.new_h < S) memset(out + (size_t)g.new_h * stride, 0, (size_t)(S - g.new_h) * stride);
    if (lb) *lb = g;
    return SA1B_OK;
}

int sa1b_jpeg_decode(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint8_t *rgb, uint32_t w,
                     uint32_t h, sa1b_error *err)
{
    uint32_t jw = 0, jh = 0;
    if (!rgb) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    SA1B_FORWARD(header(c, jpg, len, &jw, &jh, err));
    if (jw != w || jh != h)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "jpeg: image is %ux%u, expected %ux%u",
                              jw, jh, w, h);
    if (tjDecompress2(c->dec, jpg, (unsigned long)len, rgb, (int)w, 0, (int)h, TJPF_RGB,
                      DEC_FLAGS) != 0)
        return tj_error(c, err);
    return SA1B_OK;
}

int sa1b_jpeg_encode(sa1b_imgctx *c, const uint8_t *rgb, uint32_t w, uint32_t h, int quality,
                     uint8_t **out, size_t *len, sa1b_error *err)
{
    if (!c || !rgb || !out || !len) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    *out = NULL;
    *len = 0;
    if (quality < 1 || quality > 100)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: quality %d not in 1..100", quality);
    if (!w || !h || w > SA1B_IMAGE_MAX_SIDE || h > SA1B_IMAGE_MAX_SIDE ||
        (uint64_t)w * h > SA1B_IMAGE_MAX_PIXELS)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: cannot encode %ux%u", w, h);
    if (!c->enc && !(c->enc = tjInitCompress()))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: cannot create a TurboJPEG compressor");
    unsigned long cap = tjBufSize((int)w, (int)h, TJSAMP_420);
    if (cap == (unsigned long)-1) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: %s", tjGetErrorStr2(c->enc));
    uint8_t *buf = malloc(cap);
    if (!buf) return sa1b_error_set(err, SA1B_ENOMEM, -1, "jpeg: out of memory");
    unsigned long size = cap;
    if (tjCompress2(c->enc, rgb, (int)w, 0, (int)h, TJPF_RGB, &buf, &size, TJSAMP_420, quality,
                    TJFLAG_NOREALLOC) != 0) {
        free(buf);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: encode: %s", tjGetErrorStr2(c->enc));
    }
    uint8_t *shrunk = realloc(buf, size ? size : 1);
    *out = shrunk ? shrunk : buf;
    *len = size;
    return SA1B_OK;
}
