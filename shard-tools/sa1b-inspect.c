/*
 * sa1b-inspect - prints what a shard holds as JSON lines (for jq): the
 * header and provenance, one line per image, with --masks one per mask
 * (keys named as in SA-1B), with --rle each mask's bitmap as COCO RLE; or,
 * with --summary, a table for people.  Man page: sa1b-inspect(1).
 */
#include "cli.h"
#include "sa1b_manifest.h"
#include "sa1b_rle.h"
#include "sa1b_shard.h"

#include <getopt.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct options {
    int masks, rle, summary, manifest;
    const char *output;
} options;

/* Where the results go: standard output, or -o's file (out_file). */
static FILE *out;
static cli_out out_file;

/* Standard output is checked after each file; -o's file at the end. */
static void out_check(void)
{
    if (out == stdout) cli_stdout_check();
}

/* Ends the run: -o's file replaces its old contents only when every file
 * was read (status 0), else it is left as it was. */
static int finish(int status)
{
    if (!out_file.path) {
        cli_stdout_check();
        return status;
    }
    if (status == CLI_EXIT_OK) {
        cli_out_commit(&out_file);
        return status;
    }
    if (out_file.tmp) cli_warn("'%s' left as it was: not every file was read", out_file.path);
    cli_out_discard(&out_file);
    return status;
}

static void usage(void)
{
    printf("Usage: %s [OPTIONS] FILE...\n"
           "       %s --manifest -o manifest.json FILE...\n"
           "Print the contents of sa1b shards as JSON lines: first the header and\n"
           "provenance (\"type\": \"shard\"), then one line per image (\"type\": \"image\").\n"
           "\n"
           "Options:\n"
           "  -m, --masks      also print one line per mask (\"type\": \"mask\")\n"
           "  -r, --rle        with the mask lines, add the bitmap as COCO RLE (\"mask_rle\");\n"
           "                   implies --masks\n"
           "  -s, --summary    print a table for people instead of JSON lines\n"
           "      --manifest   print one JSON manifest of all the files instead (sizes,\n"
           "                   CRC32C, counts, provenance; sa1b-shard(5)), or nothing\n"
           "                   when one of them is not a valid shard\n"
           "  -o, --output FILE  write to FILE instead of standard output; FILE is replaced\n"
           "                   only when every file was read (exit 0), else left as it was\n"
           "  -h, --help       show this help and exit\n"
           "  -V, --version    show the version and exit\n"
           "\n"
           "Exit status: 0 all files read, 1 a file is not a valid shard, 2 usage error,\n"
           "3 a file could not be read.\n",
           cli_prog(), cli_prog());
}

/* A file name as a JSON string: itself when it is UTF-8 (all jansson
 * takes), else with each byte that is not printable ASCII written \xNN, so
 * that the record still says which file it is. */
static json_t *file_name_json(const char *file)
{
    json_t *j = json_string(file);
    if (j) return j;
    size_t n = strlen(file);
    char *esc = malloc(4 * n + 1), *q = esc;
    if (!esc) return NULL;
    for (const unsigned char *p = (const unsigned char *)file; *p; p++)
        q += *p >= 0x20 && *p < 0x7f ? sprintf(q, "%c", *p) : sprintf(q, "\\x%02x", *p);
    *q = 0;
    j = json_string(esc);
    free(esc);
    return j;
}

/* A float as JSON: null when not finite (jansson refuses NaN). */
static json_t *jreal(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *jfloats(const float *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, jreal(v[i]));
    return a;
}

static int emit(json_t *o)
{
    /* 9 significant digits: every float32 survives the round trip */
    int rc = json_dumpf(o, out, JSON_REAL_PRECISION(9));
    json_decref(o);
    fputc('\n', out);
    return rc;
}

static const char *format_name(int f) { return f == SA1B_SHARD_JPEG ? "jpeg" : "raw"; }

