/*
 * test-train-mem-a-half.c - the 16-bit conversions of trainer/common/kernels.h:
 * every bf16 and fp16 value round-trips exactly, fp32 -> 16-bit rounds to
 * nearest with ties to even (checked against a brute-force nearest search
 * over the table of all finite 16-bit values, on edge cases, every midpoint
 * between neighbours and random bit patterns), overflow gives infinity,
 * NaN stays NaN with its sign, subnormals are exact.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernels.h"
#include "tap.h"

/* sorted non-negative finite values of a format, with their codes */
typedef struct table {
    double v[0x8000];
    uint16_t code[0x8000];
    int n;
} table;

static void build(table *t, int prec)
{
    t->n = 0;
    for (uint32_t h = 0; h < 0x8000; h++) {
        float f = tr_from_16((uint16_t)h, prec);
        if (!isfinite(f)) continue;
        t->v[t->n] = f;
        t->code[t->n] = (uint16_t)h;
        t->n++;
    }
    /* codes of non-negative values are monotone: already sorted */
}

/* reference rounding of a finite float: nearest table value, ties to even
 * code; beyond the largest value + half an ulp -> infinity */
static uint16_t ref_round(const table *t, float f, int prec)
{
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    uint16_t inf = prec == TR_PREC_FP16 ? 0x7c00 : 0x7f80;
    int n = t->n;
    double top = t->v[n - 1], ulp = top - t->v[n - 2];
    if (a >= top + ulp / 2) {
        if (a == top + ulp / 2 && !(t->code[n - 1] & 1)) return (uint16_t)(sign | t->code[n - 1]);
        return (uint16_t)(sign | inf);
    }
    int lo = 0, hi = n - 1; /* v[lo] <= a < v[hi] or a == top */
    if (a >= top) return (uint16_t)(sign | t->code[n - 1]);
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (t->v[mid] <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - t->v[lo], dh = t->v[hi] - a;
    uint16_t c;
    if (dl < dh) c = t->code[lo];
    else if (dh < dl) c = t->code[hi];
    else c = (t->code[lo] & 1) ? t->code[hi] : t->code[lo];
    return (uint16_t)(sign | c);
}

static uint64_t rng_state = 0x1234567890abcdefull;
static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void check_format(int prec, const char *name)
{
    static table t;
    build(&t, prec);
    char msg[160];
    /* every 16-bit code round-trips (NaNs stay NaN with their sign) */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = tr_from_16((uint16_t)h, prec);
        uint16_t back = tr_to_16(f, prec);
        if (isnan(f)) {
            if (!isnan(tr_from_16(back, prec)) || (back & 0x8000) != (h & 0x8000)) bad++;
        } else if (back != h) {
            bad++;
        }
    }
    snprintf(msg, sizeof msg, "%s: all 65536 codes round-trip through fp32", name);
    tap_is_int(bad, 0, msg);

    /* midpoints between neighbours (ties), and one float either side */
    int bad_tie = 0, bad_near = 0;
    for (int i = 0; i + 1 < t.n; i++) {
        double mid = (t.v[i] + t.v[i + 1]) / 2;
        float fm = (float)mid;
        if ((double)fm != mid) continue; /* not representable in fp32 (never for these formats) */
        for (int s = 0; s < 2; s++) {
            float x = s ? -fm : fm;
            if (tr_to_16(x, prec) != ref_round(&t, x, prec)) bad_tie++;
            float up = nextafterf(x, INFINITY), dn = nextafterf(x, -INFINITY);
            if (tr_to_16(up, prec) != ref_round(&t, up, prec)) bad_near++;
            if (tr_to_16(dn, prec) != ref_round(&t, dn, prec)) bad_near++;
        }
    }
    snprintf(msg, sizeof msg, "%s: every tie between neighbours rounds to even", name);
    tap_is_int(bad_tie, 0, msg);
    snprintf(msg, sizeof msg, "%s: the floats next to every tie round to the nearer neighbour", name);
    tap_is_int(bad_near, 0, msg);

    /* random bit patterns (finite) against the reference */
    int bad_rand = 0;
    for (int i = 0; i < 300000; i++) {
        uint32_t u = rnd32();
        if (i % 3 == 0) u = (u & 0x807fffffu) | ((uint32_t)(100 + rnd32() % 60) << 23); /* near the range */
        float f = tr_bits_f32(u);
        if (!isfinite(f)) continue;
        if (tr_to_16(f, prec) != ref_round(&t, f, prec)) bad_rand++;
    }
    snprintf(msg, sizeof msg, "%s: 300000 random floats round to nearest even", name);
    tap_is_int(bad_rand, 0, msg);

    /* specials */
    uint16_t inf = prec == TR_PREC_FP16 ? 0x7c00 : 0x7f80;
    snprintf(msg, sizeof msg, "%s: +inf, -inf", name);
    tap_ok(tr_to_16(INFINITY, prec) == inf && tr_to_16(-INFINITY, prec) == (0x8000 | inf), msg);
    snprintf(msg, sizeof msg, "%s: NaN stays NaN, sign kept", name);
    tap_ok(isnan(tr_from_16(tr_to_16(NAN, prec), prec)) && isnan(tr_from_16(tr_to_16(-NAN, prec), prec)) &&
               (tr_to_16(-NAN, prec) & 0x8000) && isnan(tr_round_prec(tr_bits_f32(0x7f800001u), prec)),
           msg);
    snprintf(msg, sizeof msg, "%s: +0 and -0 keep their sign", name);
    tap_ok(tr_to_16(0.0f, prec) == 0 && tr_to_16(-0.0f, prec) == 0x8000, msg);
    snprintf(msg, sizeof msg, "%s: FLT_MAX overflows to infinity", name);
    tap_ok(isinf(tr_round_prec(3.4028235e38f, prec)), msg);
}

