/*
 * bench-loader.c - throughput of the prefetching loader from page-cached
 * shards, against the bound it cannot beat, measured in the same run:
 *   raw payloads:  the memory-copy bound: T threads memcpy'ing the same
 *                  bytes per image (the image from the mapped shard, the
 *                  masks at R x R bytes) into batch-sized buffers;
 *   JPEG payloads: T x the single-thread TurboJPEG decode rate of the same
 *                  payloads (sa1b_jpeg_decode of the whole S x S canvas).
 *                  The loader decodes only the content of a canvas (not the
 *                  padding rows below it; sa1b_jpeg_decode_region), so it
 *                  can beat this bound; two informative rows follow it: the
 *                  same decode on T threads at once ("par decode") and T x
 *                  the single-thread rate of the content-only decode the
 *                  loader does ("content dec"), the tighter bound.
 * Configurations of issue 5: S=256 (B=32, M=16, R=64) and S=1024 (B=4,
 * M=64, R=256), raw and JPEG, K=1 point, no flip (plus S=256 raw with flip
 * 0.5, K=3).  Images carry more masks than M so that the selection runs.
 * The shards (synthetic content) are written to a temporary directory and
 * removed at the end.  Every figure is the median of 5 runs of each side,
 * interleaved and alternating which side goes first (so that load from
 * other processes hits both alike), each run a few tenths of a second; a
 * loader run is timed in steady state, after one untimed epoch (which
 * faults the fresh batch buffers in, as the memcpy bound's buffers are
 * before its timing, and the pages of the newly mapped shard, as the
 * decode bound's untimed pass does: a training run maps its shards once
 * and pays that once), and the decode bound after one untimed pass (the
 * same sa1b_jpeg_decode, flags and handle reuse as the loader).
 * The last column, "cpu ratio", compares images per CPU-second of the
 * loader with those of the bound (process CPU time, all threads): it does
 * not depend on other load on the machine, the wall-clock ratio does.
 * Usage: bench-loader [THREADS [CONFIG [SIDE]]]  (THREADS default 2: the 2
 * cores of the target; CONFIG: the row number alone, from 0, for profiling;
 * SIDE: "loader" or "bound" runs that side alone, 10 times, for profiling;
 * SA1B_BENCH_DIR=DIR keeps the shards in DIR and reuses them)
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sa1b_image.h"
#include "sa1b_loader.h"
#include "sa1b_shard.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads), user + system. */
static double cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of n values (n odd). */
static double median(const double *v, int n)
{
    double t[16];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, dbl_cmp);
    return t[n / 2];
}

static double median3(double a, double b, double c)
{
    if (a > b) { double t = a; a = b; b = t; }
    if (b > c) { double t = b; b = c; c = t; }
    if (a > b) { double t = a; a = b; b = t; }
    return b;
}

typedef struct cfg {
    const char *name;
    uint32_t S, R, B, M, K, nmasks, n;
    int jpeg;
    double flip;
    uint32_t epochs;   /* passes over the shard per timed run */
} cfg;

#define REPS 5         /* runs of each side per configuration (median) */

static uint32_t fit(uint32_t o, uint32_t m, uint32_t S)
{
    uint64_t v = (2 * (uint64_t)o * S + m) / (2 * (uint64_t)m);
    return v < 1 ? 1 : (uint32_t)v;
}

/* Writes a shard of synthetic scenes: gradient, discs, mild noise; masks
 * are discs inside the content. */
