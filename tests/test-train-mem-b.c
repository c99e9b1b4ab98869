/*
 * test-train-mem-b.c - memory features of the trainer (issue 7, part B):
 * the caching allocator (size classes, reuse without system allocation,
 * empty_cache, accounting of allocated / reserved / peak per category,
 * counting-only blocks), the dynamic 8-bit quantisation maps and their
 * error bounds, AdamW8bit against fp32 AdamW on a small problem, the meta
 * backend's op table, and a steady-state check of a real training loop:
 * over 50 steps of a tiny model on synthetic batches, the allocated bytes
 * after every step equal those after step 2 and no step after the first
 * asks the system for memory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "backend/backend.h"
#include "backend/cuda/backend_cuda.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "model/model.h"
#include "train/optim.h"
#include "common/bytes.h"
#include "backend/cpu/backend_widen.h"
#include "common/quant8.h"
#include "tap.h"
#include "backend/cpu/backend_cpu.h"
#include "backend/meta/backend_meta.h"
#include "registry/registry.h"

static void test_allocator(void)
{
    tr_mem m;
    tr_mem_init(&m);
    tap_ok(tr_mem_class_bytes(0) == 512 && tr_mem_class_bytes(513) == 1024 && tr_mem_class_bytes(65536) == 65536,
           "small classes are multiples of 512");
    int okc = 1;
    for (size_t n = 65537; n < (1u << 26); n = n * 5 / 4 + 17) {
        size_t c = tr_mem_class_bytes(n);
        if (c < n || (double)(c - n) > 0.125 * (double)n || c % 64) okc = 0;
    }
    tap_ok(okc, "large classes: at most 12.5%% rounding, 64-byte multiples");
    unsigned char *a = tr_mem_alloc(&m, TR_MEM_ACTS, 100000);
    float *b = tr_mem_alloc(&m, TR_MEM_PARAMS, 1000);
    tap_ok(a && b && ((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0, "blocks are 64-byte aligned");
    int zero = 1;
    for (int i = 0; i < 100000; i++) zero &= a[i] == 0;
    tap_ok(zero, "fresh block is zero-filled");
    memset(a, 7, 100000);
    tap_ok(m.total == 101000 && m.cur[TR_MEM_ACTS] == 100000 && m.cur[TR_MEM_PARAMS] == 1000,
           "allocated counts the bytes asked for, per category");
    tap_ok(m.reserved == tr_mem_class_bytes(100000) + tr_mem_class_bytes(1000), "reserved counts the classes");
    uint64_t sys = m.n_sys_allocs;
    tr_mem_free(&m, a);
    tap_ok(m.total == 1000 && m.cur[TR_MEM_ACTS] == 0 && m.peak[TR_MEM_ACTS] == 100000 && m.total_peak == 101000,
           "free: allocated drops, peaks stay");
    tap_ok(m.at_peak[TR_MEM_ACTS] == 100000 && m.at_peak[TR_MEM_PARAMS] == 1000, "breakdown at the peak");
    unsigned char *c = tr_mem_alloc(&m, TR_MEM_WORK, 99000); /* same class */
    zero = 1;
    for (int i = 0; i < 99000; i++) zero &= c[i] == 0;
    tap_ok(c == a && m.n_sys_allocs == sys, "same class: the cached block is reused, no system allocation");
    tap_ok(zero, "a reused block is zero-filled again");
    tr_mem_free(&m, c);
    uint64_t rel = tr_mem_empty_cache(&m);
    tap_ok(rel == tr_mem_class_bytes(100000) && m.reserved == tr_mem_class_bytes(1000) && m.n_sys_frees == 1,
           "empty_cache gives back the unused block only (%llu bytes)", (unsigned long long)rel);
    void *d = tr_mem_alloc(&m, TR_MEM_WORK, 100000);
    tap_ok(d && m.n_sys_allocs == sys + 1, "after empty_cache the next request goes to the system");
    tr_mem_free(&m, d);
    tr_mem_free(&m, b);
    tap_ok(m.total == 0, "all given back");
    tr_mem_stats st;
    tr_mem_get_stats(&m, &st);
    char line[160];
    tr_mem_format_line(line, sizeof line, &st);
    tap_ok(strstr(line, "memory: 0B allocated | ") && strstr(line, " reserved | peak 98.6K"), "line: %s", line);
    tr_mem_reset_peak(&m);
    tap_ok(m.total_peak == 0, "reset_peak");
    tr_mem_destroy(&m);

    /* counting-only: real-looking addresses, zeros, the same classes */
    tr_mem_init_hooks(&m, &tr_mem_counting_hooks, 1);
    const float *big = tr_mem_alloc(&m, TR_MEM_ACTS, (size_t)64 << 30); /* 64 GiB, no memory */
    tap_ok(big && big[0] == 0.0f && big[((size_t)16 << 30) - 1] == 0.0f, "counting-only: 64 GiB block reads as zeros");
    tap_ok(m.total == (uint64_t)64 << 30 && m.reserved == tr_mem_class_bytes((size_t)64 << 30), "and is counted");
    tr_mem_free(&m, (void *)big);
    const void *again = tr_mem_alloc(&m, TR_MEM_ACTS, (size_t)63 << 30);
    tap_ok(again == big && m.n_sys_allocs == 1, "counting-only blocks are cached like real ones");
    tr_mem_destroy(&m);

    uint64_t v;
    tap_ok(tr_parse_bytes("16G", &v) == 0 && v == 16ull << 30 && tr_parse_bytes("1.5GiB", &v) == 0 &&
               v == 3ull << 29 && tr_parse_bytes("512M", &v) == 0 && v == 512ull << 20 &&
               tr_parse_bytes("1000", &v) == 0 && v == 1000 && tr_parse_bytes("12Q", &v) < 0 &&
               tr_parse_bytes("-1G", &v) < 0,
           "sizes like 16G, 1.5GiB, 512M, 1000 parse; 12Q, -1G do not");
}

