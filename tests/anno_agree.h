/*
 * anno_agree.h - the differential check of the two annotation parsers
 * (anno_internal.h): the fast scanner and jansson must agree on the return
 * code, on the error (code, offset, message) and on every parsed field, bit
 * for bit.  Shared by tests/test-anno-fast.c and the fuzz target
 * tests/fuzz/fuzz-anno.c; test code only.
 */
#ifndef SA1B_TESTS_ANNO_AGREE_H
#define SA1B_TESTS_ANNO_AGREE_H

#include <stdio.h>
#include <string.h>

#include "anno_internal.h"

static inline int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* 1 when both parses agree completely. */
static inline int anno_agree(const char *doc, size_t len, int *fast_took, char *why, size_t why_cap)
{
    sa1b_anno a = SA1B_ANNO_INIT, b = SA1B_ANNO_INIT, c = SA1B_ANNO_INIT;
    sa1b_error ea, eb, ec;
    sa1b_error_clear(&ea);
    sa1b_error_clear(&eb);
    int ra = anno_parse_impl(&a, doc, len, ANNO_PARSE_AUTO, &ea);
    int rb = anno_parse_impl(&b, doc, len, ANNO_PARSE_JANSSON, &eb);
    int rc = anno_parse_impl(&c, doc, len, ANNO_PARSE_FAST, &ec);
    *fast_took = rc == SA1B_OK;
    int ok = 1;
    why[0] = 0;
    if (ra != rb) {
        snprintf(why, why_cap, "rc %d != %d (%s / %s)", ra, rb, ea.msg, eb.msg);
        ok = 0;
    } else if (rc == SA1B_OK && rb != SA1B_OK) {
        snprintf(why, why_cap, "fast path took a document jansson rejects: %s", eb.msg);
        ok = 0;
    } else if (ra != SA1B_OK) {
        if (ea.code != eb.code || ea.offset != eb.offset || strcmp(ea.msg, eb.msg) != 0) {
            snprintf(why, why_cap, "error '%s' != '%s'", ea.msg, eb.msg);
            ok = 0;
        }
    } else {
        const sa1b_anno *x = &a, *y = &b;
        for (int pass = 0; pass < 2 && ok; pass++, x = &c) {
            if (pass == 1 && rc != SA1B_OK) break;
            if (x->image_id != y->image_id || x->width != y->width || x->height != y->height ||
                strcmp(x->file_name, y->file_name) != 0 || x->n_masks != y->n_masks) {
                snprintf(why, why_cap, "image fields differ");
                ok = 0;
                break;
            }
            for (size_t i = 0; i < x->n_masks && ok; i++) {
                const sa1b_mask_anno *p = &x->masks[i], *q = &y->masks[i];
                int same = p->id == q->id && p->h == q->h && p->w == q->w &&
                           p->counts_len == q->counts_len &&
                           memcmp(p->counts, q->counts, p->counts_len + 1) == 0 &&
                           p->area == q->area && same_double(p->predicted_iou, q->predicted_iou) &&
                           same_double(p->stability_score, q->stability_score) &&
                           p->has_point == q->has_point && p->n_points == q->n_points &&
                           same_double(p->point[0], q->point[0]) &&
                           same_double(p->point[1], q->point[1]);
                for (int k = 0; k < 4; k++)
                    same = same && same_double(p->bbox[k], q->bbox[k]) &&
                           same_double(p->crop_box[k], q->crop_box[k]);
                if (!same) {
                    snprintf(why, why_cap, "mask %zu differs", i);
                    ok = 0;
                }
            }
        }
    }
    sa1b_anno_free(&a);
    sa1b_anno_free(&b);
    sa1b_anno_free(&c);
    return ok;
}

#endif
