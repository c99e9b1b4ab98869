/*
 * sa1b-shard - streams SA-1B tars into memory-mapped shard files.
 *
 * The main thread reads the tar (libarchive, no extraction) and hands each
 * (jpg, json) pair to a slot of a ring; worker threads run sa1b_prep_run on
 * the slots in any order; the main thread takes finished slots back strictly
 * in input order and appends them to the shard writer, so the output and
 * the messages are byte-identical for any -j.  The ring bounds memory: at
 * most 2 * threads + 2 samples are in flight whatever the tar size.
 *
 * Outputs are finished under "<name>.partial.XXXXXX" (a name of this run
 * alone) and renamed to their final names only when the whole input is
 * done: the old part 0 (the mark of a complete set) and every other part
 * of the output's name left from earlier runs go first, then the new parts
 * are renamed last part first, so that a killed run never leaves a set of
 * shards that looks complete (--skip-existing checks part 0 last).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sa1b_image.h"
#include "sa1b_prep.h"
#include "sa1b_shard.h"
#include "sa1b_tar.h"

/* ---- options ------------------------------------------------------------ */

typedef struct options {
    const char *out;
    const char *name;          /* output stem for stdin */
    unsigned threads;
    uint64_t max_images;       /* 0: one shard per input */
    int skip_existing, strict, quiet, json_summary;
    int force;                 /* --force: replace existing outputs that are not shards of this tool */
    sa1b_prep_opts prep;
    int mask_size_set;
    char *dir;                 /* the folder the outputs go to (OUT, or OUT's folder), no trailing slash */
    char *prefix;              /* a folder OUT with one slash after it: the start of its files' paths */
} options;

static void usage(void)
{
    printf("Usage: %s [OPTIONS] -o OUT INPUT...\n"
           "Stream SA-1B tars (paths, or - for stdin) into memory-mapped shard files.\n"
           "With one input and OUT ending in .shard, OUT is the shard; otherwise OUT is a\n"
           "directory receiving <input basename>.shard per input.\n"
           "\n"
           "Output:\n"
           "  -o, --output OUT          shard file or directory (required)\n"
           "      --name NAME           output name for stdin (default: stdin)\n"
           "      --max-images N        split each input into shards of N images\n"
           "                            (<name>-00000.shard, <name>-00001.shard, ...)\n"
           "      --skip-existing       leave an input alone when its complete output\n"
           "                            exists with the same provenance\n"
           "      --force               replace an existing output that is not a shard\n"
           "                            of sa1b-shard, or a complete one with the shard\n"
           "                            of an input that ends early\n"
           "Images and masks:\n"
           "      --image-size S        letterbox images to S x S (default 1024)\n"
           "      --mask-size R         masks at R x R (default S/4); source: each\n"
           "                            annotation's own runs, loaders pick R\n"
           "      --image-format FMT    raw or jpeg (default raw)\n"
           "      --quality Q           JPEG quality for --image-format jpeg (default 90)\n"
           "      --jpeg-huffman TABLES optimized or standard Huffman tables for\n"
           "                            --image-format jpeg (default optimized; the\n"
           "                            same pixels, standard: more bytes, faster)\n"
           "      --mask-resample MODE  area or nearest (default area)\n"
           "      --mask-format FMT     packed (format version 1) or rle (runs,\n"
           "                            version 2; default packed)\n"
           "Filters and subsampling (defaults keep every mask that has a cell at R):\n"
           "      --min-area N          drop masks of fewer than N pixels\n"
           "      --min-iou X           drop masks with predicted_iou below X\n"
           "      --min-stability X     drop masks with stability_score below X\n"
           "      --keep-empty-masks    keep masks that have no cell at R x R (by default\n"
           "                            dropped, before --max-masks)\n"
           "      --max-masks N         keep at most N masks per image\n"
           "      --strategy NAME       random, quality, size-balanced or kmeans\n"
           "                            (default random)\n"
           "      --seed N              seed of every random choice (default 0)\n"
           "Running:\n"
           "  -j, --threads N           worker threads (default: all cores)\n"
           "      --strict              stop at the first bad sample or cut input (exit 3)\n"
           "  -q, --quiet               no progress bar and no summary line\n"
           "      --json-summary        print a JSON summary on stdout\n"
           "  -h, --help                show this help and exit\n"
           "  -V, --version             show the version and exit\n"
           "\n"
           "Exit status: 0 clean, 1 finished with skipped samples, 2 usage error,\n"
           "3 fatal I/O or format error.\n",
           cli_prog());
}

enum {
    OPT_NAME = 256, OPT_MAX_IMAGES, OPT_SKIP_EXISTING, OPT_IMAGE_SIZE, OPT_MASK_SIZE,
    OPT_IMAGE_FORMAT, OPT_QUALITY, OPT_MASK_RESAMPLE, OPT_MIN_AREA, OPT_MIN_IOU,
    OPT_MIN_STABILITY, OPT_MAX_MASKS, OPT_STRATEGY, OPT_SEED, OPT_STRICT, OPT_JSON_SUMMARY, OPT_FORCE
};
enum { OPT_MASK_FORMAT = 512, OPT_JPEG_HUFFMAN, OPT_KEEP_EMPTY_MASKS };

static const struct option long_opts[] = {
    {"output", required_argument, 0, 'o'},
    {"name", required_argument, 0, OPT_NAME},
    {"max-images", required_argument, 0, OPT_MAX_IMAGES},
    {"skip-existing", no_argument, 0, OPT_SKIP_EXISTING},
    {"image-size", required_argument, 0, OPT_IMAGE_SIZE},
    {"mask-size", required_argument, 0, OPT_MASK_SIZE},
    {"image-format", required_argument, 0, OPT_IMAGE_FORMAT},
    {"quality", required_argument, 0, OPT_QUALITY},
    {"jpeg-huffman", required_argument, 0, OPT_JPEG_HUFFMAN},
    {"mask-resample", required_argument, 0, OPT_MASK_RESAMPLE},
    {"mask-format", required_argument, 0, OPT_MASK_FORMAT},
    {"min-area", required_argument, 0, OPT_MIN_AREA},
    {"min-iou", required_argument, 0, OPT_MIN_IOU},
    {"min-stability", required_argument, 0, OPT_MIN_STABILITY},
    {"keep-empty-masks", no_argument, 0, OPT_KEEP_EMPTY_MASKS},
    {"max-masks", required_argument, 0, OPT_MAX_MASKS},
    {"strategy", required_argument, 0, OPT_STRATEGY},
    {"seed", required_argument, 0, OPT_SEED},
    {"threads", required_argument, 0, 'j'},
    {"strict", no_argument, 0, OPT_STRICT},
    {"quiet", no_argument, 0, 'q'},
    {"json-summary", no_argument, 0, OPT_JSON_SUMMARY},
    {"force", no_argument, 0, OPT_FORCE},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0}};

static uint64_t need_u64(const char *opt, const char *v, uint64_t min, uint64_t max)
{
    uint64_t x;
    if (cli_parse_u64(v, min, max, &x))
        cli_usage_error("%s: '%s' is not an integer in %llu..%llu", opt, v,
                        (unsigned long long)min, (unsigned long long)max);
    return x;
}

static double need_double(const char *opt, const char *v, double min, double max)
{
    double x;
    if (cli_parse_double(v, &x) || !(x >= min && x <= max))
        cli_usage_error("%s: '%s' is not a number in %g..%g", opt, v, min, max);
    return x;
}

static void parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    sa1b_prep_opts_default(&o->prep);
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = nproc > 0 ? (unsigned)nproc : 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:j:qhV", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case OPT_NAME:
            if (!*optarg || strchr(optarg, '/')) cli_usage_error("--name: '%s' is not a file name", optarg);
            o->name = optarg;
            break;
        case OPT_MAX_IMAGES: o->max_images = need_u64("--max-images", optarg, 1, UINT32_MAX); break;
        case OPT_SKIP_EXISTING: o->skip_existing = 1; break;
        case OPT_IMAGE_SIZE:
            o->prep.image_size = (uint32_t)need_u64("--image-size", optarg, 16, SA1B_SHARD_MAX_IMAGE_SIZE);
            break;
        case OPT_MASK_SIZE:
            if (strcmp(optarg, "source") == 0) { /* each annotation's own runs */
                o->prep.mask_size = 0;
                o->prep.mask_format = SA1B_SHARD_RLE_SOURCE;
            } else {
                o->prep.mask_size = (uint32_t)need_u64("--mask-size", optarg, 1, SA1B_SHARD_MAX_IMAGE_SIZE);
            }
            o->mask_size_set = 1;
            break;
        case OPT_IMAGE_FORMAT:
            if (strcmp(optarg, "raw") == 0) o->prep.image_format = SA1B_SHARD_RAW;
            else if (strcmp(optarg, "jpeg") == 0) o->prep.image_format = SA1B_SHARD_JPEG;
            else cli_usage_error("--image-format: '%s' is not raw or jpeg", optarg);
            break;
        case OPT_QUALITY: o->prep.jpeg_quality = (int)need_u64("--quality", optarg, 1, 100); break;
        case OPT_JPEG_HUFFMAN:
            if (strcmp(optarg, "optimized") == 0) o->prep.jpeg_huffman = SA1B_JPEG_OPTIMIZED;
            else if (strcmp(optarg, "standard") == 0) o->prep.jpeg_huffman = SA1B_JPEG_STANDARD;
            else cli_usage_error("--jpeg-huffman: '%s' is not optimized or standard", optarg);
            break;
        case OPT_MASK_RESAMPLE:
            if (strcmp(optarg, "area") == 0) o->prep.mask_mode = SA1B_MASK_AREA;
            else if (strcmp(optarg, "nearest") == 0) o->prep.mask_mode = SA1B_MASK_NEAREST;
            else cli_usage_error("--mask-resample: '%s' is not area or nearest", optarg);
            break;
        case OPT_MASK_FORMAT:
            if (strcmp(optarg, "packed") == 0) o->prep.mask_format = SA1B_SHARD_PACKED;
            else if (strcmp(optarg, "rle") == 0) {
                if (o->prep.mask_format != SA1B_SHARD_RLE_SOURCE) o->prep.mask_format = SA1B_SHARD_RLE;
            }
            else cli_usage_error("--mask-format: '%s' is not packed or rle", optarg);
            break;
        case OPT_MIN_AREA: o->prep.filter.min_area = need_u64("--min-area", optarg, 0, UINT64_MAX); break;
        /* SA-1B's predicted_iou can exceed 1 a little; stability is a ratio */
        case OPT_MIN_IOU: o->prep.filter.min_iou = need_double("--min-iou", optarg, 0, 2); break;
        case OPT_MIN_STABILITY: o->prep.filter.min_stability = need_double("--min-stability", optarg, 0, 1); break;
        case OPT_KEEP_EMPTY_MASKS: o->prep.keep_empty = 1; break;
        case OPT_MAX_MASKS: o->prep.max_masks = need_u64("--max-masks", optarg, 1, 100000); break;
        case OPT_STRATEGY: {
            int s = sa1b_strategy_parse(optarg);
            if (s < 0) cli_usage_error("--strategy: '%s' is not random, quality, size-balanced or kmeans", optarg);
            o->prep.strategy = (sa1b_strategy)s;
            break;
        }
        case OPT_SEED: o->prep.seed = need_u64("--seed", optarg, 0, UINT64_MAX); break;
        case 'j': o->threads = (unsigned)need_u64("--threads", optarg, 1, 256); break;
        case OPT_STRICT: o->strict = 1; break;
        case 'q': o->quiet = 1; break;
        case OPT_JSON_SUMMARY: o->json_summary = 1; break;
        case OPT_FORCE: o->force = 1; break;
        case 'h': usage(); cli_stdout_check(); exit(0);
        case 'V': cli_version(); exit(0);
        default: fprintf(stderr, "Try '%s --help' for more information.\n", cli_prog()); exit(CLI_EXIT_USAGE);
        }
    }
    if (!o->out) cli_usage_error("no output: give -o OUT");
    if (optind >= argc) cli_usage_error("no input: give one or more tars, or - for stdin");
    if (!o->mask_size_set) o->prep.mask_size = o->prep.image_size / 4;
    if (o->mask_size_set && o->prep.mask_size == 0 && o->prep.mask_format != SA1B_SHARD_RLE_SOURCE)
        cli_usage_error("--mask-size source stores runs: --mask-format does not apply");
    if (o->prep.mask_size > o->prep.image_size)
        cli_usage_error("--mask-size %u is larger than --image-size %u", o->prep.mask_size, o->prep.image_size);
    int n_stdin = 0;
    for (int i = optind; i < argc; i++) n_stdin += strcmp(argv[i], "-") == 0;
    if (n_stdin > 1) cli_usage_error("stdin (-) given more than once");
}

