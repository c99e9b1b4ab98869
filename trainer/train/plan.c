/*
 * plan.c - the planner: measurements on fresh meta backends, the search of
 * the largest micro-batch under a budget, and the printed tables.
 */
#include "plan.h"
#include "backend/meta/backend_meta.h"

int tr_plan_measure(tr_plan_run_fn run, void *ctx, const tr_plan_point *pt, tr_mem_stats *st, char *err,
                    size_t err_len)
{
    tr_backend *be = tr_backend_meta_create(pt->sizes, pt->traits);
    if (!be) return snprintf(err, err_len, "out of memory"), -1;
    int rc = run(ctx, be, pt, err, err_len);
    tr_mem_get_stats(&be->mem, st);
    tr_backend_free(be);
    return rc;
}

static void describe(char *buf, size_t n, const tr_plan_point *pt)
{
    char ck[64];
    if (pt->checkpoint_every > 0)
        snprintf(ck, sizeof ck, "checkpoint every %d%s", pt->checkpoint_every,
                 pt->checkpoint_decoder ? " + decoder" : "");
    else
        snprintf(ck, sizeof ck, "%s", pt->checkpoint_decoder ? "checkpoint decoder" : "no checkpointing");
    snprintf(buf, n, "B=%d x accum %d, %s, %s", pt->batch, pt->accum, tr_prec_name(pt->precision), ck);
}

static void print_prediction(FILE *out, const tr_plan_point *pt, const tr_mem_stats *st)
{
    char d[160], a[32], b[32];
    describe(d, sizeof d, pt);
    fprintf(out, "plan: %s (meta backend: the training path without arithmetic or memory)\n", d);
    fprintf(out, "%-12s %14s %14s\n", "category", "peak", "at peak");
    for (int i = 0; i < TR_MEM_NCAT; i++) {
        tr_mem_format_bytes(a, sizeof a, st->peak[i]);
        tr_mem_format_bytes(b, sizeof b, st->at_peak[i]);
        fprintf(out, "%-12s %14s %14s\n", tr_mem_cat_name((tr_mem_cat)i), a, b);
    }
    tr_mem_format_bytes(a, sizeof a, st->total_peak);
    fprintf(out, "%-12s %14s %14s\n", "total", a, a);
    tr_mem_format_bytes(a, sizeof a, st->reserved_peak);
    fprintf(out, "%-12s %14s\n", "reserved", a);
    fprintf(out, "predicted: peak_allocated=%llu peak_reserved=%llu", (unsigned long long)st->total_peak,
            (unsigned long long)st->reserved_peak);
    for (int i = 0; i < TR_MEM_NCAT; i++)
        fprintf(out, " %s=%llu", tr_mem_cat_name((tr_mem_cat)i), (unsigned long long)st->peak[i]);
    fprintf(out, "\n");
}

/* 1 fits, 0 does not, -2 unsupported, -1 error (err) */
static int fits(tr_plan_run_fn run, void *ctx, const tr_plan_point *pt, uint64_t budget, tr_mem_stats *st,
                char *err, size_t err_len)
{
    int rc = tr_plan_measure(run, ctx, pt, st, err, err_len);
    if (rc == -2) return -2;
    if (rc < 0) return pt->batch > 1 ? 0 : -1; /* too large to set up counts as not fitting */
    return st->reserved_peak <= budget;
}

/* Largest B in [1, max] that fits (0: none); *st its stats. */
static int search(tr_plan_run_fn run, void *ctx, tr_plan_point pt, uint64_t budget, int max, tr_mem_stats *st,
                  char *err, size_t err_len)
{
    tr_mem_stats s;
    int lo = 0, hi = 0; /* lo fits (0 = none), hi does not (0 = unknown) */
    for (int b = 1;; b = b * 2 > max ? max : b * 2) {
        pt.batch = b;
        int f = fits(run, ctx, &pt, budget, &s, err, err_len);
        if (f < 0) return f;
        if (!f) {
            hi = b;
            break;
        }
        lo = b, *st = s;
        if (b == max) return lo;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        pt.batch = mid;
        int f = fits(run, ctx, &pt, budget, &s, err, err_len);
        if (f < 0) return f;
        if (f) lo = mid, *st = s;
        else hi = mid;
    }
    return lo;
}

