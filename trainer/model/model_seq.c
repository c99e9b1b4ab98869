/*
 * model_seq.c - the compact SAM of MODEL.md sequenced over a backend's ops:
 * the forward and backward of every layer, the step's entry points (batch
 * checks, upload, out of memory as an error, the loss read once) and the
 * FLOPs.  Every step below names the MODEL.md line it implements.
 */
#include "model_layout.h"

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory in the middle of a step: back to the entry point that runs
 * it (run_guarded), which gives back its workspaces and returns an error. */
static _Noreturn void mdl_oom_unwind(tr_model *m)
{
    if (m->oom) longjmp(*(jmp_buf *)m->oom, 1);
    abort(); /* a step's workspace outside run_guarded: a bug */
}

/* A workspace of n floats for the operands of one op (16-bit storage
 * unpacked for fp32 arithmetic); the caller frees it right after. */
static float *mdl_work_alloc(tr_model *m, size_t n)
{
    void *x = tr_mem_alloc(&m->be->mem, TR_MEM_WORK, n * sizeof(float));
    if (!x) mdl_oom_unwind(m);
    return x;
}

/* ---- operands ------------------------------------------------------------------ */

/* The typed operand of an activation or activation gradient (T), of the
 * compute weights of a parameter (W: with 16-bit storage the masters
 * rounded to 16 bits, m->wc16); element i of activation p (AT). */
#define T(p) mdl_t(m, p)
#define W(p) mdl_w(m, p)
#define AT(p, i) mdl_at(m, p, i)

static void lin_fwd(tr_model *m, void *out, const void *inp, const float *w, const float *b, int N, int I, int O)
{
    m->be->ops->linear_forward(m->be, T(out), T(inp), W(w), W(b), N, I, O);
}

static void lin_bwd(tr_model *m, void *dinp, float *dw, float *db, const void *dout, const void *inp,
                    const float *w, int N, int I, int O)
{
    m->be->ops->linear_backward(m->be, T(dinp), dw, db, T(dout), T(inp), W(w), N, I, O);
}

/* (mean and rstd NULL: not stored, written to a workspace for the op) */
static void ln_fwd(tr_model *m, void *out, float *mean, float *rstd, const void *inp, const float *w,
                   const float *b, int N, int C, float eps)
{
    float *stw = NULL;
    if (!mean || !rstd) {
        stw = mdl_work_alloc(m, 2 * mdl_r16((size_t)N));
        mean = stw, rstd = stw + mdl_r16((size_t)N);
    }
    m->be->ops->layernorm_forward(m->be, T(out), mean, rstd, T(inp), W(w), W(b), N, C, eps);
    tr_mem_free(&m->be->mem, stw);
}

/* (mean and rstd NULL: the statistics are not stored (16-bit storage) and
 * are recomputed from inp and eps exactly as the forward made them: the
 * same statistics of the same stored input, into a workspace) */
static void ln_bwd(tr_model *m, void *dinp, float *dw, float *db, const void *dout, const void *inp,
                   const float *w, const float *mean, const float *rstd, int N, int C, float eps)
{
    float *stw = NULL;
    if (!mean || !rstd) {
        size_t nr = mdl_r16((size_t)N);
        stw = mdl_work_alloc(m, 2 * nr);
        m->be->ops->layernorm_stats(m->be, stw, stw + nr, T(inp), N, C, eps);
        mean = stw, rstd = stw + nr;
    }
    m->be->ops->layernorm_backward(m->be, T(dinp), dw, db, T(dout), T(inp), W(w), mean, rstd, N, C);
    tr_mem_free(&m->be->mem, stw);
}

/* The ConvTranspose's fp32 scratch: the layout's (sc), or with 16-bit
 * storage (none in the layout) a workspace for the op (*ws, freed right
 * after it). */
static float *convt_scratch(tr_model *m, float *sc, int N, int H, int W, int Co, float **ws)
{
    *ws = NULL;
    if (sc) return sc;
    return *ws = mdl_work_alloc(m, m->be->sizes->convt_scratch((size_t)N * H * W, (size_t)Co));
}

static void convt_fwd(tr_model *m, void *out, const void *inp, const float *w, const float *b, float *scratch,
                      int N, int H, int W, int Ci, int Co)
{
    float *ws, *sc = convt_scratch(m, scratch, N, H, W, Co, &ws);
    m->be->ops->convt2x2_forward(m->be, T(out), T(inp), mdl_w(m, w), mdl_w(m, b), sc, N, H, W, Ci, Co);
    tr_mem_free(&m->be->mem, ws);
}

static void convt_bwd(tr_model *m, void *dinp, float *dw, float *db, const void *dout, const void *inp,
                      const float *w, float *scratch, int N, int H, int W, int Ci, int Co)
{
    float *ws, *sc = convt_scratch(m, scratch, N, H, W, Co, &ws);
    m->be->ops->convt2x2_backward(m->be, T(dinp), dw, db, T(dout), T(inp), mdl_w(m, w), sc, N, H, W, Ci, Co);
    tr_mem_free(&m->be->mem, ws);
}

/* What the layer functions below read of the model, unpacked in one place
 * (seq_of): the backend and its ops, the configuration and its geometry
 * (tr_model.geom), the parameters and their gradients, the activations and
 * their gradients. */
typedef struct seq_ctx {
    tr_backend *be;
    const tr_ops *o;
    const tr_config *c;
    const tr_geom *gm;
    const tr_params *p;
    tr_params *g;
    tr_acts *a, *da;
} seq_ctx;

static seq_ctx seq_of(tr_model *m)
{
    return (seq_ctx){.be = m->be, .o = m->be->ops, .c = &m->cfg, .gm = &m->geom, .p = &m->p, .g = &m->g,
                     .a = &m->a, .da = &m->da};
}

/* A span of activation gradients: n elements from p. */
typedef struct grad_span {
    const void *p;
    size_t n;
} grad_span;

/* Zeroes the gradient set of n 4-byte units at off in dact_mem but the k
 * spans skip (attention_backward's dq, dk and dv, which it writes whole:
 * backend.h), so that what accumulates there starts from zero; a span
 * outside the set changes nothing. */
static void zero_grads_but(tr_model *m, size_t off, size_t n, grad_span *skip, int k)
{
    const tr_ops *o = m->be->ops;
    char *lo = (char *)(m->dact_mem + off), *hi = lo + n * sizeof(float), *at = lo;
    size_t esz = mdl_esz(m);
    for (int i = 1; i < k; i++) /* by address */
        for (int j = i; j > 0 && (const char *)skip[j].p < (const char *)skip[j - 1].p; j--) {
            grad_span t = skip[j];
            skip[j] = skip[j - 1], skip[j - 1] = t;
        }
    for (int i = 0; i < k; i++) {
        char *b = (char *)skip[i].p, *e = b + skip[i].n * esz;
        if (!b || b >= hi || e <= at) continue;
        if (b > at) o->zero(m->be, T(at), (size_t)(b - at) / esz);
        at = e;
    }
    if (hi > at) o->zero(m->be, T(at), (size_t)(hi - at) / esz);
}

/* ---- forward / backward ----------------------------------------------------------- */

static tr_attn_dims attn_dims(int N, int Tq, int Tk, int Ci, int heads)
{
    tr_attn_dims d = {.N = N, .Tq = Tq, .Tk = Tk, .heads = heads, .dh = Ci / heads, .ldq = Ci, .ldk = Ci,
                      .ldv = Ci, .ldo = Ci};
    d.sq = d.so = (size_t)Tq * Ci;
    d.sk = d.sv = (size_t)Tk * Ci;
    return d;
}

