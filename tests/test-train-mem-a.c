/*
 * test-train-mem-a.c - the training features that change the computation
 * (issue 7, part A), on a small model through the model API:
 *  - gradient checkpointing (encoder every N blocks, decoder layers):
 *    gradients, loss and outputs bit-identical to the run without it (memcmp
 *    of every gradient), in fp32 and in bf16, and the activation peak of the
 *    accounting allocator lower;
 *  - precision bf16 / fp16: stored activations really rounded (every value of
 *    the logits is a 16-bit value), loss close to fp32, activation memory
 *    lower than fp32, the LayerNorm statistics recomputed in the backward
 *    exactly (bit-identical to stored ones), fp16 overflow detected as
 *    non-finite gradients;
 *  - gradient accumulation: K micro-batches of B give the same AdamW update
 *    as one batch of K*B (parameters to 1e-6 relative);
 *  - freezing: no gradient memory or pointer for frozen parameters, the
 *    trainable gradients bit-identical to the unfrozen run, the optimizer
 *    holds no state for them and leaves them unchanged, gradient,
 *    activation and optimizer memory lower; unfreezing brings them back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "data/batch.h"
#include "data/synthetic.h"
#include "model/model.h"
#include "train/optim.h"
#include "tap.h"
#include "registry/registry.h"

static const tr_config CFG = {.S = 64, .P = 16, .E = 32, .L = 3, .H = 2, .C = 32, .h = 2, .D = 2};
enum { BB = 2, MM = 3, KK = 2 };

typedef struct run {
    tr_backend *be;
    tr_model m;
    tr_batch *b;
    tr_loss L;
    float *grads;      /* copy of the gradients (full layout, 0 for frozen) */
    float *logits;     /* copy */
    uint64_t act_peak; /* activation peak of the accounting over forward + backward */
    uint64_t grad_bytes;
} run;

/* Fresh backend and model (seed 7), options and frozen groups applied,
 * one forward + backward on synthetic batch 11. */
static int do_run(run *r, const tr_model_opts *opt, const char *const *freeze, int n_freeze)
{
    char err[256];
    memset(r, 0, sizeof *r);
    r->be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!r->be) return -1;
    if (tr_model_init(&r->m, r->be, &CFG, BB, MM, KK, err, sizeof err) < 0) return -1;
    tr_model_init_params(&r->m, 7);
    if (opt && tr_model_set_options(&r->m, opt, err, sizeof err) < 0) return -1;
    for (int i = 0; i < n_freeze; i++)
        if (tr_model_freeze(&r->m, freeze[i], 1, err, sizeof err) < 0) return -1;
    int R = 4 * (CFG.S / CFG.P);
    r->b = tr_batch_alloc(&r->be->mem, BB, MM, KK, CFG.S, R);
    tr_batch_synthetic(r->b, 11);
    tr_mem_reset_peak(&r->be->mem);
    if (tr_model_forward(&r->m, r->b, err, sizeof err) < 0) return -1;
    r->L = tr_model_backward(&r->m, r->b);
    tr_mem_stats st;
    tr_mem_get_stats(&r->be->mem, &st);
    r->act_peak = st.peak[TR_MEM_ACTS];
    r->grad_bytes = st.cur[TR_MEM_GRADS];
    size_t n = r->m.n_param_floats;
    r->grads = calloc(n, sizeof(float));
    for (int i = 0; i < r->m.n_params; i++) {
        const float *g = tr_model_grad(&r->m, i);
        if (g) memcpy(r->grads + r->m.pinfo[i].offset, g, r->m.pinfo[i].count * sizeof(float));
    }
    size_t nl = (size_t)BB * MM * R * R;
    r->logits = malloc(nl * sizeof(float));
    tr_model_get_logits(&r->m, r->logits);
    return 0;
}

static void end_run(run *r)
{
    if (r->b) tr_batch_free(&r->be->mem, r->b);
    tr_model_free(&r->m);
    tr_backend_free(r->be);
    free(r->grads);
    free(r->logits);
}

