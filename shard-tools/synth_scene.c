/*
 * synth_scene.c - rasterises a synthetic scene once into a label buffer,
 * paints the picture from it, and derives exact masks from its
 * column-major runs (see synth_scene.h for the model).
 *
 * Cost: one pass per shape over the rows it covers, one pass over the
 * pixels to paint, one blocked transpose, one pass to cut the columns into
 * label runs, then per mask one walk over the label runs of the columns it
 * spans (a few thousand runs, not millions of pixels).  Only +, -, *, /,
 * sqrt and floor decide anything, so the output is the same on every IEEE
 * machine.
 */
#include "synth_scene.h"

#include "palette.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- deterministic random numbers (splitmix64) -------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
static double rng_range(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_unit(r); }
/* uniform in [0, n), n > 0 */
static uint64_t rng_below(rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

/* A smooth periodic wave in [-1, 1] of period 1 (two parabolas), made of
 * exact operations so that labels never depend on a libm. */
static double wave(double t)
{
    double u = t - floor(t);
    if (u < 0.5) return 8.0 * u * (1.0 - 2.0 * u);
    u -= 0.5;
    return -8.0 * u * (1.0 - 2.0 * u);
}

/* ---- scene description ---------------------------------------------------- */

enum { SH_ELLIPSE, SH_RING, SH_POLY };
enum { TEX_FLAT, TEX_STRIPES, TEX_CHECKS, TEX_SPECKLE, TEX_CLOUDS };
enum { MAX_REGIONS = 4, MAX_VERTS = 12 };

typedef struct shape {
    int type;
    double cx, cy;      /* centre, pixel units (pixel (x, y) covers [x, x+1) x [y, y+1)) */
    double a, b;        /* semi-axes (ellipse, ring outer) */
    double c, s;        /* rotation: unit vector of the a axis */
    double inner;       /* ring: inner / outer ratio */
    int nv;             /* polygon vertices */
    double vx[MAX_VERTS], vy[MAX_VERTS];
    int split;          /* two parts, separated by the line through the centre */
    double nx, ny;      /* normal of that line */
    double r;           /* size (circumradius) */
    int y0, y1;         /* rows to scan, clipped */
    uint16_t atom[2];   /* label of the whole (or first half) and second half */
} shape;

typedef struct atom {
    int obj;            /* shape index, or -1 for a background region */
    float r, g, b;      /* base colour, 0..255 */
    float gx, gy;       /* shading slope per pixel */
    float ox, oy;       /* shading origin */
    int tex;
    float amp;          /* texture amplitude, 0..255 units */
    float fx, fy;       /* stripes/checks: direction / period */
    /* statistics of the visible pixels, from the label runs */
    uint64_t area;
    uint32_t x0, x1, y0, y1;
} atom;

typedef struct spec {
    synth_kind kind;
    int n;
    uint16_t atoms[4];
    uint64_t area;
    uint32_t x0, x1;    /* columns spanned */
} spec;

struct synth_work {
    uint16_t *lab;      /* [h][w] atom of each pixel */
    uint16_t *labc;     /* [w][h] the same, column-major */
    /* label runs, cut at column boundaries, column-major order */
    uint16_t *rl_label;
    uint32_t *rl_y, *rl_len;
    size_t n_rl, cap_rl;
    size_t *col_first;  /* [w+1] first run of each column */
    uint32_t *mruns;    /* scratch runs of one mask */
    size_t cap_mruns;
    uint32_t *dist;     /* [bbox + a frame] chamfer distances of one mask */
    size_t cap_dist;
    shape *shapes;
    size_t cap_shapes;
    atom *atoms;
    size_t cap_atoms;
    spec *specs;
    size_t cap_specs;
    uint8_t *adj;       /* [n_obj][n_obj] touching shapes */
    size_t cap_adj;
    uint8_t *member;    /* [n_atoms] */
    size_t cap_member;
    float *rowv;        /* cloud noise: one row of grid values */
    float *grid;        /* cloud noise grid */
    size_t cap_grid;
    double *wx, *wy;    /* region boundary wobble tables [MAX_REGIONS][w], [..][h] */
    size_t n_masks_alloc;
};

uint64_t synth_min_area(uint32_t width, uint32_t height)
{
    uint64_t a = (uint64_t)width * height / 100000;
    return a < 4 ? 4 : a;
}

const char *synth_kind_name(synth_kind k)
{
    switch (k) {
    case SYNTH_REGION: return "region";
    case SYNTH_OBJECT: return "object";
    case SYNTH_PART: return "part";
    case SYNTH_UNION: return "union";
    }
    return "?";
}

/* grows *p (element size sz) to hold at least n; 0 or -1 */
static int grow(void *pp, size_t *cap, size_t n, size_t sz)
{
    void **p = pp;
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

synth_scene *synth_scene_new(uint32_t width, uint32_t height)
{
    if (width < 1 || height < 1 || width > SYNTH_MAX_SIDE || height > SYNTH_MAX_SIDE ||
        (uint64_t)width * height > SYNTH_MAX_PIXELS)
        return NULL;
    synth_scene *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->width = width;
    s->height = height;
    s->size_min = SYNTH_SIZE_MIN;
    s->size_max = SYNTH_SIZE_MAX;
    size_t np = (size_t)width * height;
    s->work = calloc(1, sizeof *s->work);
    if (!s->work) goto fail;
    synth_work *w = s->work;
    s->rgb = malloc(np * 3);
    w->lab = malloc(np * sizeof *w->lab);
    w->labc = malloc(np * sizeof *w->labc);
    w->col_first = malloc(((size_t)width + 1) * sizeof *w->col_first);
    w->wx = malloc((size_t)MAX_REGIONS * width * sizeof *w->wx);
    w->wy = malloc((size_t)MAX_REGIONS * height * sizeof *w->wy);
    if (!s->rgb || !w->lab || !w->labc || !w->col_first || !w->wx || !w->wy) goto fail;
    return s;
fail:
    synth_scene_free(s);
    return NULL;
}

static void free_masks(synth_scene *s)
{
    for (size_t i = 0; i < s->n_masks; i++) sa1b_rle_free(&s->masks[i].rle);
    s->n_masks = 0;
}

void synth_scene_free(synth_scene *s)
{
    if (!s) return;
    free_masks(s);
    free(s->masks);
    free(s->rgb);
    synth_work *w = s->work;
    if (w) {
        free(w->lab);
        free(w->labc);
        free(w->rl_label);
        free(w->rl_y);
        free(w->rl_len);
        free(w->col_first);
        free(w->mruns);
        free(w->dist);
        free(w->shapes);
        free(w->atoms);
        free(w->specs);
        free(w->adj);
        free(w->member);
        free(w->rowv);
        free(w->grid);
        free(w->wx);
        free(w->wy);
        free(w);
    }
    free(s);
}

/* ---- colours --------------------------------------------------------------- */

/* palette_hsv() scaled to 0..255 in float, unrounded */
static void hsv(double h, double sat, double val, float rgb[3])
{
    double c[3];
    palette_hsv(h, sat, val, c);
    for (int j = 0; j < 3; j++) rgb[j] = (float)(255 * c[j]);
}

/* a random unit vector without trigonometry */
static void unit_vector(rng *r, double *c, double *s)
{
    for (;;) {
        double u = rng_range(r, -1, 1), v = rng_range(r, -1, 1);
        double n = u * u + v * v;
        if (n > 0.01 && n <= 1) {
            n = sqrt(n);
            *c = u / n;
            *s = v / n;
            return;
        }
    }
}

static void texture(rng *r, atom *a, double scale, int region)
{
    double u = rng_unit(r);
    if (region)
        a->tex = u < 0.7 ? TEX_CLOUDS : TEX_STRIPES;
    else
        a->tex = u < 0.3 ? TEX_FLAT : u < 0.6 ? TEX_STRIPES : u < 0.75 ? TEX_CHECKS : TEX_SPECKLE;
    a->amp = (float)rng_range(r, 8, 22);
    if (region && a->tex == TEX_CLOUDS) a->amp = (float)rng_range(r, 15, 35);
    double c, s;
    unit_vector(r, &c, &s);
    double period = rng_range(r, 4, 4 + 0.25 * scale);
    if (period > 40) period = rng_range(r, 12, 40);
    a->fx = (float)(c / period);
    a->fy = (float)(s / period);
    unit_vector(r, &c, &s);
    double g = rng_range(r, 10, 40) / (scale > 1 ? scale : 1);
    a->gx = (float)(c * g);
    a->gy = (float)(s * g);
}

/* ---- rasterising ------------------------------------------------------------ */

/* x interval where the ellipse (a, b, rotation c/s, centred at 0) meets the
 * horizontal line at height dy from its centre; 0 when none */
static int ellipse_span(double a, double b, double c, double s, double dy, double *xa, double *xb)
{
    double ia = 1.0 / (a * a), ib = 1.0 / (b * b);
    double A = c * c * ia + s * s * ib;
    double B = 2.0 * dy * s * c * (ia - ib);
    double C = dy * dy * (s * s * ia + c * c * ib) - 1.0;
    double d = B * B - 4.0 * A * C;
    if (d <= 0) return 0;
    d = sqrt(d);
    *xa = (-B - d) / (2.0 * A);
    *xb = (-B + d) / (2.0 * A);
    return 1;
}

/* continuous x intervals of shape sh on the row whose pixel centres lie at
 * height yc; returns how many pairs were written to xs (at most MAX_VERTS) */
static int shape_spans(const shape *sh, double yc, double *xs)
{
    double dy = yc - sh->cy;
    double xa, xb;
    switch (sh->type) {
    case SH_ELLIPSE:
        if (!ellipse_span(sh->a, sh->b, sh->c, sh->s, dy, &xa, &xb)) return 0;
        xs[0] = sh->cx + xa;
        xs[1] = sh->cx + xb;
        return 1;
    case SH_RING: {
        if (!ellipse_span(sh->a, sh->b, sh->c, sh->s, dy, &xa, &xb)) return 0;
        double ia, ib;
        if (!ellipse_span(sh->a * sh->inner, sh->b * sh->inner, sh->c, sh->s, dy, &ia, &ib)) {
            xs[0] = sh->cx + xa;
            xs[1] = sh->cx + xb;
            return 1;
        }
        xs[0] = sh->cx + xa;
        xs[1] = sh->cx + ia;
        xs[2] = sh->cx + ib;
        xs[3] = sh->cx + xb;
        return 2;
    }
    default: {
        double x[MAX_VERTS];
        int n = 0;
        for (int i = 0; i < sh->nv; i++) {
            int j = (i + 1) % sh->nv;
            double y0 = sh->vy[i], y1 = sh->vy[j];
            if ((y0 <= yc && yc < y1) || (y1 <= yc && yc < y0))
                x[n++] = sh->vx[i] + (yc - y0) * (sh->vx[j] - sh->vx[i]) / (y1 - y0);
        }
        for (int i = 1; i < n; i++) /* insertion sort, n is tiny */
            for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
                double t = x[j];
                x[j] = x[j - 1];
                x[j - 1] = t;
            }
        for (int i = 0; i + 1 < n; i += 2) {
            xs[i] = x[i];
            xs[i + 1] = x[i + 1];
        }
        return n / 2;
    }
    }
}


static void paint_labels(synth_work *w, const shape *sh, uint32_t W)
{
    double xs[MAX_VERTS];
    for (int y = sh->y0; y <= sh->y1; y++) {
        double yc = y + 0.5;
        int n = shape_spans(sh, yc, xs);
        uint16_t *row = w->lab + (size_t)y * W;
        double off = (yc - sh->cy) * sh->ny;
        for (int k = 0; k < n; k++) {
            /* pixel x is inside when its centre x + 0.5 lies in [xa, xb) */
            double fa = ceil(xs[2 * k] - 0.5), fb = ceil(xs[2 * k + 1] - 0.5);
            if (fa < 0) fa = 0;
            if (fb > W) fb = W;
            if (fa >= fb) continue;
            int xa = (int)fa, xb = (int)fb;
            if (!sh->split) {
                for (int x = xa; x < xb; x++) row[x] = sh->atom[0];
            } else {
                for (int x = xa; x < xb; x++)
                    row[x] = sh->atom[(x + 0.5 - sh->cx) * sh->nx + off >= 0];
            }
        }
    }
}

/* cos and sin from +, *, / only (Taylor series at t/16, then four angle
 * doublings): identical on every machine, accurate to ~1e-12 */
static void cos_sin(double t, double *c, double *s)
{
    double x = t / 16.0, x2 = x * x;
    double sn = x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 * (1 - x2 / 110)))));
    double cs = 1 - x2 / 2 * (1 - x2 / 12 * (1 - x2 / 30 * (1 - x2 / 56 * (1 - x2 / 90))));
    for (int i = 0; i < 4; i++) {
        double c2 = cs * cs - sn * sn, s2 = 2 * sn * cs;
        cs = c2;
        sn = s2;
    }
    *c = cs;
    *s = sn;
}

