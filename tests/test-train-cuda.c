/*
 * test-train-cuda.c - the CUDA backend (backend_cuda.cu) against the CPU
 * backend: every op of tr_ops on small random shapes, for fp32, bf16 and
 * fp16 operands (the attention on both of its paths: the fused kernel and
 * the blocked one through cuBLAS, each forced by SA1B_CUDA_ATTN), then
 * three steps of the tiny model, and two CUDA runs of them bit for bit.  Skips (77) with the reason when the build has no CUDA
 * or the machine no device.
 *
 * Tolerances: |gpu - cpu| <= tol * (1 + |cpu|) for every element, and the
 * relative L2 error ||gpu - cpu|| / ||cpu|| of the whole tensor within
 * min(tol, the bound for its type: fp32 1e-5, fp16 4e-3, bf16 1e-2):
 *  - element-wise ops, conversions, the input normalisation, image keys,
 *    rows, the mask dot product (forward, dU), AdamW and 8-bit AdamW: 0
 *    (the same kernels.h / quant8.h arithmetic in the same order, compiled
 *    without FMA contraction);
 *  - the positional encodings (sin and cos in double): 1e-6 in fp32, the
 *    sums' tolerance below for 16-bit outputs;
 *  - ops with sums (GEMMs, LayerNorm, attention, reductions): 1e-4 for
 *    fp32 outputs, 4e-3 for fp16, 2e-2 for bf16 (one rounding of the
 *    output, two for an accumulated one, over fp32 sums in another order);
 *    the loss sums (doubles) 1e-5;
 *  - the tiny model's losses: 1e-3 relative in fp32, 3e-2 in bf16; its
 *    first step's parameter gradients, all of them together: relative L2
 *    1e-5 in fp32, 1e-2 in bf16; each tensor in fp32 within 100 times
 *    that of the CPU's (its error over the larger of its norm and a floor
 *    of the gradients' scale), in bf16 its distance from the CPU's fp32
 *    run within 3 times the CPU's own, or 0.05 (compare_grads).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/backend_cuda.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "common/kernels.h"
#include "model/model.h"
#include "train/optim.h"
#include "common/quant8.h"
#include "tap.h"
#include "common/tr_rng.h"
#include "backend/cpu/backend_cpu.h"
#include "registry/registry.h"

static tr_backend *cpu, *gpu;
static tr_rng rng;
static const char *attn_path = "auto"; /* the CUDA attention's path (SA1B_CUDA_ATTN) */

/* A tensor on both backends: host (the CPU backend's) and device copies. */
typedef struct buf {
    void *h, *d;
    size_t n;
    int dt;
} buf;

static const char *dt_name(int dt) { return dt == TR_PREC_FP32 ? "fp32" : dt == TR_PREC_BF16 ? "bf16" : "fp16"; }
static double sum_tol(int dt) { return dt == TR_PREC_FP32 ? 1e-4 : dt == TR_PREC_FP16 ? 4e-3 : 2e-2; }

static float el(const void *p, int dt, size_t i)
{
    return dt == TR_PREC_FP32 ? ((const float *)p)[i] : tr_from_16(((const uint16_t *)p)[i], dt);
}

static void set_el(void *p, int dt, size_t i, float x)
{
    if (dt == TR_PREC_FP32) ((float *)p)[i] = x;
    else ((uint16_t *)p)[i] = tr_to_16(x, dt);
}

/* n elements of dt, normal with deviation sd (0: zeros), the same on both sides */
static buf mk(size_t n, int dt, double sd)
{
    size_t bytes = n * tr_prec_size(dt);
    buf b = {calloc(1, bytes + 64), tr_mem_alloc(&gpu->mem, TR_MEM_ACTS, bytes), n, dt};
    if (!b.h || !b.d) abort();
    for (size_t i = 0; i < n && sd > 0; i++) set_el(b.h, dt, i, (float)(sd * tr_rng_normal(&rng)));
    gpu->ops->upload(gpu, b.d, b.h, bytes);
    return b;
}

/* raw bytes (u8, int32 operands), the same on both sides */
static buf mk_bytes(const void *src, size_t bytes)
{
    buf b = {malloc(bytes + 64), tr_mem_alloc(&gpu->mem, TR_MEM_DATA, bytes), bytes, -1};
    if (!b.h || !b.d) abort();
    memcpy(b.h, src, bytes);
    gpu->ops->upload(gpu, b.d, b.h, bytes);
    return b;
}

static tr_ten H(buf b) { return tr_typed(b.h, b.dt); }
static tr_ten D(buf b) { return tr_typed(b.d, b.dt); }

static void rel(buf *b)
{
    free(b->h);
    tr_mem_free(&gpu->mem, b->d);
}

/* The relative L2 bound of the issue for a tensor of type dt. */
static double l2_tol(int dt) { return dt == TR_PREC_FP32 ? 1e-5 : dt == TR_PREC_FP16 ? 4e-3 : 1e-2; }

/* ||x - ref|| / ||ref|| (0 when both are 0; NaN stays NaN) */
static double rel_l2(double d2, double r2) { return r2 > 0 ? sqrt(d2 / r2) : d2 > 0 || d2 != d2 ? INFINITY : 0.0; }

/* The device copy against the host one: |g - c| <= tol (1 + |c|) everywhere
 * and the relative L2 error within min(tol, l2_tol). */