/* A(qin, kin, vin) of MODEL.md's decoder: projections, attention, out_proj. */
static void ablock_forward(tr_model *m, const tr_attn_p *p, tr_attn_a *a, const void *qin, const void *kin,
                           const void *vin, int N, int Tq, int Tk, int C, int Ci, int heads)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    lin_fwd(m, a->q, qin, p->q_w, p->q_b, N * Tq, C, Ci);
    lin_fwd(m, a->k, kin, p->k_w, p->k_b, N * Tk, C, Ci);
    lin_fwd(m, a->v, vin, p->v_w, p->v_b, N * Tk, C, Ci);
    tr_attn_dims d = attn_dims(N, Tq, Tk, Ci, heads);
    o->attention_forward(be, T(a->ao), T(a->att), T(a->q), T(a->k), T(a->v), &d);
    lin_fwd(m, a->out, a->ao, p->o_w, p->o_b, N * Tq, Ci, C);
}

static void ablock_backward(tr_model *m, const tr_attn_p *p, tr_attn_p *g, const tr_attn_a *a, tr_attn_a *da,
                            const void *qin, const void *kin, const void *vin, void *dqin, void *dkin,
                            void *dvin, int N, int Tq, int Tk, int C, int Ci, int heads)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    lin_bwd(m, da->ao, g->o_w, g->o_b, da->out, a->ao, p->o_w, N * Tq, Ci, C);
    tr_attn_dims d = attn_dims(N, Tq, Tk, Ci, heads);
    /* (da->q, k, v written: the caller's zeroing skips them) */
    o->attention_backward(be, T(da->q), T(da->k), T(da->v), T(da->ao), T(a->ao), T(a->q), T(a->k), T(a->v),
                          T(a->att), &d);
    lin_bwd(m, dqin, g->q_w, g->q_b, da->q, qin, p->q_w, N * Tq, C, Ci);
    lin_bwd(m, dkin, g->k_w, g->k_b, da->k, kin, p->k_w, N * Tk, C, Ci);
    lin_bwd(m, dvin, g->v_w, g->v_b, da->v, vin, p->v_w, N * Tk, C, Ci);
}

/* ---- blocks, layers, slots ----------------------------------------------------------- */

/* dst = src (activations, bit exact) */
static void mcopy(tr_model *m, void *dst, const void *src, size_t n)
{
    m->be->ops->convert(m->be, T(dst), T(src), n);
}

/* Points the encoder tensors that hold every image at pass q's rows (images
 * q * enc_ni ...). */
static void enc_view(tr_model *m, int q)
{
    for (int i = 0; i < m->n_dview; i++) {
        const tr_dview *v = &m->dview[i];
        if (v->kind != 1) continue;
        *(void **)((char *)(v->grad ? &m->da : &m->a) + v->off) = v->base + (size_t)q * v->per;
    }
}

/* Rows (tokens) of one encoder pass: enc_ni images of G*G. */
static size_t pass_rows(const tr_model *m)
{
    return (size_t)m->enc_ni * (size_t)m->geom.GG;
}

/* The input of encoder block i for pass q (the view on pass q). */
static const void *enc_input(tr_model *m, int i, int q)
{
    size_t PE = pass_rows(m) * (size_t)m->cfg.E;
    return i == 0 ? AT(m->a.x0, (size_t)q * PE) : m->a.enc_in[i] ? AT(m->a.enc_in[i], (size_t)q * PE)
                                                                   : m->a.blk[i - 1].xout;
}

/* Self-attention of an encoder block over the GG tokens of each of the
 * pass's images (q, k, v packed in qkv rows of 3E). */
static tr_attn_dims enc_attn_dims(const tr_model *m)
{
    const tr_config *c = &m->cfg;
    int GG = m->geom.GG, E = c->E;
    tr_attn_dims d = {.N = m->enc_ni, .Tq = GG, .Tk = GG, .heads = c->H, .dh = E / c->H, .ldq = 3 * E,
                      .ldk = 3 * E, .ldv = 3 * E, .ldo = E, .sq = (size_t)GG * 3 * E,
                      .sk = (size_t)GG * 3 * E, .sv = (size_t)GG * 3 * E, .so = (size_t)GG * E};
    return d;
}

/* Encoder block i (pre-norm attention + MLP) on input x: one pass's
 * images (the view on that pass).  out 0 (a recomputation whose output
 * nothing reads: its backward needs only the gradient) skips the last
 * linear layer and the residual. */
static void enc_block_forward(tr_model *m, int i, const void *x, int out)
{
    seq_ctx s = seq_of(m);
    int E = s.c->E, BT = (int)pass_rows(m);
    tr_enc_block_a *ab = &s.a->blk[i];
    const tr_enc_block_p *pb = &s.p->blk[i];
    ln_fwd(m, ab->ln1, ab->ln1_m, ab->ln1_r, x, pb->ln1_w, pb->ln1_b, BT, E, 1e-6f);
    lin_fwd(m, ab->qkv, ab->ln1, pb->qkv_w, pb->qkv_b, BT, E, 3 * E);
    tr_attn_dims d = enc_attn_dims(m);
    s.o->attention_forward(s.be, T(ab->ao), T(ab->att), T(ab->qkv), T(AT(ab->qkv, E)), T(AT(ab->qkv, 2 * E)), &d);
    lin_fwd(m, ab->xmid, ab->ao, pb->proj_w, pb->proj_b, BT, E, E);
    s.o->accumulate(s.be, T(ab->xmid), T(x), (size_t)BT * E);
    ln_fwd(m, ab->ln2, ab->ln2_m, ab->ln2_r, ab->xmid, pb->ln2_w, pb->ln2_b, BT, E, 1e-6f);
    lin_fwd(m, ab->fc1, ab->ln2, pb->fc1_w, pb->fc1_b, BT, E, 4 * E);
    s.o->gelu_forward(s.be, T(ab->gelu), T(ab->fc1), (size_t)BT * 4 * E);
    if (!out) return;
    lin_fwd(m, ab->xout, ab->gelu, pb->fc2_w, pb->fc2_b, BT, 4 * E, E);
    s.o->accumulate(s.be, T(ab->xout), T(ab->xmid), (size_t)BT * E);
}

/* The backward of encoder block i on one pass (its activations in place,
 * its gradient set zeroed first: the blocks share it), the mirror of
 * enc_block_forward: dxout, the gradient of its output, flows into dxin
 * (+=; NULL: not needed) through the residuals; x is its input. */
