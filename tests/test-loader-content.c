/*
 * test-loader-content.c - what the loader puts in a batch and how it
 * behaves: images, content sizes and zero padding, mask selection and
 * padding, positive points inside and negative points outside their masks,
 * flips mirroring image, masks and points together, normalised output,
 * JPEG shards, bounded memory through a counting allocator for a fast and a
 * slow consumer, shutdown in the middle of an epoch, holding every buffer,
 * the skip-or-stop protocol for a damaged sample, and a hostile shard whose
 * masks have bits outside the content.
 */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sa1b_loader.h"
#include "tap.h"
#include "test-loader-util.h"

#define S_ 48
#define R_ 16
#define N_ 20
/* The content checks also run on a shard of S x S JPEG canvases at S=LS_,
 * R=LR_: large enough for the loader's other canvas path (decoded straight
 * into the batch) and the vector mask unpacking (R a multiple of 32). */
#define LS_ 320
#define LR_ 64
static char path_raw[300], path_jpg[300], path_jpc[300], path_bad[300], path_big[300];

static sa1b_loader_config base(const char **pv, uint32_t B)
{
    sa1b_loader_config c;
    sa1b_loader_config_init(&c);
    c.paths = pv;
    c.n_paths = 1;
    c.batch_size = B;
    c.max_masks = 4;
    c.points = 5;
    c.seed = 7;
    c.max_epochs = 1;
    c.threads = 2;
    return c;
}

/* Expected mask j of image g at R (unflipped). */
static void expect_mask(uint64_t g, uint32_t j, uint32_t R, uint32_t wR, uint32_t hR, uint8_t *out)
{
    memset(out, 0, (size_t)R * R);
    uint32_t x0, y0, x1, y1;
    tl_rect(g, j, wR, hR, &x0, &y0, &x1, &y1);
    for (uint32_t y = y0; y < y1; y++)
        for (uint32_t x = x0; x < x1; x++) out[y * R + x] = 1;
}

/* For JPEG shards: the expected pixels are the stored JPEG decoded. */
static sa1b_shard *jsh;
static sa1b_imgctx *jctx;
static uint8_t jrgb[LS_ * LS_ * 3];

typedef struct counts {
    int rows, img_bad, pad_bad, csize_bad, nm_bad, ids_bad, mask_bad, pos_bad, neg_bad,
        lab_bad, first_pos_bad, flips, jpeg_err_max;
} counts;

