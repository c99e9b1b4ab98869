/*
 * backend_widen.c - the typed ops of an fp32 backend (backend_widen.h):
 * each op's 16-bit operands widened into one workspace for that op, its
 * fp32 kernel run, what it wrote rounded back.
 */
#include "backend_widen.h"

#include <stdint.h>
#include <stdlib.h>

enum { SR = 1, SW = 2, SS = 4 }; /* operand read; written (=, or in part); scratch */
#define MAXA 10

/* One operand of an op: typed, its extent in elements from t.p and how the
 * op uses it; f is what the fp32 kernel gets. */
typedef struct warg {
    tr_ten t;
    size_t n;
    int mode;
    float *f;
} warg;

/* The op's workspace: the 16-bit operands' byte ranges, overlapping ones
 * merged into one group, each group widened at off floats into ws. */
typedef struct wstage {
    tr_backend *be;
    float *ws;
    int ng;
    uintptr_t lo[MAXA], hi[MAXA];
    size_t off[MAXA];
    int mode[MAXA], dt[MAXA];
    warg *a;
    int k;
} wstage;

static size_t r16(size_t n) { return (n + 15) / 16 * 16; }

/* Before the op: the 16-bit operands get their fp32 copies (unpacked where
 * the op reads them, or writes them only in part); 0 when the workspace
 * cannot be had (the allocator records it: the op then computes nothing). */
static int stage_in(wstage *s, tr_backend *be, warg *a, int k)
{
    int grp[MAXA], cnt[MAXA] = {0};
    s->be = be, s->ng = 0, s->ws = NULL, s->a = a, s->k = k;
    /* (the meta backend counting for a backend that reads 16 bits as they
     * are: no workspace) */
    int widens = be->traits->widens16;
    for (int i = 0; i < k; i++) {
        grp[i] = -1;
        a[i].f = a[i].t.p;
        if (!widens || !a[i].t.p || !a[i].n || !tr_prec_16(a[i].t.dt)) continue;
        uintptr_t lo = (uintptr_t)a[i].t.p, hi = lo + a[i].n * 2;
        int g = s->ng++;
        s->lo[g] = lo, s->hi[g] = hi, s->mode[g] = a[i].mode, s->dt[g] = a[i].t.dt, cnt[g] = 1;
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
                s->mode[h] = s->mode[s->ng - 1], s->dt[h] = s->dt[s->ng - 1], cnt[h] = cnt[s->ng - 1];
                s->ng--;
                changed = 1;
            }
    }
    if (!s->ng) return 1;
    size_t tot = 0;
    for (int g = 0; g < s->ng; g++) s->off[g] = tot, tot += r16((s->hi[g] - s->lo[g]) / 2);
    /* no zero fill: every range is unpacked, written whole by the op, or its scratch */
    s->ws = tr_mem_alloc_raw(&be->mem, TR_MEM_WORK, tot * sizeof(float));
    if (!s->ws) return 0;
    tr_span sp[MAXA];
    int k16 = 0;
    for (int g = 0; g < s->ng; g++)
        if ((s->mode[g] & SR) || (cnt[g] > 1 && (s->mode[g] & SW)))
            sp[k16++] = (tr_span){(uint16_t *)s->lo[g], s->ws + s->off[g], (s->hi[g] - s->lo[g]) / 2, s->dt[g]};
    if (k16) be->fp32->widen(be, sp, k16);
    for (int i = 0; i < k; i++)
        if (grp[i] >= 0) a[i].f = s->ws + s->off[grp[i]] + ((uintptr_t)a[i].t.p - s->lo[grp[i]]) / 2;
    return 1;
}

/* After the op: what it wrote rounded back into 16 bits; the workspace
 * freed. */
static void stage_out(wstage *s)
{
    tr_backend *be = s->be;
    tr_span sp[MAXA];
    int k16 = 0;
    for (int g = 0; g < s->ng; g++)
        if (s->mode[g] & SW)
            sp[k16++] = (tr_span){(uint16_t *)s->lo[g], s->ws + s->off[g], (s->hi[g] - s->lo[g]) / 2, s->dt[g]};
    if (k16) be->fp32->narrow(be, sp, k16);
    tr_mem_free(&be->mem, s->ws);
    s->ws = NULL;
}

