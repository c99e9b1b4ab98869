/*
 * run_record.c - sa1b-train's run record: the settings that shape a run,
 * saved in every state file, and restored (or checked against the
 * command line) by --resume.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <getopt.h>

#include "train.h"
/* ---- the run record (issue 19) ------------------------------------------- */

/* The settings that shape the model, the data and the schedule, saved in
 * every state file and restored by --resume.  fixed: a flag given on resume
 * must agree with the run; otherwise (steps, data paths, checkpointing,
 * logging) a given flag is taken and an absent one restored. */
enum { RF_INT, RF_LONG, RF_U64, RF_DBL, RF_STR, RF_PREC, RF_UNFREEZE, RF_STAGES };
typedef struct run_field {
    const char *key;    /* in the record; the flag is --key with '_' as '-' */
    int opt, kind, fixed;
    size_t off;
} run_field;
#define RUN_FIELD(key, opt, kind, fixed, field) {key, opt, kind, fixed, offsetof(options, field)}
static const run_field run_fields[] = {
    RUN_FIELD("config", O_CONFIG, RF_STR, 1, config_name), RUN_FIELD("image_size", O_S, RF_INT, 1, cfg.S),
    RUN_FIELD("patch", O_P, RF_INT, 1, cfg.P), RUN_FIELD("enc_width", O_E, RF_INT, 1, cfg.E),
    RUN_FIELD("enc_depth", O_L, RF_INT, 1, cfg.L), RUN_FIELD("enc_heads", O_H, RF_INT, 1, cfg.H),
    RUN_FIELD("dec_width", O_C, RF_INT, 1, cfg.C), RUN_FIELD("dec_heads", O_h, RF_INT, 1, cfg.h),
    RUN_FIELD("dec_depth", O_D, RF_INT, 1, cfg.D), RUN_FIELD("batch", O_BATCH, RF_INT, 1, batch),
    RUN_FIELD("masks", O_MASKS, RF_INT, 1, masks), RUN_FIELD("points", O_POINTS, RF_INT, 1, points),
    RUN_FIELD("lr", O_LR, RF_DBL, 1, lr), RUN_FIELD("warmup", O_WARMUP, RF_LONG, 1, warmup),
    RUN_FIELD("weight_decay", O_WD, RF_DBL, 1, weight_decay), RUN_FIELD("adam_eps", O_EPS, RF_DBL, 1, adam_eps),
    RUN_FIELD("clip", O_CLIP, RF_DBL, 1, clip), RUN_FIELD("seed", O_SEED, RF_U64, 1, seed),
    RUN_FIELD("flip", O_FLIP, RF_DBL, 1, flip), RUN_FIELD("optim", O_OPTIM, RF_STR, 1, optim),
    RUN_FIELD("optim_block", O_OPTIM_BLOCK, RF_INT, 1, optim_block), RUN_FIELD("accum", O_ACCUM, RF_INT, 1, accum),
    RUN_FIELD("precision", O_PREC, RF_PREC, 1, precision), RUN_FIELD("zero", O_ZERO, RF_INT, 1, zero),
    RUN_FIELD("loss_scale_window", O_SCALE_WIN, RF_LONG, 1, scale_window),
    RUN_FIELD("freeze", O_FREEZE, RF_STR, 1, freeze), RUN_FIELD("unfreeze", O_UNFREEZE, RF_UNFREEZE, 1, n_unfreeze),
    RUN_FIELD("stage_batch", O_STAGE_BATCH, RF_STAGES, 1, n_stage),
    RUN_FIELD("steps", O_STEPS, RF_LONG, 0, steps), RUN_FIELD("data", O_DATA, RF_STR, 0, data),
    RUN_FIELD("val", O_VAL, RF_STR, 0, val), RUN_FIELD("checkpoint_every", O_CKPT_EVERY, RF_INT, 0, ckpt_blocks),
    RUN_FIELD("checkpoint_decoder", O_CKPT_DEC, RF_INT, 0, ckpt_decoder),
    RUN_FIELD("attention", O_ATTN, RF_STR, 0, attention),
    RUN_FIELD("log_every", O_LOG, RF_LONG, 0, log_every), RUN_FIELD("ckpt_every", O_CKPT, RF_LONG, 0, ckpt_every),
};

