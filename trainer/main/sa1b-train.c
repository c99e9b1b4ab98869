/*
 * sa1b-train.c - trains the compact SAM of docs/MODEL.md: the training run
 * (forward, backward, AdamW, schedule, clipping, data parallelism), logging
 * to the terminal and OUT/log.jsonl, checkpoints (OUT/model-STEP.safetensors,
 * OUT/state-STEP.bin, OUT/latest), resume and the debug dump; its options,
 * evaluation and memory checks are in train_*.c (train.h).
 *
 * Data: shards through the loader of pipeline/ (data_shards.c), or
 * deterministic synthetic batches with --synthetic-batch SEED (a debugging
 * option), both behind tr_data_source.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/backend_cuda.h"
#include "sa1b_shard.h" /* sa1b_crc32c */
#include "train.h"
#include "registry/registry.h"

static volatile sig_atomic_t stop_requested, stop_signal;
static const char *volatile stop_line; /* after the training: the line a signal ends the process with */
/* The first SIGINT/SIGTERM/SIGHUP stops after the step (a checkpoint is
 * written); a second ends the process at once.  Once the training is over
 * on rank 0 (its last checkpoint written, the evaluation of --val to come,
 * until that evaluation's line is printed), the first ends the process at
 * once with stop_line, exit 130. */
static void on_signal(int sig)
{
    const char *line = stop_line;
    if (line) {
        int bad = write(2, line, strlen(line)) < 0;
        (void)bad; /* nothing more can be done */
        _exit(130);
    }
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_signal = sig;
    stop_requested = 1;
}

/* SIGBUS: a mapped shard was truncated (or its disk failed) while the
 * loader read it.  Any thread may take the fault and nothing can be saved
 * from here: one line naming where the last checkpoint is, and exit 3. */
static const char *volatile bus_out = NULL;
static volatile sig_atomic_t bus_checkpoint; /* a checkpoint of this run is in bus_out (latest names it) */
static const char *volatile bus_line;         /* after the training: the whole line (nothing is lost) */

static void on_sigbus(int sig)
{
    (void)sig;
    static const char a[] = ": a training shard was truncated or could not be read while it was read (SIGBUS); ",
                      b[] = "the steps after the last checkpoint are lost: --resume ",
                      c[] = " continues from it once the shards are whole\n",
                      d[] = "no checkpoint was written: start the run again (--overwrite) once the shards are whole\n",
                      e[] = ": a shard was truncated or could not be read while it was read (SIGBUS)\n";
    const char *p = cli_prog(), *out = bus_out, *line = bus_line;
    if (line) {
        int bad = write(2, line, strlen(line)) < 0;
        (void)bad;
        _exit(CLI_EXIT_FATAL);
    }
    int bad = write(2, p, strlen(p)) < 0;
    if (!out) bad = bad || write(2, e, sizeof e - 1) < 0;
    else if (bus_checkpoint)
        bad = bad || write(2, a, sizeof a - 1) < 0 || write(2, b, sizeof b - 1) < 0 ||
              write(2, out, strlen(out)) < 0 || write(2, c, sizeof c - 1) < 0;
    else bad = bad || write(2, a, sizeof a - 1) < 0 || write(2, d, sizeof d - 1) < 0;
    (void)bad; /* nothing more can be done */
    _exit(CLI_EXIT_FATAL);
}

/* Tests: SA1B_TEST_KILL=step:N raises SIGTERM after step N, save:N in the
 * middle of step N's checkpoint (between the model and the state file),
 * val:N as the evaluation of --val after step N begins, evaluated:N once
 * that evaluation's line is printed; once (the
 * checkpoint a stop writes may pass the same point again, where a second
 * signal would end the process at once).  SA1B_TEST_BUS=WHAT:N raises
 * SIGBUS at the same points, and eval:N before batch N of an evaluation
 * (a shard truncated there, which a test cannot time). */
void test_hook(const char *what, long n)
{
    static int fired;
    const char *k = getenv("SA1B_TEST_KILL"), *b = getenv("SA1B_TEST_BUS");
    char w[16];
    long at;
    if (!fired && k && sscanf(k, "%15[a-z]:%ld", w, &at) == 2 && strcmp(w, what) == 0 && at == n) {
        fired = 1;
        raise(SIGTERM);
    }
    if (b && sscanf(b, "%15[a-z]:%ld", w, &at) == 2 && strcmp(w, what) == 0 && at == n) raise(SIGBUS);
}

/* Tests: SA1B_TEST_DEVICE=WHAT:N[:R] makes the device of rank R (0 when
 * not given) fail, from then on, as the CUDA backend records a failure:
 * WHAT step after step N, save once the files of step N's checkpoint are
 * written (its downloads).  Any backend: the paths that a failed device
 * takes, run without one. */
static int test_device_failed;

void test_device_hook(const char *what, long n, int rank)
{
    const char *k = getenv("SA1B_TEST_DEVICE");
    char w[16];
    long at;
    int r = 0;
    if (k && sscanf(k, "%15[a-z]:%ld:%d", w, &at, &r) >= 2 && strcmp(w, what) == 0 && at == n && r == rank)
        test_device_failed = 1;
}

int device_error(tr_backend *be, char *err, size_t err_len)
{
    if (tr_backend_cuda_error(be, err, err_len)) return 1;
    if (!test_device_failed) return 0;
    snprintf(err, err_len, "a device error made up by SA1B_TEST_DEVICE");
    return 1;
}

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
static void warn_incomplete(const options *o, const tr_data_source *src, const char *what, const char *glob)
{
    const char *first;
    size_t cut = glob && !o->plan && o->rank == 0 ? tr_shard_source_incomplete(src, &first) : 0;
    if (cut)
        cli_warn("%s: %zu shard%s incomplete, made from a tar that ended early ('%s'%s): using the images %s", what,
                 cut, cut == 1 ? " is" : "s are", first, cut > 1 ? " and others" : "", cut == 1 ? "it holds" : "they hold");
    long part;
    size_t gaps = glob && !o->plan && o->rank == 0 ? tr_shard_source_gapped(src, &first, &part) : 0;
    if (gaps)
        cli_warn("%s: %zu input%s split into parts lack%s a part (part %ld of the input of '%s'%s is not here): "
                 "using the parts that are", what, gaps, gaps == 1 ? "" : "s", gaps == 1 ? "s" : "", part, first,
                 gaps > 1 ? ", and others" : "");
}

/* Opens a data source: shards matching glob through the loader, else the
 * synthetic batches; points K and epochs as given (eval: K 1, one epoch).
 * Shards that cannot be opened end the process in one line, or with why
 * (the ranks of a job settle it) return -1 with that line in why. */
