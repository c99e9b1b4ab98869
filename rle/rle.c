/*
 * rle.c - the COCO run-length codec (see sa1b_rle.h).
 *
 * Implements: counts strings <-> runs with full validation of untrusted
 * input, masks <-> runs (row- and column-major), area, both bbox
 * conventions, IoU and merge on runs, and resampling straight from runs to
 * a small target grid.  Behaviour follows pycocotools' maskApi.c on every
 * valid input (the string code, the bbox quirks, merge output); the code is
 * our own and uses 64-bit arithmetic wherever a product or a sum could
 * exceed 32 bits.  Speed comes from never touching background pixels one
 * by one: decoding fills with memset, row-major output only writes
 * foreground pixels, resampling walks the runs of the sampled columns.
 */
#include "sa1b_rle.h"
#include "rle_internal.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- storage -------------------------------------------------------------- */

void sa1b_rle_free(sa1b_rle *r)
{
    if (!r) return;
    free(r->cnts);
    r->h = r->w = 0;
    r->n = 0;
    r->cnts = NULL;
    r->cap = 0;
}

static int rle_reserve(sa1b_rle *r, size_t n, sa1b_error *err)
{
    if (n <= r->cap && r->cnts) return SA1B_OK;
    size_t cap = n ? n : 1;
    if (cap > SIZE_MAX / sizeof(uint32_t))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "rle: %zu runs do not fit in memory", n);
    uint32_t *p = realloc(r->cnts, cap * sizeof(uint32_t));
    if (!p) return sa1b_error_set(err, SA1B_ENOMEM, -1, "rle: cannot allocate %zu runs", n);
    r->cnts = p;
    r->cap = cap;
    return SA1B_OK;
}

/* rle_reserve for storage whose contents need not survive (the string
 * decoder overwrites it): no copy when it grows, and it grows by half
 * again at least, so that a buffer reused for masks of varying sizes
 * settles after a few calls instead of growing (and faulting in fresh
 * pages) whenever a mask is larger than every one before. */
static int rle_reserve_fresh(sa1b_rle *r, size_t n, sa1b_error *err)
{
    if (n <= r->cap && r->cnts) return SA1B_OK;
    size_t cap = n ? n : 1;
    if (r->cap <= SIZE_MAX / sizeof(uint32_t) / 2 && cap < r->cap + r->cap / 2)
        cap = r->cap + r->cap / 2;
    if (cap > SIZE_MAX / sizeof(uint32_t))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "rle: %zu runs do not fit in memory", n);
    free(r->cnts);
    r->cnts = malloc(cap * sizeof(uint32_t));
    r->cap = r->cnts ? cap : 0;
    if (!r->cnts) return sa1b_error_set(err, SA1B_ENOMEM, -1, "rle: cannot allocate %zu runs", n);
    return SA1B_OK;
}

static int check_size(uint32_t h, uint32_t w, sa1b_error *err)
{
    if ((uint64_t)h * w > SA1B_RLE_MAX_PIXELS)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "mask size %ux%u: more than %llu pixels", h,
                              w, (unsigned long long)SA1B_RLE_MAX_PIXELS);
    return SA1B_OK;
}

/* Run sum of r (64-bit: cannot overflow for any n that fits in memory
 * since each run is < 2^32 and n < 2^61). */
static uint64_t run_sum(const uint32_t *c, size_t n)
{
    uint64_t s = 0;
    size_t i = 0;
#ifdef __SSE2__
    /* every call of IoU and merge validates its inputs with this: four
     * runs a step, widened to 64 bits (3.5x the scalar loop) */
    __m128i acc = _mm_setzero_si128(), zero = _mm_setzero_si128();
    for (; i + 4 <= n; i += 4) {
        __m128i x = _mm_loadu_si128((const __m128i *)(c + i));
        acc = _mm_add_epi64(acc, _mm_unpacklo_epi32(x, zero));
        acc = _mm_add_epi64(acc, _mm_unpackhi_epi32(x, zero));
    }
    uint64_t lanes[2];
    _mm_storeu_si128((__m128i *)lanes, acc);
    s = lanes[0] + lanes[1];
#endif
    for (; i < n; i++) s += c[i];
    return s;
}

/* A consistent rle: runs present when the mask has pixels, sum == h*w. */
static int check_rle(const sa1b_rle *r, const char *what, sa1b_error *err)
{
    if (!r) return sa1b_error_set(err, SA1B_EINVAL, -1, "%s: null rle", what);
    uint64_t hw = (uint64_t)r->h * r->w;
    if (r->n && !r->cnts) return sa1b_error_set(err, SA1B_EINVAL, -1, "%s: runs missing", what);
    uint64_t s = run_sum(r->cnts, r->n);
    if (s != hw)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "%s: run sum %llu != %ux%u", what,
                              (unsigned long long)s, r->h, r->w);
    return SA1B_OK;
}

int sa1b_rle_set_runs(sa1b_rle *r, uint32_t h, uint32_t w, const uint32_t *cnts, size_t n,
                      sa1b_error *err)
{
    if (!r || (n && !cnts)) return sa1b_error_set(err, SA1B_EINVAL, -1, "rle: null argument");
    SA1B_FORWARD(check_size(h, w, err));
    uint64_t s = run_sum(cnts, n);
    if (s != (uint64_t)h * w)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "run sum %llu != %ux%u",
                              (unsigned long long)s, h, w);
    SA1B_FORWARD(rle_reserve(r, n, err));
    if (n) memmove(r->cnts, cnts, n * sizeof *cnts);
    r->h = h;
    r->w = w;
    r->n = n;
    return SA1B_OK;
}

/* ---- strings ---------------------------------------------------------------- */

#define RLE_MAX_GROUPS 7 /* 35 bits: any delta of two 32-bit runs */

/* The careful decoder: every check at the run it concerns, the first
 * problem reported.  It runs after from_string's fast loop gave up on a
 * string (a problem somewhere, or a form the fast loop leaves alone), from
 * the start again, on storage already reserved; on success it fills r. */
static int from_string_slow(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                            sa1b_error *err)
{
    uint64_t hw = (uint64_t)h * w;
    uint32_t *c = r->cnts;
    size_t m = 0, p = 0;
    uint64_t sum = 0;
    while (p < len) {
        size_t start = p;
        int64_t x = 0;
        int k = 0, more = 1;
        unsigned g0 = (unsigned)(unsigned char)s[p] - 48u;
        if (g0 < 32) { /* the common case: a one-character value */
            x = (g0 & 0x10) ? (int64_t)g0 - 32 : (int64_t)g0;
            p++;
            more = 0;
        }
        while (more) {
            if (p >= len)
                return sa1b_error_set(err, SA1B_ETRUNC, (int64_t)start,
                                      "counts: string ends inside run %zu (started at offset %zu)",
                                      m, start);
            unsigned g = (unsigned)(unsigned char)s[p] - 48u;
            if (g > 63) {
                unsigned char ch = (unsigned char)s[p];
                if (ch >= 32 && ch < 127)
                    return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)p,
                                          "counts: bad character '%c' at offset %zu", ch, p);
                return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)p,
                                      "counts: bad byte 0x%02x at offset %zu", ch, p);
            }
            if (k == RLE_MAX_GROUPS)
                return sa1b_error_set(err, SA1B_ERANGE, (int64_t)m,
                                      "counts: run %zu at offset %zu has more than %d groups "
                                      "(beyond 32 bits)", m, start, RLE_MAX_GROUPS);
            x |= (int64_t)(g & 0x1f) << (5 * k);
            more = g & 0x20;
            p++;
            k++;
            if (!more && (g & 0x10)) x -= (int64_t)1 << (5 * k); /* sign extension */
        }
        if (m > 2) x += c[m - 2];
        if (x < 0)
            return sa1b_error_set(err, SA1B_ERANGE, (int64_t)m,
                                  "counts: run %zu at offset %zu is negative (%lld)", m, start,
                                  (long long)x);
        if (x > (int64_t)UINT32_MAX)
            return sa1b_error_set(err, SA1B_ERANGE, (int64_t)m,
                                  "counts: run %zu at offset %zu is beyond 32 bits (%lld)", m,
                                  start, (long long)x);
        sum += (uint64_t)x;
        if (sum > hw)
            return sa1b_error_set(err, SA1B_EMISMATCH, (int64_t)m,
                                  "counts: run sum exceeds %ux%u at run %zu (offset %zu)", h, w,
                                  m, start);
        c[m++] = (uint32_t)x;
    }
    if (sum != hw)
        return sa1b_error_set(err, SA1B_EMISMATCH, (int64_t)m, "run sum %llu != %ux%u",
                              (unsigned long long)sum, h, w);
    r->h = h;
    r->w = w;
    r->n = m;
    return SA1B_OK;
}