static json_t *header_json(const char *file, const sa1b_shard *s)
{
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("shard"));
    json_object_set_new(o, "file", file_name_json(file));
    json_object_set_new(o, "version", json_integer(in->version));
    json_object_set_new(o, "image_size", json_integer(in->image_size));
    json_object_set_new(o, "mask_size", json_integer(in->mask_size));
    json_object_set_new(o, "image_format", json_string(format_name(in->image_format)));
    json_object_set_new(o, "images", json_integer((json_int_t)in->n_images));
    json_object_set_new(o, "masks", json_integer((json_int_t)in->n_masks));
    json_object_set_new(o, "file_size", json_integer((json_int_t)in->file_size));
    json_object_set_new(o, "mask_bytes", json_integer(in->mask_bytes));
    json_object_set_new(o, "mask_stride", json_integer(in->mask_stride));
    json_object_set_new(o, "mask_format",
                        json_string(in->mask_format == SA1B_SHARD_RLE          ? "rle"
                                    : in->mask_format == SA1B_SHARD_RLE_SOURCE ? "source"
                                                                               : "packed"));
    json_object_set_new(o, "index_offset", json_integer((json_int_t)sa1b_shard_index_offset(s)));
    json_object_set_new(o, "mask_table_offset",
                        json_integer((json_int_t)sa1b_shard_mask_table_offset(s)));
    json_error_t jerr;
    json_t *prov = json_loadb(in->provenance, in->provenance_len, JSON_DECODE_ANY, &jerr);
    /* a provenance that is not JSON is shown as the text it is */
    json_object_set_new(o, "provenance",
                        prov ? prov : json_stringn(in->provenance, in->provenance_len));
    return o;
}

static json_t *image_json(const char *file, const sa1b_shard_image_view *im)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("image"));
    json_object_set_new(o, "file", file_name_json(file));
    json_object_set_new(o, "index", json_integer((json_int_t)im->index));
    json_object_set_new(o, "image_id", json_integer(im->image_id));
    json_object_set_new(o, "file_name", json_stringn(im->file_name, im->file_name_len));
    json_object_set_new(o, "width", json_integer(im->orig_w));
    json_object_set_new(o, "height", json_integer(im->orig_h));
    json_object_set_new(o, "scale", jreal(im->scale));
    json_object_set_new(o, "masks", json_integer(im->n_masks));
    json_object_set_new(o, "image_bytes", json_integer((json_int_t)im->payload_len));
    json_object_set_new(o, "masks_bytes", json_integer((json_int_t)im->masks_len));
    json_object_set_new(o, "image_offset", json_integer((json_int_t)im->payload_offset));
    json_object_set_new(o, "masks_offset", json_integer((json_int_t)im->masks_offset));
    return o;
}

static json_t *mask_json(const char *file, const sa1b_shard_image_view *im,
                         const sa1b_shard_mask_view *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("mask"));
    json_object_set_new(o, "file", file_name_json(file));
    json_object_set_new(o, "index", json_integer((json_int_t)im->index));
    json_object_set_new(o, "image_id", json_integer(im->image_id));
    json_object_set_new(o, "id", json_integer(m->id));
    json_object_set_new(o, "area", jreal(m->area));
    json_object_set_new(o, "bbox", jfloats(m->bbox, 4));
    json_object_set_new(o, "orig_area", json_integer(m->orig_area));
    json_object_set_new(o, "orig_bbox", jfloats(m->orig_bbox, 4));
    json_object_set_new(o, "predicted_iou", jreal(m->predicted_iou));
    json_object_set_new(o, "stability_score", jreal(m->stability_score));
    json_t *pts = json_array(); /* SA-1B's [[x, y]]; [] when the shard has no point */
    if (!isnan(m->point[0]) && !isnan(m->point[1]))
        json_array_append_new(pts, jfloats(m->point, 2));
    json_object_set_new(o, "point_coords", pts);
    return o;
}

