/*
 * kernels.h - the element-wise and per-row math of the trainer, written once
 * as static inline functions that compile as C (CPU backend, tests) and as
 * CUDA device code (SA1B_HD expands to __host__ __device__ under nvcc), so
 * the CPU tests exercise the exact arithmetic the GPU backend runs.
 *
 * Implements: exact GELU and its derivative (through an erf and an exp
 * of float precision made of plain arithmetic, which SIMD code mirrors bit
 * for bit), ReLU, LayerNorm of one row (statistics in double, biased
 * variance), scaled softmax of one row and its
 * backward, the per-pixel focal term of MODEL.md's loss with its derivative,
 * one AdamW element update, and the 16-bit storage formats (bf16 and IEEE
 * fp16) with round-to-nearest-even conversions.  Nothing here allocates or
 * touches memory other than the pointers it is handed.
 */
#ifndef SA1B_TRAINER_KERNELS_H
#define SA1B_TRAINER_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "precision.h"

#ifdef __CUDACC__
#define SA1B_HD __host__ __device__
#else
#define SA1B_HD
#endif

#define TR_SQRT1_2 0.70710678118654752440
#define TR_INV_SQRT_2PI 0.39894228040143267794

/* e^x for x <= 0, and 0 below -87 (where e^x leaves the normal floats)
 * and for NaN; from plain float arithmetic: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts), e^r by
 * its Taylor polynomial to r^7 (relative error < 2e-7), times 2^n made
 * from its exponent bits. */
static inline SA1B_HD float tr_exp_nonpos(float x)
{
    float xc = x >= -87.0f ? x : -87.0f; /* no undefined conversion below */
    float n = rintf(xc * 1.44269504f);
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x >= -87.0f ? p * two_n : 0.0f;
}

/* 1 + erf(z) = erfc(-z), what GELU needs, to float precision from plain
 * float arithmetic (so that backend_cpu.c's SIMD loop computes the same
 * bits operation by operation).  |z| <= 1: 1 + z P(z^2); else, with
 * a = |z|, t = e^(-a^2) Q(1/a) = erfc(a) (0 above 9.3, where erfc(a) is
 * below the smallest normal float), and the result is t for z < 0 (no
 * cancellation: relative error < 4e-6 all the way down the negative tail,
 * where 1 + erff(z) keeps no digit) and 2 - t above.  Absolute error
 * < 1.6e-7 everywhere.  P and Q are our own least-squares fits (weighted
 * for relative error) of erf(z)/z on [0, 1] and erfc(a) e^(a^2) on
 * [1, 9.3]. */
static inline SA1B_HD float tr_erf_plus_one(float z)
{
    float a = fabsf(z);
    if (a <= 1.0f) {
        float s = z * z, p = -5.625401973e-04f;
        p = p * s + 4.916029982e-03f;
        p = p * s + -2.670996077e-02f;
        p = p * s + 1.128013134e-01f;
        p = p * s + -3.761231899e-01f;
        p = p * s + 1.128379107e+00f;
        return 1.0f + z * p;
    }
    float t = 1.0f / a, q = 7.642709464e-02f;
    q = q * t + -4.211116433e-01f;
    q = q * t + 9.887555838e-01f;
    q = q * t + -1.247151494e+00f;
    q = q * t + 8.084734678e-01f;
    q = q * t + -6.453348696e-02f;
    q = q * t + -2.776449621e-01f;
    q = q * t + 2.329441049e-04f;
    q = q * t + 5.641337633e-01f;
    q = q * t + 2.469921355e-06f;
    float tail = a > 9.3f ? 0.0f : tr_exp_nonpos(-(a * a)) * q;
    return z < 0.0f ? tail : 2.0f - tail;
}

/* Exact GELU: x/2 * (1 + erf(x/sqrt 2)). */
static inline SA1B_HD float tr_gelu(float x)
{
    return 0.5f * x * tr_erf_plus_one(x * (float)TR_SQRT1_2);
}

/* d gelu / dx = Phi(x) + x * phi(x). */
static inline SA1B_HD float tr_gelu_grad(float x)
{
    float cdf = 0.5f * tr_erf_plus_one(x * (float)TR_SQRT1_2);
    float pdf = (float)TR_INV_SQRT_2PI * tr_exp_nonpos(-0.5f * x * x);
    return cdf + x * pdf;
}

static inline SA1B_HD float tr_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* The statistics of one row of n for LayerNorm: mean and
 * rstd = 1 / sqrt(biased variance + eps) (what tr_layernorm_row uses and
 * returns, the same bits). */
static inline SA1B_HD void tr_layernorm_stats(float *mean_out, float *rstd_out, const float *x /* [n] */, int n,
                                              float eps)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i];
    double mean = s / n;
    double v = 0.0;
    for (int i = 0; i < n; i++) {
        double d = x[i] - mean;
        v += d * d;
    }
    v /= n;
    *mean_out = (float)mean;
    *rstd_out = (float)(1.0 / sqrt(v + (double)eps));
}

/* LayerNorm of one row of n: out = (x - mean) * rstd * w + b, with the
 * biased variance; mean and rstd are returned for the backward pass. */
static inline SA1B_HD void tr_layernorm_row(float *out /* [n] */, float *mean_out, float *rstd_out,
                                            const float *x /* [n] */, const float *w /* [n] */,
                                            const float *b /* [n] */, int n, float eps)
{
    float m, rstd;
    tr_layernorm_stats(&m, &rstd, x, n, eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] - m) * rstd * w[i] + b[i];
    *mean_out = m;
    *rstd_out = rstd;
}

