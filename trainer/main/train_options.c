/*
 * train_options.c - sa1b-train's command line: usage, parsing and checks,
 * the output folder (refused when it holds another run, emptied with
 * --overwrite) and the run record that --resume restores.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "dist.h"
#include "train.h"

static void usage(void)
{
    printf("Usage: %s [OPTION]... --out DIR (--data GLOB|MANIFEST | --synthetic-batch SEED)\n"
           "Train the compact SAM of docs/MODEL.md on the CPU or an NVIDIA GPU.\n\n"
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
           "  --auto-resume          with --out DIR: continue the run in DIR when it has a checkpoint\n"
           "                         (as --resume DIR), else start it (the same command every time)\n"
           "  --overwrite            start afresh in an --out DIR that holds a run (removes its files);\n"
           "                         with --dump-step: replace an earlier dump FILE; with --export:\n"
           "                         replace an earlier export's overlays\n"
           "  --collective-timeout S under mpirun: end the job when a rank does not join a sum within S\n"
           "                         seconds (a rank died or hangs; default 300)\n"
           "  --zero N               under mpirun: 1 splits the optimizer state over the ranks, the\n"
           "                         gradients reduce-scattered, the weights all-gathered (default 0)\n"
           "  --ranks N              with --plan: plan rank 0 of a job of N processes (default 1)\n"
           "  --init CKPT            start from the weights of model checkpoint CKPT (same model), step 0\n"
           "  --log-every N          progress line every N steps (default 10)\n"
           "  --ckpt-every N         checkpoint every N steps (default 500)\n"
           "  --eval-only CKPT       evaluate a model checkpoint and exit\n"
           "  --eval-batches N       batches to evaluate (default 8)\n"
           "  --export N             with --eval-only: write N PNG overlays to OUT/export/\n"
           "  --dump-step FILE       one forward/backward on the first batch, write FILE, exit\n"
           "Data:\n"
           "  --data GLOB|MANIFEST   training shards (sa1b-shard output; a .json: a manifest of them)\n"
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
           "  --memory-budget SIZE   with --plan: largest micro-batch that fits SIZE (e.g. 16G),\n"
           "                         or auto: the backend's free memory now\n"
           "  --memory-limit SIZE    hold at most SIZE of memory; beyond it the run stops (exit 3)\n"
           "  --effective-batch N    with --plan --memory-budget: images per step to keep by accumulation\n"
           "Computation:\n"
           "  --accum K              micro-batches per optimizer step (gradient accumulation; default 1)\n"
           "  --checkpoint-every N   keep only every N-th encoder block's input, recompute (default 0 = off)\n"
           "  --checkpoint-decoder   keep decoder activations for one chunk of pairs only\n"
           "  --precision P          fp32, bf16 or fp16 activations and compute weights (default fp32)\n"
           "  --tf32                 with --backend cuda: fp32 GEMMs on the tensor cores in TF32\n"
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
enum { O_OVERWRITE = 600, O_COLL_TIMEOUT, O_ZERO, O_RANKS, O_AUTO_RESUME };
enum { O_ACCUM = 500, O_CKPT_EVERY, O_CKPT_DEC, O_PREC, O_SCALE_WIN, O_FREEZE, O_UNFREEZE, O_STAGE_BATCH, O_TF32 };

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

/* The one checkpoint that a run killed in its first leaves in out, with
 * no latest (tr_run_dir_one_checkpoint): its step, and *whole when it has
 * every file its job writes (model-N and state-N.bin, and with --zero 1
 * under W > 1 processes, as the record in any of its state files says,
 * each part state-N.rR.bin, 0 < R < W), so that a resume can read it.
 * -1 when there is none, a model file alone (no record:
 * tr_run_dir_killed_start's case), or one not whole but of another job
 * than such a --zero 1 one.  The records are read from the files' headers
 * alone. */
