/*
 * anno.c - SA-1B annotation JSON parsing and validation with jansson.
 *
 * Implements: sa1b_anno.h.  The document is loaded with json_loadb (which
 * decodes the counts strings' escapes); the mask array is then filled with
 * pointers into jansson's strings, so the json_t tree lives as long as the
 * sa1b_anno (kept in priv_ with the mask array's capacity).
 */
#include "sa1b_anno.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct anno_priv {
    json_t *root;
    size_t cap;            /* allocated masks */
} anno_priv;

/* Reads a JSON integer, or a real with an integral value in int64 range. */
static int get_int64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d != floor(d) || d < -9.2233720368547758e18 ||
            d >= 9.2233720368547758e18)
            return 0;
        *out = (int64_t)d;
        return 1;
    }
    return 0;
}

/* 1 ok, 0 not a number, -1 not finite or beyond SA1B_ANNO_MAX_ABS (so that
 * callers may convert to float or int32 safely). */
static int get_double(const json_t *v, double *out)
{
    if (!json_is_number(v)) return 0;
    double d = json_number_value(v);
    if (!isfinite(d) || fabs(d) > SA1B_ANNO_MAX_ABS) return -1;
    *out = d;
    return 1;
}

/* prefix is "" or "mask 7: " */
static int get_number_field(const json_t *obj, const char *key, const char *prefix,
                            double *out, sa1b_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing %s", prefix, key);
    int r = get_double(v, out);
    if (r == 0) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not a number", prefix, key);
    if (r < 0) return sa1b_error_set(err, SA1B_ERANGE, -1, "%s%s: not finite or beyond 1e9", prefix, key);
    return SA1B_OK;
}

static int get_box(const json_t *obj, const char *key, const char *prefix, double out[4],
                   sa1b_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing %s", prefix, key);
    if (!json_is_array(v) || json_array_size(v) != 4)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not an array of 4 numbers", prefix,
                              key);
    for (size_t i = 0; i < 4; i++) {
        int r = get_double(json_array_get(v, i), &out[i]);
        if (r == 0)
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not an array of 4 numbers",
                                  prefix, key);
        if (r < 0)
            return sa1b_error_set(err, SA1B_ERANGE, -1, "%s%s: not finite or beyond 1e9", prefix,
                                  key);
    }
    return SA1B_OK;
}

/* A dimension in 1..SA1B_ANNO_MAX_SIDE. */
static int get_side(const json_t *v, const char *what, const char *prefix, uint32_t *out,
                    sa1b_error *err)
{
    int64_t x;
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing %s", prefix, what);
    if (!get_int64(v, &x))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not an integer", prefix, what);
    if (x < 1 || x > (int64_t)SA1B_ANNO_MAX_SIDE)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%s%s: %lld outside 1..%u", prefix, what,
                              (long long)x, SA1B_ANNO_MAX_SIDE);
    *out = (uint32_t)x;
    return SA1B_OK;
}

static int parse_image(sa1b_anno *a, const json_t *root, sa1b_error *err)
{
    const json_t *img = json_object_get(root, "image");
    if (!img) return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing image");
    if (!json_is_object(img)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "image: not an object");
    const json_t *v = json_object_get(img, "image_id");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing image.image_id");
    if (!get_int64(v, &a->image_id))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "image.image_id: not an integer");
    SA1B_FORWARD(get_side(json_object_get(img, "width"), "image.width", "", &a->width, err));
    SA1B_FORWARD(get_side(json_object_get(img, "height"), "image.height", "", &a->height, err));
    v = json_object_get(img, "file_name");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing image.file_name");
    if (!json_is_string(v))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "image.file_name: not a string");
    size_t n = json_string_length(v);
    if (n >= sizeof a->file_name)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "image.file_name: %zu bytes, more than %zu",
                              n, sizeof a->file_name - 1);
    const char *s = json_string_value(v);
    if (memchr(s, '\0', n))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "image.file_name: contains a NUL byte");
    memcpy(a->file_name, s, n);
    a->file_name[n] = '\0';
    return SA1B_OK;
}

