/*
 * mdl_layout.c - the model's activation table and memory layout for a
 * batch geometry and training options (what tr_model.h describes under
 * "Memory layout"), and the model's lifetime: init, options, batch, free.
 */
#include "model_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- activation table ----------------------------------------------------------- */

typedef struct awalker {
    tr_model *m;
    size_t off, doff; /* floats laid out so far in act_mem / dact_mem */
    int n, cap;
    int uni;                 /* 1: in_d gradients go to the union region */
    size_t ubase, uoff, umax; /* union region: start in dact_mem, group offset, size */
    size_t pa, pd;           /* decoder tensors: pairs laid out in act_mem / dact_mem */
    int nview;               /* decoder tensors that move with the chunk so far */
    int auni;                /* 1: in_a tensors go to the activation union region (tr_model.act_union) */
    size_t abase, aoff, amax; /* that region: start in act_mem, group offset, size */
    int vir;                 /* 1: in_a tensors go to vmem's own windows (tr_model.vmem) */
    size_t voff;             /* floats laid out there so far */
    int vid;                 /* 1: in_a tensors go to vmem's identity part (16-bit storage) */
    int real;                /* 1: in_a tensors stay fp32 in act_mem all the same (statistics, outputs) */
    size_t ioff;             /* floats laid out in the identity part so far */
} awalker;

/* Registers an activation: its forward tensor of count_a floats in act_mem
 * when in_a, its gradient of count_d floats in dact_mem when in_d (fields
 * of m->a / m->da alike). */
static void areg3(awalker *w, float **field, const char *name, size_t count_a, size_t count_d, int in_a,
                  int in_d)
{
    tr_model *m = w->m;
    if (in_a) {
        if (w->n < w->cap) {
            tr_act_info *ai = &m->ainfo[w->n];
            snprintf(ai->name, sizeof ai->name, "%s", name);
            ai->ptr = field;
            ai->count = count_a;
        }
        size_t r = (count_a + 15) / 16 * 16;
        if (w->vir) { /* per-op storage: an address in vmem, the values in the stash */
            if (m->act_mem) *field = m->vmem + w->voff;
            w->voff += r;
        } else if (w->vid && !w->real && !w->auni) { /* 16-bit storage: the values in the shadow */
            if (m->act_mem) *field = m->vmem + m->v_id + w->ioff;
            w->ioff += r;
        } else if (w->auni) { /* the fp32 compute area of the encoder slot or of the decoder chunk
                                 (per-op storage: in vmem) */
            if (m->act_mem) *field = (m->vmem ? m->vmem + m->v_uni : m->act_mem + w->abase) + w->aoff;
            w->aoff += r;
            if (w->aoff > w->amax) w->amax = w->aoff;
        } else {
            if (m->act_mem) *field = m->act_mem + w->off;
            w->off += r;
        }
        w->n++;
    }
    if (in_d) {
        size_t r = (count_d + 15) / 16 * 16;
        float **df = (float **)((char *)&m->da + ((char *)field - (char *)&m->a));
        if (w->uni) { /* a shared gradient group: laid out in the union region */
            if (m->dact_mem) *df = m->dact_mem + w->ubase + w->uoff;
            w->uoff += r;
            if (w->uoff > w->umax) w->umax = w->uoff;
        } else {
            if (m->dact_mem) *df = m->dact_mem + w->doff;
            w->doff += r;
        }
    }
}

static void areg2(awalker *w, float **field, const char *name, size_t count, int in_a, int in_d)
{
    areg3(w, field, name, count, count, in_a, in_d);
}

/* Records that the field (of m->a, or of m->da when grad) holds every pair,
 * per floats each: tr_model.dview. */
static void dview_add(awalker *w, float **field, int kind, int grad, size_t per)
{
    tr_model *m = w->m;
    if (m->dview && w->nview < m->n_dview) {
        tr_dview *v = &m->dview[w->nview];
        v->kind = kind;
        v->off = (size_t)((char *)field - (char *)&m->a);
        v->grad = grad;
        v->base = *(float **)((char *)(grad ? &m->da : &m->a) + v->off);
        v->per = per;
    }
    w->nview++;
}

/* Registers a decoder tensor of per floats per pair: w->pa pairs in
 * act_mem, w->pd pairs in dact_mem. */
static void dreg(awalker *w, float **field, const char *name, size_t per, int in_a, int in_d)
{
    tr_model *m = w->m;
    size_t NP = (size_t)m->B * (size_t)m->M;
    areg3(w, field, name, per * w->pa, per * w->pd, in_a, in_d);
    if (m->n_chunks > 1 && in_a && w->pa == NP) dview_add(w, field, 0, 0, per);
    if (m->n_chunks > 1 && in_d && w->pd == NP) dview_add(w, field, 0, 1, per);
}

/* Registers an encoder block tensor of per floats per image: for every
 * image (all 1) or one; its gradient (in_d) for one image. */
static void ereg(awalker *w, float **field, const char *name, size_t per, int all, int in_a, int in_d)
{
    tr_model *m = w->m;
    areg3(w, field, name, per * (all ? (size_t)m->B : 1), per, in_a, in_d);
    if (m->B > 1 && in_a && all) dview_add(w, field, 1, 0, per);
}

/* Starts (on 1) or ends (0) a group of gradients that is live only while
 * one part's backward runs: every group starts at the same offset of the
 * union region after the persistent gradients, which is as large as the
 * largest group. */
