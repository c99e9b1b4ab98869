/*
 * crc32c_internal.h - CRC32C helpers of the library that are not part of
 * its public API (not installed, no sa1b_ prefix).
 */
#ifndef SA1B_CRC32C_INTERNAL_H
#define SA1B_CRC32C_INTERNAL_H

#include <stdint.h>

/* sa1b_crc32c(crc, zeros, n) for n zero bytes, without reading them: the
 * register times x^(8n) modulo the polynomial, in O(log n) steps (a few
 * microseconds whatever n).  Lets a writer checksum the zero padding of a
 * letterboxed image without touching it. */
uint32_t crc32c_zeros(uint32_t crc, uint64_t n);

#endif
