/*
 * test-train-typed.c - typed operands (backend.h, tr_ten) on the CPU
 * backend: an op given 16-bit operands (bf16, fp16) computes what the fp32
 * op computes on their values and rounds each output to nearest even, bit
 * for bit; overlapping operands (q, k, v and their gradients inside one qkv
 * tensor) each keep their own elements; element-wise ops and LayerNorm,
 * which widen tile by tile, give the same values; convert moves values
 * between the types;
 * and the meta backend takes the same workspaces as the CPU (the planner's
 * exactness for 16-bit operands).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/backend_widen.h"
#include "common/kernels.h"
#include "tap.h"
#include "common/tr_rng.h"
#include "backend/meta/backend_meta.h"
#include "registry/registry.h"

static tr_backend *be;
static tr_rng rng;

/* n random values already representable in prec (16-bit inputs) */
static float *vals(size_t n, int prec)
{
    float *x = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = tr_round_prec((float)tr_rng_normal(&rng), prec);
    return x;
}

static uint16_t *to16(const float *x, size_t n, int prec)
{
    uint16_t *h = malloc(n * sizeof(uint16_t) + 2);
    for (size_t i = 0; i < n; i++) h[i] = tr_to_16(x[i], prec);
    return h;
}

/* 1 when h holds x rounded to prec, every element */
static int same16(const uint16_t *h, const float *x, size_t n, int prec)
{
    for (size_t i = 0; i < n; i++)
        if (h[i] != tr_to_16(x[i], prec)) return 0;
    return 1;
}

static void test_linear(int prec, const char *name)
{
    int N = 37, I = 24, O = 20;
    float *x = vals((size_t)N * I, prec), *w = vals((size_t)O * I, prec), *b = vals((size_t)O, prec);
    float *y = malloc(sizeof(float) * N * O), *dy = vals((size_t)N * O, prec), *dx = vals((size_t)N * I, prec);
    uint16_t *x16 = to16(x, (size_t)N * I, prec), *w16 = to16(w, (size_t)O * I, prec), *b16 = to16(b, O, prec);
    uint16_t *y16 = calloc((size_t)N * O, 2), *dy16 = to16(dy, (size_t)N * O, prec), *dx16 = to16(dx, (size_t)N * I, prec);
    float *dw = calloc((size_t)O * I, sizeof(float)), *db = calloc(O, sizeof(float));
    float *dw16 = calloc((size_t)O * I, sizeof(float)), *db16 = calloc(O, sizeof(float));
    const tr_ops *o = be->ops;
    o->linear_forward(be, tr_f32(y), tr_f32(x), tr_f32(w), tr_f32(b), N, I, O);
    o->linear_forward(be, tr_typed(y16, prec), tr_typed(x16, prec), tr_typed(w16, prec), tr_typed(b16, prec), N, I, O);
    tap_ok(same16(y16, y, (size_t)N * O, prec), "%s linear forward: the fp32 result rounded", name);
    o->linear_backward(be, tr_f32(dx), dw, db, tr_f32(dy), tr_f32(x), tr_f32(w), N, I, O);
    o->linear_backward(be, tr_typed(dx16, prec), dw16, db16, tr_typed(dy16, prec), tr_typed(x16, prec),
                       tr_typed(w16, prec), N, I, O);
    tap_ok(same16(dx16, dx, (size_t)N * I, prec) && !memcmp(dw, dw16, sizeof(float) * O * I) &&
               !memcmp(db, db16, sizeof(float) * O),
           "%s linear backward: dx accumulated and rounded, fp32 dw and db the same bits", name);
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(x16), free(w16), free(b16), free(y16), free(dy16);
    free(dx16), free(dw), free(db), free(dw16), free(db16);
}

/* Self-attention over a packed qkv [N, T, 3E] (q, k, v interleaved by
 * column blocks): the backward's dq, dk, dv overlap in one 16-bit tensor. */
