// backend_cuda_attn_check.cu - the attention's path of each call
// (attn_mode_for: the dispatch of backend_cuda_attn.cu), auto's start-up
// check that chooses it by shape (tr_cuda_attn_choose, backend_cuda.h),
// and the cuDNN path over cudnn_attn.h (cudnn_attn_forward/_backward).
//
// The check: for every shape the model runs, each candidate of
// tr_attn_candidates (cuDNN, flash, the rule's path, blocked) runs the
// forward and the backward on fixed seeded tensors (one or two sequences)
// whose outputs (out, the statistics, dq, dk, dv) are poisoned first
// (every byte 0xff); its output, its statistics (the fp32 log-sum-exp per
// query row that every GPU path saves), and its gradients are compared
// with the blocked path's
// (backend_cuda_pick.c: the error relative to the largest magnitude, NaNs,
// elements left unwritten).  The first candidate that passes is the
// shape's path; each one refused says why in one line.  What is chosen
// depends on the build, the libraries and the device, never on timing or
// on the data.  The check's tensors are cudaMalloc'd outside the
// allocator; the paths' workspaces come from it as in a step.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "backend_cuda.h"
#include "common/kernels.h"
#include "common/precision.h"
#include "backend_cuda_pick.h"
#include "cudnn_attn.h"
}
#include "backend_cuda_impl.cuh"

namespace sa1b_cuda {

// ---- the cuDNN path: cudnn_attn.h wired in ----------------------------------------
//
// cuDNN is opened on the backend's stream at its first use (deterministic
// engines only); a call it declines (its shape or strides, no plan, no
// engine within the workspace bound) goes to the rule's path, and says
// why in st->why (the check reads it: a declined candidate is refused).

struct attn_state {
    tr_attn_table tab;
    tr_cudnn_attn *ca;
    int cudnn_tried, declined;
    char why[240], info[300];
};

static attn_state *state_of(cuda_backend *c)
{
    if (!c->attn) c->attn = static_cast<attn_state *>(calloc(1, sizeof(attn_state)));
    return c->attn;
}

void attn_state_free(cuda_backend *c)
{
    if (!c->attn) return;
    tr_cudnn_attn_close(c->attn->ca);
    free(c->attn);
    c->attn = nullptr;
}

// 1 when the cuDNN path can run on c's device (info: its version and
// library); else 0 with why
static int cu_attn_cudnn_available(cuda_backend *c, char *why, size_t len)
{
    attn_state *st = state_of(c);
    if (!st) return snprintf(why, len, "out of memory"), 0;
    if (!st->cudnn_tried) {
        st->cudnn_tried = 1;
        if (tr_cudnn_attn_open(&st->ca, NULL, c->st, 0, st->why, sizeof st->why) != 0) st->ca = nullptr;
        else
            snprintf(st->info, sizeof st->info, "cuDNN %zu (%s)", tr_cudnn_attn_version(st->ca),
                     tr_cudnn_attn_library(st->ca));
    }
    if (!st->ca) return snprintf(why, len, "cuDNN: %s", st->why), 0;
    snprintf(why, len, "%s", st->info);
    return 1;
}

// one 16-bit type for every operand of the call
static bool cudnn_types(tr_ten a, tr_ten b, tr_ten c2, tr_ten d2)
{
    return tr_prec_16(a.dt) && b.dt == a.dt && c2.dt == a.dt && d2.dt == a.dt;
}

static int cudnn_declined(attn_state *st, const char *why)
{
    st->declined = 1;
    if (why != st->why) snprintf(st->why, sizeof st->why, "%s", why);
    return 0;
}

int cudnn_attn_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    char why[240];
    if (!cu_attn_cudnn_available(c, why, sizeof why)) return c->attn ? cudnn_declined(c->attn, why) : 0;
    attn_state *st = c->attn;
    if (!cudnn_types(q, k, v, out)) return cudnn_declined(st, "cuDNN: operands of more than one type, or fp32");
    if (tr_cudnn_attn_supported(d, q.dt, st->why, sizeof st->why) != 0) return cudnn_declined(st, st->why);
    if (c->failed) return 1;
    size_t wsb = tr_cudnn_attn_workspace_bound(d, 0);
    void *ws = work(be, wsb);
    if (!ws) return 1; // out of memory: the allocator's record, the step's error
    int rc = tr_cudnn_attn_forward(st->ca, d, q.dt, out.p, static_cast<float *>(att.p), q.p, k.p, v.p, ws, wsb,
                                   st->why, sizeof st->why);
    tr_mem_free(&be->mem, ws);
    if (rc == TR_CUDNN_EEXEC) return record(c, __FILE__, __LINE__, "cuDNN forward", st->why), 1;
    return rc ? cudnn_declined(st, st->why) : 1;
}

