/*
 * dump.c - sa1b-train --dump-step: one forward and backward on the first
 * batch written as MODEL.md's debug dump, the loss on stdout.
 */
#include <math.h>
#include <stdio.h>

#include "train.h"

/* --dump-step: one forward and backward on the first batch, in the
 * configured precision (fp16 scales the loss, halved until no gradient
 * overflows), written as MODEL.md's debug dump; the loss on stdout. */
static void dump_step(const options *o, tr_model *m, tr_data_source *src, int prec)
{
    char err[512];
    tr_batch *b;
    int rc = tr_source_next(src, &b, err, sizeof err);
    if (rc <= 0) cli_die(CLI_EXIT_FATAL, "%s", rc < 0 ? err : "no data for --dump-step");
    tr_loss_scale ls; /* fp16: the training's first scale, halved until no gradient overflows */
    tr_loss_scale_init(&ls, prec, 0);
    tr_loss L;
    for (;;) {
        if (tr_model_forward(m, b, err, sizeof err) < 0 ||
            tr_model_backward_acc(m, b, 1, ls.scale, 0, &L, err, sizeof err) < 0)
            cli_die(CLI_EXIT_FATAL, "%s", err);
        if (isfinite(tr_model_scale_grads(m, 1.0 / ls.scale)) || ls.scale <= 1.0f) break;
        tr_loss_scale_update(&ls, 1);
    }
    check_device(o->job, m->be);
    /* a signal while the dump is written (to a temporary renamed into place)
     * ends the process once it is in place, a second at once: never a
     * temporary of the dump's size left beside it */
    sig_watch_stop();
    if (tr_dump_step(m, b, &L, o->dump_step, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    sig_stop_now();
    char jl[4][32];
    printf("{\"loss\": %s, \"focal\": %s, \"dice\": %s, \"iou_mse\": %s, \"valid\": %d}\n",
           json_num(jl[0], L.loss, 8, 0), json_num(jl[1], L.focal, 8, 0), json_num(jl[2], L.dice, 8, 0),
           json_num(jl[3], L.iou_mse, 8, 0), L.n_valid);
    tr_source_release(src, b);
    tr_source_close(src);
}

int run_dump(const options *o, tr_backend *be)
{
    char err[512];
    tr_model m;
    if (setup_model(o, be, &o->cfg, &m, 0, err, sizeof err) < 0) die_explained(o, be, err);
    tr_data_source src = {0};
    open_training_data(o, &o->cfg, &src, be);
    dump_step(o, &m, &src, o->precision);
    tr_model_free(&m);
    return 0;
}
