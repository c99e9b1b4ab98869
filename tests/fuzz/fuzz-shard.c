/*
 * fuzz-shard.c - libFuzzer target on the shard reader: any bytes given to
 * sa1b_shard_open_memory either fail cleanly or open a shard whose every
 * image, mask (metadata, bits or runs, decoded bitmap), payload CRC, runs
 * and layout can be walked without reading outside the input.  Each input is tried twice:
 * as is, and with its header, footer and table CRCs recomputed (where the
 * header's offsets allow), so that mutations reach the row validation behind
 * the checksums.
 */
#include "sa1b_shard.h"
#include "shard_format.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a message of the library is one line, whatever input it quotes */
static void one_line(const sa1b_error *e)
{
    for (const char *c = e->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
}


static int walk(const uint8_t *data, size_t size)
{
    sa1b_shard *s = NULL;
    sa1b_error err;
    if (sa1b_shard_open_memory(&s, data, size, &err) != SA1B_OK) {
        /* the message is always terminated */
        if (strlen(err.msg) >= sizeof err.msg) abort();
        one_line(&err);
        return 0;
    }
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    uint8_t *bits = NULL;
    volatile uint64_t sink = in->provenance_len + (uint64_t)in->provenance[in->provenance_len];
    /* R x R masks, or source-size ones up to 2^20 pixels (bigger ones are
     * validated by verify and resampled to R = 8, not decoded) */
    const size_t cells = in->mask_size ? (size_t)in->mask_size * in->mask_size : (size_t)1 << 20;
    if (in->n_masks) bits = malloc(cells);
    for (uint64_t i = 0; i < in->n_images; i++) {
        sa1b_shard_image_view im;
        if (sa1b_shard_image(s, i, &im, &err)) abort(); /* validated at open */
        sink += im.file_name[im.file_name_len];
        if (im.payload_len) sink += im.payload[0] + im.payload[im.payload_len - 1];
        if (im.masks_len) sink += im.mask_data[0] + im.mask_data[im.masks_len - 1];
        sa1b_shard_verify_image(s, i, &err);
        for (uint32_t j = 0; j < im.n_masks; j++) {
            sa1b_shard_mask_view m;
            if (sa1b_shard_mask(s, i, j, &m, &err)) abort();
            size_t n = in->mask_size ? cells : (size_t)im.orig_w * im.orig_h;
            if (n <= cells) {
                sa1b_shard_unpack_mask(s, &m, bits);
                sa1b_shard_decode_mask(s, &m, bits, &err); /* packed or runs */
                sink += bits[n - 1];
            }
            if (!in->mask_size && in->image_size >= 8 && sa1b_shard_resample_mask(s, &m, 8, j % 2, bits, &err) == 0)
                sink += bits[63];
            sink += m.bits[m.data_len - 1];
        }
        sa1b_shard_mask_view m;
        if (sa1b_shard_mask(s, i, im.n_masks, &m, &err) != SA1B_ERANGE) abort();
    }
    sa1b_shard_image_view im;
    if (sa1b_shard_image(s, in->n_images, &im, &err) != SA1B_ERANGE) abort();
    uint64_t idx;
    sa1b_shard_find_image(s, 42, &idx, &err);
    sa1b_shard_verify_layout(s, &err);
    (void)sink;
    free(bits);
    sa1b_shard_close(s);
    return 0;
}

/* Stores the CRC32C of [off, off + len) at field, when that span is inside. */
static void fix_crc(uint8_t *d, size_t size, size_t field, uint64_t off, uint64_t len, uint64_t row)
{
    if (row && len > UINT64_MAX / row) return;
    len *= row ? row : 1;
    if (off > size || len > size - off) return;
    shard_st32(d + field, sa1b_crc32c(0, d + off, (size_t)len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    walk(data, size);
    if (size < SA1B_SHARD_HEADER_SIZE + SA1B_SHARD_FOOTER_SIZE) return 0;
    uint8_t *d = malloc(size);
    if (!d) return 0;
    memcpy(d, data, size);
    fix_crc(d, size, HDR_PROV_CRC, shard_ld64(d + HDR_PROV_OFFSET), shard_ld64(d + HDR_PROV_LENGTH), 0);
    fix_crc(d, size, HDR_NAMES_CRC, shard_ld64(d + HDR_NAMES_OFFSET), shard_ld64(d + HDR_NAMES_LENGTH), 0);
    fix_crc(d, size, HDR_INDEX_CRC, shard_ld64(d + HDR_INDEX_OFFSET), shard_ld64(d + HDR_N_IMAGES),
            SA1B_SHARD_INDEX_ROW_SIZE);
    fix_crc(d, size, HDR_MASKTAB_CRC, shard_ld64(d + HDR_MASKTAB_OFFSET), shard_ld64(d + HDR_N_MASKS),
            SA1B_SHARD_MASK_ROW_SIZE);
    uint32_t hcrc = sa1b_crc32c(0, d, HDR_CRC);
    shard_st32(d + HDR_CRC, hcrc);
    uint8_t *f = d + size - SA1B_SHARD_FOOTER_SIZE;
    shard_st32(f + FTR_HEADER_CRC, hcrc);
    shard_st32(f + FTR_CRC, sa1b_crc32c(0, f, FTR_CRC));
    walk(d, size);
    free(d);
    return 0;
}
