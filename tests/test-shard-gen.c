/*
 * test-shard-gen.c - test helper for the shard tool tests (not a test by
 * itself).  Writes deterministic shards through the library writer and
 * checks the tools' outputs against what was written:
 *
 *   test-shard-gen gen OUT [-n IMAGES] [-s S] [-r R] [-f raw|jpeg] [-m MASKS] [--seed K]
 *   test-shard-gen slow OUT              adds an image every 50 ms, forever
 *   test-shard-gen check-inspect SHARD JSONL   sa1b-inspect --rle output vs the samples
 *   test-shard-gen check-export PNG SHARD INDEX  sa1b-export pixels vs sa1b-export(1)
 *   test-shard-gen corpus DIR            small valid and damaged shards for the fuzzer
 *   test-shard-gen flip FILE OFFSET BIT  flips one bit of FILE in place
 *
 * Sample i of a shard is a pure function of (seed, i, S, R, format, masks),
 * all recorded in the provenance, so the checkers regenerate it.  Exit 0
 * when a check passes, 1 with a message on stderr when not.
 */
#include "palette.h"
#include "sa1b_image.h"
#include "sa1b_rle.h"
#include "sa1b_shard.h"
#include "shard_format.h"

#include <jansson.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct gen_params {
    uint32_t n, S, R, masks;
    int fmt;
    uint64_t seed;
} gen_params;

typedef struct gen_sample {
    sa1b_shard_sample_in in;
    sa1b_shard_mask_in m[64];
    uint8_t *bits[64];
    uint8_t *rgb; /* S*S*3, the raw image (also before JPEG encoding) */
    uint8_t *jpeg;
    char name[32];
} gen_sample;

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void gen_fill(gen_sample *g, const gen_params *p, uint32_t i, sa1b_imgctx *ctx)
{
    memset(g, 0, sizeof *g);
    uint64_t h = mix(p->seed * 1000003 + i);
    uint32_t S = p->S, R = p->R;
    g->in.image_id = 100 + (int64_t)i * 3;
    g->in.orig_w = 1500 + (uint32_t)(h % 700);
    g->in.orig_h = 1000 + (uint32_t)((h >> 16) % 500);
    uint32_t mx = g->in.orig_w > g->in.orig_h ? g->in.orig_w : g->in.orig_h;
    g->in.scale = (float)S / (float)mx;
    snprintf(g->name, sizeof g->name, "sa_%lld.jpg", (long long)g->in.image_id);
    g->in.file_name = g->name;
    g->rgb = malloc((size_t)S * S * 3);
    for (uint32_t y = 0; y < S; y++)
        for (uint32_t x = 0; x < S; x++) {
            uint8_t *px = g->rgb + ((size_t)y * S + x) * 3;
            px[0] = (uint8_t)(60 + x * 120 / S);
            px[1] = (uint8_t)(60 + y * 120 / S);
            px[2] = (uint8_t)(60 + (i * 40) % 120);
        }
    if (p->fmt == SA1B_SHARD_JPEG) {
        size_t len = 0;
        if (sa1b_jpeg_encode(ctx, g->rgb, S, S, 95, SA1B_JPEG_OPTIMIZED, &g->jpeg, &len, NULL)) exit(3);
        g->in.image = g->jpeg;
        g->in.image_len = len;
    } else {
        g->in.image = g->rgb;
        g->in.image_len = (size_t)S * S * 3;
    }
    uint32_t nm = p->masks ? (uint32_t)((h >> 32) % (p->masks + 1)) : 0;
    if (i == 1) nm = 0; /* always one image without masks */
    if (nm > 64) nm = 64;
    g->in.n_masks = nm;
    g->in.masks = g->m;
    double cell = (double)S / R;
    for (uint32_t j = 0; j < nm; j++) {
        uint64_t q = mix(h + j + 1);
        uint32_t cx = (uint32_t)(q % R), cy = (uint32_t)((q >> 12) % R);
        uint32_t rad = 1 + (uint32_t)((q >> 24) % (R / 3 + 1));
        uint8_t *b = g->bits[j] = calloc((size_t)R * R, 1);
        uint32_t x0 = R, y0 = R, x1 = 0, y1 = 0, area = 0;
        for (uint32_t y = 0; y < R; y++)
            for (uint32_t x = 0; x < R; x++) {
                int64_t dx = (int64_t)x - cx, dy = (int64_t)y - cy;
                int in = j % 2 ? (dx * dx + dy * dy <= (int64_t)rad * rad)
                               : (llabs(dx) <= rad && llabs(dy) <= rad / 2 + 1);
                if (!in) continue;
                b[(size_t)y * R + x] = 1;
                area++;
                if (x < x0) x0 = x;
                if (y < y0) y0 = y;
                if (x > x1) x1 = x;
                if (y > y1) y1 = y;
            }
        sa1b_shard_mask_in *m = &g->m[j];
        m->id = ((int64_t)1 << 33) + (int64_t)i * 1000 + j;
        m->area = (float)(area * cell * cell);
        m->bbox[0] = (float)(x0 * cell);
        m->bbox[1] = (float)(y0 * cell);
        m->bbox[2] = (float)((x1 - x0 + 1) * cell - 1);
        m->bbox[3] = (float)((y1 - y0 + 1) * cell - 1);
        m->orig_area = (int64_t)(m->area / (g->in.scale * g->in.scale));
        for (int k = 0; k < 4; k++) m->orig_bbox[k] = m->bbox[k] / g->in.scale;
        m->predicted_iou = 0.5f + (float)(q % 1000) / 1000.0f;
        m->stability_score = 0.9f + (float)((q >> 10) % 100) / 1000.0f;
        if (j % 5 == 4) {
            m->point[0] = m->point[1] = NAN;
        } else {
            m->point[0] = (float)((cx + 0.5) * cell);
            m->point[1] = (float)((cy + 0.5) * cell);
        }
        m->bits = b;
    }
}

