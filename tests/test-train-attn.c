/*
 * test-train-attn.c - the attention op's contract (backend.h) on the CPU
 * backend, in fp32 and through its 16-bit operands (bf16, fp16), on the
 * decoder's layout (q, k, v apart, Tq != Tk) and the encoder's (q, k, v
 * packed in rows of 3 heads dh, their gradients likewise):
 *  - attention_backward WRITES dq, dk and dv: buffers poisoned with NaN come
 *    out as buffers of zeros do, bit for bit; a gradient not asked for
 *    (NULL) is not written, nor are the other columns of a packed tensor;
 *  - it receives the forward's output, which the CPU (keeping its
 *    probabilities) does not read: a NaN out changes nothing;
 *  - out and the gradients against a double-precision reference
 *    (softmax by definition, the gradients through P);
 *  - the GPU paths' statistics and their backward, emulated here in fp32
 *    as their kernels compute them (backend_cuda_attn.cu, _flash.cu): the
 *    log-sum-exp of each row by the online softmax (m + log l), P =
 *    exp(s - lse), D = rowsum(dout * out) from the CPU's own output, dS =
 *    scale P (dP - D); the reference's lse gives the CPU's probabilities,
 *    and D = rowsum(dout * out) equals rowsum(P dP) (the identity flash
 *    attention's backward rests on).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "common/kernels.h"
#include "common/tr_rng.h"
#include "registry/registry.h"
#include "tap.h"

static tr_backend *be;
static tr_rng rng;

/* A typed tensor of n elements (host memory: the CPU backend's). */
typedef struct tbuf {
    void *p;
    size_t n;
    int dt;
} tbuf;

static tbuf tb_new(size_t n, int dt)
{
    tbuf b = {calloc(n + 8, 4), n, dt};
    if (!b.p) abort();
    return b;
}

static double tb_get(tbuf b, size_t i)
{
    return b.dt == TR_PREC_FP32 ? ((const float *)b.p)[i] : tr_from_16(((const uint16_t *)b.p)[i], b.dt);
}

static void tb_set(tbuf b, size_t i, float x)
{
    if (b.dt == TR_PREC_FP32) ((float *)b.p)[i] = x;
    else ((uint16_t *)b.p)[i] = tr_to_16(x, b.dt);
}

static void tb_fill(tbuf b, float x)
{
    for (size_t i = 0; i < b.n; i++) tb_set(b, i, x);
}

static void tb_rand(tbuf b, double sd)
{
    for (size_t i = 0; i < b.n; i++) tb_set(b, i, (float)(sd * tr_rng_normal(&rng)));
}

static tr_ten tt(tbuf b, size_t off) { return tr_typed((char *)b.p + off * tr_prec_size(b.dt), b.dt); }

static int tb_same(tbuf a, tbuf b) { return !memcmp(a.p, b.p, a.n * tr_prec_size(a.dt)); }

/* One call: its dims, and where q, k, v (and dq, dk, dv) start in their
 * tensors: one tensor [N, T, 3c] when packed, else three. */
typedef struct acase {
    const char *name;
    tr_attn_dims d;
    int packed;
} acase;

/* The operands of a case in one type: QKV tensors (t[0..2], or t[0] alone
 * packed) and the element offset of each of q, k, v in them. */
typedef struct ops3 {
    tbuf t[3];
    size_t off[3];
    int packed;
} ops3;

static ops3 ops3_new(const acase *c, int dt)
{
    const tr_attn_dims *d = &c->d;
    ops3 o = {.packed = c->packed};
    size_t nq = (size_t)d->N * d->sq, nk = (size_t)d->N * d->sk;
    if (c->packed) {
        o.t[0] = o.t[1] = o.t[2] = tb_new(nq, dt);
        for (int i = 0; i < 3; i++) o.off[i] = (size_t)i * d->heads * d->dh;
    } else {
        o.t[0] = tb_new(nq, dt), o.t[1] = tb_new(nk, dt), o.t[2] = tb_new((size_t)d->N * d->sv, dt);
    }
    return o;
}

static void ops3_free(ops3 *o)
{
    free(o->t[0].p);
    if (!o->packed) free(o->t[1].p), free(o->t[2].p);
}

static void ops3_fill(ops3 *o, float x)
{
    for (int i = 0; i < (o->packed ? 1 : 3); i++) tb_fill(o->t[i], x);
}