/* Backward of tr_layernorm_row for dx only (accumulated: dx += ...):
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dout * w. */
static inline SA1B_HD void tr_layernorm_row_backward(float *dx /* [n] += */, const float *dout /* [n] */,
                                                     const float *x /* [n] */, const float *w /* [n] */,
                                                     float mean, float rstd, int n)
{
    double sg = 0.0, sgx = 0.0;
    for (int i = 0; i < n; i++) {
        float xh = (x[i] - mean) * rstd;
        float g = dout[i] * w[i];
        sg += g;
        sgx += (double)g * xh;
    }
    float mg = (float)(sg / n), mgx = (float)(sgx / n);
    for (int i = 0; i < n; i++) {
        float xh = (x[i] - mean) * rstd;
        float g = dout[i] * w[i];
        dx[i] += rstd * (g - mg - xh * mgx);
    }
}

/* In place: p = softmax(scale * s) over one row of n scores. */
static inline SA1B_HD void tr_softmax_row(float *p /* [n] in: scores, out: probabilities */, int n, float scale)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        float v = p[i] * scale;
        if (v > mx) mx = v;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(p[i] * scale - mx);
        p[i] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) p[i] *= inv;
}

/* In place: d = scale * p * (d - sum(p * d)) turns d(loss)/d(prob) into
 * d(loss)/d(raw score) for p = softmax(scale * s). */
static inline SA1B_HD void tr_softmax_row_backward(float *d /* [n] in/out */, const float *p /* [n] */,
                                                   int n, float scale)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)p[i] * d[i];
    float fs = (float)s;
    for (int i = 0; i < n; i++) d[i] = scale * p[i] * (d[i] - fs);
}

/* Logistic sigmoid, stable for large |x|. */
static inline SA1B_HD float tr_sigmoid(float x)
{
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* Focal term of one pixel (MODEL.md): alpha_t * (1 - p_t)^2 * BCE(x, y) with
 * the stable BCE-with-logits; *dfdx receives its derivative in x, taken
 * through p_t as well as through BCE.  y is 0 or 1. */
static inline SA1B_HD float tr_focal_pixel(float x, float y, float *dfdx)
{
    float p = tr_sigmoid(x);
    float bce = fmaxf(x, 0.0f) - x * y + log1pf(expf(-fabsf(x)));
    float pt = p * y + (1.0f - p) * (1.0f - y);
    float at = 0.25f * y + 0.75f * (1.0f - y);
    float q = 1.0f - pt;
    float dpt = (2.0f * y - 1.0f) * p * (1.0f - p);
    *dfdx = at * (-2.0f * q * dpt * bce + q * q * (p - y));
    return at * q * q * bce;
}

/* One AdamW element (decoupled weight decay, bias-corrected moments):
 * bc1 = 1 - beta1^t, bc2 = 1 - beta2^t; wd is 0 for parameters without decay. */
static inline SA1B_HD void tr_adamw_elem(float *w, float *m, float *v, float g, float lr, float beta1,
                                         float beta2, float eps, float wd, float bc1, float bc2)
{
    float mm = beta1 * *m + (1.0f - beta1) * g;
    float vv = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mm;
    *v = vv;
    float mhat = mm / bc1, vhat = vv / bc2;
    *w -= lr * (mhat / (sqrtf(vhat) + eps) + wd * *w);
}

/* ---- 16-bit storage ---------------------------------------------------------
 * Between the precisions of stored activations (TR_PREC_* of precision.h).
 * Conversions from fp32 round to nearest, ties to even; overflow gives
 * infinity; NaN stays NaN (quiet, sign kept); fp16 subnormals are produced
 * and read exactly. */

static inline SA1B_HD uint32_t tr_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline SA1B_HD float tr_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline SA1B_HD uint16_t tr_f32_to_bf16(float f)
{
    uint32_t u = tr_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline SA1B_HD float tr_bf16_to_f32(uint16_t h) { return tr_bits_f32((uint32_t)h << 16); }

static inline SA1B_HD uint16_t tr_f32_to_f16(float f)
{
    uint32_t u = tr_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (or inf): infinity */
    if (a >= 0x38800000u) {                                   /* normal: >= 2^-14 */
        uint32_t r = a - 0x38000000u;                         /* exponent bias 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= 0x33000000u) return sign; /* <= 2^-25 (half the smallest subnormal, a tie to 0) */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* value in units of 2^-24 is m >> shift */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline SA1B_HD float tr_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (e == 0x1fu) return tr_bits_f32(sign | 0x7f800000u | (mant << 13));
    if (e) return tr_bits_f32(sign | ((e + 112u) << 23) | (mant << 13));
    float v = (float)mant * 5.9604644775390625e-8f; /* mant * 2^-24, exact */
    return tr_bits_f32(tr_f32_bits(v) | sign);
}

/* x rounded to the storage precision prec, returned as fp32 (exact). */
static inline SA1B_HD float tr_round_prec(float x, int prec)
{
    if (prec == TR_PREC_BF16) return tr_bf16_to_f32(tr_f32_to_bf16(x));
    if (prec == TR_PREC_FP16) return tr_f16_to_f32(tr_f32_to_f16(x));
    return x;
}

/* Storage form of x (prec BF16 or FP16) and back. */
static inline SA1B_HD uint16_t tr_to_16(float x, int prec)
{
    return prec == TR_PREC_FP16 ? tr_f32_to_f16(x) : tr_f32_to_bf16(x);
}

static inline SA1B_HD float tr_from_16(uint16_t h, int prec)
{
    return prec == TR_PREC_FP16 ? tr_f16_to_f32(h) : tr_bf16_to_f32(h);
}


#endif
