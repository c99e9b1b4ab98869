/*
 * optim.h - AdamW with decoupled weight decay on matrices only (Linear and
 * ConvTranspose weights: tr_param_info.decay), its 8-bit variant
 * (block-wise dynamically quantised moments, quant8.h), a linear-warmup +
 * cosine learning-rate schedule, and clipping by the global gradient norm.
 *
 * Moments live per parameter tensor in "slots" (category optimizer):
 * fp32 arrays m/v for AdamW (laid out like the parameters, so that with
 * every tensor trainable o->m + pinfo.offset is the tensor's moment), and
 * for AdamW8bit u8 codes mq/vq plus one fp32 absmax per block for every
 * tensor of at least min_8bit elements (smaller tensors keep fp32 moments,
 * as bitsandbytes does).  A parameter can be made inactive (frozen): it then
 * has no state, no memory, and no update (tr_optim_set_trainable).
 */
#ifndef SA1B_TRAINER_OPTIM_H
#define SA1B_TRAINER_OPTIM_H

#include "model/model.h"
#include "common/safetensors.h"

typedef enum tr_optim_kind { TR_OPTIM_ADAMW = 0, TR_OPTIM_ADAMW8BIT = 1 } tr_optim_kind;

typedef struct tr_optim_config {
    double lr;            /* peak learning rate */
    double min_lr_ratio;  /* the cosine ends at lr * min_lr_ratio */
    long warmup;          /* steps of linear warmup from lr/warmup to lr */
    long steps;           /* total steps (end of the cosine) */
    double beta1, beta2, eps, weight_decay;
    double clip;          /* max global gradient norm; 0 = no clipping */
    tr_optim_kind kind;   /* AdamW (default) or AdamW8bit */
    int block;            /* AdamW8bit: elements per quantisation block, 64..4096 (default 256) */
    size_t min_8bit;      /* AdamW8bit: smaller tensors keep fp32 moments (default 4096) */
    int skip_frozen;      /* tr_optim_init: no state for parameters the model has frozen (default 0: all) */
    const uint8_t *owned; /* tr_optim_init: NULL, or state only for parameters i with owned[i] != 0 (a
                             data-parallel rank's part of the state: --zero 1) */
} tr_optim_config;

/* Defaults: AdamW, beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.1,
 * clip 1.0, min_lr_ratio 0.1, warmup min(100, steps/10); 8-bit block 256,
 * min_8bit 4096. */
void tr_optim_defaults(tr_optim_config *c, double lr, long steps);

/* Where one parameter tensor's moments are. */
typedef struct tr_optim_slot {
    int active;    /* 0: frozen, no state */
    int q8;        /* 1: 8-bit codes, else fp32 */
    size_t off;    /* into m/v (fp32, in floats) or mq/vq (8-bit, in bytes) */
    size_t boff;   /* 8-bit: first block's index into mabs/vabs */
} tr_optim_slot;

typedef struct tr_optim {
    tr_optim_config cfg;
    float *m, *v;           /* fp32 moments [n32] */
    uint8_t *mq, *vq;       /* 8-bit codes [n8] */
    float *mabs, *vabs;     /* absmax per block [nblk] */
    size_t n32, n8, nblk;
    tr_optim_slot *slot;    /* [n_params] */
    float qmap_s[256];      /* signed dynamic map (m) */
    float qmap_u[256];      /* unsigned dynamic map (v) */
    long t;                 /* updates done */
} tr_optim;

/* Every parameter trainable (with cfg->skip_frozen: every parameter the
 * model does not have frozen); state zeroed.  0, or -1 (out of memory; the
 * optimizer is then empty and tr_optim_free is still safe). */
int tr_optim_init(tr_optim *o, tr_model *m, const tr_optim_config *cfg);
void tr_optim_free(tr_optim *o, tr_model *m);

/* Makes exactly the parameters with trainable[i] != 0 trainable: state of
 * parameters that stay trainable is kept, newly trainable ones start from
 * zero moments, frozen ones lose their state (and its memory).  Before the
 * first update the old state is given back before the new one is
 * allocated (no transient peak).  0 or -1 (out of memory; the old state is
 * then kept, except before the first update: then the optimizer is empty). */
