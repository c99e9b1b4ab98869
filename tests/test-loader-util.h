/*
 * test-loader-util.h - helpers shared by the loader tests (header only):
 * writes small synthetic shards with the writer API whose content can be
 * recomputed from the image id (pixel values, rectangle masks), and hashes
 * batch rows so that streams can be compared.
 *
 * Image g (id = 1000 + g) is orig_w x orig_h with sizes that vary with g, so
 * content sizes differ; its pixels are px(id, x, y, c) inside the content
 * and 0 outside; it has n_masks(g) masks (0 .. 9), mask j a rectangle of
 * the R x R content region (id = id * 100 + j), some touching the content
 * edge, one covering the whole content when g % 7 == 3.
 */
#ifndef TEST_LOADER_UTIL_H
#define TEST_LOADER_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sa1b_image.h"
#include "sa1b_loader.h"
#include "sa1b_shard.h"

static inline uint32_t tl_fit(uint32_t o, uint32_t m, uint32_t S)
{
    uint64_t v = (2 * (uint64_t)o * S + m) / (2 * (uint64_t)m);
    return v < 1 ? 1 : (uint32_t)v;
}

static inline uint8_t tl_px(int64_t id, uint32_t x, uint32_t y, int c)
{
    return (uint8_t)(1 + (id * 37 + x * 7 + y * 13 + c * 71) % 254);
}

static inline void tl_orig(uint64_t g, uint32_t *ow, uint32_t *oh)
{
    *ow = 300 + (uint32_t)(g % 5) * 97;
    *oh = 300 + (uint32_t)(g % 3) * 131;
}

static inline uint32_t tl_nmasks(uint64_t g) { return (uint32_t)((g * 5 + 2) % 10); }

/* Rectangle of mask j of image g inside the wR x hR content: [x0,x1) x [y0,y1). */
static inline void tl_rect(uint64_t g, uint32_t j, uint32_t wR, uint32_t hR, uint32_t *x0,
                           uint32_t *y0, uint32_t *x1, uint32_t *y1)
{
    if (g % 7 == 3 && j == 0) {
        *x0 = 0; *y0 = 0; *x1 = wR; *y1 = hR;
        return;
    }
    uint32_t a = (uint32_t)((g * 13 + j * 29) % wR), b = (uint32_t)((g * 17 + j * 11) % hR);
    uint32_t cw = 1 + (uint32_t)((g + j * 3) % (wR - a)), ch = 1 + (uint32_t)((g * 3 + j) % (hR - b));
    if (j % 3 == 1) { a = wR - cw; } /* touch the right edge of the content */
    *x0 = a; *y0 = b; *x1 = a + cw; *y1 = b + ch;
}

/* Writes shard `path` holding images g0 .. g0+n-1 (jpeg 0: raw RGB; 1:
 * JPEG of the content region; 2: JPEG of the whole S x S canvas, as
 * sa1b-shard writes; quality 95).  Returns 0 on success. */