static void enc_block_backward(tr_model *m, int i, const void *x, void *dxout, void *dxin)
{
    seq_ctx s = seq_of(m);
    int GG = (int)pass_rows(m), E = s.c->E; /* (GG: the pass's rows) */
    size_t GE = (size_t)GG * E;
    const tr_enc_block_a *ab = &s.a->blk[i];
    tr_enc_block_a *db = &s.da->blk[i];
    const tr_enc_block_p *pb = &s.p->blk[i];
    tr_enc_block_p *gb = &s.g->blk[i];
    /* the block's gradient set shares the union region: zeroed, but for
     * the qkv gradient, which attention_backward writes whole */
    zero_grads_but(m, m->dblk_off, m->dblk_n, (grad_span[]){{db->qkv, GE * 3}}, 1);
    s.o->accumulate(s.be, T(db->xmid), T(dxout), GE);
    lin_bwd(m, db->gelu, gb->fc2_w, gb->fc2_b, dxout, ab->gelu, pb->fc2_w, GG, 4 * E, E);
    s.o->gelu_backward(s.be, T(db->fc1), T(db->gelu), T(ab->fc1), GE * 4);
    lin_bwd(m, db->ln2, gb->fc1_w, gb->fc1_b, db->fc1, ab->ln2, pb->fc1_w, GG, E, 4 * E);
    ln_bwd(m, db->xmid, gb->ln2_w, gb->ln2_b, db->ln2, ab->xmid, pb->ln2_w, ab->ln2_m, ab->ln2_r, GG, E,
           1e-6f);
    if (dxin) s.o->accumulate(s.be, T(dxin), T(db->xmid), GE);
    lin_bwd(m, db->ao, gb->proj_w, gb->proj_b, db->xmid, ab->ao, pb->proj_w, GG, E, E);
    tr_attn_dims d = enc_attn_dims(m);
    s.o->attention_backward(s.be, T(db->qkv), T(AT(db->qkv, E)), T(AT(db->qkv, 2 * E)), T(db->ao), T(ab->ao),
                            T(ab->qkv), T(AT(ab->qkv, E)), T(AT(ab->qkv, 2 * E)), T(ab->att), &d);
    lin_bwd(m, db->ln1, gb->qkv_w, gb->qkv_b, db->qkv, ab->ln1, pb->qkv_w, GG, E, 3 * E);
    ln_bwd(m, dxin, gb->ln1_w, gb->ln1_b, db->ln1, x, pb->ln1_w, ab->ln1_m, ab->ln1_r, GG, E, 1e-6f);
}

/* Decoder layer l of the two-way transformer on tokens Tc, keys Kc of NP
 * pairs (one chunk). */
static void dec_layer_forward(tr_model *m, int l, const void *Tc, const void *Kc, int NP)
{
    seq_ctx s = seq_of(m);
    int GG = s.gm->GG, C = s.c->C, T = s.gm->T;
    size_t nT = (size_t)NP * T * C, nK = (size_t)NP * GG * C;
    tr_dec_layer_a *L = &s.a->lay[l];
    const tr_dec_layer_p *pl = &s.p->lay[l];
    const void *t1in;
    if (l == 0) {
        ablock_forward(m, &pl->sa, &L->sa, Tc, Tc, Tc, NP, T, T, C, C, s.c->h);
        t1in = L->sa.out;
    } else {
        s.o->add(s.be, T(L->sa_qin), T(Tc), T(s.a->T0), nT);
        ablock_forward(m, &pl->sa, &L->sa, L->sa_qin, L->sa_qin, Tc, NP, T, T, C, C, s.c->h);
        s.o->add(s.be, T(L->t1pre), T(Tc), T(L->sa.out), nT);
        t1in = L->t1pre;
    }
    ln_fwd(m, L->t1, L->n1_m, L->n1_r, t1in, pl->n1_w, pl->n1_b, NP * T, C, 1e-5f);
    s.o->add(s.be, T(L->t2i_qin), T(L->t1), T(s.a->T0), nT);
    s.o->add_bcast(s.be, T(L->kpe), T(Kc), T(s.a->dense_pe), (size_t)NP, (size_t)GG * C);
    ablock_forward(m, &pl->t2i, &L->t2i, L->t2i_qin, L->kpe, Kc, NP, T, GG, C, C / 2, s.c->h);
    s.o->add(s.be, T(L->t2pre), T(L->t1), T(L->t2i.out), nT);
    ln_fwd(m, L->t2, L->n2_m, L->n2_r, L->t2pre, pl->n2_w, pl->n2_b, NP * T, C, 1e-5f);
    lin_fwd(m, L->fc1, L->t2, pl->fc1_w, pl->fc1_b, NP * T, C, 8 * C);
    s.o->relu_forward(s.be, T(L->relu), T(L->fc1), (size_t)NP * T * 8 * C);
    lin_fwd(m, L->t3pre, L->relu, pl->fc2_w, pl->fc2_b, NP * T, 8 * C, C);
    s.o->accumulate(s.be, T(L->t3pre), T(L->t2), nT);
    ln_fwd(m, L->t3, L->n3_m, L->n3_r, L->t3pre, pl->n3_w, pl->n3_b, NP * T, C, 1e-5f);
    s.o->add(s.be, T(L->i2t_kin), T(L->t3), T(s.a->T0), nT);
    ablock_forward(m, &pl->i2t, &L->i2t, L->kpe, L->i2t_kin, L->t3, NP, GG, T, C, C / 2, s.c->h);
    s.o->add(s.be, T(L->k4pre), T(Kc), T(L->i2t.out), nK);
    ln_fwd(m, L->kout, L->n4_m, L->n4_r, L->k4pre, pl->n4_w, pl->n4_b, NP * GG, C, 1e-5f);
}

/* The backward of decoder layer l on one chunk of NP pairs (its gradient
 * set zeroed first: the layers share it), the mirror of dec_layer_forward:
 * the gradients of its tokens and keys flow into the previous layer's (or
 * the prompt tokens' and image keys'). */