static void ugroup(awalker *w, int on)
{
    w->uni = on;
    w->uoff = 0;
}

/* Starts (on 1) or ends (0) one of the two groups of the activation union
 * region (tr_model.act_union); returns the group's offset in act_mem. */
static size_t agroup(awalker *w, int on)
{
    w->auni = on;
    w->aoff = 0;
    return w->abase;
}

/* Offset in act_mem where the next forward tensor is laid out. */
static size_t apos(const awalker *w) { return w->auni ? w->abase + w->aoff : w->vid ? w->ioff : w->off; }

/* The tensors of one decoder attention block, per pair. */
static void areg_attn(awalker *w, tr_attn_a *a, const char *name, size_t Tq, size_t Tk, size_t C, size_t Ci,
                      size_t heads, int in_a, int in_d, int out_a)
{
    char nm[48];
    snprintf(nm, sizeof nm, "%s.q", name);
    dreg(w, &a->q, nm, Tq * Ci, in_a, in_d);
    snprintf(nm, sizeof nm, "%s.k", name);
    dreg(w, &a->k, nm, Tk * Ci, in_a, in_d);
    snprintf(nm, sizeof nm, "%s.v", name);
    dreg(w, &a->v, nm, Tk * Ci, in_a, in_d);
    snprintf(nm, sizeof nm, "%s.att", name);
    dreg(w, &a->att, nm, heads * w->m->be->sizes->attention_saved(Tq, Tk), in_a, 0); /* no gradient tensor */
    snprintf(nm, sizeof nm, "%s.ao", name);
    dreg(w, &a->ao, nm, Tq * Ci, in_a, in_d);
    snprintf(nm, sizeof nm, "%s.out", name);
    dreg(w, &a->out, nm, Tq * C, in_a && out_a, in_d);
}

/* Floats per pair of the upscaling's tensor k: up1, upln, upgelu [4GG, C/4],
 * up2, U [RR, C/8]. */
size_t mdl_tail_per(const tr_model *m, int k)
{
    size_t G = (size_t)(m->cfg.S / m->cfg.P), C = (size_t)m->cfg.C;
    return k < 3 ? 4 * G * G * (C / 4) : 16 * G * G * (C / 8);
}

/* Gradients of the decoder tail (final attention, upscaling) in two
 * buffers X, Y used alternately: U X, up2 Y, upgelu X, upln Y, up1 X, then
 * the final attention's q, k, v, ao, out in X and fin_kin, fin_qin in Y.
 * Sets the pointers in da when da is not NULL (X, Y in da->pp_u); their
 * sizes in floats (for one chunk of pairs) into *nx, *ny. */
static void tail_grads(const tr_model *m, tr_acts *da, size_t *nx, size_t *ny)
{
    const tr_config *c = &m->cfg;
    size_t G = (size_t)(c->S / c->P), GG = G * G, C = (size_t)c->C, NP = (size_t)m->dec_chunk;
    size_t T = (size_t)m->K + 2, up = mdl_r16(NP * 16 * GG * (C / 8)), o = 0;
    float *X = da ? da->pp_u[0] : NULL, *Y = da ? da->pp_u[1] : NULL;
    if (da) {
        da->U = da->upgelu = da->up1 = X;
        da->up2 = da->upln = Y;
        da->fin.q = X;
        da->fin.att = NULL;
    }
    o += mdl_r16(NP * T * (C / 2));
    if (da) da->fin.k = X + o;
    o += mdl_r16(NP * GG * (C / 2));
    if (da) da->fin.v = X + o;
    o += mdl_r16(NP * GG * (C / 2));
    if (da) da->fin.ao = X + o;
    o += mdl_r16(NP * T * (C / 2));
    if (da) da->fin.out = X + o;
    o += mdl_r16(NP * T * C);
    *nx = o > up ? o : up;
    if (da) da->fin_kin = Y, da->fin_qin = Y + mdl_r16(NP * GG * C);
    o = mdl_r16(NP * GG * C) + mdl_r16(NP * T * C);
    *ny = o > up ? o : up;
}

/* 1 when encoder block i computes in a slot and keeps its activations in
 * a 16-bit stash, image by image (16-bit storage without checkpointing, a
 * block with a backward); needs m->enc_slot and m->enc_lo. */
int mdl_enc_stashed(const tr_model *m, int i)
{
    int lo = m->enc_lo < 0 ? 0 : m->enc_lo;
    return m->opt.precision != TR_PREC_FP32 && !m->opt.ckpt_every && m->enc_slot[i] >= 0 && i >= lo;
}

/* 1 when the layout keeps its activations in 16 bits only (tr_model.vmem):
 * 16-bit storage. */
static int vid16(const tr_model *m) { return m->opt.precision != TR_PREC_FP32; }

/* ---- operands: where an activation's values are ------------------------------------ */

/* The stash offset of the activation at vmem offset v: the window it lies
 * in, mapped where the step put it. */
static size_t vmap(const tr_model *m, size_t v)
{
    const size_t lo[5] = {m->v_xin, m->v_emb, m->v_uni, m->v_dact, m->v_id};
    const size_t len[5] = {m->n_xin, m->n_emb, m->n_uni, m->n_dact_floats, m->n_id};
    const size_t st[5] = {m->st_xin, m->st_emb, m->st_uni, m->gst, m->sh};
    for (int i = 0; i < 5; i++)
        if (v >= lo[i] && v - lo[i] < len[i] && st[i] != TR_NO_STASH) return st[i] + (v - lo[i]);
    return TR_NO_STASH;
}

