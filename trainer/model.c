/*
 * model.c - the compact SAM of MODEL.md sequenced over a backend's ops:
 * parameter and activation tables, initialisation, forward, backward.
 * Every step below names the MODEL.md line it implements.
 */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tr_rng.h"

int tr_config_preset(const char *name, tr_config *c)
{
    if (strcmp(name, "small") == 0) {
        *c = (tr_config){.S = 256, .P = 16, .E = 192, .L = 6, .H = 3, .C = 128, .h = 4, .D = 2};
        return 0;
    }
    if (strcmp(name, "tiny") == 0) {
        *c = (tr_config){.S = 128, .P = 16, .E = 64, .L = 2, .H = 2, .C = 64, .h = 2, .D = 2};
        return 0;
    }
    return -1;
}

int tr_config_check(const tr_config *c, char *err, size_t n)
{
    if (c->P < 1 || c->S < c->P || c->S % c->P || c->S > 4096)
        return snprintf(err, n, "image size %d (--image-size) must be a multiple of the patch size %d (--patch), "
                        "at most 4096", c->S, c->P), -1;
    if (c->E < 1 || c->H < 1 || c->E % c->H || c->E > 8192)
        return snprintf(err, n, "encoder width %d (--enc-width) must be a multiple of its heads %d (--enc-heads), "
                        "at most 8192", c->E, c->H), -1;
    if (c->C < 8 || c->C % 8 || c->C > 2048)
        return snprintf(err, n, "decoder width %d (--dec-width) must be a multiple of 8, at most 2048", c->C), -1;
    if (c->h < 1 || (c->C / 2) % c->h)
        return snprintf(err, n, "half the decoder width, %d (--dec-width / 2), must be a multiple of its heads %d "
                        "(--dec-heads)", c->C / 2, c->h), -1;
    if (c->L < 0 || c->L > TR_MAX_L) return snprintf(err, n, "encoder depth %d (--enc-depth) must be in 0..%d", c->L, TR_MAX_L), -1;
    if (c->D < 1 || c->D > TR_MAX_D) return snprintf(err, n, "decoder depth %d (--dec-depth) must be in 1..%d", c->D, TR_MAX_D), -1;
    return 0;
}

/* ---- parameter table ------------------------------------------------------------ */

enum { INIT_TN, INIT_ZERO, INIT_ONE };

typedef struct walker {
    tr_model *m;
    size_t off;
    int n;
    int *init; /* per param init kind */
} walker;

static void reg(walker *w, float **field, const char *name, int decay, int init, int ndim, int d0, int d1,
                int d2, int d3)
{
    tr_param_info *pi = &w->m->pinfo[w->n];
    snprintf(pi->name, sizeof pi->name, "%s", name);
    pi->ndim = ndim;
    int d[4] = {d0, d1, d2, d3};
    pi->count = 1;
    for (int i = 0; i < 4; i++) {
        pi->shape[i] = i < ndim ? d[i] : 0;
        if (i < ndim) pi->count *= (size_t)d[i];
    }
    pi->offset = w->off;
    pi->decay = decay;
    w->init[w->n] = init;
    if (w->m->param_mem) {
        tr_model *m = w->m;
        *field = m->param_mem + w->off;
        float **gf = (float **)((char *)&m->g + ((char *)field - (char *)&m->p));
        *gf = m->frozen[w->n] || !m->grad_mem ? NULL : m->grad_mem + (w->off - m->grad_lo);
    }
    w->off += (pi->count + 15) / 16 * 16; /* 64-byte aligned tensors */
    w->n++;
}

static void reg_lin(walker *w, float **wt, float **b, const char *name, int out, int in)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.w", name);
    reg(w, wt, nm, 1, INIT_TN, 2, out, in, 0, 0);
    if (b) {
        snprintf(nm, sizeof nm, "%s.b", name);
        reg(w, b, nm, 0, INIT_ZERO, 1, out, 0, 0, 0);
    }
}

static void reg_ln(walker *w, float **g, float **b, const char *name, int n)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.w", name);
    reg(w, g, nm, 0, INIT_ONE, 1, n, 0, 0, 0);
    snprintf(nm, sizeof nm, "%s.b", name);
    reg(w, b, nm, 0, INIT_ZERO, 1, n, 0, 0, 0);
}

static void reg_attn(walker *w, tr_attn_p *a, const char *name, int C, int Ci)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.q_proj", name);
    reg_lin(w, &a->q_w, &a->q_b, nm, Ci, C);
    snprintf(nm, sizeof nm, "%s.k_proj", name);
    reg_lin(w, &a->k_w, &a->k_b, nm, Ci, C);
    snprintf(nm, sizeof nm, "%s.v_proj", name);
    reg_lin(w, &a->v_w, &a->v_b, nm, Ci, C);
    snprintf(nm, sizeof nm, "%s.out_proj", name);
    reg_lin(w, &a->o_w, &a->o_b, nm, C, Ci);
}

static void walk_params(walker *w)
{
    tr_model *m = w->m;
    const tr_config *c = &m->cfg;
    tr_params *p = &m->p;
    int G = c->S / c->P, E = c->E, C = c->C;
    char nm[64];
    reg_lin(w, &p->patch_w, &p->patch_b, "enc.patch", E, 3 * c->P * c->P);
    reg(w, &p->pos, "enc.pos", 0, INIT_TN, 2, G * G, E, 0, 0);
    for (int i = 0; i < c->L; i++) {
        tr_enc_block_p *b = &p->blk[i];
        snprintf(nm, sizeof nm, "enc.blocks.%d.ln1", i);
        reg_ln(w, &b->ln1_w, &b->ln1_b, nm, E);
        snprintf(nm, sizeof nm, "enc.blocks.%d.attn.qkv", i);
        reg_lin(w, &b->qkv_w, &b->qkv_b, nm, 3 * E, E);
        snprintf(nm, sizeof nm, "enc.blocks.%d.attn.proj", i);
        reg_lin(w, &b->proj_w, &b->proj_b, nm, E, E);
        snprintf(nm, sizeof nm, "enc.blocks.%d.ln2", i);
        reg_ln(w, &b->ln2_w, &b->ln2_b, nm, E);
        snprintf(nm, sizeof nm, "enc.blocks.%d.mlp.fc1", i);
        reg_lin(w, &b->fc1_w, &b->fc1_b, nm, 4 * E, E);
        snprintf(nm, sizeof nm, "enc.blocks.%d.mlp.fc2", i);
        reg_lin(w, &b->fc2_w, &b->fc2_b, nm, E, 4 * E);
    }
    reg_lin(w, &p->neck_w, NULL, "enc.neck", C, E);
    reg_ln(w, &p->neck_ln_w, &p->neck_ln_b, "enc.neck_ln", C);
    reg(w, &p->label_emb, "prompt.label_emb", 0, INIT_TN, 2, 2, C, 0, 0);
    reg(w, &p->not_a_point, "prompt.not_a_point", 0, INIT_TN, 1, C, 0, 0, 0);
    reg(w, &p->no_mask, "prompt.no_mask", 0, INIT_TN, 1, C, 0, 0, 0);
    reg(w, &p->iou_token, "dec.iou_token", 0, INIT_TN, 1, C, 0, 0, 0);
    reg(w, &p->mask_token, "dec.mask_token", 0, INIT_TN, 1, C, 0, 0, 0);
    for (int l = 0; l < c->D; l++) {
        tr_dec_layer_p *L = &p->lay[l];
        snprintf(nm, sizeof nm, "dec.layers.%d.self_attn", l);
        reg_attn(w, &L->sa, nm, C, C);
        snprintf(nm, sizeof nm, "dec.layers.%d.norm1", l);
        reg_ln(w, &L->n1_w, &L->n1_b, nm, C);
        snprintf(nm, sizeof nm, "dec.layers.%d.t2i", l);
        reg_attn(w, &L->t2i, nm, C, C / 2);
        snprintf(nm, sizeof nm, "dec.layers.%d.norm2", l);
        reg_ln(w, &L->n2_w, &L->n2_b, nm, C);
        snprintf(nm, sizeof nm, "dec.layers.%d.mlp.fc1", l);
        reg_lin(w, &L->fc1_w, &L->fc1_b, nm, 8 * C, C);
        snprintf(nm, sizeof nm, "dec.layers.%d.mlp.fc2", l);
        reg_lin(w, &L->fc2_w, &L->fc2_b, nm, C, 8 * C);
        snprintf(nm, sizeof nm, "dec.layers.%d.norm3", l);
        reg_ln(w, &L->n3_w, &L->n3_b, nm, C);
        snprintf(nm, sizeof nm, "dec.layers.%d.i2t", l);
        reg_attn(w, &L->i2t, nm, C, C / 2);
        snprintf(nm, sizeof nm, "dec.layers.%d.norm4", l);
        reg_ln(w, &L->n4_w, &L->n4_b, nm, C);
    }
    reg_attn(w, &p->fin, "dec.final_t2i", C, C / 2);
    reg_ln(w, &p->fin_n_w, &p->fin_n_b, "dec.final_norm", C);
    reg(w, &p->up1_w, "dec.up1.w", 1, INIT_TN, 4, C, C / 4, 2, 2);
    reg(w, &p->up1_b, "dec.up1.b", 0, INIT_ZERO, 1, C / 4, 0, 0, 0);
    reg_ln(w, &p->upln_w, &p->upln_b, "dec.up_ln", C / 4);
    reg(w, &p->up2_w, "dec.up2.w", 1, INIT_TN, 4, C / 4, C / 8, 2, 2);
    reg(w, &p->up2_b, "dec.up2.b", 0, INIT_ZERO, 1, C / 8, 0, 0, 0);
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "dec.hyper.%d", i);
        reg_lin(w, &p->hyp_w[i], &p->hyp_b[i], nm, i == 2 ? C / 8 : C, C);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "dec.iou_head.%d", i);
        reg_lin(w, &p->iouh_w[i], &p->iouh_b[i], nm, i == 2 ? 1 : C, C);
    }
}

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
    dreg(w, &a->att, nm, heads * Tq * Tk, in_a, 0); /* no gradient tensor */
    snprintf(nm, sizeof nm, "%s.ao", name);
    dreg(w, &a->ao, nm, Tq * Ci, in_a, in_d);
    snprintf(nm, sizeof nm, "%s.out", name);
    dreg(w, &a->out, nm, Tq * C, in_a && out_a, in_d);
}

static size_t r16(size_t n) { return (n + 15) / 16 * 16; }

/* Floats per pair of the upscaling's tensor k: up1, upln, upgelu [4GG, C/4],
 * up2, U [RR, C/8]. */
static size_t tail_per(const tr_model *m, int k)
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
    size_t T = (size_t)m->K + 2, up = r16(NP * 16 * GG * (C / 8)), o = 0;
    float *X = da ? da->pp_u[0] : NULL, *Y = da ? da->pp_u[1] : NULL;
    if (da) {
        da->U = da->upgelu = da->up1 = X;
        da->up2 = da->upln = Y;
        da->fin.q = X;
        da->fin.att = NULL;
    }
    o += r16(NP * T * (C / 2));
    if (da) da->fin.k = X + o;
    o += r16(NP * GG * (C / 2));
    if (da) da->fin.v = X + o;
    o += r16(NP * GG * (C / 2));
    if (da) da->fin.ao = X + o;
    o += r16(NP * T * (C / 2));
    if (da) da->fin.out = X + o;
    o += r16(NP * T * C);
    *nx = o > up ? o : up;
    if (da) da->fin_kin = Y, da->fin_qin = Y + r16(NP * GG * C);
    o = r16(NP * GG * C) + r16(NP * T * C);
    *ny = o > up ? o : up;
}

/* 1 when encoder block i computes in a slot and keeps its activations in
 * a 16-bit stash, image by image (16-bit storage without checkpointing, a
 * block with a backward); needs m->enc_slot and m->enc_lo. */
static int enc_stashed(const tr_model *m, int i)
{
    int lo = m->enc_lo < 0 ? 0 : m->enc_lo;
    return m->opt.precision != TR_PREC_FP32 && !m->opt.ckpt_every && m->enc_slot[i] >= 0 && i >= lo;
}

/* 1 when the layout keeps its activations in 16 bits only (tr_model.vmem):
 * 16-bit storage on a backend that packs. */
static int vid16(const tr_model *m)
{
    const tr_ops *o = m->be->stage_ops ? m->be->stage_ops : m->be->ops;
    return m->opt.precision != TR_PREC_FP32 && o->pack16 && o->unpack16 && o->copy;
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
        (snprintf(nm, sizeof nm, "enc.blocks.%d.att", i), ereg(w, &b->att, nm, H * GG * GG, all, own, 0));
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
        if (i >= lo && enc_stashed(m, i - 1)) xin = 1;
    }
    if (L > 0) /* its gradient: in the stash with 16-bit storage */
        areg3(w, &a->enc_out, "enc.output", BT * E, BT * E, m->enc_slot[L - 1] >= 0 && !enc_stashed(m, L - 1),
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
        areg2(w, &a->pp_u[2], "dec.up_scratch", 2 * nc * GG * C, 0, 1);
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
static int enc_part(const tr_model *m, const char *name)
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
}

