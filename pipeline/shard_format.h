/*
 * shard_format.h - private: byte offsets of every field of the shard
 * header, footer, index row and mask row (sa1b-shard(5) is the spec), and
 * little-endian load/store helpers shared by the writer and the reader.
 */
#ifndef SA1B_SHARD_FORMAT_H
#define SA1B_SHARD_FORMAT_H

#include <stdint.h>
#include <string.h>

#include "sa1b_anno.h"
#include "sa1b_error.h"

/* header (256 bytes at offset 0) */
enum {
    HDR_MAGIC = 0,            /* char[8] "SA1BSHRD" */
    HDR_VERSION = 8,          /* u32 */
    HDR_HEADER_SIZE = 12,     /* u32 = 256 */
    HDR_IMAGE_SIZE = 16,      /* u32 S */
    HDR_MASK_SIZE = 20,       /* u32 R */
    HDR_IMAGE_FORMAT = 24,    /* u32 0 raw, 1 jpeg */
    HDR_ALIGNMENT = 28,       /* u32 = 64 */
    HDR_N_IMAGES = 32,        /* u64 */
    HDR_N_MASKS = 40,         /* u64 */
    HDR_FILE_SIZE = 48,       /* u64 */
    HDR_PROV_OFFSET = 56,     /* u64 */
    HDR_PROV_LENGTH = 64,     /* u64 (without the NUL that follows) */
    HDR_NAMES_OFFSET = 72,    /* u64 */
    HDR_NAMES_LENGTH = 80,    /* u64 */
    HDR_INDEX_OFFSET = 88,    /* u64 */
    HDR_MASKTAB_OFFSET = 96,  /* u64 */
    HDR_INDEX_ROW_SIZE = 104, /* u32 = 96 */
    HDR_MASK_ROW_SIZE = 108,  /* u32 = 80 */
    HDR_MASK_STRIDE = 112,    /* u32 */
    HDR_FLAGS = 116,          /* u32 = 0 */
    HDR_PROV_CRC = 120,       /* u32 */
    HDR_NAMES_CRC = 124,      /* u32 */
    HDR_INDEX_CRC = 128,      /* u32 */
    HDR_MASKTAB_CRC = 132,    /* u32 */
    HDR_CRC = 252             /* u32 CRC32C of bytes 0..251 */
};

/* footer (64 bytes at file_size - 64) */
enum {
    FTR_MAGIC = 0,          /* char[8] "SA1BSHRD" */
    FTR_VERSION = 8,        /* u32 */
    FTR_FOOTER_SIZE = 12,   /* u32 = 64 */
    FTR_N_IMAGES = 16,      /* u64 */
    FTR_N_MASKS = 24,       /* u64 */
    FTR_FILE_SIZE = 32,     /* u64 */
    FTR_INDEX_OFFSET = 40,  /* u64 */
    FTR_MASKTAB_OFFSET = 48,/* u64 */
    FTR_HEADER_CRC = 56,    /* u32 copy of the header's CRC */
    FTR_CRC = 60            /* u32 CRC32C of bytes 0..59 */
};

/* index row (96 bytes per image) */
enum {
    IDX_IMAGE_OFFSET = 0,  /* u64 */
    IDX_IMAGE_LENGTH = 8,  /* u64 */
    IDX_MASKS_OFFSET = 16, /* u64 */
    IDX_MASKS_LENGTH = 24, /* u64 */
    IDX_NAME_OFFSET = 32,  /* u64 */
    IDX_NAME_LENGTH = 40,  /* u32 (without the NUL) */
    IDX_N_MASKS = 44,      /* u32 */
    IDX_FIRST_MASK = 48,   /* u64 */
    IDX_IMAGE_ID = 56,     /* i64 */
    IDX_ORIG_W = 64,       /* u32 */
    IDX_ORIG_H = 68,       /* u32 */
    IDX_SCALE = 72,        /* f32 */
    IDX_IMAGE_CRC = 76,    /* u32 */
    IDX_MASKS_CRC = 80     /* u32; 84..95 reserved, zero */
};

/* mask row (80 bytes per mask) */
enum {
    MSK_ID = 0,          /* i64 */
    MSK_DATA_OFFSET = 8, /* u64 */
    MSK_ORIG_AREA = 16,  /* i64 */
    MSK_AREA = 24,       /* f32 */
    MSK_BBOX = 28,       /* f32[4] */
    MSK_ORIG_BBOX = 44,  /* f32[4] */
    MSK_IOU = 60,        /* f32 */
    MSK_STABILITY = 64,  /* f32 */
    MSK_POINT = 68,      /* f32[2] */
    MSK_IMAGE_INDEX = 76 /* u32 */
};

/* Version 2 (run-length masks): one more header field; the mask stride is
 * 0 (masks have their own lengths, see shard_runs_* below). */
enum {
    HDR_MASK_FORMAT = 136 /* u32: 1 runs at R (SA1B_SHARD_RLE), 2 runs at the source size
                             (SA1B_SHARD_RLE_SOURCE, mask size 0); zero in version 1 */
};

/* Run coding of one version-2 mask (sa1b-shard(5)): a varint n (number of
 * runs, >= 1), then n varints, the lengths of alternating runs of 0 and 1
 * cells over the R x R mask in row-major order, starting with a 0 run that
 * may be empty; every later run is >= 1 and they sum to R*R.  Varints are
 * unsigned LEB128 (7 bits per byte, low first, high bit = more follows),
 * minimal (no final 0x00 byte after the first) and below 2^32. */

