/*
 * test-rle-real.c - the codec on real SA-1B annotations: every mask of
 * sa_226381.json and of snippets_other_real_annotations.jsonl must round
 * trip string -> runs -> string unchanged, decode/encode to the same runs,
 * and give the file's `area` and (SA-1B convention) `bbox`.  The data lives
 * outside the repository: $SA1B_SHARED/data/sa1b-real, else the shared
 * directory next to the source tree; the test skips when neither exists.
 */
#include <jansson.h>
#include <sys/stat.h>

#include "sa1b_rle.h"
#include "tap.h"

#ifndef SA1B_SHARED_DIR
#define SA1B_SHARED_DIR "../shared"
#endif

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int n_masks;

static void check_annotation(json_t *ann, const char *where)
{
    json_t *seg = json_object_get(ann, "segmentation");
    json_t *size = json_object_get(seg, "size");
    const char *counts = json_string_value(json_object_get(seg, "counts"));
    json_int_t id = json_integer_value(json_object_get(ann, "id"));
    if (!json_is_array(size) || json_array_size(size) != 2 || !counts) {
        tap_ok(0, "%s: annotation %lld has a segmentation", where, (long long)id);
        return;
    }
    uint32_t h = (uint32_t)json_integer_value(json_array_get(size, 0));
    uint32_t w = (uint32_t)json_integer_value(json_array_get(size, 1));
    size_t len = strlen(counts);
    sa1b_rle r = SA1B_RLE_INIT, r2 = SA1B_RLE_INIT;
    sa1b_error err;
    n_masks++;
    int rc = sa1b_rle_from_string(&r, h, w, counts, len, &err);
    if (!tap_ok(rc == SA1B_OK, "%s: mask %lld parses", where, (long long)id)) {
        tap_diag("%s", err.msg);
        return;
    }
    char *s = NULL;
    size_t slen = 0;
    sa1b_rle_to_string(&r, &s, &slen, &err);
    tap_ok(s && slen == len && memcmp(s, counts, len) == 0, "%s: mask %lld string round trip",
           where, (long long)id);
    free(s);

    tap_is_int(sa1b_rle_area(&r), json_integer_value(json_object_get(ann, "area")),
               "%s: mask %lld area", where, (long long)id);
    json_t *jb = json_object_get(ann, "bbox");
    double bb[4], cb[4];
    sa1b_rle_bbox_sa1b(&r, bb);
    sa1b_rle_bbox(&r, cb);
    int same = json_array_size(jb) == 4;
    for (int k = 0; same && k < 4; k++) same = json_number_value(json_array_get(jb, k)) == bb[k];
    if (!tap_ok(same, "%s: mask %lld sa1b bbox", where, (long long)id))
        tap_diag("got [%g,%g,%g,%g]", bb[0], bb[1], bb[2], bb[3]);
    tap_ok(cb[0] == bb[0] && cb[1] == bb[1] && cb[2] == bb[2] + 1 && cb[3] == bb[3] + 1,
           "%s: mask %lld coco bbox is one wider and taller", where, (long long)id);

    uint8_t *m = malloc((size_t)h * w);
    sa1b_rle_decode(&r, m, 0);
    rc = sa1b_rle_encode(&r2, m, h, w, 0, &err);
    same = rc == 0 && r2.n == r.n && memcmp(r2.cnts, r.cnts, r.n * sizeof *r.cnts) == 0;
    tap_ok(same, "%s: mask %lld decode/encode identity", where, (long long)id);
    free(m);
    sa1b_rle_free(&r);
    sa1b_rle_free(&r2);
}

int main(void)
{
    const char *env = getenv("SA1B_SHARED");
    char dir[4096] = "";
    if (env && *env) snprintf(dir, sizeof dir, "%s/data/sa1b-real", env);
    if (!*dir || !is_dir(dir)) snprintf(dir, sizeof dir, "%s/data/sa1b-real", SA1B_SHARED_DIR);
    if (!is_dir(dir)) tap_skip_all("no real SA-1B data (../shared/data/sa1b-real beside the source tree, or $SA1B_SHARED/data/sa1b-real)");

    char path[4200];
    snprintf(path, sizeof path, "%s/sa_226381.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!tap_ok(root != NULL, "load sa_226381.json")) tap_diag("%s", jerr.text);
    json_t *anns = json_object_get(root, "annotations");
    tap_is_int(json_array_size(anns), 113, "113 annotations");
    size_t i;
    json_t *a;
    json_array_foreach(anns, i, a) check_annotation(a, "sa_226381");
    json_decref(root);

    snprintf(path, sizeof path, "%s/snippets_other_real_annotations.jsonl", dir);
    FILE *f = fopen(path, "r");
    tap_ok(f != NULL, "open the snippets");
    char line[65536];
    int lines = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, &jerr);
        if (!o) continue;
        lines++;
        check_annotation(json_object_get(o, "annotation"),
                         json_string_value(json_object_get(json_object_get(o, "image"),
                                                           "file_name")));
        json_decref(o);
    }
    if (f) fclose(f);
    tap_is_int(lines, 3, "three snippet lines");
    tap_is_int(n_masks, 116, "116 real masks checked");
    return tap_done();
}
