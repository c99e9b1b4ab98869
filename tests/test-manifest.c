/*
 * test-manifest.c - the manifest (sa1b_manifest.h) and the loader reading
 * one: a manifest listing the shards gives exactly the batches of the glob
 * that matches them (every row of every batch, two epochs, two ranks), its
 * order is kept, a shard unlike its row is refused, and hostile manifests
 * are refused with one line naming the row and key.
 */
#include "sa1b_manifest.h"
#include "tap.h"
#include "test-loader-util.h"

enum { MAXB = 200, BATCH = 4 };

typedef struct rec {
    uint32_t count;
    uint64_t epoch, step, h[BATCH];
} rec;

static rec A[MAXB], Bv[MAXB];

/* Runs the loader for two epochs; returns the number of batches, -1 on error. */
static int run(const char *glob, const char *const *paths, size_t n_paths, uint32_t rank, uint32_t world,
               rec *out)
{
    sa1b_loader_config c;
    memset(&c, 0, sizeof c);
    c.glob = glob;
    c.paths = paths;
    c.n_paths = n_paths;
    c.batch_size = BATCH;
    c.max_masks = 5;
    c.points = 2;
    c.seed = 77;
    c.max_epochs = 2;
    c.rank = rank;
    c.world = world;
    c.threads = 2;
    c.flip_prob = 0.5;
    sa1b_loader *L;
    sa1b_error e;
    if (sa1b_loader_open(&L, &c, &e)) {
        tap_diag("open: %s", e.msg);
        return -1;
    }
    int n = 0;
    sa1b_batch *b;
    while (n < MAXB && sa1b_loader_next(L, &b, &e) == SA1B_OK) {
        out[n].count = b->count;
        out[n].epoch = b->epoch;
        out[n].step = b->step;
        for (uint32_t r = 0; r < b->count; r++) out[n].h[r] = tl_row_hash(b, r);
        sa1b_loader_release(L, b);
        n++;
    }
    sa1b_loader_close(L);
    return n;
}

static int same(const rec *x, const rec *y, int n)
{
    for (int i = 0; i < n; i++) {
        if (x[i].count != y[i].count || x[i].epoch != y[i].epoch || x[i].step != y[i].step) return 0;
        for (uint32_t r = 0; r < x[i].count; r++)
            if (x[i].h[r] != y[i].h[r]) return 0;
    }
    return 1;
}

/* Writes a manifest of files (relative to dir) in the given order; images
 * of row `lie` (when < n) is off by one. */
static int write_manifest(const char *path, const char *dir, const char *const *files, int n, int lie)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    uint64_t ti = 0, tm = 0, tb = 0;
    fprintf(f, "{\"sa1b_manifest\": 1, \"shards\": [");
    for (int i = 0; i < n; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        sa1b_shard *s;
        sa1b_error e;
        uint64_t bytes;
        uint32_t crc;
        if (sa1b_shard_open(&s, p, &e) || sa1b_file_crc32c(p, &bytes, &crc, &e)) return -1;
        const sa1b_shard_info *in = sa1b_shard_get_info(s);
        uint64_t images = in->n_images + (i == lie);
        fprintf(f, "%s{\"file\": \"%s\", \"bytes\": %llu, \"crc32c\": \"%08x\", \"images\": %llu, \"masks\": %llu}",
                i ? ", " : "", files[i], (unsigned long long)bytes, crc, (unsigned long long)images,
                (unsigned long long)in->n_masks);
        ti += images;
        tm += in->n_masks;
        tb += bytes;
        sa1b_shard_close(s);
    }
    fprintf(f, "], \"images\": %llu, \"masks\": %llu, \"bytes\": %llu}\n", (unsigned long long)ti,
            (unsigned long long)tm, (unsigned long long)tb);
    return fclose(f);
}

