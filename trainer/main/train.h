/*
 * train.h - what the files of the sa1b-train program share (private to
 * it): the job, the options, and each file's part (sa1b-train.c lists
 * them).
 */
#ifndef SA1B_TRAIN_H
#define SA1B_TRAIN_H

#include <stdint.h>

#include "backend/backend.h"
#include "data/batch.h"
#include "train/checkpoint.h"
#include "cli.h"
#include "data/data_shards.h"
#include "data/plan_source.h"
#include "data/synthetic.h"
#include "dist.h"
#include "model/model.h"
#include "train/optim.h"
#include "train/plan.h"
#include "train/run_dir.h"
#include "common/tr_rng.h"
#include "common/vmlimit.h"
#include "common/bytes.h"

/* The job a run belongs to: what main learns (the ranks) and makes (the
 * lock of --out, the run record), apart from the options, which are the
 * command line's (and the run record's, on --resume) and nothing else. */
struct options;
typedef struct train_job {
    int rank, world;            /* this process's rank of world (1, 0 alone; --plan: one rank of --ranks) */
    tr_dist *dist;              /* the ranks (one process alone: a job of one) */
    int out_locked;             /* lock_out ran: --out is this process's (or could not be locked) */
    int out_lock_held;          /* and holds the lock (TR_RUN_LOCK) */
    char *record;               /* the run record saved in every state file (run_dir.h) */
    char *owned[256];           /* --resume: the arguments parsed again, with the run record's */
    int n_owned;
    int test_device_failed;     /* SA1B_TEST_DEVICE made this rank's device fail (faults.c) */
    long resume_step;           /* --resume: the checkpoint the run continues from (choose_checkpoint) */
    /* The line of a failure of a step or of the set-up (main: failure_line,
     * which asks the planner for a micro-batch that fits): the training
     * run says its failures through it, so that it never calls the
     * planner that runs it. */
    void (*explain)(const struct options *o, tr_backend *be, const char *err, char *line, size_t n);
} train_job;

/* sa1b-train's options: the command line's, parsed and checked
 * (train_options.c); the run's functions read them, const. */
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
    /* computation (issue 7 part A) */
    int accum;                  /* micro-batches per optimizer step */
    int ckpt_blocks, ckpt_decoder; /* --checkpoint-every N, --checkpoint-decoder */
    int precision;              /* TR_PREC_* of --precision; -1: not a name (precision_arg) */
    const char *precision_arg;  /* --precision as given */
    int tf32;                   /* --tf32: the CUDA backend's fp32 GEMMs in TF32 */
    const char *attention;      /* --attention (or SA1B_CUDA_ATTN): the CUDA attention's path, "auto" default */
    long scale_window;          /* fp16: clean steps before the loss scale doubles */
    const char *freeze;         /* comma list of groups */
    int n_unfreeze, n_stage;
    long unfreeze_step[64], stage_step[64];
    char unfreeze_group[64][32];
    int stage_batch[64];
    /* data parallelism (issue 18) */
    int zero;                   /* --zero 1: the optimizer state split over the ranks */
    int plan_ranks;             /* --ranks N: with --plan, one rank of a job of N */
    double collective_timeout;  /* --collective-timeout seconds */
    /* the output folder and resume (issue 19) */
    int overwrite;              /* --overwrite: start afresh in a folder that holds a run */
    int auto_resume;            /* --auto-resume: continue the run in --out when it has a checkpoint */
    int auto_fresh;             /* --auto-resume found none: start afresh, clearing a run without one */
    int data_restored;          /* --resume took --data from the run's record (not given) */
    long from_step;             /* --resume DIR --from-step N: that checkpoint (-1: DIR/latest's) */
    int skip_damaged;           /* --skip-damaged: a damaged sample's pairs left out, the run goes on */
    unsigned char given[1024];  /* given[c]: option c was on the command line */
    train_job *job;             /* the job these options run in (kept by parse_options) */
} options;

