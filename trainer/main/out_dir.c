/*
 * out_dir.c - sa1b-train's output folder: refused when it holds another
 * run (or --dump-step's, --export's outputs would replace its files),
 * locked for the run, emptied with --overwrite; --auto-resume's choice
 * (the checkpoint a resume starts from: train_save.c's choose_checkpoint).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "train.h"

/* The one checkpoint that a run killed in its first leaves in out, with
 * no latest (tr_run_dir_one_checkpoint): its step, and *whole when it has
 * every file its job writes (model-N and state-N.bin, and with --zero 1
 * under W > 1 processes, as the record in any of its state files says,
 * each part state-N.rR.bin, 0 < R < W), so that a resume can read it.
 * -1 when there is none, a model file alone (no record:
 * tr_run_dir_killed_start's case), or one not whole but of another job
 * than such a --zero 1 one.  The records are read from the files' headers
 * alone. */
static long first_checkpoint(const char *out, int *whole)
{
    char path[4200], v[32];
    struct stat st;
    int model, state;
    long part, step = tr_run_dir_one_checkpoint(out, &model, &state, &part);
    if (step < 0 || (!state && part < 0)) return -1;
    if (state) snprintf(path, sizeof path, "%s/state-%ld.bin", out, step);
    else snprintf(path, sizeof path, "%s/state-%ld.r%ld.bin", out, step, part);
    long world = tr_st_peek_meta(path, "run.world", v, sizeof v) ? atol(v) : 1;
    int parts = tr_st_peek_meta(path, "run.zero", v, sizeof v) && atoi(v) != 0 && world >= 2 && world <= 65536;
    *whole = model && state;
    for (long r = 1; *whole && parts && r < world; r++) {
        snprintf(path, sizeof path, "%s/state-%ld.r%ld.bin", out, step, r);
        *whole = lstat(path, &st) == 0;
    }
    return *whole || parts ? step : -1;
}

/* The first checkpoint of a --zero 1 job that a kill cut between its
 * ranks' writes (each rank writes its part of the optimizer state as rank
 * 0 writes the model and state-N.bin; latest comes after all): the step of
 * the checkpoint of first_checkpoint that is not whole.  No resume could
 * read it, and no earlier checkpoint exists: what a run killed before its
 * first checkpoint leaves.  -1 otherwise. */
static long cut_first_checkpoint(const char *out)
{
    int whole;
    long step = first_checkpoint(out, &whole);
    return step >= 0 && !whole ? step : -1;
}

/* --auto-resume: --resume OUT when OUT has a checkpoint (OUT/latest: its
 * --init dropped, the run has its weights), else a new run that clears a
 * run without one (killed before its first checkpoint) from OUT.  Decided
 * again by the parse of restore_run, which finds the same. */
void auto_resume(options *o)
{
    if (o->resume || o->overwrite || o->plan || o->eval_only || o->dump_step)
        cli_usage_error("--auto-resume continues or starts the training run in --out: not with --resume, --overwrite, "
                        "--plan, --eval-only or --dump-step");
    if (!o->out) cli_usage_error("--auto-resume needs --out DIR");
    char latest[4200];
    struct stat st;
    snprintf(latest, sizeof latest, "%s/latest", o->out);
    int whole = 0; /* (not whole: a new run replaces it) */
    long unnamed = first_checkpoint(o->out, &whole);
    if (unnamed >= 0 && whole) { /* a run killed between its checkpoint and latest: latest names it now */
        if (tr_run_write_latest(o->out, unnamed, 1) < 0) /* (every rank of a job at once) */
            cli_die(CLI_EXIT_FATAL, "cannot write '%s': %s", latest, strerror(errno));
        if (tr_dist_env_rank() == 0) /* (every rank of a job does the same: one line) */
            cli_warn("output folder '%s' holds the checkpoint of step %ld that 'latest' did not name yet (a run "
                     "killed as it wrote it): 'latest' names it now", o->out, unnamed);
    }
    if (lstat(latest, &st) == 0) {
        o->resume = o->out;
        o->init = NULL;
        o->auto_fresh = 0;
    } else if (errno == ENOENT || errno == ENOTDIR) {
        o->auto_fresh = 1;
    } else {
        cli_die(CLI_EXIT_FATAL, "cannot read '%s': %s", latest, strerror(errno));
    }
}
/* ---- the output folder (issue 19) ---------------------------------------- */