#define STAGE(...)                                                                                                 \
    warg a_[] = {__VA_ARGS__};                                                                                     \
    wstage st_;                                                                                                    \
    if (!stage_in(&st_, be, a_, (int)(sizeof a_ / sizeof a_[0]))) return
#define F(x) a_[x].f
#define DONE() stage_out(&st_)
#define KN be->fp32

static void w_linear_forward(tr_backend *be, tr_ten out, tr_ten inp, tr_ten w, tr_ten b, int N, int I, int O)
{
    STAGE({out, (size_t)N * O, SW}, {inp, (size_t)N * I, SR}, {w, (size_t)O * I, SR}, {b, (size_t)O, SR});
    KN->linear_forward(be, F(0), F(1), F(2), F(3), N, I, O);
    DONE();
}

static void w_linear_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp, tr_ten w,
                              int N, int I, int O)
{
    /* (w is read for dinp only, inp for dw only) */
    if (!dinp.p) w.p = NULL;
    if (!dw) inp.p = NULL;
    STAGE({dinp, (size_t)N * I, SR | SW}, {dout, (size_t)N * O, SR}, {inp, (size_t)N * I, SR},
          {w, (size_t)O * I, SR});
    KN->linear_backward(be, F(0), dw, db, F(1), F(2), F(3), N, I, O);
    DONE();
}

/* (zero bits are +0 in every type: no workspace) */
static void w_zero(tr_backend *be, tr_ten dst, size_t n) { KN->zero(be, dst.p, n * tr_prec_size(dst.dt)); }

/* elements from the first to the last of a strided attention operand */
static size_t att_ext(int N, int T, int ld, size_t bs, int cols)
{
    return (size_t)(N - 1) * bs + (size_t)(T - 1) * (size_t)ld + (size_t)cols;
}

static void w_attention_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v,
                                const tr_attn_dims *d)
{
    int c = d->heads * d->dh, dense = d->ldo == c && d->so == (size_t)d->Tq * (size_t)c;
    STAGE({out, att_ext(d->N, d->Tq, d->ldo, d->so, c), dense ? SW : SR | SW},
          {att, (size_t)d->N * d->heads * be->sizes->attention_saved((size_t)d->Tq, (size_t)d->Tk), SW},
          {q, att_ext(d->N, d->Tq, d->ldq, d->sq, c), SR}, {k, att_ext(d->N, d->Tk, d->ldk, d->sk, c), SR},
          {v, att_ext(d->N, d->Tk, d->ldv, d->sv, c), SR});
    KN->attention_forward(be, F(0), F(1), F(2), F(3), F(4), d, att.dt);
    DONE();
}

/* an attention operand [N, T, *] whose heads fill its rows and its rows
 * its sequences: written whole by an op that writes every head */
static int att_dense(int T, int ld, size_t bs, int c) { return ld == c && bs == (size_t)T * (size_t)c; }

/* dq, dk and dv are written (=): a dense one needs no unpacking, one whose
 * range holds other columns (a packed qkv) is unpacked so that they stay;
 * out is not an operand (the fp32 kernel keeps its probabilities) */
static void w_attention_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q,
                                 tr_ten k, tr_ten v, tr_ten att, const tr_attn_dims *d)
{
    (void)out;
    int c = d->heads * d->dh;
    size_t eq = att_ext(d->N, d->Tq, d->ldq, d->sq, c), ek = att_ext(d->N, d->Tk, d->ldk, d->sk, c);
    size_t ev = att_ext(d->N, d->Tk, d->ldv, d->sv, c);
    int mq = att_dense(d->Tq, d->ldq, d->sq, c) ? SW : SR | SW, mk = att_dense(d->Tk, d->ldk, d->sk, c) ? SW : SR | SW;
    int mv = att_dense(d->Tk, d->ldv, d->sv, c) ? SW : SR | SW;
    STAGE({dq, eq, mq}, {dk, ek, mk}, {dv, ev, mv}, {dout, att_ext(d->N, d->Tq, d->ldo, d->so, c), SR},
          {q, eq, SR}, {k, ek, SR}, {v, ev, SR},
          {att, (size_t)d->N * d->heads * be->sizes->attention_saved((size_t)d->Tq, (size_t)d->Tk), SR});
    KN->attention_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), F(6), F(7), d);
    DONE();
}

