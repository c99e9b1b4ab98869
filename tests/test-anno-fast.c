/*
 * test-anno-fast.c - the annotation parser's fast path against the jansson
 * path (anno_internal.h): on the fuzz corpus, the real SA-1B file when
 * present, generated SA-1B-like documents (number spellings, escapes,
 * whitespace, key order, unknown keys) and thousands of random mutations
 * of them, sa1b_anno_parse (fast path first) and the jansson path alone
 * must give the same return code, the same error, and field for field the
 * same annotation.  It also checks that the fast path really takes the
 * well-formed documents.  FUZZ_CORPUS and the real data are optional.
 */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anno_agree.h"
#include "anno_internal.h"
#include "sa1b_anno.h"
#include "tap.h"
#include "test-rng.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { return trng_next(&rs); }
static uint32_t below(uint32_t n) { return trng_below(&rs, n); }

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *len = n;
    return b;
}

/* ---- generated documents ------------------------------------------------ */

typedef struct sbuf { char *p; size_t n, cap; } sbuf;
static void put(sbuf *s, const char *t, size_t n)
{
    if (s->n + n + 1 > s->cap) {
        while (s->n + n + 1 > s->cap) s->cap = s->cap ? 2 * s->cap : 4096;
        s->p = realloc(s->p, s->cap);
    }
    memcpy(s->p + s->n, t, n);
    s->n += n;
    s->p[s->n] = 0;
}
static void puts_(sbuf *s, const char *t) { put(s, t, strlen(t)); }
static void ws(sbuf *s)
{
    static const char *w[] = {"", "", "", " ", "\n  ", "\t", "\r\n"};
    puts_(s, w[below(7)]);
}

/* An integer value v spelled as JSON (sometimes as an integral real). */
static void put_int(sbuf *s, long long v)
{
    char b[64];
    switch (below(6)) {
    case 0: snprintf(b, sizeof b, "%lld.0", v); break;
    case 1: snprintf(b, sizeof b, "%lld.000", v); break;
    case 2: if (v != 0) { snprintf(b, sizeof b, "%lldE0", v); break; } /* fall through */
    default: snprintf(b, sizeof b, "%lld", v); break;
    }
    puts_(s, b);
}

static void put_real(sbuf *s)
{
    char b[64];
    double d = (double)(rnd() % 2000000) / 1000.0 - 500.0;
    switch (below(10)) {
    case 0: snprintf(b, sizeof b, "%.17g", d); break;
    case 1: snprintf(b, sizeof b, "%.3e", d); break;
    case 2: snprintf(b, sizeof b, "%.1f", d); break;
    case 3: snprintf(b, sizeof b, "%lld", (long long)d); break;
    case 4: snprintf(b, sizeof b, "%.3E", d); break;
    case 5: snprintf(b, sizeof b, "0.%llu", (unsigned long long)(rnd() % 100000000000ull)); break;
    case 6: snprintf(b, sizeof b, "%.20f", d / 1000); break;
    case 7: snprintf(b, sizeof b, "%.6f", d); break;
    default: { /* the edges of the parser's exact fast path, all below 1e9 (the
                  bound of the boxes): 15 to 20 digits (SA-1B's scores have 16 or
                  17), 2^53 and its neighbours as digits, powers of ten to 10^-23,
                  many zeros, negative zero, the least normal double */
        static const char *edge[] = {"900719925.4740992", "900719925.4740993",
                                     "900719925.4740991", "0.9007199254740993",
                                     "0.9007199254740992", "1e-22", "123456789e-22", "1e-23",
                                     "-0.0", "-0", "0.000000000000000000000000001",
                                     "12345678.9012345678", "0.98832815885543823",
                                     "2.2250738585072014e-308", "0.1e-00022",
                                     "100000000000000000000000e-23", "5e+8", "-999999999.0"};
        double r = (double)(rnd() >> 11) / 9007199254740992.0;
        switch (below(6)) {
        case 0: snprintf(b, sizeof b, "%.*g", 15 + (int)below(6), r); break;
        case 1: snprintf(b, sizeof b, "%.*g", 1 + (int)below(20), r * 1e4); break;
        case 2: snprintf(b, sizeof b, "%.*e", (int)below(20), r * 1e3 - 500); break;
        case 3: snprintf(b, sizeof b, "%.*f", (int)below(24), r * 2000 - 1000); break;
        case 4: /* m 10^e, m up to 2^53, below 1e9 */
            snprintf(b, sizeof b, "%llue%d", (unsigned long long)(rnd() >> (11 + below(40))),
                     -7 - (int)below(24));
            break;
        default: snprintf(b, sizeof b, "%s", edge[below(sizeof edge / sizeof edge[0])]); break;
        }
    }
    }
    puts_(s, b);
}