int same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return strcmp(a, b) == 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* --dump-step FILE: an existing regular FILE is replaced only with
 * --overwrite and only when it is an earlier step dump (never a shard, a
 * checkpoint or any other input); a FIFO or a device is written in place. */
static void check_dump_out(const options *o)
{
    struct stat st;
    char fmt[64];
    if (stat(o->dump_step, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (!o->overwrite)
        cli_die(CLI_EXIT_USAGE, "--dump-step: '%s' exists: give another file, or --overwrite to replace an earlier dump",
                o->dump_step);
    if (!tr_st_peek_meta(o->dump_step, "format", fmt, sizeof fmt) || strcmp(fmt, TR_CKPT_FORMAT_DUMP) != 0)
        cli_die(CLI_EXIT_USAGE, "--dump-step: '%s' exists and is not a step dump: not replaced, even with --overwrite",
                o->dump_step);
}

static int take_lock(const char *dir, const char *what, long *holder);

/* cli_die on rank 0 of an mpirun job; the other ranks, which find the
 * same in the folder they share, end without a word (one line a job). */
#define out_die(o, code, ...)                                                                                           \
    do {                                                                                                                \
        if ((o)->job->rank == 0) cli_die(code, __VA_ARGS__);                                                                 \
        exit(code);                                                                                                     \
    } while (0)

/* Exit 2 when --out holds a run that this training run would start over:
 * it neither resumes that folder nor has --overwrite. */
static void refuse_run_in_out(const options *o)
{
    if (o->plan || o->dump_step || o->eval_only || !o->out) return;
    char latest[4200];
    struct stat st;
    snprintf(latest, sizeof latest, "%s/latest", o->out);
    if (o->auto_fresh) { /* the log of a run killed before its first checkpoint is replaced; nothing else */
        if (lstat(latest, &st) == 0)
            out_die(o, CLI_EXIT_USAGE, "output folder '%s' has a checkpoint now (a run wrote it since this one looked): "
                    "run the command again to continue it", o->out);
        char what[300];
        int k = tr_run_dir_killed_start(o->out, cut_first_checkpoint(o->out), what, sizeof what);
        if (k < 0) out_die(o, CLI_EXIT_FATAL, "output folder '%s': %s", o->out, what);
        if (!k) {
            long pid;
            if (o->job->rank == 0 && !o->job->out_locked && !take_lock(o->out, "output folder", &pid) &&
                errno == EWOULDBLOCK) {
                /* (a run writing there now: its first checkpoint, not a stray file) */
                char who[64] = "";
                if (pid) snprintf(who, sizeof who, " (process %ld)", pid);
                out_die(o, CLI_EXIT_USAGE, "output folder '%s' is in use by another sa1b-train run%s: wait for it to "
                        "end", o->out, who);
            }
            out_die(o, CLI_EXIT_USAGE, "output folder '%s' has no checkpoint to continue (no 'latest') but holds %s, "
                    "which --auto-resume never replaces (only the log of a run killed before its first checkpoint): "
                    "move it away, or give another --out", o->out, what);
        }
        return;
    }
    if (o->overwrite) return;
    if (o->resume && same_dir(o->out, o->resume)) return;
    char what[300];
    int held = tr_run_dir_holds_run(o->out, what, sizeof what);
    if (held < 0) out_die(o, CLI_EXIT_FATAL, "cannot read output folder '%s': %s", o->out, what);
    if (held && lstat(latest, &st) != 0) { /* (killed before its first checkpoint): --resume of it cannot work */
        if (o->resume) /* (--overwrite is not for a resume) */
            out_die(o, CLI_EXIT_USAGE, "output folder '%s' holds %s but no checkpoint to continue: remove them, or "
                    "give another --out", o->out, what);
        out_die(o, CLI_EXIT_USAGE, "output folder '%s' holds %s but no checkpoint to continue: start afresh with "
                "--overwrite (removes them)", o->out, what);
    }
    if (held)
        out_die(o, CLI_EXIT_USAGE, "output folder '%s' holds %s: continue it with --resume %s, or start afresh with "
                "--overwrite (removes its log and checkpoints)", o->out, what, o->out);
}

/* Exit 2 when dir holds the overlays of an earlier --export. */
static void refuse_overlays(const char *dir)
{
    long n = tr_run_dir_overlays(dir, 0);
    if (n > 0)
        cli_die(CLI_EXIT_USAGE, "'%s' holds %ld overlays of an earlier --export: give another --out, or "
                "--overwrite to replace them", dir, n);
}

/* Before anything is touched: a training run never starts over a run in
 * --out unless it resumes that run or --overwrite says to start afresh. */
void check_out(const options *o)
{
    if (o->overwrite && o->resume) cli_usage_error("--overwrite starts a run afresh: not with --resume");
    if (o->overwrite && (o->plan || (o->eval_only && !o->export_n)))
        cli_usage_error("--overwrite applies to a training run, --dump-step or --export: not with --plan or --eval-only "
                        "alone");
    if (o->eval_only && o->export_n && !o->overwrite) { /* never two exports' overlays mixed in one folder */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/export", o->out);
        refuse_overlays(dir);
    }
    if (o->dump_step && !o->plan && !o->eval_only) check_dump_out(o);
    if (o->plan || o->dump_step || o->eval_only || !o->out) return;
    char name[256];
    if ((o->overwrite || o->auto_fresh) && o->init && tr_run_dir_has_file(o->out, o->init, name, sizeof name))
        out_die(o, CLI_EXIT_USAGE, "--init '%s' is %s of the run in '%s', which %s removes: copy it out of the "
                "folder first", o->init, name, o->out,
                o->overwrite ? "--overwrite" : "--auto-resume (no checkpoint there: a new run)");
    if (o->overwrite) return;
    if (o->resume && same_dir(o->out, o->resume)) return;
    struct stat st;
    char parent[4096];
    size_t len = strlen(o->out);
    while (len > 1 && o->out[len - 1] == '/') len--; /* "runs/a/" is the folder a of runs */
    snprintf(parent, sizeof parent, "%.*s", (int)len, o->out);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = 0;
    if (stat(o->out, &st) != 0 && slash && slash != parent && (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)))
        out_die(o, CLI_EXIT_FATAL, "output folder '%s' does not exist (--out %s is created in it)", parent, o->out);
    refuse_run_in_out(o);
}

/* The process holding the flock(2) lock of the file st names, from
 * /proc/locks (Linux); 0 when unknown. */
static long lock_holder(const struct stat *st)
{
    FILE *f = fopen("/proc/locks", "r");
    if (!f) return 0;
    char line[256];
    long pid = 0;
    while (!pid && fgets(line, sizeof line, f)) {
        long p;
        unsigned maj, min;
        unsigned long ino;
        if (sscanf(line, "%*d: FLOCK %*s WRITE %ld %x:%x:%lu", &p, &maj, &min, &ino) == 4 && ino == st->st_ino &&
            maj == major(st->st_dev) && min == minor(st->st_dev))
            pid = p;
    }
    fclose(f);
    return pid;
}

/* Takes the flock(2) lock of the file TR_RUN_LOCK in dir (what: "output
 * folder", "export folder"), held until the process ends: 1, or 0 with
 * errno when it cannot be locked (another process holds it: EWOULDBLOCK
 * and *holder its process id, 0 when unknown).  The file is opened
 * read-only: flock needs no write access, and in a folder shared by a
 * group the lock file is the user's who made it (its mode 0644).  One that
 * is not there and cannot be created ends the process in one line. */
static int take_lock(const char *dir, const char *what, long *holder)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, TR_RUN_LOCK);
    *holder = 0;
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666), e = errno;
    if (fd < 0 && (e != EACCES || access(path, F_OK) != 0)) /* (not there, and cannot be created) */
        cli_die(CLI_EXIT_FATAL, "cannot create '%s' (the lock of the %s): %s", path, what, strerror(e));
    if (fd < 0) return errno = e, 0;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 1; /* (fd left open) */
    e = errno;
    struct stat st;
    if (e == EWOULDBLOCK && fstat(fd, &st) == 0) *holder = lock_holder(&st);
    close(fd);
    return errno = e, 0;
}

