/*
 * ranks.c - sa1b-train under mpirun: the ranks agree on a failure, on
 * their data and on the run, and split the optimizer state (--zero 1).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sa1b_shard.h" /* sa1b_crc32c */
#include "train.h"

void die_alike(int report, int code, const char *fmt, ...)
{
    char msg[4600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (report) cli_die(code, "%s", msg);
    /* the other ranks leave rank 0 the time to say it: one of them ending
     * first could take rank 0 down before its line is out (seen once in
     * CI); rank 0's end ends them */
    sleep(10);
    exit(code);
}

/* A collective that failed on this rank (the others wait for it): the line
 * and the end of the job. */
_Noreturn void die_collective(const options *o, const char *err)
{
    cli_warn("rank %d: %s", o->job->rank, err);
    tr_dist_abort(o->job->dist, CLI_EXIT_FATAL);
}

/* The line of a failure to start the backend: "[rank R of N: ]--backend NAME: why". */
void rank_line(char *line, size_t n, const options *o, const char *why)
{
    int k = o->job->world > 1 ? snprintf(line, n, "rank %d of %d: ", o->job->rank, o->job->world) : 0;
    snprintf(line + k, n - (size_t)k, "--backend %s: %s", o->backend, why);
}

/* A failure every rank knows of (tr_dist_settle): the one line (msg, ""
 * on the ranks that stay silent) and the end of every rank. */
_Noreturn void die_ranks(tr_dist *dist, tr_backend *be, const char *msg)
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
void same_data(const options *o, tr_data_source *src, const char *failed, tr_backend *be)
{
    char err[1200], mine[1200] = "";
    if (*failed) snprintf(mine, sizeof mine, "rank %d of %d: %s", o->job->rank, o->job->world, failed);
    if (tr_dist_settle(o->job->dist, *failed != 0, mine, err, sizeof err) < 0) {
        if (!*failed) tr_source_close(src); /* (its loader's threads stopped: nothing in flight at the exit) */
        die_ranks(o->job->dist, be, err);
    }
    char id[128] = "";
    tr_source_identity(src, id, sizeof id); /* "N shards, M images, digest D" */
    unsigned long long n = 0, images = 0;
    if (sscanf(id, "%llu shards, %llu images", &n, &images) != 2) n = images = 0;
    uint32_t h = sa1b_crc32c(0, id, strlen(id));
    double v[3] = {o->job->rank == 0 ? (double)h : 0.0, o->job->rank == 0 ? (double)n : 0.0, o->job->rank == 0 ? (double)images : 0.0};
    if (tr_dist_sum_d(o->job->dist, v, 3, err, sizeof err) < 0) {
        tr_source_close(src);
        die_ranks(o->job->dist, be, o->job->rank == 0 ? err : "");
    }
    const char *how = v[1] == (double)n && v[2] == (double)images ? " (other shards of as many images)" : "";
    snprintf(mine, sizeof mine, "rank %d of %d reads other shards than rank 0 under --data '%s': rank 0 %.0f "
             "shard%s of %.0f images, rank %d %llu of %llu%s (every rank must read the same files: on a file system "
             "they share, by a pattern that does not depend on the working directory)", o->job->rank, o->job->world, o->data,
             v[1], v[1] == 1 ? "" : "s", v[2], o->job->rank, n, images, how);
    if (tr_dist_settle(o->job->dist, v[0] != (double)h, mine, err, sizeof err) < 0) {
        tr_source_close(src);
        die_ranks(o->job->dist, be, err);
    }
}

/* Data parallel: sums over the ranks (more than one, or on the device
 * under mpirun: the same path with one rank). */
int data_parallel(const options *o)
{
    return !o->plan && (o->job->world > 1 || tr_dist_on_device(o->job->dist));
}


void zero_split(const tr_model *m, int rank, int world, zero_part *z)
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
void zero_grad_parts(const tr_model *m, int world, zero_part *z)
{
    for (int r = 0; r <= world; r++) z->glo[r] = z->lo[r] > m->grad_lo ? z->lo[r] - m->grad_lo : 0;
}

/* Every rank starts the run that rank 0 does (a new one or the same step,
 * with the same record: settings, data): a rank that sees another --out (a
 * folder not shared, a stale cache) or was given other options would
 * otherwise train on from other weights, or (--auto-resume) from scratch,
 * and its gradients go into rank 0's checkpoints.  Rank 0's step and
 * record digest reach every rank (a sum to which rank 0 alone adds), and
 * the lowest rank that differs says so. */
void same_run(const options *o, tr_backend *be)
{
    char err[512], mine[700];
    int rank = o->job->rank, world = o->job->world;
    tr_dist *dist = o->job->dist;
    long step = o->resume ? o->job->resume_step : -1;
    uint32_t h = o->job->record ? sa1b_crc32c(0, o->job->record, strlen(o->job->record)) : 0; /* the run record's digest */
    double v[2] = {rank == 0 ? (double)step : 0.0, rank == 0 ? (double)h : 0.0};
    if (tr_dist_sum_d(dist, v, 2, err, sizeof err) < 0) die_ranks(dist, be, rank == 0 ? err : "");
    int differs = v[0] != (double)step || v[1] != (double)h;
    char r0[64], me[64];
    snprintf(r0, sizeof r0, v[0] < 0 ? "starts a new run" : "continues from step %.0f", v[0]);
    snprintf(me, sizeof me, step < 0 ? "starts a new one" : "continues from step %ld", step);
    if (v[0] == (double)step) snprintf(me, sizeof me, "%s, with other settings", step < 0 ? "starts one too" : "too");
    snprintf(mine, sizeof mine, "rank %d of %d does not see the run that rank 0 does: rank 0 %s, rank %d %s in '%s' "
             "(every rank must see --out, on a file system they share, and be given the same options)",
             rank, world, r0, rank, me, o->out);
    if (tr_dist_settle(dist, differs, mine, err, sizeof err) < 0) die_ranks(dist, be, err);
}
