/*
 * data_open.c - sa1b-train's data: --data and --val opened as a data
 * source (shards through the loader, the synthetic batches, or the
 * planner's counted batches), what is incomplete about them said once.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

/* The loader's worker threads for --data (--loader-threads or all cores but one). */
int src_workers(const options *o)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return o->loader_threads ? o->loader_threads : (cpus > 2 ? (int)cpus - 1 : 1);
}

/* After the first open_source of shards (glob) as what: a cut download is
 * never a silent success, so incomplete shards are said (once a run, by
 * rank 0), then used as they are; so are inputs split into parts of which
 * a part is not among the shards. */
void warn_incomplete(const options *o, const tr_data_source *src, const char *what, const char *glob)
{
    const char *first;
    size_t cut = glob && !o->plan && o->job->rank == 0 ? tr_shard_source_incomplete(src, &first) : 0;
    if (cut)
        cli_warn("%s: %zu shard%s incomplete, made from a tar that ended early ('%s'%s): using the images %s", what,
                 cut, cut == 1 ? " is" : "s are", first, cut > 1 ? " and others" : "", cut == 1 ? "it holds" : "they hold");
    long part;
    size_t gaps = glob && !o->plan && o->job->rank == 0 ? tr_shard_source_gapped(src, &first, &part) : 0;
    if (gaps)
        cli_warn("%s: %zu input%s split into parts lack%s a part (part %ld of the input of '%s'%s is not here): "
                 "using the parts that are", what, gaps, gaps == 1 ? "" : "s", gaps == 1 ? "s" : "", part, first,
                 gaps > 1 ? ", and others" : "");
}

/* --skip-damaged: a damaged sample said, in one line (each rank its own);
 * ctx the job (which outlives every source, also one that --stage-batch
 * opens from a copy of the options) */
static void say_damaged(void *ctx, const char *line)
{
    const train_job *job = ctx;
    char rank[32] = "";
    if (job->world > 1) snprintf(rank, sizeof rank, "rank %d: ", job->rank);
    cli_warn("%s%s: a damaged sample, its pairs left out (--skip-damaged)", rank, line);
}

/* Opens a data source: shards matching glob through the loader, else the
 * synthetic batches; points K and epochs as given (eval: K 1, one epoch).
 * Shards that cannot be opened end the process in one line, or with why
 * (the ranks of a job settle it) return -1 with that line in why. */
int open_source_why(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem,
                           const char *what, const char *glob, int K, uint64_t max_epochs, double flip, char *why,
                           size_t why_len)
{
    char err[512];
    int R = tr_geom_of(cfg, K).R;
    if (o->plan) { /* batches counted, never filled; the loader holds threads + 2 in flight, the
                    * synthetic source 2 (synthetic.c: the next made while the step runs) and, for
                    * a job of several ranks, the global batch they are cut from (world batches) */
        int n = glob ? src_workers(o) + 2 : 2 + (o->job->world > 1 ? o->job->world : 0);
        /* (the loader's buffers as it allocates them: one block each) */
        size_t packed = glob ? tr_shard_batch_bytes(o->batch, o->masks, K, cfg->S, R) : 0;
        if ((glob && !packed) || tr_plan_source_open(src, mem, o->batch, o->masks, K, cfg->S, R, n, packed) < 0)
            cli_die(CLI_EXIT_FATAL, "out of memory for the planner");
        return 0;
    }
    if (glob) {
        /* training data: this rank's slice; evaluation (--val, after the
         * training and --eval-only alike): rank 0 reads it all, at the
         * stored SA-1B points */
        int train = glob == o->data;
        tr_shard_options so = {.glob = glob, .B = o->batch, .M = o->masks, .K = K, .S = cfg->S, .R = R,
                               .seed = o->seed, .max_epochs = max_epochs, .flip_prob = flip,
                               .stored_point = !train, .threads = o->loader_threads, .mem = mem,
                               .rank = train ? o->job->rank : 0, .world = train ? o->job->world : 1,
                               .skip_damaged = o->skip_damaged, .on_damaged = say_damaged, .damaged_ctx = o->job};
        if (tr_shard_source_open(src, &so, err, sizeof err) < 0) {
            /* a relative pattern of the run's record that finds nothing
             * here: resumed from another folder than the run was started
             * in (not a shard that is there but bad) */
            int none = strstr(err, "no shard matches") != NULL || (!strpbrk(glob, "*?[") && access(glob, F_OK) != 0);
            const char *hint = train && o->data_restored && glob[0] != '/' && none
                                   ? " (the --data of the run's record, relative to the folder it was started in: "
                                     "resume from there, or give --data)"
                                   : "";
            if (!why) cli_die(CLI_EXIT_FATAL, "%s: %s%s", what, err, hint);
            snprintf(why, why_len, "%s: %s%s", what, err, hint);
            return -1;
        }
        return 0;
    }
    if (o->synthetic) {
        if (tr_synthetic_source_open_rank(src, mem, o->batch, o->masks, K, cfg->S, R, o->synthetic_seed, o->job->rank,
                                          o->job->world) < 0)
            cli_die(CLI_EXIT_FATAL, "out of memory for the synthetic batches");
        return 0;
    }
    cli_usage_error("no data: give %s GLOB or --synthetic-batch SEED", what);
}

void open_source(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem,
                        const char *what, const char *glob, int K, uint64_t max_epochs, double flip)
{
    (void)open_source_why(o, cfg, src, mem, what, glob, K, max_epochs, flip, NULL, 0);
}