static void dec_layer_backward(tr_model *m, int l, int NP)
{
    seq_ctx s = seq_of(m);
    int GG = s.gm->GG, C = s.c->C, T = s.gm->T;
    size_t nT = (size_t)NP * T * C, nK = (size_t)NP * GG * C;
    const tr_dec_layer_a *L = &s.a->lay[l];
    tr_dec_layer_a *dL = &s.da->lay[l];
    const tr_dec_layer_p *pl = &s.p->lay[l];
    tr_dec_layer_p *gl = &s.g->lay[l];
    const void *Tin = l == 0 ? s.a->T0 : s.a->lay[l - 1].t3, *Kin = l == 0 ? s.a->Kimg : s.a->lay[l - 1].kout;
    void *dTin = l == 0 ? s.da->T0 : s.da->lay[l - 1].t3, *dKin = l == 0 ? s.da->Kimg : s.da->lay[l - 1].kout;
    /* the layer's gradient set shares the union region: zeroed, but for
     * the attentions' dq, dk and dv, which attention_backward writes whole */
    size_t nh = (size_t)NP * T * (C / 2), nhk = (size_t)NP * GG * (C / 2);
    grad_span qkv[] = {{dL->sa.q, nT},     {dL->sa.k, nT},     {dL->sa.v, nT},
                       {dL->t2i.q, nh},    {dL->t2i.k, nhk},   {dL->t2i.v, nhk},
                       {dL->i2t.q, nhk},   {dL->i2t.k, nh},    {dL->i2t.v, nh}};
    zero_grads_but(m, m->dlay_off, m->dlay_n, qkv, (int)(sizeof qkv / sizeof *qkv));
    if (l > 0) {
        s.o->zero(s.be, T(dTin), nT);
        s.o->zero(s.be, T(dKin), nK);
    }
    /* 4: image to tokens */
    ln_bwd(m, dL->k4pre, gl->n4_w, gl->n4_b, dL->kout, L->k4pre, pl->n4_w, L->n4_m, L->n4_r,
           NP * GG, C, 1e-5f);
    s.o->accumulate(s.be, T(dKin), T(dL->k4pre), nK);
    s.o->accumulate(s.be, T(dL->i2t.out), T(dL->k4pre), nK);
    ablock_backward(m, &pl->i2t, &gl->i2t, &L->i2t, &dL->i2t, L->kpe, L->i2t_kin, L->t3, dL->kpe,
                    dL->i2t_kin, dL->t3, NP, GG, T, C, C / 2, s.c->h);
    s.o->accumulate(s.be, T(dL->t3), T(dL->i2t_kin), nT);
    s.o->accumulate(s.be, T(s.da->T0), T(dL->i2t_kin), nT);
    /* 3: MLP */
    ln_bwd(m, dL->t3pre, gl->n3_w, gl->n3_b, dL->t3, L->t3pre, pl->n3_w, L->n3_m, L->n3_r,
           NP * T, C, 1e-5f);
    s.o->accumulate(s.be, T(dL->t2), T(dL->t3pre), nT);
    lin_bwd(m, dL->relu, gl->fc2_w, gl->fc2_b, dL->t3pre, L->relu, pl->fc2_w, NP * T, 8 * C, C);
    s.o->relu_backward(s.be, T(dL->fc1), T(dL->relu), T(L->fc1), (size_t)NP * T * 8 * C);
    lin_bwd(m, dL->t2, gl->fc1_w, gl->fc1_b, dL->fc1, L->t2, pl->fc1_w, NP * T, C, 8 * C);
    /* 2: tokens to image */
    ln_bwd(m, dL->t2pre, gl->n2_w, gl->n2_b, dL->t2, L->t2pre, pl->n2_w, L->n2_m, L->n2_r,
           NP * T, C, 1e-5f);
    s.o->accumulate(s.be, T(dL->t1), T(dL->t2pre), nT);
    s.o->accumulate(s.be, T(dL->t2i.out), T(dL->t2pre), nT);
    ablock_backward(m, &pl->t2i, &gl->t2i, &L->t2i, &dL->t2i, L->t2i_qin, L->kpe, Kin, dL->t2i_qin, dL->kpe,
                    dKin, NP, T, GG, C, C / 2, s.c->h);
    s.o->accumulate(s.be, T(dKin), T(dL->kpe), nK);
    s.o->accumulate(s.be, T(dL->t1), T(dL->t2i_qin), nT);
    s.o->accumulate(s.be, T(s.da->T0), T(dL->t2i_qin), nT);
    /* 1: self attention */
    if (l == 0) {
        ln_bwd(m, dL->sa.out, gl->n1_w, gl->n1_b, dL->t1, L->sa.out, pl->n1_w, L->n1_m, L->n1_r,
               NP * T, C, 1e-5f);
        ablock_backward(m, &pl->sa, &gl->sa, &L->sa, &dL->sa, Tin, Tin, Tin, dTin, dTin, dTin, NP, T, T, C,
                        C, s.c->h);
    } else {
        ln_bwd(m, dL->t1pre, gl->n1_w, gl->n1_b, dL->t1, L->t1pre, pl->n1_w, L->n1_m, L->n1_r,
               NP * T, C, 1e-5f);
        s.o->accumulate(s.be, T(dTin), T(dL->t1pre), nT);
        s.o->accumulate(s.be, T(dL->sa.out), T(dL->t1pre), nT);
        ablock_backward(m, &pl->sa, &gl->sa, &L->sa, &dL->sa, L->sa_qin, L->sa_qin, Tin, dL->sa_qin,
                        dL->sa_qin, dTin, NP, T, T, C, C, s.c->h);
        s.o->accumulate(s.be, T(dTin), T(dL->sa_qin), nT);
        s.o->accumulate(s.be, T(s.da->T0), T(dL->sa_qin), nT);
    }
}

/* Before the backward of encoder block i on pass b: the view on pass b and
 * the block's activations in place (recomputed from the segment's saved
 * input). */
static void enc_restore(tr_model *m, int i, int b)
{
    enc_view(m, b);
    int N = m->opt.ckpt_every;
    if (m->enc_slot[i] < 0 || !N) return; /* (without checkpointing only frozen blocks, never restored, have slots) */
    int seg = i / N;
    if (seg == m->enc_res && b == m->enc_res_img) return;
    int end = seg * N + N < m->cfg.L ? seg * N + N : m->cfg.L; /* the last output: saved, not read */
    for (int j = seg * N; j < end; j++) enc_block_forward(m, j, enc_input(m, j, b), j < end - 1);
    m->enc_res = seg, m->enc_res_img = b;
}

/* Points the decoder tensors that hold every pair at chunk c's rows. */
static void dec_view(tr_model *m, int c)
{
    size_t p0 = (size_t)c * (size_t)m->dec_chunk;
    for (int i = 0; i < m->n_dview; i++) {
        const tr_dview *v = &m->dview[i];
        if (v->kind != 0) continue;
        *(void **)((char *)(v->grad ? &m->da : &m->a) + v->off) = v->base + p0 * v->per;
    }
    for (int l = 0; l < m->cfg.D; l++) m->a.lay[l].i2t.out = m->a.lay[l].k4pre; /* in place */
}

/* Pairs [p0, p0 + n) of chunk c. */
static int chunk_pairs(const tr_model *m, int c, size_t *p0)
{
    size_t NP = (size_t)m->B * (size_t)m->M, nc = (size_t)m->dec_chunk;
    *p0 = (size_t)c * nc;
    return (int)(NP - *p0 < nc ? NP - *p0 : nc);
}

/* The image keys of the chunk's pairs: Kimg = emb of the pair's image + no_mask. */
static void keys_chunk_forward(tr_model *m, size_t p0, int n)
{
    tr_backend *be = m->be;
    size_t GG = (size_t)m->geom.GG, C = (size_t)m->cfg.C, M = (size_t)m->M;
    for (size_t q = p0; q < p0 + (size_t)n;) {
        size_t img = q / M, e = (img + 1) * M < p0 + (size_t)n ? (img + 1) * M : p0 + (size_t)n;
        be->ops->keys_forward(be, T(AT(m->a.Kimg, (q - p0) * GG * C)), T(AT(m->a.emb, img * GG * C)),
                              W(m->p.no_mask), 1, (int)(e - q), (int)GG, (int)C);
        q = e;
    }
}

static void keys_chunk_backward(tr_model *m, size_t p0, int n, int to_emb)
{
    tr_backend *be = m->be;
    size_t GG = (size_t)m->geom.GG, C = (size_t)m->cfg.C, M = (size_t)m->M;
    for (size_t q = p0; q < p0 + (size_t)n;) {
        size_t img = q / M, e = (img + 1) * M < p0 + (size_t)n ? (img + 1) * M : p0 + (size_t)n;
        be->ops->keys_backward(be, T(to_emb ? AT(m->da.emb, img * GG * C) : NULL), m->g.no_mask,
                               T(AT(m->da.Kimg, (q - p0) * GG * C)), 1, (int)(e - q), (int)GG, (int)C);
        q = e;
    }
}

/* The decoder forward of chunk c: prompt tokens, image keys, the two-way
 * transformer, the tail (final attention, upscaling), the heads; writes the
 * chunk's rows of out.logits and out.iou unless out is 0 (a recomputation:
 * the backward reads neither).  Leaves the view on chunk c. */
