/*
 * fuzz-rle-input.c - libFuzzer target on sa1b-rle's input parsers
 * (shard-tools/rle_input.c, the code the program runs).  The first byte
 * picks the parser, the rest is its input:
 *   0: the info stream (annotation files, JSON lines): every mask that
 *      parses is measured (area, both bboxes, runs re-encoded and re-read);
 *   1: a mask argument (JSON or HxW:COUNTS, NUL-terminated here as argv is);
 *   2: a binary PGM, encoded as the program does;
 *   3: a PNG, likewise.
 * Every reason handed back must be one line without control bytes; the
 * line numbers of the stream never go back.  Violations abort.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rle_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) abort();
}

/* What the program does with a mask it accepted, without decoding one of
 * more than 2^20 pixels. */
static void use(const sa1b_rle *r)
{
    double bb[4], sb[4];
    sa1b_rle_bbox(r, bb);
    sa1b_rle_bbox_sa1b(r, sb);
    uint64_t area = sa1b_rle_area(r);
    if (area > (uint64_t)r->h * r->w) abort();
    char *s = NULL;
    sa1b_error err;
    if (sa1b_rle_to_string(r, &s, NULL, &err) == SA1B_OK) {
        sa1b_rle back = SA1B_RLE_INIT;
        if (sa1b_rle_from_string(&back, r->h, r->w, s, strlen(s), &err) != SA1B_OK) abort();
        if (sa1b_rle_area(&back) != area) abort();
        sa1b_rle_free(&back);
    }
    free(s);
    if ((uint64_t)r->h * r->w <= ((uint64_t)1 << 20)) {
        uint8_t *pix = malloc((size_t)r->h * r->w + 1);
        if (pix) {
            sa1b_rle_decode(r, pix, 0);
            sa1b_rle again = SA1B_RLE_INIT;
            if (sa1b_rle_encode(&again, pix, r->h, r->w, 0, &err) != SA1B_OK) abort();
            if (sa1b_rle_area(&again) != area) abort();
            sa1b_rle_free(&again);
            free(pix);
        }
    }
}

typedef struct stream_ctx {
    size_t last_line;
    sa1b_rle r;
} stream_ctx;

static void on_mask(void *ctx, json_t *holder, json_t *seg, size_t line)
{
    stream_ctx *c = ctx;
    (void)holder;
    if (line < 1) abort();
    sa1b_error err;
    sa1b_error_clear(&err);
    if (rle_input_mask_json(seg, &c->r, &err) == SA1B_OK) use(&c->r);
    else {
        if (err.code == SA1B_OK || !err.msg[0]) abort();
        one_line(err.msg);
    }
}

static void on_bad(void *ctx, size_t line, const char *why)
{
    stream_ctx *c = ctx;
    if (line < 1) abort();
    c->last_line = line;
    one_line(why);
}

static void encode(const uint8_t *pix, uint32_t h, uint32_t w)
{
    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error err;
    if (sa1b_rle_encode(&r, pix, h, w, 0, &err) == SA1B_OK) use(&r);
    else one_line(err.msg);
    sa1b_rle_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    switch (data[0] & 3) {
    case 0: {
        stream_ctx c = {0, SA1B_RLE_INIT};
        rle_input_stream_cb cb = {on_mask, on_bad, &c};
        rle_input_stream((const char *)in, len, &cb);
        sa1b_rle_free(&c.r);
        break;
    }
    case 1: {
        char *arg = malloc(len + 1);
        if (!arg) return 0;
        memcpy(arg, in, len);
        arg[len] = '\0';
        sa1b_rle r = SA1B_RLE_INIT;
        char why[512];
        int rc = rle_input_mask_arg(arg, &r, why, sizeof why);
        if (rc == 0) use(&r);
        else if (rc == RLE_ARG_BAD || rc == RLE_ARG_USAGE) one_line(why);
        else abort();
        sa1b_rle_free(&r);
        char *e = rle_input_escape(arg, len);
        if (e) one_line(e);
        free(e);
        free(arg);
        break;
    }
    case 2: {
        uint32_t h, w;
        const uint8_t *pix;
        const char *why;
        if (rle_input_pgm(in, len, &h, &w, &pix, &why) == 0) {
            if ((uint64_t)h * w > len) abort();
            encode(pix, h, w);
        } else one_line(why);
        break;
    }
    default: {
        pngio_image img;
        char msg[256];
        if (rle_input_png(in, len, SA1B_RLE_MAX_PIXELS, &img, msg, sizeof msg) == 0) {
            encode(img.pix, img.h, img.w);
            pngio_free(&img);
        } else one_line(msg);
        break;
    }
    }
    return 0;
}
