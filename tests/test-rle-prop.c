/*
 * test-rle-prop.c - properties of the RLE codec on thousands of random
 * masks (empty, full, noise, blobs, stripes, 1xN, Nx1, odd sizes): encode
 * and decode are inverse in both layouts, strings round trip, and area,
 * both bboxes, IoU, merge and both resampling modes agree with brute force
 * on the decoded pixels.  Every function is also run on non-canonical runs
 * (zero-length runs inserted), which must not change any answer except
 * pycocotools' COCO bbox quirks.  Deterministic: a fixed seed.
 */
#include "sa1b_rle.h"
#include "tap.h"

static uint64_t rng_s = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void)
{
    uint64_t z = (rng_s += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static uint32_t rndn(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

/* A random row-major mask of h x w with bytes 0 or (random nonzero). */
static void make_mask(uint8_t *m, uint32_t h, uint32_t w, int kind)
{
    size_t hw = (size_t)h * w;
    switch (kind) {
    case 0: memset(m, 0, hw); break;
    case 1: for (size_t i = 0; i < hw; i++) m[i] = (uint8_t)(1 + rndn(255)); break;
    case 2: {
        uint32_t p = rndn(101);
        for (size_t i = 0; i < hw; i++) m[i] = rndn(100) < p ? (uint8_t)(1 + rndn(3)) : 0;
        break;
    }
    case 3: { /* blobs: a few ellipses */
        memset(m, 0, hw);
        int nb = 1 + (int)rndn(4);
        for (int b = 0; b < nb; b++) {
            double cy = rndn(h), cx = rndn(w), ry = 1 + rndn(h / 2 + 1), rx = 1 + rndn(w / 2 + 1);
            for (uint32_t y = 0; y < h; y++)
                for (uint32_t x = 0; x < w; x++) {
                    double dy = (y - cy) / ry, dx = (x - cx) / rx;
                    if (dy * dy + dx * dx <= 1) m[(size_t)y * w + x] = 1;
                }
        }
        break;
    }
    default: { /* stripes and rectangles */
        memset(m, 0, hw);
        uint32_t y0 = rndn(h), y1 = y0 + rndn(h - y0 + 1), x0 = rndn(w), x1 = x0 + rndn(w - x0 + 1);
        for (uint32_t y = y0; y < y1; y++)
            for (uint32_t x = x0; x < x1; x++) m[(size_t)y * w + x] = 255;
        break;
    }
    }
}

static int same_runs(const sa1b_rle *a, const sa1b_rle *b)
{
    return a->h == b->h && a->w == b->w && a->n == b->n &&
           (a->n == 0 || memcmp(a->cnts, b->cnts, a->n * sizeof *a->cnts) == 0);
}

/* Inserts zero-length runs: splits random runs x into (x1, 0, x - x1). */
static void noncanonical(const sa1b_rle *r, sa1b_rle *out)
{
    uint32_t *c = malloc((3 * r->n + 3) * sizeof *c);
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (rndn(3) == 0) {
            uint32_t a = rndn(r->cnts[i] + 1);
            c[m++] = a;
            c[m++] = 0;
            c[m++] = r->cnts[i] - a;
        } else c[m++] = r->cnts[i];
    }
    sa1b_rle_set_runs(out, r->h, r->w, c, m, NULL);
    free(c);
}

static int failures;
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            if (failures++ < 20) tap_diag(__VA_ARGS__);                        \
        }                                                                      \
    } while (0)

/* brute-force references on a 0/1 row-major mask */
static void brute_bbox(const uint8_t *m, uint32_t h, uint32_t w, double bb[4])
{
    long xmin = -1, xmax = -1, ymin = -1, ymax = -1;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            if (m[(size_t)y * w + x]) {
                if (xmin < 0 || x < xmin) xmin = x;
                if ((long)x > xmax) xmax = x;
                if (ymin < 0 || y < ymin) ymin = y;
                if ((long)y > ymax) ymax = y;
            }
    if (xmin < 0) bb[0] = bb[1] = bb[2] = bb[3] = 0;
    else {
        bb[0] = xmin;
        bb[1] = ymin;
        bb[2] = xmax - xmin;
        bb[3] = ymax - ymin;
    }
}