#define TWO_PI 6.283185307179586

/* ---- planning the scene ------------------------------------------------------ */

static void make_shape(rng *r, shape *sh, uint32_t W, uint32_t H, double S, double fmin, double fmax)
{
    memset(sh, 0, sizeof *sh);
    double rmin = fmin * S, rmax = fmax * S;
    if (rmin < 2.5) rmin = 2.5;
    if (rmax < rmin) rmax = rmin;
    double u = rng_unit(r);
    sh->r = rmin + (rmax - rmin) * u * u * u;
    sh->cx = rng_range(r, -0.05 * W, 1.05 * W);
    sh->cy = rng_range(r, -0.05 * H, 1.05 * H);
    unit_vector(r, &sh->c, &sh->s);
    double t = rng_unit(r);
    sh->type = t < 0.4 ? SH_ELLIPSE : t < 0.8 ? SH_POLY : SH_RING;
    if (sh->type == SH_RING && sh->r < 6) sh->type = SH_ELLIPSE;
    double ext = sh->r;
    if (sh->type == SH_POLY) {
        int star = rng_unit(r) < 0.5;
        sh->nv = star ? 5 + (int)rng_below(r, MAX_VERTS - 4) : 3 + (int)rng_below(r, 5);
        double th0 = rng_range(r, 0, TWO_PI);
        double sx = rng_range(r, 0.6, 1.0); /* squash */
        for (int i = 0; i < sh->nv; i++) {
            double jit = star ? rng_range(r, -0.3, 0.3) : 0;
            double rad = star ? sh->r * rng_range(r, 0.45, 1.0) : sh->r;
            double c, s;
            cos_sin(th0 + TWO_PI * (i + jit) / sh->nv, &c, &s);
            double px = rad * c, py = rad * s * sx;
            sh->vx[i] = sh->cx + px * sh->c - py * sh->s;
            sh->vy[i] = sh->cy + px * sh->s + py * sh->c;
        }
    } else {
        sh->a = sh->r;
        sh->b = sh->r * rng_range(r, 0.35, 1.0);
        sh->inner = rng_range(r, 0.45, 0.75);
    }
    if (sh->r >= 8 && sh->r >= 0.05 * S && rng_unit(r) < 0.4) {
        sh->split = 1;
        unit_vector(r, &sh->nx, &sh->ny);
    }
    double y0 = floor(sh->cy - ext - 1), y1 = ceil(sh->cy + ext + 1);
    if (y0 < 0) y0 = 0;
    if (y1 > H - 1.0) y1 = H - 1.0;
    sh->y0 = (int)y0;
    sh->y1 = (int)y1; /* y0 > y1 when the shape is above or below the image */
}

