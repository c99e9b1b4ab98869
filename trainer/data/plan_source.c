/*
 * plan_source.c - the planner's data source: batches allocated up front,
 * handed out in turn.
 */
#include "plan_source.h"

#include <stdlib.h>

typedef struct plan_src {
    tr_mem *mem;
    tr_batch **b;
    void **block; /* packed: each batch's one block, else NULL */
    int n, next;  /* n batches in b; next: the one next() hands out */
} plan_src;

static int ps_next(void *ctx, tr_batch **out, char *err, size_t err_len)
{
    (void)err, (void)err_len;
    plan_src *p = ctx;
    *out = p->b[p->next];
    p->next = (p->next + 1) % p->n;
    return 1;
}

static void ps_release(void *ctx, tr_batch *b) { (void)ctx, (void)b; }

static void ps_close(void *ctx)
{
    plan_src *p = ctx;
    for (int i = 0; i < p->n; i++)
        if (p->block) tr_mem_free(p->mem, p->block[i]), free(p->b[i]);
        else tr_batch_free(p->mem, p->b[i]);
    free(p->b);
    free(p->block);
    free(p);
}

static const tr_source_ops plan_ops = {
    .next = ps_next,
    .release = ps_release,
    .close = ps_close, /* no wait, position, seek or identity */
};

/* A batch whose arrays are one block of packed bytes (zeros: every array
 * at its start, as each is no larger), as the loader's buffers are. */
static tr_batch *packed_batch(tr_mem *mem, int B, int M, int K, int S, int R, size_t packed, void **block)
{
    tr_batch *b = calloc(1, sizeof *b);
    if (!b || !(*block = tr_mem_alloc(mem, TR_MEM_DATA, packed))) {
        free(b);
        return NULL;
    }
    uint8_t *z = *block;
    b->B = B, b->M = M, b->K = K, b->S = S, b->R = R;
    b->image = z, b->content = (int32_t *)(void *)z, b->masks = z, b->valid = z;
    b->points = (float *)(void *)z, b->labels = (int32_t *)(void *)z;
    return b;
}

int tr_plan_source_open(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R, int n_buffers,
                        size_t packed)
{
    plan_src *p = calloc(1, sizeof *p);
    if (!p || n_buffers < 1 || !(p->b = calloc((size_t)n_buffers, sizeof *p->b)) ||
        (packed && !(p->block = calloc((size_t)n_buffers, sizeof *p->block)))) {
        if (p) free(p->b);
        free(p);
        return -1;
    }
    p->mem = mem;
    for (; p->n < n_buffers; p->n++)
        if (!(p->b[p->n] = packed ? packed_batch(mem, B, M, K, S, R, packed, &p->block[p->n])
                                  : tr_batch_alloc(mem, B, M, K, S, R))) {
            ps_close(p);
            return -1;
        }
    tr_source_init(src, p, &plan_ops);
    return 0;
}