static void put_key(sbuf *s, const char *k)
{
    ws(s);
    puts_(s, "\"");
    puts_(s, k);
    puts_(s, "\"");
    ws(s);
    puts_(s, ":");
    ws(s);
}

static void put_unknown(sbuf *s, int depth)
{
    switch (below(depth > 2 ? 4 : 6)) {
    case 0: puts_(s, "null"); break;
    case 1: puts_(s, below(2) ? "true" : "false"); break;
    case 2: put_real(s); break;
    case 3: puts_(s, "\"x\\ty\\/z\\\"\\\\\""); break;
    case 4:
        puts_(s, "[");
        for (uint32_t i = 0, n = below(3); i < n; i++) {
            if (i) puts_(s, ",");
            ws(s);
            put_unknown(s, depth + 1);
        }
        puts_(s, "]");
        break;
    default:
        puts_(s, "{");
        for (uint32_t i = 0, n = below(3); i < n; i++) {
            char k[16];
            snprintf(k, sizeof k, "k%u", i);
            if (i) puts_(s, ",");
            put_key(s, k);
            put_unknown(s, depth + 1);
        }
        puts_(s, "}");
    }
}

static void put_box(sbuf *s, int n)
{
    puts_(s, "[");
    for (int i = 0; i < n; i++) {
        if (i) puts_(s, ",");
        ws(s);
        put_real(s);
    }
    ws(s);
    puts_(s, "]");
}

/* Shuffled order of n fields. */
static void order(int *o, int n)
{
    for (int i = 0; i < n; i++) o[i] = i;
    if (below(3) == 0) return;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)below((uint32_t)i + 1), t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
}

static char *gen_doc(size_t *len)
{
    sbuf s = {0};
    uint32_t W = 1 + below(40), H = 1 + below(40), nm = below(6);
    puts_(&s, "{");
    int o[9];
    order(o, 3);
    for (int f = 0; f < 3; f++) {
        if (f) puts_(&s, ",");
        if (o[f] == 0) {
            put_key(&s, "image");
            puts_(&s, "{");
            int oi[5];
            order(oi, 5);
            for (int g = 0; g < 5; g++) {
                if (g) puts_(&s, ",");
                char b[64];
                switch (oi[g]) {
                case 0: put_key(&s, "image_id"); put_int(&s, (long long)(rnd() % 10000000000ull)); break;
                case 1: put_key(&s, "width"); put_int(&s, W); break;
                case 2: put_key(&s, "height"); put_int(&s, H); break;
                case 3:
                    put_key(&s, "file_name");
                    snprintf(b, sizeof b, "\"sa_%u%s.jpg\"", below(1000), below(4) ? "" : "\\n\\/");
                    puts_(&s, b);
                    break;
                default: put_key(&s, "license"); put_unknown(&s, 1);
                }
            }
            ws(&s);
            puts_(&s, "}");
        } else if (o[f] == 1) {
            put_key(&s, "annotations");
            puts_(&s, "[");
            for (uint32_t m = 0; m < nm; m++) {
                if (m) puts_(&s, ",");
                ws(&s);
                puts_(&s, "{");
                int om[9];
                order(om, 9);
                for (int g = 0; g < 9; g++) {
                    if (g) puts_(&s, ",");
                    char b[128];
                    switch (om[g]) {
                    case 0: put_key(&s, "id"); put_int(&s, (long long)(rnd() % 5000000000ull) - 10); break;
                    case 1:
                        put_key(&s, "segmentation");
                        if (below(2)) {
                            snprintf(b, sizeof b, "{\"size\": [%u, %u], \"counts\": \"%s\"}", H, W,
                                     below(2) ? "0\\\\1a\\\\" : "PPY`0\\\\l");
                        } else {
                            snprintf(b, sizeof b, "{\"counts\" :\"%s\",\"size\":[ %u ,%u.0 ]}",
                                     below(2) ? "" : "?1O\\\\\\\"", H, W);
                        }
                        puts_(&s, b);
                        break;
                    case 2: put_key(&s, "bbox"); put_box(&s, 4); break;
                    case 3: put_key(&s, "area"); put_int(&s, below(W * H + 1)); break;
                    case 4: put_key(&s, "predicted_iou"); put_real(&s); break;
                    case 5: put_key(&s, "stability_score"); put_real(&s); break;
                    case 6: put_key(&s, "crop_box"); put_box(&s, 4); break;
                    case 7:
                        put_key(&s, "point_coords");
                        puts_(&s, "[");
                        for (uint32_t k = 0, n = below(3); k < n; k++) {
                            if (k) puts_(&s, ",");
                            put_box(&s, 2);
                        }
                        puts_(&s, "]");
                        break;
                    default: put_key(&s, "extra"); put_unknown(&s, 1);
                    }
                }
                ws(&s);
                puts_(&s, "}");
            }
            ws(&s);
            puts_(&s, "]");
        } else {
            put_key(&s, "info");
            put_unknown(&s, 1);
        }
    }
    ws(&s);
    puts_(&s, "}");
    ws(&s);
    *len = s.n;
    return s.p;
}

