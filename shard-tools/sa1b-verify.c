/*
 * sa1b-verify - checks shards completely: the structure (what the reader
 * validates at open), the layout (no overlaps, zero padding) and the
 * CRC32C of every image payload and mask block.  Each problem is reported
 * on stderr with its byte offset and record; one result line per file on
 * stdout.  Man page: sa1b-verify(1).
 */
#include "cli.h"
#include "sa1b_manifest.h"
#include "sa1b_shard.h"

#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An intact shard made from an input that ended early (its provenance says
 * "input_clean_end": false): images after the cut are missing. */
enum { EXIT_INCOMPLETE = 4 };

typedef struct options {
    int stats, quiet;
    unsigned jobs;        /* threads checking payloads */
    const char *manifest; /* --manifest FILE */
} options;

static void usage(void)
{
    printf("Usage: %s [OPTIONS] FILE...\n"
           "       %s [OPTIONS] --manifest MANIFEST [DIR|FILE]...\n"
           "Check sa1b shards: structure, layout and the CRC32C of every payload\n"
           "(and the runs of every mask of a version-2 shard).\n"
           "Problems go to stderr with their byte offset and record; one line per\n"
           "file to stdout (\"FILE: ok ...\" or \"FILE: damaged ...\").\n"
           "\n"
           "Options:\n"
           "  -j, --jobs N     check payloads with N threads (default: the number of\n"
           "                   processors, at most 8); the output does not depend on N\n"
           "  -m, --manifest MANIFEST\n"
           "                   check the files MANIFEST lists (sa1b-inspect --manifest):\n"
           "                   each is there, with the size and CRC32C listed, and\n"
           "                   intact; with DIRs (their *.shard files) or FILEs, also\n"
           "                   that they are exactly the files listed\n"
           "  -q, --quiet      no result lines on stdout (problems are still reported)\n"
           "  -s, --stats      report the throughput of every file on stderr (the\n"
           "                   default when stderr is a terminal)\n"
           "  -h, --help       show this help and exit\n"
           "  -V, --version    show the version and exit\n"
           "\n"
           "Exit status: 0 every file is intact, 1 a file is damaged or not a shard,\n"
           "2 usage error, 3 a file could not be read, 4 a file is intact but\n"
           "incomplete (made from an input that ended early).  With --manifest, a file\n"
           "missing, unlisted or unlike its row counts as damaged (1); a manifest that\n"
           "is not valid: 1.\n",
           cli_prog(), cli_prog());
}

/* One failed image: reported after all workers are done, in image order. */
typedef struct vfail {
    uint64_t index;
    sa1b_error err;
} vfail;

/* Payload checks spread over threads: images are handed out in chunks from
 * an atomic counter; each worker keeps its own list of failures. */
typedef struct vwork {
    const sa1b_shard *s;
    uint64_t n;
    _Atomic uint64_t next, done_bytes, done_images;
} vwork;

typedef struct vworker {
    vwork *w;
    vfail *fails;
    size_t n_fails, cap_fails;
    int oom;
    cli_progress *prog; /* main thread only */
    double t0;
} vworker;

enum { CHUNK = 8 };