static int add_rle(json_t *o, const sa1b_shard *s, const sa1b_shard_mask_view *m, uint8_t *buf,
                   sa1b_rle *rle, sa1b_error *err)
{
    uint32_t h = sa1b_shard_get_info(s)->mask_size, w = h;
    uint8_t *big = NULL; /* source-size masks: the image's size */
    if (sa1b_shard_get_info(s)->mask_format == SA1B_SHARD_RLE_SOURCE) {
        sa1b_shard_image_view im;
        SA1B_FORWARD(sa1b_shard_image(s, m->image_index, &im, err));
        h = im.orig_h, w = im.orig_w;
        if (!(buf = big = malloc((size_t)h * w)))
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    }
    int rc = sa1b_shard_decode_mask(s, m, buf, err);
    if (!rc) rc = sa1b_rle_encode(rle, buf, h, w, 0, err);
    free(big);
    SA1B_FORWARD(rc);
    char *str = NULL;
    size_t len = 0;
    SA1B_FORWARD(sa1b_rle_to_string(rle, &str, &len, err));
    json_t *r = json_object();
    json_t *size = json_array();
    json_array_append_new(size, json_integer(h));
    json_array_append_new(size, json_integer(w));
    json_object_set_new(r, "size", size);
    json_object_set_new(r, "counts", json_stringn(str, len));
    json_object_set_new(o, "mask_rle", r);
    free(str);
    return SA1B_OK;
}

/* ---- --summary -------------------------------------------------------- */

static void human_bytes(double b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) {
        b /= 1000;
        i++;
    }
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

/* Looks for a key anywhere in the provenance object tree. */
static json_t *find_key(json_t *o, const char *key)
{
    if (!json_is_object(o)) return NULL;
    json_t *v = json_object_get(o, key);
    if (v) return v;
    const char *k;
    json_t *c;
    json_object_foreach(o, k, c)
    {
        json_t *r = find_key(c, key);
        if (r) return r;
    }
    return NULL;
}

static int summary(const char *file, const sa1b_shard *s, sa1b_error *err)
{
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    enum { NBIN = 12 }; /* 0, 1, 2-3, 4-7, ..., 512-1023, >= 1024 */
    uint64_t hist[NBIN] = {0}, img_bytes = 0, mask_bytes = 0;
    uint32_t mn = UINT32_MAX, mx = 0;
    for (uint64_t i = 0; i < in->n_images; i++) {
        sa1b_shard_image_view im;
        SA1B_FORWARD(sa1b_shard_image(s, i, &im, err));
        int b = 0;
        while (b < NBIN - 1 && im.n_masks >= (1u << b)) b++;
        hist[b]++;
        img_bytes += im.payload_len;
        mask_bytes += im.masks_len;
        if (im.n_masks < mn) mn = im.n_masks;
        if (im.n_masks > mx) mx = im.n_masks;
    }
    char h1[32], h2[32], h3[32], h4[32];
    double n = in->n_images ? (double)in->n_images : 1;
    fprintf(out, "%-16s %s\n", "file", file);
    if (in->mask_format == SA1B_SHARD_RLE_SOURCE)
        fprintf(out, "%-16s %s %ux%u, masks at the source size as runs (%.1f bytes each on average)\n",
               "format", format_name(in->image_format), in->image_size, in->image_size,
               in->n_masks ? (double)mask_bytes / (double)in->n_masks : 0.0);
    else if (in->mask_format == SA1B_SHARD_RLE)
        fprintf(out, "%-16s %s %ux%u, masks %ux%u as runs (%.1f bytes each on average)\n", "format",
               format_name(in->image_format), in->image_size, in->image_size, in->mask_size,
               in->mask_size, in->n_masks ? (double)mask_bytes / (double)in->n_masks : 0.0);
    else
        fprintf(out, "%-16s %s %ux%u, masks %ux%u (%u bytes each, %u with padding)\n", "format",
               format_name(in->image_format), in->image_size, in->image_size, in->mask_size,
               in->mask_size, in->mask_bytes, in->mask_stride);
    human_bytes((double)in->file_size, h1, sizeof h1);
    fprintf(out, "%-16s %s (%llu bytes)\n", "size", h1, (unsigned long long)in->file_size);
    fprintf(out, "%-16s %llu\n", "images", (unsigned long long)in->n_images);
    if (in->n_images)
        fprintf(out, "%-16s %llu (%.1f per image, min %u, max %u)\n", "masks",
               (unsigned long long)in->n_masks, (double)in->n_masks / n, mn, mx);
    else
        fprintf(out, "%-16s %llu\n", "masks", (unsigned long long)in->n_masks);
    human_bytes((double)in->file_size / n, h1, sizeof h1);
    human_bytes((double)img_bytes / n, h2, sizeof h2);
    human_bytes((double)mask_bytes / n, h3, sizeof h3);
    human_bytes((double)(in->file_size - img_bytes - mask_bytes) / n, h4, sizeof h4);
    fprintf(out, "%-16s %s (image %s, masks %s, other %s)\n", "bytes per image", h1, h2, h3, h4);
    json_t *prov = json_loadb(in->provenance, in->provenance_len, 0, NULL);
    json_t *st = find_key(prov, "strategy"), *mm = find_key(prov, "max_masks");
    fprintf(out, "%-16s %s", "strategy", json_is_string(st) ? json_string_value(st) : "unknown");
    if (json_is_integer(mm)) fprintf(out, " (max_masks %lld)", (long long)json_integer_value(mm));
    fputc('\n', out);
    json_t *src = json_object_get(prov, "input"), *ib = json_object_get(prov, "input_bytes");
    json_t *clean = json_object_get(prov, "input_clean_end"), *after = json_object_get(prov, "input_ends_after");
    if (json_is_string(src)) { /* the input; its identity in an input's last part */
        char q[512], qa[256]; /* (the provenance's names, escaped: one line each) */
        fprintf(out, "%-16s %s", "input", sa1b_escape(q, sizeof q, json_string_value(src), json_string_length(src)));
        if (json_is_integer(ib))
            fprintf(out, ": %lld bytes, crc32c %s, %s%s%s", (long long)json_integer_value(ib),
                   json_is_string(json_object_get(prov, "input_crc32c")) ? json_string_value(json_object_get(prov, "input_crc32c")) : "?",
                   json_is_false(clean) ? "ended early, after " : "read to its end",
                   json_is_false(clean) && json_is_string(after) ? sa1b_escape(qa, sizeof qa, json_string_value(after), json_string_length(after)) : "",
                   json_is_false(clean) ? " (the images after it are missing)" : "");
        fputc('\n', out);
    }
    json_decref(prov);
    fprintf(out, "masks per image histogram:\n");
    uint64_t top = 1;
    for (int b = 0; b < NBIN; b++)
        if (hist[b] > top) top = hist[b];
    for (int b = 0; b < NBIN; b++) {
        char range[32];
        if (b == 0) snprintf(range, sizeof range, "0");
        else if (b == NBIN - 1) snprintf(range, sizeof range, ">= %u", 1u << (b - 1));
        else if (b == 1) snprintf(range, sizeof range, "1");
        else snprintf(range, sizeof range, "%u-%u", 1u << (b - 1), (1u << b) - 1);
        if (!hist[b]) continue;
        int bar = (int)((hist[b] * 40 + top - 1) / top);
        fprintf(out, "  %-10s %8llu  ", range, (unsigned long long)hist[b]);
        for (int k = 0; k < bar; k++) fputc('#', out);
        fputc('\n', out);
    }
    return SA1B_OK;
}

