/*
 * bench-rle.c - throughput of the RLE codec on SA-1B-sized masks (make
 * bench).  Masks: every mask of the real annotation file sa_226381.json
 * when the shared data is there ($SA1B_SHARED or ../shared), otherwise
 * synthetic 1500x2000 blob masks with a few hundred runs.  Each row times
 * one operation over all masks (median of several repetitions) and divides
 * by a baseline measured in the same run:
 *   - parse, format, encode, full decode: straightforward per-pixel /
 *     per-character code in the style of pycocotools' maskApi.c (decode
 *     into a column-major buffer pixel by pixel, then transpose);
 *   - encode of a column-major mask (what pycocotools.mask.encode gets),
 *     IoU and union of each mask with the next one: maskApi's loops
 *     (rleEncode, rleIou's run walk without its box test, rleMerge);
 *   - resampling to 64x64 and 256x256: a full decode followed by the same
 *     resize on the pixels (nearest: pick the centre pixels; area: the
 *     exact box filter), once with our full decode and once with the naive
 *     one.
 * Every fast result is checked against its baseline before timing.
 * Targets (issue 2): full decode >= 5x naive; 256x256 from runs >= 100x
 * full decode + resize.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sa1b_rle.h"

#ifndef SA1B_SHARED_DIR
#define SA1B_SHARED_DIR "../shared"
#endif

#define REPS 7

typedef struct mask {
    uint32_t h, w;
    char *counts;
    size_t len;
    sa1b_rle r;
    uint8_t *pix; /* row-major 0/1 */
    uint8_t *cm;  /* column-major 0/1 */
} mask;

static mask *masks;
static size_t nmasks;
static uint8_t *scratch, *scratch2; /* h*w each */
static uint64_t *acc64;              /* area-resize rows */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of one pass over all masks for fn(arg) and for the
 * baseline bfn(barg), their repetitions interleaved so that both see the
 * same machine load; `inner` passes per repetition for short operations. */
static void timeit2(void (*fn)(size_t, int), int arg, int inner, void (*bfn)(size_t, int),
                    int barg, int binner, double *t_out, double *tb_out)
{
    double t[REPS], tb[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (int k = 0; k < inner; k++)
            for (size_t i = 0; i < nmasks; i++) fn(i, arg);
        t[r] = (now() - t0) / inner;
        t0 = now();
        for (int k = 0; k < binner; k++)
            for (size_t i = 0; i < nmasks; i++) bfn(i, barg);
        tb[r] = (now() - t0) / binner;
    }
    qsort(t, REPS, sizeof *t, dcmp);
    qsort(tb, REPS, sizeof *tb, dcmp);
    *t_out = t[REPS / 2];
    *tb_out = tb[REPS / 2];
}

/* ---- naive pycocotools-style reference code ------------------------------ */

static volatile uint64_t sink;

/* rleFrString: per character, growing array */
static size_t naive_parse(const char *s, size_t len, uint32_t *cnts)
{
    size_t m = 0, p = 0;
    while (p < len) {
        long x = 0;
        int k = 0, more = 1;
        while (more) {
            long c = s[p] - 48;
            x |= (c & 0x1f) << 5 * k;
            more = (int)(c & 0x20);
            p++;
            k++;
            if (!more && (c & 0x10)) x |= (long)(~0UL << 5 * k);
        }
        if (m > 2) x += (long)cnts[m - 2];
        cnts[m++] = (uint32_t)x;
    }
    return m;
}

static size_t naive_to_string(const uint32_t *cnts, size_t m, char *s)
{
    size_t p = 0;
    for (size_t i = 0; i < m; i++) {
        long x = (long)cnts[i];
        if (i > 2) x -= (long)cnts[i - 2];
        int more = 1;
        while (more) {
            char c = (char)(x & 0x1f);
            x >>= 5;
            more = (c & 0x10) ? x != -1 : x != 0;
            if (more) c |= 0x20;
            c += 48;
            s[p++] = c;
        }
    }
    s[p] = 0;
    return p;
}