/* The ids of the options (getopt's), which the run record names too */
enum {
    O_CONFIG = 256, O_S, O_P, O_E, O_L, O_H, O_C, O_h, O_D, O_STEPS, O_BATCH, O_MASKS, O_POINTS, O_LR, O_WARMUP,
    O_WD, O_EPS, O_CLIP, O_SEED, O_THREADS, O_BACKEND, O_OUT, O_RESUME, O_LOG, O_CKPT, O_EVAL, O_EVALB, O_DUMP,
    O_DATA, O_VAL, O_SYNTH, O_FLIP, O_LTHREADS, O_EXPORT, O_INIT
};
enum { O_OPTIM = 400, O_OPTIM_BLOCK, O_MEMREP, O_EMPTY_CACHE, O_PLAN, O_BUDGET, O_EFFB, O_LIMIT };
enum { O_OVERWRITE = 600, O_COLL_TIMEOUT, O_ZERO, O_RANKS, O_AUTO_RESUME };
enum { O_FROM_STEP = 700, O_SKIP_DAMAGED };
enum { O_ACCUM = 500, O_CKPT_EVERY, O_CKPT_DEC, O_PREC, O_SCALE_WIN, O_FREEZE, O_UNFREEZE, O_STAGE_BATCH, O_TF32, O_ATTN };

/* train_options.c */
void parse_options(int argc, char **argv, options *o);

/* out_dir.c */
/* Refuses --out when it holds a run that this one does not continue. */
void check_out(const options *o);
/* a and b name one folder (the same file; the same spelling where either
 * is not there). */
int same_dir(const char *a, const char *b);
/* Creates --out and locks it (lock_out), then with --overwrite empties it of
 * the earlier run's files. */
void prepare_out(const options *o);
/* Takes the exclusive flock(2) lock of the --out folder (on its file
 * TR_RUN_LOCK, which it creates) for the rest of the process (the training run of rank 0); another process holding it: one
 * line and exit 2.  A folder not there yet is left to prepare_out (created:
 * 1, it must be there). */
void lock_out(const options *o, int created);
/* --export: takes the flock(2) lock of the overlays' folder dir (its file
 * TR_RUN_LOCK) for the rest of the process, then refuses (without
 * --overwrite) or removes (with it) an earlier export's overlays there;
 * another export holding it: one line and exit 2. */
void lock_export(const options *o, const char *dir);
/* --auto-resume: --resume OUT when OUT has a checkpoint, else a fresh start. */
void auto_resume(options *o);

/* run_record.c */
/* The run record of o, saved in every state file. */
void make_record(options *o);
/* --resume: the run's settings restored from its record. */
void restore_run(options *o, int argc, char **argv, int report);

/* data_open.c */
/* The loader's worker threads for --data (--loader-threads or all cores but one). */
int src_workers(const options *o);
/* Opens a data source: shards matching glob through the loader, else the
 * synthetic batches; points K and epochs as given (eval: K 1, one epoch).
 * Shards that cannot be opened end the process in one line, or with why
 * (the ranks of a job settle it) return -1 with that line in why. */
int open_source_why(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem, const char *what,
                    const char *glob, int K, uint64_t max_epochs, double flip, char *why, size_t why_len);
void open_source(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem, const char *what,
                 const char *glob, int K, uint64_t max_epochs, double flip);
/* Incomplete shards, and inputs that lack a part, said once a run (rank 0). */
void warn_incomplete(const options *o, const tr_data_source *src, const char *what, const char *glob);

/* train_loop.c */
/* The training run on be, or the planner's run of the same path on the
 * meta backend (o->plan: no files, no initialisation arithmetic): its exit
 * status, or -1 with err where its set-up does not fit (the model, the
 * optimizer, the groups a resumed run had unfrozen), everything given back
 * (the caller says so, with the planner's advice: die_explained).  A step
 * that fails later saves the steps before it and ends the run itself
 * (die_step). */
