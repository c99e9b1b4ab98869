/*
 * backend_widen.h - the typed ops (backend.h) of a backend whose kernels
 * compute in fp32 only: the CPU backend, and the meta backend that counts
 * for it.  Each typed op widens its 16-bit operands into one workspace for
 * that op alone (operands that overlap, such as q, k and v inside one qkv
 * tensor, share one range), runs the backend's fp32 kernel (tr_fp32_kernels) and
 * rounds what the kernel wrote back into 16 bits; fp32 operands are used
 * in place.  Both backends go through the same code, so the planner counts
 * the CPU's workspaces exactly.  Private to the backends.
 */
#ifndef SA1B_TRAINER_BACKEND_WIDEN_H
#define SA1B_TRAINER_BACKEND_WIDEN_H

#include "backend/backend.h"

/* A 16-bit tensor h and its fp32 copy f, n elements of type prec. */
typedef struct tr_span {
    uint16_t *h;
    float *f;
    size_t n;
    int prec;
} tr_span;

/* The fp32 kernels: the contracts of tr_ops (backend.h) on float operands;
 * attention_forward rounds the probabilities it stores to prec (TR_PREC_*)
 * before it multiplies them with v (what a 16-bit att holds);
 * attention_backward writes (=) dq, dk and dv from those probabilities
 * (the forward's output, which it does not need, is not its operand). */
typedef struct tr_fp32_kernels {
    void (*linear_forward)(tr_backend *be, float *out, const float *inp, const float *w, const float *b, int N,
                           int I, int O);
    void (*linear_backward)(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int I, int O);
    void (*attention_forward)(tr_backend *be, float *out, float *att, const float *q, const float *k,
                              const float *v, const tr_attn_dims *d, int prec);
    void (*attention_backward)(tr_backend *be, float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v, const float *att,
                               const tr_attn_dims *d);
    void (*convt2x2_forward)(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                             float *scratch, int N, int H, int W, int Ci, int Co);
    void (*convt2x2_backward)(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, float *scratch, int N, int H, int W, int Ci,
                              int Co);
    void (*patch_im2col)(tr_backend *be, float *patches, const uint8_t *image, const int32_t *content, int B,
                         int S, int P);
    void (*image_normalize)(tr_backend *be, float *out, const uint8_t *image, const int32_t *content, int B,
                            int S);
    void (*pe_dense)(tr_backend *be, float *out, const float *gauss, int G, int C);
    void (*prompt_tokens_forward)(tr_backend *be, float *T0, const float *points, const int32_t *labels,
                                  const float *gauss, const float *label_emb, const float *not_a_point,
                                  const float *iou_tok, const float *mask_tok, int NP, int K, int C, int S);
    void (*prompt_tokens_backward)(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                   float *dmask_tok, const float *dT0, const int32_t *labels, int NP, int K,
                                   int C);
    void (*keys_forward)(tr_backend *be, float *Kimg, const float *emb, const float *no_mask, int B, int M,
                         int GG, int C);
    void (*keys_backward)(tr_backend *be, float *demb, float *dno_mask, const float *dKimg, int B, int M, int GG,
                          int C);
    void (*rows_gather)(tr_backend *be, float *out, const float *inp, int N, int T, int C, int t);
    void (*rows_scatter_add)(tr_backend *be, float *dinp, const float *dout, int N, int T, int C, int t);
    void (*mask_dot_forward)(tr_backend *be, float *logits, const float *U, const float *hyp, int N, int RR,
                             int c);
    void (*mask_dot_backward)(tr_backend *be, float *dU, float *dhyp, const float *dlogits, const float *U,
                              const float *hyp, int N, int RR, int c);
    void (*sam_loss)(tr_backend *be, float *dlogits, float *diou, const float *logits, const float *iou,
                     const uint8_t *masks, const uint8_t *valid, int N, int RR, float scale, int count,
                     double *sums);
    /* memory: n bytes zeroed / copied; the k spans' 16-bit codes widened to their fp32
     * copies, or those narrowed back (rounded to nearest even), all in one go */
    void (*zero)(tr_backend *be, void *dst, size_t n);
    void (*copy)(tr_backend *be, void *dst, const void *src, size_t n);
    void (*widen)(tr_backend *be, const tr_span *s, int k);
    void (*narrow)(tr_backend *be, const tr_span *s, int k);
} tr_fp32_kernels;

/* The whole op table of an fp32 backend, in ops: the ops the backend gives
 * as they are, from `direct` (gemm, the element-wise ones (gelu, relu, add,
 * accumulate, add_bcast) and LayerNorm's, whose 16-bit operands the CPU
 * reads tile by tile or row by row with no workspace, the optimizer's
 * (sumsq, scale, adamw, adamw8bit), upload and download), and every other
 * op the widening op over be->fp32 (direct's entries for those are not
 * read: leave them NULL).  One table per backend, so that the CPU and the
 * meta backend that counts for it split the ops alike. */
void tr_fp32_ops(tr_ops *ops, const tr_ops *direct);

#endif