static int inspect(const char *file, const options *o)
{
    sa1b_shard *s = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = sa1b_shard_open(&s, cli_shard_path(file), &err);
    if (rc) {
        cli_warn("'%s': %s", file, err.msg);
        return rc == SA1B_EIO ? CLI_EXIT_FATAL : CLI_EXIT_PARTIAL;
    }
    if (o->summary) {
        rc = summary(file, s, &err);
    } else {
        const sa1b_shard_info *in = sa1b_shard_get_info(s);
        emit(header_json(file, s));
        uint8_t *buf = o->rle ? malloc((size_t)in->mask_size * in->mask_size) : NULL;
        sa1b_rle rle = SA1B_RLE_INIT;
        if (o->rle && !buf) rc = sa1b_error_set(&err, SA1B_ENOMEM, -1, "out of memory");
        for (uint64_t i = 0; i < in->n_images && !rc; i++) {
            sa1b_shard_image_view im;
            if ((rc = sa1b_shard_image(s, i, &im, &err))) break;
            emit(image_json(file, &im));
            for (uint32_t j = 0; o->masks && j < im.n_masks && !rc; j++) {
                sa1b_shard_mask_view m;
                if ((rc = sa1b_shard_mask(s, i, j, &m, &err))) break;
                json_t *mo = mask_json(file, &im, &m);
                if (o->rle && (rc = add_rle(mo, s, &m, buf, &rle, &err))) {
                    json_decref(mo);
                    break;
                }
                emit(mo);
            }
        }
        sa1b_rle_free(&rle);
        free(buf);
    }
    sa1b_shard_close(s);
    if (rc) {
        cli_warn("'%s': %s", file, err.msg);
        return CLI_EXIT_PARTIAL;
    }
    out_check();
    return CLI_EXIT_OK;
}

