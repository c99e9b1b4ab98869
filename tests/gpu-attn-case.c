/*
 * gpu-attn-case.c - one case of scripts/gpu-check attn: one attention
 * shape of a configuration (the model's own, tr_model_attn_shapes, laid
 * out as the backend's traits cut the work) on one path, in a process of
 * its own so that a fault loses nothing else.
 *
 *   gpu-attn-case --config tiny|small|base --batch B --masks M
 *                 --shape enc|self|t2i|i2t --path fused|blocked|flash|cudnn
 *                 [--precision bf16|fp16|fp32] [--backend cuda|cpu] [--reps R]
 *
 * prints one line of tab-separated fields: config, shape (N Tq Tk heads dh),
 * path, precision, status (ok, unavailable, error), the library's message,
 * the forward's and the backward's workspace (the allocator's peak of
 * workspace bytes in the call), forward and backward milliseconds (the
 * mean of R calls after one unmeasured, the device waited for) and TFLOP/s
 * (4 N heads Tq Tk dh for the forward, 10 for the backward), the largest
 * error of out, dq, dk, dv relative to the largest magnitude against the
 * blocked path in fp32 on the same inputs and against a double-precision
 * reference on the host over sampled rows (sequence 0, the first and the
 * last head, 4 query and 4 key rows), and whether two runs gave the same
 * bits.  Exit 0 when the case ran (whatever its figures), 1 when it could
 * not, 2 on a bad command line.  On the CPU backend (scripts/gpu-check's
 * self-test) every path is the CPU's attention.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cuda/backend_cuda.h"
#include "backend/meta/backend_meta.h"
#include "common/kernels.h"
#include "common/precision.h"
#include "model/model.h"
#include "registry/registry.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static float draw(uint64_t *s, float a)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return a * (float)((double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* one operand: its host values (rounded to the type), the device copies in dt and fp32 */
typedef struct opnd {
    size_t elems;
    float *h;
    void *d, *d32;
} opnd;

static size_t op_elems(int N, int T, int ld, size_t s) { return (size_t)(N - 1) * s + (size_t)T * ld; }

static int op_make(tr_backend *be, tr_backend *ref, opnd *o, size_t elems, int dt, uint64_t seed, float a)
{
    o->elems = elems;
    o->h = calloc(elems, sizeof(float));
    void *tmp = malloc(elems * 4);
    o->d = tr_mem_alloc(&be->mem, TR_MEM_ACTS, elems * tr_prec_size(dt));
    o->d32 = tr_mem_alloc(&ref->mem, TR_MEM_ACTS, elems * 4);
    if (!o->h || !tmp || !o->d || !o->d32) return free(tmp), -1;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < elems; i++) {
        float x = a ? draw(&s, a) : 0.0f;
        if (dt != TR_PREC_FP32) {
            uint16_t b = tr_to_16(x, dt);
            x = tr_from_16(b, dt);
            ((uint16_t *)tmp)[i] = b;
        } else {
            ((float *)tmp)[i] = x;
        }
        o->h[i] = x;
    }
    be->ops->upload(be, o->d, tmp, elems * tr_prec_size(dt));
    ref->ops->upload(ref, o->d32, o->h, elems * 4);
    free(tmp);
    return 0;
}

/* the region's values of a device tensor in dt as floats (host order of the buffer) */
static float *fetch(tr_backend *be, const void *d, size_t elems, int dt)
{
    size_t bytes = elems * tr_prec_size(dt);
    void *raw = malloc(bytes);
    float *f = malloc(elems * sizeof(float));
    if (!raw || !f) return free(raw), free(f), NULL;
    be->ops->download(be, raw, d, bytes);
    for (size_t i = 0; i < elems; i++)
        f[i] = dt == TR_PREC_FP32 ? ((float *)raw)[i] : tr_from_16(((uint16_t *)raw)[i], dt);
    free(raw);
    return f;
}

