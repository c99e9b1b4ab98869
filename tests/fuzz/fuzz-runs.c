/*
 * fuzz-runs.c - libFuzzer target on the run decoder of version-2 shard
 * masks (sa1b-shard(5)).  The first byte picks R (1..64), the rest are the
 * mask's stored bytes.  Whatever they are: sa1b_shard_parse_runs and the
 * streaming decoder agree on accepting them; when accepted, the decoded
 * mask has as many cells set as the odd runs say, and coding it again
 * gives back exactly the input (the coding is canonical: one byte string
 * per mask).  The reader's path over runs inside a shard (offsets, CRC,
 * sa1b_shard_verify_image, sa1b_shard_decode_mask) is fuzzed by
 * fuzz-shard.c, whose corpus holds version-2 shards.
 */
#include "sa1b_shard.h"
#include "shard_format.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint32_t R = 1u + data[0] % 64u;
    const uint8_t *runs = data + 1;
    const size_t len = size - 1, RR = (size_t)R * R;
    uint8_t *mask = malloc(RR), *again = malloc((size_t)sa1b_shard_runs_bound(R));
    uint32_t *v = malloc((len ? len : 1) * sizeof *v);
    if (!mask || !again || !v) abort();
    sa1b_error e1, e2;
    size_t n = 0;
    int a = sa1b_shard_parse_runs(runs, len, R, v, len, &n, &e1);
    int b = shard_runs_decode(runs, len, R, mask, &e2);
    if ((a == SA1B_OK) != (b == SA1B_OK)) abort();
    if (strlen(e1.msg) >= sizeof e1.msg) abort();
    if (a == SA1B_OK) {
        uint64_t want = 0, got = 0;
        for (size_t i = 1; i < n; i += 2) want += v[i];
        for (size_t i = 0; i < RR; i++) got += mask[i];
        if (got != want) abort();
        size_t m = sa1b_shard_encode_runs(mask, R, again);
        if (m != len || memcmp(again, runs, len) != 0) abort();
    } else {
        for (size_t i = 0; i < RR; i++)
            if (mask[i]) abort(); /* a rejected mask decodes to zeros */
    }
    free(mask);
    free(again);
    free(v);
    return 0;
}