static int cmp_key_desc(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] < y[0]) - (x[0] > y[0]);
}

/* ---- painting ---------------------------------------------------------------- */

static inline uint8_t to_u8(float v) { return (uint8_t)((v < 0 ? 0 : v > 255 ? 255 : v) + 0.5f); }

/* the fractional part of p and floor(p) for |p| < 2^14, without libm
 * (floorf is a call on baseline x86-64); resolution 1/512, ample for a
 * texture */
#define FOFF 16384.0f

static void paint_pixels(synth_scene *s, uint64_t seed, uint32_t G, uint32_t gw)
{
    synth_work *w = s->work;
    const uint32_t W = s->width, H = s->height;
    const float invG = 1.0f / (float)G;
    for (uint32_t y = 0; y < H; y++) {
        /* cloud noise: vertical interpolation of the grid, once per row */
        uint32_t j = y / G;
        float fy = (float)(y - j * G) * invG;
        fy = fy * fy * (3 - 2 * fy);
        const float *g0 = w->grid + (size_t)j * gw, *g1 = g0 + gw;
        for (uint32_t i = 0; i < gw; i++) w->rowv[i] = g0[i] + (g1[i] - g0[i]) * fy;
        const float *rowv = w->rowv;
        uint32_t ns = (uint32_t)(seed >> 32) ^ (uint32_t)seed ^ (y * 0x9E3779B1u) ^ 0x5bd1e995u;
        if (!ns) ns = 1;
        const uint16_t *lab = w->lab + (size_t)y * W;
        uint8_t *out = s->rgb + (size_t)y * W * 3;
        const float fyy = (float)y;
        uint32_t x = 0;
        while (x < W) {
            /* one span of one atom */
            uint16_t l = lab[x];
            uint32_t xe = x + 1;
            while (xe < W && lab[xe] == l) xe++;
            const atom *a = &w->atoms[l];
            const float cr = a->r, cg = a->g, cb = a->b, amp = a->amp, fx = a->fx, fy2 = a->fy;
            const float shade_y = a->gy * (fyy - a->oy) - a->gx * a->ox;
            const int tex = a->tex;
            for (; x < xe; x++) {
                ns ^= ns << 13;
                ns ^= ns >> 17;
                ns ^= ns << 5;
                const float fxx = (float)x;
                float gx = fxx * invG;
                uint32_t i = (uint32_t)gx;
                float cloud = rowv[i] + (rowv[i + 1] - rowv[i]) * (gx - (float)i);
                float t = 0;
                if (tex == TEX_STRIPES) {
                    float p = fx * fxx + fy2 * fyy + FOFF;
                    p -= (float)(int32_t)p;
                    t = amp * (2 * fabsf(2 * p - 1) - 1);
                } else if (tex == TEX_CHECKS) {
                    int32_t u = (int32_t)(fx * fxx + fy2 * fyy + FOFF);
                    int32_t v = (int32_t)(fx * fyy - fy2 * fxx + FOFF);
                    t = ((u + v) & 1) ? amp : -amp;
                } else if (tex == TEX_SPECKLE) {
                    t = amp * ((float)((ns >> 8) & 255) * (1.0f / 127.5f) - 1.0f);
                } else if (tex == TEX_CLOUDS) {
                    t = amp * cloud;
                }
                float v = a->gx * fxx + shade_y + t + 6.0f * cloud + (float)(ns >> 29) - 3.5f;
                out[3 * x + 0] = to_u8(cr + v);
                out[3 * x + 1] = to_u8(cg + v);
                out[3 * x + 2] = to_u8(cb + v);
            }
        }
    }
}

