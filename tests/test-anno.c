/*
 * test-anno.c - SA-1B annotation parsing and validation (pipeline/sa1b_anno.h).
 *
 * The real annotation file and the three real single annotations of
 * ../shared/data/sa1b-real are parsed when present (skipped otherwise) and
 * spot-checked against values read off the files; crafted documents cover
 * each quirk (int64 ids, integral reals, int/float boxes, iou > 1, escapes)
 * and each error class, checking the code and the exact message.
 */
#include <jansson.h>
#include <limits.h>

#include "sa1b_anno.h"
#include "tap.h"

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static const char *find_shared(char *buf, size_t cap)
{
    const char *env[3] = {getenv("SHARED_DATA"), getenv("top_srcdir"), getenv("SA1B_SHARED")};
    const char *suffix[3] = {"", "/../shared/data/sa1b-real", "/data/sa1b-real"};
    for (int i = 0; i < 3; i++) {
        if (!env[i] || !*env[i]) continue;
        snprintf(buf, cap, "%s%s", env[i], suffix[i]);
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/sa_226381.json", buf);
        FILE *f = fopen(probe, "rb");
        if (f) {
            fclose(f);
            return buf;
        }
    }
    const char *rel[] = {"../shared/data/sa1b-real", "../../shared/data/sa1b-real"};
    for (int i = 0; i < 2; i++) {
        snprintf(buf, cap, "%s/sa_226381.json", rel[i]);
        FILE *f = fopen(buf, "rb");
        if (f) {
            fclose(f);
            snprintf(buf, cap, "%s", rel[i]);
            return buf;
        }
    }
    return NULL;
}

/* One document with one annotation built from pieces. */
#define IMG "\"image\": {\"image_id\": 5, \"width\": 4, \"height\": 3, \"file_name\": \"sa_5.jpg\"}"
#define SEG "\"segmentation\": {\"size\": [3, 4], \"counts\": \"0<\"}"
#define REST                                                                                   \
    "\"bbox\": [0, 0, 3, 2], \"area\": 12, \"predicted_iou\": 1.02, \"stability_score\": 0.9, " \
    "\"crop_box\": [0.0, 0.0, 4.0, 3.0], \"point_coords\": [[1.5, 2.25]]"
#define DOC(ann) "{" IMG ", \"annotations\": [" ann "]}"
#define ANN(...) "{\"id\": 1, " SEG ", " REST __VA_ARGS__ "}"

static void expect_error(sa1b_anno *a, const char *doc, int code, const char *msg, const char *what)
{
    sa1b_error err;
    int rc = sa1b_anno_parse(a, doc, strlen(doc), &err);
    tap_is_int(rc, code, "%s: code", what);
    if (rc != SA1B_OK) tap_is_str(err.msg, msg, "%s: message", what);
    else tap_ok(0, "%s: message (parsed fine)", what);
    tap_ok(a->n_masks == 0, "%s: annotation left empty", what);
}

