/*
 * image_internal.h - test and benchmark hooks of the area resize in image.c,
 * and the letterbox sa1b_prep_run uses; not part of the public API (not
 * installed, no sa1b_ prefix).
 *
 * The resize has a portable C path, which is the reference and is used on
 * every machine without a faster kernel, and SIMD kernels (AVX2 on x86-64,
 * AVX-512 where the CPU has VBMI and VNNI, chosen at run time) that must
 * produce exactly the same bytes for every input.  These hooks let tests run either path on the same input and
 * compare, and let benchmarks time them with a reused resizer (as the
 * letterbox does with its context) or one-shot (as sa1b_resize_area does).
 */
#ifndef SA1B_IMAGE_INTERNAL_H
#define SA1B_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"
#include "sa1b_image.h"

/* Which implementation image_resize runs. */
enum {
    IMAGE_RESIZE_AUTO = 0,     /* the fastest this CPU supports (what the library uses) */
    IMAGE_RESIZE_PORTABLE = 1, /* the portable C reference */
    IMAGE_RESIZE_AVX2 = 2,     /* the AVX2 kernels; SA1B_EINVAL if the CPU or build lacks them */
    IMAGE_RESIZE_AVX512 = 3    /* the AVX-512 vertical pass, and the horizontal one (VBMI,
                                  VNNI) where its windows fit, else AVX2's; likewise */
};

/* What a call did, row by row (for tests: whether the SIMD kernels ran). */
typedef struct image_resize_stats {
    uint64_t hrows_simd, hrows_portable;   /* source rows filtered horizontally */
    uint64_t hrows_avx512;                 /* of hrows_simd: by the AVX-512 kernel */
    uint64_t vrows_simd, vrows_portable;   /* destination rows combined vertically */
} image_resize_stats;

typedef struct image_resizer image_resizer;

/* Scratch space (taps, ring, SIMD plans) kept between calls; NULL on ENOMEM. */
image_resizer *image_resizer_new(void);
void image_resizer_free(image_resizer *r);   /* r may be NULL */

/* The resizes that follow on r take their source as a plane subsampled
 * up_x x up_y times from an image up_x times as wide and up_y times as
 * tall (a JPEG's chroma): each axis is reconstructed by linear
 * interpolation between the samples' centres (each in the middle of its
 * pixels; beyond the first and last centre that sample alone: libjpeg's
 * "fancy" triangle for 2, in exact arithmetic), then area-filtered to the
 * destination.  0 or 1: the plain area filter (what a new resizer does). */
void image_resizer_set_up(image_resizer *r, uint32_t up_x, uint32_t up_y);

/* 1 if this build and CPU can run impl. */
int image_resize_supported(int impl);

/* sa1b_resize_area with an explicit destination row stride (bytes,
 * >= dw * channels), implementation choice and optional statistics (added
 * to *st).  Same validation and errors as sa1b_resize_area. */
int image_resize(image_resizer *r, const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst,
                 size_t dst_stride, uint32_t dw, uint32_t dh, int channels, int impl,
                 image_resize_stats *st, sa1b_error *err);

/* sa1b_jpeg_letterbox into a canvas the caller reuses, and its checksum.
 * *zero_from (in and out): rows of out from this one on are known to be
 * zero (S or more: nothing known); the call zeroes only the padding rows
 * above it and leaves it at the image's new_h (S after an error, when rows
 * may hold anything).  With crc non-NULL, *crc = sa1b_crc32c(0, out,
 * S * S * 3): the image's rows are checksummed in bands as the resize
 * writes them (still in the L1 cache), the rows below them without being
 * read (crc32c_zeros).  The bytes of out are those of sa1b_jpeg_letterbox. */
int image_letterbox(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S, uint8_t *out,
                    uint32_t *zero_from, sa1b_letterbox *lb, uint32_t *crc, sa1b_error *err);

#endif
