/*
 * bench-train.c - make bench: step time (forward + backward) of sa1b-train's
 * small configuration (B=8, M=16, K=2) on 2 threads against the PyTorch
 * reference (tests/reference/sam_ref.py, float32, same batch, same
 * parameters, same threads) measured in the same run, and the FLOP rate
 * achieved against OpenBLAS SGEMM's rate on this machine.
 *
 * Usage: bench-train [--config NAME] [--batch B] [--masks M] [--threads N] [--steps N] [--no-torch]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "train/checkpoint.h"
#include "model/model.h"
#include "train/optim.h"
#include "registry/registry.h"

#ifndef SRCDIR
#define SRCDIR "."
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    const char *config = "small";
    int B = 8, M = 16, K = 2, threads = 2, steps = 3, no_torch = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--no-torch")) no_torch = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--config")) config = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--masks")) M = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    }
    if (steps < 1 || steps > 100) steps = 3;
    char err[512];
    tr_backend *be = tr_backend_create("cpu", threads, err, sizeof err);
    if (!be) return fprintf(stderr, "bench-train: %s\n", err), 1;
    tr_config cfg;
    if (tr_config_preset(config, &cfg) < 0) return fprintf(stderr, "bench-train: unknown config\n"), 1;
    tr_model m;
    if (tr_model_init(&m, be, &cfg, B, M, K, err, sizeof err) < 0) return fprintf(stderr, "bench-train: %s\n", err), 1;
    tr_model_init_params(&m, 1);
    int R = 4 * (cfg.S / cfg.P);
    tr_batch *b = tr_batch_alloc(&be->mem, B, M, K, cfg.S, R);
    tr_batch_synthetic(b, 5);
    tr_optim_config oc;
    tr_optim_defaults(&oc, 1e-4, 100);
    tr_optim opt;
    tr_optim_init(&opt, &m, &oc);

    /* sa1b-train: warm-up, then steps forward+backward, and AdamW alone */
    tr_model_forward(&m, b, err, sizeof err);
    tr_loss L = tr_model_backward(&m, b);
    char dump[] = "/tmp/bench-train-XXXXXX";
    int fd = mkstemp(dump);
    if (fd >= 0) close(fd);
    if (tr_dump_step(&m, b, &L, dump, err, sizeof err) < 0) fprintf(stderr, "bench-train: %s\n", err);
    double tf[100], tb[100], to[100];
    for (int s = 0; s < steps; s++) {
        double t0 = now();
        tr_model_forward(&m, b, err, sizeof err);
        double t1 = now();
        tr_model_backward(&m, b);
        double t2 = now();
        tr_optim_step(&opt, &m, NULL);
        double t3 = now();
        tf[s] = t1 - t0, tb[s] = t2 - t0, to[s] = t3 - t2;
    }
    double fwd = median(tf, steps), step = median(tb, steps), adam = median(to, steps);

    /* PyTorch on the same batch and parameters */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/reference/sam_ref.py --bench %d --threads %d %s 2>/dev/null",
             SRCDIR, steps, threads, dump);
    double torch_step = -1;
    FILE *p = no_torch ? NULL : popen(cmd, "r");
    if (p) {
        if (fscanf(p, "%lf", &torch_step) != 1) torch_step = -1;
        pclose(p);
    }
    unlink(dump);

    /* SGEMM rate, same threads, through the backend (OpenBLAS when built with it) */
    int n = 1024;
    float *A = malloc((size_t)n * n * sizeof(float)), *Bm = malloc((size_t)n * n * sizeof(float)),
          *C = malloc((size_t)n * n * sizeof(float));
    for (size_t i = 0; i < (size_t)n * n; i++) A[i] = (float)(i % 7) * 0.1f, Bm[i] = (float)(i % 5) * 0.1f;
    double tg[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        be->ops->gemm(be, 0, 0, n, n, n, 1.0f, A, n, Bm, n, 0.0f, C, n);
        tg[r] = now() - t0;
    }
    double gemm_gflops = 2.0 * n * n * (double)n / median(tg, 5) / 1e9;
    free(A), free(Bm), free(C);

    double flops = tr_model_flops(&m);
    printf("bench-train: %s config, B=%d M=%d K=%d, %d threads, median of %d steps\n", config, B, M, K,
           be->n_threads, steps);
    printf("%-34s %12s %12s\n", "measure", "value", "ratio");
    printf("%-34s %10.3f s %12s\n", "sa1b-train forward", fwd, "");
    printf("%-34s %10.3f s %12s\n", "sa1b-train forward+backward", step, "");
    printf("%-34s %10.3f s %12s\n", "sa1b-train AdamW update", adam, "");
    if (torch_step > 0)
        printf("%-34s %10.3f s %11.2fx\n", "PyTorch fp32 forward+backward", torch_step, torch_step / step);
    else
        printf("%-34s %12s %12s\n", "PyTorch fp32 forward+backward", "n/a", "(no torch)");
    printf("%-34s %10.2f %12s\n", "images/s (sa1b-train)", B / step, "");
    printf("%-34s %8.2f GF/s %12s\n", "OpenBLAS SGEMM 1024^3", gemm_gflops, "");
    printf("%-34s %8.2f GF/s %11.2fx\n", "model FLOP rate (vs SGEMM)", flops / step / 1e9, flops / step / 1e9 / gemm_gflops);
    printf("ratio: PyTorch time / sa1b-train time (>= 1.0: at least PyTorch's speed); model FLOPs %.2f GF/step\n",
           flops / 1e9);
    tr_optim_free(&opt, &m);
    tr_batch_free(&be->mem, b);
    tr_model_free(&m);
    tr_backend_free(be);
    return 0;
}
