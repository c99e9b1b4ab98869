/*
 * sa1b-rle.c - the COCO RLE codec on the command line: inspect the masks of
 * SA-1B annotation files or JSON lines (info), turn a counts string into
 * pixels at full or reduced resolution (decode), pixels into a counts
 * string (encode), and compute IoU and merges of masks given as arguments.
 * All the work is done by libsa1b's rle module; this file is argument
 * handling, JSON and image I/O.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "pngio.h"
#include "rle_input.h"
#include "sa1b_rle.h"

enum { EXIT_BADMASK = 1 };

static void usage(FILE *o)
{
    fprintf(o,
            "Usage: %s info [FILE...|-]\n"
            "       %s decode --size HxW --counts STR [--raw|--pgm|--png]\n"
            "                  [--resize RHxRW [--mode nearest|area] [--coverage]] [-o FILE]\n"
            "       %s encode [--size HxW] [--raw|--pgm|--png] [--json] [FILE|-]\n"
            "       %s iou [--crowd] A B\n"
            "       %s merge --union|--intersect A B...\n"
            "\n"
            "The COCO run-length mask code (SA-1B \"counts\" strings) on the command line.\n"
            "\n"
            "  info     one JSON line per mask of SA-1B annotation files or of JSON lines\n"
            "           {\"size\":[h,w],\"counts\":...}: id, area, bbox (COCO), sa1b_bbox, runs\n"
            "  decode   write the mask: raw h*w bytes of 0/1 (row-major), or PGM/PNG 0/255\n"
            "  encode   read a raw, PGM or PNG mask (nonzero = foreground), print its counts\n"
            "  iou      IoU of mask A against mask B (--crowd: |A and B| / |A|)\n"
            "  merge    union or intersection of masks, printed as a JSON mask\n"
            "\n"
            "Masks A, B are JSON objects {\"size\":[h,w],\"counts\":\"...\"} or HxW:COUNTS.\n"
            "\n"
            "Options:\n"
            "  -s, --size HxW        mask rows x columns\n"
            "  -c, --counts STR      the compressed counts string\n"
            "      --raw             raw bytes (default)\n"
            "      --pgm             binary PGM (P5)\n"
            "      --png             8-bit greyscale PNG\n"
            "  -r, --resize RHxRW    decode straight to RH rows x RW columns\n"
            "  -m, --mode MODE       nearest (default) or area (foreground fraction >= 0.5)\n"
            "      --coverage        with --mode area: write the coverage 0..255 instead\n"
            "  -o, --output FILE     write to FILE instead of standard output\n"
            "      --json            encode: print {\"size\":[h,w],\"counts\":...}\n"
            "      --crowd           iou: B is a crowd region\n"
            "      --union           merge: union\n"
            "      --intersect       merge: intersection\n"
            "  -h, --help            show this help and exit\n"
            "  -V, --version         show the version and exit\n",
            cli_prog(), cli_prog(), cli_prog(), cli_prog(), cli_prog());
}

/* s with its control bytes escaped (rle_input_escape), for a message that
 * quotes it; malloc'ed. */
static char *esc(const char *s)
{
    char *e = rle_input_escape(s, strlen(s));
    if (!e) cli_die(CLI_EXIT_FATAL, "out of memory");
    return e;
}

/* ---- options -------------------------------------------------------------- */

enum { FMT_RAW, FMT_PGM, FMT_PNG };
enum {
    OPT_RAW = 256, OPT_PGM, OPT_PNG, OPT_COVERAGE, OPT_JSON, OPT_CROWD, OPT_UNION,
    OPT_INTERSECT
};

typedef struct options {
    const char *size, *counts, *resize, *mode, *output;
    int format, coverage, json, crowd, merge_op; /* merge_op: -1 unset, 0 union, 1 intersect */
} options;