/* A field's value as the record writes it (strings percent-encoded later). */
static void field_text(const options *o, const run_field *f, char *buf, size_t len)
{
    const char *p = (const char *)o + f->off;
    size_t n = 0;
    buf[0] = 0;
    switch (f->kind) {
    case RF_INT: snprintf(buf, len, "%d", *(const int *)p); break;
    case RF_LONG: snprintf(buf, len, "%ld", *(const long *)p); break;
    case RF_U64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)p); break;
    case RF_DBL: snprintf(buf, len, "%.17g", *(const double *)p); break;
    case RF_STR: snprintf(buf, len, "%s", *(const char *const *)p ? *(const char *const *)p : ""); break;
    case RF_PREC: snprintf(buf, len, "%s", tr_prec_name(*(const int *)p)); break;
    case RF_UNFREEZE:
        for (int i = 0; i < o->n_unfreeze && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%ld:%s", i ? "," : "", o->unfreeze_step[i], o->unfreeze_group[i]);
        break;
    case RF_STAGES:
        for (int i = 0; i < o->n_stage && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%ld:%d", i ? "," : "", o->stage_step[i], o->stage_batch[i]);
        break;
    }
}

/* A value of the record as a message shows it: a float field's (kept at
 * 17 digits, "0.00029999999999999997") in its fewest digits that read
 * back as the same double ("0.0003"); the text itself otherwise. */
static const char *shown(const run_field *f, const char *v, char *buf, size_t len)
{
    char *end;
    double d = strtod(v, &end);
    if (f->kind != RF_DBL || end == v || *end) return v;
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, d);
        if (strtod(buf, NULL) == d) break;
    }
    return buf;
}

/* "--enc-depth" for the key "enc_depth" */
static const char *field_flag(const run_field *f, char *buf, size_t len)
{
    snprintf(buf, len, "--%s", f->key);
    for (char *c = buf; *c; c++)
        if (*c == '_') *c = '-';
    return buf;
}

void make_record(options *o)
{
    char v[4200];
    if (o->warmup < 0) o->warmup = o->steps / 10 < 100 ? o->steps / 10 : 100; /* what the optimizer takes */
    int rc = 0;
    for (size_t i = 0; i < sizeof run_fields / sizeof *run_fields; i++) {
        field_text(o, &run_fields[i], v, sizeof v);
        rc |= tr_run_rec_add(&o->job->record, run_fields[i].key, v);
    }
    if (o->synthetic) {
        snprintf(v, sizeof v, "%" PRIu64, o->synthetic_seed);
        rc |= tr_run_rec_add(&o->job->record, "synthetic_batch", v);
    }
    snprintf(v, sizeof v, "%d", o->job->world); /* data-parallel processes: --batch is per rank */
    rc |= tr_run_rec_add(&o->job->record, "world", v);
    if (rc) cli_die(CLI_EXIT_FATAL, "out of memory");
}

/* Appends "--flag value" (value NULL: the flag alone) to the argument list
 * the run is parsed from again. */
static void push_arg(options *o, const char *flag, const char *value)
{
    for (int k = 0; k < (value ? 2 : 1); k++) {
        if (o->job->n_owned == (int)(sizeof o->job->owned / sizeof *o->job->owned)) cli_die(CLI_EXIT_FATAL, "run record too long");
        if (!(o->job->owned[o->job->n_owned++] = strdup(k ? value : flag))) cli_die(CLI_EXIT_FATAL, "out of memory");
    }
}

/* A record's keys are the fields above, synthetic_batch and world
 * (make_record's): one it does not know is refused, never ignored (a
 * state file of a later version, or one made to set what the run did not
 * have). */
static void check_record_keys(const char *rec, const char *path)
{
    for (const char *line = rec; *line;) {
        const char *end = strchr(line, '\n'), *eq = strchr(line, '=');
        if (!end) end = line + strlen(line);
        size_t n = eq && eq < end ? (size_t)(eq - line) : (size_t)(end - line);
        int known = (n == strlen("world") && !strncmp(line, "world", n)) ||
                    (n == strlen("synthetic_batch") && !strncmp(line, "synthetic_batch", n));
        for (size_t i = 0; i < sizeof run_fields / sizeof *run_fields && !known; i++)
            known = strlen(run_fields[i].key) == n && !strncmp(line, run_fields[i].key, n);
        if (!known)
            cli_die(CLI_EXIT_FATAL, "cannot resume: '%s': its run record holds the setting '%.*s', which this "
                    "sa1b-train does not know (a state file of another version, or a crafted one)", path,
                    (int)(n > 64 ? 64 : n), line);
        line = *end ? end + 1 : end;
    }
}