static void dec_chunk_forward(tr_model *m, const tr_batch *b, int ci, int out)
{
    seq_ctx s = seq_of(m);
    int S = s.c->S, G = s.gm->G, GG = s.gm->GG, C = s.c->C, K = m->K, T = s.gm->T, RR = s.gm->RR;
    size_t p0;
    int NP = chunk_pairs(m, ci, &p0);
    size_t nT = (size_t)NP * T * C;
    dec_view(m, ci);
    s.o->prompt_tokens_forward(s.be, T(s.a->T0), b->points + p0 * (size_t)K * 2, b->labels + p0 * (size_t)K,
                               m->pe_gaussian, W(s.p->label_emb), W(s.p->not_a_point), W(s.p->iou_token),
                               W(s.p->mask_token), NP, K, C, S);
    keys_chunk_forward(m, p0, NP);

    /* two-way transformer */
    const void *Tc = s.a->T0, *Kc = s.a->Kimg;
    for (int l = 0; l < s.c->D; l++) {
        dec_layer_forward(m, l, Tc, Kc, NP);
        Tc = s.a->lay[l].t3, Kc = s.a->lay[l].kout;
    }
    s.o->add(s.be, T(s.a->fin_qin), T(Tc), T(s.a->T0), nT);
    s.o->add_bcast(s.be, T(s.a->fin_kin), T(Kc), T(s.a->dense_pe), (size_t)NP, (size_t)GG * C);
    ablock_forward(m, &s.p->fin, &s.a->fin, s.a->fin_qin, s.a->fin_kin, Kc, NP, T, GG, C, C / 2, s.c->h);
    s.o->add(s.be, T(s.a->tfpre), T(Tc), T(s.a->fin.out), nT);
    ln_fwd(m, s.a->tf, s.a->fin_m, s.a->fin_r, s.a->tfpre, s.p->fin_n_w, s.p->fin_n_b, NP * T, C, 1e-5f);

    /* upscaling, hypernetwork, mask logits, IoU head */
    convt_fwd(m, s.a->up1, Kc, s.p->up1_w, s.p->up1_b, s.a->up_scratch, NP, G, G, C, C / 4);
    ln_fwd(m, s.a->upln, s.a->upln_m, s.a->upln_r, s.a->up1, s.p->upln_w, s.p->upln_b, NP * 4 * GG, C / 4, 1e-6f);
    s.o->gelu_forward(s.be, T(s.a->upgelu), T(s.a->upln), (size_t)NP * 4 * GG * (C / 4));
    convt_fwd(m, s.a->up2, s.a->upgelu, s.p->up2_w, s.p->up2_b, s.a->up_scratch, NP, 2 * G, 2 * G, C / 4, C / 8);
    s.o->gelu_forward(s.be, T(s.a->U), T(s.a->up2), (size_t)NP * RR * (C / 8));
    s.o->rows_gather(s.be, T(s.a->tmask), T(s.a->tf), NP, T, C, 1);
    lin_fwd(m, s.a->h0, s.a->tmask, s.p->hyp_w[0], s.p->hyp_b[0], NP, C, C);
    s.o->relu_forward(s.be, T(s.a->h0r), T(s.a->h0), (size_t)NP * C);
    lin_fwd(m, s.a->h1, s.a->h0r, s.p->hyp_w[1], s.p->hyp_b[1], NP, C, C);
    s.o->relu_forward(s.be, T(s.a->h1r), T(s.a->h1), (size_t)NP * C);
    lin_fwd(m, s.a->hyp, s.a->h1r, s.p->hyp_w[2], s.p->hyp_b[2], NP, C, C / 8);
    if (out) s.o->mask_dot_forward(s.be, T(s.a->logits), T(s.a->U), T(s.a->hyp), NP, RR, C / 8);
    s.o->rows_gather(s.be, T(s.a->tiou), T(s.a->tf), NP, T, C, 0);
    lin_fwd(m, s.a->i0, s.a->tiou, s.p->iouh_w[0], s.p->iouh_b[0], NP, C, C);
    s.o->relu_forward(s.be, T(s.a->i0r), T(s.a->i0), (size_t)NP * C);
    lin_fwd(m, s.a->i1, s.a->i0r, s.p->iouh_w[1], s.p->iouh_b[1], NP, C, C);
    s.o->relu_forward(s.be, T(s.a->i1r), T(s.a->i1), (size_t)NP * C);
    if (out) lin_fwd(m, s.a->iou, s.a->i1r, s.p->iouh_w[2], s.p->iouh_b[2], NP, C, 1);
    if (!m->dec_full) m->dec_res = ci;
}

/* Before the backward of chunk c: the view on it and its activations in
 * place (recomputed with --checkpoint-decoder). */
static void dec_restore(tr_model *m, const tr_batch *b, int ci)
{
    if (m->dec_full || m->dec_res == ci) dec_view(m, ci);
    else dec_chunk_forward(m, b, ci, 0);
}

/* The encoder (pass by pass), the neck and the dense PE: everything before
 * the decoder. */
static void forward_encoder(tr_model *m, const tr_batch *b)
{
    seq_ctx s = seq_of(m);
    int S = s.c->S, P = s.c->P, G = s.gm->G, GG = s.gm->GG, E = s.c->E, C = s.c->C, B = m->B, BT = B * GG;
    if (m->wc16) /* the compute weights: the masters rounded to nearest even */
        s.o->convert(s.be, tr_typed(m->wc16, m->adt), tr_f32(m->param_mem), m->n_param_floats);

    /* encoder: patch embedding, positions, L pre-norm blocks, neck */
    size_t GE = (size_t)GG * E, ni = (size_t)m->enc_ni, PE = ni * GE;
    int np = B / m->enc_ni; /* passes of enc_ni images */
    for (int q = 0; q < np; q++) { /* pass by pass through one pass's patches */
        s.o->patch_im2col(s.be, T(s.a->patches), b->image + (size_t)q * ni * S * S * 3, b->content + 2 * q * ni,
                          (int)ni, S, P);
        lin_fwd(m, AT(s.a->x0, (size_t)q * PE), s.a->patches, s.p->patch_w, s.p->patch_b, (int)ni * GG, s.gm->PP3, E);
    }
    for (int i = 0; i < B; i++) s.o->accumulate(s.be, T(AT(s.a->x0, (size_t)i * GE)), W(s.p->pos), GE);
    for (int q = 0; q < np; q++) { /* pass by pass */
        enc_view(m, q);
        for (int i = 0; i < s.c->L; i++) {
            if (s.a->enc_in[i]) mcopy(m, AT(s.a->enc_in[i], (size_t)q * PE), s.a->blk[i - 1].xout, PE);
            enc_block_forward(m, i, enc_input(m, i, q), 1);
        }
        if (s.c->L && s.a->enc_out) mcopy(m, AT(s.a->enc_out, (size_t)q * PE), s.a->blk[s.c->L - 1].xout, PE);
    }
    enc_view(m, 0);
    m->enc_res = s.c->L == 0 ? -1 : m->opt.ckpt_every ? (s.c->L - 1) / m->opt.ckpt_every : s.c->L - 1;
    m->enc_res_img = np - 1;
    const void *x = s.c->L ? (s.a->enc_out ? s.a->enc_out : s.a->blk[s.c->L - 1].xout) : s.a->x0;
    lin_fwd(m, s.a->neck, x, s.p->neck_w, NULL, BT, E, C);
    ln_fwd(m, s.a->emb, s.a->emb_m, s.a->emb_r, s.a->neck, s.p->neck_ln_w, s.p->neck_ln_b, BT, C, 1e-6f);

    /* prompt encoder: the dense PE */
    s.o->pe_dense(s.be, T(s.a->dense_pe), m->pe_gaussian, G, C);
    m->dec_res = -1;
}

static void forward_body(tr_model *m, const tr_batch *b)
{
    forward_encoder(m, b);
    for (int ci = 0; ci < m->n_chunks; ci++) { /* the decoder chunk by chunk */
        dec_chunk_forward(m, b, ci, 1);
    }
    dec_view(m, 0);
}