static void test_attention(int prec, const char *name)
{
    int N = 2, T = 9, H = 2, E = 8;
    size_t nq = (size_t)N * T * 3 * E, no = (size_t)N * T * E, na = (size_t)N * H * T * T;
    tr_attn_dims d = {.N = N, .Tq = T, .Tk = T, .heads = H, .dh = E / H, .ldq = 3 * E, .ldk = 3 * E, .ldv = 3 * E,
                      .ldo = E, .sq = (size_t)T * 3 * E, .sk = (size_t)T * 3 * E, .sv = (size_t)T * 3 * E,
                      .so = (size_t)T * E};
    float *qkv = vals(nq, prec), *out = malloc(no * 4), *att = malloc(na * 4), *dout = vals(no, prec);
    float *dqkv = vals(nq, prec);
    uint16_t *qkv16 = to16(qkv, nq, prec), *out16 = calloc(no, 2), *att16 = calloc(na, 2);
    uint16_t *dout16 = to16(dout, no, prec), *dqkv16 = to16(dqkv, nq, prec);
    const tr_ops *o = be->ops;
    /* the reference: the fp32 kernel, the probabilities it stores rounded to prec */
    be->fp32->attention_forward(be, out, att, qkv, qkv + E, qkv + 2 * E, &d, prec);
    o->attention_forward(be, tr_typed(out16, prec), tr_typed(att16, prec), tr_typed(qkv16, prec),
                         tr_typed(qkv16 + E, prec), tr_typed(qkv16 + 2 * E, prec), &d);
    int ok_att = 1;
    for (size_t i = 0; i < na; i++) ok_att &= tr_round_prec(att[i], prec) == att[i];
    tap_ok(ok_att && same16(att16, att, na, prec) && same16(out16, out, no, prec),
           "%s attention forward: probabilities stored in %s, out from them, rounded", name, name);
    o->attention_backward(be, tr_f32(dqkv), tr_f32(dqkv + E), tr_f32(dqkv + 2 * E), tr_f32(dout), tr_f32(out),
                          tr_f32(qkv), tr_f32(qkv + E), tr_f32(qkv + 2 * E), tr_f32(att), &d);
    o->attention_backward(be, tr_typed(dqkv16, prec), tr_typed(dqkv16 + E, prec), tr_typed(dqkv16 + 2 * E, prec),
                          tr_typed(dout16, prec), tr_typed(out16, prec), tr_typed(qkv16, prec),
                          tr_typed(qkv16 + E, prec), tr_typed(qkv16 + 2 * E, prec), tr_typed(att16, prec), &d);
    tap_ok(same16(dqkv16, dqkv, nq, prec), "%s attention backward: dq, dk, dv inside one qkv, each rounded", name);
    free(qkv), free(out), free(att), free(dout), free(dqkv), free(qkv16), free(out16), free(att16), free(dout16);
    free(dqkv16);
}

static void test_wide_and_convert(int prec, const char *name)
{
    size_t n = 1000;
    float *a = vals(n, TR_PREC_FP32), *b = vals(n, TR_PREC_FP32), *s = malloc(n * 4);
    const tr_ops *o = be->ops;
    o->add(be, tr_f32(s), tr_f32(a), tr_f32(b), n);
    uint16_t *h = calloc(n, 2), *h2 = calloc(n, 2);
    o->add(be, tr_typed(h2, prec), tr_f32(a), tr_f32(b), n);
    tap_ok(same16(h2, s, n, prec), "%s: fp32 operands, a 16-bit output: the sum rounded", name);
    float *back = malloc(n * 4);
    o->convert(be, tr_typed(h, prec), tr_f32(s), n);
    o->convert(be, tr_f32(back), tr_typed(h, prec), n);
    int ok = same16(h, s, n, prec);
    for (size_t i = 0; i < n; i++) ok &= back[i] == tr_from_16(h[i], prec);
    tap_ok(ok, "%s convert: fp32 -> 16 bits rounded to nearest even, back exact", name);
    o->zero(be, tr_typed(h, prec), n);
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= h[i] == 0;
    tap_ok(ok, "%s zero: every element", name);
    free(a), free(b), free(s), free(h), free(h2), free(back);
}

/* Element-wise ops (tiles widened on the stack): GELU backward (+=) and a
 * broadcast add over rows, against the fp32 kernels on the same values. */
static void test_elementwise(int prec, const char *name)
{
    size_t N = 7, n = 300, t = N * n; /* rows that cross the tiles */
    float *d = vals(t, prec), *g = vals(t, prec), *x = vals(t, prec), *row = vals(n, prec), *y = malloc(t * 4);
    uint16_t *d16 = to16(d, t, prec), *g16 = to16(g, t, prec), *x16 = to16(x, t, prec), *r16 = to16(row, n, prec);
    uint16_t *y16 = calloc(t, 2);
    be->ops->gelu_backward(be, tr_f32(d), tr_f32(g), tr_f32(x), t); /* (all fp32: the fp32 loop) */
    be->ops->gelu_backward(be, tr_typed(d16, prec), tr_typed(g16, prec), tr_typed(x16, prec), t);
    be->ops->add_bcast(be, tr_f32(y), tr_f32(x), tr_f32(row), N, n);
    be->ops->add_bcast(be, tr_typed(y16, prec), tr_typed(x16, prec), tr_typed(r16, prec), N, n);
    tap_ok(same16(d16, d, t, prec) && same16(y16, y, t, prec),
           "%s element-wise: gelu backward and a broadcast add, the fp32 results rounded", name);
    free(d), free(g), free(x), free(row), free(y), free(d16), free(g16), free(x16), free(r16), free(y16);
}

/* LayerNorm (rows widened on the stack): forward, statistics and backward
 * (dx accumulated, dw and db in fp32) against the fp32 op on the same values. */
