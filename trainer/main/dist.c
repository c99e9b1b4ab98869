/*
 * dist.c - the ranks of a data-parallel job and their collectives (dist.h).
 */
#include "dist.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int tr_dist_env_rank(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_RANK");
    if (!v) v = getenv("PMI_RANK");
    if (!v) v = getenv("PMIX_RANK");
    return v ? atoi(v) : 0;
}

#ifdef HAVE_MPI
#include <mpi.h>
#else
#undef HAVE_NCCL /* (bootstrapped over MPI) */
#endif
#ifdef HAVE_NCCL
#include "dist_nccl.h"
#endif

struct tr_dist {
    int rank, world, mpi, local;
    double timeout_s;
#ifdef HAVE_NCCL
    tr_nccl *nccl; /* the device collectives (tr_dist_use_device) */
#endif
    /* the watchdog: the collective in flight (NULL: none) and its start */
    pthread_t dog;
    int dog_on;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int quit;
    const char *what;
    double since;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* launched by an MPI launcher (Open MPI, MPICH/PMI, PMIx) */
static int launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

#ifdef HAVE_MPI
/* the one line a job that cannot finish leaves (the trainer's own stderr:
 * a library that never prints has no other way out of a collective that
 * does not return), and the end of this process */
_Noreturn static void timed_out(const tr_dist *d, const char *what)
{
    fprintf(stderr, "sa1b-train: rank %d of %d: %s did not complete within %.0f s "
            "(another rank died or hangs): ending the job\n", d->rank, d->world, what, d->timeout_s);
    /* no MPI call (from the watchdog's thread: MPI_THREAD_FUNNELED): a rank
     * that exits without finalizing makes the launcher end the others */
    _exit(3);
}

static void *watchdog(void *arg)
{
    tr_dist *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
        if (d->what && now_s() - d->since > d->timeout_s) timed_out(d, d->what);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static void dog_arm(tr_dist *d, const char *what)
{
    if (!d->dog_on) return;
    pthread_mutex_lock(&d->mu);
    d->what = what, d->since = now_s();
    pthread_mutex_unlock(&d->mu);
}

static void dog_disarm(tr_dist *d)
{
    if (!d->dog_on) return;
    pthread_mutex_lock(&d->mu);
    d->what = NULL;
    pthread_mutex_unlock(&d->mu);
}

static int mpi_fail(int rc, const char *what, char *err, size_t err_len)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    snprintf(err, err_len, "%s: %.*s", what, len, msg);
    return -1;
}
#endif

tr_dist *tr_dist_open(int *argc, char ***argv, double timeout_s, char *err, size_t err_len)
{
    tr_dist *d = calloc(1, sizeof *d);
    if (!d) return snprintf(err, err_len, "out of memory"), NULL;
    d->world = 1;
    d->timeout_s = timeout_s;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (!launched()) return d;
#ifdef HAVE_MPI
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        tr_dist_close(d);
        return snprintf(err, err_len, "MPI_Init failed"), NULL;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    d->mpi = 1;
    MPI_Comm node; /* the ranks on this machine: the local rank picks a GPU */
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &d->local);
        MPI_Comm_free(&node);
    }
    if (timeout_s > 0 && d->world > 1 && pthread_create(&d->dog, NULL, watchdog, d) == 0) d->dog_on = 1;
    return d;
#else
    (void)argc, (void)argv;
    tr_dist_close(d);
    snprintf(err, err_len, "started by an MPI launcher, but this sa1b-train was built without MPI "
             "(Debian: libopenmpi-dev, then configure again)");
    return NULL;
#endif
}

void tr_dist_close(tr_dist *d)
{
    if (!d) return;
    if (d->dog_on) {
        pthread_mutex_lock(&d->mu);
        d->quit = 1;
        pthread_cond_signal(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->dog, NULL);
    }
#ifdef HAVE_NCCL
    tr_nccl_close(d->nccl);
#endif
#ifdef HAVE_MPI
    if (d->mpi) MPI_Finalize();
#endif
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

int tr_dist_rank(const tr_dist *d) { return d->rank; }
int tr_dist_world(const tr_dist *d) { return d->world; }
int tr_dist_local_rank(const tr_dist *d) { return d->local; }
int tr_dist_launched(const tr_dist *d) { return d->mpi; }

int tr_dist_on_device(const tr_dist *d)
{
#ifdef HAVE_NCCL
    return d->nccl != NULL;
#else
    (void)d;
    return 0;
#endif
}

/* The collectives.  Without MPI a job is one process (tr_dist_open
 * refuses one started by a launcher), so there is nothing to do. */
#ifdef HAVE_MPI
/* after a collective: the watchdog off, and 0 or -1 with the library's message */
static int coll_done(tr_dist *d, int rc, const char *call, char *err, size_t err_len)
{
    dog_disarm(d);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, call, err, err_len);
}

