/*
 * synthetic.h - deterministic synthetic batches, for tests, the PyTorch
 * comparison and --synthetic-batch: the generator, and a data source
 * (source.h) of its batches that makes the next on a thread of its own.
 */
#ifndef SA1B_TRAINER_SYNTHETIC_H
#define SA1B_TRAINER_SYNTHETIC_H

#include <stdint.h>

#include "common/alloc.h"
#include "batch.h"
#include "source.h"

/* Fills b deterministically from seed: images of coloured rectangles and
 * ellipses on a textured background, letterboxed with varied content sizes
 * (the first image always fills S x S), one mask per shape at R x R, point
 * prompts: the first point positive inside the mask, the others negative
 * outside it or padding (-1); when M > 1 the last pair of the last image is
 * invalid.  Masks and points agree with the image, so a model can learn. */
void tr_batch_synthetic(tr_batch *b, uint64_t seed);

/* A data source producing tr_batch_synthetic(seed + i) for i = 0, 1, ...
 * Two batches of mem: a thread of its own makes batch i + 1 while the
 * caller works on batch i (handed out until it asks for the next); its
 * wait_seconds is the time next() waited for that thread.  Its position is
 * (0, i), seek sets i; no identity (the same batches for a seed).  0, or
 * -1 when out of memory. */
int tr_synthetic_source_open(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R,
                             uint64_t seed);
/* The same for rank `rank` of `world` data-parallel processes: batch i is
 * rows [rank*B, (rank+1)*B) of tr_batch_synthetic(seed + i) over B*world
 * images, so that the ranks together see the batch one process of B*world
 * images would. */
int tr_synthetic_source_open_rank(tr_data_source *src, tr_mem *mem, int B, int M, int K, int S, int R,
                                  uint64_t seed, int rank, int world);

#endif
