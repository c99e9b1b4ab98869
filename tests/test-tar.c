/*
 * test-tar.c - the streaming SA-1B tar reader (pipeline/sa1b_tar.h).
 *
 * Every archive is built here with libarchive's writer (ustar, no padding
 * past the end blocks), then read back and the sequence of results (pairs,
 * problems, end) compared with the expected one: pairing in any order, a
 * "./" prefix and subdirectories, unpaired members, duplicates, truncation
 * at a block boundary and inside a member, garbage, empty input, a pipe,
 * "-" as stdin, gzip, the pending cap and oversized members.
 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sa1b_tar.h"
#include "tap.h"

typedef struct mem_file {
    const char *name;
    size_t len;     /* data is synthetic: byte i = (i * 7 + seed) & 255 */
    int type;       /* 0 regular, 1 directory, 2 symbolic link, 3 hard link */
    const char *to; /* the target of a link; a file's: the name whose data it holds (a copy) */
} mem_file;

static uint8_t byte_of(const char *name, size_t i)
{
    unsigned seed = 0;
    for (const char *p = name; *p; p++) seed = seed * 31 + (unsigned char)*p;
    return (uint8_t)((i * 7 + seed) & 255);
}

/* Builds a tar of files; filter: 0 none, 1 gzip.  Returns malloc'ed bytes. */
static uint8_t *build_tar(const mem_file *f, size_t n, int filter, size_t *out_len,
                          size_t *member_end /* [n] offset after each member's data, or NULL */)
{
    size_t cap = 1 << 16;
    for (size_t i = 0; i < n; i++) cap += f[i].len + 2048;
    uint8_t *buf = malloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format_ustar(a);
    if (filter == 1) archive_write_add_filter_gzip(a);
    archive_write_set_bytes_per_block(a, 512);
    archive_write_set_bytes_in_last_block(a, 1);
    size_t used = 0;
    archive_write_open_memory(a, buf, cap, &used);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, f[i].name);
        archive_entry_set_perm(e, 0644);
        if (f[i].type == 1) {
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_size(e, 0);
        } else if (f[i].type == 2) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, f[i].to);
            archive_entry_set_size(e, 0);
        } else if (f[i].type == 3) {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_hardlink(e, f[i].to);
            archive_entry_set_size(e, 0);
        } else {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_size(e, (la_int64_t)f[i].len);
        }
        archive_write_header(a, e);
        if (f[i].type == 0 && f[i].len) {
            uint8_t *d = malloc(f[i].len);
            for (size_t k = 0; k < f[i].len; k++) d[k] = byte_of(f[i].to ? f[i].to : f[i].name, k);
            archive_write_data(a, d, f[i].len);
            free(d);
        }
        archive_entry_free(e);
        if (member_end && filter == 0) {
            /* header + data padded to 512 */
            size_t prev = i ? member_end[i - 1] : 0;
            member_end[i] = prev + 512 + (f[i].len + 511) / 512 * 512;
        }
    }
    archive_write_close(a);
    archive_write_free(a);
    *out_len = used;
    return buf;
}

/* Reads everything, describing each result on one line of log. */
/* Builds a gzip tar of the n members of f and reads it to its end:
 * *pairs (those with a .jpg of jpg_len and a .json of json_len bytes; 0:
 * any length) and *errors (problems reported). */
static void gz_counts(const mem_file *f, size_t n, const char *name, size_t jpg_len, size_t json_len,
                      int *pairs, int *errors)
{
    size_t len;
    uint8_t *tar = build_tar(f, n, 1, &len, NULL);
    sa1b_tar *t;
    sa1b_error err;
    sa1b_tar_sample s;
    *pairs = *errors = 0;
    sa1b_tar_open_memory(&t, tar, len, name, &err);
    int rc;
    while ((rc = sa1b_tar_next(t, &s, &err)) != SA1B_EOF && !sa1b_tar_fatal(t)) {
        if (rc != SA1B_OK) (*errors)++;
        else if ((!jpg_len || s.jpg_len == jpg_len) && (!json_len || s.json_len == json_len)) (*pairs)++;
    }
    sa1b_tar_free(t);
    free(tar);
}

static void run_reader(sa1b_tar *t, char *log, size_t cap, int check_data)
{
    sa1b_tar_sample s;
    sa1b_error err;
    size_t used = 0;
    log[0] = '\0';
    for (int guard = 0; guard < 1000; guard++) {
        int rc = sa1b_tar_next(t, &s, &err);
        char line[400];
        if (rc == SA1B_OK) {
            int good = 1;
            if (check_data) {
                char jn[300], sn[300];
                snprintf(jn, sizeof jn, "%s.jpg", s.name);
                snprintf(sn, sizeof sn, "%s.json", s.name);
                /* names in the archive may carry a prefix: seed is over the full path,
                 * so only lengths are checked here when check_data == 2 */
                if (check_data == 1) {
                    for (size_t i = 0; i < s.jpg_len; i++) good &= s.jpg[i] == byte_of(jn, i);
                    for (size_t i = 0; i < s.json_len; i++) good &= s.json[i] == byte_of(sn, i);
                }
            }
            snprintf(line, sizeof line, "pair %s %zu %zu%s\n", s.name, s.jpg_len, s.json_len,
                     good ? "" : " BADDATA");
        } else if (rc == SA1B_EOF) {
            snprintf(line, sizeof line, "eof\n");
        } else {
            snprintf(line, sizeof line, "error %d%s %s\n", rc, sa1b_tar_fatal(t) ? " fatal" : "",
                     err.msg);
        }
        size_t l = strlen(line);
        if (used + l < cap) {
            memcpy(log + used, line, l + 1);
            used += l;
        }
        if (rc == SA1B_EOF || sa1b_tar_fatal(t)) break;
    }
}

