/*
 * sa1b-train.c - trains the compact SAM of MODEL.md: options, the training
 * loop (forward, backward, AdamW, schedule, clipping), logging to the
 * terminal and OUT/log.jsonl, checkpoints (OUT/model-STEP.safetensors,
 * OUT/state-STEP.bin, OUT/latest), resume, evaluation and the debug dump.
 *
 * Data: shards through the loader of pipeline/ (data_shards.c), or
 * deterministic synthetic batches with --synthetic-batch SEED (a debugging
 * option), both behind tr_data_source.
 */
#include <errno.h>
#include <glob.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "batch.h"
#include "checkpoint.h"
#include "data_shards.h"
#include "cli.h"
#include "model.h"
#include "optim.h"
#include "plan.h"
#include "vmlimit.h"
#include "dist.h"
#include "pngio.h"
#include "run_dir.h"
#include "tr_rng.h"

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
    uint64_t memory_limit;      /* --memory-limit: cap on the memory held (0: none) */
    int effective_batch;
    char *plan_err;             /* planning: where run() reports a failure instead of exiting */
    size_t plan_err_len;
    /* computation (issue 7 part A) */
    int accum;                  /* micro-batches per optimizer step */
    int ckpt_blocks, ckpt_decoder; /* --checkpoint-every N, --checkpoint-decoder */
    const char *precision;      /* fp32, bf16 or fp16 */
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
    unsigned char given[1024];  /* given[c]: option c was on the command line */
    char *record;               /* the run record saved in every state file (run_dir.h) */
    char *owned[256];           /* --resume: the arguments parsed again, with the run record's */
    int n_owned;
} options;

static volatile sig_atomic_t stop_requested;
/* The first SIGINT/SIGTERM stops after the step (a checkpoint is written);
 * a second ends the process at once. */
static void on_signal(int sig)
{
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_requested = 1;
}

/* Tests: SA1B_TEST_KILL=step:N raises SIGTERM after step N, save:N in the
 * middle of step N's checkpoint (between the model and the state file);
 * once (the checkpoint a stop writes may pass the same point again, where a
 * second signal would end the process at once). */
static void test_hook(const char *what, long n)
{
    static int fired;
    const char *k = getenv("SA1B_TEST_KILL");
    char w[16];
    long at;
    if (!fired && k && sscanf(k, "%15[a-z]:%ld", w, &at) == 2 && strcmp(w, what) == 0 && at == n) {
        fired = 1;
        raise(SIGTERM);
    }
}

static void usage(void)
{
    printf("Usage: %s [OPTION]... --out DIR (--data GLOB | --synthetic-batch SEED)\n"
           "Train the compact SAM of docs/MODEL.md on the CPU.\n\n"
           "Model:\n"
           "  --config NAME          tiny, small or base (default small)\n"
           "  --image-size S, --patch P, --enc-width E, --enc-depth L, --enc-heads H,\n"
           "  --dec-width C, --dec-heads h, --dec-depth D   override one hyper-parameter\n"
           "Batch:\n"
           "  --batch B              images per micro-batch (default 8)\n"
           "  --masks M              prompted masks per image (default 16)\n"
           "  --points K             point prompts per mask (default 2)\n"
           "Optimisation:\n"
           "  --steps N              training steps (default 1000)\n"
           "  --lr X                 peak learning rate (default 3e-4)\n"
           "  --warmup N             warmup steps (default min(100, steps/10))\n"
           "  --weight-decay X       AdamW decay of Linear/ConvTranspose weights (default 0.1)\n"
           "  --adam-eps X           AdamW epsilon of the update m/(sqrt(v) + eps) (default 1e-8)\n"
           "  --clip X               clip the global gradient norm at X, 0 = off (default 1)\n"
           "  --seed N               initialisation seed (default 1)\n"
           "Run:\n"
           "  --threads N            threads (default 2)\n"
           "  --backend NAME         cpu or cuda (default cpu)\n"
           "  --out DIR              log, checkpoints\n"
           "  --resume DIR           continue the run in DIR from DIR/latest with the run's settings\n"
           "  --overwrite            start afresh in an --out DIR that holds a run (removes its files)\n"
           "  --collective-timeout S under mpirun: end the job when a rank does not join a sum within S\n"
           "                         seconds (a rank died or hangs; default 300)\n"
           "  --zero N               under mpirun: 1 splits the optimizer state over the ranks (default 0)\n"
           "  --ranks N              with --plan: plan rank 0 of a job of N processes (default 1)\n"
           "  --init CKPT            start from the weights of model checkpoint CKPT (same model), step 0\n"
           "  --log-every N          progress line every N steps (default 10)\n"
           "  --ckpt-every N         checkpoint every N steps (default 500)\n"
           "  --eval-only CKPT       evaluate a model checkpoint and exit\n"
           "  --eval-batches N       batches to evaluate (default 8)\n"
           "  --export N             with --eval-only: write N PNG overlays to OUT/export/\n"
           "  --dump-step FILE       one forward/backward on the first batch, write FILE, exit\n"
           "Data:\n"
           "  --data GLOB            training shards (sa1b-shard output)\n"
           "  --val GLOB             validation shards (evaluated after training, or with --eval-only)\n"
           "  --flip P               horizontal flip probability of training images (default 0.5)\n"
           "  --loader-threads N     loader worker threads (default: automatic)\n"
           "  --synthetic-batch SEED debugging: deterministic synthetic batches\n"
           "Memory:\n"
           "  --optim NAME           adamw or adamw8bit (8-bit block-wise moments; default adamw)\n"
           "  --optim-block N        adamw8bit quantisation block, 256 or 2048 (default 256)\n"
           "  --memory-report        print the memory table by category at the end of training\n"
           "  --empty-cache-every N  give cached unused memory back every N steps (default never)\n"
           "  --plan                 predict peak memory per category (no training) and exit\n"
           "  --memory-budget SIZE   with --plan: largest micro-batch that fits SIZE (e.g. 16G)\n"
           "  --memory-limit SIZE    hold at most SIZE of memory; beyond it the run stops (exit 3)\n"
           "  --effective-batch N    with --plan --memory-budget: images per step to keep by accumulation\n"
           "Computation:\n"
           "  --accum K              micro-batches per optimizer step (gradient accumulation; default 1)\n"
           "  --checkpoint-every N   keep only every N-th encoder block's input, recompute (default 0 = off)\n"
           "  --checkpoint-decoder   keep decoder activations for one chunk of pairs only\n"
           "  --precision P          fp32, bf16 or fp16 activations and compute weights (default fp32)\n"
           "  --loss-scale-window N  fp16: double the loss scale after N clean steps (default 1000)\n"
           "  --freeze GROUPS        comma list of frozen groups: encoder, embed, blocks, blocks.I[-J], neck,\n"
           "                         prompt, decoder\n"
           "  --unfreeze LIST        STEP:GROUP,... unfreeze GROUP (or all) after STEP steps\n"
           "  --stage-batch LIST     STEP:B,... micro-batch B after STEP steps, same effective batch\n"
           "  -q, --quiet            no progress lines\n"
           "  -h, --help             this help\n"
           "  -V, --version          version\n",
           cli_prog());
}

enum {
    O_CONFIG = 256, O_S, O_P, O_E, O_L, O_H, O_C, O_h, O_D, O_STEPS, O_BATCH, O_MASKS, O_POINTS, O_LR, O_WARMUP,
    O_WD, O_EPS, O_CLIP, O_SEED, O_THREADS, O_BACKEND, O_OUT, O_RESUME, O_LOG, O_CKPT, O_EVAL, O_EVALB, O_DUMP,
    O_DATA, O_VAL, O_SYNTH, O_FLIP, O_LTHREADS, O_EXPORT, O_INIT
};
enum { O_OPTIM = 400, O_OPTIM_BLOCK, O_MEMREP, O_EMPTY_CACHE, O_PLAN, O_BUDGET, O_EFFB, O_LIMIT };
enum { O_OVERWRITE = 600, O_COLL_TIMEOUT, O_ZERO, O_RANKS };
enum { O_ACCUM = 500, O_CKPT_EVERY, O_CKPT_DEC, O_PREC, O_SCALE_WIN, O_FREEZE, O_UNFREEZE, O_STAGE_BATCH };

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    uint64_t v;
    if (cli_parse_u64(s, (uint64_t)lo, (uint64_t)hi, &v) < 0)
        cli_usage_error("%s: '%s' is not an integer in %ld..%ld", opt, s, lo, hi);
    return (long)v;
}

