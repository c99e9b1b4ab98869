/*
 * loader.c - the prefetching loader of sa1b_loader.h: a scheduler that cuts
 * the (seed, epoch) permutation into per-rank batches, a pool of worker
 * threads that fill batch rows (one image per job) into at most `depth`
 * buffers from the caller's allocator, and the in-order delivery with the
 * skip-or-stop protocol for damaged samples.
 *
 * Locking: one mutex guards the scheduler, the buffer states and the
 * counters; jobs run unlocked and write only their own row of a buffer that
 * no one else touches until it is READY.  Two condition variables: `work`
 * (workers wait for a free buffer or stop) and `ready` (the consumer waits
 * for the batch it is due to deliver).
 */
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(LOADER_NO_SIMD)
#define LD_HAVE_AVX2 1
#include <immintrin.h>
#endif

#include "nt_store.h"
#include "rng.h"
#include "sa1b_image.h"
#include "sa1b_loader.h"
#include "sa1b_manifest.h"
#include "sa1b_shard.h"
#include "shard_format.h"

enum { BUF_FREE = 0, BUF_FILLING, BUF_READY, BUF_HELD };

typedef struct ld_shard {
    sa1b_shard *sh;
    char *path;
    uint64_t first; /* global number of its first image */
    uint64_t n;
} ld_shard;

typedef struct ld_buf {
    sa1b_batch batch;   /* first member: a sa1b_batch * is an ld_buf * */
    void *mem;          /* from the allocator, L->batch_bytes */
    int state;
    uint64_t seq;       /* position in the stream of batches */
    uint64_t img_seed;  /* per-image generator seed of the batch's epoch */
    uint32_t assigned, done;
    uint64_t *gidx;     /* [B] global image number of each row (< count) */
    int *row_err;       /* [B] error code of each row, 0 when fine */
    sa1b_error *errs;   /* [B] */
    int reported;       /* row whose error was last reported, -1 */
    uint32_t padded;    /* rows of damaged samples left as padding (pad_damaged) */
} ld_buf;

typedef struct ld_worker {
    struct sa1b_loader *L;
    pthread_t tid;
    int started;
    sa1b_imgctx *img;
    uint8_t *rgb;       /* S*S*3 decode scratch (JPEG shards) */
    uint32_t *sel;      /* mask selection scratch */
    size_t sel_cap;
    uint32_t *rowcnt;   /* [R] set cells per mask row */
    uint8_t *tmprow;    /* R + 8 bytes */
    uint8_t *pixrow;    /* S * 3 bytes: one image row */
    uint64_t bytes;     /* bytes read, folded into L under the lock */
} ld_worker;

struct sa1b_loader {
    sa1b_loader_config cfg;
    sa1b_allocator alloc;
    ld_shard *shards;
    size_t n_shards;
    uint64_t N;
    uint32_t S, R, format, mask_bytes;
    uint32_t B, M, K, world, rank, threads, depth;
    uintptr_t page;

    /* batch layout: offsets of each array inside a buffer */
    size_t batch_bytes;
    size_t off_img, off_csize, off_masks, off_nm, off_nmt, off_valid, off_pts, off_lab, off_iid,
        off_mid, off_flip, off_shard, off_sidx;
    size_t img_row; /* bytes of one image row */
    float lut[3][256];
    uint64_t unpack[256]; /* byte -> 8 bytes of 0/1 (bit j -> byte j, little-endian) */
    int avx2;             /* the CPU has AVX2 and POPCNT: ld_mask_row_avx2 */
    uint64_t advised_pos; /* rank slice at this position (+1; 0: none) was advised ahead */
    uint64_t advised_epoch;

    pthread_mutex_t mu;
    pthread_cond_t work, ready;
    int mu_init;
    int stop;

    /* scheduler (guarded by mu) */
    uint32_t *perm;
    uint64_t perm_epoch;
    int have_perm;
    uint64_t s_epoch, s_pos;     /* next global batch to create */
    uint64_t next_seq;           /* seq of the next batch to create */
    int s_end;                   /* no more batches */
    uint64_t end_seq;
    uint64_t deliver_seq;
    int fatal;                   /* sticky error from a worker */
    sa1b_error fatal_err;

    ld_buf *bufs;                /* [depth] */
    ld_worker *workers;          /* [threads] */

    /* damaged-sample report of the last next() */
    int dmg;
    uint32_t dmg_shard;
    uint64_t dmg_index;
    int64_t dmg_id;

    /* stats (guarded by mu) */
    double t_open, consumer_wait, worker_idle;
    uint64_t st_images, st_batches, st_bytes;
};

static const float norm_mean[3] = {0.485f, 0.456f, 0.406f};
static const float norm_std[3] = {0.229f, 0.224f, 0.225f};

static double ld_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *ld_default_alloc(size_t size, void *ctx)
{
    (void)ctx;
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 64) != 0) return NULL;
    return p;
}

static void ld_default_free(void *p, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    free(p);
}

void sa1b_loader_config_init(sa1b_loader_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->batch_size = 1;
    cfg->max_masks = 1;
    cfg->points = 1;
    cfg->world = 1;
}

/* round(o * S / m) with halves up, at least 1 (the letterbox rule). */
static uint32_t ld_fit(uint32_t o, uint32_t m, uint32_t S)
{
    uint64_t v = (2 * (uint64_t)o * S + m) / (2 * (uint64_t)m);
    if (v < 1) v = 1;
    if (v > S) v = S;
    return (uint32_t)v;
}

/* ---- sizes ---------------------------------------------------------------- */

static int ld_add(size_t *total, size_t *off, uint64_t n, uint64_t elem)
{
    /* 64-byte aligned sub-array of n*elem bytes */
    if (elem && n > SIZE_MAX / elem) return -1;
    size_t bytes = (size_t)(n * elem);
    size_t start = (*total + 63) & ~(size_t)63;
    if (start < *total || bytes > SIZE_MAX - start - 64) return -1;
    *off = start;
    *total = start + bytes;
    return 0;
}

/* The layout of a batch buffer: the offsets of its 13 arrays (images,
 * content sizes, masks, mask counts, totals, valid, points, labels, image
 * ids, mask ids, flips, shards, shard indices), its image row and its
 * bytes; -1 when too large.  (sa1b_loader_batch_bytes_for: the same.) */
static int ld_sizes(uint64_t B, uint64_t M, uint64_t K, uint64_t S, uint64_t R, int normalize, size_t off[13],
                    size_t *img_row, size_t *bytes)
{
    size_t t = 0;
    uint64_t pix = S * S * 3; /* S <= 16384: no overflow */
    uint64_t img_elem = normalize ? 4 : 1;
    if (!R || !K || pix > SIZE_MAX / img_elem) return -1;
    *img_row = (size_t)(pix * img_elem);
    if (M > UINT64_MAX / (R * R) || M > UINT64_MAX / K / 2) return -1;
    if (ld_add(&t, &off[0], B, *img_row) || ld_add(&t, &off[1], B, 8) || ld_add(&t, &off[2], B, M * R * R) ||
        ld_add(&t, &off[3], B, 4) || ld_add(&t, &off[4], B, 4) || ld_add(&t, &off[5], B, M) ||
        ld_add(&t, &off[6], B, M * K * 8) || ld_add(&t, &off[7], B, M * K * 4) || ld_add(&t, &off[8], B, 8) ||
        ld_add(&t, &off[9], B, M * 8) || ld_add(&t, &off[10], B, 1) || ld_add(&t, &off[11], B, 4) ||
        ld_add(&t, &off[12], B, 8))
        return -1;
    *bytes = (t + 63) & ~(size_t)63;
    return 0;
}

size_t sa1b_loader_batch_bytes_for(uint32_t B, uint32_t M, uint32_t K, uint32_t S, uint32_t R, int normalize)
{
    size_t off[13], row, bytes;
    return ld_sizes(B, M, K, S, R, normalize, off, &row, &bytes) == 0 ? bytes : 0;
}

static int ld_layout(sa1b_loader *L, sa1b_error *err)
{
    size_t off[13];
    if (ld_sizes(L->B, L->M, L->K, L->S, L->R, L->cfg.normalize, off, &L->img_row, &L->batch_bytes) < 0) goto big;
    L->off_img = off[0], L->off_csize = off[1], L->off_masks = off[2], L->off_nm = off[3], L->off_nmt = off[4];
    L->off_valid = off[5], L->off_pts = off[6], L->off_lab = off[7], L->off_iid = off[8], L->off_mid = off[9];
    L->off_flip = off[10], L->off_shard = off[11], L->off_sidx = off[12];
    return SA1B_OK;
big:
    return sa1b_error_set(err, SA1B_ERANGE, -1, "loader: batch of B=%u M=%u K=%u S=%u R=%u too large",
                          L->B, L->M, L->K, L->S, L->R);
}

