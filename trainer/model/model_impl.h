/*
 * model_impl.h - what the model's files share (model.c: the sequence;
 * model_params.c: presets, parameters, freeze groups, initialisation;
 * model_layout.c: the activation table, the layout, the operands and the
 * model's lifetime); private to them.
 */
#ifndef SA1B_TRAINER_MODEL_IMPL_H
#define SA1B_TRAINER_MODEL_IMPL_H

#include <stddef.h>

#include "model.h"

/* floats rounded up to a multiple of 16 (64-byte aligned tensors) */
static inline size_t mdl_r16(size_t n) { return (n + 15) / 16 * 16; }

/* model_params.c: the parameter table walked in MODEL.md's order, laying
 * out (m->param_mem set: also pointing m->p and m->g at) each tensor */
typedef struct mdl_walker {
    tr_model *m;
    size_t off;
    int n;
} mdl_walker;
void mdl_walk_params(mdl_walker *w);
/* 1 when parameter `name` belongs to freeze group g */
int mdl_in_group(const tr_model *m, const char *g, const char *name);

/* model_layout.c */
int mdl_layout(tr_model *m, char *err, size_t err_len); /* (re)lays out the activations */
int mdl_enc_part(const tr_model *m, const char *name); /* a parameter's encoder part: -1 embedding,
                                                          0..L-1 block, L neck, INT_MAX the rest */

/* bytes per element of the activations; element i of activation p */
static inline size_t mdl_esz(const tr_model *m) { return tr_dt_size(m->adt); }
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

/* model.c: a step's workspace of n floats (freed by the caller right after
 * its op); out of memory unwinds to the step's entry point */
float *mdl_work_alloc(tr_model *m, size_t n);
_Noreturn void mdl_oom_unwind(tr_model *m);

#endif
