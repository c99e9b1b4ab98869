/*
 * tr_rng.h - the trainer's random numbers: the library's generator
 * (pipeline/rng.h: xoshiro256** seeded by splitmix64, stream 0) plus the
 * draws only the trainer needs (normal, truncated normal).  The state is
 * four words so that a checkpoint saves and restores it bit for bit.
 */
#ifndef SA1B_TRAINER_RNG_H
#define SA1B_TRAINER_RNG_H

#include <math.h>
#include <stdint.h>

#include "rng.h"

typedef sa1b_rng tr_rng;

static inline void tr_rng_seed(tr_rng *r, uint64_t seed) { rng_seed(r, seed, 0); }
static inline uint64_t tr_rng_u64(tr_rng *r) { return rng_next(r); }
/* Uniform in [0, 1) with 53 bits. */
static inline double tr_rng_uniform(tr_rng *r) { return rng_unit(r); }

/* Uniform integer in [0, n), n > 0 (scaled uniform; kept for the
 * synthetic batches' existing streams). */
static inline uint32_t tr_rng_below(tr_rng *r, uint32_t n)
{
    return (uint32_t)(tr_rng_uniform(r) * n);
}

/* Standard normal (Box-Muller, one value per call). */
static inline double tr_rng_normal(tr_rng *r)
{
    double u1 = tr_rng_uniform(r), u2 = tr_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Normal with std, redrawn until within +-2 std (truncated normal). */
static inline double tr_rng_trunc_normal(tr_rng *r, double std)
{
    for (;;) {
        double z = tr_rng_normal(r);
        if (z >= -2.0 && z <= 2.0) return z * std;
    }
}

#endif
