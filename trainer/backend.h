/*
 * backend.h - the backend interface of the trainer (DESIGN.md section 8).
 *
 * One model description (model.c) sequences layers; a backend supplies the
 * memory (through its accounting allocator) and every operation as a table of
 * function pointers, tr_ops.  The CPU backend (backend_cpu.c) runs GEMMs
 * through OpenBLAS (or a plain C fallback) and element-wise work on a thread
 * pool; a CUDA backend and a counting "meta" backend (issue 7) provide the
 * same table.  The element-wise math is shared through kernels.h.
 *
 * Conventions of every op:
 *  - all matrices are row-major float32 with the shape given in the comment
 *    (a name like [N, C] means N rows of C contiguous floats), in the
 *    backend's memory (be->mem); the model moves data between it and the
 *    host only through upload and download and never reads a tensor;
 *  - forward ops write (=) their outputs;
 *  - backward ops ACCUMULATE (+=) into every gradient they are given (llm.c):
 *    the caller zeroes gradient buffers once per step; a NULL gradient
 *    pointer means "not needed";
 *  - results never depend on the thread count except for float
 *    reassociation inside the BLAS (work is split so that every output
 *    element is computed by exactly one thread in a fixed order).
 */
#ifndef SA1B_TRAINER_BACKEND_H
#define SA1B_TRAINER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"

typedef struct tr_backend tr_backend;

/* Strides of one attention call: q [N, Tq, *], k/v [N, Tk, *], out [N, Tq, *];
 * head j of a row is the contiguous chunk [j*dh, (j+1)*dh) of the row. */
typedef struct tr_attn_dims {
    int N, Tq, Tk, heads, dh;
    int ldq, ldk, ldv, ldo;      /* row strides in floats */
    size_t sq, sk, sv, so;       /* batch strides in floats */
} tr_attn_dims;

/* Loss of one batch (MODEL.md): flat means over the valid pairs. */
typedef struct tr_loss {
    double loss, focal, dice, iou_mse;
    double miou;   /* mean IoU(logits > 0, target) over valid pairs */
    int n_valid;
} tr_loss;

/* What a backend saves between its ops and the workspaces it takes, known
 * without an instance: the model lays out its activations with them, and
 * the counting backend takes a target backend's so that the planner
 * predicts that backend's peak. */
typedef struct tr_sizes {
    /* floats attention_forward saves in att for attention_backward, per
     * sequence and head, Tq queries over Tk keys (the CPU: the
     * probabilities, Tq * Tk; a fused kernel: the softmax statistics) */
    size_t (*attention_saved)(size_t Tq, size_t Tk);
    /* bytes of workspace attention_backward takes for N sequences of
     * `heads` heads */
    size_t (*attention_workspace)(size_t N, size_t heads, size_t Tq, size_t Tk);
    /* bytes of workspace sam_loss takes for N pairs of RR pixels */
    size_t (*loss_workspace)(size_t N, size_t RR);
    /* floats of the scratch convt2x2 takes for `pixels` input pixels and
     * Co output channels (the CPU: the GEMM's output before its scatter,
     * 4 * Co per pixel) */
    size_t (*convt_scratch)(size_t pixels, size_t Co);
    /* the granularity of the decoder: pairs per chunk for a batch of
     * n_pairs (the CPU: at most 4, and at least 4 chunks when there are
     * enough pairs; a GPU wants them all at once) */
    int (*dec_chunk)(int n_pairs);
} tr_sizes;

/* The CPU backend's (backend_cpu.c). */
extern const tr_sizes tr_cpu_sizes;

/* An op that cannot get a workspace returns without computing: the
 * allocator records the failure (tr_mem_take_failure) and the model's step
 * that called it returns an out-of-memory error. */
