/*
 * rle_input.c - sa1b-rle's parsers of untrusted input (rle_input.h): mask
 * JSON, mask arguments, the info stream, PGM and PNG.
 */
#include "rle_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

char *rle_input_escape(const char *s, size_t n)
{
    char *o = malloc(4 * n + 1);
    return o ? sa1b_escape(o, 4 * n + 1, s, n) : NULL;
}

/* snprintf of "prefix" and s escaped (s cut short when memory runs out). */
static void why_escaped(char *why, size_t len, const char *prefix, const char *s, const char *suffix)
{
    char *e = rle_input_escape(s, strlen(s));
    snprintf(why, len, "%s%s%s", prefix, e ? e : "(out of memory)", suffix);
    free(e);
}

int rle_input_mask_json(json_t *seg, sa1b_rle *r, sa1b_error *err)
{
    json_t *size = json_object_get(seg, "size"), *counts = json_object_get(seg, "counts");
    if (!json_is_object(seg) || !size || !counts)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "no \"size\" and \"counts\"");
    json_int_t h = json_integer_value(json_array_get(size, 0));
    json_int_t w = json_integer_value(json_array_get(size, 1));
    if (!json_is_array(size) || json_array_size(size) != 2 ||
        !json_is_integer(json_array_get(size, 0)) || !json_is_integer(json_array_get(size, 1)) ||
        h < 0 || w < 0 || h > UINT32_MAX || w > UINT32_MAX)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "\"size\" is not [h, w]");
    if (json_is_string(counts))
        return sa1b_rle_from_string(r, (uint32_t)h, (uint32_t)w, json_string_value(counts),
                                    json_string_length(counts), err);
    if (!json_is_array(counts))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "\"counts\" is neither a string nor a list");
    /* uncompressed COCO RLE: a list of run lengths */
    size_t n = json_array_size(counts);
    uint32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(counts, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > UINT32_MAX) {
            free(c);
            return sa1b_error_set(err, SA1B_ERANGE, (int64_t)i, "run %zu is not in 0..2^32-1", i);
        }
        c[i] = (uint32_t)json_integer_value(v);
    }
    int rc = sa1b_rle_set_runs(r, (uint32_t)h, (uint32_t)w, c, n, err);
    free(c);
    return rc;
}

int rle_input_mask_arg(const char *arg, sa1b_rle *r, char *why, size_t why_len)
{
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    const char *p = arg;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p == '{') {
        json_error_t je;
        json_t *v = json_loads(p, 0, &je);
        if (!v) {
            why_escaped(why, why_len, "invalid JSON: ", je.text, "");
            return RLE_ARG_BAD;
        }
        json_t *seg = json_object_get(v, "segmentation");
        rc = rle_input_mask_json(seg ? seg : v, r, &err);
        json_decref(v);
    } else {
        const char *colon = strchr(arg, ':');
        char dims[64];
        uint32_t h, w;
        size_t n = colon ? (size_t)(colon - arg) : 0;
        if (!colon || n >= sizeof dims) {
            snprintf(why, why_len, "a mask is {\"size\":[h,w],\"counts\":...} or HxW:COUNTS");
            return RLE_ARG_USAGE;
        }
        memcpy(dims, arg, n);
        dims[n] = '\0';
        if (cli_parse_dims(dims, UINT32_MAX, &h, &w)) {
            why_escaped(why, why_len, "bad size '", dims, "' (want HxW)");
            return RLE_ARG_USAGE;
        }
        rc = sa1b_rle_from_string(r, h, w, colon + 1, strlen(colon + 1), &err);
    }
    if (rc) {
        why_escaped(why, why_len, "", err.msg, "");
        return RLE_ARG_BAD;
    }
    return 0;
}

/* ---- the info stream ---------------------------------------------------------- */

/* Line number (1-based) of byte offset off in buf. */
static size_t line_of(const char *buf, size_t off, size_t from, size_t from_line)
{
    size_t line = from_line;
    for (size_t i = from; i < off; i++) line += buf[i] == '\n';
    return line;
}

/* Byte offsets of the "counts" keys in buf[a, b) (string-aware scan),
 * so that errors in a pretty-printed file can name the mask's line. */
static size_t counts_keys(const char *buf, size_t a, size_t b, size_t **out)
{
    size_t n = 0, cap = 0;
    *out = NULL;
    for (size_t i = a; i < b; i++) {
        if (buf[i] != '"') continue;
        size_t s = i++;
        while (i < b && buf[i] != '"') i += buf[i] == '\\' ? 2 : 1;
        if (i >= b) break;
        size_t j = i + 1;
        while (j < b && (buf[j] == ' ' || buf[j] == '\t' || buf[j] == '\n' || buf[j] == '\r')) j++;
        if (i - s == 7 && memcmp(buf + s, "\"counts", 7) == 0 && j < b && buf[j] == ':') {
            if (n == cap) {
                size_t *nb = realloc(*out, (cap = cap ? 2 * cap : 64) * sizeof **out);
                if (!nb) break;
                *out = nb;
            }
            (*out)[n++] = s;
        }
    }
    return n;
}

