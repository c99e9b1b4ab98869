/*
 * alloc.h - the trainer's one accounting allocator.  Every tensor of the
 * trainer (parameters, gradients, optimizer moments, activations, scratch
 * space, batch data) is allocated here, tagged with a category, so that the
 * program can print "allocated | peak" per category (PyTorch's
 * memory_allocated/max_memory_allocated) and the planner of issue 7 can
 * replay the same sequence on a counting backend.
 *
 * Blocks are 64-byte aligned and zero-filled.  A tr_mem is thread safe
 * (the loader's workers allocate batch buffers through it) once
 * tr_mem_init has run; tr_mem_destroy releases the lock.
 */
#ifndef SA1B_TRAINER_ALLOC_H
#define SA1B_TRAINER_ALLOC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tr_mem_cat {
    TR_MEM_PARAMS = 0, /* weights and buffers */
    TR_MEM_GRADS,      /* parameter gradients */
    TR_MEM_OPTIM,      /* optimizer moments */
    TR_MEM_ACTS,       /* activations and their gradients */
    TR_MEM_WORK,       /* short-lived scratch space */
    TR_MEM_DATA,       /* batches */
    TR_MEM_NCAT
} tr_mem_cat;

typedef struct tr_mem {
    uint64_t cur[TR_MEM_NCAT];  /* bytes allocated now, per category */
    uint64_t peak[TR_MEM_NCAT]; /* high-water mark per category */
    uint64_t total, total_peak; /* all categories together */
    uint64_t n_allocs;          /* number of successful allocations */
    int counting_only;          /* 1: count, hand out no memory (meta backend) */
    pthread_mutex_t mu;         /* guards the counters */
} tr_mem;

void tr_mem_init(tr_mem *m);
void tr_mem_destroy(tr_mem *m);

/* Name of a category ("parameters", "gradients", ...). */
const char *tr_mem_cat_name(tr_mem_cat cat);

/* Allocates n_bytes (0 allowed) zero-filled, 64-byte aligned, counted under
 * cat.  Returns NULL when out of memory (or always in counting-only mode,
 * where the bytes are still counted). */
void *tr_mem_alloc(tr_mem *m, tr_mem_cat cat, size_t n_bytes);

/* Gives a block back; NULL is a no-op. */
void tr_mem_free(tr_mem *m, void *p);

/* Counting-only mode: record an allocation / free of n_bytes without memory. */
void tr_mem_count(tr_mem *m, tr_mem_cat cat, int64_t n_bytes);

#endif