/* One value of the string at *pu (before *e), as a 64-bit signed number:
 * one, two, three or up to RLE_MAX_GROUPS characters.  0 on success (*pu moves
 * past it); 1 when the value is not well formed (a bad character, the end
 * of the string inside it, too many groups): the caller hands the string
 * to from_string_slow, which says what is wrong. */
static inline int fast_value(const unsigned char **pu, const unsigned char *e, int64_t *v)
{
    const unsigned char *u = *pu;
    unsigned g = (unsigned)u[0] - 48u;
    if (g < 32) { /* the common case: one character, sign in bit 4 */
        *v = (int64_t)(g ^ 0x10) - 0x10;
        *pu = u + 1;
        return 0;
    }
    if (g > 63 || e - u < 2) return 1;
    unsigned g1 = (unsigned)u[1] - 48u;
    if (g1 < 32) { /* two characters, sign in bit 9 */
        int64_t x = (int64_t)((g & 0x1f) | (g1 << 5));
        *v = (x ^ 0x200) - 0x200;
        *pu = u + 2;
        return 0;
    }
    if (g1 < 64 && e - u >= 3) {
        unsigned g2 = (unsigned)u[2] - 48u;
        if (g2 < 32) { /* three characters, sign in bit 14 */
            int64_t x = (int64_t)((g & 0x1f) | ((g1 & 0x1f) << 5) | (g2 << 10));
            *v = (x ^ 0x4000) - 0x4000;
            *pu = u + 3;
            return 0;
        }
    }
    uint64_t x = g & 0x1f;
    int k = 1;
    u++;
    for (;;) {
        if (u >= e) return 1;
        g = (unsigned)*u++ - 48u;
        if (g > 63) return 1;
        x |= (uint64_t)(g & 0x1f) << (5 * k);
        k++;
        if (!(g & 0x20)) break;
        if (k == RLE_MAX_GROUPS) return 1;
    }
    int64_t sb = (int64_t)1 << (5 * k - 1); /* the sign bit of k groups */
    *v = ((int64_t)x ^ sb) - sb;
    *pu = u;
    return 0;
}

/* from_string with the foreground pixel count (*area, may be NULL) summed
 * on the way.  The fast loop checks nothing per run but what keeps it in
 * bounds and the values in range; when anything is off (a value not well
 * formed, out of 0..2^32-1, or a run sum != h*w at the end) the careful
 * decoder runs from the start and reports the first problem, so the
 * errors are those it always gave.  A string the fast loop takes is one
 * the careful decoder takes with the same runs. */
static int from_string_area(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                            uint64_t *area, sa1b_error *err)
{
    if (area) *area = 0;
    if (!r || (len && !s)) return sa1b_error_set(err, SA1B_EINVAL, -1, "rle: null argument");
    r->h = r->w = 0;
    r->n = 0;
    SA1B_FORWARD(check_size(h, w, err));
    uint64_t hw = (uint64_t)h * w;

    /* every run ends with a character without 0x20: at most len runs; for
     * long strings count them first rather than reserve 4 bytes a char */
    size_t nruns = len;
    if (len > ((size_t)1 << 20)) {
        nruns = 0;
        for (size_t p = 0; p < len; p++) nruns += !(((unsigned char)s[p] - 48) & 0x20);
    }
    SA1B_FORWARD(rle_reserve_fresh(r, nruns, err));

    /* the fast loop; it stores at most one run per character without
     * 0x20, so within the nruns reserved */
    uint32_t *c = r->cnts;
    const unsigned char *u = (const unsigned char *)s, *e = u + len;
    size_t m = 0;
    uint64_t sum = 0, fg = 0;
    int64_t x;
    for (; m < 3 && u < e; m++) { /* the first three runs are stored as they are */
        if (fast_value(&u, e, &x) || (uint64_t)x > UINT32_MAX) goto slow;
        sum += (uint64_t)x;
        if (m & 1) fg += (uint64_t)x;
        c[m] = (uint32_t)x;
    }
    if (u < e) { /* m == 3 */
        uint64_t a = c[m - 2], b = c[m - 1]; /* runs m - 2 and m - 1 */
        for (;;) { /* later ones as the difference to run m - 2, by pairs */
            /* foreground (odd m) */
            if (fast_value(&u, e, &x)) goto slow;
            uint64_t v = (uint64_t)x + a; /* two's complement: x + a < 0 wraps high */
            if (v > UINT32_MAX) goto slow;
            sum += v;
            fg += v;
            c[m++] = (uint32_t)v;
            a = v;
            if (u >= e) break;
            /* background */
            if (fast_value(&u, e, &x)) goto slow;
            v = (uint64_t)x + b;
            if (v > UINT32_MAX) goto slow;
            sum += v;
            c[m++] = (uint32_t)v;
            b = v;
            if (u >= e) break;
        }
    }
    if (sum != hw) goto slow;
    r->h = h;
    r->w = w;
    r->n = m;
    if (area) *area = fg;
    return SA1B_OK;
slow:
    SA1B_FORWARD(from_string_slow(r, h, w, s, len, err));
    if (area) *area = sa1b_rle_area(r);
    return SA1B_OK;
}

int sa1b_rle_from_string(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                         sa1b_error *err)
{
    return from_string_area(r, h, w, s, len, NULL, err);
}

int rle_from_string_area(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                         uint64_t *area, sa1b_error *err)
{
    return from_string_area(r, h, w, s, len, area, err);
}

size_t sa1b_rle_string_bound(size_t n)
{
    if (n >= (SIZE_MAX - 1) / RLE_MAX_GROUPS) return SIZE_MAX;
    return n * RLE_MAX_GROUPS + 1;
}

/* Writes the string into buf, which has room for sa1b_rle_string_bound(n). */
/* 5-bit groups of x in COCO's string coding: the fewest whose two's
 * complement holds x (its bits and its sign). */
static inline int str_groups(int64_t x)
{
    uint64_t u = x < 0 ? ~(uint64_t)x : (uint64_t)x;
    int bits = (u ? 64 - __builtin_clzll(u) : 0) + 1;
    return (bits + 4) / 5;
}

static size_t write_string(const uint32_t *c, size_t n, char *buf)
{
    char *o = buf;
    for (size_t i = 0; i < n; i++) {
        int64_t x = c[i];
        if (i > 2) x -= c[i - 2];
        /* the groups low first, each but the last with the continuation bit
         * (as maskApi's loop writes them, without its test per group) */
        int k = str_groups(x);
        if (k == 1) {
            *o++ = (char)((x & 0x1f) + 48);
            continue;
        }
        for (int j = 0; j < k - 1; j++) *o++ = (char)((((x >> (5 * j)) & 0x1f) | 0x20) + 48);
        *o++ = (char)(((x >> (5 * (k - 1))) & 0x1f) + 48); /* arithmetic shift: gcc/clang everywhere we build */
    }
    return (size_t)(o - buf);
}