static void w_convt2x2_forward(tr_backend *be, tr_ten out, tr_ten inp, tr_ten w, tr_ten b, float *scratch, int N,
                               int H, int W, int Ci, int Co)
{
    size_t px = (size_t)N * H * W;
    STAGE({out, px * 4 * Co, SW}, {inp, px * Ci, SR}, {w, (size_t)Ci * Co * 4, SR}, {b, (size_t)Co, SR});
    KN->convt2x2_forward(be, F(0), F(1), F(2), F(3), scratch, N, H, W, Ci, Co);
    DONE();
}

static void w_convt2x2_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp,
                                tr_ten w, float *scratch, int N, int H, int W, int Ci, int Co)
{
    size_t px = (size_t)N * H * W;
    if (!dinp.p) w.p = NULL;
    if (!dw) inp.p = NULL;
    STAGE({dinp, px * Ci, SR | SW}, {dout, px * 4 * Co, SR}, {inp, px * Ci, SR}, {w, (size_t)Ci * Co * 4, SR});
    KN->convt2x2_backward(be, F(0), dw, db, F(1), F(2), F(3), scratch, N, H, W, Ci, Co);
    DONE();
}

static void w_patch_im2col(tr_backend *be, tr_ten patches, const uint8_t *image, const int32_t *content, int B,
                           int S, int P)
{
    STAGE({patches, (size_t)B * (size_t)(S / P) * (size_t)(S / P) * 3 * (size_t)P * P, SW});
    KN->patch_im2col(be, F(0), image, content, B, S, P);
    DONE();
}

static void w_image_normalize(tr_backend *be, tr_ten out, const uint8_t *image, const int32_t *content, int B, int S)
{
    STAGE({out, (size_t)B * 3 * S * S, SW});
    KN->image_normalize(be, F(0), image, content, B, S);
    DONE();
}

static void w_pe_dense(tr_backend *be, tr_ten out, const float *gauss, int G, int C)
{
    STAGE({out, (size_t)G * G * C, SW});
    KN->pe_dense(be, F(0), gauss, G, C);
    DONE();
}

static void w_prompt_tokens_forward(tr_backend *be, tr_ten T0, const float *points, const int32_t *labels,
                                    const float *gauss, tr_ten label_emb, tr_ten not_a_point, tr_ten iou_tok,
                                    tr_ten mask_tok, int NP, int K, int C, int S)
{
    STAGE({T0, (size_t)NP * (K + 2) * C, SW}, {label_emb, 2 * (size_t)C, SR}, {not_a_point, (size_t)C, SR},
          {iou_tok, (size_t)C, SR}, {mask_tok, (size_t)C, SR});
    KN->prompt_tokens_forward(be, F(0), points, labels, gauss, F(1), F(2), F(3), F(4), NP, K, C, S);
    DONE();
}

static void w_prompt_tokens_backward(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                     float *dmask_tok, tr_ten dT0, const int32_t *labels, int NP, int K, int C)
{
    STAGE({dT0, (size_t)NP * (K + 2) * C, SR});
    KN->prompt_tokens_backward(be, dlabel_emb, dnot_a_point, diou_tok, dmask_tok, F(0), labels, NP, K, C);
    DONE();
}

static void w_keys_forward(tr_backend *be, tr_ten Kimg, tr_ten emb, tr_ten no_mask, int B, int M, int GG, int C)
{
    STAGE({Kimg, (size_t)B * M * GG * C, SW}, {emb, (size_t)B * GG * C, SR}, {no_mask, (size_t)C, SR});
    KN->keys_forward(be, F(0), F(1), F(2), B, M, GG, C);
    DONE();
}

static void w_keys_backward(tr_backend *be, tr_ten demb, float *dno_mask, tr_ten dKimg, int B, int M, int GG, int C)
{
    STAGE({demb, (size_t)B * GG * C, SR | SW}, {dKimg, (size_t)B * M * GG * C, SR});
    KN->keys_backward(be, F(0), dno_mask, F(1), B, M, GG, C);
    DONE();
}

