/*
 * test-image.c - JPEG decode/encode, area resize and letterbox
 * (pipeline/sa1b_image.h).
 *
 * Synthetic images (flat colour quadrants, so JPEG error is small away from
 * edges) are encoded here with tjCompress2 and letterboxed: geometry, scale,
 * zero padding and colours are checked, the DCT scale choice is checked
 * against a table, the letterbox is checked to be exactly the scaled decode
 * followed by sa1b_resize_area, and sa1b_resize_area is compared with a
 * brute-force double-precision box filter on random sizes.  The SIMD
 * resize kernels (pipeline/image_internal.h hooks) must give exactly the
 * bytes of the portable reference on thousands of random shapes, ratios
 * (down, up, 1:1), channel counts and contents.  Corrupt, truncated and
 * absurdly large JPEGs must fail cleanly.  The region decode of the loader
 * gives exactly the whole decode's pixels in its region.  The encoder's
 * standard Huffman tables give tjCompress2's bytes, its optimized ones fewer
 * bytes of the same pixels.  An allocation that fails inside libjpeg is
 * SA1B_ENOMEM, not a bad JPEG.
 */
#include <setjmp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <jpeglib.h>

#include "image_internal.h"
#include "sa1b_image.h"
#include "tap.h"
#include "ycc_internal.h"

static const uint8_t quad_rgb[4][3] = {{200, 30, 40}, {20, 180, 60}, {40, 50, 220}, {240, 240, 90}};

static int quad_of(uint32_t x, uint32_t y, uint32_t w, uint32_t h)
{
    return (x >= w / 2) + 2 * (y >= h / 2);
}

static uint8_t *make_quads(uint32_t w, uint32_t h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            memcpy(p + ((size_t)y * w + x) * 3, quad_rgb[quad_of(x, y, w, h)], 3);
    return p;
}

/* tjCompress2 with no flags: what sa1b_jpeg_encode gave before it went through libjpeg. */
static uint8_t *tj_encode(const uint8_t *rgb, uint32_t w, uint32_t h, int subsamp, int quality,
                          size_t *len)
{
    tjhandle t = tjInitCompress();
    unsigned char *buf = NULL;
    unsigned long n = 0;
    if (tjCompress2(t, rgb, (int)w, 0, (int)h, TJPF_RGB, &buf, &n, subsamp, quality, 0) != 0) {
        tap_diag("tjCompress2: %s", tjGetErrorStr2(t));
        tjDestroy(t);
        return NULL;
    }
    tjDestroy(t);
    uint8_t *out = malloc(n);
    memcpy(out, buf, n);
    tjFree(buf);
    *len = n;
    return out;
}

/* ---- the letterbox's reference ---------------------------------------------
 *
 * From libjpeg, TurboJPEG and the public resize alone, as sa1b_image.h
 * defines the letterbox: the JPEG decoded at the DCT scale
 * sa1b_jpeg_decode_scaled picks; where that decode's planes are YCbCr with
 * the luma plane its full size and each chroma plane an exact integer
 * fraction of it, one smaller (4:2:0 at 1/1, an even size), each plane
 * resized by sa1b_resize_area and converted to RGB as libjpeg converts
 * (its jdcolor.c tables, built here from its FIX() of the JFIF
 * constants); else TurboJPEG's RGB decode resized by sa1b_resize_area. */

/* floor(v / 2^16) */
static int floor_div16(long v)
{
    return (int)(v >= 0 ? v / 65536 : -((-v + 65535) / 65536));
}

static long fix16(double x)
{
    return (long)(x * 65536.0 + 0.5);
}

static uint8_t clamp_byte(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* libjpeg's YCbCr -> RGB of one pixel */
static void ref_ycc(int y, int cb, int cr, uint8_t *rgb)
{
    const long u = cb - 128, v = cr - 128;
    rgb[0] = clamp_byte(y + floor_div16(fix16(1.40200) * v + 32768));
    rgb[1] = clamp_byte(y + floor_div16(-fix16(0.34414) * u + 32768 - fix16(0.71414) * v));
    rgb[2] = clamp_byte(y + floor_div16(fix16(1.77200) * u + 32768));
}

typedef struct ref_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} ref_err;

static void ref_exit(j_common_ptr ci)
{
    longjmp(((ref_err *)(void *)ci->err)->jump, 1);
}

static void ref_emit(j_common_ptr ci, int level)
{
    if (level < 0) ref_exit(ci); /* warnings (cut or corrupt data) fail, as the library's */
}

static void ref_output(j_common_ptr ci) { (void)ci; }

#if JPEG_LIB_VERSION >= 70
#define REF_DCT_H(ci) ((ci)->DCT_h_scaled_size)
#define REF_DCT_V(ci) ((ci)->DCT_v_scaled_size)
#define REF_MIN_DCT_H(d) ((d)->min_DCT_h_scaled_size)
#define REF_MIN_DCT_V(d) ((d)->min_DCT_v_scaled_size)
#else
#define REF_DCT_H(ci) ((ci)->DCT_scaled_size)
#define REF_DCT_V(ci) ((ci)->DCT_scaled_size)
#define REF_MIN_DCT_H(d) ((d)->min_DCT_scaled_size)
#define REF_MIN_DCT_V(d) ((d)->min_DCT_scaled_size)
#endif

typedef struct ref_planes {
    uint8_t *p[3];
    uint32_t w[3], h[3];
    uint32_t up_x[3], up_y[3]; /* the decode's size over the plane's */
    int planar;  /* the planar rule holds */
} ref_planes;

/* The JPEG at scale 1/denom to its three planes (libjpeg's raw output),
 * and whether the planar rule holds.  0, or -1 where libjpeg fails. */
