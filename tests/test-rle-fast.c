/*
 * test-rle-fast.c - the fast paths of rle.c against golden data and against
 * the definitions in sa1b_rle.h, never against copies of older code:
 * - both string decoders, the careful one (from_string_slow, which reports
 *   every error) and the fast loop of sa1b_rle_from_string and
 *   rle_from_string_area (which hands any string it does not like to the
 *   careful one), on the golden strings of tests/data/rle-golden.txt: empty,
 *   zero-length runs, 1 to 7 groups, the delta rule, the 32-bit limits,
 *   non-canonical and damaged strings; the runs, or the error code and
 *   offset, the fused area equal to the golden foreground;
 * - the two on 30000 random strings, valid, non-canonical and damaged: the
 *   runs a valid string was made from, or the same code, offset and message;
 * - sa1b_rle_bbox (pycocotools' rleToBbox without a division per run) on
 *   the golden boxes (its quirks on zero-length runs, odd run counts, sums
 *   off or past 2^32, huge sizes) and on 25000+ random valid lists against
 *   the box of their foreground;
 * - sa1b_rle_resample_area (divisions by h as multiplies where every
 *   dividend is < 2^32, the division code past that bound) on 6000 masks,
 *   up and down, at and past the bound, more target rows than its stack
 *   scratch, against the exact sums of its definition.
 * The golden file is written by tests/rle_golden.py, independently of this
 * library (the format from its description, boxes by pycocotools'
 * algorithm, checked against pycocotools).  This file is compiled with
 * rle.c itself (below), so that it can call the careful decoder, static
 * there, on every string.  Deterministic: a fixed seed.
 */
#include "rle.c"
#include "tap.h"

#include <ctype.h>
#include <errno.h>

#ifndef RLE_GOLDEN
#define RLE_GOLDEN "tests/data/rle-golden.txt"
#endif