/* Checks every row of a batch against the generator. */
static void check_batch(const sa1b_batch *o, int jpeg, counts *c)
{
    const uint32_t S = o->S, R = o->R;
    uint8_t want[LR_ * LR_], flipped[LR_ * LR_];
    if (R > LR_ || S > LS_) {
        c->mask_bad++;
        return;
    }
    for (uint32_t b = 0; b < o->B; b++) {
        if (b >= o->count) {
            if (o->image_ids[b] != -1 || o->n_masks[b] != 0) c->pad_bad++;
            for (uint32_t m = 0; m < o->M; m++)
                if (o->valid[b * o->M + m] || o->mask_ids[b * o->M + m] != -1) c->pad_bad++;
            continue;
        }
        c->rows++;
        int64_t id = o->image_ids[b];
        uint64_t g = (uint64_t)(id - 1000);
        uint32_t ow, oh;
        tl_orig(g, &ow, &oh);
        uint32_t mx = ow > oh ? ow : oh;
        uint32_t w = tl_fit(ow, mx, S), h = tl_fit(oh, mx, S);
        uint32_t wR = tl_fit(ow, mx, R), hR = tl_fit(oh, mx, R);
        if (o->content_size[2 * b] != (int32_t)w || o->content_size[2 * b + 1] != (int32_t)h) c->csize_bad++;
        int fl = o->flipped[b];
        c->flips += fl;
        const uint8_t *img = (const uint8_t *)o->images + (size_t)b * S * S * 3;
        if (jpeg) {
            sa1b_shard_image_view v;
            sa1b_error e;
            if (!jsh || sa1b_shard_image(jsh, o->shard_index[b], &v, &e) ||
                sa1b_jpeg_decode(jctx, v.payload, v.payload_len, jrgb, jpeg == 2 ? S : w,
                                 jpeg == 2 ? S : h, &e))
                c->jpeg_err_max = 999;
        }
        for (uint32_t y = 0; y < S; y++)
            for (uint32_t x = 0; x < S; x++)
                for (int ch = 0; ch < 3; ch++) {
                    uint8_t v = img[((size_t)y * S + x) * 3 + ch];
                    if (x >= w || y >= h) {
                        if (v != 0) c->pad_bad++;
                        continue;
                    }
                    uint32_t sx = fl ? w - 1 - x : x;
                    uint8_t e = jpeg ? jrgb[((size_t)y * (jpeg == 2 ? S : w) + sx) * 3 + ch] : tl_px(id, sx, y, ch);
                    int d = abs((int)v - (int)e);
                    if (jpeg) {
                        if (d > c->jpeg_err_max) c->jpeg_err_max = d;
                    } else if (d) {
                        c->img_bad++;
                    }
                }
        uint32_t nm = tl_nmasks(g);
        uint32_t nsel = nm < o->M ? nm : o->M;
        if (o->n_masks[b] != (int32_t)nsel || o->n_masks_total[b] != (int32_t)nm) c->nm_bad++;
        int64_t prev = -1;
        for (uint32_t m = 0; m < o->M; m++) {
            size_t bm = (size_t)b * o->M + m;
            const uint8_t *mk = o->masks + bm * R * R;
            const float *pt = o->points + bm * o->K * 2;
            const int32_t *lab = o->labels + bm * o->K;
            if (m >= nsel) {
                if (o->valid[bm] || o->mask_ids[bm] != -1) c->pad_bad++;
                for (uint32_t i = 0; i < R * R; i++)
                    if (mk[i]) { c->pad_bad++; break; }
                for (uint32_t k = 0; k < o->K; k++)
                    if (lab[k] != -1) c->pad_bad++;
                continue;
            }
            int64_t mid = o->mask_ids[bm];
            if (!o->valid[bm] || mid <= prev || mid < id * 100 || mid >= id * 100 + nm) {
                c->ids_bad++;
                continue;
            }
            prev = mid;
            uint32_t j = (uint32_t)(mid - id * 100);
            expect_mask(g, j, R, wR, hR, want);
            if (fl) {
                memset(flipped, 0, (size_t)R * R);
                for (uint32_t y = 0; y < hR; y++)
                    for (uint32_t x = 0; x < wR; x++) flipped[y * R + x] = want[y * R + (wR - 1 - x)];
                memcpy(want, flipped, (size_t)R * R);
            }
            if (memcmp(mk, want, (size_t)R * R) != 0) c->mask_bad++;
            if (lab[0] != 1) c->first_pos_bad++;
            for (uint32_t k = 0; k < o->K; k++) {
                double x = pt[2 * k], y = pt[2 * k + 1];
                long cx = (long)floor((x + 0.5) * R / S), cy = (long)floor((y + 0.5) * R / S);
                int in = cx >= 0 && cy >= 0 && cx < (long)R && cy < (long)R;
                if (lab[k] == 1) {
                    if (k % 2 || !in || !mk[cy * R + cx]) c->pos_bad++;
                } else if (lab[k] == 0) {
                    if (k % 2 == 0 || !in || cx >= (long)wR || cy >= (long)hR || mk[cy * R + cx]) c->neg_bad++;
                } else if (lab[k] == -1) {
                    /* allowed only for negatives of a mask covering the whole content */
                    if (k % 2 == 0 || !(g % 7 == 3 && j == 0)) c->lab_bad++;
                } else {
                    c->lab_bad++;
                }
            }
        }
    }
}