/* (Re)allocates gradients, compute weights and activations for the current
 * B, options and frozen set; parameters are kept. */
static int model_layout(tr_model *m, char *err, size_t err_len)
{
    tr_backend *be = m->be;
    const tr_config *cfg = &m->cfg;
    free_layout(m);
    m->enc_lo = cfg->L + 1;
    m->grad_lo = m->n_param_floats;
    for (int i = 0; i < m->n_params; i++) {
        if (m->frozen[i]) continue;
        int part = enc_part(m, m->pinfo[i].name);
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
    int *init = calloc((size_t)m->n_params + 1, sizeof(int));
    if (!init) return snprintf(err, err_len, "out of memory"), -1;
    walker w = {.m = m, .init = init};
    walk_params(&w); /* p into param_mem, g into grad_mem or NULL */
    free(init);

    memset(&m->a, 0, sizeof m->a);
    memset(&m->da, 0, sizeof m->da);
    size_t NP = (size_t)m->B * (size_t)m->M;
    m->dec_chunk = (int)((NP + 3) / 4 < TR_DEC_CHUNK ? (NP + 3) / 4 : TR_DEC_CHUNK);
    m->n_chunks = (int)((NP + (size_t)m->dec_chunk - 1) / (size_t)m->dec_chunk);
    awalker aw = {.m = m};
    walk_acts(&aw); /* count */
    m->ainfo = calloc((size_t)aw.n + 1, sizeof *m->ainfo);
    m->dview = calloc((size_t)aw.nview + 1, sizeof *m->dview);
    m->n_dview = aw.nview;
    if (!m->ainfo || !m->dview) {
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
        if (enc_stashed(m, i)) {
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
            size_t n = (size_t)m->B * (size_t)m->M * tail_per(m, k);
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

static int in_group(const tr_model *m, const char *g, const char *name);

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
    int *init = calloc((size_t)maxp, sizeof(int));
    if (!m->pinfo || !init) {
        free(init);
        free(m->pinfo);
        m->pinfo = NULL;
        return snprintf(err, err_len, "out of memory"), -1;
    }
    walker w = {.m = m, .init = init};
    walk_params(&w); /* sizes only */
    free(init);
    m->n_params = w.n;
    m->n_param_floats = w.off;
    m->frozen = calloc((size_t)w.n, 1);
    m->param_mem = tr_mem_alloc(&be->mem, TR_MEM_PARAMS, w.off * sizeof(float));
    m->pe_gaussian = tr_mem_alloc(&be->mem, TR_MEM_PARAMS, (size_t)cfg->C * sizeof(float));
    if (!m->frozen || !m->param_mem || !m->pe_gaussian) {
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
                if (in_group(m, g, m->pinfo[i].name)) m->frozen[i] = 1;
        }
    }
    if (model_layout(m, err, err_len) < 0) {
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
    return model_layout(m, err, err_len);
}

int tr_model_set_batch(tr_model *m, int B, char *err, size_t err_len)
{
    if (B < 1 || B > m->B * 64 || (size_t)B * m->M * (m->K + 2) * 8 * m->cfg.C >= (1u << 31))
        return snprintf(err, err_len, "batch B=%d out of range", B), -1;
    m->B = B;
    return model_layout(m, err, err_len);
}

int tr_model_group_valid(const char *g, int L)
{
    if (!strcmp(g, "all") || !strcmp(g, "encoder") || !strcmp(g, "embed") || !strcmp(g, "blocks") ||
        !strcmp(g, "neck") || !strcmp(g, "prompt") || !strcmp(g, "decoder"))
        return 1;
    if (strncmp(g, "blocks.", 7) != 0) return 0;
    const char *s = g + 7;
    long a = -1, b = -1;
    char *end;
    if (*s < '0' || *s > '9') return 0;
    a = strtol(s, &end, 10);
    if (*end == '-') {
        if (end[1] < '0' || end[1] > '9') return 0;
        b = strtol(end + 1, &end, 10);
    } else {
        b = a;
    }
    return *end == 0 && a >= 0 && a <= b && b < L;
}

/* 1 when parameter name belongs to group g (valid). */
static int in_group(const tr_model *m, const char *g, const char *name)
{
    if (!strcmp(g, "all")) return 1;
    if (!strcmp(g, "encoder")) return strncmp(name, "enc.", 4) == 0;
    if (!strcmp(g, "prompt")) return strncmp(name, "prompt.", 7) == 0;
    if (!strcmp(g, "decoder")) return strncmp(name, "dec.", 4) == 0;
    int part = enc_part(m, name);
    if (!strcmp(g, "embed")) return part == -1;
    if (!strcmp(g, "neck")) return part == m->cfg.L;
    if (!strcmp(g, "blocks")) return part >= 0 && part < m->cfg.L;
    char *end;
    long a = strtol(g + 7, &end, 10), b = *end == '-' ? strtol(end + 1, NULL, 10) : a;
    return part >= 0 && part < m->cfg.L && part >= a && part <= b;
}

int tr_model_freeze(tr_model *m, const char *group, int frozen, char *err, size_t err_len)
{
    if (!tr_model_group_valid(group, m->cfg.L))
        return snprintf(err, err_len, "'%s' is not a parameter group (all, encoder, embed, blocks, blocks.I, "
                        "blocks.I-J with J < %d, neck, prompt, decoder)", group, m->cfg.L), -1;
    for (int i = 0; i < m->n_params; i++)
        if (in_group(m, group, m->pinfo[i].name)) m->frozen[i] = (uint8_t)(frozen != 0);
    return model_layout(m, err, err_len);
}

double tr_model_scale_grads(tr_model *m, double factor)
{
    tr_backend *be = m->be;
    if (!m->grad_mem || !m->n_grad_floats) return 0.0;
    if (factor != 1.0) be->ops->scale(be, m->grad_mem, m->n_grad_floats, (float)factor);
    return be->ops->sumsq(be, m->grad_mem, m->n_grad_floats);
}

float *tr_model_grad(const tr_model *m, int i)
{
    if (i < 0 || i >= m->n_params || m->frozen[i] || !m->grad_mem) return NULL;
    return m->grad_mem + (m->pinfo[i].offset - m->grad_lo);
}

int tr_model_find_param(const tr_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->pinfo[i].name, name) == 0) return i;
    return -1;
}

void tr_model_init_params(tr_model *m, uint64_t seed)
{
    int maxp = m->n_params;
    int *init = calloc((size_t)maxp + 1, sizeof(int));
    if (!init) abort();
    walker w = {.m = m, .init = init};
    float *pm = m->param_mem, *gm = m->grad_mem;
    /* re-walk only to recover the init kinds (pointers unchanged) */
    m->param_mem = m->grad_mem = NULL;
    walk_params(&w);
    m->param_mem = pm, m->grad_mem = gm;
    tr_rng r;
    tr_rng_seed(&r, seed);
    for (int i = 0; i < m->n_params; i++) {
        float *t = m->param_mem + m->pinfo[i].offset;
        for (size_t j = 0; j < m->pinfo[i].count; j++)
            t[j] = init[i] == INIT_ZERO ? 0.0f : init[i] == INIT_ONE ? 1.0f : (float)tr_rng_trunc_normal(&r, 0.02);
    }
    tr_rng rg;
    tr_rng_seed(&rg, seed ^ 0x9e3779b97f4a7c15ull);
    for (int j = 0; j < m->cfg.C; j++) m->pe_gaussian[j] = (float)tr_rng_normal(&rg);
    free(init);
}

/* A workspace of n floats for the operands of one op (16-bit storage
 * unpacked for fp32 arithmetic); the caller frees it right after. */
static float *work_alloc(tr_model *m, size_t n)
{
    float *x = tr_mem_alloc(&m->be->mem, TR_MEM_WORK, n * sizeof(float));
    if (!x) abort(); /* out of memory in the middle of a step */
    return x;
}

/* ---- per-op storage: the staging ops (tr_model.vmem) ------------------------------- */

/* The stash offset of the n floats at vmem offset v (inside one window). */
static size_t vmap(const tr_model *m, size_t v, size_t n)
{
    const size_t lo[5] = {m->v_xin, m->v_emb, m->v_uni, m->v_dact, m->v_id};
    const size_t len[5] = {m->n_xin, m->n_emb, m->n_uni, m->n_dact_floats, m->n_id};
    const size_t st[5] = {m->st_xin, m->st_emb, m->st_uni, m->gst, m->sh};
    for (int i = 0; i < 5; i++)
        if (v >= lo[i] && v - lo[i] + n <= len[i]) {
            if (st[i] == TR_NO_STASH) abort(); /* a window read before it was mapped: a bug */
            return st[i] + (v - lo[i]);
        }
    abort(); /* an operand across windows: a layout bug */
}

enum { SR = 1, SW = 2, SS = 4 }; /* operand read; written whole (=); scratch (neither) */

/* One operand of an op: its pointer (replaced by its workspace copy when it
 * lies in vmem), its extent in floats and how the op uses it. */
typedef struct sarg {
    float *p;
    size_t n;
    int mode;
} sarg;

typedef struct stage {
    float *ws;
    int ng;
    size_t lo[8], hi[8], off[8];
    int mode[8];
} stage;

static int in_vmem(const tr_model *m, const float *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)m->vmem;
    return p && a >= b && a < b + m->vmem_n * sizeof(float);
}

/* Before an op: the operands in vmem, overlapping ones merged into one range,
 * get one workspace; ranges the op reads (or writes only in part) are
 * unpacked from the stash into it. */
static void stage_in(tr_model *m, stage *s, sarg *a, int k)
{
    tr_backend *be = m->be;
    int grp[8], cnt[8] = {0};
    s->ng = 0, s->ws = NULL;
    for (int i = 0; i < k; i++) {
        grp[i] = -1;
        if (!a[i].n || !in_vmem(m, a[i].p)) continue;
        size_t lo = (size_t)(a[i].p - m->vmem), hi = lo + a[i].n;
        int g = s->ng++;
        s->lo[g] = lo, s->hi[g] = hi, s->mode[g] = a[i].mode, cnt[g] = 1;
        grp[i] = g;
    }
    for (int changed = 1; changed;) { /* merge overlapping ranges */
        changed = 0;
        for (int g = 0; g < s->ng && !changed; g++)
            for (int h = g + 1; h < s->ng && !changed; h++) {
                if (s->lo[h] >= s->hi[g] || s->lo[g] >= s->hi[h]) continue;
                s->lo[g] = s->lo[h] < s->lo[g] ? s->lo[h] : s->lo[g];
                s->hi[g] = s->hi[h] > s->hi[g] ? s->hi[h] : s->hi[g];
                s->mode[g] |= s->mode[h], cnt[g] += cnt[h];
                for (int i = 0; i < k; i++)
                    if (grp[i] == h) grp[i] = g;
                    else if (grp[i] == s->ng - 1) grp[i] = h;
                s->lo[h] = s->lo[s->ng - 1], s->hi[h] = s->hi[s->ng - 1];
                s->mode[h] = s->mode[s->ng - 1], cnt[h] = cnt[s->ng - 1];
                s->ng--;
                changed = 1;
            }
    }
    if (!s->ng) return;
    size_t tot = 0;
    for (int g = 0; g < s->ng; g++) s->off[g] = tot, tot += r16(s->hi[g] - s->lo[g]);
    /* no zero fill: every range is unpacked, written whole by the op, or its scratch */
    s->ws = tr_mem_alloc_raw(&be->mem, TR_MEM_WORK, tot * sizeof(float));
    if (!s->ws) abort(); /* out of memory in the middle of a step */
    for (int g = 0; g < s->ng; g++)
        if ((s->mode[g] & SR) || (cnt[g] > 1 && (s->mode[g] & SW)))
            be->stage_ops->unpack16(be, s->ws + s->off[g], m->stash_mem + vmap(m, s->lo[g], s->hi[g] - s->lo[g]),
                                    s->hi[g] - s->lo[g], m->opt.precision);
    for (int i = 0; i < k; i++)
        if (grp[i] >= 0) a[i].p = s->ws + s->off[grp[i]] + ((size_t)(a[i].p - m->vmem) - s->lo[grp[i]]);
}

/* After the op: what it wrote packed back into the stash; the workspace freed. */
static void stage_out(tr_model *m, stage *s)
{
    tr_backend *be = m->be;
    for (int g = 0; g < s->ng; g++)
        if (s->mode[g] & SW)
            be->stage_ops->pack16(be, m->stash_mem + vmap(m, s->lo[g], s->hi[g] - s->lo[g]), s->ws + s->off[g],
                                  s->hi[g] - s->lo[g], m->opt.precision);
    tr_mem_free(&be->mem, s->ws);
    s->ws = NULL;
}

#define SM tr_model *m = be->stage; stage st_
#define SIN(...) sarg a_[] = {__VA_ARGS__}; stage_in(m, &st_, a_, (int)(sizeof a_ / sizeof a_[0]))
#define SOUT() stage_out(m, &st_)
#define IN(x) a_[x].p
#define SO be->stage_ops

