/*
 * alloc.c - the accounting, caching allocator.  Each block the system gave
 * us has a record (address, class size, requested size, category) kept out
 * of band in a hash table keyed by address, so that counting-only blocks
 * (read-only mappings) need no header; unused blocks wait on the free list
 * of their size class.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define TR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TR_ASAN 1
#endif
#endif
#ifdef TR_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct tr_mem_block {
    unsigned char *ptr;
    size_t size;         /* class bytes held from the system */
    size_t req;          /* bytes asked for (valid while in use) */
    uint32_t cat;
    uint32_t cls;
    int in_use;
    uint64_t seq;        /* n_allocs when it was handed out (valid while in use) */
    tr_mem_block *hnext; /* hash chain */
    tr_mem_block *fnext; /* free list of the class */
};

#define SMALL_LIMIT 65536u
#define SMALL_STEP 512u

const char *tr_mem_cat_name(tr_mem_cat cat)
{
    static const char *names[TR_MEM_NCAT] = {"parameters", "gradients", "optimizer",
                                             "activations", "workspace", "data"};
    return (unsigned)cat < TR_MEM_NCAT ? names[cat] : "?";
}

/* Class of n bytes: its index and its size. */
static unsigned size_class(size_t n, size_t *bytes)
{
    if (n <= SMALL_LIMIT) {
        size_t c = n == 0 ? 1 : (n + SMALL_STEP - 1) / SMALL_STEP;
        *bytes = c * SMALL_STEP;
        return (unsigned)(c - 1);
    }
    unsigned e = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
    size_t base = (size_t)1 << e, step = base / 8;
    size_t k = (n - base + step - 1) / step; /* 1..8 */
    *bytes = base + k * step;
    return 128u + (e - 16u) * 8u + (unsigned)(k - 1);
}

size_t tr_mem_class_bytes(size_t n_bytes)
{
    size_t b;
    size_class(n_bytes, &b);
    return b;
}

static void *host_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return aligned_alloc(64, n);
}

static void host_free(void *ctx, void *p, size_t n)
{
    (void)ctx, (void)n;
    free(p);
}

static void host_zero(void *ctx, void *p, size_t n)
{
    (void)ctx;
    memset(p, 0, n);
}

const tr_mem_hooks tr_mem_host_hooks = {host_alloc, host_free, host_zero, NULL};

static void *counting_alloc(void *ctx, size_t n)
{
    (void)ctx;
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void counting_free(void *ctx, void *p, size_t n)
{
    (void)ctx;
    munmap(p, n);
}

const tr_mem_hooks tr_mem_counting_hooks = {counting_alloc, counting_free, NULL, NULL};

void tr_mem_init_hooks(tr_mem *m, const tr_mem_hooks *hooks, int counting)
{
    memset(m, 0, sizeof *m);
    m->hooks = *hooks;
    m->counting_only = counting;
    pthread_mutex_init(&m->mu, NULL);
}

void tr_mem_init(tr_mem *m) { tr_mem_init_hooks(m, &tr_mem_host_hooks, 0); }

int tr_mem_take_failure(tr_mem *m, tr_mem_cat *cat, uint64_t *n_bytes)
{
    pthread_mutex_lock(&m->mu);
    int f = m->failed;
    if (f) *cat = m->failed_cat, *n_bytes = m->failed_bytes;
    m->failed = 0;
    pthread_mutex_unlock(&m->mu);
    return f;
}

static size_t hash_ptr(const void *p, size_t n_buckets)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 6;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 32) & (n_buckets - 1);
}

static void sys_release(tr_mem *m, tr_mem_block *b)
{
    if (!m->counting_only) UNPOISON(b->ptr, b->size);
    m->hooks.free(m->hooks.ctx, b->ptr, b->size);
    m->reserved -= b->size;
    m->n_sys_frees++;
    free(b);
}

void tr_mem_destroy(tr_mem *m)
{
    for (size_t i = 0; i < m->n_buckets; i++) {
        tr_mem_block *b = m->buckets[i];
        while (b) {
            tr_mem_block *nx = b->hnext;
            sys_release(m, b);
            b = nx;
        }
    }
    free(m->buckets);
    m->buckets = NULL;
    m->n_buckets = m->n_blocks = 0;
    memset(m->free_list, 0, sizeof m->free_list);
    pthread_mutex_destroy(&m->mu);
}

/* under the lock */
static void count_locked(tr_mem *m, tr_mem_cat cat, int64_t n_bytes)
{
    m->cur[cat] += (uint64_t)n_bytes;
    m->total += (uint64_t)n_bytes;
    if (n_bytes > 0) {
        m->n_allocs++;
        if (m->cur[cat] > m->peak[cat]) m->peak[cat] = m->cur[cat];
        if (m->total > m->total_peak) {
            m->total_peak = m->total;
            memcpy(m->at_peak, m->cur, sizeof m->at_peak);
        }
    }
}