/* Exact string length of runs c. */
static size_t string_len(const uint32_t *c, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t x = c[i];
        if (i > 2) x -= c[i - 2];
        len += (size_t)str_groups(x);
    }
    return len;
}

int sa1b_rle_to_string(const sa1b_rle *r, char **out, size_t *len, sa1b_error *err)
{
    if (!r || !out || (r->n && !r->cnts))
        return sa1b_error_set(err, SA1B_EINVAL, -1, "rle: null argument");
    size_t cap = sa1b_rle_string_bound(r->n);
    if (cap == SIZE_MAX || r->n > 4096) cap = string_len(r->cnts, r->n) + 1;
    char *buf = malloc(cap);
    if (!buf) return sa1b_error_set(err, SA1B_ENOMEM, -1, "rle: cannot allocate %zu bytes", cap);
    size_t n = write_string(r->cnts, r->n, buf);
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return SA1B_OK;
}

size_t sa1b_rle_to_buffer(const sa1b_rle *r, char *buf, size_t cap)
{
    if (!r || !buf || (r->n && !r->cnts)) return 0;
    size_t need = sa1b_rle_string_bound(r->n);
    if (cap < need) {
        need = string_len(r->cnts, r->n);
        if (cap < need) return 0;
    }
    size_t n = write_string(r->cnts, r->n, buf);
    if (n < cap) buf[n] = '\0';
    return n;
}

/* ---- masks ------------------------------------------------------------------ */

/* Index of the first byte of p[0..n) whose truth (nonzero) differs from v
 * (0 or 1), or n.  Any nonzero byte is foreground, so the mask is read as
 * it is, without a normalised copy.  With SSE2 (every x86-64): 64 bytes a
 * step while the run goes on (their OR is zero for a background run, their
 * minimum nonzero for a foreground one), then the first change of a
 * 16-byte block from the mask of its zero bytes. */
static size_t find_change(const uint8_t *p, size_t n, uint8_t v)
{
    size_t i = 0;
#ifdef __SSE2__
    const __m128i zero = _mm_setzero_si128();
    const unsigned same = v ? 0u : 0xFFFFu; /* zero-byte mask of an unbroken run */
    while (i + 64 <= n) {
        __m128i a = _mm_loadu_si128((const __m128i *)(p + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(p + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(p + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(p + i + 48));
        __m128i x = v ? _mm_min_epu8(_mm_min_epu8(a, b), _mm_min_epu8(c, d))
                      : _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
        if ((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, zero)) != same) break;
        i += 64;
    }
    while (i + 16 <= n) {
        __m128i a = _mm_loadu_si128((const __m128i *)(p + i));
        unsigned diff = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(a, zero)) ^ same;
        if (diff) return i + (size_t)__builtin_ctz(diff);
        i += 16;
    }
#endif
    while (i < n && (p[i] != 0) == v) i++;
    return i;
}

/* Run builder over a column-major stream of bytes (nonzero: foreground). */
typedef struct enc_state {
    sa1b_rle *r;
    size_t n;      /* runs finished */
    uint8_t v;     /* value of the run being counted */
    uint64_t cur;  /* its length so far */
    int rc;
    sa1b_error *err;
} enc_state;

static void enc_push(enc_state *st)
{
    if (st->rc) return;
    if (st->n == st->r->cap) {
        size_t want = st->r->cap < 512 ? 1024 : 2 * st->r->cap;
        int rc = rle_reserve(st->r, want, st->err);
        if (rc) {
            st->rc = rc;
            return;
        }
    }
    st->r->cnts[st->n++] = (uint32_t)st->cur;
}

static void enc_feed(enc_state *st, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = find_change(p + i, n - i, st->v);
        st->cur += k;
        i += k;
        if (i < n) {
            enc_push(st);
            st->cur = 0;
            st->v ^= 1;
        }
    }
}

/* Row-major encoding without a transpose.  A run boundary is a pixel whose
 * value differs from the one before it in column-major order: the pixel
 * above it (y > 0), or the bottom pixel of the previous column (y = 0).
 * Comparing each row with the one above finds the first kind with 8-byte
 * words (equal words hold no boundary, and most of a mask is flat); the
 * boundaries, found in row order, are then put in column order with a
 * stable counting sort, and consecutive boundary positions give the runs. */
typedef struct enc_event {
    uint32_t x, y;
} enc_event;

typedef struct enc_events {
    enc_event *e;
    size_t n, cap;
} enc_events;

static int ev_push(enc_events *ev, uint32_t x, uint32_t y)
{
    if (ev->n == ev->cap) {
        size_t cap = ev->cap ? 2 * ev->cap : 1024;
        enc_event *p = realloc(ev->e, cap * sizeof *p);
        if (!p) return -1;
        ev->e = p;
        ev->cap = cap;
    }
    ev->e[ev->n].x = x;
    ev->e[ev->n].y = y;
    ev->n++;
    return 0;
}

static int encode_rows(sa1b_rle *r, const uint8_t *mask, uint32_t h, uint32_t w,
                       sa1b_error *err)
{
    enc_events ev = {NULL, 0, 0};
    size_t *start = NULL;
    enc_event *sorted = NULL;
    int rc = SA1B_OK;
    /* y = 0: against the bottom of the previous column */
    for (uint32_t x = 0; x < w; x++) {
        int prev = x ? mask[(uint64_t)(h - 1) * w + x - 1] != 0 : 0;
        if ((mask[x] != 0) != prev && ev_push(&ev, x, 0)) goto nomem;
    }
    for (uint32_t y = 1; y < h; y++) {
        const uint8_t *a = mask + (uint64_t)(y - 1) * w, *b = a + w;
        uint32_t x = 0;
        for (;;) {
            while (x + 8 <= w) {
                uint64_t wa, wb;
                memcpy(&wa, a + x, 8);
                memcpy(&wb, b + x, 8);
                if (wa != wb) break;
                x += 8;
            }
            if (x >= w) break;
            uint32_t end = x + 8 <= w ? x + 8 : w;
            for (; x < end; x++)
                if ((a[x] != 0) != (b[x] != 0) && ev_push(&ev, x, y)) goto nomem;
        }
    }
    /* stable counting sort by column */
    start = calloc((size_t)w + 1, sizeof *start);
    sorted = malloc((ev.n ? ev.n : 1) * sizeof *sorted);
    if (!start || !sorted) goto nomem;
    for (size_t i = 0; i < ev.n; i++) start[ev.e[i].x + 1]++;
    for (uint32_t x = 0; x < w; x++) start[x + 1] += start[x];
    for (size_t i = 0; i < ev.n; i++) sorted[start[ev.e[i].x]++] = ev.e[i];
    if ((rc = rle_reserve(r, ev.n + 1, err)) != SA1B_OK) goto out;
    uint64_t prev = 0;
    for (size_t i = 0; i < ev.n; i++) {
        uint64_t p = (uint64_t)sorted[i].x * h + sorted[i].y;
        r->cnts[i] = (uint32_t)(p - prev);
        prev = p;
    }
    r->cnts[ev.n] = (uint32_t)((uint64_t)h * w - prev);
    r->n = ev.n + 1;
    goto out;
nomem:
    rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "encode: out of memory");
out:
    free(ev.e);
    free(start);
    free(sorted);
    return rc;
}

