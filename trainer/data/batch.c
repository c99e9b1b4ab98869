/*
 * batch.c - batch allocation.
 */
#include "batch.h"

#include <stdlib.h>

tr_batch *tr_batch_alloc(tr_mem *mem, int B, int M, int K, int S, int R)
{
    tr_batch *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->B = B, b->M = M, b->K = K, b->S = S, b->R = R;
    size_t nb = (size_t)B, nm = nb * M;
    b->image = tr_mem_alloc(mem, TR_MEM_DATA, nb * S * S * 3);
    b->content = tr_mem_alloc(mem, TR_MEM_DATA, nb * 2 * sizeof(int32_t));
    b->masks = tr_mem_alloc(mem, TR_MEM_DATA, nm * R * R);
    b->valid = tr_mem_alloc(mem, TR_MEM_DATA, nm);
    b->points = tr_mem_alloc(mem, TR_MEM_DATA, nm * K * 2 * sizeof(float));
    b->labels = tr_mem_alloc(mem, TR_MEM_DATA, nm * K * sizeof(int32_t));
    if (!b->image || !b->content || !b->masks || !b->valid || !b->points || !b->labels) {
        tr_batch_free(mem, b);
        return NULL;
    }
    return b;
}

void tr_batch_free(tr_mem *mem, tr_batch *b)
{
    if (!b) return;
    tr_mem_free(mem, b->image);
    tr_mem_free(mem, b->content);
    tr_mem_free(mem, b->masks);
    tr_mem_free(mem, b->valid);
    tr_mem_free(mem, b->points);
    tr_mem_free(mem, b->labels);
    free(b);
}