static int write_shard(const char *path, const cfg *c)
{
    sa1b_error e;
    sa1b_shard_params p = {c->S, c->R, c->jpeg ? SA1B_SHARD_JPEG : SA1B_SHARD_RAW, NULL};
    sa1b_shard_writer *w;
    if (sa1b_shard_writer_open(&w, path, &p, &e)) {
        fprintf(stderr, "bench-loader: %s\n", e.msg);
        return -1;
    }
    size_t RR = (size_t)c->R * c->R;
    uint8_t *img = malloc((size_t)c->S * c->S * 3);
    uint8_t *bits = malloc(RR * c->nmasks);
    sa1b_shard_mask_in *mi = calloc(c->nmasks, sizeof *mi);
    sa1b_imgctx *ctx = NULL;
    if (!img || !bits || !mi || (c->jpeg && sa1b_imgctx_new(&ctx, &e))) return -1;
    uint64_t seed = 12345;
    int rc = 0;
    for (uint32_t i = 0; i < c->n && !rc; i++) {
        uint32_t ow = 1500, oh = 1000 + (uint32_t)(lcg(&seed) % 500);
        if (i % 3 == 1) { uint32_t t = ow; ow = oh; oh = t; }
        uint32_t m = ow > oh ? ow : oh;
        uint32_t cw = fit(ow, m, c->S), ch = fit(oh, m, c->S);
        uint32_t wR = fit(ow, m, c->R), hR = fit(oh, m, c->R);
        memset(img, 0, (size_t)c->S * c->S * 3);
        for (uint32_t y = 0; y < ch; y++)
            for (uint32_t x = 0; x < cw; x++) {
                uint8_t *px = img + ((size_t)y * c->S + x) * 3;
                uint32_t n = (uint32_t)(lcg(&seed) & 7);
                px[0] = (uint8_t)(x * 200 / cw + n);
                px[1] = (uint8_t)(y * 200 / ch + n);
                px[2] = (uint8_t)((x + y) * 100 / (cw + ch) + 60 + n);
            }
        memset(bits, 0, RR * c->nmasks);
        for (uint32_t j = 0; j < c->nmasks; j++) {
            uint32_t cx = (uint32_t)(lcg(&seed) % wR), cy = (uint32_t)(lcg(&seed) % hR);
            uint32_t r = 1 + (uint32_t)(lcg(&seed) % (c->R / 4));
            uint8_t col[3] = {(uint8_t)lcg(&seed), (uint8_t)lcg(&seed), (uint8_t)lcg(&seed)};
            uint8_t *b = bits + RR * j;
            uint32_t area = 0;
            for (uint32_t y = cy > r ? cy - r : 0; y < hR && y <= cy + r; y++)
                for (uint32_t x = cx > r ? cx - r : 0; x < wR && x <= cx + r; x++) {
                    int64_t dx = (int64_t)x - cx, dy = (int64_t)y - cy;
                    if (dx * dx + dy * dy <= (int64_t)r * r) {
                        b[(size_t)y * c->R + x] = 1;
                        area++;
                    }
                }
            if (j < 12) /* paint a few discs into the image too */
                for (uint32_t y = 0; y < ch; y++)
                    for (uint32_t x = 0; x < cw; x++) {
                        uint32_t mx = x * c->R / c->S, my = y * c->R / c->S;
                        if (mx < c->R && my < c->R && b[(size_t)my * c->R + mx])
                            memcpy(img + ((size_t)y * c->S + x) * 3, col, 3);
                    }
            mi[j].id = (int64_t)i * 1000 + j;
            mi[j].area = (float)area;
            mi[j].point[0] = mi[j].point[1] = NAN;
            mi[j].bits = b;
        }
        sa1b_shard_sample_in s;
        memset(&s, 0, sizeof s);
        s.image_id = i + 1;
        s.orig_w = ow;
        s.orig_h = oh;
        s.scale = (float)c->S / (float)m;
        s.file_name = "sa_synthetic.jpg";
        uint8_t *enc = NULL;
        size_t len = 0;
        if (c->jpeg) {
            if (sa1b_jpeg_encode(ctx, img, c->S, c->S, 90, SA1B_JPEG_OPTIMIZED, &enc, &len, &e)) { rc = -1; break; }
            s.image = enc;
            s.image_len = len;
        } else {
            s.image = img;
            s.image_len = (size_t)c->S * c->S * 3;
        }
        s.n_masks = c->nmasks;
        s.masks = mi;
        if (sa1b_shard_writer_add(w, &s, &e)) rc = -1;
        free(enc);
    }
    free(img);
    free(bits);
    free(mi);
    sa1b_imgctx_free(ctx);
    if (rc) {
        fprintf(stderr, "bench-loader: %s\n", e.msg);
        sa1b_shard_writer_abort(w);
        return -1;
    }
    if (sa1b_shard_writer_finish(w, &e)) {
        fprintf(stderr, "bench-loader: %s\n", e.msg);
        return -1;
    }
    return 0;
}