static void test_content(const char *path, int jpeg, const char *kind)
{
    const char *pv[1] = {path};
    sa1b_error je;
    if (jpeg && (sa1b_shard_open(&jsh, path, &je) || sa1b_imgctx_new(&jctx, &je))) tap_diag("%s", je.msg);
    for (int pass = 0; pass < 2; pass++) {
        sa1b_loader_config c = base(pv, 6);
        c.flip_prob = pass ? 0.5 : 0.0;
        c.max_epochs = 2;
        sa1b_loader *L;
        sa1b_error e;
        counts k;
        memset(&k, 0, sizeof k);
        if (sa1b_loader_open(&L, &c, &e)) {
            tap_ok(0, "%s open: %s", kind, e.msg);
            continue;
        }
        sa1b_batch *b;
        int rc;
        while ((rc = sa1b_loader_next(L, &b, &e)) == SA1B_OK) {
            check_batch(b, jpeg, &k);
            sa1b_loader_release(L, b);
        }
        sa1b_loader_close(L);
        const char *fl = pass ? "flip 0.5" : "no flip";
        tap_ok(rc == SA1B_EOF && k.rows == 2 * N_, "%s, %s: %d rows over 2 epochs", kind, fl, k.rows);
        if (jpeg)
            tap_is_int(k.jpeg_err_max, 0, "%s, %s: image pixels equal the decoded JPEG (mirrored when flipped)", kind, fl);
        else
            tap_is_int(k.img_bad, 0, "%s, %s: image pixels (mirrored within the content when flipped)", kind, fl);
        tap_is_int(k.pad_bad, 0, "%s, %s: padding of images, masks, rows exactly zero / -1", kind, fl);
        tap_is_int(k.csize_bad, 0, "%s, %s: content sizes", kind, fl);
        tap_is_int(k.nm_bad, 0, "%s, %s: n_masks = min(M, masks) and totals", kind, fl);
        tap_is_int(k.ids_bad, 0, "%s, %s: mask ids distinct, ascending, of the image", kind, fl);
        tap_is_int(k.mask_bad, 0, "%s, %s: masks equal the stored ones (mirrored when flipped)", kind, fl);
        tap_is_int(k.first_pos_bad, 0, "%s, %s: point 0 of every mask is positive", kind, fl);
        tap_is_int(k.pos_bad, 0, "%s, %s: every positive point inside its mask", kind, fl);
        tap_is_int(k.neg_bad, 0, "%s, %s: every negative point outside its mask, inside the content", kind, fl);
        tap_is_int(k.lab_bad, 0, "%s, %s: labels alternate, -1 only when no cell is available", kind, fl);
        if (pass) tap_ok(k.flips > 5 && k.flips < 35, "%s: about half flipped (%d of 40)", kind, k.flips);
    }
    sa1b_shard_close(jsh);
    sa1b_imgctx_free(jctx);
    jsh = NULL;
    jctx = NULL;
}