static int same(buf b, double tol, const char *fmt, const char *what)
{
    size_t bytes = b.n * tr_prec_size(b.dt);
    void *g = malloc(bytes + 64);
    gpu->ops->download(gpu, g, b.d, bytes);
    size_t bad = 0, first = 0;
    double worst = 0.0, d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < b.n; i++) {
        double c = el(b.h, b.dt, i), x = el(g, b.dt, i), e = fabs(x - c) / (1.0 + fabs(c));
        if (!(e <= tol)) {
            if (!bad++) first = i;
        }
        if (e > worst || e != e) worst = e;
        d2 += (x - c) * (x - c), r2 += c * c;
    }
    double l2 = rel_l2(d2, r2), lt = tol < l2_tol(b.dt) ? tol : l2_tol(b.dt);
    if (bad)
        tap_diag("%s: %zu of %zu elements off, first [%zu] gpu %g cpu %g; worst %g", what, bad, b.n, first,
                 (double)el(g, b.dt, first), (double)el(b.h, b.dt, first), worst);
    if (!(l2 <= lt)) tap_diag("%s: relative L2 error %g over %g", what, l2, lt);
    free(g);
    char err[400];
    if (tr_backend_error(gpu, err, sizeof err)) tap_diag("device error: %s", err);
    return tap_ok(!bad && l2 <= lt, fmt, what, dt_name(b.dt), tol);
}

#define SAME(b, tol, what) same((b), (tol), "%s (%s) within %g", (what))

/* ---- per dtype --------------------------------------------------------------------- */

static void test_elementwise(int dt)
{
    size_t n = 1000, rows = 10, row = 100;
    buf a = mk(n, dt, 2), b = mk(n, dt, 2), o = mk(n, dt, 0), g = mk(n, dt, 1);
    const tr_ops *c = cpu->ops, *d = gpu->ops;
    c->gelu_forward(cpu, H(o), H(a), n), d->gelu_forward(gpu, D(o), D(a), n);
    SAME(o, 0, "gelu_forward");
    c->gelu_backward(cpu, H(g), H(b), H(a), n), d->gelu_backward(gpu, D(g), D(b), D(a), n);
    SAME(g, 0, "gelu_backward (+=)");
    c->relu_forward(cpu, H(o), H(a), n), d->relu_forward(gpu, D(o), D(a), n);
    SAME(o, 0, "relu_forward");
    c->relu_backward(cpu, H(g), H(b), H(a), n), d->relu_backward(gpu, D(g), D(b), D(a), n);
    SAME(g, 0, "relu_backward (+=)");
    c->add(cpu, H(o), H(a), H(b), n), d->add(gpu, D(o), D(a), D(b), n);
    SAME(o, 0, "add");
    c->accumulate(cpu, H(o), H(b), n), d->accumulate(gpu, D(o), D(b), n);
    SAME(o, 0, "accumulate");
    c->add_bcast(cpu, H(o), H(a), H(b), rows, row), d->add_bcast(gpu, D(o), D(a), D(b), rows, row);
    SAME(o, 0, "add_bcast");
    for (int to = 0; to < 3; to++) {
        buf x = mk(n, to, 0);
        c->convert(cpu, H(x), H(a), n), d->convert(gpu, D(x), D(a), n);
        char what[64];
        snprintf(what, sizeof what, "convert from %s", dt_name(dt));
        SAME(x, 0, what);
        rel(&x);
    }
    c->zero(cpu, H(o), n), d->zero(gpu, D(o), n);
    SAME(o, 0, "zero");
    rel(&a), rel(&b), rel(&o), rel(&g);
}

static void test_linear_ln(int dt)
{
    const tr_ops *c = cpu->ops, *d = gpu->ops;
    double t = sum_tol(dt);
    int N = 33, I = 24, O = 20;
    buf x = mk((size_t)N * I, dt, 1), w = mk((size_t)O * I, dt, 0.3), b = mk(O, dt, 1), y = mk((size_t)N * O, dt, 0);
    c->linear_forward(cpu, H(y), H(x), H(w), H(b), N, I, O), d->linear_forward(gpu, D(y), D(x), D(w), D(b), N, I, O);
    SAME(y, t, "linear_forward");
    buf dy = mk((size_t)N * O, dt, 1), dx = mk((size_t)N * I, dt, 1);
    buf dw = mk((size_t)O * I, TR_PREC_FP32, 1), db = mk(O, TR_PREC_FP32, 1);
    c->linear_backward(cpu, H(dx), dw.h, db.h, H(dy), H(x), H(w), N, I, O);
    d->linear_backward(gpu, D(dx), dw.d, db.d, D(dy), D(x), D(w), N, I, O);
    SAME(dx, 2 * t, "linear_backward dinp (+=)");
    SAME(dw, 1e-4, "linear_backward dw (+=)");
    SAME(db, 1e-4, "linear_backward db (+=)");
    if (dt != TR_PREC_FP32) { /* fp32 weights with 16-bit activations: the GEMM's mixed-type path */
        buf w32 = mk((size_t)O * I, TR_PREC_FP32, 0.3), b32 = mk(O, TR_PREC_FP32, 1);
        c->linear_forward(cpu, H(y), H(x), H(w32), H(b32), N, I, O);
        d->linear_forward(gpu, D(y), D(x), D(w32), D(b32), N, I, O);
        SAME(y, t, "linear_forward, fp32 weight and bias");
        c->linear_backward(cpu, H(dx), NULL, NULL, H(dy), H(x), H(w32), N, I, O);
        d->linear_backward(gpu, D(dx), NULL, NULL, D(dy), D(x), D(w32), N, I, O);
        SAME(dx, 2 * t, "linear_backward dinp (+=), fp32 weight");
        rel(&w32), rel(&b32);
    }
    rel(&y), rel(&dy), rel(&dx), rel(&dw), rel(&db), rel(&b), rel(&w), rel(&x);

    int C = 70; /* not a multiple of the warp */
    N = 9;
    buf in = mk((size_t)N * C, dt, 2), lw = mk(C, dt, 1), lb = mk(C, dt, 1), out = mk((size_t)N * C, dt, 0);
    buf mean = mk(N, TR_PREC_FP32, 0), rstd = mk(N, TR_PREC_FP32, 0);
    c->layernorm_forward(cpu, H(out), mean.h, rstd.h, H(in), H(lw), H(lb), N, C, 1e-6f);
    d->layernorm_forward(gpu, D(out), mean.d, rstd.d, D(in), D(lw), D(lb), N, C, 1e-6f);
    SAME(out, t, "layernorm_forward");
    SAME(mean, 1e-6, "layernorm_forward mean");
    SAME(rstd, 1e-6, "layernorm_forward rstd");
    c->layernorm_stats(cpu, mean.h, rstd.h, H(out), N, C, 1e-6f);
    d->layernorm_stats(gpu, mean.d, rstd.d, D(out), N, C, 1e-6f);
    SAME(rstd, 1e-6, "layernorm_stats rstd");
    buf dout = mk((size_t)N * C, dt, 1), din = mk((size_t)N * C, dt, 1);
    buf gw = mk(C, TR_PREC_FP32, 1), gb = mk(C, TR_PREC_FP32, 1);
    c->layernorm_backward(cpu, H(din), gw.h, gb.h, H(dout), H(in), H(lw), mean.h, rstd.h, N, C);
    d->layernorm_backward(gpu, D(din), gw.d, gb.d, D(dout), D(in), D(lw), mean.d, rstd.d, N, C);
    SAME(din, 2 * t, "layernorm_backward dinp (+=)");
    SAME(gw, 1e-4, "layernorm_backward dw (+=)");
    SAME(gb, 1e-4, "layernorm_backward db (+=)");
    rel(&in), rel(&lw), rel(&lb), rel(&out), rel(&mean), rel(&rstd), rel(&dout), rel(&din), rel(&gw), rel(&gb);
}

