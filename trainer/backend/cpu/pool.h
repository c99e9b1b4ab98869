/*
 * pool.h - the CPU backend's thread pool (private to backend_cpu.c and its
 * kernels): fn(ctx, begin, end) over a split of [0, n) into one contiguous
 * chunk per thread, thread i always taking chunk i, so that every element
 * is computed by the same thread in the same order whatever the timing.
 */
#ifndef SA1B_TRAINER_POOL_H
#define SA1B_TRAINER_POOL_H

#include <stddef.h>

typedef struct tr_pool tr_pool;

/* n threads in all (the caller of tr_pool_run is thread 0; n - 1 workers
 * are started); fewer when the system refuses a thread.  NULL when out of
 * memory. */
tr_pool *tr_pool_create(int n);
void tr_pool_free(tr_pool *p);
int tr_pool_threads(const tr_pool *p);

/* Runs fn over [0, n) split into tr_pool_threads(p) chunks (one per thread,
 * the caller's first); returns when all are done.  NULL p: the caller alone. */
void tr_pool_run(tr_pool *p, size_t n, void (*fn)(void *ctx, size_t begin, size_t end), void *ctx);

#endif
