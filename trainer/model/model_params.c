/*
 * model_params.c - the model's configuration presets and geometry, its
 * parameter table (names, shapes, offsets, initialisation kinds: MODEL.md's
 * tensor names), the freeze groups and the initialisation.
 */
#include "model_params.h"

#include <limits.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tr_rng.h"

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
    if (strcmp(name, "base") == 0) { /* SAM ViT-B's encoder, global attention: the GPU workload */
        *c = (tr_config){.S = 1024, .P = 16, .E = 768, .L = 12, .H = 12, .C = 256, .h = 8, .D = 2};
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
    if (c->L < 0 || c->L > TR_MAX_L)
        return snprintf(err, n, "encoder depth %d (--enc-depth) must be in 0..%d", c->L, TR_MAX_L), -1;
    if (c->D < 1 || c->D > TR_MAX_D)
        return snprintf(err, n, "decoder depth %d (--dec-depth) must be in 1..%d", c->D, TR_MAX_D), -1;
    return 0;
}

tr_geom tr_geom_of(const tr_config *c, int K)
{
    int G = c->S / c->P, R = 4 * G;
    return (tr_geom){.G = G, .GG = G * G, .R = R, .RR = R * R, .T = K + 2, .PP3 = 3 * c->P * c->P};
}

/* ---- parameter table ------------------------------------------------------------ */

enum { INIT_TN, INIT_ZERO, INIT_ONE };

/* Registers parameter PRE.NAME (MODEL.md's name) with its shape. */
static void reg(mdl_walker *w, float **field, const char *pre, const char *name, int decay, int init, int ndim,
                int d0, int d1, int d2, int d3)
{
    tr_param_info *pi = &w->m->pinfo[w->n];
    snprintf(pi->name, sizeof pi->name, "%s.%s", pre, name);
    pi->ndim = ndim;
    int d[4] = {d0, d1, d2, d3};
    pi->count = 1;
    for (int i = 0; i < 4; i++) {
        pi->shape[i] = i < ndim ? d[i] : 0;
        if (i < ndim) pi->count *= (size_t)d[i];
    }
    pi->offset = w->off;
    pi->decay = decay;
    pi->init = init;
    if (w->m->param_mem) {
        tr_model *m = w->m;
        *field = m->param_mem + w->off;
        float **gf = (float **)((char *)&m->g + ((char *)field - (char *)&m->p));
        *gf = m->frozen[w->n] || !m->grad_mem ? NULL : m->grad_mem + (w->off - m->grad_lo);
    }
    w->off += (pi->count + 15) / 16 * 16; /* 64-byte aligned tensors */
    w->n++;
}

/* A Linear layer PRE.NAME: w [out, in], b [out] (b NULL: none). */
static void reg_lin(mdl_walker *w, float **wt, float **b, const char *pre, const char *name, int out, int in)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.%s", pre, name);
    reg(w, wt, nm, "w", 1, INIT_TN, 2, out, in, 0, 0);
    if (b) reg(w, b, nm, "b", 0, INIT_ZERO, 1, out, 0, 0, 0);
}

/* A LayerNorm PRE.NAME over n: w (gains), b. */
static void reg_ln(mdl_walker *w, float **g, float **b, const char *pre, const char *name, int n)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.%s", pre, name);
    reg(w, g, nm, "w", 0, INIT_ONE, 1, n, 0, 0, 0);
    reg(w, b, nm, "b", 0, INIT_ZERO, 1, n, 0, 0, 0);
}

/* An attention block PRE.NAME: q, k, v (C -> Ci) and out (Ci -> C) projections. */
static void reg_attn(mdl_walker *w, tr_attn_p *a, const char *pre, const char *name, int C, int Ci)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.%s", pre, name);
    reg_lin(w, &a->q_w, &a->q_b, nm, "q_proj", Ci, C);
    reg_lin(w, &a->k_w, &a->k_b, nm, "k_proj", Ci, C);
    reg_lin(w, &a->v_w, &a->v_b, nm, "v_proj", Ci, C);
    reg_lin(w, &a->o_w, &a->o_b, nm, "out_proj", C, Ci);
}

/* An MLP PRE.NAME: fc1 (in -> hidden), fc2 (hidden -> in). */
static void reg_mlp(mdl_walker *w, float **fc1_w, float **fc1_b, float **fc2_w, float **fc2_b, const char *pre,
                    const char *name, int in, int hidden)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s.%s", pre, name);
    reg_lin(w, fc1_w, fc1_b, nm, "fc1", hidden, in);
    reg_lin(w, fc2_w, fc2_b, nm, "fc2", in, hidden);
}