static void test_attention_t(int dt, int heads, int dh, int Tq, int Tk)
{
    double t = sum_tol(dt);
    tr_attn_dims a = {.N = 2, .Tq = Tq, .Tk = Tk, .heads = heads, .dh = dh};
    int W = heads * dh;
    a.ldq = a.ldk = a.ldv = a.ldo = W;
    a.sq = a.so = (size_t)a.Tq * W, a.sk = a.sv = (size_t)a.Tk * W;
    buf q = mk(a.N * a.sq, dt, 1), k = mk(a.N * a.sk, dt, 1), v = mk(a.N * a.sv, dt, 1), o = mk(a.N * a.so, dt, 0);
    size_t ns = (size_t)a.N * heads;
    buf att_c = mk(ns * tr_cpu_sizes.attention_saved(a.Tq, a.Tk), dt, 0);
    buf att_g = mk(ns * gpu->sizes->attention_saved(a.Tq, a.Tk), dt, 0);
    cpu->ops->attention_forward(cpu, H(o), H(att_c), H(q), H(k), H(v), &a);
    gpu->ops->attention_forward(gpu, D(o), D(att_g), D(q), D(k), D(v), &a);
    char what[80];
    snprintf(what, sizeof what, "attention_forward (%s), %d heads of %d, Tq %d Tk %d", attn_path, heads, dh, Tq, Tk);
    SAME(o, t, what);
    buf dout = mk(a.N * a.so, dt, 1), dq = mk(a.N * a.sq, dt, 1), dk = mk(a.N * a.sk, dt, 1), dv = mk(a.N * a.sv, dt, 1);
    /* dq, dk, dv hold random values: both backends write over them (backend.h); each takes its own output */
    cpu->ops->attention_backward(cpu, H(dq), H(dk), H(dv), H(dout), H(o), H(q), H(k), H(v), H(att_c), &a);
    gpu->ops->attention_backward(gpu, D(dq), D(dk), D(dv), D(dout), D(o), D(q), D(k), D(v), D(att_g), &a);
    /* the CPU differentiates its probabilities as stored (16-bit), the GPU recomputes them in fp32 from the
     * lse (and D from its 16-bit output) */
    double tb = dt == TR_PREC_FP32 ? 2 * t : 4 * t;
    snprintf(what, sizeof what, "attention_backward (%s) dq (=), %d heads of %d, Tq %d Tk %d", attn_path, heads, dh,
             Tq, Tk);
    SAME(dq, tb, what);
    snprintf(what, sizeof what, "attention_backward (%s) dk (=), %d heads of %d, Tq %d Tk %d", attn_path, heads, dh,
             Tq, Tk);
    SAME(dk, tb, what);
    snprintf(what, sizeof what, "attention_backward (%s) dv (=), %d heads of %d, Tq %d Tk %d", attn_path, heads, dh,
             Tq, Tk);
    SAME(dv, tb, what);
    rel(&q), rel(&k), rel(&v), rel(&o), rel(&att_c), rel(&att_g), rel(&dout), rel(&dq), rel(&dk), rel(&dv);
}

static void test_attention(int dt, int heads, int dh) { test_attention_t(dt, heads, dh, 7, 11); }

/* The encoder's layout: q, k and v packed in rows of 3W of one tensor
 * [N, T, 3W], their gradients likewise in one tensor (the dq pass and the
 * dk/dv pass write interleaved columns of it), dh 64 (every lane), T over
 * 64 and not a multiple of 32 (the online softmax rescales). */
