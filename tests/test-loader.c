/*
 * test-loader.c - order properties of the loader: exactly-once coverage per
 * epoch for several (B, world, threads) with uneven shards and a short last
 * batch, independence from threads and depth, resume at several points,
 * rank slices that are disjoint and make up the global batch, drop_last,
 * glob expansion, the end of the stream and configuration errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sa1b_loader.h"
#include "tap.h"
#include "test-loader-util.h"

#define S_ 32
#define R_ 8
#define NSH 3
static const uint64_t shard_n[NSH] = {7, 11, 5}; /* N = 23 */
#define N_ 23
static char paths[NSH][300];
static const char *pathv[NSH];

typedef struct rec {
    uint64_t epoch, step, position, next_position;
    uint32_t count;
    int64_t ids[64];
    uint64_t hash[64];
} rec;

/* Runs a loader to the end; returns the number of batches recorded. */
static int run(const sa1b_loader_config *cfg, rec *out, int max)
{
    sa1b_loader *L;
    sa1b_error e;
    if (sa1b_loader_open(&L, cfg, &e)) {
        tap_diag("open: %s", e.msg);
        return -1;
    }
    int n = 0;
    for (;;) {
        sa1b_batch *b;
        int rc = sa1b_loader_next(L, &b, &e);
        if (rc == SA1B_EOF) break;
        if (rc || n >= max) {
            tap_diag("next: %d %s", rc, e.msg);
            n = -1;
            break;
        }
        rec *r = &out[n++];
        r->epoch = b->epoch;
        r->step = b->step;
        r->position = b->position;
        r->next_position = b->next_position;
        r->count = b->count;
        for (uint32_t i = 0; i < b->B && i < 64; i++) {
            r->ids[i] = b->image_ids[i];
            r->hash[i] = tl_row_hash(b, i);
        }
        sa1b_loader_release(L, b);
    }
    sa1b_loader_close(L);
    return n;
}

static sa1b_loader_config base(uint32_t B, uint32_t threads)
{
    sa1b_loader_config c;
    sa1b_loader_config_init(&c);
    c.paths = pathv;
    c.n_paths = NSH;
    c.batch_size = B;
    c.max_masks = 4;
    c.points = 3;
    c.seed = 42;
    c.epoch = 0;
    c.max_epochs = 2;
    c.threads = threads;
    c.flip_prob = 0.5;
    return c;
}

static int same_recs(const rec *a, const rec *b, int n, uint32_t B)
{
    for (int i = 0; i < n; i++) {
        if (a[i].epoch != b[i].epoch || a[i].step != b[i].step || a[i].count != b[i].count ||
            a[i].position != b[i].position)
            return 0;
        for (uint32_t j = 0; j < B; j++)
            if (a[i].ids[j] != b[i].ids[j] || a[i].hash[j] != b[i].hash[j]) return 0;
    }
    return 1;
}

static rec A[200], Bv[200], Cv[200];

static void test_coverage(void)
{
    static const uint32_t combos[][3] = {{3, 1, 1}, {4, 2, 2}, {5, 3, 3}, {2, 4, 1}, {7, 2, 3}};
    for (size_t ci = 0; ci < sizeof combos / sizeof combos[0]; ci++) {
        uint32_t B = combos[ci][0], W = combos[ci][1], T = combos[ci][2];
        int seen[2][N_];
        memset(seen, 0, sizeof seen);
        int nb0 = -1, ok_rows = 1, ok_n = 1, ok_short = 1;
        uint64_t G = (uint64_t)B * W;
        for (uint32_t r = 0; r < W; r++) {
            sa1b_loader_config c = base(B, T);
            c.rank = r;
            c.world = W;
            int nb = run(&c, A, 200);
            if (nb < 0) { ok_n = 0; break; }
            if (nb0 < 0) nb0 = nb;
            if (nb != nb0) ok_n = 0;
            for (int i = 0; i < nb; i++) {
                uint64_t g = A[i].next_position - A[i].position;
                uint64_t lo = r * g / W, hi = (r + 1) * g / W;
                if (A[i].count != hi - lo) ok_short = 0;
                if (g != G && A[i].next_position != N_) ok_short = 0;
                for (uint32_t j = 0; j < B; j++) {
                    int64_t id = A[i].ids[j];
                    if (j < A[i].count) {
                        if (id < 1000 || id >= 1000 + N_ || A[i].epoch > 1) { ok_rows = 0; continue; }
                        seen[A[i].epoch][id - 1000]++;
                    } else if (id != -1) {
                        ok_rows = 0;
                    }
                }
            }
        }
        int once = 1;
        for (int e = 0; e < 2; e++)
            for (int i = 0; i < N_; i++)
                if (seen[e][i] != 1) once = 0;
        tap_ok(once && ok_rows, "B=%u world=%u threads=%u: every image exactly once per epoch", B, W, T);
        tap_ok(ok_n, "B=%u world=%u: every rank gets the same number of batches (%d)", B, W, nb0);
        tap_ok(ok_short, "B=%u world=%u: short last global batch split in balanced slices", B, W);
        tap_is_int(nb0, 2 * ((N_ + G - 1) / G), "B=%u world=%u: batches for 2 epochs", B, W);
    }
}

