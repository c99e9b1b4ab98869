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
        case ':': cli_usage_error("%s: option '%s' needs an argument", argv[0], argv[optind - 1]);
        default:
            if (optopt) cli_usage_error("%s: unknown option '-%c'", argv[0], optopt);
            cli_usage_error("%s: unknown option '%s'", argv[0], argv[optind - 1]);
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

/* Sets r from a JSON value {"size":[h,w],"counts":STR or [runs]}; 0 or an
 * sa1b code with err filled. */
static int mask_from_json(json_t *seg, sa1b_rle *r, sa1b_error *err)
{
    json_t *size = json_object_get(seg, "size"), *counts = json_object_get(seg, "counts");
    if (!json_is_object(seg) || !size || !counts)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "no \"size\" and \"counts\"");
    json_int_t h = json_integer_value(json_array_get(size, 0));
    json_int_t w = json_integer_value(json_array_get(size, 1));
    if (!json_is_array(size) || json_array_size(size) != 2 ||
        !json_is_integer(json_array_get(size, 0)) || !json_is_integer(json_array_get(size, 1)) ||
        h < 0 || w < 0 || h > UINT32_MAX || w > UINT32_MAX)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "\"size\" is not [h, w]");
    if (json_is_string(counts))
        return sa1b_rle_from_string(r, (uint32_t)h, (uint32_t)w, json_string_value(counts),
                                    json_string_length(counts), err);
    if (!json_is_array(counts))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "\"counts\" is neither a string nor a list");
    /* uncompressed COCO RLE: a list of run lengths */
    size_t n = json_array_size(counts);
    uint32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(counts, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > UINT32_MAX) {
            free(c);
            return sa1b_error_set(err, SA1B_ERANGE, (int64_t)i, "run %zu is not in 0..2^32-1", i);
        }
        c[i] = (uint32_t)json_integer_value(v);
    }
    int rc = sa1b_rle_set_runs(r, (uint32_t)h, (uint32_t)w, c, n, err);
    free(c);
    return rc;
}

/* A mask argument: JSON object or HxW:COUNTS.  Exits 1 when malformed. */
static void mask_arg(const char *arg, sa1b_rle *r)
{
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    const char *p = arg;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (*p == '{') {
        json_error_t je;
        json_t *v = json_loads(p, 0, &je);
        if (!v) cli_die(EXIT_BADMASK, "'%s': invalid JSON: %s", arg, je.text);
        json_t *seg = json_object_get(v, "segmentation");
        rc = mask_from_json(seg ? seg : v, r, &err);
        json_decref(v);
    } else {
        const char *colon = strchr(arg, ':');
        char dims[64];
        uint32_t h, w;
        size_t n = colon ? (size_t)(colon - arg) : 0;
        if (!colon || n >= sizeof dims)
            cli_usage_error("'%s': a mask is {\"size\":[h,w],\"counts\":...} or HxW:COUNTS", arg);
        memcpy(dims, arg, n);
        dims[n] = '\0';
        if (cli_parse_dims(dims, UINT32_MAX, &h, &w))
            cli_usage_error("'%s': bad size '%s' (want HxW)", arg, dims);
        rc = sa1b_rle_from_string(r, h, w, colon + 1, strlen(colon + 1), &err);
    }
    if (rc) cli_die(EXIT_BADMASK, "'%s': %s", arg, err.msg);
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
    sa1b_rle r;
} info_ctx;

static void info_bbox(FILE *f, const double b[4])
{
    fprintf(f, "[%.0f,%.0f,%.0f,%.0f]", b[0], b[1], b[2], b[3]);
}

/* Line number (1-based) of byte offset off in buf. */
static size_t line_of(const char *buf, size_t off, size_t from, size_t from_line)
{
    size_t line = from_line;
    for (size_t i = from; i < off; i++) line += buf[i] == '\n';
    return line;
}

/* Byte offsets of the "counts" keys in buf[a, b) (string-aware scan),
 * so that errors in a pretty-printed file can name the mask's line. */
