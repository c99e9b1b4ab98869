/*
 * test-shard.c - the shard writer and reader: CRC32C vectors, writer ->
 * reader round trips of random samples (raw and jpeg payloads, 0 images,
 * images with 0 masks, odd mask sizes), and the reader's defences: every
 * truncation and every single-bit flip of a small shard is caught by open,
 * sa1b_shard_verify_image or sa1b_shard_verify_layout, never a crash.
 * A shard of 11000 images with long names spills all three of the writer's
 * tables (names, index, mask rows) to its temporary files and reads back
 * row for row.
 */
#include "crc32c_internal.h"
#include "sa1b_shard.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float rndf(void) { return (float)(rnd() % 100000) / 100.0f; }

typedef struct sample {
    sa1b_shard_sample_in in;
    sa1b_shard_mask_in *masks;
    uint8_t *image;
    uint8_t **bits;
    char name[32];
} sample;

static void make_sample(sample *s, uint32_t S, uint32_t R, int fmt, uint32_t n_masks, int64_t id)
{
    memset(s, 0, sizeof *s);
    size_t len = fmt == SA1B_SHARD_RAW ? (size_t)S * S * 3 : 1 + rnd() % 3000;
    s->image = malloc(len);
    for (size_t i = 0; i < len; i++) s->image[i] = (uint8_t)rnd();
    snprintf(s->name, sizeof s->name, "sa_%lld.jpg", (long long)id);
    s->masks = calloc(n_masks ? n_masks : 1, sizeof *s->masks);
    s->bits = calloc(n_masks ? n_masks : 1, sizeof *s->bits);
    for (uint32_t j = 0; j < n_masks; j++) {
        sa1b_shard_mask_in *m = &s->masks[j];
        s->bits[j] = malloc((size_t)R * R);
        uint32_t density = rnd() % 100;
        for (size_t k = 0; k < (size_t)R * R; k++) s->bits[j][k] = (rnd() % 100) < density ? (uint8_t)(1 + rnd() % 255) : 0;
        m->id = (int64_t)rnd() << 20 | rnd() % 1000;
        m->area = rndf();
        m->orig_area = (int64_t)rnd();
        for (int q = 0; q < 4; q++) {
            m->bbox[q] = rndf();
            m->orig_bbox[q] = rndf();
        }
        m->predicted_iou = rndf() / 1000;
        m->stability_score = rndf() / 1000;
        m->point[0] = j % 3 == 2 ? NAN : rndf();
        m->point[1] = j % 3 == 2 ? NAN : rndf();
        m->bits = s->bits[j];
    }
    s->in.image_id = id;
    s->in.orig_w = 1 + rnd() % 3000;
    s->in.orig_h = 1 + rnd() % 3000;
    s->in.scale = (float)S / (float)(s->in.orig_w > s->in.orig_h ? s->in.orig_w : s->in.orig_h);
    s->in.file_name = s->name;
    s->in.image = s->image;
    s->in.image_len = len;
    s->in.n_masks = n_masks;
    s->in.masks = s->masks;
}

static void free_sample(sample *s)
{
    for (uint32_t j = 0; j < s->in.n_masks; j++) free(s->bits[j]);
    free(s->bits);
    free(s->masks);
    free(s->image);
}

