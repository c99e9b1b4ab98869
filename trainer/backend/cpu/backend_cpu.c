/*
 * backend_cpu.c - the CPU backend: a persistent thread pool, GEMMs through
 * OpenBLAS (single-threaded calls, split over the pool so that every output
 * block is computed by one thread) or a plain C fallback, and every op of
 * tr_ops written as a loop over the shared kernels of kernels.h.
 */
#include "backend_cpu.h"
#include "backend_widen.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "common/kernels.h"
#include "pool.h"
#include "common/quant8.h"

#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

/* The pool over n items, unless the whole job (n items of about `work`
 * floats each) is too small to be worth waking it. */
static void par(tr_backend *be, size_t n, size_t work, void (*fn)(void *, size_t, size_t), void *ctx)
{
    if (n * work < 16384) {
        if (n) fn(ctx, 0, n);
        return;
    }
    tr_pool_run(be->impl, n, fn, ctx);
}

/* ---- 16-bit storage -------------------------------------------------------- */

/* Rows of len floats at stride ld, rounded in place to prec (strided head
 * slices; nothing for fp32). */
static void rnd_rows(int prec, float *x, int rows, int len, int ld)
{
    if (prec == TR_PREC_FP32 || !x) return;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < len; j++) x[(size_t)r * ld + j] = tr_round_prec(x[(size_t)r * ld + j], prec);
}

/* Each parallel loop below (fn of par or tr_pool_run) takes its op's
 * arguments in a struct of its own, x_args, named as the op names them. */

/* ---- GEMM ------------------------------------------------------------------ */

void tr_gemm_ref(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < N; j++) c[j] = 0.0f;
        else if (beta != 1.0f)
            for (int j = 0; j < N; j++) c[j] *= beta;
        if (!trans_b) {
            for (int k = 0; k < K; k++) {
                float a = alpha * (trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                const float *b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += a * b[j];
            }
        } else {
            for (int j = 0; j < N; j++) {
                const float *b = B + (size_t)j * ldb;
                float s = 0.0f;
                if (!trans_a) {
                    const float *a = A + (size_t)i * lda;
                    for (int k = 0; k < K; k++) s += a[k] * b[k];
                } else {
                    for (int k = 0; k < K; k++) s += A[(size_t)k * lda + i] * b[k];
                }
                c[j] += alpha * s;
            }
        }
    }
}

/* Single-threaded GEMM on the calling thread. */
static void gemm1(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
#ifdef HAVE_OPENBLAS
    if (K <= 0) {
        tr_gemm_ref(ta, tb, M, N, 0, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
#else
    tr_gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

/* C = alpha op(A) op(B) + beta C (tr_ops.gemm's arguments) cut into
 * `blocks` blocks of rows or of columns of C. */
typedef struct gemm_args {
    int ta, tb, M, N, K;
    float alpha, beta;
    const float *A, *B;
    int lda, ldb, ldc;
    float *C;
    size_t blocks;
} gemm_args;

/* Blocks of C: the split depends only on the shape (never on the thread
 * count), so every element is computed by the same BLAS call whatever the
 * number of threads: results are bit-identical across --threads. */
static void gemm_rows_w(void *ctx, size_t b, size_t e)
{
    const gemm_args *g = ctx;
    size_t nb = g->blocks, M = (size_t)g->M;
    for (size_t blk = b; blk < e; blk++) {
        size_t r0 = M * blk / nb, r1 = M * (blk + 1) / nb;
        const float *A = g->ta ? g->A + r0 : g->A + r0 * (size_t)g->lda;
        gemm1(g->ta, g->tb, (int)(r1 - r0), g->N, g->K, g->alpha, A, g->lda, g->B, g->ldb, g->beta,
              g->C + r0 * (size_t)g->ldc, g->ldc);
    }
}

static void gemm_cols_w(void *ctx, size_t b, size_t e)
{
    const gemm_args *g = ctx;
    size_t nb = g->blocks, N = (size_t)g->N;
    for (size_t blk = b; blk < e; blk++) {
        size_t c0 = N * blk / nb, c1 = N * (blk + 1) / nb;
        const float *B = g->tb ? g->B + c0 * (size_t)g->ldb : g->B + c0;
        gemm1(g->ta, g->tb, g->M, (int)(c1 - c0), g->K, g->alpha, g->A, g->lda, B, g->ldb, g->beta, g->C + c0,
              g->ldc);
    }
}

#define TR_GEMM_BLOCKS 4

static void cpu_gemm(tr_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    double flops = 2.0 * M * N * (double)K;
    int rows = M >= N;
    int dim = rows ? M : N;
    size_t nb = (size_t)(dim / 64 < TR_GEMM_BLOCKS ? dim / 64 : TR_GEMM_BLOCKS);
    if (flops < 1e6 || nb < 2) {
        gemm1(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_args g = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .A = A, .B = B,
                   .lda = lda, .ldb = ldb, .ldc = ldc, .C = C, .blocks = nb};
    tr_pool_run(be->impl, nb, rows ? gemm_rows_w : gemm_cols_w, &g);
}

/* ---- column sums (double), deterministic: each thread owns columns ---------- */

/* out[c] += sum_n x[n*ld + c] for c in [0, C) over N rows */
typedef struct colsum_args {
    float *out;
    const float *x;
    size_t N;
    int ld;
} colsum_args;

static void colsum_w(void *ctx, size_t b, size_t e)
{
    const colsum_args *a = ctx;
    double acc[64];
    for (size_t c0 = b; c0 < e; c0 += 64) {
        size_t c1 = c0 + 64 < e ? c0 + 64 : e;
        for (size_t c = c0; c < c1; c++) acc[c - c0] = 0.0;
        for (size_t n = 0; n < a->N; n++) {
            const float *row = a->x + n * (size_t)a->ld;
            for (size_t c = c0; c < c1; c++) acc[c - c0] += row[c];
        }
        for (size_t c = c0; c < c1; c++) a->out[c] += (float)acc[c - c0];
    }
}

static void colsum_add(tr_backend *be, float *out, const float *x, size_t N, int C, int ld)
{
    colsum_args a = {.out = out, .x = x, .N = N, .ld = ld};
    par(be, (size_t)C, N, colsum_w, &a);
}

/* ---- linear ------------------------------------------------------------------ */

/* every row of out [N, O] = bias [O] */
typedef struct bias_fill_args {
    float *out;
    const float *bias;
    int O;
} bias_fill_args;

static void bias_fill_w(void *ctx, size_t b, size_t e)
{
    const bias_fill_args *a = ctx;
    for (size_t n = b; n < e; n++) memcpy(a->out + n * (size_t)a->O, a->bias, (size_t)a->O * sizeof(float));
}

static void cpu_linear_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                               int N, int In, int O)
{
    if (b) {
        bias_fill_args a = {.out = out, .bias = b, .O = O};
        par(be, (size_t)N, (size_t)O, bias_fill_w, &a);
    }
    cpu_gemm(be, 0, 1, N, O, In, 1.0f, inp, In, w, In, b ? 1.0f : 0.0f, out, O);
}

static void cpu_linear_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, int N, int In, int O)
{
    if (dinp) cpu_gemm(be, 0, 0, N, In, O, 1.0f, dout, O, w, In, 1.0f, dinp, In);
    if (dw) cpu_gemm(be, 1, 0, O, In, N, 1.0f, dout, O, inp, In, 1.0f, dw, In);
    if (db) colsum_add(be, db, dout, (size_t)N, O, O);
}

/* ---- layernorm --------------------------------------------------------------- */

/* LayerNorm forward over N rows of C (ln_stats_w: mean and rstd alone) */
typedef struct ln_fwd_args {
    float *out, *mean, *rstd;
    const float *inp, *w, *b;
    int C;
    float eps;
} ln_fwd_args;

static void ln_fwd_w(void *ctx, size_t b, size_t e)
{
    const ln_fwd_args *a = ctx;
    size_t C = (size_t)a->C;
    for (size_t n = b; n < e; n++)
        tr_layernorm_row(a->out + n * C, a->mean + n, a->rstd + n, a->inp + n * C, a->w, a->b, a->C, a->eps);
}

static void cpu_layernorm_forward(tr_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *b, int N, int C, float eps)
{
    ln_fwd_args a = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .w = w, .b = b, .C = C, .eps = eps};
    par(be, (size_t)N, 4 * (size_t)C, ln_fwd_w, &a);
}

static void ln_stats_w(void *ctx, size_t b, size_t e)
{
    const ln_fwd_args *a = ctx;
    size_t C = (size_t)a->C;
    for (size_t n = b; n < e; n++) tr_layernorm_stats(a->mean + n, a->rstd + n, a->inp + n * C, a->C, a->eps);
}

static void cpu_layernorm_stats(tr_backend *be, float *mean, float *rstd, const float *inp, int N, int C, float eps)
{
    ln_fwd_args a = {.mean = mean, .rstd = rstd, .inp = inp, .C = C, .eps = eps};
    par(be, (size_t)N, 2 * (size_t)C, ln_stats_w, &a);
}

/* LayerNorm backward over N rows of C */
typedef struct ln_bwd_args {
    float *dinp, *dw, *db;
    const float *dout, *inp, *w, *mean, *rstd;
    int C;
    size_t N;
} ln_bwd_args;

static void ln_bwd_dx_w(void *ctx, size_t b, size_t e)
{
    const ln_bwd_args *a = ctx;
    size_t C = (size_t)a->C;
    for (size_t n = b; n < e; n++)
        tr_layernorm_row_backward(a->dinp + n * C, a->dout + n * C, a->inp + n * C, a->w, a->mean[n], a->rstd[n],
                                  a->C);
}

static void ln_bwd_dw_w(void *ctx, size_t b, size_t e)
{
    const ln_bwd_args *a = ctx;
    size_t C = (size_t)a->C;
    double sw[64], sb[64];
    for (size_t c0 = b; c0 < e; c0 += 64) {
        size_t c1 = c0 + 64 < e ? c0 + 64 : e;
        for (size_t c = c0; c < c1; c++) sw[c - c0] = sb[c - c0] = 0.0;
        for (size_t n = 0; n < a->N; n++) {
            const float *dy = a->dout + n * C, *x = a->inp + n * C;
            float m = a->mean[n], r = a->rstd[n];
            for (size_t c = c0; c < c1; c++) {
                sw[c - c0] += (double)dy[c] * ((x[c] - m) * r);
                sb[c - c0] += dy[c];
            }
        }
        for (size_t c = c0; c < c1; c++) {
            if (a->dw) a->dw[c] += (float)sw[c - c0];
            if (a->db) a->db[c] += (float)sb[c - c0];
        }
    }
}

static void cpu_layernorm_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                   const float *inp, const float *w, const float *mean, const float *rstd,
                                   int N, int C)
{
    ln_bwd_args a = {.dinp = dinp, .dw = dw, .db = db, .dout = dout, .inp = inp, .w = w, .mean = mean,
                     .rstd = rstd, .C = C, .N = (size_t)N};
    if (dinp) par(be, (size_t)N, 4 * (size_t)C, ln_bwd_dx_w, &a);
    if (dw || db) par(be, (size_t)C, 2 * (size_t)N, ln_bwd_dw_w, &a);
}

