/*
 * sa1b-loadbench - runs the loader of libsa1b alone over shards for a
 * number of batches or epochs and reports its throughput (images/s, MB/s
 * read from the shards and delivered in batches) and the fraction of the
 * time the consumer waited; --print-ids prints the image ids of every
 * batch so that order, coverage and resume can be checked from a shell.
 * Man page: sa1b-loadbench(1).
 */
#include "cli.h"
#include "sa1b_loader.h"
#include "sa1b_shard.h"
#include "sa1b_manifest.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    printf("Usage: %s [OPTIONS] SHARD...\n"
           "       %s [OPTIONS] MANIFEST.json\n"
           "Run the sa1b loader alone over shards (or those a manifest lists) and report\n"
           "images/s, MB/s and the fraction of the time the consumer waited for a batch.\n"
           "\n"
           "Options:\n"
           "  -n, --batches N        stop after N batches (default: the epochs)\n"
           "  -e, --epochs E         run E epochs (default 1 unless --batches)\n"
           "  -b, --batch B          images per batch and rank (default 8)\n"
           "  -m, --masks M          masks per image (default 16)\n"
           "  -k, --points K         points per mask (default 1)\n"
           "  -t, --threads T        worker threads (default: cores - 1, at least 1)\n"
           "  -d, --depth D          batches in flight (default threads + 2)\n"
           "  -s, --seed SEED        seed of order, masks, points, flips (default 0)\n"
           "      --rank R           this rank (default 0)\n"
           "      --world W          number of ranks (default 1)\n"
           "      --resume E:C       start at epoch E with C images of it consumed\n"
           "      --flip P           horizontal flip probability (default 0)\n"
           "      --normalize        deliver normalised float NCHW images\n"
           "      --drop-last        skip the short last batch of every epoch\n"
           "      --verify           check every sample's CRC32C\n"
           "      --mask-size R      masks at R x R (needed for --mask-size source shards,\n"
           "                         which are resampled to it; default: the shards' R)\n"
           "      --mask-resample M  area or nearest, for source-size masks (default area)\n"
           "      --skip-damaged     report damaged samples and go on (default: stop)\n"
           "      --print-ids        print \"epoch step id id ...\" per batch on stdout\n"
           "                         (the summary then goes to stderr)\n"
           "  -q, --quiet            no summary, no progress bar\n"
           "  -h, --help             show this help and exit\n"
           "  -V, --version          show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 damaged samples were found, 2 usage error,\n"
           "3 the shards could not be opened or the loader failed.\n",
           cli_prog(), cli_prog());
}

enum {
    OPT_RANK = 256, OPT_WORLD, OPT_RESUME, OPT_FLIP, OPT_NORMALIZE, OPT_DROP_LAST, OPT_VERIFY,
    OPT_SKIP, OPT_PRINT_IDS
};
enum { OPT_MASK_SIZE = 512, OPT_MASK_RESAMPLE };