/* ---- runs and masks ------------------------------------------------------------- */

static void transpose(const uint16_t *src, uint16_t *dst, uint32_t W, uint32_t H)
{
    enum { B = 64 };
    for (uint32_t y0 = 0; y0 < H; y0 += B) {
        uint32_t y1 = y0 + B < H ? y0 + B : H;
        for (uint32_t x0 = 0; x0 < W; x0 += B) {
            uint32_t x1 = x0 + B < W ? x0 + B : W;
            for (uint32_t x = x0; x < x1; x++)
                for (uint32_t y = y0; y < y1; y++) dst[(size_t)x * H + y] = src[(size_t)y * W + x];
        }
    }
}

static int label_runs(synth_work *w, uint32_t W, uint32_t H)
{
    w->n_rl = 0;
    for (uint32_t x = 0; x < W; x++) {
        w->col_first[x] = w->n_rl;
        const uint16_t *col = w->labc + (size_t)x * H;
        uint32_t y = 0;
        while (y < H) {
            uint16_t l = col[y];
            uint32_t y2 = y + 1;
            while (y2 < H && col[y2] == l) y2++;
            if (w->n_rl == w->cap_rl) {
                size_t c = w->cap_rl;
                if (grow(&w->rl_label, &c, w->n_rl + 1, sizeof *w->rl_label)) return -1;
                c = w->cap_rl;
                if (grow(&w->rl_y, &c, w->n_rl + 1, sizeof *w->rl_y)) return -1;
                c = w->cap_rl;
                if (grow(&w->rl_len, &c, w->n_rl + 1, sizeof *w->rl_len)) return -1;
                w->cap_rl = c;
            }
            w->rl_label[w->n_rl] = l;
            w->rl_y[w->n_rl] = y;
            w->rl_len[w->n_rl] = y2 - y;
            w->n_rl++;
            y = y2;
        }
    }
    w->col_first[W] = w->n_rl;
    return 0;
}

/* Walks the label runs of columns x0..x1 for the atoms flagged in
 * w->member: fills the mask's runs, area, bounds and a foreground pixel. */
