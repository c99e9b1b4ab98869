/*
 * shard_reader.c - maps a shard and validates all of its structure before
 * anything is used: header, footer, table CRCs, then every index and mask
 * row against the file size (64-bit arithmetic, no sum can wrap).  After a
 * successful open every accessor is a bounds-checked view into the map;
 * payload CRCs are checked on demand by sa1b_shard_verify_image.
 */
#include "sa1b_shard.h"
#include "shard_format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct sa1b_shard {
    const uint8_t *base;
    uint64_t len;
    int mapped;
    sa1b_shard_info info;
    uint64_t index_offset, masktab_offset;
};

typedef unsigned long long ull;

/* off..off+len lies inside [lo, hi) without overflow */
static int span_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi)
{
    return off >= lo && off <= hi && len <= hi - off;
}

static int check_crc(const uint8_t *p, uint64_t len, uint32_t stored, uint64_t off,
                     const char *what, sa1b_error *err)
{
    uint32_t c = sa1b_crc32c(0, p, (size_t)len);
    if (c != stored)
        return sa1b_error_set(err, SA1B_ECHECKSUM, (int64_t)off,
                              "%s at offset %llu: CRC32C 0x%08x != stored 0x%08x", what, (ull)off,
                              c, stored);
    return SA1B_OK;
}

