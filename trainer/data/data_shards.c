/*
 * data_shards.c - tr_data_source over sa1b_loader.
 */
#include "data_shards.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sa1b_loader.h"
#include "sa1b_shard.h"

static void *mem_alloc_cb(size_t size, void *ctx) { return tr_mem_alloc(ctx, TR_MEM_DATA, size); }
static void mem_free_cb(void *ptr, size_t size, void *ctx)
{
    (void)size;
    tr_mem_free(ctx, ptr);
}

typedef struct shard_ctx {
    sa1b_allocator alloc;
    tr_shard_options opt;
    char *glob;
    sa1b_loader *L;
    sa1b_batch *held;
    tr_batch tb;
    uint64_t epoch, consumed; /* position after the last delivered batch */
    uint64_t n_images;
    double wait_before;       /* consumer wait of loaders closed by seek */
    char identity[128];       /* what the shards are (data_identity) */
    size_t n_incomplete;      /* shards whose input ended early (provenance input_clean_end false) */
    char first_incomplete[4096];
    size_t n_gapped;          /* inputs split into parts (--max-images) of which a part is not here */
    char first_gapped[4096];  /* a part of the first such input */
    long gap_part;            /* the number of a part it lacks */
    uint64_t n_damaged;       /* damaged samples skipped (skip_damaged) */
} shard_ctx;

/* A part of an input split by sa1b-shard --max-images, as its provenance
 * says: the input and options (key), the loader's shard that holds it, its
 * number, whether it is the last. */
typedef struct part_rec {
    char *key;
    size_t shard;
    long part;
    int last;
} part_rec;

static int part_cmp(const void *a, const void *b)
{
    const part_rec *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : x->part < y->part ? -1 : x->part > y->part;
}

/* The inputs whose parts are not all among recs (sorted): a number skipped
 * from 0 up, or a highest part that says it is not the last. */
static void find_gaps(shard_ctx *s, part_rec *recs, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        long want = 0, gap = -1;
        for (; j < n && !strcmp(recs[j].key, recs[i].key); j++) {
            if (recs[j].part > want && gap < 0) gap = want;
            if (recs[j].part >= want) want = recs[j].part + 1;
        }
        if (gap < 0 && recs[j - 1].last == 0) gap = want; /* the highest here is not the last */
        if (gap >= 0 && !s->n_gapped++) {
            const char *p = sa1b_loader_shard_path(s->L, recs[i].shard); /* opened: not NULL */
            snprintf(s->first_gapped, sizeof s->first_gapped, "%s", p ? p : "");
            s->gap_part = gap;
        }
        i = j;
    }
}

/* "N shards, M images, digest D": D a 64-bit FNV-1a over each shard's file
 * name (without its folder), size in bytes and provenance (its input's
 * name, size and CRC32C, the options and the part), in the loader's order,
 * so that a shard added, removed, renamed, or replaced by another (even of
 * the same name and size) changes it. */
static void data_identity(shard_ctx *s, char *buf, size_t len)
{
    const sa1b_loader *L = s->L;
    s->n_incomplete = s->n_gapped = 0;
    size_t n = 0, n_rec = 0;
    uint64_t images = 0, h = 0xcbf29ce484222325ull;
    sa1b_loader_info(L, &images, NULL, NULL, NULL, &n, NULL, NULL);
    part_rec *recs = calloc(n ? n : 1, sizeof *recs); /* NULL: the parts go unchecked */
    for (size_t i = 0; i < n; i++) {
        const char *p = sa1b_loader_shard_path(L, i), *slash = p ? strrchr(p, '/') : NULL;
        char size[32] = "-1";
        sa1b_shard *sh = NULL;
        const char *prov = "";
        size_t prov_len = 0;
        if (p && sa1b_shard_open(&sh, p, NULL) == SA1B_OK) {
            const sa1b_shard_info *in = sa1b_shard_get_info(sh);
            snprintf(size, sizeof size, "%" PRIu64, (uint64_t)in->file_size);
            prov = in->provenance ? in->provenance : "", prov_len = in->provenance ? in->provenance_len : 0;
            json_t *j = json_loadb(prov, prov_len, 0, NULL);
            if (json_is_false(json_object_get(j, "input_clean_end")) && !s->n_incomplete++)
                snprintf(s->first_incomplete, sizeof s->first_incomplete, "%s", p);
            const json_t *in_name = json_object_get(j, "input"), *part = json_object_get(j, "part"),
                         *last = json_object_get(j, "last_part");
            /* a part of a split input (its provenance says whether it is the last: parts made
             * before that was recorded are not checked, part 0 of them being like a whole input) */
            if (recs && json_is_string(in_name) && json_is_integer(part) && json_integer_value(part) >= 0 &&
                json_is_boolean(last)) {
                char *opts = json_dumps(json_object_get(j, "options"), JSON_COMPACT | JSON_SORT_KEYS);
                char *key = NULL; /* NULL (out of memory): this part goes unchecked */
                if (opts && asprintf(&key, "%s\n%s", json_string_value(in_name), opts) < 0) key = NULL;
                if (key) recs[n_rec++] = (part_rec){key, i, (long)json_integer_value(part), json_is_true(last)};
                free(opts);
            }
            json_decref(j);
        }
        const char *parts[3] = {slash ? slash + 1 : p ? p : "", size, prov};
        size_t lens[3] = {strlen(parts[0]), strlen(size), prov_len};
        for (int k = 0; k < 3; k++) {
            for (size_t c = 0; c < lens[k]; c++) h = (h ^ (uint8_t)parts[k][c]) * 0x100000001b3ull;
            h = (h ^ 0xff) * 0x100000001b3ull; /* a separator: "ab","c" != "a","bc" */
        }
        sa1b_shard_close(sh);
    }
    snprintf(buf, len, "%zu shards, %" PRIu64 " images, digest %016" PRIx64, n, images, h);
    if (recs) {
        qsort(recs, n_rec, sizeof *recs, part_cmp);
        find_gaps(s, recs, n_rec);
        for (size_t i = 0; i < n_rec; i++) free(recs[i].key);
        free(recs);
    }
}