static void test_attention_packed(int dt)
{
    double t = sum_tol(dt);
    int heads = 2, dh = 64, W = heads * dh, Tn = 70;
    tr_attn_dims a = {.N = 2, .Tq = Tn, .Tk = Tn, .heads = heads, .dh = dh, .ldq = 3 * W, .ldk = 3 * W,
                      .ldv = 3 * W, .ldo = W};
    a.sq = a.sk = a.sv = (size_t)Tn * 3 * W, a.so = (size_t)Tn * W;
    size_t es = tr_prec_size(dt), ns = (size_t)a.N * heads;
    buf qkv = mk(a.N * a.sq, dt, 1), o = mk(a.N * a.so, dt, 0);
    buf att_c = mk(ns * tr_cpu_sizes.attention_saved(a.Tq, a.Tk), dt, 0);
    buf att_g = mk(ns * gpu->sizes->attention_saved(a.Tq, a.Tk), dt, 0);
#define PART(b, side, j) tr_typed((char *)(b).side + (size_t)(j) * W * es, dt)
    cpu->ops->attention_forward(cpu, H(o), H(att_c), PART(qkv, h, 0), PART(qkv, h, 1), PART(qkv, h, 2), &a);
    gpu->ops->attention_forward(gpu, D(o), D(att_g), PART(qkv, d, 0), PART(qkv, d, 1), PART(qkv, d, 2), &a);
    char what[96];
    snprintf(what, sizeof what, "attention_forward (%s), packed qkv, 2 heads of 64, T 70", attn_path);
    SAME(o, t, what);
    buf dout = mk(a.N * a.so, dt, 1), dqkv = mk(a.N * a.sq, dt, 1);
    cpu->ops->attention_backward(cpu, PART(dqkv, h, 0), PART(dqkv, h, 1), PART(dqkv, h, 2), H(dout), H(o),
                                 PART(qkv, h, 0), PART(qkv, h, 1), PART(qkv, h, 2), H(att_c), &a);
    gpu->ops->attention_backward(gpu, PART(dqkv, d, 0), PART(dqkv, d, 1), PART(dqkv, d, 2), D(dout), D(o),
                                 PART(qkv, d, 0), PART(qkv, d, 1), PART(qkv, d, 2), D(att_g), &a);
#undef PART
    snprintf(what, sizeof what, "attention_backward (%s) dq, dk, dv packed (=)", attn_path);
    SAME(dqkv, dt == TR_PREC_FP32 ? 2 * t : 4 * t, what);
    rel(&qkv), rel(&o), rel(&att_c), rel(&att_g), rel(&dout), rel(&dqkv);
}

static void test_convt(int dt)
{
    double t = sum_tol(dt);
    int N = 2, Hh = 3, W = 4, Ci = 8, Co = 5;
    size_t npix = (size_t)N * Hh * W, nout = npix * 4 * Co;
    buf in = mk(npix * Ci, dt, 1), w = mk((size_t)Ci * Co * 4, dt, 0.5), b = mk(Co, dt, 1), out = mk(nout, dt, 0);
    buf sc = mk(gpu->sizes->convt_scratch(npix, Co), TR_PREC_FP32, 0);
    cpu->ops->convt2x2_forward(cpu, H(out), H(in), H(w), H(b), sc.h, N, Hh, W, Ci, Co);
    gpu->ops->convt2x2_forward(gpu, D(out), D(in), D(w), D(b), sc.d, N, Hh, W, Ci, Co);
    SAME(out, t, "convt2x2_forward");
    buf dout = mk(nout, dt, 1), din = mk(npix * Ci, dt, 1), dw = mk((size_t)Ci * Co * 4, TR_PREC_FP32, 1);
    buf db = mk(Co, TR_PREC_FP32, 1);
    cpu->ops->convt2x2_backward(cpu, H(din), dw.h, db.h, H(dout), H(in), H(w), sc.h, N, Hh, W, Ci, Co);
    gpu->ops->convt2x2_backward(gpu, D(din), dw.d, db.d, D(dout), D(in), D(w), sc.d, N, Hh, W, Ci, Co);
    SAME(din, 2 * t, "convt2x2_backward dinp (+=)");
    SAME(dw, 1e-4, "convt2x2_backward dw (+=)");
    SAME(db, 1e-4, "convt2x2_backward db (+=)");
    rel(&in), rel(&w), rel(&b), rel(&out), rel(&sc), rel(&dout), rel(&din), rel(&dw), rel(&db);
}

