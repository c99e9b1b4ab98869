/*
 * prep.c - one SA-1B sample to one shard sample (see sa1b_prep.h).
 */
#include "sa1b_prep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "image_internal.h"
#include "sa1b_anno.h"
#include "rle_internal.h"
#include "sa1b_rle.h"

typedef struct prep_buf {
    sa1b_anno anno;
    sa1b_rle *rles;            /* [cap_masks] parsed runs of every annotation: views into runs */
    uint32_t *runs;            /* the runs of all masks of the sample, side by side */
    size_t cap_runs;           /* bytes */
    sa1b_cand *cands;          /* [cap_masks] */
    sa1b_cand *nonempty;       /* [cap_masks] the candidates with a cell at R, */
    size_t *nonempty_at;       /* [cap_masks] and their indices in cands */
    size_t *kept;              /* [cap_masks] */
    size_t cap_masks;
    sa1b_shard_mask_in *masks; /* [cap_masks] */
    uint8_t *bits;             /* the kept masks' runs side by side (RLE formats) */
    size_t cap_bits;
    uint8_t *packed;           /* the kept masks packed, [n_kept * stride]: in image's block,
                                  after the image (sa1b_shard_writer writes both at once) */
    uint32_t *bits_rows;       /* [2 cap_masks] packed area masks: the rows [2k], [2k + 1] - 1
                                  outside which mask k of bits is zero */
    size_t bits_slots;         /* for the masks k < bits_slots (0: nothing known) */
    uint32_t bits_R;           /* the R that bits_rows is about */
    const uint8_t *bits_at;    /* where packed was when bits_rows was made */
    uint64_t *scratch;         /* zeros for rle_resample_area_bits_valid */
    size_t cap_scratch;        /* bytes */
    uint8_t *probe;            /* [stride] zeros: a mask's bits while empty_at_r looks */
    size_t cap_probe;          /* bytes */
    uint8_t *grid;             /* [R * R] content-sized resample target */
    size_t cap_grid;
    uint8_t *full;             /* [R * R] one mask, letterboxed, before packing */
    size_t cap_full;
    uint32_t full_R;           /* the R that full_zero_from is about */
    uint32_t full_zero_from;   /* rows of full from this one on are zero */
    uint8_t *image;            /* [S * S * 3], then (packed masks) packed */
    size_t cap_image;
    uint32_t image_S;          /* the S that image_zero_from is about */
    uint32_t image_zero_from;  /* rows of image from this one on are zero */
    uint8_t *jpeg;             /* re-encoded payload (malloc'ed by the encoder) */
    char file_name[256];
} prep_buf;

void sa1b_prep_opts_default(sa1b_prep_opts *o)
{
    memset(o, 0, sizeof *o);
    o->image_size = 1024;
    o->mask_size = 256;
    o->image_format = SA1B_SHARD_RAW;
    o->jpeg_quality = 90;
    o->jpeg_huffman = SA1B_JPEG_OPTIMIZED;
    o->mask_mode = SA1B_MASK_AREA;
    sa1b_filter_default(&o->filter);
    o->strategy = SA1B_STRATEGY_RANDOM;
}

void sa1b_prep_out_free(sa1b_prep_out *o)
{
    if (!o || !o->priv_) return;
    prep_buf *b = o->priv_;
    sa1b_anno_free(&b->anno);
    free(b->rles), free(b->runs), free(b->cands), free(b->kept), free(b->masks);
    free(b->nonempty), free(b->nonempty_at), free(b->probe);
    free(b->bits), free(b->bits_rows), free(b->scratch), free(b->grid), free(b->full);
    free(b->image), free(b->jpeg);
    free(b);
    memset(o, 0, sizeof *o);
}

