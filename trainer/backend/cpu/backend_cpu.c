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

/* One context shape for every parallel loop below: fields are named by role
 * in each op. */
typedef struct pc {
    tr_backend *be;
    float *o, *o2, *o3, *o4;
    const float *a, *b, *c, *d, *e, *f, *g;
    const uint8_t *u8, *u8b;
    const int32_t *i32;
    const tr_attn_dims *ad;
    size_t n;
    int i0, i1, i2, i3, i4, i5;
    float f0, f1, f2, f3, f4, f5, f6;
    int ta, tb;
    double *dd;
} pc;

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

/* Blocks of C: the split depends only on the shape (never on the thread
 * count), so every element is computed by the same BLAS call whatever the
 * number of threads: results are bit-identical across --threads. */
static void gemm_rows_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    size_t nb = p->n, M = (size_t)p->i0;
    for (size_t blk = b; blk < e; blk++) {
        size_t r0 = M * blk / nb, r1 = M * (blk + 1) / nb;
        const float *A = p->ta ? p->a + r0 : p->a + r0 * (size_t)p->i3;
        gemm1(p->ta, p->tb, (int)(r1 - r0), p->i1, p->i2, p->f0, A, p->i3, p->b, p->i4, p->f1,
              p->o + r0 * (size_t)p->i5, p->i5);
    }
}

static void gemm_cols_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    size_t nb = p->n, N = (size_t)p->i1;
    for (size_t blk = b; blk < e; blk++) {
        size_t c0 = N * blk / nb, c1 = N * (blk + 1) / nb;
        const float *B = p->tb ? p->b + c0 * (size_t)p->i4 : p->b + c0;
        gemm1(p->ta, p->tb, p->i0, (int)(c1 - c0), p->i2, p->f0, p->a, p->i3, B, p->i4, p->f1, p->o + c0, p->i5);
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
    pc p = {.o = C, .a = A, .b = B, .i0 = M, .i1 = N, .i2 = K, .i3 = lda, .i4 = ldb, .i5 = ldc,
            .f0 = alpha, .f1 = beta, .ta = ta, .tb = tb, .n = nb};
    tr_pool_run(be->impl, nb, rows ? gemm_rows_w : gemm_cols_w, &p);
}

/* ---- column sums (double), deterministic: each thread owns columns ---------- */

/* out[c] += sum_n x[n*ld + c] for c in [0, C) over N rows */
static void colsum_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    double acc[64];
    for (size_t c0 = b; c0 < e; c0 += 64) {
        size_t c1 = c0 + 64 < e ? c0 + 64 : e;
        for (size_t c = c0; c < c1; c++) acc[c - c0] = 0.0;
        for (size_t n = 0; n < p->n; n++) {
            const float *row = p->a + n * (size_t)p->i0;
            for (size_t c = c0; c < c1; c++) acc[c - c0] += row[c];
        }
        for (size_t c = c0; c < c1; c++) p->o[c] += (float)acc[c - c0];
    }
}

static void colsum_add(tr_backend *be, float *out, const float *x, size_t N, int C, int ld)
{
    pc p = {.o = out, .a = x, .n = N, .i0 = ld};
    par(be, (size_t)C, N, colsum_w, &p);
}

/* ---- linear ------------------------------------------------------------------ */

static void bias_fill_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t n = b; n < e; n++) memcpy(p->o + n * (size_t)p->i0, p->a, (size_t)p->i0 * sizeof(float));
}

static void cpu_linear_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                               int N, int In, int O)
{
    if (b) {
        pc p = {.o = out, .a = b, .i0 = O};
        par(be, (size_t)N, (size_t)O, bias_fill_w, &p);
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

static void ln_fwd_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    size_t C = (size_t)p->i0;
    for (size_t n = b; n < e; n++)
        tr_layernorm_row(p->o + n * C, p->o2 + n, p->o3 + n, p->a + n * C, p->b, p->c, p->i0, p->f0);
}

static void cpu_layernorm_forward(tr_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                  const float *w, const float *b, int N, int C, float eps)
{
    pc p = {.o = out, .o2 = mean, .o3 = rstd, .a = inp, .b = w, .c = b, .i0 = C, .f0 = eps};
    par(be, (size_t)N, 4 * (size_t)C, ln_fwd_w, &p);
}

static void ln_stats_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    size_t C = (size_t)p->i0;
    for (size_t n = b; n < e; n++) tr_layernorm_stats(p->o2 + n, p->o3 + n, p->a + n * C, p->i0, p->f0);
}