static void test_loader(const char *dir)
{
    const char *files[] = {"a.shard", "b.shard", "c.shard"};
    char pat[300], man[300], paths[3][300];
    snprintf(pat, sizeof pat, "%s/*.shard", dir);
    snprintf(man, sizeof man, "%s/m.json", dir);
    tap_ok(write_manifest(man, dir, files, 3, 9) == 0, "write a manifest of the three shards (names relative to it)");
    for (uint32_t w = 1; w <= 2; w++)
        for (uint32_t r = 0; r < w; r++) {
            int n1 = run(pat, NULL, 0, r, w, A), n2 = run(man, NULL, 0, r, w, Bv);
            tap_ok(n1 > 0 && n1 == n2 && same(A, Bv, n1), "rank %u of %u: the manifest gives the glob's %d batches, "
                   "row for row", r, w, n1);
        }
    /* the manifest's order, not sorted */
    const char *order[] = {"c.shard", "a.shard", "b.shard"};
    const char *const op[] = {paths[0], paths[1], paths[2]};
    for (int i = 0; i < 3; i++) snprintf(paths[i], sizeof paths[i], "%s/%s", dir, order[i]);
    tap_ok(write_manifest(man, dir, order, 3, 9) == 0, "a manifest listing c, a, b");
    int n1 = run(NULL, op, 3, 0, 1, A), n2 = run(man, NULL, 0, 0, 1, Bv);
    tap_ok(n1 > 0 && n1 == n2 && same(A, Bv, n1), "gives the batches of the paths in that order");

    tap_ok(write_manifest(man, dir, files, 3, 1) == 0, "a manifest whose row 1 says one image more");
    sa1b_loader_config c;
    memset(&c, 0, sizeof c);
    c.glob = man;
    c.batch_size = c.max_masks = c.points = 1;
    sa1b_loader *L;
    sa1b_error e;
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EMISMATCH, "is refused (EMISMATCH)");
    tap_ok(strstr(e.msg, "b.shard': 7 images") && strstr(e.msg, "the manifest") && strstr(e.msg, "says 8"),
           "  message: %s", e.msg);
    snprintf(man, sizeof man, "%s/nothere.json", dir);
    c.glob = man;
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EIO, "a manifest that does not exist: EIO");
    tap_ok(strstr(e.msg, "nothere.json': cannot open") != NULL, "  message: %s", e.msg);
}