/* The operands of ops that never see activations must not lie in vmem. */
static void s_none(tr_backend *be, const void *p0, const void *p1, const void *p2)
{
    tr_model *m = be->stage;
    if (in_vmem(m, p0) || in_vmem(m, p1) || in_vmem(m, p2)) abort();
}

static void s_gemm(tr_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc)
{
    s_none(be, A, B, C);
    SO->gemm(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void s_linear_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b, int N,
                             int I, int O)
{
    SM;
    SIN({out, (size_t)N * O, SW}, {(float *)inp, (size_t)N * I, SR});
    SO->linear_forward(be, IN(0), IN(1), w, b, N, I, O);
    SOUT();
}

static void s_linear_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, int N, int I, int O)
{
    SM;
    SIN({dinp, (size_t)N * I, SR | SW}, {(float *)dout, (size_t)N * O, SR}, {(float *)inp, (size_t)N * I, SR});
    SO->linear_backward(be, IN(0), dw, db, IN(1), IN(2), w, N, I, O);
    SOUT();
}

static void s_layernorm_forward(tr_backend *be, float *out, float *mean, float *rstd, const float *inp,
                                const float *w, const float *b, int N, int C, float eps)
{
    SM;
    SIN({out, (size_t)N * C, SW}, {mean, (size_t)N, SW}, {rstd, (size_t)N, SW}, {(float *)inp, (size_t)N * C, SR});
    SO->layernorm_forward(be, IN(0), IN(1), IN(2), IN(3), w, b, N, C, eps);
    SOUT();
}

static void s_layernorm_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                 int C)
{
    SM;
    SIN({dinp, (size_t)N * C, SR | SW}, {(float *)dout, (size_t)N * C, SR}, {(float *)inp, (size_t)N * C, SR},
        {(float *)mean, (size_t)N, SR}, {(float *)rstd, (size_t)N, SR});
    SO->layernorm_backward(be, IN(0), dw, db, IN(1), IN(2), w, IN(3), IN(4), N, C);
    SOUT();
}

static void s_layernorm_stats(tr_backend *be, float *mean, float *rstd, const float *inp, int N, int C, float eps)
{
    SM;
    SIN({mean, (size_t)N, SW}, {rstd, (size_t)N, SW}, {(float *)inp, (size_t)N * C, SR});
    SO->layernorm_stats(be, IN(0), IN(1), IN(2), N, C, eps);
    SOUT();
}

static void s_gelu_forward(tr_backend *be, float *out, const float *inp, size_t n)
{
    SM;
    SIN({out, n, SW}, {(float *)inp, n, SR});
    SO->gelu_forward(be, IN(0), IN(1), n);
    SOUT();
}

static void s_gelu_backward(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    SM;
    SIN({dinp, n, SR | SW}, {(float *)dout, n, SR}, {(float *)inp, n, SR});
    SO->gelu_backward(be, IN(0), IN(1), IN(2), n);
    SOUT();
}

static void s_relu_forward(tr_backend *be, float *out, const float *inp, size_t n)
{
    SM;
    SIN({out, n, SW}, {(float *)inp, n, SR});
    SO->relu_forward(be, IN(0), IN(1), n);
    SOUT();
}

static void s_relu_backward(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    SM;
    SIN({dinp, n, SR | SW}, {(float *)dout, n, SR}, {(float *)inp, n, SR});
    SO->relu_backward(be, IN(0), IN(1), IN(2), n);
    SOUT();
}

static void s_add(tr_backend *be, float *out, const float *a, const float *b, size_t n)
{
    SM;
    SIN({out, n, SW}, {(float *)a, n, SR}, {(float *)b, n, SR});
    SO->add(be, IN(0), IN(1), IN(2), n);
    SOUT();
}

static void s_accumulate(tr_backend *be, float *dst, const float *src, size_t n)
{
    SM;
    SIN({dst, n, SR | SW}, {(float *)src, n, SR});
    SO->accumulate(be, IN(0), IN(1), n);
    SOUT();
}

/* zero: in pieces through one small workspace of zeros (backward_begin
 * zeroes every gradient at once) */
static void s_zero(tr_backend *be, float *dst, size_t n)
{
    tr_model *m = be->stage;
    if (!in_vmem(m, dst)) {
        SO->zero(be, dst, n);
        return;
    }
    size_t piece = n < 65536 ? n : 65536, v = (size_t)(dst - m->vmem);
    float *z = work_alloc(m, piece);
    SO->zero(be, z, piece);
    for (size_t i = 0; i < n; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        SO->pack16(be, m->stash_mem + vmap(m, v + i, k), z, k, m->opt.precision);
    }
    tr_mem_free(&be->mem, z);
}

static void s_add_bcast(tr_backend *be, float *out, const float *a, const float *b, size_t N, size_t n)
{
    SM;
    SIN({out, N * n, SW}, {(float *)a, N * n, SR}, {(float *)b, n, SR});
    SO->add_bcast(be, IN(0), IN(1), IN(2), N, n);
    SOUT();
}

/* floats from the first to the last element of a strided attention operand */
static size_t att_ext(int N, int T, int ld, size_t bs, int cols)
{
    return (size_t)(N - 1) * bs + (size_t)(T - 1) * (size_t)ld + (size_t)cols;
}

static void s_attention_forward(tr_backend *be, float *out, float *att, const float *q, const float *k,
                                const float *v, const tr_attn_dims *d)
{
    SM;
    int c = d->heads * d->dh, dense = d->ldo == c && d->so == (size_t)d->Tq * (size_t)c;
    SIN({out, att_ext(d->N, d->Tq, d->ldo, d->so, c), dense ? SW : SR | SW},
        {att, (size_t)d->N * d->heads * d->Tq * d->Tk, SW}, {(float *)q, att_ext(d->N, d->Tq, d->ldq, d->sq, c), SR},
        {(float *)k, att_ext(d->N, d->Tk, d->ldk, d->sk, c), SR},
        {(float *)v, att_ext(d->N, d->Tk, d->ldv, d->sv, c), SR});
    SO->attention_forward(be, IN(0), IN(1), IN(2), IN(3), IN(4), d);
    SOUT();
}

static void s_attention_backward(tr_backend *be, float *dq, float *dk, float *dv, const float *dout, const float *q,
                                 const float *k, const float *v, const float *att, const tr_attn_dims *d)
{
    SM;
    int c = d->heads * d->dh;
    size_t eq = att_ext(d->N, d->Tq, d->ldq, d->sq, c), ek = att_ext(d->N, d->Tk, d->ldk, d->sk, c);
    size_t ev = att_ext(d->N, d->Tk, d->ldv, d->sv, c);
    SIN({dq, eq, SR | SW}, {dk, ek, SR | SW}, {dv, ev, SR | SW},
        {(float *)dout, att_ext(d->N, d->Tq, d->ldo, d->so, c), SR},
        {(float *)q, eq, SR}, {(float *)k, ek, SR}, {(float *)v, ev, SR},
        {(float *)att, (size_t)d->N * d->heads * d->Tq * d->Tk, SR});
    SO->attention_backward(be, IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), IN(7), d);
    SOUT();
}

static void s_convt2x2_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                               float *scratch, int N, int H, int W, int Ci, int Co)
{
    SM;
    size_t px = (size_t)N * H * W;
    SIN({out, px * 4 * Co, SW}, {(float *)inp, px * Ci, SR}, {scratch, px * 4 * Co, SS});
    SO->convt2x2_forward(be, IN(0), IN(1), w, b, IN(2), N, H, W, Ci, Co);
    SOUT();
}

static void s_convt2x2_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, float *scratch, int N, int H, int W, int Ci, int Co)
{
    SM;
    size_t px = (size_t)N * H * W;
    SIN({dinp, px * Ci, SR | SW}, {(float *)dout, px * 4 * Co, SR}, {(float *)inp, px * Ci, SR},
        {scratch, px * 4 * Co, SS});
    SO->convt2x2_backward(be, IN(0), dw, db, IN(1), IN(2), w, IN(3), N, H, W, Ci, Co);
    SOUT();
}

static void s_patch_im2col(tr_backend *be, float *patches, const uint8_t *image, const int32_t *content, int B,
                           int S, int P)
{
    SM;
    SIN({patches, (size_t)B * (size_t)(S / P) * (size_t)(S / P) * 3 * (size_t)P * P, SW});
    SO->patch_im2col(be, IN(0), image, content, B, S, P);
    SOUT();
}

static void s_image_normalize(tr_backend *be, float *out, const uint8_t *image, const int32_t *content, int B, int S)
{
    SM;
    SIN({out, (size_t)B * 3 * S * S, SW});
    SO->image_normalize(be, IN(0), image, content, B, S);
    SOUT();
}

static void s_pe_dense(tr_backend *be, float *out, const float *gauss, int G, int C)
{
    SM;
    SIN({out, (size_t)G * G * C, SW});
    SO->pe_dense(be, IN(0), gauss, G, C);
    SOUT();
}

static void s_prompt_tokens_forward(tr_backend *be, float *T0, const float *points, const int32_t *labels,
                                    const float *gauss, const float *label_emb, const float *not_a_point,
                                    const float *iou_tok, const float *mask_tok, int NP, int K, int C, int S)
{
    SM;
    SIN({T0, (size_t)NP * (K + 2) * C, SW});
    SO->prompt_tokens_forward(be, IN(0), points, labels, gauss, label_emb, not_a_point, iou_tok, mask_tok, NP, K, C, S);
    SOUT();
}

static void s_prompt_tokens_backward(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                     float *dmask_tok, const float *dT0, const int32_t *labels, int NP, int K, int C)
{
    SM;
    SIN({(float *)dT0, (size_t)NP * (K + 2) * C, SR});
    SO->prompt_tokens_backward(be, dlabel_emb, dnot_a_point, diou_tok, dmask_tok, IN(0), labels, NP, K, C);
    SOUT();
}

static void s_keys_forward(tr_backend *be, float *Kimg, const float *emb, const float *no_mask, int B, int M, int GG,
                           int C)
{
    SM;
    SIN({Kimg, (size_t)B * M * GG * C, SW}, {(float *)emb, (size_t)B * GG * C, SR});
    SO->keys_forward(be, IN(0), IN(1), no_mask, B, M, GG, C);
    SOUT();
}

static void s_keys_backward(tr_backend *be, float *demb, float *dno_mask, const float *dKimg, int B, int M, int GG,
                            int C)
{
    SM;
    SIN({demb, (size_t)B * GG * C, SR | SW}, {(float *)dKimg, (size_t)B * M * GG * C, SR});
    SO->keys_backward(be, IN(0), dno_mask, IN(1), B, M, GG, C);
    SOUT();
}

static void s_rows_gather(tr_backend *be, float *out, const float *inp, int N, int T, int C, int t)
{
    SM;
    SIN({out, (size_t)N * C, SW}, {(float *)inp, (size_t)N * T * C, SR});
    SO->rows_gather(be, IN(0), IN(1), N, T, C, t);
    SOUT();
}

static void s_rows_scatter_add(tr_backend *be, float *dinp, const float *dout, int N, int T, int C, int t)
{
    SM;
    SIN({dinp, (size_t)N * T * C, SR | SW}, {(float *)dout, (size_t)N * C, SR});
    SO->rows_scatter_add(be, IN(0), IN(1), N, T, C, t);
    SOUT();
}

static void s_mask_dot_forward(tr_backend *be, float *logits, const float *U, const float *hyp, int N, int RR, int c)
{
    SM;
    SIN({logits, (size_t)N * RR, SW}, {(float *)U, (size_t)N * RR * c, SR}, {(float *)hyp, (size_t)N * c, SR});
    SO->mask_dot_forward(be, IN(0), IN(1), IN(2), N, RR, c);
    SOUT();
}

static void s_mask_dot_backward(tr_backend *be, float *dU, float *dhyp, const float *dlogits, const float *U,
                                const float *hyp, int N, int RR, int c)
{
    SM;
    SIN({dU, (size_t)N * RR * c, SR | SW}, {dhyp, (size_t)N * c, SR | SW}, {(float *)dlogits, (size_t)N * RR, SR},
        {(float *)U, (size_t)N * RR * c, SR}, {(float *)hyp, (size_t)N * c, SR});
    SO->mask_dot_backward(be, IN(0), IN(1), IN(2), IN(3), IN(4), N, RR, c);
    SOUT();
}

static tr_loss s_sam_loss(tr_backend *be, float *dlogits, float *diou, const float *logits, const float *iou,
                          const uint8_t *masks, const uint8_t *valid, int N, int RR)
{
    SM;
    SIN({dlogits, (size_t)N * RR, SW}, {diou, (size_t)N, SW}, {(float *)logits, (size_t)N * RR, SR},
        {(float *)iou, (size_t)N, SR});
    tr_loss L = SO->sam_loss(be, IN(0), IN(1), IN(2), IN(3), masks, valid, N, RR);
    SOUT();
    return L;
}

static double s_sumsq(tr_backend *be, const float *g, size_t n)
{
    s_none(be, g, NULL, NULL);
    return SO->sumsq(be, g, n);
}

static void s_scale(tr_backend *be, float *g, size_t n, float sc)
{
    s_none(be, g, NULL, NULL);
    SO->scale(be, g, n, sc);
}