/* hooks that count their calls and hand out host memory */
typedef struct hook_log {
    int allocs, frees, zeros;
} hook_log;

static void *log_alloc(void *ctx, size_t n)
{
    ((hook_log *)ctx)->allocs++;
    return aligned_alloc(64, n);
}

static void log_free(void *ctx, void *p, size_t n)
{
    (void)n;
    ((hook_log *)ctx)->frees++;
    free(p);
}

static void log_zero(void *ctx, void *p, size_t n)
{
    ((hook_log *)ctx)->zeros++;
    memset(p, 0, n);
}

static void test_hooks_and_budget(void)
{
    hook_log lg = {0};
    tr_mem_hooks h = {log_alloc, log_free, log_zero, &lg};
    tr_mem m;
    tr_mem_init_hooks(&m, &h, 0);
    void *a = tr_mem_alloc(&m, TR_MEM_ACTS, 5000), *b = tr_mem_alloc_raw(&m, TR_MEM_WORK, 100000);
    tap_ok(a && b && lg.allocs == 2 && lg.zeros == 1, "blocks come from the hooks; alloc_raw skips the zero hook");
    tr_mem_free(&m, b);
    b = tr_mem_alloc(&m, TR_MEM_WORK, 100000);
    tap_ok(lg.allocs == 2 && lg.zeros == 2, "a cached block is zeroed through the hook, not allocated again");
    tr_mem_free(&m, b);
    tr_mem_empty_cache(&m);
    tap_ok(lg.frees == 1, "empty_cache frees through the hook");
    tr_mem_cat cat;
    uint64_t nb;
    tap_ok(tr_mem_take_failure(&m, &cat, &nb) == 0, "no failure recorded yet");
    /* a budget: what is held from the system may not exceed the limit */
    m.limit = m.reserved + tr_mem_class_bytes(200000);
    void *c = tr_mem_alloc(&m, TR_MEM_ACTS, 200000);
    void *d = tr_mem_alloc(&m, TR_MEM_WORK, 1000);
    tap_ok(c && !d && lg.allocs == 3, "the budget: a block that fits it, then NULL without asking the hooks");
    void *e = tr_mem_alloc(&m, TR_MEM_PARAMS, 3000);
    tap_ok(!e && tr_mem_take_failure(&m, &cat, &nb) == 1 && cat == TR_MEM_WORK && nb == 1000,
           "the first failure is recorded with its category and size");
    tap_ok(tr_mem_take_failure(&m, &cat, &nb) == 0, "and taking it clears it");
    tr_mem_free(&m, c);
    void *f = tr_mem_alloc(&m, TR_MEM_WORK, 200000);
    tap_ok(f == c, "under the budget a cached block still serves");
    tr_mem_free(&m, f);
    /* a mark: the blocks of a category handed out after it, given back at once */
    m.limit = 0;
    uint64_t mk = tr_mem_mark(&m);
    void *w1 = tr_mem_alloc(&m, TR_MEM_WORK, 700), *p1 = tr_mem_alloc(&m, TR_MEM_PARAMS, 700);
    void *w2 = tr_mem_alloc(&m, TR_MEM_WORK, 90000);
    size_t nf = tr_mem_free_since(&m, TR_MEM_WORK, mk);
    tap_ok(w1 && w2 && nf == 2 && m.cur[TR_MEM_WORK] == 0 && m.cur[TR_MEM_PARAMS] == 700 && m.cur[TR_MEM_ACTS] == 5000,
           "free_since: the workspaces after the mark given back, other categories and older blocks kept");
    tr_mem_free(&m, p1);
    tr_mem_free(&m, a);
    tr_mem_destroy(&m);
    tap_ok(lg.frees == lg.allocs, "destroy frees every block through the hook (%d of %d)", lg.frees, lg.allocs);
}