static void brute_nearest(const uint8_t *m, uint32_t h, uint32_t w, uint32_t rh, uint32_t rw,
                          uint8_t *out)
{
    for (uint32_t i = 0; i < rh; i++)
        for (uint32_t j = 0; j < rw; j++) {
            uint64_t y = ((2 * (uint64_t)i + 1) * h) / (2 * (uint64_t)rh);
            uint64_t x = ((2 * (uint64_t)j + 1) * w) / (2 * (uint64_t)rw);
            out[(size_t)i * rw + j] = m[y * w + x];
        }
}

static uint64_t ov(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
    uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

static void brute_area(const uint8_t *m, uint32_t h, uint32_t w, uint32_t rh, uint32_t rw,
                       uint8_t *cov, uint8_t *m01)
{
    uint64_t hw = (uint64_t)h * w;
    for (uint32_t i = 0; i < rh; i++)
        for (uint32_t j = 0; j < rw; j++) {
            uint64_t S = 0;
            for (uint32_t y = 0; y < h; y++) {
                uint64_t oy = ov((uint64_t)y * rh, (uint64_t)(y + 1) * rh, (uint64_t)i * h,
                                 (uint64_t)(i + 1) * h);
                if (!oy) continue;
                for (uint32_t x = 0; x < w; x++)
                    if (m[(size_t)y * w + x])
                        S += oy * ov((uint64_t)x * rw, (uint64_t)(x + 1) * rw, (uint64_t)j * w,
                                     (uint64_t)(j + 1) * w);
            }
            /* round(255 S / hw), ties up, in doubles of exact integers */
            double f = 255.0 * (double)S / (double)hw;
            double fl = (double)(uint64_t)f;
            uint8_t c = (uint8_t)(f - fl >= 0.5 ? fl + 1 : fl);
            if (2 * (255 * S % hw) == hw) c = (uint8_t)((255 * S) / hw + 1); /* exact tie */
            cov[(size_t)i * rw + j] = c;
            m01[(size_t)i * rw + j] = 2 * S >= hw;
        }
}

static void one_case(uint32_t h, uint32_t w)
{
    size_t hw = (size_t)h * w;
    uint8_t *m = malloc(hw + 1), *m01 = malloc(hw + 1), *t = malloc(hw + 1);
    uint8_t *d = malloc(hw + 1), *m2 = malloc(hw + 1), *m3 = malloc(hw + 1);
    make_mask(m, h, w, (int)rndn(5));
    make_mask(m2, h, w, (int)rndn(5));
    make_mask(m3, h, w, (int)rndn(5));
    for (size_t i = 0; i < hw; i++) {
        m01[i] = m[i] != 0;
        m2[i] = m2[i] != 0;
        m3[i] = m3[i] != 0;
    }
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) t[(size_t)x * h + y] = m[(size_t)y * w + x];

    sa1b_rle r = SA1B_RLE_INIT, rc = SA1B_RLE_INIT, rs = SA1B_RLE_INIT, r2 = SA1B_RLE_INIT,
             r3 = SA1B_RLE_INIT, nc = SA1B_RLE_INIT, u = SA1B_RLE_INIT, v = SA1B_RLE_INIT;
    sa1b_error err;
    CHECK(sa1b_rle_encode(&r, m, h, w, 0, &err) == 0, "%ux%u encode", h, w);
    CHECK(sa1b_rle_encode(&rc, t, h, w, 1, &err) == 0, "%ux%u encode col", h, w);
    CHECK(same_runs(&r, &rc), "%ux%u row- and column-major encodes agree", h, w);
    for (size_t i = 1; i < r.n; i++) CHECK(r.cnts[i] > 0, "%ux%u canonical runs", h, w);
    sa1b_rle_decode(&r, d, 0);
    CHECK(memcmp(d, m01, hw) == 0, "%ux%u row-major decode", h, w);
    sa1b_rle_decode(&r, d, 1);
    for (size_t i = 0; i < hw; i++) t[i] = t[i] != 0;
    CHECK(memcmp(d, t, hw) == 0, "%ux%u column-major decode", h, w);

    char *s = NULL;
    size_t len = 0;
    sa1b_rle_to_string(&r, &s, &len, &err);
    CHECK(len < sa1b_rle_string_bound(r.n), "string within bound");
    char buf[4096];
    size_t bl = sa1b_rle_to_buffer(&r, buf, sizeof buf);
    CHECK(len >= sizeof buf || (bl == len && memcmp(buf, s, len) == 0), "to_buffer");
    CHECK(sa1b_rle_to_buffer(&r, buf, len ? len - 1 : 0) == 0 || len == 0, "small buffer");
    CHECK(sa1b_rle_from_string(&rs, h, w, s, len, &err) == 0 && same_runs(&r, &rs),
          "%ux%u string round trip: %s", h, w, err.msg);
    free(s);

    uint64_t area = 0;
    for (size_t i = 0; i < hw; i++) area += m01[i];
    CHECK(sa1b_rle_area(&r) == area, "%ux%u area", h, w);
    double bb[4], want[4], cb[4];
    brute_bbox(m01, h, w, want);
    sa1b_rle_bbox_sa1b(&r, bb);
    CHECK(memcmp(bb, want, sizeof bb) == 0, "%ux%u sa1b bbox", h, w);
    sa1b_rle_bbox(&r, cb);
    if (area) {
        CHECK(cb[0] == want[0] && cb[1] == want[1] && cb[2] == want[2] + 1 &&
                  cb[3] == want[3] + 1, "%ux%u coco bbox", h, w);
    } else
        CHECK(cb[0] == 0 && cb[1] == 0 && cb[2] == 0 && cb[3] == 0, "%ux%u empty coco bbox", h, w);

    /* non-canonical runs: same answers (sa1b bbox, area, decode) */
    noncanonical(&r, &nc);
    sa1b_rle_bbox_sa1b(&nc, bb);
    CHECK(memcmp(bb, want, sizeof bb) == 0, "%ux%u sa1b bbox, zero runs", h, w);
    CHECK(sa1b_rle_area(&nc) == area, "area, zero runs");
    sa1b_rle_decode(&nc, d, 0);
    CHECK(memcmp(d, m01, hw) == 0, "%ux%u decode, zero runs", h, w);
    sa1b_rle_to_string(&nc, &s, &len, &err);
    CHECK(sa1b_rle_from_string(&rs, h, w, s, len, &err) == 0 && same_runs(&nc, &rs),
          "%ux%u string round trip, zero runs", h, w);
    free(s);

    /* IoU and merge */
    sa1b_rle_encode(&r2, m2, h, w, 0, &err);
    sa1b_rle_encode(&r3, m3, h, w, 0, &err);
    uint64_t in = 0, un = 0, a2 = 0;
    for (size_t i = 0; i < hw; i++) {
        in += m01[i] & m2[i];
        un += m01[i] | m2[i];
        a2 += m2[i];
    }
    double iou, wi = in ? (double)in / (double)un : 0, wc = in ? (double)in / (double)area : 0;
    sa1b_rle nc2 = SA1B_RLE_INIT;
    noncanonical(&r2, &nc2);
    CHECK(sa1b_rle_iou(&r, &r2, 0, &iou, &err) == 0 && iou == wi, "%ux%u iou", h, w);
    CHECK(sa1b_rle_iou(&nc, &nc2, 0, &iou, &err) == 0 && iou == wi, "%ux%u iou zero runs", h, w);
    CHECK(sa1b_rle_iou(&r, &r2, 1, &iou, &err) == 0 && iou == wc, "%ux%u crowd iou", h, w);
    for (int isect = 0; isect < 2; isect++) {
        for (size_t i = 0; i < hw; i++)
            d[i] = isect ? (m01[i] & m2[i] & m3[i]) : (m01[i] | m2[i] | m3[i]);
        sa1b_rle_encode(&v, d, h, w, 0, &err);
        const sa1b_rle *ins[3] = {&nc, &nc2, &r3};
        CHECK(sa1b_rle_merge(&u, ins, 3, isect, &err) == 0 && same_runs(&u, &v),
              "%ux%u merge of 3 (%s)", h, w, isect ? "intersect" : "union");
        for (size_t i = 0; i < hw; i++) d[i] = isect ? (m01[i] & m2[i]) : (m01[i] | m2[i]);
        sa1b_rle_encode(&v, d, h, w, 0, &err);
        const sa1b_rle *ins2[2] = {&r, &r2};
        CHECK(sa1b_rle_merge(&u, ins2, 2, isect, &err) == 0 && same_runs(&u, &v),
              "%ux%u merge of 2 (%s)", h, w, isect ? "intersect" : "union");
    }
    const sa1b_rle *one[1] = {&nc};
    CHECK(sa1b_rle_merge(&u, one, 1, 0, &err) == 0 && same_runs(&u, &nc), "merge of 1 copies");

    /* resampling */
    if (hw) {
        for (int k = 0; k < 2; k++) {
            uint32_t rh = 1 + rndn(k ? 2 * h + 2 : 12), rw = 1 + rndn(k ? 2 * w + 2 : 12);
            uint8_t *a = malloc((size_t)rh * rw), *b = malloc((size_t)rh * rw);
            uint8_t *c = malloc((size_t)rh * rw), *e = malloc((size_t)rh * rw);
            brute_nearest(m01, h, w, rh, rw, a);
            const sa1b_rle *src = k ? &nc : &r;
            CHECK(sa1b_rle_resample_nearest(src, rh, rw, b, &err) == 0 &&
                      memcmp(a, b, (size_t)rh * rw) == 0,
                  "%ux%u nearest to %ux%u", h, w, rh, rw);
            brute_area(m01, h, w, rh, rw, a, b);
            CHECK(sa1b_rle_resample_area(src, rh, rw, c, e, &err) == 0 &&
                      memcmp(a, c, (size_t)rh * rw) == 0,
                  "%ux%u area coverage to %ux%u", h, w, rh, rw);
            CHECK(memcmp(b, e, (size_t)rh * rw) == 0, "%ux%u area mask to %ux%u", h, w, rh, rw);
            CHECK(sa1b_rle_resample_area(src, rh, rw, NULL, e, &err) == 0 &&
                      memcmp(b, e, (size_t)rh * rw) == 0, "area mask alone");
            free(a);
            free(b);
            free(c);
            free(e);
        }
    }
    sa1b_rle *all[] = {&r, &rc, &rs, &r2, &r3, &nc, &nc2, &u, &v};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) sa1b_rle_free(all[i]);
    free(m);
    free(m01);
    free(t);
    free(d);
    free(m2);
    free(m3);
}

