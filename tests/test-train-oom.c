/*
 * test-train-oom.c - out of memory in the middle of a training step is an
 * error, not an abort: with a budget on the backend's allocator
 * (tr_mem.limit) below what a step needs, tr_model_step returns -1 with
 * "out of memory" and the category, holds no workspace afterwards, leaves
 * the backend as between steps, and the same step run again once the
 * budget allows gives the loss and gradients of a step that never failed,
 * bit for bit.  Every storage mode: fp32, bf16 (16-bit storage, staged
 * ops), fp16, encoder and decoder checkpointing, and both together.  A
 * failure inside a backend op (its workspace) takes the same path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "backend/backend.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "model/model.h"
#include "tap.h"
#include "registry/registry.h"

typedef struct mode {
    const char *name;
    tr_model_opts o;
} mode;

/* A model of the tiny preset for B=2, M=3, K=2 on backend be, seeded. */
static int make_model(tr_model *m, tr_backend *be, const tr_model_opts *o)
{
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    char err[256];
    if (tr_model_init_ex(m, be, &cfg, 2, 3, 2, o, NULL, err, sizeof err) < 0) {
        tap_diag("model: %s", err);
        return -1;
    }
    tr_model_init_params(m, 3);
    return 0;
}

static tr_batch *make_batch(tr_backend *be, const tr_model *m)
{
    tr_batch *b = tr_batch_alloc(&be->mem, m->B, m->M, m->K, m->cfg.S, 4 * (m->cfg.S / m->cfg.P));
    if (b) tr_batch_synthetic(b, 11);
    return b;
}

static void test_mode(const mode *md)
{
    char err[256];
    /* the reference: one step with no budget */
    tr_backend *be = tr_backend_create("cpu", 2, err, sizeof err);
    tr_model ref;
    if (!be || make_model(&ref, be, &md->o) < 0) {
        tap_ok(0, "%s: reference model", md->name);
        return;
    }
    tr_batch *b = make_batch(be, &ref);
    uint64_t before = be->mem.reserved;
    tr_loss L0;
    int rc = tr_model_step(&ref, b, 1, 1.0f, 0, &L0, err, sizeof err);
    uint64_t need = be->mem.reserved - before; /* what a step holds beyond the model */
    tap_ok(rc == 0 && need > 0, "%s: a step holds %llu bytes of workspace", md->name, (unsigned long long)need);
    float *g0 = malloc(ref.n_grad_floats * sizeof(float));
    memcpy(g0, ref.grad_mem, ref.n_grad_floats * sizeof(float));

    /* budgets below the need: the step fails, at a different point each */
    const double frac[] = {0.0, 0.3, 0.6, 0.95};
    int failed = 0, clean = 0, same = 0, named = 0;
    for (int i = 0; i < 4; i++) {
        tr_backend *be2 = tr_backend_create("cpu", 2, err, sizeof err);
        tr_model m;
        if (!be2 || make_model(&m, be2, &md->o) < 0) break;
        tr_batch *b2 = make_batch(be2, &m);
        be2->mem.limit = be2->mem.reserved + (uint64_t)(frac[i] * (double)need);
        tr_loss L;
        err[0] = 0;
        if (tr_model_step(&m, b2, 1, 1.0f, 0, &L, err, sizeof err) < 0) failed++;
        if (strstr(err, "out of memory") && strstr(err, "workspace")) named++;
        if (be2->mem.cur[TR_MEM_WORK] == 0) clean++;
        else
            tap_diag("%s: after the failure %llu workspace bytes held", md->name,
                     (unsigned long long)be2->mem.cur[TR_MEM_WORK]);
        be2->mem.limit = 0; /* memory again: the same step from the start */
        tr_loss L1;
        if (tr_model_step(&m, b2, 1, 1.0f, 0, &L1, err, sizeof err) == 0 && L1.loss == L0.loss &&
            L1.n_valid == L0.n_valid && memcmp(m.grad_mem, g0, m.n_grad_floats * sizeof(float)) == 0)
            same++;
        tr_batch_free(&be2->mem, b2);
        tr_model_free(&m);
        tap_ok(be2->mem.total == 0, "%s, budget %.2f of the need: every tensor given back", md->name, frac[i]);
        tr_backend_free(be2);
    }
    tap_ok(failed == 4, "%s: every budget below the need fails the step (%d of 4)", md->name, failed);
    tap_ok(named == 4, "%s: the error says out of memory and the category (%s)", md->name, err);
    tap_ok(clean == 4, "%s: no workspace held after it (%d of 4)", md->name, clean);
    tap_ok(same == 4, "%s: the step again with memory: loss and gradients bit-identical (%d of 4)", md->name, same);
    free(g0);
    tr_batch_free(&be->mem, b);
    tr_model_free(&ref);
    tr_backend_free(be);
}

int main(void)
{
    const mode modes[] = {
        {"fp32", {0}},
        {"bf16", {.precision = TR_PREC_BF16}},
        {"fp16", {.precision = TR_PREC_FP16}},
        {"fp32 checkpointed", {.ckpt_every = 1, .ckpt_decoder = 1}},
        {"bf16 checkpointed", {.ckpt_every = 1, .ckpt_decoder = 1, .precision = TR_PREC_BF16}},
    };
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) test_mode(&modes[i]);
    return tap_done();
}