/* ---- element-wise ------------------------------------------------------------ */

/* GELU forward and backward, eight at a time with AVX2 where the CPU has
 * it: the operations of kernels.h's tr_erf_plus_one and tr_exp_nonpos one for one
 * (no FMA contraction, same rounding), so the results are the same bits as
 * the scalar loop's, with or without AVX2. */
#if defined(__x86_64__) && defined(__GNUC__)
#define GELU_AVX2 __attribute__((target("avx2")))
#define V_(c) _mm256_set1_ps(c)
#define VMA_(p, x, c) _mm256_add_ps(_mm256_mul_ps(p, x), V_(c))
GELU_AVX2 static __m256 exp_nonpos8(__m256 x)
{
    __m256 xc = _mm256_max_ps(x, V_(-87.0f)); /* NaN -> -87, as the scalar code */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, V_(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(n, V_(0.693145751953125f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, V_(1.428606765330187e-06f)));
    __m256 p = V_(1.0f / 5040);
    p = VMA_(p, r, 1.0f / 720);
    p = VMA_(p, r, 1.0f / 120);
    p = VMA_(p, r, 1.0f / 24);
    p = VMA_(p, r, 1.0f / 6);
    p = VMA_(p, r, 0.5f);
    p = VMA_(p, r, 1.0f);
    p = VMA_(p, r, 1.0f);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_cmp_ps(x, V_(-87.0f), _CMP_GE_OQ));
}
/* tr_erf_plus_one, eight at a time */
GELU_AVX2 static __m256 erf_plus_one8(__m256 z)
{
    __m256 a = _mm256_andnot_ps(V_(-0.0f), z), s = _mm256_mul_ps(z, z);
    __m256 p = V_(-5.625401973e-04f);
    p = VMA_(p, s, 4.916029982e-03f);
    p = VMA_(p, s, -2.670996077e-02f);
    p = VMA_(p, s, 1.128013134e-01f);
    p = VMA_(p, s, -3.761231899e-01f);
    p = VMA_(p, s, 1.128379107e+00f);
    __m256 inner = _mm256_add_ps(V_(1.0f), _mm256_mul_ps(z, p));
    __m256 t = _mm256_div_ps(V_(1.0f), a), q = V_(7.642709464e-02f);
    q = VMA_(q, t, -4.211116433e-01f);
    q = VMA_(q, t, 9.887555838e-01f);
    q = VMA_(q, t, -1.247151494e+00f);
    q = VMA_(q, t, 8.084734678e-01f);
    q = VMA_(q, t, -6.453348696e-02f);
    q = VMA_(q, t, -2.776449621e-01f);
    q = VMA_(q, t, 2.329441049e-04f);
    q = VMA_(q, t, 5.641337633e-01f);
    q = VMA_(q, t, 2.469921355e-06f);
    __m256 tail = _mm256_mul_ps(exp_nonpos8(_mm256_sub_ps(V_(0.0f), _mm256_mul_ps(a, a))), q);
    tail = _mm256_and_ps(tail, _mm256_cmp_ps(a, V_(9.3f), _CMP_NGT_UQ)); /* 0 above 9.3, NaN kept */
    __m256 outer = _mm256_blendv_ps(_mm256_sub_ps(V_(2.0f), tail), tail, _mm256_cmp_ps(z, V_(0.0f), _CMP_LT_OQ));
    return _mm256_blendv_ps(outer, inner, _mm256_cmp_ps(a, V_(1.0f), _CMP_LE_OQ));
}
GELU_AVX2 static size_t gelu_f_avx2(float *o, const float *a, size_t b, size_t e)
{
    size_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        __m256 c = erf_plus_one8(_mm256_mul_ps(x, V_((float)TR_SQRT1_2)));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(V_(0.5f), x), c));
    }
    return i;
}
GELU_AVX2 static size_t gelu_b_avx2(float *o, const float *g, const float *a, size_t b, size_t e)
{
    size_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        __m256 cdf = _mm256_mul_ps(V_(0.5f), erf_plus_one8(_mm256_mul_ps(x, V_((float)TR_SQRT1_2))));
        __m256 pdf = _mm256_mul_ps(V_((float)TR_INV_SQRT_2PI), exp_nonpos8(_mm256_mul_ps(_mm256_mul_ps(V_(-0.5f), x), x)));
        __m256 d = _mm256_add_ps(cdf, _mm256_mul_ps(x, pdf));
        _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(o + i), _mm256_mul_ps(_mm256_loadu_ps(g + i), d)));
    }
    return i;
}
#undef VMA_
#undef V_
#define GELU_HAVE_AVX2() __builtin_cpu_supports("avx2")
#else
#define GELU_HAVE_AVX2() 0
static size_t gelu_f_avx2(float *o, const float *a, size_t b, size_t e) { (void)o, (void)a, (void)e; return b; }
static size_t gelu_b_avx2(float *o, const float *g, const float *a, size_t b, size_t e) { (void)o, (void)g, (void)a, (void)e; return b; }
#endif

/* The element-wise loops over [b, e): out = f(inp) (gelu_f_w, relu_f_w),
 * dinp += dout f'(inp) (gelu_b_w, relu_b_w), out = a + b (add_w),
 * dst += src (acc_w); each reads the fields of its formula. */
typedef struct ew_args {
    float *out, *dinp, *dst;
    const float *inp, *dout, *a, *b, *src;
} ew_args;

static void gelu_f_w(void *ctx, size_t b, size_t e)
{
    const ew_args *x = ctx;
    size_t i = GELU_HAVE_AVX2() ? gelu_f_avx2(x->out, x->inp, b, e) : b;
    for (; i < e; i++) x->out[i] = tr_gelu(x->inp[i]);
}
static void gelu_b_w(void *ctx, size_t b, size_t e)
{
    const ew_args *x = ctx;
    size_t i = GELU_HAVE_AVX2() ? gelu_b_avx2(x->dinp, x->dout, x->inp, b, e) : b;
    for (; i < e; i++) x->dinp[i] += x->dout[i] * tr_gelu_grad(x->inp[i]);
}
static void relu_f_w(void *ctx, size_t b, size_t e)
{
    const ew_args *x = ctx;
    for (size_t i = b; i < e; i++) x->out[i] = tr_relu(x->inp[i]);
}
static void relu_b_w(void *ctx, size_t b, size_t e)
{
    const ew_args *x = ctx;
    for (size_t i = b; i < e; i++)
        if (x->inp[i] > 0.0f) x->dinp[i] += x->dout[i];
}
static void add_w(void *ctx, size_t b, size_t e)
{
    const ew_args *x = ctx;
    for (size_t i = b; i < e; i++) x->out[i] = x->a[i] + x->b[i];
}
static void acc_w(void *ctx, size_t b, size_t e)
{
    const ew_args *x = ctx;
    for (size_t i = b; i < e; i++) x->dst[i] += x->src[i];
}

