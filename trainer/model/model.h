/*
 * model.h - the compact SAM of MODEL.md as one model description: its
 * configuration, the parameter table (names and shapes of the checkpoint),
 * the activation table, initialisation, and the forward and backward pass of
 * one batch, sequenced over the ops of a backend (backend.h).  Its files:
 * model_params.c (presets, the geometry, the parameter table, freeze groups,
 * initialisation), model_layout.c (the activation table, the layout, the
 * model's lifetime, the typed operands of the ops) and model_seq.c (the
 * sequence: forward, backward, the step's entry points, FLOPs).
 *
 * Memory (llm.c style): every parameter lives in one allocation pointed into
 * by tr_params; gradients live in a second allocation with the same layout
 * (a second tr_params).  Activations likewise: one allocation pointed into by
 * tr_acts, and a tr_acts for their gradients in a second one: gradients that
 * flow between parts are persistent, those inside one encoder block, one
 * decoder layer or the decoder tail share one union region (each group is
 * zeroed before its backward; the region also holds the ConvTranspose
 * workspace, free during the forward).  Tensors the backward does not read
 * (attention probabilities' gradients, ...) have none.  Every activation is
 * listed in a table of (name, pointer, size) so that memory is visible and
 * countable.
 */
#ifndef SA1B_TRAINER_MODEL_H
#define SA1B_TRAINER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "data/batch.h"
#include "common/kernels.h"

/* Hyper-parameters of MODEL.md (names as there; G = S/P, R = 4G). */
typedef struct tr_config {
    int S, P, E, L, H, C, h, D;
} tr_config;

/* The geometry that follows from a configuration and K points per prompt
 * (MODEL.md's names), computed in one place: the model's once at init
 * (tr_model.geom), code without a model (the planner) by tr_geom_of.
 * Every value fits an int for a configuration tr_config_check accepts. */
typedef struct tr_geom {
    int G;   /* S / P: the token grid's side */
    int GG;  /* G * G: tokens per image (the encoder's rows, the decoder's keys) */
    int R;   /* 4 * G: the mask logits' side */
    int RR;  /* R * R = 16 * G * G: mask logits per pair */
    int T;   /* K + 2: prompt tokens per pair (IoU token, mask token, K points) */
    int PP3; /* 3 * P * P: values of one patch (the patch embedding's input width) */
} tr_geom;

/* The geometry of configuration c (checked: tr_config_check) with K points
 * per prompt. */
tr_geom tr_geom_of(const tr_config *c, int K);

/* Fills cfg with a named preset ("small" or "tiny"); -1 when unknown. */
int tr_config_preset(const char *name, tr_config *cfg);
/* 0 when cfg is usable, else -1 with a reason in err (S % P, E % H, C % 8,
 * (C/2) % h, sizes in range). */
int tr_config_check(const tr_config *cfg, char *err, size_t err_len);

/* One entry of the parameter table. */
typedef struct tr_param_info {
    char name[64];
    int ndim;
    int shape[4];
    size_t offset; /* in floats, into the parameter allocation */
    size_t count;  /* elements */
    int decay;     /* 1: weight decay applies (Linear/ConvTranspose weights) */
    int init;      /* how tr_model_init_params fills it (model_params.c's INIT_*) */
} tr_param_info;

typedef struct tr_attn_p { float *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b; } tr_attn_p;

typedef struct tr_enc_block_p {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} tr_enc_block_p;

typedef struct tr_dec_layer_p {
    tr_attn_p sa;
    float *n1_w, *n1_b;
    tr_attn_p t2i;
    float *n2_w, *n2_b;
    float *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    float *n3_w, *n3_b;
    tr_attn_p i2t;
    float *n4_w, *n4_b;
} tr_dec_layer_p;

#define TR_MAX_L 32
#define TR_MAX_D 8

/* Pointers into one allocation (parameters, or their gradients). */
typedef struct tr_params {
    float *patch_w, *patch_b, *pos;                    /* [E,3PP] [E] [GG,E] */
    tr_enc_block_p blk[TR_MAX_L];
    float *neck_w, *neck_ln_w, *neck_ln_b;             /* [C,E] [C] [C] */
    float *label_emb, *not_a_point, *no_mask;          /* [2,C] [C] [C] */
    float *iou_token, *mask_token;                     /* [C] [C] */
    tr_dec_layer_p lay[TR_MAX_D];
    tr_attn_p fin;
    float *fin_n_w, *fin_n_b;
    float *up1_w, *up1_b, *upln_w, *upln_b, *up2_w, *up2_b; /* [C,C/4,2,2] [C/4] [C/4] [C/4] [C/4,C/8,2,2] [C/8] */
    float *hyp_w[3], *hyp_b[3];                        /* C->C, C->C, C->C/8 */
    float *iouh_w[3], *iouh_b[3];                      /* C->C, C->C, C->1 */
} tr_params;