static void test_layernorm(int prec, const char *name)
{
    int N = 9, C = 40;
    size_t t = (size_t)N * C;
    float *x = vals(t, prec), *w = vals(C, prec), *b = vals(C, prec), *dy = vals(t, prec), *dx = vals(t, prec);
    float *y = malloc(t * 4), *mu = malloc(N * 4), *rs = malloc(N * 4), *mu2 = malloc(N * 4), *rs2 = malloc(N * 4);
    float *dw = calloc(C, 4), *db = calloc(C, 4), *dw2 = calloc(C, 4), *db2 = calloc(C, 4);
    uint16_t *x16 = to16(x, t, prec), *w16 = to16(w, C, prec), *b16 = to16(b, C, prec), *y16 = calloc(t, 2);
    uint16_t *dy16 = to16(dy, t, prec), *dx16 = to16(dx, t, prec);
    const tr_ops *o = be->ops;
    o->layernorm_forward(be, tr_f32(y), mu, rs, tr_f32(x), tr_f32(w), tr_f32(b), N, C, 1e-5f);
    o->layernorm_forward(be, tr_typed(y16, prec), mu2, rs2, tr_typed(x16, prec), tr_typed(w16, prec),
                         tr_typed(b16, prec), N, C, 1e-5f);
    int ok = same16(y16, y, t, prec) && !memcmp(mu, mu2, N * 4) && !memcmp(rs, rs2, N * 4);
    o->layernorm_stats(be, mu2, rs2, tr_typed(x16, prec), N, C, 1e-5f);
    ok &= !memcmp(mu, mu2, N * 4) && !memcmp(rs, rs2, N * 4);
    tap_ok(ok, "%s LayerNorm forward and statistics: the fp32 results, rounded", name);
    o->layernorm_backward(be, tr_f32(dx), dw, db, tr_f32(dy), tr_f32(x), tr_f32(w), mu, rs, N, C);
    o->layernorm_backward(be, tr_typed(dx16, prec), dw2, db2, tr_typed(dy16, prec), tr_typed(x16, prec),
                          tr_typed(w16, prec), mu, rs, N, C);
    tap_ok(same16(dx16, dx, t, prec) && !memcmp(dw, dw2, C * 4) && !memcmp(db, db2, C * 4),
           "%s LayerNorm backward: dx accumulated and rounded, dw and db the same bits", name);
    free(x), free(w), free(b), free(dy), free(dx), free(y), free(mu), free(rs), free(mu2), free(rs2), free(dw);
    free(db), free(dw2), free(db2), free(x16), free(w16), free(b16), free(y16), free(dy16), free(dx16);
}

/* The meta backend takes the CPU's workspace for the same 16-bit op. */
static void test_meta_workspace(int prec, const char *name)
{
    tr_backend *mb = tr_backend_meta_create(NULL, NULL);
    int N = 64, I = 32, O = 48;
    uint64_t peak[2];
    tr_backend *bs[2] = {be, mb};
    for (int k = 0; k < 2; k++) {
        tr_backend *b = bs[k];
        void *x = tr_mem_alloc(&b->mem, TR_MEM_ACTS, (size_t)N * I * 2), *y = tr_mem_alloc(&b->mem, TR_MEM_ACTS, (size_t)N * O * 2);
        void *w = tr_mem_alloc(&b->mem, TR_MEM_PARAMS, (size_t)O * I * 2);
        tr_mem_reset_peak(&b->mem);
        uint64_t base = b->mem.total;
        b->ops->linear_forward(b, tr_typed(y, prec), tr_typed(x, prec), tr_typed(w, prec), tr_typed(NULL, prec), N, I, O);
        peak[k] = b->mem.total_peak - base;
        tr_mem_free(&b->mem, x), tr_mem_free(&b->mem, y), tr_mem_free(&b->mem, w);
    }
    tap_ok(peak[0] == peak[1] && peak[0] > 0, "%s: the meta backend takes the CPU's workspace (%llu and %llu bytes)",
           name, (unsigned long long)peak[0], (unsigned long long)peak[1]);
    tr_backend_free(mb);
}

int main(void)
{
    char err[256];
    be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!be) {
        tap_skip_all(err);
        return 0;
    }
    tr_rng_seed(&rng, 11);
    const int precs[2] = {TR_PREC_BF16, TR_PREC_FP16};
    const char *names[2] = {"bf16", "fp16"};
    for (int i = 0; i < 2; i++) {
        test_linear(precs[i], names[i]);
        test_attention(precs[i], names[i]);
        test_wide_and_convert(precs[i], names[i]);
        test_elementwise(precs[i], names[i]);
        test_layernorm(precs[i], names[i]);
        test_meta_workspace(precs[i], names[i]);
    }
    tr_backend_free(be);
    return tap_done();
}