void tr_mem_count(tr_mem *m, tr_mem_cat cat, int64_t n_bytes)
{
    if ((unsigned)cat >= TR_MEM_NCAT) return;
    pthread_mutex_lock(&m->mu);
    count_locked(m, cat, n_bytes);
    pthread_mutex_unlock(&m->mu);
}

/* under the lock: room for one more block in the hash table */
static int hash_grow(tr_mem *m)
{
    if (m->n_blocks < m->n_buckets) return 0;
    size_t nb = m->n_buckets ? 2 * m->n_buckets : 256;
    tr_mem_block **nbk = calloc(nb, sizeof *nbk);
    if (!nbk) return -1;
    for (size_t i = 0; i < m->n_buckets; i++) {
        tr_mem_block *b = m->buckets[i];
        while (b) {
            tr_mem_block *nx = b->hnext;
            size_t h = hash_ptr(b->ptr, nb);
            b->hnext = nbk[h];
            nbk[h] = b;
            b = nx;
        }
    }
    free(m->buckets);
    m->buckets = nbk;
    m->n_buckets = nb;
    return 0;
}

static void *mem_alloc(tr_mem *m, tr_mem_cat cat, size_t n_bytes, int zero)
{
    if ((unsigned)cat >= TR_MEM_NCAT || n_bytes > ((size_t)1 << 62)) return NULL;
    size_t bytes;
    unsigned cls = size_class(n_bytes, &bytes);
    pthread_mutex_lock(&m->mu);
    tr_mem_block *b = m->free_list[cls];
    if (b) {
        m->free_list[cls] = b->fnext;
        b->fnext = NULL;
        if (!m->counting_only) UNPOISON(b->ptr, n_bytes);
        if (zero && m->hooks.zero) m->hooks.zero(m->hooks.ctx, b->ptr, n_bytes);
    } else {
        if (m->limit && m->reserved + bytes > m->limit) goto oom;
        if (hash_grow(m) < 0) goto oom;
        b = calloc(1, sizeof *b);
        if (!b) goto oom;
        b->ptr = m->hooks.alloc(m->hooks.ctx, bytes);
        if (b->ptr && !m->counting_only) {
            if (zero && m->hooks.zero) m->hooks.zero(m->hooks.ctx, b->ptr, n_bytes);
            POISON(b->ptr + n_bytes, bytes - n_bytes);
        }
        if (!b->ptr) {
            free(b);
            goto oom;
        }
        b->size = bytes;
        b->cls = cls;
        size_t h = hash_ptr(b->ptr, m->n_buckets);
        b->hnext = m->buckets[h];
        m->buckets[h] = b;
        m->n_blocks++;
        m->n_sys_allocs++;
        m->reserved += bytes;
        if (m->reserved > m->reserved_peak) m->reserved_peak = m->reserved;
    }
    b->in_use = 1;
    b->req = n_bytes;
    b->cat = (uint32_t)cat;
    count_locked(m, cat, (int64_t)n_bytes);
    b->seq = m->n_allocs;
    pthread_mutex_unlock(&m->mu);
    return b->ptr;
oom:
    if (!m->failed) m->failed = 1, m->failed_cat = cat, m->failed_bytes = n_bytes;
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

void *tr_mem_alloc(tr_mem *m, tr_mem_cat cat, size_t n_bytes) { return mem_alloc(m, cat, n_bytes, 1); }

void *tr_mem_alloc_raw(tr_mem *m, tr_mem_cat cat, size_t n_bytes) { return mem_alloc(m, cat, n_bytes, 0); }

/* under the lock: block b (in use) back on its free list */
static void release_locked(tr_mem *m, tr_mem_block *b)
{
    count_locked(m, (tr_mem_cat)b->cat, -(int64_t)b->req);
    b->in_use = 0;
    b->req = 0;
    if (!m->counting_only) POISON(b->ptr, b->size);
    b->fnext = m->free_list[b->cls];
    m->free_list[b->cls] = b;
}

void tr_mem_free(tr_mem *m, void *p)
{
    if (!p) return;
    pthread_mutex_lock(&m->mu);
    tr_mem_block *b = m->n_buckets ? m->buckets[hash_ptr(p, m->n_buckets)] : NULL;
    while (b && b->ptr != p) b = b->hnext;
    if (!b || !b->in_use) abort(); /* not ours, or freed twice: a bug to stop at */
    release_locked(m, b);
    pthread_mutex_unlock(&m->mu);
}

uint64_t tr_mem_mark(tr_mem *m)
{
    pthread_mutex_lock(&m->mu);
    uint64_t s = m->n_allocs;
    pthread_mutex_unlock(&m->mu);
    return s;
}

size_t tr_mem_free_since(tr_mem *m, tr_mem_cat cat, uint64_t mark)
{
    size_t n = 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n_buckets; i++)
        for (tr_mem_block *b = m->buckets[i]; b; b = b->hnext)
            if (b->in_use && b->cat == (uint32_t)cat && b->seq > mark) release_locked(m, b), n++;
    pthread_mutex_unlock(&m->mu);
    return n;
}

