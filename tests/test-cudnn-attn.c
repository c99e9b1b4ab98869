/*
 * test-cudnn-attn.c - cuDNN's SDPA attention (trainer/backend/cuda/
 * cudnn_attn.h) without a GPU (issue 40):
 *  1. what cuDNN is given: a double-precision attention that reads q, k, v
 *     and writes out and the statistics through exactly the dims and
 *     strides the module gives cuDNN (tr_cudnn_attn_layout) matches the
 *     CPU backend's attention_forward, and its log-sum-exp statistics
 *     [N, heads, Tq] match those recomputed from the CPU's probabilities,
 *     for tiny's and small's attention calls (every build);
 *  2. the real libcudnn, where one is installed: every attention call of
 *     tiny, small and base (the encoder's self-attention, the decoder's
 *     token-to-image, image-to-token and self), bf16 and fp16, forward and
 *     backward, built as far as cuDNN goes without a device (the tensors,
 *     the SDPA operation and the operation graph finalized); head dims
 *     cuDNN refuses refused with one line; open without a device fails
 *     with one line (the caller's fallback);
 *  3. a stand-in libcudnn (fake-cudnn.c): too old, or failing at
 *     cudnnCreate, gives one line and no instance; the engine choice
 *     (non-deterministic engines and engines over the workspace bound
 *     passed over, unless the flag), the plan cached per shape, the
 *     variant pack of a forward and a backward (uids, pointers, the
 *     caller's workspace), unaligned operands and a short workspace
 *     refused before anything runs.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cudnn_attn.h"
#include "common/precision.h"
#include "model/model.h"
#include "registry/registry.h"
#include "tap.h"
#ifdef FAKE_CUDNN
#include "fake-cudnn.h" /* fake_cudnn_last: resolved from the stand-in with dlsym */
#endif

typedef struct shape {
    char name[48];
    tr_attn_dims d;
} shape;

static tr_attn_dims dec_dims(int N, int Tq, int Tk, int Ci, int heads)
{
    tr_attn_dims d = {.N = N, .Tq = Tq, .Tk = Tk, .heads = heads, .dh = Ci / heads, .ldq = Ci, .ldk = Ci,
                      .ldv = Ci, .ldo = Ci};
    d.sq = d.so = (size_t)Tq * Ci;
    d.sk = d.sv = (size_t)Tk * Ci;
    return d;
}

/* The four attention calls of preset cfg (model_seq.c's dims) for B
 * images, pairs pairs and K points: 0 encoder, 1 token to image, 2 image
 * to token, 3 the tokens' self-attention. */
static int shapes_of(const char *cfg_name, int B, int pairs, int K, shape out[4])
{
    tr_config c;
    if (tr_config_preset(cfg_name, &c)) return -1;
    tr_geom g = tr_geom_of(&c, K);
    int GG = g.GG, E = c.E, T = g.T, C = c.C;
    tr_attn_dims e = {.N = B, .Tq = GG, .Tk = GG, .heads = c.H, .dh = E / c.H, .ldq = 3 * E, .ldk = 3 * E,
                      .ldv = 3 * E, .ldo = E, .sq = (size_t)GG * 3 * E, .sk = (size_t)GG * 3 * E,
                      .sv = (size_t)GG * 3 * E, .so = (size_t)GG * E};
    out[0].d = e;
    out[1].d = dec_dims(pairs, T, GG, C / 2, c.h);
    out[2].d = dec_dims(pairs, GG, T, C / 2, c.h);
    out[3].d = dec_dims(pairs, T, T, C, c.h);
    static const char *kind[4] = {"encoder", "token-to-image", "image-to-token", "token self"};
    for (int i = 0; i < 4; i++)
        snprintf(out[i].name, sizeof out[i].name, "%s %s %dx%d h%d dh%d", cfg_name, kind[i], out[i].d.Tq,
                 out[i].d.Tk, out[i].d.heads, out[i].d.dh);
    return 0;
}

static size_t at(const int64_t s[4], int64_t n, int64_t h, int64_t t, int64_t e)
{
    return (size_t)(n * s[0] + h * s[1] + t * s[2] + e * s[3]);
}