static long first_checkpoint(const char *out, int *whole)
{
    char path[4200], v[32];
    struct stat st;
    int model, state;
    long part, step = tr_run_dir_one_checkpoint(out, &model, &state, &part);
    if (step < 0 || (!state && part < 0)) return -1;
    if (state) snprintf(path, sizeof path, "%s/state-%ld.bin", out, step);
    else snprintf(path, sizeof path, "%s/state-%ld.r%ld.bin", out, step, part);
    long world = tr_st_peek_meta(path, "run.world", v, sizeof v) ? atol(v) : 1;
    int parts = tr_st_peek_meta(path, "run.zero", v, sizeof v) && atoi(v) != 0 && world >= 2 && world <= 65536;
    *whole = model && state;
    for (long r = 1; *whole && parts && r < world; r++) {
        snprintf(path, sizeof path, "%s/state-%ld.r%ld.bin", out, step, r);
        *whole = lstat(path, &st) == 0;
    }
    return *whole || parts ? step : -1;
}

/* The first checkpoint of a --zero 1 job that a kill cut between its
 * ranks' writes (each rank writes its part of the optimizer state as rank
 * 0 writes the model and state-N.bin; latest comes after all): the step of
 * the checkpoint of first_checkpoint that is not whole.  No resume could
 * read it, and no earlier checkpoint exists: what a run killed before its
 * first checkpoint leaves.  -1 otherwise. */
static long cut_first_checkpoint(const char *out)
{
    int whole;
    long step = first_checkpoint(out, &whole);
    return step >= 0 && !whole ? step : -1;
}

/* --auto-resume: --resume OUT when OUT has a checkpoint (OUT/latest: its
 * --init dropped, the run has its weights), else a new run that clears a
 * run without one (killed before its first checkpoint) from OUT.  Decided
 * again by the parse of restore_run, which finds the same. */
static void auto_resume(options *o)
{
    if (o->resume || o->overwrite || o->plan || o->eval_only || o->dump_step)
        cli_usage_error("--auto-resume continues or starts the training run in --out: not with --resume, --overwrite, "
                        "--plan, --eval-only or --dump-step");
    if (!o->out) cli_usage_error("--auto-resume needs --out DIR");
    char latest[4200];
    struct stat st;
    snprintf(latest, sizeof latest, "%s/latest", o->out);
    int whole = 0; /* (not whole: a new run replaces it) */
    long unnamed = first_checkpoint(o->out, &whole);
    if (unnamed >= 0 && whole) { /* a run killed between its checkpoint and latest: latest names it now */
        if (write_latest(o->out, unnamed, 1) < 0) /* (every rank of a job at once) */
            cli_die(CLI_EXIT_FATAL, "cannot write '%s': %s", latest, strerror(errno));
        if (tr_dist_env_rank() == 0) /* (every rank of a job does the same: one line) */
            cli_warn("output folder '%s' holds the checkpoint of step %ld that 'latest' did not name yet (a run "
                     "killed as it wrote it): 'latest' names it now", o->out, unnamed);
    }
    if (lstat(latest, &st) == 0) {
        o->resume = o->out;
        o->init = NULL;
        o->auto_fresh = 0;
    } else if (errno == ENOENT || errno == ENOTDIR) {
        o->auto_fresh = 1;
    } else {
        cli_die(CLI_EXIT_FATAL, "cannot read '%s': %s", latest, strerror(errno));
    }
}

