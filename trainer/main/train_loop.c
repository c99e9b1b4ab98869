/*
 * train_loop.c - sa1b-train's training run: the model, optimizer and data
 * set up, resumed from a checkpoint, then the steps (micro-batches,
 * stages, unfreezing, fp16 loss scaling, data parallel sums), the log and
 * the checkpoints; also the planner's run of the same path on the meta
 * backend.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
#include "train.h"

/* The optimizer's state follows the model's trainable set (and with
 * --zero 1 this rank's part of the parameters: owned, NULL for all). */
static int try_sync_trainable(tr_model *m, tr_optim *opt, const uint8_t *owned, char *err, size_t err_len)
{
    uint8_t *t = malloc((size_t)m->n_params + 1);
    if (!t) return snprintf(err, err_len, "out of memory"), -1;
    for (int i = 0; i < m->n_params; i++) t[i] = !m->frozen[i] && (!owned || owned[i]);
    int rc = tr_optim_set_trainable(opt, m, t); /* (a failure leaves the state as it was) */
    free(t);
    if (rc < 0) snprintf(err, err_len, "out of memory for the optimizer");
    return rc;
}

/* --stage-batch: reopens the data with micro-batch B where the stream is. */
static int change_batch(const options *o, const tr_config *cfg, tr_model *m, tr_data_source *src, tr_mem *mem, int B,
                        char *err, size_t err_len)
{
    uint64_t ep = 0, cons = 0;
    tr_source_position(src, &ep, &cons);
    tr_source_close(src);
    options ob = *o;
    ob.batch = B;
    open_source(&ob, cfg, src, mem, "--data", o->data, o->points, 0, o->flip);
    if (tr_source_seek(src, ep, cons) < 0) cli_die(CLI_EXIT_FATAL, "cannot continue the data stream");
    char e[300];
    if (tr_model_set_batch(m, B, e, sizeof e) < 0) return snprintf(err, err_len, "--stage-batch: %s", e), -1;
    return 0;
}

/* The gradients of one optimizer step in m->grad_mem: accum micro-batches
 * (one: the mean loss's gradient; several, or data parallel: the pair-loss
 * sums, summed over the ranks, with L's terms and valid pairs global), and
 * the stop the ranks agree on.  parts: NULL, or with --zero 1 the ranks'
 * parts of grad_mem (zero_part.glo): the gradients are reduce-scattered,
 * this rank's part alone holds the sums.  L: the step's loss means.  0
 * when the data ended (the step is dropped: every rank ends at the same
 * step), 1 done, -1 failed (its data could not be read, or memory ran
 * out: err says why; the weights and optimizer state are untouched).  Data
 * parallel, a failure on one rank (its device's too) is every rank's -1,
 * learned from the step's sums: *fails ranks failed (*fail_rank the one,
 * when one did; *dev_fails: a device among them), the lowest of them
 * printed why. */
