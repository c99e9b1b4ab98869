/*
 * model_params.h - the parameter table (model_params.c: presets,
 * parameters in MODEL.md's order, freeze groups, initialisation), as the
 * model's other files read it; private to model/.
 */
#ifndef SA1B_TRAINER_MODEL_PARAMS_H
#define SA1B_TRAINER_MODEL_PARAMS_H

#include <stddef.h>

#include "model.h"

/* floats rounded up to a multiple of 16 (64-byte aligned tensors) */
static inline size_t mdl_r16(size_t n) { return (n + 15) / 16 * 16; }

/* The parameter table walked in MODEL.md's order, laying out (m->param_mem
 * set: also pointing m->p and m->g at) each tensor */
typedef struct mdl_walker {
    tr_model *m;
    size_t off;
    int n;
} mdl_walker;
void mdl_walk_params(mdl_walker *w);
/* 1 when parameter `name` belongs to freeze group g */
int mdl_in_group(const tr_model *m, const char *g, const char *name);
/* a parameter's encoder part: -1 embedding, 0..L-1 block, L neck, INT_MAX
 * the rest */
int mdl_enc_part(const tr_model *m, const char *name);

#endif