static int validate_header(sa1b_shard *s, sa1b_error *err)
{
    const uint8_t *b = s->base;
    uint64_t len = s->len;
    if (len == 0) return sa1b_error_set(err, SA1B_ETRUNC, 0, "empty file (0 bytes): no shard header");
    uint64_t m = len < 8 ? len : 8;
    if (memcmp(b, SA1B_SHARD_MAGIC, (size_t)m) != 0) {
        int zero = 1;
        for (uint64_t i = 0; i < m; i++) zero &= b[i] == 0;
        if (zero && len >= 8)
            return sa1b_error_set(err, SA1B_EFORMAT, 0,
                                  "header at offset 0: magic is all zeros (an unfinished "
                                  "shard: the writer was interrupted)");
        return sa1b_error_set(err, SA1B_EFORMAT, 0,
                              "header at offset 0: bad magic, not a sa1b shard");
    }
    if (len < SA1B_SHARD_HEADER_SIZE)
        return sa1b_error_set(err, SA1B_ETRUNC, (int64_t)len,
                              "header at offset 0: file of %llu bytes ends inside the %u-byte header",
                              (ull)len, SA1B_SHARD_HEADER_SIZE);
    uint32_t version = shard_ld32(b + HDR_VERSION);
    uint32_t hcrc = shard_ld32(b + HDR_CRC);
    uint32_t c = sa1b_crc32c(0, b, HDR_CRC);
    if (version != SA1B_SHARD_VERSION && version != SA1B_SHARD_VERSION_RLE)
        return sa1b_error_set(err, SA1B_EUNSUPPORTED, HDR_VERSION,
                              "header at offset 8: version %u not supported (this reader knows "
                              "%u and %u)",
                              version, SA1B_SHARD_VERSION, SA1B_SHARD_VERSION_RLE);
    if (c != hcrc)
        return sa1b_error_set(err, SA1B_ECHECKSUM, 0,
                              "header at offset 0: CRC32C 0x%08x != stored 0x%08x", c, hcrc);
    uint64_t fs = shard_ld64(b + HDR_FILE_SIZE);
    if (len < fs)
        return sa1b_error_set(err, SA1B_ETRUNC, (int64_t)len,
                              "file is %llu bytes but its header says %llu: truncated", (ull)len,
                              (ull)fs);
    if (len > fs)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)fs,
                              "%llu unexpected bytes after the footer ending at offset %llu",
                              (ull)(len - fs), (ull)fs);
    if (shard_ld32(b + HDR_HEADER_SIZE) != SA1B_SHARD_HEADER_SIZE ||
        shard_ld32(b + HDR_INDEX_ROW_SIZE) != SA1B_SHARD_INDEX_ROW_SIZE ||
        shard_ld32(b + HDR_MASK_ROW_SIZE) != SA1B_SHARD_MASK_ROW_SIZE ||
        shard_ld32(b + HDR_ALIGNMENT) != SA1B_SHARD_ALIGN || shard_ld32(b + HDR_FLAGS) != 0)
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_HEADER_SIZE,
                              "header at offset 0: structure sizes %u/%u/%u/%u (flags 0x%x) "
                              "differ from version 1's 256/96/80/64 (0)",
                              shard_ld32(b + HDR_HEADER_SIZE), shard_ld32(b + HDR_INDEX_ROW_SIZE),
                              shard_ld32(b + HDR_MASK_ROW_SIZE), shard_ld32(b + HDR_ALIGNMENT),
                              shard_ld32(b + HDR_FLAGS));
    if (fs < SA1B_SHARD_HEADER_SIZE + SA1B_SHARD_FOOTER_SIZE || fs % SA1B_SHARD_ALIGN)
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_FILE_SIZE,
                              "header at offset 0: file size %llu impossible", (ull)fs);

    /* footer */
    uint64_t fo = fs - SA1B_SHARD_FOOTER_SIZE;
    const uint8_t *f = b + fo;
    if (memcmp(f + FTR_MAGIC, SA1B_SHARD_MAGIC, 8) != 0)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)fo, "footer at offset %llu: bad magic",
                              (ull)fo);
    uint32_t fcrc = sa1b_crc32c(0, f, FTR_CRC);
    if (fcrc != shard_ld32(f + FTR_CRC))
        return sa1b_error_set(err, SA1B_ECHECKSUM, (int64_t)fo,
                              "footer at offset %llu: CRC32C 0x%08x != stored 0x%08x", (ull)fo,
                              fcrc, shard_ld32(f + FTR_CRC));
    if (shard_ld32(f + FTR_VERSION) != version ||
        shard_ld32(f + FTR_FOOTER_SIZE) != SA1B_SHARD_FOOTER_SIZE ||
        shard_ld64(f + FTR_N_IMAGES) != shard_ld64(b + HDR_N_IMAGES) ||
        shard_ld64(f + FTR_N_MASKS) != shard_ld64(b + HDR_N_MASKS) ||
        shard_ld64(f + FTR_FILE_SIZE) != fs ||
        shard_ld64(f + FTR_INDEX_OFFSET) != shard_ld64(b + HDR_INDEX_OFFSET) ||
        shard_ld64(f + FTR_MASKTAB_OFFSET) != shard_ld64(b + HDR_MASKTAB_OFFSET) ||
        shard_ld32(f + FTR_HEADER_CRC) != hcrc)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)fo,
                              "footer at offset %llu: disagrees with the header", (ull)fo);

    /* parameters */
    sa1b_shard_info *in = &s->info;
    in->version = version;
    in->file_size = fs;
    in->image_size = shard_ld32(b + HDR_IMAGE_SIZE);
    in->mask_size = shard_ld32(b + HDR_MASK_SIZE);
    uint32_t fmt = shard_ld32(b + HDR_IMAGE_FORMAT);
    in->n_images = shard_ld64(b + HDR_N_IMAGES);
    in->n_masks = shard_ld64(b + HDR_N_MASKS);
    if (in->image_size < 1 || in->image_size > SA1B_SHARD_MAX_IMAGE_SIZE)
        return sa1b_error_set(err, SA1B_ERANGE, HDR_IMAGE_SIZE,
                              "header at offset 0: image size %u not in 1..%u", in->image_size,
                              SA1B_SHARD_MAX_IMAGE_SIZE);
    if (fmt > SA1B_SHARD_JPEG)
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_IMAGE_FORMAT,
                              "header at offset 0: image format %u unknown", fmt);
    in->image_format = (int)fmt;
    uint32_t mf = shard_ld32(b + HDR_MASK_FORMAT);
    if (version == SA1B_SHARD_VERSION ? mf != SA1B_SHARD_PACKED
                                      : mf != SA1B_SHARD_RLE && mf != SA1B_SHARD_RLE_SOURCE)
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_MASK_FORMAT,
                              "header at offset 0: mask format %u, want %s for version %u", mf,
                              version == SA1B_SHARD_VERSION ? "0" : "1 or 2", version);
    in->mask_format = (int)mf;
    const int source = in->mask_format == SA1B_SHARD_RLE_SOURCE;
    if (source ? in->mask_size != 0 : in->mask_size < 1 || in->mask_size > in->image_size)
        return sa1b_error_set(err, SA1B_ERANGE, HDR_MASK_SIZE,
                              "header at offset 0: mask size %u not in %s%u", in->mask_size,
                              source ? "0.." : "1..", source ? 0 : in->image_size);
    if (in->mask_format == SA1B_SHARD_PACKED) {
        in->mask_bytes = (uint32_t)shard_mask_bytes(in->mask_size);
        in->mask_stride = (uint32_t)shard_mask_stride(in->mask_size);
    }
    if (shard_ld32(b + HDR_MASK_STRIDE) != in->mask_stride)
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_MASK_STRIDE,
                              "header at offset 0: mask stride %u != %u for mask size %u",
                              shard_ld32(b + HDR_MASK_STRIDE), in->mask_stride, in->mask_size);
    if (in->n_images > UINT32_MAX)
        return sa1b_error_set(err, SA1B_ERANGE, HDR_N_IMAGES,
                              "header at offset 0: %llu images (at most 2^32 - 1)",
                              (ull)in->n_images);

    /* tables: inside [header end, footer), aligned, CRCs */
    const uint64_t lo = SA1B_SHARD_HEADER_SIZE, hi = fo;
    uint64_t po = shard_ld64(b + HDR_PROV_OFFSET), pl = shard_ld64(b + HDR_PROV_LENGTH);
    if (!span_ok(po, pl, lo, hi) || pl == hi - po)
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_PROV_OFFSET,
                              "header at offset 0: provenance at %llu, %llu bytes, outside %llu..%llu",
                              (ull)po, (ull)pl, (ull)lo, (ull)hi);
    if (b[po + pl] != 0 || memchr(b + po, 0, (size_t)pl))
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)po,
                              "provenance at offset %llu: not a NUL-terminated text of %llu bytes",
                              (ull)po, (ull)pl);
    uint64_t no = shard_ld64(b + HDR_NAMES_OFFSET), nl = shard_ld64(b + HDR_NAMES_LENGTH);
    if (!span_ok(no, nl, lo, hi))
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_NAMES_OFFSET,
                              "header at offset 0: names table at %llu, %llu bytes, outside %llu..%llu",
                              (ull)no, (ull)nl, (ull)lo, (ull)hi);
    uint64_t io = shard_ld64(b + HDR_INDEX_OFFSET), mo = shard_ld64(b + HDR_MASKTAB_OFFSET);
    if (in->n_images > (hi - lo) / SA1B_SHARD_INDEX_ROW_SIZE || io % SA1B_SHARD_ALIGN ||
        !span_ok(io, in->n_images * SA1B_SHARD_INDEX_ROW_SIZE, lo, hi))
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_INDEX_OFFSET,
                              "header at offset 0: index table of %llu rows at %llu outside "
                              "%llu..%llu or unaligned",
                              (ull)in->n_images, (ull)io, (ull)lo, (ull)hi);
    if (in->n_masks > (hi - lo) / SA1B_SHARD_MASK_ROW_SIZE || mo % SA1B_SHARD_ALIGN ||
        !span_ok(mo, in->n_masks * SA1B_SHARD_MASK_ROW_SIZE, lo, hi))
        return sa1b_error_set(err, SA1B_EFORMAT, HDR_MASKTAB_OFFSET,
                              "header at offset 0: mask table of %llu rows at %llu outside "
                              "%llu..%llu or unaligned",
                              (ull)in->n_masks, (ull)mo, (ull)lo, (ull)hi);
    SA1B_FORWARD(check_crc(b + po, pl, shard_ld32(b + HDR_PROV_CRC), po, "provenance", err));
    SA1B_FORWARD(check_crc(b + no, nl, shard_ld32(b + HDR_NAMES_CRC), no, "names table", err));
    SA1B_FORWARD(check_crc(b + io, in->n_images * SA1B_SHARD_INDEX_ROW_SIZE,
                           shard_ld32(b + HDR_INDEX_CRC), io, "index table", err));
    SA1B_FORWARD(check_crc(b + mo, in->n_masks * SA1B_SHARD_MASK_ROW_SIZE,
                           shard_ld32(b + HDR_MASKTAB_CRC), mo, "mask table", err));
    in->provenance = (const char *)(b + po);
    in->provenance_len = (size_t)pl;
    s->index_offset = io;
    s->masktab_offset = mo;
    return SA1B_OK;
}

