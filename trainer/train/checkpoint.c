/*
 * checkpoint.c - model checkpoints, training state and the debug dump as
 * safetensors files.
 */
#include "checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/quote.h"
#include "common/safetensors.h"

static void add_meta_config(tr_st_writer *w, const tr_config *c)
{
    char v[32];
    const char *k[8] = {"S", "P", "E", "L", "H", "C", "h", "D"};
    int x[8] = {c->S, c->P, c->E, c->L, c->H, c->C, c->h, c->D};
    for (int i = 0; i < 8; i++) {
        snprintf(v, sizeof v, "%d", x[i]);
        tr_st_writer_meta(w, k[i], v);
    }
}

static int add_params(tr_st_writer *w, const tr_model *m, const float *base, const char *prefix)
{
    char name[96];
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        int64_t sh[4];
        for (int d = 0; d < pi->ndim; d++) sh[d] = pi->shape[d];
        snprintf(name, sizeof name, "%s%s", prefix, pi->name);
        if (tr_st_writer_add(w, name, TR_ST_F32, pi->ndim, sh, base + pi->offset) < 0) return -1;
    }
    return 0;
}

int tr_ckpt_save_model(const tr_model *m, const char *path, char *err, size_t err_len)
{
    tr_st_writer *w = tr_st_writer_new();
    if (!w) return snprintf(err, err_len, "out of memory"), -1;
    tr_st_writer_meta(w, "format", TR_CKPT_FORMAT_MODEL);
    add_meta_config(w, &m->cfg);
    int64_t pe_shape[2] = {2, m->cfg.C / 2};
    void *own_p, *own_g; /* the host's view of the parameters (a download off the CPU) */
    const float *p = tr_host_view(m->be, m->param_mem, m->n_param_floats * sizeof(float), &own_p);
    const float *pe = tr_host_view(m->be, m->pe_gaussian, (size_t)m->cfg.C * sizeof(float), &own_g);
    int rc = p && pe ? add_params(w, m, p, "") : -1;
    if (!rc) rc = tr_st_writer_add(w, "prompt.pe_gaussian", TR_ST_F32, 2, pe_shape, pe);
    if (rc) snprintf(err, err_len, "cannot describe the checkpoint");
    if (!rc) rc = tr_st_writer_write(w, path, err, err_len);
    tr_st_writer_free(w);
    free(own_p), free(own_g);
    return rc;
}

static int meta_int(const tr_st_file *f, const char *k, int *out)
{
    const char *v = tr_st_meta(f, k);
    if (!v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == 0 || *end || x < 0 || x > 1000000) return -1;
    *out = (int)x;
    return 0;
}

static int file_config(const tr_st_file *f, tr_config *c, char *err, size_t err_len)
{
    const char *k[8] = {"S", "P", "E", "L", "H", "C", "h", "D"};
    int *x[8] = {&c->S, &c->P, &c->E, &c->L, &c->H, &c->C, &c->h, &c->D};
    for (int i = 0; i < 8; i++)
        if (meta_int(f, k[i], x[i]) < 0)
            return snprintf(err, err_len, "__metadata__ '%s' missing or not an integer", k[i]), -1;
    return tr_config_check(c, err, err_len);
}

/* A model checkpoint: format TR_CKPT_FORMAT_MODEL, or no format (written
 * before the tag) and none of the debug dump's outputs.  A step dump holds
 * every parameter too, but its weights are not a training run's: refused. */
static int model_kind(const tr_st_file *f, char *err, size_t err_len)
{
    const char *fmt = tr_st_meta(f, "format");
    char q[4 * 64 + 1];
    if (fmt && !strcmp(fmt, TR_CKPT_FORMAT_MODEL)) return 0;
    if ((fmt && !strcmp(fmt, TR_CKPT_FORMAT_DUMP)) || (!fmt && tr_st_find(f, "out.logits")))
        return snprintf(err, err_len, "a --dump-step debug dump, not a model checkpoint"), -1;
    if (fmt && !strncmp(fmt, "sa1b-train-state-", 17))
        return snprintf(err, err_len, "a training state file, not a model checkpoint"), -1;
    if (fmt && !strncmp(fmt, "sa1b-train-model-", 17)) /* (a later version's) */
        return snprintf(err, err_len, "format '%s': a model checkpoint of another version of sa1b-train (this one "
                        "reads %s)", tr_quote(fmt, 64, q, sizeof q), TR_CKPT_FORMAT_MODEL), -1;
    if (fmt) return snprintf(err, err_len, "format '%s' is not a model checkpoint", tr_quote(fmt, 64, q, sizeof q)), -1;
    return 0;
}