/* max |a - b| / max |b| over the region (rows of W columns) */
static double rel_err(const float *a, const float *b, int N, int T, int W, int ld, size_t s)
{
    double e = 0, big = 0;
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < W; j++) {
                size_t i = (size_t)n * s + (size_t)t * ld + j;
                double d = fabs((double)a[i] - b[i]);
                if (!(d <= e)) e = isnan(d) ? INFINITY : d; /* NaN: infinite error */
                if (fabs(b[i]) > big) big = fabs(b[i]);
            }
    return e / (big > 0 ? big : 1);
}

typedef struct run {
    void *out, *att, *dq, *dk, *dv;
    tr_backend *be;
    int dt;
} run;

static int run_alloc(run *r, tr_backend *be, const tr_attn_dims *d, int dt, size_t eq, size_t ek, size_t eo)
{
    r->be = be, r->dt = dt;
    size_t es = tr_prec_size(dt), saved = be->sizes->attention_saved((size_t)d->Tq, (size_t)d->Tk);
    r->out = tr_mem_alloc(&be->mem, TR_MEM_ACTS, eo * es);
    r->att = tr_mem_alloc(&be->mem, TR_MEM_ACTS, (size_t)d->N * d->heads * saved * es);
    r->dq = tr_mem_alloc(&be->mem, TR_MEM_ACTS, eq * es);
    r->dk = tr_mem_alloc(&be->mem, TR_MEM_ACTS, ek * es);
    r->dv = tr_mem_alloc(&be->mem, TR_MEM_ACTS, ek * es);
    return r->out && r->att && r->dq && r->dk && r->dv ? 0 : -1;
}

static void sync_be(tr_backend *be, const void *p)
{
    char b[4];
    be->ops->download(be, b, p, 2);
}

static void fwd(run *r, const tr_attn_dims *d, void *q, void *k, void *v)
{
    tr_backend *be = r->be;
    be->ops->attention_forward(be, tr_typed(r->out, r->dt), tr_typed(r->att, r->dt), tr_typed(q, r->dt),
                               tr_typed(k, r->dt), tr_typed(v, r->dt), d);
}

static void bwd(run *r, const tr_attn_dims *d, void *q, void *k, void *v, void *dout, size_t eq, size_t ek)
{
    tr_backend *be = r->be;
    int dt = r->dt;
    (void)eq, (void)ek; /* (written, not added to: backend.h) */
    be->ops->attention_backward(be, tr_typed(r->dq, dt), tr_typed(r->dk, dt), tr_typed(r->dv, dt), tr_typed(dout, dt),
                                tr_typed(r->out, dt), tr_typed(q, dt), tr_typed(k, dt), tr_typed(v, dt),
                                tr_typed(r->att, dt), d);
}