static void test_inputs(int dt)
{
    double t = sum_tol(dt);
    int B = 2, S = 32, P = 8, G = S / P;
    uint8_t *img = malloc((size_t)B * S * S * 3);
    for (size_t i = 0; i < (size_t)B * S * S * 3; i++) img[i] = (uint8_t)tr_rng_below(&rng, 256);
    int32_t content[4] = {32, 32, 20, 25};
    buf im = mk_bytes(img, (size_t)B * S * S * 3), ct = mk_bytes(content, sizeof content);
    buf pt = mk((size_t)B * G * G * 3 * P * P, dt, 0), nm = mk((size_t)B * 3 * S * S, dt, 0);
    cpu->ops->patch_im2col(cpu, H(pt), im.h, ct.h, B, S, P), gpu->ops->patch_im2col(gpu, D(pt), im.d, ct.d, B, S, P);
    SAME(pt, 0, "patch_im2col");
    cpu->ops->image_normalize(cpu, H(nm), im.h, ct.h, B, S), gpu->ops->image_normalize(gpu, D(nm), im.d, ct.d, B, S);
    SAME(nm, 0, "image_normalize");
    rel(&im), rel(&ct), rel(&pt), rel(&nm);
    free(img);

    /* prompt encoder */
    int C = 16, NP = 5, K = 3;
    buf gauss = mk(C, TR_PREC_FP32, 1), pe = mk((size_t)G * G * C, dt, 0);
    cpu->ops->pe_dense(cpu, H(pe), gauss.h, G, C), gpu->ops->pe_dense(gpu, D(pe), gauss.d, G, C);
    SAME(pe, dt == TR_PREC_FP32 ? 1e-6 : t, "pe_dense");
    float pts[NP * K * 2];
    int32_t labs[NP * K];
    for (int i = 0; i < NP * K; i++) {
        pts[2 * i] = (float)tr_rng_below(&rng, (uint32_t)S), pts[2 * i + 1] = (float)tr_rng_below(&rng, (uint32_t)S);
        labs[i] = (int32_t)tr_rng_below(&rng, 3) - 1;
    }
    buf bp = mk_bytes(pts, sizeof pts), bl = mk_bytes(labs, sizeof labs);
    buf le = mk(2 * (size_t)C, dt, 1), nap = mk(C, dt, 1), it = mk(C, dt, 1), mt = mk(C, dt, 1);
    buf T0 = mk((size_t)NP * (K + 2) * C, dt, 0);
    cpu->ops->prompt_tokens_forward(cpu, H(T0), bp.h, bl.h, gauss.h, H(le), H(nap), H(it), H(mt), NP, K, C, S);
    gpu->ops->prompt_tokens_forward(gpu, D(T0), bp.d, bl.d, gauss.d, D(le), D(nap), D(it), D(mt), NP, K, C, S);
    SAME(T0, dt == TR_PREC_FP32 ? 1e-6 : t, "prompt_tokens_forward");
    buf dT0 = mk((size_t)NP * (K + 2) * C, dt, 1), dle = mk(2 * (size_t)C, TR_PREC_FP32, 1);
    buf dnap = mk(C, TR_PREC_FP32, 1), dit = mk(C, TR_PREC_FP32, 1), dmt = mk(C, TR_PREC_FP32, 1);
    cpu->ops->prompt_tokens_backward(cpu, dle.h, dnap.h, dit.h, dmt.h, H(dT0), bl.h, NP, K, C);
    gpu->ops->prompt_tokens_backward(gpu, dle.d, dnap.d, dit.d, dmt.d, D(dT0), bl.d, NP, K, C);
    SAME(dle, 1e-6, "prompt_tokens_backward dlabel_emb");
    SAME(dnap, 1e-6, "prompt_tokens_backward dnot_a_point");
    SAME(dit, 1e-6, "prompt_tokens_backward diou_tok");
    SAME(dmt, 1e-6, "prompt_tokens_backward dmask_tok");
    rel(&gauss), rel(&pe), rel(&bp), rel(&bl), rel(&le), rel(&nap), rel(&it), rel(&mt), rel(&T0), rel(&dT0);
    rel(&dle), rel(&dnap), rel(&dit), rel(&dmt);

    /* image keys and rows */
    int M = 3, GG = 6;
    C = 8;
    buf emb = mk((size_t)B * GG * C, dt, 1), nm2 = mk(C, dt, 1), Kimg = mk((size_t)B * M * GG * C, dt, 0);
    cpu->ops->keys_forward(cpu, H(Kimg), H(emb), H(nm2), B, M, GG, C);
    gpu->ops->keys_forward(gpu, D(Kimg), D(emb), D(nm2), B, M, GG, C);
    SAME(Kimg, 0, "keys_forward");
    buf dK = mk((size_t)B * M * GG * C, dt, 1), demb = mk((size_t)B * GG * C, dt, 1), dnm = mk(C, TR_PREC_FP32, 1);
    cpu->ops->keys_backward(cpu, H(demb), dnm.h, H(dK), B, M, GG, C);
    gpu->ops->keys_backward(gpu, D(demb), dnm.d, D(dK), B, M, GG, C);
    SAME(demb, 0, "keys_backward demb (+=)");
    SAME(dnm, 1e-6, "keys_backward dno_mask (+=)");
    int N = 4, T = 5, tt = 2;
    buf rin = mk((size_t)N * T * C, dt, 1), rout = mk((size_t)N * C, dt, 0);
    cpu->ops->rows_gather(cpu, H(rout), H(rin), N, T, C, tt), gpu->ops->rows_gather(gpu, D(rout), D(rin), N, T, C, tt);
    SAME(rout, 0, "rows_gather");
    cpu->ops->rows_scatter_add(cpu, H(rin), H(rout), N, T, C, tt);
    gpu->ops->rows_scatter_add(gpu, D(rin), D(rout), N, T, C, tt);
    SAME(rin, 0, "rows_scatter_add");
    rel(&emb), rel(&nm2), rel(&Kimg), rel(&dK), rel(&demb), rel(&dnm), rel(&rin), rel(&rout);
}

static void test_mask_loss(int dt)
{
    double t = sum_tol(dt);
    int N = 4, RR = 256, c = 8;
    buf U = mk((size_t)N * RR * c, dt, 1), hyp = mk((size_t)N * c, dt, 1), lg = mk((size_t)N * RR, dt, 0);
    cpu->ops->mask_dot_forward(cpu, H(lg), H(U), H(hyp), N, RR, c);
    gpu->ops->mask_dot_forward(gpu, D(lg), D(U), D(hyp), N, RR, c);
    SAME(lg, 0, "mask_dot_forward");
    buf dlg = mk((size_t)N * RR, dt, 1), dU = mk((size_t)N * RR * c, dt, 1), dh = mk((size_t)N * c, dt, 1);
    cpu->ops->mask_dot_backward(cpu, H(dU), H(dh), H(dlg), H(U), H(hyp), N, RR, c);
    gpu->ops->mask_dot_backward(gpu, D(dU), D(dh), D(dlg), D(U), D(hyp), N, RR, c);
    SAME(dU, 0, "mask_dot_backward dU (+=)");
    SAME(dh, t, "mask_dot_backward dhyp (+=)");
    /* dhyp's block per pair over channel counts that leave threads idle
     * (24: 10 pixel lanes of 24) or give each channel one lane (256, the
     * most a config allows: C/8) */
    for (int k = 0; k < 2; k++) {
        int n2 = 3, rr = 100, c2 = k ? 256 : 24;
        buf U2 = mk((size_t)n2 * rr * c2, dt, 1), h2 = mk((size_t)n2 * c2, dt, 1), dl2 = mk((size_t)n2 * rr, dt, 1),
            dh2 = mk((size_t)n2 * c2, dt, 1);
        tr_ten none = {NULL, dt};
        cpu->ops->mask_dot_backward(cpu, none, H(dh2), H(dl2), H(U2), H(h2), n2, rr, c2);
        gpu->ops->mask_dot_backward(gpu, none, D(dh2), D(dl2), D(U2), D(h2), n2, rr, c2);
        char what[64];
        snprintf(what, sizeof what, "mask_dot_backward dhyp alone, %d channels", c2);
        SAME(dh2, t, what);
        rel(&U2), rel(&h2), rel(&dl2), rel(&dh2);
    }

    /* the loss: a blob per pair, one invalid pair */
    uint8_t masks[4 * 256], valid[4] = {1, 1, 0, 1};
    for (int n = 0; n < N; n++)
        for (int i = 0; i < RR; i++) masks[n * RR + i] = (uint8_t)((i % 16) < 4 + 2 * n && (i / 16) > n);
    buf bm = mk_bytes(masks, sizeof masks), bv = mk_bytes(valid, sizeof valid);
    buf logits = mk((size_t)N * RR, dt, 2), iou = mk(N, dt, 0.3), dl = mk((size_t)N * RR, dt, 1), di = mk(N, dt, 1);
    double sums_h[4] = {0.5, 0.25, 0.125, 1.0};
    buf sums = mk_bytes(sums_h, sizeof sums_h);
    cpu->ops->sam_loss(cpu, H(dl), H(di), H(logits), H(iou), bm.h, bv.h, N, RR, 2.0f, 3, sums.h);
    gpu->ops->sam_loss(gpu, D(dl), D(di), D(logits), D(iou), bm.d, bv.d, N, RR, 2.0f, 3, sums.d);
    SAME(dl, t, "sam_loss dlogits");
    SAME(di, t, "sam_loss diou");
    double g[4];
    gpu->ops->download(gpu, g, sums.d, sizeof g);
    int ok = 1;
    for (int k = 0; k < 4; k++) ok &= fabs(g[k] - ((double *)sums.h)[k]) <= 1e-5 * (1 + fabs(((double *)sums.h)[k]));
    tap_ok(ok, "sam_loss sums (+=, doubles) within 1e-5 (%s): gpu %.9g %.9g %.9g %.9g, cpu %.9g %.9g %.9g %.9g",
           dt_name(dt), g[0], g[1], g[2], g[3], ((double *)sums.h)[0], ((double *)sums.h)[1], ((double *)sums.h)[2],
           ((double *)sums.h)[3]);
    rel(&U), rel(&hyp), rel(&lg), rel(&dlg), rel(&dU), rel(&dh), rel(&bm), rel(&bv), rel(&logits), rel(&iou);
    rel(&dl), rel(&di), rel(&sums);
}

