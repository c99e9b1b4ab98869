/*
 * test-train-grad.c - finite-difference checks of every layer's backward in
 * the CPU backend (small shapes): for a layer y = f(x, w), the scalar
 * L = sum(r * y) with a fixed random r has dL/dy = r, so the backward run
 * with dout = r must match central differences of L in every input and
 * parameter.  Errors are ||fd - analytic|| / ||analytic|| over the checked
 * elements; L is summed in double.  Also: forward values against direct
 * formulas (GELU, PE), the loss's special cases, and the whole model on a
 * micro configuration.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "common/kernels.h"
#include "model/model.h"
#include "common/tr_rng.h"
#include "tap.h"
#include "registry/registry.h"

static tr_backend *be;
static tr_rng rng;

static float *rnd(size_t n, double scale)
{
    float *x = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * tr_rng_normal(&rng));
    return x;
}

static float *zeros(size_t n) { return calloc(n + 1, sizeof(float)); }

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

typedef double (*lossfn)(void *ctx);

/* relative error of analytic gradient g against central differences of f in x */
static double fd_check(lossfn f, void *ctx, float *x, const float *g, size_t n, double eps)
{
    size_t step = n > 300 ? n / 300 : 1;
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i += step) {
        float keep = x[i];
        x[i] = (float)(keep + eps);
        double lp = f(ctx);
        x[i] = (float)(keep - eps);
        double lm = f(ctx);
        x[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        num += (fd - g[i]) * (fd - g[i]);
        den += (double)g[i] * g[i];
    }
    return sqrt(num) / (sqrt(den) > 1e-12 ? sqrt(den) : 1e-12);
}

#define CHECK(name, f, ctx, x, g, n, eps, tol)                                                    \
    do {                                                                                          \
        double e_ = fd_check(f, ctx, x, g, n, eps);                                               \
        if (!tap_ok(e_ < (tol), "%s: relative error %.2e < %.0e", name, e_, (double)(tol)))     \
            tap_diag("failed");                                                                   \
    } while (0)

/* ---- linear ---- */
typedef struct { int N, I, O; float *x, *w, *b, *y, *r; } lin_ctx;
static double lin_loss(void *c)
{
    lin_ctx *l = c;
    be->ops->linear_forward(be, tr_f32(l->y), tr_f32(l->x), tr_f32(l->w), tr_f32(l->b), l->N, l->I, l->O);
    return dot(l->y, l->r, (size_t)l->N * l->O);
}
static void test_linear(int with_bias)
{
    lin_ctx l = {.N = 7, .I = 5, .O = 6};
    l.x = rnd(35, 1), l.w = rnd(30, 1), l.b = with_bias ? rnd(6, 1) : NULL, l.y = zeros(42), l.r = rnd(42, 1);
    float *dx = zeros(35), *dw = zeros(30), *db = zeros(6);
    be->ops->linear_backward(be, tr_f32(dx), dw, with_bias ? db : NULL, tr_f32(l.r), tr_f32(l.x), tr_f32(l.w), 7, 5, 6);
    CHECK(with_bias ? "linear dx" : "linear (no bias) dx", lin_loss, &l, l.x, dx, 35, 1e-2, 1e-3);
    CHECK(with_bias ? "linear dw" : "linear (no bias) dw", lin_loss, &l, l.w, dw, 30, 1e-2, 1e-3);
    if (with_bias) CHECK("linear db", lin_loss, &l, l.b, db, 6, 1e-2, 1e-3);
    free(l.x), free(l.w), free(l.b), free(l.y), free(l.r), free(dx), free(dw), free(db);
}