int tr_ckpt_read_config(const char *path, tr_config *cfg, char *err, size_t err_len)
{
    tr_st_file f;
    if (tr_st_load(&f, path, err, err_len) < 0) return -1;
    char e2[400];
    int rc = model_kind(&f, e2, sizeof e2);
    if (!rc) rc = file_config(&f, cfg, e2, sizeof e2);
    if (rc) snprintf(err, err_len, "'%s': %s", path, e2);
    tr_st_close(&f);
    return rc;
}

/* copy an F32 tensor of exactly count elements */
static int get_f32(const tr_st_file *f, const char *name, float *dst, size_t count, char *err, size_t err_len)
{
    const tr_st_tensor *t = tr_st_find(f, name);
    if (!t) return snprintf(err, err_len, "tensor '%s' missing", name), -1;
    if (t->dtype != TR_ST_F32 || t->count != count)
        return snprintf(err, err_len, "tensor '%s': %s with %llu elements, want F32 with %zu", name,
                        tr_st_dtype_name(t->dtype), (unsigned long long)t->count, count), -1;
    memcpy(dst, t->data, count * sizeof(float));
    for (size_t i = 0; i < count; i++) /* (a damaged file; training never stores one: such steps are skipped) */
        if (!isfinite(dst[i]))
            return snprintf(err, err_len, "tensor '%s': element %zu is %s, not a weight", name, i,
                            isnan(dst[i]) ? "NaN" : "infinite"), -1;
    return 0;
}

int tr_ckpt_load_model(tr_model *m, const char *path, char *err, size_t err_len)
{
    tr_st_file f;
    if (tr_st_load(&f, path, err, err_len) < 0) return -1;
    char e2[400];
    tr_config c;
    int rc = model_kind(&f, e2, sizeof e2);
    if (!rc) rc = file_config(&f, &c, e2, sizeof e2);
    if (!rc && memcmp(&c, &m->cfg, sizeof c) != 0) { /* which, as the options that give them */
        static const char *const flag[8] = {"--image-size", "--patch", "--enc-width", "--enc-depth",
                                            "--enc-heads", "--dec-width", "--dec-heads", "--dec-depth"};
        const int have[8] = {c.S, c.P, c.E, c.L, c.H, c.C, c.h, c.D},
                  want[8] = {m->cfg.S, m->cfg.P, m->cfg.E, m->cfg.L, m->cfg.H, m->cfg.C, m->cfg.h, m->cfg.D};
        int n = snprintf(e2, sizeof e2, "model configuration differs from the one asked for: the checkpoint has");
        for (int i = 0, k = 0; i < 8 && n > 0 && (size_t)n < sizeof e2; i++)
            if (have[i] != want[i])
                n += snprintf(e2 + n, sizeof e2 - (size_t)n, "%s %s %d (asked: %d)", k++ ? "," : "", flag[i], have[i],
                              want[i]);
        rc = -1;
    }
    void *own_p, *own_g; /* read on the host, then uploaded (off the CPU) */
    size_t np = m->n_param_floats * sizeof(float), ng = (size_t)m->cfg.C * sizeof(float);
    float *p = tr_host_stage(m->be, m->param_mem, np, &own_p), *pe = tr_host_stage(m->be, m->pe_gaussian, ng, &own_g);
    if (!rc && (!p || !pe)) rc = -1, snprintf(e2, sizeof e2, "out of memory");
    for (int i = 0; i < m->n_params && !rc; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        rc = get_f32(&f, pi->name, p + pi->offset, pi->count, e2, sizeof e2);
    }
    if (!rc) rc = get_f32(&f, "prompt.pe_gaussian", pe, (size_t)m->cfg.C, e2, sizeof e2);
    if (!rc) {
        tr_host_commit(m->be, m->param_mem, own_p, np);
        tr_host_commit(m->be, m->pe_gaussian, own_g, ng);
    } else {
        free(own_p), free(own_g);
    }
    if (rc) snprintf(err, err_len, "'%s': %s", path, e2);
    tr_st_close(&f);
    return rc;
}

