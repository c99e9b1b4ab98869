/*
 * pool.c - the CPU backend's thread pool (pool.h).
 */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* A job is published under the mutex (fn, ctx, total, then gen + 1) and
 * taken under it.  Training issues hundreds of small jobs per step back to
 * back, so waking sleeping threads through the kernel for each one costs
 * more than the work: workers and the caller first spin on the atomic
 * generation and pending count, and only then sleep on the condition
 * variables; a sleeper is woken only when one is known to sleep.  The spin
 * adapts: each waiter halves its limit when spinning did not pay (it had to
 * sleep: the machine is oversubscribed, or the pool is idle between steps)
 * and doubles it when it did, between POOL_SPIN_MIN and POOL_SPIN_MAX
 * pauses, so a loaded machine loses little to spinning. */
#define POOL_SPIN_MIN 32
#define POOL_SPIN_MAX 16384

/* the next spin limit after a wait that did (ok) or did not need to sleep */
static inline int spin_next(int limit, int ok)
{
    if (ok) return limit < POOL_SPIN_MAX ? 2 * limit : POOL_SPIN_MAX;
    return limit > POOL_SPIN_MIN ? limit / 2 : POOL_SPIN_MIN;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

struct tr_pool {
    int n;
    pthread_t *th;
    struct pool_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    _Atomic uint64_t gen;
    _Atomic int pending, quit;
    int sleepers, caller_waits; /* under mu */
    int caller_spin;            /* the caller's spin limit (the caller is one thread) */
    void (*fn)(void *, size_t, size_t);
    void *ctx;
    size_t total;
};

typedef struct pool_arg {
    tr_pool *p;
    int idx;
} pool_arg;

static void *pool_worker(void *arg)
{
    pool_arg *a = arg;
    tr_pool *p = a->p;
    uint64_t seen = 0;
    int spin = POOL_SPIN_MIN;
    for (;;) {
        for (int i = 0; i < spin && atomic_load_explicit(&p->gen, memory_order_acquire) == seen &&
                        !atomic_load_explicit(&p->quit, memory_order_relaxed);
             i++)
            cpu_relax();
        spin = spin_next(spin, atomic_load_explicit(&p->gen, memory_order_acquire) != seen);
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) {
            p->sleepers++;
            pthread_cond_wait(&p->cv_start, &p->mu);
            p->sleepers--;
        }
        if (atomic_load(&p->quit)) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        seen = atomic_load(&p->gen);
        void (*fn)(void *, size_t, size_t) = p->fn;
        void *ctx = p->ctx;
        size_t total = p->total;
        size_t n = (size_t)p->n;
        pthread_mutex_unlock(&p->mu);
        size_t b = total * (size_t)a->idx / n, e = total * (size_t)(a->idx + 1) / n;
        if (e > b) fn(ctx, b, e);
        if (atomic_fetch_sub(&p->pending, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            if (p->caller_waits) pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

tr_pool *tr_pool_create(int n)
{
    tr_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = 1;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->quit, 0);
    p->caller_spin = POOL_SPIN_MIN;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_start, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n > 1) {
        p->th = calloc((size_t)n, sizeof *p->th);
        p->args = calloc((size_t)n, sizeof *p->args);
        if (!p->th || !p->args) return p; /* single-threaded */
        for (int i = 1; i < n; i++) {
            p->args[i].p = p;
            p->args[i].idx = i;
            if (pthread_create(&p->th[i], NULL, pool_worker, &p->args[i]) != 0) break;
            p->n = i + 1;
        }
    }
    return p;
}

void tr_pool_free(tr_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    free(p->args);
    free(p->th);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_start);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

int tr_pool_threads(const tr_pool *p) { return p ? p->n : 1; }

void tr_pool_run(tr_pool *p, size_t n, void (*fn)(void *ctx, size_t begin, size_t end), void *ctx)
{
    if (n == 0) return;
    if (!p || p->n <= 1 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->total = n;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (p->sleepers) pthread_cond_broadcast(&p->cv_start);
    pthread_mutex_unlock(&p->mu);
    size_t e = n / (size_t)p->n;
    if (e > 0) fn(ctx, 0, e);
    for (int i = 0; i < p->caller_spin && atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        cpu_relax();
    int done = atomic_load_explicit(&p->pending, memory_order_acquire) == 0;
    p->caller_spin = spin_next(p->caller_spin, done);
    if (!done) {
        pthread_mutex_lock(&p->mu);
        p->caller_waits = 1;
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        p->caller_waits = 0;
        pthread_mutex_unlock(&p->mu);
    }
}