/* MPI counts are int: large buffers go in pieces */
#define PIECE ((size_t)1 << 28)

#ifdef HAVE_NCCL
/* after a device collective: its result; a timeout ends the job */
static int nccl_done(tr_dist *d, int rc, const char *what)
{
    if (rc == TR_NCCL_TIMEOUT) timed_out(d, what);
    return rc;
}
#endif

int tr_dist_sum_f(tr_dist *d, float *buf, size_t n, char *err, size_t err_len)
{
#ifdef HAVE_NCCL
    if (d->nccl) return nccl_done(d, tr_nccl_sum(d->nccl, buf, n, 0, d->timeout_s, err, err_len), "the gradient sum");
#endif
    if (d->world == 1) return 0;
    dog_arm(d, "the gradient sum");
    int rc = MPI_SUCCESS;
    for (size_t o = 0; o < n && rc == MPI_SUCCESS; o += PIECE)
        rc = MPI_Allreduce(MPI_IN_PLACE, buf + o, (int)(n - o < PIECE ? n - o : PIECE), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
    return coll_done(d, rc, "MPI_Allreduce", err, err_len);
}

int tr_dist_sum_d(tr_dist *d, double *buf, size_t n, char *err, size_t err_len)
{
#ifdef HAVE_NCCL
    if (d->nccl) return nccl_done(d, tr_nccl_sum_host_d(d->nccl, buf, n, d->timeout_s, err, err_len), "the loss sum");
#endif
    if (d->world == 1) return 0;
    dog_arm(d, "the loss sum");
    return coll_done(d, MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce",
                     err, err_len);
}

/* One MPI_Reduce to each part's rank, in place there (pieces of at most
 * PIECE floats: MPI counts are int), not MPI_Reduce_scatter: Open MPI 4.1's
 * took about twice as long for a gradient of 14.5 MB on 2 ranks of one
 * machine (tests/bench/bench-dist.c), and it puts the part at the start of
 * the buffer, to be moved.  A reduce sends each float once towards its
 * root: the bytes of a reduce-scatter. */
int tr_dist_reduce_scatter_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len)
{
#ifdef HAVE_NCCL
    if (d->nccl)
        return nccl_done(d, tr_nccl_reduce_scatter(d->nccl, buf, lo, d->world, d->timeout_s, err, err_len),
                         "the gradient reduce-scatter");
#endif
    if (d->world == 1) return 0;
    dog_arm(d, "the gradient reduce-scatter");
    int rc = MPI_SUCCESS;
    for (int r = 0; r < d->world && rc == MPI_SUCCESS; r++)
        for (size_t o = lo[r]; o < lo[r + 1] && rc == MPI_SUCCESS; o += PIECE) {
            int n = (int)(lo[r + 1] - o < PIECE ? lo[r + 1] - o : PIECE);
            rc = MPI_Reduce(r == d->rank ? MPI_IN_PLACE : buf + o, buf + o, n, MPI_FLOAT, MPI_SUM, r, MPI_COMM_WORLD);
        }
    return coll_done(d, rc, "MPI_Reduce", err, err_len);
}

int tr_dist_gather_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len)
{
#ifdef HAVE_NCCL
    if (d->nccl)
        return nccl_done(d, tr_nccl_gather(d->nccl, buf, lo, d->world, d->timeout_s, err, err_len), "the weight gather");
#endif
    if (d->world == 1) return 0;
    int *cnt = malloc(2 * (size_t)d->world * sizeof *cnt);
    if (!cnt) return snprintf(err, err_len, "out of memory"), -1;
    int *disp = cnt + d->world;
    for (int r = 0; r < d->world; r++) {
        if (lo[r + 1] - lo[r] > (size_t)1 << 30 || lo[r] > (size_t)1 << 30) /* MPI counts are int */
            return free(cnt), snprintf(err, err_len, "the weights are too large to gather"), -1;
        cnt[r] = (int)(lo[r + 1] - lo[r]), disp[r] = (int)lo[r];
    }
    dog_arm(d, "the weight gather");
    int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, disp, MPI_FLOAT, MPI_COMM_WORLD);
    free(cnt);
    return coll_done(d, rc, "MPI_Allgatherv", err, err_len);
}