static int step_gradients(const options *o, tr_model *m, tr_data_source *src, int accum, float lscale,
                          const size_t *parts, tr_loss *L, long *damaged, double *sync_s, int *stop_all, int *fails,
                          int *fail_rank, int *dev_fails, char *err, size_t err_len)
{
    int dp = data_parallel(o), bad = 0; /* bad: this rank's part of the step failed (err) */
    long n_valid = 0;
    uint64_t dmg0 = tr_shard_source_damaged(src); /* (--skip-damaged: the step's, every rank's in all) */
    tr_loss acc = {0};
    *fails = 0;
    for (int k = 0; k < accum; k++) {
        tr_batch *b;
        int rc = tr_source_next(src, &b, err, err_len);
        if (rc == 0) return 0;
        tr_loss Lk; /* forward + backward (fused per decoder chunk with --checkpoint-decoder) */
        if (rc < 0 || tr_model_step(m, b, k == 0, lscale, accum > 1 || dp, &Lk, err, err_len) < 0) {
            if (!dp) return -1;
            bad = 1; /* the other ranks learn it from the sums below */
            break;
        }
        tr_source_release(src, b);
        if (accum == 1 && !dp) {
            acc = Lk;
        } else {
            acc.loss += Lk.loss * Lk.n_valid, acc.focal += Lk.focal * Lk.n_valid, acc.dice += Lk.dice * Lk.n_valid;
            acc.iou_mse += Lk.iou_mse * Lk.n_valid, acc.miou += Lk.miou * Lk.n_valid;
        }
        n_valid += Lk.n_valid;
    }
    if (dp) { /* the global batch: gradient sums, valid pairs and loss terms of every rank */
        /* a device that failed (its ops record the failure) fails its rank's step too */
        char dev[128];
        int dev_bad = device_error(o->job, m->be, dev, sizeof dev);
        if (dev_bad && !bad) err[0] = 0; /* (the line of the failure says the device's) */
        bad |= dev_bad;
        double t[11] = {(double)n_valid, acc.loss,  acc.focal, acc.dice, acc.iou_mse, acc.miou, sig_stop_requested() ? 1.0 : 0.0,
                        (double)bad, bad ? (double)o->job->rank : 0.0, (double)dev_bad,
                        (double)(tr_shard_source_damaged(src) - dmg0)};
        double t0 = cli_now();
        char cerr[1300];
        /* (a failed rank's gradients are summed too, and never used) */
        int rc = parts ? tr_dist_reduce_scatter_f(o->job->dist, m->grad_mem, parts, cerr, sizeof cerr)
                       : tr_dist_sum_f(o->job->dist, m->grad_mem, m->n_grad_floats, cerr, sizeof cerr);
        if (rc < 0 || tr_dist_sum_d(o->job->dist, t, 11, cerr, sizeof cerr) < 0) die_collective(o, cerr);
        n_valid = (long)t[0], acc.loss = t[1], acc.focal = t[2], acc.dice = t[3], acc.iou_mse = t[4], acc.miou = t[5];
        *damaged = (long)t[10];
        *stop_all = t[6] > 0;
        *sync_s += cli_now() - t0;
        if (t[7] > 0) { /* a rank's step failed: the lowest failing rank says why, in one line for the job */
            char line[1200] = "", mine[1300];
            if (bad) o->job->explain(o, m->be, err, line, sizeof line);
            if (o->job->world > 1) snprintf(mine, sizeof mine, "rank %d: %s", o->job->rank, line);
            else snprintf(mine, sizeof mine, "%s", line);
            if (tr_dist_settle(o->job->dist, bad, mine, cerr, sizeof cerr) < 0 && *cerr) cli_warn("%s", cerr);
            *fails = (int)t[7], *fail_rank = (int)t[8], *dev_fails = t[9] > 0;
            return -1;
        }
    } else {
        *damaged = (long)(tr_shard_source_damaged(src) - dmg0);
    }
    if ((accum > 1 || dp) && n_valid)
        acc.loss /= n_valid, acc.focal /= n_valid, acc.dice /= n_valid, acc.iou_mse /= n_valid, acc.miou /= n_valid;
    acc.n_valid = (int)n_valid;
    *L = acc;
    return 1;
}

/* A path of the attention that auto's check refused for a shape
 * (registry.h): its line, from rank 0. */
static void attn_pinned(void *ctx, const char *line)
{
    const options *o = ctx;
    if (o->job->rank == 0) cli_warn("%s", line);
}

/* The model of a run on be: initialised (its parameters drawn from
 * o->seed, but for the planner's), --init's weights loaded; eval: the
 * model of --eval-only (no training options, no frozen groups).  0, or -1
 * with err where the model does not fit; another failure ends the process
 * in one line.  On a GPU, auto's attention checks its paths for the
 * model's shapes (tr_backend_check_attention). */