uint64_t tr_mem_empty_cache(tr_mem *m)
{
    uint64_t released = 0;
    pthread_mutex_lock(&m->mu);
    for (unsigned c = 0; c < TR_MEM_NCLASS; c++) {
        tr_mem_block *b = m->free_list[c];
        m->free_list[c] = NULL;
        while (b) {
            tr_mem_block *nx = b->fnext;
            /* unlink from the hash chain */
            tr_mem_block **pp = &m->buckets[hash_ptr(b->ptr, m->n_buckets)];
            while (*pp != b) pp = &(*pp)->hnext;
            *pp = b->hnext;
            m->n_blocks--;
            released += b->size;
            sys_release(m, b);
            b = nx;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return released;
}

void tr_mem_reset_peak(tr_mem *m)
{
    pthread_mutex_lock(&m->mu);
    memcpy(m->peak, m->cur, sizeof m->peak);
    memcpy(m->at_peak, m->cur, sizeof m->at_peak);
    m->total_peak = m->total;
    m->reserved_peak = m->reserved;
    pthread_mutex_unlock(&m->mu);
}

void tr_mem_get_stats(tr_mem *m, tr_mem_stats *s)
{
    pthread_mutex_lock(&m->mu);
    memcpy(s->cur, m->cur, sizeof s->cur);
    memcpy(s->peak, m->peak, sizeof s->peak);
    memcpy(s->at_peak, m->at_peak, sizeof s->at_peak);
    s->total = m->total, s->total_peak = m->total_peak;
    s->reserved = m->reserved, s->reserved_peak = m->reserved_peak;
    s->n_allocs = m->n_allocs, s->n_sys_allocs = m->n_sys_allocs, s->n_sys_frees = m->n_sys_frees;
    pthread_mutex_unlock(&m->mu);
}

void tr_mem_format_bytes(char *buf, size_t n, uint64_t b)
{
    if (b >= (1ull << 40)) snprintf(buf, n, "%.2fT", (double)b / (double)(1ull << 40));
    else if (b >= (1ull << 30)) snprintf(buf, n, "%.2fG", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.1fM", (double)b / (double)(1ull << 20));
    else if (b >= (1ull << 10)) snprintf(buf, n, "%.1fK", (double)b / 1024.0);
    else snprintf(buf, n, "%lluB", (unsigned long long)b);
}

void tr_mem_format_line(char *buf, size_t n, const tr_mem_stats *s)
{
    char a[32], r[32], p[32];
    tr_mem_format_bytes(a, sizeof a, s->total);
    tr_mem_format_bytes(r, sizeof r, s->reserved);
    tr_mem_format_bytes(p, sizeof p, s->total_peak);
    snprintf(buf, n, "memory: %s allocated | %s reserved | peak %s", a, r, p);
}

void tr_mem_report(FILE *f, const tr_mem_stats *s)
{
    char a[32], b[32], c[32];
    fprintf(f, "%-12s %12s %12s %12s\n", "category", "allocated", "peak", "at peak");
    for (int i = 0; i < TR_MEM_NCAT; i++) {
        tr_mem_format_bytes(a, sizeof a, s->cur[i]);
        tr_mem_format_bytes(b, sizeof b, s->peak[i]);
        tr_mem_format_bytes(c, sizeof c, s->at_peak[i]);
        fprintf(f, "%-12s %12s %12s %12s\n", tr_mem_cat_name((tr_mem_cat)i), a, b, c);
    }
    tr_mem_format_bytes(a, sizeof a, s->total);
    tr_mem_format_bytes(b, sizeof b, s->total_peak);
    fprintf(f, "%-12s %12s %12s %12s\n", "total", a, b, b);
    tr_mem_format_bytes(a, sizeof a, s->reserved);
    tr_mem_format_bytes(b, sizeof b, s->reserved_peak);
    fprintf(f, "%-12s %12s %12s\n", "reserved", a, b);
    fprintf(f, "peak allocated %llu bytes, peak reserved %llu bytes, %llu allocations, %llu from the system, "
            "%llu returned\n", (unsigned long long)s->total_peak, (unsigned long long)s->reserved_peak,
            (unsigned long long)s->n_allocs, (unsigned long long)s->n_sys_allocs,
            (unsigned long long)s->n_sys_frees);
    fprintf(f, "peak bytes:");
    for (int i = 0; i < TR_MEM_NCAT; i++)
        fprintf(f, " %s=%llu", tr_mem_cat_name((tr_mem_cat)i), (unsigned long long)s->peak[i]);
    fprintf(f, "\n");
}