static const struct option longopts[] = {
    {"size", required_argument, NULL, 's'},
    {"counts", required_argument, NULL, 'c'},
    {"raw", no_argument, NULL, OPT_RAW},
    {"pgm", no_argument, NULL, OPT_PGM},
    {"png", no_argument, NULL, OPT_PNG},
    {"resize", required_argument, NULL, 'r'},
    {"mode", required_argument, NULL, 'm'},
    {"coverage", no_argument, NULL, OPT_COVERAGE},
    {"output", required_argument, NULL, 'o'},
    {"json", no_argument, NULL, OPT_JSON},
    {"crowd", no_argument, NULL, OPT_CROWD},
    {"union", no_argument, NULL, OPT_UNION},
    {"intersect", no_argument, NULL, OPT_INTERSECT},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* Parses options anywhere after the subcommand; operands end up in argv[optind..]. */
static void parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->merge_op = -1;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:c:r:m:o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 's': o->size = optarg; break;
        case 'c': o->counts = optarg; break;
        case 'r': o->resize = optarg; break;
        case 'm': o->mode = optarg; break;
        case 'o': o->output = optarg; break;
        case OPT_RAW: o->format = FMT_RAW; break;
        case OPT_PGM: o->format = FMT_PGM; break;
        case OPT_PNG: o->format = FMT_PNG; break;
        case OPT_COVERAGE: o->coverage = 1; break;
        case OPT_JSON: o->json = 1; break;
        case OPT_CROWD: o->crowd = 1; break;
        case OPT_UNION: o->merge_op = 0; break;
        case OPT_INTERSECT: o->merge_op = 1; break;
        case 'h': usage(stdout); cli_stdout_check(); exit(0);
        case 'V': cli_version(); exit(0);
        case ':': cli_usage_error("%s: option '%s' needs an argument", argv[0], esc(argv[optind - 1]));
        default:
            if (optopt) cli_usage_error("%s: unknown option '%s'", argv[0], esc((char[]){'-', (char)optopt, '\0'}));
            cli_usage_error("%s: unknown option '%s'", argv[0], esc(argv[optind - 1]));
        }
    }
}

/* Refuses options that a subcommand does not take. */
static void only(const options *o, const char *cmd, const char *allowed)
{
    struct { const char *name; int set; } all[] = {
        {"size", o->size != NULL},      {"counts", o->counts != NULL},
        {"resize", o->resize != NULL},  {"mode", o->mode != NULL},
        {"output", o->output != NULL},  {"format", o->format != FMT_RAW},
        {"coverage", o->coverage},      {"json", o->json},
        {"crowd", o->crowd},            {"merge", o->merge_op >= 0},
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        if (!all[i].set || strstr(allowed, all[i].name)) continue;
        if (strcmp(all[i].name, "format") == 0)
            cli_usage_error("%s: --raw/--pgm/--png do not apply", cmd);
        if (strcmp(all[i].name, "merge") == 0)
            cli_usage_error("%s: --union/--intersect do not apply", cmd);
        cli_usage_error("%s: --%s does not apply", cmd, all[i].name);
    }
}

/* ---- masks from arguments ---------------------------------------------------- */

/* A mask argument: JSON object or HxW:COUNTS.  Exits 1 when malformed. */
static void mask_arg(const char *arg, sa1b_rle *r)
{
    char why[512];
    int rc = rle_input_mask_arg(arg, r, why, sizeof why);
    if (rc == RLE_ARG_USAGE) cli_usage_error("'%s': %s", esc(arg), why);
    if (rc) cli_die(EXIT_BADMASK, "'%s': %s", esc(arg), why);
}

static void print_mask_json(FILE *f, const sa1b_rle *r)
{
    char *s = NULL;
    sa1b_error err;
    if (sa1b_rle_to_string(r, &s, NULL, &err)) cli_die(CLI_EXIT_FATAL, "%s", err.msg);
    /* counts characters are 48..111: only '\\' needs escaping in JSON */
    fprintf(f, "{\"size\":[%u,%u],\"counts\":\"", r->h, r->w);
    for (const char *c = s; *c; c++) {
        if (*c == '\\') fputc('\\', f);
        fputc(*c, f);
    }
    fputs("\"}\n", f);
    free(s);
}

/* Shortest decimal that reads back as the same double. */
static void print_double(FILE *f, double v)
{
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, f);
}

/* ---- info ------------------------------------------------------------------ */