/* End of the runs of mask row k (RLE): the next row's data offset, or the
 * end of the masks block for the image's last mask (j = nm - 1). */
static uint64_t rle_data_end(const uint8_t *mr, uint32_t j, uint32_t nm, uint64_t mofs,
                             uint64_t mlen)
{
    return j + 1 < nm ? shard_ld64(mr + SA1B_SHARD_MASK_ROW_SIZE + MSK_DATA_OFFSET) : mofs + mlen;
}

/* Mask row k (mask j of image i, RLE): its runs start where the previous
 * mask's end (the first at the masks block) and take at least 2 bytes
 * before the next one's (the last: the block end).  Their content is
 * checked by sa1b_shard_verify_image and on decoding. */
static int rle_row_check(const uint8_t *mr, uint64_t mro, uint64_t k,
                         uint64_t i, uint32_t j, uint32_t nm, uint64_t mofs, uint64_t mlen,
                         sa1b_error *err)
{
    uint64_t d = shard_ld64(mr + MSK_DATA_OFFSET), end = rle_data_end(mr, j, nm, mofs, mlen);
    uint64_t start = j == 0 ? mofs : shard_ld64(mr - SA1B_SHARD_MASK_ROW_SIZE + MSK_DATA_OFFSET);
    if (j == 0 ? d != start : d <= start)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)mro,
                              "mask row %llu at offset %llu: data offset %llu, want %s%llu "
                              "(image %llu mask %u)",
                              (ull)k, (ull)mro, (ull)d, j ? "> " : "", (ull)start, (ull)i, j);
    if (end < d || end - d < 2 || end > mofs + mlen)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)mro,
                              "mask row %llu at offset %llu: runs at %llu end at %llu, outside "
                              "the masks block %llu..%llu or shorter than 2 bytes "
                              "(image %llu mask %u)",
                              (ull)k, (ull)mro, (ull)d, (ull)end, (ull)mofs, (ull)(mofs + mlen),
                              (ull)i, j);
    return SA1B_OK;
}