static int build_mask(synth_scene *s, const spec *sp, rng *r, synth_mask *m, sa1b_error *err)
{
    synth_work *w = s->work;
    const uint32_t W = s->width, H = s->height;
    size_t i0 = w->col_first[sp->x0], i1 = w->col_first[sp->x1 + 1];
    if (grow(&w->mruns, &w->cap_mruns, i1 - i0 + 3, sizeof *w->mruns))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    size_t n = 0;
    int state = 0;
    uint64_t cur = (uint64_t)sp->x0 * H, area = 0;
    uint32_t bx0 = UINT32_MAX, bx1 = 0, by0 = UINT32_MAX, by1 = 0;
    for (uint32_t x = sp->x0; x <= sp->x1; x++) {
        for (size_t i = w->col_first[x]; i < w->col_first[x + 1]; i++) {
            int st = w->member[w->rl_label[i]];
            uint32_t len = w->rl_len[i];
            if (st != state) {
                w->mruns[n++] = (uint32_t)cur;
                cur = 0;
                state = st;
            }
            cur += len;
            if (st) {
                area += len;
                if (x < bx0) bx0 = x;
                bx1 = x;
                if (w->rl_y[i] < by0) by0 = w->rl_y[i];
                if (w->rl_y[i] + len - 1 > by1) by1 = w->rl_y[i] + len - 1;
            }
        }
    }
    uint64_t trailing = (uint64_t)(W - 1 - sp->x1) * H;
    if (state == 0) {
        w->mruns[n++] = (uint32_t)(cur + trailing);
    } else {
        w->mruns[n++] = (uint32_t)cur;
        if (trailing) w->mruns[n++] = (uint32_t)trailing;
    }
    if (area != sp->area || area == 0)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "synthetic mask: area %llu != %llu",
                              (unsigned long long)area, (unsigned long long)sp->area);
    /* the prompt point: a pixel deep inside the mask, drawn uniformly
     * from those at least half as far from the border as the deepest one
     * (SAM's single-point evaluation prompts at the centre of the mask);
     * distances are 3-4 chamfer over the bounding box inside a frame of
     * zeros (outside the box counts as border), so no pixel is a special case */
    const size_t bw = bx1 - bx0 + 1, bh = by1 - by0 + 1, pw = bw + 2;
    if (grow(&w->dist, &w->cap_dist, pw * (bh + 2), sizeof *w->dist))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    uint32_t *d = w->dist, dmax = 0;
    memset(d, 0, pw * sizeof *d);
    memset(d + (bh + 1) * pw, 0, pw * sizeof *d);
    for (size_t y = 1; y <= bh; y++) {
        const uint16_t *lab = w->lab + (by0 + y - 1) * (size_t)W + bx0;
        uint32_t *dr = d + y * pw, *up = dr - pw;
        dr[0] = dr[bw + 1] = 0;
        for (size_t x = 1; x <= bw; x++) {
            if (!w->member[lab[x - 1]]) {
                dr[x] = 0;
                continue;
            }
            uint32_t v = dr[x - 1] + 3, ul = up[x - 1] + 4, u = up[x] + 3, ur = up[x + 1] + 4;
            if (ul < v) v = ul;
            if (u < v) v = u;
            if (ur < v) v = ur;
            dr[x] = v;
        }
    }
    for (size_t y = bh; y >= 1; y--) {
        uint32_t *dr = d + y * pw, *dn = dr + pw;
        for (size_t x = bw; x >= 1; x--) {
            uint32_t v = dr[x];
            if (!v) continue;
            uint32_t rt = dr[x + 1] + 3, dl = dn[x - 1] + 4, dd = dn[x] + 3, dg = dn[x + 1] + 4;
            if (rt < v) v = rt;
            if (dl < v) v = dl;
            if (dd < v) v = dd;
            if (dg < v) v = dg;
            dr[x] = v;
            if (v > dmax) dmax = v;
        }
    }
    /* the frame is 0, below any threshold (thr >= 2) */
    const uint32_t thr = (dmax + 1) / 2;
    const size_t nd = pw * (bh + 2);
    uint64_t cand = 0;
    for (size_t i = 0; i < nd; i++) cand += d[i] >= thr;
    uint64_t k = rng_below(r, cand);
    m->px = m->py = 0;
    for (size_t i = 0; i < nd; i++) {
        if (d[i] >= thr && k-- == 0) {
            m->px = bx0 + (uint32_t)(i % pw) - 1;
            m->py = by0 + (uint32_t)(i / pw) - 1;
            break;
        }
    }
    m->kind = sp->kind;
    m->area = area;
    m->x0 = bx0;
    m->x1 = bx1;
    m->y0 = by0;
    m->y1 = by1;
    return sa1b_rle_set_runs(&m->rle, H, W, w->mruns, n, err);
}

static int cmp_area_desc(const void *a, const void *b)
{
    const spec *x = a, *y = b;
    if (x->area != y->area) return x->area < y->area ? 1 : -1;
    return (x->atoms[0] > y->atoms[0]) - (x->atoms[0] < y->atoms[0]);
}

static void spec_add_atom(spec *sp, const atom *at, uint16_t id)
{
    sp->atoms[sp->n++] = id;
    sp->area += at->area;
    if (at->area) {
        if (at->x0 < sp->x0) sp->x0 = at->x0;
        if (at->x1 > sp->x1) sp->x1 = at->x1;
    }
}

static void spec_init(spec *sp, synth_kind kind)
{
    memset(sp, 0, sizeof *sp);
    sp->kind = kind;
    sp->x0 = UINT32_MAX;
}

/* ---- the whole scene ------------------------------------------------------------ */

/* Plans K regions and n_obj shapes from r and rasterises them into the
 * label buffer; fills the label runs, atom statistics and touching pairs. */