static int same_float(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static char tmpdir[256];

/* Writes n samples, reopens, compares every field; returns the path. */
static void round_trip(const char *label, uint32_t S, uint32_t R, int fmt, int n, int zero_every)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.shard", tmpdir, label);
    sample *ss = calloc(n ? (size_t)n : 1, sizeof *ss);
    for (int i = 0; i < n; i++)
        make_sample(&ss[i], S, R, fmt, zero_every && i % zero_every == 0 ? 0 : rnd() % 7,
                    1000 + i * 7);
    sa1b_shard_params p = {S, R, fmt, "{\"tool\": \"test-shard\", \"n\": 1}"};
    sa1b_shard_writer *w = NULL;
    sa1b_error err;
    int rc = sa1b_shard_writer_open(&w, path, &p, &err);
    tap_is_int(rc, SA1B_OK, "%s: writer open (%s)", label, rc ? err.msg : "ok");
    if (rc) return;
    for (int i = 0; i < n && !rc; i++) rc = sa1b_shard_writer_add(w, &ss[i].in, &err);
    tap_is_int(rc, SA1B_OK, "%s: %d samples added (%s)", label, n, rc ? err.msg : "ok");
    tap_is_int(sa1b_shard_writer_images(w), n, "%s: image count while writing", label);
    rc = sa1b_shard_writer_finish(w, &err);
    tap_is_int(rc, SA1B_OK, "%s: finish (%s)", label, rc ? err.msg : "ok");

    sa1b_shard *sh = NULL;
    rc = sa1b_shard_open(&sh, path, &err);
    tap_is_int(rc, SA1B_OK, "%s: open (%s)", label, rc ? err.msg : "ok");
    if (rc) return;
    const sa1b_shard_info *in = sa1b_shard_get_info(sh);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += ss[i].in.n_masks;
    int hdr_ok = in->image_size == S && in->mask_size == R && in->image_format == fmt &&
                 in->n_images == (uint64_t)n && in->n_masks == total &&
                 in->provenance_len == strlen(p.provenance) &&
                 strcmp(in->provenance, p.provenance) == 0 && in->version == 1 &&
                 in->mask_bytes == (R * R + 7) / 8 && in->mask_stride % 64 == 0;
    tap_ok(hdr_ok, "%s: header values", label);
    int meta_ok = 1, bits_ok = 1, crc_ok = 1, align_ok = 1;
    uint8_t *unp = malloc((size_t)R * R);
    for (int i = 0; i < n; i++) {
        sa1b_shard_image_view im;
        if (sa1b_shard_image(sh, (uint64_t)i, &im, &err)) { meta_ok = 0; break; }
        meta_ok &= im.image_id == ss[i].in.image_id && im.orig_w == ss[i].in.orig_w &&
                   im.orig_h == ss[i].in.orig_h && same_float(im.scale, ss[i].in.scale) &&
                   strcmp(im.file_name, ss[i].name) == 0 && im.file_name_len == strlen(ss[i].name) &&
                   im.payload_len == ss[i].in.image_len &&
                   memcmp(im.payload, ss[i].image, ss[i].in.image_len) == 0 &&
                   im.n_masks == ss[i].in.n_masks;
        align_ok &= im.payload_offset % 64 == 0 && im.masks_offset % 64 == 0 &&
                    ((uintptr_t)im.payload & 63) == 0;
        crc_ok &= sa1b_shard_verify_image(sh, (uint64_t)i, &err) == SA1B_OK;
        for (uint32_t j = 0; j < im.n_masks; j++) {
            sa1b_shard_mask_view m;
            const sa1b_shard_mask_in *mi = &ss[i].masks[j];
            if (sa1b_shard_mask(sh, (uint64_t)i, j, &m, &err)) { meta_ok = 0; break; }
            meta_ok &= m.id == mi->id && same_float(m.area, mi->area) && m.orig_area == mi->orig_area &&
                       same_float(m.predicted_iou, mi->predicted_iou) &&
                       same_float(m.stability_score, mi->stability_score) &&
                       m.image_index == (uint64_t)i && m.index == im.first_mask + j;
            for (int q = 0; q < 4; q++)
                meta_ok &= same_float(m.bbox[q], mi->bbox[q]) && same_float(m.orig_bbox[q], mi->orig_bbox[q]);
            meta_ok &= (isnan(mi->point[0]) ? isnan(m.point[0]) : m.point[0] == mi->point[0]) &&
                       (isnan(mi->point[1]) ? isnan(m.point[1]) : m.point[1] == mi->point[1]);
            sa1b_shard_unpack_mask(sh, &m, unp);
            for (size_t k = 0; k < (size_t)R * R; k++) bits_ok &= unp[k] == (mi->bits[k] != 0);
            /* the documented bit order: bit k at byte k/8, LSB first */
            for (size_t k = 0; k < (size_t)R * R; k++)
                bits_ok &= ((m.bits[k >> 3] >> (k & 7)) & 1) == (mi->bits[k] != 0);
        }
    }
    free(unp);
    tap_ok(meta_ok, "%s: image and mask metadata", label);
    tap_ok(bits_ok, "%s: mask bits (unpacked and documented order)", label);
    tap_ok(crc_ok, "%s: payload CRCs verify", label);
    tap_ok(align_ok, "%s: payloads 64-byte aligned", label);
    rc = sa1b_shard_verify_layout(sh, &err);
    tap_is_int(rc, SA1B_OK, "%s: layout (%s)", label, rc ? err.msg : "ok");
    sa1b_shard_image_view im;
    sa1b_shard_mask_view mv;
    tap_is_int(sa1b_shard_image(sh, (uint64_t)n, &im, &err), SA1B_ERANGE, "%s: image past the end", label);
    tap_is_int(sa1b_shard_mask(sh, 0, 1000, &mv, &err), n ? SA1B_ERANGE : SA1B_ERANGE,
               "%s: mask past the end", label);
    if (n > 3) {
        uint64_t idx = 0;
        rc = sa1b_shard_find_image(sh, ss[3].in.image_id, &idx, &err);
        tap_ok(rc == SA1B_OK && idx == 3, "%s: find image by id", label);
    }
    sa1b_shard_close(sh);
    for (int i = 0; i < n; i++) free_sample(&ss[i]);
    free(ss);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* 0: intact, 1: open fails, 2: a payload CRC fails, 3: layout fails */
static int detect(const uint8_t *data, size_t len, sa1b_error *err)
{
    sa1b_shard *sh = NULL;
    if (sa1b_shard_open_memory(&sh, data, len, err)) return 1;
    int r = 0;
    for (uint64_t i = 0; i < sa1b_shard_get_info(sh)->n_images && !r; i++)
        if (sa1b_shard_verify_image(sh, i, err)) r = 2;
    if (!r && sa1b_shard_verify_layout(sh, err)) r = 3;
    sa1b_shard_close(sh);
    return r;
}

static void damage(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/small.shard", tmpdir);
    sample ss[3];
    for (int i = 0; i < 3; i++) make_sample(&ss[i], 8, 5, SA1B_SHARD_JPEG, (uint32_t)i, 77 + i);
    sa1b_shard_params p = {8, 5, SA1B_SHARD_JPEG, "{\"x\": 1}"};
    sa1b_shard_writer *w;
    sa1b_error err;
    int rc = sa1b_shard_writer_open(&w, path, &p, &err);
    for (int i = 0; i < 3 && !rc; i++) rc = sa1b_shard_writer_add(w, &ss[i].in, &err);
    if (!rc) rc = sa1b_shard_writer_finish(w, &err);
    tap_is_int(rc, SA1B_OK, "small shard written");
    for (int i = 0; i < 3; i++) free_sample(&ss[i]);
    size_t len = 0;
    uint8_t *data = slurp(path, &len);
    tap_is_int(detect(data, len, &err), 0, "small shard (%zu bytes) intact", len);

    int trunc_ok = 1;
    for (size_t l = 0; l < len; l++) {
        uint8_t *cut = malloc(l ? l : 1);
        memcpy(cut, data, l);
        sa1b_shard *sh = NULL;
        int r = sa1b_shard_open_memory(&sh, cut, l, &err);
        if (r == SA1B_OK) {
            trunc_ok = 0;
            sa1b_shard_close(sh);
        }
        if (l >= 256 && r != SA1B_ETRUNC) trunc_ok = 0;
        free(cut);
    }
    tap_ok(trunc_ok, "every truncation (0..%zu bytes) fails to open (ETRUNC past the header)", len - 1);
    sa1b_shard *sh = NULL;
    sa1b_shard_open_memory(&sh, data, 0, &err);
    tap_is_str(err.msg, "empty file (0 bytes): no shard header", "empty file message");

    int flip_ok = 1, n_open = 0, n_crc = 0, n_layout = 0;
    uint8_t *copy = malloc(len);
    for (size_t byte = 0; byte < len; byte++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, data, len);
            copy[byte] ^= (uint8_t)(1u << bit);
            int r = detect(copy, len, &err);
            if (r == 0) {
                if (flip_ok) tap_diag("flip of bit %d at byte %zu not detected", bit, byte);
                flip_ok = 0;
            }
            n_open += r == 1;
            n_crc += r == 2;
            n_layout += r == 3;
        }
    tap_ok(flip_ok, "every single-bit flip detected (open %d, payload crc %d, layout %d)", n_open,
           n_crc, n_layout);
    free(copy);
    free(data);
}

