/*
 * test-train-core.c - the model moves data through the backend's upload and
 * download only (issue 15, item 3).  A CPU backend whose host memory is told
 * apart from its own (be->host_mem is another allocator, as a GPU's pinned
 * memory would be) makes the model copy each batch in with six uploads,
 * initialise the parameters on the host and upload them, and read the loss
 * with one download per step; its parameters, losses and gradients equal,
 * bit for bit, those of the same steps on a CPU backend that shares the
 * host's memory, in every storage mode.  The decoder's granularity is the
 * backend's (tr_sizes.dec_chunk): with every pair in one chunk,
 * checkpointing on and off stay bit-identical, and the results stay those
 * of the CPU's chunks within float rounding.  Checkpoints and training
 * states go through the host (downloads and uploads): the same bytes from
 * either backend, and loaded back into one whose memory is not the host's,
 * they save the same bytes again.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "backend/backend.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "train/checkpoint.h"
#include "model/model.h"
#include "train/optim.h"
#include "tap.h"
#include "backend/cpu/backend_cpu.h"
#include "registry/registry.h"

/* the CPU ops with upload and download counted */
static tr_ops counted;
static const tr_ops *cpu;
static int n_up, n_down;

static void count_up(tr_backend *be, void *dst, const void *src, size_t n)
{
    n_up++;
    cpu->upload(be, dst, src, n);
}

static void count_down(tr_backend *be, void *dst, const void *src, size_t n)
{
    n_down++;
    cpu->download(be, dst, src, n);
}

typedef struct run {
    tr_loss L[3];
    float *grads, *params;
    size_t n_grads, n_params;
    int up_init, up_step, down_step;
    int host_valid[3]; /* the batches' valid pairs, counted here */
    int n_chunks, enc_ni;
    char model[300], state[300]; /* the checkpoint and state saved after the steps and an update */
} run;

/* Three steps of the tiny model on synthetic batches; separate: the
 * backend's memory is not the host's. */
static int all_pairs(int n_pairs) { return n_pairs; }
static int all_images(int B) { return B; }

static char tmpdir[] = "/tmp/sa1b-core.XXXXXX";

/* the bytes of a file, malloc'd, *n its size; NULL when unreadable */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b && len >= 0 && fread(b, 1, (size_t)len, f) == (size_t)len ? (size_t)len : 0;
    fclose(f);
    return b;
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && na > 0 && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

static int run_steps(const tr_model_opts *o, int separate, run *r)
{
    char err[256];
    tr_backend *be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!be) return -1;
    tr_traits whole = tr_cpu_traits; /* a GPU's granularity: every image and every pair at once */
    whole.dec_chunk = all_pairs;
    whole.enc_images = all_images;
    if (separate == 2) be->traits = &whole, separate = 0;
    tr_mem host;
    tr_mem_init(&host);
    if (separate) {
        cpu = be->ops;
        counted = *be->ops;
        counted.upload = count_up, counted.download = count_down;
        be->ops = &counted;
        be->host_mem = &host;
    }
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    tr_model m;
    int rc = tr_model_init_ex(&m, be, &cfg, 2, 3, 2, o, NULL, err, sizeof err);
    if (rc == 0) {
        n_up = n_down = 0;
        tr_model_init_params(&m, 9);
        r->up_init = n_up;
        tr_batch *b = tr_batch_alloc(be->host_mem, 2, 3, 2, cfg.S, 4 * (cfg.S / cfg.P));
        for (int s = 0; s < 3 && rc == 0; s++) {
            tr_batch_synthetic(b, 40 + (uint64_t)s);
            if (s == 1) b->valid[4] = 0; /* a padding pair */
            for (int i = 0; i < 6; i++) r->host_valid[s] += b->valid[i];
            n_up = n_down = 0;
            rc = tr_model_step(&m, b, 1, 1.0f, 0, &r->L[s], err, sizeof err);
            r->up_step = n_up, r->down_step = n_down;
        }
        r->n_grads = m.n_grad_floats, r->n_params = m.n_param_floats;
        r->n_chunks = m.n_chunks, r->enc_ni = m.enc_ni;
        /* an update, then the checkpoint and the state through the host */
        tr_optim_config oc;
        tr_optim_defaults(&oc, 1e-3, 10);
        tr_optim opt;
        if (rc == 0 && tr_optim_init(&opt, &m, &oc) == 0) {
            tr_optim_step(&opt, &m, NULL);
            tr_train_state st = {.step = 3, .data_consumed = 3};
            snprintf(r->model, sizeof r->model, "%s/m%d-%d.safetensors", tmpdir, o->precision, separate);
            snprintf(r->state, sizeof r->state, "%s/s%d-%d.bin", tmpdir, o->precision, separate);
            if (tr_ckpt_save_model(&m, r->model, err, sizeof err) < 0 ||
                tr_ckpt_save_state(&m, &opt, &st, r->state, err, sizeof err) < 0)
                rc = -1;
            tr_optim_free(&opt, &m);
        }
        r->grads = malloc(r->n_grads * sizeof(float));
        r->params = malloc(r->n_params * sizeof(float));
        memcpy(r->grads, m.grad_mem, r->n_grads * sizeof(float));
        memcpy(r->params, m.param_mem, r->n_params * sizeof(float));
        tr_batch_free(be->host_mem, b);
        tr_model_free(&m);
    }
    if (rc < 0) tap_diag("%s", err);
    if (separate) be->ops = cpu;
    tr_backend_free(be);
    tr_mem_destroy(&host);
    return rc;
}