static int ref_decode_planes(const uint8_t *jpg, size_t len, unsigned denom, int always,
                             ref_planes *rp)
{
    static struct jpeg_decompress_struct d;
    static ref_err e;
    memset(rp, 0, sizeof *rp);
    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = ref_exit;
    e.pub.emit_message = ref_emit;
    e.pub.output_message = ref_output;
    jpeg_create_decompress(&d);
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&d);
        for (int k = 0; k < 3; k++) free(rp->p[k]), rp->p[k] = NULL;
        return -1;
    }
    jpeg_mem_src(&d, jpg, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    if (d.jpeg_color_space != JCS_YCbCr || d.num_components != 3) {
        jpeg_destroy_decompress(&d);
        return 0; /* not planar */
    }
    d.raw_data_out = TRUE;
    d.dct_method = JDCT_ISLOW;
    d.scale_num = 1;
    d.scale_denom = denom;
    jpeg_start_decompress(&d);
    size_t stride[3];
    uint32_t rows[3];
    int smaller = 0, exact = 1;
    for (int k = 0; k < 3; k++) {
        jpeg_component_info *ci = &d.comp_info[k];
        rp->w[k] = ci->downsampled_width;
        rp->h[k] = ci->downsampled_height;
        rows[k] = (uint32_t)(ci->v_samp_factor * REF_DCT_V(ci));
        stride[k] = (size_t)ci->width_in_blocks * REF_DCT_H(ci);
        /* the sampling ratio (libjpeg's upsampler's): integer, and the
         * plane that many times over exactly the decode's size */
        const int nx = d.max_h_samp_factor * REF_MIN_DCT_H(&d), dx = ci->h_samp_factor * REF_DCT_H(ci);
        const int ny = d.max_v_samp_factor * REF_MIN_DCT_V(&d), dy = ci->v_samp_factor * REF_DCT_V(ci);
        if (nx % dx || ny % dy) {
            exact = 0;
            continue;
        }
        rp->up_x[k] = (uint32_t)(nx / dx), rp->up_y[k] = (uint32_t)(ny / dy);
        if (rp->up_x[k] > 1 || rp->up_y[k] > 1) smaller = 1;
        if (rp->w[k] * rp->up_x[k] != d.output_width || rp->h[k] * rp->up_y[k] != d.output_height) exact = 0;
        if (k == 0 && (rp->up_x[k] != 1 || rp->up_y[k] != 1)) exact = 0;
    }
    if (!always && (!smaller || !exact)) { /* decided from the header: the data is not read */
        jpeg_destroy_decompress(&d);
        return 0;
    }
    for (int k = 0; k < 3; k++) rp->p[k] = calloc(stride[k] * d.total_iMCU_rows * rows[k], 1);
    for (JDIMENSION m = 0; m < d.total_iMCU_rows; m++) {
        JSAMPROW r[3][64];
        JSAMPARRAY a[3] = {r[0], r[1], r[2]};
        for (int k = 0; k < 3; k++)
            for (uint32_t i = 0; i < rows[k]; i++) r[k][i] = rp->p[k] + ((size_t)m * rows[k] + i) * stride[k];
        jpeg_read_raw_data(&d, a, (JDIMENSION)(d.max_v_samp_factor * REF_MIN_DCT_V(&d)));
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    /* packed planes (w bytes a row) for sa1b_resize_area */
    for (int k = 0; k < 3; k++)
        for (uint32_t y = 0; y < rp->h[k]; y++) memmove(rp->p[k] + (size_t)y * rp->w[k], rp->p[k] + y * stride[k], rp->w[k]);
    rp->planar = smaller && exact;
    return 0;
}

static void ref_free(ref_planes *rp)
{
    for (int k = 0; k < 3; k++) free(rp->p[k]);
}

/* The reference letterbox image (new_w x new_h RGB, packed) of g into ref;
 * *planar: which rule made it.  SA1B_OK or an error (of either decoder). */
static int letterbox_ref(sa1b_imgctx *c, const uint8_t *jpg, size_t len, const sa1b_letterbox *g,
                         uint8_t *ref, int *planar)
{
    const uint8_t *dec;
    uint32_t bw, bh;
    sa1b_error err;
    *planar = 0;
    int rc = sa1b_jpeg_decode_scaled(c, jpg, len, g->new_w, g->new_h, &dec, &bw, &bh, &err);
    if (rc != SA1B_OK) return rc;
    if (bw == g->new_w && bh == g->new_h) { /* the DCT scale is the target: no resize */
        memcpy(ref, dec, (size_t)bw * bh * 3);
        return SA1B_OK;
    }
    unsigned denom = 1;
    while (denom < 8 && (g->orig_w + denom - 1) / denom != bw) denom *= 2;
    ref_planes rp;
    if (ref_decode_planes(jpg, len, denom, 0, &rp) != 0) return SA1B_EFORMAT;
    if (!rp.planar) {
        ref_free(&rp);
        return sa1b_resize_area(dec, bw, bh, ref, g->new_w, g->new_h, 3, &err);
    }
    const size_t n = (size_t)g->new_w * g->new_h;
    uint8_t *q = malloc(3 * n);
    image_resizer *r = image_resizer_new();
    for (int k = 0; k < 3 && rc == SA1B_OK; k++) {
        image_resizer_set_up(r, rp.up_x[k], rp.up_y[k]);
        rc = image_resize(r, rp.p[k], rp.w[k], rp.h[k], q + k * n, g->new_w, g->new_w, g->new_h, 1,
                          IMAGE_RESIZE_PORTABLE, NULL, &err);
    }
    image_resizer_free(r);
    for (size_t i = 0; rc == SA1B_OK && i < n; i++) ref_ycc(q[i], q[n + i], q[2 * n + i], ref + 3 * i);
    free(q);
    ref_free(&rp);
    *planar = rc == SA1B_OK;
    return rc;
}

static int near(const uint8_t *p, const uint8_t *q, int tol)
{
    for (int c = 0; c < 3; c++)
        if (abs((int)p[c] - (int)q[c]) > tol) return 0;
    return 1;
}

static void check_letterbox(sa1b_imgctx *c, uint32_t w, uint32_t h, uint32_t S, uint32_t ew,
                            uint32_t eh)
{
    size_t len;
    uint8_t *rgb = make_quads(w, h);
    uint8_t *jpg = tj_encode(rgb, w, h, TJSAMP_420, 95, &len);
    uint8_t *out = malloc((size_t)S * S * 3);
    memset(out, 0x77, (size_t)S * S * 3);   /* padding must be written, not assumed */
    sa1b_letterbox lb;
    sa1b_error err;
    int rc = sa1b_jpeg_letterbox(c, jpg, len, S, out, &lb, &err);
    tap_is_int(rc, SA1B_OK, "%ux%u -> S=%u letterbox (%s)", w, h, S, rc ? err.msg : "ok");
    if (rc != SA1B_OK) goto done;
    tap_ok(lb.orig_w == w && lb.orig_h == h && lb.new_w == ew && lb.new_h == eh && lb.S == S,
           "%ux%u -> S=%u: new size %ux%u (want %ux%u)", w, h, S, lb.new_w, lb.new_h, ew, eh);
    tap_is_close(lb.scale, (double)S / (w > h ? w : h), 1e-15, "%ux%u -> S=%u: scale", w, h, S);
    int pad_ok = 1, col_ok = 1;
    for (uint32_t y = 0; y < S; y++)
        for (uint32_t x = 0; x < S; x++) {
            const uint8_t *p = out + ((size_t)y * S + x) * 3;
            if (x >= lb.new_w || y >= lb.new_h) {
                pad_ok &= p[0] == 0 && p[1] == 0 && p[2] == 0;
                continue;
            }
            /* away from the quadrant edges (3 output pixels + JPEG block effects) */
            double sx = (x + 0.5) / lb.scale, sy = (y + 0.5) / lb.scale;
            double mx = fabs(sx - w / 2), my = fabs(sy - h / 2);
            double margin = 3.0 / lb.scale + 16;
            if (mx < margin || my < margin) continue;
            int q = quad_of((uint32_t)sx, (uint32_t)sy, w, h);
            if (!near(p, quad_rgb[q], 8)) {
                if (col_ok)
                    tap_diag("pixel (%u,%u) = %u %u %u, want %u %u %u", x, y, p[0], p[1], p[2],
                             quad_rgb[q][0], quad_rgb[q][1], quad_rgb[q][2]);
                col_ok = 0;
            }
        }
    tap_ok(pad_ok, "%ux%u -> S=%u: padding is zero", w, h, S);
    tap_ok(col_ok, "%ux%u -> S=%u: flat colours preserved within 8", w, h, S);

    /* the letterbox is exactly its reference */
    uint8_t *ref = malloc((size_t)lb.new_w * lb.new_h * 3);
    int planar = 0;
    rc = letterbox_ref(c, jpg, len, &lb, ref, &planar);
    int same = rc == SA1B_OK;
    for (uint32_t y = 0; same && y < lb.new_h; y++)
        same = memcmp(out + (size_t)y * S * 3, ref + (size_t)y * lb.new_w * 3,
                      (size_t)lb.new_w * 3) == 0;
    tap_ok(same, "%ux%u -> S=%u: equals its reference (%s)", w, h, S,
           planar ? "planes resized, then RGB" : "RGB decode, then resized");
    free(ref);
done:
    free(out);
    free(jpg);
    free(rgb);
}

static void test_scale_choice(sa1b_imgctx *c)
{
    static const uint32_t t[][6] = {
        /* w, h, min_w, min_h, expected out w, h */
        {600, 400, 256, 171, 300, 200},  {600, 400, 75, 50, 75, 50},
        {600, 400, 76, 50, 150, 100},    {600, 400, 600, 400, 600, 400},
        {600, 400, 1000, 1000, 600, 400}, {600, 400, 0, 0, 75, 50},
        {333, 217, 42, 28, 42, 28},       {333, 217, 43, 28, 84, 55},
        {333, 217, 300, 100, 333, 217},   {400, 600, 171, 256, 200, 300},
        {600, 400, 226, 150, 300, 200},
        /* only 1/8, 1/4, 1/2, 1/1: not 3/8 (225x150) nor 5/8 (1250x938) */
        {600, 400, 225, 150, 300, 200},   {2000, 1500, 1024, 768, 2000, 1500},
        {2250, 1500, 1024, 683, 1125, 750}, {2000, 1500, 256, 192, 500, 375},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t *rgb = make_quads(t[i][0], t[i][1]);
        size_t len;
        uint8_t *jpg = tj_encode(rgb, t[i][0], t[i][1], TJSAMP_444, 95, &len);
        const uint8_t *dec;
        uint32_t dw = 0, dh = 0;
        sa1b_error err;
        int rc = sa1b_jpeg_decode_scaled(c, jpg, len, t[i][2], t[i][3], &dec, &dw, &dh, &err);
        tap_ok(rc == SA1B_OK && dw == t[i][4] && dh == t[i][5],
               "DCT scale: %ux%u at least %ux%u -> %ux%u (got %ux%u)", t[i][0], t[i][1], t[i][2],
               t[i][3], t[i][4], t[i][5], dw, dh);
        free(jpg);
        free(rgb);
    }
}

/* Exact box filter in double precision. */
static double ref_value(const uint8_t *src, uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh,
                        int ch, uint32_t x, uint32_t y, int c)
{
    double x0 = (double)x * sw / dw, x1 = (double)(x + 1) * sw / dw;
    double y0 = (double)y * sh / dh, y1 = (double)(y + 1) * sh / dh;
    double sum = 0;
    for (uint32_t j = 0; j < sh; j++) {
        double oy = fmin(y1, j + 1.0) - fmax(y0, (double)j);
        if (oy <= 0) continue;
        for (uint32_t i = 0; i < sw; i++) {
            double ox = fmin(x1, i + 1.0) - fmax(x0, (double)i);
            if (ox <= 0) continue;
            sum += ox * oy * src[((size_t)j * sw + i) * ch + c];
        }
    }
    return sum / ((x1 - x0) * (y1 - y0));
}

/* The documented bound: a result may differ from the exact rounding only
 * where the exact mean is within this of a .5 boundary. */
#define RESIZE_TOL (1.0 / 128)

static void test_resize(void)
{
    uint64_t rng = 12345;
#define NEXT() (rng = rng * 6364136223846793005ULL + 1442695040888963407ULL, (uint32_t)(rng >> 33))
    int all_ok = 1, n_cases = 0, n_exact_diff = 0;
    double worst = 0;
    for (int trial = 0; trial < 300; trial++) {
        uint32_t sw = 1 + NEXT() % 37, sh = 1 + NEXT() % 37;
        uint32_t dw = 1 + NEXT() % 37, dh = 1 + NEXT() % 37;
        if (trial < 100) { /* mostly downscaling, as in the pipeline */
            dw = 1 + NEXT() % sw;
            dh = 1 + NEXT() % sh;
        }
        int ch = 1 + (int)(NEXT() % 4);
        uint8_t *src = malloc((size_t)sw * sh * ch), *dst = malloc((size_t)dw * dh * ch);
        for (size_t i = 0; i < (size_t)sw * sh * ch; i++)
            src[i] = trial % 3 == 0 ? (uint8_t)(NEXT() % 2 * 255) : (uint8_t)NEXT();
        sa1b_error err;
        if (sa1b_resize_area(src, sw, sh, dst, dw, dh, ch, &err) != SA1B_OK) {
            all_ok = 0;
            tap_diag("resize %ux%u -> %ux%u: %s", sw, sh, dw, dh, err.msg);
        }
        for (uint32_t y = 0; y < dh && all_ok; y++)
            for (uint32_t x = 0; x < dw; x++)
                for (int c = 0; c < ch; c++) {
                    double r = ref_value(src, sw, sh, dw, dh, ch, x, y, c);
                    int got = dst[((size_t)y * dw + x) * ch + c];
                    int exact = (int)floor(r + 0.5);
                    if (got != exact) n_exact_diff++;
                    if (fabs(got - r) - 0.5 > worst) worst = fabs(got - r) - 0.5;
                    if (fabs(got - r) > 0.5 + RESIZE_TOL) {
                        if (all_ok)
                            tap_diag("%ux%u -> %ux%u ch %d at (%u,%u,%d): got %d, exact %.6f", sw,
                                     sh, dw, dh, ch, x, y, c, got, r);
                        all_ok = 0;
                    }
                }
        n_cases++;
        free(src);
        free(dst);
    }
    tap_ok(all_ok, "resize_area equals the double-precision box filter, rounded (%d cases; %d "
                   "values within %g of a .5 boundary rounded the other way, worst %.5f)",
           n_cases, n_exact_diff, RESIZE_TOL, worst);

    /* extreme ratios (thousands of taps): weights must still sum to one */
    static const uint32_t ext[][4] = {{26000, 2, 1, 2}, {2, 26000, 2, 1}, {30001, 3, 7, 1},
                                      {3, 30001, 1, 5}};
    for (size_t e = 0; e < 4; e++) {
        uint32_t sw = ext[e][0], sh = ext[e][1], dw = ext[e][2], dh = ext[e][3];
        uint8_t *src = malloc((size_t)sw * sh), *dst = malloc((size_t)dw * dh);
        for (size_t i = 0; i < (size_t)sw * sh; i++) src[i] = (uint8_t)(i * 37 % 251);
        int ok = sa1b_resize_area(src, sw, sh, dst, dw, dh, 1, NULL) == SA1B_OK;
        double worst_e = 0;
        for (uint32_t y = 0; ok && y < dh; y++)
            for (uint32_t x = 0; x < dw; x++) {
                double r = ref_value(src, sw, sh, dw, dh, 1, x, y, 0);
                double d = fabs(dst[(size_t)y * dw + x] - r);
                if (d > worst_e) worst_e = d;
            }
        tap_ok(ok && worst_e <= 0.5 + RESIZE_TOL, "extreme ratio %ux%u -> %ux%u (worst %.4f)", sw,
               sh, dw, dh, worst_e);
        free(src);
        free(dst);
    }

    /* exact cases: identity, 2x2 averaging */
    uint8_t a[4 * 2 * 3], b[2 * 1 * 3], id[4 * 2 * 3];
    for (int i = 0; i < 24; i++) a[i] = (uint8_t)(i * 10);
    sa1b_resize_area(a, 4, 2, id, 4, 2, 3, NULL);
    tap_ok(memcmp(a, id, sizeof a) == 0, "identity resize is a copy");
    sa1b_resize_area(a, 4, 2, b, 2, 1, 3, NULL);
    /* dst(0,0,c) = mean of a at x 0..1, y 0..1 = (c*10 + (3+c)*10 + (12+c)*10 + (15+c)*10) / 4 */
    tap_ok(b[0] == 75 && b[1] == 85 && b[2] == 95 && b[3] == 135, "2x2 box means exact (%u %u %u %u)",
           b[0], b[1], b[2], b[3]);
    sa1b_error err;
    tap_is_int(sa1b_resize_area(a, 4, 2, b, 0, 1, 3, &err), SA1B_EINVAL, "zero size rejected");
    tap_is_int(sa1b_resize_area(a, 4, 2, b, 2, 1, 5, &err), SA1B_EINVAL, "5 channels rejected");
}

/* ---- SIMD kernels against the portable reference, byte for byte ---------- */

static uint64_t prng = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(uint32_t n)   /* uniform-ish in [0, n) */
{
    prng = prng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(prng >> 33) % n;
}

/* Fills src with one of several contents: random, extremes, flat, ramps. */
static void fill_src(uint8_t *src, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: src[i] = (uint8_t)rnd(256); break;
        case 1: src[i] = rnd(2) ? 255 : 0; break;
        case 2: src[i] = 255; break;
        case 3: src[i] = (uint8_t)(i * 7 + i / 97); break;
        default: src[i] = (uint8_t)(rnd(3) == 0 ? 255 : 254 - rnd(3)); break;
        }
    }
}

