/*
 * train_eval.c - sa1b-train's evaluation: mIoU of the predictions with one
 * point per mask, and PNG overlays of them (--export).
 */
#include <errno.h>
#include <glob.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train.h"
#include "pngio.h"

/* One overlay: the image with the ground truth (green) on the left and the
 * prediction (red) on the right, point prompts marked (yellow positive,
 * cyan negative); cropped to the image's content (no letterbox band) and
 * enlarged by a whole factor, nearest-neighbour, to at least 512 pixels on
 * its long side; masks at R are shown nearest-neighbour. */
static void export_png(const char *dir, long idx, const tr_batch *b, int img, int pair, const float *logits, double iou)
{
    int S = b->S, R = b->R, K = b->K;
    int cw = b->content[img * 2], ch = b->content[img * 2 + 1];
    if (cw < 1 || cw > S) cw = S;
    if (ch < 1 || ch > S) ch = S;
    int z = (512 + (cw > ch ? cw : ch) - 1) / (cw > ch ? cw : ch), W = cw * z, H = ch * z;
    uint8_t *pix = malloc((size_t)W * 2 * H * 3);
    if (!pix) cli_die(CLI_EXIT_FATAL, "out of memory");
    const uint8_t *im = b->image + (size_t)img * S * S * 3, *gt = b->masks + (size_t)pair * R * R;
    const float *lg = logits + (size_t)pair * R * R;
    for (int Y = 0; Y < H; Y++)
        for (int X = 0; X < W; X++) {
            int y = Y / z, x = X / z, cell = (y * R / S) * R + x * R / S;
            for (int side = 0; side < 2; side++) {
                uint8_t *p = pix + ((size_t)Y * 2 * W + side * W + X) * 3;
                const uint8_t *q = im + ((size_t)y * S + x) * 3;
                int on = side ? lg[cell] > 0 : gt[cell] != 0;
                for (int c = 0; c < 3; c++) {
                    int tint = side ? (c == 0 ? 255 : 0) : (c == 1 ? 255 : 0);
                    p[c] = on ? (uint8_t)((q[c] + tint) / 2) : q[c];
                }
            }
        }
    for (int k = 0; k < K; k++) {
        int lab = b->labels[(size_t)pair * K + k];
        if (lab < 0) continue;
        int px = (int)lroundf(b->points[((size_t)pair * K + k) * 2] * z + (z - 1) / 2.0f);
        int py = (int)lroundf(b->points[((size_t)pair * K + k) * 2 + 1] * z + (z - 1) / 2.0f);
        for (int side = 0; side < 2; side++)
            for (int d = -2 * z; d <= 2 * z; d++)
                for (int t = -(z / 2); t <= z / 2; t++) { /* a cross, arms 2 image pixels, z/2 thick */
                    int xy[2][2] = {{px + d, py + t}, {px + t, py + d}};
                    for (int a = 0; a < 2; a++) {
                        int xx = xy[a][0], yy = xy[a][1];
                        if (xx < 0 || yy < 0 || xx >= W || yy >= H) continue;
                        uint8_t *p = pix + ((size_t)yy * 2 * W + side * W + xx) * 3;
                        p[0] = lab ? 255 : 0, p[1] = 255, p[2] = lab ? 0 : 255;
                    }
                }
    }
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/%05ld-iou%03d.png", dir, idx, (int)lround(iou * 100));
    cli_out out; /* a temporary of this process, removed if a signal ends the evaluation, renamed when whole */
    cli_out_open(&out, path);
    if (pngio_write(out.f, pix, (uint32_t)(2 * W), (uint32_t)H, 3, err, sizeof err) != 0) cli_out_fail(&out, err);
    cli_out_commit(&out);
    free(pix);
}