/* The backward of decoder chunk ci (its activations in place, the view on
 * it, its loss gradients written): heads, tail, layers, prompt tokens and
 * image keys; parameter gradients and the image embedding's gradient
 * accumulate. */
static void dec_chunk_backward(tr_model *m, const tr_batch *b, int ci)
{
    seq_ctx s = seq_of(m);
    int G = s.gm->G, GG = s.gm->GG, C = s.c->C, K = m->K, T = s.gm->T, RR = s.gm->RR;
    int lo = m->enc_lo;
    size_t p0;
    int NP = chunk_pairs(m, ci, &p0);
    size_t nc = (size_t)m->dec_chunk;
    size_t nT = (size_t)NP * T * C, nK = (size_t)NP * GG * C, nUp = nc * GG * C;
    s.o->zero(s.be, tr_f32(m->dact_mem + m->ddec_off), m->ddec_n); /* the chunk's gradients (4-byte units) */
    s.o->zero(s.be, T(s.da->U), nc * RR * (C / 8));            /* the tail's, in the union region */
    s.o->zero(s.be, T(s.da->up2), nc * RR * (C / 8));
    /* IoU head */
    lin_bwd(m, s.da->i1r, s.g->iouh_w[2], s.g->iouh_b[2], s.da->iou, s.a->i1r, s.p->iouh_w[2], NP, C, 1);
    s.o->relu_backward(s.be, T(s.da->i1), T(s.da->i1r), T(s.a->i1), (size_t)NP * C);
    lin_bwd(m, s.da->i0r, s.g->iouh_w[1], s.g->iouh_b[1], s.da->i1, s.a->i0r, s.p->iouh_w[1], NP, C, C);
    s.o->relu_backward(s.be, T(s.da->i0), T(s.da->i0r), T(s.a->i0), (size_t)NP * C);
    lin_bwd(m, s.da->tiou, s.g->iouh_w[0], s.g->iouh_b[0], s.da->i0, s.a->tiou, s.p->iouh_w[0], NP, C, C);
    s.o->rows_scatter_add(s.be, T(s.da->tf), T(s.da->tiou), NP, T, C, 0);
    /* mask logits and hypernetwork */
    s.o->mask_dot_backward(s.be, T(s.da->U), T(s.da->hyp), T(s.da->logits), T(s.a->U), T(s.a->hyp), NP, RR, C / 8);
    lin_bwd(m, s.da->h1r, s.g->hyp_w[2], s.g->hyp_b[2], s.da->hyp, s.a->h1r, s.p->hyp_w[2], NP, C, C / 8);
    s.o->relu_backward(s.be, T(s.da->h1), T(s.da->h1r), T(s.a->h1), (size_t)NP * C);
    lin_bwd(m, s.da->h0r, s.g->hyp_w[1], s.g->hyp_b[1], s.da->h1, s.a->h0r, s.p->hyp_w[1], NP, C, C);
    s.o->relu_backward(s.be, T(s.da->h0), T(s.da->h0r), T(s.a->h0), (size_t)NP * C);
    lin_bwd(m, s.da->tmask, s.g->hyp_w[0], s.g->hyp_b[0], s.da->h0, s.a->tmask, s.p->hyp_w[0], NP, C, C);
    s.o->rows_scatter_add(s.be, T(s.da->tf), T(s.da->tmask), NP, T, C, 1);
    /* upscaling */
    const void *Kc = s.a->lay[s.c->D - 1].kout;
    void *dKc = s.da->lay[s.c->D - 1].kout, *dTc = s.da->lay[s.c->D - 1].t3;
    s.o->gelu_backward(s.be, T(s.da->up2), T(s.da->U), T(s.a->up2), (size_t)NP * RR * (C / 8));
    s.o->zero(s.be, T(s.da->upgelu), nUp); /* the buffers alternate: each zeroed before it accumulates */
    convt_bwd(m, s.da->upgelu, s.g->up2_w, s.g->up2_b, s.da->up2, s.a->upgelu, s.p->up2_w, s.da->up_scratch, NP,
              2 * G, 2 * G, C / 4, C / 8);
    s.o->zero(s.be, T(s.da->upln), nUp);
    s.o->gelu_backward(s.be, T(s.da->upln), T(s.da->upgelu), T(s.a->upln), (size_t)NP * 4 * GG * (C / 4));
    s.o->zero(s.be, T(s.da->up1), nUp);
    ln_bwd(m, s.da->up1, s.g->upln_w, s.g->upln_b, s.da->upln, s.a->up1, s.p->upln_w, s.a->upln_m, s.a->upln_r,
           NP * 4 * GG, C / 4, 1e-6f);
    convt_bwd(m, dKc, s.g->up1_w, s.g->up1_b, s.da->up1, Kc, s.p->up1_w, s.da->up_scratch, NP, G, G, C, C / 4);
    /* final token-to-image attention */
    /* (fin.q, k, v, before fin.ao in that buffer: written by attention_backward) */
    s.o->zero(s.be, T(s.da->fin.ao), (size_t)((char *)s.da->fin.out - (char *)s.da->fin.ao) / mdl_esz(m) + nT);
    s.o->zero(s.be, T(s.da->pp_u[1]), (size_t)((char *)s.da->fin_qin - (char *)s.da->pp_u[1]) / mdl_esz(m) + nT);
    ln_bwd(m, s.da->tfpre, s.g->fin_n_w, s.g->fin_n_b, s.da->tf, s.a->tfpre, s.p->fin_n_w, s.a->fin_m, s.a->fin_r,
           NP * T, C, 1e-5f);
    s.o->accumulate(s.be, T(dTc), T(s.da->tfpre), nT);
    s.o->accumulate(s.be, T(s.da->fin.out), T(s.da->tfpre), nT);
    ablock_backward(m, &s.p->fin, &s.g->fin, &s.a->fin, &s.da->fin, s.a->fin_qin, s.a->fin_kin, Kc, s.da->fin_qin,
                    s.da->fin_kin, dKc, NP, T, GG, C, C / 2, s.c->h);
    s.o->accumulate(s.be, T(dTc), T(s.da->fin_qin), nT);
    s.o->accumulate(s.be, T(s.da->T0), T(s.da->fin_qin), nT);
    s.o->accumulate(s.be, T(dKc), T(s.da->fin_kin), nK);
    /* decoder layers in reverse; one shared gradient set, zeroed per layer */
    for (int l = s.c->D - 1; l >= 0; l--) dec_layer_backward(m, l, NP);
    /* prompt tokens and image keys of the chunk */
    s.o->prompt_tokens_backward(s.be, s.g->label_emb, s.g->not_a_point, s.g->iou_token, s.g->mask_token, T(s.da->T0),
                                b->labels + p0 * (size_t)K, NP, K, C);
    keys_chunk_backward(m, p0, NP, lo <= s.c->L);
}

/* The loss of chunk ci (the view on it): its gradients those of the batch's
 * loss (scale * the flat mean over n_valid pairs, or scale * the sum when
 * sum), its means summed into acc weighted by its valid pairs.  Returns
 * its count of valid pairs. */
static int dec_chunk_loss(tr_model *m, const tr_batch *b, int ci, float scale, int sum)
{
    tr_backend *be = m->be;
    int RR = m->geom.RR;
    size_t p0;
    int NP = chunk_pairs(m, ci, &p0);
    if (!m->chunk_valid[ci]) return 0; /* no valid pair: its gradients are 0, its backward skipped */
    be->ops->sam_loss(be, T(m->da.logits), T(m->da.iou), T(m->a.logits), T(m->a.iou), b->masks + p0 * (size_t)RR,
                      b->valid + p0, NP, RR, sum ? scale * (float)m->n_valid : scale, m->n_valid, m->loss_sums);
    return m->chunk_valid[ci];
}