static int validate_rows(sa1b_shard *s, sa1b_error *err)
{
    const uint8_t *b = s->base;
    const sa1b_shard_info *in = &s->info;
    const uint64_t lo = SA1B_SHARD_HEADER_SIZE, hi = in->file_size - SA1B_SHARD_FOOTER_SIZE;
    const uint64_t no = shard_ld64(b + HDR_NAMES_OFFSET), nl = shard_ld64(b + HDR_NAMES_LENGTH);
    const uint64_t raw_len = (uint64_t)in->image_size * in->image_size * 3;
    uint64_t next_mask = 0;
    for (uint64_t i = 0; i < in->n_images; i++) {
        uint64_t ro = s->index_offset + i * SA1B_SHARD_INDEX_ROW_SIZE;
        const uint8_t *r = b + ro;
        uint64_t pofs = shard_ld64(r + IDX_IMAGE_OFFSET), plen = shard_ld64(r + IDX_IMAGE_LENGTH);
        uint64_t mofs = shard_ld64(r + IDX_MASKS_OFFSET), mlen = shard_ld64(r + IDX_MASKS_LENGTH);
        uint64_t nofs = shard_ld64(r + IDX_NAME_OFFSET);
        uint32_t nlen = shard_ld32(r + IDX_NAME_LENGTH), nm = shard_ld32(r + IDX_N_MASKS);
        uint64_t first = shard_ld64(r + IDX_FIRST_MASK);
        float scale = shard_ldf(r + IDX_SCALE);
#define ROW_ERR(code, ...)                                                                        \
    do {                                                                                          \
        char why_[160];                                                                           \
        snprintf(why_, sizeof why_, __VA_ARGS__);                                                 \
        return sa1b_error_set(err, code, (int64_t)ro, "index row %llu at offset %llu: %s",       \
                              (ull)i, (ull)ro, why_);                                             \
    } while (0)
        if (pofs % SA1B_SHARD_ALIGN)
            ROW_ERR(SA1B_EFORMAT, "payload offset %llu not %u-byte aligned", (ull)pofs,
                    SA1B_SHARD_ALIGN);
        if (!span_ok(pofs, plen, lo, hi)) {
            if (pofs >= hi || pofs < lo)
                ROW_ERR(SA1B_EFORMAT, "payload offset %llu beyond file size %llu", (ull)pofs,
                        (ull)in->file_size);
            ROW_ERR(SA1B_EFORMAT, "payload of %llu bytes at %llu runs past the data end %llu",
                    (ull)plen, (ull)pofs, (ull)hi);
        }
        if (in->image_format == SA1B_SHARD_RAW ? plen != raw_len : plen == 0)
            ROW_ERR(SA1B_EFORMAT, "payload length %llu, want %s%llu", (ull)plen,
                    in->image_format == SA1B_SHARD_RAW ? "" : "> ",
                    (ull)(in->image_format == SA1B_SHARD_RAW ? raw_len : 0));
        if (mofs % SA1B_SHARD_ALIGN)
            ROW_ERR(SA1B_EFORMAT, "masks offset %llu not %u-byte aligned", (ull)mofs,
                    SA1B_SHARD_ALIGN);
        if (in->mask_format == SA1B_SHARD_PACKED && mlen != (uint64_t)nm * in->mask_stride)
            ROW_ERR(SA1B_EFORMAT, "masks length %llu != %u masks x %u bytes", (ull)mlen, nm,
                    in->mask_stride);
        if (in->mask_format != SA1B_SHARD_PACKED && mlen < (uint64_t)nm * 2)
            ROW_ERR(SA1B_EFORMAT, "masks length %llu < %u masks x 2 bytes of runs", (ull)mlen, nm);
        if (!span_ok(mofs, mlen, lo, hi))
            ROW_ERR(SA1B_EFORMAT, "masks block of %llu bytes at offset %llu beyond file size %llu",
                    (ull)mlen, (ull)mofs, (ull)in->file_size);
        if (first != next_mask)
            ROW_ERR(SA1B_EFORMAT, "first mask %llu, want %llu (masks in image order)", (ull)first,
                    (ull)next_mask);
        if (nm > in->n_masks - next_mask)
            ROW_ERR(SA1B_EFORMAT, "%u masks from %llu exceed the %llu of the mask table", nm,
                    (ull)first, (ull)in->n_masks);
        if (!span_ok(nofs, (uint64_t)nlen + 1, no, no + nl) || b[nofs + nlen] != 0 ||
            memchr(b + nofs, 0, nlen))
            ROW_ERR(SA1B_EFORMAT, "file name at offset %llu (%u bytes) not a string of the names "
                    "table", (ull)nofs, nlen);
        if (!shard_orig_ok(shard_ld32(r + IDX_ORIG_W), shard_ld32(r + IDX_ORIG_H)))
            ROW_ERR(SA1B_EFORMAT, "original size %ux%u (each side 1..%u)", shard_ld32(r + IDX_ORIG_W),
                    shard_ld32(r + IDX_ORIG_H), SA1B_ANNO_MAX_SIDE);
        if (!isfinite(scale) || !(scale > 0))
            ROW_ERR(SA1B_EFORMAT, "scale %g not finite and positive", (double)scale);
#undef ROW_ERR
        for (uint32_t j = 0; j < nm; j++) {
            uint64_t k = first + j;
            uint64_t mro = s->masktab_offset + k * SA1B_SHARD_MASK_ROW_SIZE;
            const uint8_t *mr = b + mro;
            uint64_t d = shard_ld64(mr + MSK_DATA_OFFSET), want = mofs + (uint64_t)j * in->mask_stride;
            if (in->mask_format != SA1B_SHARD_PACKED) {
                SA1B_FORWARD(rle_row_check(mr, mro, k, i, j, nm, mofs, mlen, err));
                want = d;
            }
            if (d != want)
                return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)mro,
                                      "mask row %llu at offset %llu: data offset %llu, want %llu "
                                      "(image %llu mask %u)",
                                      (ull)k, (ull)mro, (ull)d, (ull)want, (ull)i, j);
            if (shard_ld32(mr + MSK_IMAGE_INDEX) != i)
                return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)mro,
                                      "mask row %llu at offset %llu: image index %u, want %llu",
                                      (ull)k, (ull)mro, shard_ld32(mr + MSK_IMAGE_INDEX), (ull)i);
        }
        next_mask += nm;
    }
    if (next_mask != in->n_masks)
        return sa1b_error_set(err, SA1B_EFORMAT, (int64_t)s->index_offset,
                              "index table at offset %llu: images hold %llu masks, header says %llu",
                              (ull)s->index_offset, (ull)next_mask, (ull)in->n_masks);
    return SA1B_OK;
}