static void w_rows_gather(tr_backend *be, tr_ten out, tr_ten inp, int N, int T, int C, int t)
{
    STAGE({out, (size_t)N * C, SW}, {inp, (size_t)N * T * C, SR});
    KN->rows_gather(be, F(0), F(1), N, T, C, t);
    DONE();
}

static void w_rows_scatter_add(tr_backend *be, tr_ten dinp, tr_ten dout, int N, int T, int C, int t)
{
    STAGE({dinp, (size_t)N * T * C, SR | SW}, {dout, (size_t)N * C, SR});
    KN->rows_scatter_add(be, F(0), F(1), N, T, C, t);
    DONE();
}

static void w_mask_dot_forward(tr_backend *be, tr_ten logits, tr_ten U, tr_ten hyp, int N, int RR, int c)
{
    STAGE({logits, (size_t)N * RR, SW}, {U, (size_t)N * RR * c, SR}, {hyp, (size_t)N * c, SR});
    KN->mask_dot_forward(be, F(0), F(1), F(2), N, RR, c);
    DONE();
}

static void w_mask_dot_backward(tr_backend *be, tr_ten dU, tr_ten dhyp, tr_ten dlogits, tr_ten U, tr_ten hyp, int N,
                                int RR, int c)
{
    STAGE({dU, (size_t)N * RR * c, SR | SW}, {dhyp, (size_t)N * c, SR | SW}, {dlogits, (size_t)N * RR, SR},
          {U, (size_t)N * RR * c, SR}, {hyp, (size_t)N * c, SR});
    KN->mask_dot_backward(be, F(0), F(1), F(2), F(3), F(4), N, RR, c);
    DONE();
}

static void w_sam_loss(tr_backend *be, tr_ten dlogits, tr_ten diou, tr_ten logits, tr_ten iou, const uint8_t *masks,
                       const uint8_t *valid, int N, int RR, float scale, int count, double *sums)
{
    STAGE({dlogits, (size_t)N * RR, SW}, {diou, (size_t)N, SW}, {logits, (size_t)N * RR, SR}, {iou, (size_t)N, SR});
    KN->sam_loss(be, F(0), F(1), F(2), F(3), masks, valid, N, RR, scale, count, sums);
    DONE();
}

/* The same type: the bytes; fp32 <-> 16 bits: narrowed or widened in one
 * pass; between two 16-bit types through an fp32 workspace. */
static void w_convert(tr_backend *be, tr_ten dst, tr_ten src, size_t n)
{
    if (!n) return;
    if (dst.dt == src.dt) {
        if (dst.p != src.p) KN->copy(be, dst.p, src.p, n * tr_prec_size(dst.dt));
        return;
    }
    if (src.dt == TR_PREC_FP32) {
        KN->narrow(be, &(tr_span){dst.p, src.p, n, dst.dt}, 1);
        return;
    }
    if (dst.dt == TR_PREC_FP32) {
        KN->widen(be, &(tr_span){src.p, dst.p, n, src.dt}, 1);
        return;
    }
    STAGE({dst, n, SW}, {src, n, SR});
    if (F(0) != F(1)) KN->copy(be, F(0), F(1), n * sizeof(float));
    DONE();
}

#undef STAGE
#undef F
#undef DONE
#undef KN

void tr_fp32_ops(tr_ops *o, const tr_ops *direct)
{
    *o = *direct;
    o->linear_forward = w_linear_forward, o->linear_backward = w_linear_backward;
    o->zero = w_zero;
    o->attention_forward = w_attention_forward, o->attention_backward = w_attention_backward;
    o->convt2x2_forward = w_convt2x2_forward, o->convt2x2_backward = w_convt2x2_backward;
    o->patch_im2col = w_patch_im2col, o->image_normalize = w_image_normalize, o->pe_dense = w_pe_dense;
    o->prompt_tokens_forward = w_prompt_tokens_forward, o->prompt_tokens_backward = w_prompt_tokens_backward;
    o->keys_forward = w_keys_forward, o->keys_backward = w_keys_backward;
    o->rows_gather = w_rows_gather, o->rows_scatter_add = w_rows_scatter_add;
    o->mask_dot_forward = w_mask_dot_forward, o->mask_dot_backward = w_mask_dot_backward;
    o->sam_loss = w_sam_loss, o->convert = w_convert;
}