int sa1b_rle_encode(sa1b_rle *r, const uint8_t *mask, uint32_t h, uint32_t w, int col_major,
                    sa1b_error *err)
{
    if (!r) return sa1b_error_set(err, SA1B_EINVAL, -1, "rle: null argument");
    SA1B_FORWARD(check_size(h, w, err));
    uint64_t hw = (uint64_t)h * w;
    if (hw && !mask) return sa1b_error_set(err, SA1B_EINVAL, -1, "rle: null mask");
    if (h == 1 || w == 1) col_major = 1; /* both layouts coincide */
    int rc;
    if (!col_major && hw) {
        rc = encode_rows(r, mask, h, w, err);
    } else {
        rc = rle_reserve(r, r->cap ? r->cap : 64, err);
        enc_state st = {r, 0, 0, 0, SA1B_OK, err};
        if (!rc && hw) enc_feed(&st, mask, (size_t)hw);
        if (!rc) {
            enc_push(&st);
            rc = st.rc;
            r->n = st.n;
        }
    }
    if (rc) {
        r->h = r->w = 0;
        r->n = 0;
        return rc;
    }
    r->h = h;
    r->w = w;
    return SA1B_OK;
}

void sa1b_rle_decode(const sa1b_rle *r, uint8_t *mask, int col_major)
{
    if (!r || !mask) return;
    uint32_t h = r->h, w = r->w;
    uint64_t hw = (uint64_t)h * w;
    if (!hw) return;
    if (h == 1 || w == 1) col_major = 1;
    if (col_major) {
        uint64_t pos = 0;
        for (size_t i = 0; i < r->n && pos < hw; i++) {
            uint64_t c = r->cnts[i];
            if (c > hw - pos) c = hw - pos;
            memset(mask + pos, (int)(i & 1), (size_t)c);
            pos += c;
        }
        if (pos < hw) memset(mask + pos, 0, (size_t)(hw - pos));
        return;
    }
    memset(mask, 0, (size_t)hw);
    uint64_t pos = 0;
    for (size_t i = 0; i < r->n && pos < hw; i++) {
        uint64_t c = r->cnts[i];
        if (c > hw - pos) c = hw - pos;
        if (i & 1) {
            /* foreground run: column by column, strided writes */
            uint64_t p = pos, end = pos + c;
            while (p < end) {
                uint32_t x = (uint32_t)(p / h);
                uint32_t y = (uint32_t)(p - (uint64_t)x * h);
                uint64_t colend = (uint64_t)(x + 1) * h;
                uint32_t y1 = (uint32_t)((end < colend ? end : colend) - (uint64_t)x * h);
                uint8_t *o = mask + (uint64_t)y * w + x;
                for (uint32_t k = y; k < y1; k++, o += w) *o = 1;
                p = (uint64_t)x * h + y1;
            }
        }
        pos += c;
    }
}

/* ---- measures ----------------------------------------------------------------- */

uint64_t sa1b_rle_area(const sa1b_rle *r)
{
    if (!r || !r->cnts) return 0;
    uint64_t a = 0;
    for (size_t i = 1; i < r->n; i += 2) a += r->cnts[i];
    return a;
}

/* Moves the bbox walk's position cc (uint32, wrapping as pycocotools'
 * does) on by c pixels, keeping its column *cx = cc / h and row
 * *cy = cc % h without a division per run. */
static inline void bbox_step(uint32_t *cc, uint32_t *cx, uint32_t *cy, uint32_t c, uint32_t h)
{
    uint32_t nc = *cc + c;
    if (nc < *cc) { /* wrapped past 2^32 */
        *cx = nc / h;
        *cy = nc % h;
    } else {
        uint32_t y = *cy + c; /* <= nc: no overflow */
        if (y >= h) {
            y -= h;
            (*cx)++;
            if (y >= h) {
                *cx += y / h;
                y %= h;
            }
        }
        *cy = y;
    }
    *cc = nc;
}

/* pycocotools' rleToBbox, 32-bit unsigned arithmetic included (its quirks
 * on zero-length runs are kept); a 0-row mask gives zeros instead of a
 * division by zero.  Without a division per run: the running sum cc is
 * kept as column cx and row cy (cc = cx h + cy, cy < h), stepped forward
 * by each run (a run rarely crosses more than one column; one that does
 * divides).  The point of run j is cc itself (j even) or cc - 1 (j odd);
 * the uint32 wraps of the original (cc - 1 at cc = 0, a sum past 2^32 on
 * runs that are not valid) divide as it does. */
void sa1b_rle_bbox(const sa1b_rle *r, double bbox[4])
{
    bbox[0] = bbox[1] = bbox[2] = bbox[3] = 0;
    if (!r || !r->cnts) return;
    const uint32_t h = r->h, w = r->w;
    const size_t m = (r->n / 2) * 2;
    if (m == 0 || h == 0) return;
    const uint32_t *cn = r->cnts;
    uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, cx = 0, cy = 0, xp = 0;
    for (size_t j = 0; j < m; j += 2) {
        /* even j: the point is cc after the run */
        bbox_step(&cc, &cx, &cy, cn[j], h);
        xp = cx;
        if (cx < xs) xs = cx;
        if (cx > xe) xe = cx;
        if (cy < ys) ys = cy;
        if (cy > ye) ye = cy;
        /* odd j: the point is cc - 1 after the run */
        bbox_step(&cc, &cx, &cy, cn[j + 1], h);
        uint32_t x, y;
        if (cy) {
            x = cx;
            y = cy - 1;
        } else if (cc) {
            x = cx - 1;
            y = h - 1;
        } else { /* cc - 1 wraps to 2^32 - 1 */
            x = UINT32_MAX / h;
            y = UINT32_MAX % h;
        }
        if (xp < x) {
            ys = 0;
            ye = h - 1;
        }
        if (x < xs) xs = x;
        if (x > xe) xe = x;
        if (y < ys) ys = y;
        if (y > ye) ye = y;
    }
    bbox[0] = xs;
    bbox[2] = (double)(uint32_t)(xe - xs + 1);
    bbox[1] = ys;
    bbox[3] = (double)(uint32_t)(ye - ys + 1);
}

/* The tight box of the foreground pixels as SA-1B stores it: [xmin, ymin,
 * xmax - xmin, ymax - ymin]. */
void sa1b_rle_bbox_sa1b(const sa1b_rle *r, double bbox[4])
{
    bbox[0] = bbox[1] = bbox[2] = bbox[3] = 0;
    if (!r || !r->cnts || r->h == 0) return;
    uint64_t h = r->h, pos = 0;
    uint64_t xmin = UINT64_MAX, xmax = 0, ymin = UINT64_MAX, ymax = 0;
    for (size_t j = 0; j < r->n; j++) {
        uint64_t c = r->cnts[j];
        if ((j & 1) && c) {
            uint64_t s = pos, e = pos + c - 1;
            uint64_t x0 = s / h, y0 = s % h, x1 = e / h, y1 = e % h;
            if (x0 < xmin) xmin = x0;
            if (x1 > xmax) xmax = x1;
            if (x0 != x1) {
                y0 = 0;
                y1 = h - 1;
            }
            if (y0 < ymin) ymin = y0;
            if (y1 > ymax) ymax = y1;
        }
        pos += c;
    }
    if (xmin == UINT64_MAX) return;
    bbox[0] = (double)xmin;
    bbox[1] = (double)ymin;
    bbox[2] = (double)(xmax - xmin);
    bbox[3] = (double)(ymax - ymin);
}

/* Walks two run lists of one total length in step, one segment of constant
 * values (va, vb) of length c at a time, for BODY (a statement using va,
 * vb and c).  A run that ends moves its list to the next run; a
 * zero-length run gives a segment of length 0 (BODY must accept c = 0;
 * it is a macro argument: no commas outside parentheses).
 * The walk stops when either list is used up (the other has only
 * zero-length runs left, the totals being equal).  A macro, so that the
 * loop is one tight loop in each caller. */