int cudnn_attn_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q, tr_ten k,
                        tr_ten v, tr_ten att, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    char why[240];
    if (!cu_attn_cudnn_available(c, why, sizeof why)) return c->attn ? cudnn_declined(c->attn, why) : 0;
    attn_state *st = c->attn;
    if (!cudnn_types(q, k, v, dout) || out.dt != q.dt || !dq.p || !dk.p || !dv.p || dq.dt != q.dt ||
        dk.dt != q.dt || dv.dt != q.dt)
        return cudnn_declined(st, "cuDNN: operands of more than one type, fp32, or a gradient not asked for");
    if (tr_cudnn_attn_supported(d, q.dt, st->why, sizeof st->why) != 0) return cudnn_declined(st, st->why);
    if (c->failed) return 1;
    size_t wsb = tr_cudnn_attn_workspace_bound(d, 1);
    void *ws = work(be, wsb);
    if (!ws) return 1;
    int rc = tr_cudnn_attn_backward(st->ca, d, q.dt, dq.p, dk.p, dv.p, dout.p, q.p, k.p, v.p, out.p,
                                    static_cast<const float *>(att.p), ws, wsb, st->why, sizeof st->why);
    tr_mem_free(&be->mem, ws);
    if (rc == TR_CUDNN_EEXEC) return record(c, __FILE__, __LINE__, "cuDNN backward", st->why), 1;
    return rc ? cudnn_declined(st, st->why) : 1;
}

// ---- the dispatch ------------------------------------------------------------------

int attn_mode_for(const cuda_backend *c, const tr_attn_dims *d, int dt)
{
    if (c->attn_mode != TR_CUDA_ATTN_AUTO) return c->attn_mode;
    if (!c->attn) return TR_CUDA_ATTN_AUTO;
    tr_attn_key k = tr_attn_key_of(d, dt);
    int p = tr_attn_table_find(&c->attn->tab, &k);
    return p < 0 ? TR_CUDA_ATTN_AUTO : p;
}

// ---- the check ---------------------------------------------------------------------

// one tensor of the check: its device buffer, the region the call reads
// or writes (N rows of T rows of `cols` elements, ld apart, s apart)
struct ck_ten {
    void *dev;
    size_t elems; // of the buffer
    int N, T, cols, ld;
    size_t s;
};

struct ck_case {
    cuda_backend *c;
    tr_attn_dims d; // N: the check's sequences
    int dt;
    ck_ten q, k, v, out, dout, dq, dk, dv;
    void *att;
    size_t att_bytes, lse_stride; // att's bytes (the model's), floats of statistics per (sequence, head)
    // the reference's results, compact (what ck_fetch gives)
    std::vector<unsigned char> ref[5];
};

static size_t esize(int dt) { return tr_prec_size(dt); }

static int ck_alloc(cuda_backend *c, ck_ten *t, int N, int T, int cols, int ld, size_t s, int dt)
{
    t->N = N, t->T = T, t->cols = cols, t->ld = ld, t->s = s;
    t->elems = (size_t)(N - 1) * s + (size_t)T * ld;
    t->dev = nullptr;
    return CK(c, cudaMalloc(&t->dev, t->elems * esize(dt)));
}