static void check_mem(const uint8_t *buf, size_t len, const char *want, int check_data,
                      const char *what)
{
    sa1b_tar *t = NULL;
    sa1b_error err;
    char log[16384];
    int rc = sa1b_tar_open_memory(&t, buf, len, "mem", &err);
    if (rc != SA1B_OK) {
        tap_ok(0, "%s: open: %s", what, err.msg);
        return;
    }
    run_reader(t, log, sizeof log, check_data);
    tap_is_str(log, want, "%s", what);
    sa1b_tar_free(t);
}

#define KB 1024

/* A plain tar opened by path is mapped: 24 MiB of 1 MiB members with
 * sa_0.jpg's partner at the very end, so that sa_0.jpg waits in the pending
 * list while the pages behind the read position are dropped from the
 * mapping; every pair must still carry its exact bytes, pairs come out
 * stable (in the input), and the first pair's bytes are still right after
 * everything else was read (stable: valid until sa1b_tar_free). */
static void test_mapped(void)
{
    enum { N = 11, SZ = 1 << 20 };
    mem_file f[2 * N + 2];
    char names[2 * N + 2][32];
    size_t k = 0;
    snprintf(names[k], sizeof names[k], "sa_0.jpg");
    f[k] = (mem_file){names[k], SZ + 3, 0}, k++;
    for (int i = 1; i <= N; i++) {
        snprintf(names[k], sizeof names[k], "sa_%d.jpg", i);
        f[k] = (mem_file){names[k], SZ + (size_t)i, 0}, k++;
        snprintf(names[k], sizeof names[k], "sa_%d.json", i);
        f[k] = (mem_file){names[k], SZ - (size_t)i, 0}, k++;
    }
    snprintf(names[k], sizeof names[k], "sa_0.json");
    f[k] = (mem_file){names[k], 5, 0}, k++;
    size_t len;
    uint8_t *tar = build_tar(f, k, 0, &len, NULL);
    char path[] = "/tmp/test-tar-map-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, tar, len) != (ssize_t)len) {
        tap_skip(4, "cannot write a temporary tar");
        if (fd >= 0) close(fd), unlink(path);
        free(tar);
        return;
    }
    close(fd);
    sa1b_tar *t;
    sa1b_error err;
    int rc = sa1b_tar_open(&t, path, &err);
    tap_is_int(rc, SA1B_OK, "mapped: open a %zu-byte tar by path", len);
    int pairs = 0, bad = 0, unstable = 0;
    sa1b_tar_sample first = {{0}, NULL, 0, NULL, 0, 0};
    sa1b_tar_sample s;
    while (rc == SA1B_OK && (rc = sa1b_tar_next(t, &s, &err)) == SA1B_OK) {
        char jn[300], sn[300];
        snprintf(jn, sizeof jn, "%s.jpg", s.name);
        snprintf(sn, sizeof sn, "%s.json", s.name);
        for (size_t i = 0; i < s.jpg_len; i++) bad += s.jpg[i] != byte_of(jn, i);
        for (size_t i = 0; i < s.json_len; i++) bad += s.json[i] != byte_of(sn, i);
        unstable += !s.stable;
        if (pairs++ == 0) first = s;
    }
    tap_ok(rc == SA1B_EOF && pairs == N + 1 && bad == 0,
           "mapped: %d pairs with their exact bytes, also the one pending across 23 MiB (%d bad)",
           pairs, bad);
    tap_is_int(unstable, 0, "mapped: every pair lies in the input (stable)");
    int kept = first.jpg != NULL && first.jpg_len == SZ + 1;
    for (size_t i = 0; kept && i < first.jpg_len; i++) kept = first.jpg[i] == byte_of("sa_1.jpg", i);
    tap_ok(kept, "mapped: the first pair's bytes are still right at the end (valid until free)");
    sa1b_tar_free(t);
    unlink(path);
    free(tar);
}

/* Compresses len bytes with a libarchive filter (ARCHIVE_FILTER_*) through
 * its raw writer.  Returns malloc'ed bytes, or NULL. */
static uint8_t *compress_bytes(const uint8_t *in, size_t len, int filter, size_t *out_len)
{
    size_t cap = len + (1 << 16), used = 0;
    uint8_t *buf = malloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format_raw(a);
    if (archive_write_add_filter(a, filter) != ARCHIVE_OK) {
        archive_write_free(a);
        free(buf);
        return NULL;
    }
    archive_write_set_bytes_per_block(a, 512);
    archive_write_set_bytes_in_last_block(a, 1);
    archive_write_open_memory(a, buf, cap, &used);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "x");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_size(e, (la_int64_t)len);
    archive_write_header(a, e);
    archive_write_data(a, in, len);
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    *out_len = used;
    return buf;
}