tr_ten mdl_t(const tr_model *m, const float *p)
{
    int prec = m->opt.precision;
    if (!p) return tr_typed(NULL, prec);
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)m->vmem;
    if (m->vmem && a >= b && a < b + m->vmem_n * sizeof(float)) {
        size_t off = vmap(m, (size_t)(p - m->vmem));
        /* (an address outside every mapped window is a layout bug: the
         * vmem address itself, PROT_NONE, faults at the first access) */
        return tr_typed(off == TR_NO_STASH ? (const void *)p : (const void *)(m->stash_mem + off), prec);
    }
    return tr_typed(p, prec == TR_PREC_FP32 ? prec : prec | TR_DT_WIDE);
}

tr_ten mdl_w(const tr_model *m, const float *p)
{
    if (!p || !m->wc16) return tr_f32(p);
    return tr_typed(m->wc16 + (p - m->param_mem), m->opt.precision);
}

static void walk_acts(awalker *w)
{
    tr_model *m = w->m;
    const tr_config *c = &m->cfg;
    tr_acts *a = &m->a;
    size_t G = (size_t)(c->S / c->P), GG = G * G, B = (size_t)m->B, BT = B * GG, E = (size_t)c->E;
    size_t C = (size_t)c->C, NP = B * (size_t)m->M, T = (size_t)m->K + 2, R = 4 * G, RR = R * R;
    size_t PP3 = 3 * (size_t)c->P * c->P, h = (size_t)c->h;
    int L = c->L, D = c->D, N = m->opt.ckpt_every, b16 = m->opt.precision != TR_PREC_FP32;
    int lo = m->enc_lo < 0 ? 0 : m->enc_lo; /* blocks lo.. have a backward */
    char nm[48];
    /* 16-bit storage keeps every block's activations and every chunk's in
     * the stash: the fp32 slot and the fp32 chunk region are compute areas
     * of different phases and share one region */
    int vid = vid16(m);
    m->act_union = b16 && !N && !m->opt.ckpt_decoder && (!vid || m->enc_lo <= 0);
    int pop = vid && m->act_union; /* tr_model.pop */
    m->pop = pop;
    w->vid = vid;
    /* LayerNorm statistics: stored (fp32), or with 16-bit storage recomputed
     * in the backward (ln_bwd) unless the options ask to keep them */
    int lnst = !vid || m->opt.keep_ln_stats;
    /* one image's patches, made again for the backward: a workspace in the
     * union region (which holds no gradient during the encoder's forward
     * nor after its blocks' backward) */
    ugroup(w, 1);
    areg2(w, &a->patches, "enc.patches", GG * PP3, 0, 1);
    ugroup(w, 0);
    /* the patch embedding's output, 16-bit storage: in the stash (image by
     * image), its gradient too */
    int x016 = b16 && L > 0;
    areg2(w, &a->x0, "enc.x0", BT * E, !x016, !x016);
    for (int i = 0; i < L; i++) m->enc_slot[i] = N ? i % N : (b16 || i < lo) ? 0 : -1;
    m->dblk_n = 0;
    size_t H = (size_t)c->H;
    for (int i = 0; i < L; i++) {
        tr_enc_block_a *b = &a->blk[i];
        int s = m->enc_slot[i], own = s < 0 || s == i, dsh = i == lo, all = s < 0;
#define AS(f, n) (snprintf(nm, sizeof nm, "enc.blocks.%d." #f, i), ereg(w, &b->f, nm, n, 1, lnst, 0))
#define AR(f, n) (snprintf(nm, sizeof nm, "enc.blocks.%d." #f, i), ereg(w, &b->f, nm, n, all, own, dsh))
        w->real = 1; /* LayerNorm statistics (16-bit storage: recomputed in the backward, ln_bwd) */
        AS(ln1_m, GG); AS(ln1_r, GG); AS(ln2_m, GG); AS(ln2_r, GG);
        w->real = 0;
        if (s >= 0 && own && m->act_union) agroup(w, 1);
        if (s >= 0 && own) m->enc_slot_off[s] = apos(w);
        if (dsh) ugroup(w, 1), m->dblk_off = w->ubase;
        AR(ln1, GG * E); AR(qkv, GG * 3 * E);
        (snprintf(nm, sizeof nm, "enc.blocks.%d.att", i),
         ereg(w, &b->att, nm, H * m->be->sizes->attention_saved(GG, GG), all, own, 0));
        AR(ao, GG * E); AR(xmid, GG * E); AR(ln2, GG * E); AR(fc1, GG * 4 * E); AR(gelu, GG * 4 * E);
        snprintf(nm, sizeof nm, "enc.blocks.%d.xout", i);
        ereg(w, &b->xout, nm, GG * E, all, own, 0);
        if (s >= 0 && own) m->enc_slot_n = apos(w) - m->enc_slot_off[s];
        if (s >= 0 && own && m->act_union) agroup(w, 0);
        if (dsh) m->dblk_n = w->uoff, ugroup(w, 0);
#undef AS
#undef AR
    }
    /* saved block inputs: the checkpoints, or the input of the lowest
     * trainable block when its predecessor computes in a slot without a
     * stash (frozen); a stashed predecessor's output is read from its stash
     * (through enc.xin, one image), and blocks below lo need none */
    int xin = x016;
    for (int i = 1; i < L; i++) {
        snprintf(nm, sizeof nm, "enc.blocks.%d.input", i);
        areg2(w, &a->enc_in[i], nm, BT * E, N ? i % N == 0 : i == lo && m->enc_slot[i - 1] >= 0, 0);
        if (i >= lo && mdl_enc_stashed(m, i - 1)) xin = 1;
    }
    if (L > 0) /* its gradient: in the stash with 16-bit storage */
        areg3(w, &a->enc_out, "enc.output", BT * E, BT * E, m->enc_slot[L - 1] >= 0 && !mdl_enc_stashed(m, L - 1),
              lo < L && !b16);
    w->vir = pop, m->v_xin = w->voff;
    areg2(w, &a->enc_xin, "enc.xin", GG * E, xin, 0);
    m->n_xin = w->voff - m->v_xin, w->vir = 0;
    for (int k = 0; k < 2; k++) areg2(w, &a->pp_x[k], "enc.grad_x", GG * E, 0, lo < L);
    /* the neck's output and the image embedding: in the stash with 16-bit
     * storage (their gradients too; the neck's lives for two ops in a
     * workspace), read through one image's rows (enc.emb_rows) */
    areg2(w, &a->neck, "enc.neck", BT * C, !b16, !b16);
    areg2(w, &a->emb, "enc.emb", BT * C, !b16, !b16);
    w->vir = pop, m->v_emb = w->voff;
    areg2(w, &a->emb_rows, "enc.emb_rows", GG * C, b16, 0);
    m->n_emb = w->voff - m->v_emb, w->vir = 0;
    w->real = 1;
    areg2(w, &a->emb_m, "enc.emb_m", BT, lnst, 1);
    areg2(w, &a->emb_r, "enc.emb_r", BT, lnst, 1);
    w->real = 0;
    areg2(w, &a->dense_pe, "prompt.dense_pe", GG * C, 1, 0);
    /* the decoder, per chunk of nc pairs; LayerNorm statistics first (fp32,
     * for every pair unless recomputed) */
    size_t nc = (size_t)m->dec_chunk;
    m->dec_full = !m->opt.ckpt_decoder && !b16;
    w->pa = m->opt.ckpt_decoder ? nc : NP, w->pd = nc;
    w->real = 1;
    for (int l = 0; l < D; l++) {
        tr_dec_layer_a *L_ = &a->lay[l];
#define AS(f, n) (snprintf(nm, sizeof nm, "dec.layers.%d." #f, l), dreg(w, &L_->f, nm, n, lnst, 0))
        AS(n1_m, T); AS(n1_r, T); AS(n2_m, T); AS(n2_r, T);
        AS(n3_m, T); AS(n3_r, T); AS(n4_m, GG); AS(n4_r, GG);
#undef AS
    }
    dreg(w, &a->fin_m, "dec.fin_m", T, lnst, 0);
    dreg(w, &a->fin_r, "dec.fin_r", T, lnst, 0);
    dreg(w, &a->upln_m, "dec.upln_m", 4 * GG, lnst, 0);
    dreg(w, &a->upln_r, "dec.upln_r", 4 * GG, lnst, 0);
    w->real = 0;
    /* the chunk region (every pair when dec_full); gradients for one chunk:
     * persistent ones [ddec_off, +ddec_n) zeroed per chunk, each layer's in
     * the union region */
    w->pa = m->dec_full ? NP : nc;
    if (m->act_union) agroup(w, 1);
    m->dchunk_off = apos(w);
    m->ddec_off = w->doff;
    dreg(w, &a->T0, "dec.T0", T * C, 1, 1);
    dreg(w, &a->Kimg, "dec.Kimg", GG * C, 1, 1);
    for (int l = 0; l < D; l++) {
        tr_dec_layer_a *L_ = &a->lay[l];
        int dsh = l == 0; /* every layer's gradients: one group */
#define AR(f, n) (snprintf(nm, sizeof nm, "dec.layers.%d." #f, l), dreg(w, &L_->f, nm, n, 1, dsh))
        if (dsh) ugroup(w, 1), m->dlay_off = w->ubase;
        AR(sa_qin, T * C);
        snprintf(nm, sizeof nm, "dec.layers.%d.sa", l);
        areg_attn(w, &L_->sa, nm, T, T, C, C, h, 1, dsh, 1);
        AR(t1pre, T * C); AR(t1, T * C);
        AR(t2i_qin, T * C); AR(kpe, GG * C);
        snprintf(nm, sizeof nm, "dec.layers.%d.t2i", l);
        areg_attn(w, &L_->t2i, nm, T, GG, C, C / 2, h, 1, dsh, 1);
        AR(t2pre, T * C); AR(t2, T * C);
        AR(fc1, T * 8 * C); AR(relu, T * 8 * C);
        AR(t3pre, T * C);
        AR(i2t_kin, T * C);
        snprintf(nm, sizeof nm, "dec.layers.%d.i2t", l);
        areg_attn(w, &L_->i2t, nm, GG, T, C, C / 2, h, 1, dsh, 0); /* out: in k4pre */
        AR(k4pre, GG * C);
        snprintf(nm, sizeof nm, "dec.layers.%d.t3", l);
        dreg(w, &L_->t3, nm, T * C, 1, 0);
        snprintf(nm, sizeof nm, "dec.layers.%d.kout", l);
        dreg(w, &L_->kout, nm, GG * C, 1, 0);
        if (dsh) m->dlay_n = w->uoff, ugroup(w, 0);
#undef AR
    }
    dreg(w, &a->fin_qin, "dec.fin_qin", T * C, 1, 0);
    dreg(w, &a->fin_kin, "dec.fin_kin", GG * C, 1, 0);
    areg_attn(w, &a->fin, "dec.final_t2i", T, GG, C, C / 2, h, 1, 0, 1);
    dreg(w, &a->tfpre, "dec.tfpre", T * C, 1, 1);
    dreg(w, &a->tf, "dec.tf", T * C, 1, 1);
    /* the upscaling's tensors: with act_union in the stash for every pair
     * (m->tail_stash), each op's operands in workspaces */
    int up = !m->act_union;
    dreg(w, &a->up1, "dec.up1", 4 * GG * (C / 4), up, 0);
    dreg(w, &a->upln, "dec.upln", 4 * GG * (C / 4), up, 0);
    dreg(w, &a->upgelu, "dec.upgelu", 4 * GG * (C / 4), up, 0);
    dreg(w, &a->up2, "dec.up2", RR * (C / 8), up, 0);
    dreg(w, &a->U, "dec.U", RR * (C / 8), up, 0);
    dreg(w, &a->tmask, "dec.tmask", C, 1, 1);
    dreg(w, &a->h0, "dec.hyper.h0", C, 1, 1);
    dreg(w, &a->h0r, "dec.hyper.h0r", C, 1, 1);
    dreg(w, &a->h1, "dec.hyper.h1", C, 1, 1);
    dreg(w, &a->h1r, "dec.hyper.h1r", C, 1, 1);
    dreg(w, &a->hyp, "dec.hyper.out", C / 8, 1, 1);
    dreg(w, &a->tiou, "dec.tiou", C, 1, 1);
    dreg(w, &a->i0, "dec.iou_head.i0", C, 1, 1);
    dreg(w, &a->i0r, "dec.iou_head.i0r", C, 1, 1);
    dreg(w, &a->i1, "dec.iou_head.i1", C, 1, 1);
    dreg(w, &a->i1r, "dec.iou_head.i1r", C, 1, 1);
    m->dchunk_n = apos(w) - m->dchunk_off;
    if (m->act_union) agroup(w, 0);
    for (int k = 0; k < 2; k++) {
        areg2(w, &a->pp_t[k], "dec.grad_t", nc * T * C, 0, 1);
        areg2(w, &a->pp_k[k], "dec.grad_k", nc * GG * C, 0, 1);
    }
    m->ddec_n = w->doff - m->ddec_off;
    /* the tail's large gradients live in two alternating buffers (tail_grads) */
    {
        size_t nx, ny;
        tail_grads(m, NULL, &nx, &ny);
        ugroup(w, 1);
        areg2(w, &a->pp_u[0], "dec.grad_tail0", nx, 0, 1);
        areg2(w, &a->pp_u[1], "dec.grad_tail1", ny, 0, 1);
        /* the ConvTranspose workspace of forward and backward: the union
         * region holds no gradient during a forward */
        const tr_sizes *sz = m->be->sizes; /* the backend's scratch of the two ConvTransposes */
        size_t s1 = sz->convt_scratch(nc * GG, C / 4), s2 = sz->convt_scratch(nc * 4 * GG, C / 8);
        areg2(w, &a->pp_u[2], "dec.up_scratch", s1 > s2 ? s1 : s2, 0, 1);
        ugroup(w, 0);
    }
    /* the outputs: every pair (the loss); their gradients, written by the
     * loss of a chunk right before the chunk's backward, one chunk; the
     * logits with 16-bit storage: in the stash, one chunk's unpacked for
     * the loss */
    w->pa = NP, w->pd = nc;
    w->real = 1; /* read by the loss, the checkpoint writer and tests: fp32 */
    dreg(w, &a->iou, "dec.iou", 1, 1, 1);
    w->pa = b16 ? nc : NP;
    dreg(w, &a->logits, "dec.logits", RR, 1, 1);
    w->real = 0;
}