/* rleEncode's per-pixel loop over a column-major mask of a pixels */
static size_t naive_encode_cm(const uint8_t *cm, size_t a, uint32_t *cnts)
{
    size_t k = 0;
    uint8_t p = 0;
    uint32_t c = 0;
    for (size_t j = 0; j < a; j++) {
        if (cm[j] != p) {
            cnts[k++] = c;
            c = 0;
            p = cm[j];
        }
        c++;
    }
    cnts[k++] = c;
    return k;
}

/* row-major mask -> column-major copy -> rleEncode's per-pixel loop */
static size_t naive_encode(const uint8_t *m, uint32_t h, uint32_t w, uint8_t *cm, uint32_t *cnts)
{
    for (uint32_t x = 0; x < w; x++)
        for (uint32_t y = 0; y < h; y++) cm[(size_t)x * h + y] = m[(size_t)y * w + x];
    return naive_encode_cm(cm, (size_t)h * w, cnts);
}

/* rleIou's walk over two run lists (no box test): |A & B| / |A | B| */
static double naive_iou(const sa1b_rle *A, const sa1b_rle *B)
{
    size_t ka = A->n, kb = B->n, a = 1, b = 1;
    uint32_t ca = A->cnts[0], cb = B->cnts[0], c;
    int va = 0, vb = 0, ct = 1;
    double u = 0, in = 0;
    while (ct > 0) {
        c = ca < cb ? ca : cb;
        if (va || vb) {
            u += c;
            if (va && vb) in += c;
        }
        ct = 0;
        ca -= c;
        if (!ca && a < ka) {
            ca = A->cnts[a++];
            va = !va;
        }
        ct += ca;
        cb -= c;
        if (!cb && b < kb) {
            cb = B->cnts[b++];
            vb = !vb;
        }
        ct += cb;
    }
    return in > 0 ? in / u : 0;
}

/* rleMerge's walk for two masks (union), runs into out; returns the count */
static size_t naive_union(const sa1b_rle *A, const sa1b_rle *B, uint32_t *out)
{
    size_t ka = A->n, kb = B->n, a = 1, b = 1, m = 0;
    uint32_t ca = A->cnts[0], cb = B->cnts[0], c, cc = 0;
    int v = 0, va = 0, vb = 0, vp, ct = 1;
    while (ct > 0) {
        c = ca < cb ? ca : cb;
        cc += c;
        ct = 0;
        ca -= c;
        if (!ca && a < ka) {
            ca = A->cnts[a++];
            va = !va;
        }
        ct += ca;
        cb -= c;
        if (!cb && b < kb) {
            cb = B->cnts[b++];
            vb = !vb;
        }
        ct += cb;
        vp = v;
        v = va || vb;
        if (v != vp || ct == 0) {
            out[m++] = cc;
            cc = 0;
        }
    }
    return m;
}

/* rleDecode's per-pixel loop into column-major, then a transpose */
static void naive_decode(const sa1b_rle *r, uint8_t *cm, uint8_t *out)
{
    uint8_t *M = cm, v = 0;
    for (size_t j = 0; j < r->n; j++) {
        for (uint32_t k = 0; k < r->cnts[j]; k++) *(M++) = v;
        v = !v;
    }
    uint32_t h = r->h, w = r->w;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) out[(size_t)y * w + x] = cm[(size_t)x * h + y];
}

/* resizes of a full row-major mask (sample indices tabulated once) */
static uint32_t near_y[256], near_x[256];
static void resize_nearest(const uint8_t *m, uint32_t h, uint32_t w, uint32_t rh, uint32_t rw,
                           uint8_t *out)
{
    for (uint32_t i = 0; i < rh; i++)
        near_y[i] = (uint32_t)(((2 * (uint64_t)i + 1) * h) / (2 * (uint64_t)rh));
    for (uint32_t j = 0; j < rw; j++)
        near_x[j] = (uint32_t)(((2 * (uint64_t)j + 1) * w) / (2 * (uint64_t)rw));
    for (uint32_t i = 0; i < rh; i++) {
        const uint8_t *src = m + (size_t)near_y[i] * w;
        uint8_t *o = out + (size_t)i * rw;
        for (uint32_t j = 0; j < rw; j++) o[j] = src[near_x[j]];
    }
}