static void cpu_gelu_forward(tr_backend *be, float *out, const float *inp, size_t n)
{
    par(be, n, 8, gelu_f_w, &(ew_args){.out = out, .inp = inp});
}
static void cpu_gelu_backward(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    par(be, n, 8, gelu_b_w, &(ew_args){.dinp = dinp, .dout = dout, .inp = inp});
}
static void cpu_relu_forward(tr_backend *be, float *out, const float *inp, size_t n)
{
    par(be, n, 1, relu_f_w, &(ew_args){.out = out, .inp = inp});
}
static void cpu_relu_backward(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    par(be, n, 1, relu_b_w, &(ew_args){.dinp = dinp, .dout = dout, .inp = inp});
}
static void cpu_add(tr_backend *be, float *out, const float *a, const float *b, size_t n)
{
    par(be, n, 1, add_w, &(ew_args){.out = out, .a = a, .b = b});
}
static void cpu_accumulate(tr_backend *be, float *dst, const float *src, size_t n)
{
    par(be, n, 1, acc_w, &(ew_args){.dst = dst, .src = src});
}

/* out [N, n] = a [N, n] + row [n] added to every row */
typedef struct add_bcast_args {
    float *out;
    const float *a, *row;
    size_t n;
} add_bcast_args;

static void add_bcast_w(void *ctx, size_t b, size_t e)
{
    const add_bcast_args *x = ctx;
    for (size_t r = b; r < e; r++) {
        float *o = x->out + r * x->n;
        const float *in = x->a + r * x->n;
        for (size_t j = 0; j < x->n; j++) o[j] = in[j] + x->row[j];
    }
}
static void cpu_add_bcast(tr_backend *be, float *out, const float *a, const float *b, size_t N, size_t n)
{
    add_bcast_args x = {.out = out, .a = a, .row = b, .n = n};
    par(be, N, n, add_bcast_w, &x);
}
/* ---- typed element-wise ops: 16-bit operands tile by tile on the stack ------- */

/* The element-wise ops read and write 16-bit operands directly: each
 * thread widens a tile of its range into fp32 on its stack, runs the fp32
 * loop above on it and rounds the tile it wrote (the same values as the
 * fp32 op on the widened operands, rounded: no workspace, one pass).  All
 * fp32: the fp32 op itself. */
#define EW_TILE 512
enum { EW_GELU_F, EW_GELU_B, EW_RELU_F, EW_RELU_B, EW_ADD, EW_ACC, EW_ADD_BCAST };

/* One typed element-wise op: out the operand it writes (or accumulates
 * into), in1 and in2 its inputs in the order of its arguments (tr_ops). */
typedef struct ew_typed_args {
    int kind;
    tr_ten out, in1, in2;
    size_t row; /* EW_ADD_BCAST: the row length (in2 has one row) */
} ew_typed_args;

/* dst[k] = elements [i0, i0 + k) of t, widened */
static void ew_load(float *dst, tr_ten t, size_t i0, size_t k)
{
    if (t.dt == TR_PREC_FP32) {
        memcpy(dst, (const float *)t.p + i0, k * sizeof(float));
    } else {
        const uint16_t *h = (const uint16_t *)t.p + i0;
        if (t.dt == TR_PREC_BF16)
            for (size_t j = 0; j < k; j++) dst[j] = tr_bf16_to_f32(h[j]);
        else
            for (size_t j = 0; j < k; j++) dst[j] = tr_f16_to_f32(h[j]);
    }
}

/* elements [i0, i0 + k) of t = src[k], rounded to t's type */
static void ew_store(tr_ten t, size_t i0, const float *src, size_t k)
{
    if (t.dt == TR_PREC_FP32) {
        memcpy((float *)t.p + i0, src, k * sizeof(float));
    } else {
        uint16_t *h = (uint16_t *)t.p + i0;
        if (t.dt == TR_PREC_BF16)
            for (size_t j = 0; j < k; j++) h[j] = tr_f32_to_bf16(src[j]);
        else
            for (size_t j = 0; j < k; j++) h[j] = tr_f32_to_f16(src[j]);
    }
}

static void ew_w(void *ctx, size_t b, size_t e)
{
    const ew_typed_args *x = ctx;
    float o[EW_TILE], a[EW_TILE], bb[EW_TILE];
    int acc = x->kind == EW_GELU_B || x->kind == EW_RELU_B || x->kind == EW_ACC;
    for (size_t i0 = b; i0 < e; i0 += EW_TILE) {
        size_t k = e - i0 < EW_TILE ? e - i0 : EW_TILE;
        ew_load(a, x->in1, i0, k);
        if (x->kind == EW_ADD_BCAST) /* the row's elements at these positions, run by run */
            for (size_t j = 0, c = i0 % x->row; j < k; c = 0) {
                size_t run = x->row - c < k - j ? x->row - c : k - j;
                ew_load(bb + j, x->in2, c, run);
                j += run;
            }
        else if (x->in2.p)
            ew_load(bb, x->in2, i0, k);
        if (acc) ew_load(o, x->out, i0, k);
        switch (x->kind) {
        case EW_GELU_F: gelu_f_w(&(ew_args){.out = o, .inp = a}, 0, k); break;
        case EW_GELU_B: gelu_b_w(&(ew_args){.dinp = o, .dout = a, .inp = bb}, 0, k); break;
        case EW_RELU_F: relu_f_w(&(ew_args){.out = o, .inp = a}, 0, k); break;
        case EW_RELU_B: relu_b_w(&(ew_args){.dinp = o, .dout = a, .inp = bb}, 0, k); break;
        case EW_ACC: acc_w(&(ew_args){.dst = o, .src = a}, 0, k); break;
        default: add_w(&(ew_args){.out = o, .a = a, .b = bb}, 0, k); break; /* EW_ADD, EW_ADD_BCAST */
        }
        ew_store(x->out, i0, o, k);
    }
}

static void ew_run(tr_backend *be, int kind, tr_ten out, tr_ten in1, tr_ten in2, size_t n, size_t row)
{
    ew_typed_args x = {.kind = kind, .out = out, .in1 = in1, .in2 = in2, .row = row};
    par(be, n, 8, ew_w, &x);
}

static int all32(tr_ten a, tr_ten b, tr_ten c)
{
    return a.dt == TR_PREC_FP32 && b.dt == TR_PREC_FP32 && c.dt == TR_PREC_FP32;
}

static void cpu_t_gelu_forward(tr_backend *be, tr_ten out, tr_ten inp, size_t n)
{
    if (all32(out, inp, out)) cpu_gelu_forward(be, out.p, inp.p, n);
    else ew_run(be, EW_GELU_F, out, inp, tr_f32(NULL), n, 0);
}
static void cpu_t_gelu_backward(tr_backend *be, tr_ten dinp, tr_ten dout, tr_ten inp, size_t n)
{
    if (all32(dinp, dout, inp)) cpu_gelu_backward(be, dinp.p, dout.p, inp.p, n);
    else ew_run(be, EW_GELU_B, dinp, dout, inp, n, 0);
}
static void cpu_t_relu_forward(tr_backend *be, tr_ten out, tr_ten inp, size_t n)
{
    if (all32(out, inp, out)) cpu_relu_forward(be, out.p, inp.p, n);
    else ew_run(be, EW_RELU_F, out, inp, tr_f32(NULL), n, 0);
}
static void cpu_t_relu_backward(tr_backend *be, tr_ten dinp, tr_ten dout, tr_ten inp, size_t n)
{
    if (all32(dinp, dout, inp)) cpu_relu_backward(be, dinp.p, dout.p, inp.p, n);
    else ew_run(be, EW_RELU_B, dinp, dout, inp, n, 0);
}
static void cpu_t_add(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t n)
{
    if (all32(out, a, b)) cpu_add(be, out.p, a.p, b.p, n);
    else ew_run(be, EW_ADD, out, a, b, n, 0);
}
static void cpu_t_accumulate(tr_backend *be, tr_ten dst, tr_ten src, size_t n)
{
    if (all32(dst, src, dst)) cpu_accumulate(be, dst.p, src.p, n);
    else ew_run(be, EW_ACC, dst, src, tr_f32(NULL), n, 0);
}
static void cpu_t_add_bcast(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t N, size_t n)
{
    if (all32(out, a, b)) cpu_add_bcast(be, out.p, a.p, b.p, N, n);
    else ew_run(be, EW_ADD_BCAST, out, a, b, N * n, n);
}