static int ops3_same(const ops3 *a, const ops3 *b)
{
    int ok = 1;
    for (int i = 0; i < (a->packed ? 1 : 3); i++) ok &= tb_same(a->t[i], b->t[i]);
    return ok;
}

static tr_ten op(const ops3 *o, int i) { return tt(o->t[i], o->off[i]); }

/* element (n, t, head j, column e) of operand i (0 q, 1 k, 2 v) */
static size_t at(const tr_attn_dims *d, int i, size_t n, size_t t, size_t j, size_t e)
{
    size_t s = i == 0 ? d->sq : i == 1 ? d->sk : d->sv;
    int ld = i == 0 ? d->ldq : i == 1 ? d->ldk : d->ldv;
    return n * s + t * (size_t)ld + j * (size_t)d->dh + e;
}

static double val(const ops3 *o, const tr_attn_dims *d, int i, size_t n, size_t t, size_t j, size_t e)
{
    return tb_get(o->t[i], o->off[i] + at(d, i, n, t, j, e));
}

static size_t oat(const tr_attn_dims *d, size_t n, size_t t, size_t j, size_t e)
{
    return n * d->so + t * (size_t)d->ldo + j * (size_t)d->dh + e;
}

/* The reference of one case in double from the operands' values: out,
 * the rows' lse [N, heads, Tq], the probabilities [N, heads, Tq, Tk], and
 * the gradients (through P: dS = P (dP - rowsum(P dP))), each [N, T, heads
 * dh] dense; D2 the rows' rowsum(dout * out) and D1 their rowsum(P dP). */
typedef struct aref {
    double *out, *lse, *P, *dq, *dk, *dv, *D1, *D2;
} aref;

static aref reference(const acase *c, const ops3 *x, tbuf dout)
{
    const tr_attn_dims *d = &c->d;
    size_t N = (size_t)d->N, H = (size_t)d->heads, Tq = (size_t)d->Tq, Tk = (size_t)d->Tk, dh = (size_t)d->dh;
    size_t W = H * dh;
    double sc = 1.0 / sqrt((double)dh);
    aref r = {calloc(N * Tq * W, 8), calloc(N * H * Tq, 8), calloc(N * H * Tq * Tk, 8), calloc(N * Tq * W, 8),
              calloc(N * Tk * W, 8), calloc(N * Tk * W, 8), calloc(N * H * Tq, 8), calloc(N * H * Tq, 8)};
    double *s = malloc(Tk * 8), *dP = malloc(Tk * 8);
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < H; j++)
            for (size_t t = 0; t < Tq; t++) {
                size_t row = (n * H + j) * Tq + t;
                double m = -INFINITY, l = 0, Dp = 0, Do = 0;
                for (size_t u = 0; u < Tk; u++) {
                    s[u] = 0;
                    for (size_t e = 0; e < dh; e++) s[u] += val(x, d, 0, n, t, j, e) * val(x, d, 1, n, u, j, e);
                    s[u] *= sc;
                    m = s[u] > m ? s[u] : m;
                }
                for (size_t u = 0; u < Tk; u++) l += exp(s[u] - m);
                r.lse[row] = m + log(l);
                double *P = r.P + row * Tk;
                for (size_t u = 0; u < Tk; u++) P[u] = exp(s[u] - r.lse[row]);
                for (size_t e = 0; e < dh; e++) {
                    double o = 0;
                    for (size_t u = 0; u < Tk; u++) o += P[u] * val(x, d, 2, n, u, j, e);
                    r.out[(n * Tq + t) * W + j * dh + e] = o;
                    Do += tb_get(dout, oat(d, n, t, j, e)) * o;
                }
                for (size_t u = 0; u < Tk; u++) {
                    dP[u] = 0;
                    for (size_t e = 0; e < dh; e++) dP[u] += tb_get(dout, oat(d, n, t, j, e)) * val(x, d, 2, n, u, j, e);
                    Dp += P[u] * dP[u];
                }
                r.D1[row] = Dp, r.D2[row] = Do;
                for (size_t u = 0; u < Tk; u++) {
                    double dS = sc * P[u] * (dP[u] - Dp);
                    for (size_t e = 0; e < dh; e++) {
                        r.dq[(n * Tq + t) * W + j * dh + e] += dS * val(x, d, 1, n, u, j, e);
                        r.dk[(n * Tk + u) * W + j * dh + e] += dS * val(x, d, 0, n, t, j, e);
                        r.dv[(n * Tk + u) * W + j * dh + e] += P[u] * tb_get(dout, oat(d, n, t, j, e));
                    }
                }
            }
    free(s), free(dP);
    return r;
}

