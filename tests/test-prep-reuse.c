/*
 * test-prep-reuse.c - sa1b_prep_run with one sa1b_prep_out reused over
 * samples of changing geometry (landscape, portrait, square, thin; the
 * mask grid's zero rows below the content are cleared only where an
 * earlier sample may have left something) gives the very bytes of a fresh
 * sa1b_prep_out per sample: image, every mask's packed bits (or runs) and
 * fields; the runs of --mask-format rle decode to the packed masks; the
 * image's checksum (made in bands during the resize, the padding rows
 * below by crc32c_zeros) is sa1b_crc32c of the payload, raw or jpeg.  Both
 * mask modes, both mask formats, several S and R.  Samples are generated (a flat JPEG
 * and random blob masks encoded as COCO RLE); deterministic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif

#include "sa1b_image.h"
#include "sa1b_prep.h"
#include "sa1b_rle.h"
#include "tap.h"
#include "test-rng.h"

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) { return trng_below(&rs, n); }

typedef struct gen {
    uint8_t *jpg;
    size_t jpg_len;
    char *json;
    size_t json_len;
} gen;

/* A w x h sample with nm blob masks. */
static void make(sa1b_imgctx *ctx, gen *g, uint32_t w, uint32_t h, int nm, int id)
{
    uint8_t *rgb = malloc((size_t)w * h * 3), *m = malloc((size_t)w * h);
    for (size_t i = 0; i < (size_t)w * h * 3; i++) rgb[i] = (uint8_t)(i * 7 + id);
    sa1b_error e;
    if (sa1b_jpeg_encode(ctx, rgb, w, h, 90, SA1B_JPEG_OPTIMIZED, &g->jpg, &g->jpg_len, &e)) tap_diag("encode: %s", e.msg);
    size_t cap = 4096 + (size_t)nm * ((size_t)w * h * 16 + 512);
    g->json = malloc(cap);
    size_t n = (size_t)snprintf(g->json, cap,
                                "{\"image\": {\"image_id\": %d, \"width\": %u, \"height\": %u, "
                                "\"file_name\": \"sa_%d.jpg\"}, \"annotations\": [",
                                id, w, h, id);
    sa1b_rle r = SA1B_RLE_INIT;
    for (int k = 0; k < nm; k++) {
        uint32_t cx = rnd(w), cy = rnd(h), rx = 1 + rnd(w / 2 + 1), ry = 1 + rnd(h / 2 + 1);
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++) {
                double dx = ((double)x - cx) / rx, dy = ((double)y - cy) / ry;
                m[(size_t)y * w + x] = dx * dx + dy * dy <= 1 || rnd(50) == 0;
            }
        char *s;
        size_t sl;
        sa1b_rle_encode(&r, m, h, w, 0, NULL);
        sa1b_rle_to_string(&r, &s, &sl, NULL);
        n += (size_t)snprintf(g->json + n, cap - n,
                              "%s{\"id\": %d, \"segmentation\": {\"size\": [%u, %u], \"counts\": \"",
                              k ? ", " : "", 1000 + k, h, w);
        for (size_t i = 0; i < sl; i++) { /* JSON: the backslash escaped */
            if (s[i] == '\\') g->json[n++] = '\\';
            g->json[n++] = s[i];
        }
        n += (size_t)snprintf(g->json + n, cap - n,
                              "\"}, \"bbox\": [0, 0, 1, 1], \"area\": %llu, \"predicted_iou\": 0.%d, "
                              "\"stability_score\": 0.9, \"crop_box\": [0, 0, %u, %u], "
                              "\"point_coords\": [[%u.5, %u.5]]}",
                              (unsigned long long)sa1b_rle_area(&r), 10 + k, w, h, cx, cy);
        free(s);
    }
    n += (size_t)snprintf(g->json + n, cap - n, "]}");
    g->json_len = n;
    sa1b_rle_free(&r);
    free(rgb);
    free(m);
}