static int plan_and_label(synth_scene *s, rng *r, int K, uint32_t n_obj, size_t *n_atoms_out)
{
    synth_work *w = s->work;
    const uint32_t W = s->width, H = s->height;
    const double S = W < H ? W : H;
    size_t n_atoms_max = (size_t)K + 2 * (size_t)n_obj;
    if (grow(&w->atoms, &w->cap_atoms, n_atoms_max, sizeof *w->atoms) ||
        grow(&w->shapes, &w->cap_shapes, n_obj, sizeof *w->shapes) ||
        grow(&w->member, &w->cap_member, n_atoms_max, 1) ||
        grow(&w->adj, &w->cap_adj, (size_t)n_obj * n_obj, 1))
        return -1;

    /* background regions: a power diagram with wobbly borders */
    double hue0 = rng_unit(r);
    for (int k = 0; k < K; k++) {
        atom *a = &w->atoms[k];
        memset(a, 0, sizeof *a);
        a->obj = -1;
        float c[3];
        hsv(hue0 + 0.5 * k / K + rng_range(r, -0.05, 0.05), rng_range(r, 0.12, 0.45),
            rng_range(r, 0.3, 0.85), c);
        a->r = c[0];
        a->g = c[1];
        a->b = c[2];
        texture(r, a, S, 1);
        double sx = rng_range(r, 0, W), sy = rng_range(r, 0, H), wt = rng_range(r, 0, 0.05) * S * S;
        double ax = rng_range(r, 0.01, 0.04) * S * S, px = rng_range(r, 0.2, 0.8) * S,
               phx = rng_unit(r);
        double ay = rng_range(r, 0.01, 0.04) * S * S, py = rng_range(r, 0.2, 0.8) * S,
               phy = rng_unit(r);
        double *tx = w->wx + (size_t)k * W, *ty = w->wy + (size_t)k * H;
        for (uint32_t x = 0; x < W; x++) {
            double d = x + 0.5 - sx;
            tx[x] = d * d + ax * wave((x + 0.5) / px + phx);
        }
        for (uint32_t y = 0; y < H; y++) {
            double d = y + 0.5 - sy;
            ty[y] = d * d + ay * wave((y + 0.5) / py + phy) - wt;
        }
    }
    for (uint32_t y = 0; y < H; y++) {
        uint16_t *row = w->lab + (size_t)y * W;
        double ry[MAX_REGIONS];
        for (int k = 0; k < K; k++) ry[k] = w->wy[(size_t)k * H + y];
        for (uint32_t x = 0; x < W; x++) {
            int best = 0;
            double bd = w->wx[x] + ry[0];
            for (int k = 1; k < K; k++) {
                double d = w->wx[(size_t)k * W + x] + ry[k];
                if (d < bd) {
                    bd = d;
                    best = k;
                }
            }
            row[x] = (uint16_t)best;
        }
    }

    /* shapes, big ones mostly behind small ones */
    double *keys = malloc(n_obj * 2 * sizeof *keys);
    shape *tmp = malloc(n_obj * sizeof *tmp);
    if (!keys || !tmp) {
        free(keys);
        free(tmp);
        return -1;
    }
    for (uint32_t i = 0; i < n_obj; i++) {
        make_shape(r, &tmp[i], W, H, S, s->size_min, s->size_max);
        keys[2 * i] = tmp[i].r * rng_range(r, 0.7, 1.3);
        keys[2 * i + 1] = i;
    }
    qsort(keys, n_obj, 2 * sizeof *keys, cmp_key_desc);
    for (uint32_t i = 0; i < n_obj; i++) w->shapes[i] = tmp[(size_t)keys[2 * i + 1]];
    free(keys);
    free(tmp);

    size_t n_atoms = (size_t)K;
    for (uint32_t i = 0; i < n_obj; i++) {
        shape *sh = &w->shapes[i];
        atom *a = &w->atoms[n_atoms];
        memset(a, 0, sizeof *a);
        a->obj = (int)i;
        /* the colour: the best of a dozen candidates, as far as possible from
         * the colours already under and around the shape (so that a shape
         * never disappears into what it lies on) */
        double val = 0, sat = 0, hue = 0, best = -1;
        int sx0 = (int)fmax(0, floor(sh->cx - sh->r - 2)), sx1 = (int)fmin(W - 1.0, ceil(sh->cx + sh->r + 2));
        int sy0 = (int)fmax(0, floor(sh->cy - sh->r - 2)), sy1 = (int)fmin(H - 1.0, ceil(sh->cy + sh->r + 2));
        int step = (int)(2 * sh->r + 4) / 16;
        if (step < 1) step = 1;
        for (int cand = 0; cand < 12; cand++) {
            double cv = rng_range(r, 0.45, 0.95), cs = rng_range(r, 0.45, 0.95);
            double ch = hue0 + 0.25 + i * 0.6180339887498949 + rng_range(r, -0.5, 0.5);
            float c1[3], c2[3];
            hsv(ch, cs, cv, c1);
            double v2 = cv > 0.7 ? cv * 0.62 : cv * 1.45;
            hsv(ch + 0.03, cs, v2 > 1 ? 1 : v2, c2);
            double score = 1e30;
            for (int y = sy0; y <= sy1; y += step)
                for (int x = sx0; x <= sx1; x += step) {
                    const atom *u = &w->atoms[w->lab[(size_t)y * W + x]];
                    for (int h = 0; h < 1 + sh->split; h++) {
                        const float *cc = h ? c2 : c1;
                        double dr = cc[0] - u->r, dg = cc[1] - u->g, db = cc[2] - u->b;
                        double d = dr * dr + dg * dg + db * db;
                        if (d < score) score = d;
                    }
                }
            if (score > best) {
                best = score;
                val = cv;
                sat = cs;
                hue = ch;
            }
        }
        float c[3];
        hsv(hue, sat, val, c);
        a->r = c[0];
        a->g = c[1];
        a->b = c[2];
        texture(r, a, sh->r, 0);
        a->ox = (float)sh->cx;
        a->oy = (float)sh->cy;
        sh->atom[0] = sh->atom[1] = (uint16_t)n_atoms++;
        if (sh->split) {
            atom *b = &w->atoms[n_atoms];
            *b = *a;
            double v2 = val > 0.7 ? val * 0.62 : val * 1.45;
            if (v2 > 1) v2 = 1;
            hsv(hue + 0.03, sat, v2, c);
            b->r = c[0];
            b->g = c[1];
            b->b = c[2];
            sh->atom[1] = (uint16_t)n_atoms++;
        }
        paint_labels(w, sh, W);
    }
    *n_atoms_out = n_atoms;

    /* label runs, atom statistics, touching shapes */
    transpose(w->lab, w->labc, W, H);
    if (label_runs(w, W, H)) return -1;
    for (size_t a = 0; a < n_atoms; a++) {
        w->atoms[a].area = 0;
        w->atoms[a].x0 = w->atoms[a].y0 = UINT32_MAX;
        w->atoms[a].x1 = w->atoms[a].y1 = 0;
    }
    memset(w->adj, 0, (size_t)n_obj * n_obj);
    for (uint32_t x = 0; x < W; x++) {
        int prev = -1;
        for (size_t i = w->col_first[x]; i < w->col_first[x + 1]; i++) {
            atom *a = &w->atoms[w->rl_label[i]];
            uint32_t y = w->rl_y[i], len = w->rl_len[i];
            a->area += len;
            if (x < a->x0) a->x0 = x;
            if (x > a->x1) a->x1 = x;
            if (y < a->y0) a->y0 = y;
            if (y + len - 1 > a->y1) a->y1 = y + len - 1;
            if (prev >= 0 && a->obj >= 0 && a->obj != prev)
                w->adj[(size_t)prev * n_obj + a->obj] = w->adj[(size_t)a->obj * n_obj + prev] = 1;
            prev = a->obj;
        }
    }
    for (uint32_t y = 0; y < H; y++) {
        const uint16_t *row = w->lab + (size_t)y * W;
        for (uint32_t x = 1; x < W; x++) {
            if (row[x] == row[x - 1]) continue;
            int o1 = w->atoms[row[x]].obj, o0 = w->atoms[row[x - 1]].obj;
            if (o0 >= 0 && o1 >= 0 && o0 != o1)
                w->adj[(size_t)o0 * n_obj + o1] = w->adj[(size_t)o1 * n_obj + o0] = 1;
        }
    }
    return 0;
}