/* ---- typed LayerNorm: 16-bit rows on the stack --------------------------------- */

/* Rows of at most TR_LN_MAXC elements (tr_config_check caps E and C below
 * it) widened into the thread's stack, the fp32 row kernels of kernels.h
 * run on them, the rows written rounded: no workspace, one pass. */
#define TR_LN_MAXC 8192

/* ln_fwd_args and ln_bwd_args with typed operands */
typedef struct ln_typed_fwd_args {
    tr_ten out, inp, w, b;
    float *mean, *rstd;
    int C;
    float eps;
} ln_typed_fwd_args;

typedef struct ln_typed_bwd_args {
    tr_ten dinp, dout, inp, w;
    float *dw, *db;
    const float *mean, *rstd;
    int C;
    size_t N;
} ln_typed_bwd_args;

static void lnt_fwd_w(void *ctx, size_t b, size_t e)
{
    const ln_typed_fwd_args *x = ctx;
    size_t C = (size_t)x->C;
    float in[TR_LN_MAXC], o[TR_LN_MAXC], w[TR_LN_MAXC], bb[TR_LN_MAXC];
    ew_load(w, x->w, 0, C);
    ew_load(bb, x->b, 0, C);
    for (size_t n = b; n < e; n++) {
        ew_load(in, x->inp, n * C, C);
        tr_layernorm_row(o, x->mean + n, x->rstd + n, in, w, bb, x->C, x->eps);
        ew_store(x->out, n * C, o, C);
    }
}

static void lnt_stats_w(void *ctx, size_t b, size_t e)
{
    const ln_typed_fwd_args *x = ctx;
    size_t C = (size_t)x->C;
    float in[TR_LN_MAXC];
    for (size_t n = b; n < e; n++) {
        ew_load(in, x->inp, n * C, C);
        tr_layernorm_stats(x->mean + n, x->rstd + n, in, x->C, x->eps);
    }
}

static void lnt_dx_w(void *ctx, size_t b, size_t e)
{
    const ln_typed_bwd_args *x = ctx;
    size_t C = (size_t)x->C;
    float dx[TR_LN_MAXC], dy[TR_LN_MAXC], in[TR_LN_MAXC], w[TR_LN_MAXC];
    ew_load(w, x->w, 0, C);
    for (size_t n = b; n < e; n++) {
        ew_load(dx, x->dinp, n * C, C);
        ew_load(dy, x->dout, n * C, C);
        ew_load(in, x->inp, n * C, C);
        tr_layernorm_row_backward(dx, dy, in, w, x->mean[n], x->rstd[n], x->C);
        ew_store(x->dinp, n * C, dx, C);
    }
}

/* columns [b, e) of dw, db over every row, in blocks of 64 (the order of ln_bwd_dw_w) */
static void lnt_dw_w(void *ctx, size_t b, size_t e)
{
    const ln_typed_bwd_args *x = ctx;
    size_t C = (size_t)x->C;
    double sw[64], sb[64];
    float dy[64], in[64];
    for (size_t c0 = b; c0 < e; c0 += 64) {
        size_t c1 = c0 + 64 < e ? c0 + 64 : e, k = c1 - c0;
        for (size_t c = 0; c < k; c++) sw[c] = sb[c] = 0.0;
        for (size_t n = 0; n < x->N; n++) {
            ew_load(dy, x->dout, n * C + c0, k);
            ew_load(in, x->inp, n * C + c0, k);
            float m = x->mean[n], r = x->rstd[n];
            for (size_t c = 0; c < k; c++) {
                sw[c] += (double)dy[c] * ((in[c] - m) * r);
                sb[c] += dy[c];
            }
        }
        for (size_t c = 0; c < k; c++) {
            if (x->dw) x->dw[c0 + c] += (float)sw[c];
            if (x->db) x->db[c0 + c] += (float)sb[c];
        }
    }
}

static void cpu_t_layernorm_forward(tr_backend *be, tr_ten out, float *mean, float *rstd, tr_ten inp, tr_ten w,
                                    tr_ten b, int N, int C, float eps)
{
    if (all32(out, inp, w) && b.dt == TR_PREC_FP32) {
        cpu_layernorm_forward(be, out.p, mean, rstd, inp.p, w.p, b.p, N, C, eps);
        return;
    }
    ln_typed_fwd_args x = {.out = out, .inp = inp, .w = w, .b = b, .mean = mean, .rstd = rstd, .C = C, .eps = eps};
    par(be, (size_t)N, 4 * (size_t)C, lnt_fwd_w, &x);
}

static void cpu_t_layernorm_stats(tr_backend *be, float *mean, float *rstd, tr_ten inp, int N, int C, float eps)
{
    if (inp.dt == TR_PREC_FP32) {
        cpu_layernorm_stats(be, mean, rstd, inp.p, N, C, eps);
        return;
    }
    ln_typed_fwd_args x = {.inp = inp, .mean = mean, .rstd = rstd, .C = C, .eps = eps};
    par(be, (size_t)N, 2 * (size_t)C, lnt_stats_w, &x);
}

static void cpu_t_layernorm_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp,
                                     tr_ten w, const float *mean, const float *rstd, int N, int C)
{
    if (all32(dinp, dout, inp) && w.dt == TR_PREC_FP32) {
        cpu_layernorm_backward(be, dinp.p, dw, db, dout.p, inp.p, w.p, mean, rstd, N, C);
        return;
    }
    ln_typed_bwd_args x = {.dinp = dinp, .dout = dout, .inp = inp, .w = w, .dw = dw, .db = db, .mean = mean,
                           .rstd = rstd, .C = C, .N = (size_t)N};
    if (dinp.p) par(be, (size_t)N, 4 * (size_t)C, lnt_dx_w, &x);
    if (dw || db) par(be, (size_t)C, 2 * (size_t)N, lnt_dw_w, &x);
}

/* bytes [b, e) of dst: zeroed (src NULL) or copied from src */
typedef struct bytes_args {
    void *dst;
    const void *src;
} bytes_args;

static void zero_w(void *ctx, size_t b, size_t e)
{
    const bytes_args *x = ctx;
    memset((char *)x->dst + b, 0, e - b);
}

/* n bytes */
static void cpu_zero(tr_backend *be, void *dst, size_t n)
{
    par(be, n, 1, zero_w, &(bytes_args){.dst = dst});
}

/* ---- attention --------------------------------------------------------------- */

/* attention over N sequences of `heads` heads (d), (sequence, head) by (sequence, head) */
typedef struct attn_fwd_args {
    float *out, *att;
    const float *q, *k, *v;
    const tr_attn_dims *d;
    int prec; /* att's (TR_PREC_*) */
} attn_fwd_args;

static void attn_f_w(void *ctx, size_t b, size_t e)
{
    const attn_fwd_args *a = ctx;
    const tr_attn_dims *d = a->d;
    float scale = 1.0f / sqrtf((float)d->dh);
    for (size_t idx = b; idx < e; idx++) {
        size_t n = idx / (size_t)d->heads, hd = idx % (size_t)d->heads;
        const float *q = a->q + n * d->sq + hd * d->dh;
        const float *k = a->k + n * d->sk + hd * d->dh;
        const float *v = a->v + n * d->sv + hd * d->dh;
        float *att = a->att + idx * (size_t)d->Tq * d->Tk;
        float *out = a->out + n * d->so + hd * d->dh;
        gemm1(0, 1, d->Tq, d->Tk, d->dh, 1.0f, q, d->ldq, k, d->ldk, 0.0f, att, d->Tk);
        for (int t = 0; t < d->Tq; t++) tr_softmax_row(att + (size_t)t * d->Tk, d->Tk, scale);
        rnd_rows(a->prec, att, d->Tq, d->Tk, d->Tk); /* probabilities computed in fp32, stored rounded */
        gemm1(0, 0, d->Tq, d->dh, d->Tk, 1.0f, att, d->Tk, v, d->ldv, 0.0f, out, d->ldo);
    }
}

static void cpu_attention_forward(tr_backend *be, float *out, float *att, const float *q, const float *k,
                                  const float *v, const tr_attn_dims *d, int prec)
{
    attn_fwd_args a = {.out = out, .att = att, .q = q, .k = k, .v = v, .d = d, .prec = prec};
    par(be, (size_t)d->N * d->heads, (size_t)d->Tq * d->Tk * d->dh, attn_f_w, &a);
}

typedef struct attn_bwd_args {
    float *dq, *dk, *dv;
    float *ds; /* the workspace: dP, then dS, [N, heads, Tq, Tk] */
    const float *dout, *q, *k, *v, *att;
    const tr_attn_dims *d;
} attn_bwd_args;

