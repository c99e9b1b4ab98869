/*
 * bench-dist.c - the collectives of a data-parallel step alone (dist.h),
 * under mpirun -np N: milliseconds per step for the gradient's floats
 * moved as --zero 0 moves them (an all-reduce), as --zero 1 moved them
 * before issue 18's reduce-scatter (an all-reduce, then the weights'
 * gather) and as it moves them now (a reduce-scatter, then the gather),
 * and the reduce-scatter alone, the parts about equal.  Each timed after a
 * barrier, on rank 0, the four in turn; the median of REPS each.  Usage: mpirun -np N bench-dist [FLOATS [REPS]]
 * (default 3.6M floats, the small configuration's gradient, and 30).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "main/dist.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void check(int rc, const char *err)
{
    if (rc < 0) {
        fprintf(stderr, "bench-dist: %s\n", err);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    char err[512];
    tr_dist *d = tr_dist_open(&argc, &argv, 600, err, sizeof err);
    if (!d) return fprintf(stderr, "bench-dist: %s\n", err), 1;
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 3622000;
    int reps = argc > 2 ? atoi(argv[2]) : 30, world = tr_dist_world(d);
    float *g = calloc(n ? n : 1, sizeof *g);
    size_t *lo = calloc((size_t)world + 1, sizeof *lo);
    double *t = calloc(4 * (size_t)(reps > 0 ? reps : 1), sizeof *t);
    if (!g || !lo || !t || reps < 1) return fprintf(stderr, "bench-dist: out of memory or no reps\n"), 1;
    for (int r = 0; r <= world; r++) lo[r] = n * (size_t)r / (size_t)world;
    enum { K = 4 };
    const char *name[K] = {"all-reduce (--zero 0)", "reduce-scatter", "all-reduce + gather (--zero 1 before)",
                           "reduce-scatter + gather (--zero 1 now)"};
    double med[K];
    for (int i = 0; i < reps; i++) /* the patterns in turn: a change of the machine's load hits them alike */
        for (int k = 0; k < K; k++) {
            for (size_t j = 0; j < n; j++) g[j] = 1e-3f * (float)(j % 1000);
            check(tr_dist_barrier(d, err, sizeof err), err);
            double t0 = now_s();
            if (k & 1) check(tr_dist_reduce_scatter_f(d, g, lo, err, sizeof err), err);
            else check(tr_dist_sum_f(d, g, n, err, sizeof err), err);
            if (k >= 2) check(tr_dist_gather_f(d, g, lo, err, sizeof err), err);
            t[(size_t)k * (size_t)reps + (size_t)i] = now_s() - t0;
        }
    for (int k = 0; k < K; k++) {
        qsort(t + (size_t)k * (size_t)reps, (size_t)reps, sizeof *t, cmp_d);
        med[k] = 1e3 * t[(size_t)k * (size_t)reps + (size_t)reps / 2];
    }
    if (tr_dist_rank(d) == 0) {
        printf("bench-dist: %d ranks, %zu floats (%.1f MB), median of %d\n", world, n, 4e-6 * (double)n, reps);
        for (int k = 0; k < K; k++) printf("  %-40s %8.2f ms\n", name[k], med[k]);
        printf("  now / before (--zero 1)                  %8.2f\n", med[3] / med[2]);
    }
    free(g), free(lo), free(t);
    tr_dist_close(d);
    return 0;
}