int tr_plan_largest_batch(tr_plan_run_fn run, void *ctx, const tr_plan_point *pt, uint64_t budget, int max,
                          uint64_t *peak, char *err, size_t err_len)
{
    tr_mem_stats s = {0};
    int best = search(run, ctx, *pt, budget, max > 0 ? max : 4096, &s, err, err_len);
    if (best == -2) return snprintf(err, err_len, "configuration not supported"), -1;
    if (best > 0 && peak) *peak = s.reserved_peak;
    return best;
}

int tr_plan_main(FILE *out, const tr_plan_request *req, tr_plan_run_fn run, void *ctx, char *err, size_t err_len)
{
    tr_mem_stats st;
    int rc = tr_plan_measure(run, ctx, &req->base, &st, err, err_len);
    if (rc == -2) return -1;
    if (rc < 0) return -1;
    print_prediction(out, &req->base, &st);
    if (!req->budget) return 0;

    int eff = req->effective_batch > 0 ? req->effective_batch : req->base.batch * req->base.accum;
    int max = req->max_batch > 0 ? req->max_batch : 4096;
    const int base_prec[1] = {req->base.precision};
    const int *precs = req->precisions ? req->precisions : base_prec;
    int np = req->precisions ? req->n_precisions : 1;
    int base_ck[1] = {req->base.checkpoint_every};
    const int *cks = req->checkpoints ? req->checkpoints : base_ck;
    int nc = req->checkpoints ? req->n_checkpoints : 1;
    char bud[32];
    tr_mem_format_bytes(bud, sizeof bud, req->budget);
    {
        tr_mem_stats s = {0};
        int best = search(run, ctx, req->base, req->budget, max, &s, err, err_len);
        if (best == -2) return snprintf(err, err_len, "configuration not supported"), -1;
        if (best < 0) return -1;
        char pk[32];
        tr_mem_format_bytes(pk, sizeof pk, s.reserved_peak);
        tr_mem_format_bytes(bud, sizeof bud, req->budget);
        if (best) fprintf(out, "max_batch: %d (this configuration; peak reserved %s of %s)\n", best, pk, bud);
        else fprintf(out, "max_batch: 0 (this configuration does not fit %s)\n", bud);
    }
    fprintf(out, "\nbudget %s (peak reserved), effective batch %d\n", bud, eff);
    fprintf(out, "%-9s %-14s %10s %12s   %s\n", "precision", "checkpoint", "max batch", "its peak",
            "for the effective batch");
    for (int p = 0; p < np; p++)
        for (int c = 0; c < nc; c++) {
            tr_plan_point pt = req->base;
            pt.precision = precs[p];
            pt.checkpoint_every = cks[c];
            pt.checkpoint_decoder = cks[c] > 0 ? req->checkpoint_decoder : 0;
            pt.accum = 1;
            char ck[32];
            if (pt.checkpoint_every > 0)
                snprintf(ck, sizeof ck, "every %d%s", pt.checkpoint_every, pt.checkpoint_decoder ? "+dec" : "");
            else
                snprintf(ck, sizeof ck, "off");
            tr_mem_stats s = {0};
            int best = search(run, ctx, pt, req->budget, max, &s, err, err_len);
            if (best == -2) {
                fprintf(out, "%-9s %-14s %10s\n", tr_prec_name(pt.precision), ck, "unsupported");
                continue;
            }
            if (best < 0) return -1;
            if (best == 0) {
                fprintf(out, "%-9s %-14s %10s\n", tr_prec_name(pt.precision), ck, "none fits");
                continue;
            }
            char pk[32], pk2[32];
            tr_mem_format_bytes(pk, sizeof pk, s.reserved_peak);
            /* largest divisor of eff not above best: exact effective batch */
            int mb = best < eff ? best : eff;
            while (eff % mb) mb--;
            tr_plan_point q = pt;
            q.batch = mb, q.accum = eff / mb;
            tr_mem_stats s2;
            int r2 = tr_plan_measure(run, ctx, &q, &s2, err, err_len);
            if (r2 < 0) {
                fprintf(out, "%-9s %-14s %10d %12s   (B=%d x accum %d: %s)\n", tr_prec_name(pt.precision), ck, best, pk, mb,
                        q.accum, r2 == -2 ? "unsupported" : err);
                continue;
            }
            tr_mem_format_bytes(pk2, sizeof pk2, s2.reserved_peak);
            fprintf(out, "%-9s %-14s %10d %12s   B=%d x accum %d, peak %s\n", tr_prec_name(pt.precision), ck, best, pk, mb,
                    q.accum, pk2);
        }
    return 0;
}