static void test_parse(void)
{
    const char *ok = "{\"sa1b_manifest\": 1, \"images\": 3, \"masks\": 5, \"bytes\": 30, \"extra\": [1],"
                     " \"shards\": [{\"file\": \"x.shard\", \"bytes\": 10, \"crc32c\": \"0123abcd\","
                     " \"images\": 1, \"masks\": 2, \"provenance\": {}},"
                     " {\"file\": \"/abs/y.shard\", \"bytes\": 20, \"crc32c\": \"ffffffff\", \"images\": 2, \"masks\": 3}]}";
    sa1b_manifest *m;
    sa1b_error e;
    int rc = sa1b_manifest_parse(&m, ok, strlen(ok), "d/e", &e);
    tap_is_int(rc, SA1B_OK, "a valid manifest parses");
    if (!rc) {
        tap_ok(m->n_shards == 2 && m->images == 3 && m->masks == 5 && m->bytes == 30, "  two rows, totals");
        tap_is_str(m->shards[0].path, "d/e/x.shard", "  a relative file joins the manifest's folder");
        tap_is_str(m->shards[1].path, "/abs/y.shard", "  an absolute one stays");
        tap_ok(m->shards[0].crc32c == 0x0123abcdu && m->shards[1].crc32c == 0xffffffffu, "  checksums");
    }
    sa1b_manifest_free(m);
    sa1b_manifest_free(NULL);
    tap_ok(sa1b_manifest_is_name("a/m.json") && !sa1b_manifest_is_name("a/*.shard") && !sa1b_manifest_is_name(".json"),
           "names ending in .json are manifests");

#define ROW(f, b, c, i, m) "{\"file\": " f ", \"bytes\": " b ", \"crc32c\": " c ", \"images\": " i ", \"masks\": " m "}"
#define DOC(rows, ti) "{\"sa1b_manifest\": 1, \"images\": " ti ", \"masks\": 2, \"bytes\": 10, \"shards\": [" rows "]}"
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "not JSON"},
        {"{\"sa1b_manifest\": 1,", "not JSON"},
        {"[1, 2]", "not a manifest"},
        {"{\"shards\": []}", "no \"sa1b_manifest\""},
        {"{\"sa1b_manifest\": 2, \"shards\": []}", "version is not 1"},
        {"{\"sa1b_manifest\": \"1\", \"shards\": []}", "version is not 1"},
        {"{\"sa1b_manifest\": 1, \"sa1b_manifest\": 1}", "not JSON"},
        {"{\"sa1b_manifest\": 1, \"shards\": []}", "\"shards\" lists no shard"},
        {"{\"sa1b_manifest\": 1, \"shards\": {}}", "\"shards\" is not a list"},
        {DOC("7", "1"), "shards[0] is not an object"},
        {DOC(ROW("\"\"", "10", "\"00000000\"", "1", "2"), "1"), "shards[0]: \"file\" is not a file name"},
        {DOC(ROW("3", "10", "\"00000000\"", "1", "2"), "1"), "shards[0]: \"file\" is not a file name"},
        {DOC(ROW("\"a\\u0000b\"", "10", "\"00000000\"", "1", "2"), "1"), "shards[0]: \"file\" holds a NUL"},
        {DOC(ROW("\"a\"", "-10", "\"00000000\"", "1", "2"), "1"), "shards[0]: \"bytes\" is not a count"},
        {DOC(ROW("\"a\"", "10.5", "\"00000000\"", "1", "2"), "1"), "shards[0]: \"bytes\" is not a count"},
        {DOC(ROW("\"a\"", "10", "\"00000000\"", "4294967296", "2"), "1"), "shards[0]: \"images\" 4294967296 is out of range"},
        {DOC(ROW("\"a\"", "10", "\"0000000\"", "1", "2"), "1"), "shards[0]: \"crc32c\" is not 8 hex digits"},
        {DOC(ROW("\"a\"", "10", "\"0000000G\"", "1", "2"), "1"), "shards[0]: \"crc32c\" is not 8 hex digits"},
        {DOC(ROW("\"a\"", "10", "\"ABCDEF01\"", "1", "2"), "1"), "shards[0]: \"crc32c\" is not 8 hex digits"},
        {DOC(ROW("\"a\"", "10", "null", "1", "2"), "1"), "shards[0]: \"crc32c\" is not 8 hex digits"},
        {DOC("{\"file\": \"a\", \"bytes\": 10, \"crc32c\": \"00000000\", \"images\": 1}", "1"), "shards[0]: no \"masks\""},
        {DOC(ROW("\"a\"", "10", "\"00000000\"", "1", "2"), "2"), "\"images\" is 2, but its shards hold 1"},
        {"{\"sa1b_manifest\": 1, \"images\": 2, \"masks\": 4, \"bytes\": 20, \"shards\": [" ROW("\"a\"", "10", "\"00000000\"", "1", "2")
         ", " ROW("\"a\"", "10", "\"00000000\"", "1", "2") "]}", "shards[0] and shards[1]: the same file 'a'"},
        /* two spellings of one path (before: both read, its images twice an epoch) */
        {"{\"sa1b_manifest\": 1, \"images\": 2, \"masks\": 4, \"bytes\": 20, \"shards\": [" ROW("\"a\"", "10", "\"00000000\"", "1", "2")
         ", " ROW("\"./a\"", "10", "\"00000000\"", "1", "2") "]}", "the same file"},
        {"{\"sa1b_manifest\": 1, \"images\": 2, \"masks\": 4, \"bytes\": 20, \"shards\": [" ROW("\"d//a\"", "10", "\"00000000\"", "1", "2")
         ", " ROW("\"d/./a\"", "10", "\"00000000\"", "1", "2") "]}", "the same file"},
        {DOC(ROW("\"a\"", "9223372036854775807", "\"00000000\"", "1", "2") ", " ROW("\"b\"", "1", "\"00000000\"", "1", "2"), "1"),
         "shards[1]: the totals overflow"},
        {"{\"sa1b_manifest\": 1, \"shards\": [" ROW("\"a\"", "10", "\"00000000\"", "1", "2") "]}", "manifest: no \"images\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = (sa1b_manifest *)1;
        rc = sa1b_manifest_parse(&m, bad[i].text, strlen(bad[i].text), "d", &e);
        tap_ok(rc != SA1B_OK && m == NULL && strstr(e.msg, bad[i].msg) && !strchr(e.msg, '\n'),
               "refused in one line: %s", e.msg);
    }
}

int main(void)
{
    const char *dir = tl_tmpdir();
    if (!dir) tap_skip_all("no temporary directory");
    char p[300];
    const uint64_t n[3] = {5, 7, 6};
    uint64_t g0 = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%c.shard", dir, 'a' + i);
        if (tl_write_shard(p, 32, 8, g0, n[i], 0)) tap_skip_all("cannot write the shards");
        g0 += n[i];
    }
    test_parse();
    test_loader(dir);
    tl_cleanup();
    return tap_done();
}