#define PAIR_WALK(A, B, BODY)                                                  \
    do {                                                                       \
        const uint32_t *pw_a = (A)->cnts, *pw_b = (B)->cnts;                   \
        size_t pw_na = (A)->n, pw_nb = (B)->n, pw_ia = 0, pw_ib = 0;           \
        uint32_t pw_ra = pw_na ? pw_a[0] : 0, pw_rb = pw_nb ? pw_b[0] : 0;     \
        unsigned va = 0, vb = 0;                                               \
        if (pw_na && pw_nb)                                                    \
            for (;;) {                                                         \
                uint32_t c = pw_ra < pw_rb ? pw_ra : pw_rb;                    \
                BODY;                                                          \
                pw_ra -= c;                                                    \
                pw_rb -= c;                                                    \
                if (!pw_ra) {                                                  \
                    if (++pw_ia >= pw_na) break;                               \
                    pw_ra = pw_a[pw_ia];                                       \
                    va ^= 1;                                                   \
                }                                                              \
                if (!pw_rb) {                                                  \
                    if (++pw_ib >= pw_nb) break;                               \
                    pw_rb = pw_b[pw_ib];                                       \
                    vb ^= 1;                                                   \
                }                                                              \
            }                                                                  \
    } while (0)

int sa1b_rle_iou(const sa1b_rle *dt, const sa1b_rle *gt, int iscrowd, double *iou,
                 sa1b_error *err)
{
    if (!iou) return sa1b_error_set(err, SA1B_EINVAL, -1, "iou: null argument");
    *iou = 0;
    SA1B_FORWARD(check_rle(dt, "iou", err));
    SA1B_FORWARD(check_rle(gt, "iou", err));
    if (dt->h != gt->h || dt->w != gt->w)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "iou: mask sizes %ux%u and %ux%u differ",
                              dt->h, dt->w, gt->h, gt->w);
    uint64_t inter = 0, uni = 0;
    PAIR_WALK(dt, gt, {
        uni += (va | vb) ? c : 0;
        inter += (va & vb) ? c : 0;
    });
    if (inter == 0) return SA1B_OK;
    uint64_t den = iscrowd ? sa1b_rle_area(dt) : uni;
    *iou = (double)inter / (double)den;
    return SA1B_OK;
}

/* Canonical merge of two run lists of one total into out (room for
 * na + nb + 1 runs); returns the run count. */
static size_t merge2(uint32_t *out, const sa1b_rle *A, const sa1b_rle *B, int intersect)
{
    size_t m = 0;
    unsigned cur = 0;
    uint64_t len = 0;
    PAIR_WALK(A, B, {
        unsigned v = intersect ? (va & vb) : (va | vb);
        if (v == cur) {
            len += c;
        } else if (c) { /* a zero-length segment changes nothing */
            out[m++] = (uint32_t)len;
            len = c;
            cur = v;
        }
    });
    out[m++] = (uint32_t)len;
    return m;
}

int sa1b_rle_merge(sa1b_rle *out, const sa1b_rle *const *in, size_t n, int intersect,
                   sa1b_error *err)
{
    if (!out || !in || n == 0)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "merge: needs at least one mask");
    for (size_t i = 0; i < n; i++) {
        SA1B_FORWARD(check_rle(in[i], "merge", err));
        if (in[i] == out) return sa1b_error_set(err, SA1B_EINVAL, -1, "merge: output aliases input %zu", i);
        if (in[i]->h != in[0]->h || in[i]->w != in[0]->w)
            return sa1b_error_set(err, SA1B_EMISMATCH, (int64_t)i,
                                  "merge: mask %zu is %ux%u, mask 0 is %ux%u", i, in[i]->h,
                                  in[i]->w, in[0]->h, in[0]->w);
    }
    if (n == 1) return sa1b_rle_set_runs(out, in[0]->h, in[0]->w, in[0]->cnts, in[0]->n, err);
    /* the result of merging has at most (sum of run counts) + 1 runs */
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (in[i]->n > SIZE_MAX / 4 - total)
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "merge: too many runs");
        total += in[i]->n;
    }
    /* the last merge writes into out itself (it aliases no input): two
     * masks need no other buffer, more ping-pong between two */
    uint32_t h = in[0]->h, w = in[0]->w;
    int rc = rle_reserve_fresh(out, total, err);
    if (rc) {
        out->h = out->w = 0;
        out->n = 0;
        return rc;
    }
    sa1b_rle acc = {h, w, 0, NULL, 0};
    const sa1b_rle *first = in[0];
    uint32_t *t0 = NULL, *t1 = NULL;
    if (n > 2) {
        t0 = malloc(total * sizeof *t0);
        t1 = malloc(total * sizeof *t1);
        if (!t0 || !t1) {
            free(t0);
            free(t1);
            out->h = out->w = 0;
            out->n = 0;
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "merge: cannot allocate %zu runs", total);
        }
        acc.cnts = t0;
        acc.n = merge2(t0, in[0], in[1], intersect);
        for (size_t i = 2; i + 1 < n; i++) {
            size_t m = merge2(t1, &acc, in[i], intersect);
            uint32_t *sw = t0;
            t0 = t1;
            t1 = sw;
            acc.cnts = t0;
            acc.n = m;
        }
        first = &acc;
    }
    out->n = merge2(out->cnts, first, in[n - 1], intersect);
    out->h = h;
    out->w = w;
    free(t0);
    free(t1);
    return SA1B_OK;
}

/* ---- resampling from runs ------------------------------------------------- */

/* Validates a resampling call; 1 when there is nothing to do.  trusted:
 * the runs are as rle_from_string_area left them on success (their sum
 * is h*w), only the rest is checked. */
static int resample_check(const sa1b_rle *r, uint32_t rh, uint32_t rw, int *nothing, int trusted,
                          sa1b_error *err)
{
    *nothing = 0;
    if (!trusted) SA1B_FORWARD(check_rle(r, "resample", err));
    else if (!r) return sa1b_error_set(err, SA1B_EINVAL, -1, "resample: null rle");
    if (rh == 0 || rw == 0) {
        *nothing = 1;
        return SA1B_OK;
    }
    if ((uint64_t)rh * rw > SIZE_MAX)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "resample: target %ux%u too large", rh, rw);
    if (r->h == 0 || r->w == 0)
        return sa1b_error_set(err, SA1B_EINVAL, -1,
                              "resample: cannot resample a %ux%u mask to %ux%u", r->h, r->w, rh,
                              rw);
    return SA1B_OK;
}

/* Run cursor: run k starts at source pixel `start`. */
typedef struct run_cursor {
    size_t k;
    uint64_t start;
} run_cursor;

/* Moves the cursor forward to the run containing pixel p (or the end). */
static void cursor_seek(run_cursor *cu, const sa1b_rle *r, uint64_t p)
{
    while (cu->k < r->n && cu->start + r->cnts[cu->k] <= p) {
        cu->start += r->cnts[cu->k];
        cu->k++;
    }
}

/* First target row i whose sample row floor((2i+1) h / (2 rh)) is >= y. */
static inline uint64_t nearest_first(uint64_t y, uint64_t h, uint64_t rh)
{
    uint64_t q = y * rh;
    return q / h + (2 * (q % h) > h);
}

