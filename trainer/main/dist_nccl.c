/*
 * dist_nccl.c - NCCL collectives on the CUDA backend's stream (dist_nccl.h).
 */
#include "dist_nccl.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/backend_cuda.h"

_Static_assert(sizeof(ncclUniqueId) == TR_NCCL_ID_BYTES, "ncclUniqueId is 128 bytes");

/* the host doubles tr_nccl_sum_host_d takes at most */
#define HOST_D_MAX 16

struct tr_nccl {
    void *lib;
    cudaStream_t st;
    ncclComm_t comm;
    int rank;
    double *dev_d; /* [HOST_D_MAX] on the device: the host sums' buffer */
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                   cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*get_error_string)(ncclResult_t);
    const char *(*get_last_error)(ncclComm_t);
};

tr_nccl *tr_nccl_load(tr_backend *be, char *err, size_t err_len)
{
    void *st = tr_backend_cuda_stream(be);
    if (!st) return snprintf(err, err_len, "NCCL needs the cuda backend"), NULL;
    tr_nccl *n = calloc(1, sizeof *n);
    if (!n) return snprintf(err, err_len, "out of memory"), NULL;
    n->st = (cudaStream_t)st;
    const char *names[] = {
#ifdef SA1B_CUDA_LIBDIR
        SA1B_CUDA_LIBDIR "/libnccl.so.2",
#endif
        "libnccl.so.2"};
    for (size_t i = 0; i < sizeof names / sizeof *names && !n->lib; i++) n->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        snprintf(err, err_len, "cannot load NCCL: %s", dlerror());
        free(n);
        return NULL;
    }
    const char *missing = NULL;
    /* POSIX: a function pointer read from dlsym's void * through memcpy */
#define SYM_(field, name)                                                                       \
    do {                                                                                        \
        void *p_ = dlsym(n->lib, name);                                                         \
        if (!p_ && !missing) missing = name;                                                    \
        memcpy(&n->field, &p_, sizeof p_);                                                      \
    } while (0)
    SYM_(get_unique_id, "ncclGetUniqueId");
    SYM_(comm_init_rank, "ncclCommInitRank");
    SYM_(comm_destroy, "ncclCommDestroy");
    SYM_(comm_abort, "ncclCommAbort");
    SYM_(comm_get_async_error, "ncclCommGetAsyncError");
    SYM_(all_reduce, "ncclAllReduce");
    SYM_(broadcast, "ncclBroadcast");
    SYM_(reduce, "ncclReduce");
    SYM_(reduce_scatter, "ncclReduceScatter");
    SYM_(send, "ncclSend");
    SYM_(recv, "ncclRecv");
    SYM_(group_start, "ncclGroupStart");
    SYM_(group_end, "ncclGroupEnd");
    SYM_(get_error_string, "ncclGetErrorString");
    SYM_(get_last_error, "ncclGetLastError");
#undef SYM_
    /* (here, not in tr_nccl_join: a rank that fails there leaves the others
     * waiting for it until the timeout) */
    cudaError_t e = missing ? cudaSuccess : cudaMalloc((void **)&n->dev_d, HOST_D_MAX * sizeof(double));
    if (missing || e != cudaSuccess) {
        if (missing) snprintf(err, err_len, "NCCL has no %s (NCCL 2.13 or later is needed)", missing);
        else snprintf(err, err_len, "cudaMalloc: %s", cudaGetErrorString(e));
        dlclose(n->lib);
        free(n);
        return NULL;
    }
    return n;
}

/* -1 with NCCL's words for rc (and its last error's detail) in err */
static int nccl_fail(tr_nccl *n, ncclResult_t rc, const char *call, char *err, size_t err_len)
{
    const char *last = n->get_last_error(n->comm);
    snprintf(err, err_len, "%s: %s%s%s", call, n->get_error_string(rc), last && *last ? ": " : "", last ? last : "");
    return -1;
}

int tr_nccl_unique_id(tr_nccl *n, unsigned char id[TR_NCCL_ID_BYTES], char *err, size_t err_len)
{
    ncclUniqueId u;
    ncclResult_t rc = n->get_unique_id(&u);
    if (rc != ncclSuccess) return nccl_fail(n, rc, "ncclGetUniqueId", err, err_len);
    memcpy(id, &u, sizeof u);
    return 0;
}

int tr_nccl_join(tr_nccl *n, const unsigned char id[TR_NCCL_ID_BYTES], int rank, int world, char *err,
                 size_t err_len)
{
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t rc = n->comm_init_rank(&n->comm, world, u, rank);
    n->rank = rank;
    if (rc != ncclSuccess) {
        n->comm = NULL;
        return nccl_fail(n, rc, "ncclCommInitRank", err, err_len);
    }
    return 0;
}

void tr_nccl_close(tr_nccl *n)
{
    if (!n) return;
    if (n->comm) n->comm_destroy(n->comm);
    if (n->dev_d) cudaFree(n->dev_d);
    dlclose(n->lib);
    free(n);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Waits for what the stream holds (the collective just enqueued), polling
 * it and NCCL's asynchronous error; on an error or past timeout_s the
 * communicator is aborted (its kernels stop spinning on the device). */
static int wait_done(tr_nccl *n, const char *call, double timeout_s, char *err, size_t err_len)
{
    double t0 = now_s();
    for (unsigned spin = 0;; spin++) {
        cudaError_t q = cudaStreamQuery(n->st);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) {
            snprintf(err, err_len, "%s: %s", call, cudaGetErrorString(q));
            return -1;
        }
        ncclResult_t ae = ncclSuccess;
        if (n->comm_get_async_error(n->comm, &ae) == ncclSuccess && ae != ncclSuccess && ae != ncclInProgress) {
            nccl_fail(n, ae, call, err, err_len);
            n->comm_abort(n->comm), n->comm = NULL;
            return -1;
        }
        if (timeout_s > 0 && now_s() - t0 > timeout_s) {
            n->comm_abort(n->comm), n->comm = NULL;
            return TR_NCCL_TIMEOUT;
        }
        if (spin > 1000) { /* a short collective is waited for by spinning, a long one by naps */
            struct timespec nap = {0, 50000};
            nanosleep(&nap, NULL);
        }
    }
}