/* "key=value\n" lines (values already percent-encoded) as run.<key> entries */
static int add_meta_run(tr_st_writer *w, const char *run)
{
    char key[300], val[4100];
    for (const char *line = run; line && *line;) {
        const char *eq = strchr(line, '='), *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (!eq || eq > end || (size_t)(eq - line) > 250 || (size_t)(end - eq) > sizeof val) return -1;
        snprintf(key, sizeof key, "run.%.*s", (int)(eq - line), line);
        snprintf(val, sizeof val, "%.*s", (int)(end - eq - 1), eq + 1);
        if (tr_st_writer_meta(w, key, val) < 0) return -1;
        line = *end ? end + 1 : end;
    }
    return 0;
}

/* 1 when k (after "run.") and v are what tr_run_rec_add writes: a key of
 * [a-z0-9_], a value of printable ASCII but '"' and '\\' with every '%'
 * the start of two upper-case hex digits (tr_run_rec_add's encoding of a
 * byte it escapes).  Nothing else is a record's line: a newline or an '='
 * in a key would make a line of its own (a key that sets an option). */
static int run_entry_ok(const char *k, const char *v)
{
    size_t n = strlen(k);
    if (n == 0 || n > 250) return 0;
    for (const char *c = k; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    if (strlen(v) > 4096) return 0;
    for (const char *c = v; *c; c++) {
        if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\') return 0;
        if (*c == '%') {
            for (int i = 1; i <= 2; i++)
                if (!((c[i] >= '0' && c[i] <= '9') || (c[i] >= 'A' && c[i] <= 'F'))) return 0;
        }
    }
    return 1;
}

/* The record of a file parsed (err without its path). */
static int run_of(const tr_st_file *f, char **run, char *err, size_t err_len)
{
    size_t len = 0;
    *run = NULL;
    for (int i = 0; i < f->n_meta; i++) {
        if (strncmp(f->meta_key[i], "run.", 4) != 0) continue;
        if (!run_entry_ok(f->meta_key[i] + 4, f->meta_val[i])) {
            char q[4 * 64 + 1];
            snprintf(err, err_len, "its run record's entry '%s' is not one sa1b-train writes (a damaged or crafted "
                     "state file)", tr_quote(f->meta_key[i], 64, q, sizeof q));
            free(*run), *run = NULL;
            return -1;
        }
        size_t n = strlen(f->meta_key[i]) - 4 + strlen(f->meta_val[i]) + 2;
        char *r = realloc(*run, len + n + 1);
        if (!r) {
            snprintf(err, err_len, "out of memory");
            free(*run), *run = NULL;
            return -1;
        }
        *run = r;
        len += (size_t)sprintf(r + len, "%s=%s\n", f->meta_key[i] + 4, f->meta_val[i]);
    }
    return 0;
}

int tr_ckpt_read_run(const char *path, char **run, char *err, size_t err_len)
{
    tr_st_file f;
    *run = NULL;
    if (tr_st_load(&f, path, err, err_len) < 0) return -1;
    char e2[400];
    int rc = run_of(&f, run, e2, sizeof e2);
    if (rc) snprintf(err, err_len, "'%s': %s", path, e2);
    tr_st_close(&f);
    return rc;
}

int tr_ckpt_save_state(const tr_model *m, const tr_optim *o, const tr_train_state *s, const char *path, char *err,
                       size_t err_len)
{
    tr_st_writer *w = tr_st_writer_new();
    if (!w) return snprintf(err, err_len, "out of memory"), -1;
    char v[128];
    tr_st_writer_meta(w, "format", TR_CKPT_FORMAT_STATE);
    snprintf(v, sizeof v, "%ld", s->step);
    tr_st_writer_meta(w, "step", v);
    snprintf(v, sizeof v, "%ld", o->t);
    tr_st_writer_meta(w, "adam_t", v);
    snprintf(v, sizeof v, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, s->rng.s[0], s->rng.s[1],
             s->rng.s[2], s->rng.s[3]);
    tr_st_writer_meta(w, "rng", v);
    snprintf(v, sizeof v, "%" PRIu64, s->data_epoch);
    tr_st_writer_meta(w, "data_epoch", v);
    snprintf(v, sizeof v, "%" PRIu64, s->data_consumed);
    tr_st_writer_meta(w, "data_consumed", v);
    if (s->data_id[0]) tr_st_writer_meta(w, "data_id", s->data_id);
    if (s->loss_scale > 0) {
        snprintf(v, sizeof v, "%.17g", s->loss_scale);
        tr_st_writer_meta(w, "loss_scale", v);
        snprintf(v, sizeof v, "%ld", s->scale_good);
        tr_st_writer_meta(w, "scale_good", v);
    }
    add_meta_config(w, &m->cfg);
    int rc = add_meta_run(w, s->run);
    tr_optim_host h; /* the host's view of the moments (a download off the CPU) */
    int hv = tr_optim_host_view(o, m->be, &h);
    if (!rc) rc = hv < 0 ? -1 : tr_optim_save_tensors(o, &h, m, w); /* adam.m./adam.v. (and adam8.* for AdamW8bit) */
    if (rc) snprintf(err, err_len, "cannot describe the state");
    if (!rc) rc = tr_st_writer_write(w, path, err, err_len);
    tr_st_writer_free(w);
    if (hv == 0) tr_optim_host_free(&h);
    return rc;
}

static int meta_u64(const tr_st_file *f, const char *k, uint64_t *out)
{
    const char *v = tr_st_meta(f, k);
    if (!v || !*v) return -1;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || *v == '-') return -1;
    *out = x;
    return 0;
}