int setup_model(const options *o, tr_backend *be, const tr_config *cfg, tr_model *m, int eval, char *err,
                size_t err_len)
{
    tr_model_opts mo = {.ckpt_every = o->ckpt_blocks, .ckpt_decoder = o->ckpt_decoder,
                        .precision = o->precision};
    const char *frz = eval || o->dump_step ? NULL : o->freeze;
    if (tr_model_init_ex(m, be, cfg, o->batch, o->masks, o->points, eval ? NULL : &mo, frz, err, err_len) < 0)
        return -1;
    if (!o->plan && tr_model_init_params(m, o->seed) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    tr_attn_dims shapes[8];
    int ns = tr_model_attn_shapes(m, shapes, 8);
    if (!o->plan && tr_backend_check_attention(be, shapes, ns < 8 ? ns : 8, m->adt, attn_pinned, (void *)o, err,
                                               err_len) < 0)
        return -1;
    if (o->init && tr_ckpt_load_model(m, o->init, err, err_len) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    return 0;
}

/* The training data of the run (data parallel: the ranks agree on it). */
void open_training_data(const options *o, const tr_config *cfg, tr_data_source *src, tr_backend *be)
{
    char why[700] = "";
    const int ranks = o->job->world > 1 && !o->plan; /* (--eval-only and --dump-step run in one process) */
    (void)open_source_why(o, cfg, src, be->host_mem, "--data", o->data, o->points, 0, o->dump_step ? 0.0 : o->flip,
                          ranks ? why : NULL, sizeof why);
    if (ranks) same_data(o, src, why, be);
    warn_incomplete(o, src, "--data", o->data);
}

/* --resume: the checkpoint's weights, the groups frozen before it
 * unfrozen, its optimizer state and loss scale, the data where it stood.
 * 0, or -1 with err where an unfrozen group's state does not fit; a
 * checkpoint or data that cannot be resumed ends the process in one line. */
static int resume_from(const options *o, tr_model *m, tr_optim *opt, const zero_part *zero, tr_train_state *st,
                       tr_loss_scale *ls, tr_data_source *src, char *err, size_t err_len)
{
    long step = o->job->resume_step; /* (an intact checkpoint, as far as its files tell: choose_checkpoint) */
    char path[4096];
    snprintf(path, sizeof path, "%s/model-%ld.safetensors", o->resume, step);
    if (tr_ckpt_load_model(m, path, err, err_len) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    int unfrozen = 0; /* stages before the checkpoint */
    for (int u = 0; u < o->n_unfreeze; u++)
        if (o->unfreeze_step[u] < step) {
            if (tr_model_freeze(m, o->unfreeze_group[u], 0, err, err_len) < 0) return -1;
            unfrozen = 1;
        }
    if (unfrozen && try_sync_trainable(m, opt, zero->owned, err, err_len) < 0) return -1;
    state_path(o, o->resume, step, path, sizeof path);
    if (tr_ckpt_load_state(m, opt, st, path, err, err_len) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    tr_loss_scale_resume(ls, st->loss_scale, st->scale_good);
    char now[sizeof st->data_id];
    if (st->data_id[0] && tr_source_identity(src, now, sizeof now)) {
        if (strcmp(now, st->data_id) != 0) {
            tr_source_close(src); /* (its loader's threads stopped: nothing in flight at the exit) */
            if (o->job->rank == 0) /* (one line per job: every rank reads the same shards, same_data) */
                cli_die(CLI_EXIT_FATAL, "cannot resume: the shards of --data '%s' changed since step %ld was "
                        "saved (then %s; now %s): restore them, or start a new run from its weights with --init "
                        "'%s/model-%ld.safetensors'", o->data, step, st->data_id, now, o->resume, step);
            exit(CLI_EXIT_FATAL);
        }
    }
    if (tr_source_seek(src, st->data_epoch, st->data_consumed) < 0)
        cli_die(CLI_EXIT_FATAL, "cannot seek the data to where step %ld left it", step);
    return 0;
}

/* The optimizer of the options (AdamW or AdamW8bit, the schedule, weight
 * decay, clipping); no state for frozen parameters. */
static void optim_config_of(const options *o, tr_optim_config *oc)
{
    tr_optim_defaults(oc, o->lr, o->steps);
    oc->kind = strcmp(o->optim, "adamw8bit") == 0 ? TR_OPTIM_ADAMW8BIT : TR_OPTIM_ADAMW;
    oc->block = o->optim_block;
    oc->skip_frozen = 1; /* no state, not even for a moment, for a frozen encoder */
    if (o->warmup >= 0) oc->warmup = o->warmup;
    oc->weight_decay = o->weight_decay, oc->clip = o->clip, oc->eps = o->adam_eps;
}

/* A failure of the training run's set-up, before its first step (or of
 * the planner's run at a stage): what it holds is given back, and err_out
 * says why (its caller says so with the planner's advice, die_explained). */
static int setup_failed(tr_model *m, tr_optim *opt, tr_data_source *src, zero_part *zero, const char *why,
                        char *err_out, size_t err_out_len)
{
    snprintf(err_out, err_out_len, "%s", why);
    if (opt) tr_optim_free(opt, m);
    free(zero->owned), free(zero->lo);
    tr_source_close(src);
    tr_model_free(m);
    return -1;
}

int run_train(const options *op, tr_backend *be, char *err_out, size_t err_out_len)
{
    options o = *op;
    char err[512];
    tr_config cfg = o.cfg;
    tr_model m;
    int prec = o.precision;
    if (setup_model(&o, be, &cfg, &m, 0, err_out, err_out_len) < 0) return -1;
    tr_data_source src = {0};
    const int ranks = o.job->world > 1 && !o.plan;
    open_training_data(&o, &cfg, &src, be);

    /* training */
    if (o.val && !o.plan) { /* a --val that cannot be read fails now, not after the training */
        char vwhy[700] = "", settled[800];
        if (o.job->rank == 0) { /* (rank 0 evaluates; the others learn whether it can) */
            tr_data_source vs = {0};
            if (open_source_why(&o, &cfg, &vs, be->host_mem, "--val", o.val, 1, 1, 0.0, ranks ? vwhy : NULL,
                                sizeof vwhy) == 0) {
                warn_incomplete(&o, &vs, "--val", o.val);
                tr_source_close(&vs);
            }
            tr_mem_empty_cache(be->host_mem); /* (its buffers, which the planner does not count) */
        }
        if (ranks && tr_dist_settle(o.job->dist, *vwhy != 0, vwhy, settled, sizeof settled) < 0) {
            tr_source_close(&src); /* (the training data's loader stopped: nothing in flight at the exit) */
            die_ranks(o.job->dist, be, settled);
        }
    }
    tr_optim_config oc;
    optim_config_of(&o, &oc);
    zero_part zero = {0};
    if (o.zero && (o.job->world > 1 || data_parallel(&o))) zero_split(&m, o.job->rank, o.job->world, &zero); /* (the planner's too) */
    oc.owned = zero.owned;
    tr_optim opt;
    if (tr_optim_init(&opt, &m, &oc) < 0)
        return setup_failed(&m, NULL, &src, &zero, "out of memory for the optimizer", err_out, err_out_len);
    if (o.freeze && try_sync_trainable(&m, &opt, zero.owned, err, sizeof err) < 0) /* (created with the groups frozen) */
        return setup_failed(&m, &opt, &src, &zero, err, err_out, err_out_len);
    tr_train_state st = {0};
    tr_rng_seed(&st.rng, o.seed);
    tr_loss_scale ls; /* fp16's dynamic loss scale (1 at other precisions) */
    tr_loss_scale_init(&ls, prec, o.scale_window);
    if (o.resume && resume_from(&o, &m, &opt, &zero, &st, &ls, &src, err, sizeof err) < 0)
        return setup_failed(&m, &opt, &src, &zero, err, err_out, err_out_len);
    /* rank 0 writes the run's files; --overwrite's and --auto-resume's
     * removals come after everything that can fail before the first step
     * (the optimizer's memory, the checkpoint resumed from), so that a
     * refused start leaves the earlier run as it was */
    /* every rank can start (its optimizer, its part of --resume): one
     * that cannot ends the job here, before rank 0 removes anything */
    if (ranks && tr_dist_barrier(o.job->dist, err, sizeof err) < 0) die_collective(&o, err);
    if (!o.plan && o.job->rank == 0) prepare_out(&o);
    char logpath[4096];
    snprintf(logpath, sizeof logpath, "%s/log.jsonl", o.out);
    if (o.resume && o.job->rank == 0) trim_log(logpath, st.step);
    FILE *log = o.plan || o.job->rank ? NULL : fopen(logpath, o.resume ? "a" : "w");
    if (!log && !o.plan && o.job->rank == 0) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", logpath, strerror(errno));
    /* a reader of the progress lines that went away (| tee killed by the
     * same Ctrl-C, | head) fails the write, never kills the run before
     * its stop checkpoint */
    signal(SIGPIPE, SIG_IGN);
    sig_watch_stop(); /* (a closed terminal, SIGHUP: stops with a checkpoint, as SIGTERM; nohup: left ignored) */
    /* the checkpoint resumed from is in --resume's folder until --out has one */
    sig_bus_checkpoint(o.plan || o.job->rank ? NULL : o.resume ? o.resume : o.out, o.resume != NULL);
    sig_watch_bus();
    if (!o.quiet && o.resume && st.step >= o.steps) { /* a finished run: nothing to train (its files as they were) */
        fprintf(stderr, "%s: the run in '%s' is complete (step %ld of %ld): %s\n", cli_prog(), o.resume, st.step,
                o.steps, o.val ? "evaluating --val" : "nothing to train (a larger --steps trains it on)");
    } else if (!o.quiet) {
        tr_mem_stats ms;
        char line[160];
        tr_mem_get_stats(&be->mem, &ms);
        tr_mem_format_line(line, sizeof line, &ms);
        fprintf(stderr, "%s: %s%s, step %ld of %ld: %s config (S=%d), %zu parameters, batch %d x %d masks x %d points, "
                "%s, %s backend, %d threads, %s, %s\n", cli_prog(), o.resume ? "resuming " : "training in ", o.resume ? o.resume : o.out,
                st.step, o.steps, o.config_name, cfg.S, m.n_param_floats, o.batch, o.masks, o.points, tr_prec_name(o.precision),
                be->name, be->n_threads, o.optim, line);
    }
    double t_last = cli_now(), wait_last = tr_source_wait_seconds(&src);
    long since = 0, damaged = 0; /* steps, and damaged samples left out (--skip-damaged), since the last record */
    int rc_exit = 0, cur_batch = o.batch, cur_accum = o.accum, log_bad = 0;
    int dp = data_parallel(&o), stop_all = 0; /* data parallel: the stop the ranks agreed on */
    long saved = st.step;               /* the step of the last checkpoint (die_step) */
    /* the step whose checkpoint --out holds whole (written by this run, or
     * resumed from that folder), which a stop never writes again: a second
     * write of it would replace the files latest names, and remove them if
     * it failed (a full disk, a device that failed mid-download) */
    long in_out = o.resume && same_dir(o.resume, o.out) ? st.step : -1;
    double sync_s = 0;                  /* and the time spent in the sums since the last log line */
    while (st.step < o.steps) {
        if (dp ? stop_all : sig_stop_requested()) {
            if (st.step != in_out) save_checkpoint(&o, &m, &opt, &st, &src, NULL, log);
            if (o.job->rank == 0) cli_warn("interrupted: checkpoint of step %ld written", st.step); /* one line per job */
            rc_exit = 130;
            break;
        }
        /* stages starting after st.step steps: micro-batch (same effective batch), unfreezing; the
         * planner's run too (its stages at the steps plan_run gives them), where a failure is its
         * result, not the end of the process */
        {
            int want = o.batch;
            for (int k = 0; k < o.n_stage; k++)
                if (st.step >= o.stage_step[k]) want = o.stage_batch[k];
            if (want != cur_batch) {
                if (change_batch(&o, &cfg, &m, &src, be->host_mem, want, err, sizeof err) < 0) {
                    if (o.plan) return setup_failed(&m, &opt, &src, &zero, err, err_out, err_out_len);
                    die_step(&o, be, &m, &opt, &st, &src, saved, NULL, log, err);
                }
                cur_batch = want, cur_accum = o.batch * o.accum / want;
                if (cur_accum < 1) cur_accum = 1; /* (a planned micro-batch below the stage's) */
            }
            /* out of memory for the gradients, activations or optimizer
             * state of an unfrozen group: the steps since the last
             * checkpoint are saved first (the weights and the optimizer's
             * state are those before the unfreezing, which a resume from
             * this step does again) */
            int unfrozen = 0;
            for (int u = 0; u < o.n_unfreeze; u++)
                if (o.unfreeze_step[u] == st.step) {
                    if (tr_model_freeze(&m, o.unfreeze_group[u], 0, err, sizeof err) < 0) {
                        if (o.plan) return setup_failed(&m, &opt, &src, &zero, err, err_out, err_out_len);
                        die_step(&o, be, &m, &opt, &st, &src, saved, NULL, log, err);
                    }
                    unfrozen = 1;
                }
            if (unfrozen && try_sync_trainable(&m, &opt, zero.owned, err, sizeof err) < 0) {
                if (o.plan) return setup_failed(&m, &opt, &src, &zero, err, err_out, err_out_len);
                if (!opt.slot) die_explained(&o, be, err); /* (no update yet: the zero state it dropped, nothing to save) */
                die_step(&o, be, &m, &opt, &st, &src, saved, NULL, log, err);
            }
        }
        tr_loss L;
        int part = zero.owned && dp; /* --zero 1: this rank's part of the gradients [g_lo, g_hi) is summed */
        if (part) zero_grad_parts(&m, o.job->world, &zero);
        uint64_t pos[2] = {0, 0}; /* where the data stands before the step */
        int have_pos = tr_source_position(&src, &pos[0], &pos[1]);
        int fails = 0, fail_rank = 0, dev_fails = 0;
        long dmg = 0;
        int got = step_gradients(&o, &m, &src, cur_accum, ls.scale, part ? zero.glo : NULL, &L, &dmg, &sync_s,
                                 &stop_all, &fails, &fail_rank, &dev_fails, err, sizeof err);
        damaged += dmg;
        if (got < 0 && fails)
            die_step_ranks(&o, be, &m, &opt, &st, &src, saved, have_pos ? pos : NULL, log, fails, fail_rank,
                           dev_fails);
        if (got < 0) die_step(&o, be, &m, &opt, &st, &src, saved, have_pos ? pos : NULL, log, err);
        if (got == 0) break;
        long n_valid = L.n_valid;
        double unscale = cur_accum == 1 && !dp ? 1.0 / ls.scale : n_valid ? 1.0 / ((double)ls.scale * n_valid) : 0.0;
        size_t g_lo = part ? zero.glo[o.job->rank] : 0, g_hi = part ? zero.glo[o.job->rank + 1] : m.n_grad_floats;
        double lr, gnorm;
        double ss = part ? tr_model_scale_grads_part(&m, unscale, g_lo, g_hi) : tr_model_scale_grads(&m, unscale);
        check_device(o.job, be); /* a failed GPU step is not an overflow to skip */
        if (part) { /* the parts' sums of squares: the whole gradient's, the same skip and norm on every rank */
            double t0 = cli_now();
            if (tr_dist_sum_d(o.job->dist, &ss, 1, err, sizeof err) < 0) die_collective(&o, err);
            sync_s += cli_now() - t0;
        }
        int skipped = !isfinite(ss);
        if (skipped) { /* overflow: no update; fp16 halves its loss scale */
            lr = tr_optim_lr(&opt.cfg, opt.t), gnorm = 0;
        } else {
            /* ss: the gradient's sum of squares after the unscale, which
             * tr_optim_step would compute again (one pass over it saved) */
            gnorm = tr_optim_step_part(&opt, &m, ss, g_lo, g_hi, &lr);
            if (part && tr_dist_gather_f(o.job->dist, m.param_mem, zero.lo, err, sizeof err) < 0)
                die_collective(&o, err); /* every rank's updated part, on every rank */
        }
        tr_loss_scale_update(&ls, skipped); /* overflow: halved; fp16 doubles it after a window of clean steps */
        if (ls.on) st.loss_scale = ls.scale, st.scale_good = ls.good;
        st.step++;
        test_hook("step", st.step);
        test_device_hook(o.job, "step", st.step);
        since++;
        if (st.step % o.log_every == 0 || st.step == o.steps) {
            double now = cli_now(), wait = tr_source_wait_seconds(&src);
            double dt = now - t_last, ips = dt > 0 ? (double)since * cur_batch * cur_accum * o.job->world / dt : 0;
            double dw = dt > 0 ? 100 * (wait - wait_last) / dt : 0;
            step_record r = {.step = st.step, .steps = o.steps, .L = L, .lr = lr, .grad_norm = gnorm,
                             .images_per_s = ips, .data_wait_pct = dw, .step_s = since ? dt / since : 0.0,
                             .damaged = damaged};
            tr_mem_get_stats(&be->mem, &r.mem);
            char extra[160] = ""; /* fp16: the loss scale after this step; a skipped (overflowed) step */
            if (ls.on) snprintf(extra, sizeof extra, ", \"scale\": %.9g", ls.scale);
            if (skipped) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"skipped\": true");
            if (dp) /* the share of the step spent summing over the ranks (waits for the slowest included) */
                snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"ranks\": %d, \"sync_pct\": %.1f",
                         o.job->world, dt > 0 ? 100 * sync_s / dt : 0.0);
            r.extra = extra;
            errno = 0;
            if (log) {
                log_step(log, &r);
                test_log_hook(log, st.step);
                if (fflush(log) != 0 || ferror(log)) log = log_failed(log, logpath, st.step, &log_bad);
            }
            if (!o.quiet) print_step(&r);
            t_last = now, wait_last = wait, since = 0, sync_s = 0, damaged = 0;
        }
        if (!o.plan && (st.step % o.ckpt_every == 0 || st.step == o.steps)) {
            save_checkpoint(&o, &m, &opt, &st, &src, NULL, log);
            saved = in_out = st.step;
        }
        if (o.empty_cache_every && st.step % o.empty_cache_every == 0) tr_mem_empty_cache(&be->mem);
    }
    /* the training is over, its last checkpoint written: a stop asked for
     * during its last step ends the run here (not after an evaluation of
     * --val that may take long), and a signal from now on ends the process
     * at once in one line (there is nothing left to save; a first signal
     * was kept for the end of a step that will not come) */
    char msg[200], bus_msg[300];
    snprintf(msg, sizeof msg, "interrupted after the training%s: checkpoint of step %ld written",
             o.val ? " (--val not evaluated)" : "", st.step);
    /* a shard truncated from now on (--val's in its evaluation, or the
     * loader's read-ahead of --data) loses nothing of the training */
    snprintf(bus_msg, sizeof bus_msg, "a shard was truncated or could not be read while it was read (SIGBUS) "
             "after the training%s: checkpoint of step %ld written", o.val ? " (--val not evaluated)" : "", st.step);
    /* rank 0 alone: another rank is done here while rank 0 may still be
     * writing the last checkpoint, and its exit would end the job (the
     * launcher kills the ranks left) with that checkpoint half-written; it
     * waits for rank 0 at the job's end, where a first signal is kept */
    if (!o.plan && o.job->rank == 0) sig_after_training(msg, bus_msg);
    if (!o.plan && rc_exit == 0 && o.val && (stop_all || sig_stop_requested())) { /* (this rank's: also one after the last sum) */
        if (o.job->rank == 0) cli_warn("%s", msg);
        rc_exit = 130;
    }
    if (log && fclose(log) != 0) log_failed(NULL, logpath, st.step, &log_bad);
    if (log_bad && rc_exit == 0) rc_exit = CLI_EXIT_FATAL; /* the checkpoints are written; the log is not whole */
    tr_source_close(&src);
    if (o.memory_report) {
        tr_mem_stats ms;
        tr_mem_get_stats(&be->mem, &ms);
        if (o.job->world > 1) fprintf(stderr, "memory report (training, %s backend, rank %d of %d):\n", be->name, o.job->rank, o.job->world);
        else fprintf(stderr, "memory report (training, %s backend):\n", be->name);
        tr_mem_report(stderr, &ms);
    }
    /* its memory for the evaluation of --val (under --memory-limit at the
     * planner's peak, that evaluation did not fit beside it) */
    tr_optim_free(&opt, &m);
    if (o.val && !o.plan) tr_mem_empty_cache(&be->mem);
    if (o.val && rc_exit == 0 && !o.plan && o.job->rank == 0) {
        test_hook("val", st.step);
        evaluate_val(&o, be, &cfg, &m); /* (frees m) */
        test_hook("evaluated", st.step);
    } else {
        tr_model_free(&m);
    }
    free(zero.owned), free(zero.lo);
    return rc_exit;
}