static void cpu_layernorm_stats(tr_backend *be, float *mean, float *rstd, const float *inp, int N, int C, float eps)
{
    pc p = {.o2 = mean, .o3 = rstd, .a = inp, .i0 = C, .f0 = eps};
    par(be, (size_t)N, 2 * (size_t)C, ln_stats_w, &p);
}

static void ln_bwd_dx_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=dinp a=dout b=inp c=w d=mean e=rstd */
    size_t C = (size_t)p->i0;
    for (size_t n = b; n < e; n++)
        tr_layernorm_row_backward(p->o + n * C, p->a + n * C, p->b + n * C, p->c, p->d[n], p->e[n], p->i0);
}

static void ln_bwd_dw_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=dw o2=db a=dout b=inp d=mean e=rstd, n rows */
    size_t C = (size_t)p->i0;
    double sw[64], sb[64];
    for (size_t c0 = b; c0 < e; c0 += 64) {
        size_t c1 = c0 + 64 < e ? c0 + 64 : e;
        for (size_t c = c0; c < c1; c++) sw[c - c0] = sb[c - c0] = 0.0;
        for (size_t n = 0; n < p->n; n++) {
            const float *dy = p->a + n * C, *x = p->b + n * C;
            float m = p->d[n], r = p->e[n];
            for (size_t c = c0; c < c1; c++) {
                sw[c - c0] += (double)dy[c] * ((x[c] - m) * r);
                sb[c - c0] += dy[c];
            }
        }
        for (size_t c = c0; c < c1; c++) {
            if (p->o) p->o[c] += (float)sw[c - c0];
            if (p->o2) p->o2[c] += (float)sb[c - c0];
        }
    }
}

static void cpu_layernorm_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                   const float *inp, const float *w, const float *mean, const float *rstd,
                                   int N, int C)
{
    if (dinp) {
        pc p = {.o = dinp, .a = dout, .b = inp, .c = w, .d = mean, .e = rstd, .i0 = C};
        par(be, (size_t)N, 4 * (size_t)C, ln_bwd_dx_w, &p);
    }
    if (dw || db) {
        pc p = {.o = dw, .o2 = db, .a = dout, .b = inp, .d = mean, .e = rstd, .i0 = C, .n = (size_t)N};
        par(be, (size_t)C, 2 * (size_t)N, ln_bwd_dw_w, &p);
    }
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

static void gelu_f_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    size_t i = GELU_HAVE_AVX2() ? gelu_f_avx2(p->o, p->a, b, e) : b;
    for (; i < e; i++) p->o[i] = tr_gelu(p->a[i]);
}
static void gelu_b_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    size_t i = GELU_HAVE_AVX2() ? gelu_b_avx2(p->o, p->a, p->b, b, e) : b;
    for (; i < e; i++) p->o[i] += p->a[i] * tr_gelu_grad(p->b[i]);
}
static void relu_f_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t i = b; i < e; i++) p->o[i] = tr_relu(p->a[i]);
}
static void relu_b_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t i = b; i < e; i++)
        if (p->b[i] > 0.0f) p->o[i] += p->a[i];
}
static void add_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t i = b; i < e; i++) p->o[i] = p->a[i] + p->b[i];
}
static void acc_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t i = b; i < e; i++) p->o[i] += p->a[i];
}
static void zero_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    memset((char *)p->o + b, 0, e - b);
}

static void cpu_gelu_forward(tr_backend *be, float *out, const float *inp, size_t n)
{
    pc p = {.o = out, .a = inp};
    par(be, n, 8, gelu_f_w, &p);
}
static void cpu_gelu_backward(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    pc p = {.o = dinp, .a = dout, .b = inp};
    par(be, n, 8, gelu_b_w, &p);
}
static void cpu_relu_forward(tr_backend *be, float *out, const float *inp, size_t n)
{
    pc p = {.o = out, .a = inp};
    par(be, n, 1, relu_f_w, &p);
}
static void cpu_relu_backward(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    pc p = {.o = dinp, .a = dout, .b = inp};
    par(be, n, 1, relu_b_w, &p);
}
static void cpu_add(tr_backend *be, float *out, const float *a, const float *b, size_t n)
{
    pc p = {.o = out, .a = a, .b = b};
    par(be, n, 1, add_w, &p);
}
static void add_bcast_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=out a=a b=row, n = row length */
    for (size_t r = b; r < e; r++) {
        float *o = p->o + r * p->n;
        const float *x = p->a + r * p->n;
        for (size_t j = 0; j < p->n; j++) o[j] = x[j] + p->b[j];
    }
}
static void cpu_add_bcast(tr_backend *be, float *out, const float *a, const float *b, size_t N, size_t n)
{
    pc p = {.o = out, .a = a, .b = b, .n = n};
    par(be, N, n, add_bcast_w, &p);
}
static void cpu_accumulate(tr_backend *be, float *dst, const float *src, size_t n)
{
    pc p = {.o = dst, .a = src};
    par(be, n, 1, acc_w, &p);
}
/* ---- typed element-wise ops: 16-bit operands tile by tile on the stack ------- */