int run_train(const options *o, tr_backend *be, char *err, size_t err_len);
/* The model of a run (eval: of --eval-only), --init's weights loaded: 0,
 * or -1 with err where it does not fit. */
int setup_model(const options *o, tr_backend *be, const tr_config *cfg, tr_model *m, int eval, char *err,
                size_t err_len);
/* The training data (--data or the synthetic batches) of the run; under
 * mpirun the ranks agree on it. */
void open_training_data(const options *o, const tr_config *cfg, tr_data_source *src, tr_backend *be);

/* train_save.c */
/* The line of a failure (o->job->explain), exit 3. */
_Noreturn void die_explained(const options *o, tr_backend *be, const char *err);
/* --resume DIR: the checkpoint the run continues from, in
 * o->job->resume_step: the one DIR/latest names, or --from-step's; one
 * that is damaged (tr_run_checkpoint_intact) is skipped for the newest
 * intact one before it, said in one line (report: rank 0).  None: one
 * line, exit 3 (--from-step N without a checkpoint of step N: exit 2). */
void choose_checkpoint(options *o, int report);
/* The state file of step for this rank: state-STEP.bin, or with --zero 1
 * under mpirun state-STEP.rRANK.bin for ranks > 0 (each its part). */
void state_path(const options *o, const char *dir, long step, char *path, size_t n);
/* The checkpoint of st->step (the data's position: pos, or the source's
 * own); log synced before latest names it. */
void save_checkpoint(const options *o, tr_model *m, tr_optim *opt, tr_train_state *st, tr_data_source *src,
                     const uint64_t *pos, FILE *log);
/* A step that failed: the steps since the last checkpoint (saved) are
 * saved first, then one line each, exit 3 (one process; die_step_ranks:
 * the ranks of a job). */
_Noreturn void die_step(const options *o, tr_backend *be, tr_model *m, tr_optim *opt, tr_train_state *st,
                        tr_data_source *src, long saved, const uint64_t *pos, FILE *log, const char *err);
_Noreturn void die_step_ranks(const options *o, tr_backend *be, tr_model *m, tr_optim *opt, tr_train_state *st,
                              tr_data_source *src, long saved, const uint64_t *pos, FILE *log, int fails, int rank,
                              int dev_fails);

/* train_eval.c: evaluation on src (every batch when whole, else
 * --eval-batches), overlays for --export; prints the JSON line. */
int evaluate(const options *o, tr_model *m, tr_data_source *src, int whole);
/* --val after the training: m's weights evaluated on the whole of --val
 * by a model of one point per mask (m is freed first). */
void evaluate_val(const options *o, tr_backend *be, const tr_config *cfg, tr_model *m);
/* --eval-only, the whole run: its exit status. */
int run_eval_only(const options *o, tr_backend *be);

/* dump.c: --dump-step, the whole run: its exit status. */
int run_dump(const options *o, tr_backend *be);

/* run_log.c */
/* On resume: the log's records after step dropped, and a last record cut short. */
void trim_log(const char *path, long step);
/* A record that did not reach the log: one line, the log closed (NULL
 * returned), *bad set (exit 3 once the training is done). */
FILE *log_failed(FILE *log, const char *path, long step, int *bad);
/* One step's record, as the log (log.jsonl) and the terminal show it. */
typedef struct step_record {
    long step, steps;
    tr_loss L;                  /* the step's loss means, mIoU and valid pairs */
    double lr, grad_norm, images_per_s, data_wait_pct, step_s;
    long damaged;               /* damaged samples left out (--skip-damaged) since the last record */
    tr_mem_stats mem;
    const char *extra;          /* more keys of the log's line (", \"scale\": ..."); NULL: none */
} step_record;
/* The record's line of the log (a write error: ferror(log), errno). */
void log_step(FILE *log, const step_record *r);
/* Its line on the terminal (stderr). */
void print_step(const step_record *r);
/* v as JSON into buf[32] (digits significant digits, or decimals with
 * fixed); "null" when it is not finite. */