/* ---- output names and provenance -------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The length of a part number as part_path writes it ("%05llu": five
 * digits, more only without a leading zero) at p, or 0. */
static size_t part_digits(const char *p)
{
    size_t d = 0;
    while (p[d] >= '0' && p[d] <= '9') d++;
    return d == 5 || (d > 5 && d <= 20 && p[0] != '0') ? d : 0;
}

/* The stem of an input: basename without .tar / .tar.gz / .tar.zst / .tar.xz / .tgz. */
static char *input_stem(const options *o, const char *input)
{
    if (strcmp(input, "-") == 0) return strdup(o->name ? o->name : "stdin");
    const char *b = strrchr(input, '/');
    b = b ? b + 1 : input;
    char *s = strdup(b);
    if (!s) return NULL;
    static const char *const exts[] = {".tar.gz", ".tar.zst", ".tar.xz", ".tgz", ".tar"};
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (ends_with(s, exts[i]) && strlen(s) > strlen(exts[i])) {
            s[strlen(s) - strlen(exts[i])] = '\0';
            break;
        }
    return s;
}

/* Path of part `part` of an input: OUT itself (single .shard output),
 * OUT/<stem>.shard, or with --max-images <...>-NNNNN.shard. */
static char *part_path(const options *o, int single_file, const char *stem, uint64_t part)
{
    char *p = NULL;
    int n;
    if (single_file) {
        if (!o->max_images) return strdup(o->out);
        n = asprintf(&p, "%.*s-%05llu.shard", (int)(strlen(o->out) - 6), o->out, (unsigned long long)part);
    } else if (o->max_images) {
        n = asprintf(&p, "%s%s-%05llu.shard", o->prefix, stem, (unsigned long long)part);
    } else {
        n = asprintf(&p, "%s%s.shard", o->prefix, stem);
    }
    return n < 0 ? NULL : p;
}

/* Provenance: everything that determines the bytes of a part.  The input
 * is recorded by name (the stem), not by path, so that a tar read from a
 * path and the same tar on stdin with --name give identical shards. */
static json_t *provenance_json(const options *o, const char *stem, uint64_t part)
{
    json_t *opt = json_object();
    const sa1b_prep_opts *p = &o->prep;
    json_object_set_new(opt, "image_size", json_integer(p->image_size));
    json_object_set_new(opt, "mask_size", json_integer(p->mask_size));
    json_object_set_new(opt, "image_format", json_string(p->image_format == SA1B_SHARD_JPEG ? "jpeg" : "raw"));
    if (p->image_format == SA1B_SHARD_JPEG) {
        json_object_set_new(opt, "quality", json_integer(p->jpeg_quality));
        json_object_set_new(opt, "jpeg_huffman",
                            json_string(p->jpeg_huffman == SA1B_JPEG_STANDARD ? "standard" : "optimized"));
    }
    json_object_set_new(opt, "mask_resample", json_string(p->mask_mode == SA1B_MASK_NEAREST ? "nearest" : "area"));
    /* only when not the default, so that packed shards keep version 1's bytes */
    if (p->mask_format != SA1B_SHARD_PACKED)
        json_object_set_new(opt, "mask_format",
                            json_string(p->mask_format == SA1B_SHARD_RLE ? "rle" : "source"));
    json_object_set_new(opt, "min_area", json_integer((json_int_t)p->filter.min_area));
    json_object_set_new(opt, "min_iou", isfinite(p->filter.min_iou) ? json_real(p->filter.min_iou) : json_null());
    json_object_set_new(opt, "min_stability",
                        isfinite(p->filter.min_stability) ? json_real(p->filter.min_stability) : json_null());
    /* always: shards made before masks empty at R were dropped lack it, and
     * they hold them */
    json_object_set_new(opt, "keep_empty_masks", json_boolean(p->keep_empty));
    json_object_set_new(opt, "max_masks", json_integer((json_int_t)p->max_masks));
    json_object_set_new(opt, "strategy", json_string(sa1b_strategy_name(p->strategy)));
    json_object_set_new(opt, "seed", json_integer((json_int_t)p->seed));
    json_object_set_new(opt, "max_images", json_integer((json_int_t)o->max_images));

    json_t *root = json_object();
    json_object_set_new(root, "tool", json_string("sa1b-shard"));
    json_object_set_new(root, "version", json_string(PACKAGE_VERSION));
    json_object_set_new(root, "input", json_string(stem));
    json_object_set_new(root, "part", json_integer((json_int_t)part));
    json_object_set_new(root, "options", opt);
    /* a part of a split input says whether it is the last one: false here,
     * true in the last part's final provenance; so a set whose highest part
     * says false lacks parts (prov_last) */
    if (o->max_images) json_object_set_new(root, "last_part", json_false());
    return root;
}

/* Whether a part's provenance marks the input's last part: 1 yes
 * ("last_part" true, or without that key the input's end recorded, as the
 * last part of shards made before the key had it), 0 no ("last_part"
 * false), -1 unknown (a part made before either was recorded). */
static int prov_last(const json_t *prov)
{
    const json_t *l = json_object_get(prov, "last_part");
    if (json_is_boolean(l)) return json_is_true(l);
    return json_object_get(prov, "input_clean_end") ? 1 : -1;
}

/* What a part holds that its options do not say (part_matches does not
 * compare it): its masks with no cell at R, dropped or (--keep-empty-masks)
 * kept. */
static void part_counts(json_t *root, const options *o, uint64_t empty)
{
    json_object_set_new(root, o->prep.keep_empty ? "masks_empty_kept" : "masks_empty_dropped",
                        json_integer((json_int_t)empty));
}

static char *provenance(const options *o, const char *stem, uint64_t part, uint64_t empty)
{
    json_t *root = provenance_json(o, stem, part);
    part_counts(root, o, empty);
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}

/* The provenance of an input's last part, completed when the input ended:
 * also the input's size, the CRC32C of its bytes and whether it ended
 * cleanly (with the last sample read before an early end).  No time stamp:
 * a path and the same bytes on stdin give the same shard. */
static char *final_provenance(const options *o, const char *stem, uint64_t part, const sa1b_tar_identity *id,
                              const char *ends_after, uint64_t skipped, uint64_t empty)
{
    json_t *root = provenance_json(o, stem, part);
    part_counts(root, o, empty);
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)id->crc32c);
    json_object_set_new(root, "input_bytes", json_integer((json_int_t)id->bytes));
    json_object_set_new(root, "input_crc32c", json_string(crc));
    json_object_set_new(root, "input_clean_end", json_boolean(id->clean_end));
    if (o->max_images) json_object_set_new(root, "last_part", json_true());
    if (!id->clean_end) json_object_set_new(root, "input_ends_after", json_string(ends_after));
    /* so that --skip-existing says a rerun keeps a shard that lacks them */
    if (skipped) json_object_set_new(root, "samples_skipped", json_integer((json_int_t)skipped));
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}

/* The provenance of path when it is a shard that sa1b-shard wrote (its
 * provenance says so), else NULL.  unreadable (when not NULL): the reason
 * when the file could not be read to tell (it cannot be opened or mapped,
 * memory ran out: it may well be a shard, another input's too), else "". */
static json_t *read_provenance(const char *path, char *unreadable, size_t len)
{
    sa1b_shard *sh = NULL;
    json_t *p = NULL;
    sa1b_error e;
    int rc = sa1b_shard_open(&sh, path, &e);
    if (unreadable) snprintf(unreadable, len, "%s", rc == SA1B_EIO || rc == SA1B_ENOMEM ? e.msg : "");
    if (rc == SA1B_OK) {
        const sa1b_shard_info *in = sa1b_shard_get_info(sh);
        p = json_loadb(in->provenance, in->provenance_len, 0, NULL);
        const char *tool = json_string_value(json_object_get(p, "tool"));
        if (!tool || strcmp(tool, "sa1b-shard") != 0) {
            json_decref(p);
            p = NULL;
        }
    }
    sa1b_shard_close(sh);
    return p;
}

static json_t *our_provenance(const char *path) { return read_provenance(path, NULL, 0); }

/* For a file read_provenance found no shard of this tool in: 1 with why
 * (sa1b_shard_open's reason) when it begins as a shard does, but does not
 * open as one (cut short, damaged): told apart from a file that is no
 * shard at all in the messages. */
static int damaged_shard(const char *path, char *why, size_t len)
{
    char magic[8];
    FILE *f = fopen(path, "rb");
    int begins = f && fread(magic, 1, sizeof magic, f) == sizeof magic && !memcmp(magic, SA1B_SHARD_MAGIC, 8);
    if (f) fclose(f);
    sa1b_shard *sh = NULL;
    sa1b_error e;
    if (!begins || sa1b_shard_open(&sh, path, &e) == SA1B_OK) {
        sa1b_shard_close(sh);
        return 0;
    }
    snprintf(why, len, "%s", e.msg);
    return 1;
}

/* One part against what this run would write: 1 the same, 0 not (why says
 * so when there is a reason to tell).  Only what shapes the output counts:
 * the input's name, the part, the options, and in the input's last part its
 * recorded size (against size_now) and clean end; not the tool's version.
 * A shard made before inputs were recorded lacks those keys: its options
 * decide, as they did then. */
static int part_matches(const options *o, const char *stem, uint64_t part, const char *path, int last,
                        uint64_t size_now, uint64_t *skipped, char *why, size_t why_len)
{
    json_t *want = provenance_json(o, stem, part), *have = our_provenance(path);
    const char *keys[] = {"input", "part", "options"};
    /* a shard made before the masks empty at R were dropped kept them all:
     * it is a shard of --keep-empty-masks */
    json_t *hopt = json_object_get(have, "options");
    int before_empty = json_is_object(hopt) && !json_object_get(hopt, "keep_empty_masks");
    if (before_empty) json_object_set_new(hopt, "keep_empty_masks", json_true());
    int same = have != NULL;
    for (size_t k = 0; k < 3 && same; k++) same = json_equal(json_object_get(want, keys[k]), json_object_get(have, keys[k]));
    if (have && !same && before_empty && !o->prep.keep_empty) {
        json_object_set_new(hopt, "keep_empty_masks", json_false()); /* (the options but for that one?) */
        int only_that = json_equal(json_object_get(want, "options"), hopt);
        snprintf(why, why_len, only_that ? "its shard keeps the masks empty at R (made before sa1b-shard dropped them; "
                                           "--keep-empty-masks keeps such a shard)"
                                         : "its shard was made with other options");
    } else if (have && !same)
        snprintf(why, why_len, "its shard was made with other options");
    if (same && last && o->max_images && prov_last(have) == 0) {
        snprintf(why, why_len, "its set of shards lacks its last part (part %llu is not the last)",
                 (unsigned long long)part);
        same = 0;
    }
    json_t *bytes = json_object_get(have, "input_bytes"), *clean = json_object_get(have, "input_clean_end");
    if (same && last && json_is_false(clean)) {
        const char *after = json_string_value(json_object_get(have, "input_ends_after"));
        if (after && *after)
            snprintf(why, why_len, "the run that made its shard read it to an early end (after %s)", after);
        else
            snprintf(why, why_len, "the run that made its shard read it to an early end (before its first sample)");
        same = 0;
    }
    if (same && last && json_is_integer(bytes) && (uint64_t)json_integer_value(bytes) != size_now) {
        snprintf(why, why_len, "input changed since its shard was made (%lld bytes then, %llu now)",
                 (long long)json_integer_value(bytes), (unsigned long long)size_now);
        same = 0;
    }
    json_t *k = json_object_get(have, "samples_skipped"); /* the last part's record of the run */
    if (same && last && skipped && json_is_integer(k) && json_integer_value(k) > 0)
        *skipped = (uint64_t)json_integer_value(k);
    json_decref(want);
    json_decref(have);
    return same;
}

/* True when every part of the input exists and matches (part_matches),
 * with *skipped (when not NULL) the samples the run that made them skipped
 * (its last part's provenance; 0 when none or not recorded).
 * A commit removes the old part 0 and the old parts past the new ones
 * before it renames the new parts, last first (commit), so part 0 present
 * means the set of one run is complete; the parts are 0.. up to the first
 * missing index.  why: the
 * reason when an existing output is not taken ("" when none exists). */