static void s_adamw(tr_backend *be, float *w, float *mm, float *v, const float *g, size_t n, float lr, float beta1,
                    float beta2, float eps, float wd, float bc1, float bc2)
{
    s_none(be, w, mm, g);
    SO->adamw(be, w, mm, v, g, n, lr, beta1, beta2, eps, wd, bc1, bc2);
}

static void s_adamw8bit(tr_backend *be, float *w, uint8_t *mq, uint8_t *vq, float *mabs, float *vabs,
                        const float *qm, const float *qv, const float *g, size_t n, int block, float lr, float beta1,
                        float beta2, float eps, float wd, float bc1, float bc2)
{
    s_none(be, w, g, NULL);
    SO->adamw8bit(be, w, mq, vq, mabs, vabs, qm, qv, g, n, block, lr, beta1, beta2, eps, wd, bc1, bc2);
}

static void s_copy(tr_backend *be, float *dst, const float *src, size_t n)
{
    SM;
    SIN({dst, n, SW}, {(float *)src, n, SR});
    SO->copy(be, IN(0), IN(1), n);
    SOUT();
}

static void s_round_to(tr_backend *be, float *dst, const float *src, size_t n, int prec)
{
    SM;
    SIN({dst, n, SW}, {(float *)src, n, SR});
    SO->round_to(be, IN(0), IN(1), n, prec);
    SOUT();
}

static void s_pack16(tr_backend *be, uint16_t *dst, const float *src, size_t n, int prec)
{
    SM;
    SIN({(float *)src, n, SR});
    SO->pack16(be, dst, IN(0), n, prec);
    SOUT();
}

static void s_unpack16(tr_backend *be, float *dst, const uint16_t *src, size_t n, int prec)
{
    SM;
    SIN({dst, n, SW});
    SO->unpack16(be, IN(0), src, n, prec);
    SOUT();
}

#undef SM
#undef SIN
#undef SOUT
#undef IN
#undef SO

static const tr_ops stage_table = {
    .gemm = s_gemm, .linear_forward = s_linear_forward, .linear_backward = s_linear_backward,
    .layernorm_forward = s_layernorm_forward, .layernorm_backward = s_layernorm_backward,
    .layernorm_stats = s_layernorm_stats,
    .gelu_forward = s_gelu_forward, .gelu_backward = s_gelu_backward, .relu_forward = s_relu_forward,
    .relu_backward = s_relu_backward, .add = s_add, .accumulate = s_accumulate, .zero = s_zero,
    .add_bcast = s_add_bcast, .attention_forward = s_attention_forward, .attention_backward = s_attention_backward,
    .convt2x2_forward = s_convt2x2_forward, .convt2x2_backward = s_convt2x2_backward,
    .patch_im2col = s_patch_im2col, .image_normalize = s_image_normalize, .pe_dense = s_pe_dense,
    .prompt_tokens_forward = s_prompt_tokens_forward, .prompt_tokens_backward = s_prompt_tokens_backward,
    .keys_forward = s_keys_forward, .keys_backward = s_keys_backward, .rows_gather = s_rows_gather,
    .rows_scatter_add = s_rows_scatter_add, .mask_dot_forward = s_mask_dot_forward,
    .mask_dot_backward = s_mask_dot_backward, .sam_loss = s_sam_loss, .sumsq = s_sumsq, .scale = s_scale,
    .adamw = s_adamw, .adamw8bit = s_adamw8bit, .copy = s_copy, .round_to = s_round_to, .pack16 = s_pack16,
    .unpack16 = s_unpack16,
};

/* Puts the staging ops in front of the backend's while the model runs (per-op
 * storage); returns 1 when it did (stage_end undoes it), 0 when there is
 * nothing to do or they are in place already. */
static int stage_begin(tr_model *m)
{
    tr_backend *be = m->be;
    if (!m->vmem || be->stage == m) return 0;
    be->stage_ops = be->ops;
    be->ops = &stage_table;
    be->stage = m;
    return 1;
}

static void stage_end(tr_model *m, int on)
{
    tr_backend *be = m->be;
    if (!on) return;
    be->ops = be->stage_ops;
    be->stage_ops = NULL;
    be->stage = NULL;
}

/* ---- compute weights ---------------------------------------------------------------- */

/* With 16-bit storage the weights an op computes with are the 16-bit
 * compute copies (m->wc16, the masters rounded at the start of the
 * forward): the parameters w[0..k) of one op (n[i] floats each; NULL
 * entries skipped) are widened into one workspace and w[i] pointed into it.
 * Returns that workspace for the caller to free right after the op, or
 * NULL (fp32: the parameters themselves, w unchanged). */
static float *cw_widen(tr_model *m, const float **w, const size_t *n, int k)
{
    if (!m->wc16) return NULL;
    size_t tot = 0;
    for (int i = 0; i < k; i++)
        if (w[i]) tot += r16(n[i]);
    float *buf = work_alloc(m, tot), *x = buf;
    for (int i = 0; i < k; i++) {
        if (!w[i]) continue;
        if (m->be->ops->unpack16)
            m->be->ops->unpack16(m->be, x, m->wc16 + (w[i] - m->param_mem), n[i], m->opt.precision);
        w[i] = x;
        x += r16(n[i]);
    }
    return buf;
}

/* The ops that read parameters, on the compute weights (cw_widen). */
static void lin_fwd(tr_model *m, float *out, const float *inp, const float *w, const float *b, int N, int I, int O)
{
    const float *p[2] = {w, b};
    size_t n[2] = {(size_t)O * (size_t)I, (size_t)O};
    float *ws = cw_widen(m, p, n, 2);
    m->be->ops->linear_forward(m->be, out, inp, p[0], p[1], N, I, O);
    tr_mem_free(&m->be->mem, ws);
}

/* (w is read for dinp only) */
static void lin_bwd(tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                    const float *w, int N, int I, int O)
{
    const float *p[1] = {dinp ? w : NULL};
    size_t n[1] = {(size_t)O * (size_t)I};
    float *ws = cw_widen(m, p, n, 1);
    m->be->ops->linear_backward(m->be, dinp, dw, db, dout, inp, dinp ? p[0] : w, N, I, O);
    tr_mem_free(&m->be->mem, ws);
}

/* (mean and rstd NULL: not stored, written to a workspace for the op) */
static void ln_fwd(tr_model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                   const float *b, int N, int C, float eps)
{
    float *stw = NULL;
    if (!mean || !rstd) {
        stw = work_alloc(m, 2 * r16((size_t)N));
        mean = stw, rstd = stw + r16((size_t)N);
    }
    const float *p[2] = {w, b};
    size_t n[2] = {(size_t)C, (size_t)C};
    float *ws = cw_widen(m, p, n, 2);
    m->be->ops->layernorm_forward(m->be, out, mean, rstd, inp, p[0], p[1], N, C, eps);
    tr_mem_free(&m->be->mem, ws);
    tr_mem_free(&m->be->mem, stw);
}

/* (mean and rstd NULL: the statistics are not stored (16-bit storage) and
 * are recomputed from inp, w, b, eps exactly as the forward made them: the
 * forward's op on the same stored input, into a workspace) */
static void ln_bwd(tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                   const float *w, const float *b, const float *mean, const float *rstd, int N, int C, float eps)
{
    float *stw = NULL;
    if (!mean || !rstd) {
        size_t nr = r16((size_t)N);
        const tr_ops *io = m->be->stage_ops ? m->be->stage_ops : m->be->ops; /* the backend's own */
        if (io->layernorm_stats) {
            stw = work_alloc(m, 2 * nr);
            m->be->ops->layernorm_stats(m->be, stw, stw + nr, inp, N, C, eps);
        } else { /* through the forward op into a scratch output */
            stw = work_alloc(m, 2 * nr + (size_t)N * (size_t)C);
            ln_fwd(m, stw + 2 * nr, stw, stw + nr, inp, w, b, N, C, eps);
        }
        mean = stw, rstd = stw + nr;
    }
    const float *p[1] = {dinp ? w : NULL};
    size_t n[1] = {(size_t)C};
    float *ws = cw_widen(m, p, n, 1);
    m->be->ops->layernorm_backward(m->be, dinp, dw, db, dout, inp, dinp ? p[0] : w, mean, rstd, N, C);
    tr_mem_free(&m->be->mem, ws);
    tr_mem_free(&m->be->mem, stw);
}

static void convt_fwd(tr_model *m, float *out, const float *inp, const float *w, const float *b, float *scratch,
                      int N, int H, int W, int Ci, int Co)
{
    const float *p[2] = {w, b};
    size_t n[2] = {(size_t)Ci * (size_t)Co * 4, (size_t)Co};
    float *ws = cw_widen(m, p, n, 2);
    m->be->ops->convt2x2_forward(m->be, out, inp, p[0], p[1], scratch, N, H, W, Ci, Co);
    tr_mem_free(&m->be->mem, ws);
}

static void convt_bwd(tr_model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                      const float *w, float *scratch, int N, int H, int W, int Ci, int Co)
{
    const float *p[1] = {dinp ? w : NULL};
    size_t n[1] = {(size_t)Ci * (size_t)Co * 4};
    float *ws = cw_widen(m, p, n, 1);
    m->be->ops->convt2x2_backward(m->be, dinp, dw, db, dout, inp, dinp ? p[0] : w, scratch, N, H, W, Ci, Co);
    tr_mem_free(&m->be->mem, ws);
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
static void ablock_forward(tr_model *m, const tr_attn_p *p, tr_attn_a *a, const float *qin, const float *kin,
                           const float *vin, int N, int Tq, int Tk, int C, int Ci, int heads)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    lin_fwd(m, a->q, qin, p->q_w, p->q_b, N * Tq, C, Ci);
    lin_fwd(m, a->k, kin, p->k_w, p->k_b, N * Tk, C, Ci);
    lin_fwd(m, a->v, vin, p->v_w, p->v_b, N * Tk, C, Ci);
    tr_attn_dims d = attn_dims(N, Tq, Tk, Ci, heads);
    o->attention_forward(be, a->ao, a->att, a->q, a->k, a->v, &d);
    lin_fwd(m, a->out, a->ao, p->o_w, p->o_b, N * Tq, Ci, C);
}

static void ablock_backward(tr_model *m, const tr_attn_p *p, tr_attn_p *g, const tr_attn_a *a, tr_attn_a *da,
                            const float *qin, const float *kin, const float *vin, float *dqin, float *dkin,
                            float *dvin, int N, int Tq, int Tk, int C, int Ci, int heads)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    lin_bwd(m, da->ao, g->o_w, g->o_b, da->out, a->ao, p->o_w, N * Tq, Ci, C);
    tr_attn_dims d = attn_dims(N, Tq, Tk, Ci, heads);
    o->attention_backward(be, da->q, da->k, da->v, da->ao, a->q, a->k, a->v, a->att, &d);
    lin_bwd(m, dqin, g->q_w, g->q_b, da->q, qin, p->q_w, N * Tq, C, Ci);
    lin_bwd(m, dkin, g->k_w, g->k_b, da->k, kin, p->k_w, N * Tk, C, Ci);
    lin_bwd(m, dvin, g->v_w, g->v_b, da->v, vin, p->v_w, N * Tk, C, Ci);
}

/* ---- blocks, layers, slots ----------------------------------------------------------- */

static void mcopy(tr_backend *be, float *dst, const float *src, size_t n)
{
    if (be->ops->copy) {
        be->ops->copy(be, dst, src, n);
    } else {
        be->ops->zero(be, dst, n);
        be->ops->accumulate(be, dst, src, n);
    }
}

static void st_pack(tr_model *m, size_t off, const float *src, size_t n)
{
    if (m->be->ops->pack16) m->be->ops->pack16(m->be, m->stash_mem + off, src, n, m->opt.precision);
}

static void st_unpack(tr_model *m, float *dst, size_t off, size_t n)
{
    if (m->be->ops->unpack16) m->be->ops->unpack16(m->be, dst, m->stash_mem + off, n, m->opt.precision);
}

/* Points the encoder tensors that hold every image at image b's rows. */
static void enc_view(tr_model *m, int b)
{
    for (int i = 0; i < m->n_dview; i++) {
        const tr_dview *v = &m->dview[i];
        if (v->kind != 1) continue;
        *(float **)((char *)(v->grad ? &m->da : &m->a) + v->off) = v->base + (size_t)b * v->per;
    }
}

static size_t enc_xout_off(const tr_model *m, int i);

/* The input of encoder block i for image b (the view on image b); x0 in
 * 16 bits is unpacked into enc_xin (per-op storage: enc_xin's window mapped
 * onto x0's or the predecessor's output in the stash). */
static const float *enc_input(tr_model *m, int i, int b)
{
    size_t GE = (size_t)(m->cfg.S / m->cfg.P) * (size_t)(m->cfg.S / m->cfg.P) * (size_t)m->cfg.E;
    if (m->pop && m->a.enc_xin) { /* per-op storage: enc.xin's window on the input in the stash */
        m->st_xin = i == 0 ? m->x0_stash + (size_t)b * GE
                           : m->enc_stash[i - 1] + (size_t)b * m->enc_stash_per + enc_xout_off(m, i - 1);
        return m->a.enc_xin;
    }
    if (i == 0 && m->x0_stash != TR_NO_STASH) {
        if (m->be->ops->unpack16)
            m->be->ops->unpack16(m->be, m->a.enc_xin, m->stash_mem + m->x0_stash + (size_t)b * GE, GE,
                                 m->opt.precision);
        return m->a.enc_xin;
    }
    return i == 0 ? m->a.x0 + (size_t)b * GE : m->a.enc_in[i] ? m->a.enc_in[i] + (size_t)b * GE
                                                                 : m->a.blk[i - 1].xout;
}

