/*
 * train_memory.c - sa1b-train and memory: the planner (--plan), out of
 * memory as one line with the planner's micro-batch, and the address-space
 * limit checked before the BLAS can spin on it.
 */
#include <errno.h>
#include <glob.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train.h"
#include "sa1b_manifest.h"
#include "registry/registry.h"

/* Steps the planner runs after the start and after each stage: the
 * allocator's peak of a stretch without a stage is reached within them. */
#define PLAN_SETTLE 3

/* The planner's steps of the run: its stages (--unfreeze, --stage-batch)
 * that start before o->steps, each in the same order and with the same
 * steps before it, but for a stretch longer than PLAN_SETTLE, which it
 * cuts to PLAN_SETTLE (in it the memory repeats from step to step; with
 * --empty-cache-every N, to PLAN_SETTLE up to N - 1 more, the same steps
 * modulo N); then PLAN_SETTLE steps after the last, o->steps set to that.  A stage at step
 * 0 stays at 0 (before the first update: the optimizer's state is
 * replaced, never kept beside the new). */
static void plan_schedule(options *o)
{
    long ev[128]; /* the steps at which stages start, distinct, ascending */
    int n = 0;
    for (int i = 0; i < o->n_unfreeze + o->n_stage; i++) {
        long s = i < o->n_unfreeze ? o->unfreeze_step[i] : o->stage_step[i - o->n_unfreeze];
        int j = 0;
        if (s >= o->steps) continue; /* (never starts) */
        while (j < n && ev[j] < s) j++;
        if (j < n && ev[j] == s) continue;
        memmove(ev + j + 1, ev + j, (size_t)(n - j) * sizeof *ev);
        ev[j] = s, n++;
    }
    long at[128], p = 0, N = o->empty_cache_every; /* at[j]: the planner's step of ev[j] */
    for (int j = 0; j < n; j++) {
        long gap = ev[j] - (j ? ev[j - 1] : 0);
        /* (with --empty-cache-every N, the same step modulo N: the cache emptied where the run's is) */
        p += gap <= PLAN_SETTLE ? gap : N > 0 ? PLAN_SETTLE + (gap - PLAN_SETTLE) % N : PLAN_SETTLE;
        at[j] = p;
    }
    for (int i = 0; i < o->n_unfreeze + o->n_stage; i++) {
        long *s = i < o->n_unfreeze ? &o->unfreeze_step[i] : &o->stage_step[i - o->n_unfreeze];
        int j = 0;
        while (j < n && ev[j] != *s) j++;
        *s = j < n ? at[j] : LONG_MAX;
    }
    o->steps = (n ? at[n - 1] : 0) + PLAN_SETTLE;
}

/* --plan: the training path (run_train) on the meta backend for a plan
 * point: the run's stages included (each unfreezing's new optimizer state
 * beside the old, gradients and activations of the groups it trains, each
 * --stage-batch's micro-batch), at the steps plan_schedule gives them. */
int plan_run(void *ctx, tr_backend *be, const tr_plan_point *pt, char *err, size_t err_len)
{
    options o = *(const options *)ctx;
    o.batch = pt->batch;
    o.accum = pt->accum, o.precision = pt->precision;
    o.ckpt_blocks = pt->checkpoint_every < o.cfg.L ? pt->checkpoint_every : o.cfg.L;
    o.ckpt_decoder = pt->checkpoint_decoder;
    plan_schedule(&o);
    o.quiet = 1, o.memory_report = 0, o.log_every = 1;
    /* a run's memory from step 0: never a checkpoint read into the meta
     * backend's model (which crashed), --resume's latest checked against
     * these 3 steps (a resume under ulimit -v, or one that ran out of
     * memory, ended "--steps 3 is below step N", exit 2, before the
     * checkpoint of its steps), the dump or overlays written; for
     * --eval-only and --dump-step, which hold less (no optimizer state),
     * the training of the same model, batch and data */
    o.resume = NULL, o.init = NULL, o.dump_step = NULL, o.eval_only = NULL, o.export_n = 0;
    if (!o.data && !o.synthetic) o.data = o.val; /* (--eval-only's data) */
    err[0] = 0;
    return run_train(&o, be, err, err_len) == 0 ? 0 : -1;
}