/* The element-wise ops read and write 16-bit operands directly: each
 * thread widens a tile of its range into fp32 on its stack, runs the fp32
 * loop above on it and rounds the tile it wrote (the same values as the
 * fp32 op on the widened operands, rounded: no workspace, one pass).  All
 * fp32: the fp32 op itself. */
#define EW_TILE 512
enum { EW_GELU_F, EW_GELU_B, EW_RELU_F, EW_RELU_B, EW_ADD, EW_ACC, EW_ADD_BCAST };

typedef struct ew {
    int kind;
    tr_ten o, a, b;
    size_t row; /* EW_ADD_BCAST: the row length (b has one row) */
} ew;

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
    const ew *x = ctx;
    float o[EW_TILE], a[EW_TILE], bb[EW_TILE];
    int acc = x->kind == EW_GELU_B || x->kind == EW_RELU_B || x->kind == EW_ACC;
    for (size_t i0 = b; i0 < e; i0 += EW_TILE) {
        size_t k = e - i0 < EW_TILE ? e - i0 : EW_TILE;
        ew_load(a, x->a, i0, k);
        if (x->kind == EW_ADD_BCAST) /* the row's elements at these positions, run by run */
            for (size_t j = 0, c = i0 % x->row; j < k; c = 0) {
                size_t run = x->row - c < k - j ? x->row - c : k - j;
                ew_load(bb + j, x->b, c, run);
                j += run;
            }
        else if (x->b.p)
            ew_load(bb, x->b, i0, k);
        if (acc) ew_load(o, x->o, i0, k);
        pc p = {.o = o, .a = a, .b = bb, .n = k};
        switch (x->kind) {
        case EW_GELU_F: gelu_f_w(&p, 0, k); break;
        case EW_GELU_B: gelu_b_w(&p, 0, k); break;
        case EW_RELU_F: relu_f_w(&p, 0, k); break;
        case EW_RELU_B: relu_b_w(&p, 0, k); break;
        case EW_ACC: acc_w(&p, 0, k); break;
        default: add_w(&p, 0, k); break; /* EW_ADD, EW_ADD_BCAST (b gathered) */
        }
        ew_store(x->o, i0, o, k);
    }
}