size_t tr_shard_batch_bytes(int B, int M, int K, int S, int R)
{
    /* (the loader as reopen configures it: images not normalised) */
    return sa1b_loader_batch_bytes_for((uint32_t)B, (uint32_t)M, (uint32_t)K, (uint32_t)S, (uint32_t)R, 0);
}

static int reopen(shard_ctx *s, uint64_t epoch, uint64_t consumed, char *err, size_t err_len)
{
    if (s->L) {
        sa1b_loader_stats st;
        sa1b_loader_stats_get(s->L, &st);
        s->wait_before += st.consumer_wait_s;
        sa1b_loader_close(s->L);
        s->L = NULL, s->held = NULL;
    }
    if (s->n_images && consumed >= s->n_images) epoch++, consumed = 0;
    sa1b_loader_config c;
    sa1b_loader_config_init(&c);
    c.glob = s->glob;
    c.batch_size = (uint32_t)s->opt.B, c.max_masks = (uint32_t)s->opt.M, c.points = (uint32_t)s->opt.K;
    c.seed = s->opt.seed, c.epoch = epoch, c.consumed = consumed;
    c.max_epochs = s->opt.max_epochs;
    c.threads = (uint32_t)s->opt.threads;
    c.flip_prob = s->opt.flip_prob;
    c.stored_point = s->opt.stored_point;
    c.rank = (uint32_t)s->opt.rank, c.world = (uint32_t)(s->opt.world > 1 ? s->opt.world : 1);
    c.verify = 1;
    c.pad_damaged = 1; /* a damaged sample skipped keeps its slot: the others' rows as without it */
    c.mask_size = (uint32_t)s->opt.R; /* source-size masks: resampled to the model's R */
    if (s->opt.mem) {
        s->alloc = (sa1b_allocator){.alloc = mem_alloc_cb, .free = mem_free_cb, .ctx = s->opt.mem};
        c.allocator = &s->alloc;
    }
    sa1b_error e;
    sa1b_error_clear(&e);
    uint32_t S, R;
    if (sa1b_loader_open(&s->L, &c, &e) != 0) {
        /* shards of another fixed mask size: opened as they are, to say what would agree */
        sa1b_error e2;
        sa1b_error_clear(&e2);
        c.mask_size = 0;
        if (sa1b_loader_open(&s->L, &c, &e2) != 0) return snprintf(err, err_len, "%s", e.msg), -1;
        sa1b_loader_info(s->L, NULL, &S, &R, NULL, NULL, NULL, NULL);
        sa1b_loader_close(s->L);
        s->L = NULL;
        if ((int)S == s->opt.S && (int)R == s->opt.R) return snprintf(err, err_len, "%s", e.msg), -1;
        return snprintf(err, err_len, "'%s': shards have S=%u R=%u, the model needs S=%d R=%d (give the model "
                        "--image-size %u, a multiple of --patch, or shard with sa1b-shard --image-size %d "
                        "--mask-size %d)", s->glob, S, R, s->opt.S, s->opt.R, S, s->opt.S, s->opt.R), -1;
    }
    sa1b_loader_info(s->L, &s->n_images, &S, &R, NULL, NULL, NULL, NULL);
    if ((int)S != s->opt.S || (int)R != s->opt.R)
        return snprintf(err, err_len, "'%s': shards have S=%u R=%u, the model needs S=%d R=%d (give the model "
                        "--image-size %u, a multiple of --patch, or shard with sa1b-shard --image-size %d "
                        "--mask-size %d)", s->glob, S, R, s->opt.S, s->opt.R, S, s->opt.S, s->opt.R), -1;
    s->epoch = epoch, s->consumed = consumed;
    return 0;
}