static void *vrun(void *arg)
{
    vworker *k = arg;
    vwork *w = k->w;
    for (;;) {
        uint64_t first = atomic_fetch_add(&w->next, CHUNK);
        if (first >= w->n) break;
        uint64_t last = first + CHUNK < w->n ? first + CHUNK : w->n, bytes = 0;
        for (uint64_t i = first; i < last; i++) {
            sa1b_shard_image_view im;
            sa1b_error err;
            if (sa1b_shard_image(w->s, i, &im, &err) || sa1b_shard_verify_image(w->s, i, &err)) {
                if (k->n_fails == k->cap_fails) {
                    size_t nc = k->cap_fails ? 2 * k->cap_fails : 16;
                    vfail *nf = realloc(k->fails, nc * sizeof *nf);
                    if (!nf) {
                        k->oom = 1;
                        continue;
                    }
                    k->fails = nf;
                    k->cap_fails = nc;
                }
                k->fails[k->n_fails].index = i;
                k->fails[k->n_fails++].err = err;
                continue;
            }
            bytes += im.payload_len + im.masks_len;
        }
        atomic_fetch_add(&w->done_bytes, bytes);
        uint64_t done = atomic_fetch_add(&w->done_images, last - first) + (last - first);
        if (k->prog) {
            double dt = cli_now() - k->t0;
            cli_progress_update(k->prog, done, w->n, "%.2f GB/s",
                                dt > 0 ? (double)atomic_load(&w->done_bytes) / dt / 1e9 : 0.0);
        }
    }
    return NULL;
}