/* ---- the loader ------------------------------------------------------------ */

static double run_loader(const char *path, const cfg *c, uint32_t T, uint64_t nbatches, double *wait,
                         double *per_cpu)
{
    const char *pv[1] = {path};
    sa1b_loader_config lc;
    sa1b_loader_config_init(&lc);
    lc.paths = pv;
    lc.n_paths = 1;
    lc.batch_size = c->B;
    lc.max_masks = c->M;
    lc.points = c->K;
    lc.threads = T;
    lc.depth = T + 2;
    lc.flip_prob = c->flip;
    lc.seed = 1;
    double t0 = 0, c0 = 0;
    sa1b_loader_stats st0;
    memset(&st0, 0, sizeof st0);
    sa1b_loader *L;
    sa1b_error e;
    if (sa1b_loader_open(&L, &lc, &e)) {
        fprintf(stderr, "bench-loader: %s\n", e.msg);
        return 0;
    }
    /* warm-up: one epoch (at least depth batches) faults the batch buffers
     * and the mapping in; then steady state */
    uint64_t warm = ((uint64_t)c->n + c->B - 1) / c->B;
    if (warm < lc.depth) warm = lc.depth;
    uint64_t images = 0;
    for (uint64_t i = 0; i < nbatches + warm; i++) {
        sa1b_batch *b;
        if (i == warm) {
            t0 = now();
            c0 = cpu();
            sa1b_loader_stats_get(L, &st0);
        }
        if (sa1b_loader_next(L, &b, &e)) {
            fprintf(stderr, "bench-loader: %s\n", e.msg);
            break;
        }
        if (i >= warm) images += b->count;
        sa1b_loader_release(L, b);
    }
    double dt = now() - t0;
    sa1b_loader_stats st;
    sa1b_loader_stats_get(L, &st);
    *wait = dt > 0 ? (st.consumer_wait_s - st0.consumer_wait_s) / dt : 0;
    sa1b_loader_close(L);
    double dc = cpu() - c0;
    *per_cpu = dc > 0 ? (double)images / dc : 0;
    return dt > 0 ? (double)images / dt : 0;
}

/* ---- the memcpy bound ------------------------------------------------------ */

typedef struct cp_arg {
    const sa1b_shard *sh;
    const cfg *c;
    uint32_t tid, T;
    uint64_t images;
    const uint8_t *msrc; /* M*R*R bytes */
    uint8_t *dst;        /* B rows of image + masks */
} cp_arg;

static void *cp_main(void *p)
{
    cp_arg *a = p;
    const cfg *c = a->c;
    size_t img = (size_t)c->S * c->S * 3, mk = (size_t)c->M * c->R * c->R;
    uint64_t n = sa1b_shard_get_info(a->sh)->n_images;
    for (uint64_t i = a->tid; i < a->images; i += a->T) {
        sa1b_shard_image_view v;
        if (sa1b_shard_image(a->sh, (i * 7919) % n, &v, NULL)) break;
        uint8_t *row = a->dst + (i / a->T % c->B) * (img + mk);
        memcpy(row, v.payload, img);
        memcpy(row + img, a->msrc, mk);
    }
    return NULL;
}

