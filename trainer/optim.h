/*
 * optim.h - AdamW with decoupled weight decay on matrices only (Linear and
 * ConvTranspose weights: tr_param_info.decay), a linear-warmup + cosine
 * learning-rate schedule, and clipping by the global gradient norm.
 */
#ifndef SA1B_TRAINER_OPTIM_H
#define SA1B_TRAINER_OPTIM_H

#include "model.h"

typedef struct tr_optim_config {
    double lr;            /* peak learning rate */
    double min_lr_ratio;  /* the cosine ends at lr * min_lr_ratio */
    long warmup;          /* steps of linear warmup from lr/warmup to lr */
    long steps;           /* total steps (end of the cosine) */
    double beta1, beta2, eps, weight_decay;
    double clip;          /* max global gradient norm; 0 = no clipping */
} tr_optim_config;

/* Defaults: beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.1, clip 1.0,
 * min_lr_ratio 0.1, warmup min(100, steps/10). */
void tr_optim_defaults(tr_optim_config *c, double lr, long steps);

typedef struct tr_optim {
    tr_optim_config cfg;
    float *m, *v;   /* [n_param_floats] moments, category optimizer */
    long t;         /* updates done */
} tr_optim;

int tr_optim_init(tr_optim *o, tr_model *m, const tr_optim_config *cfg);
void tr_optim_free(tr_optim *o, tr_model *m);

/* Learning rate of step (0-based). */
double tr_optim_lr(const tr_optim_config *c, long step);

/* One update from m->g (clipped in place); returns the global gradient norm
 * before clipping and sets *lr_out to the rate used. */
double tr_optim_step(tr_optim *o, tr_model *m, double *lr_out);

#endif
