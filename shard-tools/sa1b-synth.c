/*
 * sa1b-synth.c - writes SA-1B-format tars of synthetic scenes: for each
 * image a member sa_<id>.jpg (TurboJPEG) followed by sa_<id>.json with the
 * exact schema of real SA-1B annotation files and their quirks (ints and
 * floats mixed in bbox and crop_box, SA-1B's bbox convention, ids above
 * 2^31, predicted_iou above 1, point_coords in full-image pixels, counts
 * strings whose backslashes come out escaped).  The pictures and masks come
 * from synth_scene.c; this file adds the annotation dressing, the JSON, the
 * JPEG and the tar, and owns the command line.
 *
 * Determinism: image i of a run depends only on (--seed, i) and the size
 * options; tar headers have fixed times and owners, so the same arguments
 * give the same bytes.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "cli.h"
#include "sa1b_rle.h"
#include "synth_scene.h"

/* tar headers: 2023-04-01 00:00:00 UTC, root:root, 0644 */
#define SYNTH_MTIME 1680307200
/* annotation ids: SYNTH_ID_BASE + image_id * 1000 + index, all above 2^31 */
#define SYNTH_ID_BASE (INT64_C(2147483648) + 1000)
#define SYNTH_MAX_FIRST_ID UINT64_C(1000000000000)

typedef struct options {
    uint64_t images, seed, first_id;
    uint32_t width, height, masks;
    int quality;
    synth_nesting nesting;
    double size_min, size_max;
    const char *out; /* NULL or "-": standard output */
    int quiet;
} options;

static void usage(void)
{
    printf("Usage: %s [OPTIONS] [-o OUT.tar]\n"
           "Write a tar of synthetic scenes in the SA-1B format: sa_<id>.jpg and\n"
           "sa_<id>.json per image, masks as COCO compressed RLE.\n"
           "\n"
           "Options:\n"
           "  -n, --images N      number of images (default 4)\n"
           "  -W, --width W       image width in pixels (default 2250)\n"
           "  -H, --height H      image height in pixels (default 1500)\n"
           "  -m, --masks M       target number of masks per image, 0..%u (default 100)\n"
           "  -s, --seed S        random seed (default 1)\n"
           "      --first-id ID   image id of the first image (default 1)\n"
           "      --quality Q     JPEG quality 1..100 (default 90)\n"
           "      --nesting N     full: nested regions, objects, parts, unions (default);\n"
           "                      flat: only regions and objects, no two masks overlap\n"
           "      --sizes MIN:MAX shape radii as fractions of the shorter side, small ones\n"
           "                      more frequent (default 0.015:0.28)\n"
           "  -o, --output OUT    the tar to write; '-' or no -o: standard output\n"
           "      --quiet         no progress bar\n"
           "  -h, --help          show this help and exit\n"
           "  -V, --version       show the version and exit\n"
           "\n"
           "Exit status: 0 success, 2 usage error, 3 error writing the output.\n",
           cli_prog(), SYNTH_MAX_MASKS);
}

/* ---- numbers ------------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) { return mix64(r->s += UINT64_C(0x632BE59BD9B4E019)); }
static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
static uint64_t rng_below(rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

/* SAM's automatic mask generator crops: layer 0 is the image, layer L an
 * n x n grid (n = 2^L) of overlapping crops; box as [x, y, w, h]. */
static void crop_box(uint32_t W, uint32_t H, int layer, int j, int i, int64_t box[4])
{
    if (layer == 0) {
        box[0] = box[1] = 0;
        box[2] = W;
        box[3] = H;
        return;
    }
    int64_t n = INT64_C(1) << layer;
    double short_side = W < H ? W : H;
    int64_t overlap = (int64_t)(512.0 / 1500.0 * short_side * (2.0 / (double)n));
    int64_t cw = (overlap * (n - 1) + W + n - 1) / n, ch = (overlap * (n - 1) + H + n - 1) / n;
    int64_t x0 = (cw - overlap) * j, y0 = (ch - overlap) * i;
    int64_t x1 = x0 + cw < W ? x0 + cw : W, y1 = y0 + ch < H ? y0 + ch : H;
    box[0] = x0;
    box[1] = y0;
    box[2] = x1 - x0;
    box[3] = y1 - y0;
}