/* exact box filter (cv2 INTER_AREA-like, in integers): columns first, per row */
static void resize_area(const uint8_t *m, uint32_t h, uint32_t w, uint32_t rh, uint32_t rw,
                        uint8_t *cov)
{
    uint64_t *row = acc64, *colsum = acc64 + rw; /* [rw] and [rh * rw] */
    memset(colsum, 0, (size_t)rh * rw * sizeof *colsum);
    uint64_t hw = (uint64_t)h * w;
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *src = m + (size_t)y * w;
        memset(row, 0, rw * sizeof *row);
        for (uint32_t x = 0; x < w; x++) {
            if (!src[x]) continue;
            uint64_t a0 = (uint64_t)x * rw, a1 = a0 + rw;
            for (uint64_t j = a0 / w; j < rw && j * w < a1; j++) {
                uint64_t lo = a0 > j * w ? a0 : j * w, hi = a1 < (j + 1) * w ? a1 : (j + 1) * w;
                row[j] += hi - lo;
            }
        }
        uint64_t u0 = (uint64_t)y * rh, u1 = u0 + rh;
        for (uint64_t i = u0 / h; i < rh && i * h < u1; i++) {
            uint64_t lo = u0 > i * h ? u0 : i * h, hi = u1 < (i + 1) * h ? u1 : (i + 1) * h;
            for (uint32_t j = 0; j < rw; j++) colsum[i * rw + j] += (hi - lo) * row[j];
        }
    }
    for (size_t k = 0; k < (size_t)rh * rw; k++)
        cov[k] = (uint8_t)((510 * colsum[k] + hw) / (2 * hw));
}

/* ---- the timed operations ------------------------------------------------------ */

static uint32_t *runbuf;
static char *strbuf;
static uint8_t out_a[256 * 256], out_b[256 * 256];