/* After the assigning walk: slotted blocks share their slot's tensors
 * (keeping their own statistics), every block / layer shares one gradient
 * set, and output gradients alternate between two buffers. */
static void alias_acts(tr_model *m)
{
    tr_acts *a = &m->a, *da = &m->da;
    int L = m->cfg.L, D = m->cfg.D, lo = m->enc_lo < 0 ? 0 : m->enc_lo;
    for (int i = 0; i < L; i++) {
        int s = m->enc_slot[i];
        if (s >= 0 && s != i) {
            tr_enc_block_a st = a->blk[i];
            a->blk[i] = a->blk[s];
            a->blk[i].ln1_m = st.ln1_m, a->blk[i].ln1_r = st.ln1_r;
            a->blk[i].ln2_m = st.ln2_m, a->blk[i].ln2_r = st.ln2_r;
        }
        if (lo < L && i != lo) da->blk[i] = da->blk[lo];
        if (lo >= L) memset(&da->blk[i], 0, sizeof da->blk[i]);
        da->blk[i].xout = da->pp_x[i % 2]; /* the last block's: da->enc_out (every image) */
    }
    for (int l = 0; l < D; l++) {
        if (l) da->lay[l] = da->lay[0];
        da->lay[l].t3 = da->pp_t[l % 2];
        da->lay[l].kout = da->pp_k[l % 2];
    }
    size_t nx, ny;
    tail_grads(m, da, &nx, &ny);
    a->up_scratch = da->up_scratch = da->pp_u[2]; /* workspaces (overwritten at every use) */
    a->patches = da->patches;
    for (int l = 0; l < D; l++) a->lay[l].i2t.out = a->lay[l].k4pre; /* k4pre = Kc + out, in place */
}