/* Chooses up to target masks into w->specs: the regions, the largest
 * objects, parts of split objects, unions of touching objects; returns how
 * many, or -1 when out of memory. */
static long select_masks(synth_scene *s, rng *r, int K, uint32_t n_obj, size_t n_atoms,
                         uint32_t target)
{
    synth_work *w = s->work;
    const uint64_t min_area = synth_min_area(s->width, s->height);
    size_t n_cand = (size_t)K + 3 * (size_t)n_obj + (size_t)n_obj * (n_obj - 1) / 2;
    if (grow(&w->specs, &w->cap_specs, n_cand, sizeof *w->specs)) return -1;
    spec *sp = w->specs;
    size_t n_reg = 0, n_ob = 0;
    for (int k = 0; k < K; k++) {
        spec_init(&sp[n_reg], SYNTH_REGION);
        spec_add_atom(&sp[n_reg], &w->atoms[k], (uint16_t)k);
        if (sp[n_reg].area >= min_area) n_reg++;
    }
    if (n_reg > target) n_reg = target;
    spec *ob = sp + n_reg;
    for (uint32_t i = 0; i < n_obj; i++) {
        const shape *sh = &w->shapes[i];
        spec_init(&ob[n_ob], SYNTH_OBJECT);
        spec_add_atom(&ob[n_ob], &w->atoms[sh->atom[0]], sh->atom[0]);
        if (sh->split) spec_add_atom(&ob[n_ob], &w->atoms[sh->atom[1]], sh->atom[1]);
        if (ob[n_ob].area >= min_area) n_ob++;
    }
    qsort(ob, n_ob, sizeof *ob, cmp_area_desc);
    if (n_reg + n_ob > target) n_ob = target - n_reg;
    size_t n_sel = n_reg + n_ob;
    /* the kept shapes, for parts and unions */
    uint8_t *kept = w->member; /* borrowed: cleared before any mask is built */
    memset(kept, 0, n_atoms);
    for (size_t i = 0; i < n_ob; i++) kept[ob[i].atoms[0]] = 1;
    /* parts of kept split shapes, in random order of shapes */
    spec *pt = sp + n_sel;
    size_t n_pt = 0;
    for (uint32_t i = 0; i < n_obj; i++) {
        const shape *sh = &w->shapes[i];
        if (!sh->split || !kept[sh->atom[0]]) continue;
        if (w->atoms[sh->atom[0]].area < min_area || w->atoms[sh->atom[1]].area < min_area) continue;
        for (int h = 0; h < 2; h++) {
            spec_init(&pt[n_pt], SYNTH_PART);
            spec_add_atom(&pt[n_pt], &w->atoms[sh->atom[h]], sh->atom[h]);
            n_pt++;
        }
    }
    for (size_t i = n_pt / 2; i > 1; i--) { /* shuffle pairs */
        size_t j = rng_below(r, i);
        spec t0 = pt[2 * (i - 1)], t1 = pt[2 * (i - 1) + 1];
        pt[2 * (i - 1)] = pt[2 * j];
        pt[2 * (i - 1) + 1] = pt[2 * j + 1];
        pt[2 * j] = t0;
        pt[2 * j + 1] = t1;
    }
    if (n_pt > target - n_sel) n_pt = target - n_sel;
    n_sel += n_pt;
    /* unions of two kept touching shapes */
    spec *un = sp + n_sel;
    size_t n_un = 0;
    for (uint32_t i = 0; i < n_obj; i++) {
        const shape *a = &w->shapes[i];
        if (!kept[a->atom[0]]) continue;
        for (uint32_t j = i + 1; j < n_obj; j++) {
            const shape *b = &w->shapes[j];
            if (!kept[b->atom[0]] || !w->adj[(size_t)i * n_obj + j]) continue;
            spec *u = &un[n_un++];
            spec_init(u, SYNTH_UNION);
            spec_add_atom(u, &w->atoms[a->atom[0]], a->atom[0]);
            if (a->split) spec_add_atom(u, &w->atoms[a->atom[1]], a->atom[1]);
            spec_add_atom(u, &w->atoms[b->atom[0]], b->atom[0]);
            if (b->split) spec_add_atom(u, &w->atoms[b->atom[1]], b->atom[1]);
        }
    }
    for (size_t i = n_un; i > 1; i--) {
        size_t j = rng_below(r, i);
        spec t = un[i - 1];
        un[i - 1] = un[j];
        un[j] = t;
    }
    if (n_un > target - n_sel) n_un = target - n_sel;
    n_sel += n_un;
    /* output order: shuffled, like SAM's crops and grid points */
    for (size_t i = n_sel; i > 1; i--) {
        size_t j = rng_below(r, i);
        spec t = sp[i - 1];
        sp[i - 1] = sp[j];
        sp[j] = t;
    }
    return (long)n_sel;
}