static double parse_dbl(const char *opt, const char *s, double lo, double hi)
{
    double v;
    if (cli_parse_double(s, &v) < 0 || !(v >= lo && v <= hi))
        cli_usage_error("%s: '%s' is not a number in %g..%g", opt, s, lo, hi);
    return v;
}

/* --unfreeze STEP:GROUP,... (stage 0) or --stage-batch STEP:B,... (1):
 * steps strictly increasing; groups are checked once the model is known. */
static void parse_stages(const char *opt, const char *arg, options *o, int batch)
{
    char buf[1024], *save = NULL;
    if (strlen(arg) >= sizeof buf || !*arg || arg[0] == ',' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
        cli_usage_error("%s: '%s' is not a list STEP:%s,...", opt, arg, batch ? "B" : "GROUP");
    snprintf(buf, sizeof buf, "%s", arg);
    int *n = batch ? &o->n_stage : &o->n_unfreeze;
    long *steps = batch ? o->stage_step : o->unfreeze_step;
    *n = 0;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(e, ':');
        if (!colon || colon == e || !colon[1]) cli_usage_error("%s: '%s' is not STEP:%s", opt, e, batch ? "B" : "GROUP");
        *colon = 0;
        if (*n >= 64) cli_usage_error("%s: more than 64 stages", opt);
        long step = parse_long(opt, e, 1, 1000000000);
        if (*n && step <= steps[*n - 1]) cli_usage_error("%s: step %ld does not come after step %ld", opt, step, steps[*n - 1]);
        steps[*n] = step;
        if (batch) {
            o->stage_batch[*n] = (int)parse_long(opt, colon + 1, 1, 4096);
        } else {
            if (strlen(colon + 1) >= sizeof o->unfreeze_group[0]) cli_usage_error("%s: group '%s' too long", opt, colon + 1);
            snprintf(o->unfreeze_group[*n], sizeof o->unfreeze_group[0], "%s", colon + 1);
        }
        (*n)++;
    }
}