static void ew_run(tr_backend *be, int kind, tr_ten o, tr_ten a, tr_ten b, size_t n, size_t row)
{
    ew x = {.kind = kind, .o = o, .a = a, .b = b, .row = row};
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

typedef struct lnt {
    tr_ten out, inp, w, b, dout;
    float *mean, *rstd, *dw, *db;
    const float *cmean, *crstd;
    int C;
    float eps;
    size_t N;
} lnt;

static void lnt_fwd_w(void *ctx, size_t b, size_t e)
{
    const lnt *x = ctx;
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
    const lnt *x = ctx;
    size_t C = (size_t)x->C;
    float in[TR_LN_MAXC];
    for (size_t n = b; n < e; n++) {
        ew_load(in, x->inp, n * C, C);
        tr_layernorm_stats(x->mean + n, x->rstd + n, in, x->C, x->eps);
    }
}

static void lnt_dx_w(void *ctx, size_t b, size_t e)
{
    const lnt *x = ctx; /* out: dinp */
    size_t C = (size_t)x->C;
    float dx[TR_LN_MAXC], dy[TR_LN_MAXC], in[TR_LN_MAXC], w[TR_LN_MAXC];
    ew_load(w, x->w, 0, C);
    for (size_t n = b; n < e; n++) {
        ew_load(dx, x->out, n * C, C);
        ew_load(dy, x->dout, n * C, C);
        ew_load(in, x->inp, n * C, C);
        tr_layernorm_row_backward(dx, dy, in, w, x->cmean[n], x->crstd[n], x->C);
        ew_store(x->out, n * C, dx, C);
    }
}

/* columns [b, e) of dw, db over every row, in blocks of 64 (the order of ln_bwd_dw_w) */
static void lnt_dw_w(void *ctx, size_t b, size_t e)
{
    const lnt *x = ctx;
    size_t C = (size_t)x->C;
    double sw[64], sb[64];
    float dy[64], in[64];
    for (size_t c0 = b; c0 < e; c0 += 64) {
        size_t c1 = c0 + 64 < e ? c0 + 64 : e, k = c1 - c0;
        for (size_t c = 0; c < k; c++) sw[c] = sb[c] = 0.0;
        for (size_t n = 0; n < x->N; n++) {
            ew_load(dy, x->dout, n * C + c0, k);
            ew_load(in, x->inp, n * C + c0, k);
            float m = x->cmean[n], r = x->crstd[n];
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
    lnt x = {.out = out, .inp = inp, .w = w, .b = b, .mean = mean, .rstd = rstd, .C = C, .eps = eps};
    par(be, (size_t)N, 4 * (size_t)C, lnt_fwd_w, &x);
}

static void cpu_t_layernorm_stats(tr_backend *be, float *mean, float *rstd, tr_ten inp, int N, int C, float eps)
{
    if (inp.dt == TR_PREC_FP32) {
        cpu_layernorm_stats(be, mean, rstd, inp.p, N, C, eps);
        return;
    }
    lnt x = {.inp = inp, .mean = mean, .rstd = rstd, .C = C, .eps = eps};
    par(be, (size_t)N, 2 * (size_t)C, lnt_stats_w, &x);
}

static void cpu_t_layernorm_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp,
                                     tr_ten w, const float *mean, const float *rstd, int N, int C)
{
    if (all32(dinp, dout, inp) && w.dt == TR_PREC_FP32) {
        cpu_layernorm_backward(be, dinp.p, dw, db, dout.p, inp.p, w.p, mean, rstd, N, C);
        return;
    }
    lnt x = {.out = dinp, .inp = inp, .w = w, .dout = dout, .dw = dw, .db = db, .cmean = mean, .crstd = rstd,
             .C = C, .N = (size_t)N};
    if (dinp.p) par(be, (size_t)N, 4 * (size_t)C, lnt_dx_w, &x);
    if (dw || db) par(be, (size_t)C, 2 * (size_t)N, lnt_dw_w, &x);
}

/* n bytes */
static void cpu_zero(tr_backend *be, void *dst, size_t n)
{
    pc p = {.o = dst};
    par(be, n, 1, zero_w, &p);
}

/* ---- attention --------------------------------------------------------------- */

static void attn_f_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    const tr_attn_dims *d = p->ad;
    float scale = 1.0f / sqrtf((float)d->dh);
    for (size_t idx = b; idx < e; idx++) {
        size_t n = idx / (size_t)d->heads, hd = idx % (size_t)d->heads;
        const float *q = p->a + n * d->sq + hd * d->dh;
        const float *k = p->b + n * d->sk + hd * d->dh;
        const float *v = p->c + n * d->sv + hd * d->dh;
        float *att = p->o2 + idx * (size_t)d->Tq * d->Tk;
        float *out = p->o + n * d->so + hd * d->dh;
        gemm1(0, 1, d->Tq, d->Tk, d->dh, 1.0f, q, d->ldq, k, d->ldk, 0.0f, att, d->Tk);
        for (int t = 0; t < d->Tq; t++) tr_softmax_row(att + (size_t)t * d->Tk, d->Tk, scale);
        rnd_rows(p->i0, att, d->Tq, d->Tk, d->Tk); /* probabilities computed in fp32, stored rounded */
        gemm1(0, 0, d->Tq, d->dh, d->Tk, 1.0f, att, d->Tk, v, d->ldv, 0.0f, out, d->ldo);
    }
}

static void cpu_attention_forward(tr_backend *be, float *out, float *att, const float *q, const float *k,
                                  const float *v, const tr_attn_dims *d, int prec)
{
    pc p = {.o = out, .o2 = att, .a = q, .b = k, .c = v, .ad = d, .i0 = prec};
    par(be, (size_t)d->N * d->heads, (size_t)d->Tq * d->Tk * d->dh, attn_f_w, &p);
}

/* Each (n, head) owns disjoint slices of dq, dk, dv: no races. */
static void attn_b_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=dq o2=dk o3=dv a=dout b=q c=k d=v e=att */
    const tr_attn_dims *d = p->ad;
    float scale = 1.0f / sqrtf((float)d->dh);
    for (size_t idx = b; idx < e; idx++) {
        float *ds = p->o4 + idx * (size_t)d->Tq * d->Tk;
        size_t n = idx / (size_t)d->heads, hd = idx % (size_t)d->heads;
        size_t off = hd * d->dh;
        const float *dout = p->a + n * d->so + off;
        const float *q = p->b + n * d->sq + off, *k = p->c + n * d->sk + off, *v = p->d + n * d->sv + off;
        const float *att = p->e + idx * (size_t)d->Tq * d->Tk;
        /* dP = dout v^T  [Tq, Tk] */
        gemm1(0, 1, d->Tq, d->Tk, d->dh, 1.0f, dout, d->ldo, v, d->ldv, 0.0f, ds, d->Tk);
        /* dv += P^T dout */
        if (p->o3) gemm1(1, 0, d->Tk, d->dh, d->Tq, 1.0f, att, d->Tk, dout, d->ldo, 1.0f, p->o3 + n * d->sv + off, d->ldv);
        for (int t = 0; t < d->Tq; t++)
            tr_softmax_row_backward(ds + (size_t)t * d->Tk, att + (size_t)t * d->Tk, d->Tk, scale);
        /* dq += dS k ; dk += dS^T q */
        if (p->o) gemm1(0, 0, d->Tq, d->dh, d->Tk, 1.0f, ds, d->Tk, k, d->ldk, 1.0f, p->o + n * d->sq + off, d->ldq);
        if (p->o2) gemm1(1, 0, d->Tk, d->dh, d->Tq, 1.0f, ds, d->Tk, q, d->ldq, 1.0f, p->o2 + n * d->sk + off, d->ldk);
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
    pc p = {.o = dq, .o2 = dk, .o3 = dv, .o4 = ds, .a = dout, .b = q, .c = k, .d = v, .e = att, .ad = d};
    par(be, (size_t)d->N * d->heads, 2 * (size_t)d->Tq * d->Tk * d->dh, attn_b_w, &p);
    tr_mem_free(&be->mem, ds);
}

/* ---- ConvTranspose 2x2 stride 2 ---------------------------------------------- */

/* scatter scratch [N*H*W, 4*Co] (+ bias) -> out [N, 2H*2W, Co], or the gather back */
static void convt_scatter_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=out a=scratch b=bias i0=H i1=W i2=Co i3=gather? */
    int H = p->i0, W = p->i1, Co = p->i2;
    for (size_t pix = b; pix < e; pix++) {
        size_t n = pix / ((size_t)H * W), rc = pix % ((size_t)H * W);
        int r = (int)(rc / (size_t)W), c = (int)(rc % (size_t)W);
        float *s = (float *)p->a + pix * 4 * (size_t)Co;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                float *o = p->o + (n * 4 * H * W + (size_t)(2 * r + i) * 2 * W + 2 * c + j) * Co;
                if (p->i3) {
                    for (int ch = 0; ch < Co; ch++) s[ch * 4 + i * 2 + j] = o[ch];
                } else {
                    for (int ch = 0; ch < Co; ch++) o[ch] = s[ch * 4 + i * 2 + j] + p->b[ch];
                }
            }
    }
}