static void stream_value(const rle_input_stream_cb *cb, json_t *v, const char *buf, size_t a, size_t b,
                         size_t line)
{
    json_t *anns = json_object_get(v, "annotations");
    if (json_is_array(anns)) {
        size_t *keys;
        size_t nk = counts_keys(buf, a, b, &keys);
        size_t i, kl = a, ll = line;
        json_t *ann;
        json_array_foreach(anns, i, ann) {
            size_t l = line;
            if (nk == json_array_size(anns)) {
                ll = line_of(buf, keys[i], kl, ll);
                kl = keys[i];
                l = ll;
            }
            json_t *seg = json_object_get(ann, "segmentation");
            cb->mask(cb->ctx, ann, seg ? seg : ann, l);
        }
        free(keys);
        return;
    }
    json_t *ann = json_object_get(v, "annotation");
    if (json_is_object(ann)) v = ann;
    json_t *seg = json_object_get(v, "segmentation");
    cb->mask(cb->ctx, v, seg ? seg : v, line);
}

void rle_input_stream(const char *buf, size_t len, const rle_input_stream_cb *cb)
{
    size_t pos = 0, line = 1, lpos = 0;
    while (pos < len) {
        char ch = buf[pos];
        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') {
            pos++;
            continue;
        }
        line = line_of(buf, pos, lpos, line);
        lpos = pos;
        json_error_t je;
        json_t *v = json_loadb(buf + pos, len - pos, JSON_DISABLE_EOF_CHECK, &je);
        if (!v || !json_is_object(v)) {
            if (v) {
                cb->bad(cb->ctx, line, "not a JSON object");
            } else {
                char why[512];
                why_escaped(why, sizeof why, "invalid JSON: ", je.text, "");
                cb->bad(cb->ctx, line + (je.line > 0 ? (size_t)je.line - 1 : 0), why);
            }
            json_decref(v);
            /* resynchronise at the next line */
            const char *nl = memchr(buf + pos, '\n', len - pos);
            pos = nl ? (size_t)(nl - buf) + 1 : len;
            continue;
        }
        size_t used = je.position > 0 ? (size_t)je.position : len - pos;
        if (used > len - pos) used = len - pos;
        stream_value(cb, v, buf, pos, pos + used, line);
        json_decref(v);
        pos += used;
    }
}

/* ---- images ------------------------------------------------------------------ */

int rle_input_pgm(const uint8_t *buf, size_t len, uint32_t *h, uint32_t *w, const uint8_t **pix,
                  const char **why)
{
    size_t p = 0;
    uint64_t v[3];
    if (len < 2 || buf[0] != 'P' || buf[1] != '5') {
        *why = "not a binary PGM (P5)";
        return -1;
    }
    p = 2;
    for (int k = 0; k < 3; k++) {
        for (;;) {
            while (p < len && (buf[p] == ' ' || buf[p] == '\t' || buf[p] == '\n' || buf[p] == '\r'))
                p++;
            if (p < len && buf[p] == '#') {
                while (p < len && buf[p] != '\n') p++;
                continue;
            }
            break;
        }
        if (p >= len || buf[p] < '0' || buf[p] > '9') {
            *why = "bad PGM header";
            return -1;
        }
        v[k] = 0;
        while (p < len && buf[p] >= '0' && buf[p] <= '9') {
            v[k] = v[k] * 10 + (uint64_t)(buf[p++] - '0');
            if (v[k] > UINT32_MAX) {
                *why = "PGM size out of range";
                return -1;
            }
        }
    }
    if (p >= len || !(buf[p] == ' ' || buf[p] == '\n' || buf[p] == '\t' || buf[p] == '\r')) {
        *why = "bad PGM header";
        return -1;
    }
    p++;
    if (v[2] == 0 || v[2] > 255) {
        *why = "PGM maxval must be 1..255";
        return -1;
    }
    if (v[0] * v[1] != len - p) {
        *why = v[0] * v[1] > len - p ? "PGM pixel data is short" : "PGM has trailing data";
        return -1;
    }
    *w = (uint32_t)v[0];
    *h = (uint32_t)v[1];
    *pix = buf + p;
    return 0;
}

int rle_input_png(const uint8_t *buf, size_t len, uint64_t max_pixels, pngio_image *img, char *msg,
                  size_t msg_len)
{
    memset(img, 0, sizeof *img);
    if (len < 8) { /* fmemopen refuses an empty buffer; no PNG is this short */
        snprintf(msg, msg_len, "not a PNG file");
        return -1;
    }
    /* 1-bit pixels deflated at deflate's best ratio (1032:1), with room over */
    uint64_t most = len > UINT64_MAX / 8400 ? UINT64_MAX : (uint64_t)len * 8400;
    if (!max_pixels || most < max_pixels) max_pixels = most;
    FILE *f = fmemopen((void *)buf, len, "rb");
    if (!f) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    int rc = pngio_read(f, img, 1, max_pixels, msg, msg_len);
    fclose(f);
    return rc;
}