static void parse_options(int argc, char **argv, options *o)
{
    static const struct option lo[] = {
        {"config", 1, 0, O_CONFIG}, {"image-size", 1, 0, O_S}, {"patch", 1, 0, O_P}, {"enc-width", 1, 0, O_E},
        {"enc-depth", 1, 0, O_L}, {"enc-heads", 1, 0, O_H}, {"dec-width", 1, 0, O_C}, {"dec-heads", 1, 0, O_h},
        {"dec-depth", 1, 0, O_D}, {"steps", 1, 0, O_STEPS}, {"batch", 1, 0, O_BATCH}, {"masks", 1, 0, O_MASKS},
        {"points", 1, 0, O_POINTS}, {"lr", 1, 0, O_LR}, {"warmup", 1, 0, O_WARMUP}, {"weight-decay", 1, 0, O_WD}, {"adam-eps", 1, 0, O_EPS},
        {"clip", 1, 0, O_CLIP}, {"seed", 1, 0, O_SEED}, {"threads", 1, 0, O_THREADS}, {"backend", 1, 0, O_BACKEND},
        {"out", 1, 0, O_OUT}, {"resume", 1, 0, O_RESUME}, {"init", 1, 0, O_INIT}, {"log-every", 1, 0, O_LOG}, {"ckpt-every", 1, 0, O_CKPT},
        {"eval-only", 1, 0, O_EVAL}, {"eval-batches", 1, 0, O_EVALB}, {"dump-step", 1, 0, O_DUMP},
        {"data", 1, 0, O_DATA}, {"val", 1, 0, O_VAL}, {"synthetic-batch", 1, 0, O_SYNTH}, {"flip", 1, 0, O_FLIP},
        {"loader-threads", 1, 0, O_LTHREADS}, {"export", 1, 0, O_EXPORT}, {"optim", 1, 0, O_OPTIM}, {"optim-block", 1, 0, O_OPTIM_BLOCK},
        {"memory-report", 0, 0, O_MEMREP}, {"empty-cache-every", 1, 0, O_EMPTY_CACHE}, {"plan", 0, 0, O_PLAN},
        {"memory-budget", 1, 0, O_BUDGET}, {"effective-batch", 1, 0, O_EFFB}, {"memory-limit", 1, 0, O_LIMIT},
        {"accum", 1, 0, O_ACCUM}, {"checkpoint-every", 1, 0, O_CKPT_EVERY}, {"checkpoint-decoder", 0, 0, O_CKPT_DEC},
        {"precision", 1, 0, O_PREC}, {"loss-scale-window", 1, 0, O_SCALE_WIN}, {"freeze", 1, 0, O_FREEZE},
        {"unfreeze", 1, 0, O_UNFREEZE}, {"stage-batch", 1, 0, O_STAGE_BATCH}, {"quiet", 0, 0, 'q'},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {"overwrite", 0, 0, O_OVERWRITE}, {"collective-timeout", 1, 0, O_COLL_TIMEOUT}, {"zero", 1, 0, O_ZERO}, {"ranks", 1, 0, O_RANKS},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->config_name = "small";
    o->steps = 1000, o->batch = 8, o->masks = 16, o->points = 2, o->lr = 3e-4, o->weight_decay = 0.1, o->clip = 1.0, o->adam_eps = 1e-8;
    o->warmup = -1, o->seed = 1, o->threads = 2, o->backend = "cpu", o->log_every = 10, o->ckpt_every = 500;
    o->eval_batches = 8, o->flip = 0.5;
    o->collective_timeout = 300, o->world = 1;
    o->optim = "adamw", o->optim_block = 256;
    o->accum = 1, o->precision = "fp32", o->scale_window = 1000;
    int ov[8], have[8] = {0};
    int c;
    /* first pass: the preset, so that single overrides apply on top of it */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) o->config_name = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0) o->config_name = argv[i] + 9;
    }
    while ((c = getopt_long(argc, argv, "qhV", lo, NULL)) != -1) {
        if (c >= 0 && c < (int)sizeof o->given) o->given[c] = 1;
        switch (c) {
        case O_CONFIG: o->config_name = optarg; break;
        case O_S: case O_P: case O_E: case O_L: case O_H: case O_C: case O_h: case O_D:
            ov[c - O_S] = (int)parse_long(lo[c - O_CONFIG].name, optarg, c == O_L ? 0 : 1, 4096);
            have[c - O_S] = 1;
            break;
        case O_STEPS: o->steps = parse_long("--steps", optarg, 1, 1000000000); break;
        case O_BATCH: o->batch = (int)parse_long("--batch", optarg, 1, 4096); break;
        case O_MASKS: o->masks = (int)parse_long("--masks", optarg, 1, 4096); break;
        case O_POINTS: o->points = (int)parse_long("--points", optarg, 1, 256); break;
        case O_LR: o->lr = parse_dbl("--lr", optarg, 0, 10); break;
        case O_WARMUP: o->warmup = parse_long("--warmup", optarg, 0, 1000000000); break;
        case O_WD: o->weight_decay = parse_dbl("--weight-decay", optarg, 0, 10); break;
        case O_EPS: o->adam_eps = parse_dbl("--adam-eps", optarg, 1e-30, 1); break;
        case O_CLIP: o->clip = parse_dbl("--clip", optarg, 0, 1e9); break;
        case O_SEED: o->seed = (uint64_t)parse_long("--seed", optarg, 0, 2147483647L); break;
        case O_THREADS: o->threads = (int)parse_long("--threads", optarg, 1, 256); break;
        case O_BACKEND: o->backend = optarg; break;
        case O_OUT: o->out = optarg; break;
        case O_RESUME: o->resume = optarg; break;
        case O_INIT: o->init = optarg; break;
        case O_LOG: o->log_every = parse_long("--log-every", optarg, 1, 1000000000); break;
        case O_CKPT: o->ckpt_every = parse_long("--ckpt-every", optarg, 1, 1000000000); break;
        case O_EVAL: o->eval_only = optarg; break;
        case O_EVALB: o->eval_batches = parse_long("--eval-batches", optarg, 1, 1000000); break;
        case O_DUMP: o->dump_step = optarg; break;
        case O_DATA: o->data = optarg; break;
        case O_VAL: o->val = optarg; break;
        case O_SYNTH:
            o->synthetic = 1;
            o->synthetic_seed = (uint64_t)parse_long("--synthetic-batch", optarg, 0, 2147483647L);
            break;
        case O_FLIP: o->flip = parse_dbl("--flip", optarg, 0, 1); break;
        case O_LTHREADS: o->loader_threads = (int)parse_long("--loader-threads", optarg, 1, 256); break;
        case O_EXPORT: o->export_n = parse_long("--export", optarg, 0, 1000000); break;
        case O_OPTIM:
            if (strcmp(optarg, "adamw") != 0 && strcmp(optarg, "adamw8bit") != 0)
                cli_usage_error("--optim: '%s' is not adamw or adamw8bit", optarg);
            o->optim = optarg;
            break;
        case O_OPTIM_BLOCK:
            o->optim_block = (int)parse_long("--optim-block", optarg, 256, 2048);
            if (o->optim_block != 256 && o->optim_block != 2048) cli_usage_error("--optim-block: '%s' is not 256 or 2048", optarg);
            break;
        case O_MEMREP: o->memory_report = 1; break;
        case O_EMPTY_CACHE: o->empty_cache_every = parse_long("--empty-cache-every", optarg, 1, 1000000000); break;
        case O_PLAN: o->plan = 1; break;
        case O_BUDGET:
            if (tr_parse_bytes(optarg, &o->memory_budget) < 0 || o->memory_budget == 0)
                cli_usage_error("--memory-budget: '%s' is not a size like 512M or 16G", optarg);
            break;
        case O_LIMIT:
            if (tr_parse_bytes(optarg, &o->memory_limit) < 0 || o->memory_limit == 0)
                cli_usage_error("--memory-limit: '%s' is not a size like 512M or 16G", optarg);
            break;
        case O_EFFB: o->effective_batch = (int)parse_long("--effective-batch", optarg, 1, 1 << 20); break;
        case O_ACCUM: o->accum = (int)parse_long("--accum", optarg, 1, 4096); break;
        case O_CKPT_EVERY: o->ckpt_blocks = (int)parse_long("--checkpoint-every", optarg, 0, TR_MAX_L); break;
        case O_CKPT_DEC: o->ckpt_decoder = 1; break;
        case O_PREC: o->precision = optarg; break;
        case O_SCALE_WIN: o->scale_window = parse_long("--loss-scale-window", optarg, 1, 1000000000); break;
        case O_FREEZE: o->freeze = optarg; break;
        case O_UNFREEZE: parse_stages("--unfreeze", optarg, o, 0); break;
        case O_STAGE_BATCH: parse_stages("--stage-batch", optarg, o, 1); break;
        case O_OVERWRITE: o->overwrite = 1; break;
        case O_ZERO: o->zero = (int)parse_long("--zero", optarg, 0, 1); break;
        case O_RANKS: o->plan_ranks = (int)parse_long("--ranks", optarg, 1, 65536); break;
        case O_COLL_TIMEOUT: o->collective_timeout = (double)parse_long("--collective-timeout", optarg, 1, 86400); break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(); exit(0);
        case 'V': cli_version(); exit(0);
        default: cli_usage_error("unknown option");
        }
    }
    if (optind < argc) cli_usage_error("unexpected argument '%s'", argv[optind]);
    if (tr_config_preset(o->config_name, &o->cfg) < 0)
        cli_usage_error("--config: '%s' is not tiny, small or base", o->config_name);
    int *dst[8] = {&o->cfg.S, &o->cfg.P, &o->cfg.E, &o->cfg.L, &o->cfg.H, &o->cfg.C, &o->cfg.h, &o->cfg.D};
    for (int i = 0; i < 8; i++)
        if (have[i]) *dst[i] = ov[i];
    char err[200];
    if (tr_config_check(&o->cfg, err, sizeof err) < 0) cli_usage_error("model: %s", err);
    if (strcmp(o->backend, "cpu") != 0 && strcmp(o->backend, "cuda") != 0)
        cli_usage_error("--backend: '%s' is not cpu or cuda", o->backend);
    if (o->resume && !o->out) o->out = o->resume;
    if (o->plan && (o->dump_step || o->eval_only || o->resume))
        cli_usage_error("--plan predicts a training run: not with --dump-step, --eval-only or --resume");
    if (o->init && (o->resume || o->eval_only || o->plan))
        cli_usage_error("--init starts a run from given weights: not with --resume, --eval-only or --plan");
    if ((o->memory_budget || o->effective_batch) && !o->plan) cli_usage_error("--memory-budget and --effective-batch need --plan");
    if (o->memory_limit && o->plan) cli_usage_error("--memory-limit limits a run; the planner takes --memory-budget");
    if (!o->plan && !o->dump_step && !o->eval_only && !o->out) cli_usage_error("--out DIR is required for training");
    if (o->export_n && (!o->eval_only || !o->out)) cli_usage_error("--export needs --eval-only and --out DIR");
    if (strcmp(o->precision, "fp32") && strcmp(o->precision, "bf16") && strcmp(o->precision, "fp16"))
        cli_usage_error("--precision: '%s' is not fp32, bf16 or fp16", o->precision);
    if (o->ckpt_blocks > o->cfg.L) cli_usage_error("--checkpoint-every: %d is more than the %d encoder blocks",
                                                   o->ckpt_blocks, o->cfg.L);
    if (o->freeze) {
        char buf[512], *save = NULL;
        if (strlen(o->freeze) >= sizeof buf || !*o->freeze || o->freeze[strlen(o->freeze) - 1] == ',' ||
            strstr(o->freeze, ",,") || o->freeze[0] == ',')
            cli_usage_error("--freeze: '%s' is not a comma list of groups", o->freeze);
        snprintf(buf, sizeof buf, "%s", o->freeze);
        for (char *g = strtok_r(buf, ",", &save); g; g = strtok_r(NULL, ",", &save))
            if (!tr_model_group_valid(g, o->cfg.L) || !strcmp(g, "all"))
                cli_usage_error("--freeze: '%s' is not a group (encoder, embed, blocks, blocks.I, blocks.I-J with "
                                "J < %d, neck, prompt, decoder)", g, o->cfg.L);
    }
    for (int i = 0; i < o->n_unfreeze; i++)
        if (!tr_model_group_valid(o->unfreeze_group[i], o->cfg.L))
            cli_usage_error("--unfreeze: '%s' is not a group (all, encoder, embed, blocks, blocks.I, blocks.I-J with "
                            "J < %d, neck, prompt, decoder)", o->unfreeze_group[i], o->cfg.L);
    for (int i = 0; i < o->n_stage; i++)
        if ((o->batch * o->accum) % o->stage_batch[i])
            cli_usage_error("--stage-batch: micro-batch %d does not divide the effective batch %d (--batch x --accum)",
                            o->stage_batch[i], o->batch * o->accum);
    if (o->n_unfreeze && !o->freeze) cli_usage_error("--unfreeze needs --freeze");
}

/* The loader's worker threads for --data (--loader-threads or all cores but one). */
static int src_workers(const options *o)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return o->loader_threads ? o->loader_threads : (cpus > 2 ? (int)cpus - 1 : 1);
}

/* Opens a data source: shards matching glob through the loader, else the
 * synthetic batches; points K and epochs as given (eval: K 1, one epoch). */
static void open_source(const options *o, const tr_config *cfg, tr_data_source *src, tr_mem *mem,
                        const char *what, const char *glob, int K, uint64_t max_epochs, double flip)
{
    char err[512];
    int R = 4 * (cfg->S / cfg->P);
    if (o->plan) { /* batches counted, never filled; the loader holds threads + 2 in flight */
        int n = glob ? src_workers(o) + 2 : 1;
        if (tr_plan_source_open(src, mem, o->batch, o->masks, K, cfg->S, R, n) < 0)
            cli_die(CLI_EXIT_FATAL, "out of memory for the planner");
        return;
    }
    if (glob) {
        int train = glob == o->data; /* training data: this rank's slice; evaluation: rank 0 reads it all */
        tr_shard_options so = {.glob = glob, .B = o->batch, .M = o->masks, .K = K, .S = cfg->S, .R = R,
                               .seed = o->seed, .max_epochs = max_epochs, .flip_prob = flip,
                               .stored_point = o->eval_only != NULL, .threads = o->loader_threads, .mem = mem,
                               .rank = train ? o->rank : 0, .world = train ? o->world : 1};
        if (tr_shard_source_open(src, &so, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s: %s", what, err);
        return;
    }
    if (o->synthetic) {
        if (tr_synthetic_source_open_rank(src, mem, o->batch, o->masks, K, cfg->S, R, o->synthetic_seed, o->rank,
                                          o->world) < 0)
            cli_die(CLI_EXIT_FATAL, "out of memory for the synthetic batches");
        return;
    }
    cli_usage_error("no data: give %s GLOB or --synthetic-batch SEED", what);
}

static int write_latest(const char *dir, long step)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/latest", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "%ld\n", step);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        return -1;
    }
    if (fclose(f) != 0) return -1;
    return rename(tmp, path);
}