static void ld_bind(sa1b_loader *L, ld_buf *b)
{
    uint8_t *m = b->mem;
    sa1b_batch *o = &b->batch;
    o->B = L->B;
    o->M = L->M;
    o->K = L->K;
    o->S = L->S;
    o->R = L->R;
    o->normalized = L->cfg.normalize ? 1 : 0;
    o->images = m + L->off_img;
    o->content_size = (int32_t *)(void *)(m + L->off_csize);
    o->masks = m + L->off_masks;
    o->n_masks = (int32_t *)(void *)(m + L->off_nm);
    o->n_masks_total = (int32_t *)(void *)(m + L->off_nmt);
    o->valid = m + L->off_valid;
    o->points = (float *)(void *)(m + L->off_pts);
    o->labels = (int32_t *)(void *)(m + L->off_lab);
    o->image_ids = (int64_t *)(void *)(m + L->off_iid);
    o->mask_ids = (int64_t *)(void *)(m + L->off_mid);
    o->flipped = m + L->off_flip;
    o->shard = (uint32_t *)(void *)(m + L->off_shard);
    o->shard_index = (uint64_t *)(void *)(m + L->off_sidx);
}

/* ---- rows ----------------------------------------------------------------- */

static void ld_pad_masks(sa1b_loader *L, sa1b_batch *o, uint32_t b, uint32_t from)
{
    size_t RR = (size_t)L->R * L->R, MK = (size_t)L->M * L->K;
    for (uint32_t m = from; m < L->M; m++) {
        memset(o->masks + ((size_t)b * L->M + m) * RR, 0, RR);
        o->valid[(size_t)b * L->M + m] = 0;
        o->mask_ids[(size_t)b * L->M + m] = -1;
        for (uint32_t k = 0; k < L->K; k++) {
            size_t pk = (size_t)b * MK + (size_t)m * L->K + k;
            o->points[2 * pk] = 0.0f;
            o->points[2 * pk + 1] = 0.0f;
            o->labels[pk] = -1;
        }
    }
}

/* Row b beyond count: zero image, no masks, ids -1, labels -1. */
static void ld_pad_row(sa1b_loader *L, sa1b_batch *o, uint32_t b)
{
    memset((uint8_t *)o->images + (size_t)b * L->img_row, 0, L->img_row);
    o->content_size[2 * b] = 0;
    o->content_size[2 * b + 1] = 0;
    o->n_masks[b] = 0;
    o->n_masks_total[b] = 0;
    o->image_ids[b] = -1;
    o->flipped[b] = 0;
    o->shard[b] = 0;
    o->shard_index[b] = 0;
    ld_pad_masks(L, o, b, 0);
}

/* d[x] = s[w-1-x] for w RGB pixels.  Inner pixels move as 4-byte words
 * (the 4th byte is overwritten by the next pixel's store and read from
 * within the source row); the first and last pixels byte by byte so that
 * nothing outside d[0..3w) or s[0..3w) is touched. */
static void ld_reverse_rgb(uint8_t *d, const uint8_t *s, uint32_t w)
{
    if (w < 3) {
        for (uint32_t x = 0; x < w; x++) memcpy(d + 3 * x, s + 3 * (size_t)(w - 1 - x), 3);
        return;
    }
    memcpy(d, s + 3 * (size_t)(w - 1), 3);
    for (uint32_t x = 1; x + 1 < w; x++) {
        uint32_t v;
        memcpy(&v, s + 3 * (size_t)(w - 1 - x), 4);
        memcpy(d + 3 * (size_t)x, &v, 4);
    }
    memcpy(d + 3 * (size_t)(w - 1), s, 3);
}

#ifdef LD_HAVE_AVX2
/* ld_reverse_rgb with a byte shuffle (CPUs with AVX2): five pixels per
 * 16-byte load and store; the store's 16th byte lands on the next pixel,
 * which a later store writes.  Loads and stores stay inside s[0..3w) and
 * d[0..3w): the loop runs for x >= 1 and x + 6 <= w. */
__attribute__((target("avx2"))) static void ld_reverse_rgb_avx2(uint8_t *d, const uint8_t *s,
                                                                uint32_t w)
{
    const __m128i rev = _mm_setr_epi8(12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2, 15);
    memcpy(d, s + 3 * (size_t)(w - 1), 3);
    uint32_t x = 1;
    for (; x + 6 <= w; x += 5) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + 3 * (size_t)(w - 5 - x)));
        _mm_storeu_si128((__m128i *)(void *)(d + 3 * (size_t)x), _mm_shuffle_epi8(v, rev));
    }
    for (; x < w; x++) memcpy(d + 3 * (size_t)x, s + 3 * (size_t)(w - 1 - x), 3);
}

/* ld_reverse 32 bytes at a time (CPUs with AVX2). */
__attribute__((target("avx2"))) static void ld_reverse_avx2(uint8_t *dst, const uint8_t *src,
                                                            size_t n)
{
    const __m256i rev = _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15,
                                         14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + n - i - 32));
        v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, rev), 0x4E);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), v);
    }
    for (; i < n; i++) dst[i] = src[n - 1 - i];
}
#endif

/* Copies the w x h content at src (row stride sstride bytes, RGB) into the
 * image row, mirrored when flip, padding zero. */
static void ld_put_image(sa1b_loader *L, sa1b_batch *o, uint32_t b, const uint8_t *src,
                         size_t sstride, uint32_t w, uint32_t h, int flip, uint8_t *tmp)
{
    uint32_t S = L->S;
    if (!L->cfg.normalize) {
        uint8_t *out = (uint8_t *)o->images + (size_t)b * L->img_row;
        uint32_t y0 = 0;
        if (!flip && w == S && sstride == (size_t)S * 3) {
            /* full-width rows: one block */
            memcpy(out, src, (size_t)h * S * 3);
            y0 = h;
        }
        for (uint32_t y = y0; y < h; y++) {
            uint8_t *d = out + (size_t)y * S * 3;
            const uint8_t *s = src + (size_t)y * sstride;
            if (!flip) {
                memcpy(d, s, (size_t)w * 3);
            } else {
                /* the source row into the worker's scratch first (a forward
                 * copy from the map), then mirrored from L1 */
                memcpy(tmp, s, (size_t)w * 3);
#ifdef LD_HAVE_AVX2
                if (L->avx2)
                    ld_reverse_rgb_avx2(d, tmp, w);
                else
#endif
                    ld_reverse_rgb(d, tmp, w);
            }
            memset(d + (size_t)w * 3, 0, (size_t)(S - w) * 3);
        }
        if (h < S) memset(out + (size_t)h * S * 3, 0, (size_t)(S - h) * S * 3);
        return;
    }
    float *out = (float *)(void *)((uint8_t *)o->images + (size_t)b * L->img_row);
    size_t plane = (size_t)S * S;
    const float *l0 = L->lut[0], *l1 = L->lut[1], *l2 = L->lut[2];
    for (uint32_t y = 0; y < h; y++) {
        float *d0 = out + (size_t)y * S, *d1 = d0 + plane, *d2 = d1 + plane;
        const uint8_t *s = src + (size_t)y * sstride;
        if (!flip) {
            for (uint32_t x = 0; x < w; x++) {
                d0[x] = l0[s[3 * x]];
                d1[x] = l1[s[3 * x + 1]];
                d2[x] = l2[s[3 * x + 2]];
            }
        } else {
            for (uint32_t x = 0; x < w; x++) {
                const uint8_t *p = s + (size_t)(w - 1 - x) * 3;
                d0[x] = l0[p[0]];
                d1[x] = l1[p[1]];
                d2[x] = l2[p[2]];
            }
        }
        if (w < S) {
            memset(d0 + w, 0, (size_t)(S - w) * 4);
            memset(d1 + w, 0, (size_t)(S - w) * 4);
            memset(d2 + w, 0, (size_t)(S - w) * 4);
        }
    }
    if (h < S)
        for (int c = 0; c < 3; c++)
            memset(out + c * plane + (size_t)h * S, 0, (size_t)(S - h) * S * 4);
}

/* Bits set in v (SWAR: no libgcc call without -mpopcnt). */
static inline uint32_t ld_popcount64(uint64_t v)
{
    v = v - ((v >> 1) & UINT64_C(0x5555555555555555));
    v = (v & UINT64_C(0x3333333333333333)) + ((v >> 2) & UINT64_C(0x3333333333333333));
    v = (v + (v >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (uint32_t)((v * UINT64_C(0x0101010101010101)) >> 56);
}

/* Reverse copy: dst[i] = src[n-1-i], 8 bytes at a time. */
static void ld_reverse(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, src + n - i - 8, 8);
        v = __builtin_bswap64(v);
        memcpy(dst + i, &v, 8);
    }
    for (; i < n; i++) dst[i] = src[n - 1 - i];
}

