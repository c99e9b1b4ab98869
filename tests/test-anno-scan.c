/*
 * test-anno-scan.c - the annotation fast path's string scanner, which
 * copies sixteen plain bytes at a time, against jansson (anno_agree.h):
 * counts strings and file names of every length from 0 to 40 (and some
 * up to 300) with one special byte (each JSON escape, a quote, a control byte, a non-ASCII
 * byte) at every position, so that each lands at every place of a block
 * and at the end of the document's buffer; the parsers must agree on
 * everything, and the fast path must take every valid document.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anno_agree.h"
#include "anno_internal.h"
#include "sa1b_anno.h"
#include "tap.h"

/* Writes a document whose counts (field 0) or file name (field 1) is s. */
static size_t make_doc(char *doc, size_t cap, int field, const char *s)
{
    return (size_t)snprintf(
        doc, cap,
        "{\"image\": {\"image_id\": 7, \"width\": 4, \"height\": 3, \"file_name\": \"%s\"}, "
        "\"annotations\": [{\"bbox\": [0, 0, 1, 1], \"area\": 1, \"segmentation\": {\"size\": "
        "[3, 4], \"counts\": \"%s\"}, \"predicted_iou\": 0.5, \"point_coords\": [[1.5, 2.5]], "
        "\"crop_box\": [0, 0, 4, 3], \"id\": 9, \"stability_score\": 0.25}]}",
        field ? s : "sa_7.jpg", field ? "9;" : s);
}

int main(void)
{
    static const char *const specials[] = {"\\\\", "\\\"", "\\/", "\\n", "\\t", "\\b",
                                           "\\f", "\\r", "\\u0041", "\\x", "\"", "\x01",
                                           "\x1f", "\x7f", "\x80", "\xff", "\\"};
    const size_t ns = sizeof specials / sizeof specials[0];
    char s[512], doc[1024], why[1024];
    int bad = 0, fast = 0, valid = 0, unicode = 0;
    for (int field = 0; field < 2; field++)
        for (size_t len = 0; len <= 300; len += len < 40 ? 1 : 37)
            for (size_t sp = 0; sp <= ns; sp++)
                for (size_t at = 0; at <= len; at += len < 40 ? 1 : 5) {
                    /* plain RLE characters, one special at `at` (sp == ns: none) */
                    size_t k = 0;
                    for (size_t i = 0; i < len; i++) {
                        if (i == at && sp < ns) k += (size_t)sprintf(s + k, "%s", specials[sp]);
                        s[k++] = (char)(48 + (i * 7 + len) % 64 == '\\' ? 49 : 48 + (i * 7 + len) % 64);
                    }
                    if (at == len && sp < ns) k += (size_t)sprintf(s + k, "%s", specials[sp]);
                    s[k] = 0;
                    size_t n = make_doc(doc, sizeof doc, field, s);
                    /* the document alone in an exact-size buffer: reads past it show */
                    char *d = malloc(n);
                    memcpy(d, doc, n);
                    int took = 0;
                    if (!anno_agree(d, n, &took, why, sizeof why)) {
                        if (!bad) tap_diag("field %d len %zu special %zu at %zu: %s", field, len, sp, at, why);
                        bad++;
                    }
                    sa1b_anno a = SA1B_ANNO_INIT;
                    sa1b_error e;
                    if (anno_parse_impl(&a, d, n, ANNO_PARSE_JANSSON, &e) == SA1B_OK) {
                        valid++;
                        fast += took;
                        unicode += sp < ns && strcmp(specials[sp], "\\u0041") == 0;
                    }
                    sa1b_anno_free(&a);
                    free(d);
                    if (sp == ns) break; /* no special: one document per length */
                }
    tap_plan(2);
    tap_ok(bad == 0, "fast path == jansson on %d documents with long strings", valid);
    /* it leaves \u escapes to jansson, by design */
    tap_ok(fast == valid - unicode, "the fast path took %d of the %d valid ones (%d with \\u)",
           fast, valid, unicode);
    return tap_done();
}