static int open_common(sa1b_shard *s, sa1b_error *err)
{
    SA1B_FORWARD(validate_header(s, err));
    return validate_rows(s, err);
}

int sa1b_shard_open_memory(sa1b_shard **sp, const void *data, size_t len, sa1b_error *err)
{
    if (!sp || (!data && len)) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    *sp = NULL;
    sa1b_shard *s = calloc(1, sizeof *s);
    if (!s) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    s->base = data;
    s->len = len;
    int rc = open_common(s, err);
    if (rc) {
        free(s);
        return rc;
    }
    *sp = s;
    return SA1B_OK;
}

int sa1b_shard_open(sa1b_shard **sp, const char *path, sa1b_error *err)
{
    if (!sp || !path) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    *sp = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* (a FIFO: refused below, not waited on) */
    if (fd < 0) return sa1b_error_set(err, SA1B_EIO, -1, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sa1b_error_set(err, SA1B_EIO, -1, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sa1b_error_set(err, SA1B_EIO, -1, "not a regular file");
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return sa1b_error_set(err, SA1B_ERANGE, -1, "file too large to map");
    }
    sa1b_shard *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    }
    s->len = (uint64_t)st.st_size;
    if (s->len) {
        void *p = mmap(NULL, (size_t)s->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(s);
            return sa1b_error_set(err, SA1B_EIO, -1, "cannot map: %s", strerror(e));
        }
        s->base = p;
        s->mapped = 1;
    } else {
        static const uint8_t empty[1];
        s->base = empty;
    }
    close(fd);
    int rc = open_common(s, err);
    if (rc) {
        sa1b_shard_close(s);
        return rc;
    }
    *sp = s;
    return SA1B_OK;
}

void sa1b_shard_close(sa1b_shard *s)
{
    if (!s) return;
    if (s->mapped) munmap((void *)s->base, (size_t)s->len);
    free(s);
}

const sa1b_shard_info *sa1b_shard_get_info(const sa1b_shard *s) { return s ? &s->info : NULL; }