int tr_ckpt_load_state(const tr_model *m, tr_optim *o, tr_train_state *s, const char *path, char *err,
                       size_t err_len)
{
    tr_st_file f;
    if (tr_st_load(&f, path, err, err_len) < 0) return -1;
    char e2[400] = "", q[4 * 64 + 1];
    int rc = 0;
    tr_config c;
    const char *fmt = tr_st_meta(&f, "format"), *rng = tr_st_meta(&f, "rng");
    uint64_t step, t;
    if (fmt && strcmp(fmt, TR_CKPT_FORMAT_STATE) != 0 && !strncmp(fmt, "sa1b-train-state-", 17)) /* (a later version's) */
        rc = -1, snprintf(e2, sizeof e2, "format '%s': a state file of another version of sa1b-train (this one "
                          "reads %s)", tr_quote(fmt, 64, q, sizeof q), TR_CKPT_FORMAT_STATE);
    else if (!fmt || strcmp(fmt, TR_CKPT_FORMAT_STATE) != 0)
        rc = -1, snprintf(e2, sizeof e2, "not a sa1b-train state file");
    else if (file_config(&f, &c, e2, sizeof e2) < 0)
        rc = -1;
    else if (memcmp(&c, &m->cfg, sizeof c) != 0)
        rc = -1, snprintf(e2, sizeof e2, "model configuration differs");
    else if (meta_u64(&f, "step", &step) || meta_u64(&f, "adam_t", &t) ||
             meta_u64(&f, "data_epoch", &s->data_epoch) || meta_u64(&f, "data_consumed", &s->data_consumed) ||
             !rng || strlen(rng) != 64 || step > (1ull << 40) || t > (1ull << 40))
        rc = -1, snprintf(e2, sizeof e2, "bad or missing step, adam_t, rng or data position");
    if (!rc) {
        for (int i = 0; i < 4; i++) {
            char word[17];
            memcpy(word, rng + 16 * i, 16);
            word[16] = 0;
            char *end;
            s->rng.s[i] = strtoull(word, &end, 16);
            if (*end) rc = -1, snprintf(e2, sizeof e2, "bad rng state");
        }
        s->step = (long)step;
        o->t = (long)t;
        const char *id = tr_st_meta(&f, "data_id"); /* absent: a state written before it, or synthetic data */
        if (id && strlen(id) >= sizeof s->data_id) rc = -1, snprintf(e2, sizeof e2, "bad data_id");
        snprintf(s->data_id, sizeof s->data_id, "%s", id && !rc ? id : "");
        const char *ls = tr_st_meta(&f, "loss_scale");
        uint64_t good = 0;
        if (ls) {
            char *end;
            double x = strtod(ls, &end);
            if (*end || !(x >= 1.0 && x <= 1e38) || meta_u64(&f, "scale_good", &good) || good > (1ull << 40))
                rc = -1, snprintf(e2, sizeof e2, "bad loss_scale or scale_good");
            s->loss_scale = x, s->scale_good = (long)good;
        }
    }
    tr_optim_host h; /* read on the host, then uploaded (off the CPU) */
    if (!rc && tr_optim_host_stage(o, m->be, &h) < 0) rc = -1, snprintf(e2, sizeof e2, "out of memory");
    else if (!rc) {
        rc = tr_optim_load_tensors(o, &h, m, &f, e2, sizeof e2);
        if (!rc) tr_optim_host_commit(o, m->be, &h);
        tr_optim_host_free(&h);
    }
    if (rc) snprintf(err, err_len, "'%s': %s", path, e2);
    tr_st_close(&f);
    return rc;
}