int tr_optim_set_trainable(tr_optim *o, tr_model *m, const uint8_t *trainable);

/* Bytes of optimizer state (what the allocator holds for it). */
size_t tr_optim_state_bytes(const tr_optim *o);

/* Learning rate of step (0-based). */
double tr_optim_lr(const tr_optim_config *c, long step);

/* One update from m->g (clipped in place); returns the global gradient norm
 * before clipping and sets *lr_out to the rate used.  Inactive parameters
 * are not updated. */
double tr_optim_step(tr_optim *o, tr_model *m, double *lr_out);
/* The same for a data-parallel rank of --zero 1 that holds the summed
 * gradients of its own parameters (the only ones active here) in floats
 * [lo, hi) of m->grad_mem: sumsq is the whole gradient's sum of squares (the
 * ranks' parts added up), so that every rank clips by the global norm;
 * only [lo, hi) is clipped. */
double tr_optim_step_part(tr_optim *o, tr_model *m, double sumsq, size_t lo, size_t hi, double *lr_out);

/* The state's arrays as the host sees them, for files: tr_optim_host_view
 * gives the arrays themselves where the backend's memory is the host's,
 * else downloaded copies; for a load, tr_optim_host_stage gives buffers to
 * fill and tr_optim_host_commit uploads them.  tr_optim_host_free frees
 * what they allocated.  0, or -1 when out of host memory. */
typedef struct tr_optim_host {
    float *m, *v, *mabs, *vabs;
    uint8_t *mq, *vq;
    void *owned[6];
} tr_optim_host;
int tr_optim_host_view(const tr_optim *o, tr_backend *be, tr_optim_host *h);
int tr_optim_host_stage(tr_optim *o, tr_backend *be, tr_optim_host *h);
void tr_optim_host_commit(tr_optim *o, tr_backend *be, tr_optim_host *h);
void tr_optim_host_free(tr_optim_host *h);

/* Training-state tensors: AdamW writes "adam.m.<name>" / "adam.v.<name>"
 * (F32, the parameter's shape); AdamW8bit writes those for its fp32 slots
 * and "adam8.m.<name>" / "adam8.v.<name>" (U8 codes, the parameter's
 * shape) with "adam8.m_absmax.<name>" / "adam8.v_absmax.<name>" (F32
 * [blocks]) for its 8-bit ones.  Inactive parameters write nothing.  The
 * data must stay valid until the writer is written.  0 or -1. */
int tr_optim_save_tensors(const tr_optim *o, const tr_optim_host *h, const tr_model *m, tr_st_writer *w);
/* Reads what tr_optim_save_tensors wrote for the same configuration into o
 * (validating names, dtypes and sizes).  0 or -1 with err. */
int tr_optim_load_tensors(tr_optim *o, tr_optim_host *h, const tr_model *m, const tr_st_file *f, char *err,
                          size_t err_len);

/* The dynamic loss scale of fp16 training: the loss is multiplied by
 * scale before the backward (so that small gradients stay above fp16's
 * subnormals) and the gradients divided by it after.  A step whose
 * gradients overflowed is skipped and halves the scale (never below 1);
 * window clean steps in a row double it (up to 1e30).  At other
 * precisions the scale is 1 and stays 1. */
typedef struct tr_loss_scale {
    int on;      /* fp16 */
    float scale; /* 65536 at the start; 1 when off */
    long good;   /* clean steps since the scale last changed (or since a skip) */
    long window; /* clean steps that double it */
} tr_loss_scale;
void tr_loss_scale_init(tr_loss_scale *s, int precision, long window);
/* A resumed run's scale and count (a state file's; saved_scale <= 0: none saved). */
void tr_loss_scale_resume(tr_loss_scale *s, double saved_scale, long saved_good);
/* After a step: overflowed (its gradients not finite, the step skipped) or clean. */
void tr_loss_scale_update(tr_loss_scale *s, int overflowed);

#endif