static void test_real(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (!find_shared(dir, sizeof dir)) {
        tap_skip(20, "no real SA-1B data (../shared/data/sa1b-real beside the source tree, or $SA1B_SHARED/data/sa1b-real)");
        return;
    }
    snprintf(path, sizeof path, "%s/sa_226381.json", dir);
    size_t len;
    char *buf = read_all(path, &len);
    sa1b_anno a = SA1B_ANNO_INIT;
    sa1b_error err;
    int rc = sa1b_anno_parse(&a, buf, len, &err);
    tap_is_int(rc, SA1B_OK, "real file parses (%s)", rc ? err.msg : "ok");
    tap_is_int(a.image_id, 226381, "image_id");
    tap_ok(a.width == 2000 && a.height == 1500, "image 2000x1500");
    tap_is_str(a.file_name, "sa_226381.jpg", "file_name");
    tap_is_int(a.n_masks, 113, "113 masks");
    if (a.n_masks >= 2) {
        const sa1b_mask_anno *m = &a.masks[0];
        tap_is_int(m->id, 333521560, "mask 0 id");
        tap_ok(m->h == 1500 && m->w == 2000, "mask 0 size [1500, 2000] -> h 1500 w 2000");
        tap_ok(m->bbox[0] == 861 && m->bbox[1] == 525 && m->bbox[2] == 71 && m->bbox[3] == 149,
               "mask 0 bbox");
        tap_is_int(m->area, 6206, "mask 0 area");
        tap_is_close(m->predicted_iou, 0.9783458709716797, 1e-15, "mask 0 predicted_iou");
        tap_is_close(m->stability_score, 0.9728441834449768, 1e-15, "mask 0 stability_score");
        tap_ok(m->has_point && m->n_points == 1 && m->point[0] == 911.75 && m->point[1] == 629.9375,
               "mask 0 point");
        tap_ok(m->crop_box[0] == 436 && m->crop_box[2] == 692, "mask 0 crop_box");
        tap_ok(strncmp(m->counts, "Pl]W14f^14M3M1O2O001O", 21) == 0, "mask 0 counts start");
        tap_ok(strstr(m->counts, "?Ad0\\Od0\\Oc0]Of0ZO") != NULL,
               "mask 0 counts: JSON escapes decoded to single backslashes");
        tap_is_int(strlen(m->counts), m->counts_len, "counts_len is the decoded length");
    } else {
        tap_skip(11, "no masks");
    }
    int chars_ok = 1, sizes_ok = 1;
    for (size_t i = 0; i < a.n_masks; i++) {
        for (size_t k = 0; k < a.masks[i].counts_len; k++)
            chars_ok &= a.masks[i].counts[k] >= 48 && a.masks[i].counts[k] <= 111;
        sizes_ok &= a.masks[i].h == 1500 && a.masks[i].w == 2000;
    }
    tap_ok(chars_ok, "every counts character is in 48..111 after unescaping");
    tap_ok(sizes_ok, "every mask is 1500x2000");
    /* reuse: parse again into the same struct */
    rc = sa1b_anno_parse(&a, buf, len, &err);
    tap_ok(rc == SA1B_OK && a.n_masks == 113, "reparse into the same sa1b_anno");
    free(buf);

    snprintf(path, sizeof path, "%s/snippets_other_real_annotations.jsonl", dir);
    buf = read_all(path, &len);
    if (!buf) {
        tap_skip(1, "no snippets file");
        sa1b_anno_free(&a);
        return;
    }
    int n_lines = 0, n_ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        if (!o) continue;
        n_lines++;
        json_t *doc = json_object();
        json_object_set(doc, "image", json_object_get(o, "image"));
        json_t *arr = json_array();
        json_array_append(arr, json_object_get(o, "annotation"));
        json_object_set_new(doc, "annotations", arr);
        char *text = json_dumps(doc, JSON_COMPACT);
        rc = sa1b_anno_parse(&a, text, strlen(text), &err);
        if (rc == SA1B_OK && a.n_masks == 1 && a.masks[0].h == a.height &&
            a.masks[0].w == a.width && a.masks[0].id > 0 && a.masks[0].has_point)
            n_ok++;
        else
            tap_diag("snippet %d: %s", n_lines, rc ? err.msg : "unexpected values");
        if (rc == SA1B_OK && a.image_id == 1)
            tap_ok(a.width == 1500 && a.height == 2060, "sa_1 is a 1500x2060 portrait");
        free(text);
        json_decref(doc);
        json_decref(o);
    }
    tap_ok(n_lines == 3 && n_ok == 3, "the three real snippets parse (%d/%d)", n_ok, n_lines);
    free(buf);
    sa1b_anno_free(&a);
}