static void crc_tests(void)
{
    tap_is_int(sa1b_crc32c(0, "123456789", 9), 0xE3069283u, "crc32c check value");
    tap_is_int(sa1b_crc32c_portable(0, "123456789", 9), 0xE3069283u, "portable crc32c check value");
    tap_is_int(sa1b_crc32c(0, "", 0), 0, "crc32c of nothing");
    uint8_t buf[4096 + 16];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)rnd();
    int ok = 1;
    for (int t = 0; t < 300; t++) {
        size_t off = rnd() % 16, len = rnd() % 4096;
        uint32_t a = sa1b_crc32c(0, buf + off, len), b = sa1b_crc32c_portable(0, buf + off, len);
        size_t cut = len ? rnd() % len : 0;
        uint32_t c = sa1b_crc32c(sa1b_crc32c(0, buf + off, cut), buf + off + cut, len - cut);
        ok &= a == b && a == c;
    }
    tap_ok(ok, "fast and portable crc32c agree, chaining works");
    /* long inputs (the three-stream path, blocks of 8 KiB) at every phase */
    size_t big = 3 * 3 * 8192 + 77;
    uint8_t *lb = malloc(big + 8);
    for (size_t i = 0; i < big + 8; i++) lb[i] = (uint8_t)rnd();
    ok = 1;
    size_t lens[] = {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 6 * 8192 + 5, big};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        for (size_t off = 0; off < 8; off += 3) {
            uint32_t a = sa1b_crc32c(0x12345678u, lb + off, lens[k]);
            ok &= a == sa1b_crc32c_portable(0x12345678u, lb + off, lens[k]);
        }
    free(lb);
    tap_ok(ok, "fast and portable crc32c agree on long inputs");
    /* the folding path (AVX-512 VPCLMULQDQ, from 1 KiB on, 256-byte steps)
     * around its thresholds and steps, at every phase, and chained */
    size_t fb = 8 * 1024 + 300;
    uint8_t *fbuf = malloc(fb + 64);
    for (size_t i = 0; i < fb + 64; i++) fbuf[i] = (uint8_t)rnd();
    ok = 1;
    int cases = 0;
    for (size_t len = 1000; len <= fb; len += len < 1600 ? 1 : 97)
        for (size_t off = 0; off < 64; off += len < 1600 ? 21 : 5) {
            uint32_t a = sa1b_crc32c(0xA5A5A5A5u, fbuf + off, len);
            uint32_t b = sa1b_crc32c_portable(0xA5A5A5A5u, fbuf + off, len);
            size_t cut = 1024 + (len * 7) % (len - 999);
            if (cut > len) cut = len;
            uint32_t c = sa1b_crc32c(sa1b_crc32c(0xA5A5A5A5u, fbuf + off, cut), fbuf + off + cut, len - cut);
            ok &= a == b && a == c;
            cases++;
        }
    free(fbuf);
    tap_ok(ok, "fast and portable crc32c agree from 1000 bytes to 8 KiB (%d lengths and phases)", cases);
    /* crc32c_zeros against zeros read: short, around the 8 KiB blocks, long */
    size_t zmax = 3 * 3 * 8192 + 100;
    uint8_t *zeros = calloc(zmax, 1);
    ok = zeros != NULL;
    for (int t = 0; ok && t < 400; t++) {
        size_t n = t < 64 ? (size_t)t : t < 80 ? 3 * 8192 - 8 + (size_t)(t - 64) : rnd() % zmax;
        uint32_t crc = t % 5 == 0 ? 0 : t % 5 == 1 ? 0xFFFFFFFFu : rnd();
        ok &= crc32c_zeros(crc, n) == sa1b_crc32c(crc, zeros, n);
    }
    free(zeros);
    tap_ok(ok, "crc32c_zeros == sa1b_crc32c over zeros");
}

