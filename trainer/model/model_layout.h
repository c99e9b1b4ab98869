/*
 * model_layout.h - the activation table as the sequence (model_seq.c) reads
 * it: the layout (model_layout.c: activations, gradients, compute weights,
 * the model's lifetime) and the typed operands of activations and weights;
 * private to model/.
 */
#ifndef SA1B_TRAINER_MODEL_LAYOUT_H
#define SA1B_TRAINER_MODEL_LAYOUT_H

#include <stddef.h>

#include "model.h"
#include "model_params.h"

/* (Re)lays out the gradients, compute weights and activations (model_layout.c) */
int mdl_layout(tr_model *m, char *err, size_t err_len);

/* bytes per element of the activations; element i of activation p */
static inline size_t mdl_esz(const tr_model *m) { return tr_prec_size(m->adt); }
static inline void *mdl_at(const tr_model *m, const void *p, size_t i)
{
    return p ? (void *)((const char *)p + i * mdl_esz(m)) : NULL;
}
/* The typed operand of an activation or activation gradient, and of a
 * parameter's compute weights (m->wc16, or the fp32 master) */
static inline tr_ten mdl_t(const tr_model *m, const void *p) { return tr_typed(p, m->adt); }
static inline tr_ten mdl_w(const tr_model *m, const float *p)
{
    if (!p || !m->wc16) return tr_f32(p);
    return tr_typed(m->wc16 + (p - m->param_mem), m->adt);
}

#endif