static void test_threads(void)
{
    sa1b_loader_config c = base(4, 1);
    c.depth = 1;
    int n1 = run(&c, A, 200);
    c.threads = 3;
    c.depth = 5;
    int n3 = run(&c, Bv, 200);
    c.threads = 2;
    c.depth = 2;
    int n2 = run(&c, Cv, 200);
    tap_ok(n1 > 0 && n1 == n3 && n1 == n2, "same number of batches for 1, 2, 3 threads");
    tap_ok(n1 > 0 && same_recs(A, Bv, n1, 4) && same_recs(A, Cv, n1, 4),
           "identical stream (ids, pixels, masks, points, flips) for 1, 2, 3 threads and depths 1, 2, 5");
    /* another seed gives another order; another epoch too */
    c.seed = 43;
    int n4 = run(&c, Cv, 200);
    int differ = n4 == n1 && !same_recs(A, Cv, n1, 4);
    tap_ok(differ, "another seed gives another stream");
    tap_ok(n1 > 6 && A[0].epoch == 0 && A[6].epoch == 1 && memcmp(A[0].ids, A[6].ids, sizeof A[0].ids) != 0,
           "epoch 1 is another permutation than epoch 0");
}

static void test_resume(void)
{
    sa1b_loader_config c = base(3, 2);
    c.max_epochs = 3;
    c.epoch = 5;
    int n = run(&c, A, 200);
    tap_ok(n == 3 * 8, "uninterrupted: 8 batches per epoch over 3 epochs (%d)", n);
    static const int cuts[] = {0, 1, 4, 7, 8, 13, 22};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        int i = cuts[k];
        if (i >= n) continue;
        sa1b_loader_config r = c;
        r.epoch = A[i].epoch;
        r.consumed = A[i].next_position; /* N_ after an epoch's last batch: the next epoch follows */
        r.max_epochs = c.epoch + c.max_epochs - r.epoch;
        r.threads = 1 + (uint32_t)(k % 3);
        int m = run(&r, Bv, 200);
        tap_ok(m == n - i - 1 && same_recs(A + i + 1, Bv, m, 3),
               "resume after batch %d (epoch %llu, consumed %llu) reproduces the remaining %d batches",
               i, (unsigned long long)r.epoch, (unsigned long long)r.consumed, n - i - 1);
    }
}

static void test_ranks(void)
{
    /* the w=1 loader with batch B*w is the global batch; rank slices in rank
     * order must be exactly it, row by row */
    const uint32_t B = 3, W = 3;
    sa1b_loader_config g = base(B * W, 2);
    int ng = run(&g, A, 200);
    int ok = ng > 0;
    static rec rk[3][200];
    int nr[3];
    for (uint32_t r = 0; r < W && ok; r++) {
        sa1b_loader_config c = base(B, 1 + r);
        c.rank = r;
        c.world = W;
        nr[r] = run(&c, rk[r], 200);
        if (nr[r] != ng) ok = 0;
    }
    int disjoint = 1;
    for (int i = 0; ok && i < ng; i++) {
        uint32_t at = 0;
        for (uint32_t r = 0; r < W; r++) {
            if (rk[r][i].step != A[i].step || rk[r][i].epoch != A[i].epoch) ok = 0;
            for (uint32_t j = 0; j < rk[r][i].count; j++, at++)
                if (at >= A[i].count || rk[r][i].ids[j] != A[i].ids[at] || rk[r][i].hash[j] != A[i].hash[at])
                    ok = 0;
        }
        if (at != A[i].count) ok = 0;
        for (uint32_t a = 0; a < A[i].count; a++)
            for (uint32_t b = a + 1; b < A[i].count; b++)
                if (A[i].ids[a] == A[i].ids[b]) disjoint = 0;
    }
    tap_ok(ok, "rank slices concatenated in rank order equal the global batch, samples identical");
    tap_ok(disjoint, "rank slices are disjoint");
}

