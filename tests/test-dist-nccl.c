/*
 * test-dist-nccl.c - the host side of the CUDA backend's collectives
 * (dist_nccl.c, and dist.c's use of them) without a GPU: a stand-in
 * libnccl.so.2 (fake-nccl.c, loaded by dist_nccl.c as the real one would
 * be) and a stand-in CUDA runtime here, on host memory.  Checks what goes
 * to NCCL (types, counts, the backend's stream, one broadcast per rank's
 * part in a group for the gather, the reduce-scatter of unequal parts
 * played rank by rank, the loss sums through the device buffer), the
 * bootstrap (rank 0's id, the ranks), an asynchronous NCCL error (an
 * error, the communicator aborted), a collective that never
 * completes (TR_NCCL_TIMEOUT after the timeout, aborted; through dist.c,
 * the job's one line and exit status 3), and a failed join.  What only a
 * GPU shows (NCCL's own sums, several devices) is t1772-train-dp-cuda.sh's.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cuda/backend_cuda.h"
#include "main/dist.h"
#include "main/dist_nccl.h"
#include "fake-nccl.h"
#include "tap.h"

static fake_nccl *ctl;
static int the_stream;

/* ---- the CUDA runtime, on host memory ---------------------------------- */

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = malloc(n);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    (void)kind;
    memcpy(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t st)
{
    (void)st;
    return cudaMemcpy(dst, src, n, kind);
}

cudaError_t cudaStreamQuery(cudaStream_t st)
{
    if (st != (cudaStream_t)&the_stream) return cudaErrorInvalidResourceHandle;
    return ctl && ctl->busy ? cudaErrorNotReady : cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e) { return e == cudaErrorNotReady ? "not ready" : "a CUDA error"; }

/* the CUDA backend's stream (backend_cuda.h): a fake one for a backend named cuda */
void *tr_backend_cuda_stream(tr_backend *be) { return strcmp(be->name, "cuda") == 0 ? &the_stream : NULL; }

/* ---- the tests ----------------------------------------------------------- */

static void reset(int ranks)
{
    memset(ctl, 0, sizeof *ctl);
    ctl->ranks = ranks;
}

/* a communicator of world ranks as rank, ready */
static tr_nccl *joined(tr_backend *be, int rank, int world)
{
    char err[300];
    unsigned char id[TR_NCCL_ID_BYTES];
    tr_nccl *n = tr_nccl_load(be, err, sizeof err);
    if (!n || tr_nccl_unique_id(n, id, err, sizeof err) < 0 || tr_nccl_join(n, id, rank, world, err, sizeof err) < 0) {
        tap_diag("%s", err);
        exit(1);
    }
    return n;
}

