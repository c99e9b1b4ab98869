/*
 * test-loader-rle.c - the loader gives byte-identical batches from a shard
 * with packed masks (version 1) and one with runs (version 2) of the same
 * samples: images, masks, counts, points, labels, ids and flips, with and
 * without flips and normalisation, few and many masks per image, one and
 * two workers, and from a list mixing both kinds.
 *
 *   test-loader-rle                 shards written here with the writer API:
 *                                   empty masks, full masks (ones beyond the
 *                                   content too), random and striped ones,
 *                                   landscape, portrait and square images,
 *                                   S/R 64/16, 48/13, 32/32
 *   test-loader-rle A.shard B.shard the same comparison on two given shards
 *                                   (t1610-loader-rle.sh: sa1b-shard's packed
 *                                   and rle output of one tar)
 *   test-loader-rle A B R MODE      B's loader asked for masks at R with MODE
 *                                   (area or nearest): B of source-size masks
 *                                   against A made at R with MODE
 */
#include "sa1b_loader.h"
#include "sa1b_shard.h"
#include "tap.h"
#include "test-rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rs = 0x853C49E6748FEA9Bull;
static uint32_t rnd(uint32_t n) { return trng_below(&rs, n); }

/* Bytes of each array of a batch, in the order of sa1b_batch. */
static int same_batch(const sa1b_batch *a, const sa1b_batch *b)
{
    if (a->count != b->count || a->epoch != b->epoch || a->step != b->step) return 0;
    size_t B = a->B, M = a->M, K = a->K, S = a->S, R = a->R;
    size_t img = a->normalized ? B * 3 * S * S * sizeof(float) : B * S * S * 3;
    return memcmp(a->images, b->images, img) == 0 &&
           memcmp(a->content_size, b->content_size, B * 2 * sizeof(int32_t)) == 0 &&
           memcmp(a->masks, b->masks, B * M * R * R) == 0 &&
           memcmp(a->n_masks, b->n_masks, B * sizeof(int32_t)) == 0 &&
           memcmp(a->n_masks_total, b->n_masks_total, B * sizeof(int32_t)) == 0 &&
           memcmp(a->valid, b->valid, B * M) == 0 &&
           memcmp(a->points, b->points, B * M * K * 2 * sizeof(float)) == 0 &&
           memcmp(a->labels, b->labels, B * M * K * sizeof(int32_t)) == 0 &&
           memcmp(a->image_ids, b->image_ids, B * sizeof(int64_t)) == 0 &&
           memcmp(a->mask_ids, b->mask_ids, B * M * sizeof(int64_t)) == 0 &&
           memcmp(a->flipped, b->flipped, B) == 0;
}

/* Streams of loaders over pa and pb (n paths each) agree batch for batch
 * under several configurations. */
static void compare(const char *what, const char *const *pa, const char *const *pb, size_t n,
                    uint32_t mask_size, int mask_resample)
{
    static const struct {
        uint32_t B, M, K, threads;
        double flip;
        int normalize;
    } cf[] = {{3, 4, 3, 1, 0.0, 0}, {4, 40, 2, 2, 0.5, 0}, {2, 2, 5, 2, 1.0, 1},
              {5, 9, 1, 1, 0.5, 1}};
    for (size_t c = 0; c < sizeof cf / sizeof cf[0]; c++) {
        sa1b_loader_config ca, cb;
        sa1b_loader_config_init(&ca);
        ca.paths = pa;
        ca.n_paths = n;
        ca.batch_size = cf[c].B;
        ca.max_masks = cf[c].M;
        ca.points = cf[c].K;
        ca.threads = cf[c].threads;
        ca.flip_prob = cf[c].flip;
        ca.normalize = cf[c].normalize;
        ca.seed = 11 + c;
        ca.max_epochs = 2;
        cb = ca;
        cb.paths = pb;
        cb.verify = 1; /* runs checked on the way */
        cb.mask_size = mask_size; /* source-size masks: resampled to it */
        cb.mask_resample = mask_resample;
        sa1b_loader *La = NULL, *Lb = NULL;
        sa1b_error e;
        if (sa1b_loader_open(&La, &ca, &e) || sa1b_loader_open(&Lb, &cb, &e)) {
            tap_ok(0, "%s: open: %s", what, e.msg);
            sa1b_loader_close(La);
            continue;
        }
        int batches = 0, differ = 0, ra, rb, masks = 0;
        sa1b_batch *a, *b;
        for (;;) {
            ra = sa1b_loader_next(La, &a, &e);
            rb = sa1b_loader_next(Lb, &b, &e);
            if (ra || rb) break;
            batches++;
            differ += !same_batch(a, b);
            for (uint32_t r = 0; r < a->count; r++) masks += a->n_masks[r];
            sa1b_loader_release(La, a);
            sa1b_loader_release(Lb, b);
        }
        sa1b_loader_close(La);
        sa1b_loader_close(Lb);
        tap_ok(ra == SA1B_EOF && rb == SA1B_EOF && batches > 0 && differ == 0 && masks > 0,
               "%s, B%u M%u K%u flip %.1f%s, %u threads: %d batches (%d masks) identical",
               what, cf[c].B, cf[c].M, cf[c].K, cf[c].flip, cf[c].normalize ? " normalized" : "",
               cf[c].threads, batches - differ, masks);
    }
}