/* ---- layernorm ---- */
typedef struct { int N, C; float eps; float *x, *w, *b, *y, *m, *rs, *r; } ln_ctx;
static double ln_loss(void *c)
{
    ln_ctx *l = c;
    be->ops->layernorm_forward(be, tr_f32(l->y), l->m, l->rs, tr_f32(l->x), tr_f32(l->w), tr_f32(l->b), l->N, l->C, l->eps);
    return dot(l->y, l->r, (size_t)l->N * l->C);
}
static void test_layernorm(void)
{
    ln_ctx l = {.N = 5, .C = 8, .eps = 1e-5f};
    l.x = rnd(40, 2), l.w = rnd(8, 1), l.b = rnd(8, 1), l.y = zeros(40), l.m = zeros(5), l.rs = zeros(5);
    l.r = rnd(40, 1);
    ln_loss(&l);
    /* forward against the definition with the biased variance */
    double mean = 0, var = 0;
    for (int i = 0; i < 8; i++) mean += l.x[i];
    mean /= 8;
    for (int i = 0; i < 8; i++) var += (l.x[i] - mean) * (l.x[i] - mean);
    var /= 8;
    double want = (l.x[3] - mean) / sqrt(var + 1e-5) * l.w[3] + l.b[3];
    tap_is_close(l.y[3], want, 1e-5, "layernorm forward uses the biased variance");
    float *dx = zeros(40), *dw = zeros(8), *db = zeros(8);
    be->ops->layernorm_backward(be, tr_f32(dx), dw, db, tr_f32(l.r), tr_f32(l.x), tr_f32(l.w), l.m, l.rs, 5, 8);
    CHECK("layernorm dx", ln_loss, &l, l.x, dx, 40, 1e-2, 2e-3);
    CHECK("layernorm dw", ln_loss, &l, l.w, dw, 8, 1e-2, 1e-3);
    CHECK("layernorm db", ln_loss, &l, l.b, db, 8, 1e-2, 1e-3);
    free(l.x), free(l.w), free(l.b), free(l.y), free(l.m), free(l.rs), free(l.r), free(dx), free(dw), free(db);
}

/* ---- gelu / relu ---- */
typedef struct { size_t n; int relu; float *x, *y, *r; } act_ctx;
static double act_loss(void *c)
{
    act_ctx *a = c;
    if (a->relu)
        be->ops->relu_forward(be, tr_f32(a->y), tr_f32(a->x), a->n);
    else
        be->ops->gelu_forward(be, tr_f32(a->y), tr_f32(a->x), a->n);
    return dot(a->y, a->r, a->n);
}
/* GELU against the exact form in double over [-14, 14]: float precision
 * near the origin and above, relative precision down the negative tail
 * (where 1 + erff would keep no digit; x/sqrt 2 rounded to float costs 1e-5
 * there); the backend's loops (SIMD where the CPU has it) give the very
 * bits of the scalar kernels, at any length. */
