/*
 * sa1b-export - draws a shard image with its masks (translucent fills in a
 * deterministic palette, outlines, prompt points) to PNG or JPEG, or a
 * contact sheet of several images with --grid: how people look at a shard
 * before training on it.  Man page: sa1b-export(1) (it defines the palette
 * and the drawing exactly; tests/test-shard-gen.c checks pixels against it).
 */
#include "cli.h"
#include "palette.h"
#include "pngio.h"
#include "sa1b_image.h"
#include "sa1b_shard.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct options {
    const char *input, *output;
    int have_index, have_id;
    uint64_t index;
    int64_t id;
    uint64_t grid;     /* images on the sheet; 0: a single image */
    uint32_t tile;     /* sheet cell size in pixels; 0: min(S, 256) */
    double alpha;      /* fill opacity */
    int outlines, points;
    int quality;
    int jpeg;          /* output format from the extension */
} options;

static void usage(void)
{
    printf("Usage: %s [OPTIONS] FILE (--index N | --id ID) -o OUT.png|OUT.jpg\n"
           "Draw a shard image with its masks as translucent coloured overlays,\n"
           "outlines and prompt points; with --grid, a contact sheet.\n"
           "\n"
           "Options:\n"
           "  -i, --index N      the image at position N (0-based; default 0)\n"
           "      --id ID        the image with this SA-1B image_id\n"
           "  -g, --grid N       a contact sheet of N images from the chosen one on\n"
           "  -t, --tile PX      sheet cell size in pixels (default: the smaller of S and 256)\n"
           "  -a, --alpha A      opacity of the mask fills, 0..1 (default 0.5)\n"
           "      --no-outlines  do not draw mask outlines\n"
           "      --no-points    do not draw prompt points\n"
           "  -q, --quality Q    JPEG quality 1..100 (default 90)\n"
           "  -o, --output OUT   output file: .png or .jpg/.jpeg (required)\n"
           "  -h, --help         show this help and exit\n"
           "  -V, --version      show the version and exit\n"
           "\n"
           "Exit status: 0 written, 1 the shard is damaged or has no such image,\n"
           "2 usage error, 3 I/O error.\n",
           cli_prog());
}

static uint8_t blend(uint8_t src, uint8_t col, double a)
{
    return (uint8_t)floor(src * (1 - a) + col * a + 0.5);
}

/* Renders image i into rgb [S][S][3]. */
static int render(const sa1b_shard *s, sa1b_imgctx *ctx, uint64_t i, const options *o,
                  uint8_t *rgb, sa1b_error *err)
{
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    /* source-size masks are drawn at S x S (resampled as sa1b-shard would) */
    const uint32_t S = in->image_size, R = in->mask_size ? in->mask_size : S;
    sa1b_shard_image_view im;
    SA1B_FORWARD(sa1b_shard_image(s, i, &im, err));
    SA1B_FORWARD(sa1b_shard_verify_image(s, i, err));
    if (in->image_format == SA1B_SHARD_RAW)
        memcpy(rgb, im.payload, (size_t)S * S * 3);
    else
        SA1B_FORWARD(sa1b_jpeg_decode(ctx, im.payload, (size_t)im.payload_len, rgb, S, S, err));
    if (!im.n_masks) return SA1B_OK;
    uint32_t *cell = malloc(S * sizeof *cell); /* pixel -> mask cell, per axis */
    uint8_t *bits = malloc((size_t)R * R);
    if (!cell || !bits) {
        free(cell);
        free(bits);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    }
    for (uint32_t x = 0; x < S; x++) cell[x] = (uint32_t)((uint64_t)x * R / S);
    /* fills, in mask order (later masks on top) */
    for (uint32_t j = 0; j < im.n_masks; j++) {
        sa1b_shard_mask_view m;
        SA1B_FORWARD(sa1b_shard_mask(s, i, j, &m, err));
        SA1B_FORWARD(sa1b_shard_resample_mask(s, &m, R, 0, bits, err));
        uint8_t col[3];
        palette_mask(j, col);
        for (uint32_t y = 0; y < S; y++) {
            const uint8_t *row = bits + (size_t)cell[y] * R;
            uint8_t *px = rgb + (size_t)y * S * 3;
            for (uint32_t x = 0; x < S; x++)
                if (row[cell[x]])
                    for (int c = 0; c < 3; c++) px[3 * x + c] = blend(px[3 * x + c], col[c], o->alpha);
        }
    }
    /* outlines: mask pixels with a 4-neighbour outside the mask, full colour */
    for (uint32_t j = 0; o->outlines && j < im.n_masks; j++) {
        sa1b_shard_mask_view m;
        SA1B_FORWARD(sa1b_shard_mask(s, i, j, &m, err));
        SA1B_FORWARD(sa1b_shard_resample_mask(s, &m, R, 0, bits, err));
        uint8_t col[3];
        palette_mask(j, col);
#define IN(yy, xx) (bits[(size_t)cell[yy] * R + cell[xx]] != 0)
        for (uint32_t y = 0; y < S; y++)
            for (uint32_t x = 0; x < S; x++) {
                if (!IN(y, x)) continue;
                int edge = (x > 0 && !IN(y, x - 1)) || (x + 1 < S && !IN(y, x + 1)) ||
                           (y > 0 && !IN(y - 1, x)) || (y + 1 < S && !IN(y + 1, x));
                if (edge) memcpy(rgb + ((size_t)y * S + x) * 3, col, 3);
            }
#undef IN
    }
    /* prompt points: a white disc of radius r = max(2, S/160) in a black ring
     * (pixel centres within r + 1.5) */
    double r = S / 160.0 < 2 ? 2 : S / 160.0;
    for (uint32_t j = 0; o->points && j < im.n_masks; j++) {
        sa1b_shard_mask_view m;
        SA1B_FORWARD(sa1b_shard_mask(s, i, j, &m, err));
        double px = m.point[0], py = m.point[1];
        if (!isfinite(px) || !isfinite(py)) continue;
        double lim = r + 1.5;
        long x0 = (long)floor(px - lim), x1 = (long)ceil(px + lim);
        long y0 = (long)floor(py - lim), y1 = (long)ceil(py + lim);
        for (long y = y0 < 0 ? 0 : y0; y <= y1 && y < (long)S; y++)
            for (long x = x0 < 0 ? 0 : x0; x <= x1 && x < (long)S; x++) {
                double dx = x + 0.5 - px, dy = y + 0.5 - py, d2 = dx * dx + dy * dy;
                uint8_t *p = rgb + ((size_t)y * S + (size_t)x) * 3;
                if (d2 <= r * r) memset(p, 255, 3);
                else if (d2 <= lim * lim) memset(p, 0, 3);
            }
    }
    free(cell);
    free(bits);
    return SA1B_OK;
}