static int outputs_complete(const options *o, int single_file, const char *stem, const char *input,
                            uint64_t *skipped, char *why, size_t why_len)
{
    struct stat st;
    uint64_t size_now = stat(input, &st) == 0 ? (uint64_t)st.st_size : 0;
    why[0] = 0;
    if (skipped) *skipped = 0;
    for (uint64_t part = 0;; part++) {
        char *path = part_path(o, single_file, stem, part), *next = NULL;
        if (!path) return 0;
        if (access(path, F_OK) != 0) {
            free(path);
            return part > 0;
        }
        int last = !o->max_images;
        if (!last) {
            next = part_path(o, single_file, stem, part + 1);
            last = next && access(next, F_OK) != 0;
            free(next);
        }
        int same = part_matches(o, stem, part, path, last, size_now, skipped, why, why_len);
        free(path);
        if (!same) return 0;
        if (last) return 1;
    }
}

/* ---- outputs that must not be written ---------------------------------- */

/* ---- the output set of an input --------------------------------------- */

/* An input's outputs have one of two forms: "<base>.shard" alone (without
 * --max-images) or parts "<base>-NNNNN.shard" (with it), in one folder:
 * OUT's folder and OUT's name less ".shard" (one .shard output), or OUT
 * and the input's stem.  prefix: the folder with its slash ("" for the
 * current folder), as part_path spells it. */
typedef struct out_set {
    const char *prefix, *dir;  /* o->prefix and o->dir (out_folder) */
    char *base;
    const char *stem;          /* the input's name its shards record */
} out_set;

static void out_set_free(out_set *s)
{
    free(s->base);
}

static int out_set_init(out_set *s, const options *o, int single_file, const char *stem)
{
    s->prefix = o->prefix;
    s->dir = o->dir;
    s->base = single_file ? strndup(o->out + strlen(o->prefix), strlen(o->out) - strlen(o->prefix) - 6)
                          : strdup(stem);
    /* only this input's files are the set's: with one .shard output too, the
     * other form or parts past the new ones of another input (which wrote
     * OUT's name earlier) are that input's shards, never removed */
    s->stem = stem;
    return s->base ? 0 : -1;
}

/* Path of part k of the form (numbered: a part of --max-images). */
static char *out_set_path(const out_set *s, int numbered, uint64_t k)
{
    char *p = NULL;
    int n = numbered ? asprintf(&p, "%s%s-%05llu.shard", s->prefix, s->base, (unsigned long long)k)
                     : asprintf(&p, "%s%s.shard", s->prefix, s->base);
    return n < 0 ? NULL : p;
}

/* A file name of the set: "<base>.shard" (*numbered 0) or
 * "<base>-NNNNN.shard" as part_path writes it (part_digits; *numbered 1, *k
 * the number).  1 or 0. */
static int out_set_name(const out_set *s, const char *name, int *numbered, uint64_t *k)
{
    size_t lb = strlen(s->base), ln = strlen(name);
    if (ln < lb + 6 || strncmp(name, s->base, lb) != 0 || strcmp(name + ln - 6, ".shard") != 0) return 0;
    const char *p = name + lb, *end = name + ln - 6;
    if (p == end) {
        *numbered = 0;
        *k = 0;
        return 1;
    }
    if (*p++ != '-') return 0;
    size_t d = part_digits(p);
    if (!d || d != (size_t)(end - p)) return 0;
    uint64_t v = 0;
    for (; p < end; p++) v = v * 10 + (uint64_t)(*p - '0'); /* (digits: part_digits) */
    *numbered = 1;
    *k = v;
    return 1;
}

/* Whether an existing file whose provenance is prov (NULL: not a shard of
 * sa1b-shard) may be replaced by a part of input stem: this input's shard;
 * at OUT itself (the file the user named: one .shard output without
 * --max-images) any shard; a file that is no shard only with --force;
 * never another input's shard at a name derived from OUT. */
static int may_replace(const options *o, int single_file, const char *stem, const json_t *prov)
{
    if (!prov) return o->force;
    const char *in = json_string_value(json_object_get(prov, "input"));
    return (in && strcmp(in, stem) == 0) || (single_file && !o->max_images);
}

/* True when prov (a shard of sa1b-shard) was written as part k of this
 * set's form: its part number is k, it was split (numbered) or not, and its
 * input is this input (the name its provenance records).  Only such files
 * are removed as left over from an earlier run: never a file of another
 * input, whose name only looks like a part ("a-00001.tar" gives
 * "a-00001.shard") or which wrote OUT's name earlier (one .shard output). */
static int out_set_member(const out_set *s, const json_t *prov, int numbered, uint64_t k)
{
    const json_t *part = json_object_get(prov, "part");
    const json_t *mi = json_object_get(json_object_get(prov, "options"), "max_images");
    const char *input = json_string_value(json_object_get(prov, "input"));
    if (!json_is_integer(part) || json_integer_value(part) < 0 || (uint64_t)json_integer_value(part) != k)
        return 0;
    int split = json_is_integer(mi) && json_integer_value(mi) > 0;
    if (split != numbered) return 0;
    return input && strcmp(input, s->stem) == 0;
}

/* True when the set of the form holds a complete output: part 0 and the
 * parts after it up to the first missing one are shards of sa1b-shard (of
 * this set: member, when strict) and the last of them was made from an
 * input that ended cleanly.  *part0: part 0's path, *input: the input its
 * provenance names (NULL when it names none; the caller frees both). */
static int out_set_complete(const out_set *s, int numbered, int strict, char **part0, char **input)
{
    int complete = 0;
    *part0 = NULL;
    *input = NULL;
    for (uint64_t k = 0;; k++) {
        char *path = out_set_path(s, numbered, k);
        if (!path || access(path, F_OK) != 0) {
            free(path);
            break;
        }
        json_t *prov = our_provenance(path);
        int ok = prov && (!strict || out_set_member(s, prov, numbered, k));
        /* the highest part present must be the last (prov_last; unknown: a
         * set made before parts said so is taken as complete) */
        complete = ok && !json_is_false(json_object_get(prov, "input_clean_end")) &&
                   (!numbered || prov_last(prov) != 0);
        const char *in = json_string_value(json_object_get(prov, "input"));
        if (k == 0 && in) *input = strdup(in);
        json_decref(prov);
        if (k == 0) *part0 = path;
        else free(path);
        if (!ok || !numbered) break;
    }
    if (!complete) {
        free(*part0);
        free(*input);
        *part0 = *input = NULL;
    }
    return complete;
}

/* Sets o->dir and o->prefix, the folder of the outputs and what their
 * paths start with: OUT without its trailing slashes and with one ("out/"
 * gives 'out/a.shard', never 'out//a.shard'), or for a single .shard
 * output OUT's folder and OUT up to its last slash ("" for the current
 * folder).  0 or -1 (out of memory). */
static int out_folder(options *o, int single_file)
{
    size_t n = strlen(o->out);
    if (single_file) {
        const char *slash = strrchr(o->out, '/');
        n = slash ? (slash == o->out ? 1 : (size_t)(slash - o->out)) : 0;
        o->dir = n ? strndup(o->out, n) : strdup(".");
        o->prefix = strndup(o->out, slash ? (size_t)(slash - o->out) + 1 : 0);
    } else {
        while (n > 1 && o->out[n - 1] == '/') n--;
        o->dir = strndup(o->out, n);
        if (o->dir && asprintf(&o->prefix, "%s%s", o->dir, strcmp(o->dir, "/") == 0 ? "" : "/") < 0)
            o->prefix = NULL;
    }
    return o->dir && o->prefix ? 0 : -1;
}

/* Exit 2 when an input (the same file, or stdin redirected from it) is a
 * file of the form of stem's set that this run writes: any part, not only
 * parts 0 up to the first missing one (with --max-images an input named
 * like part 1 became its own output under --force). */
