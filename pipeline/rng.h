/*
 * rng.h - the library's deterministic random numbers (internal, header only).
 *
 * xoshiro256** seeded through splitmix64, as published by Blackman and
 * Vigna; every random decision in libsa1b goes through a sa1b_rng owned by
 * the caller (no global state), seeded from (seed, stream) so that results
 * depend on the seed and on the item, never on thread scheduling.
 * Documented in man/sa1b-shard.1 so that users can re-implement selections.
 */
#ifndef SA1B_RNG_H
#define SA1B_RNG_H

#include <stdint.h>

typedef struct sa1b_rng { uint64_t s[4]; } sa1b_rng;

static inline uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* State from (seed, stream): splitmix64 started at seed ^ (stream * golden),
 * four outputs fill s[0..3]. */
static inline void rng_seed(sa1b_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * UINT64_C(0xD1B54A32D192ED03));
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(sa1b_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

/* Uniform integer in [0, n): the high 64 bits of next * n (n > 0). */
static inline uint64_t rng_below(sa1b_rng *r, uint64_t n)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)rng_next(r) * n) >> 64);
}

/* Uniform double in [0, 1) from the top 53 bits. */
static inline double rng_unit(sa1b_rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

#endif
