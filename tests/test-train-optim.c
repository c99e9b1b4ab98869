/*
 * test-train-optim.c - the optimizer and the files of sa1b-train: the
 * warmup + cosine schedule, one AdamW step against the closed form (decay on
 * matrices only), clipping by the global norm, safetensors round trips, and
 * model/state checkpoints that restore exactly and refuse a different
 * configuration.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "train/checkpoint.h"
#include "model/model.h"
#include "train/optim.h"
#include "common/safetensors.h"
#include "tap.h"
#include "registry/registry.h"

static char tmpdir[256];

static void test_schedule(void)
{
    tr_optim_config c;
    tr_optim_defaults(&c, 1e-3, 1000);
    tap_is_int(c.warmup, 100, "default warmup min(100, steps/10)");
    tap_is_close(tr_optim_lr(&c, 0), 1e-5, 1e-12, "warmup starts at lr/warmup");
    tap_is_close(tr_optim_lr(&c, 99), 1e-3, 1e-12, "warmup reaches lr");
    tap_is_close(tr_optim_lr(&c, 550), 1e-4 + 0.5 * 9e-4, 1e-9, "cosine halfway is the mean of lr and min_lr");
    tap_is_close(tr_optim_lr(&c, 1000), 1e-4, 1e-12, "cosine ends at lr * min_lr_ratio");
}

static void test_adamw(tr_backend *be)
{
    tr_config cfg = {.S = 32, .P = 16, .E = 8, .L = 1, .H = 2, .C = 16, .h = 2, .D = 1};
    tr_model m;
    char err[256] = "";
    if (tr_model_init(&m, be, &cfg, 1, 1, 1, err, sizeof err) < 0) {
        tap_ok(0, "model: %s", err);
        return;
    }
    tr_model_init_params(&m, 3);
    float *w0 = malloc(m.n_param_floats * sizeof(float));
    memcpy(w0, m.param_mem, m.n_param_floats * sizeof(float));
    for (size_t i = 0; i < m.n_param_floats; i++) m.grad_mem[i] = 1e-3f * (float)((int)(i % 7) - 3);
    tr_optim_config c;
    tr_optim_defaults(&c, 1e-2, 10);
    c.warmup = 0, c.clip = 0;
    tr_optim o;
    tr_optim_init(&o, &m, &c);
    double lr_used;
    tr_optim_step(&o, &m, &lr_used);
    /* first step: mhat = g, vhat = g^2: w -= lr (g/(|g| + eps) + wd w) */
    int bad = 0;
    for (int i = 0; i < m.n_params; i++) {
        const tr_param_info *pi = &m.pinfo[i];
        for (size_t j = 0; j < pi->count; j++) {
            size_t k = pi->offset + j;
            double g = m.grad_mem[k], w = w0[k];
            double want = w - lr_used * (g / (fabs(g) + 1e-8) + (pi->decay ? 0.1 : 0.0) * w);
            if (fabs(m.param_mem[k] - want) > 1e-6 * (1 + fabs(want))) bad++;
        }
    }
    tap_ok(bad == 0, "AdamW first step matches the closed form, decay on matrices only (%d mismatches)", bad);
    int di = tr_model_find_param(&m, "enc.blocks.0.attn.qkv.w"), ni = tr_model_find_param(&m, "enc.blocks.0.ln1.w"),
        bi = tr_model_find_param(&m, "enc.blocks.0.attn.qkv.b"), pi = tr_model_find_param(&m, "enc.pos");
    tap_ok(di >= 0 && m.pinfo[di].decay && !m.pinfo[ni].decay && !m.pinfo[bi].decay && !m.pinfo[pi].decay,
           "decay flags: Linear weights yes; norms, biases, positions no");
    /* clipping: the global norm is returned and the gradient scaled to clip */
    c.clip = 1e-3;
    o.cfg = c;
    double norm = tr_optim_step(&o, &m, NULL);
    double after = sqrt(be->ops->sumsq(be, m.grad_mem, m.n_param_floats));
    tap_ok(norm > 1e-3 && fabs(after - 1e-3) < 1e-7, "clipping: norm %.4g clipped to %.4g", norm, after);

    /* checkpoints round trip */
    char mp[512], sp[512];
    snprintf(mp, sizeof mp, "%s/model.safetensors", tmpdir);
    snprintf(sp, sizeof sp, "%s/state.bin", tmpdir);
    tr_train_state st = {.step = 2, .data_epoch = 3, .data_consumed = 40};
    tr_rng_seed(&st.rng, 99);
    tap_ok(tr_ckpt_save_model(&m, mp, err, sizeof err) == 0, "model checkpoint written");
    tap_ok(tr_ckpt_save_state(&m, &o, &st, sp, err, sizeof err) == 0, "state written");
    tr_model m2;
    tr_model_init(&m2, be, &cfg, 1, 1, 1, err, sizeof err);
    tr_model_init_params(&m2, 4);
    tr_optim o2;
    tr_optim_init(&o2, &m2, &c);
    tr_train_state st2 = {0};
    tap_ok(tr_ckpt_load_model(&m2, mp, err, sizeof err) == 0, "model checkpoint read (%s)", err);
    tap_ok(memcmp(m.param_mem, m2.param_mem, m.n_param_floats * sizeof(float)) == 0 &&
               memcmp(m.pe_gaussian, m2.pe_gaussian, (size_t)cfg.C * sizeof(float)) == 0,
           "parameters and the PE buffer restored exactly");
    tap_ok(tr_ckpt_load_state(&m2, &o2, &st2, sp, err, sizeof err) == 0, "state read (%s)", err);
    tap_ok(st2.step == 2 && st2.data_epoch == 3 && st2.data_consumed == 40 && o2.t == o.t &&
               memcmp(&st2.rng, &st.rng, sizeof st.rng) == 0 &&
               memcmp(o.m, o2.m, m.n_param_floats * sizeof(float)) == 0 &&
               memcmp(o.v, o2.v, m.n_param_floats * sizeof(float)) == 0,
           "step, data position, RNG and moments restored exactly");
    tr_config other = cfg;
    other.C = 24;
    tr_model m3;
    tr_model_init(&m3, be, &other, 1, 1, 1, err, sizeof err);
    tap_ok(tr_ckpt_load_model(&m3, mp, err, sizeof err) < 0 && strstr(err, "configuration"),
           "a checkpoint of another configuration is refused (%s)", err);
    tr_config rc;
    tap_ok(tr_ckpt_read_config(mp, &rc, err, sizeof err) == 0 && memcmp(&rc, &cfg, sizeof rc) == 0,
           "the configuration is read back from the metadata");
    tr_model_free(&m3);
    tr_optim_free(&o2, &m2);
    tr_model_free(&m2);
    tr_optim_free(&o, &m);
    tr_model_free(&m);
    free(w0);
    unlink(mp);
    unlink(sp);
}

