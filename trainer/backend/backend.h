/*
 * backend.h - the backend interface of the trainer (DESIGN.md section 8).
 *
 * One model description (model/) sequences layers; a backend supplies the
 * memory (through its accounting allocator) and every operation as a table of
 * function pointers, tr_ops.  The CPU backend (backend_cpu.c) runs GEMMs
 * through OpenBLAS (or a plain C fallback) and element-wise work on a thread
 * pool; a CUDA backend and a counting "meta" backend (issue 7) provide the
 * same table.  The element-wise math is shared through kernels.h.
 *
 * Conventions of every op:
 *  - all matrices are row-major with the shape given in the comment (a
 *    name like [N, C] means N rows of C contiguous elements), in the
 *    backend's memory (be->mem), typed (tr_ten: fp32, bf16 or fp16) where
 *    they are activations or compute weights; the model moves data between
 *    it and the host only through upload and download and never reads a
 *    tensor;
 *  - forward ops write (=) their outputs;
 *  - backward ops ACCUMULATE (+=) into every gradient they are given (llm.c):
 *    the caller zeroes gradient buffers once per step; a NULL gradient
 *    pointer means "not needed"; one exception, attention_backward, WRITES
 *    (=) dq, dk and dv (as a fused attention kernel or cuDNN does: the
 *    caller neither zeroes them nor finds their earlier contents there);
 *  - results never depend on the thread count except for float
 *    reassociation inside the BLAS (work is split so that every output
 *    element is computed by exactly one thread in a fixed order).
 */
#ifndef SA1B_TRAINER_BACKEND_H
#define SA1B_TRAINER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/alloc.h"
#include "common/kernels.h"

typedef struct tr_backend tr_backend;

/* Strides of one attention call: q [N, Tq, *], k/v [N, Tk, *], out [N, Tq, *];
 * head j of a row is the contiguous chunk [j*dh, (j+1)*dh) of the row. */
typedef struct tr_attn_dims {
    int N, Tq, Tk, heads, dh;
    int ldq, ldk, ldv, ldo;      /* row strides in elements */
    size_t sq, sk, sv, so;       /* batch strides in elements */
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
    /* elements attention_forward saves in att for attention_backward, per
     * sequence and head, Tq queries over Tk keys (the CPU: the
     * probabilities, Tq * Tk; a GPU: the softmax statistics, one fp32 a
     * query row, as attention_forward says) */
    size_t (*attention_saved)(size_t Tq, size_t Tk);
    /* bytes of workspace attention_backward takes for the call d */
    size_t (*attention_workspace)(const tr_attn_dims *d);
    /* bytes of workspace sam_loss takes for N pairs of RR pixels */
    size_t (*loss_workspace)(size_t N, size_t RR);
    /* floats of the scratch convt2x2 takes for `pixels` input pixels and
     * Co output channels (the CPU: the GEMM's output before its scatter,
     * 4 * Co per pixel) */
    size_t (*convt_scratch)(size_t pixels, size_t Co);
    /* bytes of workspace attention_forward takes for the call d (NULL:
     * none, as on the CPU) */
    size_t (*attention_fwd_workspace)(const tr_attn_dims *d);
} tr_sizes;

/* How a backend wants the model's work cut and its operands given, known
 * without an instance: the model cuts its passes with them, and the
 * counting backend takes a target backend's. */
typedef struct tr_traits {
    /* the granularity of the decoder: pairs per chunk for a batch of
     * n_pairs (the CPU: at most 4, and at least 4 chunks when there are
     * enough pairs; a GPU wants them all at once) */
    int (*dec_chunk)(int n_pairs);
    /* and of the encoder: images per pass for a batch of B (the CPU: 1,
     * whose activations stay in cache; a GPU wants them all at once); the
     * model takes the largest divisor of B not above it */
    int (*enc_images)(int B);
    /* 1: the backend computes in fp32 only and widens an op's 16-bit
     * operands into a workspace for that op (backend_widen.h: the CPU);
     * 0: its kernels read 16-bit operands as they are (a GPU) */
    int widens16;
} tr_traits;

/* A typed operand: elements of dtype dt (TR_PREC_FP32, _BF16 or _FP16 of
 * common/precision.h, whose tr_prec_size and tr_prec_16 tell its size) from
 * p, in backend memory.  p NULL: "not given". */