/* Resizes src with impl and with the portable path (both through resizers
 * kept across calls, and impl also through a fresh one), destination rows
 * padded to a stride with canary bytes; 1 when every byte agrees. */
static int same_as_portable(image_resizer *ra, image_resizer *rp, int impl, const uint8_t *src,
                            uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh, int ch,
                            image_resize_stats *st)
{
    size_t row = (size_t)dw * ch, stride = row + rnd(3) * 5;
    size_t n = stride * dh;
    uint8_t *a = malloc(n), *b = malloc(n), *f = malloc(n);
    memset(a, 0xA5, n);
    memset(b, 0xA5, n);
    memset(f, 0xA5, n);
    sa1b_error err;
    int ok = image_resize(ra, src, sw, sh, a, stride, dw, dh, ch, impl, st, &err) == SA1B_OK;
    ok &= image_resize(rp, src, sw, sh, b, stride, dw, dh, ch, IMAGE_RESIZE_PORTABLE, NULL,
                       &err) == SA1B_OK;
    image_resizer *fresh = image_resizer_new();
    ok &= image_resize(fresh, src, sw, sh, f, stride, dw, dh, ch, impl, NULL, &err) == SA1B_OK;
    image_resizer_free(fresh);
    ok = ok && memcmp(a, b, n) == 0 && memcmp(f, b, n) == 0;
    if (!ok) {
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i] || f[i] != b[i]) {
                tap_diag("%ux%u -> %ux%u ch %d: byte %zu (row %zu, col %zu): impl %u (fresh %u), "
                         "portable %u", sw, sh, dw, dh, ch, i, i / stride, i % stride, a[i], f[i],
                         b[i]);
                break;
            }
    }
    free(a);
    free(b);
    free(f);
    return ok;
}