static void cpu_convt2x2_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                                 float *scratch, int N, int H, int W, int Ci, int Co)
{
    size_t npix = (size_t)N * H * W;
    cpu_gemm(be, 0, 0, (int)npix, 4 * Co, Ci, 1.0f, inp, Ci, w, 4 * Co, 0.0f, scratch, 4 * Co);
    pc p = {.o = out, .a = scratch, .b = b, .i0 = H, .i1 = W, .i2 = Co, .i3 = 0};
    par(be, npix, 4 * (size_t)Co, convt_scatter_w, &p);
}

static void cpu_convt2x2_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                  const float *inp, const float *w, float *scratch, int N, int H, int W,
                                  int Ci, int Co)
{
    size_t npix = (size_t)N * H * W;
    pc p = {.o = (float *)dout, .a = scratch, .i0 = H, .i1 = W, .i2 = Co, .i3 = 1};
    par(be, npix, 4 * (size_t)Co, convt_scatter_w, &p);
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

static void im2col_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=patches u8=image i32=content i0=S i1=P */
    int S = p->i0, P = p->i1, G = S / P;
    for (size_t row = b; row < e; row++) {
        int img = (int)(row / ((size_t)G * G)), tok = (int)(row % ((size_t)G * G));
        int r = tok / G, c = tok % G;
        float *o = p->o + row * 3 * (size_t)P * P;
        for (int ch = 0; ch < 3; ch++)
            for (int py = 0; py < P; py++)
                for (int px = 0; px < P; px++)
                    *o++ = norm_px(p->u8, p->i32, img, S, r * P + py, c * P + px, ch);
    }
}

