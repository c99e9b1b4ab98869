/*
 * fake-nccl.h - what test-dist-nccl sets and reads in the stand-in NCCL of
 * fake-nccl.c (found with dlsym("fake_nccl_ctl") in the library that
 * dist_nccl.c loaded).
 */
#ifndef SA1B_TESTS_FAKE_NCCL_H
#define SA1B_TESTS_FAKE_NCCL_H

#include <stddef.h>

#define FAKE_NCCL_MAX 16

typedef struct fake_nccl {
    /* set by the test */
    int ranks;       /* the ranks an all-reduce plays: it multiplies by them, and so
                        does every reduction of which this rank gets the result */
    int hang;        /* a collective leaves the stream busy */
    int fail_init;   /* ncclCommInitRank fails */
    int async_error; /* what ncclCommGetAsyncError reports (an ncclResult_t) */
    const void *base; /* the buffer broadcast offsets are counted from */
    /* read by the test */
    int busy;        /* the stream has work that does not end */
    int ids, init_nranks, init_rank, init_id0, destroyed, aborted, reduces, group_depth;
    size_t last_count;
    int last_dt, last_op;
    void *last_stream;
    int n_bcast;
    struct {
        size_t offset, count;
        int root, in_group, in_place;
    } bcast[FAKE_NCCL_MAX];
    /* the reduce-scatter's calls: ncclReduceScatter, ncclSend and ncclRecv
     * (peer), ncclReduce (peer: the root), in their order; offsets from
     * base (that of ncclReduceScatter's receive buffer) */
    int n_calls;
    struct {
        char what[24];
        size_t offset, count;
        int peer, in_group, in_place;
    } call[FAKE_NCCL_MAX];
} fake_nccl;

#endif