static void aref_free(aref *r)
{
    free(r->out), free(r->lse), free(r->P), free(r->dq), free(r->dk), free(r->dv), free(r->D1), free(r->D2);
}

/* ||x - ref|| / ||ref|| of operand i of g (rows T) against ref [N, T, W] */
static double err_op(const ops3 *g, const tr_attn_dims *d, int i, const double *ref)
{
    size_t T = (size_t)(i == 0 ? d->Tq : d->Tk), W = (size_t)d->heads * d->dh;
    double e2 = 0, r2 = 0;
    for (size_t n = 0; n < (size_t)d->N; n++)
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < W; c++) {
                double r = ref[(n * T + t) * W + c], x = val(g, d, i, n, t, c / d->dh, c % d->dh);
                e2 += (x - r) * (x - r), r2 += r * r;
            }
    return r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
}

static double err_vec(const double *x, const double *ref, size_t n)
{
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) e2 += (x[i] - ref[i]) * (x[i] - ref[i]), r2 += ref[i] * ref[i];
    return r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
}

/* The GPU paths' backward, emulated in fp32 as their kernels compute it
 * (the fused kernel's order): lse by the online softmax, P = exp(s - lse),
 * D = rowsum(dout * out) from out (the forward's output as stored), dS =
 * scale P (dP - D); the gradients [N, T, W] as doubles, the lse too. */
static void gpu_emulation(const acase *c, const ops3 *x, tbuf dout, tbuf out, double *lse, double *dq, double *dk,
                          double *dv)
{
    const tr_attn_dims *d = &c->d;
    size_t N = (size_t)d->N, H = (size_t)d->heads, Tq = (size_t)d->Tq, Tk = (size_t)d->Tk, dh = (size_t)d->dh;
    size_t W = H * dh;
    float sc = 1.0f / sqrtf((float)dh);
    memset(dq, 0, N * Tq * W * 8), memset(dk, 0, N * Tk * W * 8), memset(dv, 0, N * Tk * W * 8);
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < H; j++)
            for (size_t t = 0; t < Tq; t++) {
                float m = -INFINITY, l = 0.0f, D = 0.0f;
                for (size_t u = 0; u < Tk; u++) { /* k_attn_fwd's running maximum and sum */
                    float s = 0.0f;
                    for (size_t e = 0; e < dh; e++) s += (float)val(x, d, 0, n, t, j, e) * (float)val(x, d, 1, n, u, j, e);
                    s *= sc;
                    float mn = fmaxf(m, s);
                    l = l * expf(m - mn) + expf(s - mn);
                    m = mn;
                }
                float L = m + logf(l);
                lse[(n * H + j) * Tq + t] = L;
                for (size_t e = 0; e < dh; e++) D += (float)tb_get(dout, oat(d, n, t, j, e)) * (float)tb_get(out, oat(d, n, t, j, e));
                for (size_t u = 0; u < Tk; u++) {
                    float s = 0.0f, dp = 0.0f;
                    for (size_t e = 0; e < dh; e++) {
                        s += (float)val(x, d, 0, n, t, j, e) * (float)val(x, d, 1, n, u, j, e);
                        dp += (float)tb_get(dout, oat(d, n, t, j, e)) * (float)val(x, d, 2, n, u, j, e);
                    }
                    float p = expf(s * sc - L), ds = sc * p * (dp - D);
                    for (size_t e = 0; e < dh; e++) {
                        dq[(n * Tq + t) * W + j * dh + e] += ds * (float)val(x, d, 1, n, u, j, e);
                        dk[(n * Tk + u) * W + j * dh + e] += ds * (float)val(x, d, 0, n, t, j, e);
                        dv[(n * Tk + u) * W + j * dh + e] += p * (float)tb_get(dout, oat(d, n, t, j, e));
                    }
                }
            }
}