/* The batch's means from the sums of dec_chunk_loss (the one read of
 * backend memory in a step). */
static tr_loss loss_means(tr_model *m)
{
    double s[4];
    m->be->ops->download(m->be, s, m->loss_sums, sizeof s);
    tr_loss acc = {.focal = s[0], .dice = s[1], .iou_mse = s[2], .miou = s[3], .n_valid = m->n_valid};
    if (acc.n_valid) {
        acc.focal /= acc.n_valid, acc.dice /= acc.n_valid, acc.iou_mse /= acc.n_valid, acc.miou /= acc.n_valid;
        acc.loss = 20.0 * acc.focal + acc.dice + acc.iou_mse;
    }
    return acc;
}

/* Zeroes the gradients (parameters when zero_grads, activations) before a
 * backward; returns the batch's count of valid pairs. */
static int backward_begin(tr_model *m, int zero_grads)
{
    tr_backend *be = m->be;
    if (zero_grads && m->grad_mem) be->ops->zero(be, tr_f32(m->grad_mem), m->n_grad_floats);
    be->ops->zero(be, tr_f32(m->dact_mem), m->n_dact_floats); /* (4-byte units) */
    be->ops->zero(be, tr_f32((float *)m->loss_sums), 4 * sizeof(double) / sizeof(float)); /* 0.0: zero bits */
    return m->n_valid;
}

/* The backward below the image embedding: neck, encoder blocks image by
 * image, patch embedding (as far down as something is trainable). */
static void enc_backward(tr_model *m, const tr_batch *b)
{
    seq_ctx s = seq_of(m);
    int S = s.c->S, P = s.c->P, GG = s.gm->GG, E = s.c->E, C = s.c->C, B = m->B, BT = B * GG;
    int lo = m->enc_lo;
    if (lo > s.c->L) return;
    /* neck (every image), then the encoder image by image */
    void *dxl = lo == s.c->L ? NULL : s.c->L ? s.da->enc_out : s.da->x0;
    ln_bwd(m, s.da->neck, s.g->neck_ln_w, s.g->neck_ln_b, s.da->emb, s.a->neck, s.p->neck_ln_w, s.a->emb_m,
           s.a->emb_r, BT, C, 1e-6f);
    const void *xl = s.c->L ? (s.a->enc_out ? s.a->enc_out : s.a->blk[s.c->L - 1].xout) : s.a->x0;
    lin_bwd(m, dxl, s.g->neck_w, NULL, s.da->neck, xl, s.p->neck_w, BT, E, C);
    size_t GE = (size_t)GG * E, ni = (size_t)m->enc_ni, PE = ni * GE;
    int np = B / m->enc_ni; /* passes of enc_ni images */
    for (int q = np - 1; q >= 0 && lo < s.c->L; q--) {
        for (int i = s.c->L - 1; i >= 0 && i >= lo; i--) {
            enc_restore(m, i, q);
            tr_enc_block_a *db = &s.da->blk[i];
            const void *xin = enc_input(m, i, q);
            void *dxout = i < s.c->L - 1 ? db->xout
                          : s.da->enc_out ? AT(s.da->enc_out, (size_t)q * PE)
                                          : s.da->pp_x[i % 2];
            void *dxin = i > 0 ? (i > lo ? s.da->blk[i - 1].xout : NULL)
                               : (lo < 0 ? AT(s.da->x0, (size_t)q * PE) : NULL);
            if (dxin && i > 0) s.o->zero(s.be, T(dxin), PE);
            enc_block_backward(m, i, xin, dxout, dxin);
        }
    }
    enc_view(m, 0);
    if (lo >= 0) return;
    if (s.g->pos) /* a parameter gradient: accumulated in fp32 */
        for (int i = 0; i < B; i++) s.o->accumulate(s.be, tr_f32(s.g->pos), T(AT(s.da->x0, (size_t)i * GE)), GE);
    for (int q = 0; q < np; q++) {
        s.o->patch_im2col(s.be, T(s.a->patches), b->image + (size_t)q * ni * S * S * 3, b->content + 2 * q * ni,
                          (int)ni, S, P);
        lin_bwd(m, NULL, s.g->patch_w, s.g->patch_b, AT(s.da->x0, (size_t)q * PE), s.a->patches, s.p->patch_w,
                (int)ni * GG, s.gm->PP3, E);
    }
}

static tr_loss backward_body(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum)
{
    int n_valid = backward_begin(m, zero_grads);
    if (n_valid == 0) return loss_means(m); /* every gradient 0 */
    for (int ci = m->n_chunks - 1; ci >= 0; ci--) { /* the resident chunk first */
        dec_view(m, ci);
        if (!dec_chunk_loss(m, b, ci, scale, sum)) continue; /* its gradients are 0 */
        dec_restore(m, b, ci);
        dec_chunk_backward(m, b, ci);
    }
    dec_view(m, 0);
    enc_backward(m, b);
    return loss_means(m);
}

static void step_body(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum, tr_loss *loss)
{
    if (!m->opt.ckpt_decoder) {
        forward_body(m, b);
        *loss = backward_body(m, b, zero_grads, scale, sum);
        return;
    }
    /* the decoder's forward and backward chunk by chunk (what
     * tr_model_backward_acc does after recomputing each chunk) */
    forward_encoder(m, b);
    int n_valid = backward_begin(m, zero_grads);
    for (int ci = m->n_chunks - 1; ci >= 0; ci--) { /* the order of tr_model_backward_acc */
        dec_chunk_forward(m, b, ci, 1);
        if (n_valid && dec_chunk_loss(m, b, ci, scale, sum)) dec_chunk_backward(m, b, ci);
    }
    dec_view(m, 0);
    if (n_valid) enc_backward(m, b);
    *loss = loss_means(m);
}

/* ---- entry points: out of memory as an error ---------------------------------------- */

/* What a step runs and with what (one of forward, backward, both). */
typedef struct step_call {
    int kind; /* 0 forward, 1 backward, 2 step */
    const tr_batch *b;
    int zero_grads, sum;
    float scale;
    tr_loss *loss;
} step_call;

/* After a step failed half way: the backend's ops and per-call state as
 * between steps, nothing resident, the step's workspaces given back.  The
 * activations, gradients and loss are undefined until the next forward
 * (and a backward with zero_grads). */
static void step_recover(tr_model *m, uint64_t mark)
{
    tr_backend *be = m->be;
    m->enc_res = m->enc_res_img = m->dec_res = -1;
    dec_view(m, 0);
    tr_mem_free_since(&be->mem, TR_MEM_WORK, mark);
}

/* The host batch before a step: its geometry, labels, points and content
 * sizes checked; its valid pairs counted per decoder chunk (a counting
 * backend's batches hold no data: every pair counts there, so that the
 * backward runs as in a real step).  0, or -1 with err. */