static void check_not_input(const options *o, int single_file, const char *stem, int argc, char **argv)
{
    out_set s;
    if (out_set_init(&s, o, single_file, stem) != 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    DIR *d = opendir(s.dir);
    char *clash = NULL; /* "PATH\0INPUT" */
    for (struct dirent *e; d && !clash && (e = readdir(d)) != NULL;) {
        int numbered;
        uint64_t k;
        if (!out_set_name(&s, e->d_name, &numbered, &k) || numbered != (o->max_images != 0)) continue;
        char *path = NULL;
        struct stat out_st;
        if (asprintf(&path, "%s%s", s.prefix, e->d_name) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
        for (int i = optind; i < argc && !clash && stat(path, &out_st) == 0; i++) {
            struct stat st;
            int got = strcmp(argv[i], "-") == 0 ? fstat(0, &st) == 0 && S_ISREG(st.st_mode) : stat(argv[i], &st) == 0;
            if (got && st.st_dev == out_st.st_dev && st.st_ino == out_st.st_ino &&
                asprintf(&clash, "%s%c%s", path, 0, argv[i]) < 0)
                cli_die(CLI_EXIT_FATAL, "out of memory");
        }
        free(path);
    }
    if (d) closedir(d);
    out_set_free(&s);
    if (clash) { /* (all freed but the message: nothing left for LeakSanitizer but it) */
        const char *in = clash + strlen(clash) + 1;
        cli_usage_error("output '%s' is the input '%s'%s", clash, in, strcmp(in, "-") == 0 ? " (standard input)" : "");
    }
}

/* Whether --skip-existing skips the input (its outputs are complete): a
 * link among them is then never replaced, and allowed. */
static int up_to_date(const options *o, int single_file, const char *stem, const char *input)
{
    char why[200];
    return o->skip_existing && strcmp(input, "-") != 0 && outputs_complete(o, single_file, stem, input, NULL, why, sizeof why);
}

/* Before anything is opened for writing: no output may be an input (the
 * same file, or stdin redirected from it), two inputs may not share an
 * output, an output that is a symbolic link (which the commit would refuse
 * after all the work) is one --skip-existing skips, and an existing output
 * that is not a shard of this tool is replaced only with --force.  Exit 2
 * otherwise. */
static void check_outputs(const options *o, int single_file, int argc, char **argv)
{
    struct stat st; /* the folder of OUT must exist (a directory OUT is created) */
    if (single_file && (stat(o->dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        cli_die(CLI_EXIT_FATAL, "output folder '%s' does not exist", o->dir);
    for (int i = optind; i < argc; i++) {
        char *stem = input_stem(o, argv[i]);
        if (!stem) cli_die(CLI_EXIT_FATAL, "out of memory");
        for (int k = optind; k < i; k++) {
            char *other = input_stem(o, argv[k]);
            int same = other && strcmp(other, stem) == 0;
            free(other);
            if (same)
                cli_usage_error("inputs '%s' and '%s' would both write '%s.shard' (use --name for stdin, or "
                                "shard them into different folders)", argv[k], argv[i], stem);
        }
        check_not_input(o, single_file, stem, argc, argv); /* any input, not only this one */
        /* parts 0..: each that exists is checked (one part without --max-images) */
        for (uint64_t part = 0;; part++) {
            char *path = part_path(o, single_file, stem, part);
            if (!path) cli_die(CLI_EXIT_FATAL, "out of memory");
            struct stat out_st; /* the link itself, as the commit sees it (check_finals) */
            if (lstat(path, &out_st) != 0) {
                free(path);
                break;
            }
            if (S_ISLNK(out_st.st_mode) && !up_to_date(o, single_file, stem, argv[i]))
                cli_usage_error("output '%s' is a symbolic link: only a regular file is replaced (remove the link, "
                                "or give -o its target%s)", path, single_file ? "" : "'s folder");
            if (S_ISLNK(out_st.st_mode) && stat(path, &out_st) != 0) { /* (a set --skip-existing skips) */
                free(path);
                break;
            }
            if (!S_ISREG(out_st.st_mode))
                cli_usage_error("output '%s' exists and is not a regular file", path);
            char unreadable[256];
            json_t *prov = read_provenance(path, unreadable, sizeof unreadable);
            if (*unreadable) /* whose it is cannot be told: never taken for a file that is no shard */
                cli_die(CLI_EXIT_FATAL, "cannot read output '%s': %s", path, unreadable);
            char damage[300];
            if (!o->force && !prov && damaged_shard(path, damage, sizeof damage))
                cli_usage_error("output '%s' is a damaged shard (%s), whose input cannot be told: give --force to "
                                "replace it, or remove it", path, damage);
            if (!o->force && !prov)
                cli_usage_error("output '%s' exists and is not a shard of sa1b-shard: give --force to replace it", path);
            const char *in = json_string_value(json_object_get(prov, "input"));
            char whose[256];
            snprintf(whose, sizeof whose, "%s", in ? in : "?");
            int other = prov && !may_replace(o, single_file, stem, prov); /* another input's shard */
            json_decref(prov); /* (before a usage error's exit: nothing left for LeakSanitizer) */
            if (other)
                cli_usage_error("output '%s' is a shard of input '%s', not of '%s': two inputs would write the same "
                                "output (shard them into different folders)", path, whose, argv[i]);
            free(path);
            if (!o->max_images) break;
        }
        free(stem);
    }
}

/* ---- temporaries ------------------------------------------------------- */

/* The temporaries of this run ("<out>.partial.TTTTTT.tmp-XXXXXX" while a
 * part is written, "<out>.partial.TTTTTT" until its input is done, TTTTTT
 * the run's token: names of this run alone, so that two runs writing one
 * output never take each other's parts), removed by the SIGINT/SIGTERM
 * handler.  A list that only grows (a node is reused once dropped), so that
 * no temporary is ever left out of it however many parts an input has, and
 * the handler walks it without locking or allocating. */
typedef struct temp_node {
    struct temp_node *next;
    volatile sig_atomic_t used;
    char *path;
    size_t cap;
} temp_node;
static temp_node *_Atomic temps;
static pthread_mutex_t temps_mu = PTHREAD_MUTEX_INITIALIZER;

/* The node, or NULL: out of memory (the caller fails the part: no
 * temporary is ever left unregistered). */
static temp_node *temp_add(const char *path)
{
    if (!path) return NULL;
    size_t n = strlen(path) + 1;
    pthread_mutex_lock(&temps_mu);
    temp_node *t = NULL;
    for (temp_node *p = atomic_load(&temps); p && !t; p = p->next)
        if (!p->used && p->cap >= n) t = p;
    if (!t && (t = calloc(1, sizeof *t)) != NULL) {
        if ((t->path = malloc(n)) != NULL) {
            t->cap = n;
            t->next = atomic_load(&temps);
            atomic_store(&temps, t); /* published whole: the handler sees it unused */
        } else {
            free(t);
            t = NULL;
        }
    }
    if (t) {
        memcpy(t->path, path, n);
        atomic_signal_fence(memory_order_seq_cst);
        t->used = 1;
    }
    pthread_mutex_unlock(&temps_mu);
    return t;
}

static void temp_drop(temp_node *t)
{
    if (!t) return;
    pthread_mutex_lock(&temps_mu);
    t->used = 0;
    pthread_mutex_unlock(&temps_mu);
}

static void remove_temps(void)
{
    for (temp_node *p = atomic_load(&temps); p; p = p->next)
        if (p->used) unlink(p->path);
}

/* The commit's window (commit_open .. commit_close): from the removal of
 * the old part 0 until the last new part is renamed into place, a SIGINT,
 * SIGTERM or SIGHUP waits: neither set is whole there, and the new parts
 * not yet renamed may be the only copy of their images (an input read from
 * standard input cannot be read again), so the handler must not remove
 * them; the signal is acted on once they are in place.  One state, changed
 * only by atomic exchanges (the handler runs in any thread): 0 outside the
 * window, COMMIT_OPEN in it, COMMIT_OPEN | sig once a signal came,
 * COMMIT_DYING once a handler outside the window ends the run (the window
 * never opens then: commit_open waits for the end). */
enum { COMMIT_OPEN = 0x100, COMMIT_DYING = 0x200 };
static atomic_int commit_state;

static void on_terminate(int sig)
{
    /* in the window: noted, acted on by commit_close; outside it: marked
     * dying in the same exchange, so that commit_open never opens it now */
    int s = atomic_load(&commit_state);
    while (!(s & COMMIT_DYING)) {
        int to = s & COMMIT_OPEN ? COMMIT_OPEN | (s & 0xff ? s & 0xff : sig) : COMMIT_DYING;
        if (atomic_compare_exchange_weak(&commit_state, &s, to)) {
            if (to & COMMIT_OPEN) return;
            break;
        }
    }
    remove_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void commit_open(void)
{
    int s = 0;
    if (!atomic_compare_exchange_strong(&commit_state, &s, COMMIT_OPEN))
        for (;;) pause(); /* a handler in another thread is ending the run: the old set stays untouched */
}

/* Ends the window: a signal that came in it is acted on now. */
static void commit_close(void)
{
    int s = atomic_exchange(&commit_state, 0);
    if (s & 0xff) on_terminate(s & 0xff);
}

/* Tests: SA1B_TEST_KILL=WHAT:N[:kill] raises SIGTERM (SIGKILL) at a fixed
 * point of the run, after the N-th sample written (sample), part finished
 * (part) or output renamed into place (commit), counted over the whole
 * run. */
static struct {
    char what[16], sig[8];
    unsigned long long n, count[3];
} kill_hook;

static void test_hook(int what)
{
    static const char *const names[] = {"sample", "part", "commit"};
    if (kill_hook.n && strcmp(kill_hook.what, names[what]) == 0 && ++kill_hook.count[what] == kill_hook.n)
        raise(strcasecmp(kill_hook.sig, "kill") == 0 ? SIGKILL : SIGTERM);
}

/* Tests: SA1B_TEST_PAUSE=WHAT:N:FIFO stops the run at the N-th WHAT,
 * counted over the whole run: finish (a part's writer has renamed it to its
 * partial name, before the run locks that again) or commit (an input's
 * parts are finished, before its commit takes the folder's lock).  The run
 * writes its pid into FIFO, then waits until FIFO.go is opened and closed. */
static struct {
    char what[16];
    unsigned long long n, count;
    char path[4096];
} pause_hook;

static void test_pause(const char *what)
{
    if (!pause_hook.n || strcmp(pause_hook.what, what) != 0 || ++pause_hook.count != pause_hook.n) return;
    FILE *f = fopen(pause_hook.path, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
    char go[4200];
    snprintf(go, sizeof go, "%s.go", pause_hook.path);
    int fd = open(go, O_RDONLY | O_CLOEXEC);
    char b[64];
    while (fd >= 0 && read(fd, b, sizeof b) > 0) {
    }
    if (fd >= 0) close(fd);
}

/* Tests: SA1B_TEST_FAIL=nomem:NAME makes the preparation of the sample
 * NAME (sa_123) fail as out of memory, whichever worker takes it. */
static char fail_nomem[256];

static void init_signals(void)
{
    cli_on_termination(on_terminate);
    signal(SIGPIPE, SIG_IGN); /* a reader of stderr that went away (| tee killed by the same Ctrl-C) */
    const char *f = getenv("SA1B_TEST_FAIL");
    if (f && strncmp(f, "nomem:", 6) == 0) snprintf(fail_nomem, sizeof fail_nomem, "%s", f + 6);
    const char *k = getenv("SA1B_TEST_KILL");
    if (k && sscanf(k, "%15[a-z]:%llu:%7s", kill_hook.what, &kill_hook.n, kill_hook.sig) < 2) kill_hook.n = 0;
    k = getenv("SA1B_TEST_PAUSE");
    if (k && sscanf(k, "%15[a-z]:%llu:%4095s", pause_hook.what, &pause_hook.n, pause_hook.path) != 3)
        pause_hook.n = 0;
}

/* The run's lock file, ".sa1b-shard.lock" in the output folder (created
 * when missing, never removed): a regular file, as fcntl() locks need, so
 * that the locks hold on NFS too, where flock() on a folder fails (Linux
 * emulates flock there with fcntl locks on a file open for writing).  One
 * descriptor for the whole run (closing any descriptor of the file would
 * drop every fcntl lock the process holds on it), two kinds of lock:
 *  - byte 0, exclusive while a run removes stale temporaries or commits
 *    (lock_folder), so that two commits never interleave;
 *  - byte 1 + the run's token (six characters of [A-Za-z0-9] read as a
 *    base-62 number), exclusive for the whole run: the token is the run's
 *    alone while it lives, every temporary of the run carries it in its
 *    name (".partial.TTTTTT"), and a temporary whose token nobody holds is
 *    stale.  So a run holds one descriptor however many parts it finishes. */
static struct {
    int fd;                    /* -1: no lock file */
    int token_locked;          /* the token's byte is ours */
    char token[7];
    atomic_int warned;
} run_lock = {.fd = -1};

static const char b62[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

static off_t token_offset(const char *t)
{
    off_t v = 0;
    for (int i = 0; i < 6; i++) v = v * 62 + (off_t)(strchr(b62, t[i]) - b62);
    return 1 + v;
}

static void lock_warn(const options *o, cli_progress *bar, const char *what)
{
    if (atomic_exchange(&run_lock.warned, 1)) return;
    if (bar) cli_progress_end(bar);
    cli_warn("cannot lock '%s/.sa1b-shard.lock' (%s): %s: going on without the lock (runs writing into '%s' at "
             "once may take each other's temporaries for stale or commit at once)", o->dir, what,
             strerror(errno), o->dir);
}

/* Opens the lock file and takes a token of this run's own.  A failure is
 * said once; the run goes on (no temporary is then taken for stale). */
static void open_run_lock(const options *o)
{
    char *path = NULL;
    if (asprintf(&path, "%s/.sa1b-shard.lock", o->dir) < 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    run_lock.fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    free(path);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32);
    for (int tries = 0; tries < 1000; tries++) {
        for (int i = 0; i < 6; i++) { /* xorshift64* */
            x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
            run_lock.token[i] = b62[(x * 0x2545F4914F6CDD1Dull >> 33) % 62];
        }
        if (run_lock.fd < 0) break;
        struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = token_offset(run_lock.token), .l_len = 1};
        if (fcntl(run_lock.fd, F_SETLK, &lk) == 0) {
            run_lock.token_locked = 1;
            return;
        }
        if (errno != EAGAIN && errno != EACCES) break; /* another live run's token: draw again */
    }
    lock_warn(o, NULL, run_lock.fd < 0 ? "open" : "fcntl");
}

/* 1 when a temporary with this token may belong to a live run: ours,
 * another's held token, or unknown (no working lock). */
static int token_live(const char *token)
{
    if (!run_lock.token_locked) return 1;
    if (strncmp(token, run_lock.token, 6) == 0) return 1;
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = token_offset(token), .l_len = 1};
    return fcntl(run_lock.fd, F_GETLK, &lk) != 0 || lk.l_type != F_UNLCK;
}

/* The folder's exclusive lock (byte 0 of the lock file) while a run removes
 * stale temporaries or commits: two commits never interleave.  When another
 * run holds it for more than 2 s, one line says so (once a run) before the
 * wait goes on.  0, or -1 where it cannot be taken (said once; the lock is
 * advice).  Main thread only. */
static int lock_folder(const options *o, cli_progress *bar)
{
    static int said;
    if (run_lock.fd < 0) return -1;
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    if (fcntl(run_lock.fd, F_SETLK, &lk) == 0) return 0;
    /* runs into one folder (GNU parallel) meet here for a few
     * milliseconds: only a wait of more than 2 s is said */
    for (int i = 0; i < 400 && (errno == EAGAIN || errno == EACCES); i++) {
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        if (fcntl(run_lock.fd, F_SETLK, &lk) == 0) return 0;
    }
    if (errno == EAGAIN || errno == EACCES) {
        if (!said) {
            said = 1;
            if (bar) cli_progress_end(bar);
            cli_warn("waiting for another sa1b-shard run committing into '%s'", o->dir);
        }
        int rc;
        while ((rc = fcntl(run_lock.fd, F_SETLKW, &lk)) != 0 && errno == EINTR) {
        }
        if (rc == 0) return 0;
    }
    lock_warn(o, bar, "fcntl");
    return -1;
}

static void unlock_folder(int locked)
{
    if (locked != 0) return;
    struct flock lk = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    (void)fcntl(run_lock.fd, F_SETLK, &lk);
}

/* 1 when p starts with 6 characters of mkstemp's alphabet [A-Za-z0-9]. */
static int x6(const char *p)
{
    for (int i = 0; i < 6; i++)
        if (!((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9')))
            return 0;
    return 1;
}

/* 1 when p (what follows a part's file name) is exactly the suffix of one
 * of its temporaries: ".partial" and ".partial.tmp-XXXXXX" of earlier
 * versions, ".partial.TTTTTT" (reserve_partial) and
 * ".partial.TTTTTT.tmp-XXXXXX" (the shard writer's temporary of it) now,
 * and the writer's ".rows-XXXXXX" after a ".tmp-XXXXXX" (unlinked at once
 * where the file system has no O_TMPFILE).  Nothing else: a user's
 * "a.shard.partial.notes" is no temporary.  *token: the TTTTTT, or NULL. */
static int temp_suffix(const char *p, const char **token)
{
    *token = NULL;
    if (strncmp(p, ".partial", 8) != 0) return 0;
    p += 8;
    if (p[0] == '.' && x6(p + 1) && (p[7] == '\0' || p[7] == '.')) {
        *token = p + 1;
        p += 7;
    }
    if (strncmp(p, ".tmp-", 5) == 0 && x6(p + 5)) {
        p += 11;
        if (strncmp(p, ".rows-", 6) == 0 && x6(p + 6)) p += 12;
    }
    return *p == '\0';
}

/* name is a temporary (temp_suffix) of a part of this input (part0: the
 * file name of its part 0). */
static int own_temp_name(const options *o, const char *part0, const char *name, const char **token)
{
    size_t l0 = strlen(part0);
    *token = NULL;
    if (!o->max_images) return strncmp(name, part0, l0) == 0 && temp_suffix(name + l0, token);
    size_t stem = l0 - strlen("00000.shard"), d; /* <stem>-NNNNN.shard */
    if (strncmp(name, part0, stem) != 0 || !(d = part_digits(name + stem))) return 0;
    return strncmp(name + stem + d, ".shard", 6) == 0 && temp_suffix(name + stem + d + 6, token);
}

/* What a file named like a temporary holds: 0 what this tool's temporaries
 * hold at some stage (nothing yet: the reserved name, or the writer's rows
 * file; the writer's zeroed header and what follows it; a finished shard
 * whose header is not written, which starts with zeros too), 1 a complete
 * shard (the magic at both ends: a finished part that a commit could not
 * rename, maybe the only copy of its data), -1 anything else (a user's
 * file that merely has a temporary's name). */
static int temp_content(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    if (st.st_size == 0) return 0;
    uint8_t b[SA1B_SHARD_HEADER_SIZE];
    ssize_t n = pread(fd, b, sizeof b, 0);
    if (n <= 0) return -1;
    if (n >= 8 && memcmp(b, SA1B_SHARD_MAGIC, 8) == 0) {
        char m[8];
        const off_t F = SA1B_SHARD_FOOTER_SIZE; /* the footer starts with the magic too */
        return st.st_size >= F + 8 && pread(fd, m, 8, st.st_size - F) == 8 && memcmp(m, SA1B_SHARD_MAGIC, 8) == 0
                   ? 1 : 0;
    }
    for (ssize_t i = 0; i < n; i++)
        if (b[i]) return -1;
    return 0;
}

/* 1 when the complete shard open as fd has the bytes of the file at path,
 * a file of its own (not fd's file under another name, nor a link to it). */
static int same_bytes_elsewhere(int fd, const char *path)
{
    struct stat a, b;
    int other = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (other < 0) return 0;
    int same = fstat(fd, &a) == 0 && fstat(other, &b) == 0 && S_ISREG(b.st_mode) && a.st_size == b.st_size &&
               !(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    enum { CHUNK = 1 << 20 };
    char *x = same ? malloc(2 * (size_t)CHUNK) : NULL;
    same = x != NULL;
    for (off_t at = 0; same && at < a.st_size; at += CHUNK) {
        size_t n = a.st_size - at < CHUNK ? (size_t)(a.st_size - at) : CHUNK;
        same = pread(fd, x, n, at) == (ssize_t)n && pread(other, x + CHUNK, n, at) == (ssize_t)n &&
               memcmp(x, x + CHUNK, n) == 0;
    }
    free(x);
    close(other);
    return same;
}

/* Removes the stale temporaries of this input's outputs (their token is
 * held by no live run, nor is the file itself locked as earlier versions
 * did) and says so, even with -q; a temporary of a live run is left alone,
 * and so is a file that only has a temporary's name (temp_content).  A
 * complete shard (a finished part of a run killed before its commit, or of
 * a commit that failed) goes only where it is a byte-for-byte copy of the
 * output under its final name, which is all it could ever have become;
 * else it is kept.  Two sweeps an input: the one before its run removes
 * the unfinished temporaries and the copies, and keeps the other complete
 * shards without a word (its commit may make them copies); after (the
 * sweep after the input's commit, or its skip, whose outputs may now
 * match the parts of a run killed before its own): the copies are
 * removed, the complete shards left are named in one line each as kept,
 * and nothing else is said.  So each file gets one line: removed, or left
 * alone (before: "left alone", then "removed ... a copy" for one file).
 * Under the folder's lock (lock_folder). */
static void remove_stale_temps(const options *o, int single_file, const char *stem, cli_progress *bar,
                               int after)
{
    char *part0 = part_path(o, single_file, stem, 0);
    if (!part0) return;
    const char *base = part0 + strlen(o->prefix);
    int lock = lock_folder(o, bar);
    DIR *d = opendir(o->dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *token;
        if (!own_temp_name(o, base, e->d_name, &token)) continue;
        if (token && token_live(token)) continue;
        if (!token && !run_lock.token_locked) continue; /* liveness unknown */
        char path[8200];
        snprintf(path, sizeof path, "%s%s", o->prefix, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        if (fd < 0) continue;
        struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int held = fcntl(fd, F_GETLK, &lk) == 0 && lk.l_type != F_UNLCK; /* an earlier version's live run */
        int what = held ? -1 : temp_content(fd);
        char final[8200]; /* path less the temporary's suffix, which is the last ".shard.partial" on */
        snprintf(final, sizeof final, "%s", path);
        char *cut = NULL;
        for (char *q = final; (q = strstr(q, ".shard.partial")) != NULL; q++) cut = q;
        if (cut) cut[strlen(".shard")] = 0;
        int copy = what == 1 && cut && same_bytes_elsewhere(fd, final);
        close(fd);
        if (copy && unlink(path) == 0) {
            cli_progress_end(bar);
            cli_warn("removed '%s', a copy of '%s' (the same bytes) that an earlier run left under a temporary name",
                     path, final);
        } else if (what == 1 && after) {
            cli_progress_end(bar);
            cli_warn("'%s' is a complete shard that an earlier run left under a temporary name (it may be the only "
                     "copy of its data): left alone", path);
        } else if (what == 0 && !after && unlink(path) == 0) {
            cli_progress_end(bar);
            cli_warn("removed '%s', a temporary of an earlier run that ended before finishing it", path);
        }
    }
    if (d) closedir(d);
    unlock_folder(lock);
    free(part0);
}

/* ---- the work ring ------------------------------------------------------ */

enum { SLOT_FREE, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE };

typedef struct slot {
    int state;
    uint64_t seq;
    int kind;                  /* 0: a sample to prepare; 1: a tar problem to report */
    char name[256];
    const uint8_t *jpg_in, *json_in; /* the sample: in the mapped input or in jpg/json */
    uint8_t *jpg, *json;             /* copies of a sample that is not stable */
    size_t jpg_len, json_len, jpg_cap, json_cap;
    int rc;
    sa1b_error err;
    sa1b_prep_out *out;        /* the buffers of the prepared sample, from the pool (BUSY, DONE) */
} slot;

struct job;

/* Slots cycle FREE -> QUEUED (reader) -> BUSY -> DONE (a worker) -> FREE
 * (the writer, strictly in sequence order). */
typedef struct ring {
    pthread_mutex_t mu;
    pthread_cond_t work, done, freed;
    slot *slots;
    size_t n;
    uint64_t next_submit, next_dispatch, next_write;
    int stop;                  /* workers and writer: no more input */
    const sa1b_prep_opts *prep;
    struct job *cur;           /* the input being written (set while the ring is empty) */
    uint64_t bytes_read;       /* of the current input, for the progress bar */
    /* Buffers of prepared samples (the letterboxed image, the packed masks
     * and the worker's scratch: megabytes each at --image-size 1024), a
     * stack: a worker takes the one the writer gave back last, whose pages
     * are the likeliest to be in cache, and new ones are made only while
     * every one is in flight, up to max_out (one per worker, one being
     * written, one spare): beyond that a worker waits for the writer to
     * give one back before it takes the next sample.  So a run touches at
     * most max_out fresh buffers (the kernel zeroes each page on first use:
     * on a VM that hands free memory back to its host, 3 ms per MiB of huge
     * pages, 70 ms for the 5 of 4 MiB that 2 workers used to keep in
     * flight), not one per slot, and keeps cycling through the fewest. */
    sa1b_prep_out **pool;      /* [n] */
    size_t n_pool;             /* free ones on the stack */
    size_t n_made, max_out;    /* buffers made so far; at most this many */
} ring;

typedef struct worker {
    ring *r;
    pthread_t tid;
    sa1b_imgctx *ctx;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    ring *r = w->r;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && (r->next_dispatch == r->next_submit ||
                            (!r->n_pool && r->n_made >= r->max_out)))
            pthread_cond_wait(&r->work, &r->mu);
        if (r->stop) break;
        slot *s = &r->slots[r->next_dispatch++ % r->n];
        s->state = SLOT_BUSY;
        s->out = r->n_pool ? r->pool[--r->n_pool] : NULL;
        const int make = !s->out;
        r->n_made += (size_t)make;
        pthread_mutex_unlock(&r->mu);
        if (s->kind == 0) {
            sa1b_error_clear(&s->err);
            if (!s->out && (s->out = malloc(sizeof *s->out))) {
                sa1b_prep_out z = SA1B_PREP_OUT_INIT;
                *s->out = z;
            }
            s->rc = s->out ? sa1b_prep_run(w->ctx, r->prep, s->name, s->jpg_in, s->jpg_len, s->json_in,
                                           s->json_len, s->out, &s->err)
                           : sa1b_error_set(&s->err, SA1B_ENOMEM, -1, "%s: out of memory", s->name);
            if (s->rc == SA1B_OK && fail_nomem[0] && strcmp(s->name, fail_nomem) == 0)
                s->rc = sa1b_error_set(&s->err, SA1B_ENOMEM, -1, "%s: out of memory (SA1B_TEST_FAIL)", s->name);
        }
        pthread_mutex_lock(&r->mu);
        if (make && !s->out) r->n_made--; /* none was made after all */
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void consume(struct job *j, slot *s);
static void progress(struct job *j, uint64_t bytes_read);

/* The writer thread: takes slots back in sequence order as soon as they are
 * done, so that samples reach the file while the reader waits for input. */
static void *writer_main(void *arg)
{
    ring *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        slot *s = &r->slots[r->next_write % r->n];
        while (!(r->next_write < r->next_submit && s->state == SLOT_DONE) &&
               !(r->stop && r->next_write == r->next_submit))
            pthread_cond_wait(&r->done, &r->mu);
        if (r->next_write == r->next_submit) break; /* stopped and drained */
        struct job *j = r->cur;
        uint64_t bytes = r->bytes_read;
        pthread_mutex_unlock(&r->mu);
        consume(j, s);
        progress(j, bytes);
        pthread_mutex_lock(&r->mu);
        if (s->out) { /* at most one per slot: room */
            r->pool[r->n_pool++] = s->out;
            pthread_cond_signal(&r->work); /* a worker may be waiting for it */
        }
        s->out = NULL;
        s->state = SLOT_FREE;
        r->next_write++;
        pthread_cond_broadcast(&r->freed);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static int copy_bytes(uint8_t **dst, size_t *cap, size_t *len, const uint8_t *src, size_t n)
{
    if (n > *cap) {
        uint8_t *p = realloc(*dst, n ? n : 1);
        if (!p) return -1;
        *dst = p;
        *cap = n;
    }
    if (n) memcpy(*dst, src, n);
    *len = n;
    return 0;
}

/* ---- one input ---------------------------------------------------------- */

typedef struct totals {
    uint64_t images, masks_kept, masks_dropped, skipped, shards, inputs_skipped, fatal, bytes_in;
    uint64_t inputs_cut;       /* inputs that ended early (truncated) */
    uint64_t masks_empty;      /* masks with no cell at R: dropped (in masks_dropped), or kept */
} totals;

typedef struct job {
    const options *o;
    ring *r;
    int single_file;
    const char *input;
    const char *stem;
    totals *t;
    cli_progress *bar;
    double t0;
    uint64_t input_size;
    /* parts of this input */
    sa1b_shard_writer *w;
    uint64_t part, images_in_part;
    char **finals;             /* final paths of finished parts */
    size_t n_finals;
    struct part_temps {
        char *partial;         /* "<final>.partial.TTTTTT": the finished part, until renamed */
        temp_node *slot_tmp, *slot_partial; /* the part's temporaries in temps */
        dev_t dev;             /* the finished partial's file (0, 0 before it is finished) */
        ino_t ino;
    } *pt;                     /* [n_finals] */
    uint64_t images, masks_kept, masks_dropped, masks_empty; /* this input's part of the totals */
    uint64_t part_empty;       /* the open part's masks with no cell at R (its provenance) */
    int final_prov;            /* the open part has its final provenance (with part_empty) */
    uint64_t skipped;          /* its samples skipped (recorded in its last part's provenance) */
    int failed;                /* fatal: drop everything of this input */
    uint64_t pairs;            /* samples read from the input */
    char last_name[256];       /* the last of them */
    int no_member;             /* the input had no member at all (only zero blocks) */
    uint64_t problems;         /* problems the tar reader reported (bad samples) */
    int no_sample;             /* members, but not one named as a sample's */
    char **ids;                /* "image_id file_name" of the images written
                                * (writer thread; open addressing) */
    size_t ids_cap, n_ids;
} job;

/* Whether an image of this image_id and file_name, with the same prepared
 * pixels and masks (their CRC32C), was written for this input before: 1,
 * else 0 (and it is recorded), -1 out of memory.  A tar can hold one image
 * under two member names (a copy that a download renamed "sa_1 (1).jpg",
 * the files of two folders merged): the first is written, the others are
 * reported.  All four keys: a shard could not tell the copies apart, while
 * images of one image_id and other names (a dataset of one's own, ids not
 * filled in), or of one image_id and file_name but other pixels or masks
 * (two datasets of one's own numbered alike, merged into one folder, which
 * renamed the second "sa_1 (1).jpg") are different images. */
static uint64_t key_hash(const char *k)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211u;
    return h;
}

static int seen_image(job *j, int64_t id, const char *file_name, uint32_t image_crc, uint32_t masks_crc)
{
    char *key;
    if (asprintf(&key, "%08x %08x %lld %s", image_crc, masks_crc, (long long)id, file_name) < 0) return -1;
    if ((j->n_ids + 1) * 2 > j->ids_cap) {
        size_t ncap = j->ids_cap ? j->ids_cap * 2 : 4096;
        char **ni = calloc(ncap, sizeof *ni);
        if (!ni) {
            free(key);
            return -1;
        }
        for (size_t i = 0; i < j->ids_cap; i++) {
            if (!j->ids[i]) continue;
            size_t k = (size_t)key_hash(j->ids[i]) & (ncap - 1);
            while (ni[k]) k = (k + 1) & (ncap - 1);
            ni[k] = j->ids[i];
        }
        free(j->ids);
        j->ids = ni;
        j->ids_cap = ncap;
    }
    size_t k = (size_t)key_hash(key) & (j->ids_cap - 1);
    for (; j->ids[k]; k = (k + 1) & (j->ids_cap - 1))
        if (strcmp(j->ids[k], key) == 0) {
            free(key);
            return 1;
        }
    j->ids[k] = key;
    j->n_ids++;
    return 0;
}

/* The input as messages name it: 'path', or standard input. */
static const char *input_label(const job *j, char *buf, size_t n)
{
    if (strcmp(j->input, "-") == 0) snprintf(buf, n, "standard input");
    else snprintf(buf, n, "'%s'", j->input);
    return buf;
}

/* Room for one more part in finals and its companions.  0 or -1. */
static int grow_parts(job *j)
{
    size_t n = j->n_finals + 1;
    char **f = realloc(j->finals, n * sizeof *f);
    if (f) j->finals = f;
    struct part_temps *t = realloc(j->pt, n * sizeof *t);
    if (t) j->pt = t;
    return f && t ? 0 : -1;
}

/* A finished part's partial (and its temp slot) once it is renamed or removed. */
static void release_part(job *j, size_t i)
{
    struct part_temps *t = &j->pt[i];
    temp_drop(t->slot_tmp);
    temp_drop(t->slot_partial);
    t->slot_tmp = t->slot_partial = NULL;
}

/* Removes part i's partial (the set will not be committed) and releases it. */
static void drop_part(job *j, size_t i)
{
    if (j->pt[i].partial) unlink(j->pt[i].partial);
    release_part(j, i);
}

/* "<final>.partial.TTTTTT", TTTTTT the run's token (open_run_lock): a name
 * of this run alone, reserved by an empty file that the writer's finished
 * file replaces, so that two runs writing the same output never finish into
 * one name.  The name, or NULL (errno). */
static char *reserve_partial(const char *final)
{
    char *p = NULL;
    if (asprintf(&p, "%s.partial.%s", final, run_lock.token) < 0) return NULL;
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        int err = errno;
        free(p);
        errno = err;
        return NULL;
    }
    close(fd);
    return p;
}

static int open_part(job *j)
{
    sa1b_error e;
    char *final = part_path(j->o, j->single_file, j->stem, j->part);
    char *prov = provenance(j->o, j->stem, j->part, 0);
    char *tmp = NULL;
    int rc = -1;
    temp_node *pslot = NULL;
    /* no lock needed: a temporary whose name carries a live run's token is
     * never taken for stale (remove_stale_temps) */
    if (final && prov && !(tmp = reserve_partial(final))) {
        cli_progress_end(j->bar);
        cli_warn("cannot create '%s.partial.%s': %s", final, run_lock.token, strerror(errno));
        free(final);
        free(prov);
        return -1;
    }
    if (tmp && !(pslot = temp_add(tmp))) {
        cli_progress_end(j->bar);
        cli_warn("out of memory");
    } else if (final && tmp && prov) {
        sa1b_shard_params p = {j->o->prep.image_size, j->o->prep.mask_size, j->o->prep.image_format, prov,
                               j->o->prep.mask_format};
        temp_node *wslot = NULL;
        if (sa1b_shard_writer_open(&j->w, tmp, &p, &e) == SA1B_OK) {
            if (grow_parts(j) == 0 && (wslot = temp_add(sa1b_shard_writer_temp_path(j->w))) != NULL) {
                struct part_temps *t = &j->pt[j->n_finals];
                t->partial = tmp;
                t->slot_partial = pslot;
                t->slot_tmp = wslot;
                t->dev = 0;
                t->ino = 0;
                j->finals[j->n_finals++] = final;
                final = NULL;
                tmp = NULL;
                pslot = NULL;
                rc = 0;
            } else {
                sa1b_shard_writer_abort(j->w);
                j->w = NULL;
                cli_progress_end(j->bar);
                cli_warn("out of memory");
            }
        } else {
            cli_progress_end(j->bar);
            cli_warn("'%s': %s", tmp, e.msg);
        }
    } else {
        cli_progress_end(j->bar);
        cli_warn("out of memory");
    }
    if (tmp) unlink(tmp); /* not taken: the reserved name goes */
    temp_drop(pslot);
    free(final);
    free(tmp);
    free(prov);
    j->images_in_part = 0;
    j->part_empty = 0;
    j->final_prov = 0;
    return rc;
}

static int close_part(job *j)
{
    sa1b_error e;
    if (!j->w) return 0;
    if (!j->final_prov) { /* the provenance with the part's counts */
        char *prov = provenance(j->o, j->stem, j->part, j->part_empty);
        if (!prov || sa1b_shard_writer_set_provenance(j->w, prov, &e) != SA1B_OK) {
            free(prov);
            cli_progress_end(j->bar);
            cli_warn("out of memory");
            return -1;
        }
        free(prov);
    }
    sa1b_shard_writer *w = j->w;
    j->w = NULL;
    j->part++;
    size_t i = j->n_finals - 1;
    if (sa1b_shard_writer_finish(w, &e) != SA1B_OK) {
        cli_progress_end(j->bar);
        cli_warn("'%s': %s", j->finals[i], e.msg);
        return -1;
    }
    test_pause("finish");
    struct part_temps *t = &j->pt[i];
    temp_drop(t->slot_tmp); /* renamed to its partial */
    t->slot_tmp = NULL;
    struct stat st; /* the file this run finished, for the commit's check (check_parts) */
    if (stat(t->partial, &st) == 0) {
        t->dev = st.st_dev;
        t->ino = st.st_ino;
    }
    test_hook(1);
    return 0;
}

/* Marks the input failed; the reader sees it through failed_now. */
static void set_failed(job *j)
{
    pthread_mutex_lock(&j->r->mu);
    j->failed = 1;
    pthread_mutex_unlock(&j->r->mu);
}

/* Takes the oldest slot back: writes its sample or reports its problem. */
static void consume(struct job *j, slot *s)
{
    const options *o = j->o;
    if (j->failed) return; /* --strict already stopped this input */
    if (s->rc == SA1B_ENOMEM) {
        /* no fault of the sample: skipped, it would be missing from a
         * shard that looks complete (its input ended cleanly), which
         * --skip-existing never redoes, and which would replace a complete
         * earlier output; the input fails instead, whether the sample's
         * preparation or the tar reader (a member too large to copy) ran
         * out */
        cli_progress_end(j->bar);
        char label[4200];
        cli_warn("%s: %s: nothing of it written (shard it again with more memory or fewer threads)",
                 input_label(j, label, sizeof label), s->err.msg);
        set_failed(j);
        return;
    }
    if (s->kind == 1 || s->rc != SA1B_OK) {
        j->t->skipped++, j->skipped++;
        cli_progress_end(j->bar);
        char label[4200];
        cli_warn("%s: %s", input_label(j, label, sizeof label), s->err.msg);
        if (o->strict) set_failed(j);
        return;
    }
    int seen = seen_image(j, s->out->sample.image_id, s->out->sample.file_name, s->out->image_crc,
                          s->out->masks_crc);
    if (seen != 0) {
        cli_progress_end(j->bar);
        char label[4200];
        input_label(j, label, sizeof label);
        if (seen < 0) {
            cli_warn("%s: %s: out of memory: nothing of it written (shard it again with more memory or fewer "
                     "threads)", label, s->name);
            set_failed(j);
            return;
        }
        j->t->skipped++, j->skipped++;
        cli_warn("%s: %s: duplicate image (image_id %lld, file_name '%s', its pixels and masks came before, "
                 "under another member name): this copy skipped", label, s->name, (long long)s->out->sample.image_id,
                 s->out->sample.file_name);
        if (o->strict) set_failed(j);
        return;
    }
    /* a full part is finished when the next sample comes: the input's last
     * part stays open until the input ends, for its final provenance */
    if (j->w && o->max_images && j->images_in_part == o->max_images && close_part(j)) {
        set_failed(j);
        return;
    }
    if (!j->w && open_part(j)) {
        set_failed(j);
        return;
    }
    sa1b_error e;
    if (sa1b_shard_writer_add_packed_crc(j->w, &s->out->sample, s->out->image_crc,
                                         s->out->masks_crc, &e) != SA1B_OK) {
        cli_warn("'%s': %s", j->finals[j->n_finals - 1], e.msg);
        set_failed(j);
        return;
    }
    j->t->images++;
    j->images++;
    test_hook(0);
    j->t->masks_kept += s->out->masks_kept;
    j->t->masks_dropped += s->out->masks_in - s->out->masks_kept;
    j->t->masks_empty += s->out->masks_empty;
    j->masks_kept += s->out->masks_kept;
    j->masks_dropped += s->out->masks_in - s->out->masks_kept;
    j->masks_empty += s->out->masks_empty;
    j->part_empty += s->out->masks_empty;
    j->images_in_part++;
}

static void progress(struct job *j, uint64_t bytes_read)
{
    if (!j->bar->enabled) return;
    uint64_t done = j->t->bytes_in + bytes_read;
    double dt = cli_now() - j->t0;
    cli_progress_update(j->bar, j->input_size ? bytes_read : j->t->images, j->input_size,
                        "%s: %llu images, %llu masks kept, %llu dropped, %.1f MB/s", j->stem,
                        (unsigned long long)j->t->images, (unsigned long long)j->t->masks_kept,
                        (unsigned long long)j->t->masks_dropped, dt > 0 ? (double)done / dt / 1e6 : 0.0);
}

/* Reader side: waits until the next slot is free (the writer took its
 * previous occupant back). */
static slot *next_free_slot(ring *r)
{
    pthread_mutex_lock(&r->mu);
    slot *s = &r->slots[r->next_submit % r->n];
    while (s->state != SLOT_FREE) pthread_cond_wait(&r->freed, &r->mu);
    pthread_mutex_unlock(&r->mu);
    return s;
}

static void submit(ring *r, slot *s, uint64_t bytes_read)
{
    pthread_mutex_lock(&r->mu);
    s->state = SLOT_QUEUED;
    s->seq = r->next_submit++;
    r->bytes_read = bytes_read;
    pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
}

/* j->failed as the writer thread last set it. */
static int failed_now(ring *r, const job *j)
{
    pthread_mutex_lock(&r->mu);
    int f = j->failed;
    pthread_mutex_unlock(&r->mu);
    return f;
}

/* Waits until the writer has taken back every submitted slot. */
static void wait_written(ring *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->next_write < r->next_submit) pthread_cond_wait(&r->freed, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

/* SIGBUS: a mapped input file (sa1b_tar_open maps regular files) was
 * truncated or could not be read while it was being read; any thread may
 * take the fault, so the only clean way out is to say so, remove the
 * temporaries and stop. */
static const char *volatile bus_input = "an input";

static void on_sigbus(int sig)
{
    (void)sig;
    static const char a[] = ": '", b[] = "': input file truncated or unreadable while being read (SIGBUS)\n";
    const char *p = cli_prog(), *in = bus_input;
    if (write(2, p, strlen(p)) < 0 || write(2, a, sizeof a - 1) < 0 || write(2, in, strlen(in)) < 0 ||
        write(2, b, sizeof b - 1) < 0) {
        /* nothing more can be done */
    }
    remove_temps();
    _exit(CLI_EXIT_FATAL);
}

/* An input that ended early: one line saying how much of it was read.  An
 * input without any member counts as one too: it is no silent success. */
static void report_cut(job *j)
{
    j->t->inputs_cut++;
    cli_progress_end(j->bar);
    char label[4200];
    input_label(j, label, sizeof label);
    if (j->no_member)
        cli_warn("%s: no member: an empty archive or a file of zeros", label);
    else if (j->no_sample)
        cli_warn("%s: no sample: not one member is named sa_<id>.jpg or sa_<id>.json", label);
    else if (j->pairs)
        cli_warn("%s: input ends early, after sample %s: %llu images read, the rest lost", label, j->last_name,
                 (unsigned long long)j->pairs);
    else
        cli_warn("%s: input ends early, before its first sample: no image read", label);
}

/* The images of an input whose shards were not put in place are not
 * counted as written (drop_parts; a commit whose first rename fails). */
static void uncount(job *j)
{
    j->t->images -= j->images;
    j->t->masks_kept -= j->masks_kept;
    j->t->masks_dropped -= j->masks_dropped;
    j->t->masks_empty -= j->masks_empty;
    j->images = j->masks_kept = j->masks_dropped = j->masks_empty = 0;
}

/* Drops the parts of an input that puts none in place: their files and
 * their images' counts. */
static void drop_parts(job *j)
{
    for (size_t i = 0; i < j->n_finals; i++) drop_part(j, i);
    uncount(j);
}

/* Before the old set is touched: every finished part is still there, as
 * the file this run finished and holds (not removed or replaced by another
 * process).  0, or -1 (reported). */
static int check_parts(const job *j, const char *label)
{
    for (size_t i = 0; i < j->n_finals; i++) {
        const struct part_temps *t = &j->pt[i];
        struct stat a;
        int err = stat(t->partial, &a) != 0 ? errno : 0;
        if (!err && (t->dev || t->ino) && (a.st_dev != t->dev || a.st_ino != t->ino)) err = ESTALE;
        if (err) {
            cli_warn("'%s', a finished part of %s: %s: nothing of it put in place, the earlier output left as "
                     "it was", t->partial, label, err == ESTALE ? "replaced by another file" : strerror(err));
            return -1;
        }
    }
    return 0;
}

/* What a commit removes besides this form's part 0, listed before anything
 * is removed (so that a folder that cannot be read, or memory that runs
 * out, leaves the old set as it was): the other form's part 0 first
 * (other0 set), then every part of this form past the new ones and every
 * other part of the other form, each only when it is a shard of
 * sa1b-shard written as that part of this input's output (out_set_member). */
typedef struct old_files {
    char **paths;
    size_t n;
    int other0;
} old_files;

static void old_files_free(old_files *f)
{
    for (size_t i = 0; i < f->n; i++) free(f->paths[i]);
    free(f->paths);
    memset(f, 0, sizeof *f);
}

/* 0, or -1 (reported, nothing listed). */
static int list_old_set(const job *j, const out_set *s, old_files *f)
{
    int numbered = j->o->max_images != 0, rc = 0;
    memset(f, 0, sizeof *f);
    DIR *d = opendir(s->dir);
    if (!d) {
        cli_warn("cannot read folder '%s': %s: nothing put in place, the earlier output left as it was", s->dir,
                 strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int num;
        uint64_t k;
        if (!out_set_name(s, e->d_name, &num, &k)) continue;
        if (num == numbered && (!numbered || k < j->n_finals)) continue; /* replaced by a new part */
        char *path = NULL;
        if (asprintf(&path, "%s%s", s->prefix, e->d_name) < 0) {
            rc = -1;
            break;
        }
        json_t *prov = our_provenance(path);
        int member = prov && out_set_member(s, prov, num, k);
        json_decref(prov);
        char **p = member ? realloc(f->paths, (f->n + 1) * sizeof *p) : NULL;
        if (!p) {
            free(path);
            if (!member) continue;
            rc = -1;
            break;
        }
        f->paths = p;
        p[f->n++] = path;
        if (num != numbered && k == 0 && !f->other0) { /* the other form's part 0 goes first */
            p[f->n - 1] = p[0];
            p[0] = path;
            f->other0 = 1;
        }
    }
    closedir(d);
    if (rc) {
        cli_warn("out of memory: nothing put in place, the earlier output left as it was");
        old_files_free(f);
    }
    return rc;
}

/* At commit, under the folder's lock, before anything is removed: every
 * file at a new part's final name (part 0 included: check_outputs looked
 * at start-up, maybe hours ago, and only up to the first missing part) is
 * this input's own shard (its provenance names this input), or any shard
 * of sa1b-shard at OUT itself (one .shard output without --max-images: the
 * file the user named), or, with --force, a file that is not a shard of
 * sa1b-shard.  Another input's shard at a name derived from OUT (a folder's
 * <name>.shard, a part: a-00001.tar gives a-00001.shard, part 1 of a.tar's
 * set) is never replaced, --force or not: the commit is refused, the old
 * set left as it was.  0, or -1 (one line said why). */
static int check_finals(const job *j, const char *label)
{
    const options *o = j->o;
    for (size_t i = 0; i < j->n_finals; i++) {
        struct stat st;
        if (lstat(j->finals[i], &st) != 0) {
            if (errno == ENOENT) continue;
            cli_warn("cannot check '%s': %s: nothing of %s put in place, the earlier output left as it was",
                     j->finals[i], strerror(errno), label);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            cli_warn("'%s' exists and is not a regular file: nothing of %s put in place, the earlier output left "
                     "as it was", j->finals[i], label);
            return -1;
        }
        char unreadable[256];
        json_t *prov = read_provenance(j->finals[i], unreadable, sizeof unreadable);
        if (*unreadable) {
            cli_warn("cannot check '%s': %s: nothing of %s put in place, the earlier output left as it was",
                     j->finals[i], unreadable, label);
            return -1;
        }
        const char *in = json_string_value(json_object_get(prov, "input"));
        int ok = may_replace(o, j->single_file, j->stem, prov);
        if (!ok && prov) {
            const json_t *part = json_object_get(prov, "part");
            const json_t *mi = json_object_get(json_object_get(prov, "options"), "max_images");
            char what[64] = "the shard";
            if (json_is_integer(mi) && json_integer_value(mi) > 0 && json_is_integer(part))
                snprintf(what, sizeof what, "part %lld", (long long)json_integer_value(part));
            cli_warn("'%s' is %s of input '%s': not replaced by the shard of %s (two inputs would write the same "
                     "output: shard them into different folders): nothing of it put in place, the earlier output "
                     "left as it was", j->finals[i], what, in ? in : "?", label);
        } else if (!ok) {
            char damage[300];
            int damaged = damaged_shard(j->finals[i], damage, sizeof damage);
            cli_warn("'%s' %s%s%s: not replaced by the shard of %s (give --force to replace it): nothing of it put "
                     "in place, the earlier output left as it was", j->finals[i],
                     damaged ? "is a damaged shard (" : "exists and is not a shard of sa1b-shard",
                     damaged ? damage : "", damaged ? "), whose input cannot be told" : "", label);
        }
        json_decref(prov);
        if (!ok) return -1;
    }
    return 0;
}

/* Puts the finished parts of the input in place, or keeps a complete
 * output that a shard of a truncated input (cut) would replace.  Holds the
 * folder's lock meanwhile (lock_folder), so that two runs writing one
 * output commit one after the other, each its whole set.
 *
 * Everything that can be checked is checked before the old set is touched
 * (the new parts are there, the folder can be read, what goes is listed);
 * a failure there keeps the old set as it was and drops the new one.  Then
 * the old part 0 of this form goes first (the mark of a complete set; it
 * cannot be removed: nothing is touched, as above), then the other form's
 * part 0 and the stale parts; from there on the new parts are never dropped:
 * a file that cannot be removed is reported and the new set still renamed
 * into place, last part first.  A rename that fails is reported and leaves
 * the parts not in place under their partial names.  Only parts renamed
 * into place count as shards written.  0, or -1 (reported: exit 3). */
static int commit(job *j, int cut)
{
    const options *o = j->o;
    char label[4200];
    input_label(j, label, sizeof label);
    test_pause("commit");
    cli_progress_end(j->bar); /* each message on a line of its own */
    out_set s;
    if (out_set_init(&s, o, j->single_file, j->stem) != 0) {
        cli_warn("out of memory");
        drop_parts(j);
        return -1;
    }
    int lock = lock_folder(o, j->bar);
    int numbered = o->max_images != 0, rc = 0, kept_numbered = numbered, have = 0;
    char *kept = NULL, *kept_input = NULL;
    if (cut && !o->force) {
        have = out_set_complete(&s, numbered, 0, &kept, &kept_input);
        if (!have && (have = out_set_complete(&s, !numbered, 1, &kept, &kept_input))) kept_numbered = !numbered;
    }
    if (have) {
        /* the complete output may be the only intact copy of that data */
        drop_parts(j);
        report_cut(j);
        if (kept_input && strcmp(kept_input, j->stem) != 0)
            cli_warn("'%s' (%s of '%s') kept, not replaced by the shard of %s, which was truncated (--force "
                     "replaces it)", kept, kept_numbered ? "part 0 of a complete set" : "a complete shard",
                     kept_input, label);
        else
            cli_warn("'%s': complete output kept, not replaced by the shard of %s, which was truncated "
                     "(--force replaces it)", kept, label);
        free(kept);
        free(kept_input);
        goto out;
    }
    old_files old;
    if (check_parts(j, label) != 0 || check_finals(j, label) != 0 || list_old_set(j, &s, &old) != 0) {
        drop_parts(j);
        rc = -1;
        goto out;
    }
    /* this form's part 0 is replaced anyway (check_finals allowed it) */
    commit_open();
    int removed0 = unlink(j->finals[0]) == 0;
    if (!removed0 && errno != ENOENT) {
        commit_close();
        cli_warn("cannot remove '%s' (left from an earlier run of this output): %s: nothing of %s put in place, "
                 "the earlier output left as it was", j->finals[0], strerror(errno), label);
        drop_parts(j);
        old_files_free(&old);
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < old.n; i++) {
        int is0 = i == 0 && old.other0;
        if (unlink(old.paths[i]) == 0) {
            removed0 |= is0;
            cli_warn("removed '%s', left from an earlier run of this output", old.paths[i]);
        } else if (errno != ENOENT && is0 && !removed0) { /* nothing touched yet */
            cli_warn("cannot remove '%s' (left from an earlier run of this output): %s: nothing of %s put in "
                     "place, the earlier output left as it was", old.paths[i], strerror(errno), label);
            commit_close();
            drop_parts(j);
            old_files_free(&old);
            rc = -1;
            goto out;
        } else if (errno != ENOENT) { /* the new set goes in place all the same */
            cli_warn("cannot remove '%s' (left from an earlier run of this output): %s", old.paths[i],
                     strerror(errno));
            rc = -1;
        }
    }
    old_files_free(&old);
    cli_sync_dir(s.dir);
    /* last part first, so that part 0 present means complete */
    for (size_t i = j->n_finals; i-- > 0;) {
        if (rename(j->pt[i].partial, j->finals[i]) != 0) {
            cli_warn("cannot rename '%s' to '%s': %s (the parts of %s not in place are left under their "
                     "partial names)", j->pt[i].partial, j->finals[i], strerror(errno), label);
            for (size_t k = 0; k <= i; k++) release_part(j, k); /* kept: they may be the only copy now */
            if (i + 1 == j->n_finals) uncount(j); /* none in place: its images are not written */
            rc = -1;
            break;
        }
        release_part(j, i);
        j->t->shards++;
        test_hook(2);
    }
    cli_sync_dir(s.dir);
    commit_close();
    if (cut) report_cut(j);
out:
    unlock_folder(lock);
    out_set_free(&s);
    return rc;
}

/* Returns 0 when the input was processed (possibly with skipped samples),
 * -1 on a fatal error for this input. */
static int run_input(job *j)
{
    ring *r = j->r;
    sa1b_error e;
    sa1b_tar *tar = NULL;
    bus_input = j->input;
    char label[4200];
    input_label(j, label, sizeof label);
    if (sa1b_tar_open(&tar, j->input, &e) != SA1B_OK) {
        cli_warn("%s: %s", label, e.msg);
        return -1;
    }
    struct stat st;
    j->input_size = strcmp(j->input, "-") != 0 && stat(j->input, &st) == 0 && S_ISREG(st.st_mode)
                        ? (uint64_t)st.st_size : 0;
    j->bar->bytes = j->input_size != 0; /* known size: the bar counts bytes */
    r->cur = j; /* the ring is empty between inputs */
    int fatal = 0;
    while (!failed_now(r, j)) {
        slot *s = next_free_slot(r);
        sa1b_tar_sample smp;
        int rc = sa1b_tar_next(tar, &smp, &e);
        if (rc == SA1B_EOF) break;
        if (rc != SA1B_OK) {
            if (sa1b_tar_fatal(tar)) {
                wait_written(r);
                cli_progress_end(j->bar);
                cli_warn("%s: %s", label, e.msg);
                fatal = 1;
                break;
            }
            s->kind = 1;
            s->rc = rc; /* SA1B_ENOMEM fails the input (consume) */
            j->problems++;
            snprintf(s->err.msg, sizeof s->err.msg, "%s", e.msg);
        } else {
            s->kind = 0;
            snprintf(s->name, sizeof s->name, "%s", smp.name);
            snprintf(j->last_name, sizeof j->last_name, "%s", smp.name);
            j->pairs++;
            if (smp.stable) { /* in the mapped input until sa1b_tar_free: no copy */
                s->jpg_in = smp.jpg;
                s->jpg_len = smp.jpg_len;
                s->json_in = smp.json;
                s->json_len = smp.json_len;
            } else if (copy_bytes(&s->jpg, &s->jpg_cap, &s->jpg_len, smp.jpg, smp.jpg_len) ||
                       copy_bytes(&s->json, &s->json_cap, &s->json_len, smp.json, smp.json_len)) {
                cli_warn("%s: out of memory", label);
                fatal = 1;
                break;
            } else {
                s->jpg_in = s->jpg;
                s->json_in = s->json;
            }
        }
        submit(r, s, sa1b_tar_bytes_read(tar));
    }
    wait_written(r);
    j->t->bytes_in += sa1b_tar_bytes_read(tar);
    sa1b_tar_identity id;
    int have_id = !fatal && sa1b_tar_get_identity(tar, &id) == SA1B_OK;
    if (have_id) j->no_member = id.no_member;
    if (have_id && id.clean_end && !j->pairs && !j->problems) {
        /* members, but none of a sample (a tar of other files, of a
         * folder of upper-case .JPG, of a tar): no silent success either;
         * counted, recorded and handled as an input that ends early, as
         * one without any member is */
        j->no_sample = 1;
        id.clean_end = 0;
    }
    sa1b_tar_free(tar);
    if (fatal) j->failed = 1;
    if (!j->failed && have_id && !id.clean_end && j->o->strict) { /* --strict: a cut input is a bad one */
        report_cut(j);
        j->failed = 1;
    }
    /* a tar without pairs gives an empty shard (one without any member, only
     * zero blocks, is reported as cut: see report_cut) */
    if (!j->failed && !j->w && j->n_finals == 0 && open_part(j)) j->failed = 1;
    if (!j->failed && have_id && j->w) { /* the last part records the input */
        char *prov = final_provenance(j->o, j->stem, j->part, &id, j->last_name, j->skipped, j->part_empty);
        if (!prov || sa1b_shard_writer_set_provenance(j->w, prov, &e) != SA1B_OK) {
            cli_warn("out of memory");
            j->failed = 1;
        }
        j->final_prov = 1;
        free(prov);
    }
    if (!j->failed && close_part(j)) j->failed = 1;
    if (j->failed) {
        sa1b_shard_writer_abort(j->w);
        j->w = NULL;
        drop_parts(j);
        return -1;
    }
    return commit(j, have_id && !id.clean_end);
}

static void free_job_parts(job *j)
{
    for (size_t i = 0; i < j->n_finals; i++) {
        free(j->finals[i]);
        free(j->pt[i].partial);
    }
    free(j->finals);
    free(j->pt);
    for (size_t i = 0; i < j->ids_cap; i++) free(j->ids[i]);
    free(j->ids);
    j->ids = NULL;
    j->ids_cap = j->n_ids = 0;
    j->finals = NULL;
    j->pt = NULL;
    j->n_finals = 0;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    init_signals();
    /* as many descriptors as the system allows (a run holds few, but the
     * libraries under it may want more) */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    options o;
    parse_options(argc, argv, &o);
    int n_inputs = argc - optind;
    int single_file = n_inputs == 1 && ends_with(o.out, ".shard");
    if (out_folder(&o, single_file) != 0) cli_die(CLI_EXIT_FATAL, "out of memory");
    check_outputs(&o, single_file, argc, argv);
    if (!single_file) {
        struct stat st;
        if (stat(o.out, &st) != 0) {
            if (mkdir(o.out, 0777) != 0) cli_die(CLI_EXIT_FATAL, "cannot create directory '%s': %s", o.out, strerror(errno));
        } else if (!S_ISDIR(st.st_mode)) {
            cli_usage_error("'%s' is not a directory (OUT is the shard file only with one input and a "
                            "name ending in .shard; otherwise a directory)", o.out);
        }
    }
    open_run_lock(&o);

    ring r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.work, NULL);
    pthread_cond_init(&r.done, NULL);
    pthread_cond_init(&r.freed, NULL);
    r.n = 2 * (size_t)o.threads + 2;
    r.max_out = (size_t)o.threads + 2;
    r.slots = calloc(r.n, sizeof *r.slots);
    r.pool = calloc(r.n, sizeof *r.pool);
    r.prep = &o.prep;
    worker *ws = calloc(o.threads, sizeof *ws);
    if (!r.slots || !r.pool || !ws) cli_die(CLI_EXIT_FATAL, "out of memory");
    for (unsigned i = 0; i < o.threads; i++) {
        sa1b_error e;
        ws[i].r = &r;
        if (sa1b_imgctx_new(&ws[i].ctx, &e) != SA1B_OK) cli_die(CLI_EXIT_FATAL, "%s", e.msg);
        if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) != 0) cli_die(CLI_EXIT_FATAL, "cannot start threads");
    }
    pthread_t writer;
    if (pthread_create(&writer, NULL, writer_main, &r) != 0) cli_die(CLI_EXIT_FATAL, "cannot start threads");

    totals t;
    memset(&t, 0, sizeof t);
    cli_progress bar;
    cli_progress_init(&bar, o.quiet);
    double t0 = cli_now();
    int status = CLI_EXIT_OK;
    for (int i = optind; i < argc && !(o.strict && status != CLI_EXIT_OK); i++) {
        char *stem = input_stem(&o, argv[i]);
        if (!stem) cli_die(CLI_EXIT_FATAL, "out of memory");
        remove_stale_temps(&o, single_file, stem, &bar, 0);
        char why[200];
        if (o.skip_existing && strcmp(argv[i], "-") != 0) {
            uint64_t lacks;
            if (outputs_complete(&o, single_file, stem, argv[i], &lacks, why, sizeof why)) {
                t.inputs_skipped++;
                if (lacks) { /* said with -q too: a rerun until exit 0 must not end here */
                    cli_warn("'%s': complete output exists, skipped; it lacks %" PRIu64 " sample%s that the run "
                             "which made it skipped (its lines said why)", argv[i], lacks, lacks == 1 ? "" : "s");
                    if (status == CLI_EXIT_OK) status = CLI_EXIT_PARTIAL;
                } else if (!o.quiet) {
                    cli_warn("'%s': complete output exists, skipped", argv[i]);
                }
                remove_stale_temps(&o, single_file, stem, &bar, 1);
                free(stem);
                continue;
            }
            if (*why && !o.quiet) cli_warn("'%s': %s: sharding it again", argv[i], why);
        } else if (o.skip_existing) { /* said with -q too: the option asked for is not applied */
            cli_progress_end(&bar);
            cli_warn("'-': --skip-existing does not apply to standard input (a stream is not compared with its "
                     "output): sharding it");
        }
        uint64_t skipped_before = t.skipped, cut_before = t.inputs_cut;
        job j = {.o = &o, .r = &r, .single_file = single_file, .input = argv[i], .stem = stem, .t = &t, .bar = &bar,
                 .t0 = t0};
        if (run_input(&j) != 0) {
            t.fatal++;
            status = CLI_EXIT_FATAL;
        } else if ((t.skipped > skipped_before || t.inputs_cut > cut_before) && status == CLI_EXIT_OK) {
            status = CLI_EXIT_PARTIAL;
        }
        remove_stale_temps(&o, single_file, stem, &bar, 1);
        free_job_parts(&j);
        free(stem);
    }
    cli_progress_end(&bar);

    pthread_mutex_lock(&r.mu);
    r.stop = 1;
    pthread_cond_broadcast(&r.work);
    pthread_cond_broadcast(&r.done);
    pthread_mutex_unlock(&r.mu);
    pthread_join(writer, NULL);
    for (unsigned i = 0; i < o.threads; i++) {
        pthread_join(ws[i].tid, NULL);
        sa1b_imgctx_free(ws[i].ctx);
    }
    for (size_t i = 0; i < r.n; i++) {
        free(r.slots[i].jpg);
        free(r.slots[i].json);
    }
    for (size_t i = 0; i < r.n_pool; i++) { /* every one is back: the writer drained the ring */
        sa1b_prep_out_free(r.pool[i]);
        free(r.pool[i]);
    }
    free(r.pool);
    free(r.slots);
    free(ws);
    free(o.dir);
    free(o.prefix);

    double dt = cli_now() - t0;
    char masks[160]; /* the masks with no cell at R among the kept or the dropped ones */
    if (o.prep.keep_empty)
        snprintf(masks, sizeof masks, "%llu masks kept (%llu of them empty at R), %llu dropped",
                 (unsigned long long)t.masks_kept, (unsigned long long)t.masks_empty,
                 (unsigned long long)t.masks_dropped);
    else
        snprintf(masks, sizeof masks, "%llu masks kept, %llu dropped (%llu of them empty at R)",
                 (unsigned long long)t.masks_kept, (unsigned long long)t.masks_dropped,
                 (unsigned long long)t.masks_empty);
    if (!o.quiet)
        cli_warn("%llu images, %s, %llu samples skipped, "
                 "%llu shards written, %llu inputs up to date, %llu inputs cut short, %.1f s (%.1f images/s)",
                 (unsigned long long)t.images, masks, (unsigned long long)t.skipped,
                 (unsigned long long)t.shards, (unsigned long long)t.inputs_skipped,
                 (unsigned long long)t.inputs_cut, dt, dt > 0 ? (double)t.images / dt : 0.0);
    if (o.json_summary)
        printf("{\"images\":%llu,\"masks_kept\":%llu,\"masks_dropped\":%llu,\"skipped\":%llu,"
               "\"shards\":%llu,\"inputs_up_to_date\":%llu,\"inputs_cut_short\":%llu,\"fatal\":%llu,\"bytes_in\":%llu,"
               "\"masks_empty\":%llu,\"seconds\":%.3f,\"exit\":%d}\n",
               (unsigned long long)t.images, (unsigned long long)t.masks_kept,
               (unsigned long long)t.masks_dropped, (unsigned long long)t.skipped,
               (unsigned long long)t.shards, (unsigned long long)t.inputs_skipped,
               (unsigned long long)t.inputs_cut, (unsigned long long)t.fatal, (unsigned long long)t.bytes_in,
               (unsigned long long)t.masks_empty, dt, status);
    cli_stdout_check(); /* a summary that was not written is an I/O error: exit 3 */
    return status;
}