const char *json_num(char buf[32], double v, int digits, int fixed);

/* ranks.c */
/* --zero 1: rank r keeps the optimizer state of the parameters in floats
 * [lo[r], lo[r+1]) of the weights (whole parameters, about equal shares, in
 * the layout's order); the ranks reduce-scatter the gradients by the same
 * parts (each rank receives the sum of its own), each updates its part, and
 * they gather the others' weights after each update. */
typedef struct zero_part {
    uint8_t *owned; /* [n_params]; NULL: every parameter (no split) */
    size_t *lo;     /* [world + 1] */
    size_t *glo;    /* [world + 1]: the parts in grad_mem (zero_grad_parts) */
} zero_part;
void zero_split(const tr_model *m, int rank, int world, zero_part *z);
void zero_grad_parts(const tr_model *m, int world, zero_part *z);
/* Data parallel: sums over the ranks (more than one, or on the device
 * under mpirun: the same path with one rank). */
int data_parallel(const options *o);
/* The line of a failure to start the backend: "[rank R of N: ]--backend NAME: why". */
void rank_line(char *line, size_t n, const options *o, const char *why);
/* The end of every rank of a job that meets the same failure at start-up
 * (a --resume refused, no checkpoint to resume from): rank 0 (report)
 * says it in one line and exits with code, the others exit alike after
 * leaving it the time to (mpirun ends a job at its first failed process). */
_Noreturn __attribute__((format(printf, 3, 4))) void die_alike(int report, int code, const char *fmt, ...);
/* A collective that failed on this rank: the line and the end of the job. */
_Noreturn void die_collective(const options *o, const char *err);
/* A failure every rank knows of: the one line (msg, "" on the silent
 * ranks) and the end of every rank. */
_Noreturn void die_ranks(tr_dist *dist, tr_backend *be, const char *msg);
/* The ranks read the same --data (failed: this rank's line, or "") ... */
void same_data(const options *o, tr_data_source *src, const char *failed, tr_backend *be);
/* ... and start the same run (the step, the record's digest). */
void same_run(const options *o, tr_backend *be);

/* train_memory.c */
int plan_main(const options *o);
int plan_run(void *ctx, tr_backend *be, const tr_plan_point *pt, char *err, size_t err_len);
/* The line of a failure of the model's set-up or of a step: a device
 * fault as such; out of memory with the planner's suggestion for the
 * memory there was. */
void failure_line(const options *o, tr_backend *be, const char *err, char *line, size_t n);
void check_thread_room(const options *o);
void check_address_space(const options *o, tr_backend *be);

/* signals.c: the handlers, and what they read */
void sig_watch_bus(void);  /* SIGBUS: one line naming the last checkpoint, exit 3 */
void sig_watch_stop(void); /* SIGINT, SIGTERM, SIGHUP (unless ignored): a stop after the step */
int sig_stop_requested(void);
void sig_stop_now(void);   /* a stop asked for: the signal again, at its default action */
/* where the checkpoint a SIGBUS line names is (out, NULL: none), and whether one is written */
void sig_bus_checkpoint(const char *out, int written);
void sig_bus_checkpointed(const char *out); /* one is written (in out, unless NULL: where it was) */
/* the training is over: a signal (a SIGBUS) from now on ends the process
 * at once with "PROG: stop_msg" ("PROG: bus_msg") */
void sig_after_training(const char *stop_msg, const char *bus_msg);
void sig_stop_keeps(void); /* and from now on a signal stops as before */

/* faults.c */
void test_hook(const char *what, long n);
void test_device_hook(train_job *job, const char *what, long n);
void test_log_hook(FILE *log, long step);
/* The device's failure, as tr_backend_error says it (1 and err), or
 * one that the test suite makes up on any backend (test_device_hook). */
int device_error(const train_job *job, tr_backend *be, char *err, size_t err_len);
/* A GPU's first error ends the run in one line (its ops cannot return one). */
void check_device(const train_job *job, tr_backend *be);

#endif