static void test_resize_paths(void)
{
    tap_ok(image_resize_supported(IMAGE_RESIZE_PORTABLE) && image_resize_supported(IMAGE_RESIZE_AUTO),
           "portable and automatic resize always available");
    int impls[3] = {IMAGE_RESIZE_AUTO, IMAGE_RESIZE_AVX2, IMAGE_RESIZE_AVX512};
    const char *names[3] = {"auto", "avx2", "avx512"};
    for (int m = 0; m < 3; m++) {
        int impl = impls[m];
        if (!image_resize_supported(impl)) {
            tap_skip(3, "resize kernel not supported by this build or CPU");
            continue;
        }
        image_resizer *ra = image_resizer_new(), *rp = image_resizer_new();
        image_resize_stats st = {0};
        int all = 1, cases = 0, simd_cases = 0;
        for (int trial = 0; trial < 1500 && all; trial++) {
            uint32_t sw, sh, dw, dh;
            int ch = 1 + (int)rnd(4);
            switch (trial % 6) {
            case 0: /* tiny */
                sw = 1 + rnd(12), sh = 1 + rnd(6), dw = 1 + rnd(12), dh = 1 + rnd(6);
                break;
            case 1: /* 1:1 */
                sw = dw = 1 + rnd(200), sh = dh = 1 + rnd(8);
                break;
            case 2: /* upscaling */
                dw = 2 + rnd(300), dh = 2 + rnd(10), sw = 1 + rnd(dw), sh = 1 + rnd(dh);
                break;
            case 3: /* DCT-scaled downscaling: ratio in [1, 2] */
                dw = 1 + rnd(300), dh = 1 + rnd(10);
                sw = dw + rnd(dw + 1), sh = dh + rnd(dh + 1);
                break;
            case 4: /* larger ratios, up to 5 */
                dw = 1 + rnd(120), dh = 1 + rnd(8), sw = dw + rnd(4 * dw + 1), sh = dh + rnd(4 * dh + 1);
                break;
            default: /* anything */
                sw = 1 + rnd(400), sh = 1 + rnd(12), dw = 1 + rnd(400), dh = 1 + rnd(12);
                break;
            }
            size_t n = (size_t)sw * sh * ch;
            uint8_t *src = malloc(n);
            fill_src(src, n, (int)rnd(5));
            image_resize_stats one = {0};
            all &= same_as_portable(ra, rp, impl, src, sw, sh, dw, dh, ch, &one);
            if (trial % 7 == 0) { /* the same geometry again, other pixels */
                fill_src(src, n, (int)rnd(5));
                all &= same_as_portable(ra, rp, impl, src, sw, sh, dw, dh, ch, &one);
            }
            /* and the public one-shot call */
            uint8_t *pub = malloc((size_t)dw * dh * ch), *ref = malloc((size_t)dw * dh * ch);
            int pok = sa1b_resize_area(src, sw, sh, pub, dw, dh, ch, NULL) == SA1B_OK &&
                      image_resize(rp, src, sw, sh, ref, (size_t)dw * ch, dw, dh, ch,
                                   IMAGE_RESIZE_PORTABLE, NULL, NULL) == SA1B_OK &&
                      memcmp(pub, ref, (size_t)dw * dh * ch) == 0;
            if (!pok) tap_diag("sa1b_resize_area %ux%u -> %ux%u ch %d differs", sw, sh, dw, dh, ch);
            all &= pok;
            free(pub);
            free(ref);
            simd_cases += one.hrows_simd > 0 && one.vrows_simd > 0;
            st.hrows_simd += one.hrows_simd;
            st.hrows_portable += one.hrows_portable;
            st.vrows_simd += one.vrows_simd;
            st.vrows_portable += one.vrows_portable;
            cases++;
            free(src);
        }
        tap_ok(all, "%s resize equals the portable reference byte for byte (%d random cases)",
               names[m], cases);
        tap_diag("%s: %d cases used both SIMD kernels; rows SIMD/portable: horizontal %llu/%llu, "
                 "vertical %llu/%llu", names[m], simd_cases, (unsigned long long)st.hrows_simd,
                 (unsigned long long)st.hrows_portable, (unsigned long long)st.vrows_simd,
                 (unsigned long long)st.vrows_portable);
        /* auto runs SIMD kernels where the CPU has some (else the reference) */
        int simd = impl != IMAGE_RESIZE_AUTO || image_resize_supported(IMAGE_RESIZE_AVX2);
        if (simd)
            tap_ok(simd_cases > cases / 4, "%s: the SIMD kernels ran in %d of %d cases",
                   names[m], simd_cases, cases);
        else
            tap_ok(simd_cases == 0, "%s: no SIMD kernels here, the reference ran", names[m]);

        /* the pipeline's shapes: after the DCT-scaled decode, and beyond */
        static const uint32_t big[][5] = {
            {1125, 750, 1024, 683, 3}, {282, 188, 256, 171, 3}, {2250, 1500, 1024, 683, 3},
            {750, 1125, 683, 1024, 3}, {563, 375, 512, 341, 3}, {100, 50, 256, 128, 3},
            {1125, 750, 1024, 683, 1}, {1125, 750, 1024, 683, 4}, {1500, 1000, 1024, 683, 2},
            {1024, 683, 1024, 683, 3},
        };
        int big_ok = 1, big_simd = 1;
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
            uint32_t sw = big[i][0], sh = big[i][1], dw = big[i][2], dh = big[i][3];
            int ch = (int)big[i][4];
            size_t n = (size_t)sw * sh * ch;
            uint8_t *src = malloc(n);
            fill_src(src, n, (int)(i % 5));
            image_resize_stats one = {0};
            big_ok &= same_as_portable(ra, rp, impl, src, sw, sh, dw, dh, ch, &one);
            /* ratios up to 2 (what the DCT-scaled decode leaves) take the SIMD kernels,
             * AVX-512's horizontal pass where asked for */
            if (simd && sw <= 2 * dw &&
                (one.hrows_simd == 0 || one.vrows_simd == 0 ||
                 (impl == IMAGE_RESIZE_AVX512 && one.hrows_avx512 != one.hrows_simd))) {
                tap_diag("%ux%u -> %ux%u ch %d: no SIMD (or not AVX-512's)", sw, sh, dw, dh, ch);
                big_simd = 0;
            }
            free(src);
        }
        tap_ok(big_ok && big_simd, "%s: pipeline-sized resizes equal the reference%s", names[m],
               simd ? ", SIMD used" : "");
        image_resizer_free(ra);
        image_resizer_free(rp);
    }
    sa1b_error err;
    image_resizer *r = image_resizer_new();
    uint8_t px[12] = {0}, out[12];
    tap_is_int(image_resize(r, px, 2, 2, out, 2, 2, 2, 3, IMAGE_RESIZE_PORTABLE, NULL, &err),
               SA1B_EINVAL, "stride shorter than a row rejected");
    tap_is_int(image_resize(r, px, 2, 2, out, 6, 2, 2, 3, 99, NULL, &err), SA1B_EINVAL,
               "unknown implementation rejected");
    image_resizer_free(r);
    image_resizer_free(NULL);
}

static void test_bad(sa1b_imgctx *c)
{
    size_t len;
    uint8_t *rgb = make_quads(160, 120);
    uint8_t *jpg = tj_encode(rgb, 160, 120, TJSAMP_420, 95, &len);
    uint8_t out[64 * 64 * 3];
    sa1b_error err;
    uint32_t w, h;
    int rc = sa1b_jpeg_size(c, jpg, len, &w, &h, &err);
    tap_ok(rc == SA1B_OK && w == 160 && h == 120, "jpeg_size reads the header");

    rc = sa1b_jpeg_letterbox(c, jpg, len / 2, 64, out, NULL, &err);
    tap_ok(rc == SA1B_ETRUNC || rc == SA1B_EFORMAT, "truncated JPEG rejected: %d %s", rc, err.msg);
    tap_ok(strncmp(err.msg, "jpeg: ", 6) == 0, "message says jpeg");
    rc = sa1b_jpeg_letterbox(c, jpg, len - 2, 64, out, NULL, &err);   /* no EOI marker */
    tap_ok(rc != SA1B_OK, "JPEG without EOI rejected: %s", err.msg);
    rc = sa1b_jpeg_letterbox(c, jpg, 300, 64, out, NULL, &err);
    tap_ok(rc != SA1B_OK, "JPEG cut in its headers rejected: %s", err.msg);

    static const uint8_t garbage[] = "this is not a jpeg at all, not even close";
    rc = sa1b_jpeg_letterbox(c, garbage, sizeof garbage, 64, out, NULL, &err);
    tap_is_int(rc, SA1B_EFORMAT, "garbage rejected");
    tap_is_str(err.msg, "jpeg: not a JPEG file", "garbage message");
    rc = sa1b_jpeg_letterbox(c, garbage, 0, 64, out, NULL, &err);
    tap_is_int(rc, SA1B_EFORMAT, "empty input rejected");

    /* corrupt entropy data: flip bytes in the middle of the scan */
    uint8_t *bad = malloc(len);
    memcpy(bad, jpg, len);
    size_t sos = 0;
    for (size_t i = 2; i + 1 < len; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xDA) {
            sos = i;
            break;
        }
    size_t mid = sos + (len - sos) / 2;
    tap_ok(sos > 0 && mid + 20 < len, "found the scan (%zu of %zu)", sos, len);
    for (size_t i = mid; i < mid + 8; i++) bad[i] = 0xFF;
    bad[mid + 8] = 0xD0;   /* a stray restart marker inside the scan */
    rc = sa1b_jpeg_letterbox(c, bad, len, 64, out, NULL, &err);
    tap_ok(rc != SA1B_OK, "corrupt scan data rejected: %s", rc ? err.msg : "(decoded)");

    /* absurd sizes in the SOF header: rejected before allocating */
    size_t sof = 0;
    for (size_t i = 2; i + 9 < len; i++)
        if (jpg[i] == 0xFF && (jpg[i + 1] == 0xC0 || jpg[i + 1] == 0xC2)) {
            sof = i;
            break;
        }
    tap_ok(sof > 0, "found SOF marker");
    memcpy(bad, jpg, len);
    bad[sof + 5] = 0xEA; bad[sof + 6] = 0x60;   /* height 60000 */
    bad[sof + 7] = 0x00; bad[sof + 8] = 0x10;   /* width 16 */
    rc = sa1b_jpeg_size(c, bad, len, &w, &h, &err);
    tap_is_int(rc, SA1B_ERANGE, "60000 rows rejected");
    tap_is_str(err.msg, "jpeg: 16x60000 too large", "absurd size message");
    bad[sof + 5] = 0x4E; bad[sof + 6] = 0x20;   /* 20000 x 20000 = 4e8 > 2^28 pixels */
    bad[sof + 7] = 0x4E; bad[sof + 8] = 0x20;
    rc = sa1b_jpeg_letterbox(c, bad, len, 64, out, NULL, &err);
    tap_is_int(rc, SA1B_ERANGE, "20000x20000 rejected");

    /* exact-size decode */
    uint8_t *full = malloc(160 * 120 * 3);
    rc = sa1b_jpeg_decode(c, jpg, len, full, 160, 120, &err);
    tap_is_int(rc, SA1B_OK, "decode at full size");
    tap_ok(near(full + (30 * 160 + 40) * 3, quad_rgb[0], 8) &&
               near(full + (90 * 160 + 120) * 3, quad_rgb[3], 8),
           "full decode colours");
    rc = sa1b_jpeg_decode(c, jpg, len, full, 120, 160, &err);
    tap_is_int(rc, SA1B_EMISMATCH, "decode with the wrong size: EMISMATCH");
    free(full);

    /* encode round trip */
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    rc = sa1b_jpeg_encode(c, rgb, 160, 120, 90, SA1B_JPEG_OPTIMIZED, &enc, &enc_len, &err);
    tap_ok(rc == SA1B_OK && enc_len > 100 && enc[0] == 0xFF && enc[1] == 0xD8, "encode");
    rc = sa1b_jpeg_size(c, enc, enc_len, &w, &h, &err);
    tap_ok(rc == SA1B_OK && w == 160 && h == 120, "encoded size");
    free(enc);
    tap_is_int(sa1b_jpeg_encode(c, rgb, 160, 120, 0, SA1B_JPEG_OPTIMIZED, &enc, &enc_len, &err),
               SA1B_EINVAL, "quality 0 rejected");
    tap_is_int(sa1b_jpeg_encode(c, rgb, 160, 120, 90, 2, &enc, &enc_len, &err), SA1B_EINVAL,
               "unknown Huffman tables rejected");
    tap_ok(enc == NULL && enc_len == 0, "nothing returned on an error");

    /* grayscale JPEG: letterboxed to grey RGB */
    uint8_t *gray = tj_encode(rgb, 160, 120, TJSAMP_GRAY, 95, &len);
    rc = sa1b_jpeg_letterbox(c, gray, len, 64, out, NULL, &err);
    tap_ok(rc == SA1B_OK && out[0] == out[1] && out[1] == out[2], "grayscale JPEG letterboxed");
    free(gray);
    free(bad);
    free(jpg);
    free(rgb);
}