static size_t counts_keys(const char *buf, size_t a, size_t b, size_t **out)
{
    size_t n = 0, cap = 0;
    *out = NULL;
    for (size_t i = a; i < b; i++) {
        if (buf[i] != '"') continue;
        size_t s = i++;
        while (i < b && buf[i] != '"') i += buf[i] == '\\' ? 2 : 1;
        if (i >= b) break;
        size_t j = i + 1;
        while (j < b && (buf[j] == ' ' || buf[j] == '\t' || buf[j] == '\n' || buf[j] == '\r')) j++;
        if (i - s == 7 && memcmp(buf + s, "\"counts", 7) == 0 && j < b && buf[j] == ':') {
            if (n == cap) {
                size_t *nb = realloc(*out, (cap = cap ? 2 * cap : 64) * sizeof **out);
                if (!nb) break;
                *out = nb;
            }
            (*out)[n++] = s;
        }
    }
    return n;
}

static void info_mask(info_ctx *c, json_t *holder, json_t *seg, const char *name, size_t line)
{
    size_t k = c->masks++;
    sa1b_error err;
    sa1b_error_clear(&err);
    if (mask_from_json(seg, &c->r, &err)) {
        cli_warn("%s:%zu: mask %zu: %s", name, line, k, err.msg);
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

static void info_value(info_ctx *c, json_t *v, const char *name, const char *buf, size_t a,
                       size_t b, size_t line)
{
    json_t *anns = json_object_get(v, "annotations");
    if (json_is_array(anns)) {
        size_t *keys;
        size_t nk = counts_keys(buf, a, b, &keys);
        size_t i, kl = a, ll = line;
        json_t *ann;
        json_array_foreach(anns, i, ann) {
            size_t l = line;
            if (nk == json_array_size(anns)) {
                ll = line_of(buf, keys[i], kl, ll);
                kl = keys[i];
                l = ll;
            }
            json_t *seg = json_object_get(ann, "segmentation");
            info_mask(c, ann, seg ? seg : ann, name, l);
        }
        free(keys);
        return;
    }
    json_t *ann = json_object_get(v, "annotation");
    if (json_is_object(ann)) v = ann;
    json_t *seg = json_object_get(v, "segmentation");
    info_mask(c, v, seg ? seg : v, name, line);
}

static void info_input(info_ctx *c, const char *path)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "(stdin)" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        cli_warn("cannot open '%s': %s", path, strerror(errno));
        c->bad++;
        return;
    }
    char *buf;
    size_t len;
    if (read_all(f, &buf, &len)) {
        cli_warn("cannot read '%s': %s", path, strerror(errno));
        c->bad++;
        if (!is_stdin) fclose(f);
        return;
    }
    if (!is_stdin) fclose(f);
    c->masks = 0;
    size_t pos = 0, line = 1, lpos = 0;
    while (pos < len) {
        char ch = buf[pos];
        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') {
            pos++;
            continue;
        }
        line = line_of(buf, pos, lpos, line);
        lpos = pos;
        json_error_t je;
        json_t *v = json_loadb(buf + pos, len - pos, JSON_DISABLE_EOF_CHECK, &je);
        if (!v || !json_is_object(v)) {
            if (v)
                cli_warn("%s:%zu: not a JSON object", name, line);
            else
                cli_warn("%s:%zu: invalid JSON: %s", name,
                         line + (je.line > 0 ? (size_t)je.line - 1 : 0), je.text);
            c->bad++;
            json_decref(v);
            /* resynchronise at the next line */
            const char *nl = memchr(buf + pos, '\n', len - pos);
            pos = nl ? (size_t)(nl - buf) + 1 : len;
            continue;
        }
        size_t used = je.position > 0 ? (size_t)je.position : len - pos;
        if (used > len - pos) used = len - pos;
        info_value(c, v, name, buf, pos, pos + used, line);
        json_decref(v);
        pos += used;
    }
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
    if (optind < argc) cli_usage_error("decode: unexpected argument '%s'", argv[optind]);
    if (!o.size || !o.counts) cli_usage_error("decode: --size and --counts are required");
    uint32_t h, w, rh = 0, rw = 0;
    if (cli_parse_dims(o.size, UINT32_MAX, &h, &w))
        cli_usage_error("decode: bad --size '%s' (want HxW)", o.size);
    int area = 0;
    if (o.mode) {
        if (strcmp(o.mode, "area") == 0) area = 1;
        else if (strcmp(o.mode, "nearest") != 0)
            cli_usage_error("decode: bad --mode '%s' (nearest or area)", o.mode);
        if (!o.resize) cli_usage_error("decode: --mode needs --resize");
    }
    if (o.coverage && !area) cli_usage_error("decode: --coverage needs --mode area");
    if (o.resize && cli_parse_dims(o.resize, UINT32_MAX, &rh, &rw))
        cli_usage_error("decode: bad --resize '%s' (want RHxRW)", o.resize);
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

