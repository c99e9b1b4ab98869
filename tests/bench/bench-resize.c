/*
 * bench-resize.c - single-thread speed of the area resize (make bench), on
 * the shapes sa1b-shard meets after the DCT-scaled decode: 1125x750 ->
 * 1024x683 RGB (2250x1500 SA-1B images at --image-size 1024), 282x188
 * -> 256x171 RGB (--image-size 256) and 2000x1500 -> 1024x768 RGB (SA-1B's
 * 4:3 images at --image-size 1024: no DCT scale between 1/2 and 1/1 is
 * faster to decode than 1/1, see pick_scale in pipeline/image.c, so these
 * are decoded whole and this is their resize, 11-12% of sa1b-shard's
 * CPU on them).  Each row times the resize through a
 * resizer kept across calls (as the letterbox does) for the portable C
 * reference (the baseline, measured in this run), the AVX2 kernels and the
 * AVX-512 horizontal pass (where the CPU has them), and the one-shot public
 * sa1b_resize_area (the automatic choice, tables built and freed on every
 * call); median of 5 runs of several resizes each.  Every output is
 * checked identical to the reference's.
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
        {2000, 1500, 1024, 768, 3},
    };
    printf("%-28s %12s %10s %10s %10s %10s %10s %10s\n", "resize", "portable ms", "avx2 ms",
           "speedup", "avx512 ms", "speedup", "one-shot", "speedup");
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t sw = cases[c][0], sh = cases[c][1], dw = cases[c][2], dh = cases[c][3];
        int ch = (int)cases[c][4];
        size_t n = (size_t)sw * sh * ch, m = (size_t)dw * dh * ch;
        uint8_t *src = malloc(n), *ref = malloc(m), *out = malloc(m);
        uint64_t s = 42 + c;
        for (size_t i = 0; i < n; i++) {   /* smooth content plus noise, like a photo */
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            src[i] = (uint8_t)((i / 3 % sw) * 200 / sw + (s >> 60));
        }
        /* the portable reference (the baseline), each SIMD implementation
         * this CPU has, and the one-shot public call (automatic choice) */
        static const int impls[] = {IMAGE_RESIZE_PORTABLE, IMAGE_RESIZE_AVX2, IMAGE_RESIZE_AVX512, -1};
        double t[4];
        int reps = (int)(runs * (1125.0 * 750 / ((double)sw * sh)) / 4) + 1;
        for (int k = 0; k < 4; k++) {
            t[k] = 0;
            if (impls[k] >= 0 && !image_resize_supported(impls[k])) continue;
            image_resizer *r = impls[k] >= 0 ? image_resizer_new() : NULL;
            job j = {src, sw, sh, dw, dh, ch, k ? out : ref, r, impls[k]};
            t[k] = time_ms(&j, reps);
            if (t[k] < 0 || (k && memcmp(ref, out, m))) {
                fprintf(stderr, "bench-resize: %ux%u -> %ux%u: implementation %d failed or differs\n",
                        sw, sh, dw, dh, impls[k]);
                bad = 1;
            }
            image_resizer_free(r);
        }
        char name[64];
        snprintf(name, sizeof name, "%ux%u -> %ux%u x%d", sw, sh, dw, dh, ch);
        printf("%-28s %12.3f", name, t[0]);
        for (int k = 1; k < 4; k++) {
            if (t[k] > 0)
                printf(" %10.3f %9.2fx", t[k], t[0] / t[k]);
            else
                printf(" %10s %10s", "-", "-");
        }
        printf("\n");
        free(src);
        free(ref);
        free(out);
    }
    printf("(single thread, ms per resize, median of 5 runs; speedup against the portable C;"
           " -: not on this CPU; the one-shot call builds its tables every time)\n");
    return bad;
}
