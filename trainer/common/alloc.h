/*
 * alloc.h - the trainer's one accounting, caching allocator.  Every tensor
 * of the trainer (parameters, gradients, optimizer moments, activations,
 * scratch space, batch data) is allocated here, tagged with a category, so
 * that the program can print "allocated | reserved | peak" per category
 * (PyTorch's memory_allocated / memory_reserved / max_memory_allocated) and
 * the planner (plan.h) can replay the same sequence on the counting "meta"
 * backend.
 *
 * Caching: a request is rounded up to a size class (multiples of 512 bytes
 * up to 64 KiB, then 8 classes per power of two: at most 12.5% rounding)
 * and served from that class's free list when a block is cached there;
 * freed blocks go back to their list instead of to the system.  A training
 * loop that asks for the same sizes every step therefore does no system
 * allocation after its first step (n_sys_allocs stops growing);
 * tr_mem_empty_cache gives the cached blocks back.  "allocated" counts the
 * bytes asked for, "reserved" the class-rounded bytes held from the system
 * (in use and cached).
 *
 * Counting-only mode (the meta backend): the same bookkeeping, size classes
 * and caching, but a "system allocation" is an address range mapped
 * read-only without backing memory (reads see zeros, a write faults), so a
 * whole training step can run on it without real memory.
 *
 * Where the memory comes from is a set of hooks (tr_mem_hooks): the host
 * heap by default, read-only reservations for counting, and a device or
 * pinned-host allocator for a GPU backend; a byte limit on what is held from
 * the system (tr_mem.limit) turns any of them into a budgeted allocator, so
 * that an out-of-memory can be provoked where a test wants it.
 *
 * Blocks are 64-byte aligned and zero-filled.  A tr_mem is thread safe (the
 * loader's workers allocate batch buffers through it) once tr_mem_init has
 * run; tr_mem_destroy gives every block back to the system.  Under
 * AddressSanitizer cached blocks are poisoned, so a use after free is still
 * reported.
 */
#ifndef SA1B_TRAINER_ALLOC_H
#define SA1B_TRAINER_ALLOC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum tr_mem_cat {
    TR_MEM_PARAMS = 0, /* weights and buffers */
    TR_MEM_GRADS,      /* parameter gradients */
    TR_MEM_OPTIM,      /* optimizer moments */
    TR_MEM_ACTS,       /* activations and their gradients */
    TR_MEM_WORK,       /* short-lived scratch space */
    TR_MEM_DATA,       /* batches */
    TR_MEM_NCAT
} tr_mem_cat;

#define TR_MEM_NCLASS 640 /* number of size classes (sizes up to 2^63) */

typedef struct tr_mem_block tr_mem_block; /* private to alloc.c */

/* Where blocks come from.  alloc returns n_bytes (a multiple of 512)
 * 64-byte aligned, or NULL; free gives them back; zero writes n_bytes zeros
 * at p (NULL: the memory is never written, as for counting). */
typedef struct tr_mem_hooks {
    void *(*alloc)(void *ctx, size_t n_bytes);
    void (*free)(void *ctx, void *p, size_t n_bytes);
    void (*zero)(void *ctx, void *p, size_t n_bytes);
    void *ctx;
} tr_mem_hooks;

/* The host heap (the default) and counting-only reservations (read-only
 * ranges of zeros without backing memory: reading sees zeros, writing
 * faults). */
extern const tr_mem_hooks tr_mem_host_hooks;
extern const tr_mem_hooks tr_mem_counting_hooks;