static void test_quirks(void)
{
    sa1b_anno a = SA1B_ANNO_INIT;
    sa1b_error err;
    const char *doc =
        "{\"image\": {\"image_id\": 4000000000.0, \"width\": 4, \"height\": 3, \"file_name\": \"x\"},"
        " \"extra\": [1, 2], \"annotations\": ["
        "{\"id\": 8589934593, \"segmentation\": {\"size\": [3, 4], \"counts\": \"a\\\\b\\u0030\"},"
        " \"bbox\": [1, 2.5, 3, 4], \"area\": 5.0, \"predicted_iou\": 1.0234,"
        " \"stability_score\": 0, \"crop_box\": [0, 0, 4, 3], \"point_coords\": [], \"more\": null},"
        "{\"id\": 3e9, \"segmentation\": {\"size\": [3.0, 4.0], \"counts\": \"\"},"
        " \"bbox\": [0, 0, 0, 0], \"area\": 0, \"predicted_iou\": -0.5,"
        " \"stability_score\": 1e-3, \"crop_box\": [0.5, 0, 4, 3],"
        " \"point_coords\": [[3, 2], [0.5, 0.25]]}]}";
    int rc = sa1b_anno_parse(&a, doc, strlen(doc), &err);
    tap_is_int(rc, SA1B_OK, "quirky document parses (%s)", rc ? err.msg : "ok");
    tap_is_int(a.image_id, 4000000000LL, "image_id as integral real above 2^31");
    tap_is_int(a.n_masks, 2, "two masks");
    if (a.n_masks == 2) {
        tap_is_int(a.masks[0].id, 8589934593LL, "id above 2^32");
        tap_is_str(a.masks[0].counts, "a\\b0", "counts escapes decoded");
        tap_is_int(a.masks[0].counts_len, 4, "counts_len");
        tap_ok(a.masks[0].bbox[1] == 2.5 && a.masks[0].bbox[2] == 3, "mixed int/float bbox");
        tap_is_int(a.masks[0].area, 5, "area as integral real");
        tap_is_close(a.masks[0].predicted_iou, 1.0234, 1e-12, "predicted_iou above 1 kept");
        tap_ok(!a.masks[0].has_point && a.masks[0].n_points == 0, "empty point_coords");
        tap_is_int(a.masks[1].id, 3000000000LL, "id 3e9");
        tap_ok(a.masks[1].h == 3 && a.masks[1].w == 4, "size as integral reals");
        tap_ok(a.masks[1].has_point && a.masks[1].n_points == 2 && a.masks[1].point[0] == 3 &&
                   a.masks[1].point[1] == 2,
               "first of two points");
        tap_is_int(a.masks[1].counts_len, 0, "empty counts accepted here (RLE checks it)");
    } else {
        tap_skip(11, "parse failed");
    }
    /* no masks at all is valid */
    const char *empty = "{" IMG ", \"annotations\": []}";
    rc = sa1b_anno_parse(&a, empty, strlen(empty), &err);
    tap_ok(rc == SA1B_OK && a.n_masks == 0 && a.width == 4, "no annotations is valid");
    sa1b_anno_free(&a);
    tap_ok(a.masks == NULL && a.priv_ == NULL && a.n_masks == 0, "free resets");
    sa1b_anno_free(&a);
    sa1b_anno_free(NULL);
    tap_ok(1, "free twice and free(NULL) are fine");
}

