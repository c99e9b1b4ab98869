/*
 * plan_source.h - the data source of the memory planner (train/plan.h):
 * batches of the run's geometry allocated up front and never written, so
 * that a planned run holds the data memory a real one does without making
 * any.
 */
#ifndef SA1B_TRAINER_PLAN_SOURCE_H
#define SA1B_TRAINER_PLAN_SOURCE_H

#include "common/alloc.h"
#include "source.h"

/* A data source for planning: n_buffers batches of the geometry allocated
 * on mem (category data) up front, as the loader holds its buffers in
 * flight, handed out in turn and never written; it never ends, waits, or
 * has a position or an identity.  packed: 0, each batch's arrays as
 * tr_batch_alloc allocates them (the synthetic source's); else each batch
 * one block of that many bytes (the loader's buffer,
 * sa1b_loader_batch_bytes_for).  0, or -1 (out of memory, n_buffers < 1). */
int tr_plan_source_open(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R, int n_buffers,
                        size_t packed);

#endif
