/*
 * model_layout.c - the model's activation table and memory layout for a
 * batch geometry and training options (what model.h describes under
 * "Memory layout"), and the model's lifetime: init, options, batch, free.
 */
#include "model_layout.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- activation table ----------------------------------------------------------- */

typedef struct awalker {
    tr_model *m;
    size_t off, doff; /* 4-byte units laid out so far in act_mem / dact_mem */
    int n, cap;
    int uni;                 /* 1: in_d gradients go to the union region */
    size_t ubase, uoff, umax; /* union region: start in dact_mem, group offset, size */
    size_t pa, pd;           /* decoder tensors: pairs laid out in act_mem / dact_mem */
    int nview;               /* decoder tensors that move with the chunk so far */
    int f32;                 /* 1: the tensors registered now are fp32 (LayerNorm statistics,
                                the ConvTranspose's scratch), else of the activations' type */
} awalker;

/* Bytes per element of what the walker registers now. */
static size_t w_esz(const awalker *w) { return w->f32 ? sizeof(float) : mdl_esz(w->m); }

/* 4-byte units of count elements, rounded up to 16 (64-byte aligned tensors). */
static size_t w_units(const awalker *w, size_t count) { return mdl_r16((count * w_esz(w) + 3) / 4); }

/* Registers an activation: its forward tensor of count_a elements in
 * act_mem when in_a, its gradient of count_d elements in dact_mem when
 * in_d (fields of m->a / m->da alike). */