static uint64_t rng_s = 0x243F6A8885A308D3u;
static uint64_t rnd(void)
{
    uint64_t z = (rng_s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static uint32_t rndn(uint64_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

/* Foreground pixels of n runs. */
static uint64_t fg_sum(const uint32_t *c, size_t n)
{
    uint64_t a = 0;
    for (size_t k = 1; k < n; k += 2) a += c[k];
    return a;
}

/* Up to 60 bytes of s, for a message: bytes outside 0x20..0x7e as \xNN. */
static const char *shown(const char *s, size_t len)
{
    static char buf[4 * 60 + 8];
    size_t o = 0;
    for (size_t p = 0; p < len && p < 60; p++) {
        unsigned char ch = (unsigned char)s[p];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') buf[o++] = (char)ch;
        else o += (size_t)snprintf(buf + o, 5, "\\x%02x", ch);
    }
    if (len > 60) buf[o++] = '.', buf[o++] = '.';
    buf[o] = '\0';
    return buf;
}

/* ---- the string decoders ------------------------------------------------ */

/* rle.c's careful decoder on its own, after what from_string_area does
 * before it (the size check, storage for len runs). */
static int slow_from_string(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                            sa1b_error *err)
{
    r->h = r->w = 0;
    r->n = 0;
    SA1B_FORWARD(check_size(h, w, err));
    SA1B_FORWARD(rle_reserve(r, len, err));
    return from_string_slow(r, h, w, s, len, err);
}

/* What a string should give: known = 0 when only the decoders' agreement
 * is checked; else SA1B_OK and the runs, or an error code and offset. */
typedef struct wanted {
    int known, code;
    int64_t offset;
    const uint32_t *runs;
    size_t n;
} wanted;

/* Failures of the slow decoder, the fast loop, the fused area version;
 * the first of each described. */
typedef struct tally {
    int n_ok, n_err, fail[3];
    char first[3][800];
} tally;

static void tally_fail(tally *t, int i, uint32_t h, uint32_t w, const char *s, size_t len,
                       const char *what, int rc, const sa1b_error *e)
{
    if (!t->fail[i]++)
        snprintf(t->first[i], sizeof t->first[i], "%s: %ux%u \"%s\": rc %d offset %lld \"%s\"",
                 what, h, w, shown(s, len), rc, (long long)e->offset, e->msg);
}

/* Whether one decoder's result is as wanted: on success r holds the runs
 * at h x w, on error r is left empty and err says the code and offset. */
static int as_wanted(int rc, const sa1b_rle *r, const sa1b_error *e, uint32_t h, uint32_t w,
                     const wanted *wt)
{
    if (!wt->known) return 1;
    if (rc != wt->code) return 0;
    if (rc) return e->code == rc && e->offset == wt->offset && r->h == 0 && r->w == 0 && r->n == 0;
    return r->h == h && r->w == w && r->n == wt->n &&
           (!wt->n || memcmp(r->cnts, wt->runs, wt->n * sizeof *wt->runs) == 0);
}

/* Whether two results are the same: code, offset, message, runs. */
static int same_result(int ra, const sa1b_rle *a, const sa1b_error *ea, int rb, const sa1b_rle *b,
                       const sa1b_error *eb)
{
    return ra == rb && ea->code == eb->code && ea->offset == eb->offset &&
           strcmp(ea->msg, eb->msg) == 0 && a->h == b->h && a->w == b->w && a->n == b->n &&
           (!a->n || memcmp(a->cnts, b->cnts, a->n * sizeof *a->cnts) == 0);
}

/* Parses s with the three and checks each: the careful decoder as wanted,
 * the fast loop and the fused version as wanted and as the careful one, the
 * fused area the foreground of the runs (0 on error). */
static void check_string(uint32_t h, uint32_t w, const char *s, size_t len, const wanted *wt,
                         tally *t, const char *what)
{
    static sa1b_rle a = SA1B_RLE_INIT, b = SA1B_RLE_INIT, f = SA1B_RLE_INIT;
    sa1b_error ea, eb, ef;
    sa1b_error_clear(&ea);
    sa1b_error_clear(&eb);
    sa1b_error_clear(&ef);
    uint64_t area = 12345;
    int rb = slow_from_string(&b, h, w, s, len, &eb);
    int ra = sa1b_rle_from_string(&a, h, w, s, len, &ea);
    int rf = rle_from_string_area(&f, h, w, s, len, &area, &ef);
    if (!as_wanted(rb, &b, &eb, h, w, wt)) tally_fail(t, 0, h, w, s, len, what, rb, &eb);
    if (!as_wanted(ra, &a, &ea, h, w, wt) || !same_result(ra, &a, &ea, rb, &b, &eb))
        tally_fail(t, 1, h, w, s, len, what, ra, &ea);
    if (!as_wanted(rf, &f, &ef, h, w, wt) || !same_result(rf, &f, &ef, rb, &b, &eb) ||
        area != (rf ? 0 : fg_sum(f.cnts, f.n)))
        tally_fail(t, 2, h, w, s, len, what, rf, &ef);
    if (rb) t->n_err++;
    else t->n_ok++;
}

static void tally_report(const tally *t, const char *what)
{
    static const char *who[3] = {"the careful decoder (from_string_slow)",
                                 "sa1b_rle_from_string (the fast loop)",
                                 "rle_from_string_area (runs and area)"};
    for (int i = 0; i < 3; i++) {
        tap_ok(t->fail[i] == 0, "%s on %s (%d good, %d bad strings)", who[i], what, t->n_ok,
               t->n_err);
        if (t->fail[i]) tap_diag("%d wrong, first: %s", t->fail[i], t->first[i]);
    }
}

/* ---- the golden file ---------------------------------------------------- */

static int parse_u64(char **p, uint64_t max, uint64_t *v)
{
    char *e;
    while (**p == ' ') (*p)++;
    if (!isdigit((unsigned char)**p)) return -1;
    errno = 0;
    unsigned long long x = strtoull(*p, &e, 10);
    if (errno || x > max) return -1;
    *p = e;
    *v = x;
    return 0;
}

static int parse_u32(char **p, uint32_t *v)
{
    uint64_t x;
    if (parse_u64(p, UINT32_MAX, &x)) return -1;
    *v = (uint32_t)x;
    return 0;
}

/* The runs "N R0 .. R(N-1)" into *c (grown as needed). */
static int parse_runs(char **p, uint32_t **c, size_t *cap, size_t *n)
{
    uint64_t m;
    if (parse_u64(p, SIZE_MAX / sizeof **c - 1, &m)) return -1;
    if (m >= *cap) {
        uint32_t *q = realloc(*c, (m + 1) * sizeof **c);
        if (!q) return -1;
        *c = q;
        *cap = m + 1;
    }
    for (size_t k = 0; k < m; k++)
        if (parse_u32(p, *c + k)) return -1;
    *n = m;
    return 0;
}

/* A quoted string with \xNN escapes into out (at most its length). */
static int parse_quoted(char **p, char *out, size_t *len)
{
    char *q = *p;
    size_t o = 0;
    while (*q == ' ') q++;
    if (*q++ != '"') return -1;
    for (; *q != '"'; q++) {
        if (*q == '\0' || *q == '\n') return -1;
        if (*q != '\\') {
            out[o++] = *q;
            continue;
        }
        unsigned v;
        if (q[1] != 'x' || !isxdigit((unsigned char)q[2]) || !isxdigit((unsigned char)q[3]) ||
            sscanf(q + 2, "%2x", &v) != 1)
            return -1;
        out[o++] = (char)v;
        q += 3;
    }
    *p = q + 1;
    *len = o;
    return 0;
}

static int error_code(const char *name)
{
    static const struct { const char *name; int code; } codes[] = {
        {"EINVAL", SA1B_EINVAL}, {"EFORMAT", SA1B_EFORMAT}, {"ERANGE", SA1B_ERANGE},
        {"ETRUNC", SA1B_ETRUNC}, {"EMISMATCH", SA1B_EMISMATCH},
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(name, codes[i].name) == 0) return codes[i].code;
    return -1;
}

/* One "str" line: both decoders against it. */
static int golden_string(char *p, char *sbuf, uint32_t **c, size_t *cap, tally *t)
{
    uint32_t h, w;
    size_t len;
    wanted wt = {1, SA1B_OK, -1, NULL, 0};
    if (parse_u32(&p, &h) || parse_u32(&p, &w) || parse_quoted(&p, sbuf, &len)) return -1;
    if (strncmp(p, " = ", 3) == 0) {
        p += 3;
        if (parse_runs(&p, c, cap, &wt.n)) return -1;
        wt.runs = *c;
    } else if (strncmp(p, " ! ", 3) == 0) {
        char name[16], *e;
        int k = 0;
        for (p += 3; *p && *p != ' ' && k < 15; p++) name[k++] = *p;
        name[k] = '\0';
        wt.code = error_code(name);
        wt.offset = strtoll(p, &e, 10);
        if (wt.code < 0 || e == p) return -1;
        p = e;
    } else
        return -1;
    if (*p != '\n' && *p != '\0') return -1;
    check_string(h, w, sbuf, len, &wt, t, "golden");
    return 0;
}

/* One "bbox" line: sa1b_rle_bbox against it. */
static int box_fail;
static char box_what[400];
static int golden_box(char *p, uint32_t **c, size_t *cap)
{
    sa1b_rle r = SA1B_RLE_INIT;
    double want[4], got[4];
    if (parse_u32(&p, &r.h) || parse_u32(&p, &r.w) || parse_runs(&p, c, cap, &r.n)) return -1;
    if (strncmp(p, " =", 2) != 0) return -1;
    p += 2;
    for (int k = 0; k < 4; k++) {
        uint32_t v;
        if (parse_u32(&p, &v)) return -1;
        want[k] = v;
    }
    r.cnts = *c;
    r.cap = *cap;
    sa1b_rle_bbox(&r, got);
    if (memcmp(got, want, sizeof got) != 0 && !box_fail++)
        snprintf(box_what, sizeof box_what, "%ux%u, %zu runs: [%g %g %g %g], want [%g %g %g %g]",
                 r.h, r.w, r.n, got[0], got[1], got[2], got[3], want[0], want[1], want[2],
                 want[3]);
    return 0;
}

static void test_golden(void)
{
    char path[4096];
    const char *top = getenv("top_srcdir");
    if (top && *top) snprintf(path, sizeof path, "%s/tests/data/rle-golden.txt", top);
    else snprintf(path, sizeof path, "%s", RLE_GOLDEN);
    FILE *fp = fopen(path, "r");
    if (!tap_ok(fp != NULL, "golden vectors in %s", path)) {
        tap_diag("cannot open '%s': %s", path, strerror(errno));
        return;
    }
    char *line = NULL, *sbuf = NULL;
    size_t lcap = 0, cap = 0;
    uint32_t *c = NULL;
    ssize_t got;
    int lineno = 0, bad_line = 0, n_box = 0;
    tally t = {0};
    while ((got = getline(&line, &lcap, fp)) > 0) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        char *q = realloc(sbuf, (size_t)got + 1); /* a string is no longer than its line */
        if (!q) break;
        sbuf = q;
        int rc;
        if (strncmp(line, "str ", 4) == 0) rc = golden_string(line + 4, sbuf, &c, &cap, &t);
        else if (strncmp(line, "bbox ", 5) == 0) rc = golden_box(line + 5, &c, &cap), n_box++;
        else rc = -1;
        if (rc && !bad_line) bad_line = lineno;
    }
    fclose(fp);
    free(line);
    free(sbuf);
    free(c);
    tap_ok(bad_line == 0 && t.n_ok >= 250 && t.n_err >= 250 && n_box >= 300,
           "%d golden strings, %d taken, %d rejected, and %d boxes, read", t.n_ok + t.n_err,
           t.n_ok, t.n_err, n_box);
    if (bad_line) tap_diag("%s:%d: not a vector", path, bad_line);
    tally_report(&t, "the golden strings");
    tap_ok(box_fail == 0, "sa1b_rle_bbox on the %d golden boxes", n_box);
    if (box_fail) tap_diag("%d wrong, first: %s", box_fail, box_what);
}

/* ---- random runs ----------------------------------------------------------- */

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

/* ---- bbox --------------------------------------------------------------------- */

/* c[0..n) without its zero-length foreground runs (the background runs on
 * either side of one become one): the same mask.  Returns the new n. */
static size_t drop_empty_fg(uint32_t *c, size_t n)
{
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if ((m & 1) && c[k] == 0) {
            if (k + 1 < n) c[m - 1] += c[++k];
            continue;
        }
        c[m++] = c[k];
    }
    return m;
}

/* The box [x, y, w, h] of the foreground (pycocotools' w = xmax - xmin + 1)
 * by its definition, from each foreground run's first and last pixel (a run
 * over two columns or more reaches every row); [0, 0, 0, 0] for none.  For
 * runs without a zero-length foreground run, where the quirks of rleToBbox
 * do not show. */
static void fg_box(const sa1b_rle *r, double bb[4])
{
    uint64_t h = r->h, pos = 0, x0 = UINT64_MAX, x1 = 0, y0 = UINT64_MAX, y1 = 0;
    for (size_t k = 0; k < r->n; pos += r->cnts[k], k++) {
        if (!(k & 1)) continue;
        uint64_t last = pos + r->cnts[k] - 1;
        uint64_t xa = pos / h, xb = last / h, ya = pos % h, yb = last % h;
        if (xa < x0) x0 = xa;
        if (xb > x1) x1 = xb;
        if (xa != xb) ya = 0, yb = h - 1;
        if (ya < y0) y0 = ya;
        if (yb > y1) y1 = yb;
    }
    if (x0 == UINT64_MAX) bb[0] = bb[1] = bb[2] = bb[3] = 0;
    else {
        bb[0] = (double)x0;
        bb[1] = (double)y0;
        bb[2] = (double)(x1 - x0 + 1);
        bb[3] = (double)(y1 - y0 + 1);
    }
}

static int rbox_fail, rbox_n;
static char rbox_what[200];
static void check_box(const sa1b_rle *r, const char *what)
{
    double a[4], b[4];
    sa1b_rle_bbox(r, a);
    fg_box(r, b);
    rbox_n++;
    if (memcmp(a, b, sizeof a) != 0 && !rbox_fail++)
        snprintf(rbox_what, sizeof rbox_what, "%s: %ux%u n=%zu: [%g %g %g %g] want [%g %g %g %g]",
                 what, r->h, r->w, r->n, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
}

static void test_bbox(void)
{
    enum { CAP = 4096 };
    uint32_t *c = malloc(CAP * sizeof *c);
    sa1b_rle r = SA1B_RLE_INIT;
    r.cnts = c;
    r.cap = CAP;
    for (int it = 0; it < 25000; it++) {
        uint32_t h, w;
        switch (it % 7) {
        case 0: h = 1; w = 1 + rndn(300); break;
        case 1: h = 1 + rndn(300); w = 1; break;
        case 2: h = 1 + rndn(8); w = 1 + rndn(8); break;
        case 3: h = 1 + rndn(2000); w = 1 + rndn(2000); break;
        case 4: h = 1 + rndn(60000); w = 1 + rndn(60000); break;
        case 5: /* the largest masks */
            h = it % 3 == 0 ? 65536 : 1 + rndn(UINT32_MAX);
            w = 1 + rndn(SA1B_RLE_MAX_PIXELS / h);
            break;
        default: h = 1 + rndn(100); w = 1 + rndn(100); break;
        }
        if ((uint64_t)h * w > SA1B_RLE_MAX_PIXELS) w = (uint32_t)(SA1B_RLE_MAX_PIXELS / h);
        int z = it % 4 == 0 ? 0 : (int)rndn(60);
        r.h = h;
        r.w = w;
        r.n = drop_empty_fg(c, random_runs(c, 1 + rndn(CAP - 1), (uint64_t)h * w, z));
        check_box(&r, "random");
        if (r.n > 1 && rndn(2)) { /* drop the last run: odd counts, sum short */
            r.n--;
            check_box(&r, "random, last run dropped");
        }
    }
    tap_ok(rbox_fail == 0, "sa1b_rle_bbox == the box of the foreground on %d random run lists",
           rbox_n);
    if (rbox_fail) tap_diag("%d differ, first: %s", rbox_fail, rbox_what);
    free(c);
}

/* ---- resample_area ------------------------------------------------------------ */

static uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
    uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

/* sa1b_rle_resample_area by its definition: cell (i, j) of the rh x rw
 * target holds S, the sum over its foreground pixels (y, x) of
 * |[y rh, (y+1) rh) & [i h, (i+1) h)| |[x rw, (x+1) rw) & [j w, (j+1) w)|
 * (the overlap, scaled by rh rw), out of h w: coverage round(255 S / hw),
 * ties up, mask01 2 S >= hw.  From the runs, whose pixels in one column are
 * one interval of rows: col[i w + x] is S of source column x in target row
 * i. */
static void def_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                     uint8_t *mask01)
{
    const uint64_t h = r->h, w = r->w, hw = h * w;
    uint64_t *col = calloc((size_t)rh * w, sizeof *col); /* [rh, w] */
    uint64_t pos = 0;
    for (size_t k = 0; k < r->n; pos += r->cnts[k], k++) {
        if (!(k & 1)) continue;
        for (uint64_t p = pos, e = pos + r->cnts[k]; p < e;) {
            uint64_t x = p / h, y0 = p - x * h, y1 = e < (x + 1) * h ? e - x * h : h;
            for (uint64_t i = y0 * rh / h; i < rh && i * h < y1 * rh; i++)
                col[i * w + x] += overlap(y0 * rh, y1 * rh, i * h, (i + 1) * h);
            p = x * h + y1;
        }
    }
    for (uint64_t i = 0; i < rh; i++)
        for (uint64_t j = 0; j < rw; j++) {
            uint64_t S = 0;
            for (uint64_t x = j * w / rw; x * rw < (j + 1) * w; x++)
                S += col[i * w + x] * overlap(x * rw, (x + 1) * rw, j * w, (j + 1) * w);
            coverage[i * rw + j] = (uint8_t)((510 * S + hw) / (2 * hw));
            mask01[i * rw + j] = 2 * S >= hw;
        }
    free(col);
}

/* sa1b_rle_resample_area on r at rh x rw, coverage and mask01 together and
 * each alone, against def_area. */
static int area_fail;
static char area_what[160];
static void check_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, const char *what)
{
    size_t nn = (size_t)rh * rw;
    uint8_t *c1 = malloc(nn + 1), *m1 = malloc(nn + 1), *c2 = malloc(nn + 1), *m2 = malloc(nn + 1);
    memset(c1, 7, nn + 1), memset(m1, 7, nn + 1), memset(c2, 9, nn + 1), memset(m2, 9, nn + 1);
    def_area(r, rh, rw, c2, m2);
    int bad = sa1b_rle_resample_area(r, rh, rw, c1, m1, NULL) != SA1B_OK ||
              memcmp(c1, c2, nn) || memcmp(m1, m2, nn);
    bad |= sa1b_rle_resample_area(r, rh, rw, NULL, m1, NULL) != SA1B_OK || memcmp(m1, m2, nn);
    bad |= sa1b_rle_resample_area(r, rh, rw, c1, NULL, NULL) != SA1B_OK || memcmp(c1, c2, nn);
    if (bad && !area_fail)
        snprintf(area_what, sizeof area_what, "%s: %ux%u (%zu runs) to %ux%u", what, r->h, r->w,
                 r->n, rh, rw);
    area_fail += bad;
    free(c1), free(m1), free(c2), free(m2);
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
        check_area(&r, rh, rw, what);
    }
    tap_ok(area_fail == 0, "sa1b_rle_resample_area == its definition on 6000 masks");
    if (area_fail) tap_diag("%d differ, first: %s", area_fail, area_what);
    free(c);
}

