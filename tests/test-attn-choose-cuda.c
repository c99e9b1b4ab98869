/*
 * test-attn-choose-cuda.c - auto's start-up check of the CUDA attention
 * (backend_cuda_attn_check.cu) on a device: for the shapes of tiny, small
 * and base in bf16 and fp16 it returns without an error, chooses a path
 * for every shape (one of its candidates, in their order), says in one
 * line each path it refused, and chooses the same again on a second
 * backend (the choice depends on the build, the library and the device);
 * fp32 keeps the rule unchecked; a forced path checks nothing.  Skips
 * without a device (scripts/gpu-check verify counts a skip as a failure).
 */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/backend_cuda.h"
#include "backend/cuda/backend_cuda_pick.h"
#include "backend/meta/backend_meta.h"
#include "model/model.h"
#include "registry/registry.h"
#include "tap.h"

static int n_lines;
static void show(void *ctx, const char *line)
{
    (void)ctx;
    n_lines++;
    tap_diag("%s", line);
}

/* the model's shapes of cfg as the CUDA traits cut them */
static int shapes_of(const char *name, int B, int M, tr_attn_dims *s)
{
    tr_config cfg;
    tr_model m;
    char err[256];
    tr_config_preset(name, &cfg);
    tr_backend *meta = tr_backend_meta_create(&tr_cuda_sizes, &tr_cuda_traits);
    if (!meta || tr_model_init(&m, meta, &cfg, B, M, 2, err, sizeof err) < 0) return 0;
    int n = tr_model_attn_shapes(&m, s, 4);
    tr_model_free(&m);
    tr_backend_free(meta);
    return n;
}

int main(void)
{
    char err[400];
    tr_backend_opts o;
    tr_backend_opts_init(&o, 1);
    o.attention = TR_CUDA_ATTN_AUTO;
    tr_backend *a = tr_backend_create_with("cuda", &o, err, sizeof err);
    if (!a) tap_skip_all(err);
    tr_backend *b = tr_backend_create_with("cuda", &o, err, sizeof err);
    tap_ok(b != NULL, "a second CUDA backend: %s", b ? "made" : err);
    static const char *const cfgs[] = {"tiny", "small", "base"};
    static const int BM[3][2] = {{2, 3}, {16, 16}, {4, 16}};
    static const int dts[2] = {TR_PREC_BF16, TR_PREC_FP16};
    for (int ci = 0; ci < 3 && b; ci++)
        for (int ti = 0; ti < 2; ti++) {
            tr_attn_dims s[4];
            int n = shapes_of(cfgs[ci], BM[ci][0], BM[ci][1], s), dt = dts[ti];
            tap_is_int(n, 4, "%s: four shapes", cfgs[ci]);
            n_lines = 0;
            int ra = tr_cuda_attn_choose(a, s, n, dt, show, NULL, err, sizeof err);
            tap_ok(ra == 0, "%s %s: the check ran (%s)", cfgs[ci], tr_prec_name(dt), ra ? err : "no error");
            int lines = n_lines;
            int rb = tr_cuda_attn_choose(b, s, n, dt, NULL, NULL, err, sizeof err);
            int same = ra == 0 && rb == 0, valid = 1;
            for (int i = 0; i < n; i++) {
                int pa = tr_cuda_attn_chosen(a, &s[i], dt), pb = tr_cuda_attn_chosen(b, &s[i], dt), c[4];
                int nc = tr_attn_candidates(&s[i], dt, 1, c), found = 0;
                for (int j = 0; j < nc; j++) found |= c[j] == pa;
                valid &= found;
                same &= pa == pb;
                tap_diag("%s %s shape %d (Tq=%d Tk=%d dh=%d): %s", cfgs[ci], tr_prec_name(dt), i, s[i].Tq, s[i].Tk,
                         s[i].dh, tr_attn_path_name(pa));
            }
            tap_ok(valid, "%s %s: every shape has one of its candidates (%d refused)", cfgs[ci], tr_prec_name(dt), lines);
            tap_ok(same, "%s %s: a second backend chooses the same", cfgs[ci], tr_prec_name(dt));
            tap_ok(!tr_backend_error(a, err, sizeof err), "%s %s: no error left on the backend", cfgs[ci], tr_prec_name(dt));
        }
    tr_attn_dims s[4];
    int n = shapes_of("small", 2, 2, s);
    tap_ok(tr_cuda_attn_choose(a, s, n, TR_PREC_FP32, NULL, NULL, err, sizeof err) == 0 &&
           tr_cuda_attn_chosen(a, &s[0], TR_PREC_FP32) == TR_CUDA_ATTN_BLOCKED &&
           tr_cuda_attn_chosen(a, &s[1], TR_PREC_FP32) == TR_CUDA_ATTN_FUSED, "fp32: the rule (blocked, fused)");
    o.attention = TR_CUDA_ATTN_FLASH;
    tr_backend *f = tr_backend_create_with("cuda", &o, err, sizeof err);
    tap_ok(f && tr_cuda_attn_choose(f, s, n, TR_PREC_BF16, NULL, NULL, err, sizeof err) == 0 &&
           tr_cuda_attn_chosen(f, &s[0], TR_PREC_BF16) == -1, "a forced path checks nothing");
    tr_backend_free(f);
    tr_backend_free(b);
    tr_backend_free(a);
    return tap_done();
}