static void test_errors(void)
{
    sa1b_anno a = SA1B_ANNO_INIT;
    sa1b_error err;
    /* the crafted good document first, so errors also test the reset */
    const char *good = DOC(ANN());
    int rc = sa1b_anno_parse(&a, good, strlen(good), &err);
    tap_is_int(rc, SA1B_OK, "crafted document parses (%s)", rc ? err.msg : "ok");

    expect_error(&a, "{\"image\": {\n  \"width\": 12,,}}", SA1B_EFORMAT,
                 "line 2 column 15: string or '}' expected near ','", "syntax error");
    rc = sa1b_anno_parse(&a, "{\"a\": 1,\n\n  x}", 15, &err);
    tap_ok(rc == SA1B_EFORMAT && err.offset > 0 && strncmp(err.msg, "line 3 column", 13) == 0,
           "parse error has a position: %s (offset %lld)", err.msg, (long long)err.offset);
    expect_error(&a, "", SA1B_EFORMAT, "line 1 column 0: '[' or '{' expected near end of file",
                 "empty document");
    expect_error(&a, "[1, 2]", SA1B_EFORMAT, "top level: not an object", "array document");
    expect_error(&a, "{\"annotations\": []}", SA1B_EFORMAT, "missing image", "missing image");
    expect_error(&a, "{\"image\": {\"image_id\": 1, \"width\": \"12\", \"height\": 3,"
                     " \"file_name\": \"a\"}, \"annotations\": []}",
                 SA1B_EFORMAT, "image.width: not an integer", "width as a string");
    expect_error(&a, "{\"image\": {\"image_id\": 1, \"width\": 12.5, \"height\": 3,"
                     " \"file_name\": \"a\"}, \"annotations\": []}",
                 SA1B_EFORMAT, "image.width: not an integer", "fractional width");
    expect_error(&a, "{\"image\": {\"image_id\": 1, \"width\": 0, \"height\": 3,"
                     " \"file_name\": \"a\"}, \"annotations\": []}",
                 SA1B_ERANGE, "image.width: 0 outside 1..32768", "zero width");
    expect_error(&a, "{\"image\": {\"image_id\": 1, \"width\": 10, \"height\": 40000,"
                     " \"file_name\": \"a\"}, \"annotations\": []}",
                 SA1B_ERANGE, "image.height: 40000 outside 1..32768", "absurd height");
    expect_error(&a, "{\"image\": {\"image_id\": 1, \"width\": 10, \"height\": 3},"
                     " \"annotations\": []}",
                 SA1B_EFORMAT, "missing image.file_name", "missing file_name");
    expect_error(&a, "{" IMG "}", SA1B_EFORMAT, "missing annotations", "missing annotations");
    expect_error(&a, "{" IMG ", \"annotations\": {}}", SA1B_EFORMAT, "annotations: not an array",
                 "annotations not an array");
    expect_error(&a, DOC(ANN() ", 7"), SA1B_EFORMAT, "mask 1: not an object", "mask not an object");
    expect_error(&a,
                 DOC(ANN() ", {\"id\": 2, \"segmentation\": {\"size\": [3, 4]}, " REST "}"),
                 SA1B_EFORMAT, "mask 1: missing segmentation.counts", "missing counts");
    expect_error(&a,
                 DOC("{\"id\": 2, \"segmentation\": {\"size\": [3, 4], \"counts\": [0, 12]}, " REST "}"),
                 SA1B_EFORMAT, "mask 0: segmentation.counts: uncompressed RLE is not supported",
                 "uncompressed RLE");
    expect_error(&a, DOC("{\"id\": 2, \"segmentation\": {\"size\": [4, 3], \"counts\": \"\"}, " REST "}"),
                 SA1B_EMISMATCH, "mask 0: size 4x3 != image 3x4", "mask size transposed");
    expect_error(&a, DOC("{\"id\": 2, \"segmentation\": {\"size\": [3], \"counts\": \"\"}, " REST "}"),
                 SA1B_EFORMAT, "mask 0: segmentation.size: not an array [h, w]", "size of one");
    expect_error(&a, DOC("{\"id\": 1.5, " SEG ", " REST "}"), SA1B_EFORMAT,
                 "mask 0: id: not an integer", "fractional id");
    expect_error(&a, DOC("{" SEG ", " REST "}"), SA1B_EFORMAT, "mask 0: missing id", "missing id");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3], \"area\": 12,"
                         " \"predicted_iou\": 1, \"stability_score\": 0.9, \"crop_box\": [0, 0, 4, 3],"
                         " \"point_coords\": []}"),
                 SA1B_EFORMAT, "mask 0: bbox: not an array of 4 numbers", "bbox of three");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": -3,"
                         " \"predicted_iou\": 1, \"stability_score\": 0.9, \"crop_box\": [0, 0, 4, 3],"
                         " \"point_coords\": []}"),
                 SA1B_ERANGE, "mask 0: area: -3 is negative", "negative area");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": 3,"
                         " \"predicted_iou\": \"high\", \"stability_score\": 0.9,"
                         " \"crop_box\": [0, 0, 4, 3], \"point_coords\": []}"),
                 SA1B_EFORMAT, "mask 0: predicted_iou: not a number", "iou as a string");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": 3,"
                         " \"predicted_iou\": 0.5, \"stability_score\": 0.9,"
                         " \"crop_box\": [0, 0, 4, 3], \"point_coords\": [[1, 2, 3]]}"),
                 SA1B_EFORMAT, "mask 0: point_coords[0]: not an array [x, y]", "point of three");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": 3,"
                         " \"predicted_iou\": 0.5, \"stability_score\": 0.9,"
                         " \"crop_box\": [0, 0, 4, 3]}"),
                 SA1B_EFORMAT, "mask 0: missing point_coords", "missing point_coords");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": 13,"
                         " \"predicted_iou\": 0.5, \"stability_score\": 0.9,"
                         " \"crop_box\": [0, 0, 4, 3], \"point_coords\": []}"),
                 SA1B_ERANGE, "mask 0: area: 13 larger than 3x4", "area above h*w");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": 3,"
                         " \"predicted_iou\": 3.3e126, \"stability_score\": 0.9,"
                         " \"crop_box\": [0, 0, 4, 3], \"point_coords\": []}"),
                 SA1B_ERANGE, "mask 0: predicted_iou: not finite or beyond 1e9", "huge iou");
    expect_error(&a, DOC("{\"id\": 1, " SEG ", \"bbox\": [0, -2e9, 3, 2], \"area\": 3,"
                         " \"predicted_iou\": 0.5, \"stability_score\": 0.9,"
                         " \"crop_box\": [0, 0, 4, 3], \"point_coords\": []}"),
                 SA1B_ERANGE, "mask 0: bbox: not finite or beyond 1e9", "huge bbox");
    /* non-finite numbers cannot be written in JSON: an overflowing literal is a parse error */