/* a crop of a random layer that holds the mask's bounds */
static void pick_crop(rng *r, uint32_t W, uint32_t H, const synth_mask *m, int64_t box[4])
{
    double u = rng_unit(r);
    int layer = u < 0.45 ? 0 : u < 0.75 ? 1 : 2;
    for (; layer > 0; layer--) {
        int n = 1 << layer, fits[16], nf = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int64_t b[4];
                crop_box(W, H, layer, j, i, b);
                if (b[0] <= m->x0 && m->x1 < b[0] + b[2] && b[1] <= m->y0 && m->y1 < b[1] + b[3])
                    fits[nf++] = i * n + j;
            }
        if (nf) {
            int k = fits[rng_below(r, (uint64_t)nf)];
            crop_box(W, H, layer, k % n, k / n, box);
            return;
        }
    }
    crop_box(W, H, 0, 0, 0, box);
}

/* a float32 value, as SAM's tensors hold them, widened for JSON */
static double f32(double v) { return (double)(float)v; }

/* ---- one image's JSON ---------------------------------------------------- */

static json_t *num(double v, int as_int) { return as_int ? json_integer((json_int_t)v) : json_real(v); }

static json_t *box_json(const double v[4], int as_int)
{
    json_t *a = json_array();
    for (int k = 0; k < 4; k++) json_array_append_new(a, num(v[k], as_int));
    return a;
}

/* Builds the annotation file of one scene; NULL when out of memory. */
static char *annotation_json(const synth_scene *sc, uint64_t image_id, const char *file_name,
                             uint64_t seed)
{
    const uint32_t W = sc->width, H = sc->height;
    const size_t n = sc->n_masks;
    rng r = {seed ^ UINT64_C(0xA54FF53A5F1D36F1)};
    /* per-image quirk flags: at least one int bbox and one float bbox (when
     * two masks or more), at least one predicted_iou above 1 */
    uint8_t *int_bbox = calloc(n ? n : 1, 1), *over = calloc(n ? n : 1, 1);
    char *out = NULL;
    json_t *root = NULL;
    if (!int_bbox || !over) goto done;
    size_t n_int = 0, n_over = 0;
    for (size_t k = 0; k < n; k++) {
        int_bbox[k] = rng_unit(&r) < 0.06;
        over[k] = rng_unit(&r) < 0.03;
        n_int += int_bbox[k];
        n_over += over[k];
    }
    if (n >= 2 && n_int == 0) int_bbox[rng_below(&r, n)] = 1;
    if (n >= 2 && n_int == n) int_bbox[rng_below(&r, n)] = 0;
    if (n >= 1 && n_over == 0) over[rng_below(&r, n)] = 1;
    int int_crops = rng_unit(&r) < 0.25; /* some files carry int crop boxes */

    root = json_object();
    json_t *image = json_object();
    json_object_set_new(image, "image_id", json_integer((json_int_t)image_id));
    json_object_set_new(image, "width", json_integer(W));
    json_object_set_new(image, "height", json_integer(H));
    json_object_set_new(image, "file_name", json_string(file_name));
    json_object_set_new(root, "image", image);
    json_t *anns = json_array();
    json_object_set_new(root, "annotations", anns);
    for (size_t k = 0; k < n; k++) {
        const synth_mask *m = &sc->masks[k];
        char *counts = NULL;
        size_t len = 0;
        if (sa1b_rle_to_string(&m->rle, &counts, &len, NULL)) goto done;
        json_t *a = json_object();
        double bbox[4] = {m->x0, m->y0, (double)m->x1 - m->x0, (double)m->y1 - m->y0};
        json_object_set_new(a, "bbox", box_json(bbox, int_bbox[k]));
        json_object_set_new(a, "area", json_integer((json_int_t)m->area));
        json_t *seg = json_object();
        json_t *size = json_array();
        json_array_append_new(size, json_integer(H));
        json_array_append_new(size, json_integer(W));
        json_object_set_new(seg, "size", size);
        json_object_set_new(seg, "counts", json_stringn(counts, len));
        free(counts);
        json_object_set_new(a, "segmentation", seg);
        double iou = over[k] ? 1.0005 + 0.0195 * rng_unit(&r) : 0.86 + 0.135 * rng_unit(&r);
        json_object_set_new(a, "predicted_iou", json_real(f32(iou)));
        /* the prompt point: inside the chosen foreground pixel, in 1/16ths
         * like SAM's grid points */
        double px = m->px + (double)rng_below(&r, 16) / 16, py = m->py + (double)rng_below(&r, 16) / 16;
        json_t *pt = json_array(), *pts = json_array();
        json_array_append_new(pt, json_real(px));
        json_array_append_new(pt, json_real(py));
        json_array_append_new(pts, pt);
        json_object_set_new(a, "point_coords", pts);
        int64_t cb[4];
        pick_crop(&r, W, H, m, cb);
        double cbd[4] = {(double)cb[0], (double)cb[1], (double)cb[2], (double)cb[3]};
        json_object_set_new(a, "crop_box", box_json(cbd, int_crops));
        json_object_set_new(a, "id", json_integer((json_int_t)(SYNTH_ID_BASE + (int64_t)image_id * 1000 + (int64_t)k)));
        json_object_set_new(a, "stability_score", json_real(f32(0.85 + 0.149 * rng_unit(&r))));
        json_array_append_new(anns, a);
    }
    /* one line, ", " and ": " separators, like the published files */
    out = json_dumps(root, 0);
done:
    json_decref(root);
    free(int_bbox);
    free(over);
    return out;
}