static void cpu_patch_im2col(tr_backend *be, float *patches, const uint8_t *image, const int32_t *content,
                             int B, int S, int P)
{
    pc p = {.o = patches, .u8 = image, .i32 = content, .i0 = S, .i1 = P};
    par(be, (size_t)B * (S / P) * (S / P), 3 * (size_t)P * P, im2col_w, &p);
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

static void tok_bwd_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=dlabel_emb o2=dnot o3=diou o4=dmask a=dT0 i32=labels i0=NP i1=K i2=C */
    int NP = p->i0, K = p->i1, C = p->i2;
    size_t T = (size_t)K + 2;
    for (size_t c = b; c < e; c++) {
        double s0 = 0, s1 = 0, sneg = 0, spos = 0, snot = 0;
        for (int n = 0; n < NP; n++) {
            const float *t = p->a + (size_t)n * T * C;
            s0 += t[c];
            s1 += t[C + c];
            for (int k = 0; k < K; k++) {
                int lab = p->i32[(size_t)n * K + k];
                float g = t[(size_t)(2 + k) * C + c];
                if (lab < 0)
                    snot += g;
                else if (lab == 0)
                    sneg += g;
                else
                    spos += g;
            }
        }
        if (p->o) {
            p->o[c] += (float)sneg;
            p->o[C + c] += (float)spos;
        }
        if (p->o2) p->o2[c] += (float)snot;
        if (p->o3) p->o3[c] += (float)s0;
        if (p->o4) p->o4[c] += (float)s1;
    }
}

static void cpu_prompt_tokens_backward(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                       float *dmask_tok, const float *dT0, const int32_t *labels, int NP, int K,
                                       int C)
{
    pc p = {.o = dlabel_emb, .o2 = dnot_a_point, .o3 = diou_tok, .o4 = dmask_tok, .a = dT0, .i32 = labels,
            .i0 = NP, .i1 = K, .i2 = C};
    par(be, (size_t)C, (size_t)NP * (K + 2), tok_bwd_w, &p);
}

static void keys_f_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=K a=emb b=no_mask i0=M i1=GG i2=C */
    size_t GG = (size_t)p->i1, C = (size_t)p->i2;
    for (size_t row = b; row < e; row++) {
        size_t pair = row / GG, g = row % GG, img = pair / (size_t)p->i0;
        const float *src = p->a + (img * GG + g) * C;
        float *dst = p->o + row * C;
        for (size_t c = 0; c < C; c++) dst[c] = src[c] + p->b[c];
    }
}

static void cpu_keys_forward(tr_backend *be, float *Kimg, const float *emb, const float *no_mask, int B, int M,
                             int GG, int C)
{
    pc p = {.o = Kimg, .a = emb, .b = no_mask, .i0 = M, .i1 = GG, .i2 = C};
    par(be, (size_t)B * M * GG, (size_t)C, keys_f_w, &p);
}

static void keys_b_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=demb a=dK i0=M i1=GG i2=C */
    size_t GG = (size_t)p->i1, C = (size_t)p->i2, M = (size_t)p->i0;
    for (size_t row = b; row < e; row++) { /* row = img*GG + g */
        size_t img = row / GG, g = row % GG;
        float *dst = p->o + row * C;
        for (size_t m = 0; m < M; m++) {
            const float *src = p->a + ((img * M + m) * GG + g) * C;
            for (size_t c = 0; c < C; c++) dst[c] += src[c];
        }
    }
}

static void cpu_keys_backward(tr_backend *be, float *demb, float *dno_mask, const float *dKimg, int B, int M,
                              int GG, int C)
{
    if (demb) {
        pc p = {.o = demb, .a = dKimg, .i0 = M, .i1 = GG, .i2 = C};
        par(be, (size_t)B * GG, (size_t)M * C, keys_b_w, &p);
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

static void mdot_f_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=logits a=U b=hyp i0=RR i1=c */
    size_t RR = (size_t)p->i0, c = (size_t)p->i1;
    for (size_t row = b; row < e; row++) {
        const float *u = p->a + row * c, *h = p->b + (row / RR) * c;
        float s = 0.0f;
        for (size_t j = 0; j < c; j++) s += u[j] * h[j];
        p->o[row] = s;
    }
}

static void cpu_mask_dot_forward(tr_backend *be, float *logits, const float *U, const float *hyp, int N, int RR,
                                 int c)
{
    pc p = {.o = logits, .a = U, .b = hyp, .i0 = RR, .i1 = c};
    par(be, (size_t)N * RR, (size_t)c, mdot_f_w, &p);
}

static void mdot_b_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=dU o2=dhyp a=dlogits b=U c=hyp i0=RR i1=c */
    size_t RR = (size_t)p->i0, c = (size_t)p->i1;
    double acc[256];
    for (size_t n = b; n < e; n++) {
        const float *h = p->c + n * c;
        for (size_t j = 0; j < c; j++) acc[j] = 0.0;
        for (size_t px = 0; px < RR; px++) {
            size_t row = n * RR + px;
            float g = p->a[row];
            const float *u = p->b + row * c;
            if (p->o) {
                float *du = p->o + row * c;
                for (size_t j = 0; j < c; j++) du[j] += g * h[j];
            }
            for (size_t j = 0; j < c; j++) acc[j] += (double)g * u[j];
        }
        if (p->o2)
            for (size_t j = 0; j < c; j++) p->o2[n * c + j] += (float)acc[j];
    }
}