int tr_dist_barrier(tr_dist *d, char *err, size_t err_len)
{
    if (d->world == 1) return 0;
    dog_arm(d, "the barrier");
    return coll_done(d, MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", err, err_len);
}

int tr_dist_settle(tr_dist *d, int failed, const char *mine, char *err, size_t err_len)
{
    int first = failed ? d->rank : d->world; /* the lowest failing rank, world: none */
    if (d->world > 1) {
        dog_arm(d, "the ranks' agreement (a check every rank makes)");
        int rc = MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (coll_done(d, rc, "MPI_Allreduce", err, err_len) < 0) return -1;
    }
    if (first == d->world) return 0;
    snprintf(err, err_len, "%s", first == d->rank ? mine : "");
    return -1;
}

#ifdef HAVE_NCCL
int tr_dist_use_device(tr_dist *d, struct tr_backend *be, char *err, size_t err_len)
{
    char mine[512] = "";
    d->nccl = tr_nccl_load(be, mine, sizeof mine);
    int rc = tr_dist_settle(d, !d->nccl, mine, err, err_len);
    /* rank 0's unique id, broadcast with whether rank 0 got one */
    unsigned char id[1 + TR_NCCL_ID_BYTES] = {0};
    if (rc == 0 && d->rank == 0) id[0] = tr_nccl_unique_id(d->nccl, id + 1, mine, sizeof mine) == 0;
    if (rc == 0 && d->world > 1) {
        dog_arm(d, "the NCCL setup");
        rc = coll_done(d, MPI_Bcast(id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast", err, err_len);
    }
    if (rc == 0 && !id[0]) rc = -1, snprintf(err, err_len, "%s", d->rank == 0 ? mine : "");
    if (rc == 0) { /* every rank joins (or the watchdog ends a wait for one that does not) */
        dog_arm(d, "the NCCL setup");
        int bad = tr_nccl_join(d->nccl, id + 1, d->rank, d->world, mine, sizeof mine) < 0;
        dog_disarm(d);
        rc = tr_dist_settle(d, bad, mine, err, err_len);
    }
    if (rc < 0) tr_nccl_close(d->nccl), d->nccl = NULL;
    return rc;
}
#else
int tr_dist_use_device(tr_dist *d, struct tr_backend *be, char *err, size_t err_len)
{
    (void)be;
    if (d->world == 1) return 0; /* one rank: nothing to sum (on the host) */
    return tr_dist_settle(d, 1, "this sa1b-train was built without NCCL (configure found no nccl.h): "
                          "the CUDA backend runs in one process", err, err_len);
}
#endif
#else
int tr_dist_sum_f(tr_dist *d, float *buf, size_t n, char *err, size_t err_len)
{
    (void)d, (void)buf, (void)n, (void)err, (void)err_len;
    return 0;
}

int tr_dist_sum_d(tr_dist *d, double *buf, size_t n, char *err, size_t err_len)
{
    (void)d, (void)buf, (void)n, (void)err, (void)err_len;
    return 0;
}

int tr_dist_reduce_scatter_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len)
{
    (void)d, (void)buf, (void)lo, (void)err, (void)err_len;
    return 0;
}

int tr_dist_gather_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len)
{
    (void)d, (void)buf, (void)lo, (void)err, (void)err_len;
    return 0;
}

int tr_dist_barrier(tr_dist *d, char *err, size_t err_len)
{
    (void)d, (void)err, (void)err_len;
    return 0;
}

int tr_dist_settle(tr_dist *d, int failed, const char *mine, char *err, size_t err_len)
{
    (void)d;
    if (!failed) return 0;
    snprintf(err, err_len, "%s", mine);
    return -1;
}

int tr_dist_use_device(tr_dist *d, struct tr_backend *be, char *err, size_t err_len)
{
    (void)d, (void)be, (void)err, (void)err_len;
    return 0; /* one process (tr_dist_open refuses a launcher's without MPI): nothing to sum */
}
#endif

_Noreturn void tr_dist_abort(tr_dist *d, int code)
{
#ifdef HAVE_MPI
    if (d && d->mpi) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)d;
#endif
    exit(code);
}
