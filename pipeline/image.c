/*
 * image.c - TurboJPEG decode/encode, exact area-filter resize, letterbox.
 *
 * Implements: sa1b_image.h.  The resize is separable: per axis a table of
 * taps (first source index, count, weights = exact overlap / source span)
 * is built once per call; each source row is filtered horizontally once
 * into a small float ring buffer, and every destination row is the weighted
 * sum of the ring rows it covers (a loop the compiler vectorises).  The
 * letterbox reuses the context's scratch (decode buffer, taps, ring) so a
 * steady-state call allocates nothing.
 */
#include "sa1b_image.h"

#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

/* ---- area resize ---------------------------------------------------------- */

typedef struct axis_taps {
    uint32_t *start;   /* [m] first source index */
    uint32_t *count;   /* [m] number of taps */
    uint32_t *off;     /* [m] offset of the first weight in w */
    float *w;          /* [<= n + m] weights */
    size_t cap_m, cap_w;
    uint32_t max_count;
} axis_taps;

typedef struct resize_scratch {
    axis_taps x, y;
    float *ring;       /* [ring_rows][dw * ch] horizontally filtered rows */
    size_t ring_cap;   /* floats */
} resize_scratch;

static void taps_free(axis_taps *t)
{
    free(t->start);
    free(t->count);
    free(t->off);
    free(t->w);
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

/* Destination pixel i of m covers source [i*n/m, (i+1)*n/m); in units of
 * 1/m source pixel, [i*n, (i+1)*n), and source pixel j covers [j*m, (j+1)*m).
 * Weight = overlap / n, exact up to float rounding; weights of i sum to 1. */
static int taps_build(axis_taps *t, uint32_t n, uint32_t m)
{
    size_t cm = t->cap_m;
    if (m > t->cap_m) {
        uint32_t *a = realloc(t->start, m * sizeof *a);
        if (!a) return 0;
        t->start = a;
        a = realloc(t->count, m * sizeof *a);
        if (!a) return 0;
        t->count = a;
        a = realloc(t->off, m * sizeof *a);
        if (!a) return 0;
        t->off = a;
        cm = m;
    }
    t->cap_m = cm;
    if (!grow((void **)&t->w, &t->cap_w, (size_t)n + m, sizeof *t->w)) return 0;
    size_t k = 0;
    t->max_count = 0;
    const double inv = 1.0 / (double)n;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t lo = (uint64_t)i * n, hi = lo + n;
        uint32_t j0 = (uint32_t)(lo / m), j1 = (uint32_t)((hi - 1) / m);
        t->start[i] = j0;
        t->count[i] = j1 - j0 + 1;
        t->off[i] = (uint32_t)k;
        for (uint32_t j = j0; j <= j1; j++) {
            uint64_t a = (uint64_t)j * m, b = a + m;
            uint64_t ov = (b < hi ? b : hi) - (a > lo ? a : lo);
            t->w[k++] = (float)((double)ov * inv);
        }
        if (t->count[i] > t->max_count) t->max_count = t->count[i];
    }
    return 1;
}

static inline void hfilter(const uint8_t *src, const axis_taps *tx, uint32_t dw, int ch,
                           float *out)
{
    for (uint32_t i = 0; i < dw; i++) {
        const uint8_t *s = src + (size_t)tx->start[i] * ch;
        const float *w = tx->w + tx->off[i];
        uint32_t c = tx->count[i];
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (uint32_t k = 0; k < c; k++, s += ch) {
            float wk = w[k];
            a0 += wk * s[0];
            if (ch > 1) a1 += wk * s[1];
            if (ch > 2) a2 += wk * s[2];
            if (ch > 3) a3 += wk * s[3];
        }
        float *o = out + (size_t)i * ch;
        o[0] = a0;
        if (ch > 1) o[1] = a1;
        if (ch > 2) o[2] = a2;
        if (ch > 3) o[3] = a3;
    }
}

static void hfilter_any(const uint8_t *src, const axis_taps *tx, uint32_t dw, int ch, float *out)
{
    switch (ch) {   /* constant ch: each case is a specialised copy */
    case 1: hfilter(src, tx, dw, 1, out); break;
    case 2: hfilter(src, tx, dw, 2, out); break;
    case 3: hfilter(src, tx, dw, 3, out); break;
    default: hfilter(src, tx, dw, 4, out); break;
    }
}

static inline uint8_t clamp_round(float v)
{
    v += 0.5f;
    if (v <= 0.0f) return 0;
    if (v >= 255.0f) return 255;
    return (uint8_t)v;
}

/* Resize with an explicit destination row stride (bytes). */
static int resize_into(resize_scratch *s, const uint8_t *src, uint32_t sw, uint32_t sh,
                       uint8_t *dst, size_t dst_stride, uint32_t dw, uint32_t dh, int ch,
                       sa1b_error *err)
{
    if (!taps_build(&s->x, sw, dw) || !taps_build(&s->y, sh, dh))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    const uint32_t ring_rows = s->y.max_count;
    const size_t row = (size_t)dw * ch;
    if (!grow((void **)&s->ring, &s->ring_cap, row * ring_rows + row, sizeof *s->ring))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resize: out of memory");
    float *acc = s->ring + row * ring_rows;
    const size_t src_stride = (size_t)sw * ch;
    uint32_t next = 0;   /* next source row to filter horizontally */
    for (uint32_t y = 0; y < dh; y++) {
        uint32_t j0 = s->y.start[y], c = s->y.count[y];
        const float *wy = s->y.w + s->y.off[y];
        /* source rows arrive in increasing order; rows < j0 are no longer needed */
        if (next < j0) next = j0;
        while (next < j0 + c) {
            hfilter_any(src + (size_t)next * src_stride, &s->x, dw, ch,
                        s->ring + (size_t)(next % ring_rows) * row);
            next++;
        }
        const float *r0 = s->ring + (size_t)(j0 % ring_rows) * row;
        float w0 = wy[0];
        for (size_t i = 0; i < row; i++) acc[i] = w0 * r0[i];
        for (uint32_t k = 1; k < c; k++) {
            const float *rk = s->ring + (size_t)((j0 + k) % ring_rows) * row;
            float wk = wy[k];
            for (size_t i = 0; i < row; i++) acc[i] += wk * rk[i];
        }
        uint8_t *d = dst + (size_t)y * dst_stride;
        for (size_t i = 0; i < row; i++) d[i] = clamp_round(acc[i]);
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
    if (iw <= 0 || ih <= 0) return sa1b_error_set(err, SA1B_EFORMAT, -1, "jpeg: empty image");
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
    uint32_t w, h;
    if (!rgb || !out_w || !out_h) return sa1b_error_set(err, SA1B_EINVAL, -1, "jpeg: NULL argument");
    SA1B_FORWARD(header(c, jpg, len, &w, &h, err));
    SA1B_FORWARD(decode_scaled(c, jpg, len, w, h, min_w, min_h, out_w, out_h, err));
    *rgb = c->buf;
    return SA1B_OK;
}

int sa1b_jpeg_letterbox(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S, uint8_t *out,
                        sa1b_letterbox *lb, sa1b_error *err)
{
    uint32_t w, h, dw, dh;
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
    uint32_t jw, jh;
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
