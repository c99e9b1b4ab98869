/*
 * fuzz-provenance.c - libFuzzer target on a shard's provenance as its
 * consumers read it.  fuzz-shard.c mutates whole shards (whose provenance
 * is rarely more than a few bytes that the CRCs let through); here the input
 * is the provenance text itself, put in an otherwise intact shard where
 * sa1b-shard's final provenance goes (after the tables, sa1b-shard(5)),
 * with the header and footer made to agree.  Then:
 *   - sa1b_shard_open_memory opens it if and only if the text holds no NUL,
 *     and then hands back exactly the input's bytes, NUL-terminated; the
 *     layout check passes;
 *   - the text goes through what its readers do with it: jansson as
 *     sa1b-inspect (JSON_DECODE_ANY, else the text as a string), sa1b-verify,
 *     sa1b-shard and the trainer (an object; "tool", "input", "part",
 *     "last_part", "input_clean_end", "input_ends_after", "options" dumped
 *     with sorted keys as the trainer's part key, compared as sa1b-shard
 *     compares a rerun's), and sa1b-inspect's search for a key anywhere in
 *     the tree.
 * The template shard (one raw image of 8x8, one mask of 4x4) is written
 * once, by the shard writer, into a temporary folder ($TMPDIR, else /tmp)
 * that is removed again.  Violations abort.
 */
#include "sa1b_shard.h"
#include "shard_format.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *tmpl;     /* the template shard */
static size_t tmpl_len;
static uint64_t tmpl_po;  /* where its provenance begins */

/* Writes the template with the real writer; aborts when it cannot. */
static void make_template(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/fuzz-provenance-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) abort();
    snprintf(path, sizeof path, "%s/t.shard", dir);
    sa1b_shard_params p;
    memset(&p, 0, sizeof p);
    p.image_size = 8;
    p.mask_size = 4;
    p.image_format = SA1B_SHARD_RAW;
    p.provenance = "{}";
    sa1b_shard_writer *w = NULL;
    sa1b_error err;
    if (sa1b_shard_writer_open(&w, path, &p, &err)) abort();
    static uint8_t image[8 * 8 * 3], mask[16] = {1, 1, 0, 0, 1, 1};
    sa1b_shard_mask_in m;
    memset(&m, 0, sizeof m);
    m.bits = mask;
    m.id = 7;
    m.bbox[2] = m.bbox[3] = 2;
    m.area = 4;
    m.point[0] = m.point[1] = 1;
    sa1b_shard_sample_in s;
    memset(&s, 0, sizeof s);
    s.image_id = 1;
    s.orig_w = s.orig_h = 8;
    s.scale = 1;
    s.file_name = "sa_1.jpg";
    s.image = image;
    s.image_len = sizeof image;
    s.n_masks = 1;
    s.masks = &m;
    if (sa1b_shard_writer_add(w, &s, &err)) abort();
    if (sa1b_shard_writer_set_provenance(w, "{\"tool\":\"sa1b-shard\"}", &err)) abort();
    if (sa1b_shard_writer_finish(w, &err)) abort();
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END)) abort();
    tmpl_len = (size_t)ftell(f);
    rewind(f);
    tmpl = malloc(tmpl_len);
    if (!tmpl || fread(tmpl, 1, tmpl_len, f) != tmpl_len) abort();
    fclose(f);
    unlink(path);
    rmdir(dir);
    tmpl_po = shard_ld64(tmpl + HDR_PROV_OFFSET);
    if (tmpl_po <= SA1B_SHARD_HEADER_SIZE || tmpl_po >= tmpl_len) abort();
}

/* sa1b-inspect's find_key: a key anywhere in the object tree. */
static json_t *find_key(json_t *o, const char *key)
{
    if (!json_is_object(o)) return NULL;
    json_t *v = json_object_get(o, key);
    if (v) return v;
    const char *k;
    json_t *c;
    json_object_foreach(o, k, c) {
        json_t *r = find_key(c, key);
        if (r) return r;
    }
    return NULL;
}

static volatile size_t sink;