/* The attention tests again on backends forced to one path each
 * (SA1B_CUDA_ATTN): the blocked path on the short calls, the fused kernel
 * on the long one. */
static void test_model(int prec, double tol, double gtol);

static void test_attention_paths(void)
{
    static const char *const paths[] = {"blocked", "fused", "flash"};
    tr_backend *dflt = gpu;
    char err[400];
    for (int i = 0; i < 3; i++) {
        setenv("SA1B_CUDA_ATTN", paths[i], 1);
        gpu = tr_backend_create("cuda", 1, err, sizeof err);
        if (!gpu) {
            tap_ok(0, "a CUDA backend with SA1B_CUDA_ATTN=%s: %s", paths[i], err);
            continue;
        }
        attn_path = paths[i];
        for (int dt = TR_PREC_FP32; dt <= TR_PREC_FP16; dt++) {
            test_attention(dt, 2, 40);
            test_attention(dt, 3, 8);
            test_attention_packed(dt);
            if (i == 2) { /* the flash path's tiles of 64: several, the last partial, a head padded to 48 */
                test_attention_t(dt, 3, 40, 130, 75);
                test_attention_t(dt, 2, 64, 64, 200);
            }
        }
        if (i == 2) { /* a whole step: the tiny model's encoder attention on the flash path */
            tap_diag("the tiny model, bf16, with SA1B_CUDA_ATTN=flash");
            test_model(TR_PREC_BF16, 3e-2, 1e-2);
        }
        tap_ok(!tr_backend_error(gpu, err, sizeof err), "SA1B_CUDA_ATTN=%s: no device error", paths[i]);
        tr_backend_free(gpu);
    }
    unsetenv("SA1B_CUDA_ATTN");
    gpu = dflt, attn_path = "auto";
}

/* ---- fp32 only: the plain GEMM and the optimizer helpers ------------------------------- */

static void test_gemm_optim(void)
{
    int M = 37, N = 29, K = 19;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            buf A = mk((size_t)M * K, TR_PREC_FP32, 1), B = mk((size_t)K * N, TR_PREC_FP32, 1);
            buf C = mk((size_t)M * N, TR_PREC_FP32, 1);
            int lda = ta ? M : K, ldb = tb ? K : N;
            cpu->ops->gemm(cpu, ta, tb, M, N, K, 1.5f, A.h, lda, B.h, ldb, 0.5f, C.h, N);
            gpu->ops->gemm(gpu, ta, tb, M, N, K, 1.5f, A.d, lda, B.d, ldb, 0.5f, C.d, N);
            char what[64];
            snprintf(what, sizeof what, "gemm trans_a %d trans_b %d", ta, tb);
            SAME(C, 1e-4, what);
            rel(&A), rel(&B), rel(&C);
        }
    size_t n = 10007;
    buf g = mk(n, TR_PREC_FP32, 1), w = mk(n, TR_PREC_FP32, 1), m = mk(n, TR_PREC_FP32, 0.1);
    buf v = mk(n, TR_PREC_FP32, 0);
    for (size_t i = 0; i < n; i++) ((float *)v.h)[i] = fabsf(((float *)m.h)[i]) * 0.01f;
    gpu->ops->upload(gpu, v.d, v.h, n * sizeof(float));
    double sc = cpu->ops->sumsq(cpu, g.h, n), sg = gpu->ops->sumsq(gpu, g.d, n);
    tap_ok(fabs(sc - sg) <= 1e-12 * sc, "sumsq: gpu %.17g cpu %.17g", sg, sc);
    cpu->ops->scale(cpu, g.h, n, 0.75f), gpu->ops->scale(gpu, g.d, n, 0.75f);
    SAME(g, 0, "scale");
    cpu->ops->adamw(cpu, w.h, m.h, v.h, g.h, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.001f);
    gpu->ops->adamw(gpu, w.d, m.d, v.d, g.d, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.1f, 0.001f);
    SAME(w, 0, "adamw w");
    SAME(m, 0, "adamw m");
    SAME(v, 0, "adamw v");
    /* 8-bit: moments as codes of the maps, two blocks and a short one */
    int block = 4096;
    size_t nb = (n + block - 1) / block;
    float qm[256], qv[256];
    tr_q8_map(qm, 1), tr_q8_map(qv, 0);
    uint8_t *codes = malloc(2 * n);
    float ab[2 * 3];
    for (size_t i = 0; i < 2 * n; i++) codes[i] = (uint8_t)tr_rng_below(&rng, 256);
    for (size_t i = n; i < 2 * n; i++) codes[i] |= 0x80; /* the upper half of v's map */
    for (size_t i = 0; i < 2 * nb; i++) ab[i] = 0.01f * (float)(i + 1);
    buf mq = mk_bytes(codes, n), vq = mk_bytes(codes + n, n), ma = mk_bytes(ab, nb * 4), va = mk_bytes(ab + nb, nb * 4);
    cpu->ops->adamw8bit(cpu, w.h, mq.h, vq.h, ma.h, va.h, qm, qv, g.h, n, block, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.2f,
                        0.002f);
    gpu->ops->adamw8bit(gpu, w.d, mq.d, vq.d, ma.d, va.d, qm, qv, g.d, n, block, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f,
                        0.2f, 0.002f);
    SAME(w, 0, "adamw8bit w");
    uint8_t *gq = malloc(2 * n);
    gpu->ops->download(gpu, gq, mq.d, n), gpu->ops->download(gpu, gq + n, vq.d, n);
    tap_ok(!memcmp(gq, mq.h, n) && !memcmp(gq + n, vq.h, n), "adamw8bit codes: the same bytes");
    ma.dt = va.dt = TR_PREC_FP32, ma.n = va.n = nb;
    SAME(ma, 0, "adamw8bit m absmax");
    SAME(va, 0, "adamw8bit v absmax");
    free(codes), free(gq);
    rel(&g), rel(&w), rel(&m), rel(&v), rel(&mq), rel(&vq), rel(&ma), rel(&va);
}