static int same_grads(const run *a, const run *b)
{
    return memcmp(a->grads, b->grads, a->m.n_param_floats * sizeof(float)) == 0 &&
           memcmp(a->logits, b->logits, (size_t)BB * MM * 16 * (CFG.S / CFG.P) * (CFG.S / CFG.P) * 4) == 0 &&
           a->L.loss == b->L.loss;
}

static void test_checkpointing(int prec, const char *pname)
{
    run base, r;
    tr_model_opts o0 = {.precision = prec};
    if (do_run(&base, &o0, NULL, 0) < 0) {
        tap_ok(0, "%s: baseline run", pname);
        return;
    }
    tap_ok(base.L.n_valid > 0 && isfinite(base.L.loss), "%s: baseline loss %.6f over %d pairs", pname, base.L.loss,
           base.L.n_valid);
    const struct { int every, dec; } cases[] = {{1, 0}, {2, 0}, {3, 0}, {0, 1}, {1, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tr_model_opts o = {.ckpt_every = cases[k].every, .ckpt_decoder = cases[k].dec, .precision = prec};
        if (do_run(&r, &o, NULL, 0) < 0) {
            tap_ok(0, "%s: checkpointed run", pname);
            continue;
        }
        tap_ok(same_grads(&base, &r), "%s: --checkpoint-every %d%s: every gradient, the logits and the loss "
               "bit-identical", pname, cases[k].every, cases[k].dec ? " --checkpoint-decoder" : "");
        if (cases[k].every == 1 || cases[k].dec) /* every N = L is one segment: nothing saved */
            tap_ok(r.act_peak < base.act_peak, "%s: activation peak %.1f KiB < %.1f KiB without checkpointing "
                   "(-%.0f%%)", pname, r.act_peak / 1024.0, base.act_peak / 1024.0,
                   100.0 * (1.0 - (double)r.act_peak / base.act_peak));
        end_run(&r);
    }
    end_run(&base);
}

static void test_precision(void)
{
    run f32, h;
    tr_model_opts o32 = {0};
    if (do_run(&f32, &o32, NULL, 0) < 0) return;
    for (int prec = TR_PREC_BF16; prec <= TR_PREC_FP16; prec++) {
        const char *pn = prec == TR_PREC_BF16 ? "bf16" : "fp16";
        tr_model_opts o = {.precision = prec};
        if (do_run(&h, &o, NULL, 0) < 0) {
            tap_ok(0, "%s run", pn);
            continue;
        }
        size_t nl = (size_t)BB * MM * 16 * (CFG.S / CFG.P) * (CFG.S / CFG.P), bad = 0, differ = 0;
        for (size_t i = 0; i < nl; i++) {
            if (tr_round_prec(h.logits[i], prec) != h.logits[i]) bad++;
            if (h.logits[i] != f32.logits[i]) differ++;
        }
        tap_ok(bad == 0 && differ > 0, "%s: logits are stored 16-bit values (%zu not representable, %zu differ "
               "from fp32)", pn, bad, differ);
        double rel = fabs(h.L.loss - f32.L.loss) / f32.L.loss;
        tap_ok(rel < (prec == TR_PREC_BF16 ? 3e-2 : 5e-3), "%s: loss %.6f vs fp32 %.6f (relative %.1e)", pn,
               h.L.loss, f32.L.loss, rel);
        double dot = 0, n1 = 0, n2 = 0;
        int finite = 1;
        for (size_t i = 0; i < f32.m.n_param_floats; i++) {
            finite &= isfinite(h.grads[i]);
            dot += (double)h.grads[i] * f32.grads[i];
            n1 += (double)h.grads[i] * h.grads[i];
            n2 += (double)f32.grads[i] * f32.grads[i];
        }
        double cosine = dot / sqrt(n1 * n2);
        tap_ok(finite && cosine > 0.99, "%s: gradients finite, cosine to fp32 %.5f", pn, cosine);
        tap_ok(h.act_peak < f32.act_peak, "%s: activation peak %.1f KiB < fp32 %.1f KiB (-%.0f%%)", pn,
               h.act_peak / 1024.0, f32.act_peak / 1024.0, 100.0 * (1.0 - (double)h.act_peak / f32.act_peak));
        /* the LayerNorm statistics recomputed in the backward are the forward's (stored ones give the
         * same bits), without and with checkpointing */
        for (int ck = 0; ck < 2; ck++) {
            run k;
            tr_model_opts ok = {.precision = prec, .keep_ln_stats = 1, .ckpt_every = ck, .ckpt_decoder = ck};
            if (do_run(&k, &ok, NULL, 0) < 0) {
                tap_ok(0, "%s: run with stored statistics", pn);
                continue;
            }
            tap_ok(same_grads(&h, &k) && (ck || h.act_peak < k.act_peak), "%s: recomputed LayerNorm statistics "
                   "give the gradients, the logits and the loss of stored ones%s, bit for bit (activation peak "
                   "%.1f KiB, stored %.1f KiB)", pn, ck ? " (stored, checkpointed)" : "", h.act_peak / 1024.0,
                   k.act_peak / 1024.0);
            end_run(&k);
        }
        end_run(&h);
    }
    /* fp16 overflow: a huge loss scale makes gradients non-finite */
    {
        char err[256];
        tr_model_opts o = {.precision = TR_PREC_FP16};
        if (do_run(&h, &o, NULL, 0) == 0) {
            tr_model_forward(&h.m, h.b, err, sizeof err);
            tr_loss L;
            tr_model_backward_acc(&h.m, h.b, 1, 1e30f, 0, &L, err, sizeof err);
            double ss = tr_model_scale_grads(&h.m, 1e-30);
            tap_ok(!isfinite(ss), "fp16: a loss scale of 1e30 overflows (sum of squares %g)", ss);
            tr_model_forward(&h.m, h.b, err, sizeof err);
            tr_model_backward_acc(&h.m, h.b, 1, 1024.0f, 0, &L, err, sizeof err);
            ss = tr_model_scale_grads(&h.m, 1.0 / 1024);
            tap_ok(isfinite(ss) && ss > 0, "fp16: a loss scale of 1024 does not (sum of squares %g)", ss);
            end_run(&h);
        }
    }
    end_run(&f32);
}

/* Copies images [i0, i0 + n) of src into dst (n images). */
static void split_batch(tr_batch *dst, const tr_batch *src, int i0)
{
    int n = dst->B, S = src->S, R = src->R, M = src->M, K = src->K;
    memcpy(dst->image, src->image + (size_t)i0 * S * S * 3, (size_t)n * S * S * 3);
    memcpy(dst->content, src->content + 2 * i0, (size_t)n * 2 * sizeof(int32_t));
    memcpy(dst->masks, src->masks + (size_t)i0 * M * R * R, (size_t)n * M * R * R);
    memcpy(dst->valid, src->valid + (size_t)i0 * M, (size_t)n * M);
    memcpy(dst->points, src->points + (size_t)i0 * M * K * 2, (size_t)n * M * K * 2 * sizeof(float));
    memcpy(dst->labels, src->labels + (size_t)i0 * M * K, (size_t)n * M * K * sizeof(int32_t));
}

static void test_accumulation(void)
{
    char err[256];
    const int A = 3, B1 = 2, R = 4 * (CFG.S / CFG.P);
    tr_backend *be = tr_backend_create("cpu", 2, err, sizeof err);
    tr_model big, small;
    tr_model_init(&big, be, &CFG, A * B1, MM, KK, err, sizeof err);
    tr_model_init(&small, be, &CFG, B1, MM, KK, err, sizeof err);
    tr_model_init_params(&big, 5);
    tr_model_init_params(&small, 5);
    tr_batch *bb = tr_batch_alloc(&be->mem, A * B1, MM, KK, CFG.S, R);
    tr_batch_synthetic(bb, 21); /* the last pair of the last image is invalid: unequal counts */
    tr_batch *mb = tr_batch_alloc(&be->mem, B1, MM, KK, CFG.S, R);
    tr_optim_config oc;
    tr_optim_defaults(&oc, 1e-3, 10);
    oc.warmup = 0;
    tr_optim ob, os;
    tr_optim_init(&ob, &big, &oc);
    tr_optim_init(&os, &small, &oc);
    /* batch A*B in one pass */
    tr_model_forward(&big, bb, err, sizeof err);
    tr_loss Lb = tr_model_backward(&big, bb);
    tr_optim_step(&ob, &big, NULL);
    /* A micro-batches of B: sum of pair-loss gradients, then 1/N */
    long n = 0;
    double lsum = 0;
    for (int k = 0; k < A; k++) {
        split_batch(mb, bb, k * B1);
        tr_model_forward(&small, mb, err, sizeof err);
        tr_loss L;
        tr_model_backward_acc(&small, mb, k == 0, 1.0f, 1, &L, err, sizeof err);
        n += L.n_valid;
        lsum += L.loss * L.n_valid;
    }
    tr_model_scale_grads(&small, 1.0 / (double)n);
    tap_ok(n == Lb.n_valid && fabs(lsum / n - Lb.loss) <= 1e-6 * Lb.loss,
           "accumulation: loss over %ld pairs %.7f = batch loss %.7f", n, lsum / n, Lb.loss);
    double gmax = 0;
    for (size_t i = 0; i < big.n_param_floats; i++) {
        double d = fabs((double)big.grad_mem[i] - small.grad_mem[i]) / (fabs((double)big.grad_mem[i]) + 1e-8);
        if (d > gmax) gmax = d;
    }
    tap_ok(gmax < 1e-3, "accumulation: gradients of the flat mean agree (max relative %.1e, 1e-8 floor)", gmax);
    tr_optim_step(&os, &small, NULL);
    /* the whole parameter vector: ||p_accum - p_batch|| / ||p_batch|| in the
     * 2-norm and the max-norm; per tensor (2-norm) as a diagnostic */
    double dd2 = 0, nn2 = 0, ddmax = 0, nnmax = 0, worst = 0;
    int at = 0;
    for (int i = 0; i < big.n_params; i++) {
        const tr_param_info *pi = &big.pinfo[i];
        /* key-projection biases: their exact gradient is 0 (softmax ignores a
         * shift of all scores of a query), the computed one rounding noise
         * that Adam's first step turns into +-lr in either run */
        if (strstr(pi->name, "k_proj.b")) continue;
        double dd = 0, nn = 0;
        for (size_t j = pi->offset; j < pi->offset + pi->count; j++) {
            double d = (double)big.param_mem[j] - small.param_mem[j], p = big.param_mem[j];
            dd += d * d, nn += p * p;
            ddmax = fmax(ddmax, fabs(d)), nnmax = fmax(nnmax, fabs(p));
        }
        dd2 += dd, nn2 += nn;
        double rel = nn > 0 ? sqrt(dd / nn) : sqrt(dd);
        if (rel > worst) worst = rel, at = i;
        if (getenv("MEM_A_VERBOSE")) tap_diag("%s %.2e", pi->name, rel);
    }
    double r2 = sqrt(dd2 / nn2), rmax = ddmax / nnmax;
    tap_ok(r2 <= 1e-6 && rmax <= 1e-6, "accumulation: %d x B=%d gives the update of B=%d (parameters within "
           "%.1e relative in the 2-norm, %.1e in the max-norm)", A, B1, A * B1, r2, rmax);
    tap_diag("worst single tensor: %s %.1e relative (its gradient is a sum with heavy cancellation)",
             big.pinfo[at].name, worst);
    tr_optim_free(&ob, &big);
    tr_optim_free(&os, &small);
    tr_batch_free(&be->mem, bb);
    tr_batch_free(&be->mem, mb);
    tr_model_free(&big);
    tr_model_free(&small);
    tr_backend_free(be);
}

static void test_freezing(void)
{
    run base, fr;
    tr_model_opts o0 = {0};
    if (do_run(&base, &o0, NULL, 0) < 0) return;
    const char *groups[][3] = {{"encoder"}, {"embed", "blocks.0-1"}, {"blocks.1"}, {"neck", "decoder"}};
    const int ng[] = {1, 2, 1, 2};
    for (int k = 0; k < 4; k++) {
        if (do_run(&fr, &o0, groups[k], ng[k]) < 0) {
            tap_ok(0, "freeze run %d", k);
            continue;
        }
        int nulls_ok = 1, same = 1, any_frozen = 0;
        for (int i = 0; i < fr.m.n_params; i++) {
            const tr_param_info *pi = &fr.m.pinfo[i];
            const float *g = tr_model_grad(&fr.m, i);
            if (fr.m.frozen[i]) {
                any_frozen = 1;
                if (g) nulls_ok = 0;
            } else if (memcmp(fr.grads + pi->offset, base.grads + pi->offset, pi->count * sizeof(float)) != 0) {
                same = 0;
            }
        }
        char desc[64];
        snprintf(desc, sizeof desc, "%s%s%s", groups[k][0], ng[k] > 1 ? "," : "", ng[k] > 1 ? groups[k][1] : "");
        tap_ok(any_frozen && nulls_ok, "freeze %s: frozen parameters have no gradient", desc);
        tap_ok(same, "freeze %s: trainable gradients bit-identical to the unfrozen run", desc);
        if (k < 2) {
            tap_ok(fr.grad_bytes < base.grad_bytes && fr.act_peak < base.act_peak,
                   "freeze %s: gradient memory %.1f < %.1f KiB, activation peak %.1f < %.1f KiB", desc,
                   fr.grad_bytes / 1024.0, base.grad_bytes / 1024.0, fr.act_peak / 1024.0, base.act_peak / 1024.0);
        }
        if (k == 0) {
            /* optimizer: no state, no change for the frozen encoder; unfreezing restores training */
            char err[256];
            tr_optim_config oc;
            tr_optim_defaults(&oc, 1e-3, 10);
            oc.warmup = 0;
            tr_optim o;
            tr_optim_init(&o, &fr.m, &oc);
            size_t full = tr_optim_state_bytes(&o);
            uint8_t *tr = malloc((size_t)fr.m.n_params);
            for (int i = 0; i < fr.m.n_params; i++) tr[i] = !fr.m.frozen[i];
            tr_optim_set_trainable(&o, &fr.m, tr);
            size_t part = tr_optim_state_bytes(&o);
            tap_ok(part < full, "freeze encoder: optimizer state %zu < %zu bytes", part, full);
            int absent = 1;
            for (int i = 0; i < fr.m.n_params; i++)
                if (fr.m.frozen[i] && o.slot[i].active) absent = 0;
            tap_ok(absent, "freeze encoder: no optimizer slot for frozen parameters");
            float *before = malloc(fr.m.n_param_floats * sizeof(float));
            memcpy(before, fr.m.param_mem, fr.m.n_param_floats * sizeof(float));
            for (int step = 0; step < 2; step++) {
                tr_model_forward(&fr.m, fr.b, err, sizeof err);
                tr_model_backward(&fr.m, fr.b);
                tr_optim_step(&o, &fr.m, NULL);
            }
            int frozen_same = 1, trained_moved = 0;
            for (int i = 0; i < fr.m.n_params; i++) {
                const tr_param_info *pi = &fr.m.pinfo[i];
                int eq = !memcmp(before + pi->offset, fr.m.param_mem + pi->offset, pi->count * sizeof(float));
                if (fr.m.frozen[i] && !eq) frozen_same = 0;
                if (!fr.m.frozen[i] && !eq) trained_moved = 1;
            }
            tap_ok(frozen_same && trained_moved, "freeze encoder: 2 steps leave frozen parameters unchanged, "
                   "train the others");
            /* unfreeze the neck at this step: it trains from here */
            int neck = tr_model_find_param(&fr.m, "enc.neck.w");
            err[0] = 0;
            tap_ok(tr_model_freeze(&fr.m, "neck", 0, err, sizeof err) == 0, "unfreeze neck %s", err);
            for (int i = 0; i < fr.m.n_params; i++) tr[i] = !fr.m.frozen[i];
            tr_optim_set_trainable(&o, &fr.m, tr);
            memcpy(before, fr.m.param_mem, fr.m.n_param_floats * sizeof(float));
            tr_model_forward(&fr.m, fr.b, err, sizeof err);
            tr_model_backward(&fr.m, fr.b);
            tr_optim_step(&o, &fr.m, NULL);
            const tr_param_info *pn = &fr.m.pinfo[neck];
            int blk0 = tr_model_find_param(&fr.m, "enc.blocks.0.attn.qkv.w");
            const tr_param_info *pb = &fr.m.pinfo[blk0];
            tap_ok(tr_model_grad(&fr.m, neck) && o.slot[neck].active &&
                       memcmp(before + pn->offset, fr.m.param_mem + pn->offset, pn->count * sizeof(float)) != 0 &&
                       !memcmp(before + pb->offset, fr.m.param_mem + pb->offset, pb->count * sizeof(float)),
                   "after unfreezing, enc.neck.w has a gradient, state and trains; the blocks stay frozen");
            free(before);
            free(tr);
            tr_optim_free(&o, &fr.m);
        }
        end_run(&fr);
    }
    char err[256];
    tap_ok(!tr_model_group_valid("blocks.3", 3) && !tr_model_group_valid("blocks.2-1", 3) &&
               !tr_model_group_valid("blocks.", 3) && !tr_model_group_valid("blocks.1-", 3) &&
               !tr_model_group_valid("necks", 3) && tr_model_group_valid("blocks.0-2", 3) &&
               tr_model_freeze(&base.m, "bogus", 1, err, sizeof err) < 0,
           "group names are parsed strictly (%s)", err);
    end_run(&base);
}

/* The activation accounting of each memory feature against the fp32
 * baseline on the test shape (B=2, M=3): gradient buffers are shared per
 * block / layer / tail group, the decoder tail reuses the decoder slot with
 * --checkpoint-decoder; ratios measured with margin, no timing. */
static void test_memory_ratios(void)
{
    run base, r;
    tr_model_opts o0 = {0};
    if (do_run(&base, &o0, NULL, 0) < 0) {
        tap_ok(0, "memory: baseline run");
        return;
    }
    /* activation gradients: persistent + one union region, well below the activations */
    tap_ok(base.m.n_dact_floats * 2 < base.m.n_act_floats,
           "memory: activation gradients %.1f KiB < half the activations %.1f KiB (buffers reused)",
           base.m.n_dact_floats * 4 / 1024.0, base.m.n_act_floats * 4 / 1024.0);
    const struct { int every, dec, prec; double max; const char *what; } cases[] = {
        {1, 0, TR_PREC_FP32, 0.92, "--checkpoint-every 1"},
        {1, 1, TR_PREC_FP32, 0.70, "--checkpoint-every 1 --checkpoint-decoder"},
        {0, 0, TR_PREC_BF16, 0.92, "--precision bf16"},
        {1, 1, TR_PREC_BF16, 0.70, "every feature"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tr_model_opts o = {.ckpt_every = cases[k].every, .ckpt_decoder = cases[k].dec, .precision = cases[k].prec};
        if (do_run(&r, &o, NULL, 0) < 0) {
            tap_ok(0, "memory: %s run", cases[k].what);
            continue;
        }
        double ratio = (double)r.act_peak / base.act_peak;
        tap_ok(ratio <= cases[k].max, "memory: %s: activation peak %.1f KiB = %.2f x fp32 baseline %.1f KiB "
               "(<= %.2f)", cases[k].what, r.act_peak / 1024.0, ratio, base.act_peak / 1024.0, cases[k].max);
        end_run(&r);
    }
    end_run(&base);
}

int main(void)
{
    test_checkpointing(TR_PREC_FP32, "fp32");
    test_checkpointing(TR_PREC_BF16, "bf16");
    test_precision();
    test_accumulation();
    test_freezing();
    test_memory_ratios();
    return tap_done();
}
