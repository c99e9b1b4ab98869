/*
 * subsample.c - mask filters and the four subsampling strategies (see
 * sa1b_subsample.h; the normative definitions are in man/sa1b-shard.1).
 */
#include "sa1b_subsample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

void sa1b_filter_default(sa1b_filter *f)
{
    f->min_area = 0;
    f->min_iou = -INFINITY;
    f->min_stability = -INFINITY;
}

int sa1b_filter_keeps(const sa1b_filter *f, const sa1b_cand *c)
{
    sa1b_filter dflt;
    if (!f) sa1b_filter_default(&dflt), f = &dflt;
    return c->area >= f->min_area && c->predicted_iou >= f->min_iou && c->stability_score >= f->min_stability;
}

static const char *const strategy_names[] = {"random", "quality", "size-balanced", "kmeans"};

int sa1b_strategy_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, strategy_names[i]) == 0) return i;
    return -1;
}

const char *sa1b_strategy_name(sa1b_strategy s)
{
    return (unsigned)s < 4 ? strategy_names[s] : "unknown";
}

/* The quality order: predicted_iou descending, stability_score descending,
 * index ascending.  Returns < 0 when a goes first. */
static int quality_cmp(const sa1b_cand *cand, size_t a, size_t b)
{
    const sa1b_cand *x = &cand[a], *y = &cand[b];
    if (x->predicted_iou != y->predicted_iou) return x->predicted_iou > y->predicted_iou ? -1 : 1;
    if (x->stability_score != y->stability_score) return x->stability_score > y->stability_score ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Insertion-merge sort by quality: small n (masks per image), stable,
 * no global comparator state. */
static void sort_by_quality(const sa1b_cand *cand, size_t *idx, size_t n, size_t *tmp)
{
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = quality_cmp(cand, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[o++] = idx[i++];
            while (j < hi) tmp[o++] = idx[j++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

/* Partial Fisher-Yates: moves t uniformly chosen elements of v[0..m) to the
 * front: for i < t, swap v[i] with v[i + below(m - i)]. */
static void partial_shuffle(sa1b_rng *rng, size_t *v, size_t m, size_t t)
{
    for (size_t i = 0; i < t && i < m; i++) {
        size_t j = i + (size_t)rng_below(rng, m - i);
        size_t s = v[i];
        v[i] = v[j];
        v[j] = s;
    }
}

static double log_area(const sa1b_cand *c) { return log((double)(c->area ? c->area : 1)); }

/* Equal quotas k / SA1B_SIZE_BINS over log-area bins, remainder at random. */
static size_t pick_size_balanced(const sa1b_cand *cand, const size_t *surv, size_t m, size_t k,
                                 sa1b_rng *rng, size_t *out, size_t *work, uint8_t *chosen)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < m; i++) {
        double la = log_area(&cand[surv[i]]);
        if (la < lo) lo = la;
        if (la > hi) hi = la;
    }
    size_t quota = k / SA1B_SIZE_BINS, n_out = 0;
    memset(chosen, 0, m);
    for (int b = 0; b < SA1B_SIZE_BINS; b++) {
        size_t nb = 0; /* work holds positions (into surv) of bin b, ascending */
        for (size_t i = 0; i < m; i++) {
            int bin = 0;
            if (hi > lo) {
                bin = (int)floor(SA1B_SIZE_BINS * (log_area(&cand[surv[i]]) - lo) / (hi - lo));
                if (bin > SA1B_SIZE_BINS - 1) bin = SA1B_SIZE_BINS - 1;
            }
            if (bin == b) work[nb++] = i;
        }
        size_t t = quota < nb ? quota : nb;
        partial_shuffle(rng, work, nb, t);
        for (size_t i = 0; i < t; i++) chosen[work[i]] = 1, out[n_out++] = surv[work[i]];
    }
    size_t nr = 0;
    for (size_t i = 0; i < m; i++)
        if (!chosen[i]) work[nr++] = surv[i];
    size_t r = k - n_out;
    partial_shuffle(rng, work, nr, r);
    for (size_t i = 0; i < r && i < nr; i++) out[n_out++] = work[i];
    return n_out;
}

enum { NF = 4 };

static void kmeans_features(const sa1b_cand *c, uint32_t W, uint32_t H, double f[NF])
{
    double w = c->bbox[2], h = c->bbox[3];
    double lwh = log((double)W * (double)H), lmax = log((double)(W > H ? W : H));
    f[0] = (c->bbox[0] + w / 2) / W;
    f[1] = (c->bbox[1] + h / 2) / H;
    f[2] = lwh > 0 ? log_area(c) / lwh : 0;
    f[3] = lmax > 0 ? 0.5 + 0.5 * log((w > 1 ? w : 1) / (h > 1 ? h : 1)) / lmax : 0.5;
}

static double dist2(const double *a, const double *b)
{
    double d = 0;
    for (int i = 0; i < NF; i++) d += (a[i] - b[i]) * (a[i] - b[i]);
    return d;
}

static int nearest(const double *f, const double *centres, size_t k)
{
    size_t best = 0;
    double bd = INFINITY;
    for (size_t c = 0; c < k; c++) {
        double d = dist2(f, centres + c * NF);
        if (d < bd) bd = d, best = c;
    }
    return (int)best;
}

/* k-means++ initialisation, Lloyd iterations, then the best mask (quality
 * order) of each non-empty cluster; empty clusters are filled in quality
 * order from the masks not kept. */
static int pick_kmeans(const sa1b_cand *cand, const size_t *surv, size_t m, size_t k,
                       uint32_t W, uint32_t H, sa1b_rng *rng, size_t *out, size_t *n_out,
                       size_t *work, uint8_t *chosen)
{
    double *feat = malloc(m * NF * sizeof *feat), *cent = malloc(k * NF * sizeof *cent);
    double *d2 = malloc(m * sizeof *d2), *sum = malloc(k * NF * sizeof *sum);
    int *assign = malloc(m * sizeof *assign);
    size_t *count = malloc(k * sizeof *count), *best = malloc(k * sizeof *best);
    int rc = SA1B_ENOMEM;
    if (!feat || !cent || !d2 || !sum || !assign || !count || !best) goto out;
    for (size_t i = 0; i < m; i++) kmeans_features(&cand[surv[i]], W, H, feat + i * NF);

    memset(chosen, 0, m);
    size_t first = (size_t)rng_below(rng, m);
    memcpy(cent, feat + first * NF, sizeof(double) * NF);
    chosen[first] = 1;
    for (size_t i = 0; i < m; i++) d2[i] = dist2(feat + i * NF, cent);
    for (size_t c = 1; c < k; c++) {
        double total = 0;
        for (size_t i = 0; i < m; i++) total += d2[i];
        size_t pick = m;
        if (total > 0) {
            double u = rng_unit(rng) * total, cum = 0;
            for (size_t i = 0; i < m; i++) {
                cum += d2[i];
                if (d2[i] > 0) pick = i;
                if (cum > u && d2[i] > 0) break;
            }
        } else {
            for (size_t i = 0; i < m && pick == m; i++)
                if (!chosen[i]) pick = i;
        }
        chosen[pick] = 1;
        memcpy(cent + c * NF, feat + pick * NF, sizeof(double) * NF);
        for (size_t i = 0; i < m; i++) {
            double d = dist2(feat + i * NF, cent + c * NF);
            if (d < d2[i]) d2[i] = d;
        }
    }
    for (size_t i = 0; i < m; i++) assign[i] = nearest(feat + i * NF, cent, k);
    for (int it = 0; it < SA1B_KMEANS_ITERS; it++) {
        memset(sum, 0, k * NF * sizeof *sum);
        memset(count, 0, k * sizeof *count);
        for (size_t i = 0; i < m; i++) {
            count[assign[i]]++;
            for (int f = 0; f < NF; f++) sum[assign[i] * NF + f] += feat[i * NF + f];
        }
        for (size_t c = 0; c < k; c++)
            if (count[c])
                for (int f = 0; f < NF; f++) cent[c * NF + f] = sum[c * NF + f] / (double)count[c];
        int changed = 0;
        for (size_t i = 0; i < m; i++) {
            int a = nearest(feat + i * NF, cent, k);
            if (a != assign[i]) assign[i] = a, changed = 1;
        }
        if (!changed) break;
    }
    for (size_t c = 0; c < k; c++) best[c] = m;
    for (size_t i = 0; i < m; i++) {
        size_t *b = &best[assign[i]];
        if (*b == m || quality_cmp(cand, surv[i], surv[*b]) < 0) *b = i;
    }
    size_t n = 0;
    memset(chosen, 0, m);
    for (size_t c = 0; c < k; c++)
        if (best[c] < m) chosen[best[c]] = 1, out[n++] = surv[best[c]];
    if (n < k) {
        size_t nr = 0;
        for (size_t i = 0; i < m; i++)
            if (!chosen[i]) work[nr++] = surv[i];
        sort_by_quality(cand, work, nr, work + nr);
        for (size_t i = 0; n < k && i < nr; i++) out[n++] = work[i];
    }
    *n_out = n;
    rc = SA1B_OK;
out:
    free(feat), free(cent), free(d2), free(sum), free(assign), free(count), free(best);
    return rc;
}

int sa1b_subsample(const sa1b_cand *cand, size_t n, const sa1b_filter *filter,
                   sa1b_strategy strategy, size_t k, uint64_t seed, int64_t image_id,
                   uint32_t img_w, uint32_t img_h, size_t *out, size_t *n_out,
                   sa1b_error *err)
{
    *n_out = 0;
    if ((unsigned)strategy > SA1B_STRATEGY_KMEANS)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "unknown strategy %d", (int)strategy);
    if (n == 0) return SA1B_OK;
    sa1b_filter dflt;
    if (!filter) sa1b_filter_default(&dflt), filter = &dflt;

    /* surv, work (2n for the sort's temporary) and chosen in one block */
    size_t *surv = malloc(3 * n * sizeof *surv);
    uint8_t *chosen = malloc(n);
    if (!surv || !chosen) {
        free(surv), free(chosen);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "subsample: out of memory");
    }
    size_t *work = surv + n, m = 0;
    for (size_t i = 0; i < n; i++)
        if (sa1b_filter_keeps(filter, &cand[i])) surv[m++] = i;
    int rc = SA1B_OK;
    sa1b_rng rng;
    rng_seed(&rng, seed, (uint64_t)image_id);
    if (k == 0 || m <= k) {
        memcpy(out, surv, m * sizeof *out);
        *n_out = m;
    } else if (strategy == SA1B_STRATEGY_RANDOM) {
        partial_shuffle(&rng, surv, m, k);
        memcpy(out, surv, k * sizeof *out);
        *n_out = k;
    } else if (strategy == SA1B_STRATEGY_QUALITY) {
        sort_by_quality(cand, surv, m, work);
        memcpy(out, surv, k * sizeof *out);
        *n_out = k;
    } else if (strategy == SA1B_STRATEGY_SIZE_BALANCED) {
        *n_out = pick_size_balanced(cand, surv, m, k, &rng, out, work, chosen);
    } else {
        rc = pick_kmeans(cand, surv, m, k, img_w ? img_w : 1, img_h ? img_h : 1, &rng, out, n_out,
                         work, chosen);
        if (rc) sa1b_error_set(err, rc, -1, "subsample: out of memory");
    }
    qsort(out, *n_out, sizeof *out, size_cmp);
    free(surv);
    free(chosen);
    return rc;
}