void parse_options(int argc, char **argv, options *o)
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
        {"unfreeze", 1, 0, O_UNFREEZE}, {"stage-batch", 1, 0, O_STAGE_BATCH}, {"tf32", 0, 0, O_TF32}, {"quiet", 0, 0, 'q'},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {"overwrite", 0, 0, O_OVERWRITE}, {"auto-resume", 0, 0, O_AUTO_RESUME}, {"collective-timeout", 1, 0, O_COLL_TIMEOUT}, {"zero", 1, 0, O_ZERO}, {"ranks", 1, 0, O_RANKS},
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
            o->memory_budget_auto = strcmp(optarg, "auto") == 0;
            if (!o->memory_budget_auto && (tr_parse_bytes(optarg, &o->memory_budget) < 0 || o->memory_budget == 0))
                cli_usage_error("--memory-budget: '%s' is not a size like 512M or 16G, or auto", optarg);
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
        case O_TF32: o->tf32 = 1; break;
        case O_OVERWRITE: o->overwrite = 1; break;
        case O_AUTO_RESUME: o->auto_resume = 1; break;
        case O_ZERO: o->zero = (int)parse_long("--zero", optarg, 0, 1); break;
        case O_RANKS: o->plan_ranks = (int)parse_long("--ranks", optarg, 1, 65536); break;
        case O_COLL_TIMEOUT: o->collective_timeout = (double)parse_long("--collective-timeout", optarg, 1, 86400); break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(); cli_stdout_check(); exit(0);
        case 'V': cli_version(); exit(0);
        default: cli_usage_error("unknown option");
        }
    }
    if (optind < argc) cli_usage_error("unexpected argument '%s'", argv[optind]);
    /* an empty path is no path ('' + "/latest" would be the root's latest) */
    const char *paths[] = {o->out, o->resume, o->init, o->data, o->val, o->dump_step, o->eval_only};
    static const char *const path_opts[] = {"--out", "--resume", "--init", "--data", "--val", "--dump-step", "--eval-only"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if (paths[i] && !*paths[i]) cli_usage_error("%s: the path is empty", path_opts[i]);
    if (o->auto_resume) auto_resume(o);
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
    if ((o->memory_budget || o->memory_budget_auto || o->effective_batch) && !o->plan) cli_usage_error("--memory-budget and --effective-batch need --plan");
    if (o->memory_limit && o->plan) cli_usage_error("--memory-limit limits a run; the planner takes --memory-budget");
    if (!o->plan && !o->dump_step && !o->eval_only && !o->out) cli_usage_error("--out DIR is required for training");
    if (o->export_n && (!o->eval_only || !o->out)) cli_usage_error("--export needs --eval-only and --out DIR");
    if (o->tf32 && strcmp(o->backend, "cuda") != 0)
        cli_usage_error("--tf32 is for --backend cuda (the CPU backend's fp32 GEMMs are fp32)");
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

/* ---- the output folder (issue 19) ---------------------------------------- */

int same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return strcmp(a, b) == 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* --dump-step FILE: an existing regular FILE is replaced only with
 * --overwrite and only when it is an earlier step dump (never a shard, a
 * checkpoint or any other input); a FIFO or a device is written in place. */
static void check_dump_out(const options *o)
{
    struct stat st;
    char fmt[64];
    if (stat(o->dump_step, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (!o->overwrite)
        cli_die(CLI_EXIT_USAGE, "--dump-step: '%s' exists: give another file, or --overwrite to replace an earlier dump",
                o->dump_step);
    if (!tr_st_peek_meta(o->dump_step, "format", fmt, sizeof fmt) || strcmp(fmt, TR_CKPT_FORMAT_DUMP) != 0)
        cli_die(CLI_EXIT_USAGE, "--dump-step: '%s' exists and is not a step dump: not replaced, even with --overwrite",
                o->dump_step);
}

static int take_lock(const char *dir, const char *what, long *holder);

/* cli_die on rank 0 of an mpirun job; the other ranks, which find the
 * same in the folder they share, end without a word (one line a job). */
#define out_die(o, code, ...)                                                                                           \
    do {                                                                                                                \
        if ((o)->rank == 0) cli_die(code, __VA_ARGS__);                                                                 \
        exit(code);                                                                                                     \
    } while (0)

/* Exit 2 when --out holds a run that this training run would start over:
 * it neither resumes that folder nor has --overwrite. */
static void refuse_run_in_out(const options *o)
{
    if (o->plan || o->dump_step || o->eval_only || !o->out) return;
    char latest[4200];
    struct stat st;
    snprintf(latest, sizeof latest, "%s/latest", o->out);
    if (o->auto_fresh) { /* the log of a run killed before its first checkpoint is replaced; nothing else */
        if (lstat(latest, &st) == 0)
            out_die(o, CLI_EXIT_USAGE, "output folder '%s' has a checkpoint now (a run wrote it since this one looked): "
                    "run the command again to continue it", o->out);
        char what[300];
        int k = tr_run_dir_killed_start(o->out, cut_first_checkpoint(o->out), what, sizeof what);
        if (k < 0) out_die(o, CLI_EXIT_FATAL, "output folder '%s': %s", o->out, what);
        if (!k) {
            long pid;
            if (o->rank == 0 && !o->out_locked && !take_lock(o->out, "output folder", &pid) &&
                errno == EWOULDBLOCK) {
                /* (a run writing there now: its first checkpoint, not a stray file) */
                char who[64] = "";
                if (pid) snprintf(who, sizeof who, " (process %ld)", pid);
                out_die(o, CLI_EXIT_USAGE, "output folder '%s' is in use by another sa1b-train run%s: wait for it to "
                        "end", o->out, who);
            }
            out_die(o, CLI_EXIT_USAGE, "output folder '%s' has no checkpoint to continue (no 'latest') but holds %s, "
                    "which --auto-resume never replaces (only the log of a run killed before its first checkpoint): "
                    "move it away, or give another --out", o->out, what);
        }
        return;
    }
    if (o->overwrite) return;
    if (o->resume && same_dir(o->out, o->resume)) return;
    char what[300];
    int held = tr_run_dir_holds_run(o->out, what, sizeof what);
    if (held < 0) out_die(o, CLI_EXIT_FATAL, "cannot read output folder '%s': %s", o->out, what);
    if (held && lstat(latest, &st) != 0) { /* (killed before its first checkpoint): --resume of it cannot work */
        if (o->resume) /* (--overwrite is not for a resume) */
            out_die(o, CLI_EXIT_USAGE, "output folder '%s' holds %s but no checkpoint to continue: remove them, or "
                    "give another --out", o->out, what);
        out_die(o, CLI_EXIT_USAGE, "output folder '%s' holds %s but no checkpoint to continue: start afresh with "
                "--overwrite (removes them)", o->out, what);
    }
    if (held)
        out_die(o, CLI_EXIT_USAGE, "output folder '%s' holds %s: continue it with --resume %s, or start afresh with "
                "--overwrite (removes its log and checkpoints)", o->out, what, o->out);
}

/* Exit 2 when dir holds the overlays of an earlier --export. */
static void refuse_overlays(const char *dir)
{
    long n = tr_run_dir_overlays(dir, 0);
    if (n > 0)
        cli_die(CLI_EXIT_USAGE, "'%s' holds %ld overlays of an earlier --export: give another --out, or "
                "--overwrite to replace them", dir, n);
}

/* Before anything is touched: a training run never starts over a run in
 * --out unless it resumes that run or --overwrite says to start afresh. */
void check_out(const options *o)
{
    if (o->overwrite && o->resume) cli_usage_error("--overwrite starts a run afresh: not with --resume");
    if (o->overwrite && (o->plan || (o->eval_only && !o->export_n)))
        cli_usage_error("--overwrite applies to a training run, --dump-step or --export: not with --plan or --eval-only "
                        "alone");
    if (o->eval_only && o->export_n && !o->overwrite) { /* never two exports' overlays mixed in one folder */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/export", o->out);
        refuse_overlays(dir);
    }
    if (o->dump_step && !o->plan && !o->eval_only) check_dump_out(o);
    if (o->plan || o->dump_step || o->eval_only || !o->out) return;
    char name[256];
    if ((o->overwrite || o->auto_fresh) && o->init && tr_run_dir_has_file(o->out, o->init, name, sizeof name))
        out_die(o, CLI_EXIT_USAGE, "--init '%s' is %s of the run in '%s', which %s removes: copy it out of the "
                "folder first", o->init, name, o->out,
                o->overwrite ? "--overwrite" : "--auto-resume (no checkpoint there: a new run)");
    if (o->overwrite) return;
    if (o->resume && same_dir(o->out, o->resume)) return;
    struct stat st;
    char parent[4096];
    size_t len = strlen(o->out);
    while (len > 1 && o->out[len - 1] == '/') len--; /* "runs/a/" is the folder a of runs */
    snprintf(parent, sizeof parent, "%.*s", (int)len, o->out);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = 0;
    if (stat(o->out, &st) != 0 && slash && slash != parent && (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode)))
        out_die(o, CLI_EXIT_FATAL, "output folder '%s' does not exist (--out %s is created in it)", parent, o->out);
    refuse_run_in_out(o);
}

/* The process holding the flock(2) lock of the file st names, from
 * /proc/locks (Linux); 0 when unknown. */
static long lock_holder(const struct stat *st)
{
    FILE *f = fopen("/proc/locks", "r");
    if (!f) return 0;
    char line[256];
    long pid = 0;
    while (!pid && fgets(line, sizeof line, f)) {
        long p;
        unsigned maj, min;
        unsigned long ino;
        if (sscanf(line, "%*d: FLOCK %*s WRITE %ld %x:%x:%lu", &p, &maj, &min, &ino) == 4 && ino == st->st_ino &&
            maj == major(st->st_dev) && min == minor(st->st_dev))
            pid = p;
    }
    fclose(f);
    return pid;
}

/* Takes the flock(2) lock of the file TR_RUN_LOCK in dir (what: "output
 * folder", "export folder"), held until the process ends: 1, or 0 with
 * errno when it cannot be locked (another process holds it: EWOULDBLOCK
 * and *holder its process id, 0 when unknown).  The file is opened
 * read-only: flock needs no write access, and in a folder shared by a
 * group the lock file is the user's who made it (its mode 0644).  One that
 * is not there and cannot be created ends the process in one line. */
static int take_lock(const char *dir, const char *what, long *holder)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, TR_RUN_LOCK);
    *holder = 0;
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666), e = errno;
    if (fd < 0 && (e != EACCES || access(path, F_OK) != 0)) /* (not there, and cannot be created) */
        cli_die(CLI_EXIT_FATAL, "cannot create '%s' (the lock of the %s): %s", path, what, strerror(e));
    if (fd < 0) return errno = e, 0;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 1; /* (fd left open) */
    e = errno;
    struct stat st;
    if (e == EWOULDBLOCK && fstat(fd, &st) == 0) *holder = lock_holder(&st);
    close(fd);
    return errno = e, 0;
}