/* the double reference of sampled rows: max relative error of each of out, dq (query rows), dk, dv (key rows) */
static double host_ref(const tr_attn_dims *d, const opnd *q, const opnd *k, const opnd *v, const opnd *go,
                       float *const got[4])
{
    int Tq = d->Tq, Tk = d->Tk, dh = d->dh, heads[2] = {0, d->heads - 1};
    double scale = 1.0 / sqrt((double)dh), worst = 0;
    double *lse = malloc((size_t)Tq * sizeof(double)), *D = malloc((size_t)Tq * sizeof(double));
    double *o = malloc((size_t)dh * sizeof(double)), *acc = malloc((size_t)dh * sizeof(double));
    if (!lse || !D || !o || !acc) return INFINITY;
#define QV(t, c) ((double)q->h[(size_t)(t) * d->ldq + hoff + (c)])
#define KV(j, c) ((double)k->h[(size_t)(j) * d->ldk + hoff + (c)])
#define VV(j, c) ((double)v->h[(size_t)(j) * d->ldv + hoff + (c)])
#define GO(t, c) ((double)go->h[(size_t)(t) * d->ldo + hoff + (c)])
    for (int hi = 0; hi < (d->heads > 1 ? 2 : 1); hi++) {
        int hoff = heads[hi] * dh;
        double big[4] = {0}, err[4] = {0};
        for (int t = 0; t < Tq; t++) { /* lse and D = dO . O of every query row (the key rows' gradients need them) */
            double m = -INFINITY, l = 0;
            for (int j = 0; j < Tk; j++) {
                double s = 0;
                for (int c = 0; c < dh; c++) s += QV(t, c) * KV(j, c);
                s *= scale;
                if (s > m) l = l * exp(m - s) + 1, m = s;
                else l += exp(s - m);
            }
            lse[t] = m + log(l);
            for (int c = 0; c < dh; c++) o[c] = 0;
            for (int j = 0; j < Tk; j++) {
                double s = 0;
                for (int c = 0; c < dh; c++) s += QV(t, c) * KV(j, c);
                double p = exp(s * scale - lse[t]);
                for (int c = 0; c < dh; c++) o[c] += p * VV(j, c);
            }
            D[t] = 0;
            for (int c = 0; c < dh; c++) D[t] += GO(t, c) * o[c];
            if (t % (Tq > 4 ? Tq / 4 : 1)) continue; /* a sampled query row: out and dq */
            for (int c = 0; c < dh; c++) acc[c] = 0;
            for (int j = 0; j < Tk; j++) {
                double s = 0, dp = 0;
                for (int c = 0; c < dh; c++) s += QV(t, c) * KV(j, c), dp += GO(t, c) * VV(j, c);
                double p = exp(s * scale - lse[t]), ds = scale * p * (dp - D[t]);
                for (int c = 0; c < dh; c++) acc[c] += ds * KV(j, c);
            }
            for (int c = 0; c < dh; c++) {
                size_t io = (size_t)t * d->ldo + hoff + c, iq = (size_t)t * d->ldq + hoff + c;
                err[0] = fmax(err[0], fabs(got[0][io] - o[c])), big[0] = fmax(big[0], fabs(o[c]));
                err[1] = fmax(err[1], fabs(got[1][iq] - acc[c])), big[1] = fmax(big[1], fabs(acc[c]));
                if (isnan(got[0][io]) || isnan(got[1][iq])) err[0] = INFINITY;
            }
        }
        for (int j = 0; j < Tk; j += Tk > 4 ? Tk / 4 : 1) { /* sampled key rows: dk, dv */
            for (int c = 0; c < dh; c++) o[c] = acc[c] = 0; /* o: dk, acc: dv */
            for (int t = 0; t < Tq; t++) {
                double s = 0, dp = 0;
                for (int c = 0; c < dh; c++) s += QV(t, c) * KV(j, c), dp += GO(t, c) * VV(j, c);
                double p = exp(s * scale - lse[t]), ds = scale * p * (dp - D[t]);
                for (int c = 0; c < dh; c++) o[c] += ds * QV(t, c), acc[c] += p * GO(t, c);
            }
            for (int c = 0; c < dh; c++) {
                size_t ik = (size_t)j * d->ldk + hoff + c, iv = (size_t)j * d->ldv + hoff + c;
                err[2] = fmax(err[2], fabs(got[2][ik] - o[c])), big[2] = fmax(big[2], fabs(o[c]));
                err[3] = fmax(err[3], fabs(got[3][iv] - acc[c])), big[3] = fmax(big[3], fabs(acc[c]));
                if (isnan(got[2][ik]) || isnan(got[3][iv])) err[2] = INFINITY;
            }
        }
        for (int i = 0; i < 4; i++) worst = fmax(worst, err[i] / (big[i] > 0 ? big[i] : 1));
    }
#undef QV
#undef KV
#undef VV
#undef GO
    free(lse), free(D), free(o), free(acc);
    return worst;
}

