/*
 * sa1b_rle.h - the COCO run-length codec, bit-exact with pycocotools'
 * maskApi.c, plus what pycocotools lacks: resampling straight from runs.
 *
 * A mask of h rows and w columns is a sequence of runs over its pixels in
 * column-major order (down the first column, then the second, ...),
 * alternating background and foreground and always starting with a
 * background run (possibly of length 0).  The runs sum to h*w.
 *
 * The compressed string ("counts" in COCO/SA-1B JSON) stores each run as a
 * signed LEB-like number in 5-bit groups: each character is 48 + group,
 * bit 0x20 of a group means "more groups follow", the last group's bit 0x10
 * is the sign; from the third run on (index > 2) the value stored is the
 * difference against the run two places before.
 *
 * Every function that can fail returns SA1B_OK or a code of sa1b_error.h and
 * fills err (may be NULL) with a message naming the problem and its position
 * (err->offset: character index in the string, or run index).  Sizes and
 * sums use 64-bit arithmetic; a mask may hold at most SA1B_RLE_MAX_PIXELS
 * pixels.
 */
#ifndef SA1B_RLE_H
#define SA1B_RLE_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest h*w accepted: runs are stored as uint32. */
#define SA1B_RLE_MAX_PIXELS UINT64_C(0xFFFFFFFF)

typedef struct sa1b_rle {
    uint32_t h, w;      /* mask rows and columns */
    size_t n;           /* number of runs */
    uint32_t *cnts;     /* [n] run lengths, column-major, first run background */
    size_t cap;         /* allocated capacity of cnts (library-managed) */
} sa1b_rle;

/* An empty rle (no storage).  sa1b_rle r = SA1B_RLE_INIT; */
#define SA1B_RLE_INIT {0, 0, 0, NULL, 0}

/* Frees r->cnts and resets *r to SA1B_RLE_INIT.  r may be NULL. */
void sa1b_rle_free(sa1b_rle *r);

/* Sets *r to an h x w mask with the given runs (copied).  Validates: h*w
 * within range, every run >= 0 (uint32), sum == h*w. */
int sa1b_rle_set_runs(sa1b_rle *r, uint32_t h, uint32_t w, const uint32_t *cnts, size_t n,
                      sa1b_error *err);

/* Parses a compressed counts string of len bytes (not necessarily
 * NUL-terminated) for an h x w mask into *r (reusing its storage).  Errors:
 * a character outside 48..111 (SA1B_EFORMAT, offset = its index), a string
 * that ends inside a continuation (SA1B_ETRUNC), a run that decodes negative
 * or beyond 32 bits (SA1B_ERANGE, offset = run index), a run sum != h*w
 * (SA1B_EMISMATCH: "run sum 2999999 != 1500x2000"), h*w too large
 * (SA1B_ERANGE).  Never reads past s[len-1].
 * Non-canonical encodings that pycocotools also reads (a value spread over
 * more groups than needed, up to 7) are accepted when the value fits;
 * zero-length runs are kept as they are.  On error *r is left empty
 * (h = w = n = 0), its storage kept for reuse. */
int sa1b_rle_from_string(sa1b_rle *r, uint32_t h, uint32_t w, const char *s, size_t len,
                         sa1b_error *err);

/* Writes the compressed string of r into a malloc'ed NUL-terminated buffer
 * (*out, length *len without the NUL).  The caller frees *out. */
int sa1b_rle_to_string(const sa1b_rle *r, char **out, size_t *len, sa1b_error *err);

/* Upper bound of the string length of any RLE with n runs (for callers that
 * bring their own buffer); sa1b_rle_to_buffer writes without allocating and
 * returns the length written (no NUL), or 0 if cap is too small.
 * The bound (7 n + 1) includes room for a terminating NUL, which
 * sa1b_rle_to_buffer writes whenever cap leaves room for it. */
size_t sa1b_rle_string_bound(size_t n);
size_t sa1b_rle_to_buffer(const sa1b_rle *r, char *buf, size_t cap);

