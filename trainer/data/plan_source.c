/*
 * plan_source.c - the planner's data source: batches allocated up front,
 * handed out in turn.
 */
#include "plan_source.h"

#include <stdlib.h>

typedef struct plan_src {
    tr_mem *mem;
    tr_batch **b;
    int n, next; /* n batches in b; next: the one next() hands out */
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
    for (int i = 0; i < p->n; i++) tr_batch_free(p->mem, p->b[i]);
    free(p->b);
    free(p);
}

static const tr_source_ops plan_ops = {
    .next = ps_next,
    .release = ps_release,
    .close = ps_close, /* no wait, position, seek or identity */
};

int tr_plan_source_open(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R, int n_buffers)
{
    plan_src *p = calloc(1, sizeof *p);
    if (!p || n_buffers < 1 || !(p->b = calloc((size_t)n_buffers, sizeof *p->b))) {
        free(p);
        return -1;
    }
    p->mem = mem;
    for (; p->n < n_buffers; p->n++)
        if (!(p->b[p->n] = tr_batch_alloc(mem, B, M, K, S, R))) {
            ps_close(p);
            return -1;
        }
    tr_source_init(src, p, &plan_ops);
    return 0;
}