static int usage(void)
{
    fprintf(stderr, "usage: gpu-attn-case --config tiny|small|base --batch B --masks M --shape enc|self|t2i|i2t "
                    "--path fused|blocked|flash|cudnn [--precision bf16|fp16|fp32] [--backend cuda|cpu] [--reps R]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *config = "tiny", *shape = "enc", *path_s = "blocked", *prec_s = "bf16", *bname = "cuda";
    int B = 2, M = 3, reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--batch")) B = atoi(v);
        else if (!strcmp(a, "--masks")) M = atoi(v);
        else if (!strcmp(a, "--shape")) shape = v;
        else if (!strcmp(a, "--path")) path_s = v;
        else if (!strcmp(a, "--precision")) prec_s = v;
        else if (!strcmp(a, "--backend")) bname = v;
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else return usage();
        i++;
    }
    static const char *const shapes[] = {"enc", "self", "t2i", "i2t"};
    int si = -1, path = tr_backend_attention_parse(path_s), dt = tr_prec_parse(prec_s);
    for (int i = 0; i < 4; i++)
        if (!strcmp(shape, shapes[i])) si = i;
    tr_config cfg;
    if (si < 0 || path <= 0 || dt < 0 || B < 1 || M < 1 || reps < 1 || tr_config_preset(config, &cfg) < 0) return usage();
    int cuda = !strcmp(bname, "cuda");

    /* the shapes as the backend's traits cut the work: the meta backend's model */
    char err[400] = "";
    const tr_sizes *sz = tr_backend_sizes(bname);
    const tr_traits *tt = tr_backend_traits(bname);
    if (!sz || !tt) return usage();
    tr_backend *meta = tr_backend_meta_create(sz, tt);
    tr_model mm;
    tr_attn_dims all[4];
    if (!meta || tr_model_init(&mm, meta, &cfg, B, M, 2, err, sizeof err) < 0) {
        printf("%s\t%s\t-\t%s\t%s\terror\tthe model's shapes: %s\n", config, shape, path_s, prec_s, err);
        return 1;
    }
    tr_model_attn_shapes(&mm, all, 4);
    tr_model_free(&mm);
    tr_backend_free(meta);
    tr_attn_dims d = all[si];
    char sh[96];
    snprintf(sh, sizeof sh, "N=%d Tq=%d Tk=%d heads=%d dh=%d", d.N, d.Tq, d.Tk, d.heads, d.dh);
    printf("%s\t%s %s\t%s\t%s\t", config, shape, sh, path_s, prec_s);
    fflush(stdout);

    tr_backend_opts o;
    tr_backend_opts_init(&o, 2);
    o.attention = path;
    tr_backend *be = tr_backend_create_with(bname, &o, err, sizeof err);
    if (!be) return printf("error\t%s\n", err), 1;
    char msg[400] = "-";
    if (cuda && !tr_cuda_attn_takes(be, &d, dt, path, err, sizeof err)) {
        printf("unavailable\t%s\n", err);
        tr_backend_free(be);
        return 0;
    }
    if (cuda && *err) snprintf(msg, sizeof msg, "%s", err); /* cuDNN's version and library */
    o.attention = TR_CUDA_ATTN_BLOCKED;
    tr_backend *ref = cuda ? tr_backend_create_with(bname, &o, err, sizeof err) : be;
    if (!ref) return printf("error\t%s\n", err), 1;

    size_t eq = op_elems(d.N, d.Tq, d.ldq, d.sq), ek = op_elems(d.N, d.Tk, d.ldk, d.sk), eo = op_elems(d.N, d.Tq, d.ldo, d.so);
    opnd q, k, v, go;
    run r1, r2, rr;
    if (op_make(be, ref, &q, eq, dt, 1, 2.0f) || op_make(be, ref, &k, ek, dt, 2, 2.0f) ||
        op_make(be, ref, &v, ek, dt, 3, 1.0f) || op_make(be, ref, &go, eo, dt, 4, 1.0f) ||
        run_alloc(&r1, be, &d, dt, eq, ek, eo) || run_alloc(&r2, be, &d, dt, eq, ek, eo) ||
        run_alloc(&rr, ref, &d, TR_PREC_FP32, eq, ek, eo))
        return printf("error\tout of memory for the operands\n"), 1;

    /* timed: one call unmeasured, then reps; the workspace: the allocator's peak in a call */
    fwd(&r1, &d, q.d, k.d, v.d);
    bwd(&r1, &d, q.d, k.d, v.d, go.d, eq, ek);
    sync_be(be, r1.out);
    tr_mem_reset_peak(&be->mem);
    uint64_t w0 = be->mem.cur[TR_MEM_WORK];
    double t0 = now_ms();
    for (int i = 0; i < reps; i++) fwd(&r1, &d, q.d, k.d, v.d);
    sync_be(be, r1.out);
    double tf = (now_ms() - t0) / reps;
    uint64_t wf = be->mem.peak[TR_MEM_WORK] - w0;
    tr_mem_reset_peak(&be->mem);
    t0 = now_ms();
    for (int i = 0; i < reps; i++) bwd(&r1, &d, q.d, k.d, v.d, go.d, eq, ek);
    sync_be(be, r1.dq);
    double tb = (now_ms() - t0) / reps;
    uint64_t wb = be->mem.peak[TR_MEM_WORK] - w0;
    /* the second run, and the fp32 blocked reference */
    fwd(&r2, &d, q.d, k.d, v.d);
    bwd(&r2, &d, q.d, k.d, v.d, go.d, eq, ek);
    fwd(&rr, &d, q.d32, k.d32, v.d32);
    bwd(&rr, &d, q.d32, k.d32, v.d32, go.d32, eq, ek);
    if (tr_backend_error(be, err, sizeof err) || (ref != be && tr_backend_error(ref, err, sizeof err))) {
        printf("error\t%s\n", err);
        return 0; /* (the case ran: its status says it failed) */
    }
    float *g1[4] = {fetch(be, r1.out, eo, dt), fetch(be, r1.dq, eq, dt), fetch(be, r1.dk, ek, dt), fetch(be, r1.dv, ek, dt)};
    float *g2[4] = {fetch(be, r2.out, eo, dt), fetch(be, r2.dq, eq, dt), fetch(be, r2.dk, ek, dt), fetch(be, r2.dv, ek, dt)};
    float *gr[4] = {fetch(ref, rr.out, eo, TR_PREC_FP32), fetch(ref, rr.dq, eq, TR_PREC_FP32),
                   fetch(ref, rr.dk, ek, TR_PREC_FP32), fetch(ref, rr.dv, ek, TR_PREC_FP32)};
    size_t n[4] = {eo, eq, ek, ek};
    int ld[4] = {d.ldo, d.ldq, d.ldk, d.ldv}, T[4] = {d.Tq, d.Tq, d.Tk, d.Tk};
    size_t st[4] = {d.so, d.sq, d.sk, d.sv};
    double eb = 0;
    int same = 1;
    for (int i = 0; i < 4; i++) {
        if (!g1[i] || !g2[i] || !gr[i]) return printf("error\tout of host memory\n"), 1;
        same &= !memcmp(g1[i], g2[i], n[i] * sizeof(float));
        eb = fmax(eb, rel_err(g1[i], gr[i], d.N, T[i], d.heads * d.dh, ld[i], st[i]));
    }
    double ec = host_ref(&d, &q, &k, &v, &go, g1);
    double fl = 4.0 * d.N * d.heads * (double)d.Tq * d.Tk * d.dh;
    printf("ok\t%s\t%llu\t%llu\t%.4f\t%.4f\t%.3g\t%.3g\t%.3g\t%.3g\t%s\n", msg, (unsigned long long)wf,
           (unsigned long long)wb, tf, tb, fl / (tf * 1e9), 2.5 * fl / (tb * 1e9), eb, ec, same ? "yes" : "no");
    for (int i = 0; i < 4; i++) free(g1[i]), free(g2[i]), free(gr[i]);
    free(q.h), free(k.h), free(v.h), free(go.h);
    if (ref != be) tr_backend_free(ref);
    tr_backend_free(be);
    return 0;
}