int tr_dump_step(const tr_model *m, const tr_batch *b, const tr_loss *loss, const char *path, char *err,
                 size_t err_len)
{
    const tr_config *c = &m->cfg;
    int B = m->B, M = m->M, K = m->K, S = c->S, R = m->geom.R;
    tr_backend *be = m->be;
    if (m->grad_lo != 0) return snprintf(err, err_len, "the debug dump needs every parameter's gradient (nothing frozen)"), -1;
    /* the normalised image in backend memory, the outputs in host memory */
    size_t nimg = (size_t)B * 3 * S * S * sizeof(float);
    float *dimg = tr_mem_alloc(&be->mem, TR_MEM_WORK, nimg);
    float *logits = malloc((size_t)B * M * R * R * sizeof(float)), *hiou = malloc((size_t)B * M * sizeof(float));
    tr_st_writer *w = tr_st_writer_new();
    if (!dimg || !logits || !hiou || !w) {
        tr_mem_free(&be->mem, dimg);
        free(logits), free(hiou);
        tr_st_writer_free(w);
        return snprintf(err, err_len, "out of memory"), -1;
    }
    tr_model_get_logits(m, logits);
    tr_model_get_iou(m, hiou);
    /* from the batch in backend memory: the step's upload of b (m->dev) off
     * the host, never a host pointer handed to an op */
    const tr_batch *db = m->dev ? m->dev : b;
    be->ops->image_normalize(be, tr_f32(dimg), db->image, db->content, B, S);
    float sc[4] = {(float)loss->loss, (float)loss->focal, (float)loss->dice, (float)loss->iou_mse};
    tr_st_writer_meta(w, "format", TR_CKPT_FORMAT_DUMP);
    add_meta_config(w, c);
    void *own[4]; /* the host's views of the parameters, PE, image and gradients (downloads off the CPU) */
    const float *hp = tr_host_view(be, m->param_mem, m->n_param_floats * sizeof(float), &own[0]);
    const float *hpe = tr_host_view(be, m->pe_gaussian, (size_t)c->C * sizeof(float), &own[1]);
    const float *img = tr_host_view(be, dimg, nimg, &own[2]);
    const float *hg = tr_host_view(be, m->grad_mem, m->n_grad_floats * sizeof(float), &own[3]);
    int rc = hp && hpe && img && hg ? add_params(w, m, hp, "") : -1;
    int64_t pe[2] = {2, c->C / 2}, si[4] = {B, 3, S, S}, sp[4] = {B, M, K, 2}, sl[3] = {B, M, K},
            sm[4] = {B, M, R, R}, sv[2] = {B, M};
    rc |= tr_st_writer_add(w, "prompt.pe_gaussian", TR_ST_F32, 2, pe, hpe);
    rc |= tr_st_writer_add(w, "in.image", TR_ST_F32, 4, si, img);
    rc |= tr_st_writer_add(w, "in.points", TR_ST_F32, 4, sp, b->points);
    rc |= tr_st_writer_add(w, "in.labels", TR_ST_I32, 3, sl, b->labels);
    rc |= tr_st_writer_add(w, "in.masks", TR_ST_U8, 4, sm, b->masks);
    rc |= tr_st_writer_add(w, "in.valid", TR_ST_U8, 2, sv, b->valid);
    rc |= tr_st_writer_add(w, "out.logits", TR_ST_F32, 4, sm, logits);
    rc |= tr_st_writer_add(w, "out.iou", TR_ST_F32, 2, sv, hiou);
    rc |= tr_st_writer_add(w, "out.loss", TR_ST_F32, 0, NULL, &sc[0]);
    rc |= tr_st_writer_add(w, "out.focal", TR_ST_F32, 0, NULL, &sc[1]);
    rc |= tr_st_writer_add(w, "out.dice", TR_ST_F32, 0, NULL, &sc[2]);
    rc |= tr_st_writer_add(w, "out.iou_mse", TR_ST_F32, 0, NULL, &sc[3]);
    rc |= add_params(w, m, hg, "grad."); /* (a dump freezes nothing: grad_lo is 0) */
    if (rc)
        snprintf(err, err_len, "cannot describe the dump");
    else
        rc = tr_st_writer_write(w, path, err, err_len);
    tr_st_writer_free(w);
    for (int i = 0; i < 4; i++) free(own[i]);
    tr_mem_free(&be->mem, dimg);
    free(logits), free(hiou);
    return rc ? -1 : 0;
}