/* Reads a binary PGM (P5, maxval <= 255) from buf. */
static int parse_pgm(const uint8_t *buf, size_t len, uint32_t *h, uint32_t *w,
                     const uint8_t **pix, const char **why)
{
    size_t p = 0;
    uint64_t v[3];
    if (len < 2 || buf[0] != 'P' || buf[1] != '5') {
        *why = "not a binary PGM (P5)";
        return -1;
    }
    p = 2;
    for (int k = 0; k < 3; k++) {
        for (;;) {
            while (p < len && (buf[p] == ' ' || buf[p] == '\t' || buf[p] == '\n' || buf[p] == '\r'))
                p++;
            if (p < len && buf[p] == '#') {
                while (p < len && buf[p] != '\n') p++;
                continue;
            }
            break;
        }
        if (p >= len || buf[p] < '0' || buf[p] > '9') {
            *why = "bad PGM header";
            return -1;
        }
        v[k] = 0;
        while (p < len && buf[p] >= '0' && buf[p] <= '9') {
            v[k] = v[k] * 10 + (uint64_t)(buf[p++] - '0');
            if (v[k] > UINT32_MAX) {
                *why = "PGM size out of range";
                return -1;
            }
        }
    }
    if (p >= len || !(buf[p] == ' ' || buf[p] == '\n' || buf[p] == '\t' || buf[p] == '\r')) {
        *why = "bad PGM header";
        return -1;
    }
    p++;
    if (v[2] == 0 || v[2] > 255) {
        *why = "PGM maxval must be 1..255";
        return -1;
    }
    if (v[0] * v[1] != len - p) {
        *why = v[0] * v[1] > len - p ? "PGM pixel data is short" : "PGM has trailing data";
        return -1;
    }
    *w = (uint32_t)v[0];
    *h = (uint32_t)v[1];
    *pix = buf + p;
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
        cli_usage_error("encode: bad --size '%s' (want HxW)", o.size);
    if (!o.size && o.format == FMT_RAW) cli_usage_error("encode: raw input needs --size");
    const char *path = optind < argc ? argv[optind] : "-";
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", path, strerror(errno));
    const char *name = is_stdin ? "(stdin)" : path;
    const uint8_t *pix = NULL;
    uint8_t *own = NULL;
    uint32_t ih = 0, iw = 0;
    if (o.format == FMT_PNG) {
        pngio_image img;
        char msg[256];
        if (pngio_read(f, &img, 1, SA1B_RLE_MAX_PIXELS, msg, sizeof msg))
            cli_die(EXIT_BADMASK, "'%s': %s", name, msg);
        own = img.pix;
        pix = own;
        ih = img.h;
        iw = img.w;
    } else {
        char *buf;
        size_t len;
        if (read_all(f, &buf, &len)) cli_die(CLI_EXIT_FATAL, "cannot read '%s'", name);
        own = (uint8_t *)buf;
        if (o.format == FMT_PGM) {
            const char *why;
            if (parse_pgm(own, len, &ih, &iw, &pix, &why))
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
    cli_usage_error("unknown command '%s'", cmd);
}
