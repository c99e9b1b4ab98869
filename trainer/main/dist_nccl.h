/*
 * dist_nccl.h - the device collectives of a data-parallel job on the CUDA
 * backend (dist.h): NCCL, loaded with dlopen("libnccl.so.2") when a job
 * first needs it (a run that does not use it never maps its 200 MB), its
 * collectives enqueued on the backend's stream, in order with its ops, on
 * device memory.  Built where configure found nccl.h (HAVE_NCCL); dist.c
 * bootstraps the communicator over MPI: rank 0 makes the unique id, MPI
 * broadcasts it, every rank joins with it.
 *
 * Each collective waits for its completion by polling the stream, and
 * watches for what NCCL reports asynchronously (ncclCommGetAsyncError): a
 * collective that does not complete within the timeout, or an NCCL error,
 * aborts the communicator (ncclCommAbort) so that the device does not
 * spin on, and returns TR_NCCL_TIMEOUT or -1 for dist.c to end the job.
 */
#ifndef SA1B_TRAINER_DIST_NCCL_H
#define SA1B_TRAINER_DIST_NCCL_H

#include <stddef.h>

#include "backend/backend.h"

typedef struct tr_nccl tr_nccl;

/* NCCL's unique id (ncclUniqueId) as bytes: what MPI broadcasts */
#define TR_NCCL_ID_BYTES 128
/* a collective's return when it timed out (the communicator aborted) */
#define TR_NCCL_TIMEOUT (-2)

/* Loads NCCL for be, a CUDA backend (its device, its stream).  NULL with
 * err when the library cannot be loaded or be is not a CUDA backend. */
tr_nccl *tr_nccl_load(tr_backend *be, char *err, size_t err_len);
/* A new unique id (rank 0).  0, or -1 with err. */
int tr_nccl_unique_id(tr_nccl *n, unsigned char id[TR_NCCL_ID_BYTES], char *err, size_t err_len);
/* Joins the communicator of world ranks made from id as rank (blocks until
 * every rank has joined).  0, or -1 with err. */
int tr_nccl_join(tr_nccl *n, const unsigned char id[TR_NCCL_ID_BYTES], int rank, int world, char *err,
                 size_t err_len);
/* Ends the communicator (ncclCommDestroy) and unloads NCCL. */
void tr_nccl_close(tr_nccl *n);

/* In place on the device: buf[count] = the sum over ranks, floats or
 * (is_double) doubles; every rank gets the same bits (NCCL's all-reduce
 * computes each element once and copies it).  timeout_s > 0 bounds the
 * wait.  0, -1 with err, or TR_NCCL_TIMEOUT. */
int tr_nccl_sum(tr_nccl *n, void *buf, size_t count, int is_double, double timeout_s, char *err, size_t err_len);
/* In place on the host: the sum of host doubles buf[count] (count <= 16),
 * through a device buffer.  As tr_nccl_sum. */
int tr_nccl_sum_host_d(tr_nccl *n, double *buf, size_t count, double timeout_s, char *err, size_t err_len);
/* In place on the device: floats [lo[rank], lo[rank+1]) of buf = their sum
 * over ranks, the rest of [lo[0], lo[world]) undefined.  NCCL's
 * reduce-scatter wants equal parts and ours are whole parameters, so it
 * runs on the equal parts of [lo[0], lo[world]) (world of them, c floats
 * each, in place), then each rank sends the pieces of the others' parts
 * that fell in its equal part to their owners (grouped ncclSend/ncclRecv:
 * at most a parameter at each end of a part), and the last floats beyond
 * world * c (fewer than world) are reduced to their owners (ncclReduce):
 * the bytes of one reduce-scatter and a little more, no scratch memory.
 * As tr_nccl_sum. */
int tr_nccl_reduce_scatter(tr_nccl *n, float *buf, const size_t *lo, int world, double timeout_s, char *err,
                           size_t err_len);
/* In place on the device: rank r's part of buf, floats [lo[r], lo[r+1]),
 * on every rank (one broadcast per rank, grouped: NCCL's all-gather wants
 * equal parts).  As tr_nccl_sum. */
int tr_nccl_gather(tr_nccl *n, float *buf, const size_t *lo, int world, double timeout_s, char *err,
                   size_t err_len);

#endif