typedef struct info_ctx {
    int bad;       /* masks that failed */
    size_t masks;  /* masks seen in this input */
    const char *name; /* of this input, escaped */
    sa1b_rle r;
} info_ctx;

static void info_bbox(FILE *f, const double b[4])
{
    fprintf(f, "[%.0f,%.0f,%.0f,%.0f]", b[0], b[1], b[2], b[3]);
}

static void info_mask(void *ctx, json_t *holder, json_t *seg, size_t line)
{
    info_ctx *c = ctx;
    size_t k = c->masks++;
    sa1b_error err;
    sa1b_error_clear(&err);
    if (rle_input_mask_json(seg, &c->r, &err)) {
        cli_warn("%s:%zu: mask %zu: %s", c->name, line, k, err.msg);
        c->bad++;
        return;
    }
    double bb[4], sb[4];
    sa1b_rle_bbox(&c->r, bb);
    sa1b_rle_bbox_sa1b(&c->r, sb);
    putchar('{');
    json_t *id = json_object_get(holder, "id");
    if (id) {
        char *s = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
        if (s) printf("\"id\":%s,", s);
        free(s);
    }
    printf("\"area\":%llu,\"bbox\":", (unsigned long long)sa1b_rle_area(&c->r));
    info_bbox(stdout, bb);
    fputs(",\"sa1b_bbox\":", stdout);
    info_bbox(stdout, sb);
    printf(",\"runs\":%zu}\n", c->r.n);
}

static int read_all(FILE *f, char **buf, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return -1;
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
        }
    }
    if (ferror(f)) {
        free(b);
        return -1;
    }
    *buf = b;
    *len = n;
    return 0;
}

static void info_bad(void *ctx, size_t line, const char *why)
{
    info_ctx *c = ctx;
    cli_warn("%s:%zu: %s", c->name, line, why);
    c->bad++;
}

static void info_input(info_ctx *c, const char *path)
{
    int is_stdin = strcmp(path, "-") == 0;
    char *ename = esc(is_stdin ? "(stdin)" : path);
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        cli_warn("cannot open '%s': %s", ename, strerror(errno));
        c->bad++;
        free(ename);
        return;
    }
    char *buf;
    size_t len;
    if (read_all(f, &buf, &len)) {
        cli_warn("cannot read '%s': %s", ename, strerror(errno));
        c->bad++;
        if (!is_stdin) fclose(f);
        free(ename);
        return;
    }
    if (!is_stdin) fclose(f);
    c->masks = 0;
    c->name = ename;
    rle_input_stream_cb cb = {info_mask, info_bad, c};
    rle_input_stream(buf, len, &cb);
    free(ename);
    free(buf);
}

static int cmd_info(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    only(&o, "info", "");
    info_ctx c = {0};
    c.r = (sa1b_rle)SA1B_RLE_INIT;
    if (optind >= argc) info_input(&c, "-");
    for (int i = optind; i < argc; i++) info_input(&c, argv[i]);
    sa1b_rle_free(&c.r);
    cli_stdout_check();
    return c.bad ? EXIT_BADMASK : 0;
}

/* ---- images ------------------------------------------------------------------ */

/* Writes h x w bytes of grey (already 0..255 or 0/1 for raw). */
static void write_image(cli_out *o, int format, const uint8_t *pix, uint32_t h, uint32_t w)
{
    size_t n = (size_t)h * w;
    /* a failed header write leaves the stream in error: cli_out_commit reports it */
    if (format == FMT_PGM) fprintf(o->f, "P5\n%u %u\n255\n", w, h);
    if (format != FMT_PNG) {
        if (fwrite(pix, 1, n, o->f) != n) cli_out_fail(o, strerror(errno));
        return;
    }
    char msg[256];
    if (pngio_write(o->f, pix, w, h, 1, msg, sizeof msg)) cli_out_fail(o, msg);
}