static void bad_params(void)
{
    sa1b_shard_writer *w = NULL;
    sa1b_error err;
    char path[512];
    snprintf(path, sizeof path, "%s/bad.shard", tmpdir);
    sa1b_shard_params p = {16, 32, SA1B_SHARD_RAW, NULL};
    tap_is_int(sa1b_shard_writer_open(&w, path, &p, &err), SA1B_EINVAL, "mask size > image size refused");
    p.mask_size = 4;
    p.image_format = 7;
    tap_is_int(sa1b_shard_writer_open(&w, path, &p, &err), SA1B_EINVAL, "unknown format refused");
    p.image_format = SA1B_SHARD_RAW;
    tap_is_int(sa1b_shard_writer_open(&w, path, &p, &err), SA1B_OK, "writer open");
    uint8_t img[10] = {0};
    sa1b_shard_sample_in s = {1, 10, 10, 1.6f, "x", img, sizeof img, 0, NULL};
    tap_is_int(sa1b_shard_writer_add(w, &s, &err), SA1B_EINVAL, "short raw payload refused");
    uint8_t full[16 * 16 * 3] = {0};
    sa1b_shard_sample_in big = {2, 32769, 10, 0.001f, "y", full, sizeof full, 0, NULL};
    tap_is_int(sa1b_shard_writer_add(w, &big, &err), SA1B_EINVAL,
               "an original size over 32768 refused (the reader's bound: source masks are decoded at it)");
    big.orig_w = 32768;
    tap_is_int(sa1b_shard_writer_add(w, &big, &err), SA1B_OK, "32768 taken");
    sa1b_shard_writer_abort(w);
    tap_ok(access(path, F_OK) != 0, "abort leaves no output");
    sa1b_shard_writer_abort(NULL);
    sa1b_shard_close(NULL);
    /* no temp files either */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp-", tmpdir);
    tap_ok(system(cmd) != 0, "abort removes the temp file");
    sa1b_shard *sh = NULL;
    tap_is_int(sa1b_shard_open(&sh, "/nonexistent/x.shard", &err), SA1B_EIO, "missing file: EIO");
    tap_is_int(sa1b_shard_open(&sh, tmpdir, &err), SA1B_EIO, "directory: EIO");
    const char *text = "this is not a shard, just some text that goes on for a while .......";
    tap_is_int(sa1b_shard_open_memory(&sh, text, strlen(text), &err), SA1B_EFORMAT, "text: EFORMAT");
}