/* Encoder block i (pre-norm attention + MLP) on input x: one image's G*G
 * tokens (the view on that image).  out 0 (a recomputation whose output
 * nothing reads: its backward needs only the gradient) skips the last
 * linear layer and the residual. */
static void enc_block_forward(tr_model *m, int i, const float *x, int out)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    const tr_config *c = &m->cfg;
    int GG = (c->S / c->P) * (c->S / c->P), E = c->E, B = 1, BT = B * GG;
    tr_enc_block_a *ab = &m->a.blk[i];
    const tr_enc_block_p *pb = &m->p.blk[i];
    ln_fwd(m, ab->ln1, ab->ln1_m, ab->ln1_r, x, pb->ln1_w, pb->ln1_b, BT, E, 1e-6f);
    lin_fwd(m, ab->qkv, ab->ln1, pb->qkv_w, pb->qkv_b, BT, E, 3 * E);
    tr_attn_dims d = {.N = B, .Tq = GG, .Tk = GG, .heads = c->H, .dh = E / c->H, .ldq = 3 * E,
                      .ldk = 3 * E, .ldv = 3 * E, .ldo = E, .sq = (size_t)GG * 3 * E,
                      .sk = (size_t)GG * 3 * E, .sv = (size_t)GG * 3 * E, .so = (size_t)GG * E};
    o->attention_forward(be, ab->ao, ab->att, ab->qkv, ab->qkv + E, ab->qkv + 2 * E, &d);
    lin_fwd(m, ab->xmid, ab->ao, pb->proj_w, pb->proj_b, BT, E, E);
    o->accumulate(be, ab->xmid, x, (size_t)BT * E);
    ln_fwd(m, ab->ln2, ab->ln2_m, ab->ln2_r, ab->xmid, pb->ln2_w, pb->ln2_b, BT, E, 1e-6f);
    lin_fwd(m, ab->fc1, ab->ln2, pb->fc1_w, pb->fc1_b, BT, E, 4 * E);
    o->gelu_forward(be, ab->gelu, ab->fc1, (size_t)BT * 4 * E);
    if (!out) return;
    lin_fwd(m, ab->xout, ab->gelu, pb->fc2_w, pb->fc2_b, BT, 4 * E, E);
    o->accumulate(be, ab->xout, ab->xmid, (size_t)BT * E);
}

/* Decoder layer l of the two-way transformer on tokens Tc, keys Kc of NP
 * pairs (one chunk). */
static void dec_layer_forward(tr_model *m, int l, const float *Tc, const float *Kc, int NP)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    const tr_config *c = &m->cfg;
    tr_acts *a = &m->a;
    int GG = (c->S / c->P) * (c->S / c->P), C = c->C, T = m->K + 2;
    size_t nT = (size_t)NP * T * C, nK = (size_t)NP * GG * C;
    tr_dec_layer_a *L = &a->lay[l];
    const tr_dec_layer_p *pl = &m->p.lay[l];
    const float *t1in;
    if (l == 0) {
        ablock_forward(m, &pl->sa, &L->sa, Tc, Tc, Tc, NP, T, T, C, C, c->h);
        t1in = L->sa.out;
    } else {
        o->add(be, L->sa_qin, Tc, a->T0, nT);
        ablock_forward(m, &pl->sa, &L->sa, L->sa_qin, L->sa_qin, Tc, NP, T, T, C, C, c->h);
        o->add(be, L->t1pre, Tc, L->sa.out, nT);
        t1in = L->t1pre;
    }
    ln_fwd(m, L->t1, L->n1_m, L->n1_r, t1in, pl->n1_w, pl->n1_b, NP * T, C, 1e-5f);
    o->add(be, L->t2i_qin, L->t1, a->T0, nT);
    o->add_bcast(be, L->kpe, Kc, a->dense_pe, (size_t)NP, (size_t)GG * C);
    ablock_forward(m, &pl->t2i, &L->t2i, L->t2i_qin, L->kpe, Kc, NP, T, GG, C, C / 2, c->h);
    o->add(be, L->t2pre, L->t1, L->t2i.out, nT);
    ln_fwd(m, L->t2, L->n2_m, L->n2_r, L->t2pre, pl->n2_w, pl->n2_b, NP * T, C, 1e-5f);
    lin_fwd(m, L->fc1, L->t2, pl->fc1_w, pl->fc1_b, NP * T, C, 8 * C);
    o->relu_forward(be, L->relu, L->fc1, (size_t)NP * T * 8 * C);
    lin_fwd(m, L->t3pre, L->relu, pl->fc2_w, pl->fc2_b, NP * T, 8 * C, C);
    o->accumulate(be, L->t3pre, L->t2, nT);
    ln_fwd(m, L->t3, L->n3_m, L->n3_r, L->t3pre, pl->n3_w, pl->n3_b, NP * T, C, 1e-5f);
    o->add(be, L->i2t_kin, L->t3, a->T0, nT);
    ablock_forward(m, &pl->i2t, &L->i2t, L->kpe, L->i2t_kin, L->t3, NP, GG, T, C, C / 2, c->h);
    o->add(be, L->k4pre, Kc, L->i2t.out, nK);
    ln_fwd(m, L->kout, L->n4_m, L->n4_r, L->k4pre, pl->n4_w, pl->n4_b, NP * GG, C, 1e-5f);
}

/* stash_mem [dst, +n) = [src, +n) (16-bit codes moved through a small
 * workspace, piece by piece: both lie in the stash) */
static void st_move(tr_model *m, size_t dst, size_t src, size_t n)
{
    tr_backend *be = m->be;
    size_t piece = n < 65536 ? n : 65536;
    float *x = work_alloc(m, piece);
    for (size_t i = 0; i < n; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        be->ops->unpack16(be, x, m->stash_mem + src + i, k, m->opt.precision);
        be->ops->pack16(be, m->stash_mem + dst + i, x, k, m->opt.precision);
    }
    tr_mem_free(&be->mem, x);
}

/* A region of the activation layout at offset off (apos): in act_mem, or
 * with 16-bit storage in vmem's identity part (its values in the shadow). */
static size_t shadow_off(const tr_model *m, size_t off) { return m->sh + off; }

static void stash_pack(tr_model *m, size_t stash_off, size_t act_off, size_t n)
{
    tr_backend *be = m->be;
    if (m->vmem) st_move(m, stash_off, shadow_off(m, act_off), n);
    else if (be->ops->pack16) be->ops->pack16(be, m->stash_mem + stash_off, m->act_mem + act_off, n, m->opt.precision);
}

static void stash_unpack(tr_model *m, size_t stash_off, size_t act_off, size_t n)
{
    tr_backend *be = m->be;
    if (m->vmem) st_move(m, shadow_off(m, act_off), stash_off, n);
    else if (be->ops->unpack16)
        be->ops->unpack16(be, m->act_mem + act_off, m->stash_mem + stash_off, n, m->opt.precision);
}

/* Offset of block i's output in its slot (floats). */
static size_t enc_xout_off(const tr_model *m, int i)
{
    if (m->pop) return (size_t)(m->a.blk[i].xout - (m->vmem + m->v_uni));
    if (m->vmem) return (size_t)(m->a.blk[i].xout - (m->vmem + m->v_id)) - m->enc_slot_off[m->enc_slot[i]];
    return (size_t)(m->a.blk[i].xout - m->act_mem) - m->enc_slot_off[m->enc_slot[i]];
}

/* dst [GG, E] = the output of stashed encoder block i for image b: from the
 * slot when it holds (i, b), else unpacked from the stash. */
static void enc_xout_get(tr_model *m, int i, int b, float *dst)
{
    size_t GE = (size_t)(m->cfg.S / m->cfg.P) * (size_t)(m->cfg.S / m->cfg.P) * (size_t)m->cfg.E;
    tr_backend *be = m->be;
    if (m->enc_res == i && m->enc_res_img == b)
        mcopy(be, dst, m->a.blk[i].xout, GE);
    else if (be->ops->unpack16)
        be->ops->unpack16(be, dst, m->stash_mem + m->enc_stash[i] + (size_t)b * m->enc_stash_per + enc_xout_off(m, i),
                          GE, m->opt.precision);
}

/* The neck's input [BT, E] (every image's last block output) when the last
 * block is stashed: gathered into a workspace (fp32 for the neck's GEMM,
 * live for that one op) the caller frees. */
static float *enc_out_gather(tr_model *m)
{
    size_t GE = (size_t)(m->cfg.S / m->cfg.P) * (size_t)(m->cfg.S / m->cfg.P) * (size_t)m->cfg.E;
    float *x = tr_mem_alloc(&m->be->mem, TR_MEM_WORK, (size_t)m->B * GE * sizeof(float));
    if (!x) abort(); /* out of memory in the middle of a step */
    for (int b = 0; b < m->B; b++) enc_xout_get(m, m->cfg.L - 1, b, x + (size_t)b * GE);
    return x;
}

/* Before the backward of encoder block i on image b: the view on image b
 * and the block's activations in place (recomputed from the segment's
 * saved input, or unpacked from the stash). */
static void enc_restore(tr_model *m, int i, int b)
{
    enc_view(m, b);
    if (m->enc_slot[i] < 0) return;
    if (m->pop) { /* per-op storage: the slot's window on the block image's stash */
        m->st_uni = m->enc_stash[i] + (size_t)b * m->enc_stash_per;
        return;
    }
    int N = m->opt.ckpt_every;
    if (N) {
        int seg = i / N;
        if (seg == m->enc_res && b == m->enc_res_img) return;
        int end = seg * N + N < m->cfg.L ? seg * N + N : m->cfg.L; /* the last output: saved, not read */
        for (int j = seg * N; j < end; j++) enc_block_forward(m, j, enc_input(m, j, b), j < end - 1);
        m->enc_res = seg, m->enc_res_img = b;
    } else if (m->enc_res != i || m->enc_res_img != b) {
        if (m->enc_stash[i] != TR_NO_STASH)
            stash_unpack(m, m->enc_stash[i] + (size_t)b * m->enc_stash_per, m->enc_slot_off[m->enc_slot[i]],
                         m->enc_slot_n);
        m->enc_res = i, m->enc_res_img = b;
        if (m->act_union) m->dec_res = -1; /* the slot overwrites the chunk region */
    }
}

/* Points the decoder tensors that hold every pair at chunk c's rows. */
static void dec_view(tr_model *m, int c)
{
    size_t p0 = (size_t)c * (size_t)m->dec_chunk;
    for (int i = 0; i < m->n_dview; i++) {
        const tr_dview *v = &m->dview[i];
        if (v->kind != 0) continue;
        *(float **)((char *)(v->grad ? &m->da : &m->a) + v->off) = v->base + p0 * v->per;
    }
    for (int l = 0; l < m->cfg.D; l++) m->a.lay[l].i2t.out = m->a.lay[l].k4pre; /* in place */
}

/* The upscaling's tensor k (up1, upln, upgelu, up2, U) of chunk ci's NP
 * pairs from p0 in a new workspace (unpacked from the stash when get). */
static float *tail_ws(tr_model *m, int k, size_t p0, int NP, int get)
{
    size_t per = tail_per(m, k);
    float *x = work_alloc(m, (size_t)NP * per);
    if (get) st_unpack(m, x, m->tail_stash[k] + p0 * per, (size_t)NP * per);
    return x;
}

static void tail_put(tr_model *m, int k, size_t p0, int NP, const float *x)
{
    size_t per = tail_per(m, k);
    st_pack(m, m->tail_stash[k] + p0 * per, x, (size_t)NP * per);
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
    const tr_config *c = &m->cfg;
    size_t GG = (size_t)(c->S / c->P) * (size_t)(c->S / c->P), C = (size_t)c->C, M = (size_t)m->M;
    const float *no_mask = m->p.no_mask;
    float *ws = cw_widen(m, &no_mask, &C, 1);
    for (size_t q = p0; q < p0 + (size_t)n;) {
        size_t img = q / M, e = (img + 1) * M < p0 + (size_t)n ? (img + 1) * M : p0 + (size_t)n;
        const float *emb = m->a.emb ? m->a.emb + img * GG * C : m->a.emb_rows;
        if (m->pop) m->st_emb = m->emb_stash + img * GG * C; /* per-op storage: the window on it */
        else if (!m->a.emb) st_unpack(m, m->a.emb_rows, m->emb_stash + img * GG * C, GG * C);
        be->ops->keys_forward(be, m->a.Kimg + (q - p0) * GG * C, emb, no_mask, 1, (int)(e - q), (int)GG, (int)C);
        q = e;
    }
    tr_mem_free(&be->mem, ws);
}