void lock_out(options *o, int created)
{
    if (o->out_locked || !o->out) return;
    struct stat st;
    if (stat(o->out, &st) != 0 && errno == ENOENT && !created) return; /* prepare_out creates it, then locks it */
    /* a file of its own, not the folder: other tools (sa1b-shard's commit)
     * lock folders they write into, and must not wait on a training run */
    long pid;
    int held = take_lock(o->out, "output folder", &pid);
    o->out_locked = 1;
    if (held) {
        o->out_lock_held = 1;
        /* again under the lock: a run that started in the folder after
         * check_out looked (two runs into one new folder) and ended before
         * the lock was taken left a run there, which is never started over */
        refuse_run_in_out(o);
        return;
    }
    if (errno == EWOULDBLOCK) {
        char who[64] = "";
        if (pid) snprintf(who, sizeof who, " (process %ld)", pid);
        cli_die(CLI_EXIT_USAGE, "output folder '%s' is in use by another sa1b-train run%s: wait for it to end", o->out,
                who);
    }
    cli_warn("cannot lock output folder '%s': %s (a second run in it would not be refused)", o->out, strerror(errno));
}

void lock_export(const options *o, const char *dir)
{
    long pid;
    if (!take_lock(dir, "export folder", &pid)) { /* (one that cannot be locked: as before exports were locked) */
        if (errno == EWOULDBLOCK) {
            char who[64] = "";
            if (pid) snprintf(who, sizeof who, " (process %ld)", pid);
            cli_die(CLI_EXIT_USAGE, "'%s' is in use by another --export%s: wait for it to end, or give another --out",
                    dir, who);
        }
        cli_warn("cannot lock '%s': %s (a second export into it would not be refused)", dir, strerror(errno));
    }
    /* again under the lock: two exports started together had each found
     * the folder without overlays */
    if (!o->overwrite) refuse_overlays(dir);
    else if (tr_run_dir_overlays(dir, 1) < 0) /* (an earlier export's: check_out) */
        cli_die(CLI_EXIT_FATAL, "--overwrite: cannot remove the overlays in '%s': %s", dir, strerror(errno));
}

