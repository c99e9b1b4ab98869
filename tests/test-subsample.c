/* test-subsample.c - filters and strategies against their definitions
 * (man/sa1b-shard.1, SUBSAMPLING), not against recorded outputs. */
#include <math.h>

#include "sa1b_subsample.h"
#include "tap.h"

static uint64_t lcg(uint64_t *s) { return (*s = *s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; }

static void random_cands(sa1b_cand *c, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        c[i].area = 1 + lcg(&s) % 200000;
        c[i].bbox[0] = (double)(lcg(&s) % 1500);
        c[i].bbox[1] = (double)(lcg(&s) % 1000);
        c[i].bbox[2] = 1 + (double)(lcg(&s) % 500);
        c[i].bbox[3] = 1 + (double)(lcg(&s) % 500);
        c[i].predicted_iou = (double)(lcg(&s) % 50) / 40.0;  /* many ties, some > 1 */
        c[i].stability_score = (double)(lcg(&s) % 1000) / 1000.0;
    }
}

static int ascending(const size_t *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i] <= v[i - 1]) return 0;
    return 1;
}

static const sa1b_cand *qc;
static int by_quality(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (qc[x].predicted_iou != qc[y].predicted_iou) return qc[x].predicted_iou > qc[y].predicted_iou ? -1 : 1;
    if (qc[x].stability_score != qc[y].stability_score) return qc[x].stability_score > qc[y].stability_score ? -1 : 1;
    return x < y ? -1 : 1;
}
static int by_index(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    enum { N = 120 };
    sa1b_cand c[N];
    size_t out[N], n_out, ref[N];
    sa1b_error err;
    random_cands(c, N, 7);

    /* filter: exactly the masks passing all three thresholds, in order */
    sa1b_filter f = {5000, 0.5, 0.3};
    sa1b_subsample(c, N, &f, SA1B_STRATEGY_QUALITY, 0, 1, 42, 1500, 1000, out, &n_out, &err);
    size_t nref = 0;
    for (size_t i = 0; i < N; i++)
        if (c[i].area >= 5000 && c[i].predicted_iou >= 0.5 && c[i].stability_score >= 0.3) ref[nref++] = i;
    int same = n_out == nref;
    for (size_t i = 0; same && i < n_out; i++) same = out[i] == ref[i];
    tap_ok(same, "filter keeps exactly the masks passing min area/iou/stability (%zu of %d)", n_out, N);

    /* quality: the top k of the (iou desc, stability desc, index asc) order */
    for (size_t k = 1; k <= 64; k *= 4) {
        sa1b_subsample(c, N, NULL, SA1B_STRATEGY_QUALITY, k, 1, 42, 1500, 1000, out, &n_out, &err);
        for (size_t i = 0; i < N; i++) ref[i] = i;
        qc = c;
        qsort(ref, N, sizeof *ref, by_quality);
        qsort(ref, k, sizeof *ref, by_index);
        same = n_out == k && ascending(out, n_out);
        for (size_t i = 0; same && i < k; i++) same = out[i] == ref[i];
        tap_ok(same, "quality k=%zu: top k by predicted_iou then stability_score", k);
    }

    /* random: k distinct survivors; same seed same set; uniform over seeds */
    sa1b_subsample(c, N, NULL, SA1B_STRATEGY_RANDOM, 16, 9, 42, 1500, 1000, out, &n_out, &err);
    size_t again[N], n_again;
    sa1b_subsample(c, N, NULL, SA1B_STRATEGY_RANDOM, 16, 9, 42, 1500, 1000, again, &n_again, &err);
    tap_ok(n_out == 16 && ascending(out, 16) && memcmp(out, again, sizeof(size_t) * 16) == 0,
           "random: 16 distinct indices, deterministic for (seed, image)");
    sa1b_subsample(c, N, NULL, SA1B_STRATEGY_RANDOM, 16, 9, 43, 1500, 1000, again, &n_again, &err);
    tap_ok(memcmp(out, again, sizeof(size_t) * 16) != 0, "random: another image id draws another set");
    {
        static unsigned hits[N];
        enum { TRIALS = 3000 };
        for (int t = 0; t < TRIALS; t++) {
            sa1b_subsample(c, N, NULL, SA1B_STRATEGY_RANDOM, 30, (uint64_t)t, 5, 1500, 1000, out, &n_out, &err);
            for (size_t i = 0; i < n_out; i++) hits[out[i]]++;
        }
        double expect = TRIALS * 30.0 / N, chi2 = 0;
        for (int i = 0; i < N; i++) chi2 += (hits[i] - expect) * (hits[i] - expect) / expect;
        /* 119 degrees of freedom: mean 119, sd ~15.4; 200 is > 5 sd */
        tap_ok(chi2 < 200, "random: uniform over masks (chi2 %.1f, 119 dof)", chi2);
    }

    /* size-balanced: each log-area bin gets min(quota, bin size) at least */
    {
        size_t k = 40, quota = k / SA1B_SIZE_BINS;
        sa1b_cand sb[N];
        random_cands(sb, N, 11);
        for (size_t i = 0; i < N; i++) sb[i].area = i < 90 ? 100 + i : 100000 + 1000 * i; /* skewed */
        sa1b_subsample(sb, N, NULL, SA1B_STRATEGY_SIZE_BALANCED, k, 3, 1, 1500, 1000, out, &n_out, &err);
        double lo = log(100.0), hi = log(100000.0 + 1000 * (N - 1));
        size_t in_bin[SA1B_SIZE_BINS] = {0}, kept[SA1B_SIZE_BINS] = {0};
        for (size_t i = 0; i < N; i++) {
            int b = (int)floor(SA1B_SIZE_BINS * (log((double)sb[i].area) - lo) / (hi - lo));
            if (b > SA1B_SIZE_BINS - 1) b = SA1B_SIZE_BINS - 1;
            in_bin[b]++;
        }
        for (size_t i = 0; i < n_out; i++) {
            int b = (int)floor(SA1B_SIZE_BINS * (log((double)sb[out[i]].area) - lo) / (hi - lo));
            if (b > SA1B_SIZE_BINS - 1) b = SA1B_SIZE_BINS - 1;
            kept[b]++;
        }
        int ok = n_out == k && ascending(out, n_out);
        for (int b = 0; b < SA1B_SIZE_BINS; b++)
            ok &= kept[b] >= (in_bin[b] < quota ? in_bin[b] : quota);
        tap_ok(ok, "size-balanced: k kept, every bin has at least min(quota, size)");
    }

    /* kmeans: five well separated groups -> one mask per group, its best */
    {
        enum { G = 5, PER = 8 };
        sa1b_cand km[G * PER];
        for (int g = 0; g < G; g++)
            for (int j = 0; j < PER; j++) {
                sa1b_cand *m = &km[g * PER + j];
                m->bbox[0] = 100 + 250.0 * g + j;
                m->bbox[1] = 100 + 150.0 * g + j;
                m->bbox[2] = 50 + j;
                m->bbox[3] = 40 + j;
                m->area = (uint64_t)(m->bbox[2] * m->bbox[3] * (g + 1));
                m->predicted_iou = 0.5 + 0.05 * ((j * 3 + g) % PER);
                m->stability_score = 0.9;
            }
        sa1b_subsample(km, G * PER, NULL, SA1B_STRATEGY_KMEANS, G, 17, 3, 1500, 1000, out, &n_out, &err);
        int ok = n_out == G && ascending(out, n_out);
        for (size_t i = 0; ok && i < n_out; i++) {
            int g = (int)(out[i] / PER);
            for (int j = 0; j < PER; j++)
                ok &= km[g * PER + j].predicted_iou <= km[out[i]].predicted_iou;
            for (size_t i2 = 0; i2 < i; i2++) ok &= out[i2] / PER != out[i] / PER;
        }
        tap_ok(ok, "kmeans: one mask per well-separated group, the best of each");
        size_t again2[G];
        sa1b_subsample(km, G * PER, NULL, SA1B_STRATEGY_KMEANS, G, 17, 3, 1500, 1000, again2, &n_again, &err);
        tap_ok(n_again == n_out && memcmp(out, again2, sizeof(size_t) * G) == 0, "kmeans: deterministic");
    }

    /* all strategies: fewer survivors than k keeps them all; parse names */
    for (int s = 0; s < 4; s++) {
        sa1b_subsample(c, 10, NULL, (sa1b_strategy)s, 64, 1, 1, 1500, 1000, out, &n_out, &err);
        tap_ok(n_out == 10 && ascending(out, 10), "%s keeps all when n <= k", sa1b_strategy_name((sa1b_strategy)s));
        tap_is_int(sa1b_strategy_parse(sa1b_strategy_name((sa1b_strategy)s)), s, "parse %s", sa1b_strategy_name((sa1b_strategy)s));
    }
    tap_is_int(sa1b_strategy_parse("best"), -1, "unknown strategy name");
    tap_is_int(sa1b_subsample(c, N, NULL, (sa1b_strategy)9, 4, 1, 1, 10, 10, out, &n_out, &err), SA1B_EINVAL,
               "bad strategy is an error");
    return tap_done();
}
