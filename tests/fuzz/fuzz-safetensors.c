/*
 * fuzz-safetensors.c - the safetensors reader of sa1b-train on arbitrary
 * bytes: it must reject or accept without reading outside the buffer, and
 * every tensor it accepts must lie inside the data block; a refusal says
 * why in one line.  (The header-only reader, tr_st_peek_meta, is held to
 * the same verdicts by fuzz-checkpoint.c.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy so that ASan sees the exact bounds */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    tr_st_file f = {0};
    char err[256];
    if (tr_st_parse(&f, buf, size, err, sizeof err) == 0) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < f.n; i++) {
            const tr_st_tensor *t = &f.t[i];
            if (t->data < buf || t->data + t->n_bytes > buf + size) abort();
            if (t->n_bytes) sink ^= t->data[0] ^ t->data[t->n_bytes - 1];
            (void)tr_st_find(&f, t->name);
        }
        (void)tr_st_meta(&f, "S");
        (void)sink;
    } else {
        fuzz_one_line(err, sizeof err);
    }
    tr_st_close(&f);
    free(buf);
    return 0;
}
