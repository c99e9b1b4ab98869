/*
 * ycc.c - YCbCr to RGB (JFIF), for the letterbox's planar path.
 *
 * Implements: ycc_internal.h.  The integers are libjpeg's (jdcolor.c's
 * fixed-point constants, scaled by 2^16 and rounded):
 *   R = Y + floor((91881 Cr' + 2^15) / 2^16)
 *   G = Y + floor((-22554 Cb' - 46802 Cr' + 2^15) / 2^16)
 *   B = Y + floor((116130 Cb' + 2^15) / 2^16)
 * with Cb' = Cb - 128, Cr' = Cr - 128, each clamped to 0..255; so a pixel
 * whose Y, Cb and Cr are libjpeg's gets libjpeg's RGB.  The portable C code
 * is the reference: floor division by 2^16 with a bias that keeps the
 * dividend non-negative (|sum| < 2^24).  The AVX2 kernel (run-time
 * dispatch) computes the same integers 16 pixels at a time: 32-bit
 * products, arithmetic shifts (a floor), saturating packs (the clamp).
 */
#include "ycc_internal.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(IMAGE_NO_SIMD)
#define YCC_HAVE_AVX2 1
#include <immintrin.h>
#endif

enum { FIX_CR_R = 91881, FIX_CB_G = 22554, FIX_CR_G = 46802, FIX_CB_B = 116130 };

/* floor(v / 2^16) for |v| < 2^24, without shifting a negative number */
static inline int floor16(int32_t v)
{
    return (int)(((uint32_t)(v + (256 << 16))) >> 16) - 256;
}

static inline uint8_t clamp255(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void ycc_portable(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *rgb,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const int Y = y[i], u = (int)cb[i] - 128, v = (int)cr[i] - 128;
        rgb[3 * i] = clamp255(Y + floor16(FIX_CR_R * v + (1 << 15)));
        rgb[3 * i + 1] = clamp255(Y + floor16(-FIX_CB_G * u - FIX_CR_G * v + (1 << 15)));
        rgb[3 * i + 2] = clamp255(Y + floor16(FIX_CB_B * u + (1 << 15)));
    }
}

#ifdef YCC_HAVE_AVX2

static int ycc_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* 8 values: Y + (a >> 16), a the 32-bit sums, as 32-bit lanes */
__attribute__((target("avx2"))) static inline __m256i add_shifted(__m256i Y, __m256i a)
{
    return _mm256_add_epi32(Y, _mm256_srai_epi32(a, 16));
}

/* 16 values of one channel (two sets of 8 in 32-bit lanes) clamped to
 * bytes, in order, in the low 128 bits */
__attribute__((target("avx2"))) static inline __m128i pack16(__m256i lo, __m256i hi)
{
    __m256i w = _mm256_packs_epi32(lo, hi);          /* lanes: lo0-3 hi0-3 | lo4-7 hi4-7 */
    w = _mm256_permute4x64_epi64(w, 0xD8);           /* lo0-7 | hi0-7 */
    __m128i a = _mm256_castsi256_si128(w), b = _mm256_extracti128_si256(w, 1);
    return _mm_packus_epi16(a, b);                   /* 16 bytes, clamped 0..255 */
}

/* One channel's 8 values from Y and the chroma products */
#define YCC_LANES(P, OFF)                                                                         \
    __m256i Y##P = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(y + i + OFF)));     \
    __m256i U##P = _mm256_sub_epi32(                                                          \
        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(cb + i + OFF))), c128);        \
    __m256i V##P = _mm256_sub_epi32(                                                          \
        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(cr + i + OFF))), c128);        \
    __m256i R##P = add_shifted(Y##P, _mm256_add_epi32(_mm256_mullo_epi32(V##P, kr), half));   \
    __m256i G##P = add_shifted(                                                               \
        Y##P, _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(U##P, kgu),                \
                                                _mm256_mullo_epi32(V##P, kgv)),               \
                               half));                                                        \
    __m256i B##P = add_shifted(Y##P, _mm256_add_epi32(_mm256_mullo_epi32(U##P, kb), half))

__attribute__((target("avx2"))) static void ycc_avx2(const uint8_t *y, const uint8_t *cb,
                                                     const uint8_t *cr, uint8_t *rgb, size_t n)
{
    const __m256i c128 = _mm256_set1_epi32(128), half = _mm256_set1_epi32(1 << 15);
    const __m256i kr = _mm256_set1_epi32(FIX_CR_R), kgu = _mm256_set1_epi32(-FIX_CB_G),
                  kgv = _mm256_set1_epi32(-FIX_CR_G), kb = _mm256_set1_epi32(FIX_CB_B);
    /* byte k of the 48 interleaved bytes is channel k % 3 of pixel k / 3:
     * each 16-byte part gathers its bytes from R, G and B (-1: zero) */
#define S(a, b, c, d, e, f, g, h, i_, j, k, l, m, o, p, q)                                      \
    _mm_setr_epi8(a, b, c, d, e, f, g, h, i_, j, k, l, m, o, p, q)
    const __m128i r0 = S(0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1, 5);
    const __m128i g0 = S(-1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1);
    const __m128i b0 = S(-1, -1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1);
    const __m128i r1 = S(-1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10, -1);
    const __m128i g1 = S(5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10);
    const __m128i b1 = S(-1, 5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1);
    const __m128i r2 = S(-1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1, -1);
    const __m128i g2 = S(-1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1);
    const __m128i b2 = S(10, -1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15);
#undef S
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        YCC_LANES(a, 0);
        YCC_LANES(b, 8);
        const __m128i R = pack16(Ra, Rb), G = pack16(Ga, Gb), B = pack16(Ba, Bb);
        uint8_t *o = rgb + 3 * i;
        _mm_storeu_si128((__m128i *)o, _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(R, r0),
                                                                 _mm_shuffle_epi8(G, g0)),
                                                    _mm_shuffle_epi8(B, b0)));
        _mm_storeu_si128((__m128i *)(o + 16),
                         _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(R, r1), _mm_shuffle_epi8(G, g1)),
                                      _mm_shuffle_epi8(B, b1)));
        _mm_storeu_si128((__m128i *)(o + 32),
                         _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(R, r2), _mm_shuffle_epi8(G, g2)),
                                      _mm_shuffle_epi8(B, b2)));
    }
    ycc_portable(y + i, cb + i, cr + i, rgb + 3 * i, n - i);
}
#undef YCC_LANES

#else

static int ycc_has_avx2(void)
{
    return 0;
}

#endif

int ycc_rgb_supported(int impl)
{
    switch (impl) {
    case YCC_AUTO:
    case YCC_PORTABLE: return 1;
    case YCC_AVX2: return ycc_has_avx2();
    default: return 0;
    }
}

int ycc_rgb_row(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *rgb, size_t n,
                int impl)
{
    if (!ycc_rgb_supported(impl)) return -1;
    if (impl == YCC_AUTO) impl = ycc_has_avx2() ? YCC_AVX2 : YCC_PORTABLE;
#ifdef YCC_HAVE_AVX2
    if (impl == YCC_AVX2) {
        ycc_avx2(y, cb, cr, rgb, n);
        return 0;
    }
#endif
    ycc_portable(y, cb, cr, rgb, n);
    return 0;
}