int synth_scene_render(synth_scene *s, uint64_t seed, uint32_t target, synth_nesting nesting,
                       sa1b_error *err)
{
    synth_work *w = s->work;
    const uint32_t W = s->width, H = s->height;
    const double S = W < H ? W : H;
    if (target > SYNTH_MAX_MASKS)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "mask target %u > %u", target, SYNTH_MAX_MASKS);
    free_masks(s);

    /* plan, and plan again with more shapes while the candidates fall short
     * of the target (occlusion, a small image) */
    rng r;
    int K = 0;
    uint32_t n_obj = 0;
    size_t n_atoms = 0;
    long n_sel = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        r.s = seed ^ UINT64_C(0x6A09E667F3BCC909) ^ ((uint64_t)attempt << 56);
        rng_next(&r);
        K = 2 + (int)rng_below(&r, 3);
        if (target > 0 && (uint32_t)K > target) K = (int)target;
        double base = target == 0 ? 3 : target <= (uint32_t)K ? 1 : (target - K) * 0.6 + 0.5;
        double want = base * (1.0 + 0.5 * attempt);
        if (want > 2 * SYNTH_MAX_MASKS) want = 2 * SYNTH_MAX_MASKS;
        n_obj = want < 1 ? 1 : (uint32_t)want;
        if (plan_and_label(s, &r, K, n_obj, &n_atoms))
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
        n_sel = target ? select_masks(s, &r, K, n_obj, n_atoms, target) : 0;
        if (n_sel < 0) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
        if ((uint32_t)n_sel >= target) break;
    }
    /* flat: keep the regions and objects of the full selection, in their
     * order; the plan, the random stream and so the picture stay the same */
    if (nesting == SYNTH_NESTING_FLAT) {
        long k = 0;
        for (long i = 0; i < n_sel; i++)
            if (w->specs[i].kind == SYNTH_REGION || w->specs[i].kind == SYNTH_OBJECT) w->specs[k++] = w->specs[i];
        n_sel = k;
    }

    /* the picture */
    uint32_t G = (uint32_t)(S / 6);
    if (G < 8) G = 8;
    uint32_t gw = W / G + 2, gh = H / G + 2;
    if (grow(&w->grid, &w->cap_grid, (size_t)gw * gh, sizeof *w->grid))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    float *rowv = realloc(w->rowv, gw * sizeof *w->rowv);
    if (!rowv) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    w->rowv = rowv;
    for (size_t i = 0; i < (size_t)gw * gh; i++) w->grid[i] = (float)rng_range(&r, -1, 1);
    paint_pixels(s, rng_next(&r), G, gw);

    /* the masks */
    size_t n = (size_t)n_sel;
    if (n > w->n_masks_alloc) {
        synth_mask *m = realloc(s->masks, n * sizeof *m);
        if (!m) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
        for (size_t i = w->n_masks_alloc; i < n; i++) {
            sa1b_rle z = SA1B_RLE_INIT;
            m[i].rle = z;
        }
        s->masks = m;
        w->n_masks_alloc = n;
    }
    spec *sp = w->specs;
    memset(w->member, 0, n_atoms);
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < sp[i].n; k++) w->member[sp[i].atoms[k]] = 1;
        int rc = build_mask(s, &sp[i], &r, &s->masks[i], err);
        for (int k = 0; k < sp[i].n; k++) w->member[sp[i].atoms[k]] = 0;
        if (rc) {
            s->n_masks = i + 1;
            return rc;
        }
    }
    s->n_masks = n;
    return SA1B_OK;
}