/* flip 0 vs flip 1, same seed: the same points mirrored; normalised output. */
static void test_mirror_and_norm(void)
{
    const char *pv[1] = {path_raw};
    sa1b_loader_config c0 = base(pv, 4), c1 = c0, cn = c0;
    c1.flip_prob = 1.0;
    cn.normalize = 1;
    sa1b_loader *L0, *L1, *Ln;
    sa1b_error e;
    if (sa1b_loader_open(&L0, &c0, &e) || sa1b_loader_open(&L1, &c1, &e) || sa1b_loader_open(&Ln, &cn, &e)) {
        tap_ok(0, "open: %s", e.msg);
        return;
    }
    int pts_bad = 0, img_bad = 0, mask_bad = 0, norm_bad = 0, n = 0;
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    sa1b_batch *a, *b, *z;
    while (sa1b_loader_next(L0, &a, &e) == SA1B_OK && sa1b_loader_next(L1, &b, &e) == SA1B_OK &&
           sa1b_loader_next(Ln, &z, &e) == SA1B_OK) {
        if (!z->normalized || a->normalized) norm_bad++;
        for (uint32_t r = 0; r < a->count; r++, n++) {
            if (a->image_ids[r] != b->image_ids[r] || !b->flipped[r] || a->flipped[r]) { pts_bad++; continue; }
            uint64_t g = (uint64_t)(a->image_ids[r] - 1000);
            uint32_t ow, oh;
            tl_orig(g, &ow, &oh);
            uint32_t mx = ow > oh ? ow : oh, wR = tl_fit(ow, mx, R_);
            uint32_t w = (uint32_t)a->content_size[2 * r], h = (uint32_t)a->content_size[2 * r + 1];
            const uint8_t *ia = (const uint8_t *)a->images + (size_t)r * S_ * S_ * 3;
            const uint8_t *ib = (const uint8_t *)b->images + (size_t)r * S_ * S_ * 3;
            const float *fz = (const float *)z->images + (size_t)r * 3 * S_ * S_;
            for (uint32_t y = 0; y < S_; y++)
                for (uint32_t x = 0; x < S_; x++)
                    for (int ch = 0; ch < 3; ch++) {
                        uint8_t va = ia[(y * S_ + x) * 3 + ch];
                        uint8_t vb = (x < w && y < h) ? ib[(y * S_ + (w - 1 - x)) * 3 + ch] : ib[(y * S_ + x) * 3 + ch];
                        if (va != vb) img_bad++;
                        float f = fz[(size_t)ch * S_ * S_ + y * S_ + x];
                        float want = (x < w && y < h) ? (va / 255.0f - mean[ch]) / sd[ch] : 0.0f;
                        if (x < w && y < h ? fabsf(f - want) > 1e-5f : f != 0.0f) norm_bad++;
                    }
            for (uint32_t m = 0; m < a->M; m++) {
                size_t bm = (size_t)r * a->M + m;
                const uint8_t *ma = a->masks + bm * R_ * R_, *mb = b->masks + bm * R_ * R_;
                for (uint32_t y = 0; y < R_; y++)
                    for (uint32_t x = 0; x < R_; x++) {
                        uint8_t vb = x < wR ? mb[y * R_ + (wR - 1 - x)] : mb[y * R_ + x];
                        if (ma[y * R_ + x] != vb) mask_bad++;
                    }
                for (uint32_t k = 0; k < a->K; k++) {
                    size_t pk = bm * a->K + k;
                    if (a->labels[pk] != b->labels[pk]) pts_bad++;
                    if (a->labels[pk] < 0) continue;
                    double xm = (double)wR * S_ / R_ - 1.0 - a->points[2 * pk];
                    if (fabs(b->points[2 * pk] - xm) > 1e-3 || a->points[2 * pk + 1] != b->points[2 * pk + 1])
                        pts_bad++;
                }
            }
        }
        sa1b_loader_release(L0, a);
        sa1b_loader_release(L1, b);
        sa1b_loader_release(Ln, z);
    }
    tap_is_int(n, N_, "flip 0 and flip 1 streams have the same images");
    tap_is_int(img_bad, 0, "flip mirrors the image within its content");
    tap_is_int(mask_bad, 0, "flip mirrors the masks within their content");
    tap_is_int(pts_bad, 0, "flip mirrors the points: x' = w_R*S/R - 1 - x, y and labels unchanged");
    tap_is_int(norm_bad, 0, "normalised NCHW f32: (v/255 - mean)/std inside, exactly 0 in the padding");
    sa1b_loader_close(L0);
    sa1b_loader_close(L1);
    sa1b_loader_close(Ln);
}

/* stored_point: point 0 of a mask with a stored point is that point
 * (mirrored with a flip); everything else is the stream without it */
static void test_stored_point(double flip)
{
    const char *pv[1] = {path_raw};
    sa1b_loader_config c0 = base(pv, 4), c1 = c0;
    c0.flip_prob = c1.flip_prob = flip;
    c1.stored_point = 1;
    sa1b_loader *L0, *L1;
    sa1b_error e;
    if (sa1b_loader_open(&L0, &c0, &e) || sa1b_loader_open(&L1, &c1, &e)) {
        tap_ok(0, "open: %s", e.msg);
        return;
    }
    int stored = 0, bad = 0, same_bad = 0;
    sa1b_batch *a, *b;
    while (sa1b_loader_next(L0, &a, &e) == SA1B_OK && sa1b_loader_next(L1, &b, &e) == SA1B_OK) {
        for (uint32_t r = 0; r < a->count; r++) {
            uint64_t g = (uint64_t)(a->image_ids[r] - 1000);
            uint32_t ow, oh;
            tl_orig(g, &ow, &oh);
            uint32_t mx = ow > oh ? ow : oh, wR = tl_fit(ow, mx, R_);
            for (uint32_t m = 0; m < a->M; m++) {
                size_t bm = (size_t)r * a->M + m;
                if (!a->valid[bm]) continue;
                int64_t id = a->mask_ids[bm];
                uint32_t j = (uint32_t)(id % 100);
                for (uint32_t k = 0; k < a->K; k++) {
                    size_t pk = bm * a->K + k;
                    if (a->labels[pk] != b->labels[pk]) bad++;
                    if (k == 0 && j % 2 == 0 && a->labels[pk] == 1) {
                        double x = (double)j + 0.25, y = (double)((id / 100) % 7) + 0.5;
                        if (b->flipped[r]) x = (double)wR * S_ / R_ - 1.0 - x;
                        stored++;
                        if (fabs(b->points[2 * pk] - x) > 1e-4 || fabs(b->points[2 * pk + 1] - y) > 1e-4) bad++;
                    } else if (a->points[2 * pk] != b->points[2 * pk] ||
                               a->points[2 * pk + 1] != b->points[2 * pk + 1]) {
                        same_bad++;
                    }
                }
            }
        }
        sa1b_loader_release(L0, a);
        sa1b_loader_release(L1, b);
    }
    tap_ok(stored > 0 && bad == 0, "stored_point (flip %g): point 0 is the stored point (%d masks, %d wrong)",
           flip, stored, bad);
    tap_is_int(same_bad, 0, "stored_point (flip %g): every other point is the random stream's", flip);
    sa1b_loader_close(L0);
    sa1b_loader_close(L1);
}

