/*
 * test-rng.h - the tests' pseudo-random numbers (header only): xorshift64
 * (shifts 13, 7, 17) on a state the caller owns, so that each test keeps
 * its own seed and sequence.
 */
#ifndef SA1B_TEST_RNG_H
#define SA1B_TEST_RNG_H

#include <stdint.h>

static inline uint64_t trng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform-ish in [0, n); 0, without a step, when n is 0. */
static inline uint32_t trng_below(uint64_t *s, uint32_t n)
{
    return n ? (uint32_t)(trng_next(s) % n) : 0;
}

#endif