static void op_parse(size_t i, int arg)
{
    (void)arg;
    sa1b_rle_from_string(&masks[i].r, masks[i].h, masks[i].w, masks[i].counts, masks[i].len, NULL);
}
static void op_parse_naive(size_t i, int arg)
{
    (void)arg;
    sink += naive_parse(masks[i].counts, masks[i].len, runbuf);
}
static void op_format(size_t i, int arg)
{
    (void)arg;
    sink += sa1b_rle_to_buffer(&masks[i].r, strbuf, sa1b_rle_string_bound(masks[i].r.n));
}
static void op_format_naive(size_t i, int arg)
{
    (void)arg;
    sink += naive_to_string(masks[i].r.cnts, masks[i].r.n, strbuf);
}
static sa1b_rle enc_r = SA1B_RLE_INIT;
static void op_encode(size_t i, int arg)
{
    (void)arg;
    sa1b_rle_encode(&enc_r, masks[i].pix, masks[i].h, masks[i].w, 0, NULL);
}
static void op_encode_naive(size_t i, int arg)
{
    (void)arg;
    sink += naive_encode(masks[i].pix, masks[i].h, masks[i].w, scratch2, runbuf);
}
static void op_encode_cm(size_t i, int arg)
{
    (void)arg;
    sa1b_rle_encode(&enc_r, masks[i].cm, masks[i].h, masks[i].w, 1, NULL);
}
static void op_encode_cm_naive(size_t i, int arg)
{
    (void)arg;
    sink += naive_encode_cm(masks[i].cm, (size_t)masks[i].h * masks[i].w, runbuf);
}
static double iou_sink;
static void op_iou(size_t i, int arg)
{
    (void)arg;
    double o = 0;
    sa1b_rle_iou(&masks[i].r, &masks[(i + 1) % nmasks].r, 0, &o, NULL);
    iou_sink += o;
}
static void op_iou_naive(size_t i, int arg)
{
    (void)arg;
    iou_sink += naive_iou(&masks[i].r, &masks[(i + 1) % nmasks].r);
}
static void op_union(size_t i, int arg)
{
    (void)arg;
    const sa1b_rle *in[2] = {&masks[i].r, &masks[(i + 1) % nmasks].r};
    sa1b_rle_merge(&enc_r, in, 2, 0, NULL);
}
static void op_union_naive(size_t i, int arg)
{
    (void)arg;
    sink += naive_union(&masks[i].r, &masks[(i + 1) % nmasks].r, runbuf);
}
static void op_decode(size_t i, int arg)
{
    (void)arg;
    sa1b_rle_decode(&masks[i].r, scratch, 0);
}
static void op_decode_naive(size_t i, int arg)
{
    (void)arg;
    naive_decode(&masks[i].r, scratch2, scratch);
}
/* arg: target side | mode << 16 (0 nearest, 1 area) | baseline << 20 (0 runs, 1 ours+resize, 2 naive+resize) */
static void op_resample(size_t i, int arg)
{
    uint32_t s = (uint32_t)(arg & 0xffff);
    int mode = (arg >> 16) & 15, base = arg >> 20;
    mask *m = &masks[i];
    if (base == 0) {
        if (mode == 0) sa1b_rle_resample_nearest(&m->r, s, s, out_a, NULL);
        else sa1b_rle_resample_area(&m->r, s, s, out_a, NULL, NULL);
        return;
    }
    if (base == 1) sa1b_rle_decode(&m->r, scratch, 0);
    else naive_decode(&m->r, scratch2, scratch);
    if (mode == 0) resize_nearest(scratch, m->h, m->w, s, s, out_b);
    else resize_area(scratch, m->h, m->w, s, s, out_b);
}

/* ---- masks ---------------------------------------------------------------------- */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add_mask(uint32_t h, uint32_t w, const char *counts, size_t len)
{
    masks = realloc(masks, (nmasks + 1) * sizeof *masks);
    mask *m = &masks[nmasks++];
    memset(m, 0, sizeof *m);
    m->h = h;
    m->w = w;
    m->counts = malloc(len + 1);
    memcpy(m->counts, counts, len + 1);
    m->len = len;
}

static int load_real(char *what, size_t whatlen)
{
    const char *env = getenv("SA1B_SHARED");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/sa1b-real", env && *env ? env : SA1B_SHARED_DIR);
    if (!is_dir(path)) snprintf(path, sizeof path, "%s/data/sa1b-real", SA1B_SHARED_DIR);
    if (!is_dir(path)) return 0;
    strncat(path, "/sa_226381.json", sizeof path - strlen(path) - 1);
    json_t *root = json_load_file(path, 0, NULL);
    if (!root) return 0;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(root, "annotations"), i, a) {
        json_t *seg = json_object_get(a, "segmentation"), *size = json_object_get(seg, "size");
        json_t *c = json_object_get(seg, "counts");
        add_mask((uint32_t)json_integer_value(json_array_get(size, 0)),
                 (uint32_t)json_integer_value(json_array_get(size, 1)), json_string_value(c),
                 json_string_length(c));
    }
    json_decref(root);
    snprintf(what, whatlen, "sa_226381.json");
    return nmasks > 0;
}

