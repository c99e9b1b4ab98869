/*
 * alloc.c - the accounting allocator: a 64-byte header before every block
 * remembers its size and category so that a free can be accounted.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

#define TR_HDR 64

typedef struct tr_hdr {
    uint64_t n_bytes;
    uint32_t cat;
    uint32_t magic;
} tr_hdr;

#define TR_MAGIC 0x5a1b7e45u

const char *tr_mem_cat_name(tr_mem_cat cat)
{
    static const char *names[TR_MEM_NCAT] = {"parameters", "gradients", "optimizer",
                                             "activations", "workspace", "data"};
    return (unsigned)cat < TR_MEM_NCAT ? names[cat] : "?";
}

void tr_mem_init(tr_mem *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void tr_mem_destroy(tr_mem *m) { pthread_mutex_destroy(&m->mu); }

void tr_mem_count(tr_mem *m, tr_mem_cat cat, int64_t n_bytes)
{
    pthread_mutex_lock(&m->mu);
    m->cur[cat] += (uint64_t)n_bytes;
    m->total += (uint64_t)n_bytes;
    if (n_bytes > 0) {
        m->n_allocs++;
        if (m->cur[cat] > m->peak[cat]) m->peak[cat] = m->cur[cat];
        if (m->total > m->total_peak) m->total_peak = m->total;
    }
    pthread_mutex_unlock(&m->mu);
}

void *tr_mem_alloc(tr_mem *m, tr_mem_cat cat, size_t n_bytes)
{
    if ((unsigned)cat >= TR_MEM_NCAT || n_bytes > SIZE_MAX - 2 * TR_HDR) return NULL;
    if (m->counting_only) {
        tr_mem_count(m, cat, (int64_t)n_bytes);
        return NULL;
    }
    size_t rounded = (n_bytes + TR_HDR - 1) / TR_HDR * TR_HDR;
    unsigned char *raw = aligned_alloc(TR_HDR, TR_HDR + rounded);
    if (!raw) return NULL;
    memset(raw + TR_HDR, 0, rounded);
    tr_hdr *h = (tr_hdr *)raw;
    h->n_bytes = n_bytes;
    h->cat = (uint32_t)cat;
    h->magic = TR_MAGIC;
    tr_mem_count(m, cat, (int64_t)n_bytes);
    return raw + TR_HDR;
}

void tr_mem_free(tr_mem *m, void *p)
{
    if (!p) return;
    unsigned char *raw = (unsigned char *)p - TR_HDR;
    tr_hdr *h = (tr_hdr *)raw;
    if (h->magic == TR_MAGIC && h->cat < TR_MEM_NCAT) {
        tr_mem_count(m, (tr_mem_cat)h->cat, -(int64_t)h->n_bytes);
        h->magic = 0;
    }
    free(raw);
}