#define INF_DOC DOC("{\"id\": 1, " SEG ", \"bbox\": [0, 0, 3, 2], \"area\": 3," \
                    " \"predicted_iou\": 0.5, \"stability_score\": 1e999,"     \
                    " \"crop_box\": [0, 0, 4, 3], \"point_coords\": []}")
    rc = sa1b_anno_parse(&a, INF_DOC, strlen(INF_DOC), &err);
    tap_ok(rc == SA1B_EFORMAT && strstr(err.msg, "real number overflow"),
           "1e999 rejected: %s", err.msg);
    rc = sa1b_anno_parse(&a, DOC(ANN(", \"area\": 7")), strlen(DOC(ANN(", \"area\": 7"))), &err);
    tap_ok(rc == SA1B_EFORMAT && strstr(err.msg, "duplicate object key"),
           "duplicate keys rejected: %s", err.msg);
    rc = sa1b_anno_parse(&a, "{\"image\": 1}", 5, &err);   /* length cuts the text */
    tap_is_int(rc, SA1B_EFORMAT, "length respected (no NUL needed)");

    /* more than 100000 masks */
    size_t n = 100001, cap = n * 3 + 256, used = 0;
    char *big = malloc(cap);
    used += (size_t)snprintf(big, cap, "{" IMG ", \"annotations\": [");
    for (size_t i = 0; i < n; i++) {
        memcpy(big + used, i ? ",{}" : "{}", i ? 3 : 2);
        used += i ? 3 : 2;
    }
    memcpy(big + used, "]}", 2);
    used += 2;
    rc = sa1b_anno_parse(&a, big, used, &err);
    tap_is_int(rc, SA1B_ERANGE, "100001 masks: ERANGE");
    tap_is_str(err.msg, "annotations: 100001 masks, more than 100000", "100001 masks: message");
    free(big);

    rc = sa1b_anno_parse(&a, good, strlen(good), &err);
    tap_ok(rc == SA1B_OK && a.n_masks == 1 && a.masks[0].area == 12, "good again after errors");
    tap_is_int(sa1b_anno_parse(NULL, good, 3, &err), SA1B_EINVAL, "NULL anno: EINVAL");
    sa1b_anno_free(&a);
}

int main(void)
{
    tap_plan(0);
    test_quirks();
    test_errors();
    test_real();
    return tap_done();
}