/* ---- output -------------------------------------------------------------- */

/* Opens where the tar goes (cli_out: a regular file through a temporary
 * renamed when complete, a device or a pipe in place, standard output for
 * NULL or "-", never a terminal nor a shard); dies with exit 2 or 3 on
 * failure. */
static void open_output(cli_out *out, const char *path)
{
    if ((!path || strcmp(path, "-") == 0) && isatty(STDOUT_FILENO))
        cli_usage_error("refusing to write a tar to a terminal (use -o FILE or a redirection)");
    if (path && strcmp(path, "-") != 0) cli_check_output(path, NULL, 0); /* never a shard (a typo for the tar) */
    cli_out_open(out, path);
}

/* libarchive's message, with the system's reason when it has one */
static const char *archive_why(struct archive *a)
{
    int e = archive_errno(a);
    if (e > 0) return strerror(e);
    const char *s = archive_error_string(a);
    return s ? s : "unknown error";
}

/* Where libarchive's blocks go: the output's descriptor, until the run
 * fails; then nowhere, so that the end-of-archive blocks that
 * archive_write_free writes never reach the output (archive_write_fail
 * would skip them too, but leaks libarchive's block buffer) and a failed
 * run's tar on a stream reads as cut, never as a smaller whole one. */
typedef struct sink {
    int fd;
    int failed;
} sink;

static la_ssize_t sink_write(struct archive *a, void *arg, const void *buf, size_t n)
{
    sink *k = arg;
    for (size_t done = 0; !k->failed && done < n;) {
        ssize_t w = write(k->fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            archive_set_error(a, errno, "%s", strerror(errno));
            return -1;
        }
        done += (size_t)w;
    }
    return (la_ssize_t)n;
}

