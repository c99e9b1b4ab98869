/*
 * dist.c - the ranks of a data-parallel job and their collectives (dist.h).
 */
#include "dist.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

struct tr_dist {
    int rank, world, mpi;
    double timeout_s;
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
static void *watchdog(void *arg)
{
    tr_dist *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
        if (d->what && now_s() - d->since > d->timeout_s) {
            /* the one line a job that cannot finish leaves (the trainer's own
             * stderr: a library that never prints has no other way out of a
             * collective that does not return) */
            fprintf(stderr, "sa1b-train: rank %d of %d: %s did not complete within %.0f s "
                    "(another rank died or hangs): ending the job\n", d->rank, d->world, d->what, d->timeout_s);
            /* no MPI call from this thread (MPI_THREAD_FUNNELED): a rank that
             * exits without finalizing makes the launcher end the others */
            _exit(3);
        }
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
#ifdef HAVE_MPI
    if (d->mpi) MPI_Finalize();
#endif
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

int tr_dist_rank(const tr_dist *d) { return d->rank; }
int tr_dist_world(const tr_dist *d) { return d->world; }

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

int tr_dist_sum_f(tr_dist *d, float *buf, size_t n, char *err, size_t err_len)
{
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
    if (d->world == 1) return 0;
    dog_arm(d, "the loss sum");
    return coll_done(d, MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce",
                     err, err_len);
}

int tr_dist_gather_f(tr_dist *d, float *buf, const size_t *lo, char *err, size_t err_len)
{
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