static uint64_t need_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
    uint64_t v;
    if (cli_parse_u64(s, min, max, &v))
        cli_usage_error("%s: '%s' is not an integer in %" PRIu64 "..%" PRIu64, opt, s, min, max);
    return v;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    cli_catch_sigbus(); /* shards are read through a memory mapping */
    static const struct option longopts[] = {
        {"batches", required_argument, NULL, 'n'},
        {"epochs", required_argument, NULL, 'e'},
        {"batch", required_argument, NULL, 'b'},
        {"masks", required_argument, NULL, 'm'},
        {"points", required_argument, NULL, 'k'},
        {"threads", required_argument, NULL, 't'},
        {"depth", required_argument, NULL, 'd'},
        {"seed", required_argument, NULL, 's'},
        {"rank", required_argument, NULL, OPT_RANK},
        {"world", required_argument, NULL, OPT_WORLD},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"flip", required_argument, NULL, OPT_FLIP},
        {"normalize", no_argument, NULL, OPT_NORMALIZE},
        {"drop-last", no_argument, NULL, OPT_DROP_LAST},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"skip-damaged", no_argument, NULL, OPT_SKIP},
        {"print-ids", no_argument, NULL, OPT_PRINT_IDS},
        {"mask-size", required_argument, NULL, OPT_MASK_SIZE},
        {"mask-resample", required_argument, NULL, OPT_MASK_RESAMPLE},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    sa1b_loader_config cfg;
    sa1b_loader_config_init(&cfg);
    cfg.batch_size = 8;
    cfg.max_masks = 16;
    cfg.points = 1;
    uint64_t batches = 0;
    int have_epochs = 0, quiet = 0, skip = 0, print_ids = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:e:b:m:k:t:d:s:qhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': batches = need_u64("--batches", optarg, 1, UINT64_MAX); break;
        case 'e':
            cfg.max_epochs = need_u64("--epochs", optarg, 1, UINT64_MAX);
            have_epochs = 1;
            break;
        case 'b': cfg.batch_size = (uint32_t)need_u64("--batch", optarg, 1, 1u << 20); break;
        case 'm': cfg.max_masks = (uint32_t)need_u64("--masks", optarg, 1, 1u << 16); break;
        case 'k': cfg.points = (uint32_t)need_u64("--points", optarg, 1, 1u << 16); break;
        case 't': cfg.threads = (uint32_t)need_u64("--threads", optarg, 1, 1024); break;
        case 'd': cfg.depth = (uint32_t)need_u64("--depth", optarg, 1, 4096); break;
        case 's': cfg.seed = need_u64("--seed", optarg, 0, UINT64_MAX); break;
        case OPT_RANK: cfg.rank = (uint32_t)need_u64("--rank", optarg, 0, UINT32_MAX - 1); break;
        case OPT_WORLD: cfg.world = (uint32_t)need_u64("--world", optarg, 1, UINT32_MAX); break;
        case OPT_RESUME: {
            const char *colon = strchr(optarg, ':');
            char ep[32];
            if (!colon || (size_t)(colon - optarg) >= sizeof ep)
                cli_usage_error("--resume: '%s' is not EPOCH:CONSUMED", optarg);
            memcpy(ep, optarg, (size_t)(colon - optarg));
            ep[colon - optarg] = '\0';
            uint64_t e, n;
            if (cli_parse_u64(ep, 0, UINT64_MAX, &e) || cli_parse_u64(colon + 1, 0, UINT64_MAX, &n))
                cli_usage_error("--resume: '%s' is not EPOCH:CONSUMED", optarg);
            cfg.epoch = e;
            cfg.consumed = n;
            break;
        }
        case OPT_FLIP:
            if (cli_parse_double(optarg, &cfg.flip_prob) || !(cfg.flip_prob >= 0.0 && cfg.flip_prob <= 1.0))
                cli_usage_error("--flip: '%s' is not a probability in [0, 1]", optarg);
            break;
        case OPT_NORMALIZE: cfg.normalize = 1; break;
        case OPT_DROP_LAST: cfg.drop_last = 1; break;
        case OPT_VERIFY: cfg.verify = 1; break;
        case OPT_MASK_SIZE:
            cfg.mask_size = (uint32_t)need_u64("--mask-size", optarg, 1, SA1B_SHARD_MAX_IMAGE_SIZE);
            break;
        case OPT_MASK_RESAMPLE:
            if (strcmp(optarg, "area") == 0) cfg.mask_resample = 0;
            else if (strcmp(optarg, "nearest") == 0) cfg.mask_resample = 1;
            else cli_usage_error("--mask-resample: '%s' is not area or nearest", optarg);
            break;
        case OPT_SKIP: skip = 1; break;
        case OPT_PRINT_IDS: print_ids = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(); cli_stdout_check(); return CLI_EXIT_OK;
        case 'V': cli_version(); return CLI_EXIT_OK;
        default:
            if (optopt >= 256 || (optopt && strchr("nebmktds", optopt)))
                cli_usage_error("option '%s' needs a value", argv[optind - 1]);
            if (optopt) cli_usage_error("unknown option '-%c'", optopt);
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) cli_usage_error("no shard file given");
    if (cfg.rank >= (cfg.world ? cfg.world : 1))
        cli_usage_error("--rank %u is not below --world %u", cfg.rank, cfg.world ? cfg.world : 1);
    if (!have_epochs && batches == 0) cfg.max_epochs = 1;
    if (argc - optind == 1 && sa1b_manifest_is_name(argv[optind])) {
        cfg.glob = argv[optind]; /* a manifest: the loader reads its list */
    } else {
        cfg.paths = (const char *const *)(argv + optind);
        cfg.n_paths = (size_t)(argc - optind);
    }

    sa1b_loader *L;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = sa1b_loader_open(&L, &cfg, &err);
    if (rc) cli_die(rc == SA1B_EINVAL || rc == SA1B_ERANGE ? CLI_EXIT_USAGE : CLI_EXIT_FATAL, "%s", err.msg);

    uint64_t n_images = 0;
    sa1b_loader_info(L, &n_images, NULL, NULL, NULL, NULL, NULL, NULL);
    uint64_t total = batches;
    if (!total && cfg.max_epochs) {
        uint64_t G = (uint64_t)cfg.batch_size * (cfg.world ? cfg.world : 1);
        uint64_t per = cfg.drop_last ? n_images / G : (n_images + G - 1) / G;
        total = per * cfg.max_epochs; /* a bar estimate (resume makes it shorter) */
    }
    size_t bb = sa1b_loader_batch_bytes(L);
    cli_progress prog;
    cli_progress_init(&prog, quiet);
    uint64_t done = 0, damaged = 0, delivered_bytes = 0;
    int status = CLI_EXIT_OK;
    double t0 = cli_now();
    while (!batches || done < batches) {
        sa1b_batch *b;
        rc = sa1b_loader_next(L, &b, &err);
        if (rc == SA1B_EOF) break;
        if (rc) {
            const char *path;
            if (sa1b_loader_damaged(L, &path, NULL, NULL)) {
                cli_progress_end(&prog);
                cli_warn("%s", err.msg);
                damaged++;
                status = CLI_EXIT_PARTIAL;
                if (skip) continue;
                break;
            }
            cli_progress_end(&prog);
            cli_warn("%s", err.msg);
            status = CLI_EXIT_FATAL;
            break;
        }
        if (print_ids) {
            printf("%" PRIu64 " %" PRIu64, b->epoch, b->step);
            for (uint32_t i = 0; i < b->count; i++) printf(" %" PRId64, b->image_ids[i]);
            putchar('\n');
        }
        done++;
        delivered_bytes += bb;
        sa1b_loader_release(L, b);
        if ((done & 7) == 0) {
            double dt = cli_now() - t0;
            sa1b_loader_stats st;
            sa1b_loader_stats_get(L, &st);
            cli_progress_update(&prog, done, total, "%.1f images/s",
                                dt > 0 ? (double)st.images / dt : 0.0);
        }
    }
    cli_progress_end(&prog);
    sa1b_loader_stats st;
    sa1b_loader_stats_get(L, &st);
    double dt = cli_now() - t0;
    sa1b_loader_close(L);
    if (!quiet) {
        FILE *out = print_ids ? stderr : stdout;
        fprintf(out,
                "batches=%" PRIu64 " images=%" PRIu64 " seconds=%.3f images/s=%.1f read=%.1fMB/s "
                "batch_data=%.1fMB/s wait=%.1f%% threads=%u depth=%u damaged=%" PRIu64 "\n",
                done, st.images, dt, dt > 0 ? (double)st.images / dt : 0.0,
                dt > 0 ? (double)st.bytes_read / dt / 1e6 : 0.0,
                dt > 0 ? (double)delivered_bytes / dt / 1e6 : 0.0,
                dt > 0 ? 100.0 * st.consumer_wait_s / dt : 0.0, st.threads, st.depth, damaged);
    }
    cli_stdout_check();
    return status;
}
