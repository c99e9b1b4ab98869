/*
 * shard_runs.c - the run coding of version-2 shard masks (sa1b-shard(5)):
 * an R x R mask of bytes to varint runs (row-major, the first run of 0s
 * possibly empty) and back, validating every byte of untrusted input.
 *
 * Row-major, not COCO's column-major: the loader's batch masks are
 * row-major, so a run becomes one memset into the batch, and the point
 * sampler's per-row counts come from clipping runs to rows.
 */
#include "sa1b_shard.h"
#include "shard_format.h"

#include <string.h>

typedef unsigned long long ull;

uint64_t sa1b_shard_runs_bound(uint32_t R) { return (uint64_t)R * R + 6; }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
#define RUNS_WORDS 1
#endif
#if defined(__SSE2__) && defined(__GNUC__)
#define RUNS_SSE2 1
#include <emmintrin.h>
#endif

/* First k in [k, n) with bytes[k] != 0 (want_zero = 0) or == 0
 * (want_zero = 1); n when none.  With SSE2 64 bytes at a time while none
 * of them is wanted (masks are mostly long runs), then 16; eight at a time
 * without; one at a time for the tail. */
static uint64_t runs_next_change(const uint8_t *b, uint64_t k, uint64_t n, int want_zero)
{
#ifdef RUNS_SSE2
    const __m128i zero = _mm_setzero_si128();
    for (; k + 64 <= n; k += 64) {
        __m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)(b + k));
        __m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(b + k + 16));
        __m128i v2 = _mm_loadu_si128((const __m128i *)(const void *)(b + k + 32));
        __m128i v3 = _mm_loadu_si128((const __m128i *)(const void *)(b + k + 48));
        /* a zero byte among them: their minimum has one; a nonzero: their or */
        __m128i m = want_zero ? _mm_min_epu8(_mm_min_epu8(v0, v1), _mm_min_epu8(v2, v3))
                              : _mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3));
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(m, zero));
        if (want_zero ? z != 0 : z != 0xFFFFu) break;
    }
    for (; k + 16 <= n; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + k));
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero)); /* bit i: byte i is 0 */
        unsigned hit = want_zero ? z : z ^ 0xFFFFu;
        if (hit) return k + (uint64_t)__builtin_ctz(hit);
    }
#elif defined(RUNS_WORDS)
    const uint64_t lo7 = UINT64_C(0x7F7F7F7F7F7F7F7F), hi = UINT64_C(0x8080808080808080);
    for (; k + 8 <= n; k += 8) {
        uint64_t x;
        memcpy(&x, b + k, 8);
        uint64_t nonzero = (((x & lo7) + lo7) | x) & hi; /* high bit of each nonzero byte */
        uint64_t hit = want_zero ? ~nonzero & hi : nonzero;
        if (hit) return k + (uint64_t)(__builtin_ctzll(hit) >> 3);
    }
#endif
    for (; k < n; k++)
        if ((b[k] == 0) == want_zero) return k;
    return n;
}

size_t sa1b_shard_encode_runs(const uint8_t *bytes, uint32_t R, uint8_t *out)
{
    const uint64_t n = (uint64_t)R * R;
    uint8_t *p = out + 5; /* the count goes in front once known */
    uint32_t count = 0;
    int one = 0;
    for (uint64_t k = 0; k < n || count == 0; one ^= 1, count++) {
        uint64_t next = runs_next_change(bytes, k, n, one);
        p += shard_varint_put(p, (uint32_t)(next - k));
        k = next;
    }
    uint8_t head[5];
    size_t h = shard_varint_put(head, count), body = (size_t)(p - (out + 5));
    memmove(out + h, out + 5, body);
    memcpy(out, head, h);
    return h + body;
}

int sa1b_shard_parse_runs(const uint8_t *data, size_t len, uint32_t R, uint32_t *runs,
                          size_t cap, size_t *n_runs, sa1b_error *err)
{
    shard_runs_it it;
    SA1B_FORWARD(shard_runs_begin(&it, data, len, (uint64_t)R * R, err));
    if (it.left > cap)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%u runs, room for %zu", it.left, cap);
    size_t n = 0;
    uint32_t v;
    while (it.left) {
        SA1B_FORWARD(shard_runs_next(&it, &v, err));
        runs[n++] = v;
    }
    SA1B_FORWARD(shard_runs_end(&it, err));
    *n_runs = n;
    return SA1B_OK;
}

/* Decodes the runs straight into out[R*R] (0/1 bytes); all zero when they
 * do not validate. */
int shard_runs_decode(const uint8_t *data, size_t len, uint32_t R, uint8_t *out,
                      sa1b_error *err)
{
    shard_runs_it it;
    uint64_t pos = 0;
    uint32_t v;
    int rc = shard_runs_begin(&it, data, len, (uint64_t)R * R, err);
    for (int one = 0; !rc && it.left; one ^= 1) {
        if ((rc = shard_runs_next(&it, &v, err))) break;
        memset(out + pos, one, v);
        pos += v;
    }
    if (!rc) rc = shard_runs_end(&it, err);
    if (rc) memset(out, 0, (size_t)R * R);
    return rc;
}

size_t sa1b_shard_encode_coco_runs(const uint32_t *cnts, size_t n, uint8_t *out)
{
    uint8_t *p = out + 5; /* the count goes in front once known */
    uint32_t count = 0;   /* runs written; run k holds value k % 2 */
    uint64_t pend = 0;    /* the last run, not written yet (from cnts[0] on) */
    for (size_t i = 0; i < n; i++) {
        if (i == 0) {
            pend = cnts[0]; /* the background run, possibly empty */
        } else if (cnts[i] != 0) {
            if ((i % 2) == (count % 2)) { /* the value of pend: an empty run between */
                pend += cnts[i];
            } else {
                p += shard_varint_put(p, (uint32_t)pend);
                count++;
                pend = cnts[i];
            }
        }
    }
    p += shard_varint_put(p, (uint32_t)pend);
    count++;
    uint8_t head[5];
    size_t h = shard_varint_put(head, count), body = (size_t)(p - (out + 5));
    memmove(out + h, out + 5, body);
    memcpy(out, head, h);
    return h + body;
}

int shard_runs_decode_source(const uint8_t *data, size_t len, uint32_t w, uint32_t h,
                             uint8_t *out, sa1b_error *err)
{
    shard_runs_it it;
    uint64_t pos = 0;
    uint32_t v;
    memset(out, 0, (size_t)w * h);
    int rc = shard_runs_begin(&it, data, len, (uint64_t)w * h, err);
    for (int one = 0; !rc && it.left; one ^= 1, pos += v) {
        if ((rc = shard_runs_next(&it, &v, err))) break;
        for (uint64_t k = pos; one && k < pos + v; k++) /* column-major to row-major */
            out[(k % h) * w + k / h] = 1;
    }
    if (!rc) rc = shard_runs_end(&it, err);
    if (rc) memset(out, 0, (size_t)w * h);
    return rc;
}