static int parse_mask(const sa1b_anno *a, size_t i, const json_t *o, sa1b_mask_anno *m,
                      sa1b_error *err)
{
    char pre[48];
    snprintf(pre, sizeof pre, "mask %zu: ", i);
    if (!json_is_object(o)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%snot an object", pre);

    const json_t *v = json_object_get(o, "id");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing id", pre);
    if (!get_int64(v, &m->id)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%sid: not an integer", pre);

    const json_t *seg = json_object_get(o, "segmentation");
    if (!seg) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing segmentation", pre);
    if (!json_is_object(seg))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%ssegmentation: not an object", pre);
    const json_t *size = json_object_get(seg, "size");
    if (!size) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing segmentation.size", pre);
    if (!json_is_array(size) || json_array_size(size) != 2)
        return sa1b_error_set(err, SA1B_EFORMAT, -1,
                              "%ssegmentation.size: not an array [h, w]", pre);
    SA1B_FORWARD(get_side(json_array_get(size, 0), "segmentation.size[0]", pre, &m->h, err));
    SA1B_FORWARD(get_side(json_array_get(size, 1), "segmentation.size[1]", pre, &m->w, err));
    if (m->h != a->height || m->w != a->width)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "%ssize %ux%u != image %ux%u", pre, m->h,
                              m->w, a->height, a->width);
    const json_t *counts = json_object_get(seg, "counts");
    if (!counts) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing segmentation.counts", pre);
    if (!json_is_string(counts))
        return sa1b_error_set(err, SA1B_EFORMAT, -1,
                              json_is_array(counts)
                                  ? "%ssegmentation.counts: uncompressed RLE is not supported"
                                  : "%ssegmentation.counts: not a string",
                              pre);
    m->counts = json_string_value(counts);
    m->counts_len = json_string_length(counts);

    SA1B_FORWARD(get_box(o, "bbox", pre, m->bbox, err));
    v = json_object_get(o, "area");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing area", pre);
    if (!get_int64(v, &m->area))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%sarea: not an integer", pre);
    if (m->area < 0)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%sarea: %lld is negative", pre,
                              (long long)m->area);
    if ((uint64_t)m->area > (uint64_t)m->h * m->w)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%sarea: %lld larger than %ux%u", pre,
                              (long long)m->area, m->h, m->w);
    SA1B_FORWARD(get_number_field(o, "predicted_iou", pre, &m->predicted_iou, err));
    SA1B_FORWARD(get_number_field(o, "stability_score", pre, &m->stability_score, err));
    SA1B_FORWARD(get_box(o, "crop_box", pre, m->crop_box, err));

    const json_t *pc = json_object_get(o, "point_coords");
    if (!pc) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing point_coords", pre);
    if (!json_is_array(pc))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%spoint_coords: not an array", pre);
    m->n_points = json_array_size(pc);
    m->has_point = 0;
    m->point[0] = m->point[1] = 0.0;
    for (size_t k = 0; k < m->n_points; k++) {
        const json_t *p = json_array_get(pc, k);
        double xy[2];
        if (!json_is_array(p) || json_array_size(p) != 2)
            return sa1b_error_set(err, SA1B_EFORMAT, -1,
                                  "%spoint_coords[%zu]: not an array [x, y]", pre, k);
        for (size_t j = 0; j < 2; j++) {
            int r = get_double(json_array_get(p, j), &xy[j]);
            if (r == 0)
                return sa1b_error_set(err, SA1B_EFORMAT, -1,
                                      "%spoint_coords[%zu]: not an array [x, y]", pre, k);
            if (r < 0)
                return sa1b_error_set(err, SA1B_ERANGE, -1,
                                      "%spoint_coords[%zu]: not finite or beyond 1e9", pre, k);
        }
        if (k == 0) {
            m->point[0] = xy[0];
            m->point[1] = xy[1];
            m->has_point = 1;
        }
    }
    return SA1B_OK;
}

static void anno_reset(sa1b_anno *a, anno_priv *p)
{
    if (p && p->root) {
        json_decref(p->root);
        p->root = NULL;
    }
    a->image_id = 0;
    a->width = a->height = 0;
    a->file_name[0] = '\0';
    a->n_masks = 0;
}

int sa1b_anno_parse(sa1b_anno *a, const char *json, size_t len, sa1b_error *err)
{
    if (!a || (!json && len)) return sa1b_error_set(err, SA1B_EINVAL, -1, "anno: NULL argument");
    anno_priv *p = a->priv_;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return sa1b_error_set(err, SA1B_ENOMEM, -1, "anno: out of memory");
        a->priv_ = p;
        a->masks = NULL;
    }
    anno_reset(a, p);

    json_error_t je;
    /* JSON_ALLOW_NUL keeps strings with \u0000 parseable (file_name rejects it
     * itself; counts with a NUL fail in the RLE parser at the right offset). */
    json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root)
        return sa1b_error_set(err, SA1B_EFORMAT, je.position, "line %d column %d: %s", je.line,
                              je.column, je.text);
    p->root = root;
    if (!json_is_object(root)) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "top level: not an object");
    }
    int rc = parse_image(a, root, err);
    if (rc != SA1B_OK) {
        anno_reset(a, p);
        return rc;
    }
    const json_t *arr = json_object_get(root, "annotations");
    if (!arr) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing annotations");
    }
    if (!json_is_array(arr)) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "annotations: not an array");
    }
    size_t n = json_array_size(arr);
    if (n > SA1B_ANNO_MAX_MASKS) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_ERANGE, -1, "annotations: %zu masks, more than %u", n,
                              SA1B_ANNO_MAX_MASKS);
    }
    if (n > p->cap) {
        size_t cap = p->cap ? p->cap : 64;
        while (cap < n) cap *= 2;
        sa1b_mask_anno *m = realloc(a->masks, cap * sizeof *m);
        if (!m) {
            anno_reset(a, p);
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "anno: out of memory for %zu masks", n);
        }
        a->masks = m;
        p->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        memset(&a->masks[i], 0, sizeof a->masks[i]);
        rc = parse_mask(a, i, json_array_get(arr, i), &a->masks[i], err);
        if (rc != SA1B_OK) {
            anno_reset(a, p);
            return rc;
        }
    }
    a->n_masks = n;
    return SA1B_OK;
}

void sa1b_anno_free(sa1b_anno *a)
{
    if (!a) return;
    anno_priv *p = a->priv_;
    if (p) {
        if (p->root) json_decref(p->root);
        free(p);
    }
    free(a->masks);
    memset(a, 0, sizeof *a);
}