static int fail_cmp(const void *a, const void *b)
{
    const vfail *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int verify(const char *file, const options *o)
{
    double t0 = cli_now();
    sa1b_shard *s = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = sa1b_shard_open(&s, cli_shard_path(file), &err);
    if (rc) {
        cli_warn("'%s': %s", file, err.msg);
        if (rc == SA1B_EIO) return CLI_EXIT_FATAL;
        if (!o->quiet) printf("%s: damaged (%s)\n", file, sa1b_strerror(rc));
        return CLI_EXIT_PARTIAL;
    }
    const sa1b_shard_info info = *sa1b_shard_get_info(s); /* outlives the close below */
    const sa1b_shard_info *in = &info;
    char cut_after[300] = ""; /* set when the shard's input ended early: where */
    json_t *prov = json_loadb(in->provenance, in->provenance_len, 0, NULL);
    if (json_is_false(json_object_get(prov, "input_clean_end"))) {
        const char *a = json_string_value(json_object_get(prov, "input_ends_after"));
        char q[256]; /* (a sample's name, as the shard's provenance holds it: escaped) */
        if (a && *a) snprintf(cut_after, sizeof cut_after, "after sample %s", sa1b_escape(q, sizeof q, a, strlen(a)));
        else snprintf(cut_after, sizeof cut_after, "before its first sample");
    }
    json_decref(prov);
    uint64_t problems = 0;
    if (sa1b_shard_verify_layout(s, &err)) {
        cli_warn("'%s': %s", file, err.msg);
        problems++;
    }
    cli_progress prog;
    cli_progress_init(&prog, o->quiet);
    vwork w = {.s = s, .n = in->n_images};
    atomic_init(&w.next, 0);
    atomic_init(&w.done_bytes, 0);
    atomic_init(&w.done_images, 0);
    unsigned nt = o->jobs;
    if (nt > in->n_images / CHUNK + 1) nt = (unsigned)(in->n_images / CHUNK + 1);
    vworker *k = calloc(nt, sizeof *k);
    pthread_t *tid = calloc(nt, sizeof *tid);
    if (!k || !tid) cli_die(CLI_EXIT_FATAL, "out of memory");
    unsigned started = 1;
    for (unsigned t = 0; t < nt; t++) {
        k[t].w = &w;
        k[t].t0 = t0;
    }
    k[0].prog = &prog;
    for (unsigned t = 1; t < nt; t++, started++)
        if (pthread_create(&tid[t], NULL, vrun, &k[t]) != 0) break;
    vrun(&k[0]);
    for (unsigned t = 1; t < started; t++) pthread_join(tid[t], NULL);
    cli_progress_end(&prog);
    double dt = cli_now() - t0;
    /* failures in image order, whatever the thread count */
    size_t nf = 0;
    for (unsigned t = 0; t < started; t++) {
        nf += k[t].n_fails;
        if (k[t].oom) cli_die(CLI_EXIT_FATAL, "out of memory");
    }
    vfail *all = malloc((nf ? nf : 1) * sizeof *all);
    if (!all) cli_die(CLI_EXIT_FATAL, "out of memory");
    nf = 0;
    for (unsigned t = 0; t < started; t++) {
        if (k[t].n_fails) memcpy(all + nf, k[t].fails, k[t].n_fails * sizeof *all);
        nf += k[t].n_fails;
        free(k[t].fails);
    }
    qsort(all, nf, sizeof *all, fail_cmp);
    for (size_t f = 0; f < nf; f++) cli_warn("'%s': %s", file, all[f].err.msg);
    problems += nf;
    free(all);
    free(k);
    free(tid);
    sa1b_shard_close(s);
    if (!o->quiet) {
        if (problems)
            printf("%s: damaged (%llu problem%s)\n", file, (unsigned long long)problems,
                   problems == 1 ? "" : "s");
        else if (*cut_after)
            printf("%s: incomplete (%llu images, %llu masks; its input ended early, %s)\n", file,
                   (unsigned long long)in->n_images, (unsigned long long)in->n_masks, cut_after);
        else
            printf("%s: ok (%llu images, %llu masks, %llu bytes)\n", file,
                   (unsigned long long)in->n_images, (unsigned long long)in->n_masks,
                   (unsigned long long)in->file_size);
    }
    if (o->stats)
        cli_warn("'%s': %.3f GB checked in %.3f s: %.2f GB/s (%u thread%s)", file,
                 (double)in->file_size / 1e9, dt, dt > 0 ? (double)in->file_size / dt / 1e9 : 0.0,
                 started, started == 1 ? "" : "s");
    if (!problems && *cut_after)
        cli_warn("'%s': incomplete: made from an input that ended early, %s; the images after the cut are "
                 "missing (shard the complete input again)", file, cut_after);
    return problems ? CLI_EXIT_PARTIAL : *cut_after ? EXIT_INCOMPLETE : CLI_EXIT_OK;
}

/* Which status wins over several files: unreadable, damaged, incomplete, ok. */
static int status_rank(int st)
{
    return st == CLI_EXIT_FATAL ? 3 : st == CLI_EXIT_PARTIAL ? 2 : st == EXIT_INCOMPLETE ? 1 : 0;
}

/* ---- --manifest ------------------------------------------------------- */

typedef struct given {
    char *arg, *real; /* as named, and its place (real_place) */
    int listed;
} given;

/* The folder's realpath joined with the file's own name: the place a name
 * stands for, with the last link not followed, so that a symbolic link
 * beside a listed shard is not taken for it.  malloc'd; NULL (errno) when
 * the folder cannot be resolved. */
static char *real_place(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *rdir = dir ? realpath(dir, NULL) : NULL, *out = NULL;
    const char *base = slash ? slash + 1 : path;
    if (rdir && asprintf(&out, "%s/%s", strcmp(rdir, "/") ? rdir : "", base) < 0) out = NULL;
    free(dir);
    free(rdir);
    return out;
}

static int given_cmp(const void *a, const void *b)
{
    return strcmp(((const given *)a)->real, ((const given *)b)->real);
}

/* The files to compare with the manifest: each DIR's *.shard files and each
 * FILE, by real_place, sorted by it. */
static given *collect(char **args, int n, size_t *n_out)
{
    given *g = NULL;
    size_t ng = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        glob_t gl = {0};
        char **names = &args[i];
        size_t nn = 1;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            char pat[PATH_MAX];
            snprintf(pat, sizeof pat, "%s/*.shard", args[i]);
            int rc = glob(pat, 0, NULL, &gl);
            if (rc != 0 && rc != GLOB_NOMATCH) cli_die(CLI_EXIT_FATAL, "'%s': cannot list the folder", args[i]);
            names = gl.gl_pathv;
            nn = rc == GLOB_NOMATCH ? 0 : gl.gl_pathc;
        }
        for (size_t k = 0; k < nn; k++) {
            if (ng == cap && !(g = realloc(g, (cap = cap ? 2 * cap : 16) * sizeof *g)))
                cli_die(CLI_EXIT_FATAL, "out of memory");
            g[ng].arg = strdup(names[k]);
            g[ng].real = access(names[k], F_OK) == 0 ? real_place(names[k]) : NULL;
            g[ng].listed = 0;
            if (!g[ng].arg) cli_die(CLI_EXIT_FATAL, "out of memory");
            if (!g[ng].real) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", names[k], strerror(errno));
            ng++;
        }
        if (names != &args[i]) globfree(&gl);
    }
    if (ng) qsort(g, ng, sizeof *g, given_cmp);
    *n_out = ng;
    return g;
}