/* Activations and activation gradients are tensors of the model's
 * activation type (tr_model.adt: fp32, bf16 or fp16; void *: their element
 * size is the model's, mdl_at in model_layout.h); the LayerNorm statistics
 * and the ConvTranspose's scratch are fp32 (float *). */

/* Activations of one attention block A(q, k, v). */
typedef struct tr_attn_a {
    void *q, *k, *v;    /* [N, Tq, Ci] [N, Tk, Ci] [N, Tk, Ci] */
    void *att;          /* [N, h, Tq, Tk] */
    void *ao;           /* [N, Tq, Ci] before out_proj */
    void *out;          /* [N, Tq, C] */
} tr_attn_a;

/* An encoder block's tensors (shown for BT = B*G*G rows): the encoder runs
 * in passes of enc_ni images, so they hold either every image (own memory)
 * or one pass's rows (a slot); m->a then points at the current pass's rows
 * (the LayerNorm statistics, when stored, hold every image). */
typedef struct tr_enc_block_a {
    void *ln1;                    /* [BT,E] */
    float *ln1_m, *ln1_r;         /* [BT] [BT] (BT = B*G*G) */
    void *qkv, *att, *ao;         /* [BT,3E] [B,H,GG,GG] [BT,E] */
    void *xmid;                   /* [BT,E] after the attention residual */
    void *ln2;
    float *ln2_m, *ln2_r;
    void *fc1, *gelu;             /* [BT,4E] */
    void *xout;                   /* [BT,E] */
} tr_enc_block_a;

typedef struct tr_dec_layer_a {
    void *sa_qin;                 /* [NP,T,C]: T + T0 (l > 0) */
    tr_attn_a sa;
    void *t1pre, *t1;             /* [NP,T,C] */
    float *n1_m, *n1_r;
    void *t2i_qin;                /* [NP,T,C] T1 + T0 */
    void *kpe;                    /* [NP,GG,C] K + Kpe (t2i keys, i2t queries) */
    tr_attn_a t2i;
    void *t2pre, *t2;
    float *n2_m, *n2_r;
    void *fc1, *relu, *t3pre, *t3; /* [NP,T,8C] ... */
    float *n3_m, *n3_r;
    void *i2t_kin;                /* [NP,T,C] T3 + T0 */
    tr_attn_a i2t;
    void *k4pre, *kout;           /* [NP,GG,C] */
    float *n4_m, *n4_r;
} tr_dec_layer_a;

typedef struct tr_acts {
    void *patches;                   /* [GG, 3PP] one image's (a workspace in the gradient union region) */
    void *x0;                        /* [BT, E] after pos */
    tr_enc_block_a blk[TR_MAX_L];
    void *neck, *emb;                /* [BT,C] */
    float *emb_m, *emb_r;            /* [BT] */
    void *dense_pe;                  /* [GG, C] (constant) */
    /* The decoder (everything below) runs per chunk of nc pairs (decoder
     * chunks, see tr_model): its tensors are shown as [NP, ...] but hold
     * either every pair, or one chunk's pairs (--checkpoint-decoder; the
     * LayerNorm statistics hold every pair unless the chunk is recomputed,
     * and none with 16-bit storage: ln_bwd recomputes them); m->a then
     * points at the current chunk's rows.  Their gradients hold one chunk. */
    void *T0;                        /* [NP, T, C] */
    void *Kimg;                      /* [NP, GG, C] */
    tr_dec_layer_a lay[TR_MAX_D];
    void *fin_qin, *fin_kin;         /* [NP,T,C] [NP,GG,C] */
    tr_attn_a fin;
    void *tfpre, *tf;                /* [NP,T,C] */
    float *fin_m, *fin_r;
    void *up1, *upln, *upgelu;       /* [NP,4GG,C/4] */
    float *upln_m, *upln_r;
    void *up2, *U;                   /* [NP,RR,C/8] */
    float *up_scratch;               /* [NP*RR/4, C/2] convT workspace (fp32) */
    void *tmask, *h0, *h0r, *h1, *h1r, *hyp;     /* [NP,C] ... [NP,C/8] */
    void *tiou, *i0, *i0r, *i1, *i1r;            /* [NP,C] */
    void *iou;                       /* [NP] (every pair; the gradient: one chunk): tr_model_get_iou */
    void *logits;                    /* [NP, RR] (every pair; the gradient: one chunk): tr_model_get_logits */
    /* Saved inputs of encoder blocks whose predecessor's activations live
     * in a reused slot (checkpointing, frozen prefix); NULL where the input
     * is the predecessor's own output. */
    void *enc_in[TR_MAX_L];          /* [BT, E] */
    void *enc_out;                   /* [BT, E] the last block's output (the neck's input) when the
                                        block computes in a slot; its gradient (the neck's dx) */
    /* Gradient table only: the gradients of block / layer outputs (one
     * image / one chunk) alternate between two buffers (blk[i].xout is
     * pp_x[i % 2], ...). */
    void *pp_x[2], *pp_t[2], *pp_k[2];
    void *pp_u[3];                   /* the decoder tail's gradients (model_seq.c tail_grads), workspace */
} tr_acts;