/* A target backend whose attention saves only the softmax statistics and
 * takes no workspace for its backward (as a fused kernel would): the model
 * laid out on the counting backend for it keeps 2 floats per query and head
 * instead of the probabilities, and the planner's peaks for it are those
 * of its own sizes, below the CPU's. */
static size_t stats_saved(size_t Tq, size_t Tk) { (void)Tk; return 2 * Tq; }
static size_t no_workspace(const tr_attn_dims *d)
{
    (void)d;
    return 0;
}

#define FWD_WS (3 << 20)
static size_t fwd_workspace(const tr_attn_dims *d)
{
    (void)d;
    return FWD_WS;
}

static void plan_step(const tr_sizes *sz, tr_mem_stats *st, size_t *att_floats, size_t *enc_att, int *ok)
{
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    tr_backend *be = tr_backend_meta_create(sz, NULL);
    tr_model m;
    char err[256];
    *ok = 0;
    if (!be || tr_model_init(&m, be, &cfg, 2, 3, 2, err, sizeof err) < 0) return;
    tr_batch *b = tr_batch_alloc(&be->mem, 2, 3, 2, cfg.S, 4 * (cfg.S / cfg.P));
    tr_loss L;
    *ok = b && tr_model_step(&m, b, 1, 1.0f, 0, &L, err, sizeof err) == 0;
    *att_floats = 0, *enc_att = 0;
    for (int i = 0; i < m.n_acts; i++) {
        size_t n = strlen(m.ainfo[i].name);
        if (n > 4 && !strcmp(m.ainfo[i].name + n - 4, ".att")) *att_floats += m.ainfo[i].count;
        if (!strcmp(m.ainfo[i].name, "enc.blocks.0.att")) *enc_att = m.ainfo[i].count;
    }
    tr_mem_get_stats(&be->mem, st);
    tr_batch_free(&be->mem, b);
    tr_model_free(&m);
    tr_backend_free(be);
}