#ifdef LD_HAVE_AVX2
/* ld_mask_row's R % 8 == 0 case with AVX2 and POPCNT: the same bytes and
 * count.  32 bits at a time become 32 bytes (each byte of the broadcast
 * word shuffled to its 8 lanes, tested against its bit); only chunks that
 * end within the row's R bytes of output (and so within its R / 8 bytes of
 * input) take this way, the rest goes through the table. */
__attribute__((target("avx2,popcnt"))) static uint32_t
ld_unpack_row_avx2(const uint64_t *unpack, const uint8_t *rb, uint32_t R, uint32_t wR,
                   uint8_t *dst)
{
    uint32_t nb = (wR + 7) / 8, full = wR / 8, i = 0, count = 0;
    for (; i + 8 <= full; i += 8) {
        uint64_t v;
        memcpy(&v, rb + i, 8);
        count += (uint32_t)__builtin_popcountll(v);
    }
    for (; i < full; i++) count += (uint32_t)__builtin_popcount(rb[i]);
    if (wR % 8) count += (uint32_t)__builtin_popcount(rb[full] & ((1u << (wR % 8)) - 1u));
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                          2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)UINT64_C(0x8040201008040201));
    const __m256i one = _mm256_set1_epi8(1);
    i = 0;
    for (; i + 4 <= nb && 8 * (size_t)i + 32 <= R; i += 4) {
        int32_t w;
        memcpy(&w, rb + i, 4);
        __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(w), shuf);
        v = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), one);
        _mm256_storeu_si256((__m256i *)(void *)(dst + 8 * (size_t)i), v);
    }
    for (; i < nb; i++) memcpy(dst + 8 * (size_t)i, &unpack[rb[i]], 8);
    return count;
}
#endif

#ifdef LD_HAVE_AVX2
/* A whole unflipped mask with R % 32 == 0: rows < hR unpacked into out
 * (R bytes apart) 32 columns at a time, the columns from wR on cleared by
 * masking the packed word before it is spread (so no second pass clears
 * them), the set cells of row y counted into rowcnt[y]; returns their sum.
 * The same bytes and counts as ld_mask_row row by row. */
__attribute__((target("avx2,popcnt"))) static uint64_t
ld_unpack_mask_avx2(const uint8_t *bits, uint32_t R, uint32_t wR, uint32_t hR, uint8_t *out,
                    uint32_t *rowcnt)
{
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                          2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)UINT64_C(0x8040201008040201));
    const __m256i one = _mm256_set1_epi8(1);
    uint64_t total = 0;
    for (uint32_t y = 0; y < hR; y++) {
        const uint8_t *rb = bits + (size_t)y * (R / 8);
        uint8_t *d = out + (size_t)y * R;
        uint32_t count = 0;
        for (uint32_t x = 0; x < R; x += 32) {
            uint32_t w;
            memcpy(&w, rb + x / 8, 4);
            w &= x + 32 <= wR ? UINT32_MAX : x >= wR ? 0 : (UINT32_C(1) << (wR - x)) - 1u;
            count += (uint32_t)__builtin_popcount(w);
            __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)w), shuf);
            v = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), one);
            _mm256_storeu_si256((__m256i *)(void *)(d + x), v);
        }
        rowcnt[y] = count;
        total += count;
    }
    return total;
}
#endif

/* Row y of a mask: unpacks the LSB-first packed bits of columns < wR into
 * out[0..R) as 0/1 bytes (mirrored within wR when flip), zero from wR on;
 * returns the number of set cells.  tmp: R + 8 bytes of scratch. */
static uint32_t ld_mask_row(const sa1b_loader *L, const uint8_t *bits, uint32_t y, uint32_t wR,
                            int flip, uint8_t *out, uint8_t *tmp)
{
    uint32_t R = L->R;
    uint8_t *dst = flip ? tmp : out;
    uint32_t count = 0;
#ifdef LD_HAVE_AVX2
    if (R % 8 == 0 && L->avx2) {
        count = ld_unpack_row_avx2(L->unpack, bits + (size_t)y * (R / 8), R, wR, dst);
    } else
#endif
    if (R % 8 == 0) {
        const uint8_t *rb = bits + (size_t)y * (R / 8);
        uint32_t nb = (wR + 7) / 8, full = wR / 8, i = 0;
        for (; i + 8 <= full; i += 8) {
            uint64_t v;
            memcpy(&v, rb + i, 8);
            count += ld_popcount64(v);
        }
        for (; i < full; i++) count += ld_popcount64(rb[i]);
        if (wR % 8) count += ld_popcount64(rb[full] & ((1u << (wR % 8)) - 1u));
        for (i = 0; i < nb; i++) memcpy(dst + 8 * (size_t)i, &L->unpack[rb[i]], 8);
    } else {
        size_t base = (size_t)y * R;
        for (uint32_t x = 0; x < wR; x++) {
            size_t k = base + x;
            uint8_t v = (uint8_t)((bits[k / 8] >> (k % 8)) & 1u);
            dst[x] = v;
            count += v;
        }
    }
    if (flip) {
#ifdef LD_HAVE_AVX2
        if (L->avx2)
            ld_reverse_avx2(out, tmp, wR);
        else
#endif
            ld_reverse(out, tmp, wR);
    }
    if (wR < R) memset(out + wR, 0, R - wR);
    return count;
}

/* A mask stored as runs (version 2) into out[R*R]: rows < hR hold the
 * cells of columns < wR (mirrored within wR when flip), zero elsewhere,
 * exactly as ld_mask_row leaves a packed mask; rowcnt[y] counts the set
 * cells of row y; returns their sum in *pos.  One memset per row piece of
 * a run of ones, nothing for the zeros but the clearing of the content.
 * Runs that do not validate are an error naming the mask. */
static int ld_mask_runs(uint32_t R, const sa1b_shard_mask_view *mv, uint32_t wR, uint32_t hR,
                        int flip, uint8_t *out, uint32_t *rowcnt, uint64_t *pos, sa1b_error *err)
{
    shard_runs_it it;
    uint32_t v;
    sa1b_error e;
    const uint64_t content = (uint64_t)hR * R;
    memset(out, 0, (size_t)content);
    memset(rowcnt, 0, (size_t)hR * sizeof *rowcnt);
    int rc = shard_runs_begin(&it, mv->bits, (size_t)mv->data_len, (uint64_t)R * R, &e);
    uint64_t k = 0, total = 0;
    for (int one = 0; !rc && it.left; one ^= 1, k += v) {
        if ((rc = shard_runs_next(&it, &v, &e))) break;
        if (!one) continue;
        uint64_t end = k + v < content ? k + v : content;
        for (uint64_t a = k; a < end;) { /* the piece of the run in row y */
            uint32_t y = (uint32_t)(a / R), x0 = (uint32_t)(a % R);
            uint64_t row_end = (uint64_t)y * R + R;
            uint32_t x1 = (uint32_t)((end < row_end ? end : row_end) - (uint64_t)y * R);
            if (x1 > wR) x1 = wR;
            if (x0 < x1) {
                uint8_t *row = out + (size_t)y * R;
                memset(row + (flip ? wR - x1 : x0), 1, x1 - x0);
                rowcnt[y] += x1 - x0;
                total += x1 - x0;
            }
            a = row_end;
        }
    }
    if (!rc) rc = shard_runs_end(&it, &e);
    if (rc)
        return sa1b_error_set(err, rc, (int64_t)mv->data_offset,
                              "mask row %llu runs at offset %llu: %s",
                              (unsigned long long)mv->index,
                              (unsigned long long)mv->data_offset, e.msg);
    *pos = total;
    return SA1B_OK;
}

/* A source-size mask (sa1b-shard --mask-size source) resampled to the
 * loader's R x R as sa1b-shard would have made it (sa1b_shard_resample_mask,
 * the configured nearest/area rule), then mirrored within wR when flip;
 * rowcnt[y] counts the set cells of row y, their sum goes to *pos. */
