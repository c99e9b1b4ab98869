/*
 * test-rle-fast.c - the fast paths of rle.c against the straightforward
 * code they replaced, kept here verbatim as references:
 * - sa1b_rle_bbox (pycocotools' rleToBbox without a division per run) on
 *   random and adversarial run lists: zero-length runs, single pixels,
 *   full and empty masks, runs spanning many columns, h = 1, w = 1, huge
 *   sizes, lists whose sum is not h*w or passes 2^32 (which the public
 *   function takes as they are);
 * - sa1b_rle_resample_area (divisions by h as multiplies where every
 *   dividend is < 2^32, the division code past that bound) on blob-like
 *   and random runs, up and down, at and past the bound, more target rows
 *   than its stack scratch;
 * - sa1b_rle_from_string and rle_from_string_area (a fast loop that hands
 *   any string it does not like to the old decoder) on valid, non-canonical
 *   and damaged strings: the same runs, or the same code, offset and
 *   message, and the fused area equal to sa1b_rle_area.
 * Results must be identical bit for bit.  Deterministic: a fixed seed.
 */
#include "rle_internal.h"
#include "sa1b_rle.h"
#include "tap.h"

static uint64_t rng_s = 0x243F6A8885A308D3u;
static uint64_t rnd(void)
{
    uint64_t z = (rng_s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static uint32_t rndn(uint64_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

/* The sa1b_rle_bbox of before the division-free version, verbatim. */
static void ref_bbox(const sa1b_rle *r, double bbox[4])
{
    bbox[0] = bbox[1] = bbox[2] = bbox[3] = 0;
    if (!r || !r->cnts) return;
    uint32_t h = r->h, w = r->w;
    size_t m = (r->n / 2) * 2;
    if (m == 0 || h == 0) return;
    uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0, xp = 0;
    for (size_t j = 0; j < m; j++) {
        cc += r->cnts[j];
        uint32_t t = cc - (uint32_t)(j % 2);
        uint32_t y = t % h, x = (t - y) / h;
        if (j % 2 == 0) xp = x;
        else if (xp < x) {
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


/* The sa1b_rle_resample_area of before the division-free version, and its
 * run cursor, verbatim (but for the argument checks). */
typedef struct run_cursor {
    size_t k;
    uint64_t start;
} run_cursor;

static void cursor_seek(run_cursor *cu, const sa1b_rle *r, uint64_t p)
{
    while (cu->k < r->n && cu->start + r->cnts[cu->k] <= p) {
        cu->start += r->cnts[cu->k];
        cu->k++;
    }
}

static int ref_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                    uint8_t *mask01, sa1b_error *err)
{
    /* (the argument checks, unchanged, are left out: valid input only) */
    if (!coverage && !mask01) return SA1B_OK;
    const uint64_t h = r->h, w = r->w, hw = h * w;
    if (coverage) memset(coverage, 0, (size_t)rh * rw);
    if (mask01) memset(mask01, 0, (size_t)rh * rw);
    /* per target column: acc[i] partial sums, dif[i] full-cell ranges */
    if ((uint64_t)rh + 1 > SIZE_MAX / (2 * sizeof(uint64_t)))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resample: target %ux%u too large", rh, rw);
    uint64_t *acc = calloc(2 * ((size_t)rh + 1), sizeof *acc);
    if (!acc)
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "resample: cannot allocate %u rows", rh);
    uint64_t *dif = acc + rh + 1; /* two's complement arithmetic on uint64 */
    run_cursor cu = {0, 0};
    /* source columns overlapping target column j: [xs, xe] with
     * xs = floor(j w / rw), xe = floor(((j + 1) w - 1) / rw), stepped */
    const uint64_t sq = w / rw, sr = w % rw;
    uint64_t xs = 0, xsr = 0, xe = (w - 1) / rw, xer = (w - 1) % rw;
    for (uint32_t j = 0; j < rw; j++) {
        if (j) {
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
        int touched = 0;
        uint64_t imin = UINT64_MAX, imax = 0; /* rows touched in this column */
        uint64_t s = cu.start;
        for (size_t k = cu.k; k < r->n && s < p1; k++) {
            uint64_t e = s + r->cnts[k];
            if ((k & 1) && e > s) {
                uint64_t p = s > p0 ? s : p0, q = e < p1 ? e : p1;
                while (p < q) {
                    uint64_t x = p / h, c0 = x * h;
                    uint64_t qe = q < c0 + h ? q : c0 + h;
                    uint64_t u0 = (p - c0) * rh, u1 = (qe - c0) * rh; /* scaled rows */
                    uint64_t a0 = x * rw, a1 = a0 + rw;               /* scaled cols */
                    uint64_t oc = (a1 < v1 ? a1 : v1) - (a0 > v0 ? a0 : v0);
                    uint64_t ia = u0 / h, ib = (u1 - 1) / h;
                    if (ia < imin) imin = ia;
                    if (ib > imax) imax = ib;
                    if (ia == ib) acc[ia] += oc * (u1 - u0);
                    else {
                        acc[ia] += oc * ((ia + 1) * h - u0);
                        acc[ib] += oc * (u1 - ib * h);
                        if (ib > ia + 1) {
                            dif[ia + 1] += oc * h;
                            dif[ib] -= oc * h;
                        }
                    }
                    touched = 1;
                    p = qe;
                }
            }
            s = e;
        }
        if (!touched) continue;
        uint64_t run = 0;
        for (uint64_t i = imin; i <= imax; i++) {
            run += dif[i];
            uint64_t S = acc[i] + run;
            acc[i] = 0;
            dif[i] = 0;
            if (S == 0) continue;
            size_t o = (size_t)i * rw + j;
            if (S >= hw) {
                if (coverage) coverage[o] = 255;
                if (mask01) mask01[o] = 1;
                continue;
            }
            if (coverage) coverage[o] = (uint8_t)((510 * S + hw) / (2 * hw));
            if (mask01) mask01[o] = 2 * S >= hw;
        }
        dif[imax + 1] = 0;
    }
    free(acc);
    return SA1B_OK;
}


/* The sa1b_rle_from_string of before the fast loop, with its helpers,
 * verbatim (renamed). */
static int ref_reserve(sa1b_rle *r, size_t n, sa1b_error *err)
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

static int ref_check_size(uint32_t h, uint32_t w, sa1b_error *err)
{
    if ((uint64_t)h * w > SA1B_RLE_MAX_PIXELS)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "mask size %ux%u: more than %llu pixels", h,
                              w, (unsigned long long)SA1B_RLE_MAX_PIXELS);
    return SA1B_OK;
}

#define RLE_MAX_GROUPS 7 /* 35 bits: any delta of two 32-bit runs */

static int ref_from_string(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                           sa1b_error *err)
{
    if (!r || (len && !s)) return sa1b_error_set(err, SA1B_EINVAL, -1, "rle: null argument");
    r->h = r->w = 0;
    r->n = 0;
    SA1B_FORWARD(ref_check_size(h, w, err));
    uint64_t hw = (uint64_t)h * w;

    /* every run ends with a character without 0x20: at most len runs; for
     * long strings count them first rather than reserve 4 bytes a char */
    size_t nruns = len;
    if (len > ((size_t)1 << 20)) {
        nruns = 0;
        for (size_t p = 0; p < len; p++) nruns += !(((unsigned char)s[p] - 48) & 0x20);
    }
    SA1B_FORWARD(ref_reserve(r, nruns, err));

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

static int bbox_fail;
static char bbox_what[160];

/* Compares the two on r; remembers the first difference. */
static void cmp_bbox(const sa1b_rle *r, const char *what)
{
    double a[4], b[4];
    sa1b_rle_bbox(r, a);
    ref_bbox(r, b);
    if (memcmp(a, b, sizeof a) != 0) {
        if (!bbox_fail) {
            snprintf(bbox_what, sizeof bbox_what, "%s: %ux%u n=%zu: [%g %g %g %g] want [%g %g %g %g]",
                     what, r->h, r->w, r->n, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
        }
        bbox_fail++;
    }
}

/* Random runs summing to total (exactly), with zero-length runs mixed in
 * at rate z percent, long runs and short ones; n at most cap. */
static size_t random_runs(uint32_t *c, size_t cap, uint64_t total, int z)
{
    size_t n = 0;
    uint64_t left = total;
    uint64_t scale = 1 + rndn(4) == 1 ? total : 1 + rndn(total / 8 + 2);
    while (n + 1 < cap && left > 0) {
        uint32_t v;
        if ((int)rndn(100) < z) v = 0;
        else {
            uint64_t k = 1 + rndn(scale);
            if (rndn(10) == 0) k = 1;
            if (k > left) k = left;
            v = (uint32_t)k;
        }
        c[n++] = v;
        left -= v;
    }
    if (left > UINT32_MAX) left = UINT32_MAX; /* only for huge totals */
    c[n++] = (uint32_t)left;
    return n;
}

static void test_bbox(void)
{
    enum { CAP = 4096 };
    uint32_t *c = malloc(CAP * sizeof *c);
    sa1b_rle r = SA1B_RLE_INIT;
    r.cnts = c;
    r.cap = CAP;
    /* hand-made corner cases */
    static const struct { uint32_t h, w; size_t n; uint32_t c[8]; } hc[] = {
        {1, 1, 1, {1}},          {1, 1, 2, {0, 1}},       {1, 1, 3, {0, 0, 1}},
        {3, 3, 1, {9}},          {3, 3, 2, {0, 9}},       {3, 3, 3, {4, 1, 4}},
        {3, 3, 4, {0, 0, 0, 9}}, {3, 3, 4, {0, 0, 3, 6}}, {3, 3, 5, {3, 0, 3, 0, 3}},
        {3, 3, 4, {2, 0, 2, 5}}, {3, 3, 3, {3, 3, 3}},    {3, 3, 3, {2, 5, 2}},
        {1, 7, 3, {2, 3, 2}},    {7, 1, 3, {2, 3, 2}},    {5, 4, 6, {0, 1, 18, 0, 0, 1}},
        {4, 5, 4, {0, 20, 0, 0}}, {2, 2, 2, {4, 0}},      {2, 2, 6, {0, 0, 0, 0, 0, 4}},
    };
    for (size_t i = 0; i < sizeof hc / sizeof hc[0]; i++) {
        r.h = hc[i].h;
        r.w = hc[i].w;
        r.n = hc[i].n;
        memcpy(c, hc[i].c, r.n * sizeof *c);
        cmp_bbox(&r, "hand-made");
    }
    /* zero rows, zero columns, odd run counts, no runs */
    r.h = 0; r.w = 5; r.n = 2; c[0] = 0; c[1] = 0;
    cmp_bbox(&r, "0 rows");
    r.h = 5; r.w = 0; r.n = 2;
    cmp_bbox(&r, "0 columns");
    r.h = 5; r.w = 5; r.n = 0;
    cmp_bbox(&r, "no runs");
    /* random valid lists of every shape */
    for (int it = 0; it < 20000; it++) {
        uint32_t h, w;
        switch (it % 6) {
        case 0: h = 1; w = 1 + rndn(300); break;
        case 1: h = 1 + rndn(300); w = 1; break;
        case 2: h = 1 + rndn(8); w = 1 + rndn(8); break;
        case 3: h = 1 + rndn(2000); w = 1 + rndn(2000); break;
        case 4: h = 1 + rndn(60000); w = 1 + rndn(60000); break;
        default: h = 1 + rndn(100); w = 1 + rndn(100); break;
        }
        if ((uint64_t)h * w > SA1B_RLE_MAX_PIXELS) w = (uint32_t)(SA1B_RLE_MAX_PIXELS / h);
        int z = it % 4 == 0 ? 0 : (int)rndn(60);
        r.h = h;
        r.w = w;
        r.n = random_runs(c, 1 + rndn(CAP - 1), (uint64_t)h * w, z);
        cmp_bbox(&r, "random");
        if (r.n > 1 && rndn(2)) { /* drop the last run: odd counts, sum short */
            r.n--;
            cmp_bbox(&r, "random, last run dropped");
        }
    }
    /* the largest masks, and lists that are not valid: sums past h*w and
     * past 2^32 (the original's uint32 sum wraps) */
    for (int it = 0; it < 5000; it++) {
        uint32_t h = it % 3 == 0 ? 65536 : 1 + rndn(UINT32_MAX);
        uint32_t w = (uint32_t)(SA1B_RLE_MAX_PIXELS / h);
        r.h = h;
        r.w = w;
        size_t n = 1 + rndn(64);
        for (size_t k = 0; k < n; k++) {
            uint32_t v;
            switch (rndn(5)) {
            case 0: v = 0; break;
            case 1: v = (uint32_t)rnd(); break;
            case 2: v = 1 + rndn(h); break;
            case 3: v = h - rndn(2); break;
            default: v = rndn(3) * h + rndn(3); break;
            }
            c[k] = v;
        }
        r.n = n;
        cmp_bbox(&r, "huge or invalid");
    }
    tap_ok(bbox_fail == 0, "sa1b_rle_bbox == the division version on %s", "25000+ run lists");
    if (bbox_fail) tap_diag("%d differ, first: %s", bbox_fail, bbox_what);
    free(c);
}


/* One comparison of sa1b_rle_resample_area with ref_area on r at rh x rw,
 * coverage and mask01 together and each alone. */
static int area_fail;
static char area_what[160];
static void cmp_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, const char *what)
{
    size_t nn = (size_t)rh * rw;
    uint8_t *c1 = malloc(nn + 1), *m1 = malloc(nn + 1), *c2 = malloc(nn + 1), *m2 = malloc(nn + 1);
    int bad = 0;
    memset(c1, 7, nn + 1), memset(m1, 7, nn + 1), memset(c2, 9, nn + 1), memset(m2, 9, nn + 1);
    int rc1 = sa1b_rle_resample_area(r, rh, rw, c1, m1, NULL);
    int rc2 = ref_area(r, rh, rw, c2, m2, NULL);
    bad |= rc1 != rc2 || memcmp(c1, c2, nn) || memcmp(m1, m2, nn);
    int rc3 = sa1b_rle_resample_area(r, rh, rw, NULL, m1, NULL);
    bad |= rc3 != rc2 || memcmp(m1, m2, nn);
    int rc4 = sa1b_rle_resample_area(r, rh, rw, c1, NULL, NULL);
    bad |= rc4 != rc2 || memcmp(c1, c2, nn);
    if (bad && !area_fail)
        snprintf(area_what, sizeof area_what, "%s: %ux%u (%zu runs) to %ux%u", what, r->h, r->w,
                 r->n, rh, rw);
    area_fail += bad;
    free(c1), free(m1), free(c2), free(m2);
}

/* Runs of a few blobs: per column a background gap, a foreground run, a
 * gap, as real masks look (and some zero-length runs when z). */
static size_t blob_runs(uint32_t *c, size_t cap, uint32_t h, uint32_t w, int z)
{
    size_t n = 0;
    uint64_t pos = 0, hw = (uint64_t)h * w, bg = 0;
    uint32_t x0 = rndn(w), x1 = x0 + rndn(w - x0 + 1);
    for (uint32_t x = x0; x < x1 && n + 4 < cap; x++) {
        uint32_t y0 = rndn(h), y1 = y0 + rndn(h - y0 + 1);
        uint64_t s = (uint64_t)x * h + y0, e = (uint64_t)x * h + y1;
        if (e == s) continue;
        bg += s - pos;
        if (bg == 0 && n > 0) { /* touches the previous run: merge it */
            c[n - 1] += (uint32_t)(e - s);
        } else {
            c[n++] = (uint32_t)bg;
            if (z && rndn(8) == 0 && n + 4 < cap) {
                c[n++] = 0;
                c[n++] = 0;
            }
            c[n++] = (uint32_t)(e - s);
        }
        bg = 0;
        pos = e;
    }
    c[n++] = (uint32_t)(hw - pos);
    if (n % 2 == 0) c[n++] = 0; /* an odd count ends on background */
    return n;
}

static void test_area(void)
{
    enum { CAP = 1 << 16 };
    uint32_t *c = malloc(CAP * sizeof *c);
    sa1b_rle r = SA1B_RLE_INIT;
    r.cnts = c;
    r.cap = CAP;
    for (int it = 0; it < 6000; it++) {
        uint32_t h, w, rh, rw;
        const char *what;
        switch (it % 6) {
        case 0: /* tiny, up and down */
            h = 1 + rndn(40), w = 1 + rndn(40), rh = 1 + rndn(60), rw = 1 + rndn(60);
            what = "tiny";
            break;
        case 1: /* one row or one column */
            h = 1 + (it & 8 ? 0 : rndn(300)), w = 1 + (it & 8 ? rndn(300) : 0);
            rh = 1 + rndn(70), rw = 1 + rndn(70);
            what = "1xN or Nx1";
            break;
        case 2: /* SA-1B-like down to the mask grids */
            h = 1500 + rndn(3), w = 2250 - rndn(3);
            rh = it & 8 ? 171 : 43, rw = it & 8 ? 256 : 64;
            if (it & 16) {
                uint32_t t = h; h = w; w = t;
                t = rh; rh = rw; rw = t;
            }
            what = "SA-1B size";
            if (it % 24 != 2) break;
            /* now and then odd sizes instead */
            /* fall through */
        case 3:
            h = 1 + rndn(600), w = 1 + rndn(600), rh = 1 + rndn(h + 50), rw = 1 + rndn(w + 50);
            what = "random size";
            break;
        case 4: /* more target rows than the stack takes */
            h = 500 + rndn(1500), w = 1 + rndn(20), rh = 513 + rndn(1500), rw = 1 + rndn(20);
            what = "tall target";
            break;
        default: /* at and past the fast path's bound h rh <= 2^32 */
            h = it % 4 == 1 ? 65536 : 65536 + rndn(5000), w = 1 + rndn(2);
            rh = it % 12 == 5 ? 65536 : 65530 + rndn(12), rw = 1 + rndn(3);
            what = "h rh near 2^32";
            break;
        }
        r.h = h;
        r.w = w;
        int z = (int)rndn(2);
        r.n = it % 3 ? blob_runs(c, CAP, h, w, z) : random_runs(c, 1 + rndn(4096), (uint64_t)h * w, 20 * z);
        cmp_area(&r, rh, rw, what);
    }
    tap_ok(area_fail == 0, "sa1b_rle_resample_area == the division version on 6000 masks");
    if (area_fail) tap_diag("%d differ, first: %s", area_fail, area_what);
    free(c);
}


/* Parses s both ways and compares everything: code, offset, message,
 * runs, the state left in r, and the fused area. */
static int str_fail, str_ok, str_err;
static char str_what[800];
static void cmp_string(uint32_t h, uint32_t w, const char *s, size_t len, const char *what)
{
    static sa1b_rle a = SA1B_RLE_INIT, b = SA1B_RLE_INIT;
    sa1b_error ea, eb;
    sa1b_error_clear(&ea);
    sa1b_error_clear(&eb);
    uint64_t area = 12345;
    int ra = sa1b_rle_from_string(&a, h, w, s, len, &ea);
    int rb = ref_from_string(&b, h, w, s, len, &eb);
    int bad = ra != rb || ea.code != eb.code || ea.offset != eb.offset ||
              strcmp(ea.msg, eb.msg) != 0 || a.h != b.h || a.w != b.w || a.n != b.n ||
              (a.n && memcmp(a.cnts, b.cnts, a.n * sizeof *a.cnts) != 0);
    sa1b_error_clear(&ea);
    int rc = rle_from_string_area(&a, h, w, s, len, &area, &ea);
    bad |= rc != rb || strcmp(ea.msg, eb.msg) != 0 || area != (rc ? 0 : sa1b_rle_area(&b)) ||
           a.n != b.n;
    if (bad && !str_fail)
        snprintf(str_what, sizeof str_what, "%s: %ux%u \"%.*s\": rc %d/%d \"%s\" / \"%s\"", what,
                 h, w, (int)(len < 60 ? len : 60), s, ra, rb, ea.msg, eb.msg);
    str_fail += bad;
    if (rb) str_err++;
    else str_ok++;
}

static void test_strings(void)
{
    enum { CAP = 6000 };
    uint32_t *c = malloc(CAP * sizeof *c);
    char *buf = malloc(8 * CAP + 64);
    static const char junk[] = {'/', 'p', 'o', '0', '_', '?', '@', 'O', ' ', '\0', '\x80', '\xff',
                                '\x7f', 'A', 'a', 'z'};
    sa1b_rle r = SA1B_RLE_INIT;
    for (int it = 0; it < 30000; it++) {
        uint32_t h = 1 + rndn(it % 3 ? 300 : 3000), w = 1 + rndn(it % 5 ? 300 : 3000);
        uint64_t hw = (uint64_t)h * w;
        size_t n = it % 2 ? blob_runs(c, CAP, h, w, it % 4 == 1)
                          : random_runs(c, 1 + rndn(it % 7 ? 50 : CAP - 1), hw, (int)rndn(30));
        if (sa1b_rle_set_runs(&r, h, w, c, n, NULL)) continue;
        size_t len = sa1b_rle_to_buffer(&r, buf, 8 * CAP + 64);
        /* non-canonical: a one-group value spread over more groups */
        if (it % 11 == 0 && len + 8 < 8 * CAP) {
            size_t p = rndn(len);
            if ((unsigned)buf[p] - 48u < 32) {
                int extra = 1 + (int)rndn(6);
                unsigned g = (unsigned)buf[p] - 48u, sign = g & 0x10 ? 0x1f : 0;
                memmove(buf + p + extra, buf + p, len - p);
                buf[p] = (char)(48 + (g | 0x20));
                for (int k = 1; k < extra; k++) buf[p + k] = (char)(48 + (sign | 0x20));
                buf[p + extra] = (char)(48 + sign);
                len += extra;
            }
        }
        cmp_string(h, w, buf, len, "valid");
        /* one damaged copy: a character replaced, dropped, added, or the
         * string cut, or the size changed */
        int kind = (int)rndn(6);
        size_t p = len ? rndn(len) : 0;
        switch (kind) {
        case 0: if (len) buf[p] = junk[rndn(sizeof junk)]; break;
        case 1: if (len) buf[p] = (char)(48 + rndn(64)); break;
        case 2: len = p; break;
        case 3: if (len) { memmove(buf + p, buf + p + 1, len - p - 1); len--; } break;
        case 4: memmove(buf + p + 1, buf + p, len - p); buf[p] = (char)(48 + rndn(64)); len++; break;
        default: h = 1 + rndn(h + 2); break;
        }
        cmp_string(h, w, buf, len, "damaged");
    }
    /* hand-made: empty, sizes, groups, signs, ranges */
    static const struct { uint32_t h, w; const char *s; } hc[] = {
        {0, 0, ""},      {1, 1, ""},        {0, 5, "0"},       {1, 1, "01"},      {1, 1, "1"},
        {2, 2, "04"},    {2, 2, "4"},       {2, 2, "40"},      {2, 2, "013"},     {2, 2, "0\x60"},
        {2, 2, "P"},     {2, 2, "PP0"},     {1, 32, "P0"},     {1, 32, "0P0"},    {1, 1024, "0P\x40"},
        {3, 3, "0000009"}, {3, 3, "00000O"}, {3, 3, "36?"},    {3, 3, "36>"},     {3, 3, "1131"},
        {1, 4294967295u, "0oooooo3"}, {1, 4294967295u, "ooooooo3"}, {65536, 65535, "1ooooo3"},
        {65536, 65535, "0ooooo`3"}, {65536, 65536, "0"}, {1, 1, "o"}, {1, 1, "oooooooo"},
    };
    for (size_t i = 0; i < sizeof hc / sizeof hc[0]; i++)
        cmp_string(hc[i].h, hc[i].w, hc[i].s, strlen(hc[i].s), "hand-made");
    tap_ok(str_fail == 0, "sa1b_rle_from_string == the old decoder (%d good, %d bad strings)",
           str_ok, str_err);
    if (str_fail) tap_diag("%d differ, first: %s", str_fail, str_what);
    sa1b_rle_free(&r);
    free(c);
    free(buf);
}

int main(void)
{
    tap_plan(0);
    test_bbox();
    test_area();
    test_strings();
    return tap_done();
}
