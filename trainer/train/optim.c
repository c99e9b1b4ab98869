/*
 * optim.c - AdamW and AdamW8bit, schedule and clipping over the parameter
 * table; the state's slots, (re)allocation when the trainable set changes,
 * and its tensors in the training-state file.
 */
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quant8.h"

void tr_optim_defaults(tr_optim_config *c, double lr, long steps)
{
    memset(c, 0, sizeof *c);
    c->lr = lr;
    c->min_lr_ratio = 0.1;
    c->steps = steps;
    c->warmup = steps / 10 < 100 ? steps / 10 : 100;
    c->beta1 = 0.9, c->beta2 = 0.999, c->eps = 1e-8, c->weight_decay = 0.1, c->clip = 1.0;
    c->kind = TR_OPTIM_ADAMW;
    c->block = 256;
    c->min_8bit = 4096;
}

static size_t n_blocks(size_t count, int block) { return (count + (size_t)block - 1) / (size_t)block; }

size_t tr_optim_state_bytes(const tr_optim *o)
{
    return 2 * (o->n32 * sizeof(float) + o->n8 + o->nblk * sizeof(float));
}

static void free_arrays(tr_mem *mem, float *m, float *v, uint8_t *mq, uint8_t *vq, float *ma, float *va)
{
    tr_mem_free(mem, m);
    tr_mem_free(mem, v);
    tr_mem_free(mem, mq);
    tr_mem_free(mem, vq);
    tr_mem_free(mem, ma);
    tr_mem_free(mem, va);
}

/* n bytes of value c at dst, and a copy of n bytes from src to dst, in
 * backend memory (device memory on a GPU: through the host) */
static int be_fill(tr_backend *be, void *dst, int c, size_t n)
{
    void *owned, *h = tr_host_stage(be, dst, n, &owned);
    if (!h) return -1;
    memset(h, c, n);
    tr_host_commit(be, dst, owned, n);
    return 0;
}

static int be_copy(tr_backend *be, void *dst, const void *src, size_t n)
{
    void *view, *owned = NULL;
    const void *s = tr_host_view(be, src, n, &view);
    void *d = s ? tr_host_stage(be, dst, n, &owned) : NULL;
    if (d) {
        memcpy(d, s, n);
        tr_host_commit(be, dst, owned, n);
    }
    free(view);
    return d ? 0 : -1;
}