static int ld_mask_source(const sa1b_loader *L, ld_worker *W, const sa1b_shard *sh,
                          const sa1b_shard_mask_view *mv, uint32_t wR, uint32_t hR, int flip,
                          uint8_t *out, uint64_t *pos, sa1b_error *err)
{
    const uint32_t R = L->R;
    SA1B_FORWARD(sa1b_shard_resample_mask(sh, mv, R, L->cfg.mask_resample, out, err));
    uint64_t total = 0;
    for (uint32_t y = 0; y < hR; y++) {
        uint8_t *row = out + (size_t)y * R;
        uint32_t count = 0;
        for (uint32_t x = 0; x < wR; x++) count += row[x];
        if (flip) {
            memcpy(W->tmprow, row, wR);
            ld_reverse(row, W->tmprow, wR);
        }
        W->rowcnt[y] = count;
        total += count;
    }
    *pos = total;
    return SA1B_OK;
}

/* Canvases up to this size are decoded into the worker's scratch (it fits
 * in a core's L2 cache) and streamed into the batch (ld_fill_row). */
#define LD_HOT_CANVAS ((size_t)256 << 10)

/* Moves the w x h content of the S x S RGB canvas src (the worker's
 * scratch; its columns from w on are cleared in place) into the batch row
 * out, and zeroes the rows from h on, with streaming stores (nt_store.h):
 * the row is read next by the consumer or a DMA engine, not by this
 * worker. */
static void ld_stream_canvas(uint8_t *out, uint8_t *src, uint32_t S, uint32_t w, uint32_t h)
{
    size_t row = (size_t)S * 3;
    if (w < S)
        for (uint32_t y = 0; y < h; y++) memset(src + y * row + (size_t)w * 3, 0, (size_t)(S - w) * 3);
    nt_copy(out, src, (size_t)h * row);
    nt_zero(out + (size_t)h * row, (size_t)(S - h) * row);
    nt_fence();
}

/* Index of the shard holding global image gidx (binary search on first). */
static size_t ld_find_shard(const sa1b_loader *L, uint64_t gidx)
{
    size_t lo = 0, hi = L->n_shards;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (L->shards[mid].first <= gidx) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Fills row b with sample (shard si, local index li, global gidx). */
static int ld_fill_row(ld_worker *W, ld_buf *buf, uint32_t b, sa1b_error *err)
{
    sa1b_loader *L = W->L;
    sa1b_batch *o = &buf->batch;
    uint64_t gidx = buf->gidx[b];
    size_t lo = ld_find_shard(L, gidx);
    ld_shard *sd = &L->shards[lo];
    uint64_t li = gidx - sd->first;
    o->shard[b] = (uint32_t)lo;
    o->shard_index[b] = li;
    o->image_ids[b] = -1;
    sa1b_shard_image_view v;
    int rc = sa1b_shard_image(sd->sh, li, &v, err);
    if (rc) return rc;
    o->image_ids[b] = v.image_id;
    if (L->cfg.verify) {
        rc = sa1b_shard_verify_image(sd->sh, li, err);
        W->bytes += v.payload_len + v.masks_len;
        if (rc) return rc;
    } else {
        W->bytes += v.payload_len;
    }
    if (v.orig_w == 0 || v.orig_h == 0)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)v.payload_offset,
                              "original size %ux%u", v.orig_w, v.orig_h);
    uint32_t S = L->S, R = L->R;
    uint32_t om = v.orig_w > v.orig_h ? v.orig_w : v.orig_h;
    uint32_t w = ld_fit(v.orig_w, om, S), h = ld_fit(v.orig_h, om, S);
    uint32_t wR = ld_fit(v.orig_w, om, R), hR = ld_fit(v.orig_h, om, R);
    o->content_size[2 * b] = (int32_t)w;
    o->content_size[2 * b + 1] = (int32_t)h;

    sa1b_rng r;
    rng_seed(&r, buf->img_seed, gidx);
    int flip = rng_unit(&r) < L->cfg.flip_prob;
    o->flipped[b] = (uint8_t)flip;

    /* image */
    if (L->format == SA1B_SHARD_RAW) {
        if (v.payload_len != (uint64_t)S * S * 3)
            return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)v.payload_offset,
                                  "raw payload of %llu bytes, want %llu",
                                  (unsigned long long)v.payload_len,
                                  (unsigned long long)S * S * 3);
        ld_put_image(L, o, b, v.payload, (size_t)S * 3, w, h, flip, W->pixrow);
    } else {
        uint32_t jw = 0, jh = 0;
        rc = sa1b_jpeg_size(W->img, v.payload, (size_t)v.payload_len, &jw, &jh, err);
        if (rc) return rc;
        if (!((jw == S && jh == S) || (jw == w && jh == h)))
            return sa1b_error_set(err, SA1B_EMISMATCH, (int64_t)v.payload_offset,
                                  "jpeg of %ux%u, want %ux%u or %ux%u", jw, jh, S, S, w, h);
        /* only the content of a canvas is decoded: the rows below it not
         * at all, the columns right of it only as far as the upsampling
         * needs (sa1b_jpeg_decode_region); the padding is zero in the
         * batch, not the near-zero JPEG leaves.  A canvas delivered as is
         * (no flip, no normalisation) goes to the row: a large one decoded
         * straight into it (a copy would cost more than it saves), a
         * small one decoded into the worker's scratch, which stays in its
         * cache, and streamed into it (decoding into the row itself, whose
         * lines are not in the cache, was 5% slower per image at S=256) */
        uint8_t *out = (uint8_t *)o->images + (size_t)b * L->img_row;
        int canvas = jw == S && jh == S, as_is = canvas && !L->cfg.normalize && !flip;
        int into_row = as_is && (size_t)S * S * 3 > LD_HOT_CANVAS;
        if (canvas)
            rc = sa1b_jpeg_decode_region(W->img, v.payload, (size_t)v.payload_len,
                                         into_row ? out : W->rgb, (size_t)S * 3, S, S, w, h, err);
        else
            rc = sa1b_jpeg_decode(W->img, v.payload, (size_t)v.payload_len, W->rgb, jw, jh, err);
        if (rc) return rc;
        if (into_row) {
            if (w < S)
                for (uint32_t y = 0; y < h; y++)
                    memset(out + ((size_t)y * S + w) * 3, 0, (size_t)(S - w) * 3);
            if (h < S) memset(out + (size_t)h * S * 3, 0, (size_t)(S - h) * S * 3);
        } else if (as_is) {
            ld_stream_canvas(out, W->rgb, S, w, h);
        } else {
            ld_put_image(L, o, b, W->rgb, (size_t)jw * 3, w, h, flip, W->pixrow);
        }
    }

    /* masks: selection */
    uint32_t n = v.n_masks, M = L->M, K = L->K;
    o->n_masks_total[b] = (int32_t)(n > INT32_MAX ? INT32_MAX : n);
    uint32_t nsel = n < M ? n : M;
    if (n > M) {
        if (n > W->sel_cap) {
            uint32_t *p = realloc(W->sel, (size_t)n * sizeof *p);
            if (!p) return sa1b_error_set(err, SA1B_ENOMEM, -1, "mask selection of %u", n);
            W->sel = p;
            W->sel_cap = n;
        }
        for (uint32_t i = 0; i < n; i++) W->sel[i] = i;
        for (uint32_t i = 0; i < M; i++) {
            uint32_t j = i + (uint32_t)rng_below(&r, n - i);
            uint32_t t = W->sel[i];
            W->sel[i] = W->sel[j];
            W->sel[j] = t;
        }
        /* sort the M chosen ones (insertion sort: M is small) */
        for (uint32_t i = 1; i < M; i++) {
            uint32_t x = W->sel[i], k = i;
            while (k > 0 && W->sel[k - 1] > x) {
                W->sel[k] = W->sel[k - 1];
                k--;
            }
            W->sel[k] = x;
        }
    } else {
        if (M > W->sel_cap) {
            uint32_t *p = realloc(W->sel, (size_t)M * sizeof *p);
            if (!p) return sa1b_error_set(err, SA1B_ENOMEM, -1, "mask selection of %u", M);
            W->sel = p;
            W->sel_cap = M;
        }
        for (uint32_t i = 0; i < n; i++) W->sel[i] = i;
    }
    o->n_masks[b] = (int32_t)nsel;

    size_t RR = (size_t)R * R, MK = (size_t)M * K;
    double cell = (double)S / R;
    for (uint32_t m = 0; m < nsel; m++) {
        sa1b_shard_mask_view mv;
        rc = sa1b_shard_mask(sd->sh, li, W->sel[m], &mv, err);
        if (rc) return rc;
        if (!L->cfg.verify) W->bytes += mv.data_len;
        uint8_t *mk = o->masks + ((size_t)b * M + m) * RR;
        /* unpack the content (mirrored when flip), zero outside it, count
         * set cells per row */
        uint64_t pos = 0;
        int mask_format = sa1b_shard_get_info(sd->sh)->mask_format;
        if (mask_format == SA1B_SHARD_RLE_SOURCE) {
            rc = ld_mask_source(L, W, sd->sh, &mv, wR, hR, flip, mk, &pos, err);
            if (rc) return rc;
        } else if (mask_format == SA1B_SHARD_RLE) {
            rc = ld_mask_runs(R, &mv, wR, hR, flip, mk, W->rowcnt, &pos, err);
            if (rc) return rc;
        } else
#ifdef LD_HAVE_AVX2
        if (!flip && R % 32 == 0 && L->avx2)
            pos = ld_unpack_mask_avx2(mv.bits, R, wR, hR, mk, W->rowcnt);
        else
#endif
            for (uint32_t y = 0; y < hR; y++) {
                W->rowcnt[y] = ld_mask_row(L, mv.bits, y, wR, flip, mk + (size_t)y * R, W->tmprow);
                pos += W->rowcnt[y];
            }
        if (hR < R) memset(mk + (size_t)hR * R, 0, (size_t)(R - hR) * R);
        uint64_t neg = (uint64_t)wR * hR - pos;
        o->valid[(size_t)b * M + m] = 1;
        o->mask_ids[(size_t)b * M + m] = mv.id;
        for (uint32_t k = 0; k < K; k++) {
            size_t pk = (size_t)b * MK + (size_t)m * K + k;
            int positive = (k % 2) == 0;
            uint64_t avail = positive ? pos : neg;
            if (avail == 0) {
                o->points[2 * pk] = 0.0f;
                o->points[2 * pk + 1] = 0.0f;
                o->labels[pk] = -1;
                continue;
            }
            uint64_t t = rng_below(&r, avail);
            uint32_t y = 0;
            for (;; y++) {
                uint64_t c = positive ? W->rowcnt[y] : (uint64_t)wR - W->rowcnt[y];
                if (t < c) break;
                t -= c;
            }
            /* the t-th wanted cell of row y in the unflipped order (the row
             * in the batch is already mirrored when flip) */
            const uint8_t *row = mk + (size_t)y * R;
            uint32_t x = 0;
            uint8_t want = positive ? 1 : 0;
            for (;; x++) {
                if (row[flip ? wR - 1 - x : x] == want) {
                    if (t == 0) break;
                    t--;
                }
            }
            double ux = rng_unit(&r), uy = rng_unit(&r);
            double px = (x + ux) * cell - 0.5, py = (y + uy) * cell - 0.5;
            if (flip) px = (double)wR * cell - 1.0 - px;
            if (k == 0 && L->cfg.stored_point && isfinite(mv.point[0]) && isfinite(mv.point[1])) {
                px = mv.point[0];
                py = mv.point[1];
                if (flip) px = (double)wR * cell - 1.0 - px;
            }
            o->points[2 * pk] = (float)px;
            o->points[2 * pk + 1] = (float)py;
            o->labels[pk] = positive ? 1 : 0;
        }
        /* no cell at R (a mask that vanished at the mask resolution, in a
         * shard made before sa1b-shard dropped them, or with
         * --keep-empty-masks): no pair to train on or score, its points
         * padding; its negatives were drawn as before, so that the points
         * of the masks after it stay what they were */
        if (pos == 0) {
            o->valid[(size_t)b * M + m] = 0;
            for (uint32_t k = 0; k < K; k++) {
                size_t pk = (size_t)b * MK + (size_t)m * K + k;
                o->points[2 * pk] = 0.0f;
                o->points[2 * pk + 1] = 0.0f;
                o->labels[pk] = -1;
            }
        }
    }
    ld_pad_masks(L, o, b, nsel);
    return SA1B_OK;
}

