/*
 * plan.h - the memory planner of sa1b-train --plan.  It runs the training
 * code path of the program (a callback: model set-up, a few complete
 * steps with the optimizer) on the counting "meta" backend of
 * backend_meta.c, whose ops do no arithmetic and whose allocator counts
 * without real memory, and reads the allocator's peaks: the prediction is
 * the same sequence of allocations a CPU run makes, so it matches the
 * measured peak up to what differs between the runs (loader threads).
 *
 * With a budget it searches, for each precision and checkpointing choice,
 * the largest micro-batch whose peak (reserved, i.e. what the process holds
 * from the system) fits, and the accumulation that keeps the effective
 * batch, and prints the table.
 */
#ifndef SA1B_TRAINER_PLAN_H
#define SA1B_TRAINER_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "common/alloc.h"
#include "common/precision.h"
#include "backend/backend.h"

/* The counting backend: tr_backend_meta_create (backend/meta/backend_meta.h).
 * The data source a planned run draws from: data/plan_source.h. */

/* One configuration to plan. */
typedef struct tr_plan_point {
    int batch;              /* micro-batch B (images) */
    int accum;              /* micro-batches per optimizer step, >= 1 */
    int precision;          /* TR_PREC_* (common/precision.h) */
    int checkpoint_every;   /* encoder checkpointing every N blocks; 0 = off */
    int checkpoint_decoder; /* 1: checkpoint the decoder layers too */
    const tr_sizes *sizes;   /* the backend planned for (NULL: the CPU's) */
    const tr_traits *traits; /* and its traits (NULL: the CPU's) */
} tr_plan_point;

/* Runs the training path for pt on be (a fresh meta backend): set-up and
 * a few steps.  0; -1 with err on a failure; -2 when the program does not
 * support pt (e.g. a precision it lacks). */
typedef int (*tr_plan_run_fn)(void *ctx, tr_backend *be, const tr_plan_point *pt, char *err, size_t err_len);

/* Runs pt on a fresh meta backend; *st is its allocator's stats at the end
 * (peaks per category, at the overall peak, reserved).  0, -1, -2 as run. */
int tr_plan_measure(tr_plan_run_fn run, void *ctx, const tr_plan_point *pt, tr_mem_stats *st, char *err,
                    size_t err_len);

typedef struct tr_plan_request {
    tr_plan_point base;          /* the configuration of the command line */
    uint64_t budget;             /* bytes; 0: only predict base */
    int effective_batch;         /* images per step to keep; 0: base.batch * base.accum */
    int max_batch;               /* largest micro-batch tried (default 4096 when 0) */
    const int *precisions;       /* TR_PREC_* choices for the table (NULL: base.precision) */
    int n_precisions;
    const int *checkpoints;      /* checkpoint_every choices for the table (NULL: base's) */
    int n_checkpoints;
    int checkpoint_decoder;      /* with checkpointing on in the table: also the decoder */
} tr_plan_request;

/* Prints the prediction for req->base (per category: peak, and at the
 * overall peak; totals; reserved) and, with a budget, the table of the
 * largest micro-batch per choice.  0 or -1 with err. */
int tr_plan_main(FILE *out, const tr_plan_request *req, tr_plan_run_fn run, void *ctx, char *err, size_t err_len);

/* The largest micro-batch in [1, max] (4096 when max <= 0) of pt's
 * configuration whose peak reserved memory fits budget, its peak in *peak
 * (may be NULL); 0 when none does, -1 with err on a failure. */
int tr_plan_largest_batch(tr_plan_run_fn run, void *ctx, const tr_plan_point *pt, uint64_t budget, int max,
                          uint64_t *peak, char *err, size_t err_len);

#endif