int tr_optim_set_trainable(tr_optim *o, tr_model *m, const uint8_t *trainable)
{
    tr_mem *mem = &m->be->mem;
    int q8ok = o->cfg.kind == TR_OPTIM_ADAMW8BIT;
    if (o->slot) { /* the same set: nothing to do */
        int same = 1;
        for (int i = 0; i < m->n_params && same; i++) same = !o->slot[i].active == !trainable[i];
        if (same) return 0;
    }
    tr_optim_slot *ns = calloc((size_t)m->n_params + 1, sizeof *ns);
    if (!ns) return -1;
    size_t n32 = 0, n8 = 0, nblk = 0;
    for (int i = 0; i < m->n_params; i++) {
        size_t cnt = m->pinfo[i].count;
        if (!trainable[i]) continue;
        ns[i].active = 1;
        ns[i].q8 = q8ok && cnt >= o->cfg.min_8bit;
        if (ns[i].q8) {
            ns[i].off = n8, ns[i].boff = nblk;
            n8 += (cnt + 63) / 64 * 64;
            nblk += n_blocks(cnt, o->cfg.block);
        } else {
            ns[i].off = n32;
            n32 += (cnt + 15) / 16 * 16; /* the parameters' own padding */
        }
    }
    float *nm = NULL, *nv = NULL, *nma = NULL, *nva = NULL;
    uint8_t *nmq = NULL, *nvq = NULL;
    int fail = 0;
    if (o->slot && o->t == 0) {
        /* no update yet: every moment is zero, nothing to keep; give the old
         * state back first so that old and new never coexist */
        free_arrays(mem, o->m, o->v, o->mq, o->vq, o->mabs, o->vabs);
        o->m = o->v = o->mabs = o->vabs = NULL;
        o->mq = o->vq = NULL;
        free(o->slot);
        o->slot = NULL;
        o->n32 = o->n8 = o->nblk = 0;
    }
    if (n32) {
        nm = tr_mem_alloc(mem, TR_MEM_OPTIM, n32 * sizeof(float));
        nv = tr_mem_alloc(mem, TR_MEM_OPTIM, n32 * sizeof(float));
        fail |= !nm || !nv;
    }
    if (n8) {
        nmq = tr_mem_alloc(mem, TR_MEM_OPTIM, n8);
        nvq = tr_mem_alloc(mem, TR_MEM_OPTIM, n8);
        nma = tr_mem_alloc(mem, TR_MEM_OPTIM, nblk * sizeof(float));
        nva = tr_mem_alloc(mem, TR_MEM_OPTIM, nblk * sizeof(float));
        fail |= !nmq || !nvq || !nma || !nva;
    }
    if (fail) {
        free_arrays(mem, nm, nv, nmq, nvq, nma, nva);
        free(ns);
        return -1;
    }
    /* zero state of an 8-bit slot: codes of 0.0 (index 0 in both maps: 0 is
     * the smallest unsigned value; signed needs its index) with absmax 0 */
    tr_backend *be = m->be;
    if (n8 && !mem->counting_only) {
        uint8_t zs = tr_q8_encode(o->qmap_s, 0.0f), zu = tr_q8_encode(o->qmap_u, 0.0f);
        fail |= be_fill(be, nmq, zs, n8) < 0 || be_fill(be, nvq, zu, n8) < 0;
    }
    /* keep the state of parameters that stay trainable */
    if (o->slot && !mem->counting_only) {
        for (int i = 0; i < m->n_params && !fail; i++) {
            const tr_optim_slot *a = &o->slot[i], *b = &ns[i];
            size_t cnt = m->pinfo[i].count;
            if (!a->active || !b->active) continue;
            if (b->q8) {
                size_t nb = n_blocks(cnt, o->cfg.block);
                fail |= be_copy(be, nmq + b->off, o->mq + a->off, cnt) < 0 ||
                        be_copy(be, nvq + b->off, o->vq + a->off, cnt) < 0 ||
                        be_copy(be, nma + b->boff, o->mabs + a->boff, nb * sizeof(float)) < 0 ||
                        be_copy(be, nva + b->boff, o->vabs + a->boff, nb * sizeof(float)) < 0;
            } else {
                fail |= be_copy(be, nm + b->off, o->m + a->off, cnt * sizeof(float)) < 0 ||
                        be_copy(be, nv + b->off, o->v + a->off, cnt * sizeof(float)) < 0;
            }
        }
    }
    if (fail) { /* out of host memory for a copy: the old state stays as it was */
        free_arrays(mem, nm, nv, nmq, nvq, nma, nva);
        free(ns);
        return -1;
    }
    free_arrays(mem, o->m, o->v, o->mq, o->vq, o->mabs, o->vabs);
    free(o->slot);
    o->m = nm, o->v = nv, o->mq = nmq, o->vq = nvq, o->mabs = nma, o->vabs = nva;
    o->n32 = n32, o->n8 = n8, o->nblk = nblk;
    o->slot = ns;
    return 0;
}

int tr_optim_init(tr_optim *o, tr_model *m, const tr_optim_config *cfg)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    if (o->cfg.block < 64) o->cfg.block = 64;
    if (o->cfg.block > TR_Q8_MAX_BLOCK) o->cfg.block = TR_Q8_MAX_BLOCK;
    tr_q8_map(o->qmap_s, 1);
    tr_q8_map(o->qmap_u, 0);
    uint8_t *all = malloc((size_t)m->n_params + 1);
    if (!all) return -1;
    for (int i = 0; i < m->n_params; i++)
        all[i] = !(o->cfg.skip_frozen && m->frozen && m->frozen[i]) && (!o->cfg.owned || o->cfg.owned[i]);
    int rc = tr_optim_set_trainable(o, m, all);
    free(all);
    return rc;
}

void tr_optim_free(tr_optim *o, tr_model *m)
{
    free_arrays(&m->be->mem, o->m, o->v, o->mq, o->vq, o->mabs, o->vabs);
    free(o->slot);
    o->m = o->v = o->mabs = o->vabs = NULL;
    o->mq = o->vq = NULL;
    o->slot = NULL;
    o->n32 = o->n8 = o->nblk = 0;
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
    /* gradients exist for the trainable range of the layout (frozen parameters have none) */
    double sumsq = m->be->ops->sumsq(m->be, m->grad_mem, m->n_grad_floats);
    return tr_optim_step_part(o, m, sumsq, 0, m->n_grad_floats, lr_out);
}