static int resample_nearest(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *out,
                            int trusted, sa1b_error *err)
{
    int nothing;
    SA1B_FORWARD(resample_check(r, rh, rw, &nothing, trusted, err));
    if (nothing) return SA1B_OK;
    if (!out) return sa1b_error_set(err, SA1B_EINVAL, -1, "resample: null output");
    const uint64_t h = r->h, w = r->w;
    memset(out, 0, (size_t)rh * rw);
    run_cursor cu = {0, 0};
    uint64_t imin = UINT64_MAX, imax = 0;
    /* x_j = floor((2j + 1) w / (2 rw)), stepped without divisions:
     * numerator (2j + 1) w = x_j * 2rw + rem */
    const uint64_t den = 2 * (uint64_t)rw, step_q = (2 * w) / den, step_r = (2 * w) % den;
    uint64_t x = w / den, rem = w % den;
    for (uint32_t j = 0; j < rw; j++) {
        if (j) {
            x += step_q;
            rem += step_r;
            if (rem >= den) {
                rem -= den;
                x++;
            }
        }
        uint64_t col0 = x * h, col1 = col0 + h;
        cursor_seek(&cu, r, col0);
        uint64_t s = cu.start;
        for (size_t k = cu.k; k < r->n && s < col1; k++) {
            uint64_t e = s + r->cnts[k];
            if ((k & 1) && e > s) {
                uint64_t ya = (s > col0 ? s : col0) - col0;
                uint64_t yb = (e < col1 ? e : col1) - col0;
                uint64_t ia = nearest_first(ya, h, rh), ib = nearest_first(yb, h, rh);
                if (ib > rh) ib = rh;
                if (ia < ib) {
                    /* toggles at both ends; the prefix pass below fills */
                    out[ia * rw + j] ^= 1;
                    if (ib < rh) out[ib * rw + j] ^= 1;
                    if (ia < imin) imin = ia;
                    if (ib > imax) imax = ib;
                }
            }
            s = e;
        }
    }
    /* each row XOR the one above, over the rows the toggles span: one
     * sequential pass instead of strided writes per foreground cell */
    if (imin == UINT64_MAX) return SA1B_OK; /* no foreground sampled */
    if (imax >= rh) imax = rh - 1;
    for (uint64_t i = imin + 1; i <= imax; i++) {
        uint8_t *o = out + i * rw;
        const uint8_t *a = o - rw;
        size_t k = 0;
        for (; k + 8 <= rw; k += 8) {
            uint64_t x0, x1;
            memcpy(&x0, o + k, 8);
            memcpy(&x1, a + k, 8);
            x0 ^= x1;
            memcpy(o + k, &x0, 8);
        }
        for (; k < rw; k++) o[k] ^= a[k];
    }
    return SA1B_OK;
}

/* floor(n / d) by a multiply for n < 2^32 and 2 <= d < 2^32, with
 * m = ceil(2^64 / d): n m / 2^64 = n / d + n e / 2^64 with 0 <= e < 1, so
 * the excess is below 2^-32 < 1/d, which the fraction of n / d never
 * comes within of 1; the floor is exact. */
__extension__ typedef unsigned __int128 rle_u128;
static inline uint64_t rdiv_m(uint64_t d) { return UINT64_MAX / d + 1; }
static inline uint64_t rdiv(uint64_t n, uint64_t d, uint64_t m, int fast)
{
    return fast ? (uint64_t)(((rle_u128)n * m) >> 64) : n / d;
}

/* The rows imin .. imax of a bits column from its sums (acc, dif), which
 * it clears: row i's bit is the compare shifted into place (no branch) at
 * byte o, place sh, both stepped by bstride = 8 step + rem bits.  Inlined
 * with rem constant 0 (every bit in the same place of its byte) and not. */
static inline __attribute__((always_inline)) void
area_bits_rows(uint64_t *restrict acc, uint64_t *restrict dif, uint64_t imin, uint64_t imax,
               uint64_t hw, uint8_t *restrict bits, uint64_t o, unsigned sh, uint64_t step,
               unsigned rem)
{
    uint64_t run = 0;
    for (uint64_t i = imin; i <= imax; i++) {
        run += dif[i];
        uint64_t S = acc[i] + run;
        acc[i] = 0;
        dif[i] = 0;
        bits[o] |= (uint8_t)((unsigned)(2 * S >= hw) << sh);
        o += step;
        sh += rem;
        if (sh >= 8) {
            sh -= 8;
            o++;
        }
    }
    dif[imax + 1] = 0;
}

/* Target column j of the bits output, rows imin .. imax, from the column's
 * sums (acc, dif, left zero); a function of its own, so that its loop
 * keeps its values in registers. */
static void area_bits_column(uint64_t *restrict acc, uint64_t *restrict dif, uint64_t imin,
                             uint64_t imax, uint64_t hw, uint8_t *restrict bits, uint64_t bstride,
                             uint64_t j)
{
    const uint64_t b = imin * bstride + j; /* bit i bstride + j of row i */
    const unsigned rem = (unsigned)(bstride & 7);
    if (rem == 0)
        area_bits_rows(acc, dif, imin, imax, hw, bits, b >> 3, (unsigned)(b & 7), bstride >> 3, 0);
    else
        area_bits_rows(acc, dif, imin, imax, hw, bits, b >> 3, (unsigned)(b & 7), bstride >> 3,
                       rem);
}

/* Outputs target column j, rows imin .. imax, from the column's sums
 * (acc, dif) and leaves them zero: bits (see area_core; rows[0] .. rows[1]
 * - 1 grow to take in imin .. imax), else mask01 and/or coverage. */
static inline __attribute__((always_inline)) void
area_column(uint64_t *acc, uint64_t *dif, uint64_t imin, uint64_t imax, uint64_t hw,
            uint8_t *coverage, uint8_t *mask01, uint8_t *bits, uint64_t bstride, uint64_t *rows,
            uint32_t rw, uint64_t j)
{
    uint64_t run = 0;
    if (bits) {
        area_bits_column(acc, dif, imin, imax, hw, bits, bstride, j);
        rows[0] = imin < rows[0] ? imin : rows[0];
        rows[1] = imax + 1 > rows[1] ? imax + 1 : rows[1];
        return;
    }
    if (!coverage) { /* mask01 alone: 2S >= hw is 0 where S is */
        for (uint64_t i = imin; i <= imax; i++) {
            run += dif[i];
            uint64_t S = acc[i] + run;
            acc[i] = 0;
            dif[i] = 0;
            mask01[(size_t)i * rw + j] = 2 * S >= hw;
        }
        dif[imax + 1] = 0;
        return;
    }
    for (uint64_t i = imin; i <= imax; i++) {
        run += dif[i];
        uint64_t S = acc[i] + run;
        acc[i] = 0;
        dif[i] = 0;
        if (S == 0) continue;
        size_t o = (size_t)i * rw + j; /* coverage is set here */
        if (S >= hw) {
            coverage[o] = 255;
            if (mask01) mask01[o] = 1;
            continue;
        }
        coverage[o] = (uint8_t)((510 * S + hw) / (2 * hw));
        if (mask01) mask01[o] = 2 * S >= hw;
    }
    dif[imax + 1] = 0;
}

/* The work of sa1b_rle_resample_area on checked arguments; acc and dif
 * hold rh + 1 zeros each and are left zero.  fast (a constant at each
 * call, so each copy has its own code): every dividend below is < 2^32
 * (h >= 2 and h rh <= 2^32; p < h w <= 2^32 - 1 always), so a division
 * by h is a multiply by m = rdiv_m(h).  bits (with coverage and mask01
 * NULL; NULL or not is a constant at each call): mask01 as set bits, cell
 * (i, j) at bit i * bstride + j, LSB first, and rows[0] .. rows[1] - 1
 * (start as UINT64_MAX, 0) grow to take in the rows of every column
 * output.  rw > w is left to this one, rw <= w to area_core_down. */