static void test_gelu_precision(void)
{
    double worst_abs = 0, worst_tail = 0, worst_grad = 0;
    for (int i = 0; i <= 280000; i++) {
        float x = -14.0f + (float)i * 1e-4f;
        double xd = x, cdf = 0.5 * erfc(-xd / sqrt(2.0)), pdf = exp(-0.5 * xd * xd) / sqrt(2 * M_PI);
        double ref = xd * cdf, dref = cdf + xd * pdf;
        double e = fabs((double)tr_gelu(x) - ref) / (fabs(xd) > 1 ? fabs(xd) : 1);
        if (e > worst_abs) worst_abs = e;
        if (x < -2.0f && fabs(ref) > 1e-36) {
            double r = fabs((double)tr_gelu(x) / ref - 1);
            if (r > worst_tail) worst_tail = r;
        }
        double g = fabs((double)tr_gelu_grad(x) - dref);
        if (g > worst_grad) worst_grad = g;
    }
    tap_ok(worst_abs < 2e-7, "gelu: |error| < 2e-7 max(1, |x|) on [-14, 14] (%.2g)", worst_abs);
    tap_ok(worst_tail < 3e-5, "gelu: relative error < 3e-5 on the negative tail (%.2g)", worst_tail);
    tap_ok(worst_grad < 5e-7, "gelu': |error| < 5e-7 on [-14, 14] (%.2g)", worst_grad);
    tap_ok(tr_gelu(-100.0f) == 0.0f && tr_gelu(100.0f) == 100.0f && isnan(tr_gelu(NAN)) &&
               tr_gelu_grad(-100.0f) == 0.0f && tr_gelu_grad(100.0f) == 1.0f && isnan(tr_gelu_grad(NAN)),
           "gelu, gelu': far tails and NaN");
    enum { N = 1003 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *g = malloc(N * sizeof *g),
          *d = malloc(N * sizeof *d);
    for (int i = 0; i < N; i++) {
        x[i] = (float)(6 * tr_rng_normal(&rng));
        g[i] = (float)tr_rng_normal(&rng);
        d[i] = (float)tr_rng_normal(&rng);
    }
    x[5] = NAN, x[6] = -INFINITY, x[7] = 0.0f, x[8] = -0.0f, x[9] = 1.0f, x[10] = -9.3f * (float)M_SQRT2;
    be->ops->gelu_forward(be, tr_f32(y), tr_f32(x), N);
    int same = 1;
    for (int i = 0; i < N; i++) {
        float r = tr_gelu(x[i]);
        same &= memcmp(&r, &y[i], sizeof r) == 0;
    }
    tap_ok(same, "gelu: the backend's loop gives the scalar kernel's bits");
    float *d0 = malloc(N * sizeof *d0);
    memcpy(d0, d, N * sizeof *d);
    be->ops->gelu_backward(be, tr_f32(d), tr_f32(g), tr_f32(x), N);
    same = 1;
    for (int i = 0; i < N; i++) {
        float r = d0[i] + g[i] * tr_gelu_grad(x[i]);
        same &= memcmp(&r, &d[i], sizeof r) == 0;
    }
    tap_ok(same, "gelu': the backend's loop gives the scalar kernel's bits");
    free(x), free(y), free(g), free(d), free(d0);
}

static void test_activations(void)
{
    tap_is_close(tr_gelu(1.0f), 0.8413447460685429, 1e-6, "gelu(1) is the exact erf form");
    tap_is_close(tr_gelu(-0.5f), -0.15426876936299347, 1e-6, "gelu(-0.5) is the exact erf form");
    test_gelu_precision();
    for (int relu = 0; relu < 2; relu++) {
        act_ctx a = {.n = 50, .relu = relu};
        a.x = rnd(50, 2), a.y = zeros(50), a.r = rnd(50, 1);
        for (int i = 0; i < 50; i++)
            if (fabsf(a.x[i]) < 0.05f) a.x[i] = 0.3f; /* away from the ReLU kink */
        float *dx = zeros(50);
        if (relu)
            be->ops->relu_backward(be, tr_f32(dx), tr_f32(a.r), tr_f32(a.x), 50);
        else
            be->ops->gelu_backward(be, tr_f32(dx), tr_f32(a.r), tr_f32(a.x), 50);
        CHECK(relu ? "relu dx" : "gelu dx", act_loss, &a, a.x, dx, 50, 1e-2, 1e-3);
        free(a.x), free(a.y), free(a.r), free(dx);
    }
}

/* ---- attention (strided q/k/v, heads as chunks) ---- */
typedef struct { tr_attn_dims d; float *q, *k, *v, *o, *att, *r; size_t no; } at_ctx;
static double at_loss(void *c)
{
    at_ctx *a = c;
    be->ops->attention_forward(be, tr_f32(a->o), tr_f32(a->att), tr_f32(a->q), tr_f32(a->k), tr_f32(a->v), &a->d);
    return dot(a->o, a->r, a->no);
}
static void test_attention_packed(void)
{
    /* encoder layout: qkv [N, T, 3E] packed, out [N, T, E] */
    int N = 2, T = 5, E = 6, H = 2;
    at_ctx a;
    a.d = (tr_attn_dims){.N = N, .Tq = T, .Tk = T, .heads = H, .dh = E / H, .ldq = 3 * E, .ldk = 3 * E,
                         .ldv = 3 * E, .ldo = E, .sq = (size_t)T * 3 * E, .sk = (size_t)T * 3 * E,
                         .sv = (size_t)T * 3 * E, .so = (size_t)T * E};
    size_t nqkv = (size_t)N * T * 3 * E;
    float *qkv = rnd(nqkv, 1);
    a.q = qkv, a.k = qkv + E, a.v = qkv + 2 * E;
    a.no = (size_t)N * T * E;
    a.o = zeros(a.no), a.att = zeros((size_t)N * H * T * T), a.r = rnd(a.no, 1);
    at_loss(&a);
    /* head 1 of row 2 of image 1 by the definition */
    {
        int n = 1, t = 2, hd = 1, dh = E / H;
        double s[16], mx = -1e30, z = 0, out0 = 0;
        for (int j = 0; j < T; j++) {
            s[j] = 0;
            for (int c = 0; c < dh; c++)
                s[j] += (double)qkv[((size_t)n * T + t) * 3 * E + hd * dh + c] *
                        qkv[((size_t)n * T + j) * 3 * E + E + hd * dh + c];
            s[j] /= sqrt(dh);
            if (s[j] > mx) mx = s[j];
        }
        for (int j = 0; j < T; j++) z += exp(s[j] - mx);
        for (int j = 0; j < T; j++) out0 += exp(s[j] - mx) / z * qkv[((size_t)n * T + j) * 3 * E + 2 * E + hd * dh];
        tap_is_close(a.o[((size_t)n * T + t) * E + hd * dh], out0, 1e-5, "attention forward: heads are contiguous chunks");
    }
    float *dqkv = zeros(nqkv);
    be->ops->attention_backward(be, tr_f32(dqkv), tr_f32(dqkv + E), tr_f32(dqkv + 2 * E), tr_f32(a.r), tr_f32(a.o),
                                tr_f32(a.q), tr_f32(a.k), tr_f32(a.v), tr_f32(a.att), &a.d);
    CHECK("attention (packed qkv) dqkv", at_loss, &a, qkv, dqkv, nqkv, 1e-2, 2e-3);
    free(qkv), free(a.o), free(a.att), free(a.r), free(dqkv);
}

static void test_attention_cross(void)
{
    /* decoder layout: q [N, Tq, Ci], k/v [N, Tk, Ci] */
    int N = 2, Tq = 3, Tk = 7, Ci = 8, H = 2;
    at_ctx a;
    a.d = (tr_attn_dims){.N = N, .Tq = Tq, .Tk = Tk, .heads = H, .dh = Ci / H, .ldq = Ci, .ldk = Ci, .ldv = Ci,
                         .ldo = Ci, .sq = (size_t)Tq * Ci, .sk = (size_t)Tk * Ci, .sv = (size_t)Tk * Ci,
                         .so = (size_t)Tq * Ci};
    size_t nq = (size_t)N * Tq * Ci, nk = (size_t)N * Tk * Ci;
    a.q = rnd(nq, 1), a.k = rnd(nk, 1), a.v = rnd(nk, 1);
    a.no = nq, a.o = zeros(nq), a.att = zeros((size_t)N * H * Tq * Tk), a.r = rnd(nq, 1);
    at_loss(&a);
    float *dq = zeros(nq), *dk = zeros(nk), *dv = zeros(nk);
    be->ops->attention_backward(be, tr_f32(dq), tr_f32(dk), tr_f32(dv), tr_f32(a.r), tr_f32(a.o), tr_f32(a.q),
                                tr_f32(a.k), tr_f32(a.v), tr_f32(a.att), &a.d);
    CHECK("attention (cross) dq", at_loss, &a, (float *)a.q, dq, nq, 1e-2, 2e-3);
    CHECK("attention (cross) dk", at_loss, &a, (float *)a.k, dk, nk, 1e-2, 2e-3);
    CHECK("attention (cross) dv", at_loss, &a, (float *)a.v, dv, nk, 1e-2, 2e-3);
    free((void *)a.q), free((void *)a.k), free((void *)a.v), free(a.o), free(a.att), free(a.r), free(dq), free(dk),
        free(dv);
}

/* ---- ConvTranspose 2x2 ---- */
typedef struct { int N, H, W, Ci, Co; float *x, *w, *b, *y, *s, *r; size_t ny; } ct_ctx;
static double ct_loss(void *c)
{
    ct_ctx *t = c;
    be->ops->convt2x2_forward(be, tr_f32(t->y), tr_f32(t->x), tr_f32(t->w), tr_f32(t->b), t->s, t->N, t->H, t->W, t->Ci, t->Co);
    return dot(t->y, t->r, t->ny);
}
static void test_convt(void)
{
    ct_ctx t = {.N = 2, .H = 3, .W = 2, .Ci = 4, .Co = 3};
    size_t nx = 2 * 6 * 4, nw = 4 * 3 * 4;
    t.ny = 2 * 24 * 3;
    t.x = rnd(nx, 1), t.w = rnd(nw, 1), t.b = rnd(3, 1), t.y = zeros(t.ny), t.s = zeros(2 * 6 * 12), t.r = rnd(t.ny, 1);
    ct_loss(&t);
    /* out[o, 2r+i, 2c+j] = b[o] + sum_ch x[ch, r, c] w[ch, o, i, j]: pixel (r=2, c=1), i=1, j=0, o=2, n=1 */
    double want = t.b[2];
    for (int ch = 0; ch < 4; ch++) want += (double)t.x[((size_t)1 * 6 + 2 * 2 + 1) * 4 + ch] * t.w[((ch * 3 + 2) * 2 + 1) * 2 + 0];
    tap_is_close(t.y[((size_t)1 * 24 + (2 * 2 + 1) * 4 + 2 * 1 + 0) * 3 + 2], want, 1e-5,
                 "convtranspose forward matches the PyTorch layout [in, out, 2, 2]");
    float *dx = zeros(nx), *dw = zeros(nw), *db = zeros(3);
    be->ops->convt2x2_backward(be, tr_f32(dx), dw, db, tr_f32(t.r), tr_f32(t.x), tr_f32(t.w), t.s, 2, 3, 2, 4, 3);
    CHECK("convtranspose dx", ct_loss, &t, t.x, dx, nx, 1e-2, 1e-3);
    CHECK("convtranspose dw", ct_loss, &t, t.w, dw, nw, 1e-2, 1e-3);
    CHECK("convtranspose db", ct_loss, &t, t.b, db, 3, 1e-2, 1e-3);
    free(t.x), free(t.w), free(t.b), free(t.y), free(t.s), free(t.r), free(dx), free(dw), free(db);
}

/* ---- prompt tokens, keys, mask dot ---- */
typedef struct { int NP, K, C, S; float *pts, *gauss, *le, *nap, *it, *mt, *T0, *r; int32_t *lab; } tok_ctx;
static double tok_loss(void *c)
{
    tok_ctx *t = c;
    be->ops->prompt_tokens_forward(be, tr_f32(t->T0), t->pts, t->lab, t->gauss, tr_f32(t->le), tr_f32(t->nap), tr_f32(t->it), tr_f32(t->mt), t->NP, t->K,
                                   t->C, t->S);
    return dot(t->T0, t->r, (size_t)t->NP * (t->K + 2) * t->C);
}
static void test_prompt(void)
{
    tok_ctx t = {.NP = 3, .K = 3, .C = 8, .S = 32};
    int32_t lab[9] = {1, 0, -1, 1, 1, 0, -1, -1, 0};
    t.lab = lab;
    t.pts = rnd(18, 10), t.gauss = rnd(8, 1), t.le = rnd(16, 1), t.nap = rnd(8, 1), t.it = rnd(8, 1), t.mt = rnd(8, 1);
    size_t nT = 3 * 5 * 8;
    t.T0 = zeros(nT), t.r = rnd(nT, 1);
    tok_loss(&t);
    /* point 0 of pair 0: PE(u) + label_emb[1], sines first */
    double ux = (t.pts[0] + 0.5) / 32, uy = (t.pts[1] + 0.5) / 32;
    double z1 = 2 * M_PI * ((2 * ux - 1) * t.gauss[1] + (2 * uy - 1) * t.gauss[4 + 1]);
    tap_is_close(t.T0[2 * 8 + 1], sin(z1) + t.le[8 + 1], 1e-5, "point token: sin first, plus label_emb[1]");
    tap_is_close(t.T0[2 * 8 + 4 + 1], cos(z1) + t.le[8 + 4 + 1], 1e-5, "point token: then cos");
    tap_is_close(t.T0[4 * 8 + 3], t.nap[3], 0, "padding point is not_a_point alone");
    float *dle = zeros(16), *dnap = zeros(8), *dit = zeros(8), *dmt = zeros(8);
    be->ops->prompt_tokens_backward(be, dle, dnap, dit, dmt, tr_f32(t.r), lab, 3, 3, 8);
    CHECK("prompt label_emb grad", tok_loss, &t, t.le, dle, 16, 1e-2, 1e-3);
    CHECK("prompt not_a_point grad", tok_loss, &t, t.nap, dnap, 8, 1e-2, 1e-3);
    CHECK("dec iou_token grad", tok_loss, &t, t.it, dit, 8, 1e-2, 1e-3);
    CHECK("dec mask_token grad", tok_loss, &t, t.mt, dmt, 8, 1e-2, 1e-3);
    /* dense PE: cell (r, c) -> PE((c + .5)/G, (r + .5)/G) */
    float pe[4 * 4 * 8];
    be->ops->pe_dense(be, tr_f32(pe), t.gauss, 4, 8);
    double zz = 2 * M_PI * ((2 * (2.5 / 4) - 1) * t.gauss[0] + (2 * (1.5 / 4) - 1) * t.gauss[4]);
    tap_is_close(pe[(1 * 4 + 2) * 8 + 0], sin(zz), 1e-5, "dense PE: row-major cells, x from the column");
    free(t.pts), free(t.gauss), free(t.le), free(t.nap), free(t.it), free(t.mt), free(t.T0), free(t.r);
    free(dle), free(dnap), free(dit), free(dmt);
}

typedef struct { int B, M, GG, C; float *emb, *nm, *K, *r; } key_ctx;
static double key_loss(void *c)
{
    key_ctx *k = c;
    be->ops->keys_forward(be, tr_f32(k->K), tr_f32(k->emb), tr_f32(k->nm), k->B, k->M, k->GG, k->C);
    return dot(k->K, k->r, (size_t)k->B * k->M * k->GG * k->C);
}
typedef struct { int N, RR, c; float *U, *h, *lg, *r; } md_ctx;
static double md_loss(void *c)
{
    md_ctx *m = c;
    be->ops->mask_dot_forward(be, tr_f32(m->lg), tr_f32(m->U), tr_f32(m->h), m->N, m->RR, m->c);
    return dot(m->lg, m->r, (size_t)m->N * m->RR);
}
static void test_keys_dot(void)
{
    key_ctx k = {.B = 2, .M = 3, .GG = 4, .C = 5};
    k.emb = rnd(40, 1), k.nm = rnd(5, 1), k.K = zeros(120), k.r = rnd(120, 1);
    float *demb = zeros(40), *dnm = zeros(5);
    be->ops->keys_backward(be, tr_f32(demb), dnm, tr_f32(k.r), 2, 3, 4, 5);
    CHECK("image keys demb", key_loss, &k, k.emb, demb, 40, 1e-2, 1e-3);
    CHECK("prompt no_mask grad", key_loss, &k, k.nm, dnm, 5, 1e-2, 1e-3);
    free(k.emb), free(k.nm), free(k.K), free(k.r), free(demb), free(dnm);
    md_ctx m = {.N = 3, .RR = 16, .c = 4};
    m.U = rnd(192, 1), m.h = rnd(12, 1), m.lg = zeros(48), m.r = rnd(48, 1);
    float *dU = zeros(192), *dh = zeros(12);
    be->ops->mask_dot_backward(be, tr_f32(dU), tr_f32(dh), tr_f32(m.r), tr_f32(m.U), tr_f32(m.h), 3, 16, 4);
    CHECK("hypernetwork dot dU", md_loss, &m, m.U, dU, 192, 1e-2, 1e-3);
    CHECK("hypernetwork dot dhyp", md_loss, &m, m.h, dh, 12, 1e-2, 1e-3);
    free(m.U), free(m.h), free(m.lg), free(m.r), free(dU), free(dh);
}

/* ---- loss ---- */
/* The op as one batch: gradients of the mean over the valid pairs, the
 * means of its sums. */
static tr_loss sam_loss_mean(float *dx, float *di, const float *x, const float *iou, const uint8_t *y,
                             const uint8_t *valid, int N, int RR)
{
    tr_loss L = {0};
    for (int n = 0; n < N; n++) L.n_valid += valid[n] ? 1 : 0;
    double s[4] = {0};
    be->ops->sam_loss(be, tr_f32(dx), tr_f32(di), tr_f32(x), tr_f32(iou), y, valid, N, RR, 1.0f, L.n_valid, s);
    if (L.n_valid) {
        L.focal = s[0] / L.n_valid, L.dice = s[1] / L.n_valid, L.iou_mse = s[2] / L.n_valid, L.miou = s[3] / L.n_valid;
        L.loss = 20.0 * L.focal + L.dice + L.iou_mse;
    }
    return L;
}
typedef struct { int N, RR; float *x, *iou, *dx, *di; uint8_t *y, *valid; } ls_ctx;
static double ls_loss(void *c)
{
    ls_ctx *l = c;
    return sam_loss_mean(l->dx, l->di, l->x, l->iou, l->y, l->valid, l->N, l->RR).loss;
}
static void test_loss(void)
{
    ls_ctx l = {.N = 4, .RR = 36};
    size_t n = 4 * 36;
    l.x = rnd(n, 2), l.iou = rnd(4, 0.5), l.dx = zeros(n), l.di = zeros(4);
    for (size_t i = 0; i < n; i++)
        if (fabsf(l.x[i]) < 0.05f) l.x[i] = 0.1f; /* keep the detached IoU target fixed under +-eps */
    l.y = malloc(n), l.valid = malloc(4);
    for (size_t i = 0; i < n; i++) l.y[i] = (uint8_t)(tr_rng_below(&rng, 2));
    l.valid[0] = l.valid[1] = l.valid[3] = 1, l.valid[2] = 0;
    tr_loss L = sam_loss_mean(l.dx, l.di, l.x, l.iou, l.y, l.valid, 4, 36);
    /* direct double-precision evaluation */
    double f = 0, d = 0, im = 0;
    for (int p = 0; p < 4; p++) {
        if (!l.valid[p]) continue;
        double sf = 0, sp = 0, sy = 0, spy = 0, in = 0, un = 0;
        for (int i = 0; i < 36; i++) {
            double x = l.x[p * 36 + i], y = l.y[p * 36 + i], pr = 1 / (1 + exp(-x));
            double bce = (x > 0 ? x : 0) - x * y + log1p(exp(-fabs(x)));
            double pt = pr * y + (1 - pr) * (1 - y), at = 0.25 * y + 0.75 * (1 - y);
            sf += at * (1 - pt) * (1 - pt) * bce;
            sp += pr, sy += y, spy += pr * y;
            in += (x > 0) && y, un += (x > 0) || y;
        }
        f += sf / 36;
        d += 1 - (2 * spy + 1) / (sp + sy + 1);
        double t = un ? in / un : 1.0;
        im += (l.iou[p] - t) * (l.iou[p] - t);
    }
    tap_is_int(L.n_valid, 3, "loss counts valid pairs");
    tap_is_close(L.focal, f / 3, 1e-6, "focal is the flat mean over valid pairs");
    tap_is_close(L.dice, d / 3, 1e-6, "dice with +1 smoothing");
    tap_is_close(L.iou_mse, im / 3, 1e-6, "iou_mse against IoU(logits > 0)");
    tap_is_close(L.loss, 20 * f / 3 + d / 3 + im / 3, 1e-6, "loss = 20 focal + dice + iou_mse");
    CHECK("loss dlogits", ls_loss, &l, l.x, l.dx, n, 1e-3, 2e-3);
    ls_loss(&l);
    float di[4];
    memcpy(di, l.di, sizeof di);
    CHECK("loss diou", ls_loss, &l, l.iou, di, 4, 1e-3, 1e-3);
    ls_loss(&l);
    double sinv = 0;
    for (int i = 0; i < 36; i++) sinv += fabsf(l.dx[2 * 36 + i]);
    tap_ok(sinv == 0 && l.di[2] == 0, "invalid pair gets zero gradient");
    /* empty union: all logits <= 0 and an empty target -> IoU 1 */
    for (int i = 0; i < 36; i++) l.x[i] = -1.0f, l.y[i] = 0;
    l.valid[1] = l.valid[2] = l.valid[3] = 0;
    l.iou[0] = 1.0f;
    L = sam_loss_mean(l.dx, l.di, l.x, l.iou, l.y, l.valid, 4, 36);
    tap_is_close(L.iou_mse, 0.0, 1e-12, "empty union counts as IoU 1");
    l.valid[0] = 0;
    L = sam_loss_mean(l.dx, l.di, l.x, l.iou, l.y, l.valid, 4, 36);
    double sz = 0;
    for (size_t i = 0; i < n; i++) sz += fabsf(l.dx[i]);
    tap_ok(L.loss == 0 && L.n_valid == 0 && sz == 0, "no valid pair: loss 0 and zero gradients");
    free(l.x), free(l.iou), free(l.dx), free(l.di), free(l.y), free(l.valid);
}

/* ---- whole model, micro configuration ---- */
typedef struct { tr_model *m; tr_batch *b; double *target; } mdl_ctx;
static double mdl_loss(void *c)
{
    mdl_ctx *x = c;
    char err[256];
    tr_model_forward(x->m, x->b, err, sizeof err);
    tr_model *m = x->m;
    int NP = m->B * m->M, RR = 16 * (m->cfg.S / m->cfg.P) * (m->cfg.S / m->cfg.P);
    const float *logits = m->a.logits, *iou = m->a.iou; /* (an fp32 model) */
    float *dl = malloc((size_t)NP * RR * sizeof(float)), *di = malloc((size_t)NP * sizeof(float));
    tr_loss L = sam_loss_mean(dl, di, logits, iou, x->b->masks, x->b->valid, NP, RR);
    free(dl), free(di);
    /* the IoU target is detached: hold it at its value at the base point so
     * that sign flips of near-zero logits do not make the loss jump */
    double im = 0;
    for (int n = 0; n < NP; n++) {
        if (!x->b->valid[n]) continue;
        if (x->target[n] < 0) { /* first call: record the base targets */
            double in = 0, un = 0;
            for (int i = 0; i < RR; i++) {
                int p = logits[(size_t)n * RR + i] > 0, y = x->b->masks[(size_t)n * RR + i];
                in += p && y, un += p || y;
            }
            x->target[n] = un ? in / un : 1.0;
        }
        double d = iou[n] - x->target[n];
        im += d * d;
    }
    return L.n_valid ? L.loss - L.iou_mse + im / L.n_valid : 0.0;
}
static void test_model(void)
{
    tr_config cfg = {.S = 32, .P = 8, .E = 8, .L = 2, .H = 2, .C = 16, .h = 2, .D = 2};
    tr_model m;
    char err[256];
    int rc = tr_model_init(&m, be, &cfg, 2, 2, 2, err, sizeof err);
    tap_ok(rc == 0, "micro model initialises (%s)", rc ? err : "ok");
    if (rc) return;
    tr_model_init_params(&m, 7);
    /* larger weights than the 0.02 init so every path carries signal */
    for (size_t i = 0; i < m.n_param_floats; i++) m.param_mem[i] *= 5.0f;
    tr_batch *b = tr_batch_alloc(&be->mem, 2, 2, 2, 32, 16);
    tr_batch_synthetic(b, 3);
    double target[4] = {-1, -1, -1, -1};
    mdl_ctx x = {&m, b, target};
    tap_ok(tr_model_forward(&m, b, err, sizeof err) == 0, "forward runs");
    mdl_loss(&x);
    tr_loss L = tr_model_backward(&m, b);
    tap_ok(L.n_valid >= 1 && isfinite(L.loss), "loss %.6f over %d valid pairs", L.loss, L.n_valid);
    /* directional derivatives along random directions over all parameters
     * (FD of single elements in float is dominated by ReLU kinks) */
    size_t np = m.n_param_floats;
    float *w0 = malloc(np * sizeof(float)), *dir = malloc(np * sizeof(float));
    memcpy(w0, m.param_mem, np * sizeof(float));
    /* per tensor: a random direction inside the tensor, step 3e-4/sqrt(n);
     * float evaluation noise is ~1e-3 absolute, hence the mixed tolerance */
    int bad = 0;
    for (int pi_ = 0; pi_ < m.n_params; pi_++) {
        const tr_param_info *pi = &m.pinfo[pi_];
        double gd = 0;
        memset(dir, 0, np * sizeof(float));
        for (size_t i = pi->offset; i < pi->offset + pi->count; i++) {
            dir[i] = (float)tr_rng_normal(&rng);
            gd += (double)dir[i] * m.grad_mem[i];
        }
        double eps = 3e-4 / sqrt((double)pi->count), l[2];
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < np; i++) m.param_mem[i] = w0[i] + (float)((s ? -eps : eps) * dir[i]);
            l[s] = mdl_loss(&x);
        }
        memcpy(m.param_mem, w0, np * sizeof(float));
        double fd = (l[0] - l[1]) / (2 * eps);
        if (fabs(fd - gd) > 0.1 * fabs(gd) + 3e-3) {
            bad++;
            tap_diag("%s: finite difference %.6f, analytic %.6f", pi->name, fd, gd);
        }
    }
    tap_ok(bad == 0, "whole model: directional derivative of every one of %d tensors agrees", m.n_params);
    free(w0), free(dir);
    tr_batch_free(&be->mem, b);
    tr_model_free(&m);
}

int main(void)
{
    char err[256];
    tr_rng_seed(&rng, 42);
    be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!be) tap_skip_all(err);
    test_linear(1);
    test_linear(0);
    test_layernorm();
    test_activations();
    test_attention_packed();
    test_attention_cross();
    test_convt();
    test_prompt();
    test_keys_dot();
    test_loss();
    test_model();
    tap_ok(be->mem.total == 0, "every tensor given back to the allocator (%llu bytes left)",
           (unsigned long long)be->mem.total);
    tr_backend_free(be);
    return tap_done();
}
