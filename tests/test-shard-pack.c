/*
 * test-shard-pack.c - sa1b_shard_pack_mask (AVX2 when the CPU has it, SSE2,
 * eight bytes at a time, one at a time for the rest) against the documented
 * order bit by bit: bit k of the row-major mask in byte k/8 at bit k%8,
 * any nonzero byte (1, 0x80, 0xFF, ...) a one, the padding up to the
 * stride zero, whatever the output held before; every R from 1 to 130 and
 * some large ones, random, empty and full masks.  Deterministic.
 */
#include "sa1b_shard.h"
#include "tap.h"
#include "test-rng.h"

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { return trng_below(&rs, n); }

int main(void)
{
    tap_plan(0);
    int bad = 0, cases = 0;
    static const uint8_t ones[] = {1, 2, 0x7F, 0x80, 0xFF, 0x10};
    for (uint32_t R = 1; R <= 1100; R += R < 130 ? 1 : 97) {
        size_t n = (size_t)R * R, stride = (size_t)sa1b_shard_mask_stride(R);
        uint8_t *m = malloc(n + 1), *out = malloc(stride), *ref = calloc(stride, 1);
        for (int kind = 0; kind < 4; kind++) {
            for (size_t i = 0; i < n; i++) {
                int on = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? rnd(2) : rnd(17) == 0;
                m[i] = on ? ones[rnd(sizeof ones)] : 0;
            }
            memset(ref, 0, stride);
            for (size_t i = 0; i < n; i++)
                if (m[i]) ref[i / 8] |= (uint8_t)(1u << (i % 8));
            memset(out, 0xA5, stride);
            sa1b_shard_pack_mask(m, R, out);
            bad += memcmp(out, ref, stride) != 0;
            cases++;
        }
        free(m);
        free(out);
        free(ref);
    }
    tap_ok(bad == 0, "sa1b_shard_pack_mask == bit by bit on %d masks (%d differ)", cases, bad);
    return tap_done();
}