static long read_latest(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (!f) cli_die(CLI_EXIT_FATAL, "cannot resume from '%s': %s", path, strerror(errno));
    long step = -1;
    if (fscanf(f, "%ld", &step) != 1 || step < 0) step = -1;
    fclose(f);
    if (step < 0) cli_die(CLI_EXIT_FATAL, "'%s': not a step number", path);
    return step;
}

/* On resume: drop log records of steps after the checkpoint (a run killed
 * between checkpoints logged steps that will now be redone). */
static void trim_log(const char *path, long step)
{
    FILE *in = fopen(path, "r");
    if (!in) return;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        long s = -1;
        if (sscanf(line, "{\"step\": %ld", &s) == 1 && s > step) continue;
        fputs(line, out);
    }
    free(line);
    fclose(in);
    if (fclose(out) == 0) rename(tmp, path);
}

/* The state file of step for this rank: state-STEP.bin, or with --zero 1
 * under mpirun state-STEP.rRANK.bin for ranks > 0 (each its part). */
static void state_path(const options *o, const char *dir, long step, char *path, size_t n)
{
    if (o->zero && o->world > 1 && o->rank) snprintf(path, n, "%s/state-%ld.r%d.bin", dir, step, o->rank);
    else snprintf(path, n, "%s/state-%ld.bin", dir, step);
}