/* ---- a counting allocator -------------------------------------------------- */

typedef struct counter {
    pthread_mutex_t mu;
    size_t live, peak, calls, frees;
    int bad_free;
} counter;

static void *cnt_alloc(size_t n, void *ctx)
{
    counter *c = ctx;
    void *p = NULL;
    if (posix_memalign(&p, 64, n)) return NULL;
    pthread_mutex_lock(&c->mu);
    c->live += n;
    c->calls++;
    if (c->live > c->peak) c->peak = c->live;
    pthread_mutex_unlock(&c->mu);
    return p;
}

static void cnt_free(void *p, size_t n, void *ctx)
{
    counter *c = ctx;
    pthread_mutex_lock(&c->mu);
    if (n > c->live) c->bad_free = 1;
    else c->live -= n;
    c->frees++;
    pthread_mutex_unlock(&c->mu);
    free(p);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* A hostile shard whose masks have bits set outside the content (every
 * bit of R x R set, for a portrait and a landscape image): the loader's
 * masks are still exactly the content rectangle, zero outside it, with and
 * without flip, on every unpacking way (R = 16 and R = 64), and the point
 * lies inside. */
static void test_bits_outside(const char *dir)
{
    static const uint32_t Rs[2] = {16, 64};
    for (int ri = 0; ri < 2; ri++) {
        uint32_t S = 64, R = Rs[ri];
        char path[512];
        snprintf(path, sizeof path, "%s/outside-%u.shard", dir, R);
        sa1b_error e;
        sa1b_shard_params p = {S, R, SA1B_SHARD_RAW, NULL};
        sa1b_shard_writer *wr;
        uint8_t *img = calloc((size_t)S * S * 3, 1), *bits = malloc((size_t)R * R);
        memset(bits, 1, (size_t)R * R);
        int ok = img && bits && sa1b_shard_writer_open(&wr, path, &p, &e) == SA1B_OK;
        for (int i = 0; ok && i < 2; i++) {
            sa1b_shard_mask_in mi;
            memset(&mi, 0, sizeof mi);
            mi.id = 7 + i;
            mi.area = (float)(R * R);
            mi.point[0] = mi.point[1] = NAN;
            mi.bits = bits;
            sa1b_shard_sample_in smp;
            memset(&smp, 0, sizeof smp);
            smp.image_id = 1 + i;
            smp.orig_w = i ? 300 : 200; /* portrait, then landscape */
            smp.orig_h = i ? 200 : 300;
            smp.scale = (float)S / 300.0f;
            smp.file_name = "x.jpg";
            smp.image = img;
            smp.image_len = (size_t)S * S * 3;
            smp.n_masks = 1;
            smp.masks = &mi;
            ok = sa1b_shard_writer_add(wr, &smp, &e) == SA1B_OK;
        }
        ok = ok && sa1b_shard_writer_finish(wr, &e) == SA1B_OK;
        free(img);
        free(bits);
        if (!ok) {
            tap_ok(0, "bits outside the content: write the shard (R=%u)", R);
            continue;
        }
        int bad = 0, rows = 0;
        for (int fl = 0; fl < 2; fl++) {
            const char *pv[1] = {path};
            sa1b_loader_config c = base(pv, 2);
            c.max_masks = 1;
            c.points = 1;
            c.flip_prob = fl;
            sa1b_loader *L;
            sa1b_batch *b;
            if (sa1b_loader_open(&L, &c, &e)) {
                bad++;
                continue;
            }
            while (sa1b_loader_next(L, &b, &e) == SA1B_OK) {
                for (uint32_t r = 0; r < b->count; r++, rows++) {
                    int portrait = b->image_ids[r] == 1;
                    uint32_t wR = portrait ? tl_fit(200, 300, R) : R, hR = portrait ? R : tl_fit(200, 300, R);
                    const uint8_t *mk = b->masks + (size_t)r * b->M * R * R;
                    for (uint32_t y = 0; y < R; y++)
                        for (uint32_t x = 0; x < R; x++) bad += mk[y * R + x] != (x < wR && y < hR);
                    double px = b->points[(size_t)r * b->M * b->K * 2], py = b->points[(size_t)r * b->M * b->K * 2 + 1];
                    long cx = (long)floor((px + 0.5) * R / S), cy = (long)floor((py + 0.5) * R / S);
                    bad += b->labels[(size_t)r * b->M * b->K] != 1 || cx < 0 || cy < 0 || cx >= (long)wR ||
                           cy >= (long)hR;
                }
                sa1b_loader_release(L, b);
            }
            sa1b_loader_close(L);
        }
        tap_ok(rows == 4 && bad == 0,
               "bits outside the content (R=%u): masks are the content only, point inside, with "
               "and without flip (%d rows, %d bad)", R, rows, bad);
    }
}

static void test_memory(void)
{
    const char *pv[1] = {path_raw};
    for (int slow = 0; slow < 2; slow++) {
        size_t peaks[2] = {0, 0}, bb = 0;
        int ok = 1;
        for (int run = 0; run < 2; run++) {
            counter cn;
            memset(&cn, 0, sizeof cn);
            pthread_mutex_init(&cn.mu, NULL);
            sa1b_allocator al = {cnt_alloc, cnt_free, &cn};
            sa1b_loader_config c = base(pv, 3);
            c.max_epochs = 0; /* forever */
            c.depth = 3;
            c.threads = 2;
            c.allocator = &al;
            int nb = run ? (slow ? 40 : 200) : 10;
            sa1b_loader *L;
            sa1b_error e;
            if (sa1b_loader_open(&L, &c, &e)) {
                ok = 0;
                break;
            }
            bb = sa1b_loader_batch_bytes(L);
            for (int i = 0; i < nb; i++) {
                sa1b_batch *b;
                if (sa1b_loader_next(L, &b, &e)) { ok = 0; break; }
                if (slow) sleep_ms(2);
                sa1b_loader_release(L, b);
            }
            /* stop in the middle of an epoch with batches being filled */
            sa1b_loader_close(L);
            peaks[run] = cn.peak;
            if (cn.live != 0 || cn.bad_free || cn.calls != cn.frees || cn.calls > 3) ok = 0;
            pthread_mutex_destroy(&cn.mu);
        }
        const char *who = slow ? "slow" : "fast";
        tap_ok(ok, "%s consumer: at most depth allocations, all freed at close", who);
        /* buffers are allocated lazily: the short run may use fewer */
        tap_ok(peaks[0] <= 3 * bb && peaks[1] <= 3 * bb,
               "%s consumer: peak %zu bytes after 10 and %zu after %d batches (bound depth 3 x %zu)", who,
               peaks[0], peaks[1], slow ? 40 : 200, bb);
    }
}

/* Holding every buffer is an error, not a deadlock; close with held batches. */
static void test_held(void)
{
    const char *pv[1] = {path_raw};
    sa1b_loader_config c = base(pv, 2);
    c.depth = 2;
    c.max_epochs = 0;
    sa1b_loader *L;
    sa1b_error e;
    if (sa1b_loader_open(&L, &c, &e)) {
        tap_ok(0, "open: %s", e.msg);
        return;
    }
    sa1b_batch *a = NULL, *b = NULL, *x = NULL;
    int r1 = sa1b_loader_next(L, &a, &e), r2 = sa1b_loader_next(L, &b, &e);
    int r3 = sa1b_loader_next(L, &x, &e);
    tap_ok(r1 == 0 && r2 == 0 && r3 == SA1B_EINVAL && x == NULL, "holding all depth buffers: next is EINVAL (%s)", e.msg);
    sa1b_loader_release(L, a);
    r3 = sa1b_loader_next(L, &x, &e);
    tap_ok(r3 == 0 && x && x->step == 2, "after a release the stream goes on");
    sa1b_loader_close(L); /* with b and x held */
    tap_ok(1, "close with held batches in the middle of an epoch");
}

static void test_damaged(void)
{
    const char *pv[1] = {path_bad};
    /* corrupt one byte of image 3's payload */
    sa1b_shard *sh;
    sa1b_error e;
    sa1b_shard_image_view v;
    int fd = -1;
    if (sa1b_shard_open(&sh, path_bad, &e) || sa1b_shard_image(sh, 3, &v, &e)) {
        tap_ok(0, "shard: %s", e.msg);
        return;
    }
    uint64_t off = v.payload_offset + 5;
    sa1b_shard_close(sh);
    uint8_t byte;
    fd = open(path_bad, O_RDWR);
    if (fd < 0 || pread(fd, &byte, 1, (off_t)off) != 1) { tap_ok(0, "pread"); return; }
    byte ^= 0x5a;
    if (pwrite(fd, &byte, 1, (off_t)off) != 1) { tap_ok(0, "pwrite"); return; }
    close(fd);

    for (int verify = 0; verify < 2; verify++) {
        sa1b_loader_config c = base(pv, 4);
        c.verify = verify;
        c.threads = 3;
        sa1b_loader *L;
        if (sa1b_loader_open(&L, &c, &e)) { tap_ok(0, "open: %s", e.msg); return; }
        int images = 0, errors = 0, named = 0, skipped_ok = 0, rc;
        sa1b_batch *b;
        uint64_t err_step = UINT64_MAX;
        for (;;) {
            rc = sa1b_loader_next(L, &b, &e);
            if (rc == SA1B_EOF) break;
            if (rc == SA1B_ECHECKSUM) {
                errors++;
                const char *p = NULL;
                uint64_t idx = 99;
                int64_t id = 0;
                if (sa1b_loader_damaged(L, &p, &idx, &id) && p && strcmp(p, path_bad) == 0 && idx == 3 &&
                    id == 1003 && strstr(e.msg, path_bad) && strstr(e.msg, "image 3"))
                    named = 1;
                tap_diag("reported: %s", e.msg);
                err_step = 1;
                continue; /* skip */
            }
            if (rc) { tap_diag("unexpected %d %s", rc, e.msg); break; }
            if (sa1b_loader_damaged(L, NULL, NULL, NULL)) named = 0;
            int has = 0;
            for (uint32_t i = 0; i < b->count; i++) has |= b->image_ids[i] == 1003;
            if (err_step == 1) {
                skipped_ok = !has && b->count == 3 && b->image_ids[3] == -1;
                err_step = 0;
            }
            images += (int)b->count;
            sa1b_loader_release(L, b);
        }
        sa1b_loader_close(L);
        if (verify) {
            tap_ok(errors == 1 && named, "verify: the damaged sample is reported once with shard and index");
            tap_ok(skipped_ok, "verify: next again delivers the batch without it (count 3, row 3 padding)");
            tap_is_int(images, N_ - 1, "verify: the rest of the epoch is delivered");
        } else {
            tap_ok(rc == SA1B_EOF && errors == 0 && images == N_, "no verify: no error, all %d images", images);
        }
    }
}

/* pad_damaged (after test_damaged damaged image 3 of path_bad): the batch
 * that holds it comes with its row in place as padding, every other row as
 * the intact shard (path_raw, the same images) gives it; the message says
 * the image once. */
static void test_pad_damaged(void)
{
    const char *pv_bad[1] = {path_bad}, *pv_raw[1] = {path_raw};
    sa1b_loader_config cb = base(pv_bad, 4), cr = base(pv_raw, 4);
    cb.verify = cr.verify = 1;
    cb.pad_damaged = 1;
    cb.flip_prob = cr.flip_prob = 0.5;
    sa1b_loader *Lb, *Lr;
    sa1b_error e;
    if (sa1b_loader_open(&Lb, &cb, &e)) { tap_ok(0, "open: %s", e.msg); return; }
    if (sa1b_loader_open(&Lr, &cr, &e)) { tap_ok(0, "open: %s", e.msg); sa1b_loader_close(Lb); return; }
    int reports = 0, once = 0, batches = 0, same = 1, padded = 0, rc;
    for (;;) {
        sa1b_batch *b, *r;
        rc = sa1b_loader_next(Lb, &b, &e);
        if (rc == SA1B_ECHECKSUM) {
            const char *first = strstr(e.msg, "image 3 (id 1003)");
            once = first && !strstr(first + 1, "image 3 (id 1003)");
            tap_diag("reported: %s", e.msg);
            reports++;
            continue;
        }
        int rr = sa1b_loader_next(Lr, &r, &e);
        if (rc == SA1B_EOF || rr == SA1B_EOF) {
            same &= rc == rr;
            break;
        }
        if (rc || rr) { tap_diag("unexpected %d %d %s", rc, rr, e.msg); same = 0; break; }
        batches++;
        same &= b->count == r->count && b->step == r->step && b->next_position == r->next_position;
        size_t img = (size_t)b->S * b->S * 3, msk = (size_t)b->M * b->R * b->R, np = (size_t)b->M * b->K;
        for (uint32_t i = 0; i < b->count && same; i++) {
            if (r->image_ids[i] == 1003) { /* the damaged one: padding in its slot */
                int zero = b->image_ids[i] == -1 && b->n_masks[i] == 0;
                for (size_t k = 0; k < img; k++) zero &= ((const uint8_t *)b->images)[i * img + k] == 0;
                for (uint32_t j = 0; j < b->M; j++) zero &= b->valid[i * b->M + j] == 0;
                for (size_t k = 0; k < np; k++) zero &= b->labels[i * np + k] == -1;
                padded += zero;
                same &= zero;
                continue;
            }
            same &= b->image_ids[i] == r->image_ids[i] && b->flipped[i] == r->flipped[i] &&
                    !memcmp((const uint8_t *)b->images + i * img, (const uint8_t *)r->images + i * img, img) &&
                    !memcmp(b->masks + i * msk, r->masks + i * msk, msk) &&
                    !memcmp(b->valid + i * b->M, r->valid + i * r->M, b->M) &&
                    !memcmp(b->points + i * np * 2, r->points + i * np * 2, np * 2 * sizeof(float)) &&
                    !memcmp(b->labels + i * np, r->labels + i * np, np * sizeof(int32_t));
        }
        sa1b_loader_release(Lb, b);
        sa1b_loader_release(Lr, r);
    }
    sa1b_loader_stats st;
    sa1b_loader_stats_get(Lb, &st);
    sa1b_loader_close(Lb);
    sa1b_loader_close(Lr);
    tap_ok(reports == 1 && once, "pad_damaged: the damaged sample is reported once, the image said once");
    tap_ok(same && padded == 1 && batches > 0,
           "pad_damaged: its row stays in place as padding, every other row, count and position as the intact shard's");
    tap_is_int((int)st.images, N_ - 1, "pad_damaged: the images delivered do not count it");
}

int main(void)
{
    const char *dir = tl_tmpdir();
    if (!dir) tap_skip_all("no temporary directory");
    snprintf(path_raw, sizeof path_raw, "%s/raw.shard", dir);
    snprintf(path_jpg, sizeof path_jpg, "%s/jpg.shard", dir);
    snprintf(path_bad, sizeof path_bad, "%s/bad.shard", dir);
    snprintf(path_jpc, sizeof path_jpc, "%s/jpc.shard", dir);
    snprintf(path_big, sizeof path_big, "%s/big.shard", dir);
    if (tl_write_shard(path_raw, S_, R_, 0, N_, 0) || tl_write_shard(path_bad, S_, R_, 0, N_, 0)) {
        tl_cleanup();
        tap_skip_all("cannot write shards");
    }
    int have_jpg = tl_write_shard(path_jpg, S_, R_, 0, N_, 1) == 0 &&
                   tl_write_shard(path_jpc, S_, R_, 0, N_, 2) == 0 &&
                   tl_write_shard(path_big, LS_, LR_, 0, N_, 2) == 0;
    test_content(path_raw, 0, "raw");
    if (have_jpg) {
        test_content(path_jpg, 1, "jpeg");
        test_content(path_jpc, 2, "jpeg canvas");
        test_content(path_big, 2, "jpeg canvas S=320 R=64");
    } else {
        tap_skip(69, "cannot write a JPEG shard");
    }
    test_mirror_and_norm();
    test_stored_point(0.0);
    test_stored_point(1.0);
    test_bits_outside(dir);
    test_memory();
    test_held();
    test_damaged();
    test_pad_damaged();
    tl_cleanup();
    return tap_done();
}