/* sa1b_jpeg_decode_region: the region's bytes equal the whole decode's for
 * every chroma subsampling, progressive JPEGs (decoded whole) and regions
 * from 1x1 to the full image, with and without column cropping; rows from h
 * on are not touched; errors are clean and leave the context usable. */
static uint8_t *make_texture(uint32_t w, uint32_t h, uint32_t seed)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    uint32_t r = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        size_t px = i / 3;
        p[i] = (uint8_t)((px % w) * 3 + (px / w) * 2 + (r & 63) + 60 * (i % 3));
    }
    return p;
}

static uint8_t *tj_encode_flags(const uint8_t *rgb, uint32_t w, uint32_t h, int subsamp, int flags,
                                size_t *len)
{
    tjhandle t = tjInitCompress();
    unsigned char *buf = NULL;
    unsigned long n = 0;
    uint8_t *out = NULL;
    if (tjCompress2(t, rgb, (int)w, 0, (int)h, TJPF_RGB, &buf, &n, subsamp, 90, flags) == 0) {
        out = malloc(n);
        memcpy(out, buf, n);
        *len = n;
    }
    tjFree(buf);
    tjDestroy(t);
    return out;
}

/* An allocation that fails inside libjpeg is SA1B_ENOMEM, not a corrupt
 * JPEG (sa1b-shard skips a bad sample, and a shard without it would look
 * complete): a progressive JPEG whose header claims 16000x16000 needs its
 * whole coefficient buffer (about 770 MB) before reading any scan; in a
 * child whose address space allows 200 MB more than it uses, libjpeg's
 * malloc of it fails.  Both decoders: TurboJPEG's (decode_scaled) and the
 * letterbox's banded libjpeg one.  Not under AddressSanitizer (it cannot
 * run with a bounded address space). */
static int decode_in_bounded_child(const uint8_t *jpg, size_t len, int letterbox)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1) _exit(100);
        fclose(f);
        struct rlimit rl;
        rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)200 << 20);
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(101);
        sa1b_imgctx *c = NULL;
        sa1b_error err;
        if (sa1b_imgctx_new(&c, &err) != SA1B_OK) _exit(102);
        static uint8_t out[64 * 64 * 3];
        const uint8_t *rgb;
        uint32_t w, h;
        int rc = letterbox ? sa1b_jpeg_letterbox(c, jpg, len, 64, out, NULL, &err)
                           : sa1b_jpeg_decode_scaled(c, jpg, len, 1, 1, &rgb, &w, &h, &err);
        _exit(rc);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1000;
    return WEXITSTATUS(st);
}

static void test_decoder_nomem(void)
{
#if defined(__SANITIZE_ADDRESS__)
    tap_skip(2, "AddressSanitizer: no bounded address space");
    return;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    tap_skip(2, "AddressSanitizer: no bounded address space");
    return;
#endif
#endif
    size_t len;
    uint8_t *rgb = make_quads(64, 64);
    uint8_t *jpg = tj_encode_flags(rgb, 64, 64, TJSAMP_420, TJFLAG_PROGRESSIVE, &len);
    size_t sof = 0;
    for (size_t i = 2; jpg && i + 9 < len; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC2) {
            sof = i;
            break;
        }
    if (sof) {
        jpg[sof + 5] = 0x3E, jpg[sof + 6] = 0x80; /* height 16000 */
        jpg[sof + 7] = 0x3E, jpg[sof + 8] = 0x80; /* width 16000 */
    }
    int want = SA1B_ENOMEM;
    int rc = sof ? decode_in_bounded_child(jpg, len, 0) : -1;
    tap_ok(rc == want, "libjpeg out of memory in TurboJPEG's decode: ENOMEM (exit %d, want %d)", rc, want);
    rc = sof ? decode_in_bounded_child(jpg, len, 1) : -1;
    tap_ok(rc == want, "libjpeg out of memory in the letterbox's decode: ENOMEM (exit %d, want %d)", rc, want);
    free(jpg);
    free(rgb);
}

/* The letterbox decodes through libjpeg into a band of rows that the resize
 * takes as they come (image_letterbox): the same pixels as TurboJPEG's whole
 * decode then the resize, on textured photographs of every subsampling,
 * progressive ones, at every DCT scale the letterbox picks (1/1 included:
 * 2000x1500 -> 1024), widths and heights off the MCU grid; and the same
 * verdict on cut and corrupt data. */
static int letterbox_vs_tj(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S,
                           uint8_t *out, int *both_failed, int *planar)
{
    sa1b_letterbox lb;
    sa1b_error err;
    int rc = sa1b_jpeg_letterbox(c, jpg, len, S, out, &lb, &err);
    uint32_t w, h;
    int rs = sa1b_jpeg_size(c, jpg, len, &w, &h, &err);
    sa1b_letterbox g;
    if (rs == SA1B_OK) rs = sa1b_letterbox_geometry(w, h, S, &g, &err);
    uint8_t *ref = rs == SA1B_OK ? malloc((size_t)g.new_w * g.new_h * 3) : NULL;
    int is_planar = 0;
    if (ref) rs = letterbox_ref(c, jpg, len, &g, ref, &is_planar);
    if (planar) *planar = is_planar;
    *both_failed = rc != SA1B_OK && rs != SA1B_OK;
    int same = rc == SA1B_OK && rs == SA1B_OK;
    for (uint32_t y = 0; same && y < g.new_h; y++)
        same = memcmp(out + (size_t)y * S * 3, ref + (size_t)y * g.new_w * 3, (size_t)g.new_w * 3) == 0;
    free(ref);
    return same || *both_failed;
}