static inline int tl_write_shard(const char *path, uint32_t S, uint32_t R, uint64_t g0, uint64_t n,
                                 int jpeg)
{
    sa1b_error e;
    sa1b_shard_params p = {S, R, jpeg ? SA1B_SHARD_JPEG : SA1B_SHARD_RAW, NULL};
    sa1b_shard_writer *wr;
    if (sa1b_shard_writer_open(&wr, path, &p, &e)) {
        fprintf(stderr, "# writer: %s\n", e.msg);
        return -1;
    }
    uint8_t *img = calloc((size_t)S * S * 3, 1);
    uint8_t *bits = calloc((size_t)10 * R * R, 1);
    sa1b_shard_mask_in mi[10];
    sa1b_imgctx *ctx = NULL;
    if (jpeg && sa1b_imgctx_new(&ctx, &e)) return -1;
    int rc = 0;
    for (uint64_t g = g0; g < g0 + n && !rc; g++) {
        int64_t id = 1000 + (int64_t)g;
        uint32_t ow, oh;
        tl_orig(g, &ow, &oh);
        uint32_t m = ow > oh ? ow : oh;
        uint32_t w = tl_fit(ow, m, S), h = tl_fit(oh, m, S);
        uint32_t wR = tl_fit(ow, m, R), hR = tl_fit(oh, m, R);
        memset(img, 0, (size_t)S * S * 3);
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++)
                for (int c = 0; c < 3; c++) img[((size_t)y * S + x) * 3 + c] = tl_px(id, x, y, c);
        uint32_t nm = tl_nmasks(g);
        memset(bits, 0, (size_t)10 * R * R);
        for (uint32_t j = 0; j < nm; j++) {
            uint32_t x0, y0, x1, y1;
            tl_rect(g, j, wR, hR, &x0, &y0, &x1, &y1);
            uint8_t *b = bits + (size_t)j * R * R;
            for (uint32_t y = y0; y < y1; y++)
                for (uint32_t x = x0; x < x1; x++) b[(size_t)y * R + x] = 1;
            memset(&mi[j], 0, sizeof mi[j]);
            mi[j].id = id * 100 + j;
            mi[j].area = (float)((x1 - x0) * (y1 - y0));
            /* a stored SA-1B point on even masks (any place: the loader
             * copies it), none on odd ones */
            mi[j].point[0] = j % 2 ? NAN : (float)j + 0.25f;
            mi[j].point[1] = j % 2 ? NAN : (float)(id % 7) + 0.5f;
            mi[j].bits = b;
        }
        sa1b_shard_sample_in s;
        memset(&s, 0, sizeof s);
        s.image_id = id;
        s.orig_w = ow;
        s.orig_h = oh;
        s.scale = (float)S / (float)m;
        s.file_name = "x.jpg";
        uint8_t *enc = NULL;
        size_t enc_len = 0;
        if (jpeg == 2) {
            rc = sa1b_jpeg_encode(ctx, img, S, S, 95, SA1B_JPEG_OPTIMIZED, &enc, &enc_len, &e);
            if (rc) break;
            s.image = enc;
            s.image_len = enc_len;
        } else if (jpeg) {
            /* the content region, packed */
            uint8_t *c = malloc((size_t)w * h * 3);
            for (uint32_t y = 0; y < h; y++) memcpy(c + (size_t)y * w * 3, img + (size_t)y * S * 3, (size_t)w * 3);
            rc = sa1b_jpeg_encode(ctx, c, w, h, 95, SA1B_JPEG_OPTIMIZED, &enc, &enc_len, &e);
            free(c);
            if (rc) break;
            s.image = enc;
            s.image_len = enc_len;
        } else {
            s.image = img;
            s.image_len = (size_t)S * S * 3;
        }
        s.n_masks = nm;
        s.masks = mi;
        rc = sa1b_shard_writer_add(wr, &s, &e);
        free(enc);
    }
    free(img);
    free(bits);
    sa1b_imgctx_free(ctx);
    if (rc) {
        fprintf(stderr, "# writer add: %s\n", e.msg);
        sa1b_shard_writer_abort(wr);
        return -1;
    }
    if (sa1b_shard_writer_finish(wr, &e)) {
        fprintf(stderr, "# writer finish: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static inline uint64_t tl_fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* Hash of row b of a batch: everything delivered for that sample. */
static inline uint64_t tl_row_hash(const sa1b_batch *o, uint32_t b)
{
    size_t img = (size_t)o->S * o->S * 3 * (o->normalized ? 4 : 1);
    size_t RR = (size_t)o->R * o->R, M = o->M, K = o->K;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    h = tl_fnv(h, (const uint8_t *)o->images + b * img, img);
    h = tl_fnv(h, o->content_size + 2 * b, 8);
    h = tl_fnv(h, o->masks + b * M * RR, M * RR);
    h = tl_fnv(h, o->n_masks + b, 4);
    h = tl_fnv(h, o->valid + b * M, M);
    h = tl_fnv(h, o->points + b * M * K * 2, M * K * 8);
    h = tl_fnv(h, o->labels + b * M * K, M * K * 4);
    h = tl_fnv(h, o->image_ids + b, 8);
    h = tl_fnv(h, o->mask_ids + b * M, M * 8);
    h = tl_fnv(h, o->flipped + b, 1);
    return h;
}

/* A temporary directory, removed (with the files the tests made) by
 * tl_cleanup. */
static char tl_dir[256];
static inline const char *tl_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tl_dir, sizeof tl_dir, "%s/sa1b-loader.XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tl_dir);
}

static inline void tl_cleanup(void)
{
    char cmd[300];
    if (!tl_dir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tl_dir);
    if (system(cmd) != 0) fprintf(stderr, "# cleanup failed\n");
}

#endif