// a deterministic sequence (xorshift64*), uniform in [-a, a)
static float ck_draw(uint64_t *s, float a)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    uint64_t r = *s * 2685821657736338717ull;
    return a * (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// fills the region of t with draws (the rest of the buffer 0)
static int ck_fill(cuda_backend *c, ck_ten *t, int dt, uint64_t seed, float a)
{
    std::vector<unsigned char> h(t->elems * esize(dt), 0);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int n = 0; n < t->N; n++)
        for (int r = 0; r < t->T; r++)
            for (int j = 0; j < t->cols; j++) {
                size_t i = (size_t)n * t->s + (size_t)r * t->ld + j;
                float x = ck_draw(&s, a);
                if (dt == TR_PREC_FP32) memcpy(&h[4 * i], &x, 4);
                else {
                    uint16_t b = tr_to_16(x, dt);
                    memcpy(&h[2 * i], &b, 2);
                }
            }
    if (CK(c, cudaMemcpyAsync(t->dev, h.data(), h.size(), cudaMemcpyHostToDevice, c->st))) return -1;
    return CK(c, cudaStreamSynchronize(c->st));
}

// the region of t, compact, into h
static int ck_fetch(cuda_backend *c, const ck_ten *t, int dt, std::vector<unsigned char> *h)
{
    size_t es = esize(dt);
    std::vector<unsigned char> all(t->elems * es);
    if (CK(c, cudaMemcpyAsync(all.data(), t->dev, all.size(), cudaMemcpyDeviceToHost, c->st)) ||
        CK(c, cudaStreamSynchronize(c->st)))
        return -1;
    h->resize((size_t)t->N * t->T * t->cols * es);
    size_t o = 0;
    for (int n = 0; n < t->N; n++)
        for (int r = 0; r < t->T; r++, o += (size_t)t->cols * es)
            memcpy(h->data() + o, all.data() + ((size_t)n * t->s + (size_t)r * t->ld) * es, (size_t)t->cols * es);
    return 0;
}

// the statistics, compact: fp32 [N, heads, Tq]
static int ck_fetch_stats(ck_case *k, std::vector<unsigned char> *h)
{
    cuda_backend *c = k->c;
    std::vector<unsigned char> all(k->att_bytes);
    if (CK(c, cudaMemcpyAsync(all.data(), k->att, all.size(), cudaMemcpyDeviceToHost, c->st)) ||
        CK(c, cudaStreamSynchronize(c->st)))
        return -1;
    size_t rows = (size_t)k->d.N * k->d.heads, Tq = (size_t)k->d.Tq;
    h->resize(rows * Tq * 4);
    for (size_t r = 0; r < rows; r++) memcpy(h->data() + r * Tq * 4, all.data() + r * k->lse_stride * 4, Tq * 4);
    return 0;
}

static tr_ten ck_t(const ck_ten &t, int dt) { return tr_typed(t.dev, dt); }

// one run of the path with every output poisoned first; its results
// compact in res[5] (out, stats, dq, dk, dv); 0, or -1 with c->err
static int ck_run(ck_case *k, int path, std::vector<unsigned char> res[5])
{
    cuda_backend *c = k->c;
    int dt = k->dt;
    const int grad_fill = 0xff; // (the backward writes every element of the heads' columns: backend.h)
    if (CK(c, cudaMemsetAsync(k->out.dev, 0xff, k->out.elems * esize(dt), c->st)) ||
        CK(c, cudaMemsetAsync(k->att, 0xff, k->att_bytes, c->st)) ||
        CK(c, cudaMemsetAsync(k->dq.dev, grad_fill, k->dq.elems * esize(dt), c->st)) ||
        CK(c, cudaMemsetAsync(k->dk.dev, grad_fill, k->dk.elems * esize(dt), c->st)) ||
        CK(c, cudaMemsetAsync(k->dv.dev, grad_fill, k->dv.elems * esize(dt), c->st)))
        return -1;
    int saved = c->attn_mode;
    c->attn_mode = path;
    if (c->attn) c->attn->declined = 0;
    tr_ten att = tr_typed(k->att, dt);
    cu_attention_forward(&c->be, ck_t(k->out, dt), att, ck_t(k->q, dt), ck_t(k->k, dt), ck_t(k->v, dt), &k->d);
    cu_attention_backward(&c->be, ck_t(k->dq, dt), ck_t(k->dk, dt), ck_t(k->dv, dt), ck_t(k->dout, dt),
                          ck_t(k->out, dt), ck_t(k->q, dt), ck_t(k->k, dt), ck_t(k->v, dt), att, &k->d);
    c->attn_mode = saved;
    if (c->failed || CK(c, cudaStreamSynchronize(c->st))) return -1;
    if (path == TR_CUDA_ATTN_CUDNN && c->attn && c->attn->declined) { // the rule ran instead: not cuDNN's result
        record(c, __FILE__, __LINE__, "cuDNN declined", c->attn->why);
        return -1;
    }
    if (ck_fetch(c, &k->out, dt, &res[0]) || ck_fetch_stats(k, &res[1]) || ck_fetch(c, &k->dq, dt, &res[2]) ||
        ck_fetch(c, &k->dk, dt, &res[3]) || ck_fetch(c, &k->dv, dt, &res[4]))
        return -1;
    return 0;
}