/* rows [0, T) of cols columns at p, ld apart: zeros (p NULL: nothing) */
static void zero_cols(float *p, int T, int ld, int cols)
{
    if (!p) return;
    for (int t = 0; t < T; t++) memset(p + (size_t)t * ld, 0, (size_t)cols * sizeof(float));
}

/* Each (n, head) owns disjoint slices of dq, dk, dv: no races.  They are
 * written (backend.h): each slice zeroed, then the GEMMs add into it (the
 * same calls, and so the same bits, as when the caller zeroed them). */
static void attn_b_w(void *ctx, size_t b, size_t e)
{
    const attn_bwd_args *a = ctx;
    const tr_attn_dims *d = a->d;
    float scale = 1.0f / sqrtf((float)d->dh);
    for (size_t idx = b; idx < e; idx++) {
        float *ds = a->ds + idx * (size_t)d->Tq * d->Tk;
        size_t n = idx / (size_t)d->heads, hd = idx % (size_t)d->heads;
        size_t off = hd * d->dh;
        const float *dout = a->dout + n * d->so + off;
        const float *q = a->q + n * d->sq + off, *k = a->k + n * d->sk + off, *v = a->v + n * d->sv + off;
        const float *att = a->att + idx * (size_t)d->Tq * d->Tk;
        float *dq = a->dq ? a->dq + n * d->sq + off : NULL, *dk = a->dk ? a->dk + n * d->sk + off : NULL;
        float *dv = a->dv ? a->dv + n * d->sv + off : NULL;
        zero_cols(dq, d->Tq, d->ldq, d->dh), zero_cols(dk, d->Tk, d->ldk, d->dh), zero_cols(dv, d->Tk, d->ldv, d->dh);
        /* dP = dout v^T  [Tq, Tk] */
        gemm1(0, 1, d->Tq, d->Tk, d->dh, 1.0f, dout, d->ldo, v, d->ldv, 0.0f, ds, d->Tk);
        /* dv = P^T dout */
        if (dv) gemm1(1, 0, d->Tk, d->dh, d->Tq, 1.0f, att, d->Tk, dout, d->ldo, 1.0f, dv, d->ldv);
        for (int t = 0; t < d->Tq; t++)
            tr_softmax_row_backward(ds + (size_t)t * d->Tk, att + (size_t)t * d->Tk, d->Tk, scale);
        /* dq = dS k ; dk = dS^T q */
        if (dq) gemm1(0, 0, d->Tq, d->dh, d->Tk, 1.0f, ds, d->Tk, k, d->ldk, 1.0f, dq, d->ldq);
        if (dk) gemm1(1, 0, d->Tk, d->dh, d->Tq, 1.0f, ds, d->Tk, q, d->ldq, 1.0f, dk, d->ldk);
    }
}

static void cpu_attention_backward(tr_backend *be, float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v, const float *att,
                                   const tr_attn_dims *d)
{
    /* dP/dS workspace of every (n, head), like att */
    float *ds = tr_mem_alloc(&be->mem, TR_MEM_WORK,
                             tr_cpu_sizes.attention_workspace(d));
    if (!ds) return; /* out of memory: recorded by the allocator, the model's step fails */
    attn_bwd_args a = {.dq = dq, .dk = dk, .dv = dv, .ds = ds, .dout = dout, .q = q, .k = k, .v = v, .att = att,
                       .d = d};
    par(be, (size_t)d->N * d->heads, 2 * (size_t)d->Tq * d->Tk * d->dh, attn_b_w, &a);
    tr_mem_free(&be->mem, ds);
}

/* ---- ConvTranspose 2x2 stride 2 ---------------------------------------------- */

/* scatter: scratch [N*H*W, 4*Co] (+ bias [Co]) -> out [N, 2H*2W, Co];
 * gather: scratch = out's pixels in scratch's order (out read only, bias
 * unused) */
typedef struct convt_scatter_args {
    float *out, *scratch;
    const float *bias;
    int H, W, Co;
    int gather;
} convt_scatter_args;

static void convt_scatter_w(void *ctx, size_t b, size_t e)
{
    const convt_scatter_args *a = ctx;
    int H = a->H, W = a->W, Co = a->Co;
    for (size_t pix = b; pix < e; pix++) {
        size_t n = pix / ((size_t)H * W), rc = pix % ((size_t)H * W);
        int r = (int)(rc / (size_t)W), c = (int)(rc % (size_t)W);
        float *s = a->scratch + pix * 4 * (size_t)Co;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                float *o = a->out + (n * 4 * H * W + (size_t)(2 * r + i) * 2 * W + 2 * c + j) * Co;
                if (a->gather) {
                    for (int ch = 0; ch < Co; ch++) s[ch * 4 + i * 2 + j] = o[ch];
                } else {
                    for (int ch = 0; ch < Co; ch++) o[ch] = s[ch * 4 + i * 2 + j] + a->bias[ch];
                }
            }
    }
}

static void cpu_convt2x2_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                                 float *scratch, int N, int H, int W, int Ci, int Co)
{
    size_t npix = (size_t)N * H * W;
    cpu_gemm(be, 0, 0, (int)npix, 4 * Co, Ci, 1.0f, inp, Ci, w, 4 * Co, 0.0f, scratch, 4 * Co);
    convt_scatter_args a = {.out = out, .scratch = scratch, .bias = b, .H = H, .W = W, .Co = Co, .gather = 0};
    par(be, npix, 4 * (size_t)Co, convt_scatter_w, &a);
}

static void cpu_convt2x2_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                  const float *inp, const float *w, float *scratch, int N, int H, int W,
                                  int Ci, int Co)
{
    size_t npix = (size_t)N * H * W;
    convt_scatter_args a = {.out = (float *)dout, .scratch = scratch, .H = H, .W = W, .Co = Co, .gather = 1};
    par(be, npix, 4 * (size_t)Co, convt_scatter_w, &a);
    if (dinp) cpu_gemm(be, 0, 1, (int)npix, Ci, 4 * Co, 1.0f, scratch, 4 * Co, w, 4 * Co, 1.0f, dinp, Ci);
    if (dw) cpu_gemm(be, 1, 0, Ci, 4 * Co, (int)npix, 1.0f, inp, Ci, scratch, 4 * Co, 1.0f, dw, 4 * Co);
    if (db) colsum_add(be, db, dout, npix * 4, Co, Co);
}

/* ---- input ------------------------------------------------------------------- */

static const float tr_mean_[3] = {0.485f, 0.456f, 0.406f};
static const float tr_std_[3] = {0.229f, 0.224f, 0.225f};

static inline float norm_px(const uint8_t *image, const int32_t *content, int b, int S, int y, int x, int ch)
{
    if (x >= content[2 * b] || y >= content[2 * b + 1]) return 0.0f;
    float v = image[(((size_t)b * S + y) * S + x) * 3 + ch];
    return (v / 255.0f - tr_mean_[ch]) / tr_std_[ch];
}

typedef struct im2col_args {
    float *patches;
    const uint8_t *image;
    const int32_t *content;
    int S, P;
} im2col_args;

static void im2col_w(void *ctx, size_t b, size_t e)
{
    const im2col_args *a = ctx;
    int S = a->S, P = a->P, G = S / P;
    for (size_t row = b; row < e; row++) {
        int img = (int)(row / ((size_t)G * G)), tok = (int)(row % ((size_t)G * G));
        int r = tok / G, c = tok % G;
        float *o = a->patches + row * 3 * (size_t)P * P;
        for (int ch = 0; ch < 3; ch++)
            for (int py = 0; py < P; py++)
                for (int px = 0; px < P; px++)
                    *o++ = norm_px(a->image, a->content, img, S, r * P + py, c * P + px, ch);
    }
}

static void cpu_patch_im2col(tr_backend *be, float *patches, const uint8_t *image, const int32_t *content,
                             int B, int S, int P)
{
    im2col_args a = {.patches = patches, .image = image, .content = content, .S = S, .P = P};
    par(be, (size_t)B * (S / P) * (S / P), 3 * (size_t)P * P, im2col_w, &a);
}

static void cpu_image_normalize(tr_backend *be, float *out, const uint8_t *image, const int32_t *content,
                                int B, int S)
{
    for (int b = 0; b < B; b++)
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < S; y++)
                for (int x = 0; x < S; x++)
                    out[(((size_t)b * 3 + ch) * S + y) * S + x] = norm_px(image, content, b, S, y, x, ch);
}

/* ---- prompt encoder ---------------------------------------------------------- */

/* PE(u) [C] with gauss [2, C/2]: sines then cosines; computed in double. */
static void pe_point(float *out, double ux, double uy, const float *gauss, int C)
{
    int h = C / 2;
    for (int j = 0; j < h; j++) {
        double z = 2.0 * M_PI * ((2.0 * ux - 1.0) * gauss[j] + (2.0 * uy - 1.0) * gauss[h + j]);
        out[j] = (float)sin(z);
        out[h + j] = (float)cos(z);
    }
}