typedef struct tr_mem {
    uint64_t cur[TR_MEM_NCAT];     /* bytes allocated now, per category */
    uint64_t peak[TR_MEM_NCAT];    /* high-water mark per category */
    uint64_t total, total_peak;    /* all categories together */
    uint64_t at_peak[TR_MEM_NCAT]; /* cur[] at the moment total_peak was reached */
    uint64_t reserved;             /* bytes held from the system: in use + cached */
    uint64_t reserved_peak;
    uint64_t n_allocs;             /* successful tr_mem_alloc calls */
    uint64_t n_sys_allocs;         /* blocks obtained from the system */
    uint64_t n_sys_frees;          /* blocks given back to the system */
    int counting_only;             /* 1: no real memory (meta backend); set by tr_mem_init_hooks */
    uint64_t limit;                /* > 0: a system allocation that would make reserved exceed it fails */
    tr_mem_hooks hooks;            /* set by tr_mem_init / tr_mem_init_hooks */
    /* the first failed allocation since tr_mem_take_failure: its category, size in bytes */
    int failed;
    tr_mem_cat failed_cat;
    uint64_t failed_bytes;
    pthread_mutex_t mu;            /* guards everything here */
    /* private: the blocks by address and the free lists by size class */
    tr_mem_block **buckets;
    size_t n_buckets, n_blocks;
    tr_mem_block *free_list[TR_MEM_NCLASS];
} tr_mem;

/* A consistent copy of the counters (taken under the lock). */
typedef struct tr_mem_stats {
    uint64_t cur[TR_MEM_NCAT], peak[TR_MEM_NCAT], at_peak[TR_MEM_NCAT];
    uint64_t total, total_peak, reserved, reserved_peak;
    uint64_t n_allocs, n_sys_allocs, n_sys_frees;
} tr_mem_stats;

/* tr_mem_init: the host heap; tr_mem_init_hooks: the given hooks (copied),
 * counting says whether they hold no real memory (the meta backend). */
void tr_mem_init(tr_mem *m);
void tr_mem_init_hooks(tr_mem *m, const tr_mem_hooks *hooks, int counting);
/* Gives every block (in use or cached) back to the system. */
void tr_mem_destroy(tr_mem *m);

/* Name of a category ("parameters", "gradients", ...). */
const char *tr_mem_cat_name(tr_mem_cat cat);

/* Allocates n_bytes (0 allowed) zero-filled, 64-byte aligned, counted under
 * cat.  Returns NULL when out of memory or cat is not a category.  In
 * counting-only mode the block is a read-only range of zeros (see above). */
void *tr_mem_alloc(tr_mem *m, tr_mem_cat cat, size_t n_bytes);

/* tr_mem_alloc without the zero fill: the contents are unspecified (for a
 * workspace its user overwrites before reading it). */
void *tr_mem_alloc_raw(tr_mem *m, tr_mem_cat cat, size_t n_bytes);

/* The first allocation that failed since the last call (or since init):
 * 1 with its category and size, 0 when none did; clears the record. */
int tr_mem_take_failure(tr_mem *m, tr_mem_cat *cat, uint64_t *n_bytes);

/* Gives a block back to the cache; NULL is a no-op. */
void tr_mem_free(tr_mem *m, void *p);

/* A point in the sequence of allocations, and every block of category cat
 * handed out after it and still in use given back to the cache (the
 * workspaces of a step that failed half way); returns how many. */
uint64_t tr_mem_mark(tr_mem *m);
size_t tr_mem_free_since(tr_mem *m, tr_mem_cat cat, uint64_t mark);

/* Gives the cached (unused) blocks back to the system; returns the bytes
 * released.  Blocks in use are untouched. */
uint64_t tr_mem_empty_cache(tr_mem *m);

/* Records an allocation (n_bytes > 0) or a free (n_bytes < 0) of cat
 * without memory or caching: allocated, peak and n_allocs move, reserved
 * does not. */
void tr_mem_count(tr_mem *m, tr_mem_cat cat, int64_t n_bytes);

/* Starts a new high-water mark: peaks := the current values. */
void tr_mem_reset_peak(tr_mem *m);

/* Size class of a request (what is reserved for it), in bytes. */
size_t tr_mem_class_bytes(size_t n_bytes);

void tr_mem_get_stats(tr_mem *m, tr_mem_stats *s);

/* "12.3M" / "1.25G" style (binary units, B/K/M/G/T). */
void tr_mem_format_bytes(char *buf, size_t n, uint64_t bytes);

/* Writes "memory: X allocated | Y reserved | peak Z" (no newline) to buf. */
void tr_mem_format_line(char *buf, size_t n, const tr_mem_stats *s);

/* Writes the breakdown table (one row per category: now, peak of the
 * category, at the overall peak; then the totals, reserved and the system
 * allocation count) to f. */
void tr_mem_report(FILE *f, const tr_mem_stats *s);

#endif