int main(void)
{
    check_format(TR_PREC_BF16, "bf16");
    check_format(TR_PREC_FP16, "fp16");
    /* hand-picked values */
    tap_ok(tr_f32_to_f16(65504.0f) == 0x7bff, "fp16: 65504 is the largest finite");
    tap_ok(tr_f32_to_f16(65519.996f) == 0x7bff, "fp16: just below 65520 rounds down to 65504");
    tap_ok(tr_f32_to_f16(65520.0f) == 0x7c00, "fp16: 65520 (the tie above 65504) rounds to infinity");
    tap_ok(tr_f32_to_f16(5.9604645e-8f) == 0x0001, "fp16: 2^-24 is the smallest subnormal");
    tap_ok(tr_f32_to_f16(2.9802322e-8f) == 0x0000, "fp16: 2^-25 (a tie) rounds to zero");
    tap_ok(tr_f32_to_f16(2.9802326e-8f) == 0x0001, "fp16: just above 2^-25 rounds up to 2^-24");
    tap_ok(tr_f32_to_f16(8.940697e-8f) == 0x0002, "fp16: 1.5 * 2^-24 (a tie) rounds to even 2");
    tap_ok(tr_f32_to_f16((float)(1023.5 * 5.9604644775390625e-8)) == 0x0400, "fp16: the tie below 2^-14 rounds up into the normals");
    tap_ok(tr_f32_to_f16((float)(1023.0 * 5.9604644775390625e-8)) == 0x03ff, "fp16: the largest subnormal is exact");
    tap_ok(tr_f16_to_f32(0x3c00) == 1.0f && tr_f16_to_f32(0xc000) == -2.0f, "fp16: 1 and -2 decode");
    tap_ok(tr_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00, "fp16: 1 + 2^-11 (tie) rounds to even 1");
    tap_ok(tr_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "fp16: 1 + 3 * 2^-11 (tie) rounds to even");
    tap_ok(tr_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80, "bf16: 1 + 2^-8 (tie) rounds to even 1");
    tap_ok(tr_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82, "bf16: 1 + 3 * 2^-8 (tie) rounds to even");
    tap_ok(tr_f32_to_bf16(tr_bits_f32(0x00000001u)) == 0x0000, "bf16: the smallest fp32 subnormal rounds to 0");
    tap_ok(tr_f32_to_bf16(tr_bits_f32(0x00018000u)) == 0x0002, "bf16: fp32 subnormal tie rounds to even");
    tap_ok(tr_f32_to_bf16(3.3895314e38f) == 0x7f7f, "bf16: the largest finite bf16 stays");
    tap_ok(tr_f32_to_bf16(tr_bits_f32(0x7f7f8000u)) == 0x7f80, "bf16: the tie above the largest goes to inf");
    tap_ok(tr_bf16_to_f32(0x3f80) == 1.0f, "bf16: 1 decodes");
    return tap_done();
}