/* ---- the tiny model ----------------------------------------------------------------------- */

#define STEPS 3

/* What a run keeps: the losses, the first step's gradients (before the
 * optimizer clips them), the parameters after the last step, and the
 * parameter table to read the gradients by tensor. */
typedef struct run_out {
    double loss[STEPS];
    float *grads, *params;
    size_t n_grads, n_params, grad_lo;
    tr_param_info *pinfo;
    int n_pinfo;
} run_out;

static void run_free(run_out *r) { free(r->grads), free(r->params), free(r->pinfo); }

/* STEPS steps (forward, backward, AdamW) of the tiny model in precision prec on be; 0 or -1 */
static int model_run(tr_backend *be, int prec, run_out *r)
{
    memset(r, 0, sizeof *r);
    double *loss = r->loss;
    char err[512] = "";
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    tr_model_opts o = {.precision = prec};
    tr_model m;
    if (tr_model_init_ex(&m, be, &cfg, 2, 3, 2, &o, NULL, err, sizeof err) < 0) {
        tap_diag("%s: %s", be->name, err);
        return -1;
    }
    tr_model_init_params(&m, 9);
    tr_batch *b = tr_batch_alloc(be->host_mem, 2, 3, 2, cfg.S, 4 * (cfg.S / cfg.P));
    tr_optim_config oc;
    tr_optim_defaults(&oc, 1e-3, 10);
    tr_optim opt;
    int rc = b && tr_optim_init(&opt, &m, &oc) == 0 ? 0 : -1;
    for (int s = 0; s < STEPS && rc == 0; s++) {
        tr_loss L;
        tr_batch_synthetic(b, 40 + (uint64_t)s);
        rc = tr_model_step(&m, b, 1, 1.0f, 0, &L, err, sizeof err);
        loss[s] = L.loss;
        if (rc == 0 && s == 0) {
            r->n_grads = m.n_grad_floats, r->grad_lo = m.grad_lo, r->n_pinfo = m.n_params;
            r->grads = malloc(m.n_grad_floats * sizeof(float));
            r->pinfo = malloc((size_t)m.n_params * sizeof *r->pinfo);
            if (!r->grads || !r->pinfo) abort();
            be->ops->download(be, r->grads, m.grad_mem, m.n_grad_floats * sizeof(float));
            memcpy(r->pinfo, m.pinfo, (size_t)m.n_params * sizeof *r->pinfo);
        }
        if (rc == 0) tr_optim_step(&opt, &m, NULL);
    }
    if (rc == 0) {
        r->n_params = m.n_param_floats;
        r->params = malloc(m.n_param_floats * sizeof(float));
        if (!r->params) abort();
        be->ops->download(be, r->params, m.param_mem, m.n_param_floats * sizeof(float));
        tr_optim_free(&opt, &m);
    }
    if (tr_backend_error(be, err, sizeof err)) rc = -1;
    if (rc < 0) tap_diag("%s: %s", be->name, err);
    if (b) tr_batch_free(be->host_mem, b);
    tr_model_free(&m);
    return rc;
}

/* The error of tensor p of run a against run b: ||a - b|| / max(||b||, floor),
 * floor = 1e-3 * ||b's gradients|| / sqrt(#tensors), as gpu_dumpcmp.py and
 * sam_ref.py judge it: a tensor whose exact gradient is zero (a key bias:
 * softmax ignores a logit added to every key of a query) is judged against
 * the scale of the model's gradients, not by noise over noise. */
static double tensor_err(const run_out *a, const run_out *b, const tr_param_info *pi, double floor)
{
    double e2 = 0, q2 = 0;
    for (size_t i = pi->offset - b->grad_lo; i < pi->offset - b->grad_lo + pi->count; i++) {
        double x = a->grads[i], y = b->grads[i];
        e2 += (x - y) * (x - y), q2 += y * y;
    }
    return rel_l2(e2, q2 > floor * floor ? q2 : floor * floor);
}

static double grad_floor(const run_out *b)
{
    double r2 = 0;
    int n = 0;
    for (size_t i = 0; i < b->n_grads; i++) r2 += (double)b->grads[i] * b->grads[i];
    for (int p = 0; p < b->n_pinfo; p++) n += b->pinfo[p].offset >= b->grad_lo;
    return 1e-3 * sqrt(r2) / sqrt(n > 0 ? n : 1);
}