double tr_optim_step_part(tr_optim *o, tr_model *m, double sumsq, size_t lo, size_t hi, double *lr_out)
{
    tr_backend *be = m->be;
    double norm = sqrt(sumsq);
    if (o->cfg.clip > 0 && norm > o->cfg.clip && hi > lo)
        be->ops->scale(be, m->grad_mem + lo, hi - lo, (float)(o->cfg.clip / norm));
    double lr = tr_optim_lr(&o->cfg, o->t);
    o->t++;
    float bc1 = (float)(1.0 - pow(o->cfg.beta1, (double)o->t)), bc2 = (float)(1.0 - pow(o->cfg.beta2, (double)o->t));
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        const tr_optim_slot *s = &o->slot[i];
        const float *g = tr_model_grad(m, i);
        if (!s->active || !g) continue;
        float wd = pi->decay ? (float)o->cfg.weight_decay : 0.0f;
        if (s->q8)
            be->ops->adamw8bit(be, m->param_mem + pi->offset, o->mq + s->off, o->vq + s->off, o->mabs + s->boff,
                               o->vabs + s->boff, o->qmap_s, o->qmap_u, g, pi->count,
                               o->cfg.block, (float)lr, (float)o->cfg.beta1, (float)o->cfg.beta2,
                               (float)o->cfg.eps, wd, bc1, bc2);
        else
            be->ops->adamw(be, m->param_mem + pi->offset, o->m + s->off, o->v + s->off, g, pi->count, (float)lr, (float)o->cfg.beta1, (float)o->cfg.beta2, (float)o->cfg.eps, wd,
                           bc1, bc2);
    }
    if (lr_out) *lr_out = lr;
    return norm;
}

/* ---- training-state tensors ------------------------------------------------------ */

/* the six arrays, their sizes in bytes */
static void host_arrays(const tr_optim *o, void *const *a[6], size_t n[6])
{
    size_t nf = o->n32 * sizeof(float), nq = o->n8, na = o->nblk * sizeof(float);
    const size_t sz[6] = {nf, nf, na, na, nq, nq};
    memcpy(n, sz, sizeof sz);
    a[0] = (void *const *)&o->m, a[1] = (void *const *)&o->v, a[2] = (void *const *)&o->mabs;
    a[3] = (void *const *)&o->vabs, a[4] = (void *const *)&o->mq, a[5] = (void *const *)&o->vq;
}

static void **host_slot(tr_optim_host *h, int k)
{
    void **s[6] = {(void **)&h->m, (void **)&h->v, (void **)&h->mabs, (void **)&h->vabs, (void **)&h->mq,
                   (void **)&h->vq};
    return s[k];
}

/* the host's view (stage 0) or buffers to fill (stage 1) of each array */
static int host_map(const tr_optim *o, tr_backend *be, tr_optim_host *h, int stage)
{
    void *const *a[6];
    size_t n[6];
    memset(h, 0, sizeof *h);
    host_arrays(o, a, n);
    for (int k = 0; k < 6; k++) {
        if (!*a[k]) continue;
        *host_slot(h, k) = stage ? tr_host_stage(be, *a[k], n[k], &h->owned[k])
                                 : (void *)tr_host_view(be, *a[k], n[k], &h->owned[k]);
        if (!*host_slot(h, k)) return tr_optim_host_free(h), -1;
    }
    return 0;
}

int tr_optim_host_view(const tr_optim *o, tr_backend *be, tr_optim_host *h) { return host_map(o, be, h, 0); }

int tr_optim_host_stage(tr_optim *o, tr_backend *be, tr_optim_host *h) { return host_map(o, be, h, 1); }

void tr_optim_host_commit(tr_optim *o, tr_backend *be, tr_optim_host *h)
{
    void *const *a[6];
    size_t n[6];
    host_arrays(o, a, n);
    for (int k = 0; k < 6; k++) tr_host_commit(be, *a[k], h->owned[k], n[k]), h->owned[k] = NULL;
}

void tr_optim_host_free(tr_optim_host *h)
{
    for (int k = 0; k < 6; k++) free(h->owned[k]), h->owned[k] = NULL;
}

