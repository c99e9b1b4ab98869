/*
 * backend_meta.c - the counting "meta" backend of the planner (plan.h): a
 * tr_ops table whose ops do no arithmetic, over a tr_mem in counting-only
 * mode (every block is a read-only range of zeros, no real memory).  The
 * model, the optimizer and the training loop run on it unchanged, so the
 * allocator sees exactly the allocations of a real step; ops that take
 * scratch space from the allocator on the CPU backend (attention backward,
 * the loss) take the same sizes here.  Keep those in step with
 * backend_cpu.c: the planner-versus-measured test (t1762) catches a drift.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_meta.h"
#include "backend/cpu/backend_cpu.h"
#include "backend/cpu/backend_widen.h"

/* ---- the fp32 kernels (tr_fp32_kernels): nothing computed, the target's workspaces taken -- */

static void m_linear_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b, int N,
                             int I, int O)
{
    (void)be, (void)out, (void)inp, (void)w, (void)b, (void)N, (void)I, (void)O;
}
static void m_linear_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, int N, int I, int O)
{
    (void)be, (void)dinp, (void)dw, (void)db, (void)dout, (void)inp, (void)w, (void)N, (void)I, (void)O;
}
static void m_zero(tr_backend *be, void *dst, size_t n) { (void)be, (void)dst, (void)n; }
static void m_attention_forward(tr_backend *be, float *out, float *att, const float *q, const float *k,
                                const float *v, const tr_attn_dims *d, int prec)
{
    (void)out, (void)att, (void)q, (void)k, (void)v, (void)prec;
    /* the target backend's workspace, if it takes one */
    size_t n = be->sizes->attention_fwd_workspace ? be->sizes->attention_fwd_workspace(d) : 0;
    if (n) tr_mem_free(&be->mem, tr_mem_alloc(&be->mem, TR_MEM_WORK, n));
}
static void m_attention_backward(tr_backend *be, float *dq, float *dk, float *dv, const float *dout,
                                 const float *q, const float *k, const float *v, const float *att,
                                 const tr_attn_dims *d)
{
    (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)att;
    /* (dq, dk and dv written, as every backend's: nothing to count) the target backend's workspace */
    size_t n = be->sizes->attention_workspace(d);
    if (n) tr_mem_free(&be->mem, tr_mem_alloc(&be->mem, TR_MEM_WORK, n));
}
static void m_convt_forward(tr_backend *be, float *out, const float *inp, const float *w, const float *b,
                            float *scratch, int N, int H, int W, int Ci, int Co)
{
    (void)be, (void)out, (void)inp, (void)w, (void)b, (void)scratch, (void)N, (void)H, (void)W, (void)Ci, (void)Co;
}
static void m_convt_backward(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, float *scratch, int N, int H, int W, int Ci, int Co)
{
    (void)be, (void)dinp, (void)dw, (void)db, (void)dout, (void)inp, (void)w, (void)scratch, (void)N, (void)H;
    (void)W, (void)Ci, (void)Co;
}
static void m_patch_im2col(tr_backend *be, float *patches, const uint8_t *image, const int32_t *content, int B,
                           int S, int P)
{
    (void)be, (void)patches, (void)image, (void)content, (void)B, (void)S, (void)P;
}
static void m_image_normalize(tr_backend *be, float *out, const uint8_t *image, const int32_t *content, int B,
                              int S)
{
    (void)be, (void)out, (void)image, (void)content, (void)B, (void)S;
}
static void m_pe_dense(tr_backend *be, float *out, const float *gauss, int G, int C)
{
    (void)be, (void)out, (void)gauss, (void)G, (void)C;
}
static void m_prompt_tokens_forward(tr_backend *be, float *T0, const float *points, const int32_t *labels,
                                    const float *gauss, const float *label_emb, const float *not_a_point,
                                    const float *iou_tok, const float *mask_tok, int NP, int K, int C, int S)
{
    (void)be, (void)T0, (void)points, (void)labels, (void)gauss, (void)label_emb, (void)not_a_point;
    (void)iou_tok, (void)mask_tok, (void)NP, (void)K, (void)C, (void)S;
}
static void m_prompt_tokens_backward(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                     float *dmask_tok, const float *dT0, const int32_t *labels, int NP, int K,
                                     int C)
{
    (void)be, (void)dlabel_emb, (void)dnot_a_point, (void)diou_tok, (void)dmask_tok, (void)dT0, (void)labels;
    (void)NP, (void)K, (void)C;
}
static void m_keys_forward(tr_backend *be, float *Kimg, const float *emb, const float *no_mask, int B, int M,
                           int GG, int C)
{
    (void)be, (void)Kimg, (void)emb, (void)no_mask, (void)B, (void)M, (void)GG, (void)C;
}
static void m_keys_backward(tr_backend *be, float *demb, float *dno_mask, const float *dKimg, int B, int M, int GG,
                            int C)
{
    (void)be, (void)demb, (void)dno_mask, (void)dKimg, (void)B, (void)M, (void)GG, (void)C;
}
static void m_rows_gather(tr_backend *be, float *out, const float *inp, int N, int T, int C, int t)
{
    (void)be, (void)out, (void)inp, (void)N, (void)T, (void)C, (void)t;
}
static void m_rows_scatter_add(tr_backend *be, float *dinp, const float *dout, int N, int T, int C, int t)
{
    (void)be, (void)dinp, (void)dout, (void)N, (void)T, (void)C, (void)t;
}
static void m_mask_dot_forward(tr_backend *be, float *logits, const float *U, const float *hyp, int N, int RR, int c)
{
    (void)be, (void)logits, (void)U, (void)hyp, (void)N, (void)RR, (void)c;
}
static void m_mask_dot_backward(tr_backend *be, float *dU, float *dhyp, const float *dlogits, const float *U,
                                const float *hyp, int N, int RR, int c)
{
    (void)be, (void)dU, (void)dhyp, (void)dlogits, (void)U, (void)hyp, (void)N, (void)RR, (void)c;
}
static void m_sam_loss(tr_backend *be, float *dlogits, float *diou, const float *logits, const float *iou,
                       const uint8_t *masks, const uint8_t *valid, int N, int RR, float scale, int count,
                       double *sums)
{
    (void)dlogits, (void)diou, (void)logits, (void)iou, (void)masks, (void)valid, (void)scale;
    (void)count, (void)sums;
    /* the target backend's workspace */
    size_t n = be->sizes->loss_workspace((size_t)N, (size_t)RR);
    if (n) tr_mem_free(&be->mem, tr_mem_alloc(&be->mem, TR_MEM_WORK, n));
}
static void m_copy(tr_backend *be, void *dst, const void *src, size_t n) { (void)be, (void)dst, (void)src, (void)n; }
static void m_span(tr_backend *be, const tr_span *s, int k) { (void)be, (void)s, (void)k; }