static void areg3(awalker *w, void *field, const char *name, size_t count_a, size_t count_d, int in_a, int in_d)
{
    tr_model *m = w->m;
    if (in_a) {
        if (w->n < w->cap) {
            tr_act_info *ai = &m->ainfo[w->n];
            snprintf(ai->name, sizeof ai->name, "%s", name);
            ai->ptr = field;
            ai->count = count_a;
            ai->dt = w->f32 ? TR_PREC_FP32 : m->adt;
        }
        if (m->act_mem) *(void **)field = m->act_mem + w->off;
        w->off += w_units(w, count_a);
        w->n++;
    }
    if (in_d) {
        size_t r = w_units(w, count_d);
        void **df = (void **)((char *)&m->da + ((char *)field - (char *)&m->a));
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

static void areg2(awalker *w, void *field, const char *name, size_t count, int in_a, int in_d)
{
    areg3(w, field, name, count, count, in_a, in_d);
}

/* Records that the field (of m->a, or of m->da when grad) holds every pair,
 * per elements each: tr_model.dview. */
static void dview_add(awalker *w, void *field, int kind, int grad, size_t per)
{
    tr_model *m = w->m;
    if (m->dview && w->nview < m->n_dview) {
        tr_dview *v = &m->dview[w->nview];
        v->kind = kind;
        v->off = (size_t)((char *)field - (char *)&m->a);
        v->grad = grad;
        v->base = *(char **)((char *)(grad ? &m->da : &m->a) + v->off);
        v->per = per * w_esz(w);
    }
    w->nview++;
}

/* Registers a decoder tensor of per elements per pair: w->pa pairs in
 * act_mem, w->pd pairs in dact_mem. */
static void dreg(awalker *w, void *field, const char *name, size_t per, int in_a, int in_d)
{
    tr_model *m = w->m;
    size_t NP = (size_t)m->B * (size_t)m->M;
    areg3(w, field, name, per * w->pa, per * w->pd, in_a, in_d);
    if (m->n_chunks > 1 && in_a && w->pa == NP) dview_add(w, field, 0, 0, per);
    if (m->n_chunks > 1 && in_d && w->pd == NP) dview_add(w, field, 0, 1, per);
}

/* Registers an encoder block tensor of per elements per image: for every
 * image (all 1) or one pass; its gradient (in_d) for one pass. */
static void ereg(awalker *w, void *field, const char *name, size_t per, int all, int in_a, int in_d)
{
    tr_model *m = w->m;
    size_t ni = (size_t)m->enc_ni;
    areg3(w, field, name, per * (all ? (size_t)m->B : ni), per * ni, in_a, in_d);
    if ((size_t)m->B > ni && in_a && all) dview_add(w, field, 1, 0, per * ni);
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

/* Gradients of the decoder tail (final attention, upscaling) in two
 * buffers X, Y used alternately: U X, up2 Y, upgelu X, upln Y, up1 X, then
 * the final attention's q, k, v, ao, out in X and fin_kin, fin_qin in Y.
 * Sets the pointers in da when da is not NULL (X, Y in da->pp_u); their
 * sizes in elements (for one chunk of pairs) into *nx, *ny. */
static void tail_grads(const tr_model *m, tr_acts *da, size_t *nx, size_t *ny)
{
    size_t GG = (size_t)m->geom.GG, RR = (size_t)m->geom.RR, C = (size_t)m->cfg.C, NP = (size_t)m->dec_chunk;
    size_t T = (size_t)m->geom.T, up = mdl_r16(NP * RR * (C / 8)), o = 0;
    void *X = da ? da->pp_u[0] : NULL, *Y = da ? da->pp_u[1] : NULL;
    if (da) {
        da->U = da->upgelu = da->up1 = X;
        da->up2 = da->upln = Y;
        da->fin.q = X;
        da->fin.att = NULL;
    }
    o += mdl_r16(NP * T * (C / 2));
    if (da) da->fin.k = mdl_at(m, X, o);
    o += mdl_r16(NP * GG * (C / 2));
    if (da) da->fin.v = mdl_at(m, X, o);
    o += mdl_r16(NP * GG * (C / 2));
    if (da) da->fin.ao = mdl_at(m, X, o);
    o += mdl_r16(NP * T * (C / 2));
    if (da) da->fin.out = mdl_at(m, X, o);
    o += mdl_r16(NP * T * C);
    *nx = o > up ? o : up;
    if (da) da->fin_kin = Y, da->fin_qin = mdl_at(m, Y, mdl_r16(NP * GG * C));
    o = mdl_r16(NP * GG * C) + mdl_r16(NP * T * C);
    *ny = o > up ? o : up;
}

/* ---- the activation table ---------------------------------------------------------
 *
 * The tensors of an encoder block and of a decoder layer (llm.c's
 * activation sizes, as a table): each row a field, its elements per image
 * (encoder) or per pair (decoder) as tokens x width, and what it has:
 * R_STAT, an fp32 LayerNorm statistic (stored, or recomputed with 16-bit
 * storage); R_GRAD, a gradient tensor (in the block's or layer's shared
 * gradient set); R_NOACT, a gradient only (the forward's tensor is another
 * one's: i2t.out is k4pre).  Widths: WIDTH_ATT is the attention's saved
 * elements per head (the backend's: tr_sizes.attention_saved) times the
 * decoder's h heads, for tokens queries over the row's keys; WIDTH_EATT
 * the same for the encoder's H heads. */
enum { TOK_1, TOK_GG, TOK_T };
enum { WIDTH_1, WIDTH_E, WIDTH_3E, WIDTH_4E, WIDTH_C, WIDTH_C2, WIDTH_8C, WIDTH_ATT, WIDTH_EATT };
enum { R_STAT = 1, R_GRAD = 2, R_NOACT = 4 };

typedef struct act_row {
    const char *name;
    size_t off;            /* offsetof the field in its struct */
    int tok, width, keys;  /* keys: the attention's key tokens (WIDTH_ATT) */
    int flags;
} act_row;

#define EB(f, tok, width, flags) {#f, offsetof(tr_enc_block_a, f), tok, width, 0, flags}
static const act_row enc_block_rows[] = {
    EB(ln1_m, TOK_GG, WIDTH_1, R_STAT), EB(ln1_r, TOK_GG, WIDTH_1, R_STAT),
    EB(ln2_m, TOK_GG, WIDTH_1, R_STAT), EB(ln2_r, TOK_GG, WIDTH_1, R_STAT),
    EB(ln1, TOK_GG, WIDTH_E, R_GRAD),   EB(qkv, TOK_GG, WIDTH_3E, R_GRAD),
    {"att", offsetof(tr_enc_block_a, att), TOK_GG, WIDTH_EATT, TOK_GG, 0},
    EB(ao, TOK_GG, WIDTH_E, R_GRAD),    EB(xmid, TOK_GG, WIDTH_E, R_GRAD),
    EB(ln2, TOK_GG, WIDTH_E, R_GRAD),   EB(fc1, TOK_GG, WIDTH_4E, R_GRAD),
    EB(gelu, TOK_GG, WIDTH_4E, R_GRAD), EB(xout, TOK_GG, WIDTH_E, 0),
};
#undef EB

#define DL(f, tok, width, flags) {#f, offsetof(tr_dec_layer_a, f), tok, width, 0, flags}
#define DA(a, f, tok, width, keys, flags) {#a "." #f, offsetof(tr_dec_layer_a, a.f), tok, width, keys, flags}
/* (the statistics, for every pair unless recomputed, come first: dec_layer_stats) */
static const act_row dec_layer_stats[] = {
    DL(n1_m, TOK_T, WIDTH_1, R_STAT), DL(n1_r, TOK_T, WIDTH_1, R_STAT),  DL(n2_m, TOK_T, WIDTH_1, R_STAT),
    DL(n2_r, TOK_T, WIDTH_1, R_STAT), DL(n3_m, TOK_T, WIDTH_1, R_STAT),  DL(n3_r, TOK_T, WIDTH_1, R_STAT),
    DL(n4_m, TOK_GG, WIDTH_1, R_STAT), DL(n4_r, TOK_GG, WIDTH_1, R_STAT),
};
static const act_row dec_layer_rows[] = {
    DL(sa_qin, TOK_T, WIDTH_C, R_GRAD),
    DA(sa, q, TOK_T, WIDTH_C, 0, R_GRAD), DA(sa, k, TOK_T, WIDTH_C, 0, R_GRAD),
    DA(sa, v, TOK_T, WIDTH_C, 0, R_GRAD), DA(sa, att, TOK_T, WIDTH_ATT, TOK_T, 0),
    DA(sa, ao, TOK_T, WIDTH_C, 0, R_GRAD), DA(sa, out, TOK_T, WIDTH_C, 0, R_GRAD),
    DL(t1pre, TOK_T, WIDTH_C, R_GRAD),    DL(t1, TOK_T, WIDTH_C, R_GRAD),
    DL(t2i_qin, TOK_T, WIDTH_C, R_GRAD),  DL(kpe, TOK_GG, WIDTH_C, R_GRAD),
    DA(t2i, q, TOK_T, WIDTH_C2, 0, R_GRAD), DA(t2i, k, TOK_GG, WIDTH_C2, 0, R_GRAD),
    DA(t2i, v, TOK_GG, WIDTH_C2, 0, R_GRAD), DA(t2i, att, TOK_T, WIDTH_ATT, TOK_GG, 0),
    DA(t2i, ao, TOK_T, WIDTH_C2, 0, R_GRAD), DA(t2i, out, TOK_T, WIDTH_C, 0, R_GRAD),
    DL(t2pre, TOK_T, WIDTH_C, R_GRAD),    DL(t2, TOK_T, WIDTH_C, R_GRAD),
    DL(fc1, TOK_T, WIDTH_8C, R_GRAD),     DL(relu, TOK_T, WIDTH_8C, R_GRAD),
    DL(t3pre, TOK_T, WIDTH_C, R_GRAD),    DL(i2t_kin, TOK_T, WIDTH_C, R_GRAD),
    DA(i2t, q, TOK_GG, WIDTH_C2, 0, R_GRAD), DA(i2t, k, TOK_T, WIDTH_C2, 0, R_GRAD),
    DA(i2t, v, TOK_T, WIDTH_C2, 0, R_GRAD), DA(i2t, att, TOK_GG, WIDTH_ATT, TOK_T, 0),
    DA(i2t, ao, TOK_GG, WIDTH_C2, 0, R_GRAD), DA(i2t, out, TOK_GG, WIDTH_C, 0, R_GRAD | R_NOACT),
    DL(k4pre, TOK_GG, WIDTH_C, R_GRAD),   DL(t3, TOK_T, WIDTH_C, 0),
    DL(kout, TOK_GG, WIDTH_C, 0),
};
#undef DL
#undef DA

/* Elements of a row per image (encoder) or pair (decoder). */
static size_t row_size(const tr_model *m, const act_row *r)
{
    const tr_config *c = &m->cfg;
    size_t GG = (size_t)m->geom.GG, T = (size_t)m->geom.T, E = (size_t)c->E;
    size_t C = (size_t)c->C, tok[3] = {1, GG, T};
    size_t width[7] = {1, E, 3 * E, 4 * E, C, C / 2, 8 * C};
    if (r->width == WIDTH_ATT || r->width == WIDTH_EATT)
        return (size_t)(r->width == WIDTH_ATT ? c->h : c->H) * m->be->sizes->attention_saved(tok[r->tok], tok[r->keys]);
    return tok[r->tok] * width[r->width];
}

static void walk_acts(awalker *w)
{
    tr_model *m = w->m;
    const tr_config *c = &m->cfg;
    tr_acts *a = &m->a;
    const tr_geom *gm = &m->geom;
    size_t GG = (size_t)gm->GG, B = (size_t)m->B, BT = B * GG, E = (size_t)c->E;
    size_t C = (size_t)c->C, NP = B * (size_t)m->M, T = (size_t)gm->T, RR = (size_t)gm->RR;
    size_t PP3 = (size_t)gm->PP3, h = (size_t)c->h;
    int L = c->L, D = c->D, N = m->opt.ckpt_every;
    int lo = m->enc_lo < 0 ? 0 : m->enc_lo; /* blocks lo.. have a backward */
    char nm[48];
    /* LayerNorm statistics: stored (fp32), or with 16-bit storage recomputed
     * in the backward (ln_bwd) unless the options ask to keep them */
    int lnst = m->adt == TR_PREC_FP32 || m->opt.keep_ln_stats;
    /* one image's patches, made again for the backward: a workspace in the
     * union region (which holds no gradient during the encoder's forward
     * nor after its blocks' backward) */
    ugroup(w, 1);
    size_t ni = (size_t)m->enc_ni;
    areg2(w, &a->patches, "enc.patches", ni * GG * PP3, 0, 1);
    ugroup(w, 0);
    areg2(w, &a->x0, "enc.x0", BT * E, 1, 1);
    for (int i = 0; i < L; i++) m->enc_slot[i] = N ? i % N : i < lo ? 0 : -1;
    m->dblk_n = 0;
    for (int i = 0; i < L; i++) { /* every block's rows (the lowest trainable one: the shared gradients) */
        int s = m->enc_slot[i], own = s < 0 || s == i, dsh = i == lo, all = s < 0;
        if (dsh) ugroup(w, 1), m->dblk_off = w->ubase;
        for (size_t r = 0; r < sizeof enc_block_rows / sizeof *enc_block_rows; r++) {
            const act_row *row = &enc_block_rows[r];
            void *field = (char *)&a->blk[i] + row->off;
            int st = row->flags & R_STAT; /* (16-bit storage: recomputed in the backward, ln_bwd) */
            snprintf(nm, sizeof nm, "enc.blocks.%d.%s", i, row->name);
            w->f32 = st;
            ereg(w, field, nm, row_size(m, row), st || all, st ? lnst : own, dsh && (row->flags & R_GRAD));
            w->f32 = 0;
        }
        if (dsh) m->dblk_n = w->uoff, ugroup(w, 0);
    }
    /* saved block inputs: the checkpoints, or the input of the lowest
     * trainable block when its predecessor computes in a slot (frozen);
     * blocks below lo need none */
    for (int i = 1; i < L; i++) {
        snprintf(nm, sizeof nm, "enc.blocks.%d.input", i);
        areg2(w, &a->enc_in[i], nm, BT * E, N ? i % N == 0 : i == lo && m->enc_slot[i - 1] >= 0, 0);
    }
    if (L > 0)
        areg3(w, &a->enc_out, "enc.output", BT * E, BT * E, m->enc_slot[L - 1] >= 0, lo < L);
    for (int k = 0; k < 2; k++) areg2(w, &a->pp_x[k], "enc.grad_x", ni * GG * E, 0, lo < L);
    areg2(w, &a->neck, "enc.neck", BT * C, 1, 1);
    areg2(w, &a->emb, "enc.emb", BT * C, 1, 1);
    w->f32 = 1;
    areg2(w, &a->emb_m, "enc.emb_m", BT, lnst, 1);
    areg2(w, &a->emb_r, "enc.emb_r", BT, lnst, 1);
    w->f32 = 0;
    areg2(w, &a->dense_pe, "prompt.dense_pe", GG * C, 1, 0);
    /* the decoder, per chunk of nc pairs; LayerNorm statistics first (fp32,
     * for every pair unless recomputed) */
    size_t nc = (size_t)m->dec_chunk;
    m->dec_full = !m->opt.ckpt_decoder;
    w->pa = m->opt.ckpt_decoder ? nc : NP, w->pd = nc;
    w->f32 = 1;
    for (int l = 0; l < D; l++)
        for (size_t r = 0; r < sizeof dec_layer_stats / sizeof *dec_layer_stats; r++) {
            const act_row *row = &dec_layer_stats[r];
            snprintf(nm, sizeof nm, "dec.layers.%d.%s", l, row->name);
            dreg(w, (char *)&a->lay[l] + row->off, nm, row_size(m, row), lnst, 0);
        }
    dreg(w, &a->fin_m, "dec.fin_m", T, lnst, 0);
    dreg(w, &a->fin_r, "dec.fin_r", T, lnst, 0);
    dreg(w, &a->upln_m, "dec.upln_m", 4 * GG, lnst, 0);
    dreg(w, &a->upln_r, "dec.upln_r", 4 * GG, lnst, 0);
    w->f32 = 0;
    /* the chunk's tensors (every pair when dec_full); gradients for one
     * chunk: persistent ones [ddec_off, +ddec_n) zeroed per chunk, each
     * layer's in the union region */
    w->pa = m->dec_full ? NP : nc;
    m->ddec_off = w->doff;
    dreg(w, &a->T0, "dec.T0", T * C, 1, 1);
    dreg(w, &a->Kimg, "dec.Kimg", GG * C, 1, 1);
    for (int l = 0; l < D; l++) {
        int dsh = l == 0; /* every layer's gradients: one group */
        if (dsh) ugroup(w, 1), m->dlay_off = w->ubase;
        for (size_t r = 0; r < sizeof dec_layer_rows / sizeof *dec_layer_rows; r++) {
            const act_row *row = &dec_layer_rows[r];
            snprintf(nm, sizeof nm, "dec.layers.%d.%s", l, row->name);
            dreg(w, (char *)&a->lay[l] + row->off, nm, row_size(m, row), !(row->flags & R_NOACT),
                 dsh && (row->flags & R_GRAD));
        }
        if (dsh) m->dlay_n = w->uoff, ugroup(w, 0);
    }
    dreg(w, &a->fin_qin, "dec.fin_qin", T * C, 1, 0);
    dreg(w, &a->fin_kin, "dec.fin_kin", GG * C, 1, 0);
    areg_attn(w, &a->fin, "dec.final_t2i", T, GG, C, C / 2, h, 1, 0, 1);
    dreg(w, &a->tfpre, "dec.tfpre", T * C, 1, 1);
    dreg(w, &a->tf, "dec.tf", T * C, 1, 1);
    dreg(w, &a->up1, "dec.up1", 4 * GG * (C / 4), 1, 0);
    dreg(w, &a->upln, "dec.upln", 4 * GG * (C / 4), 1, 0);
    dreg(w, &a->upgelu, "dec.upgelu", 4 * GG * (C / 4), 1, 0);
    dreg(w, &a->up2, "dec.up2", RR * (C / 8), 1, 0);
    dreg(w, &a->U, "dec.U", RR * (C / 8), 1, 0);
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
        /* the ConvTranspose workspace of forward and backward (fp32): the
         * union region holds no gradient during a forward (16-bit storage,
         * where the union region is half as large: a workspace for the op,
         * model_seq.c convt_fwd) */
        const tr_sizes *sz = m->be->sizes; /* the backend's scratch of the two ConvTransposes */
        size_t s1 = sz->convt_scratch(nc * GG, C / 4), s2 = sz->convt_scratch(nc * 4 * GG, C / 8);
        w->f32 = 1;
        areg2(w, &a->pp_u[2], "dec.up_scratch", s1 > s2 ? s1 : s2, 0, m->adt == TR_PREC_FP32);
        w->f32 = 0;
        ugroup(w, 0);
    }
    /* the outputs: every pair (the loss); their gradients, written by the
     * loss of a chunk right before the chunk's backward, one chunk */
    w->pa = NP, w->pd = nc;
    dreg(w, &a->iou, "dec.iou", 1, 1, 1);
    dreg(w, &a->logits, "dec.logits", RR, 1, 1);
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

static void free_layout(tr_model *m)
{
    tr_mem *mem = &m->be->mem;
    tr_mem_free(mem, m->act_mem);
    tr_mem_free(mem, m->dact_mem);
    tr_mem_free(mem, m->wc16);
    tr_mem_free(mem, m->grad_mem);
    m->act_mem = m->dact_mem = m->grad_mem = NULL;
    m->wc16 = NULL;
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
    m->adt = m->opt.precision;
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
    m->dec_chunk = be->traits->dec_chunk((int)NP); /* the backend's granularity */
    if (m->dec_chunk < 1 || (size_t)m->dec_chunk > NP) m->dec_chunk = (int)NP;
    m->n_chunks = (int)((NP + (size_t)m->dec_chunk - 1) / (size_t)m->dec_chunk);
    m->enc_ni = be->traits->enc_images ? be->traits->enc_images(m->B) : 1;
    if (m->enc_ni < 1 || m->enc_ni > m->B) m->enc_ni = m->B;
    while (m->B % m->enc_ni) m->enc_ni--;
    awalker aw = {.m = m};
    walk_acts(&aw); /* count */
    m->ainfo = calloc((size_t)aw.n + 1, sizeof *m->ainfo);
    m->dview = calloc((size_t)aw.nview + 1, sizeof *m->dview);
    m->n_dview = aw.nview;
    m->chunk_valid = calloc((size_t)m->n_chunks, sizeof *m->chunk_valid);
    if (be->host_mem != &be->mem) /* the batch needs a copy in the backend's memory */
        m->dev = tr_batch_alloc(&be->mem, m->B, m->M, m->K, cfg->S, m->geom.R);
    if (!m->ainfo || !m->dview || !m->chunk_valid || (be->host_mem != &be->mem && !m->dev)) {
        free_layout(m);
        return snprintf(err, err_len, "out of memory"), -1;
    }
    m->n_acts = aw.n;
    m->n_act_floats = aw.off;             /* the activations */
    m->n_dact_floats = aw.doff + aw.umax; /* persistent gradients, then the union region */
    m->act_mem = tr_mem_alloc(&be->mem, TR_MEM_ACTS, m->n_act_floats * sizeof(float));
    m->dact_mem = tr_mem_alloc(&be->mem, TR_MEM_ACTS, m->n_dact_floats * sizeof(float));
    if (!m->act_mem || !m->dact_mem) {
        size_t mb = (m->n_act_floats + m->n_dact_floats) * sizeof(float) >> 20;
        free_layout(m);
        return snprintf(err, err_len, "out of memory for activations (%zu MiB)", mb), -1;
    }
    awalker aw2 = {.m = m, .cap = m->n_acts, .ubase = aw.doff};
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
    tr_geom gm = tr_geom_of(cfg, K);
    {
        /* every op indexes rows * columns of a tensor with int: keep them below 2^31 */
        size_t GG = (size_t)gm.GG, NP = (size_t)B * M, T = (size_t)gm.T;
        size_t big[6] = {(size_t)B * GG * 4 * cfg->E, (size_t)B * cfg->H * GG * GG, NP * GG * 2 * cfg->C,
                         NP * (size_t)gm.RR * (cfg->C / 8), NP * T * 8 * cfg->C, (size_t)B * GG * (size_t)gm.PP3};
        for (int i = 0; i < 6; i++)
            if (big[i] >= (1u << 31))
                return snprintf(err, err_len, "configuration too large (a tensor of %zu elements)", big[i]), -1;
    }
    m->cfg = *cfg;
    m->be = be;
    m->B = B, m->M = M, m->K = K;
    m->geom = gm;
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
    if (B < 1 || B > m->B * 64 || (size_t)B * m->M * m->geom.T * 8 * m->cfg.C >= (1u << 31))
        return snprintf(err, err_len, "batch B=%d out of range", B), -1;
    m->B = B;
    return mdl_layout(m, err, err_len);
}

int tr_model_freeze(tr_model *m, const char *group, int frozen, char *err, size_t err_len)
{
    if (!tr_model_group_valid(group, m->cfg.L))
        return snprintf(err, err_len, "'%s' is not a parameter group (all, encoder, embed, blocks, blocks.I, "
                        "blocks.I-J with J < %d, neck, prompt, decoder)", group, m->cfg.L), -1;
    for (int i = 0; i < m->n_params; i++)
        if (mdl_in_group(m, group, m->pinfo[i].name)) m->frozen[i] = (uint8_t)(frozen != 0);
    return mdl_layout(m, err, err_len);
}
