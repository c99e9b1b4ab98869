/*
 * shard_format.h - private: byte offsets of every field of the shard
 * header, footer, index row and mask row (sa1b-shard(5) is the spec), and
 * little-endian load/store helpers shared by the writer and the reader.
 */
#ifndef SA1B_SHARD_FORMAT_H
#define SA1B_SHARD_FORMAT_H

#include <stdint.h>
#include <string.h>

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