/* 1 when the masks of x, runs, decode to the packed masks of y. */
static int runs_match_packed(const sa1b_shard_sample_in *x, const sa1b_shard_sample_in *y,
                             uint32_t R)
{
    size_t RR = (size_t)R * R, stride = (size_t)sa1b_shard_mask_stride(R), n;
    uint32_t *runs = malloc((RR + 1) * sizeof *runs);
    uint8_t *m = malloc(RR), *pk = malloc(stride);
    int ok = x->n_masks == y->n_masks;
    for (uint32_t k = 0; ok && k < x->n_masks; k++) {
        ok = sa1b_shard_parse_runs(x->masks[k].bits, x->masks[k].data_len, R, runs, RR + 1, &n,
                                   NULL) == 0;
        size_t at = 0;
        for (size_t i = 0; ok && i < n; at += runs[i], i++) memset(m + at, (int)(i % 2), runs[i]);
        if (ok) sa1b_shard_pack_mask(m, R, pk);
        ok = ok && memcmp(pk, y->masks[k].bits, stride) == 0;
    }
    free(runs), free(m), free(pk);
    return ok;
}

/* The checksum of a prepared sample's stored masks, in order. */
static uint32_t masks_crc(const sa1b_shard_sample_in *x, size_t stride)
{
    uint32_t c = 0;
    for (uint32_t k = 0; k < x->n_masks; k++)
        c = sa1b_crc32c(c, x->masks[k].bits, x->masks[k].data_len ? x->masks[k].data_len : stride);
    return c;
}

/* 1 when the two prepared samples are the same bytes (and their image and
 * masks checksums are right). */
static int same(const sa1b_prep_out *a, const sa1b_prep_out *b, uint32_t R)
{
    const sa1b_shard_sample_in *x = &a->sample, *y = &b->sample;
    if (a->image_crc != sa1b_crc32c(0, x->image, x->image_len) ||
        b->image_crc != sa1b_crc32c(0, y->image, y->image_len))
        return 0;
    if (a->masks_crc != masks_crc(x, (size_t)sa1b_shard_mask_stride(R)) ||
        b->masks_crc != masks_crc(y, (size_t)sa1b_shard_mask_stride(R)))
        return 0;
    if (x->image_len != y->image_len || memcmp(x->image, y->image, x->image_len) ||
        x->n_masks != y->n_masks || x->scale != y->scale)
        return 0;
    size_t stride = (size_t)sa1b_shard_mask_stride(R);
    for (uint32_t k = 0; k < x->n_masks; k++) {
        const sa1b_shard_mask_in *p = &x->masks[k], *q = &y->masks[k];
        size_t len = p->data_len ? p->data_len : stride; /* runs, or packed */
        if (p->data_len != q->data_len || memcmp(p->bits, q->bits, len) || p->id != q->id ||
            p->area != q->area ||
            memcmp(p->bbox, q->bbox, sizeof p->bbox))
            return 0;
    }
    return 1;
}