static void backward(const acase *c, ops3 *g, tbuf dout, tbuf out, const ops3 *x, tbuf att, int which)
{
    be->ops->attention_backward(be, which & 1 ? op(g, 0) : tr_typed(NULL, g->t[0].dt),
                                which & 2 ? op(g, 1) : tr_typed(NULL, g->t[1].dt),
                                which & 4 ? op(g, 2) : tr_typed(NULL, g->t[2].dt), tt(dout, 0), tt(out, 0), op(x, 0),
                                op(x, 1), op(x, 2), tt(att, 0), &c->d);
}

static void test_case(const acase *c, int dt)
{
    const tr_attn_dims *d = &c->d;
    const char *tn = tr_prec_name(dt);
    size_t N = (size_t)d->N, H = (size_t)d->heads, Tq = (size_t)d->Tq, Tk = (size_t)d->Tk, W = H * d->dh;
    int is16 = dt != TR_PREC_FP32;
    ops3 x = ops3_new(c, dt), g0 = ops3_new(c, dt), g1 = ops3_new(c, dt), g2 = ops3_new(c, dt);
    for (int i = 0; i < (c->packed ? 1 : 3); i++) tb_rand(x.t[i], 1.0);
    tbuf out = tb_new(N * d->so, dt), dout = tb_new(N * d->so, dt), nan_out = tb_new(N * d->so, dt);
    tbuf att = tb_new(N * H * be->sizes->attention_saved(Tq, Tk), dt);
    tb_rand(dout, 1.0), tb_fill(nan_out, NAN);
    be->ops->attention_forward(be, tt(out, 0), tt(att, 0), op(&x, 0), op(&x, 1), op(&x, 2), d);

    /* written, not accumulated; out not read */
    backward(c, &g0, dout, out, &x, att, 7);
    ops3_fill(&g1, NAN);
    backward(c, &g1, dout, out, &x, att, 7);
    tap_ok(ops3_same(&g0, &g1), "%s %s: dq, dk, dv poisoned with NaN come out as from zeros, bit for bit", c->name, tn);
    ops3_fill(&g1, 3.0f);
    backward(c, &g1, dout, out, &x, att, 7);
    backward(c, &g1, dout, out, &x, att, 7);
    tap_ok(ops3_same(&g0, &g1), "%s %s: two backwards into the same buffers give one backward's gradients", c->name,
           tn);
    ops3_fill(&g1, NAN);
    backward(c, &g1, dout, nan_out, &x, att, 7);
    tap_ok(ops3_same(&g0, &g1), "%s %s: the CPU does not read the forward's output it is given", c->name, tn);
    /* one gradient at a time: the others' elements stay */
    int kept = 1;
    for (int i = 0; i < 3; i++) {
        ops3_fill(&g2, 7.0f);
        backward(c, &g2, dout, out, &x, att, 1 << i);
        for (int o = 0; o < 3; o++) {
            size_t T = o == 0 ? Tq : Tk;
            for (size_t n = 0; n < N; n++)
                for (size_t t = 0; t < T; t++)
                    for (size_t e = 0; e < W; e++) {
                        double got = val(&g2, d, o, n, t, e / d->dh, e % d->dh);
                        double want = o == i ? val(&g0, d, o, n, t, e / d->dh, e % d->dh) : 7.0;
                        kept &= got == want;
                    }
        }
    }
    tap_ok(kept, "%s %s: dq, dk or dv alone: written as with the others, the others' elements left as they were",
           c->name, tn);

    /* against the double reference */
    aref r = reference(c, &x, dout);
    double eo = 0, e2 = 0, r2 = 0;
    for (size_t n = 0; n < N; n++)
        for (size_t t = 0; t < Tq; t++)
            for (size_t e = 0; e < W; e++) {
                double ref = r.out[(n * Tq + t) * W + e], v = tb_get(out, oat(d, n, t, e / d->dh, e % d->dh));
                e2 += (v - ref) * (v - ref), r2 += ref * ref;
            }
    eo = sqrt(e2 / r2);
    /* (observed: fp32 1e-7; fp16 3e-4, bf16 3e-3: one rounding of each operand and output) */
    double tol_o = dt == TR_PREC_BF16 ? 1e-2 : dt == TR_PREC_FP16 ? 2e-3 : 1e-6, tol_g = is16 ? tol_o : 2e-6;
    double eq = err_op(&g0, d, 0, r.dq), ek = err_op(&g0, d, 1, r.dk), ev = err_op(&g0, d, 2, r.dv);
    tap_ok(eo <= tol_o, "%s %s: out against the double reference (relative L2 %.2g <= %.2g)", c->name, tn, eo, tol_o);
    tap_ok(eq <= tol_g && ek <= tol_g && ev <= tol_g,
           "%s %s: dq, dk, dv against the double reference (relative L2 %.2g, %.2g, %.2g <= %.2g)", c->name, tn, eq,
           ek, ev, tol_g);
    if (!is16) { /* the statistics: the CPU's probabilities are exp(s - lse) of the reference's lse */
        double pmax = 0;
        for (size_t i = 0; i < N * H * Tq * Tk; i++) {
            double e = fabs(tb_get(att, i) - r.P[i]);
            pmax = e > pmax ? e : pmax;
        }
        tap_ok(pmax <= 1e-6, "%s: the CPU's probabilities are exp(scale q.k - lse), lse = m + log sum exp(s - m) "
                             "(max error %.2g)", c->name, pmax);
        double eD = err_vec(r.D2, r.D1, N * H * Tq);
        tap_ok(eD <= 1e-12, "%s: rowsum(dout * out) = rowsum(P dP) in double (relative %.2g)", c->name, eD);
    }
    /* the GPU paths' math, emulated in fp32 from the CPU's own output */
    double *lse = malloc(N * H * Tq * 8), *dq = malloc(N * Tq * W * 8), *dk = malloc(N * Tk * W * 8);
    double *dv = malloc(N * Tk * W * 8);
    gpu_emulation(c, &x, dout, out, lse, dq, dk, dv);
    double el = err_vec(lse, r.lse, N * H * Tq);
    double fq = err_vec(dq, r.dq, N * Tq * W), fk = err_vec(dk, r.dk, N * Tk * W), fv = err_vec(dv, r.dv, N * Tk * W);
    double tol_e = tol_g;
    tap_ok(el <= 1e-6, "%s %s: the fp32 lse of the online softmax (m + log l) against the double one (%.2g)", c->name,
           tn, el);
    tap_ok(fq <= tol_e && fk <= tol_e && fv <= tol_e,
           "%s %s: the GPU paths' backward (P from the lse, D = rowsum(dout * out)) emulated in fp32 against the "
           "double reference (%.2g, %.2g, %.2g <= %.2g)", c->name, tn, fq, fk, fv, tol_e);
    free(lse), free(dq), free(dk), free(dv);
    aref_free(&r);
    ops3_free(&x), ops3_free(&g0), ops3_free(&g1), ops3_free(&g2);
    free(out.p), free(dout.p), free(nan_out.p), free(att.p);
}