/* add_packed with masks packed by sa1b_shard_pack_mask writes the same
 * bytes as add with the masks as bytes (sa1b-shard packs in its workers),
 * and so does add_packed_crc given the payload's and the masks' checksums;
 * also (v 3) with the packed masks right after the image in one buffer, as
 * sa1b_prep_run lays them out (the writer then writes both at once), or
 * one byte further on (every third sample: not joined). */
static void packed_same(const char *label, uint32_t S, uint32_t R, int fmt, int n)
{
    sample *ss = calloc((size_t)n, sizeof *ss);
    for (int i = 0; i < n; i++) make_sample(&ss[i], S, R, fmt, 1 + rnd() % 6, 5000 + i);
    const size_t stride = (size_t)sa1b_shard_mask_stride(R);
    tap_is_int((long long)stride, (long long)((((size_t)R * R + 7) / 8 + 63) / 64 * 64),
               "%s: mask stride", label);
    char path[4][512];
    int ok = 1, pad_ok = 1;
    for (int v = 0; v < 4; v++) {
        snprintf(path[v], sizeof path[v], "%s/%s-%d.shard", tmpdir, label, v);
        sa1b_shard_params p = {S, R, fmt, "{}"};
        sa1b_shard_writer *w = NULL;
        sa1b_error err;
        if (sa1b_shard_writer_open(&w, path[v], &p, &err)) { ok = 0; break; }
        for (int i = 0; i < n; i++) {
            if (v == 0) {
                ok &= sa1b_shard_writer_add(w, &ss[i].in, &err) == SA1B_OK;
                continue;
            }
            sample *sm = &ss[i];
            /* v 3: the image, then (a byte later on every third sample) the masks */
            const size_t gap = v == 3 ? sm->in.image_len + (i % 3 == 2) : 0;
            void *mem = NULL; /* page-aligned, as a direct write takes it */
            if (posix_memalign(&mem, 4096, gap + stride * sm->in.n_masks)) abort();
            uint8_t *block = mem, *pk = block + gap;
            if (v == 3) memcpy(block, sm->in.image, sm->in.image_len);
            memset(pk, 0xA5, stride * sm->in.n_masks); /* the packer must clear the padding */
            sa1b_shard_mask_in *mm = malloc(sm->in.n_masks * sizeof *mm);
            for (uint32_t j = 0; j < sm->in.n_masks; j++) {
                /* odd samples: masks in reverse order in memory (not one run) */
                size_t at = i % 2 ? sm->in.n_masks - 1 - j : j;
                mm[j] = sm->masks[j];
                sa1b_shard_pack_mask(sm->bits[j], R, pk + at * stride);
                mm[j].bits = pk + at * stride;
                for (size_t k = (size_t)R * R; k < stride * 8; k++)
                    pad_ok &= !((pk[at * stride + (k >> 3)] >> (k & 7)) & 1);
            }
            sa1b_shard_sample_in in = sm->in;
            in.masks = mm;
            if (v == 3) in.image = block;
            if (v == 1) ok &= sa1b_shard_writer_add_packed(w, &in, &err) == SA1B_OK;
            else {
                uint32_t mcrc = 0; /* the stored masks in their order, wherever they lie */
                for (uint32_t j = 0; j < in.n_masks; j++) mcrc = sa1b_crc32c(mcrc, mm[j].bits, stride);
                ok &= sa1b_shard_writer_add_packed_crc(w, &in, sa1b_crc32c(0, in.image, in.image_len),
                                                       mcrc, &err) == SA1B_OK;
            }
            free(mm);
            free(block);
        }
        ok &= sa1b_shard_writer_finish(w, &err) == SA1B_OK;
    }
    tap_ok(pad_ok, "%s: packed padding is zero", label);
    size_t la = 0, lb = 0, lc = 0;
    uint8_t *a = ok ? slurp(path[0], &la) : NULL, *b = ok ? slurp(path[1], &lb) : NULL;
    size_t ld = 0;
    uint8_t *c = ok ? slurp(path[2], &lc) : NULL, *d = ok ? slurp(path[3], &ld) : NULL;
    tap_ok(ok && a && b && la == lb && memcmp(a, b, la) == 0, "%s: add_packed writes the same bytes as add", label);
    tap_ok(ok && a && c && la == lc && memcmp(a, c, la) == 0,
           "%s: add_packed_crc writes the same bytes as add", label);
    tap_ok(ok && a && d && la == ld && memcmp(a, d, la) == 0,
           "%s: add_packed_crc with the masks after the image in memory writes the same bytes", label);
    free(a);
    free(b);
    free(c);
    free(d);
    for (int i = 0; i < n; i++) free_sample(&ss[i]);
    free(ss);
}