static void test_target_sizes(void)
{
    tr_sizes fused = tr_cpu_sizes;
    fused.attention_saved = stats_saved, fused.attention_workspace = no_workspace;
    tr_mem_stats sc, sf;
    size_t ac, af, ec, ef;
    int okc, okf;
    plan_step(&tr_cpu_sizes, &sc, &ac, &ec, &okc);
    plan_step(&fused, &sf, &af, &ef, &okf);
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    size_t GG = (size_t)(cfg.S / cfg.P) * (size_t)(cfg.S / cfg.P);
    tap_ok(okc && okf, "a step on the counting backend for the CPU and for a fused-attention target");
    /* block 0 keeps its activations for both images of the batch */
    tap_ok(ec == 2 * (size_t)cfg.H * GG * GG && ef == 2 * (size_t)cfg.H * 2 * GG,
           "encoder attention saves what its backend says: %zu floats (probabilities) vs %zu (statistics)", ec, ef);
    tap_ok(af < ac && sf.peak[TR_MEM_ACTS] < sc.peak[TR_MEM_ACTS] && sf.total_peak < sc.total_peak,
           "the planner's activations and peak follow the target: %llu vs %llu bytes",
           (unsigned long long)sf.total_peak, (unsigned long long)sc.total_peak);
    tap_ok(sf.peak[TR_MEM_WORK] < sc.peak[TR_MEM_WORK], "and its workspace: %llu vs %llu bytes",
           (unsigned long long)sf.peak[TR_MEM_WORK], (unsigned long long)sc.peak[TR_MEM_WORK]);
    /* a target whose forward attention takes a workspace (the CUDA
     * backend's blocked path): the planner's workspace peak holds it */
    tr_sizes fwd = fused;
    fwd.attention_fwd_workspace = fwd_workspace;
    tr_mem_stats sw;
    size_t aw, ew;
    int okw;
    plan_step(&fwd, &sw, &aw, &ew, &okw);
    tap_ok(okw && sw.peak[TR_MEM_WORK] >= FWD_WS && sw.peak[TR_MEM_WORK] > sf.peak[TR_MEM_WORK] &&
               sw.total_peak > sf.total_peak,
           "a forward attention workspace of %d bytes is planned: workspace peak %llu (%llu without)", FWD_WS,
           (unsigned long long)sw.peak[TR_MEM_WORK], (unsigned long long)sf.peak[TR_MEM_WORK]);
    tap_ok(tr_backend_sizes("cpu") == &tr_cpu_sizes && tr_backend_sizes("nope") == NULL &&
               tr_backend_traits("cpu") == &tr_cpu_traits && tr_backend_traits("cuda") == &tr_cuda_traits &&
               tr_backend_traits("nope") == NULL && !tr_cuda_traits.widens16 && tr_cpu_traits.widens16,
           "the sizes and traits of a backend by name");
}

/* The CUDA backend's two attentions as the planner sees them (plain C,
 * backend_cuda_sizes.c): the blocked path from 64 tokens on, R rows within
 * its budget, the workspaces the target's sizes declare. */
static void test_cuda_attention_sizes(void)
{
    tr_attn_dims base = {.N = 4, .Tq = 4096, .Tk = 4096, .heads = 12, .dh = 64};
    tr_attn_dims edge = {.N = 2, .Tq = 64, .Tk = 63, .heads = 2, .dh = 40};
    tr_attn_dims dec = {.N = 128, .Tq = 7, .Tk = 4096, .heads = 8, .dh = 16};
    tap_ok(tr_cuda_attn_blocked(&base, TR_CUDA_ATTN_AUTO) && !tr_cuda_attn_blocked(&edge, TR_CUDA_ATTN_AUTO) &&
               !tr_cuda_attn_blocked(&dec, TR_CUDA_ATTN_AUTO) && tr_cuda_attn_blocked(&dec, TR_CUDA_ATTN_BLOCKED) &&
               !tr_cuda_attn_blocked(&base, TR_CUDA_ATTN_FUSED),
           "cuda attention: blocked from 64 queries and 64 keys, fused below; a forced path is taken");
    int R = tr_cuda_attn_rows(&base), r7 = tr_cuda_attn_rows(&dec);
    size_t blk = (size_t)12 * (size_t)R * 4096;
    tap_ok(R == 160 && R % 16 == 0 && blk * 12 <= ((size_t)96 << 20) && r7 == 7,
           "cuda attention: %d rows a block at 4096 tokens and 12 heads (%zu MiB of scores, gradients and "
           "probabilities), every query of a 7-token call in one", R, blk * 12 >> 20, r7);
    size_t fwd = tr_cuda_sizes.attention_fwd_workspace(&base), bwd = tr_cuda_sizes.attention_workspace(&base);
    tap_ok(fwd == blk * 8 && bwd == blk * 12 + 2 * (size_t)4096 * 768 * 4 &&
               tr_cuda_sizes.attention_fwd_workspace(&dec) == 0 &&
               tr_cuda_sizes.attention_workspace(&dec) == (size_t)128 * 8 * 7 * 4,
           "cuda attention workspaces: blocked forward %zu, backward %zu bytes (independent of N); fused: none "
           "forward, D per query backward",
           fwd, bwd);
    tr_attn_dims base8 = base;
    base8.N = 64;
    tap_ok(tr_cuda_sizes.attention_workspace(&base8) == bwd && tr_cuda_sizes.attention_saved(4096, 4096) == 8192,
           "cuda attention: the blocked workspace does not grow with the batch; 2 elements saved per query");
}