static void cpu_mask_dot_backward(tr_backend *be, float *dU, float *dhyp, const float *dlogits, const float *U,
                                  const float *hyp, int N, int RR, int c)
{
    if (c > 256) abort(); /* C/8 <= 256 is checked by the config */
    pc p = {.o = dU, .o2 = dhyp, .a = dlogits, .b = U, .c = hyp, .i0 = RR, .i1 = c};
    par(be, (size_t)N, 2 * (size_t)RR * c, mdot_b_w, &p);
}

/* ---- loss ---------------------------------------------------------------------- */

/* Per pair: dd[n*8 + 0..5] = focal mean, dice, iou_mse, iou target; gradient pass. */
static void loss_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx; /* o=dlogits o2=diou a=logits b=iou u8=masks u8b=valid i0=RR f0=1/Nvalid dd=out */
    size_t RR = (size_t)p->i0;
    for (size_t n = b; n < e; n++) {
        float *dl = p->o + n * RR;
        double *r = p->dd + n * 8;
        if (!p->u8b[n] || p->f0 == 0.0f) {
            memset(dl, 0, RR * sizeof(float));
            p->o2[n] = 0.0f;
            for (int i = 0; i < 8; i++) r[i] = 0.0;
            continue;
        }
        const float *x = p->a + n * RR;
        const uint8_t *y = p->u8 + n * RR;
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
        double di = (double)p->b[n] - target;
        r[0] = focal;
        r[1] = dice;
        r[2] = di * di;
        r[3] = target;
        float s = p->f0;
        float cf = (float)(20.0 / (double)RR);
        float inv_den2 = (float)(1.0 / (den * den));
        for (size_t i = 0; i < RR; i++) {
            float yi = y[i] ? 1.0f : 0.0f, d;
            tr_focal_pixel(x[i], yi, &d);
            float pr = tr_sigmoid(x[i]);
            float ddice_dp = -(float)(2.0 * yi * den - num) * inv_den2;
            dl[i] = s * (cf * d + ddice_dp * pr * (1.0f - pr));
        }
        p->o2[n] = s * (float)(2.0 * di);
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
    pc p = {.o = dlogits, .o2 = diou, .a = logits, .b = iou, .u8 = masks, .u8b = valid, .i0 = RR,
            .f0 = count > 0 ? (float)((double)scale / count) : 0.0f, .dd = r};
    par(be, (size_t)N, 16 * (size_t)RR, loss_w, &p);
    double s[4] = {0};
    for (int n = 0; n < N; n++)
        if (valid[n])
            for (int k = 0; k < 4; k++) s[k] += r[n * 8 + k];
    for (int k = 0; k < 4; k++) sums[k] += s[k];
    tr_mem_free(&be->mem, r);
}

/* ---- optimizer helpers ------------------------------------------------------------ */

#define TR_SUMSQ_BLOCKS 64

static void sumsq_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t blk = b; blk < e; blk++) {
        size_t lo = p->n * blk / TR_SUMSQ_BLOCKS, hi = p->n * (blk + 1) / TR_SUMSQ_BLOCKS;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)p->a[i] * p->a[i];
        p->dd[blk] = s;
    }
}

static double cpu_sumsq(tr_backend *be, const float *g, size_t n)
{
    double part[TR_SUMSQ_BLOCKS];
    pc p = {.a = g, .n = n, .dd = part};
    par(be, TR_SUMSQ_BLOCKS, n / TR_SUMSQ_BLOCKS + 1, sumsq_w, &p);
    double s = 0.0;
    for (int i = 0; i < TR_SUMSQ_BLOCKS; i++) s += part[i];
    return s;
}

static void scale_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t i = b; i < e; i++) p->o[i] *= p->f0;
}