/* The GPU's first-step gradients (g) against the CPU's (c) in the same
 * precision: all together within gtol relative L2.  Each tensor: in fp32
 * (ref NULL) within 100 gtol of the CPU's; in 16 bits, its distance from
 * the CPU's fp32 run (ref) at most 3 times the CPU's own 16-bit distance
 * from it, gpu_dumpcmp.py --ref's rule (two correct 16-bit backends that
 * sum in other orders differ by their rounding, so the GPU is held to the
 * CPU's error, not to the CPU's rounding), or R16_MIN where that is less:
 * the tiny model's hypernetwork has 6 rows, so a bias gradient's 16-bit
 * error is a sum of a few roundings and two such errors differ widely
 * (dec.hyper.1.b: 3.1% on an H200, 2026-11-28, 8.1 times the CPU's 0.38%,
 * where the small model's 183 tensors stayed within 2.1 times).  A bound
 * of 10 times the CPU's own let a 50% error pass where the CPU's was 5%;
 * 5% is held to 15% here. */
#define R16_MIN 0.05
static void compare_grads(const run_out *c, const run_out *g, const run_out *ref, int prec, double gtol)
{
    if (!c->grads || !g->grads || c->n_grads != g->n_grads || (ref && (!ref->grads || ref->n_grads != c->n_grads))) {
        tap_ok(0, "tiny model (%s): first-step gradients of both backends (%zu and %zu floats)", dt_name(prec),
               c->n_grads, g->n_grads);
        tap_ok(0, "tiny model (%s): every gradient tensor", dt_name(prec));
        return;
    }
    double d2 = 0, r2 = 0, worst = 0, wlim = 0;
    const char *wname = "-";
    for (size_t i = 0; i < c->n_grads; i++) {
        double x = g->grads[i], y = c->grads[i];
        d2 += (x - y) * (x - y), r2 += y * y;
    }
    const run_out *base = ref ? ref : c;
    double floor = grad_floor(base);
    for (int p = 0; p < c->n_pinfo; p++) {
        const tr_param_info *pi = &c->pinfo[p];
        if (pi->offset < c->grad_lo) continue; /* frozen: no gradient */
        double e = tensor_err(g, base, pi, floor), lim = 100 * gtol;
        if (ref) {
            double own = tensor_err(c, ref, pi, floor);
            lim = 3 * own > R16_MIN ? 3 * own : R16_MIN;
        }
        if (!(e / lim <= worst)) worst = e / lim, wname = pi->name, wlim = lim;
    }
    double all = rel_l2(d2, r2);
    tap_ok(all <= gtol, "tiny model (%s): first-step gradients, %zu floats, relative L2 %.3g within %g", dt_name(prec),
           c->n_grads, all, gtol);
    if (ref)
        tap_ok(worst <= 1, "tiny model (%s): every gradient tensor's distance from the CPU's fp32 within 3 times "
               "the CPU's own or %g, the worst %s at %.3g of its bound %.3g", dt_name(prec), R16_MIN, wname, worst,
               wlim);
    else
        tap_ok(worst <= 1, "tiny model (%s): every gradient tensor within %g, the worst %s at %.3g", dt_name(prec),
               100 * gtol, wname, worst * wlim);
}

static void test_model(int prec, double tol, double gtol)
{
    run_out c = {0}, g = {0}, g2 = {0}, r = {0};
    int ok = model_run(cpu, prec, &c) == 0 && model_run(gpu, prec, &g) == 0;
    int want_ref = prec != TR_PREC_FP32;
    if (want_ref && ok && model_run(cpu, TR_PREC_FP32, &r) < 0) tap_diag("the CPU's fp32 reference run failed");
    int close = ok;
    for (int s = 0; s < STEPS && ok; s++) {
        close &= fabs(g.loss[s] - c.loss[s]) <= tol * fabs(c.loss[s]);
        tap_diag("%s step %d: loss gpu %.7f cpu %.7f", dt_name(prec), s, g.loss[s], c.loss[s]);
    }
    tap_ok(close, "tiny model, %d steps (%s): GPU losses within %g of the CPU's", STEPS, dt_name(prec), tol);
    compare_grads(&c, &g, want_ref ? &r : NULL, prec, gtol);
    int again = ok && model_run(gpu, prec, &g2) == 0;
    tap_ok(again && !memcmp(g.loss, g2.loss, sizeof g.loss) && g.n_params == g2.n_params &&
               !memcmp(g.params, g2.params, g.n_params * sizeof(float)),
           "tiny model (%s): two GPU runs give the same losses and parameters, bit for bit", dt_name(prec));
    run_free(&c), run_free(&g), run_free(&g2), run_free(&r);
}

int main(void)
{
    char err[400];
    gpu = tr_backend_create("cuda", 1, err, sizeof err);
    if (!gpu) tap_skip_all(err);
    cpu = tr_backend_create("cpu", 2, err, sizeof err);
    if (!cpu) {
        tap_ok(0, "CPU backend: %s", err);
        return tap_done();
    }
    tr_rng_seed(&rng, 16);
    for (int dt = TR_PREC_FP32; dt <= TR_PREC_FP16; dt++) {
        test_elementwise(dt);
        test_linear_ln(dt);
        test_attention(dt, 2, 40);
        test_attention(dt, 3, 8);
        test_attention_packed(dt);
        test_convt(dt);
        test_inputs(dt);
        test_mask_loss(dt);
    }
    test_gemm_optim();
    test_attention_paths();
    tap_ok(!tr_backend_error(gpu, err, sizeof err), "no device error on the way");
    test_model(TR_PREC_FP32, 1e-3, 1e-5);
    test_model(TR_PREC_BF16, 3e-2, 1e-2);
    tr_backend_free(cpu);
    tr_backend_free(gpu);
    return tap_done();
}