/* ---- 1. the layout against the CPU backend ------------------------------ */

/* out and stats of attention in double, reading and writing through
 * tr_cudnn_attn_layout's numbers only */
static void ref_attention(const tr_attn_dims *d, const float *q, const float *k, const float *v, double *out,
                          double *stats)
{
    int64_t dq[4], sq[4], dk[4], sk[4], dv[4], sv[4], dO[4], so[4], dS[4], ss[4];
    tr_cudnn_attn_layout(d, TR_CUDNN_T_Q, dq, sq);
    tr_cudnn_attn_layout(d, TR_CUDNN_T_K, dk, sk);
    tr_cudnn_attn_layout(d, TR_CUDNN_T_V, dv, sv);
    tr_cudnn_attn_layout(d, TR_CUDNN_T_O, dO, so);
    tr_cudnn_attn_layout(d, TR_CUDNN_T_STATS, dS, ss);
    double scale = 1.0 / sqrt((double)dq[3]);
    double *s = malloc((size_t)dk[2] * sizeof *s);
    for (int64_t n = 0; n < dq[0]; n++)
        for (int64_t h = 0; h < dq[1]; h++)
            for (int64_t t = 0; t < dq[2]; t++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < dk[2]; j++) {
                    double acc = 0;
                    for (int64_t e = 0; e < dq[3]; e++)
                        acc += (double)q[at(sq, n, h, t, e)] * (double)k[at(sk, n, h, j, e)];
                    s[j] = acc * scale;
                    if (s[j] > mx) mx = s[j];
                }
                for (int64_t j = 0; j < dk[2]; j++) sum += exp(s[j] - mx);
                stats[at(ss, n, h, t, 0)] = mx + log(sum);
                for (int64_t e = 0; e < dv[3]; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < dk[2]; j++) acc += exp(s[j] - mx) / sum * (double)v[at(sv, n, h, j, e)];
                    out[at(so, n, h, t, e)] = acc;
                }
            }
    free(s);
}

static float *rnd(size_t n, uint32_t *st)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        *st = *st * 1664525u + 1013904223u;
        p[i] = (float)((*st >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
    }
    return p;
}

static void test_layout(tr_backend *cpu, const shape *sh)
{
    const tr_attn_dims *d = &sh->d;
    uint32_t st = 12345u + (uint32_t)d->Tq * 7u + (uint32_t)d->Tk;
    int enc = d->ldq != d->heads * d->dh; /* q, k, v in one row of qkv */
    size_t nq = (size_t)d->N * d->sq, nk = (size_t)d->N * d->sk, nv = (size_t)d->N * d->sv;
    float *qkv = enc ? rnd(nq, &st) : NULL;
    float *q = enc ? qkv : rnd(nq, &st), *k = enc ? qkv + d->dh * d->heads : rnd(nk, &st);
    float *v = enc ? qkv + 2 * d->dh * d->heads : rnd(nv, &st);
    size_t no = (size_t)d->N * d->so, nst = (size_t)d->N * d->heads * d->Tq;
    float *out = calloc(no, sizeof *out);
    float *att = calloc((size_t)d->N * d->heads * cpu->sizes->attention_saved(d->Tq, d->Tk), sizeof *att);
    double *ro = malloc(no * sizeof *ro), *rs = malloc(nst * sizeof *rs);
    for (size_t i = 0; i < no; i++) ro[i] = NAN;
    for (size_t i = 0; i < nst; i++) rs[i] = NAN;
    cpu->ops->attention_forward(cpu, tr_f32(out), tr_f32(att), tr_f32(q), tr_f32(k), tr_f32(v), d);
    ref_attention(d, q, k, v, ro, rs);
    /* out: every element of every head of every row, as the contract places it */
    double e_out = 0;
    size_t unwritten = 0;
    for (int n = 0; n < d->N; n++)
        for (int t = 0; t < d->Tq; t++)
            for (int c = 0; c < d->heads * d->dh; c++) {
                size_t i = (size_t)n * d->so + (size_t)t * d->ldo + (size_t)c;
                if (isnan(ro[i])) unwritten++;
                else if (fabs(ro[i] - out[i]) > e_out) e_out = fabs(ro[i] - out[i]);
            }
    tap_ok(unwritten == 0 && e_out < 2e-6, "%s: the attention read through cuDNN's strides matches the CPU's "
           "(max error %.2g, %zu unwritten)", sh->name, e_out, unwritten);
    /* the statistics [N, heads, Tq] against the CPU's probabilities: lse = s - log p at each row's largest p */
    double e_lse = 0, scale = 1.0 / sqrt((double)d->dh);
    unwritten = 0;
    for (int n = 0; n < d->N; n++)
        for (int h = 0; h < d->heads; h++)
            for (int t = 0; t < d->Tq; t++) {
                const float *p = att + (((size_t)n * d->heads + h) * d->Tq + t) * d->Tk;
                int jm = 0;
                for (int j = 1; j < d->Tk; j++)
                    if (p[j] > p[jm]) jm = j;
                double s = 0;
                for (int e = 0; e < d->dh; e++)
                    s += (double)q[(size_t)n * d->sq + (size_t)t * d->ldq + (size_t)h * d->dh + e] *
                         (double)k[(size_t)n * d->sk + (size_t)jm * d->ldk + (size_t)h * d->dh + e];
                double lse = s * scale - log((double)p[jm]);
                double r = rs[((size_t)n * d->heads + h) * d->Tq + t];
                if (isnan(r)) unwritten++;
                else if (fabs(r - lse) > e_lse) e_lse = fabs(r - lse);
            }
    tap_ok(unwritten == 0 && e_lse < 1e-5, "%s: log-sum-exp [N, heads, Tq] matches the CPU's probabilities "
           "(max error %.2g, %zu unwritten)", sh->name, e_lse, unwritten);
    if (enc) free(qkv);
    else free(q), free(k), free(v);
    free(out), free(att), free(ro), free(rs);
}