static void save_checkpoint(const options *o, tr_model *m, tr_optim *opt, tr_train_state *st,
                            tr_data_source *src)
{
    char path[4096], err[512];
    int parts = o->zero && o->world > 1; /* each rank writes its part of the optimizer state */
    if (o->rank && !parts) return;       /* rank 0 writes (the ranks hold the same weights and state) */
    if (src->position) src->position(src->ctx, &st->data_epoch, &st->data_consumed);
    if (o->rank == 0) {
        snprintf(path, sizeof path, "%s/model-%ld.safetensors", o->out, st->step);
        if (tr_ckpt_save_model(m, path, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        test_hook("save", st->step);
    }
    state_path(o, o->out, st->step, path, sizeof path);
    st->run = o->record;
    if (tr_ckpt_save_state(m, opt, st, path, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    if (parts && tr_dist_barrier(o->dist, err, sizeof err) < 0) { /* every part written before latest names it */
        cli_warn("rank %d: %s", o->rank, err);
        tr_dist_abort(o->dist, CLI_EXIT_FATAL);
    }
    if (o->rank == 0 && write_latest(o->out, st->step) < 0)
        cli_die(CLI_EXIT_FATAL, "cannot write '%s/latest': %s", o->out, strerror(errno));
}

/* --zero 1: rank r keeps the optimizer state of the parameters in floats
 * [lo[r], lo[r+1]) of the weights (whole parameters, about equal shares, in
 * the layout's order) and gathers the others' weights after each update. */
typedef struct zero_part {
    uint8_t *owned; /* [n_params]; NULL: every parameter (no split) */
    size_t *lo;     /* [world + 1] */
} zero_part;

static void zero_split(const tr_model *m, int rank, int world, zero_part *z)
{
    z->owned = calloc((size_t)m->n_params + 1, 1);
    z->lo = calloc((size_t)world + 1, sizeof *z->lo);
    if (!z->owned || !z->lo) cli_die(CLI_EXIT_FATAL, "out of memory");
    int r = 0;
    for (int i = 0; i < m->n_params; i++) {
        size_t off = m->pinfo[i].offset;
        int want = (int)((double)off * world / (double)m->n_param_floats); /* the rank whose share it starts in */
        while (r < want && r < world - 1) z->lo[++r] = off;
        z->owned[i] = r == rank;
    }
    while (r < world) z->lo[++r] = m->n_param_floats;
}

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
    char path[4200], tmp[4300], err[256];
    snprintf(path, sizeof path, "%s/%05ld-iou%03d.png", dir, idx, (int)lround(iou * 100));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", path, strerror(errno));
    cli_temp_set(tmp); /* removed if a signal ends the evaluation */
    int rc = pngio_write(f, pix, (uint32_t)(2 * W), (uint32_t)H, 3, err, sizeof err);
    if (fclose(f) != 0 || rc != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        cli_die(CLI_EXIT_FATAL, "cannot write '%s': %s", path, rc ? err : strerror(errno));
    }
    cli_temp_set(NULL);
    free(pix);
}

static int evaluate(const options *o, tr_model *m, tr_data_source *src, int whole)
{
    char exdir[4096] = "";
    long exported = 0;
    if (o->export_n) {
        snprintf(exdir, sizeof exdir, "%s/export", o->out);
        if ((mkdir(o->out, 0777) != 0 && errno != EEXIST) || (mkdir(exdir, 0777) != 0 && errno != EEXIST))
            cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", exdir, strerror(errno));
    }
    char err[512];
    int hist[10] = {0};
    double sum = 0;
    long n = 0;
    int R = 4 * (m->cfg.S / m->cfg.P), RR = R * R;
    /* the logits, in host memory (downloaded, or unpacked from a 16-bit stash) */
    float *buf = tr_mem_alloc(m->be->host_mem, TR_MEM_WORK, (size_t)m->B * m->M * RR * sizeof(float));
    if (!buf) cli_die(CLI_EXIT_FATAL, "out of memory");
    const float *logits = buf;
    for (long i = 0; whole || i < o->eval_batches; i++) {
        tr_batch *b;
        int rc = src->next(src->ctx, &b, err, sizeof err);
        if (rc < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        if (rc == 0) break;
        if (tr_model_forward(m, b, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        tr_model_get_logits(m, buf);
        for (int p = 0; p < m->B * m->M; p++) {
            if (!b->valid[p]) continue;
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
        src->release(src->ctx, b);
    }
    tr_mem_free(m->be->host_mem, buf);
    printf("{\"miou\": %.6f, \"masks\": %ld, \"histogram\": [", n ? sum / n : 0.0, n);
    for (int i = 0; i < 10; i++) printf("%s%d", i ? ", " : "", hist[i]);
    printf("]}\n");
    return 0;
}

static int run(const options *op, tr_backend *be);
static void prepare_out(const options *o);
static long read_latest(const char *dir);

static int precision_of(const char *name)
{
    return !strcmp(name, "bf16") ? TR_PREC_BF16 : !strcmp(name, "fp16") ? TR_PREC_FP16 : TR_PREC_FP32;
}

/* The optimizer's state follows the model's trainable set (and with
 * --zero 1 this rank's part of the parameters: owned, NULL for all). */
static void sync_trainable(tr_model *m, tr_optim *opt, const uint8_t *owned)
{
    uint8_t *t = malloc((size_t)m->n_params + 1);
    if (!t) cli_die(CLI_EXIT_FATAL, "out of memory");
    for (int i = 0; i < m->n_params; i++) t[i] = !m->frozen[i] && (!owned || owned[i]);
    if (tr_optim_set_trainable(opt, m, t) < 0) cli_die(CLI_EXIT_FATAL, "out of memory for the optimizer");
    free(t);
}

static void set_frozen(tr_model *m, const char *group, int frozen)
{
    char err[300];
    if (tr_model_freeze(m, group, frozen, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
}

/* --stage-batch: reopens the data with micro-batch B where the stream is. */
static void change_batch(const options *o, const tr_config *cfg, tr_model *m, tr_data_source *src, tr_mem *mem, int B)
{
    char err[300];
    uint64_t ep = 0, cons = 0;
    if (src->position) src->position(src->ctx, &ep, &cons);
    src->close(src->ctx);
    options ob = *o;
    ob.batch = B;
    open_source(&ob, cfg, src, mem, "--data", o->data, o->points, 0, o->flip);
    if (src->seek && src->seek(src->ctx, ep, cons) < 0) cli_die(CLI_EXIT_FATAL, "cannot continue the data stream");
    if (tr_model_set_batch(m, B, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--stage-batch: %s", err);
}

/* --plan: the training path of run() on the meta backend for a plan point. */
static int plan_run(void *ctx, tr_backend *be, const tr_plan_point *pt, char *err, size_t err_len)
{
    options o = *(const options *)ctx;
    o.batch = pt->batch;
    o.accum = pt->accum, o.precision = pt->precision;
    o.ckpt_blocks = pt->checkpoint_every < o.cfg.L ? pt->checkpoint_every : o.cfg.L;
    o.ckpt_decoder = pt->checkpoint_decoder;
    o.n_stage = 0; /* the planner measures the configured micro-batch */
    o.steps = 3, o.quiet = 1, o.memory_report = 0, o.log_every = 1;
    o.plan_err = err, o.plan_err_len = err_len;
    err[0] = 0;
    return run(&o, be) == 0 ? 0 : -1;
}

static int plan_main(const options *o)
{
    const tr_sizes *sizes = tr_backend_sizes(o->backend);
    if (!sizes) cli_die(CLI_EXIT_FATAL, "--plan --backend %s: that backend is not available in this version", o->backend);
    tr_plan_request req = {.base = {.batch = o->batch, .accum = o->accum, .precision = o->precision,
                                    .checkpoint_every = o->ckpt_blocks, .checkpoint_decoder = o->ckpt_decoder,
                                    .sizes = sizes},
                           .budget = o->memory_budget, .effective_batch = o->effective_batch};
    static const char *const precs[] = {"fp32", "bf16", "fp16"};
    static const int cks[] = {0, 1};
    req.precisions = precs, req.n_precisions = 3;
    req.checkpoints = cks, req.n_checkpoints = 2;
    req.checkpoint_decoder = 1;
    char err[512];
    if (tr_plan_main(stdout, &req, plan_run, (void *)o, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--plan: %s", err);
    return 0;
}

/* The planner's point for the run's configuration (its micro-batch). */
static tr_plan_point plan_point(const options *o)
{
    tr_plan_point pt = {.batch = o->batch, .accum = o->accum, .precision = o->precision,
                        .checkpoint_every = o->ckpt_blocks, .checkpoint_decoder = o->ckpt_decoder,
                        .sizes = tr_backend_sizes(o->backend)};
    return pt;
}

/* ", --batch N fits SIZE" from the planner, or why not, into buf. */
static void suggest_batch(const options *o, uint64_t budget, char *buf, size_t n)
{
    char err[256], bud[32];
    tr_mem_format_bytes(bud, sizeof bud, budget);
    tr_plan_point pt = plan_point(o);
    options po = *o;
    po.plan = 1;
    int best = tr_plan_largest_batch(plan_run, &po, &pt, budget, o->batch, NULL, err, sizeof err);
    if (best > 0)
        snprintf(buf, n, "the planner's largest micro-batch for %s is --batch %d (--plan --memory-budget %s shows more)",
                 bud, best, bud);
    else if (best == 0)
        snprintf(buf, n, "no micro-batch of this configuration fits %s (--plan --memory-budget %s lists precisions and checkpointing that do)",
                 bud, bud);
    else
        snprintf(buf, n, "the planner failed: %s", err);
}

/* A failure of the model's set-up or of a step: out of memory gets the
 * planner's suggestion for the memory there was; exits 3. */
static void die_memory(const options *o, tr_backend *be, const char *err)
{
    if (o->plan || strncmp(err, "out of memory", 13) != 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    /* what there was: the limit, or what is held plus what the system still has */
    uint64_t budget = o->memory_limit ? o->memory_limit : be->mem.reserved + tr_vm_available();
    char sug[400];
    suggest_batch(o, budget, sug, sizeof sug);
    cli_die(CLI_EXIT_FATAL, "%s%s; %s", err, o->memory_limit ? " under --memory-limit" : "", sug);
}

/* Before creating the backend: room in a limited address space for its
 * threads' BLAS buffers, which the BLAS cannot be trusted to fail on. */
static void check_thread_room(const options *o)
{
    uint64_t lim = tr_vm_limit(), now = tr_vm_size();
    uint64_t need = now + (uint64_t)o->threads * TR_VM_PER_THREAD;
    if (!lim || need <= lim) return;
    char l[32], n[32];
    tr_mem_format_bytes(l, sizeof l, lim), tr_mem_format_bytes(n, sizeof n, need);
    cli_die(CLI_EXIT_FATAL, "the address-space limit (ulimit -v) of %s is too small for %d threads: they need %s mapped "
            "before any training (raise the limit or use fewer --threads)", l, o->threads, n);
}

/* Bytes of the shard files matching glob (the loader maps them whole). */
static uint64_t glob_bytes(const char *pattern)
{
    glob_t g;
    uint64_t n = 0;
    if (glob(pattern, 0, NULL, &g) != 0) return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) == 0) n += (uint64_t)sb.st_size;
    }
    globfree(&g);
    return n;
}

/* A training run in a limited address space, once the backend has mapped
 * its threads' buffers and before the model: room for the planner's
 * prediction plus 10%, the loader's workers and the shards it maps, or one
 * line and exit 3 with the micro-batch that has room (the planner's own
 * run needs as much address space as it predicts, so this comes first). */
static void check_address_space(const options *o, tr_backend *be)
{
    uint64_t lim = tr_vm_limit();
    if (!lim || o->eval_only || o->dump_step) return;
    int n_workers = o->data ? src_workers(o) : 0;
    char err[256];
    tr_plan_point pt = plan_point(o);
    tr_mem_stats st;
    options po = *o;
    po.plan = 1;
    uint64_t now = tr_vm_size(), held = be->mem.reserved;
    /* the planner's run maps what it predicts: when that fails, the run does not fit */
    int planned = tr_plan_measure(plan_run, &po, &pt, &st, err, sizeof err) == 0;
    if (!planned && strncmp(err, "out of memory", 13) != 0) cli_die(CLI_EXIT_FATAL, "--plan: %s", err);
    uint64_t other = (now > held ? now - held : 0) + (uint64_t)n_workers * TR_VM_PER_WORKER + ((uint64_t)64 << 20) +
                     (o->data ? glob_bytes(o->data) : 0) + (o->val ? glob_bytes(o->val) : 0);
    uint64_t need = planned ? other + st.reserved_peak + st.reserved_peak / 10 : 0;
    if (planned && need <= lim) return;
    char l[32], n[32], sug[400];
    tr_mem_format_bytes(l, sizeof l, lim), tr_mem_format_bytes(n, sizeof n, need);
    if (lim > other) suggest_batch(o, (lim - other) / 11 * 10, sug, sizeof sug);
    else snprintf(sug, sizeof sug, "the threads and data alone need that much");
    cli_die(CLI_EXIT_FATAL, "the address-space limit (ulimit -v) of %s is too small for this run, which needs %s%s; %s", l,
            planned ? "about " : "more", planned ? n : "", sug);
}

/* ---- the output folder (issue 19) ---------------------------------------- */

static int same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return strcmp(a, b) == 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Before anything is touched: a training run never starts over a run in
 * --out unless it resumes that run or --overwrite says to start afresh. */
static void check_out(const options *o)
{
    if (o->overwrite && o->resume) cli_usage_error("--overwrite starts a run afresh: not with --resume");
    if (o->overwrite && (o->plan || o->dump_step || o->eval_only))
        cli_usage_error("--overwrite applies to a training run: not with --plan, --dump-step or --eval-only");
    if (o->plan || o->dump_step || o->eval_only || !o->out || o->overwrite) return;
    if (o->resume && same_dir(o->out, o->resume)) return;
    struct stat st;
    char parent[4096];
    const char *slash = strrchr(o->out, '/');
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - o->out) : 1, slash ? o->out : ".");
    if (stat(o->out, &st) != 0 && slash && slash != o->out && (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)))
        cli_die(CLI_EXIT_FATAL, "output folder '%s' does not exist (--out %s is created in it)", parent, o->out);
    char what[300];
    int held = tr_run_dir_holds_run(o->out, what, sizeof what);
    if (held < 0) cli_die(CLI_EXIT_FATAL, "cannot read output folder '%s': %s", o->out, what);
    if (held)
        cli_die(CLI_EXIT_USAGE, "output folder '%s' holds %s: continue it with --resume %s, or start afresh with "
                "--overwrite (removes its log and checkpoints)", o->out, what, o->out);
}

/* Creates --out, or with --overwrite empties it of the earlier run's files. */
static void prepare_out(const options *o)
{
    char err[4400];
    if (mkdir(o->out, 0777) != 0 && errno != EEXIST) cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", o->out, strerror(errno));
    if (o->overwrite && tr_run_dir_clear(o->out, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--overwrite: %s", err);
}

/* ---- the run record (issue 19) ------------------------------------------- */

/* The settings that shape the model, the data and the schedule, saved in
 * every state file and restored by --resume.  fixed: a flag given on resume
 * must agree with the run; otherwise (steps, data paths, checkpointing,
 * logging) a given flag is taken and an absent one restored. */
enum { RF_INT, RF_LONG, RF_U64, RF_DBL, RF_STR, RF_UNFREEZE, RF_STAGES };
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
    RUN_FIELD("precision", O_PREC, RF_STR, 1, precision), RUN_FIELD("zero", O_ZERO, RF_INT, 1, zero),
    RUN_FIELD("loss_scale_window", O_SCALE_WIN, RF_LONG, 1, scale_window),
    RUN_FIELD("freeze", O_FREEZE, RF_STR, 1, freeze), RUN_FIELD("unfreeze", O_UNFREEZE, RF_UNFREEZE, 1, n_unfreeze),
    RUN_FIELD("stage_batch", O_STAGE_BATCH, RF_STAGES, 1, n_stage),
    RUN_FIELD("steps", O_STEPS, RF_LONG, 0, steps), RUN_FIELD("data", O_DATA, RF_STR, 0, data),
    RUN_FIELD("val", O_VAL, RF_STR, 0, val), RUN_FIELD("checkpoint_every", O_CKPT_EVERY, RF_INT, 0, ckpt_blocks),
    RUN_FIELD("checkpoint_decoder", O_CKPT_DEC, RF_INT, 0, ckpt_decoder),
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

/* "--enc-depth" for the key "enc_depth" */
static const char *field_flag(const run_field *f, char *buf, size_t len)
{
    snprintf(buf, len, "--%s", f->key);
    for (char *c = buf; *c; c++)
        if (*c == '_') *c = '-';
    return buf;
}

static void make_record(options *o)
{
    char v[4200];
    if (o->warmup < 0) o->warmup = o->steps / 10 < 100 ? o->steps / 10 : 100; /* what the optimizer takes */
    int rc = 0;
    for (size_t i = 0; i < sizeof run_fields / sizeof *run_fields; i++) {
        field_text(o, &run_fields[i], v, sizeof v);
        rc |= tr_run_rec_add(&o->record, run_fields[i].key, v);
    }
    if (o->synthetic) {
        snprintf(v, sizeof v, "%" PRIu64, o->synthetic_seed);
        rc |= tr_run_rec_add(&o->record, "synthetic_batch", v);
    }
    snprintf(v, sizeof v, "%d", o->world); /* data-parallel processes: --batch is per rank */
    rc |= tr_run_rec_add(&o->record, "world", v);
    if (rc) cli_die(CLI_EXIT_FATAL, "out of memory");
}

/* Appends "--flag value" (value NULL: the flag alone) to the argument list
 * the run is parsed from again. */
static void push_arg(options *o, const char *flag, const char *value)
{
    for (int k = 0; k < (value ? 2 : 1); k++) {
        if (o->n_owned == (int)(sizeof o->owned / sizeof *o->owned)) cli_die(CLI_EXIT_FATAL, "run record too long");
        if (!(o->owned[o->n_owned++] = strdup(k ? value : flag))) cli_die(CLI_EXIT_FATAL, "out of memory");
    }
}

/* --resume DIR: the options are parsed again from the command line plus,
 * for every setting of the run's record that it does not give, "--flag
 * value" (so that a record is checked like a command line); a given one that
 * contradicts the run is refused.  A state written before records existed
 * resumes with the options as given. */
static void restore_run(options *o, int argc, char **argv)
{
    char path[4200], err[512], *rec = NULL, v[4200], mine[4200], flag[40];
    snprintf(path, sizeof path, "%s/state-%ld.bin", o->resume, read_latest(o->resume));
    if (tr_ckpt_read_run(path, &rec, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "cannot resume: %s", err);
    if (!rec) return;
    int world = tr_run_rec_get(rec, "world", v, sizeof v) ? atoi(v) : 1;
    if (world != o->world)
        cli_die(CLI_EXIT_USAGE, "the run in '%s' was trained by %d process%s and this job has %d: resume it with "
                "the same number (mpirun -np %d; --batch is per process)", o->resume, world, world == 1 ? "" : "es",
                o->world, world);
    options r = *o; /* the options parsed with the record's settings added */
    r.n_owned = 0;
    for (int i = 0; i < argc; i++) push_arg(&r, argv[i], NULL);
    for (size_t i = 0; i < sizeof run_fields / sizeof *run_fields; i++) {
        const run_field *f = &run_fields[i];
        if (!tr_run_rec_get(rec, f->key, v, sizeof v)) continue; /* an older record: the option as given */
        field_flag(f, flag, sizeof flag);
        if (f->opt == O_DATA && *v && o->given[O_SYNTH])
            cli_die(CLI_EXIT_USAGE, "--synthetic-batch %" PRIu64 " contradicts the run in '%s', which has --data %s: "
                    "leave --synthetic-batch out to continue it", o->synthetic_seed, o->resume, v);
        field_text(o, f, mine, sizeof mine);
        if (o->given[f->opt] && f->fixed && strcmp(mine, v) != 0)
            cli_die(CLI_EXIT_USAGE, "%s %s contradicts the run in '%s', which has %s %s: leave %s out to continue it",
                    flag, *mine ? mine : "(none)", o->resume, flag, *v ? v : "(none)", flag);
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
            cli_die(CLI_EXIT_USAGE, "%s %s contradicts the run in '%s', which has --synthetic-batch %s: leave %s out "
                    "to continue it", o->given[O_DATA] ? "--data" : "--synthetic-batch", o->given[O_DATA] ? o->data : mine_s,
                    o->resume, v, o->given[O_DATA] ? "--data" : "--synthetic-batch");
        if (!o->given[O_SYNTH]) push_arg(&r, "--synthetic-batch", v);
    }
    free(rec);
    int n = r.n_owned;
    char **args = malloc(((size_t)n + 1) * sizeof *args);
    if (!args) cli_die(CLI_EXIT_FATAL, "out of memory");
    memcpy(args, r.owned, (size_t)n * sizeof *args);
    args[n] = NULL;
    optind = 0; /* getopt from the start */
    parse_options(n, args, o);
    free(args);
    memcpy(o->owned, r.owned, sizeof o->owned); /* the strings the options point into */
    o->n_owned = r.n_owned;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    options o;
    char err[512];
    parse_options(argc, argv, &o);
    /* the ranks of a job started by mpirun (one process alone otherwise) */
    tr_dist *dist = tr_dist_open(&argc, &argv, o.collective_timeout, err, sizeof err);
    if (!dist) cli_die(CLI_EXIT_FATAL, "%s", err);
    int rank = tr_dist_rank(dist), world = tr_dist_world(dist);
    if (world > 1 && (o.plan || o.eval_only || o.dump_step))
        cli_usage_error("--plan, --eval-only and --dump-step run in one process, not under mpirun with %d", world);
    check_out(&o);
    o.world = world; /* (restore_run compares the run's) */
    if (o.resume) restore_run(&o, argc, argv);
    o.dist = dist, o.rank = rank, o.world = world;
    if (rank) o.quiet = 1; /* rank 0 reports */
    if (o.plan) {
        o.world = o.plan_ranks ? o.plan_ranks : 1; /* the plan of rank 0 of such a job (--zero 1) */
        return plan_main(&o);
    }
    if (o.plan_ranks) cli_usage_error("--ranks plans a job: it needs --plan (mpirun -np N runs one)");
    if (!o.eval_only && !o.dump_step) make_record(&o);
    if (strcmp(o.backend, "cuda") == 0)
        cli_die(CLI_EXIT_FATAL, "--backend cuda: the CUDA backend is not available in this version yet");
    check_thread_room(&o);
    tr_backend *be = tr_backend_create(o.backend, o.threads, err, sizeof err);
    if (!be) cli_die(CLI_EXIT_FATAL, "%s", err);
    be->mem.limit = o.memory_limit;
    check_address_space(&o, be);
    /* the startup line comes from run(), once the model and the data are set up */
    int rc = run(&o, be);
    tr_backend_free(be);
    tr_dist_close(dist);
    free(o.record);
    for (int i = 0; i < o.n_owned; i++) free(o.owned[i]);
    return rc;
}

static void die_memory(const options *o, tr_backend *be, const char *err);

/* Everything after the backend: a real run, or the planner's run of the
 * same path on the meta backend (o.plan: no files, no initialisation
 * arithmetic, failures reported in o.plan_err instead of exiting). */
static int run(const options *op, tr_backend *be)
{
    options o = *op;
    char err[512];
    tr_config cfg = o.cfg;
    if (o.eval_only) o.points = 1; /* one positive point per mask: the SA-1B point when the shard has it */
    if (o.eval_only && tr_ckpt_read_config(o.eval_only, &cfg, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    tr_model m;
    int prec = precision_of(o.precision);
    tr_model_opts mo = {.ckpt_every = o.ckpt_blocks, .ckpt_decoder = o.ckpt_decoder, .precision = prec};
    const char *frz = o.eval_only || o.dump_step ? NULL : o.freeze;
    if (tr_model_init_ex(&m, be, &cfg, o.batch, o.masks, o.points, o.eval_only ? NULL : &mo, frz, err, sizeof err) < 0) {
        if (o.plan) return snprintf(o.plan_err, o.plan_err_len, "%s", err), -1;
        die_memory(&o, be, err);
    }
    if (!o.plan && tr_model_init_params(&m, o.seed) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    if (o.init && tr_ckpt_load_model(&m, o.init, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
    tr_data_source src = {0};

    if (o.eval_only) {
        if (tr_ckpt_load_model(&m, o.eval_only, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        open_source(&o, &cfg, &src, be->host_mem, "--val", o.val, o.points, 1, 0.0);
        evaluate(&o, &m, &src, o.val != NULL);
        src.close(src.ctx);
        tr_model_free(&m);
        return 0;
    }
    open_source(&o, &cfg, &src, be->host_mem, "--data", o.data, o.points, 0, o.dump_step ? 0.0 : o.flip);

    if (o.dump_step) {
        tr_batch *b;
        int rc = src.next(src.ctx, &b, err, sizeof err);
        if (rc <= 0) cli_die(CLI_EXIT_FATAL, "%s", rc < 0 ? err : "no data for --dump-step");
        /* in the configured precision; fp16 scales the loss (halved until no gradient overflows) */
        float scale = prec == TR_PREC_FP16 ? 65536.0f : 1.0f;
        tr_loss L;
        for (;;) {
            if (tr_model_forward(&m, b, err, sizeof err) < 0 ||
                tr_model_backward_acc(&m, b, 1, scale, 0, &L, err, sizeof err) < 0)
                cli_die(CLI_EXIT_FATAL, "%s", err);
            if (isfinite(tr_model_scale_grads(&m, 1.0 / scale)) || scale <= 1.0f) break;
            scale /= 2;
        }
        if (tr_dump_step(&m, b, &L, o.dump_step, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        printf("{\"loss\": %.8g, \"focal\": %.8g, \"dice\": %.8g, \"iou_mse\": %.8g, \"valid\": %d}\n", L.loss,
               L.focal, L.dice, L.iou_mse, L.n_valid);
        src.release(src.ctx, b);
        src.close(src.ctx);
        tr_model_free(&m);
        return 0;
    }

    /* training */
    if (!o.plan && o.rank == 0) prepare_out(&o); /* rank 0 writes the run's files */
    tr_optim_config oc;
    tr_optim_defaults(&oc, o.lr, o.steps);
    oc.kind = strcmp(o.optim, "adamw8bit") == 0 ? TR_OPTIM_ADAMW8BIT : TR_OPTIM_ADAMW;
    oc.block = o.optim_block;
    oc.skip_frozen = 1; /* no state, not even for a moment, for a frozen encoder */
    if (o.warmup >= 0) oc.warmup = o.warmup;
    oc.weight_decay = o.weight_decay, oc.clip = o.clip, oc.eps = o.adam_eps;
    zero_part zero = {0};
    if (o.zero && o.world > 1) zero_split(&m, o.rank, o.world, &zero); /* (the planner's too) */
    oc.owned = zero.owned;
    tr_optim opt;
    if (tr_optim_init(&opt, &m, &oc) < 0) die_memory(&o, be, "out of memory for the optimizer");
    if (o.freeze) sync_trainable(&m, &opt, zero.owned); /* the model was created with the groups frozen */
    tr_train_state st = {0};
    tr_rng_seed(&st.rng, o.seed);
    float lscale = prec == TR_PREC_FP16 ? 65536.0f : 1.0f; /* fp16 dynamic loss scale */
    long scale_good = 0;
    if (o.resume) {
        long step = read_latest(o.resume);
        char path[4096];
        snprintf(path, sizeof path, "%s/model-%ld.safetensors", o.resume, step);
        if (tr_ckpt_load_model(&m, path, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        int unfrozen = 0; /* stages before the checkpoint */
        for (int u = 0; u < o.n_unfreeze; u++)
            if (o.unfreeze_step[u] < step) set_frozen(&m, o.unfreeze_group[u], 0), unfrozen = 1;
        if (unfrozen) sync_trainable(&m, &opt, zero.owned);
        state_path(&o, o.resume, step, path, sizeof path);
        if (tr_ckpt_load_state(&m, &opt, &st, path, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        if (st.loss_scale > 0 && prec == TR_PREC_FP16) lscale = (float)st.loss_scale, scale_good = st.scale_good;
        if (src.seek && src.seek(src.ctx, st.data_epoch, st.data_consumed) < 0)
            cli_die(CLI_EXIT_FATAL, "cannot seek the data to where step %ld left it", step);
    }
    char logpath[4096];
    snprintf(logpath, sizeof logpath, "%s/log.jsonl", o.out);
    if (o.resume && o.rank == 0) trim_log(logpath, st.step);
    FILE *log = o.plan || o.rank ? NULL : fopen(logpath, o.resume ? "a" : "w");
    if (!log && !o.plan && o.rank == 0) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", logpath, strerror(errno));
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (!o.quiet) {
        tr_mem_stats ms;
        char line[160];
        tr_mem_get_stats(&be->mem, &ms);
        tr_mem_format_line(line, sizeof line, &ms);
        fprintf(stderr, "%s: %s%s, step %ld of %ld: %s config (S=%d), %zu parameters, batch %d x %d masks x %d points, "
                "%s, %s backend, %d threads, %s, %s\n", cli_prog(), o.resume ? "resuming " : "training in ", o.resume ? o.resume : o.out,
                st.step, o.steps, o.config_name, cfg.S, m.n_param_floats, o.batch, o.masks, o.points, o.precision,
                be->name, be->n_threads, o.optim, line);
    }
    double t_last = cli_now(), wait_last = src.wait_seconds ? src.wait_seconds(src.ctx) : 0;
    long since = 0;
    int rc_exit = 0, cur_batch = o.batch, cur_accum = o.accum;
    int dp = o.world > 1 && !o.plan, stop_all = 0; /* data parallel: the stop the ranks agreed on */
    double sync_s = 0;                  /* and the time spent in the sums since the last log line */
    while (st.step < o.steps) {
        if (dp ? stop_all : stop_requested) {
            save_checkpoint(&o, &m, &opt, &st, &src);
            cli_warn("interrupted: checkpoint of step %ld written", st.step);
            rc_exit = 130;
            break;
        }
        /* stages starting after st.step steps: micro-batch (same effective batch), unfreezing */
        if (!o.plan) {
            int want = o.batch;
            for (int k = 0; k < o.n_stage; k++)
                if (st.step >= o.stage_step[k]) want = o.stage_batch[k];
            if (want != cur_batch) {
                change_batch(&o, &cfg, &m, &src, be->host_mem, want);
                cur_batch = want, cur_accum = o.batch * o.accum / want;
            }
            int unfrozen = 0;
            for (int u = 0; u < o.n_unfreeze; u++)
                if (o.unfreeze_step[u] == st.step) set_frozen(&m, o.unfreeze_group[u], 0), unfrozen = 1;
            if (unfrozen) sync_trainable(&m, &opt, zero.owned);
        }
        /* cur_accum micro-batches: gradients summed in the fp32 buffer; one micro-batch: the mean
         * loss's gradient; several: the pair-loss sums divided by the total count of valid pairs */
        tr_loss L = {0};
        long n_valid = 0;
        int got = 0, rc = 1;
        for (int k = 0; k < cur_accum; k++) {
            tr_batch *b;
            rc = src.next(src.ctx, &b, err, sizeof err);
            if (rc < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
            if (rc == 0) break;
            tr_loss Lk; /* forward + backward (fused per decoder chunk with --checkpoint-decoder) */
            if (tr_model_step(&m, b, k == 0, lscale, cur_accum > 1 || dp, &Lk, err, sizeof err) < 0)
                die_memory(&o, be, err);
            src.release(src.ctx, b);
            got++;
            if (cur_accum == 1 && !dp) {
                L = Lk;
            } else {
                L.loss += Lk.loss * Lk.n_valid, L.focal += Lk.focal * Lk.n_valid, L.dice += Lk.dice * Lk.n_valid;
                L.iou_mse += Lk.iou_mse * Lk.n_valid, L.miou += Lk.miou * Lk.n_valid;
            }
            n_valid += Lk.n_valid;
        }
        if (rc == 0) break; /* the data ended: an incomplete step is dropped (every rank at the same step) */
        if (dp) { /* the global batch: gradient sums, valid pairs and loss terms of every rank */
            double t[7] = {(double)n_valid, L.loss, L.focal, L.dice, L.iou_mse, L.miou, stop_requested ? 1.0 : 0.0};
            double t0 = cli_now();
            if (tr_dist_sum_f(o.dist, m.grad_mem, m.n_grad_floats, err, sizeof err) < 0 ||
                tr_dist_sum_d(o.dist, t, 7, err, sizeof err) < 0) {
                cli_warn("rank %d: %s", o.rank, err);
                tr_dist_abort(o.dist, CLI_EXIT_FATAL);
            }
            n_valid = (long)t[0], L.loss = t[1], L.focal = t[2], L.dice = t[3], L.iou_mse = t[4], L.miou = t[5];
            stop_all = t[6] > 0;
            sync_s += cli_now() - t0;
        }
        if ((cur_accum > 1 || dp) && n_valid) {
            L.loss /= n_valid, L.focal /= n_valid, L.dice /= n_valid, L.iou_mse /= n_valid, L.miou /= n_valid;
        }
        L.n_valid = (int)n_valid;
        double unscale = cur_accum == 1 && !dp ? 1.0 / lscale : n_valid ? 1.0 / ((double)lscale * n_valid) : 0.0;
        double lr, gnorm, ss = tr_model_scale_grads(&m, unscale);
        int skipped = !isfinite(ss);
        if (skipped) { /* overflow: no update; fp16 halves its loss scale */
            lr = tr_optim_lr(&opt.cfg, opt.t), gnorm = 0;
            if (prec == TR_PREC_FP16 && lscale > 1.0f) lscale /= 2;
            scale_good = 0;
        } else {
            gnorm = tr_optim_step(&opt, &m, &lr);
            if (zero.owned && dp && tr_dist_gather_f(o.dist, m.param_mem, zero.lo, err, sizeof err) < 0) {
                cli_warn("rank %d: %s", o.rank, err); /* every rank's updated part, on every rank */
                tr_dist_abort(o.dist, CLI_EXIT_FATAL);
            }
            if (prec == TR_PREC_FP16 && ++scale_good >= o.scale_window) {
                if (lscale < 1e30f) lscale *= 2;
                scale_good = 0;
            }
        }
        if (prec == TR_PREC_FP16) st.loss_scale = lscale, st.scale_good = scale_good;
        st.step++;
        test_hook("step", st.step);
        since++;
        if (st.step % o.log_every == 0 || st.step == o.steps) {
            double now = cli_now(), wait = src.wait_seconds ? src.wait_seconds(src.ctx) : 0;
            double dt = now - t_last, ips = dt > 0 ? (double)since * cur_batch * cur_accum * o.world / dt : 0;
            double dw = dt > 0 ? 100 * (wait - wait_last) / dt : 0;
            tr_mem_stats ms;
            char mline[160];
            tr_mem_get_stats(&be->mem, &ms);
            tr_mem_format_line(mline, sizeof mline, &ms);
            char extra[160] = ""; /* fp16: the loss scale after this step; a skipped (overflowed) step */
            if (prec == TR_PREC_FP16) snprintf(extra, sizeof extra, ", \"scale\": %.9g", lscale);
            if (skipped) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"skipped\": true");
            if (dp) /* the share of the step spent summing over the ranks (waits for the slowest included) */
                snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"ranks\": %d, \"sync_pct\": %.1f",
                         o.world, dt > 0 ? 100 * sync_s / dt : 0.0);
            if (log) fprintf(log, "{\"step\": %ld, \"loss\": %.6g, \"focal\": %.6g, \"dice\": %.6g, \"iou_mse\": %.6g, "
                    "\"miou\": %.4f, \"lr\": %.6g, \"grad_norm\": %.6g, \"images_per_s\": %.3f, \"data_wait_pct\": %.1f, "
                    "\"mem_allocated\": %" PRIu64 ", \"mem_peak\": %" PRIu64 ", \"mem_reserved\": %" PRIu64
                    ", \"mem_sys_allocs\": %" PRIu64 ", \"step_s\": %.4f%s}\n",
                    st.step, L.loss, L.focal, L.dice, L.iou_mse, L.miou, lr, gnorm, ips, dw, ms.total,
                    ms.total_peak, ms.reserved, ms.n_sys_allocs, since ? dt / since : 0.0, extra);
            if (log) fflush(log);
            if (!o.quiet)
                fprintf(stderr, "step %ld/%ld  loss %.4f (focal %.4f dice %.4f iou %.4f)  mIoU %.3f  lr %.2e  "
                        "%.2f img/s  data %.0f%%  %s\n",
                        st.step, o.steps, L.loss, L.focal, L.dice, L.iou_mse, L.miou, lr, ips, dw, mline);
            t_last = now, wait_last = wait, since = 0, sync_s = 0;
        }
        if (!o.plan && (st.step % o.ckpt_every == 0 || st.step == o.steps)) save_checkpoint(&o, &m, &opt, &st, &src);
        if (o.empty_cache_every && st.step % o.empty_cache_every == 0) tr_mem_empty_cache(&be->mem);
    }
    if (log) fclose(log);
    src.close(src.ctx);
    if (o.memory_report) {
        tr_mem_stats ms;
        tr_mem_get_stats(&be->mem, &ms);
        if (o.world > 1) fprintf(stderr, "memory report (training, %s backend, rank %d of %d):\n", be->name, o.rank, o.world);
        else fprintf(stderr, "memory report (training, %s backend):\n", be->name);
        tr_mem_report(stderr, &ms);
    }
    if (o.val && rc_exit == 0 && !o.plan && o.rank == 0) {
        tr_model ev;
        if (tr_model_init(&ev, be, &cfg, o.batch, o.masks, 1, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "%s", err);
        be->ops->copy(be, ev.param_mem, m.param_mem, m.n_param_floats); /* (backend memory to backend memory) */
        be->ops->copy(be, ev.pe_gaussian, m.pe_gaussian, (size_t)cfg.C);
        tr_data_source vs = {0};
        open_source(&o, &cfg, &vs, be->host_mem, "--val", o.val, 1, 1, 0.0);
        evaluate(&o, &ev, &vs, 1);
        vs.close(vs.ctx);
        tr_model_free(&ev);
    }
    tr_optim_free(&opt, &m);
    tr_model_free(&m);
    free(zero.owned), free(zero.lo);
    return rc_exit;
}
