/*
 * dist.h - data parallelism: the processes of one training job (ranks) and
 * the collectives the trainer needs (sums of gradients and of loss terms,
 * the reduce-scatter and gather of ZeRO stage 1, a barrier), over MPI when
 * the program was started by mpirun (Open MPI's or MPICH's launcher) and
 * built with MPI, else one process alone.
 *
 * A collective that does not complete within the timeout (a rank died or
 * hangs) ends the whole job: a watchdog thread reports the rank and the
 * collective in one line and exits the process, which makes the launcher
 * end the others, so a job never hangs silently.  On the device (NCCL) the
 * rank that waits polls the collective and its asynchronous errors itself
 * and aborts the communicator (ncclCommAbort) before it ends the job with
 * the same line.
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
/* This rank's index among the job's ranks on its machine (0 alone). */
int tr_dist_local_rank(const tr_dist *d);
/* This process's rank as its launcher's environment says it, before
 * tr_dist_open (0 when not launched by one). */
int tr_dist_env_rank(void);
/* 1 when the job was started by an MPI launcher (also with one rank). */
int tr_dist_launched(const tr_dist *d);

/* Every rank learns whether one failed (failed != 0 on it): 0 when none
 * did, else -1 with, in err, mine (the message of this rank's failure) on
 * the lowest failing rank and "" on every other, so that a job whose ranks
 * all fail the same way reports it in one line.  A collective. */
int tr_dist_settle(tr_dist *d, int failed, const char *mine, char *err, size_t err_len);

/* From now on the float sums, the loss sums, the reduce-scatter and the
 * gather run over NCCL on the stream of be, a CUDA backend, with
 * tr_dist_sum_f's, tr_dist_reduce_scatter_f's and tr_dist_gather_f's
 * buffers in its device memory (tr_dist_sum_d's stay on
 * the host): a communicator made from the unique id that rank 0
 * broadcasts over MPI.  In a job of one rank too (the same calls, each a
 * copy).  A collective; 0, or -1 as tr_dist_settle (NCCL not built or not
 * loadable, the communicator failed). */
struct tr_backend;
int tr_dist_use_device(tr_dist *d, struct tr_backend *be, char *err, size_t err_len);
/* 1 after tr_dist_use_device succeeded. */
int tr_dist_on_device(const tr_dist *d);

/* In place: buf[n] = the sum over ranks (every rank gets the same bits).
 * 0, or -1 with err.  A collective that times out ends the job (above). */
int tr_dist_sum_f(tr_dist *d, float *buf, size_t n, char *err, size_t err_len);
int tr_dist_sum_d(tr_dist *d, double *buf, size_t n, char *err, size_t err_len);
/* In place: floats [lo[rank], lo[rank+1]) of buf = their sum over ranks
 * (lo has world + 1 ascending entries, the same on every rank), the ranks'
 * parts of the reduce-scatter of ZeRO stage 1: each rank receives the sum
 * of its own part only, so that a reduce-scatter and the gather below move
 * the bytes of one all-reduce.  The rest of [lo[0], lo[world]) is left
 * undefined (the device's collectives work in it); the floats outside it
 * are not touched.  One rank alone: nothing to do (off the device).  0, or
 * -1 with err; a collective that times out ends the job (above). */
int tr_dist_reduce_scatter_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len);
/* In place: rank r's part of buf, floats [lo[r], lo[r+1]), on every rank
 * (lo has world + 1 ascending entries).  0, or -1 with err. */
int tr_dist_gather_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len);
/* Every rank here before any goes on.  0, or -1 with err. */
int tr_dist_barrier(tr_dist *d, char *err, size_t err_len);

/* Ends every process of the job with status code, now (a failure one rank
 * saw that the others cannot finish without). */
_Noreturn void tr_dist_abort(tr_dist *d, int code);

#endif