/* Which encoder part a parameter belongs to (-1 embedding, 0..L-1 block, L
 * neck), or INT_MAX for the prompt encoder and the decoder. */
int mdl_enc_part(const tr_model *m, const char *name)
{
    if (strncmp(name, "enc.patch", 9) == 0 || strncmp(name, "enc.pos", 7) == 0) return -1;
    if (strncmp(name, "enc.blocks.", 11) == 0) return atoi(name + 11);
    if (strncmp(name, "enc.neck", 8) == 0) return m->cfg.L;
    return INT_MAX;
}

static void free_layout(tr_model *m)
{
    tr_mem *mem = &m->be->mem;
    tr_mem_free(mem, m->act_mem);
    if (m->vmem) munmap(m->vmem, m->vmem_n * sizeof(float)); /* dact_mem lies in it */
    else tr_mem_free(mem, m->dact_mem);
    m->vmem = NULL;
    m->vmem_n = 0;
    tr_mem_free(mem, m->stash_mem);
    tr_mem_free(mem, m->wc16);
    tr_mem_free(mem, m->grad_mem);
    m->act_mem = m->dact_mem = m->grad_mem = NULL;
    m->stash_mem = m->wc16 = NULL;
    free(m->ainfo);
    m->ainfo = NULL;
    free(m->dview);
    m->dview = NULL;
    m->n_dview = 0;
    free(m->chunk_valid);
    m->chunk_valid = NULL;
    tr_batch_free(mem, m->dev);
    m->dev = NULL;
}