static int batch_check(tr_model *m, const tr_batch *b, char *err, size_t err_len)
{
    int S = m->cfg.S, B = m->B, M = m->M, K = m->K, R = m->geom.R;
    size_t NP = (size_t)B * M;
    if (b->B != B || b->M != M || b->K != K || b->S != S || b->R != R)
        return snprintf(err, err_len, "batch geometry B=%d M=%d K=%d S=%d R=%d does not match the model's "
                        "B=%d M=%d K=%d S=%d R=%d", b->B, b->M, b->K, b->S, b->R, B, M, K, S, R), -1;
    for (size_t i = 0; i < NP * K; i++) {
        if (b->labels[i] < -1 || b->labels[i] > 1)
            return snprintf(err, err_len, "pair %zu point %zu: label %d is not 1, 0 or -1", i / (size_t)K,
                            i % (size_t)K, (int)b->labels[i]), -1;
        if (b->labels[i] >= 0 && !(isfinite(b->points[2 * i]) && isfinite(b->points[2 * i + 1])))
            return snprintf(err, err_len, "pair %zu point %zu: coordinates are not finite", i / (size_t)K,
                            i % (size_t)K), -1;
    }
    for (int i = 0; i < B; i++)
        if (b->content[2 * i] < 0 || b->content[2 * i + 1] < 0)
            return snprintf(err, err_len, "image %d: negative content size", i), -1;
    int all = m->be->mem.counting_only;
    m->n_valid = 0;
    for (int ci = 0; ci < m->n_chunks; ci++) {
        size_t p0;
        int NPc = chunk_pairs(m, ci, &p0), n = 0;
        for (int i = 0; i < NPc; i++) n += all || b->valid[p0 + (size_t)i];
        m->chunk_valid[ci] = n;
        m->n_valid += n;
    }
    return 0;
}

/* The batch in backend memory: the host batch itself where that is the
 * host's, else copied into m->dev. */
static const tr_batch *batch_upload(tr_model *m, const tr_batch *b)
{
    tr_backend *be = m->be;
    tr_batch *d = m->dev;
    if (!d) return b;
    size_t B = (size_t)b->B, NP = B * (size_t)b->M, K = (size_t)b->K, S = (size_t)b->S, R = (size_t)b->R;
    be->ops->upload(be, d->image, b->image, B * S * S * 3);
    be->ops->upload(be, d->content, b->content, B * 2 * sizeof(int32_t));
    be->ops->upload(be, d->masks, b->masks, NP * R * R);
    be->ops->upload(be, d->valid, b->valid, NP);
    be->ops->upload(be, d->points, b->points, NP * K * 2 * sizeof(float));
    be->ops->upload(be, d->labels, b->labels, NP * K * sizeof(int32_t));
    return d;
}

/* Runs call; an allocation that fails in the model (which unwinds here) or
 * in a backend op (which the allocator records) makes it return -1 with
 * "out of memory" and the category in err. */
static int run_guarded(tr_model *m, const step_call *call, char *err, size_t err_len)
{
    tr_backend *be = m->be;
    tr_mem_cat cat;
    uint64_t nb;
    tr_mem_take_failure(&be->mem, &cat, &nb); /* from before the step: not its own */
    uint64_t mark = tr_mem_mark(&be->mem);
    if (batch_check(m, call->b, err, err_len) < 0) return -1;
    jmp_buf jb;
    volatile int rc = -1; /* set after setjmp, read after a longjmp */
    if (!setjmp(jb)) {
        m->oom = &jb;
        const tr_batch *b = batch_upload(m, call->b);
        if (call->kind == 0) forward_body(m, b);
        else if (call->kind == 1) *call->loss = backward_body(m, b, call->zero_grads, call->scale, call->sum);
        else step_body(m, b, call->zero_grads, call->scale, call->sum, call->loss);
        rc = 0;
    }
    m->oom = NULL;
    if (tr_mem_take_failure(&be->mem, &cat, &nb)) {
        step_recover(m, mark);
        char h[32];
        tr_mem_format_bytes(h, sizeof h, nb);
        snprintf(err, err_len, "out of memory: %s of %s (%" PRIu64 " bytes) could not be allocated",
                 tr_mem_cat_name(cat), h, nb);
        return -1;
    }
    return rc;
}

int tr_model_forward(tr_model *m, const tr_batch *b, char *err, size_t err_len)
{
    step_call c = {.kind = 0, .b = b};
    return run_guarded(m, &c, err, err_len);
}

int tr_model_backward_acc(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum, tr_loss *loss,
                          char *err, size_t err_len)
{
    step_call c = {.kind = 1, .b = b, .zero_grads = zero_grads, .scale = scale, .sum = sum, .loss = loss};
    return run_guarded(m, &c, err, err_len);
}

tr_loss tr_model_backward(tr_model *m, const tr_batch *b)
{
    tr_loss L = {0};
    char err[160];
    if (tr_model_backward_acc(m, b, 1, 1.0f, 0, &L, err, sizeof err) < 0) L.loss = NAN, L.n_valid = -1;
    return L;
}

int tr_model_step(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum, tr_loss *loss, char *err,
                  size_t err_len)
{
    step_call c = {.kind = 2, .b = b, .zero_grads = zero_grads, .scale = scale, .sum = sum, .loss = loss};
    return run_guarded(m, &c, err, err_len);
}

/* dst [n] (host, fp32) = the activation src [n] (downloaded; 16-bit codes
 * piece by piece, widened on the host) */
static void get_f32(const tr_model *m, float *dst, const void *src, size_t n)
{
    tr_backend *be = m->be;
    if (m->adt == TR_PREC_FP32) {
        be->ops->download(be, dst, src, n * sizeof(float));
        return;
    }
    uint16_t h[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        be->ops->download(be, h, (const uint16_t *)src + i, k * sizeof(uint16_t));
        for (size_t j = 0; j < k; j++) dst[i + j] = tr_from_16(h[j], m->adt);
    }
}

void tr_model_get_logits(const tr_model *m, float *dst)
{
    get_f32(m, dst, m->a.logits, (size_t)m->B * (size_t)m->M * (size_t)m->geom.RR);
}

void tr_model_get_iou(const tr_model *m, float *dst) { get_f32(m, dst, m->a.iou, (size_t)m->B * (size_t)m->M); }

double tr_model_flops(const tr_model *m)
{
    const tr_config *c = &m->cfg;
    const tr_geom *gm = &m->geom;
    double GG = gm->GG, E = c->E, C = c->C, B = m->B, NP = B * m->M, T = gm->T, RR = gm->RR, PP3 = gm->PP3;
    double f = 0; /* multiply-adds of the forward */
    f += B * GG * PP3 * E;
    f += c->L * B * (GG * E * (3 * E + E + 8 * E) + 2 * GG * GG * E);
    f += B * GG * E * C;
    double ci = C / 2;
    double sa = NP * (T * C * 3 * C + T * C * C + 2 * T * T * C);
    double cross = NP * (T * C * ci + 2 * GG * C * ci + T * ci * C + 2 * T * GG * ci);
    f += c->D * (sa + 2 * cross + NP * T * 16 * C * C) + cross;
    f += NP * (GG * C * C + 4 * GG * (C / 4) * (C / 2) + RR * C / 8);
    f += NP * (5 * C * C);
    return 2.0 * 3.0 * f; /* 2 flops per multiply-add; backward ~ 2x forward */
}

int tr_model_attn_shapes(const tr_model *m, tr_attn_dims *out, int cap)
{
    int GG = m->geom.GG, T = m->geom.T, C = m->cfg.C, h = m->cfg.h, NP = m->dec_chunk, n = 0;
    tr_attn_dims d[4] = {enc_attn_dims(m), attn_dims(NP, T, T, C, h), attn_dims(NP, T, GG, C / 2, h),
                         attn_dims(NP, GG, T, C / 2, h)};
    for (int i = 0; i < 4; i++)
        if (n < cap) out[n++] = d[i];
    return 4;
}
