/*
 * model_stage.c - per-op 16-bit storage (tr_model.vmem): the staging table
 * put in front of the backend's ops while a model whose 16-bit activations
 * live only in its stash runs, each op's operands widened into a workspace
 * for that op alone and its results packed back.  (The 16-bit emulation
 * that issue 15 item 2 moves into the backends.)
 */
#include "model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    for (int g = 0; g < s->ng; g++) s->off[g] = tot, tot += mdl_r16(s->hi[g] - s->lo[g]);
    /* no zero fill: every range is unpacked, written whole by the op, or its scratch */
    s->ws = tr_mem_alloc_raw(&be->mem, TR_MEM_WORK, tot * sizeof(float));
    if (!s->ws) mdl_oom_unwind(m);
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
    float *z = mdl_work_alloc(m, piece);
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
        {att, (size_t)d->N * d->heads * be->sizes->attention_saved((size_t)d->Tq, (size_t)d->Tk), SW},
        {(float *)q, att_ext(d->N, d->Tq, d->ldq, d->sq, c), SR},
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
        {(float *)att, (size_t)d->N * d->heads * be->sizes->attention_saved((size_t)d->Tq, (size_t)d->Tk), SR});
    SO->attention_backward(be, IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), IN(6), IN(7), d);
    SOUT();
}

static void s_convt2x2_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                               float *scratch, int N, int H, int W, int Ci, int Co)
{
    SM;
    size_t px = (size_t)N * H * W;
    SIN({out, px * 4 * Co, SW}, {(float *)inp, px * Ci, SR},
        {scratch, be->sizes->convt_scratch(px, (size_t)Co), SS});
    SO->convt2x2_forward(be, IN(0), IN(1), w, b, IN(2), N, H, W, Ci, Co);
    SOUT();
}

static void s_convt2x2_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, float *scratch, int N, int H, int W, int Ci, int Co)
{
    SM;
    size_t px = (size_t)N * H * W;
    SIN({dinp, px * Ci, SR | SW}, {(float *)dout, px * 4 * Co, SR}, {(float *)inp, px * Ci, SR},
        {scratch, be->sizes->convt_scratch(px, (size_t)Co), SS});
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

static void s_sam_loss(tr_backend *be, float *dlogits, float *diou, const float *logits, const float *iou,
                       const uint8_t *masks, const uint8_t *valid, int N, int RR, float scale, int count,
                       double *sums)
{
    SM;
    SIN({dlogits, (size_t)N * RR, SW}, {diou, (size_t)N, SW}, {(float *)logits, (size_t)N * RR, SR},
        {(float *)iou, (size_t)N, SR});
    SO->sam_loss(be, IN(0), IN(1), IN(2), IN(3), masks, valid, N, RR, scale, count, sums);
    SOUT();
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

/* (uploads and downloads of whole floats when they touch vmem) */
static void s_upload(tr_backend *be, void *dst, const void *src, size_t n)
{
    SM;
    SIN({dst, n / sizeof(float), SW});
    SO->upload(be, IN(0), src, n);
    SOUT();
}

static void s_download(tr_backend *be, void *dst, const void *src, size_t n)
{
    SM;
    SIN({(float *)src, n / sizeof(float), SR});
    SO->download(be, dst, IN(0), n);
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
    .adamw = s_adamw, .adamw8bit = s_adamw8bit, .copy = s_copy, .upload = s_upload, .download = s_download, .round_to = s_round_to, .pack16 = s_pack16,
    .unpack16 = s_unpack16,
};

/* Puts the staging ops in front of the backend's while the model runs (per-op
 * storage); returns 1 when it did (mdl_stage_end undoes it), 0 when there is
 * nothing to do or they are in place already. */
int mdl_stage_begin(tr_model *m)
{
    tr_backend *be = m->be;
    if (!m->vmem || be->stage == m) return 0;
    be->stage_ops = be->ops;
    be->ops = &stage_table;
    be->stage = m;
    return 1;
}

void mdl_stage_end(tr_model *m, int on)
{
    tr_backend *be = m->be;
    if (!on) return;
    be->ops = be->stage_ops;
    be->stage_ops = NULL;
    be->stage = NULL;
}