/* Reads the len bytes at buf to the end; returns what sa1b_tar_next said
 * last (SA1B_EOF, or a fatal code) and the identity's clean_end and
 * no_member (-1 when it has none). */
static int read_end(const uint8_t *buf, size_t len, int *clean_end, int *no_member)
{
    sa1b_tar *t = NULL;
    sa1b_error err;
    sa1b_tar_sample s;
    *clean_end = *no_member = -1;
    if (sa1b_tar_open_memory(&t, buf, len, "end", &err) != SA1B_OK) return -100;
    int rc;
    for (int guard = 0; guard < 1000; guard++) {
        rc = sa1b_tar_next(t, &s, &err);
        if (rc == SA1B_EOF || sa1b_tar_fatal(t)) break;
    }
    sa1b_tar_identity id;
    if (sa1b_tar_get_identity(t, &id) == SA1B_OK) {
        *clean_end = id.clean_end;
        *no_member = id.no_member;
    }
    sa1b_tar_free(t);
    return rc;
}

/* The end of the archive, plain and compressed alike: where the tar (its
 * content) stops matters, not the compression. */
static void test_ends(void)
{
    mem_file f[] = {{"sa_1.jpg", 1000, 0}, {"sa_1.json", 600, 0}, {"sa_2.jpg", 1500, 0},
                    {"sa_2.json", 900, 0}};
    size_t len, ends[4];
    uint8_t *tar = build_tar(f, 4, 0, &len, ends);
    uint8_t zeros[10240] = {0};
    struct {
        const char *what;
        const uint8_t *buf;
        size_t len;
        int clean, no_member;
    } c[] = {
        {"complete", tar, len, 1, 0},
        {"one end-of-archive block of two", tar, len - 512, 1, 0},
        {"cut after a complete pair, no end block", tar, ends[1], 0, 0},
        {"cut inside a pair, no end block", tar, ends[2], 0, 0},
        {"10240 zero bytes (GNU tar's empty archive)", zeros, sizeof zeros, 0, 1},
        {"a single zero block", zeros, 512, 0, 1},
    };
    static const struct {
        int code;
        const char *name;
    } filters[] = {{ARCHIVE_FILTER_NONE, "plain"}, {ARCHIVE_FILTER_GZIP, "gzip"},
                   {ARCHIVE_FILTER_XZ, "xz"}, {ARCHIVE_FILTER_BZIP2, "bzip2"},
                   {ARCHIVE_FILTER_ZSTD, "zstd"}};
    for (size_t k = 0; k < sizeof filters / sizeof filters[0]; k++) {
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
            size_t zlen = c[i].len;
            uint8_t *z = filters[k].code == ARCHIVE_FILTER_NONE
                             ? NULL
                             : compress_bytes(c[i].buf, c[i].len, filters[k].code, &zlen);
            if (filters[k].code != ARCHIVE_FILTER_NONE && !z) {
                tap_skip(1, "libarchive cannot write this filter here");
                continue;
            }
            int clean, nm;
            int rc = read_end(z ? z : c[i].buf, zlen, &clean, &nm);
            tap_ok(rc == SA1B_EOF && clean == c[i].clean && nm == c[i].no_member,
                   "%s, %s: clean_end %d, no_member %d (got rc %d, %d, %d)", filters[k].name,
                   c[i].what, c[i].clean, c[i].no_member, rc, clean, nm);
            free(z);
        }
    }
    /* a gzip stream cut short: the trailer missing (the tar whole), or more */
    size_t zlen;
    uint8_t *z = compress_bytes(tar, len, ARCHIVE_FILTER_GZIP, &zlen);
    for (size_t cut = 1; z && cut <= 40; cut += 13) {
        int clean, nm;
        int rc = read_end(z, zlen - cut, &clean, &nm);
        tap_ok(rc == SA1B_EOF && clean == 0,
               "gzip stream less its last %zu bytes: not a clean end (got rc %d, clean_end %d)", cut, rc,
               clean);
    }
    free(z);
    free(tar);
}

