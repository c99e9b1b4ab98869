/*
 * dist.h - data parallelism: the processes of one training job (ranks) and
 * the collectives the trainer needs (sums of gradients and of loss terms,
 * a broadcast), over MPI when the program was started by mpirun (Open
 * MPI's or MPICH's launcher) and built with MPI, else one process alone.
 *
 * A collective that does not complete within the timeout (a rank died or
 * hangs) ends the whole job: a watchdog thread reports the rank and the
 * collective in one line and exits the process, which makes the launcher
 * end the others, so a job never hangs silently.
 */
#ifndef SA1B_TRAINER_DIST_H
#define SA1B_TRAINER_DIST_H

#include <stddef.h>

typedef struct tr_dist tr_dist;

/* Joins the job: MPI when launched by mpirun and built with it (rank,
 * world from MPI), else rank 0 of 1.  timeout_s > 0 bounds every
 * collective.  NULL with err on a failure. */
tr_dist *tr_dist_open(int *argc, char ***argv, double timeout_s, char *err, size_t err_len);
/* Leaves the job (MPI_Finalize). */
void tr_dist_close(tr_dist *d);

int tr_dist_rank(const tr_dist *d);
int tr_dist_world(const tr_dist *d);

/* In place: buf[n] = the sum over ranks (every rank gets the same bits).
 * 0, or -1 with err. */
int tr_dist_sum_f(tr_dist *d, float *buf, size_t n, char *err, size_t err_len);
int tr_dist_sum_d(tr_dist *d, double *buf, size_t n, char *err, size_t err_len);
/* In place: rank r's part of buf, floats [lo[r], lo[r+1]), on every rank
 * (lo has world + 1 ascending entries).  0, or -1 with err. */
int tr_dist_gather_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len);
/* Every rank here before any goes on.  0, or -1 with err. */
int tr_dist_barrier(tr_dist *d, char *err, size_t err_len);

/* Ends every process of the job with status code, now (a failure one rank
 * saw that the others cannot finish without). */
_Noreturn void tr_dist_abort(tr_dist *d, int code);

#endif