/* A copy of doc with one to three random edits. */
static char *mutate(const char *doc, size_t len, size_t *out_len)
{
    static const char pick[] = "\"\\,:{}[]0123456789-+.eEu \tnulltruefalse\x01\x7f\x80\xc3\xa9";
    char *p = malloc(len + 64);
    memcpy(p, doc, len);
    size_t n = len;
    for (uint32_t e = 0, ne = 1 + below(3); e < ne && n > 0; e++) {
        size_t at = below((uint32_t)n);
        switch (below(6)) {
        case 0: p[at] = pick[below(sizeof pick - 1)]; break;
        case 1: memmove(p + at, p + at + 1, n - at - 1); n--; break;
        case 2:
            memmove(p + at + 1, p + at, n - at);
            p[at] = pick[below(sizeof pick - 1)];
            n++;
            break;
        case 3: n = at; break;
        case 4: p[at] = (char)rnd(); break;
        default: {
            /* duplicate a short span (keys twice, values twice) */
            size_t l = 1 + below(20);
            if (at + l > n) l = n - at;
            if (n + l > len + 60) break;
            memmove(p + at + l, p + at, n - at);
            n += l;
        }
        }
    }
    *out_len = n;
    return p;
}

int main(void)
{
    char why[600];
    int took;
    size_t nfiles = 0, fast_files = 0;
    int all = 1;

    /* the fuzz corpus and the real file, each with mutations */
    const char *dirs[2] = {NULL, NULL};
#ifdef FUZZ_CORPUS
    dirs[0] = FUZZ_CORPUS;
#endif
    /* the real data: $SHARED_DATA, $top_srcdir/../shared/..., ../shared/...,
     * $SA1B_SHARED/... */
    char real[PATH_MAX];
    const char *sh = getenv("SHARED_DATA"), *top = getenv("top_srcdir");
    const char *cands[5] = {sh, top, "..", "../..", getenv("SA1B_SHARED")};
    const char *sufs[5] = {"", "/../shared/data/sa1b-real", "/shared/data/sa1b-real",
                           "/shared/data/sa1b-real", "/data/sa1b-real"};
    for (int i = 0; i < 5 && !dirs[1]; i++) {
        if (!cands[i] || !*cands[i]) continue;
        snprintf(real, sizeof real, "%s%s", cands[i], sufs[i]);
        DIR *probe = opendir(real);
        if (probe) {
            closedir(probe);
            dirs[1] = real;
        }
    }
    for (int d = 0; d < 2; d++) {
        DIR *dp = dirs[d] ? opendir(dirs[d]) : NULL;
        if (!dp) {
            if (d == 1 && !dirs[1])
                tap_diag("no real SA-1B data (../shared/data/sa1b-real beside the source tree, or "
                         "$SA1B_SHARED/data/sa1b-real)");
            else
                tap_diag("no %s", dirs[d] ? dirs[d] : "fuzz corpus");
            continue;
        }
        struct dirent *de;
        while ((de = readdir(dp))) {
            if (de->d_name[0] == '.') continue;
            size_t nl = strlen(de->d_name);
            if (d == 1 && (nl < 5 || strcmp(de->d_name + nl - 5, ".json") != 0)) continue;
            char path[PATH_MAX + 300];
            snprintf(path, sizeof path, "%s/%s", dirs[d], de->d_name);
            size_t len;
            char *doc = slurp(path, &len);
            if (!doc) continue;
            nfiles++;
            if (!anno_agree(doc, len, &took, why, sizeof why)) {
                tap_diag("%s: %s", de->d_name, why);
                all = 0;
            }
            fast_files += took;
            if (d == 1) tap_ok(took, "the fast path takes the real SA-1B file %s", de->d_name);
            for (int m = 0; m < 300; m++) {
                size_t ml;
                char *mdoc = mutate(doc, len, &ml);
                if (!anno_agree(mdoc, ml, &took, why, sizeof why)) {
                    tap_diag("%s mutation %d: %s", de->d_name, m, why);
                    all = 0;
                }
                free(mdoc);
            }
            free(doc);
        }
        closedir(dp);
    }
    tap_ok(all, "%zu files and their mutations: both paths agree (fast path took %zu)", nfiles,
           fast_files);

    /* generated documents and their mutations */
    int gen_ok = 1, gen_fast = 1, mut_ok = 1;
    size_t n_mut_fast = 0, n_mut = 0;
    for (int i = 0; i < 2000; i++) {
        size_t len;
        char *doc = gen_doc(&len);
        if (!anno_agree(doc, len, &took, why, sizeof why)) {
            if (gen_ok) tap_diag("document %d: %s\n%s", i, why, doc);
            gen_ok = 0;
        }
        if (!took && gen_fast) {
            tap_diag("document %d not taken by the fast path:\n%s", i, doc);
            gen_fast = 0;
        }
        for (int m = 0; m < 10; m++) {
            size_t ml;
            char *mdoc = mutate(doc, len, &ml);
            n_mut++;
            if (!anno_agree(mdoc, ml, &took, why, sizeof why)) {
                if (mut_ok) tap_diag("document %d mutation %d: %s\n%.*s", i, m, why, (int)ml, mdoc);
                mut_ok = 0;
            }
            n_mut_fast += took;
            free(mdoc);
        }
        free(doc);
    }
    tap_ok(gen_ok, "2000 generated documents: both paths agree");
    tap_ok(gen_fast, "the fast path takes every generated document");
    tap_ok(mut_ok, "%zu mutations: both paths agree (fast path took %zu)", n_mut, n_mut_fast);

    /* reuse: a fast document, a jansson-only one, a fast one into one anno */
    sa1b_anno a = SA1B_ANNO_INIT;
    sa1b_error e;
    static const char d1[] = "{\"image\":{\"image_id\":1,\"width\":2,\"height\":1,\"file_name\":\"a\"},"
                             "\"annotations\":[{\"id\":3,\"segmentation\":{\"size\":[1,2],\"counts\":\"02\"},"
                             "\"bbox\":[0,0,1,0],\"area\":2,\"predicted_iou\":1,\"stability_score\":1,"
                             "\"crop_box\":[0,0,2,1],\"point_coords\":[[0.5,0.5]]}]}";
    static const char d2[] = "{\"image\":{\"image_id\":1,\"width\":2,\"height\":1,\"file_name\":\"\\u0061\"},"
                             "\"annotations\":[]}";
    int r1 = sa1b_anno_parse(&a, d1, sizeof d1 - 1, &e);
    tap_ok(r1 == 0 && a.n_masks == 1 && strcmp(a.masks[0].counts, "02") == 0, "fast document");
    int r2 = sa1b_anno_parse(&a, d2, sizeof d2 - 1, &e);
    tap_ok(r2 == 0 && a.n_masks == 0 && strcmp(a.file_name, "a") == 0, "\\u escape via jansson");
    r1 = sa1b_anno_parse(&a, d1, sizeof d1 - 1, &e);
    tap_ok(r1 == 0 && a.n_masks == 1 && a.masks[0].counts_len == 2, "fast again into the same anno");
    sa1b_anno_free(&a);
    return tap_done();
}
