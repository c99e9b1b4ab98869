/*
 * fuzz-checkpoint.c - the metadata of sa1b-train's state and model files as
 * --resume reads them, on arbitrary bytes written to a file: the run
 * record (tr_ckpt_read_run), the model configuration (tr_ckpt_read_config),
 * the training state (tr_ckpt_load_state into a model of the configuration
 * of the corpus's state files: S=64, P=16, E=64, L=1, H=2, C=64, h=2, D=1)
 * and the header-only reader (tr_st_peek_meta).  Whatever the bytes:
 * every message is one line; the header-only reader finds a key exactly
 * where tr_st_parse accepts the file and has it, with the same value (one
 * reader); a record read back has one "key=value" line per run.<key>
 * entry, a key of [a-z0-9_], and each value decoded (tr_run_rec_get) and
 * stored again (tr_run_rec_add) is one line that reads back the same: no
 * value can add a line of its own.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "common/safetensors.h"
#include "model/model.h"
#include "registry/registry.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "train/run_dir.h"
#include "fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void peek_agrees(const char *path, const tr_st_file *f, int parsed, const char *key)
{
    static char val[8192];
    const char *want = parsed ? tr_st_meta(f, key) : NULL;
    int found = tr_st_peek_meta(path, key, val, sizeof val);
    if (found != (want != NULL)) abort();
    if (found && strlen(want) < sizeof val && strcmp(val, want) != 0) abort();
}

static void record_reads_back(const char *rec, const tr_st_file *f)
{
    static char buf[8192];
    int lines = 0, entries = 0;
    for (int i = 0; i < f->n_meta; i++) entries += strncmp(f->meta_key[i], "run.", 4) == 0;
    for (const char *line = rec; *line; lines++) {
        const char *end = strchr(line, '\n'), *eq = strchr(line, '=');
        if (!end || !eq || eq > end || eq == line) abort();
        for (const char *c = line; c < eq; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) abort();
        char key[256];
        if ((size_t)(eq - line) >= sizeof key) abort();
        memcpy(key, line, (size_t)(eq - line));
        key[eq - line] = 0;
        if (tr_run_rec_get(rec, key, buf, sizeof buf)) {
            /* its value stored again is one line, which reads back the same */
            char *again = NULL;
            static char back[sizeof buf];
            if (tr_run_rec_add(&again, key, buf) < 0) abort();
            if (strchr(again, '\n') != again + strlen(again) - 1) abort();
            if (!tr_run_rec_get(again, key, back, sizeof back) || strcmp(back, buf) != 0) abort();
            free(again);
        }
        line = end + 1;
    }
    if (lines != entries) abort();
}

/* the model and optimizer a state file is read into, made once */
static tr_model model;
static tr_optim optim;

static int model_ready(void)
{
    static int ready = 0;
    if (!ready) {
        char err[256];
        tr_config cfg = {.S = 64, .P = 16, .E = 64, .L = 1, .H = 2, .C = 64, .h = 2, .D = 1};
        tr_backend *be = tr_backend_create("cpu", 1, err, sizeof err);
        if (!be || tr_model_init(&model, be, &cfg, 1, 1, 1, err, sizeof err) < 0) abort();
        tr_model_init_params(&model, 1);
        tr_optim_config c;
        tr_optim_defaults(&c, 1e-3, 10);
        if (tr_optim_init(&optim, &model, &c) < 0) abort();
        ready = 1; /* (kept to the process's end) */
    }
    return ready;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], err[512];
    fuzz_write(fuzz_path("state.bin", path), data, size);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    tr_st_file f = {0};
    int parsed = tr_st_parse(&f, buf, size, err, sizeof err) == 0;
    if (!parsed) fuzz_one_line(err, sizeof err);
    peek_agrees(path, &f, parsed, "format");
    peek_agrees(path, &f, parsed, "run.world");
    peek_agrees(path, &f, parsed, "run.zero");
    for (int i = 0; i < f.n_meta && i < 8; i++) peek_agrees(path, &f, parsed, f.meta_key[i]);

    char *rec = NULL;
    int rc = tr_ckpt_read_run(path, &rec, err, sizeof err);
    if (rc < 0) {
        fuzz_one_line(err, sizeof err);
        if (rec) abort();
    } else {
        if (!parsed) abort(); /* the record is read by the same reader */
        if (rec) record_reads_back(rec, &f);
    }
    free(rec);

    tr_config c;
    if (tr_ckpt_read_config(path, &c, err, sizeof err) < 0) fuzz_one_line(err, sizeof err);
    else if (!parsed) abort();

    tr_train_state st = {0};
    if (model_ready() && tr_ckpt_load_state(&model, &optim, &st, path, err, sizeof err) < 0) {
        fuzz_one_line(err, sizeof err);
    } else {
        if (!parsed || st.step < 0 || st.step > (1L << 40) || optim.t < 0 || optim.t > (1L << 40)) abort();
        if (strnlen(st.data_id, sizeof st.data_id) >= sizeof st.data_id) abort();
    }
    tr_st_close(&f);
    free(buf);
    return 0;
}