static int one_line(const char *s) { return *s && !strchr(s, '\n') && !strchr(s, '\r'); }

/* head dims cuDNN's SDPA does not take, each refused with one line naming it */
static void test_refused(tr_cudnn_attn *ca)
{
    static const int bad[] = {4, 20, 136, 256};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tr_attn_dims d = dec_dims(2, 4, 64, 8 * bad[i], 8);
        char err[512] = "", want[32];
        snprintf(want, sizeof want, "head dim %d", bad[i]);
        int rc = tr_cudnn_attn_supported(&d, TR_PREC_BF16, err, sizeof err);
        tap_ok(rc == TR_CUDNN_EUNSUPPORTED && one_line(err) && strstr(err, want),
               "head dim %d refused with one line: %s", bad[i], err);
        if (ca) {
            int stage = -1;
            err[0] = 0;
            rc = tr_cudnn_attn_graph(ca, &d, TR_PREC_FP16, 1, &stage, NULL, err, sizeof err);
            tap_ok(rc == TR_CUDNN_EUNSUPPORTED && stage == TR_CUDNN_STAGE_NONE && strstr(err, want),
                   "head dim %d: no descriptor built (%s)", bad[i], err);
        }
    }
    tr_attn_dims d = dec_dims(2, 4, 64, 64, 4);
    char err[512] = "";
    d.ldq = 68, d.sq = 4 * 68;
    tap_ok(tr_cudnn_attn_supported(&d, TR_PREC_FP16, err, sizeof err) == TR_CUDNN_EUNSUPPORTED && one_line(err),
           "a row stride not a multiple of 8 refused: %s", err);
    d = dec_dims(2, 4, 64, 64, 4);
    tap_ok(tr_cudnn_attn_supported(&d, TR_PREC_FP32, err, sizeof err) == TR_CUDNN_EUNSUPPORTED && one_line(err),
           "fp32 operands refused: %s", err);
    tap_ok(tr_cudnn_attn_supported(&d, TR_PREC_BF16, err, sizeof err) == 0, "dh 16, bf16 taken");
}

/* ---- 2. the real library ------------------------------------------------- */

static const char *stage_name(int s)
{
    static const char *n[] = {"nothing", "tensors", "SDPA operation", "operation graph", "execution plan"};
    return s >= 0 && s <= TR_CUDNN_STAGE_PLAN ? n[s] : "?";
}