/* Malformed strings: code, offset and a message naming the position. */
static void malformed(void)
{
    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error err;
    struct {
        const char *s;
        uint32_t h, w;
        int code;
        int64_t off;
        const char *in_msg;
    } v[] = {
        {"0<p", 3, 4, SA1B_EFORMAT, 2, "offset 2"},        /* 'p' = 112 */
        {"/<", 3, 4, SA1B_EFORMAT, 0, "offset 0"},         /* '/' = 47 */
        {"0<\n", 3, 4, SA1B_EFORMAT, 2, "0x0a"},
        {"0<P", 3, 4, SA1B_ETRUNC, 2, "offset 2"},         /* continuation at the end */
        {"oooo", 3, 4, SA1B_ETRUNC, 0, "run 0"},
        {"@", 3, 4, SA1B_ERANGE, 0, "negative"},           /* run 0 = -16 */
        {"123@", 3, 4, SA1B_ERANGE, 3, "negative"},        /* 2 + (-16) < 0 */
        {"0oooooooo", 3, 4, SA1B_ERANGE, 1, "more than 7"},
        {"0oooooo?", 65535, 65537, SA1B_ERANGE, 1, "beyond 32 bits"},
        {"5", 3, 4, SA1B_EMISMATCH, 1, "run sum 5 != 3x4"},
        {"<1", 3, 4, SA1B_EMISMATCH, 1, "exceeds"},
        {"", 3, 4, SA1B_EMISMATCH, 0, "run sum 0 != 3x4"},
        {"0", 65536, 65536, SA1B_ERANGE, -1, "65536x65536"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        sa1b_error_clear(&err);
        int rc = sa1b_rle_from_string(&r, v[i].h, v[i].w, v[i].s, strlen(v[i].s), &err);
        tap_is_int(rc, v[i].code, "malformed \"%s\": code %d", v[i].s, v[i].code);
        tap_is_int(err.offset, v[i].off, "malformed \"%s\": offset", v[i].s);
        if (!tap_ok(strstr(err.msg, v[i].in_msg) != NULL, "malformed \"%s\": message says '%s'",
                    v[i].s, v[i].in_msg))
            tap_diag("message: %s", err.msg);
        tap_ok(r.n == 0 && r.h == 0, "malformed \"%s\": rle left empty", v[i].s);
    }
    /* not NUL-terminated: parsing stops at len */
    tap_is_int(sa1b_rle_from_string(&r, 3, 4, "0<XYZ", 2, &err), 0, "len bounds the string");
    /* size with 0 pixels */
    tap_is_int(sa1b_rle_from_string(&r, 0, 7, "", 0, &err), 0, "0x7 with no runs");
    tap_is_int(sa1b_rle_from_string(&r, 0, 7, "0", 1, &err), 0, "0x7 with one zero run");
    uint8_t out[4];
    tap_is_int(sa1b_rle_resample_nearest(&r, 2, 2, out, &err), SA1B_EINVAL, "resample 0x7");
    /* random garbage never crashes; valid-alphabet garbage is judged too */
    int okc = 0;
    for (int it = 0; it < 3000; it++) {
        size_t len = rndn(40);
        char *s = malloc(len ? len : 1);
        for (size_t k = 0; k < len; k++)
            s[k] = (char)(it & 1 ? 48 + rndn(64) : rndn(256));
        uint32_t h = rndn(20), w = rndn(20);
        int rc = sa1b_rle_from_string(&r, h, w, s, len, &err);
        if (rc == 0) {
            okc++;
            char *t = NULL;
            size_t tl;
            sa1b_rle_to_string(&r, &t, &tl, &err);
            sa1b_rle r2 = SA1B_RLE_INIT;
            CHECK(sa1b_rle_from_string(&r2, h, w, t, tl, &err) == 0 && same_runs(&r, &r2),
                  "garbage that parses re-parses");
            uint8_t o[64];
            CHECK(h * w == 0 || sa1b_rle_resample_nearest(&r, 8, 8, o, &err) == 0, "resample");
            free(t);
            sa1b_rle_free(&r2);
        } else
            CHECK(err.code == rc && err.msg[0], "garbage error has a message");
        free(s);
    }
    tap_ok(failures == 0, "3000 garbage strings (%d parsed)", okc);
    sa1b_rle_free(&r);
}

int main(void)
{
    malformed();
    int n = 0;
    /* sizes: 1xN, Nx1, tiny, odd, up to 40x40 */
    for (int it = 0; it < 5000; it++) {
        uint32_t h, w;
        switch (it % 5) {
        case 0: h = 1; w = 1 + rndn(60); break;
        case 1: h = 1 + rndn(60); w = 1; break;
        case 2: h = 1 + rndn(5); w = 1 + rndn(5); break;
        default: h = 1 + rndn(40); w = 1 + rndn(40); break;
        }
        one_case(h, w);
        n++;
    }
    one_case(0, 5);
    one_case(5, 0);
    tap_ok(failures == 0, "%d random masks: encode, decode, strings, area, bbox, iou, merge, "
                          "resampling agree with brute force", n);

    /* a big SA-1B-sized blob mask through the banded row-major paths */
    {
        failures = 0;
        uint32_t h = 1500, w = 2000;
        size_t hw = (size_t)h * w;
        uint8_t *m = malloc(hw), *d = malloc(hw);
        make_mask(m, h, w, 3);
        for (size_t i = 0; i < hw; i += 7919) m[i] ^= 1; /* some noise */
        sa1b_rle r = SA1B_RLE_INIT;
        sa1b_error err;
        sa1b_rle_encode(&r, m, h, w, 0, &err);
        sa1b_rle_decode(&r, d, 0);
        for (size_t i = 0; i < hw; i++) m[i] = m[i] != 0;
        tap_ok(memcmp(m, d, hw) == 0, "1500x2000 blob mask round trip (%zu runs)", r.n);
        uint8_t a[64 * 64], b[64 * 64];
        brute_nearest(m, h, w, 64, 64, a);
        sa1b_rle_resample_nearest(&r, 64, 64, b, &err);
        tap_ok(memcmp(a, b, sizeof a) == 0, "1500x2000 nearest to 64x64");
        free(m);
        free(d);
        /* a tall mask beyond the transpose tile: strided path */
        h = (1u << 22) + 37;
        w = 2;
        hw = (size_t)h * w;
        m = calloc(hw, 1);
        d = malloc(hw);
        for (size_t i = 0; i < hw; i += 1 + rndn(100000)) m[i] = 1;
        sa1b_rle_encode(&r, m, h, w, 0, &err);
        sa1b_rle_decode(&r, d, 0);
        tap_ok(memcmp(m, d, hw) == 0, "%ux%u tall mask round trip", h, w);
        free(m);
        free(d);
        sa1b_rle_free(&r);
    }
    return tap_done();
}