static void make_synthetic(void)
{
    uint64_t s = 12345;
    const uint32_t h = 1500, w = 2000;
    uint8_t *m = malloc((size_t)h * w);
    sa1b_rle r = SA1B_RLE_INIT;
    for (int k = 0; k < 64; k++) {
        memset(m, 0, (size_t)h * w);
        int nb = 1 + k % 4;
        for (int b = 0; b < nb; b++) {
            s = s * 6364136223846793005u + 1442695040888963407u;
            double cy = (double)(s >> 33) / (1u << 31) * h;
            s = s * 6364136223846793005u + 1442695040888963407u;
            double cx = (double)(s >> 33) / (1u << 31) * w;
            s = s * 6364136223846793005u + 1442695040888963407u;
            double ry = 10 + (double)(s >> 33) / (1u << 31) * 200, rx = ry * (0.5 + (k % 3) * 0.5);
            for (uint32_t y = cy > ry ? (uint32_t)(cy - ry) : 0; y < h && y < cy + ry; y++)
                for (uint32_t x = cx > rx ? (uint32_t)(cx - rx) : 0; x < w && x < cx + rx; x++) {
                    double dy = (y - cy) / ry, dx = (x - cx) / rx;
                    /* a wobbly edge for realistic run counts */
                    if (dy * dy + dx * dx <= 1 + 0.05 * ((x * 7 + y * 13) % 5)) m[(size_t)y * w + x] = 1;
                }
        }
        sa1b_rle_encode(&r, m, h, w, 0, NULL);
        char *str;
        size_t len;
        sa1b_rle_to_string(&r, &str, &len, NULL);
        add_mask(h, w, str, len);
        free(str);
    }
    sa1b_rle_free(&r);
    free(m);
}

static void row(const char *name, double t, const char *bname, double tb)
{
    double ms = nmasks / t, bs = nmasks / tb;
    printf("%-26s %12.0f   %-28s %10.0f %9.1fx\n", name, ms, bname, bs, tb / t);
}