typedef struct tr_ops {
    /* C[M,N] = alpha * op(A) op(B) + beta * C, row-major; op(A) is [M,K]. */
    void (*gemm)(tr_backend *be, int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* out[N,O] = inp[N,I] w[O,I]^T + b[O] (b may be NULL). */
    void (*linear_forward)(tr_backend *be, float *out, const float *inp, const float *w,
                           const float *b, int N, int I, int O);
    /* dinp[N,I] += dout w; dw[O,I] += dout^T inp; db[O] += sum_n dout (double). */
    void (*linear_backward)(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int I, int O);

    /* out[N,C] = LayerNorm(inp[N,C]; w[C], b[C], eps); mean[N], rstd[N] saved. */
    void (*layernorm_forward)(tr_backend *be, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C, float eps);
    void (*layernorm_backward)(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean,
                               const float *rstd, int N, int C);
    /* mean[N], rstd[N] of inp[N,C]: the statistics layernorm_forward saves, the same bits
     * (recomputed for the backward instead of stored; may be NULL: the caller then runs
     * layernorm_forward into a scratch output). */
    void (*layernorm_stats)(tr_backend *be, float *mean, float *rstd, const float *inp, int N, int C,
                            float eps);

    /* Element-wise over n: out = gelu(inp) / relu(inp); backward dinp += dout * f'(inp). */
    void (*gelu_forward)(tr_backend *be, float *out, const float *inp, size_t n);
    void (*gelu_backward)(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n);
    void (*relu_forward)(tr_backend *be, float *out, const float *inp, size_t n);
    void (*relu_backward)(tr_backend *be, float *dinp, const float *dout, const float *inp, size_t n);

    /* out[n] = a + b;  dst[n] += src;  dst[n] = 0. */
    void (*add)(tr_backend *be, float *out, const float *a, const float *b, size_t n);
    void (*accumulate)(tr_backend *be, float *dst, const float *src, size_t n);
    void (*zero)(tr_backend *be, float *dst, size_t n);
    /* out[N, n] = a[N, n] + b[n] (b added to every row of n floats). */
    void (*add_bcast)(tr_backend *be, float *out, const float *a, const float *b, size_t N, size_t n);

    /* Multi-head softmax attention without projections:
     * out_j = softmax(q_j k_j^T / sqrt(dh)) v_j per head j; att [N, heads,
     * tr_sizes.attention_saved(Tq, Tk)] keeps what the backward needs (the
     * CPU: the probabilities [N, heads, Tq, Tk]). */
    void (*attention_forward)(tr_backend *be, float *out, float *att, const float *q, const float *k,
                              const float *v, const tr_attn_dims *d);
    /* dq/dk/dv (same strides as q/k/v) += gradients from dout. */
    void (*attention_backward)(tr_backend *be, float *dq, float *dk, float *dv, const float *dout,
                               const float *q, const float *k, const float *v, const float *att,
                               const tr_attn_dims *d);

    /* ConvTranspose 2x2 stride 2 on channels-last pixels:
     * inp [N, H*W, Ci] (pixel r*W+c), w [Ci, Co, 2, 2] (PyTorch layout), b [Co]
     * -> out [N, 2H*2W, Co] with out[(2r+i)*2W + 2c+j, o] = b[o] + sum_ch inp[r*W+c, ch] w[ch,o,i,j].
     * scratch [tr_sizes.convt_scratch(N*H*W, Co)] is workspace the caller provides (contents
     * irrelevant). */
    void (*convt2x2_forward)(tr_backend *be, float *out, const float *inp, const float *w,
                             const float *b, float *scratch, int N, int H, int W, int Ci, int Co);
    void (*convt2x2_backward)(tr_backend *be, float *dinp, float *dw, float *db, const float *dout,
                              const float *inp, const float *w, float *scratch, int N, int H, int W,
                              int Ci, int Co);

    /* Normalised patches: patches [B*G*G, 3*P*P], row = image b, token r*G+c,
     * column = (channel, row, column) inside the patch; image u8 [B, S, S, 3];
     * content [B, 2] (width, height) in pixels: outside it the value is 0. */
    void (*patch_im2col)(tr_backend *be, float *patches, const uint8_t *image, const int32_t *content,
                         int B, int S, int P);
    /* Normalised image [B, 3, S, S] (the dump's in.image), same rule. */
    void (*image_normalize)(tr_backend *be, float *out, const uint8_t *image, const int32_t *content,
                            int B, int S);

    /* Dense PE [G*G, C] of the grid cell centres, gauss [2, C/2]. */
    void (*pe_dense)(tr_backend *be, float *out, const float *gauss, int G, int C);
    /* Decoder tokens T0 [NP, 2+K, C]: iou_tok, mask_tok, then per point
     * PE((x+.5)/S, (y+.5)/S) + label_emb[label] or not_a_point for label -1.
     * points [NP, K, 2], labels [NP, K] in {-1, 0, 1} (checked by the caller). */
    void (*prompt_tokens_forward)(tr_backend *be, float *T0, const float *points, const int32_t *labels,
                                  const float *gauss, const float *label_emb, const float *not_a_point,
                                  const float *iou_tok, const float *mask_tok, int NP, int K, int C, int S);
    void (*prompt_tokens_backward)(tr_backend *be, float *dlabel_emb, float *dnot_a_point,
                                   float *diou_tok, float *dmask_tok, const float *dT0,
                                   const int32_t *labels, int NP, int K, int C);
    /* Image keys per pair: Kimg [B*M, GG, C] = emb [B, GG, C] + no_mask [C]. */
    void (*keys_forward)(tr_backend *be, float *Kimg, const float *emb, const float *no_mask, int B,
                         int M, int GG, int C);
    void (*keys_backward)(tr_backend *be, float *demb, float *dno_mask, const float *dKimg, int B,
                          int M, int GG, int C);

    /* out [N, C] = inp [N, T, C] row t; backward dinp[:, t, :] += dout. */
    void (*rows_gather)(tr_backend *be, float *out, const float *inp, int N, int T, int C, int t);
    void (*rows_scatter_add)(tr_backend *be, float *dinp, const float *dout, int N, int T, int C, int t);

    /* logits [N, RR] = U [N, RR, c] . hyp [N, c] per pixel. */
    void (*mask_dot_forward)(tr_backend *be, float *logits, const float *U, const float *hyp, int N,
                             int RR, int c);
    void (*mask_dot_backward)(tr_backend *be, float *dU, float *dhyp, const float *dlogits,
                              const float *U, const float *hyp, int N, int RR, int c);

    /* MODEL.md loss over N pairs of RR pixels: logits [N, RR], iou [N], masks u8
     * [N, RR] (0/1), valid u8 [N].  Writes (=) dlogits [N, RR] and diou [N],
     * the gradients of scale * (the sum of the valid pairs' losses) / count
     * (zero for invalid pairs; all zero when count is 0: the caller knows
     * the valid pairs from its host batch, here or over a whole batch
     * computed in chunks), and adds the valid pairs' sums of the focal,
     * dice and IoU-MSE terms and of the IoU to sums [4] (doubles, backend
     * memory: read once per step). */
    void (*sam_loss)(tr_backend *be, float *dlogits, float *diou, const float *logits, const float *iou,
                     const uint8_t *masks, const uint8_t *valid, int N, int RR, float scale, int count,
                     double *sums);

    /* Optimizer helpers: sum of squares (double); g *= s; AdamW over n elements. */
    double (*sumsq)(tr_backend *be, const float *g, size_t n);
    void (*scale)(tr_backend *be, float *g, size_t n, float s);
    void (*adamw)(tr_backend *be, float *w, float *m, float *v, const float *g, size_t n, float lr,
                  float beta1, float beta2, float eps, float wd, float bc1, float bc2);
    /* 8-bit AdamW (quant8.h) over n elements in blocks of `block`: moments as codes mq/vq [n]
     * into the signed map qm [256] (m) and the unsigned map qv [256] (v) times the block's
     * absmax mabs/vabs [ceil(n/block)]; dequantise, update in fp32 as adamw, requantise. */
    void (*adamw8bit)(tr_backend *be, float *w, uint8_t *mq, uint8_t *vq, float *mabs, float *vabs,
                      const float *qm, const float *qv, const float *g, size_t n, int block, float lr,
                      float beta1, float beta2, float eps, float wd, float bc1, float bc2);

    /* Memory movement of the training features (issue 7); never rounded.
     * copy: dst[n] = src (bit exact); round_to: dst[n] = src rounded to
     * precision prec (TR_PREC_* of kernels.h) as fp32 values;
     * pack16: dst16[n] = the 16-bit code of src rounded to nearest even
     * (exact when src is already rounded to prec: stored activations;
     * the compute weights are packed from the fp32 masters);
     * unpack16: dst[n] = the value of src16. */
    void (*copy)(tr_backend *be, float *dst, const float *src, size_t n);
    /* Between host memory and the backend's: upload dst (backend) = src
     * (host), download dst (host) = src (backend), n bytes, complete on
     * return. */
    void (*upload)(tr_backend *be, void *dst, const void *src, size_t n);
    void (*download)(tr_backend *be, void *dst, const void *src, size_t n);
    void (*round_to)(tr_backend *be, float *dst, const float *src, size_t n, int prec);
    void (*pack16)(tr_backend *be, uint16_t *dst, const float *src, size_t n, int prec);
    void (*unpack16)(tr_backend *be, float *dst, const uint16_t *src, size_t n, int prec);
} tr_ops;

struct tr_backend {
    const char *name;    /* "cpu" */
    const tr_ops *ops;
    const tr_sizes *sizes;
    tr_mem mem;          /* accounting of every tensor (device memory on a GPU) */
    /* Host memory the loader's batches live in (pinned on a GPU, so that
     * uploads are asynchronous); the CPU and meta backends' own mem, where
     * host and device memory are one: then (host_mem == &mem) a host
     * tensor may be an op's operand as it is, without an upload. */
    tr_mem *host_mem;
    int n_threads;       /* host threads the backend computes with */
    void *impl;          /* the backend's own state (the CPU's thread pool) */
    void (*destroy)(tr_backend *be); /* frees impl, mem and be (tr_backend_free) */
    /* Storage precision of activations and activation gradients
     * (TR_PREC_FP32, _BF16, _FP16 of kernels.h; set by the model): with a
     * 16-bit precision every op rounds each activation or activation
     * gradient it writes to that precision (the values a 16-bit tensor
     * would hold; arithmetic stays fp32), while parameter gradients (dw,
     * db, token and embedding gradients), LayerNorm statistics, losses and
     * optimizer arithmetic stay fp32.  0 (fp32) by default. */
    int prec;
    /* Per-op staging (model.c): while a model whose 16-bit activations and
     * activation gradients live only in its stash runs, ops is model.c's
     * staging table and stage_ops the backend's own: each op's operands are
     * unpacked into a workspace for that op alone and its results packed
     * back.  stage is that model; NULL (and stage_ops NULL) otherwise. */
    const tr_ops *stage_ops;
    void *stage;
};

/* The factory (backend.c): a backend by name ("cpu"); n_threads >= 1 sets
 * the CPU's thread pool and BLAS threads.  NULL with a message in err when
 * the name is unknown or not compiled in. */
tr_backend *tr_backend_create(const char *name, int n_threads, char *err, size_t err_len);
void tr_backend_free(tr_backend *be);

/* The backends themselves (backend_cpu.c; backend_meta.c: the planner's
 * counting backend, whose memory is read-only zeros). */
tr_backend *tr_backend_cpu_create(int n_threads, char *err, size_t err_len);
tr_backend *tr_backend_meta_create(const tr_sizes *target);

/* Host access to backend memory, for files (checkpoints, states, dumps):
 * tr_host_view: n bytes at src readable on the host, src itself where the
 * backend's memory is the host's (*owned NULL), else a downloaded copy in
 * *owned for the caller to free(); NULL when out of host memory.
 * tr_host_stage: a host buffer to fill for n bytes bound for dst (dst
 * itself, or *owned), and tr_host_commit, which uploads *owned to dst and
 * frees it (nothing when owned is NULL). */
const void *tr_host_view(tr_backend *be, const void *src, size_t n, void **owned);
void *tr_host_stage(tr_backend *be, void *dst, size_t n, void **owned);
void tr_host_commit(tr_backend *be, void *dst, void *owned, size_t n);

/* The sizes of the backend of that name (what the planner counts for it);
 * NULL when the name is unknown or not compiled in. */
const tr_sizes *tr_backend_sizes(const char *name);

/* Plain C GEMM, row-major, same contract as tr_ops.gemm (the fallback when
 * OpenBLAS is absent; also a reference for tests). */
void tr_gemm_ref(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);

#endif
