/*
 * bytes.h - byte counts as a person writes them on the command line
 * ("16G", "1.5GiB", "512M"), for the options that take a size (the memory
 * budget and limit).  Their printing is alloc.h's tr_mem_format_bytes.
 */
#ifndef SA1B_TRAINER_BYTES_H
#define SA1B_TRAINER_BYTES_H

#include <stdint.h>

/* Parses a byte count: digits with an optional fraction and a suffix
 * K, M, G, T (binary, optionally followed by "i" and/or "B") or none.
 * 0 with *out set, or -1 (*out untouched) on anything else or a count of
 * 1.8e19 bytes (nearly 2^64) or more. */
int tr_parse_bytes(const char *s, uint64_t *out);

#endif
