/*
 * faults.c - sa1b-train's faults made up by the test suite (SA1B_TEST_*
 * environment variables: a signal, a SIGBUS, a failed device or a full
 * disk at a chosen point), and the device's first error as the run sees it.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

/* Tests: SA1B_TEST_KILL=step:N raises SIGTERM after step N, save:N in the
 * middle of step N's checkpoint (between the model and the state file),
 * val:N as the evaluation of --val after step N begins, evaluated:N once
 * that evaluation's line is printed; once (the
 * checkpoint a stop writes may pass the same point again, where a second
 * signal would end the process at once).  SA1B_TEST_BUS=WHAT:N raises
 * SIGBUS at the same points, and eval:N before batch N of an evaluation
 * (a shard truncated there, which a test cannot time). */
void test_hook(const char *what, long n)
{
    static int fired;
    const char *k = getenv("SA1B_TEST_KILL"), *b = getenv("SA1B_TEST_BUS");
    char w[16];
    long at;
    if (!fired && k && sscanf(k, "%15[a-z]:%ld", w, &at) == 2 && strcmp(w, what) == 0 && at == n) {
        fired = 1;
        raise(SIGTERM);
    }
    if (b && sscanf(b, "%15[a-z]:%ld", w, &at) == 2 && strcmp(w, what) == 0 && at == n) raise(SIGBUS);
}

/* Tests: SA1B_TEST_DEVICE=WHAT:N[:R] makes the device of rank R (0 when
 * not given) fail, from then on, as the CUDA backend records a failure:
 * WHAT step after step N, save once the files of step N's checkpoint are
 * written (its downloads).  Any backend: the paths that a failed device
 * takes, run without one. */
void test_device_hook(train_job *job, const char *what, long n)
{
    const char *k = getenv("SA1B_TEST_DEVICE");
    char w[16];
    long at;
    int r = 0;
    if (k && sscanf(k, "%15[a-z]:%ld:%d", w, &at, &r) >= 2 && strcmp(w, what) == 0 && at == n && r == job->rank)
        job->test_device_failed = 1;
}

int device_error(const train_job *job, tr_backend *be, char *err, size_t err_len)
{
    if (tr_backend_error(be, err, err_len)) return 1;
    if (!job->test_device_failed) return 0;
    snprintf(err, err_len, "a device error made up by SA1B_TEST_DEVICE");
    return 1;
}

/* A GPU's first error ends the run in one line (its ops cannot return
 * one: backend_cuda.h). */
void check_device(const train_job *job, tr_backend *be)
{
    char err[512];
    if (device_error(job, be, err, sizeof err)) cli_die(CLI_EXIT_FATAL, "--backend cuda: %s", err);
}

/* Tests: SA1B_TEST_LOG_FULL=N sends the log's records from step N on to
 * /dev/full (a full disk). */
void test_log_hook(FILE *log, long step)
{
    const char *k = getenv("SA1B_TEST_LOG_FULL");
    if (!k || atol(k) != step) return;
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) dup2(fd, fileno(log)), close(fd);
}