/* --resume DIR: the options are parsed again from the command line plus,
 * for every setting of the run's record that it does not give, "--flag
 * value" (so that a record is checked like a command line); a given one that
 * contradicts the run is refused.  A state written before records existed
 * resumes with the options as given. */
void restore_run(options *o, int argc, char **argv, int report)
{
    char path[4200], err[512], *rec = NULL, v[4200], mine[4200], flag[40];
    snprintf(path, sizeof path, "%s/state-%ld.bin", o->resume, o->job->resume_step); /* (choose_checkpoint's) */
    if (tr_ckpt_read_run(path, &rec, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "cannot resume: %s", err);
    if (!rec) return;
    check_record_keys(rec, path);
    int world = tr_run_rec_get(rec, "world", v, sizeof v) ? atoi(v) : 1;
    if (world != o->job->world)
        die_alike(report, CLI_EXIT_USAGE, "the run in '%s' was trained by %d process%s and this job has %d: resume it with "
                "the same number (mpirun -np %d; --batch is per process)", o->resume, world, world == 1 ? "" : "es",
                o->job->world, world);
    options r = *o; /* the options parsed with the record's settings added (the strings: o->job->owned) */
    for (int i = 0; i < argc; i++) push_arg(&r, argv[i], NULL);
    for (size_t i = 0; i < sizeof run_fields / sizeof *run_fields; i++) {
        const run_field *f = &run_fields[i];
        if (!tr_run_rec_get(rec, f->key, v, sizeof v)) continue; /* an older record: the option as given */
        field_flag(f, flag, sizeof flag);
        if (f->opt == O_DATA && *v && o->given[O_SYNTH])
            die_alike(report, CLI_EXIT_USAGE, "--synthetic-batch %" PRIu64 " contradicts the run in '%s', which has --data %s: "
                    "leave --synthetic-batch out to continue it", o->synthetic_seed, o->resume, v);
        field_text(o, f, mine, sizeof mine);
        char ms[40], vs[40];
        if (o->given[f->opt] && f->fixed && strcmp(mine, v) != 0)
            die_alike(report, CLI_EXIT_USAGE, "%s %s contradicts the run in '%s', which has %s %s: leave %s out to continue it", flag,
                   *mine ? shown(f, mine, ms, sizeof ms) : "(none)", o->resume, flag, *v ? shown(f, v, vs, sizeof vs) : "(none)",
                   flag);
        if (o->given[f->opt] || !*v) continue; /* given, or the default (no list, no path) */
        if (f->opt == O_CKPT_DEC) {
            if (strcmp(v, "0") != 0) push_arg(&r, flag, NULL);
        } else {
            push_arg(&r, flag, v);
        }
    }
    if (tr_run_rec_get(rec, "synthetic_batch", v, sizeof v)) {
        char mine_s[32];
        snprintf(mine_s, sizeof mine_s, "%" PRIu64, o->synthetic_seed);
        if (o->given[O_DATA] || (o->given[O_SYNTH] && strcmp(mine_s, v) != 0))
            die_alike(report, CLI_EXIT_USAGE, "%s %s contradicts the run in '%s', which has --synthetic-batch %s: leave %s out "
                    "to continue it", o->given[O_DATA] ? "--data" : "--synthetic-batch", o->given[O_DATA] ? o->data : mine_s,
                    o->resume, v, o->given[O_DATA] ? "--data" : "--synthetic-batch");
        if (!o->given[O_SYNTH]) push_arg(&r, "--synthetic-batch", v);
    }
    free(rec);
    int n = r.job->n_owned;
    char **args = malloc(((size_t)n + 1) * sizeof *args);
    if (!args) cli_die(CLI_EXIT_FATAL, "out of memory");
    memcpy(args, r.job->owned, (size_t)n * sizeof *args);
    args[n] = NULL;
    int data_restored = 0;
    for (int i = 0; i + 1 < n; i++) data_restored |= strcmp(args[i], "--data") == 0 && !o->given[O_DATA];
    optind = 0; /* getopt from the start */
    parse_options(n, args, o);
    o->data_restored = data_restored;
    free(args);
}