/* (Re)allocates gradients, compute weights and activations for the current
 * B, options and frozen set; parameters are kept. */
int mdl_layout(tr_model *m, char *err, size_t err_len)
{
    tr_backend *be = m->be;
    const tr_config *cfg = &m->cfg;
    free_layout(m);
    m->enc_lo = cfg->L + 1;
    m->grad_lo = m->n_param_floats;
    for (int i = 0; i < m->n_params; i++) {
        if (m->frozen[i]) continue;
        int part = mdl_enc_part(m, m->pinfo[i].name);
        if (part < m->enc_lo) m->enc_lo = part;
        if (m->pinfo[i].offset < m->grad_lo) m->grad_lo = m->pinfo[i].offset;
    }
    m->n_grad_floats = m->n_param_floats - m->grad_lo;
    int b16 = m->opt.precision != TR_PREC_FP32;
    m->grad_mem = tr_mem_alloc(&be->mem, TR_MEM_GRADS, m->n_grad_floats * sizeof(float));
    if (b16) m->wc16 = tr_mem_alloc(&be->mem, TR_MEM_PARAMS, m->n_param_floats * sizeof(uint16_t));
    if ((!m->grad_mem && m->n_grad_floats) || (b16 && !m->wc16)) {
        free_layout(m);
        return snprintf(err, err_len, "out of memory for gradients"), -1;
    }
    mdl_walker w = {.m = m};
    mdl_walk_params(&w); /* p into param_mem, g into grad_mem or NULL */

    memset(&m->a, 0, sizeof m->a);
    memset(&m->da, 0, sizeof m->da);
    size_t NP = (size_t)m->B * (size_t)m->M;
    m->dec_chunk = be->sizes->dec_chunk((int)NP); /* the backend's granularity */
    if (m->dec_chunk < 1 || (size_t)m->dec_chunk > NP) m->dec_chunk = (int)NP;
    m->n_chunks = (int)((NP + (size_t)m->dec_chunk - 1) / (size_t)m->dec_chunk);
    awalker aw = {.m = m};
    walk_acts(&aw); /* count */
    m->ainfo = calloc((size_t)aw.n + 1, sizeof *m->ainfo);
    m->dview = calloc((size_t)aw.nview + 1, sizeof *m->dview);
    m->n_dview = aw.nview;
    m->chunk_valid = calloc((size_t)m->n_chunks, sizeof *m->chunk_valid);
    if (be->host_mem != &be->mem) { /* the batch needs a copy in the backend's memory */
        int G = cfg->S / cfg->P;
        m->dev = tr_batch_alloc(&be->mem, m->B, m->M, m->K, cfg->S, 4 * G);
    }
    if (!m->ainfo || !m->dview || !m->chunk_valid || (be->host_mem != &be->mem && !m->dev)) {
        free_layout(m);
        return snprintf(err, err_len, "out of memory"), -1;
    }
    m->n_acts = aw.n;
    int pop = m->pop, vid = aw.vid;
    m->n_act_floats = aw.off + (vid ? 0 : aw.amax); /* persistent activations, then the union region */
    m->n_dact_floats = aw.doff + aw.umax; /* persistent gradients, then the union region */
    m->n_stash = 0;
    m->enc_stash_per = (m->enc_slot_n + 31) / 32 * 32;
    for (int i = 0; i < cfg->L; i++) { /* per image; the last block's last image stays resident
                                          unless the slot shares the union region */
        m->enc_stash[i] = TR_NO_STASH;
        if (mdl_enc_stashed(m, i)) {
            m->enc_stash[i] = m->n_stash;
            m->n_stash += (size_t)(i == cfg->L - 1 && !m->act_union ? m->B - 1 : m->B) * m->enc_stash_per;
        }
    }
    m->x0_stash = m->dx0_stash = TR_NO_STASH;
    if (b16 && cfg->L > 0) { /* x0 [BT, E] and its gradient (a trainable patch embedding) */
        size_t bte = (size_t)m->B * (size_t)(cfg->S / cfg->P) * (size_t)(cfg->S / cfg->P) * (size_t)cfg->E;
        m->x0_stash = m->n_stash, m->n_stash += (bte + 31) / 32 * 32;
        if (m->enc_lo < 0) m->dx0_stash = m->n_stash, m->n_stash += (bte + 31) / 32 * 32;
    }
    m->neck_stash = m->emb_stash = m->demb_stash = m->dxl_stash = TR_NO_STASH;
    if (b16) { /* neck, emb [BT, C]; emb's gradient when the backward reaches the neck */
        size_t btc = (size_t)m->B * (size_t)(cfg->S / cfg->P) * (size_t)(cfg->S / cfg->P) * (size_t)cfg->C;
        m->neck_stash = m->n_stash, m->n_stash += (btc + 31) / 32 * 32;
        m->emb_stash = m->n_stash, m->n_stash += (btc + 31) / 32 * 32;
        if (m->enc_lo <= cfg->L) m->demb_stash = m->n_stash, m->n_stash += (btc + 31) / 32 * 32;
        if (cfg->L > 0 && m->enc_lo < cfg->L) { /* the neck's dx [BT, E] */
            size_t bte = btc / (size_t)cfg->C * (size_t)cfg->E;
            m->dxl_stash = m->n_stash, m->n_stash += (bte + 31) / 32 * 32;
        }
    }
    for (int k = 0; k < 5; k++) m->tail_stash[k] = TR_NO_STASH;
    if (m->act_union) { /* the upscaling's up1, upln, upgelu [NP, 4GG, C/4], up2, U [NP, RR, C/8] */
        for (int k = 0; k < 5; k++) {
            size_t n = (size_t)m->B * (size_t)m->M * mdl_tail_per(m, k);
            m->tail_stash[k] = m->n_stash, m->n_stash += (n + 31) / 32 * 32;
        }
    }
    m->logits_stash = TR_NO_STASH;
    if (b16) { /* the logits [NP, RR] */
        size_t nl = (size_t)m->B * (size_t)m->M * 16 * (size_t)(cfg->S / cfg->P) * (size_t)(cfg->S / cfg->P);
        m->logits_stash = m->n_stash, m->n_stash += (nl + 31) / 32 * 32;
    }
    m->dec_stash_off = m->n_stash, m->dec_stash_per = 0;
    if (b16 && !m->opt.ckpt_decoder) { /* every chunk but the last (resident for its backward; per-op
                                          storage: every chunk) */
        m->dec_stash_per = (m->dchunk_n + 31) / 32 * 32;
        m->n_stash += (size_t)(m->n_chunks - (pop ? 0 : 1)) * m->dec_stash_per;
    }
    m->gst = m->sh = TR_NO_STASH;
    if (vid) { /* the activation gradients and the shadow of what no stash holds: 16 bits only */
        m->gst = m->n_stash, m->n_stash += (m->n_dact_floats + 31) / 32 * 32;
        m->sh = m->n_stash, m->n_stash += (aw.ioff + 31) / 32 * 32;
        m->n_uni = aw.amax;
        m->v_uni = (aw.voff + 15) / 16 * 16;
        m->v_dact = m->v_uni + (aw.amax + 15) / 16 * 16;
        m->v_id = m->v_dact + (m->n_dact_floats + 15) / 16 * 16;
        m->n_id = aw.ioff;
        m->vmem_n = m->v_id + m->n_id + 16;
        m->st_xin = m->st_emb = m->st_uni = TR_NO_STASH;
        void *v = mmap(NULL, m->vmem_n * sizeof(float), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       0);
        if (v == MAP_FAILED) {
            free_layout(m);
            return snprintf(err, err_len, "out of address space"), -1;
        }
        m->vmem = v;
    }
    m->act_mem = tr_mem_alloc(&be->mem, TR_MEM_ACTS, m->n_act_floats * sizeof(float));
    m->dact_mem = m->vmem ? m->vmem + m->v_dact
                          : tr_mem_alloc(&be->mem, TR_MEM_ACTS, m->n_dact_floats * sizeof(float));
    if (m->n_stash) m->stash_mem = tr_mem_alloc(&be->mem, TR_MEM_ACTS, m->n_stash * sizeof(uint16_t));
    if (!m->act_mem || !m->dact_mem || (m->n_stash && !m->stash_mem)) {
        size_t mb = (m->n_act_floats + m->n_dact_floats) * sizeof(float) >> 20;
        free_layout(m);
        return snprintf(err, err_len, "out of memory for activations (%zu MiB)", mb), -1;
    }
    awalker aw2 = {.m = m, .cap = m->n_acts, .ubase = aw.doff, .abase = aw.off};
    walk_acts(&aw2);
    alias_acts(m);
    m->enc_res = m->enc_res_img = m->dec_res = -1;
    return 0;
}