void lock_out(const options *o, int created)
{
    if (o->job->out_locked || !o->out) return;
    struct stat st;
    if (stat(o->out, &st) != 0 && errno == ENOENT && !created) return; /* prepare_out creates it, then locks it */
    /* a file of its own, not the folder: other tools (sa1b-shard's commit)
     * lock folders they write into, and must not wait on a training run */
    long pid;
    int held = take_lock(o->out, "output folder", &pid);
    o->job->out_locked = 1;
    if (held) {
        o->job->out_lock_held = 1;
        /* again under the lock: a run that started in the folder after
         * check_out looked (two runs into one new folder) and ended before
         * the lock was taken left a run there, which is never started over */
        refuse_run_in_out(o);
        return;
    }
    if (errno == EWOULDBLOCK) {
        char who[64] = "";
        if (pid) snprintf(who, sizeof who, " (process %ld)", pid);
        cli_die(CLI_EXIT_USAGE, "output folder '%s' is in use by another sa1b-train run%s: wait for it to end", o->out,
                who);
    }
    cli_warn("cannot lock output folder '%s': %s (a second run in it would not be refused)", o->out, strerror(errno));
}

void lock_export(const options *o, const char *dir)
{
    long pid;
    if (!take_lock(dir, "export folder", &pid)) { /* (one that cannot be locked: as before exports were locked) */
        if (errno == EWOULDBLOCK) {
            char who[64] = "";
            if (pid) snprintf(who, sizeof who, " (process %ld)", pid);
            cli_die(CLI_EXIT_USAGE, "'%s' is in use by another --export%s: wait for it to end, or give another --out",
                    dir, who);
        }
        cli_warn("cannot lock '%s': %s (a second export into it would not be refused)", dir, strerror(errno));
    }
    /* again under the lock: two exports started together had each found
     * the folder without overlays */
    if (!o->overwrite) refuse_overlays(dir);
    else if (tr_run_dir_overlays(dir, 1) < 0) /* (an earlier export's: check_out) */
        cli_die(CLI_EXIT_FATAL, "--overwrite: cannot remove the overlays in '%s': %s", dir, strerror(errno));
}