/* (a forward and its backward, the input ops, the memory ops: one line each) */
static const tr_fp32_kernels meta_fp32 = {
    .linear_forward = m_linear_forward, .linear_backward = m_linear_backward,
    .attention_forward = m_attention_forward, .attention_backward = m_attention_backward,
    .convt2x2_forward = m_convt_forward, .convt2x2_backward = m_convt_backward,
    .patch_im2col = m_patch_im2col, .image_normalize = m_image_normalize, .pe_dense = m_pe_dense,
    .prompt_tokens_forward = m_prompt_tokens_forward, .prompt_tokens_backward = m_prompt_tokens_backward,
    .keys_forward = m_keys_forward, .keys_backward = m_keys_backward,
    .rows_gather = m_rows_gather, .rows_scatter_add = m_rows_scatter_add,
    .mask_dot_forward = m_mask_dot_forward, .mask_dot_backward = m_mask_dot_backward,
    .sam_loss = m_sam_loss,
    .zero = m_zero, .copy = m_copy, .widen = m_span, .narrow = m_span,
};

/* ---- the ops the CPU gives as they are (tr_fp32_ops) ------------------------------ */

static void m_gemm(tr_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)be, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
    (void)beta, (void)C, (void)ldc;
}
static void m_move(tr_backend *be, void *dst, const void *src, size_t n) { (void)be, (void)dst, (void)src, (void)n; }
static double m_sumsq(tr_backend *be, const float *g, size_t n)
{
    (void)be, (void)g, (void)n;
    return 0.0;
}
static void m_scale(tr_backend *be, float *g, size_t n, float s) { (void)be, (void)g, (void)n, (void)s; }
static void m_adamw(tr_backend *be, float *w, float *m, float *v, const float *g, size_t n, float lr, float beta1,
                    float beta2, float eps, float wd, float bc1, float bc2)
{
    (void)be, (void)w, (void)m, (void)v, (void)g, (void)n, (void)lr, (void)beta1, (void)beta2, (void)eps, (void)wd;
    (void)bc1, (void)bc2;
}
static void m_adamw8bit(tr_backend *be, float *w, uint8_t *mq, uint8_t *vq, float *mabs, float *vabs,
                        const float *qm, const float *qv, const float *g, size_t n, int block, float lr,
                        float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
    (void)be, (void)w, (void)mq, (void)vq, (void)mabs, (void)vabs, (void)qm, (void)qv, (void)g, (void)n;
    (void)block, (void)lr, (void)beta1, (void)beta2, (void)eps, (void)wd, (void)bc1, (void)bc2;
}

