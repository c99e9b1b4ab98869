/*
 * fuzz-manifest.c - libFuzzer target on the manifest reader: any bytes
 * given to sa1b_manifest_parse either fail with one terminated line and no
 * manifest, or give a manifest whose rows are all set, each file named
 * once, and whose totals are the sums of the rows.
 */
#include "sa1b_manifest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sa1b_manifest *m = NULL;
    sa1b_error err;
    if (sa1b_manifest_parse(&m, (const char *)data, size, "dir", &err) != SA1B_OK) {
        if (m || strlen(err.msg) >= sizeof err.msg) abort();
        for (const char *c = err.msg; *c; c++) /* one line, whatever input it quotes */
            if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
        return 0;
    }
    uint64_t images = 0, masks = 0, bytes = 0;
    if (m->n_shards == 0) abort();
    for (size_t i = 0; i < m->n_shards; i++) {
        const sa1b_manifest_shard *r = &m->shards[i];
        if (!r->file || !*r->file || !r->path || r->images > UINT32_MAX) abort();
        for (size_t k = 0; k < i; k++)
            if (strcmp(m->shards[k].path, r->path) == 0) abort();
        images += r->images;
        masks += r->masks;
        bytes += r->bytes;
    }
    if (images != m->images || masks != m->masks || bytes != m->bytes) abort();
    sa1b_manifest_free(m);
    return 0;
}