/* ---- random strings ------------------------------------------------------------- */

static void test_strings(void)
{
    enum { CAP = 6000 };
    uint32_t *c = malloc(CAP * sizeof *c);
    char *buf = malloc(8 * CAP + 64);
    static const char junk[] = {'/', 'p', 'o', '0', '_', '?', '@', 'O', ' ', '\0', '\x80', '\xff',
                                '\x7f', 'A', 'a', 'z'};
    sa1b_rle r = SA1B_RLE_INIT;
    tally t = {0};
    for (int it = 0; it < 30000; it++) {
        uint32_t h = 1 + rndn(it % 3 ? 300 : 3000), w = 1 + rndn(it % 5 ? 300 : 3000);
        uint64_t hw = (uint64_t)h * w;
        size_t n = it % 2 ? blob_runs(c, CAP, h, w, it % 4 == 1)
                          : random_runs(c, 1 + rndn(it % 7 ? 50 : CAP - 1), hw, (int)rndn(30));
        if (sa1b_rle_set_runs(&r, h, w, c, n, NULL)) continue;
        size_t len = sa1b_rle_to_buffer(&r, buf, 8 * CAP + 64);
        /* non-canonical: a one-group value spread over more groups (up
         * to 7: the same runs) */
        if (it % 11 == 0 && len + 8 < 8 * CAP) {
            size_t p = rndn(len);
            if ((unsigned)buf[p] - 48u < 32 && (p == 0 || (unsigned)buf[p - 1] - 48u < 32)) {
                int extra = 1 + (int)rndn(6);
                unsigned g = (unsigned)buf[p] - 48u, sign = g & 0x10 ? 0x1f : 0;
                memmove(buf + p + extra, buf + p, len - p);
                buf[p] = (char)(48 + (g | 0x20));
                for (int k = 1; k < extra; k++) buf[p + k] = (char)(48 + (sign | 0x20));
                buf[p + extra] = (char)(48 + sign);
                len += extra;
            }
        }
        wanted made = {1, SA1B_OK, -1, c, n}, any = {0, 0, -1, NULL, 0};
        check_string(h, w, buf, len, &made, &t, "valid");
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
        check_string(h, w, buf, len, &any, &t, "damaged");
    }
    tally_report(&t, "random strings (a valid one: the runs it was made from)");
    sa1b_rle_free(&r);
    free(c);
    free(buf);
}

int main(void)
{
    tap_plan(0);
    test_golden();
    test_strings();
    test_bbox();
    test_area();
    return tap_done();
}