static void test_letterbox_stream(sa1b_imgctx *c)
{
    /* planar: the way the letterbox must go */
    static const struct { uint32_t w, h, S; int samp, flags, planar; } t[] = {
        {2000, 1500, 1024, TJSAMP_420, 0, 1},   /* 1/1, then the resize */
        {2250, 1500, 1024, TJSAMP_420, 0, 0},   /* 1/2: libjpeg's chroma is full size */
        {1500, 2250, 1024, TJSAMP_420, TJFLAG_PROGRESSIVE, 0},
        {1500, 2000, 1024, TJSAMP_420, TJFLAG_PROGRESSIVE, 1},
        {1001, 777, 300, TJSAMP_422, 0, 0},     /* 1/2, an odd width */
        {1000, 778, 300, TJSAMP_422, 0, 1},     /* 1/2: libjpeg's 4:2:2 chroma half as wide */
        {1600, 900, 1000, TJSAMP_411, 0, 1},    /* 1/1, chroma a quarter as wide */
        {1001, 777, 600, TJSAMP_422, 0, 0},     /* 1/1, an odd width: chroma covers 1002 */
        {1000, 777, 600, TJSAMP_422, 0, 1},     /* 1/1, chroma half as wide */
        {777, 1001, 300, TJSAMP_444, 0, 0},
        {1234, 999, 200, TJSAMP_440, 0, 1},     /* 1/4: libjpeg's chroma half as tall */
        {1234, 998, 700, TJSAMP_440, 0, 1},     /* 1/1, chroma half as tall */
        {999, 517, 120, TJSAMP_GRAY, 0, 0},
        {1300, 901, 640, TJSAMP_420, TJFLAG_PROGRESSIVE, 0},
        {1300, 902, 1000, TJSAMP_420, 0, 1},    /* 1/1 and up */
        {67, 2000, 64, TJSAMP_420, 0, 0},       /* 1/8, a source row of a few bytes */
        {3, 900, 64, TJSAMP_444, 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t *rgb = make_texture(t[i].w, t[i].h, (uint32_t)i + 7);
        size_t len = 0;
        uint8_t *jpg = tj_encode_flags(rgb, t[i].w, t[i].h, t[i].samp, t[i].flags, &len);
        uint8_t *out = malloc((size_t)t[i].S * t[i].S * 3);
        int failed = 0, planar = 0;
        const int same_px = jpg && letterbox_vs_tj(c, jpg, len, t[i].S, out, &failed, &planar);
        tap_ok(same_px && !failed,
               "%ux%u (subsampling %d%s) -> S=%u: the letterbox gives its reference's pixels (%s)",
               t[i].w, t[i].h, t[i].samp, t[i].flags ? ", progressive" : "", t[i].S,
               planar ? "planes resized, then RGB" : "RGB decode, then resized");
        tap_ok(planar == t[i].planar, "%ux%u (subsampling %d) -> S=%u: %s", t[i].w, t[i].h,
               t[i].samp, t[i].S, t[i].planar ? "the planar way" : "the RGB way");
        if (jpg && i < 4) {
            /* cut anywhere: an error from both (never a picture from one) */
            int agree = 1;
            for (int k = 1; k <= 8 && agree; k++) {
                size_t cut = k < 8 ? len * (size_t)k / 8 : len - 2;
                agree = letterbox_vs_tj(c, jpg, cut, t[i].S, out, &failed, NULL) && failed;
            }
            tap_ok(agree, "%ux%u%s cut at 8 places: both fail", t[i].w, t[i].h,
                   t[i].flags ? " progressive" : "");
            /* a byte of the entropy-coded data changed: the same verdict,
             * and where both decode, the same pixels */
            int same = 1;
            for (int k = 1; k <= 6 && same; k++) {
                size_t at = len / 2 + (size_t)k * (len / 16);
                uint8_t keep = jpg[at];
                jpg[at] = (uint8_t)(keep ^ (0x11u << (k % 4)));
                if (jpg[at] == 0xFF || keep == 0xFF) jpg[at] = keep;
                same = letterbox_vs_tj(c, jpg, len, t[i].S, out, &failed, NULL);
                jpg[at] = keep;
            }
            tap_ok(same, "%ux%u%s with corrupt bytes: the same verdict and pixels", t[i].w,
                   t[i].h, t[i].flags ? " progressive" : "");
        }
        free(out), free(jpg), free(rgb);
    }
}

/* A subsampled plane (image_resizer_set_up): the double-precision
 * definition (each pixel of the up-times-larger image the linear
 * interpolation between the two nearest sample centres, the first or last
 * sample alone beyond them; then the box filter of those pixels) rounded,
 * as the area filter is checked above; every SIMD kernel gives the portable
 * bytes; and a resizer that goes from subsampled to plain and back on the
 * same sizes rebuilds what it must (each result equals a fresh resizer's). */
static double lin_at(const uint8_t *src, uint32_t n, uint32_t up, size_t stride, uint32_t p)
{
    double c = p + 0.5, pos = c / up - 0.5; /* in samples: centre j at j */
    if (pos <= 0) return src[0];
    if (pos >= n - 1) return src[(size_t)(n - 1) * stride];
    uint32_t j = (uint32_t)floor(pos);
    double f = pos - j;
    return (1 - f) * src[(size_t)j * stride] + f * src[(size_t)(j + 1) * stride];
}

static void test_resize_up(void)
{
    int all = 1, cases = 0, near_half = 0;
    double worst = 0;
    for (int trial = 0; trial < 300 && all; trial++) {
        uint32_t ux = 1 + rnd(4), uy = 1 + rnd(4);
        uint32_t sw = 1 + rnd(20), sh = 1 + rnd(20), dw = 1 + rnd(50), dh = 1 + rnd(50);
        uint8_t *src = malloc((size_t)sw * sh), *dst = malloc((size_t)dw * dh);
        fill_src(src, (size_t)sw * sh, (int)rnd(5));
        image_resizer *r = image_resizer_new();
        image_resizer_set_up(r, ux, uy);
        sa1b_error err;
        all &= image_resize(r, src, sw, sh, dst, dw, dw, dh, 1, IMAGE_RESIZE_PORTABLE, NULL, &err) == SA1B_OK;
        image_resizer_free(r);
        /* the image: rows reconstructed first, then columns (separable) */
        const uint32_t W = sw * ux, H = sh * uy;
        double *rows = malloc(sizeof(double) * W * sh), *img = malloc(sizeof(double) * W * H);
        for (uint32_t y = 0; y < sh; y++)
            for (uint32_t x = 0; x < W; x++) rows[(size_t)y * W + x] = lin_at(src + (size_t)y * sw, sw, ux, 1, x);
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++) {
                double pos = (y + 0.5) / uy - 0.5, v;
                if (pos <= 0) v = rows[x];
                else if (pos >= sh - 1) v = rows[(size_t)(sh - 1) * W + x];
                else {
                    uint32_t j = (uint32_t)floor(pos);
                    double f = pos - j;
                    v = (1 - f) * rows[(size_t)j * W + x] + f * rows[(size_t)(j + 1) * W + x];
                }
                img[(size_t)y * W + x] = v;
            }
        for (uint32_t y = 0; all && y < dh; y++)
            for (uint32_t x = 0; x < dw; x++) {
                double x0 = (double)x * W / dw, x1 = (double)(x + 1) * W / dw;
                double y0 = (double)y * H / dh, y1 = (double)(y + 1) * H / dh, sum = 0;
                for (uint32_t j = (uint32_t)y0; j < H && j < y1; j++)
                    for (uint32_t i = (uint32_t)x0; i < W && i < x1; i++)
                        sum += (fmin(x1, i + 1.0) - fmax(x0, (double)i)) * (fmin(y1, j + 1.0) - fmax(y0, (double)j)) *
                               img[(size_t)j * W + i];
                double want = sum / ((x1 - x0) * (y1 - y0));
                int got = dst[(size_t)y * dw + x];
                if (got != (int)floor(want + 0.5)) near_half++;
                if (fabs(got - want) - 0.5 > worst) worst = fabs(got - want) - 0.5;
                if (fabs(got - want) > 0.5 + RESIZE_TOL) {
                    tap_diag("up %ux%u: %ux%u -> %ux%u at (%u,%u): got %d, exact %.6f", ux, uy, sw, sh, dw, dh, x, y,
                             got, want);
                    all = 0;
                    break;
                }
            }
        cases++;
        free(rows), free(img), free(src), free(dst);
    }
    tap_ok(all, "subsampled planes: the linear reconstruction then the box filter, rounded (%d cases; %d values "
                "within %g of a .5 boundary rounded the other way, worst %.5f)",
           cases, near_half, RESIZE_TOL, worst);

    int impls[2] = {IMAGE_RESIZE_AVX2, IMAGE_RESIZE_AVX512};
    for (int m = 0; m < 2; m++) {
        if (!image_resize_supported(impls[m])) {
            tap_skip(1, "resize kernel not supported by this build or CPU");
            continue;
        }
        image_resizer *r = image_resizer_new();
        int same = 1, n = 0;
        for (int trial = 0; trial < 400 && same; trial++) {
            /* chroma-like: a plane of about half the image's size, to about the image's */
            uint32_t ux = trial % 5 == 0 ? 1 : 1 + rnd(3), uy = 1 + rnd(2);
            uint32_t sw = 8 + rnd(600), sh = 1 + rnd(12), dw = 1 + rnd(sw * ux + 64), dh = 1 + rnd(sh * uy + 4);
            if (trial % 3 != 2) /* one size twice in a row: subsampled, then plain */
                sw = 1000, sh = 10, dw = 1024, dh = 11, ux = uy = trial % 3 == 0 ? 2 : 1;
            uint8_t *src = malloc((size_t)sw * sh);
            fill_src(src, (size_t)sw * sh, (int)rnd(5));
            uint8_t *a = malloc((size_t)dw * dh), *b = malloc((size_t)dw * dh);
            image_resizer *p = image_resizer_new();
            image_resizer_set_up(r, ux, uy); /* r: reused across the trials, up changing */
            image_resizer_set_up(p, ux, uy);
            sa1b_error err;
            same = image_resize(r, src, sw, sh, a, dw, dw, dh, 1, impls[m], NULL, &err) == SA1B_OK &&
                   image_resize(p, src, sw, sh, b, dw, dw, dh, 1, IMAGE_RESIZE_PORTABLE, NULL, &err) == SA1B_OK &&
                   memcmp(a, b, (size_t)dw * dh) == 0;
            if (!same) tap_diag("up %ux%u: %ux%u -> %ux%u differs from the portable bytes", ux, uy, sw, sh, dw, dh);
            image_resizer_free(p);
            free(src), free(a), free(b);
            n++;
        }
        image_resizer_free(r);
        tap_ok(same, "subsampled planes: %s equals the portable reference, one resizer reused with up changing "
                     "(%d cases)", m ? "avx512" : "avx2", n);
    }
}