/* Reads one varint at *p (< end).  Returns 0 and advances *p, or a
 * negative reason: -1 the bytes end inside it, -2 it exceeds 32 bits,
 * -3 it is not minimal. */
/* An image's original size: each side in 1..SA1B_ANNO_MAX_SIDE, as
 * sa1b-shard takes it from the annotation (a source-size mask is decoded
 * at this size); the writer's and the reader's bound. */
static inline int shard_orig_ok(uint32_t w, uint32_t h)
{
    return w - 1u < SA1B_ANNO_MAX_SIDE && h - 1u < SA1B_ANNO_MAX_SIDE;
}

static inline int shard_varint_get(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
    const uint8_t *q = *p;
    uint32_t x = 0;
    *v = 0;
    for (unsigned sh = 0;; sh += 7) {
        if (q == end) return -1;
        uint8_t c = *q++;
        if (sh == 28 && c > 0x0F) return -2;
        x |= (uint32_t)(c & 0x7F) << sh;
        if (!(c & 0x80)) {
            if (c == 0 && sh) return -3;
            *v = x;
            *p = q;
            return 0;
        }
    }
}

static inline const char *shard_varint_why(int r)
{
    return r == -1 ? "the bytes end inside a varint"
           : r == -2 ? "a varint exceeds 32 bits"
                     : "a varint is not minimal";
}

/* Writes v as a varint at p; returns the bytes written (1..5). */
static inline size_t shard_varint_put(uint8_t *p, uint32_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* A validating walk over one mask's runs: begin reads the count, next
 * yields each run (checked: no empty run after the first, none past R*R),
 * end checks the sum and that no byte is left.  Messages say what is wrong
 * without saying where (callers name the mask and its offset). */
typedef struct shard_runs_it {
    const uint8_t *p, *end;
    uint32_t left, i; /* runs still to read; index of the next */
    uint64_t sum, cells;
} shard_runs_it;

static inline int shard_runs_begin(shard_runs_it *it, const uint8_t *data, size_t len,
                                   uint64_t cells, sa1b_error *err)
{
    it->p = data;
    it->end = data + len;
    it->i = 0;
    it->sum = 0;
    it->left = 0;
    it->cells = cells; /* R * R, or w * h at the source size */
    int r = shard_varint_get(&it->p, it->end, &it->left);
    if (r) return sa1b_error_set(err, SA1B_EFORMAT, -1, "run count: %s", shard_varint_why(r));
    if (it->left == 0) return sa1b_error_set(err, SA1B_EFORMAT, -1, "0 runs");
    if (it->left > (uint64_t)(it->end - it->p)) /* every run takes a byte */
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%u runs in %llu bytes", it->left,
                              (unsigned long long)(it->end - it->p));
    return SA1B_OK;
}

static inline int shard_runs_next(shard_runs_it *it, uint32_t *v, sa1b_error *err)
{
    int r = shard_varint_get(&it->p, it->end, v);
    if (r) return sa1b_error_set(err, SA1B_EFORMAT, -1, "run %u: %s", it->i, shard_varint_why(r));
    if (*v == 0 && it->i > 0)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "run %u of length 0", it->i);
    if (*v > it->cells - it->sum)
        return sa1b_error_set(err, SA1B_EFORMAT, -1,
                              "run %u of length %u overruns the %llu cells (sum %llu)", it->i, *v,
                              (unsigned long long)it->cells,
                              (unsigned long long)(it->sum + *v));
    it->sum += *v;
    it->i++;
    it->left--;
    return SA1B_OK;
}

static inline int shard_runs_end(const shard_runs_it *it, sa1b_error *err)
{
    if (it->p != it->end)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%llu bytes after the %u runs",
                              (unsigned long long)(it->end - it->p), it->i);
    if (it->sum != it->cells)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "runs sum to %llu, want %llu",
                              (unsigned long long)it->sum, (unsigned long long)it->cells);
    return SA1B_OK;
}

/* The whole walk: the runs validate. */
static inline int shard_runs_check(const uint8_t *data, size_t len, uint64_t cells,
                                   sa1b_error *err)
{
    shard_runs_it it;
    uint32_t v;
    SA1B_FORWARD(shard_runs_begin(&it, data, len, cells, err));
    while (it.left) SA1B_FORWARD(shard_runs_next(&it, &v, err));
    return shard_runs_end(&it, err);
}

/* shard_runs.c: decodes into out[R*R] 0/1 bytes (zeros when invalid). */
int shard_runs_decode(const uint8_t *data, size_t len, uint32_t R, uint8_t *out,
                      sa1b_error *err);
/* The same for source-size runs (column-major over h x w) into out[h*w]
 * row-major. */
int shard_runs_decode_source(const uint8_t *data, size_t len, uint32_t w, uint32_t h,
                             uint8_t *out, sa1b_error *err);

static inline uint32_t shard_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t shard_ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline float shard_ldf(const uint8_t *p)
{
    uint32_t u = shard_ld32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void shard_st32(uint8_t *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, 4);
}

static inline void shard_st64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline void shard_stf(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    shard_st32(p, u);
}

/* ceil(R*R / 8) and that rounded up to the alignment */
static inline uint64_t shard_mask_bytes(uint32_t r) { return ((uint64_t)r * r + 7) / 8; }
static inline uint64_t shard_mask_stride(uint32_t r)
{
    return (shard_mask_bytes(r) + 63) & ~(uint64_t)63;
}

#endif
