/*
 * train_options.c - sa1b-train's command line: usage, parsing and checks
 * (the output folder: out_dir.c; the run record --resume restores:
 * run_record.c).
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
#include "registry/registry.h"
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
           "  --from-step N          with --resume DIR: continue from DIR's checkpoint of step N\n"
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
           "  --skip-damaged         a damaged sample (CRC32C mismatch, undecodable JPEG): say it, leave\n"
           "                         its pairs out and go on (default: the run stops, exit 3)\n"
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
           "  --attention PATH       with --backend cuda: auto, cudnn, flash, blocked or fused (default auto)\n"
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

/* Usage error for extra, the first argument that is no option's: with a
 * hint when, on the command line as given (orig), it follows --data's or
 * --val's value, as the shell's expansion of an unquoted pattern does. */
static _Noreturn void extra_argument(int argc, char **orig, const char *extra, const options *o)
{
    const char *const values[] = {o->data, o->val}, *const names[] = {"--data", "--val"};
    for (int i = 2; i < argc; i++) {
        if (orig[i] != extra) continue;
        const char *eq = strchr(orig[i - 1], '=');
        for (int k = 0; k < 2; k++) /* (the value is the argument before, or the end of --data=VALUE) */
            if (values[k] && (values[k] == orig[i - 1] || (eq && values[k] == eq + 1)))
                cli_usage_error("unexpected argument '%s' after %s '%s': %s takes one pattern, quoted so that the "
                                "shell leaves it alone (%s 'dir/*.shard')",
                                extra, names[k], values[k], names[k], names[k]);
    }
    cli_usage_error("unexpected argument '%s'", extra);
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
        {"attention", 1, 0, O_ATTN},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {"from-step", 1, 0, O_FROM_STEP}, {"skip-damaged", 0, 0, O_SKIP_DAMAGED}, {"overwrite", 0, 0, O_OVERWRITE}, {"auto-resume", 0, 0, O_AUTO_RESUME}, {"collective-timeout", 1, 0, O_COLL_TIMEOUT}, {"zero", 1, 0, O_ZERO}, {"ranks", 1, 0, O_RANKS},
        {0, 0, 0, 0}};
    train_job *job = o->job; /* (the caller's, kept) */
    memset(o, 0, sizeof *o);
    o->job = job;
    o->config_name = "small";
    o->steps = 1000, o->batch = 8, o->masks = 16, o->points = 2, o->lr = 3e-4, o->weight_decay = 0.1, o->clip = 1.0, o->adam_eps = 1e-8;
    o->warmup = -1, o->seed = 1, o->threads = 2, o->backend = "cpu", o->log_every = 10, o->ckpt_every = 500;
    o->eval_batches = 8, o->flip = 0.5;
    o->collective_timeout = 300;
    o->from_step = -1;
    o->optim = "adamw", o->optim_block = 256;
    o->accum = 1, o->precision = TR_PREC_FP32, o->scale_window = 1000;
    int ov[8], have[8] = {0};
    int c;
    /* first pass: the preset, so that single overrides apply on top of it */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) o->config_name = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0) o->config_name = argv[i] + 9;
    }
    char **orig = malloc(((size_t)argc + 1) * sizeof *orig); /* (getopt_long reorders argv) */
    if (!orig) cli_die(CLI_EXIT_FATAL, "out of memory");
    memcpy(orig, argv, (size_t)argc * sizeof *orig);
    while ((c = getopt_long(argc, argv, "qhV", lo, NULL)) != -1) {
        if (c >= 0 && c < (int)sizeof o->given) o->given[c] = 1;
        switch (c) {
        case O_CONFIG: o->config_name = optarg; break;
        case O_S: case O_P: case O_E: case O_L: case O_H: case O_C: case O_h: case O_D: {
            char opt[32]; /* (the message names the option with its dashes, as all do) */
            snprintf(opt, sizeof opt, "--%s", lo[c - O_CONFIG].name);
            ov[c - O_S] = (int)parse_long(opt, optarg, c == O_L ? 0 : 1, 4096);
            have[c - O_S] = 1;
            break;
        }
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
        case O_PREC: o->precision = tr_prec_parse(optarg), o->precision_arg = optarg; break;
        case O_SCALE_WIN: o->scale_window = parse_long("--loss-scale-window", optarg, 1, 1000000000); break;
        case O_FREEZE: o->freeze = optarg; break;
        case O_UNFREEZE: parse_stages("--unfreeze", optarg, o, 0); break;
        case O_STAGE_BATCH: parse_stages("--stage-batch", optarg, o, 1); break;
        case O_TF32: o->tf32 = 1; break;
        case O_ATTN: o->attention = optarg; break;
        case O_OVERWRITE: o->overwrite = 1; break;
        case O_AUTO_RESUME: o->auto_resume = 1; break;
        case O_FROM_STEP: o->from_step = parse_long("--from-step", optarg, 0, 1000000000); break;
        case O_SKIP_DAMAGED: o->skip_damaged = 1; break;
        case O_ZERO: o->zero = (int)parse_long("--zero", optarg, 0, 1); break;
        case O_RANKS: o->plan_ranks = (int)parse_long("--ranks", optarg, 1, 65536); break;
        case O_COLL_TIMEOUT: o->collective_timeout = (double)parse_long("--collective-timeout", optarg, 1, 86400); break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(); cli_stdout_check(); exit(0);
        case 'V': cli_version(); exit(0);
        default: cli_usage_error("unknown option");
        }
    }
    if (optind < argc) extra_argument(argc, orig, argv[optind], o);
    free(orig);
    /* an empty path is no path ('' + "/latest" would be the root's latest) */
    const char *paths[] = {o->out, o->resume, o->init, o->data, o->val, o->dump_step, o->eval_only};
    static const char *const path_opts[] = {"--out", "--resume", "--init", "--data", "--val", "--dump-step", "--eval-only"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if (paths[i] && !*paths[i]) cli_usage_error("%s: the path is empty", path_opts[i]);
    if (o->from_step >= 0 && (!o->resume || o->auto_resume))
        cli_usage_error("--from-step N picks the checkpoint that --resume DIR continues from: it needs --resume%s",
                        o->auto_resume ? " (not --auto-resume)" : "");
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
    if (o->attention && tr_backend_attention_parse(o->attention) < 0)
        cli_usage_error("--attention: '%s' is not auto, cudnn, flash, blocked or fused", o->attention);
    if (!o->attention && (o->attention = tr_backend_attention_env()) && tr_backend_attention_parse(o->attention) < 0)
        cli_usage_error("SA1B_CUDA_ATTN: '%s' is not auto, cudnn, flash, blocked or fused (it stands for "
                        "--attention)", o->attention);
    if (!o->attention) o->attention = "auto";
    if (o->precision < 0) cli_usage_error("--precision: '%s' is not fp32, bf16 or fp16", o->precision_arg);
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