static void test_drop_last(void)
{
    sa1b_loader_config c = base(5, 2);
    c.drop_last = 1;
    int n = run(&c, A, 200);
    int ok = n == 2 * 4;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (A[i].count != 5) ok = 0;
        if (A[i].epoch == 0) seen += (int)A[i].count;
    }
    tap_ok(ok && seen == 20, "drop_last: only full batches, 4 per epoch (%d batches)", n);
    c.drop_last = 0;
    n = run(&c, A, 200);
    tap_ok(n == 10 && A[4].count == 3 && A[4].ids[3] == -1 && A[4].ids[4] == -1,
           "without drop_last the short batch has 3 samples and rows 3, 4 are padding");
}

static void test_glob_eof_errors(const char *dir)
{
    char pat[300];
    snprintf(pat, sizeof pat, "%s/*.shard", dir);
    sa1b_loader_config c = base(4, 1);
    int n1 = run(&c, A, 200);
    c.paths = NULL;
    c.n_paths = 0;
    c.glob = pat;
    int n2 = run(&c, Bv, 200);
    tap_ok(n1 > 0 && n1 == n2 && same_recs(A, Bv, n1, 4), "a glob gives the sorted list of shards");

    sa1b_loader *L;
    sa1b_error e;
    snprintf(pat, sizeof pat, "%s/*.nothing", dir);
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EINVAL, "a glob matching nothing is EINVAL");
    tap_ok(L == NULL && strstr(e.msg, "no shard") != NULL, "  message: %s", e.msg);

    c = base(4, 1);
    c.rank = 2;
    c.world = 2;
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EINVAL, "rank >= world is EINVAL");
    c = base(0, 1);
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EINVAL, "batch size 0 is EINVAL");
    c = base(4, 1);
    c.flip_prob = 1.5;
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EINVAL, "flip probability 1.5 is EINVAL");
    c = base(4, 1);
    c.consumed = N_ + 1;
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_ERANGE, "consumed = N + 1 is ERANGE");
    c = base(30, 1);
    c.drop_last = 1;
    tap_is_int(sa1b_loader_open(&L, &c, &e), SA1B_EINVAL, "drop_last with N < B*world is EINVAL");
    const char *bad[] = {paths[0], "/nonexistent/x.shard"};
    c = base(4, 1);
    c.paths = bad;
    c.n_paths = 2;
    tap_ok(sa1b_loader_open(&L, &c, &e) != SA1B_OK && L == NULL && strstr(e.msg, "/nonexistent/x.shard"),
           "a missing shard fails the open and is named: %s", e.msg);

    /* end of the stream is sticky; max_epochs 1 from the middle of an epoch */
    c = base(4, 2);
    c.max_epochs = 1;
    c.consumed = 12;
    if (sa1b_loader_open(&L, &c, &e) == SA1B_OK) {
        sa1b_batch *b;
        int n = 0, rc;
        uint64_t first_pos = UINT64_MAX;
        while ((rc = sa1b_loader_next(L, &b, &e)) == SA1B_OK) {
            if (first_pos == UINT64_MAX) first_pos = b->position;
            n++;
            sa1b_loader_release(L, b);
        }
        tap_ok(rc == SA1B_EOF && n == 3 && first_pos == 12, "resume mid-epoch at 12 of 23: 3 batches then EOF");
        tap_is_int(sa1b_loader_next(L, &b, &e), SA1B_EOF, "EOF again");
        sa1b_loader_close(L);
    } else {
        tap_ok(0, "open: %s", e.msg);
        tap_ok(0, "EOF again");
    }
}

int main(void)
{
    const char *dir = tl_tmpdir();
    if (!dir) tap_skip_all("no temporary directory");
    uint64_t g = 0;
    for (int i = 0; i < NSH; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/part-%d.shard", dir, i);
        pathv[i] = paths[i];
        if (tl_write_shard(paths[i], S_, R_, g, shard_n[i], 0)) {
            tl_cleanup();
            tap_skip_all("cannot write shards (writer not available)");
        }
        g += shard_n[i];
    }
    test_coverage();
    test_threads();
    test_resume();
    test_ranks();
    test_drop_last();
    test_glob_eof_errors(dir);
    tl_cleanup();
    return tap_done();
}