static void cpu_pe_dense(tr_backend *be, float *out, const float *gauss, int G, int C)
{
    for (int r = 0; r < G; r++)
        for (int c = 0; c < G; c++)
            pe_point(out + ((size_t)r * G + c) * C, (c + 0.5) / G, (r + 0.5) / G, gauss, C);
}

static void cpu_prompt_tokens_forward(tr_backend *be, float *T0, const float *points, const int32_t *labels,
                                      const float *gauss, const float *label_emb, const float *not_a_point,
                                      const float *iou_tok, const float *mask_tok, int NP, int K, int C, int S)
{
    (void)be;
    size_t T = (size_t)K + 2;
    for (int n = 0; n < NP; n++) {
        float *t = T0 + (size_t)n * T * C;
        memcpy(t, iou_tok, (size_t)C * sizeof(float));
        memcpy(t + C, mask_tok, (size_t)C * sizeof(float));
        for (int k = 0; k < K; k++) {
            float *row = t + (size_t)(2 + k) * C;
            int lab = labels[(size_t)n * K + k];
            if (lab < 0) {
                memcpy(row, not_a_point, (size_t)C * sizeof(float));
                continue;
            }
            const float *pt = points + ((size_t)n * K + k) * 2;
            pe_point(row, ((double)pt[0] + 0.5) / S, ((double)pt[1] + 0.5) / S, gauss, C);
            const float *le = label_emb + (size_t)(lab ? 1 : 0) * C;
            for (int c = 0; c < C; c++) row[c] += le[c];
        }
    }
}

typedef struct tok_bwd_args {
    float *dlabel_emb, *dnot_a_point, *diou_tok, *dmask_tok;
    const float *dT0;
    const int32_t *labels;
    int NP, K, C;
} tok_bwd_args;

static void tok_bwd_w(void *ctx, size_t b, size_t e)
{
    const tok_bwd_args *a = ctx;
    int NP = a->NP, K = a->K, C = a->C;
    size_t T = (size_t)K + 2;
    for (size_t c = b; c < e; c++) {
        double s0 = 0, s1 = 0, sneg = 0, spos = 0, snot = 0;
        for (int n = 0; n < NP; n++) {
            const float *t = a->dT0 + (size_t)n * T * C;
            s0 += t[c];
            s1 += t[C + c];
            for (int k = 0; k < K; k++) {
                int lab = a->labels[(size_t)n * K + k];
                float g = t[(size_t)(2 + k) * C + c];
                if (lab < 0)
                    snot += g;
                else if (lab == 0)
                    sneg += g;
                else
                    spos += g;
            }
        }
        if (a->dlabel_emb) {
            a->dlabel_emb[c] += (float)sneg;
            a->dlabel_emb[C + c] += (float)spos;
        }
        if (a->dnot_a_point) a->dnot_a_point[c] += (float)snot;
        if (a->diou_tok) a->diou_tok[c] += (float)s0;
        if (a->dmask_tok) a->dmask_tok[c] += (float)s1;
    }
}

static void cpu_prompt_tokens_backward(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                       float *dmask_tok, const float *dT0, const int32_t *labels, int NP, int K,
                                       int C)
{
    tok_bwd_args a = {.dlabel_emb = dlabel_emb, .dnot_a_point = dnot_a_point, .diou_tok = diou_tok,
                      .dmask_tok = dmask_tok, .dT0 = dT0, .labels = labels, .NP = NP, .K = K, .C = C};
    par(be, (size_t)C, (size_t)NP * (K + 2), tok_bwd_w, &a);
}

/* the image keys of B images, M pairs each, GG tokens of C */
typedef struct keys_args {
    float *Kimg, *demb;
    const float *emb, *no_mask, *dKimg;
    int M, GG, C;
} keys_args;

static void keys_f_w(void *ctx, size_t b, size_t e)
{
    const keys_args *a = ctx;
    size_t GG = (size_t)a->GG, C = (size_t)a->C;
    for (size_t row = b; row < e; row++) {
        size_t pair = row / GG, g = row % GG, img = pair / (size_t)a->M;
        const float *src = a->emb + (img * GG + g) * C;
        float *dst = a->Kimg + row * C;
        for (size_t c = 0; c < C; c++) dst[c] = src[c] + a->no_mask[c];
    }
}

static void cpu_keys_forward(tr_backend *be, float *Kimg, const float *emb, const float *no_mask, int B, int M,
                             int GG, int C)
{
    keys_args a = {.Kimg = Kimg, .emb = emb, .no_mask = no_mask, .M = M, .GG = GG, .C = C};
    par(be, (size_t)B * M * GG, (size_t)C, keys_f_w, &a);
}

static void keys_b_w(void *ctx, size_t b, size_t e)
{
    const keys_args *a = ctx;
    size_t GG = (size_t)a->GG, C = (size_t)a->C, M = (size_t)a->M;
    for (size_t row = b; row < e; row++) { /* row = img*GG + g */
        size_t img = row / GG, g = row % GG;
        float *dst = a->demb + row * C;
        for (size_t m = 0; m < M; m++) {
            const float *src = a->dKimg + ((img * M + m) * GG + g) * C;
            for (size_t c = 0; c < C; c++) dst[c] += src[c];
        }
    }
}

static void cpu_keys_backward(tr_backend *be, float *demb, float *dno_mask, const float *dKimg, int B, int M,
                              int GG, int C)
{
    if (demb) {
        keys_args a = {.demb = demb, .dKimg = dKimg, .M = M, .GG = GG, .C = C};
        par(be, (size_t)B * GG, (size_t)M * C, keys_b_w, &a);
    }
    if (dno_mask) colsum_add(be, dno_mask, dKimg, (size_t)B * M * GG, C, C);
}

static void cpu_rows_gather(tr_backend *be, float *out, const float *inp, int N, int T, int C, int t)
{
    (void)be;
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, inp + ((size_t)n * T + t) * C, (size_t)C * sizeof(float));
}

static void cpu_rows_scatter_add(tr_backend *be, float *dinp, const float *dout, int N, int T, int C, int t)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        float *d = dinp + ((size_t)n * T + t) * C;
        const float *s = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) d[c] += s[c];
    }
}

/* ---- mask logits --------------------------------------------------------------- */

/* N pairs of RR pixels, c channels each */
typedef struct mdot_args {
    float *logits, *dU, *dhyp;
    const float *U, *hyp, *dlogits;
    int RR, c;
} mdot_args;

static void mdot_f_w(void *ctx, size_t b, size_t e)
{
    const mdot_args *a = ctx;
    size_t RR = (size_t)a->RR, c = (size_t)a->c;
    for (size_t row = b; row < e; row++) {
        const float *u = a->U + row * c, *h = a->hyp + (row / RR) * c;
        float s = 0.0f;
        for (size_t j = 0; j < c; j++) s += u[j] * h[j];
        a->logits[row] = s;
    }
}

static void cpu_mask_dot_forward(tr_backend *be, float *logits, const float *U, const float *hyp, int N, int RR,
                                 int c)
{
    mdot_args a = {.logits = logits, .U = U, .hyp = hyp, .RR = RR, .c = c};
    par(be, (size_t)N * RR, (size_t)c, mdot_f_w, &a);
}

static void mdot_b_w(void *ctx, size_t b, size_t e)
{
    const mdot_args *a = ctx;
    size_t RR = (size_t)a->RR, c = (size_t)a->c;
    double acc[256];
    for (size_t n = b; n < e; n++) {
        const float *h = a->hyp + n * c;
        for (size_t j = 0; j < c; j++) acc[j] = 0.0;
        for (size_t px = 0; px < RR; px++) {
            size_t row = n * RR + px;
            float g = a->dlogits[row];
            const float *u = a->U + row * c;
            if (a->dU) {
                float *du = a->dU + row * c;
                for (size_t j = 0; j < c; j++) du[j] += g * h[j];
            }
            for (size_t j = 0; j < c; j++) acc[j] += (double)g * u[j];
        }
        if (a->dhyp)
            for (size_t j = 0; j < c; j++) a->dhyp[n * c + j] += (float)acc[j];
    }
}

static void cpu_mask_dot_backward(tr_backend *be, float *dU, float *dhyp, const float *dlogits, const float *U,
                                  const float *hyp, int N, int RR, int c)
{
    if (c > 256) abort(); /* C/8 <= 256 is checked by the config */
    mdot_args a = {.dU = dU, .dhyp = dhyp, .dlogits = dlogits, .U = U, .hyp = hyp, .RR = RR, .c = c};
    par(be, (size_t)N, 2 * (size_t)RR * c, mdot_b_w, &a);
}