static void keys_chunk_backward(tr_model *m, size_t p0, int n, int to_emb)
{
    tr_backend *be = m->be;
    const tr_config *c = &m->cfg;
    size_t GG = (size_t)(c->S / c->P) * (size_t)(c->S / c->P), C = (size_t)c->C, M = (size_t)m->M;
    for (size_t q = p0; q < p0 + (size_t)n;) {
        size_t img = q / M, e = (img + 1) * M < p0 + (size_t)n ? (img + 1) * M : p0 + (size_t)n;
        int d16 = to_emb && m->demb_stash != TR_NO_STASH; /* through emb_rows */
        if (d16 && m->pop) m->st_emb = m->demb_stash + img * GG * C; /* per-op storage: the window on it */
        else if (d16) st_unpack(m, m->a.emb_rows, m->demb_stash + img * GG * C, GG * C);
        be->ops->keys_backward(be, d16 ? m->a.emb_rows : to_emb ? m->da.emb + img * GG * C : NULL, m->g.no_mask,
                               m->da.Kimg + (q - p0) * GG * C, 1, (int)(e - q), (int)GG, (int)C);
        if (d16 && !m->pop) st_pack(m, m->demb_stash + img * GG * C, m->a.emb_rows, GG * C);
        q = e;
    }
}

/* The decoder forward of chunk c: prompt tokens, image keys, the two-way
 * transformer, the tail (final attention, upscaling), the heads; writes the
 * chunk's rows of out.logits and out.iou unless out is 0 (a recomputation:
 * the backward reads neither).  Leaves the view on chunk c. */
static void dec_chunk_forward(tr_model *m, const tr_batch *b, int ci, int out)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    const tr_config *c = &m->cfg;
    const tr_params *p = &m->p;
    tr_acts *a = &m->a;
    int S = c->S, G = S / c->P, GG = G * G, C = c->C, K = m->K, T = K + 2, R = 4 * G, RR = R * R;
    size_t p0;
    int NP = chunk_pairs(m, ci, &p0);
    size_t nT = (size_t)NP * T * C, nK = (size_t)NP * GG * C;
    dec_view(m, ci);
    if (m->pop) m->st_uni = m->dec_stash_off + (size_t)ci * m->dec_stash_per; /* straight into it */
    const float *tok[4] = {p->label_emb, p->not_a_point, p->iou_token, p->mask_token};
    size_t ntok[4] = {2 * (size_t)C, (size_t)C, (size_t)C, (size_t)C};
    float *tokw = cw_widen(m, tok, ntok, 4);
    o->prompt_tokens_forward(be, a->T0, b->points + p0 * (size_t)K * 2, b->labels + p0 * (size_t)K,
                             m->pe_gaussian, tok[0], tok[1], tok[2], tok[3], NP, K, C, S);
    tr_mem_free(&be->mem, tokw);
    keys_chunk_forward(m, p0, NP);

    /* two-way transformer */
    const float *Tc = a->T0, *Kc = a->Kimg;
    for (int l = 0; l < c->D; l++) {
        dec_layer_forward(m, l, Tc, Kc, NP);
        Tc = a->lay[l].t3, Kc = a->lay[l].kout;
    }
    o->add(be, a->fin_qin, Tc, a->T0, nT);
    o->add_bcast(be, a->fin_kin, Kc, a->dense_pe, (size_t)NP, (size_t)GG * C);
    ablock_forward(m, &p->fin, &a->fin, a->fin_qin, a->fin_kin, Kc, NP, T, GG, C, C / 2, c->h);
    o->add(be, a->tfpre, Tc, a->fin.out, nT);
    ln_fwd(m, a->tf, a->fin_m, a->fin_r, a->tfpre, p->fin_n_w, p->fin_n_b, NP * T, C, 1e-5f);
    (void)nK;

    /* upscaling, hypernetwork, mask logits, IoU head; with act_union each
     * upscaling tensor is made in a workspace and packed into the stash
     * (live until its successor is made; U until the mask logits) */
    int t16 = m->act_union;
    float *up1 = t16 ? tail_ws(m, 0, p0, NP, 0) : a->up1;
    convt_fwd(m, up1, Kc, p->up1_w, p->up1_b, a->up_scratch, NP, G, G, C, C / 4);
    float *upln = t16 ? tail_ws(m, 1, p0, NP, 0) : a->upln;
    ln_fwd(m, upln, a->upln_m, a->upln_r, up1, p->upln_w, p->upln_b, NP * 4 * GG, C / 4, 1e-6f);
    if (t16) tail_put(m, 0, p0, NP, up1), tr_mem_free(&be->mem, up1);
    float *upgelu = t16 ? tail_ws(m, 2, p0, NP, 0) : a->upgelu;
    o->gelu_forward(be, upgelu, upln, (size_t)NP * 4 * GG * (C / 4));
    if (t16) tail_put(m, 1, p0, NP, upln), tr_mem_free(&be->mem, upln);
    float *up2 = t16 ? tail_ws(m, 3, p0, NP, 0) : a->up2;
    convt_fwd(m, up2, upgelu, p->up2_w, p->up2_b, a->up_scratch, NP, 2 * G, 2 * G, C / 4, C / 8);
    if (t16) tail_put(m, 2, p0, NP, upgelu), tr_mem_free(&be->mem, upgelu);
    float *U = t16 ? tail_ws(m, 4, p0, NP, 0) : a->U;
    o->gelu_forward(be, U, up2, (size_t)NP * RR * (C / 8));
    if (t16) tail_put(m, 3, p0, NP, up2), tr_mem_free(&be->mem, up2);
    if (t16) tail_put(m, 4, p0, NP, U);
    o->rows_gather(be, a->tmask, a->tf, NP, T, C, 1);
    lin_fwd(m, a->h0, a->tmask, p->hyp_w[0], p->hyp_b[0], NP, C, C);
    o->relu_forward(be, a->h0r, a->h0, (size_t)NP * C);
    lin_fwd(m, a->h1, a->h0r, p->hyp_w[1], p->hyp_b[1], NP, C, C);
    o->relu_forward(be, a->h1r, a->h1, (size_t)NP * C);
    lin_fwd(m, a->hyp, a->h1r, p->hyp_w[2], p->hyp_b[2], NP, C, C / 8);
    if (out) o->mask_dot_forward(be, a->logits, U, a->hyp, NP, RR, C / 8);
    if (t16) tr_mem_free(&be->mem, U);
    if (out && m->logits_stash != TR_NO_STASH)
        st_pack(m, m->logits_stash + p0 * (size_t)RR, a->logits, (size_t)NP * RR);
    o->rows_gather(be, a->tiou, a->tf, NP, T, C, 0);
    lin_fwd(m, a->i0, a->tiou, p->iouh_w[0], p->iouh_b[0], NP, C, C);
    o->relu_forward(be, a->i0r, a->i0, (size_t)NP * C);
    lin_fwd(m, a->i1, a->i0r, p->iouh_w[1], p->iouh_b[1], NP, C, C);
    o->relu_forward(be, a->i1r, a->i1, (size_t)NP * C);
    if (out) lin_fwd(m, a->iou, a->i1r, p->iouh_w[2], p->iouh_b[2], NP, C, 1);
    if (!m->dec_full) m->dec_res = ci;
}

/* Before the backward of chunk c: the view on it and its activations in
 * the chunk region (recomputed, or unpacked from its stash). */
static void dec_restore(tr_model *m, const tr_batch *b, int ci)
{
    if (m->pop) { /* per-op storage: the chunk region's window on the chunk's stash */
        dec_view(m, ci);
        m->st_uni = m->dec_stash_off + (size_t)ci * m->dec_stash_per;
    } else if (m->dec_full || m->dec_res == ci) {
        dec_view(m, ci);
    } else if (m->opt.ckpt_decoder) {
        dec_chunk_forward(m, b, ci, 0);
    } else {
        dec_view(m, ci);
        stash_unpack(m, m->dec_stash_off + (size_t)ci * m->dec_stash_per, m->dchunk_off, m->dchunk_n);
        m->dec_res = ci;
    }
}

/* The batch checked, the encoder (image by image), the neck and the dense
 * PE: everything before the decoder. */
static int forward_encoder(tr_model *m, const tr_batch *b, char *err, size_t err_len)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    const tr_config *c = &m->cfg;
    const tr_params *p = &m->p;
    tr_acts *a = &m->a;
    int S = c->S, P = c->P, G = S / P, GG = G * G, E = c->E, C = c->C, B = m->B, M = m->M, K = m->K;
    int BT = B * GG, NP = B * M, T = K + 2, R = 4 * G, RR = R * R;
    if (b->B != B || b->M != M || b->K != K || b->S != S || b->R != R)
        return snprintf(err, err_len, "batch geometry B=%d M=%d K=%d S=%d R=%d does not match the model's "
                        "B=%d M=%d K=%d S=%d R=%d", b->B, b->M, b->K, b->S, b->R, B, M, K, S, R), -1;
    for (size_t i = 0; i < (size_t)NP * K; i++) {
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
    be->prec = m->opt.precision;
    if (m->wc16 && o->pack16) /* the compute weights: the masters rounded to nearest even */
        o->pack16(be, m->wc16, m->param_mem, m->n_param_floats, m->opt.precision);

    /* encoder: patch embedding, positions, L pre-norm blocks, neck */
    size_t GE = (size_t)GG * E;
    const float *pos = p->pos;
    float *posw = cw_widen(m, &pos, &GE, 1); /* the positions' compute values, every image */
    for (int i = 0; i < B; i++) { /* image by image through one image's patches */
        o->patch_im2col(be, a->patches, b->image + (size_t)i * S * S * 3, b->content + 2 * i, 1, S, P);
        float *x0 = m->x0_stash != TR_NO_STASH ? a->enc_xin : a->x0 + (size_t)i * GE;
        if (m->pop) m->st_xin = m->x0_stash + (size_t)i * GE; /* per-op storage: straight into the stash */
        lin_fwd(m, x0, a->patches, p->patch_w, p->patch_b, GG, 3 * P * P, E);
        if (m->x0_stash == TR_NO_STASH) continue;
        o->accumulate(be, x0, pos, GE); /* 16-bit storage: image by image into the stash */
        if (o->pack16 && !m->pop)
            o->pack16(be, m->stash_mem + m->x0_stash + (size_t)i * GE, x0, GE, m->opt.precision);
    }
    if (m->x0_stash == TR_NO_STASH)
        for (int i = 0; i < B; i++) o->accumulate(be, a->x0 + (size_t)i * GE, pos, GE);
    tr_mem_free(&be->mem, posw);
    for (int bi = 0; bi < B; bi++) { /* image by image */
        enc_view(m, bi);
        for (int i = 0; i < c->L; i++) {
            if (a->enc_in[i]) mcopy(be, a->enc_in[i] + (size_t)bi * GE, a->blk[i - 1].xout, GE);
            if (m->pop) m->st_uni = m->enc_stash[i] + (size_t)bi * m->enc_stash_per; /* straight into it */
            enc_block_forward(m, i, enc_input(m, i, bi), 1);
            if (m->enc_stash[i] != TR_NO_STASH && !m->pop && (m->act_union || !(i == c->L - 1 && bi == B - 1)))
                stash_pack(m, m->enc_stash[i] + (size_t)bi * m->enc_stash_per, m->enc_slot_off[m->enc_slot[i]],
                           m->enc_slot_n);
        }
        if (c->L && a->enc_out) mcopy(be, a->enc_out + (size_t)bi * GE, a->blk[c->L - 1].xout, GE);
    }
    enc_view(m, 0);
    m->enc_res = c->L == 0 ? -1 : m->opt.ckpt_every ? (c->L - 1) / m->opt.ckpt_every : c->L - 1;
    m->enc_res_img = B - 1;
    float *xw = c->L && enc_stashed(m, c->L - 1) ? enc_out_gather(m) : NULL;
    const float *x = c->L ? (a->enc_out ? a->enc_out : xw ? xw : a->blk[c->L - 1].xout) : a->x0;
    size_t btc = (size_t)BT * C;
    int n16 = m->emb_stash != TR_NO_STASH; /* fp32 for these two ops, then stashed */
    float *neck = n16 ? work_alloc(m, btc) : a->neck;
    lin_fwd(m, neck, x, p->neck_w, NULL, BT, E, C);
    tr_mem_free(&be->mem, xw);
    float *emb = n16 ? work_alloc(m, btc) : a->emb;
    ln_fwd(m, emb, a->emb_m, a->emb_r, neck, p->neck_ln_w, p->neck_ln_b, BT, C, 1e-6f);
    if (n16) {
        st_pack(m, m->neck_stash, neck, btc);
        st_pack(m, m->emb_stash, emb, btc);
        tr_mem_free(&be->mem, neck);
        tr_mem_free(&be->mem, emb);
    }

    /* prompt encoder: the dense PE */
    o->pe_dense(be, a->dense_pe, m->pe_gaussian, G, C);
    m->dec_res = -1;
    if (m->act_union) m->enc_res = -1; /* the decoder's chunks overwrite the slot */
    (void)NP, (void)T, (void)RR;
    return 0;
}