static void test_maps(void)
{
    float s[256], u[256];
    tr_q8_map(s, 1);
    tr_q8_map(u, 0);
    int sorted = 1;
    for (int i = 1; i < 256; i++) sorted &= s[i] > s[i - 1] && u[i] > u[i - 1];
    tap_ok(sorted, "both maps strictly increasing (256 distinct codes)");
    tap_ok(s[0] == -s[254] && s[255] == 1.0f && u[0] == 0.0f && u[255] == 1.0f && s[127] == 0.0f,
           "signed map: symmetric, 0 and 1; unsigned: [0, 1]");
    tap_ok(fabsf(s[128] - 5.5e-7f) < 1e-12f && fabsf(u[1] - 3.25e-7f) < 1e-12f,
           "smallest magnitudes: 0.55e-6 (signed), 0.325e-6 (unsigned)");
    float gs = 0, gu = 0;
    for (int i = 1; i < 256; i++) {
        gs = fmaxf(gs, 0.5f * (s[i] - s[i - 1]));
        gu = fmaxf(gu, 0.5f * (u[i] - u[i - 1]));
    }
    tap_ok(gs < 0.0071f && gu < 0.0036f, "largest half gap: %.5f signed, %.5f unsigned", gs, gu);
    /* round trips of random blocks: |x - deq(q(x))| <= half gap * absmax;
     * relative error of values within 1e-3 of the absmax <= 1/2^(i+1) of their decade */
    uint64_t r = 12345;
    int bad_abs = 0, bad_rel = 0;
    double worst_rel = 0;
    for (int t = 0; t < 200; t++) {
        float x[256], y[256];
        uint8_t q[256];
        float scale = powf(10.0f, (float)(t % 9) - 4.0f);
        for (int i = 0; i < 256; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            double z = (double)(r >> 11) / 9007199254740992.0;
            /* heavy-tailed, like moments: sign * 10^(-4 z) */
            x[i] = (float)((i & 1 ? -1 : 1) * scale * pow(10.0, -4.0 * z));
        }
        int is_signed = t & 1;
        const float *map = is_signed ? s : u;
        if (!is_signed)
            for (int i = 0; i < 256; i++) x[i] = fabsf(x[i]);
        float a = tr_q8_quantize_block(map, x, q, 256);
        tr_q8_dequantize_block(map, q, a, y, 256);
        for (int i = 0; i < 256; i++) {
            double e = fabs((double)y[i] - x[i]);
            if (e > (is_signed ? gs : gu) * a * 1.0001) bad_abs++;
            if (fabs(x[i]) >= 1e-3 * a) {
                double rel = e / fabs(x[i]);
                worst_rel = rel > worst_rel ? rel : worst_rel;
                if (rel > (is_signed ? 0.30 : 0.16)) bad_rel++;
            }
        }
    }
    tap_ok(bad_abs == 0, "round trip error within half a gap times absmax (%d over)", bad_abs);
    tap_ok(bad_rel == 0, "relative error of values >= 1e-3 absmax bounded (worst %.3f)", worst_rel);
    uint8_t q0[4];
    float z4[4] = {0, 0, 0, 0};
    tap_ok(tr_q8_quantize_block(s, z4, q0, 4) == 0.0f && s[q0[0]] == 0.0f, "an all-zero block stays exactly zero");
}

/* f(w) = 0.5 sum c_i (w_i - t_i)^2, c spread over 2 decades between blocks
 * and half a decade inside one, gradients with the same noise for both
 * (as minibatch gradients): AdamW fp32 vs 8-bit from the same start. */
