/*
 * optim.c - AdamW, schedule and clipping over the parameter table.
 */
#include "optim.h"

#include <math.h>

void tr_optim_defaults(tr_optim_config *c, double lr, long steps)
{
    c->lr = lr;
    c->min_lr_ratio = 0.1;
    c->steps = steps;
    c->warmup = steps / 10 < 100 ? steps / 10 : 100;
    c->beta1 = 0.9, c->beta2 = 0.999, c->eps = 1e-8, c->weight_decay = 0.1, c->clip = 1.0;
}

int tr_optim_init(tr_optim *o, tr_model *m, const tr_optim_config *cfg)
{
    o->cfg = *cfg;
    o->t = 0;
    o->m = tr_mem_alloc(&m->be->mem, TR_MEM_OPTIM, m->n_param_floats * sizeof(float));
    o->v = tr_mem_alloc(&m->be->mem, TR_MEM_OPTIM, m->n_param_floats * sizeof(float));
    if (!o->m || !o->v) {
        tr_optim_free(o, m);
        return -1;
    }
    return 0;
}

void tr_optim_free(tr_optim *o, tr_model *m)
{
    tr_mem_free(&m->be->mem, o->m);
    tr_mem_free(&m->be->mem, o->v);
    o->m = o->v = NULL;
}

double tr_optim_lr(const tr_optim_config *c, long step)
{
    if (c->warmup > 0 && step < c->warmup) return c->lr * (double)(step + 1) / (double)c->warmup;
    long span = c->steps - c->warmup;
    if (span <= 0) return c->lr;
    double t = (double)(step - c->warmup) / (double)span;
    if (t > 1) t = 1;
    double lo = c->lr * c->min_lr_ratio;
    return lo + 0.5 * (c->lr - lo) * (1.0 + cos(M_PI * t));
}

double tr_optim_step(tr_optim *o, tr_model *m, double *lr_out)
{
    tr_backend *be = m->be;
    double norm = sqrt(be->ops->sumsq(be, m->grad_mem, m->n_param_floats));
    if (o->cfg.clip > 0 && norm > o->cfg.clip)
        be->ops->scale(be, m->grad_mem, m->n_param_floats, (float)(o->cfg.clip / norm));
    double lr = tr_optim_lr(&o->cfg, o->t);
    o->t++;
    float bc1 = (float)(1.0 - pow(o->cfg.beta1, (double)o->t)), bc2 = (float)(1.0 - pow(o->cfg.beta2, (double)o->t));
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        be->ops->adamw(be, m->param_mem + pi->offset, o->m + pi->offset, o->v + pi->offset,
                       m->grad_mem + pi->offset, pi->count, (float)lr, (float)o->cfg.beta1, (float)o->cfg.beta2,
                       (float)o->cfg.eps, pi->decay ? (float)o->cfg.weight_decay : 0.0f, bc1, bc2);
    }
    if (lr_out) *lr_out = lr;
    return norm;
}
