/*
 * sa1b-train.c - trains the compact SAM of docs/MODEL.md (the program's
 * main: the options, the ranks of a job, the backend, then one of the
 * runs).  The program's files (train.h): train_options.c, run_record.c
 * and out_dir.c (the command line, the run record, the output folder),
 * train_loop.c (the training run), train_save.c (checkpoints),
 * train_eval.c (evaluation), dump.c (--dump-step), train_memory.c (the
 * planner, out of memory, address-space limits), data_open.c (the data),
 * run_log.c (the log), ranks.c and dist*.c (data parallelism), signals.c
 * and faults.c (signals, the test suite's faults).
 *
 * Data: shards through the loader of pipeline/ (data/data_shards.c), or
 * deterministic synthetic batches with --synthetic-batch SEED (a debugging
 * option), both behind tr_data_source.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
#include "train.h"

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    train_job job = {.world = 1, .explain = failure_line}; /* (one process alone, until the ranks are known) */
    options o = {.job = &job};
    char err[512];
    parse_options(argc, argv, &o);
    sig_watch_bus(); /* (--eval-only, --dump-step, the loader's read-ahead before the training: one line) */
    /* the ranks of a job started by mpirun (one process alone otherwise) */
    tr_dist *dist = tr_dist_open(&argc, &argv, o.collective_timeout, err, sizeof err);
    if (!dist) cli_die(CLI_EXIT_FATAL, "%s", err);
    int rank = tr_dist_rank(dist), world = tr_dist_world(dist);
    if (world > 1 && (o.plan || o.eval_only || o.dump_step))
        cli_usage_error("--plan, --eval-only and --dump-step run in one process, not under mpirun with %d", world);
    o.job->rank = rank; /* (check_out's refusals: rank 0 says them) */
    check_out(&o);
    o.job->world = world; /* (restore_run compares the run's) */
    if (o.resume) { /* the checkpoint (an intact one) first: its state file holds the run's record */
        choose_checkpoint(&o, rank == 0);
        restore_run(&o, argc, argv, rank == 0);
    }
    o.job->dist = dist, o.job->rank = rank, o.job->world = world;
    if (rank) o.quiet = 1; /* rank 0 reports */
    if (o.plan) {
        o.job->world = o.plan_ranks ? o.plan_ranks : 1; /* the plan of rank 0 of such a job (--zero 1) */
        int rc = plan_main(&o);
        tr_dist_close(dist);
        cli_stdout_check(); /* --plan's table must reach it */
        return rc;
    }
    if (o.plan_ranks) cli_usage_error("--ranks plans a job: it needs --plan (mpirun -np N runs one)");
    if (!o.eval_only && !o.dump_step) make_record(&o);
    if (!o.eval_only && !o.dump_step && rank == 0) lock_out(&o, 0); /* rank 0 writes the run's files */
    if (o.resume && !o.eval_only && !o.dump_step) { /* (after the lock: a resume of a running run is told that it runs) */
        long step = o.job->resume_step;
        if (o.steps < step) { /* never a resume that does nothing and says it succeeded (before --out is made) */
            if (rank == 0)
                cli_die(CLI_EXIT_USAGE, "--steps %ld is below step %ld, where the run in '%s' is: --steps is the run's "
                        "total (give more than %ld, or leave it out)", o.steps, step, o.resume, step);
            exit(CLI_EXIT_USAGE); /* (one line per job) */
        }
    }
    if (!o.eval_only && !o.dump_step && rank == 0 && o.warmup > o.steps) /* (a warning: a short trial of a long run's settings) */
        cli_warn("--warmup %ld is longer than --steps %ld: the learning rate rises to %.0f%% of --lr by the last step "
                 "and never decays (give --warmup %ld or less for the whole schedule)", o.warmup, o.steps,
                 100.0 * (double)o.steps / (double)o.warmup, o.steps);
    check_thread_room(&o);
    /* under mpirun the CUDA backend takes the device of the local rank and
     * sums over NCCL (with one rank too); the ranks agree on a failure */
    int on_device = strcmp(o.backend, "cuda") == 0 && tr_dist_launched(dist) && !o.eval_only && !o.dump_step;
    tr_backend_opts bo; /* the environment's switches (registry.h), then the flags */
    tr_backend_opts_init(&bo, o.threads);
    bo.tf32 = o.tf32;
    bo.attention = tr_backend_attention_parse(o.attention); /* (the option, else SA1B_CUDA_ATTN: checked) */
    if (on_device) bo.device = tr_dist_local_rank(dist);
    tr_backend *be = tr_backend_create_with(o.backend, &bo, err, sizeof err);
    char mine[700] = "";
    if (!be) rank_line(mine, sizeof mine, &o, err); /* no CUDA built, or no device */
    if (tr_dist_settle(dist, !be, mine, err, sizeof err) < 0) die_ranks(dist, be, err);
    if (world > 1 && !o.eval_only && !o.dump_step) same_run(&o, be);
    if (on_device && tr_dist_use_device(dist, be, err, sizeof err) < 0) { /* NCCL absent, or its setup failed */
        if (*err) rank_line(mine, sizeof mine, &o, err);
        die_ranks(dist, be, *err ? mine : "");
    }
    if (o.zero && o.job->world == 1 && !data_parallel(&o) && !o.eval_only && !o.dump_step && rank == 0)
        cli_warn("--zero 1 splits the optimizer state over the ranks of an mpirun job: a run of one process has "
                 "nothing to split (it trains as without it)");
    be->mem.limit = o.memory_limit;
    check_address_space(&o, be);
    /* the startup line comes from run_train(), once the model and the data are set up */
    int rc = o.eval_only ? run_eval_only(&o, be) : o.dump_step ? run_dump(&o, be) : run_train(&o, be, err, sizeof err);
    if (rc < 0) die_explained(&o, be, err);
    tr_backend_free(be);
    tr_dist_close(dist);
    free(o.job->record);
    for (int i = 0; i < o.job->n_owned; i++) free(o.job->owned[i]);
    cli_stdout_check(); /* --eval-only's JSON line, the loss of --dump-step */
    return rc;
}
