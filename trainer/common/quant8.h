/*
 * quant8.h - block-wise dynamic 8-bit quantisation of the AdamW moments
 * (the scheme of bitsandbytes' 8-bit optimizers, written from its
 * description) and the 8-bit AdamW update of one block, as static inline
 * functions usable from C and CUDA (kernels.h's SA1B_HD).
 *
 * The dynamic map: 256 sorted code values in [-1, 1] (signed) or [0, 1]
 * (unsigned).  Besides 0 and 1, magnitudes come in 7 decades 10^(i-6),
 * i = 0..6, and decade i holds the midpoints of an even split of
 * [0.1, 1] * 10^(i-6) into 2^i (signed: one sign bit) or 2^(i+1)
 * (unsigned) intervals: small values keep a relative precision, large ones
 * an absolute one.  A block of `block` values x is stored as its absmax
 * a = max |x| (fp32) and per value the code whose map value is nearest to
 * x / a; it is read back as map[code] * a.
 *
 * The update (tr_adamw8bit_block) dequantises a block's m and v, runs the
 * fp32 AdamW element update of kernels.h on them, and requantises with the
 * block's new absmax: the math is fp32, only the storage is 8-bit.  A
 * positive v is never stored as zero (tr_q8_encode_v).
 */
#ifndef SA1B_TRAINER_QUANT8_H
#define SA1B_TRAINER_QUANT8_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

#define TR_Q8_MAX_BLOCK 4096

/* Fills map[256] (ascending) with the signed (is_signed 1) or unsigned map. */
static inline void tr_q8_map(float *map, int is_signed)
{
    int n = 0;
    map[n++] = 0.0f;
    map[n++] = 1.0f;
    for (int i = 0; i < 7; i++) {
        int parts = is_signed ? 1 << i : 1 << (i + 1);
        double scale = pow(10.0, (double)(i - 6));
        for (int j = 0; j < parts; j++) {
            double lo = 0.1 + 0.9 * j / parts, hi = 0.1 + 0.9 * (j + 1) / parts;
            double v = scale * 0.5 * (lo + hi);
            map[n++] = (float)v;
            if (is_signed) map[n++] = (float)-v;
        }
    }
    /* insertion sort: 256 values, once */
    for (int i = 1; i < n; i++) {
        float x = map[i];
        int j = i - 1;
        while (j >= 0 && map[j] > x) {
            map[j + 1] = map[j];
            j--;
        }
        map[j + 1] = x;
    }
}

/* Code of the map value nearest to x (ties to the lower code). */
static inline SA1B_HD uint8_t tr_q8_encode(const float *map, float x)
{
    if (!(x > map[0])) return 0; /* also NaN */
    if (x >= map[255]) return 255;
    int lo = 0; /* branch-free bisection: lo = number of map values < x, in 1..255 */
    for (int h = 128; h > 0; h >>= 1) lo += map[lo + h - 1] < x ? h : 0;
    return (uint8_t)(x - map[lo - 1] <= map[lo] - x ? lo - 1 : lo);
}

/* tr_q8_encode for the second moment (unsigned map): a positive x never
 * gets code 0, it gets at least the smallest positive code.  A v that
 * rounds to zero while its m does not makes the update m / (sqrt(v) + eps)
 * huge for small eps: the zero-point problem of low-bit second moments
 * (Li et al., "Memory Efficient Optimizers with 4-bit States", 2023),
 * which bitsandbytes' map leaves open.  Overstating a tiny v instead only
 * shortens that element's step. */
static inline SA1B_HD uint8_t tr_q8_encode_v(const float *map, float x)
{
    uint8_t c = tr_q8_encode(map, x);
    return c == 0 && x > 0.0f ? (uint8_t)1 : c;
}

/* Quantises x[n] (n <= TR_Q8_MAX_BLOCK): codes q[n], returns the absmax. */
static inline SA1B_HD float tr_q8_quantize_block(const float *map, const float *x, uint8_t *q, size_t n)
{
    float a = 0.0f;
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    float inv = a > 0.0f ? 1.0f / a : 0.0f;
    for (size_t i = 0; i < n; i++) q[i] = tr_q8_encode(map, x[i] * inv);
    return a;
}

static inline SA1B_HD void tr_q8_dequantize_block(const float *map, const uint8_t *q, float a, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = map[q[i]] * a;
}

/* 8-bit AdamW over one block of n <= TR_Q8_MAX_BLOCK elements: w[n], g[n],
 * codes mq/vq[n], absmax *ma / *va; qm the signed map (m), qv the unsigned
 * one (v).  Same element math as tr_adamw_elem. */
static inline SA1B_HD void tr_adamw8bit_block(float *w, uint8_t *mq, uint8_t *vq, float *ma, float *va,
                                              const float *qm, const float *qv, const float *g, size_t n,
                                              float lr, float beta1, float beta2, float eps, float wd,
                                              float bc1, float bc2)
{
    float m[TR_Q8_MAX_BLOCK], v[TR_Q8_MAX_BLOCK];
    tr_q8_dequantize_block(qm, mq, *ma, m, n);
    tr_q8_dequantize_block(qv, vq, *va, v, n);
    float am = 0.0f, av = 0.0f;
    for (size_t i = 0; i < n; i++) {
        tr_adamw_elem(&w[i], &m[i], &v[i], g[i], lr, beta1, beta2, eps, wd, bc1, bc2);
        am = fmaxf(am, fabsf(m[i]));
        av = fmaxf(av, fabsf(v[i]));
    }
    /* what tr_q8_quantize_block does, with four independent searches in flight */
    float im = am > 0.0f ? 1.0f / am : 0.0f, iv = av > 0.0f ? 1.0f / av : 0.0f;
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint8_t a0 = tr_q8_encode(qm, m[i] * im), a1 = tr_q8_encode(qm, m[i + 1] * im);
        uint8_t b0 = tr_q8_encode_v(qv, v[i] * iv), b1 = tr_q8_encode_v(qv, v[i + 1] * iv);
        mq[i] = a0, mq[i + 1] = a1, vq[i] = b0, vq[i + 1] = b1;
    }
    for (; i < n; i++) mq[i] = tr_q8_encode(qm, m[i] * im), vq[i] = tr_q8_encode_v(qv, v[i] * iv);
    *ma = am;
    *va = av;
}

#endif
