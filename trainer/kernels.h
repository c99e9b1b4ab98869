/*
 * kernels.h - the element-wise and per-row math of the trainer, written once
 * as static inline functions that compile as C (CPU backend, tests) and as
 * CUDA device code (SA1B_HD expands to __host__ __device__ under nvcc), so
 * the CPU tests exercise the exact arithmetic the GPU backend runs.
 *
 * Implements: exact GELU and its derivative, ReLU, LayerNorm of one row
 * (statistics in double, biased variance), scaled softmax of one row and its
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

#ifdef __CUDACC__
#define SA1B_HD __host__ __device__
#else
#define SA1B_HD
#endif

#define TR_SQRT1_2 0.70710678118654752440
#define TR_INV_SQRT_2PI 0.39894228040143267794

/* Exact GELU: x/2 * (1 + erf(x/sqrt 2)). */
static inline SA1B_HD float tr_gelu(float x)
{
    return 0.5f * x * (1.0f + erff(x * (float)TR_SQRT1_2));
}

/* d gelu / dx = Phi(x) + x * phi(x). */
static inline SA1B_HD float tr_gelu_grad(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * (float)TR_SQRT1_2));
    float pdf = (float)TR_INV_SQRT_2PI * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

static inline SA1B_HD float tr_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* LayerNorm of one row of n: out = (x - mean) * rstd * w + b, with the
 * biased variance; mean and rstd are returned for the backward pass. */
static inline SA1B_HD void tr_layernorm_row(float *out /* [n] */, float *mean_out, float *rstd_out,
                                            const float *x /* [n] */, const float *w /* [n] */,
                                            const float *b /* [n] */, int n, float eps)
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
    float m = (float)mean;
    float rstd = (float)(1.0 / sqrt(v + (double)eps));
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
 * Precision of stored activations (TR_PREC_*): fp32, bf16 (8 exponent bits,
 * 7 mantissa bits) or IEEE 754 binary16 (5 exponent, 10 mantissa bits).
 * Conversions from fp32 round to nearest, ties to even; overflow gives
 * infinity; NaN stays NaN (quiet, sign kept); fp16 subnormals are produced
 * and read exactly. */
enum { TR_PREC_FP32 = 0, TR_PREC_BF16 = 1, TR_PREC_FP16 = 2 };

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