/* Shards of N images at S/R, packed (path a) and runs (path b). */
#define N_ 9
static int write_pair(const char *a, const char *b, uint32_t S, uint32_t R)
{
    sa1b_shard_writer *w[2];
    sa1b_error e;
    for (int f = 0; f < 2; f++) {
        sa1b_shard_params p = {S, R, SA1B_SHARD_RAW, "{}", f ? SA1B_SHARD_RLE : SA1B_SHARD_PACKED};
        if (sa1b_shard_writer_open(&w[f], f ? b : a, &p, &e)) return -1;
    }
    size_t RR = (size_t)R * R;
    uint8_t *img = malloc((size_t)S * S * 3), *bits = malloc(8 * RR);
    sa1b_shard_mask_in m[8];
    int rc = 0;
    for (int i = 0; i < N_ && !rc; i++) {
        uint32_t ow = i % 3 == 0 ? 300 : i % 3 == 1 ? 200 : 250, oh = i % 3 == 1 ? 300 : i % 3 == 0 ? 180 : 250;
        for (size_t k = 0; k < (size_t)S * S * 3; k++) img[k] = (uint8_t)rnd(256);
        uint32_t nm = (uint32_t)i % 9; /* 0..8 masks */
        for (uint32_t j = 0; j < nm; j++) {
            uint8_t *x = bits + j * RR;
            for (size_t k = 0; k < RR; k++) {
                int kind = (int)((j + (uint32_t)i) % 5);
                x[k] = kind == 0   ? 0                           /* empty */
                       : kind == 1 ? 1                           /* full, padding too */
                       : kind == 2 ? (uint8_t)(rnd(3) == 0)      /* noise */
                       : kind == 3 ? (uint8_t)((k / 5) % 3 == 0) /* stripes across rows */
                                   : (uint8_t)(k % R < R / 2 && k / R < R / 3); /* a block */
            }
            memset(&m[j], 0, sizeof m[j]);
            m[j].id = i * 100 + (int)j;
            m[j].bits = x;
            m[j].point[0] = m[j].point[1] = 1.5f;
        }
        sa1b_shard_sample_in s = {0};
        s.image_id = 1000 + i;
        s.orig_w = ow;
        s.orig_h = oh;
        s.scale = (float)S / (float)(ow > oh ? ow : oh);
        s.image = img;
        s.image_len = (size_t)S * S * 3;
        s.n_masks = nm;
        s.masks = m;
        for (int f = 0; f < 2 && !rc; f++) rc = sa1b_shard_writer_add(w[f], &s, &e);
    }
    free(img);
    free(bits);
    for (int f = 0; f < 2; f++) {
        if (rc) sa1b_shard_writer_abort(w[f]);
        else rc = sa1b_shard_writer_finish(w[f], &e);
    }
    if (rc) tap_diag("write: %s", e.msg);
    return rc;
}

int main(int argc, char **argv)
{
    tap_plan(0);
    if (argc == 3 || argc == 5) {
        const char *pa[] = {argv[1]}, *pb[] = {argv[2]};
        compare("given shards", pa, pb, 1, argc == 5 ? (uint32_t)atoi(argv[3]) : 0,
                argc == 5 && strcmp(argv[4], "nearest") == 0);
        return tap_done();
    }
    char dir[] = "/tmp/sa1b-test-loader-rle.XXXXXX";
    if (!mkdtemp(dir)) return 99;
    static const uint32_t SR[][2] = {{64, 16}, {48, 13}, {32, 32}};
    char a[3][80], b[3][80];
    for (int g = 0; g < 3; g++) {
        snprintf(a[g], sizeof a[g], "%s/p%d.shard", dir, g);
        snprintf(b[g], sizeof b[g], "%s/r%d.shard", dir, g);
        char what[64];
        snprintf(what, sizeof what, "S %u R %u", SR[g][0], SR[g][1]);
        if (write_pair(a[g], b[g], SR[g][0], SR[g][1])) {
            tap_ok(0, "%s: write the shards", what);
            continue;
        }
        const char *pa[] = {a[g]}, *pb[] = {b[g]};
        compare(what, pa, pb, 1, 0, 0);
    }
    /* a list mixing both kinds (same S and R) reads as the packed list */
    char c[80];
    snprintf(c, sizeof c, "%s/p0b.shard", dir);
    if (link(a[0], c) == 0) {
        const char *pa[] = {a[0], c}, *pb[] = {a[0], b[0]};
        compare("packed + rle list", pa, pb, 2, 0, 0);
        unlink(c);
    }
    for (int g = 0; g < 3; g++) unlink(a[g]), unlink(b[g]);
    rmdir(dir);
    return tap_done();
}
