/*
 * checkpoint.h - the files of sa1b-train, all safetensors:
 *  - model-STEP.safetensors: every parameter under its MODEL.md name plus the
 *    buffer prompt.pe_gaussian, F32, __metadata__ S,P,E,L,H,C,h,D and
 *    format TR_CKPT_FORMAT_MODEL;
 *  - state-STEP.bin: the training state, a safetensors file with the AdamW
 *    moments "adam.m.<name>" / "adam.v.<name>" and __metadata__ step,
 *    adam_t, rng (four hex words), data_epoch, data_consumed, data_id (shards), format, and the
 *    run record as run.<key> entries;
 *  - the --dump-step file of MODEL.md's "Debug dump", format
 *    TR_CKPT_FORMAT_DUMP.
 * All are written atomically (temporary file + rename).  The model loader
 * takes a file of format TR_CKPT_FORMAT_MODEL, or one without a format
 * (written before the tag) that is not a dump (no out.logits); it refuses a
 * dump and a state file.
 */
#ifndef SA1B_TRAINER_CHECKPOINT_H
#define SA1B_TRAINER_CHECKPOINT_H

#include <stdint.h>

#include "data/batch.h"
#include "model/model.h"
#include "optim.h"
#include "common/tr_rng.h"

/* __metadata__ "format" of each file */
#define TR_CKPT_FORMAT_MODEL "sa1b-train-model-1"
#define TR_CKPT_FORMAT_STATE "sa1b-train-state-1"
#define TR_CKPT_FORMAT_DUMP "sa1b-train-dump-1"

int tr_ckpt_save_model(const tr_model *m, const char *path, char *err, size_t err_len);
/* Loads parameters into m; the file's config must equal m's.  0 or -1. */
int tr_ckpt_load_model(tr_model *m, const char *path, char *err, size_t err_len);
/* Reads only the config (metadata) of a model file. 0 or -1. */
int tr_ckpt_read_config(const char *path, tr_config *cfg, char *err, size_t err_len);

typedef struct tr_train_state {
    long step;               /* completed steps */
    tr_rng rng;
    uint64_t data_epoch, data_consumed;
    double loss_scale;       /* fp16 dynamic loss scale (metadata "loss_scale"; 0: none saved) */
    long scale_good;         /* clean steps since the scale last changed ("scale_good") */
    const char *run;         /* saved only: the run record (run_dir.h), one "run.<key>" metadata entry a line */
    char data_id[128];       /* the training data's identity (tr_data_source.identity; metadata
                                "data_id"); "" when none (synthetic, or a state written before it) */
} tr_train_state;

int tr_ckpt_save_state(const tr_model *m, const tr_optim *o, const tr_train_state *s, const char *path, char *err,
                       size_t err_len);
int tr_ckpt_load_state(const tr_model *m, tr_optim *o, tr_train_state *s, const char *path, char *err,
                       size_t err_len);

/* The run record of a state file: its "run.<key>" metadata as "key=value\n"
 * lines (run_dir.h), malloc'd in *run; *run NULL when the file has none (a
 * state written before records existed).  An entry that tr_run_rec_add
 * would not have written (a key not of [a-z0-9_], a byte of the value it
 * escapes, a '%' not followed by two upper-case hex digits) is refused: a
 * record read back holds the lines it was written with and no other.  0,
 * or -1 with err. */
int tr_ckpt_read_run(const char *path, char **run, char *err, size_t err_len);

/* The debug dump after tr_model_forward + tr_model_backward on b. */
int tr_dump_step(const tr_model *m, const tr_batch *b, const tr_loss *loss, const char *path, char *err,
                 size_t err_len);

#endif