int tr_model_forward(tr_model *m, const tr_batch *b, char *err, size_t err_len)
{
    int st = stage_begin(m);
    if (forward_encoder(m, b, err, err_len) < 0) return stage_end(m, st), -1;
    for (int ci = 0; ci < m->n_chunks; ci++) { /* the decoder chunk by chunk */
        dec_chunk_forward(m, b, ci, 1);
        if (m->dec_stash_per && ci < m->n_chunks - 1 && !m->pop)
            stash_pack(m, m->dec_stash_off + (size_t)ci * m->dec_stash_per, m->dchunk_off, m->dchunk_n);
    }
    dec_view(m, 0);
    stage_end(m, st);
    return 0;
}

tr_loss tr_model_backward(tr_model *m, const tr_batch *b) { return tr_model_backward_acc(m, b, 1, 1.0f, 0); }

/* The backward of decoder chunk ci (its activations in place, the view on
 * it, its loss gradients written): heads, tail, layers, prompt tokens and
 * image keys; parameter gradients and the image embedding's gradient
 * accumulate. */
static void dec_chunk_backward(tr_model *m, const tr_batch *b, int ci)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    const tr_config *c = &m->cfg;
    const tr_params *p = &m->p;
    tr_params *g = &m->g;
    const tr_acts *a = &m->a;
    tr_acts *da = &m->da;
    int S = c->S, P = c->P, G = S / P, GG = G * G, E = c->E, C = c->C, B = m->B, K = m->K;
    int BT = B * GG, T = K + 2, R = 4 * G, RR = R * R;
    int lo = m->enc_lo;
    size_t p0;
    int NP = chunk_pairs(m, ci, &p0);
    (void)S, (void)P, (void)E, (void)BT;
    size_t nc = (size_t)m->dec_chunk;
    size_t nT = (size_t)NP * T * C, nK = (size_t)NP * GG * C, nUp = nc * GG * C;
    o->zero(be, m->dact_mem + m->ddec_off, m->ddec_n); /* the chunk's gradients */
    o->zero(be, da->U, nc * RR * (C / 8));            /* the tail's, in the union region */
    o->zero(be, da->up2, nc * RR * (C / 8));
    /* IoU head */
    lin_bwd(m, da->i1r, g->iouh_w[2], g->iouh_b[2], da->iou, a->i1r, p->iouh_w[2], NP, C, 1);
    o->relu_backward(be, da->i1, da->i1r, a->i1, (size_t)NP * C);
    lin_bwd(m, da->i0r, g->iouh_w[1], g->iouh_b[1], da->i1, a->i0r, p->iouh_w[1], NP, C, C);
    o->relu_backward(be, da->i0, da->i0r, a->i0, (size_t)NP * C);
    lin_bwd(m, da->tiou, g->iouh_w[0], g->iouh_b[0], da->i0, a->tiou, p->iouh_w[0], NP, C, C);
    o->rows_scatter_add(be, da->tf, da->tiou, NP, T, C, 0);
    /* mask logits and hypernetwork; with act_union each upscaling tensor
     * is unpacked from the stash into a workspace for the op that reads it */
    int t16 = m->act_union;
    float *x = t16 ? tail_ws(m, 4, p0, NP, 1) : NULL;
    o->mask_dot_backward(be, da->U, da->hyp, da->logits, t16 ? x : a->U, a->hyp, NP, RR, C / 8);
    tr_mem_free(&be->mem, x);
    lin_bwd(m, da->h1r, g->hyp_w[2], g->hyp_b[2], da->hyp, a->h1r, p->hyp_w[2], NP, C, C / 8);
    o->relu_backward(be, da->h1, da->h1r, a->h1, (size_t)NP * C);
    lin_bwd(m, da->h0r, g->hyp_w[1], g->hyp_b[1], da->h1, a->h0r, p->hyp_w[1], NP, C, C);
    o->relu_backward(be, da->h0, da->h0r, a->h0, (size_t)NP * C);
    lin_bwd(m, da->tmask, g->hyp_w[0], g->hyp_b[0], da->h0, a->tmask, p->hyp_w[0], NP, C, C);
    o->rows_scatter_add(be, da->tf, da->tmask, NP, T, C, 1);
    /* upscaling */
    const float *Kc = a->lay[c->D - 1].kout;
    float *dKc = da->lay[c->D - 1].kout, *dTc = da->lay[c->D - 1].t3;
    x = t16 ? tail_ws(m, 3, p0, NP, 1) : NULL;
    o->gelu_backward(be, da->up2, da->U, t16 ? x : a->up2, (size_t)NP * RR * (C / 8));
    tr_mem_free(&be->mem, x);
    o->zero(be, da->upgelu, nUp); /* the buffers alternate: each zeroed before it accumulates */
    x = t16 ? tail_ws(m, 2, p0, NP, 1) : NULL;
    convt_bwd(m, da->upgelu, g->up2_w, g->up2_b, da->up2, t16 ? x : a->upgelu, p->up2_w, da->up_scratch, NP, 2 * G,
              2 * G, C / 4, C / 8);
    tr_mem_free(&be->mem, x);
    o->zero(be, da->upln, nUp);
    x = t16 ? tail_ws(m, 1, p0, NP, 1) : NULL;
    o->gelu_backward(be, da->upln, da->upgelu, t16 ? x : a->upln, (size_t)NP * 4 * GG * (C / 4));
    tr_mem_free(&be->mem, x);
    o->zero(be, da->up1, nUp);
    x = t16 ? tail_ws(m, 0, p0, NP, 1) : NULL;
    ln_bwd(m, da->up1, g->upln_w, g->upln_b, da->upln, t16 ? x : a->up1, p->upln_w, p->upln_b, a->upln_m,
           a->upln_r, NP * 4 * GG, C / 4, 1e-6f);
    tr_mem_free(&be->mem, x);
    convt_bwd(m, dKc, g->up1_w, g->up1_b, da->up1, Kc, p->up1_w, da->up_scratch, NP, G, G, C, C / 4);
    /* final token-to-image attention */
    o->zero(be, da->pp_u[0], (size_t)(da->fin.out - da->pp_u[0]) + nT);
    o->zero(be, da->pp_u[1], (size_t)(da->fin_qin - da->pp_u[1]) + nT);
    ln_bwd(m, da->tfpre, g->fin_n_w, g->fin_n_b, da->tf, a->tfpre, p->fin_n_w, p->fin_n_b, a->fin_m, a->fin_r,
           NP * T, C, 1e-5f);
    o->accumulate(be, dTc, da->tfpre, nT);
    o->accumulate(be, da->fin.out, da->tfpre, nT);
    ablock_backward(m, &p->fin, &g->fin, &a->fin, &da->fin, a->fin_qin, a->fin_kin, Kc, da->fin_qin, da->fin_kin,
                    dKc, NP, T, GG, C, C / 2, c->h);
    o->accumulate(be, dTc, da->fin_qin, nT);
    o->accumulate(be, da->T0, da->fin_qin, nT);
    o->accumulate(be, dKc, da->fin_kin, nK);
    /* decoder layers in reverse; one shared gradient set, zeroed per layer */
    for (int l = c->D - 1; l >= 0; l--) {
        const tr_dec_layer_a *L = &a->lay[l];
        tr_dec_layer_a *dL = &da->lay[l];
        const tr_dec_layer_p *pl = &p->lay[l];
        tr_dec_layer_p *gl = &g->lay[l];
        const float *Tin = l == 0 ? a->T0 : a->lay[l - 1].t3, *Kin = l == 0 ? a->Kimg : a->lay[l - 1].kout;
        float *dTin = l == 0 ? da->T0 : da->lay[l - 1].t3, *dKin = l == 0 ? da->Kimg : da->lay[l - 1].kout;
        o->zero(be, m->dact_mem + m->dlay_off, m->dlay_n); /* shares the union region */
        if (l > 0) {
            o->zero(be, dTin, nT);
            o->zero(be, dKin, nK);
        }
        /* 4: image to tokens */
        ln_bwd(m, dL->k4pre, gl->n4_w, gl->n4_b, dL->kout, L->k4pre, pl->n4_w, pl->n4_b, L->n4_m, L->n4_r,
               NP * GG, C, 1e-5f);
        o->accumulate(be, dKin, dL->k4pre, nK);
        o->accumulate(be, dL->i2t.out, dL->k4pre, nK);
        ablock_backward(m, &pl->i2t, &gl->i2t, &L->i2t, &dL->i2t, L->kpe, L->i2t_kin, L->t3, dL->kpe,
                        dL->i2t_kin, dL->t3, NP, GG, T, C, C / 2, c->h);
        o->accumulate(be, dL->t3, dL->i2t_kin, nT);
        o->accumulate(be, da->T0, dL->i2t_kin, nT);
        /* 3: MLP */
        ln_bwd(m, dL->t3pre, gl->n3_w, gl->n3_b, dL->t3, L->t3pre, pl->n3_w, pl->n3_b, L->n3_m, L->n3_r,
               NP * T, C, 1e-5f);
        o->accumulate(be, dL->t2, dL->t3pre, nT);
        lin_bwd(m, dL->relu, gl->fc2_w, gl->fc2_b, dL->t3pre, L->relu, pl->fc2_w, NP * T, 8 * C, C);
        o->relu_backward(be, dL->fc1, dL->relu, L->fc1, (size_t)NP * T * 8 * C);
        lin_bwd(m, dL->t2, gl->fc1_w, gl->fc1_b, dL->fc1, L->t2, pl->fc1_w, NP * T, C, 8 * C);
        /* 2: tokens to image */
        ln_bwd(m, dL->t2pre, gl->n2_w, gl->n2_b, dL->t2, L->t2pre, pl->n2_w, pl->n2_b, L->n2_m, L->n2_r,
               NP * T, C, 1e-5f);
        o->accumulate(be, dL->t1, dL->t2pre, nT);
        o->accumulate(be, dL->t2i.out, dL->t2pre, nT);
        ablock_backward(m, &pl->t2i, &gl->t2i, &L->t2i, &dL->t2i, L->t2i_qin, L->kpe, Kin, dL->t2i_qin, dL->kpe,
                        dKin, NP, T, GG, C, C / 2, c->h);
        o->accumulate(be, dKin, dL->kpe, nK);
        o->accumulate(be, dL->t1, dL->t2i_qin, nT);
        o->accumulate(be, da->T0, dL->t2i_qin, nT);
        /* 1: self attention */
        if (l == 0) {
            ln_bwd(m, dL->sa.out, gl->n1_w, gl->n1_b, dL->t1, L->sa.out, pl->n1_w, pl->n1_b, L->n1_m, L->n1_r,
                   NP * T, C, 1e-5f);
            ablock_backward(m, &pl->sa, &gl->sa, &L->sa, &dL->sa, Tin, Tin, Tin, dTin, dTin, dTin, NP, T, T, C,
                            C, c->h);
        } else {
            ln_bwd(m, dL->t1pre, gl->n1_w, gl->n1_b, dL->t1, L->t1pre, pl->n1_w, pl->n1_b, L->n1_m, L->n1_r,
                   NP * T, C, 1e-5f);
            o->accumulate(be, dTin, dL->t1pre, nT);
            o->accumulate(be, dL->sa.out, dL->t1pre, nT);
            ablock_backward(m, &pl->sa, &gl->sa, &L->sa, &dL->sa, L->sa_qin, L->sa_qin, Tin, dL->sa_qin,
                            dL->sa_qin, dTin, NP, T, T, C, C, c->h);
            o->accumulate(be, dTin, dL->sa_qin, nT);
            o->accumulate(be, da->T0, dL->sa_qin, nT);
        }
    }
    /* prompt tokens and image keys of the chunk */
    o->prompt_tokens_backward(be, g->label_emb, g->not_a_point, g->iou_token, g->mask_token, da->T0,
                              b->labels + p0 * (size_t)K, NP, K, C);
    keys_chunk_backward(m, p0, NP, lo <= c->L);
}

/* The loss of chunk ci (the view on it): its gradients those of the batch's
 * loss (scale * the flat mean over n_valid pairs, or scale * the sum when
 * sum), its means summed into acc weighted by its valid pairs.  Returns
 * its count of valid pairs. */
static int dec_chunk_loss(tr_model *m, const tr_batch *b, int ci, float scale, int sum, int n_valid, tr_loss *acc)
{
    tr_backend *be = m->be;
    int G = m->cfg.S / m->cfg.P, RR = 16 * G * G;
    size_t p0;
    int NP = chunk_pairs(m, ci, &p0);
    if (m->logits_stash != TR_NO_STASH) /* 16-bit storage: the chunk's logits unpacked */
        st_unpack(m, m->a.logits, m->logits_stash + p0 * (size_t)RR, (size_t)NP * RR);
    be->loss_scale = sum ? scale * (float)n_valid : scale;
    be->loss_count = n_valid;
    tr_loss L = be->ops->sam_loss(be, m->da.logits, m->da.iou, m->a.logits, m->a.iou, b->masks + p0 * (size_t)RR,
                                  b->valid + p0, NP, RR);
    be->loss_scale = 1.0f;
    be->loss_count = 0;
    acc->focal += L.focal * L.n_valid, acc->dice += L.dice * L.n_valid, acc->iou_mse += L.iou_mse * L.n_valid;
    acc->miou += L.miou * L.n_valid, acc->n_valid += L.n_valid;
    return L.n_valid;
}