int plan_main(const options *o)
{
    const tr_sizes *sizes = tr_backend_sizes(o->backend);
    if (!sizes) cli_die(CLI_EXIT_FATAL, "--plan --backend %s: that backend is not available in this version", o->backend);
    uint64_t budget = o->memory_budget;
    if (o->memory_budget_auto) {
        const char *what;
        char e[256], b[32];
        if (tr_backend_free_memory(o->backend, &budget, &what, e, sizeof e) < 0)
            cli_die(CLI_EXIT_FATAL, "--memory-budget auto --backend %s: %s", o->backend, e);
        tr_mem_format_bytes(b, sizeof b, budget);
        printf("memory budget: auto, %s (%s)\n", b, what);
    }
    tr_plan_request req = {.base = {.batch = o->batch, .accum = o->accum, .precision = o->precision,
                                    .checkpoint_every = o->ckpt_blocks, .checkpoint_decoder = o->ckpt_decoder,
                                    .sizes = sizes, .traits = tr_backend_traits(o->backend)},
                           .budget = budget, .effective_batch = o->effective_batch};
    static const int precs[] = {TR_PREC_FP32, TR_PREC_BF16, TR_PREC_FP16};
    static const int cks[] = {0, 1};
    req.precisions = precs, req.n_precisions = 3;
    req.checkpoints = cks, req.n_checkpoints = 2;
    req.checkpoint_decoder = 1;
    char err[512];
    if (tr_plan_main(stdout, &req, plan_run, (void *)o, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--plan: %s", err);
    return 0;
}

/* The planner's point for the run's configuration (its micro-batch). */
static tr_plan_point plan_point(const options *o)
{
    tr_plan_point pt = {.batch = o->batch, .accum = o->accum, .precision = o->precision,
                        .checkpoint_every = o->ckpt_blocks, .checkpoint_decoder = o->ckpt_decoder,
                        .sizes = tr_backend_sizes(o->backend), .traits = tr_backend_traits(o->backend)};
    return pt;
}

/* Micro-batch B for the run of o is a command line that runs: --batch B
 * with its --accum and every --stage-batch micro-batch (stage, the
 * run's, or capped at cap when cap > 0) dividing the effective batch. */
static int stage_of(const options *o, int k, int cap) { return cap > 0 && o->stage_batch[k] > cap ? cap : o->stage_batch[k]; }

static int batch_runs(const options *o, int B, int cap)
{
    for (int k = 0; k < o->n_stage; k++)
        if (((long)B * o->accum) % stage_of(o, k, cap)) return 0;
    return 1;
}

/* The largest micro-batch B <= o->batch whose plan, every stage of the
 * run included (its --stage-batch micro-batches capped at cap when cap >
 * 0), fits budget, and whose command line runs (batch_runs); 0 when none
 * does, -1 with err on a failure. */
static int largest_batch(const options *o, uint64_t budget, int cap, char *err, size_t err_len)
{
    tr_plan_point pt = plan_point(o);
    options po = *o;
    po.plan = 1;
    for (int k = 0; k < po.n_stage; k++) po.stage_batch[k] = stage_of(o, k, cap);
    int best = tr_plan_largest_batch(plan_run, &po, &pt, budget, o->batch, NULL, err, err_len);
    /* the largest below it whose command line runs, measured again (it is
     * the run's peak that must fit, not the search's neighbour's) */
    for (; best > 0; best--) {
        if (!batch_runs(o, best, cap)) continue;
        tr_mem_stats st;
        pt.batch = best;
        int rc = tr_plan_measure(plan_run, &po, &pt, &st, err, err_len);
        if (rc == 0 && st.reserved_peak <= budget) break;
        if (rc < 0 && best == 1) return -1;
    }
    return best;
}

/* ", --batch N fits SIZE" from the planner, or why not, into buf: a
 * micro-batch whose plan with every stage of the run (each unfreezing,
 * each --stage-batch) fits; where a --stage-batch micro-batch is what does
 * not, the largest cap of them (a divisor of the effective batch) with
 * which the run fits, as the --stage-batch list to give. */
static void suggest_batch(const options *o, uint64_t budget, char *buf, size_t n)
{
    char err[256], bud[32];
    tr_mem_format_bytes(bud, sizeof bud, budget);
    int best = largest_batch(o, budget, 0, err, sizeof err), cap = 0;
    int eff = o->batch * o->accum, top = 0;
    for (int k = 0; k < o->n_stage; k++)
        if (o->stage_batch[k] > top) top = o->stage_batch[k];
    for (int c = top - 1; best == 0 && c >= 1; c--) /* (the stages' largest micro-batch that fits) */
        if (eff % c == 0) best = largest_batch(o, budget, cap = c, err, sizeof err);
    if (best > 0 && cap > 0) {
        char list[400] = "";
        for (int k = 0; k < o->n_stage; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%ld:%d", k ? "," : "", o->stage_step[k],
                     stage_of(o, k, cap));
        snprintf(buf, n, "the planner's largest micro-batch for %s is --batch %d with --stage-batch %s "
                 "(--plan --memory-budget %s shows more)", bud, best, list, bud);
    } else if (best > 0)
        snprintf(buf, n, "the planner's largest micro-batch for %s is --batch %d (--plan --memory-budget %s shows more)",
                 bud, best, bud);
    else if (best == 0)
        snprintf(buf, n, "no micro-batch of this configuration fits %s (--plan --memory-budget %s lists precisions and checkpointing that do)",
                 bud, bud);
    else
        snprintf(buf, n, "the planner failed: %s", err);
}

void failure_line(const options *o, tr_backend *be, const char *err, char *line, size_t n)
{
    /* after a device fault every allocation fails too: that fault is the
     * reason, never "out of memory" with a smaller --batch to try */
    char dev[512];
    if (device_error(o->job, be, dev, sizeof dev)) {
        snprintf(line, n, "--backend cuda: %s", dev);
        return;
    }
    const char *why = err; /* (a stage's micro-batch that did not fit: the largest that does, too) */
    if (strncmp(why, "--stage-batch: ", 15) == 0) why += 15;
    if (o->plan || strncmp(why, "out of memory", 13) != 0) {
        snprintf(line, n, "%s", err);
        return;
    }
    /* what there was: the limit, or what is held plus what the system (the device) still has */
    uint64_t avail = 0;
    const char *what;
    char e[256];
    if (!o->memory_limit && tr_backend_free_memory(o->backend, &avail, &what, e, sizeof e) < 0) avail = 0;
    uint64_t budget = o->memory_limit ? o->memory_limit : be->mem.reserved + avail;
    char sug[400];
    suggest_batch(o, budget, sug, sizeof sug);
    snprintf(line, n, "%s%s; %s", err, o->memory_limit ? " under --memory-limit" : "", sug);
}

/* Before creating the backend: room in a limited address space for its
 * threads' BLAS buffers, which the BLAS cannot be trusted to fail on. */
void check_thread_room(const options *o)
{
    uint64_t lim = tr_vm_limit(), now = tr_vm_size();
    uint64_t need = now + (uint64_t)o->threads * TR_VM_PER_THREAD;
    if (!lim || need <= lim) return;
    char l[32], n[32];
    tr_mem_format_bytes(l, sizeof l, lim), tr_mem_format_bytes(n, sizeof n, need);
    cli_die(CLI_EXIT_FATAL, "the address-space limit (ulimit -v) of %s is too small for %d threads: they need %s mapped "
            "before any training (raise the limit or use fewer --threads)", l, o->threads, n);
}

/* Bytes of the shard files matching glob, or a manifest lists (the loader
 * maps them whole). */
static uint64_t glob_bytes(const char *pattern)
{
    glob_t g;
    uint64_t n = 0;
    if (sa1b_manifest_is_name(pattern)) {
        sa1b_manifest *mf = NULL;
        sa1b_error e;
        sa1b_error_clear(&e);
        if (sa1b_manifest_read(&mf, pattern, &e) == 0) n = mf->bytes;
        sa1b_manifest_free(mf);
        return n;
    }
    if (glob(pattern, 0, NULL, &g) != 0) return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) == 0) n += (uint64_t)sb.st_size;
    }
    globfree(&g);
    return n;
}

