/*
 * bench-resize.c - single-thread speed of the area resize (make bench), on
 * the shapes sa1b-shard meets after the DCT-scaled decode: 1125x750 ->
 * 1024x683 RGB (2250x1500 SA-1B images at --image-size 1024) and 282x188
 * -> 256x171 RGB (--image-size 256).  Each row times the resize through a
 * resizer kept across calls (as the letterbox does) for the portable C
 * reference (the baseline, measured in this run) and for the automatic
 * choice (the SIMD kernels where the CPU has them), and the one-shot
 * public sa1b_resize_area (tables built and freed on every call); median of
 * 5 runs of several resizes each.  Outputs are checked identical first.
 * Usage: bench-resize [RUNS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image_internal.h"
#include "sa1b_image.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct job {
    const uint8_t *src;
    uint32_t sw, sh, dw, dh;
    int ch;
    uint8_t *dst;
    image_resizer *r;
    int impl;   /* -1: sa1b_resize_area */
} job;

static int run_once(const job *j)
{
    if (j->impl < 0) return sa1b_resize_area(j->src, j->sw, j->sh, j->dst, j->dw, j->dh, j->ch, NULL);
    return image_resize(j->r, j->src, j->sw, j->sh, j->dst, (size_t)j->dw * j->ch, j->dw, j->dh,
                        j->ch, j->impl, NULL, NULL);
}

/* Median milliseconds per resize over 5 runs of reps resizes. */
static double time_ms(const job *j, int reps)
{
    double t[5];
    if (run_once(j)) return -1;   /* warm-up: tables, ring, caches */
    for (int r = 0; r < 5; r++) {
        double a = now();
        for (int i = 0; i < reps; i++)
            if (run_once(j)) return -1;
        t[r] = (now() - a) * 1e3 / reps;
    }
    qsort(t, 5, sizeof t[0], dcmp);
    return t[2];
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 20;
    if (runs < 1) runs = 1;
    static const uint32_t cases[][5] = {
        {1125, 750, 1024, 683, 3},
        {282, 188, 256, 171, 3},
    };
    printf("%-28s %12s %12s %10s %14s %10s\n", "resize", "portable ms", "auto ms", "speedup",
           "one-shot ms", "speedup");
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t sw = cases[c][0], sh = cases[c][1], dw = cases[c][2], dh = cases[c][3];
        int ch = (int)cases[c][4];
        size_t n = (size_t)sw * sh * ch, m = (size_t)dw * dh * ch;
        uint8_t *src = malloc(n), *a = malloc(m), *b = malloc(m), *o = malloc(m);
        uint64_t s = 42 + c;
        for (size_t i = 0; i < n; i++) {   /* smooth content plus noise, like a photo */
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            src[i] = (uint8_t)((i / 3 % sw) * 200 / sw + (s >> 60));
        }
        image_resizer *rp = image_resizer_new(), *ra = image_resizer_new();
        job jp = {src, sw, sh, dw, dh, ch, a, rp, IMAGE_RESIZE_PORTABLE};
        job ja = {src, sw, sh, dw, dh, ch, b, ra, IMAGE_RESIZE_AUTO};
        job jo = {src, sw, sh, dw, dh, ch, o, NULL, -1};
        int reps = (int)(runs * (1125.0 * 750 / ((double)sw * sh)) / 4) + 1;
        double tp = time_ms(&jp, reps), ta = time_ms(&ja, reps), to = time_ms(&jo, reps);
        if (tp < 0 || ta < 0 || to < 0 || memcmp(a, b, m) || memcmp(a, o, m)) {
            fprintf(stderr, "bench-resize: %ux%u -> %ux%u: failed or outputs differ\n", sw, sh,
                    dw, dh);
            bad = 1;
        }
        char name[64];
        snprintf(name, sizeof name, "%ux%u -> %ux%u x%d", sw, sh, dw, dh, ch);
        printf("%-28s %12.3f %12.3f %9.2fx %14.3f %9.2fx\n", name, tp, ta, tp / ta, to, tp / to);
        image_resizer_free(rp);
        image_resizer_free(ra);
        free(src);
        free(a);
        free(b);
        free(o);
    }
    printf("(single thread, ms per resize, median of 5 runs; auto = %s)\n",
           image_resize_supported(IMAGE_RESIZE_AVX2) ? "AVX2 kernels" : "portable C");
    return bad;
}