static void ck_verdict(const ck_case *k, std::vector<unsigned char> res[5], tr_attn_verdict *v)
{
    static const char *const what[5] = {"out", "stats", "dq", "dk", "dv"};
    v->n_diff = 5;
    for (int i = 0; i < 5; i++) {
        int dt = i == 1 ? TR_PREC_FP32 : k->dt;
        tr_attn_compare(&v->diff[i], what[i], dt, res[i].data(), k->ref[i].data(), res[i].size() / esize(dt));
        // statistics are fp32 whatever the operands: their bound is the operands' type's
        v->diff[i].tol = tr_attn_tolerance(what[i], k->dt);
    }
}

// tr_attn_try for the check: a failure of the candidate is its verdict
// (the backend's record cleared), one that leaves the device unusable
// ends the check
static int ck_try(void *ctx, int path, tr_attn_verdict *v)
{
    ck_case *k = static_cast<ck_case *>(ctx);
    cuda_backend *c = k->c;
    std::vector<unsigned char> res[5];
    if (ck_run(k, path, res) < 0) {
        snprintf(v->lib, sizeof v->lib, "%s", c->err);
        c->failed = 0, c->err[0] = 0;
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->st);
        if (e != cudaSuccess) { // a fault: the context is gone
            record(c, __FILE__, __LINE__, tr_attn_path_name(path), cudaGetErrorString(e));
            return -1;
        }
        return 0;
    }
    ck_verdict(k, res, v);
    return 0;
}

static void ck_free(ck_case *k)
{
    ck_ten *t[] = {&k->q, &k->k, &k->v, &k->out, &k->dout, &k->dq, &k->dk, &k->dv};
    for (ck_ten *x : t)
        if (x->dev) cudaFree(x->dev), x->dev = nullptr;
    if (k->att) cudaFree(k->att), k->att = nullptr;
}

// the check of one shape: its path (-1: the reference failed, c's error)
static int ck_shape(cuda_backend *c, const tr_attn_dims *shape, int dt, int cudnn, tr_cuda_attn_log log, void *ctx)
{
    int cands[4], nc = tr_attn_candidates(shape, dt, cudnn, cands);
    if (nc == 1) return cands[0];
    ck_case k{};
    k.c = c, k.dt = dt, k.d = *shape;
    int N = shape->N < 2 ? (shape->N < 1 ? 1 : shape->N) : 2, W = shape->heads * shape->dh;
    tr_attn_dims &d = k.d;
    d.N = N;
    k.lse_stride = (size_t)d.Tq; // backend.h's statistics: fp32 [N, heads, Tq] dense from att.p
    k.att_bytes = (size_t)N * d.heads * tr_cuda_sizes.attention_saved((size_t)d.Tq, (size_t)d.Tk) * tr_prec_size(dt);
    int path = -1;
    if (!ck_alloc(c, &k.q, N, d.Tq, W, d.ldq, d.sq, dt) && !ck_alloc(c, &k.k, N, d.Tk, W, d.ldk, d.sk, dt) &&
        !ck_alloc(c, &k.v, N, d.Tk, W, d.ldv, d.sv, dt) && !ck_alloc(c, &k.out, N, d.Tq, W, d.ldo, d.so, dt) &&
        !ck_alloc(c, &k.dout, N, d.Tq, W, d.ldo, d.so, dt) && !ck_alloc(c, &k.dq, N, d.Tq, W, d.ldq, d.sq, dt) &&
        !ck_alloc(c, &k.dk, N, d.Tk, W, d.ldk, d.sk, dt) && !ck_alloc(c, &k.dv, N, d.Tk, W, d.ldv, d.sv, dt) &&
        !CK(c, cudaMalloc(&k.att, k.att_bytes)) && !ck_fill(c, &k.q, dt, 1, 2.0f) && !ck_fill(c, &k.k, dt, 2, 2.0f) &&
        !ck_fill(c, &k.v, dt, 3, 1.0f) && !ck_fill(c, &k.dout, dt, 4, 1.0f) &&
        !ck_run(&k, TR_CUDA_ATTN_BLOCKED, k.ref)) {
        tr_attn_verdict self;
        memset(&self, 0, sizeof self);
        ck_verdict(&k, k.ref, &self);
        const tr_attn_diff *bad = nullptr;
        if (!tr_attn_verdict_ok(&self, &bad)) {
            char line[700];
            tr_attn_key key = tr_attn_key_of(shape, dt);
            tr_attn_pin_line(line, sizeof line, &key, TR_CUDA_ATTN_BLOCKED, &self, TR_CUDA_ATTN_BLOCKED);
            record(c, __FILE__, __LINE__, "the blocked reference", line);
        } else {
            tr_attn_key key = tr_attn_key_of(shape, dt);
            path = tr_attn_pick(&key, cands, nc, ck_try, &k, log, ctx);
        }
    }
    ck_free(&k);
    return c->failed ? -1 : path;
}

} // namespace sa1b_cuda