static void test_load(tr_backend *cuda, tr_backend *cpu)
{
    char err[300] = "";
    tap_ok(!tr_nccl_load(cpu, err, sizeof err) && strstr(err, "cuda backend"), "not on the cpu backend: %s", err);
    tr_nccl *n = tr_nccl_load(cuda, err, sizeof err);
    tap_ok(n != NULL, "libnccl.so.2 loaded (the CUDA library directory first)");
    void *lib = dlopen(SA1B_CUDA_LIBDIR "/libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    fake_nccl *(*get)(void) = NULL;
    void *sym = lib ? dlsym(lib, "fake_nccl_ctl") : NULL;
    memcpy(&get, &sym, sizeof sym);
    if (!get) tap_skip_all("the stand-in NCCL was not the library loaded");
    ctl = get();
    reset(1);
    unsigned char id[TR_NCCL_ID_BYTES] = {0};
    tap_ok(tr_nccl_unique_id(n, id, err, sizeof err) == 0 && id[0] == 0x5a && id[TR_NCCL_ID_BYTES - 1] == 0x5a,
           "rank 0's unique id: NCCL's 128 bytes");
    id[0] = 0x33;
    tap_ok(tr_nccl_join(n, id, 2, 4, err, sizeof err) == 0 && ctl->init_rank == 2 && ctl->init_nranks == 4 &&
           ctl->init_id0 == 0x33, "joins as rank 2 of 4 with the id given");
    tr_nccl_close(n);
    tap_is_int(ctl->destroyed, 1, "close destroys the communicator");
    /* (lib stays open: ctl lives in it) */
}

static void test_sums(tr_backend *cuda)
{
    char err[300] = "";
    reset(2);
    tr_nccl *n = joined(cuda, 0, 2);
    float g[5] = {1, 2, 3, 4, 5};
    tap_ok(tr_nccl_sum(n, g, 5, 0, 10, err, sizeof err) == 0 && g[0] == 2 && g[4] == 10,
           "the float sum, in place: every rank's (x 2 ranks)");
    tap_ok(ctl->last_count == 5 && ctl->last_dt == ncclFloat32 && ctl->last_op == ncclSum &&
           ctl->last_stream == (void *)&the_stream, "ncclAllReduce: 5 floats, ncclSum, on the backend's stream");
    double t[7] = {3, 0.5, 1, 2, 4, 8, 0};
    ctl->ranks = 3;
    tap_ok(tr_nccl_sum_host_d(n, t, 7, 10, err, sizeof err) == 0 && t[0] == 9 && t[1] == 1.5 && t[5] == 24,
           "the loss sums: host doubles through the device buffer");
    tap_ok(ctl->last_count == 7 && ctl->last_dt == ncclFloat64, "ncclAllReduce: 7 doubles");
    double many[17] = {0};
    int reduces = ctl->reduces;
    tap_ok(tr_nccl_sum_host_d(n, many, 17, 10, err, sizeof err) < 0 && ctl->reduces == reduces,
           "more host sums than the buffer holds: an error, nothing sent (%s)", err);

    /* the gather: rank r's floats [lo[r], lo[r+1]) from rank r, an empty part included */
    float w[10];
    size_t lo[4] = {0, 3, 3, 10};
    ctl->base = w;
    tap_ok(tr_nccl_gather(n, w, lo, 3, 10, err, sizeof err) == 0 && ctl->n_bcast == 3, "the gather: 3 broadcasts");
    int good = ctl->group_depth == 0;
    for (int r = 0; r < 3; r++)
        good &= ctl->bcast[r].offset == lo[r] && ctl->bcast[r].count == lo[r + 1] - lo[r] && ctl->bcast[r].root == r &&
                ctl->bcast[r].in_group == 1 && ctl->bcast[r].in_place;
    tap_ok(good, "each rank's part from that rank, in place, in one group");
    tr_nccl_close(n);
}

/* The reduce-scatter of parts that are whole parameters (unequal), on
 * floats [2, 19) of buf: played by each rank of 3 in turn, every rank
 * holding the same floats, each must end with the sum (x 3) of its own part
 * and the floats outside [2, 19) untouched; what a rank sends is what its
 * peer receives; no all-reduce.  The parts [2, 9), [9, 11), [11, 19); NCCL's
 * equal parts of 5 floats [2, 7), [7, 12), [12, 17); the tail [17, 19). */
static void test_reduce_scatter(tr_backend *cuda)
{
    enum { W = 3, N = 20 };
    char err[300] = "";
    size_t lo[W + 1] = {2, 9, 11, 19};
    char sent[64] = "", got[64] = "", tails[W][64];
    int sums = 1, one_rs = 1, grouped = 1, no_allreduce = 1;
    for (int me = 0; me < W; me++) {
        reset(W);
        tr_nccl *n = joined(cuda, me, W);
        float buf[N];
        for (int i = 0; i < N; i++) buf[i] = (float)(i + 1);
        ctl->base = buf;
        if (tr_nccl_reduce_scatter(n, buf, lo, W, 10, err, sizeof err) < 0) tap_diag("rank %d: %s", me, err), sums = 0;
        for (size_t i = 0; i < N; i++)
            if (i < lo[0] || i >= lo[W] || (i >= lo[me] && i < lo[me + 1]))
                sums &= buf[i] == (float)(i + 1) * (i >= lo[me] && i < lo[me + 1] ? W : 1);
        one_rs &= ctl->n_calls > 0 && !strcmp(ctl->call[0].what, "ncclReduceScatter") && ctl->call[0].count == 5 &&
                  ctl->call[0].offset == lo[0] + 5 * (size_t)me && ctl->call[0].in_place && !ctl->call[0].in_group;
        no_allreduce &= ctl->reduces == 0;
        tails[me][0] = 0;
        for (int c = 1; c < ctl->n_calls && c < FAKE_NCCL_MAX; c++) {
            const char *w = ctl->call[c].what;
            size_t off = ctl->call[c].offset, cnt = ctl->call[c].count;
            int peer = ctl->call[c].peer;
            if (!strcmp(w, "ncclSend") || !strcmp(w, "ncclRecv")) { /* "from>to:offset+count " */
                int send = w[4] == 'S';
                char *to = send ? sent : got;
                snprintf(to + strlen(to), 64 - strlen(to), "%d>%d:%zu+%zu ", send ? me : peer, send ? peer : me, off,
                         cnt);
                grouped &= ctl->call[c].in_group == 1;
            } else {
                snprintf(tails[me] + strlen(tails[me]), 64 - strlen(tails[me]), "%s to %d:%zu+%zu%s ", w, peer, off,
                         cnt, ctl->call[c].in_place ? "" : " (not in place)");
            }
        }
        tr_nccl_close(n);
    }
    tap_ok(sums, "the reduce-scatter: each of 3 ranks gets the sum of its own part, the floats beyond untouched");
    tap_ok(one_rs, "one ncclReduceScatter of the equal parts (5 floats each), in place");
    tap_ok(no_allreduce, "and no ncclAllReduce");
    /* (the pieces: [7, 9) from rank 1 to 0, [11, 12) from 1 to 2) */
    if (!tap_ok(!strcmp(sent, got) && !strcmp(sent, "1>0:7+2 1>2:11+1 "), "the pieces of a part in another's equal "
                "part: sent by that rank, received by the owner, the same floats: %s", sent))
        tap_diag("received: %s", got);
    tap_ok(grouped, "the sends and receives in one group");
    tap_ok(!strcmp(tails[0], "ncclReduce to 2:17+2 ") && !strcmp(tails[1], tails[0]) && !strcmp(tails[2], tails[0]),
           "the tail reduced to its owner, in place, by every rank: %s", tails[0]);
}

static void test_failures(tr_backend *cuda)
{
    char err[300] = "";
    float g[3] = {1, 2, 3};
    reset(2);
    tr_nccl *n = joined(cuda, 1, 2);
    ctl->hang = 1, ctl->async_error = ncclSystemError;
    tap_ok(tr_nccl_sum(n, g, 3, 0, 1000, err, sizeof err) == -1 && strstr(err, "ncclAllReduce") &&
           strstr(err, "unhandled system error") && strstr(err, "fake detail"),
           "an asynchronous NCCL error ends the wait: %s", err);
    tap_is_int(ctl->aborted, 1, "and aborts the communicator");
    ctl->busy = 0;
    tap_ok(tr_nccl_sum(n, g, 3, 0, 1000, err, sizeof err) == -1 && strstr(err, "aborted"),
           "then every collective is refused: %s", err);
    tr_nccl_close(n);
    tap_is_int(ctl->destroyed, 0, "an aborted communicator is not destroyed again");

    reset(2);
    n = joined(cuda, 0, 2);
    ctl->hang = 1;
    tap_is_int(tr_nccl_sum(n, g, 3, 0, 0.2, err, sizeof err), TR_NCCL_TIMEOUT,
               "a collective that does not complete: TR_NCCL_TIMEOUT after the timeout");
    tap_is_int(ctl->aborted, 1, "the communicator aborted");
    tr_nccl_close(n);

    reset(1);
    ctl->fail_init = 1;
    unsigned char id[TR_NCCL_ID_BYTES] = {0};
    n = tr_nccl_load(cuda, err, sizeof err);
    tap_ok(n && tr_nccl_join(n, id, 0, 1, err, sizeof err) == -1 && strstr(err, "ncclCommInitRank"),
           "a join that fails: %s", err);
    tr_nccl_close(n);
}

/* dist.c on the device: one process (no launcher), its sums through NCCL */
static void test_dist(tr_backend *cuda)
{
    char err[300] = "";
    reset(2);
    tr_dist *d = tr_dist_open(NULL, NULL, 1, err, sizeof err);
    tap_ok(d && !tr_dist_launched(d) && tr_dist_world(d) == 1, "a job of one process");
    tap_ok(tr_dist_use_device(d, cuda, err, sizeof err) == 0 && tr_dist_on_device(d), "tr_dist_use_device: on the device");
    tap_ok(ctl->ids == 1 && ctl->init_nranks == 1 && ctl->init_rank == 0, "rank 0 made the id and joined");
    float g[4] = {1, 1, 1, 1};
    double t[2] = {1, 2};
    size_t lo[2] = {0, 4};
    ctl->base = g;
    tap_ok(tr_dist_sum_f(d, g, 4, err, sizeof err) == 0 && g[3] == 2 && ctl->last_dt == ncclFloat32,
           "tr_dist_sum_f: ncclAllReduce of the device floats, with one rank too");
    tap_ok(tr_dist_sum_d(d, t, 2, err, sizeof err) == 0 && t[1] == 4 && ctl->last_dt == ncclFloat64,
           "tr_dist_sum_d: the host doubles through the device");
    tap_ok(tr_dist_gather_f(d, g, lo, err, sizeof err) == 0 && ctl->n_bcast == 1 && ctl->bcast[0].count == 4,
           "tr_dist_gather_f: a broadcast of rank 0's part");
    int reduces = ctl->reduces;
    tap_ok(tr_dist_reduce_scatter_f(d, g, lo, err, sizeof err) == 0 && g[0] == 4 && ctl->reduces == reduces &&
           ctl->n_calls == 1 && !strcmp(ctl->call[0].what, "ncclReduceScatter") && ctl->call[0].count == 4,
           "tr_dist_reduce_scatter_f: an ncclReduceScatter of rank 0's part, with one rank too");

    /* a collective that hangs: the job's one line, exit status 3 */
    int fd[2];
    if (pipe(fd) < 0) tap_skip_all("no pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        ctl->hang = 1;
        tr_dist_sum_f(d, g, 4, err, sizeof err);
        _exit(0);
    }
    close(fd[1]);
    char out[600] = "";
    size_t len = 0;
    ssize_t k;
    while (len < sizeof out - 1 && (k = read(fd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)k;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 3, "a hung sum ends the process with exit status 3");
    if (!tap_ok(strcmp(out, "sa1b-train: rank 0 of 1: the gradient sum did not complete within 1 s (another rank "
                            "died or hangs): ending the job\n") == 0, "in one line naming the rank and the collective"))
        tap_diag("stderr: %s", out);
    tr_dist_close(d);
    tap_is_int(ctl->destroyed, 1, "tr_dist_close destroys the communicator");

    reset(1);
    ctl->fail_init = 1;
    d = tr_dist_open(NULL, NULL, 1, err, sizeof err);
    tap_ok(tr_dist_use_device(d, cuda, err, sizeof err) == -1 && !tr_dist_on_device(d) && strstr(err, "ncclCommInitRank"),
           "a failed setup: the host collectives stay (%s)", err);
    tr_dist_close(d);
}

int main(void)
{
    tr_backend cuda = {.name = "cuda"}, cpu = {.name = "cpu"};
    test_load(&cuda, &cpu);
    test_sums(&cuda);
    test_reduce_scatter(&cuda);
    test_failures(&cuda);
    test_dist(&cuda);
    return tap_done();
}