int tr_model_init(tr_model *m, tr_backend *be, const tr_config *cfg, int B, int M, int K, char *err,
                  size_t err_len)
{
    return tr_model_init_ex(m, be, cfg, B, M, K, NULL, NULL, err, err_len);
}

int tr_model_init_ex(tr_model *m, tr_backend *be, const tr_config *cfg, int B, int M, int K,
                     const tr_model_opts *opt, const char *freeze, char *err, size_t err_len)
{
    memset(m, 0, sizeof *m);
    if (opt && (opt->ckpt_every < 0 || opt->ckpt_decoder < 0 || opt->ckpt_decoder > 1 ||
                opt->precision < TR_PREC_FP32 || opt->precision > TR_PREC_FP16))
        return snprintf(err, err_len, "bad training options"), -1;
    if (tr_config_check(cfg, err, err_len) < 0) return -1;
    if (B < 1 || M < 1 || K < 1 || B > 4096 || M > 4096 || K > 256)
        return snprintf(err, err_len, "batch geometry B=%d M=%d K=%d out of range", B, M, K), -1;
    {
        /* every op indexes rows * columns of a tensor with int: keep them below 2^31 */
        size_t G = (size_t)(cfg->S / cfg->P), GG = G * G, NP = (size_t)B * M, T = (size_t)K + 2;
        size_t big[6] = {(size_t)B * GG * 4 * cfg->E, (size_t)B * cfg->H * GG * GG, NP * GG * 2 * cfg->C,
                         NP * 16 * GG * (cfg->C / 8), NP * T * 8 * cfg->C, (size_t)B * GG * 3 * cfg->P * cfg->P};
        for (int i = 0; i < 6; i++)
            if (big[i] >= (1u << 31))
                return snprintf(err, err_len, "configuration too large (a tensor of %zu elements)", big[i]), -1;
    }
    m->cfg = *cfg;
    m->be = be;
    m->B = B, m->M = M, m->K = K;
    int maxp = 64 + 16 * cfg->L + 48 * cfg->D;
    m->pinfo = calloc((size_t)maxp, sizeof *m->pinfo);
    if (!m->pinfo) return snprintf(err, err_len, "out of memory"), -1;
    mdl_walker w = {.m = m};
    mdl_walk_params(&w); /* sizes only */
    m->n_params = w.n;
    m->n_param_floats = w.off;
    m->frozen = calloc((size_t)w.n, 1);
    m->param_mem = tr_mem_alloc(&be->mem, TR_MEM_PARAMS, w.off * sizeof(float));
    m->pe_gaussian = tr_mem_alloc(&be->mem, TR_MEM_PARAMS, (size_t)cfg->C * sizeof(float));
    m->loss_sums = tr_mem_alloc(&be->mem, TR_MEM_ACTS, 4 * sizeof(double));
    if (!m->frozen || !m->param_mem || !m->pe_gaussian || !m->loss_sums) {
        tr_model_free(m);
        return snprintf(err, err_len, "out of memory for %zu parameters", w.off), -1;
    }
    if (opt) {
        m->opt = *opt;
        if (m->opt.ckpt_every > cfg->L) m->opt.ckpt_every = cfg->L;
    }
    if (freeze) {
        char buf[512], *save = NULL;
        snprintf(buf, sizeof buf, "%s", freeze);
        for (char *g = strtok_r(buf, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
            if (!tr_model_group_valid(g, cfg->L)) {
                snprintf(err, err_len, "'%s' is not a parameter group", g);
                tr_model_free(m);
                return -1;
            }
            for (int i = 0; i < m->n_params; i++)
                if (mdl_in_group(m, g, m->pinfo[i].name)) m->frozen[i] = 1;
        }
    }
    if (mdl_layout(m, err, err_len) < 0) {
        tr_model_free(m);
        return -1;
    }
    return 0;
}

void tr_model_free(tr_model *m)
{
    if (!m || !m->be) return;
    tr_mem *mem = &m->be->mem;
    free_layout(m);
    tr_mem_free(mem, m->param_mem);
    tr_mem_free(mem, m->pe_gaussian);
    tr_mem_free(mem, m->loss_sums);
    free(m->pinfo);
    free(m->frozen);
    memset(m, 0, sizeof *m);
}

int tr_model_set_options(tr_model *m, const tr_model_opts *opt, char *err, size_t err_len)
{
    if (opt->ckpt_every < 0 || opt->ckpt_decoder < 0 || opt->ckpt_decoder > 1 || opt->precision < TR_PREC_FP32 ||
        opt->precision > TR_PREC_FP16)
        return snprintf(err, err_len, "bad training options"), -1;
    m->opt = *opt;
    if (m->opt.ckpt_every > m->cfg.L) m->opt.ckpt_every = m->cfg.L; /* one segment */
    return mdl_layout(m, err, err_len);
}

int tr_model_set_batch(tr_model *m, int B, char *err, size_t err_len)
{
    if (B < 1 || B > m->B * 64 || (size_t)B * m->M * (m->K + 2) * 8 * m->cfg.C >= (1u << 31))
        return snprintf(err, err_len, "batch B=%d out of range", B), -1;
    m->B = B;
    return mdl_layout(m, err, err_len);
}