/* Grows *p to hold n bytes. */
static int reserve(void *pp, size_t *cap, size_t n)
{
    void **p = pp;
    if (n <= *cap) return 0;
    void *q = realloc(*p, n);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Scratch whose old contents need not survive growth (the image and the
 * packed masks after it, the masks' runs).  From 2 MiB on (--image-size
 * 1024: 3.5 MiB) it is 2 MiB aligned and advised for transparent huge
 * pages, so that the first use of a buffer (a run of a few dozen images
 * fills each ring slot's once) takes a handful of page faults instead of
 * one per 4 KiB, and a direct write from it (the writer's, of the image
 * and the masks after it) pins a few huge pages instead of hundreds of
 * small ones.  A last 2 MiB piece less than half used stays plain, as do
 * smaller buffers: a huge page there would be mostly zeroing of bytes
 * never used (the kernel zeroes each page on first use: 4 MiB of huge
 * pages for a 3 MiB image took 33% more zeroing, the most expensive part
 * on VMs that hand freed memory back to their host; 3.5 MiB take 14%
 * more).  Freed with free(). */
#define BIG_ALIGN ((size_t)2 << 20)
static int reserve_big(uint8_t **p, size_t *cap, size_t n)
{
    if (n <= *cap) return 0;
    if (n < BIG_ALIGN) return reserve(p, cap, n);
    if (n > SIZE_MAX - BIG_ALIGN) return -1;
    const int whole = n % BIG_ALIGN >= BIG_ALIGN / 2; /* the last piece huge too */
    size_t len = whole ? (n + BIG_ALIGN - 1) / BIG_ALIGN * BIG_ALIGN : (n + 4095) / 4096 * 4096;
    void *q = NULL;
    if (posix_memalign(&q, BIG_ALIGN, len) != 0) return -1;
#ifdef MADV_HUGEPAGE
    (void)madvise(q, whole ? len : n / BIG_ALIGN * BIG_ALIGN, MADV_HUGEPAGE); /* advice only */
#endif
    free(*p);
    *p = q;
    *cap = len;
    return 0;
}

/* Grows the runs buffer bits to n bytes, keeping its contents. */
static int reserve_runs(prep_buf *b, size_t n)
{
    if (n <= b->cap_bits) return 0;
    size_t want = n > SIZE_MAX / 2 ? n : 2 * n;
    uint8_t *q = NULL;
    size_t cap = 0;
    if (reserve_big(&q, &cap, want)) return -1;
    if (b->cap_bits) memcpy(q, b->bits, b->cap_bits);
    free(b->bits);
    b->bits = q;
    b->cap_bits = cap;
    return 0;
}

/* The fields of a kept mask but its data: shard coordinates are the
 * source's times scale. */
static void fill_mask_in(sa1b_shard_mask_in *mi, const sa1b_mask_anno *m, const sa1b_cand *c,
                         double scale)
{
    mi->id = m->id;
    mi->area = (float)((double)c->area * scale * scale);
    for (int j = 0; j < 4; j++) {
        mi->bbox[j] = (float)(c->bbox[j] * scale);
        mi->orig_bbox[j] = (float)m->bbox[j];
    }
    mi->orig_area = m->area;
    mi->predicted_iou = (float)m->predicted_iou;
    mi->stability_score = (float)m->stability_score;
    mi->point[0] = m->has_point ? (float)(m->point[0] * scale) : NAN;
    mi->point[1] = m->has_point ? (float)(m->point[1] * scale) : NAN;
}

static int reserve_masks(prep_buf *b, size_t n)
{
    if (n <= b->cap_masks) return 0;
    sa1b_rle *r = realloc(b->rles, n * sizeof *r);
    if (!r) return -1;
    b->rles = r;
    for (size_t i = b->cap_masks; i < n; i++) {
        sa1b_rle z = SA1B_RLE_INIT;
        r[i] = z;
    }
    sa1b_cand *c = realloc(b->cands, n * sizeof *c);
    if (c) b->cands = c;
    size_t *k = realloc(b->kept, n * sizeof *k);
    if (k) b->kept = k;
    sa1b_cand *ne = realloc(b->nonempty, n * sizeof *ne);
    if (ne) b->nonempty = ne;
    size_t *na = realloc(b->nonempty_at, n * sizeof *na);
    if (na) b->nonempty_at = na;
    sa1b_shard_mask_in *m = realloc(b->masks, n * sizeof *m);
    if (m) b->masks = m;
    uint32_t *br = n > SIZE_MAX / (2 * sizeof *br) ? NULL : realloc(b->bits_rows, 2 * n * sizeof *br);
    if (br) b->bits_rows = br;
    if (!c || !k || !ne || !na || !m || !br) return -1;
    b->cap_masks = n;
    return 0;
}

/* The zeros rle_resample_area_bits_valid works in (4 (R + 1) uint64). */
static int reserve_scratch(prep_buf *b, uint32_t R)
{
    const size_t scratch_len = 4 * ((size_t)R + 1) * sizeof *b->scratch; /* R < 2^31 */
    if (b->cap_scratch >= scratch_len) return 0;
    free(b->scratch);
    b->cap_scratch = 0;
    if (!(b->scratch = calloc(1, scratch_len))) return -1;
    b->cap_scratch = scratch_len;
    return 0;
}

/* Whether mask r (area source pixels) has no set cell at R as step 6 of
 * sa1b_prep_run makes it (the content mlb of the R x R grid, o's
 * resampling): 1 empty, 0 not, -1 on error (e).  Source-size masks have
 * no R of their own: empty when they have no pixel.  Uses b->grid (RR
 * bytes, nearest) or b->probe and b->scratch (area), which the caller
 * reserved; b->probe is left zero. */
static int empty_at_r(prep_buf *b, const sa1b_prep_opts *o, const sa1b_rle *r, uint64_t area,
                      const sa1b_letterbox *mlb, sa1b_error *e)
{
    if (area == 0) return 1;
    if (o->mask_format == SA1B_SHARD_RLE_SOURCE) return 0;
    const uint32_t R = o->mask_size;
    if (o->mask_mode == SA1B_MASK_NEAREST) {
        if (rle_resample_nearest_valid(r, mlb->new_h, mlb->new_w, b->grid, e)) return -1;
        const size_t n = (size_t)mlb->new_h * mlb->new_w;
        return memchr(b->grid, 1, n) == NULL;
    }
    uint32_t rows[2];
    if (rle_resample_area_bits_valid(r, mlb->new_h, mlb->new_w, R, b->probe, b->scratch, rows, NULL, e))
        return -1;
    const size_t z0 = (size_t)rows[0] * R / 8, z1 = ((size_t)rows[1] * R + 7) / 8; /* bit y R + x */
    int empty = 1;
    for (size_t i = z0; i < z1 && empty; i++) empty = b->probe[i] == 0;
    if (z1 > z0) memset(b->probe + z0, 0, z1 - z0);
    return empty;
}

int sa1b_prep_run(sa1b_imgctx *ctx, const sa1b_prep_opts *o, const char *name,
                  const uint8_t *jpg, size_t jpg_len, const uint8_t *json, size_t json_len,
                  sa1b_prep_out *out, sa1b_error *err)
{
    if (!out->priv_ && !(out->priv_ = calloc(1, sizeof(prep_buf))))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    prep_buf *b = out->priv_;
    const uint32_t S = o->image_size, R = o->mask_size;
    sa1b_error e;
    sa1b_error_clear(&e);

    /* 1. the annotation: schema, sizes */
    if (sa1b_anno_parse(&b->anno, (const char *)json, json_len, &e))
        return sa1b_error_set(err, e.code, e.offset, "%s.json: %s", name, e.msg);
    const sa1b_anno *a = &b->anno;

    /* 2. the image header agrees with the annotation */
    uint32_t jw, jh;
    if (sa1b_jpeg_size(ctx, jpg, jpg_len, &jw, &jh, &e))
        return sa1b_error_set(err, e.code, e.offset, "%s.jpg: %s", name, e.msg);
    if (jw != a->width || jh != a->height)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "%s.jpg: size %ux%u != annotation %ux%u",
                              name, jw, jh, a->width, a->height);

    /* 3. every mask's runs (validates the strings), area and box from runs;
     * only kmeans looks at the boxes of masks it may drop, the other
     * strategies get the boxes of the kept masks alone (after step 4, or
     * packed area masks from their resample in step 6) */
    if (reserve_masks(b, a->n_masks ? a->n_masks : 1))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    /* The runs of all masks go side by side into one buffer that this
     * sample's strings bound (a string of n characters holds at most n
     * runs), so that what the slot keeps is the largest sample's, not the
     * sum over mask positions of the longest mask ever seen there (which
     * grew with the number of images of the tar).  Each rle is a view:
     * with cap >= the string's length the parser never reallocates it. */
    size_t total = 1;
    for (size_t i = 0; i < a->n_masks; i++) total += a->masks[i].counts_len; /* <= json_len */
    if (total > SIZE_MAX / sizeof *b->runs ||
        reserve(&b->runs, &b->cap_runs, total * sizeof *b->runs))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    const int boxes_first = o->strategy == SA1B_STRATEGY_KMEANS;
    size_t used = 0;
    for (size_t i = 0; i < a->n_masks; i++) {
        const sa1b_mask_anno *m = &a->masks[i];
        sa1b_cand *c = &b->cands[i];
        uint64_t area;
        sa1b_rle *r = &b->rles[i];
        r->cnts = b->runs + used;
        r->cap = m->counts_len;
        r->n = 0;
        if (rle_from_string_area(r, m->h, m->w, m->counts, m->counts_len, &area, &e))
            return sa1b_error_set(err, e.code, e.offset, "%s.json: mask %zu: %s", name, i, e.msg);
        used += r->n;
        c->area = area;
        if (boxes_first) sa1b_rle_bbox(&b->rles[i], c->bbox);
        c->predicted_iou = m->predicted_iou;
        c->stability_score = m->stability_score;
    }

    /* 4. which masks are kept: those of the filter that have a set cell at
     * R (unless keep_empty: a mask that vanishes at the mask resolution is
     * no pair to train on, and an empty prediction would score it IoU 1),
     * then the strategy's among them, so that max_masks counts masks that
     * are there.  A mask's cells are looked at before the strategy only
     * where its choice depends on them (more candidates than max_masks);
     * else every candidate is kept and step 6 drops those it makes empty
     * (the same masks, without resampling each twice), or with keep_empty
     * counts them */
    const int source = o->mask_format == SA1B_SHARD_RLE_SOURCE; /* R 0: the annotation's runs */
    size_t n_pass = 0;
    for (size_t i = 0; o->max_masks && i < a->n_masks; i++) n_pass += sa1b_filter_keeps(&o->filter, &b->cands[i]) != 0;
    const int probe_first = !o->keep_empty && (source || (o->max_masks && n_pass > o->max_masks));
    const int check_late = !source && !probe_first; /* step 6: drop (or count) each empty one */
    sa1b_letterbox mlb;
    memset(&mlb, 0, sizeof mlb);
    if (!source && sa1b_letterbox_geometry(a->width, a->height, R, &mlb, &e))
        return sa1b_error_set(err, e.code, -1, "%s: %s", name, e.msg);
    if (probe_first && !source && (o->mask_mode == SA1B_MASK_NEAREST
                                       ? reserve(&b->grid, &b->cap_grid, (size_t)R * R)
                                       : reserve_scratch(b, R)))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    const size_t probe_len = (size_t)sa1b_shard_mask_stride(R);
    if (probe_first && !source && o->mask_mode == SA1B_MASK_AREA && b->cap_probe < probe_len) {
        free(b->probe);
        b->cap_probe = 0;
        if (!(b->probe = calloc(1, probe_len)))
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
        b->cap_probe = probe_len;
    }
    uint32_t n_empty = 0;
    size_t n_nonempty = 0;
    for (size_t i = 0; probe_first && i < a->n_masks; i++) {
        if (!sa1b_filter_keeps(&o->filter, &b->cands[i])) continue;
        int em = empty_at_r(b, o, &b->rles[i], b->cands[i].area, &mlb, &e);
        if (em < 0) return sa1b_error_set(err, e.code, -1, "%s.json: mask %zu: %s", name, i, e.msg);
        if (em) {
            n_empty++;
            continue;
        }
        b->nonempty[n_nonempty] = b->cands[i];
        b->nonempty_at[n_nonempty++] = i;
    }
    /* without empty masks, the candidates as they are (the same choice) */
    const int compact = n_empty > 0;
    size_t n_kept = 0;
    if (sa1b_subsample(compact ? b->nonempty : b->cands, compact ? n_nonempty : a->n_masks, &o->filter,
                       o->strategy, o->max_masks, o->seed, a->image_id, a->width, a->height, b->kept,
                       &n_kept, &e))
        return sa1b_error_set(err, e.code, -1, "%s: %s", name, e.msg);
    for (size_t k = 0; compact && k < n_kept; k++) b->kept[k] = b->nonempty_at[b->kept[k]];
    for (size_t k = 0; source && o->keep_empty && k < n_kept; k++) /* kept: counted */
        n_empty += b->cands[b->kept[k]].area == 0;
    /* packed area masks get their boxes from the resample's walk (step 6) */
    const int rle = o->mask_format != SA1B_SHARD_PACKED;
    const int area_bits = !rle && o->mask_mode == SA1B_MASK_AREA;
    if (!boxes_first && !area_bits)
        for (size_t k = 0; k < n_kept; k++) sa1b_rle_bbox(&b->rles[b->kept[k]], b->cands[b->kept[k]].bbox);

    /* 5. the image, letterboxed, in a block that also holds the packed
     * masks after it (from the next page on): the writer takes a raw image
     * and the masks that follow it in memory and in the file in one direct
     * write, without copying the masks into its buffer */
    sa1b_letterbox lb;
    const size_t RR = (size_t)R * R, stride = (size_t)sa1b_shard_mask_stride(R);
    const size_t image_len = (size_t)S * S * 3, packed_at = (image_len + 4095) / 4096 * 4096;
    const size_t packed_len = rle ? 0 : (n_kept ? n_kept : 1) * stride;
    const uint8_t *old_image = b->image;
    if (packed_len > SIZE_MAX - packed_at ||
        reserve_big(&b->image, &b->cap_image, packed_at + packed_len))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    b->packed = rle ? NULL : b->image + packed_at;
    if (b->image != old_image || b->image_S != S) { /* nothing known about its rows */
        b->image_S = S;
        b->image_zero_from = S;
    }
    /* the bottom padding is zeroed only where the previous image of this
     * buffer left other bytes; the raw payload's checksum is made here,
     * while the rows are in cache, not by the writer */
    uint32_t image_crc = 0;
    if (image_letterbox(ctx, jpg, jpg_len, S, b->image, &b->image_zero_from, &lb,
                        o->image_format == SA1B_SHARD_JPEG ? NULL : &image_crc, &e))
        return sa1b_error_set(err, e.code, e.offset, "%s.jpg: %s", name, e.msg);
    const uint8_t *payload = b->image;
    size_t payload_len = image_len;
    if (o->image_format == SA1B_SHARD_JPEG) {
        free(b->jpeg);
        b->jpeg = NULL;
        if (sa1b_jpeg_encode(ctx, b->image, S, S, o->jpeg_quality, o->jpeg_huffman, &b->jpeg,
                             &payload_len, &e))
            return sa1b_error_set(err, e.code, -1, "%s: jpeg encode: %s", name, e.msg);
        payload = b->jpeg;
        image_crc = sa1b_crc32c(0, payload, payload_len);
    }

    /* 6. the kept masks, straight from runs to the letterboxed R x R grid,
     * packed here (in the worker) one by one while the grid is in cache */
    const size_t runs_bound = (size_t)sa1b_shard_runs_bound(R);
    size_t runs_used = 0; /* RLE: bytes of runs in bits */
    const uint8_t *old_full = b->full;
    if ((rle && reserve_big(&b->bits, &b->cap_bits, runs_bound)) ||
        reserve(&b->grid, &b->cap_grid, RR) || reserve(&b->full, &b->cap_full, RR))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    if (b->full != old_full || b->full_R != R) { /* nothing known about its rows */
        b->full_R = R;
        b->full_zero_from = R;
    }
    /* packed area masks clear only the rows that the mask before them in
     * this place of packed may have set; nearest masks written there,
     * another block or place in it, or another R: nothing known */
    if (!area_bits || b->packed != b->bits_at || b->bits_R != R) {
        b->bits_R = R;
        b->bits_at = b->packed;
        b->bits_slots = 0;
    }
    if (area_bits && reserve_scratch(b, R))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
    const float scale = (float)lb.scale;
    uint32_t masks_crc = 0; /* each mask's stored bytes checksummed as it is made, in cache */
    for (size_t k = 0; source && k < n_kept; k++) { /* the runs of the source, recoded */
        const sa1b_rle *r = &b->rles[b->kept[k]];
        if (r->n > (SIZE_MAX - runs_used) / 5 - 1 || reserve_runs(b, runs_used + 5 * (r->n + 1)))
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
        b->masks[k].data_len = sa1b_shard_encode_coco_runs(r->cnts, r->n, b->bits + runs_used);
        masks_crc = sa1b_crc32c(masks_crc, b->bits + runs_used, b->masks[k].data_len);
        runs_used += b->masks[k].data_len;
        fill_mask_in(&b->masks[k], &a->masks[b->kept[k]], &b->cands[b->kept[k]], lb.scale);
    }
    /* check_late: a mask made empty is counted, and unless keep_empty
     * dropped (w, where the next mask goes, stays) */
    size_t w = 0; /* masks made (the slot of the next one) */
    for (size_t k = 0; !source && k < n_kept; k++) {
        size_t i = b->kept[k];
        const sa1b_rle *r = &b->rles[i];
        const sa1b_mask_anno *m = &a->masks[i];
        if (area_bits) {
            /* packed area masks: the resample sets the stored bits itself
             * (no R x R byte mask to clear, fill and pack) into zeros,
             * and says which rows it set bits in */
            uint8_t *dst = b->packed + w * stride;
            uint32_t *rows = b->bits_rows + 2 * w;
            if (w < b->bits_slots) { /* bit y R + x of row y */
                size_t z0 = (size_t)rows[0] * R / 8, z1 = ((size_t)rows[1] * R + 7) / 8;
                if (z1 > z0) memset(dst + z0, 0, z1 - z0);
            } else {
                memset(dst, 0, stride);
                b->bits_slots = w + 1; /* w == bits_slots: the masks go in order */
            }
            /* rows: 0, 0 on error (nothing set); the box (kmeans has it) */
            if (rle_resample_area_bits_valid(r, mlb.new_h, mlb.new_w, R, dst, b->scratch, rows,
                                             boxes_first ? NULL : b->cands[i].bbox, &e))
                return sa1b_error_set(err, e.code, -1, "%s.json: mask %zu: %s", name, i, e.msg);
            if (check_late) { /* its slot stays zero outside rows (all of it, when empty) */
                size_t z0 = (size_t)rows[0] * R / 8, z1 = ((size_t)rows[1] * R + 7) / 8;
                int empty = 1;
                for (size_t z = z0; z < z1 && empty; z++) empty = dst[z] == 0;
                n_empty += (uint32_t)empty;
                if (empty && !o->keep_empty) continue;
            }
            masks_crc = sa1b_crc32c(masks_crc, dst, stride);
            b->masks[w].data_len = 0;
            fill_mask_in(&b->masks[w], m, &b->cands[i], lb.scale);
            b->masks[w++].bits = dst;
            continue;
        }
        uint8_t *full = b->full;
        /* content as wide as the grid (landscape, square): straight into
         * the full mask, else through the content-sized grid */
        uint8_t *grid = mlb.new_w == R ? full : b->grid;
        /* rows from new_h on stay as they are below; those from
         * full_zero_from on are zero before and after */
        if (b->full_zero_from < mlb.new_h) b->full_zero_from = mlb.new_h;
        /* the runs are as rle_from_string_area left them: valid, their sum
         * is not checked again */
        int rc = o->mask_mode == SA1B_MASK_NEAREST
                     ? rle_resample_nearest_valid(r, mlb.new_h, mlb.new_w, grid, &e)
                     : rle_resample_area_valid(r, mlb.new_h, mlb.new_w, NULL, grid, &e);
        if (rc) return sa1b_error_set(err, rc, -1, "%s.json: mask %zu: %s", name, i, e.msg);
        if (grid != full)
            for (uint32_t y = 0; y < mlb.new_h; y++) {
                memcpy(full + (size_t)y * R, grid + (size_t)y * mlb.new_w, mlb.new_w);
                memset(full + (size_t)y * R + mlb.new_w, 0, R - mlb.new_w);
            }
        /* the rows below the content: zero already from full_zero_from on
         * (the previous masks of this geometry left them so) */
        if (b->full_zero_from > mlb.new_h) {
            memset(full + (size_t)mlb.new_h * R, 0, (size_t)(b->full_zero_from - mlb.new_h) * R);
            b->full_zero_from = mlb.new_h;
        }
        if (check_late) { /* the content rows (the rest is zero) */
            int empty = memchr(full, 1, (size_t)mlb.new_h * R) == NULL;
            n_empty += (uint32_t)empty;
            if (empty && !o->keep_empty) continue;
        }
        uint8_t *dst = rle ? NULL : b->packed + w * stride;
        if (rle) { /* runs side by side; pointers set once the buffer stops moving */
            if (reserve_runs(b, runs_used + runs_bound))
                return sa1b_error_set(err, SA1B_ENOMEM, -1, "%s: out of memory", name);
            b->masks[w].data_len = sa1b_shard_encode_runs(full, R, b->bits + runs_used);
            masks_crc = sa1b_crc32c(masks_crc, b->bits + runs_used, b->masks[w].data_len);
            runs_used += b->masks[w].data_len;
        } else {
            sa1b_shard_pack_mask(full, R, dst);
            masks_crc = sa1b_crc32c(masks_crc, dst, stride);
            b->masks[w].data_len = 0;
        }

        fill_mask_in(&b->masks[w], m, &b->cands[i], lb.scale);
        b->masks[w++].bits = dst;
    }
    if (!source) n_kept = w;
    for (size_t k = 0, at = 0; rle && k < n_kept; at += b->masks[k].data_len, k++)
        b->masks[k].bits = b->bits + at;

    snprintf(b->file_name, sizeof b->file_name, "%s", a->file_name);
    sa1b_shard_sample_in *s = &out->sample;
    s->image_id = a->image_id;
    s->orig_w = a->width;
    s->orig_h = a->height;
    s->scale = scale;
    s->file_name = b->file_name;
    s->image = payload;
    s->image_len = payload_len;
    s->n_masks = (uint32_t)n_kept;
    s->masks = b->masks;
    out->masks_in = (uint32_t)a->n_masks;
    out->masks_kept = (uint32_t)n_kept;
    out->masks_empty = n_empty;
    out->image_crc = image_crc;
    out->masks_crc = masks_crc;
    return SA1B_OK;
}
