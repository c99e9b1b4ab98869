/*
 * bench-jpeg-floor.c - the floor of sa1b-shard's speed: TurboJPEG decode
 * alone, at the DCT scale sa1b-shard would use for --image-size S, over every
 * JPEG of a tar, on T threads.  The JPEGs are read where sa1b-shard reads
 * them: in the tar's mapping (a tar opened by path; copies only where the
 * reader's samples are not stable).  Copies in the heap decoded a 2000x1500
 * photograph at 1/1 in 11.1-11.7 ms against 7.8-8.0 from the mapping
 * (this machine; the same at 1/2), which made the floor slower than all of
 * sa1b-shard.  Prints "images/s CPU-ms":
 * the wall rate of the decode and the process's CPU time during it per
 * image (the decoding threads'; the main thread waits).
 * Usage: bench-jpeg-floor TAR S THREADS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sa1b_image.h"
#include "sa1b_tar.h"

typedef struct { const uint8_t *jpg; uint8_t *p; size_t n; } blob; /* p: a copy (or NULL) */
typedef struct { blob *b; size_t n, next; uint32_t S; pthread_mutex_t mu; int bad; } work;

static void *run(void *arg)
{
    work *w = arg;
    sa1b_imgctx *c = NULL;
    sa1b_error e;
    if (sa1b_imgctx_new(&c, &e)) { w->bad = 1; return NULL; }
    for (;;) {
        pthread_mutex_lock(&w->mu);
        size_t i = w->next++;
        pthread_mutex_unlock(&w->mu);
        if (i >= w->n) break;
        uint32_t iw, ih, ow, oh;
        const uint8_t *rgb;
        sa1b_letterbox lb;
        if (sa1b_jpeg_size(c, w->b[i].jpg, w->b[i].n, &iw, &ih, &e) ||
            sa1b_letterbox_geometry(iw, ih, w->S, &lb, &e) ||
            sa1b_jpeg_decode_scaled(c, w->b[i].jpg, w->b[i].n, lb.new_w, lb.new_h, &rgb, &ow, &oh, &e))
            w->bad = 1;
    }
    sa1b_imgctx_free(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: bench-jpeg-floor TAR S THREADS\n"); return 2; }
    sa1b_tar *t;
    sa1b_error e;
    if (sa1b_tar_open(&t, argv[1], &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    work w = {NULL, 0, 0, (uint32_t)atoi(argv[2]), PTHREAD_MUTEX_INITIALIZER, 0};
    sa1b_tar_sample s;
    int rc;
    while ((rc = sa1b_tar_next(t, &s, &e)) != SA1B_EOF) {
        if (rc) continue;
        w.b = realloc(w.b, (w.n + 1) * sizeof *w.b);
        w.b[w.n].p = s.stable ? NULL : malloc(s.jpg_len);
        if (!s.stable) memcpy(w.b[w.n].p, s.jpg, s.jpg_len);
        w.b[w.n].jpg = s.stable ? s.jpg : w.b[w.n].p;
        w.b[w.n++].n = s.jpg_len;
    }
    int T = atoi(argv[3]);
    pthread_t th[64];
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    for (int i = 0; i < T && i < 64; i++) pthread_create(&th[i], NULL, run, &w);
    for (int i = 0; i < T && i < 64; i++) pthread_join(th[i], NULL);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double dt = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    double cpu = (double)(cb.tv_sec - ca.tv_sec) + 1e-9 * (double)(cb.tv_nsec - ca.tv_nsec);
    printf("%.3f %.3f\n", (double)w.n / dt, w.n ? 1000.0 * cpu / (double)w.n : 0.0);
    for (size_t i = 0; i < w.n; i++) free(w.b[i].p);
    free(w.b);
    sa1b_tar_free(t);
    return w.bad;
}