static void test_adamw8bit(tr_backend *be)
{
    const size_t n = 8192;
    const int block = 256;
    float *w32 = calloc(n, 4), *w8 = calloc(n, 4), *m = calloc(n, 4), *v = calloc(n, 4), *g = calloc(n, 4);
    float *c = calloc(n, 4), *t = calloc(n, 4), *ma = calloc(n / block, 4), *va = calloc(n / block, 4);
    uint8_t *mq = calloc(n, 1), *vq = calloc(n, 1);
    float qs[256], qu[256];
    tr_q8_map(qs, 1);
    tr_q8_map(qu, 0);
    uint8_t zs = tr_q8_encode(qs, 0.0f);
    memset(mq, zs, n);
    uint64_t r = 99;
    for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double z = (double)(r >> 11) / 9007199254740992.0;
        double zb = (double)((i / block * 37) % (n / block)) / (double)(n / block);
        c[i] = (float)pow(10.0, 2.0 * zb - 1.0 + 0.5 * z);
        t[i] = (float)(2.0 * z - 1.0);
        w32[i] = w8[i] = 0.0f;
    }
    double f0 = 0, f32 = 0, f8 = 0, dw = 0, nw = 0;
    for (size_t i = 0; i < n; i++) f0 += 0.5 * c[i] * t[i] * t[i];
    int first_equal = 1;
    const int steps = 300;
    float *noise = calloc(n, 4);
    for (int s = 1; s <= steps; s++) {
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            noise[i] = 0.02f * sqrtf(c[i]) * (float)((double)(r >> 11) / 9007199254740992.0 - 0.5);
        }
        float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, bc1 = (float)(1 - pow(0.9, s)), bc2 = (float)(1 - pow(0.999, s));
        for (size_t i = 0; i < n; i++) g[i] = c[i] * (w32[i] - t[i]) + noise[i];
        be->ops->adamw(be, w32, m, v, g, n, lr, b1, b2, 1e-8f, 0.0f, bc1, bc2);
        for (size_t i = 0; i < n; i++) g[i] = c[i] * (w8[i] - t[i]) + noise[i];
        be->ops->adamw8bit(be, w8, mq, vq, ma, va, qs, qu, g, n, block, lr, b1, b2, 1e-8f, 0.0f, bc1, bc2);
        if (s == 1) first_equal = memcmp(w32, w8, n * 4) == 0;
    }
    for (size_t i = 0; i < n; i++) {
        f32 += 0.5 * c[i] * (w32[i] - t[i]) * (w32[i] - t[i]);
        f8 += 0.5 * c[i] * (w8[i] - t[i]) * (w8[i] - t[i]);
        dw += (double)(w32[i] - w8[i]) * (w32[i] - w8[i]);
        nw += (double)w32[i] * w32[i];
    }
    tap_ok(first_equal, "first step (zero moments) identical to fp32 AdamW");
    tap_ok(f32 < 1e-2 * f0 && f8 < 1e-2 * f0 && f8 < 2 * f32 + 1e-4 * f0,
           "both converge alike: loss %.3g -> fp32 %.3g, 8-bit %.3g", f0, f32, f8);
    tap_ok(sqrt(dw / nw) < 0.02, "8-bit iterate within 2%% of fp32's after %d steps (%.4f)", steps, sqrt(dw / nw));
    free(w32), free(w8), free(m), free(v), free(g), free(c), free(t), free(ma), free(va), free(mq), free(vq), free(noise);
}

static void test_meta_ops(void)
{
    tr_backend *mb = tr_backend_meta_create(NULL, NULL);
    typedef void (*fp)(void);
    const fp *slots = (const fp *)(const void *)mb->ops;
    int missing = 0;
    for (size_t i = 0; i < sizeof *mb->ops / sizeof(fp); i++) missing += slots[i] == NULL;
    tap_ok(missing == 0, "meta backend sets every op of tr_ops (%d missing)", missing);
    slots = (const fp *)(const void *)mb->fp32;
    missing = 0;
    for (size_t i = 0; i < sizeof *mb->fp32 / sizeof(fp); i++) missing += slots[i] == NULL;
    tap_ok(missing == 0, "and every fp32 kernel it widens for (%d missing)", missing);
    tr_backend_free(mb);
}

/* 50 steps of the training loop (forward, backward, AdamW8bit) on synthetic
 * batches: allocated after each step == after step 2; no system allocation
 * after step 1. */