/* ---- --manifest ------------------------------------------------------- */

/* One manifest row: the shard's file (listed: its name as the manifest
 * gives it), size, CRC32C of the whole file, counts, format and
 * provenance; NULL (and a message) when file is not a shard or disagrees
 * with the first one on S, R or the format. */
static json_t *manifest_row(const char *file, const char *listed, sa1b_shard_info *first, int *status)
{
    sa1b_shard *s = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = sa1b_shard_open(&s, file, &err);
    json_t *row = NULL;
    uint64_t bytes = 0;
    uint32_t crc = 0;
    if (!rc) {
        const sa1b_shard_info *in = sa1b_shard_get_info(s);
        if (!first->image_size) *first = *in;
        if (in->image_size != first->image_size || in->mask_size != first->mask_size ||
            in->image_format != first->image_format)
            rc = sa1b_error_set(&err, SA1B_EMISMATCH, -1, "S=%u R=%u %s, unlike the first shard (S=%u R=%u %s)",
                                in->image_size, in->mask_size, format_name(in->image_format),
                                first->image_size, first->mask_size, format_name(first->image_format));
        else if (!(rc = sa1b_file_crc32c(file, &bytes, &crc, &err)) && bytes != in->file_size)
            rc = sa1b_error_set(&err, SA1B_EIO, -1, "changed while it was read");
    }
    json_t *name = rc ? NULL : json_string(listed);
    if (!rc && !name) /* (jansson takes UTF-8 alone) */
        rc = sa1b_error_set(&err, SA1B_EINVAL, -1, "its name is not UTF-8, which a manifest (JSON) cannot hold: "
                            "rename it");
    if (!rc) {
        json_t *h = header_json(file, s);
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", crc);
        row = json_object();
        json_object_set_new(row, "file", name);
        json_object_set_new(row, "bytes", json_integer((json_int_t)bytes));
        json_object_set_new(row, "crc32c", json_string(hex));
        const char *keep[] = {"images", "masks", "image_size", "mask_size", "image_format", "provenance"};
        for (size_t k = 0; k < sizeof keep / sizeof *keep; k++)
            json_object_set(row, keep[k], json_object_get(h, keep[k]));
        json_object_set(row, "shard_version", json_object_get(h, "version"));
        json_decref(h);
    } else {
        cli_warn("'%s': %s", file, err.msg);
        int st = rc == SA1B_EIO ? CLI_EXIT_FATAL : CLI_EXIT_PARTIAL;
        if (st > *status) *status = st;
    }
    sa1b_shard_close(s);
    return row;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Usage error when two of files[0..n) are one file under two names (the
 * loader would read it twice an epoch). */
static void check_distinct(char **files, int n)
{
    char **real = calloc((size_t)n, sizeof *real);
    if (!real) cli_die(CLI_EXIT_FATAL, "out of memory");
    int k = 0;
    for (int i = 0; i < n; i++)
        if ((real[k] = realpath(files[i], NULL))) k++; /* a missing file is reported later */
    qsort(real, (size_t)k, sizeof *real, str_cmp);
    for (int i = 1; i < k; i++)
        if (strcmp(real[i - 1], real[i]) == 0) cli_usage_error("'%s' is named twice", real[i]);
    for (int i = 0; i < k; i++) free(real[i]);
    free(real);
}

/* The names of a path's folders: "." and empty ones dropped, ".." takes
 * one off (at most to the root); returns their number, part[] pointing
 * into path, which it cuts at the slashes. */
static int path_parts(char *path, char **part, int max)
{
    int n = 0;
    for (char *tok = strtok(path, "/"); tok; tok = strtok(NULL, "/")) {
        if (strcmp(tok, ".") == 0) continue;
        if (strcmp(tok, "..") == 0) {
            if (n > 0) n--;
        } else if (n < max) {
            part[n++] = tok;
        } else {
            return -1;
        }
    }
    return n;
}

/* A path from the folder from (absolute) to the file to (absolute), both
 * taken as they read ("../" for each of from's folders below the two's
 * common ones); NULL when too deep or out of memory. */
static char *relative_to(const char *from, const char *to)
{
    enum { DEPTH = 512 };
    char *a = strdup(from), *b = strdup(to), *pa[DEPTH], *pb[DEPTH], *r = NULL;
    int na = a ? path_parts(a, pa, DEPTH) : -1, nb = b ? path_parts(b, pb, DEPTH) : -1, k = 0;
    if (na >= 0 && nb > 0) {
        while (k < na && k < nb - 1 && strcmp(pa[k], pb[k]) == 0) k++;
        size_t len = 1;
        for (int i = k; i < na; i++) len += 3;
        for (int i = k; i < nb; i++) len += strlen(pb[i]) + 1;
        if ((r = malloc(len))) {
            char *w = r;
            for (int i = k; i < na; i++) w = memcpy(w, "../", 3), w += 3;
            for (int i = k; i < nb; i++) w += sprintf(w, "%s%s", pb[i], i + 1 < nb ? "/" : "");
            *w = 0;
        }
    }
    free(a);
    free(b);
    return r;
}

/* Whether the file name from the folder dir is the file st is of. */
static int same_file_from(const char *dir, const char *name, const struct stat *st)
{
    char *p = NULL;
    struct stat there;
    if (asprintf(&p, "%s/%s", dir, name) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    int same = stat(p, &there) == 0 && there.st_dev == st->st_dev && there.st_ino == st->st_ino;
    free(p);
    return same;
}

/* The names the manifest at path lists files[0..n) by, in names[0..n):
 * its readers (the loader, sa1b-verify) resolve names against the
 * manifest's folder, so a relative name that does not name the same file
 * from there is written relative to that folder instead (out/a.shard in
 * elsewhere/m.json: ../out/a.shard); absolute names and those that name
 * the file from there already stay as given.  A usage error when no name
 * from there can be found. */
static void names_from(const char *path, char **files, int n, const char **names)
{
    char *copy = strdup(path), *cwd = getcwd(NULL, 0), *real_dir = NULL;
    if (!copy || !cwd) cli_die(CLI_EXIT_FATAL, errno == ENOMEM || !copy ? "out of memory" : "cannot read the current folder");
    const char *dir = dirname(copy);
    int bad = -1;
    for (int i = 0; i < n; i++) {
        struct stat here;
        names[i] = files[i];
        if (files[i][0] == '/' || strcmp(dir, ".") == 0 || stat(files[i], &here) != 0) continue; /* a missing file is reported later */
        if (same_file_from(dir, files[i], &here)) continue;
        if (!real_dir && !(real_dir = realpath(dir, NULL))) {
            bad = i;
            break;
        }
        char *abs = NULL, *rel;
        if (asprintf(&abs, "%s/%s", cwd, files[i]) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
        rel = relative_to(real_dir, abs);
        free(abs);
        if (!rel || !same_file_from(dir, rel, &here)) { /* (a folder named through a link, and .. after it) */
            free(rel);
            bad = i;
            break;
        }
        names[i] = rel; /* (main frees it) */
    }
    char where[4096];
    snprintf(where, sizeof where, "%s", dir);
    free(copy); /* (before the exit: nothing left for LeakSanitizer) */
    free(cwd);
    free(real_dir);
    for (int i = 0; bad >= 0 && i < bad; i++)
        if (names[i] != files[i]) free((char *)names[i]), names[i] = files[i];
    if (bad >= 0)
        cli_usage_error("'%s' is named relative to this folder, but a manifest's names are read relative to its "
                        "own folder ('%s'), from which no name of it was found: name the shards by absolute paths",
                        files[bad], where);
}

/* Prints the manifest of files[0..n), listed as names[0..n), or nothing
 * when one is bad. */
static int manifest(char **files, const char **names, int n)
{
    check_distinct(files, n);
    json_t *rows = json_array(), *root = json_object();
    sa1b_shard_info first = {0};
    uint64_t images = 0, masks = 0, bytes = 0;
    int status = CLI_EXIT_OK;
    for (int i = 0; i < n; i++) {
        if (strcmp(files[i], "-") == 0) cli_usage_error("--manifest lists shard files, not standard input");
        json_t *row = manifest_row(files[i], names[i], &first, &status);
        if (!row) continue;
        images += (uint64_t)json_integer_value(json_object_get(row, "images"));
        masks += (uint64_t)json_integer_value(json_object_get(row, "masks"));
        bytes += (uint64_t)json_integer_value(json_object_get(row, "bytes"));
        json_array_append_new(rows, row);
    }
    json_object_set_new(root, "sa1b_manifest", json_integer(SA1B_MANIFEST_VERSION));
    json_object_set_new(root, "images", json_integer((json_int_t)images));
    json_object_set_new(root, "masks", json_integer((json_int_t)masks));
    json_object_set_new(root, "bytes", json_integer((json_int_t)bytes));
    json_object_set_new(root, "shards", rows);
    char *text = status ? NULL : json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (status) return status;
    if (!text) cli_die(CLI_EXIT_FATAL, "out of memory");
    /* what is printed must read back: the same file twice, say, is refused */
    sa1b_manifest *m = NULL;
    sa1b_error err;
    if (sa1b_manifest_parse(&m, text, strlen(text), NULL, &err)) {
        cli_warn("cannot write the manifest: %s", err.msg);
        free(text);
        return err.code == SA1B_ENOMEM ? CLI_EXIT_FATAL : CLI_EXIT_USAGE;
    }
    sa1b_manifest_free(m);
    fputs(text, out);
    fputc('\n', out);
    out_check();
    free(text);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    cli_catch_sigbus(); /* shards are read through a memory mapping */
    static const struct option longopts[] = {
        {"masks", no_argument, NULL, 'm'},   {"rle", no_argument, NULL, 'r'},
        {"summary", no_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'},
        {"manifest", no_argument, NULL, 'M'}, {"output", required_argument, NULL, 'o'},
        {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0}};
    options o = {0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":mrshVo:", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o.masks = 1; break;
        case 'r': o.rle = o.masks = 1; break;
        case 's': o.summary = 1; break;
        case 'M': o.manifest = 1; break;
        case 'o': o.output = optarg; break;
        case 'h': usage(); cli_stdout_check(); return CLI_EXIT_OK;
        case 'V': cli_version(); return CLI_EXIT_OK;
        case ':': cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        case '?':
            if (optopt) cli_usage_error("unknown option '-%c'", optopt);
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        default: cli_usage_error("unknown option");
        }
    }
    if (optind >= argc) cli_usage_error("no shard file given");
    if (o.summary && o.masks) cli_usage_error("--summary cannot be combined with --masks or --rle");
    if (o.manifest && (o.summary || o.masks)) cli_usage_error("--manifest cannot be combined with --summary, --masks or --rle");
    out = stdout;
    const char **names = NULL; /* --manifest: the names it lists */
    if (o.manifest) {
        if (!(names = calloc((size_t)(argc - optind), sizeof *names))) cli_die(CLI_EXIT_FATAL, "out of memory");
        for (int i = optind; i < argc; i++) names[i - optind] = argv[i];
    }
    if (o.output) {
        cli_check_output(o.output, argv + optind, argc - optind);
        cli_out_open(&out_file, o.output);
        /* (a file renamed into place: not a device, nor standard output's file) */
        if (o.manifest && out_file.tmp) names_from(o.output, argv + optind, argc - optind, names);
        out = out_file.f;
    }
    if (o.manifest && (!o.output || strcmp(o.output, "-") == 0)) { /* > FILE in another folder: the same check */
        struct stat st;
        char self[4096];
        ssize_t len = fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode)
                          ? readlink("/proc/self/fd/1", self, sizeof self - 1)
                          : -1;
        if (len > 0 && self[0] == '/') {
            self[len] = 0;
            names_from(self, argv + optind, argc - optind, names);
        }
    }
    if (o.manifest) {
        int st = manifest(argv + optind, names, argc - optind);
        for (int i = optind; i < argc; i++)
            if (names[i - optind] != argv[i]) free((char *)names[i - optind]);
        free(names);
        return finish(st);
    }
    int status = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int r = inspect(argv[i], &o);
        if (o.summary && i + 1 < argc) fputc('\n', out);
        if (r > status) status = r;
    }
    return finish(status);
}