void mdl_walk_params(mdl_walker *w)
{
    tr_model *m = w->m;
    const tr_config *c = &m->cfg;
    tr_params *p = &m->p;
    const tr_geom *gm = &m->geom;
    int E = c->E, C = c->C;
    char pre[32], nm[16];
    reg_lin(w, &p->patch_w, &p->patch_b, "enc", "patch", E, gm->PP3);
    reg(w, &p->pos, "enc", "pos", 0, INIT_TN, 2, gm->GG, E, 0, 0);
    for (int i = 0; i < c->L; i++) {
        tr_enc_block_p *b = &p->blk[i];
        snprintf(pre, sizeof pre, "enc.blocks.%d", i);
        reg_ln(w, &b->ln1_w, &b->ln1_b, pre, "ln1", E);
        reg_lin(w, &b->qkv_w, &b->qkv_b, pre, "attn.qkv", 3 * E, E);
        reg_lin(w, &b->proj_w, &b->proj_b, pre, "attn.proj", E, E);
        reg_ln(w, &b->ln2_w, &b->ln2_b, pre, "ln2", E);
        reg_mlp(w, &b->fc1_w, &b->fc1_b, &b->fc2_w, &b->fc2_b, pre, "mlp", E, 4 * E);
    }
    reg_lin(w, &p->neck_w, NULL, "enc", "neck", C, E);
    reg_ln(w, &p->neck_ln_w, &p->neck_ln_b, "enc", "neck_ln", C);
    reg(w, &p->label_emb, "prompt", "label_emb", 0, INIT_TN, 2, 2, C, 0, 0);
    reg(w, &p->not_a_point, "prompt", "not_a_point", 0, INIT_TN, 1, C, 0, 0, 0);
    reg(w, &p->no_mask, "prompt", "no_mask", 0, INIT_TN, 1, C, 0, 0, 0);
    reg(w, &p->iou_token, "dec", "iou_token", 0, INIT_TN, 1, C, 0, 0, 0);
    reg(w, &p->mask_token, "dec", "mask_token", 0, INIT_TN, 1, C, 0, 0, 0);
    for (int l = 0; l < c->D; l++) {
        tr_dec_layer_p *L = &p->lay[l];
        snprintf(pre, sizeof pre, "dec.layers.%d", l);
        reg_attn(w, &L->sa, pre, "self_attn", C, C);
        reg_ln(w, &L->n1_w, &L->n1_b, pre, "norm1", C);
        reg_attn(w, &L->t2i, pre, "t2i", C, C / 2);
        reg_ln(w, &L->n2_w, &L->n2_b, pre, "norm2", C);
        reg_mlp(w, &L->fc1_w, &L->fc1_b, &L->fc2_w, &L->fc2_b, pre, "mlp", C, 8 * C);
        reg_ln(w, &L->n3_w, &L->n3_b, pre, "norm3", C);
        reg_attn(w, &L->i2t, pre, "i2t", C, C / 2);
        reg_ln(w, &L->n4_w, &L->n4_b, pre, "norm4", C);
    }
    reg_attn(w, &p->fin, "dec", "final_t2i", C, C / 2);
    reg_ln(w, &p->fin_n_w, &p->fin_n_b, "dec", "final_norm", C);
    reg(w, &p->up1_w, "dec.up1", "w", 1, INIT_TN, 4, C, C / 4, 2, 2);
    reg(w, &p->up1_b, "dec.up1", "b", 0, INIT_ZERO, 1, C / 4, 0, 0, 0);
    reg_ln(w, &p->upln_w, &p->upln_b, "dec", "up_ln", C / 4);
    reg(w, &p->up2_w, "dec.up2", "w", 1, INIT_TN, 4, C / 4, C / 8, 2, 2);
    reg(w, &p->up2_b, "dec.up2", "b", 0, INIT_ZERO, 1, C / 8, 0, 0, 0);
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%d", i);
        reg_lin(w, &p->hyp_w[i], &p->hyp_b[i], "dec.hyper", nm, i == 2 ? C / 8 : C, C);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%d", i);
        reg_lin(w, &p->iouh_w[i], &p->iouh_b[i], "dec.iou_head", nm, i == 2 ? 1 : C, C);
    }
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
int mdl_in_group(const tr_model *m, const char *g, const char *name)
{
    if (!strcmp(g, "all")) return 1;
    if (!strcmp(g, "encoder")) return strncmp(name, "enc.", 4) == 0;
    if (!strcmp(g, "prompt")) return strncmp(name, "prompt.", 7) == 0;
    if (!strcmp(g, "decoder")) return strncmp(name, "dec.", 4) == 0;
    int part = mdl_enc_part(m, name);
    if (!strcmp(g, "embed")) return part == -1;
    if (!strcmp(g, "neck")) return part == m->cfg.L;
    if (!strcmp(g, "blocks")) return part >= 0 && part < m->cfg.L;
    char *end;
    long a = strtol(g + 7, &end, 10), b = *end == '-' ? strtol(end + 1, NULL, 10) : a;
    return part >= 0 && part < m->cfg.L && part >= a && part <= b;
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

double tr_model_scale_grads(tr_model *m, double factor)
{
    return tr_model_scale_grads_part(m, factor, 0, m->n_grad_floats);
}

double tr_model_scale_grads_part(tr_model *m, double factor, size_t lo, size_t hi)
{
    tr_backend *be = m->be;
    if (!m->grad_mem || hi <= lo) return 0.0;
    if (factor != 1.0) be->ops->scale(be, m->grad_mem + lo, hi - lo, (float)factor);
    return be->ops->sumsq(be, m->grad_mem + lo, hi - lo);
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

int tr_model_init_params(tr_model *m, uint64_t seed)
{
    /* on the host, a tensor at a time, then uploaded */
    size_t maxn = (size_t)m->cfg.C;
    for (int i = 0; i < m->n_params; i++)
        if (m->pinfo[i].count > maxn) maxn = m->pinfo[i].count;
    float *t = malloc(maxn * sizeof(float));
    if (!t) return -1;
    tr_backend *be = m->be;
    tr_rng r;
    tr_rng_seed(&r, seed);
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        for (size_t j = 0; j < pi->count; j++)
            t[j] = pi->init == INIT_ZERO ? 0.0f : pi->init == INIT_ONE ? 1.0f : (float)tr_rng_trunc_normal(&r, 0.02);
        be->ops->upload(be, m->param_mem + pi->offset, t, pi->count * sizeof(float));
    }
    tr_rng rg;
    tr_rng_seed(&rg, seed ^ 0x9e3779b97f4a7c15ull);
    for (int j = 0; j < m->cfg.C; j++) t[j] = (float)tr_rng_normal(&rg);
    be->ops->upload(be, m->pe_gaussian, t, (size_t)m->cfg.C * sizeof(float));
    free(t);
    return 0;
}