int tr_optim_save_tensors(const tr_optim *o, const tr_optim_host *h, const tr_model *m, tr_st_writer *w)
{
    char name[128];
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        const tr_optim_slot *s = &o->slot[i];
        if (!s->active) continue;
        int64_t sh[4];
        for (int d = 0; d < pi->ndim; d++) sh[d] = pi->shape[d];
        if (s->q8) {
            int64_t nb = (int64_t)n_blocks(pi->count, o->cfg.block);
            const char *pre[2] = {"adam8.m", "adam8.v"};
            const uint8_t *codes[2] = {h->mq + s->off, h->vq + s->off};
            const float *abs[2] = {h->mabs + s->boff, h->vabs + s->boff};
            for (int k = 0; k < 2; k++) {
                snprintf(name, sizeof name, "%s.%s", pre[k], pi->name);
                if (tr_st_writer_add(w, name, TR_ST_U8, pi->ndim, sh, codes[k]) < 0) return -1;
                snprintf(name, sizeof name, "%s_absmax.%s", pre[k], pi->name);
                if (tr_st_writer_add(w, name, TR_ST_F32, 1, &nb, abs[k]) < 0) return -1;
            }
        } else {
            snprintf(name, sizeof name, "adam.m.%s", pi->name);
            if (tr_st_writer_add(w, name, TR_ST_F32, pi->ndim, sh, h->m + s->off) < 0) return -1;
            snprintf(name, sizeof name, "adam.v.%s", pi->name);
            if (tr_st_writer_add(w, name, TR_ST_F32, pi->ndim, sh, h->v + s->off) < 0) return -1;
        }
    }
    return 0;
}

static int get_tensor(const tr_st_file *f, const char *name, tr_st_dtype dt, void *dst, size_t count, char *err,
                      size_t err_len)
{
    const tr_st_tensor *t = tr_st_find(f, name);
    if (!t) return snprintf(err, err_len, "tensor '%s' missing", name), -1;
    if (t->dtype != dt || t->count != count)
        return snprintf(err, err_len, "tensor '%s': %s with %llu elements, want %s with %zu", name,
                        tr_st_dtype_name(t->dtype), (unsigned long long)t->count, tr_st_dtype_name(dt), count), -1;
    memcpy(dst, t->data, count * tr_st_dtype_size(dt));
    return 0;
}

int tr_optim_load_tensors(tr_optim *o, tr_optim_host *h, const tr_model *m, const tr_st_file *f, char *err,
                          size_t err_len)
{
    char name[128];
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        const tr_optim_slot *s = &o->slot[i];
        if (!s->active) continue;
        if (s->q8) {
            size_t nb = n_blocks(pi->count, o->cfg.block);
            const char *pre[2] = {"adam8.m", "adam8.v"};
            uint8_t *codes[2] = {h->mq + s->off, h->vq + s->off};
            float *abs[2] = {h->mabs + s->boff, h->vabs + s->boff};
            for (int k = 0; k < 2; k++) {
                snprintf(name, sizeof name, "%s.%s", pre[k], pi->name);
                if (get_tensor(f, name, TR_ST_U8, codes[k], pi->count, err, err_len) < 0) return -1;
                snprintf(name, sizeof name, "%s_absmax.%s", pre[k], pi->name);
                if (get_tensor(f, name, TR_ST_F32, abs[k], nb, err, err_len) < 0) return -1;
                for (size_t b = 0; b < nb; b++)
                    if (!(abs[k][b] >= 0.0f && isfinite(abs[k][b])))
                        return snprintf(err, err_len, "tensor '%s': absmax %zu is not a finite value >= 0", name,
                                        b), -1;
            }
        } else {
            snprintf(name, sizeof name, "adam.m.%s", pi->name);
            if (get_tensor(f, name, TR_ST_F32, h->m + s->off, pi->count, err, err_len) < 0) return -1;
            snprintf(name, sizeof name, "adam.v.%s", pi->name);
            if (get_tensor(f, name, TR_ST_F32, h->v + s->off, pi->count, err, err_len) < 0) return -1;
        }
    }
    return 0;
}

void tr_loss_scale_init(tr_loss_scale *s, int precision, long window)
{
    s->on = precision == TR_PREC_FP16;
    s->scale = s->on ? 65536.0f : 1.0f;
    s->good = 0;
    s->window = window;
}

void tr_loss_scale_resume(tr_loss_scale *s, double saved_scale, long saved_good)
{
    if (saved_scale > 0 && s->on) s->scale = (float)saved_scale, s->good = saved_good;
}

void tr_loss_scale_update(tr_loss_scale *s, int overflowed)
{
    if (overflowed) {
        if (s->on && s->scale > 1.0f) s->scale /= 2;
        s->good = 0;
    } else if (s->on && ++s->good >= s->window) {
        if (s->scale < 1e30f) s->scale *= 2;
        s->good = 0;
    }
}