/* ---- scheduler ------------------------------------------------------------ */

static void ld_shuffle(sa1b_loader *L, uint64_t epoch)
{
    sa1b_rng r;
    rng_seed(&r, L->cfg.seed, epoch);
    uint32_t *p = L->perm;
    for (uint64_t i = 0; i < L->N; i++) p[i] = (uint32_t)i;
    for (uint64_t i = L->N - 1; i >= 1; i--) {
        uint64_t j = rng_below(&r, i + 1);
        uint32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    L->perm_epoch = epoch;
    L->have_perm = 1;
}

/* Moves (s_epoch, s_pos) over a short last batch with drop_last and over
 * the epoch end; marks the end of the stream after max_epochs. */
static void ld_sched_normalize(sa1b_loader *L)
{
    uint64_t G = (uint64_t)L->B * L->world;
    for (;;) {
        if (L->cfg.max_epochs && L->s_epoch - L->cfg.epoch >= L->cfg.max_epochs) {
            L->s_end = 1;
            L->end_seq = L->next_seq;
            return;
        }
        if (L->s_pos >= L->N || (L->cfg.drop_last && L->N - L->s_pos < G)) {
            L->s_epoch++;
            L->s_pos = 0;
            continue;
        }
        return;
    }
}

static void ld_advise_range(const sa1b_loader *L, const uint8_t *a, uint64_t len)
{
    if (!a || len == 0) return;
    uintptr_t pg = L->page;
    uintptr_t s = (uintptr_t)a & ~(pg - 1);
    uintptr_t e = (uintptr_t)a + (uintptr_t)len;
    (void)madvise((void *)s, e - s, MADV_WILLNEED); /* advice only: errors ignored */
}

/* Asks the kernel to read image gidx's payload and mask block ahead. */
static void ld_advise(sa1b_loader *L, uint64_t gidx)
{
    size_t lo = ld_find_shard(L, gidx);
    sa1b_shard_image_view v;
    if (sa1b_shard_image(L->shards[lo].sh, gidx - L->shards[lo].first, &v, NULL)) return;
    /* the writer puts the masks block right after the payload (64-byte
     * aligned): one call covers both when they lie that close */
    if (v.payload && v.mask_data && v.masks_len && v.mask_data >= v.payload + v.payload_len &&
        (uint64_t)(v.mask_data - (v.payload + v.payload_len)) < 4096) {
        ld_advise_range(L, v.payload, (uint64_t)(v.mask_data - v.payload) + v.masks_len);
        return;
    }
    ld_advise_range(L, v.payload, v.payload_len);
    ld_advise_range(L, v.mask_data, v.masks_len);
}

/* Rank slice [lo, hi) of the global batch at (epoch, pos). */
static void ld_slice(const sa1b_loader *L, uint64_t pos, uint64_t *gsize, uint64_t *lo,
                     uint64_t *hi)
{
    uint64_t G = (uint64_t)L->B * L->world;
    uint64_t g = L->N - pos < G ? L->N - pos : G;
    __extension__ typedef unsigned __int128 u128;
    *gsize = g;
    *lo = pos + (uint64_t)((u128)L->rank * g / L->world);
    *hi = pos + (uint64_t)((u128)(L->rank + 1) * g / L->world);
}

/* Creates the next batch of the stream in buf (called under the lock, with
 * s_end == 0).  Returns 0 or an error (allocator). */
static int ld_create(sa1b_loader *L, ld_buf *buf)
{
    if (!buf->mem) {
        buf->mem = L->alloc.alloc(L->batch_bytes, L->alloc.ctx);
        if (!buf->mem)
            return sa1b_error_set(&L->fatal_err, SA1B_ENOMEM, -1,
                                  "loader: allocator failed for a batch of %zu bytes",
                                  L->batch_bytes);
        ld_bind(L, buf);
    }
    if (!L->have_perm || L->perm_epoch != L->s_epoch) ld_shuffle(L, L->s_epoch);
    uint64_t g, lo, hi;
    ld_slice(L, L->s_pos, &g, &lo, &hi);
    sa1b_batch *o = &buf->batch;
    o->epoch = L->s_epoch;
    o->position = L->s_pos;
    o->step = L->s_pos / ((uint64_t)L->B * L->world);
    o->next_position = L->s_pos + g;
    o->count = (uint32_t)(hi - lo);
    /* the slice was advised with the previous batch, unless this batch
     * starts the stream or follows a jump (epoch end, drop_last) */
    int advised = L->advised_pos == L->s_pos + 1 && L->advised_epoch == L->s_epoch;
    for (uint64_t p = lo; p < hi; p++) {
        buf->gidx[p - lo] = L->perm[p];
        if (!advised) ld_advise(L, L->perm[p]);
    }
    uint64_t x = L->cfg.seed ^ ((L->s_epoch + 1) * UINT64_C(0x9E3779B97F4A7C15));
    buf->img_seed = rng_splitmix64(&x);
    /* advise the rank's slice of the following global batch of the epoch */
    if (o->next_position < L->N) {
        uint64_t g2, lo2, hi2;
        ld_slice(L, o->next_position, &g2, &lo2, &hi2);
        for (uint64_t p = lo2; p < hi2; p++) ld_advise(L, L->perm[p]);
        L->advised_pos = o->next_position + 1;
        L->advised_epoch = L->s_epoch;
    }
    for (uint32_t i = 0; i < L->B; i++) buf->row_err[i] = 0;
    buf->reported = -1;
    buf->padded = 0;
    buf->assigned = 0;
    buf->done = 0;
    buf->seq = L->next_seq++;
    buf->state = BUF_FILLING;
    L->s_pos += g;
    ld_sched_normalize(L);
    return SA1B_OK;
}

/* Picks a job under the lock: a row of the oldest filling batch, else a new
 * batch in a free buffer.  Returns 1 with *job and *row set, 0 when none. */
static int ld_find_job(sa1b_loader *L, ld_buf **job, uint32_t *row)
{
    ld_buf *best = NULL;
    for (uint32_t i = 0; i < L->depth; i++) {
        ld_buf *b = &L->bufs[i];
        if (b->state == BUF_FILLING && b->assigned < L->B && (!best || b->seq < best->seq))
            best = b;
    }
    if (!best && !L->s_end && !L->fatal) {
        for (uint32_t i = 0; i < L->depth; i++) {
            if (L->bufs[i].state == BUF_FREE) {
                if (ld_create(L, &L->bufs[i])) {
                    L->fatal = L->fatal_err.code;
                    pthread_cond_broadcast(&L->ready);
                    return 0;
                }
                best = &L->bufs[i];
                break;
            }
        }
    }
    if (!best) return 0;
    *job = best;
    *row = best->assigned++;
    return 1;
}

static void *ld_worker_main(void *arg)
{
    ld_worker *W = arg;
    sa1b_loader *L = W->L;
    pthread_mutex_lock(&L->mu);
    while (!L->stop) {
        ld_buf *buf;
        uint32_t row;
        if (!ld_find_job(L, &buf, &row)) {
            double t0 = ld_now();
            pthread_cond_wait(&L->work, &L->mu);
            L->worker_idle += ld_now() - t0;
            continue;
        }
        pthread_mutex_unlock(&L->mu);
        int rc = SA1B_OK;
        if (row < buf->batch.count) {
            sa1b_error e;
            sa1b_error_clear(&e);
            rc = ld_fill_row(W, buf, row, &e);
            if (rc) {
                /* name the shard and the image */
                sa1b_batch *o = &buf->batch;
                const char *path = L->shards[o->shard[row]].path;
                char named[64]; /* the shard reader's own "image N (id X) ..." is not said twice */
                snprintf(named, sizeof named, "image %llu (id %lld) ", (unsigned long long)o->shard_index[row],
                         (long long)o->image_ids[row]);
                size_t nl = strlen(named);
                const char *why = strncmp(e.msg, named, nl) == 0 ? e.msg + nl : e.msg;
                sa1b_error_set(&buf->errs[row], rc, e.offset, "'%s' image %llu (id %lld): %s",
                               path, (unsigned long long)o->shard_index[row],
                               (long long)o->image_ids[row], why);
            }
        } else {
            ld_pad_row(L, &buf->batch, row);
        }
        pthread_mutex_lock(&L->mu);
        buf->row_err[row] = rc;
        L->st_bytes += W->bytes;
        W->bytes = 0;
        if (++buf->done == L->B) {
            buf->state = BUF_READY;
            pthread_cond_broadcast(&L->ready);
        }
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* ---- open / close --------------------------------------------------------- */

static int ld_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shard paths of a manifest file (pointers into *man). */
static int ld_manifest_names(const char *file, sa1b_manifest **man, char ***names, sa1b_error *err)
{
    sa1b_error e;
    int rc = sa1b_manifest_read(man, file, &e);
    if (rc == SA1B_ERANGE) rc = SA1B_EFORMAT; /* bad data, not a bad configuration */
    if (rc) return sa1b_error_set(err, rc, e.offset, "'%s': %s", file, e.msg);
    size_t n = (*man)->n_shards;
    *names = malloc(n * sizeof **names);
    if (!*names) {
        sa1b_manifest_free(*man);
        *man = NULL;
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: %zu shards", n);
    }
    for (size_t i = 0; i < (*man)->n_shards; i++) (*names)[i] = (char *)(*man)->shards[i].path;
    return SA1B_OK;
}

typedef struct ld_file_id {
    dev_t dev;
    ino_t ino;
    size_t i; /* the shard's index */
} ld_file_id;

static int ld_file_id_cmp(const void *a, const void *b)
{
    const ld_file_id *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* One file under two names in a glob or a manifest (a link beside its
 * target, a row through another folder) would be read twice an epoch
 * without anyone asking for it: refused, naming both (the first two in the
 * loader's order).  A list of paths may name a shard twice: read as often
 * (a weighting the caller chose). */
static int ld_unique_files(const sa1b_loader *L, sa1b_error *err)
{
    if (L->n_shards < 2) return SA1B_OK;
    ld_file_id *ids = calloc(L->n_shards, sizeof *ids);
    if (!ids) return sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: %zu shards", L->n_shards);
    size_t n = 0;
    for (size_t i = 0; i < L->n_shards; i++) {
        struct stat st;
        if (stat(L->shards[i].path, &st) == 0) ids[n++] = (ld_file_id){st.st_dev, st.st_ino, i};
    }
    qsort(ids, n, sizeof *ids, ld_file_id_cmp);
    size_t a = SIZE_MAX, b = SIZE_MAX;
    for (size_t k = 1; k < n; k++)
        if (ids[k].dev == ids[k - 1].dev && ids[k].ino == ids[k - 1].ino && ids[k].i < b)
            a = ids[k - 1].i, b = ids[k].i;
    free(ids);
    if (b == SIZE_MAX) return SA1B_OK;
    return sa1b_error_set(err, SA1B_EINVAL, -1, "'%s' and '%s' are one file: a shard is read once an epoch "
                          "(a link beside it, or another path to it)", L->shards[a].path,
                          L->shards[b].path);
}

static int ld_open_shards(sa1b_loader *L, const sa1b_loader_config *cfg, sa1b_error *err)
{
    char **names = NULL;
    size_t n = 0;
    glob_t g;
    int have_glob = 0, rc = SA1B_OK;
    sa1b_manifest *man = NULL;
    if (cfg->n_paths > 0) {
        if (!cfg->paths) return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: paths is NULL");
        names = (char **)cfg->paths; /* not modified */
        n = cfg->n_paths;
    } else if (cfg->glob && sa1b_manifest_is_name(cfg->glob)) { /* a manifest: its files, in its order */
        if ((rc = ld_manifest_names(cfg->glob, &man, &names, err))) return rc;
        n = man->n_shards;
    } else if (cfg->glob) {
        int g_rc = glob(cfg->glob, 0, NULL, &g);
        if (g_rc == GLOB_NOMATCH || (g_rc == 0 && g.gl_pathc == 0)) {
            if (g_rc == 0) globfree(&g);
            return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: '%s': no shard matches",
                                  cfg->glob);
        }
        if (g_rc != 0)
            return sa1b_error_set(err, g_rc == GLOB_NOSPACE ? SA1B_ENOMEM : SA1B_EIO, -1,
                                  "loader: '%s': glob failed", cfg->glob);
        have_glob = 1;
        names = g.gl_pathv;
        n = g.gl_pathc;
        qsort(names, n, sizeof *names, ld_strcmp);
    } else {
        return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: no shards given");
    }
    L->shards = calloc(n, sizeof *L->shards);
    if (!L->shards) {
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: %zu shards", n);
        goto out;
    }
    L->n_shards = n;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        ld_shard *s = &L->shards[i];
        if (!names[i]) {
            rc = sa1b_error_set(err, SA1B_EINVAL, -1, "loader: shard path %zu is NULL", i);
            goto out;
        }
        s->path = strdup(names[i]);
        if (!s->path) {
            rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: path");
            goto out;
        }
        sa1b_error e;
        sa1b_error_clear(&e);
        rc = sa1b_shard_open(&s->sh, names[i], &e);
        if (rc) { /* a bad shard is bad data, not a bad argument (as a manifest's) */
            rc = rc == SA1B_EINVAL || rc == SA1B_ERANGE ? SA1B_EFORMAT : rc;
            sa1b_error_set(err, rc, e.offset, "'%s': %s", names[i], e.msg);
            goto out;
        }

        const sa1b_shard_info *in = sa1b_shard_get_info(s->sh);
        /* the R of this shard's batches: its own, or the configured one for
         * source-size masks, which are resampled to it */
        uint32_t shard_R = in->mask_size ? in->mask_size : cfg->mask_size;
        if (!shard_R) {
            rc = sa1b_error_set(err, SA1B_EINVAL, -1,
                                "'%s': source-size masks, and no mask size for the loader",
                                names[i]);
            goto out;
        }
        if (cfg->mask_resample != 0 && cfg->mask_resample != 1) {
            rc = sa1b_error_set(err, SA1B_EINVAL, -1,
                                "loader: mask resampling %d is not 0 (area) or 1 (nearest)",
                                cfg->mask_resample);
            goto out;
        }
        if (cfg->mask_size && in->mask_size && in->mask_size != cfg->mask_size) {
            rc = sa1b_error_set(err, SA1B_EMISMATCH, -1,
                                "'%s': S=%u R=%u, but masks of %ux%u are asked for", names[i],
                                in->image_size, in->mask_size, cfg->mask_size, cfg->mask_size);
            goto out;
        }
        if (i == 0) {
            L->S = in->image_size;
            L->R = shard_R;
            L->format = (uint32_t)in->image_format;
            L->mask_bytes = in->mask_bytes;
        } else if (in->image_size != L->S || shard_R != L->R ||
                   (uint32_t)in->image_format != L->format) {
            rc = sa1b_error_set(err, SA1B_EMISMATCH, -1,
                                "'%s': S=%u R=%u %s, but '%s' has S=%u R=%u %s", names[i],
                                in->image_size, shard_R,
                                in->image_format == SA1B_SHARD_JPEG ? "jpeg" : "raw",
                                L->shards[0].path, L->S, L->R,
                                L->format == SA1B_SHARD_JPEG ? "jpeg" : "raw");
            goto out;
        }
        if (L->S == 0 || L->R == 0 || L->R > L->S || L->S > SA1B_SHARD_MAX_IMAGE_SIZE) {
            rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "'%s': S=%u R=%u", names[i], L->S, L->R);
            goto out;
        }
        if (man && (in->n_images != man->shards[i].images || in->file_size != man->shards[i].bytes)) {
            rc = sa1b_error_set(err, SA1B_EMISMATCH, -1, "'%s': %llu images in %llu bytes, but the manifest '%s' "
                                "says %llu in %llu", names[i], (unsigned long long)in->n_images,
                                (unsigned long long)in->file_size, cfg->glob,
                                (unsigned long long)man->shards[i].images, (unsigned long long)man->shards[i].bytes);
            goto out;
        }
        s->first = total;
        s->n = in->n_images;
        if (in->n_images > UINT32_MAX || total + in->n_images > UINT32_MAX) {
            rc = sa1b_error_set(err, SA1B_ERANGE, -1, "loader: more than %u images",
                                (unsigned)UINT32_MAX);
            goto out;
        }
        total += in->n_images;
    }
    if (cfg->n_paths == 0 && (rc = ld_unique_files(L, err))) goto out; /* a list may repeat a shard on purpose */
    L->N = total;
out:
    if (have_glob) globfree(&g);
    if (man) free(names);
    sa1b_manifest_free(man);
    return rc;
}

void sa1b_loader_close(sa1b_loader *L)
{
    if (!L) return;
    if (L->mu_init) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->work);
        pthread_cond_broadcast(&L->ready);
        pthread_mutex_unlock(&L->mu);
    }
    if (L->workers) {
        for (uint32_t i = 0; i < L->threads; i++) {
            ld_worker *W = &L->workers[i];
            if (W->started) pthread_join(W->tid, NULL);
            sa1b_imgctx_free(W->img);
            free(W->rgb);
            free(W->sel);
            free(W->rowcnt);
            free(W->tmprow);
            free(W->pixrow);
        }
        free(L->workers);
    }
    if (L->bufs) {
        for (uint32_t i = 0; i < L->depth; i++) {
            ld_buf *b = &L->bufs[i];
            if (b->mem) L->alloc.free(b->mem, L->batch_bytes, L->alloc.ctx);
            free(b->gidx);
            free(b->row_err);
            free(b->errs);
        }
        free(L->bufs);
    }
    if (L->mu_init) {
        pthread_mutex_destroy(&L->mu);
        pthread_cond_destroy(&L->work);
        pthread_cond_destroy(&L->ready);
    }
    for (size_t i = 0; i < L->n_shards; i++) {
        sa1b_shard_close(L->shards[i].sh);
        free(L->shards[i].path);
    }
    free(L->shards);
    free(L->perm);
    free(L);
}