static int open_source_why(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem,
                           const char *what, const char *glob, int K, uint64_t max_epochs, double flip, char *why,
                           size_t why_len)
{
    char err[512];
    int R = 4 * (cfg->S / cfg->P);
    if (o->plan) { /* batches counted, never filled; the loader holds threads + 2 in flight, the
                    * synthetic source 2 (batch.c: the next made while the step runs) and, for
                    * a job of several ranks, the global batch they are cut from (world batches) */
        int n = glob ? src_workers(o) + 2 : 2 + (o->world > 1 ? o->world : 0);
        if (tr_plan_source_open(src, mem, o->batch, o->masks, K, cfg->S, R, n) < 0)
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
                               .rank = train ? o->rank : 0, .world = train ? o->world : 1};
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
        if (tr_synthetic_source_open_rank(src, mem, o->batch, o->masks, K, cfg->S, R, o->synthetic_seed, o->rank,
                                          o->world) < 0)
            cli_die(CLI_EXIT_FATAL, "out of memory for the synthetic batches");
        return 0;
    }
    cli_usage_error("no data: give %s GLOB or --synthetic-batch SEED", what);
}

static void open_source(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem,
                        const char *what, const char *glob, int K, uint64_t max_epochs, double flip)
{
    (void)open_source_why(o, cfg, src, mem, what, glob, K, max_epochs, flip, NULL, 0);
}

int write_latest(const char *dir, long step, int own_tmp)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/latest", dir);
    if (own_tmp) snprintf(tmp, sizeof tmp, "%s.tmp.%ld.0", path, (long)getpid());
    else snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%ld\n", step) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    cli_sync_dir(dir);
    return 0;
}

long read_latest(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = tr_run_dir_fopen(path);
    if (!f)
        cli_die(CLI_EXIT_FATAL, "cannot resume from '%s': %s", path,
                errno == EINVAL ? "not a regular file" : strerror(errno));
    long step = -1;
    if (fscanf(f, "%ld", &step) != 1 || step < 0) step = -1;
    fclose(f);
    if (step < 0) cli_die(CLI_EXIT_FATAL, "'%s': not a step number", path);
    return step;
}

/* On resume: drop log records of steps after the checkpoint (a run killed
 * between checkpoints logged steps that will now be redone), and a last
 * record cut short (a write that a full disk or a crash cut, after which
 * the run may have gone on to later checkpoints), which the resumed run's
 * first record would otherwise continue on the same line; a last record
 * that is whole but for its newline gets it.  A failure leaves the log as
 * it was, its temporary removed, and ends the run. */
static void trim_log(const char *path, long step)
{
    FILE *in = tr_run_dir_fopen(path);
    if (!in && errno == ENOENT) return;
    if (!in)
        cli_die(CLI_EXIT_FATAL, "cannot trim '%s' to step %ld: %s", path, step,
                errno == EINVAL ? "not a regular file" : strerror(errno));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        int e = errno;
        fclose(in);
        cli_die(CLI_EXIT_FATAL, "cannot trim '%s' to step %ld: cannot create '%s': %s", path, step, tmp, strerror(e));
    }
    char *line = NULL;
    size_t cap = 0;
    int bad = 0;
    ssize_t n;
    while (!bad && (n = getline(&line, &cap, in)) > 0) {
        long s = -1;
        int whole = line[n - 1] == '\n'; /* (only the last line can lack it) */
        if (!whole) { /* a record cut short, unless it is whole JSON but for its newline */
            json_t *j = json_loadb(line, (size_t)n, 0, NULL);
            int cut = !json_is_object(j);
            json_decref(j);
            if (cut) continue;
        }
        if (sscanf(line, "{\"step\": %ld", &s) == 1 && s > step) continue;
        if (fputs(line, out) == EOF || (!whole && fputc('\n', out) == EOF)) bad = errno ? errno : EIO;
    }
    free(line);
    if (!bad && ferror(in)) bad = EIO;
    fclose(in);
    errno = 0;
    if (fflush(out) != 0 && !bad) bad = errno ? errno : EIO;
    if (!bad && fsync(fileno(out)) != 0) bad = errno; /* never an empty log after a crash */
    if (fclose(out) != 0 && !bad) bad = errno ? errno : EIO;
    if (!bad && rename(tmp, path) != 0) bad = errno;
    if (bad) {
        unlink(tmp);
        cli_die(CLI_EXIT_FATAL, "cannot trim '%s' to step %ld: %s", path, step, strerror(bad));
    }
}

/* A record of the log that did not reach its file (a full disk): one line,
 * no more records (the log would have a gap), and the run ends with exit 3
 * once training is done.  Returns NULL (the log closed). */
static FILE *log_failed(FILE *log, const char *path, long step, int *bad)
{
    int e = errno ? errno : EIO;
    if (log) fclose(log);
    cli_warn("cannot write '%s' at step %ld: %s (no further records; training goes on, exit status 3)", path, step,
             strerror(e));
    *bad = 1;
    return NULL;
}

/* Tests: SA1B_TEST_LOG_FULL=N sends the log's records from step N on to
 * /dev/full (a full disk). */
static void test_log_hook(FILE *log, long step)
{
    const char *k = getenv("SA1B_TEST_LOG_FULL");
    if (!k || atol(k) != step) return;
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) dup2(fd, fileno(log)), close(fd);
}

/* The state file of step for this rank: state-STEP.bin, or with --zero 1
 * under mpirun state-STEP.rRANK.bin for ranks > 0 (each its part). */
static void state_path(const options *o, const char *dir, long step, char *path, size_t n)
{
    if (o->zero && o->world > 1 && o->rank) snprintf(path, n, "%s/state-%ld.r%d.bin", dir, step, o->rank);
    else snprintf(path, n, "%s/state-%ld.bin", dir, step);
}

/* A GPU's first error ends the run in one line (its ops cannot return
 * one: backend_cuda.h). */
static void check_device(tr_backend *be)
{
    char err[512];
    if (device_error(be, err, sizeof err)) cli_die(CLI_EXIT_FATAL, "--backend cuda: %s", err);
}

/* A collective that failed on this rank (the others wait for it): the line
 * and the end of the job. */
_Noreturn static void die_collective(const options *o, const char *err)
{
    cli_warn("rank %d: %s", o->rank, err);
    tr_dist_abort(o->dist, CLI_EXIT_FATAL);
}

_Noreturn static void die_ranks(tr_dist *dist, tr_backend *be, const char *msg);

/* log: the run's log (rank 0), synced before latest names the step, so
 * that a crash never leaves a checkpoint whose records are lost (the
 * resumed run would not write them again); NULL when it has none. */