typedef struct tr_ten {
    void *p;
    int dt;
} tr_ten;

static inline tr_ten tr_f32(const float *p) { return (tr_ten){(void *)p, TR_PREC_FP32}; }
static inline tr_ten tr_typed(const void *p, int dt) { return (tr_ten){(void *)p, dt}; }

/* An op that cannot get a workspace returns without computing: the
 * allocator records the failure (tr_mem_take_failure) and the model's step
 * that called it returns an out-of-memory error.
 *
 * Activations, activation gradients and the weights an op computes with
 * are typed operands (tr_ten): each may be fp32, bf16 or fp16 on its own;
 * what the backend does with 16-bit ones is its business (the CPU widens
 * them to fp32 for its kernels and rounds what it writes to nearest even;
 * a GPU computes on them).  An op writes each typed output in that
 * output's type: a 16-bit output holds the fp32 result rounded to nearest
 * even, an fp32 one the fp32 result itself.  Parameter gradients (dw, db,
 * the tokens' and embeddings' gradients), LayerNorm statistics, the loss
 * sums and the optimizer's tensors are fp32 (float *). */
typedef struct tr_ops {
    /* C[M,N] = alpha * op(A) op(B) + beta * C, row-major, fp32; op(A) is [M,K]. */
    void (*gemm)(tr_backend *be, int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* out[N,O] = inp[N,I] w[O,I]^T + b[O] (b may be NULL). */
    void (*linear_forward)(tr_backend *be, tr_ten out, tr_ten inp, tr_ten w, tr_ten b, int N, int I, int O);
    /* dinp[N,I] += dout w; dw[O,I] += dout^T inp; db[O] += sum_n dout (double). */
    void (*linear_backward)(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp,
                            tr_ten w, int N, int I, int O);

    /* out[N,C] = LayerNorm(inp[N,C]; w[C], b[C], eps); mean[N], rstd[N] saved. */
    void (*layernorm_forward)(tr_backend *be, tr_ten out, float *mean, float *rstd, tr_ten inp, tr_ten w,
                              tr_ten b, int N, int C, float eps);
    void (*layernorm_backward)(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp,
                               tr_ten w, const float *mean, const float *rstd, int N, int C);
    /* mean[N], rstd[N] of inp[N,C]: the statistics layernorm_forward saves, the same bits
     * (recomputed for the backward instead of stored). */
    void (*layernorm_stats)(tr_backend *be, float *mean, float *rstd, tr_ten inp, int N, int C, float eps);

    /* Element-wise over n: out = gelu(inp) / relu(inp); backward dinp += dout * f'(inp). */
    void (*gelu_forward)(tr_backend *be, tr_ten out, tr_ten inp, size_t n);
    void (*gelu_backward)(tr_backend *be, tr_ten dinp, tr_ten dout, tr_ten inp, size_t n);
    void (*relu_forward)(tr_backend *be, tr_ten out, tr_ten inp, size_t n);
    void (*relu_backward)(tr_backend *be, tr_ten dinp, tr_ten dout, tr_ten inp, size_t n);

    /* out[n] = a + b;  dst[n] += src;  dst[n] = 0. */
    void (*add)(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t n);
    void (*accumulate)(tr_backend *be, tr_ten dst, tr_ten src, size_t n);
    void (*zero)(tr_backend *be, tr_ten dst, size_t n);
    /* out[N, n] = a[N, n] + b[n] (b added to every row of n elements). */
    void (*add_bcast)(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t N, size_t n);

    /* Multi-head softmax attention without projections:
     * out_j = softmax(q_j k_j^T / sqrt(dh)) v_j per head j; att [N, heads,
     * tr_sizes.attention_saved(Tq, Tk)] keeps what the backward needs:
     *  - the CPU: the probabilities [N, heads, Tq, Tk], in att's type (out
     *    is computed from the probabilities as stored);
     *  - every GPU path (blocked, fused, flash, cuDNN): one layout, cuDNN's
     *    Stats, so that any path's forward feeds any path's backward: the
     *    log-sum-exp of each query row, fp32 [N, heads, Tq] dense from att.p
     *    (row t of head j of sequence n: float (n heads + j) Tq + t),
     *    whatever att's type: lse = log(sum_k exp(s_k)) over the row's
     *    scaled scores s_k = q.k_k / sqrt(dh), the natural log, its maximum
     *    included (m + log(sum_k exp(s_k - m))), so that P = exp(s - lse).
     *    (attention_saved(Tq, Tk) is 2 Tq elements: a 16-bit att holds the
     *    lse exactly, an fp32 one leaves its second half unused.) */
    void (*attention_forward)(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v,
                              const tr_attn_dims *d);
    /* dq/dk/dv (same strides as q/k/v) = the gradients from dout: WRITTEN,
     * not accumulated (NULL: not needed, nothing written), every element of
     * the heads' columns of their rows, so that q, k and v packed in one
     * tensor [N, T, 3 heads dh] get their gradients packed likewise.  out is
     * the forward's output (dout's strides, ldo and so): a backward that
     * recomputes P from the statistics takes D = rowsum(dout * out) from it,
     * as flash attention's does (every GPU path: it must be given); the
     * CPU, which keeps its probabilities, does not read it. */
    void (*attention_backward)(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out,
                               tr_ten q, tr_ten k, tr_ten v, tr_ten att, const tr_attn_dims *d);

    /* ConvTranspose 2x2 stride 2 on channels-last pixels:
     * inp [N, H*W, Ci] (pixel r*W+c), w [Ci, Co, 2, 2] (PyTorch layout), b [Co]
     * -> out [N, 2H*2W, Co] with out[(2r+i)*2W + 2c+j, o] = b[o] + sum_ch inp[r*W+c, ch] w[ch,o,i,j].
     * scratch [tr_sizes.convt_scratch(N*H*W, Co)] floats is workspace the caller provides
     * (contents irrelevant). */
    void (*convt2x2_forward)(tr_backend *be, tr_ten out, tr_ten inp, tr_ten w, tr_ten b, float *scratch, int N,
                             int H, int W, int Ci, int Co);
    void (*convt2x2_backward)(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp,
                              tr_ten w, float *scratch, int N, int H, int W, int Ci, int Co);

    /* Normalised patches: patches [B*G*G, 3*P*P], row = image b, token r*G+c,
     * column = (channel, row, column) inside the patch; image u8 [B, S, S, 3];
     * content [B, 2] (width, height) in pixels: outside it the value is 0. */
    void (*patch_im2col)(tr_backend *be, tr_ten patches, const uint8_t *image, const int32_t *content, int B,
                         int S, int P);
    /* Normalised image [B, 3, S, S] (the dump's in.image), same rule. */
    void (*image_normalize)(tr_backend *be, tr_ten out, const uint8_t *image, const int32_t *content, int B,
                            int S);

    /* Dense PE [G*G, C] of the grid cell centres, gauss [2, C/2]. */
    void (*pe_dense)(tr_backend *be, tr_ten out, const float *gauss, int G, int C);
    /* Decoder tokens T0 [NP, 2+K, C]: iou_tok, mask_tok, then per point
     * PE((x+.5)/S, (y+.5)/S) + label_emb[label] or not_a_point for label -1.
     * points [NP, K, 2], labels [NP, K] in {-1, 0, 1} (checked by the caller). */
    void (*prompt_tokens_forward)(tr_backend *be, tr_ten T0, const float *points, const int32_t *labels,
                                  const float *gauss, tr_ten label_emb, tr_ten not_a_point, tr_ten iou_tok,
                                  tr_ten mask_tok, int NP, int K, int C, int S);
    void (*prompt_tokens_backward)(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                                   float *dmask_tok, tr_ten dT0, const int32_t *labels, int NP, int K, int C);
    /* Image keys per pair: Kimg [B*M, GG, C] = emb [B, GG, C] + no_mask [C]. */
    void (*keys_forward)(tr_backend *be, tr_ten Kimg, tr_ten emb, tr_ten no_mask, int B, int M, int GG, int C);
    void (*keys_backward)(tr_backend *be, tr_ten demb, float *dno_mask, tr_ten dKimg, int B, int M, int GG,
                          int C);

    /* out [N, C] = inp [N, T, C] row t; backward dinp[:, t, :] += dout. */
    void (*rows_gather)(tr_backend *be, tr_ten out, tr_ten inp, int N, int T, int C, int t);
    void (*rows_scatter_add)(tr_backend *be, tr_ten dinp, tr_ten dout, int N, int T, int C, int t);

    /* logits [N, RR] = U [N, RR, c] . hyp [N, c] per pixel. */
    void (*mask_dot_forward)(tr_backend *be, tr_ten logits, tr_ten U, tr_ten hyp, int N, int RR, int c);
    void (*mask_dot_backward)(tr_backend *be, tr_ten dU, tr_ten dhyp, tr_ten dlogits, tr_ten U, tr_ten hyp, int N,
                              int RR, int c);

    /* MODEL.md loss over N pairs of RR pixels: logits [N, RR], iou [N], masks u8
     * [N, RR] (0/1), valid u8 [N].  Writes (=) dlogits [N, RR] and diou [N],
     * the gradients of scale * (the sum of the valid pairs' losses) / count
     * (zero for invalid pairs; all zero when count is 0: the caller knows
     * the valid pairs from its host batch, here or over a whole batch
     * computed in chunks), and adds the valid pairs' sums of the focal,
     * dice and IoU-MSE terms and of the IoU to sums [4] (doubles, backend
     * memory: read once per step). */
    void (*sam_loss)(tr_backend *be, tr_ten dlogits, tr_ten diou, tr_ten logits, tr_ten iou, const uint8_t *masks,
                     const uint8_t *valid, int N, int RR, float scale, int count, double *sums);

    /* Optimizer helpers (fp32): sum of squares (double); g *= s; AdamW over n elements. */
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

    /* dst[n] = src[n] in dst's type: the same bits when the types agree,
     * else rounded to nearest even (16-bit from fp32) or exact (fp32 from
     * 16-bit; bf16 <-> fp16 through fp32). */
    void (*convert)(tr_backend *be, tr_ten dst, tr_ten src, size_t n);
    /* Between host memory and the backend's: upload dst (backend) = src
     * (host), download dst (host) = src (backend), n bytes, complete on
     * return. */
    void (*upload)(tr_backend *be, void *dst, const void *src, size_t n);
    void (*download)(tr_backend *be, void *dst, const void *src, size_t n);
} tr_ops;

struct tr_backend {
    const char *name;    /* "cpu" */
    const tr_ops *ops;
    const tr_sizes *sizes;
    const tr_traits *traits;
    tr_mem mem;          /* accounting of every tensor (device memory on a GPU) */
    /* Host memory the loader's batches live in (pinned on a GPU, so that
     * uploads are asynchronous); the CPU and meta backends' own mem, where
     * host and device memory are one: then (host_mem == &mem) a host
     * tensor may be an op's operand as it is, without an upload. */
    tr_mem *host_mem;
    int n_threads;       /* host threads the backend computes with */
    void *impl;          /* the backend's own state (the CPU's thread pool) */
    /* A backend that computes in fp32 only (the CPU, and the meta backend
     * that counts for it): the fp32 kernels its typed ops widen 16-bit
     * operands for (backend_widen.h); NULL otherwise. */
    const struct tr_fp32_kernels *fp32;
    void (*destroy)(tr_backend *be); /* frees impl, mem and be (tr_backend_free) */
    /* A backend whose ops cannot return an error (a GPU's run on a stream):
     * 1 with its first failure in err, 0 while there is none; NULL for a
     * backend whose ops cannot fail so (tr_backend_error). */
    int (*error)(tr_backend *be, char *err, size_t err_len);
};

/* How a backend is made (registry/registry.h): every backend's settings,
 * and those that only some backends have (the others ignore them). */
typedef struct tr_backend_opts {
    int n_threads;       /* host threads, >= 1: the CPU's pool and BLAS threads */
    int device;          /* a GPU backend's device (a rank's: its local rank) */
    int tf32;            /* a GPU backend's fp32 GEMMs on TF32 tensor cores (10 bits of mantissa) */
    int attention;       /* the path of a GPU backend's attention (backend_cuda.h's TR_CUDA_ATTN_*; 0: its rule) */
    int sync_each;       /* a GPU backend waits for every op (a failure then names its op) */
    const char *profile; /* a GPU backend's file of device time by call site; NULL: none */
} tr_backend_opts;

/* be's first failure (1 and err), or 0 (none, or a backend whose ops cannot fail so). */
static inline int tr_backend_error(tr_backend *be, char *err, size_t err_len)
{
    return be && be->error ? be->error(be, err, err_len) : 0;
}

/* Frees be (NULL: nothing); the backends are made by the registry
 * (registry/registry.h). */
void tr_backend_free(tr_backend *be);

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

#endif