uint64_t sa1b_shard_index_offset(const sa1b_shard *s) { return s ? s->index_offset : 0; }
uint64_t sa1b_shard_mask_table_offset(const sa1b_shard *s) { return s ? s->masktab_offset : 0; }

/* A row read again that no longer holds what sa1b_shard_open validated: the
 * file was rewritten in place while open (truncation raises SIGBUS). */
static int changed(sa1b_error *err, uint64_t i)
{
    return sa1b_error_set(err, SA1B_EFORMAT, -1, "image %llu: its index row changed since the shard was opened "
                          "(a shard must not be modified while it is read)", (ull)i);
}

int sa1b_shard_image(const sa1b_shard *s, uint64_t i, sa1b_shard_image_view *out, sa1b_error *err)
{
    if (!s || !out) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    if (i >= s->info.n_images)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "image %llu: the shard has %llu images",
                              (ull)i, (ull)s->info.n_images);
    const uint8_t *r = s->base + s->index_offset + i * SA1B_SHARD_INDEX_ROW_SIZE;
    memset(out, 0, sizeof *out);
    out->index = i;
    out->image_id = (int64_t)shard_ld64(r + IDX_IMAGE_ID);
    out->orig_w = shard_ld32(r + IDX_ORIG_W);
    out->orig_h = shard_ld32(r + IDX_ORIG_H);
    out->scale = shard_ldf(r + IDX_SCALE);
    uint64_t name_offset = shard_ld64(r + IDX_NAME_OFFSET);
    out->file_name_len = shard_ld32(r + IDX_NAME_LENGTH);
    out->payload_offset = shard_ld64(r + IDX_IMAGE_OFFSET);
    out->payload_len = shard_ld64(r + IDX_IMAGE_LENGTH);
    out->payload_crc = shard_ld32(r + IDX_IMAGE_CRC);
    out->masks_offset = shard_ld64(r + IDX_MASKS_OFFSET);
    out->masks_len = shard_ld64(r + IDX_MASKS_LENGTH);
    out->masks_crc = shard_ld32(r + IDX_MASKS_CRC);
    out->n_masks = shard_ld32(r + IDX_N_MASKS);
    out->first_mask = shard_ld64(r + IDX_FIRST_MASK);
    /* read once from the map, checked again: every span this view points
     * into stays inside the file even if the row changed since the open */
    const uint64_t fs = s->info.file_size;
    if (!span_ok(out->payload_offset, out->payload_len, 0, fs) || !span_ok(out->masks_offset, out->masks_len, 0, fs) ||
        !span_ok(name_offset, (uint64_t)out->file_name_len + 1, 0, fs) || out->n_masks > s->info.n_masks ||
        out->first_mask > s->info.n_masks - out->n_masks || !shard_orig_ok(out->orig_w, out->orig_h))
        return changed(err, i);
    out->file_name = (const char *)(s->base + name_offset);
    out->payload = s->base + out->payload_offset;
    out->mask_data = s->base + out->masks_offset;
    return SA1B_OK;
}

int sa1b_shard_mask(const sa1b_shard *s, uint64_t i, uint32_t j, sa1b_shard_mask_view *out,
                    sa1b_error *err)
{
    if (!s || !out) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    if (i >= s->info.n_images)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "image %llu: the shard has %llu images",
                              (ull)i, (ull)s->info.n_images);
    const uint8_t *r = s->base + s->index_offset + i * SA1B_SHARD_INDEX_ROW_SIZE;
    uint32_t nm = shard_ld32(r + IDX_N_MASKS);
    if (j >= nm)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "image %llu mask %u: the image has %u masks",
                              (ull)i, j, nm);
    uint64_t first = shard_ld64(r + IDX_FIRST_MASK);
    if (nm > s->info.n_masks || first > s->info.n_masks - nm) return changed(err, i);
    uint64_t k = first + j;
    const uint8_t *m = s->base + s->masktab_offset + k * SA1B_SHARD_MASK_ROW_SIZE;
    memset(out, 0, sizeof *out);
    out->index = k;
    out->image_index = i;
    out->id = (int64_t)shard_ld64(m + MSK_ID);
    out->data_offset = shard_ld64(m + MSK_DATA_OFFSET);
    out->data_len = s->info.mask_bytes;
    if (s->info.mask_format != SA1B_SHARD_PACKED)
        out->data_len = rle_data_end(m, j, nm, shard_ld64(r + IDX_MASKS_OFFSET),
                                     shard_ld64(r + IDX_MASKS_LENGTH)) -
                        out->data_offset;
    out->orig_area = (int64_t)shard_ld64(m + MSK_ORIG_AREA);
    out->area = shard_ldf(m + MSK_AREA);
    for (int q = 0; q < 4; q++) {
        out->bbox[q] = shard_ldf(m + MSK_BBOX + 4 * q);
        out->orig_bbox[q] = shard_ldf(m + MSK_ORIG_BBOX + 4 * q);
    }
    out->predicted_iou = shard_ldf(m + MSK_IOU);
    out->stability_score = shard_ldf(m + MSK_STABILITY);
    out->point[0] = shard_ldf(m + MSK_POINT);
    out->point[1] = shard_ldf(m + MSK_POINT + 4);
    if (!span_ok(out->data_offset, out->data_len, 0, s->info.file_size)) return changed(err, i); /* (as above) */
    out->bits = s->base + out->data_offset;
    return SA1B_OK;
}