static int cmd_decode(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    only(&o, "decode", "size counts resize mode output format coverage");
    if (optind < argc) cli_usage_error("decode: unexpected argument '%s'", esc(argv[optind]));
    if (!o.size || !o.counts) cli_usage_error("decode: --size and --counts are required");
    uint32_t h, w, rh = 0, rw = 0;
    if (cli_parse_dims(o.size, UINT32_MAX, &h, &w))
        cli_usage_error("decode: bad --size '%s' (want HxW)", esc(o.size));
    int area = 0;
    if (o.mode) {
        if (strcmp(o.mode, "area") == 0) area = 1;
        else if (strcmp(o.mode, "nearest") != 0)
            cli_usage_error("decode: bad --mode '%s' (nearest or area)", esc(o.mode));
        if (!o.resize) cli_usage_error("decode: --mode needs --resize");
    }
    if (o.coverage && !area) cli_usage_error("decode: --coverage needs --mode area");
    if (o.resize && cli_parse_dims(o.resize, UINT32_MAX, &rh, &rw))
        cli_usage_error("decode: bad --resize '%s' (want RHxRW)", esc(o.resize));
    if ((uint64_t)h * w > SA1B_RLE_MAX_PIXELS)
        cli_die(EXIT_BADMASK, "--size %ux%u: more than 2^32-1 pixels", h, w);
    uint32_t oh = o.resize ? rh : h, ow = o.resize ? rw : w;
    if (o.format == FMT_PNG && (oh > 0x7fffffffu || ow > 0x7fffffffu))
        cli_die(EXIT_BADMASK, "image %ux%u too large for PNG", oh, ow);
    if ((uint64_t)oh * ow > ((uint64_t)1 << 36))
        cli_die(EXIT_BADMASK, "output %ux%u too large", oh, ow);

    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error err;
    if (sa1b_rle_from_string(&r, h, w, o.counts, strlen(o.counts), &err))
        cli_die(EXIT_BADMASK, "counts: %s", err.msg);
    size_t npix = (size_t)oh * ow;
    uint8_t *pix = malloc(npix ? npix : 1);
    if (!pix) cli_die(CLI_EXIT_FATAL, "out of memory for %ux%u", oh, ow);
    int rc = 0, is01 = 1;
    if (!o.resize) sa1b_rle_decode(&r, pix, 0);
    else if (!area) rc = sa1b_rle_resample_nearest(&r, rh, rw, pix, &err);
    else if (o.coverage) {
        rc = sa1b_rle_resample_area(&r, rh, rw, pix, NULL, &err);
        is01 = 0;
    } else rc = sa1b_rle_resample_area(&r, rh, rw, NULL, pix, &err);
    if (rc) cli_die(CLI_EXIT_FATAL, "resize: %s", err.msg);
    if (is01 && o.format != FMT_RAW)
        for (size_t i = 0; i < (size_t)oh * ow; i++) pix[i] = pix[i] ? 255 : 0;
    cli_out out;
    if (o.output) cli_check_output(o.output, NULL, 0); /* never a shard */
    cli_out_open(&out, o.output);
    write_image(&out, o.format, pix, oh, ow);
    cli_out_commit(&out);
    free(pix);
    sa1b_rle_free(&r);
    return 0;
}