/* What the readers do with the text. */
static void consume(const char *prov, size_t len)
{
    /* sa1b-inspect's header line: the JSON value, else the text as a string */
    json_error_t je;
    json_t *any = json_loadb(prov, len, JSON_DECODE_ANY, &je);
    json_t *shown = any ? any : json_stringn(prov, len); /* NULL: not UTF-8 */
    if (shown) {
        char *s = json_dumps(shown, JSON_ENCODE_ANY | JSON_COMPACT);
        if (s) {
            /* one line of JSON text, as the inspect line must be */
            if (strchr(s, '\n')) abort();
            sink += strlen(s);
        }
        free(s);
        json_decref(shown);
    }
    if (strlen(je.text) >= sizeof je.text) abort();
    /* sa1b-verify, sa1b-shard, the trainer: an object, else nothing */
    json_t *j = json_loadb(prov, len, 0, NULL);
    const char *tool = json_string_value(json_object_get(j, "tool"));
    sink += tool ? strlen(tool) : 0;
    const char *in = json_string_value(json_object_get(j, "input"));
    const char *after = json_string_value(json_object_get(j, "input_ends_after"));
    sink += (in ? strlen(in) : 0) + (after ? strlen(after) : 0);
    sink += json_is_false(json_object_get(j, "input_clean_end"));
    const json_t *part = json_object_get(j, "part"), *last = json_object_get(j, "last_part");
    if (json_is_integer(part) && json_integer_value(part) >= 0 && json_is_boolean(last)) {
        char *opts = json_dumps(json_object_get(j, "options"), JSON_COMPACT | JSON_SORT_KEYS);
        if (opts) {
            json_t *back = json_loads(opts, JSON_DECODE_ANY, NULL);
            /* the key the trainer builds reads back as what it was made of */
            if (!back || !json_equal(back, json_object_get(j, "options"))) abort();
            json_decref(back);
        }
        free(opts);
    }
    json_t *st = find_key(j, "strategy"), *mm = find_key(j, "max_masks");
    sink += json_is_string(st) + json_is_integer(mm);
    json_t *again = json_loadb(prov, len, 0, NULL);
    if ((again == NULL) != (j == NULL) || (j && !json_equal(j, again))) abort();
    json_decref(again);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tmpl) make_template();
    if (size > ((size_t)1 << 20)) return 0;
    /* [template up to its provenance][input][NUL][zeros to 64][footer] */
    size_t body = (size_t)tmpl_po + size + 1;
    size_t padded = (body + SA1B_SHARD_ALIGN - 1) / SA1B_SHARD_ALIGN * SA1B_SHARD_ALIGN;
    size_t total = padded + SA1B_SHARD_FOOTER_SIZE;
    uint8_t *d = calloc(1, total);
    if (!d) return 0;
    memcpy(d, tmpl, (size_t)tmpl_po);
    memcpy(d + tmpl_po, data, size);
    memcpy(d + padded, tmpl + tmpl_len - SA1B_SHARD_FOOTER_SIZE, SA1B_SHARD_FOOTER_SIZE);
    shard_st64(d + HDR_PROV_LENGTH, size);
    shard_st64(d + HDR_FILE_SIZE, total);
    shard_st32(d + HDR_PROV_CRC, sa1b_crc32c(0, data, size));
    uint32_t hcrc = sa1b_crc32c(0, d, HDR_CRC);
    shard_st32(d + HDR_CRC, hcrc);
    uint8_t *f = d + padded;
    shard_st64(f + FTR_FILE_SIZE, total);
    shard_st32(f + FTR_HEADER_CRC, hcrc);
    shard_st32(f + FTR_CRC, sa1b_crc32c(0, f, FTR_CRC));

    sa1b_shard *s = NULL;
    sa1b_error err;
    int rc = sa1b_shard_open_memory(&s, d, total, &err);
    int has_nul = memchr(data, 0, size) != NULL;
    if (has_nul) {
        /* a text with a NUL inside is refused, in one line */
        if (rc != SA1B_EFORMAT || strchr(err.msg, '\n')) abort();
    } else {
        if (rc != SA1B_OK) abort();
        const sa1b_shard_info *in = sa1b_shard_get_info(s);
        if (in->provenance_len != size || memcmp(in->provenance, data, size) != 0 ||
            in->provenance[size] != '\0')
            abort();
        if (sa1b_shard_verify_layout(s, &err) != SA1B_OK) abort();
        if (in->n_images != 1 || sa1b_shard_verify_image(s, 0, &err) != SA1B_OK) abort();
        consume(in->provenance, in->provenance_len);
    }
    sa1b_shard_close(s);
    free(d);
    return 0;
}