/* Encodes an h x w mask (any nonzero byte is foreground) into *r.
 * col_major 0: mask[y*w + x]; 1: mask[x*h + y] (pycocotools' layout).
 * The runs are canonical, as pycocotools' rleEncode: only the first may be
 * 0; a 0-pixel mask gives the single run [0]. */
int sa1b_rle_encode(sa1b_rle *r, const uint8_t *mask, uint32_t h, uint32_t w, int col_major,
                    sa1b_error *err);

/* Decodes r into h*w bytes of 0/1 (layout as in sa1b_rle_encode).  r must
 * be valid (as the functions above leave it); even if it is not, no more
 * than h*w bytes are written. */
void sa1b_rle_decode(const sa1b_rle *r, uint8_t *mask, int col_major);

/* Foreground pixel count. */
uint64_t sa1b_rle_area(const sa1b_rle *r);

/* Bounding box [x, y, w, h] as pycocotools' rleToBbox (w = xmax - xmin + 1;
 * an empty mask gives [0, 0, 0, 0]), its quirks on zero-length runs
 * inside the list included; a mask with 0 rows gives zeros. */
void sa1b_rle_bbox(const sa1b_rle *r, double bbox[4]);
/* The SA-1B convention: width and height one less (xmax - xmin); an empty
 * mask gives [0, 0, 0, 0].  This is the tight box of the foreground pixels
 * (zero-length runs are ignored), as the bbox field of SA-1B files. */
void sa1b_rle_bbox_sa1b(const sa1b_rle *r, double bbox[4]);

/* IoU of dt against gt as pycocotools' rleIou: |dt & gt| / |dt | gt|, or
 * with iscrowd |dt & gt| / |dt|.  Sizes must agree (SA1B_EMISMATCH).  A zero
 * denominator gives 0 (so does an empty intersection).  Counts are exact
 * on any valid runs, zero-length ones included; runs that do not sum to
 * h*w give SA1B_EINVAL. */
int sa1b_rle_iou(const sa1b_rle *dt, const sa1b_rle *gt, int iscrowd, double *iou,
                 sa1b_error *err);

/* Union (intersect 0) or intersection (intersect 1) of n >= 1 masks of one
 * size, computed on the runs.  out may not alias an input.  As
 * pycocotools' rleMerge, n = 1 copies the runs as they are and n >= 2
 * gives canonical runs (see sa1b_rle_encode).  Errors: n = 0 or runs that
 * do not sum to h*w (SA1B_EINVAL), sizes that differ (SA1B_EMISMATCH),
 * both leaving out untouched; SA1B_ENOMEM leaves out empty. */
int sa1b_rle_merge(sa1b_rle *out, const sa1b_rle *const *in, size_t n, int intersect,
                   sa1b_error *err);

/* Resampling straight from runs to an rh x rw grid (row-major output),
 * never materialising the h x w mask.
 *
 * nearest: target cell (i, j) takes source pixel (y, x) with
 *   y = floor((2i + 1) * h / (2 rh)),  x = floor((2j + 1) * w / (2 rw))
 * (the pixel under the cell centre), bit-identical to a full decode followed
 * by that nearest resize.  out: rh*rw bytes of 0/1.
 * Costs O(runs + rh*rw) and allocates nothing.  rh or rw = 0 writes
 * nothing; a mask with no pixels and a non-empty target is SA1B_EINVAL;
 * runs that do not sum to h*w are SA1B_EINVAL.  Upsampling works too. */
int sa1b_rle_resample_nearest(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *out,
                              sa1b_error *err);

/* area: the exact foreground fraction f of each target cell (cell i spans
 * source rows [i h / rh, (i + 1) h / rh) as real intervals, likewise
 * columns).  coverage (may be NULL): round(255 f), ties up; mask01 (may be
 * NULL): 1 where f >= 0.5.  Exact integer arithmetic.
 * Costs O(runs + rh*rw) plus O(rh) scratch memory (SA1B_ENOMEM); the other
 * errors as sa1b_rle_resample_nearest. */
int sa1b_rle_resample_area(const sa1b_rle *r, uint32_t rh, uint32_t rw, uint8_t *coverage,
                           uint8_t *mask01, sa1b_error *err);

#ifdef __cplusplus
}
#endif
#endif