static inline __attribute__((always_inline)) void
area_core(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage, uint8_t *mask01,
          uint8_t *bits, uint64_t bstride, uint64_t *rows, uint64_t *acc, uint64_t *dif, int fast)
{
    const uint64_t h = r->h, w = r->w, hw = h * w, m = fast ? rdiv_m(h) : 0;
    const uint32_t *cn = r->cnts;
    const size_t n = r->n;
    run_cursor cu = {0, 0};
    /* the foreground lies in source pixels [fg0, fg1): only the target
     * columns overlapping its source columns x0 .. x1 have any, j0 .. j1
     * (a mask is mostly much narrower than the image) */
    uint64_t fg0 = 0, fg1 = hw;
    size_t k0 = 0, k1 = n;
    while (k0 < n && !((k0 & 1) && cn[k0])) fg0 += cn[k0++];
    if (k0 == n) return; /* no foreground */
    while (k1 > k0 + 1 && !(((k1 - 1) & 1) && cn[k1 - 1])) fg1 -= cn[--k1];
    const uint64_t x0 = fg0 / h, x1 = (fg1 - 1) / h;
    const uint32_t j0 = (uint32_t)(x0 * rw / w), j1 = (uint32_t)(((x1 + 1) * rw - 1) / w);
    /* source columns overlapping target column j: [xs, xe] with
     * xs = floor(j w / rw), xe = floor(((j + 1) w - 1) / rw), stepped */
    const uint64_t sq = w / rw, sr = w % rw;
    uint64_t xs = (uint64_t)j0 * w / rw, xsr = (uint64_t)j0 * w % rw;
    uint64_t xe = ((uint64_t)j0 * w + w - 1) / rw, xer = ((uint64_t)j0 * w + w - 1) % rw;
    for (uint32_t j = j0; j <= j1; j++) {
        if (j > j0) {
            xs += sq;
            xsr += sr;
            if (xsr >= rw) {
                xsr -= rw;
                xs++;
            }
            xe += sq;
            xer += sr;
            if (xer >= rw) {
                xer -= rw;
                xe++;
            }
        }
        uint64_t v0 = (uint64_t)j * w, v1 = v0 + w; /* scaled by rw */
        uint64_t p0 = xs * h, p1 = (xe + 1) * h;
        cursor_seek(&cu, r, p0);
        uint64_t imin = UINT64_MAX, imax = 0; /* rows touched in this column */
        uint64_t s = cu.start;
        /* the next column starts in this one's last source column at the
         * earliest: the cursor goes on from the first run that reaches into
         * it, not from this column's start (no run walked twice) */
        const uint64_t plast = p1 - h;
        run_cursor next = {n, hw};
        size_t k = cu.k;
        for (; k < n && s < p1; k++) {
            uint64_t e = s + cn[k];
            if (next.k == n && e > plast) next = (run_cursor){k, s};
            if ((k & 1) && e > s) {
                uint64_t p = s > p0 ? s : p0, q = e < p1 ? e : p1;
                uint64_t x = rdiv(p, h, m, fast), c0 = x * h;
                for (;;) { /* one source column at a time */
                    uint64_t ce = c0 + h, qe = q < ce ? q : ce;
                    uint64_t u0 = (p - c0) * rh, u1 = (qe - c0) * rh; /* scaled rows */
                    uint64_t a0 = x * rw, a1 = a0 + rw;               /* scaled cols */
                    uint64_t oc = (a1 < v1 ? a1 : v1) - (a0 > v0 ? a0 : v0);
                    uint64_t ia = rdiv(u0, h, m, fast), ib = rdiv(u1 - 1, h, m, fast);
                    imin = ia < imin ? ia : imin;
                    imax = ib > imax ? ib : imax;
                    if (ia == ib) acc[ia] += oc * (u1 - u0);
                    else {
                        acc[ia] += oc * ((ia + 1) * h - u0);
                        acc[ib] += oc * (u1 - ib * h);
                        if (ib > ia + 1) {
                            dif[ia + 1] += oc * h;
                            dif[ib] -= oc * h;
                        }
                    }
                    if (qe == q) break;
                    p = c0 = ce;
                    x++;
                }
            }
            s = e;
        }
        cu = next.k < n ? next : (run_cursor){k, s};
        if (imin == UINT64_MAX) continue; /* no foreground in this column */
        area_column(acc, dif, imin, imax, hw, coverage, mask01, bits, bstride, rows, rw, j);
    }
}

/* One target column's sums: acc and dif of rows imin .. imax (imin
 * UINT64_MAX: none). */
typedef struct area_sums {
    uint64_t *acc, *dif;
    uint64_t imin, imax;
} area_sums;

/* Adds a foreground segment, scaled rows [u0, u1) of one source column
 * (ia, ib: the target rows of its first and last), times the column's
 * overlap o with the target column, to sums c. */
static inline __attribute__((always_inline)) void
area_add(area_sums *c, uint64_t u0, uint64_t u1, uint64_t ia, uint64_t ib, uint64_t h, uint64_t o)
{
    c->imin = ia < c->imin ? ia : c->imin;
    c->imax = ib > c->imax ? ib : c->imax;
    const uint64_t oh = o * h;
    c->acc[ia] += o * ((ia + 1) * h - u0);
    c->acc[ib] += o * (u1 - ib * h);
    c->dif[ia + 1] += oh;
    c->dif[ib] -= oh;
}

/* Outputs target column j from sums c (if it has any) and clears them. */
static inline __attribute__((always_inline)) void
area_flush(area_sums *c, uint64_t hw, uint8_t *coverage, uint8_t *mask01, uint8_t *bits,
           uint64_t bstride, uint64_t *rows, uint32_t rw, uint64_t j)
{
    if (c->imin == UINT64_MAX) return;
    area_column(c->acc, c->dif, c->imin, c->imax, hw, coverage, mask01, bits, bstride, rows, rw, j);
    c->imin = UINT64_MAX;
    c->imax = 0;
}

/* area_core for rw <= w (each source column overlaps one target column or
 * two neighbours), in one pass over the runs: the walk keeps the source
 * column x and row y of its position (stepped, a division only where a
 * background run spans more than a column), splits each foreground run
 * into its pieces per source column, and adds each to the sums of the
 * target column(s) its source column overlaps: target column jc and
 * jc + 1, two sets of sums that swap roles as jc moves right; a column is
 * output as soon as the walk has passed it.  The sums are the exact
 * integers area_core adds up (in another order): the same output.  acc
 * holds 4 (rh + 1) zeros (two sets of acc and dif) and is left zero.
 * bbox (NULL or not at each call, a constant; runs whose sum is h w, so
 * that no position wraps uint32): sa1b_rle_bbox of the runs, from the
 * positions the walk passes anyway (sa1b_rle_bbox's points: each pair's
 * start of foreground and end of it less one, the row span whole where
 * those two lie in different columns). */