typedef struct tr_act_info {
    char name[48];
    void **ptr;    /* the field in the tr_acts it was laid out for */
    size_t count;  /* elements */
    int dt;        /* their type (TR_PREC_*) */
} tr_act_info;

/* Training features that change how the step is computed (issue 7). */
typedef struct tr_model_opts {
    int ckpt_every;    /* 0: keep every activation; N >= 1: keep only the inputs of
                          encoder blocks 0, N, 2N, ... and recompute the blocks of a
                          segment in the backward pass (bit-identical results) */
    int ckpt_decoder;  /* 1: keep no decoder activation: each chunk of pairs is
                          recomputed from the image embedding before its backward */
    int precision;     /* TR_PREC_FP32 (default), TR_PREC_BF16 or TR_PREC_FP16 */
    int keep_ln_stats; /* 16-bit storage recomputes the LayerNorm statistics in the backward
                          (exactly: the forward's op on the same stored input) instead of
                          storing them; 1 stores them (tests: the same gradients) */
} tr_model_opts;

/* Memory layout (tr_model_layout): the encoder runs in passes of enc_ni
 * images (the backend's choice: tr_sizes.enc_images; forward and
 * backward, every mode); an encoder block either owns its activations
 * (every image), or computes in a reused "slot" of one pass's rows (slot
 * i % N with checkpointing, slot 0 when it runs without gradient below the
 * lowest trainable part), its activations then recomputed from a saved
 * input (checkpointing).  The decoder (prompt
 * tokens, image keys, two-way transformer, tail, heads) runs per chunk of
 * dec_chunk pairs (the backend's choice: tr_sizes.dec_chunk), forward and
 * backward, in every mode (so that results are bit-identical between modes
 * for one backend); its activations are laid out for every pair, or for
 * one chunk recomputed from the image embedding (--checkpoint-decoder).
 * Activations and activation gradients are stored in the model's
 * activation type (16-bit storage: bf16 or fp16, two bytes each, every op
 * writing its results rounded to nearest even; what 16 bits mean for the
 * arithmetic is the backend's business), the compute weights likewise (the
 * fp32 masters rounded at the start of each forward, m->wc16); LayerNorm
 * statistics are fp32: stored, or with 16-bit storage recomputed in the
 * backward from the stored input (the same statistics of the same values).
 * Activation gradients exist for one block, one layer, one chunk at a time
 * (shared), plus two alternating buffers for the gradient flowing between
 * blocks / layers. */

/* A tensor whose rows move with the decoder chunk or the encoder's image
 * (tr_model.dview). */
typedef struct tr_dview {
    int kind;     /* 0: moves with the decoder chunk, 1: with the encoder's image */
    size_t off;   /* byte offset of the field in tr_acts */
    int grad;     /* 0: the field of m->a, 1: of m->da */
    char *base;   /* the tensor as laid out (pair 0) */
    size_t per;   /* bytes per pair */
} tr_dview;