void sa1b_shard_unpack_mask(const sa1b_shard *s, const sa1b_shard_mask_view *m, uint8_t *out)
{
    if (s->info.mask_format != SA1B_SHARD_PACKED) {
        sa1b_error e;
        (void)sa1b_shard_decode_mask(s, m, out, &e);
        return;
    }
    uint64_t n = (uint64_t)s->info.mask_size * s->info.mask_size, k = 0;
    const uint8_t *bits = m->bits;
    for (; k + 8 <= n; k += 8) {
        unsigned v = bits[k >> 3];
        for (int q = 0; q < 8; q++) out[k + q] = (uint8_t)((v >> q) & 1);
    }
    for (; k < n; k++) out[k] = (uint8_t)((bits[k >> 3] >> (k & 7)) & 1);
}

int sa1b_shard_decode_mask(const sa1b_shard *s, const sa1b_shard_mask_view *m, uint8_t *out,
                           sa1b_error *err)
{
    if (!s || !m || !out) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    if (s->info.mask_format == SA1B_SHARD_PACKED) {
        sa1b_shard_unpack_mask(s, m, out);
        return SA1B_OK;
    }
    sa1b_error e;
    int rc;
    if (s->info.mask_format == SA1B_SHARD_RLE_SOURCE) {
        const uint8_t *r = s->base + s->index_offset + m->image_index * SA1B_SHARD_INDEX_ROW_SIZE;
        rc = shard_runs_decode_source(m->bits, (size_t)m->data_len, shard_ld32(r + IDX_ORIG_W),
                                      shard_ld32(r + IDX_ORIG_H), out, &e);
    } else {
        rc = shard_runs_decode(m->bits, (size_t)m->data_len, s->info.mask_size, out, &e);
    }
    if (rc)
        return sa1b_error_set(err, e.code, (int64_t)m->data_offset,
                              "image %llu mask row %llu runs at offset %llu: %s",
                              (ull)m->image_index, (ull)m->index, (ull)m->data_offset, e.msg);
    return SA1B_OK;
}

int sa1b_shard_find_image(const sa1b_shard *s, int64_t image_id, uint64_t *index, sa1b_error *err)
{
    if (!s || !index) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    for (uint64_t i = 0; i < s->info.n_images; i++) {
        const uint8_t *r = s->base + s->index_offset + i * SA1B_SHARD_INDEX_ROW_SIZE;
        if ((int64_t)shard_ld64(r + IDX_IMAGE_ID) == image_id) {
            *index = i;
            return SA1B_OK;
        }
    }
    return sa1b_error_set(err, SA1B_ERANGE, -1, "no image with id %lld", (long long)image_id);
}

/* Mask j of image im (RLE): its runs validate. */
static int verify_runs(const sa1b_shard *s, const sa1b_shard_image_view *im, uint32_t j,
                       sa1b_error *err)
{
    sa1b_shard_mask_view m;
    SA1B_FORWARD(sa1b_shard_mask(s, im->index, j, &m, err));
    sa1b_error e;
    uint64_t cells = s->info.mask_format == SA1B_SHARD_RLE_SOURCE
                         ? (uint64_t)im->orig_w * im->orig_h
                         : (uint64_t)s->info.mask_size * s->info.mask_size;
    int rc = shard_runs_check(m.bits, (size_t)m.data_len, cells, &e);
    if (rc)
        return sa1b_error_set(err, rc, (int64_t)m.data_offset,
                              "image %llu (id %lld) mask %u runs at offset %llu: %s",
                              (ull)im->index, (long long)im->image_id, j, (ull)m.data_offset,
                              e.msg);
    return SA1B_OK;
}