int sa1b_loader_open(sa1b_loader **out, const sa1b_loader_config *cfg, sa1b_error *err)
{
    if (!out) return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: NULL handle");
    *out = NULL;
    if (!cfg) return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: NULL configuration");
    {
        const uint16_t one = 1;
        uint8_t first;
        memcpy(&first, &one, 1);
        if (first != 1)
            return sa1b_error_set(err, SA1B_EUNSUPPORTED, -1, "loader: big-endian host");
    }
    uint32_t world = cfg->world ? cfg->world : 1;
    if (cfg->batch_size == 0 || cfg->max_masks == 0 || cfg->points == 0)
        return sa1b_error_set(err, SA1B_EINVAL, -1,
                              "loader: batch size, masks and points must be at least 1");
    if (cfg->rank >= world)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: rank %u not below world %u",
                              cfg->rank, world);
    if (!(cfg->flip_prob >= 0.0 && cfg->flip_prob <= 1.0))
        return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: flip probability %g not in [0, 1]",
                              cfg->flip_prob);
    if ((uint64_t)cfg->batch_size * world > UINT32_MAX)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "loader: global batch too large");
    if (cfg->threads > 1024 || cfg->depth > 4096)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: threads %u or depth %u too large",
                              cfg->threads, cfg->depth);

    sa1b_loader *L = calloc(1, sizeof *L);
    if (!L) return sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: handle");
    L->cfg = *cfg;
    L->cfg.paths = NULL;
    L->cfg.glob = NULL;
    L->cfg.allocator = NULL;
    L->world = world;
    L->rank = cfg->rank;
    L->B = cfg->batch_size;
    L->M = cfg->max_masks;
    L->K = cfg->points;
    L->t_open = ld_now();
    if (cfg->allocator && cfg->allocator->alloc && cfg->allocator->free) {
        L->alloc = *cfg->allocator;
    } else if (cfg->allocator) {
        free(L);
        return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: allocator without alloc/free");
    } else {
        L->alloc.alloc = ld_default_alloc;
        L->alloc.free = ld_default_free;
        L->alloc.ctx = NULL;
    }
    int rc = ld_open_shards(L, cfg, err);
    if (rc) goto fail;
    if (L->N == 0) {
        rc = sa1b_error_set(err, SA1B_EINVAL, -1, "loader: the shards hold no images");
        goto fail;
    }
    if (cfg->consumed > L->N) { /* N: the epoch's end, where its last batch's next_position is */
        rc = sa1b_error_set(err, SA1B_ERANGE, -1, "loader: consumed %llu beyond the epoch's %llu images",
                            (unsigned long long)cfg->consumed, (unsigned long long)L->N);
        goto fail;
    }
    if (cfg->drop_last && L->N < (uint64_t)L->B * world) {
        rc = sa1b_error_set(err, SA1B_EINVAL, -1,
                            "loader: drop_last with %llu images, fewer than one global batch "
                            "of %llu",
                            (unsigned long long)L->N, (unsigned long long)L->B * world);
        goto fail;
    }
    rc = ld_layout(L, err);
    if (rc) goto fail;
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            L->lut[c][v] = (float)(((double)v / 255.0 - norm_mean[c]) / norm_std[c]);

    for (int v = 0; v < 256; v++) {
        uint64_t x = 0;
        for (int j = 0; j < 8; j++)
            if (v >> j & 1) x |= (uint64_t)1 << (8 * j);
        L->unpack[v] = x;
    }