int evaluate(const options *o, tr_model *m, tr_data_source *src, int whole)
{
    char exdir[4096] = "";
    long exported = 0;
    if (o->export_n) {
        snprintf(exdir, sizeof exdir, "%s/export", o->out);
        if ((mkdir(o->out, 0777) != 0 && errno != EEXIST) || (mkdir(exdir, 0777) != 0 && errno != EEXIST))
            cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", exdir, strerror(errno));
        lock_export(o, exdir); /* one export at a time; an earlier one's overlays refused or removed */
    }
    char err[512];
    int hist[10] = {0};
    double sum = 0;
    long n = 0, left_out = 0; /* pairs scored; masks of the data that are no pair (no pixel at R) */
    int RR = m->geom.RR;
    /* the logits, in host memory (downloaded, 16-bit storage widened) */
    float *buf = tr_mem_alloc(m->be->host_mem, TR_MEM_WORK, (size_t)m->B * m->M * RR * sizeof(float));
    if (!buf) cli_die(CLI_EXIT_FATAL, "out of memory");
    const float *logits = buf;
    for (long i = 0; whole || i < o->eval_batches; i++) {
        tr_batch *b;
        test_hook("eval", i);
        int rc = tr_source_next(src, &b, err, sizeof err);
        if (rc < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        if (rc == 0) break;
        if (tr_model_forward(m, b, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        tr_model_get_logits(m, buf);
        if (device_error(o->job, m->be, err, sizeof err)) /* no metrics or overlays from a failed GPU */
            cli_die(CLI_EXIT_FATAL, "--backend cuda: %s", err);
        for (int img = 0; b->n_masks && img < m->B; img++) { /* delivered, valid or not */
            int nv = 0;
            for (int k = 0; k < m->M; k++) nv += b->valid[(size_t)img * m->M + k] != 0;
            if (b->n_masks[img] > nv) left_out += b->n_masks[img] - nv;
        }
        for (int p = 0; p < m->B * m->M; p++) {
            if (!b->valid[p]) continue; /* padding, or a mask empty at R: not scored */
            long in = 0, un = 0;
            for (int j = 0; j < RR; j++) {
                int x = logits[(size_t)p * RR + j] > 0, y = b->masks[(size_t)p * RR + j] != 0;
                in += x && y, un += x || y;
            }
            double iou = un ? (double)in / un : 1.0;
            if (exported < o->export_n) export_png(exdir, exported++, b, p / m->M, p, logits, iou);
            sum += iou, n++;
            hist[iou >= 1.0 ? 9 : (int)(iou * 10)]++;
        }
        tr_source_release(src, b);
    }
    tr_mem_free(m->be->host_mem, buf);
    /* "masks": the pairs scored; "masks_left_out" (last, so that the line
     * begins as it always did): masks of the data that are no pair */
    printf("{\"miou\": %.6f, \"masks\": %ld, \"histogram\": [", n ? sum / n : 0.0, n);
    for (int i = 0; i < 10; i++) printf("%s%d", i ? ", " : "", hist[i]);
    printf("], \"masks_left_out\": %ld}\n", left_out);
    return 0;
}

/* --val after training: a model for one point per mask with the trained
 * weights, evaluated on the whole of --val.  The training's model m is
 * freed first, its weights kept on the host: beside it, the evaluation's
 * model did not fit under --memory-limit at the planner's peak. */
void evaluate_val(const options *o, tr_backend *be, const tr_config *cfg, tr_model *m)
{
    char err[512];
    size_t np = m->n_param_floats, nc = (size_t)cfg->C;
    float *w = malloc((np + nc) * sizeof(float));
    if (!w) cli_die(CLI_EXIT_FATAL, "out of memory for the evaluation of --val");
    be->ops->download(be, w, m->param_mem, np * sizeof(float));
    be->ops->download(be, w + np, m->pe_gaussian, nc * sizeof(float));
    tr_model_free(m);
    tr_mem_empty_cache(&be->mem);
    tr_model ev;
    if (tr_model_init(&ev, be, cfg, o->batch, o->masks, 1, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    be->ops->upload(be, ev.param_mem, w, np * sizeof(float));
    be->ops->upload(be, ev.pe_gaussian, w + np, nc * sizeof(float));
    free(w);
    tr_data_source vs = {0};
    open_source(o, cfg, &vs, be->host_mem, "--val", o->val, 1, 1, 0.0);
    evaluate(o, &ev, &vs, 1);
    /* its line is printed: a signal from now on no longer ends the process
     * at once saying --val was not evaluated (and losing that line, still
     * in stdout's buffer); the run ends as it would have */
    fflush(stdout);
    sig_stop_keeps();
    tr_source_close(&vs);
    tr_model_free(&ev);
}

int run_eval_only(const options *op, tr_backend *be)
{
    options o = *op;
    char err[512];
    o.points = 1; /* one positive point per mask: the SA-1B point when the shard has it */
    if (tr_ckpt_read_config(o.eval_only, &o.cfg, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    tr_model m; /* (the planner of an out-of-memory line plans the checkpoint's model: o.cfg) */
    if (setup_model(&o, be, &o.cfg, &m, 1, err, sizeof err) < 0) die_explained(&o, be, err);
    tr_data_source src = {0};
    if (tr_ckpt_load_model(&m, o.eval_only, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    open_source(&o, &o.cfg, &src, be->host_mem, "--val", o.val, o.points, 1, 0.0);
    warn_incomplete(&o, &src, "--val", o.val);
    evaluate(&o, &m, &src, o.val != NULL);
    tr_source_close(&src);
    tr_model_free(&m);
    return 0;
}