static inline __attribute__((always_inline)) void
area_core_down(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage, uint8_t *mask01,
               uint8_t *bits, uint64_t bstride, uint64_t *rows, uint64_t *acc, double *bbox,
               int fast)
{
    const uint64_t h = r->h, w = r->w, hw = h * w, m = fast ? rdiv_m(h) : 0;
    const uint32_t *cn = r->cnts;
    const size_t n = r->n;
    /* target columns jc and jc + 1: two structs, not an array with
     * pointers that swap, so that the compiler keeps their fields in
     * registers */
    area_sums c0 = {acc, acc + rh + 1, UINT64_MAX, 0};
    area_sums c1 = {acc + 2 * ((size_t)rh + 1), acc + 3 * ((size_t)rh + 1), UINT64_MAX, 0};
    uint64_t jc = 0;
    /* source column xk overlaps target column ja (scaled: it starts xr
     * into it, xr < w) by oa and ja + 1 by ob (rw <= w: no further) */
    uint64_t xk = 0, ja = 0, xr = 0, oa = rw, ob = 0;
    uint64_t x = 0, y = 0; /* the walk's position x h + y, y < h */
    uint64_t bx0 = w, by0 = h, bx1 = 0, by1 = 0, bxs = 0; /* sa1b_rle_bbox's xs, ys, xe, ye, xp */
    for (size_t k = 0; k < n; k += 2) { /* a background run, then a foreground one */
        y += cn[k]; /* background: move on */
        if (y >= h) {
            if (y - h < h) {
                y -= h;
                x++;
            } else {
                x += y / h;
                y %= h;
            }
        }
        if (k + 1 == n) break;
        if (bbox) { /* the foreground's start */
            bxs = x;
            bx0 = x < bx0 ? x : bx0;
            bx1 = x > bx1 ? x : bx1;
            by0 = y < by0 ? y : by0;
            by1 = y > by1 ? y : by1;
        }
        uint64_t len = cn[k + 1];
        while (len) { /* foreground: a piece per source column */
            uint64_t yb = len < h - y ? y + len : h;
            if (x != xk) {
                if (x == xk + 1) {
                    xr += rw;
                    if (xr >= w) {
                        xr -= w;
                        ja++;
                    }
                } else {
                    ja = x * rw / w; /* x < w, rw <= w: no overflow */
                    xr = x * rw - ja * w;
                }
                xk = x;
                oa = w - xr < rw ? w - xr : rw;
                ob = rw - oa;
                if (ja != jc) { /* the walk has passed column jc (and jc + 1 unless ja is it) */
                    area_flush(&c0, hw, coverage, mask01, bits, bstride, rows, rw, jc);
                    if (ja != jc + 1) {
                        area_flush(&c1, hw, coverage, mask01, bits, bstride, rows, rw, jc + 1);
                    } else { /* jc + 1's sums go on as ja's */
                        area_sums t = c0;
                        c0 = c1;
                        c1 = t;
                    }
                    jc = ja;
                }
            }
            uint64_t u0 = y * rh, u1 = yb * rh; /* scaled rows */
            uint64_t ia = rdiv(u0, h, m, fast), ib = rdiv(u1 - 1, h, m, fast);
            area_add(&c0, u0, u1, ia, ib, h, oa);
            if (ob) area_add(&c1, u0, u1, ia, ib, h, ob);
            len -= yb - y;
            y = yb;
            if (y == h) {
                y = 0;
                x++;
            }
        }
        if (bbox) { /* the foreground's end less one (a zero-length one's: its start less one) */
            uint64_t ex = x, ey = y - 1;
            if (y == 0) {
                ex = x - 1;
                ey = h - 1;
                if (x == 0) { /* position 0 less one: uint32's 2^32 - 1, as sa1b_rle_bbox */
                    ex = UINT32_MAX / h;
                    ey = UINT32_MAX % h;
                }
            }
            if (bxs < ex) { /* across columns: every row */
                by0 = 0;
                by1 = h - 1;
            }
            bx0 = ex < bx0 ? ex : bx0;
            bx1 = ex > bx1 ? ex : bx1;
            by0 = ey < by0 ? ey : by0;
            by1 = ey > by1 ? ey : by1;
        }
    }
    area_flush(&c0, hw, coverage, mask01, bits, bstride, rows, rw, jc);
    area_flush(&c1, hw, coverage, mask01, bits, bstride, rows, rw, jc + 1);
    if (bbox && n >= 2) { /* sa1b_rle_bbox's uint32 arithmetic; no pair: zeros (set by the caller) */
        bbox[0] = (double)bx0;
        bbox[1] = (double)by0;
        bbox[2] = (double)(uint32_t)(bx1 - bx0 + 1);
        bbox[3] = (double)(uint32_t)(by1 - by0 + 1);
    }
}

int sa1b_rle_resample_nearest(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *out,
                              sa1b_error *err)
{
    return resample_nearest(r, rh, rw, out, 0, err);
}

int rle_resample_nearest_valid(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *out,
                               sa1b_error *err)
{
    return resample_nearest(r, rh, rw, out, 1, err);
}

/* bits (coverage and mask01 NULL): see area_core; the caller zeroed it.
 * rows (with bits; the caller set it to 0, 0) receives the rows that set
 * bits may be in, [rows[0], rows[1]).  scratch: NULL, or 4 (rh + 1) zeros
 * the work uses (and leaves zero) instead of its own.  bbox (NULL, or with
 * bits on trusted runs): sa1b_rle_bbox's, from area_core_down's walk where
 * it runs, else from sa1b_rle_bbox. */
static int resample_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                         uint8_t *mask01, uint8_t *bits, uint32_t bstride, uint64_t *scratch,
                         uint32_t *rows, double *bbox, int trusted, sa1b_error *err)
{
    int nothing;
    SA1B_FORWARD(resample_check(r, rh, rw, &nothing, trusted, err));
    const int down = !nothing && rw <= r->w;
    if (bbox && !(down && bits)) sa1b_rle_bbox(r, bbox); /* the walk below does not give it */
    else if (bbox) bbox[0] = bbox[1] = bbox[2] = bbox[3] = 0; /* fewer than two runs: no pair */
    if (nothing || (!coverage && !mask01 && !bits)) return SA1B_OK;
    if (coverage) memset(coverage, 0, (size_t)rh * rw);
    if (mask01) memset(mask01, 0, (size_t)rh * rw);
    /* per target column: acc[i] partial sums, dif[i] full-cell ranges
     * (two's complement arithmetic on uint64); rw <= w: one pass over the
     * runs (area_core_down), which keeps the sums of two target columns;
     * on the stack up to 512 target rows */
    enum { STACK_ROWS = 512 };
    uint64_t stack[4 * (STACK_ROWS + 1)], *acc = scratch;
    const size_t sets = down ? 4 : 2;
    if (!acc && rh <= STACK_ROWS) {
        acc = stack;
        memset(stack, 0, sets * ((size_t)rh + 1) * sizeof *stack);
    } else if (!acc) {
        if ((uint64_t)rh + 1 > SIZE_MAX / (4 * sizeof(uint64_t)))
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "resample: target %ux%u too large", rh,
                                  rw);
        acc = calloc(sets * ((size_t)rh + 1), sizeof *acc);
        if (!acc)
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "resample: cannot allocate %u rows", rh);
    }
    uint64_t *dif = acc + rh + 1, span[2] = {UINT64_MAX, 0};
    double unused[4], *box = bbox ? bbox : unused; /* the bits walk always takes the box */
    const int fast = r->h >= 2 && (uint64_t)r->h * rh <= (UINT64_C(1) << 32);
    if (down && bits && fast)
        area_core_down(r, rh, rw, NULL, NULL, bits, bstride, span, acc, box, 1);
    else if (down && bits)
        area_core_down(r, rh, rw, NULL, NULL, bits, bstride, span, acc, box, 0);
    else if (down && fast)
        area_core_down(r, rh, rw, coverage, mask01, NULL, 0, NULL, acc, NULL, 1);
    else if (down)
        area_core_down(r, rh, rw, coverage, mask01, NULL, 0, NULL, acc, NULL, 0);
    else if (bits && fast)
        area_core(r, rh, rw, NULL, NULL, bits, bstride, span, acc, dif, 1);
    else if (bits)
        area_core(r, rh, rw, NULL, NULL, bits, bstride, span, acc, dif, 0);
    else if (fast)
        area_core(r, rh, rw, coverage, mask01, NULL, 0, NULL, acc, dif, 1);
    else
        area_core(r, rh, rw, coverage, mask01, NULL, 0, NULL, acc, dif, 0);
    if (acc != stack && acc != scratch) free(acc);
    if (rows && span[0] < span[1]) {
        rows[0] = (uint32_t)span[0];
        rows[1] = (uint32_t)span[1];
    }
    return SA1B_OK;
}

int sa1b_rle_resample_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                           uint8_t *mask01, sa1b_error *err)
{
    return resample_area(r, rh, rw, coverage, mask01, NULL, 0, NULL, NULL, NULL, 0, err);
}

int rle_resample_area_valid(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                            uint8_t *mask01, sa1b_error *err)
{
    return resample_area(r, rh, rw, coverage, mask01, NULL, 0, NULL, NULL, NULL, 1, err);
}

int rle_resample_area_bits_valid(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint32_t stride,
                                 uint8_t *bits, uint64_t *scratch, uint32_t rows[2],
                                 double bbox[4], sa1b_error *err)
{
    if (rows) rows[0] = rows[1] = 0;
    if (!bits || stride < rw) return sa1b_error_set(err, SA1B_EINVAL, -1, "resample: bad bit target");
    return resample_area(r, rh, rw, NULL, NULL, bits, stride, scratch, rows, bbox, 1, err);
}