#ifdef LD_HAVE_AVX2
    __builtin_cpu_init();
    L->avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
#endif
    long pg = sysconf(_SC_PAGESIZE);
    L->page = pg > 0 && (pg & (pg - 1)) == 0 ? (uintptr_t)pg : 4096;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    L->threads = cfg->threads ? cfg->threads : (cores > 1 ? (uint32_t)(cores - 1) : 1);
    L->depth = cfg->depth ? cfg->depth : L->threads + 2;

    L->perm = malloc((size_t)L->N * sizeof *L->perm);
    L->bufs = calloc(L->depth, sizeof *L->bufs);
    L->workers = calloc(L->threads, sizeof *L->workers);
    if (!L->perm || !L->bufs || !L->workers) {
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: tables for %llu images",
                            (unsigned long long)L->N);
        goto fail;
    }
    for (uint32_t i = 0; i < L->depth; i++) {
        ld_buf *b = &L->bufs[i];
        b->gidx = calloc(L->B, sizeof *b->gidx);
        b->row_err = calloc(L->B, sizeof *b->row_err);
        b->errs = calloc(L->B, sizeof *b->errs);
        if (!b->gidx || !b->row_err || !b->errs) {
            rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: buffer tables");
            goto fail;
        }
    }
    for (uint32_t i = 0; i < L->threads; i++) {
        ld_worker *W = &L->workers[i];
        W->L = L;
        W->rowcnt = calloc(L->R, sizeof *W->rowcnt);
        W->tmprow = malloc((size_t)L->R + 8);
        W->pixrow = malloc((size_t)L->S * 3);
        if (!W->rowcnt || !W->tmprow || !W->pixrow) {
            rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: worker scratch");
            goto fail;
        }
        if (L->format == SA1B_SHARD_JPEG) {
            W->rgb = malloc((size_t)L->S * L->S * 3);
            if (!W->rgb) {
                rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: worker scratch");
                goto fail;
            }
            rc = sa1b_imgctx_new(&W->img, err);
            if (rc) goto fail;
        }
    }
    L->s_epoch = cfg->epoch;
    L->s_pos = cfg->consumed;
    ld_sched_normalize(L);
    if (!L->s_end) ld_shuffle(L, L->s_epoch);

    if (pthread_mutex_init(&L->mu, NULL) != 0) {
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: mutex");
        goto fail;
    }
    if (pthread_cond_init(&L->work, NULL) != 0) {
        pthread_mutex_destroy(&L->mu);
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: condition variable");
        goto fail;
    }
    if (pthread_cond_init(&L->ready, NULL) != 0) {
        pthread_cond_destroy(&L->work);
        pthread_mutex_destroy(&L->mu);
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: condition variable");
        goto fail;
    }
    L->mu_init = 1;
    for (uint32_t i = 0; i < L->threads; i++) {
        int e = pthread_create(&L->workers[i].tid, NULL, ld_worker_main, &L->workers[i]);
        if (e != 0) {
            rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "loader: thread: %s", strerror(e));
            goto fail;
        }
        L->workers[i].started = 1;
    }
    *out = L;
    return SA1B_OK;
