/*
 * ycc_internal.h - YCbCr to RGB as JFIF defines it (libjpeg's integers),
 * for the letterbox's planar path in image.c; not part of the public API
 * (not installed, no sa1b_ prefix).  A portable C reference and an AVX2
 * kernel (chosen at run time) that gives the same bytes for every input;
 * tests/test-image.c compares them.
 */
#ifndef SA1B_YCC_INTERNAL_H
#define SA1B_YCC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

enum {
    YCC_AUTO = 0,     /* the fastest this CPU supports (what the library uses) */
    YCC_PORTABLE = 1, /* the portable C reference */
    YCC_AVX2 = 2      /* the AVX2 kernel; refused where the CPU or build lacks it */
};

/* 1 if this build and CPU can run impl. */
int ycc_rgb_supported(int impl);

/* n pixels: y[i], cb[i], cr[i] to rgb[3i .. 3i+2].  0, or -1 (nothing
 * written) where impl is not supported. */
int ycc_rgb_row(const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *rgb, size_t n,
                int impl);

#endif