/* A training run in a limited address space, once the backend has mapped
 * its threads' buffers and before the model: room for the planner's
 * prediction plus 10%, the loader's workers and the shards it maps, or one
 * line and exit 3 with the micro-batch that has room (the planner's own
 * run needs as much address space as it predicts, so this comes first). */
void check_address_space(const options *o, tr_backend *be)
{
    uint64_t lim = tr_vm_limit();
    if (!lim || o->eval_only || o->dump_step) return;
    int n_workers = o->data ? src_workers(o) : 0;
    char err[256];
    tr_plan_point pt = plan_point(o);
    tr_mem_stats st;
    options po = *o;
    po.plan = 1;
    uint64_t now = tr_vm_size(), held = be->mem.reserved;
    /* the planner's run maps what it predicts: when that fails, the run does not fit */
    int planned = tr_plan_measure(plan_run, &po, &pt, &st, err, sizeof err) == 0;
    if (!planned && strncmp(err, "out of memory", 13) != 0) cli_die(CLI_EXIT_FATAL, "--plan: %s", err);
    uint64_t other = (now > held ? now - held : 0) + (uint64_t)n_workers * TR_VM_PER_WORKER + ((uint64_t)64 << 20) +
                     (o->data ? glob_bytes(o->data) : 0) + (o->val ? glob_bytes(o->val) : 0);
    uint64_t need = planned ? other + st.reserved_peak + st.reserved_peak / 10 : 0;
    if (planned && need <= lim) return;
    char l[32], n[32], sug[400];
    tr_mem_format_bytes(l, sizeof l, lim), tr_mem_format_bytes(n, sizeof n, need);
    if (lim > other) suggest_batch(o, (lim - other) / 11 * 10, sug, sizeof sug);
    else snprintf(sug, sizeof sug, "the threads and data alone need that much");
    cli_die(CLI_EXIT_FATAL, "the address-space limit (ulimit -v) of %s is too small for this run, which needs %s%s; %s", l,
            planned ? "about " : "more", planned ? n : "", sug);
}