/* The colour conversion of the planar path: both implementations give
 * libjpeg's RGB (ref_ycc, from its tables) for all 2^24 inputs, in rows of
 * lengths that leave every tail; and on a 4:4:4 photograph (no chroma
 * upsampling) libjpeg's planes converted are TurboJPEG's RGB decode, byte
 * for byte. */
static void test_ycc(sa1b_imgctx *c)
{
    enum { N = 4096 + 13 };
    uint8_t *y = malloc(N), *cb = malloc(N), *cr = malloc(N), *out = malloc(3 * N), *want = malloc(3 * N);
    for (int impl = YCC_PORTABLE; impl <= YCC_AVX2; impl++) {
        if (!ycc_rgb_supported(impl)) {
            tap_skip(1, impl == YCC_AVX2 ? "YCbCr kernel avx2: not on this CPU" : "YCbCr kernel: not here");
            continue;
        }
        uint64_t bad = 0;
        uint32_t v = 0;
        const uint32_t total = 1u << 24;
        for (size_t len = 1; v < total; len = len % (N - 6) + 7) { /* 1 .. N */
            size_t n = 0;
            for (; n < len && v < total; n++, v++) {
                y[n] = (uint8_t)(v >> 16), cb[n] = (uint8_t)(v >> 8), cr[n] = (uint8_t)v;
                ref_ycc(y[n], cb[n], cr[n], want + 3 * n);
            }
            if (ycc_rgb_row(y, cb, cr, out, n, impl) != 0 || memcmp(out, want, 3 * n) != 0) bad++;
        }
        tap_ok(bad == 0, "YCbCr kernel %s: libjpeg's RGB for all 2^24 inputs (%llu rows differ)",
               impl == YCC_PORTABLE ? "portable" : "avx2", (unsigned long long)bad);
    }
    tap_is_int(ycc_rgb_row(y, cb, cr, out, 1, 99), -1, "YCbCr: an unknown kernel is refused");
    free(y), free(cb), free(cr), free(out), free(want);

    enum { W = 333, H = 250 };
    uint8_t *rgb = make_texture(W, H, 3);
    size_t len = 0;
    uint8_t *jpg = tj_encode_flags(rgb, W, H, TJSAMP_444, 0, &len);
    uint8_t *tj = malloc((size_t)W * H * 3), *mine = malloc((size_t)W * H * 3);
    sa1b_error err;
    ref_planes rp;
    int ok = jpg && sa1b_jpeg_decode(c, jpg, len, tj, W, H, &err) == SA1B_OK &&
             ref_decode_planes(jpg, len, 1, 1, &rp) == 0 && rp.p[0];
    for (uint32_t r = 0; ok && r < H; r++)
        ycc_rgb_row(rp.p[0] + (size_t)r * W, rp.p[1] + (size_t)r * W, rp.p[2] + (size_t)r * W,
                    mine + (size_t)r * W * 3, W, YCC_AUTO);
    tap_ok(ok && memcmp(tj, mine, (size_t)W * H * 3) == 0,
           "4:4:4: libjpeg's planes converted are TurboJPEG's RGB decode");
    if (ok) ref_free(&rp);
    free(tj), free(mine), free(jpg), free(rgb);
}

/* PSNR (dB) of a (rows stride_a bytes apart) against b (packed), w x h RGB */
static double psnr(const uint8_t *a, size_t stride_a, const uint8_t *b, uint32_t w, uint32_t h)
{
    double sq = 0;
    for (uint32_t y = 0; y < h; y++)
        for (size_t i = 0; i < (size_t)w * 3; i++) {
            double d = (double)a[(size_t)y * stride_a + i] - b[(size_t)y * w * 3 + i];
            sq += d * d;
        }
    return sq > 0 ? 10 * log10(255.0 * 255.0 * (double)w * h * 3 / sq) : 999;
}

/* A smooth colour field: slow sinusoids, another in each channel */
static uint8_t *make_smooth(uint32_t w, uint32_t h)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                p[((size_t)y * w + x) * 3 + c] =
                    (uint8_t)(128 + 100 * sin(x * (0.011 + 0.004 * c) + y * (0.007 - 0.002 * c) + c));
    return p;
}

/* The planar way is about as good a picture as the RGB one: a 4:2:0 JPEG
 * of a picture (flat quadrants: sharp colour edges; a smooth colour field;
 * noise in every channel: chroma detail the JPEG loses), letterboxed both
 * ways, against the picture itself resized: the planar letterbox's PSNR is
 * within 0.25 dB of the RGB one's, or above it, except on the smooth field,
 * where the planes' rounding to 8 bits before the conversion costs about
 * 1 dB (at 50 dB; sa1b_image.h): within 1.5 dB there. */
static void test_planar_quality(sa1b_imgctx *c)
{
    enum { W = 2000, H = 1500, S = 1024 };
    static const char *kinds[] = {"flat quadrants", "smooth colour", "noise"};
    for (int kind = 0; kind < 3; kind++) {
        uint8_t *rgb = kind == 2 ? make_texture(W, H, 11) : kind == 1 ? make_smooth(W, H) : make_quads(W, H);
        size_t len = 0;
        uint8_t *jpg = tj_encode_flags(rgb, W, H, TJSAMP_420, 0, &len);
        uint8_t *out = malloc((size_t)S * S * 3);
        sa1b_letterbox lb;
        sa1b_error err;
        const uint8_t *dec;
        uint32_t bw, bh;
        int ok = jpg && sa1b_jpeg_letterbox(c, jpg, len, S, out, &lb, &err) == SA1B_OK &&
                 sa1b_jpeg_decode_scaled(c, jpg, len, lb.new_w, lb.new_h, &dec, &bw, &bh, &err) == SA1B_OK;
        uint8_t *ref = malloc((size_t)lb.new_w * lb.new_h * 3), *truth = malloc((size_t)lb.new_w * lb.new_h * 3);
        ok = ok && sa1b_resize_area(dec, bw, bh, ref, lb.new_w, lb.new_h, 3, &err) == SA1B_OK &&
             sa1b_resize_area(rgb, W, H, truth, lb.new_w, lb.new_h, 3, &err) == SA1B_OK;
        double p_planar = ok ? psnr(out, (size_t)S * 3, truth, lb.new_w, lb.new_h) : 0;
        double p_rgb = ok ? psnr(ref, (size_t)lb.new_w * 3, truth, lb.new_w, lb.new_h) : 0;
        double p_between = ok ? psnr(out, (size_t)S * 3, ref, lb.new_w, lb.new_h) : 0;
        tap_ok(ok && p_between < 999 && p_planar >= p_rgb - (kind == 1 ? 1.5 : 0.25),
               "2000x1500 4:2:0 %s -> 1024: PSNR against the picture: planar %.2f dB, RGB %.2f dB "
               "(the two: %.1f dB apart)", kinds[kind], p_planar, p_rgb, p_between);
        free(truth), free(ref), free(out), free(jpg), free(rgb);
    }
}