static void test_real(void)
{
    tr_cudnn_attn *ca = NULL;
    char err[1024] = "";
    int rc = tr_cudnn_attn_open(&ca, NULL, NULL, TR_CUDNN_NO_HANDLE, err, sizeof err);
    if (rc == TR_CUDNN_ELOAD) {
        tap_skip(1, err);
        test_refused(NULL);
        return;
    }
    if (!tap_ok(rc == 0 && ca, "libcudnn loaded: %s", rc ? err : "ok")) return;
    tap_diag("cuDNN %zu from %s", tr_cudnn_attn_version(ca), tr_cudnn_attn_library(ca));
    tap_ok(tr_cudnn_attn_version(ca) >= TR_CUDNN_MIN_VERSION && strchr(tr_cudnn_attn_library(ca), '/'),
           "version %zu >= %d, its path recorded", tr_cudnn_attn_version(ca), TR_CUDNN_MIN_VERSION);
    static const char *cfgs[] = {"tiny", "small", "base"};
    int n_composite = 0;
    for (int c = 0; c < 3; c++) {
        shape sh[4];
        shapes_of(cfgs[c], 4, 64, 2, sh);
        for (int i = 0; i < 4; i++)
            for (int dt = TR_PREC_BF16; dt <= TR_PREC_FP16; dt++)
                for (int bwd = 0; bwd < 2; bwd++) {
                    int stage = -1;
                    err[0] = 0;
                    char msg[1024] = "";
                    int composite = -1;
                    rc = tr_cudnn_attn_graph(ca, &sh[i].d, dt, bwd, &stage, &composite, err, sizeof err);
                    n_composite += composite == 1;
                    snprintf(msg, sizeof msg, "%s %s %s: %s%s finalized without a device%s%s", sh[i].name,
                             tr_prec_name(dt), bwd ? "backward" : "forward", composite == 1 ? "composite " : "",
                             stage_name(stage), rc ? "; then " : "", rc ? err : "");
                    if (bwd && tr_cudnn_attn_version(ca) < TR_CUDNN_MIN_VERSION_BWD)
                        tap_ok(rc == TR_CUDNN_EUNSUPPORTED && one_line(err), "%s (before the SDPA backward)", msg);
                    else
                        tap_ok(rc == 0 && stage == TR_CUDNN_STAGE_GRAPH, "%s", msg);
                }
    }
    if (n_composite)
        tap_diag("cuDNN %zu: %d backward calls as the composite graph (its graphs do not take the SDPA backward "
                 "operation)", tr_cudnn_attn_version(ca), n_composite);
    test_refused(ca);
    tr_cudnn_attn_close(ca);
    /* with a handle: on this machine (no device) one line and no instance; with a device, plans */
    err[0] = 0;
    rc = tr_cudnn_attn_open(&ca, NULL, NULL, 0, err, sizeof err);
    if (rc == 0) {
        shape sh[4];
        shapes_of("base", 4, 64, 2, sh);
        int stage = -1;
        rc = tr_cudnn_attn_graph(ca, &sh[0].d, TR_PREC_BF16, 1, &stage, NULL, err, sizeof err);
        tap_ok(rc == 0 && stage == TR_CUDNN_STAGE_PLAN, "a device: base's encoder backward has a plan (%s)",
               rc ? err : "ok");
        tr_cudnn_attn_close(ca);
    } else {
        tap_ok(rc == TR_CUDNN_EHANDLE && !ca && one_line(err), "no device: open fails with one line: %s", err);
    }
}

/* ---- 3. the stand-in library ---------------------------------------------- */