/* 11000 images of 2 masks and 100-character names: each table passes the
 * writer's 1 MiB in memory, so its first part goes through the spill file;
 * every row must read back as written, and the checksums hold. */
static void many_rows(void)
{
    const uint32_t N = 11000, S = 2, R = 1;
    char path[600];
    snprintf(path, sizeof path, "%s/many.shard", tmpdir);
    sa1b_shard_params p = {S, R, SA1B_SHARD_RAW, "{\"many\": 1}"};
    sa1b_shard_writer *w = NULL;
    sa1b_error e;
    int rc = sa1b_shard_writer_open(&w, path, &p, &e);
    tap_is_int(rc, SA1B_OK, "many rows: writer opens");
    if (rc) return;
    uint8_t image[12], bits[2] = {1, 0};
    char name[128];
    for (uint32_t i = 0; i < N && !rc; i++) {
        for (int k = 0; k < 12; k++) image[k] = (uint8_t)(i * 7 + (uint32_t)k);
        snprintf(name, sizeof name, "sa_%08u_%090u", i, i);
        sa1b_shard_mask_in m[2];
        memset(m, 0, sizeof m);
        for (int j = 0; j < 2; j++) {
            m[j].id = (int64_t)i * 10 + j;
            m[j].point[0] = (float)i;
            m[j].point[1] = (float)j;
            m[j].bits = &bits[j];
        }
        sa1b_shard_sample_in s = {0};
        s.image_id = (int64_t)i + 1000000000000LL;
        s.orig_w = 3 + i % 5;
        s.orig_h = 2;
        s.scale = 0.5f;
        s.file_name = name;
        s.image = image;
        s.image_len = sizeof image;
        s.n_masks = 2;
        s.masks = m;
        rc = sa1b_shard_writer_add(w, &s, &e);
    }
    tap_is_int(rc, SA1B_OK, "many rows: %u samples added", N);
    if (rc) {
        sa1b_shard_writer_abort(w);
        return;
    }
    rc = sa1b_shard_writer_finish(w, &e);
    tap_is_int(rc, SA1B_OK, "many rows: finish");
    sa1b_shard *sh = NULL;
    rc = rc ? rc : sa1b_shard_open(&sh, path, &e);
    tap_is_int(rc, SA1B_OK, "many rows: opens (table checksums hold)");
    if (rc) return;
    const sa1b_shard_info *in = sa1b_shard_get_info(sh);
    tap_ok(in->n_images == N && in->n_masks == 2ull * N, "many rows: %llu images, %llu masks",
           (unsigned long long)in->n_images, (unsigned long long)in->n_masks);
    uint64_t bad = 0;
    for (uint32_t i = 0; i < N; i++) {
        sa1b_shard_image_view v;
        snprintf(name, sizeof name, "sa_%08u_%090u", i, i);
        if (sa1b_shard_image(sh, i, &v, &e) || v.image_id != (int64_t)i + 1000000000000LL ||
            v.orig_w != 3 + i % 5 || v.n_masks != 2 || v.first_mask != 2ull * i ||
            v.file_name_len != strlen(name) || strcmp(v.file_name, name) != 0 ||
            v.payload_len != 12 || v.payload[11] != (uint8_t)(i * 7 + 11) ||
            sa1b_shard_verify_image(sh, i, &e)) {
            bad++;
            continue;
        }
        for (uint32_t j = 0; j < 2; j++) {
            sa1b_shard_mask_view mv;
            if (sa1b_shard_mask(sh, i, j, &mv, &e) || mv.id != (int64_t)i * 10 + j ||
                mv.image_index != i || mv.point[0] != (float)i || mv.point[1] != (float)j ||
                (mv.bits[0] & 1) != (j == 0))
                bad++;
        }
    }
    tap_ok(bad == 0, "many rows: every image, name and mask row reads back (%llu bad)",
           (unsigned long long)bad);
    tap_is_int(sa1b_shard_verify_layout(sh, &e), SA1B_OK, "many rows: layout verifies");
    sa1b_shard_close(sh);
    unlink(path);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/test-shard.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) tap_skip_all("cannot make a temp directory");
    crc_tests();
    round_trip("raw", 32, 8, SA1B_SHARD_RAW, 9, 4);
    round_trip("raw-odd", 24, 13, SA1B_SHARD_RAW, 5, 2);
    round_trip("jpeg", 64, 16, SA1B_SHARD_JPEG, 12, 5);
    round_trip("empty", 16, 4, SA1B_SHARD_RAW, 0, 0);
    round_trip("one-pixel-mask", 4, 1, SA1B_SHARD_JPEG, 3, 0);
    packed_same("packed", 32, 13, SA1B_SHARD_RAW, 4);
    packed_same("packed-big", 592, 150, SA1B_SHARD_RAW, 6); /* 1 MiB images: direct writes */
    packed_same("packed-jpeg", 64, 16, SA1B_SHARD_JPEG, 3);
    bad_params();
    damage();
    many_rows();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) tap_diag("could not remove %s", tmpdir);
    return tap_done();
}