/* Writes w x h RGB to o->output: a device or a FIFO in place, a file
 * through a temporary file and a rename (cli_out). */
static void write_output(const options *o, sa1b_imgctx *ctx, const uint8_t *rgb, uint32_t w,
                         uint32_t h)
{
    cli_out out;
    cli_out_open(&out, o->output);
    char why[256] = "";
    if (o->jpeg) {
        uint8_t *jpg = NULL;
        size_t len = 0;
        sa1b_error err;
        if (sa1b_jpeg_encode(ctx, rgb, w, h, o->quality, SA1B_JPEG_OPTIMIZED, &jpg, &len, &err))
            cli_out_fail(&out, err.msg);
        if (fwrite(jpg, 1, len, out.f) != len) cli_out_fail(&out, strerror(errno));
        free(jpg);
    } else if (pngio_write(out.f, rgb, w, h, 3, why, sizeof why) != 0) {
        cli_out_fail(&out, why);
    }
    cli_out_commit(&out);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    cli_catch_sigbus(); /* shards are read through a memory mapping */
    enum { OPT_ID = 256, OPT_NO_OUTLINES, OPT_NO_POINTS };
    static const struct option longopts[] = {
        {"index", required_argument, NULL, 'i'},   {"id", required_argument, NULL, OPT_ID},
        {"grid", required_argument, NULL, 'g'},    {"tile", required_argument, NULL, 't'},
        {"alpha", required_argument, NULL, 'a'},   {"no-outlines", no_argument, NULL, OPT_NO_OUTLINES},
        {"no-points", no_argument, NULL, OPT_NO_POINTS}, {"quality", required_argument, NULL, 'q'},
        {"output", required_argument, NULL, 'o'},  {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
    options o;
    memset(&o, 0, sizeof o);
    o.alpha = 0.5;
    o.outlines = o.points = 1;
    o.quality = 90;
    int c;
    uint64_t v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:g:t:a:q:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if (cli_parse_u64(optarg, 0, UINT64_MAX, &o.index)) cli_usage_error("bad --index '%s'", optarg);
            o.have_index = 1;
            break;
        case OPT_ID: {
            char *end;
            errno = 0;
            long long id = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end) cli_usage_error("bad --id '%s'", optarg);
            o.id = id;
            o.have_id = 1;
            break;
        }
        case 'g':
            if (cli_parse_u64(optarg, 1, 10000, &o.grid)) cli_usage_error("bad --grid '%s' (1..10000)", optarg);
            break;
        case 't':
            if (cli_parse_u64(optarg, 8, 4096, &v)) cli_usage_error("bad --tile '%s' (8..4096)", optarg);
            o.tile = (uint32_t)v;
            break;
        case 'a':
            if (cli_parse_double(optarg, &o.alpha) || !(o.alpha >= 0 && o.alpha <= 1))
                cli_usage_error("bad --alpha '%s' (0..1)", optarg);
            break;
        case OPT_NO_OUTLINES: o.outlines = 0; break;
        case OPT_NO_POINTS: o.points = 0; break;
        case 'q':
            if (cli_parse_u64(optarg, 1, 100, &v)) cli_usage_error("bad --quality '%s' (1..100)", optarg);
            o.quality = (int)v;
            break;
        case 'o': o.output = optarg; break;
        case 'h': usage(); cli_stdout_check(); return CLI_EXIT_OK;
        case 'V': cli_version(); return CLI_EXIT_OK;
        case ':': cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt) cli_usage_error("unknown option '-%c'", optopt);
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind + 1 != argc) cli_usage_error(optind >= argc ? "no shard file given" : "one shard file at a time");
    o.input = argv[optind];
    if (!o.output) cli_usage_error("no output file (-o OUT.png or OUT.jpg)");
    if (o.have_index && o.have_id) cli_usage_error("--index and --id exclude each other");
    if (has_suffix(o.output, ".jpg") || has_suffix(o.output, ".jpeg")) o.jpeg = 1;
    else if (!has_suffix(o.output, ".png")) cli_usage_error("output '%s' must end in .png, .jpg or .jpeg", o.output);
    cli_check_output(o.output, argv + optind, 1);

    sa1b_shard *s = NULL;
    sa1b_error err;
    int rc = sa1b_shard_open(&s, cli_shard_path(o.input), &err);
    if (rc) cli_die(rc == SA1B_EIO ? CLI_EXIT_FATAL : CLI_EXIT_PARTIAL, "'%s': %s", o.input, err.msg);
    const sa1b_shard_info *in = sa1b_shard_get_info(s);
    uint64_t first = o.index;
    if (o.have_id && sa1b_shard_find_image(s, o.id, &first, &err))
        cli_die(CLI_EXIT_PARTIAL, "'%s': %s", o.input, err.msg);
    if (first >= in->n_images)
        cli_die(CLI_EXIT_PARTIAL, "'%s': no image %llu (the shard has %llu)", o.input,
                (unsigned long long)first, (unsigned long long)in->n_images);
    sa1b_imgctx *ctx = NULL;
    if (sa1b_imgctx_new(&ctx, &err)) cli_die(CLI_EXIT_FATAL, "%s", err.msg);
    const uint32_t S = in->image_size;
    uint8_t *rgb = malloc((size_t)S * S * 3);
    if (!rgb) cli_die(CLI_EXIT_FATAL, "out of memory");
    if (!o.grid) {
        if ((rc = render(s, ctx, first, &o, rgb, &err)))
            cli_die(CLI_EXIT_PARTIAL, "'%s': %s", o.input, err.msg);
        write_output(&o, ctx, rgb, S, S);
    } else {
        uint64_t n = o.grid;
        if (n > in->n_images - first) n = in->n_images - first;
        uint32_t tile = o.tile ? o.tile : (S < 256 ? S : 256), gap = 4;
        uint32_t cols = (uint32_t)ceil(sqrt((double)n));
        uint32_t rows = (uint32_t)((n + cols - 1) / cols);
        uint32_t W = cols * tile + (cols + 1) * gap, H = rows * tile + (rows + 1) * gap;
        if ((uint64_t)W * H > ((uint64_t)1 << 28)) cli_usage_error("contact sheet of %ux%u too large: lower --tile or --grid", W, H);
        uint8_t *sheet = malloc((size_t)W * H * 3), *small = malloc((size_t)tile * tile * 3);
        if (!sheet || !small) cli_die(CLI_EXIT_FATAL, "out of memory");
        memset(sheet, 32, (size_t)W * H * 3);
        for (uint64_t k = 0; k < n; k++) {
            if ((rc = render(s, ctx, first + k, &o, rgb, &err)))
                cli_die(CLI_EXIT_PARTIAL, "'%s': %s", o.input, err.msg);
            const uint8_t *src = rgb;
            if (tile != S) {
                if (sa1b_resize_area(rgb, S, S, small, tile, tile, 3, &err))
                    cli_die(CLI_EXIT_FATAL, "resize: %s", err.msg);
                src = small;
            }
            uint32_t cx = gap + (uint32_t)(k % cols) * (tile + gap), cy = gap + (uint32_t)(k / cols) * (tile + gap);
            for (uint32_t y = 0; y < tile; y++)
                memcpy(sheet + ((size_t)(cy + y) * W + cx) * 3, src + (size_t)y * tile * 3, (size_t)tile * 3);
        }
        write_output(&o, ctx, sheet, W, H);
        free(sheet);
        free(small);
    }
    free(rgb);
    sa1b_imgctx_free(ctx);
    sa1b_shard_close(s);
    return CLI_EXIT_OK;
}