int sa1b_shard_verify_image(const sa1b_shard *s, uint64_t i, sa1b_error *err)
{
    sa1b_shard_image_view im;
    SA1B_FORWARD(sa1b_shard_image(s, i, &im, err));
    uint32_t c = sa1b_crc32c(0, im.payload, (size_t)im.payload_len);
    if (c != im.payload_crc)
        return sa1b_error_set(err, SA1B_ECHECKSUM, (int64_t)im.payload_offset,
                              "image %llu (id %lld) payload at offset %llu: CRC32C 0x%08x != "
                              "stored 0x%08x",
                              (ull)i, (long long)im.image_id, (ull)im.payload_offset, c,
                              im.payload_crc);
    c = sa1b_crc32c(0, im.mask_data, (size_t)im.masks_len);
    if (c != im.masks_crc)
        return sa1b_error_set(err, SA1B_ECHECKSUM, (int64_t)im.masks_offset,
                              "image %llu (id %lld) masks at offset %llu: CRC32C 0x%08x != "
                              "stored 0x%08x",
                              (ull)i, (long long)im.image_id, (ull)im.masks_offset, c,
                              im.masks_crc);
    if (s->info.mask_format != SA1B_SHARD_PACKED)
        for (uint32_t j = 0; j < im.n_masks; j++)
            SA1B_FORWARD(verify_runs(s, &im, j, err));
    return SA1B_OK;
}

typedef struct span {
    uint64_t off, len;
    const char *what;
    uint64_t rec; /* image index, or UINT64_MAX */
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

static const char *span_name(const span *sp, char *buf, size_t cap)
{
    if (sp->rec == UINT64_MAX) return sp->what;
    snprintf(buf, cap, "%s of image %llu", sp->what, (ull)sp->rec);
    return buf;
}

int sa1b_shard_verify_layout(const sa1b_shard *s, sa1b_error *err)
{
    if (!s) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    const uint8_t *b = s->base;
    const sa1b_shard_info *in = &s->info;
    uint64_t n = 6 + 2 * in->n_images;
    if (n > SIZE_MAX / sizeof(span)) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    span *sp = malloc((size_t)n * sizeof *sp);
    if (!sp) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    uint64_t k = 0;
    sp[k++] = (span){0, SA1B_SHARD_HEADER_SIZE, "header", UINT64_MAX};
    sp[k++] = (span){shard_ld64(b + HDR_PROV_OFFSET), in->provenance_len + 1, "provenance",
                     UINT64_MAX};
    sp[k++] = (span){shard_ld64(b + HDR_NAMES_OFFSET), shard_ld64(b + HDR_NAMES_LENGTH),
                     "names table", UINT64_MAX};
    sp[k++] = (span){s->index_offset, in->n_images * SA1B_SHARD_INDEX_ROW_SIZE, "index table",
                     UINT64_MAX};
    sp[k++] = (span){s->masktab_offset, in->n_masks * SA1B_SHARD_MASK_ROW_SIZE, "mask table",
                     UINT64_MAX};
    sp[k++] = (span){in->file_size - SA1B_SHARD_FOOTER_SIZE, SA1B_SHARD_FOOTER_SIZE, "footer",
                     UINT64_MAX};
    for (uint64_t i = 0; i < in->n_images; i++) {
        const uint8_t *r = b + s->index_offset + i * SA1B_SHARD_INDEX_ROW_SIZE;
        sp[k++] = (span){shard_ld64(r + IDX_IMAGE_OFFSET), shard_ld64(r + IDX_IMAGE_LENGTH),
                         "payload", i};
        sp[k++] = (span){shard_ld64(r + IDX_MASKS_OFFSET), shard_ld64(r + IDX_MASKS_LENGTH),
                         "masks block", i};
    }
    qsort(sp, (size_t)k, sizeof *sp, span_cmp);
    uint64_t end = 0; /* first byte not yet covered */
    int rc = SA1B_OK;
    char b1[64], b2[64];
    for (uint64_t q = 0; q < k && !rc; q++) {
        if (sp[q].len == 0) continue;
        if (sp[q].off < end) {
            rc = sa1b_error_set(err, SA1B_EFORMAT, (int64_t)sp[q].off,
                                "%s at offset %llu overlaps %s ending at %llu",
                                span_name(&sp[q], b1, sizeof b1), (ull)sp[q].off,
                                span_name(&sp[q - 1], b2, sizeof b2), (ull)end);
            break;
        }
        for (uint64_t p = end; p < sp[q].off; p++)
            if (b[p]) {
                rc = sa1b_error_set(err, SA1B_EFORMAT, (int64_t)p,
                                    "padding byte at offset %llu (before %s) is 0x%02x, not zero",
                                    (ull)p, span_name(&sp[q], b1, sizeof b1), b[p]);
                break;
            }
        end = sp[q].off + sp[q].len;
    }
    if (!rc && end != in->file_size)
        rc = sa1b_error_set(err, SA1B_EFORMAT, (int64_t)end,
                            "layout ends at %llu, before the file size %llu", (ull)end,
                            (ull)in->file_size);
    free(sp);
    return rc;
}