fail:
    sa1b_loader_close(L);
    return rc;
}

/* ---- consumer ------------------------------------------------------------- */

/* Removes row j of a READY batch: the rows after it move up. */
static void ld_compact(sa1b_loader *L, ld_buf *buf, uint32_t j)
{
    sa1b_batch *o = &buf->batch;
    uint32_t n = o->count;
    if (j >= n) return;
    uint32_t tail = n - 1 - j;
    if (tail) {
        struct { void *base; size_t row; } a[] = {
            {o->images, L->img_row},
            {o->content_size, 8},
            {o->masks, (size_t)L->M * L->R * L->R},
            {o->n_masks, 4},
            {o->n_masks_total, 4},
            {o->valid, L->M},
            {o->points, (size_t)L->M * L->K * 8},
            {o->labels, (size_t)L->M * L->K * 4},
            {o->image_ids, 8},
            {o->mask_ids, (size_t)L->M * 8},
            {o->flipped, 1},
            {o->shard, 4},
            {o->shard_index, 8},
            {buf->gidx, 8},
            {buf->row_err, sizeof(int)},
            {buf->errs, sizeof(sa1b_error)},
        };
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
            uint8_t *p = a[i].base;
            memmove(p + j * a[i].row, p + (size_t)(j + 1) * a[i].row, tail * a[i].row);
        }
    }
    ld_pad_row(L, o, n - 1);
    buf->row_err[n - 1] = 0;
    o->count = n - 1;
}

int sa1b_loader_next(sa1b_loader *L, sa1b_batch **batch, sa1b_error *err)
{
    if (batch) *batch = NULL;
    if (!L || !batch) return sa1b_error_set(err, SA1B_EINVAL, -1, "loader: NULL argument");
    L->dmg = 0;
    pthread_mutex_lock(&L->mu);
    int rc;
    for (;;) {
        if (L->fatal) {
            if (err) *err = L->fatal_err;
            rc = L->fatal;
            goto out;
        }
        if (L->s_end && L->deliver_seq >= L->end_seq) {
            rc = sa1b_error_set(err, SA1B_EOF, -1, "loader: end of the stream");
            goto out;
        }
        ld_buf *want = NULL;
        int nfree = 0;
        for (uint32_t i = 0; i < L->depth; i++) {
            ld_buf *b = &L->bufs[i];
            if (b->state == BUF_FREE) nfree++;
            if ((b->state == BUF_FILLING || b->state == BUF_READY) && b->seq == L->deliver_seq)
                want = b;
        }
        if (!want && nfree == 0) {
            rc = sa1b_error_set(err, SA1B_EINVAL, -1,
                                "loader: all %u batch buffers are held; release one first",
                                L->depth);
            goto out;
        }
        if (!want || want->state != BUF_READY) {
            double t0 = ld_now();
            pthread_cond_wait(&L->ready, &L->mu);
            L->consumer_wait += ld_now() - t0;
            continue;
        }
        if (want->reported >= 0) { /* skipped: its row goes, or stays as padding (pad_damaged) */
            if (L->cfg.pad_damaged) {
                ld_pad_row(L, &want->batch, (uint32_t)want->reported);
                want->row_err[want->reported] = 0;
                want->padded++;
            } else {
                ld_compact(L, want, (uint32_t)want->reported);
            }
            want->reported = -1;
        }
        for (uint32_t r = 0; r < want->batch.count; r++) {
            if (want->row_err[r]) {
                want->reported = (int)r;
                L->dmg = 1;
                L->dmg_shard = want->batch.shard[r];
                L->dmg_index = want->batch.shard_index[r];
                L->dmg_id = want->batch.image_ids[r];
                if (err) *err = want->errs[r];
                rc = want->row_err[r];
                goto out;
            }
        }
        want->state = BUF_HELD;
        L->deliver_seq++;
        L->st_images += want->batch.count - want->padded;
        L->st_batches++;
        *batch = &want->batch;
        rc = SA1B_OK;
        goto out;
    }
out:
    pthread_mutex_unlock(&L->mu);
    return rc;
}

void sa1b_loader_release(sa1b_loader *L, sa1b_batch *batch)
{
    if (!L || !batch) return;
    pthread_mutex_lock(&L->mu);
    for (uint32_t i = 0; i < L->depth; i++) {
        if (&L->bufs[i].batch == batch && L->bufs[i].state == BUF_HELD) {
            L->bufs[i].state = BUF_FREE;
            pthread_cond_broadcast(&L->work);
            break;
        }
    }
    pthread_mutex_unlock(&L->mu);
}

int sa1b_loader_damaged(const sa1b_loader *L, const char **shard_path, uint64_t *shard_index,
                        int64_t *image_id)
{
    if (!L || !L->dmg) return 0;
    if (shard_path) *shard_path = L->shards[L->dmg_shard].path;
    if (shard_index) *shard_index = L->dmg_index;
    if (image_id) *image_id = L->dmg_id;
    return 1;
}

void sa1b_loader_stats_get(const sa1b_loader *L, sa1b_loader_stats *st)
{
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!L) return;
    sa1b_loader *ml = (sa1b_loader *)L; /* the mutex is the only thing written */
    pthread_mutex_lock(&ml->mu);
    st->images = L->st_images;
    st->batches = L->st_batches;
    st->bytes_read = L->st_bytes;
    st->elapsed_s = ld_now() - L->t_open;
    st->images_per_s = st->elapsed_s > 0 ? (double)st->images / st->elapsed_s : 0.0;
    st->consumer_wait_s = L->consumer_wait;
    st->worker_idle_s = L->worker_idle;
    st->threads = L->threads;
    st->depth = L->depth;
    pthread_mutex_unlock(&ml->mu);
}

void sa1b_loader_info(const sa1b_loader *L, uint64_t *n_images, uint32_t *S, uint32_t *R,
                      int *format, size_t *n_shards, uint32_t *threads, uint32_t *depth)
{
    if (!L) return;
    if (n_images) *n_images = L->N;
    if (S) *S = L->S;
    if (R) *R = L->R;
    if (format) *format = (int)L->format;
    if (n_shards) *n_shards = L->n_shards;
    if (threads) *threads = L->threads;
    if (depth) *depth = L->depth;
}

const char *sa1b_loader_shard_path(const sa1b_loader *L, size_t i)
{
    if (!L || i >= L->n_shards) return NULL;
    return L->shards[i].path;
}

size_t sa1b_loader_batch_bytes(const sa1b_loader *L)
{
    return L ? L->batch_bytes : 0;
}