int main(void)
{
#ifdef M_PERTURB
    /* fresh allocations full of nonzero bytes: buffers are never zero by
     * luck (under ASan its own fill does this) */
    mallopt(M_PERTURB, 0x5A);
#endif
    sa1b_imgctx *ctx;
    sa1b_error e;
    if (sa1b_imgctx_new(&ctx, &e)) tap_skip_all("no TurboJPEG context");
    static const uint32_t geo[][2] = {{48, 32}, {32, 48}, {40, 40}, {64, 9}, {9, 64}, {48, 33}, {50, 49}};
    enum { NG = sizeof geo / sizeof geo[0], NS = 24 };
    gen g[NS];
    int order[NS];
    for (int i = 0; i < NS; i++) {
        order[i] = i % 3 == 0 ? i % NG : (int)rnd(NG);
        make(ctx, &g[i], geo[order[i]][0], geo[order[i]][1], 1 + (int)rnd(6), 1 + i);
    }
    tap_plan(0);
    /* S = 256: several bands of rows checksummed during the resize; the
     * last size with jpeg payloads */
    static const uint32_t SR[][2] = {{32, 16}, {32, 8}, {48, 48}, {33, 13}, {16, 16}, {256, 64}, {40, 20}};
    const size_t NSR = sizeof SR / sizeof SR[0];
    for (size_t c = 0; c < NSR; c++)
        for (int mode = 0; mode < 4; mode++) {
            sa1b_prep_opts o;
            sa1b_prep_opts_default(&o);
            o.image_size = SR[c][0];
            o.mask_size = SR[c][1];
            if (c == NSR - 1) o.image_format = SA1B_SHARD_JPEG;
            o.mask_mode = mode % 2 ? SA1B_MASK_NEAREST : SA1B_MASK_AREA;
            o.mask_format = mode >= 2 ? SA1B_SHARD_RLE : SA1B_SHARD_PACKED;
            sa1b_prep_opts op = o; /* the same, packed */
            op.mask_format = SA1B_SHARD_PACKED;
            sa1b_prep_out reused = SA1B_PREP_OUT_INIT;
            int bad = 0, ran = 0, unlike = 0;
            for (int i = 0; i < NS; i++) {
                sa1b_prep_out fresh = SA1B_PREP_OUT_INIT;
                int r1 = sa1b_prep_run(ctx, &o, "s", g[i].jpg, g[i].jpg_len,
                                       (const uint8_t *)g[i].json, g[i].json_len, &reused, &e);
                if (r1) tap_diag("sample %d: %s", i, e.msg);
                int r2 = sa1b_prep_run(ctx, &o, "s", g[i].jpg, g[i].jpg_len,
                                       (const uint8_t *)g[i].json, g[i].json_len, &fresh, &e);
                bad += r1 != r2 || (!r1 && !same(&reused, &fresh, o.mask_size));
                ran += !r1;
                if (o.mask_format == SA1B_SHARD_RLE) {
                    sa1b_prep_out packed = SA1B_PREP_OUT_INIT;
                    unlike += sa1b_prep_run(ctx, &op, "s", g[i].jpg, g[i].jpg_len,
                                            (const uint8_t *)g[i].json, g[i].json_len, &packed,
                                            &e) != 0 ||
                              !runs_match_packed(&fresh.sample, &packed.sample, o.mask_size);
                    sa1b_prep_out_free(&packed);
                }
                sa1b_prep_out_free(&fresh);
            }
            sa1b_prep_out_free(&reused);
            tap_ok(bad == 0 && ran == NS && unlike == 0,
                   "S=%u R=%u %s%s %s: a reused output == a fresh one on %d samples%s",
                   o.image_size, o.mask_size, o.image_format == SA1B_SHARD_JPEG ? "jpeg " : "",
                   mode % 2 ? "nearest" : "area",
                   mode >= 2 ? "rle" : "packed", ran, mode >= 2 ? ", runs == packed" : "");
        }
    /* one output through changing options, mostly packed area masks (whose
     * bits are cleared only in the rows the mask before them in that place
     * may have set): what it knows of those rows must go when R, the mask
     * format or the mode changes */
    sa1b_prep_out reused = SA1B_PREP_OUT_INIT;
    int bad = 0, ran = 0;
    for (int t = 0; t < 8 * NS; t++) {
        sa1b_prep_opts o;
        sa1b_prep_opts_default(&o);
        size_t c = rnd((uint32_t)NSR - 1);
        int mode = rnd(3) ? 0 : 1 + (int)rnd(3), i = t % NS;
        o.image_size = SR[c][0];
        o.mask_size = SR[c][1];
        o.mask_mode = mode % 2 ? SA1B_MASK_NEAREST : SA1B_MASK_AREA;
        o.mask_format = mode >= 2 ? SA1B_SHARD_RLE : SA1B_SHARD_PACKED;
        sa1b_prep_out fresh = SA1B_PREP_OUT_INIT;
        int r1 = sa1b_prep_run(ctx, &o, "s", g[i].jpg, g[i].jpg_len, (const uint8_t *)g[i].json,
                               g[i].json_len, &reused, &e);
        int r2 = sa1b_prep_run(ctx, &o, "s", g[i].jpg, g[i].jpg_len, (const uint8_t *)g[i].json,
                               g[i].json_len, &fresh, &e);
        bad += r1 != r2 || (!r1 && !same(&reused, &fresh, o.mask_size));
        ran += !r1;
        sa1b_prep_out_free(&fresh);
    }
    sa1b_prep_out_free(&reused);
    tap_ok(bad == 0 && ran == 8 * NS,
           "options changing between samples: a reused output == a fresh one on %d samples", ran);
    for (int i = 0; i < NS; i++) {
        free(g[i].jpg);
        free(g[i].json);
    }
    sa1b_imgctx_free(ctx);
    return tap_done();
}