/* Creates --out, or with --overwrite empties it of the earlier run's files. */
void prepare_out(const options *o)
{
    char err[4400];
    if (mkdir(o->out, 0777) != 0 && errno != EEXIST) cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", o->out, strerror(errno));
    lock_out(o, 1); /* (before anything in it is removed or written) */
    if (o->auto_fresh) {
        /* what a run killed before its first checkpoint left, and nothing
         * more (checked again now: the folder's files may have changed
         * since lock_out looked), and only under the lock */
        refuse_run_in_out(o);
        char what[300], log[4200];
        int held = tr_run_dir_holds_run(o->out, what, sizeof what);
        if (held < 0) cli_die(CLI_EXIT_FATAL, "cannot read output folder '%s': %s", o->out, what);
        if (held && !o->job->out_lock_held)
            cli_die(CLI_EXIT_FATAL, "output folder '%s' could not be locked: --auto-resume replaces no file there "
                    "without its lock", o->out);
        snprintf(log, sizeof log, "%s/log.jsonl", o->out);
        struct stat st;
        long cut = cut_first_checkpoint(o->out);
        if (cut >= 0) /* (with --quiet too: files go) */
            cli_warn("output folder '%s' holds a run killed as it wrote its first checkpoint (that of step %ld "
                     "lacks a file of a rank's; no resume can read it): a new run (--auto-resume) replaces it",
                     o->out, cut);
        else if (lstat(log, &st) == 0)
            cli_warn("output folder '%s' holds the log of a run killed before its first checkpoint: a new run "
                     "(--auto-resume) replaces it", o->out);
        /* (just checked, under the lock: its log, temporaries, and the
         * files of a first checkpoint cut before its state, or before a
         * rank's part of it) */
        if (held && tr_run_dir_clear(o->out, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--auto-resume: %s", err);
    } else if (o->overwrite) {
        if (tr_run_dir_clear(o->out, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--overwrite: %s", err);
    } else if (o->job->out_lock_held && tr_run_dir_remove_temps(o->out, err, sizeof err) < 0) {
        /* with the lock, no other run writes here: a temporary is a killed
         * run's (--overwrite's clear took them with the rest) */
        cli_warn("%s", err);
    }
}