int main(void)
{
    char what[256] = "synthetic blobs";
    if (!load_real(what, sizeof what)) make_synthetic();
    size_t maxhw = 0, maxruns = 0, totruns = 0;
    uint64_t totarea = 0;
    for (size_t i = 0; i < nmasks; i++) {
        mask *m = &masks[i];
        sa1b_error err;
        if (sa1b_rle_from_string(&m->r, m->h, m->w, m->counts, m->len, &err)) {
            fprintf(stderr, "bench-rle: mask %zu: %s\n", i, err.msg);
            return 1;
        }
        size_t hw = (size_t)m->h * m->w;
        if (hw > maxhw) maxhw = hw;
        if (m->r.n > maxruns) maxruns = m->r.n;
        totruns += m->r.n;
        totarea += sa1b_rle_area(&m->r);
        m->pix = malloc(hw);
        m->cm = malloc(hw);
        if (!m->pix || !m->cm) {
            fprintf(stderr, "bench-rle: out of memory\n");
            return 1;
        }
        sa1b_rle_decode(&m->r, m->pix, 0);
        sa1b_rle_decode(&m->r, m->cm, 1);
    }
    scratch = malloc(maxhw);
    scratch2 = malloc(maxhw);
    runbuf = malloc((maxhw + 1) * sizeof *runbuf);
    strbuf = malloc(sa1b_rle_string_bound(maxhw + 1));
    acc64 = malloc((256 + 256 * 256) * sizeof *acc64);

    /* correctness of the fast paths against the baselines */
    for (size_t i = 0; i < nmasks; i++) {
        mask *m = &masks[i];
        size_t hw = (size_t)m->h * m->w;
        naive_decode(&m->r, scratch2, scratch);
        if (memcmp(scratch, m->pix, hw) != 0) {
            fprintf(stderr, "bench-rle: mask %zu: decode differs from naive\n", i);
            return 1;
        }
        size_t k = naive_encode(m->pix, m->h, m->w, scratch2, runbuf);
        op_encode(i, 0);
        if (k != enc_r.n || memcmp(runbuf, enc_r.cnts, k * sizeof *runbuf) != 0) {
            fprintf(stderr, "bench-rle: mask %zu: encode differs from naive\n", i);
            return 1;
        }
        k = naive_encode_cm(m->cm, hw, runbuf);
        op_encode_cm(i, 0);
        if (k != enc_r.n || memcmp(runbuf, enc_r.cnts, k * sizeof *runbuf) != 0) {
            fprintf(stderr, "bench-rle: mask %zu: column-major encode differs from naive\n", i);
            return 1;
        }
        double o = -1;
        sa1b_rle_iou(&m->r, &masks[(i + 1) % nmasks].r, 0, &o, NULL);
        if (o != naive_iou(&m->r, &masks[(i + 1) % nmasks].r)) {
            fprintf(stderr, "bench-rle: mask %zu: iou differs from naive\n", i);
            return 1;
        }
        k = naive_union(&m->r, &masks[(i + 1) % nmasks].r, runbuf);
        op_union(i, 0);
        if (k != enc_r.n || memcmp(runbuf, enc_r.cnts, k * sizeof *runbuf) != 0) {
            fprintf(stderr, "bench-rle: mask %zu: union differs from naive\n", i);
            return 1;
        }
        for (int mode = 0; mode < 2; mode++)
            for (int s = 64; s <= 256; s *= 4) {
                op_resample(i, s | mode << 16);
                op_resample(i, s | mode << 16 | 1 << 20);
                if (memcmp(out_a, out_b, (size_t)s * s) != 0) {
                    fprintf(stderr, "bench-rle: mask %zu: %s %dx%d differs from decode+resize\n",
                            i, mode ? "area" : "nearest", s, s);
                    return 1;
                }
            }
    }

    printf("bench-rle: %zu masks of %ux%u (%s), %.0f runs and %.0f foreground pixels on "
           "average;\nmasks per second, median of %d repetitions; ratio = baseline time / our "
           "time\n\n",
           nmasks, masks[0].h, masks[0].w, what, (double)totruns / nmasks,
           (double)totarea / nmasks, REPS);
    printf("%-26s %12s   %-28s %10s %10s\n", "operation", "masks/s", "baseline", "masks/s",
           "ratio");
    double t, tb;
    timeit2(op_parse, 0, 50, op_parse_naive, 0, 50, &t, &tb);
    row("parse (string -> runs)", t, "naive rleFrString", tb);
    timeit2(op_format, 0, 50, op_format_naive, 0, 50, &t, &tb);
    row("format (runs -> string)", t, "naive rleToString", tb);
    timeit2(op_encode, 0, 3, op_encode_naive, 0, 1, &t, &tb);
    row("encode (row-major mask)", t, "transpose + rleEncode", tb);
    timeit2(op_encode_cm, 0, 3, op_encode_cm_naive, 0, 1, &t, &tb);
    row("encode (column-major)", t, "rleEncode", tb);
    timeit2(op_iou, 0, 50, op_iou_naive, 0, 50, &t, &tb);
    row("iou (mask, next mask)", t, "rleIou's walk", tb);
    timeit2(op_union, 0, 50, op_union_naive, 0, 50, &t, &tb);
    row("union (mask, next mask)", t, "rleMerge", tb);
    timeit2(op_decode, 0, 3, op_decode_naive, 0, 1, &t, &tb);
    row("full decode (row-major)", t, "rleDecode + transpose", tb);
    for (int mode = 0; mode < 2; mode++)
        for (int s = 64; s <= 256; s *= 4) {
            char name[64];
            snprintf(name, sizeof name, "decode %dx%d %s", s, s, mode ? "area" : "nearest");
            int a = s | mode << 16;
            timeit2(op_resample, a, 20, op_resample, a | 2 << 20, 1, &t, &tb);
            row(name, t, "naive decode + resize", tb);
            timeit2(op_resample, a, 20, op_resample, a | 1 << 20, 3, &t, &tb);
            row("", t, "our full decode + resize", tb);
        }
    printf("\ntargets: full decode >= 5x naive; 256x256 from runs >= 100x full decode + "
           "resize\n");
    for (size_t i = 0; i < nmasks; i++) {
        free(masks[i].counts);
        free(masks[i].pix);
        free(masks[i].cm);
        sa1b_rle_free(&masks[i].r);
    }
    free(masks);
    sa1b_rle_free(&enc_r);
    free(scratch);
    free(scratch2);
    free(runbuf);
    free(strbuf);
    free(acc64);
    return 0;
}