/* The batch's means from the sums of dec_chunk_loss. */
static tr_loss loss_means(tr_loss acc)
{
    if (acc.n_valid) {
        acc.focal /= acc.n_valid, acc.dice /= acc.n_valid, acc.iou_mse /= acc.n_valid, acc.miou /= acc.n_valid;
        acc.loss = 20.0 * acc.focal + acc.dice + acc.iou_mse;
    }
    return acc;
}

/* Zeroes the gradients (parameters when zero_grads, activations) before a
 * backward; returns the batch's count of valid pairs. */
static int backward_begin(tr_model *m, const tr_batch *b, int zero_grads)
{
    tr_backend *be = m->be;
    be->prec = m->opt.precision;
    if (zero_grads && m->grad_mem) be->ops->zero(be, m->grad_mem, m->n_grad_floats);
    be->ops->zero(be, m->dact_mem, m->n_dact_floats);
    if (m->demb_stash != TR_NO_STASH) { /* emb's gradient, in the stash */
        size_t GGC = (size_t)(m->cfg.S / m->cfg.P) * (size_t)(m->cfg.S / m->cfg.P) * (size_t)m->cfg.C;
        if (m->pop) { /* per-op storage: zeroed through emb_rows' window */
            for (int i = 0; i < m->B; i++) {
                m->st_emb = m->demb_stash + (size_t)i * GGC;
                be->ops->zero(be, m->a.emb_rows, GGC);
            }
        } else {
            be->ops->zero(be, m->a.emb_rows, GGC);
            for (int i = 0; i < m->B; i++) st_pack(m, m->demb_stash + (size_t)i * GGC, m->a.emb_rows, GGC);
        }
    }
    int n_valid = 0;
    for (int i = 0; i < m->B * m->M; i++) n_valid += b->valid[i] ? 1 : 0;
    /* the planner's batches hold no data (zeros): every pair counts there, so
     * that the backward runs as in a real step (the meta sam_loss says so too) */
    return be->mem.counting_only ? m->B * m->M : n_valid;
}

/* The backward below the image embedding: neck, encoder blocks image by
 * image, patch embedding (as far down as something is trainable). */
static void enc_backward(tr_model *m, const tr_batch *b)
{
    tr_backend *be = m->be;
    const tr_ops *o = be->ops;
    const tr_config *c = &m->cfg;
    const tr_params *p = &m->p;
    tr_params *g = &m->g;
    const tr_acts *a = &m->a;
    tr_acts *da = &m->da;
    int S = c->S, P = c->P, G = S / P, GG = G * G, E = c->E, C = c->C, B = m->B, K = m->K;
    int BT = B * GG;
    int lo = m->enc_lo;
    (void)K;
    if (lo > c->L) return;
    /* neck (every image), then the encoder image by image */
    float *dxl = lo == c->L ? NULL : c->L ? da->enc_out : da->x0;
    size_t btc = (size_t)BT * C;
    float *dneck = da->neck;
    if (m->demb_stash != TR_NO_STASH) { /* 16-bit storage: the operands unpacked for this op */
        float *demb = work_alloc(m, btc), *neck = work_alloc(m, btc);
        dneck = work_alloc(m, btc);
        st_unpack(m, demb, m->demb_stash, btc);
        st_unpack(m, neck, m->neck_stash, btc);
        o->zero(be, dneck, btc);
        ln_bwd(m, dneck, g->neck_ln_w, g->neck_ln_b, demb, neck, p->neck_ln_w, p->neck_ln_b, a->emb_m,
               a->emb_r, BT, C, 1e-6f);
        tr_mem_free(&be->mem, demb);
        tr_mem_free(&be->mem, neck);
    } else {
        ln_bwd(m, da->neck, g->neck_ln_w, g->neck_ln_b, da->emb, a->neck, p->neck_ln_w, p->neck_ln_b, a->emb_m,
               a->emb_r, BT, C, 1e-6f);
    }
    if (m->dxl_stash != TR_NO_STASH) { /* 16-bit storage: dx through a workspace into the stash, then dw */
        size_t bte = (size_t)BT * E;
        float *dx = work_alloc(m, bte);
        o->zero(be, dx, bte);
        lin_bwd(m, dx, NULL, NULL, dneck, NULL, p->neck_w, BT, E, C);
        st_pack(m, m->dxl_stash, dx, bte);
        tr_mem_free(&be->mem, dx);
        dxl = NULL;
    }
    float *xw = c->L && enc_stashed(m, c->L - 1) ? enc_out_gather(m) : NULL;
    const float *xl = c->L ? (a->enc_out ? a->enc_out : xw ? xw : a->blk[c->L - 1].xout) : a->x0;
    lin_bwd(m, dxl, g->neck_w, NULL, dneck, xl, p->neck_w, BT, E, C);
    tr_mem_free(&be->mem, xw);
    if (dneck != da->neck) tr_mem_free(&be->mem, dneck);
    size_t GE = (size_t)GG * E;
    for (int bi = B - 1; bi >= 0 && lo < c->L; bi--) {
        for (int i = c->L - 1; i >= 0 && i >= lo; i--) {
            enc_restore(m, i, bi);
            const tr_enc_block_a *ab = &a->blk[i];
            tr_enc_block_a *db = &da->blk[i];
            const tr_enc_block_p *pb = &p->blk[i];
            tr_enc_block_p *gb = &g->blk[i];
            const float *xin = enc_input(m, i, bi);
            if (i > 0 && !a->enc_in[i] && enc_stashed(m, i - 1) && !m->pop) { /* the predecessor's output,
                                                                                  from its stash */
                enc_xout_get(m, i - 1, bi, a->enc_xin);
                xin = a->enc_xin;
            }
            float *dxout = i < c->L - 1 ? db->xout : da->enc_out ? da->enc_out + (size_t)bi * GE : da->pp_x[i % 2];
            if (i == c->L - 1 && m->dxl_stash != TR_NO_STASH) /* (pp_x[i % 2] is free: the last block's) */
                st_unpack(m, dxout, m->dxl_stash + (size_t)bi * GE, GE);
            /* x0's gradient: in the stash with 16-bit storage (through pp_x[1], free
             * during block 0's backward) */
            int dx16 = i == 0 && m->dx0_stash != TR_NO_STASH;
            float *dxin = i > 0 ? (i > lo ? da->blk[i - 1].xout : NULL)
                                : (lo < 0 ? (dx16 ? da->pp_x[1] : da->x0 + (size_t)bi * GE) : NULL);
            o->zero(be, m->dact_mem + m->dblk_off, m->dblk_n); /* shares the union region */
            if (dxin && (i > 0 || dx16)) o->zero(be, dxin, GE);
            o->accumulate(be, db->xmid, dxout, GE);
            lin_bwd(m, db->gelu, gb->fc2_w, gb->fc2_b, dxout, ab->gelu, pb->fc2_w, GG, 4 * E, E);
            o->gelu_backward(be, db->fc1, db->gelu, ab->fc1, GE * 4);
            lin_bwd(m, db->ln2, gb->fc1_w, gb->fc1_b, db->fc1, ab->ln2, pb->fc1_w, GG, E, 4 * E);
            ln_bwd(m, db->xmid, gb->ln2_w, gb->ln2_b, db->ln2, ab->xmid, pb->ln2_w, pb->ln2_b, ab->ln2_m,
                   ab->ln2_r, GG, E, 1e-6f);
            if (dxin) o->accumulate(be, dxin, db->xmid, GE);
            lin_bwd(m, db->ao, gb->proj_w, gb->proj_b, db->xmid, ab->ao, pb->proj_w, GG, E, E);
            tr_attn_dims d = {.N = 1, .Tq = GG, .Tk = GG, .heads = c->H, .dh = E / c->H, .ldq = 3 * E,
                              .ldk = 3 * E, .ldv = 3 * E, .ldo = E, .sq = (size_t)GG * 3 * E,
                              .sk = (size_t)GG * 3 * E, .sv = (size_t)GG * 3 * E, .so = (size_t)GG * E};
            o->attention_backward(be, db->qkv, db->qkv + E, db->qkv + 2 * E, db->ao, ab->qkv, ab->qkv + E,
                                  ab->qkv + 2 * E, ab->att, &d);
            lin_bwd(m, db->ln1, gb->qkv_w, gb->qkv_b, db->qkv, ab->ln1, pb->qkv_w, GG, E, 3 * E);
            ln_bwd(m, dxin, gb->ln1_w, gb->ln1_b, db->ln1, xin, pb->ln1_w, pb->ln1_b, ab->ln1_m, ab->ln1_r, GG,
                   E, 1e-6f);
            if (dx16 && o->pack16)
                o->pack16(be, m->stash_mem + m->dx0_stash + (size_t)bi * GE, dxin, GE, m->opt.precision);
        }
    }
    enc_view(m, 0);
    if (lo >= 0) return;
    if (m->dx0_stash != TR_NO_STASH) { /* image by image from the stash, the same sums in the same order */
        float *dx = da->pp_x[1];
        for (int i = 0; i < B; i++) {
            if (o->unpack16) o->unpack16(be, dx, m->stash_mem + m->dx0_stash + (size_t)i * GE, GE, m->opt.precision);
            if (g->pos) {
                be->prec = TR_PREC_FP32;
                o->accumulate(be, g->pos, dx, GE);
                be->prec = m->opt.precision;
            }
            o->patch_im2col(be, a->patches, b->image + (size_t)i * S * S * 3, b->content + 2 * i, 1, S, P);
            lin_bwd(m, NULL, g->patch_w, g->patch_b, dx, a->patches, p->patch_w, GG, 3 * P * P, E);
        }
        return;
    }
    if (g->pos) {
        be->prec = TR_PREC_FP32; /* a parameter gradient: accumulated in fp32 */
        for (int i = 0; i < B; i++) o->accumulate(be, g->pos, da->x0 + (size_t)i * GG * E, (size_t)GG * E);
        be->prec = m->opt.precision;
    }
    for (int i = 0; i < B; i++) {
        o->patch_im2col(be, a->patches, b->image + (size_t)i * S * S * 3, b->content + 2 * i, 1, S, P);
        lin_bwd(m, NULL, g->patch_w, g->patch_b, da->x0 + (size_t)i * GG * E, a->patches, p->patch_w,
                           GG, 3 * P * P, E);
    }
}

tr_loss tr_model_backward_acc(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum)
{
    tr_loss acc = {0};
    int st = stage_begin(m);
    int n_valid = backward_begin(m, b, zero_grads);
    if (n_valid == 0) return stage_end(m, st), acc; /* every gradient 0 */
    for (int ci = m->n_chunks - 1; ci >= 0; ci--) { /* the resident chunk first */
        dec_view(m, ci);
        if (!dec_chunk_loss(m, b, ci, scale, sum, n_valid, &acc)) continue; /* its gradients are 0 */
        dec_restore(m, b, ci);
        dec_chunk_backward(m, b, ci);
    }
    dec_view(m, 0);
    enc_backward(m, b);
    stage_end(m, st);
    return loss_means(acc);
}

int tr_model_step(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum, tr_loss *loss, char *err,
                  size_t err_len)
{
    if (!m->opt.ckpt_decoder) { /* (per-op storage: each stages its ops) */
        if (tr_model_forward(m, b, err, err_len) < 0) return -1;
        *loss = tr_model_backward_acc(m, b, zero_grads, scale, sum);
        return 0;
    }
    /* the decoder's forward and backward chunk by chunk (what
     * tr_model_backward_acc does after recomputing each chunk) */
    int st = stage_begin(m);
    if (forward_encoder(m, b, err, err_len) < 0) return stage_end(m, st), -1;
    tr_loss acc = {0};
    int n_valid = backward_begin(m, b, zero_grads);
    for (int ci = m->n_chunks - 1; ci >= 0; ci--) { /* the order of tr_model_backward_acc */
        dec_chunk_forward(m, b, ci, 1);
        if (n_valid && dec_chunk_loss(m, b, ci, scale, sum, n_valid, &acc)) dec_chunk_backward(m, b, ci);
    }
    dec_view(m, 0);
    if (n_valid) enc_backward(m, b);
    stage_end(m, st);
    *loss = loss_means(acc);
    return 0;
}

void tr_model_get_logits(const tr_model *m, float *dst)
{
    tr_backend *be = m->be;
    size_t nl = (size_t)m->B * (size_t)m->M * 16 * (size_t)(m->cfg.S / m->cfg.P) * (size_t)(m->cfg.S / m->cfg.P);
    if (m->logits_stash == TR_NO_STASH)
        mcopy(be, dst, m->a.logits, nl);
    else if (be->ops->unpack16)
        be->ops->unpack16(be, dst, m->stash_mem + m->logits_stash, nl, m->opt.precision);
}

double tr_model_flops(const tr_model *m)
{
    const tr_config *c = &m->cfg;
    double G = c->S / c->P, GG = G * G, E = c->E, C = c->C, B = m->B, NP = B * m->M, T = m->K + 2;
    double R = 4 * G, RR = R * R, PP3 = 3.0 * c->P * c->P;
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