static int add_member(struct archive *a, struct archive_entry *e, const char *name,
                      const void *data, size_t size)
{
    archive_entry_clear(e);
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, SYNTH_MTIME, 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_uname(e, "root");
    archive_entry_set_gname(e, "root");
    if (archive_write_header(a, e) != ARCHIVE_OK) return -1;
    la_ssize_t w = archive_write_data(a, data, size);
    if (w < 0 || (size_t)w != size) return -1;
    return 0;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    options o = {.images = 4, .seed = 1, .first_id = 1, .width = 2250, .height = 1500,
                 .masks = 100, .quality = 90, .nesting = SYNTH_NESTING_FULL, .out = NULL, .quiet = 0,
                 .size_min = SYNTH_SIZE_MIN, .size_max = SYNTH_SIZE_MAX};
    enum { OPT_FIRST_ID = 256, OPT_QUALITY, OPT_QUIET, OPT_NESTING, OPT_SIZES };
    static const struct option longopts[] = {
        {"images", required_argument, NULL, 'n'},  {"width", required_argument, NULL, 'W'},
        {"height", required_argument, NULL, 'H'},  {"masks", required_argument, NULL, 'm'},
        {"seed", required_argument, NULL, 's'},    {"first-id", required_argument, NULL, OPT_FIRST_ID},
        {"quality", required_argument, NULL, OPT_QUALITY}, {"output", required_argument, NULL, 'o'},
        {"nesting", required_argument, NULL, OPT_NESTING}, {"sizes", required_argument, NULL, OPT_SIZES},
        {"quiet", no_argument, NULL, OPT_QUIET},   {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
    int c;
    uint64_t v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":n:W:H:m:s:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (cli_parse_u64(optarg, 1, 100000000, &v)) cli_usage_error("--images: '%s' is not a number in 1..100000000", optarg);
            o.images = v;
            break;
        case 'W':
        case 'H':
            if (cli_parse_u64(optarg, 1, SYNTH_MAX_SIDE, &v))
                cli_usage_error("--%s: '%s' is not a number in 1..%u", c == 'W' ? "width" : "height",
                                optarg, SYNTH_MAX_SIDE);
            if (c == 'W') o.width = (uint32_t)v;
            else o.height = (uint32_t)v;
            break;
        case 'm':
            if (cli_parse_u64(optarg, 0, SYNTH_MAX_MASKS, &v))
                cli_usage_error("--masks: '%s' is not a number in 0..%u", optarg, SYNTH_MAX_MASKS);
            o.masks = (uint32_t)v;
            break;
        case 's':
            if (cli_parse_u64(optarg, 0, UINT64_MAX, &v)) cli_usage_error("--seed: '%s' is not a non-negative integer", optarg);
            o.seed = v;
            break;
        case OPT_FIRST_ID:
            if (cli_parse_u64(optarg, 0, SYNTH_MAX_FIRST_ID, &v))
                cli_usage_error("--first-id: '%s' is not a number in 0..%llu", optarg,
                                (unsigned long long)SYNTH_MAX_FIRST_ID);
            o.first_id = v;
            break;
        case OPT_QUALITY:
            if (cli_parse_u64(optarg, 1, 100, &v)) cli_usage_error("--quality: '%s' is not a number in 1..100", optarg);
            o.quality = (int)v;
            break;
        case OPT_NESTING:
            if (strcmp(optarg, "full") == 0) o.nesting = SYNTH_NESTING_FULL;
            else if (strcmp(optarg, "flat") == 0) o.nesting = SYNTH_NESTING_FLAT;
            else cli_usage_error("--nesting: '%s' is not full or flat", optarg);
            break;
        case OPT_SIZES: {
            char lo[64];
            const char *colon = strchr(optarg, ':');
            size_t n = colon ? (size_t)(colon - optarg) : 0;
            double a = 0, b = 0;
            if (colon && n < sizeof lo) memcpy(lo, optarg, n), lo[n] = 0;
            if (!colon || n >= sizeof lo || cli_parse_double(lo, &a) || cli_parse_double(colon + 1, &b) ||
                !(a > 0) || !(b >= a) || !(b <= 1))
                cli_usage_error("--sizes: '%s' is not MIN:MAX with 0 < MIN <= MAX <= 1", optarg);
            o.size_min = a, o.size_max = b;
            break;
        }
        case 'o':
            o.out = optarg;
            break;
        case OPT_QUIET:
            o.quiet = 1;
            break;
        case 'h':
            usage();
            cli_stdout_check();
            return CLI_EXIT_OK;
        case 'V':
            cli_version();
            return CLI_EXIT_OK;
        case ':':
            cli_usage_error("option '%s' needs an argument", argv[optind - 1]);
        default:
            if (optopt) cli_usage_error("unknown option '-%c'", optopt);
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) cli_usage_error("unexpected argument '%s'", argv[optind]);
    if ((uint64_t)o.width * o.height > SYNTH_MAX_PIXELS)
        cli_usage_error("%ux%u pixels: more than %llu", o.width, o.height,
                        (unsigned long long)SYNTH_MAX_PIXELS);
    if (o.first_id + o.images - 1 > SYNTH_MAX_FIRST_ID)
        cli_usage_error("--first-id: image ids would exceed %llu", (unsigned long long)SYNTH_MAX_FIRST_ID);

    cli_out out;
    open_output(&out, o.out);
    const char *what = out.path ? out.path : "standard output";

    synth_scene *sc = synth_scene_new(o.width, o.height);
    if (sc) sc->size_min = o.size_min, sc->size_max = o.size_max;
    tjhandle tj = tjInitCompress();
    struct archive *a = archive_write_new();
    sink to = {.fd = fileno(out.f)};
    struct archive_entry *e = archive_entry_new();
    if (!sc || !tj || !a || !e) cli_die(CLI_EXIT_FATAL, "out of memory"); /* (removes the temporary) */
    /* records of 10240 bytes, the last one padded like GNU tar's, whatever
     * the output is (libarchive would otherwise pad only devices and fd 1) */
    if (archive_write_set_format_ustar(a) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(a, 10240) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 0) != ARCHIVE_OK ||
        archive_write_open2(a, &to, NULL, sink_write, NULL, NULL) != ARCHIVE_OK)
        cli_die(CLI_EXIT_FATAL, "cannot write '%s': %s", what, archive_why(a));

    cli_progress p;
    cli_progress_init(&p, o.quiet);
    unsigned char *jpeg = NULL;
    unsigned long jpeg_size = 0;
    int status = CLI_EXIT_OK;
    /* tests: SA1B_TEST_FAIL=image:N fails the N-th image as a render would */
    unsigned long long fail_at = 0;
    const char *tf = getenv("SA1B_TEST_FAIL");
    if (tf && sscanf(tf, "image:%llu", &fail_at) != 1) fail_at = 0;
    for (uint64_t i = 0; i < o.images && status == CLI_EXIT_OK; i++) {
        uint64_t image_id = o.first_id + i;
        uint64_t seed = mix64(mix64(o.seed) ^ i);
        sa1b_error err;
        sa1b_error_clear(&err);
        if ((i + 1 == fail_at && sa1b_error_set(&err, SA1B_ENOMEM, -1, "out of memory (SA1B_TEST_FAIL)")) ||
            synth_scene_render(sc, seed, o.masks, o.nesting, &err)) {
            cli_progress_end(&p);
            cli_warn("image %llu: %s", (unsigned long long)image_id, err.msg);
            status = CLI_EXIT_FATAL;
            break;
        }
        if (tjCompress2(tj, sc->rgb, (int)o.width, 0, (int)o.height, TJPF_RGB, &jpeg, &jpeg_size,
                        TJSAMP_420, o.quality, 0) != 0) {
            cli_progress_end(&p);
            cli_warn("image %llu: JPEG compression failed: %s", (unsigned long long)image_id,
                     tjGetErrorStr2(tj));
            status = CLI_EXIT_FATAL;
            break;
        }
        char jpg_name[64], json_name[64];
        snprintf(jpg_name, sizeof jpg_name, "sa_%llu.jpg", (unsigned long long)image_id);
        snprintf(json_name, sizeof json_name, "sa_%llu.json", (unsigned long long)image_id);
        char *json = annotation_json(sc, image_id, jpg_name, seed);
        if (!json) {
            cli_progress_end(&p);
            cli_warn("out of memory");
            status = CLI_EXIT_FATAL;
            break;
        }
        if (add_member(a, e, jpg_name, jpeg, jpeg_size) ||
            add_member(a, e, json_name, json, strlen(json))) {
            cli_progress_end(&p);
            cli_warn("cannot write '%s': %s", what, archive_why(a));
            status = CLI_EXIT_FATAL;
        }
        free(json);
        cli_progress_update(&p, i + 1, o.images, "images");
    }
    cli_progress_end(&p);
    if (status == CLI_EXIT_OK && archive_write_close(a) != ARCHIVE_OK) {
        cli_warn("cannot write '%s': %s", what, archive_why(a));
        status = CLI_EXIT_FATAL;
    }
    to.failed = status != CLI_EXIT_OK; /* (sink) */
    archive_write_free(a);
    archive_entry_free(e);
    tjFree(jpeg);
    tjDestroy(tj);
    synth_scene_free(sc);

    /* libarchive wrote to the descriptor: nothing is buffered in out.f */
    if (status == CLI_EXIT_OK) cli_out_commit(&out); /* (dies with exit 3 when it cannot) */
    else cli_out_discard(&out);
    return status;
}