static double run_memcpy(const char *path, const cfg *c, uint32_t T, uint64_t images, double *per_cpu)
{
    sa1b_shard *sh;
    sa1b_error e;
    if (sa1b_shard_open(&sh, path, &e)) return 0;
    size_t img = (size_t)c->S * c->S * 3, mk = (size_t)c->M * c->R * c->R;
    cp_arg a[64];
    pthread_t th[64];
    uint8_t *msrc = malloc(mk);
    memset(msrc, 1, mk);
    for (uint32_t t = 0; t < T; t++) {
        a[t] = (cp_arg){sh, c, t, T, images, msrc, malloc((img + mk) * c->B)};
        memset(a[t].dst, 0, (img + mk) * c->B); /* fault the pages in, as a recycled batch is */
    }
    double t0 = now(), c0 = cpu();
    for (uint32_t t = 0; t < T; t++) pthread_create(&th[t], NULL, cp_main, &a[t]);
    for (uint32_t t = 0; t < T; t++) pthread_join(th[t], NULL);
    double dt = now() - t0, dc = cpu() - c0;
    *per_cpu = dc > 0 ? (double)images / dc : 0;
    for (uint32_t t = 0; t < T; t++) free(a[t].dst);
    free(msrc);
    sa1b_shard_close(sh);
    return dt > 0 ? (double)images / dt : 0;
}

/* ---- the decode bound ------------------------------------------------------ */

/* One image's decode as the bound counts it: the whole S x S canvas
 * (region 0), or only its content, as the loader decodes it (region 1). */
static int decode_one(sa1b_imgctx *ctx, const sa1b_shard_image_view *v, const cfg *c, int region,
                      uint8_t *rgb, sa1b_error *e)
{
    if (!region) return sa1b_jpeg_decode(ctx, v->payload, v->payload_len, rgb, c->S, c->S, e);
    uint32_t m = v->orig_w > v->orig_h ? v->orig_w : v->orig_h;
    return sa1b_jpeg_decode_region(ctx, v->payload, v->payload_len, rgb, (size_t)c->S * 3, c->S,
                                   c->S, fit(v->orig_w, m, c->S), fit(v->orig_h, m, c->S), e);
}

static double run_decode(const char *path, const cfg *c, uint32_t rounds, int region,
                         double *per_cpu)
{
    sa1b_shard *sh;
    sa1b_error e;
    sa1b_imgctx *ctx;
    if (sa1b_shard_open(&sh, path, &e)) return 0;
    if (sa1b_imgctx_new(&ctx, &e)) return 0;
    uint8_t *rgb = malloc((size_t)c->S * c->S * 3);
    uint64_t n = sa1b_shard_get_info(sh)->n_images;
    /* one untimed pass: the mapping faulted in, caches and decoder warm,
     * as in the loader's steady state */
    for (uint64_t i = 0; i < n; i++) {
        sa1b_shard_image_view v;
        if (sa1b_shard_image(sh, i, &v, &e) || decode_one(ctx, &v, c, region, rgb, &e)) break;
    }
    double t0 = now(), c0 = cpu();
    for (uint64_t i = 0; i < n * rounds; i++) {
        sa1b_shard_image_view v;
        if (sa1b_shard_image(sh, i % n, &v, &e) || decode_one(ctx, &v, c, region, rgb, &e)) {
            fprintf(stderr, "bench-loader: %s\n", e.msg);
            break;
        }
    }
    double dt = now() - t0, dc = cpu() - c0;
    *per_cpu = dc > 0 ? (double)(n * rounds) / dc : 0;
    free(rgb);
    sa1b_imgctx_free(ctx);
    sa1b_shard_close(sh);
    return dt > 0 ? (double)(n * rounds) / dt : 0;
}

/* The same decode on T threads at once (each takes every T-th image of
 * `rounds` passes): what T cores really give, shared caches and memory
 * included; informative. */