/* the CPU's element-wise and LayerNorm ops on typed operands take no workspace (backend_cpu.c) */
static void m_t_ln_forward(tr_backend *be, tr_ten out, float *mean, float *rstd, tr_ten inp, tr_ten w, tr_ten b,
                           int N, int C, float eps)
{
    (void)be, (void)out, (void)mean, (void)rstd, (void)inp, (void)w, (void)b, (void)N, (void)C, (void)eps;
}
static void m_t_ln_stats(tr_backend *be, float *mean, float *rstd, tr_ten inp, int N, int C, float eps)
{
    (void)be, (void)mean, (void)rstd, (void)inp, (void)N, (void)C, (void)eps;
}
static void m_t_ln_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp, tr_ten w,
                            const float *mean, const float *rstd, int N, int C)
{
    (void)be, (void)dinp, (void)dw, (void)db, (void)dout, (void)inp, (void)w, (void)mean, (void)rstd, (void)N;
    (void)C;
}
static void m_t_unary(tr_backend *be, tr_ten out, tr_ten inp, size_t n) { (void)be, (void)out, (void)inp, (void)n; }
static void m_t_binary(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t n)
{
    (void)be, (void)out, (void)a, (void)b, (void)n;
}
static void m_t_add_bcast(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t N, size_t n)
{
    (void)be, (void)out, (void)a, (void)b, (void)N, (void)n;
}

/* (the ops that share a no-op on one line) */
static const tr_ops meta_direct_ops = {
    .gemm = m_gemm,
    .layernorm_forward = m_t_ln_forward, .layernorm_backward = m_t_ln_backward, .layernorm_stats = m_t_ln_stats,
    .gelu_forward = m_t_unary, .relu_forward = m_t_unary, .accumulate = m_t_unary,
    .gelu_backward = m_t_binary, .relu_backward = m_t_binary, .add = m_t_binary,
    .add_bcast = m_t_add_bcast,
    .sumsq = m_sumsq, .scale = m_scale, .adamw = m_adamw, .adamw8bit = m_adamw8bit,
    .upload = m_move, .download = m_move,
};

/* The backend and its op table in one allocation (be first). */
typedef struct meta_backend {
    tr_backend be;
    tr_ops ops;
    /* for a target that computes on a device: the host memory the
     * loader's batches live in, counted apart from the device's (be.mem),
     * which holds the one copy of the batch a step reads (the model's dev) */
    tr_mem host;
} meta_backend;

static void meta_destroy(tr_backend *be)
{
    if (be->host_mem != &be->mem) tr_mem_destroy(be->host_mem);
    tr_mem_destroy(&be->mem);
    free(be);
}

tr_backend *tr_backend_meta_create(const tr_sizes *sizes, const tr_traits *traits)
{
    meta_backend *mb = calloc(1, sizeof *mb);
    if (!mb) return NULL;
    tr_backend *be = &mb->be;
    tr_fp32_ops(&mb->ops, &meta_direct_ops); /* the CPU's widening over no-op kernels: the same workspaces */
    be->name = "meta";
    be->ops = &mb->ops;
    be->fp32 = &meta_fp32;
    be->sizes = sizes ? sizes : &tr_cpu_sizes;
    be->traits = traits ? traits : &tr_cpu_traits;
    tr_mem_init_hooks(&be->mem, &tr_mem_counting_hooks, 1);
    be->host_mem = &be->mem;
    if (!be->traits->widens16) { /* a GPU's: batches in (pinned) host memory, one copy on the device */
        tr_mem_init_hooks(&mb->host, &tr_mem_counting_hooks, 1);
        be->host_mem = &mb->host;
    }
    be->n_threads = 1;
    be->destroy = meta_destroy;
    return be;
}