/* ---- loss ---------------------------------------------------------------------- */

/* tr_ops.sam_loss over pairs; grad_scale = scale / count (0 when count is 0) */
typedef struct loss_args {
    float *dlogits, *diou;
    const float *logits, *iou;
    const uint8_t *masks, *valid;
    int RR;
    float grad_scale;
    double *pair_sums; /* [N, 8] */
} loss_args;

/* Per pair: pair_sums[n*8 + 0..3] = focal mean, dice, iou_mse, iou target; gradient pass. */
static void loss_w(void *ctx, size_t b, size_t e)
{
    const loss_args *a = ctx;
    size_t RR = (size_t)a->RR;
    for (size_t n = b; n < e; n++) {
        float *dl = a->dlogits + n * RR;
        double *r = a->pair_sums + n * 8;
        if (!a->valid[n] || a->grad_scale == 0.0f) {
            memset(dl, 0, RR * sizeof(float));
            a->diou[n] = 0.0f;
            for (int i = 0; i < 8; i++) r[i] = 0.0;
            continue;
        }
        const float *x = a->logits + n * RR;
        const uint8_t *y = a->masks + n * RR;
        double sf = 0, sp = 0, sy = 0, spy = 0;
        uint64_t inter = 0, uni = 0;
        for (size_t i = 0; i < RR; i++) {
            float yi = y[i] ? 1.0f : 0.0f, d;
            sf += tr_focal_pixel(x[i], yi, &d);
            float pr = tr_sigmoid(x[i]);
            sp += pr;
            sy += yi;
            spy += (double)pr * yi;
            int pos = x[i] > 0.0f;
            inter += (uint64_t)(pos && y[i]);
            uni += (uint64_t)(pos || y[i]);
        }
        double focal = sf / (double)RR;
        double den = sp + sy + 1.0, num = 2.0 * spy + 1.0;
        double dice = 1.0 - num / den;
        double target = uni ? (double)inter / (double)uni : 1.0;
        double di = (double)a->iou[n] - target;
        r[0] = focal;
        r[1] = dice;
        r[2] = di * di;
        r[3] = target;
        float s = a->grad_scale;
        float cf = (float)(20.0 / (double)RR);
        float inv_den2 = (float)(1.0 / (den * den));
        for (size_t i = 0; i < RR; i++) {
            float yi = y[i] ? 1.0f : 0.0f, d;
            tr_focal_pixel(x[i], yi, &d);
            float pr = tr_sigmoid(x[i]);
            float ddice_dp = -(float)(2.0 * yi * den - num) * inv_den2;
            dl[i] = s * (cf * d + ddice_dp * pr * (1.0f - pr));
        }
        a->diou[n] = s * (float)(2.0 * di);
    }
}

/* upload and download: host and backend memory are one */
static void cpu_move(tr_backend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    if (n) memcpy(dst, src, n);
}

static void cpu_sam_loss(tr_backend *be, float *dlogits, float *diou, const float *logits, const float *iou,
                         const uint8_t *masks, const uint8_t *valid, int N, int RR, float scale, int count,
                         double *sums)
{
    double *r = tr_mem_alloc(&be->mem, TR_MEM_WORK, tr_cpu_sizes.loss_workspace((size_t)N, (size_t)RR));
    if (!r) return; /* out of memory: recorded by the allocator, the model's step fails */
    loss_args a = {.dlogits = dlogits, .diou = diou, .logits = logits, .iou = iou, .masks = masks, .valid = valid,
                   .RR = RR, .grad_scale = count > 0 ? (float)((double)scale / count) : 0.0f, .pair_sums = r};
    par(be, (size_t)N, 16 * (size_t)RR, loss_w, &a);
    double s[4] = {0};
    for (int n = 0; n < N; n++)
        if (valid[n])
            for (int k = 0; k < 4; k++) s[k] += r[n * 8 + k];
    for (int k = 0; k < 4; k++) sums[k] += s[k];
    tr_mem_free(&be->mem, r);
}

/* ---- optimizer helpers ------------------------------------------------------------ */

#define TR_SUMSQ_BLOCKS 64

/* part[blk] = the sum of squares of block blk of g [n] */
typedef struct sumsq_args {
    const float *g;
    size_t n;
    double *part;
} sumsq_args;

static void sumsq_w(void *ctx, size_t b, size_t e)
{
    const sumsq_args *a = ctx;
    for (size_t blk = b; blk < e; blk++) {
        size_t lo = a->n * blk / TR_SUMSQ_BLOCKS, hi = a->n * (blk + 1) / TR_SUMSQ_BLOCKS;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)a->g[i] * a->g[i];
        a->part[blk] = s;
    }
}

static double cpu_sumsq(tr_backend *be, const float *g, size_t n)
{
    double part[TR_SUMSQ_BLOCKS];
    sumsq_args a = {.g = g, .n = n, .part = part};
    par(be, TR_SUMSQ_BLOCKS, n / TR_SUMSQ_BLOCKS + 1, sumsq_w, &a);
    double s = 0.0;
    for (int i = 0; i < TR_SUMSQ_BLOCKS; i++) s += part[i];
    return s;
}

typedef struct scale_args {
    float *g;
    float s;
} scale_args;

static void scale_w(void *ctx, size_t b, size_t e)
{
    const scale_args *a = ctx;
    for (size_t i = b; i < e; i++) a->g[i] *= a->s;
}

static void cpu_scale(tr_backend *be, float *g, size_t n, float s)
{
    par(be, n, 1, scale_w, &(scale_args){.g = g, .s = s});
}

typedef struct adamw_args {
    float *w, *m, *v;
    const float *g;
    float lr, beta1, beta2, eps, wd, bc1, bc2;
} adamw_args;

static void adamw_w(void *ctx, size_t b, size_t e)
{
    const adamw_args *a = ctx;
    for (size_t i = b; i < e; i++)
        tr_adamw_elem(a->w + i, a->m + i, a->v + i, a->g[i], a->lr, a->beta1, a->beta2, a->eps, a->wd, a->bc1,
                      a->bc2);
}

static void cpu_adamw(tr_backend *be, float *w, float *m, float *v, const float *g, size_t n, float lr,
                      float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
    adamw_args a = {.w = w, .m = m, .v = v, .g = g, .lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps,
                    .wd = wd, .bc1 = bc1, .bc2 = bc2};
    par(be, n, 8, adamw_w, &a);
}

/* 8-bit AdamW: blocks of the quantisation on the pool */
typedef struct adamw8bit_args {
    float *w;
    uint8_t *mq, *vq;
    float *mabs, *vabs;
    const float *qm, *qv, *g;
    size_t n;
    int block;
    float lr, beta1, beta2, eps, wd, bc1, bc2;
} adamw8bit_args;

static void q8_work(void *ctx, size_t begin, size_t end)
{
    const adamw8bit_args *j = ctx;
    for (size_t b = begin; b < end; b++) {
        size_t lo = b * (size_t)j->block, len = j->n - lo < (size_t)j->block ? j->n - lo : (size_t)j->block;
        tr_adamw8bit_block(j->w + lo, j->mq + lo, j->vq + lo, j->mabs + b, j->vabs + b, j->qm, j->qv, j->g + lo,
                           len, j->lr, j->beta1, j->beta2, j->eps, j->wd, j->bc1, j->bc2);
    }
}

static void cpu_adamw8bit(tr_backend *be, float *w, uint8_t *mq, uint8_t *vq, float *mabs, float *vabs,
                          const float *qm, const float *qv, const float *g, size_t n, int block, float lr,
                          float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
    if (n == 0) return;
    adamw8bit_args j = {w, mq, vq, mabs, vabs, qm, qv, g, n, block, lr, beta1, beta2, eps, wd, bc1, bc2};
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    if (nb < 4) q8_work(&j, 0, nb);
    else tr_pool_run(be->impl, nb, q8_work, &j);
}

/* ---- 16-bit conversions and copies -------------------------------------------- */

static void copy_w(void *ctx, size_t b, size_t e)
{
    const bytes_args *x = ctx;
    memcpy((char *)x->dst + b, (const char *)x->src + b, e - b);
}

/* n bytes */
static void cpu_copy(tr_backend *be, void *dst, const void *src, size_t n)
{
    par(be, n, 1, copy_w, &(bytes_args){.dst = dst, .src = src});
}

/* The spans of one widening or narrowing as one range of elements over the
 * pool: [b, e) cut at the spans' ends (one loop per format, so that each
 * vectorises). */
typedef struct conv16_args {
    const tr_span *spans;
    int n_spans, narrow;
} conv16_args;