typedef struct dec_arg {
    const sa1b_shard *sh;
    const cfg *c;
    uint32_t tid, T, rounds;
} dec_arg;

static void *dec_main(void *p)
{
    dec_arg *a = p;
    sa1b_imgctx *ctx;
    sa1b_error e;
    if (sa1b_imgctx_new(&ctx, &e)) return NULL;
    uint8_t *rgb = malloc((size_t)a->c->S * a->c->S * 3);
    uint64_t n = sa1b_shard_get_info(a->sh)->n_images;
    for (uint64_t i = a->tid; i < n * a->rounds; i += a->T) {
        sa1b_shard_image_view v;
        if (sa1b_shard_image(a->sh, i % n, &v, &e) ||
            sa1b_jpeg_decode(ctx, v.payload, v.payload_len, rgb, a->c->S, a->c->S, &e))
            break;
    }
    free(rgb);
    sa1b_imgctx_free(ctx);
    return NULL;
}

static double run_decode_parallel(const char *path, const cfg *c, uint32_t T)
{
    sa1b_shard *sh;
    sa1b_error e;
    if (sa1b_shard_open(&sh, path, &e)) return 0;
    dec_arg a[64];
    pthread_t th[64];
    uint32_t rounds = 2;
    double t0 = now();
    for (uint32_t t = 0; t < T; t++) {
        a[t] = (dec_arg){sh, c, t, T, rounds};
        pthread_create(&th[t], NULL, dec_main, &a[t]);
    }
    for (uint32_t t = 0; t < T; t++) pthread_join(th[t], NULL);
    double dt = now() - t0;
    uint64_t n = sa1b_shard_get_info(sh)->n_images * rounds;
    sa1b_shard_close(sh);
    return dt > 0 ? (double)n / dt : 0;
}