static void gen_free(gen_sample *g)
{
    for (uint32_t j = 0; j < g->in.n_masks; j++) free(g->bits[j]);
    free(g->rgb);
    free(g->jpeg);
}

static char *gen_provenance(const gen_params *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "tool", json_string("test-shard-gen"));
    json_object_set_new(o, "seed", json_integer((json_int_t)p->seed));
    json_object_set_new(o, "images", json_integer(p->n));
    json_object_set_new(o, "masks", json_integer(p->masks));
    json_t *opt = json_object();
    json_object_set_new(opt, "strategy", json_string("quality"));
    json_object_set_new(opt, "max_masks", json_integer(p->masks));
    json_object_set_new(o, "options", opt);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static int gen_params_from(const sa1b_shard *s, gen_params *p)
{
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    json_t *o = json_loadb(in->provenance, in->provenance_len, 0, NULL);
    if (!o) return -1;
    p->seed = (uint64_t)json_integer_value(json_object_get(o, "seed"));
    p->n = (uint32_t)json_integer_value(json_object_get(o, "images"));
    p->masks = (uint32_t)json_integer_value(json_object_get(o, "masks"));
    json_decref(o);
    p->S = in->image_size;
    p->R = in->mask_size;
    p->fmt = in->image_format;
    return 0;
}

static int write_shard(const char *out, const gen_params *p, int slow)
{
    sa1b_imgctx *ctx = NULL;
    sa1b_error err;
    if (sa1b_imgctx_new(&ctx, &err)) return fprintf(stderr, "imgctx: %s\n", err.msg), 1;
    char *prov = gen_provenance(p);
    sa1b_shard_params sp = {p->S, p->R, p->fmt, prov};
    sa1b_shard_writer *w = NULL;
    int rc = sa1b_shard_writer_open(&w, out, &sp, &err);
    for (uint32_t i = 0; !rc && (slow || i < p->n); i++) {
        gen_sample g;
        gen_fill(&g, p, slow ? i % 4 : i, ctx);
        rc = sa1b_shard_writer_add(w, &g.in, &err);
        gen_free(&g);
        if (slow) {
            if (i == 0) {
                printf("started\n");
                fflush(stdout);
            }
            usleep(50000);
        }
    }
    if (!rc) rc = sa1b_shard_writer_finish(w, &err);
    else sa1b_shard_writer_abort(w);
    free(prov);
    sa1b_imgctx_free(ctx);
    if (rc) fprintf(stderr, "test-shard-gen: %s\n", err.msg);
    return rc ? 1 : 0;
}