static void save_checkpoint(const options *o, tr_model *m, tr_optim *opt, tr_train_state *st,
                            tr_data_source *src, const uint64_t *pos, FILE *log)
{
    char path[4096], err[512], dev[512];
    int parts = o->zero && o->world > 1; /* each rank writes its part of the optimizer state */
    /* never a checkpoint of what a failed device left; with parts, the
     * failure (why, else "") is settled among the ranks below, as one of
     * a file's */
    char why[700] = "";
    if (!parts) check_device(m->be);
    else if (device_error(m->be, dev, sizeof dev)) snprintf(why, sizeof why, "--backend cuda: %s", dev);
    if (o->rank && !parts) return;       /* rank 0 writes (the ranks hold the same weights and state) */
    if (pos) /* where the data stood after step st->step (the next step's start) */
        st->data_epoch = pos[0], st->data_consumed = pos[1];
    else if (src->position)
        src->position(src->ctx, &st->data_epoch, &st->data_consumed);
    if (src->identity) src->identity(src->ctx, st->data_id, sizeof st->data_id);
    if (o->rank == 0 && !*why) {
        snprintf(path, sizeof path, "%s/model-%ld.safetensors", o->out, st->step);
        if (tr_ckpt_save_model(m, path, err, sizeof err) < 0) {
            if (!parts) cli_die(CLI_EXIT_FATAL, "%s", err);
            snprintf(why, sizeof why, "%s", err);
        }
        test_hook("save", st->step);
    }
    state_path(o, o->out, st->step, path, sizeof path);
    st->run = o->record;
    int rc = -1; /* the state file: 0 written */
    if (!*why) {
        rc = tr_ckpt_save_state(m, opt, st, path, err, sizeof err);
        test_device_hook("save", st->step, o->rank);
        /* a device that failed while the files read its memory (its
         * downloads then give bytes it could not read) makes them no
         * checkpoint either */
        int dev_failed = device_error(m->be, dev, sizeof dev);
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
        if (failed) snprintf(mine, sizeof mine, "rank %d of %d: %s", o->rank, o->world, why);
        if (tr_dist_settle(o->dist, failed, mine, settled, sizeof settled) < 0) {
            if (rc == 0) unlink(path); /* another rank's part failed: this one's goes too */
            failed = 1;
        }
    }
    if (failed) {
        /* no half checkpoint left (a full disk): its model file goes, which
         * latest never named (it names an earlier step, or none) */
        if (o->rank == 0) {
            snprintf(path, sizeof path, "%s/model-%ld.safetensors", o->out, st->step);
            unlink(path);
        }
        if (!parts) cli_die(CLI_EXIT_FATAL, "%s", why);
        src->close(src->ctx); /* (its loader's threads stopped: nothing in flight at the exit) */
        die_ranks(o->dist, m->be, settled);
    }
    if (log && fflush(log) == 0) fsync(fileno(log)); /* (a record that failed to reach it was said) */
    if (o->rank == 0 && write_latest(o->out, st->step, 0) < 0)
        cli_die(CLI_EXIT_FATAL, "cannot write '%s/latest': %s", o->out, strerror(errno));
    if (o->rank == 0) bus_out = o->out; /* (was --resume's folder, resumed into another --out) */
    bus_checkpoint = 1;
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
_Noreturn static void die_step(const options *o, tr_backend *be, tr_model *m, tr_optim *opt, tr_train_state *st,
                               tr_data_source *src, long saved, const uint64_t *pos, FILE *log, const char *err)
{
    check_device(be);
    if (o->plan || st->step <= saved || o->rank != 0 || (o->zero && o->world > 1)) die_memory(o, be, err);
    char line[1200];
    failure_line(o, be, err, line, sizeof line);
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
_Noreturn static void die_step_ranks(const options *o, tr_backend *be, tr_model *m, tr_optim *opt, tr_train_state *st,
                                     tr_data_source *src, long saved, const uint64_t *pos, FILE *log, int fails,
                                     int rank, int dev_fails)
{
    char err[512], on[40];
    int parts = o->zero && o->world > 1, writes = parts || o->rank == 0;
    if (fails == 1) snprintf(on, sizeof on, "rank %d", rank);
    else snprintf(on, sizeof on, "%d ranks", fails);
    if (!o->plan && st->step > saved && writes && !(parts && dev_fails) && !device_error(be, err, sizeof err)) {
        save_checkpoint(o, m, opt, st, src, pos, log);
        if (o->rank == 0)
            cli_warn("step %ld failed on %s: checkpoint of step %ld written (--resume %s goes on from it)",
                     st->step + 1, on, st->step, o->out);
    }
    if (tr_dist_barrier(o->dist, err, sizeof err) < 0) die_collective(o, err);
    exit(CLI_EXIT_FATAL);
}

/* --zero 1: rank r keeps the optimizer state of the parameters in floats
 * [lo[r], lo[r+1]) of the weights (whole parameters, about equal shares, in
 * the layout's order); the ranks reduce-scatter the gradients by the same
 * parts (each rank receives the sum of its own), each updates its part, and
 * they gather the others' weights after each update. */
typedef struct zero_part {
    uint8_t *owned; /* [n_params]; NULL: every parameter (no split) */
    size_t *lo;     /* [world + 1] */
    size_t *glo;    /* [world + 1]: the parts in grad_mem (zero_grad_parts) */
} zero_part;

static void zero_split(const tr_model *m, int rank, int world, zero_part *z)
{
    z->owned = calloc((size_t)m->n_params + 1, 1);
    z->lo = calloc(2 * ((size_t)world + 1), sizeof *z->lo);
    if (!z->owned || !z->lo) cli_die(CLI_EXIT_FATAL, "out of memory");
    z->glo = z->lo + world + 1;
    int r = 0;
    for (int i = 0; i < m->n_params; i++) {
        size_t off = m->pinfo[i].offset;
        int want = (int)((double)off * world / (double)m->n_param_floats); /* the rank whose share it starts in */
        while (r < want && r < world - 1) z->lo[++r] = off;
        z->owned[i] = r == rank;
    }
    while (r < world) z->lo[++r] = m->n_param_floats;
}

/* The parts in the gradients' layout, which holds floats [grad_lo,
 * n_param_floats) of the weights' (grad_lo moves as groups are frozen and
 * unfrozen): a part below it is empty. */
static void zero_grad_parts(const tr_model *m, int world, zero_part *z)
{
    for (int r = 0; r <= world; r++) z->glo[r] = z->lo[r] > m->grad_lo ? z->lo[r] - m->grad_lo : 0;
}

static int precision_of(const char *name)
{
    return !strcmp(name, "bf16") ? TR_PREC_BF16 : !strcmp(name, "fp16") ? TR_PREC_FP16 : TR_PREC_FP32;
}

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

static void sync_trainable(tr_model *m, tr_optim *opt, const uint8_t *owned)
{
    char err[100];
    if (try_sync_trainable(m, opt, owned, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
}

static void set_frozen(tr_model *m, const char *group, int frozen)
{
    char err[300];
    if (tr_model_freeze(m, group, frozen, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
}

/* --stage-batch: reopens the data with micro-batch B where the stream is. */
static int change_batch(const options *o, const tr_config *cfg, tr_model *m, tr_data_source *src, tr_mem *mem, int B,
                        char *err, size_t err_len)
{
    uint64_t ep = 0, cons = 0;
    if (src->position) src->position(src->ctx, &ep, &cons);
    src->close(src->ctx);
    options ob = *o;
    ob.batch = B;
    open_source(&ob, cfg, src, mem, "--data", o->data, o->points, 0, o->flip);
    if (src->seek && src->seek(src->ctx, ep, cons) < 0) cli_die(CLI_EXIT_FATAL, "cannot continue the data stream");
    char e[300];
    if (tr_model_set_batch(m, B, e, sizeof e) < 0) return snprintf(err, err_len, "--stage-batch: %s", e), -1;
    return 0;
}

/* The line of a failure to start the backend: "[rank R of N: ]--backend NAME: why". */
static void rank_line(char *line, size_t n, const options *o, const char *why)
{
    int k = o->world > 1 ? snprintf(line, n, "rank %d of %d: ", o->rank, o->world) : 0;
    snprintf(line + k, n - (size_t)k, "--backend %s: %s", o->backend, why);
}

/* A failure every rank knows of (tr_dist_settle): the one line (msg, ""
 * on the ranks that stay silent) and the end of every rank. */
_Noreturn static void die_ranks(tr_dist *dist, tr_backend *be, const char *msg)
{
    if (*msg) cli_warn("%s", msg);
    if (be) tr_backend_free(be);
    tr_dist_close(dist);
    exit(CLI_EXIT_FATAL);
}

/* Under mpirun every rank opens --data itself.  A rank that could not
 * (failed: its line, else ""), or that reads other shards than rank 0 (a
 * folder not shared, a relative pattern run from another working
 * directory, a stale copy: the data's identity differs) would leave the
 * others waiting, or train the job on other images without a word.  The
 * ranks agree: the lowest rank that differs says so in one line naming
 * itself, and every rank ends (exit 3). */
static void same_data(const options *o, tr_data_source *src, const char *failed, tr_backend *be)
{
    char err[1200], mine[1200] = "";
    if (*failed) snprintf(mine, sizeof mine, "rank %d of %d: %s", o->rank, o->world, failed);
    if (tr_dist_settle(o->dist, *failed != 0, mine, err, sizeof err) < 0) {
        if (!*failed) src->close(src->ctx); /* (its loader's threads stopped: nothing in flight at the exit) */
        die_ranks(o->dist, be, err);
    }
    char id[128] = "";
    if (src->identity) src->identity(src->ctx, id, sizeof id); /* "N shards, M images, digest D" */
    unsigned long long n = 0, images = 0;
    if (sscanf(id, "%llu shards, %llu images", &n, &images) != 2) n = images = 0;
    uint32_t h = sa1b_crc32c(0, id, strlen(id));
    double v[3] = {o->rank == 0 ? (double)h : 0.0, o->rank == 0 ? (double)n : 0.0, o->rank == 0 ? (double)images : 0.0};
    if (tr_dist_sum_d(o->dist, v, 3, err, sizeof err) < 0) {
        src->close(src->ctx);
        die_ranks(o->dist, be, o->rank == 0 ? err : "");
    }
    const char *how = v[1] == (double)n && v[2] == (double)images ? " (other shards of as many images)" : "";
    snprintf(mine, sizeof mine, "rank %d of %d reads other shards than rank 0 under --data '%s': rank 0 %.0f "
             "shard%s of %.0f images, rank %d %llu of %llu%s (every rank must read the same files: on a file system "
             "they share, by a pattern that does not depend on the working directory)", o->rank, o->world, o->data,
             v[1], v[1] == 1 ? "" : "s", v[2], o->rank, n, images, how);
    if (tr_dist_settle(o->dist, v[0] != (double)h, mine, err, sizeof err) < 0) {
        src->close(src->ctx);
        die_ranks(o->dist, be, err);
    }
}

/* Data parallel: sums over the ranks (more than one, or on the device
 * under mpirun: the same path with one rank). */
static int data_parallel(const options *o)
{
    return !o->plan && (o->world > 1 || tr_dist_on_device(o->dist));
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    options o;
    char err[512];
    parse_options(argc, argv, &o);
    signal(SIGBUS, on_sigbus); /* (--eval-only, --dump-step, the loader's read-ahead before the training: one line) */
    /* the ranks of a job started by mpirun (one process alone otherwise) */
    tr_dist *dist = tr_dist_open(&argc, &argv, o.collective_timeout, err, sizeof err);
    if (!dist) cli_die(CLI_EXIT_FATAL, "%s", err);
    int rank = tr_dist_rank(dist), world = tr_dist_world(dist);
    if (world > 1 && (o.plan || o.eval_only || o.dump_step))
        cli_usage_error("--plan, --eval-only and --dump-step run in one process, not under mpirun with %d", world);
    o.rank = rank; /* (check_out's refusals: rank 0 says them) */
    check_out(&o);
    o.world = world; /* (restore_run compares the run's) */
    if (o.resume) restore_run(&o, argc, argv, rank == 0);
    o.dist = dist, o.rank = rank, o.world = world;
    if (rank) o.quiet = 1; /* rank 0 reports */
    if (o.plan) {
        o.world = o.plan_ranks ? o.plan_ranks : 1; /* the plan of rank 0 of such a job (--zero 1) */
        int rc = plan_main(&o);
        tr_dist_close(dist);
        cli_stdout_check(); /* --plan's table must reach it */
        return rc;
    }
    if (o.plan_ranks) cli_usage_error("--ranks plans a job: it needs --plan (mpirun -np N runs one)");
    if (!o.eval_only && !o.dump_step) make_record(&o);
    if (!o.eval_only && !o.dump_step && rank == 0) lock_out(&o, 0); /* rank 0 writes the run's files */
    if (o.resume) { /* (after the lock: a resume of a running run is told that it runs) */
        long step = read_latest(o.resume);
        if (!o.eval_only && !o.dump_step && o.steps < step) { /* never a resume that does nothing and says it
                                                                 succeeded (before --out is made) */
            if (rank == 0)
                cli_die(CLI_EXIT_USAGE, "--steps %ld is below step %ld, where the run in '%s' is: --steps is the run's "
                        "total (give more than %ld, or leave it out)", o.steps, step, o.resume, step);
            exit(CLI_EXIT_USAGE); /* (one line per job) */
        }
    }
    check_thread_room(&o);
    /* under mpirun the CUDA backend takes the device of the local rank and
     * sums over NCCL (with one rank too); the ranks agree on a failure */
    int on_device = strcmp(o.backend, "cuda") == 0 && tr_dist_launched(dist) && !o.eval_only && !o.dump_step;
    tr_backend *be = on_device ? tr_backend_cuda_create_on(tr_dist_local_rank(dist), o.threads, err, sizeof err)
                               : tr_backend_create(o.backend, o.threads, err, sizeof err);
    char mine[700] = "";
    if (!be) rank_line(mine, sizeof mine, &o, err); /* no CUDA built, or no device */
    if (tr_dist_settle(dist, !be, mine, err, sizeof err) < 0) die_ranks(dist, be, err);
    /* every rank starts the run that rank 0 does (a new one or the same
     * step, with the same record: settings, data): a rank that sees
     * another --out (a folder not shared, a stale cache) or was given
     * other options would otherwise train on from other weights, or
     * (--auto-resume) from scratch, and its gradients go into rank 0's
     * checkpoints.  Rank 0's step and record digest reach every rank (a
     * sum to which rank 0 alone adds), and the lowest rank that differs
     * says so. */
    if (world > 1 && !o.eval_only && !o.dump_step) {
        long step = o.resume ? read_latest(o.resume) : -1;
        uint32_t h = o.record ? sa1b_crc32c(0, o.record, strlen(o.record)) : 0; /* the run record's digest */
        double v[2] = {rank == 0 ? (double)step : 0.0, rank == 0 ? (double)h : 0.0};
        if (tr_dist_sum_d(dist, v, 2, err, sizeof err) < 0) die_ranks(dist, be, rank == 0 ? err : "");
        int differs = v[0] != (double)step || v[1] != (double)h;
        char r0[64], me[64];
        snprintf(r0, sizeof r0, v[0] < 0 ? "starts a new run" : "continues from step %.0f", v[0]);
        snprintf(me, sizeof me, step < 0 ? "starts a new one" : "continues from step %ld", step);
        if (v[0] == (double)step) snprintf(me, sizeof me, "%s, with other settings", step < 0 ? "starts one too" : "too");
        snprintf(mine, sizeof mine, "rank %d of %d does not see the run that rank 0 does: rank 0 %s, rank %d %s in '%s' "
                 "(every rank must see --out, on a file system they share, and be given the same options)",
                 rank, world, r0, rank, me, o.out);
        if (tr_dist_settle(dist, differs, mine, err, sizeof err) < 0) die_ranks(dist, be, err);
    }
    if (on_device && tr_dist_use_device(dist, be, err, sizeof err) < 0) { /* NCCL absent, or its setup failed */
        if (*err) rank_line(mine, sizeof mine, &o, err);
        die_ranks(dist, be, *err ? mine : "");
    }
    be->mem.limit = o.memory_limit;
    if (o.tf32 && tr_backend_cuda_set_tf32(be, 1, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--tf32: %s", err);
    check_address_space(&o, be);
    /* the startup line comes from run(), once the model and the data are set up */
    int rc = run(&o, be);
    tr_backend_free(be);
    tr_dist_close(dist);
    free(o.record);
    for (int i = 0; i < o.n_owned; i++) free(o.owned[i]);
    cli_stdout_check(); /* --eval-only's JSON line, the loss of --dump-step */
    return rc;
}

/* v with digits significant digits (%g), or digits decimals with fixed,
 * into buf[32]; "null" when it is not finite: JSON has no NaN or infinity
 * (printf's "-nan" broke every reader of the log). */
static const char *json_num(char buf[32], double v, int digits, int fixed)
{
    if (!isfinite(v)) return "null";
    snprintf(buf, 32, fixed ? "%.*f" : "%.*g", digits, v);
    return buf;
}

/* --dump-step: one forward and backward on the first batch, in the
 * configured precision (fp16 scales the loss, halved until no gradient
 * overflows), written as MODEL.md's debug dump; the loss on stdout. */
static void dump_step(const options *o, tr_model *m, tr_data_source *src, int prec)
{
    char err[512];
    tr_batch *b;
    int rc = src->next(src->ctx, &b, err, sizeof err);
    if (rc <= 0) cli_die(CLI_EXIT_FATAL, "%s", rc < 0 ? err : "no data for --dump-step");
    float scale = prec == TR_PREC_FP16 ? 65536.0f : 1.0f;
    tr_loss L;
    for (;;) {
        if (tr_model_forward(m, b, err, sizeof err) < 0 || tr_model_backward_acc(m, b, 1, scale, 0, &L, err, sizeof err) < 0)
            cli_die(CLI_EXIT_FATAL, "%s", err);
        if (isfinite(tr_model_scale_grads(m, 1.0 / scale)) || scale <= 1.0f) break;
        scale /= 2;
    }
    check_device(m->be);
    /* a signal while the dump is written (to a temporary renamed into place)
     * ends the process once it is in place, a second at once: never a
     * temporary of the dump's size left beside it */
    struct sigaction hup;
    signal(SIGINT, on_signal), signal(SIGTERM, on_signal);
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) signal(SIGHUP, on_signal);
    if (tr_dump_step(m, b, &L, o->dump_step, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    if (stop_requested) signal(stop_signal, SIG_DFL), raise(stop_signal);
    char jl[4][32];
    printf("{\"loss\": %s, \"focal\": %s, \"dice\": %s, \"iou_mse\": %s, \"valid\": %d}\n",
           json_num(jl[0], L.loss, 8, 0), json_num(jl[1], L.focal, 8, 0), json_num(jl[2], L.dice, 8, 0),
           json_num(jl[3], L.iou_mse, 8, 0), L.n_valid);
    src->release(src->ctx, b);
    src->close(src->ctx);
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
                          const size_t *parts, tr_loss *L, double *sync_s, int *stop_all, int *fails,
                          int *fail_rank, int *dev_fails, char *err, size_t err_len)
{
    int dp = data_parallel(o), bad = 0; /* bad: this rank's part of the step failed (err) */
    long n_valid = 0;
    tr_loss acc = {0};
    *fails = 0;
    for (int k = 0; k < accum; k++) {
        tr_batch *b;
        int rc = src->next(src->ctx, &b, err, err_len);
        if (rc == 0) return 0;
        tr_loss Lk; /* forward + backward (fused per decoder chunk with --checkpoint-decoder) */
        if (rc < 0 || tr_model_step(m, b, k == 0, lscale, accum > 1 || dp, &Lk, err, err_len) < 0) {
            if (!dp) return -1;
            bad = 1; /* the other ranks learn it from the sums below */
            break;
        }
        src->release(src->ctx, b);
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
        int dev_bad = device_error(m->be, dev, sizeof dev);
        if (dev_bad && !bad) err[0] = 0; /* (failure_line says the device's) */
        bad |= dev_bad;
        double t[10] = {(double)n_valid, acc.loss,  acc.focal, acc.dice, acc.iou_mse, acc.miou, stop_requested ? 1.0 : 0.0,
                        (double)bad, bad ? (double)o->rank : 0.0, (double)dev_bad};
        double t0 = cli_now();
        char cerr[1300];
        /* (a failed rank's gradients are summed too, and never used) */
        int rc = parts ? tr_dist_reduce_scatter_f(o->dist, m->grad_mem, parts, cerr, sizeof cerr)
                       : tr_dist_sum_f(o->dist, m->grad_mem, m->n_grad_floats, cerr, sizeof cerr);
        if (rc < 0 || tr_dist_sum_d(o->dist, t, 10, cerr, sizeof cerr) < 0) die_collective(o, cerr);
        n_valid = (long)t[0], acc.loss = t[1], acc.focal = t[2], acc.dice = t[3], acc.iou_mse = t[4], acc.miou = t[5];
        *stop_all = t[6] > 0;
        *sync_s += cli_now() - t0;
        if (t[7] > 0) { /* a rank's step failed: the lowest failing rank says why, in one line for the job */
            char line[1200] = "", mine[1300];
            if (bad) failure_line(o, m->be, err, line, sizeof line);
            if (o->world > 1) snprintf(mine, sizeof mine, "rank %d: %s", o->rank, line);
            else snprintf(mine, sizeof mine, "%s", line);
            if (tr_dist_settle(o->dist, bad, mine, cerr, sizeof cerr) < 0 && *cerr) cli_warn("%s", cerr);
            *fails = (int)t[7], *fail_rank = (int)t[8], *dev_fails = t[9] > 0;
            return -1;
        }
    }
    if ((accum > 1 || dp) && n_valid)
        acc.loss /= n_valid, acc.focal /= n_valid, acc.dice /= n_valid, acc.iou_mse /= n_valid, acc.miou /= n_valid;
    acc.n_valid = (int)n_valid;
    *L = acc;
    return 1;
}

/* --val after training: a model for one point per mask with the trained
 * weights, evaluated on the whole of --val.  The training's model m is
 * freed first, its weights kept on the host: beside it, the evaluation's
 * model did not fit under --memory-limit at the planner's peak. */
static void evaluate_val(const options *o, tr_backend *be, const tr_config *cfg, tr_model *m)
{
    char err[512];
    size_t np = m->n_param_floats, nc = (size_t)cfg->C;
    float *w = malloc((np + nc) * sizeof(float));
    if (!w) cli_die(CLI_EXIT_FATAL, "out of memory for the evaluation of --val");
    be->ops->download(be, w, m->param_mem, np * sizeof(float));
    be->ops->download(be, w + np, m->pe_gaussian, nc * sizeof(float));
    tr_model_free(m);
    tr_mem_empty_cache(&be->mem);
    tr_model ev;
    if (tr_model_init(&ev, be, cfg, o->batch, o->masks, 1, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    be->ops->upload(be, ev.param_mem, w, np * sizeof(float));
    be->ops->upload(be, ev.pe_gaussian, w + np, nc * sizeof(float));
    free(w);
    tr_data_source vs = {0};
    open_source(o, cfg, &vs, be->host_mem, "--val", o->val, 1, 1, 0.0);
    evaluate(o, &ev, &vs, 1);
    /* its line is printed: a signal from now on no longer ends the process
     * at once saying --val was not evaluated (and losing that line, still
     * in stdout's buffer); the run ends as it would have */
    fflush(stdout);
    stop_line = NULL;
    vs.close(vs.ctx);
    tr_model_free(&ev);
}

/* Everything after the backend: a real run, or the planner's run of the
 * same path on the meta backend (o.plan: no files, no initialisation
 * arithmetic, failures reported in o.plan_err instead of exiting). */
int run(const options *op, tr_backend *be)
{
    options o = *op;
    char err[512];
    tr_config cfg = o.cfg;
    if (o.eval_only) o.points = 1; /* one positive point per mask: the SA-1B point when the shard has it */
    if (o.eval_only && tr_ckpt_read_config(o.eval_only, &cfg, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    o.cfg = cfg; /* (the planner of an out-of-memory line plans the checkpoint's model) */
    tr_model m;
    int prec = precision_of(o.precision);
    tr_model_opts mo = {.ckpt_every = o.ckpt_blocks, .ckpt_decoder = o.ckpt_decoder, .precision = prec};
    const char *frz = o.eval_only || o.dump_step ? NULL : o.freeze;
    if (tr_model_init_ex(&m, be, &cfg, o.batch, o.masks, o.points, o.eval_only ? NULL : &mo, frz, err, sizeof err) < 0) {
        if (o.plan) return snprintf(o.plan_err, o.plan_err_len, "%s", err), -1;
        die_memory(&o, be, err);
    }
    if (!o.plan && tr_model_init_params(&m, o.seed) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    if (o.init && tr_ckpt_load_model(&m, o.init, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    tr_data_source src = {0};

    if (o.eval_only) {
        if (tr_ckpt_load_model(&m, o.eval_only, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        open_source(&o, &cfg, &src, be->host_mem, "--val", o.val, o.points, 1, 0.0);
        warn_incomplete(&o, &src, "--val", o.val);
        evaluate(&o, &m, &src, o.val != NULL);
        src.close(src.ctx);
        tr_model_free(&m);
        return 0;
    }
    char why[700] = "";
    const int ranks = o.world > 1 && !o.plan; /* (--eval-only and --dump-step run in one process) */
    (void)open_source_why(&o, &cfg, &src, be->host_mem, "--data", o.data, o.points, 0, o.dump_step ? 0.0 : o.flip,
                          ranks ? why : NULL, sizeof why);
    if (ranks) same_data(&o, &src, why, be);
    warn_incomplete(&o, &src, "--data", o.data);

    if (o.dump_step) {
        dump_step(&o, &m, &src, prec);
        tr_model_free(&m);
        return 0;
    }

    /* training */
    if (o.val && !o.plan) { /* a --val that cannot be read fails now, not after the training */
        char vwhy[700] = "", settled[800];
        if (o.rank == 0) { /* (rank 0 evaluates; the others learn whether it can) */
            tr_data_source vs = {0};
            if (open_source_why(&o, &cfg, &vs, be->host_mem, "--val", o.val, 1, 1, 0.0, ranks ? vwhy : NULL,
                                sizeof vwhy) == 0) {
                warn_incomplete(&o, &vs, "--val", o.val);
                vs.close(vs.ctx);
            }
            tr_mem_empty_cache(be->host_mem); /* (its buffers, which the planner does not count) */
        }
        if (ranks && tr_dist_settle(o.dist, *vwhy != 0, vwhy, settled, sizeof settled) < 0) {
            src.close(src.ctx); /* (the training data's loader stopped: nothing in flight at the exit) */
            die_ranks(o.dist, be, settled);
        }
    }
    tr_optim_config oc;
    tr_optim_defaults(&oc, o.lr, o.steps);
    oc.kind = strcmp(o.optim, "adamw8bit") == 0 ? TR_OPTIM_ADAMW8BIT : TR_OPTIM_ADAMW;
    oc.block = o.optim_block;
    oc.skip_frozen = 1; /* no state, not even for a moment, for a frozen encoder */
    if (o.warmup >= 0) oc.warmup = o.warmup;
    oc.weight_decay = o.weight_decay, oc.clip = o.clip, oc.eps = o.adam_eps;
    zero_part zero = {0};
    if (o.zero && (o.world > 1 || data_parallel(&o))) zero_split(&m, o.rank, o.world, &zero); /* (the planner's too) */
    oc.owned = zero.owned;
    tr_optim opt;
    if (tr_optim_init(&opt, &m, &oc) < 0) die_memory(&o, be, "out of memory for the optimizer");
    if (o.freeze && try_sync_trainable(&m, &opt, zero.owned, err, sizeof err) < 0) /* (created with the groups frozen) */
        die_memory(&o, be, err);
    if (o.plan && o.n_unfreeze) { /* the run's peak: the groups --unfreeze trains later, trained from the start */
        for (int u = 0; u < o.n_unfreeze; u++) set_frozen(&m, o.unfreeze_group[u], 0);
        sync_trainable(&m, &opt, zero.owned);
    }
    tr_train_state st = {0};
    tr_rng_seed(&st.rng, o.seed);
    float lscale = prec == TR_PREC_FP16 ? 65536.0f : 1.0f; /* fp16 dynamic loss scale */
    long scale_good = 0;
    if (o.resume) {
        long step = read_latest(o.resume);
        char path[4096];
        snprintf(path, sizeof path, "%s/model-%ld.safetensors", o.resume, step);
        if (tr_ckpt_load_model(&m, path, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        int unfrozen = 0; /* stages before the checkpoint */
        for (int u = 0; u < o.n_unfreeze; u++)
            if (o.unfreeze_step[u] < step) {
                if (tr_model_freeze(&m, o.unfreeze_group[u], 0, err, sizeof err) < 0) die_memory(&o, be, err);
                unfrozen = 1;
            }
        if (unfrozen && try_sync_trainable(&m, &opt, zero.owned, err, sizeof err) < 0) die_memory(&o, be, err);
        state_path(&o, o.resume, step, path, sizeof path);
        if (tr_ckpt_load_state(&m, &opt, &st, path, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        if (st.loss_scale > 0 && prec == TR_PREC_FP16) lscale = (float)st.loss_scale, scale_good = st.scale_good;
        char now[sizeof st.data_id];
        if (st.data_id[0] && src.identity) {
            src.identity(src.ctx, now, sizeof now);
            if (strcmp(now, st.data_id) != 0) {
                src.close(src.ctx); /* (its loader's threads stopped: nothing in flight at the exit) */
                if (o.rank == 0) /* (one line per job: every rank reads the same shards, same_data) */
                    cli_die(CLI_EXIT_FATAL, "cannot resume: the shards of --data '%s' changed since step %ld was "
                            "saved (then %s; now %s): restore them, or start a new run from its weights with --init "
                            "'%s/model-%ld.safetensors'", o.data, step, st.data_id, now, o.resume, step);
                exit(CLI_EXIT_FATAL);
            }
        }
        if (src.seek && src.seek(src.ctx, st.data_epoch, st.data_consumed) < 0)
            cli_die(CLI_EXIT_FATAL, "cannot seek the data to where step %ld left it", step);
    }
    /* rank 0 writes the run's files; --overwrite's and --auto-resume's
     * removals come after everything that can fail before the first step
     * (the optimizer's memory, the checkpoint resumed from), so that a
     * refused start leaves the earlier run as it was */
    /* every rank can start (its optimizer, its part of --resume): one
     * that cannot ends the job here, before rank 0 removes anything */
    if (ranks && tr_dist_barrier(o.dist, err, sizeof err) < 0) die_collective(&o, err);
    if (!o.plan && o.rank == 0) prepare_out(&o);
    char logpath[4096];
    snprintf(logpath, sizeof logpath, "%s/log.jsonl", o.out);
    if (o.resume && o.rank == 0) trim_log(logpath, st.step);
    FILE *log = o.plan || o.rank ? NULL : fopen(logpath, o.resume ? "a" : "w");
    if (!log && !o.plan && o.rank == 0) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", logpath, strerror(errno));
    /* a reader of the progress lines that went away (| tee killed by the
     * same Ctrl-C, | head) fails the write, never kills the run before
     * its stop checkpoint */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    struct sigaction hup;
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) /* (nohup: left ignored) */
        signal(SIGHUP, on_signal); /* a closed terminal: stop with a checkpoint, as SIGTERM */
    /* the checkpoint resumed from is in --resume's folder until --out has one */
    bus_out = o.plan || o.rank ? NULL : o.resume ? o.resume : o.out;
    bus_checkpoint = o.resume != NULL;
    signal(SIGBUS, on_sigbus);
    if (!o.quiet) {
        tr_mem_stats ms;
        char line[160];
        tr_mem_get_stats(&be->mem, &ms);
        tr_mem_format_line(line, sizeof line, &ms);
        fprintf(stderr, "%s: %s%s, step %ld of %ld: %s config (S=%d), %zu parameters, batch %d x %d masks x %d points, "
                "%s, %s backend, %d threads, %s, %s\n", cli_prog(), o.resume ? "resuming " : "training in ", o.resume ? o.resume : o.out,
                st.step, o.steps, o.config_name, cfg.S, m.n_param_floats, o.batch, o.masks, o.points, o.precision,
                be->name, be->n_threads, o.optim, line);
    }
    double t_last = cli_now(), wait_last = src.wait_seconds ? src.wait_seconds(src.ctx) : 0;
    long since = 0;
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
        if (dp ? stop_all : stop_requested) {
            if (st.step != in_out) save_checkpoint(&o, &m, &opt, &st, &src, NULL, log);
            if (o.rank == 0) cli_warn("interrupted: checkpoint of step %ld written", st.step); /* one line per job */
            rc_exit = 130;
            break;
        }
        /* stages starting after st.step steps: micro-batch (same effective batch), unfreezing */
        if (!o.plan) {
            int want = o.batch;
            for (int k = 0; k < o.n_stage; k++)
                if (st.step >= o.stage_step[k]) want = o.stage_batch[k];
            if (want != cur_batch) {
                if (change_batch(&o, &cfg, &m, &src, be->host_mem, want, err, sizeof err) < 0)
                    die_step(&o, be, &m, &opt, &st, &src, saved, NULL, log, err);
                cur_batch = want, cur_accum = o.batch * o.accum / want;
            }
            /* out of memory for the gradients, activations or optimizer
             * state of an unfrozen group: the steps since the last
             * checkpoint are saved first (the weights and the optimizer's
             * state are those before the unfreezing, which a resume from
             * this step does again) */
            int unfrozen = 0;
            for (int u = 0; u < o.n_unfreeze; u++)
                if (o.unfreeze_step[u] == st.step) {
                    if (tr_model_freeze(&m, o.unfreeze_group[u], 0, err, sizeof err) < 0)
                        die_step(&o, be, &m, &opt, &st, &src, saved, NULL, log, err);
                    unfrozen = 1;
                }
            if (unfrozen && try_sync_trainable(&m, &opt, zero.owned, err, sizeof err) < 0) {
                if (!opt.slot) die_memory(&o, be, err); /* (no update yet: the zero state it dropped, nothing to save) */
                die_step(&o, be, &m, &opt, &st, &src, saved, NULL, log, err);
            }
        }
        tr_loss L;
        int part = zero.owned && dp; /* --zero 1: this rank's part of the gradients [g_lo, g_hi) is summed */
        if (part) zero_grad_parts(&m, o.world, &zero);
        uint64_t pos[2] = {0, 0}; /* where the data stands before the step */
        if (src.position) src.position(src.ctx, &pos[0], &pos[1]);
        int fails = 0, fail_rank = 0, dev_fails = 0;
        int got = step_gradients(&o, &m, &src, cur_accum, lscale, part ? zero.glo : NULL, &L, &sync_s, &stop_all,
                                 &fails, &fail_rank, &dev_fails, err, sizeof err);
        if (got < 0 && fails)
            die_step_ranks(&o, be, &m, &opt, &st, &src, saved, src.position ? pos : NULL, log, fails, fail_rank,
                           dev_fails);
        if (got < 0) die_step(&o, be, &m, &opt, &st, &src, saved, src.position ? pos : NULL, log, err);
        if (got == 0) break;
        long n_valid = L.n_valid;
        double unscale = cur_accum == 1 && !dp ? 1.0 / lscale : n_valid ? 1.0 / ((double)lscale * n_valid) : 0.0;
        size_t g_lo = part ? zero.glo[o.rank] : 0, g_hi = part ? zero.glo[o.rank + 1] : m.n_grad_floats;
        double lr, gnorm;
        double ss = part ? tr_model_scale_grads_part(&m, unscale, g_lo, g_hi) : tr_model_scale_grads(&m, unscale);
        check_device(be); /* a failed GPU step is not an overflow to skip */
        if (part) { /* the parts' sums of squares: the whole gradient's, the same skip and norm on every rank */
            double t0 = cli_now();
            if (tr_dist_sum_d(o.dist, &ss, 1, err, sizeof err) < 0) die_collective(&o, err);
            sync_s += cli_now() - t0;
        }
        int skipped = !isfinite(ss);
        if (skipped) { /* overflow: no update; fp16 halves its loss scale */
            lr = tr_optim_lr(&opt.cfg, opt.t), gnorm = 0;
            if (prec == TR_PREC_FP16 && lscale > 1.0f) lscale /= 2;
            scale_good = 0;
        } else {
            /* ss: the gradient's sum of squares after the unscale, which
             * tr_optim_step would compute again (one pass over it saved) */
            gnorm = tr_optim_step_part(&opt, &m, ss, g_lo, g_hi, &lr);
            if (part && tr_dist_gather_f(o.dist, m.param_mem, zero.lo, err, sizeof err) < 0)
                die_collective(&o, err); /* every rank's updated part, on every rank */
            if (prec == TR_PREC_FP16 && ++scale_good >= o.scale_window) {
                if (lscale < 1e30f) lscale *= 2;
                scale_good = 0;
            }
        }
        if (prec == TR_PREC_FP16) st.loss_scale = lscale, st.scale_good = scale_good;
        st.step++;
        test_hook("step", st.step);
        test_device_hook("step", st.step, o.rank);
        since++;
        if (st.step % o.log_every == 0 || st.step == o.steps) {
            double now = cli_now(), wait = src.wait_seconds ? src.wait_seconds(src.ctx) : 0;
            double dt = now - t_last, ips = dt > 0 ? (double)since * cur_batch * cur_accum * o.world / dt : 0;
            double dw = dt > 0 ? 100 * (wait - wait_last) / dt : 0;
            tr_mem_stats ms;
            char mline[160];
            tr_mem_get_stats(&be->mem, &ms);
            tr_mem_format_line(mline, sizeof mline, &ms);
            char extra[160] = ""; /* fp16: the loss scale after this step; a skipped (overflowed) step */
            if (prec == TR_PREC_FP16) snprintf(extra, sizeof extra, ", \"scale\": %.9g", lscale);
            if (skipped) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"skipped\": true");
            if (dp) /* the share of the step spent summing over the ranks (waits for the slowest included) */
                snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"ranks\": %d, \"sync_pct\": %.1f",
                         o.world, dt > 0 ? 100 * sync_s / dt : 0.0);
            errno = 0;
            char jl[6][32]; /* a loss term that overflowed (fp16; weights grown large): null, valid JSON */
            if (log) fprintf(log, "{\"step\": %ld, \"loss\": %s, \"focal\": %s, \"dice\": %s, \"iou_mse\": %s, "
                    "\"miou\": %s, \"lr\": %.6g, \"grad_norm\": %s, \"images_per_s\": %.3f, \"data_wait_pct\": %.1f, "
                    "\"mem_allocated\": %" PRIu64 ", \"mem_peak\": %" PRIu64 ", \"mem_reserved\": %" PRIu64
                    ", \"mem_sys_allocs\": %" PRIu64 ", \"step_s\": %.4f%s}\n",
                    st.step, json_num(jl[0], L.loss, 6, 0), json_num(jl[1], L.focal, 6, 0),
                    json_num(jl[2], L.dice, 6, 0), json_num(jl[3], L.iou_mse, 6, 0), json_num(jl[4], L.miou, 4, 1),
                    lr, json_num(jl[5], gnorm, 6, 0), ips, dw, ms.total, ms.total_peak, ms.reserved, ms.n_sys_allocs,
                    since ? dt / since : 0.0, extra);
            if (log) {
                test_log_hook(log, st.step);
                if (fflush(log) != 0 || ferror(log)) log = log_failed(log, logpath, st.step, &log_bad);
            }
            if (!o.quiet)
                fprintf(stderr, "step %ld/%ld  loss %.4f (focal %.4f dice %.4f iou %.4f)  mIoU %.3f  lr %.2e  "
                        "%.2f img/s  data %.0f%%  %s\n",
                        st.step, o.steps, L.loss, L.focal, L.dice, L.iou_mse, L.miou, lr, ips, dw, mline);
            t_last = now, wait_last = wait, since = 0, sync_s = 0;
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
    char msg[200];
    static char after[4400];
    snprintf(msg, sizeof msg, "interrupted after the training%s: checkpoint of step %ld written",
             o.val ? " (--val not evaluated)" : "", st.step);
    snprintf(after, sizeof after, "%s: %s\n", cli_prog(), msg);
    /* rank 0 alone: another rank is done here while rank 0 may still be
     * writing the last checkpoint, and its exit would end the job (the
     * launcher kills the ranks left) with that checkpoint half-written; it
     * waits for rank 0 at the job's end, where a first signal is kept */
    if (!o.plan && o.rank == 0) stop_line = after;
    /* a shard truncated from now on (--val's in its evaluation, or the
     * loader's read-ahead of --data) loses nothing of the training */
    static char bus_after[4400];
    snprintf(bus_after, sizeof bus_after, "%s: a shard was truncated or could not be read while it was read (SIGBUS) "
             "after the training%s: checkpoint of step %ld written\n", cli_prog(), o.val ? " (--val not evaluated)" : "",
             st.step);
    if (!o.plan && o.rank == 0) bus_line = bus_after;
    if (!o.plan && rc_exit == 0 && o.val && (stop_all || stop_requested)) { /* (this rank's: also one after the last sum) */
        if (o.rank == 0) cli_warn("%s", msg);
        rc_exit = 130;
    }
    if (log && fclose(log) != 0) log_failed(NULL, logpath, st.step, &log_bad);
    if (log_bad && rc_exit == 0) rc_exit = CLI_EXIT_FATAL; /* the checkpoints are written; the log is not whole */
    src.close(src.ctx);
    if (o.memory_report) {
        tr_mem_stats ms;
        tr_mem_get_stats(&be->mem, &ms);
        if (o.world > 1) fprintf(stderr, "memory report (training, %s backend, rank %d of %d):\n", be->name, o.rank, o.world);
        else fprintf(stderr, "memory report (training, %s backend):\n", be->name);
        tr_mem_report(stderr, &ms);
    }
    /* its memory for the evaluation of --val (under --memory-limit at the
     * planner's peak, that evaluation did not fit beside it) */
    tr_optim_free(&opt, &m);
    if (o.val && !o.plan) tr_mem_empty_cache(&be->mem);
    if (o.val && rc_exit == 0 && !o.plan && o.rank == 0) {
        test_hook("val", st.step);
        evaluate_val(&o, be, &cfg, &m); /* (frees m) */
        test_hook("evaluated", st.step);
    } else {
        tr_model_free(&m);
    }
    free(zero.owned), free(zero.lo);
    return rc_exit;
}