/* The model with its memory on a backend. */
typedef struct tr_model {
    tr_config cfg;
    tr_backend *be;
    int B, M, K;                /* batch geometry the activations are sized for */
    tr_geom geom;               /* tr_geom_of(&cfg, K), set once at init */
    tr_param_info *pinfo;       /* parameter table, n_params entries */
    int n_params;
    size_t n_param_floats;
    float *param_mem, *grad_mem;
    tr_params p, g;             /* pointers into param_mem / grad_mem */
    float *pe_gaussian;         /* [2, C/2] buffer (no grad, not a parameter) */
    int adt;                    /* the activations' type: opt.precision (TR_PREC_*) */
    float *act_mem, *dact_mem;  /* (4-byte units; 16-bit tensors take half as many) */
    tr_acts a, da;
    tr_act_info *ainfo;
    int n_acts;
    size_t n_act_floats;        /* act_mem 4-byte units; dact_mem holds n_dact_floats */
    size_t n_dact_floats;
    /* training features */
    tr_model_opts opt;
    uint8_t *frozen;            /* [n_params] 1: no gradient, not updated */
    int enc_lo;                 /* lowest trainable encoder part: -1 patch embedding
                                   (enc.patch, enc.pos), 0..L-1 block, L neck, L+1 none
                                   (encoder frozen); the backward stops there */
    size_t grad_lo;             /* grad_mem holds floats [grad_lo, n_param_floats) of the layout */
    size_t n_grad_floats;       /* = n_param_floats - grad_lo */
    uint16_t *wc16;             /* 16-bit precision: the compute weights, the masters rounded to 16
                                   bits, same layout as param_mem, else NULL */
    int enc_slot[TR_MAX_L];                         /* -1: own memory */
    size_t dblk_off, dblk_n, dlay_off, dlay_n;      /* shared gradient sets in dact_mem (4-byte units) */
    int enc_ni;                 /* images per encoder pass (the backend's choice: tr_traits.enc_images,
                                   a divisor of B) */
    int enc_res, enc_res_img;   /* segment and pass resident in the slots */
    /* decoder chunks */
    int dec_chunk, n_chunks;    /* pairs per chunk (the last may have fewer), chunks */
    int dec_full;               /* 1: decoder activations for every pair */
    size_t ddec_off, ddec_n;    /* the decoder's chunk gradients in dact_mem (zeroed per chunk) */
    int dec_res;                /* the chunk whose activations are in place (--checkpoint-decoder), -1 none */
    tr_dview *dview;            /* tensors that move with the chunk */
    int n_dview;
    void *oom; /* private: the running step's return point on out of memory (a jmp_buf) */
    /* The step's inputs and loss: the model reads no tensor.  The batch is
     * checked and its valid pairs counted on the host before the upload
     * (dev: its copy in backend memory, NULL where that is the host's); the
     * loss terms add up in backend memory and are read once per step. */
    tr_batch *dev;
    int *chunk_valid;  /* host: valid pairs per decoder chunk of the step's batch */
    int n_valid;       /* and in the whole batch (a counting backend: every pair) */
    double *loss_sums; /* backend memory: [4] sums of focal, dice, IoU-MSE, IoU */
} tr_model;

/* Lays out the parameters and activations for batches of B images, M masks,
 * K points on the backend (memory counted there).  0 or -1 (err filled). */
int tr_model_init(tr_model *m, tr_backend *be, const tr_config *cfg, int B, int M, int K, char *err,
                  size_t err_len);
void tr_model_free(tr_model *m);

/* tr_model_init with training options (NULL: defaults) and a comma list of
 * groups to freeze (NULL: none; see tr_model_freeze) applied before the
 * first allocation, so that no larger layout ever exists (the peak of the
 * accounting shows the configured memory). */
int tr_model_init_ex(tr_model *m, tr_backend *be, const tr_config *cfg, int B, int M, int K,
                     const tr_model_opts *opt, const char *freeze, char *err, size_t err_len);

/* Initialisation (documented in man/sa1b-train.1): truncated normal std 0.02
 * (cut at +-2 std) for every Linear and ConvTranspose weight and enc.pos,
 * 0 for biases, 1 for LayerNorm gains, N(0, 0.02) truncated for the token
 * vectors and label embeddings, N(0, 1) for prompt.pe_gaussian; deterministic
 * in seed.  Computed on the host and uploaded: 0, or -1 when out of host
 * memory. */
int tr_model_init_params(tr_model *m, uint64_t seed);

/* Index of a parameter by name or -1. */
int tr_model_find_param(const tr_model *m, const char *name);

/* Forward on a batch (its B, M, K must equal the model's): fills the
 * activations, the logits (tr_model_get_logits) and out.iou (m->a.iou).
 * Returns -1 with err filled for a bad label or when memory runs out in
 * the middle (an allocation of the model's or of a backend op: "out of
 * memory: <category> of <size> ..."); after that failure the activations
 * and gradients are undefined, the workspaces are given back, and the step
 * can be run again (with zero_grads) once memory allows. */
