/*
 * test-attn-pick.c - the parts of the CUDA backend's attention choice that
 * need no GPU (trainer/backend/cuda/backend_cuda_pick.h): the candidates
 * and their order, the comparison of results (errors, NaNs, elements left
 * as the poison), the first candidate that passes with fake results, the
 * line of a path refused, the table by shape; the model's shapes
 * (tr_model_attn_shapes) and the paths' names (registry.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/backend_cuda.h"
#include "backend/cuda/backend_cuda_pick.h"
#include "common/kernels.h"
#include "model/model.h"
#include "registry/registry.h"
#include "tap.h"

static tr_attn_dims dims(int N, int Tq, int Tk, int heads, int dh, int ld)
{
    tr_attn_dims d = {.N = N, .Tq = Tq, .Tk = Tk, .heads = heads, .dh = dh, .ldq = ld, .ldk = ld, .ldv = ld, .ldo = ld};
    d.sq = d.so = (size_t)Tq * ld, d.sk = d.sv = (size_t)Tk * ld;
    return d;
}

static void cands_text(const int *c, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "," : "", tr_attn_path_name(c[i]));
}

/* a fake candidate: the verdicts of a list, in order */
typedef struct fake {
    const char *lib[4];
    double err[4];
    int calls, fail_at;
} fake;

static int fake_try(void *ctx, int path, tr_attn_verdict *v)
{
    fake *f = ctx;
    (void)path;
    int i = f->calls++;
    if (i == f->fail_at) return -1;
    if (f->lib[i]) {
        snprintf(v->lib, sizeof v->lib, "%s", f->lib[i]);
        return 0;
    }
    v->n_diff = 1;
    v->diff[0] = (tr_attn_diff){.what = "dq", .err = f->err[i], .tol = 0.05, .at = 7, .n = 100, .got = 0.5, .want = 0.25};
    return 0;
}

static char lines[4][700];
static int n_lines;
static void keep_line(void *ctx, const char *line)
{
    (void)ctx;
    if (n_lines < 4) snprintf(lines[n_lines], sizeof lines[0], "%s", line);
    n_lines++;
}