/* Whether path lies in one of the folders among args[0..n) (by real path):
 * a listed file there is given though the folder's *.shard left it out (a
 * name without .shard, a hidden one). */
static int in_given_folder(char **args, int n, const char *path)
{
    char *place = real_place(path), *slash = place ? strrchr(place, '/') : NULL;
    int in = 0;
    if (slash) *slash = 0;
    for (int i = 0; i < n && slash && !in; i++) {
        struct stat st;
        char *dir = stat(args[i], &st) == 0 && S_ISDIR(st.st_mode) ? realpath(args[i], NULL) : NULL;
        in = dir && strcmp(dir, *place ? place : "/") == 0;
        free(dir);
    }
    free(place);
    return in;
}

/* One listed file against its row: there, same size, CRC32C and counts. */
static int check_row(const sa1b_manifest_shard *r, const options *o)
{
    uint64_t bytes = 0;
    uint32_t crc = 0;
    sa1b_error err;
    if (sa1b_file_crc32c(r->path, &bytes, &crc, &err)) {
        cli_warn("'%s': listed in '%s' as '%s': %s", r->path, o->manifest, r->file, err.msg);
        if (!o->quiet) printf("%s: missing (listed in the manifest)\n", r->path);
        return CLI_EXIT_PARTIAL;
    }
    sa1b_shard *s = NULL;
    const sa1b_shard_info *in = NULL;
    if (bytes == r->bytes && crc == r->crc32c && sa1b_shard_open(&s, r->path, &err) == SA1B_OK)
        in = sa1b_shard_get_info(s);
    int same = !s || (in->n_images == r->images && in->n_masks == r->masks);
    sa1b_shard_close(s);
    if (bytes != r->bytes || crc != r->crc32c || !same) {
        cli_warn("'%s': %llu bytes, crc32c %08x%s, but '%s' lists %llu bytes, crc32c %08x, %llu images, %llu masks",
                 r->path, (unsigned long long)bytes, crc, same ? "" : " and other counts", o->manifest,
                 (unsigned long long)r->bytes, r->crc32c, (unsigned long long)r->images,
                 (unsigned long long)r->masks);
        if (!o->quiet) printf("%s: differs from the manifest\n", r->path);
        return CLI_EXIT_PARTIAL;
    }
    return verify(r->path, o);
}

/* A manifest row's file, as stat(2) knows it. */
typedef struct row_file {
    dev_t dev;
    ino_t ino;
    const char *file; /* the row's name */
} row_file;