static void test_region(sa1b_imgctx *c)
{
    static const struct { int samp, flags; const char *name; } kinds[] = {
        {TJSAMP_420, 0, "4:2:0"}, {TJSAMP_422, 0, "4:2:2"}, {TJSAMP_444, 0, "4:4:4"},
        {TJSAMP_440, 0, "4:4:0"}, {TJSAMP_GRAY, 0, "grey"}, {TJSAMP_420, TJFLAG_PROGRESSIVE, "progressive"},
    };
    static const uint32_t regions[][2] = {{200, 136}, {136, 200}, {200, 200}, {1, 1}, {17, 190},
                                          {199, 5}, {150, 150}, {100, 200}};
    enum { W = 200, H = 200, STRIDE = W * 3 + 48 };
    uint8_t *full = malloc((size_t)W * H * 3), *out = malloc((size_t)STRIDE * H);
    sa1b_error err;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        uint8_t *rgb = make_texture(W, H, (uint32_t)k);
        size_t len = 0;
        uint8_t *jpg = tj_encode_flags(rgb, W, H, kinds[k].samp, kinds[k].flags, &len);
        int rc = jpg ? sa1b_jpeg_decode(c, jpg, len, full, W, H, &err) : -1;
        int same = rc == SA1B_OK, untouched = 1;
        for (size_t r = 0; same && r < sizeof regions / sizeof regions[0]; r++) {
            uint32_t w = regions[r][0], h = regions[r][1];
            memset(out, 0x77, (size_t)STRIDE * H);
            rc = sa1b_jpeg_decode_region(c, jpg, len, out, STRIDE, W, H, w, h, &err);
            if (rc != SA1B_OK) {
                tap_diag("%s %ux%u: %s", kinds[k].name, w, h, err.msg);
                same = 0;
                break;
            }
            for (uint32_t y = 0; y < h; y++)
                if (memcmp(out + (size_t)y * STRIDE, full + (size_t)y * W * 3, (size_t)w * 3)) same = 0;
            for (size_t i = (size_t)h * STRIDE; i < (size_t)STRIDE * H; i++)
                if (out[i] != 0x77) untouched = 0;
        }
        tap_ok(same, "region decode (%s): every region equals the whole decode's pixels", kinds[k].name);
        tap_ok(untouched, "region decode (%s): rows below the region untouched", kinds[k].name);
        free(jpg);
        free(rgb);
    }
    /* errors */
    uint8_t *rgb = make_texture(W, H, 9);
    size_t len = 0;
    uint8_t *jpg = tj_encode_flags(rgb, W, H, TJSAMP_420, 0, &len);
    int rc = sa1b_jpeg_decode_region(c, jpg, len, out, STRIDE, W, H + 1, W, H, &err);
    tap_is_int(rc, SA1B_EMISMATCH, "region decode with the wrong image size: EMISMATCH");
    tap_is_int(sa1b_jpeg_decode_region(c, jpg, len, out, STRIDE, W, H, 0, 5, &err), SA1B_EINVAL,
               "empty region: EINVAL");
    tap_is_int(sa1b_jpeg_decode_region(c, jpg, len, out, STRIDE, W, H, W + 1, 5, &err), SA1B_EINVAL,
               "region wider than the image: EINVAL");
    tap_is_int(sa1b_jpeg_decode_region(c, jpg, len, out, W * 3 - 1, W, H, W, 5, &err), SA1B_EINVAL,
               "short stride: EINVAL");
    rc = sa1b_jpeg_decode_region(c, jpg, len * 2 / 3, out, STRIDE, W, H, W, H, &err);
    tap_ok(rc == SA1B_ETRUNC && strstr(err.msg, "jpeg: truncated: ") == err.msg,
           "truncated JPEG, whole region: ETRUNC (%s)", err.msg);
    uint8_t *bad = malloc(len);
    memcpy(bad, jpg, len);
    for (size_t i = len / 2; i < len / 2 + 8; i++) bad[i] = 0xFF;
    bad[len / 2 + 8] = 0xD0;
    rc = sa1b_jpeg_decode_region(c, bad, len, out, STRIDE, W, H, W, H, &err);
    tap_ok(rc != SA1B_OK && strncmp(err.msg, "jpeg: ", 6) == 0, "corrupt scan data rejected: %s",
           rc ? err.msg : "(decoded)");
    rc = sa1b_jpeg_decode_region(c, jpg, len, out, STRIDE, W, H, W, H, &err);
    int same = rc == SA1B_OK && sa1b_jpeg_decode(c, jpg, len, full, W, H, &err) == SA1B_OK;
    for (uint32_t y = 0; same && y < H; y++)
        same = memcmp(out + (size_t)y * STRIDE, full + (size_t)y * W * 3, (size_t)W * 3) == 0;
    tap_ok(same, "after the errors the context decodes a good JPEG exactly");
    free(bad);
    free(jpg);
    free(rgb);
    free(full);
    free(out);
}

/* A photograph-like w x h image: gradients, a disc, stripes and noise whose
 * strength varies across the image; rows from h_content on are black, as
 * under a letterbox. */
static uint8_t *make_photo(uint32_t w, uint32_t h, uint32_t h_content, uint64_t seed)
{
    uint8_t *p = calloc((size_t)w * h * 3, 1);
    uint64_t r = seed;
    for (uint32_t y = 0; y < h_content; y++)
        for (uint32_t x = 0; x < w; x++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            int noise = (int)((r >> 40) & 63) - 32, amp = (int)(x * 4 / w);   /* 0..3 */
            int dx = (int)x - (int)w / 3, dy = (int)y - (int)h_content / 2;
            int disc = dx * dx + dy * dy < (int)(w * w / 25);
            int v[3] = {(int)(x * 255 / w), (int)(y * 255 / h_content), disc ? 230 : 60};
            if (y % 16 < 3 && x > w / 2) v[2] = 250;   /* stripes */
            for (int k = 0; k < 3; k++) {
                int q = v[k] + noise * amp / 3;
                p[((size_t)y * w + x) * 3 + k] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
            }
        }
    return p;
}

/* sa1b_jpeg_encode: SA1B_JPEG_STANDARD gives tjCompress2's very bytes (what
 * shards held before the option), SA1B_JPEG_OPTIMIZED fewer bytes that
 * decode (whole, and by the loader's region decode) to exactly the same
 * pixels, at every quality band (the DCT changes at 96).  Standard and
 * optimized encodes alternate on one context: a standard one right after an
 * optimized one must not inherit its tables. */
static void test_encode(sa1b_imgctx *c)
{
    static const uint32_t sizes[][3] = {{333, 217, 217}, {256, 256, 171}};
    static const int qualities[] = {1, 50, 90, 95, 96, 100};
    sa1b_error err;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint32_t w = sizes[si][0], h = sizes[si][1], hc = sizes[si][2];
        uint8_t *rgb = make_photo(w, h, hc, 7 + si);
        uint8_t *a = malloc((size_t)w * h * 3), *b = malloc((size_t)w * h * 3);
        for (size_t qi = 0; qi < sizeof qualities / sizeof *qualities; qi++) {
            int q = qualities[qi];
            size_t ref_len = 0, std_len = 0, opt_len = 0, again_len = 0;
            uint8_t *ref = tj_encode(rgb, w, h, TJSAMP_420, q, &ref_len), *std = NULL, *opt = NULL,
                    *again = NULL;
            int rc = sa1b_jpeg_encode(c, rgb, w, h, q, SA1B_JPEG_STANDARD, &std, &std_len, &err);
            tap_ok(rc == SA1B_OK && ref && std_len == ref_len && memcmp(std, ref, ref_len) == 0,
                   "%ux%u q%d standard tables: tjCompress2's bytes (%zu, %zu)", w, h, q, std_len, ref_len);
            rc = sa1b_jpeg_encode(c, rgb, w, h, q, SA1B_JPEG_OPTIMIZED, &opt, &opt_len, &err);
            tap_ok(rc == SA1B_OK && opt_len < std_len, "%ux%u q%d optimized tables: %zu < %zu bytes", w,
                   h, q, opt_len, std_len);
            int same = rc == SA1B_OK &&
                       sa1b_jpeg_decode(c, std, std_len, a, w, h, &err) == SA1B_OK &&
                       sa1b_jpeg_decode(c, opt, opt_len, b, w, h, &err) == SA1B_OK &&
                       memcmp(a, b, (size_t)w * h * 3) == 0;
            tap_ok(same, "%ux%u q%d optimized: the same decoded pixels", w, h, q);
            memset(b, 0, (size_t)w * h * 3);
            same = opt && sa1b_jpeg_decode_region(c, opt, opt_len, b, (size_t)w * 3, w, h, w, hc,
                                                  &err) == SA1B_OK;
            for (uint32_t y = 0; same && y < hc; y++)
                same = memcmp(a + (size_t)y * w * 3, b + (size_t)y * w * 3, (size_t)w * 3) == 0;
            tap_ok(same, "%ux%u q%d optimized: the region decode's pixels too", w, h, q);
            rc = sa1b_jpeg_encode(c, rgb, w, h, q, SA1B_JPEG_OPTIMIZED, &again, &again_len, &err);
            tap_ok(rc == SA1B_OK && again_len == opt_len && memcmp(again, opt, opt_len) == 0,
                   "%ux%u q%d optimized: the same bytes again", w, h, q);
            free(ref), free(std), free(opt), free(again);
        }
        free(rgb), free(a), free(b);
    }
}

int main(void)
{
    tap_plan(0);
    sa1b_imgctx *c = NULL;
    sa1b_error err;
    tap_is_int(sa1b_imgctx_new(&c, &err), SA1B_OK, "context");
    check_letterbox(c, 600, 400, 256, 256, 171);
    check_letterbox(c, 400, 600, 256, 171, 256);
    check_letterbox(c, 333, 217, 128, 128, 83);
    check_letterbox(c, 640, 640, 64, 64, 64);
    check_letterbox(c, 600, 400, 300, 300, 200);   /* DCT scale exactly on target: no resize */
    check_letterbox(c, 100, 50, 256, 256, 128);    /* upscaling */
    check_letterbox(c, 2250, 1500, 1024, 1024, 683);
    test_scale_choice(c);
    test_resize();
    test_resize_paths();
    test_resize_up();
    test_bad(c);
    test_region(c);
    test_letterbox_stream(c);
    test_ycc(c);
    test_planar_quality(c);
    test_encode(c);
    test_decoder_nomem();
    sa1b_letterbox lb;
    tap_ok(sa1b_letterbox_geometry(2250, 1500, 256, &lb, NULL) == SA1B_OK && lb.new_w == 256 &&
               lb.new_h == 171,
           "geometry 2250x1500 -> 256x171");
    tap_ok(sa1b_letterbox_geometry(3, 1, 2, &lb, NULL) == SA1B_OK && lb.new_h == 1,
           "geometry 3x1 -> S=2: height rounds 0.67 up to 1");
    tap_ok(sa1b_letterbox_geometry(4, 1, 2, &lb, NULL) == SA1B_OK && lb.new_h == 1,
           "geometry 4x1 -> S=2: height 0.5 rounds up to 1");
    tap_ok(sa1b_letterbox_geometry(10, 1, 2, &lb, NULL) == SA1B_OK && lb.new_h == 1,
           "geometry 10x1 -> S=2: height at least 1");
    tap_is_int(sa1b_letterbox_geometry(0, 1, 2, &lb, &err), SA1B_EINVAL, "geometry of 0 wide");
    sa1b_imgctx_free(c);
    sa1b_imgctx_free(NULL);
    return tap_done();
}
