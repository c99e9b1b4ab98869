/*
 * synthetic.c - the deterministic synthetic batch generator and the
 * synthetic data source.
 */
#include "synthetic.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tr_rng.h"
typedef struct shape {
    int kind; /* 0 rectangle, 1 ellipse */
    double cx, cy, rx, ry;
    uint8_t rgb[3];
} shape;

static int inside(const shape *s, double x, double y)
{
    double dx = (x - s->cx) / s->rx, dy = (y - s->cy) / s->ry;
    if (s->kind == 0) return dx >= -1 && dx <= 1 && dy >= -1 && dy <= 1;
    return dx * dx + dy * dy <= 1.0;
}

/* index of the topmost shape covering (x, y) in pixel-centre coordinates, or -1 */
static int owner(const shape *sh, int n, double x, double y, int w, int h)
{
    if (x >= w || y >= h) return -1;
    for (int i = n - 1; i >= 0; i--)
        if (inside(&sh[i], x, y)) return i;
    return -1;
}

/* tr_batch_synthetic with the M shapes' room given: the source's thread
 * allocates nothing (a thread's first malloc maps an arena of its own, 64
 * MB of address space that `ulimit -v` and the planner do not expect) */
static void synthetic_into(tr_batch *b, uint64_t seed, shape *sh)
{
    tr_rng r;
    tr_rng_seed(&r, seed ^ 0x5a1b5a1bull);
    int S = b->S, R = b->R, M = b->M, K = b->K;
    memset(sh, 0, (size_t)M * sizeof *sh);
    for (int i = 0; i < b->B; i++) {
        int w = S, h = S;
        if (i > 0) {
            int side = S / 2 + (int)tr_rng_below(&r, (uint32_t)(S / 2 + 1));
            if (side > S) side = S;
            if (tr_rng_below(&r, 2)) w = side; else h = side;
        }
        b->content[2 * i] = w;
        b->content[2 * i + 1] = h;
        for (int m = 0; m < M; m++) {
            shape *s = &sh[m];
            s->kind = (int)tr_rng_below(&r, 2);
            s->cx = w * (0.15 + 0.7 * tr_rng_uniform(&r));
            s->cy = h * (0.15 + 0.7 * tr_rng_uniform(&r));
            s->rx = S * (0.08 + 0.17 * tr_rng_uniform(&r));
            s->ry = S * (0.08 + 0.17 * tr_rng_uniform(&r));
            for (int c = 0; c < 3; c++) s->rgb[c] = (uint8_t)(40 + tr_rng_below(&r, 216));
        }
        uint8_t bg[3];
        for (int c = 0; c < 3; c++) bg[c] = (uint8_t)tr_rng_below(&r, 80);
        uint8_t *img = b->image + (size_t)i * S * S * 3;
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                uint8_t *px = img + ((size_t)y * S + x) * 3;
                if (x >= w || y >= h) {
                    px[0] = px[1] = px[2] = 0; /* letterbox padding */
                    continue;
                }
                int o = owner(sh, M, x + 0.5, y + 0.5, w, h);
                int noise = (int)tr_rng_below(&r, 24);
                for (int c = 0; c < 3; c++) {
                    int v = (o < 0 ? bg[c] : sh[o].rgb[c]) + noise - 12;
                    px[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
        double f = (double)S / R; /* input pixels per logit pixel */
        for (int m = 0; m < M; m++) {
            size_t pair = (size_t)i * M + m;
            uint8_t *mask = b->masks + pair * R * R;
            int count = 0;
            for (int y = 0; y < R; y++)
                for (int x = 0; x < R; x++) {
                    int in = owner(sh, M, (x + 0.5) * f, (y + 0.5) * f, w, h) == m;
                    mask[y * R + x] = (uint8_t)in;
                    count += in;
                }
            float *pts = b->points + pair * K * 2;
            int32_t *lab = b->labels + pair * K;
            int invalid = count == 0 || (M > 1 && i == b->B - 1 && m == M - 1);
            b->valid[pair] = (uint8_t)!invalid;
            for (int k = 0; k < K; k++) {
                pts[2 * k] = pts[2 * k + 1] = 0.0f;
                lab[k] = -1;
            }
            if (invalid) {
                memset(mask, 0, (size_t)R * R);
                continue;
            }
            for (int k = 0; k < K; k++) {
                int want; /* 1 positive, 0 negative, -1 padding */
                if (k == 0)
                    want = 1;
                else if (pair % 3 == 0)
                    want = -1;
                else if (pair % 3 == 1)
                    want = 0;
                else
                    want = (int)tr_rng_below(&r, 3) - 1;
                if (want < 0) continue;
                if (want == 0 && count == R * R) continue;
                for (int tries = 0; tries < 10000; tries++) {
                    int x = (int)tr_rng_below(&r, (uint32_t)R), y = (int)tr_rng_below(&r, (uint32_t)R);
                    if (mask[y * R + x] != (uint8_t)want) continue;
                    pts[2 * k] = (float)((x + tr_rng_uniform(&r)) * f - 0.5);
                    pts[2 * k + 1] = (float)((y + tr_rng_uniform(&r)) * f - 0.5);
                    lab[k] = want;
                    break;
                }
            }
        }
    }
}

void tr_batch_synthetic(tr_batch *b, uint64_t seed)
{
    shape *sh = calloc((size_t)b->M, sizeof *sh);
    if (!sh) abort();
    synthetic_into(b, seed, sh);
    free(sh);
}

/* The synthetic source makes batch i + 1 on a thread of its own while
 * the step runs on batch i (two batches, handed out in turn): a batch of
 * base (4 images of 1024^2, 64 masks) takes about 80 ms of one core,
 * which a GPU step would otherwise wait for.  The batches are those of
 * tr_batch_synthetic, the same bits with or without the thread. */
typedef struct synth_ctx {
    tr_mem *mem;
    tr_batch *slot[2], *global; /* global: the whole batch of every rank (world > 1) */
    int rank;
    uint64_t seed, i; /* i: the batch next() hands out */
    pthread_t th;
    int th_on;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int job, job_slot, ready_slot, quit; /* job: the thread makes batch job_i into slot job_slot */
    uint64_t job_i, ready_i;             /* ready_slot (>= 0): holds batch ready_i */
    double wait_s;                       /* what next() waited for the thread, in all */
    shape *sh[2];                        /* the shapes' room: [0] the caller's, [1] the thread's */
} synth_ctx;

/* Images [i0, i0 + dst->B) of src into dst. */
static void batch_rows(tr_batch *dst, const tr_batch *src, int i0)
{
    size_t n = (size_t)dst->B, S = (size_t)src->S, R = (size_t)src->R, M = (size_t)src->M, K = (size_t)src->K;
    size_t i = (size_t)i0;
    memcpy(dst->image, src->image + i * S * S * 3, n * S * S * 3);
    memcpy(dst->content, src->content + 2 * i, n * 2 * sizeof(int32_t));
    memcpy(dst->masks, src->masks + i * M * R * R, n * M * R * R);
    memcpy(dst->valid, src->valid + i * M, n * M);
    memcpy(dst->points, src->points + i * M * K * 2, n * M * K * 2 * sizeof(float));
    memcpy(dst->labels, src->labels + i * M * K, n * M * K * sizeof(int32_t));
}

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* batch i of this rank into dst, with shape room sh */
static void synth_fill(synth_ctx *s, tr_batch *dst, uint64_t i, shape *sh)
{
    if (s->global) { /* this rank's rows of the global batch */
        synthetic_into(s->global, s->seed + i, sh);
        batch_rows(dst, s->global, s->rank * dst->B);
    } else {
        synthetic_into(dst, s->seed + i, sh);
    }
}

static void *synth_main(void *arg)
{
    synth_ctx *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->job && !s->quit) pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit) break;
        int slot = s->job_slot;
        uint64_t i = s->job_i;
        pthread_mutex_unlock(&s->mu);
        synth_fill(s, s->slot[slot], i, s->sh[1]);
        pthread_mutex_lock(&s->mu);
        s->job = 0, s->ready_slot = slot, s->ready_i = i;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Batch i: the one the thread made, else made here (the first, or after
 * a seek); then the thread starts on i + 1 in the other slot, the one the
 * caller is done with (it asks for the next batch). */
static int synth_next(void *ctx, tr_batch **out, char *err, size_t err_len)
{
    (void)err, (void)err_len;
    synth_ctx *s = ctx;
    if (!s->th_on) {
        synth_fill(s, s->slot[0], s->i++, s->sh[0]);
        *out = s->slot[0];
        return 1;
    }
    pthread_mutex_lock(&s->mu);
    if (s->job) {
        double t0 = mono_now();
        while (s->job) pthread_cond_wait(&s->cv, &s->mu);
        s->wait_s += mono_now() - t0;
    }
    int slot = 0;
    if (s->ready_slot >= 0 && s->ready_i == s->i) {
        slot = s->ready_slot;
    } else { /* the thread is idle: no job */
        pthread_mutex_unlock(&s->mu);
        synth_fill(s, s->slot[0], s->i, s->sh[0]);
        pthread_mutex_lock(&s->mu);
    }
    s->ready_slot = -1;
    s->job = 1, s->job_slot = 1 - slot, s->job_i = s->i + 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    s->i++;
    *out = s->slot[slot];
    return 1;
}

static void synth_release(void *ctx, tr_batch *b) { (void)ctx, (void)b; }

static double synth_wait(void *ctx)
{
    synth_ctx *s = ctx;
    if (!s->th_on) return 0.0;
    pthread_mutex_lock(&s->mu);
    double w = s->wait_s;
    pthread_mutex_unlock(&s->mu);
    return w;
}

static void synth_position(void *ctx, uint64_t *epoch, uint64_t *consumed)
{
    synth_ctx *s = ctx;
    *epoch = 0;
    *consumed = s->i;
}

static int synth_seek(void *ctx, uint64_t epoch, uint64_t consumed)
{
    (void)epoch;
    ((synth_ctx *)ctx)->i = consumed;
    return 0;
}

static void synth_close(void *ctx)
{
    synth_ctx *s = ctx;
    if (s->th_on) {
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
    }
    tr_batch_free(s->mem, s->slot[0]);
    tr_batch_free(s->mem, s->slot[1]);
    tr_batch_free(s->mem, s->global);
    free(s->sh[0]);
    free(s->sh[1]);
    free(s);
}

static const tr_source_ops synth_ops = {
    .next = synth_next,
    .release = synth_release,
    .wait_seconds = synth_wait,
    .position = synth_position,
    .seek = synth_seek,
    .identity = NULL, /* the same batches for a seed: nothing to compare */
    .close = synth_close,
};

int tr_synthetic_source_open(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R,
                             uint64_t seed)
{
    return tr_synthetic_source_open_rank(src, mem, B, M, K, S, R, seed, 0, 1);
}

int tr_synthetic_source_open_rank(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R,
                                  uint64_t seed, int rank, int world)
{
    synth_ctx *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->mem = mem;
    s->seed = seed;
    s->rank = rank;
    s->slot[0] = tr_batch_alloc(mem, B, M, K, S, R);
    s->slot[1] = tr_batch_alloc(mem, B, M, K, S, R);
    if (world > 1) s->global = tr_batch_alloc(mem, B * world, M, K, S, R);
    s->sh[0] = calloc((size_t)M, sizeof(shape));
    s->sh[1] = calloc((size_t)M, sizeof(shape));
    if (!s->slot[0] || !s->slot[1] || (world > 1 && !s->global) || !s->sh[0] || !s->sh[1]) {
        tr_batch_free(mem, s->slot[0]);
        tr_batch_free(mem, s->slot[1]);
        tr_batch_free(mem, s->global);
        free(s->sh[0]);
        free(s->sh[1]);
        free(s);
        return -1;
    }
    s->ready_slot = -1;
    /* the thread: a small stack (synthetic_into keeps little on it), and
     * no malloc of its own (above) */
    pthread_attr_t at;
    if (pthread_attr_init(&at) == 0) {
        if (pthread_attr_setstacksize(&at, (size_t)256 << 10) == 0 && pthread_mutex_init(&s->mu, NULL) == 0) {
            if (pthread_cond_init(&s->cv, NULL) == 0) {
                s->th_on = pthread_create(&s->th, &at, synth_main, s) == 0;
                if (!s->th_on) pthread_cond_destroy(&s->cv);
            }
            if (!s->th_on) pthread_mutex_destroy(&s->mu);
        }
        pthread_attr_destroy(&at);
    } /* no thread: each batch is made when it is asked for */
    tr_source_init(src, s, &synth_ops);
    return 0;
}