static void conv16_w(void *ctx, size_t b, size_t e)
{
    const conv16_args *p = ctx;
    size_t at = 0;
    for (int j = 0; j < p->n_spans && b < e; at += p->spans[j].n, j++) {
        const tr_span *s = &p->spans[j];
        if (b >= at + s->n) continue;
        size_t lo = b - at, hi = e - at < s->n ? e - at : s->n;
        uint16_t *h = s->h;
        float *f = s->f;
        if (p->narrow && s->prec == TR_PREC_BF16)
            for (size_t i = lo; i < hi; i++) h[i] = tr_f32_to_bf16(f[i]);
        else if (p->narrow)
            for (size_t i = lo; i < hi; i++) h[i] = tr_to_16(f[i], s->prec);
        else if (s->prec == TR_PREC_BF16)
            for (size_t i = lo; i < hi; i++) f[i] = tr_bf16_to_f32(h[i]);
        else
            for (size_t i = lo; i < hi; i++) f[i] = tr_from_16(h[i], s->prec);
        b = at + hi;
    }
}

static void conv16(tr_backend *be, const tr_span *s, int k, int narrow)
{
    size_t n = 0;
    for (int j = 0; j < k; j++) n += s[j].n;
    conv16_args p = {.spans = s, .n_spans = k, .narrow = narrow};
    par(be, n, 2, conv16_w, &p);
}

static void cpu_narrow(tr_backend *be, const tr_span *s, int k) { conv16(be, s, k, 1); }
static void cpu_widen(tr_backend *be, const tr_span *s, int k) { conv16(be, s, k, 0); }

/* ---- the backend --------------------------------------------------------------- */

static const tr_fp32_kernels cpu_fp32 = {
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .convt2x2_forward = cpu_convt2x2_forward,
    .convt2x2_backward = cpu_convt2x2_backward,
    .patch_im2col = cpu_patch_im2col,
    .image_normalize = cpu_image_normalize,
    .pe_dense = cpu_pe_dense,
    .prompt_tokens_forward = cpu_prompt_tokens_forward,
    .prompt_tokens_backward = cpu_prompt_tokens_backward,
    .keys_forward = cpu_keys_forward,
    .keys_backward = cpu_keys_backward,
    .rows_gather = cpu_rows_gather,
    .rows_scatter_add = cpu_rows_scatter_add,
    .mask_dot_forward = cpu_mask_dot_forward,
    .mask_dot_backward = cpu_mask_dot_backward,
    .sam_loss = cpu_sam_loss,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .widen = cpu_widen,
    .narrow = cpu_narrow,
};

/* the ops given as they are (tr_fp32_ops); the element-wise ops and
 * LayerNorm read 16-bit operands tile by tile or row by row */
static const tr_ops cpu_direct_ops = {
    .gemm = cpu_gemm,
    .layernorm_forward = cpu_t_layernorm_forward,
    .layernorm_backward = cpu_t_layernorm_backward,
    .layernorm_stats = cpu_t_layernorm_stats,
    .gelu_forward = cpu_t_gelu_forward,
    .gelu_backward = cpu_t_gelu_backward,
    .relu_forward = cpu_t_relu_forward,
    .relu_backward = cpu_t_relu_backward,
    .add = cpu_t_add,
    .accumulate = cpu_t_accumulate,
    .add_bcast = cpu_t_add_bcast,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .adamw = cpu_adamw,
    .adamw8bit = cpu_adamw8bit,
    .upload = cpu_move,
    .download = cpu_move,
};

/* The backend and its op table in one allocation (be first: free(be)
 * frees both). */
typedef struct cpu_backend {
    tr_backend be;
    tr_ops ops;
} cpu_backend;

/* The warm-up: one GEMM on every pool thread at once, so that what the BLAS
 * maps per thread (its buffer, a malloc arena) is mapped before the first
 * step, where a limited address space (vmlimit.h) is checked against the
 * plan; afterwards the BLAS asks the system for nothing more.
 *
 * OpenBLAS's own server threads (started when the library loads, one per
 * core but one) each take a buffer of the BLAS's table when they first run,
 * which on a busy machine can be after that check: the buffer our GEMMs then
 * need is missing, mapped in the middle of a step, and under a limit that
 * refuses it OpenBLAS 0.3.21 retries without end. So the BLAS first runs
 * one GEMM over all of its own threads: it returns once every one of them
 * has run, and with it taken its buffer. Then our pool's GEMMs run one
 * thread each. */
#ifdef HAVE_OPENBLAS
#define WARM_N 256

static void warm_blas_threads(void)
{
    int n = openblas_get_num_threads(); /* its server threads and the caller */
    if (n > 1) {
        size_t m = (size_t)WARM_N * (size_t)n; /* rows enough for a share each */
        float *buf = calloc(m * WARM_N * 2 + (size_t)WARM_N * WARM_N, sizeof(float));
        if (buf)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, WARM_N, WARM_N, 1.0f, buf, WARM_N,
                        buf + m * WARM_N, WARM_N, 0.0f, buf + m * WARM_N + (size_t)WARM_N * WARM_N, WARM_N);
        free(buf);
    }
    openblas_set_num_threads(1); /* parallelism comes from our pool */
}

typedef struct warm {
    pthread_barrier_t bar;
    float *buf;
} warm;

static void warm_w(void *ctx, size_t begin, size_t end)
{
    warm *w = ctx;
    for (size_t i = begin; i < end; i++) {
        float *a = w->buf + i * 3 * WARM_N * WARM_N;
        pthread_barrier_wait(&w->bar); /* every thread in its GEMM at the same time */
        gemm1(0, 0, WARM_N, WARM_N, WARM_N, 1.0f, a, WARM_N, a + WARM_N * WARM_N, WARM_N, 0.0f,
              a + 2 * WARM_N * WARM_N, WARM_N);
    }
}

static void warm_up(tr_backend *be)
{
    warm w;
    size_t n = (size_t)be->n_threads;
    w.buf = calloc(n * 3 * WARM_N * WARM_N, sizeof(float));
    if (!w.buf || pthread_barrier_init(&w.bar, NULL, (unsigned)n) != 0) {
        free(w.buf);
        return; /* no warm-up: the first step maps it */
    }
    tr_pool_run(be->impl, n, warm_w, &w);
    pthread_barrier_destroy(&w.bar);
    free(w.buf);
}
#else
static void warm_up(tr_backend *be) { (void)be; } /* the plain C GEMM maps nothing */
#endif

/* ---- sizes ------------------------------------------------------------------------ */

static size_t cpu_attention_saved(size_t Tq, size_t Tk) { return Tq * Tk; } /* the probabilities */

static size_t cpu_attention_workspace(const tr_attn_dims *d)
{
    return (size_t)d->N * (size_t)d->heads * (size_t)d->Tq * (size_t)d->Tk * sizeof(float); /* dP/dS of every (sequence, head) */
}

static size_t cpu_loss_workspace(size_t N, size_t RR)
{
    (void)RR;
    return (N * 8 + 1) * sizeof(double); /* per-pair sums */
}

static size_t cpu_convt_scratch(size_t pixels, size_t Co) { return pixels * 4 * Co; }

/* small chunks keep the decoder's activations in cache, one image the encoder's */
static int cpu_dec_chunk(int n_pairs) { return (n_pairs + 3) / 4 < 4 ? (n_pairs + 3) / 4 : 4; }
static int cpu_enc_images(int B) { (void)B; return 1; }

const tr_sizes tr_cpu_sizes = {.attention_saved = cpu_attention_saved,
                                .attention_workspace = cpu_attention_workspace,
                                .loss_workspace = cpu_loss_workspace,
                                .convt_scratch = cpu_convt_scratch};
const tr_traits tr_cpu_traits = {.dec_chunk = cpu_dec_chunk, .enc_images = cpu_enc_images, .widens16 = 1};

static void cpu_destroy(tr_backend *be)
{
    tr_pool_free(be->impl);
    tr_mem_destroy(&be->mem);
    free(be);
}

tr_backend *tr_backend_cpu_create(int n_threads, char *err, size_t err_len)
{
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    tr_backend *be = &cb->be;
    tr_fp32_ops(&cb->ops, &cpu_direct_ops); /* and the widening ops over cpu_fp32 */
    be->name = "cpu";
    be->ops = &cb->ops;
    be->fp32 = &cpu_fp32;
    be->sizes = &tr_cpu_sizes;
    be->traits = &tr_cpu_traits;
    tr_mem_init(&be->mem);
    be->host_mem = &be->mem;
    be->n_threads = n_threads < 1 ? 1 : n_threads;
#ifdef HAVE_OPENBLAS
    warm_blas_threads();
#endif
    be->destroy = cpu_destroy;
    be->impl = tr_pool_create(be->n_threads);
    if (!be->impl) {
        tr_mem_destroy(&be->mem);
        free(be);
        snprintf(err, err_len, "cannot start %d threads", n_threads);
        return NULL;
    }
    be->n_threads = tr_pool_threads(be->impl);
    warm_up(be);
    return be;
}