#ifdef FAKE_CUDNN
static void test_fake(void)
{
    tr_cudnn_attn *ca = (tr_cudnn_attn *)&ca;
    char err[1024] = "";
    setenv("FAKE_CUDNN_VERSION", "91206", 1);
    int rc = tr_cudnn_attn_open(&ca, FAKE_CUDNN, NULL, 0, err, sizeof err);
    tap_ok(rc == TR_CUDNN_EVERSION && !ca && one_line(err) && strstr(err, "9.12.6") && strstr(err, "9.13.0") &&
               strstr(err, "libfakecudnn"),
           "too old a cuDNN (9.12): one line, no instance: %s", err);
    unsetenv("FAKE_CUDNN_VERSION");
    /* the forward's first version, before the backward's: the backward refused before anything is built */
    setenv("FAKE_CUDNN_VERSION", "91602", 1);
    setenv("FAKE_CUDNN_ENGINES", "D:0", 1);
    rc = tr_cudnn_attn_open(&ca, FAKE_CUDNN, NULL, 0, err, sizeof err);
    if (!rc) {
        _Alignas(16) static char m[12][64];
        shape sh[4];
        shapes_of("tiny", 2, 3, 2, sh);
        int rb = tr_cudnn_attn_backward(ca, &sh[0].d, TR_PREC_BF16, m[7], m[8], m[9], m[6], m[0], m[1], m[2], m[3],
                                        (const float *)m[4], NULL, 0, err, sizeof err);
        tap_ok(rb == TR_CUDNN_EUNSUPPORTED && one_line(err) && strstr(err, "9.16.2") && strstr(err, "9.17.0"),
               "cuDNN 9.16: the backward refused with one line: %s", err);
        rb = tr_cudnn_attn_forward(ca, &sh[0].d, TR_PREC_BF16, m[3], (float *)m[4], m[0], m[1], m[2], NULL, 0, err,
                                   sizeof err);
        tap_ok(rb == 0, "cuDNN 9.16: the forward taken (%s)", rb ? err : "ok");
        tr_cudnn_attn_close(ca);
    } else {
        tap_ok(0, "cuDNN 9.16 opens: %s", err);
    }
    unsetenv("FAKE_CUDNN_VERSION");
    unsetenv("FAKE_CUDNN_ENGINES");
    setenv("FAKE_CUDNN_CREATE", "fail", 1);
    rc = tr_cudnn_attn_open(&ca, FAKE_CUDNN, NULL, 0, err, sizeof err);
    tap_ok(rc == TR_CUDNN_EHANDLE && !ca && one_line(err) && strstr(err, "cudnnCreate") &&
               strstr(err, "NOT_INITIALIZED"),
           "cudnnCreate failing: one line, no instance: %s", err);
    unsetenv("FAKE_CUDNN_CREATE");
    rc = tr_cudnn_attn_open(&ca, "/nonexistent/libcudnn.so.9", NULL, 0, err, sizeof err);
    tap_ok(rc == TR_CUDNN_ELOAD && !ca && one_line(err), "no library: one line: %s", err);

    rc = tr_cudnn_attn_open(&ca, FAKE_CUDNN, NULL, 0, err, sizeof err);
    if (!tap_ok(rc == 0 && ca, "the stand-in opens: %s", rc ? err : "ok")) return;
    shape sh[4];
    shapes_of("base", 4, 64, 2, sh);
    const tr_attn_dims *d = &sh[0].d;
    size_t bound = tr_cudnn_attn_workspace_bound(d, 0);
    char engines[128];
    /* engine 0 non-deterministic, 1 over the bound, 2 refused at finalize, 3 fits */
    snprintf(engines, sizeof engines, "N:0,D:%zu,F:0,D:%zu", bound + 1, bound);
    setenv("FAKE_CUDNN_ENGINES", engines, 1);
    _Alignas(16) static char mem[12][64];
    static char ws[16];
    rc = tr_cudnn_attn_forward(ca, d, TR_PREC_BF16, mem[3], (float *)mem[4], mem[0], mem[1], mem[2], ws, bound - 1,
                               err, sizeof err);
    /* the stand-in's record, from the very library the module loaded */
    void *lib = dlopen(FAKE_CUDNN, RTLD_NOW | RTLD_LOCAL);
    void *sym = lib ? dlsym(lib, "fake_cudnn_last") : NULL;
    const fake_cudnn_exec *(*last)(void) = NULL;
    memcpy(&last, &sym, sizeof sym);
    if (!tap_ok(last != NULL, "the stand-in's record")) return;
    const fake_cudnn_exec *x = last();
    tap_ok(rc == TR_CUDNN_EARG && x->runs == 0 && one_line(err), "a workspace below the plan's refused, nothing "
           "run: %s", err);
    rc = tr_cudnn_attn_forward(ca, d, TR_PREC_BF16, mem[3], (float *)mem[4], mem[0], mem[1], mem[2], ws, bound, err,
                               sizeof err);
    tap_ok(rc == 0 && x->runs == 1 && x->engine == 3, "the forward runs the first deterministic engine within the "
           "bound (engine %d)", x->engine);
    int pack_ok = x->n == 6 && x->ws == ws;
    const void *want[] = {mem[0], mem[1], mem[2], mem[3], mem[4]};
    for (int i = 0; i < 5 && pack_ok; i++) pack_ok = x->uids[i] == i + 1 && x->ptrs[i] == want[i];
    pack_ok = pack_ok && x->uids[5] == 6 && x->scale == 0.125f;
    tap_ok(pack_ok, "the forward's variant pack: q, k, v, out, stats, scale, the caller's workspace");
    /* a second call of the shape: the cached plan even when the engines change */
    setenv("FAKE_CUDNN_ENGINES", "D:0", 1);
    rc = tr_cudnn_attn_forward(ca, d, TR_PREC_BF16, mem[3], (float *)mem[4], mem[0], mem[1], mem[2], ws, bound, err,
                               sizeof err);
    tap_ok(rc == 0 && x->engine == 3 && x->runs == 2, "the plan is cached by shape (engine %d)", x->engine);
    rc = tr_cudnn_attn_forward(ca, d, TR_PREC_FP16, mem[3], (float *)mem[4], mem[0], mem[1], mem[2], NULL, 0, err,
                               sizeof err);
    tap_ok(rc == 0 && x->engine == 0 && x->runs == 3, "another type, another plan (engine %d)", x->engine);
    rc = tr_cudnn_attn_forward(ca, d, TR_PREC_BF16, mem[3] + 2, (float *)mem[4], mem[0], mem[1], mem[2], ws, bound,
                               err, sizeof err);
    tap_ok(rc == TR_CUDNN_EARG && x->runs == 3 && one_line(err), "an unaligned operand refused: %s", err);
    /* the backward: dq, dk, dv written through the pack */
    size_t bb = tr_cudnn_attn_workspace_bound(d, 1);
    snprintf(engines, sizeof engines, "N:0,D:%zu", bb);
    setenv("FAKE_CUDNN_ENGINES", engines, 1);
    rc = tr_cudnn_attn_backward(ca, d, TR_PREC_BF16, mem[7], mem[8], mem[9], mem[6], mem[0], mem[1], mem[2], mem[3],
                                (const float *)mem[4], ws, bb, err, sizeof err);
    pack_ok = rc == 0 && x->n == 10 && x->engine == 1;
    const void *bwant[] = {mem[0], mem[1], mem[2], mem[3], mem[4], NULL, mem[6], mem[7], mem[8], mem[9]};
    for (int i = 0; i < 10 && pack_ok; i++) pack_ok = x->uids[i] == i + 1 && (i == 5 || x->ptrs[i] == bwant[i]);
    tap_ok(pack_ok, "the backward's variant pack: q, k, v, out, stats, scale, dout, dq, dk, dv (engine %d)",
           x->engine);
    /* a library whose graphs refuse the SDPA backward operation (9.19): the composite graph, its rows'
     * sums at the start of the caller's workspace, cuDNN's workspace after them */
    setenv("FAKE_CUDNN_SDPA_BWD_GRAPH", "refuse", 1);
    setenv("FAKE_CUDNN_ENGINES", "D:4096", 1);
    tr_attn_dims d3 = sh[2].d;
    size_t own = ((size_t)d3.N * d3.heads * d3.Tq * 4 + 255) / 256 * 256;
    int stage = -1, composite = -1;
    rc = tr_cudnn_attn_graph(ca, &d3, TR_PREC_FP16, 1, &stage, &composite, err, sizeof err);
    tap_ok(rc == 0 && stage == TR_CUDNN_STAGE_PLAN && composite == 1, "graph refused: the composite backward has "
           "a plan (%s)", rc ? err : "ok");
    static _Alignas(256) char big[1 << 16];
    rc = tr_cudnn_attn_backward(ca, &d3, TR_PREC_FP16, mem[7], mem[8], mem[9], mem[6], mem[0], mem[1], mem[2],
                                mem[3], (const float *)mem[4], big, own + 4095, err, sizeof err);
    tap_ok(rc == TR_CUDNN_EARG && one_line(err), "the composite backward: its sums counted in the workspace (%s)",
           err);
    rc = tr_cudnn_attn_backward(ca, &d3, TR_PREC_FP16, mem[7], mem[8], mem[9], mem[6], mem[0], mem[1], mem[2],
                                mem[3], (const float *)mem[4], big, own + 4096, err, sizeof err);
    tap_ok(rc == 0 && x->n == 11 && x->uids[10] == 11 && x->ptrs[10] == (void *)big && x->ws == (void *)(big + own),
           "the composite backward's pack: the sums at the workspace's start, cuDNN's %zu bytes on (%s)", own,
           rc ? err : "ok");
    unsetenv("FAKE_CUDNN_SDPA_BWD_GRAPH");
    /* nothing fits: one line counting why, nothing run */
    setenv("FAKE_CUDNN_ENGINES", "N:0,F:0,D:999999999999", 1);
    tr_attn_dims d2 = sh[1].d;
    int runs = x->runs;
    rc = tr_cudnn_attn_forward(ca, &d2, TR_PREC_BF16, mem[3], (float *)mem[4], mem[0], mem[1], mem[2], ws, 1u << 30,
                               err, sizeof err);
    tap_ok(rc == TR_CUDNN_EPLAN && x->runs == runs && one_line(err) && strstr(err, "1 non-deterministic") &&
               strstr(err, "1 over the workspace bound") && strstr(err, "1 refused"),
           "no engine fits: one line: %s", err);
    setenv("FAKE_CUDNN_ENGINES", "D:0", 1);
    char again[1024] = "";
    rc = tr_cudnn_attn_forward(ca, &d2, TR_PREC_BF16, mem[3], (float *)mem[4], mem[0], mem[1], mem[2], ws, 1u << 30,
                               again, sizeof again);
    tap_ok(rc == TR_CUDNN_EPLAN && x->runs == runs && strcmp(again, err) == 0,
           "a shape without a plan stays refused, with the same line, its heuristics not asked again");
    tr_cudnn_attn_close(ca);
    /* the non-deterministic mode takes the heuristics' first choice */
    rc = tr_cudnn_attn_open(&ca, FAKE_CUDNN, NULL, TR_CUDNN_NONDETERMINISTIC, err, sizeof err);
    setenv("FAKE_CUDNN_ENGINES", "N:0,D:0", 1);
    if (!rc)
        rc = tr_cudnn_attn_backward(ca, d, TR_PREC_BF16, mem[7], mem[8], mem[9], mem[6], mem[0], mem[1], mem[2],
                                    mem[3], (const float *)mem[4], ws, bb, err, sizeof err);
    tap_ok(rc == 0 && x->engine == 0, "TR_CUDNN_NONDETERMINISTIC: the first engine (engine %d)", x->engine);
    tr_cudnn_attn_close(ca);
    unsetenv("FAKE_CUDNN_ENGINES");
    dlclose(lib);
}
#endif

int main(void)
{
    tap_plan(0);
    char err[512];
    tr_backend *cpu = tr_backend_create("cpu", 2, err, sizeof err);
    if (!cpu) tap_skip_all(err);
    static const char *cfgs[] = {"tiny", "small"};
    for (int c = 0; c < 2; c++) {
        shape sh[4];
        tap_ok(shapes_of(cfgs[c], 2, 3, 2, sh) == 0, "%s's attention calls", cfgs[c]);
        for (int i = 0; i < 4; i++) test_layout(cpu, &sh[i]);
    }
    cpu->destroy(cpu);
    test_real();
#ifdef FAKE_CUDNN
    test_fake();
#else
    tap_skip(1, "no stand-in libcudnn in this build (no cuDNN headers)");
#endif
    return tap_done();
}
