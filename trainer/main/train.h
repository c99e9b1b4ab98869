/*
 * train.h - what the files of the sa1b-train program share (private to
 * it): the options, and the parts of the program in other files:
 * train_options.c (the command line, the output folder, the run record),
 * train_eval.c (evaluation and overlays), train_memory.c (the planner, out
 * of memory, address-space limits) and sa1b-train.c (the training run).
 */
#ifndef SA1B_TRAIN_H
#define SA1B_TRAIN_H

#include <stdint.h>

#include "backend/backend.h"
#include "data/batch.h"
#include "train/checkpoint.h"
#include "cli.h"
#include "data/data_shards.h"
#include "dist.h"
#include "model/model.h"
#include "train/optim.h"
#include "train/plan.h"
#include "train/run_dir.h"
#include "common/tr_rng.h"
#include "common/vmlimit.h"

typedef struct options {
    const char *config_name;
    tr_config cfg;
    long steps;
    int batch, masks, points;
    double lr, weight_decay, clip, adam_eps;
    long warmup;
    uint64_t seed;
    int threads;
    const char *backend;
    const char *out, *resume, *init, *eval_only, *dump_step, *data, *val;
    int synthetic;
    uint64_t synthetic_seed;
    long log_every, ckpt_every, eval_batches;
    double flip;
    int loader_threads;
    long export_n;
    int quiet;
    /* memory (issue 7 part B) */
    const char *optim;          /* adamw or adamw8bit */
    int optim_block;            /* adamw8bit block size */
    int memory_report, plan;
    long empty_cache_every;
    uint64_t memory_budget;
    int memory_budget_auto;     /* --memory-budget auto: the backend's free memory */
    uint64_t memory_limit;      /* --memory-limit: cap on the memory held (0: none) */
    int effective_batch;
    char *plan_err;             /* planning: where run() reports a failure instead of exiting */
    size_t plan_err_len;
    /* computation (issue 7 part A) */
    int accum;                  /* micro-batches per optimizer step */
    int ckpt_blocks, ckpt_decoder; /* --checkpoint-every N, --checkpoint-decoder */
    const char *precision;      /* fp32, bf16 or fp16 */
    int tf32;                   /* --tf32: the CUDA backend's fp32 GEMMs in TF32 */
    long scale_window;          /* fp16: clean steps before the loss scale doubles */
    const char *freeze;         /* comma list of groups */
    int n_unfreeze, n_stage;
    long unfreeze_step[64], stage_step[64];
    char unfreeze_group[64][32];
    int stage_batch[64];
    /* data parallelism (issue 18): this process's rank of world, the job */
    int rank, world;
    tr_dist *dist;
    int zero;                   /* --zero 1: the optimizer state split over the ranks */
    int plan_ranks;             /* --ranks N: with --plan, one rank of a job of N */
    double collective_timeout;  /* --collective-timeout seconds */
    /* the output folder and resume (issue 19) */
    int overwrite;              /* --overwrite: start afresh in a folder that holds a run */
    int auto_resume;            /* --auto-resume: continue the run in --out when it has a checkpoint */
    int auto_fresh;             /* --auto-resume found none: start afresh, clearing a run without one */
    int out_locked;             /* lock_out ran: --out is this process's (or could not be locked) */
    int out_lock_held;          /* and holds the lock (TR_RUN_LOCK) */
    int data_restored;          /* --resume took --data from the run's record (not given) */
    unsigned char given[1024];  /* given[c]: option c was on the command line */
    char *record;               /* the run record saved in every state file (run_dir.h) */
    char *owned[256];           /* --resume: the arguments parsed again, with the run record's */
    int n_owned;
} options;

/* train_options.c */
void parse_options(int argc, char **argv, options *o);
/* Refuses --out when it holds a run that this one does not continue. */
void check_out(const options *o);
/* a and b name one folder (the same file; the same spelling where either
 * is not there). */
int same_dir(const char *a, const char *b);
/* Creates --out and locks it (lock_out), then with --overwrite empties it of
 * the earlier run's files. */
void prepare_out(options *o);
/* Takes the exclusive flock(2) lock of the --out folder (on its file
 * TR_RUN_LOCK, which it creates) for the rest of the process (the training run of rank 0); another process holding it: one
 * line and exit 2.  A folder not there yet is left to prepare_out (created:
 * 1, it must be there). */
void lock_out(options *o, int created);
/* --export: takes the flock(2) lock of the overlays' folder dir (its file
 * TR_RUN_LOCK) for the rest of the process, then refuses (without
 * --overwrite) or removes (with it) an earlier export's overlays there;
 * another export holding it: one line and exit 2. */
void lock_export(const options *o, const char *dir);
/* The run record of o, saved in every state file. */
void make_record(options *o);
/* --resume: the run's settings restored from its record. */
void restore_run(options *o, int argc, char **argv, int report);

/* train_eval.c: evaluation on src (every batch when whole, else
 * --eval-batches), overlays for --export; prints the JSON line. */
int evaluate(const options *o, tr_model *m, tr_data_source *src, int whole);

/* train_memory.c */
int plan_main(const options *o);
int plan_run(void *ctx, tr_backend *be, const tr_plan_point *pt, char *err, size_t err_len);
/* The line of a failure of the model's set-up or of a step: a device
 * fault as such; out of memory with the planner's suggestion for the
 * memory there was. */
void failure_line(const options *o, tr_backend *be, const char *err, char *line, size_t n);
/* That line, exit 3. */
_Noreturn void die_memory(const options *o, tr_backend *be, const char *err);
void check_thread_room(const options *o);
void check_address_space(const options *o, tr_backend *be);

/* sa1b-train.c */
int run(const options *op, tr_backend *be);
long read_latest(const char *dir);
/* Names step in dir/latest (a temporary renamed over it, synced; own_tmp:
 * a temporary of this process's own, for processes that write it at
 * once): 0, or -1 with errno. */
int write_latest(const char *dir, long step, int own_tmp);
int src_workers(const options *o);
void test_hook(const char *what, long n);
/* The device's failure, as tr_backend_cuda_error says it (1 and err), or
 * one that the test suite makes up on any backend (test_device_hook). */
int device_error(tr_backend *be, char *err, size_t err_len);
void test_device_hook(const char *what, long n, int rank);

#endif