static int row_file_cmp(const void *a, const void *b)
{
    const row_file *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int check_manifest(char **args, int n, const options *o)
{
    sa1b_manifest *m = NULL;
    sa1b_error err;
    int rc = sa1b_manifest_read(&m, o->manifest, &err);
    if (rc) {
        cli_warn("'%s': %s", o->manifest, err.msg);
        return rc == SA1B_EIO ? CLI_EXIT_FATAL : CLI_EXIT_PARTIAL;
    }
    size_t ng = 0;
    given *g = collect(args, n, &ng);
    int status = CLI_EXIT_OK;
    /* the rows' files (device, inode), to find two rows that are one file
     * (a path through another folder, a link): the loader refuses that */
    row_file *rows = calloc(m->n_shards ? m->n_shards : 1, sizeof *rows);
    if (!rows) cli_die(CLI_EXIT_FATAL, "out of memory");
    size_t nr = 0;
    for (size_t i = 0; i < m->n_shards; i++) {
        const sa1b_manifest_shard *r = &m->shards[i];
        struct stat fs;
        if (stat(r->path, &fs) == 0) rows[nr++] = (row_file){fs.st_dev, fs.st_ino, r->file};
        char *real = real_place(r->path);
        given key = {.real = real}, *hit = real && ng ? bsearch(&key, g, ng, sizeof *g, given_cmp) : NULL;
        free(real);
        /* a file named twice (a folder given twice) is one file: all listed */
        if (hit) {
            size_t lo = (size_t)(hit - g), hi = lo;
            while (lo > 0 && !given_cmp(&g[lo - 1], hit)) lo--;
            while (hi + 1 < ng && !given_cmp(&g[hi + 1], hit)) hi++;
            for (size_t k = lo; k <= hi; k++) g[k].listed = 1;
        }
        int st;
        if (n > 0 && !hit && !in_given_folder(args, n, r->path)) { /* files were given: the data set is those */
            cli_warn("'%s': listed in '%s' as '%s', but not among the files given", r->path, o->manifest, r->file);
            if (!o->quiet) printf("%s: missing (listed in the manifest)\n", r->path);
            st = CLI_EXIT_PARTIAL;
        } else {
            st = check_row(r, o);
        }
        if (status_rank(st) > status_rank(status)) status = st;
    }
    qsort(rows, nr, sizeof *rows, row_file_cmp);
    for (size_t i = 1; i < nr; i++)
        if (!row_file_cmp(&rows[i - 1], &rows[i])) {
            cli_warn("'%s': its rows '%s' and '%s' are one file: a shard is listed once", o->manifest,
                     rows[i - 1].file, rows[i].file);
            if (status_rank(CLI_EXIT_PARTIAL) > status_rank(status)) status = CLI_EXIT_PARTIAL;
        }
    free(rows);
    for (size_t k = 0; k < ng; k++) {
        if (!g[k].listed) {
            cli_warn("'%s': not in the manifest '%s'", g[k].arg, o->manifest);
            if (!o->quiet) printf("%s: not in the manifest\n", g[k].arg);
            if (status_rank(CLI_EXIT_PARTIAL) > status_rank(status)) status = CLI_EXIT_PARTIAL;
        }
        free(g[k].arg);
        free(g[k].real);
    }
    free(g);
    sa1b_manifest_free(m);
    return status;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    cli_catch_sigbus(); /* shards are read through a memory mapping */
    static const struct option longopts[] = {
        {"jobs", required_argument, NULL, 'j'}, {"quiet", no_argument, NULL, 'q'},
        {"stats", no_argument, NULL, 's'}, {"manifest", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},  {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    options o = {0, 0, 1, NULL};
    o.stats = isatty(STDERR_FILENO);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (unsigned)ncpu;
    uint64_t v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":j:qsm:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            if (cli_parse_u64(optarg, 1, 256, &v)) cli_usage_error("bad --jobs '%s' (1..256)", optarg);
            o.jobs = (unsigned)v;
            break;
        case ':': cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        case 'q': o.quiet = 1; break;
        case 'm': o.manifest = optarg; break;
        case 's': o.stats = 1; break;
        case 'h': usage(); cli_stdout_check(); return CLI_EXIT_OK;
        case 'V': cli_version(); return CLI_EXIT_OK;
        default:
            if (optopt) cli_usage_error("unknown option '-%c'", optopt);
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (o.manifest) {
        int st = check_manifest(argv + optind, argc - optind, &o);
        cli_stdout_check();
        return st;
    }
    if (optind >= argc) cli_usage_error("no shard file given");
    int status = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int r = verify(argv[i], &o);
        if (status_rank(r) > status_rank(status)) status = r;
    }
    cli_stdout_check();
    return status;
}