int main(void)
{
    tap_plan(0);
    size_t len, ends[16];
    uint8_t *tar;

    {
        mem_file f[] = {{"sa_1.jpg", 3000, 0}, {"sa_1.json", 700, 0}, {"sa_2.jpg", 0, 0},
                        {"sa_2.json", 1, 0}};
        tar = build_tar(f, 4, 0, &len, NULL);
        check_mem(tar, len, "pair sa_1 3000 700\npair sa_2 0 1\neof\n", 1, "pairs in order");
        sa1b_tar *t;
        sa1b_tar_sample s;
        sa1b_error err;
        sa1b_tar_open_memory(&t, tar, len, "x", &err);
        while (sa1b_tar_next(t, &s, &err) == SA1B_OK) {}
        tap_is_int(sa1b_tar_bytes_read(t), len, "bytes_read counts the whole input");
        tap_is_str(sa1b_tar_name(t), "x", "display name kept");
        tap_is_int(sa1b_tar_next(t, &s, &err), SA1B_EOF, "EOF again after EOF");
        sa1b_tar_free(t);
        free(tar);
    }
    {
        mem_file f[] = {{"sa_1.json", 10, 0}, {"sa_1.jpg", 20, 0}, {"sa_2.jpg", 30, 0},
                        {"sa_3.jpg", 40, 0}, {"sa_3.json", 50, 0}, {"sa_2.json", 60, 0}};
        tar = build_tar(f, 6, 0, &len, NULL);
        check_mem(tar, len, "pair sa_1 20 10\npair sa_3 40 50\npair sa_2 30 60\neof\n", 1,
                  "reversed and interleaved order");
        free(tar);
    }
    {
        mem_file f[] = {{"./", 0, 1},           {"./sa_7.jpg", 11, 0},
                        {"./README.txt", 5, 0}, {"./sub/", 0, 1},
                        {"sub/dir/sa_7.json", 12, 0}, {"./sa_8.png", 3, 0},
                        {"./sa_9.jpeg", 3, 0},  {"./notsa_9.jpg", 3, 0},
                        {"./sa_9.jpg", 13, 0},  {"./sa_9.json", 14, 0}};
        tar = build_tar(f, 10, 0, &len, NULL);
        check_mem(tar, len, "pair sa_7 11 12\npair sa_9 13 14\neof\n", 2,
                  "./ prefix, subdirectories, other members skipped");
        free(tar);
    }
    {
        mem_file f[] = {{"sa_1.jpg", 10, 0}, {"sa_2.jpg", 10, 0}, {"sa_2.json", 10, 0}};
        tar = build_tar(f, 3, 0, &len, NULL);
        check_mem(tar, len, "pair sa_2 10 10\nerror 4 sa_1.jpg: no matching sa_1.json\neof\n", 1,
                  "unpaired jpg reported at the end");
        free(tar);
    }
    {
        mem_file f[] = {{"sa_1.jpg", 10, 0}, {"sa_1.json", 10, 0}, {"sa_5.json", 10, 0},
                        {"sa_6.json", 10, 0}};
        tar = build_tar(f, 4, 0, &len, NULL);
        check_mem(tar, len,
                  "pair sa_1 10 10\nerror 4 sa_5.json: no matching sa_5.jpg\n"
                  "error 4 sa_6.json: no matching sa_6.jpg\neof\n",
                  1, "unpaired json members, one report each, oldest first");
        free(tar);
    }
    {
        mem_file f[] = {{"sa_1.jpg", 10, 0}, {"sa_1.jpg", 11, 0}, {"sa_1.json", 12, 0}};
        tar = build_tar(f, 3, 0, &len, NULL);
        check_mem(tar, len,
                  "error 4 sa_1.jpg: duplicate member, earlier copy dropped\npair sa_1 11 12\neof\n",
                  0, "duplicate member: the later copy is paired");
        free(tar);
    }
    {
        /* a pair that comes again (tars concatenated, or appended to; two
         * folders of the same images): reported, the first copy kept */
        mem_file f[] = {{"sa_1.jpg", 10, 0},  {"sa_1.json", 12, 0}, {"sa_2.jpg", 10, 0},
                        {"sa_2.json", 10, 0}, {"b/sa_1.json", 12, 0, "sa_1.json"},
                        {"b/sa_1.jpg", 10, 0, "sa_1.jpg"},
                        {"sa_3.jpg", 10, 0},  {"sa_3.json", 10, 0}};
        tar = build_tar(f, 8, 0, &len, NULL);
        for (int filter = 0; filter < 2; filter++) { /* in the input, and copies out of a gzip stream */
            uint8_t *in = filter ? build_tar(f, 8, 1, &len, NULL) : tar;
            check_mem(in, len,
                      "pair sa_1 10 12\npair sa_2 10 10\n"
                      "error 4 sa_1: duplicate sample (sa_1.jpg and sa_1.json came before): this copy skipped\n"
                      "pair sa_3 10 10\neof\n",
                      0, filter ? "a pair read before: reported and skipped, the first copy kept (gzip)"
                                : "a pair read before: reported and skipped, the first copy kept");
            if (filter) free(in);
        }
        free(tar);
    }
    {
        /* a pair of that stem with other bytes (two datasets numbered
         * alike: tars concatenated, two folders of one tar) is no copy:
         * it comes, as a pair of the same bytes under it does not */
        mem_file f[] = {{"a/sa_1.jpg", 10, 0}, {"a/sa_1.json", 12, 0}, {"b/sa_1.jpg", 10, 0},
                        {"b/sa_1.json", 12, 0}, {"c/sa_1.json", 12, 0, "b/sa_1.json"},
                        {"c/sa_1.jpg", 10, 0, "b/sa_1.jpg"}, {"d/sa_1.jpg", 11, 0, "a/sa_1.jpg"},
                        {"d/sa_1.json", 12, 0, "a/sa_1.json"}};
        for (int filter = 0; filter < 2; filter++) {
            tar = build_tar(f, 8, filter, &len, NULL);
            check_mem(tar, len,
                      "pair sa_1 10 12\npair sa_1 10 12\n"
                      "error 4 sa_1: duplicate sample (sa_1.jpg and sa_1.json came before): this copy skipped\n"
                      "pair sa_1 11 12\neof\n",
                      0, filter ? "a pair of a stem seen before with other bytes: it comes (gzip)"
                                : "a pair of a stem seen before with other bytes: it comes");
            free(tar);
        }
    }
    {
        /* links named like members (a tar of a folder of symbolic links, a
         * hard-linked copy): no data, one report per sample, at the end,
         * never silent */
        mem_file f[] = {{"sa_1.jpg", 10, 0},
                        {"sa_1.json", 12, 0},
                        {"sa_2.jpg", 0, 2, "../blobs/a2"},
                        {"sa_2.json", 0, 2, "../blobs/b2"},
                        {"sa_3.json", 0, 3, "sa_1.json"},
                        {"sa_3.jpg", 10, 0},
                        {"sa_4.jpg", 10, 0},
                        {"sa_4.json", 0, 3, "sa_1.json"},
                        {"sa_5.jpg", 0, 2, "sa_1.jpg"},
                        {"sa_6.jpg", 10, 0},
                        {"sa_6.json", 10, 0},
                        {"link.jpg", 0, 2, "sa_1.jpg"}};
        tar = build_tar(f, 12, 0, &len, NULL);
        check_mem(tar, len,
                  "pair sa_1 10 12\n"
                  "pair sa_6 10 10\n"
                  "error 4 sa_2.jpg: a symbolic link to '../blobs/a2', not a file: sample skipped\n"
                  "error 4 sa_3.json: a hard link to 'sa_1.json', not a file: sample skipped\n"
                  "error 4 sa_4.json: a hard link to 'sa_1.json', not a file: sample skipped\n"
                  "error 4 sa_5.jpg: a symbolic link to 'sa_1.jpg', not a file: sample skipped\n"
                  "eof\n",
                  1, "links named like members: reported once per sample");
        free(tar);
    }
    {
        /* a folder of links beside the files themselves, before or after
         * them: nothing is lost, nothing is said */
        mem_file f[] = {{"links/sa_1.jpg", 0, 2, "../all/sa_1.jpg"},
                        {"links/sa_1.json", 0, 2, "../all/sa_1.json"},
                        {"links/sa_2.json", 0, 3, "all/sa_2.json"},
                        {"all/sa_1.jpg", 10, 0},
                        {"all/sa_1.json", 12, 0},
                        {"all/sa_2.json", 13, 0},
                        {"all/sa_2.jpg", 11, 0},
                        {"again/sa_2.jpg", 0, 2, "../all/sa_2.jpg"},
                        {"again/sa_1.json", 0, 3, "all/sa_1.json"}};
        tar = build_tar(f, 9, 0, &len, NULL);
        check_mem(tar, len, "pair sa_1 10 12\npair sa_2 11 13\neof\n", 0,
                  "links beside the files they stand for: skipped silently");
        free(tar);
    }
    {
        mem_file f[] = {{"sa_1.jpg", 1000, 0}, {"sa_1.json", 600, 0}, {"sa_2.jpg", 1500, 0},
                        {"sa_2.json", 900, 0}};
        tar = build_tar(f, 4, 0, &len, ends);
        tap_ok(ends[3] + 1024 == len, "tar layout as expected (%zu)", len);
        /* cut at the block boundary right after sa_2.jpg: libarchive sees a clean end */
        check_mem(tar, ends[2], "pair sa_1 1000 600\nerror 4 sa_2.jpg: no matching sa_2.json\neof\n",
                  1, "cut at a 512-byte boundary inside a pair");
        /* cut at the block boundary after sa_1 pair: complete, just no end blocks */
        check_mem(tar, ends[1], "pair sa_1 1000 600\neof\n", 1, "cut after a complete pair");
        /* cut inside sa_2.json's data: one truncation report, partner dropped */
        check_mem(tar, ends[2] + 512 + 300,
                  "pair sa_1 1000 600\nerror 7 sa_2.json: member truncated\neof\n", 1,
                  "cut inside a member");
        /* cut inside sa_2.json's header */
        check_mem(tar, ends[2] + 100,
                  "pair sa_1 1000 600\nerror 7 tar truncated inside a header\n"
                  "error 4 sa_2.jpg: no matching sa_2.json\neof\n",
                  1, "cut inside a header");
        /* cut inside the first member */
        check_mem(tar, 700, "error 7 sa_1.jpg: member truncated\neof\n", 1,
                  "cut inside the first member");

        /* a damaged header (bad checksum) in the middle */
        uint8_t *bad = malloc(len);
        memcpy(bad, tar, len);
        bad[ends[1] + 10] ^= 0x55;   /* inside sa_2.jpg's name: checksum fails */
        sa1b_tar *t;
        sa1b_error err;
        char log[4096];
        sa1b_tar_open_memory(&t, bad, len, "bad", &err);
        run_reader(t, log, sizeof log, 0);
        tap_ok(strncmp(log, "pair sa_1 1000 600\nerror 4 damaged tar header", 45) == 0 &&
                   strstr(log, "eof\n") != NULL,
               "damaged header reported, reading goes on");
        sa1b_tar_free(t);
        free(bad);

        /* the same through a pipe (fd) and through stdin ("-") */
        int p[2];
        if (pipe(p) == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                close(p[0]);
                size_t off = 0;
                while (off < len) {
                    ssize_t w = write(p[1], tar + off, len - off > 777 ? 777 : len - off);
                    if (w <= 0) _exit(1);
                    off += (size_t)w;
                }
                _exit(0);
            }
            close(p[1]);
            int rc = sa1b_tar_open_fd(&t, p[0], "pipe", &err);
            tap_is_int(rc, SA1B_OK, "open a pipe fd");
            run_reader(t, log, sizeof log, 1);
            tap_is_str(log, "pair sa_1 1000 600\npair sa_2 1500 900\neof\n", "read from a pipe");
            sa1b_tar_free(t);
            close(p[0]);
            waitpid(pid, NULL, 0);
        }
        char path[] = "/tmp/test-tar-XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0 && write(fd, tar, len) == (ssize_t)len) {
            int rc = sa1b_tar_open(&t, path, &err);
            tap_is_int(rc, SA1B_OK, "open a path");
            run_reader(t, log, sizeof log, 1);
            tap_is_str(log, "pair sa_1 1000 600\npair sa_2 1500 900\neof\n", "read from a path");
            tap_is_str(sa1b_tar_name(t), path, "name is the path");
            sa1b_tar_free(t);
            int saved = dup(0);
            lseek(fd, 0, SEEK_SET);
            dup2(fd, 0);
            rc = sa1b_tar_open(&t, "-", &err);
            tap_is_int(rc, SA1B_OK, "open -");
            run_reader(t, log, sizeof log, 1);
            tap_is_str(log, "pair sa_1 1000 600\npair sa_2 1500 900\neof\n", "read from stdin");
            tap_is_str(sa1b_tar_name(t), "-", "name of stdin is -");
            sa1b_tar_free(t);
            dup2(saved, 0);
            close(saved);
        }
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        tap_is_int(sa1b_tar_open(&t, "/nonexistent/x.tar", &err), SA1B_EIO, "missing file: EIO");
        tap_ok(t == NULL && strstr(err.msg, "cannot open: No such file") != NULL,
               "missing file message: %s", err.msg);
        free(tar);
    }
    {
        mem_file f[] = {{"sa_3.json", 5000, 0}, {"sa_3.jpg", 4000, 0}};
        tar = build_tar(f, 2, 1, &len, NULL);
        tap_ok(len > 2 && tar[0] == 0x1f && tar[1] == 0x8b, "gzip tar built");
        check_mem(tar, len, "pair sa_3 4000 5000\neof\n", 1, "gzip-compressed tar");
        free(tar);
    }
    {
        uint8_t garbage[3000];
        for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)(i * 131 + 7);
        check_mem(garbage, sizeof garbage, "error 4 fatal not a tar archive\n", 0, "garbage");
        check_mem((const uint8_t *)"hello", 5, "error 4 fatal not a tar archive\n", 0,
                  "short garbage");
        check_mem(garbage, 0, "error 4 fatal empty input: not a tar archive\n", 0, "empty input");
        sa1b_tar *t;
        sa1b_tar_sample s;
        sa1b_error err;
        sa1b_tar_open_memory(&t, garbage, sizeof garbage, "g", &err);
        sa1b_tar_next(t, &s, &err);
        tap_is_int(sa1b_tar_next(t, &s, &err), SA1B_EFORMAT, "fatal error repeats");
        sa1b_tar_free(t);
        uint8_t zeros[1024] = {0};
        check_mem(zeros, sizeof zeros, "eof\n", 0, "an empty tar (end blocks only) is fine");
    }
    {
        /* pending cap: 65 jpgs without partners, copied out of a gzip
         * stream (members that lie in the input are not copies: below) */
        mem_file f[66];
        char names[66][32];
        for (int i = 0; i < 65; i++) {
            snprintf(names[i], sizeof names[i], "sa_%d.jpg", i);
            f[i] = (mem_file){names[i], 10, 0};
        }
        tar = build_tar(f, 65, 1, &len, NULL);
        sa1b_tar *t;
        sa1b_error err;
        char log[16384];
        sa1b_tar_open_memory(&t, tar, len, "cap", &err);
        run_reader(t, log, sizeof log, 0);
        tap_ok(strncmp(log, "error 4 sa_0.jpg: no matching sa_0.json (pending limit reached)\n"
                            "error 4 sa_1.jpg: no matching sa_1.json\n", 104) == 0,
               "65th pending member evicts the oldest");
        int lines = 0;
        for (const char *p = log; *p; p++) lines += *p == '\n';
        tap_is_int(lines, 66, "every member reported once, then eof");
        sa1b_tar_free(t);
        free(tar);
    }
    {
        /* A member dropped at the pending cap is one skipped sample: its
         * partner, coming later, waits as any member, pairs with any member
         * of its stem that comes (two datasets numbered alike, a copy: no
         * sample is lost), and goes without a second report only if it
         * goes unpaired too (gzip: every member a copy). */
        static const struct {
            const char *what;
            const char *tail[4];   /* after "<prefix>sa_0.jpg" and 64 unpaired fillers */
            size_t len[4];
            const char *want;      /* the pair expected, or NULL */
            int lines;             /* all lines, eof included */
        } cases[] = {
            {"its .json later, nothing else", {"sa_0.json"}, {12}, NULL, 1 + 64 + 1},
            {"another dataset's sa_0.json then sa_0.jpg", {"B/sa_0.json", "B/sa_0.jpg"}, {20, 21},
             "pair sa_0 21 20\n", 1 + 1 + 64 + 1},
            {"its .json, then a copy of the .jpg", {"sa_0.json", "again/sa_0.jpg"}, {20, 10},
             "pair sa_0 10 20\n", 1 + 1 + 64 + 1},
            {"its .json twice", {"sa_0.json", "again/sa_0.json"}, {20, 21}, NULL, 1 + 1 + 64 + 1},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            mem_file f[70];
            char names[70][32];
            int n = 0;
            f[n++] = (mem_file){"A/sa_0.jpg", 10, 0};
            for (int i = 0; i < 64; i++) {
                snprintf(names[n], sizeof names[n], "A/sa_f%d.jpg", i);
                f[n] = (mem_file){names[n], 5, 0}, n++;
            }
            for (int k = 0; k < 4 && cases[c].tail[k]; k++) f[n++] = (mem_file){cases[c].tail[k], cases[c].len[k], 0};
            tar = build_tar(f, (size_t)n, 1, &len, NULL);
            sa1b_tar *t;
            sa1b_error err;
            char log[16384];
            sa1b_tar_open_memory(&t, tar, len, "late", &err);
            run_reader(t, log, sizeof log, 0);
            int lines = 0, sa0 = 0;
            for (const char *p = log; *p; p++) lines += *p == '\n';
            for (const char *p = log; (p = strstr(p, "sa_0.")) != NULL; p++) sa0++;
            const char *first = "error 4 sa_0.jpg: no matching sa_0.json (pending limit reached)\n";
            tap_ok(strncmp(log, first, strlen(first)) == 0 &&
                       (cases[c].want ? strstr(log, cases[c].want) != NULL
                                      : sa0 >= 2 && strstr(log, "no matching sa_0.jpg") == NULL),
                   "dropped at the cap, then %s: %s", cases[c].what,
                   cases[c].want ? "the pair is returned" : "no second 'no matching' line for the sample");
            tap_is_int(lines, cases[c].lines, "dropped at the cap, then %s: every line", cases[c].what);
            sa1b_tar_free(t);
            free(tar);
        }
    }
    {
        /* two datasets in one stream: A json-first (its sa_5.jpg missing),
         * then B in SA-1B's order: B's samples all come, sa_5 included
         * (A's sa_5.json went at the cap) */
        mem_file f[230];
        char names[230][32];
        int n = 0;
        for (int i = 0; i < 100; i++) {
            snprintf(names[n], sizeof names[n], "A/ann/sa_%d.json", i);
            f[n] = (mem_file){names[n], 7, 0}, n++;
        }
        for (int i = 0; i < 100; i++)
            if (i != 5) {
                snprintf(names[n], sizeof names[n], "A/img/sa_%d.jpg", i);
                f[n] = (mem_file){names[n], 8, 0}, n++;
            }
        for (int i = 0; i < 10; i++) {
            snprintf(names[n], sizeof names[n], "B/sa_%d.jpg", i);
            f[n] = (mem_file){names[n], 30, 0}, n++;
            snprintf(names[n], sizeof names[n], "B/sa_%d.json", i);
            f[n] = (mem_file){names[n], 31, 0}, n++;
        }
        int b_pairs, errors;
        gz_counts(f, (size_t)n, "two", 30, 31, &b_pairs, &errors);
        tap_is_int(b_pairs, 10, "two datasets in one stream: the second's 10 samples all come");
        tap_is_int(errors, 100, "two datasets in one stream: one line for each of the first's 100 samples (all lost at the cap)");
    }
    {
        /* many: every .json 65 members after its .jpg (one eviction per
         * sample; the set of evicted stems grows, and fills with removed
         * entries, again and again): each sample reported once */
        enum { NS = 5000 };
        static mem_file f[2 * NS + 65];
        static char names[2 * NS + 65][32];
        int n = 0;
        for (int i = 0; i < NS + 65; i++) {
            snprintf(names[n], sizeof names[n], "sa_%d.jpg", i);
            f[n] = (mem_file){names[n], 1, 0}, n++;
            if (i >= 65 && i - 65 < NS) {
                snprintf(names[n], sizeof names[n], "sa_%d.json", i - 65);
                f[n] = (mem_file){names[n], 1, 0}, n++;
            }
        }
        int pairs, errors;
        gz_counts(f, (size_t)n, "window", 0, 0, &pairs, &errors);
        tap_ok(pairs == 0 && errors == NS + 65, "%d samples, each .json 65 members late: %d lines (want %d), %d pairs",
               NS, errors, NS + 65, pairs);
    }
    {
        /* every .jpg first, then every .json (a tar re-packed by type): the
         * members lie in the input, so more than SA1B_TAR_MAX_PENDING of
         * them wait for their partners, and every pair comes, in the order
         * of its second member */
        enum { N = 3 * SA1B_TAR_MAX_PENDING };
        mem_file f[2 * N];
        char names[2 * N][32];
        for (int i = 0; i < 2 * N; i++) {
            snprintf(names[i], sizeof names[i], "sa_%d.%s", i < N ? i : 2 * N - 1 - i, i < N ? "jpg" : "json");
            f[i] = (mem_file){names[i], 10 + (size_t)(i % 7), 0};
        }
        tar = build_tar(f, 2 * N, 0, &len, NULL);
        sa1b_tar *t;
        sa1b_tar_sample s;
        sa1b_error err;
        sa1b_tar_open_memory(&t, tar, len, "bytype", &err);
        int pairs = 0, in_order = 1, rc;
        while ((rc = sa1b_tar_next(t, &s, &err)) == SA1B_OK) {
            char want[32];
            snprintf(want, sizeof want, "sa_%d", N - 1 - pairs);
            in_order &= strcmp(s.name, want) == 0 && s.stable;
            pairs++;
        }
        tap_is_int(rc, SA1B_EOF, "all .jpg before all .json: no problem reported (%s)", rc == SA1B_EOF ? "" : err.msg);
        tap_is_int(pairs, N, "all .jpg before all .json: every pair comes");
        tap_ok(in_order, "all .jpg before all .json: in the order of the .json members, not copied");
        sa1b_tar_free(t);
        free(tar);
    }
    {
        /* the same with 32768 pairs, the .json in reverse order: finding a
         * partner among the waiting members scanned them all (and so did
         * every member's look for an earlier copy of itself), 9 s of CPU
         * here for 32768 pairs, minutes at the 65536 the reader lets wait;
         * indexed, it is linear (about 0.1 s, 0.5 s under ASan; printed,
         * never asserted) */
        enum { N = 32768 };
        mem_file *f = malloc(2 * N * sizeof *f);
        char(*names)[32] = malloc(2 * N * sizeof *names);
        if (!f || !names) {
            tap_ok(0, "32768 pairs by type: out of memory");
            return tap_done();
        }
        for (int i = 0; i < 2 * N; i++) {
            snprintf(names[i], sizeof names[i], "sa_%d.%s", i < N ? i : 2 * N - 1 - i, i < N ? "jpg" : "json");
            f[i] = (mem_file){names[i], 10, 0};
        }
        tar = build_tar(f, 2 * N, 0, &len, NULL);
        sa1b_tar *t;
        sa1b_tar_sample s;
        sa1b_error err;
        sa1b_tar_open_memory(&t, tar, len, "bytype", &err);
        clock_t c0 = clock();
        int pairs = 0, rc;
        while ((rc = sa1b_tar_next(t, &s, &err)) == SA1B_OK) pairs++;
        double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
        tap_is_int(rc, SA1B_EOF, "32768 pairs by type: no problem reported (%s)", rc == SA1B_EOF ? "" : err.msg);
        tap_is_int(pairs, N, "32768 pairs by type: every pair comes");
        tap_diag("32768 pairs by type: %.2f s of CPU (a figure, not a check: speed is for benchmarks)", cpu);
        sa1b_tar_free(t);
        free(tar);
        free(names);
        free(f);
    }
    {
        /* a header claiming 600 MiB: reported without reading (or allocating) it */
        mem_file f[] = {{"sa_1.jpg", 10, 0}, {"sa_1.json", 10, 0}};
        tar = build_tar(f, 2, 0, &len, NULL);
        snprintf((char *)tar + 124, 12, "%011o", 600u << 20);   /* size field */
        memset(tar + 148, ' ', 8);
        unsigned sum = 0;
        for (int i = 0; i < 512; i++) sum += tar[i];
        snprintf((char *)tar + 148, 8, "%06o", sum);
        tar[155] = ' ';
        sa1b_tar *t;
        sa1b_tar_sample s;
        sa1b_error err;
        sa1b_tar_open_memory(&t, tar, len, "big", &err);
        int rc = sa1b_tar_next(t, &s, &err);
        tap_is_int(rc, SA1B_ERANGE, "oversized member: ERANGE");
        tap_is_str(err.msg, "sa_1.jpg: member too large (629145600 bytes)", "oversized message");
        tap_ok(!sa1b_tar_fatal(t), "oversized member is not fatal");
        sa1b_tar_free(t);
        free(tar);
    }
    sa1b_tar_free(NULL);
    tap_ok(1, "sa1b_tar_free(NULL) is a no-op");
    test_mapped();
    test_ends();
    return tap_done();
}