/* Creates --out, or with --overwrite empties it of the earlier run's files. */
void prepare_out(options *o)
{
    char err[4400];
    if (mkdir(o->out, 0777) != 0 && errno != EEXIST) cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", o->out, strerror(errno));
    lock_out(o, 1); /* (before anything in it is removed or written) */
    if (o->auto_fresh) {
        /* what a run killed before its first checkpoint left, and nothing
         * more (checked again now: the folder's files may have changed
         * since lock_out looked), and only under the lock */
        refuse_run_in_out(o);
        char what[300], log[4200];
        int held = tr_run_dir_holds_run(o->out, what, sizeof what);
        if (held < 0) cli_die(CLI_EXIT_FATAL, "cannot read output folder '%s': %s", o->out, what);
        if (held && !o->out_lock_held)
            cli_die(CLI_EXIT_FATAL, "output folder '%s' could not be locked: --auto-resume replaces no file there "
                    "without its lock", o->out);
        snprintf(log, sizeof log, "%s/log.jsonl", o->out);
        struct stat st;
        long cut = cut_first_checkpoint(o->out);
        if (cut >= 0) /* (with --quiet too: files go) */
            cli_warn("output folder '%s' holds a run killed as it wrote its first checkpoint (that of step %ld "
                     "lacks a file of a rank's; no resume can read it): a new run (--auto-resume) replaces it",
                     o->out, cut);
        else if (lstat(log, &st) == 0)
            cli_warn("output folder '%s' holds the log of a run killed before its first checkpoint: a new run "
                     "(--auto-resume) replaces it", o->out);
        /* (just checked, under the lock: its log, temporaries, and the
         * files of a first checkpoint cut before its state, or before a
         * rank's part of it) */
        if (held && tr_run_dir_clear(o->out, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--auto-resume: %s", err);
    } else if (o->overwrite) {
        if (tr_run_dir_clear(o->out, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "--overwrite: %s", err);
    } else if (o->out_lock_held && tr_run_dir_remove_temps(o->out, err, sizeof err) < 0) {
        /* with the lock, no other run writes here: a temporary is a killed
         * run's (--overwrite's clear took them with the rest) */
        cli_warn("%s", err);
    }
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

/* A --resume refused for what the run's record says: every rank of a job
 * reads the same record and stops alike, and rank 0 alone (report) says
 * why, so that the job prints one line. */
_Noreturn __attribute__((format(printf, 2, 3))) static void refuse(int report, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (report) cli_die(CLI_EXIT_USAGE, "%s", msg);
    /* the other ranks leave rank 0 the time to say it: mpirun ends a job at
     * its first failed process, and one of them ending first could take
     * rank 0 down before its line is out (seen once in CI); rank 0's end
     * ends them */
    sleep(10);
    exit(CLI_EXIT_USAGE);
}

/* --resume DIR: the options are parsed again from the command line plus,
 * for every setting of the run's record that it does not give, "--flag
 * value" (so that a record is checked like a command line); a given one that
 * contradicts the run is refused.  A state written before records existed
 * resumes with the options as given. */
void restore_run(options *o, int argc, char **argv, int report)
{
    char path[4200], err[512], *rec = NULL, v[4200], mine[4200], flag[40];
    snprintf(path, sizeof path, "%s/state-%ld.bin", o->resume, read_latest(o->resume));
    if (tr_ckpt_read_run(path, &rec, err, sizeof err) < 0) cli_die(CLI_EXIT_FATAL, "cannot resume: %s", err);
    if (!rec) return;
    int world = tr_run_rec_get(rec, "world", v, sizeof v) ? atoi(v) : 1;
    if (world != o->world)
        refuse(report, "the run in '%s' was trained by %d process%s and this job has %d: resume it with "
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
            refuse(report, "--synthetic-batch %" PRIu64 " contradicts the run in '%s', which has --data %s: "
                    "leave --synthetic-batch out to continue it", o->synthetic_seed, o->resume, v);
        field_text(o, f, mine, sizeof mine);
        char ms[40], vs[40];
        if (o->given[f->opt] && f->fixed && strcmp(mine, v) != 0)
            refuse(report, "%s %s contradicts the run in '%s', which has %s %s: leave %s out to continue it", flag,
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
            refuse(report, "%s %s contradicts the run in '%s', which has --synthetic-batch %s: leave %s out "
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
    int data_restored = 0;
    for (int i = 0; i + 1 < n; i++) data_restored |= strcmp(args[i], "--data") == 0 && !o->given[O_DATA];
    optind = 0; /* getopt from the start */
    parse_options(n, args, o);
    o->data_restored = data_restored;
    free(args);
    memcpy(o->owned, r.owned, sizeof o->owned); /* the strings the options point into */
    o->n_owned = r.n_owned;
}