/* ---- check-inspect ---------------------------------------------------- */

static int fail_n = 0;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (fail_n++ < 20) {                                                                   \
                fprintf(stderr, "check: ");                                                        \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static int close_to(json_t *v, double want)
{
    if (isnan(want)) return json_is_null(v);
    if (!json_is_number(v)) return 0;
    double got = json_number_value(v);
    return fabs(got - want) <= 1e-6 * fmax(1.0, fabs(want)) && (float)got == (float)want;
}

static int check_inspect(const char *shard, const char *jsonl)
{
    sa1b_shard *s = NULL;
    sa1b_error err;
    if (sa1b_shard_open(&s, shard, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    gen_params p;
    if (gen_params_from(s, &p)) return fprintf(stderr, "provenance is not ours\n"), 1;
    FILE *f = fopen(jsonl, "r");
    if (!f) return perror(jsonl), 1;
    sa1b_imgctx *ctx = NULL;
    sa1b_imgctx_new(&ctx, NULL);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint32_t img = 0, mask = 0, lines = 0;
    int64_t cur = -1;
    gen_sample g;
    int have = 0;
    sa1b_rle rle = SA1B_RLE_INIT;
    uint8_t *dec = malloc((size_t)p.R * p.R);
    while ((n = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        CHECK(o, "line %u is not JSON: %s", lines + 1, je.text);
        lines++;
        if (!o) continue;
        const char *type = json_string_value(json_object_get(o, "type"));
        CHECK(type, "line %u has no type", lines);
        if (!type) type = "";
        CHECK(strcmp(json_string_value(json_object_get(o, "file")), shard) == 0, "line %u: file", lines);
        if (strcmp(type, "shard") == 0) {
            CHECK(lines == 1, "shard line not first");
            CHECK(json_integer_value(json_object_get(o, "images")) == p.n, "images count");
            CHECK(json_integer_value(json_object_get(o, "image_size")) == p.S, "image_size");
            CHECK(json_integer_value(json_object_get(o, "mask_size")) == p.R, "mask_size");
            CHECK(strcmp(json_string_value(json_object_get(o, "image_format")),
                         p.fmt ? "jpeg" : "raw") == 0, "image_format");
            CHECK(json_integer_value(json_object_get(json_object_get(o, "provenance"), "seed")) ==
                      (json_int_t)p.seed, "provenance.seed");
        } else if (strcmp(type, "image") == 0) {
            if (have) {
                CHECK(mask == g.in.n_masks, "image %lld: %u mask lines, want %u", (long long)cur, mask, g.in.n_masks);
                gen_free(&g);
            }
            gen_fill(&g, &p, img, ctx);
            have = 1;
            mask = 0;
            cur = (int64_t)img;
            CHECK(json_integer_value(json_object_get(o, "index")) == img, "image %u: index", img);
            CHECK(json_integer_value(json_object_get(o, "image_id")) == g.in.image_id, "image %u: image_id", img);
            CHECK(json_integer_value(json_object_get(o, "width")) == g.in.orig_w, "image %u: width", img);
            CHECK(json_integer_value(json_object_get(o, "height")) == g.in.orig_h, "image %u: height", img);
            CHECK(close_to(json_object_get(o, "scale"), g.in.scale), "image %u: scale", img);
            CHECK(json_integer_value(json_object_get(o, "masks")) == g.in.n_masks, "image %u: masks", img);
            CHECK(json_integer_value(json_object_get(o, "image_bytes")) == (json_int_t)g.in.image_len,
                  "image %u: image_bytes", img);
            CHECK(strcmp(json_string_value(json_object_get(o, "file_name")), g.name) == 0, "image %u: file_name", img);
            img++;
        } else if (strcmp(type, "mask") == 0) {
            CHECK(have && mask < g.in.n_masks, "unexpected mask line %u", lines);
            if (!have || mask >= g.in.n_masks) { json_decref(o); continue; }
            const sa1b_shard_mask_in *m = &g.m[mask];
            CHECK(json_integer_value(json_object_get(o, "image_id")) == g.in.image_id, "mask image_id");
            CHECK(json_integer_value(json_object_get(o, "id")) == m->id, "mask %u: id", mask);
            CHECK(close_to(json_object_get(o, "area"), m->area), "mask %u: area", mask);
            CHECK(json_integer_value(json_object_get(o, "orig_area")) == m->orig_area, "mask %u: orig_area", mask);
            for (int k = 0; k < 4; k++) {
                CHECK(close_to(json_array_get(json_object_get(o, "bbox"), (size_t)k), m->bbox[k]), "mask %u: bbox[%d]", mask, k);
                CHECK(close_to(json_array_get(json_object_get(o, "orig_bbox"), (size_t)k), m->orig_bbox[k]),
                      "mask %u: orig_bbox[%d]", mask, k);
            }
            CHECK(close_to(json_object_get(o, "predicted_iou"), m->predicted_iou), "mask %u: predicted_iou", mask);
            CHECK(close_to(json_object_get(o, "stability_score"), m->stability_score), "mask %u: stability", mask);
            json_t *pc = json_object_get(o, "point_coords");
            if (isnan(m->point[0])) {
                CHECK(json_array_size(pc) == 0, "mask %u: point_coords should be []", mask);
            } else {
                json_t *pt = json_array_get(pc, 0);
                CHECK(json_array_size(pc) == 1 && close_to(json_array_get(pt, 0), m->point[0]) &&
                          close_to(json_array_get(pt, 1), m->point[1]), "mask %u: point_coords", mask);
            }
            json_t *r = json_object_get(o, "mask_rle");
            const char *counts = json_string_value(json_object_get(r, "counts"));
            json_t *size = json_object_get(r, "size");
            CHECK(counts && json_integer_value(json_array_get(size, 0)) == p.R &&
                      json_integer_value(json_array_get(size, 1)) == p.R, "mask %u: mask_rle", mask);
            if (counts && sa1b_rle_from_string(&rle, p.R, p.R, counts, strlen(counts), &err) == SA1B_OK) {
                sa1b_rle_decode(&rle, dec, 0);
                CHECK(memcmp(dec, m->bits, (size_t)p.R * p.R) == 0, "mask %u: RLE decodes to other bits", mask);
            } else {
                CHECK(0, "mask %u: RLE does not parse", mask);
            }
            mask++;
        } else {
            CHECK(0, "line %u: unknown type %s", lines, type);
        }
        json_decref(o);
    }
    if (have) {
        CHECK(mask == g.in.n_masks, "last image: %u mask lines, want %u", mask, g.in.n_masks);
        gen_free(&g);
    }
    CHECK(img == p.n, "%u image lines, want %u", img, p.n);
    free(line);
    free(dec);
    sa1b_rle_free(&rle);
    fclose(f);
    sa1b_imgctx_free(ctx);
    sa1b_shard_close(s);
    if (!fail_n) printf("inspect output matches %u images\n", img);
    return fail_n ? 1 : 0;
}

/* ---- check-export ----------------------------------------------------- */

static int check_export(const char *png_path, const char *shard, uint64_t index)
{
    sa1b_shard *s = NULL;
    sa1b_error err;
    if (sa1b_shard_open(&s, shard, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    gen_params p;
    if (gen_params_from(s, &p)) return fprintf(stderr, "provenance is not ours\n"), 1;
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&pi, png_path))
        return fprintf(stderr, "%s: %s\n", png_path, pi.message), 1;
    pi.format = PNG_FORMAT_RGB;
    uint8_t *px = malloc(PNG_IMAGE_SIZE(pi));
    if (!png_image_finish_read(&pi, NULL, px, 0, NULL))
        return fprintf(stderr, "%s: %s\n", png_path, pi.message), 1;
    CHECK(pi.width == p.S && pi.height == p.S, "png is %ux%u, want %ux%u", pi.width, pi.height, p.S, p.S);
    if (fail_n) return 1;
    sa1b_imgctx *ctx = NULL;
    sa1b_imgctx_new(&ctx, NULL);
    gen_sample g;
    gen_fill(&g, &p, (uint32_t)index, ctx);
    uint32_t S = p.S, R = p.R;
    int checked = 0, bg_checked = 0;
    /* alpha of the fill: 0.5 (sa1b-export(1)) */
    for (uint32_t j = 0; j < g.in.n_masks; j++) {
        /* a pixel whose 3x3 neighbourhood lies in mask j only, away from points */
        int found = 0;
        for (uint32_t y = 1; y + 1 < S && !found; y++)
            for (uint32_t x = 1; x + 1 < S && !found; x++) {
                int good = 1;
                for (int dy = -1; dy <= 1 && good; dy++)
                    for (int dx = -1; dx <= 1 && good; dx++) {
                        uint32_t my = (uint32_t)(((uint64_t)(y + dy) * R) / S), mx = (uint32_t)(((uint64_t)(x + dx) * R) / S);
                        for (uint32_t k = 0; k < g.in.n_masks; k++)
                            if ((g.bits[k][(size_t)my * R + mx] != 0) != (k == j)) good = 0;
                    }
                for (uint32_t k = 0; k < g.in.n_masks && good; k++) {
                    if (isnan(g.m[k].point[0])) continue;
                    double ddx = x + 0.5 - g.m[k].point[0], ddy = y + 0.5 - g.m[k].point[1];
                    if (ddx * ddx + ddy * ddy < 100) good = 0;
                }
                if (!good) continue;
                found = 1;
                uint8_t col[3];
                palette_mask(j, col);
                const uint8_t *src = g.rgb + ((size_t)y * S + x) * 3, *got = px + ((size_t)y * S + x) * 3;
                int ok = 1;
                for (int c = 0; c < 3; c++) {
                    int want = (src[c] + col[c] + 1) / 2;
                    if (abs(got[c] - want) > (p.fmt == SA1B_SHARD_JPEG ? 6 : 1)) ok = 0;
                }
                CHECK(ok, "mask %u pixel (%u,%u): got %u,%u,%u want blend of %u,%u,%u with %u,%u,%u", j, x, y,
                      got[0], got[1], got[2], src[0], src[1], src[2], col[0], col[1], col[2]);
                checked++;
            }
    }
    /* a pixel outside every mask keeps the image's colour */
    for (uint32_t y = 0; y < S && !bg_checked; y++)
        for (uint32_t x = 0; x < S && !bg_checked; x++) {
            uint32_t my = (uint32_t)(((uint64_t)y * R) / S), mx = (uint32_t)(((uint64_t)x * R) / S);
            int any = 0;
            for (uint32_t k = 0; k < g.in.n_masks; k++)
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++) {
                        int64_t yy = (int64_t)my + dy, xx = (int64_t)mx + dx;
                        if (yy >= 0 && xx >= 0 && yy < R && xx < R && g.bits[k][(size_t)yy * R + (size_t)xx]) any = 1;
                    }
            for (uint32_t k = 0; k < g.in.n_masks && !any; k++) {
                if (isnan(g.m[k].point[0])) continue;
                double ddx = x + 0.5 - g.m[k].point[0], ddy = y + 0.5 - g.m[k].point[1];
                if (ddx * ddx + ddy * ddy < 100) any = 1;
            }
            if (any) continue;
            const uint8_t *src = g.rgb + ((size_t)y * S + x) * 3, *got = px + ((size_t)y * S + x) * 3;
            int tol = p.fmt == SA1B_SHARD_JPEG ? 6 : 0;
            CHECK(abs(got[0] - src[0]) <= tol && abs(got[1] - src[1]) <= tol && abs(got[2] - src[2]) <= tol,
                  "background pixel (%u,%u) changed", x, y);
            bg_checked = 1;
        }
    CHECK(checked > 0, "no mask pixel could be checked");
    gen_free(&g);
    sa1b_imgctx_free(ctx);
    free(px);
    sa1b_shard_close(s);
    if (!fail_n) printf("export: %d mask colours and the background check out\n", checked);
    return fail_n ? 1 : 0;
}

/* ---- corpus ------------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const uint8_t *d, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n) exit(3);
    fclose(f);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) exit(3);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* Recomputes every CRC of a (crafted) shard so that only the crafted
 * field is wrong. */
static void recrc(uint8_t *d, size_t len)
{
    uint64_t io = shard_ld64(d + HDR_INDEX_OFFSET), ni = shard_ld64(d + HDR_N_IMAGES);
    uint64_t mo = shard_ld64(d + HDR_MASKTAB_OFFSET), nm = shard_ld64(d + HDR_N_MASKS);
    if (ni < len / SA1B_SHARD_INDEX_ROW_SIZE && io + ni * SA1B_SHARD_INDEX_ROW_SIZE <= len)
        shard_st32(d + HDR_INDEX_CRC, sa1b_crc32c(0, d + io, (size_t)(ni * SA1B_SHARD_INDEX_ROW_SIZE)));
    if (nm < len / SA1B_SHARD_MASK_ROW_SIZE && mo + nm * SA1B_SHARD_MASK_ROW_SIZE <= len)
        shard_st32(d + HDR_MASKTAB_CRC, sa1b_crc32c(0, d + mo, (size_t)(nm * SA1B_SHARD_MASK_ROW_SIZE)));
    uint32_t h = sa1b_crc32c(0, d, HDR_CRC);
    shard_st32(d + HDR_CRC, h);
    uint8_t *f = d + len - SA1B_SHARD_FOOTER_SIZE;
    shard_st32(f + FTR_HEADER_CRC, h);
    shard_st32(f + FTR_CRC, sa1b_crc32c(0, f, FTR_CRC));
}

static int corpus(const char *dir)
{
    struct {
        const char *name;
        gen_params p;
    } seeds[] = {
        {"valid-raw-2x", {3, 8, 4, 3, SA1B_SHARD_RAW, 1}},
        {"valid-jpeg", {2, 16, 8, 2, SA1B_SHARD_JPEG, 2}},
        {"valid-empty", {0, 8, 8, 0, SA1B_SHARD_RAW, 3}},
        {"valid-odd-r", {2, 8, 5, 4, SA1B_SHARD_RAW, 4}},
    };
    char path[1024];
    for (size_t k = 0; k < sizeof seeds / sizeof *seeds; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, seeds[k].name);
        if (write_shard(path, &seeds[k].p, 0)) return 1;
    }
    size_t len;
    snprintf(path, sizeof path, "%s/valid-raw-2x", dir);
    uint8_t *d = slurp(path, &len);
    write_file(dir, "damaged-truncated-half", d, len / 2);
    write_file(dir, "damaged-truncated-footer", d, len - 10);
    write_file(dir, "damaged-header-only", d, 256);
    uint8_t *c = malloc(len);
    memcpy(c, d, len);
    c[40] ^= 1; /* n_masks in the header */
    write_file(dir, "damaged-header-bit", c, len);
    uint64_t io = shard_ld64(d + HDR_INDEX_OFFSET), mo = shard_ld64(d + HDR_MASKTAB_OFFSET);
    memcpy(c, d, len);
    c[io + 96 + 5] ^= 0x10; /* index row 1 */
    write_file(dir, "damaged-index-bit", c, len);
    memcpy(c, d, len);
    c[mo + 20] ^= 0x04; /* mask row 0 */
    write_file(dir, "damaged-mask-table-bit", c, len);
    /* crafted: CRCs right, one field wrong */
    memcpy(c, d, len);
    shard_st64(c + io + IDX_IMAGE_OFFSET, 9999936);
    recrc(c, len);
    write_file(dir, "crafted-payload-offset", c, len);
    memcpy(c, d, len);
    shard_st64(c + io + 96 + IDX_MASKS_LENGTH, UINT64_MAX - 63);
    recrc(c, len);
    write_file(dir, "crafted-masks-length", c, len);
    memcpy(c, d, len);
    shard_st64(c + HDR_N_MASKS, UINT64_MAX / 40);
    shard_st64(c + len - 64 + FTR_N_MASKS, UINT64_MAX / 40);
    recrc(c, len);
    write_file(dir, "crafted-mask-count", c, len);
    memcpy(c, d, len);
    shard_st64(c + mo + 80 + MSK_DATA_OFFSET, 0);
    recrc(c, len);
    write_file(dir, "crafted-mask-data-offset", c, len);
    memcpy(c, d, len);
    shard_st32(c + io + IDX_NAME_LENGTH, 100000);
    recrc(c, len);
    write_file(dir, "crafted-name-length", c, len);
    memcpy(c, d, len);
    c[400] ^= 0x80; /* a payload */
    write_file(dir, "damaged-payload-bit", c, len);
    memcpy(c, d, len);
    memset(c, 0, 256); /* an unfinished shard */
    write_file(dir, "damaged-zero-header", c, len);
    write_file(dir, "empty", d, 0);
    const char *txt = "{\"not\": \"a shard\"}\n";
    write_file(dir, "other-json", (const uint8_t *)txt, strlen(txt));
    free(c);
    free(d);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: test-shard-gen gen|slow|check-inspect|check-export|corpus ...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3) usage();
    const char *cmd = argv[1];
    if (strcmp(cmd, "gen") == 0 || strcmp(cmd, "slow") == 0) {
        gen_params p = {5, 32, 8, 6, SA1B_SHARD_RAW, 1};
        for (int a = 3; a + 1 < argc; a += 2) {
            const char *k = argv[a], *v = argv[a + 1];
            if (!strcmp(k, "-n")) p.n = (uint32_t)atoi(v);
            else if (!strcmp(k, "-s")) p.S = (uint32_t)atoi(v);
            else if (!strcmp(k, "-r")) p.R = (uint32_t)atoi(v);
            else if (!strcmp(k, "-m")) p.masks = (uint32_t)atoi(v);
            else if (!strcmp(k, "-f")) p.fmt = !strcmp(v, "jpeg") ? SA1B_SHARD_JPEG : SA1B_SHARD_RAW;
            else if (!strcmp(k, "--seed")) p.seed = (uint64_t)atoll(v);
            else usage();
        }
        return write_shard(argv[2], &p, cmd[0] == 's');
    }
    if (strcmp(cmd, "check-inspect") == 0 && argc == 4) return check_inspect(argv[2], argv[3]);
    if (strcmp(cmd, "check-export") == 0 && argc == 5)
        return check_export(argv[2], argv[3], (uint64_t)atoll(argv[4]));
    if (strcmp(cmd, "corpus") == 0) return corpus(argv[2]);
    if (strcmp(cmd, "flip") == 0 && argc == 5) {
        FILE *f = fopen(argv[2], "r+b");
        long off = atol(argv[3]);
        int c;
        if (!f || fseek(f, off, SEEK_SET) != 0 || (c = fgetc(f)) == EOF) return perror(argv[2]), 1;
        fseek(f, off, SEEK_SET);
        fputc(c ^ (1 << atoi(argv[4])), f);
        return fclose(f) != 0;
    }
    usage();
}
