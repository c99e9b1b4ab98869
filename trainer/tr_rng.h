/*
 * rng.h - the trainer's deterministic random numbers (xoshiro256** seeded by
 * splitmix64): initialisation, synthetic batches.  The state is four words
 * so that it can be saved in a checkpoint and restored bit for bit.
 */
#ifndef SA1B_TRAINER_RNG_H
#define SA1B_TRAINER_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct tr_rng {
    uint64_t s[4];
} tr_rng;

static inline uint64_t tr_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void tr_rng_seed(tr_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = tr_splitmix64(&x);
}

static inline uint64_t tr_rng_u64(tr_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t res = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* Uniform in [0, 1) with 53 bits. */
static inline double tr_rng_uniform(tr_rng *r)
{
    return (double)(tr_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0. */
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
