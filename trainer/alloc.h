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
    int counting_only;             /* 1: no real memory (meta backend); set before the first alloc */
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

void tr_mem_init(tr_mem *m);
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

/* Gives a block back to the cache; NULL is a no-op. */
void tr_mem_free(tr_mem *m, void *p);

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