static void test_safetensors(void)
{
    char path[512], err[256] = "";
    snprintf(path, sizeof path, "%s/t.safetensors", tmpdir);
    float a[6] = {1, 2, 3, 4, 5, 6};
    int32_t b[2] = {-1, 7};
    uint8_t c[3] = {0, 1, 255};
    float s = 0.5f;
    int64_t sa[2] = {2, 3}, sb[1] = {2}, sc[1] = {3};
    tr_st_writer *w = tr_st_writer_new();
    tap_ok(tr_st_writer_add(w, "x.a", TR_ST_F32, 2, sa, a) == 0 && tr_st_writer_add(w, "x.b", TR_ST_I32, 1, sb, b) == 0 &&
               tr_st_writer_add(w, "x.c", TR_ST_U8, 1, sc, c) == 0 && tr_st_writer_add(w, "s", TR_ST_F32, 0, NULL, &s) == 0 &&
               tr_st_writer_meta(w, "S", "128") == 0,
           "writer accepts tensors and metadata");
    tap_ok(tr_st_writer_add(w, "bad\"name", TR_ST_F32, 0, NULL, &s) < 0, "writer refuses a name needing escapes");
    tap_ok(tr_st_writer_write(w, path, err, sizeof err) == 0, "written");
    tr_st_writer_free(w);
    tr_st_file f;
    tap_ok(tr_st_load(&f, path, err, sizeof err) == 0, "read back (%s)", err);
    const tr_st_tensor *ta = tr_st_find(&f, "x.a"), *tb = tr_st_find(&f, "x.b"), *tc = tr_st_find(&f, "x.c"),
                       *ts = tr_st_find(&f, "s");
    tap_ok(ta && ta->ndim == 2 && ta->shape[0] == 2 && ta->shape[1] == 3 && !memcmp(ta->data, a, sizeof a),
           "F32 [2, 3] round trip");
    tap_ok(tb && tb->dtype == TR_ST_I32 && !memcmp(tb->data, b, sizeof b), "I32 round trip");
    tap_ok(tc && tc->dtype == TR_ST_U8 && !memcmp(tc->data, c, sizeof c), "U8 round trip");
    tap_ok(ts && ts->ndim == 0 && ts->count == 1, "scalar of shape []");
    tap_is_str(tr_st_meta(&f, "S"), "128", "metadata round trip");
    tr_st_close(&f);
    FILE *fp = fopen(path, "rb");
    unsigned char hdr[8];
    size_t got = fp ? fread(hdr, 1, 8, fp) : 0;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)hdr[i] << (8 * i);
    if (fp) fclose(fp);
    tap_ok(got == 8 && (8 + hl) % 8 == 0, "data block starts 8-byte aligned");
    unlink(path);
    tap_ok(tr_st_load(&f, path, err, sizeof err) < 0 && strstr(err, "t.safetensors"), "missing file: error names it");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/test-train-optim.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) tap_skip_all("cannot make a temporary directory");
    char err[256] = "";
    tr_backend *be = tr_backend_create("cpu", 2, err, sizeof err);
    if (!be) tap_skip_all(err);
    test_schedule();
    test_adamw(be);
    test_safetensors();
    tap_ok(be->mem.total == 0, "every tensor given back (%llu bytes left)", (unsigned long long)be->mem.total);
    tr_backend_free(be);
    rmdir(tmpdir);
    return tap_done();
}