int tr_model_forward(tr_model *m, const tr_batch *b, char *err, size_t err_len);

/* dst [NP, RR] / [NP] (host memory, fp32) = the logits / the predicted
 * IoU of the last forward. */
void tr_model_get_logits(const tr_model *m, float *dst);
void tr_model_get_iou(const tr_model *m, float *dst);

/* Loss of the last forward plus the full backward: zeroes and fills m->g
 * with the gradient of the batch's mean loss (a NaN loss and n_valid -1 on
 * out of memory: tr_model_backward_acc says more). */
tr_loss tr_model_backward(tr_model *m, const tr_batch *b);

/* The backward of gradient accumulation: zero_grads 1 zeroes m->g first,
 * 0 adds to it; sum 0 adds scale * the gradient of the batch's mean loss,
 * sum 1 adds scale * the gradient of the SUM of the losses of its valid
 * pairs (so that K micro-batches summed and divided by their total count
 * of valid pairs give the gradient of the flat mean over all of them).
 * *loss holds the batch's means as always.  0, or -1 with err filled when
 * memory runs out (as tr_model_forward). */
int tr_model_backward_acc(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum, tr_loss *loss,
                          char *err, size_t err_len);

/* One training micro-step: tr_model_forward then tr_model_backward_acc
 * (same arguments, the loss into *loss), bit for bit; with
 * --checkpoint-decoder each decoder chunk's backward follows its forward
 * directly (the loss of a pair needs only the batch's count of valid
 * pairs), so that nothing of the decoder is recomputed.  0, or -1 with err
 * filled (a bad batch or out of memory, as tr_model_forward). */
int tr_model_step(tr_model *m, const tr_batch *b, int zero_grads, float scale, int sum, tr_loss *loss, char *err,
                  size_t err_len);

/* Multiplies every gradient by factor (skipped when 1: unscaling, the 1/N of
 * accumulation) and returns their sum of squares afterwards (non-finite
 * when a gradient overflowed: fp16 loss scaling skips the step then). */
double tr_model_scale_grads(tr_model *m, double factor);
/* The same on floats [lo, hi) of grad_mem only (a rank of --zero 1 holds the
 * sums of its own part there): their sum of squares. */
double tr_model_scale_grads_part(tr_model *m, double factor, size_t lo, size_t hi);

/* Gradient of parameter i (NULL when frozen): m->grad_mem + offset - grad_lo. */
float *tr_model_grad(const tr_model *m, int i);

/* Changes the training options (checkpointing, precision); re-lays out the
 * activations (their contents are lost).  0 or -1 (err: bad option, out of
 * memory). */
int tr_model_set_options(tr_model *m, const tr_model_opts *opt, char *err, size_t err_len);

/* Changes the micro-batch size B (activations re-laid out).  0 or -1. */
int tr_model_set_batch(tr_model *m, int B, char *err, size_t err_len);

/* Freezes (frozen = 1) or unfreezes (0) a group of parameters:
 * "all", "encoder" (every enc.*), "embed" (enc.patch, enc.pos), "blocks"
 * (every encoder block), "blocks.I" or "blocks.I-J" (0 <= I <= J < L),
 * "neck" (enc.neck, enc.neck_ln), "prompt" (prompt.*), "decoder" (dec.*).
 * Frozen parameters have no gradient memory (gradients are kept for the
 * layout range from the first trainable parameter on), the encoder's
 * backward stops at its lowest trainable part, and the blocks below it run
 * without stored activations.  Gradients are re-laid out (contents lost).
 * 0, or -1 with err (unknown group, out of memory). */
int tr_model_freeze(tr_model *m, const char *group, int frozen, char *err, size_t err_len);

/* 1 when spec names a group tr_model_freeze accepts for a model with L
 * encoder blocks, else 0. */
int tr_model_group_valid(const char *group, int L);

/* Approximate FLOPs of one forward+backward (for rate reporting). */
double tr_model_flops(const tr_model *m);

/* The shapes of the model's attention calls as the backend receives them
 * (the encoder's self-attention over G*G tokens; the decoder's self,
 * token-to-image and image-to-token attentions, the final token-to-image
 * one shares the second's): the first min(cap, 4) into out, the number
 * of shapes (4) returned.  N is the most sequences of a call (the
 * encoder's images per pass, the decoder's pairs per chunk). */
int tr_model_attn_shapes(const tr_model *m, tr_attn_dims *out, int cap);

#endif
