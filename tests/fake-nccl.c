/*
 * fake-nccl.c - a stand-in libnccl.so.2 for test-dist-nccl: the entry
 * points dist_nccl.c loads, on host memory (the test's fake CUDA runtime
 * allocates "device" memory with malloc), recording what they were asked
 * and behaving as fake_nccl_ctl() says: an all-reduce multiplies by the
 * ranks it plays (every rank holding the same data), and so do the parts
 * of a reduce-scatter, a reduce and a receive that the rank joined as gets
 * (the peer's sum of the same data), a collective can
 * leave the stream busy for ever (a rank that hangs) or report an
 * asynchronous error.
 */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "fake-nccl.h"

static fake_nccl ctl;
static int the_comm;

/* (nccl.h declares these two without a prototype) */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
fake_nccl *fake_nccl_ctl(void);
fake_nccl *fake_nccl_ctl(void) { return &ctl; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0x5a, sizeof *id);
    ctl.ids++;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    ctl.init_nranks = nranks, ctl.init_rank = rank, ctl.init_id0 = (unsigned char)id.internal[0];
    if (ctl.fail_init) return ncclSystemError;
    *comm = (ncclComm_t)&the_comm;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    ctl.destroyed += comm == (ncclComm_t)&the_comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    ctl.aborted += comm == (ncclComm_t)&the_comm;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *e)
{
    (void)comm;
    *e = ctl.async_error;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)comm;
    ctl.reduces++, ctl.last_count = count, ctl.last_dt = (int)dt, ctl.last_op = (int)op, ctl.last_stream = stream;
    for (size_t i = 0; i < count; i++) {
        if (dt == ncclFloat32) ((float *)recv)[i] = ((const float *)send)[i] * (float)ctl.ranks;
        else ((double *)recv)[i] = ((const double *)send)[i] * ctl.ranks;
    }
    ctl.busy = ctl.hang;
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)comm, (void)stream, (void)dt;
    if (ctl.n_bcast < FAKE_NCCL_MAX) {
        ctl.bcast[ctl.n_bcast].offset = (size_t)((const float *)send - (const float *)ctl.base);
        ctl.bcast[ctl.n_bcast].count = count, ctl.bcast[ctl.n_bcast].root = root;
        ctl.bcast[ctl.n_bcast].in_group = ctl.group_depth, ctl.bcast[ctl.n_bcast].in_place = send == recv;
    }
    ctl.n_bcast++;
    ctl.busy = ctl.hang;
    return ncclSuccess;
}

/* one call of the reduce-scatter's, recorded */
static void record(const char *what, const void *buf, size_t count, int peer, int in_place)
{
    if (ctl.n_calls < FAKE_NCCL_MAX) {
        snprintf(ctl.call[ctl.n_calls].what, sizeof ctl.call[0].what, "%s", what);
        ctl.call[ctl.n_calls].offset = (size_t)((const float *)buf - (const float *)ctl.base);
        ctl.call[ctl.n_calls].count = count, ctl.call[ctl.n_calls].peer = peer;
        ctl.call[ctl.n_calls].in_group = ctl.group_depth, ctl.call[ctl.n_calls].in_place = in_place;
    }
    ctl.n_calls++;
    ctl.busy = ctl.hang;
}

/* the sum over the ranks of the same floats: x ranks */
static void times_ranks(float *to, const float *from, size_t count)
{
    for (size_t i = 0; i < count; i++) to[i] = from[i] * (float)ctl.ranks;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream)
{
    (void)comm, (void)stream, (void)dt, (void)op;
    const float *mine = (const float *)send + (size_t)ctl.init_rank * count;
    record("ncclReduceScatter", recv, count, -1, recv == (const void *)mine);
    times_ranks(recv, mine, count);
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    (void)comm, (void)stream, (void)dt, (void)op;
    record("ncclReduce", send, count, root, send == recv);
    if (root == ctl.init_rank) times_ranks(recv, send, count);
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    (void)comm, (void)stream, (void)dt;
    record("ncclSend", send, count, peer, 1);
    return ncclSuccess;
}

/* (what the peer sends is its sum of the same floats) */
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t stream)
{
    (void)comm, (void)stream, (void)dt;
    record("ncclRecv", recv, count, peer, 1);
    times_ranks(recv, recv, count);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    ctl.group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    ctl.group_depth--;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSystemError ? "unhandled system error" : "some error"; }

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "fake detail";
}