using namespace sa1b_cuda;

extern "C" int tr_cuda_attn_choose(tr_backend *be, const tr_attn_dims *shapes, int n, int dt, tr_cuda_attn_log log,
                                   void *ctx, char *err, size_t err_len)
{
    cuda_backend *c = CB(be);
    char why[400];
    if (c->attn_mode == TR_CUDA_ATTN_CUDNN && log && !cu_attn_cudnn_available(c, why, sizeof why)) {
        char line[500];
        snprintf(line, sizeof line, "attention: --attention cudnn: %s; the rule's path for every call", why);
        log(ctx, line);
    }
    if (c->attn_mode != TR_CUDA_ATTN_AUTO) return 0;
    int cudnn = cu_attn_cudnn_available(c, why, sizeof why);
    if (!state_of(c)) return snprintf(err, err_len, "attention check: out of memory"), -1;
    tr_attn_table *t = &c->attn->tab;
    t->n = 0;
    for (int i = 0; i < n && !c->failed; i++) {
        tr_attn_key key = tr_attn_key_of(&shapes[i], dt);
        if (tr_attn_table_find(t, &key) >= 0) continue;
        int path = ck_shape(c, &shapes[i], dt, cudnn, log, ctx);
        if (path >= 0 && tr_attn_table_set(t, &key, path) < 0) break; // full: the rest take the rule
    }
    if (c->failed) t->n = 0;
    if (c->failed) return snprintf(err, err_len, "attention check: %s", c->err), -1;
    return 0;
}

extern "C" int tr_cuda_attn_takes(tr_backend *be, const tr_attn_dims *d, int dt, int path, char *why, size_t len)
{
    cuda_backend *c = CB(be);
    if (path == TR_CUDA_ATTN_CUDNN) {
        char info[300];
        if (!cu_attn_cudnn_available(c, why, len)) return 0;
        snprintf(info, sizeof info, "%s", why);
        if (!tr_prec_16(dt)) return snprintf(why, len, "%s: fp32 operands", info), 0;
        if (tr_cudnn_attn_supported(d, dt, why, len) != 0) return 0;
        snprintf(why, len, "%s", info); // (taken: its version and library, for the report)
        return 1;
    }
    why[0] = 0;
    if (tr_attn_path_takes(d, dt, path)) return 1;
    snprintf(why, len, "%s does not take %s operands with heads of %d dimensions", tr_attn_path_name(path),
             tr_prec_name(dt), d->dh);
    return 0;
}

extern "C" int tr_cuda_attn_chosen(tr_backend *be, const tr_attn_dims *d, int dt)
{
    cuda_backend *c = CB(be);
    tr_attn_key k = tr_attn_key_of(d, dt);
    return c->attn ? tr_attn_table_find(&c->attn->tab, &k) : -1;
}
