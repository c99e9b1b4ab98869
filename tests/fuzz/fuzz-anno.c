/*
 * fuzz-anno.c - libFuzzer target: any bytes as an SA-1B annotation JSON
 * through sa1b_anno_parse, twice into the same sa1b_anno (reuse path), then
 * free.  Touches every field of every mask so ASan sees bad pointers.  Then
 * the differential check: the fast scanner and jansson must agree on every
 * input (tests/anno_agree.h); a disagreement aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "anno_agree.h"
#include "sa1b_anno.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a message of the library is one line, whatever input it quotes */
static void one_line(const sa1b_error *e)
{
    for (const char *c = e->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sa1b_anno a = SA1B_ANNO_INIT;
    sa1b_error err;
    for (int pass = 0; pass < 2; pass++) {
        if (sa1b_anno_parse(&a, (const char *)data, size, &err) != SA1B_OK) {
            one_line(&err);
            continue;
        }
        volatile uint64_t sink = a.width + a.height + (uint64_t)a.image_id + a.file_name[0];
        for (size_t i = 0; i < a.n_masks; i++) {
            const sa1b_mask_anno *m = &a.masks[i];
            sink += (uint64_t)m->id + m->h + m->w + (uint64_t)m->area + m->n_points;
            if (m->counts_len) sink += (uint8_t)m->counts[m->counts_len - 1];
            volatile double dsink = m->bbox[3] + m->crop_box[3] + m->point[1] + m->predicted_iou;
            (void)dsink;
        }
        (void)sink;
    }
    sa1b_anno_free(&a);
    int fast_took;
    char why[600]; /* (two messages of up to 255 bytes) */
    if (!anno_agree((const char *)data, size, &fast_took, why, sizeof why)) {
        fprintf(stderr, "fuzz-anno: the parsers disagree: %s\n", why);
        abort();
    }
    return 0;
}