int main(void)
{
    if (!mkdtemp(tmpdir)) return tap_ok(0, "a temporary directory"), tap_done();
    const struct {
        const char *name;
        tr_model_opts o;
    } modes[] = {
        {"fp32", {0}},
        {"bf16", {.precision = TR_PREC_BF16}},
        {"fp32 checkpointed", {.ckpt_every = 1, .ckpt_decoder = 1}},
        {"fp16 checkpointed", {.ckpt_every = 2, .ckpt_decoder = 1, .precision = TR_PREC_FP16}},
    };
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        run a = {0}, b = {0};
        int ra = run_steps(&modes[i].o, 0, &a), rb = run_steps(&modes[i].o, 1, &b);
        tap_ok(ra == 0 && rb == 0, "%s: three steps on both backends", modes[i].name);
        if (ra || rb) continue;
        tap_ok(b.up_init > 0 && !memcmp(a.params, b.params, a.n_params * sizeof(float)),
               "%s: parameters initialised on the host and uploaded (%d uploads), the same bits", modes[i].name,
               b.up_init);
        tap_ok(b.up_step == 6 && b.down_step == 1, "%s: a step uploads the batch (%d) and downloads once (%d)",
               modes[i].name, b.up_step, b.down_step);
        int same = 1;
        for (int s = 0; s < 3; s++)
            same &= a.L[s].loss == b.L[s].loss && a.L[s].miou == b.L[s].miou && a.L[s].n_valid == a.host_valid[s] &&
                    b.L[s].n_valid == a.host_valid[s];
        tap_ok(same, "%s: the same losses (%.6f %.6f %.6f) over the valid pairs (%d %d %d)", modes[i].name, b.L[0].loss,
               b.L[1].loss, b.L[2].loss, b.L[0].n_valid, b.L[1].n_valid, b.L[2].n_valid);
        tap_ok(!memcmp(a.grads, b.grads, a.n_grads * sizeof(float)), "%s: the same gradients, bit for bit",
               modes[i].name);
        tap_ok(same_file(a.model, b.model) && same_file(a.state, b.state),
               "%s: checkpoint and state saved through the host: the same bytes from both backends", modes[i].name);
        /* loaded back into a backend whose memory is not the host's, saved again */
        char err[256], m2[320], s2[320];
        tr_backend *be = tr_backend_create("cpu", 2, err, sizeof err);
        tr_mem host;
        tr_mem_init(&host);
        be->host_mem = &host;
        tr_config cfg;
        tr_config_preset("tiny", &cfg);
        tr_model m;
        tr_optim opt;
        tr_optim_config oc;
        tr_optim_defaults(&oc, 1e-3, 10);
        tr_train_state st = {0};
        snprintf(m2, sizeof m2, "%s.again", a.model);
        snprintf(s2, sizeof s2, "%s.again", a.state);
        int ok = tr_model_init_ex(&m, be, &cfg, 2, 3, 2, &modes[i].o, NULL, err, sizeof err) == 0 &&
                 tr_optim_init(&opt, &m, &oc) == 0 && tr_ckpt_load_model(&m, a.model, err, sizeof err) == 0 &&
                 tr_ckpt_load_state(&m, &opt, &st, a.state, err, sizeof err) == 0 &&
                 tr_ckpt_save_model(&m, m2, err, sizeof err) == 0 && tr_ckpt_save_state(&m, &opt, &st, s2, err, sizeof err) == 0;
        tap_ok(ok && same_file(a.model, m2) && same_file(a.state, s2),
               "%s: loaded through the host into the other backend, saved again: the same bytes%s%s", modes[i].name,
               ok ? "" : ": ", ok ? "" : err);
        if (ok) tr_optim_free(&opt, &m);
        tr_model_free(&m);
        tr_backend_free(be);
        tr_mem_destroy(&host);
        remove(m2), remove(s2), remove(a.model), remove(b.model), remove(a.state), remove(b.state);
        free(a.grads), free(a.params), free(b.grads), free(b.params);
    }
    /* granularity: every image in one encoder pass, every pair in one decoder chunk */
    const tr_model_opts plain = {0}, ckpt = {.ckpt_every = 1, .ckpt_decoder = 1};
    const tr_model_opts bplain = {.precision = TR_PREC_BF16}, bckpt = {.ckpt_decoder = 1, .precision = TR_PREC_BF16};
    run d = {0}, p = {0}, c = {0}, bp = {0}, bc = {0};
    int ok = run_steps(&plain, 0, &d) == 0 && run_steps(&plain, 2, &p) == 0 && run_steps(&ckpt, 2, &c) == 0 &&
             run_steps(&bplain, 2, &bp) == 0 && run_steps(&bckpt, 2, &bc) == 0;
    tap_ok(ok && d.n_chunks == 3 && p.n_chunks == 1 && d.enc_ni == 1 && p.enc_ni == 2,
           "the backend's granularity: the decoder in %d chunks of 2 pairs (CPU) or %d of 6, the encoder in passes "
           "of %d image (CPU) or %d", d.n_chunks, p.n_chunks, d.enc_ni, p.enc_ni);
    if (ok) {
        tap_ok(p.L[2].loss == c.L[2].loss && !memcmp(p.grads, c.grads, p.n_grads * sizeof(float)),
               "one pass, one chunk: checkpointing on and off bit-identical (fp32)");
        tap_ok(bp.L[2].loss == bc.L[2].loss && !memcmp(bp.grads, bc.grads, bp.n_grads * sizeof(float)),
               "one pass, one chunk: decoder checkpointing on and off bit-identical (bf16)");
        double worst = 0;
        for (size_t i = 0; i < d.n_grads; i++) {
            double e = fabs((double)d.grads[i] - p.grads[i]) / (fabs((double)d.grads[i]) + 1e-3);
            if (e > worst) worst = e;
        }
        tap_ok(fabs(d.L[2].loss - p.L[2].loss) <= 1e-6 * d.L[2].loss && worst < 1e-4,
               "one pass and one chunk vs the CPU's: loss %.9f vs %.9f, gradients within %.2g", d.L[2].loss, p.L[2].loss,
               worst);
    }
    free(d.grads), free(d.params), free(p.grads), free(p.params), free(c.grads), free(c.params);
    free(bp.grads), free(bp.params), free(bc.grads), free(bc.params);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) tap_diag("could not remove %s", tmpdir);
    return tap_done();
}