int main(void)
{
    char buf[200];
    int c[4], n;

    /* candidates: cuDNN, flash, the rule's, blocked */
    tr_attn_dims enc = dims(4, 4096, 4096, 12, 64, 3 * 768);
    n = tr_attn_candidates(&enc, TR_PREC_BF16, 1, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "cudnn,flash,blocked", "base's encoder in bf16, cuDNN built: cudnn, flash, then blocked");
    n = tr_attn_candidates(&enc, TR_PREC_BF16, 0, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "flash,blocked", "without cuDNN: flash, then blocked");
    n = tr_attn_candidates(&enc, TR_PREC_FP32, 1, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "blocked", "fp32: the blocked reference alone (cuDNN and flash take 16-bit operands)");
    tr_attn_dims self32 = dims(64, 4, 4, 8, 32, 256);
    n = tr_attn_candidates(&self32, TR_PREC_FP32, 1, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "fused", "fp32 short calls: the rule's fused alone, unchecked (today's choice)");
    tr_attn_dims self = dims(64, 4, 4, 8, 32, 256);
    n = tr_attn_candidates(&self, TR_PREC_FP16, 1, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "cudnn,flash,fused,blocked", "the decoder's 4 x 4 self-attention: the rule's fused before blocked");
    tr_attn_dims t2i = dims(64, 4, 4096, 8, 16, 128);
    n = tr_attn_candidates(&t2i, TR_PREC_BF16, 0, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "flash,fused,blocked", "token to image (4 x 4096): short queries take the fused rule");
    tr_attn_dims wide = dims(2, 128, 128, 2, 96, 192);
    n = tr_attn_candidates(&wide, TR_PREC_BF16, 0, c);
    cands_text(c, n, buf, sizeof buf);
    tap_is_str(buf, "blocked", "heads of 96 dimensions: no flash");

    /* comparison */
    uint16_t ref[8], cand[8];
    for (int i = 0; i < 8; i++) ref[i] = cand[i] = tr_to_16((float)(i + 1) * 0.5f, TR_PREC_BF16);
    tr_attn_diff d;
    tr_attn_compare(&d, "out", TR_PREC_BF16, cand, ref, 8);
    tap_ok(tr_attn_diff_ok(&d) && d.err == 0.0 && d.n == 8, "the same bits pass with no error");
    cand[3] = 0xffff;
    tr_attn_compare(&d, "out", TR_PREC_BF16, cand, ref, 8);
    tap_ok(!tr_attn_diff_ok(&d) && d.unwritten == 1 && d.nan == 0, "an element left as the poison is unwritten");
    cand[3] = 0x7fc1; /* a NaN of another pattern */
    tr_attn_compare(&d, "out", TR_PREC_BF16, cand, ref, 8);
    tap_ok(!tr_attn_diff_ok(&d) && d.nan == 1 && d.unwritten == 0, "another NaN counts as not finite");
    cand[3] = ref[3];
    cand[5] = tr_to_16(3.0f * 1.2f, TR_PREC_BF16); /* 3.0 -> 3.6 of a largest 4.0 */
    tr_attn_compare(&d, "out", TR_PREC_BF16, cand, ref, 8);
    tap_ok(!tr_attn_diff_ok(&d) && d.at == 5 && fabs(d.err - 0.6 / 4.0) < 0.01 && d.got > 3.5 && d.want == 3.0,
           "an error of 15%% of the largest magnitude fails, named at its element (%g at %zu)", d.err, d.at);
    cand[5] = (uint16_t)(ref[5] + 1); /* one unit in the last place */
    tr_attn_compare(&d, "out", TR_PREC_BF16, cand, ref, 8);
    tap_ok(tr_attn_diff_ok(&d) && d.err > 0.0, "one bf16 rounding passes (%g <= %g)", d.err, d.tol);
    float fr[3] = {1.0f, 2.0f, 3.0f}, fc[3] = {1.0f, 2.0f, 3.0f};
    uint32_t poison = 0xffffffffu;
    memcpy(&fc[2], &poison, 4);
    tr_attn_compare(&d, "stats", TR_PREC_FP32, fc, fr, 3);
    tap_ok(d.unwritten == 1, "fp32 statistics: the poison's bits are unwritten");
    tap_ok(tr_attn_tolerance("stats", TR_PREC_BF16) < tr_attn_tolerance("out", TR_PREC_BF16) &&
           tr_attn_tolerance("dq", TR_PREC_BF16) > tr_attn_tolerance("out", TR_PREC_BF16) &&
           tr_attn_tolerance("out", TR_PREC_FP16) < tr_attn_tolerance("out", TR_PREC_BF16),
           "bounds: statistics tightest, gradients loosest, fp16 tighter than bf16");

    /* the driver: order, pinning, lines */
    tr_attn_key key = tr_attn_key_of(&enc, TR_PREC_BF16);
    int order[3] = {TR_CUDA_ATTN_CUDNN, TR_CUDA_ATTN_FLASH, TR_CUDA_ATTN_BLOCKED};
    fake f1 = {.lib = {"cudnnBackendFinalize: CUDNN_STATUS_NOT_SUPPORTED", NULL}, .err = {0, 0.01}, .fail_at = -1};
    n_lines = 0;
    tap_is_int(tr_attn_pick(&key, order, 3, fake_try, &f1, keep_line, NULL), TR_CUDA_ATTN_FLASH,
               "cuDNN's library error: flash, which passes, takes the shape");
    tap_is_int(n_lines, 1, "one line for the path refused");
    tap_ok(strstr(lines[0], "attention: cudnn refused for Tq=4096 Tk=4096 heads=12 dh=64 bf16: ") == lines[0] &&
           strstr(lines[0], "CUDNN_STATUS_NOT_SUPPORTED; flash for this shape"), "the line: %s", lines[0]);
    fake f2 = {.lib = {NULL, NULL}, .err = {0.3, 0.2}, .fail_at = -1};
    n_lines = 0;
    tap_is_int(tr_attn_pick(&key, order, 3, fake_try, &f2, keep_line, NULL), TR_CUDA_ATTN_BLOCKED,
               "both candidates off: the blocked reference");
    tap_ok(n_lines == 2 && f2.calls == 2, "two lines, and the reference is not tried");
    tap_ok(strstr(lines[0], "dq: error 0.3 > 0.05 of its largest magnitude (element 7: 0.5, blocked 0.25); flash") &&
           strstr(lines[1], "flash refused") && strstr(lines[1], "blocked for this shape"), "the numbers: %s", lines[1]);
    fake f3 = {.err = {0.001}, .fail_at = -1};
    n_lines = 0;
    tap_ok(tr_attn_pick(&key, order, 3, fake_try, &f3, keep_line, NULL) == TR_CUDA_ATTN_CUDNN && n_lines == 0 &&
           f3.calls == 1, "the first that passes takes the shape, silently");
    fake f4 = {.lib = {"x"}, .fail_at = 1};
    tap_is_int(tr_attn_pick(&key, order, 3, fake_try, &f4, keep_line, NULL), -1, "a fault of the device ends the check");

    /* the table */
    tr_attn_table t;
    memset(&t, 0, sizeof t);
    tr_attn_dims enc1 = enc;
    enc1.N = 1, enc1.sq = 12345;
    tap_ok(tr_attn_table_find(&t, &key) == -1, "an empty table: no choice (the rule)");
    tr_attn_table_set(&t, &key, TR_CUDA_ATTN_FLASH);
    tr_attn_key k1 = tr_attn_key_of(&enc1, TR_PREC_BF16), k2 = tr_attn_key_of(&enc, TR_PREC_FP16);
    tap_is_int(tr_attn_table_find(&t, &k1), TR_CUDA_ATTN_FLASH, "N and the batch strides are not part of the shape");
    tap_is_int(tr_attn_table_find(&t, &k2), -1, "the operands' type is");
    int full = 0;
    for (int i = 0; i < TR_ATTN_TABLE_MAX + 1; i++) {
        tr_attn_dims x = dims(1, 10 + i, 10, 1, 8, 8);
        tr_attn_key kx = tr_attn_key_of(&x, TR_PREC_BF16);
        full |= tr_attn_table_set(&t, &kx, TR_CUDA_ATTN_FUSED) < 0;
    }
    tap_ok(full && t.n == TR_ATTN_TABLE_MAX, "a full table refuses another shape");

    /* the names (--attention, SA1B_CUDA_ATTN) */
    const char *names[] = {"auto", "cudnn", "flash", "blocked", "fused"};
    int modes[] = {TR_CUDA_ATTN_AUTO, TR_CUDA_ATTN_CUDNN, TR_CUDA_ATTN_FLASH, TR_CUDA_ATTN_BLOCKED, TR_CUDA_ATTN_FUSED};
    int names_ok = 1;
    for (int i = 0; i < 5; i++)
        names_ok &= tr_backend_attention_parse(names[i]) == modes[i] &&
                    !strcmp(tr_backend_attention_name(modes[i]), names[i]) && !strcmp(tr_attn_path_name(modes[i]), names[i]);
    tap_ok(names_ok, "every path's name parses to its mode and back");
    tap_ok(tr_backend_attention_parse("Flash") < 0 && tr_backend_attention_parse("") < 0 &&
           tr_backend_attention_parse(NULL) < 0, "another name is none");
    setenv("SA1B_CUDA_ATTN", "blocked", 1);
    tr_backend_opts o;
    tr_backend_opts_init(&o, 1);
    tap_is_int(o.attention, TR_CUDA_ATTN_BLOCKED, "SA1B_CUDA_ATTN=blocked sets the backend's path");
    setenv("SA1B_CUDA_ATTN", "cudnn", 1);
    tr_backend_opts_init(&o, 1);
    tap_is_int(o.attention, TR_CUDA_ATTN_CUDNN, "SA1B_CUDA_ATTN=cudnn too");
    unsetenv("SA1B_CUDA_ATTN");

    /* the model's shapes */
    tr_config cfg;
    tr_config_preset("tiny", &cfg);
    char err[256];
    tr_backend *be = tr_backend_create("cpu", 1, err, sizeof err);
    tr_model m;
    if (!be || tr_model_init(&m, be, &cfg, 2, 3, 2, err, sizeof err) < 0) {
        tap_ok(0, "a tiny model on the CPU: %s", err);
    } else {
        tr_attn_dims s[8];
        int ns = tr_model_attn_shapes(&m, s, 8);
        int GG = (cfg.S / cfg.P) * (cfg.S / cfg.P), T = 2 + 2;
        tap_is_int(ns, 4, "four shapes");
        tap_ok(s[0].Tq == GG && s[0].Tk == GG && s[0].heads == cfg.H && s[0].dh == cfg.E / cfg.H &&
               s[0].ldq == 3 * cfg.E && s[0].ldo == cfg.E, "the encoder's: G*G tokens, q, k, v packed in rows of 3E");
        tap_ok(s[1].Tq == T && s[1].Tk == T && s[1].dh == cfg.C / cfg.h, "the decoder's self-attention: K + 2 tokens");
        tap_ok(s[2].Tq == T && s[2].Tk == GG && s[2].dh == cfg.C / 2 / cfg.h, "token to image: at half width");
        tap_ok(s[3].Tq == GG && s[3].Tk == T, "image to token");
        tap_ok(s[1].N == m.dec_chunk && s[0].N == m.enc_ni, "N: the most sequences of a call");
        tap_is_int(tr_backend_check_attention(be, s, ns, TR_PREC_FP32, keep_line, NULL, err, sizeof err), 0,
                   "the CPU backend checks nothing");
        tr_model_free(&m);
    }
    tr_backend_free(be);
    return tap_done();
}