static void test_steady_state(tr_backend *be)
{
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    tr_model m;
    char err[256] = "";
    int B = 1, M = 2, K = 2, R = 4 * (cfg.S / cfg.P);
    if (tr_model_init(&m, be, &cfg, B, M, K, err, sizeof err) < 0) {
        tap_ok(0, "model: %s", err);
        return;
    }
    tr_model_init_params(&m, 1);
    tr_optim_config oc;
    tr_optim_defaults(&oc, 1e-3, 50);
    oc.kind = TR_OPTIM_ADAMW8BIT;
    oc.min_8bit = 1024;
    tr_optim o;
    int orc = tr_optim_init(&o, &m, &oc);
    tap_ok(orc == 0 && o.n8 > 0, "AdamW8bit state: %zu 8-bit and %zu fp32 moments", o.n8,
           o.n32);
    tr_data_source src;
    tr_synthetic_source_open(&src, &be->mem, B, M, K, cfg.S, R, 7);
    uint64_t alloc2 = 0, sys1 = 0;
    int same = 1, nosys = 1;
    double first = 0, last = 0;
    for (int s = 1; s <= 50; s++) {
        tr_batch *b;
        tr_source_next(&src, &b, err, sizeof err);
        tr_model_forward(&m, b, err, sizeof err);
        tr_loss L = tr_model_backward(&m, b);
        tr_source_release(&src, b);
        tr_optim_step(&o, &m, NULL);
        if (s <= 5) first += L.loss / 5;
        if (s > 45) last += L.loss / 5;
        tr_mem_stats st;
        tr_mem_get_stats(&be->mem, &st);
        if (s == 1) sys1 = st.n_sys_allocs;
        else if (st.n_sys_allocs != sys1) nosys = 0;
        if (s == 2) alloc2 = st.total;
        else if (s > 2 && st.total != alloc2) same = 0;
    }
    tap_ok(same, "allocated bytes after steps 3..50 equal those after step 2 (%llu)", (unsigned long long)alloc2);
    tap_ok(nosys, "no system allocation after step 1 (%llu blocks)", (unsigned long long)sys1);
    tap_ok(last < first, "AdamW8bit: the loss falls (%.4f -> %.4f)", first, last);
    tr_source_close(&src);
    tr_optim_free(&o, &m);
    tr_model_free(&m);
    tap_ok(be->mem.total == 0, "every tensor given back (%llu bytes left)", (unsigned long long)be->mem.total);
}

/* The second moment's zero point: an element whose v is tiny against its
 * block's absmax must not store v = 0 while its m is not 0, or the next
 * step with a zero gradient divides m by eps alone. */
static void test_v_zero_point(void)
{
    float qs[256], qu[256];
    tr_q8_map(qs, 1);
    tr_q8_map(qu, 0);
    int bad = 0;
    for (int k = 0; k < 40; k++) {
        float x = powf(10.0f, -(float)k * 0.5f); /* 1 .. 1e-19.5 */
        uint8_t c = tr_q8_encode_v(qu, x), c0 = tr_q8_encode(qu, x);
        if (c == 0 || (c0 != 0 && c != c0)) bad++;
    }
    tap_ok(bad == 0 && tr_q8_encode_v(qu, 0.0f) == tr_q8_encode(qu, 0.0f) && qu[tr_q8_encode_v(qu, 0.0f)] == 0.0f,
           "v encoding: a positive v never gets the zero code, 0 stays 0, else nearest (%d bad)", bad);
    /* a block: element 0 with a large gradient, element 1 with a tiny one,
     * then element 1 gets no gradient for a few steps */
    enum { N = 256 };
    float w[N], g[N], ma = 0, va = 0;
    uint8_t mq[N], vq[N];
    memset(w, 0, sizeof w);
    memset(mq, tr_q8_encode(qs, 0.0f), sizeof mq);
    memset(vq, tr_q8_encode(qu, 0.0f), sizeof vq);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-12f;
    float worst = 0;
    for (int s = 1; s <= 6; s++) {
        for (int i = 0; i < N; i++) g[i] = i == 0 ? 100.0f : 0.0f;
        if (s == 1) g[1] = 1e-4f;
        float w1 = w[1];
        tr_adamw8bit_block(w, mq, vq, &ma, &va, qs, qu, g, N, lr, b1, b2, eps, 0.0f,
                           (float)(1 - pow(b1, s)), (float)(1 - pow(b2, s)));
        float d = fabsf(w[1] - w1);
        worst = d > worst ? d : worst;
    }
    tap_ok(worst <= 10 * lr, "a tiny v beside a large one: element steps stay within 10 lr (largest %.3g)",
           (double)worst);
}

int main(void)
{
    char err[256];
    tr_backend *be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!be) {
        printf("Bail out! %s\n", err);
        return 1;
    }
    test_allocator();
    test_hooks_and_budget();
    test_target_sizes();
    test_cuda_attention_sizes();
    test_maps();
    test_adamw8bit(be);
    test_v_zero_point();
    test_meta_ops();
    test_steady_state(be);
    tr_backend_free(be);
    return tap_done();
}