int main(int argc, char **argv)
{
    uint32_t T = argc > 1 ? (uint32_t)atoi(argv[1]) : 2;
    if (T < 1 || T > 64) T = 2;
    static const cfg cfgs[] = {
        {"raw S=256", 256, 64, 32, 16, 1, 24, 384, 0, 0.0, 8},
        {"raw S=256 flip K=3", 256, 64, 32, 16, 3, 24, 384, 0, 0.5, 8},
        {"raw S=1024", 1024, 256, 4, 64, 1, 80, 40, 0, 0.0, 8},
        {"jpeg S=256", 256, 64, 32, 16, 1, 24, 384, 1, 0.0, 2},
        {"jpeg S=1024", 1024, 256, 4, 64, 1, 80, 40, 1, 0.0, 3},
    };
    char dir[256];
    const char *tmp = getenv("TMPDIR"), *keep = getenv("SA1B_BENCH_DIR");
    if (keep && *keep) {
        /* profiling: shards kept (and reused) in an existing directory */
        snprintf(dir, sizeof dir, "%s", keep);
    } else {
        snprintf(dir, sizeof dir, "%s/bench-loader.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("bench-loader: mkdtemp");
            return 1;
        }
    }
    double la[3] = {0, 0, 0};
    if (getloadavg(la, 3) < 0) la[0] = la[1] = la[2] = 0;
    printf("bench-loader: %u worker threads, page-cached shards, median of %d interleaved runs; "
           "load average before: %.2f %.2f %.2f\n", T, REPS, la[0], la[1], la[2]);
    printf("%-20s %4s %4s %4s %4s  %12s  %-12s %12s  %6s  %6s  %-12s %9s\n", "config", "B", "M", "R",
           "K", "loader img/s", "bound", "bound img/s", "ratio", "wait", "target", "cpu ratio");
    int status = 0;
    int only = argc > 2 ? atoi(argv[2]) : -1; /* profiling: one configuration */
    const char *side = argc > 3 ? argv[3] : NULL; /* profiling: "loader" or "bound" alone */
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        const cfg *c = &cfgs[k];
        if (only >= 0 && (size_t)only != k) continue;
        char path[300];
        snprintf(path, sizeof path, "%s/%s-%u.shard", dir, c->jpeg ? "jpeg" : "raw", c->S);
        if (access(path, R_OK) != 0 && write_shard(path, c)) {
            status = 1;
            break;
        }
        /* c->epochs epochs per run (a few tenths of a second each) */
        uint64_t nb = c->epochs * (((uint64_t)c->n + c->B - 1) / c->B);
        if (side) {
            /* profiling: one side alone, 10 runs */
            for (int r = 0; r < 10; r++) {
                double wt, pc;
                double v = strcmp(side, "loader") == 0 ? run_loader(path, c, T, nb, &wt, &pc)
                           : c->jpeg                  ? run_decode(path, c, c->epochs, 0, &pc)
                                                      : run_memcpy(path, c, T, nb * c->B, &pc);
                printf("%s %s: %.1f img/s, %.1f img per cpu-s\n", c->name, side, v, pc);
            }
            continue;
        }
        /* REPS runs of each side, interleaved and alternating which goes
         * first, so that other load on the machine hits both alike */
        double l[REPS], b[REPS], w[REPS], lc[REPS], bc[REPS];
        for (int r = 0; r < REPS; r++) {
            for (int side2 = 0; side2 < 2; side2++) {
                if ((side2 == 0) == (r % 2 == 0))
                    l[r] = run_loader(path, c, T, nb, &w[r], &lc[r]);
                else
                    b[r] = c->jpeg ? T * run_decode(path, c, c->epochs, 0, &bc[r])
                                   : run_memcpy(path, c, T, nb * c->B, &bc[r]);
            }
        }
        double lm = median(l, REPS), bm = median(b, REPS);
        double ratio = bm > 0 ? lm / bm : 0;
        double lcm = median(lc, REPS), bcm = median(bc, REPS);
        double cratio = bcm > 0 ? lcm / bcm : 0;
        double target = c->jpeg ? 0.85 : 0.40;
        char bname[32];
        if (c->jpeg) snprintf(bname, sizeof bname, "%ux decode", T);
        else snprintf(bname, sizeof bname, "memcpy %ut", T);
        printf("%-20s %4u %4u %4u %4u  %12.1f  %-12s %12.1f  %6.2f  %5.1f%%  >= %.2f %-6s %9.2f\n",
               c->name, c->B, c->M, c->R, c->K, lm, bname, bm, ratio, 100 * median(w, REPS),
               target, ratio >= target ? "ok" : "MISSED", cratio);
        if (c->jpeg) {
            double p[3];
            for (int r = 0; r < 3; r++) p[r] = run_decode_parallel(path, c, T);
            double pm = median3(p[0], p[1], p[2]);
            printf("%-20s %4s %4s %4s %4s  %12s  %-12s %12.1f  %6.2f  (decode on %u threads at once)\n", "",
                   "", "", "", "", "", "par decode", pm, pm > 0 ? lm / pm : 0, T);
            double q[3], qc;
            for (int r = 0; r < 3; r++) q[r] = T * run_decode(path, c, c->epochs, 1, &qc);
            double qm = median3(q[0], q[1], q[2]);
            printf("%-20s %4s %4s %4s %4s  %12s  %-12s %12.1f  %6.2f  (%ux the content-only decode "
                   "the loader does)\n", "", "", "", "", "", "", "content dec", qm, qm > 0 ? lm / qm : 0, T);
        }
        fflush(stdout);
    }
    if (only < 0)
        printf("(ratio: wall-clock images/s over the bound's; wait: the consumer's share of time "
               "waiting for batches;\n cpu ratio: images per CPU-second of the loader over the "
               "bound's, which other load on the machine does not skew)\n");
    if (!(keep && *keep)) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "bench-loader: cannot remove %s\n", dir);
    }
    return status;
}