/* after enqueueing: -1 with err, or the wait's result */
static int enqueued(tr_nccl *n, ncclResult_t rc, const char *call, double timeout_s, char *err, size_t err_len)
{
    if (rc != ncclSuccess) return nccl_fail(n, rc, call, err, err_len);
    return wait_done(n, call, timeout_s, err, err_len);
}

int tr_nccl_sum(tr_nccl *n, void *buf, size_t count, int is_double, double timeout_s, char *err, size_t err_len)
{
    if (!n->comm) return snprintf(err, err_len, "the NCCL communicator was aborted"), -1;
    ncclResult_t rc = n->all_reduce(buf, buf, count, is_double ? ncclFloat64 : ncclFloat32, ncclSum, n->comm, n->st);
    return enqueued(n, rc, "ncclAllReduce", timeout_s, err, err_len);
}

int tr_nccl_sum_host_d(tr_nccl *n, double *buf, size_t count, double timeout_s, char *err, size_t err_len)
{
    if (count > HOST_D_MAX) return snprintf(err, err_len, "%zu host sums: at most %d", count, HOST_D_MAX), -1;
    cudaError_t e = cudaMemcpyAsync(n->dev_d, buf, count * sizeof *buf, cudaMemcpyHostToDevice, n->st);
    if (e != cudaSuccess) return snprintf(err, err_len, "cudaMemcpyAsync: %s", cudaGetErrorString(e)), -1;
    int rc = tr_nccl_sum(n, n->dev_d, count, 1, timeout_s, err, err_len);
    if (rc < 0) return rc;
    /* complete: the stream is idle after the wait */
    e = cudaMemcpy(buf, n->dev_d, count * sizeof *buf, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return snprintf(err, err_len, "cudaMemcpy: %s", cudaGetErrorString(e)), -1;
    return 0;
}

int tr_nccl_gather(tr_nccl *n, float *buf, const size_t *lo, int world, double timeout_s, char *err,
                   size_t err_len)
{
    if (!n->comm) return snprintf(err, err_len, "the NCCL communicator was aborted"), -1;
    ncclResult_t rc = n->group_start();
    for (int r = 0; r < world && rc == ncclSuccess; r++)
        rc = n->broadcast(buf + lo[r], buf + lo[r], lo[r + 1] - lo[r], ncclFloat32, r, n->comm, n->st);
    ncclResult_t end = n->group_end(); /* (closes the group whatever happened in it) */
    return enqueued(n, rc != ncclSuccess ? rc : end, "ncclBroadcast", timeout_s, err, err_len);
}

/* [a, b) and [c, d) overlap in [*lo, *hi): 1, or 0 when they do not */
static int overlap(size_t a, size_t b, size_t c, size_t d, size_t *lo, size_t *hi)
{
    *lo = a > c ? a : c, *hi = b < d ? b : d;
    return *lo < *hi;
}

int tr_nccl_reduce_scatter(tr_nccl *n, float *buf, const size_t *lo, int world, double timeout_s, char *err,
                           size_t err_len)
{
    if (!n->comm) return snprintf(err, err_len, "the NCCL communicator was aborted"), -1;
    /* relative to base: the parts P_r = [lo[r], lo[r+1]) - lo[0], NCCL's
     * equal parts E_k = [k c, (k+1) c) and the tail [world c, total) */
    float *base = buf + lo[0];
    size_t total = lo[world] - lo[0], c = total / (size_t)world, a, b;
    ncclResult_t rc = ncclSuccess;
    const char *call = "ncclReduceScatter";
    if (c) /* in place: rank k's sum of E_k lands where E_k is */
        rc = n->reduce_scatter(base, base + (size_t)n->rank * c, c, ncclFloat32, ncclSum, n->comm, n->st);
    if (rc == ncclSuccess) { /* the pieces of P_r in another rank's E_k, from that rank */
        call = "ncclSend/ncclRecv";
        rc = n->group_start();
        for (int k = 0; k < world && rc == ncclSuccess; k++)
            for (int r = 0; r < world && rc == ncclSuccess; r++) {
                if (k == r || !overlap(k * c, (k + 1) * c, lo[r] - lo[0], lo[r + 1] - lo[0], &a, &b)) continue;
                if (n->rank == k) rc = n->send(base + a, b - a, ncclFloat32, r, n->comm, n->st);
                else if (n->rank == r) rc = n->recv(base + a, b - a, ncclFloat32, k, n->comm, n->st);
            }
        ncclResult_t end = n->group_end(); /* (closes the group whatever happened in it) */
        if (rc == ncclSuccess) rc = end;
    }
    if (rc == ncclSuccess) call = "ncclReduce"; /* the pieces of P_r in the tail, reduced to r */
    for (int r = 0; r < world && rc == ncclSuccess; r++)
        if (overlap(world * c, total, lo[r] - lo[0], lo[r + 1] - lo[0], &a, &b))
            rc = n->reduce(base + a, base + a, b - a, ncclFloat32, ncclSum, r, n->comm, n->st);
    return enqueued(n, rc, rc == ncclSuccess ? "ncclReduceScatter" : call, timeout_s, err, err_len);
}
