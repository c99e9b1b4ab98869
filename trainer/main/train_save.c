/*
 * train_save.c - sa1b-train's checkpoints: a step's model and optimizer
 * state (each rank its part with --zero 1) and the latest file naming
 * them, never a half checkpoint; a step that failed saves the steps before
 * it and ends the run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

/* The line of a failure, as the job explains it (the planner's advice), exit 3. */
_Noreturn void die_explained(const options *o, tr_backend *be, const char *err)
{
    char line[1200];
    o->job->explain(o, be, err, line, sizeof line);
    cli_die(CLI_EXIT_FATAL, "%s", line);
}

/* "300", "300 and 250", "300, 250 and 200", "300, 250, 200 and 3 more" */
static void step_list(char *buf, size_t n, const long *steps, long k)
{
    size_t len = 0;
    buf[0] = 0;
    for (long i = 0; i < k && i < 3 && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%ld", i == 0 ? "" : i + 1 == k ? " and " : ", ", steps[i]);
    if (k > 3 && len < n) snprintf(buf + len, n - len, " and %ld more", k - 3);
}

void choose_checkpoint(options *o, int report)
{
    const char *dir = o->resume;
    char why[4400], first[4400] = "", err[4400], list[200];
    long *steps = NULL, n = -1;
    /* latest first (not there, unreadable, not a regular file: its line, as
     * before checkpoints were chosen); one that holds no step number is
     * read as the newest checkpoint's */
    long latest = o->from_step >= 0 ? -1 : tr_run_read_latest(dir, err, sizeof err);
    char latest_path[4200];
    snprintf(latest_path, sizeof latest_path, "%s/latest", dir);
    FILE *lf = latest < 0 && o->from_step < 0 ? tr_run_dir_fopen(latest_path) : NULL;
    if (latest < 0 && o->from_step < 0 && !lf) die_alike(report, CLI_EXIT_FATAL, "%s", err);
    if (lf) fclose(lf);
    if ((n = tr_run_dir_checkpoints(dir, &steps)) < 0)
        die_alike(report, CLI_EXIT_FATAL, "cannot resume from '%s': %s", dir, strerror(errno));
    if (o->from_step >= 0) { /* that one, or none */
        long s = o->from_step;
        int have = 0;
        for (long i = 0; i < n; i++) have |= steps[i] == s;
        step_list(list, sizeof list, steps, n);
        free(steps);
        if (!have)
            die_alike(report, CLI_EXIT_USAGE, "--from-step %ld: '%s' has no checkpoint of step %ld "
                       "(model-%ld.safetensors and state-%ld.bin)%s%s%s", s, dir, s, s, s, n ? "; it has steps " : "",
                       list, n ? "" : "; it has none");
        if (!tr_run_checkpoint_intact(dir, s, o->job->world, why, sizeof why))
            die_alike(report, CLI_EXIT_FATAL, "--from-step %ld: the checkpoint of step %ld in '%s' is damaged (%s)",
                       s, s, dir, why);
        o->job->resume_step = s;
        return;
    }
    /* latest's step first, then the older checkpoints; a latest without a
     * step number: every checkpoint, newest first */
    long cand_n = 0, *cand = calloc((size_t)n + 1, sizeof *cand);
    if (!cand) cli_die(CLI_EXIT_FATAL, "out of memory");
    if (latest >= 0) cand[cand_n++] = latest;
    for (long i = 0; i < n; i++)
        if (latest < 0 || steps[i] < latest) cand[cand_n++] = steps[i];
    free(steps);
    long chosen = -1, k = 0;
    for (; k < cand_n; k++) {
        if (tr_run_checkpoint_intact(dir, cand[k], o->job->world, why, sizeof why)) {
            chosen = cand[k];
            break;
        }
        if (!*first) snprintf(first, sizeof first, "%s", why);
    }
    step_list(list, sizeof list, cand, k); /* the ones skipped */
    free(cand);
    char lead[4300] = ""; /* what latest said, when it said no step */
    if (latest < 0) snprintf(lead, sizeof lead, "'%s' holds no step number; ", latest_path);
    if (chosen < 0 && !k)
        die_alike(report, CLI_EXIT_FATAL, "cannot resume from '%s': %sno checkpoint there (model-N.safetensors and "
                   "state-N.bin)", dir, lead);
    if (chosen < 0)
        die_alike(report, CLI_EXIT_FATAL, "cannot resume from '%s': %sno intact checkpoint (step%s %s damaged: %s)",
                   dir, lead, k > 1 ? "s" : "", list, first);
    if (report && k)
        cli_warn("%sthe checkpoint%s of step%s %s in '%s' %s damaged (%s%s): resuming from step %ld, the newest "
                 "intact one", lead, k > 1 ? "s" : "", k > 1 ? "s" : "", list, dir, k > 1 ? "are" : "is",
                 k > 1 ? "the newest: " : "", first, chosen);
    else if (report && latest < 0)
        cli_warn("%sresuming from step %ld, the newest checkpoint", lead, chosen);
    o->job->resume_step = chosen;
}

/* The state file of step for this rank: state-STEP.bin, or with --zero 1
 * under mpirun state-STEP.rRANK.bin for ranks > 0 (each its part). */
void state_path(const options *o, const char *dir, long step, char *path, size_t n)
{
    if (o->zero && o->job->world > 1 && o->job->rank) snprintf(path, n, "%s/state-%ld.r%d.bin", dir, step, o->job->rank);
    else snprintf(path, n, "%s/state-%ld.bin", dir, step);
}

/* log: the run's log (rank 0), synced before latest names the step, so
 * that a crash never leaves a checkpoint whose records are lost (the
 * resumed run would not write them again); NULL when it has none. */
void save_checkpoint(const options *o, tr_model *m, tr_optim *opt, tr_train_state *st,
                            tr_data_source *src, const uint64_t *pos, FILE *log)
{
    char path[4096], err[512], dev[512];
    int parts = o->zero && o->job->world > 1; /* each rank writes its part of the optimizer state */
    /* never a checkpoint of what a failed device left; with parts, the
     * failure (why, else "") is settled among the ranks below, as one of
     * a file's */
    char why[700] = "";
    if (!parts) check_device(o->job, m->be);
    else if (device_error(o->job, m->be, dev, sizeof dev)) snprintf(why, sizeof why, "--backend cuda: %s", dev);
    if (o->job->rank && !parts) return;       /* rank 0 writes (the ranks hold the same weights and state) */
    if (pos) /* where the data stood after step st->step (the next step's start) */
        st->data_epoch = pos[0], st->data_consumed = pos[1];
    else
        tr_source_position(src, &st->data_epoch, &st->data_consumed);
    tr_source_identity(src, st->data_id, sizeof st->data_id);
    if (o->job->rank == 0 && !*why) {
        snprintf(path, sizeof path, "%s/model-%ld.safetensors", o->out, st->step);
        if (tr_ckpt_save_model(m, path, err, sizeof err) < 0) {
            if (!parts) cli_die(CLI_EXIT_FATAL, "%s", err);
            snprintf(why, sizeof why, "%s", err);
        }
        test_hook("save", st->step);
    }
    state_path(o, o->out, st->step, path, sizeof path);
    st->run = o->job->record;
    int rc = -1; /* the state file: 0 written */
    if (!*why) {
        rc = tr_ckpt_save_state(m, opt, st, path, err, sizeof err);
        test_device_hook(o->job, "save", st->step);
        /* a device that failed while the files read its memory (its
         * downloads then give bytes it could not read) makes them no
         * checkpoint either */
        int dev_failed = device_error(o->job, m->be, dev, sizeof dev);
        if (rc == 0 && dev_failed) unlink(path), rc = -1;
        if (rc < 0) snprintf(why, sizeof why, "%s%s", dev_failed ? "--backend cuda: " : "", dev_failed ? dev : err);
    }
    /* with parts, every rank learns whether each wrote its own (a full
     * disk fails them all): one line, from the lowest rank that failed,
     * naming it; it is also the wait for every part before latest names
     * them */
    char settled[800] = "";
    int failed = *why != 0;
    if (parts) {
        char mine[760] = "";
        if (failed) snprintf(mine, sizeof mine, "rank %d of %d: %s", o->job->rank, o->job->world, why);
        if (tr_dist_settle(o->job->dist, failed, mine, settled, sizeof settled) < 0) {
            if (rc == 0) unlink(path); /* another rank's part failed: this one's goes too */
            failed = 1;
        }
    }
    if (failed) {
        /* no half checkpoint left (a full disk): its model file goes, which
         * latest never named (it names an earlier step, or none) */
        if (o->job->rank == 0) {
            snprintf(path, sizeof path, "%s/model-%ld.safetensors", o->out, st->step);
            unlink(path);
        }
        if (!parts) cli_die(CLI_EXIT_FATAL, "%s", why);
        tr_source_close(src); /* (its loader's threads stopped: nothing in flight at the exit) */
        die_ranks(o->job->dist, m->be, settled);
    }
    if (log && fflush(log) == 0) fsync(fileno(log)); /* (a record that failed to reach it was said) */
    if (o->job->rank == 0 && tr_run_write_latest(o->out, st->step, 0) < 0)
        cli_die(CLI_EXIT_FATAL, "cannot write '%s/latest': %s", o->out, strerror(errno));
    sig_bus_checkpointed(o->job->rank == 0 ? o->out : NULL); /* (was --resume's folder, resumed into another --out) */
}

/* A step that cannot go on (its data could not be read, memory ran out, the
 * micro-batch could not change): the steps done since the last checkpoint
 * are saved first, at pos (where the data stood when the failed step
 * began), as their weights and optimizer state are whole (no update had
 * begun).  Not after a device failure (its line alone), nor on a rank
 * other than 0 (rank 0 writes checkpoints; it waits in a collective and
 * ends through its timeout) or where the ranks write parts of the
 * checkpoint together (--zero 1): a data-parallel job saves a step that
 * failed in its gradients on any rank through die_step_ranks, which every
 * rank reaches.  The reason's line comes first (a save
 * that fails then ends the run with its own), then the checkpoint's, exit
 * 3.  saved: the step of the last checkpoint (of the one resumed from). */
_Noreturn void die_step(const options *o, tr_backend *be, tr_model *m, tr_optim *opt, tr_train_state *st,
                               tr_data_source *src, long saved, const uint64_t *pos, FILE *log, const char *err)
{
    check_device(o->job, be);
    if (o->plan || st->step <= saved || o->job->rank != 0 || (o->zero && o->job->world > 1)) die_explained(o, be, err);
    char line[1200];
    o->job->explain(o, be, err, line, sizeof line);
    cli_warn("%s", line);
    save_checkpoint(o, m, opt, st, src, pos, log);
    cli_die(CLI_EXIT_FATAL, "step %ld failed: checkpoint of step %ld written (--resume %s goes on from it)",
            st->step + 1, st->step, o->out);
}

/* A step that failed on fails ranks of a data-parallel job (rank: the
 * one, when fails is 1), which every rank learned from the step's sums and
 * whose reason the lowest of them printed (step_gradients): no rank updated
 * its weights or optimizer state, so the job saves the steps done since
 * the last checkpoint as die_step does for one process, each rank its part
 * with --zero 1, at pos (rank 0's data position when the step began), and
 * rank 0 says so.  Not where a writer's device failed (dev_fails: one did;
 * with --zero 1 every rank writes, so none does then).  Every rank then
 * waits for the others (a rank that ends first ends the job: its launcher
 * kills the ones left, rank 0 perhaps mid-write) and ends with exit 3. */
_Noreturn void die_step_ranks(const options *o, tr_backend *be, tr_model *m, tr_optim *opt, tr_train_state *st,
                                     tr_data_source *src, long saved, const uint64_t *pos, FILE *log, int fails,
                                     int rank, int dev_fails)
{
    char err[512], on[40];
    int parts = o->zero && o->job->world > 1, writes = parts || o->job->rank == 0;
    if (fails == 1) snprintf(on, sizeof on, "rank %d", rank);
    else snprintf(on, sizeof on, "%d ranks", fails);
    if (!o->plan && st->step > saved && writes && !(parts && dev_fails) && !device_error(o->job, be, err, sizeof err)) {
        save_checkpoint(o, m, opt, st, src, pos, log);
        if (o->job->rank == 0)
            cli_warn("step %ld failed on %s: checkpoint of step %ld written (--resume %s goes on from it)",
                     st->step + 1, on, st->step, o->out);
    }
    if (tr_dist_barrier(o->job->dist, err, sizeof err) < 0) die_collective(o, err);
    exit(CLI_EXIT_FATAL);
}