static int cmd_encode(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    only(&o, "encode", "size format json");
    if (argc - optind > 1) cli_usage_error("encode: one input at most");
    uint32_t h = 0, w = 0;
    if (o.size && cli_parse_dims(o.size, UINT32_MAX, &h, &w))
        cli_usage_error("encode: bad --size '%s' (want HxW)", esc(o.size));
    if (!o.size && o.format == FMT_RAW) cli_usage_error("encode: raw input needs --size");
    const char *path = optind < argc ? argv[optind] : "-";
    int is_stdin = strcmp(path, "-") == 0;
    char *name = esc(is_stdin ? "(stdin)" : path);
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", name, strerror(errno));
    const uint8_t *pix = NULL;
    uint8_t *own = NULL;
    uint32_t ih = 0, iw = 0;
    char *buf;
    size_t len;
    if (read_all(f, &buf, &len)) cli_die(CLI_EXIT_FATAL, "cannot read '%s'", name);
    if (o.format == FMT_PNG) {
        pngio_image img;
        char msg[256];
        if (rle_input_png((const uint8_t *)buf, len, SA1B_RLE_MAX_PIXELS, &img, msg, sizeof msg))
            cli_die(EXIT_BADMASK, "'%s': %s", name, msg);
        free(buf);
        own = img.pix;
        pix = own;
        ih = img.h;
        iw = img.w;
    } else {
        own = (uint8_t *)buf;
        if (o.format == FMT_PGM) {
            const char *why;
            if (rle_input_pgm(own, len, &ih, &iw, &pix, &why))
                cli_die(EXIT_BADMASK, "'%s': %s", name, why);
        } else {
            if (len != (uint64_t)h * w)
                cli_die(EXIT_BADMASK, "'%s': %zu bytes, want %ux%u = %llu", name, len, h, w,
                        (unsigned long long)h * w);
            ih = h;
            iw = w;
            pix = own;
        }
    }
    if (!is_stdin) fclose(f);
    if (o.size && (ih != h || iw != w))
        cli_die(EXIT_BADMASK, "'%s': image is %ux%u, --size says %ux%u", name, ih, iw, h, w);
    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error err;
    if (sa1b_rle_encode(&r, pix, ih, iw, 0, &err)) cli_die(EXIT_BADMASK, "'%s': %s", name, err.msg);
    free(own);
    free(name);
    if (o.json) print_mask_json(stdout, &r);
    else {
        char *s;
        if (sa1b_rle_to_string(&r, &s, NULL, &err)) cli_die(CLI_EXIT_FATAL, "%s", err.msg);
        puts(s);
        free(s);
    }
    sa1b_rle_free(&r);
    cli_stdout_check();
    return 0;
}

static int cmd_iou(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    only(&o, "iou", "crowd");
    if (argc - optind != 2) cli_usage_error("iou: needs exactly two masks");
    sa1b_rle a = SA1B_RLE_INIT, b = SA1B_RLE_INIT;
    mask_arg(argv[optind], &a);
    mask_arg(argv[optind + 1], &b);
    double iou;
    sa1b_error err;
    if (sa1b_rle_iou(&a, &b, o.crowd, &iou, &err)) cli_die(EXIT_BADMASK, "%s", err.msg);
    print_double(stdout, iou);
    putchar('\n');
    sa1b_rle_free(&a);
    sa1b_rle_free(&b);
    cli_stdout_check();
    return 0;
}

static int cmd_merge(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    only(&o, "merge", "merge");
    if (o.merge_op < 0) cli_usage_error("merge: --union or --intersect is required");
    int n = argc - optind;
    if (n < 1) cli_usage_error("merge: needs at least one mask");
    sa1b_rle *m = calloc((size_t)n, sizeof *m);
    const sa1b_rle **in = calloc((size_t)n, sizeof *in);
    if (!m || !in) cli_die(CLI_EXIT_FATAL, "out of memory");
    for (int i = 0; i < n; i++) {
        mask_arg(argv[optind + i], &m[i]);
        in[i] = &m[i];
    }
    sa1b_rle out = SA1B_RLE_INIT;
    sa1b_error err;
    if (sa1b_rle_merge(&out, in, (size_t)n, o.merge_op, &err)) cli_die(EXIT_BADMASK, "%s", err.msg);
    print_mask_json(stdout, &out);
    for (int i = 0; i < n; i++) sa1b_rle_free(&m[i]);
    free(m);
    free(in);
    sa1b_rle_free(&out);
    cli_stdout_check();
    return 0;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    if (argc < 2) cli_usage_error("a command is required (info, decode, encode, iou, merge)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage(stdout);
        cli_stdout_check();
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        cli_version();
        return 0;
    }
    /* the subcommand sees argv[1..] with itself as argv[0] */
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "decode") == 0) return cmd_decode(argc - 1, argv + 1);
    if (strcmp(cmd, "encode") == 0) return cmd_encode(argc - 1, argv + 1);
    if (strcmp(cmd, "iou") == 0) return cmd_iou(argc - 1, argv + 1);
    if (strcmp(cmd, "merge") == 0) return cmd_merge(argc - 1, argv + 1);
    cli_usage_error("unknown command '%s'", esc(cmd));
}