static void cpu_scale(tr_backend *be, float *g, size_t n, float s)
{
    pc p = {.o = g, .f0 = s};
    par(be, n, 1, scale_w, &p);
}

static void adamw_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    for (size_t i = b; i < e; i++)
        tr_adamw_elem(p->o + i, p->o2 + i, p->o3 + i, p->a[i], p->f0, p->f1, p->f2, p->f3, p->f4, p->f5, p->f6);
}

static void cpu_adamw(tr_backend *be, float *w, float *m, float *v, const float *g, size_t n, float lr,
                      float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
    pc p = {.o = w, .o2 = m, .o3 = v, .a = g, .f0 = lr, .f1 = beta1, .f2 = beta2, .f3 = eps, .f4 = wd,
            .f5 = bc1, .f6 = bc2};
    par(be, n, 8, adamw_w, &p);
}

/* 8-bit AdamW: blocks of the quantisation on the pool */
typedef struct q8job {
    float *w;
    uint8_t *mq, *vq;
    float *mabs, *vabs;
    const float *qm, *qv, *g;
    size_t n;
    int block;
    float lr, beta1, beta2, eps, wd, bc1, bc2;
} q8job;

static void q8_work(void *ctx, size_t begin, size_t end)
{
    const q8job *j = ctx;
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
    q8job j = {w, mq, vq, mabs, vabs, qm, qv, g, n, block, lr, beta1, beta2, eps, wd, bc1, bc2};
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    if (nb < 4) q8_work(&j, 0, nb);
    else tr_pool_run(be->impl, nb, q8_work, &j);
}

/* ---- 16-bit conversions and copies -------------------------------------------- */

static void copy_w(void *ctx, size_t b, size_t e)
{
    pc *p = ctx;
    memcpy((char *)p->o + b, (const char *)p->a + b, e - b);
}

/* n bytes */
static void cpu_copy(tr_backend *be, void *dst, const void *src, size_t n)
{
    pc p = {.o = dst, .a = src};
    par(be, n, 1, copy_w, &p);
}

/* The spans of one widening or narrowing as one range of elements over the
 * pool: [b, e) cut at the spans' ends (one loop per format, so that each
 * vectorises). */
typedef struct pc16 {
    const tr_span *s;
    int k, narrow;
} pc16;

static void conv16_w(void *ctx, size_t b, size_t e)
{
    const pc16 *p = ctx;
    size_t at = 0;
    for (int j = 0; j < p->k && b < e; at += p->s[j].n, j++) {
        const tr_span *s = &p->s[j];
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
    pc16 p = {.s = s, .k = k, .narrow = narrow};
    par(be, n, 2, conv16_w, &p);
}

static void cpu_narrow(tr_backend *be, const tr_span *s, int k) { conv16(be, s, k, 1); }
static void cpu_widen(tr_backend *be, const tr_span *s, int k) { conv16(be, s, k, 0); }

/* ---- the backend --------------------------------------------------------------- */

static const tr_kern cpu_kern = {
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

const tr_sizes tr_cpu_sizes = {cpu_attention_saved, cpu_attention_workspace, cpu_loss_workspace, cpu_convt_scratch,
                                cpu_dec_chunk, cpu_enc_images, 1, NULL};

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
    tr_widen_ops(&cb->ops); /* the typed ops over cpu_kern, and the rest: */
    cb->ops.gemm = cpu_gemm;
    cb->ops.sumsq = cpu_sumsq, cb->ops.scale = cpu_scale;
    cb->ops.adamw = cpu_adamw, cb->ops.adamw8bit = cpu_adamw8bit;
    cb->ops.upload = cpu_move, cb->ops.download = cpu_move;
    /* the element-wise ops and LayerNorm: 16-bit operands tile by tile or
     * row by row, no workspace (backend_meta.c counts them alike) */
    cb->ops.gelu_forward = cpu_t_gelu_forward, cb->ops.gelu_backward = cpu_t_gelu_backward;
    cb->ops.relu_forward = cpu_t_relu_forward, cb->ops.relu_backward = cpu_t_relu_backward;
    cb->ops.add = cpu_t_add, cb->ops.accumulate = cpu_t_accumulate, cb->ops.add_bcast = cpu_t_add_bcast;
    cb->ops.layernorm_forward = cpu_t_layernorm_forward, cb->ops.layernorm_stats = cpu_t_layernorm_stats;
    cb->ops.layernorm_backward = cpu_t_layernorm_backward;
    be->name = "cpu";
    be->ops = &cb->ops;
    be->kern = &cpu_kern;
    be->sizes = &tr_cpu_sizes;
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