static int sh_next(void *ctx, tr_batch **out, char *err, size_t err_len)
{
    shard_ctx *s = ctx;
    sa1b_batch *b = NULL;
    sa1b_error e;
    sa1b_error_clear(&e);
    int rc;
    const char *path;
    while ((rc = sa1b_loader_next(s->L, &b, &e)) != 0 && rc != SA1B_EOF && s->opt.skip_damaged &&
           sa1b_loader_damaged(s->L, &path, NULL, NULL)) { /* the next call delivers its batch, the row padding */
        s->n_damaged++;
        if (s->opt.on_damaged) s->opt.on_damaged(s->opt.damaged_ctx, e.msg);
        sa1b_error_clear(&e);
    }
    if (rc == SA1B_EOF) return 0;
    if (rc == SA1B_ENOMEM) /* (its buffer refused by the allocator: the run's memory, as the model's) */
        return snprintf(err, err_len, "out of memory for data (%s)", e.msg), -1;
    if (rc != 0 && sa1b_loader_damaged(s->L, &path, NULL, NULL))
        return snprintf(err, err_len, "%s: a damaged sample (rebuild '%s' with sa1b-shard, or give --skip-damaged to "
                        "leave its pairs out and go on)", e.msg, path), -1;
    if (rc != 0) return snprintf(err, err_len, "%s", e.msg), -1;
    s->held = b;
    s->epoch = b->epoch, s->consumed = b->next_position;
    tr_batch *t = &s->tb;
    t->B = (int)b->B, t->M = (int)b->M, t->K = (int)b->K, t->S = (int)b->S, t->R = (int)b->R;
    t->image = b->images;
    t->content = b->content_size;
    t->masks = b->masks;
    t->valid = b->valid;
    t->points = b->points;
    t->labels = b->labels;
    t->n_masks = b->n_masks;
    *out = t;
    return 1;
}

static void sh_release(void *ctx, tr_batch *b)
{
    shard_ctx *s = ctx;
    (void)b;
    sa1b_loader_release(s->L, s->held);
    s->held = NULL;
}

static double sh_wait(void *ctx)
{
    shard_ctx *s = ctx;
    sa1b_loader_stats st;
    sa1b_loader_stats_get(s->L, &st);
    return s->wait_before + st.consumer_wait_s;
}

static void sh_position(void *ctx, uint64_t *epoch, uint64_t *consumed)
{
    shard_ctx *s = ctx;
    *epoch = s->epoch, *consumed = s->consumed;
}

static int sh_seek(void *ctx, uint64_t epoch, uint64_t consumed)
{
    char err[256];
    return reopen(ctx, epoch, consumed, err, sizeof err);
}

static void sh_identity(void *ctx, char *buf, size_t len)
{
    shard_ctx *s = ctx;
    snprintf(buf, len, "%s", s->identity);
}

static void sh_close(void *ctx)
{
    shard_ctx *s = ctx;
    sa1b_loader_close(s->L);
    free(s->glob);
    free(s);
}

static const tr_source_ops shard_ops = {
    .next = sh_next,
    .release = sh_release,
    .wait_seconds = sh_wait,
    .position = sh_position,
    .seek = sh_seek,
    .identity = sh_identity,
    .close = sh_close,
};

int tr_shard_source_open(tr_data_source *src, const tr_shard_options *opt, char *err, size_t err_len)
{
    shard_ctx *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, err_len, "out of memory"), -1;
    s->opt = *opt;
    s->glob = strdup(opt->glob);
    if (!s->glob || reopen(s, 0, 0, err, err_len) < 0) {
        sa1b_loader_close(s->L);
        free(s->glob);
        free(s);
        return -1;
    }
    data_identity(s, s->identity, sizeof s->identity); /* once: a seek reopens the same shards */
    tr_source_init(src, s, &shard_ops);
    return 0;
}

size_t tr_shard_source_gapped(const tr_data_source *src, const char **first, long *part)
{
    const shard_ctx *s = src->ops == &shard_ops ? src->ctx : NULL;
    if (!s) return *first = NULL, *part = -1, 0;
    *first = s->n_gapped ? s->first_gapped : NULL;
    *part = s->n_gapped ? s->gap_part : -1;
    return s->n_gapped;
}

size_t tr_shard_source_incomplete(const tr_data_source *src, const char **first)
{
    const shard_ctx *s = src->ops == &shard_ops ? src->ctx : NULL;
    if (!s) return *first = NULL, 0;
    *first = s->n_incomplete ? s->first_incomplete : NULL;
    return s->n_incomplete;
}

uint64_t tr_shard_source_damaged(const tr_data_source *src)
{
    const shard_ctx *s = src->ops == &shard_ops ? src->ctx : NULL;
    return s ? s->n_damaged : 0;
}
