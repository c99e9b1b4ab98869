/*
 * fake-nccl.c - a stand-in libnccl.so.2 for test-dist-nccl: the entry
 * points dist_nccl.c loads, on host memory (the test's fake CUDA runtime
 * allocates "device" memory with malloc), recording what they were asked
 * and behaving as fake_nccl_ctl() says: an all-reduce multiplies by the
 * ranks it plays (every rank holding the same data), a collective can
 * leave the stream busy for ever (a rank that hangs) or report an
 * asynchronous error.
 */
#include <nccl.h>
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