int main(void)
{
    char err[256];
    tr_rng_seed(&rng, 40);
    be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!be) tap_skip_all(err);
    /* the decoder's cross attention: q [N, Tq, W], k, v [N, Tk, W] */
    int H = 2, dh = 8, W = H * dh, Tq = 5, Tk = 13, T = 11;
    acase cross = {"cross (Tq 5, Tk 13)",
                   {.N = 2, .Tq = Tq, .Tk = Tk, .heads = H, .dh = dh, .ldq = W, .ldk = W, .ldv = W, .ldo = W,
                    .sq = (size_t)Tq * W, .sk = (size_t)Tk * W, .sv = (size_t)Tk * W, .so = (size_t)Tq * W},
                   0};
    /* the encoder's self-attention: q, k, v packed in rows of 3W */
    acase packed = {"packed qkv (T 11)",
                    {.N = 2, .Tq = T, .Tk = T, .heads = H, .dh = dh, .ldq = 3 * W, .ldk = 3 * W, .ldv = 3 * W,
                     .ldo = W, .sq = (size_t)T * 3 * W, .sk = (size_t)T * 3 * W, .sv = (size_t)T * 3 * W,
                     .so = (size_t)T * W},
                    1};
    const int dts[] = {TR_PREC_FP32, TR_PREC_BF16, TR_PREC_FP16};
    for (int i = 0; i < 3; i++) {
        test_case(&cross, dts[i]);
        test_case(&packed, dts[i]);
    }
    tap_ok(be->mem.total == 0, "every workspace given back (%llu bytes left)", (unsigned long long)be->mem.total);
    tr_backend_free(be);
    return tap_done();
}
